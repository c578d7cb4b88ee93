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

-- encode(value) -> JSON text with object keys sorted, so that a document is the same bytes
-- from run to run (Lua's table order is not; lua-cjson follows it); numbers keep 17
-- significant digits, so figures round-trip; NaN and infinities are null.
local NAMED = {['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\t'] = '\\t', ['\r'] = '\\r'}
local function encode(v, out, depth)
  local t = type(v)
  if depth > M.MAX_DEPTH then
    error(string.format("json.encode: nested deeper than %d (a cycle?)", M.MAX_DEPTH), 0)
  end
  if v == nil or v == M.null then out[#out + 1] = "null"
  elseif t == "boolean" then out[#out + 1] = tostring(v)
  elseif t == "number" then
    if math.type(v) == "integer" then out[#out + 1] = string.format("%d", v)
    elseif v ~= v or v == math.huge or v == -math.huge then out[#out + 1] = "null"
    elseif v == math.floor(v) and math.abs(v) < 2^53 then out[#out + 1] = string.format("%.0f", v)
    else out[#out + 1] = string.format("%.17g", v) end
  elseif t == "string" then
    out[#out + 1] = '"' .. v:gsub('[%c"\\]', function(c)
      return NAMED[c] or string.format("\\u%04x", c:byte())
    end) .. '"'
  elseif t == "table" then
    local n = #v
    if n > 0 or next(v) == nil then
      out[#out + 1] = "["
      for i = 1, n do
        if i > 1 then out[#out + 1] = "," end
        encode(v[i], out, depth + 1)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do keys[#keys + 1] = tostring(k) end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        encode(k, out, depth + 1)
        out[#out + 1] = ":"
        local val = v[k]
        if val == nil then val = v[math.tointeger(tonumber(k))] end
        encode(val, out, depth + 1)
      end
      out[#out + 1] = "}"
    end
  else
    error("json.encode: cannot encode a " .. t, 0)
  end
end

function M.encode(value)
  local out = {}
  encode(value, out, 0)
  return table.concat(out)
end

return M
