/*
** lmodel.c -- Lua binding: ndplan.c.model. A model userdata holds one nd_model_spec (copied
** in, so the estimators can borrow it) and, as its user value, a table with the warnings and
** the source the spec was read from.
**
**   new(spec [, info]) -> model | nil, message     spec: table of canonical fields
**   is(x) -> boolean                               fields() -> canonical field names
**   model:params() model:layer_params(i) model:layers() model:spec() model:warnings()
**   model.<field> for every canonical field (plus `source`), tostring(model)
*/
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "ndplan/model.h"
#include "ndplan_lua.h"
#include "lmodel.h"  /* ND_MODEL_MT, shared with the bindings that take a model */

/* {======================================================================
** Canonical fields: the one table both new() and spec()/__index read
** ======================================================================= */

enum { F_STR, F_INT, F_SMALL, F_BOOL, F_POSITION, F_NORM, F_STACK, F_WIDTHS };

typedef struct field {
  const char *name;
  unsigned char type;
  unsigned char required;
  size_t offset;
} field;

#define FIELD(n, t, req) {#n, t, req, offsetof(nd_model_spec, n)}

static const field fields[] = {
  FIELD(name, F_STR, 1), FIELD(family, F_STR, 0),
  FIELD(hidden_size, F_INT, 1), FIELD(num_layers, F_INT, 1), FIELD(num_heads, F_INT, 1),
  FIELD(num_kv_heads, F_INT, 0), FIELD(head_dim, F_INT, 0), FIELD(ffn_size, F_INT, 0),
  FIELD(vocab_size, F_INT, 1), FIELD(max_position, F_INT, 0),
  FIELD(position, F_POSITION, 0), FIELD(position_count, F_INT, 0),
  FIELD(tie_embeddings, F_BOOL, 0), FIELD(qkv_bias, F_BOOL, 0), FIELD(o_bias, F_BOOL, 0),
  FIELD(mlp_bias, F_BOOL, 0), FIELD(qk_norm, F_BOOL, 0), FIELD(attn_sinks, F_BOOL, 0),
  FIELD(norm, F_NORM, 0), FIELD(norms_per_layer, F_SMALL, 0), FIELD(final_norm, F_BOOL, 0),
  FIELD(embed_norm, F_BOOL, 0), FIELD(embed_proj, F_INT, 0), FIELD(gated_mlp, F_BOOL, 0),
  FIELD(attn_output_gate, F_BOOL, 0),
  FIELD(q_lora_rank, F_INT, 0), FIELD(kv_lora_rank, F_INT, 0),
  FIELD(qk_nope_head_dim, F_INT, 0), FIELD(qk_rope_head_dim, F_INT, 0),
  FIELD(v_head_dim, F_INT, 0),
  FIELD(index_heads, F_INT, 0), FIELD(index_head_dim, F_INT, 0), FIELD(index_topk, F_INT, 0),
  FIELD(num_experts, F_INT, 0), FIELD(top_k, F_INT, 0), FIELD(moe_ffn_size, F_INT, 0),
  FIELD(expert_groups, F_INT, 0), FIELD(groups_per_token, F_INT, 0),
  FIELD(num_shared_experts, F_INT, 0), FIELD(shared_ffn_size, F_INT, 0),
  FIELD(shared_expert_gate, F_BOOL, 0), FIELD(router_bias, F_BOOL, 0),
  FIELD(expert_bias, F_BOOL, 0),
  FIELD(linear_k_heads, F_INT, 0), FIELD(linear_v_heads, F_INT, 0),
  FIELD(linear_k_dim, F_INT, 0), FIELD(linear_v_dim, F_INT, 0), FIELD(conv_kernel, F_INT, 0),
  FIELD(mamba_heads, F_INT, 0), FIELD(mamba_head_dim, F_INT, 0), FIELD(mamba_state, F_INT, 0),
  FIELD(mamba_groups, F_INT, 0), FIELD(mamba_conv, F_INT, 0), FIELD(mamba_chunk, F_INT, 0),
  FIELD(mamba_conv_bias, F_BOOL, 0), FIELD(mamba_proj_bias, F_BOOL, 0),
  FIELD(mamba_norm, F_BOOL, 0), FIELD(mamba_inner, F_INT, 0), FIELD(mamba_dt_rank, F_INT, 0),
  FIELD(mamba_dt_norms, F_BOOL, 0),
  FIELD(sliding_window, F_INT, 0), FIELD(chunked_window, F_BOOL, 0),
  FIELD(mtp_layers, F_INT, 0),
  {"attention", F_STACK, 0, 0}, {"mlp", F_STACK, 0, 0},  /* per-layer kinds */
  {"ffn_sizes", F_WIDTHS, 0, 0},  /* per-layer dense widths (0: ffn_size); nil: none */
  {NULL, 0, 0, 0}
};

#define NFIELDS ((int)(sizeof fields / sizeof fields[0]) - 1)

static int64_t *int_at (nd_model_spec *m, const field *f) {
  return (int64_t *)(void *)((char *)m + f->offset);
}

static int *small_at (nd_model_spec *m, const field *f) {
  return (int *)(void *)((char *)m + f->offset);
}

static int64_t get_int (const nd_model_spec *m, const field *f) {
  return *(const int64_t *)(const void *)((const char *)m + f->offset);
}

static int get_small (const nd_model_spec *m, const field *f) {
  return *(const int *)(const void *)((const char *)m + f->offset);
}

/* Pushes the value of one scalar field. */
static void push_field (lua_State *L, const nd_model_spec *m, const field *f) {
  switch (f->type) {
    case F_STR: lua_pushstring(L, (const char *)m + f->offset); break;
    case F_INT: lua_pushinteger(L, (lua_Integer)get_int(m, f)); break;
    case F_SMALL: lua_pushinteger(L, get_small(m, f)); break;
    case F_BOOL: lua_pushboolean(L, get_small(m, f)); break;
    case F_POSITION: lua_pushstring(L, nd_position_name(m->position)); break;
    case F_NORM: lua_pushstring(L, nd_norm_name(m->norm)); break;
    case F_WIDTHS: {  /* per-layer widths, or nil when every layer takes ffn_size */
      int i, n = (int)(m->num_layers + m->mtp_layers), own = 0;
      for (i = 0; i < n; i++) own |= m->layer[i].ffn_size > 0;
      if (!own) { lua_pushnil(L); break; }
      lua_createtable(L, n, 0);
      for (i = 0; i < n; i++) {
        lua_pushinteger(L, m->layer[i].ffn_size);
        lua_rawseti(L, -2, i + 1);
      }
      break;
    }
    default: {  /* F_STACK: array of kind names, body then MTP */
      int i, n = (int)(m->num_layers + m->mtp_layers);
      int attention = (strcmp(f->name, "attention") == 0);
      lua_createtable(L, n, 0);
      for (i = 0; i < n; i++) {
        lua_pushstring(L, attention ? nd_attention_name(m->layer[i].attention)
                                    : nd_mlp_name(m->layer[i].mlp));
        lua_rawseti(L, -2, i + 1);
      }
      break;
    }
  }
}

/* }====================================================================== */

/* {======================================================================
** Reading a spec table. Each reader leaves the stack as it found it and returns NULL, or
** pushes a message and returns it (the message names the field).
** ======================================================================= */

static const char *bad_type (lua_State *L, const field *f, const char *expected, int idx) {
  return lua_pushfstring(L, "%s: expected %s, got %s", f->name, expected,
                         luaL_typename(L, idx));
}

/* Reads one scalar field, at the top of the stack, into m. */
static const char *read_scalar (lua_State *L, nd_model_spec *m, const field *f) {
  int isint;
  lua_Integer v;
  switch (f->type) {
    case F_STR: {
      size_t len;
      const char *s;
      if (lua_type(L, -1) != LUA_TSTRING) return bad_type(L, f, "a string", -1);
      s = lua_tolstring(L, -1, &len);
      if (len >= ND_NAME_MAX)
        return lua_pushfstring(L, "%s: longer than %d bytes", f->name, ND_NAME_MAX - 1);
      memcpy((char *)m + f->offset, s, len + 1);
      return NULL;
    }
    case F_BOOL:
      if (!lua_isboolean(L, -1)) return bad_type(L, f, "a boolean", -1);
      *small_at(m, f) = lua_toboolean(L, -1);
      return NULL;
    case F_POSITION: case F_NORM: {
      const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
      int k = f->type == F_POSITION ? nd_position_kind(s) : nd_norm_kind(s);
      if (k < 0)
        return lua_pushfstring(L, "%s: expected %s, got %s", f->name,
                               f->type == F_POSITION ? "'rope', 'learned' or 'none'"
                                                     : "'rmsnorm' or 'layernorm'",
                               s ? s : luaL_typename(L, -1));
      *small_at(m, f) = k;
      return NULL;
    }
    default:  /* F_INT, F_SMALL: a number with an integral value, not a numeric string */
      v = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : (isint = 0);
      if (!isint) return bad_type(L, f, "an integer", -1);
      if (v < 0) return lua_pushfstring(L, "%s: must not be negative, got %I", f->name, v);
      if (f->type == F_SMALL) {
        if (v > 1000000) return lua_pushfstring(L, "%s: too large (%I)", f->name, v);
        *small_at(m, f) = (int)v;
      }
      else *int_at(m, f) = (int64_t)v;
      return NULL;
  }
}

/*
** Reads the per-layer kinds from the value at the top of the stack (nil: leave the default;
** a string: every layer; an array: one name per body and MTP layer).
*/
static const char *read_stack (lua_State *L, nd_model_spec *m, const field *f) {
  int attention = (strcmp(f->name, "attention") == 0);
  int i, n = (int)(m->num_layers + m->mtp_layers);
  int t = lua_type(L, -1);
  if (t == LUA_TNIL) return NULL;
  if (t != LUA_TSTRING && t != LUA_TTABLE)
    return bad_type(L, f, "a kind name or an array of them", -1);
  if (t == LUA_TTABLE && (lua_Integer)luaL_len(L, -1) != n)
    return lua_pushfstring(L, "%s: expected %d entries (num_layers + mtp_layers), got %I",
                           f->name, n, (lua_Integer)luaL_len(L, -1));
  for (i = 0; i < n; i++) {
    const char *s;
    int k;
    if (t == LUA_TTABLE) lua_geti(L, -1, i + 1); else lua_pushvalue(L, -1);
    s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    k = attention ? nd_attention_kind(s) : nd_mlp_kind(s);
    if (k < 0) {
      const char *msg = lua_pushfstring(L, "%s: layer %d: unknown kind '%s' (expected %s)",
                                        f->name, i, s ? s : luaL_typename(L, -1),
                                        attention ? "full, sliding, linear, mla, mamba, none,"
                                                    " mamba1 or hybrid"
                                                  : "dense, moe or none");
      lua_remove(L, -2);
      return msg;
    }
    lua_pop(L, 1);
    if (attention) m->layer[i].attention = (unsigned char)k;
    else m->layer[i].mlp = (unsigned char)k;
  }
  return NULL;
}

/*
** Reads the per-layer dense widths from the value at the top of the stack (nil: none; an
** array of integers, one per body and MTP layer, 0 for a layer that takes ffn_size). The
** ranges are nd_model_validate's.
*/
static const char *read_widths (lua_State *L, nd_model_spec *m, const field *f) {
  int i, n = (int)(m->num_layers + m->mtp_layers);
  int t = lua_type(L, -1);
  if (t == LUA_TNIL) return NULL;
  if (t != LUA_TTABLE) return bad_type(L, f, "an array of integers", -1);
  if ((lua_Integer)luaL_len(L, -1) != n)
    return lua_pushfstring(L, "%s: expected %d entries (num_layers + mtp_layers), got %I",
                           f->name, n, (lua_Integer)luaL_len(L, -1));
  for (i = 0; i < n; i++) {
    int isint;
    lua_Integer v;
    lua_geti(L, -1, i + 1);
    v = lua_tointegerx(L, -1, &isint);
    if (!isint || v < 0 || v > INT32_MAX) {
      const char *msg = lua_pushfstring(L, "%s: layer %d: expected a width (an integer >= 0),"
                                        " got %s", f->name, i, luaL_tolstring(L, -1, NULL));
      lua_remove(L, -2);  /* the tolstring copy */
      lua_remove(L, -2);  /* the entry */
      return msg;
    }
    lua_pop(L, 1);
    m->layer[i].ffn_size = (int32_t)v;
  }
  return NULL;
}

/* The core's derived defaults (nd_model_derive) for the fields not given. */
static const char *derive_defaults (lua_State *L, nd_model_spec *m, const int *given) {
  static const struct { const char *name; unsigned bit; } derived[] = {
    {"num_kv_heads", ND_GIVEN_KV_HEADS}, {"head_dim", ND_GIVEN_HEAD_DIM},
    {"position_count", ND_GIVEN_POSITION_COUNT}};
  unsigned mask = 0;
  char err[256];
  int i, k;
  for (i = 0; i < NFIELDS; i++)
    for (k = 0; k < 3; k++)
      if (given[i] && strcmp(fields[i].name, derived[k].name) == 0) mask |= derived[k].bit;
  if (nd_model_derive(m, mask, err, sizeof err) != 0) return lua_pushstring(L, err);
  return NULL;
}

/* Checks that every key of the table at index t is a canonical field (or starts with _). */
static const char *check_keys (lua_State *L, int t, int lookup) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);  /* key */
    if (lua_type(L, -1) != LUA_TSTRING) {
      const char *msg = lua_pushfstring(L, "field names must be strings, got %s",
                                        luaL_typename(L, -1));
      lua_remove(L, -2);
      return msg;
    }
    if (lua_tostring(L, -1)[0] == '_') continue;  /* comments and provenance notes */
    lua_pushvalue(L, -1);
    if (lua_rawget(L, lookup) == LUA_TNIL) {
      const char *msg = lua_pushfstring(L, "unknown field '%s'", lua_tostring(L, -2));
      lua_remove(L, -2);
      lua_remove(L, -2);
      return msg;
    }
    lua_pop(L, 1);
  }
  return NULL;
}

/*
** Reads the spec table at index t into m. Returns NULL, or a message it has pushed.
** Scalars first, so the stack arrays can be checked against num_layers + mtp_layers.
*/
static const char *read_spec (lua_State *L, int t, int lookup, nd_model_spec *m) {
  int given[NFIELDS];
  const char *msg;
  int i, pass;
  memset(given, 0, sizeof given);
  if ((msg = check_keys(L, t, lookup)) != NULL) return msg;
  nd_model_init(m);
  for (pass = 0; pass < 2; pass++) {
    for (i = 0; i < NFIELDS; i++) {
      const field *f = &fields[i];
      if ((f->type == F_STACK || f->type == F_WIDTHS) != (pass == 1)) continue;
      given[i] = (lua_getfield(L, t, f->name) != LUA_TNIL);
      if (!given[i] && f->required)
        msg = lua_pushfstring(L, "%s: missing (a required field)", f->name);
      else if (f->type == F_STACK) msg = read_stack(L, m, f);
      else if (f->type == F_WIDTHS) msg = read_widths(L, m, f);
      else if (given[i]) msg = read_scalar(L, m, f);
      if (msg) { lua_remove(L, -2); return msg; }
      lua_pop(L, 1);
    }
    if (pass == 0) {
      if ((msg = derive_defaults(L, m, given)) != NULL) return msg;
      if (nd_model_default_stack(m) != 0)
        return lua_pushfstring(L, "num_layers: num_layers + mtp_layers must be between 1"
                               " and %d", ND_MAX_LAYERS);
    }
  }
  return NULL;
}

/* }====================================================================== */

static nd_model_spec *check_model (lua_State *L, int i) {
  return (nd_model_spec *)luaL_checkudata(L, i, ND_MODEL_MT);
}

/*
** new(spec [, info]) -> model | nil, message. info may carry `warnings` (array of strings)
** and `source` (string); a copy is kept as the user value.
*/
static int m_new (lua_State *L) {
  nd_model_spec *m;
  const char *msg;
  char err[256];
  luaL_checktype(L, 1, LUA_TTABLE);
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  m = (nd_model_spec *)lua_newuserdatauv(L, sizeof *m, 1);  /* 3 */
  if ((msg = read_spec(L, 1, lua_upvalueindex(1), m)) != NULL) {
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;
  }
  nd_model_number_kinds(m);  /* once per model: the estimators read it */
  if (nd_model_validate(m, err, sizeof err) != 0) {
    luaL_pushfail(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_createtable(L, 0, 2);  /* 4: the user value, info */
  lua_newtable(L);  /* 5: warnings */
  if (!lua_isnil(L, 2)) {
    lua_Integer i, n;
    if (lua_getfield(L, 2, "warnings") != LUA_TNIL) {
      luaL_argexpected(L, lua_istable(L, -1), 2, "info.warnings as an array of strings");
      n = luaL_len(L, -1);
      for (i = 1; i <= n; i++) {
        lua_geti(L, -1, i);
        luaL_argexpected(L, lua_type(L, -1) == LUA_TSTRING, 2,
                         "info.warnings as an array of strings");
        lua_rawseti(L, 5, i);
      }
    }
    lua_pop(L, 1);
    if (lua_getfield(L, 2, "source") != LUA_TNIL)
      luaL_argexpected(L, lua_type(L, -1) == LUA_TSTRING, 2, "info.source as a string");
    lua_setfield(L, -3, "source");
  }
  lua_setfield(L, -2, "warnings");
  lua_setiuservalue(L, 3, 1);
  luaL_setmetatable(L, ND_MODEL_MT);
  return 1;
}

static int m_is (lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, ND_MODEL_MT) != NULL);
  return 1;
}

static int m_fields (lua_State *L) {
  int i;
  lua_createtable(L, NFIELDS, 0);
  for (i = 0; i < NFIELDS; i++) {
    lua_pushstring(L, fields[i].name);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static void set_int (lua_State *L, const char *key, int64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, key);
}

/* params() -> {total, active, total_with_mtp, active_with_mtp, breakdown = {...}} */
static int m_params (lua_State *L) {
  nd_params p;
  nd_model_params(check_model(L, 1), &p);
  lua_createtable(L, 0, 5);
  set_int(L, "total", p.total);
  set_int(L, "active", p.active);
  set_int(L, "total_with_mtp", p.total_with_mtp);
  set_int(L, "active_with_mtp", p.active_with_mtp);
  lua_createtable(L, 0, 9);
  set_int(L, "embedding", p.embedding);
  set_int(L, "attention", p.attention);
  set_int(L, "dense_mlp", p.dense_mlp);
  set_int(L, "routed_experts", p.routed_experts);
  set_int(L, "shared_experts", p.shared_experts);
  set_int(L, "norms", p.norms);
  set_int(L, "router", p.router);
  set_int(L, "head", p.head);
  set_int(L, "mtp", p.mtp);
  lua_setfield(L, -2, "breakdown");
  return 1;
}

/* layer_params(i) -> the buckets of layer i (0-based, MTP layers after the body) */
static int m_layer_params (lua_State *L) {
  const nd_model_spec *m = check_model(L, 1);
  lua_Integer i = luaL_checkinteger(L, 2);
  nd_layer_buckets b;
  luaL_argcheck(L, i >= 0 && i < m->num_layers + m->mtp_layers, 2, "layer out of range");
  nd_layer_params(m, (int)i, &b);
  lua_createtable(L, 0, 11);
  set_int(L, "attention", b.attention);
  set_int(L, "attention_replicated", b.attention_replicated);
  set_int(L, "dense_mlp", b.dense_mlp);
  set_int(L, "shared_experts", b.shared_experts);
  set_int(L, "routed_experts", b.routed_experts);
  set_int(L, "router", b.router);
  set_int(L, "norms", b.norms);
  set_int(L, "mtp_proj", b.mtp_proj);
  set_int(L, "routed_active", b.routed_active);
  set_int(L, "total", b.total);
  set_int(L, "active", b.active);
  return 1;
}

/* layers() -> array of {first (0-based), count, kind, attention, mlp, mtp, ffn_size} */
static int m_layers (lua_State *L) {
  const nd_model_spec *m = check_model(L, 1);
  nd_layer_group *g;
  int i, n = nd_model_groups(m, NULL, 0);
  g = (nd_layer_group *)lua_newuserdatauv(L, (size_t)n * sizeof *g, 0);  /* scratch */
  nd_model_groups(m, g, n);
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, g[i].first); lua_setfield(L, -2, "first");
    lua_pushinteger(L, g[i].count); lua_setfield(L, -2, "count");
    lua_pushstring(L, nd_layer_kind_name(g[i].attention, g[i].mlp));
    lua_setfield(L, -2, "kind");
    lua_pushstring(L, nd_attention_name(g[i].attention)); lua_setfield(L, -2, "attention");
    lua_pushstring(L, nd_mlp_name(g[i].mlp)); lua_setfield(L, -2, "mlp");
    lua_pushboolean(L, g[i].mtp); lua_setfield(L, -2, "mtp");
    if (g[i].mlp == ND_MLP_DENSE) {
      lua_pushinteger(L, g[i].ffn_size);
      lua_setfield(L, -2, "ffn_size");
    }
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* spec() -> table of every canonical field; new(model:spec()) gives the same model */
static int m_spec (lua_State *L) {
  const nd_model_spec *m = check_model(L, 1);
  int i;
  lua_createtable(L, 0, NFIELDS);
  for (i = 0; i < NFIELDS; i++) {
    push_field(L, m, &fields[i]);
    lua_setfield(L, -2, fields[i].name);
  }
  return 1;
}

/* warnings() -> a fresh array of the loader's warnings (empty when there were none) */
static int m_warnings (lua_State *L) {
  lua_Integer i, n;
  check_model(L, 1);
  lua_getiuservalue(L, 1, 1);
  lua_getfield(L, -1, "warnings");
  n = luaL_len(L, -1);
  lua_createtable(L, (int)n, 0);
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, -2, i);
    lua_rawseti(L, -2, i);
  }
  return 1;
}

/* __index: methods first, then canonical fields through the lookup table, then `source` */
static int m_index (lua_State *L) {
  const nd_model_spec *m = check_model(L, 1);
  lua_settop(L, 2);
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;  /* a method */
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(2)) == LUA_TNUMBER) {
    push_field(L, m, &fields[lua_tointeger(L, -1) - 1]);
    return 1;
  }
  if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "source") == 0) {
    lua_getiuservalue(L, 1, 1);
    lua_getfield(L, -1, "source");
    return 1;
  }
  lua_pushnil(L);
  return 1;
}

static int m_tostring (lua_State *L) {
  const nd_model_spec *m = check_model(L, 1);
  nd_params p;
  char buf[256], active[48] = "", mtp[32] = "";
  nd_model_params(m, &p);
  /* billions with two decimals: the precision model cards quote */
  if (p.active != p.total) snprintf(active, sizeof active, ", %.2fB active", p.active / 1e9);
  if (m->mtp_layers > 0) snprintf(mtp, sizeof mtp, " + %d MTP", (int)m->mtp_layers);
  snprintf(buf, sizeof buf, "ndplan.model: %s (%s, %.2fB parameters%s, %d layers%s)",
           m->name, m->family[0] ? m->family : "custom", p.total / 1e9, active,
           (int)m->num_layers, mtp);
  lua_pushstring(L, buf);
  return 1;
}

static const luaL_Reg methods[] = {
  {"params", m_params},
  {"layer_params", m_layer_params},
  {"layers", m_layers},
  {"spec", m_spec},
  {"warnings", m_warnings},
  {NULL, NULL}
};

/* Pushes the lookup table: canonical field name -> its 1-based index in fields[]. */
static void push_lookup (lua_State *L) {
  int i;
  lua_createtable(L, 0, NFIELDS);
  for (i = 0; i < NFIELDS; i++) {
    lua_pushinteger(L, i + 1);
    lua_setfield(L, -2, fields[i].name);
  }
}

/* Builds the metatable once; __index closes over the methods and the lookup table. */
static void create_meta (lua_State *L) {
  if (!luaL_newmetatable(L, ND_MODEL_MT)) { lua_pop(L, 1); return; }
  luaL_newlib(L, methods);
  push_lookup(L);
  lua_pushcclosure(L, m_index, 2);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, m_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, ND_MODEL_MT);  /* getmetatable(model) cannot reach the real one */
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
}

int luaopen_ndplan_model (lua_State *L) {
  create_meta(L);
  lua_createtable(L, 0, 3);
  push_lookup(L);
  lua_pushcclosure(L, m_new, 1);
  lua_setfield(L, -2, "new");
  lua_pushcfunction(L, m_is);
  lua_setfield(L, -2, "is");
  lua_pushcfunction(L, m_fields);
  lua_setfield(L, -2, "fields");
  return 1;
}
