-- Plain-text summaries of results, as the commands print them: ndplan estimate's (memory
-- per stage, time parts, the per-layer plan, the topology) and ndplan search's ranked table.
-- The REPL prints results with them too.
local text = require "ndplan.out.text"
local units = require "ndplan.c.units"

local M = {}

local function gib(b) return units.bytes(b, "binary") end

-- estimate(r [, model]) -> the text of `ndplan estimate` for an nd.estimate result (no final
-- newline); model (for the per-layer plan's layer kinds) defaults to nd.model(r.model).
function M.estimate(r, model)
  if model == nil and (r.strategy.recompute == "per_layer" or r.layout_moves) then
    model = require("ndplan").model(r.model)
  end
  local s = r.strategy
  local out = {}
  local function say(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  say("%s on %d x %s, global batch %d x %d tokens", r.model, r.job.devices, r.device,
      r.job.global_batch, r.job.seq_len)
  say("strategy  dp %d  tp %d  pp %d  vpp %d  cp %d  ep %d  etp %d  sp %s  zero %d  mbs %d  mb %d",
      s.dp, s.tp, s.pp, s.vpp, s.cp, s.ep, s.etp, s.sp and "on" or "off", s.zero, s.mbs, s.mb)
  local rec = s.recompute
  if r.megatron then  -- the form Megatron states, and its flags
    local bp = require "ndplan.block_plan"
    rec = string.format("megatron: %s (%s)", bp.describe(r.megatron, s.vpp),
                        table.concat(bp.flags(r.megatron), " "))
  end
  say("          schedule %s, recompute %s, %s, flash attention %s", s.schedule, rec,
      s.precision, s.flash_attention and "on" or "off")
  local p = r.precision
  if p.element_bytes > 0 then  -- what the recipe quantizes, and its byte widths
    local w = p.bytes_per_param
    say("          %s: linear GEMMs at %s (%.0f TFLOP/s)%s; per quantized parameter %.4g B "
        .. "stored, %.4g B of quantized copies, all-gathered at %.4g B", p.recipe, p.gemm_precision,
        p.gemm_peak_flops / 1e12,
        (p.bf16_first_layers + p.bf16_last_layers > 0)
          and string.format(", the first %d and last %d body layers in BF16",
                            p.bf16_first_layers, p.bf16_last_layers) or "",
        w.param, w.cache, w.gather)
  end
  if s.pp > 1 and s.pipeline_layout
     and (s.layout_from ~= "even" or (model and model.num_layers % (s.pp * s.vpp) ~= 0)) then
    say("          pipeline layout %s (%s)", s.pipeline_layout, (s.layout_from:gsub("_", "/")))
  end
  say("")
  local band = r.step_time_band  -- the stack profile's residuals in this regime
  local band_text = ""
  if band then
    band_text = string.format(" ± %.0f%% (%s · %s · %s%s)", band.pct, band.stack, band.device,
                              band.regime, band.widened and ": no runs, widened" or
                              string.format(" · %d runs", band.runs))
  end
  say("step time %s%s   %.0f tokens/s   MFU %.1f%%   HFU %.1f%%", units.seconds(r.step_time_s),
      band_text, r.tokens_per_s, 100 * r.mfu, 100 * r.hfu)
  if r.stack and r.stack.note then say("          %s", r.stack.note) end
  local parts = {}
  for _, k in ipairs(require("ndplan.c.estimate").names().time_parts) do
    local v = r.time_parts_s[k]
    if v > 0 then parts[#parts + 1] = {part = k, t = v, share = 100 * v / r.step_time_s} end
  end
  out[#out + 1] = (text.format_table({
    {key = "part", title = "  time part"},
    {key = "t", title = "seconds", align = "right", fmt = function(v) return units.seconds(v) end},
    {key = "share", title = "share", align = "right", fmt = function(v) return string.format("%.1f%%", v) end},
  }, parts):gsub("\n$", ""):gsub("([^\n]+)", "  %1"))
  say("")
  say("memory    peak %s on stage %d of %d, budget %s: %s", gib(r.peak_memory_bytes),
      r.heaviest_stage, #r.stages, gib(r.budget_bytes),
      r.fits and "fits" or ("over by " .. gib(r.over_bytes)))
  out[#out + 1] = (text.format_table({
    {key = "stage", title = "stage", align = "right"},
    {key = "layers", title = "layers", align = "right"},
    {key = "inflight", title = "in flight", align = "right", fmt = function(v) return string.format("%.4g", v) end},
    {key = "weights", title = "weights", align = "right", fmt = gib},
    {key = "grads", title = "grads", align = "right", fmt = gib},
    {key = "optimizer", title = "optimizer", align = "right", fmt = gib},
    {key = "activations", title = "activations", align = "right", fmt = gib},
    {key = "buffers", title = "buffers", align = "right", fmt = gib},
    {key = "fragmentation", title = "slack", align = "right", fmt = gib},
    {key = "reserve", title = "reserve", align = "right", fmt = gib},
    {key = "peak", title = "peak", align = "right", fmt = gib},
    r.stage_savings_s and {key = "saved", title = "saved vs full", align = "right",
                           fmt = function(v) return units.seconds(v) end} or nil,
  }, (function()
    for i, st in ipairs(r.stages) do st.saved = r.stage_savings_s and r.stage_savings_s[i] end
    return r.stages
  end)()):gsub("\n$", ""):gsub("([^\n]+)", "  %1"))
  if model and (s.recompute == "per_layer" or r.layout_moves) then
    say("")
    local plan = require("ndplan.plan").from_estimate(r, model)
    if r.layout_moves then
      say("layout    %s (%d layers moved from the even split)", table.concat(s.stage_layers, ","),
          r.layout_moves)
    end
    for _, rg in ipairs(plan.ranges) do
      local last = rg.first + rg.count - 1
      say("layers %s (%s): %s", rg.count > 1 and (rg.first .. "-" .. last) or tostring(rg.first),
          rg.kind, rg.mode)
    end
  end
  say("")
  local topo = {}
  for _, k in ipairs({"tp", "cp", "dp", "pp", "ep", "etp", "edp"}) do
    local g = r.topology[k]
    if g.size > 1 then topo[#topo + 1] = string.format("%s %d over %s", k, g.size, g.link) end
  end
  say("topology  ranks TP innermost, then CP, DP, PP: %s",
      #topo > 0 and table.concat(topo, ", ") or "one device")
  return table.concat(out, "\n")
end

-- The dimensions worth a column: those that vary among the rows, and dp and mb (derived).
local function varying(ranked)
  local dims = {}
  for _, d in ipairs({"dp", "tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero", "mb", "mbs"}) do
    local first, differs = ranked[1].strategy[d], d == "dp" or d == "mb"
    for _, r in ipairs(ranked) do differs = differs or r.strategy[d] ~= first end
    if differs then dims[#dims + 1] = d end
  end
  return dims
end

-- search_table(ranked [, info]) -> the ranked table of `ndplan search` (no final newline):
-- info.dims chooses the columns (default: those that vary), info.objective_label and
-- info.objective_format the policy's column.
function M.search_table(ranked, info)
  info = info or {}
  local cols = {{key = "rank", title = "rank", align = "right"}}
  for _, d in ipairs(info.dims or varying(ranked)) do
    if d ~= "recompute" then
      cols[#cols + 1] = {key = d, title = d, align = "right", fmt = function(_, r)
        local v = r.strategy[d]
        if type(v) == "boolean" then return v and "on" or "off" end
        return tostring(v)
      end}
    end
  end
  cols[#cols + 1] = {key = "recompute", title = "recompute", fmt = function(_, r) return r.strategy.recompute end}
  local uneven = false  -- a layout column when a shown row is not the even split
  for _, r in ipairs(ranked) do uneven = uneven or (r.strategy.layout or "even") ~= "even" end
  if uneven then
    cols[#cols + 1] = {key = "layout", title = "layout", fmt = function(_, r) return r.strategy.layout or "even" end}
  end
  cols[#cols + 1] = {key = "step_time_s", title = "step time", align = "right", fmt = function(v) return units.seconds(v) end}
  cols[#cols + 1] = {key = "tokens_per_s", title = "tokens/s", align = "right", fmt = function(v) return string.format("%.0f", v) end}
  cols[#cols + 1] = {key = "mfu", title = "MFU", align = "right", fmt = function(v) return string.format("%.1f%%", 100 * v) end}
  cols[#cols + 1] = {key = "peak_memory_bytes", title = "peak", align = "right", fmt = gib}
  local budget = info.device_budget_bytes or info.budget_bytes
  if budget then  -- what is left of the device budget (the search ranks within its band)
    cols[#cols + 1] = {key = "peak_memory_bytes", title = "headroom", align = "right",
                       fmt = function(v) return gib(budget - v) end}
  end
  cols[#cols + 1] = {key = "heaviest_stage", title = "stage", align = "right"}
  if info.objective_label then
    -- the policy's objective_format, else one number of decimals for the column: four
    -- significant digits on its smallest value
    local fmt = info.objective_format
    if not fmt then
      local least = math.huge
      for _, r in ipairs(ranked) do
        if type(r.objective) == "number" and r.objective ~= 0 then least = math.min(least, math.abs(r.objective)) end
      end
      local digits = least < math.huge and 3 - math.floor(math.log(least, 10)) or 0
      fmt = "%." .. math.max(0, math.min(9, digits)) .. "f"
    end
    cols[#cols + 1] = {key = "objective", title = info.objective_label, align = "right",
                       fmt = function(v) return string.format(fmt, v) end}
  end
  return (text.format_table(cols, ranked):gsub("\n$", ""))
end

-- search_text(ranked, info, ctx) -> what `ndplan search` prints without --json (no final
-- newline): the job line, the configuration's Parallelism line, the bounds, the ranked table,
-- the counts, the assumptions, the model's warnings, the export lines and, when nothing fits
-- or at verbosity 2, the nearest misses. ctx = {verbosity, config_line, declared, doc (the
-- search.json document when -o wrote one), model, export_lines, fail_msg, args (nd.search's)}
function M.search_text(ranked, info, ctx)
  local search = require "ndplan.search"
  local out = {}
  local function say(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  if ctx.verbosity >= 1 then
    say("%s on %d x %s, global batch %d x %d tokens, budget %s per device%s, policy %s",
        info.model, info.job.devices, info.device, info.job.global_batch, info.job.seq_len,
        gib(info.device_budget_bytes or info.budget_bytes or 0),
        (info.device_budget_bytes and info.budget_bytes ~= info.device_budget_bytes)
          and string.format(", ranked within %s (memory band %.1f%%)", gib(info.budget_bytes),
                            100 * (info.memory_band or 0)) or "",
        tostring(info.policy))
    if ctx.config_line then
      local parts = {}
      for _, d in ipairs(search.DIMS) do
        local v = info.space[d]
        local state
        if v == "auto" then state = ctx.declared[d] and "searched (auto)" or "searched (not declared)"
        elseif type(v) == "table" then
          local s = {}
          for i, x in ipairs(v) do s[i] = tostring(x) end
          state = "searched over [" .. table.concat(s, ", ") .. "]"
        else state = string.format("fixed %s (%s)", tostring(v), ctx.declared[d] or "default") end
        parts[#parts + 1] = d .. "=" .. state
      end
      say("Parallelism: %s", table.concat(parts, "; "))
    end
    say("%s", search.bounds_line(info))
  end
  if ranked then
    out[#out + 1] = M.search_table(ranked, info)
  end
  if ctx.verbosity >= 1 then say("%s", search.counts_line(info)) end
  if ranked and ctx.verbosity >= 1 then  -- what the ranking rests on (issue 14)
    local a = require "ndplan.fit.assumptions"
    for _, l in ipairs(a.lines(ctx.doc and ctx.doc.assumptions or a.report(ranked, info))) do
      say("%s", l)
    end
  end
  for _, w in ipairs(ctx.model:warnings()) do say("model %s: %s", ctx.model.name, w) end
  for _, l in ipairs(ctx.export_lines or {}) do say("%s", l) end
  if not ranked or ctx.verbosity >= 2 then
    if ctx.fail_msg then say("%s", ctx.fail_msg) end
    if #info.misses > 0 then say("nearest misses:") end
    for _, r in ipairs(info.misses) do
      local s = r.strategy
      -- the walked recipe and shard group, when the search walks them
      local extra = (type(ctx.args.precision) == "table" and " " .. s.precision or "")
                    .. ((ctx.args.dp_shard or ctx.args.dp_replicate)
                        and " dp_shard " .. s.dp_shard .. " dp_replicate " .. s.dp_replicate or "")
      say("  dp %d tp %d pp %d vpp %d cp %d ep %d etp %d sp %s zero %d mbs %d mb %d %s%s%s: peak %s, over by %s",
          s.dp, s.tp, s.pp, s.vpp, s.cp, s.ep, s.etp, s.sp and "on" or "off", s.zero, s.mbs, s.mb,
          s.recompute, (s.layout or "even") ~= "even" and " layout " .. s.layout or "", extra,
          gib(r.peak_memory_bytes), gib(r.over_bytes))
    end
  end
  return table.concat(out, "\n")
end

-- recompute_doc(r, first, sequence, trainer) -> the document `ndplan recompute --json`
-- prints (ndplan.recompute/1): the estimate r, its plan first (ndplan.plan), the potentials
-- sequence and the trainer's plan (ndplan.block_plan.trainer_plan) or nil
function M.recompute_doc(r, first, sequence, trainer)
  local R = require "ndplan.recompute"
  local steps_out = {}
  for i, p in ipairs(sequence) do
    steps_out[i] = {step = i - 1, score_s = p.score, memory_mib = p.memory,
                    full_layers = R.full_layers(p),
                    changed_layers = i > 1 and R.changed_layers(sequence[i - 1], p) or nil,
                    layer_recompute = p.layer_recompute}
  end
  return {schema = "ndplan.recompute/1", estimate = r, plan = first, potentials = steps_out,
          trainer_plan = trainer}
end

-- recompute_text(r, first, sequence, trainer) -> what `ndplan recompute` prints (no final
-- newline): the plan's layers, its stages against full recompute, the trainer's plan and
-- the potentials
function M.recompute_text(r, first, sequence, trainer)
  local R = require "ndplan.recompute"
  local out = {}
  local function say(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  say("%s on %d x %s, budget %s: step time %s, peak %s on stage %d", r.model, r.job.devices,
      r.device, units.bytes(r.budget_bytes, "binary"), units.seconds(r.step_time_s),
      units.bytes(r.peak_memory_bytes, "binary"), r.heaviest_stage)
  say("")
  for _, rg in ipairs(first.ranges) do
    local last = rg.first + rg.count - 1
    say("layers %s (%s): %s", rg.count > 1 and (rg.first .. "-" .. last) or tostring(rg.first),
        rg.kind, rg.mode == "selective" and ("selective " .. table.concat(rg.option.switches, "+"))
        or rg.mode)
  end
  say("")
  local rows = {}
  for s, st in ipairs(r.stages) do
    rows[s] = {stage = s - 1, layers = st.layers, peak = st.peak,
               saved = first.stage_savings[s] or 0}
  end
  out[#out + 1] = text.format_table({
    {key = "stage", title = "stage", align = "right"},
    {key = "layers", title = "layers", align = "right"},
    {key = "peak", title = "peak", align = "right", fmt = function(v) return units.bytes(v, "binary") end},
    {key = "saved", title = "saved vs full", align = "right", fmt = function(v) return units.seconds(v) end},
  }, rows):gsub("\n$", "")
  if trainer then
    say("")
    if trainer.fits then
      local list = {}
      for i, f in ipairs(trainer.flags) do list[i] = tostring(f) end
      say("megatron: %s (%s)%s", trainer.description,
          #list > 0 and table.concat(list, " ") or "no recompute flags",
          trainer.schedule and ", schedule 1f1b" or "")
      if trainer.stage_layers and r.strategy.stage_layers
         and table.concat(trainer.stage_layers, ",") ~= table.concat(r.strategy.stage_layers, ",") then
        say("  layers per stage %s (the plan's: %s)", table.concat(trainer.stage_layers, ","),
            table.concat(r.strategy.stage_layers, ","))
      end
      say("  step time %s, peak %s", units.seconds(trainer.step_time_s),
          units.bytes(trainer.peak_memory_bytes, "binary"))
      say("  cost of stating it in Megatron: %s%s per step (%+.1f%%) against the per-layer plan",
          trainer.cost_s < 0 and "-" or "+", units.seconds(math.abs(trainer.cost_s)), trainer.cost_pct)
    else
      say("megatron: %s", trainer.message)
    end
  end
  say("")
  say("potentials: one more layer fully recomputed per step (%d steps)", #sequence - 1)
  local prows = {}
  for i, p in ipairs(sequence) do
    local changed = i > 1 and R.changed_layers(sequence[i - 1], p) or {}
    prows[i] = {step = i - 1, changed = #changed > 0 and table.concat(changed, ",") or "-",
                full = R.full_layers(p), memory = p.memory * 2 ^ 20, score = p.score}
  end
  out[#out + 1] = text.format_table({
    {key = "step", title = "step", align = "right"},
    {key = "changed", title = "changed layer", align = "right"},
    {key = "full", title = "full layers", align = "right"},
    {key = "memory", title = "peak", align = "right", fmt = function(v) return units.bytes(v, "binary") end},
    {key = "score", title = "step time", align = "right", fmt = function(v) return units.seconds(v) end},
  }, prows):gsub("\n$", "")
  return table.concat(out, "\n")
end

-- fit_stats(x) -> "N runs, MAPE m%, bias b%" of a stack fit's summary, or "-"
function M.fit_stats(x)
  return x and string.format("%d runs, MAPE %.1f%%, bias %+.1f%%", x.runs, x.mape or 0,
                             x.bias or 0) or "-"
end

local function pct(v) return v and string.format("%.1f%%", v) or "-" end

-- held_out_line(checks) -> "Held-out MAPE: t a% -> b%, ..." for a calibrated file's header,
-- or nil without held-out tables
function M.held_out_line(checks)
  if #checks == 0 then return nil end
  local parts = {}
  for _, ch in ipairs(checks) do
    parts[#parts + 1] = string.format("%s %s -> %s", ch.name, pct(ch.before.mape), pct(ch.after.mape))
  end
  return "Held-out MAPE: " .. table.concat(parts, ", ") .. "."
end

-- profile_text(r, name, sources, path) -> what `ndplan calibrate --profile NAME` prints (no
-- final newline) for ndplan.fit.stack_fit.run's r, written to path
function M.profile_text(r, name, sources, path)
  local st, out = M.fit_stats, {}
  out[#out + 1] = string.format("fitted stack %s on %s: %s; %d evaluations, %.1f s CPU", name,
                                table.concat(sources, ", "), st(r.fit), r.evals, r.cpu_s)
  if r.held then
    out[#out + 1] = "held out  " .. st(r.held)
    for _, g in ipairs(r.held_groups) do out[#out + 1] = string.format("  %-32s %s", g.group, st(g)) end
  end
  out[#out + 1] = string.format("wrote %s (--stack %s in every command)", path, path)
  return table.concat(out, "\n")
end

-- calibrate_doc(fit, s) -> the document `ndplan calibrate --json` prints (ndplan.calibrate/1)
-- for ndplan.cli.calibrate's fit and settings s
function M.calibrate_doc(fit, s)
  local result, checks, cpu_s, name = fit.result, fit.checks, fit.cpu_s, fit.name
  local device, base_in_file, output, sources = s.device, s.base_in_file, s.output, s.sources
  local function stats(x)
    return {rows = x.n, refused = x.refused, mape_pct = x.mape, max_abs_pct = x.max_abs,
            spearman_min = x.spearman_min}
  end
  local doc = {schema = "ndplan.calibrate/1", device = device.name, base = base_in_file,
               name = name, output = output, sources = sources, rows = result.rows,
               used_rows = result.used_rows, every = result.every, refused = result.refused,
               evaluations = result.evals, iterations = result.iterations,
               stopped = result.reason, cpu_s = cpu_s, fields = {},
               before = stats(result.before), after = stats(result.after), held_out = {}}
  for i, f in ipairs(result.fields) do
    doc.fields[i] = {name = f.name, before = f.before, after = f.after, lower = f.lo,
                     upper = f.hi, at_bound = f.at_bound or false, no_effect = f.no_effect or false,
                     flat = f.flat or false}
  end
  for i, ch in ipairs(checks) do
    doc.held_out[i] = {name = ch.name, before = stats(ch.before), after = stats(ch.after)}
  end
  return doc
end

-- calibrate_text(fit, s) -> what `ndplan calibrate` prints (no final newline)
function M.calibrate_text(fit, s)
  local C = require "ndplan.fit.calibrate"
  local result, checks, cpu_s = fit.result, fit.checks, fit.cpu_s
  local device, output, sources = s.device, s.output, s.sources
  local out = {}
  local function say(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  say("calibrated %s on %s: %d runs%s%s", device.name, table.concat(sources, ", "), result.rows,
      result.every > 1 and string.format(" (every %d-th used: %d, --max-rows)", result.every,
                                         result.used_rows) or "",
      result.refused > 0 and string.format(", %d refused by the estimator and left out", result.refused) or "")
  local rows = {}
  for _, f in ipairs(result.fields) do
    rows[#rows + 1] = {field = f.name, before = C.format_value(f.name, f.before),
                       after = C.format_value(f.name, f.after),
                       bounds = C.format_value(f.name, f.lo) .. ".." .. C.format_value(f.name, f.hi),
                       note = f.no_effect and "no effect on these runs: kept"
                              or f.flat and "no effect near the fit: kept" or f.at_bound and "at a bound" or ""}
  end
  out[#out + 1] = (text.format_table({
    {key = "field", title = "  field"}, {key = "before", title = "before", align = "right"},
    {key = "after", title = "after", align = "right"}, {key = "bounds", title = "bounds"},
    {key = "note", title = "note"},
  }, rows):gsub("\n$", ""):gsub("([^\n]+)", "  %1"))
  local b, a = result.before, result.after
  say("fit set   MAPE %s -> %s   max %s -> %s   Spearman min %s -> %s", pct(b.mape), pct(a.mape),
      pct(b.max_abs), pct(a.max_abs), b.spearman_min and string.format("%.3f", b.spearman_min) or "-",
      a.spearman_min and string.format("%.3f", a.spearman_min) or "-")
  say("optimiser %d estimator evaluations of the fit set, %d iterations, %s; %.1f s CPU",
      result.evals, result.iterations, result.reason, cpu_s)
  for _, ch in ipairs(checks) do
    say("held out  %-22s %4d rows  MAPE %s -> %s   max %s -> %s", ch.name, ch.rows,
        pct(ch.before.mape), pct(ch.after.mape), pct(ch.before.max_abs), pct(ch.after.max_abs))
  end
  say("wrote %s (ndplan validate -A %s)", output, output)
  return table.concat(out, "\n")
end

return M
