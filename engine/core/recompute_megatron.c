/*
** recompute_megatron.c -- the recompute Megatron-LM can state, chosen for a memory budget.
**
** Megatron recomputes selectively everywhere (--recompute-granularity selective), fully on
** every layer (--recompute-method uniform), or fully on the first N layers of each pipeline
** stage -- of each model chunk with VPP -- with one N everywhere (--recompute-method block
** --recompute-num-layers N). Block N recomputes more as N grows, so its peak only falls and
** its time only grows with N: the smallest N that fits is found by bisection, and the
** fastest fitting form wins. The same rule as lua/ndplan/block_plan.lua on a fixed layout,
** in C so that the search can rank every candidate by what Megatron can run.
*/
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

typedef struct megatron_run {
  const nd_model_spec *m;
  const nd_device *dev;
  const nd_job *job;
  const nd_costs *costs;
  const nd_strategy *given;
  double budget;
  nd_strategy work, best_st;
  nd_estimate cand, best;
  int have, method, num_layers;
  double least;  /* the lowest peak priced */
} megatron_run;

/* Prices work as a candidate form; keeps it when it fits and is the fastest so far. */
static int consider (megatron_run *x, int method, int num_layers, int *fits, char *err,
                     size_t errlen) {
  nd_strategy priced = x->work;
  *fits = 0;
  if (nd_estimate_run(x->m, x->dev, x->job, &priced, x->costs, &x->cand, err, errlen) != 0)
    return -1;
  *fits = x->cand.peak <= x->budget;
  if (x->cand.peak < x->least) x->least = x->cand.peak;
  if (*fits && (!x->have || x->cand.step_time < x->best.step_time * (1.0 - 1e-12)
                || (x->cand.step_time <= x->best.step_time * (1.0 + 1e-12)
                    && x->cand.peak < x->best.peak))) {
    x->best = x->cand;
    x->best_st = priced;
    x->have = 1;
    x->method = method;
    x->num_layers = num_layers;
  }
  return 0;
}

/* A whole-model mode as a candidate. */
static int consider_uniform (megatron_run *x, nd_recompute mode, int method, int *fits,
                             char *err, size_t errlen) {
  x->work = *x->given;
  x->work.per_layer = 0;
  x->work.recompute = mode;
  return consider(x, method, method == ND_MEGATRON_UNIFORM ? 1 : 0, fits, err, errlen);
}

int nd_recompute_megatron_run (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                               nd_strategy *st, const nd_costs *costs, double budget,
                               nd_estimate *out, int *method, int *num_layers, char *err,
                               size_t errlen) {
  megatron_run *x;
  nd_strategy resolved;
  int fits, most, lo, hi, rc = -1;
  *method = ND_MEGATRON_REFUSED;
  if (st->schedule != ND_SCHED_1F1B && st->schedule != ND_SCHED_INTERLEAVED) {
    snprintf(err, errlen, "degree out of bounds: Megatron has no flag for schedule %s",
             nd_schedule_name(st->schedule));
    return -1;
  }
  x = (megatron_run *)malloc(sizeof *x);
  if (!x) { snprintf(err, errlen, "recompute: out of memory"); return -1; }
  memset(x, 0, offsetof(megatron_run, work));
  x->m = m; x->dev = dev; x->job = job; x->costs = costs; x->given = st; x->budget = budget;
  x->have = 0;
  x->least = HUGE_VAL;
  /* full on every layer first: it resolves the layout the groups are read from */
  if (consider_uniform(x, ND_RECOMPUTE_FULL, ND_MEGATRON_UNIFORM, &fits, err, errlen) != 0)
    goto done;
  resolved = x->work;
  if (nd_strategy_resolve(&resolved, m, job, err, errlen) != 0) goto done;
  if (consider_uniform(x, ND_RECOMPUTE_NONE, ND_MEGATRON_NONE, &fits, err, errlen) != 0
      || consider_uniform(x, ND_RECOMPUTE_SELECTIVE, ND_MEGATRON_SELECTIVE, &fits, err,
                          errlen) != 0)
    goto done;
  /* block N for N = 1 .. the largest group less one (N = the largest is uniform) */
  x->work = *x->given;
  most = block_modes(m, &resolved, 0, &x->work);
  lo = 1;
  hi = most - 1;
  if (hi >= 1) {
    block_modes(m, &resolved, hi, &x->work);
    if (consider(x, ND_MEGATRON_BLOCK, hi, &fits, err, errlen) != 0) goto done;
    if (fits) {
      while (lo < hi) {  /* the smallest N that fits: the fastest block form */
        int mid = (lo + hi) / 2;
        x->work = *x->given;
        block_modes(m, &resolved, mid, &x->work);
        if (consider(x, ND_MEGATRON_BLOCK, mid, &fits, err, errlen) != 0) goto done;
        if (fits) hi = mid; else lo = mid + 1;
      }
    }
  }
  if (!x->have) {
    *method = ND_MEGATRON_OVER;
    snprintf(err, errlen, "over memory: no recompute Megatron can state fits the %.2f GiB "
             "budget (full on every layer peaks at %.2f GiB)", budget / (1024.0 * 1024.0 * 1024.0),
             x->least / (1024.0 * 1024.0 * 1024.0));
    goto done;
  }
  *st = x->best_st;
  *out = x->best;
  *method = x->method;
  *num_layers = x->num_layers;
  err[0] = '\0';
  rc = 0;
done:
  free(x);
  return rc;
}
