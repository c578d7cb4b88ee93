-- ndplan calibrate: fit a device's efficiencies to measured step times, write an override file
local cli = require "ndplan.cli"
local text = require "ndplan.out.text"
local json = require "ndplan.io.json"
local V = require "ndplan.fit.validate"
local C = require "ndplan.fit.calibrate"

local spec = {
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

local opts = cli.parse(spec, {...})
if not opts then return end
if not opts.table and not opts.csv then
  cli.fail("give --table NAMES and/or --csv FILE (see 'ndplan calibrate --help')", cli.EXIT_USAGE)
end

local function positive_int(name)
  local v = opts[name]
  if v == nil then return nil end
  local n = math.tointeger(tonumber(v))
  if not n or n < 1 then
    cli.fail(string.format("--%s: expected a positive whole number, got '%s'", name, v), cli.EXIT_USAGE)
  end
  return n
end

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

if opts.profile then  -- a stack profile: every field at once, per device and stack-wide
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
  local function st(x) return x and string.format("%d runs, MAPE %.1f%%, bias %+.1f%%", x.runs, x.mape or 0, x.bias or 0) or "-" end
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
  if opts.json then
    io.write(json.encode({schema = "ndplan.calibrate.profile/1", name = opts.profile, output = path,
                          fit = r.fit, held_out = r.held, evaluations = r.evals, cpu_s = r.cpu_s}), "\n")
    return
  end
  print(string.format("fitted stack %s on %s: %s; %d evaluations, %.1f s CPU", opts.profile,
                      table.concat(sources, ", "), st(r.fit), r.evals, r.cpu_s))
  if r.held then
    print("held out  " .. st(r.held))
    for _, g in ipairs(r.held_groups) do print(string.format("  %-32s %s", g.group, st(g))) end
  end
  print(string.format("wrote %s (--stack %s in every command)", path, path))
  return
end

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
local function pct(v) return v and string.format("%.1f%%", v) or "-" end
local held_text
if #checks > 0 then
  local parts = {}
  for _, ch in ipairs(checks) do
    parts[#parts + 1] = string.format("%s %s -> %s", ch.name, pct(ch.before.mape), pct(ch.after.mape))
  end
  held_text = "Held-out MAPE: " .. table.concat(parts, ", ") .. "."
end
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

if opts.json then
  local function s(x)
    return {rows = x.n, refused = x.refused, mape_pct = x.mape, max_abs_pct = x.max_abs,
            spearman_min = x.spearman_min}
  end
  local doc = {schema = "ndplan.calibrate/1", device = device.name, base = base_in_file,
               name = name, output = output, sources = sources, rows = result.rows,
               used_rows = result.used_rows, every = result.every, refused = result.refused,
               evaluations = result.evals, iterations = result.iterations,
               stopped = result.reason, cpu_s = cpu_s, fields = {},
               before = s(result.before), after = s(result.after), held_out = {}}
  for i, f in ipairs(result.fields) do
    doc.fields[i] = {name = f.name, before = f.before, after = f.after, lower = f.lo,
                     upper = f.hi, at_bound = f.at_bound or false, no_effect = f.no_effect or false,
                     flat = f.flat or false}
  end
  for i, ch in ipairs(checks) do
    doc.held_out[i] = {name = ch.name, before = s(ch.before), after = s(ch.after)}
  end
  io.write(json.encode(doc), "\n")
  return
end

local out = {}
local function say(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
say("calibrated %s on %s: %d runs%s%s", device.name, table.concat(sources, ", "), result.rows,
    result.every > 1 and string.format(" (every %d-th used: %d, --max-rows)", result.every,
                                       result.used_rows) or "",
    result.refused > 0 and string.format(", %d refused by the estimator and left out", result.refused) or "")
local rows = {}
for _, f in ipairs(result.fields) do
  rows[#rows + 1] = {field = f.name, before = C.format_value(f.name, f.before),
                     after = C.format_value(f.name, f.after),
                     bounds = C.format_value(f.name, f.lo) .. ".." .. C.format_value(f.name, f.hi),
                     note = f.no_effect and "no effect on these runs: kept"
                            or f.flat and "no effect near the fit: kept" or f.at_bound and "at a bound" or ""}
end
out[#out + 1] = (text.format_table({
  {key = "field", title = "  field"}, {key = "before", title = "before", align = "right"},
  {key = "after", title = "after", align = "right"}, {key = "bounds", title = "bounds"},
  {key = "note", title = "note"},
}, rows):gsub("\n$", ""):gsub("([^\n]+)", "  %1"))
local b, a = result.before, result.after
say("fit set   MAPE %s -> %s   max %s -> %s   Spearman min %s -> %s", pct(b.mape), pct(a.mape),
    pct(b.max_abs), pct(a.max_abs), b.spearman_min and string.format("%.3f", b.spearman_min) or "-",
    a.spearman_min and string.format("%.3f", a.spearman_min) or "-")
say("optimiser %d estimator evaluations of the fit set, %d iterations, %s; %.1f s CPU",
    result.evals, result.iterations, result.reason, cpu_s)
for _, ch in ipairs(checks) do
  say("held out  %-22s %4d rows  MAPE %s -> %s   max %s -> %s", ch.name, ch.rows,
      pct(ch.before.mape), pct(ch.after.mape), pct(ch.before.max_abs), pct(ch.after.max_abs))
end
say("wrote %s (ndplan validate -A %s)", output, output)
io.write(table.concat(out, "\n"), "\n")
