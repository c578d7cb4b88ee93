-- nd.search{...}: every valid strategy of a job, priced by the C core on threads, ranked by
-- a policy. Arguments are one table, like nd.estimate's, where each dimension is pinned (a
-- number), a list of candidates or "auto" (the searcher's bounds):
--   nd.search{model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
--             seq_len = 8192, tp = {4, 8}, pp = "auto", recompute = "auto", jobs = 2}
-- -> ranked, info | nil, message, info (nothing fits: info.misses holds the nearest misses)
local core = require "ndplan.c.search"
local estimate = require "ndplan.estimate"
local policy = require "ndplan.policy"

local M = {}

-- The dimensions in table order, and the loop order of the walk (documented in search.h).
local NAMES = require("ndplan.c.estimate").names()
M.DIMS = NAMES.dims
M.LOOP_ORDER = {"recompute", "tp", "pp", "cp", "mbs", "ep", "etp", "vpp", "layout", "precision",
                "zero", "dp_shard", "sp"}  -- dp_shard: the shard group, from dp_replicate too
local DIM_SET = {}
for _, d in ipairs(M.DIMS) do DIM_SET[d] = true end
local OTHER = {model = true, strict = true, device = true, devices = true,
               global_batch = true, seq_len = true,
               max_mem = true, costs = true, jobs = true, top = true, keep = true, misses = true,
               all_misses = true,
               policy = true, policy_opts = true, csv = true, progress = true, timeout = true,
               unsafe_policy = true, policy_mem = true, stack = true, memory_band = true,
               csv_all = true, trainer = true, dialect = true,
               exhaustive = true, dp_shard = true, dp_replicate = true}
for _, k in ipairs(NAMES.space_keys) do OTHER[k] = true end  -- the space's own fields
-- The search's recompute values: the core's names ("off" is the command line's word for
-- none, turned into it there).
local RECOMPUTE_ALIAS, RECOMPUTE_WORDS = {}, {}
for _, r in ipairs(NAMES.search_recompute) do
  RECOMPUTE_ALIAS[r] = r
  RECOMPUTE_WORDS[#RECOMPUTE_WORDS + 1] = r
end
RECOMPUTE_WORDS[#RECOMPUTE_WORDS + 1] = "auto"

-- one(v), or one of each element when v is a list
local function each(v, one)
  if type(v) ~= "table" then return one(v) end
  local out = {}
  for i, x in ipairs(v) do out[i] = one(x) end
  return out
end

-- One dimension as the core reads it: "auto", a value or a list (recompute names mapped).
local function normalise(dim, v)
  if v == nil or v == "auto" then return "auto" end
  if dim == "recompute" then
    local function one(x)
      if x == false then return "none" end
      local r = RECOMPUTE_ALIAS[x]
      if not r then
        error(string.format("nd.search: recompute: expected %s, got %s",
                            require("ndplan.strategy").words(RECOMPUTE_WORDS), tostring(x)), 0)
      end
      return r
    end
    return each(v, one)
  end
  if dim == "sp" then
    local function one(x)
      if x == true or x == 1 then return true end
      if x == false or x == 0 then return false end
      error("nd.search: sp: expected true, false, a list of them or \"auto\"", 0)
    end
    return each(v, one)
  end
  if type(v) == "table" then
    for _, x in ipairs(v) do
      if math.type(x) ~= "integer" or x < (dim == "zero" and 0 or 1) then
        error(string.format("nd.search: %s: expected positive integers, got %s", dim, tostring(x)), 0)
      end
    end
    return v
  end
  if math.type(v) ~= "integer" or v < (dim == "zero" and 0 or 1) then
    error(string.format("nd.search: %s: expected an integer, a list or \"auto\", got %s", dim,
                        tostring(v)), 0)
  end
  return v
end

-- Whether a dimension varies (auto or more than one candidate).
local function searched(v) return v == "auto" or type(v) == "table" and #v > 1 end

-- search(args) -> ranked, info | nil, message, info
function M.search(args)
  if type(args) ~= "table" then error("nd.search: expected a table of arguments", 2) end
  if core.busy() then
    error("nd.search: a search or a policy hook is running; a policy hook cannot start a "
          .. "search (one search at a time)", 2)
  end
  for k in pairs(args) do
    if not (DIM_SET[k] or OTHER[k]) then
      error("nd.search: unknown argument '" .. tostring(k) .. "'", 2)
    end
  end
  estimate.check_misuse("nd.search", args)
  -- trainer = NAME: only what that trainer states (ndplan.export.trainer)
  local trainer = args.trainer and require("ndplan.export.trainer")
  if trainer then
    local ok, terr = trainer.check(args.trainer, args)
    if not ok then return nil, terr end
  end
  local model, merr = estimate.resolve("model", args.model, {strict = args.strict})
  if not model then return nil, merr end
  local device, derr = estimate.resolve("device", args.device)
  if not device then return nil, derr end
  local costs, sinfo
  device, costs, sinfo = estimate.with_stack(args, device)
  if not device then return nil, costs end
  local job = {devices = args.devices, global_batch = args.global_batch, seq_len = args.seq_len}
  for _, k in ipairs({"devices", "global_batch", "seq_len"}) do
    if math.type(job[k]) ~= "integer" or job[k] < 1 then
      return nil, string.format("%s: expected a positive integer, got %s", k, tostring(job[k]))
    end
  end
  local budget, berr = estimate.budget(device, args.max_mem)
  if not budget then return nil, berr end
  -- precision: one recipe or a list, each walked; what no candidate can run is refused
  local recipes = args.precision
  if type(recipes) ~= "table" then recipes = {recipes} end
  if type(args.precision) == "table" and #args.precision == 0 then
    error("nd.search: precision: expected a recipe or a list of recipes, got an empty list", 2)
  end
  if args.precision ~= nil or args.fp8_param_gather then
    for i = 1, math.max(1, #recipes) do
      local ok, why = require("ndplan.c.estimate").check_recipe(device, recipes[i] or "bf16",
                                                                args.fp8_param_gather)
      if not ok then return nil, why end
    end
  end
  -- rank only what fits at the upper edge of the memory estimate's band: the allocator's
  -- share of the budget shrinks by the stack's memory_band (or args.memory_band)
  local band = args.memory_band
  if band == nil then band = sinfo and sinfo.memory_band or 0 end
  if type(band) ~= "number" or not (band >= 0 and band < 1) then
    error("nd.search: memory_band: expected a share in [0, 1), got " .. tostring(band), 2)
  end
  local device_budget, reserve = budget, device:totable().reserve_bytes
  if band > 0 and budget > reserve then budget = reserve + (budget - reserve) / (1 + band) end
  local space = {}
  for _, k in ipairs(NAMES.space_keys) do space[k] = args[k] end
  if space.selective_ops == nil and trainer then  -- what the trainer's selective repeats
    space.selective_ops = trainer.selective_ops(args.trainer)
  end
  -- HSDP: the shard group and its replicas (dp = dp_shard x dp_replicate, torchtitan's
  -- names), each nil (not walked: all of dp), a value, a list or auto
  for _, k in ipairs({"dp_shard", "dp_replicate"}) do
    space[k] = args[k]
    if space[k] ~= nil and space[k] ~= "auto" then space[k] = normalise(k, space[k]) end
  end
  local shown_dims = {}
  for _, d in ipairs(M.DIMS) do
    local v = args[d]
    if d == "recompute" and v == nil then v = "none" end
    if d == "recompute" and trainer then
      local tv, terr = trainer.space(args.trainer, v)
      if tv == nil then return nil, terr end
      v = tv
    end
    space[d] = normalise(d, v)
    if searched(space[d]) or d == "dp" or d == "mb" then shown_dims[#shown_dims + 1] = d end
  end
  if type(args.precision) == "table" and #args.precision > 1 then
    shown_dims[#shown_dims + 1] = "precision"
  end
  if searched(space.dp_shard) or searched(space.dp_replicate) then
    shown_dims[#shown_dims + 1] = "dp_shard"
  end
  if searched(space.dp_replicate) then shown_dims[#shown_dims + 1] = "dp_replicate" end
  -- a pinned value no candidate can take: the core's rule, before any walk
  local okp, label, rule = pcall(core.pinned, model, job, space)
  if not okp then error(label, 0) end  -- a bad space: the message core.run would give
  if label then
    if rule:sub(1, #label + 2) == label .. ": " then rule = rule:sub(#label + 3) end
    return nil, string.format("pinned degrees refused (%s): %s", label, rule),
           {pinned_refused = label}
  end
  local t = args.timeout
  if t ~= nil and (type(t) ~= "number" or not (t > 0 and t < math.huge)) then
    return nil, "timeout: expected a finite number of seconds above 0, got " .. tostring(t)
  end
  local policy_mem, perr = estimate.check_bytes("policy_mem", args.policy_mem, policy.POLICY_MEM)
  if not policy_mem then return nil, perr end
  -- the deadline and the heap cap hold from the policy's load to its done hook
  local limits = policy.limits(t, policy_mem)
  local p, origin = policy.load(args.policy, args.unsafe_policy, limits)
  if not p then return nil, origin end
  local dev = device:totable()
  local job_info = {model = model.name, device = device.name, devices = job.devices,
                    global_batch = job.global_batch, seq_len = job.seq_len,
                    node_size = dev.scale_up and dev.scale_up.domain_size or 8,
                    hbm_bytes = dev.hbm_bytes}
  local opts = {top = args.top or 10, keep = args.keep, budget_bytes = budget,
                jobs = args.jobs or 1, policy = args.policy_opts or {}}
  policy.call(p, "setup", job_info, opts)
  -- what setup may change, read raw (a metatable on opts runs no policy code here)
  local top, keep, jobs = rawget(opts, "top"), rawget(opts, "keep"), rawget(opts, "jobs")
  if math.type(top) ~= "integer" or top < 1 then
    error("nd.search: top: expected a positive integer", 2)
  end
  if keep ~= nil and (math.type(keep) ~= "integer" or keep < 1 or keep > 10000000) then
    policy.raise("opts.keep: expected an integer from 1 to 10000000, got "
                 .. (type(keep) == "number" and tostring(keep) or "a " .. type(keep)), "setup")
  end
  local bb = rawget(opts, "budget_bytes")
  if bb ~= budget then
    local _, why = estimate.check_bytes("opts.budget_bytes", bb)
    if why then policy.raise(why, "setup") end
  end
  opts.top, opts.budget_bytes = top, bb
  keep = keep or math.max(1000, top)
  local ok, res = pcall(core.run, model, device, job, space,
                        {budget = bb, jobs = jobs, keep = keep,
                         misses = args.misses or 5, csv = args.csv, csv_all = args.csv_all,
                         -- the nearest misses exact beside a ranking (asked for, or a
                         -- trainer's filter that may empty it); else only when nothing fits
                         all_misses = args.all_misses or trainer ~= nil,
                         exhaustive = args.exhaustive,
                         progress = args.progress,
                         deadline = limits.deadline, heap = limits.heap,
                         admit = trainer and trainer.admit(args.trainer, p.admit, args.dialect) or p.admit,
                         objective = p.objective}, costs)
  if not ok then
    if type(res) == "table" and res.policy_error then policy.raise(res.policy_error, res.hook) end
    error(res, 0)
  end
  local info = res:info()
  info.model, info.device, info.job = model.name, device.name, job
  info.node_size = job_info.node_size
  info.policy, info.policy_origin = p.name or origin, origin
  info.objective_label = p.objective_label or (p.objective and "objective") or nil
  info.objective_format = p.objective_format
  local spec = model:spec()
  info.kv_heads = spec.num_kv_heads > 0 and spec.num_kv_heads or nil  -- MLA: none
  info.experts = spec.num_experts
  info.dims = shown_dims
  info.space = space
  info.results = res
  info.misses = res:misses()
  info.warnings = {}
  local wasted = estimate.tp_warning(space.tp, info.kv_heads)
  if wasted then info.warnings[#info.warnings + 1] = wasted end
  -- The reference's post-filter: results outside a DP or MB list are removed; if that
  -- removes everything, the single best unfiltered result is kept anyway.
  local pool = res
  if #res == 0 and info.postfiltered > 0 then
    local fb = res:fallback()
    info.warnings[#info.warnings + 1] = string.format(
      "the dp/mb lists removed all %d fitting results; keeping the best one outside them",
      info.postfiltered)
    fb.rank = 1
    pool = {fb}
  end
  if #pool == 0 then
    local msg = string.format("no strategy fits: %d tested, %d priced, none within %.1f GiB",
                              info.tested, info.priced, opts.budget_bytes / 2^30)
    return nil, msg, info
  end
  if trainer then  -- the ranked results its exporter states without rounding
    info.model_obj, info.device_obj, info.budget_bytes = model, device, opts.budget_bytes
    info.costs, info.stack, info.trainer = args.costs, args.stack, args.trainer
    local kept, why = trainer.filter(args.trainer, pool, info, opts.top, args.dialect)
    if #kept == 0 then
      return nil, string.format("no strategy %s states fits: %s", args.trainer,
                                why or "none of the ranked results"), info
    end
    pool = kept
  end
  local ranked = policy.rank(p, pool, opts)
  for i, r in ipairs(ranked) do r.rank = i end
  info.budget_bytes = opts.budget_bytes
  info.device_budget_bytes = device_budget
  info.memory_band = band
  info.top = opts.top
  info.policy_table, info.opts, info.job_info = p, opts, job_info
  info.costs = args.costs
  info.stack = args.stack
  info.stack_info = sinfo and {name = sinfo.name, device_fit = sinfo.device_fit, note = sinfo.note}
  info.stack_applied = sinfo  -- the profile's own info (its step-time bands)
  info.model_obj, info.device_obj = model, device
  return ranked, info
end

-- detail(row, info) -> the full `ndplan estimate --json` document of a ranked row, priced
-- again by the search's results (results:detail: the walk's own strategy, budget, costs and
-- recompute modes) with what nd.estimate adds (ndplan.estimate.finish).
function M.detail(row, info)
  local r, why = info.results:detail(row.index)
  if not r then error("search: re-pricing rank " .. tostring(row.rank) .. " failed: " .. why) end
  local job = info.job
  estimate.finish(r, info.model_obj, info.device_obj,
                  {devices = job.devices, global_batch = job.global_batch, seq_len = job.seq_len},
                  info.budget_bytes, info.stack_applied, row.strategy)
  r.rank = row.rank
  r.strategy.layout = row.strategy.layout  -- the layout variant the walk priced
  r.objective = row.objective
  r.index = row.index
  return r
end

-- The counts line: "N tested: R refused (label count, ...), P priced, F fit", then the
-- equivalent and pruned candidates (search.h: nd_search_counts).
function M.counts_line(info)
  local parts = {}
  for _, label in ipairs(info.labels) do
    local n = info.refused[label]
    if n > 0 then parts[#parts + 1] = string.format("%s %d", label, n) end
  end
  local line = string.format("%d tested: %d refused%s, %d priced, %d fit", info.tested,
                             info.refused_total,
                             #parts > 0 and " (" .. table.concat(parts, ", ") .. ")" or "",
                             info.priced, info.fit)
  if (info.equivalent or 0) > 0 then
    line = line .. string.format(", %d equivalent (not priced)", info.equivalent)
  end
  if (info.pruned_time or 0) + (info.pruned_memory or 0) > 0 then
    line = line .. string.format(", not priced: %d pruned by the step-time bound, %d by the "
                                 .. "memory bound (over memory)", info.pruned_time,
                                 info.pruned_memory)
  end
  if (info.skipped_time or 0) + (info.skipped_memory or 0) > 0 then
    line = line .. string.format(", skipped unchecked in sub-trees: %d by the step-time "
                                 .. "bound, %d by the memory bound", info.skipped_time,
                                 info.skipped_memory)
  end
  if info.dropped > 0 then line = line .. string.format(", %d dropped by the policy", info.dropped) end
  if info.postfiltered > 0 then
    line = line .. string.format(", %d outside the dp/mb lists", info.postfiltered)
  end
  return line
end

-- The bounds line, stated once before the loops.
function M.bounds_line(info)
  local b = info.bounds
  -- each bound is the least of its limits: say which one it is
  local n = info.job.devices
  local kv = info.kv_heads
  local tp_why = b.tp == n and (not kv or kv > n) and "the devices"
    or kv and b.tp > kv and "pinned; the model has " .. kv .. " KV heads"
    or kv and "the model's KV heads" or "the model's heads"
  local pp_why = b.pp == n and n < b.layers and n < info.job.global_batch and "the devices"
    or string.format("%d layers, a batch of %d", b.layers, info.job.global_batch)
  local cp_why = b.cp == n and "the devices" or "the sequence"
  local ep_why = b.ep == 1 and info.experts == 0 and "the model has no experts"
    or b.ep == n and (info.experts or 0) > n and "the devices" or "the model's experts"
  return string.format("The search bounds TP up to %d (%s), PP up to %d (%s), CP up to %d "
    .. "(%s), EP up to %d (%s), VPP up to %d ((layers + 2) / PP: a layer per chunk, the "
    .. "embedding and the loss counted; past 4 where the layers fill the chunks), MBS up to %d; uneven splits walk the even, accounting and "
    .. "first/last layouts; loops: %s", b.tp, tp_why, b.pp,
    pp_why, b.cp, cp_why, b.ep, ep_why, b.vpp, b.mbs, table.concat(M.LOOP_ORDER, " > "))
end

-- encode_json(value) -> JSON text, the same bytes from run to run (ndplan.json.encode)
function M.encode_json(value) return require("ndplan.io.json").encode(value) end

-- json_doc(ranked, info) -> the ndplan.search/1 document
function M.json_doc(ranked, info)
  local results = {}
  for i, r in ipairs(ranked) do results[i] = M.detail(r, info) end
  local misses = {}
  for i, r in ipairs(info.misses or {}) do misses[i] = r end
  return {
    schema = "ndplan.search/1",
    model = info.model, device = info.device, job = info.job,
    budget_bytes = info.device_budget_bytes or info.budget_bytes,
    ranking_budget_bytes = info.budget_bytes, memory_band = info.memory_band, policy = info.policy,
    counts = {tested = info.tested, refused = info.refused_total, priced = info.priced,
              fit = info.fit, equivalent = info.equivalent, dropped = info.dropped,
              postfiltered = info.postfiltered, pruned_time = info.pruned_time,
              pruned_memory = info.pruned_memory, skipped_time = info.skipped_time,
              skipped_memory = info.skipped_memory},
    refusals = info.refused,
    bounds = info.bounds,
    warnings = #info.warnings > 0 and info.warnings or nil,
    results = results,
    nearest_misses = #ranked == 0 and misses or nil,
    assumptions = require("ndplan.fit.assumptions").report(ranked, info),
  }
end

return M
