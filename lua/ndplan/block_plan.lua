-- Recompute plans a trainer can state, chosen for the memory budget.
--
-- The per-layer planner (nd.estimate{recompute = "per_layer"}) picks every layer's mode on
-- its own. Megatron-LM cannot say that (lua/ndplan/export/megatron.lua): it recomputes
-- selectively everywhere (--recompute-granularity selective), fully on every layer
-- (--recompute-method uniform), or fully on the first N layers of each pipeline stage -- of
-- each model chunk with VPP -- with one N everywhere (--recompute-method block
-- --recompute-num-layers N), and nothing else. megatron(args, budget) prices those forms
-- directly against the budget instead of rounding a per-layer plan up.
--
-- Groups ("each stage", "each chunk") are export.groups': stages for vpp = 1, model chunks
-- in model order otherwise, MTP layers in the last one. Block N recomputes more as N grows,
-- so its peak only falls and its time only grows with N: the smallest N that fits is found
-- by bisection, and none, selective and uniform are priced as well. With layout =
-- "balanced" (vpp = 1 only) each fitting form then gets its own layout, by the core's rule
-- (engine/core/layout.c): the slowest stage gives a layer to a neighbour while the step gets
-- faster and every stage fits; Megatron states any layout (--pipeline-model-parallel-layout).
local export = require "ndplan.export"

local M = {}

local copy = export.copy
local MAX_ROUNDS = 256  -- as layout.c: a bound, never reached (each round gains time)

-- What recompute arguments a base strategy must not carry: the candidates set their own.
local DROP = {"recompute", "layer_recompute", "recompute_modes", "layer_offload",
              "layer_selective_ops", "layout"}

-- flags(desc) -> Megatron's flags for a description {method, num_layers}
function M.flags(desc)
  if desc.method == "selective" then return {"--recompute-granularity", "selective"} end
  if desc.method == "uniform" then
    return {"--recompute-granularity", "full", "--recompute-method", "uniform",
            "--recompute-num-layers", 1}
  end
  if desc.method == "block" then
    return {"--recompute-granularity", "full", "--recompute-method", "block",
            "--recompute-num-layers", desc.num_layers}
  end
  return {}
end

-- describe(desc [, vpp]) -> words for people: "full on the first 3 layers of each stage"
function M.describe(desc, vpp)
  if desc.method == "selective" then return "selective on every layer" end
  if desc.method == "uniform" then return "full on every layer" end
  if desc.method == "block" then
    return string.format("full on the first %d layer%s of each %s", desc.num_layers,
                         desc.num_layers == 1 and "" or "s",
                         (vpp or desc.vpp or 1) > 1 and "model chunk" or "stage")
  end
  return "no recompute"
end

-- The per-layer modes of a form on a layout (shape: {pp, vpp, stage_layers}).
local function modes_of(ctx, shape, method, n)
  if method == "block" then
    local counts = {}
    for g = 1, #export.groups(ctx, shape) do counts[g] = n end
    return export.from_prefixes(ctx, shape, counts)
  end
  local per, mode = {}, method == "uniform" and "full" or method
  for i = 1, ctx.layers + ctx.mtp do per[i] = mode end
  return per
end

-- megatron(args, budget_bytes [, opts]) -> result, desc | nil, message.
-- args: nd.estimate arguments (model, device, job, the strategy; stage_layers pins the
-- starting layout, layout = "balanced" lets each form move layers); their recompute
-- arguments are ignored. budget_bytes: the heaviest stage's limit (a number or a size
-- string). opts.price(args) -> result | nil, why replaces nd.estimate (the exporters pass
-- theirs). result: the estimate of the fastest form that fits (ties: less memory). desc:
-- {method = "none"|"selective"|"uniform"|"block", num_layers = N (block; 1 for uniform, as
-- the flag says), flags, layer_recompute, stage_layers (vpp = 1), layout_moves, vpp,
-- candidates = {{method, num_layers, step_time_s, peak_memory_bytes, fits}} (the forms
-- priced on the starting layout), priced = estimates made}.
function M.megatron(args, budget, opts)
  opts = opts or {}
  if type(budget) == "string" then
    local bytes, err = require("ndplan.grammar").size(budget)
    if not bytes then return nil, "budget: " .. tostring(err) end
    budget = bytes
  end
  if type(budget) ~= "number" or budget <= 0 then
    return nil, "block_plan: expected a budget in bytes, got " .. tostring(budget)
  end
  local model, merr = require("ndplan.estimate").resolve("model", args.model)
  if not model then return nil, merr end
  local price = opts.price or require("ndplan").estimate
  local priced = 0
  local balanced = args.layout == "balanced"
  local base = {}
  for k, v in pairs(args) do base[k] = copy(v) end
  for _, k in ipairs(DROP) do base[k] = nil end
  base.model, base.max_mem = model, budget

  local function run(per, layout)
    local a = {}
    for k, v in pairs(base) do a[k] = copy(v) end
    local u = export.uniform_mode(per)
    if u then a.recompute = u else a.layer_recompute = per end
    if layout then require("ndplan.estimate").pin_layout(a, copy(layout)) end
    priced = priced + 1
    return price(a)
  end

  -- the shape: pp, vpp and the starting layout, as the engine resolves them
  local ctx = {layers = model.num_layers, mtp = model.mtp_layers or 0}
  local total = ctx.layers + ctx.mtp
  local probe_per = {}
  for i = 1, total do probe_per[i] = "full" end
  local full, why = run(probe_per, nil)
  if not full then return nil, why end
  local shape = {pp = full.strategy.pp or 1, vpp = full.strategy.vpp or 1}
  if shape.vpp <= 1 then
    shape.stage_layers = copy(base.stage_layers or full.strategy.stage_layers)
    base.stage_layers = nil
  else
    balanced = false  -- the core balances vpp = 1 layouts only
    -- the chunk sizes the engine resolved (a remainder goes to chunks 1, 2, ...): without
    -- them "the first N layers of each chunk" would count over layers / (pp x vpp) each
    local sl = full.strategy.stage_layers
    if sl and #sl == shape.pp * shape.vpp then shape.chunk_layers = copy(sl) end
  end
  if (base.offload or 0) > 0 then balanced = false end  -- whole layers of which stage?
  local start = shape.stage_layers

  local function fits(r) return r ~= nil and r.peak_memory_bytes <= budget end
  local candidates, list = {}, {}
  local function consider(method, n, r)
    candidates[#candidates + 1] = {method = method, num_layers = n, result = r}
    list[#list + 1] = {method = method, num_layers = n, step_time_s = r and r.step_time_s,
                       peak_memory_bytes = r and r.peak_memory_bytes, fits = fits(r)}
  end
  local cache = {}
  local function block(n)
    if not cache[n] then cache[n] = {run(modes_of(ctx, shape, "block", n), start)} end
    return cache[n][1], cache[n][2]
  end

  for _, method in ipairs({"none", "selective"}) do
    consider(method, nil, (run(modes_of(ctx, shape, method), start)))
  end
  consider("uniform", 1, full)
  -- block N for N = 1 .. the largest group less one (N = the largest is uniform): the
  -- smallest N that fits, by bisection (the peak falls as N grows)
  local most = 0
  for _, g in ipairs(export.groups(ctx, shape)) do most = math.max(most, g.count) end
  local lo, hi = 1, most - 1
  if hi >= 1 and fits((block(hi))) then
    while lo < hi do
      local mid = (lo + hi) // 2
      if fits((block(mid))) then hi = mid else lo = mid + 1 end
    end
    -- without a free layout the time only grows with N: the smallest is the only one;
    -- with one, each N balances differently, so every fitting N is a candidate
    for n = lo, balanced and most - 1 or lo do consider("block", n, (block(n))) end
  elseif hi >= 1 then
    consider("block", hi, (block(hi)))  -- reported, does not fit
  end

  -- each fitting form, on its own layout when the layout is free
  local best
  for _, c in ipairs(candidates) do
    if fits(c.result) then
      local r, layout, moves = c.result, start, 0
      if balanced and shape.pp > 1 then
        local function price_layout(l)
          local rr = run(modes_of(ctx, {pp = shape.pp, vpp = 1, stage_layers = l}, c.method,
                                  c.num_layers), l)
          return rr
        end
        for _ = 1, MAX_ROUNDS do
          local slow, t = 1, -1
          for s, st in ipairs(r.stages) do
            local x = st.forward_s + st.backward_s + st.recompute_s + st.comm_s
            if x > t then slow, t = s, x end
          end
          if layout[slow] <= 1 then break end
          local round_best, moved = r.step_time_s, nil
          for _, dir in ipairs({-1, 1}) do
            local to = slow + dir
            if to >= 1 and to <= shape.pp then
              local trial = copy(layout)
              trial[slow], trial[to] = trial[slow] - 1, trial[to] + 1
              local rr = price_layout(trial)
              if fits(rr) and rr.step_time_s < round_best * (1 - 1e-12) then
                round_best, moved = rr.step_time_s, {rr, trial}
              end
            end
          end
          if not moved then break end
          r, layout, moves = moved[1], moved[2], moves + 1
        end
      end
      local better = not best or r.step_time_s < best.result.step_time_s * (1 - 1e-12)
        or (r.step_time_s <= best.result.step_time_s * (1 + 1e-12)
            and r.peak_memory_bytes < best.result.peak_memory_bytes)
      if better then
        best = {method = c.method, num_layers = c.num_layers, result = r, layout = layout,
                moves = moves}
      end
    end
  end

  if not best then
    local least
    for _, c in ipairs(list) do
      if c.peak_memory_bytes and (not least or c.peak_memory_bytes < least.peak_memory_bytes) then
        least = c
      end
    end
    return nil, string.format("no recompute Megatron can state fits the %.2f GiB budget: %s "
                              .. "peaks at %.2f GiB", budget / 2 ^ 30,
                              M.describe(least, shape.vpp), least.peak_memory_bytes / 2 ^ 30)
  end
  local lshape = {pp = shape.pp, vpp = shape.vpp, stage_layers = best.layout}
  local desc = {method = best.method, num_layers = best.num_layers, vpp = shape.vpp,
                layer_recompute = modes_of(ctx, lshape, best.method, best.num_layers),
                stage_layers = copy(best.layout), layout_moves = best.moves,
                candidates = list, priced = priced}
  desc.flags = M.flags(desc)
  return best.result, desc
end

return M
