/*
** search_lanes.c -- the walk partitioned across the search's threads (lanes).
**
** The pool (search_pool.c) hands chunks the calling thread filled to whichever thread is
** free: neighbouring nodes, which look up the same groups of layer prices, land on
** different processors, so each group's lines, the chunks' nodes and the pool's counts move
** between them (round trips of about 400 ns in a VM). DeepSeek-V3 on 2,048 H800 took 150 ms
** of processor time at -j 2 against 103 at -j 1, half of it in the shared cache's lookups
** and locks, most of the rest in moving chunks. In lanes each thread walks the whole loop
** nest (about 1% of the search) and walks the nodes of its own lane only, with bound caches
** of its own; what moves between threads is a window's few rows and counts, and the cuts.
**
** Windows are the pool's chunks, cut by the same rule from the same nodes, which every
** thread counts; lane l's part of window k waits for the cuts after window k - CUT_LAG
** (delivered by then at any -j), so each node meets the cuts it would in the pool, and the
** calling thread delivers each window's parts together, their rows merged in walk order:
** the rows a caller sees, the cuts and every count are the pool's, at any -j.
**
** A split by group is fixed, and the threads' speeds are not: on a shared host one
** processor ran 60% slower than the other for seconds (DeepSeek-V3 on 2,048 H800, auto:
** 0.087 s against 0.054 of node walking in one search, 0.084 and 0.084 in the next, the
** same nodes), and the faster lane waited for it. A lane that would wait steals a part
** (steal): alternating runs of five, -j 2 medians 0.103 -> 0.098 s (auto) and 0.255 ->
** 0.233 s (three recipes and HSDP).
*/
#define _GNU_SOURCE  /* pthreads */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "search_walk.h"

/* Looks at a count before a thread sleeps on it (the pool's SPIN_LOOKS: sleeps and
   wake-ups cost tens of microseconds in a VM, a window a few). */
#define LANE_LOOKS 2000

/*
** Lanes need a processor each: a lane whose thread waits for one holds up every other
** within CUT_LAG windows, where the pool's threads take any chunk (-j 3 on 2 processors:
** 0.14-0.16 s in lanes, 0.070-0.087 in the pool, DeepSeek-V3 on 2,048 H800). And they pay
** where the threads would share many groups of layer prices: a model that routes experts
** has tens of thousands (ep and etp among their keys; DeepSeek-V3 on 2,048 devices 17,996),
** which pass between the processors' caches; a dense model's few hundred stay in both, and
** lanes only add each walk's windows (-j 2, lanes against the pool, while a cache line
** took 260-450 ns to the other processor and back: DeepSeek-V3 0.056-0.059 against
** 0.066-0.067 s, with three recipes and HSDP 0.196-0.203 against 0.215-0.218, on 16,384
** H800 0.065-0.068 against 0.078-0.081; Llama-3.1-70B on 256 H100 0.012-0.013 against
** 0.011, Llama-3.1-405B on 16,384 0.017 against 0.016). Where the round trip is short the
** pool gains more (at 116-175 ns: DeepSeek-V3 0.055-0.056 s in lanes, 0.050-0.052 in the
** pool; with recipes and HSDP 0.165 and 0.158): lanes hold about the same in both.
*/
int nd_lanes_apply (const walker *w) {
  if (w->threads < 1 || w->threads + 1 > LANES_MAX || !w->tail || w->admits || w->p->lanes < 0)
    return 0;
  return w->p->lanes > 0
      || (w->m->num_experts > 0 && w->threads + 1 <= nd_search_processors());
}

/*
** A node's lane: of the degrees the bound caches key a group by (tp, cp, mbs, ep, etp; sp
** is inside the node), so each group is one lane's; mixed, as neighbouring nodes differ in
** the innermost of them and the lanes' shares of a window should be even.
*/
static int lane_of (const nd_candidate *c, int n) {
  unsigned h = (unsigned)c->tp * 0x9e3779b1u;
  h = (h ^ (unsigned)c->cp) * 0x85ebca77u;
  h = (h ^ (unsigned)c->mbs) * 0xc2b2ae3du;
  h = (h ^ (unsigned)c->ep) * 0x27d4eb2fu;
  h = (h ^ (unsigned)c->etp) * 0x165667b1u;
  h ^= h >> 15;
  return (int)(h % (unsigned)n);
}


/* Whether the walk stops: the caller is done or a thread stopped it. */
static int halted (lanes *ln) { return atomic_load(&ln->quit) || atomic_load(&ln->halt); }

/* A thread stops the walk for why (the first reason kept); every sleeper woken. */
static void halt (lanes *ln, int why) {
  int none = 0;
  atomic_compare_exchange_strong(&ln->halt, &none, why);
  pthread_mutex_lock(&ln->mu);
  pthread_cond_broadcast(&ln->work_cv);
  pthread_cond_broadcast(&ln->done_cv);
  pthread_mutex_unlock(&ln->mu);
}

/* Lane l's part of window k: its slot and its mark. */
static slot *part_slot (lanes *ln, int l, unsigned long long k) {
  return &ln->ring[l * CUT_LAG + k % CUT_LAG];
}
static part_mark *part_of (lanes *ln, int l, unsigned long long k) {
  return &ln->mark[l * CUT_LAG + k % CUT_LAG];
}

/* Whether every part of window k is walked. */
static int window_done (lanes *ln, unsigned long long k) {
  int l;
  for (l = 0; l < ln->n; l++)
    if (atomic_load(&part_of(ln, l, k)->finished) <= k) return 0;
  return 1;
}

/* The caller: every window finished by all lanes delivered, in order. */
static void deliver_ready (walker *w) {
  lanes *ln = w->ln;
  int l;
  while (w->status == ND_SEARCH_OK && window_done(ln, w->delivered)) {
    unsigned long long k = w->delivered++;
    for (l = 0; l < ln->n; l++) ln->parts[l] = part_slot(ln, l, k);
    nd_walk_deliver_window(w, ln->parts, ln->n, ln->stage);
    /* its parts open for window k + CUT_LAG, before any lane may begin that window */
    for (l = 0; l < ln->n; l++)
      atomic_store(&part_of(ln, l, k)->claim, (k + CUT_LAG) * 4 + PART_OPEN);
    atomic_store(&ln->delivered.v, w->delivered);  /* after the cuts: the lanes read them */
    if (atomic_load(&ln->idle) > 0) {
      pthread_mutex_lock(&ln->mu);
      pthread_cond_broadcast(&ln->work_cv);
      pthread_mutex_unlock(&ln->mu);
    }
  }
  if (w->status != ND_SEARCH_OK) halt(ln, w->status);
}

/* w's part of a window finished (walked by w, its lane's or stolen): marked, and the
   caller told (or delivering, when w is the caller's). */
static void part_finished (walker *w, part_mark *pm, unsigned long long k) {
  lanes *ln = w->ln;
  atomic_store(&pm->finished, k + 1);
  if (w->lane == 0) deliver_ready(w);
  else if (atomic_load(&ln->waiting)) {
    pthread_mutex_lock(&ln->mu);
    pthread_cond_signal(&ln->done_cv);
    pthread_mutex_unlock(&ln->mu);
  }
}

/*
** A lane that would wait (CUT_LAG windows ahead of a part not yet walked, or at its walk's
** end) walks another lane's part of a window it walked past, kept its nodes of (seen) and
** the other has not begun: the latest such window first, whose part its owner would reach
** last. A lane begins its part by marking it its own (begin_window), a thief by marking it
** stolen: one compare-and-swap each, so each part is walked once, with the window's cuts,
** into the owner's slot (the rows and counts are those its owner would have made: which
** thread walks a node changes neither). The thief prices the part's groups in its own
** bound caches. Returns 1 when it walked one, 0 when none was left, -1 when the walk stops.
*/
static int steal (walker *w) {
  lanes *ln = w->ln;
  unsigned long long lo = nd_pool_count(&ln->delivered), k;
  const walker *caller = ln->lane[0];
  if (w->win_n != 0 || halted(ln)) return 0;  /* (w->seen of w->win not begun) */
  if (w->win > CUT_LAG && lo < w->win - CUT_LAG) lo = w->win - CUT_LAG;
  for (k = w->win; k-- > lo;) {
    int b = (int)(k % CUT_LAG), o, i, why;
    if (w->nseen[b] < 0) continue;  /* (not all kept) */
    for (o = 0; o < ln->n; o++) {
      part_mark *pm = part_of(ln, o, k);
      unsigned long long open = k * 4 + PART_OPEN;
      slot *s;
      if (o == w->lane || atomic_load(&pm->claim) != open
          || !atomic_compare_exchange_strong(&pm->claim, &open, k * 4 + PART_STOLEN))
        continue;
      s = part_slot(ln, o, k);
      nd_pool_slot_empty(w, s);
      s->time_cut = k >= CUT_LAG ? caller->cut_time[(k - CUT_LAG) % CUT_LAG] : caller->first_time_cut;
      s->over_cut = k >= CUT_LAG ? caller->cut_over[(k - CUT_LAG) % CUT_LAG] : caller->first_over_cut;
      for (why = i = 0; i < w->nseen[b] && why == 0; i++) {
        const seen_node *e = &w->seen[b][i];
        if (e->lane == o && nd_walk_node(w, s, w->inline_scratch, &e->c, e->index, e->flag) != 0)
          why = w->p->stop && *w->p->stop ? ND_SEARCH_STOPPED : ND_SEARCH_NO_MEMORY;
      }
      part_finished(w, pm, k);
      if (why != 0) {  /* Ctrl-C, or no memory for a row: as nd_lanes_node */
        if (w->status == ND_SEARCH_OK) w->status = why;
        halt(ln, why);
        return -1;
      }
      return 1;
    }
  }
  return 0;
}

/* The caller: windows delivered up to `upto` (its own finished). 0, or -1 when the walk
   stops (w->status says why). */
static int caller_wait (walker *w, unsigned long long upto) {
  lanes *ln = w->ln;
  for (;;) {
    int looks, why;
    deliver_ready(w);
    if (w->status != ND_SEARCH_OK) return -1;
    if (w->delivered >= upto) return 0;
    if ((why = atomic_load(&ln->halt)) != 0) {
      w->status = why;
      return -1;
    }
    if ((why = steal(w)) != 0) {
      if (why < 0) return -1;
      continue;
    }
    for (looks = 0; looks < LANE_LOOKS && !window_done(ln, w->delivered) && !halted(ln); looks++)
      nd_pool_pause();
    if (looks < LANE_LOOKS) continue;
    pthread_mutex_lock(&ln->mu);
    atomic_store(&ln->waiting, 1);
    while (!window_done(ln, w->delivered) && !halted(ln)) pthread_cond_wait(&ln->done_cv, &ln->mu);
    atomic_store(&ln->waiting, 0);
    pthread_mutex_unlock(&ln->mu);
  }
}

/* A lane thread: windows delivered up to `upto`. 0, or -1 when the walk stops. */
static int lane_wait (walker *w, unsigned long long upto) {
  lanes *ln = w->ln;
  int looks, stole;
  for (looks = 0; looks < LANE_LOOKS && !halted(ln); looks++) {
    if (nd_pool_count(&ln->delivered) >= upto) return 0;
    if ((stole = steal(w)) != 0) {
      if (stole < 0) return -1;
      looks = 0;
      continue;
    }
    nd_pool_pause();
  }
  pthread_mutex_lock(&ln->mu);
  atomic_fetch_add(&ln->idle, 1);
  while (nd_pool_count(&ln->delivered) < upto && !halted(ln)) pthread_cond_wait(&ln->work_cv, &ln->mu);
  atomic_fetch_sub(&ln->idle, 1);
  pthread_mutex_unlock(&ln->mu);
  if (nd_pool_count(&ln->delivered) >= upto) return 0;
  w->status = ND_SEARCH_STOPPED;  /* (the thread that halted it says why) */
  return -1;
}

static int wait_delivered (walker *w, unsigned long long upto) {
  return w->lane == 0 ? caller_wait(w, upto) : lane_wait(w, upto);
}

/* w's part of its next window begun: its slot emptied (the part it held there was delivered
   with its window: the wait), with the cuts after window win - CUT_LAG. 0, or -1. */
static int begin_window (walker *w) {
  lanes *ln = w->ln;
  unsigned long long k = w->win;
  slot *s = part_slot(ln, w->lane, k);
  const walker *caller = ln->lane[0];
  int why = atomic_load(&ln->halt);
  if (why != 0 || atomic_load(&ln->quit)) {  /* stopped by another thread */
    w->status = w->lane == 0 && why != 0 ? why : ND_SEARCH_STOPPED;
    return -1;
  }
  unsigned long long open = k * 4 + PART_OPEN;
  if (k >= CUT_LAG && wait_delivered(w, k - CUT_LAG + 1) != 0) return -1;
  w->nseen[k % CUT_LAG] = 0;  /* (window k - CUT_LAG's, delivered: no one steals it now) */
  w->win_slot = NULL;
  if ((w->lane > 0 && w->p->lanes == ND_LANES_LEAVE)  /* left to a thief (tests) */
      || !atomic_compare_exchange_strong(&part_of(ln, w->lane, k)->claim, &open,
                                         k * 4 + PART_OWNED))
    return 0;  /* stolen: its nodes are walked past */
  nd_pool_slot_empty(w, s);
  s->time_cut = k >= CUT_LAG ? caller->cut_time[(k - CUT_LAG) % CUT_LAG] : caller->first_time_cut;
  s->over_cut = k >= CUT_LAG ? caller->cut_over[(k - CUT_LAG) % CUT_LAG] : caller->first_over_cut;
  w->win_slot = s;
  return 0;
}

/* w's part of its window finished: published (the caller told, or delivering). */
static void end_window (walker *w) {
  lanes *ln = w->ln;
  unsigned long long k = w->win++;
  w->win_n = 0;
  if (w->win_slot) part_finished(w, part_of(ln, w->lane, k), k);  /* (stolen: the thief's) */
  w->win_slot = NULL;
}

/* Another lane's node, kept for a steal (no memory: that window is not stolen from). */
static void keep_seen (walker *w, const nd_candidate *c, unsigned long long index, int flag,
                       int lane) {
  int b = (int)(w->win % CUT_LAG);
  seen_node *e;
  if (w->nseen[b] < 0) return;
  if (w->nseen[b] == w->seen_cap[b]) {
    int cap = w->seen_cap[b] ? 2 * w->seen_cap[b] : 64;
    seen_node *grown = (seen_node *)realloc(w->seen[b], (size_t)cap * sizeof *grown);
    if (!grown) { w->nseen[b] = -1; return; }
    w->seen[b] = grown;
    w->seen_cap[b] = cap;
  }
  e = &w->seen[b][w->nseen[b]++];
  e->c = *c;
  e->index = index;
  e->flag = (unsigned char)flag;
  e->lane = (unsigned char)lane;
}

void nd_lanes_node (walker *w, const nd_candidate *c, unsigned long long index, int flag) {
  lanes *ln = w->ln;
  int lane;
  if (w->win_n == 0) {
    if (begin_window(w) != 0) return;
    w->win_first = index;
  }
  lane = lane_of(c, ln->n);
  if (lane != w->lane) keep_seen(w, c, index, flag, lane);
  else if (w->win_slot
           && nd_walk_node(w, w->win_slot, w->inline_scratch, c, index, flag) != 0) {
    /* Ctrl-C, or no memory for a row: this part still delivered (it says which) */
    int why = w->p->stop && *w->p->stop ? ND_SEARCH_STOPPED : ND_SEARCH_NO_MEMORY;
    end_window(w);
    if (w->status == ND_SEARCH_OK) w->status = why;
    halt(ln, why);
    return;
  }
  /* the pool's chunk rule (emit_node): a window ends at `chunk` nodes or nd_walk_span places */
  if (++w->win_n == w->chunk || w->counts->tested - w->win_first >= nd_walk_span(w, w->win_first))
    end_window(w);
}

void nd_lanes_drain (walker *w) {
  if (w->win_n > 0) end_window(w);
  if (w->status != ND_SEARCH_OK) {  /* the others stop too */
    halt(w->ln, w->status);
    return;
  }
  (void)wait_delivered(w, w->win);
}

/* The lane threads' body: their walker's walk. */
static void *lane_main (void *arg) {
  nd_walk_lane((walker *)arg);
  return NULL;
}

/* A lane's walker: a copy of the caller's, before its walk, with its own counts, bound
   caches (made on its thread) and rows. */
static walker *lane_walker (const walker *w, int lane) {
  walker *me = (walker *)malloc(sizeof *me);
  if (!me) return NULL;
  memcpy(me, w, sizeof *me);
  memset(&me->own_counts, 0, sizeof me->own_counts);
  me->counts = &me->own_counts;
  memset(me->bound_cache, 0, sizeof me->bound_cache);
  memset(me->seen, 0, sizeof me->seen);
  memset(me->nseen, 0, sizeof me->nseen);
  memset(me->seen_cap, 0, sizeof me->seen_cap);
  me->inline_scratch = NULL;
  me->threads = 0;  /* its rows its own (nd_pool_row takes no lock) */
  me->slots = NULL;
  me->spare = NULL;
  me->lane = lane;
  return me;
}

/* A walker's kept nodes of other lanes, freed. */
static void free_seen (walker *w) {
  int b;
  for (b = 0; b < CUT_LAG; b++) {
    free(w->seen[b]);
    w->seen[b] = NULL;
    w->nseen[b] = w->seen_cap[b] = 0;
  }
}

static void free_lanes (walker *w) {
  lanes *ln = w->ln;
  int l, i;
  if (!ln) return;
  for (l = 1; ln->lane && l < ln->n; l++)
    if (ln->lane[l]) {
      nd_pool_free_rows(ln->lane[l]->spare);
      free_seen(ln->lane[l]);
      free(ln->lane[l]);
    }
  free_seen(w);
  nd_pool_free_rows(w->spare);  /* (the caller's: the pool is not open to free them) */
  w->spare = NULL;
  for (i = 0; ln->ring && i < ln->n * CUT_LAG; i++) nd_pool_free_rows(ln->ring[i].rows);
  free(ln->ring);
  free(ln->lane);
  free(ln->parts);
  free(ln->mark);
  free(ln->stage);
  free(ln->tids);
  free(ln);
  w->ln = NULL;
}

/* The lane threads joined (each told to stop), the lanes freed. */
static void join_lanes (walker *w) {
  lanes *ln = w->ln;
  int l;
  for (l = 1; l <= ln->started; l++) pthread_join(ln->tids[l], NULL);
  pthread_mutex_destroy(&ln->mu);
  pthread_cond_destroy(&ln->work_cv);
  pthread_cond_destroy(&ln->done_cv);
  free_lanes(w);
}

int nd_lanes_open (walker *w) {
  lanes *ln = (lanes *)calloc(1, sizeof *ln);
  int n = w->threads + 1, l, i;
  if (!ln) return ND_SEARCH_NO_MEMORY;
  w->ln = ln;
  w->lane = 0;
  ln->n = n;
  ln->ring = (slot *)calloc((size_t)n * CUT_LAG, sizeof *ln->ring);
  ln->lane = (walker **)calloc((size_t)n, sizeof *ln->lane);
  ln->parts = (slot **)calloc((size_t)n, sizeof *ln->parts);
  ln->mark = (part_mark *)calloc((size_t)n * CUT_LAG, sizeof *ln->mark);
  ln->stage = (row_block *)malloc(sizeof *ln->stage);
  ln->tids = (pthread_t *)calloc((size_t)n, sizeof *ln->tids);
  if (!ln->ring || !ln->lane || !ln->parts || !ln->mark || !ln->stage || !ln->tids) {
    free_lanes(w);
    return ND_SEARCH_NO_MEMORY;
  }
  for (i = 0; i < n * CUT_LAG; i++) {  /* part i % CUT_LAG of each lane: window i % CUT_LAG's */
    slot *s = &ln->ring[i];
    atomic_init(&ln->mark[i].claim, (unsigned long long)(i % CUT_LAG) * 4 + PART_OPEN);
    atomic_init(&ln->mark[i].finished, 0ull);
    if (!(s->rows = s->last = (row_block *)malloc(sizeof *s->rows))) {
      free_lanes(w);
      return ND_SEARCH_NO_MEMORY;
    }
    s->rows->next = NULL;
  }
  ln->lane[0] = w;
  for (l = 1; l < n; l++)
    if (!(ln->lane[l] = lane_walker(w, l))) {
      free_lanes(w);
      return ND_SEARCH_NO_MEMORY;
    }
  pthread_mutex_init(&ln->mu, NULL);
  pthread_cond_init(&ln->work_cv, NULL);
  pthread_cond_init(&ln->done_cv, NULL);
  for (l = 1; l < n; l++) {
    if (pthread_create(&ln->tids[l], NULL, lane_main, ln->lane[l]) != 0) break;
    ln->started++;
  }
  if (ln->started < n - 1) {  /* fewer threads than lanes: none, the pool's one thread */
    halt(ln, ND_SEARCH_STOPPED);
    join_lanes(w);
    w->threads = 0;
    return nd_pool_open(w);
  }
  return ND_SEARCH_OK;
}

void nd_lanes_close (walker *w) {
  lanes *ln = w->ln;
  if (!ln) return;
  atomic_store(&ln->quit, 1);
  pthread_mutex_lock(&ln->mu);
  pthread_cond_broadcast(&ln->work_cv);
  pthread_mutex_unlock(&ln->mu);
  join_lanes(w);
}
