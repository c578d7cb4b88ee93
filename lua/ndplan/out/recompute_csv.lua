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
-- A plan's ranges are most often the previous step's but one or two: each record is
-- encoded once per distinct range (records[setting][first][count], kept while the text is
-- built; a range's setting is one table per setting while reading) and written again raw.
local function record(r, records)
  local s = R.range_setting(r)
  local by_first = records[s]
  if not by_first then by_first = {}; records[s] = by_first end
  local by_count = by_first[r.first]
  if not by_count then by_count = {}; by_first[r.first] = by_count end
  local known = by_count[r.count]
  if known then return known end
  local mode, ops = s.mode, s.ops
  local recompute
  if mode == "full" then recompute = "full"
  elseif mode == "off" then recompute = "none"
  elseif #ops > 0 then recompute = ops
  else recompute = "selective" end
  local kv = {{"first", r.first}, {"count", r.count}, {"kind", s.kind}, {"mode", mode},
              {"recompute", recompute}}
  if s.offload_bytes > 0 then kv[#kv + 1] = {"offload_bytes", s.offload_bytes} end
  known = json.raw(json.encode(json.object(kv), SHORTEST))
  by_count[r.count] = known
  return known
end

local function by_first(a, b) return a.first < b.first end

local function ranges_json(plan, records)
  local ranges = plan.ranges
  for i = 2, #ranges do  -- plans state their ranges in layer order: sorted only when not
    if ranges[i].first < ranges[i - 1].first then
      local sorted = {}
      for k, r in ipairs(ranges) do sorted[k] = r end
      table.sort(sorted, by_first)
      ranges = sorted
      break
    end
  end
  local list = {}
  for i, r in ipairs(ranges) do list[i] = record(r, records) end
  return json.encode(list, SHORTEST)
end

-- RFC 4180: quote a field holding a comma, a quote or a line break; double its quotes.
local find, gsub = string.find, string.gsub
function M.csv_field(text)
  if find(text, '"', 1, true) then return '"' .. gsub(text, '"', '""') .. '"' end
  if find(text, ",", 1, true) or find(text, "\n", 1, true) or find(text, "\r", 1, true) then
    return '"' .. text .. '"'
  end
  return text
end

-- A cell: numbers as number_text (which never needs quoting), other values as text.
local function cell(v)
  if v == nil then return "" end
  if type(v) == "number" then return M.number_text(v) end
  return M.csv_field(tostring(v))
end

-- Make the folder holding `path` (and its parents) when it is missing.
function M.ensure_parent(path)
  local parent = path:match("^(.*)/[^/]*$")
  if parent == nil or parent == "" then return true end
  local ok, err = require("ndplan.io.files").mkdir_p(parent)
  if not ok then error(string.format("cannot create folder for %s: %s", path, tostring(err)), 0) end
  return true
end

local COLUMNS = {"changed_layer", "full_layers", "memory_mb", "score", "recompute_mode",
                 "recompute_layers", "layer_recompute", "stage_memory_mb", "stage_savings",
                 "plan_scope"}

-- The cells of the degrees, joined: one per name, empty where the plan states none.
local function degree_cells(names, dims)
  local values = {}
  for _, pair in ipairs(dims) do
    local name, value = R.dimension_pair(pair)
    values[name] = value
  end
  local out = {}
  for i, n in ipairs(names) do out[i] = cell(values[n]) end
  return table.concat(out, ",")
end

-- Two arrays of dimension pairs equal by value, in order (then their cells are the same).
local function same_pairs(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    local na, va = R.dimension_pair(a[i])
    local nb, vb = R.dimension_pair(b[i])
    if na ~= nb or va ~= vb then return false end
  end
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
  for _, n in ipairs(names) do header[#header + 1] = M.csv_field(tostring(n)) end
  for _, c in ipairs(COLUMNS) do header[#header + 1] = c end
  local lines = {table.concat(header, ",")}
  local records = {}  -- ranges_json's, shared by every row
  local row = {}      -- one row's cells, refilled for each
  for _, config in ipairs(potentials) do
    local previous, last_dims, degrees
    local rank = cell(config.rank)
    for step, plan in ipairs(config.plans or {}) do
      local d = dims(plan, config)
      if not (last_dims == d or (last_dims and same_pairs(last_dims, d))) then
        last_dims, degrees = d, degree_cells(names, d)
      end
      local changed = previous and R.changed_layers(previous, plan)
      local mode, layers = R.trainer_plan(plan)
      row[1], row[2] = rank, cell(step - 1)
      local k = 2
      if #names > 0 then k = 3; row[3] = degrees end
      row[k + 1] = changed and table.concat(changed, ";") or ""
      row[k + 2] = cell(R.full_layers(plan))
      row[k + 3], row[k + 4], row[k + 5] = cell(plan.memory), cell(plan.score), cell(mode)
      row[k + 6] = layers and M.csv_field(layers_json(layers)) or ""
      row[k + 7] = R.has_ranges(plan) and M.csv_field(ranges_json(plan, records)) or ""
      row[k + 8] = plan.stage_memory and M.csv_field(json.encode(plan.stage_memory, SHORTEST))
                   or ""
      row[k + 9] = plan.stage_savings and M.csv_field(json.encode(plan.stage_savings, SHORTEST))
                   or ""
      row[k + 10] = M.csv_field(R.plan_scope(plan))
      lines[#lines + 1] = table.concat(row, ",", 1, k + 10)
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
