/*
** comm.c -- alpha-beta prices of collectives on a two-level fabric.
** Ring algorithms: an all-reduce moves 2(n-1)/n of the buffer per rank in 2(n-1) steps,
** all-gather and reduce-scatter (n-1)/n in n-1 steps. A group spanning domains runs the
** ring hierarchically (NCCL's behaviour on multi-NIC nodes): inside each domain first,
** then across domains on 1/local of the data per device, all NICs busy in parallel.
*/
#include "ndplan/comm.h"

nd_group nd_group_place (const nd_fabric *f, int size, int stride) {
  nd_group g;
  g.size = size < 1 ? 1 : size;
  g.stride = stride < 1 ? 1 : stride;
  if (g.stride >= f->domain) g.local = 1;
  else {
    int fit = f->domain / g.stride;  /* members of this group one domain holds */
    g.local = fit < g.size ? fit : g.size;
  }
  return g;
}

/* One ring phase ((n-1)/n of `bytes`, n-1 steps) on a group; hierarchical across domains. */
static double ring_phase (const nd_fabric *f, const nd_group *g, double bytes) {
  int n = g->size, n1 = g->local, n2;
  double t = 0.0;
  if (n <= 1 || bytes <= 0.0) return 0.0;
  n2 = (n + n1 - 1) / n1;
  if (n1 > 1)
    t += (double)(n1 - 1) / n1 * bytes / f->up.bandwidth + (n1 - 1) * f->up.latency;
  if (n2 > 1)
    t += (double)(n2 - 1) / n2 * (bytes / n1) / f->out.bandwidth + (n2 - 1) * f->out.latency;
  return t;
}

double nd_allreduce_time (const nd_fabric *f, const nd_group *g, double bytes) {
  return 2.0 * ring_phase(f, g, bytes);  /* reduce-scatter then all-gather */
}

double nd_allgather_time (const nd_fabric *f, const nd_group *g, double bytes) {
  return ring_phase(f, g, bytes);
}

double nd_reducescatter_time (const nd_fabric *f, const nd_group *g, double bytes) {
  return ring_phase(f, g, bytes);
}

/*
** All-to-all: each rank keeps 1/n of its buffer and sends the rest, (local-1)/n over the
** scale-up links and (n-local)/n over the network; the two proceed at the same time.
*/
double nd_alltoall_split_time (const nd_fabric *f, const nd_group *g, double intra_bytes,
                               double inter_bytes) {
  double intra = 0.0, inter = 0.0;
  if (g->size <= 1) return 0.0;
  if (intra_bytes > 0.0) intra = intra_bytes / f->up.bandwidth + f->up.latency;
  if (inter_bytes > 0.0) inter = inter_bytes / f->out.bandwidth + f->out.latency;
  return intra > inter ? intra : inter;  /* both link classes run at once */
}

double nd_alltoall_time (const nd_fabric *f, const nd_group *g, double bytes) {
  int n = g->size, n1 = g->local;
  if (n <= 1 || bytes <= 0.0) return 0.0;
  return nd_alltoall_split_time(f, g, (double)(n1 - 1) / n * bytes,
                                (double)(n - n1) / n * bytes);
}

double nd_p2p_time (const nd_fabric *f, int stride, double bytes) {
  const nd_link *l = stride < f->domain ? &f->up : &f->out;
  if (bytes <= 0.0) return 0.0;
  return bytes / l->bandwidth + l->latency;
}
