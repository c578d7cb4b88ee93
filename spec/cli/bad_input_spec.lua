-- The README's bad-input table, one row per class: what ndplan answers (one line on stderr
-- naming what was wrong and where, a documented exit code) and that nothing is lost.
local R = dofile("spec/support/run.lua")

local tmpdir = R.tmpdir

local listing = R.listing

local read = R.read

local ESTIMATE = {"estimate", "-m", "llama3.1-8b", "-d", "8", "-b", "8", "--zero", "3"}
local function estimate(extra)
  local a = {table.unpack(ESTIMATE)}
  for _, x in ipairs(extra or {}) do a[#a + 1] = x end
  return R.run(a)
end

-- one line on stderr, no traceback
local function one_line(r)
  assert.is_nil(r.err:find("stack traceback", 1, true), r.err)
  assert.equal(1, select(2, r.err:gsub("\n", "")), r.err)
end

describe("bad input", function()
  it("a missing file: names it, exit 1", function()
    local r = R.run({"estimate", "-m", "/nonexistent/config.json", "-d", "8", "-b", "8"})
    assert.equal(1, r.code)
    assert.matches("^ndplan: /nonexistent/config.json: No such file or directory", r.err)
    one_line(r)
  end)

  it("invalid JSON: file, line and column, exit 1", function()
    local path = R.tempfile('{"model_type": "llama",\n  "hidden_size": 4096,\n', ".json")
    local r = R.run({"estimate", "-m", path, "-d", "8", "-b", "8"})
    assert.equal(1, r.code)
    assert.matches(path:gsub("%p", "%%%0") .. ":%d+:%d+: invalid JSON", r.err)
    one_line(r)
  end)

  it("invalid YAML: file, line and column, exit 1", function()
    local path = R.tempfile("name: X\npeak_tflops:\n  bf16: [1, 2\n", ".yaml")
    local r = estimate({"-A", path})
    assert.equal(1, r.code)
    assert.matches(path:gsub("%p", "%%%0") .. ":%d+:%d+: did not find expected", r.err)
    one_line(r)
  end)

  it("a field of the wrong type: file, field and what was expected, exit 1", function()
    local dev = R.tempfile("base: h100\nhbm:\n  capacity: lots\n", ".yaml")
    local r = estimate({"-A", dev})
    assert.equal(1, r.code)
    assert.matches(":3:3: field 'hbm.capacity': expected a size like 80GB or 80GiB, got 'lots'", r.err)
    local cfg = R.tempfile('{"model_type":"llama","hidden_size":"big","num_hidden_layers":2,'
                           .. '"num_attention_heads":4,"intermediate_size":64,"vocab_size":100}', ".json")
    r = R.run({"estimate", "-m", cfg, "-d", "1", "-b", "1"})
    assert.equal(1, r.code)
    assert.matches("field 'hidden_size' must be an integer >= 1, got string", r.err)
    one_line(r)
  end)

  it("negative, fractional or absurd numbers on the command line: exit 2", function()
    for _, bad in ipairs({{"--tp", "-1"}, {"--tp", "1.5"}, {"--pp", "x"}}) do
      local r = estimate(bad)
      assert.equal(2, r.code, bad[1] .. " " .. bad[2])
      assert.matches("^ndplan: " .. bad[1]:gsub("%-", "%%-") .. ": expected a non%-negative integer", r.err)
      one_line(r)
    end
    local r = R.run({"estimate", "-m", "llama3.1-8b", "-d", "99999999999999999999", "-b", "8"})
    assert.equal(2, r.code)
  end)

  it("zero degrees and numbers past the core's range are refused, no overflow: exit 1", function()
    local r = estimate({"--tp", "0"})
    assert.equal(1, r.code)
    assert.matches("degree out of bounds: every degree must be at least 1", r.err)
    r = R.run({"estimate", "-m", "llama3.1-8b", "-d", "2000000000", "-b", "8"})
    assert.equal(1, r.code)
    assert.matches("devices: 2000000000 is out of range", r.err)
    one_line(r)
  end)

  it("unknown device, precision, schedule or flag", function()
    local r = estimate({"-A", "tpu9"})
    assert.equal(1, r.code)
    assert.matches("^ndplan: unknown device 'tpu9' %(bundled: ", r.err)
    r = estimate({"--precision", "fp4"})
    assert.equal(2, r.code)
    assert.matches("^ndplan: %-%-precision: expected bf16, fp16, fp8, fp8:delayed, "
                   .. "fp8:tensorwise, .*fp8:mxfp8 or nvfp4, got 'fp4'\n$", r.err)
    -- a recipe the table does not have: the same one line, exit 2
    r = estimate({"--precision", "fp8:dynamic"})
    assert.equal(2, r.code)
    assert.matches("^ndplan: %-%-precision: expected .* got 'fp8:dynamic'\n$", r.err)
    r = estimate({"--schedule", "magic"})
    assert.equal(2, r.code)
    assert.matches("%-%-schedule: expected 1f1b, interleaved, gpipe, zb, dualpipe", r.err)
    r = estimate({"--bogus"})
    assert.equal(2, r.code)
    assert.matches("unknown option '%-%-bogus'", r.err)
    one_line(r)
  end)

  it("an unknown model type loads as a Llama-style decoder, with warnings on stderr", function()
    local cfg = R.tempfile('{"model_type":"wizard","hidden_size":256,"num_hidden_layers":2,'
                           .. '"num_attention_heads":4,"intermediate_size":512,"vocab_size":1000}', ".json")
    local r = R.run({"estimate", "-m", cfg, "-d", "1", "-b", "1"})
    assert.equal(0, r.code, r.err)
    assert.matches("ndplan: warning: [^:]+: model_type 'wizard' is not known to ndplan", r.err)
  end)

  it("a config field ndplan does not read: named on stderr; --strict refuses it, exit 1",
     function()
    local dir = tmpdir()
    local f = assert(io.open(dir .. "/config.json", "wb"))
    f:write('{"model_type":"llama","hidden_size":256,"num_hidden_layers":2,'
            .. '"num_attention_heads":4,"intermediate_size":512,"vocab_size":1000,'
            .. '"frobnicate_every":2}')
    f:close()
    local r = R.run({"estimate", "-m", dir, "-d", "1", "-b", "1"})  -- DIR: DIR/config.json
    assert.equal(0, r.code, r.err)
    assert.matches("ndplan: warning: [^:]+: frobnicate_every: not read by ndplan for"
                   .. " model_type 'llama'", r.err)
    r = R.run({"search", "-m", dir, "-d", "1", "-b", "1"})  -- and under the ranking
    assert.equal(0, r.code, r.err)
    assert.matches("\nmodel [^:]+: frobnicate_every: not read by ndplan", r.out)
    r = R.run({"search", "-m", dir, "-d", "1", "-b", "1", "--json"})
    assert.matches('"model_warnings":%["frobnicate_every: not read by ndplan', r.out)
    for _, cmd in ipairs({{"estimate", "-d", "1", "-b", "1"}, {"search", "-d", "1", "-b", "1"},
                          {"info"}, {"recompute", "-d", "1", "-b", "1"},
                          {"export", "-f", "megatron", "-d", "1", "-b", "1"}}) do
      local argv = {table.unpack(cmd)}
      argv[#argv + 1], argv[#argv + 2], argv[#argv + 3] = "-m", dir, "--strict"
      r = R.run(argv)
      assert.equal(1, r.code, cmd[1] .. ": " .. r.err)
      assert.matches("^ndplan: [^\n]*config.json: strict: 1 assumption%(s%): frobnicate_every",
                     r.err)
      one_line(r)
    end
  end)

  it("a Hugging Face Hub id: ndplan does not download, and says how to give the file",
     function()
    local r = R.run({"info", "-m", "meta-llama/Llama-4-Scout-17B-16E"})
    assert.equal(1, r.code)
    assert.matches("looks like a Hugging Face Hub id, and ndplan does not download", r.err, 1,
                   true)
    one_line(r)
  end)

  it("degrees that do not multiply to the devices or do not divide the model: exit 1", function()
    local r = R.run({"estimate", "-m", "llama3.1-8b", "-d", "12", "-b", "12", "--tp", "8"})
    assert.equal(1, r.code)
    assert.matches("devices: 12 is not a multiple of tp%*cp%*pp = 8", r.err)
    r = R.run({"estimate", "-m", "llama3.1-8b", "-d", "6", "-b", "6", "--tp", "3"})
    assert.equal(1, r.code)
    assert.matches("tp 3 does not divide 32 heads", r.err)
    one_line(r)
  end)

  it("a cost out of range names the field: exit 1", function()
    local r = estimate({"--costs", "dp_overlap=2"})
    assert.equal(1, r.code)
    assert.matches("^ndplan: costs.dp_overlap: expected a number in %[0, 1%], got 2", r.err)
    one_line(r)
  end)

  it("a budget nothing fits: its own exit code, 3", function()
    local r = estimate({"-M", "1GB"})
    assert.equal(3, r.code)
    assert.matches("over by", r.out)
    r = R.run({"recompute", "-m", "llama3.1-8b", "-d", "8", "-b", "8", "-M", "1GB"})
    assert.equal(3, r.code)
    assert.matches("over memory: stage 0 needs", r.err)
  end)

  it("an output folder that cannot be written: exit 1, no temporary file left", function()
    local r = R.run({"export", "-f", "hyper", "-o", "/proc/ndplan-nowhere", "-m", "llama3.1-8b",
                     "-d", "8", "-b", "8"})
    assert.equal(1, r.code)
    assert.matches("output directory: /proc/ndplan%-nowhere: ", r.err)
    one_line(r)
  end)

  it("a full disk: exit 1, the earlier file intact, nothing partial", function()
    local dir = tmpdir()
    local f = assert(io.open(dir .. "/hyper_train.yaml", "wb")); f:write("earlier\n"); f:close()
    -- a one-block file size limit stands in for a full disk: writes fail with EFBIG
    local r = R.sh(string.format("ulimit -f 1; trap '' XFSZ; %s export -f hyper -o %s "
                                 .. "-m llama3.1-8b -d 8 -b 8 --zero 3 --recompute 0-31:full",
                                 R.quote(os.getenv("NDPLAN_BIN")), R.quote(dir)))
    assert.equal(1, r.code)
    assert.matches("cannot write .*hyper_train.yaml", r.err)
    assert.equal("earlier\n", read(dir .. "/hyper_train.yaml"))
    assert.same({"hyper_train.yaml"}, listing(dir))
    os.execute("rm -rf " .. R.quote(dir))
  end)
end)

describe("bad input (issue 17)", function()
  local R2 = dofile("spec/support/run.lua")
  it("refuses an empty option value (-o \"\" would write into /), exit 2", function()
    for _, a in ipairs({{"search", "-m", "llama3.1-8b", "-d", "8", "-b", "64", "-o", ""},
                        {"estimate", "-m", "llama3.1-8b", "-d", "8", "-b", "64", "--plot", ""}}) do
      local r = R2.run(a)
      assert.equal(2, r.code, r.err)
      assert.matches("needs a value %(DIR%), got an empty string", r.err)
    end
  end)
  it("refuses a --costs item without =NUMBER instead of ignoring it, exit 2", function()
    local r = R2.run({"estimate", "-m", "llama3.1-8b", "-d", "8", "-b", "64", "--costs", "dp_overlap"})
    assert.equal(2, r.code)
    assert.matches("%-%-costs: expected NAME=NUMBER, got 'dp_overlap'", r.err)
  end)
  it("refuses a model name with control characters (it would become a shell line)", function()
    local r = R2.run({"-e", [[print(select(2, nd.model{model_type = "llama", name = "x\nrm -rf /",
      hidden_size = 256, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 512,
      vocab_size = 1000}))]]})
    assert.equal(0, r.code, r.err)
    assert.matches("name: expected printable characters, got 'x\\010rm %-rf /'", r.out)
  end)
end)

describe("writing the output (issue 17)", function()
  local R3 = dofile("spec/support/run.lua")
  it("fails when standard output cannot be written (--json > /dev/full), naming it", function()
    local f = io.open("/dev/full", "w")
    if not f then pending("no /dev/full here"); return end
    f:close()
    local r = R3.sh('"$NDPLAN" estimate -m llama3.1-8b -d 8 -b 64 --json > /dev/full')
    assert.equal(1, r.code)
    assert.matches("standard output: write failed", r.err)
  end)
end)
