-- Conformance (issue 15): every trainer file ndplan writes, checked against the rules the
-- trainers' own code applies, restated here as data with the file and line they come from
-- (the trainers' public code at the versions of each exporter's dialect; none of it is
-- copied), over the winners of a sweep of searches and the issue's pinned cases. A file is
-- either refused with a reason or accepted by every rule here, parses back to the strategy
-- the exporter says it wrote, and its batch, counted as the trainer counts it, is the plan's.
local nd = require "ndplan"
local export = require "ndplan.export"
local flags = require "ndplan.export.flags"
local json = require "ndplan.io.json"
local yaml = require "ndplan.io.yaml"
local script = require "ndplan.config.megatron_script"

require("ndplan.config.stack").DEFAULT = "none"

---------------------------------------------------------------------------------------------
-- Megatron-LM d98e8a6. a = megatron/training/arguments.py, tc = megatron/core/transformer/
-- transformer_config.py and mpc = megatron/core/model_parallel_config.py (their dataclass
-- fields are flags --field-name, megatron/training/argument_utils.py:67), trc =
-- megatron/training/config/training_config.py, cc = megatron/training/config/common_config.py
---------------------------------------------------------------------------------------------
local MEGATRON = {
  flags = {
    ["--num-layers"] = "tc:65", ["--hidden-size"] = "tc:145", ["--num-attention-heads"] = "tc:148",
    ["--ffn-hidden-size"] = "tc:180", ["--kv-channels"] = "tc:184", ["--num-query-groups"] = "tc:175",
    ["--group-query-attention"] = "a:2382", ["--multi-latent-attention"] = "tc:288",
    ["--q-lora-rank"] = "a:3548", ["--kv-lora-rank"] = "a:3550", ["--qk-head-dim"] = "a:3552",
    ["--qk-pos-emb-head-dim"] = "a:3554", ["--v-head-dim"] = "a:3556", ["--swiglu"] = "a:2450",
    ["--normalization"] = "tc:256", ["--position-embedding-type"] = "a:2397",
    ["--untie-embeddings-and-output-weights"] = "a:2460", ["--disable-bias-linear"] = "tc:213",
    ["--add-qkv-bias"] = "tc:218", ["--qk-layernorm"] = "tc:259", ["--num-experts"] = "a:3518",
    ["--moe-router-topk"] = "tc:760", ["--moe-ffn-hidden-size"] = "tc:740",
    ["--moe-shared-expert-intermediate-size"] = "tc:701", ["--moe-layer-freq"] = "a:3520",
    ["--mtp-num-layers"] = "tc:68", ["--max-position-embeddings"] = "a:2394",
    ["--vocab-size"] = "trc:679", ["--rotary-base"] = "a:2418", ["--use-rope-scaling"] = "a:2424",
    ["--rope-scaling-factor"] = "a:2426", ["--rope-type"] = "a:2906",
    ["--rotary-scaling-factor"] = "a:3558", ["--mscale"] = "a:3560", ["--mscale-all-dim"] = "a:3562",
    ["--yarn-original-max-position-embeddings"] = "a:2400", ["--yarn-beta-fast"] = "a:2402",
    ["--yarn-beta-slow"] = "a:2404", ["--norm-epsilon"] = "tc:201", ["--attention-dropout"] = "tc:191",
    ["--hidden-dropout"] = "tc:188", ["--moe-router-score-function"] = "tc:808",
    ["--moe-router-enable-expert-bias"] = "tc:816", ["--moe-router-topk-scaling-factor"] = "tc:804",
    ["--moe-router-num-groups"] = "tc:780", ["--moe-router-group-topk"] = "tc:796",
    ["--moe-grouped-gemm"] = "tc:850", ["--moe-token-dispatcher-type"] = "tc:891",
    ["--tensor-model-parallel-size"] = "mpc:11", ["--pipeline-model-parallel-size"] = "mpc:83",
    ["--sequence-parallel"] = "mpc:94", ["--context-parallel-size"] = "mpc:100",
    ["--expert-model-parallel-size"] = "mpc:127", ["--expert-tensor-parallel-size"] = "mpc:130",
    ["--num-layers-per-virtual-pipeline-stage"] = "a:3114",
    ["--num-virtual-stages-per-pipeline-rank"] = "a:3116",
    ["--decoder-first-pipeline-num-layers"] = "a:3095", ["--decoder-last-pipeline-num-layers"] = "a:3099",
    ["--pipeline-model-parallel-layout"] = "a:3103",
    ["--account-for-embedding-in-pipeline-split"] = "tc:137",
    ["--account-for-loss-in-pipeline-split"] = "tc:141",
    ["--use-distributed-optimizer"] = "a:3156", ["--use-megatron-fsdp"] = "cc:92",
    ["--data-parallel-sharding-strategy"] = "a:3190", ["--ckpt-format"] = "trc:486",
    ["--micro-batch-size"] = "trc:11", ["--global-batch-size"] = "trc:15", ["--seq-length"] = "a:3305",
    ["--bf16"] = "mpc:180", ["--fp16"] = "mpc:177", ["--fp8-format"] = "tc:588",
    ["--fp8-recipe"] = "tc:594", ["--fp8-param-gather"] = "a:2016", ["--fp4-format"] = "tc:674",
    ["--fp4-recipe"] = "tc:679", ["--fp4-param-gather"] = "a:2012",
    ["--first-last-layers-bf16"] = "tc:649", ["--num-layers-at-start-in-bf16"] = "tc:652",
    ["--num-layers-at-end-in-bf16"] = "tc:656", ["--recompute-granularity"] = "tc:532",
    ["--recompute-method"] = "tc:543", ["--recompute-num-layers"] = "tc:551",
    ["--recompute-modules"] = "tc:560", ["--cpu-offloading-num-layers"] = "mpc:461",
  },
  torchrun = {["--nproc-per-node"] = true, ["--nnodes"] = true},  -- DISTRIBUTED_ARGS
  -- not flags: cpu_offloading is excluded from the generated flags (a:2320) and follows from
  -- --cpu-offloading-num-layers > 0 (a:1950)
  not_flags = {["--cpu-offloading"] = "a:2320"},
  -- Megatron's default for a model-fidelity flag, and the model config's value it must take
  defaults = {
    {"--rotary-base", 10000, "a:2418", function(c) return c.rope_theta end},
    {"--norm-epsilon", 1e-5, "tc:201", function(c) return c.rms_norm_eps end},
    {"--attention-dropout", 0.1, "tc:191", function(c) return c.attention_dropout or 0 end},
    {"--hidden-dropout", 0.1, "tc:188", function() return 0 end},
    {"--moe-router-score-function", "softmax", "tc:808", function(c)
       return c.n_routed_experts and (c.scoring_func or "softmax") end},
    {"--moe-router-topk-scaling-factor", nil, "tc:804", function(c) return c.routed_scaling_factor end},
    {"--moe-router-num-groups", nil, "tc:780", function(c) return c.n_group end},
    {"--moe-router-group-topk", nil, "tc:796", function(c) return c.topk_group end},
    {"--rotary-scaling-factor", 1.0, "a:3558", function(c)
       return c.rope_scaling and c.rope_scaling.type == "yarn" and c.rope_scaling.factor or nil end},
    {"--mscale-all-dim", 0.0, "a:3562", function(c)
       return c.rope_scaling and c.rope_scaling.type == "yarn" and c.rope_scaling.mscale_all_dim or nil end},
    {"--rope-scaling-factor", 8.0, "a:2426", function(c)
       return c.rope_scaling and c.rope_scaling.rope_type == "llama3" and c.rope_scaling.factor or nil end},
  },
  -- characters bash expands in an unquoted word (globbing, with nullglob they vanish)
  glob = "[%*%?%[]",
}

-- megatron_problems(text, want) -> list of rules the file breaks
local function megatron_problems(text, want)
  local out = {}
  local function bad(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  local parsed = assert(flags.parse(text, "megatron_args.sh"))
  local o = {}
  for _, opt in ipairs(parsed.options) do
    o[opt.flag] = opt.values
    if MEGATRON.not_flags[opt.flag] then bad("%s is no flag (%s)", opt.flag, MEGATRON.not_flags[opt.flag])
    elseif not (MEGATRON.flags[opt.flag] or MEGATRON.torchrun[opt.flag]) then bad("unknown flag %s", opt.flag) end
  end
  local function int(f) return o[f] and math.tointeger(tonumber(o[f][1])) end
  -- the shell keeps every word whole: glob characters only inside quotes, arrays quoted
  for _, tok in ipairs(assert(flags.tokens(text, "megatron_args.sh"))) do
    if tok.kind == "word" then
      for _, p in ipairs(tok.parts) do
        if p.lit and not p.quoted and p.lit:find(MEGATRON.glob) then bad("unquoted glob word %s", p.lit) end
      end
    end
  end
  for arr in text:gmatch("%${([%u_]+)%[@%]}") do
    if not text:find('"${' .. arr .. '[@]}"', 1, true) then bad("${%s[@]} unquoted", arr) end
  end
  -- Megatron-FSDP saves only fsdp_dtensor (a:1169)
  if o["--use-megatron-fsdp"] and not (o["--ckpt-format"] and o["--ckpt-format"][1] == "fsdp_dtensor") then
    bad("Megatron-FSDP without --ckpt-format fsdp_dtensor (a:1169)")
  end
  -- CPU offloading: not with PP (tc:1891), not with recompute (tc:1896), fewer layers than
  -- the model (tc:1885)
  local off, pp, L = int("--cpu-offloading-num-layers") or 0, int("--pipeline-model-parallel-size") or 1,
                     int("--num-layers")
  if off > 0 and pp > 1 then bad("CPU offloading with PP %d (tc:1891)", pp) end
  if off > 0 and o["--recompute-granularity"] then bad("CPU offloading with recompute (tc:1896)") end
  if off > 0 and L and off >= L then bad("CPU offloading %d of %d layers (tc:1885)", off, L) end
  -- FP8 and FP4 exclusive (a:1101); FP4 param gather needs FP4 (a:1105)
  if o["--fp8-format"] and o["--fp4-format"] then bad("--fp8-format with --fp4-format (a:1101)") end
  if o["--fp4-param-gather"] and not o["--fp4-format"] then bad("--fp4-param-gather without FP4 (a:1105)") end
  if o["--fp8-param-gather"] and not (o["--use-distributed-optimizer"] or o["--use-megatron-fsdp"]) then
    bad("--fp8-param-gather without the distributed optimizer or Megatron-FSDP (a:1096)")
  end
  -- recompute modules: Megatron's set (tc:1945-1962); moe_act needs grouped GEMM (tc:1964),
  -- mla_up_proj MLA (tc:1969); delayed FP8 refuses moe_act and layernorm (tc:1999-2003)
  local ALLOWED = {core_attn = 1, moe_act = 1, layernorm = 1, mla_up_proj = 1, mlp = 1, moe = 1,
                   shared_experts = 1}
  local granularity = o["--recompute-granularity"] and o["--recompute-granularity"][1]
  for _, m in ipairs(granularity == "selective" and o["--recompute-modules"] or {}) do
    if not ALLOWED[m] then bad("recompute module %s (tc:1945)", m) end
    if m == "moe_act" and not o["--moe-grouped-gemm"] then bad("moe_act without grouped GEMM (tc:1964)") end
    if m == "mla_up_proj" and not o["--multi-latent-attention"] then bad("mla_up_proj without MLA (tc:1969)") end
    local recipe = o["--fp8-format"] and (o["--fp8-recipe"] and o["--fp8-recipe"][1] or "delayed")
    if recipe == "delayed" and (m == "moe_act" or m == "layernorm") then bad("%s with delayed FP8 (tc:2001)", m) end
  end
  -- MTP takes position types using position ids (a:1944)
  local pos = o["--position-embedding-type"] and o["--position-embedding-type"][1] or "learned_absolute"
  if int("--mtp-num-layers") and not ({learned_absolute = 1, rope = 1, mrope = 1, none = 1})[pos] then
    bad("MTP with position type %s (a:1944)", pos)
  end
  -- --moe-layer-freq is a Python list expression, one entry per layer (a:253)
  if o["--moe-layer-freq"] then
    local f = o["--moe-layer-freq"][1]
    local d, m = f:match("^%(%[0%]%*(%d+)%+%[1%]%*(%d+)%)$")
    local n = d and tonumber(d) + tonumber(m)
    if not d and f:match("^%[[01,]+%]$") then n = #f:gsub("[^01]", "") end  -- every layer's bit
    if n ~= L then bad("--moe-layer-freq %s over %s layers", f, L) end
  end
  -- the world: tp x pp x cp divides it (megatron/core/parallel_state.py:815-823), and so
  -- does etp x ep x pp (874-883); the global batch divides over mbs x dp
  -- (megatron/core/num_microbatches_calculator.py:367-372)
  local world = (int("--nproc-per-node") or 1) * (int("--nnodes") or 1)
  local tp, cp = int("--tensor-model-parallel-size") or 1, int("--context-parallel-size") or 1
  local ep, etp = int("--expert-model-parallel-size") or 1, int("--expert-tensor-parallel-size") or tp
  if world ~= want.devices then bad("torchrun starts %d ranks for %d devices", world, want.devices) end
  if world % (tp * pp * cp) ~= 0 then bad("world %d over tp x pp x cp (parallel_state.py:822)", world) end
  if world % (etp * ep * pp) ~= 0 then bad("world %d over etp x ep x pp (parallel_state.py:881)", world) end
  local dp = world // (tp * pp * cp)
  local gbs, mbs = int("--global-batch-size"), int("--micro-batch-size") or 1
  if not gbs or gbs % (mbs * dp) ~= 0 then bad("global batch %s over mbs %d x dp %d", tostring(gbs), mbs, dp) end
  if gbs ~= want.global_batch then bad("global batch %s, plan %d", tostring(gbs), want.global_batch) end
  -- ndplan's reader restates Megatron's layout rules (engine/core/strategy.c): it must accept
  local info, err = script.read(text, "megatron_args.sh")
  if not info then bad("layout: %s", err) end
  return out, o
end

---------------------------------------------------------------------------------------------
-- torchtitan. v0.2.2: jc = torchtitan/config/job_config.py, pps =
-- torchtitan/distributed/pipeline_parallel.py, pd = torchtitan/distributed/parallel_dims.py;
-- main (b5bcd76, after #4121): cfg = torchtitan/config/configs.py, ac =
-- torchtitan/distributed/activation_checkpoint.py
---------------------------------------------------------------------------------------------
local TORCHTITAN = {
  ["v0.2.2"] = {
    flags = {["model.name"] = "jc:101", ["model.flavor"] = "jc:104", ["model.converters"] = "jc:118",
             ["training.local_batch_size"] = "jc:253", ["training.global_batch_size"] = "jc:256",
             ["training.seq_len"] = "jc:261",
             ["parallelism.data_parallel_replicate_degree"] = "jc:313",
             ["parallelism.data_parallel_shard_degree"] = "jc:324",
             ["parallelism.fsdp_reshard_after_forward"] = "jc:336",
             ["parallelism.tensor_parallel_degree"] = "jc:351",
             ["parallelism.pipeline_parallel_degree"] = "jc:360",
             ["parallelism.pipeline_parallel_first_stage_less_layers"] = "jc:377",
             ["parallelism.pipeline_parallel_last_stage_less_layers"] = "jc:383",
             ["parallelism.pipeline_parallel_layers_per_stage"] = "jc:389",
             ["parallelism.pipeline_parallel_schedule"] = "jc:396",
             ["parallelism.pipeline_parallel_microbatch_size"] = "jc:412",
             ["parallelism.context_parallel_degree"] = "jc:428",
             ["parallelism.expert_parallel_degree"] = "jc:454",
             ["parallelism.expert_tensor_parallel_degree"] = "jc:464",
             ["activation_checkpoint.mode"] = "jc:652",
             ["activation_checkpoint.selective_ac_option"] = "jc:655",
             ["quantize.linear.float8.enable_fsdp_float8_all_gather"] = "jc:732",
             ["quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp"] = "jc:735",
             ["quantize.linear.float8.recipe_name"] = "jc:738",
             ["quantize.linear.float8.filter_fqns"] = "jc:741",
             ["quantize.linear.mx.recipe_name"] = "jc:777"},
    -- registered converters (components/quantization/float8.py:238, mx.py:171)
    converters = {["quantize.linear.float8"] = true, ["quantize.linear.mx"] = true},
    ac_modes = {selective = true, full = true, memory_budget = true, none = true},  -- jc:652
    -- models/<name>/__init__.py flavours and models/<name>/train_configs/*.toml
    flavors = {llama3 = {["8B"] = 51, ["70B"] = 82, ["405B"] = 91}, deepseek_v3 = {["671B"] = 130},
               qwen3 = {["32B"] = 109, ["30B-A3B"] = 145, ["235B-A22B"] = 168},
               llama4 = {["17bx16e"] = 38, ["17bx128e"] = 51}, gpt_oss = {["120b"] = 62}},
    tomls = {"llama3/train_configs/llama3_8b.toml", "llama3/train_configs/llama3_70b.toml",
             "llama3/train_configs/llama3_405b.toml", "deepseek_v3/train_configs/deepseek_v3_671b.toml",
             "qwen3/train_configs/qwen3_32b.toml", "llama4/train_configs/llama4_17bx16e.toml",
             "llama4/train_configs/llama4_17bx128e.toml", "llama3/train_configs/debug_model.toml",
             "qwen3/train_configs/debug_model.toml", "gpt_oss/train_configs/debug_model.toml"},
  },
  main = {
    flags = {["training.num_tokens_per_microbatch_per_dp_rank"] = "cfg:37",
             ["training.num_tokens_per_train_step"] = "cfg:43", ["training.max_context_length"] = "cfg:51",
             ["parallelism.data_parallel_replicate_degree"] = "cfg:122",
             ["parallelism.data_parallel_shard_degree"] = "cfg:133",
             ["parallelism.fsdp_reshard_after_forward"] = "cfg:145",
             ["parallelism.tensor_parallel_degree"] = "cfg:166",
             ["parallelism.pipeline_parallel_degree"] = "cfg:180",
             ["parallelism.pipeline_parallel_first_stage_less_layers"] = "cfg:197",
             ["parallelism.pipeline_parallel_last_stage_less_layers"] = "cfg:203",
             ["parallelism.pipeline_parallel_layers_per_stage"] = "cfg:209",
             ["parallelism.pipeline_parallel_schedule"] = "cfg:216",
             ["parallelism.num_pp_microbatches"] = "cfg:232",
             ["parallelism.context_parallel_degree"] = "cfg:239",
             ["parallelism.expert_parallel_degree"] = "cfg:282"},
    ac = {selective = true, full = true, ["memory-budget"] = true, none = true},  -- ac:332-337
    -- models/<name>/config_registry.py
    configs = {llama3_8b = 194, llama3_70b = 267, llama3_405b = 305, deepseek_v3_671b = 209,
               qwen3_30b_a3b = 305, qwen3_32b = 340, gpt_oss_120b = 104},
  },
  single_stage = {["1F1B"] = true, GPipe = true},  -- PipelineScheduleSingle (pps:58, 94-101)
  multi_stage = {Interleaved1F1B = true},          -- at least 2 stages per rank (pps:103-108)
}

-- torchtitan's split, restated (pps:75-77 and 266-340): ceil((L + fl + ll) / per) stages;
-- the effective layers spread evenly, the remainder one each to the first stages, the first
-- and the last giving up fl and ll; raises past pps:269-295
local function titan_split(L, per, fl, ll)
  local n = math.ceil((L + fl + ll) / per)
  local eff = L + fl + ll
  local base, extra = eff // n, eff % n
  if n > eff or base == 0 or fl > base or ll > base then return nil end
  local out, at = {}, 0
  for k = 1, n do
    local e = base + (k - 1 < extra and 1 or 0) - (k == 1 and fl or 0) - (k == n and ll or 0)
    e = math.max(0, math.min(e, L - at))
    out[k], at = e, at + e
  end
  return out
end

local function titan_problems(text, want, dialect, layers)
  local out = {}
  local function bad(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  local R = TORCHTITAN[dialect]
  local parsed = assert(flags.parse(text, "torchtitan_args.sh"))
  local v = {}
  for _, opt in ipairs(parsed.options) do
    local k = opt.flag:sub(3)
    local found
    for name in pairs(R.flags) do if name:gsub("_", "-") == k then found = name end end
    if not found then bad("unknown flag %s", opt.flag) else v[found] = opt.values[1] end
  end
  local function n(k) return math.tointeger(tonumber(v[k])) end
  if dialect == "v0.2.2" then
    local name, flavor = v["model.name"], v["model.flavor"]
    if not (R.flavors[name] and R.flavors[name][flavor]) then bad("no model %s %s", tostring(name), tostring(flavor)) end
    local toml = parsed.vars.CONFIG_FILE and parsed.vars.CONFIG_FILE:match("models/(.*)$")
    local known = false
    for _, t in ipairs(R.tomls) do known = known or t == toml end
    if not known then bad("CONFIG_FILE %s is no v0.2.2 TOML", tostring(parsed.vars.CONFIG_FILE)) end
    if v["model.converters"] and not R.converters[v["model.converters"]] then bad("converter %s", v["model.converters"]) end
    local mode = v["activation_checkpoint.mode"]
    if not R.ac_modes[mode or ""] then bad("activation_checkpoint.mode %s (jc:652)", tostring(mode)) end
  else
    if not R.configs[parsed.vars.CONFIG or ""] then bad("no config function %s", tostring(parsed.vars.CONFIG)) end
    local sub = text:match("\n%s+activation%-checkpoint:([%w%-]+)\n%)")  -- the last argument
    if not R.ac[sub or ""] then bad("activation-checkpoint subcommand %s (ac:332-337)", tostring(sub)) end
  end
  -- the mesh: dp_replicate x dp_shard x cp x tp x pp = world (pd:53); EP x ETP divides
  -- dp_shard x cp x tp with ETP 1 or TP (pd:59, 138)
  local rep, shard = n("parallelism.data_parallel_replicate_degree") or 1, n("parallelism.data_parallel_shard_degree") or -1
  local tp, cp, pp = n("parallelism.tensor_parallel_degree") or 1, n("parallelism.context_parallel_degree") or 1,
                     n("parallelism.pipeline_parallel_degree") or 1
  local ep, etp = n("parallelism.expert_parallel_degree") or 1, n("parallelism.expert_tensor_parallel_degree") or 1
  if shard < 1 then bad("dp_shard %d left to infer", shard) end
  if rep * shard * cp * tp * pp ~= want.devices then bad("mesh %d x %d x %d x %d x %d for %d devices (pd:53)",
    rep, shard, cp, tp, pp, want.devices) end
  if ep > 1 and (etp ~= 1 and etp ~= tp) then bad("etp %d (pd:59)", etp) end
  if ep > 1 and (shard * cp * tp) % (ep * etp) ~= 0 then bad("efsdp not integral (pd:138)") end
  -- the batch, bottom-up: v0.2.2 local x dp x GAS = global (jc:258), local a multiple of the
  -- PP micro-batch (jc:415-417); main tokens per micro-batch x num_pp_microbatches x dp x
  -- GAS = tokens per step (cfg:43-51)
  local dp = rep * shard
  local global
  if dialect == "v0.2.2" then
    local lbs, gbs = n("training.local_batch_size"), n("training.global_batch_size")
    local pmb = n("parallelism.pipeline_parallel_microbatch_size") or 1
    if pp > 1 and lbs % pmb ~= 0 then bad("local batch %d over PP micro-batch %d (jc:415)", lbs, pmb) end
    if gbs % (lbs * dp) ~= 0 then bad("global %d over local %d x dp %d (jc:258)", gbs, lbs, dp) end
    global = gbs
  else
    local t, step, ctx = n("training.num_tokens_per_microbatch_per_dp_rank"),
                         n("training.num_tokens_per_train_step"), n("training.max_context_length")
    local nmb = pp > 1 and (n("parallelism.num_pp_microbatches") or 1) or 1
    if t % ctx ~= 0 then bad("micro-batch tokens %d over context %d", t, ctx) end
    if step % (t * nmb * dp) ~= 0 then bad("tokens per step %d over %d x %d x %d (cfg:43-51)", step, t, nmb, dp) end
    global = step // ctx
  end
  if global ~= want.global_batch then bad("global batch %s, plan %d", tostring(global), want.global_batch) end
  -- the pipeline split: stages divide over PP (pps:85), one per rank for 1F1B/GPipe (94),
  -- at least two for interleaved (104); the layers per stage it builds are the plan's
  if pp > 1 then
    local per = n("parallelism.pipeline_parallel_layers_per_stage")
    local fl = n("parallelism.pipeline_parallel_first_stage_less_layers") or 1  -- jc:377
    local ll = n("parallelism.pipeline_parallel_last_stage_less_layers") or 1   -- jc:383
    local split = per and titan_split(layers, per, fl, ll)
    local sched = v["parallelism.pipeline_parallel_schedule"]
    if not split then bad("no split for %s layers per stage", tostring(per))
    else
      if #split % pp ~= 0 then bad("%d stages over pp %d (pps:85)", #split, pp) end
      if TORCHTITAN.single_stage[sched] and #split ~= pp then bad("%s with %d stages per rank (pps:94)", sched, #split // pp) end
      if TORCHTITAN.multi_stage[sched] and #split < 2 * pp then bad("%s with one stage per rank (pps:104)", sched) end
      local w = {}
      for k, c in ipairs(want.chunks) do w[k] = c end
      w[#w] = w[#w] - want.mtp
      if table.concat(split, ",") ~= table.concat(w, ",") then
        bad("split %s, stated %s", table.concat(split, ","), table.concat(w, ","))
      end
    end
  end
  return out, v
end

---------------------------------------------------------------------------------------------
-- DeepSpeed 0.19.6 (and 0.16.4). cfg = deepspeed/runtime/config.py, pe =
-- deepspeed/runtime/pipe/engine.py, eng = deepspeed/runtime/engine.py, aep =
-- deepspeed/module_inject/auto_ep_config.py
---------------------------------------------------------------------------------------------
local DEEPSPEED = {
  keys = {train_batch_size = "cfg:937", train_micro_batch_size_per_gpu = "cfg:937",
          gradient_accumulation_steps = "cfg:937", bf16 = "cfg", fp16 = "cfg",
          zero_optimization = "cfg", tensor_parallel = "cfg:922", sequence_parallel_size = "cfg:721",
          expert_parallel = "cfg:923, aep:41-49", activation_checkpointing = "cfg"},
  since = {expert_parallel = "0.19.6"},
}

-- the world DeepSpeed's batch check counts: PipelineModule's topology (world / pp,
-- deepspeed/__init__.py:243-244, runtime/pipe/topology.py:240), else with Ulysses world /
-- sequence_parallel_size (cfg:721-722), else every rank (cfg:724)
local function ds_world(doc, devices, pp)
  if pp > 1 then return devices // pp end
  if doc.sequence_parallel_size then return devices // doc.sequence_parallel_size end
  return devices
end

local function deepspeed_problems(text, want, dialect, pp)
  local out = {}
  local function bad(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  local doc = assert(json.decode(text, "ds_config.json"))
  for k in pairs(doc) do
    if not DEEPSPEED.keys[k] then bad("unknown key %s", k) end
    if DEEPSPEED.since[k] and dialect == "0.16.4" then bad("%s is %s's", k, DEEPSPEED.since[k]) end
  end
  local mbs, gas, tbs = doc.train_micro_batch_size_per_gpu, doc.gradient_accumulation_steps, doc.train_batch_size
  local world = ds_world(doc, want.devices, pp)
  if tbs ~= mbs * gas * world then bad("train_batch_size %d ~= %d x %d x %d (cfg:937)", tbs, mbs, gas, world) end
  local stage = doc.zero_optimization and doc.zero_optimization.stage or 0
  if pp > 1 and stage >= 2 then bad("ZeRO-%d with pipeline stages (pe:76)", stage) end
  local tp = doc.tensor_parallel and doc.tensor_parallel.autotp_size or 1
  if doc.expert_parallel and tp > 1 then bad("AutoEP with TP (eng:586-590)") end
  if pp > 1 and tp > 1 then bad("AutoTP with a PipelineModule") end
  -- the samples a step trains: each TP group one copy
  local dp = want.devices // (tp * pp * (doc.sequence_parallel_size or 1))
  if mbs * gas * dp ~= want.global_batch then bad("a step trains %d samples, plan %d", mbs * gas * dp, want.global_batch) end
  return out, doc
end

---------------------------------------------------------------------------------------------
-- MindFormers r1.5.0. bt = mindformers/trainer/base_trainer.py, mu = mindformers/models/utils.py
---------------------------------------------------------------------------------------------
local MINDFORMERS = {
  archs = {LlamaForCausalLM = "mindformers/models/llama/llama.py:415",
           DeepseekV3ForCausalLM = "research/deepseek3/deepseek3.py:27"},
  configs = {LlamaConfig = "mindformers/models/llama/llama_config.py:33",
             DeepseekV3Config = "research/deepseek3/deepseek3_config.py:32"},
  -- 1.7's mcore form (configs/qwen3/pretrain_qwen3_32b_4k.yaml; configuration_qwen3.py:128)
  mcore = {qwen3 = "Qwen3ForCausalLM"},
}

local function mindformers_problems(text, want, dialect)
  local out = {}
  local function bad(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  local doc = assert(yaml.decode(text, "mindformers.yaml"))
  local pc, rc, mc = doc.parallel_config, doc.runner_config, doc.model.model_config
  if dialect == "mcore" then  -- use_legacy false: HF fields, model_type and architectures
    if doc.use_legacy ~= false then bad("mcore form without use_legacy: false (register.py:28-32)") end
    if not MINDFORMERS.mcore[mc.model_type or ""] then bad("model_type %s", tostring(mc.model_type)) end
    if not (mc.architectures and mc.architectures[1] == MINDFORMERS.mcore[mc.model_type or ""]) then bad("architectures") end
    if doc.model.arch then bad("model.arch in the mcore form") end
    mc.num_layers = mc.num_hidden_layers
  else
    if not MINDFORMERS.archs[(doc.model.arch or {}).type or ""] then bad("model.arch.type missing or unknown") end
    if not MINDFORMERS.configs[mc.type or ""] then bad("model_config.type missing or unknown") end
  end
  -- full_batch asks dataset_strategy full_batch (bt:192-197)
  if doc.parallel.full_batch and doc.parallel.dataset_strategy ~= "full_batch" then bad("dataset_strategy (bt:194)") end
  -- the global batch: PP > 1 batch x dp x micro_batch_num, PP = 1 (micro_batch_num reset
  -- to 1) batch x dp x gradient_accumulation_steps (bt:198-218)
  local global = pc.pipeline_stage > 1 and rc.batch_size * pc.data_parallel * pc.micro_batch_num
                 or rc.batch_size * pc.data_parallel * (rc.gradient_accumulation_steps or 1)
  if global ~= want.global_batch then bad("global batch %d, plan %d (bt:198-218)", global, want.global_batch) end
  if pc.data_parallel * pc.model_parallel * pc.pipeline_stage * pc.context_parallel ~= want.devices then
    bad("dp x mp x pp x cp ~= %d devices", want.devices)
  end
  -- stage layers: num_layers // (pp x interleave) + offset each (mu:162-164), all layers
  local vpp = mc.pp_interleave_num or 1
  local base, total = (mc.num_layers + (mc.mtp_depth or 0)) // (pc.pipeline_stage * vpp), 0
  local function add(x) if type(x) == "table" then for _, y in ipairs(x) do add(y) end else total = total + base + x end end
  if type(mc.offset) == "table" then add(mc.offset) else total = (base + mc.offset) * pc.pipeline_stage * vpp end
  if total ~= mc.num_layers + (mc.mtp_depth or 0) then bad("offsets build %d of %d layers (mu:162)", total, mc.num_layers) end
  -- select_recompute: false, true or {op pattern = per-stage counts} (mu:498-513); a list
  -- without patterns recomputes MindFormers' default ops (mu:143), not the priced ones
  local sel = doc.recompute_config.select_recompute
  if type(sel) == "table" and sel[1] ~= nil then bad("select_recompute counts without op patterns (mu:143, 506)") end
  return out, doc
end

---------------------------------------------------------------------------------------------
-- HyperParallel r2.0 AutoModels: the fields of its config classes (issue 15, read there; the
-- SAPP-ND resolved.yaml's pipeline_scheduler, pp_interleave_num and
-- activation_checkpoint.layers are not among them; EP is its own mesh axis)
---------------------------------------------------------------------------------------------
local HYPER = {
  sections = {model = {torch_dtype = 1, offset = 1}, accelerator = {tp_size = 1, pp_size = 1, cp_size = 1,
              sequence_parallel = 1}, fsdp_config = {dp_shard_size = 1, reshard_after_forward = 1},
              training = {micro_batch_size = 1, global_batch_size = 1},
              dataset = {data_transform = 1}, activation_checkpoint = {mode = 1}},
  modes = {off = true, selective = true, full = true},
}

local function hyper_problems(text, want)
  local out = {}
  local function bad(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  local doc = assert(yaml.decode(text, "hyper_train.yaml"))
  for sec, t in pairs(doc) do
    local allowed = HYPER.sections[sec]
    if not allowed then bad("unknown section %s", sec) else
      for k in pairs(t) do if not allowed[k] then bad("%s.%s is no field", sec, k) end end
    end
  end
  if not HYPER.modes[doc.activation_checkpoint.mode] then bad("mode %s", tostring(doc.activation_checkpoint.mode)) end
  local a, f = doc.accelerator, doc.fsdp_config
  if f.dp_shard_size * a.tp_size * a.pp_size * a.cp_size ~= want.devices then bad("mesh ~= devices") end
  if doc.training.global_batch_size ~= want.global_batch then bad("global batch") end
  if doc.training.global_batch_size % (doc.training.micro_batch_size * f.dp_shard_size) ~= 0 then bad("batch split") end
  return out, doc
end

---------------------------------------------------------------------------------------------
-- The sweep
---------------------------------------------------------------------------------------------
local modes = dofile("spec/support/check.lua").modes

-- Searches whose winners are exported: dense, MoE, long sequence, 8 to 16,384 devices
local SEARCHES = {
  {name = "8b on 8", model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64,
   seq_len = 8192, recompute = "auto"},
  {name = "70b on 64 (headline)", model = "llama3.1-70b", device = "h100", devices = 64,
   global_batch = 512, seq_len = 8192, recompute = "auto"},
  {name = "deepseek-v3 on 2048 (headline)", model = "deepseek-v3", device = "h800", devices = 2048,
   global_batch = 15360, seq_len = 4096},
  {name = "qwen3-30b-a3b on 64", model = "qwen3-30b-a3b", device = "h100", devices = 64,
   global_batch = 512, seq_len = 4096, recompute = "auto"},
  {name = "qwen3-32b on 32", model = "qwen3-32b", device = "h100", devices = 32, global_batch = 256,
   seq_len = 4096, recompute = "auto"},
  {name = "8b at 128k on 64", model = "llama3.1-8b", device = "h100", devices = 64, global_batch = 64,
   seq_len = 131072},
  {name = "405b on 16384", model = "llama3.1-405b", device = "h100", devices = 16384,
   global_batch = 8192, seq_len = 8192},
}

-- The pinned cases of issue 15 (nd.estimate arguments; each fits its device)
local PINNED = {
  ["vpp 2 selective"] = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
    seq_len = 8192, tp = 8, pp = 4, vpp = 2, sp = true, zero = 1, recompute = "selective"},
  ["deepseek per-layer, balanced layout"] = {model = "deepseek-v3", device = "h800", devices = 2048,
    global_batch = 15360, seq_len = 4096, pp = 16, ep = 64, zero = 1, recompute = "per_layer",
    max_mem = "70GiB", layout = "balanced", recompute_modes = {"none", "selective", "full"}},
  ["uneven layout, per-layer spec"] = {model = "llama3.1-8b", device = "h100", devices = 8,
    global_batch = 64, seq_len = 4096, pp = 4, zero = 1, stage_layers = {7, 9, 8, 8},
    layer_recompute = modes(32, "0-3:full,9-12:selective")},
  ["offload, one stage"] = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
    seq_len = 4096, tp = 8, zero = 3, offload = 0.43},
  ["offload with pp"] = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
    seq_len = 8192, tp = 8, pp = 4, sp = true, zero = 1, offload = 0.45, recompute = "selective"},
  ["zero-3, custom selective ops"] = {model = "llama3.1-8b", device = "h100", devices = 64,
    global_batch = 512, seq_len = 4096, zero = 3, recompute = "selective",
    selective_ops = {"attn_core", "norms"}},
  ["cp with zero-0"] = {model = "llama3.1-8b", device = "h100", devices = 64, global_batch = 64,
    seq_len = 32768, cp = 4, tp = 2, sp = true, zero = 0, recompute = "full"},
  ["fp8 param gather, one replica"] = {model = "llama3.1-8b", device = "h100", devices = 8,
    global_batch = 64, seq_len = 4096, tp = 8, sp = true, zero = 0, recompute = "full",
    precision = "fp8:tensorwise", fp8_param_gather = true},
  ["fp8 param gather, zero-0 over dp 2"] = {model = "llama3.1-8b", device = "h100", devices = 16,
    global_batch = 64, seq_len = 4096, tp = 8, sp = true, zero = 0, recompute = "full",
    precision = "fp8:tensorwise", fp8_param_gather = true},
  ["qwen3 with the parallel optimizer"] = {model = "qwen3-32b", device = "h100", devices = 16,
    global_batch = 64, seq_len = 4096, tp = 4, pp = 4, sp = true, zero = 1, recompute = "full"},
  ["delayed fp8, selective norms and act"] = {model = "deepseek-v3", device = "h800", devices = 2048,
    global_batch = 4096, seq_len = 4096, tp = 2, sp = true, pp = 16, ep = 64, zero = 1, precision = "fp8:delayed",
    recompute = "selective", selective_ops = {"attn_core", "norms", "act"}},
  ["tensorwise fp8, selective norms and act"] = {model = "deepseek-v3", device = "h800", devices = 2048,
    global_batch = 4096, seq_len = 4096, tp = 2, sp = true, pp = 16, ep = 64, zero = 1, precision = "fp8:tensorwise",
    recompute = "selective", selective_ops = {"attn_core", "norms", "act", "mla_up"}},
  ["--recompute megatron"] = {model = "llama3.1-70b", device = "h100", devices = 64,
    global_batch = 512, seq_len = 8192, tp = 8, pp = 4, sp = true, zero = 1, recompute = "megatron",
    max_mem = "50GiB"},
}

local function plan_of(r, model, budget)
  return {model = model, strategy = r.strategy, job = r.job, result = r,
          layer_recompute = r.strategy.layer_recompute, budget_bytes = budget,
          layout = r.strategy.layout == "balanced" and "balanced" or nil}
end

local PLANS  -- {label, plan, device}
local function plans()
  if PLANS then return PLANS end
  PLANS = {}
  for _, s in ipairs(SEARCHES) do
    local args = {}
    for k, v in pairs(s) do if k ~= "name" then args[k] = v end end
    args.top, args.jobs = 2, 1
    local ranked, info = assert(nd.search(args))
    for i, row in ipairs(ranked) do
      local doc = require("ndplan.search").detail(row, info)
      PLANS[#PLANS + 1] = {label = s.name .. " #" .. i, plan = plan_of(doc, s.model, info.budget_bytes),
                           device = s.device, budget = info.budget_bytes}
    end
  end
  local keys = {}
  for k in pairs(PINNED) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local r = assert(nd.estimate(PINNED[k]))
    assert(r.fits, k .. " fits")
    PLANS[#PLANS + 1] = {label = k, plan = plan_of(r, PINNED[k].model, PINNED[k].max_mem and r.budget_bytes),
                         device = PINNED[k].device, budget = r.budget_bytes}
  end
  return PLANS
end

local DIALECTS = {megatron = {"d98e8a6"}, torchtitan = {"main", "v0.2.2"}, deepspeed = {"0.19.6", "0.16.4"},
                  mindformers = {"r1.5", "mcore"}, hyper = {"r2.0"}}

-- export(name, dialect, case) -> output of ndplan.export.write, the text written (or nil)
local function write(name, dialect, case)
  local dir = os.tmpname()
  os.remove(dir)
  assert(require("ndplan.io.files").mkdir_p(dir))
  local outs = assert(export.write(dir, {name}, case.plan, function(args)
    args.device, args.max_mem = case.device, case.budget
    return nd.estimate(args)
  end, {[name] = dialect}))
  local o = outs[1]
  local text = require("ndplan.io.files").read(o.path)
  os.remove(o.path)
  os.remove(dir)
  return o, text
end

-- the strategy the file says: the rounded one, else the plan (as ndplan.export.context has it)
local function said(case, o)
  local ctx = assert(export.context(case.plan))
  local st = export.copy(ctx.strategy)
  if o.rounded then
    local r = assert(nd.estimate((function()
      local a = export.copy(o.rounded)
      a.device, a.max_mem = case.device, case.budget
      return a
    end)()))
    st = assert(export.context({model = case.plan.model, strategy = r.strategy, job = r.job, result = r,
                                layer_recompute = r.strategy.layer_recompute})).strategy
  end
  return st, ctx
end

local CHECK = {megatron = megatron_problems, torchtitan = titan_problems, deepspeed = deepspeed_problems,
               mindformers = mindformers_problems, hyper = hyper_problems}

describe("trainer conformance", function()
  for _, name in ipairs(export.list()) do
    for _, dialect in ipairs(DIALECTS[name]) do
      it(string.format("%s %s: every file of the sweep is accepted by the trainer's rules, or refused", name, dialect), function()
        local written, refused = 0, 0
        for _, case in ipairs(plans()) do
          local o, text = write(name, dialect, case)
          if o.refused then
            refused = refused + 1
            assert.is_nil(text, case.label)  -- nothing written
            assert.matches("%S", o.refused)
          else
            written = written + 1
            local st, ctx = said(case, o)
            local want = {devices = case.plan.job.devices, global_batch = case.plan.job.global_batch,
                          mtp = ctx.mtp, chunks = st.vpp > 1 and st.chunk_layers or st.stage_layers}
            local problems = name == "deepspeed" and deepspeed_problems(text, want, dialect, st.pp)
                             or CHECK[name](text, want, dialect, ctx.layers)
            assert.same({}, problems, case.label .. "\n" .. text)
          end
        end
        assert.is_true(written > 0, name .. " wrote nothing")
      end)
    end
  end

  it("megatron: the files parse back to the plan they state, batch and layout included", function()
    for _, case in ipairs(plans()) do
      local o, text = write("megatron", nil, case)
      if not o.refused then
        local st = said(case, o)
        local info = assert(script.read(text, case.label))
        local back = info.strategy
        for _, f in ipairs({"tp", "pp", "cp", "mbs"}) do assert.equal(st[f], back[f], case.label .. " " .. f) end
        assert.equal(st.vpp, back.vpp or 1, case.label)
        assert.equal(st.dp > 1 and st.zero or 0, st.dp > 1 and (back.zero or 0) or 0, case.label .. " zero")
        if st.ep > 1 then assert.equal(st.ep, back.ep, case.label) end
        assert.same({devices = case.plan.job.devices, global_batch = case.plan.job.global_batch,
                     seq_len = case.plan.job.seq_len}, info.job)
        assert.same(st.vpp > 1 and st.chunk_layers or st.stage_layers, info.chunk_layers, case.label)
        local per = back.layer_recompute
        if not per then
          per = {}
          for i = 1, #st.layer_recompute do per[i] = back.recompute or "none" end
        end
        assert.same(st.layer_recompute, per, case.label)
        assert.equal(st.offload > 0, back.offload == true, case.label .. " offload")
      end
    end
  end)

  -- what each other file states, compared after parsing it back (Megatron: above)
  local BACK = {torchtitan = {"dp", "tp", "pp", "vpp", "cp", "zero", "mbs", "mb", "recompute", "stage_layers"},
                deepspeed = {"dp", "tp", "cp", "zero", "mbs", "mb", "recompute", "offload"},
                mindformers = {"dp", "tp", "pp", "vpp", "cp", "ep", "sp", "zero", "mbs", "mb", "recompute", "stage_layers"},
                hyper = {"dp", "tp", "pp", "cp", "sp", "zero", "mbs", "mb", "recompute", "stage_layers"}}
  for name, fields in pairs(BACK) do
    for _, dialect in ipairs(DIALECTS[name]) do
      it(string.format("%s %s: the files parse back to the plan they state, batch as the trainer counts it", name, dialect), function()
        for _, case in ipairs(plans()) do
          local o, text = write(name, dialect, case)
          if not o.refused then
            local st, ctx = said(case, o)
            local got, job = export.get(name).parse(text, {layers = ctx.layers, mtp = ctx.mtp,
                                                           devices = case.plan.job.devices, pp = st.pp})
            assert.equal(case.plan.job.global_batch, job.global_batch, case.label .. " batch")
            for _, f in ipairs(fields) do
              local a, b = st[f], got[f]
              if f == "recompute" then
                a, b = st.layer_recompute, got.layer_recompute
                if not b then
                  b = {}
                  for i = 1, #a do b[i] = got.recompute == "off" and "none" or got.recompute end
                end
              elseif f == "stage_layers" then
                if st.pp == 1 or (st.vpp > 1 and name == "mindformers" and not st.chunk_layers) then goto next_field end
                a = export.copy(st.vpp > 1 and st.chunk_layers or st.stage_layers)
                a[#a] = a[#a] - ctx.mtp  -- these files count body layers
              elseif f == "zero" then
                a, b = st.dp > 1 and a or 0, st.dp > 1 and b or 0
              elseif f == "sp" then
                a, b = a and st.tp > 1, (b and st.tp > 1) or false
              elseif f == "offload" then
                a, b = a > 0, (b or 0) > 0
              end
              assert.same(a, b, string.format("%s: %s", case.label, f))
              ::next_field::
            end
          end
        end
      end)
    end
  end

  it("megatron: model-fidelity flags take the model's values, not Megatron's defaults", function()
    for _, m in ipairs({"llama3.1-70b", "deepseek-v3"}) do
      local case
      for _, c in ipairs(plans()) do if c.plan.model == m then case = case or c end end
      local o, text = write("megatron", nil, case)
      assert.is_nil(o.refused)
      local _, opts = megatron_problems(text, {devices = case.plan.job.devices,
                                               global_batch = case.plan.job.global_batch})
      local cfg = require("ndplan.config.model").config(m)
      for _, d in ipairs(MEGATRON.defaults) do
        local flag, default, src, of = d[1], d[2], d[3], d[4]
        local model_value = of(cfg)
        if model_value ~= nil then
          local got = opts[flag] and (tonumber(opts[flag][1]) or opts[flag][1]) or default
          assert.equal(model_value, got, string.format("%s %s (Megatron default %s, %s)", m, flag,
                                                        tostring(default), src))
        end
      end
      if cfg.n_routed_experts then  -- the expert bias of aux-loss-free routing
        assert.is_truthy(opts["--moe-router-enable-expert-bias"], m)
        assert.is_truthy(opts["--moe-grouped-gemm"], m)
      end
    end
  end)

  it("ndplan estimate --from-megatron reads ndplan's own export without --model", function()
    local case = plans()[3]  -- the headline Llama 70B winner
    local o, text = write("megatron", nil, case)
    assert.is_nil(o.refused)
    local info = assert(script.read(text, "megatron_args.sh"))
    local cfg = assert(script.model_config(info, "megatron_args.sh"))
    local m = assert(nd.model(cfg))
    local ref = assert(nd.model("llama3.1-70b"))
    assert.equal(ref:params().total, m:params().total)
  end)

  it("torchtitan: v0.2.2 rejected every even layout without first/last_stage_less_layers", function()
    -- why the exporter writes both: their defaults (1 and 1, jc:377/383) make one stage too many
    local split = titan_split(80, 20, 1, 1)
    assert.equal(5, #split)  -- for pp 4 with 1F1B: not one stage per rank
    assert.same({20, 20, 20, 20}, titan_split(80, 20, 0, 0))
  end)

  it("every trainer refuses or rounds what it cannot run, with the reason", function()
    local function reason(name, key, dialect)
      for _, c in ipairs(plans()) do
        if c.label == key then
          local o = write(name, dialect, c)
          return o.refused, o.notes
        end
      end
    end
    assert.matches("PipelineModule", (reason("deepspeed", "vpp 2 selective")))
    assert.matches("EP is its own mesh axis", (reason("hyper", "deepseek per-layer, balanced layout")))
    local _, notes = reason("megatron", "offload with pp")
    local why
    for _, n in ipairs(notes) do if n.field == "offload" then why = n.why end end
    assert.matches("transformer_config.py:1891", why)
  end)
end)
