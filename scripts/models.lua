-- ndplan models: list the bundled models with their size and layer stack
local cli = require "ndplan.cli"
local text = require "ndplan.out.text"
local json = require "ndplan.io.json"

local spec = {
  name = "models",
  summary = "List the bundled models (examples/models/*.json): family, shape, parameters.",
  options = {
    {name = "json", help = "print one JSON document instead of a table"},
  },
}

local opts = cli.parse(spec, {...})
if not opts then return end

local rows = {}
for _, name in ipairs(nd.models()) do
  local m = cli.check(nd.model(name))
  local p = m:params()
  local s = m:spec()
  rows[#rows + 1] = {
    name = name, family = s.family, layers = s.num_layers, hidden = s.hidden_size,
    heads = s.num_heads, kv_heads = s.num_kv_heads, experts = s.num_experts or 0,
    top_k = s.top_k or 0, vocab = s.vocab_size, total = p.total, active = p.active,
  }
end

if opts.json then
  io.write(json.encode({schema = "ndplan.models/1", models = rows}), "\n")
  return
end

io.write(text.format_table({
  {key = "name", title = "model"},
  {key = "family", title = "family"},
  {key = "layers", title = "layers", align = "right"},
  {key = "hidden", title = "hidden", align = "right"},
  {key = "heads", title = "heads", align = "right",
   fmt = function(v, r) return string.format("%d/%d", v, r.kv_heads) end},
  {key = "experts", title = "experts", align = "right",
   fmt = function(v, r) return v > 0 and string.format("%d top-%d", v, r.top_k) or "-" end},
  {key = "vocab", title = "vocab", align = "right"},
  {key = "total", title = "params", align = "right", fmt = text.count},
  {key = "active", title = "active", align = "right", fmt = text.count},
}, rows))
