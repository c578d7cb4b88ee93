/*
** llazy.c -- result tables whose nested fields are built on first read (llazy.h).
*/
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "llazy.h"

/* The index in names of the key at index k, or -1 (the first letter rules most keys out). */
static int field_of (lua_State *L, const nd_lazy *z, int k) {
  const char *key;
  int i;
  if (lua_type(L, k) != LUA_TSTRING) return -1;
  key = lua_tostring(L, k);
  for (i = 0; z->names[i]; i++)
    if (z->names[i][0] == key[0] && strcmp(z->names[i], key) == 0) return i;
  return -1;
}

/*
** Each lazy table's state is kept in one table per Lua state, weak in its keys (the lazy
** tables: a state lives as long as its table), and the tables of one name share one
** metatable; both are in the registry (the metatable by the name's address). A table's own
** metatable holding its state cost a table of five fields per result, most of building one.
*/
static char states_id;

void nd_push_weak_keyed (lua_State *L, const void *id) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, id) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, id);
}

/* The table of the states, pushed (created on first use). */
static void push_states (lua_State *L) { nd_push_weak_keyed(L, &states_id); }

nd_lazy *nd_lazy_state (lua_State *L, int t) {
  nd_lazy *z;
  t = lua_absindex(L, t);
  if (lua_type(L, t) != LUA_TTABLE) return NULL;
  push_states(L);
  lua_pushvalue(L, t);
  lua_rawget(L, -2);
  lua_remove(L, -2);
  z = (nd_lazy *)lua_touserdata(L, -1);
  if (!z) lua_pop(L, 1);
  return z;
}

int nd_push_interned (lua_State *L, const char *const *names) {
  int i;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, names) == LUA_TTABLE) return lua_gettop(L);
  lua_pop(L, 1);
  lua_newtable(L);
  for (i = 0; names[i]; i++) { lua_pushstring(L, names[i]); lua_rawseti(L, -2, i + 1); }
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, names);
  return lua_gettop(L);
}

/* Builds field i of the table at index 1 from the state at s, and stores it there; one the
   table holds already (set raw, e.g. by the binding's own add_stack) is kept. */
static void build (lua_State *L, nd_lazy *z, int s, int i) {
  z->built |= 1u << i;
  lua_pushstring(L, z->names[i]);
  if (lua_rawget(L, 1) != LUA_TNIL) { lua_pop(L, 1); return; }
  lua_pop(L, 1);
  lua_pushstring(L, z->names[i]);
  z->build(L, s, i);
  lua_rawset(L, 1);
}

/* __index(t, key): a lazy field not built yet is built and stored; nothing else is there */
static int lazy_index (lua_State *L) {
  nd_lazy *z = nd_lazy_state(L, 1);
  int i = z ? field_of(L, z, 2) : -1;
  if (i < 0 || (z->built & (1u << i))) return 0;
  build(L, z, lua_gettop(L), i);
  lua_pushvalue(L, 2);
  lua_rawget(L, 1);
  return 1;
}

/* __newindex(t, key, value): an assigned lazy field is the caller's from then on */
static int lazy_newindex (lua_State *L) {
  nd_lazy *z;
  lua_settop(L, 3);
  if ((z = nd_lazy_state(L, 1)) != NULL) {
    int i = field_of(L, z, 2);
    if (i >= 0) z->built |= 1u << i;
    lua_settop(L, 3);
  }
  lua_rawset(L, 1);
  return 0;
}

static int lazy_next (lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  if (lua_next(L, 1)) return 2;
  lua_pushnil(L);
  return 1;
}

/* __pairs(t): every lazy field built, then the plain table's own order */
static int lazy_pairs (lua_State *L) {
  nd_lazy *z;
  lua_settop(L, 1);
  if ((z = nd_lazy_state(L, 1)) != NULL) {
    int i, s = lua_gettop(L);
    for (i = 0; z->names[i]; i++)
      if (!(z->built & (1u << i))) build(L, z, s, i);
  }
  lua_pushcfunction(L, lazy_next);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

void nd_lazy_attach (lua_State *L, const char *name) {
  int state = lua_gettop(L), t = state - 1;
  push_states(L);
  lua_pushvalue(L, t);
  lua_pushvalue(L, state);
  lua_rawset(L, -3);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, name) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 4);
    lua_pushcfunction(L, lazy_index); lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, lazy_newindex); lua_setfield(L, -2, "__newindex");
    lua_pushcfunction(L, lazy_pairs); lua_setfield(L, -2, "__pairs");
    lua_pushstring(L, name); lua_setfield(L, -2, "__metatable");
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, name);
  }
  lua_setmetatable(L, t);
  lua_settop(L, t);
}
