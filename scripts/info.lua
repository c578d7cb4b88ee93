-- ndplan info: summarise one model: family, layer stack by kind, parameter breakdown
local cli = require "ndplan.cli"
local json = require "ndplan.json"

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
say("params    %s total, %s active", cli.count(p.total), cli.count(p.active))
if p.total_with_mtp and p.total_with_mtp ~= p.total then
  say("          %s with the MTP module(s)", cli.count(p.total_with_mtp))
end
say("")
say("layer stack:")
local rows = {}
for _, g in ipairs(groups) do
  rows[#rows + 1] = {
    layers = g.count == 1 and tostring(g.first) or
             string.format("%d-%d", g.first, g.first + g.count - 1),
    count = g.count, kind = g.kind .. (g.mtp and " (mtp)" or ""),
  }
end
out[#out + 1] = (cli.format_table({
  {key = "layers", title = "  layers"}, {key = "count", title = "count", align = "right"},
  {key = "kind", title = "kind"},
}, rows):gsub("\n$", ""):gsub("([^\n]+)", "  %1"))
say("")
say("parameter breakdown:")
local parts = {}
for _, k in ipairs({"embedding", "attention", "dense_mlp", "routed_experts", "shared_experts",
                    "router", "norms", "head", "mtp"}) do
  local v = p.breakdown[k] or 0
  parts[#parts + 1] = {part = k, params = v,
                       share = p.total_with_mtp > 0 and 100 * v / p.total_with_mtp or 0}
end
out[#out + 1] = (cli.format_table({
  {key = "part", title = "part"},
  {key = "params", title = "params", align = "right", fmt = cli.count},
  {key = "share", title = "share", align = "right",
   fmt = function(v) return string.format("%.1f%%", v) end},
}, parts):gsub("\n$", ""):gsub("([^\n]+)", "  %1"))
io.write(table.concat(out, "\n"), "\n")
