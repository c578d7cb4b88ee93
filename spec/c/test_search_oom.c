/*
** test_search_oom.c -- a search that runs out of memory fails (ND_SEARCH_NO_MEMORY), or,
** where the allocation that failed has a documented fallback, ends with the counts of a
** run with memory to spare; it never drops candidates under another label (issue 17: out of
** memory in a pricing thread was counted "degree out of bounds", so candidates vanished and
** the counts varied between runs). malloc and calloc are wrapped at link time
** (spec/CMakeLists.txt: -Wl,--wrap=malloc,--wrap=calloc): the k-th call fails, every other
** one goes through; k walks over the calls a run makes.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/search.h"

#include "fixtures.h"

void *__real_malloc (size_t n);
void *__real_calloc (size_t k, size_t n);
void *__wrap_malloc (size_t n);
void *__wrap_calloc (size_t k, size_t n);

static unsigned long calls = 0, fail_at = 0;  /* fail_at 0: none fails */

void *__wrap_malloc (size_t n) {
  if (++calls == fail_at) return NULL;
  return __real_malloc(n);
}

void *__wrap_calloc (size_t k, size_t n) {
  if (++calls == fail_at) return NULL;
  return __real_calloc(k, n);
}

/* A small walk on one thread (the order of calls is then fixed) over the per-layer planner
   and the Megatron form, the two pricings that allocate; exhaustive: no lower bounds, whose
   allocation failure falls back to pricing everything (documented, counts differ). */
static int run (const nd_model_spec *m, const nd_device *d, nd_search_counts *counts) {
  nd_search_params p;
  nd_job job = {8, 32, 2048};
  nd_costs costs;
  char err[128];
  nd_search_params_init(&p);
  p.dim[ND_DIM_RECOMPUTE].is_auto = 0;
  p.dim[ND_DIM_RECOMPUTE].n = 2;
  p.dim[ND_DIM_RECOMPUTE].v[0] = ND_SEARCH_PER_LAYER;
  p.dim[ND_DIM_RECOMPUTE].v[1] = ND_SEARCH_MEGATRON;
  p.dim[ND_DIM_TP].is_auto = 0;
  p.dim[ND_DIM_TP].n = 1;
  p.dim[ND_DIM_TP].v[0] = 2;
  p.dim[ND_DIM_PP].is_auto = 0;
  p.dim[ND_DIM_PP].n = 1;
  p.dim[ND_DIM_PP].v[0] = 2;
  p.dim[ND_DIM_ZERO].is_auto = 0;
  p.dim[ND_DIM_ZERO].n = 1;
  p.dim[ND_DIM_ZERO].v[0] = 1;
  p.budget = 40e9;
  p.jobs = 1;
  p.exhaustive = 1;
  nd_costs_init(&costs);
  return nd_search_run(&p, m, d, &job, &costs, NULL, counts, err, sizeof err);
}

int main (void) {
  nd_model_spec *m = (nd_model_spec *)malloc(sizeof *m);
  nd_device dev;
  nd_search_counts base, c;
  unsigned long total, k, step, failed = 0, same = 0;
  int status;
  fixture_llama8b(m);
  fixture_h100(&dev);
  calls = 0;
  status = run(m, &dev, &base);
  total = calls;
  CHECK(status == ND_SEARCH_OK, "baseline status %d", status);
  CHECK(base.priced > 10 && base.refused[ND_REFUSE_NO_MEMORY] == 0,
        "baseline: %llu priced, %llu out of memory", base.priced,
        base.refused[ND_REFUSE_NO_MEMORY]);
  CHECK(total > 2, "the run allocates %lu times", total);
  step = total > 100 ? total / 100 : 1;  /* some 100 of the calls, spread over the run */
  for (k = 1; k <= total; k += step) {
    calls = 0;
    fail_at = k;
    status = run(m, &dev, &c);
    fail_at = 0;
    if (status == ND_SEARCH_NO_MEMORY) { failed++; continue; }
    CHECK(status == ND_SEARCH_OK, "call %lu failing: status %d", k, status);
    CHECK(memcmp(&c, &base, sizeof c) == 0, "call %lu failing: status OK but the counts differ "
          "(tested %llu/%llu, priced %llu/%llu, out of bounds %llu/%llu)", k, c.tested,
          base.tested, c.priced, base.priced, c.refused[ND_REFUSE_BOUNDS],
          base.refused[ND_REFUSE_BOUNDS]);
    same++;
  }
  CHECK(failed > 0, "no failing allocation failed the run (%lu calls tried)", same);
  printf("%lu allocations; %lu failures tried: %lu failed the run, %lu kept the counts\n",
         total, failed + same, failed, same);
  CHECK(strcmp(nd_refusal_label(ND_REFUSE_NO_MEMORY), "out of memory") == 0, "label");
  free(m);
  return failures ? 1 : 0;
}
