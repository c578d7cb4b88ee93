/*
** model.c -- the canonical model spec: defaults, validation, per-layer parameter buckets,
** whole-model totals and layer groups. Pure C11.
*/
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ndplan/model.h"

/*
** Bounds on every width, chosen so that no product below can overflow int64_t: the largest
** bucket (all routed experts of one layer: 3 x 2^12 experts x 2^17 hidden x 2^20 wide) stays
** under 2^51, so 1024 layers stay under 2^61. Widths reach 2^20 because real ones pass 2^18:
** Llama-3.1-Nemotron-Ultra-253B's widest FFN-only block is 425,984 (ffn_mult 39 at hidden
** 16384); the others are far above any real model.
*/
#define MAX_HIDDEN   (INT64_C(1) << 17)
#define MAX_WIDTH    (INT64_C(1) << 20)   /* ffn, expert and latent widths */
#define MAX_HEADS    (INT64_C(1) << 14)
#define MAX_HEAD_DIM (INT64_C(1) << 14)
#define MAX_EXPERTS  (INT64_C(1) << 12)
#define MAX_VOCAB    (INT64_C(1) << 24)
#define MAX_POSITION (INT64_C(1) << 24)
#define MAX_CONV     (INT64_C(1) << 8)

static const char *const attention_names[ND_ATTN_KINDS] = {"full", "sliding", "linear", "mla",
                                                           "mamba", "none", "mamba1",
                                                           "hybrid"};
static const char *const mlp_names[ND_MLP_KINDS] = {"dense", "moe", "none"};
static const char *const position_names[ND_POS_KINDS] = {"rope", "learned", "none"};
static const char *const norm_names[ND_NORM_KINDS] = {"rmsnorm", "layernorm"};
static const char *const kind_names[ND_ATTN_KINDS][ND_MLP_KINDS] = {
  {"dense", "moe", "attention"}, {"sliding-dense", "sliding-moe", "sliding"},
  {"linear-dense", "linear-moe", "linear"}, {"mla-dense", "mla-moe", "mla"},
  {"mamba-dense", "mamba-moe", "mamba"}, {"mlp", "moe-mlp", "identity"},
  {"mamba1-dense", "mamba1-moe", "mamba1"}, {"hybrid-dense", "hybrid-moe", "hybrid"}
};

static const char *name_of (const char *const *names, int n, int kind) {
  return (kind >= 0 && kind < n) ? names[kind] : NULL;
}

static int kind_of (const char *const *names, int n, const char *name) {
  int i;
  if (name == NULL) return -1;
  for (i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0) return i;
  return -1;
}

const char *nd_attention_name (int k) { return name_of(attention_names, ND_ATTN_KINDS, k); }
const char *nd_mlp_name (int k) { return name_of(mlp_names, ND_MLP_KINDS, k); }
const char *nd_position_name (int k) { return name_of(position_names, ND_POS_KINDS, k); }
const char *nd_norm_name (int k) { return name_of(norm_names, ND_NORM_KINDS, k); }
int nd_attention_kind (const char *s) { return kind_of(attention_names, ND_ATTN_KINDS, s); }
int nd_mlp_kind (const char *s) { return kind_of(mlp_names, ND_MLP_KINDS, s); }
int nd_position_kind (const char *s) { return kind_of(position_names, ND_POS_KINDS, s); }
int nd_norm_kind (const char *s) { return kind_of(norm_names, ND_NORM_KINDS, s); }

const char *nd_layer_kind_name (int attention, int mlp) {
  if (attention < 0 || attention >= ND_ATTN_KINDS || mlp < 0 || mlp >= ND_MLP_KINDS)
    return NULL;
  return kind_names[attention][mlp];
}

void nd_model_init (nd_model_spec *m) {
  memset(m, 0, sizeof *m);
  m->position = ND_POS_ROPE;
  m->norm = ND_NORM_RMS;
  m->norms_per_layer = 2;
  m->final_norm = 1;
  m->gated_mlp = 1;
  m->mamba_norm = 1;
}

/* Values past any real dimension: sums of them are not formed. */
static int huge (int64_t v) { return v > INT32_MAX || v < -INT32_MAX; }

int nd_model_derive (nd_model_spec *m, unsigned given, char *err, size_t errlen) {
  if (!(given & ND_GIVEN_KV_HEADS)) m->num_kv_heads = m->num_heads;
  if (!(given & ND_GIVEN_HEAD_DIM)) {
    if (m->kv_lora_rank > 0)  /* absurd dims fail validation later; no overflow here */
      m->head_dim = huge(m->qk_nope_head_dim) || huge(m->qk_rope_head_dim)
                  ? 0 : m->qk_nope_head_dim + m->qk_rope_head_dim;
    else if (m->num_heads > 0 && m->hidden_size % m->num_heads == 0)
      m->head_dim = m->hidden_size / m->num_heads;
    else {
      if (err && errlen)
        snprintf(err, errlen, "head_dim: required when num_heads (%lld) does not divide "
                 "hidden_size (%lld)", (long long)m->num_heads, (long long)m->hidden_size);
      return -1;
    }
  }
  if (!(given & ND_GIVEN_POSITION_COUNT) && m->position == ND_POS_LEARNED)
    m->position_count = m->max_position;
  return 0;
}

int nd_model_default_stack (nd_model_spec *m) {
  int64_t n, i;
  /* each count is checked before the sum, which could otherwise overflow */
  if (m->num_layers < 1 || m->num_layers > ND_MAX_LAYERS || m->mtp_layers < 0
      || m->mtp_layers > ND_MAX_LAYERS) return -1;
  n = m->num_layers + m->mtp_layers;
  if (n > ND_MAX_LAYERS) return -1;
  for (i = 0; i < n; i++) {
    m->layer[i].attention = (unsigned char)(m->kv_lora_rank > 0 ? ND_ATTN_MLA : ND_ATTN_FULL);
    m->layer[i].mlp = (unsigned char)(m->num_experts > 0 ? ND_MLP_MOE : ND_MLP_DENSE);
    m->layer[i].mtp = (unsigned char)(i >= m->num_layers);
  }
  m->kinds.count = 0;  /* a new stack: not numbered */
  return 0;
}

void nd_kind_index_build (const nd_model_spec *m, nd_kind_index *out) {
  int i, k, n = (int)(m->num_layers + m->mtp_layers), rep[ND_MAX_LAYER_KINDS];
  if (n > ND_MAX_LAYERS) n = ND_MAX_LAYERS;
  if (n < 0) n = 0;
  out->count = 0;
  for (i = 0; i < n; i++) {
    /* (stacks run in blocks of one kind: the previous layer's is the likely match) */
    if (i > 0 && nd_layer_kind_equal(&m->layer[i - 1], &m->layer[i])) {
      out->of[i] = out->of[i - 1];
      continue;
    }
    for (k = 0; k < out->count; k++) if (nd_layer_kind_equal(&m->layer[rep[k]], &m->layer[i])) break;
    if (k == out->count) {
      if (k == ND_MAX_LAYER_KINDS) { out->count = -1; return; }
      rep[out->count++] = i;
    }
    out->of[i] = (unsigned char)k;
  }
  for (i = n - 1; i >= 0; i--)  /* runs: a layer whose kind differs from the next ends one */
    out->run_end[i] = (int16_t)(i + 1 < n && out->of[i + 1] == out->of[i] ? out->run_end[i + 1]
                                                                            : i + 1);
}

void nd_model_number_kinds (nd_model_spec *m) {
  nd_kind_index_build(m, &m->kinds);
}

/* {======================================================================
** Validation
** ======================================================================= */

static int fail (char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* Checks lo <= v <= hi, naming the field in the message. */
static int check_range (const char *field, int64_t v, int64_t lo, int64_t hi,
                        char *err, size_t errlen) {
  if (v < lo || v > hi)
    return fail(err, errlen, "%s: must be between %lld and %lld, got %lld", field,
                (long long)lo, (long long)hi, (long long)v);
  return 0;
}

static int check_flag (const char *field, int v, char *err, size_t errlen) {
  if (v != 0 && v != 1) return fail(err, errlen, "%s: must be 0 or 1, got %d", field, v);
  return 0;
}

/* What the stack uses, so only the fields those kinds need are required. */
typedef struct usage {
  int attn[ND_ATTN_KINDS], mlp[ND_MLP_KINDS];
  int kinds, rep[ND_MAX_LAYER_KINDS];  /* distinct layer kinds: one layer of each */
} usage;

static int validate_stack (const nd_model_spec *m, usage *u, char *err, size_t errlen) {
  int64_t i, n = m->num_layers + m->mtp_layers;
  int j;
  memset(u, 0, sizeof *u);
  for (i = 0; i < n; i++) {
    const nd_layer_kind *k = &m->layer[i];
    if (k->attention >= ND_ATTN_KINDS)
      return fail(err, errlen, "attention: layer %lld has unknown kind %d", (long long)i,
                  k->attention);
    if (k->mlp >= ND_MLP_KINDS)
      return fail(err, errlen, "mlp: layer %lld has unknown kind %d", (long long)i, k->mlp);
    if (k->attention == ND_ATTN_NONE && k->mlp == ND_MLP_NONE && k->mtp)
      return fail(err, errlen, "mlp: MTP layer %lld has neither attention nor an MLP (only"
                  " a body layer may be an identity)", (long long)i);
    if (k->mtp != (i >= m->num_layers))
      return fail(err, errlen, "mtp: layer %lld must be marked as %s", (long long)i,
                  i >= m->num_layers ? "an MTP layer (it follows the body)" : "a body layer");
    if (k->ffn_size < 0 || k->ffn_size > MAX_WIDTH)
      return fail(err, errlen, "ffn_size: layer %lld's width must be between 0 and %lld, got"
                  " %ld", (long long)i, (long long)MAX_WIDTH, (long)k->ffn_size);
    if (k->ffn_size > 0 && k->mlp != ND_MLP_DENSE)
      return fail(err, errlen, "ffn_size: layer %lld has its own MLP width but its MLP is %s,"
                  " not dense", (long long)i, nd_mlp_name(k->mlp));
    if (k->mlp == ND_MLP_DENSE && k->ffn_size == 0 && m->ffn_size < 1)
      return fail(err, errlen, "ffn_size: dense layers need a width of at least 1 (layer %lld"
                  " has no width of its own)", (long long)i);
    for (j = 0; j < u->kinds; j++) if (nd_layer_kind_equal(&m->layer[u->rep[j]], k)) break;
    if (j == u->kinds) {
      if (u->kinds == ND_MAX_LAYER_KINDS)
        return fail(err, errlen, "ffn_size: more than %d distinct layer kinds (attention, MLP"
                    " and MLP width)", ND_MAX_LAYER_KINDS);
      u->rep[u->kinds++] = (int)i;
    }
    u->attn[k->attention]++;
    u->mlp[k->mlp]++;
  }
  return 0;
}

#define RANGE(field, lo, hi) \
  do { if (check_range(#field, m->field, (lo), (hi), err, errlen)) return -1; } while (0)
#define FLAG(field) \
  do { if (check_flag(#field, m->field, err, errlen)) return -1; } while (0)

/* Whether m->kinds is the numbering of m's stack: 0 when it is. */
static int check_kinds (const nd_model_spec *m) {
  nd_kind_index fresh;
  int n = (int)(m->num_layers + m->mtp_layers);
  nd_kind_index_build(m, &fresh);
  if (fresh.count != m->kinds.count) return -1;
  if (fresh.count < 0) return 0;
  return memcmp(fresh.of, m->kinds.of, (size_t)n * sizeof fresh.of[0]) != 0
      || memcmp(fresh.run_end, m->kinds.run_end, (size_t)n * sizeof fresh.run_end[0]) != 0
      ? -1 : 0;
}

int nd_model_validate (const nd_model_spec *m, char *err, size_t errlen) {
  usage u;
  if (memchr(m->name, '\0', sizeof m->name) == NULL || m->name[0] == '\0')
    return fail(err, errlen, "name: must be a non-empty string of at most %d bytes",
                ND_NAME_MAX - 1);
  if (memchr(m->family, '\0', sizeof m->family) == NULL)
    return fail(err, errlen, "family: must be at most %d bytes", ND_NAME_MAX - 1);
  RANGE(hidden_size, 1, MAX_HIDDEN);
  RANGE(num_layers, 1, ND_MAX_LAYERS);
  RANGE(mtp_layers, 0, ND_MAX_LAYERS - m->num_layers);
  RANGE(num_heads, 1, MAX_HEADS);
  RANGE(vocab_size, 1, MAX_VOCAB);
  RANGE(max_position, 0, MAX_POSITION);
  RANGE(ffn_size, 0, MAX_WIDTH);
  RANGE(embed_proj, 0, MAX_WIDTH);
  RANGE(norms_per_layer, 0, 16);
  RANGE(sliding_window, 0, MAX_POSITION);
  RANGE(position, 0, ND_POS_KINDS - 1);
  RANGE(norm, 0, ND_NORM_KINDS - 1);
  FLAG(tie_embeddings); FLAG(qkv_bias); FLAG(o_bias); FLAG(mlp_bias); FLAG(qk_norm);
  FLAG(attn_sinks); FLAG(final_norm); FLAG(embed_norm); FLAG(gated_mlp);
  FLAG(attn_output_gate); FLAG(shared_expert_gate); FLAG(router_bias); FLAG(expert_bias);
  FLAG(mamba_conv_bias); FLAG(mamba_proj_bias); FLAG(mamba_norm); FLAG(mamba_dt_norms);
  FLAG(chunked_window);
  if (m->position == ND_POS_LEARNED) RANGE(position_count, 1, MAX_POSITION);
  else RANGE(position_count, 0, 0);
  if (validate_stack(m, &u, err, errlen)) return -1;
  if (m->kinds.count != 0 && check_kinds(m) != 0)
    return fail(err, errlen, "layer: the kinds were numbered before the stack changed (call"
                " nd_model_number_kinds again)");

  if (u.attn[ND_ATTN_FULL] || u.attn[ND_ATTN_SLIDING] || u.attn[ND_ATTN_HYBRID]) {
    RANGE(num_kv_heads, 1, m->num_heads);
    if (m->num_heads % m->num_kv_heads != 0)
      return fail(err, errlen, "num_kv_heads: must divide num_heads (%lld), got %lld",
                  (long long)m->num_heads, (long long)m->num_kv_heads);
    RANGE(head_dim, 1, MAX_HEAD_DIM);
  }
  else RANGE(num_kv_heads, 0, MAX_HEADS);
  if (u.attn[ND_ATTN_SLIDING] && m->sliding_window < 1)
    return fail(err, errlen, "sliding_window: sliding layers need a window of at least 1");
  if (u.attn[ND_ATTN_MLA]) {
    RANGE(q_lora_rank, 0, MAX_WIDTH);
    RANGE(kv_lora_rank, 1, MAX_WIDTH);
    RANGE(qk_nope_head_dim, 0, MAX_HEAD_DIM);
    RANGE(qk_rope_head_dim, 0, MAX_HEAD_DIM);
    RANGE(v_head_dim, 1, MAX_HEAD_DIM);
    if (m->qk_nope_head_dim + m->qk_rope_head_dim < 1)
      return fail(err, errlen, "qk_nope_head_dim: with qk_rope_head_dim must be at least 1");
    RANGE(index_topk, 0, MAX_POSITION);
    if (m->index_topk > 0) {
      RANGE(index_heads, 1, MAX_HEADS);
      RANGE(index_head_dim, 1, MAX_HEAD_DIM);
    }
  }
  else RANGE(index_topk, 0, 0);
  if (u.attn[ND_ATTN_LINEAR]) {
    RANGE(linear_k_heads, 1, MAX_HEADS);
    RANGE(linear_v_heads, 1, MAX_HEADS);
    RANGE(linear_k_dim, 1, MAX_HEAD_DIM);
    RANGE(linear_v_dim, 1, MAX_HEAD_DIM);
    RANGE(conv_kernel, 0, MAX_CONV);  /* 0: no conv (MiniMax's lightning attention) */
    if (m->linear_v_heads % m->linear_k_heads != 0)
      return fail(err, errlen, "linear_v_heads: must be a multiple of linear_k_heads (%lld),"
                  " got %lld", (long long)m->linear_k_heads, (long long)m->linear_v_heads);
  }
  if (u.attn[ND_ATTN_MAMBA] || u.attn[ND_ATTN_HYBRID]) {
    RANGE(mamba_heads, 1, MAX_HEADS);
    RANGE(mamba_head_dim, 1, MAX_HEAD_DIM);
    RANGE(mamba_state, 1, MAX_HEAD_DIM);
    RANGE(mamba_groups, 1, m->mamba_heads);
    RANGE(mamba_conv, 1, MAX_CONV);
    RANGE(mamba_chunk, 1, MAX_POSITION);
    if (m->mamba_heads % m->mamba_groups != 0)
      return fail(err, errlen, "mamba_groups: must divide mamba_heads (%lld), got %lld",
                  (long long)m->mamba_heads, (long long)m->mamba_groups);
  }
  if (u.attn[ND_ATTN_MAMBA1]) {
    RANGE(mamba_inner, 1, MAX_WIDTH);
    RANGE(mamba_state, 1, MAX_HEAD_DIM);
    RANGE(mamba_conv, 1, MAX_CONV);
    RANGE(mamba_dt_rank, 1, MAX_WIDTH);
  }
  if (u.mlp[ND_MLP_MOE]) {
    RANGE(num_experts, 1, MAX_EXPERTS);
    RANGE(top_k, 1, m->num_experts);
    RANGE(moe_ffn_size, 1, MAX_WIDTH);
    RANGE(expert_groups, 0, m->num_experts);
    if (m->expert_groups > 0) {
      RANGE(groups_per_token, 1, m->expert_groups);
      if (m->num_experts % m->expert_groups != 0)
        return fail(err, errlen, "expert_groups: must divide num_experts (%lld), got %lld",
                    (long long)m->num_experts, (long long)m->expert_groups);
    }
  }
  RANGE(num_shared_experts, 0, MAX_EXPERTS);
  RANGE(shared_ffn_size, 0, MAX_WIDTH);
  if ((m->num_shared_experts > 0) != (m->shared_ffn_size > 0))
    return fail(err, errlen, "shared_ffn_size: must be positive exactly when"
                " num_shared_experts is (%lld and %lld)", (long long)m->shared_ffn_size,
                (long long)m->num_shared_experts);
  if (m->shared_expert_gate && m->shared_ffn_size == 0)
    return fail(err, errlen, "shared_expert_gate: set but there is no shared expert");
  return 0;
}

/* }====================================================================== */

/* {======================================================================
** Parameter counts
** ======================================================================= */

static int64_t norm_size (const nd_model_spec *m, int64_t width) {
  return m->norm == ND_NORM_LAYER ? 2 * width : width;  /* LayerNorm adds a bias */
}

/* Standard (full or sliding) attention: q, k, v, o, biases, sinks, and q/k norms. */
static void attention_standard (const nd_model_spec *m, nd_layer_buckets *p) {
  int64_t h = m->hidden_size;
  int64_t q = m->num_heads * m->head_dim, kv = m->num_kv_heads * m->head_dim;
  int64_t qout = m->attn_output_gate ? 2 * q : q;  /* the gate rides on the q projection */
  p->attention += h * qout + 2 * h * kv + q * h;
  if (m->qkv_bias) p->attention += qout + 2 * kv;
  if (m->o_bias) p->attention += h;
  if (m->attn_sinks) p->attention += m->num_heads;
  if (m->qk_norm) p->norms += 2 * norm_size(m, m->head_dim);
}

/*
** MLA: the down-projections (to the q and kv latents, plus the shared rope key) are small
** and replicated in Megatron; the up-projections and the output are TP-sharded.
*/
static void attention_mla (const nd_model_spec *m, nd_layer_buckets *p) {
  int64_t h = m->hidden_size, heads = m->num_heads;
  int64_t qk = m->qk_nope_head_dim + m->qk_rope_head_dim;
  if (m->q_lora_rank > 0) {
    p->attention_replicated += h * m->q_lora_rank;
    p->norms += norm_size(m, m->q_lora_rank);
    p->attention += m->q_lora_rank * heads * qk;
  }
  else p->attention += h * heads * qk;
  p->attention_replicated += h * (m->kv_lora_rank + m->qk_rope_head_dim);
  p->norms += norm_size(m, m->kv_lora_rank);
  p->attention += m->kv_lora_rank * heads * (m->qk_nope_head_dim + m->v_head_dim);
  p->attention += heads * m->v_head_dim * h;
  if (m->qkv_bias)
    p->attention_replicated += (m->q_lora_rank > 0 ? m->q_lora_rank : heads * qk)
                               + m->kv_lora_rank + m->qk_rope_head_dim;
  if (m->o_bias) p->attention += h;
  if (m->index_topk > 0) {
    /* the DSA indexer: q from the q latent (or the input), one shared key with a LayerNorm,
       per-head weights; replicated across TP (its top-k needs every head's scores) */
    int64_t qin = m->q_lora_rank > 0 ? m->q_lora_rank : h, di = m->index_head_dim;
    p->attention_replicated += qin * m->index_heads * di + h * di + h * m->index_heads;
    p->norms += 2 * di;
  }
}

/*
** Gated DeltaNet: one input projection for q, k, v and the output gate z, one for the
** per-head beta and decay a, a depthwise causal conv over q/k/v, per-head A_log and dt_bias,
** a gated RMSNorm of width v_dim, and the output projection.
*/
static void attention_linear (const nd_model_spec *m, nd_layer_buckets *p) {
  int64_t h = m->hidden_size;
  int64_t k = m->linear_k_heads * m->linear_k_dim, v = m->linear_v_heads * m->linear_v_dim;
  p->attention = h * (2 * k + 2 * v) + h * 2 * m->linear_v_heads
                 + (2 * k + v) * m->conv_kernel + 2 * m->linear_v_heads + v * h;
  p->norms += m->linear_v_dim;
}

/*
** Mamba-2 (Megatron's MambaMixer, HF's Mamba2Mixer): one input projection to z and x (the
** inner width each), B and C (groups x state each) and dt (one per head); a depthwise
** causal conv over x, B and C; per-head dt_bias, A_log and D; a gated RMSNorm over the
** inner width; the output projection. Megatron shards all of it across TP, so all of it
** is in the TP-sharded bucket.
*/
static void attention_mamba (const nd_model_spec *m, nd_layer_buckets *p) {
  int64_t h = m->hidden_size, heads = m->mamba_heads;
  int64_t inner = heads * m->mamba_head_dim, bc = 2 * m->mamba_groups * m->mamba_state;
  int64_t in = 2 * inner + bc + heads, conv = inner + bc;
  p->attention += h * in + conv * m->mamba_conv + 3 * heads + inner * h;
  if (m->mamba_norm) p->attention += inner;
  if (m->mamba_conv_bias) p->attention += conv;
  if (m->mamba_proj_bias) p->attention += in + h;
}

/*
** Mamba-1 (HF's MambaMixer and JambaMambaMixer): in_proj to x and z (E channels each), a
** depthwise causal conv over x, x_proj from E to dt_rank + 2 x state (dt, B, C; no bias),
** dt_proj from dt_rank back to E (with its bias), A_log (E x state) and D (E), the output
** projection; Jamba's RMSNorms on dt, B and C are replicated norms. The rest is sharded
** along the channels, as attention is.
*/
static void attention_mamba1 (const nd_model_spec *m, nd_layer_buckets *p) {
  int64_t h = m->hidden_size, E = m->mamba_inner, N = m->mamba_state, R = m->mamba_dt_rank;
  p->attention += h * 2 * E + E * m->mamba_conv + E * (R + 2 * N) + R * E + E + E * N + E
                  + E * h;
  if (m->mamba_conv_bias) p->attention += E;
  if (m->mamba_proj_bias) p->attention += 2 * E + h;
  if (m->mamba_dt_norms) p->norms += norm_size(m, R) + 2 * norm_size(m, N);
}

/* One MLP of width w, with or without biases. */
static int64_t mlp_size (const nd_model_spec *m, int64_t w, int bias) {
  int64_t h = m->hidden_size, n = (m->gated_mlp ? 3 : 2) * h * w;
  if (bias) n += (m->gated_mlp ? 2 * w : w) + h;
  return n;
}

int nd_layer_params (const nd_model_spec *m, int layer, nd_layer_buckets *p) {
  const nd_layer_kind *k;
  int64_t h = m->hidden_size;
  if (layer < 0 || layer >= m->num_layers + m->mtp_layers || layer >= ND_MAX_LAYERS)
    return -1;
  k = &m->layer[layer];
  memset(p, 0, sizeof *p);
  switch (k->attention) {
    case ND_ATTN_LINEAR: attention_linear(m, p); break;
    case ND_ATTN_MLA: attention_mla(m, p); break;
    case ND_ATTN_MAMBA: attention_mamba(m, p); break;
    case ND_ATTN_MAMBA1: attention_mamba1(m, p); break;
    case ND_ATTN_HYBRID: attention_standard(m, p); attention_mamba(m, p); break;
    case ND_ATTN_NONE: break;
    default: attention_standard(m, p); break;
  }
  if (k->mlp == ND_MLP_NONE) {}
  else if (k->mlp == ND_MLP_MOE) {
    int64_t expert = mlp_size(m, m->moe_ffn_size, m->expert_bias);
    p->routed_experts = m->num_experts * expert;
    p->routed_active = m->top_k * expert;
    p->router = h * m->num_experts + (m->router_bias ? m->num_experts : 0);
    if (m->shared_ffn_size > 0) {
      p->shared_experts = mlp_size(m, m->shared_ffn_size, m->mlp_bias);
      if (m->shared_expert_gate) p->router += h;
    }
  }
  else p->dense_mlp = mlp_size(m, nd_layer_ffn_size(m, layer), m->mlp_bias);
  /* half the per-layer norms go with each sublayer the layer has */
  p->norms += m->norms_per_layer * ((k->attention != ND_ATTN_NONE) + (k->mlp != ND_MLP_NONE))
              / 2 * norm_size(m, h);
  if (k->mtp) {
    /* DeepSeek/Qwen MTP module: norms on the embedding and on the previous hidden state,
       the projection of their concatenation back to h, and the module's own final norm */
    p->mtp_proj = 2 * h * h;
    p->norms += 3 * norm_size(m, h);
  }
  p->total = p->attention + p->attention_replicated + p->dense_mlp + p->shared_experts
             + p->routed_experts + p->router + p->norms + p->mtp_proj;
  p->active = p->total - p->routed_experts + p->routed_active;
  return 0;
}

void nd_model_outer_params (const nd_model_spec *m, int64_t *first, int64_t *last,
                            int64_t *tied_copy) {
  int64_t h = m->hidden_size;
  int64_t e = m->embed_proj > 0 ? m->embed_proj : h;
  *first = m->vocab_size * e + (m->embed_proj > 0 ? 2 * e * h : 0)
         + (m->position == ND_POS_LEARNED ? m->position_count * h : 0)
         + (m->embed_norm ? norm_size(m, h) : 0);
  *last = (m->tie_embeddings ? 0 : m->vocab_size * e) + (m->final_norm ? norm_size(m, h) : 0);
  *tied_copy = m->tie_embeddings ? m->vocab_size * e : 0;
}

void nd_model_params (const nd_model_spec *m, nd_params *out) {
  int64_t h = m->hidden_size;
  int64_t e = m->embed_proj > 0 ? m->embed_proj : h;  /* width of the word embedding */
  int64_t i, n = m->num_layers + m->mtp_layers;
  memset(out, 0, sizeof *out);
  out->embedding = m->vocab_size * e;
  if (m->embed_proj > 0) out->embedding += 2 * e * h;  /* project in and out */
  if (m->position == ND_POS_LEARNED) out->embedding += m->position_count * h;
  out->head = m->tie_embeddings ? 0 : m->vocab_size * e;
  if (m->final_norm) out->norms += norm_size(m, h);
  if (m->embed_norm) out->norms += norm_size(m, h);
  out->total = out->active = out->embedding + out->head + out->norms;
  for (i = 0; i < n && i < ND_MAX_LAYERS; i++) {
    nd_layer_buckets p;
    nd_layer_params(m, (int)i, &p);
    if (m->layer[i].mtp) {
      out->mtp += p.total;
      out->active_with_mtp += p.active;
      continue;
    }
    out->attention += p.attention + p.attention_replicated;
    out->dense_mlp += p.dense_mlp;
    out->routed_experts += p.routed_experts;
    out->shared_experts += p.shared_experts;
    out->norms += p.norms;
    out->router += p.router;
    out->total += p.total;
    out->active += p.active;
  }
  out->total_with_mtp = out->total + out->mtp;
  out->active_with_mtp += out->active;
}

/* }====================================================================== */

int64_t nd_layer_ffn_size (const nd_model_spec *m, int layer) {
  const nd_layer_kind *k;
  if (layer < 0 || layer >= m->num_layers + m->mtp_layers || layer >= ND_MAX_LAYERS) return 0;
  k = &m->layer[layer];
  if (k->mlp != ND_MLP_DENSE) return 0;
  return k->ffn_size > 0 ? (int64_t)k->ffn_size : m->ffn_size;
}

int nd_model_groups (const nd_model_spec *m, nd_layer_group *out, int max) {
  int64_t i, n = m->num_layers + m->mtp_layers;
  int count = 0;
  if (n > ND_MAX_LAYERS) n = ND_MAX_LAYERS;
  for (i = 0; i < n; i++) {
    const nd_layer_kind *k = &m->layer[i];
    if (i > 0) {
      const nd_layer_kind *prev = &m->layer[i - 1];
      if (nd_layer_kind_equal(prev, k)) {
        if (count <= max) out[count - 1].count++;
        continue;
      }
    }
    if (count < max) {
      out[count].first = (int)i;
      out[count].count = 1;
      out[count].attention = k->attention;
      out[count].mlp = k->mlp;
      out[count].mtp = k->mtp;
      out[count].ffn_size = nd_layer_ffn_size(m, (int)i);
    }
    count++;
  }
  return count;
}
