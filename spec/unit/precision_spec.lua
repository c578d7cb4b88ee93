-- Precision recipes (ndplan/precision.h): each recipe's byte widths checked against a hand
-- count on a small model, param gather, the BF16 layers, and the refusal of recipes a
-- device has no peak for.
local nd = require "ndplan"
local device = require "ndplan.config.device"
-- The recipes' widths on the device files alone (a stack profile sets quant_cache: stack_spec).
require("ndplan.config.stack").DEFAULT = "none"

-- A 12-layer Llama-style decoder small enough to count by hand: h = 256, 4 heads of 64
-- (no GQA), gated MLP of 1024, no biases. Per layer the linear layers hold q, k, v, o:
-- 4 h^2, and gate, up, down: 3 h ffn; the two norms 2 h.
local H, FFN, L = 256, 1024, 12
local LINEAR = 4 * H * H + 3 * H * FFN   -- 1,048,576 per layer
local model = assert(nd.model{model_type = "llama", num_hidden_layers = L, hidden_size = H,
                              intermediate_size = FFN, num_attention_heads = 4,
                              num_key_value_heads = 4, vocab_size = 1024,
                              max_position_embeddings = 4096})

local function run(extra, dev)
  local args = {model = model, device = dev or "b200", devices = 1, global_batch = 8,
                seq_len = 1024}
  for k, v in pairs(extra or {}) do args[k] = v end
  return nd.estimate(args)
end

-- bytes of one quantized copy per weight element, by the recipe's documented format
local QUANT = {
  ["fp8:delayed"] = 1, ["fp8:tensorwise"] = 1, ["fp8:rowwise"] = 1,  -- per-tensor/row scales
  ["fp8:blockwise"] = 1 + 4 / (128 * 128),  -- fp32 scale per 128x128 weight block
  ["fp8:mxfp8"] = 1 + 1 / 32,               -- E8M0 scale per 32 elements
  nvfp4 = 0.5 + 1 / 16,                     -- E2M1, E4M3 scale per 16 elements
}
-- copies Transformer Engine keeps (rowwise and columnwise); torchao's rowwise keeps none
local COPIES = {["fp8:delayed"] = 2, ["fp8:tensorwise"] = 2, ["fp8:rowwise"] = 0,
                ["fp8:blockwise"] = 2, ["fp8:mxfp8"] = 2, nvfp4 = 2}

describe("precision recipes", function()
  local bf16 = assert(run())

  it("lists the core's table, and fp8 alone is Megatron's default recipe (delayed)", function()
    local names = {}
    for _, r in ipairs(device.recipes()) do names[#names + 1] = r.name end
    assert.same({"bf16", "fp16", "fp8:delayed", "fp8:tensorwise", "fp8:rowwise",
                 "fp8:blockwise", "fp8:mxfp8", "nvfp4"}, names)
    assert.equal("fp8:delayed", device.recipes().default_fp8)
    assert.equal("fp8:delayed", assert(run{precision = "fp8"}).strategy.precision)
  end)

  for name, q in pairs(QUANT) do
    it(name .. ": the quantized weight copies add copies x width per linear parameter", function()
      local r = assert(run{precision = name, bf16_first_layers = 0, bf16_last_layers = 0})
      local s, b = r.stages[1], bf16.stages[1]
      assert.equal(L * LINEAR, s.quant_params)        -- norms, embedding, head stay BF16
      local w = r.precision.bytes_per_param
      assert.near(q, w.quant, 1e-12)
      assert.equal(2, w.param)                          -- the BF16 parameter stays
      assert.near(COPIES[name] * q, w.cache, 1e-12)
      assert.near(COPIES[name] * q * L * LINEAR, s.weights - b.weights, 1e-3)
      -- gradients and optimizer states do not move; activations keep each linear layer's
      -- input in one byte instead of two (fp8_saved_bytes): q/k/v's and o's, the two MLP
      -- projections' (3h + ffn per token per layer), one micro-batch in flight
      assert.equal(b.grads, s.grads)
      assert.equal(b.optimizer, s.optimizer)
      assert.near(L * 1024 * (3 * H + FFN), b.activations - s.activations, 1e-3)
    end)
  end

  it("nvfp4 keeps the first 2 and last 8 body layers in BF16 unless told", function()
    local r = assert(run{precision = "nvfp4"})
    assert.equal(2, r.precision.bf16_first_layers)
    assert.equal(8, r.precision.bf16_last_layers)
    assert.equal((L - 10) * LINEAR, r.stages[1].quant_params)
    assert.near(2 * (0.5 + 1 / 16) * (L - 10) * LINEAR,
                r.stages[1].weights - bf16.stages[1].weights, 1e-3)
    -- Megatron's counts override; an FP8 recipe keeps none by default
    r = assert(run{precision = "fp8:tensorwise", bf16_first_layers = 1, bf16_last_layers = 3})
    assert.equal((L - 4) * LINEAR, r.stages[1].quant_params)
    assert.equal(L * LINEAR, assert(run{precision = "fp8:tensorwise"}).stages[1].quant_params)
    -- a shallow model: the default shrinks to what there is
    local small = assert(nd.model{model_type = "llama", num_hidden_layers = 6, hidden_size = H,
                                  intermediate_size = FFN, num_attention_heads = 4,
                                  num_key_value_heads = 4, vocab_size = 1024})
    r = assert(nd.estimate{model = small, device = "b200", devices = 1, global_batch = 8,
                           seq_len = 1024, precision = "nvfp4"})
    assert.equal(0, r.stages[1].quant_params)
    assert.equal(2, r.precision.bf16_first_layers)
    assert.equal(4, r.precision.bf16_last_layers)
  end)

  it("quant_cache = 0 (a trainer that re-quantizes each use) drops the copies", function()
    local r = assert(run{precision = "fp8:delayed", costs = {quant_cache = 0}})
    assert.equal(bf16.stages[1].weights, r.stages[1].weights)
  end)

  it("param gather stores the parameter quantized and all-gathers it at that width", function()
    local args = {devices = 2, zero = 1, fp8_param_gather = true, precision = "fp8:delayed"}
    local base = assert(run{devices = 2, zero = 1})
    local r = assert(run(args))
    local w = r.precision.bytes_per_param
    assert.same({quant = 1, param = 1, cache = 1, gather = 1}, w)
    -- 2 bytes of BF16 become 1 of FP8 parameter + 1 of transpose: the same weights
    assert.near(base.stages[1].weights, r.stages[1].weights, 1e-3)
    args.precision = "nvfp4"
    args.bf16_first_layers, args.bf16_last_layers = 0, 0
    r = assert(run(args))
    local q = 0.5 + 1 / 16
    assert.near(base.stages[1].weights - (2 - 2 * q) * L * LINEAR, r.stages[1].weights, 1e-3)
    assert.equal(q, r.precision.bytes_per_param.gather)
  end)

  it("under ZeRO-3 param gather halves the gathered layer buffer and keeps no copies", function()
    local layer = LINEAR + 2 * H  -- the largest gather: one layer's linear weights and norms
    local base = assert(run{devices = 2, zero = 3})
    -- double-buffered BF16 gather, and the layer's unsharded fp32 gradient (4 bytes)
    assert.equal(2 * 2 * layer + 4 * layer, base.stages[1].buffers)
    local r = assert(run{devices = 2, zero = 3, precision = "fp8:tensorwise",
                         fp8_param_gather = true})
    assert.equal(2 * (2 * 2 * H + 1 * LINEAR) + 4 * layer, r.stages[1].buffers)
    assert.equal(base.stages[1].weights, r.stages[1].weights)
    -- without param gather the gather stays BF16 and the copies die with it
    r = assert(run{devices = 2, zero = 3, precision = "fp8:tensorwise"})
    assert.equal(base.stages[1].buffers, r.stages[1].buffers)
    assert.equal(base.stages[1].weights, r.stages[1].weights)
  end)

  it("prices GEMMs at the recipe's peak slot", function()
    local b200 = assert(nd.device("b200"))
    for _, p in ipairs({"bf16", "fp8:delayed", "fp8:mxfp8", "nvfp4"}) do
      local r = assert(run{precision = p})
      assert.equal(b200:peak_flops(p), r.precision.gemm_peak_flops, p)
      assert.equal(b200:peak_flops(r.precision.gemm_precision), r.precision.gemm_peak_flops)
    end
    assert.equal(2 * b200:peak_flops("fp8"), b200:peak_flops("nvfp4"))
  end)
end)

describe("recipes a device or a strategy cannot run", function()
  local function refused(extra, dev)
    local r, why = run(extra, dev)
    assert.is_nil(r)
    return why
  end

  it("refuses a recipe whose peak slot the device lacks, naming the field", function()
    assert.equal("precision: nvfp4 runs its GEMMs at nvfp4 and the device H100 has no nvfp4 "
                 .. "peak (peak_tflops.nvfp4)", refused({precision = "nvfp4"}, "h100"))
    assert.matches("fp8:mxfp8 runs its GEMMs at mxfp8 and the device H200 has no mxfp8",
                   refused({precision = "fp8:mxfp8"}, "h200"))
    assert.matches("device MI355X has no nvfp4 peak", refused({precision = "nvfp4"}, "mi355x"))
    assert.matches("fp8:delayed runs its GEMMs at fp8 and the device A100%-80GB has no fp8 peak",
                   refused({precision = "fp8"}, "a100-80gb"))
    -- and takes those the part has
    assert.truthy(run({precision = "fp8:mxfp8"}, "mi355x"))
    assert.truthy(run({precision = "fp8:blockwise"}, "h100"))
    assert.truthy(run({precision = "nvfp4"}, "gb300"))
  end)

  it("refuses param gather without a quantized recipe, or where no trainer keeps one", function()
    assert.equal("fp8_param_gather: needs an fp8 or nvfp4 precision, not bf16",
                 refused{fp8_param_gather = true})
    assert.matches("fp8:rowwise keeps no quantized parameter",
                   refused{precision = "fp8:rowwise", fp8_param_gather = true})
    assert.truthy(run{precision = "fp8:rowwise", fp8_param_gather = true, zero = 3, devices = 2})
  end)

  it("refuses BF16 layer counts outside the model", function()
    assert.equal("bf16_first_layers: expected -1 (the recipe's) or 0..12, got 13",
                 refused{precision = "fp8", bf16_first_layers = 13})
    assert.matches("^bf16_first_layers %+ bf16_last_layers: 6 %+ 7 exceed the 12 body layers",
                   refused{precision = "fp8", bf16_first_layers = 6, bf16_last_layers = 7})
  end)

  it("raises on a recipe name the table lacks, listing the table", function()
    local ok, err = pcall(run, {precision = "fp8:dynamic"})
    assert.is_false(ok)
    assert.matches("precision: expected bf16, fp16, fp8 %(fp8:delayed%), fp8:tensorwise, "
                   .. "fp8:rowwise, fp8:blockwise, fp8:mxfp8 or nvfp4, got 'fp8:dynamic'", err)
  end)
end)

describe("the search with a precision recipe", function()
  local job = {model = model, devices = 8, global_batch = 64, seq_len = 1024, tp = {1, 2},
               pp = 1, cp = 1, zero = 1}  -- ZeRO-1: the copies stay (not under ZeRO-3)
  local function search(dev, precision)
    local a = {device = dev, precision = precision}
    for k, v in pairs(job) do a[k] = v end
    return nd.search(a)
  end

  it("refuses up front what the device cannot run, with the estimator's reason", function()
    local ranked, why = search("h100", "nvfp4")
    assert.is_nil(ranked)
    assert.equal("precision: nvfp4 runs its GEMMs at nvfp4 and the device H100 has no nvfp4 "
                 .. "peak (peak_tflops.nvfp4)", why)
  end)

  it("refuses param gather without a quantized recipe up front", function()
    local a = {device = "b200", fp8_param_gather = true}
    for k, v in pairs(job) do a[k] = v end
    local ranked, why = nd.search(a)
    assert.is_nil(ranked)
    assert.equal("fp8_param_gather: needs an fp8 or nvfp4 precision, not bf16", why)
  end)

  it("passes param gather to every candidate", function()
    local a = {device = "b200", precision = "fp8:delayed", fp8_param_gather = true}
    for k, v in pairs(job) do a[k] = v end
    local ranked, info = assert(nd.search(a))
    local best = ranked[1]
    -- the search's re-pricing of a row (--json, the exports) keeps the option too
    local detail = require("ndplan.search").detail(best, info)
    assert.is_true(detail.precision.fp8_param_gather)
    assert.equal(best.peak_memory_bytes, detail.peak_memory_bytes)
    local again = assert(nd.estimate{model = model, device = "b200", devices = 8,
                                     global_batch = 64, seq_len = 1024, tp = best.strategy.tp,
                                     dp = best.strategy.dp, pp = best.strategy.pp, cp = best.strategy.cp,
                                     zero = best.strategy.zero,
                                     mbs = best.strategy.mbs, sp = best.strategy.sp,
                                     precision = "fp8:delayed", fp8_param_gather = true})
    assert.equal(again.peak_memory_bytes, best.peak_memory_bytes)
    assert.equal(again.step_time_s, best.step_time_s)
  end)

  it("prices every candidate with the recipe, as the estimator does", function()
    local ranked, info = assert(search("b200", "fp8:mxfp8"))
    local best = ranked[1]
    assert.equal("fp8:mxfp8", info.space.precision)
    local again = assert(nd.estimate{model = model, device = "b200", devices = 8,
                                     global_batch = 64, seq_len = 1024, tp = best.strategy.tp,
                                     dp = best.strategy.dp, pp = best.strategy.pp, cp = best.strategy.cp,
                                     zero = best.strategy.zero,
                                     mbs = best.strategy.mbs, sp = best.strategy.sp,
                                     precision = "fp8:mxfp8"})
    assert.equal(again.peak_memory_bytes, best.peak_memory_bytes)
    -- and the recipe's weight copies are in it (the weights; its activations are smaller)
    assert.is_true(best.memory_parts_bytes.weights > assert(nd.estimate{model = model,
      device = "b200", devices = 8, global_batch = 64, seq_len = 1024, tp = best.strategy.tp,
      dp = best.strategy.dp, pp = best.strategy.pp, cp = best.strategy.cp,
      zero = best.strategy.zero, mbs = best.strategy.mbs,
      sp = best.strategy.sp}).memory_parts_bytes.weights)
  end)
end)

describe("row-wise scaled FP8 GEMMs", function()
  local function step(eff, precision)
    local dev = assert(nd.device("h100"))
    if eff then dev = assert(device.with_efficiency(dev, eff)) end
    local r = assert(nd.estimate{model = "llama3.1-8b", device = dev, devices = 8,
                                 global_batch = 8, seq_len = 4096, precision = precision})
    return r.step_time_s, r.time_parts_s
  end

  it("run at gemm_fp8 until the device or profile gives them their own rate", function()
    local base = assert(nd.device("h100")).efficiency.gemm_fp8
    local rw = step(nil, "fp8:rowwise")
    local same = step({gemm_fp8_rowwise = base}, "fp8:rowwise")
    assert.is_true(math.abs(rw - same) <= 1e-12 * rw)
  end)

  it("take only the row-wise recipe's linear GEMMs to gemm_fp8_rowwise", function()
    local base = assert(nd.device("h100")).efficiency.gemm_fp8
    local _, fast = step(nil, "fp8:rowwise")
    local _, slow = step({gemm_fp8_rowwise = base / 2}, "fp8:rowwise")
    assert.is_true(slow.forward > fast.forward and slow.backward > fast.backward)
    -- other recipes ignore the field
    assert.equal(step(nil, "fp8:tensorwise"), step({gemm_fp8_rowwise = base / 2}, "fp8:tensorwise"))
  end)
end)

-- Sequence-parallel all-gathers under quantized recipes (tp_gather_quantized): TE casts a
-- column-parallel layer's input before gathering it; reduce-scatters stay in 16 bits.
-- Collectives are affine in their bytes (alpha-beta), so the TP time is affine in the
-- gathered bytes per element: checked through that, not through the fabric's numbers.
describe("TP all-gathers of quantized recipes", function()
  local function tp(precision, share)
    -- no launch floor: every collective shows whole (no stack: tp_overlap 0)
    local dev = assert(device.with_efficiency(assert(nd.device("b200")), {kernel_overhead = 0}))
    local r = assert(nd.estimate{model = "llama3.1-8b", device = dev, devices = 8, tp = 8,
                                 sp = true, global_batch = 8, seq_len = 4096,
                                 precision = precision,
                                 costs = share and {tp_gather_quantized = share} or nil})
    return r.time_parts_s.tp_comm
  end
  local function near(a, b) return math.abs(a - b) <= 1e-9 * math.abs(b) end

  it("gather FP8 bytes, or 16 bits with the share at 0", function()
    local bf16, fp8 = tp("bf16"), tp("fp8:tensorwise")
    assert.is_true(fp8 < bf16)
    assert.is_true(near(tp("fp8:tensorwise", 0), bf16))
    -- half the share gathers halfway between 1 and 2 bytes per element
    assert.is_true(near(tp("fp8:tensorwise", 0.5), (bf16 + fp8) / 2))
    -- MXFP8 gathers its E8M0 scale per 32 elements too: (2 - (1 + 1/32)) of FP8's saving
    assert.is_true(near(bf16 - tp("fp8:mxfp8"), (1 - 1 / 32) * (bf16 - fp8)))
  end)

  it("row-wise scaling gathers 16 bits (it casts after the gather)", function()
    assert.is_true(near(tp("fp8:rowwise"), tp("bf16")))
  end)
end)

describe("what the FP8 recipes cost beyond their widths (H100)", function()
  -- Llama 3.1 8B on one H100: the linear layers dominate, so each recipe's own costs show
  local function step(precision, costs)
    local r = assert(nd.estimate{model = "llama3.1-8b", device = "h100", devices = 8,
                                 global_batch = 64, seq_len = 4096, precision = precision,
                                 recompute = "full", zero = 1, costs = costs})
    return r.step_time_s, r
  end

  it("prices delayed < tensorwise (amax pass) < blockwise (software block scales)", function()
    local delayed, tensorwise, blockwise = step("fp8:delayed"), step("fp8:tensorwise"),
                                           step("fp8:blockwise")
    assert.is_true(delayed < tensorwise, delayed .. " " .. tensorwise)
    assert.is_true(tensorwise < blockwise, tensorwise .. " " .. blockwise)
    assert.is_true(blockwise < step("bf16"))  -- still faster than BF16
  end)

  it("puts each difference in its named cost", function()
    -- without the amax pass, tensorwise prices as delayed
    assert.near(step("fp8:delayed"), step("fp8:tensorwise", {fp8_amax_bytes = 0}), 1e-12)
    -- at the per-tensor rate, blockwise is over delayed by its block scales alone: 2 copies
    -- x 4 bytes / 128 per cast element, a small share of the 4-byte cast
    local d, b = step("fp8:delayed"), step("fp8:blockwise", {fp8_block_gemm_rate = 1})
    assert.is_true(b > d and b - d < 0.01 * d, d .. " " .. b)
    -- a lower block GEMM rate is slower
    assert.is_true(step("fp8:blockwise", {fp8_block_gemm_rate = 0.75})
                   > step("fp8:blockwise", {fp8_block_gemm_rate = 0.9}))
  end)

  it("refuses a block GEMM rate of 0", function()
    local r, why = nd.estimate{model = "llama3.1-8b", device = "h100", devices = 8,
                               global_batch = 64, seq_len = 4096, precision = "fp8:blockwise",
                               costs = {fp8_block_gemm_rate = 0}}
    assert.is_nil(r)
    assert.matches("fp8_block_gemm_rate: expected a number in %(0, 1%]", why)
  end)
end)
