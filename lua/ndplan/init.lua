-- The ndplan module: what `require "ndplan"` returns, and the REPL's global `nd`.
-- Submodules load on first use, so `ndplan models` does not pay for the YAML loader.
-- The library beside this file is grouped by concern (README, Layout): pricing and searching
-- here (estimate, search, policy, strategy, plan, recompute, block_plan), io/ (json, yaml,
-- files, grammar), config/ (model, device, stack, search, ...), out/ (text, charts, report),
-- fit/ (validate, calibrate), export/ (trainer files) and cli/ (the command-line layer).
local bundle = require "ndplan.c.bundle"

local nd = {
  _VERSION = "ndplan 0.1.0",
  bundle = bundle,
}

-- nd.model(x [, {strict = true}]): a bundled name, a config.json/.yaml path, a directory
-- holding config.json or a table -> model | nil, message (strict: no assumption allowed)
function nd.model(x, opts) return require("ndplan.config.model").load(x, opts) end
-- nd.models(): sorted names of the bundled models
function nd.models() return require("ndplan.config.model").names() end
-- nd.device(x): a bundled name, a YAML path or a table -> device | nil, message
function nd.device(x) return require("ndplan.config.device").load(x) end
-- nd.devices(): sorted names of the bundled devices
function nd.devices() return require("ndplan.config.device").names() end

-- nd.estimate{model=, device=, devices=, global_batch=, seq_len=, tp=, ...}
--   -> result | nil, message: memory per stage and step time of one strategy
local estimate_module  -- loaded on first use, then kept: nd.estimate is called in loops
function nd.estimate(args)
  estimate_module = estimate_module or require("ndplan.estimate")
  return estimate_module.estimate(args)
end
-- nd.search{...}: every valid strategy priced and ranked (ndplan.search) -> ranked, info
function nd.search(args) return require("ndplan.search").search(args) end

-- Data and small languages: nd.json, nd.yaml, nd.grammar, nd.units.
local lazy = {
  json = "ndplan.io.json",
  yaml = "ndplan.io.yaml",
  grammar = "ndplan.io.grammar",
  units = "ndplan.c.units",
  files = "ndplan.io.files",
  cli = "ndplan.cli",
}

return setmetatable(nd, {
  __names = lazy,  -- what __index can load (the REPL's Tab completion lists them)
  __index = function(t, k)
    local name = lazy[k]
    if name == nil then return nil end
    local m = require(name)
    rawset(t, k, m)
    return m
  end,
})
