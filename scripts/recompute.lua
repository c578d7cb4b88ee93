-- ndplan recompute: per-layer recompute of one strategy under the budget, and its potentials
local cli = require "ndplan.cli"
local text = require "ndplan.out.text"
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
local steps
if opts.steps then
  steps = math.tointeger(tonumber(opts.steps))
  if not steps or steps < 0 then cli.fail("--steps: expected a non-negative integer", cli.EXIT_USAGE) end
end

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

-- The plan the trainer can state: block_plan on the plan's layout (its own with --layout
-- balanced), on a schedule Megatron has a flag for (ndplan export rounds it so at pp > 1).
local trainer
if opts.trainer == "megatron" then
  local block_plan = require "ndplan.block_plan"
  local targs = {}
  for k, v in pairs(args) do targs[k] = v end
  if (r.strategy.vpp or 1) <= 1 then
    require("ndplan.estimate").pin_layout(targs, r.strategy.stage_layers)
  end
  local stated = false  -- a schedule Megatron has no flag for runs as 1f1b (the core's list)
  for _, n in ipairs(require("ndplan.strategy").NAMES.megatron_schedules) do stated = stated or n == r.strategy.schedule end
  if not stated then targs.schedule = "1f1b" end
  local tr, desc = block_plan.megatron(targs, r.budget_bytes)
  trainer = {trainer = "megatron", fits = tr ~= nil, schedule = targs.schedule}
  if tr then
    trainer.method, trainer.num_layers, trainer.flags = desc.method, desc.num_layers, desc.flags
    trainer.description = block_plan.describe(desc)
    trainer.layer_recompute, trainer.stage_layers = desc.layer_recompute, desc.stage_layers
    trainer.step_time_s, trainer.peak_memory_bytes = tr.step_time_s, tr.peak_memory_bytes
    trainer.cost_s = tr.step_time_s - r.step_time_s
    trainer.cost_pct = 100 * trainer.cost_s / r.step_time_s
  else
    trainer.message = desc
  end
end

local potentials = {{rank = 1, dimensions = first.dimensions, plans = sequence}}
local groups = recompute.plot_groups({{dimensions = first.dimensions, score = first.score,
                                       plans = sequence}}, 1)

if opts["output-dir"] then
  local dir = opts["output-dir"]:gsub("(.)/+$", "%1")
  -- the files are put in place together or not at all (a staging folder inside dir)
  local stage, serr = files.stage(dir, {manifest = false})
  if not stage then cli.fail("output directory: " .. tostring(serr)) end
  local function fail(msg) msg = stage:final_text(tostring(msg)); stage:abort(); cli.fail(msg) end
  local ok, err = pcall(recompute.write_csv, potentials, stage.dir .. "/recompute_potentials.csv")
  if not ok then fail(err) end
  local wrote, werr = stage:write("recompute_plot_groups.json",
                                  json.encode(recompute.plot_data(groups)) .. "\n")
  if not wrote then fail(werr) end
  local plotted, perr = require("ndplan.out.report").recompute_report(stage.dir, r,
                                                                  recompute.plot_data(groups))
  if not plotted then fail(perr) end
  local committed, cerr = stage:commit()
  if not committed then cli.fail(cerr) end
end

if opts.json then
  local steps_out = {}
  for i, p in ipairs(sequence) do
    steps_out[i] = {step = i - 1, score_s = p.score, memory_mib = p.memory,
                    full_layers = recompute.full_layers(p),
                    changed_layers = i > 1 and recompute.changed_layers(sequence[i - 1], p) or nil,
                    layer_recompute = p.layer_recompute}
  end
  io.write(json.encode({schema = "ndplan.recompute/1", estimate = r, plan = first,
                        potentials = steps_out, trainer_plan = trainer}), "\n")
  return
end

local out = {}
local function say(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
say("%s on %d x %s, budget %s: step time %s, peak %s on stage %d", r.model, r.job.devices,
    r.device, units.bytes(r.budget_bytes, "binary"), units.seconds(r.step_time_s),
    units.bytes(r.peak_memory_bytes, "binary"), r.heaviest_stage)
say("")
for _, rg in ipairs(first.ranges) do
  local last = rg.first + rg.count - 1
  say("layers %s (%s): %s", rg.count > 1 and (rg.first .. "-" .. last) or tostring(rg.first),
      rg.kind, rg.mode == "selective" and ("selective " .. table.concat(rg.option.switches, "+"))
      or rg.mode)
end
say("")
local rows = {}
for s, st in ipairs(r.stages) do
  rows[s] = {stage = s - 1, layers = st.layers, peak = st.peak,
             saved = first.stage_savings[s] or 0}
end
out[#out + 1] = text.format_table({
  {key = "stage", title = "stage", align = "right"},
  {key = "layers", title = "layers", align = "right"},
  {key = "peak", title = "peak", align = "right", fmt = function(v) return units.bytes(v, "binary") end},
  {key = "saved", title = "saved vs full", align = "right", fmt = function(v) return units.seconds(v) end},
}, rows):gsub("\n$", "")
if trainer then
  say("")
  if trainer.fits then
    local list = {}
    for i, f in ipairs(trainer.flags) do list[i] = tostring(f) end
    say("megatron: %s (%s)%s", trainer.description,
        #list > 0 and table.concat(list, " ") or "no recompute flags",
        trainer.schedule and ", schedule 1f1b" or "")
    if trainer.stage_layers and r.strategy.stage_layers
       and table.concat(trainer.stage_layers, ",") ~= table.concat(r.strategy.stage_layers, ",") then
      say("  layers per stage %s (the plan's: %s)", table.concat(trainer.stage_layers, ","),
          table.concat(r.strategy.stage_layers, ","))
    end
    say("  step time %s, peak %s", units.seconds(trainer.step_time_s),
        units.bytes(trainer.peak_memory_bytes, "binary"))
    say("  cost of stating it in Megatron: %s%s per step (%+.1f%%) against the per-layer plan",
        trainer.cost_s < 0 and "-" or "+", units.seconds(math.abs(trainer.cost_s)), trainer.cost_pct)
  else
    say("megatron: %s", trainer.message)
  end
end
say("")
say("potentials: one more layer fully recomputed per step (%d steps)", #sequence - 1)
local prows = {}
for i, p in ipairs(sequence) do
  local changed = i > 1 and recompute.changed_layers(sequence[i - 1], p) or {}
  prows[i] = {step = i - 1, changed = #changed > 0 and table.concat(changed, ",") or "-",
              full = recompute.full_layers(p), memory = p.memory * 2 ^ 20, score = p.score}
end
out[#out + 1] = text.format_table({
  {key = "step", title = "step", align = "right"},
  {key = "changed", title = "changed layer", align = "right"},
  {key = "full", title = "full layers", align = "right"},
  {key = "memory", title = "peak", align = "right", fmt = function(v) return units.bytes(v, "binary") end},
  {key = "score", title = "step time", align = "right", fmt = function(v) return units.seconds(v) end},
}, prows):gsub("\n$", "")
io.write(table.concat(out, "\n"), "\n")
