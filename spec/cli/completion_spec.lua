-- `ndplan completion bash`: the script bash sources, completing commands, flags and names.
local R = dofile("spec/support/run.lua")

-- Runs the completion function for a command line (the last word is being completed).
local function complete(words)
  local bin = os.getenv("NDPLAN_BIN")
  local dir = bin:match("^(.*)/[^/]+$")
  local quoted = {}
  for i, w in ipairs(words) do quoted[i] = R.quote(w) end
  local script = string.format([[
PATH=%s:$PATH
source <(ndplan completion bash)
COMP_WORDS=(%s); COMP_CWORD=%d
_ndplan
printf '%%s\n' "${COMPREPLY[@]}"
]], R.quote(dir), table.concat(quoted, " "), #words - 1)
  local r = R.sh("bash -c " .. R.quote(script))
  assert.equal(0, r.code, r.err)
  local out = {}
  for line in r.out:gmatch("[^\n]+") do out[#out + 1] = line end
  return out
end

describe("ndplan completion", function()
  it("prints a bash script that parses", function()
    local r = R.run({"completion", "bash"})
    assert.equal(0, r.code, r.err)
    local path = R.tempfile(r.out, ".bash")
    assert.equal(0, R.sh("bash -n " .. R.quote(path)).code)
  end)

  it("completes commands", function()
    assert.same({"estimate", "export"}, complete({"ndplan", "e"}))
  end)

  it("completes a command's flags from its --help", function()
    assert.same({"--model"}, complete({"ndplan", "estimate", "--mod"}))
    assert.same({"--recompute", "--recompute-modes"}, complete({"ndplan", "estimate", "--recomp"}))
  end)

  it("completes model and device names from the catalog", function()
    assert.same({"llama3.1-405b", "llama3.1-70b", "llama3.1-8b"},
                complete({"ndplan", "estimate", "-m", "llama3"}))
    assert.same({"h100", "h200", "h800"}, complete({"ndplan", "estimate", "-A", "h"}))
  end)

  it("refuses another shell with a usage error", function()
    local r = R.run({"completion", "fish"})
    assert.equal(2, r.code)
  end)
end)
