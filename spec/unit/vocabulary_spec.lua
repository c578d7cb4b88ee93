-- One vocabulary (issue 12): every list the Lua library used to keep by hand now comes from
-- the core (ndplan.c.estimate.names()), and each former copy is checked here against the
-- core, and the core against the list the copy held (so neither can drift unseen).
local nd = require "ndplan"
local core = require "ndplan.c.estimate"
require("ndplan.config.stack").DEFAULT = "none"

local names = core.names()

local function set_of(list)
  local s = {}
  for _, x in ipairs(list) do s[x] = true end
  return s
end

local function keys_of(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

local JOB = {model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 16,
             seq_len = 1024}
local function with(extra)
  local a = {}
  for k, v in pairs(JOB) do a[k] = v end
  for k, v in pairs(extra or {}) do a[k] = v end
  return a
end

describe("the core's name lists", function()
  it("are the lists the Lua copies held", function()
    -- the former copies: strategy_cli.lua, calibrate.lua, plots_base.lua, summary.lua,
    -- search.lua (DIMS), lsearch.c (memory parts)
    assert.same({"1f1b", "interleaved", "gpipe", "zb", "dualpipe"}, names.schedules)
    assert.same({"none", "selective", "full"}, names.recompute)
    assert.same({"none", "selective", "full", "per_layer", "megatron"}, names.search_recompute)
    assert.same({"none", "selective", "full", "offload", "variants"}, names.plan_modes)
    assert.same({"attn_core", "norms", "act", "mla_up", "moe_dispatch", "alt_mm"}, names.ops)
    assert.same({"forward", "backward", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm",
                 "dp_comm", "optimizer", "bubble", "offload"}, names.time_parts)
    assert.same({"weights", "grads", "optimizer", "activations", "buffers", "fragmentation",
                 "reserve"}, names.memory_parts)
    assert.same({"dp", "tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero", "mb", "mbs",
                 "recompute"}, names.dims)
    assert.same({"1f1b", "interleaved"}, names.megatron_schedules)
  end)

  it("are what the library iterates", function()
    local pb = require "ndplan.out.plots_base"
    assert.same(names.memory_parts, pb.MEMORY_PARTS)
    assert.same(names.time_parts, pb.TIME_PARTS)
    assert.same(names.dims, require("ndplan.search").DIMS)
    local help = {}
    for _, o in ipairs(require("ndplan.cli.options").OPTIONS) do help[o.name] = o.help end
    assert.equal("1f1b, interleaved, gpipe, zb or dualpipe", help.schedule)
    assert.matches(table.concat(names.ops, ","), help["selective-ops"], 1, true)
  end)

  it("name what a result carries: its time parts and a search row's memory parts", function()
    local r = assert(nd.estimate(with{tp = 2}))
    assert.same(names.time_parts, (function()
      local ks = keys_of(r.time_parts_s)
      local want = {}
      for _, k in ipairs(names.time_parts) do want[#want + 1] = k end
      table.sort(want)
      assert.same(want, ks)
      return names.time_parts
    end)())
    local ranked = assert(nd.search(with{tp = 2, pp = 1, cp = 1, mbs = 1}))
    local want = {"peak"}
    for _, k in ipairs(names.memory_parts) do want[#want + 1] = k end
    table.sort(want)
    assert.same(want, keys_of(ranked[1].memory_parts_bytes))
  end)

  it("refuse a wrong per-layer mode with the core's list", function()
    local ok, err = pcall(nd.estimate, with{recompute = "per_layer", recompute_modes = {"bogus"}})
    assert.is_false(ok)
    assert.matches("expected none, selective, full, offload or variants", err, 1, true)
  end)
end)

describe("the strategy keys", function()
  it("are every key nd.estimate reads, and no other", function()
    local known = set_of(names.strategy_keys)
    for _, k in ipairs(names.strategy_keys) do
      -- a value of the wrong type raises or refuses, but never as an unknown argument
      local ok, err = pcall(nd.estimate, with{[k] = {}})
      assert.is_falsy(not ok and tostring(err):match("unknown argument"), k)
    end
    assert.is_nil(known.bogus)
    local ok, err = pcall(nd.estimate, with{bogus = 1})
    assert.is_false(ok)
    assert.matches("unknown argument 'bogus'", err, 1, true)
  end)

  it("include every space key nd.search takes besides its dimensions", function()
    local known = set_of(names.strategy_keys)
    for _, k in ipairs(names.space_keys) do
      assert.is_true(known[k], k)
      local ok, err = pcall(nd.search, with{[k] = {}})
      assert.is_falsy(not ok and tostring(err):match("unknown"), k)
    end
  end)
end)

describe("the cost descriptors", function()
  it("are the named costs, with the defaults the estimator uses", function()
    local defaults = core.costs()
    local listed = {}
    for _, f in ipairs(names.costs) do
      listed[#listed + 1] = f.name
      assert.equal(f.default, defaults[f.name], f.name)
      assert.is_true(f.lo <= f.default and f.default <= f.hi, f.name)
      assert.is_string(f.doc)
    end
    table.sort(listed)
    assert.same(keys_of(defaults), listed)
  end)

  it("bound what the estimator accepts, naming the field", function()
    for _, f in ipairs(names.costs) do
      assert.is_truthy(nd.estimate(with{costs = {[f.name] = f.hi}}), f.name)
      local r, why = nd.estimate(with{costs = {[f.name] = f.hi * 1.5 + 1}})
      assert.is_nil(r)
      assert.equal(string.format("costs.%s: expected a number in %s0, %g], got %g", f.name,
                                 f.lo_open and "(" or "[", f.hi, f.hi * 1.5 + 1), why)
      if f.lo_open then  -- an open lower end refuses the end itself
        r, why = nd.estimate(with{costs = {[f.name] = 0}})
        assert.is_nil(r)
        assert.matches("expected a number in %(0,", why)
      end
    end
  end)
end)

describe("the efficiency descriptors", function()
  local device = require "ndplan.config.device"

  it("are the fields a device file takes, in its units", function()
    local h100 = assert(nd.device("h100"))
    local example = {fraction = 0.5, flop = "1GFLOP", time = "10us", keys = 512}
    local si = {fraction = 0.5, flop = 1e9, time = 10e-6, keys = 512}
    for _, f in ipairs(names.efficiency) do
      local d = assert(device.with_efficiency(h100, {[f.name] = example[f.unit]}))
      assert.near(si[f.unit], d.efficiency[f.name], 1e-9 * si[f.unit], f.name)
    end
    local d, err = device.with_efficiency(h100, {bogus = 1})
    assert.is_nil(d)
    assert.matches("unknown key 'efficiency.bogus'", err, 1, true)
    local e = h100:totable().efficiency
    assert.same(keys_of(e), (function()
      local l = {}
      for _, f in ipairs(names.efficiency) do l[#l + 1] = f.name end
      table.sort(l)
      return l
    end)())
  end)

  it("give calibrate its fittable fields, as calibrate.lua used to list them", function()
    local C = require "ndplan.fit.calibrate"
    assert.same({
      {name = "gemm", kind = "fraction", lo = 0.01, hi = 1, scale = 0.01},
      {name = "gemm_half_size", kind = "flop", lo = 0, hi = 1e13, scale = 1e6},
      {name = "hbm", kind = "fraction", lo = 0.01, hi = 1, scale = 0.01},
      {name = "scale_up", kind = "fraction", lo = 0.01, hi = 1, scale = 0.01},
      {name = "scale_out", kind = "fraction", lo = 0.01, hi = 1, scale = 0.01},
      {name = "kernel_overhead", kind = "time", lo = 0, hi = 0.01, scale = 1e-7},
    }, C.FIELDS)
  end)

  it("default gemm_half_size in the core: 1 us of work at the bf16 peak", function()
    local cdev = require "ndplan.c.device"
    assert.equal(-1, cdev.defaults().efficiency.gemm_half_size)  -- derived
    local t = assert(nd.device("h100")):totable()
    t.efficiency.gemm_half_size = nil
    local d = assert(cdev.new(t))
    assert.equal(t.peak_flops.bf16 * 1e-6, d.efficiency.gemm_half_size)
  end)
end)

describe("calibrate's CSV columns", function()
  it("take every schedule the core knows (dualpipe was refused)", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write("model,devices,global_batch,seq_len,pp,schedule,step_time_s\n",
            "llama3.1-8b,8,64,2048,2,dualpipe,1.5\n")
    f:close()
    local cases, err = require("ndplan.fit.calibrate").read_runs(path)
    os.remove(path)
    assert.is_nil(err)
    assert.equal("dualpipe", cases[1].strategy.schedule)
  end)
end)

describe("the layout rules the Lua copies restated", function()
  it("the exporters' even layout is the core's, and the rule Megatron-Core's split states", function()
    local export = require "ndplan.export"
    for body = 1, 90, 7 do
      for mtp = 0, 2 do
        for pp = 1, math.min(body, 12) do
          local got = export.even_layout(body, mtp, pp)
          -- the rule: body // pp each, the remainder one more on stages 2..; MTP on the last
          local base, extra = body // pp, body % pp
          for s = 1, pp do
            local want = base + ((s >= 2 and s - 1 <= extra) and 1 or 0) + (s == pp and mtp or 0)
            assert.equal(want, got[s], string.format("%d+%d over %d, stage %d", body, mtp, pp, s))
          end
        end
      end
    end
  end)

  it("the pipeline chart's warm-up is Megatron's count", function()
    for pp = 1, 8 do
      for mb = 1, 12 do
        for s = 0, pp - 1 do
          assert.equal(math.min(pp - s - 1, mb), core.warmup("1f1b", pp, 1, mb, s))
          for v = 2, 3 do
            -- Megatron's num_warmup_microbatches: (pp - rank - 1) * 2 + (v - 1) * pp
            assert.equal(math.min((pp - s - 1) * 2 + (v - 1) * pp, mb * v),
                         core.warmup("interleaved", pp, v, mb, s))
          end
        end
      end
    end
    assert.has_error(function() core.warmup("bogus", 2, 1, 4, 0) end)
    assert.has_error(function() core.warmup("1f1b", 2, 1, 4, 2) end)
  end)
end)

describe("one strategy shape", function()
  local function round_trip(extra)
    local a = with(extra)
    local r = assert(nd.estimate(a))
    local b = with{max_mem = a.max_mem, devices = a.devices, global_batch = a.global_batch,
                   seq_len = a.seq_len}
    for k, v in pairs(r.strategy) do b[k] = v end
    local r2 = assert(nd.estimate(b))
    assert.equal(r.step_time_s, r2.step_time_s)
    assert.equal(r.peak_memory_bytes, r2.peak_memory_bytes)
    -- the same strategy; layout_from says where the layout came from: now stage_layers
    r.strategy.layout_from, r2.strategy.layout_from = nil, nil
    assert.same(r.strategy, r2.strategy)
  end

  it("result.strategy passes straight back to nd.estimate", function()
    round_trip{tp = 2, pp = 2, sp = true, recompute = "selective"}
    round_trip{tp = 2, pp = 2, vpp = 2, global_batch = 32}
    round_trip{pp = 4, zero = 3, devices = 8}
    round_trip{tp = 2, pp = 2, dp_shard = 1, zero = 3}
    round_trip{pp = 3, devices = 6, global_batch = 12}
    round_trip{pp = 2, devices = 8, account_for_embedding_in_pipeline_split = true,
               account_for_loss_in_pipeline_split = true, global_batch = 16}
    round_trip{pp = 2, decoder_first_pipeline_num_layers = 15}
    round_trip{tp = 2, pp = 2, recompute = "per_layer", max_mem = "45GiB", seq_len = 8192}
    round_trip{precision = "fp8", tp = 2}
  end)

  it("a search row prices again as the walk priced it (strategy.row_args)", function()
    local ranked, info = assert(nd.search(with{devices = 16, global_batch = 64}))
    local strategy = require "ndplan.strategy"
    for i = 1, math.min(3, #ranked) do
      local a = strategy.row_args(ranked[i].strategy, info)
      a.recompute = ranked[i].strategy.recompute
      local r = assert(nd.estimate(a))
      assert.near(ranked[i].step_time_s, r.step_time_s, 1e-9 * r.step_time_s)
    end
  end)
end)

describe("\"off\"", function()
  it("is the command line's word for recompute none, and only the command line's", function()
    for _, f in ipairs({nd.estimate, nd.search}) do
      local ok, err = pcall(f, with{recompute = "off"})
      assert.is_false(ok)
      assert.matches("recompute: expected none, selective", err, 1, true)
    end
    local ok, err = pcall(nd.estimate, with{recompute = "per_layer", recompute_modes = {"off"}})
    assert.is_false(ok)
    assert.matches("expected none, selective, full, offload or variants", err, 1, true)
    local run = require("spec.support.run").run
    local e = run({"estimate", "-m", "llama3.1-8b", "-d", "8", "-b", "16", "--stack", "none",
                   "--recompute", "off", "--json"})
    assert.equal(0, e.code, e.err)
    assert.equal("none", nd.json.decode(e.out).strategy.recompute)
    local s = run({"search", "-m", "llama3.1-8b", "-d", "8", "-b", "16", "--stack", "none",
                   "--recompute", "off,full", "--top", "1", "--json"})
    assert.equal(0, s.code, s.err)
  end)
end)
