-- The policy guard and the sandbox from Lua: a called __gc leaves the results safe, one
-- search at a time (a hook cannot start another, the outer deadline holds), budgets must
-- be finite and above 0 everywhere nd.search takes one, and the sandbox's environment.
local nd = require "ndplan"
local core = require "ndplan.c.search"
local policy = require "ndplan.policy"

local small = assert(nd.model{model_type = "llama", hidden_size = 512, num_hidden_layers = 4,
                              num_attention_heads = 8, num_key_value_heads = 8,
                              intermediate_size = 1024, vocab_size = 1000})

local function run(args)
  local base = {model = small, device = "h100", devices = 4, global_batch = 4, seq_len = 1024,
                jobs = 1, top = 1000}
  for k, v in pairs(args) do base[k] = v end
  return nd.search(base)
end

describe("the results object", function()
  it("hides its metatable and stays safe after its __gc is called", function()
    local ranked, info = assert(run{})
    local res = info.results
    assert.is_true(#res > 0)
    assert.equal("ndplan.search.results", getmetatable(res))
    local gc = debug.getmetatable(res).__gc
    gc(res)
    gc(res)  -- twice: nothing is freed again
    assert.equal(0, #res)
    assert.is_nil(res[1])
    assert.same({}, res:misses())
    assert.is_nil(res:fallback())
    assert.is_true(#ranked > 0)  -- the rows already read are plain tables
  end)

  it("protects the metatables of models and devices too", function()
    assert.equal("ndplan.model", getmetatable(small))
    assert.equal("ndplan.device", getmetatable(assert(nd.device("h100"))))
  end)
end)

describe("one search at a time", function()
  local inner = {model = small, device = "h100", devices = 4, global_batch = 4, seq_len = 1024}

  for _, hook in ipairs({"setup", "admit", "objective", "rank", "done"}) do
    it("refuses a search started from " .. hook, function()
      local p = {[hook] = function(...)
        nd.search(inner)
        if hook == "rank" then return {} end
        if hook == "objective" then return 1 end
        return true
      end}
      local ok, err = pcall(function()
        local ranked, info = run{policy = p}
        policy.call(info.policy_table, "done", ranked, {})
      end)
      assert.is_false(ok)
      assert.matches("^policy error in " .. hook .. ": [^\n]*a policy hook cannot start a search",
                     err)
      assert.is_false(core.busy())
    end)
  end

  it("keeps the outer deadline when a hook tries a search", function()
    local t0 = os.clock()
    local ok, err = pcall(run, {timeout = 0.3, policy = {objective = function()
      pcall(nd.search, inner)
      while true do end
    end}})
    assert.is_false(ok)
    assert.matches("^policy error in objective: timed out", err)
    assert.is_true(os.clock() - t0 < 5)
  end)
end)

describe("budgets", function()
  it("refuses 0, negative, NaN and infinite max_mem in nd.search and nd.estimate", function()
    for _, v in ipairs({0, -1, 0 / 0, math.huge, -math.huge, "0B"}) do
      local r, err = run{max_mem = v}
      assert.is_nil(r)
      assert.matches("^max_mem: expected a finite size above 0 bytes, got", err)
      local e, eerr = nd.estimate{model = small, device = "h100", devices = 4, global_batch = 4,
                                  seq_len = 1024, max_mem = v}
      assert.is_nil(e)
      assert.matches("^max_mem: expected a finite size above 0 bytes", eerr)
    end
  end)

  it("refuses a policy's opts.budget_bytes that is not finite and above 0", function()
    for _, v in ipairs({0, -5, 0 / 0, math.huge}) do
      local ok, err = pcall(run, {policy = {setup = function(_, opts) opts.budget_bytes = v end}})
      assert.is_false(ok)
      assert.matches("^policy error in setup: opts%.budget_bytes: expected a finite size", err)
    end
  end)

  it("refuses a budget of 0 at the binding (0 would mean none to the core)", function()
    local dev = assert(nd.device("h100"))
    for _, v in ipairs({0, -1, 0 / 0, math.huge}) do
      local ok, err = pcall(core.run, small, dev, {devices = 4, global_batch = 4, seq_len = 1024},
                            {}, {budget = v})
      assert.is_false(ok)
      assert.matches("^budget: expected a finite number of bytes above 0, got", err)
    end
  end)

  it("refuses an opts.keep past the integers it can hold", function()
    local ok, err = pcall(run, {policy = {setup = function(_, opts) opts.keep = 2 ^ 32 + 5 end}})
    assert.is_false(ok)
    assert.matches("opts%.keep: expected an integer from 1 to 10000000", err)
  end)
end)

describe("the guard", function()
  it("passes results through and turns an error into one line and a traceback", function()
    assert.same({true, 1, 2}, {core.guard({}, function(a) return a, 2 end, 1)})
    local ok, msg = core.guard({}, function() error(setmetatable({}, {__tostring = error})) end)
    assert.is_false(ok)
    assert.matches("^%(error object is a table value%)\nstack traceback:", msg)
  end)

  it("caps the heap while it runs, and only then", function()
    local cap = core.heap_bytes() + 8 * 2 ^ 20
    local ok, msg = core.guard({heap = cap}, function() return string.rep("x", 64 * 2 ^ 20) end)
    assert.is_false(ok)
    assert.matches("^not enough memory %(policy code may grow the Lua heap to %d+ MiB%)", msg)
    assert.equal(64 * 2 ^ 20, #string.rep("x", 64 * 2 ^ 20))
  end)

  it("stops at the deadline even when the code catches the error", function()
    local env = policy.sandbox()
    local chunk = assert(load("while true do pcall(function() while true do end end) end",
                              "=loop", "t", env))
    local ok, msg = core.guard({deadline = core.clock() + 0.2}, chunk)
    assert.is_false(ok)
    assert.matches("^timed out", msg)
  end)
end)

describe("the sandbox's environment", function()
  local env = policy.sandbox()

  it("has no processes, files, environment, search or loaders", function()
    assert.is_nil(env.os.execute)
    assert.is_nil(env.os.getenv)
    assert.is_nil(env.os.remove)
    assert.is_nil(env.io.open)
    assert.is_nil(env.load)
    assert.is_nil(env.loadfile)
    assert.is_nil(env.dofile)
    assert.is_nil(env.debug)
    assert.is_nil(env.nd.search)
    assert.is_nil(env.nd.bundle)
    assert.is_nil(env.nd.files)
    assert.is_nil(env.nd.yaml.load_file)
    assert.is_nil(env.nd.json.load_file)
    assert.is_nil(env.string.dump)
  end)

  it("gives copies: a policy's changes do not reach ndplan", function()
    env.string.format = nil
    env.nd.units.bytes = nil
    env.require("ndplan.grammar").size = nil
    assert.is_function(string.format)
    assert.is_function(require("ndplan.c.units").bytes)
    assert.is_function(require("ndplan.io.grammar").size)
    assert.equal("string", getmetatable(""))
  end)
end)
