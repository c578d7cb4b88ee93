/*
** fuzz_estimate.c -- the estimators fed random models, devices, jobs and strategies.
**
** The bytes are read as a stream of choices (an exhausted stream reads as zeros, so every
** input is a complete case). A model that nd_model_validate refuses, a device that
** nd_device_validate refuses or a strategy the estimator refuses is skipped: only a priced
** strategy is checked, and every check that fails aborts.
**
** Checked on every priced strategy: each figure finite and >= 0, step time and peak > 0,
** the time parts add up to the step time, the heaviest stage's peak is the peak and no
** stage is heavier. The per-layer recompute planner then runs under a budget drawn between
** the whole-model full and none peaks; a plan must respect the budget, use only the modes
** allowed and pass the same checks.
**
** NDPLAN_FUZZ_STRICT=1 adds the planner's softer contracts: it refuses only for lack of
** memory, finds a plan whenever whole-model full recompute fits, and that plan is never
** slower than full recompute. NDPLAN_FUZZ_STATS=1 prints how far the inputs got.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/device.h"
#include "ndplan/estimate.h"
#include "ndplan/model.h"
#include "ndplan/recompute.h"
#include "ndplan/strategy.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* {======================================================================
** The byte stream
** ======================================================================= */

typedef struct rd { const uint8_t *p; size_t n; } rd;

static unsigned u8 (rd *r) {
  if (r->n == 0) return 0;
  r->n--;
  return *r->p++;
}

static uint32_t u32 (rd *r) {
  uint32_t v = u8(r);
  v |= (uint32_t)u8(r) << 8;
  v |= (uint32_t)u8(r) << 16;
  return v | (uint32_t)u8(r) << 24;
}

static uint64_t u64 (rd *r) {
  uint64_t lo = u32(r);
  return lo | (uint64_t)u32(r) << 32;
}

static int flag (rd *r) { return u8(r) & 1; }

/* An integer in [lo, hi], uniform over the bytes read. */
static int64_t range (rd *r, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)(hi - lo) + 1u, v = hi - lo < 256 ? u8(r) : u32(r);
  return lo + (int64_t)(v % span);
}

/* An integer in [lo, hi] on a log scale: small values as likely as large ones. */
static int64_t logrange (rd *r, int64_t lo, int64_t hi) {
  int bits = 0, b;
  int64_t top, v;
  while (bits < 62 && ((int64_t)1 << (bits + 1)) <= hi) bits++;
  b = (int)range(r, 0, bits);
  top = ((int64_t)1 << b) * 2 - 1;
  v = range(r, (int64_t)1 << b >> 1, top > hi ? hi : top);
  return v < lo ? lo : v > hi ? hi : v;
}

/* A double in [lo, hi] on a log scale (lo > 0). */
static double logreal (rd *r, double lo, double hi) {
  double t = (double)u32(r) / 4294967295.0;
  return lo * pow(hi / lo, t);
}

static double unit (rd *r) { return (double)u32(r) / 4294967295.0; }

/* A positive divisor of n (n >= 1). */
static int64_t divisor_of (rd *r, int64_t n) {
  int64_t d[64], k = 0, i;
  if (n < 1 || n > ((int64_t)1 << 40)) return 1;  /* raw fields may hold anything */
  for (i = 1; i * i <= n && k < 62; i++)
    if (n % i == 0) { d[k++] = i; if (i != n / i) d[k++] = n / i; }
  return d[range(r, 0, k - 1)];
}

/* }====================================================================== */

/* {======================================================================
** Cases
** ======================================================================= */

/* A model within the validator's ranges (mostly), in one of the shapes ndplan knows. */
static void make_model (rd *r, nd_model_spec *m) {
  int64_t i, n;
  unsigned shape = u8(r);
  nd_model_init(m);
  strcpy(m->name, "fuzz");
  strcpy(m->family, "fuzz");
  m->hidden_size = logrange(r, 1, (int64_t)1 << 17);
  m->num_layers = logrange(r, 1, ND_MAX_LAYERS);
  m->mtp_layers = (u8(r) & 7) == 0 ? range(r, 0, 3) : 0;
  m->num_kv_heads = logrange(r, 1, 256);
  m->num_heads = m->num_kv_heads * logrange(r, 1, 64);
  m->head_dim = logrange(r, 1, 1024);
  m->ffn_size = logrange(r, 1, (int64_t)1 << 20);
  m->vocab_size = logrange(r, 1, (int64_t)1 << 24);
  m->max_position = flag(r) ? logrange(r, 1, (int64_t)1 << 20) : 0;
  m->position = (int)range(r, 0, ND_POS_KINDS - 1);
  m->position_count = m->position == ND_POS_LEARNED ? logrange(r, 1, 1 << 20) : 0;
  m->tie_embeddings = flag(r);
  m->qkv_bias = flag(r); m->o_bias = flag(r); m->mlp_bias = flag(r);
  m->qk_norm = flag(r); m->attn_sinks = flag(r);
  m->norm = (int)range(r, 0, ND_NORM_KINDS - 1);
  m->norms_per_layer = (int)range(r, 0, 4);
  m->final_norm = flag(r); m->embed_norm = flag(r);
  m->embed_proj = (u8(r) & 7) == 0 ? logrange(r, 1, 1 << 14) : 0;
  m->gated_mlp = flag(r);
  m->attn_output_gate = flag(r);
  /* MLA */
  m->q_lora_rank = flag(r) ? logrange(r, 1, 4096) : 0;
  m->kv_lora_rank = logrange(r, 1, 2048);
  m->qk_nope_head_dim = logrange(r, 0, 256);
  m->qk_rope_head_dim = logrange(r, 0, 128);
  m->v_head_dim = logrange(r, 1, 256);
  /* MoE */
  m->num_experts = logrange(r, 1, 1024);
  m->top_k = range(r, 1, m->num_experts < 16 ? m->num_experts : 16);
  m->moe_ffn_size = logrange(r, 1, 1 << 14);
  if (flag(r)) {
    m->expert_groups = divisor_of(r, m->num_experts);
    m->groups_per_token = range(r, 1, m->expert_groups);
  }
  if (flag(r)) {
    m->num_shared_experts = range(r, 1, 4);
    m->shared_ffn_size = m->num_shared_experts * m->moe_ffn_size;
    m->shared_expert_gate = flag(r);
  }
  m->router_bias = flag(r); m->expert_bias = flag(r);
  /* Gated DeltaNet */
  m->linear_k_heads = logrange(r, 1, 64);
  m->linear_v_heads = m->linear_k_heads * range(r, 1, 4);
  m->linear_k_dim = logrange(r, 1, 256);
  m->linear_v_dim = logrange(r, 1, 256);
  m->conv_kernel = range(r, 1, 8);
  m->sliding_window = flag(r) ? logrange(r, 1, 1 << 17) : 0;
  m->chunked_window = flag(r);
  /* DeepSeek sparse attention: only MLA stacks take it (the validator refuses the rest) */
  m->index_topk = flag(r) && m->kv_lora_rank > 0 ? logrange(r, 1, 1 << 14) : 0;
  m->index_heads = logrange(r, 1, 64);
  m->index_head_dim = logrange(r, 1, 256);
  /* Mamba-2 */
  m->mamba_groups = logrange(r, 1, 16);
  m->mamba_heads = m->mamba_groups * range(r, 1, 32);
  m->mamba_head_dim = logrange(r, 1, 128);
  m->mamba_state = logrange(r, 1, 256);
  m->mamba_conv = range(r, 1, 8);
  m->mamba_chunk = logrange(r, 1, 512);
  m->mamba_conv_bias = flag(r); m->mamba_proj_bias = flag(r);
  /* the stack: one of the published layouts, or any mix */
  n = m->num_layers + m->mtp_layers;
  if (n > ND_MAX_LAYERS) { m->mtp_layers = 0; n = m->num_layers; }
  {
    int interval = (int)range(r, 1, 6), dense_first = (int)range(r, 0, 3);
    for (i = 0; i < n; i++) {
      nd_layer_kind *k = &m->layer[i];
      int mtp = i >= m->num_layers;
      switch ((shape >> 4) % 7) {  /* attention */
        case 0: k->attention = ND_ATTN_FULL; break;
        case 1: k->attention = ND_ATTN_MLA; break;
        case 2: k->attention = (i + 1) % interval == 0 || mtp ? ND_ATTN_FULL : ND_ATTN_LINEAR;
          break;
        case 3: k->attention = i % interval == 0 ? ND_ATTN_FULL : ND_ATTN_SLIDING; break;
        case 4: k->attention = (unsigned char)(i < 64 ? u8(r) % ND_ATTN_KINDS : ND_ATTN_FULL);
          break;
        case 5:  /* Nemotron-H: Mamba-2, MLP-only and attention-only layers */
          k->attention = mtp ? ND_ATTN_FULL : (unsigned char)(i % 3 == 0 ? ND_ATTN_MAMBA
                                                          : i % 3 == 1 ? ND_ATTN_NONE
                                                          : ND_ATTN_FULL);
          break;
        default: k->attention = ND_ATTN_FULL; break;
      }
      switch (shape % 4) {  /* MLP */
        case 0: k->mlp = ND_MLP_DENSE; break;
        case 1: k->mlp = ND_MLP_MOE; break;
        case 2: k->mlp = i < dense_first ? ND_MLP_DENSE : ND_MLP_MOE; break;
        default: k->mlp = (unsigned char)(i < 64 ? u8(r) % ND_MLP_KINDS : ND_MLP_MOE); break;
      }
      if ((shape >> 4) % 7 == 5 && !mtp && k->attention != ND_ATTN_NONE) k->mlp = ND_MLP_NONE;
      if ((shape >> 4) % 7 == 5 && !mtp && i % 5 == 4) {  /* Nemotron NAS: identity blocks */
        k->attention = ND_ATTN_NONE;
        k->mlp = ND_MLP_NONE;
      }
      k->mtp = (unsigned char)mtp;
    }
  }
  {  /* the estimator reads num_experts > 0 as "an MoE model" (EP groups, SP with TP): a
        dense stack mostly says so, as loaded models do */
    int moe = 0;
    for (i = 0; i < n; i++) moe |= m->layer[i].mlp == ND_MLP_MOE;
    if (!moe && (u8(r) & 7) != 0) {
      m->num_experts = m->top_k = m->moe_ffn_size = 0;
      m->expert_groups = m->groups_per_token = 0;
      m->num_shared_experts = m->shared_ffn_size = 0;
      m->shared_expert_gate = m->router_bias = m->expert_bias = 0;
    }
  }
  if (m->sliding_window == 0) {  /* a sliding layer needs a window */
    for (i = 0; i < n; i++)
      if (m->layer[i].attention == ND_ATTN_SLIDING) { m->sliding_window = 4096; break; }
  }
  if ((shape & 0x0c) == 0x0c && flag(r)) {  /* raw fields: the validator's own robustness */
    int64_t *f[] = {&m->hidden_size, &m->num_heads, &m->num_kv_heads, &m->head_dim,
                    &m->ffn_size, &m->vocab_size, &m->top_k, &m->num_experts,
                    &m->kv_lora_rank, &m->qk_nope_head_dim, &m->mtp_layers, &m->expert_groups};
    f[u8(r) % (sizeof f / sizeof f[0])][0] = (int64_t)u64(r);
  }
}

/* A device with every figure within a wide but physical range. */
static void make_device (rd *r, nd_device *d) {
  nd_device_init(d);
  strcpy(d->name, "fuzz");
  d->peak_flops[ND_PREC_BF16] = logreal(r, 1e12, 1e16);
  d->peak_flops[ND_PREC_FP16] = flag(r) ? d->peak_flops[ND_PREC_BF16] : 0.0;
  d->peak_flops[ND_PREC_FP8] = flag(r) ? 2.0 * d->peak_flops[ND_PREC_BF16] : 0.0;
  d->peak_flops[ND_PREC_MXFP8] = flag(r) ? d->peak_flops[ND_PREC_FP8] : 0.0;
  d->peak_flops[ND_PREC_NVFP4] = flag(r) ? 4.0 * d->peak_flops[ND_PREC_BF16] : 0.0;
  d->hbm_bytes = logreal(r, 1e9, 1e13);
  d->hbm_bandwidth = logreal(r, 1e10, 1e14);
  d->scale_up.domain_size = (int)logrange(r, 1, 1024);
  d->scale_up.bandwidth = logreal(r, 1e9, 1e13);
  d->scale_up.latency = flag(r) ? 0.0 : logreal(r, 1e-7, 1e-3);
  d->scale_out.bandwidth = logreal(r, 1e8, 1e12);
  d->scale_out.latency = flag(r) ? 0.0 : logreal(r, 1e-7, 1e-3);
  d->host_link.bandwidth = logreal(r, 1e8, 1e12);
  d->host_link.latency = logreal(r, 1e-7, 1e-3);
  d->efficiency.gemm = logreal(r, 0.01, 1.0);
  d->efficiency.gemm_half_size = flag(r) ? 0.0 : logreal(r, 1e3, 1e13);
  d->efficiency.hbm = logreal(r, 0.01, 1.0);
  d->efficiency.scale_up = logreal(r, 0.01, 1.0);
  d->efficiency.scale_out = logreal(r, 0.01, 1.0);
  d->efficiency.kernel_overhead = flag(r) ? 0.0 : logreal(r, 1e-7, 1e-2);
  d->reserve_bytes = unit(r) * 0.5 * d->hbm_bytes;
}

/* Named costs: the defaults, or any value within nd_costs_validate's bounds. */
static void make_costs (rd *r, nd_costs *c) {
  nd_costs_init(c);
  if (!flag(r)) return;
  c->weight_bytes = range(r, 1, 8);        /* > 0: keeps the peak positive */
  c->grad_bytes = range(r, 0, 8);
  c->master_bytes = range(r, 0, 8);
  c->optimizer_bytes = range(r, 0, 16);
  c->activation_bytes = range(r, 1, 4);
  c->dropout = flag(r);
  c->capacity_factor = 0.5 + unit(r) * 3.5;
  c->dp_overlap = unit(r); c->tp_overlap = unit(r); c->cp_overlap = unit(r);
  c->ep_overlap = unit(r); c->zero3_overlap = unit(r); c->offload_overlap = unit(r);
  c->overlap_sm_share = unit(r) * 0.99;
  c->ep_node_dedup = flag(r);
  c->zero3_flat_ring = flag(r);
  c->memory_ops = unit(r) * 8.0;
  c->optimizer_traffic = unit(r) * 64.0;
}

/* A strategy and the job it runs; degrees mostly chosen to divide what they must. */
static void make_strategy (rd *r, const nd_model_spec *m, nd_strategy *st, nd_layer_plan *pl,
                           nd_job *job) {
  int body = (int)m->num_layers, total = (int)(m->num_layers + m->mtp_layers), i;
  long long devices;
  nd_strategy_init(st);
  st->tp = (int)(flag(r) ? divisor_of(r, m->num_heads > 64 ? 64 : m->num_heads)
                         : logrange(r, 1, 64));
  st->pp = (int)logrange(r, 1, body < 64 ? body : 64);
  st->cp = (int)logrange(r, 1, 8);
  st->dp = (int)logrange(r, 1, 256);
  st->vpp = (u8(r) & 3) == 0 ? (int)range(r, 2, 4) : 1;
  st->sp = flag(r) || m->num_experts > 0;  /* MoE with TP needs SP */
  st->zero = (int)range(r, 0, 3);
  st->mbs = (int)logrange(r, 1, 8);
  st->mb = (int)logrange(r, 1, 128);
  if (m->num_experts > 0 && (m->layer[total - 1].mlp == ND_MLP_MOE || flag(r))) {
    long long dense = (long long)st->tp * st->cp * st->dp;
    st->ep = (int)divisor_of(r, m->num_experts < dense ? m->num_experts : dense);
    st->etp = flag(r) ? (int)divisor_of(r, st->tp) : 1;
  }
  else if ((u8(r) & 15) == 0) st->ep = 2;  /* refused without experts */
  st->schedule = (nd_schedule)range(r, 0, ND_SCHED_COUNT - 1);
  if (st->schedule == ND_SCHED_DUALPIPE && flag(r)) {  /* meet its requirements */
    int even = st->pp < 2 ? 2 : st->pp & ~1;
    if (even > body) even = body & ~1;
    if (even < 2) st->schedule = ND_SCHED_1F1B;
    else { st->pp = even; st->mb = 2 * st->pp * (int)range(r, 1, 4); }
  }
  if (st->vpp > 1) {  /* interleaving: chunks must divide the layers, mb a multiple of pp */
    if (st->pp < 2 || body % (st->pp * st->vpp) != 0) st->vpp = 1;
    else st->mb = st->pp * (int)range(r, 1, 8);
  }
  st->recompute = (nd_recompute)range(r, 0, ND_RECOMPUTE_COUNT - 1);
  if ((u8(r) & 3) == 0) {
    unsigned run = u8(r);
    memset(pl, 0, sizeof *pl);
    st->layers = pl;
    for (i = 0; i < total; i++)
      pl->recompute[i] = (unsigned char)(run & 1 ? (i * 7 + run) % 3 : u8(r) % 3);
    if (run & 2)  /* selective layers with their own switch sets */
      for (i = 0; i < total; i++) pl->ops[i] = (unsigned char)(u8(r) % ND_OP_MASKS);
  }
  if (u8(r) & 1) st->selective_ops = (unsigned)(u8(r) % ND_OP_MASKS);
  switch (u8(r) & 3) {
    case 0: st->offload = 0.0; break;
    case 1: st->offload = 1.0; break;
    case 2: st->offload = unit(r); break;
    default: st->offload = 0.0; break;
  }
  st->precision = (nd_recipe_id)range(r, 0, ND_RECIPE_COUNT - 1);
  st->param_gather = (u8(r) & 3) == 0;
  st->bf16_first = (u8(r) & 3) == 0 ? (int)range(r, 0, 2) : -1;
  st->bf16_last = (u8(r) & 3) == 0 ? (int)range(r, 0, 2) : -1;
  st->flash_attention = !((u8(r) & 7) == 0);
  if (st->vpp == 1 && (u8(r) & 3) == 0 && st->pp <= total) {  /* explicit layout */
    int left = total;
    st->explicit_layout = ND_LAYOUT_CHUNKS;
    for (i = 0; i < st->pp; i++) {
      int rest = st->pp - i - 1, give = rest == 0 ? left : (int)range(r, 1, left - rest);
      st->stage_layers[i] = give;
      left -= give;
    }
  }
  devices = (long long)st->dp * st->tp * st->cp * st->pp;
  if ((u8(r) & 15) == 0) st->dp = 0;  /* derived from the device count */
  job->devices = (int)(devices > (1 << 24) ? 1 << 24 : devices);
  job->seq_len = (int)logrange(r, 1, 1 << 17);
  if (flag(r)) job->seq_len = (job->seq_len + 2 * st->cp - 1) / (2 * st->cp) * 2 * st->cp;
  job->global_batch = (long long)(st->dp ? st->dp : devices / ((long long)st->tp * st->cp * st->pp))
                      * st->mbs * st->mb;
  if ((u8(r) & 15) == 0) { st->mb = 0; }  /* derived from the global batch */
}

/* }====================================================================== */

/* {======================================================================
** Checks
** ======================================================================= */

static void violated (const char *what, double a, double b, const nd_strategy *st) {
  fprintf(stderr, "fuzz_estimate: %s (%.17g vs %.17g); dp %d tp %d pp %d vpp %d cp %d ep %d "
          "etp %d zero %d mbs %d mb %d schedule %d recompute %d per_layer %d offload %g\n",
          what, a, b, st->dp, st->tp, st->pp, st->vpp, st->cp, st->ep, st->etp, st->zero,
          st->mbs, st->mb, (int)st->schedule, (int)st->recompute, st->layers != NULL,
          st->offload);
  abort();
}

static void nonneg (const char *what, double v, const nd_strategy *st) {
  if (!(isfinite(v) && v >= 0.0)) violated(what, v, 0.0, st);
}

static void check (const nd_estimate *e, const nd_strategy *st) {
  double sum = 0.0;
  int i;
  nonneg("step_time", e->step_time, st);
  if (!(e->step_time > 0.0)) violated("step_time not positive", e->step_time, 0.0, st);
  nonneg("tokens_per_s", e->tokens_per_s, st);
  nonneg("mfu", e->mfu, st);
  nonneg("hfu", e->hfu, st);
  nonneg("model_flops", e->model_flops, st);
  nonneg("hardware_flops", e->hardware_flops, st);
  if (e->hardware_flops < e->model_flops * (1.0 - 1e-12))
    violated("hardware_flops below model_flops", e->hardware_flops, e->model_flops, st);
  nonneg("peak", e->peak, st);
  if (!(e->peak > 0.0)) violated("peak not positive", e->peak, 0.0, st);
  for (i = 0; i < ND_T_COUNT; i++) {
    nonneg(nd_time_part_name(i), e->time_parts[i], st);
    sum += e->time_parts[i];
  }
  if (fabs(sum - e->step_time) > 1e-9 * e->step_time)
    violated("time parts do not add up to the step time", sum, e->step_time, st);
  if (e->stages != st->pp || e->heaviest < 0 || e->heaviest >= e->stages)
    violated("stage count or heaviest stage", e->stages, e->heaviest, st);
  if (e->stage[e->heaviest].peak != e->peak)
    violated("heaviest stage's peak is not the peak", e->stage[e->heaviest].peak, e->peak, st);
  for (i = 0; i < e->stages; i++) {
    const nd_stage_estimate *s = &e->stage[i];
    double parts;
    nonneg("stage.inflight", s->inflight, st);
    nonneg("stage.params", s->params, st);
    nonneg("stage.weights", s->weights, st);
    nonneg("stage.grads", s->grads, st);
    nonneg("stage.optimizer", s->optimizer, st);
    nonneg("stage.activations", s->activations, st);
    nonneg("stage.buffers", s->buffers, st);
    nonneg("stage.reserve", s->reserve, st);
    nonneg("stage.peak", s->peak, st);
    nonneg("stage.fwd_s", s->fwd_s, st);
    nonneg("stage.bwd_s", s->bwd_s, st);
    nonneg("stage.recompute_s", s->recompute_s, st);
    nonneg("stage.comm_s", s->comm_s, st);
    if (s->peak > e->peak) violated("a stage peaks above the peak", s->peak, e->peak, st);
    if (s->layers < 1) violated("a stage without layers", s->layers, 0, st);
    parts = s->weights + s->grads + s->optimizer + s->activations + s->buffers + s->reserve;
    if (fabs(parts - s->peak) > 1e-9 * s->peak)
      violated("stage memory parts do not add up", parts, s->peak, st);
  }
}

/* }====================================================================== */

static nd_model_spec model;        /* large (layer arrays): static, not on the stack */
static nd_strategy strategy, work;
static nd_layer_plan strategy_plan;  /* the strategy's per-layer plan, when it has one */
static nd_estimate est, planned, full, none;
static nd_recompute_plan plan;
static nd_megatron_choice megatron;

/* NDPLAN_FUZZ_STATS=1: how far the inputs got, printed at exit (is the harness useful?) */
static unsigned long n_cases, n_models, n_devices, n_priced, n_planned;
static int strict;  /* NDPLAN_FUZZ_STRICT=1: also the planner's contracts (see below) */

static void print_stats (void) {
  fprintf(stderr, "fuzz_estimate: %lu cases, %lu valid models, %lu valid devices, "
          "%lu priced, %lu planned\n", n_cases, n_models, n_devices, n_priced, n_planned);
}

int LLVMFuzzerInitialize (int *argc, char ***argv);

int LLVMFuzzerInitialize (int *argc, char ***argv) {
  const char *env = getenv("NDPLAN_FUZZ_STATS");
  (void)argc; (void)argv;
  if (env && strcmp(env, "1") == 0) atexit(print_stats);
  env = getenv("NDPLAN_FUZZ_STRICT");
  strict = env && strcmp(env, "1") == 0;
  return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  rd r = {data, size};
  nd_device dev;
  nd_costs costs;
  nd_job job;
  char err[256];
  double budget, budget_share;
  unsigned modes;
  if (size > 4096) return 0;
  n_cases++;
  /* the planner's choices first, so that they do not depend on where the stream ends */
  modes = ND_RECOMPUTE_ALL - u8(&r) % 7;  /* 0: every mode */
  if (u8(&r) & 1) modes |= ND_PLAN_OFFLOAD;  /* layers offloaded one by one too */
  if (u8(&r) & 1) modes |= ND_PLAN_VARIANTS;  /* a switch set per selective layer */
  budget_share = 1.0 - unit(&r);
  make_model(&r, &model);
  if (nd_model_validate(&model, err, sizeof err) != 0) return 0;
  n_models++;
  make_device(&r, &dev);
  if (nd_device_validate(&dev, err, sizeof err) != 0) return 0;
  n_devices++;
  make_costs(&r, &costs);
  make_strategy(&r, &model, &strategy, &strategy_plan, &job);
  work = strategy;
  if (nd_estimate_run(&model, &dev, &job, &work, &costs, &est, err, sizeof err) != 0) return 0;
  n_priced++;
  check(&est, &work);
  /* the planner, under a budget between the whole-model full and none peaks (a little
     beyond both, so that some plans cannot fit and some need no recompute) */
  work = strategy;
  work.layers = NULL;
  work.recompute = ND_RECOMPUTE_FULL;
  if (nd_estimate_run(&model, &dev, &job, &work, &costs, &full, err, sizeof err) != 0)
    violated("whole-model full recompute refused where the strategy was priced", 0, 0, &work);
  check(&full, &work);
  work = strategy;
  work.layers = NULL;
  work.recompute = ND_RECOMPUTE_NONE;
  if (nd_estimate_run(&model, &dev, &job, &work, &costs, &none, err, sizeof err) != 0)
    violated("no recompute refused where the strategy was priced", 0, 0, &work);
  check(&none, &work);
  if (full.peak > none.peak * (1.0 + 1e-9))
    violated("full recompute peaks above no recompute", full.peak, none.peak, &work);
  budget = 0.95 * full.peak + budget_share * (1.1 * none.peak - 0.95 * full.peak);
  {  /* the Megatron form: within the budget, none or full per layer, never faster than
        the best of the whole-model modes it includes when they fit */
    int i, total = (int)(model.num_layers + model.mtp_layers);
    const nd_layer_plan *pl;
    work = strategy;
    if (nd_recompute_megatron_choose(&model, &dev, &job, &work, &costs, budget, 0, &planned,
                                     &megatron, err, sizeof err) == 0) {
      check(&planned, &work);
      if (planned.peak > budget * (1.0 + 1e-9))
        violated("Megatron form over budget", planned.peak, budget, &work);
      if (full.peak <= budget && planned.step_time > full.step_time * (1.0 + 1e-9))
        violated("Megatron form slower than full recompute that fits", planned.step_time,
                 full.step_time, &work);
      if (work.layers && work.layers != &megatron.layers)
        violated("a Megatron form's plan outside the choice", 0, megatron.method, &work);
      for (i = 0, pl = work.layers; pl && i < total; i++)
        if (pl->recompute[i] == ND_RECOMPUTE_SELECTIVE || pl->ops[i] || pl->offload[i])
          violated("Megatron block form with a layer neither kept nor full", i,
                   megatron.method, &work);
    }
    else if (strstr(err, "internal error") != NULL) violated(err, budget, 0.0, &work);
    else if (full.peak <= budget && strncmp(err, "over memory", 11) == 0
             && (strategy.schedule == ND_SCHED_1F1B || strategy.schedule == ND_SCHED_INTERLEAVED))
      violated("Megatron form refused where full recompute fits", full.peak, budget, &work);
  }
  work = strategy;
  if (nd_recompute_plan_run(&model, &dev, &job, &work, &costs, budget, modes, &plan, &planned,
                            err, sizeof err) != 0) {
    if (strstr(err, "internal error") != NULL) violated(err, budget, 0.0, &work);
    /* NDPLAN_FUZZ_STRICT=1: the planner refuses only what cannot fit */
    if (strict && strncmp(err, "over memory", 11) != 0) {
      fprintf(stderr, "planner: %s\n", err);
      violated("the planner refused a priced strategy", budget, 0.0, &strategy);
    }
    if (strict && (modes & ND_RECOMPUTE_MASK(ND_RECOMPUTE_FULL)) && full.peak <= budget) {
      fprintf(stderr, "planner: %s\n", err);
      violated("the planner found no plan where full recompute fits", full.peak, budget,
               &strategy);
    }
    return 0;
  }
  n_planned++;
  check(&planned, &work);
  if (work.layers != &plan.layers) violated("a plan without per-layer modes", 0, 0, &work);
  if (planned.peak > budget * (1.0 + 1e-9)) violated("plan over budget", planned.peak, budget, &work);
  if (strict && modes == ND_RECOMPUTE_ALL && full.peak <= budget
      && planned.step_time > full.step_time * (1.0 + 1e-9))
    violated("a per-layer plan is slower than full recompute", planned.step_time,
             full.step_time, &work);
  {
    int i, n = (int)(model.num_layers + model.mtp_layers);
    const nd_layer_plan *pl = &plan.layers;
    for (i = 0; i < n; i++)
      if (!(modes & ND_RECOMPUTE_MASK(pl->recompute[i])))
        violated("plan uses a mode not allowed", pl->recompute[i], modes, &work);
      else if (pl->ops[i] && (!(modes & ND_PLAN_VARIANTS)
                              || pl->recompute[i] != ND_RECOMPUTE_SELECTIVE))
        violated("own switches on a layer that variants were not allowed for, or not selective",
                 pl->ops[i], modes, &work);
      else if (pl->offload[i] && (!(modes & ND_PLAN_OFFLOAD)
                                  || pl->recompute[i] != ND_RECOMPUTE_NONE))
        violated("an offloaded layer that offload was not allowed for, or recomputed",
                 pl->recompute[i], modes, &work);
  }
  return 0;
}
