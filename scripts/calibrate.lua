-- ndplan calibrate: fit a device's efficiencies to measured step times, write an override file
local cli = require "ndplan.cli"
local json = require "ndplan.io.json"
local summary = require "ndplan.out.summary"
local ccli = require "ndplan.cli.calibrate"

local opts = cli.parse(ccli.SPEC, {...})
if not opts then return end
local s = ccli.settings(opts)

if opts.profile then  -- a stack profile: every field at once, per device and stack-wide
  local r, path = ccli.profile(opts, s)
  if opts.json then
    io.write(json.encode({schema = "ndplan.calibrate.profile/1", name = opts.profile, output = path,
                          fit = r.fit, held_out = r.held, evaluations = r.evals, cpu_s = r.cpu_s}), "\n")
  else
    io.write(summary.profile_text(r, opts.profile, s.sources, path), "\n")
  end
  return
end

local fit = ccli.fit(opts, s)  -- the device file, written
if opts.json then
  io.write(json.encode(summary.calibrate_doc(fit, s)), "\n")
else
  io.write(summary.calibrate_text(fit, s), "\n")
end
