/*
** test_strategy.c -- strategy names and resolve: every schedule, recompute and op name
** parses back to itself; the schedule a vpp runs; the pipeline warm-up against a schedule
** simulated here (1F1B: a stage starts backwards once the last stage's first backward
** reaches it; interleaved: Megatron's count); resolve derives dp and mb, refuses what the
** job cannot split, and gives the same strategy when run on its own output.
*/
#include <stdio.h>
#include <string.h>

#include "ndplan/estimate.h"
#include "ndplan/strategy.h"
#include "fixtures.h"


/* 1F1B warm-up by simulation: forwards stage s can run before micro-batch 0's backward
   returns to it (one forward per tick down the pipe, the backward one tick per stage back),
   bounded by the micro-batches: the stage keeps pp - s in flight at most. */
static int sim_warmup_1f1b (int p, int m, int s) {
  int in_flight_limit = p - s, n = in_flight_limit - 1;  /* the one in progress is not warm-up */
  return n < m ? n : m;
}


int main (void) {
  int i, p, s, m, v;
  char err[256];

  for (i = 0; i < ND_SCHED_COUNT; i++) {
    nd_schedule out;
    CHECK(nd_schedule_parse(nd_schedule_name((nd_schedule)i), &out) == 0 && (int)out == i,
          "schedule %d round trip", i);
  }
  for (i = 0; i < ND_RECOMPUTE_COUNT; i++) {
    nd_recompute out;
    CHECK(nd_recompute_parse(nd_recompute_name((nd_recompute)i), &out) == 0 && (int)out == i,
          "recompute %d round trip", i);
  }
  for (i = 0; i < ND_OP_COUNT; i++) {
    int out;
    CHECK(nd_op_parse(nd_op_name(i), &out) == 0 && out == i, "op %d round trip", i);
  }
  {
    nd_schedule out;
    CHECK(nd_schedule_parse("bogus", &out) != 0, "unknown schedule refused");
    CHECK(nd_schedule_name(ND_SCHED_COUNT) == NULL, "out-of-range name");
  }

  /* the schedule a strategy runs */
  CHECK(nd_schedule_of(ND_SCHED_1F1B, 2) == ND_SCHED_INTERLEAVED, "vpp 2 interleaves");
  CHECK(nd_schedule_of(ND_SCHED_INTERLEAVED, 1) == ND_SCHED_1F1B, "interleaved at vpp 1");
  CHECK(nd_schedule_of(ND_SCHED_ZB, 1) == ND_SCHED_ZB && nd_schedule_of(ND_SCHED_GPIPE, 1)
        == ND_SCHED_GPIPE, "others kept");
  CHECK(nd_schedule_megatron(ND_SCHED_1F1B) && nd_schedule_megatron(ND_SCHED_INTERLEAVED)
        && !nd_schedule_megatron(ND_SCHED_ZB) && !nd_schedule_megatron(ND_SCHED_DUALPIPE)
        && !nd_schedule_megatron(ND_SCHED_GPIPE), "Megatron states 1f1b and interleaved");

  /* warm-up */
  for (p = 1; p <= 8; p++)
    for (m = 1; m <= 20; m++)
      for (s = 0; s < p; s++) {
        nd_strategy st;
        nd_strategy_init(&st);
        st.pp = p; st.mb = m;
        CHECK(nd_pipeline_warmup(&st, s) == sim_warmup_1f1b(p, m, s), "1f1b p%d m%d s%d", p, m, s);
        st.schedule = ND_SCHED_GPIPE;
        CHECK(nd_pipeline_warmup(&st, s) == m, "gpipe warms up with every micro-batch");
        for (v = 2; v <= 4; v++) {
          int want = (p - s - 1) * 2 + (v - 1) * p;  /* Megatron's num_warmup_microbatches */
          st.schedule = ND_SCHED_INTERLEAVED; st.vpp = v;
          if (want > m * v) want = m * v;
          CHECK(nd_pipeline_warmup(&st, s) == want, "interleaved p%d v%d m%d s%d", p, v, m, s);
        }
      }

  /* resolve: derived fields, refusals, and resolving its own output again */
  {
    nd_model_spec mod;
    nd_job job = {64, 512, 4096};
    nd_strategy st, again;
    fixture_llama8b(&mod);
    nd_strategy_init(&st);
    st.tp = 8; st.pp = 2;
    CHECK(nd_strategy_resolve(&st, &mod, &job, err, sizeof err) == 0, "resolves: %s", err);
    CHECK(st.dp == 4 && st.mb == 128, "dp = 64 / (8*2), mb = 512 / 4: dp %d mb %d", st.dp, st.mb);
    CHECK(st.stage_layers[0] + st.stage_layers[1] == 32, "every layer placed");
    again = st;
    CHECK(nd_strategy_resolve(&again, &mod, &job, err, sizeof err) == 0
          && memcmp(&again, &st, sizeof st) == 0, "resolve is idempotent at vpp 1: %s", err);
    nd_strategy_init(&st);
    st.tp = 3;
    CHECK(nd_strategy_resolve(&st, &mod, &job, err, sizeof err) != 0, "tp 3 does not divide 64");
    nd_strategy_init(&st);
    st.tp = 8; st.mbs = 3;
    CHECK(nd_strategy_resolve(&st, &mod, &job, err, sizeof err) != 0
          && strstr(err, "global batch") != NULL, "512 is not a multiple of 8*3: %s", err);
    nd_strategy_init(&st);
    st.tp = 8; st.pp = 2; st.vpp = 2;
    CHECK(nd_strategy_resolve(&st, &mod, &job, err, sizeof err) == 0
          && st.schedule == ND_SCHED_INTERLEAVED, "vpp 2 resolves to interleaved: %s", err);
  }

  if (failures) fprintf(stderr, "test_strategy: %d failure(s)\n", failures);
  else printf("test_strategy: all passed\n");
  return failures ? 1 : 0;
}
