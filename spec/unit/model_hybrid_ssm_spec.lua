-- The hybrid SSM families with layer kinds of their own, on their real configs: Falcon-H1
-- (attention and a Mamba-2 mixer side by side in every layer) and Jamba (Mamba-1 mixers,
-- attention and MoE every few layers). Totals against the cards and by hand from the
-- modules' shapes, the stack by kind, FLOPs per token of one layer of each new kind worked
-- out by hand, and what TP, CP and recompute do to them.
require "ndplan"
local nd = require "ndplan"
local core = require "ndplan.c.estimate"

local check = dofile("spec/support/check.lua")
local B, rel, near, kinds = check.B, check.rel, check.near, check.kinds
local h100 = assert(nd.device("h100"))
local job = {devices = 1, global_batch = 1, seq_len = 4096}

local function layer(m, i, strategy, j)
  return assert(core.layer(m, h100, j or job, strategy or {}, i))
end

describe("Jamba-v0.1 (examples/models/jamba-v0.1.json: ai21labs/Jamba-v0.1 config.json)", function()
  local m = assert(nd.model("jamba-v0.1"))
  -- h 4096; Mamba-1: E = 2 x 4096 = 8192 channels, state 16, conv 4, dt_rank 256
  local h, E, N, K, R, f = 4096, 8192, 16, 4, 256, 14336
  local mixer = h * 2 * E            -- in_proj (x, z), no bias
              + E * K + E            -- depthwise conv and its bias
              + E * (R + 2 * N)      -- x_proj: dt, B, C
              + R * E + E            -- dt_proj and its bias
              + E * N + E            -- A_log, D
              + E * h                -- out_proj
              + R + 2 * N            -- RMSNorms on dt, B and C
  local attention = h * 32 * 128 + 2 * h * 8 * 128 + 32 * 128 * h
  local mlp = 3 * h * f

  -- the card: "12B active parameters and a total of 52B parameters"; the Hub's count of the
  -- checkpoint's tensors, as the Open LLM Leaderboard's request for ai21labs/Jamba-v0.1
  -- (revision ce13f3f) records it: "params": 51.57 (billions)
  it("totals 51.57B (the Hub's count), 52B with 12B active (card, to the billion); by hand",
     function()
    local p = m:params()
    local total = 28 * mixer + 4 * attention + 16 * mlp + 16 * (16 * mlp + h * 16)
                  + 32 * 2 * h + 2 * 65536 * h + h
    assert.are.equal(total, p.total)
    assert.are.equal(total - 16 * 14 * mlp, p.active)   -- 2 of the 16 experts per token
    near(p.total, 51.57 * B, 0.005, "total")
    -- 51.57B and 12.11B: 0.83% under and 0.92% over the card's rounded figures
    assert.is_true(math.abs(p.total - 52 * B) < 0.5 * B, ("got %.3fB"):format(p.total / B))
    assert.is_true(math.abs(p.active - 12 * B) < 0.5 * B, ("got %.3fB"):format(p.active / B))
    assert.are.same({}, m:warnings())
  end)

  it("stacks attention every 8th layer from 4 and MoE every 2nd from 1", function()
    assert.are.same({["mamba1-dense"] = 12, ["mamba1-moe"] = 16, dense = 4}, kinds(m))
    local kind = {}
    for _, g in ipairs(m:layers()) do
      for _ = 1, g.count do kind[#kind + 1] = g.kind end
    end
    assert.are.same({"mamba1-dense", "mamba1-moe", "mamba1-dense", "mamba1-moe", "dense",
                     "mamba1-moe"}, {table.unpack(kind, 1, 6)})
    assert.are.equal("dense", kind[13])  -- layer 12
    assert.are.same({8192, 16, 4, 256, true}, {m.mamba_inner, m.mamba_state, m.mamba_conv,
                                              m.mamba_dt_rank, m.mamba_dt_norms})
  end)

  it("prices a Mamba-1 layer's FLOPs per token by hand", function()
    -- in_proj 2h(2E) = 134,217,728; conv 2KE = 65,536; x_proj 2E(R + 2N) = 4,718,592;
    -- dt_proj 2RE = 4,194,304; the selective scan 9EN = 1,179,648 (9 per channel and state:
    -- state-spaces/mamba issue 110); out_proj 2Eh =
    -- 67,108,864: 211,484,672; with a dense MLP 2 x 3 x h x f = 352,321,536
    assert.are.equal(563806208, layer(m, 0).flops_token)
    -- with MoE: two experts and the router (2 x h x 16)
    assert.are.equal(211484672 + 2 * 2 * 3 * h * f + 2 * h * 16, layer(m, 1).flops_token)
    -- the scan does not depend on the sequence (no chunks, no keys)
    assert.are.equal(563806208, layer(m, 0, {}, {devices = 1, global_batch = 1,
                                                 seq_len = 32768}).flops_token)
  end)

  it("shards the mixer over TP with one more all-reduce, and recomputes like the others",
     function()
    local st = {tp = 8, sp = true}
    local j = {devices = 8, global_batch = 8, seq_len = 4096}
    local mixer_layer, attention_layer = layer(m, 0, st, j), layer(m, 4, st, j)
    -- both dense; the mixer adds x_proj's all-reduce of dt_rank + 2N per token
    assert.is_true(mixer_layer.tp_comm_s > attention_layer.tp_comm_s)
    local a = mixer_layer.activations
    assert.are.equal(2 * 4096 * h / 8, a.full)  -- bf16 input, split by SP
    assert.is_true(a.none > a.full and mixer_layer.recompute_s.full > 0)
    -- selective "act" drops the conv's SiLU output (E channels) and the MLP's activation
    -- output (f), bf16, split by TP
    st.selective_ops = {"act"}
    assert.are.equal(2 * 4096 * (E + f) / 8, a.none - layer(m, 0, st, j).activations.selective)
    -- CP: the mixer's all-to-alls and x_proj's all-reduce
    local cj = {devices = 16, global_batch = 8, seq_len = 4096}
    assert.is_true(layer(m, 0, {tp = 8, sp = true, cp = 2}, cj).cp_comm_s > 0)
  end)

  it("reads mamba_inner_layernorms (Jamba-v0.1's remote code), dt_rank 'auto', and"
     .. " JambaConfig's defaults", function()
    local cfg = nd.json.load_file("examples/models/jamba-v0.1.json")
    cfg.mamba_inner_layernorms, cfg.mamba_dt_rank = false, "auto"
    local off = assert(nd.model(cfg))
    assert.are.equal(256, off.mamba_dt_rank)  -- ceil(4096 / 16)
    assert.are.equal(28 * (R + 2 * N), m:params().total - off:params().total)
    -- the published config states every default; without them the same model loads
    for _, k in ipairs({"attn_layer_period", "attn_layer_offset", "expert_layer_period",
                        "expert_layer_offset", "num_experts", "num_experts_per_tok",
                        "mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_conv_bias",
                        "mamba_proj_bias", "mamba_inner_layernorms"}) do
      cfg[k] = nil
    end
    cfg.mamba_dt_rank = nil
    assert.are.equal(m:params().total, assert(nd.model(cfg)):params().total)
    -- one expert: HF's Jamba builds a dense MLP in every layer
    cfg.num_experts = 1
    assert.are.same({["mamba1-dense"] = 28, dense = 4}, kinds(assert(nd.model(cfg))))
  end)
end)

describe("Falcon-H1-7B (examples/models/falcon-h1-7b.json)", function()
  local m = assert(nd.model("falcon-h1-7b"))
  local h, q, kv, inner, bc, H = 3072, 12 * 128, 2 * 128, 3072, 2 * 256, 24

  it("totals 7.59B (technical report, architecture table); by hand to the parameter",
     function()
    local attention = h * q + 2 * h * kv + q * h
    local mixer = h * (2 * inner + bc + H)  -- in_proj: z, x, B, C and dt
                + (inner + bc) * 4 + (inner + bc)  -- conv and its bias
                + 3 * H + inner * h               -- dt_bias, A_log, D; out_proj (no norm)
    local total = 44 * (attention + mixer + 3 * h * 12288 + 2 * h) + 2 * 130048 * h + h
    assert.are.equal(total, m:params().total)
    near(m:params().total, 7.59 * B, 0.005, "total")
    assert.are.same({}, m:warnings())
    assert.are.same({["hybrid-dense"] = 44}, kinds(m))
    assert.is_false(m.mamba_norm)
  end)

  it("prices attention and the mixer side by side, FLOPs per token by hand", function()
    -- attention: 2h(q + 2kv) + 2qh = 22,020,096, its core over s/2 = 2048 keys:
    -- 2 x 2048 x 12 heads x (128 + 128) = 12,582,912; the mixer: in_proj 2h x 6680 =
    -- 41,041,920, out_proj 2 x 3072 x h = 18,874,368, conv 2 x 4 x 3584 = 28,672, the
    -- chunked scan (chunk 128, state 256, 1 group, 24 heads of 128) 2 x 128 x 256 +
    -- 2 x 128 x 128 x 24 + 4 x 256 x 128 x 24 = 3,997,696; the MLP 2 x 3 x h x 12288 =
    -- 226,492,416
    assert.are.equal(34603008 + 63942656 + 226492416, layer(m, 0).flops_token)
  end)

  it("shares the normed input and the TP collectives between the two mixers", function()
    local st = {tp = 2, sp = true}
    local j = {devices = 2, global_batch = 2, seq_len = 4096}
    local dense = assert(nd.model{model_type = "llama", hidden_size = h, num_hidden_layers = 2,
      num_attention_heads = 12, num_key_value_heads = 2, head_dim = 128,
      intermediate_size = 12288, vocab_size = 1000})  -- the same attention and MLP alone
    local hy, at = layer(m, 0, st, j), assert(core.layer(dense, h100, j, st, 0))
    assert.is_true(rel(hy.tp_comm_s, at.tp_comm_s) < 1e-12)  -- one gather, one reduction
    -- selective "norms" drops the two norm outputs, once each, as in the plain layer
    st.selective_ops = {"norms"}
    local function dropped(m2, i)
      local none = assert(core.layer(m2, h100, j, {tp = 2, sp = true}, i)).activations.none
      return none - assert(core.layer(m2, h100, j, st, i)).activations.selective
    end
    assert.are.equal(dropped(dense, 0), dropped(m, 0))
    assert.is_true(hy.activations.none > at.activations.none)
    -- CP: the attention's ring exchange and the mixer's all-to-alls
    local cj = {devices = 4, global_batch = 2, seq_len = 4096}
    local cst = {tp = 2, sp = true, cp = 2}
    assert.is_true(layer(m, 0, cst, cj).cp_comm_s > assert(core.layer(dense, h100, cj, cst,
                                                                       0)).cp_comm_s)
  end)

  it("reads mamba_d_ssm, 'auto' heads and the optional gated norm", function()
    local cfg = nd.json.load_file("examples/models/falcon-h1-7b.json")
    cfg.mamba_d_head, cfg.mamba_rms_norm = "auto", true
    local normed = assert(nd.model(cfg))
    assert.are.equal(128, normed.mamba_head_dim)  -- 3072 / 24
    assert.are.equal(44 * inner, normed:params().total - m:params().total)
    cfg.mamba_d_head = 64
    local bad, err = nd.model(cfg)
    assert.is_nil(bad)
    assert.matches("mamba_n_heads (24) x mamba_d_head (64) must be mamba_d_ssm (3072)", err,
                   1, true)
    cfg.mamba_d_head, cfg.projectors_bias = 128, true
    bad, err = nd.model(cfg)
    assert.is_nil(bad)
    assert.matches("projectors_bias and mamba_proj_bias differ", err, 1, true)
  end)

  it("knows every field a published Falcon-H1 config carries", function()
    -- tiny-random/falcon-h1 config.json on the Hub, the fields as published (its
    -- ssm_multipliers and vocab_size fall outside the copy at hand: values chosen here)
    local cfg = {architectures = {"FalconH1ForCausalLM"}, attention_bias = false,
      attention_dropout = 0.0, attention_in_multiplier = 1.0, attention_out_multiplier = 0.0375,
      bos_token_id = 1, embedding_multiplier = 5.656854249492381, eos_token_id = 11,
      head_dim = 32, hidden_act = "silu", hidden_size = 8, initializer_range = 0.02,
      intermediate_size = 64, key_multiplier = 0.011048543456039804,
      lm_head_multiplier = 0.0078125, mamba_chunk_size = 128, mamba_conv_bias = true,
      mamba_d_conv = 4, mamba_d_head = 32, mamba_d_ssm = 256, mamba_d_state = 32,
      mamba_expand = 32, mamba_n_groups = 2, mamba_n_heads = 8, mamba_norm_before_gate = false,
      mamba_proj_bias = false, mamba_rms_norm = true, mamba_use_mlp = true,
      max_position_embeddings = 262144, mlp_bias = false, mlp_expansion_factor = 8,
      mlp_multipliers = {0.1767766952966369, 0.011160714285714284}, model_type = "falcon_h1",
      num_attention_heads = 8, num_hidden_layers = 2, num_key_value_heads = 4,
      num_logits_to_keep = 1, pad_token_id = 0, projectors_bias = false, rms_norm_eps = 1e-05,
      rope_theta = 100000000000.0, ssm_in_multiplier = 0.25,
      ssm_multipliers = {0.3535533905932738, 0.25, 0.25, 0.25, 0.25}, ssm_out_multiplier = 0.25,
      tie_word_embeddings = false, time_step_max = 0.1, time_step_min = 0.001,
      torch_dtype = "bfloat16", transformers_version = "4.52.0", use_cache = true,
      vocab_size = 1000}
    local tiny = assert(nd.model(cfg, {strict = true}))
    assert.are.same({256, 32, 2, 32, true}, {tiny.mamba_heads * tiny.mamba_head_dim,
      tiny.mamba_state, tiny.mamba_groups, tiny.mamba_head_dim, tiny.mamba_norm})
  end)

  it("reports a field it does not read, and refuses it under strict", function()
    local cfg = nd.json.load_file("examples/models/falcon-h1-7b.json")
    cfg.mamba_layers_every = 2
    local w = assert(nd.model(cfg)):warnings()
    assert.are.same({"mamba_layers_every: not read by ndplan for model_type 'falcon_h1'; if it"
                     .. " changes the layers, the model is priced without it"}, w)
    assert.is_nil(nd.model(cfg, {strict = true}))
  end)
end)
