-- Best throughput with memory headroom: only strategies whose heaviest stage leaves 10%
-- of the budget free (fragmentation spikes, a longer sequence later) are kept:
--   ndplan search ... --policy headroom [--policy-opts headroom=0.2]
-- It only lowers the budget in setup; with no admit or objective hook the C core keeps
-- its fast path, and the ranking is the default one (the tokens of a step are fixed, so
-- the shortest step is the highest throughput).
return {
  name = "headroom",
  description = "highest tokens/s leaving 10% of the memory budget free",

  setup = function(job, opts)
    local share = tonumber(opts.policy.headroom or 0.10)
    if not share or share < 0 or share >= 1 then
      error("headroom: expected a share in [0, 1), got " .. tostring(opts.policy.headroom))
    end
    opts.budget_bytes = opts.budget_bytes * (1 - share)
  end,
}
