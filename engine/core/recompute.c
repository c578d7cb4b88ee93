/*
** recompute.c -- per-layer recompute planning over the estimators' own costs.
**
** A stage's peak is linear in the activations its layers keep: peak = static + w * sum of
** per-layer bytes, where w folds in the micro-batches in flight, DualPipe's halving and any
** offloaded share. Two estimates (every layer kept, every layer fully recomputed) give w
** and static for each stage, so the planner never carries a second memory model. Each stage
** is then an exact multiple-choice knapsack: one mode per layer, bytes rounded up to buckets
** of the room left (so a choice never exceeds the budget), least recompute time.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/recompute.h"

#define MAX_KINDS 32          /* distinct layer kinds priced once each */
#define MIN_BUCKETS 256
#define BUCKETS_PER_LAYER 8   /* rounding loses at most 1/8 of a bucket per layer on average */
#define MAX_BUCKETS 4096

typedef struct kind_costs {
  int n;
  nd_layer_kind kind[MAX_KINDS];
  nd_layer_estimate est[MAX_KINDS];
} kind_costs;

typedef struct layer_list { int n; int layer[ND_MAX_LAYERS]; } layer_list;

static void collect (int layer, int chunk, void *ud) {
  layer_list *l = (layer_list *)ud;
  (void)chunk;
  if (l->n < ND_MAX_LAYERS) l->layer[l->n++] = layer;
}

/* The per-layer costs of layer i, priced once per distinct kind; its kind index in *slot. */
static const nd_layer_estimate *layer_costs (kind_costs *kc, const nd_model_spec *m,
                                             const nd_device *dev, const nd_job *job,
                                             const nd_strategy *st, const nd_costs *costs,
                                             int i, int *slot, char *err, size_t errlen) {
  int k;
  nd_strategy copy;
  for (k = 0; k < kc->n; k++)
    if (memcmp(&kc->kind[k], &m->layer[i], sizeof m->layer[i]) == 0) { *slot = k; return &kc->est[k]; }
  if (kc->n == MAX_KINDS) {
    snprintf(err, errlen, "recompute: more than %d layer kinds", MAX_KINDS);
    return NULL;
  }
  copy = *st;
  if (nd_estimate_layer(m, dev, job, &copy, costs, i, &kc->est[kc->n], err, errlen) != 0)
    return NULL;
  kc->kind[kc->n] = m->layer[i];
  *slot = kc->n;
  return &kc->est[kc->n++];
}

static double gib (double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

/* Scratch of one planning run: the knapsack tables, sized for the largest stage. */
typedef struct scratch {
  double *best, *next;
  unsigned char *choice;
  size_t choice_size;
} scratch;

static int buckets (int n) {
  int K = n * BUCKETS_PER_LAYER;
  return K < MIN_BUCKETS ? MIN_BUCKETS : K > MAX_BUCKETS ? MAX_BUCKETS : K;
}

/*
** Chooses modes for the n layers of one stage: a[i*3+mode] bytes kept (already times w),
** r[i*3+mode] seconds added, within `room` bytes. Writes mode[i]; returns 0, or -1 when
** even the least-memory choice does not fit.
*/
static int knapsack (int n, const double *a, const double *r, unsigned modes, double room,
                     scratch *sc, unsigned char *mode) {
  int K = buckets(n), i, j, md;
  double unit, best_value;
  int best_j;
  if (room <= 0.0) {  /* only choices that keep nothing can fit */
    for (i = 0; i < n; i++) {
      int found = 0;
      for (md = 0; md < ND_RECOMPUTE_COUNT && !found; md++)
        if ((modes & ND_RECOMPUTE_MASK(md)) && a[i * 3 + md] <= 0.0) { mode[i] = (unsigned char)md; found = 1; }
      if (!found) return -1;
    }
    return 0;
  }
  unit = room / K;
  for (j = 0; j <= K; j++) sc->best[j] = HUGE_VAL;
  sc->best[0] = 0.0;
  for (i = 0; i < n; i++) {
    unsigned char *ch = sc->choice + (size_t)i * (K + 1);
    double *tmp;
    for (j = 0; j <= K; j++) { sc->next[j] = HUGE_VAL; ch[j] = 0; }
    for (md = 0; md < ND_RECOMPUTE_COUNT; md++) {
      double w;
      int wb;
      if (!(modes & ND_RECOMPUTE_MASK(md))) continue;
      w = ceil(a[i * 3 + md] / unit - 1e-9);
      if (w > K) continue;
      wb = w > 0.0 ? (int)w : 0;
      for (j = wb; j <= K; j++) {
        double v = sc->best[j - wb] + r[i * 3 + md];
        if (v < sc->next[j]) { sc->next[j] = v; ch[j] = (unsigned char)md; }
      }
    }
    tmp = sc->best; sc->best = sc->next; sc->next = tmp;
  }
  best_j = -1;
  best_value = HUGE_VAL;
  for (j = 0; j <= K; j++)
    if (sc->best[j] < best_value) { best_value = sc->best[j]; best_j = j; }
  if (best_j < 0) return -1;
  for (i = n - 1; i >= 0; i--) {  /* walk back through the choices */
    unsigned char md_i = sc->choice[(size_t)i * (K + 1) + best_j];
    double w = ceil(a[i * 3 + md_i] / unit - 1e-9);
    mode[i] = md_i;
    best_j -= w > 0.0 ? (int)w : 0;
  }
  return 0;
}

int nd_recompute_plan_run (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                           nd_strategy *st, const nd_costs *costs, double budget,
                           unsigned modes, nd_recompute_plan *plan, nd_estimate *out,
                           char *err, size_t errlen) {
  nd_strategy trial;
  kind_costs *kc = NULL;
  layer_list *list = NULL;
  double *a = NULL, *r = NULL, *full_peak = NULL, *none_peak = NULL, *inflight = NULL;
  unsigned char *chosen = NULL;
  scratch sc = {NULL, NULL, NULL, 0};
  int p, s, i, rc = -1, dual, stages_to_plan, total = (int)(m->num_layers + m->mtp_layers);
  modes &= ND_RECOMPUTE_ALL;
  if (modes == 0) { snprintf(err, errlen, "recompute: no mode allowed"); return -1; }
  plan->failed_stage = -1;
  /* every layer fully recomputed, then every layer kept: the two ends of each stage's line */
  trial = *st;
  trial.per_layer = 0;
  trial.recompute = ND_RECOMPUTE_FULL;
  if (nd_estimate_run(m, dev, job, &trial, costs, out, err, errlen) != 0) return -1;
  p = out->stages;
  kc = (kind_costs *)calloc(1, sizeof *kc);
  list = (layer_list *)malloc(sizeof *list);
  full_peak = (double *)malloc(3 * (size_t)p * sizeof *full_peak);
  a = (double *)malloc(3 * (size_t)ND_MAX_LAYERS * sizeof *a);
  r = (double *)malloc(3 * (size_t)ND_MAX_LAYERS * sizeof *r);
  chosen = (unsigned char *)malloc(ND_MAX_LAYERS);
  sc.best = (double *)malloc((MAX_BUCKETS + 1) * sizeof *sc.best);
  sc.next = (double *)malloc((MAX_BUCKETS + 1) * sizeof *sc.next);
  if (!kc || !list || !full_peak || !a || !r || !chosen || !sc.best || !sc.next) {
    snprintf(err, errlen, "recompute: out of memory");
    goto done;
  }
  none_peak = full_peak + p;
  inflight = none_peak + p;
  for (s = 0; s < p; s++) { full_peak[s] = out->stage[s].peak; inflight[s] = out->stage[s].inflight; }
  trial.recompute = ND_RECOMPUTE_NONE;
  if (nd_estimate_run(m, dev, job, &trial, costs, out, err, errlen) != 0) goto done;
  for (s = 0; s < p; s++) none_peak[s] = out->stage[s].peak;
  dual = trial.schedule == ND_SCHED_DUALPIPE;
  /* DualPipe: devices s and p-1-s hold the same layers; plan one, the other follows */
  stages_to_plan = dual ? p / 2 : p;
  trial.per_layer = 1;
  for (i = 0; i < total; i++) trial.layer_recompute[i] = ND_RECOMPUTE_FULL;
  for (s = 0; s < stages_to_plan; s++) {
    double sum_none = 0.0, sum_full = 0.0, w, fixed, least = 0.0, saved = 0.0;
    int k, counts[MAX_KINDS][ND_RECOMPUTE_COUNT], slot[ND_MAX_LAYERS];
    list->n = 0;
    nd_stage_foreach(&trial, (int)m->num_layers, (int)m->mtp_layers, s, collect, list);
    for (i = 0; i < list->n; i++) {
      const nd_layer_estimate *le = layer_costs(kc, m, dev, job, &trial, costs, list->layer[i],
                                                &slot[i], err, errlen);
      int md;
      if (!le) goto done;
      for (md = 0; md < ND_RECOMPUTE_COUNT; md++) {
        a[i * 3 + md] = le->activations[md];
        r[i * 3 + md] = le->recompute_s[md];
      }
      sum_none += le->activations[ND_RECOMPUTE_NONE];
      sum_full += le->activations[ND_RECOMPUTE_FULL];
    }
    {  /* the choice table: one row of buckets per layer of the stage */
      size_t need = (size_t)list->n * (buckets(list->n) + 1);
      if (need > sc.choice_size) {
        unsigned char *grown = (unsigned char *)realloc(sc.choice, need);
        if (!grown) { snprintf(err, errlen, "recompute: out of memory"); goto done; }
        sc.choice = grown;
        sc.choice_size = need;
      }
    }
    w = sum_none - sum_full > 0.0 ? (none_peak[s] - full_peak[s]) / (sum_none - sum_full)
                                  : inflight[s];
    fixed = full_peak[s] - w * sum_full;
    for (i = 0; i < list->n; i++) {
      int md;
      double lo = HUGE_VAL;
      for (md = 0; md < ND_RECOMPUTE_COUNT; md++) {
        a[i * 3 + md] *= w;
        if ((modes & ND_RECOMPUTE_MASK(md)) && a[i * 3 + md] < lo) lo = a[i * 3 + md];
      }
      least += lo;
    }
    plan->stage_need[s] = fixed + least;
    if (dual) plan->stage_need[p - 1 - s] = plan->stage_need[s];
    if (fixed + least > budget || knapsack(list->n, a, r, modes, budget - fixed, &sc, chosen) != 0) {
      plan->failed_stage = s;
      snprintf(err, errlen, "over memory: stage %d needs %.2f GiB with its least-memory "
               "recompute, budget %.2f GiB", s, gib(fixed + least), gib(budget));
      goto done;
    }
    /* the same counts per kind, heavier recompute on the stage's first layers */
    memset(counts, 0, sizeof counts);
    for (i = 0; i < list->n; i++) counts[slot[i]][chosen[i]]++;
    for (i = 0; i < list->n; i++) {
      int md = ND_RECOMPUTE_FULL;
      k = slot[i];
      while (counts[k][md] == 0) md--;
      counts[k][md]--;
      trial.layer_recompute[list->layer[i]] = (unsigned char)md;
      saved += r[i * 3 + ND_RECOMPUTE_FULL] - r[i * 3 + md];
    }
    plan->stage_savings[s] = saved * trial.mb * (dual ? 0.5 : 1.0);
    if (dual) plan->stage_savings[p - 1 - s] = plan->stage_savings[s];
  }
  if (nd_estimate_run(m, dev, job, &trial, costs, out, err, errlen) != 0) goto done;
  if (out->peak > budget * (1.0 + 1e-9)) {  /* the linear model above is exact: a bug */
    snprintf(err, errlen, "recompute: internal error, plan peaks at %.3f GiB over a %.3f GiB "
             "budget", gib(out->peak), gib(budget));
    goto done;
  }
  *st = trial;
  rc = 0;
done:
  free(kc); free(list); free(full_peak); free(a); free(r); free(chosen);
  free(sc.best); free(sc.next); free(sc.choice);
  return rc;
}
