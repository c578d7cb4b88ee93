/*
** fuzz_lua.h -- what the Lua-driven harnesses share: one lua_State opened the way the
** ndplan host opens it, a Lua driver function called under lua_pcall for every input.
*/
#ifndef NDPLAN_FUZZ_LUA_H
#define NDPLAN_FUZZ_LUA_H

#include <stddef.h>
#include <stdint.h>

#define ND_FUZZ_MAX_INPUT (64 * 1024)   /* longer inputs are skipped */

/*
** Opens the state once (from LLVMFuzzerInitialize): standard libraries, lpeg, cjson and
** the ndplan module preloaded, global `nd`, then runs `driver` (Lua source) that must
** return the function to call per input. Aborts when any of that fails.
*/
void nd_fuzz_lua_init (const char *name, const char *driver);

/*
** Calls the driver with the input as a Lua string. Lua errors are expected and ignored
** (unless NDPLAN_FUZZ_STRICT=1 in the environment: then a raised error aborts, to find Lua
** code that raises where it should return nil, message). Returns 0.
*/
int nd_fuzz_lua_run (const uint8_t *data, size_t size);

#endif
