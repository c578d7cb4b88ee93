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

-- raw(text) -> a value that encodes as `text` itself: JSON this writer wrote before (e.g.
-- encode(x, opts) of a part a document repeats), written again without encoding it again
local RAW = {__name = "ndplan.json.raw"}
function M.raw(text)
  if type(text) ~= "string" then error("json.raw: expected a string", 2) end
  return setmetatable({text}, RAW)
end

-- shortest(x) -> the text of a finite number: integral values without a fraction, others
-- in the fewest significant digits (15 to 17) that read back exactly (ndplan.c.units)
M.shortest = require("ndplan.c.units").shortest

-- The writing itself is C (ndplan.c.json: engine/bind/ljson.c has the rules); it reads the
-- value as Lua does, metamethods included, so lazy result tables write what pairs shows.
local write = require("ndplan.c.json").encode

-- encode(value [, {shortest =, indent =}]) -> JSON text
function M.encode(value, opts)
  opts = opts or {}
  return write(value, ORDERED, M.null, M.MAX_DEPTH, opts.shortest, opts.indent, RAW)
end

return M
