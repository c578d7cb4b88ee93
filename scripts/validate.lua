-- ndplan validate: compare predicted step times with published measured runs
local cli = require "ndplan.cli"
local json = require "ndplan.io.json"
local V = require "ndplan.fit.validate"

local spec = {
  name = "validate",
  summary = "Compare predicted step times with published measured runs (shared/validation).",
  options = {
    {name = "data", arg = "DIR", help = "folder of the validation CSVs (default: ../shared/validation)"},
    {name = "device-type", short = "A", arg = "NAME|PATH", default = "a100-80gb",
     help = "device (or a calibrated override file)"},
    {name = "table", arg = "NAME[:GROUPS]", help = "only this table; GROUPS, a Lua pattern, keeps the rows whose group matches"},
    {name = "costs", arg = "K=V,...", help = "override named costs in every row, e.g. dp_overlap=0.5"},
    {name = "stack", arg = "NAME|PATH", help = "price the modern runs with this stack profile (default: each row's own bundled profile, else none)"},
    {name = "rows", help = "print every row's predicted and measured step time"},
    {name = "json", help = "print one JSON document"},
  },
}

local opts = cli.parse(spec, {...})
if not opts then return end
-- the arguments first, then the data folder: a bad --table is named wherever it runs
local only = opts.table and cli.check(V.table_spec(opts.table))
local device = cli.check(nd.device(opts["device-type"]))
local extra = opts.costs and cli.parse_costs(opts.costs)
local dir = cli.check(V.data_dir(opts.data))
local report = {schema = "ndplan.validate/1", device = device.name, tables = {}}
local lines = {}
for _, t in ipairs(V.TABLES) do
  if not only or only == t.name then
    local cases = cli.check(V.cases(dir, opts.table or t.name))
    V.run(cases, device, extra, t.per_group and opts.stack or nil)
    local s = V.summary(cases)
    local entry = {name = t.name, what = t.what, rows = s.n, refused = s.refused,
                   mape_pct = s.mape, bias_pct = s.bias, max_abs_pct = s.max_abs,
                   spearman_min = s.spearman_min, spearman_groups = s.groups, cases = {}}
    for _, c in ipairs(cases) do
      entry.cases[#entry.cases + 1] = {label = c.label, group = c.group, measured_s = c.measured_s,
                                       predicted_s = c.predicted_s, error_pct = c.error_pct,
                                       refused = c.refused}
    end
    report.tables[#report.tables + 1] = entry
    lines[#lines + 1] = string.format("%-22s %4d rows  MAPE %5.1f%%  max %5.1f%%  Spearman min %s%s",
      opts.table or t.name, s.n, s.mape or 0, s.max_abs, s.spearman_min and string.format("%.3f", s.spearman_min) or "-",
      s.refused > 0 and string.format("  (%d refused)", s.refused) or "")
    if t.per_group then  -- per (stack, device, precision): rows, MAPE, max, bias, Spearman
      entry.groups = {}
      local names = {}
      for g in pairs(s.by_group) do names[#names + 1] = g end
      table.sort(names)
      for _, g in ipairs(names) do
        local x = s.by_group[g]
        entry.groups[#entry.groups + 1] = {group = g, rows = x.n, refused = x.refused,
          mape_pct = x.mape, max_abs_pct = x.max_abs, bias_pct = x.bias, spearman = x.spearman,
          stack = V.stack_for({stack = g:match("^([^/]+)")}, opts.stack)}
        lines[#lines + 1] = string.format("    %-32s %4d rows  MAPE %5.1f%%  max %5.1f%%  bias %+6.1f%%  Spearman %s%s",
          g, x.n, x.mape or 0, x.max_abs, x.bias or 0,
          x.spearman and string.format("%.2f", x.spearman) or "-",
          x.refused > 0 and string.format("  (%d refused)", x.refused) or "")
      end
    end
    if opts.rows then
      for _, c in ipairs(cases) do
        lines[#lines + 1] = string.format("    %-34s measured %9.3f s  predicted %s  %s", c.label,
          c.measured_s, c.predicted_s and string.format("%9.3f s", c.predicted_s) or "        -",
          c.error_pct and string.format("%+6.1f%%", c.error_pct) or ("refused: " .. tostring(c.refused)))
      end
    end
  end
end
for _, t in ipairs(V.MEMORY_TABLES) do
  if not only or only == t.name then
    local cases = cli.check(V.memory_cases(dir, t.name))
    V.run_memory(cases, device, opts.stack)
    local s = V.summary(cases)
    local entry = {name = t.name, what = t.what, rows = s.n, refused = s.refused,
                   mape_pct = s.mape, max_abs_pct = s.max_abs, cases = {}}
    for _, c in ipairs(cases) do
      entry.cases[#entry.cases + 1] = {label = c.label, group = c.group, quantity = c.quantity,
                                       unit = c.unit, measured = c.measured,
                                       predicted = c.predicted, error_pct = c.error_pct,
                                       refused = c.refused}
    end
    report.tables[#report.tables + 1] = entry
    lines[#lines + 1] = string.format("%-22s %4d rows  MAPE %5.1f%%  max %5.1f%%  (memory)%s",
      t.name, s.n, s.mape or 0, s.max_abs,
      s.refused > 0 and string.format("  (%d refused)", s.refused) or "")
    if opts.rows then
      for _, c in ipairs(cases) do
        lines[#lines + 1] = string.format("    %-40s measured %8.2f %-3s predicted %s  %s", c.label,
          c.measured, c.unit, c.predicted and string.format("%8.2f", c.predicted) or "       -",
          c.error_pct and string.format("%+6.1f%%", c.error_pct) or ("refused: " .. tostring(c.refused)))
      end
    end
  end
end
if opts.json then io.write(json.encode(report), "\n")
else io.write(table.concat(lines, "\n"), "\n") end
