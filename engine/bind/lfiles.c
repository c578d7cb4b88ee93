/*
** lfiles.c -- Lua binding ndplan.c.files: the file-system calls plain Lua lacks, so
** outputs can create their folders without a shell and inputs are read without blocking
** on a FIFO or reading a device until memory runs out.
*/
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

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

/*
** read(path, cap) -> text | nil, "path: reason". Only a regular file of at most cap bytes:
** the open does not wait for a FIFO's writer (O_NONBLOCK), and the kind and size are those
** of the file opened (fstat), so nothing swapped in between is read.
*/
static int f_read (lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lua_Integer cap = luaL_checkinteger(L, 2);
  struct stat sb;
  luaL_Buffer b;
  size_t got = 0;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: %s", path, strerror(errno));
    return 2;
  }
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (lua_Integer)sb.st_size > cap) {
    int regular = S_ISREG(sb.st_mode);
    close(fd);
    luaL_pushfail(L);
    if (!regular)
      lua_pushfstring(L, "%s: not a regular file (%s)", path,
                      S_ISDIR(sb.st_mode) ? "a folder" : S_ISFIFO(sb.st_mode) ? "a FIFO"
                      : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device" : "a socket");
    else
      lua_pushfstring(L, "%s: %I bytes, over the input cap of %I bytes", path,
                      (lua_Integer)sb.st_size, cap);
    return 2;
  }
  luaL_buffinit(L, &b);
  for (;;) {  /* to the end, even if the file grew since fstat, but never past the cap */
    char *p = luaL_prepbuffer(&b);
    ssize_t n = read(fd, p, LUAL_BUFFERSIZE);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      luaL_pushfail(L);
      lua_pushfstring(L, "%s: %s", path, strerror(e));
      return 2;
    }
    if (n == 0) break;
    luaL_addsize(&b, (size_t)n);
    got += (size_t)n;
    if ((lua_Integer)got > cap) {
      close(fd);
      luaL_pushfail(L);
      lua_pushfstring(L, "%s: over the input cap of %I bytes", path, cap);
      return 2;
    }
  }
  close(fd);
  luaL_pushresult(&b);
  return 1;
}

static const luaL_Reg funcs[] = {
  {"read", f_read},
  {"mkdir", f_mkdir},
  {"kind", f_kind},
  {NULL, NULL}
};

int luaopen_ndplan_files (lua_State *L) {
  luaL_newlib(L, funcs);
  return 1;
}
