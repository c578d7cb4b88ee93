-- Keep tensor parallelism inside one scale-up domain (a node: 8 GPUs on HGX) and the
-- pipeline at 8 stages or fewer -- the rule of thumb most training teams start from:
--   ndplan search ... --policy tp_in_node [--policy-opts max_pp=4]
-- Candidates outside it are refused as "filtered out" before they are priced.
local node, max_pp

return {
  name = "tp_in_node",
  description = "TP within a node, PP <= 8",

  setup = function(job, opts)
    node = job.node_size
    max_pp = math.tointeger(tonumber(opts.policy.max_pp or 8))
    if not max_pp or max_pp < 1 then error("max_pp: expected a positive integer") end
  end,

  admit = function(c)
    return c.tp <= node and c.pp <= max_pp
  end,
}
