-- The bundled commands as a user runs them: models, devices, info, estimate, validate.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"

local MODELS = {"llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "qwen2.5-72b", "qwen3-32b",
  "qwen3-30b-a3b", "qwen3-235b-a22b", "mixtral-8x7b", "deepseek-v3", "gpt-oss-120b",
  "qwen3-next-80b-a3b", "gemma3-12b", "gpt3-175b", "megatron-22b", "mt-nlg-530b", "megatron-1t",
  "llama4-scout", "llama4-maverick", "gemma2-9b", "nemotron-h-56b", "minimax-m1", "deepseek-v3.2",
  "kimi-k2", "nemotron-super-49b", "glm4.5", "glm4.5-air", "nemotron-ultra-253b", "jamba-v0.1",
  "falcon-h1-7b"}

describe("ndplan models", function()
  it("lists every bundled model with its parameter count", function()
    local r = R.run({"models"})
    assert.equal(0, r.code)
    for _, name in ipairs(MODELS) do assert.matches("\n" .. name:gsub("%p", "%%%0") .. " ", r.out) end
    assert.matches("deepseek%-v3%s+deepseek_v3.-671%.0%d%dB", r.out)
  end)

  it("prints JSON with --json", function()
    local r = R.run({"models", "--json"})
    local doc = cjson.decode(r.out)
    assert.equal("ndplan.models/1", doc.schema)
    assert.equal(#MODELS, #doc.models)
  end)
end)

describe("ndplan devices", function()
  it("lists the bundled devices", function()
    local r = R.run({"devices"})
    assert.equal(0, r.code)
    for _, name in ipairs({"a100-40gb", "a100-80gb", "h100", "h800", "h200", "b200", "gb200",
                           "mi300x", "a2", "a3"}) do
      assert.matches("\n" .. name:gsub("%p", "%%%0") .. " ", r.out)
    end
  end)
end)

describe("ndplan info", function()
  it("prints the layer stack and parameter breakdown", function()
    local r = R.run({"info", "--model", "deepseek-v3"})
    assert.equal(0, r.code)
    assert.matches("671%.0%d%dB total, 37%.5%d%dB active", r.out)
    assert.matches("0%-2%s+3%s+mla%-dense", r.out)
    assert.matches("3%-60%s+58%s+mla%-moe", r.out)
    assert.matches("61%s+1%s+mla%-moe %(mtp%)", r.out)
  end)

  it("prints hybrid and alternating stacks by kind, repeated motifs on one row", function()
    local r = R.run({"info", "--model", "nemotron-h-56b"})
    assert.equal(0, r.code, r.err)
    assert.matches("kinds     54 mamba, 54 mlp, 10 attention", r.out, 1, true)
    assert.matches("\n%s+0%-5%s+6%s+mamba x1, mlp x1 %(x3%)\n%s+6%s+1%s+mamba\n"
                   .. "%s+7%s+1%s+attention\n%s+8%-17%s+10%s+mlp x1, mamba x1 %(x5%)", r.out)
    assert.matches("mamba     256 heads of 64, state 256, 8 groups, conv 4, chunk 128", r.out, 1,
                   true)
    r = R.run({"info", "--model", "gemma2-9b"})
    assert.matches("0%-41%s+42%s+sliding%-dense x1, dense x1 %(x21%)", r.out)
    assert.matches("window    4096 tokens\n", r.out, 1, true)
    r = R.run({"info", "--model", "nemotron-super-49b"})  -- each MLP width its own kind
    assert.equal(0, r.code, r.err)
    assert.matches("kinds     1 dense (ffn 14336), 48 dense (ffn 28672), 5 mlp (ffn 14336),"
                   .. " 1 mlp (ffn 17920), 10 mlp (ffn 7168), 1 mlp (ffn 28672), 8 mlp (ffn 5632),"
                   .. " 6 mlp (ffn 2816)", r.out, 1, true)
    assert.matches("\n%s+0%s+1%s+dense %(ffn 14336%)\n%s+1%-5%s+5%s+dense %(ffn 28672%)\n"
                   .. "%s+6%-7%s+2%s+mlp %(ffn 14336%)\n", r.out)
    assert.matches("\n%s+71%-79%s+9%s+dense %(ffn 28672%)\n", r.out)
    r = R.run({"info", "--model", "llama4-maverick"})
    assert.matches("kinds     24 sliding-dense, 12 sliding-moe, 12 moe", r.out, 1, true)
    assert.matches("window    8192 tokens (chunked", r.out, 1, true)
    assert.matches("0%-47%s+48%s+sliding%-dense x1, sliding%-moe x1, sliding%-dense x1, moe x1"
                   .. " %(x12%)", r.out)
  end)

  it("names the option that is missing", function()
    local r = R.run({"info"})
    assert.equal(2, r.code)
    assert.equal("ndplan: option '--model' is required (see 'ndplan info --help')\n", r.err)
  end)

  it("generates --help from the option table", function()
    local r = R.run({"info", "--help"})
    assert.equal(0, r.code)
    assert.matches("%-m, %-%-model NAME|PATH", r.out)
  end)

  it("reports a malformed config.json in one line with file, line and column", function()
    local path = R.tempfile('{\n  "hidden_size": 4096,\n  "num_hidden_layers": ,\n}\n', ".json")
    local r = R.run({"info", "--model", path})
    os.remove(path)
    assert.equal(1, r.code)
    assert.matches("^ndplan: [^\n]*%.json:3:%d+: invalid JSON[^\n]*\n$", r.err)
  end)

  it("names a missing field", function()
    local path = R.tempfile('{"model_type": "llama", "num_hidden_layers": 2}\n', ".json")
    local r = R.run({"info", "--model", path})
    os.remove(path)
    assert.equal(1, r.code)
    assert.matches("hidden_size", r.err)
  end)

  it("reports malformed YAML with line and column", function()
    local path = R.tempfile("hidden_size: 4096\n  num_hidden_layers: 2\n: x\n", ".yaml")
    local r = R.run({"info", "--model", path})
    os.remove(path)
    assert.equal(1, r.code)
    assert.matches("%.yaml:%d+:%d+:", r.err)
  end)

  it("warns about an unknown model_type but still loads it", function()
    local path = R.tempfile('{"model_type": "mystery", "hidden_size": 1024, "num_hidden_layers": 4,'
                            .. ' "num_attention_heads": 8, "vocab_size": 1000, "intermediate_size": 4096}',
                            ".json")
    local r = R.run({"info", "--model", path})
    os.remove(path)
    assert.equal(0, r.code)
    assert.matches("warning", r.err)
    assert.matches("mystery", r.err)
  end)
end)

describe("ndplan estimate", function()
  local base = {"estimate", "-m", "llama3.1-70b", "-A", "h100", "-d", "64", "-b", "512",
                "--seq-len", "8192", "--tp", "8", "--pp", "4", "--sp", "--zero", "1"}

  it("prices the recompute Megatron can state under -M, with its flags, and exits 3 when none fits",
     function()
    local args = {"estimate", "-m", "llama3.1-8b", "-A", "h100", "-d", "8", "-b", "64",
                  "--seq-len", "8192", "--pp", "2", "--zero", "1", "--recompute", "megatron",
                  "--stack", "none"}  -- the device file alone: a budget the block form fits
    local a = {table.unpack(args)}
    for _, x in ipairs({"-M", "50GiB"}) do a[#a + 1] = x end
    local ok = R.run(a)
    assert.equal(0, ok.code, ok.err)
    assert.matches("recompute megatron: full on the first %d+ layers of each stage %(%-%-recompute%-granularity full %-%-recompute%-method block %-%-recompute%-num%-layers %d+%)", ok.out)
    a[#a] = "40GiB"
    local over = R.run(a)
    assert.equal(3, over.code)
    assert.matches("no recompute Megatron can state fits the 40%.00 GiB budget %(full on every layer peaks at [%d.]+ GiB%)", over.err)
  end)

  it("prints the step time and the per-stage memory", function()
    local r = R.run(base)
    assert.equal(0, r.code)
    assert.matches("step time [%d%.]+ s", r.out)
    assert.matches("peak [%d%.]+ GiB on stage 0 of 4", r.out)
  end)

  it("prints the estimate/1 JSON document", function()
    local args = {table.unpack(base)}
    args[#args + 1] = "--json"
    local doc = cjson.decode(R.run(args).out)
    assert.equal("ndplan.estimate/1", doc.schema)
    assert.equal(4, #doc.stages)
    for _, k in ipairs({"forward", "backward", "recompute", "tp_comm", "cp_comm", "ep_comm",
                        "pp_comm", "dp_comm", "optimizer", "bubble"}) do
      assert.is_number(doc.time_parts_s[k])
    end
    assert.equal("scale-up", doc.topology.tp.link)
    assert.is_true(doc.mfu > 0 and doc.mfu < 1)
  end)

  it("refuses a strategy with its reason", function()
    local r = R.run({"estimate", "-m", "llama3.1-8b", "-d", "8", "-b", "8", "--tp", "3"})
    assert.equal(1, r.code)
    assert.matches("strategy refused: ", r.err)
  end)

  it("exits 3 when the strategy does not fit the budget", function()
    local r = R.run({"estimate", "-m", "llama3.1-70b", "-A", "h100", "-d", "8", "-b", "8",
                     "--seq-len", "4096"})
    assert.equal(3, r.code)
    assert.matches("over by", r.out)
  end)
end)
