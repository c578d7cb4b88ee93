-- Budget sweep: random strategies, each priced at budgets in small steps up to the device's
-- memory; counts the strategies whose plan is slower at a larger budget (B1 < B2 and
-- step(B2) > step(B1) + 1e-9) and those that stop fitting. Issue 17; the seeded property in
-- spec/unit/budget_monotone_spec.lua keeps a smaller set in the suite.
--   NDPLAN_ROOT=$PWD build/ndplan spec/fuzz/budget_sweep.lua [SEED [STRATEGIES [STEP_GB]]]
-- Prints one line of counts, the counts per planner, then (SHOW=1) the first pair of each
-- strategy that had one.
local nd = require "ndplan"
local json = require "ndplan.io.json"

local argv = {...}
local seed = math.tointeger(tonumber(argv[1])) or 1
local count = math.tointeger(tonumber(argv[2])) or 200
local step = tonumber(argv[3]) or 1.0
math.randomseed(seed)
local function pick(t) return t[math.random(#t)] end

local MODELS = {"llama3.1-8b", "llama3.1-70b", "deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b",
                "qwen3-235b-a22b", "qwen3-32b", "gpt-oss-120b", "gemma2-9b", "nemotron-h-56b",
                "glm4.5-air", "llama4-scout"}
local DEVICES = {"h100", "a100-80gb", "a100-40gb", "h200", "b200", "mi300x"}
local MODES = {false, {"none", "selective", "full"}, {"none", "selective", "full", "offload"},
               {"none", "full"}, {"none", "selective", "full", "variants"},
               {"none", "full", "offload"}}

local function strategy()
  local tp, pp, cp, dp = pick{1, 2, 4, 8}, pick{1, 2, 4, 8, 8, 16}, pick{1, 1, 2}, pick{1, 2, 4, 8, 16}
  local mbs = pick{1, 1, 2, 4}
  local a = {model = pick(MODELS), device = pick(DEVICES), tp = tp, pp = pp, cp = cp, dp = dp,
             mbs = mbs, zero = pick{0, 1, 2, 3}, devices = tp * pp * cp * dp,
             global_batch = dp * mbs * pick{1, 2, 4, 8, 16, 32},
             seq_len = pick{2048, 4096, 8192, 16384}, stack = pick{"none", "megatron-core"},
             recompute = pick{"per_layer", "per_layer", "megatron"}}
  if pp > 1 then a.vpp = pick{1, 1, 2, 3} end
  if tp > 1 then a.sp = pick{true, false} end
  if nd.model(a.model).num_experts > 0 then a.ep = pick{1, 2, 4, 8} end
  local share = pick{0, 0.1, 0.25, 0.5, 0.75, 1.0}
  if share > 0 then a.offload = share end
  local modes = pick(MODES)
  if a.recompute == "per_layer" then
    a.recompute_modes = modes or (share == 0 and MODES[3] or nil)
  end
  if pp > 1 and (a.vpp or 1) == 1 and math.random() < 0.2 then a.layout = "balanced" end
  local key = a.recompute .. (share > 0 and "/share" or "") .. (a.layout and "/balanced" or "")
  return a, key
end

local strategies, fitted, budgets, slower, stopped = 0, 0, 0, 0, 0
local per_total, per_slower, shown = {}, {}, {}
for _ = 1, count do
  local a, key = strategy()
  strategies = strategies + 1
  local best, best_at, any, bad = nil, nil, false, false
  local b = 4
  while b <= nd.device(a.device).hbm_bytes / 1e9 + 1e-9 do
    a.max_mem = b * 1e9
    local r, why = nd.estimate(a)
    budgets = budgets + 1
    if r then
      any = true
      if best and r.step_time_s > best + 1e-9 and not bad then
        bad = true
        shown[#shown + 1] = string.format("%s: %.2f GB %.9f s, %.2f GB %.9f s", json.encode(a),
                                          best_at, best, b, r.step_time_s)
      end
      if not best or r.step_time_s < best then best, best_at = r.step_time_s, b end
    elseif not tostring(why):match("^over memory") then
      break  -- refused for another reason: every budget would say the same
    elseif any then
      stopped = stopped + 1  -- fitted at a smaller budget, not at this one
    end
    b = b + step
  end
  if any then
    fitted = fitted + 1
    per_total[key] = (per_total[key] or 0) + 1
    if bad then slower = slower + 1; per_slower[key] = (per_slower[key] or 0) + 1 end
  end
end
print(string.format("seed %d: %d strategies, %d fit at some budget, %d budgets priced, "
                    .. "%d slower at a larger budget, %d budgets that stopped fitting",
                    seed, strategies, fitted, budgets, slower, stopped))
local keys = {}
for k in pairs(per_total) do keys[#keys + 1] = k end
table.sort(keys)
for _, k in ipairs(keys) do print(string.format("  %-28s %5d slower of %5d", k, per_slower[k] or 0, per_total[k])) end
if os.getenv("SHOW") then for _, line in ipairs(shown) do print(line) end end
