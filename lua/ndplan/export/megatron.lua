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
-- at least as much as planned on every layer; when the plan says the budget it was chosen
-- for (plan.budget_bytes) and can be priced, the fastest of those forms that fits the budget
-- (ndplan.block_plan, with its own layout if plan.layout is "balanced") replaces the
-- round-up when it is faster, and the note gives both step times. GPipe, zero-bubble and
-- DualPipe have no flag (rounded to 1F1B); flash attention off has none either. CPU
-- offloading is whole layers on one stage without recompute (transformer_config.py:1885-
-- 1896): with PP or recompute the file drops it. The model's fidelity flags (rope, norm,
-- dropout, router) come from the config it was built from (M.fidelity_flags); the header
-- carries the torchrun line and what the user still supplies.
local export = require "ndplan.export"
local flags = require "ndplan.export.flags"
local script = require "ndplan.config.megatron_script"

local M = {}

M.DIALECTS = {"d98e8a6"}
M.dialect = "megatron-lm d98e8a6 (2026-08) flags; MindSpeed-LLM"
M.filename = "megatron_args.sh"

-- Nearest Megatron recompute for the plan's per-layer modes (see the header): rounds
-- said.layer_recompute up and returns its description {method, num_layers}.
local function round_recompute(ctx, said)
  local per = said.layer_recompute
  local any_full, any = false, false
  for _, m in ipairs(per) do
    any_full = any_full or m == "full"
    any = any or m ~= "none"
  end
  if not any then return {method = "none"} end
  local u = export.uniform_mode(per)
  if u == "selective" or not any_full then
    for i = 1, #per do per[i] = "selective" end
    return {method = "selective"}
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
    return {method = "uniform", num_layers = 1}
  end
  for i = 1, #per do per[i] = rounded[i] end
  return {method = "block", num_layers = n}
end

-- Megatron-Core's --recompute-modules for ndplan's selective switches (§2.2). A dense
-- MLP's activation has no module of its own: `mlp` recomputes the whole MLP; nor has the
-- MoE dispatch: `moe` recomputes the whole MoE layer.
local MODULES = {attn_core = "core_attn", norms = "layernorm", mla_up = "mla_up_proj"}
M.SWITCHES = {core_attn = "attn_core", layernorm = "norms", mla_up_proj = "mla_up",
              moe_act = "act", mlp = "act", moe = "moe_dispatch"}

-- recompute_modules(ctx, said, unsaid) -> the flag and its values, {} for the default
-- (core_attn alone)
local function recompute_modules(ctx, said, unsaid)
  local ops = said.selective_ops or {"attn_core"}
  if #ops == 1 and ops[1] == "attn_core" then return {} end
  local out = {"--recompute-modules"}
  local moe, dense = false, ctx.model == nil
  for _, g in ipairs(ctx.model and ctx.model:layers() or {}) do
    if g.kind:find("moe", 1, true) then moe = true else dense = true end
  end
  for _, op in ipairs(ops) do
    if op == "act" then
      -- delayed FP8 scaling refuses moe_act recompute (transformer_config.py:1999-2003):
      -- the whole MoE layer (moe) recomputes at least as much
      if moe and said.precision == "fp8:delayed" then
        out[#out + 1] = "moe"
        unsaid[#unsaid + 1] = {field = "selective_ops", plan = "act",
          why = "delayed FP8 scaling refuses moe_act recompute (transformer_config.py:2001): moe "
                .. "recomputes the whole MoE layer (more time than priced, no more memory)"}
      elseif moe then out[#out + 1] = "moe_act" end
      if dense then
        out[#out + 1] = "mlp"
        unsaid[#unsaid + 1] = {field = "selective_ops", plan = "act",
          why = "no Megatron module recomputes a dense MLP's activation alone: mlp recomputes "
                .. "the whole MLP (more time than priced, no more memory)"}
      end
    elseif op == "moe_dispatch" then
      out[#out + 1] = "moe"
      unsaid[#unsaid + 1] = {field = "selective_ops", plan = "moe_dispatch",
        why = "no Megatron module recomputes the MoE dispatch alone: moe recomputes the whole "
              .. "MoE layer (more time than priced, no more memory)"}
    elseif op == "alt_mm" then  -- torchtitan's per-op policy: no Megatron form
      unsaid[#unsaid + 1] = {field = "selective_ops", plan = "alt_mm",
        why = "Megatron has no module that recomputes every second projection (torchtitan's "
              .. "per-op checkpointing): left out (less time than priced, more memory)"}
    else
      out[#out + 1] = MODULES[op]
    end
  end
  return out
end

local function same_list(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- choose_recompute(ctx, said, plan, opts, why) -> desc, info: the round-up, or, when the
-- plan says its budget and a price is at hand, the budget's block plan if that is faster
-- (said's layer_recompute, and stage_layers with a free layout, become the choice).
local function choose_recompute(ctx, said, plan, opts, why)
  local planned = export.copy(said.layer_recompute)
  local desc = round_recompute(ctx, said)
  why.recompute = (why.recompute and why.recompute .. "; " or "")
                  .. "Megatron recomputes selectively everywhere, or fully on every layer or on the "
                  .. "first N layers of each stage (§2.2)"
  local info = {recompute = desc, chose = "exact"}
  if same_list(planned, said.layer_recompute) then return desc, info end
  info.chose = "rounded up"
  local budget = plan.budget_bytes
  local price = budget and export.pricer(plan, opts)
  if not price then
    why.recompute = why.recompute .. "; rounded up"
    return desc, info
  end
  local units = require "ndplan.c.units"
  local block_plan = require "ndplan.block_plan"
  local function step(r, refusal)
    return r and units.seconds(r.step_time_s) or ("refused: " .. tostring(refusal))
  end
  local up, uwhy = price(export.estimate_args(ctx, said))
  info.roundup = up
  local args = export.estimate_args(ctx, said)
  args.layout = plan.layout
  local best, bdesc = block_plan.megatron(args, budget, {price = price})
  local gib = units.bytes(budget, "binary")
  local up_fits = up and up.peak_memory_bytes <= budget
  if best and (not up_fits or best.step_time_s < up.step_time_s * (1 - 1e-9)) then
    info.chose, info.block, info.recompute = "block plan", best, bdesc
    for i = 1, #said.layer_recompute do said.layer_recompute[i] = bdesc.layer_recompute[i] end
    local moved = said.vpp <= 1 and not same_list(said.stage_layers, bdesc.stage_layers)
    if moved then
      said.stage_layers = export.copy(bdesc.stage_layers)
      why.stage_layers = "balanced again for the recompute Megatron states (layout balanced)"
    end
    why.recompute = string.format("%s; chose %s%s for the %s budget, step time %s, instead of "
                                  .. "rounding up to %s, %s%s", why.recompute,
                                  block_plan.describe(bdesc), moved and " on its own layout" or "",
                                  gib, step(best),
                                  block_plan.describe(desc, said.vpp), step(up, uwhy),
                                  up and not up_fits and " and over the budget" or "")
    return bdesc, info
  end
  info.block = best
  why.recompute = string.format("%s; rounded up to %s, step time %s; %s", why.recompute,
                                block_plan.describe(desc, said.vpp), step(up, uwhy),
                                best and string.format("the fastest form under the %s budget "
                                  .. "is no faster (%s, %s)", gib, block_plan.describe(bdesc),
                                  step(best))
                                  or tostring(bdesc))
  return desc, info
end

-- Megatron's layout flags for the plan's layout (body+MTP per chunk, layer order), the
-- first form whose layout (resolved by the core, ndplan.megatron_script.layout) is exactly
-- the plan's: the plain split; the accounting flags; first/last stage layers (with
-- --num-virtual-stages-per-pipeline-rank, as Megatron asks); else the layout string.
local function same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

local function layout_flags(ctx, st)
  if st.pp <= 1 then return {} end
  local want = st.vpp > 1 and st.chunk_layers or st.stage_layers
  if st.vpp > 1 and not want then return {"--num-layers-per-virtual-pipeline-stage", ctx.layers // (st.pp * st.vpp)} end
  local function says(fields)
    fields.pp, fields.vpp = st.pp, st.vpp
    local lay = script.layout(fields, ctx.layers, ctx.mtp)
    return lay and same(lay.stage_layers, want)
  end
  local function vpp_per(extra)
    if st.vpp <= 1 then return {} end
    return {"--num-layers-per-virtual-pipeline-stage", (ctx.layers + extra) // (st.pp * st.vpp)}
  end
  -- (ndplan's even split spreads a remainder: Megatron's plain split has none)
  if ctx.layers % (st.pp * st.vpp) == 0 and says({}) then return vpp_per(0) end
  local E, Lo = "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"
  for _, a in ipairs({{true, true}, {true, false}, {false, true}}) do
    if says({[E] = a[1] or nil, [Lo] = a[2] or nil}) then
      local out = vpp_per((a[1] and 1 or 0) + (a[2] and 1 or 0))
      if a[1] then out[#out + 1] = "--account-for-embedding-in-pipeline-split" end
      if a[2] then out[#out + 1] = "--account-for-loss-in-pipeline-split" end
      return out
    end
  end
  -- first/last: the first and last stages' body layers, each alone or both
  local first, last = st.stage_layers[1], st.stage_layers[st.pp] - ctx.mtp
  local F, Lf = "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"
  for _, c in ipairs({{first, nil}, {nil, last}, {first, last}}) do
    if (c[1] or 1) > 0 and (c[2] or 1) > 0 and says({[F] = c[1], [Lf] = c[2]}) then
      local out = st.vpp > 1 and {"--num-virtual-stages-per-pipeline-rank", st.vpp} or {}
      if c[1] then out[#out + 1] = "--decoder-first-pipeline-num-layers"; out[#out + 1] = c[1] end
      if c[2] then out[#out + 1] = "--decoder-last-pipeline-num-layers"; out[#out + 1] = c[2] end
      return out
    end
  end
  local lay = assert(script.layout({pp = st.pp, vpp = st.vpp, stage_layers = want}, ctx.layers, ctx.mtp))
  return {"--pipeline-model-parallel-layout", lay.pipeline_layout}
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
    -- which layers are MoE, as the Python-list string §2.2 shows for first-k-dense; any
    -- other order (Llama 4's, Jamba's interleaving) as the list of every layer's 0 or 1,
    -- which the flag evaluates the same way (arguments.py moe_freq_type)
    local dense, moe, each, ordered = 0, 0, {}, true
    for _, run in ipairs(m:layers()) do
      if not run.mtp then
        local bit = run.kind:match("moe") and 1 or 0
        if bit == 0 and moe > 0 then ordered = false end
        if bit == 1 then moe = moe + run.count else dense = dense + run.count end
        for _ = 1, run.count do each[#each + 1] = bit end
      end
    end
    if dense > 0 and ordered then
      add("--moe-layer-freq", string.format("([0]*%d+[1]*%d)", dense, moe))
    elseif dense > 0 then add("--moe-layer-freq", "[" .. table.concat(each, ",") .. "]") end
  end
  if ctx.mtp > 0 then add("--mtp-num-layers", ctx.mtp) end
  add("--max-position-embeddings", s.max_position, "--vocab-size", s.vocab_size)
  for _, v in ipairs(M.fidelity_flags(ctx)) do out[#out + 1] = v end
  return out
end

-- Flags whose Megatron defaults differ from the model's config (Megatron-LM d98e8a6): the
-- rotary base (arguments.py:2418, default 10000), Llama 3 rope scaling (arguments.py:2424,
-- 2426), YaRN for MLA (--rope-type arguments.py:2906, --rotary-scaling-factor 3558 default
-- 1.0, --mscale / --mscale-all-dim 3560/3562, --yarn-* 2400-2404), the norm epsilon
-- (transformer_config.py:201, default 1e-5), dropouts (transformer_config.py:188/191,
-- default 0.1; pretraining configs say 0), and DeepSeek's router: sigmoid scores
-- (transformer_config.py:808, default softmax), expert bias for aux-loss-free balancing
-- (816), the top-k scaling factor (804), group-limited routing (780/796); MoE layers run
-- grouped GEMMs (850) over the all-to-all dispatcher (891, default allgather). Read from
-- the config the model was built from (ndplan.model.config); none when it has none.
function M.fidelity_flags(ctx)
  local cfg = require("ndplan.config.model").config(ctx.plan.model)
  local out = {}
  local function add(...) for _, v in ipairs({...}) do out[#out + 1] = v end end
  local s = ctx.model and ctx.model:spec()
  local moe = s and (s.num_experts or 0) > 0
  if not cfg or cfg.model_type == "ndplan" then
    if moe then add("--moe-grouped-gemm", "--moe-token-dispatcher-type", "alltoall") end
    if s then add("--attention-dropout", 0, "--hidden-dropout", 0) end
    return out
  end
  local function num(v) return type(v) == "number" and v or nil end
  local function show(v)  -- integral values without a fraction, others in shortest form
    if math.type(v) == "integer" or (v == math.floor(v) and math.abs(v) < 2^53) then
      return string.format("%d", v)
    end
    return string.format("%.10g", v)
  end
  local rope = cfg.rope_parameters or cfg
  local theta = num(rope.rope_theta) or num(cfg.rope_theta)
  if s and s.position == "rope" and theta then add("--rotary-base", show(theta)) end
  local sc = type(cfg.rope_scaling) == "table" and cfg.rope_scaling
             or type(cfg.rope_parameters) == "table" and cfg.rope_parameters.rope_type
                and cfg.rope_parameters.rope_type ~= "default" and cfg.rope_parameters or nil
  local kind = sc and (sc.rope_type or sc.type)
  if kind == "llama3" then
    add("--use-rope-scaling", "--rope-scaling-factor", show(num(sc.factor) or 8))
  elseif kind == "yarn" then
    add("--rope-type", "yarn", "--rotary-scaling-factor", show(num(sc.factor) or 1),
        "--mscale", show(num(sc.mscale) or 1), "--mscale-all-dim", show(num(sc.mscale_all_dim) or 0))
    if num(sc.original_max_position_embeddings) then
      add("--yarn-original-max-position-embeddings", show(sc.original_max_position_embeddings))
    end
    if num(sc.beta_fast) then add("--yarn-beta-fast", show(sc.beta_fast)) end
    if num(sc.beta_slow) then add("--yarn-beta-slow", show(sc.beta_slow)) end
  end
  local eps = num(cfg.rms_norm_eps) or num(cfg.layer_norm_eps) or num(cfg.layer_norm_epsilon)
              or num(cfg.norm_eps)
  if eps then add("--norm-epsilon", show(eps)) end
  add("--attention-dropout", show(num(cfg.attention_dropout) or 0),
      "--hidden-dropout", show(num(cfg.hidden_dropout) or num(cfg.resid_pdrop) or 0))
  if moe then
    if cfg.scoring_func == "sigmoid" then add("--moe-router-score-function", "sigmoid") end
    if cfg.topk_method == "noaux_tc" or s.router_bias and cfg.scoring_func == "sigmoid" then
      add("--moe-router-enable-expert-bias")
    end
    if num(cfg.routed_scaling_factor) and cfg.routed_scaling_factor ~= 1 then
      add("--moe-router-topk-scaling-factor", show(cfg.routed_scaling_factor))
    end
    if num(cfg.n_group) and cfg.n_group > 1 then
      add("--moe-router-num-groups", show(cfg.n_group), "--moe-router-group-topk",
          show(num(cfg.topk_group) or 1))
    end
    add("--moe-grouped-gemm", "--moe-token-dispatcher-type", "alltoall")
  end
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

function M.render(plan, opts)
  local ctx, err = export.context(plan)
  if not ctx then return nil, err end
  local st, said = ctx.strategy, export.copy(ctx.strategy)
  local why, unsaid = {}, {}
  if said.pp > 1 and said.schedule ~= "1f1b" and said.schedule ~= "interleaved" then
    said.schedule = "1f1b"
    why.schedule = "Megatron's flags choose 1F1B or, with VPP, interleaved 1F1B (§2.2)"
  end
  -- offload first: the recompute choice prices what the file says. Megatron's layer
  -- offload (--cpu-offloading-num-layers; the flag sets cpu_offloading, arguments.py:1950)
  -- is refused with PP > 1 and with any recompute (transformer_config.py:1891, 1896) and
  -- offloads fewer layers than the model has (1885)
  local offloaded
  if said.offload > 0 then
    local any = false
    for _, m in ipairs(said.layer_recompute) do any = any or m ~= "none" end
    if said.pp > 1 or any then
      export.no_offload(said, why, "Megatron's CPU offloading refuses "
        .. (said.pp > 1 and "pipeline parallelism" or "activation recompute")
        .. " (transformer_config.py:" .. (said.pp > 1 and "1891" or "1896") .. ")")
    else
      offloaded = offload_layers(ctx, said)
      why.offload = "Megatron offloads whole layers (--cpu-offloading-num-layers, §2.2); rounded up"
      if offloaded >= ctx.layers then
        offloaded = ctx.layers - 1
        said.offload = offloaded / largest_group(ctx, said)
        why.offload = "Megatron offloads fewer layers than the model has (transformer_config.py:1885)"
      end
      if offloaded == 0 then offloaded = nil end
    end
  end
  -- one set of switches for the whole model first: the recompute choice prices it
  export.fold_selective(said, why)
  -- delayed FP8 scaling refuses layernorm recompute (transformer_config.py:1999-2003): the
  -- layers that recompute the norms selectively recompute fully instead
  local norms = false
  for _, op in ipairs(said.selective_ops or {}) do norms = norms or op == "norms" end
  if norms and said.precision == "fp8:delayed" then
    for i, m in ipairs(said.layer_recompute) do
      if m == "selective" then said.layer_recompute[i] = "full" end
    end
    why.recompute = "delayed FP8 scaling refuses layernorm recompute (transformer_config.py:2001)"
  end
  local chosen, info = choose_recompute(ctx, said, plan, opts, why)
  local recompute = require("ndplan.block_plan").flags(chosen)
  if chosen.method == "selective" then
    for _, v in ipairs(recompute_modules(ctx, said, unsaid)) do recompute[#recompute + 1] = v end
  end
  if not st.flash_attention then
    unsaid[#unsaid + 1] = {field = "flash_attention", plan = "false",
                           why = "no flag in §2.2; Megatron-Core uses fused attention"}
  end
  -- pretrain_gpt.py builds layers of attention (full, windowed or MLA) and an MLP; the
  -- other mixers and the sublayer-less layers are not what its flags build
  local other = {}
  for _, g in ipairs(ctx.model and ctx.model:layers() or {}) do
    local a = g.attention
    if (a ~= "full" and a ~= "sliding" and a ~= "mla" or g.mlp == "none") and not other[g.kind] then
      other[g.kind], other[#other + 1] = true, g.kind
    end
  end
  if #other > 0 then
    unsaid[#unsaid + 1] = {field = "layers", plan = table.concat(other, ", "),
                           why = "pretrain_gpt.py builds attention-and-MLP layers only"}
  end
  local parallel = {"--tensor-model-parallel-size", said.tp, "--pipeline-model-parallel-size", said.pp}
  local function add(list, ...) for _, v in ipairs({...}) do list[#list + 1] = v end end
  for _, v in ipairs(layout_flags(ctx, said)) do parallel[#parallel + 1] = v end
  if said.sp and said.tp > 1 then add(parallel, "--sequence-parallel") end
  if said.cp > 1 then add(parallel, "--context-parallel-size", said.cp) end
  local moe = ctx.model and ctx.model:spec().num_experts > 0
  if moe or said.ep > 1 then
    add(parallel, "--expert-model-parallel-size", said.ep, "--expert-tensor-parallel-size", said.etp)
  end
  -- --fp8-param-gather needs the distributed optimizer or Megatron-FSDP (arguments.py:1096):
  -- at DP 1 the distributed optimizer shards nothing, so it is written; with DP it would
  -- shard what the plan keeps, so the gather goes
  local fp8pg = said.fp8_param_gather and export.quantized(said.precision) and said.precision ~= "nvfp4"
  if fp8pg and not (said.dp > 1 and said.zero >= 1) and said.dp > 1 then
    said.fp8_param_gather = false
    why.fp8_param_gather = "--fp8-param-gather needs the distributed optimizer or Megatron-FSDP "
      .. "(arguments.py:1096), which shards what this plan keeps whole"
  end
  if said.dp > 1 and said.zero == 1 or (fp8pg and said.dp == 1) then
    add(parallel, "--use-distributed-optimizer")
  elseif said.dp > 1 and said.zero >= 2 then
    -- Megatron-FSDP saves only the fsdp_dtensor checkpoint format (arguments.py:1169)
    add(parallel, "--use-megatron-fsdp", "--data-parallel-sharding-strategy",
        said.zero == 2 and "optim_grads" or "optim_grads_params", "--ckpt-format", "fsdp_dtensor")
  end
  local training = {"--micro-batch-size", said.mbs, "--global-batch-size", ctx.job.global_batch,
                    "--seq-length", ctx.job.seq_len}
  if said.precision == "fp16" then add(training, "--fp16")  -- Megatron's fp16 switch [R]
  else add(training, "--bf16") end
  for _, v in ipairs(M.precision_flags(said, why)) do training[#training + 1] = v end
  for _, v in ipairs(recompute) do training[#training + 1] = v end
  if offloaded then add(training, "--cpu-offloading-num-layers", offloaded) end
  local devices = ctx.job.devices or said.dp * said.tp * said.pp * said.cp
  local per_node = M.node_size(ctx, devices)
  local notes, rounded = export.finish(ctx, said, why, unsaid)
  local text = table.concat({
    "# Megatron-LM launch arguments written by ndplan export (" .. M.dialect .. ").",
    string.format("# %s on %d devices: dp %d = %d / (tp %d x pp %d x cp %d); %d micro-batches per step.",
                  flags.comment(ctx.model and ctx.model.name or "model"), devices, said.dp,
                  devices, said.tp,
                  said.pp, said.cp, said.mb),
    array("MODEL_ARGS", model_flags(ctx)),
    array("MODEL_PARALLEL_ARGS", parallel),
    array("TRAINING_ARGS", training),
    array("DISTRIBUTED_ARGS", {"--nproc-per-node", per_node, "--nnodes", devices // per_node}),
    "# Launch on each of the " .. (devices // per_node) .. " nodes (quoted: the shell keeps "
      .. "list and layout strings whole):",
    "#   torchrun \"${DISTRIBUTED_ARGS[@]}\" --node-rank \"$NODE_RANK\" --master-addr \"$MASTER_ADDR\" "
      .. "--master-port 6000 \\",
    "#     pretrain_gpt.py \"${MODEL_ARGS[@]}\" \"${MODEL_PARALLEL_ARGS[@]}\" \"${TRAINING_ARGS[@]}\" "
      .. "\"${DATA_ARGS[@]}\"",
    "# You still supply DATA_ARGS: --data-path, --tokenizer-type and --tokenizer-model "
      .. "(--vocab-size above is the model's), the optimizer and its schedule (--lr, "
      .. "--min-lr, --lr-decay-style, --train-iters or --train-samples, --weight-decay, "
      .. "--clip-grad), --save/--load and their intervals.",
    said.dp > 1 and said.zero >= 2
      and "# Megatron-FSDP asks CUDA_DEVICE_MAX_CONNECTIONS unset or > 1 (arguments.py:1166)."
      or "# Megatron's examples export CUDA_DEVICE_MAX_CONNECTIONS=1 for TP/SP overlap.",
    "",
  }, "\n")
  return text, notes, rounded, info
end

-- Megatron's FP8 recipes and the FP8 format Transformer Engine's recipe class takes by
-- default (DelayedScaling and Float8CurrentScaling: HYBRID, E4M3 forward and E5M2 for
-- gradients; Float8BlockScaling and MXFP8BlockScaling: E4M3 throughout).
local FP8_RECIPES = {["fp8:delayed"] = {"delayed", "hybrid"},
                     ["fp8:tensorwise"] = {"tensorwise", "hybrid"},
                     ["fp8:blockwise"] = {"blockwise", "e4m3"},
                     ["fp8:mxfp8"] = {"mxfp8", "e4m3"}}
M.FP8_RECIPES = FP8_RECIPES

-- precision_flags(said, why) -> the flags after --bf16: --fp8-format/--fp8-recipe or
-- --fp4-format/--fp4-recipe, the param gather and the BF16 layers at each end (Megatron
-- arguments.py); a recipe Megatron has no name for is rounded, with the reason in why.
function M.precision_flags(said, why)
  local out = {}
  if not export.quantized(said.precision) then return out end
  if said.precision == "fp8:rowwise" then
    said.precision = "fp8:tensorwise"
    why.precision = "--fp8-recipe has tensorwise, delayed, mxfp8 and blockwise; torchao's "
      .. "rowwise scaling is not among them"
  end
  local fp4 = said.precision == "nvfp4"
  if fp4 then
    out = {"--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"}
  else
    local r = FP8_RECIPES[said.precision]
    out = {"--fp8-format", r[2], "--fp8-recipe", r[1]}
  end
  if said.fp8_param_gather then out[#out + 1] = fp4 and "--fp4-param-gather" or "--fp8-param-gather" end
  if said.bf16_first_layers + said.bf16_last_layers > 0 then
    for _, v in ipairs({"--first-last-layers-bf16", "--num-layers-at-start-in-bf16",
                        said.bf16_first_layers, "--num-layers-at-end-in-bf16",
                        said.bf16_last_layers}) do out[#out + 1] = v end
  end
  return out
end

-- node_size(ctx, devices) -> ranks per node for torchrun: the plan's device's node_size
-- (4 on a GB200/GB300 tray, else its scale-up domain), else 8 when it divides the devices
function M.node_size(ctx, devices)
  local dev = ctx.plan.device or (ctx.plan.result and ctx.plan.result.device)
  local d = dev and require("ndplan").device(dev)
  local n = d and (d.node_size > 0 and d.node_size or d.scale_up.domain_size) or 8
  if devices % n == 0 then return n end
  return devices % 8 == 0 and 8 or devices
end


-- parse(text) -> strategy, job: what the flags say, the layout flags under Megatron's names
-- and stage_layers the layout they resolve to (body+MTP layers per stage, or per chunk with
-- VPP; give nd.estimate one or the other)
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
  local lay = layers and assert(script.layout(st, layers, info.shape.mtp_layers))
  -- the layout the flags resolve to: per stage (vpp 1) or per chunk (body+MTP)
  st.stage_layers = lay and lay.stage_layers
  if st.offload and layers then  -- the share of the largest stage's layers offloaded
    local mtp = info.shape.mtp_layers
    local shape = {pp = st.pp, vpp = st.vpp, stage_layers = lay.stages, chunk_layers = lay.stage_layers}
    st.offload = (st.offload_layers or 0) / largest_group({layers = layers, mtp = mtp}, shape)
  end
  st.offload_layers = nil
  st.offload = st.offload or 0
  return st, job
end

return M
