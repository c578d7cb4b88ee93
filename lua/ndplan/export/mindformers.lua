-- MindFormers static-graph YAML (r1.x, models-and-trainers.md §2.9; the keys SAPP-ND reads,
-- prior-art-sapp-nd.md §1.4): parallel_config, recompute_config, runner_config.batch_size,
-- model.model_config.{offset, pp_interleave_num}, parallel.enable_parallel_optimizer.
--
-- Dialect: r1.x static graph, still the common form; r2.0's dynamic-graph `parallelism:`
-- section is HyperParallel's (see ndplan.export.hyper).
--
-- What MindFormers can say: recompute and select_recompute take per-stage lists of layer
-- counts ("the first k layers of each stage", nested per interleave chunk), which is exact for
-- prefix plans; any other per-layer plan rounds up to the smallest such prefixes. The parallel
-- optimizer is one switch, priced as ZeRO-1: ZeRO-2/3 round to it. Precision is bf16 or fp16
-- (compute_dtype); GPipe, zero-bubble and DualPipe schedules round to 1F1B.
local export = require "ndplan.export"
local yaml = require "ndplan.yaml"

local M = {}

M.dialect = "mindformers r1.x static-graph yaml"
M.filename = "mindformers.yaml"

-- Per-stage counts as MindFormers nests them: a list per stage, or with interleaving one
-- list per chunk round of per-stage counts (groups are in model order: round c, stage s).
local function per_stage(counts, pp, vpp)
  if vpp <= 1 then return counts end
  local out = {}
  for c = 1, vpp do
    out[c] = {}
    for s = 1, pp do out[c][s] = counts[(c - 1) * pp + s] end
  end
  return out
end

local function flatten(v, pp, vpp)
  if type(v) ~= "table" then return nil end
  if type(v[1]) ~= "table" then return v end
  local out = {}
  for c = 1, vpp do for s = 1, pp do out[#out + 1] = v[c][s] end end
  return out
end

local function round_recompute(ctx, said)
  local u = export.uniform_mode(said.layer_recompute)
  if u == "full" then return true, false end
  if u == "selective" then return false, true end
  if u == "none" then return false, false end
  local full, touched = export.prefix_counts(ctx, said)
  local rounded = export.from_prefixes(ctx, said, full, touched)
  for i, m in ipairs(rounded) do said.layer_recompute[i] = m end
  return per_stage(full, said.pp, said.vpp), per_stage(touched, said.pp, said.vpp)
end

function M.render(plan)
  local ctx, err = export.context(plan)
  if not ctx then return nil, err end
  local said, why, unsaid = export.copy(ctx.strategy), {}, {}
  if said.dp > 1 and said.zero > 1 then
    said.zero = 1
    why.zero = "enable_parallel_optimizer is one switch (§2.9), priced as ZeRO-1"
  end
  if export.quantized(said.precision) then
    said.precision = "bf16"
    why.precision = "compute_dtype is bfloat16 or float16: no FP8 or FP4 recipe"
  end
  if said.pp > 1 and said.schedule ~= "1f1b" and said.schedule ~= "interleaved" then
    said.schedule = "1f1b"
    why.schedule = "the static-graph pipeline runs 1F1B, interleaved with pp_interleave_num"
  end
  local full, select = round_recompute(ctx, said)
  why.recompute = "recompute lists count the first layers of each stage (§2.9); rounded up"
  if said.etp > 1 then
    unsaid[#unsaid + 1] = {field = "etp", plan = tostring(said.etp), why = "no expert-TP key in §2.9"}
  end
  export.no_offload(said, why, "no activation offload key in §2.9")
  -- offsets: each stage holds floor(total / pp) + offset layers, MTP counted (§1.4, §10 of
  -- the prior art: DeepSeek-V3's [1 x 15, -1] over 61 + 1 layers)
  local total = ctx.layers + ctx.mtp
  local offset = 0
  if said.vpp > 1 then
    -- interleaved: one list of per-stage offsets per chunk round (pp_interleave_num), each
    -- chunk holding total // (pp x vpp) + its offset layers, MTP counted in the last chunk
    local base, n, uneven = total // (said.pp * said.vpp), said.pp * said.vpp, false
    local chunks = said.chunk_layers
    if not chunks then  -- the even chunks, MTP with the last
      chunks = {}
      for k = 1, n do chunks[k] = ctx.layers // n end
      chunks[n] = chunks[n] + ctx.layers % n + ctx.mtp
    end
    offset = {}
    for c = 1, said.vpp do
      offset[c] = {}
      for s = 1, said.pp do
        offset[c][s] = chunks[(c - 1) * said.pp + s] - base
        uneven = uneven or offset[c][s] ~= 0
      end
    end
    if not uneven then offset = 0 end
  else
    local base, uneven = total // said.pp, false
    offset = {}
    for s = 1, said.pp do
      offset[s] = said.stage_layers[s] - base
      uneven = uneven or offset[s] ~= 0
    end
    if not uneven then offset = 0 end
  end
  local model_config = {
    {"seq_length", ctx.job.seq_len}, {"num_layers", ctx.layers}, {"offset", offset},
    {"compute_dtype", said.precision == "fp16" and "float16" or "bfloat16"},
    {"use_flash_attention", said.flash_attention},
  }
  if ctx.mtp > 0 then table.insert(model_config, 3, {"mtp_depth", ctx.mtp}) end
  if said.vpp > 1 then model_config[#model_config + 1] = {"pp_interleave_num", said.vpp} end
  local parallel = {{"enable_parallel_optimizer", said.dp > 1 and said.zero >= 1}}
  if said.vpp > 1 then
    parallel[#parallel + 1] = {"pipeline_config", {{"pipeline_interleave", true}}, map = true}
  end
  local doc = {
    {comment = "MindFormers settings written by ndplan export (" .. M.dialect .. ")."},
    {comment = string.format("global batch %d = data_parallel x batch_size x micro_batch_num",
                             ctx.job.global_batch)},
    {"parallel", parallel, map = true},
    {"parallel_config", {
      {"data_parallel", said.dp}, {"model_parallel", said.tp}, {"pipeline_stage", said.pp},
      {"context_parallel", said.cp}, {"expert_parallel", said.ep},
      {"use_seq_parallel", said.sp and said.tp > 1}, {"micro_batch_num", said.mb},
    }, map = true},
    {"runner_config", {{"batch_size", said.mbs}}, map = true},
    {"model", {{"model_config", model_config, map = true}}, map = true},
    {"recompute_config", {{"recompute", full}, {"select_recompute", select}}, map = true},
  }
  local notes, rounded = export.finish(ctx, said, why, unsaid)
  return export.yaml(doc) .. "\n", notes, rounded
end

-- parse(text) -> strategy, job (through ndplan.yaml); stage_layers are body layers
function M.parse(text, opts)
  local doc, err = yaml.decode(text, (opts and opts.source) or M.filename)
  if not doc then return nil, err end
  local pc, mc = doc.parallel_config or {}, ((doc.model or {}).model_config or {})
  local st = {dp = pc.data_parallel, tp = pc.model_parallel, pp = pc.pipeline_stage,
              cp = pc.context_parallel, ep = pc.expert_parallel, sp = pc.use_seq_parallel,
              mb = pc.micro_batch_num, mbs = (doc.runner_config or {}).batch_size,
              vpp = mc.pp_interleave_num or 1, flash_attention = mc.use_flash_attention,
              zero = (doc.parallel or {}).enable_parallel_optimizer and 1 or 0,
              precision = mc.compute_dtype == "float16" and "fp16" or "bf16"}
  local job = {seq_len = mc.seq_length}
  if st.dp and st.mbs and st.mb then job.global_batch = st.dp * st.mbs * st.mb end
  local layers, mtp = mc.num_layers, mc.mtp_depth or 0
  if not (layers and st.pp) then return st, job end
  local total = layers + mtp
  local stages, chunks = {}, nil
  if st.vpp > 1 and type(mc.offset) == "table" and type(mc.offset[1]) == "table" then
    chunks = {}  -- per chunk round, per stage (body+MTP)
    local base = total // (st.pp * st.vpp)
    for c = 1, st.vpp do
      for s = 1, st.pp do
        local k = (c - 1) * st.pp + s
        chunks[k] = base + (mc.offset[c] and mc.offset[c][s] or 0)
        stages[s] = (stages[s] or 0) + chunks[k]
      end
    end
  else
    for s = 1, st.pp do
      stages[s] = total // st.pp + (type(mc.offset) == "table" and mc.offset[s] or mc.offset or 0)
    end
  end
  local ctx = {layers = layers, mtp = mtp}
  local shape = {pp = st.pp, vpp = st.vpp, stage_layers = stages, chunk_layers = chunks}
  local rc = doc.recompute_config or {}
  local groups = #export.groups(ctx, shape)
  local function counts(v)
    local flat = flatten(v, st.pp, st.vpp)
    local out = {}
    for g = 1, groups do out[g] = flat and flat[g] or (v == true and 1e9 or 0) end
    return out
  end
  st.layer_recompute = export.from_prefixes(ctx, shape, counts(rc.recompute), counts(rc.select_recompute))
  st.recompute = export.uniform_mode(st.layer_recompute) or "per_layer"
  if st.vpp <= 1 then
    st.stage_layers = stages
    stages[st.pp] = stages[st.pp] - mtp
  elseif chunks then  -- body layers per chunk
    st.stage_layers = export.copy(chunks)
    st.stage_layers[#chunks] = st.stage_layers[#chunks] - mtp
  end
  return st, job
end

return M
