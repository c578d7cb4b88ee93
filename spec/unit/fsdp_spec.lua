-- FSDP (ZeRO-3) with pipeline parallelism, as torchtitan runs it: each stage's parameters
-- gathered once per step and kept with their gradients until the step's reduce-scatter
-- (reshard_after_forward off, its default under PP), or gathered for every micro-batch and
-- freed after its forward (on). Memory per stage worked by hand on a small model.
local nd = require "ndplan"
require("ndplan.config.stack").DEFAULT = "none"  -- the device file alone: byte widths as documented

-- 12 Llama-style layers, h 256, 4 heads of 64 (no GQA), gated MLP of 1024, untied head of
-- a 1024-token vocabulary. A layer holds q, k, v, o (4 h^2), gate, up, down (3 h ffn) and two
-- norms (2 h); stage 0 of two holds six layers and the embedding (V h).
local H, FFN, V = 256, 1024, 1024
local LAYER = 4 * H * H + 3 * H * FFN + 2 * H
local STAGE0 = 6 * LAYER + V * H
local model = assert(nd.model{model_type = "llama", num_hidden_layers = 12, hidden_size = H,
                              intermediate_size = FFN, num_attention_heads = 4,
                              num_key_value_heads = 4, vocab_size = V,
                              max_position_embeddings = 4096, tie_word_embeddings = false})

local function run(extra)
  local args = {model = model, device = "h100", devices = 8, global_batch = 32, seq_len = 1024,
                pp = 2, zero = 3}
  for k, v in pairs(extra or {}) do args[k] = v end
  return assert(nd.estimate(args))
end

describe("FSDP with pipeline parallelism", function()
  it("prices ZeRO-3 with PP > 1, keeping the gathered stage for the step by default", function()
    local r = run()
    assert.is_false(r.strategy.reshard_after_forward)
    local s = r.stages[1]
    assert.equal(STAGE0, s.params)
    assert.equal(2 * STAGE0, s.weights)               -- bf16, unsharded for the step
    assert.equal(4 * STAGE0, s.grads)                 -- fp32, unsharded until the reduce-scatter
    assert.near(12 * STAGE0 / 4, s.optimizer, 1e-6)   -- master + Adam, over dp 4
  end)

  it("shards parameters and gradients when every micro-batch gathers again", function()
    local r = run{reshard_after_forward = true}
    local s = r.stages[1]
    assert.is_true(r.strategy.reshard_after_forward)
    assert.near(2 * STAGE0 / 4, s.weights, 1e-6)
    assert.near(4 * STAGE0 / 4, s.grads, 1e-6)
    assert.near(12 * STAGE0 / 4, s.optimizer, 1e-6)
    assert.is_true(s.buffers >= 2 * 2 * LAYER)        -- one layer gathered, double-buffered
    -- gathering 16 times a step costs more traffic than once
    local off = run()
    assert.is_true(r.time_parts_s.dp_comm + r.time_parts_s.forward + r.time_parts_s.backward
                   >= off.time_parts_s.dp_comm + off.time_parts_s.forward + off.time_parts_s.backward)
  end)

  it("keeps no sharded working copy where the master shard is the parameter (FSDP2)", function()
    local r = run{reshard_after_forward = true, costs = {zero3_weight_copy = 0}}
    local s = r.stages[1]
    assert.equal(0, s.weights)                        -- bf16 only while gathered
    assert.near(4 * STAGE0 / 4, s.grads, 1e-6)
    assert.near(12 * STAGE0 / 4, s.optimizer, 1e-6)   -- the fp32 shard is the parameter
    -- the backward holds two gathered layers and one layer's unsharded fp32 gradient
    assert.is_true(s.buffers >= (2 * 2 + 4) * LAYER)
    -- without resharding the stage's weights stay gathered for the step, copy or not
    assert.equal(2 * STAGE0, run{costs = {zero3_weight_copy = 0}}.stages[1].weights)
  end)

  it("keeps resharding on by default without PP (FSDP2's default)", function()
    assert.is_true(run{pp = 1}.strategy.reshard_after_forward)
  end)

  it("is walked by the search, which refused it before", function()
    local ranked = assert(nd.search{model = model, device = "h100", devices = 8, global_batch = 32,
                                    seq_len = 1024, pp = 2, zero = 3, tp = 1, cp = 1, top = 3})
    assert.equal(3, ranked[1].strategy.zero)
    assert.equal(2, ranked[1].strategy.pp)
  end)
end)

describe("HSDP: ZeRO over a shard group, replicated", function()
  it("refuses a shard group under ZeRO 0, which shards nothing (it was priced without the "
     .. "replicas' all-reduce)", function()
    local args = {model = model, device = "h100", devices = 8, global_batch = 32, seq_len = 1024,
                  zero = 0, dp_shard = 2}
    local r, why = nd.estimate(args)
    assert.is_nil(r)
    assert.matches("dp_shard 2 below dp 8 needs ZeRO 1", why, 1, true)
    args.dp_shard = 8  -- all of dp: the plain all-reduce
    assert.is_truthy(nd.estimate(args))
  end)

  it("shards the optimizer, gradients and parameters over dp_shard x cp only, and says so", function()
    local full = run{pp = 1, devices = 8}           -- dp 8: one group of 8
    local hsdp = run{pp = 1, devices = 8, dp_shard = 2}  -- 2 ranks per group, 4 replicas
    local P = 12 * LAYER + 2 * V * H + H            -- every layer, embedding, head, final norm
    assert.equal(P, full.stages[1].params)
    assert.near(12 * P / 8, full.stages[1].optimizer, 1e-6)
    assert.near(12 * P / 2, hsdp.stages[1].optimizer, 1e-6)
    assert.near(2 * P / 2, hsdp.stages[1].weights, 1e-6)
    assert.equal(2, hsdp.strategy.dp_shard)
    assert.equal(4, hsdp.strategy.dp_replicate)
    assert.same({optimizer = 2, grads = 2, params = 2, group = "dp_shard"}, hsdp.strategy.sharded_over)
    assert.same({optimizer = 8, grads = 8, params = 8, group = "dp"}, full.strategy.sharded_over)
  end)

  it("takes the replicas instead, the core deriving the shard group from dp", function()
    local r = run{pp = 1, devices = 8, dp_replicate = 4}
    assert.equal(2, r.strategy.dp_shard)
    assert.equal(r.stages[1].optimizer, run{pp = 1, devices = 8, dp_shard = 2}.stages[1].optimizer)
    local bad, why = nd.estimate{model = model, device = "h100", devices = 8, global_batch = 32,
                                 seq_len = 1024, zero = 3, dp_shard = 2, dp_replicate = 2}
    assert.is_nil(bad)
    assert.matches("dp_replicate 2 must divide dp 8 (dp = dp_shard x dp_replicate)", why, 1, true)
  end)

  it("refuses a shard group that does not divide dp", function()
    local r, why = nd.estimate{model = model, device = "h100", devices = 8, global_batch = 32,
                               seq_len = 1024, zero = 3, dp_shard = 3}
    assert.is_nil(r)
    assert.matches("dp_shard 3 must divide dp 8", why, 1, true)
  end)
end)

-- DTensor tensor parallelism (torchtitan): the sequence-parallel all-gather before a
-- column-parallel linear is a tensor autograd keeps for the weight gradient, so the gathered
-- norm output stays whole; Megatron keeps its shard and gathers it again in the backward.
-- On the model above at TP 4 with SP, one micro-batch of T = 1024 tokens: a layer keeps two
-- gathered inputs (attention, MLP), 2 T h elements of which 3/4 lie beside the shard; the
-- last stage's head keeps its gathered input too (T h, 3/4 more).
describe("sequence parallelism's gathered inputs (sp_gather_kept)", function()
  local T = 1024
  local function tp4(extra)
    local args = {model = model, device = "h100", devices = 8, global_batch = 8, seq_len = T,
                  tp = 4, sp = true, pp = 2, mbs = 1}
    for k, v in pairs(extra or {}) do args[k] = v end
    return assert(nd.estimate(args))
  end
  it("keeps the whole gathered inputs: 2 bytes x 2 T h x 3/4 per layer, T h x 3/4 at the head", function()
    local megatron, dtensor = tp4(), tp4{costs = {sp_gather_kept = 1}}
    for i, s in ipairs(megatron.stages) do
      local d = dtensor.stages[i]
      local per_mb = 6 * 2 * 2 * T * H * 3 / 4 + (i == 2 and 2 * T * H * 3 / 4 or 0)
      assert.near((d.activations - s.activations) / per_mb, d.inflight, 1e-9)
      assert.equal(s.weights, d.weights)
    end
  end)
  it("drops them with the norms under selective recompute, which then pays their gathers again", function()
    local ops = {"norms"}
    local base = tp4{recompute = "selective", selective_ops = ops}
    local kept = tp4{recompute = "selective", selective_ops = ops, costs = {sp_gather_kept = 1}}
    assert.near(base.stages[1].activations, kept.stages[1].activations, 1e-6)
    assert.is_true(kept.time_parts_s.recompute > base.time_parts_s.recompute)
    -- without recompute they cost memory, not time
    local none, none_kept = tp4(), tp4{costs = {sp_gather_kept = 1}}
    assert.near(none.step_time_s, none_kept.step_time_s, 1e-12)
  end)
end)

-- A vocabulary-parallel loss of its own (logits_bytes_tp): PyTorch's loss_parallel, which
-- torchtitan runs whenever TP splits the vocabulary, holds four fp32 tensors of the local
-- logits at its backward's peak; without TP the trainer's plain loss keeps logits_bytes.
describe("the loss with the vocabulary split over TP (logits_bytes_tp)", function()
  local T = 1024
  local function est(tp, extra)
    local args = {model = model, device = "h100", devices = 8, global_batch = 8, seq_len = T,
                  tp = tp, sp = tp > 1, pp = 2, mbs = 1, costs = {logits_bytes = 12}}
    for k, v in pairs(extra or {}) do args.costs[k] = v end
    return assert(nd.estimate(args))
  end
  it("holds (16 - 12) bytes more per local logit on the last stage only, and only with TP", function()
    local base, tp16 = est(4), est(4, {logits_bytes_tp = 16})
    assert.near(tp16.stages[2].activations - base.stages[2].activations, 4 * T * V / 4, 1e-6)
    assert.equal(base.stages[1].activations, tp16.stages[1].activations)
    assert.equal(est(1).stages[2].activations, est(1, {logits_bytes_tp = 16}).stages[2].activations)
  end)
end)
