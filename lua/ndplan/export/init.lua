-- Trainer config exporters: one module per trainer (ndplan.export.<name>), each with a
-- `dialect` label, a default `filename`, `render(plan) -> text, notes, rounded` and
-- `parse(text [, opts]) -> strategy, job`. This module is the registry plus what they share:
-- the plan in one canonical shape (context), the per-layer recompute helpers, and the
-- comparison that turns "what the plan said" vs "what the file says" into notes.
--
-- A plan: {model = name|table|model, strategy = <`ndplan estimate --json`'s strategy>,
--          job = {devices, global_batch, seq_len}, layers = body layers (optional),
--          stage_layers = body+MTP layers per stage (optional: else result.stages, else
--          the engine's even layout), layer_recompute = {mode per layer} (when the strategy
--          says per_layer), result = the estimate (optional), budget_bytes = the memory
--          budget the plan was chosen for (optional: an exporter that must round the plan
--          may then choose what the trainer can say for that budget instead), layout =
--          "balanced" when the layout was free (optional), device, costs and stack (optional:
--          to price, when no opts.price is given; else the result's device)}.
-- A note: {kind = "rounded" | "unsaid", field, plan, file, why}. "rounded": the file states
-- something else than the plan, and `rounded` (estimate arguments) re-prices what the
-- file says. "unsaid": the file cannot carry it; the trainer takes it from elsewhere.
local M = {}

M.NAMES = {"megatron", "torchtitan", "deepspeed", "mindformers", "hyper"}

-- get(name) -> module | nil, message
function M.get(name)
  for _, n in ipairs(M.NAMES) do
    if n == name then return (require("ndplan.export." .. n)) end
  end
  return nil, string.format("unknown export format '%s' (formats: %s)", tostring(name),
                            table.concat(M.NAMES, ", "))
end

function M.list()
  local out = {}
  for i, n in ipairs(M.NAMES) do out[i] = n end
  return out
end

-- export(name, plan [, opts]) -> text, notes, rounded [, info] | nil, message. opts.price
-- (estimate args) -> result | nil, why prices what the file says (see pricer); info is
-- what an exporter tells beyond the notes (megatron: its recompute choice).
function M.export(name, plan, opts)
  local mod, err = M.get(name)
  if not mod then return nil, err end
  return mod.render(plan, opts)
end

---------------------------------------------------------------------------------------------
-- The canonical plan
---------------------------------------------------------------------------------------------
local MODE_RANK = {none = 0, selective = 1, full = 2}
M.MODE_RANK = MODE_RANK

-- The engine's even layout of body and MTP layers over pp stages (the core's rule,
-- ndplan.c.estimate.layout: the remainder to stages 1.., MTP layers on the last stage).
function M.even_layout(body, mtp, pp)
  return assert(require("ndplan.c.estimate").layout({pp = pp}, body, mtp)).stages
end

local DEFAULTS = {dp = 1, tp = 1, pp = 1, vpp = 1, cp = 1, ep = 1, etp = 1, sp = false,
                  zero = 0, mbs = 1, schedule = "1f1b", precision = "bf16",
                  flash_attention = true, recompute = "none", fp8_param_gather = false}

local copy = require("ndplan.strategy").copy  -- a deep copy
M.copy = copy

-- context(plan) -> ctx | nil, message. ctx.strategy has every field, with layer_recompute
-- (one mode per body+MTP layer) and stage_layers (body+MTP per stage, vpp = 1 as well as
-- the per-stage totals when vpp > 1); ctx.layers, ctx.mtp, ctx.model (or nil), ctx.job.
function M.context(plan)
  if type(plan) ~= "table" or type(plan.strategy) ~= "table" then
    return nil, "export: the plan needs a strategy table"
  end
  local model
  if plan.model ~= nil then
    local m, err = require("ndplan").model(plan.model)
    if not m then return nil, err end
    model = m
  end
  local layers = plan.layers or (model and model.num_layers)
  local mtp = plan.mtp_layers or (model and model.mtp_layers) or 0
  if math.type(layers) ~= "integer" then return nil, "export: the plan needs the model or its layer count" end
  local st = {}
  for k, v in pairs(DEFAULTS) do st[k] = v end
  for k, v in pairs(plan.strategy) do st[k] = copy(v) end
  local job = copy(plan.job or (plan.result and plan.result.job) or {})
  if st.mb == nil and job.global_batch then st.mb = job.global_batch // (st.dp * st.mbs) end
  -- offload: the share of each waiting micro-batch's activations kept in host memory
  st.offload = st.offload == true and 1 or tonumber(st.offload) or 0
  -- one mode per layer, whatever form the plan gave
  local per = plan.layer_recompute or st.layer_recompute
  local total = layers + mtp
  if st.recompute == "per_layer" or per then
    if type(per) ~= "table" or #per ~= total then
      return nil, string.format("export: a per-layer recompute plan needs layer_recompute for "
                                .. "all %d layers", total)
    end
  else
    per = {}
    for i = 1, total do per[i] = st.recompute == "off" and "none" or st.recompute end
  end
  st.layer_recompute = per
  st.recompute = M.uniform_mode(per) or "per_layer"
  -- the precision recipe by its table name, with the BF16 layers it keeps (the core's rule)
  local ok, name, first, last = pcall(require("ndplan.c.estimate").recipe, st.precision,
                                      layers, st.bf16_first_layers, st.bf16_last_layers)
  if not ok then return nil, "export: " .. tostring(name) end
  st.precision, st.bf16_first_layers, st.bf16_last_layers = name, first, last
  -- per-layer offload (layer_offload): trainers say offload as whole layers or a share, so
  -- it is carried as the share of layers offloaded, and each exporter rounds that
  if type(st.layer_offload) == "table" then
    local n = 0
    for _, x in ipairs(st.layer_offload) do if x then n = n + 1 end end
    if n > 0 and st.offload == 0 then st.offload = n / total end
    st.layer_offload = nil
  end
  -- the stage layout
  local stages = plan.stage_layers or st.stage_layers
  if not stages and plan.result and plan.result.stages then
    stages = {}
    for i, s in ipairs(plan.result.stages) do stages[i] = s.layers end
  end
  stages = copy(stages) or M.even_layout(layers, mtp, st.pp)
  st.vpp = st.vpp or 1
  if st.vpp > 1 and #stages == st.pp * st.vpp then  -- chunk sizes in layer order
    st.chunk_layers = stages
    stages = {}
    for k, n in ipairs(st.chunk_layers) do
      local s = (k - 1) % st.pp + 1
      stages[s] = (stages[s] or 0) + n
    end
  end
  st.stage_layers = stages
  if st.vpp > 1 and not st.chunk_layers then
    -- the chunks in layer order (chunk c of stage s is chunk c x pp + s): the result's, else
    -- the layout the core resolves for the plan's pp and vpp (ndplan.c.estimate.layout)
    local rs = plan.result and plan.result.stages
    if rs and #rs == st.pp and rs[1].chunks and #rs[1].chunks == st.vpp then
      st.chunk_layers = {}
      for s, stage in ipairs(rs) do
        for c, chunk in ipairs(stage.chunks) do st.chunk_layers[(c - 1) * st.pp + s] = chunk.layers end
      end
    else
      local ok, lay = pcall(require("ndplan.c.estimate").layout, {pp = st.pp, vpp = st.vpp}, layers, mtp)
      if ok and lay and #lay.stage_layers == st.pp * st.vpp then st.chunk_layers = lay.stage_layers end
    end
  end
  if #st.stage_layers ~= st.pp then
    return nil, string.format("export: %d stage sizes for pp %d", #st.stage_layers, st.pp)
  end
  return {strategy = st, layers = layers, mtp = mtp, model = model, job = job, plan = plan}
end

-- uniform_mode(per) -> the mode every layer shares, or nil
function M.uniform_mode(per)
  local m = per[1]
  for i = 2, #per do if per[i] ~= m then return nil end end
  return m
end

-- groups(ctx, st) -> {{first, count}} (0-based first): the runs of layers a trainer's
-- "first N layers" counts over: pipeline stages for vpp = 1, model chunks in model order
-- otherwise (MTP layers join the final run, on the last stage).
function M.groups(ctx, st)
  st = st or ctx.strategy
  local out, first = {}, 0
  if st.vpp <= 1 then
    for _, n in ipairs(st.stage_layers) do
      out[#out + 1] = {first = first, count = n}
      first = first + n
    end
  elseif st.chunk_layers or #(st.stage_layers or {}) == st.pp * st.vpp then
    -- chunk sizes in layer order (body+MTP), as nd.estimate's result gives them
    for _, n in ipairs(st.chunk_layers or st.stage_layers) do
      out[#out + 1] = {first = first, count = n}
      first = first + n
    end
  else  -- the engine's even chunks: the remainder one each to chunks 1, 2, ...; MTP last
    for _, n in ipairs(M.even_layout(ctx.layers, ctx.mtp, st.pp * st.vpp)) do
      out[#out + 1] = {first = first, count = n}
      first = first + n
    end
  end
  return out
end

-- prefix_counts(ctx, st) -> full, touched: per group, how many leading layers a "first N"
-- rule must cover so that no layer recomputes less than planned (N = 1 + the last local
-- index with mode full; with any recompute).
function M.prefix_counts(ctx, st)
  st = st or ctx.strategy
  local full, touched = {}, {}
  for g, run in ipairs(M.groups(ctx, st)) do
    full[g], touched[g] = 0, 0
    for i = 0, run.count - 1 do
      local m = st.layer_recompute[run.first + i + 1]
      if m == "full" then full[g] = i + 1 end
      if m ~= "none" then touched[g] = i + 1 end
    end
  end
  return full, touched
end

-- from_prefixes(ctx, st, full, selective) -> per-layer modes: in group g the first full[g]
-- layers full, the layers up to selective[g] selective, the rest none.
function M.from_prefixes(ctx, st, full, selective)
  local per = {}
  for g, run in ipairs(M.groups(ctx, st)) do
    for i = 0, run.count - 1 do
      per[run.first + i + 1] = i < (full[g] or 0) and "full"
        or i < (selective and selective[g] or 0) and "selective" or "none"
    end
  end
  return per
end

-- describe_modes(per) -> "full" or "0-3:full,4-61:none" (the --recompute grammar)
function M.describe_modes(per)
  local u = M.uniform_mode(per)
  if u then return u end
  local parts, i = {}, 1
  while i <= #per do
    local j = i
    while j < #per and per[j + 1] == per[i] do j = j + 1 end
    parts[#parts + 1] = (i == j and tostring(i - 1) or (i - 1) .. "-" .. (j - 1)) .. ":" .. per[i]
    i = j + 1
  end
  return table.concat(parts, ",")
end

-- pricer(plan [, opts]) -> price(args) -> result | nil, why; or nil when the plan says
-- no device: opts.price, else nd.estimate on plan.device (or the result's device) with
-- plan.costs, plan.stack and the plan's budget.
function M.pricer(plan, opts)
  if opts and opts.price then return opts.price end
  local device = plan.device or (plan.result and plan.result.device)
  if device == nil then return nil end
  return function(args)
    args.device = device
    if args.costs == nil then args.costs = plan.costs end
    if args.max_mem == nil then args.max_mem = plan.budget_bytes end
    if args.stack == nil then args.stack = plan.stack end
    return require("ndplan").estimate(args)
  end
end

---------------------------------------------------------------------------------------------
-- Comparing the plan with what a file says
---------------------------------------------------------------------------------------------
local FIELDS = {"dp", "tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero", "mbs", "mb",
                "schedule", "precision", "fp8_param_gather", "bf16_first_layers",
                "bf16_last_layers", "flash_attention", "offload", "recompute",
                "selective_ops", "stage_layers"}
M.FIELDS = FIELDS

M.RECIPE_FIELDS = {fp8_param_gather = true, bf16_first_layers = true, bf16_last_layers = true}

-- quantized(precision) -> true for a recipe whose linear layers run in FP8 or FP4
function M.quantized(precision)
  return precision ~= "bf16" and precision ~= "fp16"
end

local function show(field, v)
  if field == "recompute" then return M.describe_modes(v) end
  if type(v) == "table" then
    local t = {}
    for i, x in ipairs(v) do t[i] = tostring(x) end
    return table.concat(t, ",")
  end
  return tostring(v)
end

-- Values that cannot differ in effect are made equal: sp without tp, ZeRO without DP.
local function effective(st, field)
  if field == "recompute" then return st.layer_recompute end
  if field == "selective_ops" then  -- the switch sets of the selective layers, if any
    local sets, order = {}, {}
    for i, m in ipairs(st.layer_recompute) do
      if m == "selective" then
        local own = st.layer_selective_ops and st.layer_selective_ops[i]
        local key = table.concat(own or st.selective_ops or {"attn_core"}, "+")
        if not sets[key] then sets[key] = 0; order[#order + 1] = key end
        sets[key] = sets[key] + 1
      end
    end
    if #order == 0 then return "-" end
    if #order == 1 then return order[1] end
    for i, k in ipairs(order) do order[i] = string.format("%s x%d", k, sets[k]) end
    return "per layer: " .. table.concat(order, ", ")
  end
  if field == "sp" then return st.sp and st.tp > 1 end
  if M.RECIPE_FIELDS[field] then  -- only a quantized recipe has them
    if M.quantized(st.precision) then return st[field] end
    return "-"
  end
  if field == "zero" then return st.dp > 1 and st.zero or 0 end
  if field == "schedule" then return st.pp > 1 and st.schedule or "-" end
  if field == "stage_layers" then return st.vpp <= 1 and st.stage_layers or st.chunk_layers or {} end
  return st[field]
end

-- compare(ctx, said, why) -> notes: one "rounded" note per field where `said` (the
-- strategy the file states) differs from the plan; why[field] explains.
function M.compare(ctx, said, why)
  local notes = {}
  for _, f in ipairs(FIELDS) do
    local a, b = show(f, effective(ctx.strategy, f)), show(f, effective(said, f))
    -- switch sets matter only where the file recomputes selectively (recompute says the rest),
    -- a recipe's options only where the file states a quantized recipe (precision says it)
    if a ~= b and not (f == "selective_ops" and b == "-") and not (M.RECIPE_FIELDS[f] and b == "-") then
      notes[#notes + 1] = {kind = "rounded", field = f, plan = a, file = b, why = why and why[f]}
    end
  end
  return notes
end

-- no_offload(said, why, reason): the file cannot keep activations on the host
function M.no_offload(said, why, reason)
  if said.offload > 0 then
    said.offload = 0
    why.offload = reason
  end
end

-- finish(ctx, said, why, unsaid) -> notes, rounded: the notes, and the estimate arguments
-- of what the file says when it differs from the plan (nil when nothing was rounded).
-- fold_selective(said, why): no trainer states switch sets per layer; said.selective_ops
-- becomes the union of the sets its selective layers use (at least as much recompute).
function M.fold_selective(said, why)
  if said.layer_selective_ops then
    local union, seen = {}, {}
    for i, m in ipairs(said.layer_recompute) do
      for _, op in ipairs(m == "selective" and said.layer_selective_ops[i] or {}) do
        if not seen[op] then seen[op] = true; union[#union + 1] = op end
      end
    end
    table.sort(union)
    if #union > 0 then said.selective_ops = union end
    said.layer_selective_ops = nil
    why.selective_ops = why.selective_ops or "trainers take one set of selective switches for "
      .. "the whole model; the union of the plan's per-layer sets"
  end
end

function M.finish(ctx, said, why, unsaid)
  M.fold_selective(said, why)
  local notes = M.compare(ctx, said, why)
  local rounded = #notes > 0 and M.estimate_args(ctx, said) or nil
  for _, u in ipairs(unsaid or {}) do
    u.kind = "unsaid"
    notes[#notes + 1] = u
  end
  return notes, rounded
end

-- estimate_args(ctx, st) -> the strategy as nd.estimate arguments (with model and job)
function M.estimate_args(ctx, st)
  local args = {model = ctx.model, devices = ctx.job.devices, global_batch = ctx.job.global_batch,
                seq_len = ctx.job.seq_len}
  for _, k in ipairs({"dp", "tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero", "mbs", "mb",
                      "schedule", "precision", "flash_attention", "offload",
                      "selective_ops", "layer_selective_ops", "fp8_param_gather",
                      "bf16_first_layers", "bf16_last_layers"}) do
    args[k] = copy(st[k])
  end
  if not M.quantized(st.precision) then  -- a file rounded to BF16 drops the recipe's options
    args.fp8_param_gather, args.bf16_first_layers, args.bf16_last_layers = nil, nil, nil
  end
  local u = M.uniform_mode(st.layer_recompute)
  if u then args.recompute = u else args.layer_recompute = copy(st.layer_recompute) end
  if st.vpp <= 1 then args.stage_layers = copy(st.stage_layers)
  elseif st.chunk_layers then args.stage_layers = copy(st.chunk_layers) end
  return args
end

-- format_note(note) -> one line for people
function M.format_note(n)
  if n.kind == "unsaid" then
    return string.format("not in the file: %s %s%s", n.field, n.plan or "",
                         n.why and (" (" .. n.why .. ")") or "")
  end
  return string.format("rounded %s: plan %s, file %s%s", n.field, n.plan, n.file,
                       n.why and (" (" .. n.why .. ")") or "")
end

---------------------------------------------------------------------------------------------
-- Small writers shared by the YAML exporters (ndplan has a YAML reader, not a writer)
---------------------------------------------------------------------------------------------
local function yaml_scalar(v)
  if type(v) == "string" then
    if v:match("^[%a_][%w_%-%.]*$") and not ({["true"] = 1, ["false"] = 1, null = 1,
        yes = 1, no = 1, on = 1, off = 1, y = 1, n = 1})[v:lower()] then
      return v
    end
    -- YAML's double-quoted style: \\ and \" escaped, control characters as \xNN (a raw
    -- newline would be folded into a space, YAML 1.2 section 7.3.1)
    return '"' .. v:gsub('[\\"%c]', function(c)
      if c == "\\" or c == '"' then return "\\" .. c end
      return ("\\x%02x"):format(c:byte())
    end) .. '"'
  end
  if type(v) == "table" then  -- a list, written in flow style
    local parts = {}
    for i, x in ipairs(v) do parts[i] = yaml_scalar(x) end
    return "[" .. table.concat(parts, ", ") .. "]"
  end
  return tostring(v)
end

-- yaml(doc) -> text. doc is an ordered list of {key, value} or {key, {sub entries...},
-- map = true}; `comment` entries {comment = "..."} become # lines.
function M.yaml(entries, indent)
  indent = indent or ""
  local out = {}
  for _, e in ipairs(entries) do
    if e.comment then out[#out + 1] = indent .. "# " .. require("ndplan.export.flags").comment(e.comment)
    elseif e.map then
      out[#out + 1] = indent .. yaml_scalar(e[1]) .. ":"
      out[#out + 1] = M.yaml(e[2], indent .. "  ")
    else
      out[#out + 1] = indent .. yaml_scalar(e[1]) .. ": " .. yaml_scalar(e[2])
    end
  end
  return table.concat(out, "\n")
end

-- write(dir, formats, plan, price) -> outputs | nil, message. Renders every format and
-- prices each rounded plan again with price(rounded strategy args) -> result | nil, why
-- (the exporters price with it too, see pricer), then writes atomically into dir only the
-- files a trainer runs as planned: a file is refused, and not written, when its exporter
-- refuses the plan (render returns nil, reason, "refused"), when the rounded plan is
-- refused by the estimate, or when it no longer fits the memory budget. Each output:
-- {name, mod, path, notes, rounded, info, repriced, refused = reason | nil}. An exporter
-- that fails otherwise fails the whole call before anything is written.
-- A model whose dense layers have their own widths (Nemotron NAS block_configs): every
-- exporter states one FFN width, so each refuses it rather than write a wrong model.
local function per_layer_widths(plan)
  if plan.model == nil then return nil end
  local m = require("ndplan").model(plan.model)
  if m and m:spec().ffn_sizes then
    return "the model's layers have their own MLP widths (Nemotron NAS block_configs); the"
           .. " file states one width, so it is not written"
  end
end

function M.write(dir, formats, plan, price, dialects)
  local files = require "ndplan.io.files"
  local units = require "ndplan.c.units"
  local outputs = {}
  local widths = per_layer_widths(plan)
  for _, name in ipairs(formats) do
    local mod, err = M.get(name)
    if not mod then return nil, err end
    local text, notes, rounded, info
    if widths then notes, rounded = name .. ": " .. widths, "refused"
    else
      text, notes, rounded, info = mod.render(plan, {price = price,
                                                     dialect = dialects and dialects[name]})
    end
    local o = {name = name, mod = mod, path = dir .. "/" .. mod.filename, dialect = mod.dialect}
    if not text and rounded == "refused" then
      o.refused, o.notes = notes, {}
    elseif not text then
      return nil, name .. ": " .. tostring(notes)
    else
      o.text, o.notes, o.rounded, o.info = text, notes, rounded, info
      if type(info) == "table" and info.dialect then o.dialect = info.dialect end
    end
    outputs[#outputs + 1] = o
  end
  for _, o in ipairs(outputs) do
    if o.rounded then
      local r2, why = price(o.rounded)
      o.repriced = r2
      if not r2 then
        o.refused = "the plan the file states is refused: " .. tostring(why)
      elseif r2.fits == false then
        o.refused = string.format("the plan the file states does not fit: peak %s over the "
                                  .. "%s budget", units.bytes(r2.peak_memory_bytes, "binary"),
                                  units.bytes(r2.budget_bytes or 0, "binary"))
      end
    end
  end
  for _, o in ipairs(outputs) do
    if not o.refused then
      local ok, werr = files.write_atomic(o.path, o.text)
      if not ok then return nil, string.format("cannot write %s: %s", o.path, tostring(werr)) end
    end
    o.text = nil
  end
  return outputs
end

-- dialects(formats, list) -> {format = dialect} | nil, message: each name of the comma
-- list (e.g. "v0.2.2,0.16.4") given to the one selected exporter that has that dialect.
function M.dialects(formats, list)
  local out = {}
  for d in tostring(list or ""):gmatch("[^,%s]+") do
    local owner
    for _, name in ipairs(formats) do
      for _, x in ipairs(M.get(name).DIALECTS or {}) do if x == d then owner = name end end
    end
    if not owner then
      local known = {}
      for _, name in ipairs(formats) do
        known[#known + 1] = name .. ": " .. table.concat(M.get(name).DIALECTS or {}, ", ")
      end
      return nil, string.format("--dialect: no selected format has dialect '%s' (%s)", d,
                                table.concat(known, "; "))
    end
    out[owner] = d
  end
  return out
end

-- refused(name, reason) -> nil, message, "refused": what an exporter returns for a plan
-- its trainer cannot run or state (ndplan export exits with cli.EXIT_REFUSED).
function M.refuse(name, reason)
  return nil, name .. ": " .. reason, "refused"
end

return M
