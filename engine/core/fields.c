/*
** fields.c -- the descriptor tables of the named costs and device efficiencies, their
** defaults and validation, the name lists of strategy and search tables, and the names of
** the estimate's time parts and communication groups.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ndplan/estimate.h"
#include "ndplan/fields.h"

/* COST_FIT: a cost a stack profile fits, within [slo, shi] */
#define COST_FIT(f, dflt, hi, unit, slo, shi, doc) \
  {#f, offsetof(nd_costs, f), dflt, 0.0, hi, 0, unit, 0.0, 0.0, 0.0, slo, shi, doc}
#define COST(f, dflt, hi, unit, doc) COST_FIT(f, dflt, hi, unit, 0.0, 0.0, doc)

/*
** The costs, with their defaults (sources in ndplan/estimate.h and the comments here) and
** the range validation accepts: shares and switches in [0, 1], byte widths up to 64.
*/
static const nd_field cost_fields[] = {
  COST(weight_bytes, 2.0, 64, "bytes", "bytes per working weight (bf16)"),
  COST(grad_bytes, 4.0, 64, "bytes", "bytes per gradient element (Megatron's fp32 main grads)"),
  COST(master_bytes, 4.0, 64, "bytes", "fp32 master weights (0 without)"),
  COST(optimizer_bytes, 8.0, 64, "bytes", "optimizer states per parameter (Adam: two fp32 moments)"),
  COST(activation_bytes, 2.0, 64, "bytes", "bytes per stored activation element (bf16)"),
  COST(dropout, 0.0, 1, "share", "1: dropout masks kept (modern recipes train without)"),
  COST_FIT(capacity_factor, 1.0, 64, "factor", 1, 2, "MoE tokens per expert over the balanced share (dropless)"),
  COST_FIT(dp_overlap, 1.0, 1, "share", 0, 1, "DP gradient reduction hidden (Megatron --overlap-grad-reduce)"),
  COST_FIT(tp_overlap, 0.0, 1, "share", 0, 1, "TP communication hidden behind GEMMs (exposed)"),
  COST_FIT(tp_overlap_on, 0.8, 1, "share", 0, 1, "the same with TP comm overlap on (assumed until a stack fits it)"),
  COST_FIT(cp_overlap, 1.0, 1, "share", 0, 1, "ring-attention KV exchange hidden behind the attention core"),
  COST_FIT(ep_overlap, 0.0, 1, "share", 0, 1, "MoE all-to-all hidden (exposed)"),
  COST_FIT(zero3_overlap, 1.0, 1, "share", 0, 1, "ZeRO-3 parameter gathers hidden (prefetched)"),
  COST(zero3_flat_ring, 0.0, 1, "share", "1: ZeRO-3 collectives as one flat ring on one NIC share"),
  COST_FIT(overlap_sm_share, 20.0 / 132.0, 0.99, "share", 0, 0.5, "compute units overlapped communication takes (DeepSeek-V3, H800)"),
  COST(ep_node_dedup, 1.0, 1, "share", "1: one copy of a token per destination node (DeepEP)"),
  COST(memory_ops, 2.0, 64, "factor", "element-wise bytes moved per stored activation byte"),
  COST(optimizer_traffic, 32.0, 1024, "bytes", "HBM bytes per updated parameter in the optimizer step"),
  COST(offload_overlap, 1.0, 1, "share", "compute hiding activation copies to host (own stream)"),
  COST(fp8_cast_bytes, 4.0, 64, "bytes", "HBM bytes per element cast to FP8 (read bf16, write fp8 and transpose)"),
  COST_FIT(step_overhead, 0.0, 3600, "seconds", 0, 0.5, "per-step host work beyond the model (set by a stack)"),
  COST(alloc_fragmentation, 0.0, 1, "share", "allocator reserve beyond the live bytes (set by a stack)"),
  COST(logits_bytes, 4.0, 64, "bytes", "bytes per logit element at the loss (fp32)"),
  COST(logits_bytes_tp, 0.0, 64, "bytes", "the same with the vocabulary split over TP where the trainer's loss differs (PyTorch loss_parallel: 16); 0: as logits_bytes"),
  COST(fp8_saved_bytes, 1.0, 64, "bytes", "bytes per FP8 GEMM input kept for the backward (TE: FP8)"),
  COST(quant_cache, 1.0, 1, "share", "the recipe's quantized weight copies kept (TE: all)"),
  COST(zero3_weight_copy, 1.0, 1, "share", "1: ZeRO-3 shards a working weight copy beside the master (Megatron-FSDP, DeepSpeed); 0: FSDP2's fp32 shard is the parameter"),
  COST_FIT(pp_overlap, 0.0, 1, "share", 0, 1, "pipeline p2p hidden where the schedule overlaps it (interleaved, DualPipe)"),
  COST(tp_gather_quantized, 1.0, 1, "share", "sequence-parallel all-gathers of quantized recipes sent quantized (TE, torchao tensor-wise TP; row-wise scaling gathers 16 bits)"),
  COST(sp_gather_kept, 0.0, 1, "share", "1: a column-parallel linear's all-gathered SP input kept at full sequence for the backward (DTensor TP, torchtitan); 0: its shard kept, gathered again (Megatron)"),
  COST(fp8_amax_bytes, 2.0, 64, "bytes", "HBM bytes per element of current scaling's amax pass before each cast (read bf16; TE docs)"),
  /* a rate: above 0 (a GEMM takes time) */
  {"fp8_block_gemm_rate", offsetof(nd_costs, fp8_block_gemm_rate), 0.9, 0.0, 1, 1, "share",
   0.0, 0.0, 0.0, 0.0, 0.0, "blockwise-scaled FP8 GEMM rate over per-tensor FP8's (scales applied in the "
   "main loop on Hopper; assumed)"},
};
#undef COST
#undef COST_FIT

/* EFF_FIT: an efficiency a stack profile fits (per device), within [slo, shi] */
#define EFF_FIT(f, dflt, lo, open, hi, unit, flo, fhi, fscale, slo, shi, doc) \
  {#f, offsetof(nd_efficiency, f), dflt, lo, hi, open, unit, flo, fhi, fscale, slo, shi, doc}
#define EFF(f, dflt, lo, open, hi, unit, flo, fhi, fscale, doc) \
  EFF_FIT(f, dflt, lo, open, hi, unit, flo, fhi, fscale, 0.0, 0.0, doc)

/*
** The efficiencies. Defaults: scale_up 0.65, scale_out 0.9 from Calculon's NVLink and
** InfiniBand efficiencies; gemm 0.8, hbm 0.85 assumed, typical of large BF16 GEMMs and
** streaming kernels on A100/H100; kernel_overhead 20 us assumed (~10 kernels of ~2 us
** launch/sync per layer per pass); the quantized and attention fractions as gemm until a
** device file or stack profile says. Fit bounds: calibrate's (lua/ndplan/calibrate.lua).
** Stack bounds (EFF_FIT, COST_FIT: what a stack profile's fit may reach): GEMMs 0.3-0.95 of
** peak in 16 bits, 0.2-0.95 quantized; FlashAttention-2/3's forward reaches 0.35-0.75 of
** peak, so 0.3-0.85; shares of hidden communication 0-1; overlapped communication takes
** at most half the compute units; the per-step overhead at most 0.5 s; a MoE capacity
** factor 1-2.
*/
static const nd_field efficiency_fields[] = {
  EFF_FIT(gemm, 0.8, 0.0, 1, 1.0, "fraction", 0.01, 1, 0.01, 0.3, 0.95,
      "best fraction of peak FLOP/s, reached by large GEMMs"),
  EFF(gemm_half_size, ND_DERIVED, 0.0, 0, INFINITY, "flop", 0, 1e13, 1e6,
      "GEMM FLOPs at which efficiency is gemm/2 (default: 1 us of work at bf16 peak)"),
  EFF(hbm, 0.85, 0.0, 1, 1.0, "fraction", 0.01, 1, 0.01,
      "fraction of HBM bandwidth for streaming kernels"),
  EFF(scale_up, 0.65, 0.0, 1, 1.0, "fraction", 0.01, 1, 0.01,
      "bus-bandwidth fraction on the scale-up links"),
  EFF(scale_out, 0.9, 0.0, 1, 1.0, "fraction", 0.01, 1, 0.01,
      "bus-bandwidth fraction on the scale-out network"),
  EFF(kernel_overhead, 20e-6, 0.0, 0, INFINITY, "time", 0, 0.01, 1e-7,
      "launch and synchronisation seconds per layer per pass"),
  EFF_FIT(gemm_fp8, 0.8, 0.0, 1, 1.0, "fraction", 0, 0, 0, 0.2, 0.95,
      "best fraction of a quantized format's peak (FP8, MXFP8, FP4)"),
  EFF_FIT(gemm_fp8_rowwise, 0.0, 0.0, 0, 1.0, "fraction", 0, 0, 0, 0.2, 0.95,
      "the same for row-wise scaled FP8 GEMMs (torchao rowwise; 0: as gemm_fp8)"),
  EFF_FIT(attn_fwd, 0.8, 0.0, 1, 1.0, "fraction", 0, 0, 0, 0.3, 0.85,
      "fraction of the 16-bit peak the fused attention forward reaches"),
  EFF(attn_bwd, 0.8, 0.0, 1, 1.0, "fraction", 0, 0, 0,
      "the same in the attention backward"),
  EFF(attn_half_keys, 0.0, 0.0, 0, INFINITY, "keys", 0, 0, 0,
      "keys per query at which attention efficiency is halved (0: no size effect)"),
};
#undef EFF
#undef EFF_FIT

const nd_field *nd_cost_fields (int *n) {
  *n = (int)(sizeof cost_fields / sizeof cost_fields[0]);
  return cost_fields;
}

const nd_field *nd_efficiency_fields (int *n) {
  *n = (int)(sizeof efficiency_fields / sizeof efficiency_fields[0]);
  return efficiency_fields;
}

const nd_field *nd_field_find (const nd_field *table, int n, const char *name) {
  int i;
  for (i = 0; i < n; i++)
    if (strcmp(table[i].name, name) == 0) return &table[i];
  return NULL;
}

double *nd_field_slot (void *base, const nd_field *f) {
  return (double *)(void *)((char *)base + f->offset);
}

double nd_field_get (const void *base, const nd_field *f) {
  return *(const double *)(const void *)((const char *)base + f->offset);
}

void nd_costs_init (nd_costs *c) {
  int i, n;
  const nd_field *f = nd_cost_fields(&n);
  memset(c, 0, sizeof *c);
  for (i = 0; i < n; i++) *nd_field_slot(c, &f[i]) = f[i].dflt;
}

int nd_costs_validate (const nd_costs *c, char *err, size_t errlen) {
  int i, n;
  const nd_field *f = nd_cost_fields(&n);
  for (i = 0; i < n; i++) {
    double v = nd_field_get(c, &f[i]);
    if (!(v >= f[i].lo && v <= f[i].hi) || (f[i].lo_open && !(v > f[i].lo))) {
      if (err && errlen) snprintf(err, errlen, "costs.%s: expected a number in %c0, %g], got %g",
                                  f[i].name, f[i].lo_open ? '(' : '[', f[i].hi, v);
      return -1;
    }
  }
  return 0;
}

#define ND_KEY_NAME_(id, name) name,
const char *const nd_strategy_keys[] = {ND_STRATEGY_KEYS(ND_KEY_NAME_) NULL};
#undef ND_KEY_NAME_

const char *const nd_space_keys[] = {
  "schedule", "precision", "flash_attention", "fp8_param_gather", "tp_comm_overlap",
  "bf16_first_layers", "bf16_last_layers", "selective_ops", NULL
};

const char *const nd_memory_parts[] = {
  "weights", "grads", "optimizer", "activations", "buffers", "fragmentation", "reserve", NULL
};

const char *const nd_plan_modes[] = {"none", "selective", "full", "offload", "variants", NULL};

/* The estimate's time parts (ND_T_*) and communication groups (ND_GROUP_*), by index. */
static const char *const time_part_names[ND_T_COUNT] = {
  "forward", "backward", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm",
  "optimizer", "bubble", "offload"
};
static const char *const group_names[ND_GROUP_COUNT] = {"tp", "cp", "dp", "pp", "ep", "etp",
                                                        "edp"};

const char *nd_time_part_name (int part) {
  return part >= 0 && part < ND_T_COUNT ? time_part_names[part] : NULL;
}

const char *nd_group_name (int group) {
  return group >= 0 && group < ND_GROUP_COUNT ? group_names[group] : NULL;
}
