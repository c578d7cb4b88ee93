-- Hugging Face config.json (or a YAML/Lua table with the same field names) -> the canonical
-- model spec table that ndplan.c.model.new() takes.
--
--   to_spec(cfg [, opts]) -> spec, warnings | nil, message
--     opts.source names the file in messages; opts.name is the model name; opts.strict
--     makes every warning (an assumption, a field not read) an error.
--
-- Known model_types get their family's implicit facts (Qwen2's QKV bias, Gemma 3's four
-- norms per layer, Mixtral's per-expert intermediate_size, ...). Any other model_type with
-- the standard fields loads as a Llama-style decoder, and each assumption is returned as a
-- warning. Keys starting with "_" are never read. Every other field the loader did not ask
-- for and that is not known to leave the cost alone (ndplan.hfconfig_families) is reported
-- by name, so no field that changes the layer stack is silently ignored.
local M = {}

local MAX_LAYERS = 1024  -- include/ndplan/model.h ND_MAX_LAYERS

local families = require "ndplan.config.hfconfig_families"
local reader = require "ndplan.config.hfconfig_reader"
local nas = require "ndplan.config.hfconfig_nas"
local hybrid = require "ndplan.config.hfconfig_hybrid"
local FAMILIES, TEXT_TOWER = families.FAMILIES, families.TEXT_TOWER

local LAYER_TYPES = {full_attention = "full", sliding_attention = "sliding",
                     linear_attention = "linear", chunked_attention = "sliding",
                     mamba = "mamba", attention = "full"}  -- the last two: Granite 4

local GATED_ACTS = {silu = true, swish = true, swiglu = true, geglu = true}

local function is_int(x) return math.type(x) ~= nil and math.tointeger(x) ~= nil end

-- Which family rules apply: returns family name, traits, and whether it was recognised.
local function family_of(r)
  local mt = r.inner.model_type
  if type(mt) ~= "string" and r.outer then mt = TEXT_TOWER[r.outer.model_type] end
  if type(mt) ~= "string" then return nil, {}, false end
  mt = TEXT_TOWER[mt] or mt
  if FAMILIES[mt] then return mt, FAMILIES[mt], true end
  return mt, {}, false
end

-- {======================================================================
-- The layer stack
-- =======================================================================

-- Llama 4's chunked attention: the layers with RoPE attend within chunks of
-- attention_chunk_size tokens (priced as sliding layers whose windows are chunks), the NoPE
-- layers (no_rope_layers 0; by default every no_rope_layer_interval-th) attend globally.
local function chunked(r, s, L)
  local chunk = r:int("attention_chunk_size", nil, 1)
  if not chunk then return nil end
  s.sliding_window, s.chunked_window = chunk, true
  local rope = r:list("no_rope_layers", "0 or 1", function(x) return x == 0 or x == 1 end)
  if rope and #rope == 0 then rope = nil end  -- empty: the default
  if rope and #rope ~= L then
    r:fail("field 'no_rope_layers' has %d entries but num_hidden_layers is %d", #rope, L)
  end
  local interval = r:int("no_rope_layer_interval", nil, 1) or 4
  local kinds = {}
  for i = 1, L do
    local uses_rope = rope and rope[i] == 1 or (not rope and i % interval ~= 0)
    kinds[i] = uses_rope and "sliding" or "full"
  end
  return kinds
end

-- attention kinds of the body layers
local function attention_kinds(r, s, traits, L)
  local kinds = {}
  if s.kv_lora_rank > 0 then
    for i = 1, L do kinds[i] = "mla" end
    return kinds
  end
  local types, tname = r:list("layer_types", "a layer type name", function(x)
    return LAYER_TYPES[x] ~= nil
  end)
  if types then
    if #types ~= L then
      r:fail("field '%s' has %d entries but num_hidden_layers is %d", tname, #types, L)
    end
    for i = 1, L do
      kinds[i] = LAYER_TYPES[types[i]]
      if types[i] == "chunked_attention" and not s.chunked_window then
        s.sliding_window = r:int("attention_chunk_size", "an integer: the chunk of the"
                                 .. " chunked-attention layers", 1)
        s.chunked_window = true
      end
    end
    return kinds
  end
  local rule = traits.attn
  if rule == "minimax" then  -- attn_type_list: 0 lightning (linear), 1 softmax
    local list = r:list("attn_type_list", "0 or 1", function(x) return x == 0 or x == 1 end)
    if not list then r:missing("attn_type_list", "a list of 0 (lightning) and 1 (softmax)") end
    if #list ~= L then
      r:fail("field 'attn_type_list' has %d entries but num_hidden_layers is %d", #list, L)
    end
    for i = 1, L do kinds[i] = list[i] == 1 and "full" or "linear" end
    return kinds
  end
  if rule == "llama4" then  -- without chunks every layer is global (the loop below)
    local k = chunked(r, s, L)
    if k then return k end
  end
  local window = s.sliding_window > 0
  local interval = rule == "hybrid" and (r:int("full_attention_interval", nil, 1) or 4)
  local pattern = rule == "gemma3" and (r:int("sliding_window_pattern", nil, 1) or 6)
  -- Qwen2/3: usually off; when on, the layers from max_window_layers on slide
  local qwen_from = rule == "qwen2" and r:bool("use_sliding_window") and window
                    and (r:int("max_window_layers") or 0)
  if rule == "qwen2" then r:raw("max_window_layers") end  -- known either way
  if rule == "hybrid" and r:bool("use_sliding_window") then
    r:warn("use_sliding_window: true, but the linear/full layout has no sliding layers")
  end
  for i = 1, L do
    local k = "full"
    if rule == "hybrid" then  -- Qwen3-Next/3.5: every n-th layer is full, the rest linear
      k = (i % interval == 0) and "full" or "linear"
    elseif rule == "gemma3" then  -- n-1 local layers, then one global
      k = (i % pattern == 0) and "full" or "sliding"
    elseif rule == "alternate" then  -- GPT-OSS, Gemma 2: layer 0 slides, layer 1 is global
      k = (i % 2 == 1) and "sliding" or "full"
    elseif qwen_from and i - 1 >= qwen_from then
      k = "sliding"
    elseif rule == "mistral" then  -- a non-null sliding_window applies to every layer
      if window then k = "sliding" end
    end
    kinds[i] = k
  end
  return kinds
end

-- The set of 0-based MoE layer indices a list field names, or nil when absent.
local function index_set(r, name)
  local list = r:list(name, "a layer index", is_int)
  if not list then return nil end
  local set = {}
  for _, i in ipairs(list) do set[math.tointeger(i)] = true end
  return set
end

-- MLP kinds of the body layers: from first_k_dense_replace and moe_layer_freq (DeepSeek; a
-- list of 0/1 per layer in Megatron's spelling), decoder_sparse_step and mlp_only_layers
-- (Qwen), interleave_moe_layer_step or moe_layers (Llama 4).
local function mlp_kinds(r, s, traits, L)
  local kinds = {}
  local rule = traits.moe
  local only, listed = {}, nil
  local dense_first, freq, step, freq_list = 0, 1, 1, nil
  if s.num_experts > 0 then
    if rule == "deepseek" or rule == nil then
      dense_first = r:int("first_k_dense_replace") or 0
      if type(r:raw("moe_layer_freq")) == "table" then
        freq_list = r:list("moe_layer_freq", "0 or 1", function(x) return x == 0 or x == 1 end)
        if #freq_list ~= L then
          r:fail("field 'moe_layer_freq' has %d entries but num_hidden_layers is %d",
                 #freq_list, L)
        end
      else freq = r:int("moe_layer_freq", nil, 1) or 1 end
    end
    if rule == "qwen" or rule == nil then
      step = r:int("decoder_sparse_step", nil, 1) or 1
      only = index_set(r, "mlp_only_layers") or {}
    end
    if rule == "llama4" or rule == nil then
      step = r:int("interleave_moe_layer_step", nil, 1) or step
      listed = index_set(r, "moe_layers")
    end
  end
  for i = 0, L - 1 do
    local moe
    if listed then moe = listed[i] == true
    elseif freq_list then moe = i >= dense_first and freq_list[i + 1] == 1
    else
      moe = s.num_experts > 0 and i >= dense_first and i % freq == 0
            and (i + 1) % step == 0 and not only[i]
    end
    kinds[i + 1] = moe and "moe" or "dense"
  end
  return kinds
end

-- Nemotron-H's hybrid_override_pattern: one character per layer. Returns attention and MLP
-- kinds of the body layers.
local PATTERN = {M = {"mamba", "none"}, ["*"] = {"full", "none"}, ["-"] = {"none", "dense"},
                 E = {"none", "moe"}}

local function pattern_kinds(r, L)
  local p = r:str("hybrid_override_pattern")
  if not p then r:missing("hybrid_override_pattern", "a string of M, *, - and E, one per layer") end
  if #p ~= L then
    r:fail("field 'hybrid_override_pattern' has %d characters but num_hidden_layers is %d", #p, L)
  end
  local attention, mlp = {}, {}
  for i = 1, L do
    local c = p:sub(i, i)
    local k = PATTERN[c]
    if not k then
      r:fail("field 'hybrid_override_pattern': character %d is '%s' (expected M for Mamba-2,"
             .. " * for attention, - for an MLP or E for MoE)", i, c)
    end
    attention[i], mlp[i] = k[1], k[2]
  end
  return attention, mlp
end

local function read_mamba(r, s)
  local what = "an integer (the Mamba-2 layers need it)"
  s.mamba_heads = r:int({"mamba_num_heads", "mamba_n_heads"}, what, 1)
  -- Nemotron-H's mixer is mamba_num_heads x mamba_head_dim wide and never reads expand
  -- (Nemotron-3-Nano: 64 x 64 = 4096, not 2 x 2688); Granite 4's is expand x hidden_size;
  -- Falcon-H1's is mamba_d_ssm (FalconH1Config's default: 1024)
  local expand = not r.traits.heads_width and r:int({"expand", "mamba_expand"})
  local d_ssm = r.traits.d_ssm and r:int("mamba_d_ssm", nil, 1)
  local width = d_ssm or (expand and expand * s.hidden_size)
  if r:raw("mamba_d_head") == "auto" and width then  -- the inner width's share
    r.seen.mamba_d_head = true
    s.mamba_head_dim = width // s.mamba_heads
  else s.mamba_head_dim = r:int({"mamba_head_dim", "mamba_d_head"}, what, 1) end
  if d_ssm then
    if d_ssm ~= s.mamba_heads * s.mamba_head_dim then
      r:fail("mamba_n_heads (%d) x mamba_d_head (%d) must be mamba_d_ssm (%d)", s.mamba_heads,
             s.mamba_head_dim, d_ssm)
    end
    expand = nil
  end
  s.mamba_state = r:int({"ssm_state_size", "mamba_d_state"}, what, 1)
  s.mamba_groups = r:int({"n_groups", "mamba_n_groups"}, what, 1)
  s.mamba_conv = r:int({"conv_kernel", "mamba_d_conv"}, what, 1)
  s.mamba_chunk = r:int({"chunk_size", "mamba_chunk_size"}, nil, 1) or 256
  local conv_bias = r:bool({"use_conv_bias", "mamba_conv_bias"})
  s.mamba_conv_bias = conv_bias ~= false  -- the config classes default it to true
  s.mamba_proj_bias = r:bool({"mamba_proj_bias", "use_bias"}) or false
  if r.traits.d_ssm then  -- Falcon-H1: the gated norm is optional, out_proj's bias its own
    s.mamba_norm = r:bool("mamba_rms_norm") == true  -- FalconH1Config: false
    if (r:bool("projectors_bias") or false) ~= s.mamba_proj_bias then
      r:fail("projectors_bias and mamba_proj_bias differ (the mixer's out_proj and in_proj"
             .. " biases): ndplan prices both or neither")
    end
  end
  if expand and expand * s.hidden_size ~= s.mamba_heads * s.mamba_head_dim then
    r:fail("mamba_num_heads (%d) x mamba_head_dim (%d) must be expand (%d) x hidden_size (%d)",
           s.mamba_heads, s.mamba_head_dim, expand, s.hidden_size)
  end
end

-- }======================================================================

-- Reads experts into s; returns whether intermediate_size is the per-expert width.
local function read_experts(r, s, traits)
  local E = r:int({"num_local_experts", "num_experts", "n_routed_experts"}) or 0
  s.num_experts = E
  if E == 0 then return false end
  s.top_k = r:int({"num_experts_per_tok", "experts_per_token", "moe_topk"},
                  "an integer: experts chosen per token", 1)
  -- DeepSeek's group-limited routing: a token's experts lie in topk_group of n_group groups
  local groups = r:int("n_group")
  local per_token = r:int("topk_group", nil, 1)  -- known, even with one group
  if groups and groups > 1 then
    s.expert_groups = groups
    s.groups_per_token = per_token or r:missing("topk_group", "an integer: expert groups"
                                                .. " per token")
  end
  local per_expert = traits.moe == "per_expert" or traits.moe == "llama4"
  if per_expert then
    s.moe_ffn_size = r:int("intermediate_size", "an integer: the width of each expert", 1)
  else
    s.moe_ffn_size = r:int("moe_intermediate_size")
    if not s.moe_ffn_size and traits.moe == nil then
      s.moe_ffn_size = r:int("intermediate_size", "an integer: the width of each expert", 1)
      per_expert = true
      r:warn("moe_ffn_size: no moe_intermediate_size, intermediate_size (%d) taken as the"
             .. " width of each expert", s.moe_ffn_size)
    elseif not s.moe_ffn_size then
      r:missing("moe_intermediate_size", "an integer: the width of each routed expert")
    end
  end
  local n_shared = r:int("n_shared_experts") or 0
  local shared = r:int({"shared_expert_intermediate_size", "shared_intermediate_size"}) or 0
  local nemotron = traits.moe == "nemotron_h" and r:int("moe_shared_expert_intermediate_size")
  if traits.moe == "llama4" then  -- Llama 4: one ungated shared expert of the routed width
    s.num_shared_experts, s.shared_ffn_size = 1, s.moe_ffn_size
  elseif nemotron and nemotron > 0 then  -- Nemotron-3: n_shared_experts of that width
    n_shared = math.max(n_shared, 1)
    s.num_shared_experts, s.shared_ffn_size = n_shared, n_shared * nemotron
  elseif n_shared > 0 then  -- DeepSeek: n copies of a routed-width expert
    s.num_shared_experts, s.shared_ffn_size = n_shared, n_shared * s.moe_ffn_size
  elseif shared > 0 then  -- Qwen: one shared expert of its own width, with a sigmoid gate
    s.num_shared_experts, s.shared_ffn_size = 1, shared   -- (Granite: without the gate)
    s.shared_expert_gate = traits.shared_gate ~= false
  end
  s.router_bias = traits.router_bias or r:str("topk_method") == "noaux_tc"
                  or (traits.router_bias_field and r:bool(traits.router_bias_field)) or false
  s.expert_bias = traits.expert_bias or false
  return per_expert
end

local function read_mla(r, s)
  s.kv_lora_rank = r:int("kv_lora_rank") or 0
  if s.kv_lora_rank == 0 then return end
  local what = "an integer (MLA models need it)"
  s.q_lora_rank = r:int("q_lora_rank") or 0  -- null: a plain q projection (V2-Lite)
  s.qk_nope_head_dim = r:int("qk_nope_head_dim", what)
  s.qk_rope_head_dim = r:int("qk_rope_head_dim", what)
  s.v_head_dim = r:int("v_head_dim", what, 1)
  -- DeepSeek sparse attention (V3.2): the indexer and the keys each query keeps
  s.index_topk = r:int("index_topk", nil, 1) or 0
  if s.index_topk > 0 then
    local dsa = "an integer (the sparse-attention indexer needs it)"
    s.index_heads = r:int("index_n_heads", dsa, 1)
    s.index_head_dim = r:int("index_head_dim", dsa, 1)
  end
end

local function read_linear(r, s, traits)
  if traits.attn == "minimax" then  -- lightning attention: the softmax layers' q heads,
    s.linear_k_heads, s.linear_v_heads = s.num_heads, s.num_heads  -- no conv
    s.linear_k_dim, s.linear_v_dim, s.conv_kernel = s.head_dim, s.head_dim, 0
    return
  end
  local what = "an integer (the linear-attention layers need it)"
  s.linear_k_heads = r:int("linear_num_key_heads", what, 1)
  s.linear_v_heads = r:int("linear_num_value_heads", what, 1)
  s.linear_k_dim = r:int("linear_key_head_dim", what, 1)
  s.linear_v_dim = r:int("linear_value_head_dim", what, 1)
  s.conv_kernel = r:int("linear_conv_kernel_dim", what, 1)
end

-- Fields every family reads the same way (with the GPT-era spellings).
local function read_common(r, s, traits)
  s.hidden_size = r:int({"hidden_size", "n_embd", "d_model", "n_embed"},
                        "an integer: the model width", 1)
  -- layer counts are capped before any per-layer list is built (the core's ND_MAX_LAYERS)
  s.num_layers = r:int({"num_hidden_layers", "n_layer", "num_layers"},
                       "an integer: the number of decoder layers", 1, MAX_LAYERS)
  s.num_heads = r:int({"num_attention_heads", "n_head", "num_heads"},
                      "an integer: the number of attention heads", 1)
  s.vocab_size = r:int("vocab_size", "an integer: the vocabulary size", 1)
  s.num_kv_heads = r:int("num_key_value_heads", nil, 1)
  if not s.num_kv_heads and r:bool("multi_query") then s.num_kv_heads = 1 end
  s.num_kv_heads = s.num_kv_heads or s.num_heads
  s.head_dim = r:int({"head_dim", "attention_head_dim"}, nil, 1)
  s.max_position = r:int({"max_position_embeddings", "n_positions", "seq_length", "n_ctx"})
                   or 0
  s.sliding_window = r:int({"sliding_window", "sliding_window_size"}) or 0
  s.mtp_layers = r:int({"num_nextn_predict_layers", "mtp_num_hidden_layers"}, nil, 0,
                       MAX_LAYERS) or 0
  if traits.mtp_modules then  -- MiniMax-M2: MTP modules the config gives no layer kind for
    local modules, layers = r:int("num_mtp_modules") or 0, r:int("mtp_transformer_layers") or 1
    if r:bool("use_mtp") and modules * layers > 0 then
      r:warn("use_mtp: %d MTP module(s) of %d layer(s) each are not priced (the config does"
             .. " not say what their layers are)", modules, layers)
    end
  end
  if r:bool("mtp_use_dedicated_embeddings") and s.mtp_layers > 0 then
    r:warn("mtp_use_dedicated_embeddings: the MTP module's own embedding is not counted")
  end
end

-- Unknown family: guess what the known ones state, warning about each guess.
local function guess_unknown(r, s, family)
  r:warn("%s: read as a Llama-style decoder from the standard fields",
         family and ("model_type '" .. family .. "' is not known to ndplan")
         or "no model_type")
  if r:raw("rms_norm_eps") then s.norm = "rmsnorm"
  elseif r:raw({"layer_norm_eps", "layer_norm_epsilon"}) then s.norm = "layernorm"
  else
    s.norm = "rmsnorm"
    r:warn("norm: no rms_norm_eps or layer_norm_eps, assumed RMSNorm")
  end
  local act = r:str({"hidden_act", "hidden_activation", "activation_function"})
  s.gated_mlp = act == nil or GATED_ACTS[act] == true
  if act == nil then
    r:warn("gated_mlp: no hidden_act, assumed a gated MLP (SwiGLU, 3 matrices)")
  elseif not s.gated_mlp then
    r:warn("gated_mlp: hidden_act '%s' read as a plain 2-matrix MLP", act)
  end
  if r:bool("tie_word_embeddings") == nil then
    r:warn("tie_embeddings: no tie_word_embeddings, assumed an untied output head")
  end
  r:warn("qk_norm, biases: assumed none beyond attention_bias and mlp_bias")
end

local function convert(r, opts)
  local family, traits, known = family_of(r)
  r.defaults, r.traits, r.family = traits.defaults, traits, family
  if traits.refuse then
    r:fail("model_type '%s': %s, which ndplan does not price yet", family, traits.refuse)
  end
  if not traits.nas and r:raw("block_configs") ~= nil then  -- only Nemotron NAS has them
    r:fail("block_configs: heterogeneous blocks are read for model_type 'nemotron-nas' only,"
           .. " not '%s'", tostring(family))
  end
  local s = {name = opts.name, family = (family or "custom"):sub(1, 63)}
  read_common(r, s, traits)
  read_mla(r, s)
  local per_expert = read_experts(r, s, traits)

  if not known then guess_unknown(r, s, family)
  else
    s.norm = traits.norm or (traits.gpt and "layernorm" or "rmsnorm")
    s.gated_mlp = not traits.gpt and traits.gated ~= false
  end
  s.tie_embeddings = r:bool("tie_word_embeddings")
  if s.tie_embeddings == nil then s.tie_embeddings = traits.tie or false end
  s.qk_norm = traits.qk_norm or (traits.qk_norm_field and r:bool(traits.qk_norm_field))
              or false
  s.norms_per_layer = traits.norms_per_layer or 2
  s.attn_sinks = traits.sinks or false
  s.attn_output_gate = r:bool("attn_output_gate")
  if s.attn_output_gate == nil then s.attn_output_gate = traits.output_gate or false end

  -- biases: Qwen2's QKV bias is implicit; GPT-era models bias everything
  if traits.gpt then
    local b = r:bool("enable_bias") ~= false
    s.qkv_bias, s.o_bias, s.mlp_bias = b, b, b
  else
    local attn_bias = r:bool("attention_bias") or false
    s.qkv_bias = traits.qkv_bias or attn_bias
    s.o_bias = traits.o_bias ~= false and attn_bias
    s.mlp_bias = r:bool("mlp_bias") or false
  end

  -- positions
  s.position = traits.position or "rope"
  if s.position == "learned" then
    if s.max_position == 0 then
      r:missing({"max_position_embeddings", "n_positions"},
                "an integer: the rows of the learned position table")
    end
    s.position_count = s.max_position + (traits.position_offset or 0)
  end
  s.embed_norm = traits.embed_norm or false
  if family == "opt" then
    local e = r:int("word_embed_proj_dim", nil, 1)
    if e and e ~= s.hidden_size then s.embed_proj = e end
    s.final_norm = r:bool("do_layer_norm_before") ~= false
  end

  -- the stack
  local L = s.num_layers
  local attention, mlp
  if traits.pattern then attention, mlp = pattern_kinds(r, L)
  elseif traits.hybrid then attention, mlp = hybrid.kinds(r, s, traits, L)
  elseif traits.nas then attention, mlp = nas.kinds(r, s, L)  -- sets the MLP widths
  else
    attention, mlp = attention_kinds(r, s, traits, L), mlp_kinds(r, s, traits, L)
  end
  local uses = {}
  for i = 1, L do uses[attention[i]], uses[mlp[i]] = true, true end
  for i = L + 1, L + s.mtp_layers do  -- MTP modules: full (or MLA) attention, body's MLP
    attention[i] = s.kv_lora_rank > 0 and "mla" or "full"
    mlp[i] = s.num_experts > 0 and "moe" or "dense"
    uses[attention[i]], uses[mlp[i]] = true, true
  end
  s.attention, s.mlp = attention, mlp
  if uses.linear then read_linear(r, s, traits) end
  if uses.mamba or uses.hybrid then read_mamba(r, s) end
  if uses.mamba1 then hybrid.read_mamba1(r, s) end
  if uses.moe and s.num_experts == 0 then
    r:missing({"n_routed_experts", "num_experts"}, "an integer: the MoE layers need experts")
  end
  if uses.sliding and s.sliding_window == 0 then
    r:missing("sliding_window", "an integer: the window of the sliding-attention layers")
  end
  if s.head_dim == nil then
    if s.kv_lora_rank > 0 then s.head_dim = s.qk_nope_head_dim + s.qk_rope_head_dim
    elseif s.hidden_size % s.num_heads == 0 then s.head_dim = s.hidden_size // s.num_heads
    else
      r:missing("head_dim", ("an integer: num_attention_heads (%d) does not divide"
                .. " hidden_size (%d)"):format(s.num_heads, s.hidden_size))
    end
  end

  -- dense width: only needed when some layer is dense
  s.ffn_size = traits.nas and s.ffn_size or 0
  r:raw({"intermediate_size", "n_inner", "ffn_dim"})  -- known: unused when no layer is dense
  local dense_width = traits.moe == "llama4" and r:int("intermediate_size_mlp", nil, 1)
  if uses.dense and not traits.nas then
    if traits.ffn_4h then s.ffn_size = 4 * s.hidden_size
    elseif traits.hybrid_ffn then  -- Granite 4 without experts: the shared MLP is dense
      s.ffn_size = r:int("shared_intermediate_size", "an integer: the width of the MLPs", 1)
    elseif traits.same_width then  -- Jamba: the dense MLPs are as wide as an expert
      s.ffn_size = r:int("intermediate_size", "an integer: the width of the MLPs", 1)
    elseif traits.moe == "llama4" and per_expert then
      s.ffn_size = dense_width or r:missing("intermediate_size_mlp", "an integer: the width"
                                            .. " of the dense layers")
    elseif per_expert and r:raw({"n_inner", "ffn_dim"}) == nil then
      r:fail("dense layers need a dense width, but intermediate_size is the per-expert width")
    else
      s.ffn_size = r:int({"intermediate_size", "n_inner", "ffn_dim"})
      if not s.ffn_size then
        if traits.gpt then s.ffn_size = 4 * s.hidden_size  -- GPT-2's n_inner: null
        else r:missing("intermediate_size", "an integer: the dense MLP width") end
      end
    end
  end
  return s
end

-- The report: every field of the config the loader did not ask for and that is not on the
-- family's list of fields known not to change the cost, by name.
local function report_unread(r)
  local skip = families.no_cost(r.traits or {})
  local names, listed = {}, {}
  for _, t in ipairs({r.inner, r.outer or {}}) do
    for k in pairs(t) do
      if type(k) == "string" and k:sub(1, 1) ~= "_" and k ~= "model_type" and not r.seen[k]
         and not skip[k] and not listed[k] then
        names[#names + 1], listed[k] = k, true
      end
    end
  end
  table.sort(names)
  for _, k in ipairs(names) do
    r:warn("%s: not read by ndplan for model_type '%s'; if it changes the layers, the model"
           .. " is priced without it", k, r.family or "(none)")
  end
end

-- to_spec(cfg [, opts]) -> spec, warnings | nil, message
--   opts.strict: what would be a warning (an assumption, an unread field) is an error
function M.to_spec(cfg, opts)
  if type(cfg) ~= "table" then
    error("hfconfig.to_spec: expected a config table, got " .. type(cfg), 2)
  end
  opts = opts or {}
  local text = cfg.text_config
  local r = type(text) == "table" and reader.new(text, cfg, opts.source or "(config)")
            or reader.new(cfg, nil, opts.source or "(config)")
  local ok, res = pcall(convert, r, {name = opts.name or "custom"})
  if ok then
    report_unread(r)
    if opts.strict and #r.warnings > 0 then
      return nil, ("%s: strict: %d assumption(s): %s"):format(r.source, #r.warnings,
                                                             table.concat(r.warnings, "; "))
    end
    return res, r.warnings
  end
  if reader.is_failure(res) then return nil, res.message end
  error(res, 0)
end

return M
