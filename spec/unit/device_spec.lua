-- ndplan.device: the bundled catalog, YAML device files, Lua tables and the userdata.
require "ndplan"
local device = require "ndplan.config.device"

local tmpfiles = {}

-- Writes `text` to `name` in a fresh temporary directory (or in `dir`) and returns the
-- path and the directory. Everything is removed after the suite, files first.
local function tmpyaml(text, name, dir)
  if not dir then
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir '" .. dir .. "'"))
    table.insert(tmpfiles, 1, dir)
  end
  local path = dir .. "/" .. (name or "dev.yaml")
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  tmpfiles[#tmpfiles + 1] = path
  return path, dir
end

local function load_error(x)
  local d, err = device.load(x)
  assert.is_nil(d)
  assert.is_string(err)
  return err
end

teardown(function()
  for i = #tmpfiles, 1, -1 do os.remove(tmpfiles[i]) end  -- directories sit at the front
end)

local BUNDLED = {"a100-40gb", "a100-80gb", "a2", "a3", "b200", "b300", "gb200", "gb300", "h100",
                 "h200", "h800", "mi300x", "mi325x", "mi350x", "mi355x"}

describe("the bundled catalog", function()
  it("lists every bundled device, sorted", function()
    assert.same(BUNDLED, device.names())
  end)

  it("loads and validates every bundled device", function()
    for _, n in ipairs(device.names()) do
      local d, err = device.load(n)
      assert(d, err)
      assert.is_true(device.is(d))
      assert.truthy(d.name ~= "")
      assert.truthy(d:peak_flops("bf16") > 1e14, n)
      assert.truthy(d.hbm_bytes > 1e10, n)
      assert.truthy(d.reserve_bytes < d.hbm_bytes, n)
      assert.truthy(d.scale_up.bandwidth > d.scale_out.bandwidth, n)
      assert.truthy(d.efficiency.gemm_half_size > 0, n)
      -- the round trip through the canonical table is exact
      assert.same(d:totable(), device.new(d:totable()):totable())
    end
  end)

  it("matches names case-insensitively", function()
    assert.equal("H100", device.load("H100").name)
    assert.equal("A100-80GB", device.load("A100-80GB").name)
  end)

  it("has the H100 datasheet numbers in SI units", function()
    local d = device.load("h100")
    assert.equal(989e12, d:peak_flops("bf16"))
    assert.equal(989e12, d:peak_flops())
    assert.equal(1979e12, d:peak_flops("fp8"))
    assert.equal(81559 * 2^20, d.hbm_bytes)  -- nvidia-smi total
    assert.equal(3.35e12, d.hbm_bandwidth)
    assert.same({domain_size = 8, bandwidth = 450e9, latency = 10e-6}, d.scale_up)
    assert.equal(50e9, d.scale_out.bandwidth)
    assert.equal(0.65, d.efficiency.scale_up)
    assert.equal(0.9, d.efficiency.scale_out)
    assert.equal(2.5 * 2^30, d.reserve_bytes)
  end)

  it("halves the H800's 400 GB/s bidirectional NVLink", function()
    assert.equal(200e9, device.load("h800").scale_up.bandwidth)
  end)

  it("has the NVL72 domain for GB200 and 16 dies per A3 node", function()
    assert.equal(72, device.load("gb200").scale_up.domain_size)
    assert.equal(16, device.load("a3").scale_up.domain_size)
    assert.equal(8, device.load("a2").scale_up.domain_size)
  end)

  it("has the current parts' peaks as their datasheets derive them", function()
    -- GB300 NVL72: the rack's 1.1 EF dense FP4, 360 PF FP8 and 20 TB over 72 GPUs
    local gb300 = device.load("gb300")
    assert.is_true(math.abs(72 * gb300:peak_flops("nvfp4") - 1.1e18) < 0.02 * 1.1e18)
    assert.equal(360e15, 72 * gb300:peak_flops("fp8"))
    assert.is_true(72 * gb300.hbm_bytes > 20e12)
    assert.equal(gb300:peak_flops("fp8"), gb300:peak_flops("mxfp8"))
    -- HGX B300: 108 PF dense FP4 and 72 PF sparse FP8 per 8 GPUs; nvidia-smi's capacity
    local b300 = device.load("b300")
    assert.equal(108e15, 8 * b300:peak_flops("nvfp4"))
    assert.equal(72e15, 8 * 2 * b300:peak_flops("fp8"))
    assert.equal(275040 * 2^20, b300.hbm_bytes)
    -- B200 rechecked: nvidia-smi's 183359 MiB, FP4 twice FP8
    local b200 = device.load("b200")
    assert.equal(183359 * 2^20, b200.hbm_bytes)
    assert.equal(2 * b200:peak_flops("fp8"), b200:peak_flops("nvfp4"))
    -- CDNA 4: 256 CUs x 8,192 FP8 FLOPs per clock at 2.4 / 2.2 GHz, BF16 half, MXFP4 twice;
    -- OCP MX formats only (no NVFP4)
    for name, ghz in pairs({mi355x = 2.4, mi350x = 2.2}) do
      local d = device.load(name)
      local fp8 = 256 * 8192 * ghz * 1e9
      assert.is_true(math.abs(d:peak_flops("fp8") - fp8) < 1e-4 * fp8, name)
      assert.is_true(math.abs(2 * d:peak_flops("bf16") - fp8) < 1e-4 * fp8, name)
      assert.is_true(math.abs(d:peak_flops("mxfp4") - 2 * fp8) < 1e-4 * fp8, name)
      assert.equal(d:peak_flops("fp8"), d:peak_flops("mxfp8"))
      assert.equal(0, d:peak_flops("nvfp4"))
      assert.equal(288 * 2^30, d.hbm_bytes)
    end
    -- MI325X: MI300X's compute with 256 GB of HBM3E at 6 TB/s
    local mi325x, mi300x = device.load("mi325x"), device.load("mi300x")
    assert.equal(mi300x:peak_flops("fp8"), mi325x:peak_flops("fp8"))
    assert.equal(256 * 2^30, mi325x.hbm_bytes)
    assert.equal(6e12, mi325x.hbm_bandwidth)
    assert.equal(0, mi325x:peak_flops("mxfp8"))
    -- Hopper has no MXFP8 or FP4 path
    for _, name in ipairs({"h100", "h200", "h800"}) do
      assert.equal(0, device.load(name):peak_flops("mxfp8"), name)
      assert.equal(0, device.load(name):peak_flops("nvfp4"), name)
    end
  end)

  it("has 4 GPUs per compute tray inside the GB200/GB300 NVLink domain", function()
    for _, name in ipairs({"gb200", "gb300"}) do
      local d = device.load(name)
      assert.equal(4, d.node_size, name)
      assert.equal(72, d.scale_up.domain_size, name)
    end
    assert.equal(0, device.load("h100").node_size)  -- the domain: 8
    local bad, err = device.load({base = "gb300", node_size = 5})
    assert.is_nil(bad)
    assert.matches("node_size %(5%) must divide scale_up.domain_size %(72%) or be a multiple of it", err)
  end)

  it("reports 0 FLOP/s for a precision a part lacks", function()
    assert.equal(0, device.load("a100-80gb"):peak_flops("fp8"))
    assert.has_error(function() device.load("h100"):peak_flops("fp4") end)
  end)
end)

describe("device userdata", function()
  local h100 = device.load("h100")

  it("has a readable tostring", function()
    assert.matches("^device H100: 989%.0 TFLOP/s bf16, 79%.6 GiB HBM", tostring(h100))
  end)

  it("is read-only and refuses unknown fields", function()
    assert.has_error(function() h100.hbm_bytes = 1 end)
    assert.has_error(function() return h100.hbm_size end, "device has no field 'hbm_size'")
  end)

  it("returns fresh tables, so callers cannot change the device", function()
    h100.scale_up.bandwidth = 1
    assert.equal(450e9, h100.scale_up.bandwidth)
  end)

  it("gives a GEMM efficiency curve that rises towards efficiency.gemm", function()
    local prev = 0
    for e = 6, 15 do
      local eff = h100:gemm_efficiency(10 ^ e)
      assert.truthy(eff > prev and eff < h100.efficiency.gemm)
      prev = eff
    end
    assert.near(h100.efficiency.gemm / 2, h100:gemm_efficiency(h100.efficiency.gemm_half_size),
                1e-12)
    assert.has_error(function() h100:gemm_efficiency(-1) end)
  end)
end)

describe("device.load from a file", function()
  it("reads a complete file", function()
    local path = tmpyaml([[
name: Toy
peak_tflops: {bf16: 100}
hbm: {capacity: 16GiB, bandwidth: 1TB/s}
scale_up: {domain: 4, bandwidth: 100GB/s}
scale_out: {bandwidth: 100Gb/s}
host_link: {bandwidth: 16GB/s}
]])
    local d = assert(device.load(path))
    assert.equal("Toy", d.name)
    assert.equal(16 * 2^30, d.hbm_bytes)
    assert.equal(12.5e9, d.scale_out.bandwidth)
    assert.equal(100e12, d:peak_flops("fp16"))   -- fp16 defaults to bf16
    assert.equal(0, d:peak_flops("fp8"))
    assert.equal(100e6, d.efficiency.gemm_half_size)  -- 1 us at peak
    assert.equal(0.65, d.efficiency.scale_up)         -- nd_device_init defaults
  end)

  it("inherits from a bundled device with base:", function()
    local path = tmpyaml("base: h100\nname: H100-96GB\nhbm: {capacity: 96GB}\n")
    local d = assert(device.load(path))
    assert.equal("H100-96GB", d.name)
    assert.equal(96e9, d.hbm_bytes)
    assert.equal(3.35e12, d.hbm_bandwidth)   -- inherited
    assert.equal(989e12, d:peak_flops("bf16"))
  end)

  it("follows a relative base path from the including file's directory", function()
    local _, dir = tmpyaml("base: h800\nname: Mine\nreserve: 4GiB\n", "mine.yaml")
    local child = tmpyaml("base: mine.yaml\nefficiency: {gemm: 0.7}\n", "child.yaml", dir)
    local d = assert(device.load(child))
    assert.equal("Mine", d.name)
    assert.equal(4 * 2^30, d.reserve_bytes)
    assert.equal(0.7, d.efficiency.gemm)
    assert.equal(200e9, d.scale_up.bandwidth)
  end)

  it("re-derives the GEMM size curve when a derived device changes the peak", function()
    local d = assert(device.load{base = "h100", peak_tflops = {bf16 = 500}})
    assert.equal(500e6, d.efficiency.gemm_half_size)
  end)

  it("refuses an unknown key, naming the key, file, line and column", function()
    local path = tmpyaml("base: h100\nhbm: {capacity: 80GB, bandwith: 3TB/s}\n")
    assert.equal(path .. ":2:23: unknown key 'hbm.bandwith' (expected one of: bandwidth, "
                 .. "capacity)", load_error(path))
    path = tmpyaml("base: h100\nflops: 3\n")
    assert.matches("^" .. path:gsub("%p", "%%%0") .. ":2:1: unknown key 'flops'",
                   load_error(path))
  end)

  it("refuses a bad unit, naming the field", function()
    local path = tmpyaml("base: h100\nhbm:\n  capacity: eighty\n")
    assert.equal(path .. ":3:3: field 'hbm.capacity': expected a size like 80GB or 80GiB, "
                 .. "got 'eighty'", load_error(path))
    path = tmpyaml("base: h100\nscale_up: {bandwidth: 450GB}\n")
    assert.matches("field 'scale_up.bandwidth': expected a rate per direction like 450GB/s",
                   load_error(path))
    path = tmpyaml("base: h100\nscale_out: {latency: 5}\n")
    assert.matches("field 'scale_out.latency': expected a time like 10us or 1.5ms, got 5",
                   load_error(path))
  end)

  it("wants units on sizes in YAML even for plain numbers", function()
    local path = tmpyaml("base: h100\nreserve: 1024\n")
    assert.matches("field 'reserve': expected a size like 80GB or 80GiB, got 1024",
                   load_error(path))
  end)

  it("refuses bad types and values", function()
    assert.matches("field 'efficiency.gemm': expected a fraction in %(0, 1%]",
                   load_error(tmpyaml("base: h100\nefficiency: {gemm: 1.2}\n")))
    assert.matches("field 'scale_up.domain': expected a whole number of devices",
                   load_error(tmpyaml("base: h100\nscale_up: {domain: 2.5}\n")))
    assert.matches("field 'hbm': expected a mapping",
                   load_error(tmpyaml("base: h100\nhbm: 80GB\n")))
    assert.matches("field 'peak_tflops.bf16': expected dense TFLOP/s",
                   load_error(tmpyaml("base: h100\npeak_tflops: {bf16: '989'}\n")))
    assert.matches("reserve_bytes .* must be smaller than hbm_bytes",
                   load_error(tmpyaml("base: h100\nreserve: 90GB\n")))
  end)

  it("names the missing field when there is no base", function()
    local path = tmpyaml("name: X\npeak_tflops: {bf16: 100}\n")
    assert.equal(path .. ": field 'hbm.capacity' is missing (give it, or inherit it with "
                 .. "base: <device>)", load_error(path))
  end)

  it("passes YAML syntax errors through with line and column", function()
    local path = tmpyaml("name: X\n  bad: indent\n")
    assert.matches("^" .. path:gsub("%p", "%%%0") .. ":2:%d+: ", load_error(path))
  end)

  it("returns nil and a message for a missing file or unknown name", function()
    assert.equal("/nonexistent/dev.yaml: No such file or directory",
                 load_error("/nonexistent/dev.yaml"))
    assert.matches("^unknown device 'h1000' %(bundled: a100%-40gb, ", load_error("h1000"))
    assert.matches("base 'h1000': unknown device", load_error(tmpyaml("base: h1000\n")))
  end)

  it("detects base cycles", function()
    local path = tmpyaml("base: dev.yaml\n")
    assert.matches("base cycle", load_error(path))
  end)
end)

describe("device.load from a Lua table", function()
  it("takes the file schema, with plain numbers as SI units", function()
    local d = assert(device.load{base = "a100-80gb", name = "A100-custom",
                                 hbm = {capacity = 40e9, bandwidth = "1.5TB/s"}})
    assert.equal(40e9, d.hbm_bytes)
    assert.equal(1.5e12, d.hbm_bandwidth)
  end)

  it("refuses unknown keys", function()
    assert.equal("(device table): unknown key 'hbm.size' (expected one of: bandwidth, "
                 .. "capacity)", load_error{base = "h100", hbm = {size = "80GB"}})
  end)

  it("returns a device unchanged and raises on nonsense (misuse)", function()
    local d = device.load("h100")
    assert.equal(d, device.load(d))
    assert.has_error(function() device.load(42) end)
    assert.has_error(function() device.load() end)
  end)
end)

describe("device.new (canonical SI table)", function()
  it("refuses missing, mistyped and unknown fields with nil, message", function()
    local t = device.load("h100"):totable()
    t.hbm_bytes = nil
    assert.same({nil, "field 'hbm_bytes' is missing"}, {device.new(t)})
    t.hbm_bytes = "80GB"
    assert.same({nil, "field 'hbm_bytes': expected a number, got string"}, {device.new(t)})
    t.hbm_bytes = 80e9
    t.scale_up.domain_sz = 8
    assert.same({nil, "unknown field 'scale_up.domain_sz'"}, {device.new(t)})
    t.scale_up.domain_sz = nil
    t.efficiency.hbm = 0
    assert.same({nil, "device 'H100': efficiency.hbm must be a fraction in (0, 1], got 0"},
                {device.new(t)})
    assert.has_error(function() device.new("h100") end)
  end)
end)
