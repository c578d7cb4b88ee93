-- Every complete row of today's measured runs (../shared/validation/modern_runs.csv, read
-- where the other validation specs read it; skipped when absent) states a layout a trainer
-- ran. Issue 13: nd.estimate prices it, and the search's walk for that problem reaches it
-- -- the row's degrees pinned, VPP left to the walk ("auto"), the layout variants the walk's
-- own, the candidate whose re-priced chunk layout is the one nd.estimate resolved for the
-- row. A row the walk does not reach is reported with the reason.
require "ndplan"
local V = require "ndplan.fit.validate"
local VM = require "ndplan.fit.validate_modern"
local search = require "ndplan.search"

local dir = V.default_dir()
local present = io.open(dir .. "/" .. VM.FILE, "r")
if present then present:close() end

-- "<label>: why" lines grouped by why with the digits folded, for a readable failure
local function by_reason(list)
  local groups, order = {}, {}
  for _, m in ipairs(list) do
    local key = m.why:gsub("%d+", "N")
    if not groups[key] then groups[key] = {}; order[#order + 1] = key end
    table.insert(groups[key], m.label)
  end
  local out = {}
  for _, k in ipairs(order) do
    out[#out + 1] = string.format("%d x %s (e.g. %s)", #groups[k], k, groups[k][1])
  end
  return table.concat(out, "\n")
end

-- The search of a row's problem with its degrees pinned and VPP walked; whether a walked
-- candidate is the row's layout, or nil and why not.
local function reachable(c)
  local st = c.strategy
  local args = {
    model = c.model_obj, device = VM.device(c.device_name), stack = V.stack_for(c),
    devices = c.job.devices, global_batch = c.job.global_batch, seq_len = c.job.seq_len,
    tp = st.tp, pp = st.pp, cp = st.cp, ep = st.ep, etp = st.etp, mbs = st.mbs,
    zero = st.zero, sp = st.sp, recompute = st.recompute, vpp = st.pp > 1 and "auto" or 1,
    precision = st.precision, fp8_param_gather = st.fp8_param_gather,
    tp_comm_overlap = st.tp_comm_overlap,
    -- every valid candidate priced and kept: reachability, not ranking
    exhaustive = true, max_mem = "64TiB", memory_band = 0, keep = 100000, top = 1, jobs = 1,
  }
  local ok, ranked, info = pcall(search.search, args)
  if not ok then return nil, "search raised: " .. tostring(ranked) end
  if not ranked then return nil, tostring(info) end
  local want = c.result.strategy.stage_layers
  local same_vpp = 0
  for _, r in ipairs(info.results) do
    if r.strategy.vpp == st.vpp and r.strategy.dp == c.result.strategy.dp then
      same_vpp = same_vpp + 1
      local d = search.detail(r, info)
      local s = d.strategy.stage_layers
      local equal = #s == #want
      for i = 1, #want do equal = equal and s[i] == want[i] end
      if equal then return true end
    end
  end
  if same_vpp == 0 then
    return nil, string.format("vpp %d not walked on pp %d (VPP auto)", st.vpp, st.pp)
  end
  return nil, string.format("pp %d x vpp %d walked, not the layout %s", st.pp, st.vpp,
                            table.concat(want, ","))
end

describe("today's measured runs (modern_runs.csv) in the strategy space", function()
  if not present then
    pending("validation data not found at " .. dir .. "; skipped")
    return
  end
  require("ndplan.config.stack").DEFAULT = "none"  -- each case names its own stack
  -- every complete row, measured step time or not: the layout is what is checked
  local cases, skipped = assert(VM.cases(dir, {unmeasured = true}))
  cases = V.run(cases)

  it("builds a case from every complete row", function()
    local left = {}
    for _, s in ipairs(skipped) do
      if s.reason ~= "config not complete" then
        left[#left + 1] = {label = "line " .. tostring(s.line), why = s.reason}
      end
    end
    assert(#left == 0, #left .. " complete rows not read:\n" .. by_reason(left))
  end)

  it("prices every complete row's stated layout with nd.estimate", function()
    local refused = {}
    for _, c in ipairs(cases) do
      if c.refused then refused[#refused + 1] = {label = c.label, why = c.refused} end
    end
    assert.is_true(#cases > 100, #cases .. " complete rows")
    assert(#refused == 0, #refused .. " rows refused:\n" .. by_reason(refused))
  end)

  it("reaches every complete row's stated layout in the search's walk", function()
    -- NeMo's DeepSeek-V3 recipe states first/last-stage offsets (first 64/pp - 1, last
    -- 64/pp - 2 with the MTP layer; filled from its launch script,
    -- validate_modern.LAUNCH_STATED): the walk's first_last_loss variant.
    local missed, n = {}, 0
    for _, c in ipairs(cases) do
      if c.result then
        local ok, why = reachable(c)
        n = n + 1
        if not ok then missed[#missed + 1] = {label = c.label, why = why} end
      end
    end
    assert.is_true(n > 100, n .. " rows walked")
    assert(#missed == 0, #missed .. " of " .. n .. " rows not reached:\n" .. by_reason(missed))
  end)
end)
