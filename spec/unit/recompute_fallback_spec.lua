-- The per-layer recompute planner's two fallback paths (nd_recompute_plan_run in
-- engine/core/recompute.c), which recompute_plan_spec never reaches:
--   * merged Pareto fronts (choose_counts), taken when the count combinations of a stage's
--     smaller layer kinds pass COMBOS_MAX, so enumerate_counts gives up. Exact.
--   * the bucket DP over layers (knapsack), taken when a merged front would pass FRONT_MAX
--     points. Each layer's bytes are rounded up to buckets of the room left.
-- Each path runs on one stage (PP 1) of a small DeepSeek-V3-style model with several layer
-- kinds, at budgets from the all-full peak to the all-none peak. Checked: the plan fits; it
-- is no slower than whole-model full recompute and no faster than none; it never gets faster
-- when the budget shrinks; and it matches a brute force over the per-kind counts, written
-- here: exactly for the merged fronts, within the DP's rounding for the buckets.
--
-- The brute force prices a stage from ndplan.c.estimate.layer and three whole-model
-- estimates, not from the planner: the stage's peak is
--   fixed + w * (activations its layers keep) + gamma * (working set)
-- where the working set is the most one of its recomputed layers rebuilds for its backward
-- (activations.none - activations[mode], over the modes in use). With PP 1, w is the one
-- micro-batch in flight; gamma is 1 where the estimator counts the working set in its
-- buffers and 0 where it does not. fixed, w and gamma are solved from the none, selective
-- and full estimates, and "prices a stage the way the brute force does" checks the result
-- against the estimator on mixed plans of each model. Where the working set counts, the
-- fallbacks try each distinct working set as a cap (recompute.c, fallback), so the merged
-- fronts must match the optimum that charges each plan only what its layers rebuild; the
-- brute force with every choice charged the heaviest reserve bounds them from the other
-- side. Two bugs this spec found are fixed and pinned below: the fallbacks reserved the
-- heaviest working set whatever the plan rebuilt, and the bucket DP refused budgets just
-- above the all-full peak on stages of more than 512 layers.
local nd = require "ndplan"
local core = require "ndplan.c.estimate"
-- These specs check the estimators' mechanics on the device files alone (no stack profile:
-- its fitted efficiencies and costs are checked by validate_spec and stack_spec).
require("ndplan.config.stack").DEFAULT = "none"

local MODES = {"none", "selective", "full"}
-- engine/core/recompute.c
local COMBOS_MAX, FRONT_MAX = 4096, 65536
local BUCKETS_PER_LAYER, MIN_BUCKETS, MAX_BUCKETS = 8, 256, 4096
local REL = 1e-9  -- floating-point slack on sums of seconds and bytes

local DEVICE = assert(nd.device("h100"))
local JOB = {devices = 8, global_batch = 64, seq_len = 4096}
-- PP 1: every layer on one stage; without flash attention selective recompute saves memory
local STRATEGY = {dp = 8, flash_attention = false}
-- budgets, as shares of the way from the all-full peak (0) to the all-none peak (1)
local SHARES = {0, 0.02, 0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 0.97, 1}

local function copy(t, extra)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  for k, v in pairs(extra or {}) do out[k] = v end
  return out
end

-- `dense` dense layers, then MoE layers up to `layers`, then `mtp` MTP layers: two or three
-- layer kinds with different activation bytes and recompute seconds.
local function deepseek(layers, dense, mtp)
  return assert(nd.model{model_type = "deepseek_v3", hidden_size = 1024,
    num_hidden_layers = layers, first_k_dense_replace = dense, num_nextn_predict_layers = mtp,
    num_attention_heads = 8, vocab_size = 32000, intermediate_size = 4096,
    moe_intermediate_size = 512, n_routed_experts = 8, num_experts_per_tok = 2,
    n_shared_experts = 1, kv_lora_rank = 256, q_lora_rank = 512, qk_nope_head_dim = 64,
    qk_rope_head_dim = 32, v_head_dim = 64, max_position_embeddings = 4096})
end

-- {======================================================================
-- One stage's costs, as the brute force sees them
-- =======================================================================

-- setup(model, allowed modes) -> the case: its kinds (stage order) with n, act[mode],
-- rec[mode] and rebuilt[mode]; kind_of[layer]; the whole-model estimates; fixed, w, gamma;
-- the planner's reserve; lo and hi, the all-full and all-none peaks.
local function setup(m, allowed)
  local c = {model = m, modes = allowed, allowed = {}, kinds = {}, kind_of = {}, whole = {}}
  for _, md in ipairs(allowed) do c.allowed[md] = true end
  c.layers = m.num_layers + m.mtp_layers
  local by_costs = {}
  for i = 0, c.layers - 1 do  -- layers with the same costs are one kind
    local le = assert(core.layer(m, DEVICE, JOB, STRATEGY, i))
    local key = string.format("%.17g %.17g %.17g %.17g %.17g", le.activations.none,
      le.activations.selective, le.activations.full, le.recompute_s.selective,
      le.recompute_s.full)
    local k = by_costs[key]
    if not k then
      k = {n = 0, act = le.activations, rec = le.recompute_s, rebuilt = {}}
      for _, md in ipairs(MODES) do k.rebuilt[md] = k.act.none - k.act[md] end
      by_costs[key] = k
      c.kinds[#c.kinds + 1] = k
    end
    k.n = k.n + 1
    c.kind_of[i + 1] = k
  end
  local kept, rebuilt, peak = {}, {}, {}
  for _, md in ipairs(MODES) do
    c.whole[md] = assert(core.run(m, DEVICE, JOB, copy(STRATEGY, {recompute = md})))
    assert.equal(1, #c.whole[md].stages)
    peak[md] = c.whole[md].peak_memory_bytes
    kept[md], rebuilt[md] = 0, 0
    for _, k in ipairs(c.kinds) do
      kept[md] = kept[md] + k.n * k.act[md]
      rebuilt[md] = math.max(rebuilt[md], k.rebuilt[md])
    end
  end
  -- peak[md] - peak.none = w * (kept[md] - kept.none) + gamma * rebuilt[md], md = full, sel.
  local a11, a12, b1 = kept.full - kept.none, rebuilt.full, peak.full - peak.none
  local a21, a22, b2 = kept.selective - kept.none, rebuilt.selective, peak.selective - peak.none
  local det = a11 * a22 - a12 * a21
  c.w = (b1 * a22 - a12 * b2) / det
  c.gamma = (a11 * b2 - a21 * b1) / det
  c.fixed = peak.none - c.w * kept.none
  c.reserve = c.allowed.full and rebuilt.full or c.allowed.selective and rebuilt.selective or 0
  c.lo, c.hi = peak.full, peak.none
  return c
end

-- The modelled peak of counts[i] = {none =, selective =, full =} layers of kind i.
local function peak_of(c, counts)
  local kept, work = 0, 0
  for i, k in ipairs(c.kinds) do
    for _, md in ipairs(MODES) do
      kept = kept + counts[i][md] * k.act[md]
      if counts[i][md] > 0 then work = math.max(work, k.rebuilt[md]) end
    end
  end
  return c.fixed + c.w * kept + c.gamma * work
end

-- A per-layer mode list with those counts.
local function layer_modes(c, counts)
  local left, out = {}, {}
  for i, k in ipairs(c.kinds) do left[k] = copy(counts[i]) end
  for j, k in ipairs(c.kind_of) do
    local l = left[k]
    local md = l.full > 0 and "full" or l.selective > 0 and "selective" or "none"
    l[md] = l[md] - 1
    out[j] = md
  end
  return out
end

-- The recompute seconds per micro-batch of a per-layer mode list: what the planner
-- minimises on a stage.
local function seconds_of(c, modes)
  local s = 0
  for j, md in ipairs(modes) do s = s + c.kind_of[j].rec[md] end
  return s
end

-- }======================================================================

-- {======================================================================
-- The brute force
-- =======================================================================

-- The counts worth trying for one kind, by the modes they use (which fix the kind's share of
-- the working set): of all (selective, full) counts, those that no other count using the
-- same modes beats on both kept bytes and recompute seconds. Each class is sorted by kept
-- bytes, its seconds falling. Memoised per kind.
local function kind_classes(c, k)
  c.classes = c.classes or {}
  if c.classes[k] then return c.classes[k] end
  local allowed, by_class = c.allowed, {}
  for full = 0, allowed.full and k.n or 0 do
    for sel = 0, allowed.selective and k.n - full or 0 do
      local none = k.n - sel - full
      if none == 0 or allowed.none then
        local class = (sel > 0 and 1 or 0) + (full > 0 and 2 or 0)
        by_class[class] = by_class[class] or {}
        table.insert(by_class[class], {none = none, selective = sel, full = full,
          kept = none * k.act.none + sel * k.act.selective + full * k.act.full,
          time = sel * k.rec.selective + full * k.rec.full})
      end
    end
  end
  local out = {}
  for class = 0, 3 do
    local list = by_class[class]
    if list then
      table.sort(list, function(x, y)
        if x.kept ~= y.kept then return x.kept < y.kept end
        return x.time < y.time
      end)
      local front, fastest = {}, math.huge
      front.work = math.max(class & 1 ~= 0 and k.rebuilt.selective or 0,
                            class & 2 ~= 0 and k.rebuilt.full or 0)
      for _, x in ipairs(list) do
        if x.time < fastest then fastest = x.time; front[#front + 1] = x end
      end
      out[#out + 1] = front
    end
  end
  c.classes[k] = out
  return out
end

-- optimum(c, budget [, reserve]) -> the least recompute seconds of any counts that fit
-- `budget`, and the counts (math.huge, nil when none fit). With `reserve`, every choice is
-- charged that working set instead of its own. Every count worth trying of the smaller
-- kinds is combined with, for each class of the largest kind, the fastest of its counts
-- that fits in what is left: the last one that fits in kept-bytes order.
local function optimum(c, budget, reserve)
  local limit = budget * (1 + 1e-12)
  local big = 1
  for i, k in ipairs(c.kinds) do if k.n > c.kinds[big].n then big = i end end
  local others = {}
  for i, k in ipairs(c.kinds) do
    if i ~= big then others[#others + 1] = {i = i, classes = kind_classes(c, k)} end
  end
  local big_classes = kind_classes(c, c.kinds[big])
  local best, best_counts, cur = math.huge, nil, {}
  local function last(kept, time, work)
    for _, front in ipairs(big_classes) do
      local charged = c.gamma * (reserve or math.max(work, front.work))
      local function fits(x) return c.fixed + c.w * (kept + x.kept) + charged <= limit end
      if fits(front[1]) then
        local lo, hi = 1, #front + 1  -- fits(front[lo]); front[hi] does not (or is past)
        while hi - lo > 1 do
          local mid = (lo + hi) // 2
          if fits(front[mid]) then lo = mid else hi = mid end
        end
        local x = front[lo]
        if time + x.time < best then
          best = time + x.time
          best_counts = {}
          for _, o in ipairs(others) do best_counts[o.i] = cur[o.i] end
          best_counts[big] = x
        end
      end
    end
  end
  local function walk(j, kept, time, work)
    if time >= best then return end
    if j > #others then return last(kept, time, work) end
    local o = others[j]
    for _, front in ipairs(o.classes) do
      for _, x in ipairs(front) do
        cur[o.i] = x
        walk(j + 1, kept + x.kept, time + x.time, math.max(work, front.work))
      end
    end
  end
  walk(1, 0, 0, 0)
  return best, best_counts
end

-- }======================================================================

-- {======================================================================
-- Which path the planner takes: the sizes recompute.c compares, recomputed here
-- =======================================================================

local function pareto(points)
  table.sort(points, function(x, y)
    if x.mem ~= y.mem then return x.mem < y.mem end
    return x.time < y.time
  end)
  local out, fastest = {}, math.huge
  for _, p in ipairs(points) do
    if p.time < fastest then fastest = p.time; out[#out + 1] = p end
  end
  return out
end

-- -> the count combinations of the smaller kinds, and for each merge of the next kind's
-- front into the merged front so far, the points it would hold before pruning
local function path_sizes(c)
  local big, combos = 1, 1
  for i, k in ipairs(c.kinds) do if k.n > c.kinds[big].n then big = i end end
  for i, k in ipairs(c.kinds) do
    if i ~= big then combos = combos * (k.n + 1) * (k.n + 2) / 2 end
  end
  local merges, merged = {}, nil
  for _, k in ipairs(c.kinds) do
    local pts = {}
    for full = 0, c.allowed.full and k.n or 0 do
      for sel = 0, c.allowed.selective and k.n - full or 0 do
        local none = k.n - sel - full
        if none == 0 or c.allowed.none then
          pts[#pts + 1] = {mem = c.w * (none * k.act.none + sel * k.act.selective
                                        + full * k.act.full),
                           time = sel * k.rec.selective + full * k.rec.full}
        end
      end
    end
    local front = pareto(pts)
    if not merged then merged = front
    else
      merges[#merges + 1] = #merged * #front
      if #merged * #front > FRONT_MAX then break end
      local sums = {}
      for _, p in ipairs(merged) do
        for _, q in ipairs(front) do
          sums[#sums + 1] = {mem = p.mem + q.mem, time = p.time + q.time}
        end
      end
      merged = pareto(sums)
    end
  end
  return combos, merges
end

-- }======================================================================

-- {======================================================================
-- The checks shared by the models
-- =======================================================================

-- plans(c, plan) -> one row per budget share: {share, budget, result, seconds}; `plan`
-- prices a budget, returning the estimate or nil and why.
local function plans(c, plan)
  local rows = {}
  for _, share in ipairs(SHARES) do
    local budget = c.lo + share * (c.hi - c.lo)
    local r, why = plan(budget)
    assert(r, string.format("no plan at share %.2f (%.6g B): %s", share, budget, tostring(why)))
    rows[#rows + 1] = {share = share, budget = budget, result = r,
                       seconds = seconds_of(c, r.strategy.layer_recompute)}
  end
  return rows
end

local function check_model(c)
  local rng = 0x9E3779B9
  local function rand(n)  -- xorshift32, 0..n
    rng = rng ~ ((rng << 13) & 0xffffffff)
    rng = rng ~ (rng >> 17)
    rng = rng ~ ((rng << 5) & 0xffffffff)
    return rng % (n + 1)
  end
  for trial = 1, 12 do
    local counts = {}
    for i, k in ipairs(c.kinds) do
      local full = trial % 3 == 0 and 0 or rand(k.n)  -- every third without full layers
      local sel = trial % 4 == 0 and 0 or rand(k.n - full)
      counts[i] = {none = k.n - sel - full, selective = sel, full = full}
    end
    local r = assert(core.run(c.model, DEVICE, JOB,
                              copy(STRATEGY, {layer_recompute = layer_modes(c, counts)})))
    local want = peak_of(c, counts)
    assert.is_true(math.abs(r.peak_memory_bytes - want) <= REL * want,
      string.format("trial %d: estimator %.17g B, brute-force model %.17g B", trial,
                    r.peak_memory_bytes, want))
  end
end

local function check_bounds(c, rows)
  local full, none = c.whole.full.step_time_s, c.whole.none.step_time_s
  local prev
  for _, row in ipairs(rows) do
    local r, at = row.result, string.format("share %.2f", row.share)
    assert.is_true(r.peak_memory_bytes <= row.budget,
      string.format("%s: peak %.17g B over the budget %.17g B", at, r.peak_memory_bytes,
                    row.budget))
    assert.is_true(r.step_time_s <= full * (1 + REL),
      string.format("%s: %.12g s, whole-model full %.12g s", at, r.step_time_s, full))
    assert.is_true(r.step_time_s >= none * (1 - REL),
      string.format("%s: %.12g s, whole-model none %.12g s", at, r.step_time_s, none))
    if prev then  -- shares ascend: a larger budget is never slower
      assert.is_true(r.step_time_s <= prev.result.step_time_s * (1 + REL),
        string.format("share %.2f: %.12g s, share %.2f: %.12g s", prev.share,
                      prev.result.step_time_s, row.share, r.step_time_s))
    end
    prev = row
  end
end

-- The plan is no better than the true optimum, which the estimator confirms fits and is
-- no slower than the plan. Returns the optimum.
local function check_lower(c, row)
  local at = string.format("share %.2f", row.share)
  local opt, counts = optimum(c, row.budget)
  assert(counts, at .. ": the brute force finds nothing that fits")
  assert.is_true(row.seconds >= opt * (1 - REL) - 1e-15,
    string.format("%s: plan %.12g s beats the optimum %.12g s", at, row.seconds, opt))
  local r = assert(core.run(c.model, DEVICE, JOB,
                            copy(STRATEGY, {layer_recompute = layer_modes(c, counts)})))
  assert.is_true(r.peak_memory_bytes <= row.budget * (1 + REL), at .. ": optimum over budget")
  assert.is_true(r.step_time_s <= row.result.step_time_s * (1 + REL), at)
  return opt
end

-- }======================================================================

local function estimate_args(c, extra)
  return copy(STRATEGY, copy({model = c.model, device = DEVICE, devices = JOB.devices,
                              global_batch = JOB.global_batch, seq_len = JOB.seq_len}, extra))
end

-- The exact paths (the counts per kind, or the merged fronts) through
-- nd.estimate{recompute = "per_layer"}; path(c) asserts which one the stage takes.
local function exact_case(name, m, allowed, path_name, path)
  describe(name, function()
    local c = setup(m, allowed)
    local rows
    local function get_rows()
      rows = rows or plans(c, function(budget)
        return nd.estimate(estimate_args(c, {recompute = "per_layer", max_mem = budget,
                                             recompute_modes = allowed}))
      end)
      return rows
    end

    it(path_name, function() path(c) end)

    it("prices a stage the way the brute force does", function() check_model(c) end)

    it("fits, lies between full and none, and never speeds up as the budget shrinks", function()
      check_bounds(c, get_rows())
    end)

    -- Exact: with gamma 0 both optima are one and the plan must equal it.
    it("is the brute-force optimum (with the planner's working-set reserve)", function()
      for _, row in ipairs(get_rows()) do
        local opt = check_lower(c, row)
        local reserved = optimum(c, row.budget, c.reserve)
        assert.is_true(row.seconds <= reserved * (1 + REL) + 1e-15,
          string.format("share %.2f: plan %.12g s, optimum %.12g s", row.share, row.seconds,
                        reserved))
        if math.abs(c.gamma) < 1e-6 then
          assert.is_true(math.abs(reserved - opt) <= REL * opt, "reserve charged with gamma 0")
        end
      end
    end)

    it("is the optimum that charges only the working set its layers rebuild", function()
      for _, row in ipairs(get_rows()) do
        local opt = optimum(c, row.budget)
        assert.is_true(math.abs(row.seconds - opt) <= REL * opt + 1e-15,
          string.format("share %.2f: plan %.12g s, optimum %.12g s", row.share, row.seconds, opt))
      end
    end)
  end)
end

local function merged_fronts_case(name, m, allowed)
  exact_case(name, m, allowed,
    "reaches the merged fronts: too many combinations, fronts within FRONT_MAX", function(c)
      local combos, merges = path_sizes(c)
      assert.is_true(combos > COMBOS_MAX, "combinations " .. combos)
      assert.is_true(#merges == #c.kinds - 1, "a merge past FRONT_MAX")
      for _, points in ipairs(merges) do assert.is_true(points <= FRONT_MAX) end
    end)
end

-- The main path (enumerate_counts) on a stage of three kinds, each distinct working set
-- tried as a cap: the optimum that charges each plan only what its layers rebuild.
exact_case("counts per kind: dense, MoE and MTP layers, every mode (25 layers)",
           deepseek(24, 4, 1), MODES, "stays on the main path: few enough combinations",
           function(c)
             local combos = path_sizes(c)
             assert.is_true(combos <= COMBOS_MAX, "combinations " .. combos)
           end)

-- none or full only: each kind's front is its n + 1 counts of full layers, so two kinds of
-- 100 and 500 layers merge into 101 x 501 points, while 100 layers give 5151 combinations
merged_fronts_case("merged fronts: dense and MoE layers, none or full (600 layers)",
                   deepseek(600, 100, 0), {"none", "full"})

-- every mode, three kinds: 52 dense layers and the MTP layer give 1431 x 3 combinations;
-- the dense front (105 points) times the MoE one (594) and that merge times the MTP front
-- stay within FRONT_MAX
merged_fronts_case("merged fronts: dense, MoE and MTP layers, every mode (251 layers)",
                   deepseek(250, 52, 1), MODES)

describe("bucket DP: dense and MoE layers, every mode (500 layers)", function()
  -- the dense front (201 points) times the MoE one (1200) pass FRONT_MAX
  local c = setup(deepseek(500, 100, 0), MODES)
  local rows
  local function get_rows()
    rows = rows or plans(c, function(budget)
      return core.plan(c.model, DEVICE, JOB, STRATEGY, budget)
    end)
    return rows
  end

  it("reaches the bucket DP: too many combinations, a merge past FRONT_MAX", function()
    local combos, merges = path_sizes(c)
    assert.is_true(combos > COMBOS_MAX, "combinations " .. combos)
    assert.is_true(merges[#merges] > FRONT_MAX)
    assert.is_true(c.layers * BUCKETS_PER_LAYER <= MAX_BUCKETS)  -- the tolerance below
  end)

  it("prices a stage the way the brute force does", function() check_model(c) end)

  it("fits, lies between full and none, and never speeds up as the budget shrinks", function()
    check_bounds(c, get_rows())
  end)

  -- Tolerance. The DP splits the room R left on the stage (budget - fixed - the reserved
  -- working set) into K = n * BUCKETS_PER_LAYER buckets (n = 500 layers, within
  -- MIN_BUCKETS..MAX_BUCKETS) and rounds each layer's bytes up to whole buckets, so a layer
  -- loses less than one bucket: any choice within R - n * R / K = R * (1 - 1/8) of room
  -- also fits in the K buckets. The plan is therefore no slower than the optimum (with the
  -- reserve) under the budget lowered by R / 8, and no faster than the true optimum.
  it("is within the rounding of the buckets of the brute-force optimum", function()
    local n, bounded = c.layers, 0
    local K = math.max(MIN_BUCKETS, math.min(MAX_BUCKETS, n * BUCKETS_PER_LAYER))
    for _, row in ipairs(get_rows()) do
      check_lower(c, row)
      local room = row.budget - c.fixed - c.gamma * c.reserve
      local bound = optimum(c, row.budget - n * room / K, c.reserve)
      if bound < math.huge then bounded = bounded + 1 end
      assert.is_true(row.seconds <= bound * (1 + REL) + 1e-15,
        string.format("share %.2f: plan %.12g s, optimum with R/8 less %.12g s", row.share,
                      row.seconds, bound))
    end
    assert.is_true(bounded >= 5, "only " .. bounded .. " budgets leave room for the bound")
  end)
end)

describe("bucket DP past 512 layers (MAX_BUCKETS caps the buckets)", function()
  it("plans every budget at which whole-model full recompute fits (the DP's rounding counts "
     .. "only what is kept beyond each layer's least)", function()
    local c = setup(deepseek(600, 100, 0), MODES)
    for _, share in ipairs({0, 0.001, 0.01}) do
      local budget = c.lo + share * (c.hi - c.lo)
      local r, why = core.plan(c.model, DEVICE, JOB, STRATEGY, budget)
      assert(r, string.format("share %.3f (%.6g B): %s", share, budget, tostring(why)))
      assert.is_true(r.peak_memory_bytes <= budget)
      assert.is_true(r.step_time_s <= c.whole.full.step_time_s * (1 + REL))
    end
  end)
end)
