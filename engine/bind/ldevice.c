/*
** ldevice.c -- Lua binding: ndplan.c.device (placeholder until filled in).
*/
#include <lua.h>
#include <lauxlib.h>

#include "ndplan/ndplan_lua.h"

static const luaL_Reg funcs[] = {
  {NULL, NULL}
};

int luaopen_ndplan_device (lua_State *L) {
  luaL_newlib(L, funcs);
  return 1;
}
