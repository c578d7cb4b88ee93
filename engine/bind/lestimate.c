/*
** lestimate.c -- Lua binding ndplan.c.estimate: prices one strategy with the C estimators
** and returns the result as a plain table (the fields of `ndplan estimate --json`).
*/
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include <lua.h>
#include <lauxlib.h>

#include "ndplan/estimate.h"
#include "ndplan/data_parallel.h"
#include "ndplan/fields.h"
#include "ndplan/layout.h"
#include "ndplan/recompute.h"
#include "ndplan/search.h"
#include "ndplan_lua.h"
#include "ldevice.h"
#include "lestimate.h"
#include "llazy.h"
#include "lmodel.h"

/* Pushes the names of the switches in mask as an array. */
static void push_ops (lua_State *L, unsigned mask) {
  int op, k = 0;
  lua_createtable(L, ND_OP_COUNT, 0);
  for (op = 0; op < ND_OP_COUNT; op++)
    if (mask & ND_OP_BIT(op)) {
      lua_pushstring(L, nd_op_name(op));
      lua_rawseti(L, -2, ++k);
    }
}

void nd_push_recipe (lua_State *L, const nd_strategy *st, const nd_device *dev,
                     const nd_costs *c, int body) {
  const nd_recipe *r = nd_strategy_recipe(st);
  nd_recipe_widths w;
  int first, last;
  nd_recipe_widths_of(r, st->param_gather, st->zero, c->weight_bytes, c->quant_cache, &w);
  nd_strategy_bf16_layers(st, body, &first, &last);
  lua_createtable(L, 0, 20);
  lua_pushstring(L, r->name); lua_setfield(L, -2, "recipe");
  lua_pushstring(L, r->family); lua_setfield(L, -2, "family");
  lua_pushstring(L, r->scaling); lua_setfield(L, -2, "scaling");
  lua_pushstring(L, nd_precision_name(r->gemm)); lua_setfield(L, -2, "gemm_precision");
  nd_setnum(L, "gemm_peak_flops", nd_device_peak_flops(dev, r->gemm));
  nd_setnum(L, "element_bytes", r->element_bytes);
  nd_setint(L, "block", r->block);
  nd_setint(L, "weight_block", r->weight_block);
  lua_pushboolean(L, r->weight_2d); lua_setfield(L, -2, "weight_2d");
  nd_setnum(L, "scale_bytes", r->scale_bytes);
  nd_setint(L, "copies", r->copies);
  lua_pushboolean(L, st->param_gather); lua_setfield(L, -2, "fp8_param_gather");
  lua_createtable(L, 0, 4);
  nd_setnum(L, "quant", w.quant); nd_setnum(L, "param", w.param);
  nd_setnum(L, "cache", w.cache); nd_setnum(L, "gather", w.gather);
  lua_setfield(L, -2, "bytes_per_param");
  nd_setint(L, "bf16_first_layers", first);
  nd_setint(L, "bf16_last_layers", last);
  lua_pushstring(L, r->bf16_parts); lua_setfield(L, -2, "keeps_bf16");
  lua_pushstring(L, r->source); lua_setfield(L, -2, "source");
}

void nd_setnum (lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

/* t[k] = {v[0], ..., v[n-1]} for the table on top of the stack */
static void setnums (lua_State *L, const char *k, const double *v, int n) {
  int i;
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) { lua_pushnumber(L, v[i]); lua_rawseti(L, -2, i + 1); }
  lua_setfield(L, -2, k);
}

void nd_setint (lua_State *L, const char *k, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

void nd_push_layout_flags (lua_State *L, const nd_strategy *st) {
  if (st->account & ND_ACCOUNT_EMBEDDING) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "account_for_embedding_in_pipeline_split");
  }
  if (st->account & ND_ACCOUNT_LOSS) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "account_for_loss_in_pipeline_split");
  }
  if (st->first_layers) nd_setint(L, "decoder_first_pipeline_num_layers", st->first_layers);
  if (st->last_layers) nd_setint(L, "decoder_last_pipeline_num_layers", st->last_layers);
}

/* The resolved layout: body and MTP layers per chunk (per stage at vpp 1), the flags that
   produced it, and the Megatron layout string that states it. */
static void push_layout (lua_State *L, const nd_strategy *st, const nd_model_spec *m) {
  int k, n = st->pp * st->vpp;
  char text[4096];
  lua_createtable(L, n, 0);
  for (k = 0; k < n; k++) { lua_pushinteger(L, st->stage_layers[k]); lua_rawseti(L, -2, k + 1); }
  lua_setfield(L, -2, "stage_layers");
  nd_push_layout_flags(L, st);
  k = nd_layout_format(st, (int)m->num_layers, (int)m->mtp_layers, text, sizeof text);
  if (k >= 0 && (size_t)k < sizeof text) {
    lua_pushstring(L, text);
    lua_setfield(L, -2, "pipeline_layout");
  }
  lua_pushstring(L, st->explicit_layout == ND_LAYOUT_STRING ? "string"
                    : st->explicit_layout == ND_LAYOUT_CHUNKS ? "stage_layers"
                    : st->first_layers || st->last_layers ? "first_last"
                    : st->account ? "account" : "even");
  lua_setfield(L, -2, "layout_from");
}

/* stage.chunks: each model chunk of stage s in the order it runs them, with its layers
   (0-based, body then MTP: first_layer, layers) and what else it holds. */
static void push_chunks (lua_State *L, const nd_strategy *st, const nd_model_spec *m, int s) {
  int c, body = (int)m->num_layers, mtp = (int)m->mtp_layers, last = st->pp - 1;
  lua_createtable(L, st->vpp, 0);
  for (c = 0; c < st->vpp; c++) {
    int first, n = nd_chunk_layers(st, s, c, &first);
    int lo = first > body ? first : body, hi = first + n < body + mtp ? first + n : body + mtp;
    lua_createtable(L, 0, 7);
    nd_setint(L, "chunk", c);
    nd_setint(L, "first_layer", first);
    nd_setint(L, "layers", n);
    nd_setint(L, "decoder_layers", n - (hi > lo ? hi - lo : 0));
    nd_setint(L, "mtp_layers", hi > lo ? hi - lo : 0);
    lua_pushboolean(L, s == 0 && c == 0); lua_setfield(L, -2, "embedding");
    lua_pushboolean(L, s == last && c == st->vpp - 1); lua_setfield(L, -2, "loss");
    lua_rawseti(L, -2, c + 1);
  }
  lua_setfield(L, -2, "chunks");
}

static void push_strategy (lua_State *L, const nd_strategy *st, const nd_model_spec *m) {
  lua_createtable(L, 0, 16);
  nd_setint(L, "dp", st->dp); nd_setint(L, "tp", st->tp); nd_setint(L, "pp", st->pp);
  nd_setint(L, "vpp", st->vpp); nd_setint(L, "cp", st->cp); nd_setint(L, "ep", st->ep);
  nd_setint(L, "etp", st->etp); nd_setint(L, "zero", st->zero);
  if (st->dp_shard > 0 && st->dp_shard < st->dp) {  /* HSDP: the shard group and the replicas */
    nd_setint(L, "dp_shard", st->dp_shard); nd_setint(L, "dp_replicate", st->dp / st->dp_shard);
  }
  if (st->zero > 0) {  /* over which ranks each ZeRO stage shards: dp_shard x cp */
    nd_zero_split z = nd_zero_split_of(st->zero, st->reshard);
    int ranks = (st->dp_shard > 0 ? st->dp_shard : st->dp) * st->cp;
    lua_createtable(L, 0, 4);
    if (z.optimizer) nd_setint(L, "optimizer", ranks);
    if (z.grads) nd_setint(L, "grads", ranks);
    if (z.weights) nd_setint(L, "params", ranks);
    int hsdp = st->dp_shard > 0 && st->dp_shard < st->dp;
    lua_pushstring(L, hsdp ? (st->cp > 1 ? "dp_shard x cp" : "dp_shard")
                           : (st->cp > 1 ? "dp x cp" : "dp"));
    lua_setfield(L, -2, "group");
    lua_setfield(L, -2, "sharded_over");
  }
  nd_setint(L, "mbs", st->mbs); nd_setint(L, "mb", st->mb);
  lua_pushboolean(L, st->sp); lua_setfield(L, -2, "sp");
  lua_pushboolean(L, st->flash_attention); lua_setfield(L, -2, "flash_attention");
  if (st->tp_comm_overlap) { lua_pushboolean(L, 1); lua_setfield(L, -2, "tp_comm_overlap"); }
  lua_pushstring(L, nd_schedule_name(st->schedule)); lua_setfield(L, -2, "schedule");
  lua_pushstring(L, st->layers ? "per_layer" : nd_recompute_name(st->recompute));
  lua_setfield(L, -2, "recompute");
  lua_pushstring(L, nd_strategy_recipe(st)->name); lua_setfield(L, -2, "precision");
  lua_pushboolean(L, st->param_gather); lua_setfield(L, -2, "fp8_param_gather");
  if (st->zero == 3) {  /* FSDP: whether each micro-batch gathers again (resolved) */
    lua_pushboolean(L, st->reshard != 0); lua_setfield(L, -2, "reshard_after_forward");
  }
  if (nd_strategy_recipe(st)->element_bytes > 0.0) {  /* the BF16 layers, resolved */
    int first, last;
    nd_strategy_bf16_layers(st, (int)m->num_layers, &first, &last);
    nd_setint(L, "bf16_first_layers", first);
    nd_setint(L, "bf16_last_layers", last);
  }
  nd_setnum(L, "offload", st->offload);
  push_ops(L, st->selective_ops);
  lua_setfield(L, -2, "selective_ops");
  push_layout(L, st, m);
  if (st->layers) {  /* each layer's mode, body then MTP */
    const nd_layer_plan *pl = st->layers;
    int i, n = (int)(m->num_layers + m->mtp_layers);
    lua_createtable(L, n, 0);
    for (i = 0; i < n; i++) {
      lua_pushstring(L, nd_recompute_name((nd_recompute)pl->recompute[i]));
      lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "layer_recompute");
    for (i = 0; i < n && !(pl->recompute[i] == ND_RECOMPUTE_SELECTIVE && pl->ops[i]); i++) {}
    if (i < n) {  /* some selective layer with its own switches: each layer's set */
      lua_createtable(L, n, 0);
      for (i = 0; i < n; i++) {
        push_ops(L, pl->recompute[i] != ND_RECOMPUTE_SELECTIVE ? 0u
                    : pl->ops[i] ? pl->ops[i] : st->selective_ops);
        lua_rawseti(L, -2, i + 1);
      }
      lua_setfield(L, -2, "layer_selective_ops");
    }
    for (i = 0; i < n && !pl->offload[i]; i++) {}
    if (i < n) {  /* some layer offloaded: say which */
      lua_createtable(L, n, 0);
      for (i = 0; i < n; i++) {
        lua_pushboolean(L, pl->offload[i]);
        lua_rawseti(L, -2, i + 1);
      }
      lua_setfield(L, -2, "layer_offload");
    }
  }
}

static void push_memory_parts (lua_State *L, const nd_stage_estimate *se) {
  lua_createtable(L, 0, 7);
  nd_setnum(L, "weights", se->weights); nd_setnum(L, "grads", se->grads);
  nd_setnum(L, "optimizer", se->optimizer); nd_setnum(L, "activations", se->activations);
  nd_setnum(L, "buffers", se->buffers); nd_setnum(L, "reserve", se->reserve);
  nd_setnum(L, "allocated", se->allocated); nd_setnum(L, "reserved", se->reserved);
  nd_setnum(L, "fragmentation", se->reserved - se->allocated);
  nd_setnum(L, "peak", se->peak);
}

/*
** Results are built lazily: push_result sets the scalar fields at once and keeps what the
** bulky ones need (the resolved strategy, the costs, the per-stage parts) in a lazy_result
** userdata; each bulky field is built on its first read (or by pairs, which builds them all)
** and then stored in the table as a plain field. The table's own metatable holds the state
** (at [1]) and answers getmetatable with "ndplan.estimate". The state's uservalues are the
** model and the device the estimate was priced on (both immutable), so its pointers stay live.
*/
typedef struct lazy_result {
  nd_lazy head;             /* first: the lazy fields (llazy.h) */
  size_t strategy_bytes;    /* the packed strategy after the stages (pack_strategy) */
  double weight_bytes, quant_cache;  /* what precision reads of the costs */
  nd_job job;               /* result.job, when has_job */
  int has_job;
  double time_parts[ND_T_COUNT];
  nd_topology_entry topology[ND_GROUP_COUNT];
  int heaviest, stages;
  nd_stage_estimate stage[];  /* `stages` entries */
} lazy_result;

/*
** A result keeps the strategy as the estimator resolved it, packed: without the unused tail
** of stage_layers (pp x vpp entries are), and followed by its per-layer plan when it has
** one. unpack_strategy restores it, the tail zero, its plan read where the result keeps it.
*/
#define ST_CHUNKS_AT offsetof(nd_strategy, stage_layers)
_Static_assert(ST_CHUNKS_AT + sizeof ((nd_strategy *)0)->stage_layers + sizeof (double)
               > sizeof (nd_strategy), "stage_layers is the strategy's last member");
_Static_assert(offsetof(nd_strategy, layers) < ST_CHUNKS_AT
               && offsetof(nd_strategy, vpp) < ST_CHUNKS_AT,
               "layers, pp and vpp come before stage_layers");

static size_t chunks_size (const nd_strategy *st) {
  return (size_t)st->pp * (size_t)st->vpp * sizeof st->stage_layers[0];
}

static size_t packed_size (const nd_strategy *st) {
  return ST_CHUNKS_AT + chunks_size(st) + (st->layers ? sizeof *st->layers : 0);
}

static void pack_strategy (const nd_strategy *st, unsigned char *out, size_t n) {
  size_t head = ST_CHUNKS_AT + chunks_size(st);
  memcpy(out, st, head);
  if (st->layers) memcpy(out + head, st->layers, n - head);
}

/* The strategy packed at `in` (n bytes): its plan, if any, is read in place (the result
   holding it outlives the unpacked copy). */
static void unpack_strategy (const unsigned char *in, size_t n, nd_strategy *st) {
  size_t head;
  memset(st, 0, sizeof *st);
  memcpy(st, in, ST_CHUNKS_AT);
  head = ST_CHUNKS_AT + chunks_size(st);
  memcpy(st, in, head < n ? head : n);
  if (st->layers) st->layers = (const nd_layer_plan *)(const void *)(in + head);
}

static const char *const lazy_names[] = {"strategy", "precision", "memory_parts_bytes",
                                         "time_parts_s", "stages", "topology", "params",
                                         "stack", "step_time_band", "job", NULL};
#define LAZY_STAGES 4
#define LAZY_STACK 7   /* from the stack's figures (add_stack): its names, and the band */
#define LAZY_BAND 8
#define LAZY_JOB 9     /* the job priced (estimate), else none: finish sets it */

static void push_stages (lua_State *L, const lazy_result *r, const nd_strategy *st,
                         const nd_model_spec *m) {
  int i;
  lua_createtable(L, r->stages, 0);
  for (i = 0; i < r->stages; i++) {
    const nd_stage_estimate *se = &r->stage[i];
    push_memory_parts(L, se);
    nd_setint(L, "stage", i);
    nd_setint(L, "layers", se->layers);
    nd_setnum(L, "params", se->params);
    nd_setnum(L, "quant_params", se->quant_params);
    nd_setnum(L, "inflight", se->inflight);
    nd_setnum(L, "forward_s", se->fwd_s);
    nd_setnum(L, "backward_s", se->bwd_s);
    nd_setnum(L, "recompute_s", se->recompute_s);
    nd_setnum(L, "comm_s", se->comm_s);
    push_chunks(L, st, m, i);
    lua_rawseti(L, -2, i + 1);
  }
}

static void push_topology (lua_State *L, const lazy_result *r) {
  int i;
  lua_createtable(L, 0, ND_GROUP_COUNT);
  for (i = 0; i < ND_GROUP_COUNT; i++) {
    const nd_topology_entry *g = &r->topology[i];
    lua_createtable(L, 0, 4);
    nd_setint(L, "size", g->size); nd_setint(L, "stride", g->stride); nd_setint(L, "local", g->local);
    lua_pushstring(L, g->size <= 1 ? "none" : g->local >= g->size ? "scale-up"
                      : g->local > 1 ? "scale-up+scale-out" : "scale-out");
    lua_setfield(L, -2, "link");
    lua_setfield(L, -2, nd_group_name(i));
  }
}

void nd_push_copy (lua_State *L, int t) {
  t = lua_absindex(L, t);
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, -4);
  }
}

/*
** The stack profile's fields of the result at index `result`, from its figures at index
** `fig` ({stack = names, band = the band's residuals, band_scale = 1 + pct / 100}, which
** nd.estimate finds once per profile, device, recipe and MoE): result.stack, a copy of the
** names, or result.step_time_band, a copy of the band with the step time's range
** (low_s = step / scale, high_s = step x scale). Pushes nil for a field the figures lack.
*/
static void push_stack_field (lua_State *L, int result, int fig, int band) {
  fig = lua_absindex(L, fig);
  if (lua_type(L, fig) != LUA_TTABLE
      || lua_getfield(L, fig, band ? "band" : "stack") != LUA_TTABLE) {
    lua_pushnil(L);
    return;
  }
  nd_push_copy(L, -1);
  lua_remove(L, -2);
  if (band) {
    double t, scale;
    lua_getfield(L, fig, "band_scale");
    scale = lua_tonumber(L, -1);
    lua_pushliteral(L, "step_time_s");
    lua_rawget(L, result);
    t = lua_tonumber(L, -1);
    lua_pop(L, 2);
    nd_setnum(L, "low_s", t / scale);
    nd_setnum(L, "high_s", t * scale);
  }
}

/* Pushes lazy field i of the result whose state is at index s (the result at index 1). */
static void push_lazy (lua_State *L, int s, int i) {
  const lazy_result *r = (const lazy_result *)lua_touserdata(L, s);
  const nd_model_spec *m;
  const nd_device *dev;
  nd_strategy st;  /* unpacked here: a finalizer run by an allocation below may estimate */
  int k;
  if (i == LAZY_STACK || i == LAZY_BAND) {  /* the profile's figures alone */
    lua_getiuservalue(L, s, 3);
    push_stack_field(L, 1, -1, i == LAZY_BAND);
    lua_remove(L, -2);
    return;
  }
  if (i == LAZY_JOB) {
    if (!r->has_job) { lua_pushnil(L); return; }
    lua_createtable(L, 0, 3);
    nd_setint(L, "devices", r->job.devices);
    nd_setint(L, "global_batch", r->job.global_batch);
    nd_setint(L, "seq_len", r->job.seq_len);
    return;
  }
  unpack_strategy((const unsigned char *)&r->stage[r->stages], r->strategy_bytes, &st);
  lua_getiuservalue(L, s, 1);
  m = (const nd_model_spec *)lua_touserdata(L, -1);
  lua_getiuservalue(L, s, 2);
  dev = (const nd_device *)lua_touserdata(L, -1);
  lua_pop(L, 2);  /* both stay referenced by the state */
  switch (i) {
    case 0: push_strategy(L, &st, m); break;
    case 1: {
      nd_costs c;
      nd_costs_init(&c);
      c.weight_bytes = r->weight_bytes;
      c.quant_cache = r->quant_cache;
      nd_push_recipe(L, &st, dev, &c, (int)m->num_layers);
      break;
    }
    case 2: push_memory_parts(L, &r->stage[r->heaviest]); break;
    case 3:
      lua_createtable(L, 0, ND_T_COUNT);
      for (k = 0; k < ND_T_COUNT; k++) nd_setnum(L, nd_time_part_name(k), r->time_parts[k]);
      break;
    case LAZY_STAGES: push_stages(L, r, &st, m); break;
    case 5: push_topology(L, r); break;
    default: {
      nd_params p;
      nd_model_params(m, &p);
      lua_createtable(L, 0, 2);
      nd_setnum(L, "total", (double)p.total); nd_setnum(L, "active", (double)p.active);
    }
  }
}

/* The fields every result sets at once (and finish's), in this order; set raw with their
   names' strings from nd_push_interned. */
static const char *const result_keys[] = {
  "schema", "step_time_s", "tokens_per_s", "mfu", "hfu", "model_flops", "hardware_flops",
  "peak_memory_bytes", "allocated_bytes", "reserved_bytes", "heaviest_stage",
  "budget_bytes", "fits", "over_bytes", "model", "device", NULL};
enum { RK_SCHEMA = 1, RK_STEP, RK_TOKENS, RK_MFU, RK_HFU, RK_MODEL_FLOPS, RK_HW_FLOPS,
       RK_PEAK, RK_ALLOCATED, RK_RESERVED, RK_HEAVIEST, RK_BUDGET, RK_FITS, RK_OVER,
       RK_MODEL, RK_DEVICE };

/* t[keys[k]] = v, raw, for the result at index t */
static void rk_num (lua_State *L, int t, int keys, int k, double v) {
  lua_rawgeti(L, keys, k);
  lua_pushnumber(L, v);
  lua_rawset(L, t);
}

/* finish's fields but the job, on the result at index `result`: the budget, the model's and
   the device's names at the three indices from `budget` on; keys: result_keys' strings. */
static void set_finish (lua_State *L, int result, int budget, int keys) {
  int peak;
  result = lua_absindex(L, result);
  budget = lua_absindex(L, budget);
  keys = lua_absindex(L, keys);
  lua_rawgeti(L, keys, RK_PEAK);
  lua_rawget(L, result);
  peak = lua_gettop(L);
  lua_rawgeti(L, keys, RK_BUDGET); lua_pushvalue(L, budget); lua_rawset(L, result);
  lua_rawgeti(L, keys, RK_FITS);
  lua_pushboolean(L, lua_compare(L, peak, budget, LUA_OPLE));
  lua_rawset(L, result);
  lua_rawgeti(L, keys, RK_OVER);
  lua_pushvalue(L, peak);
  lua_pushvalue(L, budget);
  lua_arith(L, LUA_OPSUB);                                      /* peak - budget */
  lua_pushinteger(L, 0);
  if (lua_compare(L, -1, -2, LUA_OPLT)) lua_pop(L, 1);          /* as math.max(0, x) */
  else lua_remove(L, -2);
  lua_rawset(L, result);
  lua_rawgeti(L, keys, RK_MODEL); lua_pushvalue(L, budget + 1); lua_rawset(L, result);
  lua_rawgeti(L, keys, RK_DEVICE); lua_pushvalue(L, budget + 2); lua_rawset(L, result);
  lua_pop(L, 1);  /* peak */
}

void nd_push_estimate (lua_State *L, const nd_estimate *e, const nd_strategy *st,
                       const nd_costs *c, const nd_job *job, int model, int device,
                       int figures, int finish) {
  lazy_result *r;
  int n = e->stages, t, keys;
  model = lua_absindex(L, model);
  device = lua_absindex(L, device);
  if (figures) figures = lua_absindex(L, figures);
  if (finish) finish = lua_absindex(L, finish);
  keys = nd_push_interned(L, result_keys);
  lua_createtable(L, 0, 24);  /* room for the lazy fields and finish's */
  t = lua_gettop(L);
  lua_rawgeti(L, keys, RK_SCHEMA); lua_pushliteral(L, "ndplan.estimate/1"); lua_rawset(L, t);
  rk_num(L, t, keys, RK_STEP, e->step_time);
  rk_num(L, t, keys, RK_TOKENS, e->tokens_per_s);
  rk_num(L, t, keys, RK_MFU, e->mfu);
  rk_num(L, t, keys, RK_HFU, e->hfu);
  rk_num(L, t, keys, RK_MODEL_FLOPS, e->model_flops);
  rk_num(L, t, keys, RK_HW_FLOPS, e->hardware_flops);
  rk_num(L, t, keys, RK_PEAK, e->peak);
  rk_num(L, t, keys, RK_ALLOCATED, e->stage[e->heaviest].allocated);
  rk_num(L, t, keys, RK_RESERVED, e->stage[e->heaviest].reserved);
  lua_rawgeti(L, keys, RK_HEAVIEST); lua_pushinteger(L, e->heaviest); lua_rawset(L, t);
  if (finish) set_finish(L, t, finish, keys);
  lua_remove(L, keys);
  r = (lazy_result *)lua_newuserdatauv(L, sizeof *r + (size_t)n * sizeof r->stage[0]
                                          + packed_size(st), 3);
  r->strategy_bytes = packed_size(st);
  pack_strategy(st, (unsigned char *)&r->stage[n], r->strategy_bytes);
  r->weight_bytes = c->weight_bytes;
  r->quant_cache = c->quant_cache;
  r->has_job = job != NULL;
  if (job) r->job = *job;
  memcpy(r->time_parts, e->time_parts, sizeof r->time_parts);
  memcpy(r->topology, e->topology, sizeof r->topology);
  r->heaviest = e->heaviest;
  r->stages = n;
  r->head.names = lazy_names;
  r->head.build = push_lazy;
  r->head.built = 0;
  memcpy(r->stage, e->stage, (size_t)n * sizeof r->stage[0]);
  lua_pushvalue(L, model); lua_setiuservalue(L, -2, 1);
  lua_pushvalue(L, device); lua_setiuservalue(L, -2, 2);
  if (figures) {  /* result.stack and .step_time_band, built when read (push_stack_field) */
    lua_pushvalue(L, figures);
    lua_setiuservalue(L, -2, 3);
  }
  nd_lazy_attach(L, "ndplan.estimate");
}

/* The result of an entry point: model and device are its arguments 1 and 2. */
static void push_result (lua_State *L, const nd_estimate *e, const nd_strategy *st,
                         const nd_costs *c) {
  nd_push_estimate(L, e, st, c, NULL, 1, 2, 0, 0);
}

/*
** add_stack(result, figures): the stack profile's fields of a result, now (those of
** run(..., figures) are built when first read): result.stack and result.step_time_band.
*/
static int e_add_stack (lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  lua_pushliteral(L, "stack");
  push_stack_field(L, 1, 2, 0);
  lua_rawset(L, 1);
  lua_pushliteral(L, "step_time_band");
  push_stack_field(L, 1, 2, 1);
  lua_rawset(L, 1);
  return 0;
}

/*
** finish(result, budget, model_name, device_name, job): what nd.estimate adds to every result
** (ndplan.estimate.finish), set raw (none is a lazy field): budget_bytes, fits (peak within
** the budget), over_bytes (the excess, 0 when none), model, device and job. The figures keep
** the Lua types and arithmetic of the values given.
*/
/* t[k] = the value on top, set raw (popped). */
static void set_raw (lua_State *L, int t, const char *k) {
  lua_pushstring(L, k);
  lua_insert(L, -2);
  lua_rawset(L, t);
}

static int e_finish (lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checkany(L, 2);
  luaL_checkany(L, 5);
  lua_settop(L, 5);
  nd_push_interned(L, result_keys);
  set_finish(L, 1, 2, 6);
  lua_pushvalue(L, 5); set_raw(L, 1, "job");
  return 0;
}

/* A strategy and the storage of its per-layer plan, which st->layers points at when the
   table gives one. */
typedef struct strategy_box {
  nd_strategy st;
  nd_layer_plan layers;
} strategy_box;

/* The arguments every entry point shares: model, device, job and strategy at 1-4. */
typedef struct call_args {
  const nd_model_spec *m;
  const nd_device *dev;
  nd_job job;
  nd_costs costs;
  nd_strategy *st;        /* GC-owned scratch: a raise while reading leaks nothing */
  nd_layer_plan *layers;  /* its plan's storage, likewise (st->layers, when it has one) */
} call_args;

/* Reads arguments 1-4 and the costs at costs_index, then truncates the stack there (at keep
   when that is above: arguments the caller reads after); the
   strategy goes into st (NULL: a new GC-owned block), skipping the keys of the table at
   costs_index + 1 when `ignore` (what else a caller's table holds). */
static void read_call_into (lua_State *L, int costs_index, call_args *a, strategy_box *box,
                            int ignore, int keep) {
  int top;
  a->m = nd_checkmodel(L, 1);
  a->dev = nd_checkdevice(L, 2);
  nd_read_job(L, 3, &a->job);
  nd_read_costs(L, costs_index, &a->costs);
  if (ignore) luaL_checktype(L, costs_index + 1, LUA_TTABLE);
  top = costs_index + (ignore ? 1 : 0);
  lua_settop(L, keep > top ? keep : top);
  if (!box) box = (strategy_box *)lua_newuserdatauv(L, sizeof *box, 0);
  a->st = &box->st;
  a->layers = &box->layers;
  nd_read_strategy(L, 4, ignore ? costs_index + 1 : 0, a->st, a->layers);
}

static void read_call (lua_State *L, int costs_index, call_args *a) {
  read_call_into(L, costs_index, a, NULL, 0, 0);
}

/* One estimate's and one strategy's scratch per state (75 KB: allocating them per call cost
   more than pricing), kept in the registry and held by one call at a time (use_scratch),
   and a result copies what it keeps. With them, the layer-kind prices of the
   last call's model, device, job and costs (calls in a loop mostly repeat them): the job
   and costs are copies the cache is bound to, cleared when a call brings others; the model
   and device are anchored in the scratch's user values, so their addresses stay theirs. */
typedef struct run_scratch {
  nd_estimate e;
  strategy_box st;
  nd_price_cache *pc;      /* NULL: no memory for one (each call prices its kinds) */
  const nd_model_spec *m;  /* what pc holds prices of */
  const nd_device *dev;
  nd_job job;
  nd_costs costs;
  int busy;                /* a call is using it (use_scratch) */
} run_scratch;

static int run_scratch_gc (lua_State *L) {
  run_scratch *s = (run_scratch *)lua_touserdata(L, 1);
  nd_price_cache_free(s->pc);
  s->pc = NULL;
  return 0;
}

static int run_scratch_close (lua_State *L) {
  ((run_scratch *)lua_touserdata(L, 1))->busy = 0;
  return 0;
}

static char scratch_id;  /* the registry's key of the state's run_scratch */

static run_scratch *get_scratch (lua_State *L) {
  run_scratch *s;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &scratch_id) == LUA_TUSERDATA) {
    s = (run_scratch *)lua_touserdata(L, -1);
    lua_pop(L, 1);
    return s;
  }
  lua_pop(L, 1);
  s = (run_scratch *)lua_newuserdatauv(L, sizeof *s, 2);
  s->pc = NULL;
  s->m = NULL;
  s->dev = NULL;
  s->busy = 0;
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, run_scratch_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, run_scratch_close);
  lua_setfield(L, -2, "__close");
  lua_setmetatable(L, -2);
  s->pc = nd_price_cache_new(8);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &scratch_id);
  return s;
}

/*
** The state's scratch for one call, in use until the call returns or raises (a to-be-closed
** slot pushed on top: the caller's arguments fixed first). A call made while another uses
** it -- a finalizer or metamethod calling nd.estimate while a result is built or arguments
** read, where the result would have taken the inner call's figures -- gets a scratch of its
** own on the stack, without the price cache.
*/
static run_scratch *use_scratch (lua_State *L) {
  run_scratch *s = get_scratch(L);
  if (s->busy) {
    s = (run_scratch *)lua_newuserdatauv(L, sizeof *s, 0);
    s->pc = NULL;
    s->m = NULL;
    s->dev = NULL;
    s->busy = 1;
    return s;
  }
  s->busy = 1;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &scratch_id);
  lua_toclose(L, -1);
  return s;
}

/* The scratch's cache for a's model, device, job and costs (the model and device at
   arguments 1 and 2): a's job and costs copied into the scratch, the cache cleared when any
   of the four differs from the last call's. Returns the cache (NULL: none). */
static nd_price_cache *scratch_cache (lua_State *L, run_scratch *s, const call_args *a) {
  if (!s->pc) return NULL;
  if (a->m != s->m || a->dev != s->dev || a->job.devices != s->job.devices
      || a->job.global_batch != s->job.global_batch || a->job.seq_len != s->job.seq_len
      || memcmp(&a->costs, &s->costs, sizeof s->costs) != 0) {
    nd_price_cache_clear(s->pc);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &scratch_id);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    lua_pushvalue(L, 2);
    lua_setiuservalue(L, -2, 2);
    lua_pop(L, 1);
    s->m = a->m;
    s->dev = a->dev;
    s->job = a->job;
    s->costs = a->costs;
  }
  return s->pc;
}

static int push_refusal (lua_State *L, const char *why) {
  luaL_pushfail(L);
  lua_pushstring(L, why);
  return 2;
}

/* Prices a (read into the scratch s) with the scratch's cache and pushes the result, or nil
   and the refusal. fig: the index of the stack profile's figures (0: none); finish: the
   index of the budget and the names (set_finish; 0: none, the caller finishes). */
static int push_priced (lua_State *L, run_scratch *s, const call_args *a, int fig, int finish) {
  char err[256];
  nd_price_cache *pc = scratch_cache(L, s, a);  /* prices bound to the scratch's copies */
  if (nd_estimate_run_cached(a->m, a->dev, pc ? &s->job : &a->job, a->st,
                             pc ? &s->costs : &a->costs, pc, &s->e, err, sizeof err) != 0)
    return push_refusal(L, err);
  nd_push_estimate(L, &s->e, a->st, &a->costs, finish ? &a->job : NULL, 1, 2, fig, finish);
  return 1;
}

/*
** run(model, device, job, strategy [, costs [, ignore [, figures]]]) -> result | nil, reason.
** A refused strategy is an expected failure; malformed arguments raise. ignore: a set of
** keys the strategy table may hold besides a strategy's (nd.estimate passes its arguments).
** figures: the stack profile's (add_stack), for result.stack and .step_time_band when read.
*/
static int e_run (lua_State *L) {
  call_args a;
  run_scratch *s;
  int fig = lua_type(L, 7) == LUA_TTABLE;
  lua_settop(L, 7);
  s = use_scratch(L);  /* at 8, which the reading keeps */
  read_call_into(L, 5, &a, &s->st, !lua_isnoneornil(L, 6), 8);
  return push_priced(L, s, &a, fig ? 7 : 0, 0);
}

/*
** estimate(model, device, args, costs, ignore, figures, budget, model_name, device_name)
** -> result | nil, reason | false: nd.estimate's plain call (ndplan.estimate) at once. The
** job is args' devices, global_batch and seq_len, the strategy is args (its keys true in
** ignore skipped), priced as run prices it, and the result carries finish's fields (its job
** built when read). false, with nothing raised, when a key false in ignore is given or the
** job is not integers from 1 to their ceilings: the caller's general path takes the call,
** and says what is wrong. costs: packed or nil; figures: the stack profile's or nil.
*/
static int e_estimate (lua_State *L) {
  call_args a;
  run_scratch *s;
  a.m = nd_checkmodel(L, 1);
  a.dev = nd_checkdevice(L, 2);
  nd_read_costs(L, 4, &a.costs);
  luaL_checkany(L, 9);
  lua_settop(L, 9);
  s = use_scratch(L);
  a.st = &s->st.st;
  a.layers = &s->st.layers;
  if (!nd_read_args(L, 3, 5, a.st, a.layers, &a.job)) {
    lua_pushboolean(L, 0);
    return 1;
  }
  return push_priced(L, s, &a, lua_type(L, 6) == LUA_TTABLE ? 6 : 0, 7);
}

/*
** Each layer's stage in the resolved layout of st (-1: placed in none, or st refused),
** into stage_of[0..layers).
*/
static void stages_of_layers (const call_args *a, int layers, int *stage_of) {
  nd_strategy r;
  char err[8];
  int starts[ND_MAX_CHUNKS], k[ND_MAX_CHUNKS], s, c, j;
  for (j = 0; j < layers; j++) stage_of[j] = -1;
  if (nd_strategy_resolve_to(a->st, a->m, &a->job, &r, err, sizeof err) != 0) return;
  nd_chunk_starts(&r, starts);
  for (s = 0; s < r.pp; s++) {
    int n = nd_stage_chunks(&r, s, k);
    for (c = 0; c < n; c++)
      for (j = starts[k[c]]; j < starts[k[c]] + r.stage_layers[k[c]] && j < layers; j++)
        if (j >= 0) stage_of[j] = stage_of[j] == -1 ? s : -2;  /* -2: on two stages */
  }
  for (j = 0; j < layers; j++) if (stage_of[j] < -1) stage_of[j] = -1;
}

/*
** Whether layers i and j of a plan are counted alike by the estimator: on the same stage,
** of one kind (nd_layer_kind_equal), under the same mode, switches and offload, both in
** or both out of the recipe's BF16 end layers (its quantized parameters). A stage sums its
** layers by those counts alone (estimate.c's count_layer), so turning either one full
** prices the same; potentials_batch_spec holds it against nd.estimate variant by variant.
*/
static int counted_alike (const call_args *a, const int *stage_of, int first, int last,
                          int i, int j) {
  const nd_layer_plan *pl = a->st->layers;
  int body = (int)a->m->num_layers;
  return stage_of[i] >= 0 && stage_of[i] == stage_of[j] && i < body && j < body
      && nd_layer_kind_equal(&a->m->layer[i], &a->m->layer[j])
      && pl->recompute[i] == pl->recompute[j] && pl->ops[i] == pl->ops[j]
      && pl->offload[i] == pl->offload[j]
      && (i >= first && i < body - last) == (j >= first && j < body - last);
}

/* Does a variant of figures (t, peak) come before the best one so far (bt, bpeak) in the
   potentials' order: step time, then peak with NaN last (an earlier layer wins ties)? */
static int comes_first (double t, double peak, double bt, double bpeak) {
  if (t != bt) return t < bt;
  if (peak != peak) return 0;
  return bpeak != bpeak || peak < bpeak;
}

/* one_more_full's scratch beside the run scratch (whose estimate, strategy and price cache
   it prices with): the best variant's estimate and the two variants' strategies. Allocating
   them per call (150 KB) fed the collector at every step of the potentials. */
typedef struct batch_scratch {
  nd_estimate best_e;
  strategy_box v, best_v;
  int stage_of[ND_MAX_LAYERS + 1], rep[ND_MAX_LAYERS + 1];  /* each layer's stage; the
                                                               layers priced, in order */
  double rep_t[ND_MAX_LAYERS + 1], rep_m[ND_MAX_LAYERS + 1];  /* and their figures */
  int busy;
} batch_scratch;

static char batch_id;  /* the registry's key of the state's batch_scratch */

static int batch_scratch_close (lua_State *L) {
  ((batch_scratch *)lua_touserdata(L, 1))->busy = 0;
  return 0;
}

/* The state's batch scratch for one call (a to-be-closed slot pushed on top), or, while a
   call holds it, one of the call's own. */
static batch_scratch *use_batch_scratch (lua_State *L) {
  batch_scratch *b;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &batch_id) != LUA_TUSERDATA) {
    lua_pop(L, 1);
    b = (batch_scratch *)lua_newuserdatauv(L, sizeof *b, 0);
    b->busy = 0;
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, batch_scratch_close);
    lua_setfield(L, -2, "__close");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &batch_id);
  }
  b = (batch_scratch *)lua_touserdata(L, -1);
  if (b->busy) {
    lua_pop(L, 1);
    b = (batch_scratch *)lua_newuserdatauv(L, sizeof *b, 0);
    b->busy = 1;
    return b;
  }
  b->busy = 1;
  lua_toclose(L, -1);
  return b;
}

/*
** one_more_full(model, device, job, strategy [, costs [, budget]]) -> {layer = {...},
** step_time_s = {...}, peak_memory_bytes = {...}, first =, result =}: a per-layer strategy
** (layer_recompute given) priced again with each layer that is not fully recomputed turned
** full (its own selective switches cleared), one entry per variant the estimator prices, in
** layer order (layers 1-based), as columns (a table per variant cost more than reading
** them). The recompute potentials' step (ndplan.plan) in one call instead of one
** nd.estimate each; a variant of a layer counted alike with one already priced
** (counted_alike) takes its figures. With a budget (bytes): first, the entry that comes
** first among those within it (not over it) by step time, then peak (NaN last), then layer,
** and result, that variant's result as run gives it (the step's plan reads it: not priced
** twice); both absent when none is within it or a step time is not finite. The first is
** always one the estimator priced: a layer counted alike ties with the earlier one.
*/
static int e_one_more_full (lua_State *L) {
  call_args a;
  run_scratch *s;
  batch_scratch *b;
  nd_estimate *e, *best_e;
  strategy_box *v, *best_v;
  nd_price_cache *pc;
  char err[256];
  int i, n = 0, layers, nrep = 0, first, last, best = 0, unsure = 0;
  int *stage_of, *rep;
  double *rep_t, *rep_m;
  double budget = 0, best_t = 0, best_peak = 0;
  int with_budget = !lua_isnoneornil(L, 6);
  if (with_budget) budget = luaL_checknumber(L, 6);
  lua_settop(L, 5);
  s = use_scratch(L);  /* at 6 */
  read_call_into(L, 5, &a, &s->st, 0, 6);
  if (!a.st->layers) return luaL_argerror(L, 4, "expected a per-layer strategy (layer_recompute)");
  b = use_batch_scratch(L);  /* at 7 */
  e = &s->e;
  best_e = &b->best_e;
  v = &b->v;
  best_v = &b->best_v;
  v->layers = *a.st->layers;  /* a variant changes one layer of its own copy of the plan */
  /* the variants differ in recompute modes alone, which no layer-kind price reads: priced
     once, in the run scratch's cache (bound to its copies of the job and costs) */
  pc = scratch_cache(L, s, &a);
  lua_getfield(L, 4, "layer_recompute");  /* the layers the strategy states */
  layers = (int)luaL_len(L, -1);
  lua_pop(L, 1);
  if (layers > ND_MAX_LAYERS) layers = ND_MAX_LAYERS;
  stage_of = b->stage_of;
  rep = b->rep;
  rep_t = b->rep_t;
  rep_m = b->rep_m;
  stages_of_layers(&a, layers, stage_of);
  nd_strategy_bf16_layers(a.st, (int)a.m->num_layers, &first, &last);
  lua_createtable(L, 0, 3);       /* the result, then its columns above it: */
  lua_createtable(L, layers, 0);  /* layer */
  lua_createtable(L, layers, 0);  /* step_time_s */
  lua_createtable(L, layers, 0);  /* peak_memory_bytes (top) */
  for (i = 0; i < layers; i++) {
    int priced, r;
    double t, peak;
    if (a.st->layers->recompute[i] == ND_RECOMPUTE_FULL) continue;
    for (r = 0; r < nrep; r++)  /* a layer counted alike was priced: its figures */
      if (counted_alike(&a, stage_of, first, last, rep[r], i)) break;
    if (r < nrep) {
      if (rep_t[r] != rep_t[r]) continue;  /* that variant was refused: so is this one */
      t = rep_t[r];
      peak = rep_m[r];
    }
    else {
      v->st = *a.st;  /* as given: each variant is resolved from it */
      v->st.layers = &v->layers;
      v->layers.recompute[i] = ND_RECOMPUTE_FULL;
      v->layers.ops[i] = 0;
      priced = nd_estimate_run_cached(a.m, a.dev, pc ? &s->job : &a.job, &v->st,
                                      pc ? &s->costs : &a.costs, pc, e, err, sizeof err) == 0;
      v->layers.recompute[i] = a.st->layers->recompute[i];  /* the plan as given again */
      v->layers.ops[i] = a.st->layers->ops[i];
      rep[nrep] = i;
      rep_t[nrep] = priced ? e->step_time : NAN;
      rep_m[nrep++] = priced ? e->peak : NAN;
      if (!priced) continue;
      t = e->step_time;
      peak = e->peak;
      if (with_budget && !(peak > budget) && (!best || comes_first(t, peak, best_t, best_peak))) {
        nd_estimate *swap = best_e;  /* the best so far kept, its strategy with it */
        best_e = e;
        e = swap;
        best_v->st = v->st;
        best_v->layers = v->layers;
        best_v->layers.recompute[i] = ND_RECOMPUTE_FULL;
        best_v->layers.ops[i] = 0;
        best_v->st.layers = &best_v->layers;
        best = n + 1;
        best_t = t;
        best_peak = peak;
      }
    }
    if (with_budget && !(peak > budget) && !isfinite(t)) unsure = 1;  /* the caller raises */
    n++;
    lua_pushinteger(L, i + 1);
    lua_rawseti(L, -4, n);
    lua_pushnumber(L, t);
    lua_rawseti(L, -3, n);
    lua_pushnumber(L, peak);
    lua_rawseti(L, -2, n);
  }
  lua_setfield(L, -4, "peak_memory_bytes");
  lua_setfield(L, -3, "step_time_s");
  lua_setfield(L, -2, "layer");
  if (best && !unsure) {
    lua_pushinteger(L, best);
    lua_setfield(L, -2, "first");
    nd_push_estimate(L, best_e, &best_v->st, &a.costs, NULL, 1, 2, 0, 0);  /* as run's */
    lua_setfield(L, -2, "result");
  }
  return 1;
}

/*
** layer(model, device, job, strategy, i [, costs]) -> {activations = {none=, selective=,
** full=}, recompute_s = {none=, selective=, full=} (time each mode adds per micro-batch),
** forward_s=, backward_s=, tp_comm_s=, cp_comm_s=, ep_comm_s=, params=, flops_token=}
** for layer i (0-based) alone, per device and micro-batch | nil, reason.
*/
static int e_layer (lua_State *L) {
  int layer = (int)luaL_checkinteger(L, 5);
  call_args a;
  nd_layer_estimate le;
  char err[256];
  int i;
  read_call(L, 6, &a);
  if (nd_estimate_layer(a.m, a.dev, &a.job, a.st, &a.costs, layer, &le, err, sizeof err) != 0)
    return push_refusal(L, err);
  lua_createtable(L, 0, 8);
  lua_createtable(L, 0, ND_RECOMPUTE_COUNT);
  for (i = 0; i < ND_RECOMPUTE_COUNT; i++)
    nd_setnum(L, nd_recompute_name((nd_recompute)i), le.activations[i]);
  lua_setfield(L, -2, "activations");
  lua_createtable(L, 0, ND_RECOMPUTE_COUNT);
  for (i = 0; i < ND_RECOMPUTE_COUNT; i++)
    nd_setnum(L, nd_recompute_name((nd_recompute)i), le.recompute_s[i]);
  lua_setfield(L, -2, "recompute_s");
  nd_setnum(L, "forward_s", le.forward_s);
  nd_setnum(L, "backward_s", le.backward_s);
  nd_setnum(L, "tp_comm_s", le.tp_comm_s);
  nd_setnum(L, "cp_comm_s", le.cp_comm_s);
  nd_setnum(L, "ep_comm_s", le.ep_comm_s);
  nd_setnum(L, "params", le.params);
  nd_setnum(L, "flops_token", le.flops_token);
  return 1;
}

/*
** recipe(precision, body [, first [, last]]) -> name, bf16_first, bf16_last: the recipe's
** table name ("fp8" -> its default) and the body layers it keeps in BF16 at each end for a
** model of `body` layers (first/last: the strategy's counts, nil or -1 for the recipe's).
*/
static int e_recipe (lua_State *L) {
  nd_strategy st;
  int body = (int)luaL_checkinteger(L, 2), first, last;
  nd_strategy_init(&st);
  nd_check_recipe(L, 1, "precision", &st.precision);
  st.bf16_first = (int)luaL_optinteger(L, 3, -1);
  st.bf16_last = (int)luaL_optinteger(L, 4, -1);
  luaL_argcheck(L, body >= 0, 2, "a layer count");
  nd_strategy_bf16_layers(&st, body, &first, &last);
  lua_pushstring(L, nd_strategy_recipe(&st)->name);
  lua_pushinteger(L, first);
  lua_pushinteger(L, last);
  return 3;
}

/*
** check_recipe(device, precision [, param_gather]) -> true | nil, reason: whether the
** device has the peak the recipe's GEMMs need and the recipe can gather quantized
** parameters (nd_recipe_check under ZeRO-3), for callers that walk many strategies.
*/
static int e_check_recipe (lua_State *L) {
  const nd_device *dev = nd_checkdevice(L, 1);
  nd_strategy st;
  char err[256];
  nd_strategy_init(&st);
  nd_check_recipe(L, 2, "precision", &st.precision);
  st.param_gather = lua_toboolean(L, 3);
  st.zero = 3;  /* the widest: a ZeRO stage the walk may refuse is its own label */
  if (nd_recipe_check(&st, dev, ND_MAX_LAYERS, err, sizeof err) != 0) return push_refusal(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

/* costs() -> the default named costs */
static int e_costs (lua_State *L) {
  nd_costs c;
  int i, n;
  const nd_field *f = nd_cost_fields(&n);
  nd_read_costs(L, 1, &c);
  lua_newtable(L);
  for (i = 0; i < n; i++) nd_setnum(L, f[i].name, nd_field_get(&c, &f[i]));
  return 1;
}

/* bench(model, device, job, strategy, n [, costs]) -> seconds of CPU time for n estimates */
static int e_bench (lua_State *L) {
  lua_Integer i, n = luaL_checkinteger(L, 5);
  call_args a;
  nd_strategy *work;
  nd_estimate *e;
  char err[256];
  clock_t t0;
  double sink = 0.0;
  read_call(L, 6, &a);
  work = (nd_strategy *)lua_newuserdatauv(L, sizeof *work, 0);
  e = (nd_estimate *)lua_newuserdatauv(L, sizeof *e, 0);
  /* resolved once: resolving it again (every run's first step) gives it back unchanged, so
     the loop prices it in place, as a caller pricing one strategy repeatedly would */
  if (nd_strategy_resolve_to(a.st, a.m, &a.job, work, err, sizeof err) != 0)
    return luaL_error(L, "bench: %s", err);
  t0 = clock();
  for (i = 0; i < n; i++) {
    if (nd_estimate_run(a.m, a.dev, &a.job, work, &a.costs, e, err, sizeof err) != 0)
      return luaL_error(L, "bench: %s", err);
    sink += e->step_time;
  }
  lua_pushnumber(L, (double)(clock() - t0) / CLOCKS_PER_SEC);
  lua_pushnumber(L, sink);
  return 2;
}

/* Reads an array of mode names into a mask (all modes when absent). */
static unsigned read_modes (lua_State *L, int t) {
  unsigned modes = 0;
  lua_Integer i, n;
  if (lua_isnoneornil(L, t)) return ND_RECOMPUTE_ALL;
  luaL_checktype(L, t, LUA_TTABLE);
  n = luaL_len(L, t);
  for (i = 1; i <= n; i++) {
    int k = 0;  /* nd_plan_modes[k] is bit k of the mask */
    nd_recompute r;
    lua_geti(L, t, i);
    if (lua_type(L, -1) == LUA_TSTRING && nd_recompute_parse(lua_tostring(L, -1), &r) == 0)
      k = (int)r;
    else if (lua_type(L, -1) == LUA_TSTRING)
      for (; nd_plan_modes[k] && strcmp(nd_plan_modes[k], lua_tostring(L, -1)) != 0; k++) {}
    if (lua_type(L, -1) != LUA_TSTRING || !nd_plan_modes[k]) {
      luaL_Buffer b;
      luaL_buffinit(L, &b);
      nd_add_names(&b, nd_plan_modes, "or");
      luaL_pushresult(&b);
      luaL_error(L, "modes[%I]: expected %s", i, lua_tostring(L, -1));
    }
    modes |= 1u << k;
    lua_pop(L, 1);
  }
  luaL_argcheck(L, (modes & ND_RECOMPUTE_ALL) != 0, t, "at least one recompute mode");
  return modes;
}

void nd_push_plan_fields (lua_State *L, const nd_recompute_plan *plan,
                          const nd_model_spec *m, const nd_device *dev, int stages) {
  int i, n = (int)(m->num_layers + m->mtp_layers), any = 0;
  setnums(L, "stage_savings_s", plan->stage_savings, stages);
  setnums(L, "stage_need_bytes", plan->stage_need, stages);
  for (i = 0; i < n; i++) any = any || plan->offload_bytes[i] > 0.0;
  if (any) {  /* bytes per micro-batch each offloaded layer sends to host */
    setnums(L, "layer_offload_bytes", plan->offload_bytes, n);
    nd_setnum(L, "host_link_bandwidth", dev->host_link.bandwidth);
  }
}

/*
** plan(model, device, job, strategy, budget [, costs [, modes]]) -> the estimate of the
** strategy with per-layer recompute chosen under `budget` bytes (strategy.layer_recompute,
** stage_savings_s, stage_need_bytes) | nil, reason ("over memory: ..." when no choice fits).
*/
static int e_plan (lua_State *L) {
  call_args a;
  nd_estimate *e;
  nd_recompute_plan *plan;
  char err[256];
  double budget = luaL_checknumber(L, 5);
  unsigned modes = read_modes(L, 7);
  luaL_argcheck(L, budget > 0.0 && isfinite(budget), 5, "a positive number of bytes");
  read_call(L, 6, &a);
  e = (nd_estimate *)lua_newuserdatauv(L, sizeof *e, 0);
  plan = (nd_recompute_plan *)lua_newuserdatauv(L, sizeof *plan, 0);
  if (nd_recompute_plan_run(a.m, a.dev, &a.job, a.st, &a.costs, budget, modes, plan, e, err,
                            sizeof err) != 0)
    return push_refusal(L, err);
  push_result(L, e, a.st, &a.costs);
  nd_push_plan_fields(L, plan, a.m, a.dev, e->stages);
  return 1;
}

/*
** balance(model, device, job, strategy, budget [, costs [, modes]]) -> the estimate of the
** strategy with an uneven layout balancing the slowest stage within `budget` bytes
** (layout_moves: layers moved from the even split); with modes, every layout tried gets
** its own per-layer recompute plan among them | nil, reason.
*/
static int e_balance (lua_State *L) {
  call_args a;
  nd_estimate *e;
  char err[256];
  double budget = luaL_checknumber(L, 5);
  unsigned modes = lua_isnoneornil(L, 7) ? 0u : read_modes(L, 7);
  int moves;
  luaL_argcheck(L, budget > 0.0 && isfinite(budget), 5, "a positive number of bytes");
  read_call(L, 6, &a);
  e = (nd_estimate *)lua_newuserdatauv(L, sizeof *e, 0);
  if (nd_layout_balance(a.m, a.dev, &a.job, a.st, &a.costs, budget, modes, a.layers, e,
                        &moves, err, sizeof err) != 0)
    return push_refusal(L, err);
  push_result(L, e, a.st, &a.costs);
  nd_setint(L, "layout_moves", moves);
  return 1;
}

/* A Megatron form as a table: {method = "none"|"selective"|"uniform"|"block", num_layers}. */
static void push_form (lua_State *L, int method, int num_layers) {
  static const char *const methods[] = {"none", "selective", "uniform", "block"};
  lua_createtable(L, 0, 4);
  lua_pushstring(L, methods[method]);
  lua_setfield(L, -2, "method");
  nd_setint(L, "num_layers", num_layers);
}

void nd_push_megatron_field (lua_State *L, const nd_megatron_choice *c, int balance) {
  push_form(L, c->method, c->num_layers);
  nd_setint(L, "priced", c->priced);
  if (balance) nd_setint(L, "layout_moves", c->moves);
  lua_setfield(L, -2, "megatron");
}

/*
** megatron(model, device, job, strategy, budget [, costs [, balance]]) -> the estimate of the
** fastest recompute Megatron-LM can state that fits `budget` bytes (strategy.layer_recompute
** for block N), with megatron = {method = "none"|"selective"|"uniform"|"block", num_layers =
** N, priced = estimates made [, layout_moves with balance]} | nil, reason, least = the
** least-memory form priced {method, num_layers, peak_bytes}. With balance, each fitting
** form gets its own layout (nd_recompute_megatron_choose).
*/
static int e_megatron (lua_State *L) {
  call_args a;
  nd_estimate *e;
  nd_megatron_choice c;
  char err[256];
  double budget = luaL_checknumber(L, 5);
  int balance = lua_toboolean(L, 7);
  luaL_argcheck(L, budget > 0.0 && isfinite(budget), 5, "a positive number of bytes");
  read_call(L, 6, &a);
  e = (nd_estimate *)lua_newuserdatauv(L, sizeof *e, 0);
  if (nd_recompute_megatron_choose(a.m, a.dev, &a.job, a.st, &a.costs, budget, balance, e, &c,
                                   err, sizeof err) != 0) {
    push_refusal(L, err);
    if (!(c.least_peak < HUGE_VAL)) return 2;
    push_form(L, c.least_method, c.least_num_layers);
    nd_setnum(L, "peak_bytes", c.least_peak);
    return 3;
  }
  push_result(L, e, a.st, &a.costs);
  nd_push_megatron_field(L, &c, balance);
  return 1;
}

/*
** layout(strategy, layers, mtp) -> {stage_layers = {body+MTP per chunk, layer order},
** stages = {per stage}, vpp = n, pipeline_layout = Megatron's string, ...} | nil, message.
** The pipeline layout alone, under the rules nd.estimate applies (a strategy table with
** pp, vpp and the layout fields).
*/
static int e_layout (lua_State *L) {
  strategy_box *box = (strategy_box *)lua_newuserdatauv(L, sizeof *box, 0);
  nd_strategy *st = &box->st;
  lua_Integer body = luaL_checkinteger(L, 2), mtp = luaL_optinteger(L, 3, 0);
  nd_model_spec m;
  char err[256];
  int s, c;
  nd_read_strategy(L, 1, 0, st, &box->layers);
  if (body < 1 || mtp < 0 || body + mtp > ND_MAX_LAYERS)
    return luaL_argerror(L, 2, "expected 1 to 1024 body+MTP layers");
  if (nd_layout_resolve(st, (int)body, (int)mtp, err, sizeof err) != 0) {
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
  }
  memset(&m, 0, sizeof m);
  m.num_layers = body;
  m.mtp_layers = mtp;
  lua_createtable(L, 0, 8);
  nd_setint(L, "pp", st->pp);
  nd_setint(L, "vpp", st->vpp);
  push_layout(L, st, &m);
  lua_createtable(L, st->pp, 0);
  for (s = 0; s < st->pp; s++) {
    int n = 0;
    for (c = 0; c < st->vpp; c++) n += st->stage_layers[c * st->pp + s];
    lua_pushinteger(L, n);
    lua_rawseti(L, -2, s + 1);
  }
  lua_setfield(L, -2, "stages");
  return 1;
}

/* Pushes a NULL-terminated list of names as an array, or names of(0 .. n-1). */
static void push_names (lua_State *L, const char *const *names) {
  int i;
  lua_newtable(L);
  for (i = 0; names[i]; i++) { lua_pushstring(L, names[i]); lua_rawseti(L, -2, i + 1); }
}

static void push_enum (lua_State *L, const char *(*name)(int), int n) {
  int i;
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) { lua_pushstring(L, name(i)); lua_rawseti(L, -2, i + 1); }
}

static const char *schedule_name (int i) { return nd_schedule_name((nd_schedule)i); }
static const char *precision_name (int i) { return nd_precision_name((nd_precision)i); }
static const char *dim_name (int i) { return nd_dim_name((nd_dim)i); }

/* Pushes the descriptor rows as an array of {name, default, lo, hi, lo_open, unit, doc
   [, fit_lo, fit_hi, fit_scale] [, stack_lo, stack_hi]}. */
static void push_fields (lua_State *L, const nd_field *f, int n) {
  int i;
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_createtable(L, 0, 10);
    lua_pushstring(L, f[i].name); lua_setfield(L, -2, "name");
    nd_setnum(L, "default", f[i].dflt);
    nd_setnum(L, "lo", f[i].lo);
    nd_setnum(L, "hi", f[i].hi);
    lua_pushboolean(L, f[i].lo_open); lua_setfield(L, -2, "lo_open");
    lua_pushstring(L, f[i].unit); lua_setfield(L, -2, "unit");
    lua_pushstring(L, f[i].doc); lua_setfield(L, -2, "doc");
    if (f[i].fit_hi > 0.0) {
      nd_setnum(L, "fit_lo", f[i].fit_lo);
      nd_setnum(L, "fit_hi", f[i].fit_hi);
      nd_setnum(L, "fit_scale", f[i].fit_scale);
    }
    if (f[i].stack_hi > 0.0) {
      nd_setnum(L, "stack_lo", f[i].stack_lo);
      nd_setnum(L, "stack_hi", f[i].stack_hi);
    }
    lua_rawseti(L, -2, i + 1);
  }
}

/*
** names() -> the core's vocabulary, each list in its enum order: schedules, recompute
** (the modes), megatron_schedules (those Megatron-LM states), search_recompute (the search's recompute values), plan_modes (what a
** per-layer plan may use), ops, precisions (peak slots), time_parts, memory_parts (a search
** row's), groups, layout_variants, dims (the search's), strategy_keys, space_keys; job_limits
** (each job field's ceiling); costs and efficiency: the descriptor rows (ndplan/fields.h).
*/
static int e_names (lua_State *L) {
  int n;
  const nd_field *f;
  lua_createtable(L, 0, 16);
  push_enum(L, schedule_name, ND_SCHED_COUNT); lua_setfield(L, -2, "schedules");
  {  /* the schedules Megatron-LM states (the others fall back to 1f1b in its files) */
    int s, k = 0;
    lua_newtable(L);
    for (s = 0; s < ND_SCHED_COUNT; s++)
      if (nd_schedule_megatron((nd_schedule)s)) {
        lua_pushstring(L, nd_schedule_name((nd_schedule)s));
        lua_rawseti(L, -2, ++k);
      }
    lua_setfield(L, -2, "megatron_schedules");
  }
  push_enum(L, nd_recompute_word, ND_RECOMPUTE_COUNT); lua_setfield(L, -2, "recompute");
  push_enum(L, nd_search_recompute_name, ND_SEARCH_MEGATRON + 1);
  lua_setfield(L, -2, "search_recompute");
  push_names(L, nd_plan_modes); lua_setfield(L, -2, "plan_modes");
  push_enum(L, nd_op_name, ND_OP_COUNT); lua_setfield(L, -2, "ops");
  push_enum(L, precision_name, ND_PREC_COUNT); lua_setfield(L, -2, "precisions");
  push_enum(L, nd_time_part_name, ND_T_COUNT); lua_setfield(L, -2, "time_parts");
  push_names(L, nd_memory_parts); lua_setfield(L, -2, "memory_parts");
  push_enum(L, nd_group_name, ND_GROUP_COUNT); lua_setfield(L, -2, "groups");
  push_enum(L, nd_layout_variant_name, ND_VARIANT_COUNT);
  lua_setfield(L, -2, "layout_variants");
  push_enum(L, dim_name, ND_DIM_COUNT); lua_setfield(L, -2, "dims");
  push_names(L, nd_strategy_keys); lua_setfield(L, -2, "strategy_keys");
  push_names(L, nd_space_keys); lua_setfield(L, -2, "space_keys");
  lua_createtable(L, 0, 3);
  for (n = 0; n < 3; n++) nd_setint(L, nd_job_limits[n].key, nd_job_limits[n].max);
  lua_setfield(L, -2, "job_limits");
  f = nd_cost_fields(&n);
  push_fields(L, f, n); lua_setfield(L, -2, "costs");
  f = nd_efficiency_fields(&n);
  push_fields(L, f, n); lua_setfield(L, -2, "efficiency");
  return 1;
}

/*
** warmup(schedule, pp, vpp, mb, stage) -> the forwards (chunk forwards when interleaved)
** stage `stage` (0-based) runs before its first backward (nd_pipeline_warmup).
*/
static int e_warmup (lua_State *L) {
  nd_strategy st;
  int s = (int)luaL_checkinteger(L, 5);
  nd_strategy_init(&st);
  nd_check_schedule(L, 1, &st.schedule);
  st.pp = (int)luaL_checkinteger(L, 2);
  st.vpp = (int)luaL_checkinteger(L, 3);
  st.mb = (int)luaL_checkinteger(L, 4);
  luaL_argcheck(L, st.pp >= 1 && st.pp <= ND_MAX_STAGES, 2, "1 to 512 stages");
  luaL_argcheck(L, st.vpp >= 1 && st.vpp <= ND_MAX_CHUNKS, 3, "1 to 512 chunks");
  luaL_argcheck(L, st.mb >= 1 && st.mb <= 1000000000, 4, "a positive micro-batch count");
  luaL_argcheck(L, s >= 0 && s < st.pp, 5, "a stage from 0 to pp - 1");
  lua_pushinteger(L, nd_pipeline_warmup(&st, s));
  return 1;
}

/*
** pack_costs(costs) -> the costs read once, for callers that pass the same costs to many
** estimates (nd.estimate with a stack profile's costs): accepted wherever a costs table is.
*/
static int e_pack_costs (lua_State *L) {
  nd_costs *c = (nd_costs *)lua_newuserdatauv(L, sizeof *c, 0);
  nd_read_costs(L, 1, c);
  lua_settop(L, 2);
  luaL_setmetatable(L, COSTS_MT);
  return 1;
}

/*
** stage_figures(result) -> peaks, recompute_s: each stage's peak bytes and recompute
** seconds, as result.stages states them, without building result.stages (its chunks are
** most of a result's cost when a caller needs these two figures alone, as a plan does).
** Once result.stages is built or assigned, its figures are read from there.
*/
static int e_stage_figures (lua_State *L) {
  const nd_lazy *z = nd_lazy_state(L, 1);
  const lazy_result *r;
  int i;
  if (!z || z->names != lazy_names) return luaL_argerror(L, 1, "expected an nd.estimate result");
  r = (const lazy_result *)(const void *)z;
  lua_settop(L, 1);
  lua_createtable(L, r->stages, 0);
  lua_createtable(L, r->stages, 0);
  if (z->built & (1u << LAZY_STAGES)) {
    if (lua_getfield(L, 1, "stages") != LUA_TTABLE)
      return luaL_error(L, "stage_figures: result.stages is not a table");
    for (i = 1; i <= (int)luaL_len(L, -1); i++) {
      lua_geti(L, -1, i);
      lua_getfield(L, -1, "peak");
      lua_rawseti(L, 2, i);
      lua_getfield(L, -1, "recompute_s");
      lua_rawseti(L, 3, i);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return 2;
  }
  for (i = 0; i < r->stages; i++) {
    lua_pushnumber(L, r->stage[i].peak);
    lua_rawseti(L, 2, i + 1);
    lua_pushnumber(L, r->stage[i].recompute_s);
    lua_rawseti(L, 3, i + 1);
  }
  return 2;
}

static const luaL_Reg funcs[] = {
  {"run", e_run},
  {"stage_figures", e_stage_figures},
  {"estimate", e_estimate},
  {"add_stack", e_add_stack},
  {"finish", e_finish},
  {"pack_costs", e_pack_costs},
  {"one_more_full", e_one_more_full},
  {"warmup", e_warmup},
  {"names", e_names},
  {"layout", e_layout},
  {"plan", e_plan},
  {"megatron", e_megatron},
  {"balance", e_balance},
  {"costs", e_costs},
  {"recipe", e_recipe},
  {"check_recipe", e_check_recipe},
  {"layer", e_layer},
  {"bench", e_bench},
  {NULL, NULL}
};

int luaopen_ndplan_estimate (lua_State *L) {
  if (luaL_newmetatable(L, COSTS_MT)) {
    lua_pushliteral(L, COSTS_MT);  /* getmetatable(costs) cannot reach the real one */
    lua_setfield(L, -2, "__metatable");
  }
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
