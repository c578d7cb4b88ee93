-- Keys in a stable order, for the messages and files that list a table's keys (Lua's table
-- order is not stable): by type, then value, so that a YAML file's non-string keys (1: a)
-- sort too; string keys alone sort as table.sort sorts them.
local M = {}

-- sorted_keys(t) -> t's keys, sorted
function M.sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks, function(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return ta < tb end
    if ta == "string" or ta == "number" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return ks
end

return M
