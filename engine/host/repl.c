/*
** repl.c -- the interactive loop, behaving like Lua 5.4's: a line is first tried as an
** expression and its values printed; an incomplete statement reads continuation lines;
** prompts come from _PROMPT and _PROMPT2; complete entries go to the history when line
** editing (libedit) is built in. Lua's ndplan.cli.repl supplies the rest: the global help,
** how values print (an estimate as its CLI summary), Tab completion and the history file.
*/
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "host.h"

#define PROMPT  "> "
#define PROMPT2 ">> "
#include <unistd.h>

#if defined(NDPLAN_USE_LIBEDIT)
#include <editline/readline.h>
#endif

/*
** Line editing only on a terminal: piped input goes through fgets, so the prompts are
** printed as the user (or a test) would see them and no terminal codes are emitted.
*/
static int use_editor (void) {
#if defined(NDPLAN_USE_LIBEDIT)
  static int tty = -1;
  if (tty < 0) tty = isatty(0);
  return tty;
#else
  return 0;
#endif
}

/*
** Ctrl-C at the prompt drops the entry being typed and shows a fresh prompt, as lua.c's
** readline build does; it does not end the session (Ctrl-D does). While a line is read,
** SIGINT only sets this flag, without SA_RESTART, so the read returns.
*/
static volatile sig_atomic_t prompt_interrupted;
static int entry_cancelled;  /* the entry's lines so far are dropped */

static void on_prompt_interrupt (int sig) {
  (void)sig;
  prompt_interrupted = 1;
}

/* Reads one line into a fresh buffer the caller frees; NULL at end of input. A line is
   read whole, however long (getline: fgets into 512 bytes split long piped lines). */
static char *read_line (const char *prompt) {
  char *b = NULL;
  size_t cap = 0;
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_prompt_interrupt;
  prompt_interrupted = 0;
  sigaction(SIGINT, &sa, &old);
#if defined(NDPLAN_USE_LIBEDIT)
  if (use_editor()) {
    b = readline(prompt);
    sigaction(SIGINT, &old, NULL);
    if (b == NULL && prompt_interrupted) b = strdup("");
    if (prompt_interrupted) { entry_cancelled = 1; fputs("\n", stdout); }
    return b;
  }
#endif
  fputs(prompt, stdout);
  fflush(stdout);
  for (;;) {
    ssize_t n = getline(&b, &cap, stdin);
    if (n >= 0) break;
    if (prompt_interrupted) {  /* Ctrl-C: a fresh, empty line */
      clearerr(stdin);
      entry_cancelled = 1;
      fputs("\n", stdout);
      if (b == NULL) b = (char *)malloc(1);
      if (b) b[0] = '\0';
      break;
    }
    free(b);
    b = NULL;
    break;
  }
  sigaction(SIGINT, &old, NULL);
  return b;
}

/* ndplan.cli.repl's setup(): {show, complete, history}, kept in the registry */
static int repl_ref = LUA_NOREF;
static char history_path[4096];

static void save_line (const char *line) {
#if defined(NDPLAN_USE_LIBEDIT)
  if (use_editor()) {
    add_history(line);
    if (history_path[0]) write_history(history_path);  /* kept even if the session dies */
  }
#else
  (void)line;
#endif
}

#if defined(NDPLAN_USE_LIBEDIT)
static lua_State *complete_L;
static char **found;
static int nfound, ifound;

static void drop_found (void) {
  int i;
  for (i = 0; i < nfound; i++) free(found[i]);
  free(found);
  found = NULL;
  nfound = ifound = 0;
}

/* readline's generator: the candidates ndplan.cli.repl's complete() gave, one per call */
static char *next_found (const char *text, int state) {
  (void)text;
  if (state == 0) ifound = 0;
  return ifound < nfound ? strdup(found[ifound++]) : NULL;
}

/* Tab: complete(line, start, end) in Lua; no candidate, no file names either */
static char **complete_word (const char *text, int start, int end) {
  lua_State *L = complete_L;
  int i, n;
  rl_attempted_completion_over = 1;
  drop_found();
  if (L == NULL || repl_ref == LUA_NOREF) return NULL;
  lua_rawgeti(L, LUA_REGISTRYINDEX, repl_ref);
  lua_getfield(L, -1, "complete");
  lua_remove(L, -2);
  lua_pushstring(L, rl_line_buffer ? rl_line_buffer : "");
  lua_pushinteger(L, start);
  lua_pushinteger(L, end);
  if (lua_pcall(L, 3, 1, 0) != LUA_OK || !lua_istable(L, -1)) { lua_pop(L, 1); return NULL; }
  n = (int)luaL_len(L, -1);
  found = n > 0 ? (char **)calloc((size_t)n, sizeof *found) : NULL;
  for (i = 1; found && i <= n; i++) {
    const char *c = (lua_rawgeti(L, -1, i), lua_tostring(L, -1));
    if (c && (found[nfound] = strdup(c)) != NULL) nfound++;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return nfound > 0 ? rl_completion_matches(text, next_found) : NULL;
}
#endif

/* Loads ndplan.cli.repl and runs its setup (protected: a REPL without it still works). */
static int setup_call (lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "ndplan.cli.repl");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "setup");
  lua_call(L, 0, 1);
  return 1;
}

static void repl_setup (lua_State *L) {
  lua_pushcfunction(L, setup_call);
  if (lua_pcall(L, 0, 1, 0) != LUA_OK || !lua_istable(L, -1)) {
    fprintf(stderr, "ndplan: the REPL runs without help and completion: %s\n",
            lua_isstring(L, -1) ? lua_tostring(L, -1) : "ndplan.cli.repl.setup returned no table");
    lua_pop(L, 1);
    return;
  }
  if (lua_getfield(L, -1, "history") == LUA_TSTRING)
    snprintf(history_path, sizeof history_path, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  repl_ref = luaL_ref(L, LUA_REGISTRYINDEX);
#if defined(NDPLAN_USE_LIBEDIT)
  if (use_editor()) {
    complete_L = L;
    rl_readline_name = "ndplan";
    /* a word runs across '.', ':' and '-' (nd.estimate, m:params, llama3.1-8b); quotes,
       brackets and the other operators end it */
    rl_basic_word_break_characters = " \t\n\"\\'`@$><=;|&{(,+*/%^~[]";
    rl_completer_word_break_characters = (char *)rl_basic_word_break_characters;
    rl_attempted_completion_function = complete_word;
    rl_completion_append_character = '\0';
    using_history();
    stifle_history(1000);
    if (history_path[0]) read_history(history_path);
  }
#endif
}

static const char *get_prompt (lua_State *L, int firstline) {
  if (lua_getglobal(L, firstline ? "_PROMPT" : "_PROMPT2") == LUA_TNIL)
    return firstline ? PROMPT : PROMPT2;
  else {
    const char *p = luaL_tolstring(L, -1, NULL);
    lua_remove(L, -2);
    return p;
  }
}

#define EOFMARK "<eof>"
#define marklen (sizeof(EOFMARK) / sizeof(char) - 1)

/* Is this a syntax error caused by input that stops early? */
static int incomplete (lua_State *L, int status) {
  if (status == LUA_ERRSYNTAX) {
    size_t lmsg;
    const char *msg = lua_tolstring(L, -1, &lmsg);
    if (lmsg >= marklen && strcmp(msg + lmsg - marklen, EOFMARK) == 0) {
      lua_pop(L, 1);
      return 1;
    }
  }
  return 0;
}

/* Reads a line into a string on the stack; returns 0 at end of input. */
static int pushline (lua_State *L, int firstline) {
  size_t l;
  char *b = read_line(get_prompt(L, firstline));
  lua_pop(L, 1);  /* the prompt */
  if (b == NULL) return 0;
  l = strlen(b);
  if (l > 0 && b[l - 1] == '\n') b[--l] = '\0';
  if (firstline && b[0] == '=')  /* 5.2 habit: "=x" means "return x" */
    lua_pushfstring(L, "return %s", b + 1);
  else
    lua_pushlstring(L, b, l);
  free(b);
  return 1;
}

/* Tries the line as "return <line>;" so expressions print their values. */
static int addreturn (lua_State *L) {
  const char *line = lua_tostring(L, -1);
  const char *retline = lua_pushfstring(L, "return %s;", line);
  int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
  if (status == LUA_OK) {
    lua_remove(L, -2);
    if (line[0] != '\0') save_line(line);
  }
  else lua_pop(L, 2);
  return status;
}

/* Reads continuation lines while the statement is incomplete. */
static int multiline (lua_State *L) {
  for (;;) {
    size_t len;
    const char *line = lua_tolstring(L, 1, &len);
    int status = luaL_loadbuffer(L, line, len, "=stdin");
    if (!incomplete(L, status) || entry_cancelled || !pushline(L, 0)) {
      save_line(line);
      return status;
    }
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);
    lua_concat(L, 3);
  }
}

/* Reads one complete entry and compiles it; -1 at end of input. An entry cut by Ctrl-C
   compiles as nothing. */
static int loadline (lua_State *L) {
  int status;
  lua_settop(L, 0);
  entry_cancelled = 0;
  if (!pushline(L, 1)) return -1;
  if ((status = addreturn(L)) != LUA_OK) status = multiline(L);
  lua_remove(L, 1);
  if (entry_cancelled) {
    lua_settop(L, 0);
    status = luaL_loadbuffer(L, "", 0, "=stdin");
  }
  return status;
}

/*
** Prints whatever values the entry returned: through ndplan.cli.repl's show (an estimate as its
** CLI summary, a search's ranked list as its table), else through the global print.
*/
static void print_results (lua_State *L) {
  int n = lua_gettop(L);
  if (n > 0) {
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    if (repl_ref != LUA_NOREF) {
      lua_rawgeti(L, LUA_REGISTRYINDEX, repl_ref);
      lua_getfield(L, -1, "show");
      lua_remove(L, -2);
      lua_insert(L, 1);
      if (lua_pcall(L, n, 1, 0) == LUA_OK && lua_isstring(L, -1)) {
        size_t len;
        const char *text = lua_tolstring(L, -1, &len);
        fwrite(text, 1, len, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        lua_pop(L, 1);
        return;
      }
      lua_pushfstring(L, "error calling 'show' (%s)", lua_tostring(L, -1));
      nd_report(L, LUA_ERRRUN);
      return;
    }
    lua_getglobal(L, "print");
    lua_insert(L, 1);
    if (lua_pcall(L, n, 0, 0) != LUA_OK) {
      lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1));
      nd_report(L, LUA_ERRRUN);
    }
  }
}

void nd_repl (lua_State *L) {
  int status;
  repl_setup(L);
  while ((status = loadline(L)) != -1) {
    if (status == LUA_OK) status = nd_docall(L, 0, LUA_MULTRET);
    if (status == LUA_OK) print_results(L);
    else nd_report(L, status);
  }
  lua_settop(L, 0);
#if defined(NDPLAN_USE_LIBEDIT)
  drop_found();
#endif
  fputs("\n", stdout);
  fflush(stdout);
}
