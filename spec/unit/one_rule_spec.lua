-- Rules kept once (issue 12's drift bugs): the estimator and the search give the same answer
-- from the same core rule.
local nd = require "ndplan"
require("ndplan.config.stack").DEFAULT = "none"

describe("one rule, one answer", function()
  it("names every schedule the core knows when one is wrong, in nd.estimate and nd.search", function()
    local args = {model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 8,
                  seq_len = 1024, schedule = "bogus"}
    for _, f in ipairs({nd.estimate, nd.search}) do
      local ok, err = pcall(f, args)
      assert.is_false(ok)
      assert.matches("schedule: expected 1f1b, interleaved, gpipe, zb or dualpipe, got 'bogus'",
                     err, 1, true)
    end
  end)

  it("refuses an expert TP that does not divide the experts' width in both", function()
    local moe = assert(nd.model{model_type = "mixtral", hidden_size = 1024, num_hidden_layers = 4,
                                num_attention_heads = 8, num_key_value_heads = 8,
                                intermediate_size = 100, num_local_experts = 8,
                                num_experts_per_tok = 2, vocab_size = 32000})
    local job = {model = moe, device = "h100", devices = 8, global_batch = 8, seq_len = 1024}
    local a = {tp = 8, etp = 8, sp = true}
    for k, v in pairs(job) do a[k] = v end
    local r, why = nd.estimate(a)
    assert.is_nil(r)
    assert.matches("EP divisibility: etp 8 must divide the experts' width 100", why, 1, true)
    local s = {tp = 8, etp = 8, sp = true, pp = 1, cp = 1}
    for k, v in pairs(job) do s[k] = v end
    local ranked, msg, info = nd.search(s)  -- pinned, so refused before the walk, by the rule
    assert.is_nil(ranked)
    assert.equal("EP divisibility", info.pinned_refused)
    assert.matches("etp 8 must divide the experts' width 100", msg, 1, true)
    -- etp 4 divides 100: priced by both
    a.etp = 4
    assert.is_truthy(nd.estimate(a))
  end)

  it("fits a stack profile within the core's stack bounds, every bounded field and no other",
     function()
    local fit = require "ndplan.fit.stack_fit"
    local names = require("ndplan.c.estimate").names()
    for kind, list in pairs({costs = fit.COST_FIELDS, efficiency = fit.DEVICE_FIELDS}) do
      local core_bounds, n = {}, 0
      for _, f in ipairs(names[kind]) do
        if f.stack_hi then core_bounds[f.name] = {f.stack_lo, f.stack_hi}; n = n + 1 end
      end
      assert.equal(n, #list)
      for _, f in ipairs(list) do assert.same(core_bounds[f.name], {f.lo, f.hi}) end
    end
    -- the assumptions report's ranges for what a profile leaves uncalibrated are the same
    local fields = require("ndplan.fit.assumptions").fields({stack = "none", device_obj =
                                                         assert(nd.device("h100"))})
    local cost = {}
    for _, f in ipairs(names.costs) do cost[f.name] = f end
    for _, f in ipairs(fields) do
      if f.kind == "cost" and cost[f.name].stack_hi then
        assert.same({cost[f.name].stack_lo, cost[f.name].stack_hi}, {f.lo, f.hi})
      end
    end
  end)
end)
