-- nd.estimate{...}: one strategy priced by the C estimators, with the memory budget
-- applied. Arguments are one table, the way users type them in the REPL:
--   nd.estimate{model = "llama3.1-70b", device = "h100", devices = 64,
--               global_batch = 512, seq_len = 8192, tp = 8, pp = 4, sp = true,
--               recompute = "selective", max_mem = "75GiB", costs = {dp_overlap = 0}}
-- recompute = "megatron" takes the fastest recompute Megatron-LM can state that fits
-- max_mem (ndplan.c.estimate.megatron; result.megatron = {method, num_layers, priced}; with
-- layout = "balanced" each form on its own layout, result.megatron.layout_moves); when none
-- fits, a third value names the least-memory form priced {method, num_layers, peak_bytes}.
-- recompute = "per_layer" chooses every layer's mode (among recompute_modes: none,
-- selective, full, "offload" and "variants" -- each selective layer its own set of op
-- switches; default DEFAULT_MODES) so that each stage fits max_mem at the least recompute
-- time (ndplan.c.estimate.plan);
-- layout = "balanced" moves layers between stages to balance the slowest one within
-- max_mem (ndplan.c.estimate.balance); the default "even" keeps the even split.
local core = require "ndplan.c.estimate"
local type, pairs, math_type = type, pairs, math.type  -- per-call lookups

local M = {}

-- The per-layer planner's default modes for one strategy: every mode, and a set of switches
-- per selective layer (the search walks without variants, for speed).
M.DEFAULT_MODES = {"none", "selective", "full", "variants"}

local NAMES = core.names()
local STRATEGY_KEYS = NAMES.strategy_keys  -- what the binding reads
-- What a result's strategy carries besides its inputs: facts derived by resolve, accepted and
-- dropped, so that result.strategy passes straight back to nd.estimate.
local DERIVED_KEYS = {sharded_over = true, pipeline_layout = true, layout_from = true}
local OTHER_KEYS = {model = true, strict = true, device = true, devices = true,
                    global_batch = true,
                    seq_len = true, max_mem = true, costs = true, recompute_modes = true,
                    layout = true, stack = true}
local IS_STRATEGY_KEY, KNOWN, NOT_STRATEGY = {}, {}, {}
for _, k in ipairs(STRATEGY_KEYS) do IS_STRATEGY_KEY[k], KNOWN[k] = true, true end
for _, set in ipairs({OTHER_KEYS, DERIVED_KEYS}) do
  for k in pairs(set) do KNOWN[k], NOT_STRATEGY[k] = true, true end
end
-- The plain call's (core.estimate's) set: the arguments it skips (true), and those only the
-- general path below takes (false: given, the call is not plain). Read once by the binding.
local PLAIN_ARGS = {stage_layers = false, pipeline_model_parallel_layout = false}
for k in pairs(NOT_STRATEGY) do PLAIN_ARGS[k] = true end
for _, k in ipairs({"strict", "max_mem", "costs", "recompute_modes", "layout"}) do
  PLAIN_ARGS[k] = false
end

-- nd.model and nd.device's loaders (their caches), found once
local LOADERS = {}
local function loader(kind)
  LOADERS[kind] = require("ndplan.config." .. kind).load
  return LOADERS[kind]
end

-- The loaders' objects from bundled names (ndplan.config.loaded's fixed): what most calls
-- name, found in one read each. Required on the first call (the modules require this one).
local FIXED_MODEL, FIXED_DEVICE, FIXED_STACK, STACK
local function fixed_tables()
  STACK = require "ndplan.config.stack"
  FIXED_MODEL = require("ndplan.config.model").fixed
  FIXED_DEVICE = require("ndplan.config.device").fixed
  FIXED_STACK = STACK.fixed
end

-- resolve("model" | "device", x [, opts]) -> the object: a name, a path or a plain table is
-- loaded (nd.model / nd.device), an object is kept | nil, message. opts.strict (models):
-- a model the loader had to assume anything about is refused.
function M.resolve(kind, x, opts)
  if kind == "model" and opts and opts.strict and x ~= nil then
    return require("ndplan.config.model").load(x, {strict = true})
  end
  if type(x) == "string" or type(x) == "table" and getmetatable(x) == nil then
    return (LOADERS[kind] or loader(kind))(x)
  end
  if x == nil then return nil, kind .. ": missing" end
  return x
end

-- check_misuse(fname, args): raises (at the caller's caller) on a misuse the README's rule
-- names: a missing model or device, an argument of the wrong Lua type among the job's and
-- the budget's. What depends on the data (an unknown name, devices = 0) is left to return
-- nil, message.
local OBJECT_TYPES = {string = true, table = true, userdata = true}  -- what check_object takes
local function check_object(fname, k, v)
  if v == nil then error(string.format("%s: %s: missing", fname, k), 4) end
  local t = type(v)
  if not OBJECT_TYPES[t] then
    error(string.format("%s: %s: expected a name, a path, a table or an object, got %s",
                        fname, k, t), 4)
  end
end
local function check_count(fname, k, v)
  if type(v) ~= "number" then
    error(string.format("%s: %s: expected an integer, got %s", fname, k, type(v)), 4)
  end
end
function M.check_misuse(fname, args)
  check_object(fname, "model", args.model)
  check_object(fname, "device", args.device)
  check_count(fname, "devices", args.devices)
  check_count(fname, "global_batch", args.global_batch)
  check_count(fname, "seq_len", args.seq_len)
  local mm = args.max_mem
  if mm ~= nil and type(mm) ~= "number" and type(mm) ~= "string" then
    error(string.format("%s: max_mem: expected bytes or a size like \"80GiB\", got %s", fname,
                        type(mm)), 3)
  end
end

-- The memory budget: an explicit max_mem (bytes or a size string), else the device's
-- capacity; the device's runtime reserve is part of every stage's peak.
function M.budget(device, max_mem)
  if max_mem == nil then return device.hbm_bytes end
  return M.check_bytes("max_mem", max_mem)
end

-- check_bytes(name, v [, default]) -> bytes | nil, message: a size (bytes or a size string)
-- that must be finite and above 0 (0, a negative, NaN or infinite budget is refused, never
-- read as "no limit").
function M.check_bytes(name, v, default)
  if v == nil and default ~= nil then return default end
  local bytes = v
  if type(v) == "string" then
    local err
    bytes, err = require("ndplan.io.grammar").size(v)
    if not bytes then return nil, name .. ": " .. err end
  end
  if type(bytes) ~= "number" or not (bytes > 0 and bytes < math.huge) then
    -- no tostring of a table: a policy's __tostring would run here
    return nil, string.format("%s: expected a finite size above 0 bytes, got %s", name,
                              type(v) == "string" and "'" .. v .. "'"
                              or type(v) == "number" and tostring(v) or "a " .. type(v))
  end
  return bytes
end

-- with_stack(args, device) -> device, costs, stack info | nil, message: the stack profile
-- (args.stack: a name, a path, a table or "none"; default megatron-core) applied to the
-- device's efficiencies and under the caller's costs.
function M.with_stack(args, device)
  local stack = require "ndplan.config.stack"
  local s, err = stack.shared(args.stack)  -- the cached profile: only read here
  if err then return nil, "stack: " .. err end
  return stack.apply(s, device, args.costs)
end

-- What nd.estimate reads of a model on every call (each read of a model's field is a call
-- into the binding): by model, which is immutable.
local facts_of = setmetatable({}, {__mode = "k"})
local function model_facts(model)
  local f = facts_of[model]
  if not f then
    local nkv = model.num_kv_heads
    f = {name = model.name, moe = model.num_experts > 0, kv_heads = nkv > 0 and nkv or nil}
    facts_of[model] = f
  end
  return f
end
local facts_of_device = setmetatable({}, {__mode = "k"})
local function device_facts(device)
  local f = facts_of_device[device]
  if not f then
    f = {name = device.name, hbm_bytes = device.hbm_bytes}
    facts_of_device[device] = f
  end
  return f
end

-- with_stack for nd.estimate's calls: without costs of the caller's, a (profile, device)
-- pair is applied once and its costs read once (core.pack_costs); the profile comes from
-- stack.shared's cache and none of it is handed out (result.stack is a copy of the names).
-- profile -> device -> {device, costs, info, the device's hbm_bytes and name}
local applied = setmetatable({}, {__mode = "k"})
local stack_lib
local function stacked(args, device)
  if args.costs ~= nil then return M.with_stack(args, device) end
  local stack = stack_lib or require "ndplan.config.stack"
  stack_lib = stack
  local s = FIXED_STACK[args.stack or stack.DEFAULT]
  if not s then
    local err
    s, err = stack.shared(args.stack)
    if err then return nil, "stack: " .. err end
    if s == nil then return device, nil, nil end
  end
  local per = applied[s]
  if not per then
    per = setmetatable({}, {__mode = "k"})
    applied[s] = per
  end
  local hit = per[device]
  if not hit then
    local dev, costs, info = stack.apply(s, device, nil)
    if not dev then return nil, costs end
    local f = device_facts(dev)
    hit = {dev, core.pack_costs(costs), info, f.hbm_bytes, f.name}
    per[device] = hit
  end
  return hit[1], hit[2], hit[3]
end

-- The stack profile's figures for a result (nil without a profile): its names, and the band
-- of its residuals, which depends on (the profile's entry for the device, precision, MoE)
-- alone: found once per triple. The binding copies them into each result (result.stack and
-- result.step_time_band, with low_s and high_s the band around its step time: core.add_stack,
-- or when first read with core.run's figures).
local stack_module
local figures_of = setmetatable({}, {__mode = "k"})  -- info -> moe -> precision -> figures
local function stack_figures(info, moe, strategy)
  if not info then return nil end
  local precision = strategy.precision or "bf16"
  local key = type(precision) == "string" and precision
  local per = figures_of[info]
  if not per then per = {[true] = {}, [false] = {}}; figures_of[info] = per end
  per = per[moe]
  local fig = key and per[key]
  if fig then return fig end
  local stack = stack_module or require "ndplan.config.stack"
  stack_module = stack
  fig = {stack = {name = info.name, device_fit = info.device_fit, note = info.note}}
  local found = stack.band(info, precision, moe)
  if found then  -- the fields stack.band gives, and the profile's names
    fig.band = {pct = found.pct, bias = found.bias, runs = found.runs, regime = found.regime,
                widened = found.widened, stack = info.name, device = info.device_fit}
    fig.band_scale = 1 + found.pct / 100
  end
  if key then per[key] = fig end
  return fig
end

-- tp_warning(tp, kv_heads) -> a warning when a pinned TP is legal but wasteful: above the
-- KV heads, each one is replicated (its projections and cache on tp/kv ranks), else nil
function M.tp_warning(tp, kv_heads)
  if math.type(tp) ~= "integer" or not kv_heads or kv_heads < 1 or tp <= kv_heads then return nil end
  return string.format("tp %d is over the model's %d KV heads: each KV head is replicated on "
    .. "%d TP ranks (legal, but the K and V projections and their activations are not split "
    .. "further)", tp, kv_heads, tp // kv_heads)
end

-- A result's strategy carries its layout flags and the stage_layers they produced: when the
-- flags give exactly those layers (the core's layout), the flags state the layout, as they
-- did for the result; otherwise both stay, and the binding refuses the pair.
local function agreed_layout(strategy, model)
  local flags, any = {pp = strategy.pp, vpp = strategy.vpp}, false
  for _, k in ipairs({"account_for_embedding_in_pipeline_split",
                      "account_for_loss_in_pipeline_split", "decoder_first_pipeline_num_layers",
                      "decoder_last_pipeline_num_layers"}) do
    flags[k] = strategy[k]
    any = any or strategy[k] ~= nil
  end
  if not any then return end
  local ok, lay = pcall(core.layout, flags, model.num_layers, model.mtp_layers)
  if not (ok and lay) or #lay.stage_layers ~= #strategy.stage_layers then return end
  for i, n in ipairs(lay.stage_layers) do
    if strategy.stage_layers[i] ~= n then return end
  end
  strategy.stage_layers = nil
end

-- each job field's ceiling (the binding's: the core counts devices and tokens in 32-bit ints)
local LIMIT = NAMES.job_limits
local STRICT = {strict = true}

-- A job field that is no integer from 1 to its ceiling -> the message, else nil.
local function job_error(k, v)
  if math_type(v) ~= "integer" or v < 1 then
    return string.format("%s: expected a positive integer, got %s", k, tostring(v))
  end
  if v > LIMIT[k] then
    return string.format("%s: %d is out of range (at most %.0f)", k, v, LIMIT[k])
  end
end

-- objects(args) -> model, device (args.stack's profile applied), costs, sinfo | nil, message:
-- what nd.estimate prices args.model on args.device with (costs: packed or nil, sinfo: the
-- profile's info), a bundled name found in one table read.
function M.objects(args)
  if not STACK then fixed_tables() end
  local mo, de = args.model, args.device
  local model = not args.strict and FIXED_MODEL[mo]
  if not model then
    local merr
    model, merr = M.resolve("model", mo, args.strict and STRICT or nil)
    if not model then return nil, merr end
  end
  local device = FIXED_DEVICE[de]
  if not device then
    local derr
    device, derr = M.resolve("device", de)
    if not device then return nil, derr end
  end
  local costs, sinfo
  device, costs, sinfo = stacked(args, device)
  if not device then return nil, costs end
  return model, device, costs, sinfo
end

-- result.warnings for a TP over the model's KV heads (facts: model_facts').
local function warn_tp(result, tp, facts)
  if tp ~= nil and facts.kv_heads and tp ~= 1 and tp > facts.kv_heads then
    local wasted = M.tp_warning(math.tointeger(tp), facts.kv_heads)
    if wasted then result.warnings = {wasted} end  -- legal but wasteful choices
  end
end

-- estimate(args) -> result | nil, message (refused strategy, unreadable model, ...).
function M.estimate(args)
  if type(args) ~= "table" then error("nd.estimate: expected a table of arguments", 2) end
  -- The plain call in one call of the binding (core.estimate): a bundled model and device by
  -- name (or a model and a device object the general path has priced before), a bundled
  -- stack profile already applied to that device (the default one unless args.stack names
  -- another), no per_layer or megatron recompute, and none of the arguments only the general
  -- path below reads (PLAIN_ARGS' false ones). Any other call, and a job the binding does not
  -- take as it is, gets false from the binding and takes the general path: the same result,
  -- and each message it gives.
  if not STACK then fixed_tables() end
  local mo, de, rc = args.model, args.device, args.recompute
  local model = FIXED_MODEL[mo] or facts_of[mo] and mo  -- facts_of: the models resolved
  local device = FIXED_DEVICE[de] or de  -- applied holds the devices resolved
  if model and device and rc ~= "per_layer" and rc ~= "megatron" then
    local per = applied[FIXED_STACK[args.stack or STACK.DEFAULT]]
    local hit = per and per[device]
    if hit then
      local facts = facts_of[model] or model_facts(model)
      local figures = figures_of[hit[3]]
      figures = figures and figures[facts.moe][args.precision or "bf16"]
                or stack_figures(hit[3], facts.moe, args)
      local result, why = core.estimate(model, hit[1], args, hit[2], PLAIN_ARGS, figures,
                                        hit[4], facts.name, hit[5])
      if result ~= false then
        if result then warn_tp(result, args.tp, facts) end
        return result, why
      end
    end
  end
  -- the strategy: the arguments themselves where nothing below changes it (the binding skips
  -- the other arguments, NOT_STRATEGY, and raises on any unknown one), else a copy of the
  -- strategy keys
  local rc = args.recompute
  local sl = args.stage_layers
  local in_place = (sl == nil or type(sl) ~= "table") and rc ~= "per_layer"
                   and rc ~= "megatron" and (args.layout == nil or args.layout == "even")
  local strategy = args
  if not in_place then
    for k in pairs(args) do
      if not KNOWN[k] then error("nd.estimate: unknown argument '" .. tostring(k) .. "'", 2) end
    end
    strategy = {}
    for k, v in pairs(args) do
      if IS_STRATEGY_KEY[k] then strategy[k] = v end
    end
  end
  -- the usual well-typed call passes at once; anything else gets check_misuse's message
  local mo, de = args.model, args.device
  local n_devices, gb, sq = args.devices, args.global_batch, args.seq_len
  if not (OBJECT_TYPES[type(mo)] and OBJECT_TYPES[type(de)] and type(n_devices) == "number"
          and type(gb) == "number" and type(sq) == "number" and args.max_mem == nil) then
    M.check_misuse("nd.estimate", args)
  end
  local model, device, costs, sinfo = M.objects(args)
  if not model then return nil, device end
  local job = {devices = n_devices, global_batch = gb, seq_len = sq}
  if not (math_type(n_devices) == "integer" and n_devices >= 1 and n_devices <= LIMIT.devices
          and math_type(gb) == "integer" and gb >= 1 and gb <= LIMIT.global_batch
          and math_type(sq) == "integer" and sq >= 1 and sq <= LIMIT.seq_len) then
    local jerr = job_error("devices", n_devices) or job_error("global_batch", gb)
                 or job_error("seq_len", sq)
    if jerr then return nil, jerr end
  end
  if not in_place and type(strategy.stage_layers) == "table" then agreed_layout(strategy, model) end
  local pl = strategy.pipeline_model_parallel_layout
  if pl ~= nil and type(pl) == "string" then
    -- a layout string that does not parse is a refusal (nil, message), as its counts are
    local ok, lay, why = pcall(core.layout, {pp = strategy.pp, vpp = strategy.vpp,
                                pipeline_model_parallel_layout = strategy.pipeline_model_parallel_layout},
                               model.num_layers, model.mtp_layers)
    if not ok then return nil, (tostring(lay):gsub("^pipeline_model_parallel_layout: ", "")) end
    if not lay and not why:match("^layout: the layout places") then return nil, why end
  end
  local budget, berr
  if args.max_mem == nil then budget = device_facts(device).hbm_bytes  -- as M.budget
  else budget, berr = M.budget(device, args.max_mem) end
  if not budget then return nil, berr end
  local result, why, figures
  -- "per_layer" with the layers' modes given (a result's strategy) prices them as given
  if strategy.recompute == "per_layer" and strategy.layer_recompute then strategy.recompute = nil end
  local per_layer = strategy.recompute == "per_layer"
  local megatron = strategy.recompute == "megatron"
  if per_layer or megatron then strategy.recompute = nil end
  local least  -- recompute = "megatron" that fits nothing: the least-memory form priced
  if megatron and args.layout ~= nil and args.layout ~= "even" and args.layout ~= "balanced" then
    error("nd.estimate: layout must be \"even\" or \"balanced\", got " .. tostring(args.layout), 2)
  end
  if megatron then
    -- the fastest recompute Megatron-LM can state under the budget (selective, full, or
    -- full on the first N layers of each stage); balanced: each form on its own layout
    if args.recompute_modes ~= nil then
      error("nd.estimate: recompute_modes needs recompute = \"per_layer\"", 2)
    end
    result, why, least = core.megatron(model, device, job, strategy, budget, costs,
                                       args.layout == "balanced")
  elseif args.layout == "balanced" then
    -- uneven stages balancing the slowest one, each layout with its own recompute plan
    local modes = per_layer and (args.recompute_modes or M.DEFAULT_MODES) or nil
    result, why = core.balance(model, device, job, strategy, budget, costs, modes)
    if result and per_layer then
      -- the balancer keeps the estimate, not the plan: the same plan on the final layout
      -- gives each stage's time saved against full recompute and its need
      local st = {}
      for k, v in pairs(strategy) do st[k] = v end
      st.stage_layers = result.strategy.stage_layers
      local planned = core.plan(model, device, job, st, budget, costs, modes)
      if planned and planned.step_time_s == result.step_time_s then
        result.stage_savings_s, result.stage_need_bytes = planned.stage_savings_s,
                                                          planned.stage_need_bytes
      end
    end
  elseif args.layout ~= nil and args.layout ~= "even" then
    error("nd.estimate: layout must be \"even\" or \"balanced\", got " .. tostring(args.layout), 2)
  elseif per_layer then
    -- each layer's mode chosen under the budget: least recompute time that fits
    result, why = core.plan(model, device, job, strategy, budget, costs,
                            args.recompute_modes or M.DEFAULT_MODES)
  else
    if args.recompute_modes ~= nil then
      error("nd.estimate: recompute_modes needs recompute = \"per_layer\"", 2)
    end
    figures = stack_figures(sinfo, model_facts(model).moe, strategy)
    result, why = core.run(model, device, job, strategy, costs, in_place and NOT_STRATEGY or nil,
                           figures)
  end
  if not result then return nil, why, least end
  return M.finish(result, model, device, job, budget, sinfo, strategy, figures ~= nil)
end

-- finish(result, model, device, job, budget, sinfo, strategy [, figured]) -> result with
-- what nd.estimate adds to the core's: the budget and whether it fits, the names, the job,
-- the stack profile's name and step-time band (sinfo: the profile's info, nil for none;
-- figured: core.run was given them, to build when read) and the TP warning. strategy: the
-- precision and tp it was priced with (result.strategy is built only when read).
function M.finish(result, model, device, job, budget, sinfo, strategy, figured)
  local facts = model_facts(model)
  core.finish(result, budget, facts.name, device_facts(device).name, job)
  if sinfo and not figured then core.add_stack(result, stack_figures(sinfo, facts.moe, strategy)) end
  warn_tp(result, strategy.tp, facts)
  return result
end

-- The pipeline layout fields under Megatron's names.
M.LAYOUT_FIELDS = {"account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
                   "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                   "pipeline_model_parallel_layout"}

-- pin_layout(args, stage_layers): args now price that resolved layout as given (stage_layers
-- per stage, or per chunk with vpp), so the flags that produced it are dropped.
function M.pin_layout(args, stage_layers)
  if stage_layers == nil then return args end
  args.stage_layers = stage_layers
  for _, k in ipairs(M.LAYOUT_FIELDS) do args[k] = nil end
  return args
end

M.costs = core.costs

return M
