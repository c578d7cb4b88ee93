/*
** lfiles.c -- Lua binding ndplan.c.files: the file-system calls plain Lua lacks, so
** outputs can create their folders without a shell.
*/
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <lua.h>
#include <lauxlib.h>

#include "ndplan/ndplan_lua.h"

/* mkdir(path) -> true | nil, message. An existing folder is success. */
static int f_mkdir (lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  struct stat sb;
  if (mkdir(path, 0777) == 0) { lua_pushboolean(L, 1); return 1; }
  if (errno == EEXIST && stat(path, &sb) == 0) {
    if (S_ISDIR(sb.st_mode)) { lua_pushboolean(L, 1); return 1; }
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: exists and is not a folder", path);
    return 2;
  }
  luaL_pushfail(L);
  lua_pushfstring(L, "%s: %s", path, strerror(errno));
  return 2;
}

/* kind(path) -> "directory" | "file" | "other" | nil when it does not exist */
static int f_kind (lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  struct stat sb;
  if (stat(path, &sb) != 0) { luaL_pushfail(L); return 1; }
  lua_pushstring(L, S_ISDIR(sb.st_mode) ? "directory" : S_ISREG(sb.st_mode) ? "file" : "other");
  return 1;
}

static const luaL_Reg funcs[] = {
  {"mkdir", f_mkdir},
  {"kind", f_kind},
  {NULL, NULL}
};

int luaopen_ndplan_files (lua_State *L) {
  luaL_newlib(L, funcs);
  return 1;
}
