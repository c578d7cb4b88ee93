-- ndplan search: every valid strategy priced, what fits ranked by step time (or a policy)
local cli = require "ndplan.cli"
local files = require "ndplan.io.files"
local search = require "ndplan.search"
local policy = require "ndplan.policy"
local scli = require "ndplan.cli.search"

local opts = cli.parse(scli.SPEC, {...})
if not opts then return end
local args, ctx = scli.args(opts)
local out_dir = ctx.out_dir

local stage  -- -o DIR: this run's files, staged and put in place together at the end
if out_dir then
  local serr
  stage, serr = files.stage(out_dir)
  if not stage then cli.fail("output directory: " .. tostring(serr)) end
  args.csv = stage:path("results.csv")
  args.csv_all = opts["all-rows"] or nil
end
-- a failure after this leaves -o DIR as it was (the stage is removed on every way out)
local function fail_out(msg, code)
  if stage then msg = stage:final_text(msg); stage:abort() end
  cli.fail(msg, code)
end

local model = cli.check(nd.model(args.model, {strict = opts.strict}))
for _, w in ipairs(model:warnings()) do  -- what was assumed, on stderr
  io.stderr:write("ndplan: warning: ", model.name, ": ", w, "\n")
end
args.model = model

local ok, ranked, info_or_msg, info_fail = pcall(search.search, args)
if not ok then
  -- a bad --precision or --schedule is a usage error, named as the flag
  local msg = tostring(ranked):gsub("^(precision): ", "--%1: "):gsub("^(schedule): ", "--%1: ")
  if ctx.verbosity >= 2 and policy.last_traceback then
    io.stderr:write(policy.last_traceback, "\n")
  end
  fail_out(msg, msg:match("^%-%-") and cli.EXIT_USAGE or nil)
end
local info = ranked and info_or_msg or info_fail
local fail_msg = not ranked and info_or_msg or nil
if info and info.pinned_refused then fail_out(fail_msg, cli.EXIT_USAGE) end
if not info then fail_out(fail_msg) end

-- Files in -o DIR, written into the stage: results.csv was streamed there by the core.
local doc, export_lines, export_refused
if out_dir then
  doc, export_lines, export_refused = require("ndplan.out.output_dir").search(stage, ranked,
    info, model, {formats = ctx.export_formats, dialects = ctx.dialects, args = args})
  if not doc then fail_out(export_lines) end
end

if opts.json then
  doc = doc or search.json_doc(ranked or {}, info)
  doc.model_warnings = model:warnings()
  io.write(search.encode_json(doc), "\n")
else
  if ctx.verbosity >= 1 then
    for _, w in ipairs(info.warnings or {}) do io.stderr:write("ndplan: warning: ", w, "\n") end
  end
  io.write(require("ndplan.out.summary").search_text(ranked, info, {
    verbosity = ctx.verbosity, config_line = ctx.config_line, declared = ctx.declared,
    doc = doc, model = model, export_lines = export_lines, fail_msg = fail_msg, args = args,
  }), "\n")
end

if ranked then
  local okd, derr = pcall(policy.call, info.policy_table, "done", ranked, {
    dir = out_dir, info = info,
    write = function(name, text)  -- a plain name inside -o DIR, a string
      local plain, nerr = policy.plain_name(name)
      if not plain then error(nerr, 2) end
      if type(text) ~= "string" then error("out.write: expected the text as a string", 2) end
      if not out_dir then return nil, "no output directory (-o)" end
      return stage:write(plain, text)
    end,
  })
  if not okd then fail_out(tostring(derr)) end
end
if stage then  -- every file of the run, put in place together
  local okc, cerr = stage:commit()
  if not okc then cli.fail(cerr) end
end
if not ranked then os.exit(cli.EXIT_NO_FIT) end
if (export_refused or 0) > 0 then os.exit(cli.EXIT_REFUSED) end
