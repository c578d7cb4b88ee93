-- Benchmark (not a test): full estimates per second per core, Llama-3.1-70B on H100 with a
-- fixed strategy, priced in a C loop (ndplan.c.estimate.bench); then the same estimate
-- through the Lua API, nd.estimate{...}, by name (model = "llama3.1-70b", device = "h100":
-- the cache of loaded files) and with loaded objects, against issue 18's floor of 200,000
-- estimates/s by name. Each figure is the best of 3 runs, in CPU time. Run with `make bench`.
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
local repeats = 3
local LUA_FLOOR = 200000  -- issue 18: estimates/s through nd.estimate by name, one core

local function best_rate(count, run)
  local best = 0
  for _ = 1, repeats do
    local secs = run(count)
    best = math.max(best, count / secs)
  end
  return best
end

for _, c in ipairs(cases) do
  core.bench(m, d, job, c[2], 1000)  -- warm up
  local rate = best_rate(n, function(k) return core.bench(m, d, job, c[2], k) end)
  print(string.format("estimate  llama3.1-70b h100x64  %-24s %10.0f estimates/s  C loop (best of %d, %d each)",
                      c[1], rate, repeats, n))
end

-- nd.estimate: the arguments a user types, the default stack profile (megatron-core)
local function lua_rate(model, device, strategy)
  local args = {model = model, device = device}
  for k, v in pairs(job) do args[k] = v end
  for k, v in pairs(strategy) do args[k] = v end
  assert(nd.estimate(args))
  local count = math.max(1000, n // 10)
  return best_rate(count, function(k)
    local t0 = os.clock()
    for _ = 1, k do nd.estimate(args) end
    return os.clock() - t0
  end), count
end

for _, c in ipairs(cases) do
  local by_name, count = lua_rate("llama3.1-70b", "h100", c[2])
  local loaded = lua_rate(m, d, c[2])
  print(string.format("estimate  llama3.1-70b h100x64  %-24s %10.0f estimates/s  nd.estimate by name"
                      .. " (floor %d)  %10.0f with loaded objects (best of %d, %d each)",
                      c[1], by_name, LUA_FLOOR, loaded, repeats, count))
end
