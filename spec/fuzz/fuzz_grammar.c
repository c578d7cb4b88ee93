/*
** fuzz_grammar.c -- the LPeg grammars of lua/ndplan/grammar.lua: every parser gets the
** input and must return a value or nil, "expected ... at column N of '...'"; results are
** checked for their documented shapes.
*/
#include "fuzz_lua.h"

static const char driver[] =
  "local g = require 'ndplan.io.grammar'\n"
  "local function check(name, v, err)\n"
  "  if v == nil and type(err) ~= 'string' then\n"
  "    fuzz_fail(name .. ': nil without a message')\n"
  "  end\n"
  "  return v\n"
  "end\n"
  "local function quantity(name, v)\n"
  "  if v ~= nil and (math.type(v) ~= 'float' or not (v >= 0)) then\n"
  "    fuzz_fail(name .. ': not a non-negative float: ' .. tostring(v))\n"
  "  end\n"
  "end\n"
  "return function(data)\n"
  "  for _, f in ipairs{'size', 'rate', 'time', 'flop'} do\n"
  "    quantity(f, check(f, g[f](data)))\n"
  "  end\n"
  "  local d = check('dims', g.dims(data))\n"
  "  if type(d) == 'table' then\n"
  "    if d.min then\n"
  "      if not (d.min >= 1 and d.min <= d.max) then fuzz_fail('dims: bad range') end\n"
  "    else\n"
  "      for i = 1, #d do\n"
  "        if not (d[i] >= 1 and (i == 1 or d[i - 1] < d[i])) then\n"
  "          fuzz_fail('dims: list not sorted, unique and positive')\n"
  "        end\n"
  "      end\n"
  "    end\n"
  "  elseif d ~= nil and d ~= 'auto' then fuzz_fail('dims: ' .. tostring(d)) end\n"
  "  for _, n in ipairs{false, 61} do\n"
  "    local r = check('recompute', g.recompute(data, n or nil))\n"
  "    if r then\n"
  "      for i, e in ipairs(r) do\n"
  "        if e.mode ~= 'full' and e.mode ~= 'none' and e.mode ~= 'selective' then\n"
  "          fuzz_fail('recompute: mode ' .. tostring(e.mode))\n"
  "        end\n"
  "        if n and not (e.first >= 0 and e.first <= e.last and e.last < n) then\n"
  "          fuzz_fail('recompute: range out of bounds')\n"
  "        end\n"
  "        if i > 1 and not (r[i - 1].last < e.first) then\n"
  "          fuzz_fail('recompute: ranges overlap or unsorted')\n"
  "        end\n"
  "      end\n"
  "    end\n"
  "  end\n"
  "end\n";

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int LLVMFuzzerInitialize (int *argc, char ***argv) {
  (void)argc; (void)argv;
  nd_fuzz_lua_init("fuzz_grammar", driver);
  return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  return nd_fuzz_lua_run(data, size);
}
