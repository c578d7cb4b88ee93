/*
** layout.c -- uneven pipeline layouts by local search over stage boundaries.
**
** The step time follows the slowest stage, so only moves at that stage's two boundaries
** can lower it: each round prices giving one of its layers to either neighbour and keeps
** the better move if the step gets faster and every stage still fits. Each price is a full
** estimate (with its own per-layer recompute plan when asked), so memory and time come
** from the estimators alone.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/layout.h"

#define MAX_ROUNDS 256  /* a bound, never reached in practice: each round gains time */

/* Per-micro-batch time of stage s: what the pipeline runs at the pace of. */
static double stage_time (const nd_stage_estimate *se) {
  return se->fwd_s + se->bwd_s + se->recompute_s + se->comm_s;
}

/* How each layout is priced: st's recompute as given, a per-layer plan among `modes`, or a
   Megatron form (method, n) laid over the layout's own stages. */
typedef struct pricing {
  const nd_model_spec *m;
  const nd_device *dev;
  const nd_job *job;
  const nd_costs *costs;
  double budget;
  unsigned modes;
  int megatron, method, n;
} pricing;

/* A balance run's strategies and estimate, in one allocation; the plans priced strategies
   read (the planner's, a block form's) and the best layout's own copy of its plan. */
typedef struct balance_run {
  nd_strategy best, trial, priced, start;
  nd_estimate scratch;
  nd_recompute_plan plan;   /* per-layer modes: priced->layers points here */
  nd_layer_plan form;       /* a Megatron block form: priced->layers points here */
  nd_layer_plan best_plan;  /* best->layers, when it has a plan */
} balance_run;

/* Prices st into priced (planned or estimated); returns 0 and fills out when it fits. */
static int price (const pricing *pr, balance_run *b, const nd_strategy *st,
                  nd_strategy *priced, nd_estimate *out, char *err, size_t errlen) {
  const nd_model_spec *m = pr->m;
  const nd_device *dev = pr->dev;
  const nd_job *job = pr->job;
  const nd_costs *costs = pr->costs;
  double budget = pr->budget;
  *priced = *st;
  if (pr->modes) {
    priced->layers = NULL;
    return nd_recompute_plan_run(m, dev, job, priced, costs, budget, pr->modes, &b->plan, out,
                                 err, errlen);
  }
  if (pr->megatron
      && nd_megatron_form(m, job, priced, pr->method, pr->n, &b->form, err, errlen) < 0)
    return -1;
  if (nd_estimate_run(m, dev, job, priced, costs, out, err, errlen) != 0) return -1;
  if (out->peak > budget) {
    snprintf(err, errlen, "over memory: stage %d peaks at %.2f GiB, budget %.2f GiB",
             out->heaviest, out->peak / 1073741824.0, budget / 1073741824.0);
    return -1;
  }
  return 0;
}

static int balance (const pricing *pr, nd_strategy *st, nd_layer_plan *layers,
                    nd_estimate *out, int *moves, char *err, size_t errlen);

int nd_layout_balance (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                       nd_strategy *st, const nd_costs *costs, double budget,
                       unsigned per_layer_modes, nd_layer_plan *layers, nd_estimate *out,
                       int *moves, char *err, size_t errlen) {
  pricing pr;
  memset(&pr, 0, sizeof pr);
  pr.m = m; pr.dev = dev; pr.job = job; pr.costs = costs; pr.budget = budget;
  pr.modes = per_layer_modes;
  return balance(&pr, st, layers, out, moves, err, errlen);
}

int nd_layout_balance_megatron (const nd_model_spec *m, const nd_device *dev,
                                const nd_job *job, nd_strategy *st, const nd_costs *costs,
                                double budget, int method, int num_layers,
                                nd_layer_plan *layers, nd_estimate *out, int *moves,
                                char *err, size_t errlen) {
  pricing pr;
  memset(&pr, 0, sizeof pr);
  pr.m = m; pr.dev = dev; pr.job = job; pr.costs = costs; pr.budget = budget;
  pr.megatron = 1; pr.method = method; pr.n = num_layers;
  return balance(&pr, st, layers, out, moves, err, errlen);
}

static int balance (const pricing *pr, nd_strategy *st, nd_layer_plan *layers,
                    nd_estimate *out, int *moves, char *err, size_t errlen) {
  balance_run *b;
  nd_strategy *best, *trial, *priced, *start;
  double best_step;
  int p, round, rc = -1, total = (int)(pr->m->num_layers + pr->m->mtp_layers);
  *moves = 0;
  if (!(b = (balance_run *)malloc(sizeof *b))) {
    snprintf(err, errlen, "layout: out of memory");
    return -1;
  }
  best = &b->best; trial = &b->trial; priced = &b->priced; start = &b->start;
  /* the starting layout, resolved (an even split unless st gives one) */
  if (price(pr, b, st, priced, out, err, errlen) != 0) goto done;
  /* the best keeps its own plan: the next layout priced rewrites the planner's */
  nd_strategy_own_plan(best, priced, &b->best_plan, total);
  p = best->pp;
  if (best->vpp > 1 || best->schedule == ND_SCHED_DUALPIPE) {
    snprintf(err, errlen, "layout: balancing needs vpp = 1 and a schedule other than dualpipe");
    goto done;
  }
  best_step = out->step_time;
  for (round = 0; round < MAX_ROUNDS && p > 1; round++) {
    int s, slow = 0, dir, moved = 0;
    double t_slow = -1.0, round_best = best_step;
    for (s = 0; s < p; s++)
      if (stage_time(&out->stage[s]) > t_slow) { t_slow = stage_time(&out->stage[s]); slow = s; }
    if (best->stage_layers[slow] <= 1) break;
    *start = *best;
    for (dir = -1; dir <= 1; dir += 2) {  /* give a layer to the left, then the right */
      int to = slow + dir;
      if (to < 0 || to >= p) continue;
      *trial = *start;
      trial->explicit_layout = ND_LAYOUT_CHUNKS;  /* the moved split, given as it stands */
      trial->account = 0;
      trial->first_layers = trial->last_layers = 0;
      trial->stage_layers[slow]--;
      trial->stage_layers[to]++;
      if (price(pr, b, trial, priced, &b->scratch, err, errlen) == 0
          && b->scratch.step_time < round_best * (1.0 - 1e-12)) {
        round_best = b->scratch.step_time;
        nd_strategy_own_plan(best, priced, &b->best_plan, total);
        memcpy(out, &b->scratch, sizeof *out);
        moved = 1;
      }
    }
    if (!moved) break;
    best_step = round_best;
    ++*moves;
  }
  if (best->layers && !layers) {
    snprintf(err, errlen, "layout: no storage given for the layout's per-layer plan");
    goto done;
  }
  err[0] = '\0';
  nd_strategy_own_plan(st, best, layers, total);
  rc = 0;
done:
  free(b);
  return rc;
}
