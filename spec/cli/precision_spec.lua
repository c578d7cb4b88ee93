-- Precision recipes as a user types them: --precision fp8:RECIPE, --fp8-param-gather, the
-- BF16 layer counts; estimate --json; refusals; and the round trip through the Megatron
-- exporter and --from-megatron.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"

local BASE = {"estimate", "-m", "llama3.1-8b", "-d", "8", "-b", "64", "--seq-len", "4096",
              "--tp", "2", "--zero", "1"}

local function estimate(extra)
  local a = {table.unpack(BASE)}
  for _, x in ipairs(extra) do a[#a + 1] = x end
  return R.run(a)
end

local function json(extra)
  local a = {table.unpack(extra)}
  a[#a + 1] = "--json"
  local r = estimate(a)
  assert.equal(0, r.code, r.err)
  return cjson.decode(r.out)
end

describe("ndplan estimate --precision", function()
  it("takes fp8:RECIPE and prints the recipe and its byte widths in --json", function()
    -- the device file alone (the megatron-core profile keeps 0.19 of the copies: quant_cache)
    local doc = json({"-A", "h100", "--precision", "fp8:tensorwise", "--stack", "none"})
    assert.equal("fp8:tensorwise", doc.strategy.precision)
    assert.equal("fp8:tensorwise", doc.precision.recipe)
    assert.equal("fp8", doc.precision.gemm_precision)
    assert.equal(1979e12, doc.precision.gemm_peak_flops)
    assert.same({quant = 1, param = 2, cache = 2, gather = 2}, doc.precision.bytes_per_param)
    doc = json({"-A", "b200", "--precision", "fp8:mxfp8"})
    assert.equal("mxfp8", doc.precision.gemm_precision)
    assert.equal(32, doc.precision.block)
    assert.equal(1 + 1 / 32, doc.precision.bytes_per_param.quant)
  end)

  it("takes fp8 alone as Megatron's default recipe, and says so in the text output", function()
    local r = estimate({"-A", "h100", "--precision", "fp8"})
    assert.equal(0, r.code, r.err)
    assert.matches("fp8:delayed: linear GEMMs at fp8 %(1979 TFLOP/s%)", r.out)
  end)

  it("takes --fp8-param-gather and Megatron's BF16 layer counts", function()
    local doc = json({"-A", "b200", "--precision", "nvfp4", "--fp8-param-gather",
                      "--num-layers-at-start-in-bf16", "1", "--num-layers-at-end-in-bf16", "3"})
    assert.is_true(doc.precision.fp8_param_gather)
    assert.equal(0.5 + 1 / 16, doc.precision.bytes_per_param.gather)
    assert.equal(1, doc.precision.bf16_first_layers)
    assert.equal(3, doc.precision.bf16_last_layers)
    assert.equal(1, doc.strategy.bf16_first_layers)
  end)

  it("refuses a recipe the device has no peak for in one line, exit 1", function()
    local r = estimate({"-A", "h100", "--precision", "nvfp4"})
    assert.equal(1, r.code)
    assert.equal("ndplan: strategy refused: precision: nvfp4 runs its GEMMs at nvfp4 and the "
                 .. "device H100 has no nvfp4 peak (peak_tflops.nvfp4)\n", r.err)
  end)

  it("refuses an unknown recipe naming the flag and the accepted values, exit 2", function()
    local r = estimate({"--precision", "nvfp8"})
    assert.equal(2, r.code)
    assert.equal("ndplan: --precision: expected bf16, fp16, fp8, fp8:delayed, fp8:tensorwise, "
                 .. "fp8:rowwise, fp8:blockwise, fp8:mxfp8 or nvfp4, got 'nvfp8'\n", r.err)
  end)
end)

describe("precision through the Megatron exporter and --from-megatron", function()
  it("reads --fp8-recipe, the param gather and the BF16 layers from a launch script", function()
    local path = R.tempfile("#!/bin/bash\nARGS=(\n  --num-layers 32 --hidden-size 4096"
      .. " --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention"
      .. " --num-query-groups 8 --swiglu --vocab-size 128256 --seq-length 4096"
      .. " --micro-batch-size 1 --global-batch-size 64 --tensor-model-parallel-size 2"
      .. " --use-distributed-optimizer --bf16 --fp8-format e4m3 --fp8-recipe blockwise"
      .. " --fp8-param-gather --first-last-layers-bf16 --num-layers-at-end-in-bf16 2\n)\n", ".sh")
    local r = R.run({"estimate", "--from-megatron", path, "-d", "8", "-A", "h100", "--json"})
    assert.equal(0, r.code, r.err)
    local doc = cjson.decode(r.out)
    assert.equal("fp8:blockwise", doc.strategy.precision)
    assert.is_true(doc.strategy.fp8_param_gather)
    assert.equal(1, doc.precision.bf16_first_layers)  -- Megatron's default with the switch
    assert.equal(2, doc.precision.bf16_last_layers)
  end)

  it("names the file and flag of a recipe Megatron does not have, exit 1", function()
    local path = R.tempfile("#!/bin/bash\nARGS=(\n  --num-layers 32 --fp8-format hybrid"
                            .. " --fp8-recipe rowwise\n)\n", ".sh")
    local r = R.run({"estimate", "--from-megatron", path, "-m", "llama3.1-8b", "-d", "8",
                     "-b", "64"})
    assert.equal(1, r.code)
    assert.matches("^ndplan: .*%.sh: %-%-fp8%-recipe: expected tensorwise, delayed, mxfp8 or "
                   .. "blockwise, got 'rowwise'\n$", r.err)
  end)

  for _, case in ipairs({{"fp8:delayed", "h100"}, {"fp8:mxfp8", "b200"}, {"nvfp4", "gb300"}}) do
    it(case[1] .. " survives export -f megatron and --from-megatron", function()
      local dir = R.tmpdir()
      local flags = {"-m", "llama3.1-8b", "-A", case[2], "-d", "8", "-b", "64", "--seq-len",
                     "4096", "--tp", "2", "--zero", "1", "--precision", case[1],
                     "--fp8-param-gather"}
      local w = {"export", "-f", "megatron", "-o", dir}
      for _, f in ipairs(flags) do w[#w + 1] = f end
      local r = R.run(w)
      assert.equal(0, r.code, r.err)
      local text = R.read(dir .. "/megatron_args.sh")
      if case[1] == "nvfp4" then
        assert.matches("%-%-fp4%-format e2m1\n%s*%-%-fp4%-recipe nvfp4\n%s*%-%-fp4%-param%-gather", text)
        assert.matches("%-%-nproc%-per%-node 4\n", text)  -- a GB300 tray
      else
        assert.matches("%-%-fp8%-recipe " .. case[1]:match(":(.*)") .. "\n%s*%-%-fp8%-param%-gather", text)
      end
      local back = R.run({"estimate", "--from-megatron", dir .. "/megatron_args.sh", "-m",
                          "llama3.1-8b", "-A", case[2], "--json"})
      assert.equal(0, back.code, back.err)
      local direct = {table.unpack(flags)}
      table.insert(direct, 1, "estimate")
      direct[#direct + 1] = "--json"
      local d = R.run(direct)
      assert.same(cjson.decode(d.out).strategy, cjson.decode(back.out).strategy)
      os.execute("rm -rf " .. R.quote(dir))
    end)
  end
end)

describe("ndplan devices --recipes", function()
  it("lists the core's recipe table with its widths, and says what fp8 alone is", function()
    local r = R.run({"devices", "--recipes"})
    assert.equal(0, r.code, r.err)
    assert.matches("\nfp8:mxfp8%s+mxfp8%s+1%s+32%s+1%s+1%.031%s+2%s+0%+0\n", r.out)
    assert.matches("\nnvfp4%s+nvfp4%s+0%.5%s+16%s+1%s+0%.5625%s+2%s+2%+8\n", r.out)
    assert.matches("fp8 alone is fp8:delayed", r.out)
    local doc = cjson.decode(R.run({"devices", "--recipes", "--json"}).out)
    assert.equal("ndplan.recipes/1", doc.schema)
    assert.equal(8, #doc.recipes)
    assert.equal("fp8:blockwise", doc.recipes[6].name)
    assert.equal(1 + 4 / 16384, doc.recipes[6].quant_bytes)
  end)
end)
