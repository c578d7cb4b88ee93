-- `ndplan search --trainer NAME` (issue 15): the ranked strategies are the ones that trainer's
-- file states exactly, so the winner is what the exported file runs.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"

local JOB = {"-m", "llama3.1-8b", "-A", "h100", "-d", "16", "-b", "64", "--seq-len", "8192",
             "--recompute", "auto", "-M", "40GiB", "--stack", "none", "-j", "1"}

local function search(...)
  local a = {"search"}
  for _, x in ipairs(JOB) do a[#a + 1] = x end
  for _, x in ipairs({...}) do a[#a + 1] = x end
  return R.run(a)
end

local function json_of(r)
  assert.equal(0, r.code, r.err)
  return cjson.decode(r.out)
end

describe("ndplan search --trainer", function()
  local free = json_of(search("--json", "-t", "3"))

  it("ranks only what DeepSpeed's ds_config states: no TP with PP, ZeRO <= 1 with PP, full or no AC", function()
    local doc = json_of(search("--json", "-t", "5", "--trainer", "deepspeed"))
    assert.is_true(#doc.results >= 1)
    for _, res in ipairs(doc.results) do
      local st = res.strategy
      assert.is_false(st.pp > 1 and st.tp > 1)
      assert.is_false(st.pp > 1 and st.dp > 1 and st.zero >= 2)
      assert.is_true(st.recompute == "none" or st.recompute == "full", st.recompute)
      assert.is_false(st.tp > 1 and st.sp)
    end
    -- never faster than the free winner
    assert.is_true(doc.results[1].step_time_s >= free.results[1].step_time_s)
  end)

  it("writes the winner's file without rounding anything", function()
    for _, name in ipairs({"megatron", "torchtitan", "deepspeed", "hyper"}) do
      local dir = R.tmpdir()
      local r = search("-t", "1", "--trainer", name, "-o", dir, "--export", name)
      assert.equal(0, r.code, r.err)
      local exports = assert(r.out:match("\n(export " .. name .. " .*)$"), name)
      assert.matches("^export " .. name .. " +/[^\n]+ %(", exports)  -- written, at its path
      assert.is_nil(exports:find("rounded", 1, true), name)  -- (notes of what code sets may remain)
      assert.is_nil(exports:find("refused", 1, true), name)
      os.execute("rm -rf " .. R.quote(dir))
    end
  end)

  it("takes a dialect: torchtitan main has no FP8 flags, v0.2.2 has", function()
    local r = search("--trainer", "torchtitan", "--precision", "fp8:tensorwise")
    assert.equal(2, r.code)
    assert.matches("trainer torchtitan states no fp8:tensorwise recipe", r.err)
    local v = search("-t", "1", "--trainer", "torchtitan", "--dialect", "v0.2.2",
                     "--precision", "fp8:tensorwise")
    assert.equal(0, v.code, v.err)
  end)

  it("refuses an unknown trainer or dialect as a usage error", function()
    local r = search("--trainer", "nemo")
    assert.equal(2, r.code)
    assert.matches("unknown export format 'nemo'", r.err)
    local d = search("--trainer", "deepspeed", "--dialect", "v0.2.2")
    assert.equal(2, d.code)
    assert.matches("no selected format has dialect 'v0.2.2'", d.err)
  end)
end)
