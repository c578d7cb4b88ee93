-- What a search's ranking rests on without a measurement: every named cost and device
-- efficiency the active stack profile does not calibrate (and the user did not state), with
-- the winner's step time at each end of that field's range and whether the winner changes
-- there. The ranges are the physical bounds the profile fit uses (ndplan.stack_fit's
-- COST_FIELDS and DEVICE_FIELDS): one list of what a stack can calibrate, and its bounds.
local stack_fit = require "ndplan.fit.stack_fit"
local estimate = require "ndplan.estimate"
local core = require "ndplan.c.estimate"

local M = {}

-- How many of the ranked plans are priced again at each end (the winner can only change
-- to one of them: a plan ranked further down is slower by more than any one field moves).
M.CONTENDERS = 10

-- Fields no profile fits (the fit could not tell them apart from the ones it does), with the
-- range each plausibly takes: why, per field. Costs are nd_costs fields, efficiencies the
-- device file's.
M.UNFITTED = {
  {name = "memory_ops", kind = "cost", lo = 1, hi = 4,
   why = "an element-wise kernel reads and writes each activation: 1 fused into a GEMM's "
         .. "epilogue, up to 4 unfused with a transposed copy (default 2)"},
  {name = "optimizer_traffic", kind = "cost", lo = 16, hi = 48,
   why = "bytes an Adam step streams per local parameter: fused multi-tensor kernels 16-32 "
         .. "(master, two moments, gradient), unfused passes up to 48 (default 32)"},
  {name = "fp8_cast_bytes", kind = "cost", lo = 2, hi = 6,
   why = "bytes per element of an FP8 cast: fused into the norm 2, a separate cast with its "
         .. "transpose and amax 6 (default 4)"},
  {name = "fp8_block_gemm_rate", kind = "cost", lo = 0.75, hi = 1.0,
   why = "blockwise FP8 GEMMs against per-tensor ones on Hopper: block scales applied in the "
         .. "main loop (DeepSeek-V3 sec. 3.3.2); NVIDIA's NeMo FP8 post measures them slightly "
         .. "slower, DeepGEMM's 1550 TFLOPS on H800 is 0.78 of the dense FP8 peak (default 0.9)"},
  {name = "fp8_amax_bytes", kind = "cost", lo = 0, hi = 2,
   why = "bytes per element of current scaling's amax pass: 0 fused into the producing "
         .. "kernel, 2 a separate read of the bf16 input (TE; default 2)"},
  {name = "hbm", kind = "efficiency", lo = 0.6, hi = 0.95,
   why = "share of HBM bandwidth streaming kernels reach (STREAM-like 0.8-0.9)"},
  {name = "scale_up", kind = "efficiency", lo = 0.5, hi = 0.9,
   why = "NCCL bus bandwidth over the NVLink domain against the link rate"},
  {name = "scale_out", kind = "efficiency", lo = 0.5, hi = 0.95,
   why = "NCCL bus bandwidth over the network against the NIC rate"},
  {name = "kernel_overhead", kind = "efficiency", lo = 5e-6, hi = 50e-6,
   why = "host time per layer pass to issue its kernels (CUDA graphs at the low end)"},
}

-- fields(info) -> the fields the run rests on: {name, kind = "cost" | "efficiency", lo, hi,
-- from = the fallback device whose fit is scaled, why}, and the profile
function M.fields(info)
  local stack = require "ndplan.config.stack"
  local profile = stack.load(info.stack)
  local entry, used, missing
  if profile then entry, used, missing = profile:entry(info.device_obj) end
  local stated = info.costs or {}  -- what the user stated (--costs) is no assumption
  local out = {}
  for _, f in ipairs(stack_fit.COST_FIELDS) do
    if not (profile and profile.costs[f.name] ~= nil) and stated[f.name] == nil then
      out[#out + 1] = {name = f.name, kind = "cost", lo = f.lo, hi = f.hi}
    end
  end
  -- a device without its own fit runs on the fallback's fractions (or its file's): assumed
  local own = entry and not missing and entry.efficiency or {}
  for _, f in ipairs(stack_fit.DEVICE_FIELDS) do
    if own[f.name] == nil then
      out[#out + 1] = {name = f.name, kind = "efficiency", lo = f.lo, hi = f.hi,
                       from = missing and used or nil}
    end
  end
  for _, f in ipairs(M.UNFITTED) do
    if not (f.kind == "cost" and (stated[f.name] ~= nil
                                  or profile and profile.costs[f.name] ~= nil)) then
      out[#out + 1] = {name = f.name, kind = f.kind, lo = f.lo, hi = f.hi, why = f.why}
    end
  end
  return out, profile
end

-- The device and costs of the search with one field moved to `value` -> device, costs (read
-- once: core.pack_costs) | nil (a device the efficiency does not apply to)
local function moved_inputs(base_device, base_costs, field, value)
  local costs, device = {}, base_device
  for k, v in pairs(base_costs or {}) do costs[k] = v end
  if field.kind == "cost" then costs[field.name] = value
  else
    device = require("ndplan.config.device").with_efficiency(base_device, {[field.name] = value})
    if not device then return nil end
  end
  return device, core.pack_costs(costs)
end

-- A ranked row priced again as the search priced it (results:detail) on device and costs
-- (moved_inputs') -> result (with fits) | nil
local function moved(row, info, device, costs)
  local r = info.results:detail(row.index, device, costs)
  return r and estimate.finish(r, info.model_obj, device, info.job, info.budget_bytes, nil,
                               row.strategy)
end

-- report(ranked, info) -> {stack, contenders, without_effect (fields that move nothing),
-- fields = {{name, kind, lo, hi, from, why, winner_s = {lo, hi}, changes = {lo = rank|nil,
-- hi = rank|nil}}}} | nil when nothing ranked
function M.report(ranked, info)
  if not ranked or #ranked == 0 then return nil end
  local fields, profile = M.fields(info)
  local stack = require "ndplan.config.stack"
  local base_device, base_costs = stack.apply(profile, info.device_obj, info.costs)
  local n = math.min(#ranked, M.CONTENDERS)
  for _, f in ipairs(fields) do
    f.winner_s, f.changes = {}, {}
    for _, side in ipairs({"lo", "hi"}) do
      local best_s, best_rank
      local device, costs = moved_inputs(base_device, base_costs, f, f[side])
      for i = 1, device and n or 0 do
        local r = moved(ranked[i], info, device, costs)
        if r and r.fits then
          if i == 1 then f.winner_s[side] = r.step_time_s end
          if not best_s or r.step_time_s < best_s then best_s, best_rank = r.step_time_s, ranked[i].rank end
        end
      end
      if best_rank and best_rank ~= ranked[1].rank then f.changes[side] = best_rank end
    end
  end
  -- a field neither end of which moves the winner does not bear on this ranking
  local kept, idle = {}, 0
  local s0 = ranked[1].step_time_s
  for _, f in ipairs(fields) do
    local lo, hi = f.winner_s.lo, f.winner_s.hi
    if f.changes.lo or f.changes.hi or not lo or not hi
       or math.abs(lo - s0) > 1e-6 * s0 or math.abs(hi - s0) > 1e-6 * s0 then
      kept[#kept + 1] = f
    else idle = idle + 1 end
  end
  return {stack = profile and profile.name or "none", contenders = n, fields = kept,
          without_effect = idle}
end

-- lines(report) -> the text under the ranking
function M.lines(rep)
  if not rep then return {} end
  if #rep.fields == 0 then
    return {string.format("assumptions: none bears on the ranking (stack %s; %d uncalibrated "
                          .. "fields move nothing)", rep.stack, rep.without_effect)}
  end
  local out = {string.format("assumptions (not calibrated by stack %s; the winner's step time "
    .. "at each end of the field's range, and whether one of the top %d overtakes it):",
    rep.stack, rep.contenders)}
  for _, f in ipairs(rep.fields) do
    local function t(side)
      local s = f.winner_s[side]
      return s and string.format("%.3g s", s) or "no fit"
    end
    local change = {}
    for _, side in ipairs({"lo", "hi"}) do
      if f.changes[side] then
        change[#change + 1] = string.format("rank %d wins at %g", f.changes[side], f[side])
      end
    end
    out[#out + 1] = string.format("  %-17s %-10s %g .. %g: %s .. %s, %s%s", f.name, f.kind, f.lo,
      f.hi, t("lo"), t("hi"), #change > 0 and table.concat(change, ", ") or "winner holds",
      f.from and string.format(" (%s's fit scaled)", f.from) or "")
  end
  if rep.without_effect > 0 then
    out[#out + 1] = string.format("  (%d more uncalibrated fields move nothing here)",
                                  rep.without_effect)
  end
  return out
end

return M
