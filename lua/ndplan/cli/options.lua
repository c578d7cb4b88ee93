-- The command line's side of one strategy shape: the model, device, job and strategy
-- options every pricing command shares (estimate, export, recompute) and their translation
-- into nd.estimate arguments (args), with --from-megatron's values filled in first. This is
-- the CLI layer: a bad value stops the command with a usage error naming the flag
-- (ndplan.cli.fail); the library's side (names, estimate_args, row_args) is ndplan.strategy.
local cli = require "ndplan.cli"
local nd = require "ndplan"
local strategy = require "ndplan.strategy"

local M = {}

M.OPTIONS = {
  {name = "model", short = "m", arg = "NAME|PATH", help = "model name or config (required without --from-megatron)"},
  {name = "strict", help = "refuse a model the loader had to assume anything about"},
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
  {name = "schedule", arg = "NAME", help = strategy.words(strategy.NAMES.schedules)},
  {name = "recompute", arg = "MODE", help = "none, selective, full, per_layer (chosen to fit -M), megatron (the fastest Megatron can state that fits -M) or a per-layer spec"},
  {name = "recompute-modes", arg = "LIST", help = "modes per_layer may use (default none,selective,full,variants: variants lets each selective layer take its own op switches; add offload to offload layers to host)"},
  {name = "selective-ops", arg = "LIST", help = "what selective repeats: " .. table.concat(strategy.NAMES.ops, ",") .. " (default attn_core)"},
  {name = "layout", arg = "even|balanced", help = "pipeline layout: even split, or balanced within -M"},
  {name = "offload", arg = "SHARE", help = "share (0-1) of waiting activations kept in host memory"},
  {name = "precision", arg = "P", help = "bf16, fp16, fp8 (Megatron's default recipe, fp8:delayed), fp8:RECIPE or nvfp4 (ndplan devices --recipes lists them)"},
  {name = "tp-comm-overlap", help = "TP collectives overlapped with their GEMMs (Megatron --tp-comm-overlap, torchtitan async TP): costs.tp_overlap_on of them hidden"},
  {name = "dp-shard", arg = "N", help = "HSDP: ZeRO/FSDP shards over N data-parallel ranks (torchtitan's data_parallel_shard_degree; default: all of dp)"},
  {name = "dp-replicate", arg = "M", help = "HSDP: M replicas of the shard group (dp = N x M; torchtitan's data_parallel_replicate_degree)"},
  {name = "reshard-after-forward", arg = "on|off", help = "with --zero 3 (FSDP): gather each micro-batch's parameters again (on), or keep them for the step (off); default: off with PP (torchtitan), else on"},
  {name = "fp8-param-gather", help = "keep and all-gather parameters at the recipe's width (Megatron --fp8-param-gather/--fp4-param-gather; torchao FSDP float8 all-gather with --zero 3)"},
  {name = "num-layers-at-start-in-bf16", arg = "N", help = "body layers kept in BF16 at the start (default: the recipe's; nvfp4 2)"},
  {name = "num-layers-at-end-in-bf16", arg = "N", help = "body layers kept in BF16 at the end (default: the recipe's; nvfp4 8)"},
  {name = "no-flash", help = "attention without flash (keeps the s^2 scores)"},
  {name = "stage-layers", arg = "LIST", help = "layers per stage, e.g. 15,16,16,14 (with --vpp: pp*vpp chunk sizes in layer order)"},
  {name = "account-for-embedding-in-pipeline-split", help = "Megatron: the embedding counts as one layer in the pipeline split"},
  {name = "account-for-loss-in-pipeline-split", help = "Megatron: the loss counts as one layer in the pipeline split"},
  {name = "decoder-first-pipeline-num-layers", arg = "N", help = "Megatron: layers of the first stage (a multiple of vpp)"},
  {name = "decoder-last-pipeline-num-layers", arg = "N", help = "Megatron: layers of the last stage (a multiple of vpp)"},
  {name = "pipeline-model-parallel-layout", arg = "STRING", help = "Megatron's layout string, e.g. 'Et*3|(tt|)*29,m|L' (sets vpp)"},
  {name = "max-mem", short = "M", arg = "SIZE", help = "memory budget (default: device capacity)"},
  {name = "costs", arg = "K=V,...", help = "override named costs, e.g. dp_overlap=0"},
  {name = "stack", arg = "NAME|PATH", default = "megatron-core",
   help = "stack profile: efficiencies and costs fitted per software stack (ndplan stacks; none: the device file alone)"},
  {name = "from-megatron", arg = "FILE", help = "take model, job and strategy from a Megatron launch script; options given here win"},
}

-- check_precision(flag, value): a usage error naming the flag and the accepted names
function M.check_precision(flag, value)
  if value == nil then return nil end
  local names = require("ndplan.config.device").recipe_names()
  for _, n in ipairs(names) do if n == value then return value end end
  cli.fail(string.format("--%s: expected %s or %s, got '%s'", flag,
                         table.concat(names, ", ", 1, #names - 1), names[#names], value),
           cli.EXIT_USAGE)
end

-- options(own) -> the command's own options followed by the shared ones
function M.options(own)
  local out = {}
  for _, o in ipairs(own) do out[#out + 1] = o end
  for _, o in ipairs(M.OPTIONS) do out[#out + 1] = o end
  return out
end

-- one_of(flag, value, allowed [, last]) -> value (nil stays nil), or stops with a usage
-- error naming the flag and the allowed names
local function one_of(flag, value, allowed, last)
  if value == nil then return nil end
  for _, a in ipairs(allowed) do if a == value then return value end end
  cli.fail(string.format("--%s: expected %s, got '%s'", flag,
                         last and strategy.words(allowed, last) or table.concat(allowed, ", "), value),
           cli.EXIT_USAGE)
end

-- A comma list of names from `allowed` (the core's), each checked.
local function name_list(flag, text, allowed)
  local out = {}
  for m in text:gmatch("[^,]+") do out[#out + 1] = one_of(flag, m, allowed, "or") end
  return out
end

-- ops(flag, text) -> the comma list of selective switches (--selective-ops), each checked
function M.ops(flag, text) return name_list(flag, text, strategy.NAMES.ops) end

-- check_ops(flag, names) -> names, each a switch of the core's (strategy.NAMES.ops), or a
-- usage error naming the flag and the first unknown one
local function check_ops(flag, names)
  local known = {}
  for _, n in ipairs(strategy.NAMES.ops) do known[n] = true end
  for _, op in ipairs(names) do
    if not known[op] then
      cli.fail(string.format("%s: unknown selective op '%s' (expected %s)", flag, op,
                             table.concat(strategy.NAMES.ops, ", ")), cli.EXIT_USAGE)
    end
  end
  return names
end

-- args(spec, argv, opts) -> nd.estimate arguments, model. Fills options from
-- --from-megatron first (command-line options win), then checks and converts; bad values
-- stop with a usage error naming the flag.
function M.args(spec, argv, opts)
  if opts["from-megatron"] then M.from_megatron(spec, argv, opts) end
  for _, name in ipairs({"model", "devices", "global-batch-size"}) do
    if opts[name] == nil then
      cli.fail(string.format("option '--%s' is required (see 'ndplan %s --help')", name, spec.name),
               cli.EXIT_USAGE)
    end
  end
  local function int(name) return cli.integer(name, opts[name]) end
  if opts["max-mem"] then  -- a budget is finite and above 0 (0 is no "unlimited")
    local _, err = require("ndplan.estimate").check_bytes("--max-mem", opts["max-mem"])
    if err then cli.fail(err, cli.EXIT_USAGE) end
  end
  local model = cli.check(nd.model(opts.model, {strict = opts.strict}))
  for _, w in ipairs(model:warnings()) do  -- what was assumed, on stderr
    io.stderr:write("ndplan: warning: ", model.name, ": ", w, "\n")
  end
  local device = cli.check(nd.device(opts["device-type"]))
  one_of("schedule", opts.schedule, strategy.NAMES.schedules)
  M.check_precision("precision", opts.precision)
  one_of("reshard-after-forward", opts["reshard-after-forward"], {"on", "off"})
  local args = {
    model = model, device = device, devices = int("devices"),
    global_batch = int("global-batch-size"), seq_len = int("seq-len"),
    tp = int("tp"), pp = int("pp"), vpp = int("vpp"), cp = int("cp"), ep = int("ep"),
    etp = int("etp"), dp = int("dp"), zero = int("zero"), mbs = int("mbs"), mb = int("mb"),
    dp_shard = int("dp-shard"), dp_replicate = int("dp-replicate"),
    tp_comm_overlap = opts["tp-comm-overlap"] or nil,
    sp = opts.sp or nil, schedule = opts.schedule, precision = opts.precision,
    flash_attention = not opts["no-flash"], max_mem = opts["max-mem"],
    fp8_param_gather = opts["fp8-param-gather"] or nil,
    reshard_after_forward = ({on = true, off = false})[opts["reshard-after-forward"] or ""],
    bf16_first_layers = int("num-layers-at-start-in-bf16"),
    bf16_last_layers = int("num-layers-at-end-in-bf16"),
  }
  local r = opts.recompute or spec.default_recompute  -- ndplan recompute: per_layer
  if r == "off" then r = "none" end  -- the CLI's word for none
  local whole = false
  for _, name in ipairs(strategy.NAMES.search_recompute) do whole = whole or name == r end
  if whole then
    args.recompute = r
  elseif r then  -- a per-layer spec, e.g. 0-9:full,10-79:selective
    local layers = model.num_layers + model.mtp_layers
    local per = {}
    local layer_ops, any_ops = {}, false
    for _, rg in ipairs(cli.check(nd.grammar.recompute(r, layers))) do
      -- selective(norms,act): the range's own switches (they were dropped)
      local own = rg.ops and check_ops("--recompute", rg.ops)
      for i = rg.first, rg.last do per[i + 1] = rg.mode; layer_ops[i + 1] = own end
      any_ops = any_ops or own ~= nil
    end
    for i = 1, layers do
      per[i] = per[i] or "none"
      layer_ops[i] = layer_ops[i] or {}  -- {}: the layer takes selective_ops
    end
    args.layer_recompute = per
    if any_ops then args.layer_selective_ops = layer_ops end
  end
  if opts["recompute-modes"] then
    if args.recompute ~= "per_layer" then
      cli.fail("--recompute-modes needs --recompute per_layer", cli.EXIT_USAGE)
    end
    args.recompute_modes = name_list("recompute-modes", opts["recompute-modes"],
                                     strategy.NAMES.plan_modes)
    local modes = 0  -- offload and variants qualify modes: a layer still needs one to take
    for _, m in ipairs(args.recompute_modes) do
      for _, r in ipairs(strategy.NAMES.recompute) do if m == r then modes = modes + 1 end end
    end
    if modes == 0 then
      cli.fail(string.format("--recompute-modes: expected at least one of %s (offload and "
                             .. "variants only add to them), got '%s'",
                             table.concat(strategy.NAMES.recompute, ", "), opts["recompute-modes"]),
               cli.EXIT_USAGE)
    end
  end
  if opts["selective-ops"] then
    args.selective_ops = name_list("selective-ops", opts["selective-ops"], strategy.NAMES.ops)
  end
  if opts["stage-layers"] then
    local list = {}
    local most = model.num_layers + model.mtp_layers  -- no stage holds more than the model
    for n in opts["stage-layers"]:gmatch("[^,]+") do
      local k = math.tointeger(tonumber(n))
      if not k or k < 0 or k > most then
        cli.fail(string.format("--stage-layers: expected layer counts from 0 to %d (the model's "
                               .. "layers), got '%s'", most, n), cli.EXIT_USAGE)
      end
      list[#list + 1] = k
    end
    args.stage_layers = list
  end
  args.account_for_embedding_in_pipeline_split = opts["account-for-embedding-in-pipeline-split"] or nil
  args.account_for_loss_in_pipeline_split = opts["account-for-loss-in-pipeline-split"] or nil
  args.decoder_first_pipeline_num_layers = int("decoder-first-pipeline-num-layers")
  args.decoder_last_pipeline_num_layers = int("decoder-last-pipeline-num-layers")
  args.pipeline_model_parallel_layout = opts["pipeline-model-parallel-layout"]
  if opts.layout then
    if opts.layout ~= "even" and opts.layout ~= "balanced" then
      cli.fail("--layout: expected even or balanced, got '" .. opts.layout .. "'", cli.EXIT_USAGE)
    end
    args.layout = opts.layout
  end
  if opts.offload then
    local share = tonumber(opts.offload)
    if not share or share < 0 or share > 1 then
      cli.fail("--offload: expected a share between 0 and 1, got '" .. opts.offload .. "'", cli.EXIT_USAGE)
    end
    args.offload = share
  end
  if opts.costs then args.costs = cli.parse_costs(opts.costs) end
  args.stack = opts.stack
  local _, serr = require("ndplan.config.stack").load(args.stack)
  if serr then cli.fail("--stack: " .. serr, cli.EXIT_USAGE) end
  return args, model
end

-- from_megatron(spec, argv, opts): for `ndplan estimate/export --from-megatron FILE`, the
-- script's values (ndplan.config.megatron_script) for every option of `spec` that `argv`
-- does not give (the command line wins). Fails with the script's file:line:flag message.
function M.from_megatron(spec, argv, opts)
  local script = require "ndplan.config.megatron_script"
  local path = opts["from-megatron"]
  local info = cli.check(script.load(path))
  local function given(name)
    for _, o in ipairs(spec.options) do
      if o.name == name then
        for _, a in ipairs(argv) do
          if a == "--" .. name or a:sub(1, #name + 3) == "--" .. name .. "="
             or (o.short and a == "-" .. o.short) then return true end
        end
      end
    end
    return false
  end
  local function fill(name, value)
    if value ~= nil and not given(name) then opts[name] = tostring(value) end
  end
  local st = info.strategy
  for _, k in ipairs({"tp", "pp", "vpp", "cp", "ep", "etp", "zero", "mbs", "precision"}) do
    fill(k, st[k])
  end
  if st.sp and not given("sp") then opts.sp = true end
  if st.fp8_param_gather and not given("fp8-param-gather") then opts["fp8-param-gather"] = true end
  fill("num-layers-at-start-in-bf16", st.bf16_first_layers)
  fill("num-layers-at-end-in-bf16", st.bf16_last_layers)
  fill("global-batch-size", info.job.global_batch)
  fill("seq-len", info.job.seq_len)
  if not given("devices") then
    if info.devices_error then cli.fail(info.devices_error) end
    fill("devices", info.job.devices)
  end
  for _, k in ipairs(script.LAYOUT_FIELDS) do
    local v = st[k]
    if v == true then
      if not given(k:gsub("_", "-")) then opts[k:gsub("_", "-")] = true end
    elseif v ~= nil then fill((k:gsub("_", "-")), v) end
  end
  if not opts.model then opts.model = cli.check(script.model_config(info, path)) end
  if st.recompute_block and not st.layer_recompute then  -- block needs the layer count
    local m = cli.check(require("ndplan").model(opts.model))
    st.layer_recompute = script.block_modes(st, st.recompute_block, m.num_layers, m.mtp_layers)
  end
  if not given("recompute") then
    if st.layer_recompute then
      opts.recompute = require("ndplan.export").describe_modes(st.layer_recompute)
    else
      fill("recompute", st.recompute)
    end
  end
  return info
end

-- estimate(args) -> result, or stops with the refusal: exit 3 when a per-layer plan or
-- layout cannot fit the budget, 1 otherwise (costs errors name the field alone).
function M.estimate(args)
  local r, why = nd.estimate(args)
  if not r then
    if why:match("^over memory") then cli.fail(why, cli.EXIT_NO_FIT) end
    cli.fail((why:match("^costs%.") and "" or "strategy refused: ") .. why)
  end
  for _, w in ipairs(r.warnings or {}) do io.stderr:write("ndplan: warning: ", w, "\n") end
  return r
end

return M
