/*
** test_estimate.c -- nd_estimate_run through the C API alone (the library a C user links):
** the step time is the sum of its parts, the peak is the heaviest stage's, each stage's
** peak is what the allocator reserves plus the runtime reserve, throughput is tokens over
** step time; more recompute never raises a stage's activations; bad costs and strategies
** are refused with a message naming them.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ndplan/estimate.h"

static int failures = 0;

#define CHECK(cond, ...) \
  do { if (!(cond)) { fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
                      fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } } \
  while (0)

static void model_8b (nd_model_spec *m) {
  nd_model_init(m);
  m->num_layers = 32; m->hidden_size = 4096; m->num_heads = 32; m->num_kv_heads = 8;
  m->head_dim = 128; m->ffn_size = 14336; m->vocab_size = 128256; m->max_position = 8192;
  nd_model_default_stack(m);
}

static void device_h100 (nd_device *d) {
  nd_device_init(d);
  strcpy(d->name, "H100");
  d->peak_flops[ND_PREC_BF16] = d->peak_flops[ND_PREC_FP16] = 989e12;
  d->peak_flops[ND_PREC_FP8] = 1979e12;
  d->hbm_bytes = 80e9;
  d->hbm_bandwidth = 3.35e12;
  d->scale_up.domain_size = 8;
  d->scale_up.bandwidth = 450e9;
  d->scale_out.bandwidth = 50e9;
  d->host_link.bandwidth = 64e9;
}

static int run (nd_strategy *st, const nd_costs *c, nd_estimate *e, char *err) {
  static nd_model_spec m;
  static nd_device d;
  nd_job job = {16, 128, 4096};
  model_8b(&m);
  device_h100(&d);
  return nd_estimate_run(&m, &d, &job, st, c, e, err, 256);
}

static nd_estimate e, e2;

int main (void) {
  nd_costs c;
  nd_strategy st;
  char err[256];
  int i, s;
  double sum = 0.0, worst = 0.0;

  nd_costs_init(&c);
  nd_strategy_init(&st);
  st.tp = 2; st.pp = 4;
  CHECK(run(&st, &c, &e, err) == 0, "prices: %s", err);
  for (i = 0; i < ND_T_COUNT; i++) {
    CHECK(e.time_parts[i] >= 0.0, "%s non-negative", nd_time_part_name(i));
    sum += e.time_parts[i];
  }
  CHECK(fabs(sum - e.step_time) <= 1e-9 * e.step_time, "parts add up: %g vs %g", sum,
        e.step_time);
  CHECK(e.stages == 4, "four stages");
  for (s = 0; s < e.stages; s++) {
    const nd_stage_estimate *se = &e.stage[s];
    if (se->peak > worst) worst = se->peak;
    CHECK(fabs(se->peak - (se->reserved + se->reserve)) <= 1e-6 * se->peak, "stage %d peak", s);
    CHECK(se->reserved >= se->allocated, "stage %d reserved >= allocated", s);
  }
  CHECK(e.peak == worst && e.stage[e.heaviest].peak == worst, "peak is the heaviest stage's");
  CHECK(fabs(e.tokens_per_s - 128.0 * 4096 / e.step_time) <= 1e-9 * e.tokens_per_s,
        "tokens per second");
  CHECK(e.mfu > 0.0 && e.mfu < 1.0 && e.hfu >= e.mfu, "MFU in (0, 1), HFU >= MFU");

  /* full recompute: less activation memory on every stage, more time */
  nd_strategy_init(&st);
  st.tp = 2; st.pp = 4; st.recompute = ND_RECOMPUTE_FULL;
  CHECK(run(&st, &c, &e2, err) == 0, "full recompute prices: %s", err);
  for (s = 0; s < e.stages; s++)
    CHECK(e2.stage[s].activations < e.stage[s].activations, "stage %d activations drop", s);
  CHECK(e2.step_time > e.step_time && e2.time_parts[ND_T_RECOMPUTE] > 0.0,
        "full recompute costs time");

  /* refusals name what is wrong */
  nd_strategy_init(&st);
  c.dp_overlap = 1.5;
  CHECK(run(&st, &c, &e, err) != 0 && strncmp(err, "costs.dp_overlap", 16) == 0,
        "a share above 1 refused: %s", err);
  nd_costs_init(&c);
  nd_strategy_init(&st);
  st.tp = 5;
  CHECK(run(&st, &c, &e, err) != 0 && err[0] != '\0', "tp 5 refused with a reason");

  if (failures) fprintf(stderr, "test_estimate: %d failure(s)\n", failures);
  else printf("test_estimate: all passed\n");
  return failures ? 1 : 0;
}
