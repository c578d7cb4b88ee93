-- A tiny SVG writer whose output is byte-stable: numbers with two decimals at most (trailing
-- zeros trimmed), attributes in one fixed order, one element per line. The same input gives
-- the same bytes on every platform, so specs can compare charts with golden files.
local M = {}

-- num(x) -> text: "%.2f" with trailing zeros and a bare point dropped; "-0" becomes "0".
-- Raises on NaN and infinities: a chart with such a coordinate is a bug upstream.
local floor, tointeger = math.floor, math.tointeger
local halves, nhalves = {}, 0  -- the text of whole and half numbers written so far
function M.num(x)
  local known = halves[x]  -- (a NaN key reads nil)
  if known then return known end
  if type(x) ~= "number" or x ~= x or x == math.huge or x == -math.huge then
    error("svg: not a finite number: " .. tostring(x), 2)
  end
  -- a whole or half number (the charts' half pixels) is exact in binary, so "%.2f" gives
  -- its digits and ".00" or ".50": written directly, without formatting a float, and kept
  -- (a chart writes the same pixel coordinates many times)
  local a = x < 0 and -x or x
  local whole = floor(a)
  if a < 2^51 and (a == whole or a - whole == 0.5) then
    local digits = tostring(tointeger(whole))
    local text
    if a == whole then text = x < 0 and a ~= 0 and "-" .. digits or digits
    else text = (x < 0 and "-" or "") .. digits .. ".5" end
    if nhalves >= 65536 then halves, nhalves = {}, 0 end
    halves[x], nhalves = text, nhalves + 1
    return text
  end
  -- "%.2f" ends in a point and two digits: drop a trailing zero, or both and the point
  local s = string.format("%.2f", x)
  local n = #s
  if s:byte(n) == 48 then s = s:sub(1, s:byte(n - 1) == 48 and n - 3 or n - 1) end
  if s == "-0" then s = "0" end
  return s
end

local ESCAPES = {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
                 ["'"] = "&#39;"}

-- esc(s) -> s with the five XML special characters escaped (text and attribute values)
local find = string.find
function M.esc(s)
  s = tostring(s)
  if find(s, "^[^&<>\"']*$") then return s end  -- most hold none: one pass, nothing built
  return (s:gsub("[&<>\"']", ESCAPES))
end

-- Geometry first, then presentation, then the rest alphabetically: the order never depends
-- on table traversal.
local ORDER = {"id", "class", "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "width",
               "height", "points", "d", "viewBox", "fill", "fill-opacity", "stroke",
               "stroke-width", "stroke-dasharray", "opacity", "font-size", "font-weight",
               "text-anchor", "dominant-baseline", "transform"}
local RANK = {}
for i, k in ipairs(ORDER) do RANK[k] = i end

local function attr_value(v)
  if type(v) == "number" then return M.num(v) end
  return M.esc(v)
end

-- attrs(t) -> ' k="v" ...' in the fixed order; nil values are left out
function M.attrs(t)
  local keys, n = {}, 0
  for k in pairs(t) do n = n + 1; keys[n] = k end
  -- an element has a few: insertion sort by (rank, name), no comparator closure per call
  for i = 2, n do
    local k = keys[i]
    local rk = RANK[k] or math.huge
    local j = i - 1
    while j >= 1 do
      local kj = keys[j]
      local rj = RANK[kj] or math.huge
      if rj < rk or (rj == rk and kj < k) then break end
      keys[j + 1] = kj
      j = j - 1
    end
    keys[j + 1] = k
  end
  local out = {}
  for i = 1, n do
    local k = keys[i]
    out[i] = " " .. k .. '="' .. attr_value(t[k]) .. '"'
  end
  return table.concat(out)
end

-- element(name, attrs [, text]) -> one line: <name .../> or <name ...>text</name>
function M.element(name, attrs, text)
  if text == nil then return "<" .. name .. M.attrs(attrs or {}) .. "/>" end
  return "<" .. name .. M.attrs(attrs or {}) .. ">" .. M.esc(text) .. "</" .. name .. ">"
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

-- add(name, attrs [, text]): one element at the current depth
function Doc:add(name, attrs, text)
  self.lines[#self.lines + 1] = string.rep("  ", self.depth) .. M.element(name, attrs, text)
  return self
end

-- open(name, attrs) / close(): a container (<g>), with an optional <title> tooltip
function Doc:open(name, attrs, tooltip)
  self.lines[#self.lines + 1] = string.rep("  ", self.depth) .. "<" .. name .. M.attrs(attrs or {}) .. ">"
  self.stack = self.stack or {}
  self.stack[#self.stack + 1] = name
  self.depth = self.depth + 1
  if tooltip then self:add("title", {}, tooltip) end
  return self
end

function Doc:close()
  local name = table.remove(self.stack)
  self.depth = self.depth - 1
  self.lines[#self.lines + 1] = string.rep("  ", self.depth) .. "</" .. name .. ">"
  return self
end

-- Shorthands for the shapes the charts use.

-- circle(cx, cy, r): <circle cx= cy= r=/>, the bytes add("circle", {cx =, cy =, r =})
-- writes, without sorting attributes (a chart draws thousands)
function Doc:circle(cx, cy, r)
  self.lines[#self.lines + 1] = string.rep("  ", self.depth) .. '<circle cx="' .. M.num(cx)
    .. '" cy="' .. M.num(cy) .. '" r="' .. M.num(r) .. '"/>'
  return self
end
-- circles(list, r): circle(list[i], list[i + 1], r) for each pair of the list, in order
function Doc:circles(list, r)
  local lines, n, num = self.lines, #self.lines, M.num
  local head, tail = string.rep("  ", self.depth) .. '<circle cx="', '" r="' .. num(r) .. '"/>'
  for i = 1, #list, 2 do
    n = n + 1
    lines[n] = head .. num(list[i]) .. '" cy="' .. num(list[i + 1]) .. tail
  end
  return self
end
function Doc:rect(x, y, w, h, attrs, tooltip)
  local a = {x = x, y = y, width = math.max(0, w), height = math.max(0, h)}
  for k, v in pairs(attrs or {}) do a[k] = v end
  if tooltip then
    self.lines[#self.lines + 1] = string.rep("  ", self.depth) .. "<rect" .. M.attrs(a) .. "><title>"
      .. M.esc(tooltip) .. "</title></rect>"
    return self
  end
  return self:add("rect", a)
end

function Doc:line(x1, y1, x2, y2, attrs)
  local a = {x1 = x1, y1 = y1, x2 = x2, y2 = y2}
  for k, v in pairs(attrs or {}) do a[k] = v end
  return self:add("line", a)
end

function Doc:text(x, y, s, attrs)
  local a = {x = x, y = y}
  for k, v in pairs(attrs or {}) do a[k] = v end
  return self:add("text", a, s)
end

function Doc:finish()
  assert(self.depth == 1, "svg: unclosed element")
  return table.concat(self.lines, "\n") .. "\n</svg>\n"
end

return M
