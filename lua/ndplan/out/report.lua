-- A single-file HTML report: inline CSS, inline SVG charts, plain tables. No scripts, no
-- fonts and no links to fetch, so it opens offline and prints as it shows.
--   report.html{title=, summary_rows=, tables=, charts=} -> text
--   report.write(dir, parts)                               -> paths written
--   report.estimate_report(dir, result)                    (ndplan estimate --plot)
--   report.recompute_report(dir, result, plot_data)        (ndplan recompute -o)
--   report.search_report(dir, ranked, points, budget, plot_data_or_nil)  (ndplan search -o)
local files = require "ndplan.io.files"
local plots = require "ndplan.out.plots"
local base = require "ndplan.out.plots_base"

local M = {}

local HTML_ESCAPES = {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;"}
local find = string.find
local function esc(s)
  s = tostring(s)
  if find(s, '^[^&<>"]*$') then return s end  -- most hold none: one pass, nothing built
  return (s:gsub('[&<>"]', HTML_ESCAPES))
end

M.CSS = [[
body { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; color: #222;
       margin: 24px auto; max-width: 960px; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 12px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
table { border-collapse: collapse; font-size: 13px; margin: 4px 0 12px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: left; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.summary th { background: none; font-weight: normal; color: #555; }
section.chart { margin: 20px 0; border-top: 1px solid #ddd; padding-top: 8px; }
figure { margin: 0; overflow-x: auto; }
figure svg { display: block; max-width: none; }
footer { margin-top: 32px; font-size: 11px; color: #777; }
]]

-- A cell's text and whether it reads as a number (right-aligned).
local function cell(v)
  if type(v) == "number" then
    return math.tointeger(v) and tostring(math.tointeger(v)) or base.short(v), true
  end
  local s = tostring(v == nil and "" or v)
  return s, s:match("^%-?[%d.,]+%s*%a*/?%a*%%?$") ~= nil
end

local function html_table(columns, rows, class)
  local out = {string.format("<table%s>", class and (' class="' .. class .. '"') or "")}
  if columns then
    local th = {}
    for i, c in ipairs(columns) do th[i] = "<th>" .. esc(c) .. "</th>" end
    out[#out + 1] = "<thead><tr>" .. table.concat(th) .. "</tr></thead>"
  end
  out[#out + 1] = "<tbody>"
  for _, row in ipairs(rows) do
    local tds = {}
    for i = 1, #row do
      local text, numeric = cell(row[i])
      if class == "summary" then
        tds[i] = (i == 1 and "<th>" or "<td>") .. esc(text) .. (i == 1 and "</th>" or "</td>")
      else tds[i] = (numeric and '<td class="num">' or "<td>") .. esc(text) .. "</td>" end
    end
    out[#out + 1] = "<tr>" .. table.concat(tds) .. "</tr>"
  end
  out[#out + 1] = "</tbody></table>"
  return table.concat(out, "\n")
end

-- html(parts) -> the page. parts: title, summary_rows = {{label, value}, ...},
-- charts = {{name =, title =, svg =}, ...} (drawn first, in order), tables = {{title =,
-- columns = {...}, rows = {{...}, ...}}, ...}, notes = {text, ...}. Charts come inline:
-- each in <section class="chart" id="chart-NAME">.
function M.html(parts)
  local title = parts.title or "ndplan report"
  local out = {"<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
               "<title>" .. esc(title) .. "</title>", "<style>", M.CSS .. "</style>", "</head>",
               "<body>", "<h1>" .. esc(title) .. "</h1>"}
  if parts.summary_rows and #parts.summary_rows > 0 then
    out[#out + 1] = html_table(nil, parts.summary_rows, "summary")
  end
  for _, note in ipairs(parts.notes or {}) do out[#out + 1] = "<p>" .. esc(note) .. "</p>" end
  for i, c in ipairs(parts.charts or {}) do
    -- the chart draws its own heading; the section's label names it for screen readers
    out[#out + 1] = string.format('<section class="chart" id="chart-%s" aria-label="%s">', esc(c.name or i),
                                  esc(c.title or c.name or ""))
    out[#out + 1] = "<figure>"
    local svg = c.svg  -- without its last line break (a gsub would try every byte)
    out[#out + 1] = svg:byte(-1) == 10 and svg:sub(1, -2) or svg
    out[#out + 1] = "</figure>"
    out[#out + 1] = "</section>"
  end
  for _, t in ipairs(parts.tables or {}) do
    out[#out + 1] = "<section>"
    out[#out + 1] = "<h2>" .. esc(t.title or "") .. "</h2>"
    out[#out + 1] = html_table(t.columns, t.rows or {})
    out[#out + 1] = "</section>"
  end
  out[#out + 1] = "<footer>" .. esc(parts.footer or require("ndplan")._VERSION) .. "</footer>"
  out[#out + 1] = "</body>"
  out[#out + 1] = "</html>"
  return table.concat(out, "\n") .. "\n"
end

-- write(dir, parts) -> array of the paths written | nil, message. Creates dir, writes each
-- named chart as dir/NAME.svg and the page as dir/report.html, each atomically.
function M.write(dir, parts)
  dir = dir:gsub("(.)/+$", "%1")
  local ok, err = files.mkdir_p(dir)
  if not ok then return nil, dir .. ": " .. tostring(err) end
  local written = {}
  local function put(name, text)
    local path = dir .. "/" .. name
    local wrote, werr = files.write_atomic(path, text)
    if not wrote then return nil, werr end
    written[#written + 1] = path
    return true
  end
  for _, c in ipairs(parts.charts or {}) do
    if c.name then
      local w, e = put(c.name .. ".svg", c.svg)
      if not w then return nil, e end
    end
  end
  local w, e = put("report.html", M.html(parts))
  if not w then return nil, e end
  return written
end

---------------------------------------------------------------------------------------------
-- The reports of the commands
---------------------------------------------------------------------------------------------

local function gib(b) return base.short(b / base.GiB) .. " GiB" end
local function pct(x) return string.format("%.1f%%", 100 * x) end

-- summary rows of one estimate result
local function result_summary(r)
  local rows = {}
  local function row(label, value) if value ~= nil then rows[#rows + 1] = {label, value} end end
  local job = r.job or {}
  row("model", r.model)
  if r.device then row("devices", (job.devices and base.int(job.devices) .. " x " or "") .. r.device) end
  if job.global_batch then
    row("batch", string.format("%s sequences x %s tokens", base.int(job.global_batch), base.int(job.seq_len or 0)))
  end
  row("strategy", base.strategy_label(r.strategy))
  if r.strategy then row("schedule, recompute", string.format("%s, %s", tostring(r.strategy.schedule),
                                                               tostring(r.strategy.recompute))) end
  if r.step_time_s then row("step time", base.seconds(r.step_time_s)) end
  if r.tokens_per_s then row("tokens/s", string.format("%.0f", r.tokens_per_s)) end
  if r.mfu then row("MFU", pct(r.mfu)) end
  if r.peak_memory_bytes then
    row("peak memory", string.format("%s on stage %s", gib(r.peak_memory_bytes), base.int(r.heaviest_stage or 0)))
  end
  if r.budget_bytes then
    row("budget", gib(r.budget_bytes) .. (r.fits == false and " (over by " .. gib(r.over_bytes or 0) .. ")"
                                          or " (fits)"))
  end
  return rows
end

local function time_table(r)
  local rows = {}
  for _, k in ipairs(base.TIME_PARTS) do
    local v = (r.time_parts_s or {})[k] or 0
    if v > 0 then
      rows[#rows + 1] = {base.TIME_LABELS[k], base.seconds(v), pct(v / r.step_time_s)}
    end
  end
  return {title = "Step time parts (exposed)", columns = {"part", "time", "share"}, rows = rows}
end

local function stage_table(r)
  local columns = {"stage", "layers", "in flight"}
  for _, k in ipairs(base.MEMORY_PARTS) do columns[#columns + 1] = base.MEMORY_LABELS[k] end
  columns[#columns + 1] = "peak"
  local rows = {}
  for s, st in ipairs(r.stages or {}) do
    local row = {s - 1, st.layers or "", st.inflight or ""}
    for _, k in ipairs(base.MEMORY_PARTS) do row[#row + 1] = gib(st[k] or 0) end
    row[#row + 1] = gib(st.peak or 0)
    rows[s] = row
  end
  return {title = "Memory per stage", columns = columns, rows = rows}
end

-- The three charts of one strategy.
local function strategy_charts(r)
  return {
    {name = "stage_memory", title = "Memory per pipeline stage", svg = plots.stage_memory(r)},
    {name = "time_breakdown", title = "Step time breakdown", svg = plots.time_breakdown({r}, 1)},
    {name = "pipeline", title = "Pipeline schedule", svg = plots.pipeline(r)},
  }
end

-- estimate_parts(result) -> report parts for one strategy (the charts and its tables)
function M.estimate_parts(r)
  return {title = string.format("ndplan estimate: %s", r.model or "strategy"),
          summary_rows = result_summary(r), charts = strategy_charts(r),
          tables = {time_table(r), stage_table(r)}}
end

-- estimate_report(dir, result) -> paths | nil, message: stage_memory.svg,
-- time_breakdown.svg, pipeline.svg and report.html
function M.estimate_report(dir, r)
  return M.write(dir, M.estimate_parts(r))
end

local function potentials_table(plot_data)
  local rows = {}
  for g, group in ipairs(plot_data) do
    for p, rec in ipairs(group.records or {}) do
      rows[#rows + 1] = {string.format("%d.%d", g, p - 1), rec.full_layers or "",
                         rec.score and base.seconds(rec.score) or "",
                         rec.memory and gib(rec.memory * base.MiB) or ""}
    end
  end
  return {title = "Recompute potentials", columns = {"rank.index", "full layers", "step time", "peak memory"},
          rows = rows}
end

-- recompute_report(dir, result, plot_data) -> paths | nil, message: the estimate report of
-- the chosen plan plus potentials.svg (plot_data: ndplan.recompute.plot_data(groups))
function M.recompute_report(dir, r, plot_data)
  local parts = M.estimate_parts(r)
  parts.title = string.format("ndplan recompute: %s", r.model or "plan")
  table.insert(parts.charts, {name = "potentials", title = "Recompute potentials",
                              svg = plots.potentials(plot_data)})
  parts.tables[#parts.tables + 1] = potentials_table(plot_data)
  return M.write(dir, parts)
end

M.TOP = 10

-- search_report(dir, ranked, points, budget_bytes [, plot_data]) -> paths | nil, message.
-- ranked: the ranked results, best first, each a full nd.estimate result (stages,
-- time_parts_s, strategy, ...; search's detail(row, info) gives one); points: every priced
-- candidate as {step_time_s, peak_bytes, fits, label}; budget_bytes: the memory budget;
-- plot_data: ndplan.recompute.plot_data(groups) or nil. Writes candidates.svg,
-- time_breakdown.svg (top 10), and for the best strategy stage_memory.svg and pipeline.svg,
-- potentials.svg when plot_data is given, and report.html.
function M.search_report(dir, ranked, points, budget_bytes, plot_data, counts)
  ranked, points = ranked or {}, points or {}
  local fits = 0
  for _, p in ipairs(points) do if p.fits then fits = fits + 1 end end
  -- the search's own counts when the points are a sample of what it priced
  local priced = counts and counts.priced or #points
  fits = counts and counts.fit or fits
  local best = ranked[1]
  local parts = {title = string.format("ndplan search: %s", best and best.model or "no strategy fits"),
                 summary_rows = {{"candidates priced", priced}, {"fit the budget", fits},
                                 {"budget", gib(budget_bytes)}},
                 charts = {}, tables = {}}
  local charts = parts.charts
  charts[#charts + 1] = {name = "candidates", title = "Candidates", svg = plots.candidates(points, budget_bytes)}
  if best then
    local job_rows = {model = true, devices = true, batch = true}
    for _, row in ipairs(result_summary(best)) do
      if row[1] ~= "budget" then
        if not job_rows[row[1]] then row[1] = "best: " .. row[1] end
        parts.summary_rows[#parts.summary_rows + 1] = row
      end
    end
    charts[#charts + 1] = {name = "time_breakdown", title = "Step time breakdown, top " .. math.min(M.TOP, #ranked),
                           svg = plots.time_breakdown(ranked, M.TOP)}
    charts[#charts + 1] = {name = "stage_memory", title = "Memory per pipeline stage (best)",
                           svg = plots.stage_memory(best)}
    charts[#charts + 1] = {name = "pipeline", title = "Pipeline schedule (best)", svg = plots.pipeline(best)}
    local rows = {}
    for i = 1, math.min(M.TOP, #ranked) do
      local r = ranked[i]
      rows[i] = {r.rank or i, base.strategy_label(r.strategy), base.seconds(r.step_time_s),
                 string.format("%.0f", r.tokens_per_s or 0), pct(r.mfu or 0), gib(r.peak_memory_bytes)}
    end
    parts.tables[1] = {title = "Top strategies", columns = {"rank", "strategy", "step time", "tokens/s",
                                                            "MFU", "peak memory"}, rows = rows}
    parts.tables[2] = time_table(best)
    parts.tables[3] = stage_table(best)
  else
    parts.notes = {"No strategy fits the budget: the chart shows every priced candidate."}
  end
  if plot_data and #plot_data > 0 then
    charts[#charts + 1] = {name = "potentials", title = "Recompute potentials", svg = plots.potentials(plot_data)}
    parts.tables[#parts.tables + 1] = potentials_table(plot_data)
  end
  return M.write(dir, parts)
end

return M
