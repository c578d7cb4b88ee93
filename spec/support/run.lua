-- Runs the ndplan binary the way a user does and captures what it prints, in the spirit of
-- Lua's testes/main.lua. The binary comes from $NDPLAN_BIN (set by ctest) or build/ndplan.
local M = {}

M.bin = os.getenv("NDPLAN_BIN") or "build/ndplan"

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  os.remove(path)
  return s
end

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
M.quote = quote

-- run(args, opts) -> {out=, err=, code=}. args: array of words (quoted for the shell);
-- opts.stdin: text fed on standard input; opts.env: "NAME=value ..." prefix.
function M.run(args, opts)
  opts = opts or {}
  local words = {}
  for i, a in ipairs(args) do words[i] = quote(a) end
  local out, err = os.tmpname(), os.tmpname()
  local input = "/dev/null"
  if opts.stdin then
    input = os.tmpname()
    local f = assert(io.open(input, "wb"))
    f:write(opts.stdin)
    f:close()
  end
  local cmd = string.format("%s %s %s <%s >%s 2>%s", opts.env or "", quote(M.bin),
                            table.concat(words, " "), input, out, err)
  local _, _, code = os.execute(cmd)
  if opts.stdin then os.remove(input) end
  return {out = slurp(out), err = slurp(err), code = code}
end

-- sh(script) -> {out=, err=, code=} for cases that need the shell (signals, pipes).
function M.sh(script)
  local out, err = os.tmpname(), os.tmpname()
  local _, _, code = os.execute(string.format("NDPLAN=%s; (%s) >%s 2>%s", quote(M.bin),
                                              script, out, err))
  return {out = slurp(out), err = slurp(err), code = code}
end

-- tmpdir() -> the path of a fresh empty folder
function M.tmpdir()
  local base = os.tmpname()
  os.remove(base)
  assert(os.execute("mkdir -p " .. quote(base)))
  return base
end

-- listing(dir) -> the sorted names in dir, hidden ones included
function M.listing(dir)
  local p = io.popen("ls -A " .. quote(dir))
  local names = {}
  for line in p:lines() do names[#names + 1] = line end
  p:close()
  table.sort(names)
  return names
end

-- read(path) -> the file's bytes, or nil when it cannot be opened
function M.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- Writes text to a fresh temporary file and returns its path (suffix appended).
function M.tempfile(text, suffix)
  local base = os.tmpname()
  os.remove(base)
  local path = base .. (suffix or "")
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

return M
