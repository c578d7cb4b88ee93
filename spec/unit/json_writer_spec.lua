-- json.encode's C writer (engine/bind/ljson.c) against the Lua writer it replaced, kept here
-- as the oracle: thousands of random nested values (arrays, plain and ordered objects,
-- integers, floats of every size, NaN and infinities, strings with control bytes and UTF-8,
-- booleans, null, tables read through __index/__len/__pairs/__tostring, nd.estimate's lazy
-- result tables), with and without shortest and indent: the same bytes, or the same error.
local nd = require "ndplan"
local json = require "ndplan.io.json"

local ORDERED = getmetatable(json.object({}))

-- The Lua writer as it was before ljson.c (lua/ndplan/io/json.lua), unchanged but for M.
local M = json
local function number(v, shortest)
  if v ~= v or v == math.huge or v == -math.huge then return "null" end
  if shortest then return M.shortest(v) end
  if math.type(v) == "integer" then return string.format("%d", v) end
  if v == math.floor(v) and math.abs(v) < 2^53 then return string.format("%.0f", v) end
  return string.format("%.17g", v)
end

local NAMED = {['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\t'] = '\\t', ['\r'] = '\\r'}
local function escape(c) return NAMED[c] or string.format("\\u%04x", c:byte()) end
local function encode(v, out, depth, opts)
  local t = type(v)
  if depth > M.MAX_DEPTH then
    error(string.format("json.encode: nested deeper than %d (a cycle?)", M.MAX_DEPTH), 0)
  end
  if v == nil or v == M.null then out[#out + 1] = "null"
  elseif t == "boolean" then out[#out + 1] = tostring(v)
  elseif t == "number" then out[#out + 1] = number(v, opts.shortest)
  elseif t == "string" then
    if v:find('[%c"\\]') then out[#out + 1] = '"' .. v:gsub('[%c"\\]', escape) .. '"'
    else out[#out + 1] = '"' .. v .. '"' end
  elseif t == "table" then
    local ordered, n, keys = getmetatable(v) == ORDERED, #v, nil
    local array = not ordered and (n > 0 or next(v) == nil)
    if not ordered and not array then
      keys = {}
      for k in pairs(v) do keys[#keys + 1] = tostring(k) end
      table.sort(keys)
      n = #keys
    end
    if n == 0 then out[#out + 1] = array and "[]" or "{}"; return end
    local inner = opts.indent and "\n" .. string.rep(opts.indent, depth + 1)
    out[#out + 1] = array and "[" or "{"
    for i = 1, n do
      if i > 1 then out[#out + 1] = "," end
      if inner then out[#out + 1] = inner end
      local key, val
      if ordered then key, val = v[i][1], v[i][2]
      elseif keys then
        key, val = keys[i], v[keys[i]]
        if val == nil then val = v[math.tointeger(tonumber(key))] end
      else val = v[i] end
      if key ~= nil then
        encode(tostring(key), out, depth + 1, opts)
        out[#out + 1] = inner and ": " or ":"
      end
      encode(val, out, depth + 1, opts)
    end
    if inner then out[#out + 1] = "\n" .. string.rep(opts.indent, depth) end
    out[#out + 1] = array and "]" or "}"
  else
    error("json.encode: cannot encode a " .. t, 0)
  end
end

local function oracle(value, opts)
  local out = {}
  encode(value, out, 0, opts or {})
  return table.concat(out)
end

-- Random values. gen(rnd, depth) builds one from a generator's draws only, so two calls
-- with generators of the same seed build two equal values (fresh lazy tables in each).
local function rng(seed)
  local state = seed * 2654435761 % 281474976710656
  local function draw(a, b)  -- a 48-bit LCG: its own draws, independent of math.random
    state = (state * 25214903917 + 11) % 281474976710656
    local u = state / 281474976710656
    if not a then return u end
    return a + math.floor(u * (b - a + 1))
  end
  for _ = 1, 4 do draw() end  -- past the first draws, which follow the seed closely
  return draw
end

local NUMBERS = {0, -0.0, 0.0, 1, -1, 3.0, 2^53, 2^53 - 1, 2^53 + 2, -2^53, 2^63, -2^63, 2^64,
                 math.maxinteger, math.mininteger, 5e-324, 2.2250738585072014e-308, 1e308,
                 1.7976931348623157e308, 0.1, 1 / 3, 1e15, 1e16, 1e17, 123456789012345678.0,
                 0 / 0, -(0 / 0), math.huge, -math.huge, 76660.58388671876, 1e-7, 0.5}
local PIECES = {"a", "Z", "0", " ", '"', "\\", "/", "\n", "\t", "\r", "\0", "\1", "\8", "\12",
                "\27", "\31", "\127", "\128", "\255", "é", "€", "😀", "ß", "\u{2028}", "key",
                "1", "-2", "3.5", "0x10", " 4", "nan", "true"}

local function gen_number(rnd)
  local pick = rnd(1, 6)
  if pick == 1 then return NUMBERS[rnd(1, #NUMBERS)]
  elseif pick == 2 then return rnd(-1000, 1000)
  elseif pick == 3 then return math.floor((rnd() - 0.5) * 2^rnd(1, 62))  -- an integer
  elseif pick == 4 then return (rnd() - 0.5) * 10.0 ^ rnd(-320, 308)
  elseif pick == 5 then return math.floor((rnd() - 0.5) * 2^rnd(1, 70)) + 0.0  -- integral float
  else return rnd(-100, 100) / rnd(1, 64) end
end

local function gen_string(rnd)
  local parts = {}
  for i = 1, rnd(0, 6) do parts[i] = PIECES[rnd(1, #PIECES)] end
  return table.concat(parts)
end

-- a key as tostring writes it from a table's own __tostring (never an address)
local function named_key(rnd)
  local name = "k" .. rnd(0, 9)
  return setmetatable({}, {__tostring = function() return name end})
end

local function gen_key(rnd)
  local pick = rnd(1, 8)
  if pick <= 4 then return gen_string(rnd)
  elseif pick == 5 then return rnd(-3, 12)
  elseif pick == 6 then return rnd(-8, 8) / 4  -- 1.5, and 2.0 (stored as the integer 2)
  elseif pick == 7 then return rnd(0, 1) == 1
  else return named_key(rnd) end
end

local ESTIMATES = {
  {model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 16, seq_len = 4096},
  {model = "llama3.1-70b", device = "h100", devices = 64, global_batch = 512, seq_len = 8192},
  {model = "deepseek-v3", device = "h800", devices = 256, global_batch = 1024, seq_len = 4096},
}

local gen
-- a table read through metamethods: values behind __index, a __len, and a __pairs that may
-- give keys the table answers only through the tonumber(key) lookup
local function proxy(rnd, depth)
  local backing, names = {}, {}
  for i = 1, rnd(0, 4) do backing[i] = gen(rnd, depth + 1) end
  for _ = 1, rnd(0, 4) do
    local k = gen_key(rnd)
    if type(k) ~= "table" then backing[k] = gen(rnd, depth + 1); names[#names + 1] = k end
  end
  local mt = {__index = backing}
  local kind = rnd(1, 4)
  if kind >= 2 then mt.__len = function() return #backing end end
  if kind == 3 then mt.__len = function() return #backing + 0.5 end end
  if kind >= 3 then
    local listed = {}
    for _, k in ipairs(names) do listed[#listed + 1] = k end
    listed[#listed + 1] = tostring(rnd(1, 3))  -- a string key: found as the integer
    mt.__pairs = function()
      local i = 0
      return function() i = i + 1; return listed[i] end, nil, nil
    end
  end
  if rnd(1, 3) == 1 then mt.__metatable = "protected" end
  return setmetatable({}, mt)
end

function gen(rnd, depth)
  local pick = rnd(1, depth > 4 and 7 or 14)
  if pick == 1 then return nil
  elseif pick == 2 then return json.null
  elseif pick == 3 then return rnd(0, 1) == 1
  elseif pick <= 5 then return gen_number(rnd)
  elseif pick <= 7 then return gen_string(rnd)
  elseif pick <= 9 then  -- an array, with a hole now and then
    local t = {}
    for i = 1, rnd(0, 6) do t[i] = gen(rnd, depth + 1) end
    if rnd(1, 6) == 1 then t[rnd(1, 4)] = nil end
    return t
  elseif pick <= 11 then  -- a plain object
    local t = {}
    for _ = 1, rnd(0, 6) do
      local k = gen_key(rnd)
      local v = gen(rnd, depth + 1)
      t[k] = v == nil and json.null or v
    end
    return t
  elseif pick == 12 then  -- an ordered object; a member without a key writes its value alone
    local members = {}
    for i = 1, rnd(0, 5) do
      local k
      if rnd(1, 12) > 1 then k = gen_key(rnd) end
      members[i] = {k, gen(rnd, depth + 1)}
    end
    if rnd(1, 8) == 1 then  -- ordered through __metatable, as getmetatable answers
      return setmetatable(members, {__metatable = ORDERED})
    end
    return json.object(members)
  elseif pick == 13 then return proxy(rnd, depth)
  else  -- a lazy result table, maybe with some fields read already
    local r = assert(nd.estimate(ESTIMATES[rnd(1, #ESTIMATES)]))
    if rnd(1, 2) == 1 then local _ = r.stages end
    if rnd(1, 3) == 1 then local _ = r.time_parts end
    return r
  end
end

local OPTIONS = {nil, {}, {shortest = true}, {indent = "  "}, {shortest = true, indent = "\t"},
                 {indent = ""}, {indent = 2}, {shortest = false, indent = false}}

local function run(f, v, opts)
  local ok, out = pcall(f, v, opts)
  return (ok and "ok: " or "error: ") .. tostring(out)
end

describe("json.encode (C) against the Lua writer it replaced", function()
  it("writes the same bytes for thousands of random values, with every option", function()
    local compared = 0
    for seed = 1, 3000 do
      local opts = OPTIONS[seed % #OPTIONS + 1]
      local a = gen(rng(seed), 0)
      local b = gen(rng(seed), 0)  -- the same value, its lazy tables fresh
      local want = run(oracle, a, opts)
      assert.equal(want, run(json.encode, b, opts), "seed " .. seed)
      assert.equal(want, run(json.encode, a, opts), "seed " .. seed .. ", read again")
      compared = compared + 1
    end
    assert.equal(3000, compared)
  end)

  it("writes the same bytes for nd.estimate's results, fresh and partly read", function()
    for _, args in ipairs(ESTIMATES) do
      for _, opts in ipairs({{}, {shortest = true}, {indent = "  "}}) do
        local fresh, other = assert(nd.estimate(args)), assert(nd.estimate(args))
        local _ = other.stages[1]
        local want = oracle(assert(nd.estimate(args)), opts)
        assert.equal(want, json.encode(fresh, opts))
        assert.equal(want, json.encode(other, opts))
        assert.is_true(#want > 1000)
      end
    end
  end)

  it("raises the same errors: a function, a thread, userdata, a cycle, too deep", function()
    local deep = {}
    local t = deep
    for _ = 1, 250 do t[1] = {}; t = t[1] end
    local cycle = {}
    cycle.self = cycle
    local cases = {print, {1, print}, {k = coroutine.create(print)}, io.stdout, deep, cycle,
                   json.object({{"a", {print}}})}
    for i, v in ipairs(cases) do
      for _, opts in ipairs({{}, {indent = " "}}) do
        local want = run(oracle, v, opts)
        assert.is_truthy(want:match("^error: json%.encode: "), i)
        assert.equal(want, run(json.encode, v, opts), i)
      end
    end
    local limit = json.MAX_DEPTH
    json.MAX_DEPTH = 3  -- read at each call, as the Lua writer did
    local ok, err = pcall(json.encode, {{{{1}}}})
    json.MAX_DEPTH = limit
    assert.is_false(ok)
    assert.equal("json.encode: nested deeper than 3 (a cycle?)", err)
  end)
end)
