-- The reader of ndplan.hfconfig: typed access to a config's fields (text_config first, then
-- the outer table, then the family's defaults), failures that unwind to to_spec() as one
-- message naming the file and the field, and the record of every field name asked for
-- (reader.seen), from which the loader reports the fields it did not read.
--
--   new(inner, outer, source) -> reader;  is_failure(err) -> boolean
local M = {}

-- {======================================================================
-- Reading fields with their types checked; failures unwind to to_spec()
-- =======================================================================

local Failure = {}  -- metatable marking our own errors, so real bugs still propagate

local Reader = {}
Reader.__index = Reader

-- JSON null (cjson.null, a lightuserdata) and YAML null count as absent.
local function is_null(v)
  return v == nil or type(v) == "userdata"
end

local function names_of(names)
  return type(names) == "table" and names or {names}
end

function Reader:fail(fmt, ...)
  error(setmetatable({message = self.source .. ": " .. fmt:format(...)}, Failure), 0)
end

function Reader:warn(fmt, ...)
  self.warnings[#self.warnings + 1] = fmt:format(...)
end

-- raw(names) -> value, name: the first non-null field, from text_config, then the outer
-- table, then the family's defaults (what HF's config class fills in)
function Reader:raw(names)
  local list = names_of(names)
  for _, n in ipairs(list) do self.seen[n] = true end  -- asked for: see report_unread()
  for _, n in ipairs(list) do
    local v = self.inner[n]
    if is_null(v) and self.outer then v = self.outer[n] end
    if is_null(v) and self.defaults then v = self.defaults[n] end
    if not is_null(v) then return v, n end
  end
  return nil
end

function Reader:missing(names, what)
  local list = names_of(names)
  local also = ""
  if #list > 1 then also = "; also read from " .. table.concat(list, ", ", 2) end
  self:fail("missing field '%s' (expected %s%s)", list[1], what, also)
end

-- int(names [, what [, min [, max]]]) -> integer | nil. `what` makes the field required.
function Reader:int(names, what, min, max)
  local v, name = self:raw(names)
  if v == nil then
    if what then self:missing(names, what) end
    return nil
  end
  local i = math.type(v) and math.tointeger(v)
  min = min or 0
  if not i or i < min then
    self:fail("field '%s' must be an integer >= %d, got %s", name, min,
              type(v) == "number" and tostring(v) or type(v))
  end
  if max and i > max then
    self:fail("field '%s' must be at most %d, got %d", name, max, i)
  end
  return i
end

function Reader:bool(names)
  local v, name = self:raw(names)
  if v ~= nil and type(v) ~= "boolean" then
    self:fail("field '%s' must be true or false, got %s", name, type(v))
  end
  return v
end

function Reader:str(names)
  local v, name = self:raw(names)
  if v ~= nil and type(v) ~= "string" then
    self:fail("field '%s' must be a string, got %s", name, type(v))
  end
  return v
end

-- list(names) -> array | nil, each entry checked by `check(value) -> ok`
function Reader:list(names, expected, check)
  local v, name = self:raw(names)
  if v == nil then return nil end
  if type(v) ~= "table" then self:fail("field '%s' must be a list of %s", name, expected) end
  for i, x in ipairs(v) do
    if not check(x) then
      self:fail("field '%s': entry %d must be %s, got %s", name, i, expected,
                type(x) == "string" and "'" .. x .. "'" or type(x))
    end
  end
  return v, name
end

-- }======================================================================

function M.new(inner, outer, source)
  return setmetatable({inner = inner, outer = outer, warnings = {}, seen = {},
                       source = source}, Reader)
end

function M.is_failure(err) return getmetatable(err) == Failure end

return M
