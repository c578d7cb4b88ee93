-- The recompute potentials' step in one call (ndplan.c.estimate.one_more_full, used by
-- ndplan.plan.potentials): each variant of a per-layer plan with one more layer fully
-- recomputed is priced exactly as nd.estimate prices that variant alone.
local nd = require "ndplan"
local core = require "ndplan.c.estimate"

describe("one_more_full", function()
  local m = assert(nd.model("llama3.1-8b"))
  local dev = assert(nd.device("h100"))
  local job = {devices = 8, global_batch = 64, seq_len = 8192}
  local base = {tp = 2, pp = 2, vpp = 1, mbs = 1, zero = 1, sp = true}
  local modes = {}
  for i = 1, 32 do modes[i] = (i % 3 == 0) and "full" or (i % 3 == 1) and "selective" or "none" end

  it("prices each layer that is not full turned full, as nd.estimate does", function()
    local st = {layer_recompute = modes}
    for k, v in pairs(base) do st[k] = v end
    local cols = core.one_more_full(m, dev, job, st)
    local want = {}
    for i, mode in ipairs(modes) do if mode ~= "full" then want[#want + 1] = i end end
    assert.equal(#want, #cols.layer)
    assert.equal(#want, #cols.step_time_s)
    assert.equal(#want, #cols.peak_memory_bytes)
    for n = 1, #cols.layer do
      local r = {layer = cols.layer[n], step_time_s = cols.step_time_s[n],
                 peak_memory_bytes = cols.peak_memory_bytes[n]}
      assert.equal(want[n], r.layer)
      local per_layer = {}
      for j, mode in ipairs(modes) do per_layer[j] = mode end
      per_layer[r.layer] = "full"
      local a = {model = m, device = dev, devices = job.devices, global_batch = job.global_batch,
                 seq_len = job.seq_len, layer_recompute = per_layer, stack = "none"}
      for k, v in pairs(base) do a[k] = v end
      local e = assert(nd.estimate(a))
      assert.equal(e.step_time_s, r.step_time_s)
      assert.equal(e.peak_memory_bytes, r.peak_memory_bytes)
    end
  end)

  it("refuses a strategy without per-layer modes", function()
    assert.has_error(function() core.one_more_full(m, dev, job, base) end)
  end)
end)
