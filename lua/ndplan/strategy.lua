-- One strategy shape, from results and search rows back to nd.estimate arguments: the
-- arguments that price a strategy table again (estimate_args) and a searched row again
-- (row_args). Every name list is the core's (ndplan.c.estimate.names()). The command line's
-- side (the shared options and their arguments) is ndplan.cli.options.
local M = {}

M.NAMES = require("ndplan.c.estimate").names()

-- words(list [, last]) -> "a, b, c or d"
function M.words(list, last)
  if #list <= 1 then return list[1] or "" end
  return table.concat(list, ", ", 1, #list - 1) .. " " .. (last or "or") .. " " .. list[#list]
end

-- copy(v) -> a deep copy of v (tables copied all the way down; other values as they are).
-- Here rather than in ndplan.export, which keeps it as export.copy: pricing a row needs
-- it, and loading the exporters for it cost a search -o about 2% of its time.
local function copy(t)
  if type(t) ~= "table" then return t end
  local out = {}
  for k, v in pairs(t) do out[k] = copy(v) end
  return out
end
M.copy = copy

-- estimate_args(st, ctx) -> the nd.estimate arguments that price strategy table st (the
-- shape nd.estimate reads: every field of the core's strategy_keys present in st, copied)
-- on ctx's model, device, job ({devices, global_batch, seq_len}), max_mem, costs and stack.
function M.estimate_args(st, ctx)
  -- copied deep: the caller's tables stay its own
  local job = ctx.job or {}
  local args = {model = ctx.model, device = ctx.device, devices = job.devices,
                global_batch = job.global_batch, seq_len = job.seq_len, max_mem = ctx.max_mem,
                costs = ctx.costs, stack = ctx.stack}
  for _, k in ipairs(M.NAMES.strategy_keys) do args[k] = copy(st[k]) end
  return args
end

-- What a search row's strategy carries back: its degrees, micro-batching and layout flags;
-- the schedule, the recipe and the other space fields are the search's (info.space), as the
-- walk priced them; the recompute is the caller's.
M.ROW_KEYS = {"dp", "tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero", "mbs", "mb",
              "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
              "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"}

-- row_args(st, info) -> the nd.estimate arguments that price a searched strategy again (on
-- the search's job, device, budget, costs and stack; info is nd.search's)
function M.row_args(st, info)
  local merged = {}
  for _, k in ipairs(M.NAMES.space_keys) do merged[k] = info.space[k] end
  for _, k in ipairs(M.ROW_KEYS) do merged[k] = st[k] end
  merged.precision = st.precision or merged.precision  -- the recipe the walk priced
  if info.space.dp_shard ~= nil or info.space.dp_replicate ~= nil then  -- HSDP, when walked
    merged.dp_shard = st.dp_shard
  end
  return M.estimate_args(merged, {model = info.model_obj, device = info.device_obj,
                                  job = info.job, max_mem = info.budget_bytes,
                                  costs = info.costs, stack = info.stack})
end

return M
