-- The small languages users type, as LPeg grammars: sizes, rates, times, FLOP counts,
-- dimension lists and per-layer recompute specs. Every parser takes a string and returns a
-- value, or nil and "expected <what> at column N of '<text>'" (columns count bytes from 1).
-- A non-string argument is a programming error and raises.
--
-- Units. Prefixes are decimal (k M G T P E: powers of 1000) or binary (Ki Mi Gi Ti Pi Ei:
-- powers of 1024) and are read case-insensitively. A memory size is bytes whatever the
-- case of its last letter: 80GB = 80gb = 80e9 bytes, 80GiB = 80gib = 80 * 2^30 bytes, and a
-- bare number is refused with a suggestion ("did you mean 80GiB?"). Rates keep the case:
-- `B` is bytes and `b` is bits, so 450GB/s = 4.5e11 bytes/s and 400Gb/s = 5e10 bytes/s
-- (`/s` or `ps`: 400Gbps). Times take ns, us (or µs, μs), ms, s, min, h.
local lpeg = require "lpeg"

local P, R, S, C, Cc, Cp, Ct, Cmt = lpeg.P, lpeg.R, lpeg.S, lpeg.C, lpeg.Cc, lpeg.Cp,
  lpeg.Ct, lpeg.Cmt

local M = {}

---------------------------------------------------------------------------------------------
-- Error reporting: `expect(p, what)` behaves like p, but when p fails it records `what` at
-- that column, keeping the farthest one. The message then names what was missing where the
-- input stopped making sense, instead of a bare "no match".
---------------------------------------------------------------------------------------------
local far_pos, far_what

local function expect(p, what)
  return p + Cmt(P(true), function(_, pos)
    if pos > far_pos then far_pos, far_what = pos, what end
    return false
  end)
end

local function fail(s, pos, what)
  return nil, string.format("expected %s at column %d of '%s'", what, pos, s)
end

-- Runs `pattern` (which captures one value) over the whole of `s`.
-- Whether every number in a capture (a number or nested tables) is finite.
local function finite(v, depth)
  if type(v) == "number" then return v == v and v > -math.huge and v < math.huge end
  if type(v) == "table" and (depth or 0) < 8 then
    for _, x in pairs(v) do if not finite(x, (depth or 0) + 1) then return false end end
  end
  return true
end

local function run(fname, pattern, s, what)
  if type(s) ~= "string" then
    error(string.format("grammar.%s: expected a string, got %s", fname, type(s)), 3)
  end
  far_pos, far_what = 0, nil
  local v = pattern:match(s)
  if v == nil then return fail(s, far_pos > 0 and far_pos or 1, far_what or what) end
  if not finite(v) then return nil, string.format("a number in '%s' is out of range", s) end
  return v
end

---------------------------------------------------------------------------------------------
-- Lexical pieces
---------------------------------------------------------------------------------------------
local digit = R"09"
local ws = S" \t"^0
local idchar = R("az", "AZ", "09") + P"_"
local finish = expect(ws * -1, "the end of the text")

-- 80, 1.5, .5, 1e9, 2.5E-3 (no sign: none of these quantities can be negative). Captured
-- as text, so that decimal units can shift the exponent instead of multiplying.
local number = expect(C((digit^1 * (P"." * digit^0)^-1 + P"." * digit^1)
                        * (S"eE" * S"+-"^-1 * digit^1)^-1), "a number")

-- numstr * 10^exp10 * factor. The power of ten goes into the text, so "3.35" TB/s is the
-- double nearest 3.35e12 (as the literal is) rather than 3.35 * 1e12 rounded twice; the
-- remaining factors (2^k, 1/8, 60, 3600) are exact or integral.
local function scaled(numstr, exp10, factor)
  local mant, e = numstr:match("^([^eE]*)[eE]([-+]?%d+)$")
  if not mant then mant, e = numstr, "0" end
  local ex = math.tointeger(tonumber(e))
  if not ex or ex > 400 or ex < -400 then  -- past any double: run() refuses the infinity
    return ex and ex < 0 and 0.0 or math.huge
  end
  return tonumber(mant .. "e" .. (ex + exp10)) * factor
end

-- A count: an integer, or infinity past 2^63 (run() refuses it, naming the input).
local posint = Cp() * (C(digit^1) / function(d) return math.tointeger(tonumber(d)) or math.huge end)

local POWER = {k = 1, m = 2, g = 3, t = 4, p = 5, e = 6}

-- A prefix captures (exp10, factor): G is (9, 1), Gi is (0, 2^30); no prefix is (0, 1).
local prefix = (C(S"kKmMgGtTpPeE") * (S"iI" * Cc(true) + Cc(false))) / function(p, binary)
  local n = POWER[p:lower()]
  if binary then return 0, 1024.0 ^ n end
  return 3 * n, 1
end + Cc(0, 1)

-- B is a byte, b a bit.
local byte_unit = prefix * (P"B" * Cc(1) + P"b" * Cc(0.125))
  / function(e, f, u) return e, f * u end

local per_second = P"/" * ws * P"s" + P"ps"


---------------------------------------------------------------------------------------------
-- Quantities
---------------------------------------------------------------------------------------------
-- A memory size: the unit's last letter is a byte in either case (no one sizes memory in bits).
local SIZE_UNITS = "a unit like B, GB or GiB"
local size_unit = prefix * S"bB" * Cc(1) / function(e, f, u) return e, f * u end
local size_pattern = ws * number * ws * expect(size_unit, SIZE_UNITS) * finish / scaled
local bare_number = ws * C((digit^1 * (P"." * digit^0)^-1 + P"." * digit^1)
                           * (S"eE" * S"+-"^-1 * digit^1)^-1) * ws * -1

-- size("80GB") -> 8e10 bytes; "80gb" (the same), "80GiB", "512 MiB", "1024B". A number without
-- a unit is refused: "a memory size needs a unit: did you mean 80GiB?" (GiB below a million,
-- bytes above, where a count of bytes is the likelier meaning).
function M.size(s)
  if type(s) == "string" then
    local bare = bare_number:match(s)
    if bare then
      local n = tonumber(bare)
      return nil, string.format("a memory size needs a unit: did you mean %s%s? (GB = 10^9 "
        .. "bytes, GiB = 2^30)", bare, n and n >= 1e6 and "B" or "GiB")
    end
  end
  local v, err = run("size", size_pattern, s, "a size like 80GB or 80GiB")
  if v == nil then return nil, err end
  return v + 0.0
end

local rate_pattern = ws * number * ws
  * expect(byte_unit * ws * per_second, "a rate unit like GB/s, GiB/s or Gb/s") * finish
  / scaled

-- rate("450GB/s") -> 4.5e11 bytes/s; "400Gb/s" -> 5e10; "25GBps"
function M.rate(s)
  local v, err = run("rate", rate_pattern, s, "a rate like 450GB/s")
  if v == nil then return nil, err end
  return v + 0.0
end

-- (exp10, factor) as for sizes; µ is accepted as the micro sign and as Greek mu
local time_unit = P"ns" * Cc(-9, 1) + (P"us" + P"\194\181s" + P"\206\188s") * Cc(-6, 1)
  + P"ms" * Cc(-3, 1) + P"min" * Cc(0, 60) + P"s" * Cc(0, 1) + P"h" * Cc(0, 3600)
local time_pattern = ws * number * ws
  * expect(time_unit, "a time unit (ns, us, ms, s, min, h)") * finish / scaled

-- time("2us") -> 2e-6 seconds; "5 µs", "1.5ms", "3s"
function M.time(s)
  local v, err = run("time", time_pattern, s, "a time like 2us or 1.5ms")
  if v == nil then return nil, err end
  return v + 0.0
end

local flop_prefix = C(S"kMGTPE") / function(p) return 3 * POWER[p:lower()], 1 end
local flop_word = P"FLOPs" + P"FLOP" + P"flops" + P"flop"
local flop_pattern = ws * number * ws
  * ((flop_prefix + Cc(0, 1)) * flop_word * finish
     + expect(ws * -1, "a unit like GFLOP or TFLOP") * Cc(0, 1)) / scaled

-- flop("1GFLOP") -> 1e9; "2.5 TFLOP", "1e9" (a plain count)
function M.flop(s)
  local v, err = run("flop", flop_pattern, s, "a FLOP count like 1GFLOP")
  if v == nil then return nil, err end
  return v + 0.0
end

---------------------------------------------------------------------------------------------
-- Dimension lists: "1,2,4,8" -> {1,2,4,8} (sorted, unique); "auto"; "2..16" -> {min=2,
-- max=16}, meaning every candidate degree between the bounds (the search decides which
-- divide the device count).
---------------------------------------------------------------------------------------------
local DIM = "a positive whole number"
local dim_int = expect(Ct(posint), DIM)
local dims_pattern = ws * (
    expect(P"auto" * -idchar, "a list like 1,2,4,8, a range like 2..16 or auto") * finish
    * Cc("auto")
  + Ct(Cc("range") * dim_int * ws * P".." * ws * dim_int * finish)
  + Ct(Cc("list") * dim_int * (ws * P"," * ws * dim_int)^0 * finish)
)

function M.dims(s)
  local v, err = run("dims", dims_pattern, s, "a list like 1,2,4,8, a range like 2..16 or auto")
  if v == nil then return nil, err end
  if v == "auto" then return "auto" end
  for i = 2, #v do
    if v[i][2] < 1 then return fail(s, v[i][1], DIM .. " (got " .. v[i][2] .. ")") end
  end
  if v[1] == "range" then
    local lo, hi = v[2][2], v[3][2]
    if lo > hi then
      return nil, string.format("range %d..%d is reversed at column %d of '%s'", lo, hi,
                                v[2][1], s)
    end
    return {min = lo, max = hi}
  end
  local out, seen = {}, {}
  for i = 2, #v do
    local n = v[i][2]
    if not seen[n] then seen[n] = true; out[#out + 1] = n end
  end
  table.sort(out)
  return out
end

---------------------------------------------------------------------------------------------
-- Per-layer recompute: "0-2:full,3-60:selective(attn),61:none". Layers count from 0; a
-- bare mode ("full", "selective(attn)", "none") covers every layer. Modes are lower case.
-- Layers no range mentions are left to the caller's default.
---------------------------------------------------------------------------------------------
local MODES = "a mode (full, selective or none)"
local word_end = -idchar
local ident = C((R("az", "AZ") + P"_") * idchar^0)
local ops = Ct(ident * (ws * S",+" * ws * expect(ident, "an op name"))^0)
local mode = Ct(
    C(P"full") * word_end
  + C(P"none") * word_end
  + C(P"selective") * word_end
    * (ws * P"(" * ws * expect(ops, "an op name") * ws * expect(P")", "')'"))^-1
)
local layer = expect(posint, "a layer number")
local entry = Ct(Ct(layer * (ws * P"-" * ws * layer)^-1) * ws * expect(P":", "':'") * ws
                 * expect(mode, MODES))
local recompute_pattern = ws * (
    Ct(Cc("all") * expect(mode, "a mode (full, selective, none) or a layer range like 0-2")
       * finish)
  + Ct(Cc("ranges") * entry * (ws * P"," * ws * entry)^0 * finish)
)

local function make_range(first, last, m)
  return {first = first, last = last, mode = m[1], ops = m[2]}
end

-- recompute(s [, nlayers]) -> array of {first, last, mode, ops?} sorted by first. A bare
-- mode gives one entry with all = true, first = 0 and last = nlayers - 1 (nil when
-- nlayers is not given). With nlayers, layers past the end are errors.
function M.recompute(s, nlayers)
  if nlayers ~= nil and (math.type(nlayers) ~= "integer" or nlayers < 1) then
    error("grammar.recompute: nlayers must be a positive integer", 2)
  end
  local v, err = run("recompute", recompute_pattern, s,
                     "a spec like full or 0-2:full,3-60:selective(attn)")
  if v == nil then return nil, err end
  if v[1] == "all" then
    local r = make_range(0, nlayers and nlayers - 1, v[2])
    r.all = true
    return {r}
  end
  local out = {}
  for i = 2, #v do
    local span, m = v[i][1], v[i][2]
    local col, first, last = span[1], span[2], span[4] or span[2]
    if last < first then
      return nil, string.format("layer range %d-%d is reversed at column %d of '%s'", first,
                                last, col, s)
    end
    if nlayers and last >= nlayers then
      return nil, string.format("layer %d is out of range (%d layers: 0-%d) at column %d of '%s'",
                                last, nlayers, nlayers - 1, col, s)
    end
    local r = make_range(first, last, m)
    r.col = col
    out[#out + 1] = r
  end
  table.sort(out, function(a, b) return a.first < b.first end)
  for i = 2, #out do
    local a, b = out[i - 1], out[i]
    if b.first <= a.last then
      local later = a.col > b.col and a or b
      return nil, string.format("layers %d-%d and %d-%d overlap at column %d of '%s'",
                                a.first, a.last, b.first, b.last, later.col, s)
    end
  end
  for _, r in ipairs(out) do r.col = nil end
  return out
end

return M
