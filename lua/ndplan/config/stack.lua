-- Stack profiles: the efficiencies and exposed shares of one software stack (Megatron-Core,
-- torchtitan, ...), per device, fitted on measured runs. A profile is a YAML file:
--
--   name: megatron-core
--   description: free text
--   costs: {dp_overlap: 0.9, ...}        # named costs of the estimators (nd_costs), stack-wide
--   devices:
--     h100:                              # a device name (lower case), as `ndplan devices` lists
--       efficiency: {gemm: 0.7, gemm_fp8: 0.55, attn_fwd: 0.6, ...}   # device.lua's units
--       fit: {runs: 119, mape: 8.1, bias: -0.4}                        # written by calibrate
--       bands: {bf16/dense: {runs: 40, mape: 6.0, bias: 1.2}, ...}     # per regime
--   fallback: h100                       # devices without a fit of their own use this one's
--                                        #   efficiencies (fractions of their own peaks)
--   memory_band: 0.063                   # the memory estimate's relative error bound (its
--                                        #   validation's largest): the search ranks what fits
--                                        #   at the band's upper edge
--
-- apply(stack, device, costs) gives the device with the profile's efficiencies for it, and
-- the costs with the profile's under the caller's own (the caller's win). "none" is no profile:
-- the device file's efficiencies and the estimators' default costs.
local bundle = require "ndplan.c.bundle"
local yaml = require "ndplan.io.yaml"
local loaded = require "ndplan.config.loaded"

local M = {}

M.CATALOG = "examples/stacks"
M.DEFAULT = "megatron-core"

local function looks_like_path(s)
  return s:find("/", 1, true) ~= nil or s:match("%.ya?ml$") ~= nil
end

-- names() -> sorted names of the bundled profiles
function M.names()
  return require("ndplan.io.files").bundled_names(M.CATALOG, "yaml")
end

local Stack = {}
Stack.__index = Stack

-- Checks a decoded profile; returns it as a Stack or nil, message naming the field.
local function check(doc, src)
  local function bad(field, what)
    return nil, string.format("%s: field '%s': %s", src, field, what)
  end
  if type(doc) ~= "table" then return bad("(top)", "expected a mapping") end
  if type(doc.name) ~= "string" or doc.name == "" then return bad("name", "expected a name") end
  local costs = doc.costs or {}
  if type(costs) ~= "table" then return bad("costs", "expected a mapping of cost = number") end
  local known = require("ndplan.c.estimate").costs()
  for k, v in pairs(costs) do
    if known[k] == nil then return bad("costs." .. tostring(k), "not a named cost") end
    if type(v) ~= "number" then return bad("costs." .. k, "expected a number") end
  end
  local devices = doc.devices or {}
  if type(devices) ~= "table" then return bad("devices", "expected a mapping of device entries") end
  for name, e in pairs(devices) do
    if type(e) ~= "table" or (e.efficiency ~= nil and type(e.efficiency) ~= "table") then
      return bad("devices." .. tostring(name), "expected {efficiency = {...}, fit = {...}}")
    end
  end
  if doc.memory_band ~= nil and not (type(doc.memory_band) == "number" and doc.memory_band >= 0
                                      and doc.memory_band < 1) then
    return bad("memory_band", "expected a share in [0, 1)")
  end
  if doc.fallback ~= nil and devices[doc.fallback] == nil then
    return bad("fallback", "names no device entry of the profile")
  end
  return setmetatable({name = doc.name, description = doc.description or "", costs = costs,
                       devices = devices, fallback = doc.fallback, source = src,
                       memory_band = doc.memory_band or 0}, Stack)
end

-- Reads a name or a path (deps: the files read, ndplan.loaded) -> stack | nil, message.
local function read_profile(x, deps)
  local bundled = M.CATALOG .. "/" .. x:lower() .. ".yaml"
  local found = false
  for _, p in ipairs(bundle.list(M.CATALOG)) do found = found or p == bundled end
  local doc, err, name
  if found then
    loaded.bundled(deps, bundled)  -- its stat before the read
    local text
    text, name = bundle.read(bundled)
    if not text then return nil, name end
    doc, err = yaml.decode(text, name)
  elseif looks_like_path(x) then
    loaded.watch(deps, x)
    doc, err = yaml.load_file(x)
    name = x
  else
    return nil, string.format("unknown stack '%s' (bundled: %s, none; or a path to a .yaml "
                              .. "profile)", x, table.concat(M.names(), ", "))
  end
  if doc == nil then return nil, err end
  return check(doc, name)
end

-- Profiles read from a name or a path, parsed once while their file is unchanged; shared by
-- nd.estimate's calls (applying one to a device builds that device once per pair), never
-- handed to a caller, who gets a copy from load.
local cache = loaded.new()
-- fixed[name] -> the profile loaded from a bundled name, while nothing can change it (see
-- ndplan.config.loaded): read only
M.fixed = cache.fixed
local applied = setmetatable({}, {__mode = "k"})

-- shared(x) -> the cached profile (not to be changed) | nil [, message]: as load.
function M.shared(x)
  if x == nil then x = M.DEFAULT end
  if type(x) == "string" and x ~= "none" then  -- the common call: a name or a path, cached
    local s = cache:get(x)
    if s then return s end
  end
  if getmetatable(x) == Stack then return x end
  if x == nil then x = M.DEFAULT end
  if x == "none" then return nil end
  if type(x) == "table" then return check(x, "(stack table)") end
  if type(x) ~= "string" then
    error("stack.load: expected a profile name, a path or a table, got " .. type(x), 3)
  end
  local s = cache:get(x)
  if s then return s end
  local deps, err = {}, nil
  s, err = read_profile(x, deps)
  if s then cache:put(x, s, deps) end
  return s, err
end

-- A copy of the plain tables under t (values with a metatable, such as yaml.null, are kept).
local function copy(t)
  if type(t) ~= "table" or getmetatable(t) ~= nil then return t end
  local out = {}
  for k, v in pairs(t) do out[k] = copy(v) end
  return out
end

-- load(x) -> stack | nil, message. x: a bundled name, a path to a YAML profile, a table of
-- the same shape, or a loaded stack (returned as is). "none" gives nil and no message. A
-- name or a path gives the caller's own copy of the cached profile.
function M.load(x)
  local s, err = M.shared(x)
  if not s or s == x or type(x) == "table" then return s, err end
  local fields = {}
  for k, v in pairs(s) do fields[k] = copy(v) end
  return setmetatable(fields, Stack)
end

-- The profile's entry for a device: its own fit, or the fallback's (and which).
function Stack:entry(device)
  local key = device.name:lower()
  local own = self.devices[key]
  if own then return own, key, nil end
  if self.fallback then return self.devices[self.fallback], self.fallback, key end
  return nil
end

-- apply(stack, device, costs) -> device, costs, info | nil, message. info = {name, fit =
-- device entry used, scaled_from = the fallback's name when the device has no fit of its own}.
function M.apply(stack, device, costs)
  if stack == nil then return device, costs, nil end
  local entry, used, missing = stack:entry(device)
  local info = {name = stack.name, device_fit = used, note = nil, memory_band = stack.memory_band}
  if entry and entry.efficiency then
    local mine = applied[stack] or setmetatable({}, {__mode = "k"})
    applied[stack] = mine
    if not mine[device] then
      local dev, err = require("ndplan.config.device").with_efficiency(device, entry.efficiency,
                                                                stack.source)
      if not dev then return nil, err end
      mine[device] = dev
    end
    device = mine[device]
  end
  if missing then
    info.note = string.format("stack %s has no fit for %s: using %s's efficiencies", stack.name,
                              missing, used)
  elseif not entry then
    info.note = string.format("stack %s has no fit for %s: the device file's efficiencies",
                              stack.name, device.name:lower())
  end
  local merged = {}
  for k, v in pairs(stack.costs) do merged[k] = v end
  for k, v in pairs(costs or {}) do merged[k] = v end
  info.entry = entry
  return device, merged, info
end

-- family("fp8:tensorwise") -> "fp8": a recipe's precision family, the regimes' key
function M.family(precision)
  return (tostring(precision or "bf16"):match("^[^:]+"))
end

-- band(info, precision, moe) -> {pct, bias, runs, regime, widened} (nd.estimate copies these
-- five into each result) : the step-time uncertainty of an
-- estimate from the profile's residuals in its regime (device, precision, dense or MoE). A
-- regime without runs takes twice the widest band the device has, and says so.
function M.band(info, precision, moe)
  if not info or not info.entry then return nil end
  local bands = info.entry.bands or {}
  local regime = M.family(precision) .. "/" .. (moe and "moe" or "dense")
  local b = bands[regime]
  if b and (b.runs or 0) >= 1 then
    return {pct = b.mape, bias = b.bias, runs = b.runs, regime = regime}
  end
  local widest
  for _, x in pairs(bands) do widest = math.max(widest or 0, x.mape or 0) end
  if info.entry.fit and info.entry.fit.mape then
    widest = math.max(widest or 0, info.entry.fit.mape)
  end
  if not widest then return nil end
  return {pct = 2 * widest, runs = 0, regime = regime, widened = true}
end

return M
