-- Devices: the bundled catalog (examples/devices/*.yaml), user YAML files and Lua tables,
-- all turned into the read-only device userdata of ndplan.c.device.
--
-- Device file schema (every quantity carries its unit; all link bandwidths are per
-- direction per device; peaks are dense, i.e. without 2:4 sparsity):
--
--   base: h100                 # optional: start from a bundled device or another file
--                              #   (a relative path is relative to this file) and override
--   name: H100                 # required unless inherited
--   description: free text
--   peak_tflops: {bf16: 989, fp16: 989, fp8: 1979}   # TFLOP/s (1e12); bf16 required,
--                              #   fp16 defaults to bf16; a missing fp8, mxfp8 (FP8 with
--                              #   hardware E8M0 block scales), nvfp4 or mxfp4 means the
--                              #   part lacks it, and recipes needing it are refused
--   hbm: {capacity: 80GB, bandwidth: 3.35TB/s}
--   scale_up: {domain: 8, bandwidth: 450GB/s, latency: 10us}   # domain = devices in it
--   scale_out: {bandwidth: 400Gb/s, latency: 20us}             # this device's NIC share
--   host_link: {bandwidth: 64GB/s, latency: 10us}
--   efficiency: {gemm: 0.8, gemm_half_size: 1GFLOP, hbm: 0.85, scale_up: 0.65,
--                scale_out: 0.9, kernel_overhead: 20us}  # fractions of the peaks above;
--                              #   kernel_overhead: launch/sync time per layer per pass
--   reserve: 2.5GiB            # HBM the model never gets (runtime, buffers, fragmentation)
--   node_size: 4               # devices per host, sharing its NICs and CPUs (launchers start
--                              #   this many ranks per node); default: the scale-up domain
--
-- Optional fields default to nd_device_init's values (latencies, efficiencies, reserve);
-- gemm_half_size defaults to the FLOPs of 1 us of work at bf16 peak. In a YAML file sizes,
-- rates and times must be strings with units (see ndplan.grammar); in a Lua table a plain
-- number is taken as SI (bytes, bytes/s, seconds).
local cdev = require "ndplan.c.device"
local bundle = require "ndplan.c.bundle"
local grammar = require "ndplan.io.grammar"
local yaml = require "ndplan.io.yaml"
local loaded = require "ndplan.config.loaded"

local M = {}

local CATALOG = "examples/devices"
local MAX_BASE_DEPTH = 8

---------------------------------------------------------------------------------------------
-- Field kinds: value (as written) -> canonical number | nil, "expected ..."
---------------------------------------------------------------------------------------------
-- A value as messages show it: a string quoted and cut at 40 bytes (a file that is not YAML,
-- /etc/passwd given as base, is named, not echoed), control characters escaped.
local function describe(v)
  if type(v) == "string" then
    local shown = v:sub(1, 40):gsub("%c", function(c) return string.format("\\%03d", c:byte()) end)
    return "'" .. shown .. "'" .. (#v > 40 and string.format("... (%d bytes)", #v) or "")
  end
  if type(v) == "table" then return "a table" end
  if v == yaml.null then return "null" end
  return tostring(v)
end

local function with_unit(parse, expected)
  return function(v, from_lua)
    if type(v) == "number" and from_lua then return v end
    if type(v) == "string" then
      local n = parse(v)
      if n then return n end
    end
    return nil, expected
  end
end

local KINDS = {
  size = with_unit(grammar.size, "expected a size like 80GB or 80GiB"),
  rate = with_unit(grammar.rate, "expected a rate per direction like 450GB/s or 400Gb/s"),
  time = with_unit(grammar.time, "expected a time like 10us or 1.5ms"),
  flop = function(v)
    if type(v) == "number" and v >= 0 then return v end
    if type(v) == "string" then
      local n = grammar.flop(v)
      if n then return n end
    end
    return nil, "expected a FLOP count like 1GFLOP or 1e9"
  end,
  tflops = function(v)
    if type(v) == "number" and v >= 0 and v < math.huge then return v * 1e12 end
    return nil, "expected dense TFLOP/s as a number like 989"
  end,
  count = function(v)
    if math.type(v) == "integer" and v >= 1 then return v end
    if math.type(v) == "float" and v >= 1 and v == math.floor(v) and v < 2^31 then
      return math.tointeger(v)
    end
    return nil, "expected a whole number of devices like 8"
  end,
  fraction = function(v)
    if type(v) == "number" and v > 0 and v <= 1 then return v end
    return nil, "expected a fraction in (0, 1] like 0.8"
  end,
  keys = function(v)
    if type(v) == "number" and v >= 0 and v < math.huge then return v end
    return nil, "expected a number of keys per query like 1024 (0: no size effect)"
  end,
  string = function(v)
    if type(v) == "string" then return v end
    return nil, "expected a string"
  end,
}

-- Human schema: key -> {kind, canonical field [, canonical sub-field]} or a nested table.
local SCHEMA = {
  base = {"string"},
  name = {"string", "name"},
  description = {"string", "description"},
  peak_tflops = {
    bf16 = {"tflops", "peak_flops", "bf16"},
    fp16 = {"tflops", "peak_flops", "fp16"},
    fp8 = {"tflops", "peak_flops", "fp8"},
    mxfp8 = {"tflops", "peak_flops", "mxfp8"},
    nvfp4 = {"tflops", "peak_flops", "nvfp4"},
    mxfp4 = {"tflops", "peak_flops", "mxfp4"},
  },
  hbm = {
    capacity = {"size", "hbm_bytes"},
    bandwidth = {"rate", "hbm_bandwidth"},
  },
  scale_up = {
    domain = {"count", "scale_up", "domain_size"},
    bandwidth = {"rate", "scale_up", "bandwidth"},
    latency = {"time", "scale_up", "latency"},
  },
  scale_out = {
    bandwidth = {"rate", "scale_out", "bandwidth"},
    latency = {"time", "scale_out", "latency"},
  },
  host_link = {
    bandwidth = {"rate", "host_link", "bandwidth"},
    latency = {"time", "host_link", "latency"},
  },
  efficiency = {},  -- one field per core descriptor (ndplan/fields.h), below
  reserve = {"size", "reserve_bytes"},
  node_size = {"count", "node_size"},
}

for _, f in ipairs(require("ndplan.c.estimate").names().efficiency) do
  SCHEMA.efficiency[f.name] = {f.unit, "efficiency", f.name}  -- the unit is a KINDS entry
end

-- Needed when there is no base to inherit from.
local REQUIRED = {"name", "peak_tflops.bf16", "hbm.capacity", "hbm.bandwidth",
                  "scale_up.domain", "scale_up.bandwidth", "scale_out.bandwidth",
                  "host_link.bandwidth"}

local function is_leaf(spec) return type(spec[1]) == "string" end

local sorted_keys = require("ndplan.io.order").sorted_keys  -- YAML keys of any type

---------------------------------------------------------------------------------------------
-- Sources: where a description came from, to prefix messages ("file:line:col: ")
---------------------------------------------------------------------------------------------
local function where(src, container, key)
  local lc = src.marks and src.marks[container] and src.marks[container][key]
  if lc then return src.name .. ":" .. lc .. ": " end
  return src.name .. ": "
end

local function dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

local bundled_path  -- forward: name -> catalog path or nil
local deps_sink     -- while M.load reads a name or a path: the files read (ndplan.loaded)
local load_source   -- forward: (x, seen, depth, relative_to) -> device | nil, msg

---------------------------------------------------------------------------------------------
-- Human table -> canonical table -> device
---------------------------------------------------------------------------------------------

-- Checks keys against the schema, recursively. Returns true or nil, message.
local function check_keys(src, t, schema, prefix)
  for _, k in ipairs(sorted_keys(t)) do
    local spec = type(k) == "string" and schema[k]
    local path = prefix .. tostring(k)
    if not spec then
      return nil, string.format("%sunknown key '%s' (expected one of: %s)", where(src, t, k),
                                path, table.concat(sorted_keys(schema), ", "))
    end
    if not is_leaf(spec) then
      if type(t[k]) ~= "table" then
        return nil, string.format("%sfield '%s': expected a mapping of %s, got %s",
                                  where(src, t, k), path,
                                  table.concat(sorted_keys(spec), ", "), describe(t[k]))
      end
      local ok, err = check_keys(src, t[k], spec, path .. ".")
      if not ok then return nil, err end
    end
  end
  return true
end

-- Converts every leaf of `t` into `canon`. Returns true or nil, message.
local function convert(src, t, schema, prefix, canon)
  for _, k in ipairs(sorted_keys(t)) do
    local spec, path = schema[k], prefix .. k
    if is_leaf(spec) then
      if spec[2] then
        local v, expected = KINDS[spec[1]](t[k], src.from_lua)
        if v == nil then
          return nil, string.format("%sfield '%s': %s, got %s", where(src, t, k), path,
                                    expected, describe(t[k]))
        end
        if spec[3] then
          canon[spec[2]] = canon[spec[2]] or {}
          canon[spec[2]][spec[3]] = v
        else
          canon[spec[2]] = v
        end
      end
    else
      local ok, err = convert(src, t[k], spec, path .. ".", canon)
      if not ok then return nil, err end
    end
  end
  return true
end

local function has_path(t, path)
  for part in path:gmatch("[^.]+") do
    if type(t) ~= "table" then return false end
    t = t[part]
  end
  return t ~= nil
end

-- Builds a device from a decoded description `t` (YAML mapping or Lua table).
local function from_description(t, src, seen, depth)
  if type(t) ~= "table" then
    return nil, src.name .. ": expected a mapping of device fields, got " .. (type(t) == "string"
      and string.format("plain text (%d bytes)", #t) or describe(t))  -- a file's text is not echoed
  end
  local ok, err = check_keys(src, t, SCHEMA, "")
  if not ok then return nil, err end
  local canon = {}
  if t.base ~= nil then
    if type(t.base) ~= "string" then
      return nil, where(src, t, "base") .. "field 'base': expected a device name or path, got "
        .. describe(t.base)
    end
    local base, berr = load_source(t.base, seen, depth + 1, src.dir)
    if not base then return nil, where(src, t, "base") .. "base '" .. t.base .. "': " .. berr end
    canon = base:totable()
    if has_path(t, "peak_tflops.bf16") and not has_path(t, "efficiency.gemm_half_size") then
      canon.efficiency.gemm_half_size = nil  -- re-derive the size curve from the new peak
    end
  else
    for _, path in ipairs(REQUIRED) do
      if not has_path(t, path) then
        return nil, string.format("%s: field '%s' is missing (give it, or inherit it with "
                                  .. "base: <device>)", src.name, path)
      end
    end
  end
  ok, err = convert(src, t, SCHEMA, "", canon)
  if not ok then return nil, err end
  -- the name goes into messages and reports: printable, no control characters (as a model's)
  if type(t.name) == "string" and t.name:find("%c") then
    local shown = t.name:gsub("%c", function(c) return ("\\%03d"):format(c:byte()) end)
    return nil, where(src, t, "name") .. "field 'name': expected printable characters, got '"
      .. shown .. "'"
  end
  if t.base == nil and canon.peak_flops.fp16 == nil then
    canon.peak_flops.fp16 = canon.peak_flops.bf16  -- the same tensor-core rate on every part
  end
  local dev, derr = cdev.new(canon)
  if not dev then return nil, src.name .. ": " .. derr end
  return dev
end

---------------------------------------------------------------------------------------------
-- Loading by name, path or table
---------------------------------------------------------------------------------------------
function bundled_path(name)
  local want = CATALOG .. "/" .. name:lower() .. ".yaml"
  for _, p in ipairs(bundle.list(CATALOG)) do
    if p == want then return p end
  end
  return nil
end

local function looks_like_path(s)
  return s:find("/", 1, true) ~= nil or s:match("%.ya?ml$") ~= nil
end

-- x: bundled name, path or description table. `dir` resolves relative base paths.
function load_source(x, seen, depth, dir)
  if depth > MAX_BASE_DEPTH then
    return nil, "base chain deeper than " .. MAX_BASE_DEPTH .. " (a cycle?)"
  end
  if type(x) == "table" then
    return from_description(x, {name = "(device table)", from_lua = true}, seen, depth)
  end
  local key, text, name, err
  local path = bundled_path(x)
  if path then
    key = "bundled:" .. path
    if deps_sink then loaded.bundled(deps_sink, path) end  -- its stat before the read
    text, name = bundle.read(path)
    if not text then return nil, name end
  elseif looks_like_path(x) then
    name = (dir and x:sub(1, 1) ~= "/") and (dir .. "/" .. x) or x
    key = "file:" .. name
    if deps_sink then loaded.watch(deps_sink, name) end
  else
    return nil, string.format("unknown device '%s' (bundled: %s; or give a path to a .yaml "
                              .. "file)", x, table.concat(M.names(), ", "))
  end
  if seen[key] then return nil, "base cycle through '" .. x .. "'" end
  seen[key] = true
  local doc, marks
  if text then doc, marks = yaml.decode(text, name, true)
  else doc, marks = yaml.load_file(name, true) end
  if doc == nil then seen[key] = nil; return nil, marks end
  err = nil
  local dev
  dev, err = from_description(doc, {name = name, marks = marks, dir = dirname(name)}, seen,
                              depth)
  seen[key] = nil
  return dev, err
end

-- with_efficiency(device, values, source) -> device | nil, message: the device with the
-- efficiency fields of `values` (the file schema's units, or plain SI numbers) replaced; a
-- stack profile's per-device fit. `source` names the file in messages.
function M.with_efficiency(device, values, source)
  local canon = device:totable()
  local src = {name = source or "(efficiency)", from_lua = true}
  local ok, err = check_keys(src, {efficiency = values}, SCHEMA, "")
  if not ok then return nil, err end
  ok, err = convert(src, {efficiency = values}, SCHEMA, "", canon)
  if not ok then return nil, err end
  return cdev.new(canon)
end

-- load(x) -> device | nil, message. x: a bundled name (case-insensitive), a path to a YAML
-- device file, a description table (the file schema above), or a device (returned as is).
-- Devices loaded from a name or a path, with every file of their base chain: a device is
-- immutable, so callers share it; a file that changes is read again.
local cache = loaded.new()
-- fixed[name] -> the device loaded from a bundled name, while nothing can change it (see
-- ndplan.config.loaded): read only
M.fixed = cache.fixed

function M.load(x)
  if type(x) == "string" then  -- the common call: a name or a path, cached
    local dev = cache:get(x)
    if dev then return dev end
  end
  if cdev.is(x) then return x end
  if type(x) ~= "string" and type(x) ~= "table" then
    error("device.load: expected a device name, a path or a table, got " .. type(x), 2)
  end
  if type(x) == "table" then return load_source(x, {}, 0, nil) end
  local deps, dev = {}, nil
  deps_sink = deps
  local err
  dev, err = load_source(x, {}, 0, nil)
  deps_sink = nil
  if dev then cache:put(x, dev, deps) end
  return dev, err
end

-- names() -> sorted names of the bundled devices
function M.names()
  return require("ndplan.io.files").bundled_names(CATALOG, "yaml")
end

-- new(canonical) -> device | nil, message: from SI fields (what dev:totable() returns).
M.new = cdev.new
M.is = cdev.is
M.precisions = cdev.precisions
M.recipes = cdev.recipes

-- recipe_names() -> the names a precision takes, in the core's table order, with "fp8"
-- (the default FP8 recipe, recipes().default_fp8) after fp16
function M.recipe_names()
  local names = {}
  for _, r in ipairs(cdev.recipes()) do
    names[#names + 1] = r.name
    if r.name == "fp16" then names[#names + 1] = "fp8" end
  end
  return names
end

return M
