-- Megatron-LM / Megatron-Core launch flags (also read by MindSpeed-LLM): a bash fragment of
-- arrays in the shape of Megatron's own example scripts (models-and-trainers.md §2.2:
-- MODEL_ARGS, MODEL_PARALLEL_ARGS, TRAINING_ARGS, then `torchrun … pretrain_gpt.py`).
--
-- Dialect: the flag names of Megatron-LM at d98e8a6 (Aug 2026), the tree §2.2 was read
-- from. VPP is written as --num-layers-per-virtual-pipeline-stage, the form MindSpeed-LLM
-- also lists (§2.3), so one file serves both; the parser takes the newer
-- --num-virtual-stages-per-pipeline-rank too.
--
-- What Megatron cannot say (§2.2, §2.11): recompute is one granularity for the whole
-- model: selective everywhere, or full on every layer (uniform) or on the first N layers of
-- each stage (block). A per-layer plan is rounded up to the nearest of those that recomputes
-- at least as much as planned on every layer. GPipe, zero-bubble and DualPipe have no flag
-- (rounded to 1F1B); flash attention off has none either.
local export = require "ndplan.export"
local flags = require "ndplan.export.flags"
local script = require "ndplan.megatron_script"

local M = {}

M.dialect = "megatron-lm d98e8a6 (2026-08) flags; MindSpeed-LLM"
M.filename = "megatron_args.sh"

-- Nearest Megatron recompute for the plan's per-layer modes (see the header).
local function round_recompute(ctx, said)
  local per = said.layer_recompute
  local any_full, any = false, false
  for _, m in ipairs(per) do
    any_full = any_full or m == "full"
    any = any or m ~= "none"
  end
  if not any then return {} end
  local u = export.uniform_mode(per)
  if u == "selective" or not any_full then
    for i = 1, #per do per[i] = "selective" end
    return {"--recompute-granularity", "selective"}
  end
  -- block: N covers every recomputed layer of every group
  local _, touched = export.prefix_counts(ctx, said)
  local n = 0
  for _, t in ipairs(touched) do n = math.max(n, t) end
  local counts = {}
  for g = 1, #touched do counts[g] = n end
  local rounded = export.from_prefixes(ctx, said, counts)
  if export.uniform_mode(rounded) == "full" then
    for i = 1, #per do per[i] = "full" end
    return {"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", 1}
  end
  for i = 1, #per do per[i] = rounded[i] end
  return {"--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", n}
end

-- Layout flags for the body layers per stage: first/last when the middle is even,
-- otherwise the explicit --pipeline-model-parallel-layout (both §2.2).
local function layout_flags(ctx, st)
  if st.pp <= 1 or st.vpp > 1 then return {} end
  local body = export.copy(st.stage_layers)
  body[st.pp] = body[st.pp] - ctx.mtp
  local even = true
  for s = 2, st.pp do even = even and body[s] == body[1] end
  if even and ctx.mtp == 0 then return {} end
  local mid, ok = body[2], true
  for s = 2, st.pp - 1 do ok = ok and body[s] == mid end
  if ok then
    local out = {}
    if st.pp == 2 or body[1] ~= mid then
      out[#out + 1] = "--decoder-first-pipeline-num-layers"; out[#out + 1] = body[1]
    end
    if st.pp == 2 or body[st.pp] ~= mid then
      out[#out + 1] = "--decoder-last-pipeline-num-layers"; out[#out + 1] = body[st.pp]
    end
    if #out == 0 then return {} end
    return out
  end
  local stages = {}
  for s = 1, st.pp do
    stages[s] = (s == 1 and "E" or "") .. (body[s] > 0 and ("t*" .. body[s]) or "")
                .. (s == st.pp and (ctx.mtp > 0 and ("m*" .. ctx.mtp) or "") .. "L" or "")
  end
  return {"--pipeline-model-parallel-layout", table.concat(stages, "|")}
end

-- Megatron offloads the activations of whole layers (--cpu-offloading-num-layers, §2.2):
-- the plan's share of a stage's layers, rounded up; said.offload becomes what that keeps.
local function largest_group(ctx, st)
  local most = 0
  for _, g in ipairs(export.groups(ctx, st)) do most = math.max(most, g.count) end
  return most
end

local function offload_layers(ctx, said)
  local per = largest_group(ctx, said)
  local n = math.min(per, math.ceil(said.offload * per - 1e-9))
  said.offload = n / per
  return n
end

local function model_flags(ctx)
  local m = ctx.model
  if not m then return {"--num-layers", ctx.layers} end
  local s = m:spec()
  local out = {"--num-layers", s.num_layers, "--hidden-size", s.hidden_size,
               "--num-attention-heads", s.num_heads}
  local function add(...) for _, v in ipairs({...}) do out[#out + 1] = v end end
  if s.ffn_size and s.ffn_size > 0 then add("--ffn-hidden-size", s.ffn_size) end
  if s.kv_lora_rank and s.kv_lora_rank > 0 then
    add("--multi-latent-attention", "--q-lora-rank", s.q_lora_rank, "--kv-lora-rank", s.kv_lora_rank,
        "--qk-head-dim", s.qk_nope_head_dim, "--qk-pos-emb-head-dim", s.qk_rope_head_dim,
        "--v-head-dim", s.v_head_dim)
  elseif s.num_kv_heads and s.num_kv_heads < s.num_heads then
    add("--group-query-attention", "--num-query-groups", s.num_kv_heads)
  end
  if s.head_dim and s.head_dim > 0 and s.head_dim * s.num_heads ~= s.hidden_size
     and not (s.kv_lora_rank and s.kv_lora_rank > 0) then
    add("--kv-channels", s.head_dim)
  end
  if s.gated_mlp then add("--swiglu") end
  if s.norm == "rmsnorm" then add("--normalization", "RMSNorm") end
  if s.position == "rope" then add("--position-embedding-type", "rope") end
  if not s.tie_embeddings then add("--untie-embeddings-and-output-weights") end
  if not s.mlp_bias then add("--disable-bias-linear") end
  if s.qkv_bias then add("--add-qkv-bias") end
  if s.qk_norm then add("--qk-layernorm") end
  if s.num_experts and s.num_experts > 0 then
    add("--num-experts", s.num_experts, "--moe-router-topk", s.top_k,
        "--moe-ffn-hidden-size", s.moe_ffn_size)
    if s.shared_ffn_size and s.shared_ffn_size > 0 then
      add("--moe-shared-expert-intermediate-size", s.shared_ffn_size)
    end
    -- which layers are MoE, as the Python-list string §2.2 shows for first-k-dense
    local dense, moe = 0, 0
    for _, run in ipairs(m:layers()) do
      if not run.mtp then
        if run.kind:match("moe") then moe = moe + run.count else dense = dense + run.count end
      end
    end
    if dense > 0 then add("--moe-layer-freq", string.format("([0]*%d+[1]*%d)", dense, moe)) end
  end
  if ctx.mtp > 0 then add("--mtp-num-layers", ctx.mtp) end
  add("--max-position-embeddings", s.max_position)
  return out
end

local function array(name, list)
  local lines = {name .. "=("}
  local i = 1
  while i <= #list do
    local line = "    " .. flags.quote(list[i])
    while list[i + 1] ~= nil and not tostring(list[i + 1]):match("^%-%-") do
      i = i + 1
      line = line .. " " .. flags.quote(list[i])
    end
    lines[#lines + 1] = line
    i = i + 1
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

function M.render(plan)
  local ctx, err = export.context(plan)
  if not ctx then return nil, err end
  local st, said = ctx.strategy, export.copy(ctx.strategy)
  local why, unsaid = {}, {}
  if said.pp > 1 and said.schedule ~= "1f1b" and said.schedule ~= "interleaved" then
    said.schedule = "1f1b"
    why.schedule = "Megatron's flags choose 1F1B or, with VPP, interleaved 1F1B (§2.2)"
  end
  local recompute = round_recompute(ctx, said)
  why.offload = "Megatron offloads whole layers (--cpu-offloading-num-layers, §2.2); rounded up"
  why.recompute = "Megatron recomputes selectively everywhere, or fully on every layer or on the "
                  .. "first N layers of each stage (§2.2); rounded up"
  if not st.flash_attention then
    unsaid[#unsaid + 1] = {field = "flash_attention", plan = "false",
                           why = "no flag in §2.2; Megatron-Core uses fused attention"}
  end
  local parallel = {"--tensor-model-parallel-size", said.tp, "--pipeline-model-parallel-size", said.pp}
  local function add(list, ...) for _, v in ipairs({...}) do list[#list + 1] = v end end
  if said.vpp > 1 then add(parallel, "--num-layers-per-virtual-pipeline-stage", ctx.layers // (said.pp * said.vpp)) end
  for _, v in ipairs(layout_flags(ctx, said)) do parallel[#parallel + 1] = v end
  if said.sp and said.tp > 1 then add(parallel, "--sequence-parallel") end
  if said.cp > 1 then add(parallel, "--context-parallel-size", said.cp) end
  local moe = ctx.model and ctx.model:spec().num_experts > 0
  if moe or said.ep > 1 then
    add(parallel, "--expert-model-parallel-size", said.ep, "--expert-tensor-parallel-size", said.etp)
  end
  if said.dp > 1 and said.zero == 1 then add(parallel, "--use-distributed-optimizer")
  elseif said.dp > 1 and said.zero >= 2 then
    add(parallel, "--use-megatron-fsdp", "--data-parallel-sharding-strategy",
        said.zero == 2 and "optim_grads" or "optim_grads_params")
  end
  local training = {"--micro-batch-size", said.mbs, "--global-batch-size", ctx.job.global_batch,
                    "--seq-length", ctx.job.seq_len}
  if said.precision == "fp16" then add(training, "--fp16")  -- Megatron's fp16 switch [R]
  else add(training, "--bf16") end
  if said.precision == "fp8" then add(training, "--fp8-format", "hybrid") end
  for _, v in ipairs(recompute) do training[#training + 1] = v end
  if said.offload > 0 then
    add(training, "--cpu-offloading", "--cpu-offloading-num-layers", offload_layers(ctx, said))
  end
  local devices = ctx.job.devices or said.dp * said.tp * said.pp * said.cp
  local per_node = devices % 8 == 0 and 8 or devices
  local notes, rounded = export.finish(ctx, said, why, unsaid)
  local text = table.concat({
    "# Megatron-LM launch arguments written by ndplan export (" .. M.dialect .. ").",
    string.format("# %s on %d devices: dp %d = %d / (tp %d x pp %d x cp %d); %d micro-batches per step.",
                  ctx.model and ctx.model.name or "model", devices, said.dp, devices, said.tp,
                  said.pp, said.cp, said.mb),
    array("MODEL_ARGS", model_flags(ctx)),
    array("MODEL_PARALLEL_ARGS", parallel),
    array("TRAINING_ARGS", training),
    array("DISTRIBUTED_ARGS", {"--nproc-per-node", per_node, "--nnodes", devices // per_node}),
    "# torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py ${MODEL_ARGS[@]} ${MODEL_PARALLEL_ARGS[@]} ${TRAINING_ARGS[@]} ...",
    "",
  }, "\n")
  return text, notes, rounded
end

-- parse(text) -> strategy, job: what the flags say (stage_layers are body+MTP layers per
-- stage, as nd.estimate takes them)
function M.parse(text, source)
  local info, err = script.read(text, source or M.filename)
  if not info then return nil, err end
  local st, job = info.strategy, info.job
  st.vpp = st.vpp or 1
  if job.devices and job.global_batch and st.mbs then
    st.dp = job.devices // (st.tp * st.pp * st.cp)
    st.mb = job.global_batch // (st.dp * st.mbs)
  end
  st.recompute_block = nil
  local layers = info.shape.num_layers
  if st.offload and layers then  -- the share of the largest stage's layers offloaded
    local mtp = info.shape.mtp_layers
    local shape = {pp = st.pp, vpp = st.vpp,
                   stage_layers = st.stage_layers or export.even_layout(layers, mtp, st.pp)}
    st.offload = (st.offload_layers or 0) / largest_group({layers = layers, mtp = mtp}, shape)
  end
  st.offload_layers = nil
  st.offload = st.offload or 0
  return st, job
end

return M
