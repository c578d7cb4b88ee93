-- ndplan.hfconfig_hybrid: the hybrid SSM families whose layer stacks follow a rule of their
-- own, read into per-layer kinds, and Jamba's Mamba-1 mixer fields.
--
-- Falcon-H1 (model_type falcon_h1; transformers' FalconH1DecoderLayer): every layer runs
-- attention and a Mamba-2 mixer side by side on the same normed input and sums their
-- outputs (kind "hybrid"), then a dense MLP. Its multipliers (attention_in/out, key,
-- ssm_in/out, ssm_multipliers, mlp_multipliers, embedding, lm_head) scale activations and
-- change no FLOPs; the mixer's width is mamba_d_ssm (else mamba_expand x hidden_size), read
-- by hfconfig's Mamba-2 reader.
--
-- Jamba (model_type jamba; transformers' JambaConfig): attention in the layers i with
-- i % attn_layer_period == attn_layer_offset, a Mamba-1 mixer in the others; MoE (num_experts
-- of width intermediate_size, top num_experts_per_tok) in the layers with i %
-- expert_layer_period == expert_layer_offset, a dense MLP of width intermediate_size in the
-- others (all dense when num_experts is 1). The defaults are JambaConfig's (8, 4, 2, 1).
-- A sliding_window makes the attention layers windowed (transformers' JambaAttention passes
-- it to the attention kernel).
local M = {}

-- Falcon-H1: attention and MLP kinds of the body layers
local function falcon_h1(r, s, L)
  -- FalconH1Attention is Llama's, which does not read sliding_window: every layer is global
  s.sliding_window = 0
  local attention, mlp = {}, {}
  for i = 1, L do attention[i], mlp[i] = "hybrid", "dense" end
  return attention, mlp
end

-- Jamba: the two periodic rules
local function jamba(r, s, L)
  local ap = r:int("attn_layer_period", nil, 1) or 8
  local ao = r:int("attn_layer_offset", nil, 0) or 4
  local ep = r:int("expert_layer_period", nil, 1) or 2
  local eo = r:int("expert_layer_offset", nil, 0) or 1
  if ao >= ap then r:fail("attn_layer_offset (%d) must be below attn_layer_period (%d)", ao, ap) end
  if eo >= ep then
    r:fail("expert_layer_offset (%d) must be below expert_layer_period (%d)", eo, ep)
  end
  if s.num_experts <= 1 then s.num_experts, s.top_k = 0, 0 end  -- one expert: a dense MLP
  local attention, mlp = {}, {}
  for i = 0, L - 1 do
    attention[i + 1] = i % ap ~= ao and "mamba1" or (s.sliding_window > 0 and "sliding" or "full")
    mlp[i + 1] = (s.num_experts > 0 and i % ep == eo) and "moe" or "dense"
  end
  return attention, mlp
end

local RULES = {falcon_h1 = falcon_h1, jamba = jamba}

-- kinds(r, s, traits, L) -> attention kinds, MLP kinds of the body layers
function M.kinds(r, s, traits, L)
  return RULES[traits.hybrid](r, s, L)
end

-- Jamba's Mamba-1 mixer: mamba_expand x hidden_size channels, state mamba_d_state, conv
-- mamba_d_conv, dt_rank mamba_dt_rank ("auto": ceil(hidden_size / 16), as JambaConfig
-- resolves it); the RMSNorms on dt, B and C are always there in transformers' JambaMambaMixer
-- (Jamba-v0.1's own remote code made them optional: mamba_inner_layernorms).
function M.read_mamba1(r, s)
  local what = "an integer (the Mamba-1 layers need it)"
  local expand = r:int("mamba_expand", nil, 1) or 2
  s.mamba_inner = expand * s.hidden_size
  s.mamba_state = r:int("mamba_d_state", nil, 1) or 16
  s.mamba_conv = r:int("mamba_d_conv", nil, 1) or 4
  if r:raw("mamba_dt_rank") == "auto" or r:raw("mamba_dt_rank") == nil then
    r.seen.mamba_dt_rank = true
    s.mamba_dt_rank = (s.hidden_size + 15) // 16
  else s.mamba_dt_rank = r:int("mamba_dt_rank", what, 1) end
  local conv_bias = r:bool("mamba_conv_bias")
  s.mamba_conv_bias = conv_bias ~= false  -- JambaConfig: true
  s.mamba_proj_bias = r:bool("mamba_proj_bias") or false
  s.mamba_dt_norms = r:bool("mamba_inner_layernorms") ~= false
end

return M
