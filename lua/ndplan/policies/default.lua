-- The default search policy: price everything the walk admits, minimise step time (ties go
-- to the lower peak memory, then to the earlier candidate in the walk), show the first
-- `top` results. It has no admit and no objective hook, so the C core prices without
-- calling Lua at all. Copy it to start a policy of your own (ndplan search --policy FILE).
return {
  name = "default",
  description = "fastest step time that fits the memory budget",

  -- rank(results, opts): results is ranked already (results[1] is the best, #results kept);
  -- return the rows to show.
  rank = function(results, opts)
    local shown = {}
    for i = 1, math.min(opts.top, #results) do shown[i] = results[i] end
    return shown
  end,
}
