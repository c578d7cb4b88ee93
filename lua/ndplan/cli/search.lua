-- The command line of `ndplan search`: its options (SPEC) and their translation into
-- nd.search arguments (args), a search configuration file (-s, ndplan.config.search) first
-- and the flags over it. This is the CLI layer: a bad value stops the command with a usage
-- error naming the flag (ndplan.cli.fail).
local cli = require "ndplan.cli"
local core = require "ndplan.c.search"
local search = require "ndplan.search"

local M = {}

M.SPEC = {
  name = "search",
  usage = "--model M --devices N --global-batch-size B [--seq-len S] [options]",
  summary = "Search the parallel strategies of a job; rank what fits by step time.",
  description = "Each dimension is pinned (--tp 8), given as candidates (--tp 1,2,4,8) or searched\n"
             .. "(--tp auto, the default). -l lists the dimensions to search; the others are then\n"
             .. "pinned to 1 (sp off, zero 0). Exit code 3: nothing fits (the nearest misses are shown).",
  options = {
    {name = "model", short = "m", arg = "NAME|PATH", help = "model name or config"},
    {name = "yaml-config", short = "y", arg = "PATH", help = "model config file (as --model PATH)"},
    {name = "strict", help = "refuse a model the loader had to assume anything about"},
    {name = "search-config", short = "s", arg = "PATH", help = "search configuration YAML"},
    {name = "device-type", short = "A", arg = "NAME|PATH", help = "device (default: h100)"},
    {name = "devices", short = "d", arg = "N", help = "number of devices"},
    {name = "global-batch-size", short = "b", arg = "B", help = "sequences per step"},
    {name = "seq-len", arg = "S", help = "tokens per sequence (default: 4096)"},
    {name = "max-mem", short = "M", arg = "SIZE", help = "memory budget (default: device capacity)"},
    {name = "dimensions", short = "l", arg = "LIST", help = "dimensions to search, e.g. DP,TP,PP,MB (MP=TP, OP=ZERO)"},
    {name = "top", short = "t", arg = "N", help = "results shown", default = "10"},
    {name = "jobs", short = "j", arg = "N", help = "pricing threads (default: $NDPLAN_JOBS or the processors it may run on)"},
    {name = "output-dir", short = "o", arg = "DIR", help = "write results.csv (the fitting candidates the step-time bound left to price), memory_parts.csv, time_parts.csv, search.json, the charts and report.html"},
    {name = "all-rows", help = "with -o: every candidate into results.csv, fitting or not, none left out by the step-time bound (slower: the walk prices them all)"},
    {name = "exhaustive", help = "price every valid candidate (no lower bound prunes; the ranking is the same)"},
    {name = "export", arg = "LIST", help = "with -o: trainer configs of the best strategy (megatron,torchtitan,deepspeed,mindformers,hyper or all)"},
    {name = "trainer", arg = "NAME", help = "rank only what this trainer's file states exactly (megatron, torchtitan, deepspeed, mindformers, hyper)"},
    {name = "dialect", arg = "LIST", help = "trainer versions for --trainer and --export, e.g. v0.2.2 (torchtitan); default the newest"},
    {name = "verbosity", short = "v", arg = "N", help = "0 table only, 1 bounds and counts, 2 nearest misses too", default = "1"},
    {name = "tp", arg = "LIST", help = "tensor parallel degree(s) or auto"},
    {name = "pp", arg = "LIST", help = "pipeline stages"},
    {name = "vpp", arg = "LIST", help = "model chunks per stage"},
    {name = "cp", arg = "LIST", help = "context parallel degree(s)"},
    {name = "ep", arg = "LIST", help = "expert parallel degree(s)"},
    {name = "etp", arg = "LIST", help = "expert tensor parallel degree(s)"},
    {name = "dp", arg = "LIST", help = "data parallel degree(s) (derived; a list post-filters)"},
    {name = "sp", arg = "on|off|auto", help = "sequence parallelism"},
    {name = "zero", arg = "LIST", help = "ZeRO stage(s) 0-3 (the OP dimension)"},
    {name = "mbs", arg = "LIST", help = "micro-batch size(s)"},
    {name = "mb", arg = "LIST", help = "micro-batches per step (derived; a list post-filters)"},
    {name = "recompute", arg = "MODES", help = "off, selective, full, per_layer (each layer's mode chosen under -M), megatron (the fastest recompute Megatron-LM can state under -M), a list, or auto (the first four)"},
    {name = "schedule", arg = "NAME", help = "1f1b, gpipe or zb (interleaved when vpp > 1)"},
    {name = "precision", arg = "LIST", help = "bf16, fp16, fp8 (fp8:delayed), fp8:RECIPE or nvfp4; a list (bf16,fp8:mxfp8) walks each"},
    {name = "dp-shard", arg = "LIST", help = "HSDP: ZeRO/FSDP shard group(s) within DP, a list or auto (each divisor of DP); default all of DP"},
    {name = "dp-replicate", arg = "LIST", help = "HSDP: replicas of the shard group (DP = shard x replicate), a list or auto; with --dp-shard, the pairs both allow"},
    {name = "fp8-param-gather", help = "keep and all-gather parameters at the recipe's width"},
    {name = "selective-ops", arg = "LIST", help = "what a selective candidate repeats: " .. table.concat(require("ndplan.strategy").NAMES.ops, ",") .. " (default attn_core; with --trainer torchtitan its per-op SAC, norms,act,alt_mm)"},
    {name = "no-flash", help = "attention without flash"},
    {name = "tp-comm-overlap", help = "TP collectives overlapped with their GEMMs (Megatron --tp-comm-overlap, torchtitan async TP)"},
    {name = "costs", arg = "K=V,...", help = "override named costs, e.g. dp_overlap=0"},
    {name = "stack", arg = "NAME|PATH", default = "megatron-core", help = "stack profile (ndplan stacks; none: the device file alone)"},
    {name = "memory-band", arg = "SHARE", help = "rank what fits with the memory estimate this share higher (default: the stack's memory_band; 0: the estimate as is)"},
    {name = "policy", arg = "NAME|FILE", help = "search policy (bundled: " .. table.concat(require("ndplan.policy").names(), ", ") .. ")"},
    {name = "policy-opts", arg = "K=V,...", help = "options for the policy's setup (opts.policy), typed: numbers, true/false, else strings; e.g. price=2.5"},
    {name = "unsafe-policy", help = "run a policy file with the full Lua library (default: a sandbox without os.execute, io, or C modules outside ndplan)"},
    {name = "timeout", arg = "SECONDS", help = "stop the search and its policy (load and every hook) after this long"},
    {name = "policy-mem", arg = "SIZE", help = "how far policy code may grow the Lua heap (default 512MiB)"},
    {name = "json", help = "print one JSON document"},
  },
}

local function usage(msg) cli.fail(msg, cli.EXIT_USAGE) end

local int = cli.integer

-- "8", "1,2,4", "auto" -> a pinned value, a list, or "auto"
local function dim_value(name, text)
  if text == nil then return nil end
  if text == "auto" then return "auto" end
  if name == "recompute" then
    local list = {}
    local known, words = {off = true}, {"off"}  -- the core's values; "off" is none here
    for _, r in ipairs(require("ndplan.strategy").NAMES.search_recompute) do
      known[r] = true
      if r ~= "none" then words[#words + 1] = r end
    end
    for w in text:gmatch("[^,]+") do
      if not known[w] then
        usage("--recompute: expected " .. table.concat(words, ", ")
              .. ", a list of them or auto, got '" .. w .. "'")
      end
      list[#list + 1] = w
    end
    return #list == 1 and list[1] or list
  end
  if name == "sp" then
    if text == "on" or text == "true" or text == "1" then return true end
    if text == "off" or text == "false" or text == "0" then return false end
    usage("--sp: expected on, off or auto, got '" .. text .. "'")
  end
  local list = {}
  for w in text:gmatch("[^,]+") do list[#list + 1] = int(name, w) end
  if #list == 0 then usage("--" .. name .. ": expected a number, a list or auto") end
  return #list == 1 and list[1] or list
end

local DIM_ALIAS = {dp = "dp", tp = "tp", mp = "tp", pp = "pp", vpp = "vpp", cp = "cp", ep = "ep",
                   etp = "etp", sp = "sp", op = "zero", zero = "zero", mb = "mb", mbs = "mbs",
                   recompute = "recompute"}
local PINNED_DEFAULT = {tp = 1, pp = 1, vpp = 1, cp = 1, ep = 1, etp = 1, sp = false, zero = 0,
                        mbs = 1, recompute = "off"}

-- args(opts) -> the nd.search arguments of cli.parse(M.SPEC, ...)'s opts, and what the
-- command needs besides: {declared (where each dimension's value came from), config_line,
-- verbosity, out_dir, export_formats, dialects}
function M.args(opts)
  local args = {}
  local declared = {}   -- where each dimension's value came from (for the Parallelism line)

  -- The search configuration YAML (-s), the reference's layout; flags override it.
  local config_line
  if opts["search-config"] then
    local path = opts["search-config"]
    local declared_in
    args, declared_in = cli.check(require("ndplan.config.search").read(path))
    for d, v in pairs(declared_in) do declared[d] = v end
    config_line = true
  end

  -- Command-line flags (they override the configuration file).
  args.model = opts.model or opts["yaml-config"] or args.model
  if not args.model then usage("option '--model' is required (see 'ndplan search --help')") end
  args.device = opts["device-type"] or args.device or "h100"
  args.devices = int("devices", opts.devices) or args.devices
  args.global_batch = int("global-batch-size", opts["global-batch-size"]) or args.global_batch
  args.seq_len = int("seq-len", opts["seq-len"]) or args.seq_len or 4096
  if not args.devices then usage("option '--devices' is required (see 'ndplan search --help')") end
  if not args.global_batch then
    usage("option '--global-batch-size' is required (see 'ndplan search --help')")
  end
  local estimate = require "ndplan.estimate"
  local function size_flag(name)  -- a size flag: finite and above 0, or a usage error
    if opts[name] == nil then return nil end
    local bytes, err = estimate.check_bytes("--" .. name, opts[name])
    if not bytes then usage(err) end
    return bytes
  end
  args.max_mem = size_flag("max-mem") or args.max_mem
  args.policy_mem = size_flag("policy-mem")
  for _, d in ipairs(search.DIMS) do
    local v = dim_value(d, opts[d])
    if v ~= nil then args[d] = v; declared[d] = "flag" end
  end
  if opts.dimensions then
    local listed = {}
    for w in opts.dimensions:gmatch("[^,%s]+") do
      local d = DIM_ALIAS[w:lower()]
      if not d then usage("--dimensions: unknown dimension '" .. w .. "'") end
      listed[d] = true
    end
    for d, v in pairs(PINNED_DEFAULT) do
      if args[d] == nil then args[d] = listed[d] and "auto" or v end
    end
  end
  if args.recompute == nil then args.recompute = "off" end
  args.schedule = opts.schedule
  if opts.precision and opts.precision:find(",") then  -- a list of recipes, each walked
    args.precision = {}
    for w in opts.precision:gmatch("[^,%s]+") do
      args.precision[#args.precision + 1] = require("ndplan.cli.options").check_precision("precision", w)
    end
  elseif opts.precision then
    args.precision = require("ndplan.cli.options").check_precision("precision", opts.precision)
  end  -- else the configuration's, if any
  args.dp_shard = dim_value("dp-shard", opts["dp-shard"]) or args.dp_shard
  args.dp_replicate = dim_value("dp-replicate", opts["dp-replicate"]) or args.dp_replicate
  args.fp8_param_gather = opts["fp8-param-gather"] or nil
  if opts["no-flash"] then args.flash_attention = false end
  if opts["tp-comm-overlap"] then args.tp_comm_overlap = true end
  if opts["selective-ops"] then args.selective_ops = require("ndplan.cli.options").ops("selective-ops", opts["selective-ops"]) end
  if opts.costs then args.costs = cli.parse_costs(opts.costs) end
  args.stack = opts.stack
  if opts["memory-band"] then
    local b = tonumber(opts["memory-band"])
    if not b or not (b >= 0 and b < 1) then
      cli.fail("--memory-band: expected a share in [0, 1), got '" .. opts["memory-band"] .. "'", cli.EXIT_USAGE)
    end
    args.memory_band = b
  end
  if opts["policy-opts"] then
    local po = {}
    -- typed as written: a number is a number, true/false are booleans, anything else a string
    local TYPED = {["true"] = true, ["false"] = false}
    for item in opts["policy-opts"]:gmatch("[^,]+") do
      local k, v = item:match("^%s*([%w_]+)=(.*)$")
      if not k then usage("--policy-opts: expected KEY=VALUE,..., got '" .. item .. "'") end
      if TYPED[v] ~= nil then po[k] = TYPED[v] else po[k] = tonumber(v) or v end
    end
    args.policy_opts = po
  end
  args.policy = opts.policy
  args.unsafe_policy = opts["unsafe-policy"] or nil
  if opts.timeout then
    args.timeout = tonumber(opts.timeout)
    if not args.timeout or not (args.timeout > 0 and args.timeout < math.huge) then
      usage("--timeout: expected a positive number of seconds")
    end
  end
  args.trainer = opts.trainer
  args.top = int("top", opts.top)
  if args.top < 1 then usage("--top: expected at least 1") end
  local verbosity = int("verbosity", opts.verbosity)
  local jobs = int("jobs", opts.jobs) or math.tointeger(tonumber(os.getenv("NDPLAN_JOBS") or ""))
               or core.cores()
  if jobs < 1 then usage("--jobs: expected at least 1") end
  args.jobs = jobs
  args.progress = verbosity >= 1 and core.stderr_is_terminal()
  args.all_misses = verbosity >= 2 or nil  -- -v 2 shows them beside the ranking

  -- without trailing slashes, so that the paths it prints read out/report.html, not out//report.html
  local out_dir = opts["output-dir"] and opts["output-dir"]:gsub("(.)/+$", "%1")
  local export_formats
  if opts.export then
    if not out_dir then usage("--export needs -o DIR") end
    local export = require "ndplan.export"
    if opts.export == "all" then export_formats = export.list()
    else
      export_formats = {}
      for name in opts.export:gmatch("[^,%s]+") do
        local _, err = export.get(name)
        if err then usage(err) end
        export_formats[#export_formats + 1] = name
      end
    end
  end
  local dialects = {}
  if opts.trainer or opts.dialect then
    local export = require "ndplan.export"
    if opts.trainer and not export.get(opts.trainer) then usage(select(2, export.get(opts.trainer))) end
    local named = {table.unpack(export_formats or {})}
    if opts.trainer then named[#named + 1] = opts.trainer end
    local d, derr = export.dialects(named, opts.dialect)
    if not d then usage(derr) end
    dialects = d
    args.dialect = opts.trainer and d[opts.trainer] or nil
    if opts.trainer then
      local ok, terr = require("ndplan.export.trainer").check(opts.trainer, args)
      if not ok then usage(terr) end
    end
  end
  args.exhaustive = opts.exhaustive or nil
  -- "off" is the command line's word for none: the library takes the core's names
  if type(args.recompute) == "table" then
    for i, x in ipairs(args.recompute) do if x == "off" then args.recompute[i] = "none" end end
  elseif args.recompute == "off" then args.recompute = "none" end
  return args, {declared = declared, config_line = config_line, verbosity = verbosity,
                out_dir = out_dir, export_formats = export_formats, dialects = dialects}
end

return M
