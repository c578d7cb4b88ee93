-- The measured runs of today's stacks (../shared/validation/modern_runs.csv, described in
-- modern_runs.md beside it) as validation cases: each complete row becomes
-- {label, group, stack, device, model, job, strategy, costs, measured_s}, priced as a user
-- would price it: the row's stated strategy, recompute as stated (none where unknown).
-- Groups are (stack, device, precision). The architectures come from modern_models.json.
local files = require "ndplan.io.files"

local M = {}

M.FILE = "modern_runs.csv"
M.MODELS = "modern_models.json"

-- read_csv: ndplan.validate's (RFC 4180 quoting: the notes column holds commas and quotes)
function M.read_csv(path) return require("ndplan.fit.validate").read_csv(path) end

local function int(v) return math.tointeger(tonumber(v)) end
local function num(v) return tonumber(v) end

-- The stack a row ran on: NeMo and Megatron-LM rows are Megatron-Core underneath.
local STACKS = {
  {"^nemo", "megatron-core"}, {"^megatron%-core", "megatron-core"},
  {"^torchtitan", "torchtitan"}, {"^llm%-foundry", "llm-foundry"},
  {"^maxtext", "maxtext"}, {"^paxml", "paxml"},
}
function M.stack_of(framework)
  for _, s in ipairs(STACKS) do if framework:find(s[1]) then return s[2] end end
  return nil
end

-- The device a row ran on. torchtitan's H100s are the 96 GB HBM2e, 500 W parts
-- (modern_runs.md, gpu column): a variant of the bundled h100 with that capacity.
M.H100_96GB = {base = "h100", name = "H100-96GB",
               description = "NVIDIA H100 96 GB HBM2e, 500 W (Grand Teton, torchtitan's runs)",
               hbm = {capacity = "96GB"}}
local DEVICES = {
  {"^H100%-96GB", "h100-96gb"}, {"^H100", "h100"}, {"^H200", "h200"}, {"^GB200", "gb200"},
  {"^B200", "b200"}, {"^A100%-SXM%-80GB", "a100-80gb"},
}
function M.device_of(gpu)
  for _, d in ipairs(DEVICES) do if gpu:find(d[1]) then return d[2] end end
  return nil
end

-- The precision family a row's GEMMs ran at (its group), and the recipe as the source
-- states it: NeMo's fp8-cs is current (tensorwise) scaling, its plain fp8 and llm-foundry's
-- amp_fp8 Transformer Engine's delayed scaling, torchao's float8 Linear tensorwise unless
-- rowwise is said; torchao's FSDP float8 all-gather gathers FP8 parameters.
function M.precision_of(text)
  if text:find("^bf16") then return "bf16", "bf16" end
  if not text:find("fp8") then return nil end
  local gather = text:find("all%-gather") ~= nil
  if text:find("mxfp8") then return "fp8", "fp8:mxfp8" end
  if text:find("fp8%-cs") then return "fp8", "fp8:tensorwise" end
  if text:find("torchao") then
    return "fp8", text:find("rowwise") and "fp8:rowwise" or "fp8:tensorwise", gather
  end
  return "fp8", "fp8:delayed"
end

-- torchtitan's per-op selective checkpointing, as its exporter states it (one rule:
-- ndplan.export.torchtitan.OP_SAC, with its sources)
M.TORCHTITAN_OP_SAC = require("ndplan.export.torchtitan").OP_SAC

local function recompute_of(text)
  if text:find("^selective") then return "selective" end
  if text == "full" then return "full" end
  return "none"  -- none, or unknown: priced as none, as a user would
end

-- The HF-style config of a model_key: the architecture fields of modern_models.json with
-- the family each describes (its hidden_act text says gated or not).
-- Architectures the catalog bundles from their published config.json: priced from it
-- (modern_models.json restates only the fields the tables' sources give).
local BUNDLED = {["llama4-maverick-17b-128e"] = "llama4-maverick",
                 ["llama4-scout-17b-16e"] = "llama4-scout", ["nemotron-h-56b"] = "nemotron-h-56b"}

local function family_config(key, entry, layers_override)
  if BUNDLED[key] and not layers_override then return BUNDLED[key] end
  local cfg = {}
  for k, v in pairs(entry.config) do cfg[k] = v end
  local act = tostring(cfg.hidden_act or "")
  cfg.hidden_act = nil
  if key:find("^deepseek") then cfg.model_type = "deepseek_v3"
  elseif key:find("^mixtral") or key:find("^grok") then cfg.model_type = "mixtral"
  elseif key:find("^llama") and not key:find("^llama4") then cfg.model_type = "llama"
  elseif act:find("non%-gated") or key:find("^mlm%-gpt") or key:find("^mpt") then
    -- GPT-style: LayerNorm, a 2-matrix MLP; NeMo's GPT-3 learns positions
    cfg.model_type = "gpt2"
    cfg.n_positions = cfg.max_position_embeddings or 4096
    cfg.tie_word_embeddings = true
  else return nil, "architecture not read by the modern-runs table (" .. key .. ")" end
  if layers_override then cfg.num_hidden_layers = layers_override end
  cfg._name = key .. (layers_override and ("-" .. layers_override .. "l") or "")
  return cfg
end

-- The sharding a row states: FSDP (torchtitan's degree, llm-foundry's strategy, NeMo's
-- FSDP=1, MaxText/PaxML's "FSDP+DP") as a ZeRO stage; Megatron's distributed optimizer
-- (NeMo's recipes turn it on) as ZeRO-1.
local function zero_of(stack, row)
  local f = row.fsdp or ""
  if f:find("SHARD_GRAD_OP") then return 2 end
  if f:find("FULL_SHARD") or f:find("FSDP=1") or (int(f) and int(f) > 1) then return 3 end
  -- torchtitan applies FSDP2 over the data-parallel shard and context-parallel ranks
  -- together (its dp_shard_cp mesh): CP alone shards the parameters
  if stack == "torchtitan" and (int(row.cp) or 1) > 1 then return 3 end
  if stack == "maxtext" or stack == "paxml" then return 3 end
  if stack == "megatron-core" then return 1 end
  return 0
end

-- The year of each Megatron-Core minor release: the commit date of its core_v0.N.0 tag in
-- NVIDIA/Megatron-LM (0.4 2023-12-11, 0.5 2024-02-26, 0.6 2024-04-18, 0.7 2024-05-30,
-- 0.8 2024-08-12, 0.9 2024-10-24, 0.10 2025-02-17, 0.11 2025-03-14, 0.12 2025-05-06,
-- 0.13 2025-07-25, 0.14 2025-10-08, 0.15 2025-12-05).
M.MEGATRON_CORE_YEARS = {[4] = 2023, [5] = 2024, [6] = 2024, [7] = 2024, [8] = 2024, [9] = 2024,
                         [10] = 2025, [11] = 2025, [12] = 2025, [13] = 2025, [14] = 2025,
                         [15] = 2025}

-- The year of a release from its version text: a 20xx year, a container tag YY.MM
-- (NeMo's 24.09, MaxText's 25.01), or a Megatron-Core release (r0.8.0);
-- llm-foundry's tables date from 2023-10 and 2024-01 (modern_runs.md) and state no version.
function M.release_year(version, stack)
  version = version or ""
  local y = version:match("(20%d%d)")
  if y then return tonumber(y) end
  y = version:match("container (%d%d)%.") or version:match("label (%d%d)%.")
  if y then return 2000 + tonumber(y) end
  y = version:match("Megatron%-Core [rv]0%.(%d+)")
  if y then return M.MEGATRON_CORE_YEARS[tonumber(y)] end
  if stack == "llm-foundry" then return 2024 end
  return nil
end

-- The expert tensor-parallel size a row leaves blank: Megatron sets it to the TP size
-- when --expert-tensor-parallel-size is not given (its argument validation, and the expert
-- rank generator of parallel_state.py alike), and releases without that flag split experts
-- by TP too. Other stacks shard experts their own way and state it; dense models have none.
function M.default_etp(stack, tp, moe)
  if stack == "megatron-core" and moe then return tp end
  return 1
end

-- What a row's own launch script states and its table leaves out, read from the
-- benchmark repository at the revision the row cites (NVIDIA/dgxc-benchmarking) and the
-- NeMo commit its setup.sh pins. Each entry fills blank fields only; a stated field wins.
--   nemotron4-340b, NeMo 25.02.01 (README v25.04): launch.sh:62-68 sets VP=12 for 340b
--     (the README's table has no VP column); the 24.09, 24.12 and 25.04 rows state 12.
--   deepseek-v3-671b, NeMo 25.04.01 (README v25.05): setup.sh pins NeMo 7a8f1cc, whose
--     scripts/performance/llm/pretrain_deepseek_v3.py builds pretrain_recipe() -- MTP on
--     (recipes/deepseek_v3.py:62, use_mtp=True: mtp_num_layers=1) -- puts 64/pp - 1 layers
--     in the first stage and 64/pp - 2 in the last (:73-77), and adds the token-drop
--     callback (capacity factor 1.0, inputs padded to it: every expert computes its
--     balanced share); launch.sh's RM recomputes mla_up_proj on H100, core_attn on GB200.
--   grok1-314b, every release: grok1_314b.yaml:53-54 (v24.11.1, v25.02; cfg/ at v25.04) and,
--     from v25.05, NeMo 7a8f1cc's pretrain_grok1_314b.py:212 (MegatronTokenDropCallback) pad
--     every expert's input to a capacity factor of 1.0.
M.LAUNCH_STATED = {
  {model_key = "grok1-314b", costs = {capacity_factor = 1.0}},
  {model_key = "nemotron4-340b", version = "^NeMo container 25%.02%.01$",
   strategy = function() return {vpp = 12} end},
  {model_key = "deepseek-v3-671b", version = "^NeMo container 25%.04%.01$",
   model = {num_nextn_predict_layers = 1}, costs = {capacity_factor = 1.0},
   strategy = function(st, device)
     local mid = st.pp > 1 and 64 // st.pp or nil
     return {decoder_first_pipeline_num_layers = mid and mid - 1,
             decoder_last_pipeline_num_layers = mid and mid - 2,
             selective_ops = device == "h100" and {"mla_up"} or {"attn_core"}}
   end},
}

-- Fills the blanks of a row's strategy st, model cfg and costs from M.LAUNCH_STATED
-- (before any default is put in a blank).
local function fill_launch_stated(row, st, cfg, costs, device)
  for _, e in ipairs(M.LAUNCH_STATED) do
    if row.model_key == e.model_key
       and (e.version == nil or (row.framework_version or ""):find(e.version)) then
      for k, v in pairs(e.strategy and e.strategy(st, device) or {}) do
        if st[k] == nil then st[k] = v end
      end
      if e.model and type(cfg) == "table" then
        for k, v in pairs(e.model) do if cfg[k] == nil then cfg[k] = v end end
      end
      for k, v in pairs(e.costs or {}) do costs[k] = v end
    end
  end
end

local function key_is_moe(key) return key:find("^llama4") ~= nil end

-- One row -> a case, or nil, reason when the row cannot be priced as stated. unmeasured:
-- keep a complete row that states no step time (measured_s nil: its layout, not its time).
local function build(row, models, unmeasured)
  if row.config_complete ~= "yes" then return nil, "config not complete" end
  local stack = M.stack_of(row.framework or "")
  local device = M.device_of(row.gpu or "")
  local precision, recipe, param_gather = M.precision_of(row.precision or "")
  if not (stack and device and precision) then return nil, "stack, device or precision not read" end
  local entry = models[row.model_key]
  if not entry then return nil, "model_key " .. tostring(row.model_key) .. " not described" end
  local cfg, why = family_config(row.model_key, entry, int(row.num_layers_override))
  if not cfg then return nil, why end
  local gpus, gbs, seq = int(row.num_gpus), int(row.global_batch), int(row.seq_len)
  local measured = num(row.step_time_s)
  local tps = num(row.tokens_per_s_per_gpu)
  if not measured and tps and tps > 0 then measured = gbs * seq / (tps * gpus) end
  if not (gpus and gbs and seq) then return nil, "no devices, batch or sequence length" end
  if not (measured or unmeasured) then return nil, "no measured step time" end
  local tp = int(row.tp) or 1
  local moe = type(cfg) == "string" and key_is_moe(row.model_key)
              or type(cfg) == "table" and (cfg.n_routed_experts or cfg.num_local_experts) ~= nil
  local st = {
    tp = tp, pp = int(row.pp) or 1, cp = int(row.cp) or 1, vpp = int(row.vpp),
    ep = int(row.ep) or 1, etp = int(row.etp) or M.default_etp(stack, tp, moe),
    mbs = int(row.micro_batch) or 1,
    sp = tp > 1, zero = zero_of(stack, row), precision = recipe,
    fp8_param_gather = param_gather or nil,
    -- torchtitan's async TP (its tables say so in the row)
    tp_comm_overlap = ((row.notes or ""):lower():find("async ?tp") ~= nil) or nil,
    recompute = recompute_of(row.activation_checkpointing or ""),
  }
  if stack == "torchtitan" and st.recompute == "selective" then
    st.selective_ops = M.TORCHTITAN_OP_SAC  -- its train configs' selective_ac_option = "op"
  end
  local costs = {}
  fill_launch_stated(row, st, cfg, costs, device)
  st.vpp = st.vpp or 1
  if st.pp == 1 then st.vpp = 1 end  -- Llama 4 rows list VP with PP 1 (modern_runs.md #7)
  return {
    label = string.format("%s %s %dx%s tp%d pp%d cp%d ep%d", stack, row.model, gpus, device,
                          st.tp, st.pp, st.cp, st.ep),
    group = string.format("%s/%s/%s", stack, device, precision),
    stack = stack, device_name = device, precision_text = row.precision,
    moe = moe,
    version = row.framework_version, line = row._line,
    year = M.release_year(row.framework_version, stack),
    model = cfg, job = {devices = gpus, global_batch = gbs, seq_len = seq},
    strategy = st, costs = costs, measured_s = measured,
  }
end

-- cases(dir [, opts]) -> cases, skipped | nil, message. skipped lists {line, reason} of rows
-- left out. opts.unmeasured: rows without a measured step time too (measured_s nil).
function M.cases(dir, opts)
  local rows, err = M.read_csv(dir .. "/" .. M.FILE)
  if not rows then return nil, err end
  local text, jerr = files.read(dir .. "/" .. M.MODELS)
  if not text then return nil, jerr end
  local models = require("ndplan").json.decode(text, M.MODELS)
  local out, skipped = {}, {}
  for _, row in ipairs(rows) do
    local c, why = build(row, models, opts and opts.unmeasured)
    if c then out[#out + 1] = c else skipped[#skipped + 1] = {line = row._line, reason = why} end
  end
  return out, skipped
end

---------------------------------------------------------------------------------------------
-- Measured allocator peaks: megatron_memory_logs.json (Megatron's report_memory lines)
---------------------------------------------------------------------------------------------
M.MEMORY_FILE = "megatron_memory_logs.json"

-- Leonardo's A100s are the 64 GB parts.
M.A100_64GB = {base = "a100-80gb", name = "A100-64GB",
               description = "NVIDIA A100 SXM 64 GB (CINECA Leonardo Booster)",
               hbm = {capacity = "64GB"}}

local function memory_device(gpu)
  gpu = gpu or ""
  if gpu:find("A100 SXM 64GB", 1, true) then return "a100-64gb" end
  if gpu:find("H100", 1, true) then return "h100" end
  return "h100"  -- not printed in the log: the device does not enter the bytes
end

-- One log row -> two memory cases (max allocated, max reserved), or nil, reason.
local function memory_rows(row, out)
  local cfg = {model_type = "llama", hidden_size = row.hidden_size,
               num_hidden_layers = row.num_layers, num_attention_heads = row.num_attention_heads,
               num_key_value_heads = row.num_query_groups, head_dim = row.kv_channels,
               intermediate_size = row.ffn_hidden_size, vocab_size = row.vocab_size,
               tie_word_embeddings = row.tied_embeddings == true,
               attention_bias = row.bias_linear == true, mlp_bias = row.bias_linear == true,
               max_position_embeddings = row.max_position_embeddings, _name = row.id}
  -- JSON nulls decode to a sentinel: only tables and strings count as given
  local function given(v) return type(v) == "table" or type(v) == "string" or type(v) == "number" end
  if given(row.moe) or given(row.mla) or row.gated_mlp ~= true then
    return nil, "architecture not read"
  end
  for k, v in pairs(cfg) do  -- whole numbers as integers; nulls left out
    if type(v) == "number" then cfg[k] = math.tointeger(v) or v
    elseif not given(v) and type(v) ~= "boolean" then cfg[k] = nil end
  end
  local rec = type(row.recompute) == "table" and row.recompute.granularity
  local function n(v, d) return type(v) == "number" and math.tointeger(v) or d end
  local st = {tp = n(row.tp, 1), pp = n(row.pp, 1), cp = n(row.cp, 1), vpp = n(row.vpp, 1),
              dp = n(row.dp), mbs = n(row.micro_batch), sp = row.sequence_parallel == true,
              zero = row.distributed_optimizer and 1 or 0,
              precision = given(row.fp8) and "fp8" or "bf16",
              recompute = rec == "selective" and "selective" or rec == "full" and "full"
                          or "none"}
  local common = {group = "megatron-core", model = cfg, device_name = memory_device(row.gpu_type),
                  stack = "megatron-core",
                  job = {devices = n(row.world_size), global_batch = n(row.global_batch),
                         seq_len = n(row.seq_len)},
                  strategy = st, costs = {}}
  local function add(quantity, measured_mb, field)
    local c = {label = row.id .. " " .. quantity, quantity = quantity, unit = "GiB",
               measured = measured_mb / 1024,
               predict = function(r) return r.stages[1][field] / 2^30 end}
    for k, v in pairs(common) do c[k] = v end
    out[#out + 1] = c
  end
  add("max allocated", row.max_allocated_mb, "allocated")
  add("max reserved", row.max_reserved_mb, "reserved")
  return true
end

-- memory_cases(dir) -> memory cases of the Megatron logs | nil, message
function M.memory_cases(dir)
  local text, err = files.read(dir .. "/" .. M.MEMORY_FILE)
  if not text then return nil, err end
  local doc = require("ndplan").json.decode(text, M.MEMORY_FILE)
  local out = {}
  for _, row in ipairs(doc.rows or {}) do memory_rows(row, out) end
  return out
end

-- The device of a case: a bundled name, or the 96 GB H100 variant.
-- Loaded once each (devices are immutable): every table and fit prices many rows on few.
local loaded = {}
function M.device(name)
  local nd = require "ndplan"
  if not loaded[name] then
    local variant = ({["h100-96gb"] = M.H100_96GB, ["a100-64gb"] = M.A100_64GB})[name]
    loaded[name] = assert(nd.device(variant or name))
  end
  return loaded[name]
end

return M
