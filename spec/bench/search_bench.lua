-- Benchmark (not a test): the full search, every dimension searched, on one and on two
-- threads, with the whole-model recompute modes (off, selective, full) and with auto, which
-- adds a per-layer recompute plan for every candidate. Prints candidates walked per second, priced per second and the wall
-- time of the walk + pricing (ndplan.c.search reports it). Run with `make bench`.
local cases = {
  {"deepseek-v3 h800x2048 b4096 s4096", {model = "deepseek-v3", device = "h800", devices = 2048,
                                          global_batch = 4096, seq_len = 4096}},
  {"llama3.1-405b h100x16384 b2048 s8192", {model = "llama3.1-405b", device = "h100",
                                             devices = 16384, global_batch = 2048, seq_len = 8192}},
}
local repeats = tonumber(arg and arg[1]) or 3
for _, c in ipairs(cases) do
 for _, rec in ipairs({{"off,selective,full", {"off", "selective", "full"}}, {"auto (+per_layer)", "auto"}}) do
  local walls = {}
  for _, jobs in ipairs({1, 2}) do
    local best, info
    for _ = 1, repeats do
      local args = {recompute = rec[2], jobs = jobs, top = 1}
      for k, v in pairs(c[2]) do args[k] = v end
      local _, i = assert(nd.search(args))
      if not best or i.elapsed_s < best then best, info = i.elapsed_s, i end
    end
    walls[jobs] = best
    print(string.format("search  %-38s %-18s -j %d  %9d tested %8d priced %7d fit  %10.0f tested/s "
                        .. "%9.0f priced/s  %.3f s", c[1], rec[1], jobs, info.tested, info.priced,
                        info.fit, info.tested / best, info.priced / best, best))
  end
  print(string.format("search  %-38s %-18s -j 2 speed-up %.2fx", c[1], rec[1], walls[1] / walls[2]))
 end
end
