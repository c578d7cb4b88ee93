-- Megatron launch scripts as input: the `--flag value` options of a `.sh` file (bash arrays,
-- `VAR=value` assignments and `$VAR` references resolved; see ndplan.export.flags) turned
-- into ndplan's model shape, strategy and job. Flag names and meanings are those of
-- models-and-trainers.md §2.2 (Megatron-LM at d98e8a6) and §2.3 (MindSpeed-LLM, and the
-- underscore spellings of Megatron-SWIFT).
--
--   read(text, source) -> info | nil, "source:line: --flag: message"
--   load(path) -> info | nil, message
--   info = {strategy = {...}, job = {global_batch, seq_len, devices}, shape = {...},
--           stage_body = {body layers per stage} | nil, devices_error = message | nil}
--   model_config(info) -> HF-style config table for nd.model | nil, message
local flags = require "ndplan.export.flags"
local files = require "ndplan.io.files"

local M = {}

-- The reader over parsed options: typed getters whose failures name the file, line and flag.
local function reader(parsed)
  local r = {}
  local function fail(o, msg) error({message = string.format("%s:%d: %s: %s", parsed.source, o.line, o.flag, msg)}, 0) end
  function r.has(flag) return parsed.last[flag] ~= nil end
  function r.str(flag)
    local o = parsed.last[flag]
    if not o then return nil end
    if o.missing then fail(o, "cannot resolve " .. o.missing .. " (set it in the script or pass the option on the command line)") end
    if o.values[1] == nil then fail(o, "needs a value") end
    return o.values[1]
  end
  function r.int(flag)
    local s = r.str(flag)
    if s == nil then return nil end
    local n = math.tointeger(tonumber(s))
    if not n then fail(parsed.last[flag], string.format("expected an integer, got '%s'", s)) end
    return n
  end
  function r.count(flag)  -- a degree: an integer of at least 1
    local n = r.int(flag)
    if n ~= nil and n < 1 then fail(parsed.last[flag], string.format("expected an integer >= 1, got %d", n)) end
    return n
  end
  function r.list(flag)
    local o = parsed.last[flag]
    return o and o.values or nil
  end
  return r
end

-- layout(st, layers, mtp) -> the resolved pipeline layout of a strategy's layout fields
-- (Megatron's flags as ndplan.c.estimate.layout takes them: stage_layers per chunk, stages,
-- vpp, pipeline_layout) | nil, message. The rules and the layout language are the C core's.
function M.layout(st, layers, mtp)
  local fields = {pp = st.pp or 1, vpp = st.vpp or 1, stage_layers = st.stage_layers}
  for _, k in ipairs(M.LAYOUT_FIELDS) do fields[k] = st[k] end
  local ok, r, err = pcall(require("ndplan.c.estimate").layout, fields, layers, mtp or 0)
  if not ok then return nil, (tostring(r):gsub("^pipeline_model_parallel_layout: ", "")) end
  return r, err
end

-- The pipeline layout fields of a strategy, under Megatron's flag names.
M.LAYOUT_FIELDS = require("ndplan.estimate").LAYOUT_FIELDS

-- from_parsed(parsed) -> info (raises {message} on a bad value)
local function from_parsed(parsed)
  local r = reader(parsed)
  local shape = {
    num_layers = r.int("--num-layers"), hidden_size = r.int("--hidden-size"),
    ffn_hidden_size = r.int("--ffn-hidden-size"), num_heads = r.int("--num-attention-heads"),
    num_query_groups = r.has("--group-query-attention") and r.int("--num-query-groups") or nil,
    kv_channels = r.int("--kv-channels"), max_position = r.int("--max-position-embeddings"),
    vocab_size = r.int("--vocab-size") or r.int("--padded-vocab-size"),
    swiglu = r.has("--swiglu"), rmsnorm = (r.str("--normalization") or ""):lower() == "rmsnorm",
    untie = r.has("--untie-embeddings-and-output-weights"),
    no_bias = r.has("--disable-bias-linear"), qkv_bias = r.has("--add-qkv-bias"),
    num_experts = r.int("--num-experts"), top_k = r.int("--moe-router-topk"),
    moe_ffn_size = r.int("--moe-ffn-hidden-size"), mtp_layers = r.int("--mtp-num-layers") or 0,
  }
  local tp = r.count("--tensor-model-parallel-size") or 1
  local pp = r.count("--pipeline-model-parallel-size") or 1
  local st = {
    tp = tp, pp = pp, cp = r.int("--context-parallel-size") or 1,
    ep = r.int("--expert-model-parallel-size") or 1,
    sp = r.has("--sequence-parallel") or nil, mbs = r.int("--micro-batch-size"),
  }
  -- ETP defaults to TP in Megatron (§2.2), ndplan's to 1: only MoE models carry it
  st.etp = r.int("--expert-tensor-parallel-size") or (shape.num_experts and tp or nil)
  local L = shape.num_layers
  if r.has("--num-virtual-stages-per-pipeline-rank") then
    st.vpp = r.int("--num-virtual-stages-per-pipeline-rank")
  elseif r.has("--num-layers-per-virtual-pipeline-stage") then
    -- Megatron: (layers + the accounted embedding and loss) / pp / this; not with first/last
    local per = r.int("--num-layers-per-virtual-pipeline-stage")
    local n = L and L + (r.has("--account-for-embedding-in-pipeline-split") and 1 or 0)
                  + (r.has("--account-for-loss-in-pipeline-split") and 1 or 0)
    local o = parsed.last["--num-layers-per-virtual-pipeline-stage"]
    if r.has("--decoder-first-pipeline-num-layers") or r.has("--decoder-last-pipeline-num-layers") then
      error({message = string.format("%s:%d: --num-layers-per-virtual-pipeline-stage: uneven "
             .. "first/last stages need --num-virtual-stages-per-pipeline-rank (Megatron)",
             parsed.source, o.line)}, 0)
    end
    if n and pp > 0 and per > 0 and n % pp == 0 and (n // pp) % per == 0 then st.vpp = n // pp // per
    else error({message = string.format("%s:%d: --num-layers-per-virtual-pipeline-stage %d needs "
                .. "the layers (%s) per stage (pp %d) divisible by %d", parsed.source, o.line, per,
                tostring(n), pp, per)}, 0) end
  end
  -- ZeRO: the distributed optimizer shards optimizer states; Megatron-FSDP's strategies
  -- name what is sharded (§2.2)
  local fsdp = {no_shard = 0, optim = 1, optim_grads = 2, optim_grads_params = 3}
  if r.has("--use-megatron-fsdp") or r.has("--data-parallel-sharding-strategy") then
    st.zero = fsdp[r.str("--data-parallel-sharding-strategy") or "optim_grads_params"]
  elseif r.has("--use-distributed-optimizer") then st.zero = 1 end
  -- precision (Megatron arguments.py): --fp8-format turns FP8 on, --fp8-recipe picks the
  -- recipe (default delayed); --fp4-format e2m1 turns NVFP4 on (--fp4-recipe nvfp4, its
  -- only choice); the BF16 layers at each end only with --first-last-layers-bf16 (1 and 1
  -- by default), none without it
  if r.has("--fp4-format") then
    local recipe = r.str("--fp4-recipe") or "nvfp4"
    if recipe ~= "nvfp4" then
      error({message = string.format("%s: --fp4-recipe: expected nvfp4, got '%s'",
                                     parsed.source, recipe)}, 0)
    end
    st.precision = "nvfp4"
  elseif r.has("--fp8-format") then
    local recipe = r.str("--fp8-recipe") or "delayed"
    if not (recipe == "delayed" or recipe == "tensorwise" or recipe == "blockwise"
            or recipe == "mxfp8") then
      error({message = string.format("%s: --fp8-recipe: expected tensorwise, delayed, mxfp8 "
                                     .. "or blockwise, got '%s'", parsed.source, recipe)}, 0)
    end
    st.precision = "fp8:" .. recipe
  elseif r.has("--bf16") then st.precision = "bf16"
  elseif r.has("--fp16") then st.precision = "fp16" end
  if st.precision == "nvfp4" or (st.precision or ""):match("^fp8:") then
    st.fp8_param_gather = r.has("--fp8-param-gather") or r.has("--fp4-param-gather")
    local ends = r.has("--first-last-layers-bf16")
    st.bf16_first_layers = ends and (r.int("--num-layers-at-start-in-bf16") or 1) or 0
    st.bf16_last_layers = ends and (r.int("--num-layers-at-end-in-bf16") or 1) or 0
  end
  -- the pipeline layout, under Megatron's names (resolved by the core, ndplan.c.estimate)
  st.account_for_embedding_in_pipeline_split = r.has("--account-for-embedding-in-pipeline-split") or nil
  st.account_for_loss_in_pipeline_split = r.has("--account-for-loss-in-pipeline-split") or nil
  st.decoder_first_pipeline_num_layers = r.int("--decoder-first-pipeline-num-layers")
  st.decoder_last_pipeline_num_layers = r.int("--decoder-last-pipeline-num-layers")
  st.pipeline_model_parallel_layout = r.str("--pipeline-model-parallel-layout")
  local stage_body, chunks
  if L and L > 0 then
    local lay, why = M.layout(st, L, shape.mtp_layers)
    if not lay then
      local o = parsed.last["--pipeline-model-parallel-layout"]
             or parsed.last["--decoder-first-pipeline-num-layers"]
             or parsed.last["--decoder-last-pipeline-num-layers"]
             or parsed.last["--account-for-embedding-in-pipeline-split"]
             or parsed.last["--account-for-loss-in-pipeline-split"]
             or parsed.last["--pipeline-model-parallel-size"]
      error({message = string.format("%s:%d: %s", parsed.source, o and o.line or 0, why)}, 0)
    end
    st.vpp = lay.vpp > 1 and lay.vpp or st.vpp
    chunks = lay.stage_layers
    stage_body = {}  -- decoder layers per stage: the chunks' layers before the MTP ones
    local pos = 0
    for k, n in ipairs(chunks) do
      local s_ = (k - 1) % pp + 1
      stage_body[s_] = (stage_body[s_] or 0) + math.max(0, math.min(pos + n, L) - pos)
      pos = pos + n
    end
  end
  -- recompute (§2.2): selective is global; full is uniform (every layer, in chunks) or
  -- block (the first N layers of each pipeline stage, per model chunk)
  local granularity = r.str("--recompute-granularity")
  if granularity == nil and r.has("--recompute-activations") then granularity = "selective" end
  local modules = r.list("--recompute-modules")
  if modules then  -- Megatron-Core's module names as ndplan's switches (export.megatron)
    local switches, seen = {}, {}
    for _, name in ipairs(modules) do
      local op = require("ndplan.export.megatron").SWITCHES[name]
      if op and not seen[op] then seen[op] = true; switches[#switches + 1] = op end
    end
    table.sort(switches)
    if #switches > 0 then st.selective_ops = switches end
  end
  if granularity == "selective" then st.recompute = "selective"
  elseif granularity == "full" then
    local method, n = r.str("--recompute-method") or "uniform", r.int("--recompute-num-layers") or 1
    if method == "block" then
      st.recompute_block = n
    else
      st.recompute = "full"
    end
  elseif granularity ~= nil then
    error({message = string.format("%s:%d: --recompute-granularity: expected full or selective, got '%s'",
                                   parsed.source, parsed.last["--recompute-granularity"].line, granularity)}, 0)
  end
  -- CPU offloading: --cpu-offloading-num-layers N > 0 turns it on (Megatron-LM
  -- arguments.py:1950; cpu_offloading itself is no flag, arguments.py:2320)
  local offload_layers = r.int("--cpu-offloading-num-layers")
  if offload_layers and offload_layers > 0 then
    st.offload = true
    st.offload_layers = offload_layers
  end
  -- job; devices from torchrun's --nproc-per-node x --nnodes, read lazily
  local job = {global_batch = r.int("--global-batch-size"), seq_len = r.int("--seq-length")}
  local ok, devices = pcall(function()
    local per, nodes = r.int("--nproc-per-node"), r.int("--nnodes") or 1
    return per and per * nodes or nil
  end)
  local info = {strategy = st, job = job, shape = shape, stage_body = stage_body,
                chunk_layers = chunks}
  if ok then job.devices = devices else info.devices_error = devices.message end
  return info
end

-- block_modes(info, layers, mtp) -> per-layer modes for `--recompute-method block`: the
-- first N layers of each stage (each model chunk with VPP) full, the rest none.
function M.block_modes(st, n, layers, mtp)
  local export = require "ndplan.export"
  local ctx = {layers = layers, mtp = mtp}
  local lay = assert(M.layout(st, layers, mtp))
  local s = {pp = st.pp or 1, vpp = lay.vpp, stage_layers = lay.stages, chunk_layers = lay.stage_layers}
  local full = {}
  for g = 1, #export.groups(ctx, s) do full[g] = n end
  return export.from_prefixes(ctx, s, full)
end

function M.read(text, source)
  source = source or "(script)"
  local parsed, err = flags.parse(text, source)
  if not parsed then return nil, err end
  local ok, info = pcall(from_parsed, parsed)
  if not ok then
    if type(info) == "table" then return nil, info.message end
    error(info, 0)
  end
  local st, L = info.strategy, info.shape.num_layers
  if st.recompute_block and L then
    st.layer_recompute = M.block_modes(st, st.recompute_block, L, info.shape.mtp_layers)
    st.recompute = require("ndplan.export").uniform_mode(st.layer_recompute) or "per_layer"
  end
  return info
end

function M.load(path)
  local text, err = files.read(path)
  if not text then return nil, err end
  return M.read(text, path)
end

-- model_config(info) -> an HF config table (llama with --swiglu, else GPT-2 style; mixtral
-- with --num-experts) | nil, message naming the flag that is missing
function M.model_config(info, source)
  local s = info.shape
  for _, need in ipairs({{"num_layers", "--num-layers"}, {"hidden_size", "--hidden-size"},
                         {"num_heads", "--num-attention-heads"}, {"vocab_size", "--vocab-size"}}) do
    if not s[need[1]] then
      return nil, string.format("%s: no %s in the script: pass --model", source or "(script)", need[2])
    end
  end
  local name = string.format("megatron-%dx%d", s.num_layers, s.hidden_size)
  local ffn = s.ffn_hidden_size or 4 * s.hidden_size
  if s.swiglu or s.num_experts then
    local cfg = {model_type = s.num_experts and "mixtral" or "llama", name = name,
                 hidden_size = s.hidden_size, num_hidden_layers = s.num_layers,
                 num_attention_heads = s.num_heads,
                 num_key_value_heads = s.num_query_groups or s.num_heads,
                 intermediate_size = ffn, vocab_size = s.vocab_size,
                 max_position_embeddings = s.max_position or info.job.seq_len or 4096,
                 tie_word_embeddings = not s.untie, head_dim = s.kv_channels}
    if s.num_experts then
      cfg.num_local_experts = s.num_experts
      cfg.num_experts_per_tok = s.top_k or 2
      cfg.intermediate_size = s.moe_ffn_size or ffn
    end
    return cfg
  end
  return {model_type = "gpt2", name = name, n_layer = s.num_layers, n_embd = s.hidden_size,
          n_head = s.num_heads, n_inner = s.ffn_hidden_size, vocab_size = s.vocab_size,
          n_positions = s.max_position or info.job.seq_len or 4096,
          tie_word_embeddings = not s.untie}
end

return M
