-- The trainer exporters: every file is parsed back (YAML and JSON through ndplan's own
-- loaders, shell flags through ndplan.export.flags) and compared with the strategy the
-- exporter says it wrote; rounding notes appear exactly when the file cannot say the plan.
local nd = require "ndplan"
local export = require "ndplan.export"
local flags = require "ndplan.export.flags"
local script = require "ndplan.config.megatron_script"

local function plan_of(args)
  local r = assert(nd.estimate(args))
  return {model = args.model, strategy = r.strategy, job = r.job, result = r,
          layer_recompute = args.layer_recompute}
end

local modes = dofile("spec/support/check.lua").modes

local PLANS = {
  dense = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
           seq_len = 8192, tp = 8, pp = 4, vpp = 2, sp = true, zero = 1, recompute = "selective"},
  moe = {model = "deepseek-v3", device = "h100", devices = 1024, global_batch = 4096,
         seq_len = 4096, pp = 16, ep = 64, recompute = "full",
         stage_layers = {3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 3}},
  zero3 = {model = "llama3.1-8b", device = "h100", devices = 64, global_batch = 512,
           seq_len = 4096, zero = 3, recompute = "full"},
  -- per stage of 20 layers: the first 10 full, the next 10 selective in stage 0, none after
  prefix = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
            seq_len = 8192, tp = 8, pp = 4, sp = true, zero = 1,
            layer_recompute = modes(80, "0-9:full,10-19:selective,20-29:full")},
  -- 45% of the waiting activations on the host
  offload = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
             seq_len = 8192, tp = 8, pp = 4, vpp = 2, sp = true, zero = 1,
             recompute = "selective", offload = 0.45},
  -- FP8 with torchao's FSDP float8 all-gather, and NVFP4 with Megatron's param gather
  fp8 = {model = "llama3.1-8b", device = "h100", devices = 64, global_batch = 512,
         seq_len = 4096, zero = 3, recompute = "full", precision = "fp8:tensorwise",
         fp8_param_gather = true},
  nvfp4 = {model = "llama3.1-8b", device = "b200", devices = 64, global_batch = 512,
           seq_len = 4096, tp = 2, zero = 1, recompute = "selective", precision = "nvfp4",
           fp8_param_gather = true, bf16_first_layers = 1},
  -- full layers in the middle of each stage: no "first N" rule says that
  scattered = {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
               seq_len = 8192, tp = 8, pp = 4, sp = true, zero = 1,
               layer_recompute = modes(80, "5-9:full,25-29:full,45-49:full,65-69:full")},
}

-- What each file can state, compared after parsing it back.
local FIELDS = {
  megatron = {"tp", "pp", "vpp", "cp", "sp", "zero", "mbs", "mb", "precision", "recompute", "stage_layers", "offload",
              "fp8_param_gather", "bf16_first_layers", "bf16_last_layers"},
  torchtitan = {"dp", "tp", "pp", "vpp", "cp", "zero", "mbs", "mb", "recompute", "stage_layers",
                "precision", "fp8_param_gather"},
  deepspeed = {"dp", "tp", "zero", "mbs", "mb", "precision", "recompute", "offload"},
  mindformers = {"dp", "tp", "pp", "vpp", "cp", "ep", "sp", "zero", "mbs", "mb", "precision", "recompute", "stage_layers"},
  hyper = {"dp", "tp", "pp", "vpp", "cp", "ep", "sp", "zero", "mbs", "mb", "precision", "recompute", "stage_layers"},
}

-- The strategy the file should state: the rounded one when there is one, else the plan.
local function expected(plan, rounded)
  local ctx = assert(export.context(plan))
  local st = export.copy(ctx.strategy)
  if rounded then
    for k, v in pairs(rounded) do st[k] = v end
    if rounded.recompute then
      for i = 1, #st.layer_recompute do st.layer_recompute[i] = rounded.recompute end
    end
  end
  return st, ctx
end

local function check_round_trip(name, plan)
  local mod = export.get(name)
  local text, notes, rounded = mod.render(plan)
  if text == nil and rounded == "refused" then return nil, nil, notes end  -- see the conformance spec
  assert.is_string(text, notes)
  local want, ctx = expected(plan, rounded)
  local got, job = mod.parse(text, {layers = ctx.layers, mtp = ctx.mtp, devices = plan.job.devices,
                                    pp = want.pp})
  assert.is_table(got, tostring(job))
  for _, f in ipairs(FIELDS[name]) do
    local a, b = want[f], got[f]
    if f == "recompute" then
      a = want.layer_recompute
      b = got.layer_recompute
      if not b then
        b = {}
        for i = 1, #a do b[i] = got.recompute end
      end
    elseif f == "stage_layers" then
      if want.vpp > 1 or want.pp == 1 then goto continue end
      a = export.copy(want.stage_layers)
      if name ~= "megatron" then a[#a] = a[#a] - ctx.mtp end  -- the others count body layers
      b = got.stage_layers or (name == "megatron" and export.even_layout(ctx.layers, ctx.mtp, want.pp))
    elseif f == "zero" then
      a = want.dp > 1 and a or 0
      b = want.dp > 1 and b or 0
    elseif f == "sp" then
      a = a and want.tp > 1
      b = b and want.tp > 1 or false
    elseif f == "precision" then
      b = b or "bf16"  -- no converter or precision flag: BF16
    elseif export.RECIPE_FIELDS[f] then  -- the recipe's options, where it quantizes
      if not export.quantized(want.precision) then goto continue end
      b = b or false
    end
    assert.same(a, b, string.format("%s: %s", name, f))
    ::continue::
  end
  assert.equal(plan.job.global_batch, job.global_batch)
  return notes, rounded
end

local function kinds(notes, kind)
  local out = {}
  for _, n in ipairs(notes) do
    if n.kind == kind then out[#out + 1] = n.field end
  end
  table.sort(out)
  return out
end

describe("ndplan.export", function()
  local plans = {}
  setup(function()
    for k, args in pairs(PLANS) do plans[k] = plan_of(args) end
  end)

  it("lists five exporters, each with a dialect and a file name", function()
    assert.same({"megatron", "torchtitan", "deepspeed", "mindformers", "hyper"}, export.list())
    for _, name in ipairs(export.list()) do
      local mod = export.get(name)
      assert.is_string(mod.dialect)
      assert.is_string(mod.filename)
    end
    assert.matches("2026", export.get("torchtitan").dialect)
    local _, err = export.get("nemo")
    assert.matches("unknown export format 'nemo'", err)
  end)

  for _, name in ipairs({"megatron", "torchtitan", "deepspeed", "mindformers", "hyper"}) do
    it(name .. " files parse back to what they state, for every plan", function()
      for _, key in ipairs({"dense", "moe", "zero3", "prefix", "scattered", "offload", "fp8",
                            "nvfp4"}) do
        local notes, rounded, refused = check_round_trip(name, plans[key])
        -- a rounded plan is re-priceable, and comes exactly with "rounded" notes
        if not refused then
          assert.equal(#kinds(notes, "rounded") > 0, rounded ~= nil, name .. " " .. key)
        end
        if rounded then
          rounded.device = PLANS[key].device
          assert.is_table(nd.estimate(rounded))
        end
      end
    end)
  end

  it("rounds exactly what each trainer cannot say", function()
    local function rounded_fields(name, key, dialect)
      local text, notes = export.export(name, plans[key], {dialect = dialect})
      if not text then return "refused" end
      return kinds(notes, "rounded")
    end
    -- the dense plan: Megatron and MindFormers say it all
    assert.same({}, rounded_fields("megatron", "dense"))
    assert.same({}, rounded_fields("mindformers", "dense"))
    assert.equal("refused", rounded_fields("deepspeed", "dense"))  -- AutoTP with PP
    -- torchtitan's selective AC is per-op: Megatron's attention-core switch rounds to it
    assert.same({"selective_ops", "zero"}, rounded_fields("torchtitan", "dense"))
    assert.same({"schedule", "stage_layers", "vpp", "zero"}, rounded_fields("hyper", "dense"))
    -- ZeRO-3 over DP only: every trainer but MindFormers' one switch
    for _, name in ipairs({"megatron", "torchtitan", "deepspeed", "hyper"}) do
      assert.same({}, rounded_fields(name, "zero3"), name)
    end
    assert.same({"zero"}, rounded_fields("mindformers", "zero3"))
    -- per-layer plans: a prefix per stage is MindFormers' language; HyperParallel has one mode
    assert.same({}, rounded_fields("mindformers", "prefix"))
    assert.same({"recompute"}, rounded_fields("mindformers", "scattered"))
    assert.same({"recompute", "zero"}, rounded_fields("hyper", "scattered"))
    for _, key in ipairs({"prefix", "scattered"}) do
      assert.same({"recompute"}, rounded_fields("megatron", key))
      assert.same({"recompute", "zero"}, rounded_fields("torchtitan", key))
    end
    -- precision: Megatron states every recipe and its options; torchtitan FP8 tensorwise
    -- with the FSDP float8 all-gather, but no NVFP4; the others BF16 only
    assert.same({}, rounded_fields("megatron", "fp8"))
    assert.same({}, rounded_fields("megatron", "nvfp4"))
    assert.same({}, rounded_fields("torchtitan", "fp8", "v0.2.2"))
    assert.same({"precision", "selective_ops", "sp", "zero"}, rounded_fields("torchtitan", "nvfp4", "v0.2.2"))
    -- torchtitan main takes converters from the model config, off the command line
    assert.same({"precision"}, rounded_fields("torchtitan", "fp8"))
    for _, name in ipairs({"deepspeed", "mindformers", "hyper"}) do
      local fields = rounded_fields(name, "fp8")
      assert.truthy(table.concat(fields, ","):find("precision"), name)
    end
    assert.same({"recompute"}, rounded_fields("megatron", "prefix"))
  end)

  it("offloads whole layers in Megatron where it may, all checkpoints in DeepSpeed", function()
    local function offload(name, plan)
      local text, notes, rounded = export.export(name, plan)
      local field
      for _, n in ipairs(notes) do if n.field == "offload" then field = n end end
      return rounded and rounded.offload, field, text
    end
    -- one stage, no recompute: 35 of the 80 layers (0.43 rounded up to whole layers)
    local one = plan_of{model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512,
                        seq_len = 4096, tp = 8, zero = 1, offload = 0.43}
    local share, note, text = offload("megatron", one)
    assert.equal(35 / 80, share)
    assert.equal("0.4375", note.file)
    assert.matches("%-%-cpu%-offloading%-num%-layers 35\n", text)
    assert.is_nil(text:find("--cpu-offloading\n", 1, true))  -- no such flag (arguments.py:2320)
    -- with PP (and with recompute) Megatron refuses CPU offloading: the file drops it
    share, note = offload("megatron", plans.offload)
    assert.equal(0, share)
    assert.matches("transformer_config.py:1891", note.why)
    -- DeepSpeed moves every checkpoint (with recompute), or nothing without it
    local ds = plan_of{model = "llama3.1-8b", device = "h100", devices = 64, global_batch = 512,
                       seq_len = 4096, zero = 1, recompute = "full", offload = 0.45}
    assert.equal(1, (offload("deepspeed", ds)))
    assert.equal(0, (offload("deepspeed", one)))
    for _, name in ipairs({"torchtitan", "mindformers", "hyper"}) do
      assert.equal(0, (offload(name, one)), name)
    end
  end)

  it("rounds recompute up: no layer recomputes less than planned", function()
    local rank = export.MODE_RANK
    for _, name in ipairs({"megatron", "torchtitan", "mindformers", "hyper"}) do
      local _, _, rounded = export.export(name, plans.scattered)
      local per = rounded.layer_recompute
      if not per then
        per = {}
        for i = 1, 80 do per[i] = rounded.recompute end
      end
      for i, m in ipairs(plans.scattered.layer_recompute) do
        assert.is_true(rank[per[i]] >= rank[m], name .. " layer " .. (i - 1))
      end
    end
    -- Megatron: block recompute of the first 10 layers of each stage of 20
    local text = export.export("megatron", plans.scattered)
    assert.matches("%-%-recompute%-method block\n%s*%-%-recompute%-num%-layers 10\n", text)
  end)

  it("re-prices a rounded plan on the plan's own stack profile", function()
    local args = {model = "llama3.1-70b", devices = 64, global_batch = 512, seq_len = 8192,
                  tp = 8, pp = 4, sp = true, zero = 1, recompute = "selective"}
    local seen = {}
    for _, stack in ipairs({"none", "megatron-core"}) do
      local price = export.pricer({device = "h100", stack = stack})
      local a = {}
      for k, v in pairs(args) do a[k] = v end
      local got = assert(price(a))
      a = {device = "h100", stack = stack}
      for k, v in pairs(args) do a[k] = v end
      assert.are.equal(assert(nd.estimate(a)).step_time_s, got.step_time_s, stack)
      seen[stack] = got.step_time_s
    end
    assert.are_not.equal(seen.none, seen["megatron-core"])
  end)

  it("writes DeepSeek-V3's uneven layout in each trainer's terms", function()
    local text = export.export("megatron", plans.moe)
    assert.matches("%-%-decoder%-first%-pipeline%-num%-layers 3\n", text)
    assert.matches("%-%-decoder%-last%-pipeline%-num%-layers 2\n", text)  -- + the MTP layer
    assert.matches("%-%-moe%-layer%-freq '%(%[0%]%*3%+%[1%]%*58%)'", text)
    assert.matches("%-%-mtp%-num%-layers 1\n", text)
    assert.matches("%-%-expert%-tensor%-parallel%-size 1\n", text)  -- Megatron's default is TP
    local mf = export.export("mindformers", plans.moe)
    assert.matches("offset: %[0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0%]", mf)
    local text, why = export.export("hyper", plans.moe)
    assert.is_nil(text)
    assert.matches("EP is its own mesh axis", why)
  end)

  it("writes an explicit layout when first/last cannot say it", function()
    local p = plan_of{model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64,
                      seq_len = 4096, pp = 4, stage_layers = {7, 9, 8, 8}}
    local text, notes = export.export("megatron", p)
    assert.matches("%-%-pipeline%-model%-parallel%-layout 'Et%*7|t%*9|t%*8|t%*8L'", text)
    assert.same({}, notes)
    assert.same({7, 9, 8, 8}, (export.get("megatron").parse(text)).stage_layers)
    -- torchtitan spreads 32 + 2 effective layers over 4 stages of 9 (the first two get the
    -- remainder), the first giving up 2: 7, 9, 8, 8 exactly
    local tt, tnotes = export.export("torchtitan", p)
    assert.same({}, tnotes)
    assert.matches("pipeline_parallel_layers_per_stage 9\n", tt)
    assert.matches("pipeline_parallel_first_stage_less_layers 2\n", tt)
    assert.matches("pipeline_parallel_last_stage_less_layers 0\n", tt)
    -- a layout no setting builds is rounded to the nearest one that does
    local q = plan_of{model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64,
                      seq_len = 4096, pp = 4, stage_layers = {8, 6, 10, 8}}
    local _, qnotes, qrounded = export.export("torchtitan", q)
    assert.equal("stage_layers", qnotes[1].field)
    local moved = 0
    for k, n in ipairs({8, 6, 10, 8}) do moved = moved + math.abs(qrounded.stage_layers[k] - n) end
    assert.equal(4, moved)  -- 8,8,8,8: the least layers moved
    assert.matches("offset: %[%-1, 1, 0, 0%]", (export.export("hyper", p)))
    assert.matches("offset: %[%-1, 1, 0, 0%]", (export.export("mindformers", p)))
  end)

  it("writes HyperParallel's one recompute mode, the strongest a per-layer plan uses", function()
    local text, notes = export.export("hyper", plans.prefix)
    assert.matches('activation_checkpoint:\n  mode: full\n$', text)
    assert.is_nil(text:find("layers:", 1, true))  -- no field of its config classes
    assert.is_nil(text:find("pipeline_scheduler", 1, true))
    assert.same({"recompute", "zero"}, kinds(notes, "rounded"))
  end)
end)

describe("ndplan.export.torchtitan reading", function()
  it("reads a v0.2.2 train_configs TOML: sections, comments, the inferred FSDP degree", function()
    local text = table.concat({
      "# a preset in the shape of torchtitan's llama3 train_configs",
      "[model]", 'name = "llama3"', 'flavor = "70B"', '# converters = ["float8"]',
      "[training]", "local_batch_size = 8", "seq_len = 8192  # tokens", 'dataset = "c4"',
      "[parallelism]", "data_parallel_replicate_degree = 1", "data_parallel_shard_degree = -1",
      "tensor_parallel_degree = 8  # 8-way TP", "pipeline_parallel_degree = 1",
      "[activation_checkpoint]", 'mode = "full"', "[quantize.linear.float8]",
      'filter_fqns = ["output", "x"]'}, "\n")
    local tt = export.get("torchtitan")
    local st, job = assert(tt.parse(text, {layers = 80, devices = 64}))
    assert.same({8, 8, 1, 3, "full"}, {st.tp, st.dp, st.pp, st.zero, st.recompute})
    assert.same({global_batch = 64, seq_len = 8192}, job)  -- local 8 x dp 8 (job_config.py:256)
    assert.equal("output", tt.toml(text, "t.toml")["quantize.linear.float8.filter_fqns"])
    local _, err = tt.parse("[model]\nname\n", {source = "bad.toml"})
    assert.equal("bad.toml:2: cannot read the TOML line 'name'", err)
  end)

  it("reads its own flags back in both dialects", function()
    local tt = export.get("torchtitan")
    local r = assert(nd.estimate{model = "llama3.1-8b", device = "h100", devices = 16, global_batch = 64,
                                 seq_len = 4096, tp = 2, sp = true, pp = 2, zero = 3, recompute = "full"})
    local plan = {model = "llama3.1-8b", strategy = r.strategy, job = r.job, result = r}
    for _, d in ipairs(tt.DIALECTS) do
      local text = assert(tt.render(plan, {dialect = d}))
      local st, job = assert(tt.parse(text, {layers = 32}))
      assert.same({4, 2, 2, 3, r.strategy.mbs, r.strategy.mb}, {st.dp, st.tp, st.pp, st.zero, st.mbs, st.mb}, d)
      assert.same({global_batch = 64, seq_len = 4096}, job, d)
    end
  end)
end)

describe("ndplan.export.flags", function()
  it("tokenises quotes, continuations, comments, arrays and variables", function()
    local text = table.concat({
      "#!/bin/bash",
      "A=4   # --not-a-flag 1",
      "export B=${B:-x y}",
      "ARR=(",
      "  --one $A --two \"$B\" # comment",
      "  --three 'q \"u\" $A'",
      ")",
      "cmd --four=\"${A}0\" \\",
      "    ${ARR[@]} --five 'six seven' 2>&1 | tee log; --seven",
    }, "\n")
    local p = assert(flags.parse(text, "t.sh"))
    local seen = {}
    for _, o in ipairs(p.options) do seen[#seen + 1] = o.flag .. "=" .. table.concat(o.values, "|") end
    assert.same({"--one=4", "--two=x y", "--three=q \"u\" $A", "--four=40", "--one=4",
                 "--two=x y", "--three=q \"u\" $A", "--five=six seven", "--seven="}, seen)
    assert.equal(5, p.last["--two"].line)  -- expanded from the array: the line it was written on
    assert.equal("4", p.vars.A)
  end)

  it("marks values it cannot resolve", function()
    local p = assert(flags.parse("X=( --tp $TP --pp $((2*Y)) --cp `echo 1` --ep $(nproc) )\n", "u.sh"))
    assert.equal("$TP", p.last["--tp"].missing)
    assert.equal("$((2*Y))", p.last["--pp"].missing)
    assert.equal("`echo 1`", p.last["--cp"].missing)
    assert.equal("$(nproc)", p.last["--ep"].missing)
  end)

  it("does integer arithmetic over resolved variables", function()
    local p = assert(flags.parse("G=8\nN=${N:-2}\nW=$(($G * N))\ncmd --world $W --half $(( (W - 2) / 2 % 5 ))\n", "w.sh"))
    assert.equal("16", p.last["--world"].values[1])
    assert.equal("2", p.last["--half"].values[1])
  end)

  it("skips here-documents and here-strings", function()
    local p = assert(flags.parse("cat <<'EOF' > cfg.txt\n--tp 99\nEOF\nread x <<< \"--pp 3\"\n"
                                 .. "run --cp 2 \\\n  --ep $((1+1))\n", "h.sh"))
    assert.is_nil(p.last["--tp"])
    assert.equal("2", p.last["--cp"].values[1])
    assert.equal(6, p.last["--ep"].line)
  end)

  it("reports an unterminated quote with line and column", function()
    local p, err = flags.parse("A=1\nB='open\n", "v.sh")
    assert.is_nil(p)
    assert.equal("v.sh:2:3: cannot read the shell script: an unterminated single quote", err)
  end)
end)

describe("ndplan.megatron_script", function()
  it("reads a launch script: shape, strategy, job and devices", function()
    local info = assert(script.load("spec/fixtures/megatron_llama_pretrain.sh"))
    assert.equal(32, info.shape.num_layers)
    assert.equal(8, info.shape.num_query_groups)
    assert.equal(128256, info.shape.vocab_size)
    local st = info.strategy
    assert.same({2, 2, true, 1, 2}, {st.tp, st.pp, st.sp, st.zero, st.mbs})
    assert.same({devices = 16, global_batch = 256, seq_len = 8192}, info.job)
    -- block recompute: the first 4 layers of each 16-layer stage
    assert.equal("0-3:full,4-15:none,16-19:full,20-31:none", export.describe_modes(st.layer_recompute))
    local m = assert(nd.model(assert(script.model_config(info))))
    assert.equal(32, m.num_layers)
  end)

  it("expands Megatron's layout strings", function()
    local lay = assert(script.layout({pp = 16, pipeline_model_parallel_layout = "Et*3|(tt|)*29,m|L"},
                                     61, 1))
    assert.equal(2, lay.vpp)
    assert.equal(32, #lay.stage_layers)
    assert.equal(3, lay.stage_layers[1])
    assert.equal(2, lay.stage_layers[30])
    assert.equal(1, lay.stage_layers[31])  -- the MTP layer: the last chunk of stage 14
    assert.equal(0, lay.stage_layers[32])  -- the loss alone
  end)

  it("names the file, line and flag of a value it cannot resolve", function()
    local info, err = script.read("TP=8\nARGS=(\n  --tensor-model-parallel-size $TP\n"
                                  .. "  --pipeline-model-parallel-size $PP\n)\n", "run.sh")
    assert.is_nil(info)
    assert.matches("^run%.sh:4: %-%-pipeline%-model%-parallel%-size: cannot resolve %$PP", err)
  end)
end)

describe("per-layer offload in the exporters", function()
  it("notes what each trainer rounds instead of calling the file exact", function()
    local nd = require "ndplan"
    local export = require "ndplan.export"
    local r = assert(nd.estimate{model = "llama3.1-70b", device = "h100", devices = 64,
                                 global_batch = 512, seq_len = 8192, tp = 8, pp = 8, sp = true,
                                 recompute = "per_layer", max_mem = "40GiB",
                                 recompute_modes = {"none", "selective", "full", "offload"}})
    assert.is_truthy(r.strategy.layer_offload)
    local plan = {model = "llama3.1-70b", strategy = r.strategy, job = r.job, result = r,
                  layer_recompute = r.strategy.layer_recompute}
    for _, name in ipairs({"megatron", "hyper"}) do
      local _, notes = export.export(name, plan)
      local said = false
      for _, n in ipairs(notes) do said = said or n.field == "offload" end
      assert.is_true(said, name)
    end
  end)
end)

describe("selective switch sets in the exporters", function()
  local base = {model = "deepseek-v3", device = "h100", devices = 1024, global_batch = 4096,
                seq_len = 4096, pp = 16, ep = 64,
                stage_layers = {3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 3}}
  local function with(extra)
    local a = {}
    for k, v in pairs(base) do a[k] = v end
    for k, v in pairs(extra) do a[k] = v end
    return a
  end

  it("writes Megatron's --recompute-modules and reads them back as switches", function()
    local p = plan_of(with{recompute = "selective", selective_ops = {"norms", "act", "mla_up"}})
    local text, notes = assert(export.export("megatron", p))
    -- DeepSeek-V3 has dense and MoE layers: moe_act for the experts, mlp for the dense MLP
    assert.matches("%-%-recompute%-modules%s+layernorm%s+moe_act%s+mlp%s+mla_up_proj", text)
    local back = assert(export.get("megatron").parse(text))
    assert.same({"act", "mla_up", "norms"}, back.selective_ops)
    assert.same({"selective_ops"}, kinds(notes, "unsaid") and (function()
      local f = {}
      for _, n in ipairs(notes) do if n.kind == "unsaid" and n.field == "selective_ops" then f[#f + 1] = n.field end end
      return f
    end)())
    -- the default set writes no flag
    local plain = assert(export.export("megatron", plan_of(with{recompute = "selective"})))
    assert.is_nil(plain:find("recompute-modules", 1, true))
  end)

  it("rounds per-layer switch sets up to their union, and says so", function()
    local n = 62
    local per, ops = {}, {}
    for i = 1, n do
      per[i] = "selective"
      ops[i] = i % 2 == 0 and {"norms"} or {"mla_up"}
    end
    local p = plan_of(with{layer_recompute = per, layer_selective_ops = ops})
    p.layer_recompute = per
    for _, name in ipairs({"megatron", "torchtitan", "deepspeed", "mindformers"}) do  -- (hyper: EP refused)
      local _, notes, rounded = assert(export.export(name, p))
      local said
      for _, note in ipairs(notes) do
        if note.kind == "rounded" and note.field == "selective_ops" then said = note end
      end
      if rounded and rounded.recompute == "selective" or rounded and rounded.layer_recompute then
        -- wherever the file still recomputes selectively, it takes the union
        if said then assert.equal("mla_up+norms", said.file, name) end
      end
      if rounded then assert.is_nil(rounded.layer_selective_ops, name) end
    end
  end)

  it("writes and reads per-op selective AC (selective_ac_option = \"op\")", function()
    local tt = export.get("torchtitan")
    local base = {model = "llama3.1-8b", device = "h100", devices = 16, global_batch = 64,
                  seq_len = 4096, tp = 2, sp = true, zero = 3, recompute = "selective"}
    local op = {}
    for k, v in pairs(base) do op[k] = v end
    op.selective_ops = tt.OP_SAC
    for _, d in ipairs(tt.DIALECTS) do
      local text, notes = assert(tt.render(plan_of(op), {dialect = d}))
      assert.same({}, kinds(notes, "rounded"), d)  -- the plan is torchtitan's own SAC
      if d == "v0.2.2" then
        assert.matches("%-%-activation_checkpoint%.selective_ac_option\n?%s*'?op'?", text)
      else
        assert.matches("activation%-checkpoint:selective", text)
      end
      local st = assert(tt.parse(text, {layers = 32}))
      assert.equal("selective", st.recompute, d)
      assert.same(tt.OP_SAC, st.selective_ops, d)
      -- read back, it prices as the plan did
      local args = {}
      for k, v in pairs(base) do args[k] = v end
      args.selective_ops = st.selective_ops
      assert.equal(plan_of(op).result.step_time_s, assert(nd.estimate(args)).step_time_s)
    end
    -- the attention core alone rounds to it, with the reason
    local _, notes, rounded = tt.render(plan_of(base), {dialect = "v0.2.2"})
    assert.same(tt.OP_SAC, rounded.selective_ops)
    local why
    for _, n in ipairs(notes) do if n.field == "selective_ops" then why = n.why end end
    assert.matches("per%-op", why)
  end)
end)
