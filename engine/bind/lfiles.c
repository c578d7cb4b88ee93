/*
** lfiles.c -- Lua binding ndplan.c.files: the file-system calls plain Lua lacks, so
** outputs can create their folders without a shell and inputs are read without blocking
** on a FIFO or reading a device until memory runs out.
*/
#define _GNU_SOURCE  /* syscall(SYS_getdents64): a folder emptied from a signal handler */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>

#include "ndplan_lua.h"

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
** stat(path) -> mtime_ns, ctime_ns, size, inode | nil when it does not exist: what tells a
** changed file from the one read before (a cache of loaded files compares all four).
*/
static int f_stat (lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  struct stat sb;
  if (stat(path, &sb) != 0) { luaL_pushfail(L); return 1; }
  lua_pushinteger(L, (lua_Integer)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec);
  lua_pushinteger(L, (lua_Integer)sb.st_ctim.tv_sec * 1000000000 + sb.st_ctim.tv_nsec);
  lua_pushinteger(L, (lua_Integer)sb.st_size);
  lua_pushinteger(L, (lua_Integer)sb.st_ino);
  return 4;
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

/*
** {==================================================================
** Temporary files and folders, removed on every way out: a normal exit or os.exit
** (atexit), a Lua error (the caller's cleanup, or atexit), SIGTERM, SIGHUP or a second
** Ctrl-C (nd_files_cleanup from the handler: unlink and rmdir only, both
** async-signal-safe). The table is fixed so the handler never allocates.
** ===================================================================
*/
#define MAX_TEMPS 256
static struct { char path[PATH_MAX]; volatile sig_atomic_t kind; } temps[MAX_TEMPS];
/* kind: 0 free, 1 a file, 2 a folder (removed after the files registered after it) */

/* Empties a folder one level deep and removes it, with system calls alone (no malloc, no
   stdio: opendir is not async-signal-safe). Linux's getdents64 record layout. */
static void remove_folder (const char *path) {
  char buf[4096];
  long n;
  int pass, fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    /* a second pass from the start for entries a listing changed under it may skip */
    for (pass = 0; pass < 2 && lseek(fd, 0, SEEK_SET) == 0; pass++)
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
      long off = 0;
      while (off < n) {
        unsigned short reclen;
        const char *name = buf + off + 19;  /* d_ino 8, d_off 8, d_reclen 2, d_type 1 */
        memcpy(&reclen, buf + off + 16, sizeof reclen);
        if (!(name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))))
          unlinkat(fd, name, 0);
        off += reclen;
      }
    }
    close(fd);
  }
  rmdir(path);
}

void nd_files_cleanup (void) {
  int i;
  for (i = MAX_TEMPS - 1; i >= 0; i--) {
    if (temps[i].kind == 1) unlink(temps[i].path);
    else if (temps[i].kind == 2) remove_folder(temps[i].path);
    temps[i].kind = 0;
  }
}

/* temp(path [, "folder"]) -> true: path is removed at exit unless untemp(path) first.
   Registered before the file is created, so no moment leaves it unlisted. */
static int f_temp (lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  int kind = lua_toboolean(L, 2) ? 2 : 1, i, slot = -1;
  luaL_argcheck(L, len < PATH_MAX, 1, "path too long");
  for (i = 0; i < MAX_TEMPS; i++)  /* the first free slot past the last used one: order kept */
    if (temps[i].kind != 0) slot = -1;
    else if (slot < 0) slot = i;
  if (slot < 0) return luaL_error(L, "files.temp: more than %d temporary files", MAX_TEMPS);
  memcpy(temps[slot].path, path, len + 1);
  temps[slot].kind = kind;
  lua_pushboolean(L, 1);
  return 1;
}

/* untemp(path) -> true: path is no longer removed at exit (it was renamed into place). */
static int f_untemp (lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int i;
  for (i = 0; i < MAX_TEMPS; i++)
    if (temps[i].kind != 0 && strcmp(temps[i].path, path) == 0) temps[i].kind = 0;
  lua_pushboolean(L, 1);
  return 1;
}

/* cleanup(): removes every registered temporary now (a command's failure path). */
static int f_cleanup (lua_State *L) {
  (void)L;
  nd_files_cleanup();
  return 0;
}

/* hold_signals(on): with true, SIGINT, SIGTERM and SIGHUP wait (blocked) until
   hold_signals(false): the few renames that put a run's files in place are not cut. */
static int f_hold_signals (lua_State *L) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigprocmask(lua_toboolean(L, 1) ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
  return 0;
}
/* }================================================================== */

/* A folder's lock: the open folder, flock'ed; closed (released) by __gc or unlock(). */
static int lock_gc (lua_State *L) {
  int *fd = (int *)luaL_checkudata(L, 1, "ndplan.files.lock");
  if (*fd >= 0) { close(*fd); *fd = -1; }
  return 0;
}

/* lock(dir) -> lock | nil, message: an exclusive lock on the folder, not waited for;
   "another ndplan run is writing into it" when another process holds it. */
static int f_lock (lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int *fd = (int *)lua_newuserdatauv(L, sizeof *fd, 0);
  *fd = -1;
  if (luaL_newmetatable(L, "ndplan.files.lock")) {
    lua_pushcfunction(L, lock_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, lock_gc);
    lua_setfield(L, -2, "__close");
    lua_newtable(L);
    lua_pushcfunction(L, lock_gc);
    lua_setfield(L, -2, "unlock");
    lua_setfield(L, -2, "__index");
  }
  lua_setmetatable(L, -2);
  *fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (*fd < 0 || flock(*fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    luaL_pushfail(L);
    if (e == EWOULDBLOCK) lua_pushfstring(L, "%s: another ndplan run is writing into it", path);
    else lua_pushfstring(L, "%s: %s", path, strerror(e));
    return 2;
  }
  return 1;
}

/* list(dir) -> the names in dir in readdir's order (hidden ones too, not . and ..) | nil, message */
static int f_list (lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  DIR *d = opendir(path);
  struct dirent *e;
  lua_Integer n = 0;
  if (!d) {
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: %s", path, strerror(errno));
    return 2;
  }
  lua_newtable(L);
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    lua_pushstring(L, e->d_name);
    lua_rawseti(L, -2, ++n);
  }
  closedir(d);
  return 1;
}

static const luaL_Reg funcs[] = {
  {"read", f_read},
  {"list", f_list},
  {"temp", f_temp},
  {"untemp", f_untemp},
  {"cleanup", f_cleanup},
  {"hold_signals", f_hold_signals},
  {"lock", f_lock},
  {"mkdir", f_mkdir},
  {"kind", f_kind},
  {"stat", f_stat},
  {NULL, NULL}
};

int luaopen_ndplan_files (lua_State *L) {
  static int at_exit;
  if (!at_exit) at_exit = atexit(nd_files_cleanup) == 0;
  luaL_newlib(L, funcs);
  return 1;
}
