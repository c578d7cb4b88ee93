/*
** ndplan/search.h -- the N-dimensional strategy space: per-dimension candidate sets, the
** bounds stated once before the loops, the loop nest in a fixed order, refusal labels with
** counts, and pricing of what survives on a pool of threads, delivered back in the order
** of the walk so that the result does not depend on the number of threads.
**
** Loop nest (outermost first): the first recompute value walked over every TP, then TP by
** TP the other values (a candidate's index says its place in that order); under each
** (recompute, TP): PP, CP (DP = devices / (TP*PP*CP)), MBS
** (over the divisors of GBS / (PP*DP); MB = GBS / DP / MBS), EP, ETP, VPP (a range
** 1..(layers+2)/PP: every chunk holds a layer, embedding and loss counted), the layout variant (ND_VARIANT_*: the even
** split only, unless the layers do not divide into PP*VPP equal chunks), the precision
** recipe (nd_search_params.precision), ZeRO, HSDP's shard group (nd_search_params.dp_shard,
** .dp_replicate:
** at ZeRO 0 only all of DP, as nothing is sharded), SP. Each loop runs over its candidate set in ascending
** order, cut by its bound. Memory does not grow with the space: candidates are walked,
** priced and handed to the caller chunk by chunk. The calling thread enumerates the degrees
** down to ETP and hands each sub-tree below them to the pricing threads, which check one
** representative per SP value (a shared refusal counts for all of its candidates:
** nd_refusal_shared), skip the sub-trees whose lower bounds all prune (search_bound.c, the
** caller's cuts), check each candidate left (nd_strategy_check), skip what its bounds
** prune, and price the rest. (With an admit hook or exhaustive: each candidate is handed
** over one by one.)
*/
#ifndef NDPLAN_SEARCH_H
#define NDPLAN_SEARCH_H

#include <signal.h>
#include <stddef.h>

#include "ndplan/estimate.h"

/* The dimensions, in the order the tables print them. */
typedef enum nd_dim {
  ND_DIM_DP = 0, ND_DIM_TP, ND_DIM_PP, ND_DIM_VPP, ND_DIM_CP, ND_DIM_EP, ND_DIM_ETP,
  ND_DIM_SP, ND_DIM_ZERO, ND_DIM_MB, ND_DIM_MBS, ND_DIM_RECOMPUTE, ND_DIM_COUNT
} nd_dim;

#define ND_SET_MAX 64   /* values in one candidate list */

/* The recompute dimension's values: the nd_recompute modes, then a per-layer plan chosen
   under the budget (nd_recompute_plan_run), then the fastest recompute Megatron-LM can
   state under the budget (nd_recompute_megatron_run); "auto" searches the first four. */
#define ND_SEARCH_PER_LAYER ND_RECOMPUTE_COUNT
#define ND_SEARCH_MEGATRON (ND_RECOMPUTE_COUNT + 1)
/* The modes a per-layer plan of the walk chooses from (ND_RECOMPUTE_MASK bits: none,
   selective, full); re-pricing a row (results:detail) passes the same set. */
#define ND_SEARCH_PLAN_MODES ((1u << ND_RECOMPUTE_NONE) | (1u << ND_RECOMPUTE_SELECTIVE) \
                              | (1u << ND_RECOMPUTE_FULL))
const char *nd_search_recompute_name (int v);   /* "none" ... "full", "per_layer", "megatron" */
int nd_search_recompute_parse (const char *name, int *v);

/* One dimension's candidates: auto (the searcher's bounds) or an explicit ascending list
   (one value = pinned). DP and MB are derived by the loops; their lists post-filter. */
typedef struct nd_dim_set {
  int is_auto;
  int n;
  int v[ND_SET_MAX];
} nd_dim_set;

/* Why a candidate was not kept: nd_refusal (ndplan/strategy.h), labels nd_refusal_label. */

/* One point of the space, compact (the full nd_strategy is rebuilt from it to price). */
typedef struct nd_candidate {
  int dp, tp, pp, vpp, cp, ep, etp, mbs, mb;
  unsigned char sp, zero, recompute;
  unsigned char layout;       /* ND_VARIANT_* of the pipeline layout */
  unsigned char precision;    /* nd_recipe_id of the training recipe */
  int dp_shard;               /* the ZeRO shard group (HSDP); 0: base's (in a row: resolved) */
} nd_candidate;

#define ND_SEARCH_MEM_PARTS 7  /* memory parts of a row (nd_search_row.mem) */

/* The summary of one priced candidate: what results.csv and the ranking need. */
typedef struct nd_search_row {
  unsigned long long index;   /* position in the walk (0-based over tested candidates) */
  nd_candidate c;             /* as resolved (sp is off when tp is 1) */
  int heaviest, stages, fits;
  double step_time, tokens_per_s, mfu, hfu, peak, over;
  double mem[ND_SEARCH_MEM_PARTS];  /* heaviest stage: weights, grads, optimizer,
                                       activations, buffers, the allocator's slack
                                       (reserved - allocated), reserve (bytes): they add
                                       up to peak */
  double time_parts[ND_T_COUNT];
  double key;                 /* the objective (lower is better); set by the caller */
} nd_search_row;

/* The bounds the walk states before its loops. */
typedef struct nd_search_bounds {
  int tp, pp, cp, ep, etp, vpp, mbs;
  int layers;                 /* body layers the pipeline splits */
} nd_search_bounds;

/* tested = refused + priced + equivalent + pruned_time + skipped_time + skipped_memory,
   where over-memory candidates that were priced count in both refused and priced */
typedef struct nd_search_counts {
  unsigned long long tested, priced, fit;
  unsigned long long refused[ND_REFUSE_COUNT];
  unsigned long long equivalent;  /* valid, but the same run as a candidate walked before it
                                     (ZeRO 1-2 beside a lower stage with nothing to shard;
                                     selective beside none when it keeps what none keeps):
                                     not priced, as its twin was priced (or refused) */
  unsigned long long pruned_time;   /* valid, not priced: its step-time bound is over the
                                       caller's cut (it cannot enter the ranking) */
  unsigned long long pruned_memory; /* not priced: its memory bound is over the budget (a
                                       per-layer plan that cannot fit, or a miss further over
                                       than the caller's cut); also counted "over memory" */
  unsigned long long skipped_time;  /* not checked nor priced: walked in a sub-tree (the
                                       precision, ZeRO, shard-group and SP loops of one set
                                       of outer degrees) every candidate of which would be
                                       pruned, at least one by the step-time bound; valid or
                                       not (their refusal labels are not counted) */
  unsigned long long skipped_memory;  /* the same, every one pruned by the memory bound
                                         (a sub-tree over the time cut at every VPP counts
                                         by time, whatever its memory) */
} nd_search_counts;

/*
** Hooks the caller may give; all are called on the calling thread only. NULL = absent,
** the fast path. Each returns 0 to go on, -1 to stop the search (an error of the caller).
**   admit(ud, candidate, &keep): keep = 0 refuses it as "filtered out" before pricing.
**   deliver(ud, rows, n): priced rows, in walk order (a chunk's in one call or more).
**   progress(ud, counts): after each delivered chunk.
*/
typedef struct nd_search_hooks {
  int (*admit)(void *ud, const nd_candidate *c, int *keep);
  int (*deliver)(void *ud, nd_search_row *rows, int n);
  int (*progress)(void *ud, const nd_search_counts *counts);
  void *ud;
  int price_equivalent;  /* non-zero: price equivalent candidates too (a policy's objective
                            may tell them apart); admit implies it */
  /* cuts(ud, &time_cut, &over_cut), after each delivered chunk: a candidate whose step-time
     bound is over time_cut, or whose memory bound is over the budget by more than over_cut
     (whole-model recompute), is not priced (counted pruned). +HUGE_VAL: none. Cuts may only
     fall as rows arrive; the walk applies each one a fixed number of chunks later, so what
     it prunes does not depend on the threads. NULL: no cuts (a per-layer plan whose memory
     bound is over the budget is still not priced: it could not fit). */
  void (*cuts)(void *ud, double *time_cut, double *over_cut);
} nd_search_hooks;

typedef struct nd_search_params {
  nd_dim_set dim[ND_DIM_COUNT];
  nd_strategy base;           /* schedule, precision, flash attention: copied to each */
  nd_dim_set precision;       /* recipes walked (nd_recipe_id, ascending); n = 0: base's */
  nd_dim_set dp_shard;        /* shard groups walked: auto = the divisors of each DP, a list
                                 = the listed values that divide it; not auto and n = 0:
                                 base's (all of DP unless base says otherwise) */
  nd_dim_set dp_replicate;    /* HSDP's replica counts walked (torchtitan's dp_replicate):
                                 each value R dividing DP walks the shard group DP / R;
                                 with dp_shard also set, the pairs both sets allow; auto:
                                 as dp_shard's auto; not auto and n = 0: not walked */
  double budget;              /* bytes per device a stage may use */
  int jobs;                   /* pricing threads (1: inline, no thread) */
  int lanes;                  /* how they share the walk: 0 in lanes for a model that
                                 routes experts when each thread has a processor, else the
                                 pool; 1 in lanes wherever they apply; -1 the pool (the
                                 same rows and counts either way); ND_LANES_LEAVE (tests)
                                 in lanes, the threads but the caller's leaving each part
                                 of theirs to be stolen */
  int chunk;                  /* candidates per chunk (0: a default) */
  volatile sig_atomic_t *stop;/* set non-zero (e.g. by SIGINT) to stop within a chunk */
  int exhaustive;             /* non-zero: price every valid candidate (no bound prunes) */
} nd_search_params;

#define ND_LANES_LEAVE 2

enum { ND_SEARCH_OK = 0, ND_SEARCH_STOPPED = 1, ND_SEARCH_HOOK_ERROR = 2,
       ND_SEARCH_NO_MEMORY = 3, ND_SEARCH_BAD_INPUT = 4 };

/* Fills every dimension as auto, recompute pinned to none, budget 0 (none), 1 job. */
void nd_search_params_init (nd_search_params *p);

/* The bounds of the walk for this model and job (before any candidate list cuts them). */
void nd_search_bounds_of (const nd_search_params *p, const nd_model_spec *m,
                          const nd_job *job, nd_search_bounds *out);

/* The processors this process may run on: its affinity mask's (a container's cpuset, taskset),
   else those online; at least 1. The default number of pricing threads (-j). */
int nd_search_processors (void);

/*
** Walks the space, refuses, prices on p->jobs threads and delivers the priced rows in walk
** order. Returns ND_SEARCH_* (counts hold what was done so far). err gets a message on
** ND_SEARCH_BAD_INPUT.
*/
int nd_search_run (const nd_search_params *p, const nd_model_spec *m, const nd_device *dev,
                   const nd_job *job, const nd_costs *costs, const nd_search_hooks *hooks,
                   nd_search_counts *counts, char *err, size_t errlen);

/*
** Whether the pinned values of p (dimensions given as one value) can be walked at all: -1,
** or the refusal (nd_refusal) that every candidate with them would get, with the rule in
** err. The other dimensions take their least value (pp stays open when only vpp is pinned).
*/
int nd_search_pinned_check (const nd_search_params *p, const nd_model_spec *m,
                            const nd_job *job, char *err, size_t errlen);

/* Rebuilds the full strategy of a candidate on top of base (body: the model's layers). */
void nd_candidate_strategy (const nd_candidate *c, const nd_strategy *base, int body,
                            nd_strategy *out);

const char *nd_dim_name (nd_dim d);

#endif
