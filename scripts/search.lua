-- ndplan search: every valid strategy priced, what fits ranked by step time (or a policy)
local cli = require "ndplan.cli"
local json = require "ndplan.io.json"
local files = require "ndplan.io.files"
local units = nd.units
local core = require "ndplan.c.search"
local search = require "ndplan.search"

local spec = {
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
    {name = "jobs", short = "j", arg = "N", help = "pricing threads (default: $NDPLAN_JOBS or the cores)"},
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

local opts = cli.parse(spec, {...})
if not opts then return end

local function usage(msg) cli.fail(msg, cli.EXIT_USAGE) end

local function int(name, v)
  if v == nil then return nil end
  local n = math.tointeger(tonumber(v))
  if not n or n < 0 then usage(string.format("--%s: expected a non-negative integer, got '%s'", name, v)) end
  return n
end

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

local args = {}
local declared = {}   -- where each dimension's value came from (for the Parallelism line)

-- The search configuration YAML (-s), the reference's layout; flags override it.
local config_line
if opts["search-config"] then
  local path = opts["search-config"]
  local doc = cli.check(nd.yaml.load_file(path))
  if type(doc) ~= "table" then cli.fail(path .. ": expected a mapping") end
  local KNOWN = {model = true, seq_len = true, cluster = true, parallelism = true,
                 constraint = true, recompute = true, precision = true, train_yaml = true}
  for k in pairs(doc) do
    if not KNOWN[k] then cli.fail(string.format("%s: unknown key '%s' (expected model, seq_len, "
      .. "cluster, parallelism, constraint, recompute, precision)", path, tostring(k))) end
  end
  if doc.train_yaml then cli.fail(path .. ": train_yaml: not supported; give model: NAME|PATH") end
  local function field(t, key, kind, where)
    local v = t[key]
    if v ~= nil and type(v) ~= kind then
      cli.fail(string.format("%s: %s.%s: expected a %s, got %s", path, where, key, kind, type(v)))
    end
    return v
  end
  local function count(t, key, where)  -- a whole number above 0, never rounded or replaced
    local v = field(t, key, "number", where)
    if v ~= nil and not (math.tointeger(v) and v >= 1 and v <= 0x7fffffff) then
      cli.fail(string.format("%s: %s.%s: expected a whole number from 1 to 2147483647, got %s",
                             path, where, key, tostring(v)))
    end
    return math.tointeger(v)
  end
  if doc.model ~= nil then
    if type(doc.model) == "string" then args.model = doc.model
    elseif type(doc.model) == "table" then
      args.model = field(doc.model, "name", "string", "model")
      args.seq_len = count(doc.model, "seq_length", "model")
    else cli.fail(path .. ": model: expected a name or a mapping") end
  end
  args.seq_len = count(doc, "seq_len", "(top)") or args.seq_len
  local cluster = doc.cluster or {}
  if type(cluster) ~= "table" then cli.fail(path .. ": cluster: expected a mapping") end
  local nodes = count(cluster, "num_nodes", "cluster")
  local per = count(cluster, "cards_per_node", "cluster") or 8
  if nodes then args.devices = nodes * per end
  args.device = field(cluster, "device_type", "string", "cluster")
  -- the reference's *_gb are GiB as numbers; a string is a size with its unit ("80GiB")
  local function memory(t, key, where)
    if type(t[key]) ~= "string" then
      local n = field(t, key, "number", where)
      return n and n * 2^30
    end
    local bytes, err = nd.grammar.size(t[key])
    if not bytes then cli.fail(string.format("%s: %s.%s: %s", path, where, key, err)) end
    return bytes
  end
  local mem = memory(cluster, "device_memory_gb", "cluster")
  local constraint = doc.constraint or {}
  if type(constraint) ~= "table" then cli.fail(path .. ": constraint: expected a mapping") end
  args.global_batch = count(constraint, "global_batch_size", "constraint")
  local limit = memory(constraint, "memory_limit_gb", "constraint") or mem
  if limit then  -- a number is the reference's (binary) GB, a string a size with its unit
    if not (limit > 0 and limit < math.huge) then
      local raw = constraint.memory_limit_gb
      if raw == nil then raw = cluster.device_memory_gb end
      cli.fail(string.format("%s: memory limit: expected a finite number of GB above 0 (or a "
                             .. "size with its unit), got %s", path, tostring(raw)))
    end
    args.max_mem = limit
  end
  local par = doc.parallelism or {}
  if type(par) ~= "table" then cli.fail(path .. ": parallelism: expected a mapping") end
  local KEYS = {dp = "dp", tp = "tp", pp = "pp", cp = "cp", ep = "ep", etp = "etp", vpp = "vpp",
                micro_batch_num = "mb", micro_batch_size = "mbs", sp = "sp", zero = "zero",
                dp_shard = "dp_shard", dp_replicate = "dp_replicate"}
  for k, v in pairs(par) do
    local d = KEYS[k]
    if k == "fsdp" then
      cli.fail(path .. ": parallelism.fsdp: give zero: 0-3 (and dp_shard or dp_replicate for HSDP)")
    end
    if not d then cli.fail(string.format("%s: parallelism.%s: unknown dimension (expected %s)", path,
                                         tostring(k), "dp, tp, pp, cp, ep, etp, vpp, micro_batch_num, micro_batch_size, sp, zero, dp_shard, dp_replicate")) end
    if v == "auto" then args[d] = "auto"
    elseif type(v) == "table" then
      for _, x in ipairs(v) do
        if d ~= "sp" and math.type(x) ~= "integer" then
          cli.fail(string.format("%s: parallelism.%s: expected integers, a scalar or auto", path, k))
        end
      end
      args[d] = #v == 1 and v[1] or v
    elseif d == "sp" and type(v) == "boolean" or math.type(v) == "integer" then args[d] = v
    else cli.fail(string.format("%s: parallelism.%s: expected an integer, a list or auto, got %s",
                                path, k, tostring(v))) end
    declared[d] = "declared"
  end
  if doc.recompute ~= nil then
    local r = doc.recompute
    if r == false then r = "off" end
    if type(r) == "table" then
      local list = {}
      for i, x in ipairs(r) do list[i] = x == false and "off" or x end
      r = list
    end
    args.recompute = r
    declared.recompute = "declared"
  end
  if doc.precision ~= nil then  -- a recipe, a list of them (each walked) or "bf16,fp8:mxfp8"
    args.precision = require("ndplan.cli.options").config_recipes(path, doc.precision)
  end
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

-- without trailing slashes, so that the paths it prints read out/report.html, not out//report.html
local out_dir = opts["output-dir"] and opts["output-dir"]:gsub("(.)/+$", "%1")
local stage  -- -o DIR: this run's files, staged and put in place together at the end
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
if out_dir then
  local serr
  stage, serr = files.stage(out_dir)
  if not stage then cli.fail("output directory: " .. tostring(serr)) end
  args.csv = stage:path("results.csv")
  args.csv_all = opts["all-rows"] or nil
end
-- a failure after this leaves -o DIR as it was (the stage is removed on every way out)
local function fail_out(msg, code)
  if stage then msg = stage:final_text(msg); stage:abort() end
  cli.fail(msg, code)
end
args.exhaustive = opts.exhaustive or nil

local model = cli.check(nd.model(args.model, {strict = opts.strict}))
for _, w in ipairs(model:warnings()) do  -- what was assumed, on stderr
  io.stderr:write("ndplan: warning: ", model.name, ": ", w, "\n")
end
args.model = model

-- "off" is the command line's word for none: the library takes the core's names
if type(args.recompute) == "table" then
  for i, x in ipairs(args.recompute) do if x == "off" then args.recompute[i] = "none" end end
elseif args.recompute == "off" then args.recompute = "none" end
local ok, ranked, info_or_msg, info_fail = pcall(search.search, args)
if not ok then
  -- a bad --precision or --schedule is a usage error, named as the flag
  local msg = tostring(ranked):gsub("^(precision): ", "--%1: "):gsub("^(schedule): ", "--%1: ")
  if verbosity >= 2 and require("ndplan.policy").last_traceback then
    io.stderr:write(require("ndplan.policy").last_traceback, "\n")
  end
  fail_out(msg, msg:match("^%-%-") and cli.EXIT_USAGE or nil)
end
local info = ranked and info_or_msg or info_fail
local fail_msg = not ranked and info_or_msg or nil
if info and info.pinned_refused then fail_out(fail_msg, cli.EXIT_USAGE) end
if not info then fail_out(fail_msg) end

local function gib(b) return units.bytes(b, "binary") end
local function write_out(name, text)
  local okw, err = stage:write(name, text)
  if not okw then fail_out(err) end
end

-- Files in -o DIR, written into the stage: results.csv was streamed there by the core.
local doc, export_lines, export_refused
if out_dir then
  doc = search.json_doc(ranked or {}, info)
  local mem = {"rank,stage,layers,inflight,weights,grads,optimizer,activations,buffers,"
               .. "fragmentation,reserve,peak"}
  local tim = {"rank,part,seconds,share"}
  for _, r in ipairs(doc.results) do
    for _, s in ipairs(r.stages) do
      mem[#mem + 1] = string.format("%d,%d,%d,%.6g,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f",
        r.rank, s.stage, s.layers, s.inflight, s.weights, s.grads, s.optimizer, s.activations,
        s.buffers, s.fragmentation, s.reserve, s.peak)
    end
    for _, k in ipairs(core.time_parts()) do
      local v = r.time_parts_s[k] or 0
      tim[#tim + 1] = string.format("%d,%s,%.9g,%.6f", r.rank, k, v, v / r.step_time_s)
    end
  end
  write_out("memory_parts.csv", table.concat(mem, "\n") .. "\n")
  write_out("time_parts.csv", table.concat(tim, "\n") .. "\n")
  doc.model_warnings = model:warnings()  -- the loader's report: what it assumed or did not read
  write_out("search.json", search.encode_json(doc) .. "\n")
  -- the potentials of the top per-layer configurations, the charts and report.html
  local outs = require "ndplan.out.search_outputs"
  local potentials, plot_data = outs.potentials(doc.results, info)
  if potentials then
    local okc, cerr = pcall(require("ndplan.recompute").write_csv, potentials,
                            stage.dir .. "/recompute_potentials.csv")
    if not okc then fail_out(tostring(cerr)) end
    write_out("recompute_plot_groups.json", json.encode(plot_data) .. "\n")
  end
  -- the chart's candidates: the search's sample of the rows it wrote to results.csv
  local okr2, rep_err = require("ndplan.out.report").search_report(stage.dir, doc.results,
    outs.points(info.results, doc.results, info.priced), info.budget_bytes,
    plot_data, {priced = info.priced, fit = info.fit})
  if not okr2 then fail_out(tostring(rep_err)) end
  if export_formats and doc.results[1] then
    info.dialects, info.search_args = dialects, args
    local lines, eerr, refused = outs.exports(stage.dir, export_formats, doc.results, info)
    if not lines then fail_out(eerr) end
    export_lines, export_refused = {}, refused
    for i, l in ipairs(lines) do export_lines[i] = stage:final_text(l) end
  end
end

if opts.json then
  doc = doc or search.json_doc(ranked or {}, info)
  doc.model_warnings = model:warnings()
  io.write(search.encode_json(doc), "\n")
else
  local out = {}
  local function say(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  if verbosity >= 1 then
    say("%s on %d x %s, global batch %d x %d tokens, budget %s per device%s, policy %s",
        info.model, info.job.devices, info.device, info.job.global_batch, info.job.seq_len,
        gib(info.device_budget_bytes or info.budget_bytes or 0),
        (info.device_budget_bytes and info.budget_bytes ~= info.device_budget_bytes)
          and string.format(", ranked within %s (memory band %.1f%%)", gib(info.budget_bytes),
                            100 * (info.memory_band or 0)) or "",
        tostring(info.policy))
    if config_line then
      local parts = {}
      for _, d in ipairs(search.DIMS) do
        local v = info.space[d]
        local state
        if v == "auto" then state = declared[d] and "searched (auto)" or "searched (not declared)"
        elseif type(v) == "table" then
          local s = {}
          for i, x in ipairs(v) do s[i] = tostring(x) end
          state = "searched over [" .. table.concat(s, ", ") .. "]"
        else state = string.format("fixed %s (%s)", tostring(v), declared[d] or "default") end
        parts[#parts + 1] = d .. "=" .. state
      end
      say("Parallelism: %s", table.concat(parts, "; "))
    end
    say("%s", search.bounds_line(info))
    for _, w in ipairs(info.warnings or {}) do io.stderr:write("ndplan: warning: ", w, "\n") end
  end
  if ranked then
    out[#out + 1] = require("ndplan.out.summary").search_table(ranked, info)
  end
  if verbosity >= 1 then say("%s", search.counts_line(info)) end
  if ranked and verbosity >= 1 then  -- what the ranking rests on (issue 14)
    local a = require "ndplan.fit.assumptions"
    for _, l in ipairs(a.lines(doc and doc.assumptions or a.report(ranked, info))) do
      say("%s", l)
    end
  end
  for _, w in ipairs(model:warnings()) do say("model %s: %s", model.name, w) end
  for _, l in ipairs(export_lines or {}) do say("%s", l) end
  if not ranked or verbosity >= 2 then
    if fail_msg then say("%s", fail_msg) end
    if #info.misses > 0 then say("nearest misses:") end
    for _, r in ipairs(info.misses) do
      local s = r.strategy
      -- the walked recipe and shard group, when the search walks them
      local extra = (type(args.precision) == "table" and " " .. s.precision or "")
                    .. ((args.dp_shard or args.dp_replicate)
                        and " dp_shard " .. s.dp_shard .. " dp_replicate " .. s.dp_replicate or "")
      say("  dp %d tp %d pp %d vpp %d cp %d ep %d etp %d sp %s zero %d mbs %d mb %d %s%s%s: peak %s, over by %s",
          s.dp, s.tp, s.pp, s.vpp, s.cp, s.ep, s.etp, s.sp and "on" or "off", s.zero, s.mbs, s.mb,
          s.recompute, (s.layout or "even") ~= "even" and " layout " .. s.layout or "", extra,
          gib(r.peak_memory_bytes), gib(r.over_bytes))
    end
  end
  io.write(table.concat(out, "\n"), "\n")
end

if ranked then
  local p = info.policy_table
  local okd, derr = pcall(require("ndplan.policy").call, p, "done", ranked, {
    dir = out_dir, info = info,
    write = function(name, text)  -- a plain name inside -o DIR, a string
      local plain, nerr = require("ndplan.policy").plain_name(name)
      if not plain then error(nerr, 2) end
      if type(text) ~= "string" then error("out.write: expected the text as a string", 2) end
      if not out_dir then return nil, "no output directory (-o)" end
      return stage:write(plain, text)
    end,
  })
  if not okd then fail_out(tostring(derr)) end
end
if stage then  -- every file of the run, put in place together
  local okc, cerr = stage:commit()
  if not okc then cli.fail(cerr) end
end
if not ranked then os.exit(cli.EXIT_NO_FIT) end
if (export_refused or 0) > 0 then os.exit(cli.EXIT_REFUSED) end
