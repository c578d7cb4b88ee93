-- Issue 16, item 7: the README's "A five-minute tour", run as written. Each `ndplan ...` line
-- (with its `\` continuations; "(the same flags)" stands for the flags of the estimate
-- above it) runs in a fresh folder, where pretrain.sh is the Megatron fixture; the REPL lines
-- (`> ` and `>> `) are typed into `ndplan -i`. None of them needs Chromium.
local R = dofile("spec/support/run.lua")

local readme = assert(R.read("README.md"))
local tour = assert(readme:match("\n## A five%-minute tour\n(.-)\n## "), "no tour in README.md")

-- the tour's commands and its REPL input, in order
local commands, repl, last_estimate = {}, {}, nil
do
  local pending
  for line in (tour .. "\n"):gmatch("([^\n]*)\n") do
    local code = line:match("^    (.*)$")
    if code and pending then
      pending = pending .. " " .. code:gsub("^%s+", "")
    elseif code and code:match("^ndplan") then
      pending = code
    elseif code and code:match("^>>? ") then
      repl[#repl + 1] = code:gsub("^>>? ", "")
    end
    if pending and not pending:match("\\%s*$") then
      local cmd = pending:gsub("%s%s+#.*$", "")     -- the trailing comment
      if cmd:match("^ndplan estimate %-m") then last_estimate = cmd:match("^ndplan estimate (.*)$") end
      if cmd:find("(the same flags)", 1, true) then
        cmd = cmd:gsub("%(the same flags%)", (assert(last_estimate):gsub("%%", "%%%%")))
      end
      commands[#commands + 1] = cmd
      pending = nil
    elseif pending then
      pending = pending:gsub("\\%s*$", "")
    end
  end
end

describe("the README's tour", function()
  it("has the commands this spec expects to run", function()
    assert.is_true(#commands >= 10, table.concat(commands, "\n"))
    assert.is_true(#repl >= 4)
  end)

  it("runs every command as written, exit 0", function()
    local dir = R.tmpdir()
    assert(os.execute("cp spec/fixtures/megatron_llama_pretrain.sh " .. R.quote(dir .. "/pretrain.sh")))
    local bin = R.bin:sub(1, 1) == "/" and R.bin or os.getenv("PWD") .. "/" .. R.bin
    for _, cmd in ipairs(commands) do
      local shell = "cd " .. R.quote(dir) .. " && " .. R.quote(bin) .. cmd:sub(#"ndplan" + 1)
      local r = R.sh(shell)
      assert.equal(0, r.code, cmd .. "\n" .. r.err)
      assert.is_true(#r.out > 0, cmd)
      assert.is_nil(r.err:find("traceback", 1, true), cmd)
    end
    -- the search's -o out/ and --export wrote the report and every trainer file
    for _, f in ipairs({"report.html", "results.csv", "megatron_args.sh", "torchtitan_args.sh",
                        "ds_config.json", "mindformers.yaml", "hyper_train.yaml"}) do
      assert.is_truthy(R.read(dir .. "/out/" .. f), f)
    end
    os.execute("rm -rf " .. R.quote(dir))
  end)

  it("types the REPL lines into the REPL without an error", function()
    local r = R.run({"-i"}, {stdin = table.concat(repl, "\n") .. "\n"})
    assert.equal(0, r.code, r.err)
    assert.equal("", r.err)
    -- the expression lines print values: a step time in seconds and the winner's TP
    assert.matches("\n?> [%d.e+-]+\t[%d.e+-]+\t%a+", r.out)
  end)
end)
