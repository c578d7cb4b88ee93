-- HyperParallel AutoModels train.yaml, the strategy part as SAPP-ND's resolved.yaml writes
-- it (prior-art-sapp-nd.md §9.2; keys as its parser reads them, §1.2): accelerator.{tp_size,
-- pp_size, cp_size, ep_size, pp_interleave_num, sequence_parallel},
-- fsdp_config.dp_shard_size, training.{micro_batch_size, global_batch_size},
-- activation_checkpoint.{mode, layers}. Merge it into the run's train.yaml.
--
-- Dialect: the AutoModels schema (HyperParallel r2.0 dynamic graph, §2.9 of
-- models-and-trainers.md), not the legacy `train.accelerator` one.
--
-- What it can say: recompute per layer, exactly (mode plus a `layers` map of "i-j" ranges,
-- ties between full and selective going to full, §7.6). What it cannot: AutoModels has no
-- replicate degree, so every DP rank is an FSDP shard (dp_shard_size = dp): parameters are
-- resharded after forward (ZeRO-3) unless reshard_after_forward is false (ZeRO-2); ZeRO-0/1
-- round to 2. The trainer drops MTP layers (§1.2). Precision is the model's torch_dtype
-- (bf16 or fp16); GPipe, zero-bubble and DualPipe schedules round to 1F1B.
local export = require "ndplan.export"
local yaml = require "ndplan.yaml"

local M = {}

M.dialect = "hyperparallel automodels train.yaml (sapp-nd resolved.yaml)"
M.filename = "hyper_train.yaml"

local TO_FILE = {none = "off", selective = "selective", full = "full"}
local FROM_FILE = {off = "none", none = "none", selective = "selective", full = "full"}

-- trainer_plan(per) -> mode, {{"i-j", mode}} (§7.6: the default is the recomputing mode
-- most layers use, ties to full, off when none recomputes; ranges list the exceptions)
local function trainer_plan(per)
  local u = export.uniform_mode(per)
  if u then return TO_FILE[u], {} end
  local n = {none = 0, selective = 0, full = 0}
  for _, m in ipairs(per) do n[m] = n[m] + 1 end
  local default = n.full + n.selective == 0 and "none"
                  or n.full >= n.selective and "full" or "selective"
  local ranges, i = {}, 1
  while i <= #per do
    local j = i
    while j < #per and per[j + 1] == per[i] do j = j + 1 end
    if per[i] ~= default then
      ranges[#ranges + 1] = {i == j and tostring(i - 1) or (i - 1) .. "-" .. (j - 1), TO_FILE[per[i]]}
    end
    i = j + 1
  end
  return TO_FILE[default], ranges
end

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
  if said.pp > 1 and said.schedule ~= "1f1b" and said.schedule ~= "interleaved" then
    said.schedule = "1f1b"
    why.schedule = "pipeline_scheduler 1f1b (with pp_interleave_num for VPP)"
  end
  if ctx.mtp > 0 then
    unsaid[#unsaid + 1] = {field = "mtp_layers", plan = tostring(ctx.mtp),
                           why = "the AutoModels trainer drops MTP layers (prior-art §1.2)"}
  end
  export.no_offload(said, why, "the trainer runs no offload (prior-art §7.5)")
  local accelerator = {{"tp_size", said.tp}, {"pp_size", said.pp}, {"cp_size", said.cp},
                       {"ep_size", said.ep}}
  if said.etp > 1 then accelerator[#accelerator + 1] = {"expert_tensor_parallel_degree", said.etp} end
  if said.vpp > 1 then accelerator[#accelerator + 1] = {"pp_interleave_num", said.vpp} end
  accelerator[#accelerator + 1] = {"sequence_parallel", said.sp and said.tp > 1}
  if said.pp > 1 then accelerator[#accelerator + 1] = {"pipeline_scheduler", "1f1b"} end
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
  local mode, ranges = trainer_plan(said.layer_recompute)
  local checkpoint = {{"mode", mode}}
  if #ranges > 0 then checkpoint[#checkpoint + 1] = {"layers", ranges, map = true} end
  local doc = {
    {comment = "HyperParallel train.yaml settings written by ndplan export (" .. M.dialect .. ")."},
    {comment = string.format("micro_batch_num = global_batch_size / (micro_batch_size x dp) = %d", said.mb)},
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
