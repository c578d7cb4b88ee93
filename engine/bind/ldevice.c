/*
** ldevice.c -- Lua binding: ndplan.c.device, devices as read-only userdata.
**
** The Lua side speaks the canonical table (SI units, the nd_device field names):
**   { name, description, peak_flops = {bf16, fp16, fp8, mxfp8, nvfp4, mxfp4}, hbm_bytes,
**     hbm_bandwidth,
**     scale_up = {domain_size, bandwidth, latency}, scale_out = {bandwidth, latency},
**     host_link = {bandwidth, latency},
**     efficiency = {one number per nd_efficiency_fields row: gemm, gemm_half_size, ...},
**     reserve_bytes, node_size }
** new(t) reads it, totable() writes it back, and __index serves the same names. One table
** of field descriptors drives all three, so they cannot drift apart.
**
** new(t) -> device | nil, message: a missing, mistyped or out-of-range field is an
** expected failure (the table usually comes from a user's file); a non-table raises.
*/
#include <stddef.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "ndplan/device.h"
#include "ndplan/fields.h"
#include "ndplan/precision.h"
#include "ndplan_lua.h"
#include "ndplan/units.h"
#include "ldevice.h"

typedef enum { F_STRING, F_NUMBER, F_INT } field_type;

typedef struct field {
  const char *group;      /* sub-table name, or NULL for a top-level field */
  const char *key;
  size_t offset;          /* into nd_device */
  field_type type;
  int required;           /* 0: absent keeps the nd_device_init default */
} field;

#define OFF(m) offsetof(nd_device, m)
#define N_BEFORE_EFFICIENCY 17  /* fields[] rows before the efficiency group */

static const field fields[] = {
  {NULL, "name", OFF(name), F_STRING, 1},
  {NULL, "description", OFF(description), F_STRING, 0},
  {"peak_flops", "bf16", OFF(peak_flops[ND_PREC_BF16]), F_NUMBER, 1},
  {"peak_flops", "fp16", OFF(peak_flops[ND_PREC_FP16]), F_NUMBER, 0},
  {"peak_flops", "fp8", OFF(peak_flops[ND_PREC_FP8]), F_NUMBER, 0},
  {"peak_flops", "mxfp8", OFF(peak_flops[ND_PREC_MXFP8]), F_NUMBER, 0},
  {"peak_flops", "nvfp4", OFF(peak_flops[ND_PREC_NVFP4]), F_NUMBER, 0},
  {"peak_flops", "mxfp4", OFF(peak_flops[ND_PREC_MXFP4]), F_NUMBER, 0},
  {NULL, "hbm_bytes", OFF(hbm_bytes), F_NUMBER, 1},
  {NULL, "hbm_bandwidth", OFF(hbm_bandwidth), F_NUMBER, 1},
  {"scale_up", "domain_size", OFF(scale_up.domain_size), F_INT, 1},
  {"scale_up", "bandwidth", OFF(scale_up.bandwidth), F_NUMBER, 1},
  {"scale_up", "latency", OFF(scale_up.latency), F_NUMBER, 0},
  {"scale_out", "bandwidth", OFF(scale_out.bandwidth), F_NUMBER, 1},
  {"scale_out", "latency", OFF(scale_out.latency), F_NUMBER, 0},
  {"host_link", "bandwidth", OFF(host_link.bandwidth), F_NUMBER, 1},
  {"host_link", "latency", OFF(host_link.latency), F_NUMBER, 0},
  /* the efficiency rows come from the core's descriptors (field_at) */
  {NULL, "reserve_bytes", OFF(reserve_bytes), F_NUMBER, 0},
  {NULL, "node_size", OFF(node_size), F_INT, 0},
  {NULL, NULL, 0, F_NUMBER, 0}
};

/*
** Row i of the canonical table: fields[] with the efficiency group, one row per core
** descriptor (ndplan/fields.h), between host_link and reserve_bytes. Returns 0 past the end.
*/
static int field_at (int i, field *out) {
  int n;
  const nd_field *e = nd_efficiency_fields(&n);
  if (i >= N_BEFORE_EFFICIENCY && i < N_BEFORE_EFFICIENCY + n) {
    const nd_field *d = &e[i - N_BEFORE_EFFICIENCY];
    out->group = "efficiency";
    out->key = d->name;
    out->offset = OFF(efficiency) + d->offset;
    out->type = F_NUMBER;
    out->required = 0;
    return 1;
  }
  *out = fields[i < N_BEFORE_EFFICIENCY ? i : i - n];
  return out->key != NULL;
}



/*
** {======================================================
** Canonical table <-> nd_device
** =======================================================
*/

static size_t field_size (const field *f) {
  if (f->type == F_STRING)
    return f->offset == OFF(name) ? ND_DEVICE_NAME_MAX : ND_DEVICE_DESC_MAX;
  return 0;
}

/* Pushes field f of dev. */
static void push_field (lua_State *L, const nd_device *dev, const field *f) {
  const char *p = (const char *)dev + f->offset;
  switch (f->type) {
    case F_STRING: lua_pushstring(L, p); break;
    case F_INT: lua_pushinteger(L, *(const int *)(const void *)p); break;
    default: lua_pushnumber(L, *(const double *)(const void *)p); break;
  }
}

/* Pushes the sub-table `group` of dev (or the whole canonical table for NULL). */
static void push_group (lua_State *L, const nd_device *dev, const char *group) {
  field fb, *f = &fb;
  int i;
  lua_newtable(L);
  for (i = 0; field_at(i, f); i++) {
    if (group && (!f->group || strcmp(f->group, group) != 0)) continue;
    if (!group && f->group) {
      if (lua_getfield(L, -1, f->group) == LUA_TNIL) {
        lua_pop(L, 1);
        push_group(L, dev, f->group);
        lua_setfield(L, -2, f->group);
      }
      else lua_pop(L, 1);
      continue;
    }
    push_field(L, dev, f);
    lua_setfield(L, -2, f->key);
  }
}

/* Pushes nil, "field 'group.key'<sep><message>"; returns 0. */
static int field_error (lua_State *L, const field *f, const char *sep, const char *fmt,
                        const char *arg) {
  luaL_pushfail(L);
  if (f->group) lua_pushfstring(L, "field '%s.%s'%s", f->group, f->key, sep);
  else lua_pushfstring(L, "field '%s'%s", f->key, sep);
  lua_pushfstring(L, fmt, arg);
  lua_concat(L, 2);
  return 0;
}

static int missing (lua_State *L, const field *f) {
  return field_error(L, f, " ", "%s", "is missing");
}

/*
** Reads field f from the table at index t into dev. Returns 1 if set, 2 if absent and
** optional; 0 after pushing nil, message.
*/
static int read_field (lua_State *L, int t, const field *f, nd_device *dev) {
  char *p = (char *)dev + f->offset;
  int type;
  if (f->group) {
    type = lua_getfield(L, t, f->group);
    if (type == LUA_TNIL) {
      lua_pop(L, 1);
      return f->required ? missing(L, f) : 2;
    }
    if (type != LUA_TTABLE) {
      luaL_pushfail(L);
      lua_pushfstring(L, "field '%s': expected a table, got %s", f->group,
                      luaL_typename(L, -2));
      return 0;
    }
    type = lua_getfield(L, -1, f->key);
    lua_remove(L, -2);
  }
  else type = lua_getfield(L, t, f->key);
  if (type == LUA_TNIL) {
    lua_pop(L, 1);
    return f->required ? missing(L, f) : 2;
  }
  switch (f->type) {
    case F_STRING: {
      size_t len;
      const char *s;
      if (type != LUA_TSTRING)
        return field_error(L, f, ": ", "expected a string, got %s", luaL_typename(L, -1));
      s = lua_tolstring(L, -1, &len);
      if (len >= field_size(f) || strlen(s) != len)
        return field_error(L, f, " ", "%s", "is too long or contains a NUL byte");
      memcpy(p, s, len + 1);
      break;
    }
    case F_INT: {
      int isint;
      lua_Integer v = lua_tointegerx(L, -1, &isint);
      if (type != LUA_TNUMBER || !isint || v < 0 || v > 1 << 24)
        return field_error(L, f, ": ", "expected a whole number of devices, got %s",
                           luaL_tolstring(L, -1, NULL));
      *(int *)(void *)p = (int)v;
      break;
    }
    default:
      if (type != LUA_TNUMBER)
        return field_error(L, f, ": ", "expected a number, got %s", luaL_typename(L, -1));
      *(double *)(void *)p = (double)lua_tonumber(L, -1);
      break;
  }
  lua_pop(L, 1);
  return 1;
}

static int find_field (const char *group, const char *key) {
  field f;
  int i;
  for (i = 0; field_at(i, &f); i++)
    if (strcmp(f.key, key) == 0
        && (group ? f.group && strcmp(f.group, group) == 0 : f.group == NULL))
      return 1;
  return 0;
}

static int is_group (const char *key) {
  field f;
  int i;
  for (i = 0; field_at(i, &f); i++)
    if (f.group && strcmp(f.group, key) == 0) return 1;
  return 0;
}

/*
** Refuses keys that are not canonical fields (a typo would otherwise be silently ignored).
** Returns 1, or 0 after pushing nil, message.
*/
static int check_keys (lua_State *L, int t, const char *group) {
  lua_pushnil(L);
  while (lua_next(L, t)) {                      /* key value */
    const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
    if (k && !group && is_group(k)) {
      if (lua_istable(L, -1) && !check_keys(L, lua_gettop(L), k)) return 0;
    }
    else if (!k || !find_field(group, k)) {
      const char *name = k ? k : luaL_tolstring(L, -2, NULL);
      luaL_pushfail(L);
      lua_pushfstring(L, "unknown field '%s%s%s'", group ? group : "", group ? "." : "",
                      name);
      return 0;
    }
    lua_pop(L, 1);
  }
  return 1;
}

/* }====================================================== */


/*
** {======================================================
** Userdata
** =======================================================
*/

static nd_device *check_dev (lua_State *L, int i) {
  return (nd_device *)luaL_checkudata(L, i, ND_DEVICE_MT);
}

/* new(t) -> device | nil, message */
static int d_new (lua_State *L) {
  nd_device tmp;
  nd_device *dev;
  char err[256];
  field f;
  int i;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  if (!check_keys(L, 1, NULL)) return 2;
  nd_device_init(&tmp);
  for (i = 0; field_at(i, &f); i++)
    if (read_field(L, 1, &f, &tmp) == 0) return 2;
  nd_device_complete(&tmp);  /* derived defaults (gemm_half_size) */
  if (nd_device_validate(&tmp, err, sizeof err) != 0) {
    luaL_pushfail(L);
    lua_pushfstring(L, "device '%s': %s", tmp.name, err);
    return 2;
  }
  dev = (nd_device *)lua_newuserdatauv(L, sizeof(nd_device), 0);
  *dev = tmp;
  luaL_setmetatable(L, ND_DEVICE_MT);
  return 1;
}

/* defaults() -> the canonical table of nd_device_init (hardware numbers 0) */
static int d_defaults (lua_State *L) {
  nd_device dev;
  nd_device_init(&dev);
  push_group(L, &dev, NULL);
  return 1;
}

/* is(x) -> true if x is a device */
static int d_is (lua_State *L) {
  lua_pushboolean(L, nd_testdevice(L, 1) != NULL);
  return 1;
}

/* precisions() -> the peak slots: {"bf16", "fp16", "fp8", "mxfp8", "nvfp4", "mxfp4"} */
static int d_precisions (lua_State *L) {
  int i;
  lua_createtable(L, ND_PREC_COUNT, 0);
  for (i = 0; i < ND_PREC_COUNT; i++) {
    lua_pushstring(L, nd_precision_name((nd_precision)i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* recipes() -> the precision recipes, in table order: {{name=, family=, scaling=,
   gemm_precision=, element_bytes=, quant_bytes=, ...}, ...}; recipes().default_fp8 */
static int d_recipes (lua_State *L) {
  int i;
  lua_createtable(L, ND_RECIPE_COUNT, 1);
  for (i = 0; i < ND_RECIPE_COUNT; i++) {
    const nd_recipe *r = nd_recipe_get((nd_recipe_id)i);
    lua_createtable(L, 0, 12);
    lua_pushstring(L, r->name); lua_setfield(L, -2, "name");
    lua_pushstring(L, r->family); lua_setfield(L, -2, "family");
    lua_pushstring(L, r->scaling); lua_setfield(L, -2, "scaling");
    lua_pushstring(L, nd_precision_name(r->gemm)); lua_setfield(L, -2, "gemm_precision");
    lua_pushnumber(L, r->element_bytes); lua_setfield(L, -2, "element_bytes");
    lua_pushnumber(L, nd_recipe_quant_bytes(r)); lua_setfield(L, -2, "quant_bytes");
    lua_pushinteger(L, r->block); lua_setfield(L, -2, "block");
    lua_pushinteger(L, r->weight_block); lua_setfield(L, -2, "weight_block");
    lua_pushboolean(L, r->weight_2d); lua_setfield(L, -2, "weight_2d");
    lua_pushnumber(L, r->scale_bytes); lua_setfield(L, -2, "scale_bytes");
    lua_pushinteger(L, r->copies); lua_setfield(L, -2, "copies");
    lua_pushinteger(L, r->bf16_first); lua_setfield(L, -2, "bf16_first_layers");
    lua_pushinteger(L, r->bf16_last); lua_setfield(L, -2, "bf16_last_layers");
    lua_pushstring(L, r->bf16_parts); lua_setfield(L, -2, "keeps_bf16");
    lua_pushstring(L, r->source); lua_setfield(L, -2, "source");
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushstring(L, nd_recipe_get(ND_RECIPE_FP8_DEFAULT)->name);
  lua_setfield(L, -2, "default_fp8");
  return 1;
}

/* dev:peak_flops(prec) -> FLOP/s (0 if unsupported); prec is a peak slot ("bf16" by
   default) or a recipe name ("fp8:mxfp8": the slot its GEMMs run at) */
static int m_peak_flops (lua_State *L) {
  const nd_device *dev = check_dev(L, 1);
  const char *name = luaL_optstring(L, 2, "bf16");
  nd_precision p;
  nd_recipe_id r;
  if (nd_precision_parse(name, &p) == 0) {}
  else if (nd_recipe_parse(name, &r) == 0) p = nd_recipe_get(r)->gemm;
  else return luaL_argerror(L, 2, lua_pushfstring(L, "unknown precision '%s'", name));
  lua_pushnumber(L, nd_device_peak_flops(dev, p));
  return 1;
}

/* dev:gemm_efficiency(flops) -> fraction of peak for one GEMM of that size */
static int m_gemm_efficiency (lua_State *L) {
  const nd_device *dev = check_dev(L, 1);
  lua_Number flops = luaL_checknumber(L, 2);
  luaL_argcheck(L, flops >= 0, 2, "GEMM size must not be negative");
  lua_pushnumber(L, nd_device_gemm_efficiency(dev, flops));
  return 1;
}

/* dev:totable() -> the canonical table (a fresh copy) */
static int m_totable (lua_State *L) {
  push_group(L, check_dev(L, 1), NULL);
  return 1;
}

/*
** __index(dev, key): methods first (upvalue 1), then fields by name through the lookup
** table in upvalue 2 (name -> descriptor index, or true for a group).
*/
static int m_index (lua_State *L) {
  const nd_device *dev = check_dev(L, 1);
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  lua_pushvalue(L, 2);
  switch (lua_rawget(L, lua_upvalueindex(2))) {
    case LUA_TNUMBER: {
      field f;
      field_at((int)lua_tointeger(L, -1), &f);
      push_field(L, dev, &f);
      return 1;
    }
    case LUA_TBOOLEAN:
      push_group(L, dev, lua_tostring(L, 2));
      return 1;
    default:
      return luaL_error(L, "device has no field '%s'", luaL_tolstring(L, 2, NULL));
  }
}

static int m_newindex (lua_State *L) {
  return luaL_error(L, "device fields are read-only: derive a new device with "
                       "{base = ..., <fields>}");
}

static int m_tostring (lua_State *L) {
  const nd_device *dev = check_dev(L, 1);
  char hbm[32], hbw[32], up[32], out[32];
  nd_format_bytes(hbm, sizeof hbm, dev->hbm_bytes, 1);  /* capacity in GiB, as tools show it */
  nd_format_bytes(hbw, sizeof hbw, dev->hbm_bandwidth, 0);
  nd_format_bytes(up, sizeof up, dev->scale_up.bandwidth, 0);
  nd_format_bytes(out, sizeof out, dev->scale_out.bandwidth, 0);
  lua_pushfstring(L, "device %s: %f TFLOP/s bf16, %s HBM at %s/s, scale-up %d x %s/s, "
                  "scale-out %s/s", dev->name, dev->peak_flops[ND_PREC_BF16] / 1e12, hbm,
                  hbw, dev->scale_up.domain_size, up, out);
  return 1;
}

static const luaL_Reg methods[] = {
  {"peak_flops", m_peak_flops},
  {"gemm_efficiency", m_gemm_efficiency},
  {"totable", m_totable},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"new", d_new},
  {"defaults", d_defaults},
  {"is", d_is},
  {"precisions", d_precisions},
  {"recipes", d_recipes},
  {NULL, NULL}
};

/* Builds the metatable once: __index closes over the methods and the field lookup. */
static void create_meta (lua_State *L) {
  field f;
  int i;
  luaL_newmetatable(L, ND_DEVICE_MT);           /* mt */
  luaL_newlib(L, methods);                      /* mt methods */
  lua_newtable(L);                              /* mt methods lookup */
  for (i = 0; field_at(i, &f); i++) {
    if (f.group) lua_pushboolean(L, 1);
    else lua_pushinteger(L, i);
    lua_setfield(L, -2, f.group ? f.group : f.key);
  }
  lua_pushcclosure(L, m_index, 2);              /* mt __index */
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, m_newindex);
  lua_setfield(L, -2, "__newindex");
  lua_pushcfunction(L, m_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, ND_DEVICE_MT);  /* getmetatable(device) cannot reach the real one */
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
}

int luaopen_ndplan_device (lua_State *L) {
  create_meta(L);
  luaL_newlib(L, funcs);
  return 1;
}
