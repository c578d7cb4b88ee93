-- Search policies: a Lua module returning a table of optional hooks, in the style of wrk's
-- scripts. The C core calls admit and objective (on the main thread, protected); the others
-- run here, protected too. A hook that is absent costs nothing. The file's load and every
-- hook run in the guard of ndplan.c.search (deadline, heap cap, Ctrl-C); a file runs in
-- M.sandbox() unless --unsafe-policy, and what a hook returns is read raw or copied as plain
-- data, so no policy code runs outside the guard.
--
--   setup(job, opts)     once, before the walk; may change opts (budget_bytes, top, keep)
--   admit(candidate)     true to price it, false to refuse it as "filtered out"
--   objective(estimate)  a number to minimise (default: step time), nil to drop it
--   rank(results, opts)  the list to show, from the kept results (ranked by objective)
--   done(ranked, out)    after the search: out.write(name, text) writes into -o DIR
local bundle = require "ndplan.c.bundle"
local core = require "ndplan.c.search"

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

-- check(p, origin) -> a plain copy of p | nil, message: hooks are functions, data has its
-- type. Read raw (next, rawget): a policy's __index or __pairs never runs outside its guard.
local function check(p, origin)
  if type(p) ~= "table" then
    return nil, string.format("policy %s: expected the file to return a table of hooks, got %s",
                              origin, type(p))
  end
  local out = {}
  for k, v in next, p do
    if HOOK_SET[k] then
      if type(v) ~= "function" then
        return nil, string.format("policy %s: hook '%s' must be a function, got %s", origin, k, type(v))
      end
      out[k] = v
    elseif DATA[k] then
      if type(v) ~= DATA[k] then
        return nil, string.format("policy %s: '%s' must be a %s", origin, k, DATA[k])
      end
      out[k] = v
    elseif type(k) == "string" and not k:match("^_") then
      return nil, string.format("policy %s: unknown hook '%s' (expected one of %s)", origin,
                                tostring(k), table.concat(M.HOOKS, ", "))
    end
  end
  return out
end

-- Limits of policy code: every hook and the file's load run in core.guard under them.
-- POLICY_MEM: how far policy code may grow the Lua heap past what it held when the search
-- began (nd.search policy_mem, ndplan search --policy-mem).
M.POLICY_MEM = 512 * 2^20
local LIMITS = setmetatable({}, {__mode = "k"})  -- policy -> {deadline =, heap =}

-- limits([timeout_s [, policy_mem]]) -> {deadline = core.clock() + timeout, heap = bytes}
function M.limits(timeout, policy_mem)
  return {deadline = timeout and core.clock() + timeout or nil,
          heap = core.heap_bytes() + (policy_mem or M.POLICY_MEM)}
end

-- The environment a policy file runs in unless --unsafe-policy: fresh tables of the safe
-- libraries, a restricted nd, require of an allow-list of pure modules. No processes, no
-- files, no environment, no other search, no finalizers, no way to the string metatable.
local SAFE_GLOBALS = {"assert", "error", "ipairs", "next", "pairs", "select", "tonumber",
                      "tostring", "type", "rawequal", "rawget", "rawlen", "rawset",
                      "getmetatable", "_VERSION"}
local SAFE_LIBS = {"math", "string", "table", "utf8"}
local DROP = {string = {dump = true}, math = {randomseed = true}}
-- bundled pure modules a sandboxed require may load (copies), with the fields it sees;
-- policies name them as the README documents (ndplan.json is the library's ndplan.io.json)
local ALLOWED = {
  ["ndplan.grammar"] = true,
  ["ndplan.c.units"] = true,
  ["ndplan.json"] = {"decode", "encode", "null"},
  ["ndplan.yaml"] = {"decode", "null"},
}
local MODULE = {["ndplan.grammar"] = "ndplan.io.grammar", ["ndplan.json"] = "ndplan.io.json",
                ["ndplan.yaml"] = "ndplan.io.yaml"}

-- deep copy of plain data and functions, raw (no metamethod runs), without metatables
local function copy(v, seen)
  if type(v) ~= "table" then return v end
  seen = seen or {}
  if seen[v] then return seen[v] end
  local out = {}
  seen[v] = out
  for k, x in next, v do out[copy(k, seen)] = copy(x, seen) end
  return out
end

local function module_copy(name)
  local fields = ALLOWED[name]
  local m = require(MODULE[name] or name)
  if fields == true then return copy(m) end
  local out = {}
  for _, k in ipairs(fields) do out[k] = m[k] end
  return out
end

-- A string that names a bundled model or device, or a message (the sandbox reads no file).
local function bundled_only(kind, x, names)
  if type(x) ~= "string" then return true end
  local lower = x:lower()
  for _, n in ipairs(names()) do
    if n:lower() == lower then return true end
  end
  return nil, string.format("policy sandbox: %s '%s': only a bundled name, a table or an "
                            .. "object (a policy reads no file)", kind, x)
end

-- a device argument as the sandbox passes it on: a plain copy whose base is bundled
local function plain_device(x, nd)
  local t = type(x) == "table" and copy(x) or x
  local ok, err = bundled_only("device", type(t) == "table" and t.base or t, nd.devices)
  if not ok then return nil, err end
  return t
end

local function safe_nd()
  local nd = require "ndplan"
  local s = {_VERSION = nd._VERSION, models = nd.models, devices = nd.devices,
             grammar = module_copy("ndplan.grammar"), units = module_copy("ndplan.c.units"),
             json = module_copy("ndplan.json"), yaml = module_copy("ndplan.yaml")}
  function s.model(x)
    if type(x) == "table" then x = copy(x) end
    local ok, err = bundled_only("model", x, nd.models)
    if not ok then return nil, err end
    return nd.model(x)
  end
  function s.device(x)
    local d, err = plain_device(x, nd)
    if not d then return nil, err end
    return nd.device(d)
  end
  function s.estimate(args)
    if type(args) ~= "table" then return nd.estimate(args) end
    args = copy(args)
    local ok, err = bundled_only("model", args.model, nd.models)
    if not ok then return nil, err end
    if args.device ~= nil then
      args.device, err = plain_device(args.device, nd)
      if not args.device then return nil, err end
    end
    return nd.estimate(args)
  end
  return s
end

-- pcall and friends pass on the guard's stop (timed out, interrupted, memory): a policy
-- that catches errors in a loop still stops.
local function pass(ok, ...)
  if not ok and core.tripped() then error((...), 0) end
  return ok, ...
end

local function tostrings(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  return table.concat(parts, "\t")
end

function M.sandbox()
  -- all strings share one metatable: getmetatable("") answers "string", not the table
  local smt = debug.getmetatable("")
  if smt and rawget(smt, "__metatable") == nil then smt.__metatable = "string" end
  local env = {}
  for _, k in ipairs(SAFE_GLOBALS) do env[k] = _G[k] end
  for _, k in ipairs(SAFE_LIBS) do
    env[k] = {}
    for name, fn in next, _G[k] do
      if not (DROP[k] and DROP[k][name]) then env[k][name] = fn end
    end
  end
  local stderr = io.stderr
  env.pcall = function(f, ...) return pass(pcall(f, ...)) end
  env.xpcall = function(f, h, ...) return pass(xpcall(f, h, ...)) end
  env.setmetatable = function(t, mt)
    if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
      error("policy sandbox: __gc metamethods are not allowed", 2)
    end
    return setmetatable(t, mt)
  end
  env.coroutine = {create = coroutine.create, wrap = coroutine.wrap, yield = coroutine.yield,
                   status = coroutine.status, running = coroutine.running,
                   isyieldable = coroutine.isyieldable,
                   resume = function(co, ...) return pass(coroutine.resume(co, ...)) end,
                   close = function(co) return pass(coroutine.close(co)) end}
  env.os = {time = os.time, clock = os.clock, date = os.date, difftime = os.difftime}
  -- messages go to stderr (stdout may be --json)
  env.print = function(...) stderr:write(tostrings(...), "\n") end
  env.io = {write = function(...)
    for i = 1, select("#", ...) do
      local v = select(i, ...)
      if type(v) ~= "string" and type(v) ~= "number" then
        error("bad argument #" .. i .. " to 'write' (string expected, got " .. type(v) .. ")", 2)
      end
    end
    stderr:write(...)
  end}
  env.nd = safe_nd()
  local loaded = {ndplan = env.nd}
  env.require = function(name)
    if loaded[name] then return loaded[name] end
    if type(name) ~= "string" or not ALLOWED[name] then
      local allowed = {"ndplan"}
      for n in next, ALLOWED do allowed[#allowed + 1] = n end
      table.sort(allowed)
      error("policy sandbox: require '" .. tostring(name) .. "' is not allowed (only "
            .. table.concat(allowed, ", ") .. "; --unsafe-policy lifts this)", 2)
    end
    loaded[name] = module_copy(name)
    return loaded[name]
  end
  env._G = env
  return env
end

-- load(x [, unsafe [, limits]]) -> policy, origin | nil, message. x: a table of hooks, a
-- bundled name or a file. A file runs in M.sandbox() unless unsafe; bundled policies are
-- ndplan's own. The file's top level runs in the guard under limits (M.limits()).
function M.load(x, unsafe, limits)
  limits = limits or M.limits()
  if x == nil then x = "default" end
  local function ready(p, origin)
    local checked, err = check(p, origin)
    if not checked then return nil, err end
    checked = M.with_defaults(checked)
    LIMITS[checked] = limits
    return checked, origin
  end
  if type(x) == "table" then return ready(x, "(table)") end
  if type(x) ~= "string" then return nil, "policy: expected a name, a file or a table" end
  local chunk, err, origin
  local kind = require("ndplan.c.files").kind(x)
  if kind and kind ~= "directory" then  -- a file, read as one: a FIFO or device is refused
    local text, rerr = require("ndplan.io.files").read(x)
    if not text then return nil, "policy " .. rerr end
    text = text:gsub("^#[^\n]*", "", 1)  -- a first line "#!..." skipped, as loadfile does
    if unsafe then chunk, err = load(text, "@" .. x, "t")
    else chunk, err = load(text, "@" .. x, "t", M.sandbox()) end
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
  local ok, p = core.guard(limits, chunk)
  if not ok then
    M.last_traceback = p
    return nil, "policy error in load: " .. first_line(p)
  end
  return ready(p, origin)
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

-- call(p, hook, ...) -> what the hook returns; the hook runs in the guard under the limits
-- p was loaded with. An error in it raises "policy error in HOOK: FILE:LINE: message" (the
-- traceback is kept in M.last_traceback).
function M.call(p, hook, ...)
  local fn = rawget(p, hook)
  if not fn then return nil end
  local res = table.pack(core.guard(LIMITS[p] or M.limits(), fn, ...))
  if not res[1] then M.raise(res[2], hook) end
  return table.unpack(res, 2, res.n)
end

-- plain data of a policy's answer (tables copied raw, no metatables), or an error naming
-- where: what ndplan reads back can run no policy code.
local function plain(v, where, depth)
  local t = type(v)
  if t == "string" or t == "number" or t == "boolean" then return v end
  if t ~= "table" then error(string.format("%s: expected plain data, got a %s", where, t), 0) end
  if depth > 16 then error(where .. ": tables nested too deep", 0) end
  local out = {}
  for k, x in next, v do
    if type(k) ~= "string" and type(k) ~= "number" then
      error(string.format("%s: expected string or number keys, got a %s", where, type(k)), 0)
    end
    out[k] = plain(x, where .. "." .. tostring(k), depth + 1)
  end
  return out
end

local function rows_of(ranked)
  if type(ranked) ~= "table" then
    error("expected a list of result rows, got " .. type(ranked), 0)
  end
  local out = {}
  for i = 1, rawlen(ranked) do
    local r = rawget(ranked, i)
    if type(r) == "table" and rawget(r, "strategy") == nil then
      -- a row objective was handed builds its nested tables when pairs starts (here, in
      -- the guard), so that they are there to be read raw
      for _ in pairs(r) do break end
    end
    if type(r) ~= "table" or type(rawget(r, "strategy")) ~= "table" then
      error(string.format("expected a list of result rows (tables with a strategy), got %s at [%d]",
                          type(r) == "table" and "a table without a strategy" or "a " .. type(r), i), 0)
    end
    out[i] = plain(r, "[" .. i .. "]", 1)
  end
  return out
end

-- rank(p, results, opts) -> the rows to show: the rank hook's answer as plain rows (copied in
-- the guard), or a policy error naming rank.
function M.rank(p, results, opts)
  local ranked = M.call(p, "rank", results, opts)
  local ok, rows = core.guard(LIMITS[p] or M.limits(), rows_of, ranked)
  if not ok then M.raise(rows, "rank") end
  return rows
end

-- raise(message, hook): a hook's error as one line naming the policy file and line.
function M.raise(message, hook)
  M.last_traceback = tostring(message)
  error(string.format("policy error in %s: %s", hook or "a hook", first_line(message)), 0)
end

-- plain_name(name) -> name | nil, message: what out.write accepts (a file inside -o DIR)
function M.plain_name(name)
  if type(name) ~= "string" or not name:match("^[%w_][%w_.%-]*$") or #name > 200 then
    return nil, string.format("out.write: expected a plain file name (letters, digits, '_', "
                              .. "'-', '.'; no folder), got %s", type(name) == "string"
                              and string.format("%q", name) or type(name))
  end
  return name
end

return M
