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

  -- Layers the estimator counts alike (one stage, kind, mode, switches, offload, BF16 end
  -- or not) are priced once and their figures shared: every variant must still be what
  -- nd.estimate gives it alone, across layouts, models and recipes that place layers apart.
  local OPS = {"attn_core", "norms", "act", "mla_up", "moe_dispatch"}
  local cases = {
    {"llama3.1-8b", "h100", {devices = 8, global_batch = 64, seq_len = 4096},
     {tp = 2, pp = 4, vpp = 2, mbs = 1, zero = 1, sp = true}},
    {"llama3.1-8b", "h100", {devices = 8, global_batch = 64, seq_len = 4096},
     {tp = 1, pp = 2, mbs = 2, zero = 1, account_for_embedding_in_pipeline_split = true,
      account_for_loss_in_pipeline_split = true}},
    {"deepseek-v3", "h800", {devices = 256, global_batch = 1024, seq_len = 4096},
     {tp = 2, pp = 8, ep = 32, mbs = 1, zero = 1, sp = true}},
    {"llama3.1-8b", "b200", {devices = 8, global_batch = 64, seq_len = 4096},
     {tp = 2, pp = 2, mbs = 1, zero = 1, sp = true, precision = "nvfp4"}},
    {"llama3.1-8b", "h100", {devices = 8, global_batch = 64, seq_len = 4096},
     {tp = 2, pp = 2, mbs = 1, zero = 1, sp = true, precision = "fp8:tensorwise",
      bf16_first_layers = 3, bf16_last_layers = 2}},
  }
  for ci, c in ipairs(cases) do
    it("prices every variant as nd.estimate does: " .. c[1] .. " case " .. ci, function()
      local model, device = assert(nd.model(c[1])), assert(nd.device(c[2]))
      local rng = 7 * ci  -- a fixed sequence: the plans are the same from run to run
      local function rand(n) rng = (rng * 1103515245 + 12345) % 2147483648; return rng % n + 1 end
      local L = model.num_layers
      local shared, total = 0, 0
      for _ = 1, 3 do
        local modes, ops, off = {}, {}, {}
        for i = 1, L do
          local r = rand(10)
          modes[i] = r <= 4 and "none" or r <= 8 and "selective" or "full"
          ops[i] = modes[i] == "selective" and rand(3) == 1 and {OPS[rand(3)]} or {}
          off[i] = modes[i] ~= "full" and rand(6) == 1
        end
        local st = {layer_recompute = modes, layer_selective_ops = ops, layer_offload = off}
        for k, v in pairs(c[4]) do st[k] = v end
        local cols = core.one_more_full(model, device, c[3], st)
        local seen = {}
        for n = 1, #cols.layer do
          local i = cols.layer[n]
          local key = cols.step_time_s[n] .. "/" .. cols.peak_memory_bytes[n]
          if seen[key] then shared = shared + 1 end
          seen[key] = true
          total = total + 1
          local a = {model = model, device = device, stack = "none"}
          for k, v in pairs(c[3]) do a[k] = v end
          for k, v in pairs(st) do a[k] = v end
          local m2 = {}
          for j = 1, L do m2[j] = modes[j] end
          m2[i] = "full"
          local o2 = {}
          for j = 1, L do o2[j] = ops[j] end
          o2[i] = {}
          a.layer_recompute, a.layer_selective_ops = m2, o2
          local e = assert(nd.estimate(a))
          assert.equal(e.step_time_s, cols.step_time_s[n])
          assert.equal(e.peak_memory_bytes, cols.peak_memory_bytes[n])
        end
      end
      assert.is_true(total > 0)
      assert.is_true(shared > 0)  -- some variants were counted alike
    end)
  end

  it("refuses a strategy without per-layer modes", function()
    assert.has_error(function() core.one_more_full(m, dev, job, base) end)
    local st = {layer_recompute = modes}
    for k, v in pairs(base) do st[k] = v end
    assert.has_error(function() core.one_more_full(m, dev, job, st, nil, "lots") end)
  end)

  -- With a budget: the variant first by step time, then peak, then layer among those within
  -- it (an oracle over the columns), and its result as run gives it alone.
  local function oracle_first(cols, budget)
    local best
    for n = 1, #cols.layer do
      local t, p = cols.step_time_s[n], cols.peak_memory_bytes[n]
      if not (p > budget) then
        local bt, bp = best and cols.step_time_s[best], best and cols.peak_memory_bytes[best]
        if not best or t < bt or (t == bt and p < bp) then best = n end
      end
    end
    return best
  end
  for ci, c in ipairs(cases) do
    it("names the first variant within a budget and gives its result: case " .. ci, function()
      local model, device = assert(nd.model(c[1])), assert(nd.device(c[2]))
      local L = model.num_layers
      local modes2, ops = {}, {}
      for i = 1, L do
        modes2[i] = i % 4 == 0 and "full" or i % 4 == 1 and "selective" or "none"
        ops[i] = modes2[i] == "selective" and i % 8 == 1 and {OPS[1]} or {}
      end
      local st = {layer_recompute = modes2, layer_selective_ops = ops}
      for k, v in pairs(c[4]) do st[k] = v end
      local cols = core.one_more_full(model, device, c[3], st)
      assert.is_nil(cols.first)
      assert.is_nil(cols.result)
      local peaks = {}
      for n = 1, #cols.layer do peaks[n] = cols.peak_memory_bytes[n] end
      table.sort(peaks)
      -- budgets: above every variant, between two, below every one
      for _, budget in ipairs{math.huge, peaks[math.max(1, #peaks // 2)], peaks[1] / 2} do
        local got = core.one_more_full(model, device, c[3], st, nil, budget)
        local want = oracle_first(got, budget)
        assert.equal(want, got.first)
        if want then
          local i = got.layer[want]
          local m2, o2 = {}, {}
          for j = 1, L do m2[j], o2[j] = modes2[j], ops[j] end
          m2[i], o2[i] = "full", {}
          local a = {}
          for k, v in pairs(st) do a[k] = v end
          a.layer_recompute, a.layer_selective_ops = m2, o2
          local r = assert(core.run(model, device, c[3], a))
          local b = got.result
          assert.equal(r.step_time_s, b.step_time_s)
          assert.equal(r.peak_memory_bytes, b.peak_memory_bytes)
          assert.same(r.time_parts_s, b.time_parts_s)
          assert.same(r.strategy, b.strategy)
          assert.same(r.stages, b.stages)
        else
          assert.is_nil(got.result)
        end
      end
    end)
  end
end)

-- A plan reads each stage's peak and recompute time (ndplan.plan.from_estimate) through
-- stage_figures, which skips building result.stages: it must state what result.stages does.
describe("stage_figures", function()
  local function estimate()
    return assert(nd.estimate{model = "llama3.1-8b", device = "h100", devices = 8,
                              global_batch = 64, seq_len = 8192, tp = 2, pp = 4, vpp = 2,
                              recompute = "full"})
  end
  local function from_stages(r)
    local peaks, recompute = {}, {}
    for s, st in ipairs(r.stages) do peaks[s], recompute[s] = st.peak, st.recompute_s end
    return peaks, recompute
  end

  it("states result.stages' peak and recompute_s, before and after they are built", function()
    local r = estimate()
    local peaks, recompute = core.stage_figures(r)  -- stages not built yet
    assert.equal(nil, rawget(r, "stages"))
    local want_peaks, want_recompute = from_stages(r)
    assert.equal(4, #want_peaks)
    assert.same(want_peaks, peaks)
    assert.same(want_recompute, recompute)
    assert.is_true(want_recompute[1] > 0)  -- full recompute costs time
    local again_peaks, again_recompute = core.stage_figures(r)  -- now from the built stages
    assert.same(want_peaks, again_peaks)
    assert.same(want_recompute, again_recompute)
  end)

  it("reads assigned stages, and refuses what is not an estimate", function()
    local r = estimate()
    r.stages = {{peak = 1, recompute_s = 2}, {peak = 3, recompute_s = 4}}
    local peaks, recompute = core.stage_figures(r)
    assert.same({1, 3}, peaks)
    assert.same({2, 4}, recompute)
    assert.has_error(function() core.stage_figures({stages = {}}) end)
    assert.has_error(function() core.stage_figures(42) end)
  end)
end)

-- ndplan.plan.potentials takes each step from the batch (one_more_full) and builds the kept
-- plan from the core's estimate with the batch's objects; the sequence must be the one
-- nd.estimate's plans give: next_plans (each variant through nd.estimate) and keep_potential.
describe("potentials", function()
  local plan = require "ndplan.plan"
  local recompute = require "ndplan.recompute"
  local est = require "ndplan.estimate"

  local function reference(args, model, first, limit)
    local full_args = {}
    for k, v in pairs(args) do full_args[k] = v end
    full_args.recompute, full_args.recompute_modes, full_args.layout = "full", nil, nil
    est.pin_layout(full_args, first.stage_layers)
    local full = assert(nd.estimate(full_args))
    local kept, current = {first}, first
    while #kept <= limit do
      local nxt = recompute.reading(function()
        return recompute.keep_potential(current, kept, plan.next_plans(args, model, current, full))
      end)
      if not nxt then break end
      current = nxt
    end
    return kept
  end

  for _, c in ipairs({
    {model = "llama3.1-8b", devices = 8, global_batch = 64, seq_len = 8192, tp = 2, pp = 2,
     vpp = 2, max_mem = "60GiB"},
    {model = "llama3.1-8b", devices = 8, global_batch = 32, seq_len = 8192, tp = 1, pp = 4,
     max_mem = "60GiB", layout = "balanced"},
  }) do
    it("gives the sequence nd.estimate's plans give: " .. c.model .. " pp " .. c.pp, function()
      local args = {device = "h100", recompute = "per_layer"}
      for k, v in pairs(c) do args[k] = v end
      local model = assert(nd.model(c.model))
      local r = assert(nd.estimate(args))
      local first = plan.from_estimate(r, model)
      local row = {}
      for k, v in pairs(args) do row[k] = v end
      row.layout = nil
      est.pin_layout(row, first.stage_layers)
      local got = plan.potentials(row, model, first, 6)
      local want = reference(row, model, first, 6)
      assert.is_true(#want >= 3)  -- the case takes steps
      assert.equal(#want, #got)
      for i = 1, #want do
        for _, k in ipairs({"score", "memory", "stage_memory", "stage_savings", "score_parts",
                            "layer_recompute", "ranges", "dimensions", "stage_layers"}) do
          assert.same(want[i][k], got[i][k])
        end
      end
    end)
  end
end)
