/*
** module.c -- the `ndplan` Lua module, assembled from the bindings.
** The host preloads it as "ndplan"; built as ndplan.so it is what stock lua5.4 and busted
** load with require "ndplan", so both run exactly the same code.
*/
#include <lua.h>
#include <lauxlib.h>

#include "ndplan_lua.h"

static const luaL_Reg bindings[] = {
  {"ndplan.c.bundle", luaopen_ndplan_bundle},
  {"ndplan.c.yaml", luaopen_ndplan_yaml},
  {"ndplan.c.units", luaopen_ndplan_units},
  {"ndplan.c.json", luaopen_ndplan_json},
  {"ndplan.c.model", luaopen_ndplan_model},
  {"ndplan.c.device", luaopen_ndplan_device},
  {"ndplan.c.estimate", luaopen_ndplan_estimate},
  {"ndplan.c.files", luaopen_ndplan_files},
  {"ndplan.c.search", luaopen_ndplan_search},
  {"ndplan.c.svg", luaopen_ndplan_svg},
  {"ndplan.c.chart", luaopen_ndplan_chart},
  {NULL, NULL}
};

/*
** Registers the bindings as preloaded modules, adds the bundle searcher to
** package.searchers (so require "ndplan.x" finds lua/ndplan/x.lua, embedded or under
** $NDPLAN_ROOT) and returns what lua/ndplan/init.lua returns.
*/
int luaopen_ndplan (lua_State *L) {
  const luaL_Reg *b;
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (b = bindings; b->name; b++) {
    lua_pushcfunction(L, b->func);
    lua_setfield(L, -2, b->name);
  }
  lua_pop(L, 1);
  luaL_requiref(L, "ndplan.c.bundle", luaopen_ndplan_bundle, 0);
  lua_getfield(L, -1, "install_searcher");
  lua_call(L, 0, 0);
  lua_getfield(L, -1, "load");
  lua_pushliteral(L, "lua/ndplan/init.lua");
  lua_call(L, 1, 2);  /* chunk or nil, message */
  if (lua_isnil(L, -2))
    return luaL_error(L, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  lua_pushliteral(L, "ndplan");
  lua_call(L, 1, 1);
  return 1;
}
