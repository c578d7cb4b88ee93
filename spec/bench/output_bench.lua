-- Benchmark (not a test): what `ndplan search -o DIR` costs beyond the search (issue 12
-- item 5, issue 18 "output at the speed of the search"). Each case runs the command twice
-- as a child process, without -o and with it, and prints the best wall time of 3 of each
-- and their ratio against the target (-o within 2x the search alone). The binary is the
-- one running this file (NDPLAN_BIN overrides). `make bench`.
local clock = require("ndplan.c.search").clock
local repeats = 3
local bin = os.getenv("NDPLAN_BIN") or (arg and arg[-1]) or "ndplan"
local dir = os.tmpname()
os.remove(dir)

-- {label, arguments}
local cases = {
  {"llama3.1-70b h100x64 b512 s8192 auto",
   "-m llama3.1-70b -A h100 -d 64 -b 512 --seq-len 8192 --recompute auto"},
  {"deepseek-v3 h800x2048 b4096 s4096 auto",
   "-m deepseek-v3 -A h800 -d 2048 -b 4096 --seq-len 4096 --recompute auto"},
}

local function best(cmd)
  local t
  for _ = 1, repeats do
    local t0 = clock()
    local ok = os.execute(cmd .. " > /dev/null")
    local dt = clock() - t0
    if not ok then error("bench: failed: " .. cmd) end
    if not t or dt < t then t = dt end
  end
  return t
end

for _, c in ipairs(cases) do
  local base = string.format("%q search %s -j 1", bin, c[2])
  local alone = best(base)
  local with_o = best(base .. string.format(" -o %q", dir))
  print(string.format("output  %-40s search %7.3f s  with -o %7.3f s  %5.1fx  (target <= 2x)",
                      c[1], alone, with_o, with_o / alone))
end
os.execute(string.format("rm -rf %q", dir))
