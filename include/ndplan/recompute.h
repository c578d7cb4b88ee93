/*
** ndplan/recompute.h -- per-layer recompute planning: for one strategy and a memory budget,
** the recompute mode of every layer that keeps each pipeline stage within the budget at the
** least recompute time (an exact multiple-choice knapsack per stage over the estimators'
** own per-layer costs).
*/
#ifndef NDPLAN_RECOMPUTE_H
#define NDPLAN_RECOMPUTE_H

#include <stddef.h>

#include "ndplan/estimate.h"

/* Bit masks of the modes a plan may use. */
#define ND_RECOMPUTE_MASK(mode) (1u << (mode))
/* Also let layers keep everything and offload it to host memory (with an offload share of
   0): a stage's first layers, while the copies hide behind the stage's compute. */
#define ND_PLAN_OFFLOAD (1u << ND_RECOMPUTE_COUNT)
/* Also let each selective layer take its own set of switches (nd_layer_plan.ops): every set
   on its kind's Pareto front of (bytes, seconds), chosen per layer by a bucket DP, on stages
   of up to 256 layers. Not with an offload share or per-layer offload whose copies the stage
   must hide. */
#define ND_PLAN_VARIANTS (1u << (ND_RECOMPUTE_COUNT + 1))
#define ND_RECOMPUTE_ALL \
  (ND_RECOMPUTE_MASK(ND_RECOMPUTE_NONE) | ND_RECOMPUTE_MASK(ND_RECOMPUTE_SELECTIVE) \
   | ND_RECOMPUTE_MASK(ND_RECOMPUTE_FULL))

typedef struct nd_recompute_plan {
  double stage_savings[ND_MAX_STAGES];  /* seconds per step each stage saves against every
                                           layer fully recomputed */
  double stage_need[ND_MAX_STAGES];     /* bytes each stage peaks at with its least-memory
                                           choice (all full when full is allowed) */
  int failed_stage;                     /* -1, or the first stage that cannot fit */
  double offload_bytes[ND_MAX_LAYERS];  /* per layer: bytes per micro-batch sent to host */
  nd_layer_plan layers;                 /* the plan chosen: st->layers points here */
} nd_recompute_plan;

/*
** Chooses st's per-layer recompute modes among `modes` so that every stage's peak stays
** within `budget` bytes, each stage spending the least recompute time; on success st holds
** the plan (st->layers = &plan->layers: st reads it while plan lives), out its estimate,
** and 0 is returned. A plan st had is replaced. Returns -1 with a reason in err when the
** strategy is refused or a stage cannot fit even with its least-memory choice ("over
** memory: ...", plan->failed_stage set); st is then as given (plan->layers is rewritten
** either way: st's own plan may be there).
*/
int nd_recompute_plan_run (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                           nd_strategy *st, const nd_costs *costs, double budget,
                           unsigned modes, nd_recompute_plan *plan, nd_estimate *out,
                           char *err, size_t errlen);

/*
** The same with the planner's tables kept in `ws` between runs (a search prices a plan per
** candidate: one workspace per thread, made by nd_recompute_ws_new; NULL: out of memory).
*/
typedef struct nd_recompute_ws nd_recompute_ws;
nd_recompute_ws *nd_recompute_ws_new (void);
void nd_recompute_ws_free (nd_recompute_ws *ws);
/* The planner's estimates through pc (ndplan/estimate.h; kept by the caller, which frees it
   after ws's last run; NULL: none). */
void nd_recompute_ws_cache (nd_recompute_ws *ws, nd_price_cache *pc);
int nd_recompute_plan_run_ws (const nd_model_spec *m, const nd_device *dev,
                              const nd_job *job, nd_strategy *st, const nd_costs *costs,
                              double budget, unsigned modes, nd_recompute_plan *plan,
                              nd_estimate *out, nd_recompute_ws *ws, char *err,
                              size_t errlen);

/*
** The recompute Megatron-LM can state (engine/core/recompute_megatron.c): selective on every
** layer, full on every layer, or full on the first N layers of each stage (of each chunk
** with VPP), the fastest that fits `budget` bytes on the strategy's own layout.
*/
enum { ND_MEGATRON_NONE, ND_MEGATRON_SELECTIVE, ND_MEGATRON_UNIFORM, ND_MEGATRON_BLOCK };
/* choice->method when a choice returns -1: no form fits the budget (over memory), or
   another refusal */
#define ND_MEGATRON_OVER (-1)
#define ND_MEGATRON_REFUSED (-2)

/*
** A Megatron form on st's own layout: ND_MEGATRON_NONE, _SELECTIVE, _UNIFORM as whole-model
** modes (st->layers = NULL); ND_MEGATRON_BLOCK full on the first n layers of each stage
** (each chunk with VPP) of st's resolved layout, written into `layers` (the caller's
** storage; st->layers = layers). Returns the largest group's layers, or -1 with the reason
** when st does not resolve (or a block form has no storage).
*/
int nd_megatron_form (const nd_model_spec *m, const nd_job *job, nd_strategy *st, int method,
                      int n, nd_layer_plan *layers, char *err, size_t errlen);

/* What nd_recompute_megatron_choose chose, and the least-memory form it priced. */
typedef struct nd_megatron_choice {
  int method, num_layers;   /* ND_MEGATRON_*, N (1 for uniform, 0 for none and selective) */
  int moves;                /* layers the balance moved (0 without balance) */
  int priced;               /* estimates made on the given layout */
  int least_method, least_num_layers;
  double least_peak;        /* bytes: the lowest peak of any form priced */
  nd_layer_plan layers;     /* block N's plan: the chosen st->layers points here */
} nd_megatron_choice;

/*
** The choice, in the order none, selective, uniform, block (ties: the first; as fast: the
** lighter). On success st holds it (a block form's plan in choice->layers), out its
** estimate, choice->method one of ND_MEGATRON_*, num_layers N (1 for uniform, 0 otherwise);
** returns 0. Returns -1 with the reason in err (choice->least_* still set) when the
** strategy is refused, its schedule has no Megatron flag, or no form fits ("over memory:
** ...", ND_MEGATRON_OVER). With balance (vpp 1, not dualpipe), every form that fits the
** given layout is balanced on its own (nd_layout_balance_megatron) and the fastest balanced
** one wins.
*/
int nd_recompute_megatron_choose (const nd_model_spec *m, const nd_device *dev,
                                  const nd_job *job, nd_strategy *st, const nd_costs *costs,
                                  double budget, int balance, nd_estimate *out,
                                  nd_megatron_choice *choice, char *err, size_t errlen);

/*
** The same with the choice's tables (its strategies, plans and estimates, about 250 KB) kept
** in `ws` between runs: a search chooses per candidate, one workspace per thread
** (nd_megatron_ws_new; NULL: out of memory). Its estimates go through pc when given
** (nd_megatron_ws_cache: kept by the caller, freed after ws's last run; NULL: none).
*/
typedef struct nd_megatron_ws nd_megatron_ws;
nd_megatron_ws *nd_megatron_ws_new (void);
void nd_megatron_ws_free (nd_megatron_ws *ws);
void nd_megatron_ws_cache (nd_megatron_ws *ws, nd_price_cache *pc);
int nd_recompute_megatron_choose_ws (const nd_model_spec *m, const nd_device *dev,
                                     const nd_job *job, nd_strategy *st, const nd_costs *costs,
                                     double budget, int balance, nd_estimate *out,
                                     nd_megatron_choice *choice, nd_megatron_ws *ws,
                                     char *err, size_t errlen);

#endif
