-- ndplan devices: list the bundled devices with their compute, memory and links
local cli = require "ndplan.cli"
local json = require "ndplan.json"
local units = require "ndplan.c.units"

local spec = {
  name = "devices",
  summary = "List the bundled devices (examples/devices/*.yaml): peaks, memory, links.",
  options = {
    {name = "json", help = "print one JSON document instead of a table"},
  },
}

local opts = cli.parse(spec, {...})
if not opts then return end

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
io.write(cli.format_table({
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
