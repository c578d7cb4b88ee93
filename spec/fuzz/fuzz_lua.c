/*
** fuzz_lua.c -- the Lua state of the Lua-driven harnesses.
**
** Lua, LPeg and lua-cjson are the uninstrumented system libraries, so libFuzzer sees only
** the coverage of ndplan's C. A line hook adds the Lua side: every (chunk, line, previous
** line) bumps a byte of an extra-counters array libFuzzer reads like its own, so inputs
** that reach new lines of the lua/ndplan modules count as new coverage.
**
** The allocator caps the state at ND_FUZZ_LUA_MEM bytes: a document that asks for a huge
** table ends in a Lua memory error (ignored like any Lua error) within a second or two,
** instead of an RSS-limit crash or a timeout. (Before 5ba92ab a config.json with
** num_hidden_layers = 1e9 made hfconfig.lua build per-layer tables first: NDPLAN_FUZZ_STRICT=1
** still reports such a memory error as a raised error.)
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <lua-lpeg.h>
#include <lua-cjson.h>

#include "ndplan_lua.h"
#include "fuzz_lua.h"

int luaopen_cjson_safe (lua_State *L);  /* exported by lua-cjson, not in its header */

#define ND_FUZZ_LUA_MEM ((size_t)64 << 20)
#define COUNTERS (1u << 16)

__attribute__((used, section("__libfuzzer_extra_counters")))
static uint8_t lua_counters[COUNTERS];

static lua_State *state;
static int driver_ref = LUA_NOREF;
static int strict;
static size_t mem_used;
static unsigned long runs;
static uintptr_t prev_loc;

static void *capped_alloc (void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  if (ptr == NULL) osize = 0;  /* osize is a type tag for new blocks */
  if (nsize == 0) {
    free(ptr);
    mem_used -= osize;
    return NULL;
  }
  if (nsize > osize && mem_used + (nsize - osize) > ND_FUZZ_LUA_MEM) return NULL;
  ptr = realloc(ptr, nsize);
  if (ptr != NULL) mem_used = mem_used - osize + nsize;
  return ptr;
}

static void line_hook (lua_State *L, lua_Debug *ar) {
  uintptr_t loc;
  if (!lua_getinfo(L, "S", ar)) return;
  /* the source string is interned per chunk: its address names the file */
  loc = ((uintptr_t)ar->source * 0x9E3779B1u) ^ ((uintptr_t)ar->currentline * 0x85EBCA6Bu);
  lua_counters[(loc ^ prev_loc) & (COUNTERS - 1)]++;
  prev_loc = loc >> 1;
}

static int fail_fn (lua_State *L) {  /* fuzz_fail(msg): an invariant broke */
  fprintf(stderr, "fuzz invariant violated: %s\n", luaL_optstring(L, 1, "?"));
  abort();
  return 0;
}

static int traceback (lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  luaL_traceback(L, L, msg ? msg : "(non-string error)", 1);
  return 1;
}

void nd_fuzz_lua_init (const char *name, const char *driver) {
  static const luaL_Reg preloads[] = {  /* as engine/host/main.c's openndplan */
    {"ndplan", luaopen_ndplan},
    {"lpeg", luaopen_lpeg},
    {"cjson", luaopen_cjson},
    {"cjson.safe", luaopen_cjson_safe},
    {NULL, NULL}
  };
  const luaL_Reg *p;
  const char *env = getenv("NDPLAN_FUZZ_STRICT");
  lua_State *L = lua_newstate(capped_alloc, NULL);
  if (L == NULL) abort();
  strict = env != NULL && strcmp(env, "1") == 0;
  luaL_openlibs(L);
  lua_gc(L, LUA_GCGEN, 0, 0);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (p = preloads; p->name; p++) {
    lua_pushcfunction(L, p->func);
    lua_setfield(L, -2, p->name);
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, fail_fn);
  lua_setglobal(L, "fuzz_fail");
  lua_pushcfunction(L, traceback);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "ndplan");
  if (lua_pcall(L, 1, 1, 1) != LUA_OK) {
    fprintf(stderr, "%s: cannot open ndplan: %s\n", name, lua_tostring(L, -1));
    abort();
  }
  lua_setglobal(L, "nd");
  if (luaL_loadbuffer(L, driver, strlen(driver), name) != LUA_OK
      || lua_pcall(L, 0, 1, 1) != LUA_OK || !lua_isfunction(L, -1)) {
    fprintf(stderr, "%s: bad driver: %s\n", name, lua_tostring(L, -1));
    abort();
  }
  driver_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_settop(L, 0);
  lua_sethook(L, line_hook, LUA_MASKLINE, 0);
  state = L;
}

int nd_fuzz_lua_run (const uint8_t *data, size_t size) {
  lua_State *L = state;
  int status;
  if (size > ND_FUZZ_MAX_INPUT) return 0;
  prev_loc = 0;
  lua_settop(L, 0);
  lua_pushcfunction(L, traceback);
  lua_rawgeti(L, LUA_REGISTRYINDEX, driver_ref);
  lua_pushlstring(L, (const char *)data, size);
  status = lua_pcall(L, 1, 0, 1);
  if (status != LUA_OK && strict) {
    fprintf(stderr, "Lua error raised (NDPLAN_FUZZ_STRICT=1): %s\n",
            lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "(not a string)");
    abort();
  }
  lua_settop(L, 0);
  /* a full collection now and then keeps the shared state small and the runs comparable */
  if (++runs % 256 == 0 || mem_used > ND_FUZZ_LUA_MEM / 2) lua_gc(L, LUA_GCCOLLECT);
  return 0;
}
