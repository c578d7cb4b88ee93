-- Fitting a stack profile to measured runs: every field at once -- per device the GEMM
-- efficiencies (16-bit and FP8) and the attention kernel's, stack-wide the exposed shares
-- of communication, the compute overlapped collectives take, the per-step overhead and the
-- MoE imbalance -- by bounded least squares on log(predicted / measured) step time
-- (ndplan.calibrate.least_squares). Cases are validate's: {model, job, strategy, costs,
-- measured_s, device_name, group}. The profile it returns carries its residuals: per device
-- (runs, MAPE, bias) and per regime (precision / dense or MoE), the step-time bands.
local calibrate = require "ndplan.fit.calibrate"

local M = {}

-- Flash attention's backward reaches about 0.73 of its forward's rate on H100 (FlashAttention-3,
-- BF16, head dim 128, causal, 8k: ~470 against ~640 TFLOP/s); the fit moves the forward and
-- keeps that ratio, since step times alone cannot tell the two apart.
M.ATTN_BWD_RATIO = 0.73

-- The fit's loss is soft-L1 (pseudo-Huber) on the log ratio, not its square: a run within
-- ROBUST_SCALE (about 15% off) counts quadratically, one further off about linearly. A few
-- runs that no term of the estimator explains (a software release's slow path, a table's
-- inconsistent row) then pull the shared fields by their sign, not their square, and do not
-- bend every other run of their device towards them.
M.ROBUST_SCALE = 0.15

-- The residual whose square is the soft-L1 loss of log ratio r: 2 d^2 (sqrt(1 + (r/d)^2) - 1).
function M.robust(r)
  local d = M.ROBUST_SCALE
  local rho = 2 * d * d * (math.sqrt(1 + (r / d) ^ 2) - 1)
  return r < 0 and -math.sqrt(rho) or math.sqrt(rho)
end

-- The fields a profile fits, in the order of the fit's parameters (its result depends on
-- it), with which runs inform each; their bounds (lo, hi) are the core's descriptors'
-- (stack_lo, stack_hi in engine/core/fields.c), and every field with such bounds is here.
local function bounded(kind, list)
  local rows, listed = {}, {}
  for _, f in ipairs(require("ndplan.c.estimate").names()[kind]) do rows[f.name] = f end
  for _, f in ipairs(list) do
    local row = rows[f.name]
    if not (row and row.stack_hi) then
      error("stack_fit: " .. kind .. "." .. f.name .. " has no stack bounds in the core", 0)
    end
    f.lo, f.hi = row.stack_lo, row.stack_hi
    listed[f.name] = true
  end
  for name, row in pairs(rows) do
    if row.stack_hi and not listed[name] then
      error("stack_fit: " .. kind .. "." .. name .. " has stack bounds but is not fitted", 0)
    end
  end
  return list
end
-- Per-device fields, and whether only FP8 (row-wise) rows inform it.
M.DEVICE_FIELDS = bounded("efficiency", {
  {name = "gemm"},
  {name = "gemm_fp8", fp8 = true},
  {name = "gemm_fp8_rowwise", rowwise = true},
  {name = "attn_fwd"},
})
-- Stack-wide costs, and which runs inform them (DP at ZeRO 0-2, TP, TP overlap on, MoE, CP,
-- ZeRO-3 or FSDP, interleaved pipelines).
M.COST_FIELDS = bounded("costs", {
  {name = "dp_overlap", dp = true},  -- ZeRO 0-2 gradient reduction
  {name = "tp_overlap", tp = true},
  {name = "tp_overlap_on", tpo = true},
  {name = "ep_overlap", moe = true},
  {name = "cp_overlap", cp = true},
  {name = "overlap_sm_share"},
  {name = "step_overhead"},
  {name = "capacity_factor", moe = true},
  {name = "zero3_overlap", fsdp = true},  -- FSDP/ZeRO-3 prefetch
  {name = "pp_overlap", interleaved = true},  -- overlapped p2p
})

local function lin_map(lo, hi)
  return function(z) return lo + (hi - lo) * math.max(0, math.min(1, z)) end,
         function(x) return (math.max(lo, math.min(hi, x)) - lo) / (hi - lo) end
end

-- The parameters this set of cases can inform.
-- A cost no case informs (tp_overlap without TP runs, dp_overlap where every run is
-- FSDP) is not fitted and not written: the default applies.
local function parameters(cases, start)
  local devices, has = {}, {fp8 = {}, bf16 = {}, rowwise = {}, moe = false, cp = false}
  for _, c in ipairs(cases) do
    devices[c.device_name] = true
    local fam = require("ndplan.config.stack").family(c.strategy.precision)
    if fam ~= "bf16" and fam ~= "fp16" then has.fp8[c.device_name] = true
    else has.bf16[c.device_name] = true end
    if (c.strategy.ep or 1) > 1 or c.moe then has.moe = true end
    if (c.strategy.cp or 1) > 1 then has.cp = true end
    if c.strategy.tp_comm_overlap then has.tpo = true end
    if (c.strategy.zero or 0) >= 3 then has.fsdp = true
    elseif (c.strategy.dp or (c.job.devices or 1)
            // ((c.strategy.tp or 1) * (c.strategy.pp or 1) * (c.strategy.cp or 1))) > 1 then
      has.dp = true
    end
    if (c.strategy.tp or 1) > 1 then has.tp = true end
    if (c.strategy.vpp or 1) > 1 then has.interleaved = true end
    if c.strategy.precision == "fp8:rowwise" then has.rowwise[c.device_name] = true end
  end
  local names = {}
  for d in pairs(devices) do names[#names + 1] = d end
  table.sort(names)
  local params = {}
  for _, d in ipairs(names) do
    for _, f in ipairs(M.DEVICE_FIELDS) do
      -- gemm_fp8 only where FP8 rows inform it; gemm only where 16-bit rows do (an
      -- FP8-only device's 16-bit GEMMs -- LM head, router -- take its FP8 fraction);
      -- the row-wise kernels' only where row-wise runs do (else they run as gemm_fp8)
      if (f.fp8 and has.fp8[d]) or (f.name == "gemm" and has.bf16[d])
         or (f.rowwise and has.rowwise[d])
         or (not f.fp8 and not f.rowwise and f.name ~= "gemm") then
        local to_x, to_z = lin_map(f.lo, f.hi)
        local s = start.devices[d] and start.devices[d][f.name] or 0.7
        params[#params + 1] = {device = d, field = f.name, to_x = to_x, z0 = to_z(s)}
      end
    end
  end
  for _, f in ipairs(M.COST_FIELDS) do
    if (not f.moe or has.moe) and (not f.cp or has.cp) and (not f.tpo or has.tpo)
       and (not f.fsdp or has.fsdp) and (not f.interleaved or has.interleaved)
       and (not f.dp or has.dp) and (not f.tp or has.tp) then
      local to_x, to_z = lin_map(f.lo, f.hi)
      local s = start.costs[f.name]
      params[#params + 1] = {cost = f.name, to_x = to_x, z0 = to_z(s or (f.lo + f.hi) / 2)}
    end
  end
  return params, names
end

-- The profile table at parameter point z.
local function profile_at(name, params, z, base_costs)
  local p = {name = name, costs = {}, devices = {}}
  for k, v in pairs(base_costs or {}) do p.costs[k] = v end
  for i, q in ipairs(params) do
    local x = q.to_x(z[i])
    if q.device then
      p.devices[q.device] = p.devices[q.device] or {efficiency = {}}
      p.devices[q.device].efficiency[q.field] = x
      if q.field == "attn_fwd" then
        p.devices[q.device].efficiency.attn_bwd = x * M.ATTN_BWD_RATIO
      end
    else p.costs[q.cost] = x end
  end
  for _, d in pairs(p.devices) do
    local e = d.efficiency
    if e.gemm == nil and e.gemm_fp8 then e.gemm = e.gemm_fp8 end
  end
  return p
end

-- price(cases, profile) -> residuals (log ratios), priced count
function M.price(cases, profile, device_of)
  local nd = require "ndplan"
  local stack = require("ndplan.config.stack")
  local s = assert(stack.load(profile))
  local r = {}
  for _, c in ipairs(cases) do
    local args = {device = device_of(c.device_name), stack = s, costs = c.costs}
    for k, v in pairs(c.strategy) do args[k] = v end
    for k, v in pairs(c.job) do args[k] = v end
    c.model_obj = c.model_obj or assert(nd.model(c.model))
    args.model = c.model_obj
    local e = nd.estimate(args)
    c.predicted_s = e and e.step_time_s or nil
    if e and c.measured_s then r[#r + 1] = math.log(e.step_time_s / c.measured_s) end
  end
  return r
end

-- Residual statistics of priced cases: runs, MAPE and bias in % (predicted vs measured).
function M.stats(cases)
  local n, sum, bias = 0, 0, 0
  for _, c in ipairs(cases) do
    if c.predicted_s then
      local e = 100 * (c.predicted_s - c.measured_s) / c.measured_s
      n, sum, bias = n + 1, sum + math.abs(e), bias + e
    end
  end
  if n == 0 then return {runs = 0} end
  return {runs = n, mape = sum / n, bias = bias / n}
end

local function round(x, digits)
  local m = 10 ^ digits
  return math.floor(x * m + 0.5) / m
end

-- fit{name, cases, device_of, start = {devices = {d = {field = x}}, costs = {...}},
--     base_costs, max_evals} -> profile (with fit residuals), result of least_squares
function M.fit(o)
  local start = o.start or {devices = {}, costs = {}}
  start.devices, start.costs = start.devices or {}, start.costs or {}
  local params, devices = parameters(o.cases, start)
  local z0 = {}
  for i, q in ipairs(params) do z0[i] = q.z0 end
  local function residuals(z)
    local r = M.price(o.cases, profile_at(o.name, params, z, o.base_costs), o.device_of)
    if #r < #o.cases then
      -- a refused case counts as a large residual so the fit does not chase refusals
      for _ = #r + 1, #o.cases do r[#r + 1] = 1 end
    end
    for i, v in ipairs(r) do r[i] = M.robust(v) end
    return r
  end
  local res = calibrate.least_squares(residuals, z0, {max_evals = o.max_evals or 600,
                                                       grid = 5, restarts = 0})
  local profile = profile_at(o.name, params, res.z, o.base_costs)
  for _, dev in pairs(profile.devices) do
    for k, v in pairs(dev.efficiency) do dev.efficiency[k] = round(v, 3) end
  end
  for k, v in pairs(profile.costs) do profile.costs[k] = round(v, 3) end
  M.price(o.cases, profile, o.device_of)  -- predictions at the rounded values
  M.attach_residuals(profile, o.cases, devices)
  return profile, res
end

-- Residuals per device and per regime (precision / dense or MoE), into the profile.
function M.attach_residuals(profile, cases, devices)
  for _, d in ipairs(devices) do
    local mine, regimes = {}, {}
    for _, c in ipairs(cases) do
      if c.device_name == d then
        mine[#mine + 1] = c
        local key = require("ndplan.config.stack").family(c.strategy.precision) .. "/"
                    .. (c.moe and "moe" or "dense")
        regimes[key] = regimes[key] or {}
        table.insert(regimes[key], c)
      end
    end
    local entry = profile.devices[d] or {efficiency = {}}
    profile.devices[d] = entry
    local s = M.stats(mine)
    entry.fit = {runs = s.runs, mape = s.mape and round(s.mape, 1), bias = s.bias and round(s.bias, 1)}
    entry.bands = {}
    for key, list in pairs(regimes) do
      local rs = M.stats(list)
      if rs.runs > 0 then
        entry.bands[key] = {runs = rs.runs, mape = round(rs.mape, 1), bias = round(rs.bias, 1)}
      end
    end
  end
end

-- render(profile, header_lines) -> YAML text of a profile, keys in a fixed order
function M.render(profile, header)
  local out = {}
  for _, l in ipairs(header or {}) do out[#out + 1] = "# " .. l end
  out[#out + 1] = "name: " .. profile.name
  out[#out + 1] = "description: " .. string.format("%q", profile.description or profile.name)
  local keys = require("ndplan.io.order").sorted_keys
  if profile.memory_band then
    out[#out + 1] = string.format("memory_band: %.4g", profile.memory_band)
  end
  out[#out + 1] = "costs:"
  for _, k in ipairs(keys(profile.costs)) do out[#out + 1] = string.format("  %s: %.4g", k, profile.costs[k]) end
  if profile.fallback then out[#out + 1] = "fallback: " .. profile.fallback end
  out[#out + 1] = "devices:"
  for _, d in ipairs(keys(profile.devices)) do
    local e = profile.devices[d]
    out[#out + 1] = "  " .. d .. ":"
    out[#out + 1] = "    efficiency:"
    for _, k in ipairs(keys(e.efficiency or {})) do
      out[#out + 1] = string.format("      %s: %.4g", k, e.efficiency[k])
    end
    if e.fit then
      out[#out + 1] = string.format("    fit: {runs: %d, mape: %s, bias: %s}", e.fit.runs,
                                    tostring(e.fit.mape), tostring(e.fit.bias))
    end
    if e.bands and next(e.bands) then
      out[#out + 1] = "    bands:"
      for _, k in ipairs(keys(e.bands)) do
        local b = e.bands[k]
        out[#out + 1] = string.format("      %s: {runs: %d, mape: %s, bias: %s}", k, b.runs,
                                      tostring(b.mape), tostring(b.bias))
      end
    end
  end
  return table.concat(out, "\n") .. "\n"
end

-- Whether case c (the i-th) stays out of the fit: every `every`-th, or one whose group,
-- label, release or year matches one of the comma-separated Lua patterns of `patterns`.
local function held(c, patterns, every, i)
  if every and i % every == 0 then return true end
  if not patterns then return false end
  for pattern in patterns:gmatch("[^,]+") do
    for _, text in ipairs({c.group or "", c.label or "", c.version or "",
                           c.year and tostring(c.year) or ""}) do
      if text:find(pattern) then return true end
    end
  end
  return false
end

-- run{name, cases, device, hold_out, hold_out_every, fallback, description, max_evals} -> result:
-- {profile, text, fit = stats, held = stats, fit_rows, held_rows, evals, cpu_s}. Cases
-- without a device of their own (a user's CSV) run on `device`; cases whose group, label or
-- release matches hold_out stay out of the fit and are priced with it after.
function M.run(o)
  -- runs without a device of their own (a user's CSV) are on o.device, under its name
  local own = o.device and o.device.name:lower()
  local function device_of(name)
    if name == nil or name == own then return o.device end
    return require("ndplan.fit.validate_modern").device(name)
  end
  local fit_cases, held_cases = {}, {}
  for i, c in ipairs(o.cases) do
    c.device_name = c.device_name or own
    if held(c, o.hold_out, o.hold_out_every, i) then held_cases[#held_cases + 1] = c
    else fit_cases[#fit_cases + 1] = c end
  end
  if #fit_cases == 0 then return nil, "no run left to fit on (all held out?)" end
  local clock = os.clock()
  local profile, res = M.fit{name = o.name, cases = fit_cases, device_of = device_of,
                             base_costs = o.base_costs, max_evals = o.max_evals}
  profile.description = o.description
  profile.memory_band = o.memory_band
  if o.fallback then
    if not profile.devices[o.fallback] then
      return nil, string.format("fallback '%s': no run of the fit set is on that device", o.fallback)
    end
    profile.fallback = o.fallback
  end
  local out = {profile = profile, fit = M.stats(fit_cases), fit_rows = #fit_cases,
               held_rows = #held_cases, evals = res.evals, cpu_s = os.clock() - clock}
  if #held_cases > 0 then
    M.price(held_cases, profile, device_of)
    out.held = M.stats(held_cases)
    local by, names = {}, {}
    for _, c in ipairs(held_cases) do
      if not by[c.group or "runs"] then by[c.group or "runs"] = {}; names[#names + 1] = c.group or "runs" end
      table.insert(by[c.group or "runs"], c)
    end
    table.sort(names)
    out.held_groups = {}
    for _, g in ipairs(names) do
      local s = M.stats(by[g])
      s.group = g
      out.held_groups[#out.held_groups + 1] = s
    end
  end
  return out
end

return M
