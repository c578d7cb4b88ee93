-- Search policies: a Lua module returning a table of optional hooks, in the style of wrk's
-- scripts. The C core calls admit and objective (on the main thread, protected); the others
-- run here, protected too. A hook that is absent costs nothing.
--
--   setup(job, opts)     once, before the walk; may change opts (budget_bytes, top, keep)
--   admit(candidate)     true to price it, false to refuse it as "filtered out"
--   objective(estimate)  a number to minimise (default: step time), nil to drop it
--   rank(results, opts)  the list to show, from the kept results (ranked by objective)
--   done(ranked, out)    after the search: out.write(name, text) writes into -o DIR
local bundle = require "ndplan.c.bundle"

local M = {}

M.HOOKS = {"setup", "admit", "objective", "rank", "done"}
local HOOK_SET = {}
for _, h in ipairs(M.HOOKS) do HOOK_SET[h] = true end
-- Plain data a policy may carry besides its hooks.
local DATA = {name = "string", description = "string", objective_label = "string",
              objective_format = "string"}  -- e.g. "%.3f" for the objective's column

-- Where bundled policies live, searched in this order.
local BUNDLED = {"lua/ndplan/policies/%s.lua", "examples/policies/%s.lua"}

-- names() -> the bundled policy names
function M.names()
  local out, seen = {}, {}
  for _, dir in ipairs({"lua/ndplan/policies", "examples/policies"}) do
    for _, path in ipairs(bundle.list(dir)) do
      local n = path:match("([^/]+)%.lua$")
      if n and not seen[n] then seen[n] = true; out[#out + 1] = n end
    end
  end
  table.sort(out)
  return out
end

local function first_line(msg)
  return (tostring(msg):match("^[^\n]*"))
end

-- check(p, origin) -> p | nil, message: hooks are functions, data has its type.
local function check(p, origin)
  if type(p) ~= "table" then
    return nil, string.format("policy %s: expected the file to return a table of hooks, got %s",
                              origin, type(p))
  end
  for k, v in pairs(p) do
    if HOOK_SET[k] then
      if type(v) ~= "function" then
        return nil, string.format("policy %s: hook '%s' must be a function, got %s", origin, k, type(v))
      end
    elseif DATA[k] then
      if type(v) ~= DATA[k] then
        return nil, string.format("policy %s: '%s' must be a %s", origin, k, DATA[k])
      end
    elseif type(k) == "string" and not k:match("^_") then
      return nil, string.format("policy %s: unknown hook '%s' (expected one of %s)", origin,
                                tostring(k), table.concat(M.HOOKS, ", "))
    end
  end
  return p
end

-- The environment a policy file runs in unless --unsafe-policy: computation and ndplan,
-- no processes, no files, no C modules other than ndplan's own.
local SAFE_GLOBALS = {"assert", "error", "ipairs", "next", "pairs", "pcall", "print", "select",
                      "tonumber", "tostring", "type", "xpcall", "rawequal", "rawget", "rawlen",
                      "rawset", "setmetatable", "getmetatable", "_VERSION"}
local SAFE_LIBS = {"math", "string", "table", "utf8", "coroutine"}

local function copy_lib(lib)
  local t = {}
  for k, v in pairs(lib) do t[k] = v end
  return t
end

function M.sandbox()
  local env = {}
  for _, k in ipairs(SAFE_GLOBALS) do env[k] = _G[k] end
  for _, k in ipairs(SAFE_LIBS) do env[k] = copy_lib(_G[k]) end
  env.os = {time = os.time, clock = os.clock, date = os.date, getenv = os.getenv,
            difftime = os.difftime}
  env.io = {write = function(...) return io.stderr:write(...) end}  -- messages only
  env.nd = require "ndplan"
  env.require = function(name)
    if type(name) ~= "string" or not (name == "ndplan" or name:match("^ndplan%.")) then
      error("policy sandbox: require '" .. tostring(name) .. "' is not allowed (only ndplan's "
            .. "modules; --unsafe-policy lifts this)", 2)
    end
    return require(name)
  end
  env._G = env
  return env
end

-- load(x [, unsafe]) -> policy, origin | nil, message. x: a table of hooks, a bundled name or
-- a file. A file runs in M.sandbox() unless unsafe; bundled policies are ndplan's own.
function M.load(x, unsafe)
  if x == nil then x = "default" end
  if type(x) == "table" then
    local p, err = check(x, "(table)")
    if not p then return nil, err end
    return M.with_defaults(p), "(table)"
  end
  if type(x) ~= "string" then return nil, "policy: expected a name, a file or a table" end
  local chunk, err, origin
  local f = io.open(x, "rb")
  if f then
    f:close()
    if unsafe then chunk, err = loadfile(x, "t")
    else chunk, err = loadfile(x, "t", M.sandbox()) end
    origin = x
  else
    for _, pattern in ipairs(BUNDLED) do
      local path = pattern:format(x)
      if bundle.read(path) then
        chunk, err = bundle.load(path)
        origin = path
        break
      end
    end
    if not origin then
      return nil, string.format("policy '%s': no such file and no bundled policy of that name "
                                .. "(bundled: %s)", x, table.concat(M.names(), ", "))
    end
  end
  if not chunk then return nil, "policy " .. first_line(err) end
  local ok, p = xpcall(chunk, debug.traceback)
  if not ok then return nil, "policy " .. first_line(p) end
  local checked, cerr = check(p, origin)
  if not checked then return nil, cerr end
  return M.with_defaults(checked), origin
end

-- with_defaults(p) -> a copy of p whose missing rank comes from the bundled default policy
-- (admit and objective stay absent: their absence is the fast path).
function M.with_defaults(p)
  if p.rank then return p end
  local base = assert(bundle.load("lua/ndplan/policies/default.lua"))()
  local out = {}
  for k, v in pairs(p) do out[k] = v end
  out.rank = base.rank
  return out
end

-- call(p, hook, ...) -> what the hook returns; an error in it raises "policy error: FILE:LINE:
-- message" (the traceback is kept in M.last_traceback).
function M.call(p, hook, ...)
  local fn = p[hook]
  if not fn then return nil end
  local res = table.pack(xpcall(fn, debug.traceback, ...))
  if not res[1] then M.raise(res[2], hook) end
  return table.unpack(res, 2, res.n)
end

-- raise(message, hook): a hook's error as one line naming the policy file and line.
function M.raise(message, hook)
  M.last_traceback = tostring(message)
  error(string.format("policy error in %s: %s", hook or "a hook", first_line(message)), 0)
end

return M
