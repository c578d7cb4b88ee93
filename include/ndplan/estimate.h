/*
** ndplan/estimate.h -- the two estimators: memory per pipeline stage (with a breakdown)
** and step time (seconds, with a breakdown), for one model, device, job and strategy.
** Every assumption that is not a model, device or strategy field lives in nd_costs, with
** a name and a documented default, so the user can override it.
*/
#ifndef NDPLAN_ESTIMATE_H
#define NDPLAN_ESTIMATE_H

#include <stddef.h>

#include "ndplan/comm.h"
#include "ndplan/device.h"
#include "ndplan/model.h"
#include "ndplan/strategy.h"

/* Named, overridable assumptions of the estimators (defaults in nd_costs_init). */
typedef struct nd_costs {
  double weight_bytes;      /* bytes per parameter of the working weights (bf16: 2) */
  double grad_bytes;        /* bytes per gradient element (Megatron fp32 main grads: 4) */
  double master_bytes;      /* fp32 master copy of the weights (4; 0 without one) */
  double optimizer_bytes;   /* optimizer states per parameter (Adam, 2 x fp32: 8) */
  double activation_bytes;  /* bytes per stored activation element (bf16: 2) */
  double dropout;           /* 1 when dropout masks are kept (1 byte per element), else 0 */
  double capacity_factor;   /* MoE tokens per expert over the balanced share (1.0) */
  double dp_overlap;        /* share of the last micro-batch's backward that hides the
                               data-parallel gradient reduction (0..1) */
  double tp_overlap;        /* share of TP communication hidden behind GEMMs (0: exposed) */
  double tp_overlap_on;     /* the same with TP comm overlap on (tp_comm_overlap: userbuffers,
                               async TP): the collectives chunked against their GEMMs */
  double cp_overlap;        /* share of ring-attention KV exchange hidden by attention (0..1) */
  double ep_overlap;        /* share of MoE all-to-all hidden (0..1) */
  double overlap_sm_share;  /* share of the compute units communication kernels take while
                               they overlap compute (DeepSeek-V3: 20 of 132 SMs) */
  double offload_overlap;   /* share of the compute of a micro-batch that hides its activation
                               copies to and from host memory (side stream: 1) */
  double ep_node_dedup;     /* 1: the dispatcher sends one copy of a token per destination
                               node and forwards inside it (DeepEP); 0: one per expert */
  double zero3_overlap;     /* share of ZeRO-3 parameter gathers hidden by compute (0..1) */
  double zero3_flat_ring;   /* 1: ZeRO-3 collectives as one flat ring limited by a single
                               device's NIC share (DeepSpeed 2021, Narayanan Table 2); 0 */
  double memory_ops;        /* bytes moved by element-wise kernels per stored activation
                               byte (read + write: 2) */
  double optimizer_traffic; /* HBM bytes moved per locally updated parameter in the
                               optimizer step (Adam with fp32 master: 32) */
  double fp8_cast_bytes;    /* HBM bytes moved per element cast to FP8 for a GEMM (read bf16,
                               write fp8 and its transpose: 4) */
  double step_overhead;     /* seconds per step outside the model and the optimizer's
                               traffic: loader, logging, launches, synchronisation (a stack
                               field; part of the optimizer time part) */
  double logits_bytes;      /* bytes per logit element held at the loss (Megatron's fp32
                               cross entropy: 4; with the bf16 logits and the fp32 softmax
                               kept beside the fp32 copy: up to 10) */
  double logits_bytes_tp;   /* the same when TP splits the vocabulary, where a trainer's
                               vocabulary-parallel loss differs (PyTorch's loss_parallel, as
                               torchtitan runs it: 16, four fp32 tensors at its backward's
                               peak); 0: as logits_bytes (Megatron's one cross entropy) */
  double fp8_saved_bytes;   /* bytes per element of an FP8 GEMM's input kept for the backward
                               (Transformer Engine keeps the FP8 copy: 1) */
  double alloc_fragmentation; /* bytes the caching allocator reserves beyond the live ones,
                               as a share of them (PyTorch max reserved / max allocated - 1:
                               0.8-6% in Megatron logs; 0: none) */
  double quant_cache;       /* share (0..1) of the recipe's quantized weight copies the
                               trainer keeps between micro-batches (Transformer Engine: 1;
                               0 for a trainer that re-quantizes each use) */
  double pp_overlap;        /* share of the pipeline's p2p sends hidden behind compute where
                               the schedule overlaps them (interleaved: Megatron's
                               --overlap-p2p-communication; DualPipe); 1F1B, GPipe and ZB
                               wait for each transfer */
  double tp_gather_quantized; /* share of a quantized recipe's sequence-parallel all-gathers
                               that move its quantized bytes: Transformer Engine casts a
                               column-parallel layer's input (and the output gradient of a
                               row-parallel one) before gathering it, torchao's tensor-wise
                               float8 TP too; reduce-scatters stay in 16 bits (1; 0: all
                               gathers in 16 bits) */
  double sp_gather_kept;    /* share of the sequence-parallel all-gathered input of a
                               column-parallel linear (the norm's output, the head's input)
                               that autograd keeps at full sequence for the backward: DTensor
                               TP (torchtitan) saves the gathered tensor (1); Megatron keeps
                               its shard and gathers it again in the backward (0) */
  double zero3_weight_copy; /* ZeRO-3 keeps a sharded working copy of the weights besides
                               the master shard (Megatron-FSDP, DeepSpeed: 1); 0 when the
                               master shard is the parameter and the working width exists
                               only gathered (PyTorch FSDP2's mixed precision: torchtitan) */
  /* What the FP8 recipes differ in beyond their byte widths (nd_recipe.amax_pass and
     .soft_blocks say which recipe pays which): */
  double fp8_amax_bytes;    /* HBM bytes per element of the amax reduction a current-scaling
                               recipe runs over each GEMM input before its cast (TE docs, "FP8
                               Delayed Scaling": current scaling reads each tensor twice per
                               quantization, once for the amax and once to cast; delayed
                               scaling takes the scale from the amax history and reads it
                               once): one read of the bf16 input, 2 */
  double fp8_block_gemm_rate; /* rate of a GEMM whose 1x128 / 128x128 block scales are applied
                               in software in the main loop (Hopper's tensor cores take no
                               block scales: DeepSeek-V3 report sec. 3.3.2 promotes the
                               partial sums to CUDA cores every 128 elements to apply them) over
                               a per-tensor scaled FP8 GEMM's. NVIDIA's "Faster Training
                               Throughput in FP8 Precision with NVIDIA NeMo" (2025) measures
                               128x128 block scaling "slightly lower" than tensor-wise on H100
                               without a figure: default 0.9, an assumption, range 0.75-1
                               (ndplan.assumptions) until a stack fits it */
} nd_costs;

void nd_costs_init (nd_costs *c);
/* 0, or -1 with "costs.<field>: ..." in err: every cost finite and >= 0, shares <= 1. */
int nd_costs_validate (const nd_costs *c, char *err, size_t errlen);

/* Memory of one pipeline stage, bytes per device. */
typedef struct nd_stage_estimate {
  int layers;               /* body + MTP layers on the stage */
  double inflight;          /* micro-batches whose activations are held at the peak */
  double params;            /* parameters held by one device of the stage */
  double quant_params;      /* of which in linear layers the recipe quantizes (unsharded) */
  double weights, grads, optimizer, activations, reserve, peak;
  double allocated;         /* live tensors at the peak (PyTorch's max allocated): weights,
                               grads, optimizer, activations, buffers */
  double reserved;          /* what the caching allocator holds: allocated x (1 +
                               alloc_fragmentation); peak adds the device's runtime reserve */
  double buffers;           /* transients: the largest collective buffer, plus the dropped
                               activations the first backward rebuilds for one recomputed
                               layer (its recompute working set) */
  double fwd_s, bwd_s, recompute_s;     /* compute per micro-batch (all chunks) */
  double comm_s;                        /* exposed TP + CP + EP per micro-batch */
} nd_stage_estimate;

/* Which links each parallel group crosses. */
typedef struct nd_topology_entry {
  int size;                 /* ranks in one group */
  int stride;               /* distance between them in the rank order */
  int local;                /* members sharing one scale-up domain */
} nd_topology_entry;

enum { ND_GROUP_TP, ND_GROUP_CP, ND_GROUP_DP, ND_GROUP_PP, ND_GROUP_EP, ND_GROUP_ETP,
       ND_GROUP_EDP, ND_GROUP_COUNT };

/* Time parts of one step, seconds. */
enum { ND_T_FORWARD, ND_T_BACKWARD, ND_T_RECOMPUTE, ND_T_TP, ND_T_CP, ND_T_EP, ND_T_PP,
       ND_T_DP, ND_T_OPTIMIZER, ND_T_BUBBLE, ND_T_OFFLOAD, ND_T_COUNT };

typedef struct nd_estimate {
  double step_time;         /* seconds per optimizer step */
  double tokens_per_s;
  double mfu, hfu;          /* model / hardware FLOPs over devices x peak x step time */
  double model_flops;       /* per step, no recompute, causal attention halved */
  double hardware_flops;    /* per step, with recompute */
  double peak;              /* bytes on the heaviest stage */
  int heaviest;             /* its index */
  double time_parts[ND_T_COUNT];  /* on the critical path; they add up to step_time */
  nd_topology_entry topology[ND_GROUP_COUNT];
  int stages;
  nd_stage_estimate stage[ND_MAX_STAGES];
} nd_estimate;

/*
** Prices one strategy. st is resolved first (nd_strategy_resolve); returns 0, or -1 with
** the reason in err when the strategy is refused.
*/
int nd_estimate_run (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                     nd_strategy *st, const nd_costs *costs, nd_estimate *out,
                     char *err, size_t errlen);

/* One layer priced alone, per device and micro-batch (for checks and the recompute planner). */
typedef struct nd_layer_estimate {
  double activations[ND_RECOMPUTE_COUNT];  /* bytes held under none, selective, full */
  double recompute_s[ND_RECOMPUTE_COUNT];  /* time each mode adds per micro-batch, with the
                                              repeated forward's communication */
  double sel_activations[ND_OP_MASKS];  /* selective with each set of switches (mask) */
  double sel_recompute_s[ND_OP_MASKS];
  double forward_s;         /* GEMMs + attention core + element-wise (+ FP8 casts) */
  double backward_s;        /* its backward: 2x the GEMMs, the attention core's own backward */
  double tp_comm_s, cp_comm_s, ep_comm_s;  /* one forward pass, before overlap */
  double backward_comm_s;   /* what its backward's TP and EP traffic adds to the stage's
                               time per micro-batch (after overlap) */
  double attn_core_s;       /* its forward's attention core, behind which CP traffic hides */
  double params;            /* parameters one device holds */
  double params_expert;     /* of which routed experts (sharded by ZeRO over expert DP) */
  double flops_token;       /* model FLOPs of one forward per token, unsharded */
} nd_layer_estimate;

int nd_estimate_layer (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                       nd_strategy *st, const nd_costs *costs, int layer,
                       nd_layer_estimate *out, char *err, size_t errlen);

/*
** Layer-kind prices kept across estimates (a search's worker: one cache per thread, never
** shared). A kind's price depends on tp, cp, mbs, ep, etp, sp, ZeRO (its gather widths), the
** precision recipe and the strategy's switches (flash attention, selective ops, TP overlap,
** parameter gather), not on dp, pp, vpp, the layout, the schedule or the recompute modes:
** an estimate given a cache reuses what an earlier one priced under the same values, with
** the same bits. A cache holds the prices of one model, device, job and costs, whose
** contents must not change while it is used (a call with others empties it); `entries`
** bounds what it holds (least recently used go first). NULL: out of memory.
*/
typedef struct nd_price_cache nd_price_cache;
nd_price_cache *nd_price_cache_new (int entries);
void nd_price_cache_free (nd_price_cache *pc);
/* Forgets what the cache holds and what it was bound to: for a caller whose job or costs
   change in place (the same addresses, other contents). Costs are validated again. */
void nd_price_cache_clear (nd_price_cache *pc);

/* The two-level fabric the estimate prices collectives on: the device's scale-up domain and
   links, and its scale-out links, each at the device's efficiency for it. */
void nd_estimate_fabric (const nd_device *dev, nd_fabric *f);

/* nd_estimate_run with a cache (pc NULL: none). */
int nd_estimate_run_cached (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                            nd_strategy *st, const nd_costs *costs, nd_price_cache *pc,
                            nd_estimate *out, char *err, size_t errlen);

/* The head's forward and backward time per micro-batch under st (the last stage's, as
   nd_estimate_run adds it) into *time_s: 0, or -1 (st does not resolve or set up). */
int nd_estimate_head (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                      nd_strategy *st, const nd_costs *costs, double *time_s);

/* n layers (layers[i] into out[i]) under one strategy, set up once (pc: as above). */
int nd_estimate_layers (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                        nd_strategy *st, const nd_costs *costs, nd_price_cache *pc, int n,
                        const int *layers, nd_layer_estimate *out, char *err, size_t errlen);

/* The same without the figures of every set of selective switches (sel_activations and
   sel_recompute_s are left as they were): the search's lower bounds need none of them. */
int nd_estimate_layers_plain (const nd_model_spec *m, const nd_device *dev,
                              const nd_job *job, nd_strategy *st, const nd_costs *costs,
                              nd_price_cache *pc, int n, const int *layers,
                              nd_layer_estimate *out, char *err, size_t errlen);

/* Micro-batches whose activations stage s holds at its peak (fractional when interleaved). */
double nd_inflight (const nd_strategy *st, int s);

/* Bytes per logit element the loss holds at TP degree tp: logits_bytes_tp where TP splits
   the vocabulary and the stack sets it, else logits_bytes (the estimate and the search's
   memory bound both price it so). */
double nd_loss_bytes (const nd_costs *c, int tp);

const char *nd_time_part_name (int part);
const char *nd_group_name (int group);

#endif
