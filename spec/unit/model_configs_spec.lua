-- More families on their published Hugging Face configs (issue 14): each config transcribed
-- with every field it publishes that the loader might read, its total against the model
-- card (or the model page's count where the card only rounds), the layer stack by kind, and
-- no warning unless something was really assumed.
local nd = require "ndplan"

local check = dofile("spec/support/check.lua")
local B, near, kinds = check.B, check.near, check.kinds

local function outer(p) return p.breakdown.embedding + p.breakdown.head end

describe("published configs", function()
  it("Phi-4: 14.7B (model page), 40 global dense layers (sliding_window null)", function()
    -- microsoft/phi-4 config.json
    local m = assert(nd.model({architectures = {"Phi3ForCausalLM"}, attention_bias = false,
      attention_dropout = 0.0, bos_token_id = 100257, embd_pdrop = 0.0, eos_token_id = 100265,
      hidden_act = "silu", hidden_size = 5120, initializer_range = 0.02,
      intermediate_size = 17920, max_position_embeddings = 16384, model_type = "phi3",
      num_attention_heads = 40, num_hidden_layers = 40, num_key_value_heads = 10,
      original_max_position_embeddings = 16384, pad_token_id = 100349, resid_pdrop = 0.0,
      rms_norm_eps = 1e-05, rope_theta = 250000, tie_word_embeddings = false,
      torch_dtype = "bfloat16", transformers_version = "4.47.0", use_cache = true,
      vocab_size = 100352}))
    assert.are.same({}, m:warnings())
    near(m:params().total, 14.7 * B, 0.005, "total")
    assert.are.same({dense = 40}, kinds(m))
  end)

  it("OLMo-2-1124-7B: 7.3B (model page), q/k norms as two more norms per layer", function()
    -- allenai/OLMo-2-1124-7B config.json
    local m = assert(nd.model({architectures = {"Olmo2ForCausalLM"}, attention_bias = false,
      attention_dropout = 0.0, eos_token_id = 100257, hidden_act = "silu", hidden_size = 4096,
      initializer_range = 0.02, intermediate_size = 11008, max_position_embeddings = 4096,
      model_type = "olmo2", num_attention_heads = 32, num_hidden_layers = 32,
      num_key_value_heads = 32, pad_token_id = 100277, rms_norm_eps = 1e-06,
      rope_theta = 500000, tie_word_embeddings = false, torch_dtype = "float32",
      transformers_version = "4.47.0.dev0", use_cache = true, vocab_size = 100352}))
    assert.are.same({}, m:warnings())
    near(m:params().total, 7.3 * B, 0.005, "total")
    assert.are.equal(4, m.norms_per_layer)
  end)

  it("Granite-3.1-2B: 2.53B (model page), tied head, muP scales cost nothing", function()
    -- ibm-granite/granite-3.1-2b-base config.json, the sizing fields and the muP scales
    local m = assert(nd.model({model_type = "granite", hidden_size = 2048,
      intermediate_size = 8192, num_hidden_layers = 40, num_attention_heads = 32,
      num_key_value_heads = 8, vocab_size = 49155, rope_theta = 5000000.0,
      tie_word_embeddings = true, attention_bias = false, mlp_bias = false,
      hidden_act = "silu", rms_norm_eps = 1e-05, embedding_multiplier = 12.0,
      logits_scaling = 8.0, residual_multiplier = 0.22, attention_multiplier = 0.015625}))
    assert.are.same({}, m:warnings())
    near(m:params().total, 2.53 * B, 0.005, "total")
    assert.are.equal(0, m:params().breakdown.head)
  end)

  it("Granite-3.1-3B-A800M: 3.3B total, 800M active without the embedding", function()
    -- ibm-granite/granite-3.1-3b-a800m-instruct config.json: 40 experts of 512, top 8
    local m = assert(nd.model({architectures = {"GraniteMoeForCausalLM"}, hidden_act = "silu",
      hidden_size = 1536, intermediate_size = 512, max_position_embeddings = 131072,
      model_type = "granitemoe", num_attention_heads = 24, num_experts_per_tok = 8,
      num_hidden_layers = 32, num_key_value_heads = 8, num_local_experts = 40,
      rope_theta = 10000000.0, tie_word_embeddings = true, vocab_size = 49155}))
    assert.are.same({}, m:warnings())
    local p = m:params()
    near(p.total, 3.3 * B, 0.005, "total")
    -- the name's "a800m" is rounded: 807M
    assert.is_true(math.abs(p.active - outer(p) - 0.8 * B) < 0.01 * B, "800M active")
    assert.are.same({moe = 32}, kinds(m))
  end)

  it("Gemma-3-27B: 25,600M non-embedding parameters (technical report, Table 1)", function()
    -- google/gemma-3-27b-pt config.json: the text tower in text_config, the rest the
    -- Gemma3TextConfig defaults; the vision tower (417M in Table 1) is not costed
    local m = assert(nd.model({architectures = {"Gemma3ForConditionalGeneration"},
      boi_token_index = 255999, eoi_token_index = 256000, eos_token_id = {1, 106},
      image_token_index = 262144, initializer_range = 0.02, mm_tokens_per_image = 256,
      model_type = "gemma3",
      text_config = {head_dim = 128, hidden_size = 5376, intermediate_size = 21504,
                     model_type = "gemma3_text", num_attention_heads = 32,
                     num_hidden_layers = 62, num_key_value_heads = 16,
                     query_pre_attn_scalar = 168,
                     rope_scaling = {factor = 8.0, rope_type = "linear"},
                     sliding_window = 1024},
      torch_dtype = "bfloat16", transformers_version = "4.50.0.dev0",
      vision_config = {hidden_size = 1152, image_size = 896, intermediate_size = 4304,
                       model_type = "siglip_vision_model", num_attention_heads = 16,
                       num_hidden_layers = 27, patch_size = 14, vision_use_head = false}}))
    assert.are.same({}, m:warnings())
    local p = m:params()
    near(p.total - outer(p), 25600e6, 0.005, "non-embedding")
    -- five local layers, then a global one: 10 global of 62
    assert.are.same({["sliding-dense"] = 52, dense = 10}, kinds(m))
    assert.are.equal(1024, m.sliding_window)
  end)

  -- nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B config.json. Its Mamba-2 mixers are
  -- mamba_num_heads x mamba_head_dim = 4096 wide, not expand x hidden_size (5376): the
  -- loader used to refuse the config over that product.
  local nano = {architectures = {"NemotronHForCausalLM"}, attention_bias = false,
    attention_dropout = 0.0, bos_token_id = 1, chunk_size = 128, conv_kernel = 4,
    eos_token_id = 2, expand = 2, head_dim = 128, hidden_dropout = 0.0, hidden_size = 2688,
    hybrid_override_pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    initializer_range = 0.02, intermediate_size = 1856, layer_norm_epsilon = 1e-05,
    mamba_head_dim = 64, mamba_hidden_act = "silu", mamba_num_heads = 64,
    mamba_proj_bias = false, mamba_ssm_cache_dtype = "float32",
    max_position_embeddings = 262144, mlp_bias = false, mlp_hidden_act = "relu2",
    model_type = "nemotron_h", moe_intermediate_size = 1856,
    moe_shared_expert_intermediate_size = 3712, n_group = 1, n_groups = 8,
    n_routed_experts = 128, n_shared_experts = 1, norm_eps = 1e-05, norm_topk_prob = true,
    num_attention_heads = 32, num_experts_per_tok = 6, num_hidden_layers = 52,
    num_key_value_heads = 2, num_logits_to_keep = 1, pad_token_id = 0,
    partial_rotary_factor = 1.0, rescale_prenorm_residual = true, residual_in_fp32 = false,
    rope_theta = 10000, routed_scaling_factor = 2.5, ssm_state_size = 128,
    tie_word_embeddings = false, time_step_floor = 0.0001, time_step_max = 0.1,
    time_step_min = 0.001, topk_group = 1, torch_dtype = "bfloat16",
    transformers_version = "4.55.4", use_bias = false, use_cache = true,
    use_conv_bias = true, use_mamba_kernels = true, vocab_size = 131072}

  it("Nemotron-3-Nano-30B-A3B: 31.6B total, 3.2B active (3.6B with embeddings) (card)",
     function()
    local m = assert(nd.model(nano))
    assert.are.same({}, m:warnings())
    local p = m:params()
    near(p.total, 31.6 * B, 0.005, "total")
    assert.is_true(math.abs(p.active - 3.6 * B) < 0.05 * B, "3.6B active with embeddings")
    -- without the embedding table (the head is counted: its GEMM runs for every token)
    assert.is_true(math.abs(p.active - p.breakdown.embedding - 3.2 * B) < 0.05 * B,
                   "3.2B without")
    assert.are.same({mamba = 23, ["moe-mlp"] = 23, attention = 6}, kinds(m))
    assert.are.equal(64, m.mamba_head_dim)
  end)

  it("Granite 4's expand still sets the Mamba-2 width and is checked against it", function()
    local m, err = nd.model({model_type = "granitemoehybrid", hidden_size = 1536,
      num_hidden_layers = 2, num_attention_heads = 12, num_key_value_heads = 4,
      vocab_size = 1000, intermediate_size = 512, shared_intermediate_size = 1024,
      layer_types = {"mamba", "attention"}, mamba_n_heads = 48, mamba_d_head = 32,
      mamba_d_state = 128, mamba_n_groups = 1, mamba_d_conv = 4, mamba_expand = 2})
    assert.is_nil(m)
    assert.matches("mamba_num_heads (48) x mamba_head_dim (32) must be expand (2) x"
                   .. " hidden_size (1536)", err, 1, true)
  end)

  -- MiniMaxAI/MiniMax-M2 config.json, the fields that size it (as copied in public test
  -- fixtures of the released checkpoint)
  local m2 = {architectures = {"MiniMaxM2ForCausalLM"}, model_type = "minimax_m2",
    hidden_act = "silu", hidden_size = 3072, intermediate_size = 1536, num_hidden_layers = 62,
    num_attention_heads = 48, num_key_value_heads = 8, head_dim = 128, rotary_dim = 64,
    num_local_experts = 256, num_experts_per_tok = 8, shared_intermediate_size = 0,
    scoring_func = "sigmoid", use_routing_bias = true, output_router_logits = false,
    use_qk_norm = true, qk_norm_type = "per_layer", max_position_embeddings = 196608,
    vocab_size = 200064, rms_norm_eps = 1e-6, attention_dropout = 0.0,
    router_jitter_noise = 0.0, num_mtp_modules = 3, mtp_transformer_layers = 1,
    use_mtp = true, attention_bias = false, tie_word_embeddings = false,
    rope_theta = 5000000}
  m2.attn_type_list = {}
  for i = 1, 62 do m2.attn_type_list[i] = 1 end

  it("MiniMax-M2: 230B total, 10B active (card, two figures), its own family", function()
    local m = assert(nd.model(m2))
    -- the only assumption: the MTP modules, whose layers the config does not describe
    assert.are.same({"use_mtp: 3 MTP module(s) of 1 layer(s) each are not priced (the config"
                     .. " does not say what their layers are)"}, m:warnings())
    local p = m:params()
    -- 228.69B: the card's 230B to two significant figures (0.57% over the count)
    assert.is_true(math.abs(p.total - 230 * B) < 5 * B, ("got %.3fB"):format(p.total / B))
    assert.is_true(math.abs(p.active - outer(p) - 10 * B) < 0.5 * B, "10B active")
    assert.are.same({moe = 62}, kinds(m))
    assert.is_true(m.qk_norm and m.router_bias)
    assert.are.equal(0, m.num_shared_experts)
    -- by hand: q/o 3072 x 6144, k/v 3072 x 1024, q/k norms of 128, 256 SwiGLU experts of
    -- 1536, router with its routing bias, two norms a layer; untied head, final norm
    local h = 3072
    local layer = 2 * h * 6144 + 2 * h * 1024 + 256 + 256 * 3 * h * 1536 + 256 * h + 256
                  + 2 * h
    assert.are.equal(62 * layer + 2 * 200064 * h + h, p.total)
    local strict = select(2, nd.model(m2, {strict = true}))
    assert.matches("strict: 1 assumption", strict, 1, true)
  end)
end)

describe("published configs, continued", function()
  it("MiniMax-Text-01: M1's architecture under its own model_type, 456B (card)", function()
    -- MiniMaxAI/MiniMax-Text-01 config.json: M1's sizing fields (M1 was trained from it)
    -- with model_type minimax_text_01 and the fields M1's copy leaves out
    local cfg = nd.json.load_file("examples/models/minimax-m1.json")
    cfg.model_type, cfg.architectures = "minimax_text_01", {"MiniMaxText01ForCausalLM"}
    cfg.block_size, cfg.output_router_logits, cfg.router_jitter_noise = 256, false, 0.0
    cfg.bos_token_id, cfg.eos_token_id, cfg.use_cache = nil, nil, true
    local m = assert(nd.model(cfg))
    assert.are.same({}, m:warnings())
    near(m:params().total, 456 * B, 0.005, "total")
    assert.are.same({["linear-moe"] = 70, moe = 10}, kinds(m))
  end)
end)

describe("published configs, Phi-3.5-MoE", function()
  it("41.9B total (model page; card: 42B), 6.6B active (card, to a tenth); LayerNorms,"
     .. " biased attention, 16 experts", function()
    -- microsoft/Phi-3.5-MoE-instruct config.json (rope_scaling's long/short factor lists left
    -- out: RoPE costs nothing)
    local m = assert(nd.model({architectures = {"PhiMoEForCausalLM"}, attention_bias = true,
      attention_dropout = 0.0, bos_token_id = 1, eos_token_id = 32000, hidden_act = "silu",
      hidden_dropout = 0.0, hidden_size = 4096, initializer_range = 0.02,
      input_jitter_noise = 0.01, intermediate_size = 6400, lm_head_bias = true,
      max_position_embeddings = 131072, model_type = "phimoe", num_attention_heads = 32,
      num_experts_per_tok = 2, num_hidden_layers = 32, num_key_value_heads = 8,
      num_local_experts = 16, original_max_position_embeddings = 4096,
      output_router_logits = false, rms_norm_eps = 1e-05, rope_theta = 10000.0,
      router_aux_loss_coef = 0.0, router_jitter_noise = 0.01, sliding_window = 131072,
      tie_word_embeddings = false, torch_dtype = "bfloat16", vocab_size = 32064}))
    assert.are.same({}, m:warnings())
    local p = m:params()
    near(p.total, 41.9 * B, 0.005, "total")
    assert.is_true(math.abs(p.active - 6.6 * B) < 0.05 * B, ("active %.3fB"):format(p.active / B))
    assert.are.equal("layernorm", m.norm)
    assert.is_true(m.qkv_bias and m.o_bias)
    assert.are.same({["sliding-moe"] = 32}, kinds(m))
    -- by hand: q/k/v/o with biases, 16 SwiGLU experts of 6400 and a router, two LayerNorms
    -- (weight and bias) a layer; untied head, final LayerNorm
    local h = 4096
    local layer = 2 * h * h + 2 * h * 1024 + (h + 2 * 1024 + h) + 16 * 3 * h * 6400 + 16 * h
                  + 2 * 2 * h
    assert.are.equal(32 * layer + 2 * 32064 * h + 2 * h, p.total)
  end)
end)
