-- ndplan stacks: list the bundled stack profiles with the residuals of their fits
local cli = require "ndplan.cli"
local text = require "ndplan.out.text"
local json = require "ndplan.io.json"
local stack = require "ndplan.config.stack"

local spec = {
  name = "stacks",
  usage = "[NAME|PATH] [options]",
  positional = math.huge,
  summary = "List the stack profiles (examples/stacks/*.yaml): per device, the runs each was fitted on, MAPE and bias, per regime.",
  options = {
    {name = "json", help = "print one JSON document instead of a table"},
  },
}

local opts, rest = cli.parse(spec, {...})
if not opts then return end
local names = (rest and #rest > 0) and rest or stack.names()

local rows, doc = {}, {schema = "ndplan.stacks/1", stacks = {}}
for _, name in ipairs(names) do
  local s, serr = stack.load(name)
  if not s then  -- "none" loads as no profile: nothing to list
    cli.fail(serr or string.format("stacks: '%s' is no profile (the device file alone)", name),
             cli.EXIT_USAGE)
  end
  local entry = {name = s.name, description = s.description, costs = s.costs,
                 fallback = s.fallback, devices = {}}
  local devs = {}
  for d in pairs(s.devices) do devs[#devs + 1] = d end
  table.sort(devs)
  for _, d in ipairs(devs) do
    local e = s.devices[d]
    entry.devices[#entry.devices + 1] = {device = d, efficiency = e.efficiency, fit = e.fit,
                                         bands = e.bands}
    local regimes = {}
    for r in pairs(e.bands or {}) do regimes[#regimes + 1] = r end
    table.sort(regimes)
    for i, r in ipairs(regimes) do
      local b = e.bands[r]
      rows[#rows + 1] = {stack = i == 1 and s.name or "", device = i == 1 and d or "",
                         runs_all = i == 1 and e.fit and e.fit.runs or "", regime = r,
                         runs = b.runs, mape = b.mape, bias = b.bias,
                         fallback = (i == 1 and s.fallback == d) and "fallback" or ""}
    end
  end
  doc.stacks[#doc.stacks + 1] = entry
end

if opts.json then
  io.write(json.encode(doc), "\n")
  return
end
local function pct(v) return type(v) == "number" and string.format("%.1f%%", v) or "" end
io.write(text.format_table({
  {key = "stack", title = "stack"}, {key = "device", title = "device"},
  {key = "runs_all", title = "runs", align = "right"}, {key = "regime", title = "regime"},
  {key = "runs", title = "runs", align = "right"},
  {key = "mape", title = "MAPE", align = "right", fmt = pct},
  {key = "bias", title = "bias", align = "right", fmt = pct},
  {key = "fallback", title = ""},
}, rows))
print("A device without a fit of its own uses the fallback device's efficiencies (fractions of its own peaks); --stack none uses the device file alone.")
