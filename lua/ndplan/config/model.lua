-- Models: load one from a bundled name, a config file or a table; list the bundled names.
--
--   load(x [, opts]) -> model | nil, message
--     x: a bundled name ("llama3.1-8b", any case), a path to a config.json/.json/.yaml/.yml
--     file or to a directory holding config.json, a Lua table in config.json form (or, with
--     model_type = "ndplan", in canonical form: see ndplan.c.model.fields()), or a model.
--     opts.strict: what the loader would warn about (an assumption, a field it does not
--     read) is an error instead. A Hub id ("org/name") that is no local path is refused with
--     how to give its config.json: ndplan never downloads.
--   names() -> sorted array of the bundled model names
--
-- The model is an ndplan.c.model userdata: model:params(), model:layers(), model:spec(),
-- model:warnings() (what the loader had to assume), model.source (where it came from).
local bundle = require "ndplan.c.bundle"
local cmodel = require "ndplan.c.model"
local json = require "ndplan.io.json"
local hfconfig = require "ndplan.config.hfconfig"
local loaded = require "ndplan.config.loaded"

local M = {}

local DIR = "examples/models"
local NAME_MAX = 63  -- ND_NAME_MAX - 1

function M.names()
  return require("ndplan.io.files").bundled_names(DIR, "json")
end

local function bundled_name(x)
  local lower = x:lower()
  for _, n in ipairs(M.names()) do
    if n:lower() == lower then return n end
  end
  return nil
end

-- The name a file gives its model: the file's base name, or its directory's for config.json.
local function name_from_path(path)
  local dir, base = path:match("^(.-)([^/]*)$")
  local stem = base:gsub("%.[^.]*$", "")
  if stem == "config" then
    local parent = dir:gsub("/+$", ""):match("([^/]+)$")
    if parent and parent ~= "." and parent ~= ".." then stem = parent end
  end
  if stem == "" then stem = "model" end
  return stem:sub(1, NAME_MAX)
end

local function decode_file(path)
  if path:lower():match("%.ya?ml$") then
    return require("ndplan.io.yaml").load_file(path)  -- loaded only when a YAML file comes
  end
  return json.load_file(path)
end

-- Something there that is not a folder (a FIFO or device too: reading it then says what it is,
-- where opening it to probe would block)
local function is_file(path)
  local kind = require("ndplan.c.files").kind(path)
  return kind ~= nil and kind ~= "directory"
end

-- A config table -> model | nil, message (messages start with the source).
local function from_config(cfg, name, source, strict)
  if type(cfg) ~= "table" then
    return nil, ("%s: expected an object of config fields, got %s"):format(source, type(cfg))
  end
  local spec, warnings
  if cfg.model_type == "ndplan" then  -- already canonical: only drop the marker
    spec, warnings = {}, {}
    for k, v in pairs(cfg) do
      if k ~= "model_type" then spec[k] = v end
    end
    if spec.name == nil then spec.name = name end
  else
    spec, warnings = hfconfig.to_spec(cfg, {source = source, name = name, strict = strict})
    if not spec then return nil, warnings end
  end
  -- the name goes into trainer files and shell scripts: printable, no control characters
  if type(spec.name) == "string" and spec.name:find("%c") then
    local shown = spec.name:gsub("%c", function(c) return ("\\%03d"):format(c:byte()) end)
    return nil, ("%s: name: expected printable characters, got '%s'"):format(source, shown)
  end
  local model, err = cmodel.new(spec, {source = source, warnings = warnings})
  if not model then return nil, source .. ": " .. err end
  return model
end

-- "PATH: field 'KEY' ..." -> "PATH:LINE:COL: field 'KEY' ...", at the key's first
-- occurrence in the file ("KEY": in JSON, KEY: at a line's start in YAML)
local function with_position(path, msg)
  local key = msg:sub(#path + 1):match("^: field '([%w_]+)'")
  if not key then return msg end
  local text = require("ndplan.io.files").read(path)
  if not text then return msg end
  local at = text:find('"' .. key .. '"%s*:') or text:find("\n%s*" .. key .. "%s*:")
                                              or (text:find("^%s*" .. key .. "%s*:") and 1)
  if not at then return msg end
  if text:sub(at, at) == "\n" then at = text:find(key, at, true) end
  local line, col = require("ndplan.io.files").line_col(text, at)
  return string.format("%s:%d:%d%s", path, line, col, msg:sub(#path + 1))
end

local function from_file(path, strict, deps)
  if deps then loaded.watch(deps, path) end
  local cfg, err = decode_file(path)
  if cfg == nil then return nil, err end
  local m, merr = from_config(cfg, name_from_path(path), path, strict)
  if not m and type(merr) == "string" then return nil, with_position(path, merr) end
  return m, merr
end

-- A name or a path -> model | nil, message; deps gets the files read (ndplan.loaded).
local function from_string(x, strict, deps)
  local lower = x:lower()
  if lower:match("%.json$") or lower:match("%.ya?ml$") then return from_file(x, strict, deps) end
  local name = bundled_name(x)
  if name then
    loaded.bundled(deps, DIR .. "/" .. name .. ".json")
    local text, shown = bundle.read(DIR .. "/" .. name .. ".json")
    if not text then return nil, shown end
    local cfg, err = json.decode(text, shown)
    if cfg == nil then return nil, err end
    return from_config(cfg, name, shown, strict)
  end
  local dir_config = x:gsub("/+$", "") .. "/config.json"
  if is_file(dir_config) then return from_file(dir_config, strict, deps) end
  if is_file(x) then return from_file(x, strict, deps) end
  if x:match("^[%w][%w._-]*/[%w][%w._-]*$") then  -- org/name: a Hugging Face Hub id
    return nil, ("'%s' looks like a Hugging Face Hub id, and ndplan does not download: fetch"
                 .. " its config.json (huggingface-cli download %s config.json --local-dir DIR,"
                 .. " or https://huggingface.co/%s/resolve/main/config.json) and give -m DIR"
                 .. " or -m DIR/config.json"):format(x, x, x)
  end
  return nil, ("unknown model '%s': not a bundled model (%s) nor a readable file")
                :format(x, table.concat(M.names(), ", "))
end

-- Models loaded from a name or a path, by (strict, the string): a model is immutable, so
-- callers share it; a file that changes is read again (ndplan.loaded).
local cache = loaded.new()
-- fixed[name] -> the model loaded from a bundled name, while nothing can change it (see
-- ndplan.config.loaded): read only
M.fixed = cache.fixed

function M.load(x, opts)
  if opts == nil and type(x) == "string" then  -- the common call: a name or a path, cached
    local m = cache:get(x)
    if m then return m end
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("ndplan.model.load: expected a table of options, got " .. type(opts), 2)
  end
  local strict = opts and opts.strict or false
  if cmodel.is(x) then
    local w = x:warnings()
    if strict and #w > 0 then
      return nil, ("%s: strict: %d assumption(s): %s"):format(x.source or x.name, #w,
                                                             table.concat(w, "; "))
    end
    return x
  end
  if type(x) == "table" then
    local name = type(x.name) == "string" and x.name:sub(1, NAME_MAX) or "custom"
    return from_config(x, name, "(table)", strict)
  end
  if type(x) ~= "string" then
    error("ndplan.model.load: expected a model name, a path or a table, got " .. type(x), 2)
  end
  local key = (strict and "strict:" or "") .. x
  local m = cache:get(key)
  if m then return m end
  local deps = {}
  local err
  m, err = from_string(x, strict, deps)
  if m then cache:put(key, m, deps) end
  return m, err
end

-- config(x) -> the raw config table a bundled name, a file or a table gives (what the
-- model was built from: trainer exporters read the fidelity fields the sizing skips, such
-- as rope_theta, rms_norm_eps and the router), or nil when x is a model or unreadable.
function M.config(x)
  if cmodel.is(x) then  -- the file it came from, or the bundled model of its name
    local src = x.source
    if type(src) ~= "string" or src:sub(1, 1) == "(" then return nil end
    if bundled_name(x.name) and src:sub(-#(x.name .. ".json")) == x.name .. ".json" then
      return M.config(x.name)
    end
    return M.config(src)
  end
  if type(x) == "table" then return x end
  if type(x) ~= "string" then return nil end
  local lower = x:lower()
  local name = not (lower:match("%.json$") or lower:match("%.ya?ml$")) and bundled_name(x)
  if name then
    local text, shown = bundle.read(DIR .. "/" .. name .. ".json")
    return text and json.decode(text, shown) or nil
  end
  local path = is_file(x) and x or x:gsub("/+$", "") .. "/config.json"
  if not is_file(path) then return nil end
  local cfg = decode_file(path)
  return type(cfg) == "table" and cfg or nil
end

return M
