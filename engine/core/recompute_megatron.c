/*
** recompute_megatron.c -- the recompute Megatron-LM can state, chosen for a memory budget.
**
** Megatron recomputes selectively everywhere (--recompute-granularity selective), fully on
** every layer (--recompute-method uniform), or fully on the first N layers of each pipeline
** stage -- of each model chunk with VPP -- with one N everywhere (--recompute-method block
** --recompute-num-layers N). Block N recomputes more as N grows, so its peak only falls and
** its time only grows with N: the smallest N that fits is found by bisection, and the
** fastest fitting form wins. With an offload share the time need not grow with N (what a
** layer recomputes it no longer copies to host and back): every fitting N is priced. The
** same rule as lua/ndplan/block_plan.lua on a fixed layout, in C so that the search can
** rank every candidate by what Megatron can run. A search keeps one workspace per thread
** (nd_megatron_ws): the layout is resolved once per choice, each block N's plan read off
** each layer's place in its group, and the forms priced through the thread's price cache.
*/
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/layout.h"
#include "ndplan/recompute.h"

/* Walks each group (a stage, or a chunk of one) of a resolved layout: each layer's place in
   its group into pos. */
typedef struct group_walk {
  unsigned short *pos;
  int chunk, at, most;
} group_walk;

static void mark (int layer, int chunk, void *ud) {
  group_walk *g = (group_walk *)ud;
  if (chunk != g->chunk) { g->chunk = chunk; g->at = 0; }
  g->pos[layer] = (unsigned short)g->at;
  if (++g->at > g->most) g->most = g->at;
}

/* Every stage of the resolved layout walked (group_walk; a layer no stage holds, which a
   resolved layout has not, at USHRT_MAX); returns the largest group. */
static int walk_groups (const nd_model_spec *m, const nd_strategy *resolved,
                        unsigned short *pos) {
  int s, most = 0;
  memset(pos, 0xff, (size_t)(m->num_layers + m->mtp_layers) * sizeof *pos);
  for (s = 0; s < resolved->pp; s++) {
    group_walk g = {pos, -1, 0, 0};
    nd_stage_foreach(resolved, (int)m->num_layers, (int)m->mtp_layers, s, mark, &g);
    if (g.most > most) most = g.most;
  }
  return most;
}

/* Block n's modes: full on the first n layers of each group (pos: each layer's place). */
static void block_modes (const unsigned short *pos, int total, int n, unsigned char *modes) {
  int i;
  for (i = 0; i < total; i++)
    modes[i] = (unsigned char)(pos[i] < n ? ND_RECOMPUTE_FULL : ND_RECOMPUTE_NONE);
}

/* The whole-model mode of a form other than block. */
static nd_recompute uniform_mode (int method) {
  return method == ND_MEGATRON_SELECTIVE ? ND_RECOMPUTE_SELECTIVE
       : method == ND_MEGATRON_UNIFORM ? ND_RECOMPUTE_FULL : ND_RECOMPUTE_NONE;
}

int nd_megatron_form (const nd_model_spec *m, const nd_job *job, nd_strategy *st, int method,
                      int n, nd_layer_plan *layers, char *err, size_t errlen) {
  nd_strategy resolved;
  size_t total = (size_t)(m->num_layers + m->mtp_layers);
  unsigned short pos[ND_MAX_LAYERS];
  int most;
  if (nd_strategy_resolve_to(st, m, job, &resolved, err, errlen) != 0) return -1;
  most = walk_groups(m, &resolved, pos);
  if (method != ND_MEGATRON_BLOCK) {
    st->layers = NULL;
    st->recompute = uniform_mode(method);
    return most;
  }
  if (!layers) {
    snprintf(err, errlen, "recompute: a block form needs storage for its per-layer plan");
    return -1;
  }
  memset(layers->offload, 0, total);
  memset(layers->ops, 0, total);
  st->layers = layers;
  block_modes(pos, (int)total, n, layers->recompute);
  return most;
}

/* A choice's tables, kept between runs (nd_megatron_ws_new): the strategies priced and
   kept, each with its own plan, their estimates, and each layer's place in its group. */
struct nd_megatron_ws {
  nd_price_cache *pc;               /* the caller's layer prices, or NULL */
  nd_strategy work, best_st, block_st;
  nd_layer_plan work_plan, best_plan, block_plan;
  nd_estimate cand, best, block;    /* the last priced; the best kept; the smallest fitting N */
  unsigned short pos[ND_MAX_LAYERS];  /* each layer's place in its stage or chunk */
  int forms[3 + ND_MAX_LAYERS][2];  /* balance: the fitting forms (method, N), in order */
};

nd_megatron_ws *nd_megatron_ws_new (void) {
  nd_megatron_ws *ws = (nd_megatron_ws *)malloc(sizeof *ws);
  if (ws) ws->pc = NULL;
  return ws;
}

void nd_megatron_ws_free (nd_megatron_ws *ws) { free(ws); }

void nd_megatron_ws_cache (nd_megatron_ws *ws, nd_price_cache *pc) { ws->pc = pc; }

/* One choice: what it was given and where it stands. */
typedef struct megatron_run {
  const nd_model_spec *m;
  const nd_device *dev;
  const nd_job *job;
  const nd_costs *costs;
  const nd_strategy *given;
  double budget;
  nd_megatron_choice *choice;
  nd_megatron_ws *w;
  int total;                        /* body + MTP layers */
  int have, block_n, nforms;
} megatron_run;

/* An estimate's used part: its stages, not all ND_MAX_STAGES (70 KB copied whole were 40%
   of a Megatron search's instructions). */
static void copy_estimate (nd_estimate *to, const nd_estimate *from) {
  memcpy(to, from, offsetof(nd_estimate, stage) + (size_t)from->stages * sizeof from->stage[0]);
}

/* Whether b beats a: faster, or as fast with less memory. */
static int better (const nd_estimate *b, const nd_estimate *a) {
  return b->step_time < a->step_time * (1.0 - 1e-12)
         || (b->step_time <= a->step_time * (1.0 + 1e-12) && b->peak < a->peak);
}

/* Keeps the form in work / cand (priced) when it fits and beats the best so far; with
   balance, lists it instead (each fitting form is balanced afterwards). */
static void keep (megatron_run *x, int method, int n, int balance) {
  nd_megatron_ws *w = x->w;
  if (!(w->cand.peak <= x->budget)) return;
  if (balance) {
    w->forms[x->nforms][0] = method;
    w->forms[x->nforms][1] = n;
    x->nforms++;
  }
  else if (!x->have || better(&w->cand, &w->best)) {
    copy_estimate(&w->best, &w->cand);
    nd_strategy_own_plan(&w->best_st, &w->work, &w->best_plan, x->total);
    x->have = 1;
    x->choice->method = method;
    x->choice->num_layers = n;
  }
}

/* The given strategy with a form into work: block n from each layer's place in its group
   (the layout resolved once per choice: nd_megatron_form's modes, without resolving). */
static void set_form (megatron_run *x, int method, int n) {
  nd_megatron_ws *w = x->w;
  w->work = *x->given;
  if (method != ND_MEGATRON_BLOCK) {
    w->work.layers = NULL;
    w->work.recompute = uniform_mode(method);
    return;
  }
  block_modes(w->pos, x->total, n, w->work_plan.recompute);
  w->work.layers = &w->work_plan;
}

/* Prices the given strategy with a form into work / cand; *fits. */
static int price_form (megatron_run *x, int method, int n, int *fits, char *err,
                       size_t errlen) {
  nd_megatron_ws *w = x->w;
  set_form(x, method, n);
  x->choice->priced++;
  if (nd_estimate_run_cached(x->m, x->dev, x->job, &w->work, x->costs, w->pc, &w->cand, err,
                             errlen) != 0)
    return -1;
  if (w->cand.peak < x->choice->least_peak) {
    x->choice->least_peak = w->cand.peak;
    x->choice->least_method = method;
    x->choice->least_num_layers = n;
  }
  *fits = w->cand.peak <= x->budget;
  return 0;
}

/* Block N priced (each N once: the smallest fitting one is kept aside). */
static int price_block (megatron_run *x, int n, int *fits, char *err, size_t errlen) {
  nd_megatron_ws *w = x->w;
  if (n == x->block_n) {
    w->work = w->block_st;
    copy_estimate(&w->cand, &w->block);
    *fits = 1;
    return 0;
  }
  if (price_form(x, ND_MEGATRON_BLOCK, n, fits, err, errlen) != 0) return -1;
  if (*fits && (x->block_n == 0 || n < x->block_n)) {
    x->block_n = n;
    nd_strategy_own_plan(&w->block_st, &w->work, &w->block_plan, x->total);
    copy_estimate(&w->block, &w->cand);
  }
  return 0;
}

/* The layout resolved once: each layer's place in its group (w->pos), the largest group
   (returned, or -1 when st is refused), and the plan's tables block forms leave at 0. */
static int prepare (megatron_run *x, char *err, size_t errlen) {
  nd_megatron_ws *w = x->w;
  if (nd_strategy_resolve_to(x->given, x->m, x->job, &w->work, err, errlen) != 0) return -1;
  memset(w->work_plan.offload, 0, (size_t)x->total);
  memset(w->work_plan.ops, 0, (size_t)x->total);
  return walk_groups(x->m, &w->work, w->pos);
}

/* Every fitting form listed by keep, balanced on its own layout: the fastest wins. */
static int balance_forms (megatron_run *x, char *err, size_t errlen) {
  nd_megatron_ws *w = x->w;
  int i;
  for (i = 0; i < x->nforms; i++) {
    int moves = 0;
    w->work = *x->given;
    if (nd_layout_balance_megatron(x->m, x->dev, x->job, &w->work, x->costs, x->budget,
                                   w->forms[i][0], w->forms[i][1], &w->work_plan, &w->cand,
                                   &moves, err, errlen) != 0)
      return -1;
    if (!x->have || better(&w->cand, &w->best)) {
      copy_estimate(&w->best, &w->cand);
      nd_strategy_own_plan(&w->best_st, &w->work, &w->best_plan, x->total);
      x->have = 1;
      x->choice->method = w->forms[i][0];
      x->choice->num_layers = w->forms[i][1];
      x->choice->moves = moves;
    }
  }
  return 0;
}

/* A choice before any form is priced (its plan's tables are left as they are). */
static void choice_start (nd_megatron_choice *c) {
  c->method = ND_MEGATRON_REFUSED;  /* until a form is chosen (the search's label) */
  c->num_layers = c->moves = c->priced = 0;
  c->least_method = c->least_num_layers = 0;
  c->least_peak = HUGE_VAL;
}

int nd_recompute_megatron_choose_ws (const nd_model_spec *m, const nd_device *dev,
                                     const nd_job *job, nd_strategy *st, const nd_costs *costs,
                                     double budget, int balance, nd_estimate *out,
                                     nd_megatron_choice *choice, nd_megatron_ws *ws,
                                     char *err, size_t errlen) {
  static const int uniform[3] = {ND_MEGATRON_NONE, ND_MEGATRON_SELECTIVE, ND_MEGATRON_UNIFORM};
  megatron_run run, *x = &run;
  int i, fits, most, lo, hi;
  choice_start(choice);
  if (!nd_schedule_megatron(st->schedule)) {
    snprintf(err, errlen, "degree out of bounds: Megatron has no flag for schedule %s",
             nd_schedule_name(st->schedule));
    return -1;
  }
  x->m = m; x->dev = dev; x->job = job; x->costs = costs; x->given = st; x->budget = budget;
  x->choice = choice;
  x->w = ws;
  x->total = (int)(m->num_layers + m->mtp_layers);
  x->have = x->block_n = x->nforms = 0;
  /* the largest group: the layout's biggest stage or chunk */
  if ((most = prepare(x, err, errlen)) < 0) return -1;
  for (i = 0; i < 3; i++) {  /* none, selective, full on every layer */
    if (price_form(x, uniform[i], uniform[i] == ND_MEGATRON_UNIFORM, &fits, err, errlen) != 0)
      return -1;
    keep(x, uniform[i], uniform[i] == ND_MEGATRON_UNIFORM, balance);
  }
  /* block N for N = 1 .. the largest group less one (N = the largest is uniform): the
     smallest N that fits, by bisection (its peak only falls as N grows); with balance every
     fitting N, as each balances differently, and with an offload share, as a larger N copies
     less (the fastest fitting N, so that a larger budget never gives a slower plan) */
  lo = 1;
  hi = most - 1;
  if (hi >= 1) {
    if (price_block(x, hi, &fits, err, errlen) != 0) return -1;
    if (fits) {
      while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (price_block(x, mid, &fits, err, errlen) != 0) return -1;
        if (fits) hi = mid; else lo = mid + 1;
      }
      for (i = lo; i <= (balance || st->offload > 0.0 ? most - 1 : lo); i++) {
        if (price_block(x, i, &fits, err, errlen) != 0) return -1;
        keep(x, ND_MEGATRON_BLOCK, i, balance);
      }
    }
  }
  if (balance_forms(x, err, errlen) != 0) return -1;
  if (!x->have) {
    choice->method = ND_MEGATRON_OVER;
    snprintf(err, errlen, "over memory: no recompute Megatron can state fits the %.2f GiB "
             "budget (full on every layer peaks at %.2f GiB)", budget / (1024.0 * 1024.0 * 1024.0),
             choice->least_peak / (1024.0 * 1024.0 * 1024.0));
    return -1;
  }
  nd_strategy_own_plan(st, &ws->best_st, &choice->layers, x->total);
  copy_estimate(out, &ws->best);
  err[0] = '\0';
  return 0;
}

int nd_recompute_megatron_choose (const nd_model_spec *m, const nd_device *dev,
                                  const nd_job *job, nd_strategy *st, const nd_costs *costs,
                                  double budget, int balance, nd_estimate *out,
                                  nd_megatron_choice *choice, char *err, size_t errlen) {
  nd_megatron_ws *ws = nd_megatron_ws_new();
  int rc;
  if (!ws) {
    choice_start(choice);
    snprintf(err, errlen, "recompute: out of memory");
    return -1;
  }
  rc = nd_recompute_megatron_choose_ws(m, dev, job, st, costs, budget, balance, out, choice,
                                       ws, err, errlen);
  nd_megatron_ws_free(ws);
  return rc;
}
