-- Helpers the specs share (loaded with dofile, like run.lua): parameter totals against a
-- card, a model's layers per kind, a per-layer recompute spec as one mode per layer.
local nd = require "ndplan"

local M = {}

M.B = 1e9

function M.rel(got, want) return math.abs(got - want) / want end

-- near(got, want, tol, what): got within the relative tolerance tol of want (parameters).
function M.near(got, want, tol, what)
  assert(M.rel(got, want) <= tol, ("%s: got %.4gB, want %.4gB (%.2f%% off, limit %.2f%%)")
         :format(what, got / M.B, want / M.B, 100 * M.rel(got, want), 100 * tol))
end

-- Layers per kind name, from model:layers().
function M.kinds(m)
  local count = {}
  for _, g in ipairs(m:layers()) do count[g.kind] = (count[g.kind] or 0) + g.count end
  return count
end

-- modes(n, spec): the mode of each of n layers under a per-layer spec ("0-9:full,..."),
-- none where the spec says nothing.
function M.modes(n, spec)
  local per = {}
  for _, rg in ipairs(assert(nd.grammar.recompute(spec, n))) do
    for i = rg.first, rg.last do per[i + 1] = rg.mode end
  end
  for i = 1, n do per[i] = per[i] or "none" end
  return per
end

return M
