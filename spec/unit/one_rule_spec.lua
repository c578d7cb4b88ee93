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
end)
