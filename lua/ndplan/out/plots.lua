-- ndplan's charts as self-contained SVG text (no fonts, scripts or links), byte-stable for a
-- given input. One function per chart:
--   stage_memory(result)          per-stage memory of one nd.estimate result, stacked bars
--   time_breakdown(results, n)    exposed step-time parts of the top n results
--   candidates(points, budget)    every priced candidate: step time against peak memory
--   potentials(plot_data)         ndplan.recompute.plot_data groups: score per plan
--   pipeline(result)              the schedule's timeline (ndplan.plots_pipeline)
local svg = require "ndplan.out.svg"
local base = require "ndplan.out.plots_base"
local chart = require "ndplan.c.chart"

local M = {}
local P = base.PALETTE
local GiB = base.GiB

local function gib(bytes) return base.short(bytes / GiB) .. " GiB" end

-- "llama3.1-70b on 64 x H100 · dp2 tp8 pp4 ..." from whatever the result carries
local function context(result)
  local parts = {}
  if result.model then
    local on = result.model
    if result.device then
      on = on .. " on " .. (result.job and result.job.devices and (base.int(result.job.devices) .. " x ") or "")
        .. result.device
    end
    parts[#parts + 1] = on
  end
  if result.strategy then parts[#parts + 1] = base.strategy_label(result.strategy) end
  return table.concat(parts, " · ")
end

---------------------------------------------------------------------------------------------
-- Memory per stage
---------------------------------------------------------------------------------------------

-- stage_memory(result) -> svg. result: an nd.estimate result (stages[] with the memory parts
-- in bytes, budget_bytes). One stacked bar per stage, the budget as a dashed line.
function M.stage_memory(result)
  local stages = result.stages or {}
  local n = math.max(1, #stages)
  local W, H = 760, 440
  local box = {left = 70, top = 66, right = W - 24, bottom = H - 96}
  local top = result.budget_bytes or 0
  for _, st in ipairs(stages) do
    local sum = 0
    for _, k in ipairs(base.MEMORY_PARTS) do sum = sum + (st[k] or 0) end
    top = math.max(top, sum, st.peak or 0)
  end
  local ticks = base.ticks(0, math.max(top / GiB, 1e-3) * 1.02)
  local y = base.scale(0, ticks[#ticks], box.bottom, box.top)

  local doc = svg.doc(W, H, "Memory per pipeline stage", context(result))
  local peak = result.peak_memory_bytes
  base.heading(doc, "Memory per pipeline stage", context(result)
    .. (peak and string.format(" · peak %s%s", gib(peak),
                               result.fits == false and " (over budget)" or "") or ""))
  base.y_axis(doc, box, ticks, y, "memory per device (GiB)")

  local slot = (box.right - box.left) / n
  local bar = math.min(64, slot * 0.7)
  local label_every = math.max(1, math.ceil(n / 24))
  doc:open("g", {class = "bars"})
  for s, st in ipairs(stages) do
    local x = box.left + (s - 1) * slot + (slot - bar) / 2
    local acc = 0
    for _, k in ipairs(base.MEMORY_PARTS) do
      local v = (st[k] or 0) / GiB
      if v > 0 then
        doc:rect(x, y(acc + v), bar, y(acc) - y(acc + v), {fill = P[k]},
                 string.format("stage %d %s: %s", s - 1, base.MEMORY_LABELS[k], gib(st[k])))
        acc = acc + v
      end
    end
    if (s - 1) % label_every == 0 then
      doc:text(x + bar / 2, box.bottom + 16, tostring(s - 1), {["text-anchor"] = "middle", ["font-size"] = 11})
    end
    if n <= 16 then
      doc:text(x + bar / 2, y(acc) - 4, base.short(acc), {["text-anchor"] = "middle", ["font-size"] = 10})
    end
  end
  doc:close()
  doc:text((box.left + box.right) / 2, box.bottom + 34, "pipeline stage", {["text-anchor"] = "middle"})

  if result.budget_bytes then
    local by = y(result.budget_bytes / GiB)
    doc:line(box.left, by, box.right, by, {class = "budget", stroke = P.budget, ["stroke-width"] = 2,
                                           ["stroke-dasharray"] = "6,4"})
    doc:text(box.right - 4, by - 5, "budget " .. gib(result.budget_bytes),
             {["text-anchor"] = "end", fill = P.budget, ["font-size"] = 11})
  end

  local items, drawn = {}, {}
  for _, st in ipairs(result.stages) do  -- a part no stage holds gets no legend entry
    for _, k in ipairs(base.MEMORY_PARTS) do drawn[k] = drawn[k] or (st[k] or 0) > 0 end
  end
  for _, k in ipairs(base.MEMORY_PARTS) do
    if drawn[k] or k ~= "fragmentation" then items[#items + 1] = {base.MEMORY_LABELS[k], P[k]} end
  end
  items[#items + 1] = {"budget (device capacity or -M)", P.budget, kind = "dash"}
  base.legend(doc, box.left, box.bottom + 48, box.right - box.left, items)
  return doc:finish()
end

---------------------------------------------------------------------------------------------
-- Step-time breakdown
---------------------------------------------------------------------------------------------

-- time_breakdown(results, n) -> svg. results: ranked nd.estimate results (time_parts_s,
-- step_time_s, strategy); the first n (default 10) get one horizontal stacked bar each.
function M.time_breakdown(results, n)
  n = math.min(n or 10, #results)
  local rows = math.max(1, n)
  local row_h = 26
  local W = 860
  local box = {left = 300, top = 66, right = W - 80, bottom = 66 + rows * row_h}
  local H = box.bottom + 90
  local top = 0
  local present = {}
  for i = 1, n do
    local r, sum = results[i], 0
    for _, k in ipairs(base.TIME_PARTS) do
      local v = (r.time_parts_s or {})[k] or 0
      if v > 0 then present[k] = true; sum = sum + v end
    end
    top = math.max(top, sum, r.step_time_s or 0)
  end
  local factor, unit = base.time_unit(math.max(top, 1e-9))
  local ticks = base.ticks(0, math.max(top * factor, 1e-9) * 1.02)
  local x = base.scale(0, ticks[#ticks], box.left, box.right)

  local title = n == 1 and "Step time breakdown" or string.format("Step time breakdown, top %d", n)
  local doc = svg.doc(W, H, title)
  base.heading(doc, title, "exposed (critical-path) time per step; communication hidden behind compute is not drawn")
  base.x_axis(doc, box, ticks, x, "time per step (" .. unit .. ")")
  doc:line(box.left, box.top, box.left, box.bottom, {stroke = P.axis})

  doc:open("g", {class = "bars"})
  for i = 1, n do
    local r = results[i]
    local y0 = box.top + (i - 1) * row_h + 4
    local label = string.format("#%d %s", r.rank or i, base.strategy_label(r.strategy))
    if utf8.len(label) > 44 then label = label:sub(1, 43) .. "…" end
    doc:text(box.left - 8, y0 + 13, label, {["text-anchor"] = "end", ["font-size"] = 11})
    local acc = 0
    for _, k in ipairs(base.TIME_PARTS) do
      local v = ((r.time_parts_s or {})[k] or 0) * factor
      if v > 0 then
        doc:rect(x(acc), y0, x(acc + v) - x(acc), row_h - 8, {fill = base.time_colour(k)},
                 string.format("%s: %s", base.TIME_LABELS[k], base.seconds(v / factor)))
        acc = acc + v
      end
    end
    doc:text(x(acc) + 4, y0 + 13, base.seconds(r.step_time_s or acc / factor), {["font-size"] = 11})
  end
  doc:close()

  base.legend(doc, 16, box.bottom + 52, W - 32, base.time_items(present))
  return doc:finish()
end

---------------------------------------------------------------------------------------------
-- Candidates: step time against peak memory
---------------------------------------------------------------------------------------------

-- The candidates as columns: step_time_s, peak_bytes, fits, and the sparse label and
-- ranked, indexed 1 .. n. A search hands thousands: one table per column, not per point.
local function columns_of(points)
  if type(points.step_time_s) == "table" then
    local c = points
    return c.step_time_s, c.peak_bytes, c.fits, c.label or {}, c.ranked or {},
           c.n or #c.step_time_s
  end
  local t, m, f, label, ranked = {}, {}, {}, {}, {}
  for i, p in ipairs(points) do
    t[i], m[i], f[i], label[i], ranked[i] = p.step_time_s, p.peak_bytes, p.fits, p.label, p.ranked
  end
  return t, m, f, label, ranked, #points
end

-- pareto_front(points) -> the fitting points no other fitting point beats on both step time
-- and memory, by ascending memory (so descending step time); points: a list of records.
-- The rule is ndplan.c.chart's (front).
function M.pareto_front(points)
  local t, m, f, _, _, count = columns_of(points)
  local out = {}
  for j, i in ipairs(chart.front(t, m, f, count)) do out[j] = points[i] end
  return out
end

M.MAX_POINTS = 5000

-- candidates(points, budget_bytes [, opts]) -> svg. points: {step_time_s, peak_bytes, fits,
-- label}, or the same as columns ({step_time_s = {...}, peak_bytes = {...}, fits = {...},
-- label = {[i] = ...}, ranked = {[i] = true}, n =}: what a search hands). Fitting points in
-- blue, the others grey, the Pareto front of the fitting ones as a red staircase, the
-- budget as a vertical dashed line. Over opts.max_points (5000) points the front is kept
-- whole and every k-th of the rest drawn, as the caption says; points landing on the same
-- half pixel are drawn once.
function M.candidates(points, budget_bytes, opts)
  opts = opts or {}
  local cap = opts.max_points or M.MAX_POINTS
  local t, m, f, label, ranked, count = columns_of(points)
  -- which points are drawn, counted and on the front: per point, so in C (ndplan.c.chart)
  local sel = chart.candidates(t, m, f, ranked, count, budget_bytes, cap)
  local front = sel.front

  local W, H = 760, 480
  local box = {left = 80, top = 66, right = W - 24, bottom = H - 96}
  local tmin, tmax, mmax = sel.tmin, sel.tmax, sel.mmax
  local xticks = base.ticks(0, math.max(mmax / GiB, 1e-3) * 1.02)
  local x = base.scale(0, xticks[#xticks], box.left, box.right)
  local log = tmax / tmin > 20
  local factor, unit = base.time_unit(tmax)
  local yticks, y
  if log then
    yticks = base.log_ticks(tmin * factor, tmax * factor)
    y = base.log_scale(yticks[1], yticks[#yticks], box.bottom, box.top)
  else
    yticks = base.ticks(0, tmax * factor * 1.02)
    y = base.scale(0, yticks[#yticks], box.bottom, box.top)
  end
  local place = {xs = m, xdiv = GiB, x = x, ys = t, yfactor = factor, y = y}

  local title = "Candidates: step time against peak memory"
  local caption = string.format("%d candidates, %d fit the budget", sel.counted, sel.fit_count)
  if sel.outside > 0 then
    caption = caption .. string.format("; %d far slower or heavier than every fitting plan not drawn",
                                       sel.outside)
  end
  if sel.shown < sel.drawn then
    caption = caption .. string.format("; showing %d (1 in %d of the rest, the Pareto front in full)",
                                       sel.shown, sel.stride)
  end
  local doc = svg.doc(W, H, title, caption)
  base.heading(doc, title, caption)
  base.y_axis(doc, box, yticks, y, string.format("step time (%s%s)", unit, log and ", log scale" or ""))
  base.x_axis(doc, box, xticks, x, "peak memory per device (GiB)")

  -- the dots off the front, each half pixel once per group: misses drawn first, then fits
  local misses, hits = chart.dots(place, sel.dots, f)
  for _, group in ipairs({{misses, P.misses, "misses"}, {hits, P.fits, "fits"}}) do
    doc:open("g", {class = group[3], fill = group[2]})
    doc:circles(group[1], 2.5)
    doc:close()
  end

  if #front > 0 then
    local xy = chart.half_pixels(place, front)  -- front[k] at xy[2k - 1], xy[2k]
    local stairs = {}
    for k = 1, #front do
      local cx, cy = xy[2 * k - 1], xy[2 * k]
      if k > 1 then stairs[#stairs + 1] = {cx, stairs[#stairs][2]} end
      stairs[#stairs + 1] = {cx, cy}
    end
    doc:open("g", {class = "front"})
    doc:add("polyline", {points = svg.points(stairs), fill = "none", stroke = P.front, ["stroke-width"] = 2})
    for k, i in ipairs(front) do
      doc:open("circle", {cx = xy[2 * k - 1], cy = xy[2 * k], r = 4, fill = P.front})
      doc:add("title", {}, string.format("%s: %s, %s", label[i] or "?", base.seconds(t[i]), gib(m[i])))
      doc:close()
    end
    local best = front[#front]
    local bx, by = xy[2 * #front - 1], xy[2 * #front]
    doc:text(math.min(bx + 8, box.right - 4), by + 16, "fastest: " .. (label[best] or base.seconds(t[best])),
             {["text-anchor"] = bx + 8 > box.right - 200 and "end" or "start", fill = P.front, ["font-size"] = 11})
    doc:close()
  end

  if budget_bytes then
    local bx = x(budget_bytes / GiB)
    doc:line(bx, box.top, bx, box.bottom, {class = "budget", stroke = P.budget, ["stroke-width"] = 2,
                                           ["stroke-dasharray"] = "6,4"})
    doc:text(bx - 4, box.top + 12, "budget " .. gib(budget_bytes),
             {["text-anchor"] = "end", fill = P.budget, ["font-size"] = 11})
  end
  base.legend(doc, box.left, box.bottom + 48, box.right - box.left, {
    {"fits", P.fits, kind = "dot"}, {"over budget", P.misses, kind = "dot"},
    {"Pareto front of the fitting ones", P.front, kind = "line"}, {"budget", P.budget, kind = "dash"}})
  return doc:finish()
end

---------------------------------------------------------------------------------------------
-- Recompute potentials
---------------------------------------------------------------------------------------------

-- "DP2 TP4 PP2 SP" from a plan's {name, value} pairs: degrees above one, switches on
local function dims_label(dims)
  local out = {}
  for _, d in ipairs(dims or {}) do
    local name, v = d.name or d[1], d.value
    if v == nil then v = d[2] end
    if v == true or (name == "SP" and v == 1) then out[#out + 1] = name
    elseif type(v) == "number" and (v > 1 or name == "DP" or (name == "ZERO" and v > 0)) then
      out[#out + 1] = name .. base.int(v)
    end
  end
  return table.concat(out, " ")
end

-- potentials(plot_data) -> svg. plot_data: require("ndplan.recompute").plot_data(groups):
-- {{dimensions, records = {{score, parts, memory (MiB), full_layers, ...}}}}. One bar per
-- plan labelled rank.index (index 0 is the group's fastest plan), its exposed time parts
-- stacked when given, its peak memory as a diamond on the right axis.
function M.potentials(plot_data)
  local bars = {}
  local gap = 14
  for g, group in ipairs(plot_data) do
    for p, rec in ipairs(group.records or {}) do
      bars[#bars + 1] = {group = g, label = string.format("%d.%d", g, p - 1), rec = rec}
    end
  end
  local n = math.max(1, #bars)
  local slot = math.max(16, math.min(90, 640 / n))
  local plot_w = n * slot + (#plot_data - 1) * gap
  local W = math.max(560, 80 + plot_w + 90)
  local H = 480
  local box = {left = 80, top = 66, right = W - 90, bottom = H - 130}
  local tmax, mmax, present = 0, 0, {}
  for _, b in ipairs(bars) do
    local sum = 0
    for _, k in ipairs(base.TIME_PARTS) do
      local v = (b.rec.parts or {})[k] or 0
      if v > 0 then present[k] = true; sum = sum + v end
    end
    b.total = sum > 0 and sum or (b.rec.score or 0)
    tmax = math.max(tmax, b.total, b.rec.score or 0)
    mmax = math.max(mmax, (b.rec.memory or 0) / 1024)
  end
  local factor, unit = base.time_unit(math.max(tmax, 1e-9))
  local ticks = base.ticks(0, math.max(tmax * factor, 1e-9) * 1.02)
  local y = base.scale(0, ticks[#ticks], box.bottom, box.top)
  local mticks = base.ticks(0, math.max(mmax, 1e-3) * 1.02)
  local ym = base.scale(0, mticks[#mticks], box.bottom, box.top)

  local title = "Recompute potentials"
  local note = "each plan recomputes one more layer fully; bars: exposed step time, diamonds: peak memory"
  local doc = svg.doc(W, H, title, note)
  base.heading(doc, title, note)
  base.y_axis(doc, box, ticks, y, "step time (" .. unit .. ")")
  doc:open("g", {class = "memory-axis"})
  doc:line(box.right, box.top, box.right, box.bottom, {stroke = P.axis})
  for _, t in ipairs(mticks) do
    doc:text(box.right + 6, ym(t) + 4, base.short(t), {["font-size"] = 11, fill = P.memory})
  end
  local my = (box.top + box.bottom) / 2
  doc:text(W - 16, my, "peak memory (GiB)", {["text-anchor"] = "middle",
           transform = string.format("rotate(90 %s %s)", svg.num(W - 16), svg.num(my))})
  doc:close()

  local rotate = slot < 30
  doc:open("g", {class = "bars"})
  local group_start, xpos = {}, box.left
  for i, b in ipairs(bars) do
    if i > 1 and bars[i - 1].group ~= b.group then xpos = xpos + gap end
    group_start[b.group] = group_start[b.group] or xpos
    local bw, x0 = slot * 0.7, xpos + slot * 0.15
    local acc = 0
    if b.rec.parts then
      for _, k in ipairs(base.TIME_PARTS) do
        local v = (b.rec.parts[k] or 0) * factor
        if v > 0 then
          doc:rect(x0, y(acc + v), bw, y(acc) - y(acc + v), {fill = base.time_colour(k)},
                   string.format("%s %s: %s", b.label, base.TIME_LABELS[k], base.seconds(v / factor)))
          acc = acc + v
        end
      end
    else
      acc = (b.rec.score or 0) * factor
      doc:rect(x0, y(acc), bw, y(0) - y(acc), {fill = P.forward},
               string.format("%s: %s", b.label, base.seconds(b.rec.score or 0)))
    end
    if b.rec.memory then
      local cx, cy = x0 + bw / 2, ym(b.rec.memory / 1024)
      doc:add("polygon", {points = svg.points({{cx, cy - 5}, {cx + 4, cy}, {cx, cy + 5}, {cx - 4, cy}}),
                          fill = P.memory})
    end
    local lx, ly = x0 + bw / 2, box.bottom + 14
    doc:text(lx, ly, b.label, {["font-size"] = 10, ["text-anchor"] = rotate and "end" or "middle",
      transform = rotate and string.format("rotate(-60 %s %s)", svg.num(lx), svg.num(ly)) or nil})
    b.right = xpos + slot
    xpos = xpos + slot
  end
  doc:close()
  doc:open("g", {class = "groups"})
  for g, group in ipairs(plot_data) do
    local last
    for _, b in ipairs(bars) do if b.group == g then last = b.right end end
    if last then
      local width = last - group_start[g]
      local label = string.format("%d: %s", g, dims_label(group.dimensions))
      local fit = math.max(1, math.floor(width / 6))
      if utf8.len(label) > fit then label = tostring(g) end
      doc:line(group_start[g] + 2, box.bottom + 44, last - 2, box.bottom + 44, {stroke = P.note})
      doc:text((group_start[g] + last) / 2, box.bottom + 58, label, {["text-anchor"] = "middle", ["font-size"] = 10})
    end
  end
  doc:close()

  local items = base.time_items(present)
  items[#items + 1] = {"peak memory", P.memory, kind = "diamond"}
  base.legend(doc, 16, box.bottom + 72, W - 32, items)
  return doc:finish()
end

M.pipeline = function(result) return require("ndplan.out.plots_pipeline").pipeline(result) end

return M
