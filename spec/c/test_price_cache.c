/*
** test_price_cache.c -- nd_price_cache (issue 18): estimates through a cache give the same
** bits as without one, over a walk of strategies that share and do not share the degrees a
** kind's price depends on (a cache too small for them, so entries are replaced), on two
** models and two devices through one cache (each change empties it), and runs that differ
** in ep and etp only (the kinds' mixers kept apart from them); nd_estimate_layers
** gives each layer what nd_estimate_layer gives it; refusals stay the same refusals.
*/
#include <stdio.h>
#include <string.h>

#include "ndplan/estimate.h"
#include "fixtures.h"

/* A small MoE model: 8 layers, 16 heads, 8 experts. */
static void small_moe (nd_model_spec *m) {
  nd_model_init(m);
  strcpy(m->name, "small-moe");
  m->hidden_size = 1024; m->num_layers = 8; m->num_heads = 16; m->num_kv_heads = 16;
  m->head_dim = 64; m->ffn_size = 0; m->vocab_size = 32000;
  m->num_experts = 8; m->top_k = 2; m->moe_ffn_size = 1024;
  nd_model_default_stack(m);
  nd_model_number_kinds(m);
}

static int same_stage (const nd_stage_estimate *a, const nd_stage_estimate *b) {
  return a->layers == b->layers && a->inflight == b->inflight && a->params == b->params
      && a->quant_params == b->quant_params && a->weights == b->weights
      && a->grads == b->grads && a->optimizer == b->optimizer
      && a->activations == b->activations && a->reserve == b->reserve && a->peak == b->peak
      && a->allocated == b->allocated && a->reserved == b->reserved
      && a->buffers == b->buffers && a->fwd_s == b->fwd_s && a->bwd_s == b->bwd_s
      && a->recompute_s == b->recompute_s && a->comm_s == b->comm_s;
}

static int same_estimate (const nd_estimate *a, const nd_estimate *b) {
  int i;
  if (a->step_time != b->step_time || a->peak != b->peak || a->heaviest != b->heaviest
      || a->stages != b->stages || a->mfu != b->mfu || a->hfu != b->hfu
      || a->tokens_per_s != b->tokens_per_s || a->model_flops != b->model_flops
      || a->hardware_flops != b->hardware_flops)
    return 0;
  for (i = 0; i < ND_T_COUNT; i++) if (a->time_parts[i] != b->time_parts[i]) return 0;
  for (i = 0; i < a->stages; i++) if (!same_stage(&a->stage[i], &b->stage[i])) return 0;
  return 1;
}

static unsigned rnd_state = 12345u;
static unsigned rnd (unsigned n) {
  rnd_state = rnd_state * 1103515245u + 12345u;
  return (rnd_state >> 16) % n;
}

static nd_estimate plain, cached;

int main (void) {
  static nd_model_spec models[2];
  nd_device devs[2];
  nd_costs c;
  nd_price_cache *pc = nd_price_cache_new(8);  /* 2 sets of 4: replaced often */
  char err1[256], err2[256];
  int i, priced = 0, refused = 0;
  static const int tps[] = {1, 2, 4, 8}, pps[] = {1, 2, 4}, dps[] = {1, 2, 4};
  CHECK(pc != NULL, "a cache");
  fixture_llama8b(&models[0]);
  nd_model_number_kinds(&models[0]);
  small_moe(&models[1]);
  fixture_h100(&devs[0]);
  devs[1] = devs[0];
  devs[1].scale_up.bandwidth = 900e9;  /* another device: other TP and EP prices */
  nd_costs_init(&c);
  for (i = 0; i < 600; i++) {
    /* a run of strategies on one (model, device) that changes every 150 */
    const nd_model_spec *m = &models[(i / 150) % 2];
    const nd_device *d = &devs[(i / 75) % 2];
    nd_strategy st, st2;
    nd_job job;
    int r1, r2;
    nd_strategy_init(&st);
    st.tp = tps[rnd(4)]; st.pp = pps[rnd(3)]; st.dp = dps[rnd(3)]; st.cp = 1 + (int)rnd(2);
    st.mbs = 1 + (int)rnd(2); st.zero = (int)rnd(4); st.sp = st.tp > 1 && rnd(2);
    st.recompute = (nd_recompute)rnd(ND_RECOMPUTE_COUNT);
    if (st.pp > 1 && rnd(2)) st.vpp = 2;
    if (m->num_experts > 0) st.ep = 1 << rnd(4);
    if (rnd(4) == 0) st.precision = ND_RECIPE_FP8_DELAYED;
    job.devices = (long long)st.tp * st.pp * st.dp * st.cp;
    job.global_batch = (long long)st.dp * st.mbs * 8;
    job.seq_len = 2048;
    st2 = st;
    r1 = nd_estimate_run(m, d, &job, &st, &c, &plain, err1, sizeof err1);
    r2 = nd_estimate_run_cached(m, d, &job, &st2, &c, pc, &cached, err2, sizeof err2);
    CHECK(r1 == r2, "strategy %d: %d without the cache, %d with it (%s / %s)", i, r1, r2,
          r1 ? err1 : "", r2 ? err2 : "");
    if (r1 != 0 || r2 != 0) {
      CHECK(r1 != 0 && r2 != 0 && strcmp(err1, err2) == 0, "strategy %d: %s / %s", i, err1, err2);
      refused++;
      continue;
    }
    priced++;
    CHECK(same_estimate(&plain, &cached), "strategy %d (tp %d pp %d dp %d cp %d mbs %d zero %d "
          "recompute %d): the same bits through the cache", i, st.tp, st.pp, st.dp, st.cp,
          st.mbs, st.zero, (int)st.recompute);
    {  /* each layer alone, and all of them at once through the cache */
      int layers[64], n = (int)(m->num_layers + m->mtp_layers), k;
      static nd_layer_estimate one, all[64];
      for (k = 0; k < n; k++) layers[k] = k;
      st2 = st;
      CHECK(nd_estimate_layers(m, d, &job, &st2, &c, pc, n, layers, all, err2, sizeof err2) == 0,
            "strategy %d: layers: %s", i, err2);
      for (k = 0; k < n; k++) {
        st2 = st;
        CHECK(nd_estimate_layer(m, d, &job, &st2, &c, k, &one, err1, sizeof err1) == 0,
              "strategy %d layer %d: %s", i, k, err1);
        CHECK(memcmp(&one, &all[k], sizeof one) == 0, "strategy %d layer %d: the same bits", i, k);
      }
    }
  }
  CHECK(priced > 300 && refused > 0, "%d priced, %d refused (both kinds of case walked)", priced,
        refused);
  {  /* the mixers kept apart from ep and etp: runs of strategies that differ in those only
        (each kind's mixer then recalled), the same bits as without the cache */
    int tp, ep, etp, runs = 0;
    for (tp = 2; tp <= 4; tp *= 2)
      for (ep = 1; ep <= 8; ep *= 2)
        for (etp = 1; etp <= 2; etp++) {
          nd_strategy st, st2;
          nd_job job = {32, 64, 2048};
          int r1, r2;
          nd_strategy_init(&st);
          st.tp = tp; st.dp = 32 / tp; st.sp = 1; st.ep = ep; st.etp = etp;
          st.precision = ep == 4 ? ND_RECIPE_FP8_DELAYED : ND_RECIPE_BF16;  /* (a key change) */
          st2 = st;
          r1 = nd_estimate_run(&models[1], &devs[0], &job, &st, &c, &plain, err1, sizeof err1);
          r2 = nd_estimate_run_cached(&models[1], &devs[0], &job, &st2, &c, pc, &cached, err2,
                                      sizeof err2);
          CHECK(r1 == r2, "tp %d ep %d etp %d: %d without the cache, %d with it", tp, ep, etp,
                r1, r2);
          if (r1 != 0 || r2 != 0) continue;
          runs++;
          CHECK(same_estimate(&plain, &cached), "tp %d ep %d etp %d: the same bits through the "
                "cache", tp, ep, etp);
        }
    CHECK(runs >= 10, "%d of the ep and etp runs priced", runs);
  }
  nd_price_cache_free(pc);
  if (failures) fprintf(stderr, "test_price_cache: %d failure(s)\n", failures);
  return failures ? 1 : 0;
}
