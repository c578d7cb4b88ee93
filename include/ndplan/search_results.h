/*
** ndplan/search_results.h -- what a search keeps of the rows it prices, for any caller of
** nd_search_run (the Lua binding is one): the best `keep` fitting rows in ranking order
** (objective, peak memory, walk index), the few rows least over the budget, the post-filter
** of the derived dimensions (DP and MB lists apply to the results: the best row they remove
** is kept as a fallback), the cuts that let the walk skip what cannot change any of this,
** the results.csv row, and a thinned sample of the rows written to it (a chart's points).
**
** Memory is bounded by keep and misses, not by the space: 2 * keep rows while the walk
** runs, `misses` + 1 near misses, and the point sample (at most max_points entries: every
** csv row until then, so that a chart may thin them by any stride; past it, every other
** one, again and again).
**
** A C caller without a policy runs nd_search_collect; a caller with its own objective (the
** Lua binding) delivers each row itself: nd_search_results_row, then for a fitting row the
** objective, then nd_search_results_keep or nd_search_results_drop.
*/
#ifndef NDPLAN_SEARCH_RESULTS_H
#define NDPLAN_SEARCH_RESULTS_H

#include <stdio.h>

#include "ndplan/search.h"

/* One chart point: a row written to results.csv. */
typedef struct nd_search_point {
  double step_time, peak;
  int fits;
  unsigned long long n;       /* its line in results.csv (1-based, after the header) */
} nd_search_point;

typedef struct nd_search_results {
  /* settings (nd_search_results_init; the caller may change csv, csv_all, rank_by_time
     before the walk) */
  int keep, keep_miss;
  FILE *csv;                  /* NULL: no results.csv; else rows are written as delivered */
  int csv_all;                /* 1: every row, no time cut; 0: the fitting rows priced */
  int rank_by_time;           /* 1: the objective is the step time (the time cut applies) */
  int misses_exact;           /* 1: the over cut keeps the nearest misses exact through the
                                 walk (a caller that shows them whatever is kept); 0: they
                                 are shown only when nothing is kept, so the walk prunes
                                 every candidate whose memory bound is over the budget, and
                                 one that keeps nothing is walked again exact
                                 (nd_search_results_walk) */
  nd_dim_set post_dp, post_mb;/* DP and MB lists (auto: no post-filter) */
  int max_points;             /* the point sample's size (0: none) */
  /* what is kept */
  nd_search_row *best;        /* ranked after nd_search_results_finish; nbest <= keep */
  int nbest, cap;
  nd_search_row *miss;        /* least over the budget, by (over, index) */
  int nmiss;
  nd_search_row fallback;     /* best row the post-filter removed */
  int has_fallback;
  unsigned long long postfiltered, dropped;
  unsigned long long csv_rows;/* rows written to csv */
  double best_key;            /* least objective kept so far (HUGE_VAL: none) */
  /* the time cut: the keep-th least objective of the rows kept (HUGE_VAL before keep) */
  double kth;
  double *keys;               /* the keep least objectives so far, a max-heap of nkeys (NULL:
                                 no memory, no time cut) */
  int nkeys;
  /* the point sample: every stride-th csv row (stride doubles as the sample fills) */
  nd_search_point *points;
  int npoints, point_cap;
  unsigned long long stride;
} nd_search_results;

/* Ranking order: objective (key), then peak memory, then walk index (a total order). */
int nd_search_row_cmp (const nd_search_row *a, const nd_search_row *b);
/* Misses: least over the budget first, then walk index. */
int nd_search_miss_cmp (const nd_search_row *a, const nd_search_row *b);

/* keep >= 1 fitting rows, keep_miss >= 0 misses, the post-filter lists of p (DP, MB) and a
   point sample of up to max_points (0: none; grown as rows arrive). Returns 0, or -1 out of memory (r is then safe to
   free). */
int nd_search_results_init (nd_search_results *r, const nd_search_params *p, int keep,
                            int keep_miss, int max_points);
void nd_search_results_free (nd_search_results *r);

/*
** A delivered row, before any objective: written to csv (when it is one csv holds), kept
** as a miss when it does not fit. Returns 1 when it fits (the caller sets row->key, then
** calls keep or drop), 0 when it does not (done), -1 when writing csv failed.
*/
int nd_search_results_row (nd_search_results *r, const nd_search_row *row);
/* A fitting row with its objective: post-filtered, else kept among the best. */
void nd_search_results_keep (nd_search_results *r, const nd_search_row *row);
/* A fitting row the objective dropped. */
void nd_search_results_drop (nd_search_results *r);

/* The walk's cuts (nd_search_hooks.cuts): the time cut is the keep-th best step time so
   far, when the objective is the step time and csv does not want every row (csv_all: csv
   then holds the fitting rows the cut left to price); the over cut keeps the nearest misses
   exact when misses_exact says so (+HUGE_VAL when csv wants every row), else -HUGE_VAL. */
void nd_search_results_cuts (nd_search_results *r, double *time_cut, double *over_cut);

/* nd_search_run of p with hooks (r's among them: deliver and cuts), walked again with the
   nearest misses exact when it kept no fitting row and left them inexact (misses_exact 0,
   bounds on: nothing ranked, the misses shown). Returns nd_search_run's status. */
int nd_search_results_walk (nd_search_results *r, const nd_search_params *p,
                            const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                            const nd_costs *costs, const nd_search_hooks *hooks,
                            nd_search_counts *counts, char *err, size_t errlen);

/* After the walk: best in ranking order, cut to keep. */
void nd_search_results_finish (nd_search_results *r);

/* The points of the csv rows whose line is a multiple of `stride` (a multiple of the
   sample's own stride), into out (up to max); returns how many. */
int nd_search_results_points (const nd_search_results *r, unsigned long long stride,
                              nd_search_point *out, int max);

/* results.csv: the header line and one row (walk index 1-based). 0, or -1 on a write
   error. */
int nd_search_csv_header (FILE *f);
int nd_search_csv_row (FILE *f, const nd_search_row *row);

/*
** The whole search for a C caller, the step time as objective: nd_search_run with r's
** deliver and cuts (again with the misses exact when nothing fit: nd_search_results_walk),
** then nd_search_results_finish. Returns nd_search_run's status
** (ND_SEARCH_HOOK_ERROR: writing csv failed).
*/
int nd_search_collect (nd_search_results *r, const nd_search_params *p,
                       const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                       const nd_costs *costs, nd_search_counts *counts, char *err,
                       size_t errlen);

#endif
