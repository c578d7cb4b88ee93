-- Issue 16, item 9: the fields a policy's hooks are given, as the README lists them, and
-- --policy-opts typed. The policy below records the type of every field it is handed and
-- writes them from done(); the spec compares them with the README's lists.
local R = dofile("spec/support/run.lua")

local POLICY = [==[
local seen = {}
local function note(hook, t, prefix)
  for k, v in pairs(t) do
    local key = hook .. "." .. (prefix or "") .. k
    if type(v) == "table" and prefix == nil and k ~= "policy" then note(hook, v, k .. ".")
    else seen[key] = type(v) end
  end
end
return {
  setup = function(job, opts) note("job", job); note("opts", opts); note("policy", opts.policy, "") end,
  admit = function(c) note("candidate", c); return true end,
  objective = function(e) note("estimate", e); return e.step_time_s end,
  rank = function(results, opts)
    local out = {}
    for i = 1, math.min(#results, opts.top) do out[i] = results[i] end
    note("results", out[1])
    return out
  end,
  done = function(ranked, out)
    note("out", out)
    local keys = {}
    for k, v in pairs(seen) do keys[#keys + 1] = k .. " " .. v end
    table.sort(keys)
    assert(out.write("fields.txt", table.concat(keys, "\n") .. "\n"))
  end,
}
]==]

local function fields(text, hook)
  local out = {}
  for k, t in ("\n" .. text):gmatch("\n" .. hook .. "%.([%w_.]+) (%a+)") do out[k] = t end
  return out
end

describe("a policy's fields", function()
  local dir, text
  setup(function()
    dir = R.tmpdir()
    local path = R.tempfile(POLICY, ".lua")
    local r = R.run({"search", "-m", "llama3.1-8b", "-d", "8", "-b", "64", "--tp", "1,2",
                     "--policy", path, "--policy-opts", "price=2.49,strict=true,name=abc",
                     "-o", dir})
    os.remove(path)
    assert.equal(0, r.code, r.err)
    text = assert(R.read(dir .. "/fields.txt"))
  end)
  teardown(function() os.execute("rm -rf " .. R.quote(dir)) end)

  it("types --policy-opts as written", function()
    local p = fields(text, "policy")
    assert.same({price = "number", strict = "boolean", name = "string"}, p)
  end)

  it("gives setup the job and opts the README lists", function()
    assert.same({model = "string", device = "string", devices = "number", global_batch = "number",
                 seq_len = "number", node_size = "number", hbm_bytes = "number"}, fields(text, "job"))
    local o = fields(text, "opts")
    for _, k in ipairs({"budget_bytes", "top", "jobs", "policy"}) do assert.is_truthy(o[k], k) end
  end)

  it("gives admit the candidate's degrees", function()
    local c = fields(text, "candidate")
    local want = {sp = "boolean", recompute = "string", layout = "string", precision = "string"}
    for k in ("dp tp pp vpp cp ep etp zero mbs mb dp_shard dp_replicate"):gmatch("[%a_]+") do
      want[k] = "number"
    end
    -- a variant's Megatron flags where the walk reaches one (32 + 2 layers over pp 2 x vpp 17:
    -- both accounting flags); the first/last stage counts are numbers where they apply
    for _, k in ipairs({"account_for_embedding_in_pipeline_split",
                        "account_for_loss_in_pipeline_split"}) do
      assert.equal("boolean", c[k], k)
      want[k] = "boolean"
    end
    for _, k in ipairs({"decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"}) do
      if c[k] ~= nil then want[k] = "number" end
    end
    assert.same(want, c)
  end)

  it("gives objective the estimate's fields, rank the same rows with their objective", function()
    local e = fields(text, "estimate")
    for k in ("index step_time_s tokens_per_s mfu hfu peak_memory_bytes heaviest_stage stages "
              .. "budget_bytes over_bytes"):gmatch("[%w_]+") do
      assert.equal("number", e[k], k)
    end
    assert.equal("boolean", e.fits)
    for k in ("weights grads optimizer activations buffers reserve peak"):gmatch("%a+") do
      assert.equal("number", e["memory_parts_bytes." .. k], k)
    end
    for k in ("forward backward recompute tp_comm cp_comm ep_comm pp_comm dp_comm optimizer "
              .. "bubble offload"):gmatch("[%w_]+") do
      assert.equal("number", e["time_parts_s." .. k], k)
    end
    assert.equal("number", e["strategy.tp"])
    local r = fields(text, "results")
    assert.equal("number", r.objective)
    assert.same(e["strategy.tp"], r["strategy.tp"])
    assert.equal("number", r.step_time_s)
  end)

  it("gives done out.dir, out.info and out.write", function()
    local o = fields(text, "out")
    assert.equal("string", o.dir)
    assert.equal("function", o.write)
    assert.equal("number", o["info.tested"])
    assert.equal("table", o["info.bounds"] and "table" or o["info.bounds.tp"] and "table")
  end)
end)
