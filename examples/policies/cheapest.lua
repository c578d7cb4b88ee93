-- Cheapest dollars per million tokens trained, at a price per device-hour:
--   ndplan search ... --policy cheapest --policy-opts price=2.49
-- The objective is devices x price x step time over the tokens of a step, so the ranking
-- also shows what a run costs; `done` writes cost.csv into -o DIR.
local price, devices

return {
  name = "cheapest",
  description = "lowest $ per million tokens at a price per device-hour",
  objective_label = "$/Mtok",

  setup = function(job, opts)
    price = tonumber(opts.policy.price or 2.0)
    if not price or price <= 0 then
      error("price: expected dollars per device-hour above 0, got " .. tostring(opts.policy.price))
    end
    devices = job.devices
  end,

  -- dollars per million tokens of this strategy
  objective = function(e)
    return devices * price / 3600 / e.tokens_per_s * 1e6
  end,

  done = function(ranked, out)
    if not out.dir then return end
    local lines = {"rank,dollars_per_million_tokens,dollars_per_step,tokens_per_s"}
    for _, r in ipairs(ranked) do
      lines[#lines + 1] = string.format("%d,%.6f,%.6f,%.0f", r.rank, r.objective,
                                        devices * price / 3600 * r.step_time_s, r.tokens_per_s)
    end
    assert(out.write("cost.csv", table.concat(lines, "\n") .. "\n"))
  end,
}
