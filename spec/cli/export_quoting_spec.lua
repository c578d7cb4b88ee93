-- Issue 17: what a user names (a model file, a device file and its name, the output folder)
-- never becomes a live line or word in an exported file. Each exporter's file is written
-- with hostile names ($( ), backquotes, quotes, ${VAR}, #), then parsed by its format's own
-- reader -- bash -n and `source` for the shell scripts (the payload is `touch`: a file that
-- appears means something ran), ndplan's YAML reader, JSON -- and the writers themselves
-- are checked on text that the loaders refuse (newlines, tabs), in case another caller
-- hands it to them.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"
local nd = require "ndplan"
local export = require "ndplan.export"
local flags = require "ndplan.export.flags"

local HOSTILE = "m$(touch PWNED1)`touch PWNED2`'q\"y ${HOME} #z"

local function write(path, text)
  local f = assert(io.open(path, "wb")); f:write(text); f:close()
end

local function read(path)
  local f = assert(io.open(path, "rb")); local s = f:read("a"); f:close(); return s
end

-- runs a shell command in dir; its status
local function sh(dir, cmd)
  local _, _, code = os.execute("cd " .. R.quote(dir) .. " && " .. cmd .. " >/dev/null 2>&1")
  return code
end

-- nothing ran: no file named PWNED* anywhere under dir
local function nothing_ran(dir)
  local p = io.popen("find " .. R.quote(dir) .. " -name 'PWNED*'")
  local found = p:read("a"); p:close()
  return found == "", found
end

-- the shell script parses (bash -n), sources without running anything, and keeps its
-- array: `source` it and print the array's words
local function check_script(dir, file, array)
  assert.equal(0, sh(dir, "bash -n " .. R.quote(file)), file .. " does not parse")
  local out = os.tmpname()
  assert.equal(0, sh(dir, "bash -c " .. R.quote("source ./" .. file .. " && printf '%s\\n' \"${"
                                                  .. array .. "[@]}\" > " .. R.quote(out))))
  local words = read(out)
  os.remove(out)
  assert.is_true(nothing_ran(dir), file .. ": sourcing ran a command")
  assert.is_truthy(words:find("^%-%-"), file .. ": " .. array .. " lost its flags")
  return words
end

describe("exported files with hostile names", function()
  local dir, out
  before_each(function()
    dir = R.tmpdir()
    out = dir .. "/out $(touch PWNED0) `x`"
    -- a model file whose stem is the model's name, a device file whose name field is hostile
    local m = read("examples/models/llama3.1-8b.json")
    write(dir .. "/" .. HOSTILE .. ".json", m)
    write(dir .. "/dev $(touch PWNED3).yaml", "base: h100\nname: \"H100 $(touch PWNED4) "
          .. "`touch PWNED5` 'q' \\\"dq\\\" # c\"\n")
  end)
  after_each(function() os.execute("rm -rf " .. R.quote(dir)) end)

  local function run_export(model, formats, extra)
    local args = {"export", "-f", formats, "-m", model, "-A", dir .. "/dev $(touch PWNED3).yaml",
                  "-d", "16", "-b", "64", "--stack", "none", "-o", out}
    for _, x in ipairs(extra) do args[#args + 1] = x end
    local r = R.run(args)
    assert.equal(0, r.code, r.err)
    assert.is_true(nothing_ran(dir))
    return r
  end

  it("Megatron: the model's name stays a comment; the script parses and sources inertly", function()
    run_export(dir .. "/" .. HOSTILE .. ".json", "megatron", {"--tp", "2", "--pp", "2"})
    local text = read(out .. "/megatron_args.sh")
    assert.is_truthy(text:find("\n# " .. HOSTILE .. " on 16 devices", 1, true))
    local words = check_script(out, "megatron_args.sh", "MODEL_PARALLEL_ARGS")
    assert.is_truthy(words:find("--tensor-model-parallel-size\n2\n", 1, true))
    -- and it reads back as the plan (ndplan's own reader of launch scripts)
    local st = require("ndplan.export.megatron").parse(text)
    assert.equal(2, st.tp)
    assert.equal(2, st.pp)
  end)

  it("MindFormers and HyperParallel: YAML that parses to the plan, the names nowhere live", function()
    run_export(dir .. "/" .. HOSTILE .. ".json", "mindformers,hyper", {"--tp", "2", "--pp", "2"})
    for _, f in ipairs({"mindformers.yaml", "hyper_train.yaml"}) do
      local doc = assert(nd.yaml.load_file(out .. "/" .. f))
      assert.equal("table", type(doc), f)
      for k in pairs(doc) do assert.is_nil(tostring(k):find("touch", 1, true), f) end
    end
    local st = require("ndplan.export.mindformers").parse(read(out .. "/mindformers.yaml"))
    assert.equal(2, st.tp)
    assert.equal(2, st.pp)
  end)

  it("torchtitan and DeepSpeed: a script that sources inertly, JSON that decodes", function()
    run_export("llama3.1-8b", "torchtitan,deepspeed", {"--tp", "2", "--zero", "3",
                                                       "--recompute", "full"})
    local words = check_script(out, "torchtitan_args.sh", "TORCHTITAN_ARGS")
    assert.is_truthy(words:find("--parallelism.tensor_parallel_degree\n2\n", 1, true), words)
    local ds = cjson.decode(read(out .. "/ds_config.json"))
    assert.equal("table", type(ds))
  end)

  it("refuses a device name with a control character on load, naming the field", function()
    write(dir .. "/nl.yaml", "base: h100\nname: \"a\\nb\"\n")
    local r = R.run({"estimate", "-m", "llama3.1-8b", "-A", dir .. "/nl.yaml", "-d", "8",
                     "-b", "64"})
    assert.equal(1, r.code)
    assert.matches("nl%.yaml:2:%d+: field 'name': expected printable characters, got 'a\\010b'",
                   r.err)
  end)
end)

describe("the exporters' writers on text the loaders refuse", function()
  local NASTY = {"a\nrm -rf x", "t\tab", "q'uo\"te", "back\\slash", "$(touch PWNED)", "`x`",
                 "k: v", "# not a comment", "- item", "\r\n", "yes", "123", ""}

  it("quote: a shell word that the shell reads back byte for byte", function()
    local dir = R.tmpdir()
    for _, s in ipairs(NASTY) do
      local out = os.tmpname()
      local _, _, code = os.execute("cd " .. R.quote(dir) .. " && printf '%s' " .. flags.quote(s)
                                    .. " > " .. R.quote(out))
      assert.equal(0, code)
      assert.equal(s, read(out))
      os.remove(out)
    end
    assert.is_true(nothing_ran(dir))
    os.execute("rm -rf " .. R.quote(dir))
  end)

  it("yaml: each value reads back as written, one key per entry", function()
    for _, s in ipairs(NASTY) do
      local text = export.yaml({{"key", s}, {"other", 1}})
      local doc = assert(nd.yaml.decode(text, "(written)"))
      assert.equal(s, doc.key, text)
      assert.equal(1, doc.other, text)
      local n = 0
      for _ in pairs(doc) do n = n + 1 end
      assert.equal(2, n, text)
    end
  end)

  it("comment: one line whatever the text, in a script and in YAML", function()
    for _, s in ipairs(NASTY) do
      assert.is_nil(flags.comment(s):find("[\n\r]"), s)
      local doc = assert(nd.yaml.decode(export.yaml({{comment = s}, {"key", 1}}), "(written)"))
      assert.same({key = 1}, doc)
    end
    assert.equal("a\\010b", flags.comment("a\nb"))
  end)
end)
