-- HyperParallel AutoModels train.yaml, the strategy part in the keys of its config classes
-- (prior-art-sapp-nd.md §1.2, §9.2): accelerator.{tp_size, pp_size, cp_size,
-- sequence_parallel}, fsdp_config.{dp_shard_size, reshard_after_forward},
-- training.{micro_batch_size, global_batch_size}, activation_checkpoint.mode. Merge it
-- into the run's train.yaml.
--
-- Dialect: the AutoModels schema (HyperParallel r2.0 dynamic graph, §2.9 of
-- models-and-trainers.md), not the legacy `train.accelerator` one.
--
-- What it can say: one recompute mode for the whole model (off, selective, full): a
-- per-layer plan rounds up to the strongest mode it uses. `accelerator.pipeline_scheduler`,
-- `pp_interleave_num` and `activation_checkpoint.layers` (SAPP-ND's resolved.yaml writes
-- them) are no fields of its config classes (issue 15), so the schedule is its 1F1B and
-- VPP rounds to 1. AutoModels has no replicate degree: every DP rank is an FSDP shard
-- (dp_shard_size = dp), parameters resharded after forward (ZeRO-3) unless
-- reshard_after_forward is false (ZeRO-2); ZeRO-0/1 round to 2. EP is a mesh axis of its
-- own there, not ranks borrowed from DP as ndplan prices it: plans with EP are refused.
-- The trainer drops MTP layers (§1.2). Precision is the model's torch_dtype (bf16 or fp16).
local export = require "ndplan.export"
local yaml = require "ndplan.io.yaml"

local M = {}

M.DIALECTS = {"r2.0"}
M.dialect = "hyperparallel r2.0 automodels train.yaml"
M.filename = "hyper_train.yaml"

local TO_FILE = {none = "off", selective = "selective", full = "full"}
local FROM_FILE = {off = "none", none = "none", selective = "selective", full = "full"}

function M.render(plan)
  local ctx, err = export.context(plan)
  if not ctx then return nil, err end
  local said, why, unsaid = export.copy(ctx.strategy), {}, {}
  if said.dp > 1 and said.zero < 2 then
    said.zero = 2
    why.zero = "every DP rank is an FSDP shard (dp_shard_size); ZeRO-2 keeps gathered parameters"
  end
  if export.quantized(said.precision) then
    said.precision = "bf16"
    why.precision = "torch_dtype is bfloat16 or float16: no FP8 or FP4 recipe"
  end
  if said.ep > 1 then
    return export.refuse("hyper", "EP is its own mesh axis in HyperParallel (issue 15), "
      .. "not ranks borrowed from DP as ndplan prices EP " .. said.ep)
  end
  if said.vpp > 1 then
    said.vpp, said.chunk_layers = 1, nil
    why.vpp = "no interleaved schedule: pp_interleave_num is no field of its config classes"
  end
  if said.pp > 1 and said.schedule ~= "1f1b" then
    said.schedule = "1f1b"
    why.schedule = "its pipeline runs 1F1B: pipeline_scheduler is no field of its config classes"
  end
  if not export.uniform_mode(said.layer_recompute) then  -- the strongest mode any layer uses
    local top = "none"
    for _, m in ipairs(said.layer_recompute) do
      if export.MODE_RANK[m] > export.MODE_RANK[top] then top = m end
    end
    for i = 1, #said.layer_recompute do said.layer_recompute[i] = top end
    why.recompute = "one activation_checkpoint.mode for the whole model (.layers is no field of "
      .. "its config classes); rounded up"
  end
  if ctx.mtp > 0 then
    unsaid[#unsaid + 1] = {field = "mtp_layers", plan = tostring(ctx.mtp),
                           why = "the AutoModels trainer drops MTP layers (prior-art §1.2)"}
  end
  export.no_offload(said, why, "the trainer runs no offload (prior-art §7.5)")
  local accelerator = {{"tp_size", said.tp}, {"pp_size", said.pp}, {"cp_size", said.cp}}
  accelerator[#accelerator + 1] = {"sequence_parallel", said.sp and said.tp > 1}
  local fsdp = {{"dp_shard_size", said.dp}}
  if said.dp > 1 and said.zero == 2 then fsdp[#fsdp + 1] = {"reshard_after_forward", false} end
  local model = {{"torch_dtype", said.precision == "fp16" and "float16" or "bfloat16"}}
  -- offsets over the body layers (MTP dropped): floor(L / pp) + offset per stage (§1.2)
  if said.vpp <= 1 and said.pp > 1 then
    local base, offset, uneven = ctx.layers // said.pp, {}, false
    for s = 1, said.pp do
      offset[s] = said.stage_layers[s] - (s == said.pp and ctx.mtp or 0) - base
      uneven = uneven or offset[s] ~= 0
    end
    if uneven then model[#model + 1] = {"offset", offset} end
  end
  local checkpoint = {{"mode", TO_FILE[said.layer_recompute[1] or "none"]}}
  local doc = {
    {comment = "HyperParallel train.yaml settings written by ndplan export (" .. M.dialect .. ")."},
    {comment = string.format("micro_batch_num = global_batch_size / (micro_batch_size x dp) = %d", said.mb)},
    {comment = "You still supply the model path, dataset, tokenizer, optimizer, schedule and checkpoints."},
    {"model", model, map = true},
    {"accelerator", accelerator, map = true},
    {"fsdp_config", fsdp, map = true},
    {"training", {{"micro_batch_size", said.mbs}, {"global_batch_size", ctx.job.global_batch}}, map = true},
    {"dataset", {{"data_transform", {{"max_seq_len", ctx.job.seq_len}}, map = true}}, map = true},
    {"activation_checkpoint", checkpoint, map = true},
  }
  local notes, rounded = export.finish(ctx, said, why, unsaid)
  return export.yaml(doc) .. "\n", notes, rounded
end

-- parse(text, {layers = body layers, mtp = MTP layers}) -> strategy, job (through
-- ndplan.yaml); stage_layers are body layers
function M.parse(text, opts)
  opts = opts or {}
  local doc, err = yaml.decode(text, opts.source or M.filename)
  if not doc then return nil, err end
  local acc, fsdp, training = doc.accelerator or {}, doc.fsdp_config or {}, doc.training or {}
  local model = doc.model or {}
  local st = {tp = acc.tp_size or 1, pp = acc.pp_size or 1, cp = acc.cp_size or 1,
              ep = acc.ep_size or 1, etp = acc.expert_tensor_parallel_degree or 1,
              vpp = acc.pp_interleave_num or 1, sp = acc.sequence_parallel or false,
              dp = fsdp.dp_shard_size or 1, mbs = training.micro_batch_size or 1,
              precision = model.torch_dtype == "float16" and "fp16" or "bf16"}
  st.zero = st.dp > 1 and (fsdp.reshard_after_forward == false and 2 or 3) or 0
  local job = {global_batch = training.global_batch_size,
               seq_len = ((doc.dataset or {}).data_transform or {}).max_seq_len}
  if job.global_batch then st.mb = job.global_batch // (st.mbs * st.dp) end
  local ac = doc.activation_checkpoint or {}
  local default = FROM_FILE[ac.mode or "off"]
  if opts.layers then
    local per = {}
    for i = 1, opts.layers + (opts.mtp or 0) do per[i] = default end
    for key, m in pairs(ac.layers or {}) do
      local a, b = tostring(key):match("^(%d+)%-(%d+)$")
      a = tonumber(a or key); b = tonumber(b or key)
      for i = a, b do per[i + 1] = FROM_FILE[m] end
    end
    st.layer_recompute = per
    st.recompute = export.uniform_mode(per) or "per_layer"
    if st.vpp <= 1 then
      st.stage_layers = {}
      for s = 1, st.pp do
        st.stage_layers[s] = opts.layers // st.pp + (type(model.offset) == "table" and model.offset[s] or 0)
      end
    end
  else
    st.recompute = next(ac.layers or {}) and "per_layer" or default
  end
  return st, job
end

return M
