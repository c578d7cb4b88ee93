-- What `ndplan search -o DIR` writes beyond the tables: the charts and report.html, the
-- recompute potentials of the top per-layer configurations, and trainer configs of the
-- best strategy (--export).

local M = {}

M.MAX_POINTS = 20000    -- candidates read back for the chart (the chart thins further)
M.POTENTIAL_CONFIGS = 5 -- top per-layer configurations whose potentials are written
M.POTENTIAL_STEPS = 24  -- steps of each retained sequence

-- points(csv_path, ranked, priced) -> chart points: every stride-th priced candidate of
-- results.csv (about MAX_POINTS of them) and every ranked result.
function M.points(csv_path, ranked, priced)
  local pts = {}
  local stride = math.max(1, math.ceil((priced or 0) / M.MAX_POINTS))
  local f = csv_path and io.open(csv_path, "r")
  if f then
    local header = f:read("l") or ""
    local col = {}
    local i = 0
    for name in (header .. ","):gmatch("([^,]*),") do i = i + 1; col[name] = i end
    local n = 0
    for line in f:lines() do
      n = n + 1
      if n % stride == 0 then
        local cells, k = {}, 0
        for cell in (line .. ","):gmatch("([^,]*),") do k = k + 1; cells[k] = cell end
        pts[#pts + 1] = {step_time_s = tonumber(cells[col.step_time_s]),
                         peak_bytes = tonumber(cells[col.peak_memory_bytes]),
                         fits = cells[col.fits] == "1" or cells[col.fits] == "true"}
      end
    end
    f:close()
  end
  for _, r in ipairs(ranked) do
    pts[#pts + 1] = {step_time_s = r.step_time_s, peak_bytes = r.peak_memory_bytes, fits = true,
                     label = "#" .. tostring(r.rank), ranked = true}
  end
  return pts
end

-- potentials(detailed, info) -> potentials (for recompute.write_csv), plot_data: the
-- retained sequences of the top configurations planned per layer.
function M.potentials(detailed, info)
  local plan = require "ndplan.plan"
  local recompute = require "ndplan.recompute"
  local out, space = {}, {}
  for _, r in ipairs(detailed) do
    if #out >= M.POTENTIAL_CONFIGS then break end
    if r.strategy.recompute == "per_layer" and not r.megatron then  -- free per-layer plans
      local args = require("ndplan.strategy").row_args(r.strategy, info)
      local first = plan.from_estimate(r, info.model_obj)
      local seq = plan.potentials(args, info.model_obj, first, M.POTENTIAL_STEPS)
      out[#out + 1] = {rank = r.rank, dimensions = first.dimensions, plans = seq}
      space[#space + 1] = {dimensions = first.dimensions, score = first.score, plans = seq}
    end
  end
  if #out == 0 then return nil end
  return out, recompute.plot_data(recompute.plot_groups(space, #space))
end

-- exports(dir, formats, best, info) -> lines to print: each trainer file of the best
-- strategy, what it rounded, and the rounded plan priced again.
function M.exports(dir, formats, best, info)
  local export = require "ndplan.export"
  local plan = {model = info.model_obj, strategy = best.strategy, job = best.job or info.job,
                result = best, layer_recompute = best.strategy.layer_recompute,
                budget_bytes = info.budget_bytes}  -- every searched result fits it
  local outputs, err = export.write(dir, formats, plan, function(rounded)
    rounded.device, rounded.max_mem, rounded.costs = info.device_obj, info.budget_bytes, info.costs
    return require("ndplan").estimate(rounded)
  end)
  if not outputs then return nil, err end
  local lines = {}
  for _, o in ipairs(outputs) do
    lines[#lines + 1] = string.format("export %-12s %s (%s)%s", o.name, o.path, o.mod.dialect,
                                      #o.notes == 0 and ", exact" or "")
    for _, n in ipairs(o.notes) do lines[#lines + 1] = "  " .. export.format_note(n) end
    if o.repriced then
      lines[#lines + 1] = string.format("  re-priced  step time %.4g s (plan %.4g s)%s",
                                        o.repriced.step_time_s, best.step_time_s,
                                        o.repriced.fits and "" or ", does not fit")
    elseif o.rounded then
      lines[#lines + 1] = "  re-priced  the rounded plan is refused: " .. tostring(o.refused)
    end
  end
  return lines
end

return M
