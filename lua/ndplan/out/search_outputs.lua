-- What `ndplan search -o DIR` writes beyond the tables: the charts and report.html, the
-- recompute potentials of the top per-layer configurations, and trainer configs of the
-- best strategy (--export).

local M = {}

M.MAX_POINTS = 20000    -- candidates read back for the chart (the chart thins further)
M.POTENTIAL_CONFIGS = 5 -- top per-layer configurations whose potentials are written
M.POTENTIAL_STEPS = 24  -- steps of each retained sequence

-- points(results, ranked, priced) -> chart points as columns (plots.candidates'): every
-- stride-th row of results.csv (about MAX_POINTS of them; the search's sample of what it
-- wrote there, results:points), then every ranked result, labelled "#rank".
function M.points(results, ranked, priced)
  local stride = math.max(1, math.ceil((priced or 0) / M.MAX_POINTS))
  local pts = results and results:points(stride)
              or {step_time_s = {}, peak_bytes = {}, fits = {}}
  local t, m, f = pts.step_time_s, pts.peak_bytes, pts.fits
  local label, is_ranked, n = {}, {}, #t
  for _, r in ipairs(ranked) do
    n = n + 1
    t[n], m[n], f[n] = r.step_time_s, r.peak_memory_bytes, true
    label[n], is_ranked[n] = "#" .. tostring(r.rank), true
  end
  pts.label, pts.ranked, pts.n = label, is_ranked, n
  return pts
end

-- potentials(detailed, info) -> potentials (for recompute.write_csv), plot_data: the
-- retained sequences of the top configurations planned per layer.
function M.potentials(detailed, info)
  local plan = require "ndplan.plan"
  local recompute = require "ndplan.recompute"
  local out, space = {}, {}
  for _, r in ipairs(detailed) do
    if #out >= M.POTENTIAL_CONFIGS then break end
    if r.strategy.recompute == "per_layer" and not r.megatron then  -- free per-layer plans
      local args = require("ndplan.strategy").row_args(r.strategy, info)
      local first = plan.from_estimate(r, info.model_obj)
      local seq = plan.potentials(args, info.model_obj, first, M.POTENTIAL_STEPS)
      out[#out + 1] = {rank = r.rank, dimensions = first.dimensions, plans = seq}
      space[#space + 1] = {dimensions = first.dimensions, score = first.score, plans = seq}
    end
  end
  if #out == 0 then return nil end
  return out, recompute.plot_data(recompute.plot_groups(space, #space))
end

-- exports(dir, formats, results, info) -> lines to print, nil, refused count: for each
-- trainer, the file of the best plan it states. The free winner's when its file states it
-- exactly; else the faster of the winner's rounded file (ndplan.export.write: a file the
-- trainer cannot state, or whose stated plan no longer fits, is refused) and the
-- trainer-aware search's winner (nd.search{trainer = NAME} on info.search_args), with what
-- stating the free winner costs. A trainer that states no plan that fits counts as refused.
-- info.dialects: {format = dialect}.
function M.exports(dir, formats, results, info)
  local export = require "ndplan.export"
  local search = require "ndplan.search"
  local best = results[1]
  local dialects = info.dialects or {}
  local function plan_of(res)
    return {model = info.model_obj, strategy = res.strategy, job = res.job or info.job,
            result = res, layer_recompute = res.strategy.layer_recompute,
            budget_bytes = info.budget_bytes, stack = info.stack}  -- every searched result fits it
  end
  -- rounded files priced on the search's device, budget, costs and stack profile
  local price = export.pricer({device = info.device_obj, budget_bytes = info.budget_bytes,
                               costs = info.costs, stack = info.stack})
  local lines, refused = {}, 0
  local function say(...) lines[#lines + 1] = string.format(...) end
  local function pct(t) return 100 * (t / best.step_time_s - 1) end
  local function report(o, base)
    say("export %-12s %s (%s)%s", o.name, o.path, o.dialect, #o.notes == 0 and ", exact" or "")
    for _, n in ipairs(o.notes) do say("  %s", export.format_note(n)) end
    if o.repriced then
      say("  re-priced  step time %.4g s (plan %.4g s)", o.repriced.step_time_s, base.step_time_s)
    end
  end
  -- the trainer-aware winner: its priced document, or nil and why
  local function own_best(name)
    if not info.search_args then return nil, "no search to repeat" end
    local a = {}
    for k, v in pairs(info.search_args) do a[k] = v end
    a.trainer, a.dialect, a.top, a.csv, a.csv_all, a.progress = name, dialects[name], 1, nil, nil, nil
    local ranked, tinfo = search.search(a)
    if not ranked then return nil, tinfo end
    return search.detail(ranked[1], tinfo)
  end
  for _, name in ipairs(formats) do
    local one = {[name] = dialects[name]}
    local outs, err = export.write(dir, {name}, plan_of(best), price, one)
    if not outs then return nil, err end
    local o = outs[1]
    if not o.refused and not o.rounded then
      report(o, best)
    else
      local stated = o.refused and ("refused: " .. o.refused)
                     or string.format("rounded, re-priced %.4g s, %+.1f%%", o.repriced.step_time_s,
                                      pct(o.repriced.step_time_s))
      local doc, why = own_best(name)
      local outs2 = doc and (o.refused or doc.step_time_s < o.repriced.step_time_s * (1 - 1e-9))
                    and export.write(dir, {name}, plan_of(doc), price, one)
      if outs2 and not outs2[1].refused then
        report(outs2[1], doc)
        say("  the free winner's file is %s; written is %s's own best, step time %.4g s "
            .. "(free winner %.4g s, %+.1f%%)", stated, name, doc.step_time_s, best.step_time_s,
            pct(doc.step_time_s))
      elseif not o.refused then
        report(o, best)
        say("  %s's own best is no faster%s", name,
            doc and string.format(" (%.4g s)", doc.step_time_s) or (": " .. tostring(why)))
      else
        refused = refused + 1
        say("export %-12s refused, not written: %s; and no plan %s states fits%s", name,
            o.refused, name, why and (": " .. tostring(why)) or "")
      end
    end
  end
  return lines, nil, refused
end

return M
