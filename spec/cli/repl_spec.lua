-- Issue 16, item 6: the REPL under a pseudo-terminal (spec/support/pty_run.c types each
-- line once the prompt shows, as a user would): help(topic), Tab completion of nd. names,
-- fields and model and device names, the history file, and results printed as their CLI
-- summaries. Plus the rule of nd.estimate's errors: misuse raises, an expected failure
-- returns nil, message.
local R = dofile("spec/support/run.lua")

local PTY = os.getenv("NDPLAN_PTY_RUN") or "build/spec/pty_run"
local have_pty = io.open(PTY, "rb") ~= nil

-- repl(lines, env) -> {out (terminal codes and \r removed), code}
local function repl(lines, env)
  local input = R.tempfile(table.concat(lines, "\n") .. "\n")
  local r = R.sh(string.format("%s %s 20 %s < %s", env or "", R.quote(PTY), R.quote(R.bin),
                               R.quote(input)))
  os.remove(input)
  r.out = r.out:gsub("\27%[[%d;]*%a", ""):gsub("[\r\7]", "")
  return r
end

local function needs_pty()
  if not have_pty then pending("no pty_run helper at " .. PTY) end
  return have_pty
end

describe("the REPL on a terminal", function()
  local home
  before_each(function() home = R.tmpdir() end)
  after_each(function() os.execute("rm -rf " .. R.quote(home)) end)
  local function env() return "HOME=" .. R.quote(home) .. " XDG_STATE_HOME= NDPLAN_HISTORY=" end

  it("help() lists the topics and help(topic) prints one", function()
    if not needs_pty() then return end
    local r = repl({"help()", "help(nd.search)", 'help("errors")', 'help("nothing")'}, env())
    assert.equal(0, r.code, r.out)
    assert.matches("\n  nd.estimate +price one strategy", r.out)
    assert.matches("nd.search %-%- every strategy of a job", r.out)
    assert.matches("Misuse raises", r.out, 1, true)
    assert.matches("no help for nothing; the topics:", r.out, 1, true)
    assert.is_nil(r.out:find("traceback", 1, true))
  end)

  it("completes nd. names, fields, and model and device names with Tab", function()
    if not needs_pty() then return end
    local r = repl({"x = nd.est\t", "print(x == nd.estimate)", "print(nd.gram\t.si\t == nd.grammar.size)",
                    'm = nd.model("llama3.1-7\t")', "print(m.name)",
                    'd = nd.device("mi30\t")', "print(d.name)"}, env())
    assert.equal(0, r.code, r.out)
    local _, trues = r.out:gsub("\ntrue\n", "")
    assert.equal(2, trues, r.out)
    assert.matches("\nllama3.1%-70b\n", r.out)
    assert.matches("\nMI300X\n", r.out)
  end)

  it("keeps the history in ~/.ndplan_history, $XDG_STATE_HOME/ndplan/history or $NDPLAN_HISTORY", function()
    if not needs_pty() then return end
    local r = repl({"a = 6 * 7", "print(a)"}, "HOME=" .. R.quote(home) .. " XDG_STATE_HOME=")
    assert.equal(0, r.code, r.out)
    local h = R.read(home .. "/.ndplan_history")
    assert.is_truthy(h, "no history file")
    assert.matches("a\\040=\\0406\\040*\\0407", h, 1, true)
    -- the next session reads it: Up arrow brings the last line back (a is nil there)
    local again = repl({"\27[A"}, "HOME=" .. R.quote(home) .. " XDG_STATE_HOME=")
    assert.matches("> print%(a%)\nnil\n", again.out)
    local state = home .. "/state"
    repl({"b = 1"}, "HOME=" .. R.quote(home) .. " XDG_STATE_HOME=" .. R.quote(state))
    assert.matches("b\\040=\\0401", R.read(state .. "/ndplan/history") or "", 1, true)
    local mine = home .. "/mine"
    repl({"c = 2"}, "NDPLAN_HISTORY=" .. R.quote(mine))
    assert.matches("c\\040=\\0402", R.read(mine) or "", 1, true)
  end)

  it("prints an estimate and a search as their CLI summaries", function()
    if not needs_pty() then return end
    local job = 'model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64, seq_len = 4096'
    local r = repl({"r = nd.estimate{" .. job .. ", tp = 2, zero = 1}", "r",
                    "nd.search{" .. job .. ", tp = {1, 2}}"}, env())
    assert.equal(0, r.code, r.out)
    assert.is_nil(r.out:find("table: 0x", 1, true), r.out)
    local cli = R.run({"estimate", "-m", "llama3.1-8b", "-A", "h100", "-d", "8", "-b", "64",
                       "--tp", "2", "--zero", "1"})
    assert.matches(cli.out:gsub("%p", "%%%0"), r.out)   -- the same text as the command's
    assert.matches("\nrank +dp +tp", r.out)
    assert.matches("\n%d+ tested: %d+ refused", r.out)
  end)
end)

describe("nd.estimate's errors", function()
  local base = 'model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64, seq_len = 4096'
  local function run(code) return R.run({"-e", code}) end

  it("raises on misuse", function()
    for _, call in ipairs({"nd.estimate()", "nd.estimate{" .. base .. ", bogus = 1}",
                           'nd.estimate{device = "h100", devices = 8, global_batch = 64, seq_len = 4096}',
                           "nd.estimate{" .. base:gsub("devices = 8", 'devices = "8"') .. "}",
                           "nd.search{" .. base:gsub("seq_len = 4096", "seq_len = true") .. "}"}) do
      local r = run("local ok, err = pcall(function() return " .. call .. " end) "
                    .. "io.write(tostring(ok), ' ', tostring(err))")
      assert.equal(0, r.code, r.err)
      assert.matches("^false nd%.%a+: ", r.out, nil, call)
    end
  end)

  it("returns nil, message on an expected failure", function()
    for _, case in ipairs({{'model = "no-such-model"', "no%-such%-model"},
                           {'device = "no-such-device"', "no%-such%-device"},
                           {"tp = 3", "devices: 8 is not a multiple"},
                           {'max_mem = "80"', "needs a unit"}}) do
      local args = base
      local key = case[1]:match("^(%w+)")
      if args:find(key .. " =", 1, true) then args = args:gsub(key .. ' = [^,]+', case[1])
      else args = args .. ", " .. case[1] end
      local r = run("local r, why = nd.estimate{" .. args .. "} io.write(tostring(r), ' ', why)")
      assert.equal(0, r.code, r.err)
      assert.matches("^nil .*" .. case[2], r.out)
    end
  end)
end)

describe("the REPL under attack (issue 17)", function()
  local home
  before_each(function() home = R.tmpdir() end)
  after_each(function() os.execute("rm -rf " .. R.quote(home)) end)
  local function env() return "HOME=" .. R.quote(home) .. " XDG_STATE_HOME= NDPLAN_HISTORY=" end

  it("Ctrl-C at the prompt drops the entry and the session goes on (it ended it)", function()
    if not needs_pty() then return end
    local r = repl({"x = 1 +\3", "y = {", "\3", "print('alive', x, y)"}, env())
    assert.equal(0, r.code, r.out)
    assert.matches("alive\tnil\tnil", r.out)
  end)

  it("reads a piped line of any length whole (lines were split at 511 bytes)", function()
    local r = R.run({"-"}, {stdin = "x = '" .. ("a"):rep(5000) .. "'\nprint(#x)\n"})
    assert.equal(0, r.code, r.err)
    assert.equal("5000\n", r.out)
    r = R.run({"-i"}, {stdin = "x = '" .. ("a"):rep(5000) .. "'\nprint(#x)\n"})
    assert.equal(0, r.code, r.err)
    assert.matches("5000", r.out)
  end)
end)
