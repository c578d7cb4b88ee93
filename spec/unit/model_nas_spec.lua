-- Nemotron NAS (DeciLM block_configs): Llama-3.3-Nemotron-Super-49B-v1 on its real config
-- (examples/models/nemotron-super-49b.json, transcribed from the Hugging Face config.json):
-- the total against the model page, the stack by kind and width, FLOPs per token of an
-- attention + MLP block and of an MLP-only block by hand, and the refusals by name.
local nd = require "ndplan"
local nas = require "ndplan.config.hfconfig_nas"
local core = require "ndplan.c.estimate"

local B = 1e9
local h100 = assert(nd.device("h100"))

-- a small NAS config: hidden 1024, 8 heads; blocks as {n_heads_in_group | false, ffn_mult |
-- false} (false: no_op)
local function config(blocks)
  local bc = {}
  for i, b in ipairs(blocks) do
    bc[i] = {attention = b[1] and {n_heads_in_group = b[1], no_op = false}
                         or {no_op = true},
             ffn = b[2] and {ffn_mult = b[2], no_op = false} or {no_op = true}}
  end
  return {model_type = "nemotron-nas", hidden_size = 1024, num_hidden_layers = #blocks,
          num_attention_heads = 8, vocab_size = 1000, tie_word_embeddings = false,
          rms_norm_eps = 1e-5, block_configs = bc}
end

-- The search's ranked rows as JSON, pruned or exhaustive.
local function ranked_rows(a, exhaustive)
  local search = require "ndplan.search"
  a.exhaustive = exhaustive
  local ranked = assert(nd.search(a))
  local out = {}
  for i = 1, #ranked do out[i] = search.encode_json(ranked[i]) end
  return out
end

describe("Nemotron NAS block_configs", function()
  it("rounds 2/3 x ffn_mult x hidden up to a multiple of 256 (DeciLM's rule)", function()
    assert.are.equal(28672, nas.ffn_width(5.25, 8192))   -- 28672 exactly
    assert.are.equal(14336, nas.ffn_width(2.625, 8192))
    assert.are.equal(17920, nas.ffn_width(3.28125, 8192))
    assert.are.equal(2816, nas.ffn_width(0.5, 8192))     -- 2730.67 -> 2730 -> 2816
    assert.are.equal(5632, nas.ffn_width(1.0, 8192))     -- 5461.33 -> 5461 -> 5632
  end)

  it("Super-49B: 49.9B (model page), within 0.5%", function()
    local m = assert(nd.model("nemotron-super-49b"))
    local p = m:params()
    assert.is_true(math.abs(p.total - 49.9 * B) / (49.9 * B) < 0.005,
                   ("got %.3fB"):format(p.total / B))
    assert.are.equal(p.total, p.active)
    assert.are.same({}, m:warnings())
  end)

  it("Super-49B: 49 attention + MLP blocks and 31 MLP-only ones, by width", function()
    local m = assert(nd.model("nemotron-super-49b"))
    local s = m:spec()
    assert.are.equal(8, s.num_kv_heads)          -- 64 heads / n_heads_in_group 8
    assert.are.equal(28672, s.ffn_size)          -- the most common width
    local by = {}
    for _, g in ipairs(m:layers()) do
      local k = g.kind .. " " .. g.ffn_size
      by[k] = (by[k] or 0) + g.count
    end
    assert.are.same({["dense 28672"] = 48, ["dense 14336"] = 1, ["mlp 28672"] = 1,
                     ["mlp 17920"] = 1, ["mlp 14336"] = 5, ["mlp 7168"] = 10,
                     ["mlp 5632"] = 8, ["mlp 2816"] = 6}, by)
  end)

  it("Super-49B: FLOPs per token of a block, by hand", function()
    local m = assert(nd.model("nemotron-super-49b"))
    local job = {devices = 1, global_batch = 1, seq_len = 4096}
    local function flops(i) return assert(core.layer(m, h100, job, {}, i)).flops_token end
    local h = 8192
    -- block 0: q 8192 and k, v 1024 wide: 2h(8192 + 2048) + 2 * 8192 * h, plus QK^T and AV
    -- over s/2 keys: 2 * 2048 * 64 heads * (128 + 128); then the SwiGLU MLP of 14336
    local attn = 2 * h * (8192 + 2048) + 2 * 8192 * h + 2 * 2048 * 64 * 256
    assert.are.equal(attn + 2 * 3 * h * 14336, flops(0))
    assert.are.equal(attn + 2 * 3 * h * 28672, flops(1))
    assert.are.equal(2 * 3 * h * 2816, flops(62))  -- block 62: no attention, ffn_mult 0.5
  end)

  it("gives each width its own price", function()
    local m = assert(nd.model(config({{2, 2.0}, {2, 4.0}, {false, 1.0}})))
    local job = {devices = 1, global_batch = 1, seq_len = 1024}
    local function flops(i) return assert(core.layer(m, h100, job, {}, i)).flops_token end
    -- widths 1536 (1365.33 -> 1536), 2816 (2730.67 -> 2816), 768 (682.67 -> 768)
    assert.are.same({0, 2816, 768}, m:spec().ffn_sizes)
    assert.are.equal(1536, m:spec().ffn_size)
    assert.are.equal(2 * 3 * 1024 * (2816 - 1536), flops(1) - flops(0))
    assert.are.equal(2 * 3 * 1024 * 768, flops(2))
    -- the stack of one width per layer costs the sum of its layers: swapping the widths of
    -- blocks 0 and 1 moves nothing
    local function step(cfg)
      local r = assert(nd.estimate({model = assert(nd.model(cfg)), device = "h100",
                                    devices = 1, global_batch = 1, seq_len = 1024,
                                    stack = "none"}))
      return r.step_time_s
    end
    local a, b = step(config({{2, 2.0}, {2, 4.0}, {false, 1.0}})),
                 step(config({{2, 4.0}, {2, 2.0}, {false, 1.0}}))
    assert.is_true(math.abs(a - b) <= 1e-12 * a, ("%.17g vs %.17g"):format(a, b))
    assert.is_true(step(config({{2, 4.0}, {2, 4.0}, {false, 1.0}})) > a)
  end)

  it("prices an identity block (attention and FFN both no_op) at nothing", function()
    local m = assert(nd.model(config({{2, 2.0}, {false, false}, {false, 1.0}})))
    assert.are.same({"dense", "identity", "mlp"}, (function()
      local out = {}
      for i, g in ipairs(m:layers()) do out[i] = g.kind end
      return out
    end)())
    local job = {devices = 1, global_batch = 1, seq_len = 1024}
    local l = assert(core.layer(m, h100, job, {}, 1))
    assert.are.same({0, 0, 0, 0, 0}, {l.flops_token, l.params, l.forward_s, l.backward_s,
                                      l.tp_comm_s})
    -- nothing kept under any mode: its input is the tensor the next block keeps
    assert.are.same({none = 0, selective = 0, full = 0}, l.activations)
    -- the stack with the identity block costs what the stack without it costs
    local function run(blocks, recompute)
      return assert(nd.estimate({model = assert(nd.model(config(blocks))), device = "h100",
                                 devices = 1, global_batch = 1, seq_len = 1024,
                                 recompute = recompute, stack = "none"}))
    end
    for _, rc in ipairs({"none", "full"}) do
      local with = run({{2, 2.0}, {false, false}, {false, 1.0}}, rc)
      local without = run({{2, 2.0}, {false, 1.0}}, rc)
      assert.are.equal(without.memory_bytes, with.memory_bytes)
      assert.is_true(math.abs(with.step_time_s - without.step_time_s)
                     <= 1e-12 * without.step_time_s, rc)
    end
  end)

  it("Ultra-253B: 253B (model card), within 0.5%; 81 identity blocks", function()
    local m = assert(nd.model("nemotron-ultra-253b"))
    local p = m:params()
    assert.is_true(math.abs(p.total - 253 * B) / (253 * B) < 0.005,
                   ("got %.3fB"):format(p.total / B))
    assert.are.same({}, m:warnings())
    local by = {}
    for _, g in ipairs(m:layers()) do by[g.kind] = (by[g.kind] or 0) + g.count end
    assert.are.same({dense = 64, mlp = 17, identity = 81}, by)
    -- by hand: 64 attention sublayers (q and o 16384 x 16384, k and v 16384 x 1024, one
    -- norm), the SwiGLU MLPs of each block's width (one norm each), embedding, head, final
    -- norm; the widths are DeciLM's rule applied to the transcribed ffn_mult values
    local cfg = nd.json.load_file("examples/models/nemotron-ultra-253b.json")
    local h, total = 16384, 2 * 128256 * 16384 + 16384
    for _, b in ipairs(cfg.block_configs) do
      if not b.attention.no_op then total = total + 2 * h * h + 2 * h * 1024 + h end
      if not b.ffn.no_op then total = total + 3 * h * nas.ffn_width(b.ffn.ffn_mult, h) + h end
    end
    assert.are.equal(total, p.total)
  end)

  it("Ultra-253B: its four fused FFNs are wider than 2^18, priced by hand", function()
    local m = assert(nd.model("nemotron-ultra-253b"))
    local job = {devices = 1, global_batch = 1, seq_len = 4096}
    -- block 134: ffn_mult 39 -> 2/3 x 39 x 16384 = 425,984, no attention
    assert.are.equal(425984, nas.ffn_width(39.0, 16384))
    assert.are.equal(2 * 3 * 16384 * 425984, assert(core.layer(m, h100, job, {}, 134)).flops_token)
  end)

  it("prunes the search exactly: the ranking of the exhaustive search (issue 18)", function()
    local a = {model = "nemotron-super-49b", device = "h100", devices = 16, global_batch = 64,
               seq_len = 2048, recompute = {"none", "full"}, keep = 10, top = 1, jobs = 1,
               stack = "none"}
    local function rows(exhaustive) return ranked_rows(a, exhaustive) end
    local pruned = rows(false)
    assert.is_true(#pruned > 0)
    assert.are.same(rows(true), pruned)
  end)

  it("prunes exactly with identity blocks: their zero prices bound nothing away", function()
    local cfg = config({{2, 2.0}, {false, false}, {false, 1.0}, {2, 4.0}, {false, false},
                        {false, false}, {2, 1.0}, {false, 2.0}})
    local a = {model = assert(nd.model(cfg)), device = "h100", devices = 8, global_batch = 16,
               seq_len = 1024, recompute = {"none", "full"}, keep = 20, top = 20, jobs = 1,
               stack = "none"}
    local function rows(exhaustive) return ranked_rows(a, exhaustive) end
    local pruned = rows(false)
    assert.are.equal(20, #pruned)
    assert.are.same(rows(true), pruned)
  end)

  it("refuses what it does not price, by name", function()
    local function refused(cfg, want)
      local m, err = nd.model(cfg)
      assert.is_nil(m)
      assert.matches(want, err, 1, true)
    end
    refused(config({{2, 2.0}, {4, 2.0}}),
            "block_configs[1].attention.n_heads_in_group: 2 KV heads here, 4 in block 0;"
            .. " per-layer KV head counts are not priced by ndplan yet")
    local c = config({{2, 2.0}, {2, 2.0}})
    c.block_configs[2].attention.replace_with_linear = true
    refused(c, "block_configs[1].attention.replace_with_linear: a single hidden x hidden"
               .. " linear layer in place of the attention is not a layer kind")
    c = config({{2, 2.0}, {2, 2.0}})
    c.block_configs[1].ffn.replace_with_linear = true
    refused(c, "block_configs[0].ffn.replace_with_linear")
    c = config({{2, 2.0}, {2, 2.0}})
    c.block_configs[2].attention.window_length = 4096
    refused(c, "block_configs[1].attention.window_length is set (windowed attention), which ndplan")
    c = config({{2, 2.0}, {2, 2.0}})
    c.num_hidden_layers = 3
    refused(c, "field 'block_configs' has 2 blocks but num_hidden_layers is 3")
    c = config({{3, 2.0}})
    refused(c, "block_configs[0].attention.n_heads_in_group: 3 does not divide"
               .. " num_attention_heads (8)")
    c = config({{2, 2.0}})
    c.model_type = "llama"
    c.intermediate_size = 4096
    refused(c, "block_configs: heterogeneous blocks are read for model_type 'nemotron-nas'")
  end)

  it("names a block option it does not know", function()
    local c = config({{2, 2.0}})
    c.block_configs[1].ffn.frobnicate = 1
    local m = assert(nd.model(c))
    assert.matches("block_configs[0].ffn.frobnicate: not read by ndplan", m:warnings()[1], 1,
                   true)
  end)
end)
