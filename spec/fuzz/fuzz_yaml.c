/*
** fuzz_yaml.c -- the YAML loader (engine/bind/lyaml.c through ndplan.yaml): any bytes
** decode to a value or to nil, "name:line:col: message"; a decoded mapping also goes
** through the device loader, which reads device files.
*/
#include "fuzz_lua.h"

static const char driver[] =
  "local yaml = require 'ndplan.io.yaml'\n"
  "return function(data)\n"
  "  local with_marks = #data % 2 == 1\n"
  "  local v, marks = yaml.decode(data, 'fuzz.yaml', with_marks)\n"
  "  if v == nil then\n"
  "    if type(marks) ~= 'string' then fuzz_fail('decode failed without a message') end\n"
  "    return\n"
  "  end\n"
  "  if with_marks and type(marks) ~= 'table' then fuzz_fail('no marks table') end\n"
  "  if type(v) == 'table' then nd.device(v) end\n"
  "end\n";

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int LLVMFuzzerInitialize (int *argc, char ***argv) {
  (void)argc; (void)argv;
  nd_fuzz_lua_init("fuzz_yaml", driver);
  return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  return nd_fuzz_lua_run(data, size);
}
