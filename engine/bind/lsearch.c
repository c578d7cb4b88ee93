/*
** lsearch.c -- Lua binding ndplan.c.search: walks the strategy space with the C core,
** prices on threads, and keeps what the ranking needs.
**
** Policy hooks (admit, objective) are Lua functions called on this thread only, each
** through lua_pcall with a traceback; when neither is given the core prices everything
** without touching Lua. What is kept is bounded: the best `keep` fitting rows by
** (objective, peak, walk index), the few rows least over the budget, and nothing else;
** every priced row is streamed to the optional CSV file as it arrives, in walk order.
*/
#define _POSIX_C_SOURCE 200809L  /* sigaction, clock_gettime */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>

#include "ndplan/fields.h"
#include "ndplan/search.h"
#include "ndplan/search_results.h"
#include "ndplan/units.h"
#include "ndplan_lua.h"
#include "ldevice.h"
#include "lestimate.h"
#include "llazy.h"
#include "lmodel.h"

#define RESULTS_MT "ndplan.search.results"

/* Chart points sampled from the rows written to results.csv (nd_search_results.points):
   every row up to this many (24 MiB), so a chart thins them exactly as it would the file;
   past it, every s-th (s a power of two). search_outputs.MAX_POINTS is what a chart takes. */
#define MAX_POINTS (1 << 20)

/* results.csv's stdio buffer: rows are about 260 bytes, and glibc's own is 4 KiB */
#define CSV_BUFFER_BYTES (1 << 16)


/* What the search keeps (the core's nd_search_results) and what the binding adds; a
   userdata so a raise at any point frees it (__gc). */
typedef struct results {
  nd_search_results r;
  nd_search_counts counts;
  nd_search_bounds bounds;
  nd_job job;
  double budget;
  double elapsed;             /* wall seconds of the walk and pricing */
  nd_search_params p;         /* the walk's own, for results:detail (stop: not used) */
  nd_costs costs;             /* the costs it priced with */
  char csv_buffer[CSV_BUFFER_BYTES];  /* r.csv's (closed before the userdata is freed) */
} results;                    /* user values: 1 the model, 2 the device */

/* State of one run, reachable from the core's hooks. */
typedef struct run_state {
  lua_State *L;
  results *res;
  int admit_idx, objective_idx, msgh_idx, err_idx;  /* stack slots; 0 = absent */
  const char *failed_hook;    /* the hook whose error stopped the walk */
  int csv_failed;             /* writing results.csv failed (the walk stopped): errno, or -1 */
  int progress;
  double t0, last_print;
} run_state;

/* ---- the policy guard ------------------------------------------------------------- */
/*
** Policy code (the policy file's load and every hook) runs inside a guard:
**  - a count hook on the calling thread, inherited by the coroutines it creates, raises
**    "timed out" past the deadline and "interrupted" after Ctrl-C, at every check (every
**    GUARD_COUNT instructions), so a pcall in the policy cannot swallow it for long;
**  - the Lua heap may not grow past a cap: the state's allocator is wrapped once
**    (heap_guard) and refuses what would pass the cap while a guard runs;
**  - Ctrl-C sets a flag (the walk stops within a chunk, Lua code at the next check) and a
**    second Ctrl-C ends the process (the default action);
**  - GUARD_GRACE_S past the deadline, code still inside the guard (stuck in one C call, a
**    string pattern say) ends the process with one line: the deadline always holds.
** There is one guard per process: a search, or a policy hook, cannot start a search.
*/
#define GUARD_COUNT 1000
#define GUARD_GRACE_S 3.0

typedef struct heap_guard {  /* malloc'ed; freed (allocator restored) at lua_close */
  lua_Alloc f;
  void *ud;
  size_t used, cap;          /* bytes the state holds; cap 0: none */
  int refused;               /* an allocation was refused under the cap */
} heap_guard;

typedef struct guard_save {  /* what a guarded call restores when it leaves */
  lua_State *L;
  lua_Hook hook;
  int mask, count, outer;
  double deadline;
  size_t cap;
} guard_save;

static volatile sig_atomic_t interrupted;  /* 1: Ctrl-C, 2: deadline */
static struct {
  int depth;                 /* guarded calls running */
  int searching;             /* a walk is running */
  double deadline;           /* monotonic seconds; 0: none */
  heap_guard *heap;          /* of the guarded state */
  lua_Hook chain;            /* a hook that was there before (line hooks of the fuzzers) */
  int watchdog;              /* SIGALRM and the real-time timer are the guard's */
  struct sigaction old_int, old_alrm;
  struct itimerval old_timer;
} guard;

static double now (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *guard_alloc (void *ud, void *ptr, size_t osize, size_t nsize) {
  heap_guard *h = (heap_guard *)ud;
  size_t old = ptr ? osize : 0;
  void *p;
  if (nsize > old && h->cap > 0 && h->used + (nsize - old) > h->cap) {
    h->refused = 1;
    return NULL;
  }
  p = h->f(h->ud, ptr, osize, nsize);
  if (nsize == 0) h->used -= old;
  else if (p) h->used = h->used - old + nsize;
  return p;
}

/* __gc of the registry's sentinel, run by lua_close: the state's own allocator back. */
static int heap_release (lua_State *L) {
  void *ud;
  if (lua_getallocf(L, &ud) == guard_alloc) {
    heap_guard *h = (heap_guard *)ud;
    lua_setallocf(L, h->f, h->ud);
    if (guard.heap == h) guard.heap = NULL;
    free(h);
  }
  return 0;
}

/* The state's heap guard, installed on first use (NULL: out of memory). */
static heap_guard *heap_of (lua_State *L) {
  void *ud;
  heap_guard *h;
  if (lua_getallocf(L, &ud) == guard_alloc) return (heap_guard *)ud;
  h = (heap_guard *)malloc(sizeof *h);
  if (!h) return NULL;
  lua_newuserdatauv(L, 1, 0);  /* the sentinel, referenced by the registry until lua_close */
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, heap_release);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "ndplan.heap_guard");
  h->f = lua_getallocf(L, &h->ud);
  h->cap = 0;
  h->refused = 0;
  h->used = (size_t)lua_gc(L, LUA_GCCOUNT, 0) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB, 0);
  lua_setallocf(L, guard_alloc, h);
  return h;
}

/* The reason a guarded call must stop, or NULL. */
static const char *guard_tripped (void) {
  if (interrupted == 0 && guard.deadline > 0.0 && now() > guard.deadline) interrupted = 2;
  if (interrupted) return interrupted == 2 ? "timed out" : "interrupted";
  if (guard.heap && guard.heap->refused) return "not enough memory";
  return NULL;
}

static void guard_hook (lua_State *L, lua_Debug *ar) {
  if (ar->event != LUA_HOOKCOUNT) {
    if (guard.chain && guard.depth > 0) guard.chain(L, ar);
    return;
  }
  if (guard.depth > 0) {
    const char *why = guard_tripped();
    if (why) {
      lua_pushstring(L, why);
      lua_error(L);
    }
  }
}

static void on_sigint (int sig) {
  if (interrupted == 1) {  /* the second Ctrl-C: the default action ends the process */
    nd_files_cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  interrupted = 1;
}

static void on_watchdog (int sig) {
  static const char msg[] = "ndplan: policy error: timed out, and the policy did not stop "
                            "(stuck where no check reaches: one long C call, or a coroutine "
                            "made outside the guard): ending the process\n";
  ssize_t w;
  (void)sig;
  if (guard.depth == 0) return;
  w = write(2, msg, sizeof msg - 1);
  (void)w;
  nd_files_cleanup();
  _exit(1);
}

/* Arms SIGALRM in `seconds` (saving the timer and handler someone else had), or with 0
   puts theirs back. */
static void arm_watchdog (double seconds) {
  if (seconds > 0.0) {
    struct itimerval it;
    struct sigaction sa;
    memset(&it, 0, sizeof it);
    it.it_value.tv_sec = (time_t)seconds;
    it.it_value.tv_usec = (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6);
    if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0) it.it_value.tv_usec = 1;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_watchdog;
    sigaction(SIGALRM, &sa, &guard.old_alrm);
    setitimer(ITIMER_REAL, &it, &guard.old_timer);
    guard.watchdog = 1;
  }
  else if (guard.watchdog) {
    setitimer(ITIMER_REAL, &guard.old_timer, NULL);
    sigaction(SIGALRM, &guard.old_alrm, NULL);
    guard.watchdog = 0;
  }
}

/* Enters a guard on thread L: deadline (0: none) and heap cap in bytes (0: none); a nested
   guard keeps the stricter of each. */
static void guard_enter (lua_State *L, double deadline, size_t cap, guard_save *sv) {
  heap_guard *h = cap > 0 ? heap_of(L) : guard.heap;
  sv->L = L;
  sv->hook = lua_gethook(L);
  sv->mask = lua_gethookmask(L);
  sv->count = lua_gethookcount(L);
  sv->outer = guard.depth == 0;
  sv->deadline = guard.deadline;
  sv->cap = h ? h->cap : 0;
  if (sv->outer) {
    struct sigaction sa;
    interrupted = 0;
    guard.deadline = deadline;
    guard.heap = h;
    if (h) h->refused = 0;
    guard.chain = sv->hook != guard_hook ? sv->hook : NULL;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &guard.old_int);
    if (deadline > 0.0) {
      double left = deadline + GUARD_GRACE_S - now();
      arm_watchdog(left > GUARD_GRACE_S ? left : GUARD_GRACE_S);
    }
  }
  else if (deadline > 0.0 && (guard.deadline <= 0.0 || deadline < guard.deadline))
    guard.deadline = deadline;
  if (h && cap > 0 && (h->cap == 0 || cap < h->cap)) h->cap = cap;
  guard.depth++;
  lua_sethook(L, guard_hook, LUA_MASKCOUNT | (guard.chain ? (sv->mask & ~LUA_MASKCOUNT) : 0),
              GUARD_COUNT);
}

static void guard_leave (guard_save *sv) {
  guard.depth--;
  lua_sethook(sv->L, sv->hook, sv->mask, sv->count);
  if (guard.heap) guard.heap->cap = sv->cap;
  guard.deadline = sv->deadline;
  if (sv->outer) {
    arm_watchdog(0.0);
    if (interrupted == 1) signal(SIGINT, SIG_DFL);  /* a second Ctrl-C still ends it */
    else sigaction(SIGINT, &guard.old_int, NULL);
    guard.chain = NULL;
  }
}

/* Message handler of guarded calls: a traceback after a string; never a metamethod of the
   error object (a policy's __tostring would run outside the guard). */
static int guard_msgh (lua_State *L) {
  const char *msg = lua_type(L, 1) == LUA_TSTRING ? lua_tostring(L, 1) : NULL;
  if (!msg) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* After a guarded lua_pcall failed: replaces the error on top with the guard's reason
   when it tripped (the policy may have caught and replaced the first error). */
static void guard_failure (lua_State *L, int status, size_t cap) {
  const char *why = guard_tripped();
  const char *was = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
  if (why && strcmp(why, "not enough memory") != 0) {
    lua_pushfstring(L, "%s\n%s", why, was);
    lua_replace(L, -2);
  }
  else if (status == LUA_ERRMEM || why) {
    if (cap > 0)
      lua_pushfstring(L, "not enough memory (policy code may grow the Lua heap to %d MiB)",
                      (int)(cap >> 20));
    else lua_pushliteral(L, "not enough memory");
    lua_replace(L, -2);
  }
}

static double opt_limit (lua_State *L, int t, const char *key) {
  double v;
  if (lua_type(L, t) != LUA_TTABLE) return 0.0;
  lua_getfield(L, t, key);
  v = luaL_optnumber(L, -1, 0.0);
  lua_pop(L, 1);
  if (!(v >= 0.0) || !isfinite(v)) luaL_error(L, "%s: expected a finite number >= 0", key);
  return v;
}

/* guard(limits, fn, ...) -> true, ... | false, message: fn(...) in the guard; limits =
   {deadline = clock() seconds, heap = bytes} (either may be absent). The message is one line
   and then the traceback. */
static int s_guard (lua_State *L) {
  double deadline = opt_limit(L, 1, "deadline");
  double heap = opt_limit(L, 1, "heap");
  size_t cap = heap > 0.0 ? (heap < 1e18 ? (size_t)heap : (size_t)1 << 60) : 0;
  guard_save sv;
  int status, n;
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushcfunction(L, guard_msgh);
  lua_insert(L, 2);                   /* 1 limits, 2 msgh, 3 fn, args */
  n = lua_gettop(L) - 3;
  guard_enter(L, deadline, cap, &sv);
  status = lua_pcall(L, n, LUA_MULTRET, 2);
  if (status == LUA_OK && sv.outer && interrupted) {  /* a Ctrl-C after the last check */
    status = LUA_ERRRUN;
    lua_settop(L, 2);
    lua_pushliteral(L, "");
  }
  if (status != LUA_OK) guard_failure(L, status, guard.heap ? guard.heap->cap : 0);
  guard_leave(&sv);
  lua_pushboolean(L, status == LUA_OK);
  lua_replace(L, 1);
  lua_remove(L, 2);
  return lua_gettop(L);
}

/* tripped() -> whether the running guard must stop (a policy's pcall passes that on) */
static int s_tripped (lua_State *L) {
  lua_pushboolean(L, guard.depth > 0 && guard_tripped() != NULL);
  return 1;
}

/* busy() -> whether a search or a guarded policy call is running */
static int s_busy (lua_State *L) {
  lua_pushboolean(L, guard.depth > 0 || guard.searching);
  return 1;
}

/* clock() -> monotonic seconds (deadlines); heap_bytes() -> what the Lua heap holds */
static int s_clock (lua_State *L) {
  lua_pushnumber(L, now());
  return 1;
}

static int s_heap_bytes (lua_State *L) {
  lua_pushinteger(L, (lua_Integer)lua_gc(L, LUA_GCCOUNT, 0) * 1024 + lua_gc(L, LUA_GCCOUNTB, 0));
  return 1;
}

/* ---- reading the space ------------------------------------------------------------ */

static int cmp_int (const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* One value of a dimension: an integer, a boolean (sp) or a mode name (recompute). */
static int read_value (lua_State *L, int idx, nd_dim d) {
  const char *name = nd_dim_name(d);
  if (d == ND_DIM_RECOMPUTE) {
    int r = 0;
    if (lua_type(L, idx) != LUA_TSTRING || nd_search_recompute_parse(lua_tostring(L, idx), &r) != 0)
      luaL_error(L, "recompute: expected none, selective, full, per_layer, megatron or auto, got %s",
                 lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : luaL_typename(L, idx));
    return r;
  }
  if (d == ND_DIM_SP && lua_isboolean(L, idx)) return lua_toboolean(L, idx);
  if (!lua_isinteger(L, idx))
    luaL_error(L, "%s: expected an integer, a list of integers or \"auto\", got %s", name,
               luaL_typename(L, idx));
  {
    lua_Integer v = lua_tointeger(L, idx);
    if (v < 0 || v > 1000000000 || (v == 0 && d != ND_DIM_ZERO && d != ND_DIM_SP))
      luaL_error(L, "%s: %I is out of range", name, v);
    return (int)v;
  }
}

static int shard_value (lua_State *L, int idx, const char *name) {
  lua_Integer v;
  if (!lua_isinteger(L, idx))
    luaL_error(L, "%s: expected a positive integer, a list of them or \"auto\", got %s", name,
               luaL_typename(L, idx));
  v = lua_tointeger(L, idx);
  if (v < 1 || v > 1000000000) luaL_error(L, "%s: %I is out of range", name, v);
  return (int)v;
}

/* A dimension from a space table: nil or "auto" = searched, a value = pinned, a list. */
static void read_dim (lua_State *L, int t, nd_dim d, nd_dim_set *s) {
  int type = lua_getfield(L, t, nd_dim_name(d));
  if (type == LUA_TNIL || (type == LUA_TSTRING && strcmp(lua_tostring(L, -1), "auto") == 0)) {
    s->is_auto = 1;
    s->n = 0;
  }
  else if (type == LUA_TTABLE) {
    lua_Integer i, n = luaL_len(L, -1);
    int k, j;
    if (n < 1 || n > ND_SET_MAX)
      luaL_error(L, "%s: a list needs 1 to %d values", nd_dim_name(d), ND_SET_MAX);
    s->is_auto = 0;
    s->n = 0;
    for (i = 1; i <= n; i++) {
      lua_geti(L, -1, i);
      s->v[s->n++] = read_value(L, -1, d);
      lua_pop(L, 1);
    }
    qsort(s->v, (size_t)s->n, sizeof s->v[0], cmp_int);
    for (k = 0, j = 0; j < s->n; j++)  /* drop repeats */
      if (k == 0 || s->v[k - 1] != s->v[j]) s->v[k++] = s->v[j];
    s->n = k;
  }
  else {
    s->is_auto = 0;
    s->n = 1;
    s->v[0] = read_value(L, -1, d);
  }
  lua_pop(L, 1);
}

/* precision: one recipe (the base's) or a list of them, each walked (ascending by id). */
static void read_recipes (lua_State *L, int t, nd_search_params *p) {
  int type = lua_getfield(L, t, "precision");
  if (type == LUA_TTABLE) {
    lua_Integer i, n = luaL_len(L, -1);
    int k, j;
    nd_dim_set *s = &p->precision;
    if (n < 1 || n > ND_RECIPE_COUNT)
      luaL_error(L, "precision: a list needs 1 to %d recipes", ND_RECIPE_COUNT);
    s->is_auto = 0;
    s->n = 0;
    for (i = 1; i <= n; i++) {
      nd_recipe_id r;
      lua_geti(L, -1, i);
      nd_check_recipe(L, -1, "precision", &r);
      s->v[s->n++] = (int)r;
      lua_pop(L, 1);
    }
    qsort(s->v, (size_t)s->n, sizeof s->v[0], cmp_int);
    for (k = 0, j = 0; j < s->n; j++)  /* drop repeats */
      if (k == 0 || s->v[k - 1] != s->v[j]) s->v[k++] = s->v[j];
    s->n = k;
    p->base.precision = (nd_recipe_id)s->v[0];
  }
  else if (type != LUA_TNIL) nd_check_recipe(L, -1, "precision", &p->base.precision);
  lua_pop(L, 1);
}

/* dp_shard (HSDP's shard group) or dp_replicate (its replicas), name: nil = not walked
   (all of dp), "auto" = the divisors of each dp, a value or a list = those that divide it. */
static void read_shard (lua_State *L, int t, const char *name, nd_dim_set *s) {
  int type = lua_getfield(L, t, name);
  s->is_auto = 0;
  s->n = 0;
  if (type == LUA_TSTRING && strcmp(lua_tostring(L, -1), "auto") == 0) s->is_auto = 1;
  else if (type != LUA_TNIL) {
    int k, j;
    if (type == LUA_TTABLE) {
      lua_Integer i, n = luaL_len(L, -1);
      if (n < 1 || n > ND_SET_MAX) luaL_error(L, "%s: a list needs 1 to %d values", name, ND_SET_MAX);
      for (i = 1; i <= n; i++) {
        lua_geti(L, -1, i);
        s->v[s->n++] = shard_value(L, -1, name);
        lua_pop(L, 1);
      }
    }
    else s->v[s->n++] = shard_value(L, -1, name);
    qsort(s->v, (size_t)s->n, sizeof s->v[0], cmp_int);
    for (k = 0, j = 0; j < s->n; j++)
      if (k == 0 || s->v[k - 1] != s->v[j]) s->v[k++] = s->v[j];
    s->n = k;
  }
  lua_pop(L, 1);
}

static void read_space (lua_State *L, int t, nd_search_params *p) {
  int d;
  luaL_checktype(L, t, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, t)) {  /* unknown keys are misuse */
    const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
    const char *const *k;
    int known = 0;
    for (k = nd_space_keys; *k && !known; k++) known = strcmp(key, *k) == 0;
    for (d = 0; d < ND_DIM_COUNT && !known; d++) known = strcmp(key, nd_dim_name(d)) == 0;
    known = known || strcmp(key, "dp_shard") == 0 || strcmp(key, "dp_replicate") == 0;
    if (!known) luaL_error(L, "space: unknown field '%s'", key);
    lua_pop(L, 1);
  }
  for (d = 0; d < ND_DIM_COUNT; d++) read_dim(L, t, (nd_dim)d, &p->dim[d]);
  if (lua_getfield(L, t, "schedule") != LUA_TNIL) nd_check_schedule(L, -1, &p->base.schedule);
  lua_pop(L, 1);
  read_recipes(L, t, p);
  read_shard(L, t, "dp_shard", &p->dp_shard);
  read_shard(L, t, "dp_replicate", &p->dp_replicate);
  if (lua_getfield(L, t, "flash_attention") != LUA_TNIL)
    p->base.flash_attention = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (lua_getfield(L, t, "tp_comm_overlap") != LUA_TNIL)
    p->base.tp_comm_overlap = lua_toboolean(L, -1);
  lua_pop(L, 1);
  /* what a selective candidate repeats (nd.estimate's selective_ops; torchtitan's per-op
     SAC is the set ndplan.export.torchtitan.OP_SAC names) */
  if (lua_getfield(L, t, "selective_ops") != LUA_TNIL)
    p->base.selective_ops = nd_read_ops(L, "selective_ops", 0);
  lua_pop(L, 1);
  if (lua_getfield(L, t, "fp8_param_gather") != LUA_TNIL)  /* the recipe's options */
    p->base.param_gather = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (lua_getfield(L, t, "bf16_first_layers") != LUA_TNIL)
    p->base.bf16_first = (int)luaL_checkinteger(L, -1);
  lua_pop(L, 1);
  if (lua_getfield(L, t, "bf16_last_layers") != LUA_TNIL)
    p->base.bf16_last = (int)luaL_checkinteger(L, -1);
  lua_pop(L, 1);
}

static void read_job (lua_State *L, int t, nd_job *job) {
  lua_Integer devices, seq_len, global_batch;
  char err[160];
  luaL_checktype(L, t, LUA_TTABLE);
  lua_getfield(L, t, "devices");
  devices = luaL_checkinteger(L, -1);
  lua_getfield(L, t, "seq_len");
  seq_len = luaL_checkinteger(L, -1);
  lua_getfield(L, t, "global_batch");
  global_batch = luaL_checkinteger(L, -1);
  lua_pop(L, 3);
  if (nd_job_check(devices, global_batch, seq_len, err, sizeof err) != 0)  /* before narrowing */
    luaL_error(L, "job: %s", err);
  job->devices = (int)devices;
  job->seq_len = (int)seq_len;
  job->global_batch = (long long)global_batch;
}

/* ---- rows as Lua tables ---------------------------------------------------------- */

/* A candidate's fields (as push_candidate pushes them), in one list for nd_push_interned. */
static const char *const candidate_keys[] = {
  "dp", "tp", "pp", "vpp", "cp", "ep", "etp", "zero", "mbs", "mb", "dp_shard", "dp_replicate",
  "sp", "recompute", "layout", "precision", NULL
};

/* The candidate as a strategy table (the fields of nd.estimate's result.strategy). */
static void push_candidate (lua_State *L, const nd_candidate *c, int body) {
  nd_strategy st;
  lua_Integer v[12];
  int fields = 16, keys, i;  /* sized for every field it gets: a 17th would rehash it */
  if (c->layout != ND_VARIANT_EVEN) {
    st.pp = c->pp; st.vpp = c->vpp;
    if (nd_layout_variant(&st, body, c->layout) != 0)
      st.account = 0, st.first_layers = st.last_layers = 0;  /* no flags */
    fields += !!(st.account & ND_ACCOUNT_EMBEDDING) + !!(st.account & ND_ACCOUNT_LOSS)
            + !!st.first_layers + !!st.last_layers;
  }
  v[0] = c->dp; v[1] = c->tp; v[2] = c->pp; v[3] = c->vpp; v[4] = c->cp; v[5] = c->ep;
  v[6] = c->etp; v[7] = c->zero; v[8] = c->mbs; v[9] = c->mb;
  v[10] = c->dp_shard > 0 ? c->dp_shard : c->dp;  /* 0 before resolution: all of dp */
  v[11] = c->dp_shard > 0 ? c->dp / c->dp_shard : 1;  /* dp = both */
  keys = nd_push_interned(L, candidate_keys);  /* the keys' strings, not found again */
  lua_createtable(L, 0, fields);
  for (i = 0; i < 12; i++) {
    lua_rawgeti(L, keys, i + 1);
    lua_pushinteger(L, v[i]);
    lua_rawset(L, -3);
  }
  lua_rawgeti(L, keys, 13); lua_pushboolean(L, c->sp); lua_rawset(L, -3);
  lua_rawgeti(L, keys, 14); lua_pushstring(L, nd_search_recompute_name(c->recompute));
  lua_rawset(L, -3);
  lua_rawgeti(L, keys, 15); lua_pushstring(L, nd_layout_variant_name(c->layout));
  lua_rawset(L, -3);
  lua_rawgeti(L, keys, 16); lua_pushstring(L, nd_recipe_get((nd_recipe_id)c->precision)->name);
  lua_rawset(L, -3);
  if (c->layout != ND_VARIANT_EVEN) nd_push_layout_flags(L, &st);  /* the variant's flags */
  lua_remove(L, keys);
}

/*
** A row's nested tables (strategy, memory_parts_bytes, time_parts_s) are built on first
** read, from a copy of the row its metatable keeps: an objective that reads a figure or two
** of each of a million rows does not build three tables a row (they were 94% of what a
** policy's objective cost the search). pairs builds them first; an assigned one is the
** caller's.
*/
typedef struct lazy_row {
  nd_lazy head;      /* first: the lazy fields (llazy.h) */
  nd_search_row r;
  int body;          /* the model's body layers (the layout variant's flags) */
} lazy_row;

static const char *const row_lazy[] = {"strategy", "memory_parts_bytes", "time_parts_s", NULL};

/* Pushes nested table i (row_lazy) of row r, for a model of `body` layers. */
static void push_nested (lua_State *L, const nd_search_row *r, int body, int i) {
  int k;
  if (i == 0) push_candidate(L, &r->c, body);
  else if (i == 1) {
    lua_createtable(L, 0, 8);
    for (k = 0; k < ND_SEARCH_MEM_PARTS; k++) nd_setnum(L, nd_memory_parts[k], r->mem[k]);
    nd_setnum(L, "peak", r->peak);
  }
  else {
    lua_createtable(L, 0, ND_T_COUNT);
    for (k = 0; k < ND_T_COUNT; k++) nd_setnum(L, nd_time_part_name(k), r->time_parts[k]);
  }
}

/* Pushes nested table i of the row whose state is at index s (nd_lazy_build). */
static void push_row_field (lua_State *L, int s, int i) {
  const lazy_row *lr = (const lazy_row *)lua_touserdata(L, s);
  push_nested(L, &lr->r, lr->body, i);
}

/* A row as a Lua table: its figures, and the nested tables (lazy: when first read; else
   now, for the Lua library's readers, which read rows raw). */
/* A row's own fields, in push_row's order (nd_push_interned: their strings found once). */
static const char *const row_keys[] = {
  "step_time_s", "tokens_per_s", "mfu", "hfu", "peak_memory_bytes", "budget_bytes",
  "over_bytes", "objective", "index", "heaviest_stage", "stages", "fits", NULL
};

static void push_row (lua_State *L, const nd_search_row *r, const results *res, int lazy) {
  lazy_row *lr;
  double num[8];
  int keys = nd_push_interned(L, row_keys), i;
  num[0] = r->step_time; num[1] = r->tokens_per_s; num[2] = r->mfu; num[3] = r->hfu;
  num[4] = r->peak; num[5] = res->budget; num[6] = r->over; num[7] = r->key;
  lua_createtable(L, 0, 16);  /* its 12 fields and the 3 lazy ones */
  for (i = 0; i < 8; i++) {
    lua_rawgeti(L, keys, i + 1);
    lua_pushnumber(L, num[i]);
    lua_rawset(L, -3);
  }
  lua_rawgeti(L, keys, 9); lua_pushinteger(L, (lua_Integer)r->index + 1); lua_rawset(L, -3);
  lua_rawgeti(L, keys, 10); lua_pushinteger(L, r->heaviest); lua_rawset(L, -3);
  lua_rawgeti(L, keys, 11); lua_pushinteger(L, r->stages); lua_rawset(L, -3);
  lua_rawgeti(L, keys, 12); lua_pushboolean(L, r->fits); lua_rawset(L, -3);
  lua_remove(L, keys);
  if (!lazy) {  /* each nested table now */
    for (i = 0; row_lazy[i]; i++) {
      lua_pushstring(L, row_lazy[i]);
      push_nested(L, r, res->bounds.layers, i);
      lua_rawset(L, -3);
    }
    return;
  }
  lr = (lazy_row *)lua_newuserdatauv(L, sizeof *lr, 0);
  lr->head.names = row_lazy;
  lr->head.build = push_row_field;
  lr->head.built = 0;
  lr->r = *r;
  lr->body = res->bounds.layers;
  nd_lazy_attach(L, "ndplan.search_row");
}

/* ---- the hooks the core calls ---------------------------------------------------- */

/* Calls admit(candidate) or objective(row) inside lua_pcall, so that building the argument
   (a memory error under the heap cap) and checking the result raise inside the protected
   call too. Arguments: the hook, a light userdata (the candidate or row), a boolean
   (objective), the results (light userdata). Returns the hook's verdict: a boolean, or a
   number or nil. */
static int call_hook (lua_State *L) {
  int objective = lua_toboolean(L, 3);
  const results *res = (const results *)lua_touserdata(L, 4);
  lua_settop(L, 2);
  lua_pushvalue(L, 1);
  if (objective) push_row(L, (const nd_search_row *)lua_touserdata(L, 2), res, 1);
  else push_candidate(L, (const nd_candidate *)lua_touserdata(L, 2), res->bounds.layers);
  lua_call(L, 1, 1);
  if (!objective) {
    lua_pushboolean(L, lua_toboolean(L, -1));
    return 1;
  }
  if (lua_isnil(L, -1) || (lua_isboolean(L, -1) && !lua_toboolean(L, -1))) return 0;
  if (!lua_isnumber(L, -1)) {
    lua_pushfstring(L, "objective: expected a number or nil, got %s", luaL_typename(L, -1));
    return lua_error(L);
  }
  if (isnan(lua_tonumber(L, -1))) {
    lua_pushliteral(L, "objective: returned NaN (expected a number to minimise, or nil to drop "
                       "the result)");
    return lua_error(L);
  }
  lua_pushnumber(L, lua_tonumber(L, -1));
  return 1;
}

/* 0 and the verdict on top, or -1 with the error (with traceback) in the error slot. */
static int protected_call (run_state *rs, int fn, void *arg, int objective) {
  lua_State *L = rs->L;
  int status;
  lua_pushcfunction(L, call_hook);
  lua_pushvalue(L, fn);
  lua_pushlightuserdata(L, arg);
  lua_pushboolean(L, objective);
  lua_pushlightuserdata(L, rs->res);
  status = lua_pcall(L, 4, 1, rs->msgh_idx);
  if (status != LUA_OK) {
    guard_failure(L, status, guard.heap ? guard.heap->cap : 0);
    lua_replace(L, rs->err_idx);
    rs->failed_hook = objective ? "objective" : "admit";
    return -1;
  }
  return 0;
}

static int admit_hook (void *ud, const nd_candidate *c, int *keep) {
  run_state *rs = (run_state *)ud;
  if (protected_call(rs, rs->admit_idx, (void *)c, 0) != 0) return -1;
  *keep = lua_toboolean(rs->L, -1);
  lua_pop(rs->L, 1);
  return 0;
}

/* objective(row) -> number (lower is better) or nil to drop. */
static int objective_of (run_state *rs, nd_search_row *r, int *drop) {
  lua_State *L = rs->L;
  *drop = 0;
  if (!rs->objective_idx) return 0;
  if (protected_call(rs, rs->objective_idx, r, 1) != 0) return -1;
  if (lua_isnil(L, -1)) *drop = 1;
  else r->key = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return 0;
}

static int deliver_hook (void *ud, nd_search_row *rows, int n) {
  run_state *rs = (run_state *)ud;
  nd_search_results *res = &rs->res->r;
  int i;
  for (i = 0; i < n; i++) {
    nd_search_row *r = &rows[i];
    int drop, fits = nd_search_results_row(res, r);
    if (fits < 0) { rs->csv_failed = errno ? errno : -1; return -1; }  /* the reason */
    if (!fits) continue;
    if (objective_of(rs, r, &drop) != 0) return -1;
    if (drop) nd_search_results_drop(res);
    else nd_search_results_keep(res, r);
  }
  return 0;
}

/* The walk's cuts (nd_search_hooks.cuts): nd_search_results_cuts. */
static void cuts_hook (void *ud, double *time_cut, double *over_cut) {
  nd_search_results_cuts(&((run_state *)ud)->res->r, time_cut, over_cut);
}

/* A progress line on stderr, at most ten times a second (only when asked: a terminal);
   past the deadline the core stops within a chunk. */
static int progress_hook (void *ud, const nd_search_counts *c) {
  run_state *rs = (run_state *)ud;
  double t = now(), best = rs->res->r.best_key;
  if (guard.deadline > 0.0 && t > guard.deadline) interrupted = 2;
  if (!rs->progress || t - rs->last_print < 0.1) return 0;
  rs->last_print = t;
  if (best < HUGE_VAL)  /* the default objective is the step time */
    fprintf(stderr, "\r\033[K%llu candidates, %llu priced, %llu fit, best %.4g%s, %.1f s",
            c->tested, c->priced, c->fit, best, rs->objective_idx ? "" : " s/step",
            t - rs->t0);
  else
    fprintf(stderr, "\r\033[K%llu candidates, %llu priced, %llu fit, %.1f s",
            c->tested, c->priced, c->fit, t - rs->t0);
  fflush(stderr);
  return 0;
}

/* ---- the results object ---------------------------------------------------------- */

static results *check_results (lua_State *L, int i) {
  return (results *)luaL_checkudata(L, i, RESULTS_MT);
}

/* __gc, safe to call twice: what is freed is also forgotten (a called __gc leaves an empty
   object; the metatable is protected anyway). */
static int res_gc (lua_State *L) {
  results *res = check_results(L, 1);
  if (res->r.csv) { fclose(res->r.csv); res->r.csv = NULL; }
  nd_search_results_free(&res->r);
  return 0;
}

static int res_len (lua_State *L) {
  lua_pushinteger(L, check_results(L, 1)->r.nbest);
  return 1;
}

/* results[i] -> row table (1-based, ranked); results.method -> the method */
static int res_index (lua_State *L) {
  results *res = check_results(L, 1);
  if (lua_isinteger(L, 2)) {
    lua_Integer i = lua_tointeger(L, 2);
    if (i < 1 || i > res->r.nbest) return 0;
    push_row(L, &res->r.best[i - 1], res, 0);
    nd_setint(L, "rank", i);
    return 1;
  }
  luaL_getmetafield(L, 1, "methods");
  lua_pushvalue(L, 2);
  lua_gettable(L, -2);
  return 1;
}

/* results:misses() -> the rows least over the budget, least first */
static int res_misses (lua_State *L) {
  results *res = check_results(L, 1);
  int i;
  lua_createtable(L, res->r.nmiss, 0);
  for (i = 0; i < res->r.nmiss; i++) {
    push_row(L, &res->r.miss[i], res, 0);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* results:info() -> {tested, priced, fit, refused = {[label] = n}, labels = {...}, ...} */
static int res_info (lua_State *L) {
  results *res = check_results(L, 1);
  const nd_search_counts *c = &res->counts;
  unsigned long long refused = 0;
  int r;
  lua_createtable(L, 0, 12);
  nd_setint(L, "tested", (lua_Integer)c->tested);
  nd_setint(L, "priced", (lua_Integer)c->priced);
  nd_setint(L, "fit", (lua_Integer)c->fit);
  nd_setint(L, "equivalent", (lua_Integer)c->equivalent);
  nd_setint(L, "pruned_time", (lua_Integer)c->pruned_time);
  nd_setint(L, "pruned_memory", (lua_Integer)c->pruned_memory);
  nd_setint(L, "skipped_time", (lua_Integer)c->skipped_time);
  nd_setint(L, "skipped_memory", (lua_Integer)c->skipped_memory);
  nd_setint(L, "dropped", (lua_Integer)res->r.dropped);
  nd_setint(L, "postfiltered", (lua_Integer)res->r.postfiltered);
  nd_setint(L, "kept", res->r.nbest);
  nd_setint(L, "csv_rows", (lua_Integer)res->r.csv_rows);
  lua_createtable(L, 0, ND_REFUSE_COUNT);
  for (r = 0; r < ND_REFUSE_COUNT; r++) {
    nd_setint(L, nd_refusal_label((nd_refusal)r), (lua_Integer)c->refused[r]);
    refused += c->refused[r];
  }
  lua_setfield(L, -2, "refused");
  nd_setint(L, "refused_total", (lua_Integer)refused);
  lua_createtable(L, ND_REFUSE_COUNT, 0);
  for (r = 0; r < ND_REFUSE_COUNT; r++) {
    lua_pushstring(L, nd_refusal_label((nd_refusal)r));
    lua_rawseti(L, -2, r + 1);
  }
  lua_setfield(L, -2, "labels");
  lua_createtable(L, 0, 8);
  nd_setint(L, "tp", res->bounds.tp); nd_setint(L, "pp", res->bounds.pp);
  nd_setint(L, "cp", res->bounds.cp); nd_setint(L, "ep", res->bounds.ep);
  nd_setint(L, "etp", res->bounds.etp); nd_setint(L, "vpp", res->bounds.vpp);
  nd_setint(L, "mbs", res->bounds.mbs); nd_setint(L, "layers", res->bounds.layers);
  lua_setfield(L, -2, "bounds");
  nd_setnum(L, "budget_bytes", res->budget);
  nd_setnum(L, "elapsed_s", res->elapsed);
  return 1;
}

/*
** results:points(stride) -> {step_time_s = {...}, peak_bytes = {...}, fits = {...}}: the
** rows written to results.csv whose line (1-based, after the header) is a multiple of
** stride, in csv order, as three columns of one length (a chart reads thousands: three
** arrays instead of a table per row). The sample holds every row up to MAX_POINTS of them,
** then every s-th (s a power of two): the stride used is then the least multiple of s at
** or above the one asked.
*/
static int res_points (lua_State *L) {
  results *res = check_results(L, 1);
  lua_Integer want = luaL_optinteger(L, 2, 1);
  unsigned long long s = res->r.stride, stride = want > 1 ? (unsigned long long)want : 1;
  int i, n = 0, t = lua_gettop(L) + 2;
  stride = (stride + s - 1) / s * s;
  lua_createtable(L, 0, 3);
  lua_createtable(L, res->r.npoints, 0);  /* t: step times */
  lua_createtable(L, res->r.npoints, 0);  /* t + 1: peaks */
  lua_createtable(L, res->r.npoints, 0);  /* t + 2: fits */
  for (i = 0; i < res->r.npoints; i++) {
    const nd_search_point *pt = &res->r.points[i];
    if (pt->n % stride != 0) continue;
    n++;  /* the figures as results.csv states them */
    lua_pushnumber(L, nd_round_g(pt->step_time, 9));
    lua_rawseti(L, t, n);
    /* results.csv's "%.0f": the nearest integer, ties to even, which rint gives exactly in
       the default rounding mode (and without a text round trip per point) */
    lua_pushnumber(L, rint(pt->peak));
    lua_rawseti(L, t + 1, n);
    lua_pushboolean(L, pt->fits);
    lua_rawseti(L, t + 2, n);
  }
  lua_setfield(L, t - 1, "fits");
  lua_setfield(L, t - 1, "peak_bytes");
  lua_setfield(L, t - 1, "step_time_s");
  return 1;
}

/* The kept row (ranked, or the post-filter's fallback) at walk index `index` (1-based, as
   row.index), or NULL. */
static const nd_search_row *kept_row (const results *res, lua_Integer index) {
  int i;
  for (i = 0; i < res->r.nbest; i++)
    if ((lua_Integer)res->r.best[i].index + 1 == index) return &res->r.best[i];
  if (res->r.has_fallback && (lua_Integer)res->r.fallback.index + 1 == index)
    return &res->r.fallback;
  return NULL;
}

/*
** results:detail(index [, device [, costs]]) -> the nd.estimate result of the kept row at
** walk index `index` (row.index), priced again as the walk priced it: the search's base
** strategy, budget and costs, a per-layer plan among the walk's modes
** (ND_SEARCH_PLAN_MODES, with stage_savings_s and stage_need_bytes), the Megatron form
** (result.megatron) or the whole-model mode | nil, reason. device and costs (a device and
** named costs, as nd.estimate takes them) price it on other figures instead. An index no
** kept row has raises.
*/
static int res_detail (lua_State *L) {
  results *res = check_results(L, 1);
  const nd_search_row *row = kept_row(res, luaL_checkinteger(L, 2));
  const nd_model_spec *m;
  const nd_device *dev;
  nd_costs costs = res->costs;
  nd_strategy *st;
  nd_estimate *e;
  nd_recompute_plan *plan = NULL;
  nd_megatron_choice mc;
  char err[256];
  int rc, rec;
  luaL_argcheck(L, row != NULL, 2, "the walk index of a kept row");
  lua_settop(L, 4);
  lua_getiuservalue(L, 1, 1);                                /* 5: the model */
  if (lua_isnoneornil(L, 3)) lua_getiuservalue(L, 1, 2);     /* 6: the device */
  else lua_pushvalue(L, 3);
  m = nd_checkmodel(L, 5);
  dev = nd_checkdevice(L, 6);
  if (!lua_isnoneornil(L, 4)) nd_read_costs(L, 4, &costs);
  st = (nd_strategy *)lua_newuserdatauv(L, sizeof *st, 0);  /* GC-owned scratch */
  e = (nd_estimate *)lua_newuserdatauv(L, sizeof *e, 0);
  rec = row->c.recompute;
  nd_candidate_strategy(&row->c, &res->p.base, (int)m->num_layers, st);
  if (rec >= ND_SEARCH_PER_LAYER) st->recompute = ND_RECOMPUTE_NONE;  /* the planner's */
  if (rec == ND_SEARCH_PER_LAYER) {
    plan = (nd_recompute_plan *)lua_newuserdatauv(L, sizeof *plan, 0);
    rc = nd_recompute_plan_run(m, dev, &res->job, st, &costs, res->p.budget,
                               ND_SEARCH_PLAN_MODES, plan, e, err, sizeof err);
  } else if (rec == ND_SEARCH_MEGATRON) {
    rc = nd_recompute_megatron_choose(m, dev, &res->job, st, &costs, res->p.budget, 0, e, &mc,
                                      err, sizeof err);
  } else {
    rc = nd_estimate_run(m, dev, &res->job, st, &costs, e, err, sizeof err);
  }
  if (rc != 0) {
    luaL_pushfail(L);
    lua_pushstring(L, err);
    return 2;
  }
  nd_push_estimate(L, e, st, &costs, NULL, 5, 6, 0, 0);
  if (plan) nd_push_plan_fields(L, plan, m, dev, e->stages);
  if (rec == ND_SEARCH_MEGATRON) nd_push_megatron_field(L, &mc, 0);
  return 1;
}

/* results:fallback() -> the best row the post-filter removed, or nil */
static int res_fallback (lua_State *L) {
  results *res = check_results(L, 1);
  if (!res->r.has_fallback) return 0;
  push_row(L, &res->r.fallback, res, 0);
  return 1;
}

/* The integer on top (nil: dflt) within [lo, hi], before any cast (2^32 + 5 is not 5). */
static int opt_int (lua_State *L, const char *name, int dflt, int lo, int hi) {
  lua_Integer v = luaL_optinteger(L, -1, dflt);
  if (v < lo || v > hi)
    luaL_error(L, "%s: expected %d to %d, got %I", name, lo, hi, (LUAI_UACINT)v);
  return (int)v;
}

/*
** run(model, device, job, space, opts [, costs]) -> results
** opts = {budget = bytes, jobs = n, chunk = n, keep = n, misses = n, all_misses = bool (the
**         nearest misses exact whatever is kept; else only when nothing is, a walk that
**         keeps nothing walked again for them), csv = path, csv_all,
**         progress = bool, admit = fn, objective = fn, deadline = clock() seconds,
**         heap = bytes, exhaustive = bool (price what the bounds would prune)}
** The walk runs in the policy guard (deadline, heap cap, Ctrl-C); one search at a time.
** Raises on misuse, on a policy hook's error ({policy_error = message with traceback,
** hook = name}), past the deadline ("timed out") and on Ctrl-C ("interrupted"); the CSV is
** closed either way (the caller renames or removes it).
*/
static int s_run (lua_State *L) {
  const nd_model_spec *m = nd_checkmodel(L, 1);
  const nd_device *dev = nd_checkdevice(L, 2);
  nd_search_params *p;
  nd_search_hooks hooks;
  run_state rs;
  results *res;
  nd_costs costs;
  char err[256];
  int status, keep, keep_miss;
  double deadline, heap;
  const char *csv_path = NULL;
  guard_save sv;
  memset(&rs, 0, sizeof rs);
  luaL_checktype(L, 5, LUA_TTABLE);
  if (guard.depth > 0 || guard.searching)
    return luaL_error(L, "nd.search: a search or a policy hook is running; a policy hook cannot "
                         "start a search (one search at a time)");
  nd_read_costs(L, 6, &costs);
  /* a bad cost would refuse every candidate one by one: say it once, naming the field */
  if (nd_costs_validate(&costs, err, sizeof err) != 0) return luaL_error(L, "%s", err);
  lua_settop(L, 5);
  p = (nd_search_params *)lua_newuserdatauv(L, sizeof *p, 0);  /* 6: GC-owned */
  nd_search_params_init(p);
  read_space(L, 4, p);
  res = (results *)lua_newuserdatauv(L, sizeof *res, 2);       /* 7 */
  memset(res, 0, sizeof *res);
  luaL_setmetatable(L, RESULTS_MT);
  lua_pushvalue(L, 1); lua_setiuservalue(L, 7, 1);
  lua_pushvalue(L, 2); lua_setiuservalue(L, 7, 2);
  res->costs = costs;
  read_job(L, 3, &res->job);
  lua_getfield(L, 5, "budget");
  p->budget = res->budget = luaL_optnumber(L, -1, dev->hbm_bytes);
  if (!(p->budget > 0.0) || !isfinite(p->budget))  /* 0 would mean no budget to the core */
    return luaL_error(L, "budget: expected a finite number of bytes above 0, got %f", p->budget);
  lua_getfield(L, 5, "jobs");
  p->jobs = opt_int(L, "jobs", 1, 1, 256);
  lua_getfield(L, 5, "chunk");
  p->chunk = opt_int(L, "chunk", 0, 0, 1 << 24);
  lua_getfield(L, 5, "keep");
  keep = opt_int(L, "keep", 1000, 1, 10000000);
  lua_getfield(L, 5, "misses");
  keep_miss = opt_int(L, "misses", 5, 0, 1000);
  lua_getfield(L, 5, "progress");
  rs.progress = lua_toboolean(L, -1);
  lua_getfield(L, 5, "exhaustive");
  p->exhaustive = lua_toboolean(L, -1);
  lua_pop(L, 7);
  deadline = opt_limit(L, 5, "deadline");
  heap = opt_limit(L, 5, "heap");
  if (nd_search_results_init(&res->r, p, keep, keep_miss, MAX_POINTS) != 0)
    return luaL_error(L, "search: out of memory");
  nd_search_bounds_of(p, m, &res->job, &res->bounds);
  /* hooks and the slots the protected calls use: 8 msgh, 9 error, 10 admit, 11 objective */
  lua_pushcfunction(L, guard_msgh);
  rs.msgh_idx = lua_gettop(L);
  lua_pushnil(L);
  rs.err_idx = lua_gettop(L);
  if (lua_getfield(L, 5, "admit") == LUA_TFUNCTION) rs.admit_idx = lua_gettop(L);
  else if (!lua_isnil(L, -1)) return luaL_error(L, "admit: expected a function");
  if (lua_getfield(L, 5, "objective") == LUA_TFUNCTION) rs.objective_idx = lua_gettop(L);
  else if (!lua_isnil(L, -1)) return luaL_error(L, "objective: expected a function");
  if (lua_getfield(L, 5, "csv") == LUA_TSTRING) {
    const char *path = csv_path = lua_tostring(L, -1);  /* kept alive by opts at 5 */
    res->r.csv = fopen(path, "wb");
    if (!res->r.csv) return luaL_error(L, "%s: cannot open for writing", path);
    /* (megabytes of rows on a large search: 16 times fewer writes) */
    setvbuf(res->r.csv, res->csv_buffer, _IOFBF, sizeof res->csv_buffer);
    nd_search_csv_header(res->r.csv);  /* a failed write shows in ferror at the end */
  }
  lua_pop(L, 1);
  lua_getfield(L, 5, "csv_all");
  res->r.csv_all = lua_toboolean(L, -1);
  res->r.rank_by_time = rs.objective_idx == 0;
  lua_pop(L, 1);
  lua_getfield(L, 5, "all_misses");
  res->r.misses_exact = lua_toboolean(L, -1);
  lua_pop(L, 1);
  rs.L = L;
  rs.res = res;
  rs.t0 = now();
  memset(&hooks, 0, sizeof hooks);
  hooks.admit = rs.admit_idx ? admit_hook : NULL;
  hooks.deliver = deliver_hook;
  hooks.progress = progress_hook;
  hooks.cuts = cuts_hook;
  hooks.ud = &rs;
  hooks.price_equivalent = rs.objective_idx != 0;
  /* Ctrl-C and the deadline: the core checks the flag between candidates */
  res->p = *p;
  res->p.stop = NULL;
  p->stop = &interrupted;
  guard_enter(L, deadline, heap > 0.0 ? (heap < 1e18 ? (size_t)heap : (size_t)1 << 60) : 0, &sv);
  guard.searching = 1;
  status = nd_search_results_walk(&res->r, p, m, dev, &res->job, &costs, &hooks, &res->counts,
                                  err, sizeof err);
  guard.searching = 0;
  guard_leave(&sv);
  res->elapsed = now() - rs.t0;
  if (rs.progress) { fputs("\r\033[K", stderr); fflush(stderr); }
  if (res->r.csv) {
    int bad = ferror(res->r.csv), e;
    errno = 0;
    if (fclose(res->r.csv) != 0) bad = 1;
    e = errno;
    res->r.csv = NULL;
    if (rs.csv_failed) {  /* the walk stopped on the write error */
      status = ND_SEARCH_OK;
      bad = 1;
      if (rs.csv_failed > 0) e = rs.csv_failed;
    }
    if (bad && status == ND_SEARCH_OK)  /* the path and the reason (a full disk: ENOSPC) */
      return luaL_error(L, "%s: write failed%s%s", csv_path, e ? ": " : "", e ? strerror(e) : "");
  }
  switch (status) {
    case ND_SEARCH_OK: break;
    case ND_SEARCH_STOPPED:
      if (interrupted == 2) {
        char msg[64];
        snprintf(msg, sizeof msg, "timed out after %.3g s", res->elapsed);
        return luaL_error(L, "%s", msg);
      }
      return luaL_error(L, "interrupted");
    case ND_SEARCH_HOOK_ERROR:  /* {policy_error = message with traceback, hook = name} */
      lua_createtable(L, 0, 2);
      lua_pushvalue(L, rs.err_idx);
      lua_setfield(L, -2, "policy_error");
      lua_pushstring(L, rs.failed_hook ? rs.failed_hook : "objective");
      lua_setfield(L, -2, "hook");
      return lua_error(L);
    case ND_SEARCH_BAD_INPUT: return luaL_error(L, "search: %s", err);
    default: return luaL_error(L, "search: out of memory");
  }
  nd_search_results_finish(&res->r);
  {  /* what the object holds outside Lua's heap, for the collector's pace: without it the
        results of finished searches pile up uncollected (30 searches in one process, the
        bench, peaked at 13.7 MB, about 0.5 MB each) */
    size_t held = (size_t)(res->r.cap + res->r.keep_miss + 1) * sizeof(nd_search_row)
                + (size_t)res->r.point_cap * sizeof(nd_search_point);
    lua_gc(L, LUA_GCSTEP, (int)(held / 1024 < 1 << 20 ? held / 1024 : 1 << 20));
  }
  lua_pushvalue(L, 7);
  return 1;
}

/* bounds(model, job, space) -> {tp=, pp=, cp=, ep=, etp=, vpp=, mbs=, layers=} */
static int s_bounds (lua_State *L) {
  const nd_model_spec *m = nd_checkmodel(L, 1);
  nd_job job;
  nd_search_params *p;
  nd_search_bounds b;
  read_job(L, 2, &job);
  p = (nd_search_params *)lua_newuserdatauv(L, sizeof *p, 0);
  nd_search_params_init(p);
  read_space(L, 3, p);
  nd_search_bounds_of(p, m, &job, &b);
  lua_createtable(L, 0, 8);
  nd_setint(L, "tp", b.tp); nd_setint(L, "pp", b.pp); nd_setint(L, "cp", b.cp); nd_setint(L, "ep", b.ep);
  nd_setint(L, "etp", b.etp); nd_setint(L, "vpp", b.vpp); nd_setint(L, "mbs", b.mbs);
  nd_setint(L, "layers", b.layers);
  return 1;
}

/* pinned(model, job, space) -> nil when the pinned values can be walked, else the refusal
   label and the rule (nd_search_pinned_check) */
static int s_pinned (lua_State *L) {
  const nd_model_spec *m = nd_checkmodel(L, 1);
  nd_job job;
  nd_search_params *p;
  char err[256];
  int r;
  read_job(L, 2, &job);
  p = (nd_search_params *)lua_newuserdatauv(L, sizeof *p, 0);
  nd_search_params_init(p);
  read_space(L, 3, p);
  r = nd_search_pinned_check(p, m, &job, err, sizeof err);
  if (r < 0) { lua_pushnil(L); return 1; }
  lua_pushstring(L, nd_refusal_label((nd_refusal)r));
  lua_pushstring(L, err);
  return 2;
}

/* stderr_is_terminal() -> whether a progress line belongs on stderr */
static int s_stderr_is_terminal (lua_State *L) {
  lua_pushboolean(L, isatty(2));
  return 1;
}

/* time_parts() -> the names of the step-time parts, in the estimator's order */
static int s_time_parts (lua_State *L) {
  int i;
  lua_createtable(L, ND_T_COUNT, 0);
  for (i = 0; i < ND_T_COUNT; i++) {
    lua_pushstring(L, nd_time_part_name(i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* cores() -> the processors this process may run on (the default of -j) */
static int s_cores (lua_State *L) {
  lua_pushinteger(L, nd_search_processors());
  return 1;
}

static const luaL_Reg res_methods[] = {
  {"info", res_info},
  {"misses", res_misses},
  {"fallback", res_fallback},
  {"points", res_points},
  {"detail", res_detail},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"run", s_run},
  {"bounds", s_bounds},
  {"pinned", s_pinned},
  {"stderr_is_terminal", s_stderr_is_terminal},
  {"cores", s_cores},
  {"time_parts", s_time_parts},
  {"guard", s_guard},
  {"tripped", s_tripped},
  {"busy", s_busy},
  {"clock", s_clock},
  {"heap_bytes", s_heap_bytes},
  {NULL, NULL}
};

int luaopen_ndplan_search (lua_State *L) {
  if (luaL_newmetatable(L, RESULTS_MT)) {
    lua_pushcfunction(L, res_gc); lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, res_len); lua_setfield(L, -2, "__len");
    lua_pushcfunction(L, res_index); lua_setfield(L, -2, "__index");
    luaL_newlib(L, res_methods); lua_setfield(L, -2, "methods");
    lua_pushliteral(L, RESULTS_MT); lua_setfield(L, -2, "__metatable");  /* getmetatable's answer */
  }
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
