-- Pipeline layouts as a user states them, under Megatron-Core's flag names: estimate --json
-- gives each stage's chunks; the layout string, the accounting flags and first/last stage
-- layers go out through the Megatron exporter and come back through --from-megatron; what
-- Megatron refuses is refused in one line labelled "layout"; the search walks the variants.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"

-- Llama 3.1 405B (126 layers) on PP 8 x VPP 8, as NeMo runs it
local base = {"-m", "llama3.1-405b", "-A", "h100", "-d", "1024", "-b", "512", "--seq-len", "8192",
              "--tp", "8", "--pp", "8", "--sp", "--zero", "1",
              "--recompute", "full"}  -- (so that it fits: ndplan export refuses plans that do not)
local function args(cmd, ...)
  local a = {cmd}
  for _, x in ipairs(base) do a[#a + 1] = x end
  for _, x in ipairs({...}) do a[#a + 1] = x end
  return a
end

local function estimate(...)
  local r = R.run(args("estimate", "--json", ...))
  assert.equal(0, r.code, r.err)
  return cjson.decode(r.out)
end

-- The chunk sizes of a document, stage by stage, chunk by chunk.
local function chunks(doc)
  local out = {}
  for _, s in ipairs(doc.stages) do
    local row = {}
    for _, c in ipairs(s.chunks) do row[#row + 1] = string.format("%d", c.layers) end
    out[#out + 1] = table.concat(row, ",")
  end
  return table.concat(out, " ")
end

describe("pipeline layouts", function()
  it("places the embedding and the loss as one layer each with Megatron's accounting flags", function()
    local doc = estimate("--vpp", "8", "--account-for-embedding-in-pipeline-split",
                         "--account-for-loss-in-pipeline-split")
    assert.equal(8, #doc.stages)
    local first, last = doc.stages[1].chunks, doc.stages[8].chunks
    assert.equal(8, #first)
    -- (126 + 2) / 64 = 2 per chunk; the embedding's and the loss's chunks build one fewer
    assert.same({1, 2, 2, 2, 2, 2, 2, 2}, (function() local t = {} for i, c in ipairs(first) do t[i] = c.layers end return t end)())
    assert.is_true(first[1].embedding)
    assert.is_false(first[2].embedding)
    assert.equal(1, last[8].layers)
    assert.is_true(last[8].loss)
    assert.equal(0, first[1].first_layer)
    assert.equal(1, doc.stages[2].chunks[1].first_layer)  -- chunk 0 of stage 1 follows it
    assert.equal(15, first[2].first_layer)                 -- after the 8 chunks of round 0
    assert.equal("Et|(tt|)*62,tL", doc.strategy.pipeline_layout)
  end)

  it("takes Megatron's layout string, which sets vpp", function()
    local doc = estimate("--pipeline-model-parallel-layout", "Et*3|(t*4|)*30,t*3L")
    assert.equal(4, doc.strategy.vpp)  -- 32 chunks over pp 8
    assert.equal("string", doc.strategy.layout_from)
    assert.equal(3, doc.stages[1].chunks[1].layers)
    assert.equal(4, doc.stages[1].chunks[2].layers)
    assert.equal(3, doc.stages[8].chunks[4].layers)
    -- a stage holding the embedding alone
    doc = estimate("--pipeline-model-parallel-layout", "E|(t*18|)*6,t*18L")
    assert.equal("0 18 18 18 18 18 18 18", chunks(doc))
    assert.equal(0, doc.stages[1].layers)
  end)

  it("takes --stage-layers as pp x vpp chunk sizes", function()
    local list = {}
    for k = 1, 16 do list[k] = k == 1 and "7" or k == 16 and "7" or "8" end
    local doc = estimate("--pp", "8", "--vpp", "2", "--stage-layers", table.concat(list, ","))
    assert.equal("7,8 8,8 8,8 8,8 8,8 8,8 8,8 8,7", chunks(doc))
  end)

  it("writes the layout in Megatron's flags and reads it back", function()
    for _, extra in ipairs({
        {"--vpp", "8", "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"},
        {"--pipeline-model-parallel-layout", "E|(t*18|)*6,t*18L"},
        {"--vpp", "2", "--decoder-first-pipeline-num-layers", "12", "--decoder-last-pipeline-num-layers", "18"},
        {"--vpp", "4"}}) do  -- the even split: 126 over 32 chunks, stated as a layout string
      local dir = R.tmpdir()
      local e = R.run(args("export", "-f", "megatron", "-o", dir, table.unpack(extra)))
      assert.equal(0, e.code, e.err)
      local text = R.read(dir .. "/megatron_args.sh")
      local want = estimate(table.unpack(extra))
      local back = R.run({"estimate", "--from-megatron", dir .. "/megatron_args.sh", "-m",
                          "llama3.1-405b", "-A", "h100", "--json"})
      assert.equal(0, back.code, back.err)
      local got = cjson.decode(back.out)
      assert.equal(chunks(want), chunks(got), text)
      assert.equal(want.strategy.pipeline_layout, got.strategy.pipeline_layout)
      assert.equal(want.step_time_s, got.step_time_s)
      os.execute("rm -rf " .. R.quote(dir))
    end
  end)

  it("writes the accounting flags when they state the layout", function()
    local dir = R.tmpdir()
    local e = R.run(args("export", "-f", "megatron", "-o", dir, "--vpp", "8",
                         "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"))
    assert.equal(0, e.code, e.err)
    local text = R.read(dir .. "/megatron_args.sh")
    assert.matches("%-%-account%-for%-embedding%-in%-pipeline%-split", text)
    assert.matches("%-%-account%-for%-loss%-in%-pipeline%-split", text)
    assert.matches("%-%-num%-layers%-per%-virtual%-pipeline%-stage 2\n", text)
    assert.not_matches("pipeline%-model%-parallel%-layout", text)
    os.execute("rm -rf " .. R.quote(dir))
  end)

  it("refuses what Megatron refuses, labelled layout, with a hint", function()
    local r = R.run(args("estimate", "--vpp", "8", "--account-for-embedding-in-pipeline-split"))
    assert.equal(1, r.code)
    assert.matches("^ndplan: strategy refused: layout: 127 layers with "
                   .. "%-%-account%-for%-embedding%-in%-pipeline%-split do not divide over pp 8 "
                   .. "%(126 layers %+ embedding %+ loss split into 64 chunks of 2 with "
                   .. "%-%-account%-for%-embedding%-in%-pipeline%-split "
                   .. "%-%-account%-for%-loss%-in%-pipeline%-split%)\n$", r.err)
    r = R.run(args("estimate", "--vpp", "2", "--decoder-first-pipeline-num-layers", "15"))
    assert.equal(1, r.code)
    assert.matches("layout: the first %(15%) and last %(0%) stage layers must be multiples of vpp 2", r.err)
    r = R.run(args("estimate", "--pipeline-model-parallel-layout", "Et*125|L"))
    assert.equal(1, r.code)
    assert.matches("layout: 2 chunks are not a multiple of pp 8", r.err)
    r = R.run(args("estimate", "--pipeline-model-parallel-layout", "(t|)*7Et*119L"))
    assert.equal(1, r.code)
    assert.matches("first layer must be the embedding", r.err)
    assert.equal(1, select(2, r.err:gsub("\n", "")))  -- one line
  end)

  it("refuses degrees whose products would wrap, in one line", function()
    local r = R.run({"estimate", "-m", "llama3.1-8b", "-d", "64", "-b", "64", "--pp", "8",
                     "--vpp", "536870916"})
    assert.equal(1, r.code)
    assert.matches("degree out of bounds: pp%*vpp = 4294967328 chunks over 512", r.err)
    r = R.run({"estimate", "-m", "llama3.1-8b", "-d", "64", "-b", "64", "--tp", "536870912",
               "--cp", "536870912", "--pp", "64"})
    assert.equal(1, r.code)
    assert.matches("degree out of bounds", r.err)
  end)

  it("searches the layout variants of an uneven split, each labelled, the same for any -j", function()
    local a = {"search", "-m", "llama3.1-405b", "-A", "h100", "-d", "1024", "-b", "512",
               "--seq-len", "8192", "--tp", "8", "--pp", "8", "--cp", "2", "--sp", "on", "--zero", "1",
               "--mbs", "1", "--json", "-t", "1000"}
    local function jobs(n)
      local t = {table.unpack(a)}
      t[#t + 1] = "-j"; t[#t + 1] = n
      return t
    end
    local one, two = R.run(jobs("1")), R.run(jobs("2"))
    assert.equal(0, one.code, one.err)
    assert.equal(one.out, two.out)
    local doc = cjson.decode(one.out)
    for _, r in ipairs(doc.results) do
      if r.strategy.layout == "account" and r.strategy.vpp == 8 then
        assert.equal("Et|(tt|)*62,tL", r.strategy.pipeline_layout)
        assert.is_true(r.strategy.account_for_embedding_in_pipeline_split)
      end
    end
    -- every priced candidate, with its variant: results.csv's last column
    local dir = R.tmpdir()
    local t = jobs("2")
    t[#t + 1] = "-o"; t[#t + 1] = dir; t[#t + 1] = "--all-rows"
    assert.equal(0, R.run(t).code)
    local seen, per_vpp = {}, {}
    for line in R.read(dir .. "/results.csv"):gmatch("[^\n]+") do
      local vpp, layout = line:match("^%d+,%d+,%d+,%d+,(%d+),.*,([%a_]+)$")
      if vpp then
        seen[layout] = true
        per_vpp[tonumber(vpp)] = per_vpp[tonumber(vpp)] or {}
        per_vpp[tonumber(vpp)][layout] = true
      end
    end
    os.execute("rm -rf " .. R.quote(dir))
    assert.is_truthy(seen.even and seen.account and seen.first_last)
    -- 126 layers over 8 x 8 chunks: Megatron's accounting states it (walked under its name)
    assert.same({account = true}, per_vpp[8])
    -- an automatic VPP past 4 only where the layers fill the chunks (8 here: 126 + 2 over
    -- 64; 16: 126 + 2 over 128 chunks of 1, the first and last holding the embedding and the
    -- loss alone, as Megatron builds them); VPP 15 (uneven) is walked when listed, not by
    -- default
    assert.is_nil(per_vpp[15])
    assert.same({account = true}, per_vpp[16])
  end)
end)
