-- Issue 16, item 5: with --layout balanced, each stage's time saved against full recompute
-- is the one of the plan on the layout the balancer chose (it printed 0.00 s on every stage
-- and wrote zeros to stage_savings). The same layout given by hand is the reference.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"

-- (--stack none: a budget set on the device file alone)
local JOB = {"-m", "llama3.1-8b", "-d", "8", "-b", "64", "--pp", "4", "--zero", "1", "-M", "34GiB",
             "--stack", "none", "--recompute", "per_layer"}
local function with(extra)
  local a = {"estimate"}
  for _, x in ipairs(JOB) do a[#a + 1] = x end
  for _, x in ipairs(extra) do a[#a + 1] = x end
  return a
end

describe("--layout balanced", function()
  it("reports the savings of the plan on the balanced layout", function()
    local b = R.run(with({"--layout", "balanced", "--json"}))
    assert.equal(0, b.code, b.err)
    local bal = cjson.decode(b.out)
    local layout = {}
    for i, n in ipairs(bal.strategy.stage_layers) do layout[i] = tostring(n) end
    assert.is_true(bal.layout_moves > 0, "the balancer moved no layer: the case tests nothing")
    local h = R.run(with({"--stage-layers", table.concat(layout, ","), "--json"}))
    assert.equal(0, h.code, h.err)
    local hand = cjson.decode(h.out)
    assert.equal(#hand.stage_savings_s, #bal.stage_savings_s)
    for s, v in ipairs(hand.stage_savings_s) do
      assert.is_true(v > 0, "stage " .. s)
      assert.is_true(math.abs(bal.stage_savings_s[s] - v) <= 1e-9 * v, "stage " .. s)
    end
  end)

  it("ndplan recompute prints and writes non-zero savings", function()
    local dir = R.tmpdir()
    local a = {"recompute"}
    for i = 1, #JOB - 2 do a[#a + 1] = JOB[i] end  -- recompute is per_layer already
    for _, x in ipairs({"--layout", "balanced", "-o", dir}) do a[#a + 1] = x end
    local r = R.run(a)
    assert.equal(0, r.code, r.err)
    assert.is_nil(r.out:find("0.00 s", 1, true), r.out)
    local csv = assert(R.read(dir .. "/recompute_potentials.csv"))
    local plan_row = csv:match("^[^\n]*\n([^\n]*)")   -- the plan itself (step 0)
    local savings = plan_row:match(',"%[([%d.,e-]+)%]",per_layer$')
    assert.is_truthy(savings, plan_row)
    for v in savings:gmatch("[^,]+") do assert.is_true(tonumber(v) > 0, savings) end
    os.execute("rm -rf " .. R.quote(dir))
  end)
end)
