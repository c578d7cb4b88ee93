-- `ndplan export` and `ndplan estimate --from-megatron` as a user runs them.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"
require "ndplan"  -- installs the searcher of the bundled modules
local export = require "ndplan.export"
local files = require "ndplan.io.files"

local FIXTURE = "spec/fixtures/megatron_llama_pretrain.sh"

local tmpdir = R.tmpdir

local listing = R.listing

local function remove_dir(dir)
  os.execute("rm -rf " .. R.quote(dir))
end

describe("ndplan export", function()
  local base = {"export", "-m", "llama3.1-70b", "-d", "64", "-b", "512", "--seq-len", "8192",
                "--tp", "8", "--pp", "4", "--sp", "--zero", "1",
                "--recompute", "5-9:full,25-29:full,45-49:full,65-69:full"}

  it("writes the files a trainer accepts with --format all, refuses the others with exit 4", function()
    local dir = tmpdir()
    local args = {table.unpack(base)}
    for _, a in ipairs({"--format", "all", "-o", dir}) do args[#args + 1] = a end
    local r = R.run(args)
    -- ds_config cannot state AutoTP with pipeline stages: refused, named, not written
    assert.equal(4, r.code, r.err)
    assert.equal("ndplan: 1 of 5 trainer files refused (see above)\n", r.err)
    assert.matches("deepspeed +refused, not written\n[^\n]*\n  refused    deepspeed: a PipelineModule", r.out)
    local names = {}
    for _, name in ipairs(export.list()) do
      if name ~= "deepspeed" then names[#names + 1] = export.get(name).filename end
    end
    table.sort(names)
    assert.same(names, listing(dir))  -- and no temporary file is left behind
    for _, name in ipairs(export.list()) do
      if name == "deepspeed" then goto next_name end
      local mod = export.get(name)
      local text = assert(files.read(dir .. "/" .. mod.filename))
      local st, job = mod.parse(text, {layers = 80})
      assert.is_table(st, tostring(job))
      assert.equal(8, st.tp, name)
      assert.matches(mod.filename:gsub("%p", "%%%0"), r.out)
      assert.matches(mod.dialect:gsub("%p", "%%%0"), r.out)
      ::next_name::
    end
    -- the per-layer plan is rounded for Megatron, and the rounded plan priced again
    assert.matches("megatron[^\n]*\n[^\n]*\n  rounded recompute: plan 0%-4:none,5%-9:full,", r.out)
    assert.matches("re%-priced  step time [%d.]+ s %(plan [%d.]+ s, %+[%d.]+%%%)", r.out)
    remove_dir(dir)
  end)

  it("states the budget's block plan for Megatron when it beats rounding up", function()
    local dir = tmpdir()
    local r = R.run({"export", "-f", "megatron", "-o", dir, "-m", "deepseek-v3", "-A", "h800",
                     "-d", "2048", "-b", "15360", "--seq-len", "4096", "--pp", "16", "--ep", "64",
                     "--zero", "1", "--precision", "fp8", "--recompute", "per_layer", "-M", "54GB",
                     "--layout", "balanced", "--costs", "quant_cache=0",  -- the budget's memory model
                     -- without switch sets per layer the plan recomputes fully or not at all,
                     -- so the round-up is full on every layer on the plan's layout
                     "--recompute-modes", "none,selective,full", "--stack", "none"})
    assert.equal(0, r.code, r.err)
    local chose, block, up = r.out:match("; (chose) full on [^;]- for the [%d.]+ GiB budget, "
                                         .. "step time ([%d.]+) s, instead of rounding up to "
                                         .. "[^,]+, ([%d.]+) s")
    assert.equal("chose", chose, r.out)
    assert.is_true(tonumber(block) <= tonumber(up))
    if r.out:find("on its own layout for the", 1, true) then  -- a form with its own layout
      assert.matches("rounded stage_layers: plan [%d,]+, file [%d,]+ %(balanced again", r.out)
    end
    assert.matches("re%-priced  step time " .. block .. " s %(plan [%d.]+ s, %+[%d.]+%%%)", r.out)
    remove_dir(dir)
  end)

  it("refuses every file for a model with per-layer MLP widths (Nemotron NAS)", function()
    local dir = tmpdir()
    local r = R.run({"export", "-f", "all", "-o", dir, "-m", "nemotron-super-49b", "-d", "64",
                     "-b", "256", "--tp", "2", "--pp", "2", "--sp", "--zero", "2",
                     "--recompute", "full"})
    assert.equal(4, r.code, r.err)
    assert.equal("ndplan: 5 of 5 trainer files refused (see above)\n", r.err)
    assert.matches("megatron: the model's layers have their own MLP widths (Nemotron NAS", r.out,
                   1, true)
    assert.same({}, listing(dir))
    remove_dir(dir)
  end)

  it("refuses an unknown format before writing anything", function()
    local dir = tmpdir()
    local args = {table.unpack(base)}
    for _, a in ipairs({"--format", "megatron,nemo", "-o", dir}) do args[#args + 1] = a end
    local r = R.run(args)
    assert.equal(2, r.code)
    assert.matches("unknown export format 'nemo'", r.err)
    assert.same({}, listing(dir))
    remove_dir(dir)
  end)
end)

describe("ndplan estimate --from-megatron", function()
  local function strategy(args)
    local r = R.run(args)
    assert.equal(0, r.code, r.err)
    return cjson.decode(r.out)
  end

  it("prices the script's strategy as the same explicit flags do", function()
    local from = strategy({"estimate", "--from-megatron", FIXTURE, "-m", "llama3.1-8b", "--json"})
    local explicit = strategy({"estimate", "-m", "llama3.1-8b", "-d", "16", "-b", "256",
                               "--seq-len", "8192", "--tp", "2", "--pp", "2", "--sp", "--zero", "1",
                               "--mbs", "2", "--precision", "bf16",
                               "--recompute", "0-3:full,16-19:full", "--json"})
    assert.same(explicit.strategy, from.strategy)
    assert.same(explicit.job, from.job)
    assert.equal(explicit.step_time_s, from.step_time_s)
  end)

  it("builds the model from the script's shape flags when --model is not given", function()
    local doc = strategy({"estimate", "--from-megatron", FIXTURE, "--json"})
    local ref = strategy({"estimate", "--from-megatron", FIXTURE, "-m", "llama3.1-8b", "--json"})
    assert.equal("megatron-32x4096", doc.model)
    assert.equal(ref.params.total, doc.params.total)
  end)

  it("lets command-line options override the script", function()
    local doc = strategy({"estimate", "--from-megatron", FIXTURE, "--tp", "4", "--recompute",
                          "selective", "--json"})
    assert.equal(4, doc.strategy.tp)
    assert.equal(2, doc.strategy.pp)
    assert.equal("selective", doc.strategy.recompute)
  end)

  it("reads back what ndplan export wrote for Megatron", function()
    local dir = tmpdir()
    local r = R.run({"export", "-f", "megatron", "-o", dir, "-m", "llama3.1-70b", "-d", "64",
                     "-b", "512", "--seq-len", "8192", "--tp", "8", "--pp", "4", "--vpp", "2",
                     "--sp", "--zero", "1", "--recompute", "selective"})
    assert.equal(0, r.code, r.err)
    local back = strategy({"estimate", "--from-megatron", dir .. "/megatron_args.sh", "-m",
                           "llama3.1-70b", "--json"})
    local direct = strategy({"estimate", "-m", "llama3.1-70b", "-d", "64", "-b", "512",
                             "--seq-len", "8192", "--tp", "8", "--pp", "4", "--vpp", "2", "--sp",
                             "--zero", "1", "--recompute", "selective", "--json"})
    assert.same(direct.strategy, back.strategy)
    remove_dir(dir)
  end)

  it("names the file, line and flag of an unresolvable $VAR, exits 1 and writes nothing", function()
    local path = R.tempfile("#!/bin/bash\nTP=8\nARGS=(\n  --tensor-model-parallel-size $TP\n"
                            .. "  --pipeline-model-parallel-size $PP\n)\n", ".sh")
    local r = R.run({"estimate", "--from-megatron", path, "-m", "llama3.1-8b", "-d", "64", "-b", "64"})
    assert.equal(1, r.code)
    assert.equal("", r.out)
    assert.equal("ndplan: " .. path .. ":5: --pipeline-model-parallel-size: cannot resolve $PP "
                 .. "(set it in the script or pass the option on the command line)\n", r.err)
    local dir = tmpdir()
    local e = R.run({"export", "-f", "all", "-o", dir, "--from-megatron", path, "-m", "llama3.1-8b",
                     "-d", "64", "-b", "64"})
    assert.equal(1, e.code)
    assert.matches(":5: %-%-pipeline%-model%-parallel%-size: cannot resolve %$PP", e.err)
    assert.same({}, listing(dir))
    os.remove(path)
    remove_dir(dir)
  end)

  it("still requires a model, devices and a batch without a script", function()
    local r = R.run({"estimate", "-d", "8", "-b", "8"})
    assert.equal(2, r.code)
    assert.equal("ndplan: option '--model' is required (see 'ndplan estimate --help')\n", r.err)
  end)
end)
