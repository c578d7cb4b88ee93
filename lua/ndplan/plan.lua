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
-- the plan). The plans of one sequence share their equal dimensions arrays and ranges
-- (plans never change theirs).
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

-- dimensions(strategy [, like]) -> the strategy's {name, value} pairs; `like` (pairs, e.g.
-- an earlier plan's) when they hold the same values, so a sequence of plans of one strategy
-- shares one array (plans never change theirs).
function M.dimensions(strategy, like)
  if like then
    for i, d in ipairs(M.DIMENSIONS) do
      local v = strategy[d[2]]
      if type(v) == "boolean" then v = v and 1 or 0 end
      local pair = like[i]
      if not pair or pair[1] ~= d[1] or pair[2] ~= v then like = nil; break end
    end
    if like and #like == #M.DIMENSIONS then return like end
  end
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

-- The layer kinds of a model (immutable), found once: the potentials build many plans;
-- and where a layer's kind differs from the one before it (starts[i] true).
local kinds_of = setmetatable({}, {__mode = "k"})
local function model_kinds(model)
  local known = kinds_of[model]
  if known then return known[1], known[2] end
  local kinds, starts = M.kinds(model), {}
  for i = 2, #kinds do starts[i] = kinds[i] ~= kinds[i - 1] end
  kinds_of[model] = {kinds, starts}
  return kinds, starts
end

local NONE = {}

-- stage_figures(result) -> each stage's peak bytes and recompute seconds: from an
-- nd.estimate result without building its stages (ndplan.c.estimate.stage_figures), else
-- from result.stages.
local c_stage_figures = require("ndplan.c.estimate").stage_figures
local function stage_figures(result)
  if getmetatable(result) == "ndplan.estimate" then return c_stage_figures(result) end
  local peaks, recompute = {}, {}
  for s, st in ipairs(result.stages) do peaks[s], recompute[s] = st.peak, st.recompute_s end
  return peaks, recompute
end

-- The ranges of a plan, each one equal to a range of `like` (an earlier plan's, in layer
-- order too) replaced by that table: a step of the potentials changes one or two ranges,
-- and what the recompute module finds out about a range it keeps per table while reading.
local function same_range(a, b)
  local oa, ob = a.option, b.option
  return a.first == b.first and a.count == b.count and a.kind == b.kind and a.mode == b.mode
         and a.offload_bytes == b.offload_bytes and oa.link_bandwidth == ob.link_bandwidth
         and same_switches(oa.switches, ob.switches)
end
local function shared_ranges(ranges, earlier)
  local j, m = 1, #earlier
  for i, r in ipairs(ranges) do
    while j <= m and earlier[j].first < r.first do j = j + 1 end
    local e = earlier[j]
    if e and e.option and same_range(r, e) then ranges[i] = e end
  end
  return ranges
end

-- from_estimate(result, model [, savings [, like]]) -> plan. result is an nd.estimate
-- result; like: an earlier plan of the same strategy, whose dimensions the plan shares.
-- One pass over the layers: each one's plan mode (from the estimator's), and the ranges of
-- consecutive layers of one kind, mode, offload and switch set: a layer starts a range
-- where its estimator's mode, kind or offload differs from the layer before it, or its
-- selective switches do.
function M.from_estimate(result, model, savings, like)
  local kinds, starts = model_kinds(model)
  local strategy = result.strategy
  local layer_modes, whole = strategy.layer_recompute, strategy.recompute
  local off = result.layer_offload_bytes or NONE
  local count = #kinds
  if off ~= NONE then  -- (the estimator states offloads per layer)
    local own = {}
    for i = 2, count do own[i] = starts[i] or (off[i] or 0) ~= (off[i - 1] or 0) end
    starts = own
  end
  -- the estimator's modes are the plan's per-layer list (each checked below); a layer it
  -- does not state has the whole-model mode
  local per_layer = layer_modes and {table.unpack(layer_modes, 1, count)} or {}
  local modes, unstated = layer_modes or NONE, false
  local ranges, n, last, first_mode, mode = {}, 0, nil, nil, nil
  local prev_m, from = NONE, 1  -- (no mode is NONE); the first layer of `last`, from 1
  for i = 1, count do
    local m = modes[i]
    if m == nil then m = whole; unstated = true end
    if m ~= prev_m or starts[i]
       or (m == "selective" and not same_switches(last.option.switches,
                                                  switches(mode, strategy, i))) then
      if last then last.count = i - from end
      if m ~= prev_m then
        mode = TO_PLAN[m] or error("plan: unknown recompute mode '" .. tostring(m) .. "'")
      end
      first_mode = first_mode or mode
      local bytes = off[i] or 0
      last = {first = i - 1, count = 1, kind = kinds[i], mode = mode,
              option = {switches = switches(mode, strategy, i),
                        link_bandwidth = bytes > 0 and result.host_link_bandwidth or 0},
              offload_bytes = bytes}
      n = n + 1
      ranges[n] = last
      prev_m, from = m, i
    end
  end
  if last then last.count = count + 1 - from end
  if like then ranges = shared_ranges(ranges, like.ranges) end
  if unstated then
    for i = 1, count do per_layer[i] = TO_ESTIMATOR[TO_PLAN[modes[i] or whole]] end
  end
  local stage_memory, stage_savings = {}, {}
  local saved = savings or result.stage_savings_s or NONE
  for s, peak in ipairs((stage_figures(result))) do
    stage_memory[s] = peak / MiB
    stage_savings[s] = saved[s] or 0
  end
  -- the offloaded layers, to price the plan again
  local plan = {score = result.step_time_s, memory = result.peak_memory_bytes / MiB,
                dimensions = M.dimensions(strategy, like and like.dimensions), ranges = ranges,
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
-- (full's own figures found once: every step of the potentials compares with it)
local full_figures = setmetatable({}, {__mode = "k"})
local function savings_against_full(result, full)
  local out, mb = {}, result.strategy.mb
  local _, recompute = stage_figures(result)
  local full_recompute = full_figures[full]
  if not full_recompute then
    _, full_recompute = stage_figures(full)
    full_figures[full] = full_recompute
  end
  for s, t in ipairs(recompute) do out[s] = (full_recompute[s] - t) * mb end
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

-- The same variants priced in one call (ndplan.c.estimate.one_more_full): columns layer,
-- step_time_s, peak_memory_bytes of every variant it priced, in layer order, and the budget
-- the ones that fit are within; each one's full result is priced (price) only when it is
-- needed. The model, device, costs and budget are the ones nd.estimate resolves for the
-- plan's arguments (checked against its price of the plan itself).
-- args -> what every step's batch call shares (one table per args and per whether the plan
-- pins its layout): the model, device, costs and budget nd.estimate resolves for args
-- (ndplan.estimate's objects and budget, from the model, device, stack, costs and max_mem
-- of args), the job, and the strategy: the strategy keys of args with the recompute left to
-- the plan, whose fields each call sets (the binding reads the table during the call only).
-- false: args do not resolve.
local STRATEGY_KEYS
local calls_of = setmetatable({}, {__mode = "k"})
local function batch_call(args, pinned)
  local per = calls_of[args]
  if not per then per = {}; calls_of[args] = per end
  local call = per[pinned]
  if call ~= nil then return call end
  local est = require "ndplan.estimate"
  local a = {}
  for k, v in pairs(args) do a[k] = v end
  a.recompute, a.recompute_modes, a.layout = nil, nil, nil
  if pinned then est.pin_layout(a, {}) end  -- (each call's plan gives its stage_layers)
  local model, device, costs = est.objects(a)
  local budget = model and est.budget(device, a.max_mem)
  call = false
  if budget then
    local strategy = {}
    STRATEGY_KEYS = STRATEGY_KEYS or require("ndplan.c.estimate").names().strategy_keys
    for _, k in ipairs(STRATEGY_KEYS) do strategy[k] = a[k] end
    call = {model = model, device = device, costs = costs, budget = budget, strategy = strategy,
            job = {devices = a.devices, global_batch = a.global_batch, seq_len = a.seq_len}}
  end
  per[pinned] = call
  return call
end
-- with_plan(call, fn, stage_layers, per_layer, ops) -> fn(model, device, job, strategy,
-- costs, ...) called with the call's objects, its strategy holding that per-layer plan for
-- the call only; pcall's results.
local function with_plan(call, fn, stage_layers, per_layer, ops, ...)
  local st = call.strategy
  st.layer_recompute, st.layer_selective_ops = per_layer, ops
  if stage_layers ~= nil then st.stage_layers = stage_layers end
  local ok, a, b = pcall(fn, call.model, call.device, call.job, st, call.costs, ...)
  st.layer_recompute, st.layer_selective_ops = nil, nil  -- (no plan kept past the call)
  if stage_layers ~= nil then st.stage_layers = nil end
  return ok, a, b
end
-- (with the budget, the batch also gives the variant first in keep_potential's order and
-- its result: the step's plan is built from it, not priced again)
local function one_more_full_batch(args, plan)
  local call = batch_call(args, plan.stage_layers ~= nil)
  if not call then return nil end
  local ok, cols = with_plan(call, require("ndplan.c.estimate").one_more_full, plan.stage_layers,
                             plan.layer_recompute, plan.layer_selective_ops, call.budget)
  if not ok then return nil end
  return cols.layer, cols.step_time_s, cols.peak_memory_bytes, call.budget, call, cols.first,
         cols.result
end

-- as_plan(r, model, full, current) -> the plan of variant r of the plan `current`
local function as_plan(r, model, full, current)
  r.strategy.recompute = "per_layer"
  return M.from_estimate(r, model, savings_against_full(r, full), current)
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
  -- the variants priced: each one's layer, step time and peak, in layer order; those that
  -- fit are those within budget (nil: all of them)
  local layer, steps, peaks, budget, call, batch_first, first_result =
    one_more_full_batch(args, current)
  local results
  if not layer then  -- the batch could not price: each variant through nd.estimate
    local each = one_more_full(args, current)
    layer, steps, peaks, results = {}, {}, {}, {}
    for i, v in ipairs(each) do
      layer[i], results[i] = v.layer, v.result
      steps[i], peaks[i] = v.result.step_time_s, v.result.peak_memory_bytes
    end
  end
  local function result_of(i)  -- variant i's full result, priced as next_plans prices it
    if results then return results[i] end
    if i == batch_first then return first_result end  -- (run's result, from the batch)
    local l = layer[i]
    local per_layer, ops = {table.unpack(current.layer_recompute)}, nil  -- (no gaps)
    per_layer[l] = "full"
    if current.layer_selective_ops then
      ops = {}
      for j, o in ipairs(current.layer_selective_ops) do ops[j] = o end
      ops[l] = {}
    end
    -- the core's estimate with the objects the batch priced it with: nd.estimate's figures
    -- (what a plan reads of them) without resolving the arguments again
    local ok, r = with_plan(call, require("ndplan.c.estimate").run, current.stage_layers,
                            per_layer, ops)
    if not ok or not r then r = assert(price(args, per_layer, current.stage_layers, ops)) end
    assert(r.step_time_s == steps[i] and r.peak_memory_bytes == peaks[i],
           "plan: the batch and nd.estimate priced a variant differently")
    return r
  end
  local function try(i)
    return recompute.keep_potential(current, kept, {as_plan(result_of(i), model, full, current)})
  end
  -- keep_potential's order: score, memory (MiB; NaN last), then layer order. The first in
  -- that order nearly always qualifies: the batch names it (batch_first), else it is found
  -- in one pass; the rest are sorted only when it does not. (The columns are numbers:
  -- x - x is 0 for a finite one; MiB and bytes order alike, so bytes are compared, NaN as
  -- huge.)
  local huge, first, fs, fm = math.huge, batch_first, nil, nil
  local cap = budget or huge
  for i = 1, batch_first and 0 or #layer do
    local peak = peaks[i]
    if not (peak > cap) then
      local score = steps[i]
      if score - score ~= 0 then error(recompute.SORT_ERROR, 0) end  -- as keep_potential's sort
      if peak ~= peak then peak = huge end
      if not first or score < fs or (score == fs and peak < fm) then
        first, fs, fm = i, score, peak
      end
    end
  end
  local nxt = first and try(first)
  if nxt then return nxt end
  local order = {}
  for i = 1, #layer do
    local peak = peaks[i]
    if not (peak > cap) then
      local mem = peak / MiB
      if mem ~= mem then mem = huge end
      order[#order + 1] = {index = i, score = steps[i], memory = mem}
    end
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
