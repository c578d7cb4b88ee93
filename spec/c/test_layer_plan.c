/*
** test_layer_plan.c -- who owns a strategy's per-layer plan (nd_strategy.layers), through
** the C API alone:
**  - no plan (NULL) prices as the whole-model mode, as a plan giving every layer that mode;
**  - a struct copy shares the plan; resolving it, twice, leaves both the strategy (byte for
**    byte) and the plan as they were, and every copy prices to the same figures, with and
**    without a price cache, before and after pricing without the plan;
**  - nd_strategy_own_plan gives a copy its own plan: changing it leaves the original's;
**  - the planners (nd_recompute_plan_run, nd_recompute_megatron_choose and its workspace,
**    nd_layout_balance) never write the plan of the strategy they are given: their plan is
**    in the storage the caller gave them, and a workspace reused for other strategies, with
**    a price cache, chooses as a fresh one.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/layout.h"
#include "ndplan/recompute.h"
#include "fixtures.h"

typedef struct world {
  nd_model_spec m;
  nd_device d;
  nd_job job;
  nd_costs c;
  nd_layer_plan mixed, saved, own;
  nd_recompute_plan plan, plan2;
  nd_megatron_choice mc, mc2;
  nd_estimate a, b;
} world;

static int same_figures (const nd_estimate *a, const nd_estimate *b) {
  int s;
  if (a->step_time != b->step_time || a->peak != b->peak || a->stages != b->stages
      || a->heaviest != b->heaviest)
    return 0;
  for (s = 0; s < a->stages; s++)
    if (a->stage[s].activations != b->stage[s].activations
        || a->stage[s].recompute_s != b->stage[s].recompute_s
        || a->stage[s].peak != b->stage[s].peak)
      return 0;
  return 1;
}

static int same_plan (const nd_layer_plan *a, const nd_layer_plan *b, int n) {
  return memcmp(a->recompute, b->recompute, (size_t)n) == 0
         && memcmp(a->offload, b->offload, (size_t)n) == 0
         && memcmp(a->ops, b->ops, (size_t)n) == 0;
}

static void price (world *w, nd_strategy *st, nd_price_cache *pc, nd_estimate *e,
                   const char *what) {
  char err[256];
  CHECK(nd_estimate_run_cached(&w->m, &w->d, &w->job, st, &w->c, pc, e, err, sizeof err) == 0,
        "%s: %s", what, err);
}

/* No plan prices as the whole-model mode, and as a plan of that mode on every layer. */
static void check_no_plan (world *w, const nd_strategy *base) {
  static nd_layer_plan uniform;
  int n = (int)w->m.num_layers, md;
  for (md = 0; md < ND_RECOMPUTE_COUNT; md++) {
    nd_strategy whole = *base, planned = *base;
    whole.recompute = (nd_recompute)md;
    whole.layers = NULL;
    memset(&uniform, 0, sizeof uniform);
    memset(uniform.recompute, md, (size_t)n);
    planned.recompute = ND_RECOMPUTE_NONE;  /* not read with a plan */
    planned.layers = &uniform;
    price(w, &whole, NULL, &w->a, "whole-model");
    price(w, &planned, NULL, &w->b, "uniform plan");
    CHECK(same_figures(&w->a, &w->b), "%s: no plan %.9g s %.9g B, a plan of it on every layer "
          "%.9g s %.9g B", nd_recompute_name((nd_recompute)md), w->a.step_time, w->a.peak,
          w->b.step_time, w->b.peak);
  }
}

/* A copy shares the plan; resolving twice changes neither; every copy prices the same. */
static void check_copies (world *w, const nd_strategy *base) {
  nd_strategy st = *base, copy, once, twice;
  nd_price_cache *pc = nd_price_cache_new(16);
  char err[256];
  int n = (int)w->m.num_layers;
  CHECK(pc != NULL, "a price cache");
  st.layers = &w->mixed;
  w->saved = w->mixed;
  copy = st;
  CHECK(copy.layers == st.layers, "a struct copy shares the plan");
  CHECK(nd_strategy_resolve_to(&copy, &w->m, &w->job, &once, err, sizeof err) == 0,
        "resolved: %s", err);
  CHECK(nd_strategy_resolve_to(&once, &w->m, &w->job, &twice, err, sizeof err) == 0,
        "resolved again: %s", err);
  CHECK(memcmp(&once, &twice, sizeof once) == 0, "resolving a resolved strategy changes it");
  CHECK(memcmp(&copy, &st, sizeof st) == 0, "resolve_to changed what it was given");
  CHECK(once.layers == &w->mixed && twice.layers == &w->mixed, "resolved copies share it");
  price(w, &st, NULL, &w->a, "the strategy");
  price(w, &twice, pc, &w->b, "resolved twice, cached");
  CHECK(same_figures(&w->a, &w->b), "resolved twice and cached %.9g s, as given %.9g s",
        w->b.step_time, w->a.step_time);
  price(w, &once, pc, &w->b, "resolved once, cached again");
  CHECK(same_figures(&w->a, &w->b), "from the cache %.9g s, as given %.9g s", w->b.step_time,
        w->a.step_time);
  {  /* without the plan, then with it again: no state carried between them */
    nd_strategy whole = once;
    static nd_estimate none;
    whole.layers = NULL;
    whole.recompute = ND_RECOMPUTE_NONE;
    price(w, &whole, pc, &none, "without the plan");
    CHECK(none.step_time != w->a.step_time, "the mixed plan prices as no recompute");
    price(w, &copy, pc, &w->b, "the copy, after");
    CHECK(same_figures(&w->a, &w->b), "the plan after a run without it %.9g s, before %.9g s",
          w->b.step_time, w->a.step_time);
  }
  CHECK(same_plan(&w->mixed, &w->saved, n), "resolving or pricing wrote the plan");
  {  /* a copy with its own plan: changing it leaves the original's */
    nd_strategy own;
    nd_strategy_own_plan(&own, &st, &w->own, n);
    CHECK(own.layers == &w->own && same_plan(&w->own, &w->mixed, n), "own_plan copies it");
    w->own.recompute[0] = w->own.recompute[0] == ND_RECOMPUTE_FULL ? ND_RECOMPUTE_NONE
                                                                   : ND_RECOMPUTE_FULL;
    price(w, &own, pc, &w->b, "its own plan");
    CHECK(w->b.step_time != w->a.step_time || w->b.peak != w->a.peak,
          "a layer's mode changed, the same figures");
    CHECK(same_plan(&w->mixed, &w->saved, n), "the copy's change reached the original plan");
    nd_strategy_own_plan(&own, &st, &w->mixed, n);  /* its own: no copy */
    CHECK(own.layers == &w->mixed, "own_plan into the plan it reads");
    copy.layers = NULL;
    nd_strategy_own_plan(&own, &copy, &w->own, n);
    CHECK(own.layers == NULL, "own_plan of a strategy without a plan gives none");
  }
  nd_price_cache_free(pc);
}

/* The planners write their own storage, never the plan of the strategy they are given. */
static void check_planners (world *w, const nd_strategy *base) {
  nd_strategy st = *base, again;
  nd_megatron_ws *ws = nd_megatron_ws_new();
  nd_price_cache *pc = nd_price_cache_new(16);
  static nd_estimate full, none, fresh;
  char err[256];
  double budget;
  int n = (int)w->m.num_layers, moves;
  CHECK(ws != NULL && pc != NULL, "a workspace and a cache");
  st.layers = NULL;
  st.recompute = ND_RECOMPUTE_FULL;
  price(w, &st, NULL, &full, "all full");
  st.recompute = ND_RECOMPUTE_NONE;
  price(w, &st, NULL, &none, "all kept");
  budget = (full.peak + none.peak) / 2;
  CHECK(none.peak > budget, "the budget needs recompute");
  st.layers = &w->mixed;  /* given with a plan: replaced, not written */
  w->saved = w->mixed;
  CHECK(nd_recompute_plan_run(&w->m, &w->d, &w->job, &st, &w->c, budget, ND_RECOMPUTE_ALL,
                              &w->plan, &w->a, err, sizeof err) == 0, "planned: %s", err);
  CHECK(st.layers == &w->plan.layers, "the plan is in the caller's nd_recompute_plan");
  again = st;
  CHECK(nd_recompute_plan_run(&w->m, &w->d, &w->job, &again, &w->c, full.peak * 1.01,
                              ND_RECOMPUTE_ALL, &w->plan2, &w->b, err, sizeof err) == 0,
        "planned again: %s", err);
  CHECK(again.layers == &w->plan2.layers, "the second plan in its own storage");
  price(w, &st, NULL, &w->b, "the first plan, after the second");
  CHECK(same_figures(&w->a, &w->b), "the first plan priced after another %.9g s, as planned "
        "%.9g s", w->b.step_time, w->a.step_time);
  CHECK(same_plan(&w->mixed, &w->saved, n), "the planner wrote the given plan");

  st = *base;
  st.layers = &w->mixed;
  CHECK(nd_recompute_megatron_choose(&w->m, &w->d, &w->job, &st, &w->c, budget, 0, &fresh,
                                     &w->mc, err, sizeof err) == 0, "Megatron: %s", err);
  CHECK(st.layers == NULL || st.layers == &w->mc.layers, "Megatron's plan is in the choice");
  {  /* a workspace reused across strategies, through a cache, chooses as a fresh one */
    nd_strategy other = *base, reused = *base;
    other.pp = 2;  /* another layout: the workspace keeps none of it */
    CHECK(nd_recompute_megatron_choose_ws(&w->m, &w->d, &w->job, &other, &w->c, budget, 0,
                                          &w->b, &w->mc2, ws, err, sizeof err) == 0
          || strncmp(err, "over memory", 11) == 0, "Megatron, pp 2: %s", err);
    nd_megatron_ws_cache(ws, pc);
    reused.layers = &w->mixed;
    CHECK(nd_recompute_megatron_choose_ws(&w->m, &w->d, &w->job, &reused, &w->c, budget, 0,
                                          &w->b, &w->mc2, ws, err, sizeof err) == 0,
          "Megatron, reused: %s", err);
    CHECK(same_figures(&fresh, &w->b) && w->mc.method == w->mc2.method
          && w->mc.num_layers == w->mc2.num_layers && w->mc.priced == w->mc2.priced,
          "reused and cached: form %d n %d %.9g s, fresh: form %d n %d %.9g s", w->mc2.method,
          w->mc2.num_layers, w->b.step_time, w->mc.method, w->mc.num_layers, fresh.step_time);
    CHECK((reused.layers == &w->mc2.layers) == (w->mc2.method == ND_MEGATRON_BLOCK)
          && (reused.layers != NULL) == (w->mc2.method == ND_MEGATRON_BLOCK),
          "a block form's plan in the choice, else none");
    if (reused.layers) {
      CHECK(same_plan(&w->mc.layers, &w->mc2.layers, n), "the same block plan");
      price(w, &reused, NULL, &w->b, "the chosen block form, priced again");
      CHECK(same_figures(&fresh, &w->b), "the block form priced again %.9g s, chosen %.9g s",
            w->b.step_time, fresh.step_time);
    }
  }
  CHECK(same_plan(&w->mixed, &w->saved, n), "the Megatron choice wrote the given plan");

  st = *base;
  st.layers = &w->mixed;
  CHECK(nd_layout_balance(&w->m, &w->d, &w->job, &st, &w->c, budget, ND_RECOMPUTE_ALL,
                          &w->own, &w->a, &moves, err, sizeof err) == 0, "balanced: %s", err);
  CHECK(st.layers == &w->own, "the balanced layout's plan in the caller's storage");
  price(w, &st, NULL, &w->b, "the balanced layout, priced again");
  CHECK(same_figures(&w->a, &w->b), "the balanced layout priced again %.9g s, balanced %.9g s",
        w->b.step_time, w->a.step_time);
  CHECK(same_plan(&w->mixed, &w->saved, n), "balancing wrote the given plan");
  nd_megatron_ws_free(ws);
  nd_price_cache_free(pc);
}

int main (void) {
  world *w = (world *)calloc(1, sizeof *w);
  nd_strategy base;
  int i, k;
  if (!w) return 1;
  fixture_llama8b(&w->m);
  fixture_h100(&w->d);
  w->job.devices = 16; w->job.global_batch = 128; w->job.seq_len = 4096;
  nd_costs_init(&w->c);
  for (i = 0; i < 32; i++) {  /* full, selective with its own switches, kept, offloaded */
    w->mixed.recompute[i] = (unsigned char)(i % 4 == 0 ? ND_RECOMPUTE_FULL
                                            : i % 4 == 1 ? ND_RECOMPUTE_SELECTIVE
                                            : ND_RECOMPUTE_NONE);
    w->mixed.ops[i] = (unsigned char)(i % 4 == 1 ? ND_OP_BIT(ND_OP_ACT) : 0);
    w->mixed.offload[i] = (unsigned char)(i % 4 == 3);
  }
  for (k = 0; k < 2; k++) {  /* 1f1b on pp 4; interleaved pp 4 vpp 2 (resolved twice) */
    nd_strategy_init(&base);
    base.tp = 2; base.pp = 4;
    if (k == 1) base.vpp = 2;
    check_no_plan(w, &base);
    check_copies(w, &base);
    if (k == 0) check_planners(w, &base);  /* balancing needs vpp 1 */
  }
  free(w);
  if (failures) fprintf(stderr, "test_layer_plan: %d failure(s)\n", failures);
  else printf("test_layer_plan: all passed\n");
  return failures ? 1 : 0;
}
