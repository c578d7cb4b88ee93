-- Issue 16, item 10: a mistyped command, a bad --precision in estimate and search, output
-- paths, the limit each search bound names, even decimals in a policy's column, and where
-- export writes without -o.
local R = dofile("spec/support/run.lua")

describe("small ones", function()
  it("a mistyped command: did you mean, exit 2", function()
    local r = R.run({"serach", "-m", "llama3.1-8b"})
    assert.equal(2, r.code)
    assert.equal("ndplan: unknown command 'serach': did you mean search? (run 'ndplan --help' "
                 .. "to list commands)\n", r.err)
    local far = R.run({"xyzzy"})
    assert.equal(2, far.code)
    assert.is_nil(far.err:find("did you mean", 1, true))
  end)

  it("a bad --precision exits 2 in estimate and in search, naming the flag", function()
    for _, cmd in ipairs({"estimate", "search"}) do
      local r = R.run({cmd, "-m", "llama3.1-8b", "-d", "8", "-b", "64", "--precision", "fp4"})
      assert.equal(2, r.code, cmd .. ": " .. r.err)
      assert.matches("^ndplan: %-%-precision: expected bf16, fp16, .* or nvfp4, got 'fp4'\n$", r.err)
    end
  end)

  it("prints output paths without a doubled slash", function()
    local dir = R.tmpdir()
    local r = R.run({"search", "-m", "llama3.1-8b", "-d", "8", "-b", "64", "--tp", "2",
                     "-o", dir .. "/", "--export", "megatron"})
    assert.equal(0, r.code, r.err)
    assert.matches(dir .. "/megatron_args.sh", r.out, 1, true)
    assert.is_nil(r.out:find("//", 1, true), r.out)
    os.execute("rm -rf " .. R.quote(dir))
  end)

  it("names the limit each bound comes from", function()
    local seven = R.run({"search", "-m", "llama3.1-8b", "-d", "7", "-b", "64"})
    assert.matches("TP up to 7 %(the devices%)", seven.out)
    local eight = R.run({"search", "-m", "llama3.1-70b", "-d", "64", "-b", "64", "--pp", "1"})
    assert.matches("TP up to 8 %(the model's KV heads%)", eight.out)
    assert.matches("EP up to 1 %(the model has no experts%)", eight.out)
    -- qwen3-30b-a3b: 128 experts
    local moe = R.run({"search", "-m", "qwen3-30b-a3b", "-d", "64", "-b", "64", "--tp", "1", "--pp", "1"})
    assert.matches("EP up to 64 %(the devices%)", moe.out)
    local wide = R.run({"search", "-m", "qwen3-30b-a3b", "-d", "256", "-b", "256", "--tp", "1",
                        "--pp", "1", "--cp", "1", "--mbs", "1"})
    assert.matches("EP up to 128 %(the model's experts%)", wide.out)
  end)

  it("prints a policy's column with one number of decimals", function()
    local r = R.run({"search", "-m", "llama3.1-70b", "-d", "64", "-b", "512", "--policy",
                     "examples/policies/cheapest.lua", "--policy-opts", "price=2.49"})
    assert.equal(0, r.code, r.err)
    local decimals = {}
    for v in r.out:gmatch("  (%d+%.%d+)\n") do decimals[#(v:match("%.(%d+)$"))] = true end
    local kinds = 0
    for _ in pairs(decimals) do kinds = kinds + 1 end
    assert.equal(1, kinds, r.out)
  end)

  it("export without -o says that it wrote into the current directory", function()
    local dir = R.tmpdir()
    local bin = R.bin:sub(1, 1) == "/" and R.bin or os.getenv("PWD") .. "/" .. R.bin
    local r = R.sh("cd " .. R.quote(dir) .. " && " .. R.quote(bin) .. " export -f megatron -m llama3.1-8b "
                   .. "-d 8 -b 64 --tp 2 --zero 1")
    assert.equal(0, r.code, r.err)
    assert.matches("written into the current directory %(" .. dir:gsub("%p", "%%%0") .. "%)", r.out)
    assert.is_truthy(R.read(dir .. "/megatron_args.sh"))
    local o = R.run({"export", "-f", "megatron", "-m", "llama3.1-8b", "-d", "8", "-b", "64", "--tp", "2",
                     "--zero", "1", "-o", dir})
    assert.equal(0, o.code, o.err)
    assert.is_nil(o.out:find("current directory", 1, true))
    os.execute("rm -rf " .. R.quote(dir))
  end)
end)
