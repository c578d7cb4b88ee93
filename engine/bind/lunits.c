/*
** lunits.c -- Lua binding ndplan.c.units: the core's unit formatting, so the CLI and the
** C core print sizes and times the same way; and the shortest exact text of a number, which
** every file ndplan writes uses (ndplan.io.json, recompute_potentials.csv).
*/

#include <lua.h>
#include <lauxlib.h>

#include "ndplan_lua.h"
#include "ndplan/units.h"

/* bytes(n [, "binary"|"decimal"]) -> "80.0 GiB"; binary is the default */
static int u_bytes (lua_State *L) {
  static const char *const modes[] = {"binary", "decimal", NULL};
  char buf[64];
  double n = luaL_checknumber(L, 1);
  int binary = luaL_checkoption(L, 2, "binary", modes) == 0;
  lua_pushstring(L, nd_format_bytes(buf, sizeof buf, n, binary));
  return 1;
}

/* seconds(s) -> "1.42 s", "350 ms", ... */
static int u_seconds (lua_State *L) {
  char buf[64];
  lua_pushstring(L, nd_format_seconds(buf, sizeof buf, luaL_checknumber(L, 1)));
  return 1;
}

/*
** shortest(x) -> text | nothing: an integer as tostring writes it; an integral float below
** 2^63 in magnitude as that integer; another finite number in the fewest significant digits,
** 15 to 17, that read back to the same double; nothing for NaN and infinities.
*/
static int u_shortest (lua_State *L) {
  char buf[40];
  if (lua_isinteger(L, 1)) {
    lua_pushfstring(L, "%I", (LUAI_UACINT)lua_tointeger(L, 1));
    return 1;
  }
  if (nd_format_shortest(buf, sizeof buf, luaL_checknumber(L, 1)) == 0) return 0;
  lua_pushstring(L, buf);
  return 1;
}

static const luaL_Reg funcs[] = {
  {"bytes", u_bytes},
  {"seconds", u_seconds},
  {"shortest", u_shortest},
  {NULL, NULL}
};

int luaopen_ndplan_units (lua_State *L) {
  luaL_newlib(L, funcs);
  return 1;
}
