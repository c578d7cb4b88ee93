-- Issue 16, item 2: a pinned degree no candidate can take is refused before the walk with
-- the core's label and rule (exit 2), instead of "no strategy fits" (exit 3); a pinned TP
-- over the KV heads is legal but replicates them: a warning in search and estimate.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"

local function search(extra)
  local a = {"search", "-m", "llama3.1-8b", "-d", "8", "-b", "64"}
  for _, x in ipairs(extra) do a[#a + 1] = x end
  return R.run(a)
end

describe("pinned degrees", function()
  it("names the rule that refuses each impossible pinned value, exit 2", function()
    local cases = {
      {{"--tp", "3"}, "degree out of bounds", "devices: 8 is not a multiple of tp*cp*pp = 3"},
      {{"--tp", "16"}, "degree out of bounds", "tp 16 over the search's bound of 8 (the KV heads, the devices)"},
      {{"--pp", "2", "--vpp", "18"}, "degree out of bounds", "vpp 18 over the search's bound of 17 (the layers, embedding and loss over pp)"},
      {{"--mbs", "128"}, "degree out of bounds", "mbs 128 over the search's bound of 64 (the global batch)"},
      {{"--ep", "2"}, "EP over the experts or DP x TP", "the model has no experts"},
    }
    for _, c in ipairs(cases) do
      local r = search(c[1])
      local what = table.concat(c[1], " ")
      assert.equal(2, r.code, what .. ": " .. r.err)
      assert.equal("", r.out, what)
      assert.equal(string.format("ndplan: pinned degrees refused (%s): %s\n", c[2], c[3]), r.err, what)
    end
  end)

  it("from Lua: nil and the same message", function()
    local r = R.run({"-e", [[local ok, msg = nd.search{model = "llama3.1-8b", device = "h100",
      devices = 8, global_batch = 64, seq_len = 4096, tp = 3}; io.write(tostring(ok), " ", msg)]]})
    assert.equal(0, r.code, r.err)
    assert.equal("nil pinned degrees refused (degree out of bounds): devices: 8 is not a multiple of tp*cp*pp = 3", r.out)
  end)

  it("leaves what can run alone: a pinned vpp with pp searched, a legal pinned set", function()
    local r = search({"--vpp", "2", "--tp", "1"})
    assert.equal(0, r.code, r.err)
    assert.matches("%d+ priced, %d+ fit", r.out)
    local p = search({"--tp", "2", "--pp", "2", "--vpp", "2"})
    assert.equal(0, p.code, p.err)
  end)

  it("warns that a pinned TP over the KV heads replicates them, in search and estimate", function()
    local job = {"-m", "llama3.1-70b", "-d", "64", "-b", "64", "--tp", "16", "--zero", "3"}
    local warn = "ndplan: warning: tp 16 is over the model's 8 KV heads: each KV head is "
                 .. "replicated on 2 TP ranks"
    local s = R.run({"search", "--sp", "on", table.unpack(job)})
    assert.equal(0, s.code, s.err)
    assert.matches(warn, s.err, 1, true)
    assert.matches("TP up to 16 (pinned; the model has 8 KV heads)", s.out, 1, true)
    local sj = R.run({"search", "--json", "--sp", "on", table.unpack(job)})
    assert.equal(16, cjson.decode(sj.out).results[1].strategy.tp)   -- walked and priced
    local e = R.run({"estimate", "--sp", table.unpack(job)})
    assert.equal(0, e.code, e.err)
    assert.matches(warn, e.err, 1, true)
    local j = R.run({"estimate", "--json", "--sp", table.unpack(job)})
    assert.matches("replicated on 2 TP ranks", cjson.decode(j.out).warnings[1], 1, true)
    local quiet = R.run({"estimate", "-m", "llama3.1-70b", "-d", "64", "-b", "64", "--tp", "8"})
    assert.equal("", quiet.err)
  end)
end)
