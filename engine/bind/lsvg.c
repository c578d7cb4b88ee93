/*
** lsvg.c -- Lua binding ndplan.c.svg: the text of ndplan.out.svg's elements, byte-stable.
** The charts write thousands of elements; each was a table sorted, numbers formatted and
** strings joined in Lua. The rules, which live here only:
**   a number: "%.2f" with trailing zeros and a bare point dropped, "-0" as "0"
**   (nd_format_fixed); NaN and infinities raise (a chart with one is a bug upstream);
**   a text: tostring of the value with & < > " ' written as entities;
**   attributes: ' k="v"' each, geometry first, then presentation, then the rest by name (the
**   order never depends on table traversal); a number value as above, another as a text.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "ndplan_lua.h"
#include "ndplan/units.h"

#define SVG_DECIMALS 2  /* a hundredth of a pixel: finer than any display shows */
#define MAX_ATTRS 64    /* an element has a dozen at most; more is a misuse */

/* The attribute order: geometry, then presentation; names not listed come after, by name. */
static const char *const ORDER[] = {
  "id", "class", "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "width", "height",
  "points", "d", "viewBox", "fill", "fill-opacity", "stroke", "stroke-width",
  "stroke-dasharray", "opacity", "font-size", "font-weight", "text-anchor",
  "dominant-baseline", "transform"
};
#define UNRANKED ((int)(sizeof ORDER / sizeof ORDER[0]))

static int rank_of (const char *name, size_t len) {
  int i;
  for (i = 0; i < UNRANKED; i++)
    if (ORDER[i][0] == name[0] && strlen(ORDER[i]) == len && memcmp(ORDER[i], name, len) == 0)
      return i;
  return UNRANKED;
}

/* The number at idx (which must be one) as the charts write it, into buf; NULL if it is not
   finite. */
static const char *number_text (lua_State *L, int idx, char *buf, size_t *len) {
  double x;
  if (lua_isinteger(L, idx)) {
    lua_Integer i = lua_tointeger(L, idx);
    if (i > -((lua_Integer)1 << 53) && i < ((lua_Integer)1 << 53)) {  /* exact as a double */
      *len = (size_t)snprintf(buf, ND_FIXED_SIZE, LUA_INTEGER_FMT, (LUAI_UACINT)i);
      return buf;
    }
  }
  x = (double)lua_tonumber(L, idx);
  if (!isfinite(x)) return NULL;
  *len = (size_t)nd_format_fixed(buf, ND_FIXED_SIZE, x, SVG_DECIMALS);
  return buf;
}

/* The five XML special characters and their entities (text and attribute values). */
static const char *const ENTITY[256] = {
  ['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;", ['\''] = "&#39;"
};

static void add_escaped (luaL_Buffer *b, const char *s, size_t len) {
  size_t i, run = 0;
  for (i = 0; i < len; i++) {
    const char *e = ENTITY[(unsigned char)s[i]];
    if (!e) continue;
    luaL_addlstring(b, s + run, i - run);
    luaL_addstring(b, e);
    run = i + 1;
  }
  luaL_addlstring(b, s + run, len - run);
}

static int needs_escape (const char *s, size_t len) {
  size_t i;
  for (i = 0; i < len; i++)
    if (ENTITY[(unsigned char)s[i]]) return 1;
  return 0;
}

/* num(x) -> text */
static int s_num (lua_State *L) {
  char buf[ND_FIXED_SIZE];
  size_t len;
  luaL_checktype(L, 1, LUA_TNUMBER);
  if (!number_text(L, 1, buf, &len))
    return luaL_error(L, "svg: not a finite number: %s", luaL_tolstring(L, 1, NULL));
  lua_pushlstring(L, buf, len);
  return 1;
}

/* esc(v) -> tostring(v) with the five XML special characters escaped */
static int s_esc (lua_State *L) {
  size_t len;
  const char *s = luaL_tolstring(L, 1, &len);
  luaL_Buffer b;
  if (!needs_escape(s, len)) return 1;  /* most hold none: the string itself */
  luaL_buffinit(L, &b);
  add_escaped(&b, s, len);
  luaL_pushresult(&b);
  return 1;
}

/* One attribute: its name and value anchored on the stack (a value neither a number nor a
   string is pushed as its tostring text). */
typedef struct attr {
  int key, value;  /* stack indices */
  int rank;
  const char *name;
  size_t len;
} attr;

static int attr_before (const attr *a, const attr *b) {
  if (a->rank != b->rank) return a->rank < b->rank;
  return nd_lua_string_order(a->name, a->len, b->name, b->len) < 0;
}

/* Pushes the attributes of the table at t (skipping names `over`, the table at that index
   or 0, also holds: its values win) into list from *n. */
static void collect (lua_State *L, int t, int over, attr *list, int *n) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    attr *a;
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "svg: an attribute name must be a string, got a %s", luaL_typename(L, -2));
    if (over) {
      lua_pushvalue(L, -2);
      if (lua_rawget(L, over) != LUA_TNIL) { lua_pop(L, 2); continue; }
      lua_pop(L, 1);
    }
    if (*n == MAX_ATTRS) luaL_error(L, "svg: more than %d attributes", MAX_ATTRS);
    a = &list[(*n)++];
    if (lua_type(L, -1) != LUA_TNUMBER && lua_type(L, -1) != LUA_TSTRING) {
      luaL_tolstring(L, -1, NULL);
      lua_replace(L, -2);
    }
    lua_pushvalue(L, -2);  /* the next key for lua_next; name and value stay below */
    a->key = lua_gettop(L) - 2;
    a->value = a->key + 1;
    a->name = lua_tolstring(L, a->key, &a->len);
    a->rank = rank_of(a->name, a->len);
  }
}

/* Appends the attributes of the table at t and, winning over its values, of the table at
   more (0: none) to b: the stack above base holds them until the buffer is done. */
static int gather (lua_State *L, int t, int more, attr *list) {
  int n = 0, i, j;
  luaL_checkstack(L, 2 * MAX_ATTRS + 8, "svg attributes");
  if (t) collect(L, t, more, list, &n);
  if (more) collect(L, more, 0, list, &n);
  for (i = 1; i < n; i++) {  /* a few: insertion sort */
    attr a = list[i];
    for (j = i; j > 0 && attr_before(&a, &list[j - 1]); j--) list[j] = list[j - 1];
    list[j] = a;
  }
  return n;
}

static void add_attrs (lua_State *L, luaL_Buffer *b, const attr *list, int n) {
  int i;
  for (i = 0; i < n; i++) {
    const attr *a = &list[i];
    size_t len;
    luaL_addchar(b, ' ');
    luaL_addlstring(b, a->name, a->len);
    luaL_addlstring(b, "=\"", 2);
    if (lua_type(L, a->value) == LUA_TNUMBER) {
      char buf[ND_FIXED_SIZE];
      const char *s = number_text(L, a->value, buf, &len);
      if (!s) luaL_error(L, "svg: %s: not a finite number: %s", a->name,
                         luaL_tolstring(L, a->value, NULL));
      luaL_addlstring(b, s, len);
    } else {
      const char *s = lua_tolstring(L, a->value, &len);
      add_escaped(b, s, len);
    }
    luaL_addchar(b, '"');
  }
}

/* The table argument at arg, or 0 when it is nil or absent. */
static int opt_table (lua_State *L, int arg) {
  if (lua_isnoneornil(L, arg)) return 0;
  luaL_checktype(L, arg, LUA_TTABLE);
  return arg;
}

/* attrs(t [, more]) -> ' k="v" ...': the attributes of t and more (more's values win) */
static int s_attrs (lua_State *L) {
  attr list[MAX_ATTRS];
  int t, more, n;
  luaL_Buffer b;
  luaL_checktype(L, 1, LUA_TTABLE);
  t = 1;
  more = opt_table(L, 2);
  lua_settop(L, 2);
  n = gather(L, t, more, list);
  luaL_buffinit(L, &b);
  add_attrs(L, &b, list, n);
  luaL_pushresult(&b);
  return 1;
}

/*
** tag(indent, name, attrs, more [, text [, inner]]) -> one line: indent<name .../> without
** text, else indent<name ...>text</name>, or with inner indent<name ...><inner>text</inner>
** </name> (a rect's tooltip). attrs and more: tables or nil (more's values win); text: its
** tostring, escaped.
*/
static int s_tag (lua_State *L) {
  attr list[MAX_ATTRS];
  size_t ilen, nlen, tlen = 0, inlen = 0;
  const char *indent = luaL_checklstring(L, 1, &ilen);
  const char *name = luaL_checklstring(L, 2, &nlen);
  int t = opt_table(L, 3), more = opt_table(L, 4), n;
  int has_text = !lua_isnoneornil(L, 5);
  const char *text = NULL;
  const char *inner = luaL_optlstring(L, 6, NULL, &inlen);
  luaL_Buffer b;
  lua_settop(L, 6);
  if (has_text) text = luaL_tolstring(L, 5, &tlen);  /* anchored at 7 */
  else lua_pushnil(L);
  n = gather(L, t, more, list);
  luaL_buffinit(L, &b);
  luaL_addlstring(&b, indent, ilen);
  luaL_addchar(&b, '<');
  luaL_addlstring(&b, name, nlen);
  add_attrs(L, &b, list, n);
  if (!has_text) luaL_addlstring(&b, "/>", 2);
  else {
    luaL_addchar(&b, '>');
    if (inner) { luaL_addchar(&b, '<'); luaL_addlstring(&b, inner, inlen); luaL_addchar(&b, '>'); }
    add_escaped(&b, text, tlen);
    if (inner) { luaL_addlstring(&b, "</", 2); luaL_addlstring(&b, inner, inlen); luaL_addchar(&b, '>'); }
    luaL_addlstring(&b, "</", 2);
    luaL_addlstring(&b, name, nlen);
    luaL_addchar(&b, '>');
  }
  luaL_pushresult(&b);
  return 1;
}

/*
** circles(indent, list, r) -> the lines indent<circle cx="x" cy="y" r="r"/> of the pairs
** list[1], list[2], list[3], list[4] ..., joined by "\n" (nil for an empty list): the
** dots of a chart, thousands of them, in one string.
*/
static int s_circles (lua_State *L) {
  char rbuf[ND_FIXED_SIZE], xbuf[ND_FIXED_SIZE], ybuf[ND_FIXED_SIZE];
  size_t ilen, rlen, xlen, ylen;
  const char *indent = luaL_checklstring(L, 1, &ilen);
  lua_Integer i, n;
  luaL_Buffer b;
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TNUMBER);
  if (!number_text(L, 3, rbuf, &rlen)) return luaL_argerror(L, 3, "not a finite number");
  n = (lua_Integer)luaL_len(L, 2);
  if (n == 0) { lua_pushnil(L); return 1; }
  luaL_buffinit(L, &b);
  for (i = 1; i <= n; i += 2) {
    if (lua_rawgeti(L, 2, i) != LUA_TNUMBER || !number_text(L, -1, xbuf, &xlen)
        || lua_rawgeti(L, 2, i + 1) != LUA_TNUMBER || !number_text(L, -1, ybuf, &ylen))
      return luaL_error(L, "svg: circles: item %d or %d is not a finite number",
                        (int)i, (int)i + 1);
    lua_pop(L, 2);
    if (i > 1) luaL_addchar(&b, '\n');
    luaL_addlstring(&b, indent, ilen);
    luaL_addlstring(&b, "<circle cx=\"", 12);
    luaL_addlstring(&b, xbuf, xlen);
    luaL_addlstring(&b, "\" cy=\"", 6);
    luaL_addlstring(&b, ybuf, ylen);
    luaL_addlstring(&b, "\" r=\"", 5);
    luaL_addlstring(&b, rbuf, rlen);
    luaL_addlstring(&b, "\"/>", 3);
  }
  luaL_pushresult(&b);
  return 1;
}

static const luaL_Reg funcs[] = {
  {"num", s_num},
  {"esc", s_esc},
  {"attrs", s_attrs},
  {"tag", s_tag},
  {"circles", s_circles},
  {NULL, NULL}
};

int luaopen_ndplan_svg (lua_State *L) {
  luaL_newlib(L, funcs);
  return 1;
}
