-- Issue 16, item 7: `make demo` is quiet and ends with what its output shows; `make test`
-- shows skipped tests (spec/support/skip_status.sh, test_summary.sh).
local R = dofile("spec/support/run.lua")

local function sh(script)
  return R.sh(script)
end

describe("make test's skips", function()
  it("a spec file that passed with skipped tests exits 77; a failure stays a failure", function()
    local skip = sh("sh spec/support/skip_status.sh printf 'ok 1 - a\\nok 2 - # SKIP b why\\n1..2\\n'")
    assert.equal(77, skip.code)
    assert.matches("ok 2 - # SKIP b why", skip.out, 1, true)   -- the output is passed on
    local pass = sh("sh spec/support/skip_status.sh printf 'ok 1 - a\\n1..1\\n'")
    assert.equal(0, pass.code)
    local fail = sh("sh spec/support/skip_status.sh sh -c \"printf 'ok 1 - # SKIP b\\nnot ok 2 - c\\n'; exit 1\"")
    assert.equal(1, fail.code)
  end)

  it("names each skipped test and why after the summary", function()
    local dir = R.tmpdir()
    os.execute("mkdir -p " .. R.quote(dir .. "/Testing/Temporary"))
    local f = assert(io.open(dir .. "/Testing/Temporary/LastTest.log", "w"))
    f:write("ok 1 - fine\nok 6 - # SKIP report rendered chromium not installed\n")
    f:close()
    local r = sh("sh spec/support/test_summary.sh " .. R.quote(dir))
    assert.equal(0, r.code)
    assert.equal("SKIPPED: 1 test(s) did not run (the rest passed or failed as above):\n"
                 .. "  report rendered chromium not installed\n", r.out)
    os.execute("rm -rf " .. R.quote(dir))
  end)
end)

describe("make demo", function()
  local build = os.getenv("NDPLAN_BUILD_DIR")
  it("prints no build output and ends with a summary and what to try next", function()
    if not build or os.execute("command -v make >/dev/null 2>&1") ~= true then
      pending("no build folder from ctest (NDPLAN_BUILD_DIR) or no make")
      return
    end
    -- DEB_PACKAGES= : nothing to check or install here; CMAKE=true: ctest built the binary,
    -- and a rebuild under the other specs running at the same time would pull it from them
    local r = sh("make --no-print-directory demo DEB_PACKAGES= CMAKE=true BUILD_DIR=" .. R.quote(build))
    assert.equal(0, r.code, r.err)
    assert.is_nil(r.out:find("Building C object", 1, true), r.out)
    assert.is_nil(r.out:find("%[%s*%d+%%%]"), r.out)
    assert.is_true(select(2, r.out:gsub("\n", "")) < 110, "more lines than the three results")
    assert.matches("\n%$ " .. build:gsub("%p", "%%%0") .. "/ndplan search ", r.out)
    assert.matches("What this shows:", r.out, 1, true)
    assert.matches("make install%s+# ndplan on your PATH", r.out)
    assert.matches("%d+ tested: .* fit", r.out)
  end)
end)
