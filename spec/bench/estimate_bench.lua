-- Benchmark (not a test): full estimates per second per core, Llama-3.1-70B on H100 with a
-- fixed strategy, priced in a C loop (ndplan.c.estimate.bench). Run with `make bench`.
local core = require "ndplan.c.estimate"
local m = assert(nd.model("llama3.1-70b"))
local d = assert(nd.device("h100"))
local job = {devices = 64, global_batch = 512, seq_len = 8192}
local cases = {
  {"tp8 pp4 sp zero1 full", {tp = 8, pp = 4, sp = true, zero = 1, recompute = "full"}},
  {"tp8 pp8 vpp5 selective", {tp = 8, pp = 8, vpp = 5, sp = true, recompute = "selective"}},
  {"tp4 pp2 cp2 none", {tp = 4, pp = 2, cp = 2, sp = true}},
}
local n = tonumber(arg and arg[1]) or 300000
for _, c in ipairs(cases) do
  core.bench(m, d, job, c[2], 1000)  -- warm up
  local secs = core.bench(m, d, job, c[2], n)
  print(string.format("estimate  llama3.1-70b h100x64  %-24s %10.0f estimates/s  (%d in %.3f s CPU)",
                      c[1], n / secs, n, secs))
end
