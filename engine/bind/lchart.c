/*
** lchart.c -- Lua binding ndplan.c.chart: the per-point work of the charts. A search hands
** the candidates chart thousands of points; in Lua each cost a dozen table reads, a hash
** key and a closure call or two. The rules, which live here only:
**   an axis's map: linear, r0 + (v - d0) / (d1 - d0) * (r1 - r0) (an empty domain read as
**   one wide); log, the same over log10 of the domain;
**   the Pareto front of fitting points: sorted by (memory, step time, input order), a point
**   is on it when it is faster than every point before it;
**   the candidates chart's selection: the drawable points, their counts, the window around
**   the fitting ones, and the thinning past the cap (the front kept whole);
**   a dot's place: the half pixel nearest its map, floor(2 * map + 0.5) / 2, a dot drawn
**   once per half pixel and group.
** Figures are read as doubles: a column holds numbers (or anything else, not drawn).
*/
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "ndplan_lua.h"

/* ------------------------------------------------------------------------------------ */
/* Scales                                                                               */
/* ------------------------------------------------------------------------------------ */

typedef struct scale {
  int is_log;
  double d0, span, r0, r1;  /* a log scale's d0 and span: over log10 of the domain */
} scale;

static double scale_apply (const scale *s, double v) {
  if (s->is_log) v = log10(v);
  return s->r0 + (v - s->d0) / s->span * (s->r1 - s->r0);
}

static int map_linear (lua_State *L);
static int map_log (lua_State *L);

/* The scale the closure at idx was made with (by scale or log_scale), or raises. */
static void scale_at (lua_State *L, int idx, const char *what, scale *s) {
  lua_CFunction fn = lua_tocfunction(L, idx);
  double *p = NULL;
  if (fn == map_linear || fn == map_log) {
    lua_getupvalue(L, idx, 1);
    p = (double *)lua_touserdata(L, -1);
    lua_pop(L, 1);  /* the closure holds it */
  }
  if (!p) luaL_error(L, "chart: %s: expected a scale of ndplan.c.chart", what);
  s->is_log = fn == map_log;
  s->d0 = p[0]; s->span = p[1]; s->r0 = p[2]; s->r1 = p[3];
}

static int map_any (lua_State *L, int is_log) {
  scale s;
  const double *p = (const double *)lua_touserdata(L, lua_upvalueindex(1));
  s.is_log = is_log;
  s.d0 = p[0]; s.span = p[1]; s.r0 = p[2]; s.r1 = p[3];
  lua_pushnumber(L, scale_apply(&s, luaL_checknumber(L, 1)));
  return 1;
}

static int map_linear (lua_State *L) { return map_any(L, 0); }
static int map_log (lua_State *L) { return map_any(L, 1); }

static int make_scale (lua_State *L, int is_log) {
  double d0 = luaL_checknumber(L, 1), d1 = luaL_checknumber(L, 2);
  double r0 = luaL_checknumber(L, 3), r1 = luaL_checknumber(L, 4);
  double *p;
  if (is_log) {
    luaL_argcheck(L, d0 > 0, 1, "a log domain must be above 0");
    luaL_argcheck(L, d1 > 0, 2, "a log domain must be above 0");
    d0 = log10(d0);
    d1 = log10(d1);
    if (d1 == d0) d1 = d0 + 1;  /* one decade wide; the span as its map divides by it */
  }
  p = (double *)lua_newuserdatauv(L, 4 * sizeof(double), 0);
  p[0] = d0;
  p[1] = d1 - d0;
  if (p[1] == 0) p[1] = 1;
  p[2] = r0;
  p[3] = r1;
  lua_pushcclosure(L, is_log ? map_log : map_linear, 1);
  return 1;
}

/* scale(d0, d1, r0, r1) -> map: v -> its place on [r0, r1] as [d0, d1] maps onto it */
static int c_scale (lua_State *L) { return make_scale(L, 0); }

/* log_scale(d0, d1, r0, r1) -> map over log10 (d0, d1 above 0) */
static int c_log_scale (lua_State *L) { return make_scale(L, 1); }

/* ------------------------------------------------------------------------------------ */
/* Points and their Pareto front                                                        */
/* ------------------------------------------------------------------------------------ */

typedef struct point {
  double t, m;       /* step time, memory */
  lua_Integer i;     /* index in the columns */
  int fits, ranked, front;
} point;

/* Memory as an array of n items of size each, anchored on the stack (freed by the GC). */
static void *scratch (lua_State *L, size_t n, size_t size) {
  if (n > ((size_t)-1) / 4 / size) luaL_error(L, "chart: too many points");
  return lua_newuserdatauv(L, n ? n * size : 1, 0);
}

/* The finite figure at column[i], into *x; 0 if it is no number or not finite. */
static int figure (lua_State *L, int column, lua_Integer i, double *x) {
  int ok = lua_rawgeti(L, column, i) == LUA_TNUMBER;
  if (ok) {
    *x = (double)lua_tonumber(L, -1);
    ok = isfinite(*x);
  }
  lua_pop(L, 1);
  return ok;
}

static int truthy (lua_State *L, int column, lua_Integer i) {
  int b;
  if (!column) return 0;
  lua_rawgeti(L, column, i);
  b = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return b;
}

/* Reads points 1 .. n of the columns (ranked: 0 for none) whose two figures are finite (and
   the step time above 0 when positive) into pts, in order. -> how many. */
static int read_points (lua_State *L, int ct, int cm, int cf, int cr, lua_Integer n,
                        int positive, point *pts) {
  lua_Integer i;
  int k = 0;
  for (i = 1; i <= n; i++) {
    point *p = &pts[k];
    if (!figure(L, ct, i, &p->t) || !figure(L, cm, i, &p->m) || (positive && !(p->t > 0)))
      continue;
    p->i = i;
    p->fits = truthy(L, cf, i);
    p->ranked = truthy(L, cr, i);
    p->front = 0;
    k++;
  }
  return k;
}

typedef struct key { double m, t; int at; } key;

static int key_order (const void *pa, const void *pb) {
  const key *a = (const key *)pa, *b = (const key *)pb;
  if (a->m != b->m) return a->m < b->m ? -1 : 1;
  if (a->t != b->t) return a->t < b->t ? -1 : 1;
  return (a->at > b->at) - (a->at < b->at);
}

/* Marks the front of the fitting points of pts[0 .. n) and lists their positions in out[],
   by ascending memory (so descending step time). -> how many. */
static int front_of (lua_State *L, point *pts, int n, int *out) {
  key *keys = (key *)scratch(L, (size_t)n, sizeof(key));
  int j, k = 0, nf = 0;
  double best = HUGE_VAL;
  for (j = 0; j < n; j++) {
    if (!pts[j].fits) continue;
    keys[k].m = pts[j].m;
    keys[k].t = pts[j].t;
    keys[k].at = j;
    k++;
  }
  qsort(keys, (size_t)k, sizeof(key), key_order);
  for (j = 0; j < k; j++) {
    if (keys[j].t < best) {
      best = keys[j].t;
      pts[keys[j].at].front = 1;
      out[nf++] = keys[j].at;
    }
  }
  lua_pop(L, 1);
  return nf;
}

static lua_Integer count_arg (lua_State *L, int arg) {
  lua_Integer n = luaL_checkinteger(L, arg);
  luaL_argcheck(L, n >= 0, arg, "a count must not be negative");
  return n;
}

/* A count of points: the positions are ints. */
static lua_Integer points_arg (lua_State *L, int arg) {
  lua_Integer n = count_arg(L, arg);
  luaL_argcheck(L, n <= INT_MAX / 2, arg, "too many points");
  return n;
}

/* The positions at[0 .. n) of pts as a new array of their column indices. */
static void push_indices (lua_State *L, const point *pts, const int *at, int n) {
  int j;
  lua_createtable(L, n, 0);
  for (j = 0; j < n; j++) {
    lua_pushinteger(L, pts[at[j]].i);
    lua_rawseti(L, -2, j + 1);
  }
}

/* front(t, m, fits, n) -> the indices (1 .. n) of the Pareto front of the fitting points
   whose figures are finite, by ascending memory */
static int c_front (lua_State *L) {
  lua_Integer n;
  point *pts;
  int *at, k, nf;
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TTABLE);
  n = points_arg(L, 4);
  lua_settop(L, 4);
  pts = (point *)scratch(L, (size_t)n, sizeof(point));
  at = (int *)scratch(L, (size_t)n, sizeof(int));
  k = read_points(L, 1, 2, 3, 0, n, 0, pts);
  nf = front_of(L, pts, k, at);
  push_indices(L, pts, at, nf);
  return 1;
}

/* ------------------------------------------------------------------------------------ */
/* The candidates chart's selection                                                     */
/* ------------------------------------------------------------------------------------ */

static void set_number (lua_State *L, const char *name, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, name);
}

static void set_integer (lua_State *L, const char *name, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, name);
}

/* Keeps the points of pts[0 .. *n) within the window around the fitting ones: up to 1.5
   times the slowest of them (at least 1.1 times the fastest) and 1.15 times the heaviest
   (or the budget). -> those outside, not counting ranked ones (a ranked result is also a
   priced candidate). */
static lua_Integer window (point *pts, int *n, double budget) {
  double t_lo = HUGE_VAL, t_hi = 0, m_hi = budget;
  lua_Integer outside = 0;
  int j, k = 0, fits = 0;
  for (j = 0; j < *n; j++) {
    const point *p = &pts[j];
    if (!p->fits) continue;
    fits++;
    if (p->t < t_lo) t_lo = p->t;
    if (p->t > t_hi) t_hi = p->t;
    if (p->m > m_hi) m_hi = p->m;
  }
  if (fits == 0) return 0;  /* nothing to frame: every point drawn */
  t_hi = t_hi * 1.5 < t_lo * 1.1 ? t_lo * 1.1 : t_hi * 1.5;
  m_hi = m_hi * 1.15;
  for (j = 0; j < *n; j++) {
    if (pts[j].t <= t_hi && pts[j].m <= m_hi) pts[k++] = pts[j];
    else if (!pts[j].ranked) outside++;
  }
  *n = k;
  return outside;
}

/*
** candidates(t, m, fits, ranked, n, budget, cap) -> the candidates chart's points: t, m,
** fits and ranked columns (indexed 1 .. n; ranked marks results also counted among the
** candidates), budget (bytes, or nil), cap (dots drawn at most, the front besides). ->
** {counted, fit_count (the distinct candidates), outside (not drawn: far from the fitting
** ones), drawn (in the window), shown (dots drawn, front included), stride (1 in stride of
** the rest past the cap), tmin, tmax, mmax (the window's span, with the budget; 1, 10, the
** budget when empty), front = {indices by ascending memory}, dots = {indices of the other
** points drawn, in order}}
*/
static int c_candidates (lua_State *L) {
  lua_Integer n, cap, counted = 0, fit_count = 0, outside, stride = 1;
  double budget, tmin = HUGE_VAL, tmax = 0, mmax;
  point *pts;
  int *at, k, j, nf, nd = 0;
  for (j = 1; j <= 4; j++) luaL_checktype(L, j, LUA_TTABLE);
  n = points_arg(L, 5);
  budget = lua_isnoneornil(L, 6) ? 0 : luaL_checknumber(L, 6);
  cap = count_arg(L, 7);
  lua_settop(L, 7);
  pts = (point *)scratch(L, (size_t)n, sizeof(point));
  at = (int *)scratch(L, (size_t)n, sizeof(int));
  k = read_points(L, 1, 2, 3, 4, n, 1, pts);
  for (j = 0; j < k; j++) {
    if (pts[j].ranked) continue;
    counted++;
    fit_count += pts[j].fits;
  }
  outside = window(pts, &k, budget);
  nf = front_of(L, pts, k, at);
  mmax = budget;
  for (j = 0; j < k; j++) {
    if (pts[j].t < tmin) tmin = pts[j].t;
    if (pts[j].t > tmax) tmax = pts[j].t;
    if (pts[j].m > mmax) mmax = pts[j].m;
  }
  if (k == 0) { tmin = 1; tmax = 10; }
  if (k > cap) {
    lua_Integer den = cap - nf > 1 ? cap - nf : 1;
    stride = (lua_Integer)ceil((double)(k - nf) / (double)den);
  }
  lua_createtable(L, 0, 11);
  push_indices(L, pts, at, nf);
  lua_setfield(L, -2, "front");
  lua_createtable(L, k - nf < 0 ? 0 : k - nf, 0);
  {
    lua_Integer other = 0;
    for (j = 0; j < k; j++) {
      if (pts[j].front) continue;
      if (other++ % stride == 0) {
        lua_pushinteger(L, pts[j].i);
        lua_rawseti(L, -2, ++nd);
      }
    }
  }
  lua_setfield(L, -2, "dots");
  set_integer(L, "counted", counted);
  set_integer(L, "fit_count", fit_count);
  set_integer(L, "outside", outside);
  set_integer(L, "drawn", k);
  set_integer(L, "shown", (lua_Integer)nd + nf);
  set_integer(L, "stride", stride);
  set_number(L, "tmin", tmin);
  set_number(L, "tmax", tmax);
  set_number(L, "mmax", mmax);
  return 1;
}

/* ------------------------------------------------------------------------------------ */
/* Dots                                                                                 */
/* ------------------------------------------------------------------------------------ */

/* Where points go: x of xs[i] / xdiv, y of ys[i] * yfactor (a place table's fields). */
typedef struct place {
  int xs, ys;  /* stack indices of the columns */
  double xdiv, yfactor;
  scale x, y;
} place;

static double place_number (lua_State *L, int t, const char *name) {
  double v;
  if (lua_getfield(L, t, name) != LUA_TNUMBER)
    luaL_error(L, "chart: place.%s: expected a number", name);
  v = (double)lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Reads the place table at t; its columns and scales are pushed (the stack holds them). */
static void place_at (lua_State *L, int t, place *pl) {
  luaL_checktype(L, t, LUA_TTABLE);
  pl->xdiv = place_number(L, t, "xdiv");
  pl->yfactor = place_number(L, t, "yfactor");
  if (lua_getfield(L, t, "xs") != LUA_TTABLE) luaL_error(L, "chart: place.xs: expected a table");
  pl->xs = lua_gettop(L);
  if (lua_getfield(L, t, "ys") != LUA_TTABLE) luaL_error(L, "chart: place.ys: expected a table");
  pl->ys = lua_gettop(L);
  lua_getfield(L, t, "x");
  scale_at(L, -1, "place.x", &pl->x);
  lua_getfield(L, t, "y");
  scale_at(L, -1, "place.y", &pl->y);
}

/* Point i's half pixel, doubled: two integral values (raises if either figure is not a
   finite number or its place is not finite). */
static void half_pixel2 (lua_State *L, const place *pl, lua_Integer i, double *cx2, double *cy2) {
  double m = 0, t = 0;  /* (luaL_error does not return) */
  if (!figure(L, pl->xs, i, &m) || !figure(L, pl->ys, i, &t))
    luaL_error(L, "chart: point %d: not a finite number", (int)i);
  *cx2 = floor(scale_apply(&pl->x, m / pl->xdiv) * 2 + 0.5) + 0.0;  /* + 0.0: no -0 */
  *cy2 = floor(scale_apply(&pl->y, t * pl->yfactor) * 2 + 0.5) + 0.0;
  if (!isfinite(*cx2) || !isfinite(*cy2))
    luaL_error(L, "chart: point %d: placed off any chart", (int)i);
}

/* The index at idx[k] (a table), or raises. */
static lua_Integer index_at (lua_State *L, int idx, lua_Integer k) {
  lua_Integer i = 0;
  int ok = lua_rawgeti(L, idx, k) == LUA_TNUMBER;
  if (ok) i = lua_tointegerx(L, -1, &ok);
  lua_pop(L, 1);
  if (!ok) luaL_error(L, "chart: item %d of the indices is not an integer", (int)k);
  return i;
}

/* half_pixels(place, idx) -> {x1, y1, x2, y2, ...}: the half pixels of the points idx[k].
   place: {xs =, xdiv =, x =, ys =, yfactor =, y =}, x and y scales of this module. */
static int c_half_pixels (lua_State *L) {
  place pl;
  lua_Integer k, n;
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  place_at(L, 1, &pl);
  n = (lua_Integer)lua_rawlen(L, 2);
  lua_createtable(L, (int)(2 * n), 0);
  for (k = 1; k <= n; k++) {
    double cx2, cy2;
    half_pixel2(L, &pl, index_at(L, 2, k), &cx2, &cy2);
    lua_pushnumber(L, cx2 / 2);
    lua_rawseti(L, -2, 2 * k - 1);
    lua_pushnumber(L, cy2 / 2);
    lua_rawseti(L, -2, 2 * k);
  }
  return 1;
}

typedef struct cell { double x2, y2; int used; } cell;

static uint64_t bits_of (double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* Whether the half pixel (x2, y2) is new to the set (and now in it); cells: a power of two
   above the items added. */
static int first_visit (cell *set, size_t mask, double x2, double y2) {
  /* integral doubles differ in their high bits only: splitmix64's finalizer mixes them down */
  uint64_t h = bits_of(x2) ^ (bits_of(y2) * 0x9e3779b97f4a7c15u);
  size_t at;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9u;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebu;
  at = (size_t)(h ^ (h >> 31)) & mask;
  while (set[at].used) {
    if (set[at].x2 == x2 && set[at].y2 == y2) return 0;
    at = (at + 1) & mask;
  }
  set[at].x2 = x2;
  set[at].y2 = y2;
  set[at].used = 1;
  return 1;
}

/* dots(place, idx, fits) -> misses, hits: the half pixels {x1, y1, ...} of the points
   idx[k] (as half_pixels), those whose fits[i] is false and those whose is true apart,
   each half pixel once per list, in idx order */
static int c_dots (lua_State *L) {
  place pl;
  lua_Integer k, n, count[2] = {0, 0};
  size_t cells = 16;
  cell *set[2];
  int list[2], g;
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);
  place_at(L, 1, &pl);
  n = (lua_Integer)lua_rawlen(L, 2);
  while (cells < 2 * (size_t)n) cells *= 2;
  for (g = 0; g < 2; g++) {
    set[g] = (cell *)scratch(L, cells, sizeof(cell));
    memset(set[g], 0, cells * sizeof(cell));
  }
  lua_createtable(L, (int)n, 0);
  list[0] = lua_gettop(L);
  lua_createtable(L, (int)n, 0);
  list[1] = lua_gettop(L);
  for (k = 1; k <= n; k++) {
    lua_Integer i = index_at(L, 2, k);
    double cx2, cy2;
    half_pixel2(L, &pl, i, &cx2, &cy2);
    g = truthy(L, 3, i);
    if (!first_visit(set[g], cells - 1, cx2, cy2)) continue;
    lua_pushnumber(L, cx2 / 2);
    lua_rawseti(L, list[g], ++count[g]);
    lua_pushnumber(L, cy2 / 2);
    lua_rawseti(L, list[g], ++count[g]);
  }
  return 2;
}

static const luaL_Reg funcs[] = {
  {"scale", c_scale},
  {"log_scale", c_log_scale},
  {"front", c_front},
  {"candidates", c_candidates},
  {"half_pixels", c_half_pixels},
  {"dots", c_dots},
  {NULL, NULL}
};

int luaopen_ndplan_chart (lua_State *L) {
  luaL_newlib(L, funcs);
  return 1;
}
