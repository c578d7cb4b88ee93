-- ndplan estimate: price one strategy: memory per pipeline stage and step time
local cli = require "ndplan.cli"
local json = require "ndplan.io.json"
local units = nd.units

local scli = require "ndplan.cli.options"

local spec = {
  name = "estimate",
  usage = "--model M --device-type D --devices N --global-batch-size B --seq-len S [options]",
  summary = "Price one strategy: memory per pipeline stage and step time, with breakdowns.",
  description = "Omitted degrees are 1; dp is derived from the device count. Times are seconds\n"
             .. "on the device's calibrated efficiencies (ndplan devices; --costs overrides).",
  options = scli.options({
    {name = "json", help = "print one JSON document"},
    {name = "plot", arg = "DIR", help = "write stage_memory.svg, time_breakdown.svg, pipeline.svg and report.html here"},
  }),
}

local argv = {...}
local opts = cli.parse(spec, argv)
if not opts then return end
local args, model = scli.args(spec, argv, opts)
local r = scli.estimate(args)

if opts.plot then  -- the charts and report.html together or not at all
  local files = require "ndplan.io.files"
  local stage, serr = files.stage(opts.plot:gsub("(.)/+$", "%1"), {manifest = false})
  if not stage then cli.fail("output directory: " .. tostring(serr)) end
  local wrote, err = require("ndplan.out.report").estimate_report(stage.dir, r)
  if not wrote then
    err = stage:final_text(tostring(err))
    stage:abort()
    cli.fail(err)
  end
  local committed, cerr = stage:commit()
  if not committed then cli.fail(cerr) end
end

if opts.json then
  io.write(json.encode(r), "\n")
  return
end

io.write(require("ndplan.out.summary").estimate(r, model), "\n")
if not r.fits then os.exit(cli.EXIT_NO_FIT) end
