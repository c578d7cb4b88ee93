-- ndplan.recompute: ranking, one-more-full-layer potentials, plot groups, trainer plans and
-- the potentials CSV, over small hand-made plans.
require "ndplan"
local R = require "ndplan.recompute"

local DIMS = {{"DP", 2}, {"TP", 4}, {"PP", 2}}
local OTHER_DIMS = {{"DP", 4}, {"TP", 2}, {"PP", 2}}

local function range(first, count, kind, mode, extra)
  local r = {first = first, count = count, kind = kind, mode = mode}
  for k, v in pairs(extra or {}) do r[k] = v end
  return r
end

-- plan(score, memory, ranges [, extra]): a plan with DIMS unless extra.dimensions says
local function plan(score, memory, ranges, extra)
  local p = {score = score, memory = memory, ranges = ranges, dimensions = DIMS}
  for k, v in pairs(extra or {}) do p[k] = v end
  return p
end

local function scores(plans)
  local out = {}
  for i, p in ipairs(plans) do out[i] = p.score end
  return out
end

local function deep_copy(x)
  if type(x) ~= "table" then return x end
  local out = {}
  for k, v in pairs(x) do out[k] = deep_copy(v) end
  return out
end

describe("sort_results", function()
  it("puts the fastest first and breaks equal scores by lower peak memory", function()
    local plans = {plan(2, 10), plan(1, 30), plan(1, 20), plan(0.5, 99)}
    local sorted = R.sort_results(plans)
    assert.same({0.5, 1, 1, 2}, scores(sorted))
    assert.equal(plans[3], sorted[2])
    assert.equal(plans[2], sorted[3])
  end)

  it("keeps the input order when score and memory are equal", function()
    local a, b, c = plan(1, 5), plan(1, 5), plan(1, 5)
    local sorted = R.sort_results({b, c, a})
    assert.equal(b, sorted[1]); assert.equal(c, sorted[2]); assert.equal(a, sorted[3])
  end)

  it("returns a new array and leaves the input as it was", function()
    local plans = {plan(3, 1), plan(1, 1), plan(2, 1)}
    local before = deep_copy(plans)
    local sorted = R.sort_results(plans)
    assert.are_not.equal(plans, sorted)
    assert.same(before, plans)
    assert.same({3, 1, 2}, scores(plans))
  end)

  for name, bad in pairs({NaN = 0 / 0, inf = math.huge, ["-inf"] = -math.huge,
                          ["a string"] = "1.0"}) do
    it("raises on a " .. name .. " score", function()
      assert.has_error(function() R.sort_results({plan(1, 1), plan(bad, 1)}) end,
                       "recompute results must have finite performance scores before sorting")
    end)
  end

  it("raises on a missing score", function()
    assert.has_error(function() R.sort_results({plan(1, 1), {memory = 3}}) end,
                     "recompute results must have finite performance scores before sorting")
  end)
end)

describe("keep_potential", function()
  -- layers 0-1 dense selective, 2-3 moe off
  local function current()
    return plan(10, 50, {range(0, 2, "dense", "selective"), range(2, 2, "moe", "off")})
  end
  local function layer1_full(score, memory, extra)
    return plan(score, memory, {range(0, 1, "dense", "selective"), range(1, 1, "dense", "full"),
                                range(2, 2, "moe", "off")}, extra)
  end
  local function layer2_full(score, memory)
    return plan(score, memory, {range(0, 2, "dense", "selective"), range(2, 1, "moe", "full"),
                                range(3, 1, "moe", "off")})
  end

  it("appends and returns the fastest plan with one more full layer", function()
    local kept = {current()}
    local slow, fast = layer1_full(9, 40), layer2_full(8, 60)
    assert.equal(fast, R.keep_potential(kept[1], kept, {slow, fast}))
    assert.equal(2, #kept)
    assert.equal(fast, kept[2])
  end)

  it("prefers lower memory among equally fast plans", function()
    local kept = {}
    local heavy, light = layer1_full(8, 60), layer2_full(8, 40)
    assert.equal(light, R.keep_potential(current(), kept, {heavy, light}))
  end)

  it("compares counts of (kind, mode), not which layer changed", function()
    -- dense: 2 selective + 1 full -> 1 selective + 2 full, though layer 1 went full -> selective
    local cur = plan(10, 1, {range(0, 1, "dense", "selective"), range(1, 1, "dense", "full"),
                             range(2, 1, "dense", "selective")})
    local cand = plan(9, 1, {range(0, 1, "dense", "full"), range(1, 1, "dense", "selective"),
                             range(2, 1, "dense", "full")})
    assert.equal(cand, R.keep_potential(cur, {}, {cand}))
  end)

  it("accepts a layer leaving off for full (not only selective)", function()
    local cand = layer2_full(9, 1)
    assert.equal(cand, R.keep_potential(current(), {}, {cand}))
  end)

  it("reads the estimator's 'none' as off", function()
    local cur = plan(10, 1, {range(0, 2, "dense", "none")})
    local cand = plan(9, 1, {range(0, 1, "dense", "full"), range(1, 1, "dense", "off")})
    assert.equal(cand, R.keep_potential(cur, {}, {cand}))
  end)

  it("skips plans with other dimensions", function()
    local other = layer1_full(5, 1, {dimensions = OTHER_DIMS})
    local same = layer1_full(9, 1)
    assert.equal(same, R.keep_potential(current(), {}, {other, same}))
    assert.is_nil(R.keep_potential(current(), {}, {other}))
  end)

  it("skips plans over another set of layers", function()
    local extra_layer = plan(5, 1, {range(0, 1, "dense", "selective"), range(1, 1, "dense", "full"),
                                    range(2, 3, "moe", "off")})
    local gap = plan(5, 1, {range(0, 1, "dense", "selective"), range(1, 1, "dense", "full"),
                            range(3, 2, "moe", "off")})  -- layers 0,1,3,4 instead of 0-3
    assert.is_nil(R.keep_potential(current(), {}, {extra_layer, gap}))
  end)

  it("skips plans with two more full layers, or none", function()
    local two = plan(5, 1, {range(0, 2, "dense", "full"), range(2, 2, "moe", "off")})
    local same_modes = plan(5, 1, {range(0, 2, "dense", "selective"), range(2, 2, "moe", "off")})
    local sel_to_off = plan(5, 1, {range(0, 1, "dense", "off"), range(1, 1, "dense", "selective"),
                                   range(2, 2, "moe", "off")})
    assert.is_nil(R.keep_potential(current(), {}, {two, same_modes, sel_to_off}))
  end)

  it("skips plans where another count moves besides the new full layer", function()
    -- moe: off -> full (fine), but dense also moves a layer from selective to off
    local cur = plan(10, 1, {range(0, 1, "dense", "selective"), range(1, 1, "moe", "off"),
                             range(2, 1, "dense", "full")})
    local cand = plan(5, 1, {range(0, 1, "dense", "full"), range(1, 1, "moe", "full"),
                             range(2, 1, "dense", "off")})
    assert.is_nil(R.keep_potential(cur, {}, {cand}))
  end)

  it("skips plans where a layer changes kind, even when the counts match", function()
    local cur = plan(10, 1, {range(0, 1, "dense", "off"), range(1, 2, "moe", "off")})
    -- counts: (dense, off) -1, (dense, full) +1, moe unchanged; but layers 0 and 1 swap kinds
    local cand = plan(5, 1, {range(0, 1, "moe", "off"), range(1, 1, "dense", "full"),
                             range(2, 1, "moe", "off")})
    assert.is_nil(R.keep_potential(cur, {}, {cand}))
  end)

  it("skips plans that offload, however the bytes are stated", function()
    local by_field = layer1_full(5, 1)
    by_field.ranges[3].offload_bytes = 1024
    local by_option = layer2_full(6, 1)
    by_option.ranges[3].option = {link_bandwidth = 2048}
    local by_option_field = layer1_full(7, 1)
    by_option_field.ranges[1].option = {offload_bytes = 1}
    local clean = layer1_full(9, 1)
    clean.ranges[3].offload_bytes = 0
    local kept = {}
    assert.equal(clean, R.keep_potential(current(), kept, {by_field, by_option, by_option_field,
                                                           clean}))
    assert.same({clean}, kept)
  end)

  it("skips plans already kept (same dimensions and per-layer settings)", function()
    local kept = {current(), layer1_full(9, 40)}
    local again = layer1_full(8, 30)  -- another table, same settings, faster
    local next_best = layer2_full(9.5, 1)
    assert.equal(next_best, R.keep_potential(kept[1], kept, {again, next_best}))
    assert.equal(3, #kept)
  end)

  it("does not treat a kept plan with other dimensions as the same plan", function()
    local kept = {layer1_full(9, 40, {dimensions = OTHER_DIMS})}
    local cand = layer1_full(8, 30)
    assert.equal(cand, R.keep_potential(current(), kept, {cand}))
  end)

  it("returns nil and leaves kept alone when nothing qualifies", function()
    local kept = {current()}
    assert.is_nil(R.keep_potential(kept[1], kept, {}))
    assert.is_nil(R.keep_potential(kept[1], kept, {plan(1, 1, nil, {mode = "full"})}))
    assert.equal(1, #kept)
  end)

  it("raises on invalid ranges in the current plan or a candidate", function()
    local bad = {
      {range(-1, 2, "dense", "off"), "first must be a whole number >= 0, got %-1"},
      {range(0, 0, "dense", "off"), "count must be a whole number >= 1, got 0"},
      {range(0, 1.5, "dense", "off"), "count must be a whole number >= 1, got 1.5"},
      {range(0, 2, "dense", "partial"), "unknown mode 'partial'"},
    }
    for _, case in ipairs(bad) do
      local p = plan(9, 1, {case[1], range(4, 1, "moe", "off")})
      local ok, err = pcall(R.keep_potential, p, {}, {})
      assert.is_false(ok); assert.truthy(err:find(case[2]), err)
      ok, err = pcall(R.keep_potential, current(), {}, {p})
      assert.is_false(ok); assert.truthy(err:find(case[2]), err)
    end
    local overlap = plan(9, 1, {range(0, 3, "dense", "off"), range(2, 2, "moe", "off")})
    assert.has_error(function() R.keep_potential(overlap, {}, {}) end,
                     "recompute ranges overlap: layers 0-2 and 2-3")
  end)

  it("raises when a plan has no finite score", function()
    assert.has_error(function() R.keep_potential(current(), {}, {layer1_full(0 / 0, 1)}) end,
                     "recompute results must have finite performance scores before sorting")
  end)
end)

describe("plot_groups", function()
  local function config(score, plan_scores, dims)
    local plans = {}
    for i, s in ipairs(plan_scores) do plans[i] = plan(s, i) end
    return {dimensions = dims or DIMS, score = score, plans = plans}
  end
  local function sizes(groups)
    local out = {}
    for i, g in ipairs(groups) do out[i] = #g.plans end
    return out
  end

  it("takes the plans strictly below the next score plus the first that does not", function()
    local space = {config(9, {12, 8, 10, 9}, DIMS), config(10, {10, 11}, OTHER_DIMS)}
    local groups = R.plot_groups(space)
    assert.same({8, 9, 10}, scores(groups[1].plans))  -- 10 is not strictly below 10
    assert.equal(DIMS, groups[1].dimensions)
    assert.equal(OTHER_DIMS, groups[2].dimensions)
  end)

  it("shows at least two plans even when none beats the next configuration", function()
    local groups = R.plot_groups({config(10.5, {10.5, 12, 11}), config(10, {10, 20, 30})})
    assert.same({10.5, 11}, scores(groups[1].plans))
  end)

  it("takes no more plans than a configuration has", function()
    local groups = R.plot_groups({config(1, {1}), config(2, {2, 3, 4}), config(3, {3, 4, 5})})
    assert.same({1, 2, 2}, sizes(groups))  -- the last: mean(1, 2) = 1.5 -> 2
  end)

  it("gives the last the mean earlier size rounded half up", function()
    -- earlier groups of 2 and 3: mean 2.5 -> 3
    local space = {config(1, {1, 5}), config(2, {2, 2.5, 3.5, 4}), config(3, {3, 4, 5, 6, 7})}
    assert.same({2, 3, 3}, sizes(R.plot_groups(space)))
    -- 2, 2 and 3: mean 2.33 -> 2
    space = {config(1, {1, 5}), config(2, {2, 5}), config(3, {3, 3.5, 4.5}), config(4, {4, 5, 6, 7})}
    assert.same({2, 2, 3, 2}, sizes(R.plot_groups(space)))
    -- 3 and 4: mean 3.5 -> 4
    space = {config(1, {1, 1.5, 3}), config(3, {3, 3.5, 4, 5}), config(5, {5, 6, 7, 8, 9})}
    assert.same({3, 4, 4}, sizes(R.plot_groups(space)))
  end)

  it("gives the last at least two, and no more than it has", function()
    local space = {config(1, {1}), config(2, {2}), config(3, {3, 4, 5})}
    assert.same({1, 1, 2}, sizes(R.plot_groups(space)))
    space = {config(1, {1, 1.5, 1.7, 3}), config(3, {3})}
    assert.same({4, 1}, sizes(R.plot_groups(space)))
  end)

  it("gives a lone configuration two plans, fastest first", function()
    local groups = R.plot_groups({config(5, {7, 5, 6, 8})})
    assert.equal(1, #groups)
    assert.same({5, 6}, scores(groups[1].plans))
  end)

  it("keeps the first 20 configurations by default, top of them when given", function()
    local space = {}
    for i = 1, 25 do space[i] = config(i, {i, i + 2, i + 3}) end
    space[3] = config(3, {3, 3.2, 3.4, 3.6, 5})
    assert.equal(20, #R.plot_groups(space))
    local three = R.plot_groups(space, 3)
    assert.equal(3, #three)
    -- the third is the last: mean(2, 2) = 2, not "below configuration 4's score" (5 plans)
    assert.same({2, 2, 2}, sizes(three))
    assert.same({}, R.plot_groups(space, 0))
    assert.same({}, R.plot_groups(space, -4))
  end)

  it("leaves the configurations as they were", function()
    local space = {config(9, {12, 8, 10, 9}), config(10, {10, 11})}
    local before = deep_copy(space)
    R.plot_groups(space)
    assert.same(before, space)
  end)

  it("raises when a configuration followed by another has no score", function()
    local space = {config(1, {1, 2}), {dimensions = DIMS, plans = {plan(3, 1)}}, config(3, {3})}
    assert.has_error(function() R.plot_groups(space) end,
                     "recompute.plot_groups: configuration 2 has no score")
  end)

  it("raises when a configuration holds a plan without a finite score", function()
    assert.has_error(function() R.plot_groups({config(1, {1, math.huge})}) end,
                     "recompute results must have finite performance scores before sorting")
  end)
end)

describe("trainer_plan", function()
  it("gives a whole-model mode with no layers, 'none' read as off", function()
    local mode, layers = R.trainer_plan({mode = "selective"})
    assert.equal("selective", mode); assert.same({}, layers)
    mode, layers = R.trainer_plan({mode = "none"})
    assert.equal("off", mode); assert.same({}, layers)
  end)

  it("defaults to the recomputing mode most layers use", function()
    local mode, layers = R.trainer_plan(plan(1, 1, {range(0, 1, "dense", "full"),
                                                    range(1, 3, "dense", "selective"),
                                                    range(4, 2, "dense", "off")}))
    assert.equal("selective", mode)
    assert.same({["0"] = "full", ["4-5"] = "off"}, layers)
  end)

  it("breaks a tie between full and selective towards full", function()
    local mode, layers = R.trainer_plan(plan(1, 1, {range(0, 2, "dense", "selective"),
                                                    range(2, 2, "dense", "full"),
                                                    range(4, 5, "dense", "off")}))
    assert.equal("full", mode)
    assert.same({["0-1"] = "selective", ["4-8"] = "off"}, layers)
  end)

  it("defaults to off when no layer recomputes", function()
    local mode, layers = R.trainer_plan(plan(1, 1, {range(0, 4, "dense", "none")}))
    assert.equal("off", mode); assert.same({}, layers)
  end)

  it("merges runs of one mode across kinds, and breaks them at gaps", function()
    -- layer 3 is not stated: layers 0-2 and 4 are off but are not one run
    local mode, layers = R.trainer_plan(plan(1, 1, {
      range(0, 2, "dense", "off"), range(2, 1, "moe", "off"), range(4, 1, "moe", "off"),
      range(5, 3, "moe", "full"), range(8, 1, "mtp", "selective")}))
    assert.equal("full", mode)
    assert.same({["0-2"] = "off", ["4"] = "off", ["8"] = "selective"}, layers)
  end)

  it("gives nil for a plan stated neither per layer nor as a whole", function()
    assert.is_nil(R.trainer_plan({score = 1}))
    assert.is_nil(R.trainer_plan({score = 1, ranges = {}}))
  end)
end)

describe("plot_data", function()
  it("gives per plan its score, parts, memory, trainer plan and full layer count", function()
    local parts = {compute = 0.8, bubble = 0.2}
    local per_layer = plan(1, 100, {range(0, 1, "dense", "full"), range(1, 2, "dense", "off")},
                           {score_parts = parts})
    local whole = plan(2, 90, nil, {mode = "full"})
    local unstated = plan(3, 80)
    local data = R.plot_data({{dimensions = DIMS, plans = {per_layer, whole}},
                              {dimensions = OTHER_DIMS, plans = {unstated}}})
    assert.equal(2, #data)
    assert.equal(DIMS, data[1].dimensions)
    assert.same({score = 1, parts = parts, memory = 100, mode = "full",
                 layers = {["1-2"] = "off"}, full_layers = 1}, data[1].records[1])
    assert.same({score = 2, memory = 90, mode = "full", layers = {}}, data[1].records[2])
    assert.is_nil(data[1].records[2].full_layers)
    assert.same({score = 3, memory = 80}, data[2].records[1])
  end)
end)

describe("same_dimensions", function()
  it("compares the pairs by value and in order, in either spelling", function()
    assert.is_true(R.same_dimensions({dimensions = {{"DP", 2}, {"SP", true}}},
                                     {dimensions = {{name = "DP", value = 2.0},
                                                    {name = "SP", value = true}}}))
    assert.is_false(R.same_dimensions({dimensions = {{"DP", 2}, {"TP", 4}}},
                                      {dimensions = {{"TP", 4}, {"DP", 2}}}))
    assert.is_false(R.same_dimensions({dimensions = {{"DP", 2}}},
                                      {dimensions = {{"DP", 2}, {"TP", 1}}}))
    assert.is_false(R.same_dimensions({dimensions = DIMS}, {dimensions = OTHER_DIMS}))
  end)
end)

describe("plan_scope and validate_ranges", function()
  it("names how a plan states its recompute", function()
    assert.equal("per_layer", R.plan_scope(plan(1, 1, {range(0, 1, "dense", "off")})))
    assert.equal("offload", R.plan_scope(plan(1, 1, {range(0, 1, "dense", "off",
                                                           {offload_bytes = 5})})))
    assert.equal("whole_model", R.plan_scope({mode = "full"}))
    assert.equal("unavailable", R.plan_scope({score = 1}))
  end)

  it("allows gaps and ranges out of order, refuses overlaps", function()
    local p = plan(1, 1, {range(5, 2, "moe", "full"), range(0, 2, "dense", "off")})
    assert.equal(p, R.validate_ranges(p))
    local layers, indices = R.layer_modes(p)
    assert.same({0, 1, 5, 6}, indices)
    assert.equal("moe", layers[5].kind)
    assert.has_error(function()
      R.validate_ranges(plan(1, 1, {range(5, 2, "moe", "full"), range(0, 6, "dense", "off")}))
    end, "recompute ranges overlap: layers 0-5 and 5-6")
  end)

  it("names the first overlap in layer order, and a bad range before any overlap", function()
    -- in layer order as stated, and out of it: the same first overlap
    local a, b, c = range(0, 4, "dense", "off"), range(3, 3, "dense", "full"),
                    range(5, 2, "moe", "off")
    for _, ranges in ipairs({{a, b, c}, {c, a, b}, {b, c, a}, {a, c, b}}) do
      assert.has_error(function() R.validate_ranges(plan(1, 1, ranges)) end,
                       "recompute ranges overlap: layers 0-3 and 3-5")
    end
    -- every range's fields are checked before any overlap is named
    assert.has_error(function()
      R.validate_ranges(plan(1, 1, {a, b, range(9, 0, "moe", "off")}))
    end, "recompute range 3: count must be a whole number >= 1, got 0")
    -- read while reading: checked once, the same answer
    R.reading(function()
      local p = plan(1, 1, {range(2, 2, "moe", "full"), range(0, 2, "dense", "off")})
      assert.equal(p, R.validate_ranges(p))
      assert.equal(p, R.validate_ranges(p))
      assert.equal(2, R.full_layers(p))
    end)
  end)
end)

describe("write_csv", function()
  local function read(path)
    local f = assert(io.open(path, "rb"))
    local text = f:read("a")
    f:close()
    return text
  end
  local function list(dir)
    local names = {}
    local p = assert(io.popen("ls -A '" .. dir .. "'"))
    for line in p:lines() do names[#names + 1] = line end
    p:close()
    return names
  end
  local base
  before_each(function()
    base = os.tmpname()
    os.remove(base)
  end)
  after_each(function()
    os.execute("rm -rf '" .. base .. "'")
  end)

  local step0 = plan(2.5, 1000.5, {range(0, 2, "dense", "selective",
                                         {option = {switches = {softmax = 0, ffAct = 0, normOp = 1}}}),
                                   range(2, 1, "moe", "none")},
                     {stage_memory = {1000.5, 800}, stage_savings = {0, 0.125}})
  local step1 = plan(2.25, 1100, {range(0, 1, "dense", "selective",
                                        {option = {switches = {"softmax", "ffAct"}}}),
                                  range(1, 1, "dense", "full"), range(2, 1, "moe", "none")},
                     {stage_memory = {1100, 800}, stage_savings = {0.5, 0.125}})
  local whole = {score = 3, memory = 70, mode = "full",
                 dimensions = {{"DP", 4}, {"TP", 2}, {"SP", true}}}
  local offload = plan(4, 60, {range(0, 1, 'a,"b"', "off", {offload_bytes = 4096})},
                       {dimensions = {{name = "DP", value = 1}, {name = "ZERO", value = 1}}})
  local POTENTIALS = {{rank = 1, dimensions = DIMS, plans = {step0, step1}},
                      {rank = 2, plans = {whole, offload, {score = 5, memory = 50}}}}
  local EXPECTED = table.concat({
    'TOP,step,DP,TP,PP,SP,ZERO,changed_layer,full_layers,memory_mb,score,recompute_mode,'
      .. 'recompute_layers,layer_recompute,stage_memory_mb,stage_savings,plan_scope',
    '1,0,2,4,2,,,,0,1000.5,2.5,selective,"{""2"":""off""}","[{""first"":0,""count"":2,'
      .. '""kind"":""dense"",""mode"":""selective"",""recompute"":[""ffAct"",""softmax""]},'
      .. '{""first"":2,""count"":1,""kind"":""moe"",""mode"":""off"",""recompute"":""none""}]",'
      .. '"[1000.5,800]","[0,0.125]",per_layer',
    '1,1,2,4,2,,,1,1,1100,2.25,full,"{""0"":""selective"",""2"":""off""}","[{""first"":0,'
      .. '""count"":1,""kind"":""dense"",""mode"":""selective"",""recompute"":[""ffAct"",'
      .. '""softmax""]},{""first"":1,""count"":1,""kind"":""dense"",""mode"":""full"",'
      .. '""recompute"":""full""},{""first"":2,""count"":1,""kind"":""moe"",""mode"":""off"",'
      .. '""recompute"":""none""}]","[1100,800]","[0.5,0.125]",per_layer',
    '2,0,4,2,,true,,,,70,3,full,{},,,,whole_model',
    '2,1,1,,,,1,,0,60,4,off,{},"[{""first"":0,""count"":1,""kind"":""a,\\""b\\"""",'
      .. '""mode"":""off"",""recompute"":""none"",""offload_bytes"":4096}]",,,offload',
    '2,2,,,,,,,,50,5,,,,,,unavailable',
  }, "\n") .. "\n"

  it("writes one row per kept step, byte for byte", function()
    local path = base .. "/out.csv"
    assert(os.execute("mkdir '" .. base .. "'"))
    assert.is_true(R.write_csv(POTENTIALS, path))
    assert.equal(EXPECTED, read(path))
  end)

  it("creates missing parent folders", function()
    local path = base .. "/a/b/recompute_potentials.csv"
    R.write_csv(POTENTIALS, path)
    assert.equal(EXPECTED, read(path))
  end)

  it("replaces an existing file and leaves no temporary file behind", function()
    local path = base .. "/out.csv"
    assert(os.execute("mkdir '" .. base .. "'"))
    local f = assert(io.open(path, "wb")); f:write("old\n"); f:close()
    R.write_csv({{rank = 7, plans = {{score = 1, memory = 2}}}}, path)
    assert.equal("TOP,step,changed_layer,full_layers,memory_mb,score,recompute_mode,"
                 .. "recompute_layers,layer_recompute,stage_memory_mb,stage_savings,plan_scope\n"
                 .. "7,0,,,2,1,,,,,,unavailable\n", read(path))
    assert.same({"out.csv"}, list(base))
  end)

  it("fails naming the folder when it cannot create it", function()
    assert(os.execute("mkdir -p '" .. base .. "'"))
    local f = assert(io.open(base .. "/x", "wb")); f:write("a file\n"); f:close()
    local ok, err = pcall(R.write_csv, POTENTIALS, base .. "/x/y/out.csv")
    assert.is_false(ok)
    assert.equal("cannot create folder for " .. base .. "/x/y/out.csv: " .. base
                 .. "/x: exists and is not a folder", err)
    assert.is_nil(io.open(base .. "/x/y/out.csv"))
  end)
end)

describe("reading", function()
  local function two_kinds()
    return plan(1, 1, {range(0, 2, "attn", "off"), range(2, 3, "moe", "full")})
  end

  it("expands each plan's layers once while the reader runs, afresh after", function()
    local p = two_kinds()
    local l1, i1, l2, i2 = R.reading(function()
      local a, b = R.layer_modes(p)
      local c, d = R.layer_modes(p)
      return a, b, c, d
    end)
    assert.equal(l1, l2)
    assert.equal(i1, i2)
    assert.same({0, 1, 2, 3, 4}, i1)
    assert.equal("full", l1[4].mode)
    -- after it, a plan read again reflects a change
    p.ranges[2].mode = "selective"
    local l3 = R.layer_modes(p)
    assert.are_not.equal(l1, l3)
    assert.equal("selective", l3[4].mode)
  end)

  it("gives equal settings of different plans as one table while it runs", function()
    local a, b = two_kinds(), two_kinds()
    b.ranges[2].mode = "selective"
    local la, lb = R.reading(function() return R.layer_modes(a), R.layer_modes(b) end)
    assert.equal(la[0], lb[0])             -- attn, off in both
    assert.are_not.equal(la[4], lb[4])     -- full against selective
    assert.equal("selective", lb[4].mode)
    assert.same({2, 3, 4}, R.reading(R.changed_layers, a, b))
    assert.are_not.equal(R.layer_modes(a)[0], R.layer_modes(b)[0])  -- fresh outside it
  end)

  it("passes the reader's error on and keeps nothing after it", function()
    local p = two_kinds()
    local first
    local ok, err = pcall(R.reading, function()
      first = R.layer_modes(p)
      error("reader failed", 0)
    end)
    assert.is_false(ok)
    assert.equal("reader failed", err)
    assert.are_not.equal(first, (R.layer_modes(p)))
  end)

  it("gives the CSV and the potentials the text they give without it", function()
    local cur = plan(2, 10, {range(0, 3, "attn", "off")})
    local nxt = plan(2.5, 8, {range(0, 1, "attn", "full"), range(1, 2, "attn", "off")})
    local pots = {{rank = 1, dimensions = DIMS, plans = {cur, nxt}}}
    local csv = require "ndplan.out.recompute_csv"
    local text = csv.text(pots)
    -- the same rows as reading each plan afresh: changed layer 0, one full layer
    assert.matches("\n1,1,2,4,2,0,1,", text, 1, true)
    assert.equal(text, R.reading(csv.text, pots))
  end)
end)

-- changed_layers, trainer_plan and full_layers work per range; the oracles here read the
-- plans layer by layer (layer_modes), as their definitions state, over random plans with
-- gaps, unsorted ranges, offloads and selective switch sets.
describe("per-range readings against per-layer oracles", function()
  local KINDS, MODES = {"dense", "moe"}, {"off", "none", "selective", "full"}
  local function random_plan(rand)
    local ranges, at = {}, rand(0, 3)
    for _ = 1, rand(1, 6) do
      local c = rand(1, 5)
      local option = {switches = rand(2) == 1 and {"attn_core"} or {"attn_core", "mlp_act"}}
      ranges[#ranges + 1] = range(at, c, KINDS[rand(2)], MODES[rand(4)],
                                  {option = option, offload_bytes = rand(4) == 1 and 100 or 0})
      at = at + c + (rand(3) == 1 and rand(1, 3) or 0)
    end
    if rand(2) == 1 then ranges[1], ranges[#ranges] = ranges[#ranges], ranges[1] end
    return plan(1, 1, ranges)
  end
  local function same(x, y)
    return x.kind == y.kind and x.mode == y.mode and x.offload_bytes == y.offload_bytes
           and table.concat(x.ops, ",") == table.concat(y.ops, ",")
  end
  local function changed_oracle(a, b)
    local la, ia = R.layer_modes(a)
    local lb, ib = R.layer_modes(b)
    local out = {}
    for _, i in ipairs(ia) do if not lb[i] or not same(la[i], lb[i]) then out[#out + 1] = i end end
    for _, i in ipairs(ib) do if not la[i] then out[#out + 1] = i end end
    table.sort(out)
    return out
  end
  local function trainer_oracle(p)
    local layers, indices = R.layer_modes(p)
    local count = {full = 0, selective = 0, off = 0}
    for _, i in ipairs(indices) do count[layers[i].mode] = count[layers[i].mode] + 1 end
    local default = (count.full > 0 and count.full >= count.selective) and "full"
                    or count.selective > 0 and "selective" or "off"
    local out, first, last, mode = {}, nil, nil, nil
    local function close()
      if first and mode ~= default then
        out[first == last and tostring(first) or (first .. "-" .. last)] = mode
      end
    end
    for _, i in ipairs(indices) do
      local m = layers[i].mode
      if first and i == last + 1 and m == mode then last = i
      else close(); first, last, mode = i, i, m end
    end
    close()
    return default, out, count.full
  end
  -- keep_potential's one-more-full test, layer by layer: the same layers stated, each keeping
  -- its kind, and the (kind, mode) counts differing by one layer of one kind turned full
  local function one_more_full_oracle(a, b)
    local la, ia = R.layer_modes(a)
    local lb, ib = R.layer_modes(b)
    if #ia ~= #ib then return false end
    local delta = {}
    for n, i in ipairs(ia) do
      if ib[n] ~= i or la[i].kind ~= lb[i].kind then return false end
      local k = la[i].kind
      delta[k] = delta[k] or {off = 0, selective = 0, full = 0}
      delta[k][la[i].mode] = delta[k][la[i].mode] - 1
      delta[k][lb[i].mode] = delta[k][lb[i].mode] + 1
    end
    local gained, lost, nonzero = nil, nil, 0
    for k, d in pairs(delta) do
      for mode, v in pairs(d) do
        if v ~= 0 then
          nonzero = nonzero + 1
          if mode == "full" and v == 1 then gained = k elseif mode ~= "full" and v == -1 then lost = k end
        end
      end
    end
    return nonzero == 2 and gained ~= nil and gained == lost
  end
  -- b: a's layers, one of them (sometimes) turned full and (sometimes) another's kind or
  -- mode changed, cut into ranges at random
  local function variant(a, rand)
    local la, ia = R.layer_modes(a)
    local layers = {}
    for n, i in ipairs(ia) do layers[n] = {i, la[i].kind, la[i].mode} end
    if rand(4) > 1 then local l = layers[rand(#layers)]; l[3] = "full" end
    if rand(4) == 1 then local l = layers[rand(#layers)]; l[2] = KINDS[rand(2)] end
    if rand(4) == 1 then local l = layers[rand(#layers)]; l[3] = MODES[rand(4)] end
    if rand(8) == 1 then table.remove(layers, rand(#layers)) end
    local ranges = {}
    for _, l in ipairs(layers) do
      local last = ranges[#ranges]
      if last and last.first + last.count == l[1] and last.kind == l[2] and last.mode == l[3]
         and rand(3) > 1 then
        last.count = last.count + 1
      else
        ranges[#ranges + 1] = range(l[1], 1, l[2], l[3])
      end
    end
    if #ranges == 0 then return nil end
    if rand(2) == 1 then ranges[1], ranges[#ranges] = ranges[#ranges], ranges[1] end
    return plan(1, 1, ranges)
  end
  it("agree on one more full layer over 3,000 random pairs", function()
    local rand = math.random
    math.randomseed(18)
    local kept_some = 0
    for _ = 1, 3000 do
      local a = random_plan(rand)
      local b = variant(a, rand)
      if b then
        local expect = not R.offloads(b) and one_more_full_oracle(a, b)
        local got = R.keep_potential(a, {}, {b})
        assert.equal(expect, got == b)
        if got then kept_some = kept_some + 1 end
      end
    end
    assert.is_true(kept_some > 300)  -- both answers are exercised
  end)

  it("agree on 3,000 random pairs", function()
    local rand = math.random
    math.randomseed(12)
    for _ = 1, 3000 do
      local a, b = random_plan(rand), random_plan(rand)
      if rand(4) == 1 then b = a end
      assert.same(changed_oracle(a, b), R.changed_layers(a, b))
      local mode, layers, full = trainer_oracle(a)
      local got_mode, got_layers = R.trainer_plan(a)
      assert.equal(mode, got_mode)
      assert.same(layers, got_layers)
      assert.equal(full, R.full_layers(a))
      assert.equal("integer", math.type(R.full_layers(a)))
    end
  end)
end)
