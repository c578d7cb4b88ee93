-- Exact checks of the estimators against published formulas and byte counts.
require "ndplan"
local nd = require "ndplan"
local core = require "ndplan.c.estimate"
-- These specs check the estimators' mechanics on the device files alone (no stack profile:
-- its fitted efficiencies and costs are checked by validate_spec and stack_spec).
require("ndplan.config.stack").DEFAULT = "none"

local function gpt(layers, hidden, heads)
  return assert(nd.model{model_type = "gpt2", n_layer = layers, n_embd = hidden,
                         n_head = heads, vocab_size = 51200, n_positions = 2048})
end

local a100 = assert(nd.device("a100-80gb"))

local function rel(got, want) return math.abs(got - want) / math.abs(want) end

describe("activation memory per layer (Korthikanti et al. 2022, Table 2)", function()
  -- s = 2048, b = 4, and the four models of the paper; flash attention off, dropout kept.
  local configs = {{48, 6144, 64}, {96, 12288, 96}, {105, 20480, 128}, {128, 25600, 160}}
  local s, b, t = 2048, 4, 8
  for _, c in ipairs(configs) do
    local L, h, a = c[1], c[2], c[3]
    local m = gpt(L, h, a)
    local sbh = s * b * h
    local function layer(strategy, mode)
      strategy.mbs = b
      strategy.flash_attention = false
      local r = assert(core.layer(m, a100, {devices = strategy.tp or 1, global_batch = b,
                                            seq_len = s}, strategy, 3, {dropout = 1}))
      return r.activations[mode]
    end
    local name = string.format("%d layers, h %d", L, h)
    it(name .. ": no parallelism", function()
      assert.is_true(rel(layer({tp = 1}, "none"), sbh * (34 + 5 * a * s / h)) < 1e-9)
    end)
    it(name .. ": TP only", function()
      assert.is_true(rel(layer({tp = t}, "none"), sbh * (10 + 24 / t + 5 * a * s / (h * t))) < 1e-9)
    end)
    it(name .. ": TP + SP", function()
      assert.is_true(rel(layer({tp = t, sp = true}, "none"), sbh * (34 / t + 5 * a * s / (h * t))) < 1e-9)
    end)
    it(name .. ": TP + selective", function()
      assert.is_true(rel(layer({tp = t}, "selective"), sbh * (10 + 24 / t)) < 1e-9)
    end)
    it(name .. ": TP + SP + selective", function()
      assert.is_true(rel(layer({tp = t, sp = true}, "selective"), sbh * 34 / t) < 1e-9)
    end)
    it(name .. ": full recompute keeps the layer input", function()
      assert.is_true(rel(layer({tp = t}, "full"), 2 * sbh) < 1e-9)
    end)
  end

  it("flash attention removes the s^2 score term", function()
    local m = gpt(48, 6144, 64)
    local job = {devices = 8, global_batch = 4, seq_len = 2048}
    local off = assert(core.layer(m, a100, job, {tp = 8, mbs = 4, flash_attention = false}, 0,
                                  {dropout = 1}))
    local on = assert(core.layer(m, a100, job, {tp = 8, mbs = 4}, 0, {dropout = 1}))
    assert.is_true(off.activations.none - on.activations.none > 5 * 64 * 2048 * 2048 * 4 / 8 * 0.99)
  end)
end)

describe("recompute working set", function()
  it("adds, on top of what is held, one layer's dropped activations rebuilt for its backward", function()
    local m = gpt(24, 4096, 32)
    local job = {devices = 32, global_batch = 64, seq_len = 2048}
    local base = {model = m, device = a100, devices = 32, global_batch = 64, seq_len = 2048,
                  tp = 8, pp = 4, mbs = 1, flash_attention = false, costs = {dropout = 1}}
    local layer = assert(core.layer(m, a100, job, {tp = 8, pp = 4, mbs = 1,
                                                   flash_attention = false}, 0, {dropout = 1}))
    local got = {}
    for _, mode in ipairs({"none", "selective", "full"}) do
      base.recompute = mode
      got[mode] = assert(nd.estimate(base)).stages[2]  -- a body stage: no embedding or head
    end
    local gather = got.none.buffers  -- the TP gather buffer alone: none rebuilds nothing
    for _, mode in ipairs({"selective", "full"}) do
      local rebuilt = layer.activations.none - layer.activations[mode]
      assert.is_true(rebuilt > 0)
      assert.is_true(rel(got[mode].buffers - gather, rebuilt) < 1e-9, mode)
    end
  end)
end)

describe("parameter, gradient and optimizer bytes", function()
  local m = gpt(36, 4096, 32)  -- the 7.5B model of Narayanan et al. Table 1
  local psi = m:params().total

  local function states(zero, dp)
    local r = assert(nd.estimate{model = m, device = a100, devices = dp, global_batch = dp,
                                 seq_len = 2048, zero = zero,
                                 costs = {grad_bytes = 2, master_bytes = 4, optimizer_bytes = 8}})
    local p = r.memory_parts_bytes
    return p.weights + p.grads + p.optimizer
  end

  it("matches the ZeRO paper for 7.5B on 64 devices: 120, 31.4, 16.6, 1.9 GB", function()
    assert.is_true(rel(psi, 7.5e9) < 0.02)
    assert.is_true(rel(states(0, 64), 16 * psi) < 1e-6)
    assert.is_true(rel(states(1, 64), 4 * psi + 12 * psi / 64) < 1e-6)
    assert.is_true(rel(states(2, 64), 2 * psi + 14 * psi / 64) < 1e-6)
    assert.is_true(rel(states(3, 64), 16 * psi / 64) < 1e-6)
    -- the paper's rounded figures, with its Psi = 7.5e9
    local k = 7.5e9 / psi
    assert.is_true(rel(states(0, 64) * k, 120e9) < 0.005)
    assert.is_true(rel(states(1, 64) * k, 31.4e9) < 0.005)
    assert.is_true(rel(states(2, 64) * k, 16.6e9) < 0.005)
    assert.is_true(rel(states(3, 64) * k, 1.875e9) < 0.005)
  end)

  it("keeps 18 bytes per parameter with Megatron's defaults and no distributed optimizer", function()
    local r = assert(nd.estimate{model = m, device = a100, devices = 8, global_batch = 8,
                                 seq_len = 2048})
    local p = r.memory_parts_bytes
    assert.is_true(rel((p.weights + p.grads + p.optimizer) / r.stages[1].params, 18) < 1e-9)
  end)

  it("never raises per-device weights when TP doubles", function()
    local prev
    for _, tp in ipairs({1, 2, 4, 8}) do
      local r = assert(nd.estimate{model = m, device = a100, devices = 8, global_batch = 8,
                                   seq_len = 2048, tp = tp})
      if prev then assert.is_true(r.memory_parts_bytes.weights < prev) end
      prev = r.memory_parts_bytes.weights
    end
  end)
end)

describe("pipeline schedules", function()
  it("keeps 16 - s micro-batches in flight on stage s of DeepSeek-V3 (PP 16, 32 micro-batches)", function()
    local r = assert(nd.estimate{model = "deepseek-v3", device = "h800", devices = 2048,
                                 global_batch = 4096, seq_len = 4096, pp = 16, ep = 64, mbs = 1,
                                 recompute = "full"})
    assert.equal(32, r.strategy.mb)
    for s = 0, 15 do assert.equal(16 - s, r.stages[s + 1].inflight) end
    -- the end stages peak: the first holds the most micro-batches, the last the head, the
    -- MTP module and the working set of recomputing it (its own logits)
    assert.is_true(r.heaviest_stage == 0 or r.heaviest_stage == 15)
    for s = 1, 14 do assert.is_true(r.stages[1].peak > r.stages[s + 1].peak) end
  end)

  it("interleaving multiplies the first stage's activations by 1 + (p-1)/(p*v)", function()
    local m = gpt(96, 12288, 96)
    local base = {model = m, device = a100, devices = 64, global_batch = 64, seq_len = 2048,
                  tp = 8, pp = 8, sp = true, recompute = "selective", flash_attention = false}
    local plain = assert(nd.estimate(base))
    base.vpp = 3
    local inter = assert(nd.estimate(base))
    assert.equal(8, plain.stages[1].inflight)
    assert.is_true(rel(inter.stages[1].inflight, 8 * (1 + 7 / 24)) < 1e-9)
  end)

  it("shrinks the bubble with interleaving and prices it in seconds", function()
    local m = gpt(96, 12288, 96)
    local base = {model = m, device = a100, devices = 64, global_batch = 64, seq_len = 2048,
                  tp = 8, pp = 8, sp = true, recompute = "selective"}
    local plain = assert(nd.estimate(base))
    base.vpp = 3
    local inter = assert(nd.estimate(base))
    assert.is_true(inter.time_parts_s.bubble < plain.time_parts_s.bubble)
    local sum = 0
    for _, v in pairs(plain.time_parts_s) do sum = sum + v end
    assert.is_true(rel(sum, plain.step_time_s) < 1e-12)
  end)
end)

describe("DualPipe (DeepSeek-V3 report, DualPipe README)", function()
  local v3 = {model = "deepseek-v3", device = "h800", devices = 2048, global_batch = 4096,
              seq_len = 4096, pp = 16, ep = 64, recompute = "full", zero = 1}
  local function with(t)
    local a = {}
    for k, v in pairs(v3) do a[k] = v end
    for k, v in pairs(t) do a[k] = v end
    return a
  end

  it("holds two stages' parameters and PP + 1 micro-batches on every device", function()
    local one = assert(nd.estimate(v3))
    local dual = assert(nd.estimate(with{schedule = "dualpipe"}))
    for s = 1, 16 do assert.equal(17, dual.stages[s].inflight) end
    -- device s holds stages s and 15 - s: twice a middle stage's parameters
    assert.is_true(rel(dual.stages[5].params, one.stages[5].params + one.stages[12].params) < 1e-12)
    -- both ends hold the embedding and the head
    assert.is_true(rel(dual.stages[1].params, dual.stages[16].params) < 1e-12)
  end)

  it("hides the all-to-all behind paired compute and shrinks the bubble", function()
    local one = assert(nd.estimate(v3))
    local dual = assert(nd.estimate(with{schedule = "dualpipe"}))
    assert.is_true(dual.time_parts_s.ep_comm < 0.5 * one.time_parts_s.ep_comm)
    assert.is_true(dual.time_parts_s.bubble < one.time_parts_s.bubble)
    assert.is_true(dual.step_time_s < one.step_time_s)
  end)

  it("needs an even pp and at least 2*pp micro-batches", function()
    local r, why = nd.estimate(with{schedule = "dualpipe", global_batch = 2048})  -- mb 16
    assert.is_nil(r)
    assert.matches("dualpipe needs an even number of micro%-batches", why)
    r, why = nd.estimate{model = "llama3.1-8b", device = "h100", devices = 24, global_batch = 96,
                         seq_len = 4096, pp = 3, schedule = "dualpipe"}
    assert.is_nil(r)
    assert.matches("dualpipe needs an even pp", why)
  end)
end)

describe("MoE dispatch over nodes", function()
  local v3 = {model = "deepseek-v3", device = "h800", devices = 2048, global_batch = 4096,
              seq_len = 4096, pp = 16, ep = 64, recompute = "full", zero = 1}
  local function ep_time(costs, model)
    local a = {}
    for k, v in pairs(v3) do a[k] = v end
    a.costs, a.model = costs, model or a.model
    return assert(nd.estimate(a)).time_parts_s.ep_comm
  end

  it("sends one copy per destination node with DeepEP-style dispatch", function()
    assert.is_true(ep_time({ep_node_dedup = 1}) < ep_time({ep_node_dedup = 0}))
  end)

  it("caps the nodes a token visits by group-limited routing (topk_group of n_group)", function()
    local m = assert(nd.model("deepseek-v3"))
    assert.equal(8, m.expert_groups)
    assert.equal(4, m.groups_per_token)
    local config = nd.json.decode(require("ndplan.c.bundle").read("examples/models/deepseek-v3.json"))
    config.n_group, config.topk_group = 1, 1
    local unlimited = assert(nd.model(config))
    assert.equal(0, unlimited.expert_groups)
    -- 8 nodes, 8 experts per token: about 5.3 nodes at random, at most 4 when group-limited
    assert.is_true(ep_time(nil, m) < ep_time(nil, unlimited))
  end)
end)

describe("activation offload", function()
  local base = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
                seq_len = 8192, tp = 8, pp = 8, sp = true, recompute = "selective"}
  local function with(share, costs)
    local a = {}
    for k, v in pairs(base) do a[k] = v end
    a.offload, a.costs = share, costs
    return assert(nd.estimate(a))
  end

  it("keeps only the running micro-batch's offloaded share on the device", function()
    local none, half, all = with(0), with(0.5), with(1)
    local s0 = none.stages[1]
    assert.equal(8, s0.inflight)
    -- 8 in flight: 1 + 7 * (1 - share) micro-batches of layer activations stay
    local per_mb = (s0.activations - all.stages[1].activations) / 7
    assert.is_true(rel(none.stages[1].activations - half.stages[1].activations, 3.5 * per_mb) < 1e-9)
    assert.is_true(all.stages[1].activations < none.stages[1].activations / 4)
    -- the last stage holds one micro-batch: nothing waits, nothing moves
    assert.equal(none.stages[8].activations, all.stages[8].activations)
  end)

  it("prices the copies on the host link and hides them behind compute", function()
    assert.equal(0, with(0.5).time_parts_s.offload)
    assert.is_true(with(1).time_parts_s.offload > 0)
    assert.is_true(with(0.5, {offload_overlap = 0}).time_parts_s.offload > 0)
  end)

  it("refuses a share outside [0, 1]", function()
    local a = {}
    for k, v in pairs(base) do a[k] = v end
    a.offload = 1.5
    local r, why = nd.estimate(a)
    assert.is_nil(r)
    assert.matches("offload: expected a share in %[0, 1%]", why)
  end)
end)

describe("kernel launch floor (device efficiency.kernel_overhead)", function()
  it("makes a small layer's pass last no less than the host's issue time", function()
    local m = gpt(4, 256, 4)
    local job = {devices = 1, global_batch = 1, seq_len = 2048}
    local fast = assert(core.layer(m, a100, job, {}, 0))
    local slow_dev = assert(nd.device{base = "a100-80gb", name = "slow-host",
                                      efficiency = {kernel_overhead = 0.25}})
    local slow = assert(core.layer(m, slow_dev, job, {}, 0))
    assert.is_true(fast.forward_s < 0.25)
    assert.are.equal(0.25, slow.forward_s)
    -- a forward, and a backward floored at two passes, per layer and micro-batch
    local r = assert(nd.estimate{model = m, device = slow_dev, devices = 1, global_batch = 1,
                                 seq_len = 2048})
    assert.is_true(r.time_parts_s.forward >= 4 * 0.25)
    assert.is_true(r.time_parts_s.backward >= 4 * 0.5)
  end)

  it("runs a pass's TP collectives while the host issues its kernels: only what outlasts "
     .. "the floor shows", function()
    local m = gpt(4, 1024, 8)
    local args = {model = m, devices = 2, global_batch = 1, seq_len = 2048, tp = 2}
    local function priced(overhead)
      local dev = assert(nd.device{base = "a100-80gb", name = "host-" .. overhead,
                                   efficiency = {kernel_overhead = overhead}})
      local a = {device = dev}
      for k, v in pairs(args) do a[k] = v end
      return assert(nd.estimate(a)), assert(core.layer(m, dev, {devices = 2, global_batch = 1,
                                                              seq_len = 2048}, {tp = 2}, 0))
    end
    local free, l0 = priced(0)
    assert.is_true(free.time_parts_s.tp_comm > 0)
    -- no floor: each layer's forward and backward show their whole TP traffic
    assert.is_true(math.abs(free.time_parts_s.tp_comm - 4 * 2 * l0.tp_comm_s)
                   <= 1e-9 * free.time_parts_s.tp_comm)
    -- a floor longer than work and traffic together hides the traffic entirely
    local slow = priced(1.0)
    assert.are.equal(0, slow.time_parts_s.tp_comm)
    -- in between, the forward shows work + traffic - floor
    local floor = l0.forward_s + l0.tp_comm_s / 2
    local mid, l1 = priced(floor)
    local shown_f = l0.forward_s + l0.tp_comm_s - floor
    local shown_b = math.max(0, l0.backward_s + l0.tp_comm_s - 2 * floor)
    assert.are.equal(floor, l1.forward_s)
    assert.is_true(math.abs(mid.time_parts_s.tp_comm - 4 * (shown_f + shown_b))
                   <= 1e-9 * mid.time_parts_s.tp_comm)
  end)
end)

describe("costs", function()
  it("refuses a cost out of its range with the field named", function()
    local r, why = nd.estimate{model = "llama3.1-8b", device = "h100", devices = 8,
                               global_batch = 8, seq_len = 4096, costs = {dp_overlap = 2}}
    assert.is_nil(r)
    assert.matches("costs.dp_overlap: expected a number in %[0, 1%]", why)
  end)
end)

describe("strategy validation", function()
  local m = gpt(24, 2304, 24)
  local function refuse(args)
    local base = {model = m, device = a100, devices = 32, global_batch = 512, seq_len = 2048}
    for k, v in pairs(args) do base[k] = v end
    local r, why = nd.estimate(base)
    assert.is_nil(r)
    return why
  end
  it("refuses degrees that do not multiply to the device count", function()
    assert.matches("devices", refuse{tp = 8, dp = 2})
  end)
  it("refuses a TP degree that does not divide the heads", function()
    assert.matches("heads", refuse{tp = 16})
  end)
  it("refuses a global batch that dp*mbs does not divide", function()
    assert.matches("global batch", refuse{mbs = 5})
  end)
  it("refuses EP on a dense model", function()
    assert.matches("no experts", refuse{ep = 2})
  end)
  it("raises on misuse: an unknown strategy field", function()
    assert.has_error(function() nd.estimate{model = m, device = a100, devices = 8,
                                            global_batch = 8, seq_len = 2048, tpp = 2} end)
  end)
end)

describe("selective recompute switches", function()
  local base = {model = "deepseek-v3", device = "h800", devices = 2048, global_batch = 4096,
                seq_len = 4096, pp = 16, ep = 64, zero = 1, recompute = "selective"}
  local function layer0(ops)
    local st = {pp = 16, ep = 64, zero = 1}
    st.selective_ops = ops
    local m = assert(nd.model("deepseek-v3"))
    return assert(core.layer(m, assert(nd.device("h800")), {devices = 2048, global_batch = 4096,
                                                            seq_len = 4096}, st, 3))
  end
  local function with(ops)
    local a = {}
    for k, v in pairs(base) do a[k] = v end
    a.selective_ops = ops
    return assert(nd.estimate(a))
  end

  it("keeps Megatron's attention-core default, which flash attention makes a no-op", function()
    local l = layer0(nil)
    assert.equal(l.activations.none, l.activations.selective)
    assert.equal(0, l.recompute_s.selective)
    assert.same({"attn_core"}, with(nil).strategy.selective_ops)
  end)

  it("drops more and repeats more with each switch (norms, act, mla_up, moe_dispatch)", function()
    local prev = layer0({"attn_core"})
    for _, ops in ipairs({{"norms"}, {"norms", "act"}, {"norms", "act", "mla_up"},
                          {"norms", "act", "mla_up", "moe_dispatch"}}) do
      local l = layer0(ops)
      assert.is_true(l.activations.selective < prev.activations.selective, table.concat(ops, ","))
      assert.is_true(l.recompute_s.selective > prev.recompute_s.selective, table.concat(ops, ","))
      assert.is_true(l.activations.selective >= l.activations.full)
      prev = l
    end
    local r = with({"norms", "act", "mla_up"})
    assert.same({"norms", "act", "mla_up"}, r.strategy.selective_ops)
    assert.is_true(r.peak_memory_bytes < with(nil).peak_memory_bytes)
    assert.is_true(r.time_parts_s.recompute > 0)
  end)

  it("prices dropping the MoE dispatch as the bytes of the dispatched copies and one more "
     .. "exposed all-to-all", function()
    local without, with_d = layer0({"act"}), layer0({"act", "moe_dispatch"})
    local l = layer0(nil)
    -- DeepSeek-V3 layer 3 (MoE), mbs 1, seq 4096, tp 1: 8 routed copies of 4096 tokens of
    -- 7168 bf16 values per device (capacity factor 1, etp 1)
    local copies = 8 * 4096 * 7168 * 2
    assert.is_true(math.abs((without.activations.selective - with_d.activations.selective) - copies)
                   <= 1e-9 * copies)
    -- the repeated dispatch: half the layer's dispatch + combine, nothing hidden by default
    local added = with_d.recompute_s.selective - without.recompute_s.selective
    assert.is_true(math.abs(added - l.ep_comm_s / 2) <= 1e-9 * added)
  end)

  it("refuses an unknown switch", function()
    assert.has_error(function() with({"everything"}) end,
                     "selective_ops[1]: expected attn_core, norms, act, mla_up, moe_dispatch or alt_mm")
  end)
end)

describe("data-parallel overlap windows", function()
  local function est(t)
    local a = {model = "llama3.1-70b", device = "h100", devices = 256, global_batch = 64,
               seq_len = 4096, tp = 8, pp = 4, zero = 1, costs = {overlap_sm_share = 0}}
    for k, v in pairs(t) do
      if k == "costs" then for c, x in pairs(v) do a.costs[c] = x end else a[k] = v end
    end
    return assert(nd.estimate(a))
  end

  it("hides an all-reduce behind one micro-batch's backward without pipelining", function()
    local shown = est{pp = 1, zero = 0, costs = {dp_overlap = 0}}
    local hidden = est{pp = 1, zero = 0}
    local want = math.max(0, shown.time_parts_s.dp_comm - hidden.stages[1].backward_s)
    assert.is_true(rel(hidden.time_parts_s.dp_comm, want) < 1e-9)
  end)

  it("hides the sharded step's parameter gather behind the first forward too", function()
    local shown = est{pp = 1, costs = {dp_overlap = 0}}
    local hidden = est{pp = 1}
    local s = hidden.stages[1]
    -- each part hides at most behind its own window: the two windows bound what is hidden
    assert.is_true(hidden.time_parts_s.dp_comm
                   >= shown.time_parts_s.dp_comm - s.backward_s - s.forward_s - 1e-12)
    assert.is_true(hidden.time_parts_s.dp_comm < shown.time_parts_s.dp_comm)
  end)

  it("leaves only the first chunk's share exposed when interleaved chunks hide the rest", function()
    local full = est{vpp = 1, costs = {dp_overlap = 0}}.time_parts_s.dp_comm
    local v1, v2, v4 = est{vpp = 1}, est{vpp = 2}, est{vpp = 4}
    assert.is_true(v1.time_parts_s.dp_comm > 0 and v1.time_parts_s.dp_comm < full)
    assert.is_true(v2.time_parts_s.dp_comm < v1.time_parts_s.dp_comm)
    assert.is_true(v4.time_parts_s.dp_comm < v2.time_parts_s.dp_comm)
    -- the collectives themselves are the same size whatever the schedule
    assert.is_true(rel(est{vpp = 4, costs = {dp_overlap = 0}}.time_parts_s.dp_comm, full) < 1e-9)
  end)
end)

describe("torchtitan's per-op checkpointing (alt_mm)", function()
  -- Llama 3.1 8B at TP 2: h 4096, 8 KV heads of 128, gated MLP of 14336, bf16
  local T, h, kv, ffn, t = 8192, 4096, 8 * 128, 14336, 2
  local m = assert(nd.model("llama3.1-8b"))
  local function layer(ops)
    local st = {tp = t, sp = true, recompute = "selective", selective_ops = ops}
    return assert(core.layer(m, assert(nd.device("h100")), {devices = 2, global_batch = 1,
                                                            seq_len = T}, st, 1))
  end

  it("drops k's output and the MLP's up projection, and repeats k, o and up", function()
    local base, alt = layer({"norms", "act"}), layer({"norms", "act", "alt_mm"})
    local dropped = base.activations.selective - alt.activations.selective
    assert.is_true(rel(dropped, 2 * T * (kv / t + ffn / t)) < 1e-9)
    -- three of the seven projections' forward GEMMs: k (h x kv), o (h x h), up (h x ffn)
    local repeated = alt.recompute_s.selective - base.recompute_s.selective
    local all_gemms = layer({"norms"}).recompute_s.full  -- (a full forward, for scale)
    assert.is_true(repeated > 0 and repeated < all_gemms)
  end)
end)

describe("pipeline p2p overlap (pp_overlap)", function()
  local function pp(vpp, share)
    return assert(nd.estimate{model = "llama3.1-70b", device = "h100", devices = 64,
                              global_batch = 64, seq_len = 4096, tp = 8, pp = 4, vpp = vpp,
                              sp = true, costs = {pp_overlap = share, overlap_sm_share = 0.1}})
      .time_parts_s.pp_comm
  end

  it("hides its share of an interleaved schedule's transfers, at the SMs they take", function()
    local shown = pp(2, 0)
    assert.is_true(shown > 0)
    assert.is_true(rel(pp(2, 1), 0.1 * shown) < 1e-9)
    assert.is_true(rel(pp(2, 0.5), 0.5 * shown + 0.05 * shown) < 1e-9)
  end)

  it("leaves 1F1B's transfers exposed: it waits for each", function()
    assert.equal(pp(1, 0), pp(1, 1))
  end)
end)
