/*
** recompute_megatron.c -- the recompute Megatron-LM can state, chosen for a memory budget.
**
** Megatron recomputes selectively everywhere (--recompute-granularity selective), fully on
** every layer (--recompute-method uniform), or fully on the first N layers of each pipeline
** stage -- of each model chunk with VPP -- with one N everywhere (--recompute-method block
** --recompute-num-layers N). Block N recomputes more as N grows, so its peak only falls and
** its time only grows with N: the smallest N that fits is found by bisection, and the
** fastest fitting form wins. With an offload share the time need not grow with N (what a
** layer recomputes it no longer copies to host and back): every fitting N is priced. The same rule as lua/ndplan/block_plan.lua on a fixed layout,
** in C so that the search can rank every candidate by what Megatron can run.
*/
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/layout.h"
#include "ndplan/recompute.h"

/* Marks the first n layers of each group (a stage, or a chunk of one) full, the rest kept. */
typedef struct group_walk { unsigned char *modes; int n, chunk, pos, most; } group_walk;

static void mark (int layer, int chunk, void *ud) {
  group_walk *g = (group_walk *)ud;
  if (chunk != g->chunk) { g->chunk = chunk; g->pos = 0; }
  g->modes[layer] = (unsigned char)(g->pos < g->n ? ND_RECOMPUTE_FULL : ND_RECOMPUTE_NONE);
  if (++g->pos > g->most) g->most = g->pos;
}

/* The given strategy with block n on the resolved layout; returns the largest group. */
static int block_modes (const nd_model_spec *m, const nd_strategy *resolved, int n,
                        nd_strategy *work) {
  int s, most = 0;
  work->per_layer = 1;
  memset(work->layer_offload, 0, sizeof work->layer_offload);
  memset(work->layer_ops, 0, sizeof work->layer_ops);
  for (s = 0; s < resolved->pp; s++) {
    group_walk g = {work->layer_recompute, n, -1, 0, 0};
    nd_stage_foreach(resolved, (int)m->num_layers, (int)m->mtp_layers, s, mark, &g);
    if (g.most > most) most = g.most;
  }
  return most;
}

int nd_megatron_form (const nd_model_spec *m, const nd_job *job, nd_strategy *st, int method,
                      int n, char *err, size_t errlen) {
  nd_strategy resolved = *st;
  int most;
  if (nd_strategy_resolve(&resolved, m, job, err, errlen) != 0) return -1;
  if (method == ND_MEGATRON_BLOCK) return block_modes(m, &resolved, n, st);
  most = block_modes(m, &resolved, 0, st);  /* the largest group; then a whole-model mode */
  st->per_layer = 0;
  st->recompute = method == ND_MEGATRON_SELECTIVE ? ND_RECOMPUTE_SELECTIVE
                : method == ND_MEGATRON_UNIFORM ? ND_RECOMPUTE_FULL : ND_RECOMPUTE_NONE;
  return most;
}

typedef struct megatron_run {
  const nd_model_spec *m;
  const nd_device *dev;
  const nd_job *job;
  const nd_costs *costs;
  const nd_strategy *given;
  double budget;
  nd_megatron_choice *choice;
  nd_strategy work, best_st, block_st;
  nd_estimate cand, best, block;  /* the last priced; the best kept; the smallest fitting N */
  int have, block_n;
  int forms[3 + ND_MAX_LAYERS][2];  /* balance: the fitting forms (method, N), in order */
  int nforms;
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

/* Keeps the form in x->work / x->cand (priced) when it fits and beats the best so far; with
   balance, lists it instead (each fitting form is balanced afterwards). */
static void keep (megatron_run *x, int method, int n, int balance) {
  if (!(x->cand.peak <= x->budget)) return;
  if (balance) {
    x->forms[x->nforms][0] = method;
    x->forms[x->nforms][1] = n;
    x->nforms++;
  }
  else if (!x->have || better(&x->cand, &x->best)) {
    copy_estimate(&x->best, &x->cand);
    x->best_st = x->work;
    x->have = 1;
    x->choice->method = method;
    x->choice->num_layers = n;
  }
}

/* Prices the given strategy with a form into x->work / x->cand; *fits. */
static int price_form (megatron_run *x, int method, int n, int *fits, char *err,
                       size_t errlen) {
  x->work = *x->given;
  if (nd_megatron_form(x->m, x->job, &x->work, method, n, err, errlen) < 0) return -1;
  x->choice->priced++;
  if (nd_estimate_run(x->m, x->dev, x->job, &x->work, x->costs, &x->cand, err, errlen) != 0)
    return -1;
  if (x->cand.peak < x->choice->least_peak) {
    x->choice->least_peak = x->cand.peak;
    x->choice->least_method = method;
    x->choice->least_num_layers = n;
  }
  *fits = x->cand.peak <= x->budget;
  return 0;
}

/* Block N priced (each N once: the smallest fitting one is kept aside). */
static int price_block (megatron_run *x, int n, int *fits, char *err, size_t errlen) {
  if (n == x->block_n) {
    x->work = x->block_st;
    copy_estimate(&x->cand, &x->block);
    *fits = 1;
    return 0;
  }
  if (price_form(x, ND_MEGATRON_BLOCK, n, fits, err, errlen) != 0) return -1;
  if (*fits && (x->block_n == 0 || n < x->block_n)) {
    x->block_n = n;
    x->block_st = x->work;
    copy_estimate(&x->block, &x->cand);
  }
  return 0;
}

int nd_recompute_megatron_choose (const nd_model_spec *m, const nd_device *dev,
                                  const nd_job *job, nd_strategy *st, const nd_costs *costs,
                                  double budget, int balance, nd_estimate *out,
                                  nd_megatron_choice *choice, char *err, size_t errlen) {
  static const int uniform[3] = {ND_MEGATRON_NONE, ND_MEGATRON_SELECTIVE, ND_MEGATRON_UNIFORM};
  megatron_run *x;
  int i, fits, most, lo, hi, rc = -1;
  memset(choice, 0, sizeof *choice);
  choice->least_peak = HUGE_VAL;
  choice->method = ND_MEGATRON_REFUSED;  /* until a form is chosen (the search's label) */
  if (!nd_schedule_megatron(st->schedule)) {
    snprintf(err, errlen, "degree out of bounds: Megatron has no flag for schedule %s",
             nd_schedule_name(st->schedule));
    return -1;
  }
  x = (megatron_run *)malloc(sizeof *x);
  if (!x) { snprintf(err, errlen, "recompute: out of memory"); return -1; }
  memset(x, 0, offsetof(megatron_run, work));
  x->m = m; x->dev = dev; x->job = job; x->costs = costs; x->given = st; x->budget = budget;
  x->choice = choice;
  x->have = x->block_n = x->nforms = 0;
  x->work = *st;  /* the largest group: the layout's biggest stage or chunk */
  if ((most = nd_megatron_form(m, job, &x->work, ND_MEGATRON_NONE, 0, err, errlen)) < 0)
    goto done;
  for (i = 0; i < 3; i++) {  /* none, selective, full on every layer */
    if (price_form(x, uniform[i], uniform[i] == ND_MEGATRON_UNIFORM, &fits, err, errlen) != 0)
      goto done;
    keep(x, uniform[i], uniform[i] == ND_MEGATRON_UNIFORM, balance);
  }
  /* block N for N = 1 .. the largest group less one (N = the largest is uniform): the
     smallest N that fits, by bisection (its peak only falls as N grows); with balance every
     fitting N, as each balances differently, and with an offload share, as a larger N copies
     less (the fastest fitting N, so that a larger budget never gives a slower plan) */
  lo = 1;
  hi = most - 1;
  if (hi >= 1) {
    if (price_block(x, hi, &fits, err, errlen) != 0) goto done;
    if (fits) {
      while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (price_block(x, mid, &fits, err, errlen) != 0) goto done;
        if (fits) hi = mid; else lo = mid + 1;
      }
      for (i = lo; i <= (balance || st->offload > 0.0 ? most - 1 : lo); i++) {
        if (price_block(x, i, &fits, err, errlen) != 0) goto done;
        keep(x, ND_MEGATRON_BLOCK, i, balance);
      }
    }
  }
  for (i = 0; i < x->nforms; i++) {  /* balance: each fitting form on its own layout */
    int moves = 0;
    x->work = *st;
    if (nd_layout_balance_megatron(m, dev, job, &x->work, costs, budget, x->forms[i][0],
                                   x->forms[i][1], &x->cand, &moves, err, errlen) != 0)
      goto done;
    if (!x->have || better(&x->cand, &x->best)) {
      copy_estimate(&x->best, &x->cand);
      x->best_st = x->work;
      x->have = 1;
      choice->method = x->forms[i][0];
      choice->num_layers = x->forms[i][1];
      choice->moves = moves;
    }
  }
  if (!x->have) {
    choice->method = ND_MEGATRON_OVER;
    snprintf(err, errlen, "over memory: no recompute Megatron can state fits the %.2f GiB "
             "budget (full on every layer peaks at %.2f GiB)", budget / (1024.0 * 1024.0 * 1024.0),
             choice->least_peak / (1024.0 * 1024.0 * 1024.0));
    goto done;
  }
  *st = x->best_st;
  copy_estimate(out, &x->best);
  err[0] = '\0';
  rc = 0;
done:
  free(x);
  return rc;
}

int nd_recompute_megatron_run (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                               nd_strategy *st, const nd_costs *costs, double budget,
                               nd_estimate *out, int *method, int *num_layers, char *err,
                               size_t errlen) {
  nd_megatron_choice c;
  int rc = nd_recompute_megatron_choose(m, dev, job, st, costs, budget, 0, out, &c, err,
                                        errlen);
  *method = c.method;
  *num_layers = c.num_layers;
  return rc;
}
