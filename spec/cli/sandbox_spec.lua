-- The policy sandbox as an attacker meets it: one spec per escape of issue 17 (programs,
-- files, the environment, the shared string metatable, outputs outside -o), the crash of a
-- called __gc, hooks that never end (every hook and the file's load under --timeout, a
-- pcall or a coroutine that would swallow the stop, code stuck in one C call, Ctrl-C twice),
-- the heap cap, and the answers to a NaN objective, error(nil) and a rank of numbers.
-- Every run is wrapped in `timeout -s KILL`, so a sandbox that fails cannot hang the suite.
local R = dofile("spec/support/run.lua")

local LIMIT = 30  -- seconds before a run counts as hung (exit 137)
local BIN = R.bin:sub(1, 1) == "/" and R.bin or os.getenv("PWD") .. "/" .. R.bin

local function quoted(args)
  local words = {}
  for i, a in ipairs(args) do words[i] = R.quote(a) end
  return table.concat(words, " ")
end

-- search(policy_path, extra..., {cwd=, env=}) -> {out=, err=, code=} of a small search
local function search(path, ...)
  local extra, opts = {...}, {}
  if type(extra[#extra]) == "table" then opts = table.remove(extra) end
  local args = {"search", "-m", "llama3.1-8b", "-d", "8", "-b", "8", "--tp", "1,2", "--pp", "1",
                "-t", "3", "--policy", path}
  for _, a in ipairs(extra) do args[#args + 1] = a end
  local r = R.sh(string.format("%s %s timeout -s KILL %d %s %s; echo \"exit $?\" >&2",
                               opts.cwd and "cd " .. R.quote(opts.cwd) .. " &&" or "",
                               opts.env or "", LIMIT, R.quote(BIN), quoted(args)))
  r.code = tonumber(r.err:match("exit (%d+)\n$"))
  r.err = r.err:gsub("exit %d+\n$", "")
  return r
end

local function policy(text) return R.tempfile(text, ".lua") end

local function fresh_path()
  local p = os.tmpname()
  os.remove(p)
  return p
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- one line on stderr, "ndplan: policy error in HOOK: ...", exit 1
local function refused(r, hook, pattern)
  assert.equal(1, r.code, r.err)
  assert.matches("^ndplan: policy error in " .. hook .. ": [^\n]*" .. (pattern or "") .. "[^\n]*\n$",
                 r.err)
end

describe("the policy sandbox", function()
  it("offers no nd.search, so a policy cannot reload itself with unsafe_policy", function()
    local marker = fresh_path()
    local path = fresh_path() .. ".lua"
    local f = assert(io.open(path, "wb"))
    f:write(string.format([[
if os.execute then os.execute("touch %s") end
return {setup = function()
  nd.search{model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 8,
            seq_len = 4096, tp = 1, pp = 1, policy = %q, unsafe_policy = true}
end}
]], marker, path))
    f:close()
    local r = search(path)
    assert.is_false(exists(marker))
    refused(r, "setup", "search")
    os.remove(path)
    os.remove(marker)
  end)

  it("refuses require of ndplan.c.bundle (a chunk in the real environment)", function()
    local marker = fresh_path()
    local path = policy(string.format([[
local files = require("ndplan.c.bundle").load("lua/ndplan/io/files.lua")()
files.write_atomic(%q, "pwned")
return {}
]], marker))
    local r = search(path)
    assert.is_false(exists(marker))
    refused(r, "load", "require 'ndplan.c.bundle' is not allowed")
    os.remove(path)
  end)

  it("resolves require only on its allow-list, never from ./?.lua", function()
    local dir = R.tmpdir()
    assert(os.execute("mkdir " .. R.quote(dir .. "/ndplan")))
    local f = assert(io.open(dir .. "/ndplan/pwn.lua", "wb"))
    f:write("os.execute('touch pwned') return {}\n")
    f:close()
    local path = policy("require('ndplan.pwn')\nreturn {}\n")
    local r = search(path, {cwd = dir})
    assert.is_false(exists(dir .. "/pwned"))
    refused(r, "load", "require 'ndplan.pwn' is not allowed")
    os.execute("rm -rf " .. R.quote(dir))
    os.remove(path)
  end)

  -- each attempt says READ-OK when it got the file's contents (the loaders echo none)
  local MODEL = '{"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4, '
             .. '"num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 1024, '
             .. '"vocab_size": 1000}'
  local READS = {
    {"ndplan.files.read", "key: SECRET\n", ".yaml",
     "local t = require('ndplan.io.files').read(%q) error(t and t:match('SECRET') and 'READ-OK')"},
    {"nd.yaml.load_file", "key: SECRET\n", ".yaml",
     "local d = nd.yaml.load_file(%q) error(d and d.key == 'SECRET' and 'READ-OK')"},
    {"nd.model(PATH)", MODEL, ".json", "local m, e = nd.model(%q) error(m and 'READ-OK' or e)"},
    {"nd.device(PATH)", "base: h100\n", ".yaml",
     "local d, e = nd.device(%q) error(d and 'READ-OK' or e)"},
    {"a device's base", "base: h100\n", ".yaml",
     "local d, e = nd.device{base = %q} error(d and 'READ-OK' or e)"},
    {"nd.estimate{model = PATH}", MODEL, ".json", "local r, e = nd.estimate{model = %q, "
       .. "device = 'h100', devices = 8, global_batch = 8, seq_len = 4096} error(r and 'READ-OK' or e)"},
  }
  for _, case in ipairs(READS) do
    it("reads no file through " .. case[1], function()
      local file = R.tempfile(case[2], case[3])
      local path = policy(string.format(case[4], file) .. "\nreturn {}\n")
      local r = search(path)
      assert.not_matches("READ%-OK", r.err)
      refused(r, "load")
      os.remove(path)
      os.remove(file)
    end)
  end

  local WRITES = {
    {"ndplan.files.write_atomic", "require('ndplan.io.files').write_atomic(%q, 'gone')"},
    {"ndplan.c.files.mkdir", "require('ndplan.c.files').mkdir(%q .. '.d')"},
    {"nd.search{csv = PATH}", "nd.search{model = 'llama3.1-8b', device = 'h100', devices = 8, "
       .. "global_batch = 8, seq_len = 4096, tp = 1, pp = 1, csv = %q}"},
  }
  for _, case in ipairs(WRITES) do
    it("writes no file through " .. case[1], function()
      local victim = R.tempfile("precious\n", ".csv")
      local path = policy("return {setup = function() " .. string.format(case[2], victim)
                          .. " end}\n")
      local r = search(path)
      refused(r, "setup")
      assert.equal("precious\n", R.read(victim))
      assert.is_false(exists(victim .. ".d"))
      os.remove(path)
      os.remove(victim)
      os.remove(victim .. ".d")
    end)
  end

  it("lets out.write take plain names only, inside -o DIR", function()
    local dir = R.tmpdir()
    local out = dir .. "/out"
    local path = policy([[return {done = function(ranked, out)
  assert(out.write("ok.txt", "fine"))
  out.write("../escaped.txt", "x")
end}
]])
    local r = search(path, "-o", out)
    refused(r, "done", "plain file name")
    assert.is_false(exists(dir .. "/escaped.txt"))
    assert.is_nil(R.read(out .. "/ok.txt"))  -- the run failed: none of its files is put in place
    os.remove(path)
    path = policy([[return {done = function(ranked, out) assert(out.write("ok.txt", "fine")) end}
]])
    r = search(path, "-o", out)
    assert.equal(0, r.code, r.err)
    assert.equal("fine", R.read(out .. "/ok.txt"))
    os.execute("rm -rf " .. R.quote(dir))
    os.remove(path)
  end)

  it("keeps the shared string metatable out of reach: what ndplan prints stays true", function()
    local path = policy([[
local mt = getmetatable("")
if type(mt) == "table" then mt.__index.format = function() return "999999" end end
return {objective = function(e) return ("%d"):format(1) == "1" and e.step_time_s or 0 end}
]])
    local r = search(path)
    assert.equal(0, r.code, r.err)
    assert.not_matches("999999", r.out)
    assert.matches("\n%s+1%s+%d+%s+%d", r.out)
    os.remove(path)
  end)

  it("hides the environment (no os.getenv)", function()
    local path = policy("error(tostring(os.getenv and os.getenv('NDPLAN_SPEC_SECRET')))\nreturn {}\n")
    local r = search(path, {env = "NDPLAN_SPEC_SECRET=hunter2"})
    assert.equal(1, r.code)
    assert.not_matches("hunter2", r.err)
    os.remove(path)
  end)

  it("prints to stderr, so --json stays one document", function()
    local path = policy("print('hello from the policy') io.write('and more', 1, '\\n')\n"
                        .. "return {objective = function(e) print(e.step_time_s) return e.step_time_s end}\n")
    local r = search(path, "--json")
    assert.equal(0, r.code, r.err)
    assert.equal("ndplan.search/1", require("cjson").decode(r.out).schema)
    assert.matches("hello from the policy\nand more1\n", r.err)
    os.remove(path)
  end)

  it("allows no __gc metamethod (it would run outside every limit)", function()
    local path = policy([[return {setup = function()
  setmetatable({}, {__gc = function() while true do end end})
end}
]])
    local r = search(path, "--timeout", "1")
    refused(r, "setup", "__gc metamethods are not allowed")
    os.remove(path)
  end)

  it("still runs bundled pure modules and nd's pure calls", function()
    local path = policy([[
local g = require("ndplan.grammar")
local budget = assert(g.size("70GiB"))
-- the library's ndplan.io.json and ndplan.io.yaml, under the names policies use
assert(require("ndplan.json").encode({b = 1, a = {2}}) == '{"a":[2],"b":1}')
assert(require("ndplan.yaml").decode("k: [1, 2]\n").k[2] == 2)
local m = assert(nd.model("llama3.1-8b"))
assert(nd.estimate{model = m, device = "h100", devices = 8, global_batch = 8, seq_len = 4096})
return {setup = function(job, opts) opts.budget_bytes = budget end}
]])
    local r = search(path)
    assert.equal(0, r.code, r.err)
    assert.matches("ranked within 70%.0 GiB", r.out)  -- the policy's budget ranks
    os.remove(path)
  end)
end)

describe("policy crashes", function()
  it("cannot reach the results' metatable to call __gc", function()
    local path = policy([[return {rank = function(results, opts)
  getmetatable(results).__gc(results)
  return {results[1]}
end}
]])
    local r = search(path)
    refused(r, "rank")
    os.remove(path)
  end)
end)

describe("policy hooks under --timeout", function()
  for _, case in ipairs({
    {"load", "while true do end\nreturn {}\n"},
    {"setup", "return {setup = function() while true do end end}\n"},
    {"rank", "return {rank = function() while true do end end}\n"},
    {"done", "return {done = function() while true do end end}\n"},
    {"objective", "return {objective = function() while true do pcall(function() while true do end end) end end}\n"},
    {"objective", "local co = coroutine.wrap(function() while true do end end)\n"
                  .. "return {objective = function() co() end}\n"},
  }) do
    it("stops a loop in " .. case[1] .. " (" .. #case[2] .. " bytes of policy)", function()
      local path = policy(case[2])
      local t0 = os.time()
      local r = search(path, "--timeout", "0.5")
      refused(r, case[1], "timed out")
      assert.is_true(os.time() - t0 < 10)
      os.remove(path)
    end)
  end

  it("ends the process when a hook is stuck inside one C call past the deadline", function()
    local path = policy([[return {objective = function()
  return #string.rep("a", 40):match(string.rep(".-", 30) .. "b")
end}
]])
    local r = search(path, "--timeout", "0.5")
    assert.equal(1, r.code, r.err)
    assert.matches("^ndplan: policy error: timed out, and the policy did not stop", r.err)
    os.remove(path)
  end)

  it("caps the Lua heap policy code may grow (--policy-mem)", function()
    local path = policy([[return {setup = function()
  local t = {}
  while true do t[#t + 1] = string.rep("x", 1 << 20) .. #t end
end}
]])
    local r = search(path, "--policy-mem", "64MiB")
    refused(r, "setup", "not enough memory %(policy code may grow the Lua heap to %d+ MiB%)")
    local bad = search(path, "--policy-mem", "0B")
    assert.equal(2, bad.code)
    assert.matches("^ndplan: %-%-policy%-mem: expected a finite size above 0 bytes", bad.err)
    os.remove(path)
  end)

  it("ends on a second Ctrl-C even while a hook is stuck inside one C call", function()
    -- The signals wait for the hook's marker on stderr: a fixed sleep raced a slow start
    -- (ASan on a loaded machine), when the first Ctrl-C came before the hook ran and ended
    -- the search cleanly (exit 1) before the second. The pattern is built before the marker,
    -- so after it only the call into string.match is left, which runs far past LIMIT.
    local path = policy([[return {objective = function()
  local s, p = string.rep("a", 40), string.rep(".-", 30) .. "b"
  print("ready: stuck in one C call")
  return #s:match(p)
end}
]])
    local err = fresh_path()
    local r = R.sh(string.format("$NDPLAN search -m llama3.1-8b -d 8 -b 8 --policy %s 2>%s & pid=$!; "
                                 .. "(sleep %d; kill -KILL $pid) 2>/dev/null & guard=$!; "
                                 .. "i=0; until grep -q '^ready' %s 2>/dev/null || [ $i -ge %d ]; "
                                 .. "do sleep 0.1; i=$((i+1)); done; "
                                 .. "sleep 0.2; kill -INT $pid; sleep 0.5; kill -INT $pid; "
                                 .. "wait $pid; echo \"exit $?\"; kill $guard",
                                 R.quote(path), R.quote(err), LIMIT, R.quote(err), LIMIT * 10))
    local log = io.open(err, "rb")
    local text = log and log:read("a") or ""
    if log then log:close() end
    assert.matches("^ready: stuck in one C call\n", text)  -- the hook was running
    assert.equal(130, tonumber(r.out:match("exit (%d+)")), text)  -- SIGINT, not the guard's KILL
    os.remove(path)
    os.remove(err)
  end)
end)

describe("policy answers ndplan refuses", function()
  it("refuses a NaN objective, naming the hook", function()
    local r = search(policy("return {objective = function() return 0/0 end}\n"))
    refused(r, "objective", "NaN")
  end)

  it("says error(nil) in one line", function()
    local r = search(policy("return {objective = function() error(nil) end}\n"))
    refused(r, "objective", "%(error object is a nil value%)")
  end)

  it("says a rank of numbers in one line", function()
    local r = search(policy("return {rank = function() return {1, 2, 3} end}\n"))
    refused(r, "rank", "expected a list of result rows")
  end)

  it("refuses a budget from setup that is 0, negative, NaN or infinite", function()
    for _, v in ipairs({"0", "-1", "0/0", "math.huge"}) do
      local r = search(policy("return {setup = function(job, opts) opts.budget_bytes = " .. v
                              .. " end}\n"))
      refused(r, "setup", "opts%.budget_bytes: expected a finite size above 0 bytes")
    end
  end)
end)
