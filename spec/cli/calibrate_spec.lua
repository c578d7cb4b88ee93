-- ndplan calibrate as a user runs it: a CSV of their runs or a validation table in, a device
-- override file out that validate and estimate load with -A. Self-contained: every input is
-- a small file written here.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"

local function tempdir()
  local path = os.tmpname()
  os.remove(path)
  assert(os.execute("mkdir " .. R.quote(path)))
  return path
end

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function listing(dir)
  local p = assert(io.popen("ls -A " .. R.quote(dir)))
  local s = p:read("a")
  p:close()
  return s
end

local function remove_dir(dir) os.execute("rm -rf " .. R.quote(dir)) end

-- Runs of Llama-3.1-8B on one 8-GPU node (made-up times, roughly what such a node does).
local RUNS = table.concat({
  "model,devices,global_batch,seq_len,tp,pp,mbs,recompute,step_time_s",
  "llama3.1-8b,8,16,2048,1,1,1,full,2.1",
  "llama3.1-8b,8,16,2048,2,1,2,full,2.3",
  "llama3.1-8b,8,32,4096,4,1,1,full,9.6",
  "llama3.1-8b,8,64,1024,8,1,4,full,4.9",
  "llama3.1-8b,8,32,2048,2,2,1,,3.9",
}, "\n") .. "\n"

-- A validation table in the layout of narayanan2021_table1.csv, with made-up rows.
local TABLE1 = table.concat({
  "model,params_b,layers,hidden,heads,vocab,seq_len,tp,pp,dp,vpp_layers_per_chunk,vpp_chunks,"
    .. "gpus,mbs,gbs,num_microbatches,gpu,precision,recompute,tflops_per_gpu,pct_of_peak,"
    .. "aggregate_pflops,iter_time_s_derived",
  "small,1.2,24,2048,16,51200,2048,1,1,16,,1,16,8,256,2,A100-80GB,fp16,full,,,,2.9",
  "medium,3.6,30,3072,32,51200,2048,2,1,16,,1,32,8,256,2,A100-80GB,fp16,full,,,,4.4",
  "large,18,40,6144,48,51200,2048,8,2,4,,1,64,2,256,32,A100-80GB,fp16,full,,,,13.0",
}, "\n") .. "\n"

describe("ndplan calibrate", function()
  local dir
  before_each(function() dir = tempdir() end)
  after_each(function() remove_dir(dir) end)

  it("fits a CSV of runs and writes a file that estimate and validate load", function()
    local runs = write(dir .. "/runs.csv", RUNS)
    local out = dir .. "/node.yaml"
    local r = R.run({"calibrate", "--csv", runs, "-o", out})
    assert.equal(0, r.code)
    assert.equal("", r.err)
    assert.matches("on runs of [^\n]*runs%.csv: 5 runs", r.out)
    assert.matches("fit set   MAPE [%d.]+%% %-> [%d.]+%%", r.out)
    assert.matches("%d+ estimator evaluations", r.out)
    assert.matches("scale_out[^\n]*no effect", r.out)
    local text = assert(io.open(out)):read("a")
    assert.matches("\nbase: a100%-80gb\nname: A100%-80GB%-calibrated\nefficiency:\n", text)

    local job = {"estimate", "-m", "llama3.1-8b", "-d", "8", "-b", "16", "--seq-len", "2048",
                 "--tp", "2", "--json", "-A"}
    local function step(device)
      local args = {table.unpack(job)}
      args[#args + 1] = device
      local e = R.run(args)
      assert.equal(0, e.code)
      return cjson.decode(e.out)
    end
    local calibrated, stock = step(out), step("a100-80gb")
    assert.equal("A100-80GB-calibrated", calibrated.device)
    assert.are_not.equal(stock.step_time_s, calibrated.step_time_s)

    local data = tempdir()
    write(data .. "/narayanan2021_table1.csv", TABLE1)
    local v = R.run({"validate", "--data", data, "--table", "narayanan2021_table1", "-A", out})
    remove_dir(data)
    assert.equal(0, v.code)
    assert.matches("narayanan2021_table1%s+3 rows  MAPE", v.out)
  end)

  it("fits validation tables and prices held-out ones (--check, --json)", function()
    write(dir .. "/narayanan2021_table1.csv", TABLE1)
    local out = dir .. "/t1.yaml"
    local r = R.run({"calibrate", "--data", dir, "--table", "narayanan2021_table1",
                     "--fields", "gemm,kernel_overhead", "--bounds", "kernel_overhead=0:200us",
                     "--check", "narayanan2021_table1", "-o", out, "--name", "Selene", "--json"})
    assert.equal(0, r.code)
    local doc = cjson.decode(r.out)
    assert.equal("ndplan.calibrate/1", doc.schema)
    assert.equal(3, doc.rows)
    assert.equal(2, #doc.fields)
    assert.equal("kernel_overhead", doc.fields[2].name)
    assert.is_true(doc.fields[2].after <= 200e-6)
    assert.is_true(doc.evaluations > 0)
    assert.is_true(doc.after.mape_pct <= doc.before.mape_pct)
    -- the held-out table here is the fit set itself, so both summaries agree
    assert.equal(1, #doc.held_out)
    assert.is_true(math.abs(doc.held_out[1].after.mape_pct - doc.after.mape_pct) < 1e-9)
    local text = assert(io.open(out)):read("a")
    assert.matches("\nname: Selene\n", text)
    assert.matches("Held%-out MAPE: narayanan2021_table1", text)
  end)

  it("writes <device>-calibrated.yaml in the current folder by default", function()
    write(dir .. "/runs.csv", RUNS)
    local r = R.sh("cd " .. R.quote(dir) .. ' && "$NDPLAN" calibrate --csv runs.csv --fields gemm')
    assert.equal(0, r.code)
    assert.is_true(exists(dir .. "/a100-80gb-calibrated.yaml"))
  end)

  it("names the file, line and field of a bad CSV in one line and writes nothing", function()
    local bad = RUNS:gsub("8,32,4096,4,1,1,", "8,32,4096,4,1,x,")
    local runs = write(dir .. "/runs.csv", bad)
    local out = dir .. "/node.yaml"
    local r = R.run({"calibrate", "--csv", runs, "-o", out})
    assert.equal(1, r.code)
    assert.equal("", r.out)
    assert.equal("ndplan: " .. runs .. ":4: field 'mbs' (column 7): expected a positive whole "
                 .. "number, got 'x'\n", r.err)
    assert.is_false(exists(out))
    assert.equal("runs.csv\n", listing(dir))
  end)

  it("fails with exit code 2 on a bad command line", function()
    local r = R.run({"calibrate"})
    assert.equal(2, r.code)
    assert.matches("%-%-table", r.err)
    local runs = write(dir .. "/runs.csv", RUNS)
    r = R.run({"calibrate", "--csv", runs, "--fields", "gemm,speed"})
    assert.equal(2, r.code)
    assert.matches("unknown field 'speed'", r.err)
    r = R.run({"calibrate", "--csv", runs, "--bounds", "gemm=fast:1"})
    assert.equal(2, r.code)
    assert.equal("runs.csv\n", listing(dir))
  end)
end)
