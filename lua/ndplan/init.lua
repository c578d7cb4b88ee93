-- The ndplan module: what `require "ndplan"` returns, and the REPL's global `nd`.
local bundle = require "ndplan.c.bundle"

local nd = {
  _VERSION = "ndplan 0.1.0",
  bundle = bundle,
}

return nd
