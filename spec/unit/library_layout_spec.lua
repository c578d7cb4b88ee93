-- The Lua library's layout (issue 12, item 8): every module of lua/ndplan/ loads by the name
-- its path gives (lua/ndplan/io/json.lua is ndplan.io.json, a folder's init.lua the folder),
-- from the bundle embedded in the binary and from a source tree ($NDPLAN_ROOT); the scripts
-- reach no C module (ndplan.c.*) but through the library; and only the CLI layer
-- (lua/ndplan/cli/) stops a command with ndplan.cli's fail: the library returns nil, message
-- or raises. The checks read the source tree, so a file added later is held to them too.
local nd = require "ndplan"
local R = dofile("spec/support/run.lua")

-- the tracked Lua files under dir, as paths from the source root (the specs run there)
local function lua_files(dir)
  local p = io.popen("find " .. dir .. " -name '*.lua' | sort")
  local out = {}
  for path in p:lines() do out[#out + 1] = path end
  p:close()
  return out
end

local function read(path) return assert(R.read(path), path) end

-- lua/ndplan/a/b.lua -> ndplan.a.b; lua/ndplan/a/init.lua -> ndplan.a
local function module_name(path)
  local rel = assert(path:match("^lua/(ndplan/.*)%.lua$"), path)
  return (rel:gsub("/init$", ""):gsub("/", "."))
end

-- the library's modules: every Lua file under lua/ndplan but the bundled policies (files a
-- search loads by name, lua/ndplan/policies/NAME.lua, not modules)
local function modules()
  local out = {}
  for _, path in ipairs(lua_files("lua/ndplan")) do
    if not path:match("^lua/ndplan/policies/") then
      out[#out + 1] = {path = path, name = module_name(path)}
    end
  end
  return out
end

-- the lines of text that break a rule: a require of a module whose name matches `pattern`
-- (a Lua pattern), or a call of cli.fail
local function requires(text, pattern)
  local hits = {}
  for line in text:gmatch("[^\n]+") do
    local name = line:match("require%s*%(?%s*[\"']([%w_.]+)[\"']")
    if name and name:match(pattern) then hits[#hits + 1] = line end
  end
  return hits
end
local function fails(text)
  local hits = {}
  for line in text:gmatch("[^\n]+") do
    if line:match("cli%.fail%s*%(") and not line:match("^%s*%-%-") then hits[#hits + 1] = line end
  end
  return hits
end

describe("the library's layout", function()
  it("maps each path to its module name", function()
    assert.equal("ndplan", module_name("lua/ndplan/init.lua"))
    assert.equal("ndplan.cli", module_name("lua/ndplan/cli/init.lua"))
    assert.equal("ndplan.io.json", module_name("lua/ndplan/io/json.lua"))
    assert.equal("ndplan.export.megatron", module_name("lua/ndplan/export/megatron.lua"))
  end)

  it("has every module in the bundle, found by its name there", function()
    local list = modules()
    assert.is_true(#list > 40)
    for _, m in ipairs(list) do
      local text = nd.bundle.read(m.path)
      assert.equal(read(m.path), text, m.path .. " is not bundled as it is in the tree")
      local loader, where = nd.bundle.searcher(m.name)
      assert.is_function(loader, m.name .. ": " .. tostring(loader))
      assert.equal(m.path, where)
      assert.is_not_nil(require(m.name), m.name)
    end
  end)

  -- the embedded copies are chunks compiled at build time (engine/tools/embed.c): each must
  -- keep the file name and lines its text compiles to, so tracebacks read as before
  it("loads each embedded file with the name and lines of its text", function()
    local function lines_of(f)
      local info = debug.getinfo(f, "SL")
      local active = {}
      for l in pairs(info.activelines) do active[#active + 1] = l end
      table.sort(active)
      return {source = info.source, last = info.lastlinedefined, lines = active}
    end
    local paths = lua_files("lua/ndplan")
    for _, p in ipairs(lua_files("scripts")) do paths[#paths + 1] = p end
    for _, path in ipairs(paths) do
      local embedded = assert(nd.bundle.load(path))
      local from_text = assert(load(read(path), "@" .. path, "t"))
      assert.same(lines_of(from_text), lines_of(embedded), path)
    end
    local r = R.run({"-e", 'require("ndplan.recompute").layer_modes({ranges = {{first = 0, '
                           .. 'count = "x", mode = "off"}}})'}, {env = "env -u NDPLAN_ROOT"})
    local line, n = nil, 0  -- the line of the error() that message comes from
    for text in (read("lua/ndplan/recompute.lua") .. "\n"):gmatch("([^\n]*)\n") do
      n = n + 1
      if text:find("count must be a whole number", 1, true) then line = n end
    end
    assert.matches("lua/ndplan/recompute.lua:" .. line .. ": in function "
                   .. "'ndplan.recompute.validate_ranges'", r.err, 1, true)
  end)

  it("loads every module by its name in the binary, embedded and from a source tree", function()
    local names = {}
    for _, m in ipairs(modules()) do names[#names + 1] = string.format("%q", m.name) end
    local code = "local n = 0 for _, m in ipairs({" .. table.concat(names, ",") .. "}) do "
                 .. "assert(require(m) ~= nil, m) n = n + 1 end print(n)"
    local cwd = os.getenv("PWD") or "."
    for _, env in ipairs({"env -u NDPLAN_ROOT", "NDPLAN_ROOT=" .. R.quote(cwd)}) do
      local r = R.run({"-e", code}, {env = env})
      assert.equal(0, r.code, env .. ": " .. r.err)
      assert.equal(tostring(#names) .. "\n", r.out, env)
    end
  end)

  it("finds the rules' breaches when there are some (the checks below can fail)", function()
    assert.equal(1, #requires('local units = require "ndplan.c.units"', "^ndplan%.c%."))
    assert.equal(1, #requires("local s = require('ndplan.c.search')", "^ndplan%.c%."))
    assert.equal(0, #requires('local nd = require "ndplan"', "^ndplan%.c%."))
    assert.equal(1, #requires('local cli = require("ndplan.cli")', "^ndplan%.cli"))
    assert.equal(1, #fails('  if bad then cli.fail("--x: expected y", cli.EXIT_USAGE) end'))
    assert.equal(0, #fails("-- callers report it with cli.fail(message)"))
  end)

  it("keeps scripts off the C modules: they go through the library", function()
    for _, path in ipairs(lua_files("scripts")) do
      assert.same({}, requires(read(path), "^ndplan%.c%."), path)
    end
  end)

  it("stops a command with cli.fail only in the CLI layer (lua/ndplan/cli/)", function()
    for _, m in ipairs(modules()) do
      if not m.path:match("^lua/ndplan/cli/") then
        local text = read(m.path)
        assert.same({}, fails(text), m.path)
        assert.same({}, requires(text, "^ndplan%.cli"), m.path)
      end
    end
  end)
end)
