/*
** search_results.c -- what a search keeps of its priced rows (ndplan/search_results.h):
** the ranking, the nearest misses, the post-filter, the cuts, results.csv and the chart's
** point sample. Moved here from the Lua binding so that a C caller gets the same results.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/fields.h"
#include "ndplan/search_results.h"
#include "ndplan/strategy.h"
#include "ndplan/units.h"

int nd_search_row_cmp (const nd_search_row *x, const nd_search_row *y) {
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  if (x->peak != y->peak) return x->peak < y->peak ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

int nd_search_miss_cmp (const nd_search_row *x, const nd_search_row *y) {
  if (x->over != y->over) return x->over < y->over ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

static int cmp_best (const void *a, const void *b) {
  return nd_search_row_cmp((const nd_search_row *)a, (const nd_search_row *)b);
}

static int cmp_int (const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

int nd_search_results_init (nd_search_results *r, const nd_search_params *p, int keep,
                            int keep_miss, int max_points) {
  memset(r, 0, sizeof *r);
  r->keep = keep > 0 ? keep : 1;
  r->keep_miss = keep_miss > 0 ? keep_miss : 0;
  r->rank_by_time = 1;
  r->post_dp = p->dim[ND_DIM_DP];
  r->post_mb = p->dim[ND_DIM_MB];
  r->cap = 2 * r->keep;
  r->kth = HUGE_VAL;
  r->best_key = HUGE_VAL;
  r->stride = 1;
  r->max_points = max_points > 0 ? max_points : 0;
  r->keys = (double *)malloc((size_t)r->keep * sizeof *r->keys);  /* NULL: no time cut */
  r->best = (nd_search_row *)malloc((size_t)r->cap * sizeof *r->best);
  r->miss = (nd_search_row *)malloc((size_t)(r->keep_miss + 1) * sizeof *r->miss);
  if (!r->best || !r->miss) return -1;
  return 0;
}

void nd_search_results_free (nd_search_results *r) {
  free(r->best); r->best = NULL;
  free(r->miss); r->miss = NULL;
  free(r->keys); r->keys = NULL;
  free(r->points); r->points = NULL;
  r->nbest = r->nmiss = r->cap = r->has_fallback = r->npoints = r->point_cap = 0;
  r->max_points = 0;
}

static void keep_best (nd_search_results *r, const nd_search_row *row) {
  if (r->nbest == r->cap) {  /* full: keep the best half, which is `keep` rows */
    qsort(r->best, (size_t)r->nbest, sizeof *r->best, cmp_best);
    r->nbest = r->keep;
    r->kth = r->best[r->keep - 1].key;  /* no later row ranks that is slower */
  }
  r->best[r->nbest++] = *row;
}

/*
** A kept row's objective into the heap of the keep least so far; kth is its top once it
** holds keep: the keep-th least of the rows kept (O(log keep) a row, where a quickselect
** over every row kept at each chunk's cuts took 2.4% of DeepSeek-V3's search).
*/
static void heap_key (nd_search_results *r, double key) {
  double *h = r->keys;
  int i, n = r->nkeys, k = r->keep;
  if (!h) return;
  if (n < k) {  /* sift up */
    for (i = n++; i > 0 && h[(i - 1) / 2] < key; i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
    h[i] = key;
    r->nkeys = n;
  }
  else if (key < h[0]) {  /* replaces the largest: sift down */
    for (i = 0;;) {
      int c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && h[c + 1] > h[c]) c++;
      if (!(h[c] > key)) break;
      h[i] = h[c];
      i = c;
    }
    h[i] = key;
  }
  else return;
  if (r->nkeys == k && h[0] < r->kth) r->kth = h[0];
}

static void keep_miss (nd_search_results *r, const nd_search_row *row) {
  int i;
  if (r->keep_miss == 0) return;
  if (r->nmiss == r->keep_miss && nd_search_miss_cmp(row, &r->miss[r->nmiss - 1]) >= 0) return;
  if (r->nmiss < r->keep_miss) r->nmiss++;
  for (i = r->nmiss - 1; i > 0 && nd_search_miss_cmp(row, &r->miss[i - 1]) < 0; i--)
    r->miss[i] = r->miss[i - 1];
  r->miss[i] = *row;
}

/* The sample holds every stride-th csv row, growing as needed; at max_points it keeps
   every other one and the stride doubles: memory stays bounded whatever the csv holds. */
static void sample_point (nd_search_results *r, const nd_search_row *row) {
  nd_search_point *pt;
  if (!r->max_points || r->csv_rows % r->stride != 0) return;
  if (r->npoints == r->max_points) {
    int i, k = 0;
    r->stride *= 2;
    for (i = 0; i < r->npoints; i++)
      if (r->points[i].n % r->stride == 0) r->points[k++] = r->points[i];
    r->npoints = k;
    if (r->csv_rows % r->stride != 0) return;
  }
  if (r->npoints == r->point_cap) {
    int cap = r->point_cap ? 2 * r->point_cap : 4096;
    nd_search_point *grown;
    if (cap > r->max_points) cap = r->max_points;
    grown = (nd_search_point *)realloc(r->points, (size_t)cap * sizeof *grown);
    if (!grown) {  /* out of memory: the sample stops growing, and thins from here */
      r->max_points = r->npoints;
      return;
    }
    r->points = grown;
    r->point_cap = cap;
  }
  pt = &r->points[r->npoints++];
  pt->step_time = row->step_time;
  pt->peak = row->peak;
  pt->fits = row->fits;
  pt->n = r->csv_rows;
}

int nd_search_results_row (nd_search_results *r, const nd_search_row *row) {
  if (r->csv && (r->csv_all || row->fits)) {
    if (nd_search_csv_row(r->csv, row) != 0) return -1;
    r->csv_rows++;
    sample_point(r, row);
  }
  if (!row->fits) {
    keep_miss(r, row);
    return 0;
  }
  return 1;
}

static int listed (const nd_dim_set *s, int v) {
  return s->is_auto || bsearch(&v, s->v, (size_t)s->n, sizeof(int), cmp_int) != NULL;
}

void nd_search_results_keep (nd_search_results *r, const nd_search_row *row) {
  /* post-filter: DP and MB are derived by the loops; their lists apply to the results */
  if (!listed(&r->post_dp, row->c.dp) || !listed(&r->post_mb, row->c.mb)) {
    r->postfiltered++;
    if (!r->has_fallback || nd_search_row_cmp(row, &r->fallback) < 0) {
      r->fallback = *row;
      r->has_fallback = 1;
    }
    return;
  }
  keep_best(r, row);
  heap_key(r, row->key);
  if (row->key < r->best_key) r->best_key = row->key;
}

void nd_search_results_drop (nd_search_results *r) { r->dropped++; }

/*
** Pruning by the time cut may leave out misses, which are shown only when nothing fits
** (then nothing was pruned by time: fewer than keep rows fit). The over cut keeps the
** nearest misses exact, the least over of the `misses` kept so far, when asked to
** (misses_exact); else it prunes every candidate whose memory bound is over the budget,
** and a walk that kept nothing is walked again with it (nd_search_results_walk): the
** candidates priced only for misses the ranking does not show were half of DeepSeek-V3's
** search on 2,048 H800 (8,177 of 15,554, each over the budget by its bound), early in the
** walk, where the misses kept so far are far over and the cut is loose.
*/
void nd_search_results_cuts (nd_search_results *r, double *time_cut, double *over_cut) {
  /* results.csv holds the fitting rows priced under the cut, unless it wants every row */
  *time_cut = !r->rank_by_time || (r->csv && r->csv_all) ? HUGE_VAL : r->kth;
  if (r->csv && r->csv_all) *over_cut = HUGE_VAL;
  else if (r->keep_miss == 0 || !r->misses_exact) *over_cut = -HUGE_VAL;
  else *over_cut = r->nmiss == r->keep_miss ? r->miss[r->nmiss - 1].over : HUGE_VAL;
}

/* After a walk of p that kept no fitting row and left the misses inexact: 1, r made ready
   for the walk again with them exact; else 0 (r as it was). */
static int walk_again (nd_search_results *r, const nd_search_params *p) {
  /* (the exhaustive walk, without bounds, and csv wanting every row keep the misses exact
     anyway; a row csv holds, one the objective dropped, would be written twice: those
     misses stay as the walk left them) */
  if (p->exhaustive || r->misses_exact || r->keep_miss == 0 || r->nbest > 0
      || r->postfiltered > 0 || (r->csv && (r->csv_all || r->csv_rows > 0)))
    return 0;
  /* nothing fitting was kept: no csv row, point, fallback or cut to undo; the objective
     may have dropped fitting rows, which it drops again */
  r->misses_exact = 1;
  r->nmiss = 0;
  r->dropped = 0;
  r->best_key = r->kth = HUGE_VAL;
  r->nkeys = 0;
  return 1;
}

void nd_search_results_finish (nd_search_results *r) {
  nd_search_row *shrunk;
  qsort(r->best, (size_t)r->nbest, sizeof *r->best, cmp_best);
  if (r->nbest > r->keep) r->nbest = r->keep;
  /* what the walk needed and the ranking does not: the cut's scratch, the rows past the
     kept ones (half of best, up to 1,000 rows x 272 bytes by default) */
  free(r->keys); r->keys = NULL;
  if (r->nbest < r->cap
      && (shrunk = (nd_search_row *)realloc(r->best, (size_t)(r->nbest > 0 ? r->nbest : 1)
                                                     * sizeof *r->best)) != NULL) {
    r->best = shrunk;
    r->cap = r->nbest;
  }
}

int nd_search_results_points (const nd_search_results *r, unsigned long long stride,
                              nd_search_point *out, int max) {
  int i, n = 0;
  if (stride < 1) stride = 1;
  for (i = 0; i < r->npoints && n < max; i++)
    if (r->points[i].n % stride == 0) out[n++] = r->points[i];
  return n;
}

static const char *const csv_header =
  "index,dp,tp,pp,vpp,cp,ep,etp,sp,zero,mbs,mb,recompute,step_time_s,tokens_per_s,mfu,"
  "peak_memory_bytes,heaviest_stage,fits,over_bytes,weights,grads,optimizer,activations,"
  "buffers,fragmentation,reserve";

int nd_search_csv_header (FILE *f) {
  int i;
  fputs(csv_header, f);
  for (i = 0; i < ND_T_COUNT; i++) fprintf(f, ",%s_s", nd_time_part_name(i));
  fputs(",precision,dp_shard,layout\n", f);
  return ferror(f) ? -1 : 0;
}

/* A results.csv line, built in memory and written with one call. A whole-number field
   takes up to 312 bytes (%.0f of the largest double), any other under 32 (a name, an
   integer, an nd_format_g figure). */
typedef struct csv_line {
  char b[312 * (ND_SEARCH_MEM_PARTS + 2) + 32 * (ND_T_COUNT + 32)];
  size_t n;
} csv_line;

static void put_text (csv_line *l, const char *text) {
  size_t k = strlen(text);
  memcpy(l->b + l->n, text, k);
  l->n += k;
}

/* ",%d" of v */
static void put_int (csv_line *l, long long v) {
  l->b[l->n++] = ',';
  l->n += (size_t)nd_format_integer(l->b + l->n, v);
}

/* ",%.0f" of x, the same bytes: a whole number below 2^53 (every byte count) is written
   as an integer after rint (round half to even, as printf rounds); else by printf. */
static void put_whole (csv_line *l, double x) {
  if (x >= 0.0 && !signbit(x) && x < 9007199254740992.0) {  /* -0.0 prints "-0" */
    l->b[l->n++] = ',';
    l->n += (size_t)nd_format_integer(l->b + l->n, (long long)rint(x));
  }
  else l->n += (size_t)snprintf(l->b + l->n, sizeof l->b - l->n, ",%.0f", x);
}

/* ",%.{p}g" of x: printf's bytes (nd_format_g); a time part is often exactly 0 */
static void put_g (csv_line *l, double x, int p) {
  l->b[l->n++] = ',';
  if (x == 0.0 && !signbit(x)) l->b[l->n++] = '0';
  else l->n += (size_t)nd_format_g(l->b + l->n, 32, x, p);
}

int nd_search_csv_row (FILE *f, const nd_search_row *r) {
  const nd_candidate *c = &r->c;
  const int ints[] = {c->dp, c->tp, c->pp, c->vpp, c->cp, c->ep, c->etp};
  csv_line l;
  int i;
  l.n = 0;
  l.n += (size_t)nd_format_integer(l.b, (long long)r->index + 1);
  for (i = 0; i < (int)(sizeof ints / sizeof ints[0]); i++) put_int(&l, ints[i]);
  put_text(&l, c->sp ? ",true" : ",false");
  put_int(&l, c->zero);
  put_int(&l, c->mbs);
  put_int(&l, c->mb);
  l.b[l.n++] = ',';
  put_text(&l, nd_search_recompute_name(c->recompute));
  put_g(&l, r->step_time, 9);
  put_g(&l, r->tokens_per_s, 6);
  put_g(&l, r->mfu, 6);
  put_whole(&l, r->peak);
  put_int(&l, r->heaviest);
  put_text(&l, r->fits ? ",true" : ",false");
  put_whole(&l, r->over);
  for (i = 0; i < ND_SEARCH_MEM_PARTS; i++) put_whole(&l, r->mem[i]);
  for (i = 0; i < ND_T_COUNT; i++) put_g(&l, r->time_parts[i], 9);
  l.b[l.n++] = ',';
  put_text(&l, nd_recipe_get((nd_recipe_id)c->precision)->name);
  put_int(&l, c->dp_shard);
  l.b[l.n++] = ',';
  put_text(&l, nd_layout_variant_name(c->layout));  /* the layout last, as before */
  l.b[l.n++] = '\n';
  fwrite(l.b, 1, l.n, f);
  return ferror(f) ? -1 : 0;
}

/* ---- the whole search for a C caller ------------------------------------------------ */

static int collect_rows (void *ud, nd_search_row *rows, int n) {
  nd_search_results *r = (nd_search_results *)ud;
  int i, fits;
  for (i = 0; i < n; i++) {
    if ((fits = nd_search_results_row(r, &rows[i])) < 0) return -1;
    if (fits) nd_search_results_keep(r, &rows[i]);  /* the key is the step time */
  }
  return 0;
}

static void collect_cuts (void *ud, double *time_cut, double *over_cut) {
  nd_search_results_cuts((nd_search_results *)ud, time_cut, over_cut);
}

int nd_search_results_walk (nd_search_results *r, const nd_search_params *p,
                            const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                            const nd_costs *costs, const nd_search_hooks *hooks,
                            nd_search_counts *counts, char *err, size_t errlen) {
  int status;
  do status = nd_search_run(p, m, dev, job, costs, hooks, counts, err, errlen);
  while (status == ND_SEARCH_OK && walk_again(r, p));
  return status;
}

int nd_search_collect (nd_search_results *r, const nd_search_params *p,
                       const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                       const nd_costs *costs, nd_search_counts *counts, char *err,
                       size_t errlen) {
  nd_search_hooks hooks;
  int status;
  memset(&hooks, 0, sizeof hooks);
  hooks.deliver = collect_rows;
  hooks.cuts = collect_cuts;
  hooks.ud = r;
  r->rank_by_time = 1;
  status = nd_search_results_walk(r, p, m, dev, job, costs, &hooks, counts, err, errlen);
  if (status == ND_SEARCH_OK) nd_search_results_finish(r);
  return status;
}
