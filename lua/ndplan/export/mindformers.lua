-- MindFormers static-graph YAML (models-and-trainers.md §2.9; the keys SAPP-ND reads,
-- prior-art-sapp-nd.md §1.4): parallel_config, recompute_config (op patterns),
-- runner_config.{batch_size, gradient_accumulation_steps}, model.model_config.{type,
-- offset, pp_interleave_num, the shape}, model.arch, parallel.{full_batch,
-- dataset_strategy, enable_parallel_optimizer}, with the msrun launch line. A model without
-- a MindFormers class is refused.
--
-- Dialects (see DIALECTS): r1.5 (legacy) and 1.7's mcore form; r2.0's dynamic-graph
-- `parallelism:` section is HyperParallel's (see ndplan.export.hyper).
--
-- What MindFormers can say: recompute and select_recompute take per-stage lists of layer
-- counts ("the first k layers of each stage", nested per interleave chunk), which is exact for
-- prefix plans; any other per-layer plan rounds up to the smallest such prefixes. The parallel
-- optimizer is one switch, priced as ZeRO-1: ZeRO-2/3 round to it. Precision is bf16 or fp16
-- (compute_dtype); GPipe, zero-bubble and DualPipe schedules round to 1F1B.
local export = require "ndplan.export"
local yaml = require "ndplan.io.yaml"

local M = {}

-- Dialects: "r1.5", the legacy yaml (r1.5.0; still the default form of 1.7, whose
-- use_legacy is true unless set, mindformers/tools/register/register.py:28-32), and "mcore",
-- 1.7's use_legacy: false form (configs/qwen3/pretrain_qwen3_32b_4k.yaml: Hugging Face
-- field names in model_config, model_type and architectures, no model.arch), which trains
-- Qwen3 (mindformers/models/qwen3/configuration_qwen3.py:128).
M.DIALECTS = {"r1.5", "mcore"}
M.dialect = "mindformers r1.5 static-graph yaml"
local LABEL = {["r1.5"] = M.dialect, mcore = "mindformers 1.7 mcore yaml (use_legacy: false)"}
M.MCORE = {qwen3 = {"Qwen3ForCausalLM", "Qwen3"}}
M.filename = "mindformers.yaml"

-- The model classes MindFormers r1.5 trains, by Hugging Face model_type: the arch and its
-- config type (mindformers/models/llama/llama.py:415, llama_config.py:33;
-- research/deepseek3/deepseek3.py:27, deepseek3_config.py:32). Others are refused.
M.ARCH = {llama = {"LlamaForCausalLM", "LlamaConfig"},
          qwen2 = {"LlamaForCausalLM", "LlamaConfig"},
          deepseek_v3 = {"DeepseekV3ForCausalLM", "DeepseekV3Config"}}

-- Selective recompute as op patterns (select_recompute: {pattern: per-stage counts},
-- mindformers/models/utils.py:498-513); without patterns MindFormers recomputes its
-- defaults feed_forward.mul and the SiLU (utils.py:143), not the attention core ndplan
-- prices, so the patterns are written: the flash-attention cell of each layer
-- (llama_transformer.py:432) for attn_core, the norms for norms (select_comm_recompute's
-- default pattern .*\.norm, utils.py:144, is set to the same counts).
M.PATTERNS = {attn_core = "attention\\.flash_attention", norms = ".*_norm",
              act = "feed_forward\\.w1\\.activation\\.silu"}

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

-- select_entry(key, v) -> a yaml entry: false, or a map of pattern -> per-stage counts
function M.select_entry(key, v)
  if not v then return {key, false} end
  local entries = {}
  for _, pv in ipairs(v) do entries[#entries + 1] = {pv[1], pv[2]} end
  return {key, entries, map = true}
end

function M.render(plan, opts)
  local ctx, err = export.context(plan)
  if not ctx then return nil, err end
  local dialect = opts and opts.dialect or M.DIALECTS[1]
  local cfg = require("ndplan.config.model").config(plan.model)
  local mcore = dialect == "mcore" and cfg and M.MCORE[cfg.model_type]
  if dialect == "mcore" and not mcore then
    return export.refuse("mindformers", string.format("MindFormers' mcore yaml trains qwen3 "
      .. "(model_type %s)", tostring(cfg and cfg.model_type)))
  end
  local arch = cfg and (M.ARCH[cfg.model_type] or mcore)
  if not arch then
    return export.refuse("mindformers", string.format("MindFormers r1.5 has no model class for "
      .. "%s (model_type %s; it trains %s)", ctx.model and ctx.model.name or "the model",
      tostring(cfg and cfg.model_type), "llama, qwen2 and deepseek_v3"))
  end
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
  -- selective switches MindFormers has patterns for; others recompute their layers fully
  local ops = said.layer_selective_ops and {} or said.selective_ops or {"attn_core"}
  export.fold_selective(said, why)
  ops = said.selective_ops or {"attn_core"}
  local patterned = true
  for _, op in ipairs(ops) do patterned = patterned and M.PATTERNS[op] ~= nil end
  if not patterned then
    for i, m in ipairs(said.layer_recompute) do
      if m == "selective" then said.layer_recompute[i] = "full" end
    end
  end
  local full, select = round_recompute(ctx, said)
  why.recompute = "recompute lists count the first layers of each stage (§2.9); rounded up"
    .. (patterned and "" or "; MindFormers has no op pattern for " .. table.concat(ops, "+")
        .. ": those layers recompute fully")
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
    {"type", arch[2]},
    {"seq_length", ctx.job.seq_len}, {"num_layers", ctx.layers}, {"offset", offset},
    {"compute_dtype", said.precision == "fp16" and "float16" or "bfloat16"},
    {"use_flash_attention", said.flash_attention},
  }
  if ctx.mtp > 0 then table.insert(model_config, 3, {"mtp_depth", ctx.mtp}) end
  if said.vpp > 1 then model_config[#model_config + 1] = {"pp_interleave_num", said.vpp} end
  if mcore then  -- the Hugging Face fields as they are, model_type and architectures
    model_config = {{"seq_length", ctx.job.seq_len}, {"offset", offset},
                    {"compute_dtype", said.precision == "fp16" and "float16" or "bfloat16"},
                    {"use_flash_attention", said.flash_attention}}
    if said.vpp > 1 then model_config[#model_config + 1] = {"pp_interleave_num", said.vpp} end
    local keys = {}
    for k, v in pairs(cfg) do
      local plain = type(v) == "string" or type(v) == "number" or type(v) == "boolean"
                    or (type(v) == "table" and #v > 0 and type(v[1]) ~= "table")  -- no nulls
      if type(k) == "string" and k:sub(1, 1) ~= "_" and plain and k ~= "architectures"
         and k ~= "model_type" and k ~= "torch_dtype" then keys[#keys + 1] = k end
    end
    table.sort(keys)
    for _, k in ipairs(keys) do  -- a gated SiLU is MindFormers' swiglu (the qwen3 example)
      local v = cfg[k]
      if k == "hidden_act" and v == "silu" then v = "swiglu" end
      if math.type(v) == "float" and math.tointeger(v) then v = math.tointeger(v) end
      model_config[#model_config + 1] = {k, v}
    end
    model_config[#model_config + 1] = {"model_type", cfg.model_type}
    model_config[#model_config + 1] = {"architectures", {mcore[1]}}
  elseif arch[2] == "LlamaConfig" then  -- the shape (llama_config.py:135-150), from the config
    local sp_ = ctx.model:spec()
    for _, kv in ipairs({{"hidden_size", sp_.hidden_size}, {"num_heads", sp_.num_heads},
                         {"n_kv_heads", sp_.num_kv_heads}, {"intermediate_size", sp_.ffn_size},
                         {"vocab_size", sp_.vocab_size}, {"rms_norm_eps", cfg.rms_norm_eps},
                         {"theta", cfg.rope_theta}, {"qkv_has_bias", sp_.qkv_bias or false}}) do
      if kv[2] ~= nil then model_config[#model_config + 1] = kv end
    end
  else
    unsaid[#unsaid + 1] = {field = "model", plan = ctx.model.name,
      why = "the shape of " .. arch[1] .. " comes from its research yaml (research/deepseek3): "
            .. "merge this file's sections into it"}
  end
  -- select_recompute as op patterns with the per-stage counts; the norm pattern's counts
  -- in select_comm_recompute (a stale list of another PP would not match, utils.py:189-192)
  local sel, comm = false, false
  if select then
    sel = {}
    for _, op in ipairs(ops) do
      if op ~= "norms" then sel[#sel + 1] = {M.PATTERNS[op], select} end
    end
    for _, op in ipairs(ops) do if op == "norms" then comm = select end end
    if #sel == 0 then sel = false end
  end
  -- PP = 1: MindFormers ignores micro_batch_num (resets it to 1) and trains batch_size x
  -- data_parallel x gradient_accumulation_steps; with PP, batch_size x data_parallel x
  -- micro_batch_num and gradient_accumulation_steps does not act
  -- (mindformers/trainer/base_trainer.py:192-218, r1.5.0)
  local pp1 = said.pp == 1
  local parallel = {{"full_batch", true}, {"dataset_strategy", "full_batch"},
                    {"enable_parallel_optimizer", said.dp > 1 and said.zero >= 1}}
  if said.vpp > 1 then
    parallel[#parallel + 1] = {"pipeline_config", {{"pipeline_interleave", true}}, map = true}
  end
  local doc = {
    {comment = "MindFormers settings written by ndplan export (" .. LABEL[dialect] .. ")."},
    {comment = string.format("global batch %d = data_parallel x batch_size x %s (base_trainer.py:192-218)",
                             ctx.job.global_batch, pp1 and "gradient_accumulation_steps" or "micro_batch_num")},
    {comment = "Launch: msrun --worker_num " .. (ctx.job.devices or said.dp * said.tp * said.pp * said.cp)
               .. " --local_worker_num 8 run_mindformer.py --config mindformers.yaml (one node per 8 devices)."},
    {comment = "You still supply train_dataset, the tokenizer, optimizer, lr_schedule and checkpointing."},
    {"parallel", parallel, map = true},
    {"parallel_config", {
      {"data_parallel", said.dp}, {"model_parallel", said.tp}, {"pipeline_stage", said.pp},
      {"context_parallel", said.cp}, {"expert_parallel", said.ep},
      {"use_seq_parallel", said.sp and said.tp > 1}, {"micro_batch_num", pp1 and 1 or said.mb},
    }, map = true},
    {"runner_config", {{"batch_size", said.mbs},
                       {"gradient_accumulation_steps", pp1 and said.mb or 1}}, map = true},
    {"model", mcore and {{"model_config", model_config, map = true}}
                    or {{"model_config", model_config, map = true},
                        {"arch", {{"type", arch[1]}}, map = true}}, map = true},
    {"recompute_config", {{"recompute", full}, M.select_entry("select_recompute", sel),
                          {"select_comm_recompute", comm}}, map = true},
  }
  if mcore then
    table.insert(doc, 5, {"use_legacy", false})
    table.insert(doc, 6, {"trainer", {{"type", "CausalLanguageModelingTrainer"},
                                      {"model_name", mcore[2]}}, map = true})
  end
  local notes, rounded = export.finish(ctx, said, why, unsaid)
  return export.yaml(doc) .. "\n", notes, rounded, {dialect = LABEL[dialect]}
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
  if st.pp == 1 then  -- base_trainer.py:192-218: micro_batch_num does not act at PP = 1
    st.mb = (doc.runner_config or {}).gradient_accumulation_steps or 1
  end
  if st.dp and st.mbs and st.mb then job.global_batch = st.dp * st.mbs * st.mb end
  st.arch = ((doc.model or {}).arch or {}).type
  local layers, mtp = mc.num_layers or mc.num_hidden_layers, mc.mtp_depth or 0
  if not (layers and st.pp) then return st, job end
  local total = layers + mtp
  local stages, chunks = {}, nil
  if st.vpp > 1 and (type(mc.offset) ~= "table" or type(mc.offset[1]) == "table") then
    chunks = {}  -- per chunk round, per stage (body+MTP); one offset for all, or per chunk
    local base = total // (st.pp * st.vpp)
    for c = 1, st.vpp do
      for s = 1, st.pp do
        local k = (c - 1) * st.pp + s
        chunks[k] = base + (type(mc.offset) == "table" and (mc.offset[c] and mc.offset[c][s] or 0)
                            or mc.offset or 0)
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
  local sel = rc.select_recompute
  if type(sel) == "table" and type(sel[1]) == "nil" and next(sel) then  -- pattern -> counts
    local ops = {}
    for pattern, c in pairs(sel) do
      for op, pat in pairs(M.PATTERNS) do if pat == pattern then ops[#ops + 1] = op end end
      sel = c
    end
    if rc.select_comm_recompute then ops[#ops + 1] = "norms" end
    table.sort(ops)
    st.selective_ops = ops
  end
  st.layer_recompute = export.from_prefixes(ctx, shape, counts(rc.recompute), counts(sel))
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
