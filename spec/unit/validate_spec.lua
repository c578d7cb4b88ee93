-- The validation harness itself (metrics) and, where the published tables are present
-- beside the checkout (../shared/validation), the floors the estimators must beat on them.
local nd = require "ndplan"
local V = require "ndplan.fit.validate"

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

describe("validation tables", function()
  local run = dofile("spec/support/run.lua")
  local tmp = run.tmpdir()
  local f = assert(io.open(tmp .. "/vtrain_ground_truth_single.csv", "w"))
  f:write("# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,",
          "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n",
          "2,16,8,1024,16,24,1024,1,1,2,372.16\n",
          "8,32,4,1024,16,24,1024,2,2,2,219.73\n")
  f:close()

  it("keeps the rows whose group matches NAME:PATTERN, all rows for a bare NAME", function()
    assert.are.equal(2, #assert(V.cases(tmp, "vtrain_single")))
    local two = assert(V.cases(tmp, "vtrain_single:^2gpu"))
    assert.are.equal(1, #two)
    assert.are.equal("2gpu-h1024-l24", two[1].group)
  end)

  it("refuses a pattern no group matches and a malformed pattern, naming the table", function()
    local c, err = V.cases(tmp, "vtrain_single:^9gpu")
    assert.is_nil(c)
    assert.matches("table 'vtrain_single': no row's group matches '^9gpu'", err, 1, true)
    c, err = V.cases(tmp, "vtrain_single:[")
    assert.is_nil(c)
    assert.matches("bad group pattern '['", err, 1, true)
  end)

  it("prices vTrain's runs with the gradient all-reduce exposed (use_gradient_bucket false)", function()
    local c = assert(V.cases(tmp, "vtrain_single"))[1]
    assert.are.equal(0, c.costs.dp_overlap)
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

describe("step-time floors on the published runs (issue 3: MAPE <= 10% per table)", function()
  if not present then
    pending("validation data not found at " .. dir .. "; skipped")
    return
  end
  local a100 = assert(nd.device("a100-80gb"))

  for _, name in ipairs({"narayanan2021_table1", "narayanan2021_table2", "korthikanti2022",
                         "vtrain_multi"}) do
    it(name .. " uncalibrated", function()
      local s = V.summary(V.run(assert(V.cases(dir, name)), a100))
      assert.are.equal(0, s.refused)
      assert.is_true(s.mape <= 10, string.format("%s: MAPE %.1f%%", name, s.mape))
    end)
  end

  -- vTrain's single-node runs are launch-bound (eager PyTorch, models of 0.1-1B): the launch
  -- floor is the stack's, not the device's. Fitted on the 2-GPU rows only, it must carry
  -- over to the 4- and 8-GPU rows it never saw.
  it("vtrain_single after fitting kernel_overhead on its 2-GPU rows, checked on the others", function()
    local C = require "ndplan.fit.calibrate"
    local fit = assert(C.fit{device = a100, fields = {"kernel_overhead"},
                             cases = assert(V.cases(dir, "vtrain_single:^2gpu"))})
    local held = V.cases(dir, "vtrain_single:^[48]gpu")
    local before = V.summary(V.run(held, a100))
    local after = V.summary(V.run(held, fit.device))
    assert.is_true(before.mape > 30, string.format("uncalibrated %.1f%%", before.mape))
    assert.is_true(after.mape <= 10, string.format("held out %.1f%%", after.mape))  -- 9.3%
    assert.is_true(after.spearman_min >= 0.9, string.format("Spearman %.3f", after.spearman_min))
  end)
end)

-- Today's stacks (modern_runs.csv) with the bundled profiles, and Megatron's allocator logs.
-- Floors are what the profiles reach on the rows they were fitted on (the issue's 10% / 3%
-- floor per group is met on the H100 groups; the Blackwell groups are reported, not floored:
-- see README, "Validation on today's stacks").
local modern = io.open(dir .. "/modern_runs.csv", "r")
if modern then modern:close() end

describe("today's stacks with the bundled profiles (modern_runs.csv)", function()
  if not modern then
    pending("validation data not found at " .. dir .. "; skipped")
    return
  end
  local cases = V.run(assert(V.cases(dir, "modern_runs")))
  local s = V.summary(cases)

  local floors = {  -- group: MAPE, |bias| (%)
    ["megatron-core/h100/bf16"] = {5, 3}, ["megatron-core/h100/fp8"] = {8, 3},
    ["torchtitan/a100-80gb/bf16"] = {8, 3}, ["torchtitan/h100-96gb/bf16"] = {8, 3},
    ["megatron-core/gb200/fp8"] = {10, 3}, ["torchtitan/h100-96gb/fp8"] = {10, 3},
    ["megatron-core/b200/fp8"] = {10, 3},
  }
  for group, f in pairs(floors) do
    it(group .. ": MAPE <= " .. f[1] .. "%, |bias| <= " .. f[2] .. "%", function()
      local g = assert(s.by_group[group], group)
      assert.is_true(g.n >= 8, group)
      assert.is_true(g.mape <= f[1], string.format("%s: MAPE %.1f%%", group, g.mape))
      assert.is_true(math.abs(g.bias) <= f[2], string.format("%s: bias %+.1f%%", group, g.bias))
    end)
  end

  it("reads a Megatron MoE row's blank expert TP as the TP size, as Megatron does", function()
    local VM = require "ndplan.fit.validate_modern"
    assert.equal(4, VM.default_etp("megatron-core", 4, true))
    assert.equal(1, VM.default_etp("megatron-core", 4, false))  -- dense: no experts
    assert.equal(1, VM.default_etp("torchtitan", 4, true))
    local seen = 0
    for _, c in ipairs(cases) do  -- NeMo 24.x Grok-1 rows leave ETP blank
      if c.stack == "megatron-core" and c.label:find("Grok 1 314b") then
        assert.equal(c.strategy.tp, c.strategy.etp, c.label)
        seen = seen + 1
      end
    end
    assert.is_true(seen > 0)
  end)

  it("fills what a row's launch script states and its table leaves blank, never a stated field", function()
    local nemotron, deepseek = 0, 0
    for _, c in ipairs(cases) do
      if c.label:find("Nemotron4 340b") and c.device_name == "h100" then
        assert.equal(12, c.strategy.vpp, c.label)  -- 25.02.01's table has no VP column
        nemotron = nemotron + 1
      elseif c.label:find("Deepseek V3") then
        local p = c.strategy.pp
        assert.equal(1, c.model.num_nextn_predict_layers, c.label)
        assert.equal(64 // p - 1, c.strategy.decoder_first_pipeline_num_layers, c.label)
        assert.equal(64 // p - 2, c.strategy.decoder_last_pipeline_num_layers, c.label)
        assert.equal(1.0, c.costs.capacity_factor, c.label)
        assert.same(c.device_name == "h100" and {"mla_up"} or {"attn_core"},
                    c.strategy.selective_ops, c.label)
        deepseek = deepseek + 1
      elseif c.label:find("Grok") then  -- token drop at capacity 1.0 in every release
        assert.equal(1.0, c.costs.capacity_factor, c.label)
      elseif c.label:find("Mixtral") or c.label:find("LLAMA4") then
        assert.is_nil(c.costs.capacity_factor, c.label)  -- dropless: the profile's factor
      end
    end
    assert.is_true(nemotron >= 4 and deepseek >= 5, nemotron .. " " .. deepseek)
  end)

  it("prices torchtitan's selective rows with its per-op policy (norms, act, alt_mm)", function()
    local seen = 0
    for _, c in ipairs(cases) do
      if c.stack == "torchtitan" and c.strategy.recompute == "selective" then
        assert.same({"norms", "act", "alt_mm"}, c.strategy.selective_ops, c.label)
        seen = seen + 1
      end
    end
    assert.is_true(seen > 0)
  end)

  it("prices each stack's rows with its own profile, and a stack without one with none", function()
    local old = 0
    for _, c in ipairs(cases) do
      local want = c.stack  -- every stack of the tables has a bundled profile
      -- Megatron-Core's 2024 releases (NeMo 24.x, Megatron-Core 0.8) have a profile of their own
      local v = c.version or ""
      if c.stack == "megatron-core" and (v:find("container 24%.") or v:find("r0%.8")
                                         or v:find("label 24%.")) then
        want, old = "megatron-core-2024", old + 1
      end
      assert.are.equal(want, V.stack_for(c), c.label)
    end
    assert.is_true(old >= 100, old)
    -- a profile of a year covers the releases through it; later ones take the current
    -- profile, and --stack wins
    assert.are.equal("megatron-core-2024", V.stack_for({stack = "megatron-core", year = 2023}))
    assert.are.equal("megatron-core", V.stack_for({stack = "megatron-core", year = 2026}))
    assert.are.equal("megatron-core", V.stack_for({stack = "megatron-core"}))
    assert.are.equal("none", V.stack_for({stack = "megatron-core", year = 2024}, "none"))
    assert.are.equal("none", V.stack_for({stack = "deepspeed", year = 2025}))
  end)

  it("dates Megatron-Core releases by their tags", function()
    local VM = require "ndplan.fit.validate_modern"
    assert.are.equal(2024, VM.release_year("Megatron-Core r0.8.0 (figure legend)"))
    assert.are.equal(2025, VM.release_year("Megatron-Core v0.12.1"))
    assert.are.equal(2024, VM.release_year("NeMo container 24.09"))
    assert.is_nil(VM.release_year("Megatron-Core r0.99.0"))
  end)

  it("the stacks of the other trainers: a fit on half their runs holds on the other half (<= 12%)", function()
    local SF = require "ndplan.fit.stack_fit"
    for _, stack in ipairs({"llm%-foundry", "maxtext", "paxml"}) do
      local r = assert(SF.run{name = "half", cases = assert(V.cases(dir, "modern_runs:^" .. stack .. "/")),
                              hold_out_every = 2, max_evals = 600})
      assert.is_true(r.held.runs >= 5, stack)
      assert.is_true(r.held.mape <= 12, string.format("%s: held-out MAPE %.1f%%", stack, r.held.mape))
    end
  end)
end)

describe("Megatron-LM allocator peaks (megatron_memory_logs.json)", function()
  local logs = io.open(dir .. "/megatron_memory_logs.json", "r")
  if not logs then
    pending("validation data not found at " .. dir .. "; skipped")
    return
  end
  logs:close()
  local cases = V.run_memory(assert(V.memory_cases(dir, "megatron_memory")))
  it("has max allocated and max reserved of every logged run", function()
    assert.is_true(#cases >= 8)
  end)
  for _, c in ipairs(cases) do
    it(c.label .. " within 8%", function()
      assert.is_nil(c.refused)
      assert.is_true(math.abs(c.error_pct) <= 8,
        string.format("%s: measured %.2f GiB, predicted %.2f (%+.1f%%)", c.label, c.measured,
                      c.predicted, c.error_pct))
    end)
  end
end)
