/*
** data_parallel.c -- ZeRO's sharding, the data-parallel groups and their collectives (see
** ndplan/data_parallel.h), as the estimator prices them and the search's bounds follow.
*/
#include "ndplan/data_parallel.h"

nd_zero_split nd_zero_split_of (int zero, int reshard) {
  nd_zero_split z;
  z.weights = zero >= 3 && reshard;
  z.grads = zero >= 2 && !(zero == 3 && !reshard);
  z.optimizer = zero >= 1;
  return z;
}

void nd_dp_ranks (const nd_strategy *st, int shard, double *dense, double *expert) {
  *dense = (double)shard * st->cp;
  *expert = (double)st->tp * st->cp * shard / ((double)st->ep * st->etp);
}

void nd_dp_groups_place (const nd_fabric *f, const nd_model_spec *m, const nd_strategy *st,
                         int shard, nd_dp_groups *g) {
  int dense = st->tp * st->cp * shard, ex = st->ep * st->etp;
  g->dense = nd_group_place(f, shard * st->cp, st->tp);  /* gradients: shard x CP */
  /* expert data parallelism exists only where there are experts */
  g->expert = nd_group_place(f, m->num_experts > 0 ? dense / ex : 1, ex);
  g->replicas = nd_group_place(f, st->dp / shard, dense);
  nd_dp_ranks(st, shard, &g->dense_ranks, &g->expert_ranks);
}

double nd_dp_replica_time (const nd_fabric *f, const nd_costs *c, const nd_dp_groups *g,
                           int zero, double pd, double pe) {
  if (zero < 1 || g->replicas.size <= 1) return 0.0;
  return nd_allreduce_time(f, &g->replicas,
                           c->grad_bytes * (pd / g->dense_ranks + pe / g->expert_ranks));
}

void nd_dp_step_times (const nd_fabric *f, const nd_costs *c, const nd_dp_groups *g, int zero,
                       double pd, double pe, double wd, double we, double *grad_s,
                       double *gather_s) {
  if (zero == 0) {  /* without sharding, one all-reduce over every replica */
    *grad_s = nd_allreduce_time(f, &g->dense, c->grad_bytes * pd)
            + nd_allreduce_time(f, &g->expert, c->grad_bytes * pe);
    *gather_s = 0.0;
    return;
  }
  *grad_s = nd_reducescatter_time(f, &g->dense, c->grad_bytes * pd)
          + nd_reducescatter_time(f, &g->expert, c->grad_bytes * pe)
          + nd_dp_replica_time(f, c, g, zero, pd, pe);
  *gather_s = nd_allgather_time(f, &g->dense, wd) + nd_allgather_time(f, &g->expert, we);
}

double nd_zero3_mb_time (const nd_fabric *f, const nd_costs *c, const nd_dp_groups *g,
                         double gathers, double wd, double we, double pd, double pe) {
  nd_group fd = g->dense, fe = g->expert;
  if (c->zero3_flat_ring > 0.0) fd.local = fe.local = 1;
  return gathers * nd_allgather_time(f, &fd, wd)
       + nd_reducescatter_time(f, &fd, c->grad_bytes * pd)
       + gathers * nd_allgather_time(f, &fe, we)
       + nd_reducescatter_time(f, &fe, c->grad_bytes * pe);
}

double nd_zero3_shown (const nd_costs *c, double per, double compute) {
  double hidden = c->zero3_overlap * compute;
  if (hidden > per) hidden = per;
  return per - hidden + c->overlap_sm_share * hidden;
}

double nd_stage_buffers (const nd_costs *c, int tp, int z3, double T, double h, double gather,
                         double gather_grad) {
  double buffers = tp > 1 ? c->activation_bytes * T * h : 0.0;
  /* (the backward of a ZeRO-3 layer holds its gathered weights, the next layer's prefetched
     ones and its own unsharded gradient until the reduce-scatter takes it) */
  if (z3 && 2.0 * gather + gather_grad > buffers)
    buffers = 2.0 * gather + gather_grad;
  return buffers;
}
