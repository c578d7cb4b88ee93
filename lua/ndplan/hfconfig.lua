-- Hugging Face config.json (or a YAML/Lua table with the same field names) -> the canonical
-- model spec table that ndplan.c.model.new() takes.
--
--   to_spec(cfg [, opts]) -> spec, warnings | nil, message
--     opts.source names the file in messages; opts.name is the model name.
--
-- Known model_types get their family's implicit facts (Qwen2's QKV bias, Gemma 3's four
-- norms per layer, Mixtral's per-expert intermediate_size, ...). Any other model_type with
-- the standard fields loads as a Llama-style decoder, and each assumption is returned as a
-- warning. Keys starting with "_" are never read.
local M = {}

local MAX_LAYERS = 1024  -- include/ndplan/model.h ND_MAX_LAYERS

-- Family traits. attn: how the attention kinds are laid out when layer_types is absent;
-- moe: how experts and MoE layers are read; gpt: LayerNorm, biases, 2-matrix MLP.
local FAMILIES = {
  llama = {tie = false},
  mistral = {tie = false, attn = "mistral"},
  qwen2 = {tie = false, qkv_bias = true, attn = "qwen2"},
  qwen2_moe = {tie = false, qkv_bias = true, attn = "qwen2", moe = "qwen"},
  qwen3 = {tie = false, qk_norm = true, attn = "qwen2"},
  qwen3_moe = {tie = false, qk_norm = true, attn = "qwen2", moe = "qwen"},
  mixtral = {tie = false, attn = "mistral", moe = "per_expert"},
  deepseek_v2 = {tie = false, moe = "deepseek"},
  deepseek_v3 = {tie = false, moe = "deepseek"},
  gpt_oss = {tie = false, attn = "alternate", moe = "per_expert", expert_bias = true,
             router_bias = true, sinks = true},
  gemma3_text = {tie = true, qk_norm = true, norms_per_layer = 4, attn = "gemma3",
                 -- Gemma3TextConfig defaults: its published configs leave these out
                 defaults = {vocab_size = 262208, head_dim = 256, sliding_window = 4096,
                             max_position_embeddings = 131072, sliding_window_pattern = 6}},
  qwen3_next = {tie = false, qk_norm = true, attn = "hybrid", moe = "qwen",
                output_gate = true},
  qwen3_5_text = {tie = false, qk_norm = true, attn = "hybrid", output_gate = true},
  qwen3_5_moe_text = {tie = false, qk_norm = true, attn = "hybrid", moe = "qwen",
                      output_gate = true},
  gpt2 = {tie = true, gpt = true, position = "learned"},
  gpt_neox = {tie = false, gpt = true, position = "rope"},
  opt = {tie = true, gpt = true, position = "learned", position_offset = 2},
  bloom = {tie = true, gpt = true, position = "none", embed_norm = true, ffn_4h = true},
}

-- Wrapper model_types whose text tower is in text_config.
local TEXT_TOWER = {gemma3 = "gemma3_text", qwen3_5 = "qwen3_5_text",
                    qwen3_5_moe = "qwen3_5_moe_text"}

local LAYER_TYPES = {full_attention = "full", sliding_attention = "sliding",
                     linear_attention = "linear"}

local GATED_ACTS = {silu = true, swish = true, swiglu = true, geglu = true}

-- {======================================================================
-- Reading fields with their types checked; failures unwind to to_spec()
-- =======================================================================

local Failure = {}  -- metatable marking our own errors, so real bugs still propagate

local Reader = {}
Reader.__index = Reader

-- JSON null (cjson.null, a lightuserdata) and YAML null count as absent.
local function is_null(v)
  return v == nil or type(v) == "userdata"
end

local function names_of(names)
  return type(names) == "table" and names or {names}
end

function Reader:fail(fmt, ...)
  error(setmetatable({message = self.source .. ": " .. fmt:format(...)}, Failure), 0)
end

function Reader:warn(fmt, ...)
  self.warnings[#self.warnings + 1] = fmt:format(...)
end

-- raw(names) -> value, name: the first non-null field, from text_config, then the outer
-- table, then the family's defaults (what HF's config class fills in)
function Reader:raw(names)
  for _, n in ipairs(names_of(names)) do
    local v = self.inner[n]
    if is_null(v) and self.outer then v = self.outer[n] end
    if is_null(v) and self.defaults then v = self.defaults[n] end
    if not is_null(v) then return v, n end
  end
  return nil
end

function Reader:missing(names, what)
  local list = names_of(names)
  local also = ""
  if #list > 1 then also = "; also read from " .. table.concat(list, ", ", 2) end
  self:fail("missing field '%s' (expected %s%s)", list[1], what, also)
end

-- int(names [, what [, min [, max]]]) -> integer | nil. `what` makes the field required.
function Reader:int(names, what, min, max)
  local v, name = self:raw(names)
  if v == nil then
    if what then self:missing(names, what) end
    return nil
  end
  local i = math.type(v) and math.tointeger(v)
  min = min or 0
  if not i or i < min then
    self:fail("field '%s' must be an integer >= %d, got %s", name, min,
              type(v) == "number" and tostring(v) or type(v))
  end
  if max and i > max then
    self:fail("field '%s' must be at most %d, got %d", name, max, i)
  end
  return i
end

function Reader:bool(names)
  local v, name = self:raw(names)
  if v ~= nil and type(v) ~= "boolean" then
    self:fail("field '%s' must be true or false, got %s", name, type(v))
  end
  return v
end

function Reader:str(names)
  local v, name = self:raw(names)
  if v ~= nil and type(v) ~= "string" then
    self:fail("field '%s' must be a string, got %s", name, type(v))
  end
  return v
end

-- list(names) -> array | nil, each entry checked by `check(value) -> ok`
function Reader:list(names, expected, check)
  local v, name = self:raw(names)
  if v == nil then return nil end
  if type(v) ~= "table" then self:fail("field '%s' must be a list of %s", name, expected) end
  for i, x in ipairs(v) do
    if not check(x) then
      self:fail("field '%s': entry %d must be %s, got %s", name, i, expected,
                type(x) == "string" and "'" .. x .. "'" or type(x))
    end
  end
  return v, name
end

-- }======================================================================

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
    for i = 1, L do kinds[i] = LAYER_TYPES[types[i]] end
    return kinds
  end
  local rule = traits.attn
  local window = s.sliding_window > 0
  local interval = rule == "hybrid" and (r:int("full_attention_interval", nil, 1) or 4)
  local pattern = rule == "gemma3" and (r:int("sliding_window_pattern", nil, 1) or 6)
  for i = 1, L do
    local k = "full"
    if rule == "hybrid" then  -- Qwen3-Next/3.5: every n-th layer is full, the rest linear
      k = (i % interval == 0) and "full" or "linear"
    elseif rule == "gemma3" then  -- n-1 local layers, then one global
      k = (i % pattern == 0) and "full" or "sliding"
    elseif rule == "alternate" then
      k = (i % 2 == 1) and "sliding" or "full"
    elseif rule == "qwen2" then  -- usually off; when on, layers from max_window_layers slide
      if r:bool("use_sliding_window") and window
         and i - 1 >= (r:int("max_window_layers") or 0) then
        k = "sliding"
      end
    elseif rule == "mistral" then  -- a non-null sliding_window applies to every layer
      if window then k = "sliding" end
    end
    kinds[i] = k
  end
  return kinds
end

-- MLP kinds of the body layers
local function mlp_kinds(r, s, traits, L)
  local kinds = {}
  local rule = traits.moe
  local only = {}
  local dense_first, freq, step = 0, 1, 1
  if s.num_experts > 0 then
    if rule == "deepseek" or rule == nil then
      dense_first = r:int("first_k_dense_replace") or 0
      freq = r:int("moe_layer_freq", nil, 1) or 1
    end
    if rule == "qwen" or rule == nil then
      step = r:int("decoder_sparse_step", nil, 1) or 1
      for _, i in ipairs(r:list("mlp_only_layers", "a layer index", is_int) or {}) do
        only[math.tointeger(i)] = true
      end
    end
  end
  for i = 0, L - 1 do
    local moe = s.num_experts > 0 and i >= dense_first and i % freq == 0
                and (i + 1) % step == 0 and not only[i]
    kinds[i + 1] = moe and "moe" or "dense"
  end
  return kinds
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
  if groups and groups > 1 then
    s.expert_groups = groups
    s.groups_per_token = r:int("topk_group", "an integer: expert groups per token", 1)
  end
  local per_expert = traits.moe == "per_expert"
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
  local shared = r:int("shared_expert_intermediate_size") or 0
  if n_shared > 0 then  -- DeepSeek: n copies of a routed-width expert
    s.num_shared_experts, s.shared_ffn_size = n_shared, n_shared * s.moe_ffn_size
  elseif shared > 0 then  -- Qwen: one shared expert of its own width, with a sigmoid gate
    s.num_shared_experts, s.shared_ffn_size, s.shared_expert_gate = 1, shared, true
  end
  s.router_bias = traits.router_bias or r:str("topk_method") == "noaux_tc"
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
end

local function read_linear(r, s)
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
  s.head_dim = r:int("head_dim", nil, 1)
  s.max_position = r:int({"max_position_embeddings", "n_positions", "seq_length", "n_ctx"})
                   or 0
  s.sliding_window = r:int("sliding_window") or 0
  s.mtp_layers = r:int({"num_nextn_predict_layers", "mtp_num_hidden_layers"}, nil, 0,
                       MAX_LAYERS) or 0
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
  r.defaults = traits.defaults
  local s = {name = opts.name, family = (family or "custom"):sub(1, 63)}
  read_common(r, s, traits)
  read_mla(r, s)
  local per_expert = read_experts(r, s, traits)

  if not known then guess_unknown(r, s, family)
  else
    s.norm = traits.gpt and "layernorm" or "rmsnorm"
    s.gated_mlp = not traits.gpt
  end
  s.tie_embeddings = r:bool("tie_word_embeddings")
  if s.tie_embeddings == nil then s.tie_embeddings = traits.tie or false end
  s.qk_norm = traits.qk_norm or false
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
    s.o_bias = attn_bias
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
  local attention = attention_kinds(r, s, traits, L)
  local mlp = mlp_kinds(r, s, traits, L)
  local uses = {}
  for i = 1, L do uses[attention[i]], uses[mlp[i]] = true, true end
  for i = L + 1, L + s.mtp_layers do  -- MTP modules: full (or MLA) attention, body's MLP
    attention[i] = s.kv_lora_rank > 0 and "mla" or "full"
    mlp[i] = s.num_experts > 0 and "moe" or "dense"
    uses[attention[i]], uses[mlp[i]] = true, true
  end
  s.attention, s.mlp = attention, mlp
  if uses.linear then read_linear(r, s) end
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
  s.ffn_size = 0
  if uses.dense then
    if traits.ffn_4h then s.ffn_size = 4 * s.hidden_size
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

-- to_spec(cfg [, opts]) -> spec, warnings | nil, message
function M.to_spec(cfg, opts)
  if type(cfg) ~= "table" then
    error("hfconfig.to_spec: expected a config table, got " .. type(cfg), 2)
  end
  opts = opts or {}
  local r = setmetatable({inner = cfg, outer = nil, warnings = {},
                          source = opts.source or "(config)"}, Reader)
  local text = cfg.text_config
  if type(text) == "table" then r.inner, r.outer = text, cfg end
  local ok, res = pcall(convert, r, {name = opts.name or "custom"})
  if ok then return res, r.warnings end
  if getmetatable(res) == Failure then return nil, res.message end
  error(res, 0)
end

return M
