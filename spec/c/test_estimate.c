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
#include "fixtures.h"



static int run (nd_strategy *st, const nd_costs *c, nd_estimate *e, char *err) {
  static nd_model_spec m;
  static nd_device d;
  nd_job job = {16, 128, 4096};
  fixture_llama8b(&m);
  fixture_h100(&d);
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

  /* the kinds of a stack in several runs (per-layer MLP widths), numbered once per model
     or per call, and counted run by run or (a per-layer plan of the same modes) layer by
     layer: the same figures, with FP8 keeping BF16 layers at both ends */
  {
    static nd_model_spec m;
    static nd_device d;
    static nd_strategy u, pl;
    static nd_layer_plan modes;
    static nd_estimate a, b;
    nd_job job = {16, 128, 4096};
    int k, mode;
    fixture_llama8b(&m);
    fixture_h100(&d);
    for (i = 0; i < 32; i++) m.layer[i].ffn_size = i % 7 < 3 ? 8192 : 0;
    for (k = 0; k < 4; k++)
      for (mode = 0; mode < ND_RECOMPUTE_COUNT; mode++) {
        const char *what = k == 0 ? "1f1b" : k == 1 ? "interleaved" : k == 2 ? "fp8" : "dualpipe";
        nd_strategy_init(&u);
        u.tp = 2; u.pp = 4; u.recompute = (nd_recompute)mode;
        if (k == 1) u.vpp = 2;
        if (k == 2) { u.precision = ND_RECIPE_FP8_DELAYED; u.bf16_first = 2; u.bf16_last = 3; }
        if (k == 3) u.schedule = ND_SCHED_DUALPIPE;
        pl = u;
        pl.layers = &modes;
        for (i = 0; i < 32; i++) modes.recompute[i] = (unsigned char)mode;
        m.kinds.count = 0;  /* numbered per call */
        CHECK(nd_estimate_run(&m, &d, &job, &u, &c, &a, err, sizeof err) == 0, "%s: %s", what, err);
        nd_model_number_kinds(&m);
        CHECK(nd_estimate_run(&m, &d, &job, &u, &c, &b, err, sizeof err) == 0, "%s: %s", what, err);
        CHECK(a.step_time == b.step_time && a.peak == b.peak, "%s %s: numbered once or per call",
              what, nd_recompute_name((nd_recompute)mode));
        CHECK(nd_estimate_run(&m, &d, &job, &pl, &c, &b, err, sizeof err) == 0, "%s: %s", what, err);
        CHECK(a.step_time == b.step_time && a.peak == b.peak,
              "%s %s: by runs as layer by layer", what, nd_recompute_name((nd_recompute)mode));
        for (s = 0; s < a.stages; s++)
          CHECK(a.stage[s].weights == b.stage[s].weights
                && a.stage[s].activations == b.stage[s].activations
                && a.stage[s].quant_params == b.stage[s].quant_params,
                "%s %s: stage %d by runs as layer by layer", what,
                nd_recompute_name((nd_recompute)mode), s);
      }
  }

  /* model FLOPs are the model's whatever the schedule: DualPipe holds every layer on two
     devices, and counted each stage's layers (both of its chunks) once each, MFU 2x */
  {
    static nd_model_spec m;
    static nd_device d;
    static nd_strategy u;
    static nd_estimate a, b;
    nd_job job = {16, 128, 4096};
    int mode;
    fixture_llama8b(&m);
    fixture_h100(&d);
    for (mode = 0; mode < ND_RECOMPUTE_COUNT; mode++) {
      nd_strategy_init(&u);
      u.tp = 2; u.pp = 4; u.recompute = (nd_recompute)mode;
      CHECK(nd_estimate_run(&m, &d, &job, &u, &c, &a, err, sizeof err) == 0, "1f1b: %s", err);
      nd_strategy_init(&u);
      u.tp = 2; u.pp = 4; u.recompute = (nd_recompute)mode; u.schedule = ND_SCHED_DUALPIPE;
      CHECK(nd_estimate_run(&m, &d, &job, &u, &c, &b, err, sizeof err) == 0, "dualpipe: %s", err);
      CHECK(fabs(b.model_flops / a.model_flops - 1.0) < 1e-12
            && fabs(b.hardware_flops / a.hardware_flops - 1.0) < 1e-12,
            "%s: model FLOPs %.6g under DualPipe, %.6g under 1F1B (hardware %.6g, %.6g)",
            nd_recompute_name((nd_recompute)mode), b.model_flops, a.model_flops,
            b.hardware_flops, a.hardware_flops);
      CHECK(fabs(b.mfu * b.step_time / (a.mfu * a.step_time) - 1.0) < 1e-12,
            "%s: MFU x step time differs between the schedules",
            nd_recompute_name((nd_recompute)mode));
    }
  }

  /* the model states by hand (Llama-3.1-8B, Megatron's mixed precision: bf16 weights, fp32
     main grads, fp32 master and two Adam moments: 2 + 4 + 12 bytes a parameter), sharded by
     ZeRO stage k over DP 16: the optimizer from 1, the grads from 2, the weights at 3; and
     PP 2's stages by hand: the embedding and 16 layers, then 16 layers, the final norm and
     the head (a layer: attention 41,943,040 + MLP 3 x 4096 x 14336 + two norms of 4096) */
  {
    const double total = 8030261248.0, embed = 525336576.0;
    const double layer = 41943040.0 + 3.0 * 4096 * 14336 + 2 * 4096;
    int z;
    for (z = 0; z <= 3; z++) {
      nd_strategy_init(&st);
      st.zero = z;
      CHECK(run(&st, &c, &e, err) == 0, "zero %d: %s", z, err);
      CHECK(e.stage[0].params == total, "zero %d: %.0f parameters", z, e.stage[0].params);
      CHECK(e.stage[0].weights == total * 2 / (z >= 3 ? 16 : 1), "zero %d: weights %.0f", z,
            e.stage[0].weights);
      CHECK(e.stage[0].grads == total * 4 / (z >= 2 ? 16 : 1), "zero %d: grads %.0f", z,
            e.stage[0].grads);
      CHECK(e.stage[0].optimizer == total * 12 / (z >= 1 ? 16 : 1), "zero %d: optimizer %.0f", z,
            e.stage[0].optimizer);
    }
    nd_strategy_init(&st);
    st.pp = 2;
    CHECK(run(&st, &c, &e, err) == 0, "pp 2: %s", err);
    CHECK(e.stage[0].params == embed + 16 * layer && e.stage[1].params == 16 * layer + 4096 + embed,
          "pp 2 stages hold %.0f and %.0f parameters", e.stage[0].params, e.stage[1].params);
  }

  if (failures) fprintf(stderr, "test_estimate: %d failure(s)\n", failures);
  else printf("test_estimate: all passed\n");
  return failures ? 1 : 0;
}
