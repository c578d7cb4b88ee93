-- What every ndplan chart shares: the palette, axis ticks, axes with labels, legends and
-- short number formats. The charts themselves are in ndplan.plots and ndplan.plots_pipeline.
local svg = require "ndplan.out.svg"
local chart = require "ndplan.c.chart"

local M = {}

M.GiB = 2 ^ 30
M.MiB = 2 ^ 20

-- One palette for every chart: a memory part, a time part or a schedule block has the same
-- colour wherever it appears. Colour-blind-safe hues (Okabe-Ito, then Tableau's).
M.PALETTE = {
  weights = "#0072b2", grads = "#56b4e9", optimizer = "#009e73", activations = "#e69f00",
  buffers = "#cc79a7", fragmentation = "#d9d9d9", reserve = "#999999",
  forward = "#0072b2", backward = "#009e73", recompute = "#e69f00", tp_comm = "#d55e00",
  cp_comm = "#cc79a7", ep_comm = "#f0e442", pp_comm = "#56b4e9", dp_comm = "#8c564b",
  optimizer_step = "#7f7f7f", bubble = "#c7c7c7", offload = "#17becf",
  fits = "#0072b2", misses = "#bbbbbb", front = "#d55e00", budget = "#c00000",
  memory = "#333333", axis = "#333333", grid = "#e5e5e5", text = "#222222", note = "#555555",
}

local NAMES = require("ndplan.c.estimate").names()
M.MEMORY_PARTS = NAMES.memory_parts
M.MEMORY_LABELS = {weights = "weights", grads = "gradients", optimizer = "optimizer states",
                   activations = "activations", buffers = "buffers",
                   fragmentation = "allocator slack", reserve = "runtime reserve"}
M.TIME_PARTS = NAMES.time_parts
M.TIME_LABELS = {forward = "forward", backward = "backward", recompute = "recompute",
                 tp_comm = "TP comm", cp_comm = "CP comm", ep_comm = "EP comm",
                 pp_comm = "PP comm", dp_comm = "DP comm", optimizer = "optimizer step",
                 bubble = "pipeline bubble", offload = "offload"}

-- colour of a time part ("optimizer" means the step here, not the states' memory)
function M.time_colour(part)
  if part == "optimizer" then return M.PALETTE.optimizer_step end
  return M.PALETTE[part]
end

-- The legend items of the time parts a chart drew (present: part -> true), in TIME_PARTS order.
function M.time_items(present)
  local items = {}
  for _, k in ipairs(M.TIME_PARTS) do
    if present[k] then items[#items + 1] = {M.TIME_LABELS[k], M.time_colour(k)} end
  end
  return items
end

function M.finite(x)
  return type(x) == "number" and x - x == 0  -- NaN and the infinities give NaN
end

-- short(x) -> a number in at most 4 significant digits, no exponent below 1e6
function M.short(x)
  if x == 0 then return "0" end
  local a = math.abs(x)
  if a >= 1e6 or a < 1e-3 then return (string.format("%.3g", x)) end
  local s = string.format(a >= 100 and "%.0f" or a >= 10 and "%.1f" or a >= 1 and "%.2f" or "%.3f", x)
  if s:find("%.") then s = s:gsub("0+$", ""):gsub("%.$", "") end
  return s
end

-- seconds(t) -> "12.3 s", "45.6 ms", "7.8 µs"
function M.seconds(t)
  local a = math.abs(t)
  if a >= 1 or a == 0 then return M.short(t) .. " s" end
  if a >= 1e-3 then return M.short(t * 1e3) .. " ms" end
  return M.short(t * 1e6) .. " µs"
end

-- time_unit(max_s) -> factor, name: seconds unless the whole axis is under one second
function M.time_unit(max_s)
  if max_s < 1e-3 then return 1e6, "µs" end
  if max_s < 1 then return 1e3, "ms" end
  return 1, "s"
end

-- ticks(lo, hi [, n]) -> array of round values covering [lo, hi] with about n intervals;
-- steps of 1, 2, 2.5 or 5 times a power of ten. The last tick is >= hi.
-- An axis from lo to hi: finite numbers (an infinite or NaN end made the tick loops below run
-- forever, growing memory: issue 17's report with an infinite budget).
local function finite_axis(lo, hi)
  if not (type(lo) == "number" and type(hi) == "number" and lo - lo == 0 and hi - hi == 0) then
    error(string.format("plots: an axis from %s to %s: expected finite numbers", tostring(lo),
                        tostring(hi)), 3)
  end
end

function M.ticks(lo, hi, n)
  finite_axis(lo, hi)
  n = n or 5
  if hi <= lo then hi = lo + 1 end
  local raw = (hi - lo) / n
  local mag = 10 ^ math.floor(math.log(raw, 10))
  local step = mag * 10
  for _, f in ipairs({1, 2, 2.5, 5, 10}) do
    if f * mag >= raw * (1 - 1e-9) then step = f * mag; break end
  end
  local first = math.floor(lo / step + 1e-9) * step
  local out, v, i = {}, first, 0
  repeat
    v = first + i * step
    out[#out + 1] = v
    i = i + 1
  until v >= hi - step * 1e-9
  return out
end

-- log_ticks(lo, hi) -> 1, 2, 5 times powers of ten from below lo to above hi (lo > 0)
function M.log_ticks(lo, hi)
  finite_axis(lo, hi)
  if not (lo > 0) then error("plots: a log axis from " .. lo .. ": expected above 0", 2) end
  local out = {}
  local e = math.floor(math.log(lo, 10))
  while true do
    for _, f in ipairs({1, 2, 5}) do
      local v = f * 10 ^ e
      if v >= hi then
        if #out == 0 or out[#out] < hi then out[#out + 1] = v end
        return out
      end
      if v * 2.5 > lo or #out > 0 then out[#out + 1] = v end
    end
    e = e + 1
  end
end

-- scale(d0, d1, r0, r1) -> a linear map of [d0, d1] onto [r0, r1]; log_scale: the same
-- over log10 (d0, d1 above 0). In C (ndplan.c.chart), where the candidates chart places
-- its thousands of dots with them.
M.scale = chart.scale
M.log_scale = chart.log_scale

-- The chart's heading (top left) and an optional note under it.
function M.heading(doc, title, note)
  doc:text(16, 24, title, {["font-size"] = 15, ["font-weight"] = "bold", fill = M.PALETTE.text})
  if note then doc:text(16, 42, note, {["font-size"] = 11, fill = M.PALETTE.note}) end
end

-- y_axis(doc, box, ticks, y, label, fmt): gridlines, tick labels on the left, the label
-- rotated along the axis. box = {left, top, right, bottom}.
function M.y_axis(doc, box, ticks, y, label, fmt)
  doc:open("g", {class = "y-axis"})
  for _, t in ipairs(ticks) do
    local py = y(t)
    doc:line(box.left, py, box.right, py, {stroke = M.PALETTE.grid})
    doc:text(box.left - 6, py + 4, (fmt or M.short)(t), {["text-anchor"] = "end", ["font-size"] = 11})
  end
  doc:line(box.left, box.top, box.left, box.bottom, {stroke = M.PALETTE.axis})
  local cy = (box.top + box.bottom) / 2
  doc:text(18, cy, label, {["text-anchor"] = "middle",
                           transform = string.format("rotate(-90 18 %s)", svg.num(cy))})
  doc:close()
end

-- x_axis(doc, box, ticks, x, label, fmt): vertical gridlines, tick labels under the axis
function M.x_axis(doc, box, ticks, x, label, fmt)
  doc:open("g", {class = "x-axis"})
  for _, t in ipairs(ticks) do
    local px = x(t)
    doc:line(px, box.top, px, box.bottom, {stroke = M.PALETTE.grid})
    doc:text(px, box.bottom + 16, (fmt or M.short)(t), {["text-anchor"] = "middle", ["font-size"] = 11})
  end
  doc:line(box.left, box.bottom, box.right, box.bottom, {stroke = M.PALETTE.axis})
  doc:text((box.left + box.right) / 2, box.bottom + 34, label, {["text-anchor"] = "middle"})
  doc:close()
end

-- legend(doc, x, y, width, items) -> the y under the legend. items = {{label, colour
-- [, kind = "line"|"dot"|"dash"|"diamond"|"none"]}} (a swatch by default); wraps onto more
-- rows when the width runs out.
function M.legend(doc, x, y, width, items)
  doc:open("g", {class = "legend"})
  local cx, cy = x, y
  for _, it in ipairs(items) do
    local w = (it.kind == "none" and 0 or 22) + 6.5 * utf8.len(it[1]) + 14
    if cx + w > x + width and cx > x then cx, cy = x, cy + 18 end
    if it.kind == "line" or it.kind == "dash" then
      doc:line(cx, cy + 5, cx + 16, cy + 5, {stroke = it[2], ["stroke-width"] = 2,
                                             ["stroke-dasharray"] = it.kind == "dash" and "5,3" or nil})
    elseif it.kind == "dot" then
      doc:add("circle", {cx = cx + 8, cy = cy + 5, r = 4, fill = it[2]})
    elseif it.kind == "diamond" then
      doc:add("polygon", {points = svg.points({{cx + 8, cy}, {cx + 12, cy + 5}, {cx + 8, cy + 10},
                                               {cx + 4, cy + 5}}), fill = it[2]})
    elseif it.kind ~= "none" then  -- "none": the text alone
      doc:rect(cx, cy, 16, 10, {fill = it[2]})
    end
    doc:text(it.kind == "none" and cx or cx + 22, cy + 10, it[1], {["font-size"] = 11})
    cx = cx + w
  end
  doc:close()
  return cy + 18
end

-- int(v) -> "8" for 8 and 8.0 (JSON decoders give floats)
function M.int(v)
  return tostring(math.tointeger(v) or v)
end

-- strategy_label(strategy) -> "dp2 tp8 pp4 sp z1 mbs1 mb256 selective": only what is not 1
-- or off, so labels stay short
function M.strategy_label(s)
  if type(s) ~= "table" then return "?" end
  local out = {}
  for _, k in ipairs({"dp", "tp", "pp", "vpp", "cp", "ep", "etp"}) do
    local v = s[k]
    if k == "dp" or (type(v) == "number" and v > 1) then out[#out + 1] = k .. M.int(v or 1) end
  end
  if s.sp then out[#out + 1] = "sp" end
  if type(s.zero) == "number" and s.zero > 0 then out[#out + 1] = "z" .. M.int(s.zero) end
  if s.mbs then out[#out + 1] = "mbs" .. M.int(s.mbs) end
  if s.mb then out[#out + 1] = "mb" .. M.int(s.mb) end
  if s.recompute and s.recompute ~= "none" then out[#out + 1] = tostring(s.recompute) end
  -- vpp > 1 already says interleaved
  if s.schedule and s.schedule ~= "1f1b" and not (s.schedule == "interleaved" and (s.vpp or 1) > 1) then
    out[#out + 1] = tostring(s.schedule)
  end
  return table.concat(out, " ")
end

return M
