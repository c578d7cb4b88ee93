--[[
ndplan.recompute_csv: recompute_potentials.csv, one row per kept step per configuration.
Columns: TOP, step, the degrees (the union of dimension names over all plans, first-seen
order), changed_layer, full_layers, memory_mb, score, recompute_mode, recompute_layers,
layer_recompute, stage_memory_mb, stage_savings, plan_scope.

The text is byte-stable: RFC 4180 quoting (a field holding a comma, a quote or a line break
is quoted, its quotes doubled), "\n" line ends, JSON through ndplan.io.json with keys in a
fixed order, and numbers in the shortest form that reads back to the same double.
]]
local R = require "ndplan.recompute"
local json = require "ndplan.io.json"
local files = require "ndplan.io.files"

local M = {}

-- number_text(x): a CSV cell's number, in the shortest form that reads back exactly
-- (ndplan.io.json's); non-finite numbers as nan, inf, -inf.
function M.number_text(x)
  if x ~= x then return "nan" end
  if x == math.huge then return "inf" elseif x == -math.huge then return "-inf" end
  return json.shortest(x)
end

local SHORTEST = {shortest = true}
-- The trainer's layers, keys ordered by their first layer: {"0-2":"full","5":"off"}
local function layers_json(layers)
  local keys = {}
  for k in pairs(layers) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    local fa, fb = tonumber(a:match("^%d+")), tonumber(b:match("^%d+"))
    if fa ~= fb then return fa < fb end
    return a < b
  end)
  local kv = {}
  for i, k in ipairs(keys) do kv[i] = {k, layers[k]} end
  return json.encode(json.object(kv), SHORTEST)
end

-- One record per range: first, count, kind, mode, recompute ("full", "none" or the list of
-- recomputed ops; "selective" when the ops are not stated), offload_bytes when > 0.
local function ranges_json(plan)
  local ranges = {}
  for i, r in ipairs(plan.ranges) do ranges[i] = r end
  table.sort(ranges, function(a, b) return a.first < b.first end)
  local records = {}
  for i, r in ipairs(ranges) do
    local mode = R.normalise_mode(r.mode)
    local ops = R.recomputed_ops(r.option)
    local recompute
    if mode == "full" then recompute = "full"
    elseif mode == "off" then recompute = "none"
    elseif #ops > 0 then recompute = ops
    else recompute = "selective" end
    local kv = {{"first", r.first}, {"count", r.count}, {"kind", r.kind}, {"mode", mode},
                {"recompute", recompute}}
    local bytes = R.offload_bytes(r)
    if bytes > 0 then kv[#kv + 1] = {"offload_bytes", bytes} end
    records[i] = json.object(kv)
  end
  return json.encode(records, SHORTEST)
end

-- RFC 4180: quote a field holding a comma, a quote or a line break; double its quotes.
function M.csv_field(text)
  if text:find('[,"\r\n]') then return '"' .. text:gsub('"', '""') .. '"' end
  return text
end

local function cell(v)
  if v == nil then return "" end
  if type(v) == "number" then return M.number_text(v) end
  return tostring(v)
end

-- Make the folder holding `path` (and its parents) when it is missing.
function M.ensure_parent(path)
  local parent = path:match("^(.*)/[^/]*$")
  if parent == nil or parent == "" then return true end
  local ok, err = require("ndplan.io.files").mkdir_p(parent)
  if not ok then error(string.format("cannot create folder for %s: %s", path, tostring(err)), 0) end
  return true
end

-- text(potentials) -> the CSV text; potentials = {{rank, dimensions, plans}, ...}
local function text(potentials)
  local names, seen = {}, {}
  local function dims(plan, config)
    return plan.dimensions or config.dimensions or {}
  end
  for _, config in ipairs(potentials) do
    for _, plan in ipairs(config.plans or {}) do
      for _, pair in ipairs(dims(plan, config)) do
        local name = R.dimension_pair(pair)
        if not seen[name] then seen[name] = true; names[#names + 1] = name end
      end
    end
  end
  local header = {"TOP", "step"}
  for _, n in ipairs(names) do header[#header + 1] = tostring(n) end
  for _, c in ipairs({"changed_layer", "full_layers", "memory_mb", "score", "recompute_mode",
                      "recompute_layers", "layer_recompute", "stage_memory_mb",
                      "stage_savings", "plan_scope"}) do
    header[#header + 1] = c
  end
  local lines = {}
  local function emit(fields)
    local out = {}
    for i, f in ipairs(fields) do out[i] = M.csv_field(f) end
    lines[#lines + 1] = table.concat(out, ",")
  end
  emit(header)
  for _, config in ipairs(potentials) do
    local previous
    for step, plan in ipairs(config.plans or {}) do
      local values = {}
      for _, pair in ipairs(dims(plan, config)) do
        local name, value = R.dimension_pair(pair)
        values[name] = value
      end
      local row = {cell(config.rank), cell(step - 1)}
      for _, n in ipairs(names) do row[#row + 1] = cell(values[n]) end
      local changed = previous and R.changed_layers(previous, plan)
      local changed_text = changed and table.concat(changed, ";") or ""
      local mode, layers = R.trainer_plan(plan)
      local per_layer = R.has_ranges(plan)
      for _, v in ipairs({
        changed_text,
        cell(R.full_layers(plan)),
        cell(plan.memory),
        cell(plan.score),
        cell(mode),
        layers and layers_json(layers) or "",
        per_layer and ranges_json(plan) or "",
        plan.stage_memory and json.encode(plan.stage_memory, SHORTEST) or "",
        plan.stage_savings and json.encode(plan.stage_savings, SHORTEST) or "",
        R.plan_scope(plan),
      }) do
        row[#row + 1] = v
      end
      emit(row)
      previous = plan
    end
  end
  return table.concat(lines, "\n") .. "\n"
end

-- (each plan's layers expanded once: a row reads them four times)
function M.text(potentials) return R.reading(text, potentials) end

-- write(potentials, path) -> true; creates missing parent folders and replaces the file
-- atomically (a temporary file beside it, renamed into place).
function M.write(potentials, path)
  if type(path) ~= "string" or path == "" then
    error("recompute.write_csv: expected a file path", 3)
  end
  local text = M.text(potentials)
  M.ensure_parent(path)
  local ok, err = files.write_atomic(path, text)
  if not ok then error("recompute.write_csv: " .. tostring(err), 0) end
  return true
end

return M
