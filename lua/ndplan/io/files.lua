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
-- The temporary is removed on every way out (a failure, Ctrl-C, SIGTERM: ndplan.c.files.temp).
function M.write_atomic(path, text)
  local cfiles = require "ndplan.c.files"
  local tmp = string.format("%s.tmp-%d", path, math.random(1, 1 << 30))
  cfiles.temp(tmp)
  local function fail(msg)
    os.remove(tmp)
    cfiles.untemp(tmp)
    return nil, msg
  end
  local f, err = io.open(tmp, "wb")
  local function reason(e)  -- io's messages name the temporary; ours name the target
    e = tostring(e)
    return e:sub(1, #tmp + 2) == tmp .. ": " and e:sub(#tmp + 3) or e
  end
  if not f then return fail(path .. ": cannot write: " .. reason(err)) end
  local ok, werr = f:write(text)
  local cok, cerr = f:close()
  if not ok or not cok then return fail(path .. ": cannot write: " .. reason(werr or cerr)) end
  local rok, rerr = os.rename(tmp, path)
  if not rok then return fail(path .. ": cannot put in place: " .. reason(rerr)) end
  cfiles.untemp(tmp)
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

--[[
stage(dir [, {manifest = false}]) -> stage | nil, message: a run's outputs into dir, all or
nothing. Without the manifest (export, recompute, estimate --plot: a set of a few files,
often into the current folder) nothing of an earlier run is removed.
The files are written into a fresh hidden folder inside dir (same file system); commit()
renames them into dir with Ctrl-C and SIGTERM held, and removes what an earlier run listed
in its manifest (.ndplan-run) and this one did not write, so dir holds one run's set. A
failure before commit (a full disk, an error, a signal) leaves dir as it was: the stage
folder is removed on every way out. The folder is locked (flock) until commit: a second run
into it fails at once instead of mixing its files with this one's.
  st.dir           the staging folder (write files there with st:path(name))
  st:path(name)    the staging path of name, registered for cleanup
  st:write(name, text) -> true | nil, "DIR/name: reason"
  st:final_text(s) s with each staging path written as it will be after commit
  st:commit() -> names | nil, message
]]
local Stage = {}
Stage.__index = Stage
M.MANIFEST = ".ndplan-run"

function M.stage(dir, opts)
  local cfiles = require "ndplan.c.files"
  local ok, err = M.mkdir_p(dir)
  if not ok then return nil, err end
  local lock, lerr = cfiles.lock(dir)
  if not lock then return nil, lerr end
  local st = setmetatable({target = dir, lock = lock, names = {},
                           manifest = not (opts and opts.manifest == false)}, Stage)
  for _ = 1, 100 do
    local d = string.format("%s/.ndplan-stage-%d", dir, math.random(1, 1 << 30))
    if not cfiles.kind(d) then
      cfiles.temp(d, "folder")
      local made, merr = cfiles.mkdir(d)
      if not made then  -- named as the folder the user gave, with the reason
        cfiles.untemp(d)
        local why = tostring(merr):sub(1, #d + 2) == d .. ": " and tostring(merr):sub(#d + 3)
                    or tostring(merr)
        return nil, dir .. ": cannot write into it: " .. why
      end
      st.dir = d
      return st
    end
  end
  return nil, dir .. ": cannot make a staging folder"
end

function Stage:path(name)
  local p = self.dir .. "/" .. name
  if not self.names[name] then
    self.names[name] = true
    self.names[#self.names + 1] = name
    require("ndplan.c.files").temp(p)
  end
  return p
end

-- A message naming staging paths, with the paths they will have after commit.
function Stage:final_text(msg)
  local out, i = {}, 1
  msg = tostring(msg)
  while true do
    local a, b = msg:find(self.dir, i, true)
    if not a then break end
    out[#out + 1] = msg:sub(i, a - 1) .. self.target
    i = b + 1
  end
  out[#out + 1] = msg:sub(i)
  return table.concat(out)
end

function Stage:write(name, text)
  local p = self:path(name)
  local f, err = io.open(p, "wb")
  if not f then return nil, self.target .. "/" .. name .. ": cannot write: " .. tostring(err) end
  local ok, werr = f:write(text)
  local cok, cerr = f:close()
  if not ok or not cok then
    return nil, self.target .. "/" .. name .. ": " .. tostring(werr or cerr)
  end
  return true
end

-- The names an earlier run's manifest lists (plain names only).
local function manifest_names(dir)
  local text = require("ndplan.c.files").read(dir .. "/" .. M.MANIFEST, 1 << 20)
  local names = {}
  for line in (text or ""):gmatch("[^\n]+") do
    if line:match("^[%w][%w._-]*$") then names[#names + 1] = line end
  end
  return names
end

-- Removes the staging folder and what is in it; unregisters them.
local function drop(self)
  local cfiles = require "ndplan.c.files"
  for _, n in ipairs(cfiles.list(self.dir) or {}) do
    os.remove(self.dir .. "/" .. n)
    cfiles.untemp(self.dir .. "/" .. n)
  end
  os.remove(self.dir)
  cfiles.untemp(self.dir)
end

function Stage:commit()
  local cfiles = require "ndplan.c.files"
  local list = {}  -- everything in the stage: written by st:write or into st.dir directly
  for _, n in ipairs(cfiles.list(self.dir) or {}) do
    if n ~= M.MANIFEST and not n:match("%.tmp%-%d+$") then list[#list + 1] = n end
  end
  table.sort(list)
  if self.manifest then
    local ok, err = self:write(M.MANIFEST, table.concat(list, "\n") .. "\n")
    if not ok then drop(self); self.lock:unlock(); return nil, err end
  end
  local now = {}
  for _, n in ipairs(list) do
    now[n] = true
    if M.kind(self.target .. "/" .. n) == "directory" then  -- checked before any rename
      drop(self)
      self.lock:unlock()
      return nil, self.target .. "/" .. n .. ": cannot put in place: a folder has that name"
    end
  end
  local earlier = self.manifest and manifest_names(self.target) or {}
  cfiles.hold_signals(true)  -- the renames are not cut by Ctrl-C or SIGTERM
  local failed
  if self.manifest then list[#list + 1] = M.MANIFEST end  -- last: it lists a complete set
  for _, n in ipairs(list) do
    local rok, rerr = os.rename(self.dir .. "/" .. n, self.target .. "/" .. n)
    if not rok then
      failed = self.target .. "/" .. n .. ": cannot put in place: "
               .. tostring(rerr):gsub("^.-: ", "")
      break
    end
    cfiles.untemp(self.dir .. "/" .. n)
  end
  if not failed then
    for _, n in ipairs(earlier) do  -- the earlier run's files this one did not write
      if not now[n] then os.remove(self.target .. "/" .. n) end
    end
  end
  drop(self)
  cfiles.hold_signals(false)
  self.lock:unlock()
  if failed then return nil, failed end
  if self.manifest then list[#list] = nil end
  return list
end

-- abort(): the staging folder removed, the folder unlocked; dir as it was.
function Stage:abort()
  drop(self)
  self.lock:unlock()
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

-- line_index(text) -> function(pos) -> line, column (both from 1) of byte offset pos: the
-- newlines found once, each lookup a binary search (line_col per word of a long file
-- rescanned it from the start: quadratic).
function M.line_index(text)
  local nls, n = {}, 0
  for nl in text:gmatch("()\n") do n = n + 1; nls[n] = nl end
  return function(pos)
    local lo, hi = 1, n  -- the count of newlines before pos: the largest k with nls[k] < pos
    local k = 0
    while lo <= hi do
      local mid = (lo + hi) // 2
      if nls[mid] < pos then k = mid; lo = mid + 1 else hi = mid - 1 end
    end
    return k + 1, pos - (k > 0 and nls[k] or 0)
  end
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
