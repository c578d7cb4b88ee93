-- A larger memory budget never gives a slower plan: the per-layer planner
-- (engine/core/recompute.c) and the Megatron forms (engine/core/recompute_megatron.c), with
-- and without an offload share, on the even layout. Issue 17 found plans that slowed as the
-- budget grew (13 of 9,450 fuzzed cases); the cases below are the three causes, then a
-- property over seeded random strategies.
local nd = require "ndplan"

-- steps(args, budgets) -> the step time at each budget (GB), nil where nothing fits
local function steps(args, budgets)
  local out = {}
  for i, gb in ipairs(budgets) do
    local a = {}
    for k, v in pairs(args) do a[k] = v end
    a.max_mem = gb * 1e9
    local r, why = nd.estimate(a)
    if r then out[i] = r.step_time_s
    else assert.matches("^over memory", why, 1, false) end  -- no other failure
  end
  return out
end

-- The first budget whose plan is slower than the plan of a smaller budget, or nil.
local function first_slower(budgets, times)
  local best, at
  for i, gb in ipairs(budgets) do
    local t = times[i]
    if t then
      if best and t > best + 1e-9 then
        return string.format("%.2f GB: %.9f s, slower than %.9f s at %.2f GB", gb, t, best, at)
      end
      if not best or t < best then best, at = t, gb end
    end
  end
end

local function fits(budgets, times)
  local n = 0
  for i = 1, #budgets do if times[i] then n = n + 1 end end
  return n
end

local function range(lo, hi, step)
  local out = {}
  for i = 0, math.floor((hi - lo) / step + 0.5) do out[#out + 1] = lo + i * step end
  return out
end

-- A budget sweep whose plans never slow down as the budget grows, at least 3 of them fitting.
local function assert_monotone(args, budgets)
  local times = steps(args, budgets)
  assert.is_nil(first_slower(budgets, times))
  assert.is_true(fits(budgets, times) >= 3)
end

describe("a larger budget with an offload share", function()
  it("per layer: recompute hides host copies with its compute, not its TP traffic", function()
    -- the planner credited the repeated forward's TP all-gathers with hiding copies, which
    -- estimate.c's stage time does not: at 7 GB the last stage kept one more layer and its
    -- copies showed (0.7316 s at 6.5 GB, 0.7489 s at 7 GB)
    local args = {model = "llama3.1-8b", device = "h200", devices = 2048, global_batch = 256,
                  seq_len = 16384, tp = 8, pp = 8, vpp = 2, cp = 2, dp = 16, mbs = 1, zero = 1,
                  offload = 0.75, recompute = "per_layer", stack = "none"}
    local budgets = range(6, 9, 0.25)
    assert_monotone(args, budgets)
  end)

  it("per layer, long stages of several kinds: the merged fronts price the copies", function()
    -- Nemotron-H's 59-layer stages of three kinds go past enumerate_counts to the merged
    -- fronts, which took the fastest recompute that fit and ignored the copies (3.845 s at
    -- 79 GB, 3.947 s at 80 GB)
    local args = {model = "nemotron-h-56b", device = "h100", devices = 256, global_batch = 256,
                  seq_len = 4096, tp = 8, pp = 2, dp = 16, mbs = 2, sp = true, zero = 0,
                  offload = 1, recompute = "per_layer", stack = "megatron-core",
                  recompute_modes = {"none", "selective", "full"}}
    local budgets = range(74, 84, 1)
    assert_monotone(args, budgets)
  end)

  it("Megatron forms: the fastest block N that fits, not the smallest", function()
    -- a larger N recomputes more and copies less: the smallest fitting N was slower
    -- (0.4297 s at 108 GB, 0.4751 s at 109 GB)
    local args = {model = "gemma2-9b", device = "h200", devices = 4, global_batch = 4,
                  seq_len = 2048, tp = 1, pp = 2, dp = 2, mbs = 1, zero = 0, offload = 0.75,
                  recompute = "megatron", stack = "megatron-core"}
    local budgets = range(100, 120, 1)
    assert_monotone(args, budgets)
  end)
end)

describe("budget monotonicity over seeded random strategies", function()
  local MODELS = {"llama3.1-8b", "llama3.1-70b", "mixtral-8x7b", "qwen3-30b-a3b", "gemma2-9b",
                  "qwen3-32b", "nemotron-h-56b"}
  local DEVICES = {"h100", "a100-80gb", "h200", "b200", "mi300x"}
  local MODES = {false, {"none", "selective", "full"}, {"none", "selective", "full", "offload"},
                 {"none", "full"}, {"none", "full", "offload"}}

  it("never gives a slower plan for a larger budget (per layer and Megatron)", function()
    math.randomseed(17)
    local function pick(t) return t[math.random(#t)] end
    local configs, cases = 0, 0
    for _ = 1, 240 do
      local tp, pp, cp, dp = pick{1, 2, 4, 8}, pick{1, 2, 4, 8}, pick{1, 1, 2}, pick{1, 2, 4, 8}
      local mbs = pick{1, 2, 4}
      local a = {model = pick(MODELS), device = pick(DEVICES), tp = tp, pp = pp, cp = cp,
                 dp = dp, mbs = mbs, zero = pick{0, 1, 2, 3}, devices = tp * pp * cp * dp,
                 global_batch = dp * mbs * pick{1, 4, 16}, seq_len = pick{2048, 4096, 8192},
                 stack = pick{"none", "megatron-core"}, recompute = pick{"per_layer", "megatron"}}
      if pp > 1 then a.vpp = pick{1, 2} end
      if tp > 1 then a.sp = pick{true, false} end
      if nd.model(a.model).num_experts > 0 then a.ep = pick{1, 2, 4} end
      local share = pick{0, 0.25, 0.5, 0.75, 1}
      if share > 0 then a.offload = share end
      local modes = pick(MODES)
      if a.recompute == "per_layer" and modes then a.recompute_modes = modes end
      local budgets = range(8, nd.device(a.device).hbm_bytes / 1e9, 2)
      -- a strategy refused for another reason than memory (degrees that do not divide) is
      -- skipped: the largest budget tells
      local probe = {}
      for k, v in pairs(a) do probe[k] = v end
      probe.max_mem = budgets[#budgets] * 1e9
      local r, why = nd.estimate(probe)
      if r or why:match("^over memory") then
        local times = steps(a, budgets)
        local fitted = fits(budgets, times)
        cases = cases + #budgets
        if fitted >= 2 then configs = configs + 1 end
        local slower = first_slower(budgets, times)
        assert.is_nil(slower, slower and (require("ndplan.io.json").encode(a) .. ": " .. slower))
      end
    end
    -- measured: 139 strategies that fit at two budgets or more, 13,413 budgets priced
    assert.is_true(configs >= 100, configs .. " strategies")
    assert.is_true(cases >= 9000, cases .. " budgets")
  end)
end)
