-- `make install` (cmake --install): the binary, the Lua module where lua5.4 finds it, the C
-- library with its headers and pkg-config file, bash completion and the man page, and that
-- another C or Lua program can use them.
local R = dofile("spec/support/run.lua")

local build = os.getenv("NDPLAN_BUILD_DIR")
local prefix = os.tmpname()
os.remove(prefix)

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

describe("install", function()
  local r = R.sh(string.format("cmake --install %s --prefix %s", R.quote(build), R.quote(prefix)))

  it("installs every piece", function()
    assert.equal(0, r.code, r.err)
    for _, p in ipairs({"bin/ndplan", "lib/libndplan.a", "lib/lua/5.4/ndplan.so",
                        "lib/pkgconfig/ndplan.pc", "include/ndplan/estimate.h",
                        "include/ndplan/version.h", "share/bash-completion/completions/ndplan",
                        "share/ndplan/lua/ndplan/init.lua", "share/ndplan/lua/ndplan/io/json.lua"}) do
      assert.is_true(exists(prefix .. "/" .. p), p)
    end
    assert.is_false(exists(prefix .. "/include/ndplan/ndplan_lua.h"))  -- the bindings', not the API
  end)

  it("installs the man page when help2man is present", function()
    if R.sh("command -v help2man").code ~= 0 then
      pending("help2man not installed: no man page to check")
      return
    end
    assert.is_true(exists(prefix .. "/share/man/man1/ndplan.1"))
    local page = io.open(prefix .. "/share/man/man1/ndplan.1"):read("a")
    assert.matches("%.SS estimate", page)
  end)

  local sanitized = os.getenv("NDPLAN_SANITIZE") == "1"

  it("lets a C program link the core through pkg-config", function()
    if sanitized then
      pending("the sanitizer build's library needs the sanitizer runtime: checked in the plain build")
      return
    end
    local src = R.tempfile([[
#include <stdio.h>
#include "ndplan/estimate.h"
int main (void) {
  nd_costs c;
  nd_costs_init(&c);
  printf("%g %d\n", c.weight_bytes, nd_costs_validate(&c, NULL, 0));
  return 0;
}
]], ".c")
    local exe = src .. ".out"
    local c = R.sh(string.format("cc -std=c11 -o %s %s $(PKG_CONFIG_PATH=%s/lib/pkgconfig pkg-config "
                                 .. "--define-prefix --cflags --libs ndplan) && %s",
                                 R.quote(exe), R.quote(src), R.quote(prefix), R.quote(exe)))
    assert.equal(0, c.code, c.err)
    assert.equal("2 0\n", c.out)
  end)

  it("lets stock lua5.4 require the installed module", function()
    if sanitized then
      pending("an instrumented module cannot load into stock lua5.4: checked in the plain build")
      return
    end
    local l = R.sh(string.format("lua5.4 -e 'package.cpath = %s .. \"/lib/lua/5.4/?.so;\" .. package.cpath; "
                                 .. "print(require(\"ndplan\").model(\"llama3.1-8b\"):params().total)'",
                                 string.format("%q", prefix)))
    assert.equal(0, l.code, l.err)
    assert.matches("^%d+\n$", l.out)
  end)

  it("removes its prefix", function()
    assert.equal(0, R.sh("rm -rf " .. R.quote(prefix)).code)
  end)
end)
