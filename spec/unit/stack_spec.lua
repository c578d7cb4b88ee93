-- Stack profiles: loading, applying to a device and costs, the bands, and the fitter.
local nd = require "ndplan"
local stack = require "ndplan.config.stack"
local SF = require "ndplan.fit.stack_fit"

describe("stack profiles", function()
  it("lists the bundled profiles and loads each", function()
    local names = stack.names()
    assert.is_true(#names >= 2)
    for _, n in ipairs(names) do assert.are.equal(n, assert(stack.load(n)).name) end
    assert.is_nil((stack.load("none")))
  end)

  it("refuses an unknown name and a bad field, naming them", function()
    local s, err = stack.load("bogus")
    assert.is_nil(s)
    assert.matches("unknown stack 'bogus'", err, 1, true)
    s, err = stack.load{name = "x", costs = {bogus = 1}}
    assert.is_nil(s)
    assert.matches("costs.bogus", err, 1, true)
    s, err = stack.load{name = "x", devices = {h100 = {}}, fallback = "b200"}
    assert.is_nil(s)
    assert.matches("fallback", err, 1, true)
  end)

  it("replaces the device's efficiencies with the profile's and keeps the caller's costs on top", function()
    local s = assert(stack.load{name = "t", costs = {dp_overlap = 0.5, tp_overlap = 0.2},
                                devices = {h100 = {efficiency = {gemm = 0.6, attn_fwd = 0.4}}}})
    local dev, costs, info = stack.apply(s, assert(nd.device("h100")), {dp_overlap = 0.9})
    local e = dev:totable().efficiency
    assert.are.equal(0.6, e.gemm)
    assert.are.equal(0.4, e.attn_fwd)
    assert.are.equal(0.9, costs.dp_overlap)   -- the caller's
    assert.are.equal(0.2, costs.tp_overlap)   -- the profile's
    assert.are.equal("h100", info.device_fit)
    assert.is_nil(info.note)
  end)

  it("gives a device without a fit the fallback's efficiencies and says so", function()
    local s = assert(stack.load{name = "t", fallback = "h100",
                                devices = {h100 = {efficiency = {gemm = 0.6}}}})
    local dev, _, info = stack.apply(s, assert(nd.device("h800")), nil)
    assert.are.equal(0.6, dev:totable().efficiency.gemm)
    assert.matches("no fit for h800: using h100", info.note, 1, true)
  end)

  it("slows an estimate as its profile's efficiencies fall", function()
    local args = {model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64,
                  seq_len = 4096, tp = 2}
    local function step(gemm)
      local a = {stack = {name = "t", devices = {h100 = {efficiency = {gemm = gemm}}}}}
      for k, v in pairs(args) do a[k] = v end
      return assert(nd.estimate(a)).step_time_s
    end
    assert.is_true(step(0.5) > step(0.7))
  end)

  it("bands an estimate by its regime's residuals, and widens a regime without runs", function()
    local s = assert(stack.load{name = "t", devices = {h100 = {efficiency = {},
      fit = {runs = 10, mape = 6}, bands = {["bf16/dense"] = {runs = 10, mape = 5, bias = 1}}}}})
    local _, _, info = stack.apply(s, assert(nd.device("h100")), nil)
    local b = stack.band(info, "bf16", false)
    assert.are.same({5, 10, "bf16/dense"}, {b.pct, b.runs, b.regime})
    local w = stack.band(info, "fp8", true)
    assert.is_true(w.widened)
    assert.are.equal(12, w.pct)  -- twice the widest the device has
    local r = assert(nd.estimate{model = "llama3.1-8b", device = "h100", devices = 8,
                                 global_batch = 64, seq_len = 4096, stack = s})
    assert.are.equal(5, r.step_time_band.pct)
    assert.is_true(r.step_time_band.low_s < r.step_time_s and r.step_time_s < r.step_time_band.high_s)
    -- the band around this step time, its own copy (another result's is untouched), listed
    local t = r.step_time_s
    assert.is_true(math.abs(r.step_time_band.low_s - t / 1.05) <= 1e-12 * t)
    assert.is_true(math.abs(r.step_time_band.high_s - t * 1.05) <= 1e-12 * t)
    local r2 = assert(nd.estimate{model = "llama3.1-8b", device = "h100", devices = 8,
                                  global_batch = 64, seq_len = 4096, stack = s, tp = 2})
    r.stack.name, r.step_time_band.pct = "mine", 0
    assert.are.equal("t", r2.stack.name)
    assert.are.equal(5, r2.step_time_band.pct)
    assert.is_true(math.abs(r2.step_time_band.low_s - r2.step_time_s / 1.05) <= 1e-12 * r2.step_time_s)
    local listed = {}
    for k in pairs(r2) do listed[k] = true end
    assert.is_true(listed.stack and listed.step_time_band)
    -- a planner's result (no lazy figures) carries the same fields
    local p = assert(nd.estimate{model = "llama3.1-8b", device = "h100", devices = 8,
                                 global_batch = 64, seq_len = 4096, stack = s,
                                 tp = 8, recompute = "per_layer"})
    assert.are.equal("t", p.stack.name)
    assert.are.equal(5, p.step_time_band.pct)
    assert.is_true(math.abs(p.step_time_band.high_s - p.step_time_s * 1.05) <= 1e-12 * p.step_time_s)
  end)

  it("gives a searched row's detail the profile's fields, which pairs lists", function()
    local search = require "ndplan.search"
    local ranked, info = assert(nd.search{model = "llama3.1-8b", device = "h100", devices = 8,
                                          global_batch = 64, seq_len = 4096, top = 1,
                                          stack = "megatron-core"})
    local d = search.detail(ranked[1], info)
    local listed = {}
    for k, v in pairs(d) do listed[k] = v end
    assert.are.equal("megatron-core", listed.stack and listed.stack.name)
    assert.is_true(listed.step_time_band.low_s < d.step_time_s)
  end)
end)

describe("fitting a profile", function()
  it("weighs runs by a soft-L1 loss: quadratic near zero, about linear far off", function()
    local SF = require "ndplan.fit.stack_fit"
    local d = SF.ROBUST_SCALE
    for _, r in ipairs({-1, -0.3, -0.01, 0, 0.01, 0.3, 1}) do
      local want = 2 * d * d * (math.sqrt(1 + (r / d) ^ 2) - 1)
      assert.is_true(math.abs(SF.robust(r) ^ 2 - want) <= 1e-12)
      assert.is_true((SF.robust(r) >= 0) == (r >= 0))  -- keeps the sign
    end
    assert.is_true(math.abs(SF.robust(0.01) - 0.01) < 1e-4)        -- small: the log ratio
    -- far off: a run 4x further off pulls about 2x (sqrt of linear), not 4x
    assert.is_true(SF.robust(2) / SF.robust(0.5) < 2.5)
  end)

  -- runs priced with a known profile: the fit from another start must find it again
  local truth = {name = "truth", costs = {dp_overlap = 0.6, overlap_sm_share = 0.1,
                                          tp_overlap = 0.3, step_overhead = 0.05},
                 devices = {h100 = {efficiency = {gemm = 0.62, gemm_fp8 = 0.5, attn_fwd = 0.45,
                                                  attn_bwd = 0.45 * SF.ATTN_BWD_RATIO}}}}
  local function cases()
    local out = {}
    for _, m in ipairs({"llama3.1-8b", "llama3.1-70b", "qwen3-32b"}) do
      for _, st in ipairs({{tp = 1, pp = 1}, {tp = 4, pp = 2}, {tp = 8, pp = 1}, {tp = 2, pp = 4}}) do
        for _, prec in ipairs({"bf16", "fp8"}) do
          for _, seq in ipairs({4096, 16384}) do
            out[#out + 1] = {model = m, device_name = "h100", group = "g",
                             job = {devices = 64, global_batch = 256, seq_len = seq},
                             strategy = {tp = st.tp, pp = st.pp, sp = st.tp > 1, zero = 1,
                                         precision = prec, recompute = m == "llama3.1-70b" and "full" or "none"},
                             costs = {}}
          end
        end
      end
    end
    return out
  end
  it("recovers the efficiencies and costs that produced the step times", function()
    local cs = cases()
    local dev = assert(nd.device("h100"))
    SF.price(cs, truth, function() return dev end)
    for _, c in ipairs(cs) do c.measured_s = assert(c.predicted_s) end
    local r = assert(SF.run{name = "fit", cases = cs, device = dev, max_evals = 1500})
    assert.is_true(r.fit.mape < 1, string.format("fit MAPE %.2f%%", r.fit.mape))
    local e = r.profile.devices.h100.efficiency
    assert.is_true(math.abs(e.gemm - 0.62) < 0.03, "gemm " .. e.gemm)
    assert.is_true(math.abs(e.gemm_fp8 - 0.5) < 0.03, "gemm_fp8 " .. e.gemm_fp8)
    assert.is_true(math.abs(e.attn_fwd - 0.45) < 0.05, "attn_fwd " .. e.attn_fwd)
  end)

  it("holds out what --hold-out names and prices it with the fit", function()
    local cs = cases()
    local dev = assert(nd.device("h100"))
    SF.price(cs, truth, function() return dev end)
    for _, c in ipairs(cs) do c.measured_s = c.predicted_s; c.label = c.model end
    local r = assert(SF.run{name = "fit", cases = cs, device = dev, hold_out = "qwen3",
                            max_evals = 400})
    assert.are.equal(16, r.held_rows)
    assert.are.equal(32, r.fit_rows)
    assert.is_true(r.held.mape < 3, string.format("held-out MAPE %.2f%%", r.held.mape))
    -- a comma-separated list holds out what any of its patterns matches
    r = assert(SF.run{name = "fit", cases = cs, device = dev, hold_out = "qwen3,^llama3%.1%-8b$",
                      max_evals = 50})
    assert.are.equal(32, r.held_rows)
    assert.are.equal(16, r.fit_rows)
  end)

  it("fits no cost that no run informs", function()
    local cs = {}
    for _, c in ipairs(cases()) do
      if c.strategy.tp == 1 then c.strategy.zero = 3; cs[#cs + 1] = c end  -- FSDP, no TP
    end
    local dev = assert(nd.device("h100"))
    SF.price(cs, truth, function() return dev end)
    for _, c in ipairs(cs) do c.measured_s = c.predicted_s end
    local r = assert(SF.run{name = "fit", cases = cs, device = dev, max_evals = 100})
    assert.is_nil(r.profile.costs.tp_overlap)
    assert.is_nil(r.profile.costs.dp_overlap)
    assert.is_number(r.profile.costs.zero3_overlap)
  end)

  it("writes a profile that loads back with its residuals", function()
    local p = {name = "w", costs = {dp_overlap = 0.5}, fallback = "h100",
               devices = {h100 = {efficiency = {gemm = 0.7}, fit = {runs = 3, mape = 4.5, bias = 1},
                                  bands = {["bf16/dense"] = {runs = 3, mape = 4.5, bias = 1}}}}}
    local path = os.tmpname()
    local f = assert(io.open(path, "w")); f:write(SF.render(p, {"a test"})); f:close()
    local s = assert(stack.load(path))
    os.remove(path)
    assert.are.equal(0.7, s.devices.h100.efficiency.gemm)
    assert.are.equal(4.5, s.devices.h100.bands["bf16/dense"].mape)
    assert.are.equal("h100", s.fallback)
  end)
end)

describe("the search's memory band", function()
  local args = {model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64,
                seq_len = 8192, tp = {1, 2}, pp = 1, cp = 1, recompute = {"none", "full"},
                max_mem = "60GiB", top = 50}
  local function with(band)
    local a = {memory_band = band}
    for k, v in pairs(args) do a[k] = v end
    return assert(nd.search(a))
  end
  it("ranks only what fits at the band's upper edge, and shows the device budget", function()
    local reserve = assert(nd.device("h100")):totable().reserve_bytes
    local budget = 60 * 2^30
    local ranked, info = with(0.1)
    assert.are.equal(budget, info.device_budget_bytes)
    assert.is_true(math.abs(info.budget_bytes - (reserve + (budget - reserve) / 1.1)) < 1)
    for _, r in ipairs(ranked) do assert.is_true(r.peak_memory_bytes <= info.budget_bytes) end
    -- without the band, a plan between the edge and the budget ranks
    local loose = with(0)
    local over = false
    for _, r in ipairs(loose) do over = over or r.peak_memory_bytes > info.budget_bytes end
    assert.is_true(over)
  end)
end)

describe("a searched row's memory parts", function()
  it("add up to its peak, the allocator's slack included (a profile sets alloc_fragmentation)", function()
    local ranked = assert(nd.search{model = "llama3.1-8b", device = "h100", devices = 8,
                                    global_batch = 64, seq_len = 4096, top = 3})
    for _, r in ipairs(ranked) do
      local m, sum = r.memory_parts_bytes, 0
      assert.is_true(m.fragmentation > 0)
      for k, v in pairs(m) do if k ~= "peak" then sum = sum + v end end
      assert.is_true(math.abs(sum - m.peak) <= 1e-9 * m.peak)
      assert.equal(r.peak_memory_bytes, m.peak)
    end
  end)
end)
