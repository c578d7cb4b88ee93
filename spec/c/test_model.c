/*
** test_model.c -- the model core without Lua: parameter totals of models built by hand,
** the layer stack and groups, and validation messages. Exits non-zero on the first failure.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/model.h"

static int failures = 0;

#define CHECK(cond, ...) \
  do { if (!(cond)) { fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
                      fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } } \
  while (0)

#define CHECK_EQ(got, want, what) \
  CHECK((got) == (want), "%s: got %lld, want %lld", what, (long long)(got), (long long)(want))

static void llama31_8b (nd_model_spec *m) {
  nd_model_init(m);
  strcpy(m->name, "llama3.1-8b");
  strcpy(m->family, "llama");
  m->hidden_size = 4096; m->num_layers = 32; m->num_heads = 32; m->num_kv_heads = 8;
  m->head_dim = 128; m->ffn_size = 14336; m->vocab_size = 128256; m->max_position = 131072;
  nd_model_default_stack(m);
}

static void deepseek_v3 (nd_model_spec *m) {
  int i;
  nd_model_init(m);
  strcpy(m->name, "deepseek-v3");
  m->hidden_size = 7168; m->num_layers = 61; m->num_heads = 128; m->num_kv_heads = 128;
  m->head_dim = 192; m->ffn_size = 18432; m->vocab_size = 129280;
  m->q_lora_rank = 1536; m->kv_lora_rank = 512; m->qk_nope_head_dim = 128;
  m->qk_rope_head_dim = 64; m->v_head_dim = 128;
  m->num_experts = 256; m->top_k = 8; m->moe_ffn_size = 2048;
  m->num_shared_experts = 1; m->shared_ffn_size = 2048; m->router_bias = 1;
  m->mtp_layers = 1;
  nd_model_default_stack(m);
  for (i = 0; i < 3; i++) m->layer[i].mlp = ND_MLP_DENSE;  /* first_k_dense_replace */
}

static void test_llama (void) {
  nd_model_spec m;
  nd_params p;
  nd_layer_buckets lp;
  nd_layer_group g[4];
  char err[256];
  llama31_8b(&m);
  CHECK(nd_model_validate(&m, err, sizeof err) == 0, "llama validate: %s", err);
  nd_model_params(&m, &p);
  CHECK_EQ(p.total, INT64_C(8030261248), "llama3.1-8b total");
  CHECK_EQ(p.active, p.total, "llama3.1-8b active");
  CHECK_EQ(p.total_with_mtp, p.total, "llama3.1-8b with mtp");
  CHECK_EQ(p.embedding, INT64_C(525336576), "llama3.1-8b embedding");
  CHECK_EQ(p.head, INT64_C(525336576), "llama3.1-8b head");
  CHECK_EQ(p.attention, 32 * INT64_C(41943040), "llama3.1-8b attention");
  CHECK_EQ(p.norms, 32 * 2 * 4096 + 4096, "llama3.1-8b norms");
  CHECK_EQ(p.embedding + p.attention + p.dense_mlp + p.routed_experts + p.shared_experts
           + p.norms + p.router + p.head, p.total, "llama3.1-8b breakdown sums to total");
  CHECK(nd_layer_params(&m, 0, &lp) == 0, "layer 0 exists");
  CHECK_EQ(lp.dense_mlp, INT64_C(3) * 4096 * 14336, "llama3.1-8b layer mlp");
  CHECK(nd_layer_params(&m, 32, &lp) == -1, "layer 32 is out of range");
  CHECK(nd_layer_params(&m, -1, &lp) == -1, "layer -1 is out of range");
  CHECK_EQ(nd_model_groups(&m, g, 4), 1, "llama groups");
  CHECK(g[0].first == 0 && g[0].count == 32 && !g[0].mtp, "llama group 0 is all layers");
  CHECK(strcmp(nd_layer_kind_name(g[0].attention, g[0].mlp), "dense") == 0,
        "llama kind is %s", nd_layer_kind_name(g[0].attention, g[0].mlp));
  m.tie_embeddings = 1;
  nd_model_params(&m, &p);
  CHECK_EQ(p.total, INT64_C(8030261248) - INT64_C(525336576), "tied llama drops the head");
  CHECK_EQ(p.head, 0, "tied head");
}

static void test_deepseek (void) {
  nd_model_spec m;
  nd_params p;
  nd_layer_buckets lp;
  nd_layer_group g[8];
  char err[256];
  int n;
  deepseek_v3(&m);
  CHECK(nd_model_validate(&m, err, sizeof err) == 0, "deepseek validate: %s", err);
  nd_model_params(&m, &p);
  CHECK_EQ(p.total, INT64_C(671026419200), "deepseek-v3 total (main model)");
  CHECK_EQ(p.active, INT64_C(37552297472), "deepseek-v3 active");
  CHECK_EQ(p.mtp, INT64_C(11610068224), "deepseek-v3 MTP module");
  CHECK_EQ(p.total_with_mtp, p.total + p.mtp, "deepseek-v3 total with MTP");
  n = nd_model_groups(&m, g, 8);
  CHECK_EQ(n, 3, "deepseek-v3 groups");
  CHECK(g[0].first == 0 && g[0].count == 3 && g[0].mlp == ND_MLP_DENSE && !g[0].mtp,
        "group 0: 3 dense layers from 0");
  CHECK(g[1].first == 3 && g[1].count == 58 && g[1].mlp == ND_MLP_MOE && !g[1].mtp,
        "group 1: 58 MoE layers from 3");
  CHECK(g[2].first == 61 && g[2].count == 1 && g[2].mlp == ND_MLP_MOE && g[2].mtp,
        "group 2: 1 MTP MoE layer at 61");
  CHECK(strcmp(nd_layer_kind_name(g[1].attention, g[1].mlp), "mla-moe") == 0,
        "deepseek kind is %s", nd_layer_kind_name(g[1].attention, g[1].mlp));
  CHECK_EQ(nd_model_groups(&m, g, 1), 3, "groups count even when out is short");
  CHECK(g[0].count == 3, "first group still right with max 1");
  /* the MLA buckets of one layer */
  nd_layer_params(&m, 10, &lp);
  CHECK_EQ(lp.attention_replicated, INT64_C(7168) * 1536 + INT64_C(7168) * 576,
           "MLA down-projections");
  CHECK_EQ(lp.attention + lp.attention_replicated + (lp.norms - 2 * 7168),
           INT64_C(187107328), "MLA attention with its latent norms");
  CHECK_EQ(lp.routed_experts, INT64_C(256) * 3 * 7168 * 2048, "routed experts");
  CHECK_EQ(lp.routed_active, INT64_C(8) * 3 * 7168 * 2048, "active routed experts");
  CHECK_EQ(lp.router, INT64_C(7168) * 256 + 256, "router with score-correction bias");
  nd_layer_params(&m, 61, &lp);
  CHECK_EQ(lp.mtp_proj, INT64_C(2) * 7168 * 7168, "MTP eh_proj");
}

/* Megatron GPT: learned positions, LayerNorm with biases, 4h MLP, tied head. */
static void test_gpt3 (void) {
  nd_model_spec m;
  nd_params p;
  char err[256];
  int64_t l = 96, h = 12288, narayanan;
  nd_model_init(&m);
  strcpy(m.name, "gpt3-175b");
  m.hidden_size = h; m.num_layers = l; m.num_heads = 96; m.num_kv_heads = 96;
  m.head_dim = 128; m.ffn_size = 4 * h; m.vocab_size = 51200; m.max_position = 2048;
  m.position = ND_POS_LEARNED; m.position_count = 2048; m.tie_embeddings = 1;
  m.qkv_bias = m.o_bias = m.mlp_bias = 1; m.norm = ND_NORM_LAYER; m.gated_mlp = 0;
  nd_model_default_stack(&m);
  CHECK(nd_model_validate(&m, err, sizeof err) == 0, "gpt3 validate: %s", err);
  nd_model_params(&m, &p);
  /* 12lh^2 (1 + 13/(12h) + (V+s)/(12lh)), written without division; the final norm
     (2h) is the only term the paper's formula leaves out */
  narayanan = 12 * l * h * h + 13 * l * h + (51200 + 2048) * h;
  CHECK_EQ(p.total, narayanan + 2 * h, "gpt3-175b vs Narayanan");
}

/*
** A small Nemotron-H-style stack by hand: a Mamba-2 layer, an attention-only layer and an
** MLP-only layer; each has one norm (half of norms_per_layer 2 per sublayer).
*/
static void test_hybrid (void) {
  nd_model_spec m;
  nd_layer_buckets b;
  nd_params p;
  nd_layer_group g[4];
  int64_t h = 1024, inner = 32 * 64, bc = 2 * 4 * 128, mamba;
  nd_model_init(&m);
  strcpy(m.name, "hybrid");
  m.hidden_size = h; m.num_layers = 3; m.num_heads = 8; m.num_kv_heads = 2; m.head_dim = 128;
  m.ffn_size = 4096; m.vocab_size = 1000; m.gated_mlp = 0;
  m.mamba_heads = 32; m.mamba_head_dim = 64; m.mamba_state = 128; m.mamba_groups = 4;
  m.mamba_conv = 4; m.mamba_chunk = 128; m.mamba_conv_bias = 1;
  nd_model_default_stack(&m);
  m.layer[0].attention = ND_ATTN_MAMBA; m.layer[0].mlp = ND_MLP_NONE;
  m.layer[1].mlp = ND_MLP_NONE;
  m.layer[2].attention = ND_ATTN_NONE;
  CHECK(nd_model_validate(&m, NULL, 0) == 0, "hybrid stack validates");
  /* in_proj to z, x, B, C, dt; conv weights and bias over x, B, C; dt_bias, A_log, D;
     the gated norm; out_proj */
  mamba = h * (2 * inner + bc + 32) + (inner + bc) * 5 + 3 * 32 + inner + inner * h;
  nd_layer_params(&m, 0, &b);
  CHECK_EQ(b.attention, mamba, "mamba mixer");
  CHECK_EQ(b.norms, h, "one norm on a mixer-only layer");
  CHECK_EQ(b.dense_mlp, 0, "no MLP on a mixer-only layer");
  nd_layer_params(&m, 1, &b);
  CHECK_EQ(b.attention, 2 * h * 8 * 128 + 2 * h * 2 * 128, "attention-only layer");
  CHECK_EQ(b.dense_mlp, 0, "no MLP on an attention-only layer");
  nd_layer_params(&m, 2, &b);
  CHECK_EQ(b.attention, 0, "no attention on an MLP-only layer");
  CHECK_EQ(b.dense_mlp, 2 * h * 4096, "two-matrix MLP");
  CHECK_EQ(b.norms, h, "one norm on an MLP-only layer");
  nd_model_params(&m, &p);
  CHECK_EQ(p.total, mamba + 2 * h * 8 * 128 + 2 * h * 2 * 128 + 2 * h * 4096 + 3 * h
                    + 2 * 1000 * h + h, "hybrid total");
  CHECK(nd_model_groups(&m, g, 4) == 3, "three groups");
  CHECK(strcmp(nd_layer_kind_name(g[0].attention, g[0].mlp), "mamba") == 0, "mamba name");
  CHECK(strcmp(nd_layer_kind_name(g[1].attention, g[1].mlp), "attention") == 0,
        "attention-only name");
  CHECK(strcmp(nd_layer_kind_name(g[2].attention, g[2].mlp), "mlp") == 0, "mlp-only name");
  CHECK(strcmp(nd_layer_kind_name(ND_ATTN_NONE, ND_MLP_NONE), "identity") == 0,
        "a layer with neither sublayer is an identity");
}

/* Nemotron NAS blocks: per-layer MLP widths, a layer without attention between them */
static void test_nas (void) {
  nd_model_spec m;
  nd_layer_buckets b;
  nd_layer_group g[4];
  int64_t h = 1024, attn = 2 * h * 8 * 128 + 2 * h * 2 * 128;
  llama31_8b(&m);
  m.hidden_size = h; m.num_layers = 3; m.num_heads = 8; m.num_kv_heads = 2; m.ffn_size = 4096;
  m.vocab_size = 1000;
  nd_model_default_stack(&m);
  m.layer[1].ffn_size = 512;                                 /* its own width */
  m.layer[2].attention = ND_ATTN_NONE; m.layer[2].ffn_size = 512;
  CHECK(nd_model_validate(&m, NULL, 0) == 0, "NAS stack validates");
  CHECK_EQ(nd_layer_ffn_size(&m, 0), 4096, "layer 0 takes the spec's width");
  CHECK_EQ(nd_layer_ffn_size(&m, 1), 512, "layer 1 has its own");
  nd_layer_params(&m, 0, &b);
  CHECK_EQ(b.dense_mlp, 3 * h * 4096, "the spec's width, gated");
  nd_layer_params(&m, 1, &b);
  CHECK_EQ(b.dense_mlp, 3 * h * 512, "the layer's own width");
  CHECK_EQ(b.attention, attn, "its attention");
  CHECK(!nd_layer_kind_equal(&m.layer[0], &m.layer[1]), "another width is another kind");
  CHECK(nd_model_groups(&m, g, 4) == 3, "widths split the groups: %d",
        nd_model_groups(&m, g, 4));
  CHECK_EQ(g[0].ffn_size, 4096, "group width");
  CHECK_EQ(g[1].ffn_size, 512, "group width, own");
  CHECK_EQ(g[2].ffn_size, 512, "MLP-only group width");
  m.layer[2].attention = ND_ATTN_FULL;
  CHECK(nd_model_groups(&m, g, 4) == 2, "equal kinds and widths join");
  CHECK_EQ(g[1].count, 2, "joined group");
  /* an identity block (attention and FFN both no-ops): no parameters, its own group */
  m.layer[2].attention = ND_ATTN_NONE; m.layer[2].mlp = ND_MLP_NONE; m.layer[2].ffn_size = 0;
  CHECK(nd_model_validate(&m, NULL, 0) == 0, "an identity block validates");
  nd_layer_params(&m, 2, &b);
  CHECK_EQ(b.total, 0, "an identity block has no parameters, not even norms");
  CHECK(nd_model_groups(&m, g, 4) == 3, "the identity block is a group of its own");
  CHECK(strcmp(nd_layer_kind_name(g[2].attention, g[2].mlp), "identity") == 0, "its name");
  /* Llama-3.1-Nemotron-Ultra-253B's widest FFN-only block: 2/3 x 39 x 16384 */
  m.layer[2].mlp = ND_MLP_DENSE; m.layer[2].ffn_size = 425984;
  CHECK(nd_model_validate(&m, NULL, 0) == 0, "a 425,984-wide block validates");
  nd_layer_params(&m, 2, &b);
  CHECK_EQ(b.dense_mlp, 3 * h * 425984, "its MLP");
}

static void expect_invalid (nd_model_spec *m, const char *prefix, const char *what) {
  char err[256];
  err[0] = '\0';
  CHECK(nd_model_validate(m, err, sizeof err) == -1, "%s: should be rejected", what);
  CHECK(strncmp(err, prefix, strlen(prefix)) == 0, "%s: message '%s' should start '%s'",
        what, err, prefix);
}

/* Jamba's Mamba-1 mixer and Falcon-H1's attention beside a Mamba-2 mixer, by hand */
static void test_ssm_kinds (void) {
  nd_model_spec m;
  nd_layer_buckets b;
  int64_t h = 1024, E = 2048, N = 16, R = 64, K = 4, inner = 8 * 64, bc = 2 * 128;
  int64_t attn = 2 * h * 8 * 128 + 2 * h * 2 * 128;
  nd_model_init(&m);
  strcpy(m.name, "ssm");
  m.hidden_size = h; m.num_layers = 2; m.num_heads = 8; m.num_kv_heads = 2; m.head_dim = 128;
  m.ffn_size = 4096; m.vocab_size = 1000;
  m.mamba_inner = E; m.mamba_state = N; m.mamba_conv = K; m.mamba_dt_rank = R;
  m.mamba_conv_bias = 1; m.mamba_dt_norms = 1;
  nd_model_default_stack(&m);
  m.layer[0].attention = ND_ATTN_MAMBA1;
  CHECK(nd_model_validate(&m, NULL, 0) == 0, "a Mamba-1 stack validates");
  nd_layer_params(&m, 0, &b);
  /* in_proj (x, z); conv and bias; x_proj to dt, B, C; dt_proj and bias; A_log; D; out */
  CHECK_EQ(b.attention, h * 2 * E + E * K + E + E * (R + 2 * N) + R * E + E + E * N + E + E * h,
           "mamba1 mixer");
  CHECK_EQ(b.norms, 2 * h + R + 2 * N, "two layer norms and the dt, B, C norms");
  CHECK(strcmp(nd_layer_kind_name(ND_ATTN_MAMBA1, ND_MLP_DENSE), "mamba1-dense") == 0,
        "mamba1 name");
  m.mamba_dt_rank = 0;
  expect_invalid(&m, "mamba_dt_rank:", "a Mamba-1 layer without its dt rank");
  m.mamba_dt_rank = R;
  m.layer[0].attention = ND_ATTN_HYBRID;
  expect_invalid(&m, "mamba_heads:", "a hybrid layer without its mixer");
  m.mamba_heads = 8; m.mamba_head_dim = 64; m.mamba_state = 128; m.mamba_groups = 1;
  m.mamba_chunk = 128; m.mamba_norm = 0;
  CHECK(nd_model_validate(&m, NULL, 0) == 0, "a hybrid stack validates");
  nd_layer_params(&m, 0, &b);
  /* attention, then in_proj to z, x, B, C, dt; conv and bias; dt_bias, A_log, D; out_proj;
     no gated norm */
  CHECK_EQ(b.attention, attn + h * (2 * inner + bc + 8) + (inner + bc) * (K + 1) + 3 * 8
                        + inner * h, "attention beside a Mamba-2 mixer");
  CHECK_EQ(b.norms, 2 * h, "the two layer norms, shared by both mixers");
  CHECK(strcmp(nd_layer_kind_name(ND_ATTN_HYBRID, ND_MLP_DENSE), "hybrid-dense") == 0,
        "hybrid name");
}

static void test_validation (void) {
  nd_model_spec m;
  llama31_8b(&m); m.num_kv_heads = 6;
  expect_invalid(&m, "num_kv_heads: must divide num_heads (32), got 6", "kv heads");
  llama31_8b(&m); m.hidden_size = 0;
  expect_invalid(&m, "hidden_size:", "zero hidden");
  llama31_8b(&m); m.name[0] = '\0';
  expect_invalid(&m, "name:", "empty name");
  llama31_8b(&m); m.ffn_size = 0;
  expect_invalid(&m, "ffn_size:", "dense without ffn");
  llama31_8b(&m); m.layer[3].mlp = ND_MLP_MOE;
  expect_invalid(&m, "num_experts:", "moe layer without experts");
  llama31_8b(&m); m.layer[3].attention = ND_ATTN_SLIDING;
  expect_invalid(&m, "sliding_window:", "sliding layer without window");
  llama31_8b(&m); m.layer[3].attention = ND_ATTN_LINEAR;
  expect_invalid(&m, "linear_k_heads:", "linear layer without dims");
  llama31_8b(&m); m.layer[3].mtp = 1;
  expect_invalid(&m, "mtp:", "MTP flag in the body");
  llama31_8b(&m); m.num_layers = ND_MAX_LAYERS + 1;
  expect_invalid(&m, "num_layers:", "too many layers");
  deepseek_v3(&m); m.top_k = 300;
  expect_invalid(&m, "top_k:", "top_k above experts");
  deepseek_v3(&m); m.num_shared_experts = 0;
  expect_invalid(&m, "shared_ffn_size:", "shared width without count");
  deepseek_v3(&m); m.layer[61].attention = ND_ATTN_NONE; m.layer[61].mlp = ND_MLP_NONE;
  expect_invalid(&m, "mlp: MTP layer 61 has neither attention nor an MLP", "identity MTP layer");
  llama31_8b(&m); m.layer[3].ffn_size = (1 << 20) + 1;
  expect_invalid(&m, "ffn_size: layer 3's width must be between 0 and 1048576", "too wide");
  llama31_8b(&m); m.layer[3].attention = ND_ATTN_MAMBA;
  expect_invalid(&m, "mamba_heads:", "mamba layer without its shape");
  llama31_8b(&m); m.index_topk = 2048;
  expect_invalid(&m, "index_topk:", "a sparse-attention indexer without MLA layers");
  llama31_8b(&m); m.position = ND_POS_LEARNED;
  expect_invalid(&m, "position_count:", "learned positions without a count");
  llama31_8b(&m); m.layer[3].ffn_size = -1;
  expect_invalid(&m, "ffn_size: layer 3's width must be between 0 and", "negative layer width");
  llama31_8b(&m); m.layer[3].mlp = ND_MLP_NONE; m.layer[3].ffn_size = 512;
  expect_invalid(&m, "ffn_size: layer 3 has its own MLP width but its MLP is none",
                 "a width on a layer without MLP");
  llama31_8b(&m); m.ffn_size = 0; m.layer[0].ffn_size = 512;
  expect_invalid(&m, "ffn_size: dense layers need a width of at least 1 (layer 1",
                 "a dense layer with neither width");
  {
    int i;
    llama31_8b(&m);
    for (i = 0; i < 32; i++) m.layer[i].ffn_size = 256 * (i + 1);
    CHECK(nd_model_validate(&m, NULL, 0) == 0, "32 distinct kinds validate");
    m.num_layers = 33; m.layer[32] = m.layer[31]; m.layer[32].ffn_size = 256 * 33;
    expect_invalid(&m, "ffn_size: more than 32 distinct layer kinds", "33 kinds");
  }
}

/* The kinds numbered once per model: by first use, with the runs of one kind; a stack
   changed after numbering is refused until numbered again. */
static void test_kinds (void) {
  nd_model_spec m;
  int i;
  deepseek_v3(&m);  /* 3 dense, 58 MoE, 1 MTP layer */
  CHECK_EQ(m.kinds.count, 0, "a new stack is not numbered");
  nd_model_number_kinds(&m);
  CHECK_EQ(m.kinds.count, 3, "dense, MoE, MTP");
  for (i = 0; i < 62; i++)
    CHECK_EQ(m.kinds.of[i], i < 3 ? 0 : i < 61 ? 1 : 2, "layer kind by first use");
  CHECK_EQ(m.kinds.run_end[0], 3, "the dense run");
  CHECK_EQ(m.kinds.run_end[2], 3, "the dense run, from its last layer");
  CHECK_EQ(m.kinds.run_end[3], 61, "the MoE run");
  CHECK_EQ(m.kinds.run_end[61], 62, "the MTP run");
  CHECK(nd_model_validate(&m, NULL, 0) == 0, "a numbered stack validates");
  m.layer[10].mlp = ND_MLP_DENSE;
  expect_invalid(&m, "layer: the kinds were numbered before the stack changed",
                 "a stack changed after numbering");
  nd_model_number_kinds(&m);
  CHECK(nd_model_validate(&m, NULL, 0) == 0, "numbered again, it validates");
  CHECK_EQ(m.kinds.of[10], 0, "a dense layer among the MoE ones takes the dense kind");
  CHECK_EQ(m.kinds.run_end[3], 10, "it splits the MoE run");
  CHECK_EQ(m.kinds.run_end[10], 11, "into three runs");
  CHECK_EQ(m.kinds.run_end[11], 61, "the rest of the MoE run");
  nd_model_default_stack(&m);
  CHECK_EQ(m.kinds.count, 0, "a new default stack clears the numbering");
  llama31_8b(&m);
  for (i = 0; i < 32; i++) m.layer[i].ffn_size = 256 * (i + 1);
  m.num_layers = 33; m.layer[32] = m.layer[31]; m.layer[32].ffn_size = 256 * 33;
  nd_model_number_kinds(&m);
  CHECK_EQ(m.kinds.count, -1, "33 kinds are more than can be numbered");
}

static void test_names (void) {
  int k;
  for (k = 0; k < ND_ATTN_KINDS; k++)
    CHECK(nd_attention_kind(nd_attention_name(k)) == k, "attention name %d round-trips", k);
  for (k = 0; k < ND_MLP_KINDS; k++)
    CHECK(nd_mlp_kind(nd_mlp_name(k)) == k, "mlp name %d round-trips", k);
  CHECK(nd_attention_kind("bogus") == -1, "unknown attention name");
  CHECK(nd_attention_name(ND_ATTN_KINDS) == NULL, "attention name out of range");
  CHECK(strcmp(nd_layer_kind_name(ND_ATTN_LINEAR, ND_MLP_MOE), "linear-moe") == 0,
        "linear-moe name");
  CHECK(strcmp(nd_layer_kind_name(ND_ATTN_SLIDING, ND_MLP_DENSE), "sliding-dense") == 0,
        "sliding-dense name");
}

/* The derived defaults (nd_model_derive, what the Lua loader used to fill in itself). */
static void test_derive (void) {
  nd_model_spec m;
  char err[256];
  nd_model_init(&m);
  m.hidden_size = 4096; m.num_heads = 32; m.max_position = 2048;
  CHECK(nd_model_derive(&m, 0, err, sizeof err) == 0, "derives: %s", err);
  CHECK(m.num_kv_heads == 32 && m.head_dim == 128, "kv heads = heads, head_dim = hidden/heads");
  CHECK(m.position_count == 0, "RoPE has no position table");
  nd_model_init(&m);
  m.hidden_size = 4096; m.num_heads = 32; m.num_kv_heads = 0; m.head_dim = 64;
  m.position = ND_POS_LEARNED; m.max_position = 2048;
  CHECK(nd_model_derive(&m, ND_GIVEN_KV_HEADS | ND_GIVEN_HEAD_DIM, err, sizeof err) == 0
        && m.num_kv_heads == 0 && m.head_dim == 64 && m.position_count == 2048,
        "given fields kept; a learned table has max_position rows");
  nd_model_init(&m);
  m.hidden_size = 7168; m.num_heads = 128; m.kv_lora_rank = 512;
  m.qk_nope_head_dim = 128; m.qk_rope_head_dim = 64;
  CHECK(nd_model_derive(&m, 0, err, sizeof err) == 0 && m.head_dim == 192,
        "MLA: head_dim = qk_nope + qk_rope");
  nd_model_init(&m);
  m.hidden_size = 1000; m.num_heads = 3;
  CHECK(nd_model_derive(&m, 0, err, sizeof err) != 0
        && strncmp(err, "head_dim: required when num_heads (3) does not divide hidden_size "
                   "(1000)", 70) == 0, "refused, naming head_dim: %s", err);
}

int main (void) {
  test_derive();
  test_llama();
  test_deepseek();
  test_gpt3();
  test_hybrid();
  test_ssm_kinds();
  test_nas();
  test_validation();
  test_kinds();
  test_names();
  if (failures) {
    fprintf(stderr, "test_model: %d check(s) failed\n", failures);
    return EXIT_FAILURE;
  }
  printf("test_model: all checks passed\n");
  return EXIT_SUCCESS;
}
