-- The example policies under examples/policies, loaded by their bundled names.
local nd = require "ndplan"
local policy = require "ndplan.policy"

local function search(args)
  local a = {device = "h100", jobs = 2, top = 100000}
  for k, v in pairs(args) do a[k] = v end
  return nd.search(a)
end

local function key_of(s)
  return string.format("%d %d %d %d %d %d %s %d %d %d %s", s.dp, s.tp, s.pp, s.vpp, s.cp, s.ep,
                       tostring(s.sp), s.zero, s.mbs, s.mb, s.recompute)
end

describe("policy loading", function()
  it("finds the bundled policies by name", function()
    local names = table.concat(policy.names(), " ")
    for _, n in ipairs({"default", "cheapest", "tp_in_node", "headroom"}) do
      assert.matches(n, names)
      assert.is_table((policy.load(n)))
    end
  end)
end)

describe("cheapest: $ per million tokens at a price per device-hour", function()
  local job = {model = "llama3.1-8b", devices = 16, global_batch = 64, seq_len = 4096}
  local function with(t)
    local a = {}
    for k, v in pairs(job) do a[k] = v end
    for k, v in pairs(t) do a[k] = v end
    return a
  end

  it("ranks by devices x price x step time over the tokens of a step", function()
    local ranked, info = assert(search(with{policy = "cheapest", policy_opts = {price = 3.0}}))
    assert.equal("$/Mtok", info.objective_label)
    for i, r in ipairs(ranked) do
      local tokens = job.global_batch * job.seq_len
      local dollars = job.devices * 3.0 * r.step_time_s / 3600
      assert.near(dollars / tokens * 1e6, r.objective, 1e-9 * r.objective)
      if i > 1 then assert.is_true(ranked[i - 1].objective <= r.objective) end
    end
  end)

  it("writes cost.csv through done", function()
    local ranked, info = assert(search(with{policy = "cheapest", top = 3}))
    local written = {}
    policy.call(info.policy_table, "done", ranked,
                {dir = "x", write = function(name, text) written[name] = text; return true end})
    local lines = {}
    for l in written["cost.csv"]:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.equal(4, #lines)
    assert.matches("^1,", lines[2])
  end)

  it("refuses a price that is not positive, naming the policy file", function()
    local ok, err = pcall(search, with{policy = "cheapest", policy_opts = {price = 0}})
    assert.is_false(ok)
    assert.matches("examples/policies/cheapest%.lua:%d+: price", err)
  end)
end)

describe("tp_in_node: TP inside a node, PP <= 8", function()
  -- GPT-3 175B has 96 KV heads, so the walk alone would reach TP 32 on 64 devices.
  local job = {model = "gpt3-175b", devices = 64, global_batch = 64, seq_len = 2048,
               recompute = "full", zero = 1}
  local function with(t)
    local a = {}
    for k, v in pairs(job) do a[k] = v end
    for k, v in pairs(t) do a[k] = v end
    return a
  end

  it("keeps exactly what the rule allows, refusing the rest before pricing", function()
    local all, plain = assert(search(with{}))
    local ranked, info = assert(search(with{policy = "tp_in_node"}))
    local allowed = {}
    local outside = 0
    for _, r in ipairs(all) do
      if r.strategy.tp <= 8 and r.strategy.pp <= 8 then allowed[#allowed + 1] = key_of(r.strategy)
      else outside = outside + 1 end
    end
    assert.is_true(outside > 0)  -- the rule matters on this job
    assert.equal(#allowed, #ranked)
    for i, r in ipairs(ranked) do
      assert.is_true(r.strategy.tp <= info.node_size and r.strategy.pp <= 8)
      assert.equal(allowed[i], key_of(r.strategy))
    end
    assert.is_true(info.refused["filtered out"] > plain.refused["filtered out"])
    assert.is_true(info.priced < plain.priced)
  end)

  it("takes max_pp from the policy options", function()
    local ranked = assert(search(with{policy = "tp_in_node", policy_opts = {max_pp = 4}}))
    for _, r in ipairs(ranked) do assert.is_true(r.strategy.pp <= 4) end
  end)
end)

describe("headroom: best throughput leaving 10% of memory free", function()
  local job = {model = "llama3.1-70b", devices = 64, global_batch = 512, seq_len = 8192,
               tp = {4, 8}}

  it("keeps the default ranking minus what uses the last 10% of the budget", function()
    local all, plain = assert(search(job))
    local args = {policy = "headroom"}
    for k, v in pairs(job) do args[k] = v end
    local ranked, info = assert(search(args))
    assert.near(0.9 * plain.budget_bytes, info.budget_bytes, 1)
    local expected, removed = {}, 0
    for _, r in ipairs(all) do
      if r.peak_memory_bytes <= 0.9 * plain.budget_bytes then expected[#expected + 1] = key_of(r.strategy)
      else removed = removed + 1 end
    end
    assert.is_true(removed > 0)
    assert.equal(#expected, #ranked)
    for i, r in ipairs(ranked) do
      assert.equal(expected[i], key_of(r.strategy))
      assert.is_true(r.peak_memory_bytes <= info.budget_bytes)
    end
  end)

  it("takes the share from the policy options and checks it", function()
    local args = {policy = "headroom", policy_opts = {headroom = 0.5}}
    for k, v in pairs(job) do args[k] = v end
    local _, info = search(args)
    local _, plain = assert(search(job))
    assert.near(0.5 * plain.budget_bytes, info.budget_bytes, 1)
    args.policy_opts = {headroom = 1.5}
    local ok, err = pcall(search, args)
    assert.is_false(ok)
    assert.matches("headroom%.lua:%d+: headroom", err)
  end)
end)
