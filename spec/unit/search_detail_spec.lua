-- results:detail(index): a kept row priced again by the search's results with the walk's own
-- strategy, budget, costs and recompute modes. The oracle is nd.estimate given the row's
-- arguments and the modes the walk plans among, stated here (none, selective, full).
local nd = require "ndplan"
require("ndplan.config.stack").DEFAULT = "none"

local search = require "ndplan.search"
local strategy = require "ndplan.strategy"

local WALK_MODES = {"none", "selective", "full"}

-- nd.estimate of a ranked row, on the search's job, budget and costs
local function oracle(row, info, costs)
  local a = strategy.row_args(row.strategy, info)
  a.recompute = row.strategy.recompute
  if a.recompute == "per_layer" then a.recompute_modes = WALK_MODES end
  if costs then a.costs = costs end
  return nd.estimate(a)
end

local function same_result(d, e)
  assert.equal(e.step_time_s, d.step_time_s)
  assert.equal(e.peak_memory_bytes, d.peak_memory_bytes)
  assert.equal(e.fits, d.fits)
  assert.same(e.time_parts_s, d.time_parts_s)
  assert.same(e.strategy.layer_recompute, d.strategy.layer_recompute)
  assert.same(e.strategy.stage_layers, d.strategy.stage_layers)
  assert.same(e.stage_savings_s, d.stage_savings_s)
  assert.same(e.megatron, d.megatron)
end

describe("results:detail", function()
  local args = {model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64,
                seq_len = 8192, recompute = {"none", "full", "per_layer", "megatron"},
                pp = {1, 2, 3}, max_mem = "40GiB", jobs = 1, top = 400}

  it("prices every ranked row as nd.estimate prices its arguments, whatever its recompute",
     function()
    local ranked, info = assert(nd.search(args))
    local seen = {}
    for _, row in ipairs(ranked) do
      local d = search.detail(row, info)
      same_result(d, assert(oracle(row, info)))
      -- and the row's own figures: the walk priced the same run
      assert.equal(row.step_time_s, d.step_time_s)
      assert.equal(row.peak_memory_bytes, d.peak_memory_bytes)
      seen[row.strategy.recompute] = true
      if (row.strategy.layout or "even") ~= "even" then seen.uneven = true end
    end
    assert.is_true(seen.per_layer and seen.megatron and seen.full and seen.uneven or false)
  end)

  it("prices on other costs and another device when given them", function()
    local ranked, info = assert(nd.search(args))
    local costs = {dp_overlap = 0, memory_ops = 4}
    local dev = assert(require("ndplan.config.device").with_efficiency(info.device_obj, {hbm = 0.6}))
    for i = 1, 5 do
      local row = ranked[i]
      local d = assert(info.results:detail(row.index, nil, costs))
      local e = assert(oracle(row, info, costs))
      assert.equal(e.step_time_s, d.step_time_s)
      assert.is_true(d.step_time_s > row.step_time_s)  -- no overlap, more memory traffic
      local a = strategy.row_args(row.strategy, info)
      a.recompute = row.strategy.recompute
      if a.recompute == "per_layer" then a.recompute_modes = WALK_MODES end
      a.device = dev
      local slow = assert(info.results:detail(row.index, dev))
      assert.equal(assert(nd.estimate(a)).step_time_s, slow.step_time_s)
    end
  end)

  it("prices the post-filter's fallback row, and refuses an index no kept row has", function()
    local ranked, info = assert(nd.search{model = "llama3.1-8b", device = "h100", devices = 8,
                                          global_batch = 64, seq_len = 8192, dp = 3, jobs = 1})
    assert.equal(1, #ranked)
    assert.is_true(info.postfiltered > 0)
    local d = search.detail(ranked[1], info)
    assert.equal(ranked[1].step_time_s, d.step_time_s)
    assert.has_error(function() info.results:detail(0) end)
    assert.has_error(function() info.results:detail(info.tested + 1) end)
  end)
end)
