-- The search configuration YAML (-s) states what the flags state (issue 13): precision as a
-- recipe or a list of recipes, each walked, and HSDP's dp_shard / dp_replicate under
-- parallelism; a bad value fails with one line naming the file and the field. Mechanics,
-- not fidelity: --stack none.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"

local BASE = "model: llama3.1-8b\ncluster: {num_nodes: 1, device_type: h100}\n"
  .. "constraint: {global_batch_size: 64}\n"

local function config(extra)
  return R.tempfile(BASE .. extra, ".yaml")
end

local function search(args)
  local a = {"search", "--stack", "none", "--json", "-t", "1000"}
  for _, x in ipairs(args) do a[#a + 1] = x end
  local r = R.run(a)
  assert.equal(0, r.code, r.err)
  return cjson.decode(r.out)
end

-- the walk as counts and (recipe, degrees) of every kept row: two runs that walk the same
local function walked(doc)
  local rows = {}
  for _, r in ipairs(doc.results) do
    local s = r.strategy
    rows[#rows + 1] = string.format("%s %d %d %d %d %d %s", s.precision, s.dp, s.tp, s.pp,
                                    s.zero, s.mbs, tostring(s.dp_shard))
  end
  return {counts = doc.counts, rows = rows}
end

describe("the search configuration's precision", function()
  it("walks a list of recipes as --precision with the same list does", function()
    local flags = {"-m", "llama3.1-8b", "-A", "h100", "-d", "8", "-b", "64", "--tp", "2",
                   "--precision", "bf16,fp8:tensorwise"}
    local want = walked(search(flags))
    local seen = {}
    for _, row in ipairs(want.rows) do seen[row:match("^%S+")] = true end
    assert.is_true(seen.bf16 and seen["fp8:tensorwise"])  -- both recipes walked
    for _, form in ipairs({"precision: [bf16, 'fp8:tensorwise']\n",
                           "precision: 'bf16,fp8:tensorwise'\n",
                           "precision:\n  - bf16\n  - fp8:tensorwise\n"}) do
      local path = config("parallelism: {tp: 2}\n" .. form)
      local got = walked(search({"-s", path}))
      os.remove(path)
      assert.same(want, got, form)
    end
  end)

  it("takes one recipe, and the flag overrides the file", function()
    local path = config("parallelism: {tp: 2}\nprecision: fp8:mxfp8\n")
    local one = search({"-s", path, "-A", "b200"})
    for _, r in ipairs(one.results) do assert.equal("fp8:mxfp8", r.strategy.precision) end
    local flag = search({"-s", path, "-A", "b200", "--precision", "bf16"})
    os.remove(path)
    for _, r in ipairs(flag.results) do assert.equal("bf16", r.strategy.precision) end
  end)

  it("refuses a bad recipe, naming the file and the entry, exit 1", function()
    local cases = {
      {"precision: [bf16, fp9]\n", "precision%[2%]: expected bf16, .* or nvfp4, got 'fp9'"},
      {"precision: [bf16, 8]\n", "precision%[2%]: expected bf16, .*, got 8"},
      {"precision: fp8:nope\n", "precision: expected bf16, .*, got 'fp8:nope'"},
      {"precision: []\n", "precision: expected a recipe or a list of recipes, got an empty list"},
      {"precision: {a: bf16}\n", "precision: expected a recipe or a list of recipes, got a mapping"},
      {"precision: 3\n", "precision: expected a recipe or a list of recipes, got 3"},
    }
    for _, c in ipairs(cases) do
      local path = config(c[1])
      local r = R.run({"search", "-s", path, "--stack", "none"})
      os.remove(path)
      assert.equal(1, r.code, c[1] .. r.err)
      assert.matches("^ndplan: " .. path:gsub("%p", "%%%0") .. ": " .. c[2] .. "\n$", r.err)
    end
  end)
end)

describe("the search configuration's HSDP groups", function()
  it("walks parallelism.dp_shard and dp_replicate as --dp-shard and --dp-replicate do", function()
    local flags = {"-m", "llama3.1-8b", "-A", "h100", "-d", "8", "-b", "64", "--tp", "1",
                   "--pp", "1", "--zero", "1"}
    for _, c in ipairs({{"dp_shard: [2, 4]", "--dp-shard", "2,4"},
                        {"dp_replicate: auto", "--dp-replicate", "auto"}}) do
      local a = {}
      for i, x in ipairs(flags) do a[i] = x end
      a[#a + 1] = c[2]; a[#a + 1] = c[3]
      local want = walked(search(a))
      local path = config("parallelism: {tp: 1, pp: 1, zero: 1, " .. c[1] .. "}\n")
      local got = walked(search({"-s", path}))
      os.remove(path)
      assert.same(want, got, c[1])
      assert.is_true(#got.rows > 1)
    end
  end)
end)
