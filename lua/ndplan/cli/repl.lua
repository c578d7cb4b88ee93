-- What the REPL (engine/host/repl.c) asks of Lua: help(topic), Tab completion, how a value
-- prints (an estimate as `ndplan estimate` prints it, a search's ranked list as its table),
-- and where the history file lives.
local M = {}

local TOPICS = require "ndplan.cli.help"
local BY_NAME = {}
for _, t in ipairs(TOPICS) do BY_NAME[t[1]] = t end

-- help([topic]): the topic index, or one topic's text; topic: a name ("nd.estimate") or the
-- value itself (help(nd.estimate)). Prints; an unknown topic prints the index after a line.
function M.help(topic)
  local nd = require "ndplan"
  if type(topic) ~= "string" and topic ~= nil then
    for _, t in ipairs(TOPICS) do
      local name = t[1]:match("^nd%.(.*)$")
      if name and rawget(nd, name) == topic or name and nd[name] == topic then topic = t[1]; break end
    end
  end
  if type(topic) == "string" and not BY_NAME[topic] and BY_NAME["nd." .. topic] then
    topic = "nd." .. topic
  end
  local t = BY_NAME[topic]
  if t then print(t[1] .. " -- " .. t[2] .. "\n" .. t[3]); return end
  local out = {}
  if topic ~= nil then out[1] = string.format("no help for %s; the topics:", tostring(topic)) end
  local width = 0
  for _, x in ipairs(TOPICS) do width = math.max(width, #x[1]) end
  for _, x in ipairs(TOPICS) do out[#out + 1] = string.format("  %-" .. width .. "s  %s", x[1], x[2]) end
  out[#out + 1] = 'help("nd.estimate") or help(nd.estimate) for one; Tab completes names.'
  print(table.concat(out, "\n"))
end

---------------------------------------------------------------------------------------------
-- Printing
---------------------------------------------------------------------------------------------
-- (an estimate's table has its own metatable, building its bulky fields on first read)
local function is_estimate(v)
  local mt = type(v) == "table" and getmetatable(v)
  return type(v) == "table" and (mt == nil or mt == "ndplan.estimate")
    and type(v.step_time_s) == "number"
    and type(v.stages) == "table" and type(v.strategy) == "table" and type(v.job) == "table"
    and type(v.time_parts_s) == "table"
end

local function is_ranked(v)
  local first = type(v) == "table" and getmetatable(v) == nil and v[1]
  return type(first) == "table" and type(first.strategy) == "table"
    and type(first.step_time_s) == "number" and first.rank ~= nil
end

local function is_search_info(v)
  return type(v) == "table" and type(v.tested) == "number" and type(v.labels) == "table"
    and type(v.refused) == "table" and v.bounds ~= nil
end

-- describe(v [, info]) -> the text the REPL prints for one value (info: the search's, when
-- it came along with ranked rows)
local function describe(v, info)
  local summary = require "ndplan.out.summary"
  if is_estimate(v) then
    local ok, text = pcall(summary.estimate, v)
    if ok then return text end
  elseif is_ranked(v) then
    local ok, text = pcall(summary.search_table, v, is_search_info(info) and info or nil)
    if ok then return text end
  elseif is_search_info(v) then
    local ok, text = pcall(require("ndplan.search").counts_line, v)
    if ok then return text end
  end
  if type(v) == "string" then return v end
  return tostring(v)
end

-- show(...) -> the text for the values an entry returned: tab-separated as Lua's REPL
-- prints them, a line apart when one of them is a summary
function M.show(...)
  local parts, multi = {}, false
  for i = 1, select("#", ...) do
    local v, info = select(i, ...)
    parts[i] = describe(v, info)
    multi = multi or parts[i]:find("\n", 1, true) ~= nil
  end
  return table.concat(parts, multi and "\n" or "\t")
end

---------------------------------------------------------------------------------------------
-- Completion
---------------------------------------------------------------------------------------------
local KEYWORDS = {"and", "break", "do", "else", "elseif", "end", "false", "for", "function",
                  "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then",
                  "true", "until", "while"}

-- The string keys of t, its metatable's __index table and __names (nd's lazy modules).
local function keys_of(t)
  local out = {}
  local function add(k) if type(k) == "string" and k:match("^[%a_][%w_]*$") then out[k] = true end end
  if type(t) == "table" then for k in pairs(t) do add(k) end end
  local mt = getmetatable(t)
  if type(mt) == "table" then
    if type(mt.__index) == "table" then for k in pairs(mt.__index) do add(k) end end
    if type(mt.__names) == "table" then for k in pairs(mt.__names) do add(k) end end
  end
  return out
end

local function matching(names, prefix, before, after)
  local out, seen = {}, {}
  for _, n in ipairs(names) do
    if n:sub(1, #prefix) == prefix and not seen[n] then
      seen[n] = true
      out[#out + 1] = (before or "") .. n .. (after or "")
    end
  end
  table.sort(out)
  return out
end

-- complete(line, start, stop) -> the candidates for line:sub(start + 1, stop), the word
-- readline is completing (0-based start, as readline gives it): model and device names
-- inside a string after model = / device = / nd.model( / nd.device(, fields of a table path
-- (nd.grammar.si), methods after ':', else globals and keywords.
function M.complete(line, start, stop)
  local nd = require "ndplan"
  local before, word = line:sub(1, start), line:sub(start + 1, stop)
  local kind = before:match("([%a_]+)%s*=%s*[\"']$") or before:match("nd%.([%a_]+)%s*%(%s*[\"']$")
  if kind == "model" or kind == "device" then
    local ok, names = pcall(kind == "model" and nd.models or nd.devices)
    return ok and matching(names, word) or {}
  end
  local path, sep, last = word:match("^([%a_][%w_%.]*)([%.:])([%w_]*)$")
  if path then
    local t = _G
    for part in path:gmatch("[^.]+") do
      local ok, v = pcall(function() return t[part] end)
      if not ok or v == nil then return {} end
      t = v
    end
    local names = {}
    for k in pairs(keys_of(t)) do
      local ok, v = pcall(function() return t[k] end)
      if sep == "." or ok and type(v) == "function" then names[#names + 1] = k end
    end
    return matching(names, last, path .. sep)
  end
  local names = {}
  for k in pairs(keys_of(_G)) do names[#names + 1] = k end
  for _, k in ipairs(KEYWORDS) do names[#names + 1] = k end
  return matching(names, word)
end

---------------------------------------------------------------------------------------------
-- History
---------------------------------------------------------------------------------------------

-- history_file() -> the path of the history file, or nil for none: $NDPLAN_HISTORY (empty:
-- none), else $XDG_STATE_HOME/ndplan/history (the folder is created), else ~/.ndplan_history
function M.history_file()
  local env = os.getenv("NDPLAN_HISTORY")
  if env ~= nil then return env ~= "" and env or nil end
  local state = os.getenv("XDG_STATE_HOME")
  if state and state ~= "" then
    local ok = require("ndplan.io.files").mkdir_p(state .. "/ndplan")
    if ok then return state .. "/ndplan/history" end
  end
  local home = os.getenv("HOME")
  if home and home ~= "" then return home .. "/.ndplan_history" end
  return nil
end

-- setup() -> the table repl.c uses ({show, complete, history}); defines the global help
function M.setup()
  _G.help = M.help
  return {show = M.show, complete = M.complete, history = M.history_file()}
end

return M
