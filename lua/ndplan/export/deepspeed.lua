-- DeepSpeed ds_config.json (models-and-trainers.md §2.6): batch, ZeRO stage, precision,
-- AutoTP and activation checkpointing.
--
-- Dialect: DeepSpeed >= 0.16.4, the first release whose JSON takes
-- "tensor_parallel": {"autotp_size": N} for training (§2.6).
--
-- What the file cannot say: pipeline stages are set in code (PipelineModule(num_stages=…)),
-- Ulysses sequence parallelism and expert parallelism by the model code or Megatron-DeepSpeed
-- flags, so pp, cp and ep are reported as not in the file. Recompute is all or nothing
-- (§2.11): selective and per-layer plans round up to full. The activation_checkpointing
-- section acts only where the model calls deepspeed.checkpointing (Megatron-DeepSpeed); a
-- Hugging Face model needs the Trainer's gradient_checkpointing on as well (§2.6). AutoTP does not split activations
-- along the sequence (sp rounds to off) and does not combine with ZeRO-3 (stage rounds to 2).
local export = require "ndplan.export"
local json = require "ndplan.json"

local M = {}

M.dialect = "deepspeed >= 0.16.4 ds_config.json"
M.filename = "ds_config.json"

-- An ordered JSON writer: {{key, value}, ...} objects keep their order, for people to read.
local function encode(v, indent)
  indent = indent or ""
  if type(v) == "table" and v.object then
    local inner, parts = indent .. "  ", {}
    for _, kv in ipairs(v.object) do
      parts[#parts + 1] = inner .. json.encode(kv[1]) .. ": " .. encode(kv[2], inner)
    end
    return "{\n" .. table.concat(parts, ",\n") .. "\n" .. indent .. "}"
  end
  return json.encode(v)
end

local function object(...) return {object = {...}} end

function M.render(plan)
  local ctx, err = export.context(plan)
  if not ctx then return nil, err end
  local said, why, unsaid = export.copy(ctx.strategy), {}, {}
  if said.tp > 1 and said.zero == 3 then
    said.zero = 2
    why.zero = "AutoTP works with ZeRO 0, 1 and 2, not 3 (§2.6)"
  end
  if said.tp > 1 and said.sp then
    said.sp = false
    why.sp = "AutoTP has no sequence parallelism (§2.6)"
  end
  if export.quantized(said.precision) then
    said.precision = "bf16"
    why.precision = "ds_config has bf16 and fp16 sections only (§2.6): no FP8 or FP4 recipe"
  end
  local any = false
  for _, m in ipairs(said.layer_recompute) do any = any or m ~= "none" end
  -- cpu_checkpointing moves every checkpoint to the host: all of the share or nothing
  if said.offload > 0 and any and said.offload < 1 then
    said.offload = 1
    why.offload = "cpu_checkpointing moves every checkpoint to the host (§2.6)"
  elseif said.offload > 0 and not any then
    export.no_offload(said, why, "cpu_checkpointing needs activation checkpointing (§2.6)")
  end
  for i = 1, #said.layer_recompute do said.layer_recompute[i] = any and "full" or "none" end
  why.recompute = "activation checkpointing is all or nothing (§2.6, §2.11); rounded up"
  for _, k in ipairs({"pp", "cp", "ep"}) do
    if said[k] > 1 then
      unsaid[#unsaid + 1] = {field = k, plan = tostring(said[k]), why = ({
        pp = "pipeline stages are set in code, PipelineModule(num_stages=…) (§2.6)",
        cp = "Ulysses is Megatron-DeepSpeed's --ds-sequence-parallel-size (§2.6)",
        ep = "expert parallelism is set in the model code"})[k]}
    end
  end
  if said.vpp > 1 then
    unsaid[#unsaid + 1] = {field = "vpp", plan = tostring(said.vpp), why = "no interleaved schedule in ds_config"}
  end
  local doc = {
    {"train_batch_size", ctx.job.global_batch},
    {"train_micro_batch_size_per_gpu", said.mbs},
    {"gradient_accumulation_steps", said.mb},
    {said.precision == "fp16" and "fp16" or "bf16", object({"enabled", true})},
    {"zero_optimization", object({"stage", said.dp > 1 and said.zero or 0}, {"overlap_comm", true},
                                 {"contiguous_gradients", true})},
  }
  if said.tp > 1 then doc[#doc + 1] = {"tensor_parallel", object({"autotp_size", said.tp})} end
  if any then
    doc[#doc + 1] = {"activation_checkpointing", object(
      {"partition_activations", false}, {"cpu_checkpointing", said.offload > 0},
      {"contiguous_memory_optimization", false}, {"number_checkpoints", ctx.layers},
      {"synchronize_checkpoint_boundary", false}, {"profile", false})}
  end
  local notes, rounded = export.finish(ctx, said, why, unsaid)
  return encode({object = doc}) .. "\n", notes, rounded
end

-- parse(text) -> strategy, job (through ndplan.json)
function M.parse(text, opts)
  local doc, err = json.decode(text, (opts and opts.source) or M.filename)
  if not doc then return nil, err end
  local st = {mbs = doc.train_micro_batch_size_per_gpu, mb = doc.gradient_accumulation_steps,
              zero = doc.zero_optimization and doc.zero_optimization.stage or 0,
              tp = doc.tensor_parallel and doc.tensor_parallel.autotp_size or 1, sp = false,
              precision = doc.fp16 and doc.fp16.enabled and "fp16"
                          or doc.bf16 and doc.bf16.enabled and "bf16" or nil,
              recompute = doc.activation_checkpointing and "full" or "none",
              offload = doc.activation_checkpointing and doc.activation_checkpointing.cpu_checkpointing and 1 or 0}
  local job = {global_batch = doc.train_batch_size}
  if job.global_batch and st.mbs and st.mb then st.dp = job.global_batch // (st.mbs * st.mb) end
  return st, job
end

return M
