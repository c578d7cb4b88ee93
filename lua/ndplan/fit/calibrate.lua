-- Calibration: fit a device's efficiency fields to measured step times and write them as a
-- device override file (`base:` + `efficiency:`) that every command loads with -A.
--
-- Objective: the sum over runs of r_i^2 with r_i = log(predicted_i / measured_i), the
-- log-ratio residual. For small errors r_i is the relative error; unlike it, it treats
-- 2x too slow and 2x too fast alike and never rewards predicting zero.
--
-- Optimiser (least_squares below): each field is mapped to z in [0, 1] between its bounds,
-- logarithmically above a small scale (efficiencies and sizes act as factors); coordinate
-- grid sweeps alternate with projected Levenberg-Marquardt. Deterministic.
--
-- User CSV of measured runs (one header row, comma-separated, no quoting; blank lines and
-- lines starting with # are skipped). Required columns:
--   model        bundled model name, or a path to an HF config.json / YAML (relative paths
--                are relative to the CSV's folder)
--   devices, global_batch, seq_len   whole numbers
--   step_time_s  measured seconds per optimizer step
-- Optional (empty cell = not given, the estimator's default): tp pp dp vpp cp ep etp mbs mb
-- (whole numbers), zero (0-3), sp and flash_attention (true/false), schedule (the core's:
-- 1f1b, interleaved, gpipe, zb, dualpipe), recompute (none, selective, full), precision
-- (bf16, fp16, fp8, a recipe),
-- label and group (text; Spearman is taken within a group).
local core = require "ndplan.c.estimate"
local cdev = require "ndplan.c.device"
local files = require "ndplan.io.files"
local V = require "ndplan.fit.validate"

local M = {}

-- The efficiency fields ndplan can fit: the core's descriptors with fit bounds (SI), the
-- scale below which the z mapping turns linear (so a lower bound of 0 is reachable), and
-- the file unit kind (ndplan/fields.h).
M.FIELDS = {}
for _, f in ipairs(core.names().efficiency) do
  if f.fit_hi then
    M.FIELDS[#M.FIELDS + 1] = {name = f.name, kind = f.unit, lo = f.fit_lo, hi = f.fit_hi,
                               scale = f.fit_scale}
  end
end
local FIELD = {}
M.FIELD_NAMES = {}  -- the fittable field names, in order
for i, f in ipairs(M.FIELDS) do FIELD[f.name] = f; M.FIELD_NAMES[i] = f.name end

-- Bounded coordinates: x = lo + c * ((1 + (hi - lo)/c)^z - 1), z in [0, 1]. With lo > 0,
-- c = lo and this is x = lo * (hi/lo)^z, a log scale; with lo = 0 it is log-like above c.
local function mapping(lo, hi, scale)
  local c = lo > 0 and lo or scale
  local span = math.log(1 + (hi - lo) / c)
  return {
    -- the ends exactly, so a fraction fitted to its upper bound 1 stays a valid fraction
    to_x = function(z)
      if z <= 0 then return lo elseif z >= 1 then return hi end
      return math.max(lo, math.min(hi, lo + c * (math.exp(z * span) - 1)))
    end,
    to_z = function(x)
      return math.max(0, math.min(1, math.log(1 + (math.max(lo, math.min(hi, x)) - lo) / c) / span))
    end,
  }
end

-- The optimiser, independent of ndplan: least_squares(residuals, z0 [, opts]) minimises
-- sum(r_i(z)^2) over the unit box. residuals(z) returns an array of numbers, or nil when
-- z cannot be evaluated (counted as an infinite cost). Rounds of a coordinate grid sweep
-- (each field tried at `grid` evenly spaced points, the rest held) then projected
-- Levenberg-Marquardt, until a sweep finds nothing better: the sweep gets out of regions
-- where a field has no gradient (a floor such as kernel_overhead below every layer's
-- work), LM follows the correlated valleys. opts: max_evals (800), grid (9), step (1e-4,
-- the finite-difference step in z), tol (1e-10, relative cost decrease that ends LM),
-- restarts (2), progress(iteration, cost, z, lambda) after each accepted LM step.
-- Returns {z, cost, evals, iterations, reason, start (0: z0), insensitive, flat}: field i is
-- insensitive when no value in the first sweep changed the cost, flat when moving it back
-- to z0 at the end did not either (then it is left there).

-- Solves a x = b (n x n) by Gaussian elimination with partial pivoting; nil if singular.
local function solve(a, b, n)
  local m = {}
  for i = 1, n do m[i] = {table.unpack(a[i], 1, n)}; m[i][n + 1] = b[i] end
  for col = 1, n do
    local p = col
    for i = col + 1, n do if math.abs(m[i][col]) > math.abs(m[p][col]) then p = i end end
    if not (math.abs(m[p][col]) > 1e-300) then return nil end
    m[col], m[p] = m[p], m[col]
    for i = col + 1, n do
      local k = m[i][col] / m[col][col]
      for j = col, n + 1 do m[i][j] = m[i][j] - k * m[col][j] end
    end
  end
  local x = {}
  for i = n, 1, -1 do
    local s = m[i][n + 1]
    for j = i + 1, n do s = s - m[i][j] * x[j] end
    x[i] = s / m[i][i]
  end
  return x
end

function M.least_squares(residuals, z0, opts)
  opts = opts or {}
  local max_evals, h, tol = opts.max_evals or 800, opts.step or 1e-4, opts.tol or 1e-10
  local grid, restarts = opts.grid or 9, opts.restarts or 2
  local d, evals, iterations, insensitive = #z0, 0, 0, {}
  local z, r, cost, lambda
  local function eval(z)
    evals = evals + 1
    local r, s = residuals(z), 0
    if r == nil then return nil, math.huge end
    for i = 1, #r do s = s + r[i] * r[i] end
    return r, s
  end

  -- one sweep: each sensitive field over the grid, keeping the best point; true if it moved
  local function sweep(first)
    local moved = false
    for i = 1, d do
      if not insensitive[i] and grid >= 2 then
        local changed = false
        for g = 0, grid - 1 do
          if evals >= max_evals then return moved end
          local zi = {table.unpack(z)}
          zi[i] = g / (grid - 1)
          local ri, ci = eval(zi)
          changed = changed or ci ~= cost
          if ci < cost * (1 - 1e-9) then z, r, cost, moved = zi, ri, ci, true end
        end
        if first and not changed then insensitive[i] = true end
      end
    end
    return moved
  end

  -- projected LM from z until the cost stops falling; returns why it stopped
  local function descend()
    while evals + d + 1 <= max_evals do
      iterations = iterations + 1
      -- forward differences (backward at the upper bound): cols[i][k] = d r_k / d z_i
      local cols = {}
      for i = 1, d do
        local step = z[i] + h <= 1 and h or -h
        local zi = {table.unpack(z)}
        zi[i] = z[i] + step
        local ri = not insensitive[i] and eval(zi)
        local col = {}
        for k = 1, #r do col[k] = ri and (ri[k] - r[k]) / step or 0 end
        cols[i] = col
      end
      -- normal equations A = J'J, g = J'r; a field on a bound that wants out stays there
      local free, g, a, maxdiag = {}, {}, {}, 0
      for i = 1, d do
        local gi, norm = 0, 0
        for k = 1, #r do gi = gi + cols[i][k] * r[k]; norm = norm + cols[i][k] ^ 2 end
        g[i] = gi
        local pinned = (z[i] <= 0 and gi > 0) or (z[i] >= 1 and gi < 0)
        if norm > 0 and not pinned then free[#free + 1] = i end
      end
      if #free == 0 then return "converged (every field on a bound or without gradient)" end
      for p, i in ipairs(free) do
        a[p] = {}
        for q, j in ipairs(free) do
          local s = 0
          for k = 1, #r do s = s + cols[i][k] * cols[j][k] end
          a[p][q] = s
        end
        maxdiag = math.max(maxdiag, a[p][p])
      end
      -- damped steps (Marquardt's scaling by diag(A)) until one lowers the cost
      local accepted, drop, moved = false, 0, 0
      while evals < max_evals and lambda < 1e12 and not accepted do
        local damped, rhs = {}, {}
        for p = 1, #free do
          damped[p] = {table.unpack(a[p])}
          damped[p][p] = a[p][p] + lambda * math.max(a[p][p], 1e-12 * maxdiag)
          rhs[p] = -g[free[p]]
        end
        local delta = solve(damped, rhs, #free)
        local zn = {table.unpack(z)}
        moved = 0
        for p, i in ipairs(free) do
          zn[i] = math.max(0, math.min(1, z[i] + (delta and delta[p] or 0)))
          moved = math.max(moved, math.abs(zn[i] - z[i]))
        end
        if moved < 1e-12 then break end
        local rn, cn = eval(zn)
        if cn < cost then
          drop = (cost - cn) / math.max(cost, 1e-300)
          z, r, cost, accepted = zn, rn, cn, true
          lambda = math.max(lambda / 3, 1e-9)
          if opts.progress then opts.progress(iterations, cost, z, lambda) end
        else
          lambda = lambda * 4
        end
      end
      if not accepted then
        return evals < max_evals and "converged (no smaller step lowers the cost)" or nil
      end
      if drop < tol or moved < 1e-9 or cost < 1e-24 then return "converged" end
    end
  end

  -- from z0, then (against local minima) from every field at 1/3 and at 2/3 of its range
  local best
  for start = 0, restarts do
    z, lambda = {}, 1e-2
    for i = 1, d do  -- a field without effect stays where it was given
      z[i] = (start == 0 or insensitive[i]) and math.max(0, math.min(1, z0[i])) or start / (restarts + 1)
    end
    r, cost = eval(z)
    local reason
    if r == nil then reason = "the starting point cannot be evaluated"
    else
      for round = 1, 5 do
        local jumped = sweep(start == 0 and round == 1)
        if evals >= max_evals then reason = nil; break end
        if round > 1 and not jumped then break end
        reason = descend()
        if evals >= max_evals or cost < 1e-24 then break end
      end
    end
    if not best or cost < best.cost then
      best = {z = z, cost = cost, reason = reason or "the evaluation budget ran out", start = start}
    end
    if evals >= max_evals or best.cost < 1e-24 then break end
  end
  -- a field the optimum does not depend on (a floor that never binds) goes back to z0
  best.flat = {}
  for i = 1, d do
    local zi = {table.unpack(best.z)}
    zi[i] = math.max(0, math.min(1, z0[i]))
    if zi[i] ~= best.z[i] and not insensitive[i] and evals < max_evals then
      local ri, ci = eval(zi)
      if ri and ci <= best.cost * (1 + 1e-12) then best.z, best.cost, best.flat[i] = zi, ci, true end
    end
  end
  best.evals, best.iterations, best.insensitive = evals, iterations, insensitive
  return best
end

-- Devices with changed efficiencies, built from the base device's canonical table ----------
-- with_efficiency(device, values) -> device | nil, message (values: {field = SI number})
function M.with_efficiency(device, values)
  local canon = device:totable()
  for k, v in pairs(values) do
    if not FIELD[k] then error("calibrate.with_efficiency: unknown field '" .. k .. "'", 2) end
    canon.efficiency[k] = v
  end
  return cdev.new(canon)
end

-- Measured runs: validation tables and user CSV files, as validate's cases ----------------
local COUNT_COLUMNS = {"devices", "global_batch", "seq_len", "tp", "pp", "dp", "vpp", "cp",
                       "ep", "etp", "mbs", "mb"}
local REQUIRED = {"model", "devices", "global_batch", "seq_len", "step_time_s"}
local JOB = {devices = true, global_batch = true, seq_len = true}
local IS_REQUIRED = {}
for _, k in ipairs(REQUIRED) do IS_REQUIRED[k] = true end

local COLUMNS = {model = "model", step_time_s = "seconds", zero = "zero", sp = "bool",
                 flash_attention = "bool", label = "text", group = "text",
                 schedule = "schedule", recompute = "recompute", precision = "precision"}
for _, k in ipairs(COUNT_COLUMNS) do COLUMNS[k] = "count" end

-- sorted_keys(t) -> t's keys, sorted (the fit's files list them in a fixed order)
local sorted_keys = require("ndplan.io.order").sorted_keys

-- Cell parsers: text -> value | nil, "expected ..."
local function whole(lo, hi, expected)
  return function(s)
    local n = math.tointeger(tonumber(s))
    if n and n >= lo and n <= hi then return n end
    return nil, expected
  end
end
local function one_of(list)
  return function(s)
    for _, v in ipairs(list) do if v == s then return s end end
    return nil, "one of " .. table.concat(list, ", ")
  end
end
local CELL = {
  schedule = one_of(core.names().schedules),
  recompute = one_of(core.names().recompute),
  precision = one_of(require("ndplan.config.device").recipe_names()),
  count = whole(1, math.maxinteger, "a positive whole number"),
  zero = whole(0, 3, "a ZeRO stage 0, 1, 2 or 3"),
  seconds = function(s)
    local n = tonumber(s)
    if n and n > 0 and n < math.huge then return n end
    return nil, "a positive number of seconds"
  end,
  bool = function(s)
    if s == "true" or s == "1" then return true elseif s == "false" or s == "0" then return false end
    return nil, "true or false"
  end,
  text = function(s) return s end,
}

local function dirname(path) return path:match("^(.*)/[^/]*$") or "." end

-- read_runs(path [, device]) -> array of cases (validate's shape, model_obj loaded) | nil,
-- message. Every run is priced once on `device` (default a100-80gb): a strategy the
-- estimator refuses is an error in the data, reported with its line.
function M.read_runs(path, device)
  local text, err = files.read(path)
  if not text then return nil, err end
  text = text:gsub("^\239\187\191", "")
  if text:sub(-1) ~= "\n" then text = text .. "\n" end
  local bundled = {}
  for _, n in ipairs(require("ndplan").models()) do bundled[n] = true end
  local models, header, cases, lineno = {}, nil, {}, 0
  for line in text:gmatch("(.-)\r?\n") do
    lineno = lineno + 1
    local at = path .. ":" .. lineno .. ": "
    if line:match("^%s*$") or line:match("^%s*#") then goto next_line end
    if line:find('"', 1, true) then
      return nil, at .. "quoted fields are not supported (no commas or quotes in values)"
    end
    local cells = {}
    for cell in (line .. ","):gmatch("([^,]*),") do
      cells[#cells + 1] = cell:match("^%s*(.-)%s*$")
    end
    if not header then
      header = cells
      local seen = {}
      for i, name in ipairs(cells) do
        if not COLUMNS[name] or seen[name] then
          return nil, string.format("%scolumn %d: %s column '%s' (expected one of: %s)", at, i,
            seen[name] and "repeated" or "unknown", name, table.concat(sorted_keys(COLUMNS), ", "))
        end
        seen[name] = i
      end
      for _, name in ipairs(REQUIRED) do
        if not seen[name] then return nil, at .. "required column '" .. name .. "' is missing" end
      end
      goto next_line
    end
    if #cells ~= #header then
      return nil, string.format("%sexpected %d fields as in the header, got %d", at, #header,
                                #cells)
    end
    do
      local c = {job = {}, strategy = {}, costs = {}, line = lineno}
      for i, name in ipairs(header) do
        local s, kind = cells[i], COLUMNS[name]
        local function bad(expected)
          return nil, string.format("%sfield '%s' (column %d): expected %s, got '%s'", at,
                                    name, i, expected, s)
        end
        if s == "" then
          if IS_REQUIRED[name] then return bad("a value") end
        elseif kind == "model" then
          local key = s
          if not bundled[s] and s:sub(1, 1) ~= "/" then key = dirname(path) .. "/" .. s end
          if not models[key] then
            local m, merr = require("ndplan").model(key)
            if not m then
              return nil, string.format("%sfield 'model' (column %d): %s", at, i, merr)
            end
            models[key] = m
          end
          c.model, c.model_obj = s, models[key]
        else
          local v, expected = CELL[kind](s)
          if v == nil then return bad(expected) end
          if name == "step_time_s" then c.measured_s = v
          elseif name == "label" or name == "group" then c[name] = v
          elseif JOB[name] then c.job[name] = v
          else c.strategy[name] = v end
        end
      end
      c.label = c.label or string.format("line %d", lineno)
      c.group = c.group or "all"
      -- the strategy must be one the estimator accepts: a refusal is an error in the data
      local args = {model = c.model_obj, device = device or "a100-80gb", costs = {}}
      for k, v in pairs(c.job) do args[k] = v end
      for k, v in pairs(c.strategy) do args[k] = v end
      local ok, r, why = pcall(require("ndplan").estimate, args)
      if not ok or not r then
        return nil, at .. "strategy refused: " .. tostring(ok and why or r)
      end
      cases[#cases + 1] = c
    end
    ::next_line::
  end
  if not header then return nil, path .. ": no header row" end
  if #cases == 0 then return nil, path .. ": no runs after the header" end
  return cases
end

-- table_cases(dir, names) -> cases of the named validation tables (a list or "a,b") with
-- `table` set on each | nil, message
function M.table_cases(dir, names)
  if type(names) == "string" then
    local list = {}
    for n in names:gmatch("[^,%s]+") do list[#list + 1] = n end
    names = list
  end
  local out = {}
  for _, name in ipairs(names) do
    local cases, err = V.cases(dir, name)
    if not cases then return nil, err end
    for _, c in ipairs(cases) do c.table = name; out[#out + 1] = c end
  end
  return out
end

-- The fit ----------------------------------------------------------------------------------
-- check_costs(costs) -> true | nil, message: names the estimator knows
function M.check_costs(costs)
  local known = core.costs()
  for k in pairs(costs or {}) do
    if known[k] == nil then
      return nil, "unknown cost '" .. k .. "' (known: " .. table.concat(sorted_keys(known), ", ") .. ")"
    end
  end
  return true
end

--[[
fit{device=, cases=, fields=, bounds=, costs=, max_rows=, max_evals=} -> result | nil, message
  device: the device to start from (its values are the starting point)
  cases: measured runs (read_runs or table_cases); refused strategies are left out
  fields: names to fit (default: every field of M.FIELDS)
  bounds: {field = {lo, hi}} in SI, replacing the defaults of M.FIELDS
  max_rows: fit on every k-th run so that at most this many are used
result = {device (fitted), values = {field = SI}, fields = {{name, before, after, lo, hi,
  at_bound, no_effect, flat}}, rows, used_rows, every, refused, before, after (summaries on
  the fit rows), evals, iterations, reason}
]]
function M.fit(args)
  local base, names = args.device, args.fields or M.FIELD_NAMES
  local ok, err = M.check_costs(args.costs)
  if not ok then return nil, err end
  if #names == 0 then return nil, "no fields to fit" end
  local start = base:totable().efficiency
  local params, chosen = {}, {}
  for _, name in ipairs(names) do
    chosen[name] = true
    local f = FIELD[name]
    if not f then
      return nil, string.format("unknown efficiency field '%s' (fittable: %s)", tostring(name),
                                table.concat(M.FIELD_NAMES, ", "))
    end
    local b = (args.bounds or {})[name] or {f.lo, f.hi}
    local lo, hi = b[1], b[2]
    if not (lo >= 0 and hi > lo and hi < math.huge) or (f.kind == "fraction" and
                                                         (lo <= 0 or hi > 1)) then
      return nil, string.format("bounds for %s: expected %s, got %s..%s", name,
        f.kind == "fraction" and "0 < lower < upper <= 1" or "0 <= lower < upper",
        tostring(lo), tostring(hi))
    end
    params[#params + 1] = {name = name, lo = lo, hi = hi, map = mapping(lo, hi, f.scale),
                           before = start[name]}
  end
  for k in pairs(args.bounds or {}) do
    if not chosen[k] then return nil, "bounds given for '" .. tostring(k) .. "', which is not fitted" end
  end
  -- the runs the estimator accepts, subsampled deterministically when there are too many
  local all = V.run(args.cases, base, args.costs)
  local usable, refused = {}, 0
  for _, c in ipairs(all) do
    if c.predicted_s then usable[#usable + 1] = c else refused = refused + 1 end
  end
  if #usable == 0 then return nil, "no measured run can be estimated (all refused)" end
  local every = args.max_rows and math.max(1, math.ceil(#usable / args.max_rows)) or 1
  local rows = {}
  for i = 1, #usable, every do rows[#rows + 1] = usable[i] end
  for _, c in ipairs(rows) do  -- the row's own costs, then the caller's on top (as V.run)
    c.fit_costs = {}
    for _, t in ipairs({c.costs or {}, args.costs or {}}) do
      for k, v in pairs(t) do c.fit_costs[k] = v end
    end
  end

  local function values_at(z)
    local v = {}
    for i, p in ipairs(params) do v[p.name] = p.map.to_x(z[i]) end
    return v
  end
  local function residuals(z)
    local dev = M.with_efficiency(base, values_at(z))
    if not dev then return nil end
    local r = {}
    for i, c in ipairs(rows) do
      local res = core.run(c.model_obj, dev, c.job, c.strategy, c.fit_costs)
      if not res then return nil end
      r[i] = math.log(res.step_time_s / c.measured_s)
    end
    return r
  end
  local z0 = {}
  for i, p in ipairs(params) do z0[i] = p.map.to_z(p.before) end
  local opt = M.least_squares(residuals, z0, {max_evals = args.max_evals,
                                              progress = args.progress})
  local values = values_at(opt.z)
  local fitted, derr = M.with_efficiency(base, values)
  if not fitted then return nil, derr end

  local result = {device = fitted, values = values, fields = {}, rows = #usable,
                  used_rows = #rows, every = every, refused = refused, evals = opt.evals,
                  iterations = opt.iterations, reason = opt.reason, cases = rows}
  for i, p in ipairs(params) do
    result.fields[i] = {name = p.name, before = p.before, after = values[p.name], lo = p.lo,
                        hi = p.hi, at_bound = (opt.z[i] <= 0 or opt.z[i] >= 1) or nil,
                        no_effect = opt.insensitive[i] or nil, flat = opt.flat[i] or nil}
  end
  result.before = V.summary(V.run(rows, base, args.costs))
  result.after = V.summary(V.run(rows, fitted, args.costs))
  return result
end

-- The override file ------------------------------------------------------------------------
local SI = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}, {1, ""}}
local TIME = {{1, "s"}, {1e-3, "ms"}, {1e-6, "us"}, {1e-9, "ns"}}

-- Four significant digits in the unit that keeps the mantissa in [1, 1000).
local function with_unit(v, steps, suffix)
  for i, s in ipairs(steps) do
    if v >= s[1] * 0.99995 or i == #steps then
      return string.format("%.4g%s%s", v / s[1], s[2], suffix)
    end
  end
end

-- format_value(field, SI) -> the text the device loader reads: 0.7123, 412.3us, 310MFLOP
function M.format_value(name, v)
  local kind = FIELD[name].kind
  if kind == "time" then return with_unit(v, TIME, "") end
  if kind == "flop" then return with_unit(v, SI, "FLOP") end
  return string.format("%.4g", v)
end

local function yaml_string(s)
  if s:match("^[%w][%w%._/%-]*$") then return s end
  return '"' .. s:gsub("\\", "\\\\"):gsub('"', '\\"') .. '"'
end

--[[
render(result, {base=, name=, sources=, held_out=}) -> YAML text
  base: how the file names its base device (a bundled name or a path as seen from the file)
  sources: what the fit used, e.g. "tables vtrain_single"; held_out: optional text
]]
function M.render(result, o)
  local function pct(v) return v and string.format("%.1f%%", v) or "-" end
  local out = {
    "# Device override written by `ndplan calibrate`: efficiencies of " .. o.base,
    "# fitted to measured step times (least squares on log(predicted/measured)).",
    string.format("# Fit set: %s; %d runs%s.", o.sources, result.rows,
                  result.every > 1 and string.format(", every %d-th used (%d)", result.every,
                                                     result.used_rows) or ""),
    string.format("# On the fit set: MAPE %s -> %s, max error %s -> %s; %d estimator evaluations.",
                  pct(result.before.mape), pct(result.after.mape), pct(result.before.max_abs),
                  pct(result.after.max_abs), result.evals),
  }
  if o.held_out then out[#out + 1] = "# " .. o.held_out end
  local held, canon = {}, result.device:totable().efficiency
  for _, f in ipairs(M.FIELDS) do
    if result.values[f.name] == nil then
      held[#held + 1] = f.name .. " " .. M.format_value(f.name, canon[f.name])
    end
  end
  if #held > 0 then
    out[#out + 1] = "# Inherited from the base, not fitted: " .. table.concat(held, ", ") .. "."
  end
  out[#out + 1] = "base: " .. yaml_string(o.base)
  out[#out + 1] = "name: " .. yaml_string(o.name)
  out[#out + 1] = "efficiency:"
  for _, f in ipairs(result.fields) do
    local note = f.no_effect and "  # no effect on the fit set: kept"
                 or f.flat and "  # no effect near the fit: kept" or f.at_bound and "  # at a bound" or ""
    out[#out + 1] = string.format("  %s: %s%s", f.name, M.format_value(f.name, f.after), note)
  end
  return table.concat(out, "\n") .. "\n"
end

-- write(path, text, base_from_cwd, values) -> device | nil, message. Loads the text back
-- first (its base resolved from the current folder) and checks every fitted value survives
-- the 4-digit rounding; only then is the file written, atomically.
function M.write(path, text, base_from_cwd, values)
  local yaml = require "ndplan.io.yaml"
  local doc, derr = yaml.decode(text, path)
  if doc == nil then return nil, derr end
  doc.base = base_from_cwd
  local dev, err = require("ndplan.config.device").load(doc)
  if not dev then return nil, "the calibrated file does not load back: " .. err end
  local eff = dev:totable().efficiency
  for k, v in pairs(values) do
    if math.abs(eff[k] - v) > 6e-4 * math.abs(v) + 1e-300 then
      return nil, string.format("%s does not round-trip: wrote %s, read back %g", k,
                                M.format_value(k, v), eff[k])
    end
  end
  local ok, werr = files.write_atomic(path, text)
  if not ok then return nil, werr end
  return dev
end

return M
