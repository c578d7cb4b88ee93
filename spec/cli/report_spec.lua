-- The charts and report.html as the commands write them, and (where Chromium is installed)
-- the page and each chart rendered headless to PNG: the expected size, and not blank.
local R = dofile("spec/support/run.lua")

local tmpdir = R.tmpdir

local read = R.read

local ESTIMATE = {"estimate", "-m", "llama3.1-70b", "-A", "h100", "-d", "64", "-b", "512",
                  "--seq-len", "8192", "--tp", "8", "--pp", "4", "--sp", "--zero", "1"}
local function with(base, extra)
  local a = {table.unpack(base)}
  for _, x in ipairs(extra) do a[#a + 1] = x end
  return a
end

local CHARTS = {"stage_memory", "time_breakdown", "pipeline"}

-- every chart file is inlined, unchanged, in report.html
local function check_report(dir, charts)
  local page = assert(read(dir .. "/report.html"), "no report.html in " .. dir)
  assert.matches("^<!DOCTYPE html>", page)
  assert.equal(#charts, select(2, page:gsub("<svg ", "")))
  for _, name in ipairs(charts) do
    local chart = assert(read(dir .. "/" .. name .. ".svg"), "no " .. name .. ".svg")
    assert.matches("^<svg ", chart)
    assert.truthy(page:find(chart:gsub("\n$", ""), 1, true), name .. " is not inlined as written")
  end
  return page
end

describe("ndplan estimate --plot DIR", function()
  it("writes the stage memory, time breakdown and pipeline charts and report.html", function()
    local dir = tmpdir() .. "/new/plots"
    local r = R.run(with(ESTIMATE, {"--plot", dir}))
    assert.equal(0, r.code, r.err)
    assert.matches("step time", r.out)  -- the usual output is still printed
    local page = check_report(dir, CHARTS)
    assert.matches("llama3.1%-70b", page)
    assert.matches("Pipeline schedule: 1F1B, 4 stages", read(dir .. "/pipeline.svg"))
    assert.matches("first 10 of 256 micro%-batches", read(dir .. "/pipeline.svg"))
    os.execute("rm -rf " .. R.quote(dir:gsub("/new/plots$", "")))
  end)

  it("writes the same bytes on a second run", function()
    local a, b = tmpdir(), tmpdir()
    assert.equal(0, R.run(with(ESTIMATE, {"--plot", a, "--json"})).code)
    assert.equal(0, R.run(with(ESTIMATE, {"--plot", b, "--json"})).code)
    for _, name in ipairs({"stage_memory.svg", "time_breakdown.svg", "pipeline.svg", "report.html"}) do
      assert.equal(read(a .. "/" .. name), read(b .. "/" .. name), name)
    end
    os.execute("rm -rf " .. R.quote(a) .. " " .. R.quote(b))
  end)

  it("plots a strategy over the budget too, and still exits 3", function()
    local dir = tmpdir()
    local r = R.run(with(ESTIMATE, {"--plot", dir, "-M", "30GiB"}))
    assert.equal(3, r.code)
    assert.matches("over budget", read(dir .. "/stage_memory.svg"))
    os.execute("rm -rf " .. R.quote(dir))
  end)

  it("fails with one line naming the folder when it cannot be written", function()
    local r = R.run(with(ESTIMATE, {"--plot", "/proc/ndplan-no/plots"}))
    assert.equal(1, r.code)
    assert.matches("^ndplan: .*/proc/ndplan%-no", r.err)
  end)
end)

describe("ndplan recompute -o DIR", function()
  it("adds the potentials chart to the plan's charts and report.html", function()
    local dir = tmpdir()
    local r = R.run({"recompute", "-m", "llama3.1-8b", "-A", "h100", "-d", "8", "-b", "64", "--seq-len",
                     "8192", "--tp", "2", "--pp", "4", "--mbs", "2", "-M", "40GiB", "--steps", "3", "-o", dir})
    assert.equal(0, r.code, r.err)
    local page = check_report(dir, {"stage_memory", "time_breakdown", "pipeline", "potentials"})
    assert.matches("Recompute potentials", page)
    assert.matches(">1%.0</text>", read(dir .. "/potentials.svg"))
    assert.truthy(read(dir .. "/recompute_potentials.csv"))
    os.execute("rm -rf " .. R.quote(dir))
  end)
end)

---------------------------------------------------------------------------------------------
-- Rendering in a browser
---------------------------------------------------------------------------------------------

local function which(names)
  for _, n in ipairs(names) do
    local p = io.popen("command -v " .. n .. " 2>/dev/null")
    local path = p:read("l")
    p:close()
    if path and path ~= "" then return path end
  end
end

-- png_size(path) -> width, height, bytes from the PNG signature and IHDR chunk
local function png_size(path)
  local s = read(path)
  assert(s, path .. " was not written")
  assert.equal("\137PNG\r\n\26\n", s:sub(1, 8))
  assert.equal("IHDR", s:sub(13, 16))
  local w, h = string.unpack(">I4>I4", s, 17)
  return w, h, #s
end

describe("report.html rendered by headless Chromium", function()
  local chromium = which({"chromium", "chromium-browser"})
  if not chromium then
    pending("chromium not installed: render test skipped")
    return
  end

  local dir = tmpdir()
  local profile = dir .. "/profile"
  -- screenshot(file, w, h) -> the PNG's path; one fresh browser per shot
  local shots = 0
  local function screenshot(file, w, h)
    shots = shots + 1
    local out = string.format("%s/shot%d.png", dir, shots)
    os.execute(string.format("timeout 120 %s --headless --disable-gpu --no-sandbox --hide-scrollbars "
                             .. "--user-data-dir=%s --screenshot=%s --window-size=%d,%d %s >/dev/null 2>&1",
                             R.quote(chromium), R.quote(profile), R.quote(out), w, h,
                             R.quote("file://" .. file)))
    return out
  end
  -- a blank page's screenshot of the same size is the floor a drawn page must clear
  local blanks = {}
  local function blank_bytes(w, h)
    local k = w .. "x" .. h
    if not blanks[k] then
      local f = assert(io.open(dir .. "/blank.html", "wb"))
      f:write('<!DOCTYPE html><html><body style="background:#fff"></body></html>\n')
      f:close()
      local bw, bh, bytes = png_size(screenshot(dir .. "/blank.html", w, h))
      assert.same({w, h}, {bw, bh})
      blanks[k] = bytes
    end
    return blanks[k]
  end

  local plots = dir .. "/plots"
  assert.equal(0, R.run(with(ESTIMATE, {"--plot", plots})).code)

  it("draws the page at the window's size, far from blank", function()
    local w, h, bytes = png_size(screenshot(plots .. "/report.html", 1280, 2000))
    assert.same({1280, 2000}, {w, h})
    local floor = blank_bytes(1280, 2000)
    assert.is_true(bytes > 4 * floor, string.format("report.png %d bytes, blank %d", bytes, floor))
  end)

  for _, name in ipairs(CHARTS) do
    it("draws " .. name .. ".svg at its own size, far from blank", function()
      local path = plots .. "/" .. name .. ".svg"
      local sw, sh = read(path):match('^<svg [^>]-width="(%d+)" height="(%d+)"')
      sw, sh = tonumber(sw), tonumber(sh)
      local w, h, bytes = png_size(screenshot(path, sw, sh))
      assert.same({sw, sh}, {w, h})
      local floor = blank_bytes(sw, sh)
      assert.is_true(bytes > 3 * floor, string.format("%s.png %d bytes, blank %d", name, bytes, floor))
    end)
  end

  teardown(function() os.execute("rm -rf " .. R.quote(dir)) end)
end)
