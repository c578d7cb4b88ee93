-- The files of `-o DIR`: what `ndplan search` writes beside results.csv (which the core
-- streams there): memory_parts.csv, time_parts.csv, search.json, the potentials of the top
-- per-layer configurations (recompute_potentials.csv, recompute_plot_groups.json), the
-- charts and report.html, and with --export the winner's trainer configs; and what
-- `ndplan recompute` writes: the potentials, their plot groups, the charts and report.html.
-- Everything goes into a stage (ndplan.io.files.stage), put in place by the caller once the
-- run succeeds.
local json = require "ndplan.io.json"
local search = require "ndplan.search"
local TIME_PARTS = require("ndplan.strategy").NAMES.time_parts

local M = {}

-- parts_csv(results) -> the texts of memory_parts.csv and time_parts.csv for search.json's
-- results (one row per rank and stage, one per rank and time part)
function M.parts_csv(results)
  local mem = {"rank,stage,layers,inflight,weights,grads,optimizer,activations,buffers,"
               .. "fragmentation,reserve,peak"}
  local tim = {"rank,part,seconds,share"}
  for _, r in ipairs(results) do
    for _, s in ipairs(r.stages) do
      mem[#mem + 1] = string.format("%d,%d,%d,%.6g,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f",
        r.rank, s.stage, s.layers, s.inflight, s.weights, s.grads, s.optimizer, s.activations,
        s.buffers, s.fragmentation, s.reserve, s.peak)
    end
    for _, k in ipairs(TIME_PARTS) do
      local v = r.time_parts_s[k] or 0
      tim[#tim + 1] = string.format("%d,%s,%.9g,%.6f", r.rank, k, v, v / r.step_time_s)
    end
  end
  return table.concat(mem, "\n") .. "\n", table.concat(tim, "\n") .. "\n"
end

-- search(stage, ranked, info, model, exports) -> doc, export_lines, export_refused |
-- nil, message. doc is search.json's document; exports = {formats, dialects, args} (the
-- search's arguments) or nil; export_lines name the files as they will be once committed.
function M.search(stage, ranked, info, model, exports)
  local doc = search.json_doc(ranked or {}, info)
  local mem, tim = M.parts_csv(doc.results)
  local ok, err = stage:write("memory_parts.csv", mem)
  if ok then ok, err = stage:write("time_parts.csv", tim) end
  doc.model_warnings = model:warnings()  -- the loader's report: what it assumed or did not read
  if ok then ok, err = stage:write("search.json", search.encode_json(doc) .. "\n") end
  if not ok then return nil, err end
  -- the potentials of the top per-layer configurations, the charts and report.html
  -- (in one reading: the CSV reads the plans the potentials built, each found out once)
  local outs = require "ndplan.out.search_outputs"
  local R = require "ndplan.recompute"
  local potentials, plot_data, okc, cerr = R.reading(function()
    local pots, data = outs.potentials(doc.results, info)
    if not pots then return nil end
    return pots, data, pcall(R.write_csv, pots, stage.dir .. "/recompute_potentials.csv")
  end)
  if potentials then
    if not okc then return nil, tostring(cerr) end
    ok, err = stage:write("recompute_plot_groups.json", json.encode(plot_data) .. "\n")
    if not ok then return nil, err end
  end
  -- the chart's candidates: the search's sample of the rows it wrote to results.csv
  local okr, rep_err = require("ndplan.out.report").search_report(stage.dir, doc.results,
    outs.points(info.results, doc.results, info.priced), info.budget_bytes,
    plot_data, {priced = info.priced, fit = info.fit})
  if not okr then return nil, tostring(rep_err) end
  local export_lines, export_refused
  if exports and exports.formats and doc.results[1] then
    info.dialects, info.search_args = exports.dialects, exports.args
    local lines, eerr, refused = outs.exports(stage.dir, exports.formats, doc.results, info)
    if not lines then return nil, eerr end
    export_lines, export_refused = {}, refused
    for i, l in ipairs(lines) do export_lines[i] = stage:final_text(l) end
  end
  return doc, export_lines, export_refused
end

-- recompute(stage, r, potentials, groups) -> true | nil, message: recompute_potentials.csv,
-- recompute_plot_groups.json and the charts with report.html of the estimate r, its
-- potentials ({{rank, dimensions, plans}}) and their plot groups (ndplan.recompute)
function M.recompute(stage, r, potentials, groups)
  local R = require "ndplan.recompute"
  local ok, err = pcall(R.write_csv, potentials, stage.dir .. "/recompute_potentials.csv")
  if not ok then return nil, tostring(err) end
  ok, err = stage:write("recompute_plot_groups.json", json.encode(R.plot_data(groups)) .. "\n")
  if not ok then return nil, err end
  ok, err = require("ndplan.out.report").recompute_report(stage.dir, r, R.plot_data(groups))
  if not ok then return nil, err end
  return true
end

return M
