-- The validation harness itself (metrics) and, where the published tables are present
-- beside the checkout (../shared/validation), the floors the estimators must beat on them.
local nd = require "ndplan"
local V = require "ndplan.validate"

describe("validation metrics", function()
  it("spearman is 1 for the same order, -1 for the reverse and handles ties", function()
    assert.are.equal(1, V.spearman({1, 2, 3, 4}, {10, 20, 30, 40}))
    assert.are.equal(-1, V.spearman({1, 2, 3, 4}, {40, 30, 20, 10}))
    local rho = V.spearman({1, 2, 2, 3}, {1, 2, 3, 4})
    assert.is_true(rho > 0.9 and rho < 1)
  end)

  it("summary reports MAPE and max over the rows that were priced", function()
    local s = V.summary({
      {group = "a", error_pct = 10, predicted_s = 1.1, measured_s = 1},
      {group = "a", error_pct = -20, predicted_s = 1.6, measured_s = 2},
      {group = "a", refused = "no"},
    })
    assert.are.equal(2, s.n)
    assert.are.equal(1, s.refused)
    assert.are.equal(15, s.mape)
    assert.are.equal(20, s.max_abs)
  end)
end)

local dir = V.default_dir()
local present = io.open(dir .. "/korthikanti2022.csv", "r")
if present then present:close() end

describe("Korthikanti 2022 memory (Fig. 1 GiB per GPU, Fig. 7 % of baseline)", function()
  if not present then
    pending("validation data not found at " .. dir .. "; skipped")
    return
  end
  local cases = assert(V.memory_cases(dir, "korthikanti2022_memory"))
  V.run_memory(cases, assert(nd.device("a100-80gb")))

  it("covers model states, activations and ratios of all four models", function()
    local seen = {}
    for _, c in ipairs(cases) do seen[c.group .. c.quantity] = true end
    for _, m in ipairs({"22B", "175B", "530B", "1T"}) do
      assert.is_true(seen[m .. "params+optimizer"], m)
      assert.is_true(seen[m .. "activations"], m)
      assert.is_true(seen[m .. "activations % of baseline"], m)
    end
  end)

  for _, c in ipairs(cases) do
    it(c.label .. " within 5%", function()
      assert.is_nil(c.refused)
      assert.is_true(math.abs(c.error_pct) <= 5,
        string.format("%s: measured %.2f %s, predicted %.2f (%+.1f%%)", c.label, c.measured,
                      c.unit, c.predicted, c.error_pct))
    end)
  end
end)
