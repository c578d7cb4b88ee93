-- The search configuration YAML (`ndplan search -s FILE`), the reference's layout: model,
-- seq_len, cluster, parallelism, constraint, recompute and precision, read into nd.search
-- arguments. A bad value is refused with the file and the field named
-- ("s.yaml: precision[2]: expected bf16, ..., got 'fp9'").
local M = {}

local failure = {}  -- the marker of a refusal raised inside read and returned by it

local function fail(message) error(setmetatable({message = message}, failure), 0) end

-- recipes(path, v): a search configuration's precision: a recipe name, a list of them or a
-- comma list as --precision takes; one recipe or the list, else a failure naming the file
-- and the entry.
local function recipes(path, v)
  local names = require("ndplan.config.device").recipe_names()
  local known = {}
  for _, n in ipairs(names) do known[n] = true end
  local expected = table.concat(names, ", ", 1, #names - 1) .. " or " .. names[#names]
  local list, where = {}, {}
  if type(v) == "string" then
    for w in v:gmatch("[^,%s]+") do list[#list + 1] = w; where[#list] = "precision" end
  elseif type(v) == "table" then
    for k in pairs(v) do
      if math.type(k) ~= "integer" or k < 1 or k > #v then
        fail(string.format("%s: precision: expected a recipe or a list of recipes, got a "
                           .. "mapping", path))
      end
    end
    for i, x in ipairs(v) do list[i] = x; where[i] = string.format("precision[%d]", i) end
  else
    fail(string.format("%s: precision: expected a recipe or a list of recipes, got %s",
                       path, type(v) == "nil" and "nothing" or tostring(v)))
  end
  if #list == 0 then
    fail(path .. ": precision: expected a recipe or a list of recipes, got an empty list")
  end
  for i, x in ipairs(list) do
    if type(x) ~= "string" or not known[x] then
      fail(string.format("%s: %s: expected %s, got %s", path, where[i], expected,
                         type(x) == "string" and "'" .. x .. "'" or tostring(x)))
    end
  end
  return #list == 1 and list[1] or list
end

-- read(path) -> args, declared | nil, message: the nd.search arguments the file states
-- (the command line's flags override them) and, per dimension it states, "declared"
function M.read(path)
  local args, declared = {}, {}
  local ok, err = pcall(function()
    local doc, yerr = require("ndplan.io.yaml").load_file(path)
    if doc == nil then fail(yerr) end
    if type(doc) ~= "table" then fail(path .. ": expected a mapping") end
    local KNOWN = {model = true, seq_len = true, cluster = true, parallelism = true,
                   constraint = true, recompute = true, precision = true, train_yaml = true}
    for k in pairs(doc) do
      if not KNOWN[k] then fail(string.format("%s: unknown key '%s' (expected model, seq_len, "
        .. "cluster, parallelism, constraint, recompute, precision)", path, tostring(k))) end
    end
    if doc.train_yaml then fail(path .. ": train_yaml: not supported; give model: NAME|PATH") end
    local function field(t, key, kind, where)
      local v = t[key]
      if v ~= nil and type(v) ~= kind then
        fail(string.format("%s: %s.%s: expected a %s, got %s", path, where, key, kind, type(v)))
      end
      return v
    end
    local function count(t, key, where)  -- a whole number above 0, never rounded or replaced
      local v = field(t, key, "number", where)
      if v ~= nil and not (math.tointeger(v) and v >= 1 and v <= 0x7fffffff) then
        fail(string.format("%s: %s.%s: expected a whole number from 1 to 2147483647, got %s",
                           path, where, key, tostring(v)))
      end
      return math.tointeger(v)
    end
    if doc.model ~= nil then
      if type(doc.model) == "string" then args.model = doc.model
      elseif type(doc.model) == "table" then
        args.model = field(doc.model, "name", "string", "model")
        args.seq_len = count(doc.model, "seq_length", "model")
      else fail(path .. ": model: expected a name or a mapping") end
    end
    args.seq_len = count(doc, "seq_len", "(top)") or args.seq_len
    local cluster = doc.cluster or {}
    if type(cluster) ~= "table" then fail(path .. ": cluster: expected a mapping") end
    local nodes = count(cluster, "num_nodes", "cluster")
    local per = count(cluster, "cards_per_node", "cluster") or 8
    if nodes then args.devices = nodes * per end
    args.device = field(cluster, "device_type", "string", "cluster")
    -- the reference's *_gb are GiB as numbers; a string is a size with its unit ("80GiB")
    local function memory(t, key, where)
      if type(t[key]) ~= "string" then
        local n = field(t, key, "number", where)
        return n and n * 2^30
      end
      local bytes, err = require("ndplan.io.grammar").size(t[key])
      if not bytes then fail(string.format("%s: %s.%s: %s", path, where, key, err)) end
      return bytes
    end
    local mem = memory(cluster, "device_memory_gb", "cluster")
    local constraint = doc.constraint or {}
    if type(constraint) ~= "table" then fail(path .. ": constraint: expected a mapping") end
    args.global_batch = count(constraint, "global_batch_size", "constraint")
    local limit = memory(constraint, "memory_limit_gb", "constraint") or mem
    if limit then  -- a number is the reference's (binary) GB, a string a size with its unit
      if not (limit > 0 and limit < math.huge) then
        local raw = constraint.memory_limit_gb
        if raw == nil then raw = cluster.device_memory_gb end
        fail(string.format("%s: memory limit: expected a finite number of GB above 0 (or a "
                           .. "size with its unit), got %s", path, tostring(raw)))
      end
      args.max_mem = limit
    end
    local par = doc.parallelism or {}
    if type(par) ~= "table" then fail(path .. ": parallelism: expected a mapping") end
    local KEYS = {dp = "dp", tp = "tp", pp = "pp", cp = "cp", ep = "ep", etp = "etp", vpp = "vpp",
                  micro_batch_num = "mb", micro_batch_size = "mbs", sp = "sp", zero = "zero",
                  dp_shard = "dp_shard", dp_replicate = "dp_replicate"}
    for k, v in pairs(par) do
      local d = KEYS[k]
      if k == "fsdp" then
        fail(path .. ": parallelism.fsdp: give zero: 0-3 (and dp_shard or dp_replicate for HSDP)")
      end
      if not d then fail(string.format("%s: parallelism.%s: unknown dimension (expected %s)", path,
                                       tostring(k), "dp, tp, pp, cp, ep, etp, vpp, micro_batch_num, micro_batch_size, sp, zero, dp_shard, dp_replicate")) end
      if v == "auto" then args[d] = "auto"
      elseif type(v) == "table" then
        for _, x in ipairs(v) do
          if d ~= "sp" and math.type(x) ~= "integer" then
            fail(string.format("%s: parallelism.%s: expected integers, a scalar or auto", path, k))
          end
        end
        args[d] = #v == 1 and v[1] or v
      elseif d == "sp" and type(v) == "boolean" or math.type(v) == "integer" then args[d] = v
      else fail(string.format("%s: parallelism.%s: expected an integer, a list or auto, got %s",
                              path, k, tostring(v))) end
      declared[d] = "declared"
    end
    if doc.recompute ~= nil then
      local r = doc.recompute
      if r == false then r = "off" end
      if type(r) == "table" then
        local list = {}
        for i, x in ipairs(r) do list[i] = x == false and "off" or x end
        r = list
      end
      args.recompute = r
      declared.recompute = "declared"
    end
    if doc.precision ~= nil then  -- a recipe, a list of them (each walked) or "bf16,fp8:mxfp8"
      args.precision = recipes(path, doc.precision)
    end
  end)
  if ok then return args, declared end
  if getmetatable(err) == failure then return nil, err.message end
  error(err, 0)
end

return M
