/* Collective prices on a two-level fabric: ring factors, placement, hierarchy. */
#include <math.h>
#include <stdio.h>

#include "ndplan/comm.h"

static int failures = 0;

static void near (const char *what, double got, double want, double rel) {
  if (!(fabs(got - want) <= rel * fabs(want))) {
    printf("FAIL %s: got %.6g, want %.6g\n", what, got, want);
    failures++;
  }
}

int main (void) {
  nd_fabric f = {8, {100e9, 0.0}, {25e9, 0.0}};
  nd_group g;

  g = nd_group_place(&f, 8, 1);  /* a full node */
  if (g.local != 8) { printf("FAIL tp8 local %d\n", g.local); failures++; }
  near("allreduce 8 in a node", nd_allreduce_time(&f, &g, 1e9), 2.0 * 7 / 8 * 1e9 / 100e9, 1e-12);
  near("allgather is half", nd_allgather_time(&f, &g, 1e9), 7.0 / 8 * 1e9 / 100e9, 1e-12);

  g = nd_group_place(&f, 4, 8);  /* stride of a node: every member in its own domain */
  if (g.local != 1) { printf("FAIL dp local %d\n", g.local); failures++; }
  near("allreduce across nodes", nd_allreduce_time(&f, &g, 1e9), 2.0 * 3 / 4 * 1e9 / 25e9, 1e-12);

  g = nd_group_place(&f, 32, 2);  /* 4 per node, 8 nodes: hierarchical */
  if (g.local != 4) { printf("FAIL hier local %d\n", g.local); failures++; }
  near("hierarchical allreduce", nd_allreduce_time(&f, &g, 1e9),
       2.0 * (3.0 / 4 * 1e9 / 100e9 + 7.0 / 8 * (1e9 / 4) / 25e9), 1e-12);

  g = nd_group_place(&f, 1, 1);
  near("a group of one is free", nd_allreduce_time(&f, &g, 1e9), 0.0, 0.0);

  {  /* latency: 2(n-1) steps for an all-reduce */
    nd_fabric fl = {8, {1e30, 1e-6}, {1e30, 1e-5}};
    g = nd_group_place(&fl, 8, 1);
    near("latency steps", nd_allreduce_time(&fl, &g, 1.0), 14e-6, 1e-9);
  }
  if (failures == 0) printf("test_comm: all passed\n");
  return failures ? 1 : 0;
}
