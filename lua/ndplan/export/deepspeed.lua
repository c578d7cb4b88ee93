-- DeepSpeed ds_config.json (models-and-trainers.md §2.6): batch, ZeRO stage, precision,
-- AutoTP, AutoEP, Ulysses and activation checkpointing. Strict JSON (a file DeepSpeed loads
-- with json.load): what the user must do in code is in the notes, not in the file.
--
-- Dialects: 0.19.6 (AutoEP, AutoTP with ZeRO-3) and 0.16.4 (the first with AutoTP training).
--
-- The batch is written as DeepSpeed checks it (see ds_world): with AutoTP and no mpu every
-- rank counts, so train_batch_size is the plan's global batch x autotp_size. What the file
-- cannot say: pipeline stages are set in code (PipelineModule(num_stages=…)), and ZeRO-2/3
-- with them round to ZeRO-1 (runtime/pipe/engine.py:76); AutoTP with pipeline stages is
-- refused; EP is AutoEP's (TP = 1) or else set in the model code. Recompute is all or
-- nothing (§2.11): selective and per-layer plans round up to full, and the
-- activation_checkpointing section only configures deepspeed.checkpointing: the model must
-- turn recompute on (a note says how). AutoTP does not split activations along the sequence
-- (sp rounds to off).
local export = require "ndplan.export"
local json = require "ndplan.io.json"

local M = {}

-- Dialects, newest first: 0.19.6 adds AutoEP (the expert_parallel section,
-- deepspeed/module_inject/auto_ep_config.py:41-49); 0.16.4 is the first with AutoTP training.
M.DIALECTS = {"0.19.6", "0.16.4"}
M.dialect = "deepspeed 0.19.6 ds_config.json (AutoTP, AutoEP)"
M.filename = "ds_config.json"

local function dialect_label(d)
  return d == "0.16.4" and "deepspeed >= 0.16.4 ds_config.json (AutoTP)" or M.dialect
end

-- ds_world(st, devices) -> the world size DeepSpeed's batch assertion counts
-- (train_batch_size == micro x GAS x world, runtime/config.py:937): a PipelineModule brings
-- its topology as mpu (deepspeed/__init__.py:243-244), whose DP size is world / pp
-- (runtime/pipe/topology.py:240); without mpu every rank counts (runtime/config.py:724),
-- or world / sequence_parallel_size with Ulysses (722).
function M.ds_world(st, devices)
  if st.pp > 1 then return devices // st.pp end
  if st.cp > 1 then return devices // st.cp end
  return devices
end

-- Objects keep their members' order, one per line, for people to read (ndplan.io.json).
local function object(...) return json.object({...}) end

function M.render(plan, opts)
  local ctx, err = export.context(plan)
  if not ctx then return nil, err end
  local dialect = opts and opts.dialect or M.DIALECTS[1]
  local said, why, unsaid = export.copy(ctx.strategy), {}, {}
  if said.pp > 1 and said.tp > 1 then
    return export.refuse("deepspeed", "a PipelineModule brings its own topology as mpu "
      .. "(deepspeed/__init__.py:243-244) and AutoTP is configured for a model without one: "
      .. "ds_config cannot state tp with pp (Megatron-DeepSpeed can, with its own flags)")
  end
  if said.cp > 1 and (said.tp > 1 or said.pp > 1) then
    return export.refuse("deepspeed", "Ulysses sequence parallelism (sequence_parallel_size) "
      .. "is stated for a model without AutoTP or pipeline stages")
  end
  if said.pp > 1 and said.dp > 1 and said.zero >= 2 then
    said.zero = 1
    why.zero = "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism (runtime/pipe/engine.py:76)"
  end
  if said.tp > 1 and said.zero == 3 and dialect == "0.16.4" then
    said.zero = 2
    why.zero = "AutoTP works with ZeRO 0, 1 and 2, not 3, before 0.19 (§2.6; 0.19.6 supports "
      .. "it, runtime/engine.py:666)"
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
  if any then
    unsaid[#unsaid + 1] = {field = "recompute", plan = "on",
      why = "ds_config's activation_checkpointing only configures deepspeed.checkpointing: turn "
            .. "recompute on in the model (model.gradient_checkpointing_enable() for a Hugging "
            .. "Face model, or deepspeed.checkpointing.checkpoint around each layer)"}
  end
  local autoep = said.ep > 1 and said.tp == 1 and dialect ~= "0.16.4"
  if said.ep > 1 and not autoep then
    unsaid[#unsaid + 1] = {field = "ep", plan = tostring(said.ep), why = dialect == "0.16.4"
      and "no AutoEP before 0.19.6: expert parallelism is set in the model code"
      or "AutoEP refuses tensor parallelism from mpu (runtime/engine.py:586-590): set EP in the model code"}
  end
  if said.pp > 1 then
    unsaid[#unsaid + 1] = {field = "pp", plan = tostring(said.pp),
      why = "pipeline stages are set in code, PipelineModule(num_stages=" .. said.pp .. ") (§2.6)"}
  end
  if said.cp > 1 then
    unsaid[#unsaid + 1] = {field = "cp", plan = tostring(said.cp),
      why = "sequence_parallel_size is Ulysses (all-to-all over heads), priced here as ndplan's CP"}
  end
  if said.vpp > 1 then
    unsaid[#unsaid + 1] = {field = "vpp", plan = tostring(said.vpp), why = "no interleaved schedule in ds_config"}
  end
  local devices = ctx.job.devices or said.dp * said.tp * said.pp * said.cp
  local per_node = require("ndplan.export.megatron").node_size(ctx, devices)
  unsaid[#unsaid + 1] = {field = "launch", plan = string.format("%d nodes x %d GPUs", devices // per_node, per_node),
    why = string.format("JSON holds no header: deepspeed --hostfile HOSTS --num_nodes %d --num_gpus %d "
                        .. "YOUR_TRAIN.py --deepspeed_config ds_config.json; you supply the model, data, "
                        .. "optimizer and scheduler sections", devices // per_node, per_node)}
  local world = M.ds_world(said, devices)
  local train_batch = said.mbs * said.mb * world
  if train_batch ~= ctx.job.global_batch then
    unsaid[#unsaid + 1] = {field = "global_batch", plan = tostring(ctx.job.global_batch),
      why = string.format("DeepSpeed's batch check counts all %d ranks without an mpu "
        .. "(runtime/config.py:724, 937): train_batch_size %d = micro %d x GAS %d x %d; each "
        .. "AutoTP group of %d trains one copy, so a step trains the plan's %d samples",
        world, train_batch, said.mbs, said.mb, world, said.tp, ctx.job.global_batch)}
  end
  local doc = {
    {"train_batch_size", train_batch},
    {"train_micro_batch_size_per_gpu", said.mbs},
    {"gradient_accumulation_steps", said.mb},
    {said.precision == "fp16" and "fp16" or "bf16", object({"enabled", true})},
    {"zero_optimization", object({"stage", said.dp > 1 and said.zero or 0}, {"overlap_comm", true},
                                 {"contiguous_gradients", true})},
  }
  if said.tp > 1 then doc[#doc + 1] = {"tensor_parallel", object({"autotp_size", said.tp})} end
  if said.cp > 1 then doc[#doc + 1] = {"sequence_parallel_size", said.cp} end
  if autoep then
    doc[#doc + 1] = {"expert_parallel", object({"enabled", true}, {"autoep_size", said.ep})}
  end
  if any then
    doc[#doc + 1] = {"activation_checkpointing", object(
      {"partition_activations", false}, {"cpu_checkpointing", said.offload > 0},
      {"contiguous_memory_optimization", false}, {"number_checkpoints", ctx.layers},
      {"synchronize_checkpoint_boundary", false}, {"profile", false})}
  end
  local notes, rounded = export.finish(ctx, said, why, unsaid)
  return json.encode(json.object(doc), {indent = "  "}) .. "\n", notes, rounded,
         {dialect = dialect_label(dialect)}
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
  st.cp = doc.sequence_parallel_size or 1
  local ep = doc.expert_parallel
  st.ep = ep and ep.enabled and ep.autoep_size or 1
  -- DeepSpeed's batch (runtime/config.py:937): train_batch_size = micro x GAS x the world it
  -- counts; opts.devices and opts.pp (set in code) give the plan's DP and global batch
  local job = {train_batch_size = doc.train_batch_size}
  local devices, pp = opts and opts.devices, opts and opts.pp or 1
  st.pp = pp
  if doc.train_batch_size and st.mbs and st.mb then
    local world = doc.train_batch_size // (st.mbs * st.mb)
    job.ds_world = world
    if devices then
      st.dp = devices // (st.tp * st.pp * st.cp)
      job.global_batch = st.mbs * st.mb * st.dp
      job.devices = devices
    elseif st.tp == 1 then
      st.dp = world
      job.global_batch = doc.train_batch_size
    end
  end
  return st, job
end

return M
