-- Plain-text building blocks of what the commands and the REPL print: aligned tables,
-- readable counts and a layer stack's rows.
local M = {}

--[[
format_table(columns, rows) -> text. columns = {{key=, title=, align="right"|"left",
fmt=function(v, row)}}; rows = array of tables. Columns are padded to their widest cell.
]]
function M.format_table(columns, rows)
  local cells, widths = {}, {}
  for c, col in ipairs(columns) do widths[c] = #col.title end
  for r, row in ipairs(rows) do
    cells[r] = {}
    for c, col in ipairs(columns) do
      local v = row[col.key]
      local s = col.fmt and col.fmt(v, row) or (v == nil and "-" or tostring(v))
      cells[r][c] = s
      widths[c] = math.max(widths[c], #s)
    end
  end
  local function line(values)
    local parts = {}
    for c, col in ipairs(columns) do
      local w = widths[c]
      parts[c] = col.align == "right" and string.format("%" .. w .. "s", values[c])
                 or string.format("%-" .. w .. "s", values[c])
    end
    return (table.concat(parts, "  "):gsub("%s+$", ""))
  end
  local titles = {}
  for c, col in ipairs(columns) do titles[c] = col.title end
  local out = {line(titles)}
  for r = 1, #rows do out[#out + 1] = line(cells[r]) end
  return table.concat(out, "\n") .. "\n"
end

-- A count in readable form: 70.55B, 37.5M, 4096.
function M.count(n)
  if n == nil then return "-" end
  local a = math.abs(n)
  if a >= 1e12 then return string.format("%.3fT", n / 1e12) end
  if a >= 1e9 then return string.format("%.3fB", n / 1e9) end
  if a >= 1e6 then return string.format("%.2fM", n / 1e6) end
  if a >= 1e4 then return string.format("%.1fk", n / 1e3) end
  return string.format("%d", math.tointeger(n) or n)
end

-- stack_rows(groups) -> {layers=, count=, kind=} rows of model:layers(), a run of groups that
-- repeats a motif of 2 to 4 groups (Gemma 2's sliding/global, Nemotron-H's Mamba/MLP) as one
-- row: kind "mamba x1, mlp x1 (x3)".
function M.stack_rows(groups)
  local function same(a, b)
    return a.kind == b.kind and a.count == b.count and a.mtp == b.mtp
  end
  local function repeats(i, p)
    local n = 1
    while true do
      for j = 0, p - 1 do
        local a, b = groups[i + j], groups[i + n * p + j]
        if not (a and b and same(a, b)) then return n end
      end
      n = n + 1
    end
  end
  local rows, i = {}, 1
  while i <= #groups do
    local best_p, best_n = 1, 1
    for p = 2, 4 do
      local n = repeats(i, p)
      if n >= 2 and n * p > best_n * best_p then best_p, best_n = p, n end
    end
    local last = groups[i + best_p * best_n - 1]
    local first, stop = groups[i].first, last.first + last.count - 1
    local kind = groups[i].kind .. (groups[i].mtp and " (mtp)" or "")
    if best_p > 1 then
      local parts = {}
      for j = 0, best_p - 1 do
        local g = groups[i + j]
        parts[#parts + 1] = g.kind .. " x" .. g.count
      end
      kind = table.concat(parts, ", ") .. " (x" .. best_n .. ")"
    end
    rows[#rows + 1] = {layers = first == stop and tostring(first) or first .. "-" .. stop,
                       count = stop - first + 1, kind = kind}
    i = i + best_p * best_n
  end
  return rows
end

return M
