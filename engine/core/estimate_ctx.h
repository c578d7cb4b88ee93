/*
** estimate_ctx.h -- the estimator's own types, shared by estimate.c (the step, the stages,
** the layer kinds' prices) and price_cache.c (the kinds' prices kept between calls):
** private to the core.
*/
#ifndef NDPLAN_ESTIMATE_CTX_H
#define NDPLAN_ESTIMATE_CTX_H

#include "ndplan/data_parallel.h"
#include "ndplan/estimate.h"

/* One layer kind, priced for one device and one micro-batch. */
typedef struct layer_cost {
  int ready;
  int passed;                      /* pass below is priced (a cached kind may lack it) */
  double act[ND_RECOMPUTE_COUNT];  /* activation bytes held per micro-batch */
  double gemm_s, core_s, mem_s;    /* forward: GEMMs, attention core, element-wise */
  double cast_s;                   /* forward: casting the FP8 GEMMs' inputs */
  double bwd_s;                    /* the backward's work: 2x the GEMMs, the attention
                                      core's own backward, element-wise, FP8 casts */
  double core_bwd_s;               /* of which the attention core */
  double cast_bwd_s;               /* of which casting output gradients to FP8 */
  double core_mem_s;               /* element-wise work selective recompute repeats */
  double tp_s, cp_s, ep_s;         /* communication of one forward pass (before overlap) */
  double flops_token;              /* model FLOPs of one forward per token, unsharded */
  double core_flops_token;         /* of which the attention core */
  double op_bytes[ND_OP_COUNT];    /* what each selective-recompute switch drops, bytes */
  double op_time[ND_OP_COUNT];     /* and the forward work it repeats, seconds */
  double op_flops[ND_OP_COUNT];    /* and those FLOPs per token (HFU) */
  double p_dense, p_expert;        /* local parameters: dense (TP-sharded or replicated),
                                      routed experts */
  double q_dense, q_expert;        /* of which in linear layers (no norms, router) */
  double gather_bytes;             /* largest ZeRO-3 gather of this layer's weights */
  double launch;                   /* launch floors a pass pays: 1, or 0 for an identity
                                      layer, which issues no kernels */
  /* what one layer adds to its stage per micro-batch (pass_costs, from the above) */
  struct {
    double fwd, bwd;               /* its passes on the device (layer_pass) */
    double tp_f, tp_b;             /* the TP traffic that shows in each (comm_shown) */
    double ep;                     /* one exposed all-to-all pass */
    double sel_act, sel_time, sel_flops;  /* selective with the strategy's switches */
  } pass;
} layer_cost;

#define KIND_SLOTS ND_MAX_LAYER_KINDS  /* distinct layer kinds, numbered by first use */

typedef struct ctx {
  const nd_model_spec *m;
  const nd_device *dev;
  const nd_job *job;
  const nd_strategy *st;
  const nd_costs *c;
  nd_fabric fabric;
  nd_group g[ND_GROUP_COUNT];
  nd_dp_groups dp_all;    /* the data-parallel groups over all of dp (ZeRO 0's all-reduce) */
  nd_dp_groups dp_shard;  /* over HSDP's shard group (dp_all without HSDP) */
  double peak;         /* FLOP/s at the recipe's GEMM precision (the linear layers) */
  double peak16;       /* FLOP/s at 16 bits: attention core, LM head, router */
  nd_precision gemm;   /* the peak slot of the linear layers' GEMMs */
  double gemm_scale;   /* the recipe's kernel rate over gemm_fp8's (row-wise scaling,
                          software block scales) */
  double tp_gather;    /* bytes per element of the sequence-parallel all-gathers */
  double cast_bytes;   /* HBM bytes per element cast for a GEMM: fp8_cast_bytes, the amax
                          pass of current scaling, the block scales written (setup) */
  int quant;           /* the recipe quantizes linear layers (FP8, FP4) */
  nd_recipe_widths w;  /* its byte widths per quantized parameter */
  double hbm;          /* achievable HBM bytes/s */
  double T;            /* tokens per micro-batch on one rank: mbs * seq / cp */
  double r;            /* 1/tp with sequence parallelism, else 1 */
  double vocab;        /* padded vocabulary */
  int q_first, q_end;  /* body layers [q_first, q_end) and every MTP layer run at the
                          recipe's precision (nd_strategy_layer_quantized) */
  const nd_kind_index *kinds;  /* the layers' kinds: the model's, else own */
  nd_price_cache *pc;  /* the cache its kinds come from (nd_price_cache_use), or NULL */
  int stages;          /* pricing stages: each kind's pass costs too (pass_costs) */
  layer_cost *kind;    /* the kinds' prices: own_kind, or a cache entry's (nd_price_cache_use) */
  layer_cost own_kind[KIND_SLOTS];
  nd_kind_index own;   /* numbered per call for a model without m->kinds */
} ctx;

/*
** Activation bytes of one layer by class: rep = whole-sequence tensors outside the TP
** regions (split by tp only with SP); dev = bytes already counted per device; core = the
** attention-core tensors that selective recompute drops.
*/
typedef struct act_parts {
  double rep, dev, core;
  double in_rep, in_dev;  /* of which the saved inputs of linear layers (elements, rep split
                             as rep is): FP8 recipes keep them as FP8 (fp8_saved_bytes) */
} act_parts;

/* ---- the price cache (price_cache.c) ---- */

/* Whether costs were validated by an earlier call with pc: it binds to them only after
   they passed, and their contents do not change while it is used (estimate.h). */
int nd_price_cache_validated (const nd_price_cache *pc, const nd_costs *costs);
/* Points x's kind prices at pc's entry for its strategy (x set up), a new entry (empty) if
   none is there, and x->pc at pc. Without a cache, or for a model whose kinds are numbered
   per call, x keeps its own (x->pc NULL). */
void nd_price_cache_use (ctx *x, nd_price_cache *pc);
/* Kind slot's sums after its mixer (attention, Mamba, DSA's indexer) at x's strategy with
   any ep and etp, into lc and a: 1, or 0 when x->pc does not hold them. */
int nd_price_cache_recall_mixer (const ctx *x, int slot, layer_cost *lc, act_parts *a);
/* ...and kept, from price_kind's sums after the mixer. */
void nd_price_cache_keep_mixer (const ctx *x, int slot, const layer_cost *lc,
                                const act_parts *a);

#endif
