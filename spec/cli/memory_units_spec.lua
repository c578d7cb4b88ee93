-- Issue 16, item 1: a memory size is bytes (GB/gb = 10^9, GiB/gib = 2^30), a bare number is
-- refused with a suggestion, and rates keep bits. Every place a size is read: -M in estimate
-- and search, a device file's capacity, the search configuration YAML, max_mem from Lua.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"

local JOB = {"-m", "llama3.1-8b", "-A", "h100", "-d", "8", "-b", "64"}
local function cmd(name, extra)
  local a = {name}
  for _, x in ipairs(JOB) do a[#a + 1] = x end
  for _, x in ipairs(extra) do a[#a + 1] = x end
  return R.run(a)
end

describe("memory sizes", function()
  it("-M 80gb is 80 gigabytes, as -M 80GB, in estimate and search", function()
    for _, m in ipairs({"80gb", "80GB", "80Gb"}) do
      local e = cmd("estimate", {"--tp", "2", "-M", m, "--json"})
      assert.equal(0, e.code, e.err)
      assert.equal(80e9, cjson.decode(e.out).budget_bytes, m)
      local s = cmd("search", {"--tp", "2", "-M", m, "--json"})
      assert.equal(0, s.code, s.err)
      assert.equal(80e9, cjson.decode(s.out).budget_bytes, m)
    end
    local e = cmd("estimate", {"--tp", "2", "-M", "60gib", "--json"})
    assert.equal(60 * 2^30, cjson.decode(e.out).budget_bytes)
  end)

  it("refuses a bare -M number with a suggestion, exit 2", function()
    for _, name in ipairs({"estimate", "search", "recompute", "export"}) do
      local r = cmd(name, name == "export" and {"-f", "megatron", "-M", "80"} or {"-M", "80"})
      assert.equal(2, r.code, name .. ": " .. r.err)
      assert.equal("ndplan: --max-mem: a memory size needs a unit: did you mean 80GiB? "
                   .. "(GB = 10^9 bytes, GiB = 2^30)\n", r.err)
    end
  end)

  it("reads a device file's capacity as bytes and refuses one without a unit", function()
    local ok = R.tempfile("base: h100\nname: H100-lower\nhbm: {capacity: 80gb}\n", ".yaml")
    local r = R.run({"-e", ([[local d = nd.device(%q):totable()
      io.write(string.format("%%.0f %%.0f", d.hbm_bytes, d.scale_out.bandwidth))]]):format(ok)})
    assert.equal(0, r.code, r.err)
    assert.equal("80000000000 50000000000", r.out)  -- 400Gb/s inherited: bits stay bits
    local bad = R.tempfile("base: h100\nname: H100-bare\nhbm: {capacity: '80'}\n", ".yaml")
    local b = cmd("estimate", {"-A", bad})
    os.remove(ok); os.remove(bad)
    assert.equal(1, b.code)
    assert.matches("hbm.capacity", b.err)
    assert.matches("expected a size like 80GB or 80GiB", b.err)
  end)

  it("keeps the bundled catalog's bytes", function()
    local r = R.run({"-e", [[for _, n in ipairs(nd.devices()) do
      local d = nd.device(n):totable()
      io.write(string.format("%s %.0f\n", n, d.hbm_bytes)) end]]})
    assert.equal(0, r.code, r.err)
    assert.matches("h100 " .. string.format("%.0f", 81559 * 2^20), r.out, 1, true)
    assert.matches("b200 " .. string.format("%.0f", 183359 * 2^20), r.out, 1, true)  -- nvidia-smi's
    assert.matches("mi300x " .. string.format("%.0f", 192 * 2^30), r.out, 1, true)
  end)

  it("reads the search configuration's memory as GiB numbers or sizes with units", function()
    for _, case in ipairs({{"70", 70 * 2^30}, {"'70GB'", 70e9}, {"'70gib'", 70 * 2^30}}) do
      local path = R.tempfile("model: llama3.1-8b\ncluster: {num_nodes: 1, device_type: h100}\n"
        .. "parallelism: {tp: 2}\nconstraint: {global_batch_size: 64, memory_limit_gb: "
        .. case[1] .. "}\n", ".yaml")
      local r = R.run({"search", "-s", path, "--json"})
      os.remove(path)
      assert.equal(0, r.code, r.err)
      assert.equal(case[2], cjson.decode(r.out).budget_bytes)
    end
    local path = R.tempfile("model: llama3.1-8b\ncluster: {num_nodes: 1}\n"
      .. "constraint: {global_batch_size: 64, memory_limit_gb: '70 apples'}\n", ".yaml")
    local r = R.run({"search", "-s", path})
    os.remove(path)
    assert.equal(1, r.code)
    assert.matches("constraint.memory_limit_gb: expected a unit", r.err)
  end)

  it("max_mem from Lua: a number is bytes, a bare string is refused", function()
    local r = R.run({"-e", [[
      local a = {model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64,
                 seq_len = 4096, tp = 2}
      a.max_mem = "80gb"; local x = nd.estimate(a)
      a.max_mem = 7e10; local y = nd.estimate(a)
      a.max_mem = "80"; local z, err = nd.estimate(a)
      io.write(string.format("%.0f %.0f %s %s", x.budget_bytes, y.budget_bytes, tostring(z), err))]]})
    assert.equal(0, r.code, r.err)
    assert.equal("80000000000 70000000000 nil max_mem: a memory size needs a unit: did you "
                 .. "mean 80GiB? (GB = 10^9 bytes, GiB = 2^30)", r.out)
  end)
end)
