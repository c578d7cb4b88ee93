-- Trainer-aware search: nd.search{trainer = NAME} (ndplan search --trainer NAME) ranks only
-- what that trainer's config file states exactly, so the winner is what the exported file
-- runs. Two steps, both in this layer (the C core walks the space as before):
--   1. the space and an admit rule restrict the walk to the degrees, ZeRO stages, recompute
--      forms and sequence-parallel settings the trainer can state (the same rules its
--      exporter rounds or refuses, ndplan.export.<name>; see ADMIT), so candidates it would
--      round are never priced;
--   2. the ranked results are priced in full (ndplan.search.detail) and exported; only a
--      result the exporter states without rounding (no "rounded" note, not refused) is kept.
--      Layouts, per-layer recompute and precision recipes are checked there.
local export = require "ndplan.export"

local M = {}

-- Per trainer, the candidates (dp tp pp vpp cp ep etp zero mbs mb sp recompute layout) its
-- exporter states without rounding the structure; a candidate outside is not priced.
local ADMIT = {
  -- every degree and ZeRO stage; a per-layer plan only as Megatron states recompute
  -- (the "megatron" recompute form replaces per_layer in the space, see space())
  megatron = function(c) return c.recompute ~= "per_layer" end,
  -- FSDP or replication (no ZeRO-1; EP borrows FSDP ranks), TP always with SP, EP x ETP
  -- dividing dp_shard x cp x tp with ETP 1 or TP (parallel_dims.py:59, 138), whole-model AC
  torchtitan = function(c, dialect)
    if c.etp > 1 and dialect ~= "v0.2.2" then return false end  -- main has no ETP
    if c.dp > 1 and (c.zero == 1 or (c.zero == 0 and c.ep > 1)) then return false end
    if c.tp > 1 and not c.sp then return false end
    local shard = (c.dp > 1 and c.zero == 0) and 1 or (c.dp_shard or c.dp)
    if c.ep > 1 and ((shard * c.cp * c.tp) % (c.ep * c.etp) ~= 0
                     or (c.etp ~= 1 and c.etp ~= c.tp)) then return false end
    return c.recompute ~= "per_layer"
  end,
  -- one stage with AutoTP (no SP, ZeRO <= 2) or PipelineModule stages without TP (ZeRO <= 1,
  -- runtime/pipe/engine.py:76); Ulysses alone; AutoEP without TP; all-or-nothing AC
  deepspeed = function(c, dialect)
    if c.pp > 1 and (c.tp > 1 or c.cp > 1 or (c.dp > 1 and c.zero >= 2) or c.vpp > 1) then return false end
    if c.cp > 1 and c.tp > 1 then return false end
    if c.tp > 1 and (c.sp or (c.zero == 3 and dialect == "0.16.4")) then return false end
    if c.ep > 1 and dialect == "0.16.4" then return false end
    if c.ep > 1 and c.tp > 1 then return false end
    return c.recompute == "none" or c.recompute == "full"
  end,
  -- the parallel optimizer switch (ZeRO-1), no expert TP
  mindformers = function(c)
    if c.dp > 1 and c.zero > 1 then return false end
    return c.etp == 1 and c.recompute ~= "per_layer"
  end,
  -- FSDP shards only (ZeRO-2/3), no EP, no VPP, one recompute mode
  hyper = function(c)
    if c.dp > 1 and c.zero < 2 then return false end
    return c.ep == 1 and c.vpp == 1 and c.recompute ~= "per_layer"
  end,
}

-- check(name, args) -> true | nil, message: a trainer name and a job it can state at all
function M.check(name, args)
  local mod, err = export.get(name)
  if not mod then return nil, "trainer: " .. err end
  local p = args.precision
  if type(p) == "table" then  -- a list of recipes: the first that is not BF16 or FP16
    local q
    for _, x in ipairs(p) do if x ~= "bf16" and x ~= "fp16" then q = q or x end end
    p = q
  end
  if p ~= nil and p ~= "bf16" and p ~= "fp16" then
    local can = {megatron = true, torchtitan = args.dialect == "v0.2.2"}
    if not can[name] then
      return nil, string.format("trainer %s%s states no %s recipe in its config file: search "
                                .. "with the BF16 precision", name,
                                args.dialect and (" " .. args.dialect) or "", p)
    end
  end
  return true
end

-- space(name, recompute) -> the recompute dimension for the trainer: per_layer becomes
-- Megatron's own form ("megatron": the fastest recompute Megatron states that fits) for
-- Megatron and goes for the others; DeepSpeed recomputes all or nothing.
function M.space(name, recompute)
  local list
  if recompute == nil then return nil end
  if recompute == "auto" then list = {"none", "selective", "full", "per_layer"}
  elseif type(recompute) == "table" then list = recompute
  else list = {recompute} end
  local out, seen = {}, {}
  for _, m in ipairs(list) do
    local r = m == false and "none" or m == "off" and "none" or m
    if r == "per_layer" then r = name == "megatron" and "megatron" or nil end
    if name == "deepspeed" and r == "selective" then r = nil end
    if r and not seen[r] then seen[r] = true; out[#out + 1] = r end
  end
  if #out == 0 then return nil, string.format("trainer %s: none of the recompute forms %s", name,
                                               "it states is in the space") end
  return #out == 1 and out[1] or out
end

-- selective_ops(name) -> what "selective" repeats in the trainer's file, or nil (the
-- caller's switches): torchtitan's selective AC is per-op only (ndplan.export.torchtitan.OP_SAC)
function M.selective_ops(name)
  if name == "torchtitan" then return require("ndplan.export.torchtitan").OP_SAC end
  return nil
end

-- admit(name, inner, dialect) -> the admit hook: the trainer's rule, then the policy's own
-- HSDP (a shard group within DP, nd.search's dp_shard) only where the exporter states it:
-- torchtitan's data_parallel_shard_degree x data_parallel_replicate_degree
-- (ndplan.export.torchtitan); the other exporters write a ZeRO stage over all of DP.
local HSDP = {torchtitan = true}

function M.admit(name, inner, dialect)
  local rule = ADMIT[name]
  return function(c)
    if not rule(c, dialect) then return false end
    if not HSDP[name] and c.dp_shard and c.dp_shard < c.dp then return false end
    if inner then return inner(c) end
    return true
  end
end

-- states(name, doc, info, dialect) -> true | false, why: the exporter states the priced
-- result doc (an nd.estimate result) without rounding and without refusing it
function M.states(name, doc, info, dialect)
  local plan = {model = info.model_obj, strategy = doc.strategy, job = doc.job, result = doc,
                layer_recompute = doc.strategy.layer_recompute, budget_bytes = info.budget_bytes}
  local text, notes = export.export(name, plan, {dialect = dialect})
  if not text then return false, notes end
  for _, n in ipairs(notes) do
    if n.kind == "rounded" then return false, export.format_note(n) end
  end
  return true
end

M.SCAN = 400  -- ranked results priced and exported, at most, to find `top` stated ones

-- filter(name, pool, info, top, dialect) -> rows | {} , why: the first `top` ranked rows the
-- trainer states (each with .detail, its priced document), scanning at most M.SCAN
function M.filter(name, pool, info, top, dialect)
  local detail = require("ndplan.search").detail
  local kept, why = {}, nil
  for i = 1, math.min(#pool, M.SCAN) do
    local row = pool[i]
    local ok, doc = pcall(detail, row, info)
    if ok then
      local says, w = M.states(name, doc, info, dialect)
      if says then
        kept[#kept + 1] = row
        if #kept >= top then break end
      else why = why or w end
    end
  end
  return kept, why
end

return M
