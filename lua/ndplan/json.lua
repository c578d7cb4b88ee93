-- JSON through lua-cjson, with errors that name the file, line and column.
local cjson = require "cjson.safe"
local files = require "ndplan.files"

local M = {}

-- decode(text, name) -> value | nil, "name:line:col: message"
function M.decode(text, name)
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

-- encode(value) -> text. Numbers keep 14 significant digits (lua-cjson's limit): use it for
-- documents, not for figures that must round-trip exactly.
function M.encode(value)
  return (cjson.encode(value))
end

M.null = cjson.null

return M
