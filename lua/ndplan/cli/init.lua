-- Command-line plumbing shared by the bundled scripts: options declared as data (so
-- `--help` is generated from the same table that parses), one-line failures with
-- documented exit codes, and the list of commands. Aligned tables and readable counts are
-- ndplan.out.text (the library prints them too).
local bundle = require "ndplan.c.bundle"

local M = {}

-- Exit codes (documented in the README).
M.EXIT_ERROR = 1     -- bad input or a failure while running
M.EXIT_USAGE = 2     -- bad command line
M.EXIT_NO_FIT = 3    -- no strategy fits (used by search)
M.EXIT_REFUSED = 4   -- a trainer cannot run the plan as priced (export refused a file)

local failure_mt = {__tostring = function(e) return e.message end}

-- fail(message [, code]): stop the command with one line on stderr and an exit code.
-- The host prints "ndplan: message" without a traceback.
function M.fail(message, code)
  error(setmetatable({message = message, exit = code or M.EXIT_ERROR}, failure_mt), 0)
end

-- size(flag, text) -> bytes, or nil for nil; a text that is not a memory size (ndplan.grammar:
-- bytes, with a unit) fails with EXIT_USAGE naming the flag: "--max-mem: ... did you mean 80GiB?"
function M.size(flag, text)
  if text == nil then return nil end
  local bytes, err = require("ndplan.io.grammar").size(text)
  if not bytes then M.fail("--" .. flag .. ": " .. err, M.EXIT_USAGE) end
  return bytes
end

-- integer(flag, text [, least]) -> the whole number text states, or nil for nil; below least
-- (0 by default) or not a whole number fails with EXIT_USAGE naming the flag.
function M.integer(flag, text, least)
  if text == nil then return nil end
  local n = math.tointeger(tonumber(text))
  if not n or n < (least or 0) then
    M.fail(string.format("--%s: expected a %s, got '%s'", flag, (least or 0) >= 1
                         and "positive whole number" or "non-negative integer", text), M.EXIT_USAGE)
  end
  return n
end

-- check(value, message, ...): value, or fail with the message of a `nil, message` return.
function M.check(value, message, ...)
  if value == nil then M.fail(message or "failed") end
  return value, message, ...
end

local function option_label(o)
  local s = (o.short and ("-" .. o.short .. ", ") or "    ") .. "--" .. o.name
  if o.arg then s = s .. " " .. o.arg end
  return s
end

-- help(spec) -> the text of `ndplan NAME --help`
function M.help(spec)
  local out = {string.format("usage: ndplan %s %s", spec.name, spec.usage or "[options]"),
               spec.summary or "", ""}
  if spec.description then out[#out + 1] = spec.description; out[#out + 1] = "" end
  out[#out + 1] = "options:"
  local all = {}
  for _, o in ipairs(spec.options or {}) do all[#all + 1] = o end
  all[#all + 1] = {name = "help", short = "h", help = "show this help and exit"}
  local width = 0
  for _, o in ipairs(all) do width = math.max(width, #option_label(o)) end
  for _, o in ipairs(all) do
    local line = string.format("  %-" .. width .. "s  %s", option_label(o), o.help or "")
    if o.default ~= nil then line = line .. string.format(" (default: %s)", o.default) end
    out[#out + 1] = line
  end
  return table.concat(out, "\n") .. "\n"
end

--[[
parse(spec, args) -> opts, positional | nil (help was printed)
spec = {name=, summary=, usage=, positional = N (words that are not options it takes;
        default 0: any is a usage error), options = {{name="model", short="m", arg="NAME",
        help=..., default=..., required=true}, {name="json", help=...} (a flag) ...}}
Accepts --name value, --name=value, -s value; flags take no value. Unknown options and
missing values fail with EXIT_USAGE.
]]
function M.parse(spec, args)
  local by_long, by_short = {}, {}
  for _, o in ipairs(spec.options or {}) do
    by_long[o.name] = o
    if o.short then by_short[o.short] = o end
  end
  local opts, positional = {}, {}
  local function usage_error(msg)
    M.fail(string.format("%s (see 'ndplan %s --help')", msg, spec.name), M.EXIT_USAGE)
  end
  local i = 1
  while i <= #args do
    local a = args[i]
    local o, value
    if a == "--" then
      for j = i + 1, #args do positional[#positional + 1] = args[j] end
      break
    elseif a == "-h" or a == "--help" then
      io.write(M.help(spec))
      return nil
    elseif a:sub(1, 2) == "--" then
      local name, v = a:match("^%-%-([^=]+)=(.*)$")
      name = name or a:sub(3)
      o, value = by_long[name], v
      if not o then usage_error(string.format("unknown option '--%s'", name)) end
    elseif a:sub(1, 1) == "-" and #a > 1 then
      o = by_short[a:sub(2, 2)]
      if not o or #a > 2 then usage_error(string.format("unknown option '%s'", a)) end
    else
      positional[#positional + 1] = a
    end
    if o then
      if o.arg then
        if value == nil then
          i = i + 1
          value = args[i]
          if value == nil then
            usage_error(string.format("option '--%s' needs a value (%s)", o.name, o.arg))
          end
        end
        if value == "" then  -- `-o ""` would write into /: an empty value is a usage error
          usage_error(string.format("option '--%s' needs a value (%s), got an empty string",
                                    o.name, o.arg))
        end
        opts[o.name] = value
      else
        if value ~= nil then
          usage_error(string.format("option '--%s' takes no value", o.name))
        end
        opts[o.name] = true
      end
    end
    i = i + 1
  end
  local most = spec.positional or 0  -- words that are not options: refused past the spec's count
  if #positional > most then
    usage_error(string.format("unexpected argument '%s'%s", positional[most + 1],
                              most == 0 and " (every input is an option)" or ""))
  end
  for _, o in ipairs(spec.options or {}) do
    if opts[o.name] == nil then opts[o.name] = o.default end
    if o.required and opts[o.name] == nil then
      usage_error(string.format("option '--%s' is required", o.name))
    end
  end
  return opts, positional
end

-- parse_costs(text) -> {name = number} from "--costs a=1,b=2"; a bad value fails with
-- EXIT_USAGE. Names are checked where the costs are used (ndplan.c.estimate).
function M.parse_costs(text)
  local costs = {}
  for item in text:gmatch("[^,]+") do  -- every item is NAME=NUMBER: none is ignored
    local k, v = item:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
    if not k then M.fail("--costs: expected NAME=NUMBER, got '" .. item .. "'", M.EXIT_USAGE) end
    costs[k] = tonumber(v) or M.fail("--costs: " .. k .. " needs a number", M.EXIT_USAGE)
  end
  return costs
end

-- commands() -> array of {name, summary}, from each bundled script's first comment line
function M.commands()
  local rows = {}
  for _, path in ipairs(bundle.list("scripts")) do
    local name = path:match("^scripts/([%w_%-]+)%.lua$")
    if name then
      local text = bundle.read(path) or ""
      local summary = text:match("^%-%-%s*ndplan%s+[%w_%-]+:%s*([^\n]*)") or ""
      rows[#rows + 1] = {name = name, summary = summary}
    end
  end
  return rows
end

-- The edit distance (insertions, deletions, substitutions, swaps of neighbours) of a and b.
local function distance(a, b)
  local d = {}
  for i = 0, #a do d[i] = {[0] = i} end
  for j = 0, #b do d[0][j] = j end
  for i = 1, #a do
    for j = 1, #b do
      local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
      d[i][j] = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if i > 1 and j > 1 and a:sub(i, i) == b:sub(j - 1, j - 1)
         and a:sub(i - 1, i - 1) == b:sub(j, j) then
        d[i][j] = math.min(d[i][j], d[i - 2][j - 2] + 1)
      end
    end
  end
  return d[#a][#b]
end

-- nearest(word, names) -> the name within two edits of word (the closest; ties: the first)
function M.nearest(word, names)
  local best, best_d
  for _, n in ipairs(names) do
    local d = distance(word, n)
    if d <= 2 and d < #n and (not best_d or d < best_d) then best, best_d = n, d end
  end
  return best
end

-- unknown_command(name, progname): fails with EXIT_USAGE, naming the nearest command
function M.unknown_command(name, progname)
  local names = {}
  for _, r in ipairs(M.commands()) do names[#names + 1] = r.name end
  local near = M.nearest(name, names)
  M.fail(string.format("unknown command '%s'%s (run '%s --help' to list commands)", name,
                       near and ": did you mean " .. near .. "?" or "", progname or "ndplan"),
         M.EXIT_USAGE)
end

-- command_list() -> "commands:\n  models  list ..." (the host's --help)
function M.command_list()
  local rows = M.commands()
  local width = 0
  for _, r in ipairs(rows) do width = math.max(width, #r.name) end
  local out = {"commands:"}
  for _, r in ipairs(rows) do
    out[#out + 1] = string.format("  %-" .. width .. "s  %s", r.name, r.summary)
  end
  return table.concat(out, "\n") .. "\n"
end

return M
