-- ndplan.grammar: sizes, rates, times, FLOP counts, dimension lists, recompute specs.
require "ndplan"
local g = require "ndplan.io.grammar"

local function err_of(f, ...)
  local v, err = f(...)
  assert.is_nil(v)
  assert.is_string(err)
  return err
end

describe("grammar.size", function()
  it("keeps decimal and binary prefixes apart", function()
    assert.equal(80e9, g.size("80GB"))
    assert.equal(80 * 2^30, g.size("80GiB"))
    assert.equal(1.5e12, g.size("1.5TB"))
    assert.equal(512 * 2^20, g.size("512MiB"))
    assert.equal(2048, g.size("2KiB"))
    assert.equal(1e3, g.size("1kB"))
    assert.equal(1.6e12, g.size("1.6TB"))
    assert.equal(2.5e15, g.size("2.5e3TB"))
  end)

  it("allows spaces around the number and the unit", function()
    assert.equal(80e9, g.size("80 GB"))
    assert.equal(80e9, g.size("  80GB  "))
    assert.equal(1024, g.size("1024B"))
    assert.equal(1000, g.size("1e3B"))
  end)

  it("reads a memory size as bytes whatever the case of the last letter", function()
    assert.equal(80e9, g.size("80gb"))
    assert.equal(80e9, g.size("80Gb"))
    assert.equal(80e9, g.size("80gB"))
    assert.equal(80 * 2^30, g.size("80gib"))
    assert.equal(2^30, g.size("1Gib"))
  end)

  it("refuses a bare number and suggests a unit", function()
    local v, err = g.size("80")
    assert.is_nil(v)
    assert.matches("needs a unit: did you mean 80GiB%?", err)
    assert.matches("did you mean 85520809984B%?", err_of(g.size, "85520809984"))
    assert.matches("did you mean 1.5GiB%?", err_of(g.size, " 1.5 "))
  end)

  it("returns floats", function()
    assert.equal("float", math.type(g.size("1024B")))
  end)

  it("explains what it expected and where", function()
    assert.equal("expected a number at column 1 of 'eighty'", err_of(g.size, "eighty"))
    assert.equal("expected a unit like B, GB or GiB at column 3 of '80XB'",
                 err_of(g.size, "80XB"))
    assert.equal("expected the end of the text at column 5 of '80GBx'", err_of(g.size, "80GBx"))
    assert.matches("column 1", err_of(g.size, "-5GB"))
    assert.matches("column 1", err_of(g.size, ""))
  end)

  it("raises on a non-string (misuse)", function()
    assert.has_error(function() g.size(80) end, "grammar.size: expected a string, got number")
  end)
end)

describe("grammar.rate", function()
  it("reads bytes and bits per second", function()
    assert.equal(450e9, g.rate("450GB/s"))
    assert.equal(50e9, g.rate("400Gb/s"))
    assert.equal(3.35e12, g.rate("3.35TB/s"))
    assert.equal(1.555e12, g.rate("1555GB/s"))
    assert.equal(6.92 * 2^30, g.rate("6.92GiB/s"))
    assert.equal(25e9, g.rate("25GBps"))
    assert.equal(25e9, g.rate("200Gbps"))
    assert.equal(16 * 2^30, g.rate("16GiB/s"))
    assert.equal(450e9, g.rate("450 GB / s"))
  end)

  it("requires a per-second unit", function()
    assert.equal("expected a rate unit like GB/s, GiB/s or Gb/s at column 4 of '450GB'",
                 err_of(g.rate, "450GB"))
    assert.matches("column 4", err_of(g.rate, "450"))
  end)
end)

describe("grammar.time", function()
  it("reads ns, us, µs, ms, s, min and h", function()
    assert.equal(2e-6, g.time("2us"))
    assert.equal(5e-6, g.time("5 µs"))
    assert.equal(5e-6, g.time("5μs"))   -- Greek mu as well as the micro sign
    assert.equal(1.5e-3, g.time("1.5ms"))
    assert.equal(3, g.time("3s"))
    assert.equal(10e-9, g.time("10ns"))
    assert.equal(120, g.time("2min"))
    assert.equal(3600, g.time("1h"))
  end)

  it("requires a unit", function()
    assert.equal("expected a time unit (ns, us, ms, s, min, h) at column 2 of '3'",
                 err_of(g.time, "3"))
    assert.matches("column 2", err_of(g.time, "3parsecs"))
  end)
end)

describe("grammar.flop", function()
  it("reads FLOP counts with decimal prefixes", function()
    assert.equal(1e9, g.flop("1GFLOP"))
    assert.equal(2.5e12, g.flop("2.5 TFLOP"))
    assert.equal(1e9, g.flop("1e9"))
    assert.equal(3e15, g.flop("3 PFLOPs"))
  end)

  it("wants FLOP after a prefix", function()
    assert.matches("column 2", err_of(g.flop, "1G"))
  end)
end)

describe("grammar.dims", function()
  it("reads lists, sorted and unique", function()
    assert.same({1, 2, 4, 8}, g.dims("1,2,4,8"))
    assert.same({1, 4, 8}, g.dims("8, 1 ,4,4"))
    assert.same({3}, g.dims("3"))
  end)

  it("reads auto and ranges", function()
    assert.equal("auto", g.dims("auto"))
    assert.same({min = 2, max = 16}, g.dims("2..16"))
    assert.same({min = 4, max = 4}, g.dims("4 .. 4"))
  end)

  it("refuses zero, negatives, reversed ranges and stray commas", function()
    assert.equal("expected a positive whole number (got 0) at column 3 of '1,0,2'",
                 err_of(g.dims, "1,0,2"))
    assert.equal("expected a list like 1,2,4,8, a range like 2..16 or auto at column 1 of '-1'",
                 err_of(g.dims, "-1"))
    assert.equal("range 16..2 is reversed at column 1 of '16..2'", err_of(g.dims, "16..2"))
    assert.matches("column 3", err_of(g.dims, "1,,2"))
    assert.matches("column 4", err_of(g.dims, "2.."))
    assert.matches("column 1", err_of(g.dims, "automatic"))
  end)
end)

describe("grammar.recompute", function()
  it("reads per-layer ranges", function()
    assert.same({
      {first = 0, last = 2, mode = "full"},
      {first = 3, last = 60, mode = "selective", ops = {"attn"}},
      {first = 61, last = 61, mode = "none"},
    }, g.recompute("0-2:full,3-60:selective(attn),61:none"))
  end)

  it("sorts ranges by first layer and allows spaces", function()
    assert.same({
      {first = 0, last = 1, mode = "none"},
      {first = 3, last = 3, mode = "full"},
    }, g.recompute(" 3 : full , 0 - 1 : none "))
  end)

  it("reads several ops", function()
    assert.same({"attn", "mlp_act"}, g.recompute("0-3:selective(attn, mlp_act)")[1].ops)
    assert.same({"attn", "norm"}, g.recompute("selective(attn+norm)")[1].ops)
  end)

  it("reads a bare mode as every layer", function()
    assert.same({{first = 0, all = true, mode = "full"}}, g.recompute("full"))
    assert.same({{first = 0, all = true, mode = "selective"}}, g.recompute("selective"))
    assert.same({{first = 0, last = 9, all = true, mode = "none"}}, g.recompute("none", 10))
  end)

  it("refuses reversed and overlapping ranges", function()
    assert.equal("layer range 5-2 is reversed at column 1 of '5-2:full'",
                 err_of(g.recompute, "5-2:full"))
    assert.equal("layers 0-5 and 3-8 overlap at column 10 of '0-5:full,3-8:none'",
                 err_of(g.recompute, "0-5:full,3-8:none"))
    assert.equal("layers 0-5 and 5-5 overlap at column 8 of '5:none,0-5:full'",
                 err_of(g.recompute, "5:none,0-5:full"))
  end)

  it("checks ranges against the layer count when given", function()
    assert.equal("layer 20 is out of range (10 layers: 0-9) at column 1 of '0-20:full'",
                 err_of(g.recompute, "0-20:full", 10))
    assert.is_table(g.recompute("0-9:full", 10))
    assert.has_error(function() g.recompute("full", 0) end)
  end)

  it("explains syntax errors", function()
    assert.equal("expected a mode (full, selective or none) at column 5 of '0-2:fll'",
                 err_of(g.recompute, "0-2:fll"))
    assert.equal("expected ':' at column 5 of '0-2 full'", err_of(g.recompute, "0-2 full"))
    assert.equal("expected ')' at column 19 of '0-2:selective(attn'",
                 err_of(g.recompute, "0-2:selective(attn"))
    assert.matches("column 10", err_of(g.recompute, "0-2:full,"))
    assert.matches("^expected a mode .* or a layer range .* at column 1 of 'fullx'$",
                   err_of(g.recompute, "fullx"))
    assert.matches("^expected a mode", err_of(g.recompute, "FULL"))
  end)
end)

describe("numbers out of range (found by fuzzing)", function()
  local g = require("ndplan").grammar
  it("returns nil, message instead of raising or giving infinity", function()
    for _, case in ipairs({{"size", "1e99999999999999999999GiB"}, {"size", "1e400GB"},
                           {"dims", "88888888888888888888888,7"},
                           {"recompute", "22222222222222222222:none"}}) do
      local v, err = g[case[1]](case[2], 61)
      assert.is_nil(v, case[2])
      assert.matches("out of range", err)
    end
  end)
end)

describe("device keys of mixed types (found by fuzzing)", function()
  it("names the unknown key instead of failing to sort", function()
    local nd = require "ndplan"
    local d, err = nd.device(nd.yaml.decode("1: a\nname: b\n"))
    assert.is_nil(d)
    assert.matches("unknown key '1'", err)
  end)
end)
