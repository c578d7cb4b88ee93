/*
** ndplan/layout.h -- pipeline layout: uneven layer counts per stage that balance the
** slowest stage (the embedding and the LM head cost time and memory on the first and last
** stages) while every stage stays within the memory budget.
*/
#ifndef NDPLAN_LAYOUT_H
#define NDPLAN_LAYOUT_H

#include <stddef.h>

#include "ndplan/recompute.h"

/*
** Starting from st's layout (even when none is given), moves single layers across the
** boundaries of the slowest stage while that lowers the step time and every stage fits
** `budget` bytes; with per_layer_modes != 0 each layout is priced with its own per-layer
** recompute plan among those modes, else with st's recompute as given. On success st holds
** the layout (stage_layers, and its per-layer plan when it has one, copied into `layers`,
** the caller's storage, which may be st's own plan), out its estimate, *moves the number of
** layers moved; returns 0. Returns -1 with a reason when no layout tried fits or the
** strategy is refused. Needs vpp = 1 and a schedule other than dualpipe.
*/
int nd_layout_balance (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                       nd_strategy *st, const nd_costs *costs, double budget,
                       unsigned per_layer_modes, nd_layer_plan *layers, nd_estimate *out,
                       int *moves, char *err, size_t errlen);

/*
** The same search with a Megatron-LM recompute form fixed instead (method ND_MEGATRON_*,
** num_layers N for block): each layout tried states the form over its own stages
** (nd_megatron_form; a block form's plan ends in `layers`). Used by
** nd_recompute_megatron_choose to give each form its layout.
*/
int nd_layout_balance_megatron (const nd_model_spec *m, const nd_device *dev,
                                const nd_job *job, nd_strategy *st, const nd_costs *costs,
                                double budget, int method, int num_layers,
                                nd_layer_plan *layers, nd_estimate *out, int *moves,
                                char *err, size_t errlen);

#endif
