/*
** test_recompute.c -- the per-layer recompute planner and the Megatron forms through the C
** API alone, against brute force on a 6-layer model over 2 stages:
**  - at budgets between the distinct peaks of all 3^6 assignments of none, selective or full,
**    nd_recompute_plan_run's plan fits and is as fast as the fastest assignment that fits;
**  - below the all-full peak it refuses ("over memory", the stage that cannot fit), and
**    stage_need is each stage's all-full peak;
**  - the plan it returns, priced again by nd_estimate_run, gives the same figures, and its
**    stage savings are the recompute time it saves against all full, per step;
**  - nd_recompute_megatron_choose is the fastest fitting of the forms Megatron can state, each
**    built by nd_megatron_form and priced here.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/recompute.h"

#include "fixtures.h"

#define LAYERS 6
#define COMBOS 729  /* 3^LAYERS */

typedef struct world {
  nd_model_spec m;
  nd_device d;
  nd_job job;
  nd_costs c;
  nd_strategy base;
  nd_layer_plan assigned;  /* the plan of the assignment being priced */
  double peak[COMBOS], step[COMBOS];
} world;

static void setup (world *w) {
  nd_model_init(&w->m);
  w->m.hidden_size = 2048; w->m.num_layers = LAYERS; w->m.num_heads = 16;
  w->m.num_kv_heads = 16; w->m.head_dim = 128; w->m.ffn_size = 8192; w->m.vocab_size = 51200;
  nd_model_default_stack(&w->m);
  fixture_h100(&w->d);
  w->job.devices = 2; w->job.global_batch = 16; w->job.seq_len = 4096;
  nd_costs_init(&w->c);
  nd_strategy_init(&w->base);
  w->base.pp = 2; w->base.mbs = 2;
  w->base.flash_attention = 0;  /* selective then keeps less than none */
}

/* The strategy of assignment `code` (base 3 digits, layer 0 first). */
static void assign (world *w, int code, nd_strategy *st) {
  int i;
  *st = w->base;
  memset(&w->assigned, 0, sizeof w->assigned);
  st->layers = &w->assigned;
  for (i = 0; i < LAYERS; i++, code /= 3) w->assigned.recompute[i] = (unsigned char)(code % 3);
}

static int cmp_double (const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void check_plans (world *w) {
  static nd_estimate e, again, full;
  static double sorted[COMBOS];
  nd_strategy st, st_full;
  nd_recompute_plan plan;
  char err[256];
  int code, i, s, checked = 0;
  for (code = 0; code < COMBOS; code++) {
    assign(w, code, &st);
    CHECK(nd_estimate_run(&w->m, &w->d, &w->job, &st, &w->c, &e, err, sizeof err) == 0,
          "assignment %d: %s", code, err);
    w->peak[code] = sorted[code] = e.peak;
    w->step[code] = e.step_time;
  }
  qsort(sorted, COMBOS, sizeof sorted[0], cmp_double);
  st_full = w->base;
  st_full.recompute = ND_RECOMPUTE_FULL;
  CHECK(nd_estimate_run(&w->m, &w->d, &w->job, &st_full, &w->c, &full, err, sizeof err) == 0,
        "all full: %s", err);
  CHECK(full.peak == sorted[0], "all full is the lightest assignment");
  for (i = 1; i < COMBOS; i++) {
    double budget, best = HUGE_VAL;
    if (sorted[i] - sorted[i - 1] <= 1e6) continue;
    budget = (sorted[i] + sorted[i - 1]) / 2;
    for (code = 0; code < COMBOS; code++)
      if (w->peak[code] <= budget && w->step[code] < best) best = w->step[code];
    st = w->base;
    CHECK(nd_recompute_plan_run(&w->m, &w->d, &w->job, &st, &w->c, budget, ND_RECOMPUTE_ALL,
                                &plan, &e, err, sizeof err) == 0, "budget %.0f: %s", budget, err);
    CHECK(e.peak <= budget, "budget %.0f: the plan peaks at %.0f", budget, e.peak);
    CHECK(fabs(e.step_time - best) <= 1e-9 * best, "budget %.0f: plan %.9f s, brute force "
          "%.9f s", budget, e.step_time, best);
    CHECK(st.layers == &plan.layers && plan.failed_stage == -1, "a per-layer plan");
    /* priced again as it stands: the same run */
    CHECK(nd_estimate_run(&w->m, &w->d, &w->job, &st, &w->c, &again, err, sizeof err) == 0
          && again.step_time == e.step_time && again.peak == e.peak,
          "budget %.0f: the plan priced again differs", budget);
    for (s = 0; s < e.stages; s++) {
      double saved = (full.stage[s].recompute_s - e.stage[s].recompute_s) * st.mb;
      CHECK(fabs(plan.stage_savings[s] - saved) <= 1e-9 * (fabs(saved) + 1e-12),
            "budget %.0f stage %d: savings %g, against all full %g", budget, s,
            plan.stage_savings[s], saved);
      CHECK(fabs(plan.stage_need[s] - full.stage[s].peak) <= 1e-9 * full.stage[s].peak,
            "stage %d needs %.0f, all full peaks at %.0f", s, plan.stage_need[s],
            full.stage[s].peak);
    }
    checked++;
  }
  CHECK(checked >= 5, "only %d budgets between distinct peaks", checked);
  /* below the lightest assignment: refused, naming the stage */
  st = w->base;
  CHECK(nd_recompute_plan_run(&w->m, &w->d, &w->job, &st, &w->c, sorted[0] * 0.99,
                              ND_RECOMPUTE_ALL, &plan, &e, err, sizeof err) != 0
        && strncmp(err, "over memory", 11) == 0 && plan.failed_stage >= 0,
        "under the all-full peak: %s (stage %d)", err, plan.failed_stage);
}

/* The Megatron forms of w's strategy, each built by nd_megatron_form and priced: peaks and
   step times, in the order none, selective, uniform, block 1..n. */
static int megatron_forms (world *w, double *peak, double *step, int *method_of) {
  static nd_estimate e;
  static nd_layer_plan block;
  nd_strategy st;
  char err[256];
  int method, n, k = 0, most = LAYERS;
  for (method = ND_MEGATRON_NONE; method <= ND_MEGATRON_BLOCK; method++)
    for (n = method == ND_MEGATRON_BLOCK; n <= (method == ND_MEGATRON_BLOCK ? most : 0); n++) {
      int largest;
      st = w->base;
      largest = nd_megatron_form(&w->m, &w->job, &st, method, n, &block, err, sizeof err);
      CHECK(largest >= 0, "form %d n %d: %s", method, n, err);
      CHECK((st.layers == &block) == (method == ND_MEGATRON_BLOCK), "form %d: a plan only for "
            "block", method);
      if (method == ND_MEGATRON_BLOCK && n == 1) most = largest;  /* N up to a stage's layers */
      if (nd_estimate_run(&w->m, &w->d, &w->job, &st, &w->c, &e, err, sizeof err) != 0) {
        CHECK(0, "form %d n %d priced: %s", method, n, err);
        continue;
      }
      peak[k] = e.peak;
      step[k] = e.step_time;
      method_of[k++] = method;
    }
  return k;
}

/* nd_recompute_megatron_choose at budgets between the forms' distinct peaks: the fastest
   form that fits. */
static void check_megatron (world *w) {
  static nd_estimate got;
  static nd_megatron_choice mc;
  double peak[LAYERS + 3], step[LAYERS + 3], sorted[LAYERS + 3];
  int method_of[LAYERS + 3], n = megatron_forms(w, peak, step, method_of), i, k, chosen = 0;
  memcpy(sorted, peak, sizeof peak);
  qsort(sorted, (size_t)n, sizeof sorted[0], cmp_double);
  for (i = 0; i < n; i++) {
    double budget = i + 1 < n ? (sorted[i] + sorted[i + 1]) / 2 : sorted[i] * 1.001, best = HUGE_VAL;
    nd_strategy st = w->base;
    char err[256];
    if (i + 1 < n && sorted[i + 1] - sorted[i] <= 1e6) continue;
    for (k = 0; k < n; k++) if (peak[k] <= budget && step[k] < best) best = step[k];
    CHECK(nd_recompute_megatron_choose(&w->m, &w->d, &w->job, &st, &w->c, budget, 0, &got, &mc,
                                       err, sizeof err) == 0, "budget %.0f: %s", budget, err);
    CHECK(got.peak <= budget && got.step_time == best, "budget %.0f: form %d n %d at %.9f s, "
          "the fastest fitting %.9f s", budget, mc.method, mc.num_layers, got.step_time, best);
    CHECK((st.layers == &mc.layers) == (mc.method == ND_MEGATRON_BLOCK),
          "budget %.0f: the plan in the choice for block only", budget);
    chosen |= 1 << mc.method;
  }
  CHECK(chosen & (1 << ND_MEGATRON_BLOCK), "some budget takes a block form (%#x)",
        (unsigned)chosen);
  {  /* under every form: over memory */
    nd_strategy st = w->base;
    char err[256];
    CHECK(nd_recompute_megatron_choose(&w->m, &w->d, &w->job, &st, &w->c, sorted[0] * 0.99, 0,
                                       &got, &mc, err, sizeof err) != 0
          && mc.method == ND_MEGATRON_OVER, "under every form: %s", err);
  }
}

int main (void) {
  world *w = (world *)malloc(sizeof *w);
  if (!w) return 1;
  setup(w);
  check_plans(w);
  check_megatron(w);
  free(w);
  if (failures) fprintf(stderr, "test_recompute: %d failure(s)\n", failures);
  else printf("test_recompute: all passed\n");
  return failures ? 1 : 0;
}
