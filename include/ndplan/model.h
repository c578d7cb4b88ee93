/*
** ndplan/model.h -- the canonical model spec, its layer stack and its parameter counts.
**
** nd_model_spec is plain data (fixed arrays, no pointers) so the estimators can copy it and
** price it in tight loops. Field names are the canonical names also used on the Lua side
** (the binding and lua/ndplan/hfconfig.lua), so a message such as "num_kv_heads: ..." means
** the same thing in C and Lua.
**
** Every function that counts parameters expects a spec that passed nd_model_validate: the
** bounds checked there are what keeps the int64_t arithmetic from overflowing.
*/
#ifndef NDPLAN_MODEL_H
#define NDPLAN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define ND_MAX_LAYERS 1024     /* body plus MTP layers */
#define ND_NAME_MAX   64       /* name and family, including the terminating zero */
#define ND_MAX_LAYER_KINDS 32  /* distinct layer kinds (nd_layer_kind_equal) in one stack */

/* Attention kind of one layer. */
enum {
  ND_ATTN_FULL,      /* full causal attention (GQA/MQA/MHA) */
  ND_ATTN_SLIDING,   /* same weights, windowed: differs only in activations and KV cache */
  ND_ATTN_LINEAR,    /* Gated DeltaNet (Qwen3-Next, Qwen3.5) */
  ND_ATTN_MLA,       /* multi-head latent attention (DeepSeek-V2/V3) */
  ND_ATTN_MAMBA,     /* Mamba-2 mixer (Nemotron-H): in/out projections, conv, chunked scan */
  ND_ATTN_NONE,      /* no token mixer: an MLP-only layer (Nemotron-H '-') */
  ND_ATTN_MAMBA1,    /* Mamba-1 mixer (Jamba): in/out projections, conv, x_proj and dt_proj,
                        the selective scan over mamba_inner channels */
  ND_ATTN_HYBRID,    /* full attention and a Mamba-2 mixer side by side on the same normed
                        input, their outputs summed (Falcon-H1) */
  ND_ATTN_KINDS
};

/* MLP kind of one layer; NONE: a mixer-only layer (Nemotron-H 'M' and '*'). */
enum { ND_MLP_DENSE, ND_MLP_MOE, ND_MLP_NONE, ND_MLP_KINDS };

enum { ND_POS_ROPE, ND_POS_LEARNED, ND_POS_NONE, ND_POS_KINDS };  /* NONE: ALiBi, NoPE */
enum { ND_NORM_RMS, ND_NORM_LAYER, ND_NORM_KINDS };  /* RMSNorm: weight; LayerNorm: +bias */

typedef struct nd_layer_kind {
  unsigned char attention;  /* ND_ATTN_* */
  unsigned char mlp;        /* ND_MLP_* */
  unsigned char mtp;        /* 1 for the multi-token-prediction layers after the body */
  int32_t ffn_size;         /* dense layers: this layer's MLP width; 0: the spec's ffn_size
                               (Nemotron NAS blocks each have their own) */
} nd_layer_kind;

/*
** The stack's layer kinds (nd_layer_kind_equal), numbered once per model
** (nd_model_number_kinds) so the estimators need not number them on every call, and the
** runs of consecutive layers of one kind, so a stage's layers are counted run by run.
*/
typedef struct nd_kind_index {
  int count;                          /* distinct kinds; 0: not numbered (the estimators
                                         number them per call); -1: over ND_MAX_LAYER_KINDS */
  unsigned char of[ND_MAX_LAYERS];    /* each layer's kind, 0 .. count - 1, by first use */
  int16_t run_end[ND_MAX_LAYERS];     /* one past the last layer of the run of one kind
                                         that holds layer i */
} nd_kind_index;

typedef struct nd_model_spec {
  char name[ND_NAME_MAX];
  char family[ND_NAME_MAX];          /* HF model_type, e.g. "deepseek_v3" */
  int64_t hidden_size;
  int64_t num_layers;                /* body layers, MTP excluded */
  int64_t num_heads;
  int64_t num_kv_heads;              /* nominal (ignored) for MLA layers */
  int64_t head_dim;                  /* q/k/v width per head for full and sliding layers */
  int64_t ffn_size;                  /* dense MLP width (a layer's own ffn_size overrides it);
                                        0 when no dense layer takes it */
  int64_t vocab_size;
  int64_t max_position;              /* 0 when unknown */
  int position;                      /* ND_POS_* */
  int64_t position_count;            /* rows of the learned position table (OPT: max + 2) */
  int tie_embeddings;
  int qkv_bias, o_bias, mlp_bias;
  int qk_norm;                       /* a norm of width head_dim on q and on k */
  int attn_sinks;                    /* one learned logit per head (GPT-OSS) */
  int norm;                          /* ND_NORM_* */
  int norms_per_layer;               /* 2 for most; 4 for Gemma 2/3: half of them go with
                                        each sublayer, so a layer without attention or
                                        without MLP has half as many */
  int final_norm;                    /* a norm before the head (OPT-350m has none) */
  int embed_norm;                    /* a norm after the embedding (BLOOM) */
  int64_t embed_proj;                /* OPT word_embed_proj_dim when it differs from hidden */
  int gated_mlp;                     /* SwiGLU/GeGLU: 3 matrices; else 2 */
  int attn_output_gate;              /* q projection doubled to carry a sigmoid gate */
  /* MLA: q_lora_rank 0 means a plain q projection */
  int64_t q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
  /* DeepSeek sparse attention (V3.2): on MLA layers an indexer of index_heads heads of
     index_head_dim scores every earlier key and each query attends to the index_topk best;
     index_topk 0: no indexer */
  int64_t index_heads, index_head_dim, index_topk;
  /* MoE: moe_ffn_size per routed expert; shared_ffn_size is the total shared width */
  int64_t num_experts, top_k, moe_ffn_size, num_shared_experts, shared_ffn_size;
  /* group-limited routing (DeepSeek n_group / topk_group): experts in expert_groups
     groups, each token routed within groups_per_token of them; 0 = unlimited */
  int64_t expert_groups, groups_per_token;
  int shared_expert_gate;            /* an h x 1 sigmoid gate on the shared expert (Qwen) */
  int router_bias;                   /* E extra router params (GPT-OSS bias, DeepSeek-V3 */
                                     /* score-correction bias) */
  int expert_bias;                   /* biases inside each expert MLP (GPT-OSS) */
  /* Gated DeltaNet */
  int64_t linear_k_heads, linear_v_heads, linear_k_dim, linear_v_dim, conv_kernel;
  /* Mamba-2: mamba_heads x mamba_head_dim is the inner width, mamba_groups share B and C
     of mamba_state each, a depthwise conv of mamba_conv taps over x, B and C, and the scan
     runs in chunks of mamba_chunk tokens */
  int64_t mamba_heads, mamba_head_dim, mamba_state, mamba_groups, mamba_conv, mamba_chunk;
  int mamba_conv_bias, mamba_proj_bias;
  int mamba_norm;                    /* Mamba-2's gated RMSNorm over the inner width: 1 (the
                                        default); 0 without it (Falcon-H1 mamba_rms_norm) */
  /* Mamba-1 (shares mamba_state, mamba_conv and the two bias switches): mamba_inner
     channels, x_proj to mamba_dt_rank + 2 x mamba_state, dt_proj back to the channels;
     mamba_dt_norms: RMSNorms on dt, B and C (Jamba) */
  int64_t mamba_inner, mamba_dt_rank;
  int mamba_dt_norms;
  int64_t sliding_window;            /* 0 when no layer is sliding */
  int chunked_window;                /* sliding layers attend within fixed chunks of
                                        sliding_window tokens, not a sliding window
                                        (Llama 4's chunked attention) */
  int64_t mtp_layers;
  nd_layer_kind layer[ND_MAX_LAYERS];  /* num_layers + mtp_layers entries */
  nd_kind_index kinds;               /* derived from layer[] (nd_model_number_kinds); a
                                        caller that changes layer[] numbers them again */
} nd_model_spec;

/*
** Parameters of one layer, in buckets that shard differently. The buckets are disjoint and
** sum to total; routed_active (the top_k share of routed_experts) is not a bucket.
*/
typedef struct nd_layer_buckets {
  int64_t attention;             /* q/k/v/o and up-projections: TP-sharded */
  int64_t attention_replicated;  /* MLA down-projections: replicated across TP */
  int64_t dense_mlp;             /* TP-sharded */
  int64_t shared_experts;        /* TP-sharded */
  int64_t routed_experts;        /* all experts: expert-sharded */
  int64_t router;                /* router and shared-expert gate: replicated */
  int64_t norms;                 /* replicated */
  int64_t mtp_proj;              /* MTP layers: the 2h -> h projection, TP-sharded */
  int64_t routed_active;         /* top_k of the routed experts */
  int64_t total;
  int64_t active;                /* total with routed_active in place of routed_experts */
} nd_layer_buckets;

/* Whole-model totals. The breakdown covers the main model; MTP layers are all in mtp. */
typedef struct nd_params {
  int64_t total;            /* main model, MTP excluded (DeepSeek-V3: 671.0B) */
  int64_t active;           /* main model with top_k routed experts per token */
  int64_t total_with_mtp;
  int64_t active_with_mtp;
  int64_t embedding;        /* word embeddings, learned positions, OPT projections */
  int64_t attention;        /* both attention buckets */
  int64_t dense_mlp;
  int64_t routed_experts;
  int64_t shared_experts;
  int64_t norms;            /* per-layer, final and embedding norms */
  int64_t router;
  int64_t head;             /* 0 when tied */
  int64_t mtp;              /* whole MTP modules; they share embedding and head */
} nd_params;

typedef struct nd_layer_group {
  int first;                /* 0-based index of the first layer */
  int count;
  int attention, mlp, mtp;
  int64_t ffn_size;         /* dense groups: their MLP width (nd_layer_ffn_size); else 0 */
} nd_layer_group;

/* Zeroes m and sets the defaults: RMSNorm, 2 norms per layer, final norm, gated MLP, RoPE,
** Mamba-2's gated norm. */
void nd_model_init (nd_model_spec *m);

/*
** The fields that default to others, for those not in `given` (ND_GIVEN_* bits): KV heads =
** heads; head_dim = hidden / heads (MLA: qk_nope + qk_rope); a learned position table's
** rows = max_position. Returns 0, or -1 with "head_dim: required when ..." in err.
*/
#define ND_GIVEN_KV_HEADS 1u
#define ND_GIVEN_HEAD_DIM 2u
#define ND_GIVEN_POSITION_COUNT 4u
int nd_model_derive (nd_model_spec *m, unsigned given, char *err, size_t errlen);

/*
** Fills layer[] for num_layers + mtp_layers layers from the other fields: MLA when
** kv_lora_rank > 0 else full attention; MoE when num_experts > 0 else dense.
** Returns -1 (and changes nothing) when the layer count is out of range.
*/
int nd_model_default_stack (nd_model_spec *m);

/*
** Numbers the kinds of layer[] into out (count -1 when there are more than
** ND_MAX_LAYER_KINDS), and into m->kinds (nd_model_number_kinds). nd_model_default_stack
** clears m->kinds (the estimators then number the stack per call); nd_model_validate refuses
** a numbering that no longer matches layer[].
*/
void nd_kind_index_build (const nd_model_spec *m, nd_kind_index *out);
void nd_model_number_kinds (nd_model_spec *m);

/* 0 when m is consistent, else -1 with "field: problem" in err (NUL-terminated, truncated). */
int nd_model_validate (const nd_model_spec *m, char *err, size_t errlen);

/* Same kind: attention, MLP, MTP and (dense layers) MLP width; what a layer is priced by. */
static inline int nd_layer_kind_equal (const nd_layer_kind *a, const nd_layer_kind *b) {
  /* (inline: nd_kind_index_build compares each layer with the one before) */
  return a->attention == b->attention && a->mlp == b->mlp && (a->mtp != 0) == (b->mtp != 0)
         && a->ffn_size == b->ffn_size;
}

/* The dense MLP width of layer `layer`: its own ffn_size, else the spec's; 0 when the layer
** is not dense or out of range. */
int64_t nd_layer_ffn_size (const nd_model_spec *m, int layer);

/* Parameters of layer `layer` (0-based, MTP layers after the body). -1 when out of range. */
int nd_layer_params (const nd_model_spec *m, int layer, nd_layer_buckets *out);

void nd_model_params (const nd_model_spec *m, nd_params *out);

/*
** Parameters outside the layer stack, by where a pipeline puts them: the embedding side
** (word and position embeddings, embedding norm) on the first stage, the final norm and
** untied head on the last; tied_copy is the head a last stage must hold when the tied
** embedding lives on another stage (Megatron keeps a synchronised copy).
*/
void nd_model_outer_params (const nd_model_spec *m, int64_t *first, int64_t *last,
                            int64_t *tied_copy);

/*
** Runs of consecutive layers of the same kind (nd_layer_kind_equal); the body/MTP boundary always starts a new
** group. Writes at most max groups and returns how many there are (like snprintf).
*/
int nd_model_groups (const nd_model_spec *m, nd_layer_group *out, int max);

/* Names: "full", "sliding", "linear", "mla", "mamba", "none", "mamba1", "hybrid"; "dense",
** "moe", "none";
** "rope", "learned", "none";
** "rmsnorm", "layernorm". NULL when out of range. */
const char *nd_attention_name (int kind);
const char *nd_mlp_name (int kind);
const char *nd_position_name (int kind);
const char *nd_norm_name (int kind);
/* The inverses: -1 for an unknown name. */
int nd_attention_kind (const char *name);
int nd_mlp_kind (const char *name);
int nd_position_kind (const char *name);
int nd_norm_kind (const char *name);

/* "dense", "moe", "sliding-dense", "linear-moe", "mla-moe", ...: full attention is implied;
** a layer without MLP is named by its mixer ("attention", "mamba", ...), one without
** attention by its MLP ("mlp", "moe-mlp"), one with neither "identity" (Nemotron NAS blocks
** whose attention and FFN are both no-ops: the residual passes through). NULL out of range. */
const char *nd_layer_kind_name (int attention, int mlp);

#endif
