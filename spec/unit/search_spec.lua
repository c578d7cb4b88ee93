-- nd.search: the walk, its refusal labels, pinned / candidate / auto dimensions, the
-- post-filter, determinism across thread counts, and policy hooks that fail.
local nd = require "ndplan"
-- The search's mechanics on the device files alone (stack profiles: stack_spec, validate_spec).
require("ndplan.config.stack").DEFAULT = "none"

-- A small dense model: 8 heads (8 KV heads), 4 layers.
local small = assert(nd.model{model_type = "llama", hidden_size = 512, num_hidden_layers = 4,
                              num_attention_heads = 8, num_key_value_heads = 8,
                              intermediate_size = 1024, vocab_size = 1000})

local function run(args)
  local base = {model = small, device = "h100", devices = 4, global_batch = 4, seq_len = 1024,
                jobs = 1, top = 1000}
  for k, v in pairs(args) do base[k] = v end
  return nd.search(base)
end

local function key_of(s)
  return string.format("dp%d tp%d pp%d vpp%d cp%d ep%d etp%d sp%s z%d mbs%d mb%d %s", s.dp, s.tp,
                       s.pp, s.vpp, s.cp, s.ep, s.etp, tostring(s.sp), s.zero, s.mbs, s.mb,
                       s.recompute)
end

local function tempfile(text)
  local path = os.tmpname() .. ".lua"
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

describe("the walk, enumerated by hand", function()
  -- 4 devices, sp off, zero 0, cp 1 pinned; tp over divisors of 4 up to the 8 KV heads,
  -- pp over divisors of 4/tp up to 4 layers, dp = 4/(tp*pp), mbs over divisors of
  -- gbs/(pp*dp), vpp over 1..(4 + 2)/pp at pp > 1 (a layer per chunk, the embedding and the
  -- loss counted as Megatron's accounting flags count them: pp 2 x vpp 3 is 4 + 2 layers in
  -- 6 chunks of 1, both flags on, walked as the "account" layout).
  local pins = {sp = false, zero = 0, cp = 1}

  it("counts every candidate of a batch of 4 (all valid)", function()
    -- tp1: pp1 (dp4, mbs1) 1; pp2 (dp2, mbs1, vpp 1-3) 3; pp4 (dp1, mbs1) 1
    -- tp2: pp1 (dp2, mbs 1,2) 2; pp2 (dp1, mbs 1,2, vpp 1-3) 6
    -- tp4: pp1 (dp1, mbs 1,2,4) 3                                          = 16
    local args = {}
    for k, v in pairs(pins) do args[k] = v end
    local ranked, info = run(args)
    assert.is_table(ranked)
    assert.equal(16, info.tested)
    assert.equal(16, info.priced)
    assert.equal(0, info.refused_total)
    assert.equal(16, info.fit)
    assert.equal(16, #ranked)
    local seen = {}
    for _, r in ipairs(ranked) do
      local s = r.strategy
      assert.equal(4, s.dp * s.tp * s.pp * s.cp)
      assert.equal(4, s.dp * s.mb * s.mbs)
      assert.is_nil(seen[key_of(s)])
      seen[key_of(s)] = true
    end
  end)

  it("labels what a batch of 6 refuses", function()
    -- tp1 pp1: dp4, mbs1, mb = 6//4 = 1, 4*1*1 ~= 6          -> global batch
    -- tp1 pp2: dp2, mb3: vpp1 fits; vpp2, 3 need mb % pp == 0 -> schedule (2)
    -- tp1 pp4: dp1, mb6                                        1
    -- tp2 pp1: dp2, mbs 1,3                                    2
    -- tp2 pp2: dp1, mbs 1,3 (mb 6, 2) x vpp 1,2,3              6
    -- tp4 pp1: dp1, mbs 1,2,3,6                                4   -> 17 tested, 14 priced
    local ranked, info = run{sp = false, zero = 0, cp = 1, global_batch = 6}
    assert.is_table(ranked)
    assert.equal(17, info.tested)
    assert.equal(3, info.refused_total)
    assert.equal(1, info.refused["global batch"])
    assert.equal(2, info.refused["schedule"])
    assert.equal(0, info.refused["filtered out"])  -- the user's filters alone
    assert.equal(14, info.priced)
    for _, r in ipairs(ranked) do assert.equal(6, r.strategy.dp * r.strategy.mb * r.strategy.mbs) end
  end)

  it("searches sequence parallelism only where tp > 1", function()
    -- the 16 candidates above; the 11 with tp > 1 (tp2: 8, tp4: 3) run with sp on and off
    local _, off = run{sp = false, zero = 0, cp = 1}
    local _, auto = run{sp = "auto", zero = 0, cp = 1}
    -- tp = 1 candidates: 5; tp > 1: 11 -> 5 + 2 * 11
    assert.equal(5 + 2 * 11, auto.tested)
    assert.equal(16, off.tested)
  end)

  it("counts degrees over their bounds and drops what is over memory", function()
    local ranked, _, info = run{tp = {16, 32}, devices = 16, global_batch = 16, sp = false, zero = 0}
    assert.is_nil(ranked)
    assert.is_true(info.refused["degree out of bounds"] > 0)
    assert.equal(0, info.priced)
    -- one pinned value that no candidate can take is refused before the walk, with the rule
    local none, why, pinfo = run{tp = 16, devices = 16, global_batch = 16, sp = false, zero = 0}
    assert.is_nil(none)
    assert.equal("pinned degrees refused (degree out of bounds): tp 16 does not divide 8 heads", why)
    assert.equal("degree out of bounds", pinfo.pinned_refused)
    local r2, msg, info2 = run{max_mem = 1e6, sp = false, zero = 0, cp = 1}
    assert.is_nil(r2)
    assert.matches("no strategy fits", msg)
    assert.equal(16, info2.refused["over memory"])
    assert.equal(5, #info2.misses)
    for i = 2, #info2.misses do
      assert.is_true(info2.misses[i - 1].over_bytes <= info2.misses[i].over_bytes)
    end
    assert.is_true(info2.misses[1].over_bytes > 0)
  end)

  it("states the bounds before the loops", function()
    local _, info = run{}
    assert.equal(4, info.bounds.tp)   -- 8 KV heads, 4 devices
    assert.equal(4, info.bounds.pp)   -- 4 layers
    assert.equal(1, info.bounds.ep)   -- no experts
  end)
end)

describe("pinned, candidate and auto dimensions", function()
  local args = {model = "llama3.1-8b", device = "h100", devices = 16, global_batch = 64,
                seq_len = 4096, jobs = 1, top = 100000}
  local function with(t)
    local a = {}
    for k, v in pairs(args) do a[k] = v end
    for k, v in pairs(t) do a[k] = v end
    return a
  end

  it("keeps a pinned degree on every result", function()
    local ranked = assert(nd.search(with{tp = 2}))
    for _, r in ipairs(ranked) do assert.equal(2, r.strategy.tp) end
  end)

  it("walks only the listed candidates", function()
    local ranked = assert(nd.search(with{tp = {1, 4}}))
    local seen = {}
    for _, r in ipairs(ranked) do seen[r.strategy.tp] = true end
    assert.same({[1] = true, [4] = true}, seen)
  end)

  it("lets auto reach every divisor within the bound", function()
    local ranked, info = assert(nd.search(with{tp = "auto"}))
    local seen = {}
    for _, r in ipairs(ranked) do seen[r.strategy.tp] = true end
    assert.equal(8, info.bounds.tp)
    for _, t in ipairs({1, 2, 4, 8}) do assert.is_true(seen[t], "tp " .. t) end
  end)

  it("searches recompute as a dimension", function()
    -- without flash attention selective keeps less than none: all four modes
    local ranked = assert(nd.search(with{recompute = "auto", tp = 2, pp = 2, flash_attention = false}))
    local modes = {}
    for _, r in ipairs(ranked) do modes[r.strategy.recompute] = true end
    assert.same({none = true, selective = true, full = true, per_layer = true}, modes)
    -- with it (the default) selective of the attention core is none again, and a per-layer
    -- plan that recomputes nothing is its none candidate: auto shows each run once
    ranked = assert(nd.search(with{recompute = "auto", tp = 2, pp = 2}))
    modes = {}
    local seen = {}
    for _, r in ipairs(ranked) do
      modes[r.strategy.recompute] = true
      local s = r.strategy
      local key = table.concat({s.dp, s.tp, s.pp, s.vpp, s.cp, s.ep, s.etp, tostring(s.sp), s.zero,
                                s.mbs, string.format("%.9g", r.step_time_s),
                                string.format("%.9g", r.peak_memory_bytes)}, ",")
      assert.is_nil(seen[key], "the same run twice: " .. key)
      seen[key] = true
    end
    assert.is_nil(modes.selective)
    assert.is_true(modes.none and modes.full and true or false)
    local only = assert(nd.search(with{recompute = "full", tp = 2, pp = 2}))
    for _, r in ipairs(only) do assert.equal("full", r.strategy.recompute) end
  end)

  it("gives per_layer candidates their own plan under the budget, never slower than a uniform mode", function()
    local function best(mode, mem)
      local a = with{recompute = mode, tp = 2, pp = 2}
      a.max_mem = mem
      local ranked = nd.search(a)
      return ranked and ranked[1]
    end
    for _, mem in ipairs({"80GiB", "30GiB", "20GiB"}) do
      local plan = best("per_layer", mem)
      for _, mode in ipairs({"none", "selective", "full"}) do
        local uniform = best(mode, mem)
        if uniform then
          assert.is_truthy(plan, mem)
          assert.is_true(plan.step_time_s <= uniform.step_time_s * (1 + 1e-12), mem .. " " .. mode)
        end
      end
    end
  end)

  it("post-filters the derived dp and mb, keeping the best outside when none is left", function()
    local ranked, info = assert(nd.search(with{dp = {2}}))
    assert.is_true(info.postfiltered > 0)
    for _, r in ipairs(ranked) do assert.equal(2, r.strategy.dp) end
    local all = assert(nd.search(with{}))
    local count = 0
    for _, r in ipairs(all) do if r.strategy.dp == 2 then count = count + 1 end end
    assert.equal(count, #ranked)
    local none, info2 = assert(nd.search(with{dp = {3}}))  -- 3 divides neither 16 nor 64
    assert.equal(1, #none)
    assert.equal(1, #info2.warnings)
    assert.equal(all[1].strategy.dp, none[1].strategy.dp)
    assert.equal(all[1].step_time_s, none[1].step_time_s)
  end)

  it("raises on misuse", function()
    assert.has_error(function() nd.search(with{tp = "many"}) end)
    assert.has_error(function() nd.search(with{bogus = 1}) end)
    assert.has_error(function() nd.search(with{recompute = "sometimes"}) end)
  end)
end)

describe("determinism across threads", function()
  local args = {model = "qwen3-30b-a3b", device = "h100", devices = 32, global_batch = 128,
                seq_len = 4096, recompute = "auto", top = 200}
  it("gives the same ranking, counts and CSV for -j 1, 2 and 5", function()
    local outs = {}
    for _, j in ipairs({1, 2, 5}) do
      local a = {}
      for k, v in pairs(args) do a[k] = v end
      a.jobs = j
      a.csv = os.tmpname()
      local ranked, info = assert(nd.search(a))
      local f = assert(io.open(a.csv, "rb"))
      local csv = f:read("a")
      f:close()
      os.remove(a.csv)
      local lines = {}
      for i, r in ipairs(ranked) do lines[i] = key_of(r.strategy) .. string.format(" %.17g %.17g", r.step_time_s, r.peak_memory_bytes) end
      outs[j] = {table.concat(lines, "\n"), info.tested, info.priced, info.fit, info.refused_total, csv}
    end
    assert.is_true(outs[1][3] > 1000)  -- enough chunks to spread over the threads
    assert.same(outs[1], outs[2])
    assert.same(outs[1], outs[5])
  end)

  it("keeps the same best rows whatever the keep limit", function()
    local a = {}
    for k, v in pairs(args) do a[k] = v end
    a.jobs, a.top, a.keep = 2, 7, 7
    local small_keep = assert(nd.search(a))
    a.keep = 100000
    local big_keep = assert(nd.search(a))
    for i = 1, 7 do assert.equal(key_of(big_keep[i].strategy), key_of(small_keep[i].strategy)) end
  end)
end)

describe("policies in nd.search", function()
  local base = {model = "llama3.1-8b", device = "h100", devices = 16, global_batch = 64,
                seq_len = 4096, jobs = 2, top = 100000}
  local function with(t)
    local a = {}
    for k, v in pairs(base) do a[k] = v end
    for k, v in pairs(t) do a[k] = v end
    return a
  end

  it("refuses what admit rejects as filtered out, before pricing", function()
    local _, plain = assert(nd.search(with{}))
    local ranked, info = assert(nd.search(with{policy = {admit = function(c) return c.tp == 2 end}}))
    for _, r in ipairs(ranked) do assert.equal(2, r.strategy.tp) end
    assert.equal(plain.tested, info.tested)
    -- with admit, the candidates equivalent to others are priced too (a policy may tell
    -- them apart); without, they are counted apart
    assert.equal(0, info.equivalent)
    assert.equal(plain.refused["filtered out"] + (plain.priced + plain.equivalent - info.priced),
                 info.refused["filtered out"])
  end)

  it("ranks by the objective", function()
    local ranked = assert(nd.search(with{policy = {objective = function(e) return -e.peak_memory_bytes end}}))
    for i = 2, #ranked do
      assert.is_true(ranked[i - 1].peak_memory_bytes >= ranked[i].peak_memory_bytes)
    end
  end)

  it("hands objective rows whose strategy and parts are there when read", function()
    local seen, listed = {}, nil
    local ranked = assert(nd.search(with{policy = {
      objective = function(e)
        seen[#seen + 1] = e
        if not listed then  -- pairs lists the nested tables too
          listed = {}
          for k, v in pairs(e) do listed[k] = type(v) end
        end
        return e.time_parts_s.forward * 0 + e.step_time_s
      end,
      rank = function() return {seen[1], seen[2]} end,  -- rows an objective was handed
    }}))
    assert.equal("table", listed.strategy)
    assert.equal("table", listed.memory_parts_bytes)
    assert.equal("table", listed.time_parts_s)
    assert.equal("number", listed.step_time_s)
    local e = seen[1]
    assert.is_true(e.strategy.tp >= 1 and e.strategy.dp >= 1)
    assert.equal(e.peak_memory_bytes, e.memory_parts_bytes.peak)
    assert.equal("ndplan.search_row", getmetatable(e))
    e.strategy = "mine"  -- an assigned field is the caller's
    assert.equal("mine", e.strategy)
    -- returned from rank, they are copied whole (the nested tables built in the guard)
    assert.equal(2, #ranked)
    assert.equal(seen[2].strategy.tp, ranked[2].strategy.tp)
    assert.equal(seen[2].time_parts_s.forward, ranked[2].time_parts_s.forward)
  end)

  it("drops what the objective returns nil for", function()
    local ranked, info = assert(nd.search(with{policy = {objective = function(e)
      if e.strategy.pp == 1 then return nil end
      return e.step_time_s
    end}}))
    assert.is_true(info.dropped > 0)
    for _, r in ipairs(ranked) do assert.is_true(r.strategy.pp > 1) end
  end)

  it("stops on a failing hook with the policy file and line", function()
    for _, hook in ipairs({"admit", "objective", "setup", "rank"}) do
      local path = tempfile("return {\n  " .. hook .. " = function()\n"
                            .. "    error('broken " .. hook .. "')\n  end,\n}\n")
      local ok, err = pcall(nd.search, with{policy = path})
      os.remove(path)
      assert.is_false(ok)
      assert.matches(path:gsub("%p", "%%%0") .. ":3: broken " .. hook, err)
      assert.matches("^policy error", err)
    end
  end)

  it("stops on a hook that returns the wrong type", function()
    local ok, err = pcall(nd.search, with{policy = {objective = function() return "fast" end}})
    assert.is_false(ok)
    assert.matches("^policy error in objective: objective: expected a number or nil, got string", err)
  end)

  it("rejects a policy with an unknown hook or a bad file", function()
    local r, err = nd.search(with{policy = {admitt = function() end}})
    assert.is_nil(r)
    assert.matches("unknown hook 'admitt'", err)
    local path = tempfile("return {\n  admit = function( end\n}\n")
    local r2, err2 = nd.search(with{policy = path})
    os.remove(path)
    assert.is_nil(r2)
    assert.matches(":2:", err2)
    local r3, err3 = nd.search(with{policy = "no-such-policy"})
    assert.is_nil(r3)
    assert.matches("bundled: .*cheapest", err3)
  end)
end)

describe("re-pricing a searched per-layer plan", function()
  it("gives the plan the walk priced (one set of selective switches), not a refined one", function()
    local search = require "ndplan.search"
    local args = {model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64,
                  seq_len = 8192, tp = 1, pp = 2, vpp = 1, cp = 1, zero = 1, mbs = 1,
                  recompute = {"per_layer"}, schedule = "1f1b",
                  max_mem = "50GiB", jobs = 1, top = 1}
    local ranked, info = assert(nd.search(args))
    local detail = search.detail(ranked[1], info)
    assert.is_true(math.abs(detail.step_time_s - ranked[1].step_time_s)
                   <= 1e-9 * ranked[1].step_time_s)
    assert.is_nil(detail.strategy.layer_selective_ops)
    -- ndplan recompute refines the same strategy with a switch set per layer
    local refined = assert(nd.estimate{model = "llama3.1-8b", device = "h100", devices = 8,
                                       global_batch = 64, seq_len = 8192, pp = 2, zero = 1,
                                       recompute = "per_layer", max_mem = "50GiB"})
    assert.is_true(refined.step_time_s < detail.step_time_s)
  end)
end)

describe("recompute = megatron in the search", function()
  it("ranks each candidate by the fastest form Megatron can state, as nd.estimate prices it",
     function()
    local search = require "ndplan.search"
    local args = {model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64,
                  seq_len = 8192, recompute = {"megatron", "per_layer"}, max_mem = "40GiB",
                  jobs = 1, top = 20}
    local ranked, info = assert(nd.search(args))
    local seen = 0
    for _, row in ipairs(ranked) do
      if row.strategy.recompute == "megatron" then
        seen = seen + 1
        local d = search.detail(row, info)
        assert.is_true(math.abs(d.step_time_s - row.step_time_s) <= 1e-9 * row.step_time_s)
        assert.is_table(d.megatron)
        assert.is_true(d.peak_memory_bytes <= info.budget_bytes)
        -- never faster than the free per-layer plan of the same strategy
        local a = require("ndplan.strategy").row_args(row.strategy, info)
        a.recompute, a.recompute_modes = "per_layer", {"none", "selective", "full"}
        local free = assert(nd.estimate(a))
        assert.is_true(free.step_time_s <= d.step_time_s * (1 + 1e-9))
      end
    end
    assert.is_true(seen > 0)
  end)
end)
