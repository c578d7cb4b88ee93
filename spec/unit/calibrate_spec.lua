-- Calibration: the bounded least-squares optimiser, fits that recover known efficiencies
-- from synthetic "measurements", the user CSV of runs and the override file.
local nd = require "ndplan"
local C = require "ndplan.fit.calibrate"
-- These specs check the estimators' mechanics on the device files alone (no stack profile:
-- its fitted efficiencies and costs are checked by validate_spec and stack_spec).
require("ndplan.config.stack").DEFAULT = "none"

local function rel(got, want) return math.abs(got - want) / math.abs(want) end

local function tempfile(text, suffix)
  local base = os.tmpname()
  os.remove(base)
  local path = base .. (suffix or "")
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

describe("least_squares", function()
  -- y = a * exp(b * t) sampled exactly; a and b live on [0, 10] through z = x / 10
  local ts, ys = {0, 0.5, 1, 1.5, 2, 3}, {}
  for i, t in ipairs(ts) do ys[i] = 2.5 * math.exp(0.7 * t) end
  local function residuals(z)
    local a, b = 10 * z[1], 10 * z[2]
    if a <= 0 then return nil end
    local r = {}
    for i, t in ipairs(ts) do r[i] = math.log(a * math.exp(b * t) / ys[i]) end
    return r
  end

  it("finds the optimum of a smooth problem from a distant start", function()
    local out = C.least_squares(residuals, {0.9, 0.01})
    assert.equal("converged", out.reason)
    assert.is_true(math.abs(10 * out.z[1] - 2.5) < 1e-4)
    assert.is_true(math.abs(10 * out.z[2] - 0.7) < 1e-5)
    assert.is_true(out.cost < 1e-12)
  end)

  it("stops on the bound when the optimum lies outside the box", function()
    -- b may not exceed 0.5 here (z[2] <= 0.05 through the clamp in the residuals)
    local function capped(z)
      local zz = {z[1], math.min(z[2], 1) * 0.05}
      return residuals(zz)
    end
    local out = C.least_squares(capped, {0.5, 0.2})
    assert.equal(1, out.z[2])
    assert.is_true(out.z[1] > 0 and out.z[1] <= 1)
  end)

  it("holds a field with no effect where it started", function()
    local out = C.least_squares(function(z)
      local r = residuals(z)
      return r
    end, {0.9, 0.01, 0.37})
    assert.equal(0.37, out.z[3])
    assert.is_true(out.insensitive[3])
  end)

  it("returns a field to its start where the optimum does not depend on it (a floor)", function()
    -- z[2] only matters above 0.5, like a launch floor that binds only when it is large;
    -- the start cannot be evaluated (z[1] > 0.8), so the fit comes from a restart
    local function floored(z)
      if z[1] > 0.8 then return nil end
      return {z[1] - 0.3, math.max(z[2], 0.5) - 0.5}
    end
    local out = C.least_squares(floored, {0.9, 0.2})
    assert.is_true(out.start > 0)
    assert.is_true(math.abs(out.z[1] - 0.3) < 1e-6)
    assert.equal(0.2, out.z[2])
    assert.is_true(out.flat[2])
    assert.is_nil(out.insensitive[2])
  end)

  it("counts the evaluations and respects the budget", function()
    local calls = 0
    local out = C.least_squares(function(z) calls = calls + 1; return residuals(z) end,
                                {0.9, 0.01}, {max_evals = 7})
    assert.equal(calls, out.evals)
    assert.is_true(out.evals <= 7)
  end)
end)

-- Synthetic measurements: step times of a device with gemm = 0.6 and kernel_overhead = 300 us
-- on strategies of a small GPT (1024 wide, the size of vTrain's single-node runs; the
-- bundled models are too large for a launch floor of 300 us to bind). Some runs are
-- launch-bound, some GEMM-bound, so both values leave a mark.
local a100 = assert(nd.device("a100-80gb"))
local truth = assert(C.with_efficiency(a100, {gemm = 0.6, kernel_overhead = 300e-6}))
local model = assert(nd.model{model_type = "gpt2", n_layer = 24, n_embd = 1024, n_head = 16,
                              vocab_size = 50257, n_positions = 4096})

local function synthetic_cases(device)
  local cases = {}
  for _, s in ipairs({{tp = 1, mbs = 1, seq = 512}, {tp = 2, mbs = 1, seq = 1024},
                      {tp = 4, mbs = 2, seq = 2048}, {tp = 8, mbs = 1, seq = 4096},
                      {tp = 8, mbs = 4, seq = 512}, {tp = 2, mbs = 2, seq = 4096},
                      {tp = 4, mbs = 1, seq = 256}, {tp = 1, mbs = 4, seq = 2048},
                      {tp = 1, mbs = 4, seq = 4096}, {tp = 1, mbs = 2, seq = 2048}}) do
    local job = {devices = 8, global_batch = 32, seq_len = s.seq}
    local strategy = {tp = s.tp, mbs = s.mbs, recompute = "full"}
    local args = {model = model, device = device}
    for k, v in pairs(job) do args[k] = v end
    for k, v in pairs(strategy) do args[k] = v end
    local r = assert(nd.estimate(args))
    cases[#cases + 1] = {label = "tp" .. s.tp, group = "all", model_obj = model, job = job,
                         strategy = strategy, costs = {}, measured_s = r.step_time_s}
  end
  return cases
end

describe("fit", function()
  it("recovers gemm and kernel_overhead from step times they produced", function()
    local r = assert(C.fit{device = a100, cases = synthetic_cases(truth),
                           fields = {"gemm", "kernel_overhead"}})
    assert.is_true(rel(r.values.gemm, 0.6) < 0.02)
    assert.is_true(rel(r.values.kernel_overhead, 300e-6) < 0.03)
    assert.is_true(r.before.mape > 10)
    assert.is_true(r.after.mape < 0.5)
    -- the fitted device prices the runs as the truth does; untouched fields are kept
    local eff = r.device:totable().efficiency
    assert.equal(0.85, eff.hbm)
    assert.equal(0.65, eff.scale_up)
  end)

  it("recovers them when every field is fitted, leaving the right ones where they were", function()
    local r = assert(C.fit{device = a100, cases = synthetic_cases(truth)})
    assert.is_true(rel(r.values.gemm, 0.6) < 0.03)
    assert.is_true(rel(r.values.kernel_overhead, 300e-6) < 0.03)
    assert.is_true(rel(r.values.hbm, 0.85) < 0.03)
    assert.is_true(r.after.mape < 1)
  end)

  it("reaches the same values from starts on either side of the optimum", function()
    local cases = synthetic_cases(truth)
    for _, start in ipairs({{gemm = 0.95, kernel_overhead = 1e-6},
                            {gemm = 0.2, kernel_overhead = 2e-3}}) do
      local r = assert(C.fit{device = assert(C.with_efficiency(a100, start)), cases = cases,
                             fields = {"gemm", "kernel_overhead"}})
      assert.is_true(rel(r.values.gemm, 0.6) < 0.02)
      assert.is_true(rel(r.values.kernel_overhead, 300e-6) < 0.03)
    end
  end)

  it("keeps the fitted values inside the bounds when the optimum lies outside", function()
    local r = assert(C.fit{device = a100, cases = synthetic_cases(truth),
                           fields = {"gemm", "kernel_overhead"},
                           bounds = {gemm = {0.7, 0.95}, kernel_overhead = {0, 100e-6}}})
    assert.equal(0.7, r.values.gemm)
    assert.equal(100e-6, r.values.kernel_overhead)
    for _, f in ipairs(r.fields) do assert.is_true(f.at_bound) end
  end)

  it("reports a field the runs cannot see and leaves it unchanged", function()
    -- eight devices fit in one scale-up domain: the scale-out link is never used
    local r = assert(C.fit{device = a100, cases = synthetic_cases(truth),
                           fields = {"gemm", "scale_out"}})
    local by = {}
    for _, f in ipairs(r.fields) do by[f.name] = f end
    assert.is_true(by.scale_out.no_effect)
    assert.equal(0.9, r.values.scale_out)
  end)

  it("subsamples every k-th run with max_rows", function()
    local r = assert(C.fit{device = a100, cases = synthetic_cases(truth), fields = {"gemm"},
                           max_rows = 3})
    assert.equal(10, r.rows)
    assert.equal(4, r.every)
    assert.equal(3, r.used_rows)
  end)

  it("refuses unknown fields, bad bounds and unknown costs", function()
    local cases = synthetic_cases(truth)
    local _, e1 = C.fit{device = a100, cases = cases, fields = {"gemmm"}}
    assert.matches("unknown efficiency field 'gemmm'", e1)
    local _, e2 = C.fit{device = a100, cases = cases, fields = {"gemm"}, bounds = {gemm = {0, 1}}}
    assert.matches("bounds for gemm", e2)
    local _, e3 = C.fit{device = a100, cases = cases, costs = {dp_overlapp = 1}}
    assert.matches("unknown cost 'dp_overlapp'", e3)
  end)
end)

describe("the override file", function()
  it("writes values with units that load back within the 4-digit rounding", function()
    local r = assert(C.fit{device = a100, cases = synthetic_cases(truth)})
    local path = tempfile("", ".yaml")
    local text = C.render(r, {base = "a100-80gb", name = "A100-test", sources = "synthetic"})
    assert.matches("\nbase: a100%-80gb\n", text)
    assert.matches("\nname: A100%-test\n", text)
    assert.matches("MAPE [%d.]+%% %-> [%d.]+%%", text)
    assert.truthy(C.write(path, text, "a100-80gb", r.values))
    local dev = assert(nd.device(path))
    os.remove(path)
    assert.equal("A100-test", dev.name)
    local eff = dev:totable().efficiency
    for _, f in ipairs(r.fields) do
      if f.after == 0 then assert.equal(0, eff[f.name])
      else assert.is_true(rel(eff[f.name], f.after) < 5.01e-4, f.name) end
    end
    -- everything that was not an efficiency comes from the base
    assert.equal(a100:totable().hbm_bandwidth, dev:totable().hbm_bandwidth)
  end)

  it("formats each kind in a unit the loader reads", function()
    assert.equal("412.3us", C.format_value("kernel_overhead", 412.34e-6))
    assert.equal("1ms", C.format_value("kernel_overhead", 0.99999e-3))
    assert.equal("0ns", C.format_value("kernel_overhead", 0))
    assert.equal("310MFLOP", C.format_value("gemm_half_size", 3.1e8))
    assert.equal("17.41GFLOP", C.format_value("gemm_half_size", 17.4098e9))
    assert.equal("0.7123", C.format_value("gemm", 0.71234))
    assert.equal(412.3e-6, nd.grammar.time("412.3us"))
    assert.equal(17.41e9, nd.grammar.flop("17.41GFLOP"))
  end)
end)

describe("read_runs", function()
  local header = "model,devices,global_batch,seq_len,tp,mbs,step_time_s\n"

  it("reads runs with bundled models and configs relative to the CSV", function()
    local cfg = tempfile('{"model_type": "gpt2", "n_layer": 4, "n_embd": 512, "n_head": 8,'
                         .. ' "vocab_size": 1000, "n_positions": 1024}', ".json")
    local name = cfg:match("([^/]+)$")
    local path = tempfile(header .. "# a comment\nllama3.1-8b,8,16,2048,2,1,1.5\n\n"
                          .. name .. ",2,8,1024,1,4,0.25\n", ".csv")
    local cases = assert(C.read_runs(path))
    os.remove(path); os.remove(cfg)
    assert.equal(2, #cases)
    assert.equal(1.5, cases[1].measured_s)
    assert.equal(2, cases[1].strategy.tp)
    assert.equal(16, cases[1].job.global_batch)
    assert.equal(4, cases[2].model_obj.num_layers)
    assert.equal("line 5", cases[2].label)
  end)

  local function fails(text)
    local path = tempfile(text, ".csv")
    local ok, err = C.read_runs(path)
    os.remove(path)
    assert.is_nil(ok)
    return err, path
  end

  it("names the file, line, field and column of a bad value", function()
    local err, path = fails(header .. "llama3.1-8b,8,16,2048,2,1,1.5\nllama3.1-8b,8,16,2048,two,1,1.5\n")
    assert.equal(path .. ":3: field 'tp' (column 5): expected a positive whole number, got 'two'", err)
  end)

  it("rejects unknown columns, missing required columns and short rows", function()
    assert.matches(":1: column 3: unknown column 'batch'",
                   fails("model,devices,batch,seq_len,step_time_s\n"))
    assert.matches(":1: required column 'step_time_s' is missing",
                   fails("model,devices,global_batch,seq_len\n"))
    assert.matches(":2: expected 7 fields as in the header, got 6",
                   fails(header .. "llama3.1-8b,8,16,2048,2,1\n"))
    assert.matches(":2: field 'step_time_s' %(column 7%): expected a positive number of seconds",
                   fails(header .. "llama3.1-8b,8,16,2048,2,1,-1\n"))
    assert.matches(":2: field 'model' %(column 1%): ",
                   fails(header .. "no-such-model,8,16,2048,2,1,1\n"))
  end)

  it("reports a strategy the estimator refuses with its line", function()
    assert.matches(":2: strategy refused: .*devices",
                   fails(header .. "llama3.1-8b,8,16,2048,3,1,1.5\n"))
  end)
end)
