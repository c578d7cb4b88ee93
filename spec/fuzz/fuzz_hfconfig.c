/*
** fuzz_hfconfig.c -- the Hugging Face config loader: JSON bytes -> nd.json.decode ->
** nd.model(table) (lua/ndplan/hfconfig.lua, then engine/bind/lmodel.c and the core's
** validation); a model that loads is summarised and priced once on 8 H100s.
*/
#include "fuzz_lua.h"

static const char driver[] =
  "local json = require 'ndplan.io.json'\n"
  "local h100 = assert(nd.device('h100'))\n"
  "return function(data)\n"
  "  local cfg, err = json.decode(data, 'fuzz.json')\n"
  "  if cfg == nil then\n"
  "    if type(err) ~= 'string' then fuzz_fail('json: nil without a message') end\n"
  "    return\n"
  "  end\n"
  "  if type(cfg) ~= 'table' then return end\n"
  "  local m, merr = nd.model(cfg)\n"
  "  if not m then\n"
  "    if type(merr) ~= 'string' then fuzz_fail('model: nil without a message') end\n"
  "    return\n"
  "  end\n"
  "  local p = m:params()\n"
  "  if not (p.total >= 1 and p.active >= 1 and p.active <= p.total) then\n"
  "    fuzz_fail(('params: total %s active %s'):format(p.total, p.active))\n"
  "  end\n"
  "  m:layers(); m:spec(); m:warnings(); tostring(m)\n"
  "  local r, why = nd.estimate{model = m, device = h100, devices = 8, global_batch = 16,\n"
  "                             seq_len = 1024, recompute = 'selective'}\n"
  "  if r and not (r.step_time_s > 0 and r.step_time_s < math.huge\n"
  "                and r.peak_memory_bytes > 0 and r.peak_memory_bytes < math.huge) then\n"
  "    fuzz_fail(('estimate: step %s peak %s'):format(r.step_time_s, r.peak_memory_bytes))\n"
  "  end\n"
  "end\n";

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int LLVMFuzzerInitialize (int *argc, char ***argv) {
  (void)argc; (void)argv;
  nd_fuzz_lua_init("fuzz_hfconfig", driver);
  return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  return nd_fuzz_lua_run(data, size);
}
