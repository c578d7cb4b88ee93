-- ndplan info: summarise one model: family, layer stack by kind, parameter breakdown
local cli = require "ndplan.cli"
local text = require "ndplan.out.text"
local json = require "ndplan.io.json"

local spec = {
  name = "info",
  usage = "--model NAME|PATH [--json]",
  summary = "Summarise a model: family, shape, layer stack by kind, parameter totals.",
  options = {
    {name = "model", short = "m", arg = "NAME|PATH", required = true,
     help = "a bundled model name (ndplan models) or a config.json / YAML path"},
    {name = "json", help = "print one JSON document instead of text"},
    {name = "strict", help = "refuse a model the loader had to assume anything about"},
  },
}

local opts = cli.parse(spec, {...})
if not opts then return end

local m = cli.check(nd.model(opts.model, {strict = opts.strict}))
local p, s, groups = m:params(), m:spec(), m:layers()
if s.ffn_sizes then  -- per-layer MLP widths (Nemotron NAS): each width is its own kind
  for _, g in ipairs(groups) do
    if g.ffn_size then g.kind = ("%s (ffn %d)"):format(g.kind, g.ffn_size) end
  end
end
local warnings = m:warnings()
for _, w in ipairs(warnings) do io.stderr:write("ndplan: warning: ", w, "\n") end

if opts.json then
  io.write(json.encode({schema = "ndplan.info/1", model = s, layers = groups, params = p,
                        warnings = warnings}), "\n")
  return
end

local out = {}
local function say(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
say("model     %s (%s)", s.name, s.family)
say("shape     %d layers, hidden %d, %d heads / %d KV heads of %d, vocab %d",
    s.num_layers, s.hidden_size, s.num_heads, s.num_kv_heads, s.head_dim, s.vocab_size)
if (s.num_experts or 0) > 0 then
  say("experts   %d routed (top-%d, width %d), %d shared", s.num_experts, s.top_k,
      s.moe_ffn_size, s.num_shared_experts or 0)
end
if (s.mtp_layers or 0) > 0 then say("mtp       %d layer(s)", s.mtp_layers) end
if (s.mamba_heads or 0) > 0 then
  say("mamba     %d heads of %d, state %d, %d groups, conv %d, chunk %d", s.mamba_heads,
      s.mamba_head_dim, s.mamba_state, s.mamba_groups, s.mamba_conv, s.mamba_chunk)
end
if (s.mamba_inner or 0) > 0 then
  say("mamba1    %d channels, state %d, conv %d, dt_rank %d%s", s.mamba_inner, s.mamba_state,
      s.mamba_conv, s.mamba_dt_rank, s.mamba_dt_norms and " (RMSNorms on dt, B, C)" or "")
end
if (s.index_topk or 0) > 0 then
  say("indexer   %d heads of %d, top %d keys (DeepSeek sparse attention)", s.index_heads,
      s.index_head_dim, s.index_topk)
end
for _, g in ipairs(groups) do
  if g.attention == "sliding" then
    say("window    %d tokens%s", s.sliding_window, s.chunked_window
        and " (chunked: the sliding layers attend within fixed chunks)" or "")
    break
  end
end
say("params    %s total, %s active", text.count(p.total), text.count(p.active))
if p.total_with_mtp and p.total_with_mtp ~= p.total then
  say("          %s with the MTP module(s)", text.count(p.total_with_mtp))
end
local per_kind, order = {}, {}
for _, g in ipairs(groups) do
  local k = g.kind .. (g.mtp and " (mtp)" or "")
  if not per_kind[k] then order[#order + 1], per_kind[k] = k, 0 end
  per_kind[k] = per_kind[k] + g.count
end
for i, k in ipairs(order) do order[i] = per_kind[k] .. " " .. k end
say("kinds     %s", table.concat(order, ", "))
say("")
say("layer stack:")
local rows = text.stack_rows(groups)
out[#out + 1] = (text.format_table({
  {key = "layers", title = "  layers"}, {key = "count", title = "count", align = "right"},
  {key = "kind", title = "kind"},
}, rows):gsub("\n$", ""):gsub("([^\n]+)", "  %1"))
say("")
say("parameter breakdown:")
local parts = {}
for _, k in ipairs({"embedding", "attention", "dense_mlp", "routed_experts", "shared_experts",
                    "router", "norms", "head", "mtp"}) do
  local v = p.breakdown[k] or 0
  local label = k
  for _, g in ipairs(groups) do
    if k == "attention" and (g.attention == "mamba" or g.attention == "hybrid") then
      label = "attention, mamba"
    elseif k == "attention" and g.attention == "mamba1" then label = "attention, mamba1" end
  end
  parts[#parts + 1] = {part = label, params = v,
                       share = p.total_with_mtp > 0 and 100 * v / p.total_with_mtp or 0}
end
out[#out + 1] = (text.format_table({
  {key = "part", title = "part"},
  {key = "params", title = "params", align = "right", fmt = text.count},
  {key = "share", title = "share", align = "right",
   fmt = function(v) return string.format("%.1f%%", v) end},
}, parts):gsub("\n$", ""):gsub("([^\n]+)", "  %1"))
io.write(table.concat(out, "\n"), "\n")
