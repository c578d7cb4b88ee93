-- JSON through lua-cjson, with errors that name the file, line and column.
local cjson = require "cjson.safe"
local files = require "ndplan.io.files"

local M = {}

-- decode(text, name) -> value | nil, "name:line:col: message"
function M.decode(text, name)
  if text:sub(1, 3) == "\239\187\191" then text = text:sub(4) end  -- a UTF-8 byte order mark
  local value, err = cjson.decode(text)
  if value ~= nil or err == nil then return value end
  local pos = tonumber(err:match("at character (%d+)")) or 1
  local line, col = files.line_col(text, pos)
  local what = err:gsub(" at character %d+$", "")
  return nil, string.format("%s:%d:%d: invalid JSON: %s", name or "(json)", line, col, what)
end

-- load_file(path) -> value | nil, message
function M.load_file(path)
  local text, err = files.read(path)
  if not text then return nil, err end
  return M.decode(text, path)
end

M.null = cjson.null
M.MAX_DEPTH = 200  -- nesting of an encoded value (deeper: a cycle, or not a document)

-- The one JSON writer of ndplan: every document is the same bytes from run to run. Object
-- keys are sorted (Lua's table order is not stable; lua-cjson follows it), unless the object
-- is M.object{{key, value}, ...}, which keeps the order given (for files people read). By
-- default numbers keep 17 significant digits, so figures round-trip; {shortest = true}
-- writes each in the fewest digits (15 to 17) that read back to the same double. NaN and
-- infinities are null. {indent = "  "} puts each member of an object or array on its own
-- line; the default is compact.
local ORDERED = {__name = "ndplan.json.object"}

-- object(members) -> an object that encodes its {key, value} pairs in the order given
function M.object(members) return setmetatable(members, ORDERED) end

-- shortest(x) -> the text of a finite number: integral values without a fraction, others
-- in the fewest significant digits (15 to 17) that read back exactly (ndplan.c.units)
M.shortest = require("ndplan.c.units").shortest

local function number(v, shortest)
  if v ~= v or v == math.huge or v == -math.huge then return "null" end
  if shortest then return M.shortest(v) end
  if math.type(v) == "integer" then return string.format("%d", v) end
  if v == math.floor(v) and math.abs(v) < 2^53 then return string.format("%.0f", v) end
  return string.format("%.17g", v)
end

local NAMED = {['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\t'] = '\\t', ['\r'] = '\\r'}
local function escape(c) return NAMED[c] or string.format("\\u%04x", c:byte()) end
local function encode(v, out, depth, opts)
  local t = type(v)
  if depth > M.MAX_DEPTH then
    error(string.format("json.encode: nested deeper than %d (a cycle?)", M.MAX_DEPTH), 0)
  end
  if v == nil or v == M.null then out[#out + 1] = "null"
  elseif t == "boolean" then out[#out + 1] = tostring(v)
  elseif t == "number" then out[#out + 1] = number(v, opts.shortest)
  elseif t == "string" then
    -- most strings need no escape: found first, gsub only when one does
    if v:find('[%c"\\]') then out[#out + 1] = '"' .. v:gsub('[%c"\\]', escape) .. '"'
    else out[#out + 1] = '"' .. v .. '"' end
  elseif t == "table" then
    local ordered, n, keys = getmetatable(v) == ORDERED, #v, nil
    local array = not ordered and (n > 0 or next(v) == nil)
    if not ordered and not array then  -- a plain object: its keys sorted
      keys = {}
      for k in pairs(v) do keys[#keys + 1] = tostring(k) end
      table.sort(keys)
      n = #keys
    end
    if n == 0 then out[#out + 1] = array and "[]" or "{}"; return end
    local inner = opts.indent and "\n" .. string.rep(opts.indent, depth + 1)
    out[#out + 1] = array and "[" or "{"
    for i = 1, n do
      if i > 1 then out[#out + 1] = "," end
      if inner then out[#out + 1] = inner end
      local key, val
      if ordered then key, val = v[i][1], v[i][2]
      elseif keys then
        key, val = keys[i], v[keys[i]]
        if val == nil then val = v[math.tointeger(tonumber(key))] end
      else val = v[i] end
      if key ~= nil then
        encode(tostring(key), out, depth + 1, opts)
        out[#out + 1] = inner and ": " or ":"
      end
      encode(val, out, depth + 1, opts)
    end
    if inner then out[#out + 1] = "\n" .. string.rep(opts.indent, depth) end
    out[#out + 1] = array and "]" or "}"
  else
    error("json.encode: cannot encode a " .. t, 0)
  end
end

-- encode(value [, {shortest =, indent =}]) -> JSON text
function M.encode(value, opts)
  local out = {}
  encode(value, out, 0, opts or {})
  return table.concat(out)
end

return M
