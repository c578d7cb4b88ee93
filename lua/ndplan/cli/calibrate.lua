-- The command line of `ndplan calibrate`: its options (SPEC), what they state (settings:
-- the fit set, the fields and their bounds, the costs, the device and the file to write), and
-- the two fits it runs, each writing its file before it returns: a device override file
-- (fit) or, with --profile, a stack profile (profile). This is the CLI layer: a bad option or
-- a fit that cannot be written stops the command (ndplan.cli.fail); the fits themselves are
-- ndplan.fit.calibrate's and ndplan.fit.stack_fit's.
local cli = require "ndplan.cli"
local nd = require "ndplan"
local V = require "ndplan.fit.validate"
local C = require "ndplan.fit.calibrate"

local M = {}

M.SPEC = {
  name = "calibrate",
  usage = "(--table NAMES | --csv FILE) [options]",
  summary = "Fit a device's efficiency fields to measured step times; write a device override file.",
  description = "Least squares on log(predicted/measured), bounded, over the runs of validation\n"
             .. "tables (--table) and/or a CSV of your runs (--csv; columns model, devices,\n"
             .. "global_batch, seq_len, step_time_s, optional tp pp dp vpp cp ep etp sp zero mbs\n"
             .. "mb schedule recompute precision flash_attention label group). The file loads\n"
             .. "with -A in every command; --check prices held-out tables before and after.",
  options = {
    {name = "data", arg = "DIR", help = "folder of the validation CSVs (default: ../shared/validation)"},
    {name = "table", arg = "NAMES", help = "validation tables to fit on, comma-separated"},
    {name = "csv", arg = "FILE", help = "a CSV of measured runs to fit on"},
    {name = "device-type", short = "A", arg = "NAME|PATH", default = "a100-80gb",
     help = "the device to start from"},
    {name = "fields", arg = "LIST", help = "efficiency fields to fit (default: all: "
                                           .. table.concat(C.FIELD_NAMES, ",") .. ")"},
    {name = "bounds", arg = "F=LO:HI,...", help = "bounds per field, e.g. gemm=0.5:0.9,kernel_overhead=0:1ms"},
    {name = "costs", arg = "K=V,...", help = "override named costs in every run, e.g. dp_overlap=0.5"},
    {name = "check", arg = "NAMES", help = "held-out validation tables: MAPE before and after"},
    {name = "max-rows", arg = "N", help = "fit on every k-th run so that at most N are used"},
    {name = "max-evals", arg = "N", default = "800", help = "estimator evaluations of the whole fit set"},
    {name = "output", short = "o", arg = "FILE", help = "the override file (default: <device>-calibrated.yaml)"},
    {name = "name", arg = "NAME", help = "device name in the file (default: <device name>-calibrated)"},
    {name = "profile", arg = "NAME", help = "fit a stack profile NAME instead: every device's efficiencies and the stack's costs at once (-o FILE.yaml; use with --stack NAME)"},
    {name = "hold-out", arg = "PATTERN[,...]", help = "with --profile: runs whose group, label or release matches (any of the comma-separated Lua patterns) stay out of the fit and are reported"},
    {name = "hold-out-every", arg = "N", help = "with --profile: every N-th run (in table order) stays out of the fit and is reported"},
    {name = "memory-band", arg = "SHARE", help = "with --profile: the memory estimate's error bound the profile states (the search ranks within it)"},
    {name = "fallback", arg = "DEVICE", help = "with --profile: the fitted device whose efficiencies devices without a fit use"},
    {name = "json", help = "print one JSON document"},
  },
}

-- settings(opts) -> {fields, bounds, extra (costs), dir, device_arg, device, output,
-- base_in_file, cases, sources, held_out, positive_int(name)} from cli.parse(M.SPEC, ...)
function M.settings(opts)
  if not opts.table and not opts.csv then
    cli.fail("give --table NAMES and/or --csv FILE (see 'ndplan calibrate --help')", cli.EXIT_USAGE)
  end

  local function positive_int(name) return cli.integer(name, opts[name], 1) end

  local fields
  if opts.fields then
    fields = {}
    for f in opts.fields:gmatch("[^,%s]+") do
      local known = false
      for _, k in ipairs(C.FIELD_NAMES) do known = known or k == f end
      if not known then
        cli.fail(string.format("--fields: unknown field '%s' (fittable: %s)", f,
                               table.concat(C.FIELD_NAMES, ", ")), cli.EXIT_USAGE)
      end
      fields[#fields + 1] = f
    end
  end
  -- A bound as typed: "0.7", "300us", "0.31GFLOP" or a plain SI number like "2e-4".
  local function parse_bound(name, text)
    local kind
    for _, f in ipairs(C.FIELDS) do if f.name == name then kind = f.kind end end
    if not kind then return nil, "unknown efficiency field '" .. name .. "'" end
    local n = tonumber(text) or kind == "time" and nd.grammar.time(text)
              or kind == "flop" and nd.grammar.flop(text) or nil
    if n == nil or n ~= n or n < 0 or n == math.huge then
      local want = kind == "time" and "a time like 300us" or kind == "flop"
                   and "a FLOP count like 0.3GFLOP" or "a fraction like 0.8"
      return nil, string.format("%s: expected %s, got '%s'", name, want, text)
    end
    return n
  end

  local bounds
  if opts.bounds then
    bounds = {}
    for item in opts.bounds:gmatch("[^,]+") do
      local f, lo, hi = item:match("^%s*([%w_]+)%s*=%s*([^:]*):(.*)$")
      if not f then cli.fail("--bounds: expected FIELD=LO:HI, got '" .. item .. "'", cli.EXIT_USAGE) end
      local l, lerr = parse_bound(f, lo)
      local h, herr = parse_bound(f, hi)
      if not l or not h then cli.fail("--bounds: " .. (lerr or herr), cli.EXIT_USAGE) end
      bounds[f] = {l, h}
    end
  end
  local extra = opts.costs and cli.parse_costs(opts.costs)
  if extra then
    local ok, err = C.check_costs(extra)
    if not ok then cli.fail("--costs: " .. err, cli.EXIT_USAGE) end
  end

  -- the validation folder, needed only for --table and --check
  local dir = (opts.table or opts.check) and cli.check(V.data_dir(opts.data)) or opts.data
  local device_arg = opts["device-type"]
  local device = cli.check(nd.device(device_arg))

  -- the file: its base as seen from the file's folder
  local function basename(p) return (p:match("([^/]+)$") or p):gsub("%.ya?ml$", "") end
  local is_path = device_arg:find("/", 1, true) or device_arg:match("%.ya?ml$")
  local output = opts.output or (basename(device_arg):lower() .. "-calibrated.yaml")
  local function plain(p) return (p:gsub("^%./", "")) end
  if is_path and plain(output) == plain(device_arg) then
    cli.fail("-o " .. output .. " would overwrite the device it is based on", cli.EXIT_USAGE)
  end
  local out_dir = output:match("^(.*)/[^/]*$")
  local base_in_file = device_arg
  if is_path and device_arg:sub(1, 1) ~= "/" and out_dir then
    local cwd = os.getenv("PWD")
    if not cwd then cli.fail("cannot tell the current folder (PWD) to write the base path of " .. device_arg) end
    base_in_file = cwd .. "/" .. device_arg
  end

  -- the fit set
  local cases, sources = {}, {}
  if opts.table then
    for _, c in ipairs(cli.check(C.table_cases(dir, opts.table))) do cases[#cases + 1] = c end
    sources[#sources + 1] = "tables " .. opts.table
  end
  if opts.csv then
    for _, c in ipairs(cli.check(C.read_runs(opts.csv, device))) do cases[#cases + 1] = c end
    sources[#sources + 1] = "runs of " .. opts.csv
  end
  local held_out = opts.check and cli.check(C.table_cases(dir, opts.check))
  return {fields = fields, bounds = bounds, extra = extra, dir = dir, device_arg = device_arg,
          device = device, output = output, base_in_file = base_in_file, cases = cases,
          sources = sources, held_out = held_out, positive_int = positive_int}
end

-- profile(opts, s) -> r (ndplan.fit.stack_fit.run's), path: the stack profile fitted on s's
-- runs and written to path (checked by loading it back)
function M.profile(opts, s)
  local cases, device, sources, extra = s.cases, s.device, s.sources, s.extra
  local positive_int = s.positive_int
  local SF = require "ndplan.fit.stack_fit"
  local r = cli.check(SF.run{name = opts.profile, cases = cases, device = device,
                             hold_out = opts["hold-out"], fallback = opts.fallback,
                             hold_out_every = positive_int("hold-out-every"),
                             memory_band = opts["memory-band"] and tonumber(opts["memory-band"]),
                             base_costs = extra,
                             description = "fitted on " .. table.concat(sources, ", ")
                               .. (opts["hold-out"] and (", runs matching '" .. opts["hold-out"]
                                   .. "' held out") or ""),
                             max_evals = positive_int("max-evals")})
  local st = require("ndplan.out.summary").fit_stats
  local header = {string.format("stack profile %s: ndplan calibrate --profile %s on %s%s", opts.profile,
                                opts.profile, table.concat(sources, ", "),
                                (opts["hold-out"] and (" --hold-out '" .. opts["hold-out"] .. "'") or "")
                                .. (opts["hold-out-every"] and (" --hold-out-every " .. opts["hold-out-every"]) or "")),
                  "fit set: " .. st(r.fit) .. (r.held and ("; held out: " .. st(r.held)) or "")}
  local path = opts.output or (opts.profile .. ".yaml")
  local m = r.fit and r.fit.mape
  if not (type(m) == "number" and m == m and m < math.huge) then  -- no profile from an infinite error
    cli.fail(string.format("calibrate: the fit's MAPE is %s on %s: not written; check the measured "
                           .. "step times", tostring(m), table.concat(sources, ", ")))
  end
  cli.check(require("ndplan.io.files").write_atomic(path, SF.render(r.profile, header)))
  cli.check(require("ndplan.config.stack").load(path))
  return r, path
end

-- fit(opts, s) -> {result (ndplan.fit.calibrate.fit's), checks (the held-out tables before
-- and after), cpu_s, name}: the device's efficiencies fitted on s's runs, written to s.output
function M.fit(opts, s)
  local device, cases, fields, bounds, extra = s.device, s.cases, s.fields, s.bounds, s.extra
  local positive_int, held_out, sources = s.positive_int, s.held_out, s.sources
  local output, device_arg, base_in_file = s.output, s.device_arg, s.base_in_file
  local clock = os.clock()
  local result = cli.check(C.fit{device = device, cases = cases, fields = fields, bounds = bounds,
                                 costs = extra, max_rows = positive_int("max-rows"),
                                 max_evals = positive_int("max-evals")})
  local cpu_s = os.clock() - clock

  -- held-out tables, one summary per table before and after
  local checks = {}
  if held_out then
    local by_table, order = {}, {}
    for _, c in ipairs(held_out) do
      if not by_table[c.table] then by_table[c.table] = {}; order[#order + 1] = c.table end
      table.insert(by_table[c.table], c)
    end
    for _, name in ipairs(order) do
      local before = V.summary(V.run(by_table[name], device, extra))
      local after = V.summary(V.run(by_table[name], result.device, extra))
      checks[#checks + 1] = {name = name, rows = before.n, before = before, after = after}
    end
  end

  local name = opts.name or (device.name .. "-calibrated")
  local held_text = require("ndplan.out.summary").held_out_line(checks)
  -- a fit whose error is not a finite number (a measured time so small the ratio overflows)
  -- is no calibration: nothing is written
  local function finite(v) return type(v) == "number" and v == v and v > -math.huge and v < math.huge end
  if not (finite(result.after.mape) and finite(result.after.max_abs)) then
    cli.fail(string.format("calibrate: the fit's MAPE is %s (max error %s) on %s: not written; check "
                           .. "the measured step times", tostring(result.after.mape),
                           tostring(result.after.max_abs), table.concat(sources, ", ")))
  end
  local rendered = C.render(result, {base = base_in_file, name = name, sources = table.concat(sources, ", "),
                                 held_out = held_text})
  cli.check(C.write(output, rendered, device_arg, result.values))
  return {result = result, checks = checks, cpu_s = cpu_s, name = name}
end

return M
