-- torchtitan `--section.option` overrides (models-and-trainers.md §2.5). torchtitan retired
-- its TOML configs for Python config-registry functions in Feb 2026 (#2386, after v0.2.2);
-- the `--section.option` flags of v0.2.2's job_config were frozen and still work on main,
-- so this writes those flags (as a bash array to append to run_train.sh's command line).
--
-- What torchtitan cannot say: data parallelism is FSDP (ZeRO-3, or ZeRO-2-like with
-- fsdp_reshard_after_forward = "never") or plain replication (ZeRO-0): ZeRO-1 rounds to
-- ZeRO-2, and so does ZeRO-0 with EP (EP borrows the FSDP ranks). Activation offload has no
-- option (rounds to none); MTP layers are not trained [R]. Activation checkpointing is none, selective (op level) or full, or full on
-- every nth layer: a per-layer plan rounds up to one of those. TP always shards the norms
-- along the sequence (torchtitan's TP plan applies sequence parallelism [R]), so sp off
-- rounds to on. Schedules: 1F1B, Interleaved1F1B (§2.5), GPipe [R]; zero-bubble and DualPipe
-- round to 1F1B.
local export = require "ndplan.export"
local flags = require "ndplan.export.flags"

local M = {}

M.dialect = "torchtitan v0.2.2 job_config flags (TOML retired Feb 2026, #2386; flags frozen)"
M.filename = "torchtitan_args.sh"

local SCHEDULE = {["1f1b"] = "1F1B", interleaved = "Interleaved1F1B", gpipe = "GPipe"}

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

-- torchtitan's split (pipeline_parallel_layers_per_stage, _first/_last_stage_less_layers):
-- every pipeline stage it builds (a model chunk, pp x vpp of them) holds layers_per_stage
-- decoder layers, the first and the last that many fewer; the body layers per chunk of the
-- plan, or the nearest such form holding the same layers (said's layout becomes it).
local function layout(ctx, said)
  if said.pp <= 1 then return nil end
  local chunked = said.vpp > 1
  local body = export.copy(chunked and said.chunk_layers or said.stage_layers)
  if not body then  -- vpp > 1 without chunk sizes: the even split
    body = {}
    for k = 1, said.pp * said.vpp do body[k] = ctx.layers // (said.pp * said.vpp) end
    body[#body] = ctx.layers - (#body - 1) * body[1]
  else
    body[#body] = body[#body] - ctx.mtp
  end
  local n = #body
  local mid = n > 2 and body[2] or math.max(body[1], body[n])
  local ok = body[1] <= mid and body[n] <= mid
  for k = 2, n - 1 do ok = ok and body[k] == mid end
  if not ok then  -- nearest first/middle/last form holding the same layers
    mid = -(-ctx.layers // n)
    local short = mid * n - ctx.layers
    for k = 1, n do body[k] = mid end
    body[n] = mid - (short - short // 2)
    body[1] = mid - short // 2
    local sizes = export.copy(body)
    sizes[n] = sizes[n] + ctx.mtp
    if chunked then
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
  return mid, mid - body[1], mid - body[n]
end

function M.render(plan)
  local ctx, err = export.context(plan)
  if not ctx then return nil, err end
  local said, why, unsaid = export.copy(ctx.strategy), {}, {}
  local args = {}
  local function add(k, v) args[#args + 1] = "--" .. k; args[#args + 1] = v end
  -- batch: the local batch is one DP rank's share; with PP it is cut into micro-batches
  local pp = said.pp > 1
  add("training.local_batch_size", pp and said.mbs * said.mb or said.mbs)
  add("training.global_batch_size", ctx.job.global_batch)
  add("training.seq_len", ctx.job.seq_len)
  if said.dp > 1 and said.zero == 0 and said.ep > 1 then
    said.zero = 2
    why.zero = "EP borrows its ranks from the FSDP dimension (§2.5), so DP must shard"
  end
  if said.dp > 1 and said.zero == 0 then
    add("parallelism.data_parallel_replicate_degree", said.dp)
    add("parallelism.data_parallel_shard_degree", 1)
  else
    if said.dp > 1 and said.zero == 1 then
      said.zero = 2
      why.zero = "FSDP shards gradients with the optimizer states (§2.5)"
    end
    add("parallelism.data_parallel_replicate_degree", 1)
    add("parallelism.data_parallel_shard_degree", said.dp)
    if said.dp > 1 then
      add("parallelism.fsdp_reshard_after_forward", said.zero == 3 and "always" or "never")
    end
  end
  add("parallelism.tensor_parallel_degree", said.tp)
  if said.tp > 1 and not said.sp then
    said.sp = true
    why.sp = "torchtitan's TP plan always shards norms along the sequence [R]"
  end
  add("parallelism.context_parallel_degree", said.cp)
  if said.ep > 1 or said.etp > 1 then
    add("parallelism.expert_parallel_degree", said.ep)
    add("parallelism.expert_tensor_parallel_degree", said.etp)
  end
  if pp then
    add("parallelism.pipeline_parallel_degree", said.pp)
    if not SCHEDULE[said.schedule] then
      said.schedule = "1f1b"
      why.schedule = "written are 1F1B, Interleaved1F1B (§2.5) and GPipe [R]; others round to 1F1B"
    end
    add("parallelism.pipeline_parallel_schedule", SCHEDULE[said.schedule])
    add("parallelism.pipeline_parallel_microbatch_size", said.mbs)
    local per, first_less, last_less = layout(ctx, said)
    why.stage_layers = "torchtitan states layers per (virtual) stage and how many fewer the "
      .. "first and last hold"
    add("parallelism.pipeline_parallel_layers_per_stage", per)
    -- torchtitan's defaults are 1 and 1 (its embedding/loss accounting): always written
    add("parallelism.pipeline_parallel_first_stage_less_layers", first_less)
    add("parallelism.pipeline_parallel_last_stage_less_layers", last_less)
  end
  local mode, nth = round_recompute(said)
  why.recompute = "torchtitan checkpoints all layers alike, or every nth layer (§2.11); rounded up"
  add("activation_checkpoint.mode", mode)
  if mode == "selective" then add("activation_checkpoint.selective_ac_option", nth and tostring(nth) or "op") end
  export.no_offload(said, why, "training.enable_cpu_offload moves parameters and optimizer, not activations")
  M.precision(said, why, unsaid, add)
  if ctx.mtp > 0 then
    unsaid[#unsaid + 1] = {field = "mtp_layers", plan = tostring(ctx.mtp),
                           why = "the MTP layers are not part of a torchtitan model definition [R]"}
  end
  local notes, rounded = export.finish(ctx, said, why, unsaid)
  local lines = {"# torchtitan overrides written by ndplan export (" .. M.dialect .. ").",
                 string.format("# NGPU must equal the product of the degrees: %d.", said.dp * said.tp * said.pp * said.cp),
                 "NGPU=" .. (said.dp * said.tp * said.pp * said.cp),
                 "TORCHTITAN_ARGS=("}
  for i = 1, #args, 2 do lines[#lines + 1] = "    " .. args[i] .. " " .. flags.quote(args[i + 1]) end
  lines[#lines + 1] = ")"
  lines[#lines + 1] = "# NGPU=$NGPU ./run_train.sh ${TORCHTITAN_ARGS[@]}"
  return table.concat(lines, "\n") .. "\n", notes, rounded
end

-- torchtitan's low-precision converters (job_config Float8 and MX): `float8` (torchao:
-- tensorwise by default, float8.recipe_name rowwise or rowwise_with_gw_hp) and `mx`
-- (mx.recipe_name mxfp8); float8.enable_fsdp_float8_all_gather all-gathers FSDP
-- parameters in float8 (tensorwise), with precompute_float8_dynamic_scale_for_fsdp.
-- Delayed scaling, blockwise FP8 and NVFP4 have no converter; filter_fqns matches module
-- names as substrings ("layers.1" also matches "layers.10"), so BF16 layers at the ends
-- cannot be listed; the output head is filtered, as ndplan keeps it in BF16.
local TORCHAO = {["fp8:tensorwise"] = {"float8"}, ["fp8:rowwise"] = {"float8", "rowwise"},
                 ["fp8:mxfp8"] = {"mx", "mxfp8"}}
local ROUND = {["fp8:delayed"] = {"fp8:tensorwise", "torchao has no delayed scaling; its float8 "
                                  .. "default is tensorwise (current) scaling"},
               ["fp8:blockwise"] = {"fp8:rowwise", "torchao's float8 recipes are tensorwise, "
                                    .. "rowwise and rowwise_with_gw_hp: the per-row scales are "
                                    .. "the nearest to 1x128 blocks"},
               nvfp4 = {"bf16", "no torchtitan converter trains in NVFP4 (float8 and mx only)"}}

function M.precision(said, why, unsaid, add)
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
  add("model.converters", c[1])
  unsaid[#unsaid + 1] = {field = "quant_cache", plan = "the recipe's quantized weight copies",
    why = "torchao casts the weights on each use and keeps no copy: price it with --costs quant_cache=0"}
  if c[1] == "float8" then
    if c[2] then add("float8.recipe_name", c[2]) end
    add("float8.filter_fqns", "output")
  else
    add("mx.recipe_name", c[2])
  end
  if said.fp8_param_gather and not (c[1] == "float8" and not c[2] and said.zero >= 3) then
    said.fp8_param_gather = false
    why.fp8_param_gather = "float8 all-gather is FSDP's (ZeRO-3) with tensorwise scaling only"
  end
  if said.fp8_param_gather then
    add("float8.enable_fsdp_float8_all_gather", "true")
    add("float8.precompute_float8_dynamic_scale_for_fsdp", "true")
  end
  if said.bf16_first_layers + said.bf16_last_layers > 0 then
    said.bf16_first_layers, said.bf16_last_layers = 0, 0
    why.bf16_first_layers = "filter_fqns matches module names as substrings: layer ranges cannot be listed"
    why.bf16_last_layers = why.bf16_first_layers
  end
end


-- parse(text, {layers = body layers}) -> strategy, job (stage_layers are body layers per
-- stage, or per chunk with VPP)
function M.parse(text, opts)
  opts = opts or {}
  local parsed, err = flags.parse(text, opts.source or M.filename)
  if not parsed then return nil, err end
  local function v(k) local o = parsed.last["--" .. k:gsub("_", "-")]; return o and o.values[1] end
  local function n(k) return math.tointeger(tonumber(v(k))) end
  local st = {tp = n("parallelism.tensor_parallel_degree") or 1,
              cp = n("parallelism.context_parallel_degree") or 1,
              pp = n("parallelism.pipeline_parallel_degree") or 1,
              ep = n("parallelism.expert_parallel_degree") or 1,
              etp = n("parallelism.expert_tensor_parallel_degree") or 1}
  local replicate, shard = n("parallelism.data_parallel_replicate_degree") or 1,
                           n("parallelism.data_parallel_shard_degree") or 1
  st.dp = replicate * shard
  st.zero = shard > 1 and (v("parallelism.fsdp_reshard_after_forward") == "never" and 2 or 3) or 0
  st.sp = st.tp > 1
  local job = {global_batch = n("training.global_batch_size"), seq_len = n("training.seq_len")}
  local lbs = n("training.local_batch_size")
  if st.pp > 1 then
    st.mbs = n("parallelism.pipeline_parallel_microbatch_size")
    st.mb = lbs // st.mbs
    local schedule = v("parallelism.pipeline_parallel_schedule")
    for k, name in pairs(SCHEDULE) do if name == schedule then st.schedule = k end end
    local per = n("parallelism.pipeline_parallel_layers_per_stage")
    -- torchtitan's defaults: one layer fewer on the first and on the last stage
    local fl = n("parallelism.pipeline_parallel_first_stage_less_layers") or 1
    local ll = n("parallelism.pipeline_parallel_last_stage_less_layers") or 1
    if per and per > 0 then
      local chunks = (st.schedule == "interleaved" and opts.layers)
                     and (opts.layers + fl + ll) // per or st.pp
      st.vpp = math.max(1, chunks // st.pp)
      st.stage_layers = {}  -- body layers per stage (vpp 1) or per chunk
      for k = 1, st.pp * st.vpp do st.stage_layers[k] = per end
      st.stage_layers[1] = per - fl
      st.stage_layers[#st.stage_layers] = st.stage_layers[#st.stage_layers] - ll
    end
  else
    st.mbs = lbs
    st.mb = job.global_batch // (lbs * st.dp)
    st.vpp = 1
  end
  local conv = v("model.converters")
  if conv == "float8" then
    local recipe = v("float8.recipe_name")
    st.precision = (recipe == "rowwise" or recipe == "rowwise_with_gw_hp") and "fp8:rowwise"
                   or "fp8:tensorwise"
    st.fp8_param_gather = v("float8.enable_fsdp_float8_all_gather") == "true"
  elseif conv == "mx" then
    st.precision = "fp8:mxfp8"
  end
  local mode, option = v("activation_checkpoint.mode"), v("activation_checkpoint.selective_ac_option")
  local nth = option and math.tointeger(tonumber(option))
  if mode == "selective" and nth and opts.layers then
    st.layer_recompute = {}
    for i = 1, opts.layers + (opts.mtp or 0) do st.layer_recompute[i] = i % nth == 0 and "full" or "none" end
    st.recompute = "per_layer"
  else
    st.recompute = mode
  end
  return st, job
end

return M
