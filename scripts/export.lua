-- ndplan export: write trainer config files (Megatron, torchtitan, DeepSpeed, MindFormers, HyperParallel)
local cli = require "ndplan.cli"
local export = require "ndplan.export"
local files = require "ndplan.io.files"
local units = nd.units
local scli = require "ndplan.cli.options"

-- The model, device, job and strategy options are estimate's (scripts/estimate.lua).
local spec = {
  name = "export",
  usage = "--format LIST --model M --devices N --global-batch-size B [estimate's options] [-o DIR]",
  summary = "Write trainer config files for one strategy, with what each had to round.",
  description = "Formats: " .. table.concat(export.NAMES, ", ") .. " (or all). Each file is written\n"
             .. "atomically into DIR. When a trainer cannot state the plan exactly, the nearest it\n"
             .. "can say is written, the rounding is listed and the rounded plan is priced again.\n"
             .. "A file the trainer cannot run as priced (a plan it cannot state, or one that no\n"
             .. "longer fits once rounded) is refused and not written: exit 4. A plan that does\n"
             .. "not fit the budget writes nothing: exit 3.",
  options = scli.options({
    {name = "format", short = "f", arg = "LIST", required = true, help = "comma list of formats, or all"},
    {name = "output-dir", short = "o", arg = "DIR", default = ".", help = "where the files go"},
    {name = "dialect", arg = "LIST", help = "trainer versions, e.g. v0.2.2 (torchtitan), 0.16.4 (deepspeed); default the newest"},
  }),
}

local argv = {...}
local opts = cli.parse(spec, argv)
if not opts then return end
local args, model = scli.args(spec, argv, opts)

local formats = {}
if opts.format == "all" then formats = export.list()
else
  for name in opts.format:gmatch("[^,%s]+") do
    local _, err = export.get(name)
    if err then cli.fail(err, cli.EXIT_USAGE) end
    formats[#formats + 1] = name
  end
end

local dialects, derr = export.dialects(formats, opts.dialect)
if not dialects then cli.fail(derr, cli.EXIT_USAGE) end

local r = scli.estimate(args)

-- A plan chosen per layer, or given with -M, comes with its budget: an exporter that must
-- round it may choose what its trainer can say for that budget instead (megatron).
local plan = {model = model, strategy = r.strategy, job = r.job, result = r,
              layer_recompute = args.layer_recompute or r.strategy.layer_recompute,
              budget_bytes = (args.recompute == "per_layer" or args.max_mem ~= nil)
                             and r.budget_bytes or nil,
              layout = args.layout, stack = args.stack}
local dir = opts["output-dir"]:gsub("/+$", "")
if dir == "" then dir = "/" end
-- the trainer files are written together or not at all (a staging folder inside dir)
local stage, serr = files.stage(dir, {manifest = false})
if not stage then cli.fail("output directory: " .. tostring(serr)) end

if not r.fits then  -- a file for a plan that does not fit would not run
  stage:abort()
  cli.fail(string.format("the plan does not fit the memory budget (peak %s, budget %s): no "
                         .. "file written", units.bytes(r.peak_memory_bytes, "binary"),
                         units.bytes(r.budget_bytes, "binary")), cli.EXIT_NO_FIT)
end

-- rounded files priced on the plan's device, budget, costs and stack profile
local price = export.pricer({device = args.device, budget_bytes = args.max_mem,
                             costs = args.costs, stack = args.stack})
local outputs, werr = export.write(stage.dir, formats, plan, price, dialects)
if not outputs then
  werr = stage:final_text(werr)
  stage:abort()
  cli.fail(werr)
end
for _, o in ipairs(outputs) do o.path = stage:final_text(o.path) end
local committed, cerr = stage:commit()
if not committed then cli.fail(cerr) end

local out, refused = {}, 0
local function say(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
say("%s on %d x %s: step time %s", r.model, r.job.devices, r.device, units.seconds(r.step_time_s))
for _, o in ipairs(outputs) do
  say("")
  say("%-12s %s", o.name, o.refused and "refused, not written" or o.path)
  say("  dialect    %s", o.dialect)
  if #o.notes == 0 and not o.refused then say("  exact      the file states the whole plan") end
  for _, n in ipairs(o.notes) do say("  %s", export.format_note(n)) end
  local r2 = o.repriced
  if r2 then
    say("  re-priced  step time %s (plan %s, %+.1f%%), peak %s (plan %s)%s",
        units.seconds(r2.step_time_s), units.seconds(r.step_time_s),
        100 * (r2.step_time_s / r.step_time_s - 1), units.bytes(r2.peak_memory_bytes, "binary"),
        units.bytes(r.peak_memory_bytes, "binary"), r2.fits and "" or ", does not fit")
  end
  if o.refused then
    refused = refused + 1
    say("  refused    %s", o.refused)
  end
end
if dir == "." and refused < #outputs then  -- the default: say where that is
  say("")
  say("written into the current directory%s; -o DIR writes elsewhere",
      os.getenv("PWD") and " (" .. os.getenv("PWD") .. ")" or "")
end
io.write(table.concat(out, "\n"), "\n")
if refused > 0 then
  cli.fail(string.format("%d of %d trainer files refused (see above)", refused, #outputs),
           cli.EXIT_REFUSED)
end
