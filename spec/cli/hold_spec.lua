-- Issue 17 ("hold under attack"): each attack of the battery that this file covers, run the
-- way a user would, with what ndplan must answer instead (one line, the input named, exit
-- code, nothing lost).
local R = dofile("spec/support/run.lua")

local function one_line(r)
  assert.is_nil(r.err:find("stack traceback", 1, true), r.err)
  assert.equal(1, select(2, r.err:gsub("\n", "")), r.err)
end

local function job(cmd, extra)
  local a = {cmd, "-m", "llama3.1-8b", "-d", "8", "-b", "8", "--stack", "none"}
  for _, x in ipairs(extra or {}) do a[#a + 1] = x end
  return a
end

describe("counts past the job's bounds are refused, not wrapped (issue 17)", function()
  it("a global batch of 10^15 (mb wrapped to -728,182,784, a negative step time)", function()
    for _, cmd in ipairs({"estimate", "search"}) do
      local a = job(cmd, {"--zero", "3"})
      a[7] = "1000000000000000"
      local r = R.run(a)
      assert.equal(1, r.code, cmd .. ": " .. r.err)
      assert.matches("global_batch: expected 1 to 16777216 sequences, got 1000000000000000", r.err)
      one_line(r)
    end
  end)

  it("a global batch of 8*10^9 with pp 2 vpp 2 (-1.17 EiB of activations)", function()
    local a = job("estimate", {"--pp", "2", "--vpp", "2"})
    a[7] = "8000000000"
    local r = R.run(a)
    assert.equal(1, r.code)
    assert.matches("global_batch: expected 1 to 16777216", r.err)
  end)

  it("the largest global batch allowed prices with positive numbers", function()
    local a = job("estimate", {"--pp", "2", "--vpp", "2", "--json"})
    a[7] = "16777216"
    local r = R.run(a)
    assert.is_true(r.code == 0 or r.code == 3, r.err)  -- priced (fitting or not)
    local doc = require("cjson").decode(r.out)
    assert.is_true(doc.step_time_s > 0)
    for _, s in ipairs(doc.stages) do assert.is_true(s.peak > 0 and s.activations > 0) end
  end)

  it("a device count past 2^32 in search is not read modulo 2^32", function()
    local a = job("search", {"-v", "0"})
    a[5] = "4294967304"
    local r = R.run(a)
    assert.equal(1, r.code)
    assert.matches("devices: expected 1 to 16777216, got 4294967304", r.err)
  end)
end)

describe("inputs are regular files below a size cap (issue 17)", function()
  local dir
  before_each(function() dir = R.tmpdir() end)
  after_each(function() os.execute("rm -rf " .. R.quote(dir)) end)

  it("a FIFO given as any input is refused at once (it blocked forever)", function()
    local fifo = dir .. "/in.yaml"
    assert(os.execute("mkfifo " .. R.quote(fifo)))
    local cases = {
      {"-m", fifo}, {"-A", fifo}, {"--stack", fifo},
    }
    for _, c in ipairs(cases) do
      -- timeout: a regression would block on the FIFO; 124 would then fail the code check
      local r = R.sh('timeout 20 "$NDPLAN" estimate -m llama3.1-8b -d 8 -b 8 ' .. c[1] .. " "
                     .. R.quote(c[2]))
      assert.is_true(r.code == 1 or r.code == 2, c[1] .. ": " .. r.code .. " " .. r.err)
      assert.matches(fifo:gsub("%p", "%%%0") .. ": not a regular file %(a FIFO%)", r.err)
      one_line(r)
    end
    for _, c in ipairs({{"-s", fifo}, {"--policy", fifo}}) do
      local r = R.sh('timeout 20 "$NDPLAN" search -m llama3.1-8b -d 8 -b 8 -v 0 ' .. c[1] .. " "
                     .. R.quote(c[2]))
      assert.equal(1, r.code, c[1] .. ": " .. r.err)
      assert.matches("not a regular file %(a FIFO%)", r.err)
      one_line(r)
    end
  end)

  it("/dev/zero as a model config is refused, not read until memory runs out", function()
    local r = R.sh('timeout 20 "$NDPLAN" estimate -m /dev/zero -d 8 -b 8')
    assert.equal(1, r.code)
    assert.matches("^ndplan: /dev/zero: not a regular file %(a device%)", r.err)
  end)

  it("a file over the input cap is refused with its size", function()
    local big = dir .. "/big.json"
    assert(os.execute("truncate -s 300M " .. R.quote(big)))  -- sparse: no disk used
    local r = R.run({"estimate", "-m", big, "-d", "8", "-b", "8"})
    assert.equal(1, r.code)
    assert.matches("big.json: 314572800 bytes, over the input cap of 268435456 bytes", r.err)
    one_line(r)
  end)
end)
