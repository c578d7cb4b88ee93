/*
** lestimate.h -- what the estimate and search bindings (ndplan.c.estimate, ndplan.c.search)
** share: the readers of their arguments (lread.c: one reader of named costs, strategies,
** recipes and schedules, so the two cannot disagree on what exists), and the pushers of
** their result tables (lestimate.c). Include lua.h and lauxlib.h first.
*/
#ifndef NDPLAN_BIND_LESTIMATE_H
#define NDPLAN_BIND_LESTIMATE_H

#include "ndplan/estimate.h"
#include "ndplan/recompute.h"

/* ---- reading (lread.c) ---- */

/* Costs read once (pack_costs): a userdata holding one nd_costs, taken where a table is. */
#define COSTS_MT "ndplan.costs"

/* Fills c with the defaults, then the table at index t (nil: none; a packed COSTS_MT
   userdata: its costs); raises on an unknown name or a value that is not a number. */
void nd_read_costs (lua_State *L, int t, nd_costs *c);

/* Reads a strategy table; misuse (wrong types, unknown keys or names) raises. A key that is
   no strategy key but is true in the table at index `ignore` (0: none; a set read once per
   table) is skipped, and any other is an unknown argument of nd.estimate's (whose arguments
   the table is). A per-layer
   plan (layer_recompute or layer_offload given) is read into `plan`, the caller's storage,
   and st->layers points there; without one st->layers is NULL. */
void nd_read_strategy (lua_State *L, int t, int ignore, nd_strategy *st, nd_layer_plan *plan);

/* nd_read_strategy for nd.estimate's arguments at t, which hold the job too (true in
   ignore, a table; its false keys are those the plain call does not take): 0 (nothing read
   or raised) when one of ignore's false keys is given or devices, global_batch or seq_len
   is not an integer from 1 to its ceiling, else 1 with the job and the strategy read. The
   set ignore is read once (keep it constant). */
int nd_read_args (lua_State *L, int t, int ignore, nd_strategy *st, nd_layer_plan *plan,
                  nd_job *job);

/* Each job field's ceiling, in nd_job's order (the core counts devices and tokens in 32-bit
   ints, a billion being the documented one). */
typedef struct nd_job_limit { const char *key; lua_Integer max; } nd_job_limit;
extern const nd_job_limit nd_job_limits[3];

/* The job table at index t (devices, global_batch, seq_len; 0 where absent). */
void nd_read_job (lua_State *L, int t, nd_job *job);

/* nd_recompute_name for an int (the form name lists take). */
const char *nd_recompute_word (int i);

/* Parses the recipe name at index i into *out; raises "KEY: expected bf16, ..., got 'x'"
   listing the table's names. */
void nd_check_recipe (lua_State *L, int i, const char *key, nd_recipe_id *out);
/* Parses the schedule name at index i into *out; raises "schedule: expected 1f1b, ...,
   got 'x'" listing the core's names. */
void nd_check_schedule (lua_State *L, int i, nd_schedule *out);

/* A set of op switches (selective_ops) from the array of op names on top of the stack, as
   an ND_OP_BIT mask; raises naming key (and, for layer > 0, the element of a per-layer
   list). */
unsigned nd_read_ops (lua_State *L, const char *key, lua_Integer layer);

/* Adds "a, b, c <last> d" for a NULL-terminated list of names to b. */
void nd_add_names (luaL_Buffer *b, const char *const *names, const char *last);

/* ---- pushing (lestimate.c) ---- */

/* A copy of the table at index t (its fields, one level deep), pushed. */
void nd_push_copy (lua_State *L, int t);

/* Pushes {recipe, family, scaling, gemm_precision, gemm_peak_flops, element_bytes, ...}:
   the recipe of st with its byte widths under costs c (ndplan estimate --json
   "precision"). */
void nd_push_recipe (lua_State *L, const nd_strategy *st, const nd_device *dev,
                     const nd_costs *c, int body);

/* Sets the pipeline layout flags of st (Megatron's names) on the table on top: the fields
   nd.estimate reads them from, pushed where set. */
void nd_push_layout_flags (lua_State *L, const nd_strategy *st);

/* Pushes nd.estimate's result table of an estimate (its fields built on first read) for
   the strategy st priced under costs c and the job (NULL: result.job is left to finish),
   holding the model and device at stack indices model and device, and the stack profile's
   figures at index figures (0: none; result.stack and .step_time_band when read). finish:
   the index of the budget, then the model's and the device's names (0: none): the fields
   ndplan.c.estimate's finish sets but the job, set now. */
void nd_push_estimate (lua_State *L, const nd_estimate *e, const nd_strategy *st,
                       const nd_costs *c, const nd_job *job, int model, int device,
                       int figures, int finish);
/* Adds a per-layer plan's fields to the result on top: stage_savings_s, stage_need_bytes
   and, when a layer offloads, layer_offload_bytes and host_link_bandwidth. */
void nd_push_plan_fields (lua_State *L, const nd_recompute_plan *plan,
                          const nd_model_spec *m, const nd_device *dev, int stages);
/* Adds the Megatron form chosen (result.megatron = {method, num_layers, priced
   [, layout_moves]}) to the result on top. */
void nd_push_megatron_field (lua_State *L, const nd_megatron_choice *c, int balance);

/* t[k] = v for the table on top of the stack. */
void nd_setnum (lua_State *L, const char *k, double v);
void nd_setint (lua_State *L, const char *k, lua_Integer v);

#endif
