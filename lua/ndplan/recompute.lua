--[[
ndplan.recompute: recompute potentials over plan tables (the prior art's potential.py).
Starting from a configuration's chosen per-layer recompute plan, which plans run exactly one
more layer fully recomputed, and how to rank, group, plot and write them. Pure Lua.

The plan object (a table; every field optional unless a function says otherwise):
  score         its step time in seconds, or the policy's objective (lower is better)
  memory        its heaviest stage, MB
  dimensions    array of {name, value} pairs in the order DP, EP, TP, CP, PP, VPP, MB, MBS,
                SP, ZERO: the strategy's degrees. Each pair is {"DP", 8} or {name = "DP",
                value = 8}. Two plans have the same dimensions when the pairs are equal by
                value, in order.
  ranges        array of {first, count, kind, mode, option, offload_bytes}: consecutive
                layers (counted from 0) with the same kind and option merged.
                  mode     "off", "selective" or "full"; "none" (the C estimator's name for
                           off) is accepted and read as "off"
                  option   optional: {switches = ..., link_bandwidth = ..., offload_bytes = ...}
                           switches: {op = 0|1} (0 = recomputed, as in the prior art) or an
                           array of the recomputed op names
                  offload_bytes  bytes offloaded to the host per micro-batch, 0 or nil for
                           none; option.offload_bytes and option.link_bandwidth (the prior
                           art's name) mean the same. A range offloads when any is > 0.
  stage_memory  array, MB per pipeline stage
  stage_savings array, time each stage saves against full recompute
  score_parts   table of named time parts
  mode          set when one mode covers every layer (a whole-model plan)

Ranges are validated when read: a negative first, a non-positive count, an unknown mode or
overlapping ranges raise. Gaps between ranges are allowed (those layers are not stated).
No function modifies its arguments, except keep_potential, which appends to `kept`.
]]
local M = {}

M.MODES = {"off", "selective", "full"}
local MODE_NAME = {off = "off", none = "off", selective = "selective", full = "full"}

M.SORT_ERROR = "recompute results must have finite performance scores before sorting"

-- normalise_mode(m) -> "off" | "selective" | "full" | nil (unknown)
function M.normalise_mode(m)
  return MODE_NAME[m]
end

local function is_finite(x)
  return type(x) == "number" and x == x and x ~= math.huge and x ~= -math.huge
end

local function is_whole(x)
  return math.type(x) == "integer" or (is_finite(x) and x == math.floor(x))
end

---------------------------------------------------------------------------------------------
-- Dimensions
---------------------------------------------------------------------------------------------

-- dimension_pair(p) -> name, value (accepts {name, value} and {name = , value = })
function M.dimension_pair(p)
  if p.name ~= nil then return p.name, p.value end
  return p[1], p[2]
end

local function dims_of(x)
  if type(x) ~= "table" then return {} end
  if x.dimensions ~= nil or x.score ~= nil or x.ranges ~= nil or x.plans ~= nil then
    return x.dimensions or {}
  end
  return x  -- already an array of pairs
end

-- same_dimensions(a, b): a and b are plans (or arrays of pairs); true when their pairs are
-- equal by value, in the same order.
function M.same_dimensions(a, b)
  local da, db = dims_of(a), dims_of(b)
  if da == db then return true end  -- (plans of one strategy may share theirs)
  if #da ~= #db then return false end
  for i = 1, #da do
    local na, va = M.dimension_pair(da[i])
    local nb, vb = M.dimension_pair(db[i])
    if na ~= nb or va ~= vb then return false end
  end
  return true
end

---------------------------------------------------------------------------------------------
-- Ranges and layers
---------------------------------------------------------------------------------------------

-- offload_bytes(range) -> bytes offloaded per micro-batch (0 for none)
function M.offload_bytes(range)
  local o = range.option or {}
  local b = range.offload_bytes or o.offload_bytes or o.link_bandwidth or 0
  if type(b) ~= "number" then return 0 end
  return b
end

-- recomputed_ops(option) -> sorted array of the recomputed op names (empty when none stated)
function M.recomputed_ops(option)
  local ops = {}
  local switches = option and option.switches
  if type(switches) ~= "table" then return ops end
  if #switches > 0 then
    for _, name in ipairs(switches) do ops[#ops + 1] = tostring(name) end
  else
    for name, keep in pairs(switches) do
      if keep == 0 or keep == false then ops[#ops + 1] = tostring(name) end
    end
  end
  table.sort(ops)
  return ops
end

local function describe(x)
  if type(x) == "string" then return "'" .. x .. "'" end
  return tostring(x)
end

-- has_ranges(plan): the plan is stated per layer (a non-empty ranges array)
function M.has_ranges(plan)
  return type(plan) == "table" and type(plan.ranges) == "table" and #plan.ranges > 0
end

local memo, shared_settings, validated, settings_of  -- kept while a reader runs (M.reading)

-- validate_ranges(plan) -> plan; raises on a negative first, a non-positive count, an
-- unknown mode, a negative offload or overlapping ranges. A plan without ranges is valid.
function M.validate_ranges(plan)
  if not M.has_ranges(plan) then return plan end
  if validated and validated[plan] then return plan end  -- read unchanged while reading
  local ordered, overlap, last_first, last_last, stated, full = true, nil, nil, nil, 0, 0
  for i, r in ipairs(plan.ranges) do
    if type(r) ~= "table" then
      error(string.format("recompute range %d: expected a table, got %s", i, type(r)), 0)
    end
    if not is_whole(r.first) or r.first < 0 then
      error(string.format("recompute range %d: first must be a whole number >= 0, got %s",
                          i, describe(r.first)), 0)
    end
    if not is_whole(r.count) or r.count < 1 then
      error(string.format("recompute range %d: count must be a whole number >= 1, got %s",
                          i, describe(r.count)), 0)
    end
    if MODE_NAME[r.mode] == nil then
      error(string.format("recompute range %d: unknown mode %s (expected off, selective or full)",
                          i, describe(r.mode)), 0)
    end
    local b = r.offload_bytes or (r.option or {}).offload_bytes or (r.option or {}).link_bandwidth
    if b ~= nil and not (is_finite(b) and b >= 0) then
      error(string.format("recompute range %d: offload_bytes must be a number >= 0, got %s",
                          i, describe(b)), 0)
    end
    -- plans state their ranges in layer order: checked as they come, sorted only when not
    local first, last = r.first, r.first + r.count - 1
    if ordered and last_first and first < last_first then ordered = false
    elseif ordered and last_first and first <= last_last and not overlap then
      overlap = {last_first, last_last, first, last}
    end
    last_first, last_last = first, last
    stated = stated + r.count  -- (and full: range_counts', kept while reading)
    if MODE_NAME[r.mode] == "full" then full = full + r.count end
  end
  if not ordered then  -- the first overlap in layer order
    local spans = {}
    for i, r in ipairs(plan.ranges) do spans[i] = {r.first, r.first + r.count - 1} end
    table.sort(spans, function(a, b) return a[1] < b[1] end)
    overlap = nil
    for i = #spans, 2, -1 do
      local a, b = spans[i - 1], spans[i]
      if b[1] <= a[2] then overlap = {a[1], a[2], b[1], b[2]} end
    end
  end
  if overlap then
    error(string.format("recompute ranges overlap: layers %d-%d and %d-%d",
                        table.unpack(overlap)), 0)
  end
  if validated then validated[plan] = {stated, full} end
  return plan
end

-- While a reader runs (M.reading), layer_modes keeps what it found for each plan, so one
-- that reads many plans it does not change expands each plan's ranges once, and finds each
-- range's setting once (settings_of); equal settings are then one table (shared), so
-- comparing plans mostly compares identities. (validated: plans checked, their range_counts)

-- reading(f, ...) -> f(...), with layer_modes' findings kept until f returns or raises.
-- f must not change the ranges of a plan it reads, nor the settings layer_modes gives.
function M.reading(f, ...)
  if memo then return f(...) end
  memo, shared_settings = setmetatable({}, {__mode = "k"}), {}
  validated, settings_of = setmetatable({}, {__mode = "k"}), setmetatable({}, {__mode = "k"})
  local r = table.pack(pcall(f, ...))
  memo, shared_settings, validated, settings_of = nil, nil, nil, nil
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

-- range_setting(r) -> {kind, mode, offload_bytes, ops} of a (validated) range's layers,
-- mode normalised (ops: recomputed_ops); while reading, one table per range and per setting
local function setting(r)
  local known = settings_of and settings_of[r]
  if known then return known end
  local s = {kind = r.kind, mode = MODE_NAME[r.mode], offload_bytes = M.offload_bytes(r),
             ops = M.recomputed_ops(r.option)}
  local kind = type(s.kind) == "string" and "s" .. s.kind or s.kind == nil and "n"
  if shared_settings and kind then  -- (a kind of another type keeps its own table)
    local b = s.offload_bytes
    local key = kind .. "\0" .. s.mode .. "\0" .. (b == 0 and "0" or string.format("%a", b))
                .. "\0" .. table.concat(s.ops, "\0")
    local same = shared_settings[key]
    if same then s = same else shared_settings[key] = s end
  end
  if settings_of then settings_of[r] = s end
  return s
end
M.range_setting = setting

-- A plan's (validated) ranges in layer order: they do not overlap, so their layers come out
-- ascending.
local function in_layer_order(ranges)
  for k = 2, #ranges do
    if ranges[k].first < ranges[k - 1].first then
      local sorted = {}
      for j, r in ipairs(ranges) do sorted[j] = r end
      table.sort(sorted, function(a, b) return a.first < b.first end)
      return sorted
    end
  end
  return ranges
end

-- layer_modes(plan) -> layers, indices | nil (plan not stated per layer)
-- layers[i] = {kind, mode, offload_bytes, ops} for each stated layer i (from 0), mode
-- normalised; indices = the stated layer numbers, ascending. Validates the ranges.
function M.layer_modes(plan)
  local known = memo and memo[plan]
  if known then return known[1], known[2] end
  if not M.has_ranges(plan) then return nil end
  M.validate_ranges(plan)
  local layers, indices, n = {}, {}, 0
  for _, r in ipairs(in_layer_order(plan.ranges)) do
    local s = setting(r)
    local first = math.tointeger(r.first)
    for i = first, first + math.tointeger(r.count) - 1 do
      layers[i] = s
      n = n + 1
      indices[n] = i
    end
  end
  if memo then memo[plan] = {layers, indices} end
  return layers, indices
end

-- Two layers' settings are the same when kind, mode, recomputed ops and offload agree.
local function same_setting(a, b)
  if a == b then return true end
  if a.kind ~= b.kind or a.mode ~= b.mode or a.offload_bytes ~= b.offload_bytes then
    return false
  end
  if #a.ops ~= #b.ops then return false end
  for i = 1, #a.ops do
    if a.ops[i] ~= b.ops[i] then return false end
  end
  return true
end

-- changed_layers(a, b) -> ascending layer numbers whose setting differs (or that only one
-- plan states) | nil when either plan is not stated per layer. Walked range by range (each
-- plan's, validated, in layer order do not overlap): between two places where either plan's
-- range starts or ends, each plan states one setting (its range's) or none.
function M.changed_layers(a, b)
  local va = M.has_ranges(a) and M.validate_ranges(a)
  local vb = M.has_ranges(b) and M.validate_ranges(b)
  if not va or not vb then return nil end
  local ra, rb = in_layer_order(a.ranges), in_layer_order(b.ranges)
  local changed, n, i, j = {}, 0, 1, 1
  local x, y = ra[1], rb[1]  -- each plan's range at or after `at`, and its first and last
  local xlo, ylo = math.tointeger(x.first), math.tointeger(y.first)
  local xhi, yhi = xlo + math.tointeger(x.count) - 1, ylo + math.tointeger(y.count) - 1
  local at = math.min(xlo, ylo)
  while x or y do
    local xin, yin = x and xlo <= at, y and ylo <= at
    if not xin and not yin then  -- a gap in both: on to the next range either states
      at = (x and y) and math.min(xlo, ylo) or (x and xlo or ylo)
    else
      -- up to where either plan's range ends, or the next one starts
      local hi = x and (xin and xhi or xlo - 1)
      if y then
        local h = yin and yhi or ylo - 1
        if not hi or h < hi then hi = h end
      end
      local sx, sy = xin and setting(x), yin and setting(y)
      if not (sx and sy and same_setting(sx, sy)) then
        for l = at, hi do n = n + 1; changed[n] = l end
      end
      at = hi + 1
      if xin and xhi < at then
        i = i + 1
        x = ra[i]
        if x then xlo = math.tointeger(x.first); xhi = xlo + math.tointeger(x.count) - 1 end
      end
      if yin and yhi < at then
        j = j + 1
        y = rb[j]
        if y then ylo = math.tointeger(y.first); yhi = ylo + math.tointeger(y.count) - 1 end
      end
    end
  end
  return changed
end

-- offloads(plan): some range moves bytes to the host
function M.offloads(plan)
  if not M.has_ranges(plan) then return false end
  for _, r in ipairs(plan.ranges) do
    if M.offload_bytes(r) > 0 then return true end
  end
  return false
end

-- full_layers(plan) -> the number of fully recomputed layers | nil (not stated per layer)
function M.full_layers(plan)
  if not M.has_ranges(plan) then return nil end
  M.validate_ranges(plan)
  local n = 0  -- counted per range: each of its layers has its mode
  for _, r in ipairs(plan.ranges) do
    if MODE_NAME[r.mode] == "full" then n = n + math.tointeger(r.count) end
  end
  return n
end

-- plan_scope(plan) -> "offload" | "per_layer" | "whole_model" | "unavailable"
function M.plan_scope(plan)
  if M.has_ranges(plan) then
    return M.offloads(plan) and "offload" or "per_layer"
  end
  if type(plan) == "table" and plan.mode ~= nil then return "whole_model" end
  return "unavailable"
end

---------------------------------------------------------------------------------------------
-- Ranking
---------------------------------------------------------------------------------------------

-- A missing or NaN memory sorts last among equal scores (it never breaks the order function).
local function memory_key(plan)
  local m = plan.memory
  if type(m) ~= "number" or m ~= m then return math.huge end
  return m
end

-- sort_results(plans) -> a new array, fastest first, lower peak memory first on equal
-- scores, input order after that. Raises SORT_ERROR when a score is not finite.
function M.sort_results(plans)
  if #plans <= 1 then  -- (keep_potential's usual call: one plan)
    local p = plans[1]
    if p ~= nil and (type(p) ~= "table" or not is_finite(p.score)) then error(M.SORT_ERROR, 0) end
    return {p}
  end
  local order = {}
  for i, p in ipairs(plans) do
    if type(p) ~= "table" or not is_finite(p.score) then error(M.SORT_ERROR, 0) end
    order[i] = {plan = p, index = i, memory = memory_key(p)}
  end
  table.sort(order, function(a, b)
    if a.plan.score ~= b.plan.score then return a.plan.score < b.plan.score end
    if a.memory ~= b.memory then return a.memory < b.memory end
    return a.index < b.index
  end)
  local out = {}
  for i, o in ipairs(order) do out[i] = o.plan end
  return out
end

---------------------------------------------------------------------------------------------
-- One more full layer
---------------------------------------------------------------------------------------------

local NO_KIND = {}  -- stands for a nil kind in count keys

-- The stated layers and the fully recomputed ones, counted over a plan's ranges (validated
-- ones do not overlap, so plans that differ in either count differ on some layer), or nil
-- when a range has no numeric count (layer_modes then says what is wrong).
local function range_counts(plan)
  local known = validated and validated[plan]
  if known then return known[1], known[2] end
  if not M.has_ranges(plan) then return nil end
  local stated, full = 0, 0
  for _, r in ipairs(plan.ranges) do
    if type(r) ~= "table" or type(r.count) ~= "number" then return nil end
    stated = stated + r.count
    if MODE_NAME[r.mode] == "full" then full = full + r.count end
  end
  return stated, full
end

-- Same dimensions and the same setting on every stated layer. The plans are ones
-- keep_potential validated (kept ones when they were kept).
-- sb, fb: range_counts(b).
local function same_plan(a, b, sb, fb)
  local sa, fa = range_counts(a)
  if sa and sb and (sa ~= sb or fa ~= fb) then return false end  -- no layer expanded
  if not M.same_dimensions(a, b) then return false end
  local la, ia = M.layer_modes(a)
  local lb, ib = M.layer_modes(b)
  if not la or not lb then return false end
  if #ia ~= #ib then return false end
  for n, i in ipairs(ia) do
    if ib[n] ~= i or not same_setting(la[i], lb[i]) then return false end
  end
  return true
end

-- Does `candidate` run exactly one more layer of one kind fully recomputed than `current`,
-- on the same layers, each keeping its kind? Compared as counts of (kind, mode), so which
-- layer turned full does not matter.
-- Walked span by span (both plans validated): a stretch of layers both state, of one range
-- in each, counts its length at once.
local function one_more_full(current, candidate)
  local a, b = in_layer_order(current.ranges), in_layer_order(candidate.ranges)
  local delta = {}  -- delta[kind][mode] = candidate count - current count
  local function add(kind, mode, d)
    kind = kind == nil and NO_KIND or kind
    delta[kind] = delta[kind] or {}
    delta[kind][mode] = (delta[kind][mode] or 0) + d
  end
  local i, j = 1, 1
  local at_a, at_b = math.tointeger(a[1].first), math.tointeger(b[1].first)  -- next layers
  while a[i] and b[j] do
    local ra, rb = a[i], b[j]
    -- both must state the same layers, each keeping its kind
    if at_a ~= at_b or ra.kind ~= rb.kind then return false end
    local end_a = math.tointeger(ra.first) + math.tointeger(ra.count) - 1
    local end_b = math.tointeger(rb.first) + math.tointeger(rb.count) - 1
    local last = math.min(end_a, end_b)
    local before, after = MODE_NAME[ra.mode], MODE_NAME[rb.mode]
    if after ~= before then  -- the same kind and mode count nothing
      add(ra.kind, before, at_a - last - 1)
      add(rb.kind, after, last - at_a + 1)
    end
    if end_a == last then i = i + 1; at_a = a[i] and math.tointeger(a[i].first)
    else at_a = last + 1 end
    if end_b == last then j = j + 1; at_b = b[j] and math.tointeger(b[j].first)
    else at_b = last + 1 end
  end
  if a[i] or b[j] then return false end  -- one states layers past the other's last
  local gained, lost = nil, nil
  for kind, modes in pairs(delta) do
    for mode, d in pairs(modes) do
      if d ~= 0 then
        if mode == "full" and d == 1 and gained == nil then gained = kind
        elseif mode ~= "full" and d == -1 and lost == nil then lost = kind
        else return false end
      end
    end
  end
  return gained ~= nil and gained == lost
end

-- keep_potential(current, kept, plans) -> the fastest qualifying plan, appended to `kept`,
-- or nil. Qualifying: same dimensions as `current`, one more full layer (one_more_full),
-- no offload, and no plan in `kept` with the same dimensions and per-layer settings.
function M.keep_potential(current, kept, plans)
  if type(kept) ~= "table" then error("recompute.keep_potential: kept must be a table", 2) end
  local sorted = M.sort_results(plans or {})
  if not M.has_ranges(current) then return nil end
  M.validate_ranges(current)
  for _, plan in ipairs(sorted) do
    M.validate_ranges(plan)
    if M.has_ranges(plan) and M.same_dimensions(current, plan) and not M.offloads(plan)
        and one_more_full(current, plan) then
      local seen = false
      local stated, full = range_counts(plan)
      for _, k in ipairs(kept) do
        if same_plan(k, plan, stated, full) then seen = true; break end
      end
      if not seen then
        kept[#kept + 1] = plan
        return plan
      end
    end
  end
  return nil
end

---------------------------------------------------------------------------------------------
-- Plot groups and data
---------------------------------------------------------------------------------------------

-- plot_groups(scored_space, top) -> {{dimensions, plans}, ...} for the first `top`
-- configurations (default 20, negative -> 0). Every configuration but the last takes its
-- plans scoring strictly below the next configuration's score, plus the first that does
-- not, and at least two; the last takes the mean of the earlier group sizes rounded half up
-- (two when it is alone), at least two. All limited by the plans a configuration has.
function M.plot_groups(scored_space, top)
  if top == nil then top = 20 end
  if type(top) ~= "number" then error("recompute.plot_groups: top must be a number", 2) end
  top = math.max(0, math.floor(top))
  local n = math.min(top, #scored_space)
  local groups, total = {}, 0
  for i = 1, n do
    local config = scored_space[i]
    local sorted = M.sort_results(config.plans or {})
    local want
    if i < n then
      local next_score = scored_space[i + 1].score
      if type(next_score) ~= "number" then
        error(string.format("recompute.plot_groups: configuration %d has no score", i + 1), 0)
      end
      local below = 0
      for _, p in ipairs(sorted) do
        if p.score < next_score then below = below + 1 end
      end
      want = math.max(2, below + 1)
    elseif n == 1 then
      want = 2
    else
      want = math.max(2, math.floor(total / (n - 1) + 0.5))
    end
    local plans = {}
    for j = 1, math.min(want, #sorted) do plans[j] = sorted[j] end
    groups[i] = {dimensions = config.dimensions, plans = plans}
    total = total + #plans
  end
  return groups
end

-- trainer_plan(plan) -> mode, layers as a trainer reads activation_checkpoint.mode and
-- .layers. A whole-model mode gives (mode, {}). Per layer, the default is the recomputing
-- mode most layers use (ties go to full; "off" when none recomputes) and layers maps "i" or
-- "i-j" (runs of consecutive layers with one mode, across kinds) to each mode that differs
-- from the default. A plan stated neither way gives nil.
function M.trainer_plan(plan)
  if type(plan) ~= "table" then return nil end
  if plan.mode ~= nil then
    local mode = MODE_NAME[plan.mode]
    if mode == nil then
      error(string.format("recompute plan: unknown mode %s (expected off, selective or full)",
                          describe(plan.mode)), 0)
    end
    return mode, {}
  end
  if not M.has_ranges(plan) then return nil end
  M.validate_ranges(plan)
  -- per range, in layer order: each of a range's layers has the range's mode
  local ranges = in_layer_order(plan.ranges)
  local full, selective = 0, 0
  for _, r in ipairs(ranges) do
    local m = MODE_NAME[r.mode]
    if m == "full" then full = full + math.tointeger(r.count)
    elseif m == "selective" then selective = selective + math.tointeger(r.count) end
  end
  local default = "off"
  if full > 0 and full >= selective then default = "full"
  elseif selective > 0 then default = "selective" end
  local out = {}
  local function close(first, last, mode)
    if mode ~= default then
      out[first == last and tostring(first) or (first .. "-" .. last)] = mode
    end
  end
  -- runs of consecutive layers with one mode: a range continues the run before it when it
  -- starts right after it with the same mode
  local first, last, mode = nil, nil, nil
  for _, r in ipairs(ranges) do
    local m, a = MODE_NAME[r.mode], math.tointeger(r.first)
    local b = a + math.tointeger(r.count) - 1
    if first ~= nil and a == last + 1 and m == mode then
      last = b
    else
      if first ~= nil then close(first, last, mode) end
      first, last, mode = a, b, m
    end
  end
  if first ~= nil then close(first, last, mode) end
  return default, out
end

-- plot_data(groups) -> {{dimensions, records = {{score, parts, memory, mode, layers,
-- full_layers}, ...}}, ...}: mode and layers are the trainer plan (nil when the plan is not
-- stated per layer or as a whole-model mode), full_layers nil when not stated per layer.
function M.plot_data(groups)
  local out = {}
  for g, group in ipairs(groups) do
    local records = {}
    for p, plan in ipairs(group.plans or {}) do
      local mode, layers = M.trainer_plan(plan)
      records[p] = {score = plan.score, parts = plan.score_parts, memory = plan.memory,
                    mode = mode, layers = layers, full_layers = M.full_layers(plan)}
    end
    out[g] = {dimensions = group.dimensions, records = records}
  end
  return out
end

-- write_csv(potentials, path) -> true: recompute_potentials.csv (see ndplan.recompute_csv)
function M.write_csv(potentials, path)
  return require("ndplan.out.recompute_csv").write(potentials, path)
end

return M
