/*
** main.c -- the ndplan host: runs bundled commands, user scripts and the REPL.
** Modelled on Lua's own lua.c: main runs everything in protected mode, every chunk goes
** through nd_docall (traceback, Ctrl-C as a Lua error), and errors print one line
** "ndplan: message" and exit non-zero.
*/
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <lua-lpeg.h>
#include <lua-cjson.h>

#include "ndplan_lua.h"
#include "ndplan/version.h"
#include "host.h"

int luaopen_cjson_safe (lua_State *L);  /* exported by lua-cjson, not declared in its header */

const char *nd_progname = "ndplan";

static lua_State *globalL = NULL;

/*
** {==================================================================
** Interrupts: the signal handler only arms a hook; the hook raises inside the VM.
** ===================================================================
*/
/* The hook stays armed until the top-level call ends (nd_docall, fail_handler): a pcall in
   the library that catches "interrupted!" does not end the stop, the next instruction raises
   again (an early Ctrl-C, caught by a pcall while a command started up, was lost and the
   search ran to its end: 216 s under ASan). */
static void stop_hook (lua_State *L, lua_Debug *ar) {
  (void)ar;
  luaL_error(L, "interrupted!");
}

static void stop_end (lua_State *L) {
  if (lua_gethook(L) == stop_hook) lua_sethook(L, NULL, 0, 0);
}

/* SIGTERM, SIGHUP and a second Ctrl-C: the temporary files go, then the signal's default
   action ends the process (its exit status says which signal). */
static void on_terminate (int sig) {
  nd_files_cleanup();
  signal(sig, SIG_DFL);
  raise(sig);
}

static void on_interrupt (int sig) {
  int mask = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
  signal(sig, on_terminate);  /* a second Ctrl-C ends the process */
  lua_sethook(globalL, stop_hook, mask, 1);
}
/* }================================================================== */

static void print_usage (FILE *out) {
  fprintf(out,
    "usage: %s [options] [COMMAND | script.lua [args]]\n"
    "Plans how to parallelise LLM training over a cluster.\n\n"
    "COMMAND runs the bundled script scripts/COMMAND.lua (listed below); script.lua runs a\n"
    "Lua script of yours with the ndplan module as global 'nd'. With no arguments on a\n"
    "terminal, starts the REPL.\n\n"
    "options:\n"
    "  -e STAT        execute string STAT\n"
    "  -l MOD         require MOD into global MOD\n"
    "  -i             enter the interactive REPL after running the script\n"
    "  -v, --version  show version information\n"
    "  -h, --help     show this help\n"
    "  --             stop handling options\n"
    "  -              run stdin as a script and stop handling options\n\n"
    "environment:\n"
    "  NDPLAN_ROOT=DIR  load the Lua library, scripts and catalog from a source tree\n"
    "                   instead of the copies built into the binary\n"
    "  NDPLAN_JOBS=N    pricing threads of ndplan search (default: the cores)\n"
    "  NDPLAN_VALIDATION=DIR  measured runs for validate and calibrate\n",
    nd_progname);
}

static void print_version (void) {
  printf("%s (%s)\n", NDPLAN_COPYRIGHT, LUA_RELEASE);
}

/* Prints one line "ndplan: message" on stderr. */
static void message (const char *msg) {
  fprintf(stderr, "%s: %s\n", nd_progname, msg);
  fflush(stderr);
}

int nd_report (lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    message(msg ? msg : "(error object is not a string)");
    lua_pop(L, 1);
  }
  return status;
}

/*
** Message handler: turns a non-string error into text (using __tostring when it has
** one) and appends a traceback. A table error with field `exit` and `message` is an
** expected failure raised by a script through nd.fail: no traceback, its own exit code.
*/
static int msghandler (lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (lua_istable(L, 1) && lua_getfield(L, 1, "message") == LUA_TSTRING)
      return 1;  /* nd.fail: the message alone; main reads the code from the table */
    lua_settop(L, 1);
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

static int last_exit_code = 1;  /* exit code of the last nd.fail error */

/* Reads the exit code from an nd.fail error table (left below the message). */
static int fail_handler (lua_State *L) {
  stop_end(L);  /* the error reached the top: its message may call __tostring */
  if (lua_istable(L, 1)) {
    lua_Integer code;
    lua_getfield(L, 1, "exit");
    code = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 1;
    /* an error is a failure: a code the shell would read as 0 (256) or as a signal's is 1 */
    last_exit_code = code >= 1 && code <= 125 ? (int)code : 1;
    lua_pop(L, 1);
  }
  else last_exit_code = 1;
  return msghandler(L);
}

int nd_docall (lua_State *L, int narg, int nres) {
  int status;
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, fail_handler);
  lua_insert(L, base);
  globalL = L;
  signal(SIGINT, on_interrupt);
  status = lua_pcall(L, narg, nres, base);
  signal(SIGINT, on_terminate);
  stop_end(L);
  lua_remove(L, base);
  return status;
}

static int dochunk (lua_State *L, int status) {
  if (status == LUA_OK) status = nd_docall(L, 0, 0);
  return nd_report(L, status);
}

static int dostring (lua_State *L, const char *s, const char *name) {
  return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* -l mod: require mod and store it in global mod (mod=name also accepted, as in 5.4.6) */
static int dolibrary (lua_State *L, char *spec) {
  int status;
  char *eq = strchr(spec, '=');
  const char *modname = eq ? eq + 1 : spec;
  if (eq) *eq = '\0';
  lua_getglobal(L, "require");
  lua_pushstring(L, modname);
  status = nd_docall(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, spec);
  return nd_report(L, status);
}

/* Pushes the script's arguments (everything after it) and returns how many. */
static int pushargs (lua_State *L) {
  int i, n;
  if (lua_getglobal(L, "arg") != LUA_TTABLE)
    luaL_error(L, "'arg' is not a table");
  n = (int)luaL_len(L, -1);
  luaL_checkstack(L, n + 3, "too many arguments to script");
  for (i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -i);
  return n;
}

/*
** Is `name` a bundled command (scripts/NAME.lua) rather than a file? A name that
** contains a '/' or ends in ".lua", or a file that exists, is a user script.
*/
static int is_command (const char *name) {
  size_t n = strlen(name);
  if (strchr(name, '/') != NULL) return 0;
  if (n > 4 && strcmp(name + n - 4, ".lua") == 0) return 0;
  return access(name, F_OK) != 0;
}

/* Loads the bundled script scripts/NAME.lua; unknown names get one clear error. */
static int loadcommand (lua_State *L, const char *name) {
  int status;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "ndplan.c.bundle");
  status = nd_docall(L, 1, 1);
  if (status != LUA_OK) return status;
  lua_getfield(L, -1, "load");
  lua_remove(L, -2);
  lua_pushfstring(L, "scripts/%s.lua", name);
  status = nd_docall(L, 1, 2);
  if (status != LUA_OK) return status;
  if (lua_isnil(L, -2)) {
    const char *why = lua_tostring(L, -1);
    if (why && strstr(why, "no bundled file") != NULL) {
      /* ndplan.cli names the nearest command and fails with the usage exit code */
      lua_pop(L, 2);
      lua_getglobal(L, "require");
      lua_pushliteral(L, "ndplan.cli");
      status = nd_docall(L, 1, 1);
      if (status != LUA_OK) return status;
      lua_getfield(L, -1, "unknown_command");
      lua_remove(L, -2);
      lua_pushstring(L, name);
      lua_pushstring(L, nd_progname);
      return nd_docall(L, 2, 0);  /* raises */
    }
    lua_pushstring(L, why ? why : "cannot load command");
    lua_replace(L, -3);
    lua_pop(L, 1);
    return LUA_ERRFILE;
  }
  lua_pop(L, 1);
  return LUA_OK;
}

static int handle_script (lua_State *L, char **argv) {
  int status;
  const char *fname = argv[0];
  if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0)
    fname = NULL;  /* stdin */
  if (fname && is_command(fname))
    status = loadcommand(L, fname);
  else
    status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    int n = pushargs(L);
    status = nd_docall(L, n, LUA_MULTRET);
  }
  return nd_report(L, status);
}

/* Bits for the options seen. */
#define has_error 1  /* bad option */
#define has_i 2      /* -i */
#define has_v 4      /* -v */
#define has_e 8      /* -e */
#define has_h 16     /* -h */

/*
** Traverses the options. Returns the flags seen and sets *first to the index of the
** script (or argc when there is none). An error sets *first to the bad option.
*/
static int collectargs (char **argv, int *first) {
  int args = 0, i;
  for (i = 1; argv[i] != NULL; i++) {
    *first = i;
    if (argv[i][0] != '-') return args;  /* not an option: the script */
    if (strcmp(argv[i], "--help") == 0) { args |= has_h; continue; }
    if (strcmp(argv[i], "--version") == 0) { args |= has_v; continue; }
    switch (argv[i][1]) {
      case '-':  /* '--' */
        if (argv[i][2] != '\0') return has_error;
        *first = i + 1;
        return args;
      case '\0': return args;  /* '-': stdin */
      case 'i': args |= has_i;  /* -i implies -v, as in lua */
        /* FALLTHROUGH */
      case 'v':
        if (argv[i][2] != '\0') return has_error;
        args |= has_v;
        break;
      case 'h':
        if (argv[i][2] != '\0') return has_error;
        args |= has_h;
        break;
      case 'e': args |= has_e;  /* FALLTHROUGH */
      case 'l':
        if (argv[i][2] == '\0') {  /* argument in the next slot */
          i++;
          if (argv[i] == NULL || argv[i][0] == '-') return has_error;
        }
        break;
      default: return has_error;
    }
  }
  *first = i;
  return args;
}

/* Runs -e and -l in order. */
static int runargs (lua_State *L, char **argv, int n) {
  int i;
  for (i = 1; i < n; i++) {
    int option = argv[i][1];
    if (option == 'e' || option == 'l') {
      char *extra = argv[i] + 2;
      if (*extra == '\0') extra = argv[++i];
      if ((option == 'e' ? dostring(L, extra, "=(command line)")
                         : dolibrary(L, extra)) != LUA_OK)
        return 0;
    }
  }
  return 1;
}

/* The global arg table: arg[0] the script, positives its arguments, negatives the rest. */
static void createargtable (lua_State *L, char **argv, int argc, int script) {
  int i, narg;
  if (script == argc) script = 0;
  narg = argc - (script + 1);
  lua_createtable(L, narg, script + 1);
  for (i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

/* Preloads ndplan and the C modules it ships with, then sets the global nd. */
static int openndplan (lua_State *L) {
  static const luaL_Reg preloads[] = {
    {"ndplan", luaopen_ndplan},
    {"lpeg", luaopen_lpeg},
    {"cjson", luaopen_cjson},
    {"cjson.safe", luaopen_cjson_safe},
    {NULL, NULL}
  };
  const luaL_Reg *p;
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (p = preloads; p->name; p++) {
    lua_pushcfunction(L, p->func);
    lua_setfield(L, -2, p->name);
  }
  lua_pop(L, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "ndplan");
  if (nd_report(L, nd_docall(L, 1, 1)) != LUA_OK) return 0;
  lua_setglobal(L, "nd");
  return 1;
}

/*
** Everything runs in protected mode here, as lua.c's pmain: argc and argv arrive as
** a light userdata and an integer. Sets the result in the boolean at stack top.
*/
static int pmain (lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = (char **)lua_touserdata(L, 2);
  int script;
  int args = collectargs(argv, &script);
  luaL_checkversion(L);
  if (args == has_error) {
    lua_pushfstring(L, "unrecognized option '%s'", argv[script]);
    message(lua_tostring(L, -1));
    print_usage(stderr);
    return 0;
  }
  luaL_openlibs(L);
  createargtable(L, argv, argc, script);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCGEN, 0, 0);
  if (args & has_h) {
    print_usage(stdout);
    if (openndplan(L))
      dostring(L, "local cli = require 'ndplan.cli'; io.write('\\n', cli.command_list())",
               "=(help)");
    lua_pushboolean(L, 1);
    return 1;
  }
  if ((args & has_v) && !(args & has_i) && script == argc && !(args & has_e)) {
    print_version();
    lua_pushboolean(L, 1);
    return 1;
  }
  if (args & has_v) print_version();
  if (!openndplan(L)) return 0;
  if (!runargs(L, argv, script)) return 0;
  if (script < argc && handle_script(L, argv + script) != LUA_OK) return 0;
  if (args & has_i)
    nd_repl(L);
  else if (script == argc && !(args & (has_e | has_v))) {
    if (isatty(0)) {
      print_version();
      nd_repl(L);
    }
    else if (dochunk(L, luaL_loadfile(L, NULL)) != LUA_OK) return 0;
  }
  lua_pushboolean(L, 1);
  return 1;
}

int main (int argc, char **argv) {
  int status, result;
  lua_State *L;
  /* timeouts, CI cancels, a closed terminal: no temporary file left behind (a signal the
     parent ignores, as nohup does, stays ignored) */
  if (signal(SIGTERM, on_terminate) == SIG_IGN) signal(SIGTERM, SIG_IGN);
  if (signal(SIGHUP, on_terminate) == SIG_IGN) signal(SIGHUP, SIG_IGN);
  L = luaL_newstate();
  if (L == NULL) {
    message("cannot create state: not enough memory");
    return EXIT_FAILURE;
  }
  lua_gc(L, LUA_GCSTOP);
  lua_pushcfunction(L, pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  status = lua_pcall(L, 2, 1, 0);
  result = lua_toboolean(L, -1);
  nd_report(L, status);
  lua_close(L);
  /* what was printed must have been written: --json > /dev/full, a full disk */
  if ((fflush(stdout) != 0 || ferror(stdout)) && status == LUA_OK && result) {
    char why[160];
    snprintf(why, sizeof why, "standard output: write failed: %s",
             errno ? strerror(errno) : "error");
    message(why);
    return EXIT_FAILURE;
  }
  if (status == LUA_OK && result) return EXIT_SUCCESS;
  return last_exit_code;
}
