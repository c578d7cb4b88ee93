-- ndplan.hfconfig_nas: Nemotron NAS (DeciLM, model_type "nemotron-nas": Llama-3.3-Nemotron-
-- Super-49B, Llama-3.1-Nemotron-Ultra-253B) block_configs read into per-layer kinds and
-- widths. One block per layer; each has an `attention` and an `ffn` part:
--   attention.no_op         the layer has no attention (kind "none")
--   attention.n_heads_in_group  GQA: num_attention_heads / n_heads_in_group KV heads
--   ffn.no_op               the layer has no MLP (kind "none"); with attention.no_op too, the
--                           block is an identity (Ultra has 81): the residual passes through
--   ffn.ffn_mult            a SwiGLU MLP of width 2/3 * ffn_mult * hidden_size, truncated to
--                           an integer and rounded up to a multiple of 256 (the rule of
--                           DeciLM's _ffn_mult_to_intermediate_size, modeling_decilm.py in
--                           nvidia/Llama-3_3-Nemotron-Super-49B-v1; restated here)
--   replace_with_linear     the sublayer is one hidden x hidden linear layer: no kind of the
--                           core prices it, so it is refused by name (neither Super's nor
--                           Ultra's published blocks use it)
-- Sink, window and sparsity options change the attention's cost and are refused when set.
local M = {}

-- DeciLM's FFN width for ffn_mult at hidden size h (see the header)
function M.ffn_width(mult, h)
  local w = math.floor(2 * mult * h / 3)
  if w % 256 ~= 0 then w = w + 256 - w % 256 end
  return math.tointeger(w)
end

-- the block options read; any other key is reported by name
local KNOWN = {
  attention = {no_op = true, replace_with_linear = true, n_heads_in_group = true,
               sparsify = true, window_length = true, num_sink_tokens = true,
               unshifted_sink = true, use_prefill_window_in_sink_attention = true},
  ffn = {no_op = true, replace_with_linear = true, ffn_mult = true, sparsify = true},
}
-- options that change the cost when set (not null, not false): refused by name
local COSTLY = {sparsify = "sparsified weights", window_length = "windowed attention",
                num_sink_tokens = "sink tokens", unshifted_sink = "unshifted sink attention",
                use_prefill_window_in_sink_attention = "prefill-window sink attention"}

-- set: neither absent, JSON null (a userdata) nor false
local function is_set(v) return v ~= nil and v ~= false and type(v) ~= "userdata" end

local function part(r, i, block, name)
  local p = block[name]
  if type(p) ~= "table" then
    r:fail("block_configs[%d].%s: expected an object, got %s", i - 1, name, type(p))
  end
  local keys = {}
  for k in pairs(p) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  for _, k in ipairs(keys) do
    if not KNOWN[name][k] then
      r:warn("block_configs[%d].%s.%s: not read by ndplan; if it changes the layer, the model"
             .. " is priced without it", i - 1, name, k)
    elseif COSTLY[k] and is_set(p[k]) then
      r:fail("block_configs[%d].%s.%s is set (%s), which ndplan does not price yet", i - 1,
             name, k, COSTLY[k])
    end
  end
  if is_set(p.replace_with_linear) then
    r:fail("block_configs[%d].%s.replace_with_linear: a single hidden x hidden linear layer in"
           .. " place of the %s is not a layer kind ndplan prices yet", i - 1, name, name)
  end
  return p, is_set(p.no_op)
end

local function whole(r, i, what, v, min)
  if math.type(v) == "float" and v == math.floor(v) then v = math.tointeger(v) end
  if math.type(v) ~= "integer" or v < min then
    r:fail("block_configs[%d].%s: expected an integer >= %d, got %s", i - 1, what, min,
           tostring(v))
  end
  return v
end

-- kinds(r, s, L) -> attention, mlp (1-based kind names); sets s.num_kv_heads, s.ffn_size (the
-- most common width) and s.ffn_sizes (each dense layer's width where it differs, else 0)
function M.kinds(r, s, L)
  local blocks = r:raw("block_configs")
  if type(blocks) ~= "table" or #blocks == 0 then
    r:missing("block_configs", "an array of blocks, one per layer (Nemotron NAS)")
  end
  if #blocks ~= L then
    r:fail("field 'block_configs' has %d blocks but num_hidden_layers is %d", #blocks, L)
  end
  local attention, mlp, width, kv, kv_at = {}, {}, {}, nil, nil
  local count, best = {}, nil
  for i = 1, L do
    local b = blocks[i]
    if type(b) ~= "table" then
      r:fail("block_configs[%d]: expected an object, got %s", i - 1, type(b))
    end
    local a, a_none = part(r, i, b, "attention")
    local f, f_none = part(r, i, b, "ffn")
    attention[i], mlp[i] = a_none and "none" or "full", f_none and "none" or "dense"
    if not a_none then
      local g = whole(r, i, "attention.n_heads_in_group", a.n_heads_in_group, 1)
      if s.num_heads % g ~= 0 then
        r:fail("block_configs[%d].attention.n_heads_in_group: %d does not divide"
               .. " num_attention_heads (%d)", i - 1, g, s.num_heads)
      end
      local n = s.num_heads // g
      if kv and n ~= kv then
        r:fail("block_configs[%d].attention.n_heads_in_group: %d KV heads here, %d in block %d;"
               .. " per-layer KV head counts are not priced by ndplan yet", i - 1, n, kv, kv_at)
      end
      kv, kv_at = n, kv or i - 1
    end
    if not f_none then
      local mult = f.ffn_mult
      if type(mult) ~= "number" or mult <= 0 then
        r:fail("block_configs[%d].ffn.ffn_mult: expected a number > 0, got %s", i - 1,
               tostring(mult))
      end
      width[i] = M.ffn_width(mult, s.hidden_size)
      count[width[i]] = (count[width[i]] or 0) + 1
      if not best or count[width[i]] > count[best] then best = width[i] end
    end
  end
  if kv then s.num_kv_heads = kv end
  s.ffn_size = best or 0
  local own = false
  s.ffn_sizes = {}
  for i = 1, L do
    s.ffn_sizes[i] = (width[i] and width[i] ~= best) and width[i] or 0
    own = own or s.ffn_sizes[i] > 0
  end
  if not own then s.ffn_sizes = nil end
  return attention, mlp
end

return M
