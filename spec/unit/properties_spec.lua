-- Properties of the estimators over random models and strategies (issue 7): every figure
-- finite and positive; more recompute never raises memory; a larger memory budget never
-- makes the per-layer plan slower; doubling TP never raises per-device weight memory; a
-- per-layer plan is never slower than whole-model full recompute when that fits.
--
-- The cases come from a xorshift32 generator with a fixed seed, so every run prices the same
-- ~200 (model, strategy) pairs; a failure names the case (index, model, strategy) to rerun.
-- Set NDPLAN_PROP_SEED to explore other seeds, NDPLAN_PROP_CASES for more cases.
local nd = require "ndplan"

local SEED = tonumber(os.getenv("NDPLAN_PROP_SEED") or "") or 0x2545F491
local CASES = tonumber(os.getenv("NDPLAN_PROP_CASES") or "") or 200
local REL = 1e-9  -- floating-point slack on comparisons of sums

-- Known violations, found by this spec and reported to the core's owner: the per-layer
-- properties skip these cases (and say so as pending) unless NDPLAN_PROP_STRICT=1. Delete an
-- entry once the core is fixed, so the spec holds the fix. (Two earlier entries, "every
-- per-layer plan with vpp > 1 refused" and "no plan within ~1% above the full-recompute
-- peak", went with the planner rewrite of 114f3d9, and "offload: a larger budget can be
-- slower" went when the planner counted the exposed host copies; the spec checks all three.)
local STRICT = os.getenv("NDPLAN_PROP_STRICT") == "1"
local KNOWN = {}
local KNOWN_ORDER = {}
local function known_issue(args)
  if STRICT then return nil end
  for _, name in ipairs(KNOWN_ORDER) do
    if KNOWN[name](args) then return name end
  end
end

-- {======================================================================
-- A reproducible generator (xorshift32: Marsaglia 2003)
-- =======================================================================
local state = SEED & 0xffffffff
if state == 0 then state = 1 end

local function rand()
  state = state ~ ((state << 13) & 0xffffffff)
  state = state ~ (state >> 17)
  state = state ~ ((state << 5) & 0xffffffff)
  return state
end

local function between(lo, hi) return lo + rand() % (hi - lo + 1) end
local function pick(t) return t[rand() % #t + 1] end
local function chance(n) return rand() % n == 0 end  -- true one time in n

-- }======================================================================

-- {======================================================================
-- Models, devices and strategies
-- =======================================================================
local BUNDLED = {"llama3.1-8b", "llama3.1-70b", "qwen3-30b-a3b", "mixtral-8x7b",
                 "gemma3-12b", "qwen3-next-80b-a3b", "gpt-oss-120b", "deepseek-v3"}
local DEVICES = {"h100", "a100-80gb", "h200", "mi300x", "b200"}

local models, devices = {}, {}
local function bundled(name)
  models[name] = models[name] or assert(nd.model(name))
  return models[name]
end
local function device(name)
  devices[name] = devices[name] or assert(nd.device(name))
  return devices[name]
end

-- A random dense decoder: GPT-2 style (LayerNorm, learned positions, 4h MLP) or Llama style
-- (RMSNorm, GQA, SwiGLU).
local function random_shape()
  local heads = pick{8, 12, 16, 32, 64}
  local head_dim = pick{64, 128}
  local h = heads * head_dim
  local layers = between(2, 64)
  local vocab = pick{32000, 50257, 128256}
  local cfg
  if chance(2) then
    cfg = {model_type = "gpt2", n_layer = layers, n_embd = h, n_head = heads,
           vocab_size = vocab, n_positions = 8192}
  else
    local kv = heads // pick{1, 2, 4, 8}
    cfg = {model_type = "llama", hidden_size = h, num_hidden_layers = layers,
           num_attention_heads = heads, num_key_value_heads = kv,
           intermediate_size = (h * 8 // 3 + 255) // 256 * 256, vocab_size = vocab,
           max_position_embeddings = 8192, tie_word_embeddings = false}
  end
  local m = assert(nd.model(cfg))
  return m, string.format("%s L%d h%d a%d", cfg.model_type, layers, h, heads)
end

local function divides(a, b) return b % a == 0 end

-- A strategy that mostly meets the divisibility rules (some are still refused).
local function random_case()
  local m, label
  if chance(3) then m, label = random_shape()
  else label = pick(BUNDLED); m = bundled(label) end
  local spec = m:spec()
  local layers = spec.num_layers
  local tp = pick{1, 2, 4, 8}
  while not divides(tp, spec.num_heads) do tp = tp // 2 end
  local pp = pick{1, 1, 2, 4, 8}
  while pp > layers do pp = pp // 2 end
  local cp = chance(4) and 2 or 1
  local dp = pick{1, 2, 4, 8}
  local args = {
    model = m, device = device(pick(DEVICES)),
    tp = tp, pp = pp, cp = cp, dp = dp, sp = tp > 1,
    mbs = pick{1, 1, 2, 4},
    seq_len = pick{1024, 2048, 4096, 8192},
    zero = pp == 1 and between(0, 3) or between(0, 2),
    flash_attention = not chance(6),
    schedule = pick{"1f1b", "1f1b", "gpipe", "zb"},
  }
  local mb = pick{1, 2, 4, 8, 16}
  if pp > 1 and chance(3) and divides(pp * 2, layers) then  -- interleaved
    args.vpp = 2
    mb = pp * pick{1, 2}
  elseif pp > 1 and pp % 2 == 0 and chance(5) then
    args.schedule = "dualpipe"
    mb = 2 * pp
  end
  if spec.num_experts > 0 then
    local ep = pick{1, 2, 4, 8}
    while ep > 1 and not (divides(ep, spec.num_experts) and divides(ep, dp * cp * tp)) do
      ep = ep // 2
    end
    args.ep = ep
  end
  if chance(8) then args.offload = pick{0.5, 1.0} end
  args.mb = mb
  args.devices = dp * tp * cp * pp
  args.global_batch = dp * args.mbs * mb
  return args, label
end

local function copy(t, extra)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

local function describe_case(i, label, args)
  local keys = {}
  for _, k in ipairs{"tp", "pp", "vpp", "cp", "dp", "ep", "sp", "zero", "mbs", "mb", "seq_len",
                     "schedule", "recompute", "offload", "flash_attention", "max_mem"} do
    if args[k] ~= nil then keys[#keys + 1] = k .. "=" .. tostring(args[k]) end
  end
  return string.format("case %d (%s on %s): %s", i, label, args.device.name,
                       table.concat(keys, " "))
end

-- }======================================================================

-- Every case, priced once with a random whole-model recompute mode.
local cases, refused, reasons = {}, 0, {}
for i = 1, CASES do
  local args, label = random_case()
  args.recompute = pick{"none", "selective", "full"}
  local r, why = nd.estimate(args)
  if r then cases[#cases + 1] = {i = i, label = label, args = args, result = r}
  else
    refused = refused + 1
    reasons[#reasons + 1] = why
  end
end

-- Collects failures so one run reports every broken case, not only the first.
local function failures()
  local list = {}
  return function(msg) list[#list + 1] = msg end, function()
    if #list > 0 then
      local shown = {}
      for k = 1, math.min(#list, tonumber(os.getenv("NDPLAN_PROP_SHOW") or "") or 10) do
        shown[k] = list[k]
      end
      error(string.format("%d failure(s):\n  %s", #list, table.concat(shown, "\n  ")), 2)
    end
  end
end

local function finite(x) return type(x) == "number" and x == x and x > -math.huge
                                and x < math.huge end

describe("estimator properties over random models and strategies", function()
  it("prices at least half of the strategies it is given", function()
    assert.is_true(#cases >= CASES / 2, string.format(
      "%d of %d priced; first refusals: %s", #cases, CASES,
      table.concat(reasons, " | ", 1, math.min(#reasons, 5))))
  end)

  it("gives finite, positive figures", function()
    local fail, done = failures()
    for _, c in ipairs(cases) do
      local r, name = c.result, describe_case(c.i, c.label, c.args)
      for _, k in ipairs{"step_time_s", "tokens_per_s", "mfu", "hfu", "model_flops",
                         "hardware_flops", "peak_memory_bytes"} do
        if not (finite(r[k]) and r[k] > 0) then fail(name .. ": " .. k .. " = " .. tostring(r[k])) end
      end
      local sum = 0
      for k, v in pairs(r.time_parts_s) do
        if not (finite(v) and v >= 0) then fail(name .. ": time part " .. k .. " = " .. tostring(v)) end
        sum = sum + v
      end
      if math.abs(sum - r.step_time_s) > REL * r.step_time_s then
        fail(name .. ": time parts add up to " .. sum .. ", step " .. r.step_time_s)
      end
      for s, st in ipairs(r.stages) do
        for _, k in ipairs{"weights", "grads", "optimizer", "activations", "buffers", "reserve",
                           "peak", "forward_s", "backward_s", "recompute_s", "comm_s"} do
          if not (finite(st[k]) and st[k] >= 0) then
            fail(string.format("%s: stage %d %s = %s", name, s, k, tostring(st[k])))
          end
        end
        if st.peak > r.peak_memory_bytes then fail(name .. ": a stage peaks above the peak") end
      end
    end
    done()
  end)

  it("never raises memory with more recompute (none >= selective >= full)", function()
    local fail, done = failures()
    for _, c in ipairs(cases) do
      local peaks = {}
      for _, mode in ipairs{"none", "selective", "full"} do
        local r = nd.estimate(copy(c.args, {recompute = mode}))
        peaks[mode] = r and r.peak_memory_bytes
      end
      local name = describe_case(c.i, c.label, c.args)
      if not (peaks.none and peaks.selective and peaks.full) then
        fail(name .. ": a recompute mode refused where another was priced")
      elseif not (peaks.none >= peaks.selective * (1 - REL)
                  and peaks.selective >= peaks.full * (1 - REL)) then
        fail(string.format("%s: peaks none %.6g selective %.6g full %.6g", name, peaks.none,
                           peaks.selective, peaks.full))
      end
    end
    done()
  end)

  it("never makes the per-layer plan slower with a larger budget (when both fit)", function()
    local fail, done = failures()
    local compared = 0
    for _, c in ipairs(cases) do
      local full = nd.estimate(copy(c.args, {recompute = "full"}))
      local none = nd.estimate(copy(c.args, {recompute = "none"}))
      if full and none and not known_issue(c.args) then
        local lo, hi = full.peak_memory_bytes, 1.05 * none.peak_memory_bytes
        local b1 = lo + (hi - lo) * (rand() % 1000) / 1000
        local b2 = b1 + (hi - b1) * (1 + rand() % 1000) / 1000
        local small = nd.estimate(copy(c.args, {recompute = "per_layer", max_mem = b1}))
        local large = nd.estimate(copy(c.args, {recompute = "per_layer", max_mem = b2}))
        if small and large then
          compared = compared + 1
          if large.step_time_s > small.step_time_s * (1 + REL) then
            fail(string.format("%s: %.6g s at %.6g B, %.6g s at %.6g B",
                               describe_case(c.i, c.label, c.args), small.step_time_s, b1,
                               large.step_time_s, b2))
          end
        end
      end
    end
    assert.is_true(compared >= #cases / 4, "only " .. compared .. " budget pairs planned")
    done()
  end)

  it("never raises per-device weight memory when TP doubles", function()
    local fail, done = failures()
    local compared = 0
    for _, c in ipairs(cases) do
      local args = c.args
      local wider = copy(args, {tp = 2 * args.tp, sp = true, devices = 2 * args.devices})
      local r2 = nd.estimate(wider)
      if r2 then
        compared = compared + 1
        local r1 = c.result
        for s = 1, #r1.stages do
          local w1, w2 = r1.stages[s].weights, r2.stages[s].weights
          if w2 > w1 * (1 + REL) then
            fail(string.format("%s: stage %d weights %.6g at tp %d, %.6g at tp %d",
                               describe_case(c.i, c.label, args), s - 1, w1, args.tp, w2,
                               2 * args.tp))
          end
        end
        -- the heaviest stage (by peak) may move when TP changes: compare the largest
        -- per-stage weights, not the weights of whichever stage peaks
        local max1, max2 = 0, 0
        for s = 1, #r1.stages do
          max1 = math.max(max1, r1.stages[s].weights)
          max2 = math.max(max2, r2.stages[s].weights)
        end
        if max2 > max1 * (1 + REL) then
          fail(describe_case(c.i, c.label, args) .. ": the largest stage weights grew")
        end
      end
    end
    assert.is_true(compared >= #cases / 4, "only " .. compared .. " TP doublings priced")
    done()
  end)

  it("never plans per layer slower than whole-model full recompute when full fits", function()
    local fail, done = failures()
    local compared = 0
    for _, c in ipairs(cases) do
      local full = nd.estimate(copy(c.args, {recompute = "full"}))
      if full and not known_issue(c.args) then
        local budget = full.peak_memory_bytes * (1 + (rand() % 1000) / 2000)
        local plan, why = nd.estimate(copy(c.args, {recompute = "per_layer", max_mem = budget}))
        local name = describe_case(c.i, c.label, c.args)
        if not plan then
          fail(string.format("%s: no plan under %.6g B where full (%.6g B) fits: %s", name,
                             budget, full.peak_memory_bytes, why))
        else
          compared = compared + 1
          if plan.step_time_s > full.step_time_s * (1 + REL) then
            fail(string.format("%s: plan %.6g s, full %.6g s", name, plan.step_time_s,
                               full.step_time_s))
          end
          if plan.peak_memory_bytes > budget * (1 + REL) then
            fail(string.format("%s: plan peaks at %.6g B over %.6g B", name,
                               plan.peak_memory_bytes, budget))
          end
        end
      end
    end
    assert.is_true(compared >= #cases / 4, "only " .. compared .. " plans compared")
    done()
  end)

  if not STRICT then
    for _, name in ipairs(KNOWN_ORDER) do
      local n = 0
      for _, c in ipairs(cases) do
        if KNOWN[name](c.args) then n = n + 1 end
      end
      pending(string.format("known issue '%s': %d case(s) left out of the per-layer properties"
                            .. " (NDPLAN_PROP_STRICT=1 checks them)", name, n))
    end
  end
end)
