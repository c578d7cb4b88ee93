-- The assumption report under a search's ranking (issue 14): the fields the active stack
-- profile does not calibrate, the winner's step time at each end of their ranges, and which
-- plan overtakes it there -- checked against nd.estimate at those values.
local nd = require "ndplan"
local A = require "ndplan.fit.assumptions"
local search = require "ndplan.search"

local ARGS = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 64,
              seq_len = 8192, top = 10}

local function run(extra)
  local a = {}
  for k, v in pairs(ARGS) do a[k] = v end
  for k, v in pairs(extra or {}) do a[k] = v end
  local ranked, info = assert(nd.search(a))
  return ranked, info, A.report(ranked, info)
end

local function names(rep)
  local set = {}
  for _, f in ipairs(rep.fields) do set[f.name] = f end
  return set
end

describe("the assumption report", function()
  it("lists what the profile leaves uncalibrated, not what it fits", function()
    local _, _, rep = run()
    local set = names(rep)
    assert.is_nil(set.dp_overlap)   -- megatron-core fits it
    assert.is_nil(set.gemm)         -- and H100's GEMM efficiency
    assert.is_truthy(set.memory_ops or set.hbm)  -- no profile fits these
    -- without a profile every fitted field is assumed too
    local _, info_none = run{stack = "none"}
    local all = {}
    for _, f in ipairs(A.fields(info_none)) do all[f.name] = true end
    assert.is_true(all.dp_overlap and all.gemm and all.memory_ops)
    -- what the user states is no assumption
    local _, _, stated = run{costs = {memory_ops = 2}}
    assert.is_nil(names(stated).memory_ops)
  end)

  it("names a plan that overtakes the winner, and it does at that value", function()
    -- without a profile every fitted field is an assumption too: some move the winner
    local ranked, info, rep = run{stack = "none"}
    local by_rank = {}
    for _, r in ipairs(ranked) do by_rank[r.rank] = r end
    local checked = 0
    for _, f in ipairs(rep.fields) do
      for _, side in ipairs({"lo", "hi"}) do
        local rank = f.changes[side]
        if rank then
          local function at(row)
            local args = require("ndplan.strategy").row_args(row.strategy, info)
            args.recompute = row.strategy.recompute
            if f.kind == "cost" then
              args.costs = {[f.name] = f[side]}
            else  -- the profile's device with the one field moved
              local stack = require "ndplan.config.stack"
              local dev, costs = stack.apply(stack.load(info.stack), info.device_obj, info.costs)
              args.device = assert(require("ndplan.config.device").with_efficiency(dev, {[f.name] = f[side]}))
              args.stack, args.costs = "none", costs
            end
            return assert(nd.estimate(args)).step_time_s
          end
          assert.is_true(at(by_rank[rank]) < at(ranked[1]), f.name .. " " .. side)
          assert.is_true(math.abs(at(ranked[1]) - f.winner_s[side]) <= 1e-9 * f.winner_s[side])
          checked = checked + 1
        end
      end
    end
    assert.is_true(checked > 0, "no field changes the winner in this search")
  end)

  it("goes under the ranking and into search.json", function()
    local ranked, info = run()
    local doc = search.json_doc(ranked, info)
    assert.is_table(doc.assumptions)
    assert.is_true(#A.lines(doc.assumptions) >= 1)
  end)
end)
