-- A memory budget is finite and above 0 wherever it comes from: -M on every command, a
-- search configuration's memory limit (a policy's opts.budget_bytes and nd.search's max_mem
-- are in sandbox_spec and unit/policy_guard_spec). 0, a negative, NaN or infinite budget was
-- read as "no limit": 893 "fits" peaking at 172 GiB on an 80 GB H100.
local R = dofile("spec/support/run.lua")

local job = {"-m", "llama3.1-8b", "-d", "8", "-b", "8"}
local function with(cmd, ...)
  local a = {cmd}
  for _, x in ipairs(job) do a[#a + 1] = x end
  for _, x in ipairs({...}) do a[#a + 1] = x end
  return a
end

describe("memory budgets", function()
  for _, cmd in ipairs({"search", "estimate", "recompute", "export"}) do
    for _, m in ipairs({"0B", "0", "-1GB", "1e999GB", "nan"}) do
      it(string.format("%s -M %s is a usage error in one line", cmd, m), function()
        local dir = R.tmpdir()
        local r = R.run(with(cmd, "-M", m, "--recompute", cmd == "search" and "auto" or "per_layer",
                             table.unpack(cmd == "export" and {"-f", "megatron", "-o", dir} or {})))
        assert.same({}, R.listing(dir))  -- nothing written
        os.execute("rm -rf " .. R.quote(dir))
        assert.equal(2, r.code, r.err)
        assert.matches("^ndplan: %-%-max%-mem: [^\n]+\n$", r.err)
        assert.equal("", r.out)
      end)
    end
  end

  for _, v in ipairs({"0", "-4", ".nan", ".inf"}) do
    it("refuses a search configuration's memory_limit_gb of " .. v, function()
      local path = R.tempfile("model: llama3.1-8b\ncluster: {num_nodes: 1}\n"
                              .. "constraint: {global_batch_size: 8, memory_limit_gb: " .. v .. "}\n",
                              ".yaml")
      local r = R.run({"search", "-s", path})
      os.remove(path)
      assert.equal(1, r.code, r.err)
      assert.matches("^ndplan: [^\n]*%.yaml: memory limit: expected a finite number of GB above 0",
                     r.err)
    end)
  end

  it("still takes a positive budget", function()
    local r = R.run(with("search", "-M", "40GiB", "-t", "1"))
    assert.equal(0, r.code, r.err)
    assert.matches("budget 40%.0 GiB", r.out)
  end)

  it("refuses an infinite --timeout", function()
    local r = R.run(with("search", "--timeout", "1e999"))
    assert.equal(2, r.code)
    assert.matches("^ndplan: %-%-timeout: expected a positive number of seconds\n$", r.err)
  end)
end)
