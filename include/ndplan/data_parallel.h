/*
** ndplan/data_parallel.h -- the data-parallel rules, once for the estimator, the search's
** bounds and the bindings: what each ZeRO stage shards, over which ranks, on which groups
** (HSDP's shard group and its replicas), and the collectives a step runs on them.
*/
#ifndef NDPLAN_DATA_PARALLEL_H
#define NDPLAN_DATA_PARALLEL_H

#include "ndplan/comm.h"
#include "ndplan/estimate.h"

/*
** Which of a stage's states ZeRO shards over the shard group (1) or keeps whole (0): the
** optimizer states from ZeRO 1, the gradients from 2, the weights from 3. FSDP without
** resharding (reshard 0) keeps its weights and gradients whole from the step's gather to
** its reduce-scatter: only the optimizer states stay sharded.
*/
typedef struct nd_zero_split {
  int weights, grads, optimizer;
} nd_zero_split;

nd_zero_split nd_zero_split_of (int zero, int reshard);

/*
** The data-parallel groups of st with `shard` ranks in a shard group (st->dp_shard, or all
** of dp): the dense parameters' over shard x cp ranks, TP apart; the routed experts' over
** what EP x ETP leaves of tp x cp x shard (one rank without experts); HSDP's replicas, dp /
** shard copies of the shard group; and the ranks each part shards over, as doubles.
*/
typedef struct nd_dp_groups {
  nd_group dense, expert, replicas;
  double dense_ranks, expert_ranks;
} nd_dp_groups;

/* The ranks a ZeRO stage shards st's dense parameters (*dense: shard x cp) and its routed
   experts (*expert: tp x cp x shard over ep x etp) over, with `shard` ranks a shard group. */
void nd_dp_ranks (const nd_strategy *st, int shard, double *dense, double *expert);

void nd_dp_groups_place (const nd_fabric *f, const nd_model_spec *m, const nd_strategy *st,
                         int shard, nd_dp_groups *g);

/*
** One step's data-parallel traffic outside ZeRO-3's per-micro-batch collectives, for a
** stage of pd dense and pe routed-expert parameters whose gathered weights are wd and we
** bytes: at ZeRO 0 one gradient all-reduce over g (every replica: groups placed over all
** of dp); else a reduce-scatter of the gradients, HSDP's replica all-reduce of the shards,
** and the gather of the updated weights. *grad_s and *gather_s in seconds.
*/
void nd_dp_step_times (const nd_fabric *f, const nd_costs *c, const nd_dp_groups *g, int zero,
                       double pd, double pe, double wd, double we, double *grad_s,
                       double *gather_s);

/* HSDP's all-reduce of the reduce-scattered gradient shards across the replicas, once a
   step (0 without replicas or below ZeRO 1). */
double nd_dp_replica_time (const nd_fabric *f, const nd_costs *c, const nd_dp_groups *g,
                           int zero, double pd, double pe);

/*
** Resharded ZeRO-3's collectives of one micro-batch: `gathers` all-gathers of the weights
** (wd, we bytes: forward, backward, and the recompute's) and a reduce-scatter of the
** gradients, on the shard groups; a flat ring (zero3_flat_ring) runs every hop at one
** device's NIC share.
*/
double nd_zero3_mb_time (const nd_fabric *f, const nd_costs *c, const nd_dp_groups *g,
                         double gathers, double wd, double we, double pd, double pe);

/* Of per seconds of ZeRO-3 traffic a micro-batch, what shows beside `compute` seconds of its
   compute: zero3_overlap of the compute hides it, at overlap_sm_share of what it hides. */
double nd_zero3_shown (const nd_costs *c, double per, double compute);

/*
** A stage's transient buffers besides the recompute working set: the larger of a TP gather
** (tp > 1) of the micro-batch's input (T tokens a rank of h) and, under resharded ZeRO-3
** (z3), the double-buffered gather of a layer's weights (gather bytes) with that layer's
** unsharded gradient (gather_grad bytes).
*/
double nd_stage_buffers (const nd_costs *c, int tp, int z3, double T, double h, double gather,
                         double gather_grad);

#endif
