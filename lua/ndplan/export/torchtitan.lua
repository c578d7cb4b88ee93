-- torchtitan `--section.option` overrides (models-and-trainers.md §2.5), as a bash array
-- to append to run_train.sh's command line, with the model run_train.sh is to load
-- (v0.2.2: CONFIG_FILE and --model.name/flavor; main: MODULE and CONFIG). torchtitan
-- retired its TOML configs for Python config functions in Feb 2026 (#2386); the flags
-- still work on main but #4121 renamed the batch ones (see DIALECTS). A model torchtitan
-- defines no module for is refused.
--
-- What torchtitan cannot say: data parallelism is FSDP (ZeRO-3, or ZeRO-2-like with
-- fsdp_reshard_after_forward = "never"), HSDP (dp_shard x dp_replicate) or plain
-- replication (ZeRO-0): ZeRO-1 rounds to ZeRO-2, and so does ZeRO-0 with EP (EP borrows the
-- FSDP ranks). Activation offload has no option (rounds to none); MTP layers are not
-- trained [R]. Activation checkpointing is none, selective (op level) or full, or (v0.2.2)
-- full on every nth layer: a per-layer plan rounds up to one of those. TP always shards
-- the norms along the sequence (torchtitan's TP plan applies sequence parallelism [R]), so
-- sp off rounds to on. Schedules: 1F1B, Interleaved1F1B (§2.5), GPipe [R]; zero-bubble and
-- DualPipe round to 1F1B.
local export = require "ndplan.export"
local flags = require "ndplan.export.flags"

local M = {}

-- Dialects, newest first. "main": torchtitan after #4121 (2026-08-20, 73aed7f6c): the
-- batch is counted in tokens (training.num_tokens_per_microbatch_per_dp_rank,
-- num_tokens_per_train_step, max_context_length, parallelism.num_pp_microbatches;
-- torchtitan/config/configs.py:37-51, 232), the run is chosen with --module/--config
-- (run_train.sh) and activation checkpointing is a subcommand (activation-checkpoint:full,
-- :selective, :none; distributed/activation_checkpoint.py:332-337) whose selective form is
-- per-op only. "v0.2.2": the job_config flags (config/job_config.py) and TOML files.
M.DIALECTS = {"main", "v0.2.2"}
M.dialect = "torchtitan main after #4121 (2026-08) --section.option flags"
M.filename = "torchtitan_args.sh"
local LABEL = {main = M.dialect, ["v0.2.2"] = "torchtitan v0.2.2 job_config flags"}

-- ndplan's bundled models as torchtitan defines them: v0.2.2's model name and flavour
-- (torchtitan/models/<name>/__init__.py) with its TOML (models/<name>/train_configs/), and
-- main's config function (models/<name>/config_registry.py); nil where it has none.
M.MODELS = {
  ["llama3.1-8b"] = {"llama3", "8B", "llama3_8b.toml", "llama3_8b"},
  ["llama3.1-70b"] = {"llama3", "70B", "llama3_70b.toml", "llama3_70b"},
  ["llama3.1-405b"] = {"llama3", "405B", "llama3_405b.toml", "llama3_405b"},
  ["deepseek-v3"] = {"deepseek_v3", "671B", "deepseek_v3_671b.toml", "deepseek_v3_671b"},
  ["qwen3-32b"] = {"qwen3", "32B", "qwen3_32b.toml", "qwen3_32b"},
  ["qwen3-30b-a3b"] = {"qwen3", "30B-A3B", nil, "qwen3_30b_a3b"},
  ["qwen3-235b-a22b"] = {"qwen3", "235B-A22B", nil, nil},
  ["llama4-scout"] = {"llama4", "17bx16e", "llama4_17bx16e.toml", nil},
  ["llama4-maverick"] = {"llama4", "17bx128e", "llama4_17bx128e.toml", nil},
  ["gpt-oss-120b"] = {"gpt_oss", "120b", nil, "gpt_oss_120b"},
}

-- Flag names per dialect (the four #4121 renamed; the others are frozen, config/README.md)
local NAMES = {
  ["v0.2.2"] = {lbs = "training.local_batch_size", gbs = "training.global_batch_size",
                seq = "training.seq_len", pp_mbs = "parallelism.pipeline_parallel_microbatch_size"},
  main = {lbs = "training.num_tokens_per_microbatch_per_dp_rank",
          gbs = "training.num_tokens_per_train_step", seq = "training.max_context_length",
          pp_mb = "parallelism.num_pp_microbatches"},
}
M.NAMES = NAMES

local SCHEDULE = {["1f1b"] = "1F1B", interleaved = "Interleaved1F1B", gpipe = "GPipe"}

-- torchtitan's per-op selective AC (activation_checkpoint.mode = "selective",
-- selective_ac_option = "op"; main's only selective form) as ndplan's selective switches.
-- Its policy saves the output of every op in its save list -- the matmuls, SDPA/flex
-- attention, the amax of low-precision scaling, the TP reduce-scatters and the MoE
-- all-to-alls -- except every second matmul in forward order, and recomputes everything
-- else: the norms, the activation function and every second projection (v0.2.2:
-- torchtitan/models/llama3/infra/parallelize.py:36-47 (_op_sac_save_list),
-- distributed/activation_checkpoint.py:104-124 (mm counted, every second recomputed), 177
-- (option "op"); main at b5bcd76: distributed/activation_checkpoint.py:31-93
-- (_get_default_save_ops), 241-272). The attention core is saved (attn_core off); what a
-- selective candidate repeats under nd.search{trainer = "torchtitan"}.
M.OP_SAC = {"norms", "act", "alt_mm"}
local OP_SAC_KEY = table.concat(M.OP_SAC, "+")

-- every_nth(per) -> n when exactly every nth layer is full and the others none
local function every_nth(per)
  local first
  for i, m in ipairs(per) do
    if m == "full" then first = i; break end
  end
  if not first or first < 2 then return nil end
  for i, m in ipairs(per) do
    local want = i % first == 0 and "full" or "none"
    if m ~= want then return nil end
  end
  return first
end

local function round_recompute(said)
  local per = said.layer_recompute
  local u = export.uniform_mode(per)
  if u then return u end
  local n = every_nth(per)
  if n then return "selective", n end  -- "selective" with an integer: full AC every nth layer
  local any_full = false
  for _, m in ipairs(per) do any_full = any_full or m == "full" end
  local mode = any_full and "full" or "selective"
  for i = 1, #per do per[i] = mode end
  return mode
end

-- torchtitan's split (pipeline_parallel_layers_per_stage, _first/_last_stage_less_layers;
-- M.split): the plan's body layers per chunk (pp x vpp stages as torchtitan builds them),
-- or the nearest split it can state (the least layers moved; said's layout becomes it).
-- -> per, first_less, last_less | nil when no setting builds pp x vpp stages.
local function layout(ctx, said)
  if said.pp <= 1 then return nil end
  local n = said.pp * said.vpp
  local body = export.copy(said.vpp > 1 and said.chunk_layers or said.stage_layers)
  if not body or #body ~= n then  -- vpp > 1 without chunk sizes: the even split
    body = export.even_layout(ctx.layers, 0, n)
  else
    body[n] = body[n] - ctx.mtp
  end
  local L, best, bd = ctx.layers, nil, math.huge
  local top = -(-L // n) + 1  -- fewer layers on an end than a stage holds (pps:289-295)
  for fl = 0, top do
    for ll = 0, top do
      local eff = L + fl + ll
      local per = -(-eff // n)
      while per >= 1 and -(-eff // per) == n do
        local split = M.split(L, per, fl, ll)
        if split and #split == n then
          -- the least layers moved; of equal forms, one whose stages all hold per (no
          -- remainder spread), as torchtitan's own configs read
          local d = 0
          for k = 1, n do d = d + math.abs(split[k] - body[k]) end
          d = 2 * d + (eff % n == 0 and 0 or 1)
          if d < bd then best, bd = {per, fl, ll, split}, d end
        end
        per = per + 1
      end
      if bd == 0 then break end
    end
    if bd == 0 then break end
  end
  if not best then return nil end
  if bd > 1 then
    local sizes = export.copy(best[4])
    sizes[n] = sizes[n] + ctx.mtp
    if said.vpp > 1 then
      said.chunk_layers = sizes
      for s_ = 1, said.pp do said.stage_layers[s_] = 0 end
      for k, c in ipairs(sizes) do
        local s_ = (k - 1) % said.pp + 1
        said.stage_layers[s_] = said.stage_layers[s_] + c
      end
    else
      said.stage_layers = sizes
    end
  end
  return best[1], best[2], best[3]
end

function M.render(plan, opts)
  local ctx, err = export.context(plan)
  if not ctx then return nil, err end
  local dialect = opts and opts.dialect or M.DIALECTS[1]
  local names = NAMES[dialect]
  local said, why, unsaid = export.copy(ctx.strategy), {}, {}
  local name = ctx.model and ctx.model.name
  local def = name and M.MODELS[name]
  if not def or (dialect == "main" and not def[4]) then
    return export.refuse("torchtitan", string.format("torchtitan %s defines no model for %s "
      .. "(models with a definition: %s)", dialect, tostring(name), M.known(dialect)))
  end
  local args = {}
  local function add(k, v) args[#args + 1] = "--" .. k; args[#args + 1] = v end
  if dialect == "v0.2.2" then
    add("model.name", def[1])
    add("model.flavor", def[2])
  end
  -- batch: the local batch is one DP rank's share; with PP it is cut into micro-batches
  -- (v0.2.2 job_config.py:253-261, 412-417; main counts tokens, configs.py:37-51, 232)
  local pp = said.pp > 1
  local seq = ctx.job.seq_len
  if dialect == "v0.2.2" then
    add(names.lbs, pp and said.mbs * said.mb or said.mbs)
    add(names.gbs, ctx.job.global_batch)
    add(names.seq, seq)
  else
    add(names.lbs, said.mbs * seq)
    add(names.gbs, ctx.job.global_batch * seq)
    add(names.seq, seq)
  end
  if said.dp > 1 and said.zero == 0 and said.ep > 1 then
    said.zero = 2
    why.zero = "EP borrows its ranks from the FSDP dimension (parallel_dims.py:138), so DP must shard"
  end
  local shard, replicate = said.dp, 1
  if said.dp > 1 and said.zero == 0 then
    shard, replicate = 1, said.dp
  else
    if said.dp > 1 and said.zero == 1 then
      said.zero = 2
      why.zero = "FSDP shards gradients with the optimizer states (§2.5)"
    end
    -- HSDP: FSDP within dp_shard, replicas across (parallel_dims.py:53)
    if (said.dp_shard or 0) > 0 and said.dp_shard < said.dp then
      shard, replicate = said.dp_shard, said.dp // said.dp_shard
    end
  end
  if said.ep > 1 and (shard * said.cp * said.tp) % (said.ep * said.etp) ~= 0 then
    return export.refuse("torchtitan", string.format("EP %d x ETP %d must divide dp_shard %d x "
      .. "cp %d x tp %d (the expert FSDP mesh, parallel_dims.py:138)", said.ep, said.etp, shard,
      said.cp, said.tp))
  end
  if said.ep > 1 and said.etp ~= 1 and said.etp ~= said.tp then
    return export.refuse("torchtitan", "ETP must be 1 or TP (parallel_dims.py:59)")
  end
  if dialect == "main" and said.etp > 1 then
    return export.refuse("torchtitan", "main has no expert_tensor_parallel_degree "
      .. "(ParallelismConfig, config/configs.py): ETP " .. said.etp .. " cannot be stated")
  end
  add("parallelism.data_parallel_replicate_degree", replicate)
  add("parallelism.data_parallel_shard_degree", shard)
  if said.dp > 1 and said.zero >= 2 then
    add("parallelism.fsdp_reshard_after_forward", said.zero == 3 and "always" or "never")
  end
  add("parallelism.tensor_parallel_degree", said.tp)
  if said.tp > 1 and not said.sp then
    said.sp = true
    why.sp = "torchtitan's TP plan always shards norms along the sequence [R]"
  end
  add("parallelism.context_parallel_degree", said.cp)
  if said.ep > 1 or said.etp > 1 then
    add("parallelism.expert_parallel_degree", said.ep)
    if dialect == "v0.2.2" then add("parallelism.expert_tensor_parallel_degree", said.etp) end
  end
  if pp then
    add("parallelism.pipeline_parallel_degree", said.pp)
    -- single-stage schedules hold one stage per rank, multi-stage ones at least two
    -- (v0.2.2 distributed/pipeline_parallel.py:94-108)
    if said.vpp > 1 then said.schedule = "interleaved"
    elseif said.schedule == "interleaved" then said.schedule = "1f1b" end
    if not SCHEDULE[said.schedule] then
      said.schedule = "1f1b"
      why.schedule = "written are 1F1B, Interleaved1F1B (§2.5) and GPipe [R]; others round to 1F1B"
    end
    add("parallelism.pipeline_parallel_schedule", SCHEDULE[said.schedule])
    if dialect == "v0.2.2" then add(names.pp_mbs, said.mbs) else add(names.pp_mb, said.mb) end
    local per, first_less, last_less = layout(ctx, said)
    if not per then
      return export.refuse("torchtitan", string.format("no layers_per_stage and first/last "
        .. "less layers build %d stages of %d layers (distributed/pipeline_parallel.py:75-108, "
        .. "266-295)", said.pp * said.vpp, ctx.layers))
    end
    why.stage_layers = "torchtitan states layers per (virtual) stage and how many fewer the "
      .. "first and last hold"
    add("parallelism.pipeline_parallel_layers_per_stage", per)
    -- torchtitan's defaults are 1 and 1 (v0.2.2 job_config.py:377/383): always written
    add("parallelism.pipeline_parallel_first_stage_less_layers", first_less)
    add("parallelism.pipeline_parallel_last_stage_less_layers", last_less)
  end
  local mode, nth = round_recompute(said)
  why.recompute = "torchtitan checkpoints all layers alike, or every nth layer (§2.11); rounded up"
  if dialect == "main" and nth then  -- main's selective AC is per-op only
    for i = 1, #said.layer_recompute do said.layer_recompute[i] = "full" end
    mode, nth = "full", nil
    why.recompute = "torchtitan main checkpoints all layers alike (full, per-op selective or "
      .. "none, activation_checkpoint.py:332-337); rounded up"
  end
  if mode == "selective" and not nth and said.layer_selective_ops == nil
     and table.concat(said.selective_ops or {"attn_core"}, "+") ~= OP_SAC_KEY then
    said.selective_ops = export.copy(M.OP_SAC)
    why.selective_ops = "torchtitan's selective AC is per-op (selective_ac_option = \"op\"): it "
      .. "saves the matmul outputs except every second one and the attention, and recomputes "
      .. "the norms and the activation function (activation_checkpoint.py:104-124)"
  end
  if dialect == "v0.2.2" then
    add("activation_checkpoint.mode", mode)
    if mode == "selective" then add("activation_checkpoint.selective_ac_option", nth and tostring(nth) or "op") end
  end
  export.no_offload(said, why, "training.enable_cpu_offload moves parameters and optimizer, not activations")
  M.precision(said, why, unsaid, add, dialect)
  if ctx.mtp > 0 then
    unsaid[#unsaid + 1] = {field = "mtp_layers", plan = tostring(ctx.mtp),
                           why = "the MTP layers are not part of a torchtitan model definition [R]"}
  end
  local notes, rounded = export.finish(ctx, said, why, unsaid)
  local ngpu = replicate * shard * said.tp * said.pp * said.cp
  local devices = ctx.job.devices or ngpu
  local per_node = require("ndplan.export.megatron").node_size(ctx, devices)
  local lines = {"# torchtitan overrides written by ndplan export (" .. LABEL[dialect] .. ").",
                 string.format("# %s: dp_replicate %d x dp_shard %d x cp %d x tp %d x pp %d = %d "
                   .. "GPUs (parallel_dims.py:53).", flags.comment(name), replicate, shard,
                   said.cp, said.tp, said.pp, ngpu)}
  if dialect == "v0.2.2" then
    lines[#lines + 1] = "CONFIG_FILE=" .. flags.quote("./torchtitan/models/" .. def[1]
      .. "/train_configs/" .. (def[3] or "debug_model.toml"))
    if not def[3] then
      lines[#lines + 1] = "# (no TOML for this flavour: the debug TOML, with --model.flavor overriding it)"
    end
  else
    lines[#lines + 1] = "MODULE=" .. flags.quote(def[1])
    lines[#lines + 1] = "CONFIG=" .. flags.quote(def[4])
  end
  lines[#lines + 1] = "NGPU=" .. per_node
  lines[#lines + 1] = "TORCHTITAN_ARGS=("
  for i = 1, #args, 2 do lines[#lines + 1] = "    " .. args[i] .. " " .. flags.quote(args[i + 1]) end
  if dialect == "main" then lines[#lines + 1] = "    activation-checkpoint:" .. mode end
  lines[#lines + 1] = ")"
  local env = dialect == "v0.2.2" and "CONFIG_FILE=\"$CONFIG_FILE\"" or "MODULE=$MODULE CONFIG=$CONFIG"
  if devices // per_node > 1 then
    lines[#lines + 1] = string.format("# On each of %d nodes (run_train.sh is one node; across "
      .. "nodes use torchrun --nnodes %d --nproc-per-node %d --rdzv-backend c10d "
      .. "--rdzv-endpoint \"$HEAD_NODE:29500\" -m torchtitan.train with the same arguments):",
      devices // per_node, devices // per_node, per_node)
  end
  lines[#lines + 1] = "#   NGPU=$NGPU " .. env .. " ./run_train.sh \"${TORCHTITAN_ARGS[@]}\""
  lines[#lines + 1] = "# You still supply the dataset and tokenizer (--training.dataset, "
    .. "--model.hf_assets_path), the optimizer and LR schedule (--optimizer.lr, "
    .. "--lr_scheduler.warmup_steps, --training.steps) and checkpointing (--checkpoint.*)."
  return table.concat(lines, "\n") .. "\n", notes, rounded, {dialect = LABEL[dialect]}
end

function M.known(dialect)
  local out = {}
  for k, d in pairs(M.MODELS) do if dialect ~= "main" or d[4] then out[#out + 1] = k end end
  table.sort(out)
  return table.concat(out, ", ")
end

-- torchtitan's low-precision converters (job_config Float8 and MX): `float8` (torchao:
-- tensorwise by default, float8.recipe_name rowwise or rowwise_with_gw_hp) and `mx`
-- (mx.recipe_name mxfp8); float8.enable_fsdp_float8_all_gather all-gathers FSDP
-- parameters in float8 (tensorwise), with precompute_float8_dynamic_scale_for_fsdp.
-- Delayed scaling, blockwise FP8 and NVFP4 have no converter; filter_fqns matches module
-- names as substrings ("layers.1" also matches "layers.10"), so BF16 layers at the ends
-- cannot be listed; the output head is filtered, as ndplan keeps it in BF16.
local TORCHAO = {["fp8:tensorwise"] = {"float8"}, ["fp8:rowwise"] = {"float8", "rowwise"},
                 ["fp8:mxfp8"] = {"mx", "mxfp8_cublas"}}
local ROUND = {["fp8:delayed"] = {"fp8:tensorwise", "torchao has no delayed scaling; its float8 "
                                  .. "default is tensorwise (current) scaling"},
               ["fp8:blockwise"] = {"fp8:rowwise", "torchao's float8 recipes are tensorwise, "
                                    .. "rowwise and rowwise_with_gw_hp: the per-row scales are "
                                    .. "the nearest to 1x128 blocks"},
               nvfp4 = {"bf16", "no torchtitan converter trains in NVFP4 (float8 and mx only)"}}

function M.precision(said, why, unsaid, add, dialect)
  if dialect == "main" and export.quantized(said.precision) then
    said.precision, said.fp8_param_gather, said.bf16_first_layers, said.bf16_last_layers = "bf16", false, 0, 0
    why.precision = "torchtitan main takes its converters from the model config, which is off "
      .. "the command line (config/README.md): a *_float8 or *_mxfp8 config function, not flags"
    return
  end
  if said.precision == "fp16" then
    unsaid[#unsaid + 1] = {field = "precision", plan = said.precision,
                           why = "training.mixed_precision_param takes bfloat16 or float32; torchtitan trains in bf16 by default [R]"}
    return
  end
  local round = ROUND[said.precision]
  if round then said.precision, why.precision = round[1], round[2] end
  local c = TORCHAO[said.precision]
  if not c then  -- bf16
    said.fp8_param_gather, said.bf16_first_layers, said.bf16_last_layers = false, 0, 0
    return
  end
  -- v0.2.2: converters registered as quantize.linear.float8 / quantize.linear.mx
  -- (components/quantization/float8.py:238, mx.py:171), options under quantize.linear
  -- (config/job_config.py:731-790, 812-831)
  add("model.converters", "quantize.linear." .. c[1])
  unsaid[#unsaid + 1] = {field = "quant_cache", plan = "the recipe's quantized weight copies",
    why = "torchao casts the weights on each use and keeps no copy: price it with --costs quant_cache=0"}
  if c[1] == "float8" then
    if c[2] then add("quantize.linear.float8.recipe_name", c[2]) end
    add("quantize.linear.float8.filter_fqns", "output")
  else
    add("quantize.linear.mx.recipe_name", c[2])
  end
  if said.fp8_param_gather and not (c[1] == "float8" and not c[2] and said.zero >= 3) then
    said.fp8_param_gather = false
    why.fp8_param_gather = "float8 all-gather is FSDP's (ZeRO-3) with tensorwise scaling only"
  end
  if said.fp8_param_gather then
    add("quantize.linear.float8.enable_fsdp_float8_all_gather", "true")
    add("quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp", "true")
  end
  if said.bf16_first_layers + said.bf16_last_layers > 0 then
    said.bf16_first_layers, said.bf16_last_layers = 0, 0
    why.bf16_first_layers = "filter_fqns matches module names as substrings: layer ranges cannot be listed"
    why.bf16_last_layers = why.bf16_first_layers
  end
end


-- split(L, per, first_less, last_less) -> body layers per stage as torchtitan builds them
-- (v0.2.2 distributed/pipeline_parallel.py:75-77 and 266-340: ceil((L + fl + ll) / per)
-- stages share the effective layers evenly, the remainder one each to the first stages,
-- and the first and last give up fl and ll) | nil, why where it raises (269-295)
function M.split(L, per, fl, ll)
  local n = -(-(L + fl + ll) // per)
  local eff = L + fl + ll
  if n > eff then return nil, "more stages than effective layers" end
  local base, extra = eff // n, eff % n
  if base == 0 or fl > base or ll > base then return nil, "first/last less layers exceed a stage" end
  local out, left = {}, L
  for k = 1, n do
    local e = base + (k - 1 < extra and 1 or 0)
    if k == 1 then e = e - fl elseif k == n then e = e - ll end
    if n == 1 then e = L end
    e = math.min(e, left)
    out[k], left = e, left - e
  end
  return out
end

-- parse(text, {layers = body layers}) -> strategy, job (stage_layers are body layers per
-- stage, or per chunk with VPP)
-- toml(text, source) -> {["section.key"] = value text} | nil, "source:line: message": the
-- flat TOML of torchtitan's train_configs ([section] and [a.b] headers, key = value, #
-- comments, strings, numbers, booleans; of a one-line array its first element)
function M.toml(text, source)
  local out, section, ln = {}, nil, 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    ln = ln + 1
    local body, q = {}, nil  -- the line up to a # outside quotes
    for c in line:gmatch(".") do
      if q then if c == q then q = nil end
      elseif c == '"' or c == "'" then q = c
      elseif c == "#" then break end
      body[#body + 1] = c
    end
    local l = table.concat(body):match("^%s*(.-)%s*$")
    if l ~= "" then
      local head = l:match("^%[([%w_%.]+)%]$")
      local key, value = l:match("^([%w_]+)%s*=%s*(.+)$")
      if head then section = head
      elseif key and section then
        value = value:match("^%[%s*(.-)%s*[,%]]") or value  -- an array: its first element
        out[section .. "." .. key] = value:match('^"(.*)"$') or value:match("^'(.*)'$") or value
      else
        return nil, string.format("%s:%d: cannot read the TOML line '%s'", source, ln, l)
      end
    end
  end
  return out
end

function M.parse(text, opts)
  opts = opts or {}
  local v
  if text:match("^%s*%[[%w_%.]+%]") or text:find("\n%s*%[[%w_%.]+%]") then  -- a TOML file
    local t, err = M.toml(text, opts.source or "torchtitan.toml")
    if not t then return nil, err end
    v = function(k) return t[k] end
  else
    local parsed, err = flags.parse(text, opts.source or M.filename)
    if not parsed then return nil, err end
    v = function(k) local o = parsed.last["--" .. k:gsub("_", "-")]; return o and o.values[1] end
  end
  local function n(k) return math.tointeger(tonumber(v(k))) end
  local st = {tp = n("parallelism.tensor_parallel_degree") or 1,
              cp = n("parallelism.context_parallel_degree") or 1,
              pp = n("parallelism.pipeline_parallel_degree") or 1,
              ep = n("parallelism.expert_parallel_degree") or 1,
              etp = n("parallelism.expert_tensor_parallel_degree") or 1}
  local replicate, shard = n("parallelism.data_parallel_replicate_degree") or 1,
                           n("parallelism.data_parallel_shard_degree") or -1
  if shard == -1 then  -- inferred: the ranks the other degrees leave (parallel_dims.py:48-51)
    shard = opts.devices and opts.devices // (replicate * st.cp * st.tp * st.pp) or 1
  end
  st.dp = replicate * shard
  if shard > 1 and replicate > 1 then st.dp_shard, st.dp_replicate = shard, replicate end
  st.zero = shard > 1 and (v("parallelism.fsdp_reshard_after_forward") == "never" and 2 or 3) or 0
  st.sp = st.tp > 1
  local main = v(NAMES.main.lbs) ~= nil
  local names = NAMES[main and "main" or "v0.2.2"]
  local seq = n(names.seq)
  local job, lbs = {seq_len = seq}, nil
  if main then  -- tokens: per DP rank per micro-batch, per step (configs.py:37-51)
    lbs = seq and n(names.lbs) and n(names.lbs) // seq
    job.global_batch = seq and n(names.gbs) and n(names.gbs) // seq
  else
    lbs = n(names.lbs)
    job.global_batch = n(names.gbs)
    if (job.global_batch or -1) < 0 and lbs then  -- default: local x DP (job_config.py:256-258)
      job.global_batch = lbs * st.dp
    end
  end
  if st.pp > 1 then
    local schedule = v("parallelism.pipeline_parallel_schedule")
    for k, name in pairs(SCHEDULE) do if name == schedule then st.schedule = k end end
    if main then  -- the micro-batch is the DP rank's batch, cut num_pp_microbatches ways
      st.mb = n(names.pp_mb) or 1
      st.mbs = lbs
    else
      st.mbs = n(names.pp_mbs)
      st.mb = lbs // st.mbs
    end
    local per = n("parallelism.pipeline_parallel_layers_per_stage")
    local fl = n("parallelism.pipeline_parallel_first_stage_less_layers") or 1
    local ll = n("parallelism.pipeline_parallel_last_stage_less_layers") or 1
    if per and per > 0 and opts.layers then
      -- torchtitan's split (v0.2.2 distributed/pipeline_parallel.py:75-77, 266-340):
      -- ceil((L + first_less + last_less) / per) stages, the effective layers spread evenly
      local split = M.split(opts.layers, per, fl, ll)
      st.vpp = math.max(1, #split // st.pp)
      st.stage_layers = split
    end
  else
    st.mbs = lbs
    st.mb = job.global_batch // (lbs * st.dp)
    st.vpp = 1
  end
  local conv = v("model.converters")
  if conv == "quantize.linear.float8" then
    local recipe = v("quantize.linear.float8.recipe_name")
    st.precision = (recipe == "rowwise" or recipe == "rowwise_with_gw_hp") and "fp8:rowwise"
                   or "fp8:tensorwise"
    st.fp8_param_gather = v("quantize.linear.float8.enable_fsdp_float8_all_gather") == "true"
  elseif conv == "quantize.linear.mx" then
    st.precision = "fp8:mxfp8"
  end
  local mode, option = v("activation_checkpoint.mode"), v("activation_checkpoint.selective_ac_option")
  if main then mode = text:match("activation%-checkpoint:([%w%-]+)") or "selective" end
  if mode == nil then mode, option = "selective", "2" end  -- v0.2.2's defaults (job_config.py:652-655)
  local nth = option and math.tointeger(tonumber(option))
  if mode == "selective" and nth and opts.layers then
    st.layer_recompute = {}
    for i = 1, opts.layers + (opts.mtp or 0) do st.layer_recompute[i] = i % nth == 0 and "full" or "none" end
    st.recompute = "per_layer"
  else
    st.recompute = mode
    if mode == "selective" and not nth then st.selective_ops = export.copy(M.OP_SAC) end
  end
  return st, job
end

return M
