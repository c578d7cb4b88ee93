-- ndplan recompute: per-layer recompute of one strategy under the budget, and its potentials
local cli = require "ndplan.cli"
local files = require "ndplan.io.files"
local json = require "ndplan.io.json"
local units = nd.units
local scli = require "ndplan.cli.options"
local plans = require "ndplan.plan"
local recompute = require "ndplan.recompute"

local spec = {
  name = "recompute",
  default_recompute = "per_layer",  -- so --recompute-modes applies without --recompute
  usage = "--model M --devices N --global-batch-size B [estimate's options] [-o DIR]",
  summary = "Choose each layer's recompute under the memory budget; show what more recompute costs.",
  description = "Without --recompute the plan is per_layer: every layer's mode chosen so each stage\n"
             .. "fits -M at the least recompute time. The potentials are the retained sequence from\n"
             .. "that plan, each step one more layer fully recomputed, the fastest such plan first.\n"
             .. "-o DIR writes recompute_potentials.csv and recompute_plot_groups.json, and the\n"
             .. "charts (SVG) of the chosen plan and its potentials with report.html.\n"
             .. "--trainer megatron adds the fastest plan Megatron-LM can state that fits the budget\n"
             .. "(recompute selective, full on every layer, or full on the first N layers of each\n"
             .. "stage; its own layout with --layout balanced) and what stating it costs.",
  options = scli.options({
    {name = "output-dir", short = "o", arg = "DIR", help = "write recompute_potentials.csv and recompute_plot_groups.json here"},
    {name = "steps", arg = "N", help = "stop the potentials after N steps (default: until every layer is full)"},
    {name = "json", help = "print one JSON document"},
    {name = "trainer", arg = "NAME", help = "also the fastest plan NAME can state under the budget (megatron)"},
  }),
}

local argv = {...}
local opts = cli.parse(spec, argv)
if not opts then return end
local args, model = scli.args(spec, argv, opts)
if args.recompute == nil and args.layer_recompute == nil then args.recompute = "per_layer" end
local steps = cli.integer("steps", opts.steps)

if opts.trainer and opts.trainer ~= "megatron" then
  cli.fail("--trainer: expected megatron, got '" .. opts.trainer .. "'", cli.EXIT_USAGE)
end

local r = scli.estimate(args)
if not r.fits then
  cli.fail(string.format("the plan peaks at %s, over the %s budget", units.bytes(r.peak_memory_bytes, "binary"),
                         units.bytes(r.budget_bytes, "binary")), cli.EXIT_NO_FIT)
end
local first = plans.from_estimate(r, model)
-- the potentials re-price fixed per-layer plans on the chosen layout
local fixed = {}
for k, v in pairs(args) do fixed[k] = v end
local sequence = plans.potentials(fixed, model, first, steps)

-- The plan the trainer can state (ndplan.block_plan.trainer_plan).
local trainer = opts.trainer == "megatron" and require("ndplan.block_plan").trainer_plan(args, r)
                or nil

local potentials = {{rank = 1, dimensions = first.dimensions, plans = sequence}}
local groups = recompute.plot_groups({{dimensions = first.dimensions, score = first.score,
                                       plans = sequence}}, 1)

if opts["output-dir"] then
  local dir = opts["output-dir"]:gsub("(.)/+$", "%1")
  -- the files are put in place together or not at all (a staging folder inside dir)
  local stage, serr = files.stage(dir, {manifest = false})
  if not stage then cli.fail("output directory: " .. tostring(serr)) end
  local ok, err = require("ndplan.out.output_dir").recompute(stage, r, potentials, groups)
  if not ok then
    err = stage:final_text(tostring(err)); stage:abort(); cli.fail(err)
  end
  local committed, cerr = stage:commit()
  if not committed then cli.fail(cerr) end
end

local summary = require "ndplan.out.summary"
if opts.json then
  io.write(json.encode(summary.recompute_doc(r, first, sequence, trainer)), "\n")
  return
end

io.write(summary.recompute_text(r, first, sequence, trainer), "\n")
