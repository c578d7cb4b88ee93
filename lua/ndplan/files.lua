-- Reading and writing files the way every ndplan command does: reads return
-- `nil, message` naming the file; writes go to a temporary file renamed into place, so an
-- earlier result is never left half-overwritten.
local M = {}

-- The largest input read (a model config, device file, search config or Megatron script is
-- kilobytes; the largest validation table under a megabyte): what is larger is refused.
M.MAX_INPUT = 256 * 1024 * 1024

-- read(path) -> text | nil, "path: reason". Only a regular file up to MAX_INPUT: a FIFO
-- would block forever, /dev/zero would be read until memory runs out.
function M.read(path)
  return require("ndplan.c.files").read(path, M.MAX_INPUT)
end

-- write_atomic(path, text) -> true | nil, message: write beside the target, then rename.
function M.write_atomic(path, text)
  local tmp = string.format("%s.tmp-%d", path, math.random(1, 1 << 30))
  local f, err = io.open(tmp, "wb")
  if not f then return nil, err end
  local ok, werr = f:write(text)
  local cok, cerr = f:close()
  if not ok or not cok then
    os.remove(tmp)
    return nil, path .. ": " .. tostring(werr or cerr)
  end
  local rok, rerr = os.rename(tmp, path)
  if not rok then
    os.remove(tmp)
    return nil, rerr
  end
  return true
end

-- mkdir_p(dir) -> true | nil, message: the folder and its missing parents.
function M.mkdir_p(dir)
  local cfiles = require "ndplan.c.files"
  if dir == "" or cfiles.kind(dir) == "directory" then return true end
  local parent = dir:match("^(.*[^/])/+[^/]+/*$")
  if parent then
    local ok, err = M.mkdir_p(parent)
    if not ok then return nil, err end
  end
  return cfiles.mkdir(dir)
end

-- kind(path) -> "directory" | "file" | "other" | nil
function M.kind(path) return require("ndplan.c.files").kind(path) end

-- bundled_names(dir, ext) -> sorted base names of the bundled files dir/*.ext (the catalog)
function M.bundled_names(dir, ext)
  local names = {}
  for _, path in ipairs(require("ndplan.c.bundle").list(dir)) do
    local n = path:match("([^/]+)%." .. ext .. "$")
    if n then names[#names + 1] = n end
  end
  table.sort(names)
  return names
end

-- Line and column (both from 1) of byte offset `pos` in `text`.
function M.line_col(text, pos)
  local line, last_nl = 1, 0
  for nl in text:sub(1, pos - 1):gmatch("()\n") do
    line, last_nl = line + 1, nl
  end
  return line, pos - last_nl
end

return M
