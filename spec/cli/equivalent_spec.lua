-- Issue 16, item 4: candidates that are the same run as one walked before them (ZeRO 1 and 2
-- with nothing to shard, DP x CP = 1; selective beside none when, under flash attention, it
-- keeps what none keeps) are counted as equivalent and not priced or shown.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"

local function search(extra)
  local a = {"search", "-m", "llama3.1-8b", "-d", "8", "-b", "64", "--json", "-t", "1000"}
  for _, x in ipairs(extra) do a[#a + 1] = x end
  local r = R.run(a)
  assert.equal(0, r.code, r.err)
  return cjson.decode(r.out)
end

describe("equivalent candidates", function()
  it("prices one ZeRO stage of those with nothing to shard", function()
    local doc = search({"--tp", "8", "--cp", "1", "--pp", "1", "--zero", "0,1,2"})  -- dp 1
    local c = doc.counts
    assert.is_true(c.equivalent > 0)
    assert.equal(2 * c.priced, c.equivalent)          -- zero 1 and 2 beside each zero 0
    for _, r in ipairs(doc.results) do assert.equal(0, r.strategy.zero) end
    -- where DP shards something, every stage is priced
    local dp2 = search({"--tp", "4", "--cp", "1", "--pp", "1", "--zero", "0,1,2"})
    assert.equal(0, dp2.counts.equivalent)
    local zeros = {}
    for _, r in ipairs(dp2.results) do zeros[r.strategy.zero] = true end
    assert.is_true(zeros[1] and zeros[2] and true or false)
  end)

  it("prices none, not selective, when selective keeps the same tensors", function()
    local doc = search({"--tp", "2", "--recompute", "none,selective", "--zero", "0"})
    assert.is_true(doc.counts.equivalent > 0)
    for _, r in ipairs(doc.results) do assert.equal("none", r.strategy.recompute) end
    -- without flash attention selective drops the score tensors: priced
    local other = search({"--tp", "2", "--recompute", "none,selective", "--no-flash", "--zero", "0"})
    assert.equal(0, other.counts.equivalent)
    local kinds = {}
    for _, r in ipairs(other.results) do kinds[r.strategy.recompute] = true end
    assert.is_true(kinds.selective)
  end)

  it("says how many in the counts line; tested = refused + priced + equivalent + not priced", function()
    local r = R.run({"search", "-m", "llama3.1-8b", "-d", "8", "-b", "64", "--tp", "8", "--pp", "1",
                     "--zero", "0,1,2"})
    assert.equal(0, r.code, r.err)
    local tested, refused, priced, eq = r.out:match(
      "(%d+) tested: (%d+) refused[^,]*, (%d+) priced, %d+ fit, (%d+) equivalent %(not priced%)")
    local over = r.out:match("over memory (%d+)") or 0
    assert.is_truthy(tested, r.out)
    assert.is_true(tonumber(eq) > 0, r.out)
    -- what the bounds left unpriced: pruned one by one (over memory among the refused too)
    -- and skipped with their sub-trees
    local pt, pm = r.out:match("not priced: (%d+) pruned by the step%-time bound, (%d+) by the memory")
    local st, sm = r.out:match("skipped unchecked in sub%-trees: (%d+) by the step%-time bound, (%d+) by")
    assert.equal(tonumber(tested), tonumber(refused) - tonumber(over) + tonumber(eq) + tonumber(priced)
                 + (tonumber(pt) or 0) + (tonumber(pm) or 0) + (tonumber(st) or 0) + (tonumber(sm) or 0))
  end)

  it("prices them all when a policy's objective may tell them apart", function()
    local path = R.tempfile("return {objective = function(e) return e.step_time_s + e.strategy.zero end}", ".lua")
    local doc = search({"--tp", "8", "--cp", "1", "--pp", "1", "--zero", "0,1,2", "--policy", path})
    os.remove(path)
    assert.equal(0, doc.counts.equivalent)
  end)
end)
