-- ndplan devices: list the bundled devices with their compute, memory and links
local cli = require "ndplan.cli"
local text = require "ndplan.out.text"
local json = require "ndplan.io.json"
local units = nd.units

local spec = {
  name = "devices",
  summary = "List the bundled devices (examples/devices/*.yaml): peaks, memory, links; "
            .. "with --recipes, the precision recipes and their byte widths.",
  options = {
    {name = "json", help = "print one JSON document instead of a table"},
    {name = "recipes", help = "list the precision recipes --precision takes (the core's table)"},
  },
}

local opts = cli.parse(spec, {...})
if not opts then return end

if opts.recipes then  -- the core's recipe table, as --precision takes it
  local recipes = require("ndplan.config.device").recipes()
  if opts.json then
    local list = {}
    for i, r in ipairs(recipes) do list[i] = r end
    io.write(json.encode({schema = "ndplan.recipes/1", default_fp8 = recipes.default_fp8,
                          recipes = list}), "\n")
    return
  end
  local function num(v, r) return r.element_bytes > 0 and string.format("%.4g", v) or "-" end
  io.write(text.format_table({
    {key = "name", title = "recipe"},
    {key = "gemm_precision", title = "GEMMs at"},
    {key = "element_bytes", title = "B/elem", align = "right", fmt = num},
    {key = "block", title = "block", align = "right",
     fmt = function(v, r)
       if r.element_bytes == 0 then return "-" end
       return v > 0 and tostring(v) or r.scaling == "rowwise" and "row" or "tensor"
     end},
    {key = "scale_bytes", title = "B/scale", align = "right", fmt = num},
    {key = "quant_bytes", title = "B/copy", align = "right", fmt = num},
    {key = "copies", title = "copies", align = "right", fmt = num},
    {key = "bf16_last_layers", title = "BF16 layers", align = "right",
     fmt = function(_, r) return r.bf16_first_layers .. "+" .. r.bf16_last_layers end},
  }, recipes))
  io.write("fp8 alone is ", recipes.default_fp8, " (Megatron-LM's --fp8-recipe default)\n")
  for _, r in ipairs(recipes) do io.write("  ", r.name, ": ", r.source, "\n") end
  return
end

local rows = {}
for _, name in ipairs(nd.devices()) do
  local d = cli.check(nd.device(name))
  local t = d:totable()
  t.key = name
  rows[#rows + 1] = t
end

if opts.json then
  io.write(json.encode({schema = "ndplan.devices/1", devices = rows}), "\n")
  return
end

local function rate(v) return v and units.bytes(v, "decimal") .. "/s" or "-" end
local function tflops(v) return v and v > 0 and string.format("%.0f", v / 1e12) or "-" end
io.write(text.format_table({
  {key = "key", title = "device"},
  {key = "peak_flops", title = "bf16 TF/s", align = "right",
   fmt = function(v) return tflops(v and v.bf16) end},
  {key = "peak_flops", title = "fp8 TF/s", align = "right",
   fmt = function(v) return tflops(v and v.fp8) end},
  {key = "peak_flops", title = "fp4 TF/s", align = "right",  -- NVFP4, else OCP MXFP4 (mx)
   fmt = function(v)
     if v and v.nvfp4 > 0 then return tflops(v.nvfp4) end
     return v and v.mxfp4 > 0 and tflops(v.mxfp4) .. " mx" or "-"
   end},
  {key = "hbm_bytes", title = "HBM", align = "right",
   fmt = function(v) return units.bytes(v, "binary") end},
  {key = "hbm_bandwidth", title = "HBM BW", align = "right", fmt = rate},
  {key = "scale_up", title = "scale-up (per dir)", align = "right",
   fmt = function(v) return string.format("%d x %s", v.domain_size, rate(v.bandwidth)) end},
  {key = "scale_out", title = "scale-out (per dir)", align = "right",
   fmt = function(v) return rate(v.bandwidth) end},
  {key = "description", title = "description"},
}, rows))
