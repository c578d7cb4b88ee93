-- nd.estimate by name at C speed (issue 18): loaded models, devices and stack profiles are
-- kept by name and path and read again when their file changes; results build their bulky
-- fields on first read; nothing a caller changes reaches the next call.
require "ndplan"
local nd = require "ndplan"
local json = require "ndplan.io.json"
local files = require "ndplan.c.files"
require("ndplan.config.stack").DEFAULT = "none"

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- A Llama-shaped config.json with `layers` decoder layers.
local function llama(layers)
  return json.encode({model_type = "llama", num_hidden_layers = layers, hidden_size = 1024,
                      intermediate_size = 4096, num_attention_heads = 16,
                      num_key_value_heads = 8, vocab_size = 32000,
                      max_position_embeddings = 4096})
end

local function device_yaml(base, tflops)
  return string.format("base: %s\npeak_tflops: {bf16: %d}\n", base, tflops)
end

local JOB = {devices = 8, global_batch = 64, seq_len = 2048}
local function args(model, device, extra)
  local a = {model = model, device = device, tp = 2}
  for k, v in pairs(JOB) do a[k] = v end
  for k, v in pairs(extra or {}) do a[k] = v end
  return a
end

local dir
before_each(function() dir = os.tmpname(); os.remove(dir); assert(files.mkdir(dir)) end)
after_each(function()
  for _, n in ipairs({"config.json", "base.yaml", "dev.yaml", "stack.yaml"}) do
    os.remove(dir .. "/" .. n)
  end
  os.remove(dir)
end)

describe("the cache of loaded models and devices", function()
  it("gives the same model and device for the same name, and for the same unchanged file", function()
    assert.are.equal(nd.model("llama3.1-70b"), nd.model("llama3.1-70b"))
    assert.are.equal(nd.model("llama3.1-70b"), nd.model("LLaMA3.1-70B") and nd.model("llama3.1-70b"))
    assert.are.equal(nd.device("h100"), nd.device("h100"))
    local path = dir .. "/config.json"
    write(path, llama(8))
    assert.are.equal(nd.model(path), nd.model(path))
  end)

  it("reads a model file again when it changes: the new layer count is priced", function()
    local path = dir .. "/config.json"
    write(path, llama(8))
    local a = assert(nd.estimate(args(path, "h100")))
    assert.are.equal(8, nd.model(path).num_layers)
    write(path, llama(16))
    local b = assert(nd.estimate(args(path, "h100")))
    assert.are.equal(16, nd.model(path).num_layers)
    assert.is_true(b.params.total > a.params.total)
    assert.is_true(b.step_time_s > a.step_time_s)
    -- the same answer as a model loaded afresh from a table of the same config
    local fresh = assert(nd.estimate(args(json.decode(llama(16)), "h100")))
    assert.are.equal(fresh.step_time_s, b.step_time_s)
    assert.are.equal(fresh.params.total, b.params.total)
    -- and the directory form of the same file follows it too
    write(path, llama(12))
    assert.are.equal(12, nd.model(dir).num_layers)
    write(path, llama(10))
    assert.are.equal(10, nd.model(dir).num_layers)
  end)

  it("reads a device file again when it changes, and when a file of its base chain does", function()
    local base, dev = dir .. "/base.yaml", dir .. "/dev.yaml"
    write(base, device_yaml("h100", 900))
    write(dev, "base: base.yaml\nhbm: {capacity: 80GB}\n")
    local a = assert(nd.estimate(args("llama3.1-8b", dev)))
    assert.are.equal(900e12, nd.device(dev):totable().peak_flops.bf16)
    write(base, device_yaml("h100", 450))  -- only the base changes
    local b = assert(nd.estimate(args("llama3.1-8b", dev)))
    assert.are.equal(450e12, nd.device(dev):totable().peak_flops.bf16)
    assert.is_true(b.step_time_s > a.step_time_s)
    write(dev, "base: base.yaml\nhbm: {capacity: 40GB}\n")
    local c = assert(nd.estimate(args("llama3.1-8b", dev)))
    assert.are.equal(40e9, c.budget_bytes)
    assert.are.equal(b.step_time_s, c.step_time_s)
  end)

  it("reads a stack profile given by path again when it changes", function()
    local path = dir .. "/stack.yaml"
    write(path, "name: tmp\ncosts: {step_overhead: 0.01}\n")
    local a = assert(nd.estimate(args("llama3.1-8b", "h100", {stack = path})))
    write(path, "name: tmp\ncosts: {step_overhead: 0.5}\n")
    local b = assert(nd.estimate(args("llama3.1-8b", "h100", {stack = path})))
    assert.is_true(b.step_time_s > a.step_time_s)
  end)

  it("does not keep a file that failed to load", function()
    local path = dir .. "/config.json"
    write(path, "{not json")
    assert.is_nil(nd.model(path))
    write(path, llama(8))
    assert.are.equal(8, assert(nd.model(path)).num_layers)
  end)
end)

describe("what a caller changes does not reach the next call", function()
  local A = args("llama3.1-70b", "h100", {devices = 64, global_batch = 512, seq_len = 8192,
                                           tp = 8, pp = 4, sp = true, zero = 1})

  it("a returned model, device and their tables", function()
    local m, d = nd.model("llama3.1-70b"), nd.device("h100")
    local before = json.encode(nd.estimate(A))
    assert.has_error(function() m.num_layers = 1 end)
    assert.has_error(function() d.hbm_bytes = 1 end)
    local spec, canon, w = m:spec(), d:totable(), m:warnings()
    spec.num_layers, canon.hbm_bytes, w[1] = 1, 1, "changed"
    assert.are.equal(80, nd.model("llama3.1-70b").num_layers)
    assert.are.equal(before, json.encode(nd.estimate(A)))
  end)

  it("a returned result, in any of its fields, built or not", function()
    local r = assert(nd.estimate(A))
    local before = json.encode(r)
    r.stages[1].peak, r.stages[2].chunks[1].layers = 0, 0
    r.strategy.tp, r.strategy.stage_layers[1] = 99, 0
    r.memory_parts_bytes.weights, r.time_parts_s.forward = -1, -1
    r.topology.tp.size, r.params.total, r.precision.recipe = 0, 0, "x"
    r.job.devices, r.step_time_s = 1, 0
    assert.are.equal(before, json.encode(nd.estimate(A)))
    local s = assert(nd.estimate(A))
    s.strategy = nil  -- never built: stays gone
    assert.is_nil(s.strategy)
    assert.is_nil(json.decode(json.encode(s)).strategy)
  end)
end)

describe("lazy result tables", function()
  local A = args("llama3.1-70b", "h100", {devices = 64, global_batch = 512, seq_len = 8192,
                                           tp = 8, pp = 8, vpp = 5, sp = true,
                                           recompute = "selective"})

  it("list every field in pairs and read the same values in any order", function()
    local r1, r2 = assert(nd.estimate(A)), assert(nd.estimate(A))
    local keys = {}
    for k in pairs(r1) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({"allocated_bytes", "budget_bytes", "device", "fits", "hardware_flops",
                     "heaviest_stage", "hfu", "job", "memory_parts_bytes", "mfu", "model",
                     "model_flops", "over_bytes", "params", "peak_memory_bytes", "precision",
                     "reserved_bytes", "schema", "stages", "step_time_s", "strategy",
                     "time_parts_s", "tokens_per_s", "topology"}, keys)
    -- r2 read field by field, the stages first, then encoded: the same bytes
    local _ = r2.stages[8].chunks[5].first_layer, r2.topology, r2.strategy.tp
    assert.are.equal(json.encode(r1), json.encode(r2))
    assert.are.equal(8, #r2.stages)
    assert.are.equal(5, #r2.stages[8].chunks)
    assert.are.equal(r1.stages[3].peak, r2.stages[3].peak)
  end)

  it("give a strategy that passes straight back into nd.estimate", function()
    local r = assert(nd.estimate(A))
    local again = {}
    for k, v in pairs(r.strategy) do again[k] = v end
    for k, v in pairs(args("llama3.1-70b", "h100", JOB)) do
      if again[k] == nil then again[k] = v end
    end
    again.devices, again.global_batch, again.seq_len = 64, 512, 8192
    local r2 = assert(nd.estimate(again))
    assert.are.equal(r.step_time_s, r2.step_time_s)
    assert.are.equal(json.encode(r.stages), json.encode(r2.stages))
  end)
end)

describe("nd.estimate's layer prices kept from the last call", function()
  -- The binding keeps the last call's layer-kind prices while the model, device, job and
  -- costs stay the same. Each case prices X after a call that shares everything with it but
  -- one input, and must give what X gives after a call that shares nothing with it.
  local base = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
                seq_len = 8192, tp = 8, pp = 4, sp = true, recompute = "selective"}
  local other = {model = "qwen3-30b-a3b", device = "b200", devices = 8, global_batch = 64,
                 seq_len = 2048, tp = 2, sp = true}
  local function with(t, k, v)
    local c = {}
    for key, val in pairs(t) do c[key] = val end
    c[k] = v
    return c
  end
  local function encoded(a) return json.encode(assert(nd.estimate(a))) end
  local function after_other(a)
    assert(nd.estimate(other))
    return encoded(a)
  end
  local changes = {
    {"seq_len", 4096}, {"model", "llama3.1-8b"}, {"device", "h200"},
    {"costs", {memory_ops = 3}}, {"stack", "torchtitan"},
  }
  for _, ch in ipairs(changes) do
    it("prices again when " .. ch[1] .. " changes", function()
      local x, y = base, with(base, ch[1], ch[2])
      local x_cold, y_cold = after_other(x), after_other(y)
      assert.are_not.equal(x_cold, y_cold)  -- the change is priced: a reuse would show
      assert(nd.estimate(y))
      assert.are.equal(x_cold, encoded(x))
      assert(nd.estimate(x))
      assert.are.equal(y_cold, encoded(y))
      assert.are.equal(y_cold, encoded(y))  -- and the same call again, from what it kept
    end)
  end

  it("prices a model file read again: a new model, its layers wider", function()
    local path = dir .. "/config.json"
    write(path, llama(4))
    local a = args(path, "h100")
    local narrow = encoded(a)
    local cfg = json.decode(llama(4))
    cfg.intermediate_size = 8192  -- the layer kinds' prices change, their count does not
    write(path, json.encode(cfg))
    collectgarbage()  -- the old model may go: the binding keeps what its prices are of
    local wide = encoded(a)
    assert.are_not.equal(narrow, wide)
    assert.are.equal(wide, after_other(a))
  end)

end)

describe("nd.estimate called while another call is under way", function()
  -- The binding prices into a scratch of the state's; a call made from inside another (a
  -- finalizer run by the collector while a result is built, a metamethod of an argument
  -- read) gets a scratch of its own, so the outer result keeps its own figures.
  local A = {model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64,
             seq_len = 4096, tp = 2, sp = true}
  local B = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
             seq_len = 8192, tp = 8, pp = 4}
  local function encoded(a) return json.encode(assert(nd.estimate(a))) end

  it("from a finalizer the collector runs while a result is built", function()
    -- (the stack profile's figures make the result's building allocate where the collector
    -- runs the finalizers: without the scratch of its own, most results took B's figures)
    local a = {stack = "megatron-core", tp = 1}
    for k, v in pairs(A) do if a[k] == nil then a[k] = v end end
    local want, other = assert(nd.estimate(a)), assert(nd.estimate(B))
    assert.are_not.equal(want.step_time_s, other.step_time_s)
    local mt = {__gc = function() assert(nd.estimate(B)) end}
    local wrong, last = 0, nil
    collectgarbage("incremental", 1, 1000)  -- a cycle at almost every allocation
    local ok, err = pcall(function()
      for _ = 1, 300 do
        for _ = 1, 5 do setmetatable({}, mt) end
        last = assert(nd.estimate(a))
        if last.step_time_s ~= want.step_time_s or last.peak_memory_bytes ~= want.peak_memory_bytes
           or #last.stages ~= #want.stages then
          wrong = wrong + 1
        end
      end
    end)
    collectgarbage("incremental", 200, 100)  -- Lua's defaults
    assert(ok, err)
    assert.are.equal(0, wrong)
    assert.are.equal(json.encode(want), json.encode(last))
  end)

  it("from a metamethod of an argument being read", function()
    local ops = setmetatable({}, {
      __len = function() assert(nd.estimate(B)); return 1 end,
      __index = function(_, i) return i == 1 and "attn_core" or nil end})
    local a, plain = {}, {}
    for k, v in pairs(A) do a[k], plain[k] = v, v end
    a.recompute, plain.recompute = "selective", "selective"
    a.selective_ops, plain.selective_ops = ops, {"attn_core"}
    local want = encoded(plain)
    assert.are.equal(want, encoded(a))
    assert.are.equal(want, encoded(plain))  -- and the next call as before
  end)
end)

describe("nd.estimate's plain call (core.estimate) and its general path", function()
  -- A call naming bundled objects, with nothing only the general path reads, is priced by
  -- one call of the binding. Each plain call must give what the general path gives for the
  -- same arguments (forced here by a max_mem equal to the budget the general path finds for
  -- them, strict = false forcing it too): the same result, field by field, and the same
  -- message for each misuse.
  local core = require "ndplan.c.estimate"
  local real, plain = core.estimate, 0
  before_each(function()
    plain = 0
    core.estimate = function(...)  -- counts the calls the binding takes as plain
      local r, why = real(...)
      if r ~= false then plain = plain + 1 end
      return r, why
    end
  end)
  after_each(function() core.estimate = real end)

  local BASE = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
                seq_len = 8192, stack = "megatron-core"}
  local function call(extra)
    local a = {}
    for k, v in pairs(BASE) do a[k] = v end
    for k, v in pairs(extra) do a[k] = v end
    return a
  end
  local function general(a)
    local g = {}
    for k, v in pairs(a) do g[k] = v end
    g.strict = false
    g.max_mem = assert(nd.estimate(g)).budget_bytes
    g.strict = nil
    return g
  end
  -- what a call gives: the result encoded whole, or the message (its position dropped)
  local function outcome(a)
    local ok, r, why = pcall(nd.estimate, a)
    if not ok then return "raises " .. tostring(r):gsub("^[^ ]+:%d+: ", "") end
    if not r then return "refuses " .. tostring(why) end
    return json.encode(r)
  end

  local priced = {
    {tp = 8, pp = 4, sp = true, zero = 1, recompute = "full"},
    {tp = 8, pp = 8, vpp = 5, sp = true, recompute = "selective"},
    {tp = 4, pp = 2, cp = 2, sp = true},
    {tp = 16, pp = 4, sp = true},  -- over the KV heads: a warning
    {tp = 8, pp = 4, zero = 3, dp_shard = 2, precision = "fp8"},
    {tp = 8, pp = 4, selective_ops = {"attn_core"}, recompute = "selective", mbs = 2},
    {tp = 8, pp = 4, stack = "torchtitan", precision = "fp8", schedule = "gpipe"},
    {tp = 8, pp = 4, sharded_over = {optimizer = 8}, layout_from = "even"},  -- a result's
    {model = "deepseek-v3", device = "h800", devices = 256, global_batch = 4096,
     seq_len = 4096, pp = 8, ep = 32, zero = 1, precision = "fp8"},
    {model = nd.model("qwen3-30b-a3b"), device = nd.device("b200"), devices = 8,
     global_batch = 64, seq_len = 2048, tp = 2, sp = true},
  }
  for i, extra in ipairs(priced) do
    it("prices case " .. i .. " as the general path does", function()
      local a = call(extra)
      local g = general(a)  -- (its first call may resolve the objects)
      plain = 0
      local fast = outcome(a)
      assert.are.equal(1, plain)
      assert.are.equal(outcome(g), fast)
      assert.are.equal(1, plain)  -- max_mem: the general path alone
      local r = assert(nd.estimate(a))
      assert.are.same(assert(nd.estimate(general(a))).warnings, r.warnings)
    end)
  end

  it("gives each misuse and refusal the general path's message", function()
    local bad = {
      {tp = "x"}, {tp = 8.5}, {sp = "yes"}, {recompute = "nope"}, {recompute = true},
      {schedule = 5}, {schedule = true}, {selective_ops = 5}, {layer_recompute = {true}},
      {layer_offload = 1}, {precision = "fp7"}, {offload = "half"}, {bogus = 1}, {[1] = 2},
      {tp = 3}, {zero = 5}, {devices = 64.0}, {devices = 64.5}, {devices = 0},
      {devices = "x"}, {seq_len = 2000000000}, {bogus = 1, devices = 64.5},
      {bogus = 1, tp = "x"}, {tp = "x", devices = 0},
    }
    assert(nd.estimate(call{tp = 8, pp = 4}))
    for _, extra in ipairs(bad) do
      local a = call(extra)
      if a.tp == nil then a.tp, a.pp = 8, 4 end
      local g = {}
      for k, v in pairs(a) do g[k] = v end
      g.max_mem = 80e9
      assert.are.equal(outcome(g), outcome(a))
    end
  end)

  it("leaves a call with anything only the general path reads to it", function()
    local path = dir .. "/config.json"
    write(path, llama(8))
    local general_only = {
      {costs = {dp_overlap = 0}}, {max_mem = "70GiB"}, {strict = true}, {strict = false},
      {layout = "balanced", max_mem = "70GiB"}, {layout = "even"},
      {stage_layers = {20, 20, 20, 20}}, {pipeline_model_parallel_layout = "Et*20|t*20|t*20|t*20L"},
      {recompute = "per_layer", max_mem = "70GiB"}, {recompute = "megatron", max_mem = "70GiB"},
      {stack = "none"}, {devices = 64.0}, {model = path, devices = 8, global_batch = 64},
    }
    for _, extra in ipairs(general_only) do
      local a = call(extra)
      a.tp, a.pp = a.tp or 8, a.pp or 4
      plain = 0
      pcall(nd.estimate, a)
      pcall(nd.estimate, a)
      assert.are.equal(0, plain, next(extra))
    end
  end)
end)

describe("the states of lazy results", function()
  local A = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
             seq_len = 8192, tp = 8, pp = 8, vpp = 5, sp = true, stack = "megatron-core"}

  it("stay while their result does, whatever is collected meanwhile", function()
    local kept = {}
    for i = 1, 50 do kept[i] = assert(nd.estimate(A)) end
    for _ = 1, 2000 do nd.estimate(A) end
    collectgarbage()
    collectgarbage()
    local want = json.encode(assert(nd.estimate(A)))
    for i = 1, 50, 7 do assert.are.equal(want, json.encode(kept[i])) end
    assert.are.equal("megatron-core", kept[50].stack.name)
    assert.are.equal(5, #kept[49].stages[8].chunks)
  end)

  it("go with their results", function()
    for _ = 1, 100 do nd.estimate(A) end
    collectgarbage()
    collectgarbage()
    local before = collectgarbage("count")
    for _ = 1, 20000 do nd.estimate(A) end  -- about 40 MB, were their states kept
    collectgarbage()
    collectgarbage()
    assert.is_true(collectgarbage("count") - before < 2048)
  end)
end)

describe("a misused strategy field", function()
  local A = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
             seq_len = 8192, tp = 8, pp = 4}
  local function raised(k, v)
    local a = {}
    for key, val in pairs(A) do a[key] = val end
    a[k] = v
    local ok, err = pcall(nd.estimate, a)
    assert.is_false(ok)
    return tostring(err)
  end

  it("is named with what was expected and what was given", function()
    assert.matches("recompute: expected none, selective or full, got boolean",
                   raised("recompute", true), 1, true)
    assert.matches("schedule: expected 1f1b, interleaved, gpipe, zb or dualpipe, got boolean",
                   raised("schedule", true), 1, true)
    assert.matches("selective_ops: expected an array of op names, got number",
                   raised("selective_ops", 5), 1, true)
    assert.matches("layer_recompute: expected an array of mode names, got number",
                   raised("layer_recompute", 5), 1, true)
    assert.matches("layer_recompute[2]: expected a mode name, got boolean",
                   raised("layer_recompute", {"full", true}), 1, true)
    assert.matches("layer_offload: expected an array of true or false, got string",
                   raised("layer_offload", "yes"), 1, true)
    assert.matches("stage_layers: expected an array of layer counts, got number",
                   raised("stage_layers", 80), 1, true)
    assert.matches("stage_layers[3]: expected a layer count, got boolean",
                   raised("stage_layers", {20, 20, true, 20}), 1, true)
    assert.matches("pipeline_model_parallel_layout: expected a layout string, got table",
                   raised("pipeline_model_parallel_layout", {}), 1, true)
  end)
end)
