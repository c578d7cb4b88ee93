-- ndplan export: write trainer config files (Megatron, torchtitan, DeepSpeed, MindFormers, HyperParallel)
local cli = require "ndplan.cli"
local export = require "ndplan.export"
local files = require "ndplan.files"
local units = require "ndplan.c.units"

-- The model, device, job and strategy options are estimate's (scripts/estimate.lua).
local spec = {
  name = "export",
  usage = "--format LIST --model M --devices N --global-batch-size B [estimate's options] [-o DIR]",
  summary = "Write trainer config files for one strategy, with what each had to round.",
  description = "Formats: " .. table.concat(export.NAMES, ", ") .. " (or all). Each file is written\n"
             .. "atomically into DIR. When a trainer cannot state the plan exactly, the nearest it\n"
             .. "can say is written, the rounding is listed and the rounded plan is priced again.",
  options = {
    {name = "format", short = "f", arg = "LIST", required = true, help = "comma list of formats, or all"},
    {name = "output-dir", short = "o", arg = "DIR", default = ".", help = "where the files go"},
    {name = "model", short = "m", arg = "NAME|PATH", help = "model name or config (required without --from-megatron)"},
    {name = "device-type", short = "A", arg = "NAME|PATH", default = "h100", help = "device"},
    {name = "devices", short = "d", arg = "N", help = "number of devices (required)"},
    {name = "global-batch-size", short = "b", arg = "B", help = "sequences per step (required)"},
    {name = "seq-len", arg = "S", default = "4096", help = "tokens per sequence"},
    {name = "tp", arg = "N", help = "tensor parallel degree"},
    {name = "pp", arg = "N", help = "pipeline stages"},
    {name = "vpp", arg = "N", help = "model chunks per stage"},
    {name = "cp", arg = "N", help = "context parallel degree"},
    {name = "ep", arg = "N", help = "expert parallel degree"},
    {name = "etp", arg = "N", help = "expert tensor parallel degree"},
    {name = "dp", arg = "N", help = "data parallel degree"},
    {name = "sp", help = "sequence parallelism"},
    {name = "zero", arg = "0-3", help = "ZeRO stage"},
    {name = "mbs", arg = "N", help = "micro-batch size"},
    {name = "mb", arg = "N", help = "micro-batches per step"},
    {name = "schedule", arg = "NAME", help = "1f1b, interleaved, gpipe or zb"},
    {name = "recompute", arg = "MODE", help = "none, selective, full or a per-layer spec"},
    {name = "precision", arg = "P", help = "bf16, fp16 or fp8"},
    {name = "no-flash", help = "attention without flash"},
    {name = "stage-layers", arg = "LIST", help = "layers per stage, e.g. 15,16,16,14"},
    {name = "costs", arg = "K=V,...", help = "override named costs"},
    {name = "from-megatron", arg = "FILE", help = "take model, job and strategy from a Megatron launch script"},
  },
}

local argv = {...}
local opts = cli.parse(spec, argv)
if not opts then return end
if opts["from-megatron"] then require("ndplan.megatron_script").fill_options(spec, argv, opts) end
for _, name in ipairs({"model", "devices", "global-batch-size"}) do
  if opts[name] == nil then
    cli.fail(string.format("option '--%s' is required (see 'ndplan export --help')", name), cli.EXIT_USAGE)
  end
end

local function int(name)
  local v = opts[name]
  if v == nil then return nil end
  local n = math.tointeger(tonumber(v))
  if not n or n < 0 then
    cli.fail(string.format("--%s: expected a non-negative integer, got '%s'", name, v), cli.EXIT_USAGE)
  end
  return n
end

local formats = {}
if opts.format == "all" then formats = export.list()
else
  for name in opts.format:gmatch("[^,%s]+") do
    local _, err = export.get(name)
    if err then cli.fail(err, cli.EXIT_USAGE) end
    formats[#formats + 1] = name
  end
end

local model = cli.check(nd.model(opts.model))
local args = {
  model = model, device = opts["device-type"], devices = int("devices"),
  global_batch = int("global-batch-size"), seq_len = int("seq-len"),
  tp = int("tp"), pp = int("pp"), vpp = int("vpp"), cp = int("cp"), ep = int("ep"),
  etp = int("etp"), dp = int("dp"), zero = int("zero"), mbs = int("mbs"), mb = int("mb"),
  sp = opts.sp or nil, schedule = opts.schedule, precision = opts.precision,
  flash_attention = not opts["no-flash"],
}
if opts.recompute then
  local r = opts.recompute
  if r == "none" or r == "off" or r == "selective" or r == "full" then args.recompute = r
  else
    local layers = model.num_layers + model.mtp_layers
    local per = {}
    for _, rg in ipairs(cli.check(nd.grammar.recompute(r, layers))) do
      for i = rg.first, rg.last do per[i + 1] = rg.mode end
    end
    for i = 1, layers do per[i] = per[i] or "none" end
    args.layer_recompute = per
  end
end
if opts["stage-layers"] then
  local list = {}
  for n in opts["stage-layers"]:gmatch("[^,]+") do
    list[#list + 1] = math.tointeger(tonumber(n)) or cli.fail("--stage-layers: expected integers", cli.EXIT_USAGE)
  end
  args.stage_layers = list
end
if opts.costs then args.costs = cli.parse_costs(opts.costs) end

local r, why = nd.estimate(args)
if not r then cli.fail("strategy refused: " .. why) end

local plan = {model = model, strategy = r.strategy, job = r.job, result = r,
              layer_recompute = args.layer_recompute}
local dir = opts["output-dir"]:gsub("/+$", "")
if dir == "" then dir = "/" end
local probe = io.open(dir, "r")
if not probe then cli.fail(string.format("output directory '%s' does not exist", dir)) end
probe:close()

-- Render every format first, so a failure writes nothing.
local outputs = {}
for _, name in ipairs(formats) do
  local mod = export.get(name)
  local text, notes, rounded = mod.render(plan)
  if not text then cli.fail(name .. ": " .. tostring(notes)) end
  outputs[#outputs + 1] = {name = name, mod = mod, text = text, notes = notes, rounded = rounded,
                           path = dir .. "/" .. mod.filename}
end

local out = {}
local function say(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
say("%s on %d x %s: step time %s%s", r.model, r.job.devices, r.device, units.seconds(r.step_time_s),
    r.fits and "" or " (does not fit the memory budget)")
for _, o in ipairs(outputs) do
  local ok, werr = files.write_atomic(o.path, o.text)
  if not ok then cli.fail(string.format("cannot write %s: %s", o.path, tostring(werr))) end
  say("")
  say("%-12s %s", o.name, o.path)
  say("  dialect    %s", o.mod.dialect)
  if #o.notes == 0 then say("  exact      the file states the whole plan") end
  for _, n in ipairs(o.notes) do say("  %s", export.format_note(n)) end
  if o.rounded then
    local args2 = o.rounded
    args2.device, args2.max_mem, args2.costs = args.device, args.max_mem, args.costs
    local r2, why2 = nd.estimate(args2)
    if r2 then
      say("  re-priced  step time %s (plan %s, %+.1f%%), peak %s (plan %s)%s",
          units.seconds(r2.step_time_s), units.seconds(r.step_time_s),
          100 * (r2.step_time_s / r.step_time_s - 1), units.bytes(r2.peak_memory_bytes, "binary"),
          units.bytes(r.peak_memory_bytes, "binary"), r2.fits and "" or ", does not fit")
    else
      say("  re-priced  the rounded plan is refused: %s", why2)
    end
  end
end
io.write(table.concat(out, "\n"), "\n")
