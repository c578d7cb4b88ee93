/*
** ndplan/fields.h -- the one vocabulary: descriptors of the named numbers (the estimators'
** costs, a device's efficiencies) and the name lists of a strategy table. Validation, the
** defaults, the Lua bindings and the Lua library all iterate these tables, so adding a cost
** or an efficiency is one row here (and the struct member it names).
*/
#ifndef NDPLAN_FIELDS_H
#define NDPLAN_FIELDS_H

#include <stddef.h>

#include "ndplan/device.h"

/*
** One named double of nd_costs or nd_efficiency. Valid values lie in [lo, hi] (lo_open:
** above lo), and are finite. `unit` is the file kind the Lua library parses (device files:
** "fraction", "flop", "time", "keys"; costs: "bytes", "share", "factor", "seconds").
** fit_lo/fit_hi/fit_scale are calibrate's default bounds and the scale below which its
** log mapping turns linear; fit_hi 0: not a calibrated field. stack_lo/stack_hi are the
** physical bounds a stack profile's fit keeps the field within (lua/ndplan/stack_fit.lua;
** the assumptions report's range for an uncalibrated one); stack_hi 0: no profile fits it.
*/
typedef struct nd_field {
  const char *name;
  size_t offset;
  double dflt;
  double lo, hi;
  int lo_open;
  const char *unit;
  double fit_lo, fit_hi, fit_scale;
  double stack_lo, stack_hi;
  const char *doc;
} nd_field;

/* The descriptor tables, in their documented order; *n gets the row count. */
const nd_field *nd_cost_fields (int *n);
const nd_field *nd_efficiency_fields (int *n);
/* The row named `name`, or NULL. */
const nd_field *nd_field_find (const nd_field *table, int n, const char *name);
/* The slot a descriptor names in its struct (nd_costs or nd_efficiency). */
double *nd_field_slot (void *base, const nd_field *f);
double nd_field_get (const void *base, const nd_field *f);

/* gemm_half_size's default (nd_device_init): derived as the GEMM FLOPs of this much work at
   the bf16 peak (nd_device_complete and the efficiency curves read it so). An assumed
   constant that makes the curve scale with the device's speed. */
#define ND_DERIVED (-1.0)
#define ND_HALF_SIZE_SECONDS 1e-6

/*
** Name lists, NULL-terminated, in the core's enum order:
**   the keys of a strategy table (what nd.estimate reads and result.strategy carries back);
**   the keys of a search space besides its dimensions (nd_dim_name);
**   the memory parts of a search row (nd_search_row.mem order);
**   the modes a per-layer plan may use (the recompute modes, then "offload", "variants").
*/
extern const char *const nd_strategy_keys[];

/* The strategy keys as an enum (ND_KEY_TP is nd_strategy_keys' index of "tp"), for readers
   that keep a strategy table's values by key. */
#define ND_STRATEGY_KEYS(X) \
  X(DP, "dp") X(TP, "tp") X(PP, "pp") X(VPP, "vpp") X(CP, "cp") X(EP, "ep") X(ETP, "etp") \
  X(SP, "sp") X(ZERO, "zero") X(DP_SHARD, "dp_shard") X(DP_REPLICATE, "dp_replicate") \
  X(MBS, "mbs") X(MB, "mb") X(SCHEDULE, "schedule") X(RECOMPUTE, "recompute") \
  X(LAYER_RECOMPUTE, "layer_recompute") X(OFFLOAD, "offload") X(PRECISION, "precision") \
  X(FLASH_ATTENTION, "flash_attention") X(TP_COMM_OVERLAP, "tp_comm_overlap") \
  X(STAGE_LAYERS, "stage_layers") X(SELECTIVE_OPS, "selective_ops") \
  X(LAYER_OFFLOAD, "layer_offload") X(LAYER_SELECTIVE_OPS, "layer_selective_ops") \
  X(FP8_PARAM_GATHER, "fp8_param_gather") X(BF16_FIRST_LAYERS, "bf16_first_layers") \
  X(BF16_LAST_LAYERS, "bf16_last_layers") X(RESHARD_AFTER_FORWARD, "reshard_after_forward") \
  X(ACCOUNT_EMBEDDING, "account_for_embedding_in_pipeline_split") \
  X(ACCOUNT_LOSS, "account_for_loss_in_pipeline_split") \
  X(DECODER_FIRST, "decoder_first_pipeline_num_layers") \
  X(DECODER_LAST, "decoder_last_pipeline_num_layers") \
  X(PIPELINE_LAYOUT, "pipeline_model_parallel_layout")
#define ND_KEY_ENUM_(id, name) ND_KEY_##id,
typedef enum nd_strategy_key { ND_STRATEGY_KEYS(ND_KEY_ENUM_) ND_KEY_COUNT } nd_strategy_key;
#undef ND_KEY_ENUM_
extern const char *const nd_space_keys[];
extern const char *const nd_memory_parts[];
extern const char *const nd_plan_modes[];

#endif
