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
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>

#include "ndplan/search.h"
#include "ndplan/ndplan_lua.h"
#include "ldevice.h"
#include "lestimate.h"
#include "lmodel.h"

#define RESULTS_MT "ndplan.search.results"

static const char *const mem_part_names[6] = {"weights", "grads", "optimizer", "activations",
                                              "buffers", "reserve"};

/* What the search keeps; a userdata so a raise at any point frees it (__gc). */
typedef struct results {
  nd_search_row *best;        /* sorted after the run; up to keep (2*keep while running) */
  int nbest, keep, cap;
  nd_search_row *miss;        /* least over the budget, sorted by over */
  int nmiss, keep_miss;
  nd_search_row fallback;     /* best row the post-filter removed */
  int has_fallback;
  unsigned long long postfiltered, dropped;
  FILE *csv;
  nd_search_counts counts;
  nd_search_bounds bounds;
  nd_job job;
  double budget;
  double elapsed;             /* wall seconds of the walk and pricing */
} results;

/* State of one run, reachable from the core's hooks. */
typedef struct run_state {
  lua_State *L;
  results *res;
  int admit_idx, objective_idx, msgh_idx, err_idx;  /* stack slots; 0 = absent */
  nd_dim_set post_dp, post_mb;
  int progress;
  double t0, last_print, best_key;
} run_state;

static volatile sig_atomic_t interrupted;  /* 1: Ctrl-C, 2: --timeout */
static lua_State *volatile running_L;      /* the state running policy hooks */
static double deadline;                    /* now() past which the search stops; 0: none */

/* Stops Lua code a policy is running (an endless loop in a hook) with an error. */
static void stop_hook (lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, interrupted == 2 ? "timed out" : "interrupted");
}

/* Ctrl-C: the core checks the flag between candidates, Lua code at its next instruction
   (lua_sethook is safe in a signal handler; Lua's own lua.c does the same). */
static void on_sigint (int sig) {
  (void)sig;
  interrupted = 1;
  if (running_L) lua_sethook(running_L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

static double now (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
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
      luaL_error(L, "recompute: expected off, none, selective, full, per_layer, megatron or auto, got %s",
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

static void read_space (lua_State *L, int t, nd_search_params *p) {
  int d;
  luaL_checktype(L, t, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, t)) {  /* unknown keys are misuse */
    const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
    int known = strcmp(key, "schedule") == 0 || strcmp(key, "precision") == 0
             || strcmp(key, "flash_attention") == 0;
    for (d = 0; d < ND_DIM_COUNT && !known; d++) known = strcmp(key, nd_dim_name(d)) == 0;
    if (!known) luaL_error(L, "space: unknown field '%s'", key);
    lua_pop(L, 1);
  }
  for (d = 0; d < ND_DIM_COUNT; d++) read_dim(L, t, (nd_dim)d, &p->dim[d]);
  if (lua_getfield(L, t, "schedule") != LUA_TNIL
      && nd_schedule_parse(luaL_checkstring(L, -1), &p->base.schedule) != 0)
    luaL_error(L, "schedule: expected 1f1b, interleaved, gpipe or zb, got '%s'",
               lua_tostring(L, -1));
  lua_pop(L, 1);
  if (lua_getfield(L, t, "precision") != LUA_TNIL
      && nd_precision_parse(luaL_checkstring(L, -1), &p->base.precision) != 0)
    luaL_error(L, "precision: expected bf16, fp16 or fp8, got '%s'", lua_tostring(L, -1));
  lua_pop(L, 1);
  if (lua_getfield(L, t, "flash_attention") != LUA_TNIL)
    p->base.flash_attention = lua_toboolean(L, -1);
  lua_pop(L, 1);
}

static void read_job (lua_State *L, int t, nd_job *job) {
  luaL_checktype(L, t, LUA_TTABLE);
  lua_getfield(L, t, "devices");
  job->devices = (int)luaL_checkinteger(L, -1);
  lua_getfield(L, t, "seq_len");
  job->seq_len = (int)luaL_checkinteger(L, -1);
  lua_getfield(L, t, "global_batch");
  job->global_batch = (long long)luaL_checkinteger(L, -1);
  lua_pop(L, 3);
  if (job->devices < 1 || job->seq_len < 1 || job->global_batch < 1)
    luaL_error(L, "job: devices, seq_len and global_batch must be positive");
}

/* ---- rows as Lua tables ---------------------------------------------------------- */

/* The candidate as a strategy table (the fields of nd.estimate's result.strategy). */
static void push_candidate (lua_State *L, const nd_candidate *c, const nd_strategy *base) {
  lua_createtable(L, 0, 16);
  nd_setint(L, "dp", c->dp); nd_setint(L, "tp", c->tp); nd_setint(L, "pp", c->pp);
  nd_setint(L, "vpp", c->vpp); nd_setint(L, "cp", c->cp); nd_setint(L, "ep", c->ep);
  nd_setint(L, "etp", c->etp); nd_setint(L, "zero", c->zero);
  nd_setint(L, "mbs", c->mbs); nd_setint(L, "mb", c->mb);
  lua_pushboolean(L, c->sp); lua_setfield(L, -2, "sp");
  lua_pushstring(L, nd_search_recompute_name(c->recompute));
  lua_setfield(L, -2, "recompute");
  if (base) {
    lua_pushstring(L, nd_schedule_name(c->vpp > 1 ? ND_SCHED_INTERLEAVED
                                       : base->schedule == ND_SCHED_INTERLEAVED
                                       ? ND_SCHED_1F1B : base->schedule));
    lua_setfield(L, -2, "schedule");
    lua_pushstring(L, nd_precision_name(base->precision));
    lua_setfield(L, -2, "precision");
    lua_pushboolean(L, base->flash_attention);
    lua_setfield(L, -2, "flash_attention");
  }
}

static void push_row (lua_State *L, const nd_search_row *r, const results *res,
                      const nd_strategy *base) {
  int i;
  lua_createtable(L, 0, 20);
  push_candidate(L, &r->c, base);
  lua_setfield(L, -2, "strategy");
  nd_setint(L, "index", (lua_Integer)r->index + 1);
  nd_setnum(L, "step_time_s", r->step_time);
  nd_setnum(L, "tokens_per_s", r->tokens_per_s);
  nd_setnum(L, "mfu", r->mfu);
  nd_setnum(L, "hfu", r->hfu);
  nd_setnum(L, "peak_memory_bytes", r->peak);
  nd_setint(L, "heaviest_stage", r->heaviest);
  nd_setint(L, "stages", r->stages);
  nd_setnum(L, "budget_bytes", res->budget);
  lua_pushboolean(L, r->fits); lua_setfield(L, -2, "fits");
  nd_setnum(L, "over_bytes", r->over);
  nd_setnum(L, "objective", r->key);
  lua_createtable(L, 0, 7);
  for (i = 0; i < 6; i++) nd_setnum(L, mem_part_names[i], r->mem[i]);
  nd_setnum(L, "peak", r->peak);
  lua_setfield(L, -2, "memory_parts_bytes");
  lua_createtable(L, 0, ND_T_COUNT);
  for (i = 0; i < ND_T_COUNT; i++) nd_setnum(L, nd_time_part_name(i), r->time_parts[i]);
  lua_setfield(L, -2, "time_parts_s");
}

/* ---- keeping the best ------------------------------------------------------------ */

/* Ranking order: objective, then peak memory, then walk order (a total order). */
static int cmp_best (const void *a, const void *b) {
  const nd_search_row *x = (const nd_search_row *)a, *y = (const nd_search_row *)b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  if (x->peak != y->peak) return x->peak < y->peak ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

static int cmp_miss (const void *a, const void *b) {
  const nd_search_row *x = (const nd_search_row *)a, *y = (const nd_search_row *)b;
  if (x->over != y->over) return x->over < y->over ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

static void keep_best (results *res, const nd_search_row *r) {
  if (res->nbest == res->cap) {  /* full: keep the best half, which is `keep` rows */
    qsort(res->best, (size_t)res->nbest, sizeof *res->best, cmp_best);
    res->nbest = res->keep;
  }
  res->best[res->nbest++] = *r;
}

static void keep_miss (results *res, const nd_search_row *r) {
  int i;
  if (res->keep_miss == 0) return;
  if (res->nmiss == res->keep_miss && cmp_miss(r, &res->miss[res->nmiss - 1]) >= 0) return;
  if (res->nmiss < res->keep_miss) res->nmiss++;
  for (i = res->nmiss - 1; i > 0 && cmp_miss(r, &res->miss[i - 1]) < 0; i--)
    res->miss[i] = res->miss[i - 1];
  res->miss[i] = *r;
}

/* ---- the hooks the core calls ---------------------------------------------------- */

/* Calls the function at stack slot fn with the table on top; 0 and the result on top, or
   -1 with the error (with traceback) stored in the error slot. */
static int protected_call (run_state *rs, int fn) {
  lua_State *L = rs->L;
  lua_pushvalue(L, fn);
  lua_insert(L, -2);
  if (lua_pcall(L, 1, 1, rs->msgh_idx) != LUA_OK) {
    lua_replace(L, rs->err_idx);
    return -1;
  }
  return 0;
}

static int admit_hook (void *ud, const nd_candidate *c, int *keep) {
  run_state *rs = (run_state *)ud;
  push_candidate(rs->L, c, NULL);
  if (protected_call(rs, rs->admit_idx) != 0) return -1;
  *keep = lua_toboolean(rs->L, -1);
  lua_pop(rs->L, 1);
  return 0;
}

/* objective(row) -> number (lower is better) or nil to drop. */
static int objective_of (run_state *rs, nd_search_row *r, int *drop) {
  lua_State *L = rs->L;
  *drop = 0;
  if (!rs->objective_idx) return 0;
  push_row(L, r, rs->res, NULL);
  if (protected_call(rs, rs->objective_idx) != 0) return -1;
  if (lua_isnil(L, -1) || (lua_isboolean(L, -1) && !lua_toboolean(L, -1))) *drop = 1;
  else if (!lua_isnumber(L, -1)) {
    lua_pushfstring(L, "objective: expected a number or nil, got %s", luaL_typename(L, -1));
    lua_replace(L, rs->err_idx);
    lua_pop(L, 1);
    return -1;
  }
  else r->key = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return 0;
}

static void write_csv_row (FILE *f, const nd_search_row *r) {
  const nd_candidate *c = &r->c;
  int i;
  fprintf(f, "%llu,%d,%d,%d,%d,%d,%d,%d,%s,%d,%d,%d,%s,%.9g,%.6g,%.6g,%.0f,%d,%s,%.0f",
          r->index + 1, c->dp, c->tp, c->pp, c->vpp, c->cp, c->ep, c->etp,
          c->sp ? "true" : "false", c->zero, c->mbs, c->mb,
          nd_search_recompute_name(c->recompute), r->step_time, r->tokens_per_s,
          r->mfu, r->peak, r->heaviest, r->fits ? "true" : "false", r->over);
  for (i = 0; i < 6; i++) fprintf(f, ",%.0f", r->mem[i]);
  for (i = 0; i < ND_T_COUNT; i++) fprintf(f, ",%.9g", r->time_parts[i]);
  fputc('\n', f);
}

static int deliver_hook (void *ud, nd_search_row *rows, int n) {
  run_state *rs = (run_state *)ud;
  results *res = rs->res;
  int i;
  for (i = 0; i < n; i++) {
    nd_search_row *r = &rows[i];
    int drop;
    if (res->csv) write_csv_row(res->csv, r);
    if (!r->fits) { keep_miss(res, r); continue; }
    if (objective_of(rs, r, &drop) != 0) return -1;
    if (drop) { res->dropped++; continue; }
    /* post-filter: DP and MB are derived by the loops; their lists apply to the results */
    if (!(rs->post_dp.is_auto || bsearch(&r->c.dp, rs->post_dp.v, (size_t)rs->post_dp.n,
                                         sizeof(int), cmp_int))
        || !(rs->post_mb.is_auto || bsearch(&r->c.mb, rs->post_mb.v, (size_t)rs->post_mb.n,
                                            sizeof(int), cmp_int))) {
      res->postfiltered++;
      if (!res->has_fallback || cmp_best(r, &res->fallback) < 0) {
        res->fallback = *r;
        res->has_fallback = 1;
      }
      continue;
    }
    keep_best(res, r);
    if (r->key < rs->best_key) rs->best_key = r->key;
  }
  return 0;
}

/* A progress line on stderr, at most ten times a second (only when asked: a terminal). */
/* --timeout inside Lua hooks: checked every few thousand instructions. */
static void deadline_hook (lua_State *L, lua_Debug *ar) {
  (void)ar;
  if (deadline > 0.0 && now() > deadline) {
    interrupted = 2;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "timed out");
  }
}

static int progress_hook (void *ud, const nd_search_counts *c) {
  run_state *rs = (run_state *)ud;
  double t = now();
  if (deadline > 0.0 && t > deadline) interrupted = 2;  /* the core stops within a chunk */
  if (!rs->progress || t - rs->last_print < 0.1) return 0;
  rs->last_print = t;
  if (rs->best_key < HUGE_VAL)  /* the default objective is the step time */
    fprintf(stderr, "\r\033[K%llu candidates, %llu priced, %llu fit, best %.4g%s, %.1f s",
            c->tested, c->priced, c->fit, rs->best_key, rs->objective_idx ? "" : " s/step",
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

static int res_gc (lua_State *L) {
  results *res = check_results(L, 1);
  free(res->best); res->best = NULL;
  free(res->miss); res->miss = NULL;
  if (res->csv) { fclose(res->csv); res->csv = NULL; }
  return 0;
}

static int res_len (lua_State *L) {
  lua_pushinteger(L, check_results(L, 1)->nbest);
  return 1;
}

/* results[i] -> row table (1-based, ranked); results.method -> the method */
static int res_index (lua_State *L) {
  results *res = check_results(L, 1);
  if (lua_isinteger(L, 2)) {
    lua_Integer i = lua_tointeger(L, 2);
    if (i < 1 || i > res->nbest) return 0;
    push_row(L, &res->best[i - 1], res, NULL);
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
  lua_createtable(L, res->nmiss, 0);
  for (i = 0; i < res->nmiss; i++) {
    push_row(L, &res->miss[i], res, NULL);
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
  nd_setint(L, "dropped", (lua_Integer)res->dropped);
  nd_setint(L, "postfiltered", (lua_Integer)res->postfiltered);
  nd_setint(L, "kept", res->nbest);
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

/* results:fallback() -> the best row the post-filter removed, or nil */
static int res_fallback (lua_State *L) {
  results *res = check_results(L, 1);
  if (!res->has_fallback) return 0;
  push_row(L, &res->fallback, res, NULL);
  return 1;
}

static const char *const csv_header =
  "index,dp,tp,pp,vpp,cp,ep,etp,sp,zero,mbs,mb,recompute,step_time_s,tokens_per_s,mfu,"
  "peak_memory_bytes,heaviest_stage,fits,over_bytes,weights,grads,optimizer,activations,"
  "buffers,reserve";

/*
** run(model, device, job, space, opts [, costs]) -> results
** opts = {budget = bytes, jobs = n, chunk = n, keep = n, misses = n, csv = path,
**         progress = bool, admit = fn, objective = fn}
** Raises on misuse, on a policy hook's error (with its traceback) and on Ctrl-C
** ("interrupted"); the CSV is closed either way (the caller renames or removes it).
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
  int status, i;
  struct sigaction sa, old;
  memset(&rs, 0, sizeof rs);
  luaL_checktype(L, 5, LUA_TTABLE);
  nd_read_costs(L, 6, &costs);
  /* a bad cost would refuse every candidate one by one: say it once, naming the field */
  if (nd_costs_validate(&costs, err, sizeof err) != 0) return luaL_error(L, "%s", err);
  lua_settop(L, 5);
  p = (nd_search_params *)lua_newuserdatauv(L, sizeof *p, 0);  /* 6: GC-owned */
  nd_search_params_init(p);
  read_space(L, 4, p);
  res = (results *)lua_newuserdatauv(L, sizeof *res, 0);       /* 7 */
  memset(res, 0, sizeof *res);
  luaL_setmetatable(L, RESULTS_MT);
  read_job(L, 3, &res->job);
  lua_getfield(L, 5, "budget");
  p->budget = res->budget = luaL_optnumber(L, -1, dev->hbm_bytes);
  lua_getfield(L, 5, "jobs");
  p->jobs = (int)luaL_optinteger(L, -1, 1);
  lua_getfield(L, 5, "chunk");
  p->chunk = (int)luaL_optinteger(L, -1, 0);
  lua_getfield(L, 5, "keep");
  res->keep = (int)luaL_optinteger(L, -1, 1000);
  lua_getfield(L, 5, "misses");
  res->keep_miss = (int)luaL_optinteger(L, -1, 5);
  lua_getfield(L, 5, "progress");
  rs.progress = lua_toboolean(L, -1);
  lua_getfield(L, 5, "timeout");
  {
    double timeout = luaL_optnumber(L, -1, 0.0);
    if (!(timeout >= 0.0)) luaL_error(L, "timeout: expected seconds >= 0");
    deadline = timeout > 0.0 ? now() + timeout : 0.0;
  }
  lua_pop(L, 7);
  if (p->jobs < 1 || p->jobs > 256) luaL_error(L, "jobs: expected 1 to 256, got %d", p->jobs);
  if (res->keep < 1 || res->keep > 10000000) luaL_error(L, "keep: expected 1 to 10000000");
  if (res->keep_miss < 0 || res->keep_miss > 1000) luaL_error(L, "misses: expected 0 to 1000");
  res->cap = 2 * res->keep;
  res->best = (nd_search_row *)malloc((size_t)res->cap * sizeof *res->best);
  res->miss = (nd_search_row *)malloc((size_t)(res->keep_miss + 1) * sizeof *res->miss);
  if (!res->best || !res->miss) return luaL_error(L, "search: out of memory");
  nd_search_bounds_of(p, m, &res->job, &res->bounds);
  /* post-filter lists (DP and MB are derived by the loops) */
  rs.post_dp = p->dim[ND_DIM_DP];
  rs.post_mb = p->dim[ND_DIM_MB];
  /* hooks and the slots the protected calls use: 8 msgh, 9 error, 10 admit, 11 objective */
  lua_getglobal(L, "debug");
  lua_getfield(L, -1, "traceback");
  lua_remove(L, -2);
  rs.msgh_idx = lua_gettop(L);
  lua_pushnil(L);
  rs.err_idx = lua_gettop(L);
  if (lua_getfield(L, 5, "admit") == LUA_TFUNCTION) rs.admit_idx = lua_gettop(L);
  else if (!lua_isnil(L, -1)) return luaL_error(L, "admit: expected a function");
  if (lua_getfield(L, 5, "objective") == LUA_TFUNCTION) rs.objective_idx = lua_gettop(L);
  else if (!lua_isnil(L, -1)) return luaL_error(L, "objective: expected a function");
  if (lua_getfield(L, 5, "csv") == LUA_TSTRING) {
    const char *path = lua_tostring(L, -1);
    res->csv = fopen(path, "wb");
    if (!res->csv) return luaL_error(L, "%s: cannot open for writing", path);
    fputs(csv_header, res->csv);
    for (i = 0; i < ND_T_COUNT; i++) fprintf(res->csv, ",%s_s", nd_time_part_name(i));
    fputc('\n', res->csv);
  }
  lua_pop(L, 1);
  rs.L = L;
  rs.res = res;
  rs.t0 = now();
  rs.best_key = HUGE_VAL;
  memset(&hooks, 0, sizeof hooks);
  hooks.admit = rs.admit_idx ? admit_hook : NULL;
  hooks.deliver = deliver_hook;
  hooks.progress = progress_hook;
  hooks.ud = &rs;
  hooks.price_equivalent = rs.objective_idx != 0;
  /* Ctrl-C: the core checks the flag between candidates; the old handler comes back */
  interrupted = 0;
  p->stop = &interrupted;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old);
  running_L = L;
  if (deadline > 0.0) lua_sethook(L, deadline_hook, LUA_MASKCOUNT, 10000);
  status = nd_search_run(p, m, dev, &res->job, &costs, &hooks, &res->counts, err, sizeof err);
  lua_sethook(L, NULL, 0, 0);
  running_L = NULL;
  sigaction(SIGINT, &old, NULL);
  res->elapsed = now() - rs.t0;
  if (rs.progress) { fputs("\r\033[K", stderr); fflush(stderr); }
  if (res->csv) {
    int bad = ferror(res->csv);
    if (fclose(res->csv) != 0) bad = 1;
    res->csv = NULL;
    if (bad && status == ND_SEARCH_OK) return luaL_error(L, "results.csv: write failed");
  }
  switch (status) {
    case ND_SEARCH_OK: break;
    case ND_SEARCH_STOPPED:
      if (interrupted == 2) return luaL_error(L, "timed out after %f s", deadline - rs.t0);
      return luaL_error(L, "interrupted");
    case ND_SEARCH_HOOK_ERROR:  /* {policy_error = message with traceback} */
      lua_createtable(L, 0, 1);
      lua_pushvalue(L, rs.err_idx);
      lua_setfield(L, -2, "policy_error");
      return lua_error(L);
    case ND_SEARCH_BAD_INPUT: return luaL_error(L, "search: %s", err);
    default: return luaL_error(L, "search: out of memory");
  }
  qsort(res->best, (size_t)res->nbest, sizeof *res->best, cmp_best);
  if (res->nbest > res->keep) res->nbest = res->keep;
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

/* cores() -> the processors online (the default of -j) */
static int s_cores (lua_State *L) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  lua_pushinteger(L, n > 0 ? n : 1);
  return 1;
}

static const luaL_Reg res_methods[] = {
  {"info", res_info},
  {"misses", res_misses},
  {"fallback", res_fallback},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"run", s_run},
  {"bounds", s_bounds},
  {"pinned", s_pinned},
  {"stderr_is_terminal", s_stderr_is_terminal},
  {"cores", s_cores},
  {"time_parts", s_time_parts},
  {NULL, NULL}
};

int luaopen_ndplan_search (lua_State *L) {
  if (luaL_newmetatable(L, RESULTS_MT)) {
    lua_pushcfunction(L, res_gc); lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, res_len); lua_setfield(L, -2, "__len");
    lua_pushcfunction(L, res_index); lua_setfield(L, -2, "__index");
    luaL_newlib(L, res_methods); lua_setfield(L, -2, "methods");
  }
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
