-- Loaded models, devices and stack profiles, kept by the name or path they were loaded from,
-- so that nd.estimate{model = "llama3.1-70b", ...} reads and parses each file once per
-- process. An entry remembers every file it was read from (a device's base chain too) with
-- its stat (mtime, ctime, size, inode), taken before the read; a lookup stats them again and
-- drops the entry when any differs. Bundled files embedded in the binary never change; under
-- $NDPLAN_ROOT they are files like any other.
--
--   local cache = require("ndplan.config.loaded").new()
--   local deps = {}; loaded.watch(deps, path)  -- before reading path
--   cache:put(key, object, deps); cache:get(key) -> object | nil
--   cache.fixed[key] -> the object, for an entry no file of which can change (read from the
--   binary alone): one table read, for callers on a hot path (nd.estimate)
--
-- Only immutable objects go in (model and device userdata; a stack profile only through
-- ndplan.stack's internal path, never handed to callers).
local stat = require("ndplan.c.files").stat
local root = require("ndplan.c.bundle").root

local M = {}

-- Entries per cache before it starts afresh: a script walking many files does not hold them
-- all (each entry is one loaded object and its stats).
M.MAX_ENTRIES = 256

-- watch(deps, path): path's stat now (false when it does not exist), appended to deps.
function M.watch(deps, path)
  local mtime, ctime, size, ino = stat(path)
  local n = #deps
  deps[n + 1], deps[n + 2], deps[n + 3], deps[n + 4], deps[n + 5] =
    path, mtime or false, ctime or false, size or false, ino or false
end

-- bundled(deps, rel): a bundled file, watched when it is read from $NDPLAN_ROOT.
function M.bundled(deps, rel)
  local r = root()
  if r then M.watch(deps, r .. "/" .. rel) end
end

local function unchanged(deps)
  for i = 1, #deps, 5 do
    local mtime, ctime, size, ino = stat(deps[i])
    if (mtime or false) ~= deps[i + 1] or (ctime or false) ~= deps[i + 2]
       or (size or false) ~= deps[i + 3] or (ino or false) ~= deps[i + 4] then
      return false
    end
  end
  return true
end

local Cache = {}
Cache.__index = Cache

function M.new()
  return setmetatable({entries = {}, count = 0, fixed = {}}, Cache)
end

-- get(key) -> the object, while none of its files changed | nil
function Cache:get(key)
  local e = self.entries[key]
  if e == nil then return nil end
  if e.deps[1] == nil or unchanged(e.deps) then return e.value end
  self.entries[key] = nil
  self.count = self.count - 1
  return nil
end

function Cache:put(key, value, deps)
  if self.entries[key] == nil then
    if self.count >= M.MAX_ENTRIES then
      self.entries, self.count = {}, 0
      for k in pairs(self.fixed) do self.fixed[k] = nil end  -- in place: callers keep it
    end
    self.count = self.count + 1
  end
  self.entries[key] = {value = value, deps = deps}
  self.fixed[key] = deps[1] == nil and value or nil
end

return M
