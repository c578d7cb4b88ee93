/*
** test_search.c -- the search core without Lua: rows arrive in walk order whatever the
** number of threads and the chunk size, the counts add up, with a time cut too (the bounds
** and each lane's floors pruning) the same at any -j, and the stop flag and a failing hook
** end the walk cleanly (run under ASan/UBSan by make test-sanitize).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/search.h"

#include "fixtures.h"

/* A small MoE model: 8 layers, 16 heads, 8 experts. */
static void small_moe (nd_model_spec *m) {
  nd_model_init(m);
  strcpy(m->name, "small-moe");
  m->hidden_size = 1024; m->num_layers = 8; m->num_heads = 16; m->num_kv_heads = 16;
  m->head_dim = 64; m->ffn_size = 0; m->vocab_size = 32000;
  m->num_experts = 8; m->top_k = 2; m->moe_ffn_size = 1024;
  nd_model_default_stack(m);
}

static void h100_like (nd_device *d) {
  nd_device_init(d);
  strcpy(d->name, "test");
  d->peak_flops[ND_PREC_BF16] = 989e12;
  d->peak_flops[ND_PREC_FP16] = 989e12;
  d->hbm_bytes = 80e9;
  d->hbm_bandwidth = 3.35e12;
  d->scale_up.domain_size = 8;
  d->scale_up.bandwidth = 450e9;
  d->scale_out.bandwidth = 50e9;
}

/* What a caller sees: the rows in delivery order; with_cut: the CUT_KEEP least step
   times of the fitting ones, the time cut a ranking of CUT_KEEP rows would give. */
#define CUT_KEEP 16
typedef struct seen {
  nd_search_row *rows;
  int n, cap;
  int fail_after;
  double best[CUT_KEEP];
  int nbest;
} seen;

static int collect (void *ud, nd_search_row *rows, int n) {
  seen *s = (seen *)ud;
  int i, j;
  if (s->fail_after >= 0 && s->n >= s->fail_after) return -1;
  for (i = 0; i < n; i++) {
    if (s->n == s->cap) {
      s->cap = s->cap ? 2 * s->cap : 256;
      s->rows = (nd_search_row *)realloc(s->rows, (size_t)s->cap * sizeof *s->rows);
    }
    s->rows[s->n++] = rows[i];
    if (rows[i].peak > 80e9) continue;  /* (h100_like's memory: the budget) */
    if (s->nbest == CUT_KEEP && !(rows[i].step_time < s->best[CUT_KEEP - 1])) continue;
    if (s->nbest < CUT_KEEP) s->nbest++;
    for (j = s->nbest - 1; j > 0 && s->best[j - 1] > rows[i].step_time; j--)
      s->best[j] = s->best[j - 1];
    s->best[j] = rows[i].step_time;
  }
  return 0;
}

static void cut_of (void *ud, double *time_cut, double *over_cut) {
  const seen *s = (const seen *)ud;
  *time_cut = s->nbest == CUT_KEEP ? s->best[CUT_KEEP - 1] : HUGE_VAL;
  *over_cut = -HUGE_VAL;  /* no misses kept: every bound over the budget prunes */
}

static int price_all = 0;  /* run(): price equivalent candidates too */
static int lanes = 0;      /* run(): nd_search_params.lanes */
static int with_cut = 0;   /* run(): the cuts of seen's CUT_KEEP best (cut_of) */

static int run (const nd_model_spec *m, const nd_device *d, int jobs, int chunk, seen *s,
                nd_search_counts *counts, volatile sig_atomic_t *stop) {
  nd_search_params p;
  nd_search_hooks hooks;
  nd_job job = {32, 64, 2048};
  nd_costs costs;
  char err[128];
  nd_search_params_init(&p);
  p.dim[ND_DIM_RECOMPUTE].is_auto = 1;
  p.budget = d->hbm_bytes;
  p.jobs = jobs;
  p.lanes = lanes;
  p.chunk = chunk;
  p.stop = stop;
  nd_costs_init(&costs);
  memset(&hooks, 0, sizeof hooks);
  hooks.deliver = collect;
  hooks.ud = s;
  hooks.price_equivalent = price_all;
  if (with_cut) hooks.cuts = cut_of;
  return nd_search_run(&p, m, d, &job, &costs, &hooks, counts, err, sizeof err);
}

/* The walk in lanes (lane_jobs threads), in the pool (3), and in lanes whose threads but
   the caller's leave their parts to be stolen (ND_LANES_LEAVE: each is walked by a lane
   that walked past it, from the nodes it kept, or the walk would never end), chunks of 7:
   the rows of ref, in walk order, and its counts (what: the case, in a failure). */
static void same_off_one_thread (const nd_model_spec *m, const nd_device *dev, const seen *ref,
                                 const nd_search_counts *refc, int lane_jobs, const char *what,
                                 volatile sig_atomic_t *stop) {
  int mode, k, status;
  for (mode = 0; mode < 3; mode++) {
    const char *how = mode == 0 ? "lanes" : mode == 1 ? "pool" : "lanes, every part stolen";
    seen other = {NULL, 0, 0, -1, {0}, 0};
    nd_search_counts co;
    lanes = mode == 0 ? 1 : mode == 1 ? -1 : ND_LANES_LEAVE;
    status = run(m, dev, mode == 1 ? 3 : lane_jobs, 7, &other, &co, stop);
    lanes = 0;
    CHECK(status == ND_SEARCH_OK, "%s%s: status %d", how, what, status);
    CHECK(other.n == ref->n, "%s%s: %d rows, %d on one thread", how, what, other.n, ref->n);
    for (k = 0; k < ref->n && k < other.n; k++)
      CHECK(ref->rows[k].index == other.rows[k].index
            && ref->rows[k].step_time == other.rows[k].step_time,
            "%s%s: row %d differs", how, what, k);
    CHECK(memcmp(refc, &co, sizeof co) == 0, "%s%s: counts differ from -j 1", how, what);
    free(other.rows);
  }
}

int main (void) {
  nd_model_spec *m = (nd_model_spec *)malloc(sizeof *m);
  nd_device dev;
  seen one = {NULL, 0, 0, -1, {0}, 0}, many = {NULL, 0, 0, -1, {0}, 0};
  seen failing = {NULL, 0, 0, 10, {0}, 0};
  nd_search_counts c1, c4, cf, cs;
  volatile sig_atomic_t stop = 0;
  unsigned long long refused = 0;
  int i, r, status;
  small_moe(m);
  h100_like(&dev);

  status = run(m, &dev, 1, 0, &one, &c1, &stop);
  CHECK(status == ND_SEARCH_OK, "-j 1 status %d", status);
  status = run(m, &dev, 4, 7, &many, &c4, &stop);  /* small chunks: many hand-offs */
  CHECK(status == ND_SEARCH_OK, "-j 4 status %d", status);

  CHECK(one.n > 100, "only %d rows priced", one.n);
  CHECK(one.n == many.n, "rows: %d on one thread, %d on four", one.n, many.n);
  for (i = 0; i < one.n && i < many.n; i++) {
    CHECK(one.rows[i].index == many.rows[i].index && one.rows[i].step_time == many.rows[i].step_time
          && one.rows[i].peak == many.rows[i].peak, "row %d differs", i);
    if (i > 0) CHECK(one.rows[i - 1].index < one.rows[i].index, "row %d out of walk order", i);
  }
  CHECK(memcmp(&c1, &c4, sizeof c1) == 0, "counts differ between -j 1 and -j 4");
  /* the threads in lanes and in the pool, whatever the processors: the same rows, in walk
     order, and counts (lanes at -j 4, small windows; the pool at -j 3) */
  same_off_one_thread(m, &dev, &one, &c1, 4, "", &stop);
  { /* with a time cut, so that the bounds prune (the floors of each lane's own groups
       among them): the same rows and counts on one thread, in lanes and in the pool */
    seen cut1 = {NULL, 0, 0, -1, {0}, 0};
    nd_search_counts cc1;
    with_cut = 1;
    status = run(m, &dev, 1, 7, &cut1, &cc1, &stop);  /* (the cuts come by chunks: the same) */
    CHECK(status == ND_SEARCH_OK && cc1.skipped_time > 0 && cc1.priced < c1.priced,
          "status %d: with the cut %llu skipped by time, %llu priced (%llu without)", status,
          cc1.skipped_time, cc1.priced, c1.priced);
    same_off_one_thread(m, &dev, &cut1, &cc1, 2, " with the cut", &stop);
    with_cut = 0;
    free(cut1.rows);
  }
  for (r = 0; r < ND_REFUSE_MEMORY; r++) refused += c1.refused[r];
  CHECK(c1.tested == refused + c1.priced + c1.equivalent,
        "tested %llu != refused %llu + priced %llu + equivalent %llu", c1.tested, refused,
        c1.priced, c1.equivalent);
  { /* equivalent candidates: priced on request, each the same figures as one priced before */
    seen all = {NULL, 0, 0, -1, {0}, 0};
    nd_search_counts ca;
    int j, k, matched = 0;
    price_all = 1;
    status = run(m, &dev, 1, 0, &all, &ca, &stop);
    price_all = 0;
    CHECK(status == ND_SEARCH_OK && c1.equivalent > 0, "status %d, %llu equivalent", status,
          c1.equivalent);
    { /* each is priced, or refused while pricing as its twin was (a per-layer plan that
         cannot fit, or that keeps everything: its none twin): the refusals that were not
         priced grow by the rest */
      long long r1 = 0, rA = 0;
      int q;
      for (q = 0; q < ND_REFUSE_COUNT; q++) { r1 += (long long)c1.refused[q]; rA += (long long)ca.refused[q]; }
      r1 -= (long long)(c1.priced - c1.fit);  /* over memory, priced: counted once */
      rA -= (long long)(ca.priced - ca.fit);
      CHECK(ca.tested == c1.tested && ca.equivalent == 0
            && (long long)(ca.priced - c1.priced) + (rA - r1) == (long long)c1.equivalent,
            "priced %llu with them, %llu + %llu without", ca.priced, c1.priced, c1.equivalent);
    }
    for (j = 0, k = 0; j < all.n; j++) {
      int i2, found = 0;
      if (k < one.n && one.rows[k].index == all.rows[j].index) { k++; continue; }
      for (i2 = 0; i2 < k && !found; i2++)
        found = one.rows[i2].step_time == all.rows[j].step_time
             && one.rows[i2].peak == all.rows[j].peak && one.rows[i2].c.tp == all.rows[j].c.tp
             && one.rows[i2].c.pp == all.rows[j].c.pp && one.rows[i2].c.mbs == all.rows[j].c.mbs;
      CHECK(found, "walk index %llu (zero %d, recompute %d) has no equal priced before it",
            all.rows[j].index, all.rows[j].c.zero, all.rows[j].c.recompute);
      matched++;
    }
    CHECK(matched == (int)(ca.priced - c1.priced), "%d rows only priced on request, %llu more",
          matched, ca.priced - c1.priced);
    free(all.rows);
  }
  CHECK(c1.priced == c1.fit + c1.refused[ND_REFUSE_MEMORY], "priced != fit + over memory");
  CHECK(c1.priced == (unsigned long long)one.n, "priced %llu, delivered %d", c1.priced, one.n);

  /* a hook that fails stops the walk with its own status, threads joined; the stop flag
     (SIGINT) ends the walk before anything is priced -- in lanes and in the pool */
  for (lanes = 1; lanes >= -1; lanes -= 2) {
    failing.n = 0;
    status = run(m, &dev, 3, 5, &failing, &cf, &stop);
    CHECK(status == ND_SEARCH_HOOK_ERROR, "lanes %d: failing hook status %d", lanes, status);
    CHECK(cf.tested < c1.tested, "lanes %d: the walk went on after the hook failed", lanes);
    stop = 1;
    status = run(m, &dev, 2, 0, &failing, &cs, &stop);
    stop = 0;
    CHECK(status == ND_SEARCH_STOPPED, "lanes %d: stopped status %d", lanes, status);
    CHECK(cs.priced == 0, "lanes %d: priced %llu after stop", lanes, cs.priced);
  }
  lanes = 0;

  { /* pinned values: refused before the walk with the rule, or left to the walk */
    nd_search_params p;
    nd_job job = {16, 64, 1024};
    char err[256];
    nd_search_params_init(&p);
    p.dim[ND_DIM_TP].is_auto = 0; p.dim[ND_DIM_TP].n = 1; p.dim[ND_DIM_TP].v[0] = 3;
    r = nd_search_pinned_check(&p, m, &job, err, sizeof err);
    CHECK(r == ND_REFUSE_BOUNDS && strstr(err, "not a multiple of tp*cp*pp = 3"), "tp 3: %d %s", r, err);
    p.dim[ND_DIM_TP].v[0] = 2;
    p.dim[ND_DIM_EP].is_auto = 0; p.dim[ND_DIM_EP].n = 1; p.dim[ND_DIM_EP].v[0] = 3;
    r = nd_search_pinned_check(&p, m, &job, err, sizeof err);
    CHECK(r == ND_REFUSE_EP_DIV, "ep 3 over 8 experts: %d %s", r, err);
    p.dim[ND_DIM_EP].v[0] = 4;
    r = nd_search_pinned_check(&p, m, &job, err, sizeof err);
    CHECK(r == -1, "tp 2 ep 4 refused: %d %s", r, err);
    p.dim[ND_DIM_VPP].is_auto = 0; p.dim[ND_DIM_VPP].n = 1; p.dim[ND_DIM_VPP].v[0] = 2;
    r = nd_search_pinned_check(&p, m, &job, err, sizeof err);
    CHECK(r == -1, "vpp 2 with pp searched refused: %d %s", r, err);
    p.dim[ND_DIM_PP].is_auto = 0; p.dim[ND_DIM_PP].n = 1; p.dim[ND_DIM_PP].v[0] = 4;
    p.dim[ND_DIM_VPP].v[0] = 4;  /* 8 layers over pp 4: 2 chunks per stage at most */
    r = nd_search_pinned_check(&p, m, &job, err, sizeof err);
    CHECK(r == ND_REFUSE_BOUNDS && strstr(err, "vpp"), "pp 4 vpp 4 on 8 layers: %d %s", r, err);
    /* DualPipe with pp searched or listed: walked (its pp from 2); pinned to 1: refused */
    nd_search_params_init(&p);
    p.base.schedule = ND_SCHED_DUALPIPE;
    r = nd_search_pinned_check(&p, m, &job, err, sizeof err);
    CHECK(r == -1, "dualpipe with pp searched refused: %d %s", r, err);
    p.dim[ND_DIM_PP].is_auto = 0; p.dim[ND_DIM_PP].n = 2;
    p.dim[ND_DIM_PP].v[0] = 2; p.dim[ND_DIM_PP].v[1] = 4;
    r = nd_search_pinned_check(&p, m, &job, err, sizeof err);
    CHECK(r == -1, "dualpipe with pp 2,4 refused: %d %s", r, err);
    p.dim[ND_DIM_PP].n = 1; p.dim[ND_DIM_PP].v[0] = 1;
    r = nd_search_pinned_check(&p, m, &job, err, sizeof err);
    CHECK(r == ND_REFUSE_SCHEDULE && strstr(err, "dualpipe"), "dualpipe at pp 1: %d %s", r, err);
  }

  free(one.rows);
  free(many.rows);
  free(failing.rows);
  free(m);
  if (failures == 0) printf("test_search: all passed\n");
  return failures ? 1 : 0;
}
