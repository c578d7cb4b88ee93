-- ndplan.block_plan: the fastest recompute Megatron-LM can state (none, selective, full on
-- every layer, full on the first N layers of each stage or chunk) that fits a budget,
-- checked against pricing every N, and the Megatron exporter's use of it.
local nd = require "ndplan"
local export = require "ndplan.export"
local block_plan = require "ndplan.block_plan"
-- These specs check the estimators' mechanics on the device files alone (no stack profile:
-- its fitted efficiencies and costs are checked by validate_spec and stack_spec).
require("ndplan.config.stack").DEFAULT = "none"

local function merge(...)
  local out = {}
  for _, t in ipairs({...}) do for k, v in pairs(t) do out[k] = v end end
  return out
end

-- Every form priced on the strategy's own layout: {method, n, r}.
local function brute_force(args)
  local m = assert(nd.model(args.model))
  local ctx = {layers = m.num_layers, mtp = m.mtp_layers}
  local probe = assert(nd.estimate(merge(args, {recompute = "full"})))
  local shape = {pp = probe.strategy.pp, vpp = probe.strategy.vpp,
                 stage_layers = probe.strategy.stage_layers}
  local out = {}
  for _, mode in ipairs({"none", "selective", "full"}) do
    out[#out + 1] = {method = mode == "full" and "uniform" or mode,
                     r = assert(nd.estimate(merge(args, {recompute = mode})))}
  end
  local most = 0
  for _, g in ipairs(export.groups(ctx, shape)) do most = math.max(most, g.count) end
  for n = 1, most - 1 do
    local counts = {}
    for g = 1, #export.groups(ctx, shape) do counts[g] = n end
    local per = export.from_prefixes(ctx, shape, counts)
    out[#out + 1] = {method = "block", n = n,
                     r = assert(nd.estimate(merge(args, {layer_recompute = per})))}
  end
  return out
end

local function fastest(all, budget)
  local best
  for _, c in ipairs(all) do
    if c.r.peak_memory_bytes <= budget and (not best or c.r.step_time_s < best.r.step_time_s
        or c.r.step_time_s == best.r.step_time_s and c.r.peak_memory_bytes < best.r.peak_memory_bytes) then
      best = c
    end
  end
  return best
end

describe("block_plan.megatron on a small model", function()
  -- 16 layers: 8 per stage on PP 2, 4 on PP 4, 4 per chunk on PP 2 x VPP 2
  local base = {model = {model_type = "gpt2", n_layer = 16, n_embd = 2048, n_head = 16,
                         vocab_size = 51200, n_positions = 4096},
                device = "a100-80gb", global_batch = 16, seq_len = 4096, mbs = 2,
                flash_attention = false}  -- selective saves memory
  local shapes = {
    {name = "PP 2", devices = 2, pp = 2},
    {name = "PP 4", devices = 4, pp = 4},
    {name = "PP 2, VPP 2", devices = 2, pp = 2, vpp = 2, schedule = "interleaved"},
    {name = "PP 4, VPP 2", devices = 4, pp = 4, vpp = 2, schedule = "interleaved"},
    {name = "PP 4, uneven", devices = 4, pp = 4, stage_layers = {3, 5, 4, 4}},
  }

  for _, shape in ipairs(shapes) do
    it("picks the fastest fitting form, as pricing every N does (" .. shape.name .. ")", function()
      local args = merge(base, shape)
      args.name = nil
      local all = brute_force(args)
      local peaks = {}
      for _, c in ipairs(all) do peaks[#peaks + 1] = c.r.peak_memory_bytes end
      table.sort(peaks)
      local checked = 0
      for i = 2, #peaks do
        if peaks[i] - peaks[i - 1] > 1e6 then
          local budget = (peaks[i] + peaks[i - 1]) / 2
          local want = assert(fastest(all, budget))
          local r, desc = block_plan.megatron(args, budget)
          assert.is_table(r, desc)
          assert.is_true(r.peak_memory_bytes <= budget)
          assert.equal(want.method, desc.method, shape.name)
          if want.method == "block" then assert.equal(want.n, desc.num_layers) end
          assert.is_true(math.abs(r.step_time_s - want.r.step_time_s) <= 1e-9 * r.step_time_s)
          -- the description is what gets priced
          local again = assert(nd.estimate(merge(args, {layer_recompute = desc.layer_recompute})))
          assert.equal(r.step_time_s, again.step_time_s)
          -- and bisection spared pricing every N
          assert.is_true(desc.priced <= #all)
          checked = checked + 1
        end
      end
      assert.is_true(checked >= 2, shape.name)
    end)

    it("the C core's recompute = \"megatron\" picks the same form (" .. shape.name .. ")", function()
      local args = merge(base, shape)
      args.name = nil
      local all = brute_force(args)
      local checked = 0
      for _, c in ipairs(all) do  -- a budget at every form's own peak
        local budget = c.r.peak_memory_bytes
        local want = assert(fastest(all, budget))
        local r = assert(nd.estimate(merge(args, {recompute = "megatron", max_mem = budget})))
        assert.is_true(r.peak_memory_bytes <= budget)
        assert.equal(want.method, r.megatron.method, shape.name)
        if want.method == "block" then assert.equal(want.n, r.megatron.num_layers) end
        assert.is_true(math.abs(r.step_time_s - want.r.step_time_s) <= 1e-9 * r.step_time_s)
        checked = checked + 1
      end
      assert.is_true(checked >= 4, shape.name)
      -- below the least peak nothing fits, and the refusal says what full needs
      local least = math.huge
      for _, c in ipairs(all) do least = math.min(least, c.r.peak_memory_bytes) end
      local r, why = nd.estimate(merge(args, {recompute = "megatron", max_mem = least * 0.99}))
      assert.is_nil(r)
      assert.matches("^over memory: no recompute Megatron can state fits", why)
    end)
  end

  it("refuses what Megatron cannot run: a schedule without a flag, balancing chunks", function()
    local args = merge(base, {devices = 4, pp = 4, max_mem = "1TB", recompute = "megatron"})
    local r, why = nd.estimate(merge(args, {schedule = "zb"}))
    assert.is_nil(r)
    assert.matches("Megatron has no flag for schedule zb", why)
    r, why = nd.estimate(merge(args, {layout = "balanced", pp = 2, vpp = 2, devices = 2}))
    assert.is_nil(r)
    assert.matches("balancing needs vpp = 1", why)
  end)

  it("recomputes nothing on a roomy budget", function()
    local args = merge(base, {devices = 4, pp = 4})
    local r, desc = block_plan.megatron(args, "1TB")
    assert.equal("none", desc.method)
    assert.same({}, desc.flags)
    local none = assert(nd.estimate(merge(args, {recompute = "none"})))
    assert.equal(none.step_time_s, r.step_time_s)
  end)

  it("returns nil and a message below the all-full peak", function()
    local args = merge(base, {devices = 4, pp = 4})
    local full = assert(nd.estimate(merge(args, {recompute = "full"})))
    local r, why = block_plan.megatron(args, full.peak_memory_bytes * 0.99)
    assert.is_nil(r)
    assert.matches("^no recompute Megatron can state fits the [%d.]+ GiB budget: full on every "
                   .. "layer peaks at [%d.]+ GiB", why)
  end)

  it("writes Megatron's flags for each form", function()
    assert.same({}, block_plan.flags{method = "none"})
    assert.same({"--recompute-granularity", "selective"}, block_plan.flags{method = "selective"})
    assert.same({"--recompute-granularity", "full", "--recompute-method", "uniform",
                 "--recompute-num-layers", 1}, block_plan.flags{method = "uniform", num_layers = 1})
    assert.same({"--recompute-granularity", "full", "--recompute-method", "block",
                 "--recompute-num-layers", 3}, block_plan.flags{method = "block", num_layers = 3})
    assert.equal("full on the first 2 layers of each model chunk",
                 block_plan.describe({method = "block", num_layers = 2}, 2))
  end)
end)

-- The balance block_plan.lua ran in Lua before it moved to the core (engine/core/layout.c,
-- nd_layout_balance_megatron), kept here as the oracle: every form that fits the even
-- layout, balanced on its own (the slowest stage gives a layer to the better neighbour while
-- the step gets faster and every stage fits), the fastest balanced one wins.
local function former_balanced(args, budget)
  local m = assert(nd.model(args.model))
  local ctx = {layers = m.num_layers, mtp = m.mtp_layers}
  local function modes_of(shape, method, n)
    if method == "block" then
      local counts = {}
      for g = 1, #export.groups(ctx, shape) do counts[g] = n end
      return export.from_prefixes(ctx, shape, counts)
    end
    local per, mode = {}, method == "uniform" and "full" or method
    for i = 1, ctx.layers + ctx.mtp do per[i] = mode end
    return per
  end
  local function run(method, n, layout)
    local a = merge(args, {max_mem = budget, stage_layers = layout,
                           layer_recompute = modes_of({pp = #layout, vpp = 1,
                                                       stage_layers = layout}, method, n)})
    return nd.estimate(a)
  end
  local function fits(r) return r ~= nil and r.peak_memory_bytes <= budget end
  local start = assert(nd.estimate(merge(args, {recompute = "full"}))).strategy.stage_layers
  local forms = {{"none"}, {"selective"}, {"uniform", 1}}
  local most = 0
  for _, g in ipairs(export.groups(ctx, {pp = #start, vpp = 1, stage_layers = start})) do
    most = math.max(most, g.count)
  end
  for n = 1, most - 1 do forms[#forms + 1] = {"block", n} end
  local best
  for _, f in ipairs(forms) do
    local layout, r = start, run(f[1], f[2], start)
    if fits(r) then
      for _ = 1, 256 do
        local slow, t = 1, -1
        for s, st in ipairs(r.stages) do
          local x = st.forward_s + st.backward_s + st.recompute_s + st.comm_s
          if x > t then slow, t = s, x end
        end
        if layout[slow] <= 1 then break end
        local round_best, moved = r.step_time_s, nil
        for _, dir in ipairs({-1, 1}) do
          local to = slow + dir
          if to >= 1 and to <= #layout then
            local trial = {table.unpack(layout)}
            trial[slow], trial[to] = trial[slow] - 1, trial[to] + 1
            local rr = run(f[1], f[2], trial)
            if fits(rr) and rr.step_time_s < round_best * (1 - 1e-12) then
              round_best, moved = rr.step_time_s, {rr, trial}
            end
          end
        end
        if not moved then break end
        r, layout = moved[1], moved[2]
      end
      if not best or r.step_time_s < best.r.step_time_s * (1 - 1e-12)
         or (r.step_time_s <= best.r.step_time_s * (1 + 1e-12)
             and r.peak_memory_bytes < best.r.peak_memory_bytes) then
        best = {method = f[1], n = f[2], r = r, layout = layout}
      end
    end
  end
  return best
end

describe("block_plan.megatron with a balanced layout", function()
  local args = {model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64,
                seq_len = 8192, tp = 2, pp = 4, mbs = 2}

  it("is the balance block_plan.lua ran before the core did", function()
    for _, gib in ipairs({30, 36, 40}) do
      local budget = gib * 2 ^ 30
      local want = assert(former_balanced(args, budget))
      local r, desc = assert(block_plan.megatron(merge(args, {layout = "balanced"}), budget))
      assert.equal(want.method, desc.method, gib .. " GiB")
      if want.method == "block" then assert.equal(want.n, desc.num_layers) end
      assert.same(want.layout, desc.stage_layers)
      assert.equal(want.r.step_time_s, r.step_time_s)
      assert.equal(want.r.peak_memory_bytes, r.peak_memory_bytes)
      -- nd.estimate{recompute = "megatron", layout = "balanced"} is the same core call
      local e = assert(nd.estimate(merge(args, {recompute = "megatron", layout = "balanced",
                                                max_mem = budget})))
      assert.equal(r.step_time_s, e.step_time_s)
      assert.same(desc.stage_layers, e.strategy.stage_layers)
    end
  end)

  it("gives each form its own layout: never slower than on the even one, and it fits", function()
    for _, gib in ipairs({30, 36, 40}) do
      local budget = gib * 2 ^ 30
      local even = assert(block_plan.megatron(args, budget))
      local r, desc = block_plan.megatron(merge(args, {layout = "balanced"}), budget)
      assert.is_table(r, desc)
      assert.is_true(r.peak_memory_bytes <= budget)
      assert.is_true(r.step_time_s <= even.step_time_s * (1 + 1e-12), gib .. " GiB")
      local sum = 0
      for _, n in ipairs(desc.stage_layers) do sum = sum + n end
      assert.equal(32, sum)
      assert.same(desc.stage_layers, r.strategy.stage_layers)
    end
  end)
end)

describe("the Megatron exporter under a budget", function()
  -- DeepSeek-V3 as the README and recompute_plan_spec plan it: PP 16, EP 64, 2048 H800, 58 GB
  -- (modes without per-layer switch sets: the plan then recomputes fully or not at all);
  -- the budget was chosen for FP8 without Transformer Engine's cached weight copies
  local base = {model = "deepseek-v3", device = "h800", devices = 2048, global_batch = 15360,
                seq_len = 4096, pp = 16, ep = 64, zero = 1, precision = "fp8",
                recompute = "per_layer", max_mem = "58GB", costs = {quant_cache = 0},
                recompute_modes = {"none", "selective", "full"}}
  local function plan_of(args, with_budget)
    local r = assert(nd.estimate(args))
    return {model = args.model, strategy = r.strategy, job = r.job, result = r,
            layer_recompute = r.strategy.layer_recompute,
            budget_bytes = with_budget and r.budget_bytes or nil, layout = args.layout}, r
  end
  local function price(args)
    args.device, args.costs = "h800", {quant_cache = 0}
    return nd.estimate(args)
  end

  it("states a block plan that fits 58 GB and beats rounding the per-layer plan up", function()
    local args = merge(base, {layout = "balanced"})
    local plan, free = plan_of(args, false)
    -- the old way: no budget, the per-layer plan rounded up
    local _, _, up_args = export.export("megatron", plan)
    local up = assert(price(up_args))
    -- the block plan, directly and through the exporter
    local block_args = export.estimate_args(assert(export.context(plan)), assert(export.context(plan)).strategy)
    block_args.device, block_args.layout = "h800", "balanced"
    block_args.costs = {quant_cache = 0}
    local r, desc = assert(block_plan.megatron(block_args, 58e9))
    assert.is_true(r.peak_memory_bytes <= 58e9)
    assert.is_true(r.step_time_s < up.step_time_s)
    assert.is_true(r.step_time_s >= free.step_time_s * (1 - 1e-9))
    assert.equal("block", desc.method)

    plan.budget_bytes = free.budget_bytes
    local text, notes, rounded, info = export.export("megatron", plan, {price = price})
    assert.equal("block plan", info.chose)
    local again = assert(price(rounded))
    assert.is_true(again.peak_memory_bytes <= 58e9)
    assert.is_true(math.abs(again.step_time_s - r.step_time_s) <= 1e-9 * r.step_time_s)
    local note
    for _, n in ipairs(notes) do if n.field == "recompute" then note = n end end
    assert.matches("chose full on the first %d+ layers? of each stage", note.why)
    assert.matches("step time [%d.]+ s, instead of rounding up to .-, [%d.]+ s", note.why)
    assert.matches("%-%-recompute%-method block\n%s*%-%-recompute%-num%-layers " .. desc.num_layers, text)
    -- the file parses back to the plan that was priced
    local st = assert(export.get("megatron").parse(text))
    assert.same(rounded.stage_layers, st.stage_layers)
    assert.same(desc.layer_recompute, st.layer_recompute)
  end)

  it("keeps the round-up when the budget's best form is no faster, and says both times", function()
    -- a hand plan: block 3 but for layer 2, so it rounds up to block 3, and block 2 is over
    local hand = merge(base, {recompute = "none"})
    hand.max_mem, hand.recompute_modes = nil, nil
    local shape = {pp = 16, vpp = 1, stage_layers = {3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 3, 4}}
    local counts = {}
    for g = 1, 16 do counts[g] = 3 end
    local per = export.from_prefixes({layers = 61, mtp = 1}, shape, counts)
    per[3] = "none"
    hand.recompute, hand.layer_recompute = nil, per
    local plan = plan_of(hand, false)
    plan.budget_bytes = 58e9
    local _, notes, rounded, info = export.export("megatron", plan, {price = price})
    assert.equal("rounded up", info.chose)
    local note
    for _, n in ipairs(notes) do if n.field == "recompute" then note = n end end
    assert.matches("rounded up to full on the first %d+ layers of each stage, step time [%d.]+ s; "
                   .. "the fastest form under the [%d.]+ GiB budget is no faster %(.-, [%d.]+ s%)",
                   note.why)
    local up = assert(price(rounded))
    assert.is_true(up.step_time_s <= info.block.step_time_s * (1 + 1e-9))
  end)

  it("rounds up as before when the plan says no budget", function()
    local plan = plan_of(base, false)
    local _, notes, _, info = export.export("megatron", plan)
    assert.equal("rounded up", info.chose)
    for _, n in ipairs(notes) do
      if n.field == "recompute" then assert.matches("%(§2%.2%); rounded up$", n.why) end
    end
  end)
end)
