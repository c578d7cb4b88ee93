-- ndplan.io.json: the one JSON writer (search.json, --json, recompute_potentials.csv's JSON
-- cells, DeepSpeed's ds_config.json) and the reader with file:line:col errors.
require "ndplan"  -- installs the searcher of the bundled library
local json = require "ndplan.io.json"

describe("ndplan.io.json encode", function()
  it("sorts a plain object's keys and keeps an ordered object's order", function()
    assert.equal('{"a":1,"b":[true,false,null],"c":"x"}',
                 json.encode({c = "x", a = 1, b = {true, false, json.null}}))
    assert.equal('{"z":1,"a":{"y":2,"b":3}}',
                 json.encode(json.object({{"z", 1}, {"a", json.object({{"y", 2}, {"b", 3}})}})))
    assert.equal("[]", json.encode({}))
    assert.equal("{}", json.encode(json.object({})))
  end)

  it("writes 17 significant digits by default and the shortest exact form on request", function()
    local v = {0.1, 1 / 3, 2.0, 7, 2^60, -0.5}
    assert.equal("[0.10000000000000001,0.33333333333333331,2,7,1.152921504606847e+18,-0.5]",
                 json.encode(v))
    assert.equal("[0.1,0.3333333333333333,2,7,1152921504606846976,-0.5]",
                 json.encode(v, {shortest = true}))
    for _, x in ipairs({0.1, 1 / 3, 76660.58388671876, 1e-300, 123456789.123}) do
      assert.equal(x, tonumber(json.shortest(x)))            -- reads back exactly
      assert.is_true(#json.shortest(x) <= #string.format("%.17g", x))
    end
    assert.equal("[null,null,null]", json.encode({0 / 0, math.huge, -math.huge}))
    assert.equal("[null,null]", json.encode({0 / 0, math.huge}, {shortest = true}))
  end)

  it("writes a number in the fewest of 15 to 17 digits that reads back, integral ones whole", function()
    math.randomseed(18)
    for _ = 1, 5000 do  -- random doubles over many magnitudes, both signs
      local x = (math.random() - 0.5) * 10 ^ math.random(-300, 300)
      local want
      for digits = 15, 17 do
        local s = string.format("%." .. digits .. "g", x)
        if tonumber(s) == x then want = s; break end
      end
      if x == math.floor(x) and math.abs(x) < 2^63 then want = tostring(math.tointeger(x)) end
      assert.equal(want, json.shortest(x))
    end
    assert.equal("7", json.shortest(7))
    assert.equal("-9223372036854775808", json.shortest(math.mininteger))
    assert.equal("-9.223372036854776e+18", json.shortest(-2.0^63))  -- no integer reads it
    assert.equal("1152921504606846976", json.shortest(2.0^60))
    assert.equal("0", json.shortest(-0.0))
    assert.is_nil(json.shortest(0 / 0))
    assert.is_nil(json.shortest(math.huge))
  end)

  it("indents objects and arrays one member per line, with ': ' after a key", function()
    local doc = json.object({{"b", 1}, {"a", json.object({{"on", true}})}, {"l", {1, 2}},
                             {"e", {}}})
    assert.equal('{\n  "b": 1,\n  "a": {\n    "on": true\n  },\n  "l": [\n    1,\n    2\n  ],\n'
                 .. '  "e": []\n}', json.encode(doc, {indent = "  "}))
  end)

  it("escapes quotes, backslashes and control characters, and decodes what it writes", function()
    local s = 'a"b\\c\n\t\r\1'
    assert.equal('"a\\"b\\\\c\\n\\t\\r\\u0001"', json.encode(s))
    local doc = {name = s, list = {1.5, 3, "x"}, nested = {k = {0.1}}}
    assert.same(doc, json.decode(json.encode(doc)))
    assert.same(doc, json.decode(json.encode(doc, {shortest = true, indent = "\t"})))
  end)

  it("writes a raw value as the text it holds, as the value it was encoded from", function()
    local parts = {json.object({{"first", 0}, {"count", 4}, {"mode", "full"}}), {76660.5, 1 / 3},
                   "a\"b", json.null, {}}
    for _, opts in ipairs({{}, {shortest = true}}) do
      local raws = {}
      for i, v in ipairs(parts) do raws[i] = json.raw(json.encode(v, opts)) end
      assert.equal(json.encode(parts, opts), json.encode(raws, opts))
      assert.equal(json.encode(json.object({{"k", parts[1]}}), opts),
                   json.encode(json.object({{"k", raws[1]}}), opts))
    end
    assert.equal("[1,2]", json.encode(json.raw("[1,2]")))
    -- written as it is, also under indent: the text is the caller's
    assert.equal('[\n  {"a":1}\n]', json.encode({json.raw('{"a":1}')}, {indent = "  "}))
    assert.has_error(function() json.raw(5) end, "json.raw: expected a string")
    local broken = json.raw("x")
    broken[1] = nil
    assert.has_error(function() json.encode({broken}) end, "json.encode: a raw value holds no text")
  end)

  it("refuses a cycle and a value it cannot write", function()
    local t = {}
    t[1] = t
    assert.has_error(function() json.encode(t) end,
                     "json.encode: nested deeper than " .. json.MAX_DEPTH .. " (a cycle?)")
    assert.has_error(function() json.encode({print}) end, "json.encode: cannot encode a function")
  end)

  it("is the only JSON writer in the library (no second set of number or escape rules)", function()
    -- no other module of the library writes JSON by hand: a second encoder would be a second
    -- set of number and ordering rules (the grep below fails if one comes back)
    -- the rules themselves are C (engine/bind/ljson.c), io/json.lua only passes options on
    local root = os.getenv("NDPLAN_ROOT") or "."
    local p = io.popen("grep -rlE '%[.]17g|u%04x' " .. root .. "/lua " .. root .. "/engine "
                       .. root .. "/scripts")
    local hits = {}
    for line in p:lines() do hits[#hits + 1] = line:sub(#root + 2) end
    p:close()
    assert.same({"engine/bind/ljson.c"}, hits)
  end)
end)
