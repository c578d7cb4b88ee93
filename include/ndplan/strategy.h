/*
** ndplan/strategy.h -- one parallel strategy: the degrees of every dimension, the
** micro-batching, the pipeline schedule and layout, recompute, offload and precision.
** Plain data, copied freely (about 1 KB: a per-layer plan is referenced, not held);
** nd_strategy_check refuses what cannot run, with a reason.
*/
#ifndef NDPLAN_STRATEGY_H
#define NDPLAN_STRATEGY_H

#include <stddef.h>

#include "ndplan/device.h"
#include "ndplan/model.h"
#include "ndplan/precision.h"

#define ND_MAX_STAGES 512
#define ND_MAX_CHUNKS 512        /* pp x vpp model chunks of one layout */
#define ND_LAYOUT_MAX_CHARS 65536  /* a layout string's expansion (Megatron's repeats) */
/* The job's bounds (nd_job_check): far past any training run (the largest published runs
   use ~10^5 devices, ~10^4 sequences per step, 10^7-token contexts), low enough that every
   count derived from them (micro-batches, tokens per step) stays exact in int and double. */
#define ND_MAX_DEVICES (1 << 24)
#define ND_MAX_GLOBAL_BATCH (1 << 24)
#define ND_MAX_SEQ_LEN (1 << 26)

/* --account-for-embedding/loss-in-pipeline-split: each counts as one layer in the split */
#define ND_ACCOUNT_EMBEDDING 1
#define ND_ACCOUNT_LOSS 2

/* Where stage_layers comes from (nd_strategy.explicit_layout). */
enum {
  ND_LAYOUT_RESOLVED = 0,  /* written by nd_strategy_resolve from the fields below */
  ND_LAYOUT_CHUNKS,        /* given: pp stage sizes (vpp 1) or pp x vpp chunk sizes */
  ND_LAYOUT_STRING         /* parsed from Megatron's layout string (nd_layout_parse) */
};

typedef enum nd_schedule {
  ND_SCHED_1F1B = 0,     /* PipeDream-flush: stage s keeps min(p - s, m) micro-batches */
  ND_SCHED_INTERLEAVED,  /* Megatron interleaved 1F1B over vpp chunks per stage */
  ND_SCHED_GPIPE,        /* all forwards, then all backwards: m micro-batches in flight */
  ND_SCHED_ZB,           /* zero-bubble ZB-H1: 1F1B memory, weight-gradient work fills bubbles */
  ND_SCHED_DUALPIPE,     /* DeepSeek DualPipe: device s holds stages s and pp-1-s, fed from
                            both ends; forward/backward pairs overlap the all-to-all */
  ND_SCHED_COUNT
} nd_schedule;

typedef enum nd_recompute {
  ND_RECOMPUTE_NONE = 0,   /* keep every activation */
  ND_RECOMPUTE_SELECTIVE,  /* recompute the attention core (scores, softmax, dropout) */
  ND_RECOMPUTE_FULL,       /* keep the layer input only; recompute the layer's forward */
  ND_RECOMPUTE_COUNT
} nd_recompute;

/*
** What selective recompute repeats, as op switches (Megatron-Core's --recompute-modules):
** each drops the tensors the op produces and repeats its forward in the backward pass.
*/
enum {
  ND_OP_ATTN_CORE = 0,  /* scores, softmax, dropout (nothing kept without flash attention) */
  ND_OP_NORMS,          /* norm outputs (the QKV and MLP inputs), kept: their inputs */
  ND_OP_ACT,            /* the MLP / expert activation function's output */
  ND_OP_MLA_UP,         /* MLA's up-projected q, k, v, kept: the compressed latents */
  ND_OP_MOE_DISPATCH,   /* the experts' dispatched inputs, sent again by the backward */
  ND_OP_ALT_MM,         /* every second linear layer's output in forward order (wk, wo, the
                           MLP's up or down projection): torchtitan's per-op SAC saves all
                           matmul outputs except every second one */
  ND_OP_COUNT
};
#define ND_OP_BIT(op) (1u << (op))
#define ND_OP_MASKS (1 << ND_OP_COUNT)  /* every set of switches, as a mask */

/*
** A per-layer plan: each layer's recompute mode, host offload and selective switches, body
** then MTP layers. Optional: a strategy without one (nd_strategy.layers NULL) runs its
** whole-model mode on every layer.
*/
typedef struct nd_layer_plan {
  unsigned char recompute[ND_MAX_LAYERS];  /* each layer's nd_recompute */
  unsigned char offload[ND_MAX_LAYERS];    /* 1 = the layer's kept activations of waiting
                                              micro-batches are in host memory */
  unsigned char ops[ND_MAX_LAYERS];        /* a selective layer's own switches (ND_OP_BIT
                                              mask); 0 = selective_ops */
} nd_layer_plan;

typedef struct nd_strategy {
  int dp, tp, pp, vpp, cp, ep, etp;  /* degrees; vpp = model chunks per stage */
  int sp;                  /* sequence parallel (activations outside TP regions split by tp) */
  int zero;                /* 0 none, 1 optimizer states, 2 + gradients, 3 + parameters */
  int dp_shard;            /* the data-parallel ranks a ZeRO stage shards over (HSDP's
                              --dp-shard; with CP, the shard group is dp_shard x cp, as
                              Megatron's distributed optimizer shards over DP x CP); dp /
                              dp_shard replicas all-reduce the sharded gradients. 0: all of dp */
  int dp_replicate;        /* HSDP's replicas (--dp-replicate): with dp_shard 0, dp_shard is
                              dp / dp_replicate; with both, their product must be dp. 0: unset */
  int reshard;             /* ZeRO-3 (FSDP): 1 gathers each micro-batch's parameters before its
                              forward and backward and frees them between (FSDP2's
                              reshard_after_forward); 0 gathers once per step and keeps them,
                              with their gradients, unsharded until the step's reduce-scatter
                              (torchtitan's default under pipeline parallelism); -1: that
                              default (0 with pp > 1, else 1), set by resolve */
  int mbs;                 /* micro-batch size (sequences) */
  int mb;                  /* micro-batches per step per pipeline; 0 = from the global batch */
  nd_schedule schedule;
  nd_recompute recompute;  /* whole-model mode, used when layers is NULL */
  unsigned selective_ops;  /* ND_OP_BIT mask of what "selective" repeats (attn_core) */
  /* The per-layer plan, or NULL: the whole-model mode. Borrowed, never owned: it points at
     storage its maker keeps (a binding's userdata, a planner's nd_recompute_plan or
     nd_megatron_choice, a search worker's scratch), which must outlive every use of the
     strategy. A struct copy shares the plan, and no code writes a plan through a strategy
     (hence const): code that changes one writes storage of its own and points its
     strategy there (nd_strategy_own_plan). Resolve and the estimators only read it; a
     planner run into the same storage again (the same nd_recompute_plan) changes what every
     strategy pointing there reads, so a plan kept past the next run is copied first. */
  const nd_layer_plan *layers;
  double offload;          /* share (0..1) of the activations a stage holds for micro-batches
                              not being computed that wait in host memory instead */
  nd_recipe_id precision;  /* the training recipe (ndplan/precision.h) */
  int param_gather;        /* 1: parameters kept and all-gathered at the recipe's quantized
                              width (Megatron --fp8-param-gather / --fp4-param-gather, torchao
                              enable_fsdp_float8_all_gather under ZeRO-3) */
  int bf16_first, bf16_last;  /* body layers kept in BF16 at each end (Megatron
                              --num-layers-at-start/end-in-bf16); -1 = the recipe's default */
  int flash_attention;     /* 1 (default): no s^2 score tensors kept, causal blocks skipped */
  int tp_comm_overlap;     /* 1: TP collectives decomposed and overlapped with their GEMMs
                              (Megatron --tp-comm-overlap, torchtitan's async TP): the share
                              tp_overlap_on hides, instead of tp_overlap */
  /* The pipeline layout, as Megatron-Core states it (strategy.c restates its rules): an
     even split unless one of account, first/last layers or an explicit layout is set. */
  unsigned char account;        /* ND_ACCOUNT_* bits */
  unsigned char explicit_layout;/* ND_LAYOUT_*: whether stage_layers is an input */
  short first_layers, last_layers;  /* --decoder-first/last-pipeline-num-layers; 0 unset */
  short layout_mtp;             /* ND_LAYOUT_STRING: the MTP layers the string places */
  /* body+MTP layers per model chunk, chunk k = c*pp + s (chunk c of stage s: Megatron's
     layer order), pp*vpp entries; MTP layers follow the body in that order. A short: a
     chunk holds at most ND_MAX_LAYERS (1024), and 1 KB less to copy with every strategy */
  short stage_layers[ND_MAX_CHUNKS];
} nd_strategy;

/* The job a strategy runs: model, global batch and sequence, device count. */
typedef struct nd_job {
  int devices;
  long long global_batch;  /* sequences per step */
  int seq_len;
} nd_job;

void nd_strategy_init (nd_strategy *st);

/*
** dst = src, with src's per-layer plan (if any) copied into `storage` (the first `layers`
** entries of each table: the model's body+MTP layers) and dst pointed at it, so that dst
** no longer shares the plan src reads. storage may be src's own plan (nothing is copied).
*/
void nd_strategy_own_plan (nd_strategy *dst, const nd_strategy *src, nd_layer_plan *storage,
                           int layers);

/* The job's counts, before any narrowing: each at least 1 and at most its ND_MAX_* bound.
   Returns 0, or -1 with a one-line reason naming the field. */
int nd_job_check (long long devices, long long global_batch, long long seq_len, char *err,
                  size_t errlen);

/*
** Why a strategy cannot run, as the search counts it: each refusal of nd_strategy_check has
** one, and the search adds over memory (priced, heaviest stage over the budget). The labels
** (nd_refusal_label) are the ones the search prints and the messages begin with.
*/
typedef enum nd_refusal {
  ND_REFUSE_BOUNDS = 0,    /* "degree out of bounds" */
  ND_REFUSE_EP_OVER,       /* "EP over the experts or DP x TP" */
  ND_REFUSE_EP_DIV,        /* "EP divisibility" */
  ND_REFUSE_FILTERED,      /* "filtered out" (the user's filters, a policy's admit) */
  ND_REFUSE_CP,            /* "CP constraints" */
  ND_REFUSE_BATCH,         /* "global batch" */
  ND_REFUSE_LAYOUT,        /* "layout" (Megatron's pipeline layout rules) */
  ND_REFUSE_SCHEDULE,      /* "schedule" (the pipeline schedule's micro-batch rules) */
  ND_REFUSE_SP,            /* "sequence parallelism" (MoE with TP needs it) */
  ND_REFUSE_SAME_RUN,      /* "same run" (the search's own: a per-layer plan that keeps every
                              layer is its none twin's run, not priced or ranked twice) */
  ND_REFUSE_MEMORY,        /* "over memory" (priced, heaviest stage over the budget) */
  ND_REFUSE_NO_MEMORY,     /* "out of memory" (this process ran out pricing it: the search
                              stops, ND_SEARCH_NO_MEMORY; never a property of the strategy) */
  ND_REFUSE_COUNT
} nd_refusal;
const char *nd_refusal_label (nd_refusal r);

/*
** Checks a strategy against a model and job; fills in derived fields (mb from the global
** batch, dp from the device count when 0) and the stage layout. Returns 0, or -1 with a
** one-line reason in err (the search turns these into refusal labels).
*/
int nd_strategy_resolve (nd_strategy *st, const nd_model_spec *m, const nd_job *job,
                         char *err, size_t errlen);

/*
** The same checks, returning -1 when st runs (st resolved as above), or the refusal
** (nd_refusal) of the first rule it breaks, with the rule in err (err may be NULL: no
** message is formatted). The search's walk and resolve refuse by this one check.
*/
int nd_strategy_check (nd_strategy *st, const nd_model_spec *m, const nd_job *job,
                       char *err, size_t errlen);

/*
** Whether a refusal of nd_strategy_check is shared by every strategy that differs from the
** refused one only in ZeRO (0-3), the shard group (dp_shard, dp_replicate) or the recipe,
** and, with split set, in VPP and the layout fields too: the rules that refuse under its
** label (EP over, sequence parallelism, CP, global batch; without split, the schedule's as
** well) read none of those and run before every rule that does, so the first rule such a
** strategy breaks is the same one. The search counts these refusals once for all of them.
*/
int nd_refusal_shared (nd_refusal r, int split);

/* Resolves a copy: out = in resolved (in is left as it was; resolving out again gives out). */
int nd_strategy_resolve_to (const nd_strategy *in, const nd_model_spec *m, const nd_job *job,
                            nd_strategy *out, char *err, size_t errlen);

/*
** Parses Megatron's --pipeline-model-parallel-layout (e.g. "Et*3|(tt|)*29,m|L": '|' ends
** a chunk, E embedding, t decoder, m MTP, L loss, "x*n" and "(...)*n" repeat, commas are
** cosmetic) into st: stage_layers per chunk, vpp = chunks / pp (st->pp set first; a vpp
** above 1 already set must agree), explicit_layout = ND_LAYOUT_STRING. Refuses what
** Megatron refuses of the string alone; the layer counts are checked by resolve.
** Returns 0, or -1 with a one-line reason labelled "layout".
*/
int nd_layout_parse (nd_strategy *st, const char *layout, char *err, size_t errlen);

/* The layout alone (pp, vpp and the layout fields of st; body and MTP layers): the checks
   and placement nd_strategy_resolve applies, for callers without a whole job. */
int nd_layout_resolve (nd_strategy *st, int body, int mtp, char *err, size_t errlen);

/* Writes a resolved strategy's layout as a Megatron layout string; returns its length
   (>= len: truncated), or -1 when the layout cannot be written. */
int nd_layout_format (const nd_strategy *st, int body, int mtp, char *buf, size_t len);

/*
** The layout variants the search walks for a (pp, vpp) whose body layers do not divide
** into pp*vpp equal chunks: the even split (the remainder spread, stated to Megatron as a
** layout string); Megatron's embedding/loss accounting, each flag set Megatron accepts its
** own variant (both flags: "account"; --account-for-embedding-in-pipeline-split alone:
** "account_embedding"; --account-for-loss-in-pipeline-split alone: "account_loss"); and
** first/last stage offsets (--decoder-first/last-pipeline-num-layers): the middle stages
** hold ceil(layers / (pp*vpp)) per chunk, the first and last stage share the rest, so each
** end is lighter by the few layers that make the middle divide evenly -- "first_last" with
** the first (embedding) stage the lighter of the two, "first_last_loss" with the last (loss
** and MTP) stage the lighter (NeMo's DeepSeek-V3 recipe: 61 layers on PP 16 as 3 + 14 x 4 +
** 2). nd_layout_variant sets st's layout fields (pp, vpp set) for one; -1 when that variant
** cannot state this (pp, vpp).
*/
enum { ND_VARIANT_EVEN = 0, ND_VARIANT_ACCOUNT, ND_VARIANT_ACCOUNT_EMBEDDING,
       ND_VARIANT_ACCOUNT_LOSS, ND_VARIANT_FIRST_LAST, ND_VARIANT_FIRST_LAST_LOSS,
       ND_VARIANT_COUNT };
/* "even", "account", "account_embedding", "account_loss", "first_last", "first_last_loss" */
const char *nd_layout_variant_name (int variant);
int nd_layout_variant (nd_strategy *st, int body, int variant);

/* Layers (body+MTP) of chunk c of stage s of a resolved strategy, and the first one. */
int nd_chunk_layers (const nd_strategy *st, int s, int c, int *first);

/*
** Calls fn(layer, chunk, ud) for every layer (0-based, body then MTP) that pipeline stage s
** of a resolved strategy holds, chunk by chunk.
*/
void nd_stage_foreach (const nd_strategy *st, int body, int mtp, int s,
                       void (*fn)(int layer, int chunk, void *ud), void *ud);
/* The chunks stage s of a resolved strategy runs, in nd_stage_foreach's order, as indices
   into stage_layers (chunk c of the stage is k[c]); returns how many (vpp, or 2 for a
   DualPipe stage that also holds stage pp-1-s). k has room for ND_MAX_CHUNKS. */
int nd_stage_chunks (const nd_strategy *st, int s, int *k);
/* The first layer of every chunk k = c*pp + s of a resolved strategy (pp*vpp entries). */
void nd_chunk_starts (const nd_strategy *st, int *first);

/* The schedule a strategy runs: interleaved with vpp > 1, else s (interleaved at vpp 1 is
   1f1b). Whether Megatron-LM states s (1f1b and interleaved; trainers that cannot state a
   schedule fall back to 1f1b). */
nd_schedule nd_schedule_of (nd_schedule s, int vpp);
int nd_schedule_megatron (nd_schedule s);
/* Forwards (chunk forwards when interleaved) stage s of a resolved strategy runs before its
   first backward: 1F1B and ZB min(pp - s - 1, mb); interleaved Megatron's (pp - s - 1)*2 +
   (vpp - 1)*pp, at most mb*vpp; GPipe mb. */
int nd_pipeline_warmup (const nd_strategy *st, int s);

const char *nd_schedule_name (nd_schedule s);
const char *nd_recompute_name (nd_recompute r);
int nd_schedule_parse (const char *name, nd_schedule *out);
int nd_recompute_parse (const char *name, nd_recompute *out);
/* The strategy's recipe; the body layers it keeps in BF16 at each end (the strategy's
   count or the recipe's, at most body between them); whether a layer's linear GEMMs
   run at the recipe's precision (MTP layers count as body layers past the end). */
const nd_recipe *nd_strategy_recipe (const nd_strategy *st);
void nd_strategy_bf16_layers (const nd_strategy *st, int body, int *first, int *last);
int nd_strategy_layer_quantized (const nd_strategy *st, int body, int layer);
/*
** Refuses a recipe the device or the strategy cannot run: the device lacks the peak slot
** its GEMMs need, param gather without a quantized recipe, BF16 layer counts out of range.
** Returns 0, or -1 with one line naming the field in err.
*/
int nd_recipe_check (const nd_strategy *st, const nd_device *dev, int body, char *err,
                     size_t len);
const char *nd_op_name (int op);   /* "attn_core", "norms", "act", "mla_up", "moe_dispatch", "alt_mm" */
int nd_op_parse (const char *name, int *op);

#endif
