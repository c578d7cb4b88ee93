/*
** search_walk.h -- what the search's walk (search.c) and its pool of pricing threads
** (search_pool.c) share: the walker, the chunks it hands out (slots), the sub-tree walk's
** state (tree) and a pricing thread's scratch. Private to the core.
*/
#ifndef NDPLAN_SEARCH_WALK_H
#define NDPLAN_SEARCH_WALK_H

#include <pthread.h>
#include <stdatomic.h>

#include "ndplan/recompute.h"
#include "ndplan/search.h"
#include "search_bound.h"

/* Chunks between a cut's delivery and the walk applying it: at least the slots in flight,
   so the walk sees the same cuts at every -j (and prunes the same candidates). 8 chunks of
   1,024 places (nd_search_run) are as many places as 16 of 512 were, and price about as
   many candidates (DeepSeek-V3 on 2,048 H800, auto: 7,370 against 7,377; with three
   recipes and HSDP 16,594 against 16,853; Llama-3.1-405B on 16,384 H100 4,908 against
   4,925; -j 1 times the same) in half the chunks: each window a lane walks costs it and
   the caller a few lines read from the other's processor (some 400 ns each in a VM), where
   a window of 512 places was some 5 us of pricing (-j 2 with three recipes and HSDP:
   0.213-0.217 -> 0.196-0.197 s). */
#define CUT_LAG 8

/* A chunk (a lane's window) spans `chunk` places of the walk, or first / WINDOW_GROWTH
   places if more (first: the walk index of its first entry): late in a walk the cuts have
   settled, and a cut CUT_LAG chunks late is then as late, relative to where it is, as it was
   early. Windows of 1,024 places were some 4 nodes and 5 us of pricing each where the walk
   is wide (DeepSeek-V3 on 2,048 H800 with three recipes and HSDP: 51,000 windows in 52 M
   places), so the lanes met far more often than they priced; now some 5,000. On that search
   (best of 7, twice): -j 2 0.184 -> 0.160 s, -j 1 0.282 s either way, priced 17,012 ->
   17,232; auto -j 2 0.059 -> 0.058 s. index / 256 priced 17,916 (-j 1 3% slower) for no
   more at -j 2; a fixed 4,096 places slowed Llama-3.1-405B's -j 1 by a third. */
#define WINDOW_GROWTH 1024

/* Values one loop can take: more than any 32-bit number has divisors (1536). */
#define LOOP_MAX 1600

/* Lanes at most (search_lanes.c): more threads share the pool. */
#define LANES_MAX 64

/* A slot's life: filled by the walk, taken by a thread that walks its entries, done, then
   delivered (free again). With an admit hook (nd_walk_admits) a thread's walk checks and
   bounds each candidate and keeps those left for the hook (checked); the walk runs the hook
   over them, in the order the slots were filled (admitted); a thread prices what the hook
   kept (taken again), and the slot is done. */
enum { SLOT_FREE = 0, SLOT_FILLED, SLOT_TAKEN, SLOT_CHECKED, SLOT_ADMITTED, SLOT_DONE };

/* What the walk hands a worker for each candidate (slot.flag): what is left to do
   (CAND_KIND bits), and what the walk found its lower bounds to say (CAND_BOUND bits: 0
   not evaluated; else price it, or prune it by time or by memory once the checks keep it). */
enum { CAND_UNCHECKED = 0, CAND_EQUIVALENT, CAND_READY, CAND_NODE, CAND_KIND = 3,
       CAND_PRICE = 4, CAND_PRUNE_TIME = 8, CAND_PRUNE_MEMORY = 12, CAND_BOUND = 12 };
/* A CAND_NODE entry stands for every candidate of one (recompute, tp, pp, cp, mbs, ep, etp)
   (its sub-tree, walked by the worker: walk_node), from its index on; its other bits: */
enum { NODE_SAME = 4, NODE_LONE = 8 };  /* walk_tail's same_as_none and lone */

/* Verdicts of the lower bounds tail_sp keeps for one SP value's candidates (recipes x ZeRO
   stages x shard groups; a larger tail is emitted with none). */
#define VERDICTS 4096

/* Rows a block holds. A slot owns one block; a chunk that prices more takes the walk's
   spare ones (nd_pool_row) and gives them back when delivered, so the rows held are about
   those in flight: most chunks price a row or two (DeepSeek-V3 on 2,048 devices: 17,150
   rows in 11,987 chunks), a few a node's hundreds, and rows grown per slot reached 512 to
   1,024 in each of 16 slots (about 4.4 MB, each page a fault, dearer on a second thread). */
#define ROW_BLOCK 32

typedef struct row_block {
  struct row_block *next;
  nd_search_row rows[ROW_BLOCK];
} row_block;

typedef struct slot {
  _Atomic int state;                   /* SLOT_*: set by the thread done with a phase */
  int n;
  int phase;                           /* taken to walk its entries (0), or to price what the
                                          hook admitted of them (1) */
  nd_candidate *cand;
  unsigned long long *index;
  unsigned char *flag;                 /* CAND_*: what is left to do before pricing */
  row_block *rows, *last;              /* its priced rows: the first block (the slot's own)
                                          and the one being filled */
  int priced;                          /* rows in the blocks from rows on */
  double time_cut, over_cut;           /* the walk's cuts when it filled the slot */
  unsigned long long late[ND_REFUSE_COUNT];  /* refused by the worker (checks, planners) */
  unsigned long long equivalent, pruned_time, pruned_memory, skipped_time, skipped_memory;
  nd_candidate *pend;                  /* for the admit hook: candidates checked and not */
  unsigned long long *pend_index;      /* pruned, with their walk indices, pend[0..npend) */
  int npend, pend_cap;
} slot;

/* A counter alone on its cache line: the threads that write one do not slow the others'. */
typedef union pool_counter {
  _Atomic unsigned long long v;
  char line[64];
} pool_counter;

/* A counter's value (sequentially consistent, as the sleeps need; on x86 a load is a plain
   move anyway). */
static inline unsigned long long nd_pool_count (pool_counter *c) {
  return atomic_load(&c->v);
}

/* A spin's breath: the processor told this thread waits. */
static inline void nd_pool_pause (void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* The pool's counts of chunks (sequence numbers from 0), without a lock: the walk alone
   fills and runs the hook, a thread takes a chunk by raising taken or priced (see
   search_pool.c). idle and waiting say who may be asleep, to be woken. */
typedef struct pool_counts {
  pool_counter filled;                 /* chunks the walk filled (it alone writes) */
  pool_counter taken;                  /* of those, taken to walk (phase 0) */
  pool_counter admitted;               /* with an admit hook: chunks it ran over (the walk) */
  pool_counter priced;                 /* of those, taken to price (phase 1) */
  _Atomic int idle;                    /* workers asleep on work_cv, or about to be */
  _Atomic int waiting;                 /* the walk asleep on done_cv, or about to be */
  _Atomic int quit;
  char apart[64];                      /* the walk's own fields after: not on these lines */
} pool_counts;

/* The innermost loops' values at one (tp, dp): shape_of. */
typedef struct tail_shape {
  int rcv[ND_RECIPE_COUNT], nrc;       /* recipes */
  const int *zv;                       /* ZeRO stages */
  int nz, zmax, zok;                   /* zok: each within 0-3, and not too many pairs */
  int hv[LOOP_MAX], nh, full;          /* shard groups (shard_groups) */
  int walked[2];                       /* SP values */
  int n;                               /* (ZeRO, shard group) pairs walked: */
  int tz[VERDICTS], th[VERDICTS], tat[VERDICTS];  /* ZeRO, group index, verdict index */
  int tg[VERDICTS];                    /* the group (base's resolved), per representative */
  double tt[VERDICTS], tm[VERDICTS];   /* their bounds */
  unsigned long long per;              /* candidates of one SP value in a tail */
} tail_shape;

/* One VPP value walked at a pp, with its layout variants and subtree's verdicts. */
typedef struct vpp_entry {
  int vpp, n, layout[ND_VARIANT_COUNT];  /* its layout variants */
  int state[2], code[2];               /* subtree's TAIL_* by SP value (at one etp) */
} vpp_entry;

/*
** What one thread needs to walk sub-trees: the walk's own (the VPP values and tail shapes
** it counts nodes by; every candidate, when it emits them one by one) and each pricing
** thread's (the nodes it walks: their checks and bounds against its slot's cuts).
*/
typedef struct tree {
  struct worker_scratch *ws;           /* a pricing thread's (NULL: the walk's) */
  slot *s;                             /* the slot whose node it walks: counts and rows */
  double time_cut, over_cut;           /* that slot's cuts */
  unsigned long long next;             /* the walk index of the node's next candidate */
  nd_strategy rep;                     /* representatives (check_sp) */
  nd_strategy lay[ND_VARIANT_COUNT];   /* the layout variants of one (pp, vpp) */
  int pp, nv;                          /* vpps: the VPP values walked at pp */
  vpp_entry vpps[LOOP_MAX];
  tail_shape shape;                    /* of the tails at one (tp, dp) */
  int shape_tp, shape_dp;              /* which (0: none yet) */
  unsigned char verdict[2][VERDICTS];  /* tail_sp's, by SP value (CAND_BOUND bits) */
  int sv[LOOP_MAX];                    /* subtree's VPP values */
  double st_t[LOOP_MAX];               /* and their time bounds */
  unsigned mem_now, mem_at[VERDICTS];  /* subtree's pair_mem: shape.tm[i] is of this recipe's
                                          spread when mem_at[i] == mem_now */
} tree;

/*
** Lanes (search_lanes.c): at -j 2 and up, when the pricing threads walk sub-trees and no
** admit hook runs between check and price, each of the n threads walks the whole loop nest
** itself and walks the nodes of its own lane (lane_of: by the degrees a group of layer
** prices is keyed by, so no two threads price or read one group; each keeps its own bound
** caches). The nodes form windows as the pool's chunks would (the same rule, counted by
** every thread); a window's parts, one per lane, are delivered together by the calling
** thread, their rows merged in walk order, so the rows, the cuts and every count are the
** pool's at any -j. What the threads share: a mark per part (who walks it, and whether it
** is walked), the windows delivered, the cuts, and the none pass's fits. A lane that would
** wait for the others walks a part of theirs it walked past and no one began (steal).
*/
/* Who walks a lane's part of a window (search_lanes.c): its own lane, or a lane that ran
   CUT_LAG windows ahead and would wait (steal); and whether it is walked. One line each:
   the caller reads them while the lanes write. */
typedef struct part_mark {
  _Atomic unsigned long long claim;    /* window * 4 + PART_* */
  _Atomic unsigned long long finished; /* window + 1 once its nodes are walked */
  char pad[64 - 2 * sizeof(unsigned long long)];
} part_mark;
enum { PART_OPEN = 0, PART_OWNED = 1, PART_STOLEN = 2 };

/* A node of another lane's part, kept by a lane that walked past it (a stolen part is
   walked from these). */
typedef struct seen_node {
  nd_candidate c;
  unsigned long long index;
  unsigned char flag, lane;
} seen_node;

typedef struct lanes {
  int n;                               /* the lanes: the -j threads (lane 0 the caller's) */
  struct walker **lane;                /* each lane's walker (lane[0]: the caller's own) */
  slot *ring;                          /* lane l's part of window k: ring[l*CUT_LAG + k%CUT_LAG] */
  slot **parts;                        /* one window's parts, for its delivery */
  row_block *stage;                    /* a window's rows merged, a block at a time */
  part_mark *mark;                     /* each ring slot's: ring's order */
  pool_counter delivered;              /* windows delivered (the caller alone writes) */
  _Atomic int halt;                    /* why a thread stopped the walk (ND_SEARCH_*; 0: none) */
  _Atomic int quit;                    /* the caller is done: every thread stops */
  _Atomic int idle, waiting;           /* workers asleep on work_cv; the caller on done_cv */
  pthread_mutex_t mu;
  pthread_cond_t work_cv, done_cv;
  pthread_t *tids;
  int started;                         /* threads started (lanes 1 .. started) */
} lanes;

typedef struct walker {
  const nd_search_params *p;
  const nd_model_spec *m;
  const nd_device *dev;
  const nd_job *job;
  const nd_costs *costs;
  const nd_search_hooks *hooks;
  nd_search_counts *counts;
  nd_search_bounds b;
  char apart[64];                      /* what the workers read above, what the walk writes
                                          below: not on one cache line */
  nd_strategy scratch;                 /* for the checks of the walk */
  tree tree;                           /* the walk's */
  int zv[LOOP_MAX], nz;                /* the ZeRO stages walked */
  struct worker_scratch *inline_scratch;  /* pricing on the walking thread */
  int chunk, nslots, threads;
  slot *slots;
  char apart_pool[64];                 /* what the workers read above, the counts below */
  pool_counts pc;                      /* chunk sequence numbers, shared by the threads */
  unsigned long long delivered;        /* chunks delivered (the walk's own) */
  int admits;                          /* an admit hook, run by the walk over checked slots */
  int status;                          /* ND_SEARCH_OK or why the walk stops */
  nd_bound_cache *bound_cache[ND_RECIPE_COUNT];  /* their layer prices, every thread's */
  row_block *spare;                    /* row blocks no slot holds (the pool's lock) */
  double time_cut, over_cut;           /* the cuts the walk applies now */
  double first_time_cut, first_over_cut;  /* the caller's before any row (nd_search_hooks.cuts) */
  double cut_time[CUT_LAG], cut_over[CUT_LAG];  /* after delivered chunk k: [k % CUT_LAG] */
  /* the none pass's fits, for the per-layer pass of an automatic recompute (twin_fit()) */
  int twin;                            /* TWIN_* */
  unsigned long long *fits;            /* the none candidates that fit with margin: their
                                          places in the pass, ascending (rows come in walk
                                          order), a few thousand where a bit per place took
                                          1 MiB (DeepSeek-V3 on 2,048 H800, auto) */
  unsigned long long nfits, fits_cap;  /* entries in fits, and room */
  unsigned long long none_start, none_len;  /* tested indices of the none pass */
  unsigned long long none_tp[LOOP_MAX];     /* where each TP starts in it, from none_start */
  /* the per-layer pass's TP segments (the walk after the first pass: TP by TP): segment k
     starts at walk index pl_start[k] and its twins at none_tp offset pl_twin[k]; the walk
     writes an entry, then raises pl_segs (release), before emitting any of its candidates */
  unsigned long long pl_start[LOOP_MAX], pl_twin[LOOP_MAX];
  _Atomic int pl_segs;
  int fits_lost;                       /* the fits could not be kept: no shortcut */
  int tail;                            /* nodes: the pricing threads walk each sub-tree
                                          (not exhaustive, no admit hook) */
  lanes *ln;                           /* the lanes (NULL: the pool prices chunks) */
  int lane;                            /* this walker's lane */
  unsigned long long win;              /* windows it began and finished */
  int win_n;                           /* nodes in its current window (0: none begun) */
  unsigned long long win_first;        /* the walk index of the window's first node */
  slot *win_slot;                      /* its part of the current window (NULL: stolen) */
  seen_node *seen[CUT_LAG];            /* the other lanes' nodes of window k (k % CUT_LAG), */
  int nseen[CUT_LAG], seen_cap[CUT_LAG];  /* for the last CUT_LAG windows (-1: not all kept) */
  nd_search_counts own_counts;         /* a lane thread's walk indices (counts: these) */
  pthread_mutex_t mu;                  /* the pool's sleep and the spare rows' (pool:
                                          initialised) */
  pthread_cond_t work_cv, done_cv;
  pthread_t *tids;
  int pool, started;                   /* workers started, of threads */
  int spin;                            /* looks for work before a sleep (search_pool.c) */
} walker;

/* The places of the walk a chunk (or window) whose first entry is at walk index first
   spans (WINDOW_GROWTH). */
static inline unsigned long long nd_walk_span (const walker *w, unsigned long long first) {
  unsigned long long grown = first / WINDOW_GROWTH;
  return grown > (unsigned long long)w->chunk ? grown : (unsigned long long)w->chunk;
}

/* What one pricing thread keeps: its own scratch, so the threads price concurrently. */
typedef struct worker_scratch {
  nd_strategy st;          /* pricing (its plan, when priced with one: plan or mc below) */
  nd_strategy chk;         /* the walk's checks */
  nd_estimate e;
  nd_recompute_plan plan;  /* the per-layer planner's choice (its plan st reads) */
  nd_megatron_choice mc;   /* the Megatron choice (a block form's plan st reads) */
  nd_recompute_ws *rws;    /* the per-layer planner's tables, kept between candidates */
  nd_megatron_ws *mws;     /* the Megatron choice's tables, likewise */
  nd_price_cache *pc;      /* layer-kind prices shared by the candidates it prices */
  nd_bound *bound[ND_RECIPE_COUNT];  /* the lower bounds by recipe, with their caches
                                       (NULL: none; the layer prices depend on the recipe) */
  tree tree;               /* the nodes it walks */
} worker_scratch;

/* ---- the walk's, for the pool (search.c) ---------------------------------------- */

/* A pricing thread's scratch (NULL: no memory), and its release. */
worker_scratch *nd_walk_new_scratch (const walker *w);
void nd_walk_free_scratch (worker_scratch *ws);
/* Entry i of slot s (a node's sub-tree or one candidate), priced into s (with an admit
   hook: checked, and kept in s's pending list for it). 0, or -1 to stop. */
int nd_walk_price_entry (walker *w, slot *s, worker_scratch *ws, int i);
/* The admit hook over slot s's pending candidates (the walk's thread): those it keeps stay
   pending, the rest are counted filtered. 0, or -1 (the hook failed: w->status says). */
int nd_walk_admit (walker *w, slot *s);
/* Slot s's pending candidates priced into it. 0, or -1 to stop. */
int nd_walk_price_pending (walker *w, slot *s, worker_scratch *ws);
/* Hands a priced chunk to the caller (the calling thread) and frees its slot. */
void nd_walk_deliver (walker *w, slot *s);
/* Hands one window's n parts (one per lane) to the caller, their rows merged in walk order
   through stage; the parts keep their rows (each lane frees its own). */
void nd_walk_deliver_window (walker *w, slot *const *parts, int n, row_block *stage);
/* The node c (its walk index and CAND_NODE flags) walked into slot s on scratch ws. 0, or
   -1 to stop. */
int nd_walk_node (walker *w, slot *s, worker_scratch *ws, const nd_candidate *c,
                  unsigned long long index, int flag);
/* A lane thread's walk, on its own walker (a copy of the caller's): its bound caches and
   scratch, the whole walk, its last window finished. */
void nd_walk_lane (walker *me);

/* ---- the pool's, for the walk (search_pool.c) ------------------------------------ */

/* The slots (w->nslots of w->chunk entries) and, at -j 2 and up, the workers: ND_SEARCH_OK,
   or ND_SEARCH_NO_MEMORY (nothing left to free). */
int nd_pool_open (walker *w);
/* The workers stopped and joined, the slots freed. */
void nd_pool_close (walker *w);
/* The slot the walk fills (the one after the last submitted). */
slot *nd_pool_current (walker *w);
/* Hands the filled slot to the pricing threads (-j 1: prices and delivers it). */
void nd_pool_submit (walker *w);
/* The next row of slot s to price into (a block more when its last is full), or NULL: no
   memory. */
nd_search_row *nd_pool_row (walker *w, slot *s);
/* Slot s emptied for another chunk (or window part): its rows gone, no counts. */
void nd_pool_slot_empty (walker *w, slot *s);
/* Slot s's rows gone: its blocks after the first back to the spare ones. */
void nd_pool_rows_done (walker *w, slot *s);
/* Submits the partial chunk and delivers what is in flight (in order), or just waits for it
   when stopping. */
void nd_pool_drain (walker *w);
/* A list of row blocks freed. */
void nd_pool_free_rows (row_block *b);

/* ---- the lanes' (search_lanes.c) ------------------------------------------------- */

/* Whether walker w's search runs in lanes: its threads walk sub-trees, no admit hook. */
int nd_lanes_apply (const walker *w);
/* The lanes and their threads (w->threads of them), each walking its own copy of w:
   ND_SEARCH_OK, or ND_SEARCH_NO_MEMORY (nothing started). */
int nd_lanes_open (walker *w);
/* Node c (walk index `index`, its candidates counted in w's walk, CAND_NODE flags) at its
   place in w's walk: walked when it is w's lane's, counted in the window either way. */
void nd_lanes_node (walker *w, const nd_candidate *c, unsigned long long index, int flag);
/* The current window finished; then, on the caller, every window delivered, on a lane
   thread, waits until they are (none of it when stopping). */
void nd_lanes_drain (walker *w);
/* The lane threads stopped and joined, their walkers and the windows freed. */
void nd_lanes_close (walker *w);

#endif
