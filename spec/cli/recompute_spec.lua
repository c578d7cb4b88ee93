-- `ndplan recompute` as a user runs it: the per-layer plan under the budget, the stages,
-- the potentials, and the files written under -o.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"

local tmpdir = R.tmpdir

local function lines(path)
  local out = {}
  for l in io.lines(path) do out[#out + 1] = l end
  return out
end

-- Llama-3.1-8B on one 8-GPU node, PP 4: tight enough that some layers must recompute.
local base = {"recompute", "-m", "llama3.1-8b", "-A", "h100", "-d", "8", "-b", "64",
              "--seq-len", "8192", "--tp", "2", "--pp", "4", "--mbs", "2"}
local function with(extra)
  local a = {table.unpack(base)}
  for _, x in ipairs(extra) do a[#a + 1] = x end
  return a
end

describe("ndplan recompute", function()
  it("prints the per-layer plan, the stages and one more full layer per potential step", function()
    local r = R.run(with{"-M", "40GiB", "--steps", "3"})
    assert.equal(0, r.code, r.err)
    assert.matches("layers %d+%-?%d* %(dense%): full", r.out)
    assert.matches("saved vs full", r.out)
    assert.matches("potentials: one more layer fully recomputed per step %(3 steps%)", r.out)
  end)

  it("writes recompute_potentials.csv and the plot groups under -o", function()
    local dir = tmpdir()
    local r = R.run(with{"-M", "40GiB", "--steps", "4", "-o", dir})
    assert.equal(0, r.code, r.err)
    local csv = lines(dir .. "/recompute_potentials.csv")
    assert.equal(1 + 5, #csv)  -- header, step 0 and four more
    assert.matches("^TOP,step,DP,EP,TP,CP,PP,VPP,MB,MBS,SP,ZERO,changed_layer,full_layers,", csv[1])
    assert.matches("^1,0,", csv[2])
    assert.matches("^1,4,", csv[6])
    local groups = cjson.decode(io.open(dir .. "/recompute_plot_groups.json"):read("a"))
    assert.is_true(#groups == 1 and #groups[1].records >= 2)
    os.execute("rm -rf " .. R.quote(dir))
  end)

  it("potential steps never get faster and never hold fewer full layers", function()
    local r = R.run(with{"-M", "40GiB", "--steps", "6", "--json"})
    assert.equal(0, r.code, r.err)
    local doc = cjson.decode(r.out)
    assert.equal("ndplan.recompute/1", doc.schema)
    for i = 2, #doc.potentials do
      local a, b = doc.potentials[i - 1], doc.potentials[i]
      assert.equal(a.full_layers + 1, b.full_layers)
      assert.is_true(b.score_s >= a.score_s - 1e-12)
    end
  end)

  it("recomputes nothing when memory is plentiful", function()
    local r = R.run(with{"-A", "b200", "--json", "--steps", "0"})
    assert.equal(0, r.code, r.err)
    for _, m in ipairs(cjson.decode(r.out).plan.layer_recompute) do assert.equal("none", m) end
  end)

  it("prints the plan Megatron can state with --trainer megatron, and what it costs", function()
    local r = R.run(with{"-M", "40GiB", "--steps", "0", "--trainer", "megatron"})
    assert.equal(0, r.code, r.err)
    -- after the per-layer plan and its stages, before the potentials
    local at = r.out:find("\nmegatron: ", 1, true)
    assert.is_truthy(at, r.out)
    assert.is_true(at > r.out:find("saved vs full", 1, true))
    assert.is_true(at < r.out:find("potentials:", 1, true))
    assert.matches("\nmegatron: full on the first %d+ layers of each stage %(%-%-recompute%-granularity "
                   .. "full %-%-recompute%-method block %-%-recompute%-num%-layers %d+%)\n", r.out)
    assert.matches("\n  step time [%d.]+ m?s, peak [%d.]+ GiB\n", r.out)
    assert.matches("\n  cost of stating it in Megatron: %+[%d.]+ m?s per step %(%+[%d.]+%%%) "
                   .. "against the per%-layer plan\n", r.out)
    local j = R.run(with{"-M", "40GiB", "--steps", "0", "--trainer", "megatron", "--json"})
    assert.equal(0, j.code, j.err)
    local doc = cjson.decode(j.out)
    local t = doc.trainer_plan
    assert.equal("megatron", t.trainer)
    assert.is_true(t.fits)
    assert.equal("block", t.method)
    assert.is_true(t.peak_memory_bytes <= doc.estimate.budget_bytes)
    assert.is_true(t.step_time_s >= doc.estimate.step_time_s)
    assert.near(t.step_time_s - doc.estimate.step_time_s, t.cost_s, 1e-9)
    assert.equal(#doc.plan.layer_recompute, #t.layer_recompute)
    assert.equal("--recompute-method", t.flags[3])
    -- without the flag, no trainer plan
    assert.is_nil(cjson.decode(R.run(with{"-M", "40GiB", "--steps", "0", "--json"}).out).trainer_plan)
  end)

  it("refuses a trainer it does not know", function()
    local r = R.run(with{"--trainer", "nemo"})
    assert.equal(2, r.code)
    assert.matches("%-%-trainer: expected megatron, got 'nemo'", r.err)
  end)

  it("exits 3 with the stage and what it needs when nothing fits", function()
    local r = R.run(with{"-M", "8GiB"})
    assert.equal(3, r.code)
    assert.matches("over memory: stage %d+ needs", r.err)
  end)
end)
