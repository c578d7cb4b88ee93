-- The pipeline timeline of one nd.estimate result: rows are stages, blocks are forward (F),
-- recompute (R) and backward (B) passes of each micro-batch, placed by simulating the
-- schedule's order on each stage with its data dependencies between stages.
local svg = require "ndplan.out.svg"
local base = require "ndplan.out.plots_base"
local warmup = require("ndplan.c.estimate").warmup  -- the core's rule (nd_pipeline_warmup)

local M = {}
local P = base.PALETTE

-- Per stage, the order in which it runs its passes: {kind = "F"|"B", mb, chunk} (from 0).
local function order_1f1b(p, m, s)
  local ops = {}
  local warm = warmup("1f1b", p, 1, m, s)
  for i = 0, warm - 1 do ops[#ops + 1] = {kind = "F", mb = i, chunk = 0} end
  for i = 0, m - warm - 1 do
    ops[#ops + 1] = {kind = "F", mb = warm + i, chunk = 0}
    ops[#ops + 1] = {kind = "B", mb = i, chunk = 0}
  end
  for i = m - warm, m - 1 do ops[#ops + 1] = {kind = "B", mb = i, chunk = 0} end
  return ops
end

local function order_gpipe(_, m)
  local ops = {}
  for i = 0, m - 1 do ops[#ops + 1] = {kind = "F", mb = i, chunk = 0} end
  for i = 0, m - 1 do ops[#ops + 1] = {kind = "B", mb = i, chunk = 0} end
  return ops
end

-- Megatron's interleaved order: virtual micro-batch k runs chunk (k mod pv) div p of
-- micro-batch (k div pv)·p + k mod p (backward: the chunks in reverse); warm-up of
-- (p − s − 1)·2 + (v − 1)·p forwards. Needs m to be a multiple of p.
local function order_interleaved(p, m, s, v)
  local total = m * v
  local function virtual(k, kind)
    local c = (k % (p * v)) // p
    if kind == "B" then c = v - 1 - c end
    return {kind = kind, mb = (k // (p * v)) * p + k % p, chunk = c}
  end
  local ops = {}
  local warm = warmup("interleaved", p, v, m, s)
  for k = 0, warm - 1 do ops[#ops + 1] = virtual(k, "F") end
  for j = 0, total - warm - 1 do
    ops[#ops + 1] = virtual(warm + j, "F")
    ops[#ops + 1] = virtual(j, "B")
  end
  for k = total - warm, total - 1 do ops[#ops + 1] = virtual(k, "B") end
  return ops
end

-- The pass a pass waits for: the previous stage's forward of the same chunk (or the last
-- stage's forward of the previous chunk), the next stage's backward likewise.
local function dependency(op, s, p, v)
  if op.kind == "F" then
    if s > 0 then return "F", s - 1, op.chunk end
    if op.chunk > 0 then return "F", p - 1, op.chunk - 1 end
    return nil
  end
  if s < p - 1 then return "B", s + 1, op.chunk end
  if op.chunk < v - 1 then return "B", 0, op.chunk + 1 end
  return "F", p - 1, v - 1
end

local function key(kind, s, chunk, mb) return kind .. ":" .. s .. ":" .. chunk .. ":" .. mb end

-- simulate(orders, p, v, durations) -> blocks, end_time, complete. durations[s] =
-- {F, R, B} per pass of one chunk. Each stage runs its passes in order, each as soon as
-- the stage is free and the pass it waits for has ended.
function M.simulate(orders, p, v, durations)
  local done, blocks = {}, {}
  local ptr, free = {}, {}
  for s = 0, p - 1 do ptr[s], free[s] = 1, 0 end
  local left = 0
  for s = 0, p - 1 do left = left + #orders[s] end
  local finish = 0
  repeat
    local progress = false
    for s = 0, p - 1 do
      local ops = orders[s]
      while ptr[s] <= #ops do
        local op = ops[ptr[s]]
        local dk, ds, dc = dependency(op, s, p, v)
        local ready = 0
        if dk then
          ready = done[key(dk, ds, dc, op.mb)]
          if ready == nil then break end
        end
        local d = durations[s + 1]
        local start = math.max(free[s], ready)
        local length = op.kind == "F" and d.F or (d.R + d.B)
        blocks[#blocks + 1] = {stage = s, kind = op.kind, mb = op.mb, chunk = op.chunk,
                               start = start, recompute = op.kind == "B" and d.R or 0,
                               length = length}
        free[s] = start + length
        done[key(op.kind, s, op.chunk, op.mb)] = free[s]
        finish = math.max(finish, free[s])
        ptr[s] = ptr[s] + 1
        left = left - 1
        progress = true
      end
    end
  until left == 0 or not progress
  return blocks, finish, left == 0
end

local NOTES = {
  zb = "ZB-H1 drawn as 1F1B: the weight-gradient passes that fill the cool-down are not split out",
  dualpipe = "DualPipe drawn as 1F1B: its two-way schedule and overlapped chunks are not drawn",
}

M.MAX_ROWS = 24          -- more stages than this: every k-th stage (and the last) drawn
M.MAX_ROW_BLOCKS = 140   -- passes per row beyond which fewer micro-batches are laid out
M.MAX_TOOLTIPS = 1500    -- more blocks than this: no per-block tooltip (keeps the file small)

-- layout(result) -> the simulated schedule: {blocks = {{stage, kind, mb, chunk, start,
-- recompute, length}}, finish, complete, p, v, m, shown, schedule, durations}. result: an
-- nd.estimate result (strategy.pp, mb, vpp, schedule; stages[] with forward_s, backward_s,
-- recompute_s, comm_s per micro-batch). A stage's communication is split between its
-- forward and backward in proportion to their compute. At most 2·pp + 2 micro-batches are
-- laid out (2·pp when interleaved), enough for the warm-up, steady phase and cool-down;
-- fewer (pp + 2, or pp interleaved) when a row would hold more than MAX_ROW_BLOCKS passes.
function M.layout(result)
  local s = result.strategy or {}
  local stages = result.stages or {}
  local p = math.max(1, math.tointeger(s.pp or #stages) or #stages)
  local m = math.max(1, math.tointeger(s.mb or 1) or 1)
  local v = math.max(1, math.tointeger(s.vpp or 1) or 1)
  local schedule = s.schedule or (v > 1 and "interleaved" or "1f1b")
  local shown
  if schedule == "interleaved" and v > 1 and m % p == 0 then
    shown = math.min(m, 2 * p)
    if 2 * shown * v > M.MAX_ROW_BLOCKS then shown = p end
  else
    v = 1  -- only the interleaved schedule runs chunks; without m = k·p it is drawn as 1F1B
    shown = math.min(m, 2 * p + 2)
    if 2 * shown > M.MAX_ROW_BLOCKS then shown = math.min(m, math.max(p + 2, M.MAX_ROW_BLOCKS // 2)) end
  end
  local durations = {}
  for i = 1, p do
    local st = stages[i] or stages[#stages] or {}
    local f, b = st.forward_s or 0, st.backward_s or 0
    local comm = st.comm_s or 0
    local share = (f + b) > 0 and f / (f + b) or 0.5
    durations[i] = {F = (f + comm * share) / v, B = (b + comm * (1 - share)) / v,
                    R = (st.recompute_s or 0) / v}
  end
  local orders = {}
  for st = 0, p - 1 do
    if schedule == "gpipe" then orders[st] = order_gpipe(p, shown)
    elseif v > 1 then orders[st] = order_interleaved(p, shown, st, v)
    else orders[st] = order_1f1b(p, shown, st) end
  end
  local blocks, finish, complete = M.simulate(orders, p, v, durations)
  return {blocks = blocks, finish = finish, complete = complete, p = p, v = v, m = m,
          shown = shown, schedule = schedule, durations = durations}
end

-- pipeline(result) -> svg: the layout drawn, one row per stage (every k-th stage and the
-- last past MAX_ROWS); the caption says when the steady phase or the stages are cut short.
function M.pipeline(result)
  local lay = M.layout(result)
  local blocks, finish, complete = lay.blocks, lay.finish, lay.complete
  local p, v, m, shown, schedule, durations = lay.p, lay.v, lay.m, lay.shown, lay.schedule, lay.durations
  local every = math.ceil(p / M.MAX_ROWS)
  local row_of, drawn = {}, {}  -- stage -> row (from 0), and the stages drawn
  for st = 0, p - 1 do
    if st % every == 0 or st == p - 1 then
      row_of[st] = #drawn
      drawn[#drawn + 1] = st
    end
  end
  local rows = #drawn
  local row_h = math.max(8, math.min(28, math.floor(360 / rows)))
  local W = 900
  local box = {left = 70, top = 80, right = W - 24, bottom = 80 + rows * row_h}
  local H = box.bottom + 100
  local factor, unit = base.time_unit(math.max(finish, 1e-9))
  -- the timeline spans the whole width; ticks past its end are dropped
  local span = math.max(finish * factor, 1e-9)
  local ticks = {}
  for _, t in ipairs(base.ticks(0, span, 8)) do
    if t <= span * (1 + 1e-9) then ticks[#ticks + 1] = t end
  end
  local x = base.scale(0, span, box.left, box.right)

  local names = {["1f1b"] = "1F1B", interleaved = "interleaved 1F1B", gpipe = "GPipe",
                 zb = "ZB-H1", dualpipe = "DualPipe"}
  local title = string.format("Pipeline schedule: %s, %d stages%s", names[schedule] or schedule, p,
                              v > 1 and string.format(", %d chunks each", v) or "")
  local notes = {}
  if shown < m then
    notes[#notes + 1] = string.format("first %d of %d micro-batches (… the steady phase repeats)", shown, m)
  else
    notes[#notes + 1] = string.format("%d micro-batches", m)
  end
  local bubble = (result.time_parts_s or {}).bubble
  if bubble and result.step_time_s then
    notes[#notes + 1] = string.format("estimated bubble %s of a %s step", base.seconds(bubble),
                                      base.seconds(result.step_time_s))
  end
  if NOTES[schedule] then notes[#notes + 1] = NOTES[schedule] end
  if schedule == "interleaved" and v == 1 then
    notes[#notes + 1] = "drawn as 1F1B: the interleaved order needs the micro-batches to be a multiple of pp"
  end
  if not complete then notes[#notes + 1] = "the order deadlocked: drawn up to where it stopped" end
  if rows < p then notes[#notes + 1] = string.format("1 stage in %d and the last drawn (%d of %d)", every, rows, p) end
  local doc = svg.doc(W, H, title, table.concat(notes, "; "))
  base.heading(doc, title, notes[1] .. (notes[2] and "; " .. notes[2] or ""))
  if notes[3] then doc:text(16, 58, table.concat(notes, "; ", 3), {["font-size"] = 11, fill = P.note}) end
  base.x_axis(doc, box, ticks, x, "time within the step (" .. unit .. "); data-parallel reduction and optimizer step not drawn")

  doc:open("g", {class = "stages"})
  for row, st in ipairs(drawn) do
    doc:text(box.left - 8, box.top + (row - 1) * row_h + row_h / 2 + 4, "stage " .. st,
             {["text-anchor"] = "end", ["font-size"] = math.min(11, row_h - 1)})
  end
  doc:close()

  local count = 0
  for _, b in ipairs(blocks) do
    if row_of[b.stage] then count = count + 1 end
  end
  local tooltips = count <= M.MAX_TOOLTIPS
  -- a white outline, set once on the group, separates neighbouring blocks; when a row holds
  -- so many passes that blocks are a few pixels wide, it would wash their colours out
  local block_px = (box.right - box.left) / (2 * shown * v + p)
  doc:open("g", {class = "blocks", stroke = block_px >= 4 and "#ffffff" or nil,
                 ["stroke-width"] = block_px >= 4 and 0.5 or nil,
                 ["shape-rendering"] = block_px < 4 and "crispEdges" or nil})
  for _, b in ipairs(blocks) do
    local row = row_of[b.stage]
    if row then
      local y0, h = box.top + row * row_h + 1, row_h - 2
      local opacity = v > 1 and 1 - 0.45 * b.chunk / (v - 1) or nil
      local x0 = x(b.start * factor)
      local tip = tooltips and string.format("stage %d %s micro-batch %d%s: %s", b.stage,
                                             b.kind == "F" and "forward" or "backward", b.mb + 1,
                                             v > 1 and (" chunk " .. b.chunk) or "",
                                             base.seconds(b.length)) or nil
      if b.recompute > 0 then
        local xr = x((b.start + b.recompute) * factor)
        doc:rect(x0, y0, xr - x0, h, {fill = P.recompute, ["fill-opacity"] = opacity}, tip)
        x0 = xr
      end
      local x1 = x((b.start + b.length) * factor)
      doc:rect(x0, y0, x1 - x0, h, {fill = b.kind == "F" and P.forward or P.backward,
                                    ["fill-opacity"] = opacity}, tip)
      if x1 - x0 >= 14 and h >= 10 then
        doc:text((x0 + x1) / 2, y0 + h / 2 + 4, tostring(b.mb + 1),
                 {["text-anchor"] = "middle", ["font-size"] = math.min(10, h - 2), fill = "#ffffff",
                  stroke = "none"})
      end
    end
  end
  doc:close()
  if shown < m then
    doc:text((box.left + box.right) / 2, box.top - 6, "…", {["text-anchor"] = "middle", ["font-size"] = 16})
  end

  local items = {{"forward (F)", P.forward}, {"backward (B)", P.backward}}
  for _, d in ipairs(durations) do
    if d.R > 0 then items[#items + 1] = {"recompute (R)", P.recompute}; break end
  end
  if v > 1 then items[#items + 1] = {"lighter: later model chunks", "#9ecae1"} end
  items[#items + 1] = {"number in a block: micro-batch", "#ffffff", kind = "none"}
  base.legend(doc, box.left, box.bottom + 52, box.right - box.left, items)
  return doc:finish()
end

return M
