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
-- The choice is the core's (engine/core/recompute_megatron.c): groups are a stage's layers
-- for vpp = 1, each model chunk's otherwise, MTP layers in the last one; block N recomputes
-- more as N grows, so its peak only falls and its time only grows with N: the smallest N
-- that fits is found by bisection, and none, selective and uniform are priced as well. With
-- layout = "balanced" (vpp = 1 only) each fitting form then gets its own layout, by the
-- core's rule (engine/core/layout.c, nd_layout_balance_megatron): the slowest stage gives a
-- layer to a neighbour while the step gets faster and every stage fits; Megatron states any
-- layout (--pipeline-model-parallel-layout).
local export = require "ndplan.export"

local M = {}

local copy = export.copy

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

-- megatron(args, budget_bytes [, opts]) -> result, desc | nil, message.
-- args: nd.estimate arguments (model, device, job, the strategy; stage_layers pins the
-- starting layout, layout = "balanced" lets each form move layers); their recompute
-- arguments are ignored. budget_bytes: the heaviest stage's limit (a number or a size
-- string). opts.price(args) -> result | nil, why replaces nd.estimate (the exporters pass
-- theirs). The choice is the core's (nd.estimate{recompute = "megatron"}:
-- engine/core/recompute_megatron.c, balancing by engine/core/layout.c). result: the estimate
-- of the fastest form that fits (ties: less memory). desc: {method =
-- "none"|"selective"|"uniform"|"block", num_layers = N (block; 1 for uniform, as the flag
-- says), flags, layer_recompute, stage_layers (vpp = 1), layout_moves, vpp, priced =
-- estimates made on the starting layout}.
function M.megatron(args, budget, opts)
  opts = opts or {}
  if type(budget) == "string" then
    local bytes, err = require("ndplan.io.grammar").size(budget)
    if not bytes then return nil, "budget: " .. tostring(err) end
    budget = bytes
  end
  if type(budget) ~= "number" or budget <= 0 then
    return nil, "block_plan: expected a budget in bytes, got " .. tostring(budget)
  end
  local model, merr = require("ndplan.estimate").resolve("model", args.model)
  if not model then return nil, merr end
  local price = opts.price or require("ndplan").estimate
  local base = {}
  for k, v in pairs(args) do base[k] = copy(v) end
  for _, k in ipairs(DROP) do base[k] = nil end
  base.model, base.max_mem = model, budget

  -- the starting layout as the core resolves it: pinned as stage sizes (vpp = 1)
  local st = {}
  for _, k in ipairs(require("ndplan.strategy").NAMES.strategy_keys) do st[k] = base[k] end
  local ok, lay, lwhy = pcall(require("ndplan.c.estimate").layout, st, model.num_layers,
                              model.mtp_layers or 0)
  if not ok then return nil, tostring(lay) end
  if not lay then return nil, lwhy end
  local vpp = lay.vpp
  if vpp <= 1 then require("ndplan.estimate").pin_layout(base, copy(lay.stage_layers)) end
  -- the core balances vpp = 1 layouts of whole layers
  base.layout = args.layout == "balanced" and vpp <= 1 and (base.offload or 0) == 0
                and "balanced" or nil
  base.recompute = "megatron"
  local r, why, least = price(base)
  if not r then
    if least then
      return nil, string.format("no recompute Megatron can state fits the %.2f GiB budget: %s "
                                .. "peaks at %.2f GiB", budget / 2 ^ 30, M.describe(least, vpp),
                                least.peak_bytes / 2 ^ 30)
    end
    return nil, why
  end
  local per = copy(r.strategy.layer_recompute)
  if not per then
    per = {}
    for i = 1, model.num_layers + (model.mtp_layers or 0) do per[i] = r.strategy.recompute end
  end
  local desc = {method = r.megatron.method, num_layers = r.megatron.method ~= "none"
                and r.megatron.method ~= "selective" and r.megatron.num_layers or nil,
                vpp = vpp, layer_recompute = per,
                stage_layers = vpp <= 1 and copy(r.strategy.stage_layers) or nil,
                layout_moves = r.megatron.layout_moves or 0, priced = r.megatron.priced}
  desc.flags = M.flags(desc)
  r.megatron = nil  -- the estimate of the plan, as nd.estimate prices its layer_recompute
  return r, desc
end

-- trainer_plan(args, r) -> what `ndplan recompute --trainer megatron` reports for the
-- estimate r of args: the fastest plan Megatron-LM can state under r's budget, on r's layout
-- (its own with layout = "balanced"), on a schedule Megatron has a flag for (one it has none
-- for runs as 1f1b, as ndplan export rounds it at pp > 1), and what stating it costs:
-- {trainer, fits, schedule, method, num_layers, flags, description, layer_recompute,
-- stage_layers, step_time_s, peak_memory_bytes, cost_s, cost_pct} or, when none fits,
-- {trainer, fits = false, schedule, message}
function M.trainer_plan(args, r)
  local targs = {}
  for k, v in pairs(args) do targs[k] = v end
  if (r.strategy.vpp or 1) <= 1 then
    require("ndplan.estimate").pin_layout(targs, r.strategy.stage_layers)
  end
  local stated = false  -- a schedule Megatron has no flag for runs as 1f1b (the core's list)
  for _, n in ipairs(require("ndplan.strategy").NAMES.megatron_schedules) do
    stated = stated or n == r.strategy.schedule
  end
  if not stated then targs.schedule = "1f1b" end
  local tr, desc = M.megatron(targs, r.budget_bytes)
  local trainer = {trainer = "megatron", fits = tr ~= nil, schedule = targs.schedule}
  if tr then
    trainer.method, trainer.num_layers, trainer.flags = desc.method, desc.num_layers, desc.flags
    trainer.description = M.describe(desc)
    trainer.layer_recompute, trainer.stage_layers = desc.layer_recompute, desc.stage_layers
    trainer.step_time_s, trainer.peak_memory_bytes = tr.step_time_s, tr.peak_memory_bytes
    trainer.cost_s = tr.step_time_s - r.step_time_s
    trainer.cost_pct = 100 * trainer.cost_s / r.step_time_s
  else
    trainer.message = desc
  end
  return trainer
end

return M
