-- Pipeline layouts through the Lua API and the exporters that can state them: nd.estimate's
-- Megatron-named fields, its resolved layout fed back in, and the torchtitan and MindFormers
-- forms of per-chunk layouts (what each says exactly, and what it rounds).
local nd = require "ndplan"
local export = require "ndplan.export"
local script = require "ndplan.config.megatron_script"

local job = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
             seq_len = 8192, tp = 8, sp = true, zero = 1}
local function with(t)
  local a = {}
  for k, v in pairs(job) do a[k] = v end
  for k, v in pairs(t) do a[k] = v end
  return a
end

local function plan_of(args)
  local r = assert(nd.estimate(args))
  return {model = args.model, strategy = r.strategy, job = r.job, result = r}
end

describe("nd.estimate layouts", function()
  it("takes Megatron's layout fields and gives the resolved chunks back", function()
    -- 80 layers + the embedding on pp 4: 81 does not divide; both on pp 2: 41 each
    local r, why = nd.estimate(with{pp = 4, vpp = 2, account_for_embedding_in_pipeline_split = true})
    assert.is_nil(r)
    assert.matches("^layout: 81 layers with %-%-account%-for%-embedding%-in%-pipeline%-split do "
                   .. "not divide over pp 4$", why)  -- no flag set divides it: no hint
    r = assert(nd.estimate(with{pp = 2, account_for_embedding_in_pipeline_split = true,
                                account_for_loss_in_pipeline_split = true}))
    assert.same({40, 40}, r.strategy.stage_layers)
    assert.equal("account", r.strategy.layout_from)
    assert.equal("Et*40|t*40L", r.strategy.pipeline_layout)
  end)

  it("prices its own resolved layout again, chunk sizes as given", function()
    local a = assert(nd.estimate(with{pp = 4, vpp = 3}))  -- 80 over 12 chunks: uneven
    assert.equal(12, #a.strategy.stage_layers)
    local b = assert(nd.estimate(with{pp = 4, vpp = 3, stage_layers = a.strategy.stage_layers}))
    assert.same(a.strategy.stage_layers, b.strategy.stage_layers)
    assert.equal(a.step_time_s, b.step_time_s)
    assert.equal(a.peak_memory_bytes, b.peak_memory_bytes)
    assert.equal("stage_layers", b.strategy.layout_from)
    -- the same layers held differently price differently: the in-flight chunks count
    local moved = {}
    for i, n in ipairs(a.strategy.stage_layers) do moved[i] = n end
    moved[1], moved[5] = moved[1] + 2, moved[5] - 2  -- stage 0: chunk 0 heavier, chunk 1 lighter
    local c = assert(nd.estimate(with{pp = 4, vpp = 3, stage_layers = moved}))
    assert.is_true(c.stages[1].inflight > a.stages[1].inflight)
  end)

  it("refuses conflicting layout fields as Megatron does", function()
    local _, why = nd.estimate(with{pp = 4, pipeline_model_parallel_layout = "Et*20|t*20|t*20|t*20L",
                                    account_for_loss_in_pipeline_split = true})
    assert.matches("^layout: %-%-pipeline%-model%-parallel%-layout cannot be set with", why)
    local ok, err = pcall(nd.estimate, with{pp = 4, vpp = 2, stage_layers = {20, 20, 20}})
    assert.is_false(ok)
    assert.matches("stage_layers: 3 sizes, expected pp = 4 stage sizes or pp%*vpp chunk sizes", err)
  end)
end)

describe("exporters with per-chunk layouts", function()
  -- Llama 3.1 405B (126 layers) on pp 4 x vpp 2 with the embedding and the loss accounted:
  -- (126 + 2) / 8 = chunks of 16, the first and the last 15
  local p = plan_of{model = "llama3.1-405b", device = "h100", devices = 64, global_batch = 64,
                    seq_len = 4096, tp = 8, sp = true, zero = 1, pp = 4, vpp = 2,
                    account_for_embedding_in_pipeline_split = true,
                    account_for_loss_in_pipeline_split = true}
  local chunks = {15, 16, 16, 16, 16, 16, 16, 15}

  it("states it exactly in torchtitan: layers per stage, one fewer first and last", function()
    assert.same(chunks, p.strategy.stage_layers)
    local text, notes = export.export("torchtitan", p)
    assert.matches("pipeline_parallel_layers_per_stage 16\n", text)
    assert.matches("pipeline_parallel_first_stage_less_layers 1\n", text)
    assert.matches("pipeline_parallel_last_stage_less_layers 1\n", text)
    for _, n in ipairs(notes) do assert.not_equal("stage_layers", n.field) end
    local st = assert(export.get("torchtitan").parse(text, {layers = 126}))
    assert.equal(2, st.vpp)
    assert.same(chunks, st.stage_layers)
  end)

  it("states it exactly in MindFormers: pp_interleave_num and an offset per chunk", function()
    local text, notes = export.export("mindformers", p)
    assert.matches("pp_interleave_num: 2", text)
    for _, n in ipairs(notes) do assert.not_equal("stage_layers", n.field) end
    local st = assert(export.get("mindformers").parse(text))
    assert.equal(2, st.vpp)
    assert.same(chunks, st.stage_layers)  -- 126 // 8 = 15 plus each chunk's offset
  end)

  it("rounds in torchtitan what its first/middle/last form cannot say, and says so", function()
    local q = plan_of(with{pp = 2, vpp = 2, stage_layers = {19, 22, 20, 19}})  -- 80 layers
    local _, notes, rounded = export.export("torchtitan", q)
    local said
    for _, n in ipairs(notes) do if n.field == "stage_layers" then said = n end end
    assert.is_table(said)
    assert.equal("19,22,20,19", said.plan)
    -- the nearest split torchtitan builds (21 per stage, one fewer first and last: 2 layers
    -- moved; the even 20,20,20,20 moves 4)
    assert.equal("19,21,21,19", said.file)
    assert.same({19, 21, 21, 19}, rounded.stage_layers)
  end)

  it("reads --pipeline-model-parallel-layout from a launch script through the core", function()
    local info = assert(script.read(table.concat({
      "ARGS=(--num-layers 80 --hidden-size 8192 --num-attention-heads 64",
      "  --pipeline-model-parallel-size 4 --pipeline-model-parallel-layout 'E|(t*20|)*4,||L'", ")"}, "\n")))
    assert.equal(2, info.strategy.vpp)
    assert.same({0, 20, 20, 20, 20, 0, 0, 0}, info.chunk_layers)
    local bad, why = script.read("ARGS=(--num-layers 80 --pipeline-model-parallel-size 4\n"
                                 .. "  --pipeline-model-parallel-layout 'Et*80|L')\n", "run.sh")
    assert.is_nil(bad)
    assert.matches("^run%.sh:2: layout: 2 chunks are not a multiple of pp 4", why)
  end)
end)
