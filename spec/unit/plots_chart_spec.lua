-- ndplan.c.chart, the charts' per-point work in C: the axes' maps, the Pareto front, the
-- candidates chart's selection and its dots' half pixels. Misuse raises; empty input, one
-- point and non-finite figures are drawn as the rules say.
require "ndplan"
local chart = require "ndplan.c.chart"

local GiB = 2 ^ 30

-- a place over the columns t and m on 0-100 GiB by 0-10 s, 100 pixels each way
local function place(t, m)
  return {xs = m, xdiv = GiB, x = chart.scale(0, 100, 0, 100),
          ys = t, yfactor = 1, y = chart.scale(0, 10, 100, 0)}
end

describe("ndplan.c.chart", function()
  it("maps an axis linearly or over log10", function()
    local x = chart.scale(0, 10, 80, 736)
    assert.equal(80, x(0))
    assert.equal(736, x(10))
    assert.equal(80 + (2.5 - 0) / 10 * (736 - 80), x(2.5))
    local flat = chart.scale(3, 3, 0, 100)  -- an empty domain reads as one wide
    assert.equal(100, flat(4))
    local y = chart.log_scale(1, 1000, 384, 66)
    assert.equal(384, y(1))
    assert.equal(384 + (math.log(50, 10) - 0) / 3 * (66 - 384), y(50))
    assert.equal(384 + (math.log(7, 10) - math.log(7, 10)) / 1 * (66 - 384), chart.log_scale(7, 7, 384, 66)(7))
    assert.has_error(function() chart.scale(0, "x", 0, 1) end)
    assert.has_error(function() chart.log_scale(0, 10, 0, 1) end)
    assert.has_error(function() x(nil) end)
  end)

  it("finds the Pareto front: ties in memory to the faster, then the earlier", function()
    local t = {10, 12, 15, 14, 8, 20, 11, 10, 0 / 0, 5}
    local m = {70, 40, 30, 50, 90, 20, 60, 70, 10, math.huge}
    local f = {true, true, true, true, false, true, true, true, true, true}
    -- the 8th ties the 1st on both: the earlier kept; NaN and infinite figures are not drawn
    assert.same({6, 3, 2, 7, 1}, chart.front(t, m, f, #t))
    assert.same({}, chart.front({}, {}, {}, 0))
    assert.same({1}, chart.front({1}, {1}, {true}, 1))
    assert.same({}, chart.front({1}, {1}, {false}, 1))
    assert.same({2}, chart.front({3, 2}, {5, 5}, {true, true}, 2))
    assert.has_error(function() chart.front({}, {}, {}, -1) end)
    assert.has_error(function() chart.front({}, {}, nil, 0) end)
  end)

  it("selects the candidates: counts, window, front and thinning", function()
    local empty = chart.candidates({}, {}, {}, {}, 0, nil, 10)
    assert.same({}, empty.front)
    assert.same({}, empty.dots)
    assert.equal(0, empty.counted)
    assert.equal(1, empty.tmin)
    assert.equal(10, empty.tmax)
    assert.equal(0, empty.mmax)

    local one = chart.candidates({2}, {5 * GiB}, {true}, {}, 1, 80 * GiB, 10)
    assert.same({1}, one.front)
    assert.same({}, one.dots)
    assert.equal(1, one.counted)
    assert.equal(80 * GiB, one.mmax)

    -- a ranked point (the 3rd) is drawn but not counted twice; a zero step time, NaN and a
    -- far miss are not drawn
    local t = {1, 2, 1.5, 0, 0 / 0, 1e6}
    local m = {4 * GiB, 2 * GiB, 3 * GiB, GiB, GiB, 1e6 * GiB}
    local f = {true, true, true, true, true, false}
    local sel = chart.candidates(t, m, f, {[3] = true}, #t, 8 * GiB, 10)
    assert.equal(3, sel.counted)  -- 1, 2 and 6 (a zero step time: neither drawn nor counted)
    assert.equal(2, sel.fit_count)
    assert.equal(1, sel.outside)
    assert.equal(3, sel.drawn)
    assert.same({2, 3, 1}, sel.front)
    assert.same({}, sel.dots)

    -- past the cap, 1 in stride of the points off the front
    local tt, mm, ff = {}, {}, {}
    for i = 1, 100 do tt[i], mm[i], ff[i] = 10, i * GiB, true end  -- front: the first alone
    local thin = chart.candidates(tt, mm, ff, {}, 100, nil, 34)
    assert.same({1}, thin.front)
    assert.equal(3, thin.stride)  -- ceil(99 / 33)
    assert.equal(33, #thin.dots)
    assert.equal(34, thin.shown)
    assert.same({2, 5, 8}, {thin.dots[1], thin.dots[2], thin.dots[3]})

    assert.has_error(function() chart.candidates({}, {}, {}, {}, 0, "x", 10) end)
    assert.has_error(function() chart.candidates({}, {}, {}, {}, 0, nil, -1) end)
    assert.has_error(function() chart.candidates({}, {}, {}, nil, 0, nil, 10) end)
  end)

  it("places dots on half pixels, once per half pixel and group", function()
    local t = {5, 5.001, 5, 2.5, 5}
    local m = {50 * GiB, 50 * GiB, 50 * GiB, 25.3 * GiB, 50.004 * GiB}
    local f = {true, true, false, true, true}
    local pl = place(t, m)
    local misses, hits = chart.dots(pl, {1, 2, 3, 4, 5}, f)
    assert.same({50, 50}, misses)
    -- 2 lands on 1's half pixel (y 49.99), 5 likewise (x 50.004): drawn once
    assert.same({50, 50, 25.5, 75}, hits)
    assert.same({50, 50, 25.5, 75}, chart.half_pixels(pl, {1, 4}))
    local none_m, none_h = chart.dots(pl, {}, f)
    assert.same({}, none_m)
    assert.same({}, none_h)
    assert.same({}, chart.half_pixels(pl, {}))
    -- thousands of dots on a few hundred pixels: as many as distinct half pixels
    local tt, mm, ff, idx = {}, {}, {}, {}
    for i = 1, 5000 do
      tt[i], mm[i], ff[i], idx[i] = (i % 50) / 5, (i % 37) * GiB, i % 2 == 0, i
    end
    local a, b = chart.dots(place(tt, mm), idx, ff)
    local seen, distinct = {}, 0
    for i = 1, 5000 do
      local k = (i % 2 == 0 and "f" or "m") .. (i % 37) .. "," .. (i % 50)
      if not seen[k] then seen[k] = true; distinct = distinct + 1 end
    end
    assert.equal(2 * distinct, #a + #b)

    t[6], m[6] = 0 / 0, GiB
    assert.has_error(function() chart.dots(pl, {6}, f) end)
    assert.has_error(function() chart.half_pixels(pl, {"1"}) end)
    assert.has_error(function() chart.dots({xs = m, ys = t, xdiv = GiB, yfactor = 1,
                                            x = function(v) return v end, y = pl.y}, {1}, f) end)
    assert.has_error(function() chart.dots({xs = m, ys = t, x = pl.x, y = pl.y}, {1}, f) end)
    assert.has_error(function() chart.dots(pl, nil, f) end)
  end)
end)
