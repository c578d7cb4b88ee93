-- The search's recipe and HSDP dimensions (issue 13): a list of precision recipes walked as
-- labelled candidates, HSDP's shard group walked over the divisors of DP (or a list), each
-- row re-priced by nd.estimate to the same step time and peak; the layout variants that
-- carry Megatron's accounting flags. Mechanics, not fidelity: the stack is none.
local nd = require "ndplan"
local search = require "ndplan.search"
require("ndplan.config.stack").DEFAULT = "none"

local JOB = {model = "llama3.1-8b", device = "h100", devices = 16, global_batch = 64,
             seq_len = 2048, recompute = "none", top = 5, keep = 100000, jobs = 1,
             exhaustive = true}

local function args(extra)
  local a = {}
  for k, v in pairs(JOB) do a[k] = v end
  for k, v in pairs(extra or {}) do a[k] = v end
  return a
end

local function run(extra)
  local ranked, info = nd.search(args(extra))
  assert(ranked, info)
  return ranked, info
end

-- every kept row as "degrees -> step time, peak", for the rows that pass keep(row)
local function by_degrees(info, keep)
  local out, n = {}, 0
  for i = 1, #info.results do
    local r = info.results[i]
    local s = r.strategy
    if keep(r) then
      local key = string.format("%d %d %d %d %d %s %d %d %s %s", s.dp, s.tp, s.pp, s.vpp, s.cp,
                                tostring(s.sp), s.zero, s.mbs, s.layout, s.recompute)
      out[key] = {r.step_time_s, r.peak_memory_bytes}
      n = n + 1
    end
  end
  return out, n
end

describe("the search walks a list of precision recipes", function()
  it("as one candidate per recipe, each priced as the search of that recipe alone", function()
    local _, bf = run({precision = "bf16"})
    local _, f8 = run({precision = "fp8:tensorwise"})
    local ranked, both = run({precision = {"fp8:tensorwise", "bf16"}})
    assert.equal(bf.tested + f8.tested, both.tested)
    assert.equal(bf.priced + f8.priced, both.priced)
    assert.equal(bf.fit + f8.fit, both.fit)
    for name, alone in pairs({bf16 = bf, ["fp8:tensorwise"] = f8}) do
      local want = by_degrees(alone, function() return true end)
      local got, n = by_degrees(both, function(r) return r.strategy.precision == name end)
      assert.is_true(n > 0, name)
      assert.same(want, got, name)
    end
    -- FP8 GEMMs run at twice the BF16 peak on H100: the best row is an FP8 one
    assert.equal("fp8:tensorwise", ranked[1].strategy.precision)
    assert.is_true(ranked[1].step_time_s < (select(1, run({precision = "bf16"})))[1].step_time_s)
  end)

  it("prices each ranked row again under its own recipe (search.detail)", function()
    local ranked, info = run({precision = {"bf16", "fp8:tensorwise"}, pp = 2, tp = 2, top = 1000})
    local seen = {}
    for _, r in ipairs(ranked) do
      local d = search.detail(r, info)
      assert.equal(r.strategy.precision, d.precision.recipe)
      assert.near(r.step_time_s, d.step_time_s, 1e-9 * r.step_time_s)
      assert.near(r.peak_memory_bytes, d.peak_memory_bytes, 1e-6 * r.peak_memory_bytes)
      seen[r.strategy.precision] = true
    end
    assert.is_true(seen.bf16 and seen["fp8:tensorwise"])
  end)

  it("refuses a listed recipe the device has no peak for, before the walk", function()
    local ranked, why = nd.search(args({precision = {"bf16", "fp8:mxfp8"}}))
    assert.is_nil(ranked)
    assert.matches("fp8:mxfp8 runs its GEMMs at mxfp8 and the device H100 has no mxfp8 peak", why)
    assert.has_error(function() nd.search(args({precision = {"bf16", "fp9"}})) end)
    assert.has_error(function() nd.search(args({precision = {}})) end)
  end)

  it("ranks the same with the bounds as without them", function()
    local a = args({precision = {"bf16", "fp8", "fp8:blockwise"}, recompute = "auto", keep = 3})
    local r1 = assert(nd.search(a))
    a.exhaustive = false
    local r2, i2 = assert(nd.search(a))
    assert.is_true(i2.pruned_time + i2.pruned_memory > 0)
    for i = 1, #r1 do assert.equal(search.encode_json(r1[i]), search.encode_json(r2[i])) end
  end)
end)

describe("the search walks HSDP's shard group", function()
  it("over the divisors of each DP at ZeRO 1-3, all of DP at ZeRO 0", function()
    local _, full = run({zero = {0, 1, 3}})
    local _, auto = run({zero = {0, 1, 3}, dp_shard = "auto"})
    local _, z0 = run({zero = 0, dp_shard = "auto"})
    local _, z0full = run({zero = 0})
    assert.equal(z0full.tested, z0.tested)  -- ZeRO 0 shards nothing: one shard group
    assert.is_true(auto.tested > full.tested)
    local hsdp = 0
    for i = 1, #auto.results do
      local s = auto.results[i].strategy
      assert.equal(0, s.dp % s.dp_shard)
      if s.zero == 0 then assert.equal(s.dp, s.dp_shard) end
      if s.dp_shard < s.dp then hsdp = hsdp + 1 end
    end
    assert.is_true(hsdp > 0)
    -- the rows with all of DP are the search without the dimension
    local want = by_degrees(full, function() return true end)
    local got = by_degrees(auto, function(r) return r.strategy.dp_shard == r.strategy.dp end)
    assert.same(want, got)
  end)

  it("shards the optimizer over the shard group only, as nd.estimate prices it", function()
    -- B200's 179 GiB hold an 8B model's unsharded Adam states (dp_shard 1) under full recompute
    local ranked, info = run({device = "b200", recompute = "full", zero = 1, dp_shard = {1, 2},
                              tp = 1, pp = 1, cp = 1, mbs = 1, top = 10})
    local rows = {}
    for i = 1, #info.results do
      local s = info.results[i].strategy
      rows[s.dp_shard] = info.results[i]
    end
    assert.equal(16, rows[1].strategy.dp)
    assert.is_nil(rows[16])  -- a list walks only what it lists
    -- Adam's states over 2 ranks instead of 1: half of them per device
    local o1, o2 = rows[1].memory_parts_bytes.optimizer, rows[2].memory_parts_bytes.optimizer
    assert.near(o1 / 2, o2, 1e-6 * o1)
    for _, r in ipairs(ranked) do
      local d = search.detail(r, info)
      assert.equal(r.strategy.dp_shard, d.strategy.dp_shard)
      assert.equal("dp_shard", d.strategy.sharded_over.group)
      assert.near(r.step_time_s, d.step_time_s, 1e-9 * r.step_time_s)
      assert.near(r.peak_memory_bytes, d.peak_memory_bytes, 1e-6 * r.peak_memory_bytes)
    end
  end)

  it("under --trainer, only where the trainer's file states HSDP (torchtitan)", function()
    local function hsdp_rows(trainer)
      local _, info = run({trainer = trainer, zero = {1, 3}, tp = 2, dp_shard = "auto"})
      local n = 0
      for i = 1, #info.results do
        local s = info.results[i].strategy
        if s.dp_shard < s.dp then n = n + 1 end
      end
      return n, info
    end
    local n, info = hsdp_rows("megatron")
    assert.equal(0, n)
    assert.is_true(info.refused["filtered out"] > 0)
    assert.is_true(hsdp_rows("torchtitan") > 0)
  end)

  it("walks the replicas (dp_replicate) as the shard groups DP / R", function()
    -- 16 devices, tp 1 pp 1 cp 1: dp 16; replicas {2, 4} are the shard groups {8, 4}
    local fixed = {zero = 1, tp = 1, pp = 1, cp = 1}
    local function rows(extra)
      local a = {}
      for k, v in pairs(fixed) do a[k] = v end
      for k, v in pairs(extra) do a[k] = v end
      local _, info = run(a)
      return by_degrees(info, function() return true end), info
    end
    local by_rep, info = rows({dp_replicate = {2, 4}})
    local by_shard = rows({dp_shard = {4, 8}})
    assert.same(by_shard, by_rep)
    local groups = {}
    for i = 1, #info.results do
      local s = info.results[i].strategy
      assert.equal(s.dp, s.dp_shard * s.dp_replicate)
      groups[s.dp_replicate] = s.dp_shard
    end
    assert.same({[2] = 8, [4] = 4}, groups)
    assert.is_truthy(table.concat(info.dims, " "):find("dp_replicate", 1, true))
    -- auto: every divisor, the same walk as dp_shard = "auto"
    assert.same(rows({dp_shard = "auto"}), rows({dp_replicate = "auto"}))
    -- both: the pairs both lists allow (shard 8 x replicate 2 only)
    local both = rows({dp_shard = {2, 8}, dp_replicate = {2, 4}})
    local n = 0
    for k in pairs(both) do n = n + 1; assert.truthy(by_rep[k]) end
    local _, binfo = rows({dp_shard = {2, 8}, dp_replicate = {2, 4}})
    for i = 1, #binfo.results do
      local s = binfo.results[i].strategy
      assert.equal(8, s.dp_shard)
      assert.equal(2, s.dp_replicate)
    end
    assert.is_true(n > 0)
  end)

  it("re-prices a walked replica count with nd.estimate", function()
    local ranked, info = run({zero = 1, tp = 1, pp = 1, cp = 1, dp_replicate = 4, top = 3})
    for _, r in ipairs(ranked) do
      assert.equal(4, r.strategy.dp_replicate)
      local d = search.detail(r, info)
      assert.equal(r.strategy.dp_shard, d.strategy.dp_shard)
      assert.near(r.step_time_s, d.step_time_s, 1e-9 * r.step_time_s)
    end
  end)

  it("refuses a shard group that is not a positive integer", function()
    assert.has_error(function() nd.search(args({dp_shard = 0})) end)
    assert.has_error(function() nd.search(args({dp_shard = {2, "x"}})) end)
    assert.has_error(function() nd.search(args({dp_replicate = 0})) end)
  end)
end)

-- The first strategy the search walks under each layout label, on pp stages (one device
-- each, four sequences per stage).
local function walked_layouts(pp)
  local _, info = run({pp = pp, vpp = 1, tp = 1, cp = 1, zero = 1, devices = pp,
                       global_batch = 4 * pp})
  local seen = {}
  for i = 1, #info.results do
    local s = info.results[i].strategy
    seen[s.layout] = seen[s.layout] or s
  end
  return seen
end

describe("the search walks Megatron's accounting flags", function()
  -- 32 layers over PP 3: uneven; 32 + 1 = 33 = 3 x 11 with either flag alone (Megatron
  -- takes each on its own: transformer_config.py:2370-2415 at d98e8a6), 32 + 2 = 34 with
  -- both does not divide. The embedding's split is the even one (the short chunk first), so
  -- the walk labels it by the flag; the loss's (the short chunk last) is its own candidate.
  local function walked() return walked_layouts(3) end

  it("walks each flag set Megatron accepts as its own labelled variant", function()
    local seen = walked()
    assert.is_nil(seen.account)  -- 34 does not divide over 3
    local e, l = assert(seen.account_embedding), assert(seen.account_loss)
    assert.is_true(e.account_for_embedding_in_pipeline_split)
    assert.is_nil(e.account_for_loss_in_pipeline_split)
    assert.is_true(l.account_for_loss_in_pipeline_split)
    assert.is_nil(l.account_for_embedding_in_pipeline_split)
  end)

  it("places the layers as Megatron builds them: the short chunk at the flag's end", function()
    local seen = walked()
    local function stage_layers(s)
      local a = args({pp = 3, vpp = 1, tp = 1, cp = 1, zero = 1, dp = 1, devices = 3,
                      global_batch = 12, mbs = s.mbs, recompute = "none"})
      for _, k in ipairs({"top", "keep", "jobs", "exhaustive"}) do a[k] = nil end
      a.account_for_embedding_in_pipeline_split = s.account_for_embedding_in_pipeline_split
      a.account_for_loss_in_pipeline_split = s.account_for_loss_in_pipeline_split
      local r = assert(nd.estimate(a))
      return r.strategy.stage_layers
    end
    assert.are.same({10, 11, 11}, stage_layers(seen.account_embedding))
    assert.are.same({11, 11, 10}, stage_layers(seen.account_loss))
  end)

  it("walks both flags under \"account\" where layers + 2 divide", function()
    -- 32 + 2 = 34 = 2 x 17 on PP 2: both flags; 33 does not divide over 2
    local _, info = run({pp = 2, vpp = 1, tp = 1, cp = 1, zero = 1, devices = 2,
                         global_batch = 8})
    local seen = {}
    for i = 1, #info.results do seen[info.results[i].strategy.layout] = true end
    assert.is_true(seen.even)  -- 32 over 2 divides: the even split alone
    assert.is_nil(seen.account)
    -- Llama 3.1 405B: 126 + 2 = 128 over PP 4 x VPP 2 = 8 chunks of 16 (127 does not divide)
    _, info = run({model = "llama3.1-405b", pp = 4, vpp = 2, tp = 1, cp = 1, zero = 1,
                   devices = 4, global_batch = 16, max_mem = "8TiB"})
    seen = {}
    for i = 1, #info.results do seen[info.results[i].strategy.layout] = info.results[i].strategy end
    assert.is_nil(seen.account_embedding)
    assert.is_nil(seen.account_loss)
    local s = assert(seen.account)
    assert.is_true(s.account_for_embedding_in_pipeline_split)
    assert.is_true(s.account_for_loss_in_pipeline_split)
  end)
end)

describe("the search walks first/last-stage offsets", function()
  -- 32 layers over PP 5: uneven (33 and 34 do not divide over 5 either). The middle stages
  -- hold ceil(32 / 5) = 7, the first and last share the other 11 (Megatron's
  -- --decoder-first/last-pipeline-num-layers, transformer_config.py:2294-2366 at d98e8a6):
  -- first_last the first stage lighter (5 + 7x3 + 6), first_last_loss the last (6 + 7x3 + 5)
  local function walked() return walked_layouts(5) end

  it("walks each end lighter as its own labelled variant, with Megatron's flags", function()
    local seen = walked()
    assert.truthy(seen.even)
    assert.is_nil(seen.account or seen.account_embedding or seen.account_loss)
    local f, l = assert(seen.first_last), assert(seen.first_last_loss)
    assert.equal(5, f.decoder_first_pipeline_num_layers)
    assert.equal(6, f.decoder_last_pipeline_num_layers)
    assert.equal(6, l.decoder_first_pipeline_num_layers)
    assert.equal(5, l.decoder_last_pipeline_num_layers)
  end)

  it("re-prices each with nd.estimate to the stated placement", function()
    local _, info = run({pp = 5, vpp = 1, tp = 1, cp = 1, zero = 1, devices = 5,
                         global_batch = 20})
    local want = {first_last = {5, 7, 7, 7, 6}, first_last_loss = {6, 7, 7, 7, 5},
                  even = {6, 7, 7, 6, 6}}
    local checked = {}
    for _, r in ipairs(info.results) do
      local d = search.detail(r, info)
      assert.same(want[r.strategy.layout], d.strategy.stage_layers)
      assert.near(r.step_time_s, d.step_time_s, 1e-9 * r.step_time_s)
      checked[r.strategy.layout] = true
    end
    assert.truthy(checked.first_last and checked.first_last_loss and checked.even)
  end)

  it("walks one variant where the ends share the rest evenly", function()
    -- 32 layers over PP 6: middle 4 x 6, ends 4 + 4: one layout, under first_last
    local _, info = run({pp = 6, vpp = 1, tp = 1, cp = 1, zero = 1, devices = 6,
                         global_batch = 24})
    local seen = {}
    for _, r in ipairs(info.results) do seen[r.strategy.layout] = r.strategy end
    assert.equal(4, assert(seen.first_last).decoder_last_pipeline_num_layers)
    assert.is_nil(seen.first_last_loss)
  end)

  it("reaches NeMo's DeepSeek-V3 offsets (61 layers + MTP on PP 16: 3 + 14 x 4 + 2)", function()
    -- NeMo 25.04's DeepSeek-V3 launch: --decoder-first-pipeline-num-layers 3
    -- --decoder-last-pipeline-num-layers 2 on PP 16, the MTP layer with the loss
    local _, info = run({model = "deepseek-v3", pp = 16, vpp = 1, tp = 1, cp = 1, ep = 1,
                         etp = 1, zero = 1, devices = 16, global_batch = 64, mbs = 1,
                         max_mem = "64TiB"})
    local found
    for _, r in ipairs(info.results) do
      if r.strategy.layout == "first_last_loss" then found = r end
    end
    assert.truthy(found)
    assert.equal(3, found.strategy.decoder_first_pipeline_num_layers)
    assert.equal(2, found.strategy.decoder_last_pipeline_num_layers)
    local sl = search.detail(found, info).strategy.stage_layers
    assert.equal(3, sl[1])
    for i = 2, 15 do assert.equal(4, sl[i]) end
    assert.equal(3, sl[16])  -- 2 decoder layers and the MTP layer
  end)
end)

describe("the search takes torchtitan's per-op selective AC", function()
  local OP_SAC = require("ndplan.export.torchtitan").OP_SAC
  local pin = {tp = 1, pp = 1, cp = 1, zero = 3, mbs = 2, recompute = "selective", top = 1}
  local function with(extra)
    local a = {}
    for k, v in pairs(pin) do a[k] = v end
    for k, v in pairs(extra) do a[k] = v end
    return a
  end

  it("walks selective with the switches given, and re-prices the row with them", function()
    local ranked, info = run(pin)
    local oranked, oinfo = run(with{selective_ops = OP_SAC})
    local d = search.detail(oranked[1], oinfo)
    assert.same(OP_SAC, d.strategy.selective_ops)
    assert.near(oranked[1].step_time_s, d.step_time_s, 1e-9 * d.step_time_s)
    -- per-op SAC drops the norms, the activation and every second matmul: less memory than
    -- the attention core alone (with flash attention, the same as no recompute), more time
    assert.is_true(oranked[1].peak_memory_bytes < ranked[1].peak_memory_bytes)
    assert.is_true(oranked[1].step_time_s > ranked[1].step_time_s)
    assert.same({"attn_core"}, search.detail(ranked[1], info).strategy.selective_ops)
  end)

  it("means torchtitan's per-op SAC under trainer = \"torchtitan\"", function()
    local ranked, info = run(with{trainer = "torchtitan", dialect = "v0.2.2"})
    assert.same(OP_SAC, search.detail(ranked[1], info).strategy.selective_ops)
    local text, notes = require("ndplan.export").export("torchtitan",
      {model = info.model_obj, strategy = search.detail(ranked[1], info).strategy,
       job = search.detail(ranked[1], info).job, result = search.detail(ranked[1], info)},
      {dialect = "v0.2.2"})
    assert.truthy(text, notes)
    assert.truthy(text:find("selective_ac_option", 1, true))
  end)

  it("refuses an unknown switch", function()
    assert.has_error(function() nd.search(args({selective_ops = {"bogus"}})) end)
  end)
end)

describe("the search walks fewer micro-batches than stages where the batch leaves no other", function()
  it("prices PP 4 on a batch of 2 as nd.estimate does (Megatron and torchtitan run it)", function()
    local ranked, info = run({pp = 4, tp = 1, cp = 1, devices = 4, global_batch = 2, zero = 0,
                              recompute = "none"})
    assert.is_true(#ranked > 0)
    for _, r in ipairs(ranked) do
      assert.is_true(r.strategy.mb < r.strategy.pp)
      local d = search.detail(r, info)
      assert.near(r.step_time_s, d.step_time_s, 1e-9 * d.step_time_s)
    end
    -- with enough sequences the automatic sizes keep a micro-batch per stage
    local _, big = run({pp = 4, tp = 1, cp = 1, devices = 4, global_batch = 16, zero = 0,
                        recompute = "none"})
    for _, r in ipairs(big.results) do assert.is_true(r.strategy.mb >= 4) end
  end)
end)
