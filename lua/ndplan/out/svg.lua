-- A tiny SVG writer whose output is byte-stable: numbers with two decimals at most (trailing
-- zeros trimmed), attributes in one fixed order, one element per line. The same input gives
-- the same bytes on every platform, so specs can compare charts with golden files.
local M = {}
local c = require "ndplan.c.svg"  -- the rules: numbers, escapes, attribute order (lsvg.c)

-- num(x) -> text: "%.2f" with trailing zeros and a bare point dropped; "-0" becomes "0".
-- Raises on NaN and infinities: a chart with such a coordinate is a bug upstream.
M.num = c.num

-- esc(s) -> tostring(s) with the five XML special characters escaped (text and attribute
-- values)
M.esc = c.esc

-- attrs(t [, more]) -> ' k="v" ...' for the attributes of t and more (more's values win):
-- geometry first, then presentation, then the rest alphabetically, so the order never
-- depends on table traversal; nil values are left out
M.attrs = c.attrs

local tag = c.tag

-- element(name, attrs [, text]) -> one line: <name .../> or <name ...>text</name>
function M.element(name, attrs, text)
  return tag("", name, attrs, nil, text)
end

-- points(list) -> "x1,y1 x2,y2 ..." for polyline/polygon, list = {{x, y}, ...}
function M.points(list)
  local out = {}
  for i, p in ipairs(list) do out[i] = M.num(p[1]) .. "," .. M.num(p[2]) end
  return table.concat(out, " ")
end

---------------------------------------------------------------------------------------------
-- A document: elements appended in drawing order, closed by finish().
---------------------------------------------------------------------------------------------
local Doc = {}
Doc.__index = Doc

-- doc(width, height, title [, description]) -> a document with fixed width/height, a viewBox,
-- a <title> (what screen readers and browsers' tooltips show) and a white background.
function M.doc(width, height, title, description)
  local d = setmetatable({lines = {}, depth = 1, width = width, height = height}, Doc)
  d.lines[1] = '<svg xmlns="http://www.w3.org/2000/svg"' .. M.attrs({
    width = width, height = height, viewBox = string.format("0 0 %s %s", M.num(width), M.num(height)),
    ["font-family"] = "DejaVu Sans, Liberation Sans, Arial, sans-serif", ["font-size"] = 12,
  }) .. ">"
  d:add("title", {}, title)
  if description then d:add("desc", {}, description) end
  d:add("rect", {x = 0, y = 0, width = width, height = height, fill = "#ffffff"})
  return d
end

-- The indent of each depth, made once.
local INDENT = setmetatable({}, {__index = function(t, depth)
  local s = string.rep("  ", depth)
  t[depth] = s
  return s
end})

-- add(name, attrs [, text [, more]]): one element at the current depth (more: attributes
-- whose values win over attrs')
function Doc:add(name, attrs, text, more)
  self.lines[#self.lines + 1] = tag(INDENT[self.depth], name, attrs, more, text)
  return self
end

-- open(name, attrs) / close(): a container (<g>), with an optional <title> tooltip
function Doc:open(name, attrs, tooltip)
  self.lines[#self.lines + 1] = INDENT[self.depth] .. "<" .. name .. M.attrs(attrs or {}) .. ">"
  self.stack = self.stack or {}
  self.stack[#self.stack + 1] = name
  self.depth = self.depth + 1
  if tooltip then self:add("title", {}, tooltip) end
  return self
end

function Doc:close()
  local name = table.remove(self.stack)
  self.depth = self.depth - 1
  self.lines[#self.lines + 1] = INDENT[self.depth] .. "</" .. name .. ">"
  return self
end

-- Shorthands for the shapes the charts use.

-- circle(cx, cy, r): <circle cx= cy= r=/>, the bytes add("circle", {cx =, cy =, r =})
-- writes, without sorting attributes (a chart draws thousands)
function Doc:circle(cx, cy, r)
  self.lines[#self.lines + 1] = INDENT[self.depth] .. '<circle cx="' .. M.num(cx)
    .. '" cy="' .. M.num(cy) .. '" r="' .. M.num(r) .. '"/>'
  return self
end
-- circles(list, r): circle(list[i], list[i + 1], r) for each pair of the list, in order (one
-- string of lines, written by the binding)
function Doc:circles(list, r)
  local text = c.circles(INDENT[self.depth], list, r)
  if text then self.lines[#self.lines + 1] = text end
  return self
end
-- rect(x, y, w, h [, attrs [, tooltip]]): a tooltip is the rect's <title> child
local max = math.max
function Doc:rect(x, y, w, h, attrs, tooltip)
  self.lines[#self.lines + 1] = tag(INDENT[self.depth], "rect",
    {x = x, y = y, width = max(0, w), height = max(0, h)}, attrs, tooltip,
    tooltip and "title" or nil)
  return self
end

function Doc:line(x1, y1, x2, y2, attrs)
  return self:add("line", {x1 = x1, y1 = y1, x2 = x2, y2 = y2}, nil, attrs)
end

function Doc:text(x, y, s, attrs)
  return self:add("text", {x = x, y = y}, s, attrs)
end

function Doc:finish()
  assert(self.depth == 1, "svg: unclosed element")
  return table.concat(self.lines, "\n") .. "\n</svg>\n"
end

return M
