/*
** test_search_results.c -- what a search keeps (ndplan/search_results.h), without Lua:
**  - nd_search_collect's ranking, misses and counts equal what an independent collector
**    of every row (the walk with no cut) gives when it sorts them itself, at -j 1 and -j 3;
**  - the post-filter keeps only the listed DP values and the best removed row as fallback;
**  - the point sample thins by doubling its stride and stays bounded;
**  - every candidate the walk admits resolves (nd_strategy_resolve agrees with the walk's
**    check over the whole walk) and resolving it again changes nothing;
**  - a per-layer row round-trips: planned again from its candidate (as results:detail
**    does) it gives the row's figures, and the plan priced as a given strategy (as
**    nd.estimate takes result.strategy) gives them again.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/recompute.h"
#include "ndplan/search_results.h"

#include "fixtures.h"

/* Every row the walk prices, in delivery order (the oracle sorts them itself). */
typedef struct all_rows { nd_search_row *rows; int n, cap; } all_rows;

static int collect_all (void *ud, nd_search_row *rows, int n) {
  all_rows *a = (all_rows *)ud;
  int i;
  for (i = 0; i < n; i++) {
    if (a->n == a->cap) {
      a->cap = a->cap ? 2 * a->cap : 512;
      a->rows = (nd_search_row *)realloc(a->rows, (size_t)a->cap * sizeof *a->rows);
      if (!a->rows) return -1;
    }
    a->rows[a->n++] = rows[i];
  }
  return 0;
}

static int by_rank (const void *x, const void *y) {  /* the oracle's own order */
  const nd_search_row *a = (const nd_search_row *)x, *b = (const nd_search_row *)y;
  if (a->step_time != b->step_time) return a->step_time < b->step_time ? -1 : 1;
  if (a->peak != b->peak) return a->peak < b->peak ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

static int by_over (const void *x, const void *y) {
  const nd_search_row *a = (const nd_search_row *)x, *b = (const nd_search_row *)y;
  if (a->over != b->over) return a->over < b->over ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

static void params (nd_search_params *p, double budget, int jobs) {
  nd_search_params_init(p);
  p->dim[ND_DIM_RECOMPUTE].is_auto = 0;
  p->dim[ND_DIM_RECOMPUTE].n = 3;  /* none, selective, full */
  p->dim[ND_DIM_RECOMPUTE].v[0] = ND_RECOMPUTE_NONE;
  p->dim[ND_DIM_RECOMPUTE].v[1] = ND_RECOMPUTE_SELECTIVE;
  p->dim[ND_DIM_RECOMPUTE].v[2] = ND_RECOMPUTE_FULL;
  p->budget = budget;
  p->jobs = jobs;
  p->chunk = 16;
}

/* Every row an exhaustive walk of p prices (the default costs) into rows; what names the
   walk in a failure. */
static void walk_every (nd_search_params *p, const nd_model_spec *m, const nd_device *d,
                        const nd_job *job, const char *what, all_rows *rows) {
  nd_search_hooks h;
  nd_search_counts c;
  nd_costs costs;
  char err[256];
  p->exhaustive = 1;
  nd_costs_init(&costs);
  memset(&h, 0, sizeof h);
  h.deliver = collect_all;
  h.ud = rows;
  CHECK(nd_search_run(p, m, d, job, &costs, &h, &c, err, sizeof err) == ND_SEARCH_OK,
        "%s: %s", what, err);
}

/* The oracle: every valid candidate priced (exhaustive, no cuts), sorted here. */
static void oracle (const nd_model_spec *m, const nd_device *d, const nd_job *job,
                    double budget, all_rows *fit, all_rows *over) {
  nd_search_params p;
  all_rows every = {NULL, 0, 0};
  int i;
  params(&p, budget, 1);
  walk_every(&p, m, d, job, "oracle", &every);
  for (i = 0; i < every.n; i++) {
    all_rows *to = every.rows[i].fits ? fit : over;
    collect_all(to, &every.rows[i], 1);
  }
  free(every.rows);
  if (fit->n > 0) qsort(fit->rows, (size_t)fit->n, sizeof *fit->rows, by_rank);
  if (over->n > 0) qsort(over->rows, (size_t)over->n, sizeof *over->rows, by_over);
}

/* exhaustive 0: the cuts prune (the ranking is still exact; misses are exact only when
   nothing fits, as the cut may leave some unpriced); 1: every row priced, misses exact. */
static void check_ranking (const nd_model_spec *m, const nd_device *d, const nd_job *job,
                           double budget, int keep, int jobs, int exhaustive) {
  all_rows fit = {NULL, 0, 0}, over = {NULL, 0, 0};
  nd_search_params p;
  nd_search_results r;
  nd_search_counts c;
  nd_costs costs;
  char err[128];
  int i, status, want;
  oracle(m, d, job, budget, &fit, &over);
  CHECK(fit.n > keep && over.n > 5, "the problem must have more than %d fitting rows (%d) and "
        "misses (%d)", keep, fit.n, over.n);
  params(&p, budget, jobs);
  p.exhaustive = exhaustive;
  nd_costs_init(&costs);
  CHECK(nd_search_results_init(&r, &p, keep, 5, 0) == 0, "init");
  status = nd_search_collect(&r, &p, m, d, job, &costs, &c, err, sizeof err);
  CHECK(status == ND_SEARCH_OK, "collect: status %d %s", status, err);
  want = fit.n < keep ? fit.n : keep;
  CHECK(r.nbest == want, "-j %d: kept %d, the oracle's best %d", jobs, r.nbest, want);
  for (i = 0; i < r.nbest && i < want; i++)
    CHECK(r.best[i].index == fit.rows[i].index && r.best[i].step_time == fit.rows[i].step_time,
          "-j %d rank %d: walk index %llu, the oracle's %llu", jobs, i + 1, r.best[i].index,
          fit.rows[i].index);
  if (!exhaustive) {
    nd_search_results x;
    nd_search_counts cx;
    CHECK(c.pruned_time + c.skipped_time > 0 && c.fit < (unsigned long long)fit.n,
          "-j %d: the time cut pruned nothing", jobs);
    /* the misses exact through the walk (as -v 2 asks): the same ranking, more priced for
       the misses that rows fitting leave unshown */
    CHECK(nd_search_results_init(&x, &p, keep, 5, 0) == 0, "init");
    x.misses_exact = 1;
    status = nd_search_collect(&x, &p, m, d, job, &costs, &cx, err, sizeof err);
    CHECK(status == ND_SEARCH_OK && x.nbest == r.nbest, "-j %d: misses exact: status %d, %d "
          "kept against %d", jobs, status, x.nbest, r.nbest);
    for (i = 0; i < x.nbest && i < r.nbest; i++)
      CHECK(x.best[i].index == r.best[i].index, "-j %d rank %d: %llu, with misses exact %llu",
            jobs, i + 1, r.best[i].index, x.best[i].index);
    CHECK(c.pruned_memory + c.skipped_memory > cx.pruned_memory + cx.skipped_memory
          && c.priced < cx.priced, "-j %d: %llu priced, %llu pruned or skipped by memory; with "
          "the misses exact %llu, %llu", jobs, c.priced, c.pruned_memory + c.skipped_memory,
          cx.priced, cx.pruned_memory + cx.skipped_memory);
    nd_search_results_free(&x);
  }
  else {
    CHECK(c.fit == (unsigned long long)fit.n, "-j %d: %llu fit, the oracle %d", jobs, c.fit, fit.n);
    CHECK(r.nmiss == 5, "-j %d: %d misses kept", jobs, r.nmiss);
    for (i = 0; i < r.nmiss; i++)
      CHECK(r.miss[i].index == over.rows[i].index, "-j %d miss %d: index %llu, the oracle's %llu",
            jobs, i + 1, r.miss[i].index, over.rows[i].index);
  }
  nd_search_results_free(&r);
  free(fit.rows);
  free(over.rows);
}

/* Nothing fits: nothing is pruned by time, and the misses are the oracle's least over. */
static void check_misses (const nd_model_spec *m, const nd_device *d, const nd_job *job,
                          double budget) {
  all_rows fit = {NULL, 0, 0}, over = {NULL, 0, 0};
  nd_search_params p;
  nd_search_results r;
  nd_search_counts c;
  nd_costs costs;
  char err[128];
  int i;
  oracle(m, d, job, budget, &fit, &over);
  CHECK(fit.n == 0 && over.n > 5, "budget %.3g: %d fit, %d over", budget, fit.n, over.n);
  params(&p, budget, 2);
  nd_costs_init(&costs);
  CHECK(nd_search_results_init(&r, &p, 10, 5, 0) == 0, "init");
  CHECK(nd_search_collect(&r, &p, m, d, job, &costs, &c, err, sizeof err) == ND_SEARCH_OK,
        "collect: %s", err);
  CHECK(r.nbest == 0 && r.nmiss == 5, "%d kept, %d misses", r.nbest, r.nmiss);
  for (i = 0; i < r.nmiss; i++)
    CHECK(r.miss[i].index == over.rows[i].index && r.miss[i].over == over.rows[i].over,
          "miss %d: index %llu, the oracle's %llu", i + 1, r.miss[i].index, over.rows[i].index);
  CHECK(c.pruned_memory + c.skipped_memory > 0, "the over cut pruned nothing");
  nd_search_results_free(&r);
  free(fit.rows);
  free(over.rows);
}

/* DP listed as {2}: only dp 2 is kept; the fallback is the best row of another dp. */
static void check_postfilter (const nd_model_spec *m, const nd_device *d, const nd_job *job,
                              double budget) {
  all_rows fit = {NULL, 0, 0}, over = {NULL, 0, 0};
  nd_search_params p;
  nd_search_results r;
  nd_search_counts c;
  nd_costs costs;
  char err[128];
  int i, k = 0, first_other = -1;
  unsigned long long removed = 0;
  oracle(m, d, job, budget, &fit, &over);
  params(&p, budget, 2);
  p.dim[ND_DIM_DP].is_auto = 0;
  p.dim[ND_DIM_DP].n = 1;
  p.dim[ND_DIM_DP].v[0] = 2;
  nd_costs_init(&costs);
  CHECK(nd_search_results_init(&r, &p, 10, 0, 0) == 0, "init");
  p.exhaustive = 1;  /* every fitting row reaches the post-filter: its count is exact */
  CHECK(nd_search_collect(&r, &p, m, d, job, &costs, &c, err, sizeof err) == ND_SEARCH_OK,
        "collect: %s", err);
  for (i = 0; i < fit.n; i++) {
    if (fit.rows[i].c.dp != 2) {
      removed++;
      if (first_other < 0) first_other = i;
      continue;
    }
    if (k < r.nbest)
      CHECK(r.best[k].index == fit.rows[i].index, "post-filtered rank %d: %llu, oracle %llu",
            k + 1, r.best[k].index, fit.rows[i].index);
    k++;
  }
  CHECK(r.nbest == (k < 10 ? k : 10), "kept %d of %d with dp 2", r.nbest, k);
  CHECK(r.postfiltered == removed, "postfiltered %llu, the oracle %llu", r.postfiltered, removed);
  CHECK(first_other >= 0 && r.has_fallback && r.fallback.index == fit.rows[first_other].index,
        "fallback: the best row outside the list");
  for (i = 0; i < r.nbest; i++) CHECK(r.best[i].c.dp == 2, "rank %d has dp %d", i + 1, r.best[i].c.dp);
  nd_search_results_free(&r);
  free(fit.rows);
  free(over.rows);
}

/* The csv row and the point sample: every row written, sampled with a doubling stride. */
static void check_csv_and_points (const nd_model_spec *m, const nd_device *d,
                                  const nd_job *job) {
  nd_search_params p;
  nd_search_results r;
  nd_search_counts c;
  nd_costs costs;
  nd_search_point pts[64];
  char err[128], line[4096];
  FILE *f = tmpfile();
  unsigned long long lines = 0;
  int i, n;
  CHECK(f != NULL, "tmpfile");
  if (!f) return;
  params(&p, d->hbm_bytes, 1);
  nd_costs_init(&costs);
  CHECK(nd_search_results_init(&r, &p, 5, 0, 8) == 0, "init");
  r.csv = f;
  r.csv_all = 1;
  CHECK(nd_search_csv_header(f) == 0, "header");
  CHECK(nd_search_collect(&r, &p, m, d, job, &costs, &c, err, sizeof err) == ND_SEARCH_OK,
        "collect: %s", err);
  CHECK(r.csv_rows == c.priced, "csv rows %llu, priced %llu (every row asked)", r.csv_rows,
        c.priced);
  rewind(f);
  while (fgets(line, sizeof line, f)) lines++;
  CHECK(lines == r.csv_rows + 1, "csv has %llu lines for %llu rows", lines, r.csv_rows);
  CHECK(r.npoints <= 8 && r.npoints >= 4 && r.stride > 1, "sample: %d points, stride %llu",
        r.npoints, r.stride);
  CHECK(r.csv_rows / r.stride <= 8 && r.csv_rows / r.stride >= 4, "stride %llu for %llu rows",
        r.stride, r.csv_rows);
  n = nd_search_results_points(&r, r.stride * 2, pts, 64);
  for (i = 0; i < n; i++) CHECK(pts[i].n % (r.stride * 2) == 0, "point %d at line %llu", i, pts[i].n);
  CHECK(n == (int)(r.csv_rows / (r.stride * 2)), "%d points at twice the stride", n);
  fclose(f);
  nd_search_results_free(&r);
}

/* The csv row's whole numbers are printf's %.0f bytes (halves round to even, -0 stays), its
   time parts its %.9g bytes. */
static void check_csv_numbers (void) {
  static const double v[] = {0.0, -0.0, 0.5, 1.5, 2.5, 123456789.4999999, 79.6e9, 1e17, 1e300,
                             -3.5, 9007199254740991.0};
  size_t i;
  for (i = 0; i < sizeof v / sizeof v[0]; i++) {
    nd_search_row row;
    char got[4096], want[128], *tail;
    FILE *f = tmpfile();
    size_t n;
    int k;
    if (!f) { CHECK(0, "tmpfile"); return; }
    memset(&row, 0, sizeof row);
    row.c.dp = row.c.tp = row.c.pp = row.c.vpp = row.c.cp = row.c.ep = row.c.etp = 1;
    row.c.mbs = row.c.mb = 1;
    row.peak = v[i];
    row.over = v[i];
    for (k = 0; k < ND_SEARCH_MEM_PARTS; k++) row.mem[k] = v[i];
    for (k = 0; k < ND_T_COUNT; k++) row.time_parts[k] = v[i] * 1e-9;
    CHECK(nd_search_csv_row(f, &row) == 0, "write");
    rewind(f);
    n = fread(got, 1, sizeof got - 1, f);
    got[n] = '\0';
    fclose(f);
    /* fields 17 (peak), 20 (over) and 21-27 (memory parts) */
    snprintf(want, sizeof want, ",%.0f,", v[i]);
    tail = got;
    for (k = 0; k < 16; k++) tail = strchr(tail, ',') + 1;
    CHECK(strncmp(tail - 1, want, strlen(want)) == 0, "peak %.17g: wrote %.30s, printf %s", v[i],
          tail - 1, want);
    for (k = 0; k < 3; k++) tail = strchr(tail, ',') + 1;
    for (k = 0; k < 1 + ND_SEARCH_MEM_PARTS; k++) {
      CHECK(strncmp(tail - 1, want, strlen(want)) == 0, "field %d of %.17g: %.30s, printf %s",
            20 + k, v[i], tail - 1, want);
      tail = strchr(tail, ',') + 1;
    }
    /* the time parts: printf's %.9g bytes (0 and -0 among them) */
    snprintf(want, sizeof want, ",%.9g,", v[i] * 1e-9);
    for (k = 0; k < ND_T_COUNT; k++) {
      CHECK(strncmp(tail - 1, want, strlen(want)) == 0, "time part %d of %.17g: %.30s, printf %s",
            k, v[i] * 1e-9, tail - 1, want);
      tail = strchr(tail, ',') + 1;
    }
  }
}

/* Over the whole walk: every admitted candidate (the walk's check passed) resolves, and a
   resolved strategy resolves to itself; the admitted count is what the counts leave. */
typedef struct walk_check { const nd_model_spec *m; const nd_job *job; nd_strategy base;
                            int body; unsigned long long admitted, failed; } walk_check;

static int admit_resolves (void *ud, const nd_candidate *c, int *keep) {
  walk_check *w = (walk_check *)ud;
  nd_strategy st, again;
  char err[256];
  nd_candidate_strategy(c, &w->base, w->body, &st);
  st.dp = 0; st.mb = 0;  /* derived by resolve, as nd.estimate gets them */
  w->admitted++;
  if (nd_strategy_resolve_to(&st, w->m, w->job, &again, err, sizeof err) != 0
      || again.dp != c->dp || again.mb != c->mb) {
    if (w->failed++ < 3)
      fprintf(stderr, "tp %d pp %d vpp %d cp %d ep %d etp %d mbs %d zero %d: %s\n", c->tp,
              c->pp, c->vpp, c->cp, c->ep, c->etp, c->mbs, c->zero, err);
  }
  else {
    nd_strategy twice;
    if (nd_strategy_resolve_to(&again, w->m, w->job, &twice, err, sizeof err) != 0
        || memcmp(&again, &twice, sizeof again) != 0)
      w->failed++;
  }
  *keep = 1;
  return 0;
}

static void check_walk_resolves (const nd_model_spec *m, const nd_device *d, const nd_job *job) {
  nd_search_params p;
  nd_search_hooks h;
  nd_search_counts c;
  nd_costs costs;
  walk_check w;
  char err[128];
  unsigned long long refused = 0;
  int r;
  params(&p, d->hbm_bytes, 1);
  nd_costs_init(&costs);
  memset(&w, 0, sizeof w);
  w.m = m; w.job = job; w.base = p.base;
  w.body = (int)m->num_layers;
  memset(&h, 0, sizeof h);
  h.admit = admit_resolves;
  h.ud = &w;
  p.exhaustive = 1;
  CHECK(nd_search_run(&p, m, d, job, &costs, &h, &c, err, sizeof err) == ND_SEARCH_OK,
        "walk: %s", err);
  for (r = 0; r < ND_REFUSE_COUNT; r++) refused += c.refused[r];
  refused -= c.priced - c.fit;  /* over memory, priced: refused after admission */
  CHECK(w.admitted > 100 && w.failed == 0, "%llu of %llu admitted candidates do not resolve",
        w.failed, w.admitted);
  CHECK(w.admitted + refused == c.tested, "admitted %llu + refused %llu != tested %llu",
        w.admitted, refused, c.tested);
}

/* The figures a row carries against an estimate's: the same arithmetic, so exactly equal. */
static int same_figures (const nd_search_row *r, const nd_estimate *e) {
  return r->step_time == e->step_time && r->peak == e->peak && r->stages == e->stages
         && r->heaviest == e->heaviest;
}

static void check_per_layer_round_trip (const nd_model_spec *m, const nd_device *d,
                                        const nd_job *job) {
  nd_search_params p;
  nd_costs costs;
  all_rows rows = {NULL, 0, 0};
  nd_strategy *st = (nd_strategy *)malloc(sizeof *st), *given = (nd_strategy *)malloc(sizeof *st);
  nd_recompute_plan *plan = (nd_recompute_plan *)malloc(sizeof *plan);
  nd_estimate *e = (nd_estimate *)malloc(sizeof *e), *again = (nd_estimate *)malloc(sizeof *e);
  char err[256];
  int i, k, checked = 0, mixed = 0, n = (int)(m->num_layers + m->mtp_layers);
  double budget = 30e9;  /* tight enough that plans mix modes */
  params(&p, budget, 2);
  p.dim[ND_DIM_RECOMPUTE].n = 1;
  p.dim[ND_DIM_RECOMPUTE].v[0] = ND_SEARCH_PER_LAYER;
  walk_every(&p, m, d, job, "per-layer walk", &rows);
  nd_costs_init(&costs);  /* the walk's, to price its rows again */
  for (i = 0; i < rows.n; i++) {
    const nd_search_row *r = &rows.rows[i];
    int modes = 0;
    if (!r->fits || r->c.recompute != ND_SEARCH_PER_LAYER) continue;
    nd_candidate_strategy(&r->c, &p.base, (int)m->num_layers, st);
    st->recompute = ND_RECOMPUTE_NONE;  /* the planner's start, as results:detail sets it */
    if (nd_recompute_plan_run(m, d, job, st, &costs, budget, ND_SEARCH_PLAN_MODES, plan, e,
                              err, sizeof err) != 0) {
      CHECK(0, "row %llu: planned again: %s", r->index, err);
      continue;
    }
    CHECK(st->layers == &plan->layers && same_figures(r, e), "row %llu: planned again %.9g s %.9g B, the "
          "row %.9g s %.9g B", r->index, e->step_time, e->peak, r->step_time, r->peak);
    *given = *st;  /* the plan as a caller passes it back */
    if (nd_estimate_run(m, d, job, given, &costs, again, err, sizeof err) != 0)
      CHECK(0, "row %llu: the plan priced as given: %s", r->index, err);
    else
      CHECK(same_figures(r, again), "row %llu: the plan priced as given %.9g s, the row %.9g s",
            r->index, again->step_time, r->step_time);
    for (k = 0; k < n; k++) modes |= 1 << st->layers->recompute[k];
    mixed += (modes & (modes - 1)) != 0;  /* more than one mode */
    checked++;
  }
  CHECK(checked > 20 && mixed > 0, "%d per-layer rows checked, %d with mixed modes", checked,
        mixed);
  free(rows.rows); free(st); free(given); free(plan); free(e); free(again);
}

int main (void) {
  nd_model_spec *m = (nd_model_spec *)malloc(sizeof *m);
  nd_device dev;
  nd_job job = {16, 64, 4096};
  fixture_llama8b(m);
  fixture_h100(&dev);
  check_ranking(m, &dev, &job, 40e9, 10, 1, 0);
  check_ranking(m, &dev, &job, 40e9, 10, 3, 0);
  check_ranking(m, &dev, &job, 40e9, 10, 2, 1);
  check_misses(m, &dev, &job, 8e9);
  check_postfilter(m, &dev, &job, 40e9);
  check_csv_and_points(m, &dev, &job);
  check_csv_numbers();
  check_walk_resolves(m, &dev, &job);
  check_per_layer_round_trip(m, &dev, &job);
  free(m);
  if (failures) fprintf(stderr, "%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
