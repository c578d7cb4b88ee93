/*
** search_bound.h -- lower bounds on a searched candidate's step time and peak memory, for
** the walk to skip what cannot enter the ranking or cannot fit before pricing it (private
** to the core: search.c is its only caller).
*/
#ifndef NDPLAN_SEARCH_BOUND_H
#define NDPLAN_SEARCH_BOUND_H

#include "ndplan/search.h"

typedef struct nd_bound nd_bound;
typedef struct nd_bound_cache nd_bound_cache;

/* The layer prices of model m's groups, for the bounds of one search and recipe (the prices
   depend on the device, job, costs and recipe too): first_bytes of them at first, growing up
   to cache_bytes as the groups fill it; with threads > 1 the bounds of that many threads
   share it (lookups read it unlocked, stores lock). NULL: out of memory, or a model the
   bounds do not cover. */
nd_bound_cache *nd_bound_cache_new (const nd_model_spec *m, size_t first_bytes,
                                    size_t cache_bytes, int threads);
void nd_bound_cache_free (nd_bound_cache *c);
/* The bytes a cache of model m's groups takes at its most (its most groups), 0 for a model
   the bounds do not cover: what a share of the groups (a lane's) needs a share of. */
size_t nd_bound_cache_most (const nd_model_spec *m);
/* The groups it has room for now. */
int nd_bound_cache_room (nd_bound_cache *c);

/* The bounds of one search whose per-layer and Megatron plans fit `budget` bytes per device,
   one thread's, with the prices kept in `cache` (which outlives it), or in a cache of its
   own of cache_bytes (nd_bound_new). NULL: out of memory, or a model the bounds do not
   cover. */
nd_bound *nd_bound_new_shared (const nd_model_spec *m, const nd_device *dev,
                               const nd_job *job, const nd_costs *costs,
                               const nd_strategy *base, double budget, nd_bound_cache *cache);
nd_bound *nd_bound_new (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                        const nd_costs *costs, const nd_strategy *base, double budget,
                        size_t cache_bytes);
void nd_bound_free (nd_bound *b);

/*
** Lower bounds of candidate c, whose strategy st the walk has resolved: *time_s under the
** step time nd_estimate_run gives it, *mem_b under its heaviest stage's peak (per-layer
** and Megatron recompute: under the peak of every choice their planners have). Returns 0,
** or -1 when no bound applies (DualPipe, an offload share, a layer the estimator refuses):
** the candidate is priced.
*/
int nd_bound_eval (nd_bound *b, const nd_candidate *c, const nd_strategy *st, double *time_s,
                   double *mem_b);

/* The same bounds of n candidates that differ from st only in ZeRO (zero[i]) and the shard
   group (shard[i]): time_s[i] and mem_b[i], a time past cut (with the walk's margin:
   time_s[i] x (1 - 1e-9) > cut) perhaps short of its bound, as past the cut is all a
   caller reads (HUGE_VAL: every bound whole). Returns 0, or -1 when no bound applies. */
int nd_bound_eval_shards (nd_bound *b, const nd_candidate *c, const nd_strategy *st, int n,
                          const int *zero, const int *shard, double cut, double *time_s,
                          double *mem_b);

/* The part of nd_bound_eval_shards' time_s that every (ZeRO, shard group) of c's layout
   shares (before the DP time and a plan's recompute): *time_s. 0, or -1 when no bound
   applies. */
int nd_bound_layout_time (nd_bound *b, const nd_candidate *c, const nd_strategy *st,
                          double *time_s);
/*
** Lower bounds shared by every candidate that differs from c (strategy st) only in VPP,
** the layout, ZeRO and the shard group: the heaviest stage holds the average of the
** model's layer time and parameters over pp at least, whatever the layout. For each VPP
** vpp[i] (the search's schedule at it), time_s[i]; in params, what
** nd_bound_spread_memory reads for each (ZeRO, shard group) (the parameters alone).
** Returns 0, or -1 when no bound applies.
*/
int nd_bound_spread (nd_bound *b, const nd_candidate *c, const nd_strategy *st, int nv,
                     const int *vpp, double *time_s, double *params);
/* A lower bound on the least of nd_bound_spread's time_s of c's node (the same arguments),
   *least_s, from what b's earlier calls found at st's (tp, cp, mbs, sp): the least layer
   time of the (ep, etp) pairs met there, st's own among them. Returns 0, or -1 when that
   is not known (or no bound applies): nd_bound_spread tells. */
int nd_bound_floor (nd_bound *b, const nd_candidate *c, const nd_strategy *st, int nv,
                    const int *vpp, double *least_s);
/* The memory bound of spread's candidates (params: what nd_bound_spread gave for st) at
   ZeRO zero over the shard group shard (0 when shard < 1: none). */
double nd_bound_spread_memory (const nd_bound *b, const nd_strategy *st, const double *params,
                               int zero, int shard);

#endif
