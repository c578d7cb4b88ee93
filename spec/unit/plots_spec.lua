-- ndplan.svg, ndplan.plots and ndplan.report over small hand-made inputs: golden files
-- (spec/golden/*.svg, regenerate with NDPLAN_UPDATE_GOLDEN=1 and check them by eye),
-- well-formedness, finite numbers, lines where the input puts them, and byte stability.
require "ndplan"
local svg = require "ndplan.out.svg"
local plots = require "ndplan.out.plots"
local pipeline = require "ndplan.out.plots_pipeline"
local report = require "ndplan.out.report"
local recompute = require "ndplan.recompute"

local GiB = 2 ^ 30
local UPDATE = os.getenv("NDPLAN_UPDATE_GOLDEN")

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- golden(name, text): text must equal spec/golden/NAME.svg byte for byte
local function golden(name, text)
  local path = "spec/golden/" .. name .. ".svg"
  if UPDATE then
    local f = assert(io.open(path, "wb"))
    f:write(text)
    f:close()
    return
  end
  local want = read(path)
  assert(want, path .. " is missing: run the spec with NDPLAN_UPDATE_GOLDEN=1 to create it")
  if want == text then return end
  local n = 1
  local got_lines, want_lines = {}, {}
  for l in (text .. "\n"):gmatch("(.-)\n") do got_lines[#got_lines + 1] = l end
  for l in (want .. "\n"):gmatch("(.-)\n") do want_lines[#want_lines + 1] = l end
  while got_lines[n] == want_lines[n] do n = n + 1 end
  error(string.format("%s differs at line %d:\n  want %s\n  got  %s", path, n,
                      tostring(want_lines[n]), tostring(got_lines[n])), 2)
end

-- check_svg(text): one <svg> root with size, viewBox and a <title>; every tag closed in
-- order; every coordinate a finite number; nothing that fetches or runs anything.
local NUMERIC = {x = true, y = true, x1 = true, y1 = true, x2 = true, y2 = true, cx = true,
                 cy = true, r = true, width = true, height = true, ["font-size"] = true,
                 ["stroke-width"] = true, ["fill-opacity"] = true}
local function check_svg(text)
  assert.matches('^<svg xmlns="http://www.w3.org/2000/svg" width="%d+" height="%d+" viewBox="0 0 %d+ %d+"', text)
  assert.matches("^[^\n]*\n  <title>[^<]+</title>\n", text)
  assert.equal("</svg>\n", text:sub(-7))
  assert.is_nil(text:find("<script", 1, true))
  assert.is_nil(text:find("href", 1, true))
  local stack = {}
  for close, name, attrs in text:gmatch("<(/?)([%w:-]+)([^>]*)>") do
    if close == "/" then
      assert.equal(table.remove(stack), name, "closing tag out of order")
    elseif attrs:sub(-1) ~= "/" then
      stack[#stack + 1] = name
    end
    for k, v in attrs:gmatch('([%w:-]+)="([^"]*)"') do
      if NUMERIC[k] then
        local n = tonumber(v)
        assert(n and n == n and math.abs(n) < math.huge, k .. '="' .. v .. '" is not a finite number')
      elseif k == "points" then
        for num in v:gmatch("[^%s,]+") do assert(tonumber(num), "points: " .. v) end
      end
    end
  end
  assert.same({}, stack)
end

-- attribute(text, pattern): the first match, or an error naming the pattern
local function find(text, pattern)
  local a, b = text:match(pattern)
  assert(a, "not found: " .. pattern)
  return a, b
end

-- A two-stage strategy with round numbers (GiB and seconds).
local function small_result(over)
  local r = {
    model = "tiny-test", device = "TestGPU", job = {devices = 8, global_batch = 16, seq_len = 1024},
    strategy = {dp = 4, tp = 1, pp = 2, vpp = 1, cp = 1, ep = 1, etp = 1, sp = false, zero = 1,
                mbs = 1, mb = 4, schedule = "1f1b", recompute = "selective"},
    stages = {
      {stage = 0, layers = 4, inflight = 2, weights = 4 * GiB, grads = 8 * GiB, optimizer = 12 * GiB,
       activations = 20 * GiB, buffers = 1 * GiB, reserve = 3 * GiB, peak = 48 * GiB,
       forward_s = 1, backward_s = 2, recompute_s = 0, comm_s = 0},
      {stage = 1, layers = 4, inflight = 1, weights = 4 * GiB, grads = 8 * GiB, optimizer = 12 * GiB,
       activations = 10 * GiB, buffers = 1 * GiB, reserve = 3 * GiB, peak = 38 * GiB,
       forward_s = 1, backward_s = 2, recompute_s = 0.5, comm_s = 0},
    },
    budget_bytes = 80 * GiB, peak_memory_bytes = 48 * GiB, heaviest_stage = 0, fits = true,
    over_bytes = 0, step_time_s = 20, tokens_per_s = 819.2, mfu = 0.41,
    time_parts_s = {forward = 4, backward = 8, recompute = 1, tp_comm = 0, cp_comm = 0, ep_comm = 0,
                    pp_comm = 0.5, dp_comm = 1.5, optimizer = 1, bubble = 4, offload = 0},
  }
  for k, v in pairs(over or {}) do
    if k == "strategy" then
      for sk, sv in pairs(v) do r.strategy[sk] = sv end
    else
      r[k] = v
    end
  end
  return r
end

local function no_recompute(r)
  for _, st in ipairs(r.stages) do st.recompute_s = 0 end
  return r
end

local POINTS = {
  {step_time_s = 10, peak_bytes = 70 * GiB, fits = true, label = "a"},
  {step_time_s = 12, peak_bytes = 40 * GiB, fits = true, label = "b"},
  {step_time_s = 15, peak_bytes = 30 * GiB, fits = true, label = "c"},
  {step_time_s = 14, peak_bytes = 50 * GiB, fits = true, label = "d"},   -- beaten by b
  {step_time_s = 8, peak_bytes = 90 * GiB, fits = false, label = "e"},   -- over the budget
  {step_time_s = 20, peak_bytes = 20 * GiB, fits = true, label = "f"},
  {step_time_s = 11, peak_bytes = 60 * GiB, fits = true, label = "g"},
}

-- Two configurations' potentials through ndplan.recompute, as the commands build them.
local function potentials_data()
  local function plan(score, memory, full, parts, dims)
    local ranges = {}
    if full > 0 then ranges[1] = {first = 0, count = full, kind = "dense", mode = "full"} end
    ranges[#ranges + 1] = {first = full, count = 8 - full, kind = "dense", mode = "selective"}
    return {score = score, memory = memory, dimensions = dims, score_parts = parts, ranges = ranges}
  end
  local d1 = {{"DP", 2}, {"TP", 4}, {"PP", 2}, {"SP", 1}}
  local d2 = {{"DP", 4}, {"TP", 2}, {"PP", 2}, {"SP", 0}}
  local space = {
    {dimensions = d1, score = 10, plans = {
      plan(10, 40960, 2, {forward = 3, backward = 6, bubble = 1}, d1),
      plan(11, 36864, 3, {forward = 3, backward = 6, recompute = 1, bubble = 1}, d1),
      plan(12.5, 32768, 4, {forward = 3, backward = 6, recompute = 2.5, bubble = 1}, d1)}},
    {dimensions = d2, score = 11, plans = {
      plan(11, 30720, 0, nil, d2), plan(13, 28672, 1, nil, d2)}},
  }
  return recompute.plot_data(recompute.plot_groups(space, 2))
end

describe("ndplan.svg", function()
  it("formats numbers with two decimals at most, trailing zeros dropped", function()
    assert.equal("1", svg.num(1))
    assert.equal("1.5", svg.num(1.5))
    assert.equal("0.33", svg.num(1 / 3))
    assert.equal("121.6", svg.num(121.6))
    assert.equal("0", svg.num(-0.001))
    assert.equal("-2.25", svg.num(-2.25))
    assert.equal("100", svg.num(100.004))
  end)

  it("writes numbers as the %.2f rule does (the binding's digits without printf, and its ties)", function()
    local function rule(x)  -- the rule itself: "%.2f", a trailing zero or ".00" dropped, "-0" -> "0"
      local s = string.format("%.2f", x)
      local n = #s
      if s:byte(n) == 48 then s = s:sub(1, s:byte(n - 1) == 48 and n - 3 or n - 1) end
      return s == "-0" and "0" or s
    end
    local values = {0, -0.0, 0.5, -0.5, 2.5, -2.5, 1e15, -1e15, 2^50 + 0.5, -(2^50 + 0.5),
                    2^51, -2^51, 2^51 + 1, 2^52 + 0.5, 0.25, -0.25, 0.005, -0.004, 0.125,
                    0.375, 1.005, 2^31 / 100, 2^31 / 100 + 0.005, 1e300, -1e300, 5e-324,
                    2^53, 2^53 + 2, -2^53, 123, -123, math.maxinteger, math.mininteger + 1}
    for i = -3000, 3000 do values[#values + 1] = i / 1000 + 0.005 end  -- ties at 2 decimals
    for i = -3000, 3000 do
      values[#values + 1] = i / 2
      values[#values + 1] = i / 4
      values[#values + 1] = i / 3
    end
    for pass = 1, 2 do  -- the second pass reads what the first kept
      for _, v in ipairs(values) do
        assert.equal(rule(v), svg.num(v), string.format("%.17g (pass %d)", v, pass))
      end
    end
  end)

  it("an axis with an infinite or NaN end is an error, never an endless loop (issue 17)", function()
    -- a report with an infinite budget looped in the candidates chart's ticks (~400 MB/s);
    -- a count hook ends a loop that a regression would make endless
    local base = require "ndplan.out.plots_base"
    local function bounded(f, ...)
      debug.sethook(function() error("looped past 10^7 instructions") end, "", 1e7)
      local ok, err = pcall(f, ...)
      debug.sethook()
      return ok, err
    end
    for _, range in ipairs({{0, math.huge}, {0, 0 / 0}, {-math.huge, 1}}) do
      local ok, err = bounded(base.ticks, range[1], range[2])
      assert.is_false(ok)
      assert.matches("expected finite numbers", err)
    end
    local ok, err = bounded(base.log_ticks, 1, math.huge)
    assert.is_false(ok)
    assert.matches("expected finite numbers", err)
    ok, err = bounded(plots.candidates, {{step_time_s = 1, peak_bytes = GiB, fits = true}}, math.huge)
    assert.is_false(ok)
    assert.matches("expected finite numbers", err)
  end)

  it("refuses NaN and infinities", function()
    assert.has_error(function() svg.num(0 / 0) end)
    assert.has_error(function() svg.num(math.huge) end)
    assert.has_error(function() svg.num("12") end)
    assert.has_error(function() svg.attrs({x = 0 / 0}) end, "svg: x: not a finite number: " .. tostring(0 / 0))
    assert.has_error(function() svg.attrs({[1] = 2}) end)
  end)

  it("escapes text and attributes", function()
    assert.equal("a &lt;b&gt; &amp; &quot;c&quot; &#39;d&#39;", svg.esc([[a <b> & "c" 'd']]))
    for _, s in ipairs({"", "plain text", "a&b", "<", ">", '"', "'", "x\0<y", 12}) do
      local want = tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;")
                   :gsub('"', "&quot;"):gsub("'", "&#39;")
      assert.equal(want, svg.esc(s))
    end
    assert.equal('<text x="1" y="2">x &lt; y</text>', svg.element("text", {y = 2, x = 1}, "x < y"))
  end)

  it("writes a list of circles as circle writes each", function()
    local list = {1, 2, 3.5, -0.25, 121.6, 0}
    local one, many = svg.doc(10, 10, "t"), svg.doc(10, 10, "t")
    one:open("g", {}); many:open("g", {})
    for i = 1, #list, 2 do one:circle(list[i], list[i + 1], 2.5) end
    many:circles(list, 2.5)
    one:close(); many:close()
    assert.equal(one:finish(), many:finish())
    assert.has_error(function() svg.doc(1, 1, "t"):circles({1, 0 / 0}, 1) end)
    assert.has_error(function() svg.doc(1, 1, "t"):circles({1, 2, 3}, 1) end)  -- a pair short
    local empty = svg.doc(10, 10, "t")
    empty:circles({}, 2.5)
    assert.equal(svg.doc(10, 10, "t"):finish(), empty:finish())
  end)

  it("writes attributes in one fixed order whatever order the table was built in", function()
    local a = {}
    a.fill = "red"; a.x = 1; a.height = 3; a.y = 2; a.width = 4; a.zeta = "z"; a.alpha = "a"
    local b = {alpha = "a", zeta = "z", width = 4, height = 3, fill = "red", y = 2, x = 1}
    local want = '<rect x="1" y="2" width="4" height="3" fill="red" alpha="a" zeta="z"/>'
    assert.equal(want, svg.element("rect", a))
    assert.equal(want, svg.element("rect", b))
    -- a second table's attributes join the first's and win where both name one
    assert.equal(' x="1" y="5" width="4" fill="red" zeta="z"',
                 svg.attrs({zeta = "z", x = 1, y = 2}, {y = 5, fill = "red", width = 4}))
    assert.equal(' x="1" flag="true" label="a&amp;b"', svg.attrs({x = 1, flag = true, label = "a&b"}))
    local doc = svg.doc(10, 10, "t")
    doc:rect(1, 2, -3, 4, {x = 9, fill = "#fff"}, "tip <1>")
    doc:line(1, 2, 3, 4, {stroke = "#000"})
    doc:text(1, 2, 12, {["font-size"] = 11})
    assert.matches('\n  <rect x="9" y="2" width="0" height="4" fill="#fff"><title>tip &lt;1&gt;</title></rect>\n'
                   .. '  <line x1="1" y1="2" x2="3" y2="4" stroke="#000"/>\n'
                   .. '  <text x="1" y="2" font%-size="11">12</text>\n</svg>', doc:finish())
  end)
end)

describe("stage_memory", function()
  local text = plots.stage_memory(small_result())

  it("matches its golden file", function() golden("stage_memory", text) end)
  it("is well formed", function() check_svg(text) end)

  it("draws the budget on the 80 GiB gridline and each stage's bar up to its peak", function()
    -- y axis 0-100 GiB over y = 344 (bottom) to 66 (top): 80 GiB at 344 - 0.8·278 = 121.6
    local y = find(text, '<line class="budget" x1="70" y1="([%d.]+)"')
    assert.equal("121.6", y)
    assert.matches('<line x1="70" y1="121.6" x2="736" y2="121.6" stroke="#e5e5e5"/>\n%s*<text[^>]*>80</text>', text)
    assert.matches("budget 80 GiB", text)
    -- stage 0 peaks at 48 GiB: the reserve (its top part) starts at 344 - 0.48·278 = 210.56
    assert.matches('<rect x="[%d.]+" y="210.56" width="[%d.]+" height="8.34" fill="#999999"><title>stage 0 runtime reserve: 3 GiB</title>', text)
    assert.matches(">48</text>", text)
    assert.matches(">38</text>", text)
  end)

  it("gives the same bytes twice", function()
    assert.equal(text, plots.stage_memory(small_result()))
  end)
end)

describe("time_breakdown", function()
  local second = small_result({step_time_s = 25, strategy = {dp = 2, tp = 2}})
  second.time_parts_s.tp_comm = 5
  local text = plots.time_breakdown({small_result(), second, small_result()}, 2)

  it("matches its golden file", function() golden("time_breakdown", text) end)
  it("is well formed", function() check_svg(text) end)

  it("draws the top n bars, labelled by strategy, with exposed parts only", function()
    assert.matches("#1 dp4 pp2 z1 mbs1 mb4 selective", text)
    assert.matches("#2 dp2 tp2 pp2 z1 mbs1 mb4 selective", text)
    assert.is_nil(text:find("#3 ", 1, true))
    assert.matches("communication hidden behind compute is not drawn", text)
    assert.matches("<title>TP comm: 5 s</title>", text)
    assert.matches(">25 s</text>", text)
    -- parts that are zero everywhere are left out of the legend
    assert.is_nil(text:find(">CP comm<", 1, true))
  end)
end)

describe("candidates", function()
  local text = plots.candidates(POINTS, 80 * GiB)

  it("matches its golden file", function() golden("candidates", text) end)
  it("is well formed", function() check_svg(text) end)

  it("finds the Pareto front of the fitting points", function()
    local labels = {}
    for i, p in ipairs(plots.pareto_front(POINTS)) do labels[i] = p.label end
    assert.same({"f", "c", "b", "g", "a"}, labels)
  end)

  it("draws the front as a staircase and the budget on the 80 GiB gridline", function()
    -- x axis 0-100 GiB over x = 80 to 736: 80 GiB at 80 + 0.8·656 = 604.8
    assert.equal("604.8", find(text, '<line class="budget" x1="([%d.]+)"'))
    assert.matches('<line x1="604.8" y1="66" x2="604.8" y2="384" stroke="#e5e5e5"/>\n%s*<text[^>]*>80</text>', text)
    local points = find(text, '<polyline points="([^"]+)"')
    local n = 0
    for _ in points:gmatch("%S+") do n = n + 1 end
    assert.equal(5 + 4, n)  -- five front points, four corners between them
    assert.matches("fastest: a", text)
    assert.matches("7 candidates, 6 fit the budget", text)
  end)

  it("thins thousands of points deterministically and says so", function()
    local many = {}
    for i = 1, 12000 do
      many[i] = {step_time_s = 10 + (i * 7919) % 1000 / 10, peak_bytes = ((i * 104729) % 9000 + 100) * 1e7,
                 fits = (i % 3) ~= 0, label = "p" .. i}
    end
    local a, b = plots.candidates(many, 60 * GiB), plots.candidates(many, 60 * GiB)
    assert.equal(a, b)
    -- the same points as columns (what a search hands) draw the same bytes
    local cols = {step_time_s = {}, peak_bytes = {}, fits = {}, label = {}, n = #many}
    for i, p in ipairs(many) do
      cols.step_time_s[i], cols.peak_bytes[i], cols.fits[i], cols.label[i] =
        p.step_time_s, p.peak_bytes, p.fits, p.label
    end
    assert.equal(a, plots.candidates(cols, 60 * GiB))
    check_svg(a)
    local circles = select(2, a:gsub("<circle", ""))
    assert.is_true(circles <= plots.MAX_POINTS + 8, "circles: " .. circles)
    assert.matches("12000 candidates, 8000 fit the budget; showing %d+ %(1 in 3 of the rest", a)
    assert.is_true(#a < 400000, "size " .. #a)
  end)

  it("spans the fitting plans, whatever the worst candidate priced (issue 16, item 8)", function()
    local pts = {}
    for i = 1, 40 do  -- fitting plans between 10 and 70 GiB, 10 and 20 s
      pts[#pts + 1] = {step_time_s = 10 + i / 4, peak_bytes = (10 + 1.5 * i) * GiB, fits = true}
    end
    for i = 1, 20 do  -- misses far away: thousands of GiB, days
      pts[#pts + 1] = {step_time_s = 5e5 * i, peak_bytes = 2e4 * i * GiB, fits = false}
    end
    local text = plots.candidates(pts, 80 * GiB)
    check_svg(text)
    local fits = text:match('<g class="fits"[^>]*>(.-)</g>')
    local lo, hi = math.huge, -math.huge
    for cx in fits:gmatch('cx="([%d.]+)"') do
      lo, hi = math.min(lo, tonumber(cx)), math.max(hi, tonumber(cx))
    end
    assert.is_true(hi - lo >= 0.5 * (736 - 80), string.format("fitting plans span %.0f px", hi - lo))
    assert.matches("60 candidates, 40 fit the budget; 20 far slower or heavier", text)
  end)
end)

describe("potentials", function()
  local data = potentials_data()
  local text = plots.potentials(data)

  it("matches its golden file", function() golden("potentials", text) end)
  it("is well formed", function() check_svg(text) end)

  it("labels each plan rank.index and stacks its time parts", function()
    -- plot_groups keeps the first configuration's plans faster than the second's best (and
    -- one more, two at least), and as many for the last: 1.2 (12.5 s) is left out
    for _, label in ipairs({"1.0", "1.1", "2.0", "2.1"}) do
      assert.truthy(text:find(">" .. label .. "</text>", 1, true), label)
    end
    assert.is_nil(text:find(">1.2</text>", 1, true))
    assert.matches("<title>1.1 recompute: 1 s</title>", text)
    assert.matches("<title>2.1: 13 s</title>", text)  -- no parts: the score alone
    assert.matches("1: DP2 TP4 PP2 SP", text)
    -- a memory diamond per plan, and the legend's
    assert.equal(4 + 1, select(2, text:gsub('<polygon points="[^"]+" fill="#333333"/>', "")))
  end)
end)

describe("pipeline", function()
  it("lays out 1F1B with warm-up, steady phase and cool-down", function()
    -- p = 2, m = 4, F = 1 s and B = 2 s on each stage: (m + p - 1)·(F + B) = 15 s
    local lay = pipeline.layout(no_recompute(small_result()))
    assert.is_true(lay.complete)
    assert.equal(15, lay.finish)
    local order = {}
    for _, b in ipairs(lay.blocks) do
      if b.stage == 0 then order[#order + 1] = string.format("%s%d@%g", b.kind, b.mb + 1, b.start) end
    end
    assert.same({"F1@0", "F2@1", "B1@4", "F3@6", "B2@7", "F4@9", "B3@10", "B4@13"}, order)
  end)

  it("lays out GPipe: every forward, then every backward", function()
    local lay = pipeline.layout(no_recompute(small_result({strategy = {schedule = "gpipe", mb = 2}})))
    assert.equal(9, lay.finish)  -- (2 + 1)·3
  end)

  it("lays out the interleaved order with a smaller bubble than 1F1B", function()
    local r = no_recompute(small_result({strategy = {schedule = "interleaved", vpp = 2, mb = 4}}))
    local lay = pipeline.layout(r)
    assert.is_true(lay.complete)
    assert.equal(2, lay.v)
    assert.equal(4 * 2 * 2 * 2, #lay.blocks)  -- stages x micro-batches x chunks x {F, B}
    -- m·(F + B) plus a bubble of (p - 1)·(F + B)/v = 12 + 1.5
    assert.equal(13.5, lay.finish)
  end)

  it("never starts a pass before the pass it waits for has ended", function()
    for _, sched in ipairs({"1f1b", "gpipe", "interleaved"}) do
      local lay = pipeline.layout(small_result({strategy = {schedule = sched, vpp = sched == "interleaved" and 2 or 1,
                                                            pp = 2, mb = 4}}))
      local ends = {}
      for _, b in ipairs(lay.blocks) do ends[table.concat({b.kind, b.stage, b.chunk, b.mb}, ":")] = b.start + b.length end
      for _, b in ipairs(lay.blocks) do
        if b.kind == "F" and b.stage == 1 then
          assert.is_true(b.start >= ends[table.concat({"F", 0, b.chunk, b.mb}, ":")])
        elseif b.kind == "B" and b.stage == 0 then
          assert.is_true(b.start >= ends[table.concat({"B", 1, b.chunk, b.mb}, ":")])
        end
      end
    end
  end)

  it("cuts many micro-batches to 2·pp + 2 and says so", function()
    local text = plots.pipeline(no_recompute(small_result({strategy = {mb = 1000}})))
    check_svg(text)
    assert.matches("first 6 of 1000 micro%-batches", text)
    assert.equal(6 * 2 * 2, select(2, text:gsub("<title>stage %d (%a+) micro%-batch", "")))
  end)

  for _, case in ipairs({{"pipeline_1f1b", {}}, {"pipeline_interleaved", {schedule = "interleaved", vpp = 2}},
                         {"pipeline_gpipe", {schedule = "gpipe", mb = 3}}}) do
    it("draws " .. case[1] .. " as its golden file", function()
      local text = plots.pipeline(small_result({strategy = case[2]}))
      check_svg(text)
      golden(case[1], text)
      assert.equal(text, plots.pipeline(small_result({strategy = case[2]})))
    end)
  end

  it("draws zb and dualpipe as 1F1B with a note", function()
    assert.matches("ZB%-H1 drawn as 1F1B", plots.pipeline(small_result({strategy = {schedule = "zb"}})))
    assert.matches("DualPipe drawn as 1F1B", plots.pipeline(small_result({strategy = {schedule = "dualpipe"}})))
  end)
end)

describe("report", function()
  local r = small_result()
  local parts = report.estimate_parts(r)
  local html = report.html(parts)

  it("inlines every chart and needs nothing from the network", function()
    assert.matches("^<!DOCTYPE html>", html)
    assert.equal(3, select(2, html:gsub("<svg ", "")))
    for _, name in ipairs({"stage_memory", "time_breakdown", "pipeline"}) do
      assert.truthy(html:find('<section class="chart" id="chart-' .. name .. '"', 1, true))
    end
    assert.is_nil(html:find("<script", 1, true))
    assert.is_nil(html:find("<link", 1, true))
    -- the only URL is the SVG namespace, which names and fetches nothing
    assert.is_nil(html:gsub('xmlns="http://www.w3.org/2000/svg"', ""):find("http", 1, true))
    assert.matches("<th>step time</th><td>20 s</td>", html)
    assert.equal(html, report.html(report.estimate_parts(small_result())))
  end)

  it("writes the charts and report.html into a new folder", function()
    local dir = os.tmpname()
    os.remove(dir)
    dir = dir .. "/deeper/report"
    local paths = assert(report.search_report(dir, {small_result(), small_result({step_time_s = 25})},
                                              POINTS, 80 * GiB, potentials_data()))
    local names = {}
    for i, p in ipairs(paths) do names[i] = p:match("[^/]+$") end
    assert.same({"candidates.svg", "time_breakdown.svg", "stage_memory.svg", "pipeline.svg",
                 "potentials.svg", "report.html"}, names)
    for _, p in ipairs(paths) do
      local text = assert(read(p))
      if p:match("%.svg$") then check_svg(text) end
    end
    local page = read(dir .. "/report.html")
    assert.equal(5, select(2, page:gsub("<svg ", "")))
    assert.matches("Top strategies", page)
    os.execute("rm -rf '" .. dir:gsub("/deeper/report$", "") .. "'")
  end)

  it("reports a search where nothing fits with the candidates alone", function()
    local dir = os.tmpname()
    os.remove(dir)
    local paths = assert(report.search_report(dir, {}, POINTS, 10 * GiB, nil))
    assert.equal(2, #paths)
    assert.matches("No strategy fits", read(dir .. "/report.html"))
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
