-- Today's architectures on their real configs: totals against the model cards, the layer
-- stack by kind, FLOPs per token of the new layer kinds worked out by hand, the interleaved
-- dense/MoE fields, and the loader's report of the fields it does not read.
require "ndplan"
local nd = require "ndplan"
local core = require "ndplan.c.estimate"

local check = dofile("spec/support/check.lua")
local B, rel, near, kinds = check.B, check.rel, check.near, check.kinds
local h100 = assert(nd.device("h100"))

local function first_kinds(m, n)
  local out = {}
  for i, g in ipairs(m:layers()) do
    if i > n then break end
    out[i] = g.kind .. " x" .. g.count
  end
  return table.concat(out, ", ")
end

-- Llama 4's vision encoder (not costed by ndplan), from the bundled vision_config: patch
-- embedding (3 x 14 x 14 -> 1408, no bias), class and 577 position embeddings, two
-- LayerNorms, 34 layers (q/k/v/o and a 1408 -> 5632 -> 1408 MLP, all biased, two LayerNorms),
-- the pixel-shuffle MLP (5632 -> 4096 -> 4096) and the projector (4096 -> 5120), no biases.
local function llama4_vision()
  local d, f = 1408, 5632
  local layer = 4 * (d * d + d) + (d * f + f) + (f * d + d) + 4 * d
  return 3 * 14 * 14 * d + d + 577 * d + 4 * d + 34 * layer + f * 4096 + 4096 * 4096
         + 4096 * 5120
end

describe("model cards", function()
  it("Llama-4-Scout: 109B total with the vision encoder, 17B active (card)", function()
    local p = assert(nd.model("llama4-scout")):params()
    near(p.total + llama4_vision(), 109 * B, 0.005, "text + vision")
    assert.is_true(math.abs(p.active - 17 * B) < 0.5 * B, "17B active, rounded")
  end)

  it("Llama-4-Maverick: 400B total, 17B active (card)", function()
    local p = assert(nd.model("llama4-maverick")):params()
    near(p.total + llama4_vision(), 400 * B, 0.005, "text + vision")
    near(p.total, 400 * B, 0.005, "text tower")
    assert.is_true(math.abs(p.active - 17 * B) < 0.5 * B, "17B active, rounded")
  end)

  it("Gemma-2-9B: 9.24B (technical report, Table 2)", function()
    local m = assert(nd.model("gemma2-9b"))
    near(m:params().total, 9.24 * B, 0.005, "total")
    assert.is_true(m.tie_embeddings)   -- the family's default: the config does not say
    assert.is_true(m.gated_mlp)        -- gelu_pytorch_tanh on a gate: three matrices
    assert.are.equal(0, m:params().breakdown.head)
  end)

  it("Nemotron-H-56B: '56B model parameters' (card, to the billion)", function()
    local p = assert(nd.model("nemotron-h-56b")):params()
    -- 56.32B: 0.58% above the card's rounded figure, inside its rounding
    assert.is_true(math.abs(p.total - 56 * B) < 0.5 * B, ("got %.3fB"):format(p.total / B))
    assert.are.equal(p.total, p.active)
  end)

  it("MiniMax-M1: 456B total, 45.9B activated without the embedding and head (card)", function()
    local p = assert(nd.model("minimax-m1")):params()
    near(p.total, 456 * B, 0.005, "total")
    near(p.active - p.breakdown.embedding - p.breakdown.head, 45.9 * B, 0.005, "activated")
  end)
end)

describe("model cards, continued", function()
  it("DeepSeek-V3.2-Exp: 685B with the MTP module (card, as V3's 671B + 14B)", function()
    local p = assert(nd.model("deepseek-v3.2")):params()
    near(p.total_with_mtp, 685 * B, 0.005, "with MTP")
  end)

  -- zai-org/GLM-4.5 README.md: GLM-4.5 "355 billion total parameters with 32 billion active",
  -- GLM-4.5-Air "106 billion total parameters and 12 billion active". Both cards leave out
  -- the embedding and head; GLM-4.5's counts its MTP layer (a full MoE layer), Air's does not
  -- (with it Air would be 108.0B, 1.9% over).
  it("GLM-4.5: 355B total with the MTP layer, 32B active, both without the embedding and head",
     function()
    local p = assert(nd.model("glm4.5")):params()
    local outer = p.breakdown.embedding + p.breakdown.head
    near(p.total_with_mtp - outer, 355 * B, 0.005, "total")
    near(p.active - outer, 32 * B, 0.005, "active")
    assert.is_true(rel(p.total, 355 * B) > 0.005)  -- the main model alone: 352.8B, 0.62% under
  end)

  it("GLM-4.5-Air: 106B total, 12B active (to the billion), without the embedding and head",
     function()
    local p = assert(nd.model("glm4.5-air")):params()
    local outer = p.breakdown.embedding + p.breakdown.head
    near(p.total - outer, 106 * B, 0.005, "total")
    assert.is_true(math.abs(p.active - outer - 12 * B) < 0.5 * B, "12B active, rounded")
  end)
end)

describe("layer stacks", function()
  it("Llama-4-Scout: MoE everywhere, chunked attention except every 4th layer", function()
    local m = assert(nd.model("llama4-scout"))
    assert.are.same({["sliding-moe"] = 36, moe = 12}, kinds(m))
    assert.are.equal("sliding-moe x3, moe x1, sliding-moe x3", first_kinds(m, 3))
    assert.is_true(m.chunked_window)
    assert.are.equal(8192, m.sliding_window)
    assert.are.equal(1, m.num_shared_experts)
    assert.are.equal(8192, m.shared_ffn_size)
  end)

  it("Llama-4-Maverick: dense and MoE alternating from a dense layer 0", function()
    local m = assert(nd.model("llama4-maverick"))
    assert.are.same({["sliding-dense"] = 24, ["sliding-moe"] = 12, moe = 12}, kinds(m))
    assert.are.equal("sliding-dense x1, sliding-moe x1, sliding-dense x1, moe x1",
                     first_kinds(m, 4))
    assert.are.equal(16384, m.ffn_size)   -- intermediate_size_mlp
    assert.are.equal(8192, m.moe_ffn_size)
  end)

  it("Gemma-2-9B: sliding and global alternating from layer 0, four norms each", function()
    local m = assert(nd.model("gemma2-9b"))
    assert.are.same({["sliding-dense"] = 21, dense = 21}, kinds(m))
    assert.are.equal("sliding-dense x1, dense x1", first_kinds(m, 2))
    assert.are.equal(4, m.norms_per_layer)
  end)

  it("Nemotron-H-56B: 54 Mamba-2, 10 attention and 54 MLP layers (the model's blog)", function()
    local m = assert(nd.model("nemotron-h-56b"))
    assert.are.same({mamba = 54, attention = 10, mlp = 54}, kinds(m))
    assert.are.equal("mamba x1, mlp x1, mamba x1, mlp x1, mamba x1, mlp x1, mamba x1, "
                     .. "attention x1", first_kinds(m, 8))
    assert.is_false(m.gated_mlp)  -- squared ReLU
  end)
end)

describe("more families", function()
  it("Phi-3-mini: '3.8B parameters' (card, rounded), every layer sliding", function()
    -- microsoft/Phi-3-mini-4k-instruct config.json
    local m = assert(nd.model({model_type = "phi3", hidden_size = 3072,
      intermediate_size = 8192, num_hidden_layers = 32, num_attention_heads = 32,
      num_key_value_heads = 32, vocab_size = 32064, max_position_embeddings = 4096,
      original_max_position_embeddings = 4096, sliding_window = 2047,
      tie_word_embeddings = false, resid_pdrop = 0.0, embd_pdrop = 0.0,
      attention_bias = false, hidden_act = "silu", bos_token_id = 1, eos_token_id = 32000}))
    assert.are.same({}, m:warnings())
    assert.is_true(math.abs(m:params().total - 3.8 * B) < 0.05 * B)
    assert.are.same({["sliding-dense"] = 32}, kinds(m))
  end)

  it("Granite 4 (H): Mamba-2 and attention from layer_types, experts and an ungated shared MLP",
     function()
    local cfg = {model_type = "granitemoehybrid", hidden_size = 1536, num_hidden_layers = 4,
      num_attention_heads = 12, num_key_value_heads = 4, vocab_size = 100352,
      intermediate_size = 512, num_local_experts = 8, num_experts_per_tok = 2,
      shared_intermediate_size = 1024, layer_types = {"mamba", "mamba", "mamba", "attention"},
      mamba_n_heads = 48, mamba_d_head = "auto", mamba_d_state = 128, mamba_n_groups = 1,
      mamba_d_conv = 4, mamba_expand = 2, mamba_chunk_size = 256, mamba_conv_bias = true,
      mamba_proj_bias = false, embedding_multiplier = 12, logits_scaling = 6,
      residual_multiplier = 0.22, attention_multiplier = 0.0078,
      position_embedding_type = "nope", tie_word_embeddings = true}
    local m = assert(nd.model(cfg))
    assert.are.same({}, m:warnings())
    assert.are.same({["mamba-moe"] = 3, moe = 1}, kinds(m))
    assert.are.equal(64, m.mamba_head_dim)  -- "auto": 2 x 1536 / 48
    assert.are.same({1, 1024, false}, {m.num_shared_experts, m.shared_ffn_size,
                                       m.shared_expert_gate})
    cfg.num_local_experts, cfg.num_experts_per_tok = 0, nil  -- no experts: the MLP is dense
    m = assert(nd.model(cfg))
    assert.are.same({["mamba-dense"] = 3, dense = 1}, kinds(m))
    assert.are.equal(1024, m.ffn_size)
  end)

end)

describe("MiniMax's attn_type_list", function()
  it("puts a softmax layer after every seven lightning layers, priced as linear", function()
    local m = assert(nd.model("minimax-m1"))
    assert.are.same({["linear-moe"] = 70, moe = 10}, kinds(m))
    assert.are.equal("linear-moe x7, moe x1, linear-moe x7", first_kinds(m, 3))
    assert.are.same({64, 64, 128, 128, 0}, {m.linear_k_heads, m.linear_v_heads,
                                            m.linear_k_dim, m.linear_v_dim, m.conv_kernel})
  end)
end)

describe("FLOPs per token of one layer, by hand", function()
  local m = assert(nd.model("nemotron-h-56b"))
  local job = {devices = 1, global_batch = 1, seq_len = 4096}

  local function layer(i, strategy, j)
    return assert(core.layer(m, h100, j or job, strategy or {}, i))
  end

  it("a Mamba-2 mixer: projections, conv and the chunked scan", function()
    -- h 8192, 256 heads of 64 (inner 16384), 8 groups of state 256, conv 4, chunk 128:
    -- in_proj 2h(2*16384 + 2*8*256 + 256) = 608,174,080; out_proj 2*16384*h = 268,435,456;
    -- conv 2*4*(16384 + 4096) = 163,840; scan 2*128*8*256 (C.B^T) + 2*128*256*64 (its
    -- masked product with x) + 2 * 2*256*256*64 (chunk states, output from the state)
    -- = 21,495,808
    assert.are.equal(898269184, layer(0).flops_token)
    -- a sequence shorter than the chunk is one chunk: Q = 64
    local short = layer(0, {}, {devices = 1, global_batch = 1, seq_len = 64})
    assert.are.equal(898269184 - 2 * 64 * 8 * 256 - 2 * 64 * 256 * 64, short.flops_token)
  end)

  it("a Mamba-2 mixer keeps its inputs and outputs, not the scan's chunk states", function()
    -- bf16, T = 4096, no TP: the norm input and the mixer input (2 x 2Th), in_proj's output
    -- (2 x 16384 + 2 x 8 x 256 + 256 = 37,120 wide), the conv output (20,480), the scan and
    -- gated-norm outputs (2 x 16384), each 2 bytes, and fp32 dt and its cumulative decay
    -- (8 bytes x 256 heads). The chunk states (fp32, 256 x 64 x 256 per head set every 128
    -- tokens: 512 MiB here) are recomputed by the scan's backward, not kept.
    local T = 4096
    local want = 2 * 2 * T * 8192 + 2 * T * (37120 + 20480 + 2 * 16384) + 8 * T * 256
    assert.are.equal(want, layer(0).activations.none)
  end)

  it("an attention-only and an MLP-only layer", function()
    -- q 8192 and k, v 1024 wide: 2h(8192 + 2048) + 2*8192*h, plus QK^T and AV over s/2
    -- keys: 2 * 2048 * 64 heads * (128 + 128)
    assert.are.equal(369098752, layer(7).flops_token)
    assert.are.equal(2 * 2 * 8192 * 32768, layer(1).flops_token)  -- two matrices
  end)

  it("one TP collective per sublayer; full recompute keeps only the layer input", function()
    local st = {tp = 8, sp = true}
    local j = {devices = 8, global_batch = 8, seq_len = 4096}
    local mamba, mlp, attention = layer(0, st, j), layer(1, st, j), layer(7, st, j)
    local dense = assert(core.layer(assert(nd.model{model_type = "llama", hidden_size = 8192,
      num_hidden_layers = 2, num_attention_heads = 64, intermediate_size = 32768,
      vocab_size = 1000}), h100, j, st, 0))  -- attention and MLP in one layer, same width
    assert.is_true(mamba.tp_comm_s > 0)
    assert.is_true(rel(mamba.tp_comm_s, mlp.tp_comm_s) < 1e-12)
    assert.is_true(rel(mamba.tp_comm_s, attention.tp_comm_s) < 1e-12)
    assert.is_true(rel(2 * mamba.tp_comm_s, dense.tp_comm_s) < 1e-12)
    local a = mamba.activations
    assert.are.equal(2 * 4096 * 8192 / 8, a.full)  -- bf16 input, split by SP
    assert.is_true(a.none > a.full and mamba.recompute_s.full > 0)
    -- CP: the mixer's two all-to-alls (sequence split <-> head split), none on an MLP
    local cj = {devices = 16, global_batch = 8, seq_len = 4096}
    local cst = {tp = 8, sp = true, cp = 2}
    assert.is_true(layer(0, cst, cj).cp_comm_s > 0)
    assert.are.equal(0, layer(1, cst, cj).cp_comm_s)
    -- selective "act" drops the conv's SiLU output: bf16, x, B and C wide, split by TP
    st.selective_ops = {"act"}
    local act = layer(0, st, j).activations
    assert.are.equal(2 * 4096 * (16384 + 2 * 8 * 256) / 8, a.none - act.selective)
  end)

  it("Llama 4's chunked layers see half a chunk of keys past the chunk", function()
    local scout = assert(nd.model("llama4-scout"))
    local function f(i, s)
      return assert(core.layer(scout, h100, {devices = 1, global_batch = 1, seq_len = s}, {},
                               i)).flops_token
    end
    assert.are.equal(f(3, 8192), f(0, 8192))   -- one chunk: causal like global attention
    -- at 32768 tokens a global query sees 16384 keys, a chunked one 4096
    assert.are.equal(2 * (16384 - 4096) * 40 * 256, f(3, 32768) - f(0, 32768))
  end)
end)

describe("DeepSeek sparse attention (V3.2), by hand", function()
  local v3 = assert(nd.model("deepseek-v3"))
  local cfg = nd.json.load_file("examples/models/deepseek-v3.json")
  cfg.model_type, cfg.index_n_heads, cfg.index_head_dim, cfg.index_topk =
    "deepseek_v32", 64, 128, 2048
  local v32 = assert(nd.model(cfg))

  it("adds the indexer to every MLA layer, replicated across TP", function()
    -- wq_b from the 1536-wide q latent to 64 x 128, wk 7168 -> 128, its LayerNorm (2 x 128),
    -- weights_proj 7168 -> 64
    local per_layer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert.are.equal(61 * per_layer, v32:params().total - v3:params().total)
    local job = {devices = 8, global_batch = 8, seq_len = 4096}
    local a = assert(core.layer(v3, h100, job, {tp = 8, sp = true}, 3)).params
    local b = assert(core.layer(v32, h100, job, {tp = 8, sp = true}, 3)).params
    assert.are.equal(per_layer, b - a)  -- whole on every TP rank
  end)

  it("prices the indexer over every earlier key and the attention over the top-k", function()
    local job = {devices = 1, global_batch = 1, seq_len = 4096}
    local function f(m) return assert(core.layer(m, h100, job, {}, 3)).flops_token end
    -- indexer projections 2 x (1536 x 64 x 128 + 7168 x 128 + 7168 x 64); scoring: 2048
    -- earlier keys on average, 2 x 64 x 128 + 2 x 64 each; attention: 2048 - 2048^2/8192 =
    -- 1536 keys per query instead of 2048, each 2 x 128 heads x (192 + 128)
    local indexer = 2 * (1536 * 64 * 128 + 7168 * 128 + 7168 * 64) + 2048 * (2 * 64 * 128 + 2 * 64)
    assert.are.equal(indexer + 2 * (1536 - 2048) * 128 * 320, f(v32) - f(v3))
    -- shorter than the top-k, every earlier key is kept: the attention is unchanged
    job.seq_len = 2048
    assert.are.equal(2 * (1536 * 64 * 128 + 7168 * 128 + 7168 * 64)
                     + 1024 * (2 * 64 * 128 + 2 * 64), f(v32) - f(v3))
  end)
end)

describe("interleaved dense and MoE stacks", function()
  local base = {hidden_size = 1024, num_hidden_layers = 8, num_attention_heads = 8,
                vocab_size = 1000, intermediate_size = 4096, moe_intermediate_size = 512,
                num_experts_per_tok = 2}
  local function with(t)
    local cfg = {}
    for k, v in pairs(base) do cfg[k] = v end
    for k, v in pairs(t) do cfg[k] = v end
    return assert(nd.model(cfg))
  end
  local function stack(m)
    local out = {}
    for _, g in ipairs(m:layers()) do
      for _ = 1, g.count do out[#out + 1] = g.mlp == "moe" and "E" or "d" end
    end
    return table.concat(out)
  end

  it("reads each family's spelling", function()
    assert.are.equal("dddEEEEE", stack(with{model_type = "deepseek_v3", n_routed_experts = 8,
                                            first_k_dense_replace = 3}))
    -- HF's rule: MoE from first_k_dense_replace on, where the index is a multiple of the freq
    assert.are.equal("ddddEdEd", stack(with{model_type = "deepseek_v3", n_routed_experts = 8,
                                            first_k_dense_replace = 3, moe_layer_freq = 2}))
    assert.are.equal("dEdEdEdd", stack(with{model_type = "deepseek_v3", n_routed_experts = 8,
      moe_layer_freq = {0, 1, 0, 1, 0, 1, 0, 0}}))
    assert.are.equal("dEdEddEE", stack(with{model_type = "qwen2_moe", num_experts = 8,
      decoder_sparse_step = 1, mlp_only_layers = {0, 2, 4, 5}}))
    assert.are.equal("dEdEdEdE", stack(with{model_type = "qwen3_moe", num_experts = 8,
                                            decoder_sparse_step = 2}))
    assert.are.equal("dEdEdEdE", stack(with{model_type = "llama4_text", num_local_experts = 8,
      intermediate_size = 512, intermediate_size_mlp = 4096, interleave_moe_layer_step = 2}))
    assert.are.equal("EddEdddE", stack(with{model_type = "llama4_text", num_local_experts = 8,
      intermediate_size = 512, intermediate_size_mlp = 4096, moe_layers = {0, 3, 7}}))
  end)

  it("gives each family its shared experts", function()
    local llama4 = with{model_type = "llama4_text", num_local_experts = 8,
                        intermediate_size = 512, intermediate_size_mlp = 4096}
    assert.are.same({1, 512, false}, {llama4.num_shared_experts, llama4.shared_ffn_size,
                                      llama4.shared_expert_gate})
    local ds = with{model_type = "deepseek_v3", n_routed_experts = 8, n_shared_experts = 2}
    assert.are.same({2, 1024}, {ds.num_shared_experts, ds.shared_ffn_size})
    local qwen = with{model_type = "qwen2_moe", num_experts = 8,
                      shared_expert_intermediate_size = 2048}
    assert.are.same({1, 2048, true}, {qwen.num_shared_experts, qwen.shared_ffn_size,
                                      qwen.shared_expert_gate})
  end)
end)

describe("the loader's report", function()
  -- moonshotai/Kimi-K2-Instruct and zai-org/GLM-4.5 config.json, every field as published
  -- (quantization_config left out)
  local kimi = {architectures = {"DeepseekV3ForCausalLM"}, model_type = "kimi_k2",
    auto_map = {AutoConfig = "configuration_deepseek.DeepseekV3Config"},
    attention_bias = false, attention_dropout = 0.0, aux_loss_alpha = 0.001,
    bos_token_id = 163584, eos_token_id = 163585, ep_size = 1, first_k_dense_replace = 1,
    hidden_act = "silu", hidden_size = 7168, initializer_range = 0.02,
    intermediate_size = 18432, kv_lora_rank = 512, max_position_embeddings = 131072,
    moe_intermediate_size = 2048, moe_layer_freq = 1, n_group = 1, n_routed_experts = 384,
    n_shared_experts = 1, norm_topk_prob = true, num_attention_heads = 64,
    num_experts_per_tok = 8, num_hidden_layers = 61, num_key_value_heads = 64,
    num_nextn_predict_layers = 0, pretraining_tp = 1, q_lora_rank = 1536,
    qk_nope_head_dim = 128, qk_rope_head_dim = 64, rms_norm_eps = 1e-06,
    rope_theta = 50000.0, routed_scaling_factor = 2.827, scoring_func = "sigmoid",
    seq_aux = true, tie_word_embeddings = false, topk_group = 1, topk_method = "noaux_tc",
    torch_dtype = "bfloat16", transformers_version = "4.48.3", use_cache = true,
    v_head_dim = 128, vocab_size = 163840}
  local glm = {architectures = {"Glm4MoeForCausalLM"}, model_type = "glm4_moe",
    attention_bias = true, attention_dropout = 0.0, pad_token_id = 151329,
    eos_token_id = {151329, 151336, 151338}, head_dim = 128, hidden_act = "silu",
    hidden_size = 5120, partial_rotary_factor = 0.5, initializer_range = 0.02,
    intermediate_size = 12288, max_position_embeddings = 131072,
    moe_intermediate_size = 1536, norm_topk_prob = true, num_attention_heads = 96,
    n_group = 1, topk_group = 1, n_routed_experts = 160, n_shared_experts = 1,
    routed_scaling_factor = 2.5, num_experts_per_tok = 8, first_k_dense_replace = 3,
    num_hidden_layers = 92, num_key_value_heads = 8, rms_norm_eps = 1e-05,
    rope_theta = 1000000, num_nextn_predict_layers = 1, tie_word_embeddings = false,
    torch_dtype = "bfloat16", transformers_version = "4.54.0", use_cache = true,
    use_qk_norm = true, vocab_size = 151552}

  it("gives Kimi-K2 and GLM-4.5 no warning: every field is read or known", function()
    local k = assert(nd.model(kimi))
    assert.are.same({}, k:warnings())
    assert.are.equal("mla-dense x1, mla-moe x60", first_kinds(k, 2))
    local g = assert(nd.model(glm))
    assert.are.same({}, g:warnings())
    assert.is_true(g.qk_norm and g.qkv_bias and not g.o_bias and g.router_bias)
    assert.are.equal(1, g.mtp_layers)
  end)

  it("reads DeepSeek-V3.2's indexer fields, without the unknown-model_type warning", function()
    local cfg = nd.json.load_file("examples/models/deepseek-v3.json")
    cfg.model_type, cfg.index_n_heads, cfg.index_head_dim, cfg.index_topk =
      "deepseek_v32", 64, 128, 2048
    local m = assert(nd.model(cfg))
    assert.are.same({}, m:warnings())
    assert.are.same({64, 128, 2048}, {m.index_heads, m.index_head_dim, m.index_topk})
  end)

  it("names an unknown field, and refuses the model with strict", function()
    local cfg = {model_type = "llama", hidden_size = 1024, num_hidden_layers = 4,
                 num_attention_heads = 8, intermediate_size = 4096, vocab_size = 1000,
                 frobnicate_every = 3}
    local w = assert(nd.model(cfg)):warnings()
    assert.are.same({"frobnicate_every: not read by ndplan for model_type 'llama'; if it"
                     .. " changes the layers, the model is priced without it"}, w)
    local m, err = nd.model(cfg, {strict = true})
    assert.is_nil(m)
    assert.matches("strict: 1 assumption(s): frobnicate_every", err, 1, true)
    cfg.frobnicate_every = nil
    assert.is_truthy(nd.model(cfg, {strict = true}))
    -- nd.estimate and nd.search take strict too, for a model object as well
    local loose = assert(nd.model({model_type = "llama", hidden_size = 1024,
      num_hidden_layers = 4, num_attention_heads = 8, intermediate_size = 4096,
      vocab_size = 1000, frobnicate_every = 3}))
    local args = {model = loose, device = "h100", devices = 8, global_batch = 8,
                  seq_len = 1024, strict = true}
    local r, e = nd.estimate(args)
    assert.is_nil(r)
    assert.matches("frobnicate_every", e, 1, true)
    local ranked, se = nd.search(args)
    assert.is_nil(ranked)
    assert.matches("frobnicate_every", se, 1, true)
    args.strict = nil
    assert.is_truthy(nd.estimate(args))
  end)

  it("reads Nemotron-3's E (MoE-only) layers", function()
    local m = assert(nd.model({model_type = "nemotron_h", hidden_size = 1024,
      num_hidden_layers = 4, num_attention_heads = 8, num_key_value_heads = 2,
      head_dim = 128, vocab_size = 1000, hybrid_override_pattern = "ME*E",
      mamba_num_heads = 32, mamba_head_dim = 64, ssm_state_size = 128, n_groups = 8,
      conv_kernel = 4, n_routed_experts = 16, num_experts_per_tok = 4,
      moe_intermediate_size = 256, moe_shared_expert_intermediate_size = 512}))
    assert.are.same({mamba = 1, ["moe-mlp"] = 2, attention = 1}, kinds(m))
    assert.are.same({}, m:warnings())
    local b = m:params().breakdown
    -- two matrices per expert (squared ReLU), one shared expert of 512 per MoE layer
    assert.are.equal(2 * 16 * 2 * 1024 * 256, b.routed_experts)
    assert.are.equal(2 * 2 * 1024 * 512, b.shared_experts)
  end)

  it("refuses a Hub id, saying how to give the file", function()
    local m, err = nd.model("nvidia/Nemotron-H-56B-Base-8K")
    assert.is_nil(m)
    assert.matches("Hugging Face Hub id, and ndplan does not download", err, 1, true)
    assert.matches("-m DIR", err, 1, true)
  end)

  it("names a bad hybrid_override_pattern character and a length mismatch", function()
    local cfg = {model_type = "nemotron_h", hidden_size = 1024, num_hidden_layers = 3,
                 num_attention_heads = 8, intermediate_size = 4096, vocab_size = 1000,
                 hybrid_override_pattern = "M*X", mamba_num_heads = 32, mamba_head_dim = 64,
                 ssm_state_size = 64, n_groups = 4, conv_kernel = 4}
    local m, err = nd.model(cfg)
    assert.is_nil(m)
    assert.matches("hybrid_override_pattern': character 3 is 'X'", err, 1, true)
    cfg.hybrid_override_pattern = "M*"
    m, err = nd.model(cfg)
    assert.is_nil(m)
    assert.matches("has 2 characters but num_hidden_layers is 3", err, 1, true)
    cfg.hybrid_override_pattern, cfg.n_groups = "M*-", 5
    m, err = nd.model(cfg)
    assert.is_nil(m)
    assert.matches("mamba_groups: must divide mamba_heads (32), got 5", err, 1, true)
  end)
end)
