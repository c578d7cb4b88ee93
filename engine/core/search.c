/*
** search.c -- the strategy space: bounds, the loop nest, refusal labels, and what a pricing
** thread does with the entries of a chunk.
**
** The calling thread walks the space and hands contiguous chunks of sub-trees (nodes: the
** candidates of one set of degrees down to ETP; exhaustive, single candidates) to the
** pricing threads (search_pool.c); a thread walks each node, skipping what the lower bounds
** prune against the cuts the chunk was filled with (whole sub-trees at once where they
** can), checks each candidate left (refusing what cannot run) and prices the rest -- with
** an admit hook, keeps them for the hook, which the calling thread runs over each chunk in
** fill order before a thread prices what it admitted (nd_walk_admit). Chunks come back
** strictly in the order they were filled, so the rows a caller sees, the counts and
** everything computed from them are the same for any -j. Only a ring's worth of chunks is
** alive at a time: memory does not grow with the space. For a model that routes experts
** (no admit hook, a processor per thread) the threads walk in lanes instead
** (search_lanes.c): each walks the whole nest and its own lane's nodes, in windows that
** are these chunks, so the rows and counts are the same.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/recompute.h"
#include "ndplan/search.h"
#include "search_bound.h"
#include "search_walk.h"

/* Layer-kind price groups a pricing thread keeps (nd_price_cache): candidates are priced in
   walk order, and the degrees the prices depend on change in the loops outside pp's, so
   those of nearby candidates repeat; 128 keep about 70% of DeepSeek-V3's on 2,048 devices
   (some 150 KB per thread for its three kinds). */
#define PRICE_CACHE_ENTRIES 128

/* The layer prices the lower bounds keep, in all: one cache per recipe walked (each its own
   prices), which the pool's threads share (lanes: each lane its share of each);
   search_bound.c says what they buy. DeepSeek-V3 on 2,048 devices keeps its 17,996 groups
   in 3.5 MB (the most one cache keeps, MAX_GROUPS): 1,706 -> 1,268 M instructions for its
   search at -j 1 against 1 MiB. Three recipes' 54,000 groups would take 10.6 MB; in 8 MiB
   they are priced 66,714 times (walk: the later passes' TP order), in 12 MiB 55,215 times,
   which took 3% off that search (-j 1 0.268 -> 0.260 s) for 5 MB more. Since the floors
   (nd_bound_floor) a node a floor prunes needs no group, and 4 MiB in all is enough: with
   recipes and HSDP 2.31 -> 2.36 G instructions against 8 MiB, the clock the same (0.203
   and 0.200 s), the search's peak resident memory 14.9 -> 12.2 MB at -j 1 and 17.4 ->
   15.1 MB at -j 2; auto 936 M instructions either way (2 MiB: +3% and +1%, 11.1 MB). Each
   starts at BOUND_CACHE_FIRST_BYTES and grows as its groups fill it, so a search with few
   groups (a dense model's few hundred) keeps little. */
#define BOUND_CACHE_BYTES ((size_t)4 << 20)
#define BOUND_CACHE_FIRST_BYTES ((size_t)1 << 18)

static const char *const dim_names[ND_DIM_COUNT] = {
  "dp", "tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero", "mb", "mbs", "recompute"
};


const char *nd_dim_name (nd_dim d) {
  return (unsigned)d < ND_DIM_COUNT ? dim_names[d] : NULL;
}

const char *nd_search_recompute_name (int v) {
  return v == ND_SEARCH_PER_LAYER ? "per_layer" : v == ND_SEARCH_MEGATRON ? "megatron"
                                  : nd_recompute_name((nd_recompute)v);
}

int nd_search_recompute_parse (const char *name, int *v) {
  nd_recompute r;
  if (strcmp(name, "per_layer") == 0) { *v = ND_SEARCH_PER_LAYER; return 0; }
  if (strcmp(name, "megatron") == 0) { *v = ND_SEARCH_MEGATRON; return 0; }
  if (nd_recompute_parse(name, &r) != 0) return -1;
  *v = (int)r;
  return 0;
}

void nd_search_params_init (nd_search_params *p) {
  int d;
  memset(p, 0, sizeof *p);
  for (d = 0; d < ND_DIM_COUNT; d++) p->dim[d].is_auto = 1;
  p->dim[ND_DIM_RECOMPUTE].is_auto = 0;
  p->dim[ND_DIM_RECOMPUTE].n = 1;
  p->dim[ND_DIM_RECOMPUTE].v[0] = ND_RECOMPUTE_NONE;
  nd_strategy_init(&p->base);
  p->jobs = 1;
}

/* The largest power of two dividing n (n > 0). */
static long long pow2_part (long long n) { return n & -n; }

static int imin (int a, int b) { return a < b ? a : b; }

/* A pinned single value, or 0 when the dimension is searched. */
static int pinned (const nd_dim_set *s) { return !s->is_auto && s->n == 1 ? s->v[0] : 0; }

void nd_search_bounds_of (const nd_search_params *p, const nd_model_spec *m,
                          const nd_job *job, nd_search_bounds *b) {
  int vpp_cfg = pinned(&p->dim[ND_DIM_VPP]) > 0 ? pinned(&p->dim[ND_DIM_VPP]) : 1;
  long long kv = m->num_kv_heads > 0 ? m->num_kv_heads : pow2_part(m->num_heads);
  /* a chunk holds a layer at least, the embedding and the loss counted as one each (as
     Megatron's accounting flags count them: a first or last chunk may build no decoder
     layer, transformer_block.py:188-201 at Megatron-LM d98e8a6) */
  long long pp = (m->num_layers + 2) / vpp_cfg;
  memset(b, 0, sizeof *b);
  b->layers = (int)m->num_layers;
  /* TP: the KV heads (each TP rank keeps at least one), as the reference does */
  b->tp = (int)(kv < job->devices ? kv : job->devices);
  /* PP: layers (+ embedding and loss) over the configured VPP. Fewer micro-batches than
     stages run (Megatron-LM d98e8a6 schedules.py:2278 caps the warm-up at the micro-batches;
     torchtitan warns of the bubble, distributed/pipeline_parallel.py:305-309): walked */
  if (pp > ND_MAX_STAGES) pp = ND_MAX_STAGES;
  b->pp = (int)(pp < job->devices ? pp : job->devices);
  if (b->pp < 1) b->pp = 1;
  /* CP: the load-balanced causal split needs 2*cp chunks of the sequence */
  b->cp = imin(job->seq_len / 2 > 0 ? job->seq_len / 2 : 1, job->devices);
  b->ep = m->num_experts > 0 ? (int)(m->num_experts < job->devices ? m->num_experts
                                                                    : job->devices) : 1;
  /* a pinned TP over the KV heads replicates them (legal, wasteful): the walk takes it */
  if (pinned(&p->dim[ND_DIM_TP]) > b->tp && pinned(&p->dim[ND_DIM_TP]) <= job->devices)
    b->tp = pinned(&p->dim[ND_DIM_TP]);
  b->etp = m->num_experts > 0 ? b->tp : 1;
  b->vpp = (b->layers + 2) / 2 > 1 ? (b->layers + 2) / 2 : 1;  /* chunks per stage at PP 2 */
  if (b->vpp > ND_MAX_CHUNKS / 2) b->vpp = ND_MAX_CHUNKS / 2;
  b->mbs = (int)(job->global_batch < 1000000000 ? job->global_batch : 1000000000);
}

/*
** The values one loop takes: the divisors of `of` (ascending) within [1, bound] when
** auto, or the listed values that divide `of` (a listed value over the bound is kept: the
** check refuses it with a label, so the user sees why). of = 0: a range 1..bound instead
** of divisors.
*/
static int loop_values (const nd_dim_set *s, long long of, int bound, int *out) {
  int n = 0, i;
  if (s->is_auto) {
    long long d;
    int hi = 0, high[LOOP_MAX];
    if (of == 0) {
      for (d = 1; d <= bound && n < LOOP_MAX; d++) out[n++] = (int)d;
      return n;
    }
    /* divisor pairs (d, of/d) up to the square root: the small ones ascend, the large
       ones descend and are appended reversed */
    for (d = 1; d * d <= of; d++) {
      if (of % d != 0) continue;
      if (d <= bound) out[n++] = (int)d;
      if (d * d != of && of / d <= bound) high[hi++] = (int)(of / d);
    }
    while (hi > 0) out[n++] = high[--hi];
    return n;
  }
  for (i = 0; i < s->n; i++)
    if (of == 0 || (s->v[i] > 0 && of % s->v[i] == 0)) out[n++] = s->v[i];
  return n;
}

static int in_set (const nd_dim_set *s, int v) {
  int i;
  if (s->is_auto) return 1;
  for (i = 0; i < s->n; i++)
    if (s->v[i] == v) return 1;
  return 0;
}

void nd_candidate_strategy (const nd_candidate *c, const nd_strategy *base, int body,
                            nd_strategy *st) {
  *st = *base;
  st->dp = c->dp; st->tp = c->tp; st->pp = c->pp; st->vpp = c->vpp; st->cp = c->cp;
  st->ep = c->ep; st->etp = c->etp; st->mbs = c->mbs; st->mb = c->mb;
  st->sp = c->sp; st->zero = c->zero; st->recompute = (nd_recompute)c->recompute;
  st->layers = NULL;
  st->precision = (nd_recipe_id)c->precision;
  if (c->dp_shard > 0) { st->dp_shard = c->dp_shard; st->dp_replicate = 0; }
  nd_layout_variant(st, body, c->layout);  /* a variant that cannot apply: resolve refuses */
}

/*
** Loads a candidate into a strategy that was initialised from base once: only what the
** candidate sets and what resolution changes is reset (a full copy of nd_strategy costs
** more than most checks).
*/
static void load_candidate (nd_strategy *st, const nd_candidate *c, const nd_strategy *base,
                            int body) {
  st->dp = c->dp; st->tp = c->tp; st->pp = c->pp; st->vpp = c->vpp; st->cp = c->cp;
  st->ep = c->ep; st->etp = c->etp; st->mbs = c->mbs; st->mb = c->mb;
  st->sp = c->sp; st->zero = c->zero;
  st->recompute = c->recompute >= ND_SEARCH_PER_LAYER ? ND_RECOMPUTE_NONE
                                                      : (nd_recompute)c->recompute;
  st->layers = NULL;  /* a planner's plan, if the last candidate had one */
  st->schedule = base->schedule;
  st->reshard = base->reshard;  /* resolution sets the default for the candidate's pp */
  st->dp_shard = base->dp_shard;  /* and the shard group for its dp */
  st->dp_replicate = base->dp_replicate;
  if (c->dp_shard > 0) { st->dp_shard = c->dp_shard; st->dp_replicate = 0; }  /* walked */
  st->precision = (nd_recipe_id)c->precision;
  /* the layout fields of the variant (resolution writes stage_layers from them) */
  nd_layout_variant(st, body, c->layout);
}

static int check (const walker *w, nd_strategy *st, nd_candidate *c);
static int pruned (const walker *w, nd_bound *b, const nd_strategy *st, const nd_candidate *c,
                   double time_cut, double over_cut);

enum { TWIN_OFF = 0, TWIN_RECORD, TWIN_DONE, TWIN_USE };

/* Records that the none candidate at walk index `index` fits the planner's budget (with a
   relative margin of 1e-9: the planner's linear model rounds differently). Rows come in
   walk order; one that did not would end the shortcut rather than mislead fit_at. */
static void record_fit (walker *w, const nd_search_row *r) {
  double budget = w->p->budget > 0 ? w->p->budget : w->dev->hbm_bytes;
  unsigned long long i = r->index - w->none_start;
  if (!(r->peak <= budget * (1.0 - 1e-9))) return;
  if (w->nfits > 0 && i <= w->fits[w->nfits - 1]) { w->twin = TWIN_OFF; w->fits_lost = 1; return; }
  if (w->nfits == w->fits_cap) {
    unsigned long long cap = w->fits_cap ? 2 * w->fits_cap : 1024;
    unsigned long long *f = (unsigned long long *)realloc(w->fits, (size_t)cap * sizeof *f);
    if (!f) { w->twin = TWIN_OFF; w->fits_lost = 1; return; }  /* no shortcut: every plan
                                                                 is priced */
    w->fits = f;
    w->fits_cap = cap;
  }
  w->fits[w->nfits++] = i;
}

/* Whether place i of the none pass is among its fits (a binary search). */
static int fit_at (const walker *w, unsigned long long i) {
  unsigned long long lo = 0, hi = w->nfits;
  while (lo < hi) {
    unsigned long long mid = lo + (hi - lo) / 2;
    if (w->fits[mid] < i) lo = mid + 1; else hi = mid;
  }
  return lo < w->nfits && w->fits[lo] == i;
}

/*
** Whether the per-layer candidate at walk index `index` is its none twin's run: when every
** layer kept fits the budget the planner keeps every layer (nd_recompute_plan_run's "all
** kept fits" branch), a plan the automatic recompute does not price twice (price_slot
** counts it as "same run"). The twin is the candidate at the same place of the none
** pass, which walks the same degrees in the same order; the pass was drained before this
** one began, so what is known does not depend on the threads.
*/
static int twin_fit (const walker *w, unsigned long long index) {
  int lo = 0, hi, mid;
  unsigned long long i;
  if (w->twin != TWIN_USE) return 0;
  /* the last segment starting at or before index: its entries are the walk's, written
     before its candidates were emitted (the count read with acquire says which are) */
  hi = atomic_load_explicit(&w->pl_segs, memory_order_acquire);
  if (hi < 1 || index < w->pl_start[0]) return 0;
  while (hi - lo > 1) {
    mid = (lo + hi) / 2;
    if (w->pl_start[mid] <= index) lo = mid; else hi = mid;
  }
  i = index - w->pl_start[lo] + w->pl_twin[lo];
  return i < w->none_len && fit_at(w, i);
}

/* Whether a strategy (a per-layer plan, or its whole-model mode) recomputes nothing. */
static int plan_keeps_all (const nd_strategy *st, const nd_model_spec *m) {
  int i, n = (int)(m->num_layers + m->mtp_layers);
  if (!st->layers) return st->recompute == ND_RECOMPUTE_NONE;
  for (i = 0; i < n; i++) if (st->layers->recompute[i] != ND_RECOMPUTE_NONE) return 0;
  return 1;
}

/*
** Whether a pricing call failed for want of memory: the core's allocation failures all say
** "out of memory" ("recompute: out of memory", "layout: out of memory"), nothing else does.
*/
static int out_of_memory (const char *err) { return strstr(err, "out of memory") != NULL; }

/* Prices one candidate by its recompute value: a whole-model mode, a per-layer plan or
   the Megatron form, the last two chosen under the budget. */
/* Returns -1 when priced, else the refusal: a plan that cannot fit is over memory; an
   allocation that failed is out of memory (the walk stops on it); the walk checked
   everything else, so any other failure is counted as out of bounds. The planners' choices
   (plan, mc: where st's plan then is) and tables (rws, mws) are the worker's. */
static int price_candidate (walker *w, int recompute, nd_strategy *st, nd_estimate *e,
                            nd_recompute_plan *plan, nd_recompute_ws *rws,
                            nd_megatron_choice *mc, nd_megatron_ws *mws,
                            nd_price_cache *pc) {
  double budget = w->p->budget > 0 ? w->p->budget : w->dev->hbm_bytes;
  char err[128];  /* not shown: the code says why (read for out of memory only) */
  err[0] = '\0';
  if (recompute == ND_SEARCH_PER_LAYER) {
    if (nd_recompute_plan_run_ws(w->m, w->dev, w->job, st, w->costs, budget,
                                 ND_SEARCH_PLAN_MODES, plan, e, rws, err, sizeof err) == 0)
      return -1;
    if (out_of_memory(err)) return ND_REFUSE_NO_MEMORY;
    return plan->failed_stage >= 0 ? ND_REFUSE_MEMORY : ND_REFUSE_BOUNDS;
  }
  if (recompute == ND_SEARCH_MEGATRON) {
    if (nd_recompute_megatron_choose_ws(w->m, w->dev, w->job, st, w->costs, budget, 0, e,
                                        mc, mws, err, sizeof err) == 0)
      return -1;
    if (out_of_memory(err)) return ND_REFUSE_NO_MEMORY;
    return mc->method == ND_MEGATRON_OVER ? ND_REFUSE_MEMORY : ND_REFUSE_BOUNDS;
  }
  if (nd_estimate_run_cached(w->m, w->dev, w->job, st, w->costs, pc, e, err, sizeof err) == 0)
    return -1;
  return out_of_memory(err) ? ND_REFUSE_NO_MEMORY : ND_REFUSE_BOUNDS;
}

/* The recipes the walk takes (ascending nd_recipe_id), into out; their count. */
static int recipes_walked (const nd_search_params *p, int *out) {
  int i, n = 0;
  if (p->precision.n == 0) { out[0] = (int)p->base.precision; return 1; }
  for (i = 0; i < p->precision.n; i++)
    if (p->precision.v[i] >= 0 && p->precision.v[i] < ND_RECIPE_COUNT) out[n++] = p->precision.v[i];
  return n;
}

/* The lower bounds of each recipe walked, into b (zeroed: NULL where none applies). */
static void new_bounds (const walker *w, nd_bound **b) {
  const nd_search_params *p = w->p;
  int rv[ND_RECIPE_COUNT], n = recipes_walked(p, rv), i;
  memset(b, 0, ND_RECIPE_COUNT * sizeof *b);
  for (i = 0; i < n; i++) {
    nd_strategy base = p->base;
    base.precision = (nd_recipe_id)rv[i];
    b[rv[i]] = nd_bound_new_shared(w->m, w->dev, w->job, w->costs, &base,
                                   p->budget > 0 ? p->budget : w->dev->hbm_bytes,
                                   w->bound_cache[rv[i]]);
  }
}

/* The layer prices of each recipe walked (NULL where the bounds do not apply): shared by
   the pool's threads; in lanes, each lane's own (its share of the room, unlocked). */
static void new_bound_caches (walker *w) {
  int rv[ND_RECIPE_COUNT], n = recipes_walked(w->p, rv), i;
  size_t nl = (size_t)(w->ln ? w->ln->n : 1), ways = (size_t)n * nl;
  size_t room = BOUND_CACHE_BYTES / ways, most = nd_bound_cache_most(w->m) / nl;
  /* a lane walks its share of each recipe's groups: its share of the room they take at
     most (caches grow rather than replace while half full, so each lane's grew to that
     most, both together twice one thread's: DeepSeek-V3 at -j 2 14.9 -> 11.6 MB, the same
     time) */
  if (nl > 1 && most > 0 && room > most) room = most;
  for (i = 0; i < n; i++)
    w->bound_cache[rv[i]] = nd_bound_cache_new(w->m, BOUND_CACHE_FIRST_BYTES / ways, room,
                                               w->ln ? 1 : w->threads + 1);
}

static void free_bound_caches (walker *w) {
  int i;
  for (i = 0; i < ND_RECIPE_COUNT; i++) {
    nd_bound_cache_free(w->bound_cache[i]);
    w->bound_cache[i] = NULL;
  }
}

static void free_bounds (nd_bound **b) {
  int i;
  for (i = 0; i < ND_RECIPE_COUNT; i++) { nd_bound_free(b[i]); b[i] = NULL; }
}

worker_scratch *nd_walk_new_scratch (const walker *w) {
  worker_scratch *ws = (worker_scratch *)malloc(sizeof *ws);
  const nd_search_params *p = w->p;
  if (!ws) return NULL;
  ws->st = ws->chk = ws->tree.rep = p->base;
  memset(ws->bound, 0, sizeof ws->bound);
  ws->tree.ws = ws;
  ws->tree.pp = 0;
  ws->tree.shape_tp = ws->tree.shape_dp = 0;
  ws->tree.mem_now = 0;  /* (no pair's memory found yet: every mem_at differs from 1 on) */
  memset(ws->tree.mem_at, 0, sizeof ws->tree.mem_at);
  { int v; for (v = 0; v < ND_VARIANT_COUNT; v++) ws->tree.lay[v] = p->base; }
  ws->rws = nd_recompute_ws_new();
  ws->mws = nd_megatron_ws_new();
  ws->pc = nd_price_cache_new(PRICE_CACHE_ENTRIES);
  if (!ws->rws || !ws->mws || !ws->pc) {
    nd_recompute_ws_free(ws->rws);
    nd_megatron_ws_free(ws->mws);
    nd_price_cache_free(ws->pc);
    free(ws);
    return NULL;
  }
  nd_recompute_ws_cache(ws->rws, ws->pc);
  nd_megatron_ws_cache(ws->mws, ws->pc);
  if (!p->exhaustive) new_bounds(w, ws->bound);  /* NULL (a model the bounds do not
                                                    cover): every candidate is priced */
  return ws;
}

void nd_walk_free_scratch (worker_scratch *ws) {
  if (!ws) return;
  nd_recompute_ws_free(ws->rws);
  nd_megatron_ws_free(ws->mws);
  nd_price_cache_free(ws->pc);
  free_bounds(ws->bound);
  free(ws);
}

static int price_one (walker *w, slot *s, worker_scratch *ws, const nd_candidate *c,
                      unsigned long long index);

/* Keeps c (walk index `index`) in s's pending list for the admit hook. 0, or -1 (no memory:
   counted as such, the walk stops). */
static int defer (slot *s, const nd_candidate *c, unsigned long long index) {
  if (s->npend == s->pend_cap) {
    int cap = s->pend_cap ? 2 * s->pend_cap : 64;
    nd_candidate *pc = (nd_candidate *)realloc(s->pend, (size_t)cap * sizeof *pc);
    unsigned long long *pi;
    if (pc) s->pend = pc;
    pi = pc ? (unsigned long long *)realloc(s->pend_index, (size_t)cap * sizeof *pi) : NULL;
    if (!pi) { s->late[ND_REFUSE_NO_MEMORY]++; return -1; }
    s->pend_index = pi;
    s->pend_cap = cap;
  }
  s->pend[s->npend] = *c;
  s->pend_index[s->npend++] = index;
  return 0;
}

/*
** One candidate of slot s, at walk index `index`, its flag as the walk left it: checked
** (unless the walk did), pruned by the walk's verdict or its bounds, else priced into the
** slot's next row (with an admit hook: kept for it). Returns 0, or -1 to stop (Ctrl-C, or
** no memory for the row).
*/
static int process_one (walker *w, slot *s, worker_scratch *ws, nd_candidate *c,
                        unsigned long long index, int flag) {
  int kind = flag & CAND_KIND, bound = flag & CAND_BOUND, why;
  if (w->p->stop && *w->p->stop) return -1;
  if (kind != CAND_READY) {  /* the walk's checks, on this thread */
    /* a per-layer plan whose none twin fits: the twin passed the same checks (the same
       degrees; load_candidate gives per_layer none's strategy), so this one would too and
       is the same run, as below; its checks are not run again */
    if (kind == CAND_UNCHECKED && c->recompute == ND_SEARCH_PER_LAYER && twin_fit(w, index)) {
      s->late[ND_REFUSE_SAME_RUN]++;
      return 0;
    }
    why = check(w, &ws->chk, c);
    /* a hook may tell an equivalent candidate from its twin: it sees and prices them too */
    if (why < 0 && kind == CAND_EQUIVALENT
        && !(w->hooks && (w->hooks->price_equivalent || w->hooks->admit))) {
      s->equivalent++;
      return 0;
    }
    if (why < 0 && c->recompute == ND_SEARCH_PER_LAYER && twin_fit(w, index))
      why = ND_REFUSE_SAME_RUN;  /* as below, after pricing it */
    if (why >= 0) { s->late[why]++; return 0; }
    if (bound || ws->bound[c->precision]) {  /* the walk's verdict, else the bounds' */
      int pr = bound == CAND_PRUNE_TIME ? 1 : bound == CAND_PRUNE_MEMORY ? 2 : bound ? 0
             : pruned(w, ws->bound[c->precision], &ws->chk, c, s->time_cut, s->over_cut);
      if (pr == 1) { s->pruned_time++; return 0; }
      if (pr == 2) { s->pruned_memory++; s->late[ND_REFUSE_MEMORY]++; return 0; }
    }
    if (w->admits) return defer(s, c, index);
  }
  return price_one(w, s, ws, c, index);
}

/* Candidate c (walk index `index`, checked) priced into slot s's next row. 0, or -1 to stop
   (no memory for the row). */
static int price_one (walker *w, slot *s, worker_scratch *ws, const nd_candidate *c,
                      unsigned long long index) {
  nd_strategy *st = &ws->st;
  nd_estimate *e = &ws->e;
  int why, t;
  nd_search_row *r;
  const nd_stage_estimate *h;
  load_candidate(st, c, &w->p->base, (int)w->m->num_layers);
  why = price_candidate(w, c->recompute, st, e, &ws->plan, ws->rws, &ws->mc, ws->mws, ws->pc);
  if (why >= 0) { s->late[why]++; return 0; }
  if (c->recompute == ND_SEARCH_PER_LAYER && w->p->dim[ND_DIM_RECOMPUTE].is_auto
      && plan_keeps_all(st, w->m)) {  /* the same run as its none candidate: not twice */
    s->late[ND_REFUSE_SAME_RUN]++;
    return 0;
  }
  if (!(r = nd_pool_row(w, s))) { s->late[ND_REFUSE_NO_MEMORY]++; return -1; }
  h = &e->stage[e->heaviest];
  r->index = index;
  r->c = *c;
  r->c.sp = (unsigned char)st->sp;
  r->c.dp_shard = st->dp_shard;  /* resolved: all of dp unless HSDP */
  r->heaviest = e->heaviest;
  r->stages = e->stages;
  r->step_time = e->step_time;
  r->tokens_per_s = e->tokens_per_s;
  r->mfu = e->mfu;
  r->hfu = e->hfu;
  r->peak = e->peak;
  r->over = w->p->budget > 0 ? e->peak - w->p->budget : 0.0;
  r->fits = r->over <= 0.0;
  if (r->over < 0.0) r->over = 0.0;
  r->mem[0] = h->weights; r->mem[1] = h->grads; r->mem[2] = h->optimizer;
  r->mem[3] = h->activations; r->mem[4] = h->buffers;
  r->mem[5] = h->reserved - h->allocated; r->mem[6] = h->reserve;
  for (t = 0; t < ND_T_COUNT; t++) r->time_parts[t] = e->time_parts[t];
  r->key = e->step_time;
  return 0;
}

/* ---- the walk ------------------------------------------------------------------- */

/* VPP: a range up to (layers + 2) / PP chunks per stage, each holding a layer, the embedding
   and the loss counted (1 at PP 1). */
/*
** The VPP values an automatic VPP walks: up to 4 always; past 4 only where the layers, with
** the embedding and the loss counted or not (Megatron's accounting flags), fill pp*vpp
** equal chunks -- the deep interleavings trainers' recipes use (GPT-3 175B: PP 8 x VPP 12;
** Llama 3.1 405B: 126 + 2 over PP 8 x VPP 8). A listed or pinned VPP is walked as given.
*/
static int auto_vpp (int layers, int pp, int vpp) {
  long long chunks = (long long)pp * vpp;
  if (vpp <= 4) return 1;
  return layers % chunks == 0 || (layers + 1) % chunks == 0 || (layers + 2) % chunks == 0;
}

/* VPP at pp: a layer per chunk, the embedding and the loss counted (nd_search_bounds_of) */
static int vpp_bound (const nd_search_bounds *b, int pp) {
  int v = pp > 1 ? (b->layers + 2) / pp : 1;
  if (v > ND_MAX_CHUNKS / (pp > 0 ? pp : 1)) v = ND_MAX_CHUNKS / (pp > 0 ? pp : 1);
  return v > 0 ? v : 1;
}

/*
** Every degree within its bound, at least as many micro-batches as stages: 0, or 1 (and,
** when err is given, which bound in it).
*/
static int out_of_bounds (const nd_search_bounds *b, const nd_candidate *c, char *err,
                          size_t errlen) {
  int vpp_max = vpp_bound(b, c->pp);
  const char *what = NULL, *why = "";
  int v = 0, bound = 0;
#define OVER(name, val, lim, because) \
  { what = name; v = val; bound = lim; why = because; }
  if (c->tp > b->tp) OVER("tp", c->tp, b->tp, "the KV heads, the devices")
  else if (c->pp > b->pp) OVER("pp", c->pp, b->pp, "the layers, embedding and loss over vpp, "
                               "the devices")
  else if (c->cp > b->cp) OVER("cp", c->cp, b->cp, "half the sequence, the devices")
  else if (c->mbs > b->mbs) OVER("mbs", c->mbs, b->mbs, "the global batch")
  else if (c->etp > c->tp) OVER("etp", c->etp, c->tp, "tp")
  else if (c->vpp > vpp_max) OVER("vpp", c->vpp, vpp_max, "the layers, embedding and loss over pp")
  else if (c->zero > 3) OVER("zero", c->zero, 3, "ZeRO stages")
#undef OVER
  if (!what) return 0;
  if (err && errlen)
    snprintf(err, errlen, "degree out of bounds: %s %d over the search's bound of %d (%s)", what,
             v, bound, why);
  return 1;
}

/*
** The walk's check of a candidate: the search's bounds, then the strategy's own rules
** (nd_strategy_check, the one check resolve also runs: the walk refuses exactly what
** nd.estimate refuses, under the same label, without formatting a message). Returns -1
** (kept; st holds it resolved) or the refusal.
*/
static int check (const walker *w, nd_strategy *st, nd_candidate *c) {
  int r;
  if (out_of_bounds(&w->b, c, NULL, 0)) return ND_REFUSE_BOUNDS;
  load_candidate(st, c, &w->p->base, w->b.layers);
  if ((r = nd_strategy_check(st, w->m, w->job, NULL, 0)) >= 0) return r;
  c->sp = (unsigned char)st->sp;
  return -1;
}

/*
** The layout variants walked for (pp, vpp), into out: the even split alone when the layers
** divide into pp*vpp equal chunks; else each variant that applies and places the layers
** differently from every one before it (the same run is not walked twice; an even split
** that Megatron's accounting or first/last flags state exactly is walked under that label).
*/
static int layout_variants (const walker *w, tree *t, int pp, int vpp, int *out) {
  int n = 0, v, j, body = w->b.layers, mtp = (int)w->m->mtp_layers;
  long long chunks = (long long)pp * vpp;
  out[n++] = ND_VARIANT_EVEN;
  if (pp < 2 || vpp < 1 || chunks > ND_MAX_CHUNKS || body % chunks == 0) return n;
  for (v = 0; v < ND_VARIANT_COUNT; v++) {
    nd_strategy *st = &t->lay[v];
    st->pp = pp; st->vpp = vpp;
    if (nd_layout_variant(st, body, v) != 0 || nd_layout_resolve(st, body, mtp, NULL, 0) != 0) {
      if (v == ND_VARIANT_EVEN) return n;
      continue;
    }
    for (j = 0; j < n && v > 0; j++)
      if (memcmp(t->lay[out[j]].stage_layers, st->stage_layers,
                 (size_t)chunks * sizeof st->stage_layers[0]) == 0) break;
    if (v > 0 && j == n) out[n++] = v;
    /* the even split as Megatron's flags state it: walked (once) under their label */
    else if (v > 0 && out[j] == ND_VARIANT_EVEN) out[j] = v;  /* lay[v] equals it */
  }
  return n;
}

/*
** The pinned values of p (one-value lists) with the least of every other dimension (pp
** left open when only vpp is pinned), on a batch that refuses no degree, checked as the
** walk checks a candidate but against the job's bounds. Returns -1 when they can be
** walked, else the refusal, with the rule in err ("devices: 8 is not a multiple of
** tp*cp*pp = 3", "degree out of bounds: vpp ... over the search's bound of 4").
*/
int nd_search_pinned_check (const nd_search_params *p, const nd_model_spec *m,
                            const nd_job *job, char *err, size_t errlen) {
  const nd_dim_set *D = p->dim;
  nd_job probe = *job;
  nd_candidate c;
  walker *w;
  char why[256];
  int r;
#define PIN(d) (pinned(&D[d]) > 0 ? pinned(&D[d]) : 1)
  memset(&c, 0, sizeof c);
  c.tp = PIN(ND_DIM_TP); c.pp = PIN(ND_DIM_PP); c.cp = PIN(ND_DIM_CP); c.ep = PIN(ND_DIM_EP);
  c.etp = PIN(ND_DIM_ETP); c.mbs = PIN(ND_DIM_MBS); c.vpp = PIN(ND_DIM_VPP);
#undef PIN
  c.precision = (unsigned char)p->base.precision;  /* each listed recipe: checked by the caller */
  if (c.vpp > 1 && pinned(&D[ND_DIM_PP]) == 0) c.vpp = 1;  /* the pp it needs is searched */
  /* DualPipe pairs stages: the least pp it can run is 2, searched or listed, not 1 */
  if (p->base.schedule == ND_SCHED_DUALPIPE && pinned(&D[ND_DIM_PP]) == 0) c.pp = 2;
  if (!D[ND_DIM_ZERO].is_auto && D[ND_DIM_ZERO].n == 1)
    c.zero = (unsigned char)D[ND_DIM_ZERO].v[0];
  c.sp = (unsigned char)(c.tp > 1 && in_set(&D[ND_DIM_SP], 1));
  if (job->devices < 1 || c.mbs < 1 || c.pp < 1) return -1;  /* nd_search_run says why */
  probe.global_batch = (long long)job->devices * c.mbs * 2 * c.pp;  /* every dp divides it */
  w = (walker *)calloc(1, sizeof *w);
  if (!w) return -1;
  w->p = p; w->m = m; w->job = &probe;
  nd_search_bounds_of(p, m, job, &w->b);
  w->scratch = p->base;
  load_candidate(&w->scratch, &c, &p->base, w->b.layers);
  w->scratch.dp = 0; w->scratch.mb = 0;
  why[0] = '\0';
  if (pinned(&D[ND_DIM_VPP]) > w->b.vpp) {  /* over the ceiling whatever pp is */
    snprintf(why, sizeof why, "degree out of bounds: vpp %d over the search's bound of %d (the "
             "layers, embedding and loss over pp)", pinned(&D[ND_DIM_VPP]), w->b.vpp);
    r = ND_REFUSE_BOUNDS;
  }
  else if ((c.mb = (int)(probe.global_batch / c.mbs)),  /* the most micro-batches (dp 1) */
           out_of_bounds(&w->b, &c, why, sizeof why))
    r = ND_REFUSE_BOUNDS;  /* the walk's first check */
  else if ((r = nd_strategy_check(&w->scratch, m, &probe, why, sizeof why)) >= 0) {}
  else {
    c.dp = w->scratch.dp; c.mb = w->scratch.mb; c.sp = (unsigned char)w->scratch.sp;
    w->scratch = p->base;
    r = check(w, &w->scratch, &c);
    if (r >= 0 && !out_of_bounds(&w->b, &c, why, sizeof why))
      snprintf(why, sizeof why, "%s", nd_refusal_label((nd_refusal)r));
  }
  free(w);
  if (r >= 0 && err && errlen) snprintf(err, errlen, "%s", why);
  return r;
}

/*
** Whether a valid candidate need not be priced (counted as why): a per-layer plan whose
** memory bound is over the budget cannot fit (its planner would refuse it "over memory");
** a whole-model candidate whose memory bound is over the budget by more than the caller's
** cut is a miss it would not keep; a step-time bound over the time cut cannot rank. Each
** bound is under the estimate by a relative 1e-9 at least (the sums differ in order).
** Returns 0 (price it), 1 (pruned by time) or 2 (by memory).
*/
static int verdict (const walker *w, const nd_candidate *c, double t, double mem,
                    double time_cut, double over_cut) {
  double budget = w->p->budget > 0 ? w->p->budget : w->dev->hbm_bytes;
  t *= 1.0 - 1e-9;
  mem *= 1.0 - 1e-9;
  if (mem > budget && (c->recompute == ND_SEARCH_PER_LAYER
                       || (c->recompute < ND_RECOMPUTE_COUNT && w->p->budget > 0
                           && mem - budget > over_cut)))
    return 2;
  return t > time_cut ? 1 : 0;
}

static int pruned (const walker *w, nd_bound *b, const nd_strategy *st, const nd_candidate *c,
                   double time_cut, double over_cut) {
  double t, mem;
  if (nd_bound_eval(b, c, st, &t, &mem) != 0) return 0;
  return verdict(w, c, t, mem, time_cut, over_cut);
}

/* equivalent: the candidate is the same run as one priced before it (the walk knows); with
   an admit or objective hook it is priced anyway (a policy may tell them apart) */
static void emit (walker *w, nd_candidate *c, int equivalent, int bound) {
  int why, flag = (equivalent ? CAND_EQUIVALENT : CAND_UNCHECKED) | bound;
  unsigned long long index;
  slot *s;
  if (w->status != ND_SEARCH_OK) return;
  if (w->p->stop && *w->p->stop) { w->status = ND_SEARCH_STOPPED; return; }
  index = w->counts->tested++;
  if (w->hooks && w->hooks->admit) {
    /* the exhaustive walk's hook runs here, on the calling thread, after the checks (the
       pruned walk's on the walk's thread too, over what the pricing threads checked and
       bounded: nd_walk_admit) */
    int keep = 1;
    why = check(w, &w->scratch, c);
    if (why >= 0) { w->counts->refused[why]++; return; }
    if (w->hooks->admit(w->hooks->ud, c, &keep) != 0) {
      w->status = ND_SEARCH_HOOK_ERROR;
      return;
    }
    if (!keep) { w->counts->refused[ND_REFUSE_FILTERED]++; return; }
    flag = CAND_READY;
  }
  s = nd_pool_current(w);
  /* a chunk spans at most nd_walk_span places of the walk too (the tails it skips take
     places): the cuts come as many places late as when every candidate was emitted */
  if (s->n > 0 && index - s->index[0] >= nd_walk_span(w, s->index[0])) {
    nd_pool_submit(w);
    if (w->status != ND_SEARCH_OK) return;
    s = nd_pool_current(w);
  }
  if (s->n == 0) { s->time_cut = w->time_cut; s->over_cut = w->over_cut; }
  s->cand[s->n] = *c;
  s->index[s->n] = index;
  s->flag[s->n] = (unsigned char)flag;
  if (++s->n == w->chunk) nd_pool_submit(w);
}

/* What is in flight delivered (a lane thread: waits until it is). */
static void drain (walker *w) {
  if (w->ln) nd_lanes_drain(w);
  else nd_pool_drain(w);
}

/*
** At the start of a segment of the walk: the first recompute pass over every TP (tp_index
** -1), or a later pass at one TP. The none pass's fits are recorded for the per-layer
** segments of an automatic recompute, which start once they are all in; each per-layer
** segment's twins are the none pass's candidates at its TP.
*/
static void begin_segment (walker *w, int rec, int tp_index) {
  if (w->twin == TWIN_RECORD && tp_index >= 0) {
    w->none_len = w->counts->tested - w->none_start;
    w->twin = TWIN_DONE;
  }
  if (tp_index < 0) {
    if (rec == ND_RECOMPUTE_NONE && w->twin == TWIN_OFF && !w->p->exhaustive
        && w->p->dim[ND_DIM_RECOMPUTE].is_auto) {
      w->twin = TWIN_RECORD;
      w->none_start = w->counts->tested;
    }
    return;
  }
  if (rec != ND_SEARCH_PER_LAYER) return;
  if (w->twin == TWIN_DONE) {
    drain(w);
    if (w->ln && w != w->ln->lane[0]) {  /* a lane's: the fits the caller kept, complete */
      const walker *caller = w->ln->lane[0];
      w->fits = caller->fits;
      w->nfits = caller->nfits;
      if (caller->fits_lost) w->twin = TWIN_OFF;
    }
    if (w->twin == TWIN_DONE) w->twin = TWIN_USE;
  }
  if (w->twin == TWIN_USE) {
    int k = atomic_load_explicit(&w->pl_segs, memory_order_relaxed);
    w->pl_start[k] = w->counts->tested;
    w->pl_twin[k] = w->none_tp[tp_index];
    atomic_store_explicit(&w->pl_segs, k + 1, memory_order_release);
  }
}

/*
** HSDP's shard groups walked for one dp, ascending, into hv (their count); *full: dp when
** all of dp is among them (the one group ZeRO 0 walks), else 0. Neither set given: one
** value, 0 (base's). dp_replicate given: dp / R for each listed (or, auto, each) R that
** divides dp, kept where dp_shard (when given) allows it.
*/
static int shard_groups (const nd_search_params *p, int dp, int *hv, int *full) {
  const nd_dim_set *shard = &p->dp_shard, *rep = &p->dp_replicate;
  int shard_set = shard->is_auto || shard->n > 0, n = 0, i, rv[LOOP_MAX], nr;
  *full = 0;
  if (!(rep->is_auto || rep->n > 0)) {
    if (!shard_set) { hv[0] = 0; return 1; }  /* base's */
    *full = in_set(shard, dp) ? dp : 0;  /* ZeRO 0 walks all of dp when it is listed */
    return loop_values(shard, dp, dp, hv);
  }
  nr = loop_values(rep, dp, dp, rv);  /* ascending replicas: descending shard groups */
  for (i = nr - 1; i >= 0; i--) {
    int g = dp / rv[i];
    if (shard_set && !in_set(shard, g)) continue;
    hv[n++] = g;
    if (g == dp) *full = dp;
  }
  return n;
}

/* What the walk knows of the candidates of one SP value in a tail before emitting them. */
enum { TAIL_EMIT = 0, TAIL_VERDICTS, TAIL_REFUSED, TAIL_SKIP_TIME, TAIL_SKIP_MEMORY };

/*
** The VPP values walked at pp (an automatic VPP past 4 only where auto_vpp says), each with
** its layout variants, into t->vpps: for every degree of the loops inside pp's.
*/
static void vpps_of (const walker *w, tree *t, int pp) {
  const nd_dim_set *D = w->p->dim;
  int vv[LOOP_MAX], nv, iv;
  t->pp = pp;
  t->nv = 0;
  nv = loop_values(&D[ND_DIM_VPP], 0, vpp_bound(&w->b, pp), vv);
  for (iv = 0; iv < nv; iv++) {
    vpp_entry *e = &t->vpps[t->nv];
    if (D[ND_DIM_VPP].is_auto && !auto_vpp(w->b.layers, pp, vv[iv])) continue;
    e->vpp = vv[iv];
    e->n = layout_variants(w, t, pp, vv[iv], e->layout);
    t->nv++;
  }
}

/*
** The shape of every tail at one (tp, dp): the recipes, ZeRO stages and shard groups the
** innermost loops walk, the (ZeRO, shard group) pairs among them, the SP values, and how
** many candidates one SP value has in a tail. Into t->shape.
*/
static void shape_of (const walker *w, tree *tr, int tp, int dp) {
  tail_shape *t = &tr->shape;
  const nd_dim_set *spset = &w->p->dim[ND_DIM_SP];
  const int *zv = w->zv;
  int iz, ih, sp, nz = w->nz;
  unsigned long long pairs = 0;
  if (tr->shape_tp == tp && tr->shape_dp == dp) return;  /* a node's sub-tree after another's */
  tr->shape_tp = tp;
  tr->shape_dp = dp;
  t->nrc = recipes_walked(w->p, t->rcv);
  t->nh = shard_groups(w->p, dp, t->hv, &t->full);
  t->zv = zv; t->nz = nz; t->zmax = 0; t->zok = 1; t->n = 0;
  for (sp = 0; sp <= 1; sp++)
    t->walked[sp] = in_set(spset, sp) && !(tp == 1 && sp == 1 && in_set(spset, 0));
  for (iz = 0; iz < nz; iz++) {
    if (zv[iz] < 0 || zv[iz] > 3) t->zok = 0;  /* refused apart (out of bounds) */
    else if (zv[iz] > t->zmax) t->zmax = zv[iz];
  }
  if ((long long)t->nrc * nz * t->nh > VERDICTS) t->zok = 0;  /* too many to keep */
  for (iz = 0; iz < nz; iz++)
    for (ih = 0; ih < t->nh; ih++) {
      if (zv[iz] == 0 && t->hv[ih] != 0 && t->hv[ih] != t->full) continue;
      pairs++;
      if (t->n == VERDICTS) continue;
      t->tz[t->n] = zv[iz];
      t->th[t->n] = ih;
      t->tat[t->n++] = iz * t->nh + ih;
    }
  t->per = pairs * (unsigned long long)t->nrc;
}

/* The candidates of one (recompute, tp, pp, cp, mbs, ep, etp): its node's size. */
static unsigned long long node_size (const tree *t) {
  unsigned long long layouts = 0;
  int iv;
  for (iv = 0; iv < t->nv; iv++) layouts += (unsigned long long)t->vpps[iv].n;
  return layouts * t->shape.per
         * (unsigned long long)(t->shape.walked[0] + t->shape.walked[1]);
}

/*
** A representative of c's candidates of one SP value, checked into t->rep: the largest
** ZeRO walked, the shard group all of DP (or base's, when no group is walked). Any rule it
** breaks reads neither ZeRO nor the shard group (with ZeRO 1-3 every walked group passes
** where all of DP does, but for the last EP divisibility rule, which all of DP passes when
** the experts' first one does), so a shared refusal (nd_refusal_shared) is each of them's.
** Returns -1 (valid) or the refusal.
*/
static int check_sp (const walker *w, tree *t, const nd_candidate *c, int sp,
                     nd_candidate *r) {
  const tail_shape *sh = &t->shape;
  *r = *c;
  r->sp = (unsigned char)sp; r->zero = (unsigned char)sh->zmax;
  r->precision = (unsigned char)sh->rcv[0];
  r->dp_shard = sh->hv[0] == 0 ? 0 : c->dp;
  return check(w, &t->rep, r);
}

/*
** The tail's candidates of one SP value: those of each (recipe, ZeRO, shard group) the
** loops below walk. A shared refusal of its representative (check_sp) is counted for each
** of them at once, as each would be counted. A valid one's strategy is each of theirs but
** for ZeRO, the shard group and the recipe, so the lower bound of each (recipe, ZeRO,
** shard group) is evaluated on it against the slot's cuts, each verdict kept in
** t->verdict[sp] (CAND_BOUND bits) for process_one, which still checks each candidate.
** When every one prunes, no candidate of the sub-tree could rank, fit or be a kept miss: it
** is skipped unchecked, counted skipped by time when the layout's stage sums are over the
** time cut in every recipe (nd_bound_layout_time, before any pair is bounded), else by
** memory when every bound pruned by memory, else by time (the bound of a candidate that
** would be refused is evaluated too: its prune costs nothing). Else (another refusal, no
** bound applies, a bound under the cuts) the candidates are processed (TAIL_VERDICTS: with
** the verdicts). Returns TAIL_*; *code: the refusal.
*/
static int tail_sp (const walker *w, tree *tr, const nd_candidate *c, int sp, int *code) {
  tail_shape *t = &tr->shape;
  nd_bound **bd = tr->ws->bound;
  nd_strategy *st = &tr->rep;
  nd_candidate r;
  unsigned char *vd = tr->verdict[sp];
  int irc, why, i, memory = 1, all = 1;
  if (!t->zok) return TAIL_EMIT;
  if ((why = check_sp(w, tr, c, sp, &r)) >= 0) {
    *code = why;
    return nd_refusal_shared((nd_refusal)why, 0) ? TAIL_REFUSED : TAIL_EMIT;
  }
  /* over the cut by time in every recipe before any pair's DP time or memory: skipped by
     time, whatever the memory (as subtree counts a node) */
  for (irc = 0, all = t->nrc > 0; irc < t->nrc && all; irc++) {
    nd_bound *b = bd[t->rcv[irc]];
    double least;
    st->precision = (nd_recipe_id)t->rcv[irc];
    r.precision = (unsigned char)t->rcv[irc];
    all = b && nd_bound_layout_time(b, &r, st, &least) == 0
          && least * (1.0 - 1e-9) > tr->time_cut;
  }
  if (all) return TAIL_SKIP_TIME;
  all = 1;
  for (i = 0; i < t->n; i++)  /* base's group (0): as resolved for this dp */
    t->tg[i] = t->hv[t->th[i]] != 0 ? t->hv[t->th[i]] : st->dp_shard;
  for (irc = 0; irc < t->nrc; irc++) {
    nd_bound *b = bd[t->rcv[irc]];
    int ok;
    st->precision = (nd_recipe_id)t->rcv[irc];
    r.precision = (unsigned char)t->rcv[irc];
    ok = b && nd_bound_eval_shards(b, &r, st, t->n, t->tz, t->tg, tr->time_cut, t->tt,
                                   t->tm) == 0;
    for (i = 0; i < t->n; i++) {
      int v = 0;
      if (ok) {
        r.zero = (unsigned char)t->tz[i];
        v = verdict(w, &r, t->tt[i], t->tm[i], tr->time_cut, tr->over_cut);
      }
      vd[irc * t->nz * t->nh + t->tat[i]] =
        (unsigned char)(v == 1 ? CAND_PRUNE_TIME : v == 2 ? CAND_PRUNE_MEMORY : CAND_PRICE);
      if (v == 0) all = 0;
      if (v == 1) memory = 0;
    }
  }
  if (!all) return TAIL_VERDICTS;  /* processed, with them */
  return memory ? TAIL_SKIP_MEMORY : TAIL_SKIP_TIME;
}

/* Counts n candidates of the node as state (TAIL_REFUSED: under code) says, each taking its
   place in the walk. */
static void count_as (tree *t, int state, int code, unsigned long long n) {
  t->next += n;
  if (state == TAIL_REFUSED) t->s->late[code] += n;
  else if (state == TAIL_SKIP_TIME) t->s->skipped_time += n;
  else t->s->skipped_memory += n;
}

/* Pair i's memory bound in subtree (its ZeRO and shard group in tr->shape), of params from
   nd_bound_spread on b: found once per recipe (tr->mem_now), as a sub-tree's verdicts read
   a few of its pairs' most of the time (every pair read 4% of a search with HSDP). */
static double pair_mem (tree *tr, const nd_bound *b, const nd_strategy *st,
                        const double *params, int i) {
  tail_shape *t = &tr->shape;
  if (tr->mem_at[i] != tr->mem_now) {
    t->tm[i] = nd_bound_spread_memory(b, st, params, t->tz[i], t->tg[i]);
    tr->mem_at[i] = tr->mem_now;
  }
  return t->tm[i];
}

/* Whether each of the n VPPs' time bounds is over the cut (verdict's margin). */
static int over_at_every (const double *time_s, int n, double cut) {
  int i;
  for (i = 0; i < n; i++) if (!(time_s[i] * (1.0 - 1e-9) > cut)) return 0;
  return 1;
}

/* Each of the n VPPs of SP value sp skipped by time, but those one recipe left to walk. */
static void skip_by_time (vpp_entry *vp, int n, int sp) {
  int i;
  for (i = 0; i < n; i++) if (vp[i].state[sp] != TAIL_EMIT) vp[i].state[sp] = TAIL_SKIP_TIME;
}

/*
** The sub-tree of one (recompute, tp, pp, cp, mbs, ep, etp) in c: each VPP value of t->vpps,
** its layouts and their tails. Per SP value, a representative at the first VPP and layout
** (check_sp): a refusal shared across VPP and layouts too is every candidate's. A valid one
** gives the group's layer prices, so nd_bound_spread bounds every layout of each VPP: a VPP
** whose every (recipe, ZeRO, shard group) prunes (by its time, or by the memory of the
** pair) against the slot's cuts is skipped with its layouts, as tail_sp skips a tail. Into
** t->vpps[iv].state and .code (TAIL_EMIT: tail_sp decides); returns 1 when nothing of the
** sub-tree is left to walk.
*/
static int subtree (const walker *w, tree *tr, const nd_candidate *c) {
  tail_shape *t = &tr->shape;
  nd_bound **bd = tr->ws->bound;
  nd_strategy *st = &tr->rep;
  int sp, iv, irc, i, why, left = 0, nv = tr->nv, groups;
  double params[2], least;
  vpp_entry *vp = tr->vpps;
  for (iv = 0; iv < nv; iv++) vp[iv].state[0] = vp[iv].state[1] = TAIL_EMIT;
  if (!t->zok || nv < 1) return 0;
  for (sp = 0; sp <= 1; sp++) {
    nd_candidate r, first = *c;
    int rs = 0;
    if (!t->walked[sp]) continue;
    first.vpp = vp[0].vpp;
    first.layout = (unsigned char)vp[0].layout[0];
    if ((why = check_sp(w, tr, &first, sp, &r)) >= 0) {
      if (nd_refusal_shared((nd_refusal)why, 1))
        for (iv = 0; iv < nv; iv++) { vp[iv].state[sp] = TAIL_REFUSED; vp[iv].code[sp] = why; }
      else left = 1;
      continue;
    }
    groups = 0;  /* (each pair's shard group: filled when a memory bound needs them) */
    for (iv = 0; iv < nv; iv++) { tr->sv[iv] = vp[iv].vpp; vp[iv].state[sp] = TAIL_SKIP_MEMORY; }
    for (irc = 0; irc < t->nrc && rs == 0; irc++) {
      nd_bound *b = bd[t->rcv[irc]];
      int memory = 1;  /* every pair pruned by memory */
      st->precision = (nd_recipe_id)t->rcv[irc];
      r.precision = (unsigned char)t->rcv[irc];
      /* over the cut by time at every VPP: by the floor (its pairs' least), else by the
         group's own spread; counted by time then, whatever the memory (the floor, which
         knows no memory, prunes as the spread would) */
      if (b && nd_bound_floor(b, &r, st, nv, tr->sv, &least) == 0
          && over_at_every(&least, 1, tr->time_cut)) {
        skip_by_time(vp, nv, sp);
        continue;
      }
      if (!b || nd_bound_spread(b, &r, st, nv, tr->sv, tr->st_t, params) != 0) {
        rs = -1;
        break;
      }
      if (over_at_every(tr->st_t, nv, tr->time_cut)) {
        skip_by_time(vp, nv, sp);
        continue;
      }
      if (!groups) {
        for (i = 0; i < t->n; i++) t->tg[i] = t->hv[t->th[i]] != 0 ? t->hv[t->th[i]] : st->dp_shard;
        groups = 1;
      }
      if (++tr->mem_now == 0) {  /* each pair's memory bound of this recipe: as asked */
        memset(tr->mem_at, 0, sizeof tr->mem_at);  /* (wrapped: none is this one's) */
        tr->mem_now = 1;
      }
      for (i = 0; i < t->n && memory; i++) {
        r.zero = (unsigned char)t->tz[i];
        memory = verdict(w, &r, -HUGE_VAL, pair_mem(tr, b, st, params, i), tr->time_cut,
                         tr->over_cut) == 2;
      }
      if (memory) continue;  /* this recipe's: every VPP by memory */
      for (iv = 0; iv < nv; iv++) {
        int *state = &vp[iv].state[sp], all = 1;
        if (*state == TAIL_EMIT) continue;
        /* (over the cut by time, every pair's verdict prunes: verdict's margin) */
        if (tr->st_t[iv] * (1.0 - 1e-9) > tr->time_cut) { *state = TAIL_SKIP_TIME; continue; }
        for (i = 0; i < t->n && all; i++) {
          r.zero = (unsigned char)t->tz[i];
          all = verdict(w, &r, tr->st_t[iv], pair_mem(tr, b, st, params, i), tr->time_cut,
                        tr->over_cut) != 0;
        }
        *state = all ? TAIL_SKIP_TIME : TAIL_EMIT;
      }
    }
    for (iv = 0; iv < nv; iv++) {
      if (rs < 0) vp[iv].state[sp] = TAIL_EMIT;
      if (vp[iv].state[sp] == TAIL_EMIT) left = 1;
    }
  }
  return !left;
}

/*
** The innermost loops of the walk for one (recompute, degrees, vpp, layout) in c: the
** precision recipe, ZeRO, the shard group, SP (the shape in t->shape). At ZeRO 0 nothing
** is sharded: the shard group is all of DP only (HSDP's replicas would reduce nothing).
** same_as_none, lone: as in walk(). The walk's tree (t->ws NULL) emits each candidate;
** a pricing thread's counts what subtree (pre) or tail_sp knows of each SP value's
** candidates without checking them and processes the rest, each at its place in the
** walk's order (its index). Returns 0, or -1 to stop.
*/
static int walk_tail (walker *w, tree *t, nd_candidate *c, int same_as_none, int lone,
                      const int *pre, const int *pre_code) {
  const tail_shape *sh = &t->shape;
  const int *zv = sh->zv;
  int nz = sh->nz, nh = sh->nh, irc, iz, ih, sp;
  int state[2] = {TAIL_EMIT, TAIL_EMIT}, code[2] = {0, 0}, emit_any = 0, known[2] = {0, 0};
  for (sp = 0; sp <= 1; sp++) {
    if (!sh->walked[sp] || sh->per == 0) continue;
    if (t->ws) {
      state[sp] = pre[sp];
      code[sp] = pre_code[sp];
      if (state[sp] == TAIL_EMIT) state[sp] = tail_sp(w, t, c, sp, &code[sp]);
      if (state[sp] == TAIL_VERDICTS) { known[sp] = 1; state[sp] = TAIL_EMIT; }
    }
    if (state[sp] == TAIL_EMIT) emit_any = 1;
  }
  if (!emit_any) {  /* nothing to process: counted as a whole */
    for (sp = 0; sp <= 1 && t->ws; sp++)
      if (sh->walked[sp]) count_as(t, state[sp], code[sp], sh->per);
    return 0;
  }
  for (irc = 0; irc < sh->nrc; irc++)
    for (iz = 0; iz < nz; iz++) {
      /* ZeRO 1 and 2 then change nothing from the stage below them (ZeRO 3 still does:
         its gather buffers) */
      int same = same_as_none || (lone && iz > 0 && zv[iz] <= 2);
      for (ih = 0; ih < nh; ih++) {
        if (zv[iz] == 0 && sh->hv[ih] != 0 && sh->hv[ih] != sh->full) continue;
        for (sp = 0; sp <= 1; sp++) {
          int flag;
          if (!sh->walked[sp]) continue;
          if (state[sp] != TAIL_EMIT) {  /* its place in the walk, counted as known */
            count_as(t, state[sp], code[sp], 1);
            continue;
          }
          c->precision = (unsigned char)sh->rcv[irc];
          c->zero = (unsigned char)zv[iz];
          c->dp_shard = sh->hv[ih];
          c->sp = (unsigned char)sp;
          flag = (same ? CAND_EQUIVALENT : CAND_UNCHECKED)
               | (known[sp] ? t->verdict[sp][(irc * nz + iz) * nh + ih] : 0);
          if (!t->ws) {
            emit(w, c, same, 0);
            if (w->status != ND_SEARCH_OK) return -1;
          }
          else if (process_one(w, t->s, t->ws, c, t->next++, flag) != 0) return -1;
        }
      }
    }
  return 0;
}

/* Counts every candidate of a sub-tree subtree settled whole, as it settled them. */
static void count_subtree (tree *t) {
  int iv, sp;
  for (iv = 0; iv < t->nv; iv++)
    for (sp = 0; sp <= 1; sp++)
      if (t->shape.walked[sp])
        count_as(t, t->vpps[iv].state[sp], t->vpps[iv].code[sp],
                 t->shape.per * (unsigned long long)t->vpps[iv].n);
}

/* A node of slot s (walk index `index`, CAND_NODE flags), walked on this pricing thread:
   subtree, then each VPP's layouts' tails. Returns 0, or -1 to stop. */
int nd_walk_node (walker *w, slot *s, worker_scratch *ws, const nd_candidate *node,
                  unsigned long long index, int flag) {
  tree *t = &ws->tree;
  nd_candidate c = *node;
  int iv, il, same = (flag & NODE_SAME) != 0, lone = (flag & NODE_LONE) != 0;
  t->s = s;
  t->time_cut = s->time_cut;
  t->over_cut = s->over_cut;
  t->next = index;
  if (t->pp != c.pp) vpps_of(w, t, c.pp);
  shape_of(w, t, c.tp, c.dp);
  if (subtree(w, t, &c)) {  /* known whole: counted, not walked */
    count_subtree(t);
    return 0;
  }
  for (iv = 0; iv < t->nv; iv++)
    for (il = 0; il < t->vpps[iv].n; il++) {
      c.vpp = t->vpps[iv].vpp;
      c.layout = (unsigned char)t->vpps[iv].layout[il];
      if (walk_tail(w, t, &c, same, lone, t->vpps[iv].state, t->vpps[iv].code) != 0) return -1;
    }
  return 0;
}

/* Hands the node of c (recompute and the degrees down to etp) to the pricing threads: its
   `size` candidates take the walk's next places. */
static void emit_node (walker *w, const nd_candidate *c, int same_as_none, int lone,
                       unsigned long long size) {
  unsigned long long index;
  slot *s;
  int flag;
  if (w->status != ND_SEARCH_OK) return;
  if (w->p->stop && *w->p->stop) { w->status = ND_SEARCH_STOPPED; return; }
  index = w->counts->tested;
  w->counts->tested += size;
  flag = CAND_NODE | (same_as_none ? NODE_SAME : 0) | (lone ? NODE_LONE : 0);
  if (w->ln) { nd_lanes_node(w, c, index, flag); return; }
  s = nd_pool_current(w);
  if (s->n == 0) { s->time_cut = w->time_cut; s->over_cut = w->over_cut; }
  s->cand[s->n] = *c;
  s->index[s->n] = index;
  s->flag[s->n] = (unsigned char)flag;
  /* a chunk spans nd_walk_span places of the walk, or `chunk` nodes: the cuts come about
     as many places late as when every candidate was emitted */
  if (++s->n == w->chunk || w->counts->tested - s->index[0] >= nd_walk_span(w, s->index[0]))
    nd_pool_submit(w);
}

/* The walk below one (recompute, tp): PP, CP, MBS, EP, ETP, then each node (or, without
   nodes, each VPP and layout's tail). */
static void walk_tp (walker *w, int rec, int same_as_none, int tp) {
  const nd_dim_set *D = w->p->dim;
  const nd_search_bounds *b = &w->b;
  long long N = w->job->devices, G = w->job->global_batch;
  tree *t = &w->tree;
  int pv[LOOP_MAX], cv[LOOP_MAX], bv[LOOP_MAX], ev[LOOP_MAX], xv[LOOP_MAX];
  int np, nc, nb, ne, nx, ip, ic, ib, ie, ix, iv;
  np = loop_values(&D[ND_DIM_PP], N / tp, b->pp, pv);
  for (ip = 0; ip < np; ip++) {
    int pp = pv[ip];
    vpps_of(w, t, pp);  /* uneven: each distinct layout variant, its own candidate */
    nc = loop_values(&D[ND_DIM_CP], N / tp / pp, b->cp, cv);
    for (ic = 0; ic < nc; ic++) {
      int cp = cv[ic];
      long long dp = N / ((long long)tp * pp * cp), q;
      if (dp < 1) break;
      shape_of(w, t, tp, (int)dp);
      /* MBS: automatic, the sizes that leave a micro-batch per stage at least (a larger
         micro-batch with fewer micro-batches than stages holds more activations and idles
         longer: it gains only GEMM size), or every size when the batch leaves fewer
         sequences than stages -- runs trainers start with a bubble warning (Megatron-LM
         d98e8a6 schedules.py:2278, torchtitan pipeline_parallel.py:305-309); listed or
         pinned: each that divides a DP rank's batch */
      q = G / ((long long)pp * dp);
      if (q < 1 || !D[ND_DIM_MBS].is_auto) q = G / dp;
      if (q < 1) continue;  /* fewer sequences than pipelines: none reachable */
      nb = loop_values(&D[ND_DIM_MBS], q, b->mbs, bv);
      for (ib = 0; ib < nb; ib++) {
        int mbs = bv[ib];
        long long mb = G / dp / mbs;
        ne = loop_values(&D[ND_DIM_EP], dp * tp, b->ep, ev);
        for (ie = 0; ie < ne; ie++) {
          int ep = ev[ie];
          nx = loop_values(&D[ND_DIM_ETP], tp, b->etp, xv);
          for (ix = 0; ix < nx; ix++) {
            int etp = xv[ix];
            /* nothing for ZeRO to shard: one replica of the dense weights (dp*cp) and of
               the experts (dp*cp*tp over ep*etp) */
            int lone = dp * cp == 1
                && (w->m->num_experts == 0 || dp * cp * tp == (long long)ep * etp);
            nd_candidate c;
            memset(&c, 0, sizeof c);
            c.dp = (int)dp; c.tp = tp; c.pp = pp; c.cp = cp;
            c.mbs = mbs; c.mb = (int)mb; c.ep = ep; c.etp = etp;
            c.recompute = (unsigned char)rec;
            if (w->tail) {  /* the sub-tree, walked by a pricing thread */
              unsigned long long size = node_size(t);
              if (size > 0) emit_node(w, &c, same_as_none, lone, size);
              if (w->status != ND_SEARCH_OK) return;
              continue;
            }
            for (iv = 0; iv < t->nv; iv++) {
              int il;
              for (il = 0; il < t->vpps[iv].n; il++) {
                c.vpp = t->vpps[iv].vpp;
                c.layout = (unsigned char)t->vpps[iv].layout[il];
                walk_tail(w, t, &c, same_as_none, lone, NULL, NULL);
                if (w->status != ND_SEARCH_OK) return;
              }
            }
          }
        }
      }
    }
  }
}

/*
** The walk's order: the first recompute pass over every TP, then TP by TP the other
** passes, each under the TP. The first (none, when walked) ranks the fastest plans early,
** so its cuts prune the rest as much as when each pass walked every TP in turn; after it,
** the groups of layer prices the bounds look up (search_bound.c: one per tp, cp, mbs, ep,
** etp, sp) come back within one TP's walk, not once per pass across the whole search: the
** later passes need one TP's groups at a time kept, and only the first pass's groups kept
** to the later passes save their pricing again. So the later passes take the TPs the other
** way round, from the last the first pass walked, whose groups the caches still hold
** (DeepSeek-V3 on 2,048 H800 with three recipes and HSDP: 88,338 -> 66,714 groups priced,
** -j 1 0.288 -> 0.268 s; auto alone 19,381 -> 18,396).
*/
static void walk (walker *w) {
  const nd_search_params *p = w->p;
  const nd_dim_set *D = p->dim;
  int rv[LOOP_MAX], tv[LOOP_MAX], rec[LOOP_MAX], same[LOOP_MAX];
  int nr, nt, n = 0, ir, it, k;
  nd_dim_set rec_auto = {0, ND_RECOMPUTE_COUNT + 1, {0, 1, 2, ND_SEARCH_PER_LAYER}};
  nd_dim_set zero_auto = {0, 4, {0, 1, 2, 3}};
  nr = loop_values(D[ND_DIM_RECOMPUTE].is_auto ? &rec_auto : &D[ND_DIM_RECOMPUTE], 0, 0, rv);
  w->nz = loop_values(D[ND_DIM_ZERO].is_auto ? &zero_auto : &D[ND_DIM_ZERO], 0, 0, w->zv);
  for (ir = 0; ir < nr; ir++) {
    /* selective that keeps the same tensors as none (flash attention, the attention core
       its only switch) repeats every none candidate: not walked under auto, counted as
       equivalent when both are listed */
    int same_as_none = rv[ir] == ND_RECOMPUTE_SELECTIVE && p->base.flash_attention
        && (p->base.selective_ops & ~ND_OP_BIT(ND_OP_ATTN_CORE)) == 0;
    if (same_as_none && D[ND_DIM_RECOMPUTE].is_auto) continue;
    rec[n] = rv[ir];
    same[n++] = same_as_none && in_set(&D[ND_DIM_RECOMPUTE], ND_RECOMPUTE_NONE);
  }
  if (n == 0) return;
  nt = loop_values(&D[ND_DIM_TP], w->job->devices, w->b.tp, tv);
  begin_segment(w, rec[0], -1);
  for (it = 0; it < nt; it++) {
    if (w->twin == TWIN_RECORD) w->none_tp[it] = w->counts->tested - w->none_start;
    walk_tp(w, rec[0], same[0], tv[it]);
    if (w->status != ND_SEARCH_OK) return;
  }
  for (it = nt - 1; it >= 0; it--)
    for (k = 1; k < n; k++) {
      begin_segment(w, rec[k], it);
      if (w->status != ND_SEARCH_OK) return;
      walk_tp(w, rec[k], same[k], tv[it]);
      if (w->status != ND_SEARCH_OK) return;
    }
}

/* Entry i of slot s, priced into s. 0, or -1 to stop. */
int nd_walk_price_entry (walker *w, slot *s, worker_scratch *ws, int i) {
  return (s->flag[i] & CAND_KIND) == CAND_NODE
       ? nd_walk_node(w, s, ws, &s->cand[i], s->index[i], s->flag[i])
       : process_one(w, s, ws, &s->cand[i], s->index[i], s->flag[i]);
}

int nd_walk_admit (walker *w, slot *s) {
  int i, k = 0, keep;
  for (i = 0; i < s->npend; i++) {
    if (w->status != ND_SEARCH_OK) { s->npend = 0; return -1; }  /* stopping: none priced */
    keep = 1;
    if (w->hooks->admit(w->hooks->ud, &s->pend[i], &keep) != 0) {
      w->status = ND_SEARCH_HOOK_ERROR;
      s->npend = 0;
      return -1;
    }
    if (!keep) { s->late[ND_REFUSE_FILTERED]++; continue; }
    s->pend[k] = s->pend[i];
    s->pend_index[k++] = s->pend_index[i];
  }
  s->npend = k;
  return 0;
}

int nd_walk_price_pending (walker *w, slot *s, worker_scratch *ws) {
  int i;
  for (i = 0; i < s->npend; i++) {
    if (w->p->stop && *w->p->stop) return -1;
    if (price_one(w, s, ws, &s->pend[i], s->pend_index[i]) != 0) return -1;
  }
  return 0;
}

/* A chunk's counts (or a window part's) into the caller's. */
static void deliver_counts (walker *w, const slot *s) {
  nd_search_counts *c = w->counts;
  int r;
  for (r = 0; r < ND_REFUSE_COUNT; r++) c->refused[r] += s->late[r];
  /* a candidate the process had no memory to price: the run fails (its counts would
     depend on the allocator), nothing more is delivered */
  if (s->late[ND_REFUSE_NO_MEMORY] > 0 && w->status == ND_SEARCH_OK)
    w->status = ND_SEARCH_NO_MEMORY;
  c->equivalent += s->equivalent;
  c->pruned_time += s->pruned_time;
  c->pruned_memory += s->pruned_memory;
  c->skipped_time += s->skipped_time;
  c->skipped_memory += s->skipped_memory;
  c->priced += (unsigned long long)s->priced;
}

/* n rows, in walk order, to the caller: counted, the none pass's fits recorded, then the
   deliver hook. */
static void deliver_rows (walker *w, nd_search_row *rows, int n) {
  nd_search_counts *c = w->counts;
  int i;
  for (i = 0; i < n; i++) {
    if (rows[i].fits) c->fit++;
    else c->refused[ND_REFUSE_MEMORY]++;
    if ((w->twin == TWIN_RECORD || w->twin == TWIN_DONE)
        && rows[i].c.recompute == ND_RECOMPUTE_NONE)
      record_fit(w, &rows[i]);
  }
  if (w->status == ND_SEARCH_OK && w->hooks && w->hooks->deliver
      && w->hooks->deliver(w->hooks->ud, rows, n) != 0)
    w->status = ND_SEARCH_HOOK_ERROR;
}

/* After a chunk (or window) delivered: the progress hook, then the cuts after it. */
static void deliver_end (walker *w) {
  if (w->status == ND_SEARCH_OK && w->hooks && w->hooks->progress
      && w->hooks->progress(w->hooks->ud, w->counts) != 0)
    w->status = ND_SEARCH_HOOK_ERROR;
  {  /* the cuts after this chunk (delivered chunks are numbered in walk order) */
    unsigned long long k = (w->delivered - 1) % CUT_LAG;
    w->cut_time[k] = w->cut_over[k] = HUGE_VAL;
    if (w->hooks && w->hooks->cuts)
      w->hooks->cuts(w->hooks->ud, &w->cut_time[k], &w->cut_over[k]);
  }
}

/* Hands a priced chunk to the caller (calling thread) and frees its slot. */
void nd_walk_deliver (walker *w, slot *s) {
  int left, n;
  row_block *b;
  deliver_counts(w, s);
  for (b = s->rows, left = s->priced; left > 0; b = b->next, left -= n) {
    n = left < ROW_BLOCK ? left : ROW_BLOCK;
    deliver_rows(w, b->rows, n);  /* a block at a time, in walk order */
  }
  nd_pool_rows_done(w, s);
  deliver_end(w);
  s->state = SLOT_FREE;
  s->n = 0;
}

/* Where a part's rows are read from: its block, the row in it, the rows left. */
typedef struct row_cursor {
  const row_block *b;
  int at, left;
} row_cursor;

void nd_walk_deliver_window (walker *w, slot *const *parts, int n, row_block *stage) {
  row_cursor cur[LANES_MAX];
  int i, m = 0;
  for (i = 0; i < n; i++) {
    deliver_counts(w, parts[i]);
    cur[i].b = parts[i]->rows;
    cur[i].at = 0;
    cur[i].left = parts[i]->priced;
  }
  for (;;) {  /* the parts' rows, each in walk order, merged by walk index */
    int best = -1;
    for (i = 0; i < n; i++)
      if (cur[i].left > 0
          && (best < 0 || cur[i].b->rows[cur[i].at].index < cur[best].b->rows[cur[best].at].index))
        best = i;
    if (best >= 0) {
      row_cursor *c = &cur[best];
      stage->rows[m++] = c->b->rows[c->at];
      c->left--;
      if (++c->at == ROW_BLOCK) { c->b = c->b->next; c->at = 0; }
    }
    if (m > 0 && (m == ROW_BLOCK || best < 0)) {
      deliver_rows(w, stage->rows, m);
      m = 0;
    }
    if (best < 0) break;
  }
  deliver_end(w);
}

void nd_walk_lane (walker *me) {
  new_bound_caches(me);  /* on its thread: its pages are its processor's first */
  if (!(me->inline_scratch = nd_walk_new_scratch(me))) me->status = ND_SEARCH_NO_MEMORY;
  if (me->status == ND_SEARCH_OK) walk(me);
  nd_lanes_drain(me);
  nd_walk_free_scratch(me->inline_scratch);
  me->inline_scratch = NULL;
  free_bound_caches(me);
}

int nd_search_run (const nd_search_params *p, const nd_model_spec *m, const nd_device *dev,
                   const nd_job *job, const nd_costs *costs, const nd_search_hooks *hooks,
                   nd_search_counts *counts, char *err, size_t errlen) {
  walker *w;
  int status;
  memset(counts, 0, sizeof *counts);
  if (job->devices < 1 || job->global_batch < 1 || job->seq_len < 1) {
    if (err && errlen) snprintf(err, errlen, "devices, global_batch and seq_len must be positive");
    return ND_SEARCH_BAD_INPUT;
  }
  w = (walker *)calloc(1, sizeof *w);
  if (!w) return ND_SEARCH_NO_MEMORY;
  w->p = p; w->m = m; w->dev = dev; w->job = job; w->costs = costs; w->hooks = hooks;
  w->counts = counts;
  nd_search_bounds_of(p, m, job, &w->b);
  w->scratch = p->base;
  /* candidates walked, checked by a worker: places of the walk a chunk (a window of the
     lanes) spans, CUT_LAG of them between a cut and its use (search_walk.h) */
  w->chunk = p->chunk > 0 ? p->chunk : 1024;
  w->threads = p->jobs > 1 ? p->jobs - 1 : 0;  /* workers; this thread is the last one */
  /* as many chunks in flight as the cuts allow: a chunk that costs many times the mean
     (a node's per-layer plans) keeps the walk from filling while it prices it, and the
     other threads price what it filled before (with chunks of 512, 8 in flight at -j 2
     left a worker idle about 5% of DeepSeek-V3's search on 2,048 devices, 16 about 1.5%) */
  w->nslots = w->threads > 0 ? CUT_LAG : 1;
  /* the cuts before any row is delivered: the caller's (a caller that keeps no nearest
     misses exact prunes by memory from the first chunk) */
  w->first_time_cut = w->first_over_cut = HUGE_VAL;
  if (hooks && hooks->cuts) hooks->cuts(hooks->ud, &w->first_time_cut, &w->first_over_cut);
  w->time_cut = w->first_time_cut;
  w->over_cut = w->first_over_cut;
  w->tail = !p->exhaustive;
  w->admits = w->tail && hooks && hooks->admit;
  /* lanes: each thread walks its own part with its own bound caches; the pool's threads
     share the caller's, made before they start */
  if (nd_lanes_apply(w)) {
    status = nd_lanes_open(w);
    if (status == ND_SEARCH_OK) new_bound_caches(w);
  }
  else {
    if (!p->exhaustive) new_bound_caches(w);
    if ((status = nd_pool_open(w)) != ND_SEARCH_OK) free_bound_caches(w);
  }
  if (status != ND_SEARCH_OK) {
    free(w);
    return status;
  }
  if (!(w->inline_scratch = nd_walk_new_scratch(w))) w->status = ND_SEARCH_NO_MEMORY;
  if (w->status == ND_SEARCH_OK) walk(w);
  drain(w);
  if (w->ln) nd_lanes_close(w);
  else nd_pool_close(w);
  nd_walk_free_scratch(w->inline_scratch);
  free_bound_caches(w);
  free(w->fits);
  if (w->status == ND_SEARCH_OK && p->stop && *p->stop) w->status = ND_SEARCH_STOPPED;
  status = w->status;
  free(w);
  return status;
}
