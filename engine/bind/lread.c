/*
** lread.c -- what the bindings read from Lua: costs, op switches, strategy tables (with
** their pipeline layouts and per-layer plans), jobs, recipe and schedule names. Misuse
** raises, naming the field and what was expected.
*/
#include <stddef.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "ndplan/estimate.h"
#include "ndplan/fields.h"
#include "ndplan/layout.h"
#include "ndplan/search.h"
#include "lestimate.h"
#include "llazy.h"

/*
** Name lookups the readers make on every call, one Lua table each per state, kept in the
** registry: a cost's name -> its field's index in nd_cost_fields, a strategy key -> its
** index in nd_strategy_keys. A key read from the caller's table is then found by its
** (already hashed) Lua string.
*/
static char cost_lookup_id, strategy_lookup_id;

static int push_lookup (lua_State *L, const char *id) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, id) != LUA_TNIL) return lua_gettop(L);
  lua_pop(L, 1);
  lua_newtable(L);
  if (id == &cost_lookup_id) {
    int i, n;
    const nd_field *f = nd_cost_fields(&n);
    for (i = 0; i < n; i++) { lua_pushinteger(L, i); lua_setfield(L, -2, f[i].name); }
  }
  else {
    int k;
    for (k = 0; k < ND_KEY_COUNT; k++) { lua_pushinteger(L, k); lua_setfield(L, -2, nd_strategy_keys[k]); }
  }
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, id);
  return lua_gettop(L);
}

void nd_read_costs (lua_State *L, int t, nd_costs *c) {
  int n, names;
  const nd_field *table = nd_cost_fields(&n);
  const nd_costs *packed;
  if (!lua_isnoneornil(L, t) && (packed = (const nd_costs *)luaL_testudata(L, t, COSTS_MT))) {
    *c = *packed;  /* read once (pack_costs) */
    return;
  }
  nd_costs_init(c);
  if (lua_isnoneornil(L, t)) return;
  luaL_checktype(L, t, LUA_TTABLE);
  t = lua_absindex(L, t);
  names = push_lookup(L, &cost_lookup_id);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
    int found;
    lua_pushvalue(L, -2);
    found = lua_type(L, -1) == LUA_TSTRING && lua_rawget(L, names) == LUA_TNUMBER;
    if (!found) luaL_error(L, "costs: unknown field '%s'", key);
    if (!lua_isnumber(L, -2)) luaL_error(L, "costs.%s: expected a number", key);
    *nd_field_slot(c, &table[lua_tointeger(L, -1)]) = lua_tonumber(L, -2);
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
}

/* The integer at index i (dflt when nil); anything else raises, naming key. */
static int check_int (lua_State *L, int i, const char *key, int dflt) {
  int isnum;
  lua_Integer v;
  if (lua_type(L, i) == LUA_TNIL) return dflt;
  v = lua_tointegerx(L, i, &isnum);
  if (!isnum) luaL_error(L, "%s: expected an integer, got %s", key, luaL_typename(L, i));
  if (v < -1000000000 || v > 1000000000) luaL_error(L, "%s: %I is out of range", key, v);
  return (int)v;
}

static int get_int (lua_State *L, int t, const char *key, int dflt) {
  int v;
  lua_getfield(L, t, key);
  v = check_int(L, -1, key, dflt);
  lua_pop(L, 1);
  return v;
}

/* Raises "key: expected what, got <the type of the value at index i>". */
static int expected (lua_State *L, int i, const char *key, const char *what) {
  return luaL_error(L, "%s: expected %s, got %s", key, what, luaL_typename(L, i));
}

/* Pushes "a, b or c" for the core's names name(0) .. name(n - 1); returns it. */
static const char *enum_words (lua_State *L, const char *(*name)(int), int n) {
  const char *names[16];  /* the core's enums are shorter */
  luaL_Buffer b;
  int i;
  if (n > 15) n = 15;
  for (i = 0; i < n; i++) names[i] = name(i);
  names[n] = NULL;
  luaL_buffinit(L, &b);
  nd_add_names(&b, names, "or");
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

const char *nd_recompute_word (int i) { return nd_recompute_name((nd_recompute)i); }

/* A set of op switches from the array of names on top of the stack, as a mask; `layer` > 0
   names the element of a per-layer list in the error. */
unsigned nd_read_ops (lua_State *L, const char *key, lua_Integer layer) {
  lua_Integer i, n;
  unsigned mask = 0;
  if (layer > 0 && !lua_istable(L, -1))
    luaL_error(L, "%s[%I]: expected an array of op names", key, layer);
  if (!lua_istable(L, -1)) expected(L, -1, key, "an array of op names");
  n = luaL_len(L, -1);
  for (i = 1; i <= n; i++) {
    int op = 0;  /* luaL_error does not return; clang cannot tell */
    lua_geti(L, -1, i);
    if (lua_type(L, -1) != LUA_TSTRING || nd_op_parse(lua_tostring(L, -1), &op) != 0) {
      const char *ops = enum_words(L, nd_op_name, ND_OP_COUNT);
      if (layer > 0) luaL_error(L, "%s[%I][%I]: expected %s", key, layer, i, ops);
      luaL_error(L, "%s[%I]: expected %s", key, i, ops);
    }
    mask |= ND_OP_BIT(op);
    lua_pop(L, 1);
  }
  return mask;
}

/*
** A strategy table is read in one pass over its keys (most of the 33 are absent from a
** typical strategy): each value goes to its key's slot on the stack, base + its index in
** nd_strategy_keys, and its bit into a mask of the keys given; the fields are then read
** from the slots of the keys given.
*/
typedef struct slots {
  int base;                 /* the stack index of key 0's slot; the first unknown key's
                               after the last */
  unsigned long long given; /* bit k: key k is in the table */
  lua_Integer job[3];       /* the job's fields (nd_job_limits' order) when read: 0 when
                               absent or no integer */
  int unknown;              /* a key neither a strategy key nor skipped is in the table */
  int general;              /* a key false in ignore is (nd_read_args) */
} slots;

_Static_assert(ND_KEY_COUNT <= 64, "a strategy key is a bit of slots.given");

#define SLOT(k) (sl->base + ND_KEY_##k)
#define GIVEN(k) ((sl->given >> ND_KEY_##k) & 1u)

static void read_layout (lua_State *L, const slots *sl, nd_strategy *st);

static int slot_int (lua_State *L, const slots *sl, int k, int dflt) {
  if (!((sl->given >> k) & 1u)) return dflt;
  return check_int(L, sl->base + k, nd_strategy_keys[k], dflt);
}

static int slot_bool (lua_State *L, const slots *sl, int k, int dflt) {
  int i = sl->base + k;
  if (!((sl->given >> k) & 1u)) return dflt;
  if (lua_isboolean(L, i)) return lua_toboolean(L, i);
  if (lua_isinteger(L, i)) return lua_tointeger(L, i) != 0;
  return luaL_error(L, "%s: expected a boolean, got %s", nd_strategy_keys[k],
                    luaL_typename(L, i));
}

/* Raises for the key on top, no strategy key: an unknown field, or an unknown argument of
   nd.estimate's when the table is its arguments (`ignore` given). */
static void unknown_key (lua_State *L, int ignore) {
  if (ignore) {  /* nd.estimate's own arguments: its misuse, at its caller's place (level 2:
                    nd.estimate called this binding) */
    const char *name = luaL_tolstring(L, -1, NULL);
    luaL_where(L, 2);
    lua_pushfstring(L, "%snd.estimate: unknown argument '%s'", lua_tostring(L, -1), name);
    lua_error(L);
  }
  luaL_error(L, "strategy: unknown field '%s'",
             lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?");
}

/* The storage of a per-layer plan being read, zeroed on first use (the layers a table
   does not state keep everything, with the strategy's switches). */
static nd_layer_plan *plan_storage (nd_layer_plan *plan, int *started) {
  if (!*started) { memset(plan, 0, sizeof *plan); *started = 1; }
  return plan;
}

const nd_job_limit nd_job_limits[3] = {
  {"devices", 1000000000}, {"global_batch", 1000000000000000}, {"seq_len", 1000000000}};

/*
** The lookup of a table read with the set `ignore` (nd.estimate's arguments): the strategy
** keys' slots, each other key true in ignore -> KEY_SKIP, or KEY_JOB - i for the job's field
** i, and each key false in ignore -> KEY_GENERAL, or its slot + GENERAL_BIT for a strategy
** key (for nd_read_args: a key only the general path takes; nd_read_strategy reads a
** strategy key as one, and takes any other as unknown). Built once per ignore table (kept
** by it, weakly, in the registry): a set that is not changed after its first use.
*/
#define KEY_UNKNOWN (-100)
#define KEY_GENERAL (-10)
#define KEY_SKIP (-1)
#define KEY_JOB (-2)
#define GENERAL_BIT 0x100
#define SLOT_MASK 0xff
_Static_assert(ND_KEY_COUNT <= SLOT_MASK, "a slot is a code's low bits");

/* Pushes the merged lookup of the strategy keys and the set at index ignore. */
static void push_merged_lookup (lua_State *L, int ignore) {
  int keys = push_lookup(L, &strategy_lookup_id), i;
  nd_push_copy(L, keys);
  lua_pushnil(L);
  while (lua_next(L, ignore)) {
    int code, slot;
    if (lua_type(L, -2) != LUA_TSTRING) { lua_pop(L, 1); continue; }
    code = lua_toboolean(L, -1) ? KEY_SKIP : KEY_GENERAL;
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    slot = lua_rawget(L, -3) == LUA_TNUMBER ? (int)lua_tointeger(L, -1) : -1;
    lua_pop(L, 1);
    if (slot >= 0 && code == KEY_SKIP) continue;  /* a strategy key is one wherever else */
    if (slot >= 0) code = slot | GENERAL_BIT;
    else if (code == KEY_SKIP)
      for (i = 0; i < 3; i++)
        if (strcmp(lua_tostring(L, -1), nd_job_limits[i].key) == 0) code = KEY_JOB - i;
    lua_pushvalue(L, -1);
    lua_pushinteger(L, code);
    lua_rawset(L, -4);
  }
  lua_remove(L, keys);
}

/*
** A lookup's codes by the address of its keys' strings: the caller's key is found by the
** address lua_tostring gives, with no Lua table read. The lookup table (the index's user
** value) keeps its key strings alive, so an address the index holds is that string's alone;
** a key string Lua did not intern, or one of no key, is not found there and is looked up in
** the table (the index holds only the lookup's own strings, never a caller's).
*/
#define INDEX_SLOTS 128  /* a power of two, over twice the keys of a lookup */
typedef struct key_index {
  const char *key[INDEX_SLOTS];
  int code[INDEX_SLOTS];
} key_index;

static unsigned index_slot (const char *p) {
  size_t u = (size_t)p;
  return (unsigned)((u >> 4) ^ (u >> 11)) & (INDEX_SLOTS - 1);
}

/* Pushes the index of the lookup on top, which it replaces (as the index's user value). */
static key_index *index_lookup (lua_State *L) {
  key_index *ix = (key_index *)lua_newuserdatauv(L, sizeof *ix, 1);
  int n = 0;
  memset(ix, 0, sizeof *ix);
  lua_insert(L, -2);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    if (lua_type(L, -2) == LUA_TSTRING && ++n < INDEX_SLOTS / 2) {
      const char *p = lua_tostring(L, -2);
      unsigned h = index_slot(p);
      while (ix->key[h]) h = (h + 1) & (INDEX_SLOTS - 1);
      ix->key[h] = p;
      ix->code[h] = (int)lua_tointeger(L, -1);
    }
    lua_pop(L, 1);
  }
  lua_setiuservalue(L, -2, 1);
  return ix;
}

/* The code of the key string at address p (1), or 0: not in the index. */
static int index_find (const key_index *ix, const char *p, int *code) {
  unsigned h = index_slot(p);
  for (; ix->key[h]; h = (h + 1) & (INDEX_SLOTS - 1))
    if (ix->key[h] == p) { *code = ix->code[h]; return 1; }
  return 0;
}

static char strategy_index_id, merged_index_id;

/* Pushes the index of the lookup for a table read with the set at ignore (0: none). */
static const key_index *push_index (lua_State *L, int ignore) {
  const key_index *ix;
  if (!ignore) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &strategy_index_id) == LUA_TUSERDATA)
      return (const key_index *)lua_touserdata(L, -1);
    lua_pop(L, 1);
    push_lookup(L, &strategy_lookup_id);
    ix = index_lookup(L);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &strategy_index_id);
    return ix;
  }
  nd_push_weak_keyed(L, &merged_index_id);  /* ignore -> its index, weak in the sets */
  lua_pushvalue(L, ignore);
  if (lua_rawget(L, -2) == LUA_TUSERDATA) {
    lua_remove(L, -2);
    return (const key_index *)lua_touserdata(L, -1);
  }
  lua_pop(L, 1);
  push_merged_lookup(L, ignore);
  ix = index_lookup(L);
  lua_pushvalue(L, ignore);
  lua_pushvalue(L, -2);
  lua_rawset(L, -4);
  lua_remove(L, -2);
  return ix;
}

/* The pass over the table at t: its values into their slots above the index it pushes (the
   caller pops them all), the first unknown key after them. */
static void read_slots (lua_State *L, int t, int ignore, slots *sl) {
  const key_index *ix = push_index(L, ignore);
  int at = lua_gettop(L);
  luaL_checkstack(L, ND_KEY_COUNT + LUA_MINSTACK, "strategy");
  sl->base = at + 1;
  sl->given = 0;
  sl->job[0] = sl->job[1] = sl->job[2] = 0;
  sl->unknown = sl->general = 0;
  lua_settop(L, sl->base + ND_KEY_COUNT);
  lua_pushnil(L);
  while (lua_next(L, t)) {  /* key, value */
    int k = KEY_UNKNOWN;
    if (lua_type(L, -2) == LUA_TSTRING && !index_find(ix, lua_tostring(L, -2), &k)) {
      lua_getiuservalue(L, at, 1);  /* the lookup itself */
      lua_pushvalue(L, -3);
      if (lua_rawget(L, -2) == LUA_TNUMBER) k = (int)lua_tointeger(L, -1);
      lua_pop(L, 2);
    }
    if (k >= 0) {
      sl->general |= (k & GENERAL_BIT) != 0;
      k &= SLOT_MASK;
      lua_replace(L, sl->base + k);
      sl->given |= 1ull << k;
      continue;
    }
    if (k <= KEY_JOB && k > KEY_JOB - 3 && lua_isinteger(L, -1))
      sl->job[KEY_JOB - k] = lua_tointeger(L, -1);
    lua_pop(L, 1);
    sl->general |= k == KEY_GENERAL;
    if ((k == KEY_UNKNOWN || k == KEY_GENERAL) && !sl->unknown) {
      lua_copy(L, -1, sl->base + ND_KEY_COUNT);  /* raised after the pass */
      sl->unknown = 1;
    }
  }
}

/* Raises for the first unknown key of the pass, if any. */
static void check_unknown (lua_State *L, const slots *sl, int ignore) {
  if (!sl->unknown) return;
  lua_pushvalue(L, sl->base + ND_KEY_COUNT);
  unknown_key(L, ignore);
}

static void read_fields (lua_State *L, const slots *sl, nd_strategy *st, nd_layer_plan *plan);

void nd_read_strategy (lua_State *L, int t, int ignore, nd_strategy *st,
                       nd_layer_plan *plan) {
  int top = lua_gettop(L);
  slots sl;
  nd_strategy_init(st);
  luaL_checktype(L, t, LUA_TTABLE);
  t = lua_absindex(L, t);
  if (ignore) ignore = lua_absindex(L, ignore);
  read_slots(L, t, ignore, &sl);
  check_unknown(L, &sl, ignore);
  read_fields(L, &sl, st, plan);
  lua_settop(L, top);
}

int nd_read_args (lua_State *L, int t, int ignore, nd_strategy *st, nd_layer_plan *plan,
                  nd_job *job) {
  int top = lua_gettop(L), i;
  slots sl;
  nd_strategy_init(st);
  luaL_checktype(L, t, LUA_TTABLE);
  luaL_checktype(L, ignore, LUA_TTABLE);
  t = lua_absindex(L, t);
  ignore = lua_absindex(L, ignore);
  read_slots(L, t, ignore, &sl);
  for (i = 0; i < 3; i++) sl.general |= sl.job[i] < 1 || sl.job[i] > nd_job_limits[i].max;
  if (sl.general) {  /* the general path's, messages and all */
    lua_settop(L, top);
    return 0;
  }
  check_unknown(L, &sl, ignore);
  job->devices = (int)sl.job[0];
  job->global_batch = (long long)sl.job[1];
  job->seq_len = (int)sl.job[2];
  read_fields(L, &sl, st, plan);
  lua_settop(L, top);
  return 1;
}

/* The fields of a strategy from its slots (read_slots). */
static void read_fields (lua_State *L, const slots *sl, nd_strategy *st, nd_layer_plan *plan) {
  int started = 0;
  st->dp = slot_int(L, sl, ND_KEY_DP, 0);
  st->tp = slot_int(L, sl, ND_KEY_TP, 1);
  st->pp = slot_int(L, sl, ND_KEY_PP, 1);
  st->vpp = slot_int(L, sl, ND_KEY_VPP, 1);
  st->cp = slot_int(L, sl, ND_KEY_CP, 1);
  st->ep = slot_int(L, sl, ND_KEY_EP, 1);
  st->etp = slot_int(L, sl, ND_KEY_ETP, 1);
  st->sp = slot_bool(L, sl, ND_KEY_SP, 0);
  st->zero = slot_int(L, sl, ND_KEY_ZERO, 0);
  st->dp_shard = slot_int(L, sl, ND_KEY_DP_SHARD, 0);  /* 0: all of dp */
  st->dp_replicate = slot_int(L, sl, ND_KEY_DP_REPLICATE, 0);  /* 0: from dp_shard */
  st->mbs = slot_int(L, sl, ND_KEY_MBS, 1);
  if (GIVEN(SELECTIVE_OPS)) {  /* array of op names */
    lua_pushvalue(L, SLOT(SELECTIVE_OPS));
    st->selective_ops = nd_read_ops(L, "selective_ops", 0);
    lua_pop(L, 1);
  }
  if (GIVEN(LAYER_SELECTIVE_OPS)) {  /* per layer, op names */
    lua_Integer i, n;
    lua_pushvalue(L, SLOT(LAYER_SELECTIVE_OPS));
    if (!lua_istable(L, -1)) expected(L, -1, "layer_selective_ops", "an array of op name arrays");
    n = luaL_len(L, -1);
    if (n > ND_MAX_LAYERS) luaL_error(L, "layer_selective_ops: more than %d layers", ND_MAX_LAYERS);
    plan_storage(plan, &started);  /* read, used when the modes are given too */
    for (i = 1; i <= n; i++) {
      lua_geti(L, -1, i);
      plan->ops[i - 1] = (unsigned char)nd_read_ops(L, "layer_selective_ops", i);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  if (GIVEN(OFFLOAD)) {
    if (!lua_isnumber(L, SLOT(OFFLOAD)))
      luaL_error(L, "offload: expected a share in [0, 1], got %s", luaL_typename(L, SLOT(OFFLOAD)));
    st->offload = lua_tonumber(L, SLOT(OFFLOAD));
  }
  st->mb = slot_int(L, sl, ND_KEY_MB, 0);
  st->flash_attention = slot_bool(L, sl, ND_KEY_FLASH_ATTENTION, 1);
  st->tp_comm_overlap = slot_bool(L, sl, ND_KEY_TP_COMM_OVERLAP, 0);
  if (GIVEN(SCHEDULE)) {
    lua_pushvalue(L, SLOT(SCHEDULE));
    nd_check_schedule(L, -1, &st->schedule);
    lua_pop(L, 1);
  }
  if (GIVEN(PRECISION))
    nd_check_recipe(L, SLOT(PRECISION), "precision", &st->precision);
  st->param_gather = slot_bool(L, sl, ND_KEY_FP8_PARAM_GATHER, 0);
  st->reshard = slot_bool(L, sl, ND_KEY_RESHARD_AFTER_FORWARD, -1);  /* -1: the trainer's default */
  st->bf16_first = slot_int(L, sl, ND_KEY_BF16_FIRST_LAYERS, -1);
  st->bf16_last = slot_int(L, sl, ND_KEY_BF16_LAST_LAYERS, -1);
  if (GIVEN(RECOMPUTE)) {
    lua_pushvalue(L, SLOT(RECOMPUTE));
    if (!lua_isstring(L, -1) || nd_recompute_parse(lua_tostring(L, -1), &st->recompute) != 0) {
      const char *got = lua_isstring(L, -1) ? lua_tostring(L, -1) : NULL;  /* below the words */
      const char *words = enum_words(L, nd_recompute_word, ND_RECOMPUTE_COUNT);
      if (!got) expected(L, -2, "recompute", words);
      luaL_error(L, "recompute: expected %s, got '%s'", words, got);
    }
    lua_pop(L, 1);
  }
  if (GIVEN(LAYER_RECOMPUTE)) {  /* array of mode names */
    lua_Integer i, n;
    lua_pushvalue(L, SLOT(LAYER_RECOMPUTE));
    if (!lua_istable(L, -1)) expected(L, -1, "layer_recompute", "an array of mode names");
    n = luaL_len(L, -1);
    if (n > ND_MAX_LAYERS) luaL_error(L, "layer_recompute: more than %d layers", ND_MAX_LAYERS);
    st->layers = plan_storage(plan, &started);
    for (i = 1; i <= n; i++) {
      nd_recompute r;
      lua_geti(L, -1, i);
      if (!lua_isstring(L, -1))
        luaL_error(L, "layer_recompute[%I]: expected a mode name, got %s", i, luaL_typename(L, -1));
      if (nd_recompute_parse(lua_tostring(L, -1), &r) != 0)
        luaL_error(L, "layer_recompute[%I]: unknown mode '%s'", i, lua_tostring(L, -1));
      plan->recompute[i - 1] = (unsigned char)r;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  if (GIVEN(LAYER_OFFLOAD)) {  /* array of booleans */
    lua_Integer i, n;
    lua_pushvalue(L, SLOT(LAYER_OFFLOAD));
    if (!lua_istable(L, -1)) expected(L, -1, "layer_offload", "an array of true or false");
    n = luaL_len(L, -1);
    if (n > ND_MAX_LAYERS) luaL_error(L, "layer_offload: more than %d layers", ND_MAX_LAYERS);
    st->layers = plan_storage(plan, &started);  /* the modes default to none */
    for (i = 1; i <= n; i++) {
      lua_geti(L, -1, i);
      if (!lua_isboolean(L, -1)) luaL_error(L, "layer_offload[%I]: expected true or false", i);
      plan->offload[i - 1] = (unsigned char)lua_toboolean(L, -1);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  read_layout(L, sl, st);
}

/* The pipeline layout fields (Megatron's names); pp and vpp are read. */
static void read_layout (lua_State *L, const slots *sl, nd_strategy *st) {
  int f = slot_int(L, sl, ND_KEY_DECODER_FIRST, 0);
  int l = slot_int(L, sl, ND_KEY_DECODER_LAST, 0);
  if (f < 0 || f > ND_MAX_LAYERS || l < 0 || l > ND_MAX_LAYERS)
    luaL_error(L, "decoder_first/last_pipeline_num_layers: expected 1..%d layers", ND_MAX_LAYERS);
  st->first_layers = (short)f;
  st->last_layers = (short)l;
  st->account = (unsigned char)(
      (slot_bool(L, sl, ND_KEY_ACCOUNT_EMBEDDING, 0) ? ND_ACCOUNT_EMBEDDING : 0)
      | (slot_bool(L, sl, ND_KEY_ACCOUNT_LOSS, 0) ? ND_ACCOUNT_LOSS : 0));
  if (GIVEN(STAGE_LAYERS)) {
    lua_Integer i, n;
    lua_pushvalue(L, SLOT(STAGE_LAYERS));
    if (!lua_istable(L, -1)) expected(L, -1, "stage_layers", "an array of layer counts");
    n = luaL_len(L, -1);
    if (n != st->pp && n != (lua_Integer)st->pp * st->vpp)
      luaL_error(L, "stage_layers: %I sizes, expected pp = %d stage sizes%s", n, st->pp,
                 st->vpp > 1 ? " or pp*vpp chunk sizes" : "");
    if (n > ND_MAX_CHUNKS) luaL_error(L, "stage_layers: more than %d chunks", ND_MAX_CHUNKS);
    for (i = 1; i <= n; i++) {
      lua_Integer v;
      int isint;
      lua_geti(L, -1, i);
      v = lua_tointegerx(L, -1, &isint);
      if (!isint)
        luaL_error(L, "stage_layers[%I]: expected a layer count, got %s", i, luaL_typename(L, -1));
      if (v < 0 || v > ND_MAX_LAYERS)
        luaL_error(L, "stage_layers[%I]: expected 0..%d layers, got %I", i, ND_MAX_LAYERS, v);
      st->stage_layers[i - 1] = (int)v;
      lua_pop(L, 1);
    }
    if (n == st->pp && st->vpp > 1) {  /* per stage: each stage's over its chunks */
      int s, c, v = st->vpp, p = st->pp, per[ND_MAX_STAGES];
      for (s = 0; s < p; s++) {
        per[s] = st->stage_layers[s];
        if (per[s] % v != 0)
          luaL_error(L, "stage_layers[%d]: %d layers do not split into vpp = %d chunks "
                     "(give pp*vpp chunk sizes)", s + 1, per[s], v);
      }
      for (s = 0; s < p; s++)
        for (c = 0; c < v; c++) st->stage_layers[c * p + s] = per[s] / v;
    }
    st->explicit_layout = ND_LAYOUT_CHUNKS;
    lua_pop(L, 1);
  }
  if (GIVEN(PIPELINE_LAYOUT)) {
    char err[256];
    if (st->explicit_layout)
      luaL_error(L, "pipeline_model_parallel_layout: cannot be set with stage_layers");
    lua_pushvalue(L, SLOT(PIPELINE_LAYOUT));
    if (!lua_isstring(L, -1)) expected(L, -1, "pipeline_model_parallel_layout", "a layout string");
    if (nd_layout_parse(st, lua_tostring(L, -1), err, sizeof err) != 0)
      luaL_error(L, "pipeline_model_parallel_layout: %s", err);
    lua_pop(L, 1);
  }
}

void nd_read_job (lua_State *L, int t, nd_job *job) {
  luaL_checktype(L, t, LUA_TTABLE);
  job->devices = get_int(L, t, "devices", 0);
  job->seq_len = get_int(L, t, "seq_len", 0);
  if (lua_getfield(L, t, "global_batch") == LUA_TNIL) job->global_batch = 0;
  else job->global_batch = (long long)luaL_checkinteger(L, -1);
  lua_pop(L, 1);
}

void nd_check_recipe (lua_State *L, int i, const char *key, nd_recipe_id *out) {
  luaL_Buffer b;
  int r;
  i = lua_absindex(L, i);
  if (lua_type(L, i) == LUA_TSTRING && nd_recipe_parse(lua_tostring(L, i), out) == 0) return;
  luaL_tolstring(L, i, NULL);  /* what was given, below the buffer */
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "bf16, fp16, fp8 (");  /* the table's names, fp8 standing for its default */
  luaL_addstring(&b, nd_recipe_get(ND_RECIPE_FP8_DEFAULT)->name);
  luaL_addstring(&b, ")");
  for (r = ND_RECIPE_FP16 + 1; r < ND_RECIPE_COUNT; r++) {
    if (r == ND_RECIPE_FP8_DEFAULT) continue;
    luaL_addstring(&b, r == ND_RECIPE_COUNT - 1 ? " or " : ", ");
    luaL_addstring(&b, nd_recipe_get((nd_recipe_id)r)->name);
  }
  luaL_pushresult(&b);
  luaL_error(L, "%s: expected %s, got '%s'", key, lua_tostring(L, -1), lua_tostring(L, -2));
}

void nd_add_names (luaL_Buffer *b, const char *const *names, const char *last) {
  int i;
  for (i = 0; names[i]; i++) {
    if (i > 0 && names[i + 1]) luaL_addstring(b, ", ");
    else if (i > 0) { luaL_addchar(b, ' '); luaL_addstring(b, last); luaL_addchar(b, ' '); }
    luaL_addstring(b, names[i]);
  }
}

void nd_check_schedule (lua_State *L, int i, nd_schedule *out) {
  luaL_Buffer b;
  const char *names[ND_SCHED_COUNT + 1];
  int s;
  /* what was given stays on the stack below the buffer */
  const char *got = lua_isstring(L, i) ? lua_tostring(L, i) : NULL;
  const char *type = luaL_typename(L, i);
  if (got && nd_schedule_parse(got, out) == 0) return;
  for (s = 0; s < ND_SCHED_COUNT; s++) names[s] = nd_schedule_name((nd_schedule)s);
  names[ND_SCHED_COUNT] = NULL;
  luaL_buffinit(L, &b);  /* the names, from the core's one table */
  luaL_addstring(&b, "schedule: expected ");
  nd_add_names(&b, names, "or");
  luaL_addstring(&b, got ? ", got '" : ", got ");
  luaL_addstring(&b, got ? got : type);
  if (got) luaL_addstring(&b, "'");
  luaL_pushresult(&b);
  lua_error(L);
}
