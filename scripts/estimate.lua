-- ndplan estimate: price one strategy: memory per pipeline stage and step time
local cli = require "ndplan.cli"
local json = require "ndplan.json"
local units = require "ndplan.c.units"

local spec = {
  name = "estimate",
  usage = "--model M --device-type D --devices N --global-batch-size B --seq-len S [options]",
  summary = "Price one strategy: memory per pipeline stage and step time, with breakdowns.",
  description = "Omitted degrees are 1; dp is derived from the device count. Times are seconds\n"
             .. "on the device's calibrated efficiencies (ndplan devices; --costs overrides).",
  options = {
    {name = "model", short = "m", arg = "NAME|PATH", help = "model name or config (required without --from-megatron)"},
    {name = "device-type", short = "A", arg = "NAME|PATH", default = "h100", help = "device"},
    {name = "devices", short = "d", arg = "N", help = "number of devices (required)"},
    {name = "global-batch-size", short = "b", arg = "B", help = "sequences per step (required)"},
    {name = "seq-len", arg = "S", default = "4096", help = "tokens per sequence"},
    {name = "tp", arg = "N", help = "tensor parallel degree"},
    {name = "pp", arg = "N", help = "pipeline stages"},
    {name = "vpp", arg = "N", help = "model chunks per stage (interleaved schedule)"},
    {name = "cp", arg = "N", help = "context parallel degree"},
    {name = "ep", arg = "N", help = "expert parallel degree"},
    {name = "etp", arg = "N", help = "expert tensor parallel degree"},
    {name = "dp", arg = "N", help = "data parallel degree (default: devices / (tp*cp*pp))"},
    {name = "sp", help = "sequence parallelism"},
    {name = "zero", arg = "0-3", help = "what DP shards: 1 optimizer, 2 +grads, 3 +params"},
    {name = "mbs", arg = "N", help = "micro-batch size"},
    {name = "mb", arg = "N", help = "micro-batches per step (default: from the batch)"},
    {name = "schedule", arg = "NAME", help = "1f1b, interleaved, gpipe or zb"},
    {name = "recompute", arg = "MODE", help = "none, selective, full or a per-layer spec"},
    {name = "precision", arg = "P", help = "bf16, fp16 or fp8"},
    {name = "no-flash", help = "attention without flash (keeps the s^2 scores)"},
    {name = "stage-layers", arg = "LIST", help = "layers per stage, e.g. 15,16,16,14"},
    {name = "max-mem", short = "M", arg = "SIZE", help = "memory budget (default: device capacity)"},
    {name = "costs", arg = "K=V,...", help = "override named costs, e.g. dp_overlap=0"},
    {name = "json", help = "print one JSON document"},
    {name = "from-megatron", arg = "FILE", help = "take model, job and strategy from a Megatron launch script; options given here win"},
  },
}

local argv = {...}
local opts = cli.parse(spec, argv)
if not opts then return end

-- --from-megatron: the script's flags fill every option not given on the command line.
if opts["from-megatron"] then require("ndplan.megatron_script").fill_options(spec, argv, opts) end
for _, name in ipairs({"model", "devices", "global-batch-size"}) do
  if opts[name] == nil then
    cli.fail(string.format("option '--%s' is required (see 'ndplan estimate --help')", name), cli.EXIT_USAGE)
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

local args = {
  model = opts.model, device = opts["device-type"], devices = int("devices"),
  global_batch = int("global-batch-size"), seq_len = int("seq-len"),
  tp = int("tp"), pp = int("pp"), vpp = int("vpp"), cp = int("cp"), ep = int("ep"),
  etp = int("etp"), dp = int("dp"), zero = int("zero"), mbs = int("mbs"), mb = int("mb"),
  sp = opts.sp or nil, schedule = opts.schedule, precision = opts.precision,
  flash_attention = not opts["no-flash"], max_mem = opts["max-mem"],
}
local model = cli.check(nd.model(opts.model))
args.model = model
if opts.recompute then
  local r = opts.recompute
  if r == "none" or r == "off" or r == "selective" or r == "full" then args.recompute = r
  else
    local layers = model.num_layers + model.mtp_layers
    local ranges = cli.check(nd.grammar.recompute(r, layers))
    local per = {}
    for _, rg in ipairs(ranges) do
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

if opts.json then
  io.write(json.encode(r), "\n")
  return
end

local function gib(b) return units.bytes(b, "binary") end
local s = r.strategy
local out = {}
local function say(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
say("%s on %d x %s, global batch %d x %d tokens", r.model, r.job.devices, r.device,
    r.job.global_batch, r.job.seq_len)
say("strategy  dp %d  tp %d  pp %d  vpp %d  cp %d  ep %d  etp %d  sp %s  zero %d  mbs %d  mb %d",
    s.dp, s.tp, s.pp, s.vpp, s.cp, s.ep, s.etp, s.sp and "on" or "off", s.zero, s.mbs, s.mb)
say("          schedule %s, recompute %s, %s, flash attention %s", s.schedule, s.recompute,
    s.precision, s.flash_attention and "on" or "off")
say("")
say("step time %s   %.0f tokens/s   MFU %.1f%%   HFU %.1f%%", units.seconds(r.step_time_s),
    r.tokens_per_s, 100 * r.mfu, 100 * r.hfu)
local parts = {}
for _, k in ipairs({"forward", "backward", "recompute", "tp_comm", "cp_comm", "ep_comm",
                    "pp_comm", "dp_comm", "optimizer", "bubble"}) do
  local v = r.time_parts_s[k]
  if v > 0 then parts[#parts + 1] = {part = k, t = v, share = 100 * v / r.step_time_s} end
end
out[#out + 1] = (cli.format_table({
  {key = "part", title = "  time part"},
  {key = "t", title = "seconds", align = "right", fmt = function(v) return units.seconds(v) end},
  {key = "share", title = "share", align = "right", fmt = function(v) return string.format("%.1f%%", v) end},
}, parts):gsub("\n$", ""):gsub("([^\n]+)", "  %1"))
say("")
say("memory    peak %s on stage %d of %d, budget %s: %s", gib(r.peak_memory_bytes),
    r.heaviest_stage, #r.stages, gib(r.budget_bytes),
    r.fits and "fits" or ("over by " .. gib(r.over_bytes)))
out[#out + 1] = (cli.format_table({
  {key = "stage", title = "stage", align = "right"},
  {key = "layers", title = "layers", align = "right"},
  {key = "inflight", title = "in flight", align = "right", fmt = function(v) return string.format("%.4g", v) end},
  {key = "weights", title = "weights", align = "right", fmt = gib},
  {key = "grads", title = "grads", align = "right", fmt = gib},
  {key = "optimizer", title = "optimizer", align = "right", fmt = gib},
  {key = "activations", title = "activations", align = "right", fmt = gib},
  {key = "buffers", title = "buffers", align = "right", fmt = gib},
  {key = "reserve", title = "reserve", align = "right", fmt = gib},
  {key = "peak", title = "peak", align = "right", fmt = gib},
}, r.stages):gsub("\n$", ""):gsub("([^\n]+)", "  %1"))
say("")
local topo = {}
for _, k in ipairs({"tp", "cp", "dp", "pp", "ep", "etp", "edp"}) do
  local g = r.topology[k]
  if g.size > 1 then topo[#topo + 1] = string.format("%s %d over %s", k, g.size, g.link) end
end
say("topology  ranks TP innermost, then CP, DP, PP: %s",
    #topo > 0 and table.concat(topo, ", ") or "one device")
io.write(table.concat(out, "\n"), "\n")
if not r.fits then os.exit(cli.EXIT_NO_FIT) end
