/*
** ljson.c -- Lua binding ndplan.c.json: the writer behind ndplan.io.json's encode, the one
** JSON writer of ndplan (search.json, the recompute files, the report's data, every --json).
** It reads a value the way the Lua writer it replaced did, metamethods and all: #v, v[i] and
** v[k] through __len and __index, keys through __pairs (result tables are lazy: llazy.c), the
** keys of a plain object as tostring writes them in table.sort's order, so every document
** keeps its bytes. The rules, in the order encode applies them:
**   deeper than max_depth: an error; nil and the null value: null; booleans: true, false;
**   integers: "%d"; NaN and infinities: null; with shortest the fewest exact digits
**   (nd_format_shortest); integral floats below 2^53: "%.0f"; other floats: "%.17g";
**   strings: '"', '\' and \n \t \r by name, other control bytes \u00XX;
**   tables whose metatable (as getmetatable answers) is the ordered one: {key, value} pairs in
**   order; whose metatable is the raw one: the text v[1] as it is (JSON written before, kept
**   to be written again); #v > 0 or no field at all: an array of v[1..#v]; others: an object
**   of sorted keys;
**   anything else: "json.encode: cannot encode a <type>".
*/
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "ndplan_lua.h"
#include "ndplan/units.h"

#define BUFFER_MT "ndplan.json.buffer"

/* The text written so far: malloc'd, in a userdata whose __gc frees it if an error unwinds. */
typedef struct text_buffer {
  char *p;
  size_t n, cap;
} text_buffer;

/* One encode call: its output, its options and the stack slots of what it compares with. */
typedef struct encoder {
  lua_State *L;
  text_buffer *b;
  int ordered;            /* stack index of the ordered objects' metatable */
  int raw;                /* stack index of the raw texts' metatable (0: none) */
  int null;               /* stack index of the null value */
  int null_raw;           /* the null value compares raw (no __eq can run: not a table) */
  int shortest;
  int indent;             /* stack index of the indent option (0: compact) */
  const char *unit;       /* the indent option as text (NULL: not a string or number) */
  size_t unit_len;
  lua_Integer max_depth;
} encoder;

static int buffer_gc (lua_State *L) {
  text_buffer *b = (text_buffer *)luaL_checkudata(L, 1, BUFFER_MT);
  free(b->p);
  b->p = NULL;
  b->n = b->cap = 0;
  return 0;
}

static void grow (encoder *e, size_t more) {
  text_buffer *b = e->b;
  size_t cap = b->cap ? b->cap : 256;
  char *p;
  while (cap - b->n < more) {
    if (cap > ((size_t)-1) / 2) luaL_error(e->L, "json.encode: the text is too large");
    cap *= 2;
  }
  if ((p = (char *)realloc(b->p, cap)) == NULL) luaL_error(e->L, "not enough memory");
  b->p = p;
  b->cap = cap;
}

static void add (encoder *e, const char *s, size_t len) {
  if (len == 0) return;
  if (e->b->cap - e->b->n < len) grow(e, len);
  memcpy(e->b->p + e->b->n, s, len);
  e->b->n += len;
}

static void add_char (encoder *e, char c) {
  if (e->b->cap == e->b->n) grow(e, 1);
  e->b->p[e->b->n++] = c;
}

#define add_literal(e, s) add((e), "" s, sizeof(s) - 1)

/* Raises the message as it is (no position: the Lua writer raised its own at level 0). */
static void fail (lua_State *L, const char *message) {
  lua_pushstring(L, message);
  lua_error(L);
}

static void add_number (encoder *e, int idx) {
  lua_State *L = e->L;
  char buf[64];
  int len;
  double x;
  if (lua_isinteger(L, idx)) {  /* (LUA_INTEGER_FMT's "%lld") */
    len = nd_format_integer(buf, (long long)lua_tointeger(L, idx));
    add(e, buf, (size_t)len);
    return;
  }
  x = (double)lua_tonumber(L, idx);
  if (!isfinite(x)) { add_literal(e, "null"); return; }
  if (e->shortest) len = nd_format_shortest(buf, sizeof buf, x);
  else if (x == floor(x) && fabs(x) < 0x1p53)  /* "%.0f": -0.0 is "-0" */
    len = x == 0.0 && signbit(x) ? (memcpy(buf, "-0", 3), 2)
                                 : nd_format_integer(buf, (long long)x);
  else len = nd_format_g(buf, sizeof buf, x, 17);  /* "%.17g" */
  add(e, buf, (size_t)len);
}

/* A byte Lua's %c class matches (iscntrl), '"' or '\': written escaped. */
static int needs_escape (unsigned char c) {
  return c == '"' || c == '\\' || iscntrl(c);
}

static void add_string (encoder *e, const char *s, size_t len) {
  size_t i, run = 0;
  add_char(e, '"');
  for (i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[8];
    if (!needs_escape(c)) continue;
    add(e, s + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': add_literal(e, "\\\""); break;
      case '\\': add_literal(e, "\\\\"); break;
      case '\n': add_literal(e, "\\n"); break;
      case '\t': add_literal(e, "\\t"); break;
      case '\r': add_literal(e, "\\r"); break;
      default:
        snprintf(esc, sizeof esc, "\\u%04x", (unsigned)c);
        add(e, esc, 6);
    }
  }
  add(e, s + run, len - run);
  add_char(e, '"');
}

/* string.rep's own complaint when the indent option is neither a string nor a number,
   raised where the Lua writer first repeated it: at the first table with members */
static void check_indent (encoder *e) {
  lua_State *L = e->L;
  const char *got;
  if (!e->indent || e->unit) return;
  got = luaL_getmetafield(L, e->indent, "__name") == LUA_TSTRING ? lua_tostring(L, -1)
        : lua_type(L, e->indent) == LUA_TLIGHTUSERDATA ? "light userdata"
        : luaL_typename(L, e->indent);
  lua_pushfstring(L, "bad argument #1 to 'rep' (string expected, got %s)", got);
  lua_error(L);
}

/* A newline and the indent option repeated `times` (string.rep's text of it). */
static void add_newline (encoder *e, lua_Integer times) {
  add_char(e, '\n');
  while (times-- > 0) add(e, e->unit, e->unit_len);
}

/* Lua's string order (declared in ndplan_lua.h: lsvg.c sorts attribute names by it too). */
int nd_lua_string_order (const char *ls, size_t ll, const char *rs, size_t lr) {
  for (;;) {
    int temp = strcoll(ls, rs);
    size_t len;
    if (temp != 0) return temp;
    len = strlen(ls);
    if (len == lr) return len == ll ? 0 : 1;
    if (len == ll) return -1;
    len++;
    ls += len; ll -= len; rs += len; lr -= len;
  }
}

typedef struct sort_key {
  const char *s;
  size_t len;
  lua_Integer slot;  /* where the key string is in the keys table */
} sort_key;

static int compare_keys (const void *a, const void *b) {
  const sort_key *x = (const sort_key *)a, *y = (const sort_key *)b;
  return nd_lua_string_order(x->s, x->len, y->s, y->len);
}

/*
** Pushes a table of tostring(k) for every key k that pairs(v) gives (its __pairs when it has
** one) and a userdata of them in table.sort's order; returns their count.
*/
static lua_Integer sorted_keys (lua_State *L, int v, sort_key **out) {
  lua_Integer n = 0, i;
  sort_key *keys;
  int t;
  lua_newtable(L);
  t = lua_gettop(L);
  if (luaL_getmetafield(L, v, "__pairs") != LUA_TNIL) {
    lua_pushvalue(L, v);
    lua_call(L, 1, 3);  /* iterator, state, control */
    for (;;) {
      lua_pushvalue(L, -3);
      lua_pushvalue(L, -3);
      lua_pushvalue(L, -3);
      lua_call(L, 2, 1);
      if (lua_isnil(L, -1)) { lua_pop(L, 4); break; }
      lua_replace(L, -2);  /* the new control */
      luaL_tolstring(L, -1, NULL);
      lua_rawseti(L, t, ++n);
    }
  } else {
    lua_pushnil(L);
    while (lua_next(L, v)) {
      lua_pop(L, 1);
      luaL_tolstring(L, -1, NULL);
      lua_rawseti(L, t, ++n);
    }
  }
  keys = (sort_key *)lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *keys, 0);
  for (i = 0; i < n; i++) {  /* the strings stay anchored in the table at t */
    lua_rawgeti(L, t, i + 1);
    keys[i].s = lua_tolstring(L, -1, &keys[i].len);
    keys[i].slot = i + 1;
    lua_pop(L, 1);
  }
  qsort(keys, (size_t)n, sizeof *keys, compare_keys);
  *out = keys;
  return n;
}

/* Pushes v[key], and when that is nil v[math.tointeger(tonumber(key))], as the Lua did. */
static void push_member (lua_State *L, int v, int keys_table, const sort_key *k) {
  lua_rawgeti(L, keys_table, k->slot);
  if (lua_gettable(L, v) != LUA_TNIL) return;
  lua_pop(L, 1);
  if (lua_stringtonumber(L, k->s) == k->len + 1) {
    int is_integer;
    lua_Integer i = lua_tointegerx(L, -1, &is_integer);
    lua_pop(L, 1);
    if (is_integer) lua_pushinteger(L, i);
    else lua_pushnil(L);
  } else lua_pushnil(L);
  lua_gettable(L, v);
}

/*
** #v as the for loop 1..#v counts it, and whether #v > 0 and #v == 0 (an __len may answer
** anything; a non-number is compared as Lua compares it, and counted only as the loop would
** refuse it).
*/
typedef struct length {
  lua_Integer count;
  int positive, zero, number;
} length;

static length length_of (lua_State *L, int v, int compare) {
  length n = {0, 0, 0, 1};
  lua_len(L, v);
  if (lua_isinteger(L, -1)) {
    lua_Integer i = lua_tointeger(L, -1);
    n.count = i > 0 ? i : 0;
    n.positive = i > 0;
    n.zero = i == 0;
  } else if (lua_type(L, -1) == LUA_TNUMBER) {
    double f = (double)lua_tonumber(L, -1);
    n.positive = f > 0;
    n.zero = f == 0;
    n.count = !(f >= 1) ? 0 : f >= 0x1p63 ? LUA_MAXINTEGER : (lua_Integer)floor(f);
  } else {
    n.number = 0;
    if (compare) {
      lua_pushinteger(L, 0);
      n.positive = lua_compare(L, -1, -2, LUA_OPLT);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  return n;
}

/* 1 for an ordered object, 2 for a raw text, else 0 (what getmetatable answers: ==) */
static int is_ordered (encoder *e, int v) {
  lua_State *L = e->L;
  int yes;
  if (!lua_getmetatable(L, v)) return 0;
  if (luaL_getmetafield(L, v, "__metatable") != LUA_TNIL) lua_remove(L, -2);
  yes = lua_compare(L, -1, e->ordered, LUA_OPEQ) ? 1
        : e->raw && lua_compare(L, -1, e->raw, LUA_OPEQ) ? 2 : 0;
  lua_pop(L, 1);
  return yes;
}

/* A raw text's v[1], as it is. */
static void add_raw (encoder *e, int v) {
  lua_State *L = e->L;
  size_t len;
  const char *s;
  if (lua_geti(L, v, 1) != LUA_TSTRING) fail(L, "json.encode: a raw value holds no text");
  s = lua_tolstring(L, -1, &len);
  add(e, s, len);
  lua_pop(L, 1);
}

static void depth_error (encoder *e) {
  lua_pushfstring(e->L, "json.encode: nested deeper than %I (a cycle?)",
                  (LUAI_UACINT)e->max_depth);
  lua_error(e->L);
}

static void encode (encoder *e, int idx, lua_Integer depth);

static void encode_table (encoder *e, int v, lua_Integer depth) {
  lua_State *L = e->L;
  int ordered = is_ordered(e, v), array = 0, keys_table = 0;
  length n;
  sort_key *keys = NULL;
  lua_Integer i, count;
  luaL_checkstack(L, 12, "json.encode");
  if (ordered == 2) { add_raw(e, v); return; }
  n = length_of(L, v, !ordered);
  if (!ordered) {
    array = n.positive;
    if (!array) {
      lua_pushnil(L);
      if (lua_next(L, v)) lua_pop(L, 2);
      else array = 1;
    }
  }
  if (!ordered && !array) {  /* a plain object: its keys sorted */
    n.count = sorted_keys(L, v, &keys);
    n.zero = n.count == 0;
    n.number = 1;
    keys_table = lua_gettop(L) - 1;
  }
  if (n.zero) {
    if (array) add_literal(e, "[]");
    else add_literal(e, "{}");
    if (keys_table) lua_pop(L, 2);
    return;
  }
  check_indent(e);
  if (!n.number) fail(L, "'for' limit must be a number");
  add_char(e, array ? '[' : '{');
  count = n.count;
  for (i = 1; i <= count; i++) {
    int top = lua_gettop(L);
    if (i > 1) add_char(e, ',');
    if (e->indent) add_newline(e, depth + 1);
    if (ordered) {  /* key, val = v[i][1], v[i][2] */
      lua_geti(L, v, i);
      lua_geti(L, -1, 1);
      lua_geti(L, v, i);
      lua_geti(L, -1, 2);
      lua_remove(L, -2);
      lua_remove(L, -3);
    } else if (keys) {
      lua_rawgeti(L, keys_table, keys[i - 1].slot);
      push_member(L, v, keys_table, &keys[i - 1]);
    } else {
      lua_pushnil(L);
      lua_geti(L, v, i);
    }
    if (!lua_isnil(L, top + 1)) {  /* the key, as tostring writes it */
      size_t len;
      const char *s;
      s = luaL_tolstring(L, top + 1, &len);
      if (depth + 1 > e->max_depth) depth_error(e);
      add_string(e, s, len);
      lua_pop(L, 1);
      if (e->indent) add_literal(e, ": ");
      else add_char(e, ':');
    }
    encode(e, top + 2, depth + 1);
    lua_settop(L, top);
  }
  if (e->indent) add_newline(e, depth);
  add_char(e, array ? ']' : '}');
  if (keys_table) lua_pop(L, 2);
}

static void encode (encoder *e, int idx, lua_Integer depth) {
  lua_State *L = e->L;
  int t = lua_type(L, idx);
  if (depth > e->max_depth) depth_error(e);
  if (t == LUA_TNIL || t == LUA_TNONE
      || (e->null_raw ? lua_rawequal(L, idx, e->null) : lua_compare(L, idx, e->null, LUA_OPEQ)))
    add_literal(e, "null");
  else if (t == LUA_TBOOLEAN) {
    if (lua_toboolean(L, idx)) add_literal(e, "true");
    else add_literal(e, "false");
  } else if (t == LUA_TNUMBER) add_number(e, idx);
  else if (t == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    add_string(e, s, len);
  } else if (t == LUA_TTABLE) encode_table(e, idx, depth);
  else {
    lua_pushfstring(L, "json.encode: cannot encode a %s", lua_typename(L, t));
    lua_error(L);
  }
}

/*
** encode(value, ordered_mt, null, max_depth, shortest, indent [, raw_mt]) -> JSON text
** ordered_mt: the metatable of ordered objects; raw_mt: that of raw texts (nil: none);
** null: the value written as null; shortest:
** numbers in their fewest exact digits; indent: false for compact text, else each member
** on its own line under this text (a string or number) repeated per level.
*/
static int j_encode (lua_State *L) {
  encoder e;
  lua_settop(L, 7);
  luaL_checktype(L, 2, LUA_TTABLE);
  e.L = L;
  e.ordered = 2;
  e.raw = lua_istable(L, 7) ? 7 : 0;
  e.null = 3;
  e.null_raw = lua_type(L, 3) != LUA_TTABLE && lua_type(L, 3) != LUA_TUSERDATA;
  e.max_depth = luaL_checkinteger(L, 4);
  e.shortest = lua_toboolean(L, 5);
  e.indent = lua_toboolean(L, 6) ? 6 : 0;
  e.unit = NULL;
  e.unit_len = 0;
  if (e.indent && (lua_type(L, 6) == LUA_TSTRING || lua_type(L, 6) == LUA_TNUMBER)) {
    lua_pushvalue(L, 6);  /* a number's text, as string.rep takes it, anchored at 8 */
    e.unit = lua_tolstring(L, 8, &e.unit_len);
  } else lua_pushnil(L);
  e.b = (text_buffer *)lua_newuserdatauv(L, sizeof *e.b, 0);  /* at 9 */
  e.b->p = NULL;
  e.b->n = e.b->cap = 0;
  luaL_setmetatable(L, BUFFER_MT);
  encode(&e, 1, 0);
  lua_pushlstring(L, e.b->p ? e.b->p : "", e.b->n);
  free(e.b->p);
  e.b->p = NULL;
  return 1;
}

static const luaL_Reg funcs[] = {
  {"encode", j_encode},
  {NULL, NULL}
};

int luaopen_ndplan_json (lua_State *L) {
  luaL_newmetatable(L, BUFFER_MT);
  lua_pushcfunction(L, buffer_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
