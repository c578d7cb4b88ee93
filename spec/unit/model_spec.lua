-- The model layer: bundled models against published parameter totals, layer stacks, the
-- HF config mapping of each family, and the error paths of ndplan.model.load.
require "ndplan"
local model = require "ndplan.config.model"
local cmodel = require "ndplan.c.model"

local B = 1e9

-- Relative error of got against want, for messages and checks.
local function rel(got, want) return math.abs(got - want) / want end

local function assert_near(got, want, tol, what)
  assert(rel(got, want) <= tol, ("%s: got %.0f, want %.0f (%.4f%% off, limit %.2f%%)")
         :format(what, got, want, 100 * rel(got, want), 100 * tol))
end

-- Narayanan et al. 2021: P = 12lh^2 (1 + 13/(12h) + (V + s)/(12lh)), V = 51200, s = 2048.
local function narayanan(l, h)
  return 12 * l * h * h * (1 + 13 / (12 * h) + (51200 + 2048) / (12 * l * h))
end

-- Gemma-3-12B text tower by hand: q/k/v/o with head_dim 256, q/k norms, GeGLU MLP,
-- 4 RMSNorms per layer, tied embedding, final norm.
local function gemma3_12b()
  local h, L, q, kv, ffn, V = 3840, 48, 16 * 256, 8 * 256, 15360, 262208
  local layer = 2 * h * q + 2 * h * kv + 2 * 256 + 3 * h * ffn + 4 * h
  return L * layer + V * h + h
end

-- Llama 4 text towers by hand: q/k/v/o (no biases), experts of width 8192 (SwiGLU), one
-- shared expert of that width and a router in each MoE layer (every `step`-th), dense layers
-- of width 16384, two RMSNorms per layer, untied head. Returns total, active.
local function llama4(experts, step)
  local h, L, V, q, kv = 5120, 48, 202048, 40 * 128, 8 * 128
  local attn, expert = 2 * h * q + 2 * h * kv, 3 * h * 8192
  local moe = L // step
  local body = L * (attn + 2 * h) + (L - moe) * 3 * h * 16384 + moe * (expert + h * experts)
  local outer = 2 * V * h + h
  return body + moe * experts * expert + outer, body + moe * expert + outer
end

-- Nemotron-H-56B by hand: 54 Mamba-2 mixers (in_proj to z, x, B, C, dt; conv with bias over
-- x, B, C; dt_bias, A_log, D; gated norm; out_proj), 10 attention layers, 54 squared-ReLU
-- MLPs (two matrices), one RMSNorm per layer, untied head, final norm.
local function nemotron_h_56b()
  local h, inner, bc, heads = 8192, 256 * 64, 2 * 8 * 256, 256
  local mamba = h * (2 * inner + bc + heads) + (inner + bc) * 5 + 3 * heads + inner + inner * h
  local attention = 2 * h * 64 * 128 + 2 * h * 8 * 128
  local mlp = 2 * h * 32768
  return 54 * mamba + 10 * attention + 54 * mlp + 118 * h + 2 * 131072 * h + h
end

-- MiniMax-M1 by hand: 70 lightning layers as the linear kind (q, k, v, output gate, the
-- kind's beta/decay projections and per-head parameters, no conv, output, a 128-wide norm),
-- 10 softmax layers (64 q heads, 8 KV heads of 128), 32 SwiGLU experts of 9216 and a router
-- in every layer, two norms per layer, untied head, final norm.
local function minimax_m1()
  local h, d, heads, V = 6144, 64 * 128, 64, 200064
  local lightning = 4 * h * d + 2 * h * heads + 2 * heads + d * h + 128
  local softmax = 2 * h * d + 2 * h * 8 * 128
  local moe = 32 * 3 * h * 9216 + 32 * h
  return 70 * lightning + 10 * softmax + 80 * (moe + 2 * h) + 2 * V * h + h
end

-- Kimi-K2 by hand (its card: 1T total, 32B activated): 61 MLA layers (q through a 1536
-- latent, kv through 512 + 64 rope, 64 heads of 192 / 128), one dense MLP of 18432, 60 MoE
-- layers of 384 routed experts (top 8) and one shared expert of 2048, router with bias
local function kimi_k2()
  local h, V = 7168, 163840
  local attn = h * 1536 + 1536 + 1536 * 64 * 192 + h * (512 + 64) + 512 + 512 * 64 * 256
               + 64 * 128 * h + 2 * h
  local expert = 3 * h * 2048
  local total = 61 * attn + 3 * h * 18432 + 60 * (385 * expert + 384 * h + 384) + 2 * V * h + h
  return {total = total, active = total - 60 * 376 * expert}
end

-- GLM-4.5 and -Air by hand (Glm4Moe: q/k/v with bias, o without; q and k RMSNorms of
-- head_dim when use_qk_norm; dense MLPs first, then routed experts, one shared expert of the
-- routed width and a sigmoid router with its score-correction bias; untied head). Returns
-- the main model's total and active counts.
local function glm45(h, L, dense, ffn, experts, width, qk_norm)
  local q, kv, V = 96 * 128, 8 * 128, 151552
  local attn = 2 * h * q + 2 * h * kv + q + 2 * kv + (qk_norm and 2 * 128 or 0) + 2 * h
  local expert, moe = 3 * h * width, L - dense
  local body = L * attn + dense * 3 * h * ffn + moe * (expert + h * experts + experts)
  local outer = 2 * V * h + h
  return {total = body + moe * experts * expert + outer, active = body + moe * 8 * expert + outer}
end

-- Published or derived totals (models-and-trainers.md 1.3, formulas-and-hardware.md B.2);
-- active = total for dense models.
local REFERENCE = {
  ["llama3.1-8b"] = {total = 8.030 * B},
  ["llama3.1-70b"] = {total = 70.554 * B},
  ["llama3.1-405b"] = {total = 405.853 * B},
  ["qwen2.5-72b"] = {total = 72.706 * B},
  ["qwen3-32b"] = {total = 32.762 * B},
  ["qwen3-235b-a22b"] = {total = 235.094 * B, active = 22.191 * B},
  ["qwen3-30b-a3b"] = {total = 30.532 * B, active = 3.353 * B},
  ["mixtral-8x7b"] = {total = 46.703 * B, active = 12.880 * B},
  ["deepseek-v3"] = {total = 671.03 * B, active = 37.55 * B},
  -- V3 plus 61 sparse-attention indexers: wq_b 1536 -> 64 x 128, wk 7168 -> 128 with its
  -- LayerNorm, weights_proj 7168 -> 64
  ["deepseek-v3.2"] = {total = 671.03 * B + 61 * (1536 * 64 * 128 + 7168 * 128 + 256 + 7168 * 64),
                       active = 37.55 * B + 61 * (1536 * 64 * 128 + 7168 * 128 + 256 + 7168 * 64)},
  -- the doc leaves out GPT-OSS's expert biases (40M); OpenAI's model card says 116.83B
  ["gpt-oss-120b"] = {total = 116.79 * B, active = 5.71 * B},
  ["kimi-k2"] = (function() return kimi_k2() end)(),
  ["glm4.5"] = glm45(5120, 92, 3, 12288, 160, 1536, true),
  ["glm4.5-air"] = glm45(4096, 46, 1, 10944, 128, 1408, false),
  -- the published figures match the main model exactly, so they leave out the MTP layer
  -- (mtp_num_hidden_layers: 1, another 1.65B): checked exactly below
  ["qwen3-next-80b-a3b"] = {total = 79674391296, active = 3874929408},
  ["gemma3-12b"] = {total = gemma3_12b()},
  -- Gemma 2 technical report, Table 2: 917,504,000 embedding + 8,324,201,984 non-embedding
  ["gemma2-9b"] = {total = 917504000 + 8324201984},
  ["llama4-scout"] = (function() local t, a = llama4(16, 1) return {total = t, active = a} end)(),
  ["llama4-maverick"] = (function() local t, a = llama4(128, 2) return {total = t, active = a} end)(),
  ["nemotron-h-56b"] = {total = nemotron_h_56b()},
  -- by hand in model_hybrid_ssm_spec (Jamba-v0.1: the Hub's 51.57B, its card "52B" / "12B
  -- active"; Falcon-H1-7B: 7.59B in the technical report's Table 1)
  ["jamba-v0.1"] = {total = 51570323328, active = 12110311296},
  ["falcon-h1-7b"] = {total = 7585513568},
  -- Hugging Face model page of nvidia/Llama-3_3-Nemotron-Super-49B-v1: "Model size 49.9B
  -- params" (ndplan: 49.867B, 0.07% under the rounded figure)
  ["nemotron-super-49b"] = {total = 49.9 * B},
  -- nvidia/Llama-3_1-Nemotron-Ultra-253B-v1's card: 253B (ndplan: 253.401B, 0.16% over);
  -- checked exactly, block by block, in model_nas_spec
  ["nemotron-ultra-253b"] = {total = 253.401268224 * B},
  ["minimax-m1"] = {total = minimax_m1(),
                    active = minimax_m1() - 80 * 30 * 3 * 6144 * 9216},  -- top-2 of 32
  -- the formula leaves out the final LayerNorm (2h), well inside the tolerance
  ["gpt3-175b"] = {total = narayanan(96, 12288)},
  ["megatron-22b"] = {total = narayanan(48, 6144)},
  ["mt-nlg-530b"] = {total = narayanan(105, 20480)},
  ["megatron-1t"] = {total = narayanan(128, 25600)},
}

local function names_of(groups)
  local out = {}
  for _, g in ipairs(groups) do
    out[#out + 1] = ("%s%s x%d@%d"):format(g.mtp and "mtp " or "", g.kind, g.count, g.first)
  end
  return table.concat(out, ", ")
end

-- Writes text to a fresh temporary file with the given suffix; returns its path.
local function temp_file(suffix, text)
  local base = os.tmpname()
  os.remove(base)
  local path = base .. suffix
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

describe("ndplan.model", function()
  describe("bundled models", function()
    it("are exactly the catalogue, sorted", function()
      local want = {}
      for n in pairs(REFERENCE) do want[#want + 1] = n end
      table.sort(want)
      assert.are.same(want, model.names())
    end)

    for name, ref in pairs(REFERENCE) do
      it(name .. " matches the reference parameter totals within 0.1%", function()
        local m = assert(model.load(name))
        local p = m:params()
        assert_near(p.total, ref.total, 0.001, name .. " total")
        assert_near(p.active, ref.active or ref.total, 0.001, name .. " active")
        local b = p.breakdown
        assert.are.equal(p.total, b.embedding + b.attention + b.dense_mlp + b.routed_experts
                                  + b.shared_experts + b.norms + b.router + b.head)
        assert.are.equal(p.total_with_mtp, p.total + b.mtp)
        assert.are.same({}, m:warnings())
        assert.are.equal(name, m.name)
      end)
    end

    it("load by name ignores case and reads fields through the userdata", function()
      local m = assert(model.load("Llama3.1-8B"))
      assert.are.equal("llama3.1-8b", m.name)
      assert.are.equal("llama", m.family)
      assert.are.equal(4096, m.hidden_size)
      assert.are.equal(32, m.num_layers)
      assert.are.equal(8, m.num_kv_heads)
      assert.is_false(m.tie_embeddings)
      assert.is_nil(m.no_such_field)
      assert.matches("examples/models/llama3.1-8b.json", m.source, 1, true)
      assert.matches("llama3.1-8b (llama, 8.03B parameters, 32 layers)", tostring(m), 1, true)
    end)
  end)

  describe("layer stacks", function()
    it("DeepSeek-V3: dense x3, MoE x58, then one MTP MoE layer, all MLA", function()
      local m = assert(model.load("deepseek-v3"))
      assert.are.equal("mla-dense x3@0, mla-moe x58@3, mtp mla-moe x1@61",
                       names_of(m:layers()))
      local p = m:params()
      assert.are.equal(671026419200, p.total)
      -- the MTP module: an MoE block plus enorm/hnorm/eh_proj, about 11.6B
      assert_near(p.breakdown.mtp, 11.61 * B, 0.001, "deepseek-v3 MTP")
      assert.are.equal(0, p.breakdown.shared_experts % (3 * 7168 * 2048))
      local l = m:layer_params(3)
      assert.are.equal(256 * 3 * 7168 * 2048, l.routed_experts)
      assert.are.equal(8 * 3 * 7168 * 2048, l.routed_active)
      assert.are.equal(7168 * 1536 + 7168 * 576, l.attention_replicated)
      assert.are.equal(2 * 7168 * 7168, m:layer_params(61).mtp_proj)
      assert.has_error(function() m:layer_params(62) end)
    end)

    it("Gemma 3: five sliding layers then one global, tied head", function()
      local m = assert(model.load("gemma3-12b"))
      local groups = m:layers()
      assert.are.equal(16, #groups)
      for i, g in ipairs(groups) do
        local want = i % 2 == 1 and {"sliding-dense", 5} or {"dense", 1}
        assert.are.same(want, {g.kind, g.count})
      end
      local p = m:params()
      assert.are.equal(0, p.breakdown.head)
      assert.is_true(p.total > 11.5 * B and p.total < 12.0 * B)
      assert.are.equal(4, m.norms_per_layer)
      assert.is_true(m.qk_norm)
      assert.are.equal(1024, m.sliding_window)
    end)

    it("Qwen3-Next: three linear layers then one full, MoE throughout, one MTP layer",
       function()
      local m = assert(model.load("qwen3-next-80b-a3b"))
      local groups = m:layers()
      assert.are.equal(25, #groups)
      for i = 1, 24 do
        local want = i % 2 == 1 and {"linear-moe", 3} or {"moe", 1}
        assert.are.same(want, {groups[i].kind, groups[i].count})
      end
      assert.are.same({"moe", 1, 48, true},
                      {groups[25].kind, groups[25].count, groups[25].first, groups[25].mtp})
      assert.is_true(m.attn_output_gate)
      local p = m:params()
      assert.are.equal(79674391296, p.total)
      assert.are.equal(3874929408, p.active)
      assert.are.equal(81324862720, p.total_with_mtp)
    end)

    it("GPT-OSS alternates sliding and full attention, starting with sliding", function()
      local m = assert(model.load("gpt-oss-120b"))
      local attention = m:spec().attention
      assert.are.equal(36, #attention)
      for i = 1, 36 do
        assert.are.equal(i % 2 == 1 and "sliding" or "full", attention[i])
      end
    end)
  end)

  describe("HF config families", function()
    -- Totals that match the published checkpoints exactly.
    local cases = {
      {"Llama 2 7B", 6738415616, {model_type = "llama", hidden_size = 4096,
        num_hidden_layers = 32, num_attention_heads = 32, intermediate_size = 11008,
        vocab_size = 32000, max_position_embeddings = 4096}},
      {"GPT-2", 124439808, {model_type = "gpt2", n_embd = 768, n_layer = 12, n_head = 12,
        vocab_size = 50257, n_positions = 1024}},
      {"GPT-NeoX-20B", 20554567680, {model_type = "gpt_neox", hidden_size = 6144,
        num_hidden_layers = 44, num_attention_heads = 64, intermediate_size = 24576,
        vocab_size = 50432, max_position_embeddings = 2048, tie_word_embeddings = false}},
      {"OPT-125m", 125239296, {model_type = "opt", hidden_size = 768,
        num_hidden_layers = 12, num_attention_heads = 12, ffn_dim = 3072,
        vocab_size = 50272, max_position_embeddings = 2048, word_embed_proj_dim = 768}},
      {"OPT-350m", 331196416, {model_type = "opt", hidden_size = 1024,
        num_hidden_layers = 24, num_attention_heads = 16, ffn_dim = 4096,
        vocab_size = 50272, max_position_embeddings = 2048, word_embed_proj_dim = 512,
        do_layer_norm_before = false}},
      {"BLOOM-560m", 559214592, {model_type = "bloom", hidden_size = 1024, n_layer = 24,
        n_head = 16, vocab_size = 250880}},
    }
    for _, case in ipairs(cases) do
      it(case[1] .. " has its published parameter count", function()
        local m = assert(model.load(case[3]))
        assert.are.equal(case[2], m:params().total)
        assert.are.same({}, m:warnings())
      end)
    end

    it("reads Gemma 3's minimal published text_config with the family defaults", function()
      local m = assert(model.load({model_type = "gemma3", text_config = {
        model_type = "gemma3_text", hidden_size = 3840, intermediate_size = 15360,
        num_hidden_layers = 48, num_attention_heads = 16, num_key_value_heads = 8,
        sliding_window = 1024}}))
      assert.are.equal(model.load("gemma3-12b"):params().total, m:params().total)
      assert.are.equal(16, #m:layers())
    end)

    it("reads Qwen3.5-style layer_types, output gate and MTP from text_config", function()
      local types = {}
      for i = 1, 32 do types[i] = i % 4 == 0 and "full_attention" or "linear_attention" end
      local m = assert(model.load({model_type = "qwen3_5", text_config = {
        model_type = "qwen3_5_text", hidden_size = 4096, intermediate_size = 12288,
        num_hidden_layers = 32, num_attention_heads = 16, num_key_value_heads = 4,
        head_dim = 256, vocab_size = 248320, layer_types = types, attn_output_gate = true,
        linear_num_key_heads = 16, linear_num_value_heads = 32, linear_key_head_dim = 128,
        linear_value_head_dim = 128, linear_conv_kernel_dim = 4, mtp_num_hidden_layers = 1}}))
      local groups = m:layers()
      assert.are.equal(17, #groups)
      assert.are.same({"linear-dense", 3}, {groups[1].kind, groups[1].count})
      assert.are.same({"dense", 1, true}, {groups[17].kind, groups[17].count, groups[17].mtp})
      assert.is_true(m.attn_output_gate)
      assert.is_true(m:params().breakdown.mtp > 0)
    end)

    it("gives Qwen2 its implicit QKV bias and honours mlp_only_layers", function()
      local m = assert(model.load({model_type = "qwen2_moe", hidden_size = 2048,
        num_hidden_layers = 24, num_attention_heads = 16, intermediate_size = 5632,
        vocab_size = 151936, num_experts = 60, num_experts_per_tok = 4,
        moe_intermediate_size = 1408, shared_expert_intermediate_size = 5632,
        mlp_only_layers = {0, 23}}))
      assert.is_true(m.qkv_bias)
      assert.is_false(m.o_bias)
      assert.is_true(m.shared_expert_gate)
      assert.are.equal("dense x1@0, moe x22@1, dense x1@23", names_of(m:layers()))
    end)

    it("loads an unknown model_type with warnings naming what was assumed", function()
      local m = assert(model.load({model_type = "frobnicator", hidden_size = 4096,
        num_hidden_layers = 32, num_attention_heads = 32, num_key_value_heads = 8,
        intermediate_size = 14336, vocab_size = 128256}))
      assert.are.equal(8030261248, m:params().total)  -- read as Llama-style
      local w = m:warnings()
      assert.matches("model_type 'frobnicator' is not known", w[1], 1, true)
      local all = table.concat(w, "\n")
      assert.matches("tie_embeddings", all, 1, true)
      assert.matches("gated_mlp", all, 1, true)
    end)

    it("takes num_key_value_heads whatever the model_type", function()
      local m = assert(model.load({model_type = "gpt2", n_embd = 768, n_layer = 2,
        n_head = 12, num_key_value_heads = 4, vocab_size = 100, n_positions = 16}))
      assert.are.equal(4, m.num_kv_heads)
    end)
  end)

  describe("errors", function()
    it("names a missing required field", function()
      local m, err = model.load({model_type = "llama", num_hidden_layers = 2,
        num_attention_heads = 2, vocab_size = 10, intermediate_size = 8})
      assert.is_nil(m)
      assert.matches("^%(table%): missing field 'hidden_size' %(expected ", err)
    end)

    it("names the file and the missing field for a config file", function()
      local path = temp_file(".json", '{"model_type": "llama", "hidden_size": 64,\n'
        .. '"num_attention_heads": 4, "vocab_size": 10, "intermediate_size": 8}')
      local m, err = model.load(path)
      os.remove(path)
      assert.is_nil(m)
      assert.is_truthy(err:find(path .. ": missing field 'num_hidden_layers' (expected", 1,
                                true), err)
    end)

    it("reports malformed JSON with file:line:col", function()
      local path = temp_file(".json", '{\n  "hidden_size": 64,\n  "oops" 1\n}\n')
      local m, err = model.load(path)
      os.remove(path)
      assert.is_nil(m)
      assert.matches(path:gsub("%p", "%%%0") .. ":3:%d+: invalid JSON", err)
    end)

    it("names a wrong-typed field", function()
      local m, err = model.load({model_type = "llama", hidden_size = "big",
        num_hidden_layers = 2, num_attention_heads = 2, vocab_size = 10})
      assert.is_nil(m)
      assert.matches("field 'hidden_size' must be an integer", err, 1, true)
    end)

    it("passes on the core's validation message with the field", function()
      local m, err = model.load({model_type = "llama", hidden_size = 64,
        num_hidden_layers = 2, num_attention_heads = 8, num_key_value_heads = 3,
        vocab_size = 10, intermediate_size = 8})
      assert.is_nil(m)
      assert.are.equal("(table): num_kv_heads: must divide num_heads (8), got 3", err)
    end)

    it("explains an unknown name and a missing file", function()
      local m, err = model.load("no-such-model")
      assert.is_nil(m)
      assert.matches("unknown model 'no-such-model'", err, 1, true)
      assert.matches("llama3.1-8b", err, 1, true)
      m, err = model.load("/nonexistent/dir/config.json")
      assert.is_nil(m)
      assert.matches("/nonexistent/dir/config.json", err, 1, true)
    end)

    it("raises on an argument of the wrong type, at the caller", function()
      local ok, err = pcall(model.load, 42)
      assert.is_false(ok)
      assert.matches("expected a model name, a path or a table, got number", err, 1, true)
      assert.has_error(function() cmodel.new("x") end)
    end)
  end)

  describe("files and canonical specs", function()
    it("loads a directory holding config.json and names the model after it", function()
      local dir = os.tmpname()
      os.remove(dir)
      dir = dir .. "-My-Model"
      assert(os.execute("mkdir -p '" .. dir .. "'"))
      local f = assert(io.open(dir .. "/config.json", "wb"))
      f:write((assert(require("ndplan.c.bundle").read("examples/models/llama3.1-8b.json"))))
      f:close()
      local m = assert(model.load(dir))
      os.remove(dir .. "/config.json")
      os.remove(dir)
      assert.matches("%-My%-Model$", m.name)
      assert.are.equal(8030261248, m:params().total)
    end)

    it("round-trips spec() through new() and the canonical model_type", function()
      local m = assert(model.load("deepseek-v3"))
      local again = assert(cmodel.new(m:spec()))
      assert.are.same(m:params(), again:params())
      assert.are.same(m:layers(), again:layers())
      local t = m:spec()
      t.model_type = "ndplan"
      t.name = "copy"
      local copy = assert(model.load(t))
      assert.are.equal("copy", copy.name)
      assert.are.same(m:params(), copy:params())
    end)

    it("refuses unknown canonical fields and wrong stack lengths", function()
      local t = assert(model.load("llama3.1-8b")):spec()
      t.hiden_size = 1
      local m, err = cmodel.new(t)
      assert.is_nil(m)
      assert.are.equal("unknown field 'hiden_size'", err)
      t.hiden_size = nil
      t.attention = {"full"}
      m, err = cmodel.new(t)
      assert.is_nil(m)
      assert.matches("^attention: expected 32 entries", err)
    end)

    it("reads a YAML model file through ndplan.yaml", function()
      local ok, yaml = pcall(require, "ndplan.io.yaml")
      if not ok or type(yaml) ~= "table" or not yaml.load_file then
        pending("ndplan.yaml is not available yet")
        return
      end
      local path = temp_file(".yaml", "model_type: llama\nhidden_size: 4096\n"
        .. "num_hidden_layers: 32\nnum_attention_heads: 32\nnum_key_value_heads: 8\n"
        .. "intermediate_size: 14336\nvocab_size: 128256\ntie_word_embeddings: false\n")
      local m, err = model.load(path)
      os.remove(path)
      assert(m, err)
      assert.are.equal(8030261248, m:params().total)
    end)
  end)
end)

describe("absurd sizes found by fuzzing", function()
  local nd = require "ndplan"
  it("refuses a layer count past the core's limit before building any per-layer list", function()
    local t0 = os.clock()
    local m, err = nd.model{model_type = "llama", hidden_size = 64, num_hidden_layers = 1 << 62,
                            num_nextn_predict_layers = 1 << 62, num_attention_heads = 4,
                            vocab_size = 100, intermediate_size = 128}
    assert.is_nil(m)
    assert.matches("field 'num_hidden_layers' must be at most 1024", err)
    assert.is_true(os.clock() - t0 < 1)
  end)

  it("does not overflow summing absurd MLA head dims or layer counts", function()
    local m, err = nd.model{model_type = "ndplan", name = "t", hidden_size = 64, num_layers = 2,
                            num_heads = 4, vocab_size = 100, ffn_size = 128, kv_lora_rank = 1,
                            qk_nope_head_dim = 1 << 62, qk_rope_head_dim = 1 << 62,
                            attention = "mla", v_head_dim = 8}
    assert.is_nil(m)
    assert.matches("qk_nope_head_dim: must be between", err)
    m, err = nd.model{model_type = "ndplan", name = "t", hidden_size = 64, num_layers = 1 << 62,
                      mtp_layers = 1 << 62, num_heads = 4, vocab_size = 100, ffn_size = 128}
    assert.is_nil(m)
    assert.matches("num_layers", err)
  end)
end)
