/*
** lbundle.c -- the files bundled into the binary, and the searcher that finds the Lua
** library among them. With $NDPLAN_ROOT set (a source tree), files are read from that tree
** instead, so a developer edits Lua without rebuilding.
*/
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "bundle.h"
#include "ndplan_lua.h"

static const char *override_root (void) {
  const char *root = getenv(NDPLAN_ROOT_ENV);
  return (root && *root) ? root : NULL;
}

static const nd_bundled_file *find_bundled (const char *path) {
  const nd_bundled_file *f;
  for (f = nd_bundled_files; f->path; f++)
    if (strcmp(f->path, path) == 0) return f;
  return NULL;
}

/*
** Pushes the contents of a bundled file and the name to show for it (the real file under
** $NDPLAN_ROOT, or the source-tree path of the embedded copy). Returns 0 and pushes
** nothing when it does not exist.
*/
static int push_file (lua_State *L, const char *path) {
  const char *root = override_root();
  if (root) {
    luaL_Buffer b;
    char chunk[4096];
    size_t n;
    FILE *fp;
    const char *full = lua_pushfstring(L, "%s/%s", root, path);
    fp = fopen(full, "rb");
    if (!fp) { lua_pop(L, 1); return 0; }
    luaL_buffinit(L, &b);
    while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) luaL_addlstring(&b, chunk, n);
    fclose(fp);
    luaL_pushresult(&b);
    lua_insert(L, -2);  /* contents, name */
    return 1;
  }
  else {
    const nd_bundled_file *f = find_bundled(path);
    if (!f) return 0;
    lua_pushlstring(L, (const char *)f->bytes, f->size);
    lua_pushstring(L, f->path);
    return 1;
  }
}

/* read(path) -> contents, name | nil, message */
static int b_read (lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  if (push_file(L, path)) return 2;
  luaL_pushfail(L);
  lua_pushfstring(L, "no bundled file '%s'", path);
  return 2;
}

/*
** load(path) -> chunk | nil, message: a bundled Lua file as a function. The embedded copy
** of a .lua file is the chunk compiled at build time (engine/tools/embed.c), the only binary
** chunk ndplan loads; should this Lua not read it (another release's format), its text is
** compiled instead, as is every file under $NDPLAN_ROOT.
*/
static int b_load (lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  size_t len;
  const char *src;
  if (!override_root()) {
    const nd_bundled_file *f = find_bundled(path);
    if (f && f->chunk) {
      const char *name = lua_pushfstring(L, "@%s", f->path);
      if (luaL_loadbufferx(L, (const char *)f->chunk, f->chunk_size, name, "b") == LUA_OK)
        return 1;
      lua_pop(L, 2);  /* the message and the name */
    }
  }
  if (!push_file(L, path)) {
    luaL_pushfail(L);
    lua_pushfstring(L, "no bundled file '%s'", path);
    return 2;
  }
  src = lua_tolstring(L, -2, &len);
  lua_pushfstring(L, "@%s", lua_tostring(L, -1));
  if (luaL_loadbufferx(L, src, len, lua_tostring(L, -1), "t") != LUA_OK) {
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;
  }
  return 1;
}

static int cmp_strings (const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* list(dir) -> sorted array of the bundled paths directly inside dir, e.g. "scripts" */
static int b_list (lua_State *L) {
  const char *dir = luaL_checkstring(L, 1);
  size_t dlen = strlen(dir);
  const char *root = override_root();
  int n = 0, i;
  lua_newtable(L);
  if (root) {
    DIR *d = opendir(lua_pushfstring(L, "%s/%s", root, dir));
    lua_pop(L, 1);
    if (d) {
      struct dirent *e;
      while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        lua_pushfstring(L, "%s/%s", dir, e->d_name);
        lua_rawseti(L, -2, ++n);
      }
      closedir(d);
    }
  }
  else {
    const nd_bundled_file *f;
    for (f = nd_bundled_files; f->path; f++)
      if (strncmp(f->path, dir, dlen) == 0 && f->path[dlen] == '/'
          && strchr(f->path + dlen + 1, '/') == NULL) {
        lua_pushstring(L, f->path);
        lua_rawseti(L, -2, ++n);
      }
  }
  {  /* sort through a userdata-owned array so an error cannot leak it */
    const char **names = (const char **)lua_newuserdatauv(L, (size_t)n * sizeof(char *) + 1, 0);
    for (i = 1; i <= n; i++) {
      lua_rawgeti(L, -2, i);
      names[i - 1] = lua_tostring(L, -1);
      lua_pop(L, 1);  /* still referenced by the table */
    }
    qsort(names, (size_t)n, sizeof(char *), cmp_strings);
    lua_newtable(L);
    for (i = 0; i < n; i++) {
      lua_pushstring(L, names[i]);
      lua_rawseti(L, -2, i + 1);
    }
  }
  return 1;
}

/*
** The package searcher: "ndplan" -> lua/ndplan/init.lua, "ndplan.a.b" -> lua/ndplan/a/b.lua
** or lua/ndplan/a/b/init.lua. Other names are left to the standard searchers.
*/
static int b_searcher (lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  const char *candidates[2];
  int i;
  if (strcmp(name, "ndplan") != 0 && strncmp(name, "ndplan.", 7) != 0) {
    lua_pushfstring(L, "no bundled module '%s'", name);
    return 1;
  }
  luaL_gsub(L, name, ".", "/");
  candidates[0] = lua_pushfstring(L, "lua/%s.lua", lua_tostring(L, -1));
  candidates[1] = lua_pushfstring(L, "lua/%s/init.lua", lua_tostring(L, -2));
  for (i = 0; i < 2; i++) {
    if (strcmp(name, "ndplan") == 0 && i == 0) continue;
    lua_pushcfunction(L, b_load);
    lua_pushstring(L, candidates[i]);
    lua_call(L, 1, 2);
    if (!lua_isnil(L, -2)) {
      lua_pop(L, 1);
      lua_pushstring(L, candidates[i]);
      return 2;  /* loader, path */
    }
    if (strstr(lua_tostring(L, -1), "no bundled file") == NULL)
      return luaL_error(L, "error loading module '%s' from bundled file '%s':\n\t%s",
                        name, candidates[i], lua_tostring(L, -1));
    lua_pop(L, 2);
  }
  lua_pushfstring(L, "no bundled file '%s' or '%s'", candidates[0], candidates[1]);
  return 1;
}

/* install_searcher(): puts the bundle searcher right after the preload searcher, once */
static int b_install_searcher (lua_State *L) {
  lua_Integer n, i;
  lua_getglobal(L, "package");
  if (!lua_istable(L, -1)) return luaL_error(L, "the package library is not loaded");
  lua_getfield(L, -1, "searchers");
  n = (lua_Integer)lua_rawlen(L, -1);
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, -1, i);
    if (lua_tocfunction(L, -1) == b_searcher) return 0;
    lua_pop(L, 1);
  }
  for (i = n; i >= 2; i--) {  /* shift searchers 2..n up by one */
    lua_rawgeti(L, -1, i);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushcfunction(L, b_searcher);
  lua_rawseti(L, -2, 2);
  return 0;
}

/* root() -> the $NDPLAN_ROOT in force, or nil when the embedded copies are used */
static int b_root (lua_State *L) {
  const char *root = override_root();
  if (root) lua_pushstring(L, root); else lua_pushnil(L);
  return 1;
}

static const luaL_Reg bundle_funcs[] = {
  {"read", b_read},
  {"load", b_load},
  {"list", b_list},
  {"searcher", b_searcher},
  {"install_searcher", b_install_searcher},
  {"root", b_root},
  {NULL, NULL}
};

int luaopen_ndplan_bundle (lua_State *L) {
  luaL_newlib(L, bundle_funcs);
  return 1;
}
