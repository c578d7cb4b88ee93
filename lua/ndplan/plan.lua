-- Plan objects (the stage-planning issue's shape) built from estimates, and the retained
-- recompute potentials: from a per-layer plan, one more layer fully recomputed per step.
--
-- A plan: score (step time, s), memory (heaviest stage, MiB), dimensions ({name, value}
-- pairs: DP, EP, TP, CP, PP, VPP, MB, MBS, SP, ZERO), ranges (consecutive layers of one
-- kind and mode: first, count, kind, mode = off|selective|full, option = {switches,
-- link_bandwidth}, offload_bytes), stage_memory (MiB per stage), stage_savings (s per step
-- each stage saves against full recompute), score_parts (the estimate's time parts), mode
-- (when one mode covers every layer), and layer_recompute, layer_selective_ops and
-- stage_layers (the estimator's per-layer modes, switch sets and layout, kept to re-price
-- the plan).
local M = {}

local MiB = 2 ^ 20

M.DIMENSIONS = {{"DP", "dp"}, {"EP", "ep"}, {"TP", "tp"}, {"CP", "cp"}, {"PP", "pp"},
                {"VPP", "vpp"}, {"MB", "mb"}, {"MBS", "mbs"}, {"SP", "sp"}, {"ZERO", "zero"}}

-- The estimator says "none" where plans say "off".
local TO_PLAN = {none = "off", selective = "selective", full = "full"}
local TO_ESTIMATOR = {off = "none", selective = "selective", full = "full"}

-- What layer i's mode recomputes, as op switches (selective: the layer's own set when the
-- planner chose one, else the strategy's selective_ops).
local function switches(mode, strategy, i)
  if mode == "selective" then
    local own = strategy.layer_selective_ops and strategy.layer_selective_ops[i]
    return own or strategy.selective_ops or {"attn_core"}
  end
  return mode == "full" and {"layer"} or {}
end

local function same_switches(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- Whether layer i's switches are those of `last` (a range's), built only for selective
-- layers: full and off always recompute the same (none or the whole layer).
local function same_as(last, mode, strategy, i)
  if mode ~= "selective" then return true end  -- the modes agree (the caller checks)
  return same_switches(last.option.switches, switches(mode, strategy, i))
end

function M.dimensions(strategy)
  local dims = {}
  for _, d in ipairs(M.DIMENSIONS) do
    local v = strategy[d[2]]
    if type(v) == "boolean" then v = v and 1 or 0 end
    dims[#dims + 1] = {d[1], v}
  end
  return dims
end

-- kinds(model) -> array of kind names, one per layer (body then MTP), 1-based
function M.kinds(model)
  local out = {}
  for _, g in ipairs(model:layers()) do
    local name = g.mtp and ("mtp-" .. g.kind) or g.kind
    for i = 1, g.count do out[g.first + i] = name end
  end
  return out
end

-- The layer kinds of a model (immutable), found once: the potentials build many plans.
local kinds_of = setmetatable({}, {__mode = "k"})

-- from_estimate(result, model [, savings]) -> plan. result is an nd.estimate result.
-- One pass over the layers: each one's plan mode (from the estimator's), and the ranges of
-- consecutive layers of one kind, mode, offload and switch set.
function M.from_estimate(result, model, savings)
  local kinds = kinds_of[model]
  if not kinds then
    kinds = M.kinds(model)
    kinds_of[model] = kinds
  end
  local strategy = result.strategy
  local layer_modes, whole = strategy.layer_recompute, strategy.recompute
  local off = result.layer_offload_bytes or {}
  local ranges, per_layer, n, last, first_mode = {}, {}, 0, nil, nil
  for i = 1, #kinds do
    local m = layer_modes and layer_modes[i] or whole
    local mode = TO_PLAN[m] or error("plan: unknown recompute mode '" .. tostring(m) .. "'")
    first_mode = first_mode or mode
    per_layer[i] = TO_ESTIMATOR[mode]
    local kind, bytes = kinds[i], off[i] or 0
    if last and last.kind == kind and last.mode == mode and last.offload_bytes == bytes
       and same_as(last, mode, strategy, i) then
      last.count = last.count + 1
    else
      last = {first = i - 1, count = 1, kind = kind, mode = mode,
              option = {switches = switches(mode, strategy, i),
                        link_bandwidth = bytes > 0 and result.host_link_bandwidth or 0},
              offload_bytes = bytes}
      n = n + 1
      ranges[n] = last
    end
  end
  local stage_memory, stage_savings = {}, {}
  local saved = savings or result.stage_savings_s or {}
  for s, st in ipairs(result.stages) do
    stage_memory[s] = st.peak / MiB
    stage_savings[s] = saved[s] or 0
  end
  -- the offloaded layers, to price the plan again
  local plan = {score = result.step_time_s, memory = result.peak_memory_bytes / MiB,
                dimensions = M.dimensions(strategy), ranges = ranges,
                stage_memory = stage_memory, stage_savings = stage_savings,
                score_parts = result.time_parts_s, layer_recompute = per_layer,
                layer_offload = strategy.layer_offload, stage_layers = strategy.stage_layers,
                layer_selective_ops = strategy.layer_selective_ops}
  if whole ~= "per_layer" then plan.mode = first_mode end
  return plan
end

-- Prices a per-layer mode list (and selective switch sets) with the arguments of the
-- plan's estimate.
local function price(args, per_layer, stage_layers, layer_ops)
  local a = {}
  for k, v in pairs(args) do a[k] = v end
  a.recompute, a.recompute_modes, a.layout = nil, nil, nil
  a.layer_recompute, a.layer_selective_ops = per_layer, layer_ops
  require("ndplan.estimate").pin_layout(a, stage_layers)
  return require("ndplan").estimate(a)
end

-- Stage savings of a fixed per-layer plan: recompute time it avoids against all full.
local function savings_against_full(result, full)
  local out = {}
  for s, st in ipairs(result.stages) do
    out[s] = (full.stages[s].recompute_s - st.recompute_s) * result.strategy.mb
  end
  return out
end

-- The estimates of every plan with exactly one more layer fully recomputed than `plan`
-- that still fits the budget: {{result =, layer =}, ...} in layer order (next_plans; and
-- the potentials' step when the batch below cannot price).
local function one_more_full(args, plan)
  local out = {}
  for i, mode in ipairs(plan.layer_recompute) do
    if mode ~= "full" then
      local per_layer = {}
      for j, m in ipairs(plan.layer_recompute) do per_layer[j] = m end
      per_layer[i] = "full"
      local ops
      if plan.layer_selective_ops then
        ops = {}
        for j, o in ipairs(plan.layer_selective_ops) do ops[j] = o end
        ops[i] = {}
      end
      local r = price(args, per_layer, plan.stage_layers, ops)
      if r and r.fits then out[#out + 1] = {result = r, layer = i} end
    end
  end
  return out
end

-- The same variants priced in one call (ndplan.c.estimate.one_more_full): columns {layer,
-- step_time_s, peak_memory_bytes, n} of those that fit, in layer order; each one's full
-- result is priced (price) only when it is needed. The model, device, costs and budget are
-- the ones nd.estimate resolves for the plan's arguments (checked against its price of the
-- plan itself).
local STRATEGY_KEYS
-- args -> {model, device, costs, budget} as nd.estimate resolves them (ndplan.estimate's
-- objects and budget, from the model, device, stack, costs and max_mem of args, which every
-- step of a potentials run shares)
local resolved_of = setmetatable({}, {__mode = "k"})
local function resolve_call(est, a, args)
  local known = resolved_of[args]
  if known then return known[1], known[2], known[3], known[4] end
  local model, device, costs = est.objects(a)
  local budget = model and est.budget(device, a.max_mem)
  if budget then resolved_of[args] = {model, device, costs, budget} end
  return model, device, costs, budget
end
local function one_more_full_batch(args, plan)
  local est = require "ndplan.estimate"
  local core = require "ndplan.c.estimate"
  local a = {}
  for k, v in pairs(args) do a[k] = v end
  a.recompute, a.recompute_modes, a.layout = nil, nil, nil
  a.layer_recompute, a.layer_selective_ops = plan.layer_recompute, plan.layer_selective_ops
  est.pin_layout(a, plan.stage_layers)
  local model, device, costs, budget = resolve_call(est, a, args)
  if not budget then return nil end
  local strategy = {}
  STRATEGY_KEYS = STRATEGY_KEYS or core.names().strategy_keys  -- read once: a table per call
  for _, k in ipairs(STRATEGY_KEYS) do strategy[k] = a[k] end
  local job = {devices = a.devices, global_batch = a.global_batch, seq_len = a.seq_len}
  local ok, cols = pcall(core.one_more_full, model, device, job, strategy, costs)
  if not ok then return nil end
  local layer, step, peak = cols.layer, cols.step_time_s, cols.peak_memory_bytes
  local out = {layer = {}, step_time_s = {}, peak_memory_bytes = {}, n = 0}
  local ol, os_, op, n = out.layer, out.step_time_s, out.peak_memory_bytes, 0
  for i = 1, #layer do
    if peak[i] <= budget then
      n = n + 1
      ol[n], os_[n], op[n] = layer[i], step[i], peak[i]
    end
  end
  out.n = n
  return out
end

local function as_plan(r, model, full)
  r.strategy.recompute = "per_layer"
  return M.from_estimate(r, model, savings_against_full(r, full))
end

-- next_plans(args, model, plan) -> every plan with exactly one more layer fully recomputed
-- than `plan` that still fits the budget, priced by the estimator.
function M.next_plans(args, model, plan, full)
  local out = {}
  for i, v in ipairs(one_more_full(args, plan)) do out[i] = as_plan(v.result, model, full) end
  return out
end

-- The step of potentials: recompute.keep_potential over next_plans, each plan built only
-- when the ones before it in keep_potential's order (score, memory, then layer order) did
-- not qualify (building a plan costs more than pricing it).
local function next_potential(args, model, current, kept, full)
  local recompute = require "ndplan.recompute"
  local priced = one_more_full_batch(args, current)
  if not priced then  -- the batch could not price: each variant through nd.estimate
    local each = one_more_full(args, current)
    priced = {layer = {}, step_time_s = {}, peak_memory_bytes = {}, result = {}, n = #each}
    for i, v in ipairs(each) do
      priced.layer[i], priced.result[i] = v.layer, v.result
      priced.step_time_s[i], priced.peak_memory_bytes[i] = v.result.step_time_s,
                                                         v.result.peak_memory_bytes
    end
  end
  local function result_of(i)  -- variant i's full result, priced as next_plans prices it
    if priced.result then return priced.result[i] end
    local layer = priced.layer[i]
    local per_layer, ops = {}, nil
    for j, m in ipairs(current.layer_recompute) do per_layer[j] = m end
    per_layer[layer] = "full"
    if current.layer_selective_ops then
      ops = {}
      for j, o in ipairs(current.layer_selective_ops) do ops[j] = o end
      ops[layer] = {}
    end
    local r = assert(price(args, per_layer, current.stage_layers, ops))
    assert(r.step_time_s == priced.step_time_s[i]
           and r.peak_memory_bytes == priced.peak_memory_bytes[i],
           "plan: the batch and nd.estimate priced a variant differently")
    return r
  end
  local steps, peaks = priced.step_time_s, priced.peak_memory_bytes
  local function key(i)  -- keep_potential's order: score, memory, then layer order
    local score, peak = steps[i], peaks[i] / MiB
    if type(score) ~= "number" or score ~= score or score == math.huge or score == -math.huge then
      error(recompute.SORT_ERROR, 0)  -- as keep_potential's sort would
    end
    return score, peak == peak and peak or math.huge
  end
  local function try(i)
    return recompute.keep_potential(current, kept, {as_plan(result_of(i), model, full)})
  end
  -- the first in that order nearly always qualifies: found in one pass, the rest sorted
  -- only when it does not
  local first, fs, fm = nil, nil, nil
  for i = 1, priced.n do
    local sc, mem = key(i)
    if not first or sc < fs or (sc == fs and mem < fm) then first, fs, fm = i, sc, mem end
  end
  local nxt = first and try(first)
  if nxt then return nxt end
  local order = {}
  for i = 1, priced.n do
    local sc, mem = key(i)
    order[i] = {index = i, score = sc, memory = mem}
  end
  table.sort(order, function(a, b)
    if a.score ~= b.score then return a.score < b.score end
    if a.memory ~= b.memory then return a.memory < b.memory end
    return a.index < b.index
  end)
  for _, o in ipairs(order) do
    if o.index ~= first then
      nxt = try(o.index)
      if nxt then return nxt end
    end
  end
  return recompute.keep_potential(current, kept, {})  -- nothing qualifies (checks current)
end

-- potentials(args, model, first [, limit]) -> the retained sequence: first, then the
-- fastest plan with one more full layer at each step (ndplan.recompute.keep_potential),
-- until none qualifies or `limit` steps.
local function potentials(args, model, first, limit)
  local recompute = require "ndplan.recompute"
  if recompute.offloads(first) then return {first} end  -- the prior art's rule: none offloaded
  local full_args = {}
  for k, v in pairs(args) do full_args[k] = v end
  full_args.recompute, full_args.recompute_modes, full_args.layout = "full", nil, nil
  require("ndplan.estimate").pin_layout(full_args, first.stage_layers)
  local full = assert(require("ndplan").estimate(full_args))
  local kept = {first}
  local current = first
  while not limit or #kept <= limit do
    local nxt = next_potential(args, model, current, kept, full)
    if not nxt then break end
    current = nxt
  end
  return kept
end

-- (each plan's layers expanded once: it is compared at two steps)
function M.potentials(args, model, first, limit)
  return require("ndplan.recompute").reading(potentials, args, model, first, limit)
end

return M
