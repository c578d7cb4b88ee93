/*
** lyaml.c -- Lua binding: ndplan.c.yaml, a small YAML 1.2 reader on libyaml's event API.
**
** decode(text [, name [, with_marks]]) -> value [, marks] | nil, "name:line:col: message"
**
** What it builds:
**   mappings -> tables, sequences -> arrays, plain scalars resolved by the YAML 1.2 core
**   schema (null, true/false, decimal/0o/0x integers as Lua integers, floats incl. .inf and
**   .nan), quoted or block scalars -> strings. A null value in a mapping leaves the key absent;
**   in a sequence (or as the whole document) it is `null`, a light userdata NULL (the same
**   value as cjson.null), so arrays keep their length.
**   Keys are resolved like values (`1: x` has integer key 1); a null, NaN or complex
**   (mapping/sequence) key is an error, and so is a duplicate key.
**   Aliases are copied (deep copy of the anchored value), so the result is always a tree;
**   copies count against a node budget that stops "billion laughs" documents.
**   Merge keys ("<<"), tags other than the core ones, and multiple documents are errors.
**
** Errors are expected failures (bad input) and come back as nil, message. Nothing here
** longjmps while holding C memory: the libyaml parser and its current event live in a
** userdata whose __gc frees them, so even a memory error inside lua_createtable is safe.
*/
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <yaml.h>

#include <lua.h>
#include <lauxlib.h>

#include "ndplan_lua.h"

#define READER_MT "ndplan.yaml.reader"
#define MAX_DEPTH 200            /* nesting bound: keeps C recursion and the Lua stack small */
#define MAX_ALIAS_NODES 100000   /* nodes created by alias copies, over the whole document */

#define TAG_PREFIX "tag:yaml.org,2002:"

typedef struct reader {
  yaml_parser_t parser;
  yaml_event_t event;
  int parser_live;      /* yaml_parser_initialize succeeded: must be deleted */
  int event_live;       /* `event` holds memory: must be deleted */
  const char *name;     /* borrowed from the Lua stack (argument 2) */
  const char *text;     /* borrowed from the Lua stack (argument 1) */
  size_t len;
  int anchors;          /* stack index of the anchor-name -> value table */
  int marks;            /* stack index of the marks table, 0 when not wanted */
  long alias_nodes;
  char err[512];
} reader;


/*
** {======================================================
** Parser ownership
** =======================================================
*/

static void release (reader *r) {
  if (r->event_live) { yaml_event_delete(&r->event); r->event_live = 0; }
  if (r->parser_live) { yaml_parser_delete(&r->parser); r->parser_live = 0; }
}

static int reader_gc (lua_State *L) {
  release((reader *)luaL_checkudata(L, 1, READER_MT));
  return 0;
}

/* Pushes a reader whose parser reads `text`; created closed, then opened. */
static reader *new_reader (lua_State *L, const char *text, size_t len, const char *name) {
  reader *r = (reader *)lua_newuserdatauv(L, sizeof(reader), 0);
  memset(r, 0, sizeof *r);
  if (luaL_newmetatable(L, READER_MT)) {
    lua_pushcfunction(L, reader_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, reader_gc);
    lua_setfield(L, -2, "__close");
  }
  lua_setmetatable(L, -2);
  if (!yaml_parser_initialize(&r->parser))
    luaL_error(L, "yaml: cannot initialize the parser (out of memory)");
  r->parser_live = 1;
  yaml_parser_set_input_string(&r->parser, (const unsigned char *)text, len);
  yaml_parser_set_encoding(&r->parser, YAML_UTF8_ENCODING);
  r->text = text;
  r->len = len;
  r->name = name;
  return r;
}

/* }====================================================== */


/*
** {======================================================
** Errors: "name:line:col: message", line and column from 1
** =======================================================
*/

static int fail_at (reader *r, size_t line0, size_t col0, const char *fmt, ...) {
  int n;
  va_list ap;
  n = snprintf(r->err, sizeof r->err, "%s:%zu:%zu: ", r->name, line0 + 1, col0 + 1);
  if (n < 0 || (size_t)n >= sizeof r->err) return 0;
  va_start(ap, fmt);
  vsnprintf(r->err + n, sizeof r->err - (size_t)n, fmt, ap);
  va_end(ap);
  return 0;
}

static int fail_mark (reader *r, const yaml_mark_t *m, const char *fmt, const char *arg) {
  return fail_at(r, m->line, m->column, fmt, arg);
}

/* Line and column (from 0) of a byte offset, for reader errors that only give an offset. */
static void offset_line_col (const reader *r, size_t off, size_t *line, size_t *col) {
  size_t i, l = 0, start = 0;
  if (off > r->len) off = r->len;
  for (i = 0; i < off; i++)
    if (r->text[i] == '\n') { l++; start = i + 1; }
  *line = l;
  *col = off - start;
}

/* Turns libyaml's error state into r->err. */
static int parser_failed (reader *r) {
  const yaml_parser_t *p = &r->parser;
  const char *problem = p->problem ? p->problem : "malformed YAML";
  switch (p->error) {
    case YAML_MEMORY_ERROR:
      snprintf(r->err, sizeof r->err, "%s: out of memory while parsing YAML", r->name);
      return 0;
    case YAML_READER_ERROR: {
      size_t line, col;
      offset_line_col(r, p->problem_offset, &line, &col);
      return fail_at(r, line, col, "%s", problem);
    }
    default:
      if (p->context)
        return fail_at(r, p->problem_mark.line, p->problem_mark.column,
                       "%s (%s at line %zu, column %zu)", problem, p->context,
                       p->context_mark.line + 1, p->context_mark.column + 1);
      return fail_at(r, p->problem_mark.line, p->problem_mark.column, "%s", problem);
  }
}

/* Advances to the next event, freeing the previous one. Returns 0 on a parse error. */
static int next_event (reader *r) {
  if (r->event_live) { yaml_event_delete(&r->event); r->event_live = 0; }
  if (!yaml_parser_parse(&r->parser, &r->event)) return parser_failed(r);
  r->event_live = 1;
  return 1;
}

/* }====================================================== */


/*
** {======================================================
** Scalars: YAML 1.2 core schema
** =======================================================
*/

enum { NUM_NO = 0, NUM_OK = 1, NUM_OVERFLOW = -1 };

static int digit_value (int c, int base) {
  int v;
  if (c >= '0' && c <= '9') v = c - '0';
  else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
  else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
  else return -1;
  return v < base ? v : -1;
}

/*
** Core-schema integer: [-+]?[0-9]+ | 0o[0-7]+ | 0x[0-9a-fA-F]+. Accumulates in uint64_t
** against the limit for the sign, so INT64_MIN is accepted and one past it is an overflow.
*/
static int parse_int (const char *s, size_t len, lua_Integer *out) {
  size_t i = 0;
  int base = 10, neg = 0;
  uint64_t acc = 0, limit;
  if (len > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'x')) {
    base = s[1] == 'o' ? 8 : 16;
    i = 2;
  }
  else if (len > 0 && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    i = 1;
  }
  if (i == len) return NUM_NO;
  for (size_t j = i; j < len; j++)
    if (digit_value((unsigned char)s[j], base) < 0) return NUM_NO;
  limit = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
  for (; i < len; i++) {
    unsigned d = (unsigned)digit_value((unsigned char)s[i], base);
    if (acc > (limit - d) / (unsigned)base) return NUM_OVERFLOW;
    acc = acc * (unsigned)base + d;
  }
  if (neg) *out = acc == (uint64_t)INT64_MAX + 1u ? (lua_Integer)INT64_MIN : -(lua_Integer)acc;
  else *out = (lua_Integer)acc;
  return NUM_OK;
}

static int is_one_of (const char *s, size_t len, const char *const *words) {
  for (; *words; words++)
    if (strlen(*words) == len && memcmp(s, *words, len) == 0) return 1;
  return 0;
}

/*
** Core-schema float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?, [-+]?.inf, .nan
** (each in three capitalizations). Conversion goes through lua_stringtonumber, which
** ignores the C locale's decimal point.
*/
static int parse_float (lua_State *L, const char *s, size_t len, lua_Number *out) {
  static const char *const infs[] = {".inf", ".Inf", ".INF", NULL};
  static const char *const nans[] = {".nan", ".NaN", ".NAN", NULL};
  size_t i = 0, digits = 0;
  char buf[128];
  if (is_one_of(s, len, nans)) { *out = (lua_Number)NAN; return NUM_OK; }
  if (len > 0 && (s[0] == '-' || s[0] == '+')) i = 1;
  if (is_one_of(s + i, len - i, infs)) {
    *out = s[0] == '-' ? -(lua_Number)HUGE_VAL : (lua_Number)HUGE_VAL;
    return NUM_OK;
  }
  while (i < len && s[i] >= '0' && s[i] <= '9') { i++; digits++; }
  if (i < len && s[i] == '.') {
    i++;
    while (i < len && s[i] >= '0' && s[i] <= '9') { i++; digits++; }
  }
  if (digits == 0) return NUM_NO;
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    size_t exp = 0;
    i++;
    if (i < len && (s[i] == '-' || s[i] == '+')) i++;
    while (i < len && s[i] >= '0' && s[i] <= '9') { i++; exp++; }
    if (exp == 0) return NUM_NO;
  }
  if (i != len || len >= sizeof buf) return NUM_NO;
  memcpy(buf, s, len);
  buf[len] = '\0';
  if (lua_stringtonumber(L, buf) == 0) return NUM_NO;
  *out = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return NUM_OK;
}

static int is_null_word (const char *s, size_t len) {
  static const char *const words[] = {"", "~", "null", "Null", "NULL", NULL};
  return is_one_of(s, len, words);
}

static int bool_word (const char *s, size_t len) {
  static const char *const t[] = {"true", "True", "TRUE", NULL};
  static const char *const f[] = {"false", "False", "FALSE", NULL};
  return is_one_of(s, len, t) ? 1 : is_one_of(s, len, f) ? 0 : -1;
}

/* Pushes a resolved number (integer first, then float). 0 with r->err set if impossible. */
static int push_number (lua_State *L, reader *r, const char *s, size_t len,
                        const yaml_mark_t *m, int want_float) {
  lua_Integer i;
  lua_Number f;
  int st = parse_int(s, len, &i);
  if (st == NUM_OVERFLOW)
    return fail_at(r, m->line, m->column, "integer '%.*s' does not fit in 64 bits",
                   (int)(len > 40 ? 40 : len), s);
  if (st == NUM_OK) {
    if (want_float) lua_pushnumber(L, (lua_Number)i);
    else lua_pushinteger(L, i);
    return 1;
  }
  if (parse_float(L, s, len, &f) == NUM_OK) { lua_pushnumber(L, f); return 1; }
  return NUM_NO;
}

/*
** Pushes the value of the current scalar event. Plain untagged scalars are resolved; quoted
** and block scalars (and the non-specific tag "!") are strings; core tags force a type.
*/
static int push_scalar (lua_State *L, reader *r) {
  const yaml_event_t *e = &r->event;
  const char *s = (const char *)e->data.scalar.value;
  size_t len = e->data.scalar.length;
  const char *tag = (const char *)e->data.scalar.tag;
  const yaml_mark_t *m = &e->start_mark;
  if (tag && strcmp(tag, "!") != 0) {
    static const char *const core[] = {"str", "null", "bool", "int", "float", NULL};
    const char *t;
    if (strncmp(tag, TAG_PREFIX, sizeof TAG_PREFIX - 1) != 0)
      return fail_mark(r, m, "unsupported tag '%s'", tag);
    t = tag + sizeof TAG_PREFIX - 1;
    if (!is_one_of(t, strlen(t), core))
      return fail_mark(r, m, "unsupported tag '%s'", tag);
    if (strcmp(t, "str") == 0) { lua_pushlstring(L, s, len); return 1; }
    if (strcmp(t, "null") == 0 && is_null_word(s, len)) {
      lua_pushlightuserdata(L, NULL);
      return 1;
    }
    if (strcmp(t, "bool") == 0 && bool_word(s, len) >= 0) {
      lua_pushboolean(L, bool_word(s, len));
      return 1;
    }
    if (strcmp(t, "int") == 0) {
      lua_Integer i;
      int st = parse_int(s, len, &i);
      if (st == NUM_OK) { lua_pushinteger(L, i); return 1; }
      if (st == NUM_OVERFLOW) return push_number(L, r, s, len, m, 0);
    }
    if (strcmp(t, "float") == 0) {
      if (push_number(L, r, s, len, m, 1)) return 1;
      if (r->err[0]) return 0;
    }
    return fail_at(r, m->line, m->column, "'%.*s' is not a valid !!%s",
                   (int)(len > 40 ? 40 : len), s, t);
  }
  if (tag || e->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
    lua_pushlstring(L, s, len);
    return 1;
  }
  if (is_null_word(s, len)) { lua_pushlightuserdata(L, NULL); return 1; }
  if (bool_word(s, len) >= 0) { lua_pushboolean(L, bool_word(s, len)); return 1; }
  if (push_number(L, r, s, len, m, 0)) return 1;
  if (r->err[0]) return 0;
  lua_pushlstring(L, s, len);
  return 1;
}

/* }====================================================== */


/*
** {======================================================
** Nodes
** =======================================================
*/

static int parse_node (lua_State *L, reader *r, int depth);

static int is_null (lua_State *L, int idx) {
  return lua_islightuserdata(L, idx) && lua_touserdata(L, idx) == NULL;
}

/*
** Deep-copies the value at the top of the stack (an anchored value) and replaces it with the
** copy, counting every node against MAX_ALIAS_NODES.
*/
static int copy_top (lua_State *L, reader *r, const yaml_mark_t *m, int depth) {
  if (++r->alias_nodes > MAX_ALIAS_NODES)
    return fail_at(r, m->line, m->column, "aliases expand to more than %d nodes",
                   MAX_ALIAS_NODES);
  if (!lua_istable(L, -1)) return 1;
  if (depth > MAX_DEPTH)
    return fail_at(r, m->line, m->column, "alias nests deeper than %d levels", MAX_DEPTH);
  luaL_checkstack(L, 4, "yaml: nesting too deep");
  lua_newtable(L);                    /* src dst */
  lua_pushnil(L);
  while (lua_next(L, -3)) {           /* src dst k v */
    if (!copy_top(L, r, m, depth + 1)) return 0;
    lua_pushvalue(L, -2);             /* src dst k v' k */
    lua_insert(L, -2);                /* src dst k k v' */
    lua_rawset(L, -4);                /* src dst k */
  }
  lua_remove(L, -2);                  /* dst */
  return 1;
}

/* Records "line:col" of a child (a key or an element) of the container at `t`. */
static void set_mark (lua_State *L, reader *r, int t, int key, const yaml_mark_t *m) {
  if (!r->marks) return;
  key = lua_absindex(L, key);
  lua_pushvalue(L, t);
  if (lua_rawget(L, r->marks) != LUA_TTABLE) {   /* marks[t] */
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, t);
    lua_pushvalue(L, -2);
    lua_rawset(L, r->marks);
  }
  lua_pushvalue(L, key);
  lua_pushfstring(L, "%d:%d", (int)m->line + 1, (int)m->column + 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

/* Stores the value at the top under its anchor name (the string just below it). */
static void register_anchor (lua_State *L, reader *r) {
  lua_pushvalue(L, -2);               /* name value name */
  lua_pushvalue(L, -2);               /* name value name value */
  lua_rawset(L, r->anchors);          /* name value */
  lua_remove(L, -2);                  /* value */
}

/* Removes the keys whose value is the null sentinel: null in a mapping means absent. */
static void drop_nulls (lua_State *L, int t) {
  lua_pushnil(L);
  while (lua_next(L, t)) {            /* k v */
    if (is_null(L, -1)) {
      lua_pushvalue(L, -2);
      lua_pushnil(L);
      lua_rawset(L, t);               /* assigning nil to an existing field is safe in next */
    }
    lua_pop(L, 1);
  }
}

/* The current event is MAPPING_START; pushes the table and leaves MAPPING_END current. */
static int parse_mapping (lua_State *L, reader *r, int depth) {
  int t;
  lua_newtable(L);
  t = lua_gettop(L);
  for (;;) {
    yaml_mark_t km;
    yaml_event_type_t kt;
    if (!next_event(r)) return 0;
    if (r->event.type == YAML_MAPPING_END_EVENT) break;
    km = r->event.start_mark;
    kt = r->event.type;
    if (kt == YAML_MAPPING_START_EVENT || kt == YAML_SEQUENCE_START_EVENT)
      return fail_mark(r, &km, "%s keys are not supported",
                       kt == YAML_MAPPING_START_EVENT ? "mapping" : "sequence");
    if (kt == YAML_SCALAR_EVENT && r->event.data.scalar.style == YAML_PLAIN_SCALAR_STYLE
        && !r->event.data.scalar.tag && strcmp((const char *)r->event.data.scalar.value,
                                               "<<") == 0)
      return fail_mark(r, &km, "merge keys ('%s') are not supported", "<<");
    if (!parse_node(L, r, depth + 1)) return 0;            /* t key */
    if (is_null(L, -1) || lua_istable(L, -1))
      return fail_mark(r, &km, "%s key", is_null(L, -1) ? "null" : "non-scalar");
    if (lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) != lua_tonumber(L, -1))
      return fail_mark(r, &km, "%s key", "NaN");
    lua_pushvalue(L, -1);
    if (lua_rawget(L, t) != LUA_TNIL) {                    /* t key old */
      const char *k = luaL_tolstring(L, -2, NULL);
      return fail_mark(r, &km, "duplicate key '%s'", k);
    }
    lua_pop(L, 1);
    set_mark(L, r, t, -1, &km);
    if (!next_event(r)) return 0;
    if (!parse_node(L, r, depth + 1)) return 0;            /* t key value */
    lua_rawset(L, t);                                      /* null stays until drop_nulls */
  }
  drop_nulls(L, t);
  return 1;
}

/* The current event is SEQUENCE_START; pushes the array and leaves SEQUENCE_END current. */
static int parse_sequence (lua_State *L, reader *r, int depth) {
  int t;
  lua_Integer n = 0;
  lua_newtable(L);
  t = lua_gettop(L);
  for (;;) {
    yaml_mark_t em;
    if (!next_event(r)) return 0;
    if (r->event.type == YAML_SEQUENCE_END_EVENT) break;
    em = r->event.start_mark;
    if (!parse_node(L, r, depth + 1)) return 0;
    lua_rawseti(L, t, ++n);
    if (r->marks) {
      lua_pushinteger(L, n);
      set_mark(L, r, t, -1, &em);
      lua_pop(L, 1);
    }
  }
  return 1;
}

/* Checks the tag of a collection: only the non-specific one or !!map / !!seq. */
static int collection_tag_ok (reader *r, const unsigned char *tag, const char *want) {
  const char *t = (const char *)tag;
  if (!t || strcmp(t, "!") == 0) return 1;
  if (strncmp(t, TAG_PREFIX, sizeof TAG_PREFIX - 1) == 0
      && strcmp(t + sizeof TAG_PREFIX - 1, want) == 0) return 1;
  return fail_mark(r, &r->event.start_mark, "unsupported tag '%s'", t);
}

/*
** Pushes the value of the node that starts at the current event (scalar, alias, mapping
** or sequence start). Returns 0 with r->err set on error.
*/
static int parse_node (lua_State *L, reader *r, int depth) {
  const yaml_event_t *e = &r->event;
  const unsigned char *anchor = NULL;
  int ok;
  if (depth > MAX_DEPTH)
    return fail_at(r, e->start_mark.line, e->start_mark.column,
                   "nesting deeper than %d levels", MAX_DEPTH);
  luaL_checkstack(L, 8, "yaml: nesting too deep");
  switch (e->type) {
    case YAML_ALIAS_EVENT: {
      yaml_mark_t m = e->start_mark;
      lua_pushstring(L, (const char *)e->data.alias.anchor);
      if (lua_rawget(L, r->anchors) == LUA_TNIL)
        return fail_mark(r, &m, "undefined alias '*%s'", (const char *)e->data.alias.anchor);
      return copy_top(L, r, &m, depth);
    }
    case YAML_SCALAR_EVENT:
      anchor = e->data.scalar.anchor;
      if (anchor) lua_pushstring(L, (const char *)anchor);
      if (!push_scalar(L, r)) return 0;
      break;
    case YAML_SEQUENCE_START_EVENT:
      anchor = e->data.sequence_start.anchor;
      if (!collection_tag_ok(r, e->data.sequence_start.tag, "seq")) return 0;
      if (anchor) lua_pushstring(L, (const char *)anchor);  /* copied before the event goes */
      ok = parse_sequence(L, r, depth);
      if (!ok) return 0;
      break;
    case YAML_MAPPING_START_EVENT:
      anchor = e->data.mapping_start.anchor;
      if (!collection_tag_ok(r, e->data.mapping_start.tag, "map")) return 0;
      if (anchor) lua_pushstring(L, (const char *)anchor);
      ok = parse_mapping(L, r, depth);
      if (!ok) return 0;
      break;
    default:
      return fail_mark(r, &e->start_mark, "unexpected YAML event%s", "");
  }
  if (anchor) register_anchor(L, r);  /* `anchor` is stale now; only its truth is used */
  return 1;
}

/* }====================================================== */


/* Parses the whole stream: at most one document. Pushes the value. */
static int parse_stream (lua_State *L, reader *r) {
  if (!next_event(r)) return 0;                       /* STREAM_START */
  if (!next_event(r)) return 0;
  if (r->event.type == YAML_STREAM_END_EVENT) {       /* empty stream: a null document */
    lua_pushlightuserdata(L, NULL);
    return 1;
  }
  if (!next_event(r)) return 0;                       /* past DOCUMENT_START */
  if (!parse_node(L, r, 0)) return 0;
  if (!next_event(r)) return 0;                       /* DOCUMENT_END */
  if (!next_event(r)) return 0;
  if (r->event.type != YAML_STREAM_END_EVENT)
    return fail_mark(r, &r->event.start_mark,
                     "more than one document (ndplan reads one per file)%s", "");
  return 1;
}

/* decode(text [, name [, with_marks]]) -> value [, marks] | nil, message */
static int y_decode (lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  const char *name = luaL_optstring(L, 2, "(yaml)");
  int with_marks = lua_toboolean(L, 3);
  reader *r;
  lua_settop(L, 3);
  r = new_reader(L, text, len, name);                 /* 4: reader */
  lua_newtable(L);                                    /* 5: anchors */
  r->anchors = lua_gettop(L);
  if (with_marks) {
    lua_newtable(L);                                  /* 6: marks */
    r->marks = lua_gettop(L);
  }
  if (!parse_stream(L, r)) {
    release(r);
    luaL_pushfail(L);
    lua_pushstring(L, r->err);
    return 2;
  }
  release(r);
  if (with_marks) {
    lua_pushvalue(L, r->marks);
    return 2;
  }
  return 1;
}

static const luaL_Reg funcs[] = {
  {"decode", y_decode},
  {"null", NULL},
  {NULL, NULL}
};

int luaopen_ndplan_yaml (lua_State *L) {
  luaL_newlib(L, funcs);
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
  return 1;
}
