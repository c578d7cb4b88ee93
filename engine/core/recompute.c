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

#define MAX_KINDS ND_MAX_LAYER_KINDS  /* distinct layer kinds priced once each */
#define MIN_BUCKETS 256
#define BUCKETS_PER_LAYER 8   /* rounding loses under a bucket per layer: under 1/8 of the room */
#define MAX_BUCKETS 4096

typedef struct kind_costs {
  int n;
  nd_layer_kind kind[MAX_KINDS];
  nd_layer_estimate est[MAX_KINDS];
} kind_costs;

typedef struct layer_list { int n; int layer[ND_MAX_LAYERS]; } layer_list;

/* The tables of one planning run, in one allocation. */
typedef struct workspace {
  kind_costs kc;
  layer_list list;
  double per_stage[4 * ND_MAX_STAGES];  /* full and none peaks, in flight, base compute */
  double a[3 * ND_MAX_LAYERS], r[3 * ND_MAX_LAYERS];  /* per layer and mode */
  unsigned char chosen[ND_MAX_LAYERS], picked3[ND_MAX_LAYERS];
  nd_strategy priced;   /* the given strategy, resolved, that prices the layer kinds */
} workspace;

static void collect (int layer, int chunk, void *ud) {
  layer_list *l = (layer_list *)ud;
  (void)chunk;
  if (l->n < ND_MAX_LAYERS) l->layer[l->n++] = layer;
}

/*
** The per-layer costs of layer i, priced once per distinct kind; its kind index in *slot.
** They are priced on `copy`, which the run's first kind (kc->n 0) sets to st and the
** estimate resolves: resolving is idempotent, so the run's later kinds reuse it (a copy of
** nd_strategy per kind was 1% of a per-layer search).
*/
static const nd_layer_estimate *layer_costs (kind_costs *kc, const nd_model_spec *m,
                                             const nd_device *dev, const nd_job *job,
                                             const nd_strategy *st, nd_strategy *copy,
                                             const nd_costs *costs, nd_price_cache *pc, int i,
                                             int *slot, char *err, size_t errlen) {
  int k;
  for (k = 0; k < kc->n; k++)
    if (nd_layer_kind_equal(&kc->kind[k], &m->layer[i])) { *slot = k; return &kc->est[k]; }
  if (kc->n == MAX_KINDS) {
    snprintf(err, errlen, "recompute: more than %d layer kinds", MAX_KINDS);
    return NULL;
  }
  if (kc->n == 0) *copy = *st;
  if (nd_estimate_layers(m, dev, job, copy, costs, pc, 1, &i, &kc->est[kc->n], err,
                         errlen) != 0)
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

/* Sizes the knapsack tables for a stage of n layers (allocated only when needed). */
static int ensure_scratch (scratch *sc, int n) {
  size_t need = (size_t)n * (buckets(n) + 1);
  if (!sc->best) sc->best = (double *)malloc((MAX_BUCKETS + 1) * sizeof *sc->best);
  if (!sc->next) sc->next = (double *)malloc((MAX_BUCKETS + 1) * sizeof *sc->next);
  if (!sc->best || !sc->next) return -1;
  if (need > sc->choice_size) {
    unsigned char *grown = (unsigned char *)realloc(sc->choice, need);
    if (!grown) return -1;
    sc->choice = grown;
    sc->choice_size = need;
  }
  return 0;
}

/*
** Chooses one of K options for each of the n layers of one stage: option j of layer i keeps
** a[i*K+j] bytes (already times w; HUGE_VAL when not offered) and adds r[i*K+j] seconds,
** within `room` bytes. What each option keeps beyond its layer's least-memory option is
** rounded up to buckets of the room those leave, so a choice never exceeds it and the
** least-memory choice always fits when anything does. Writes choice[i]; returns 0, or -1
** when even the least-memory choice does not fit.
*/
static int knapsack (int n, int K, double *a, const double *r, double room,
                     scratch *sc, unsigned char *choice) {
  int B = buckets(n), i, j, o;
  double unit, best_value;
  int best_j;
  for (i = 0; i < n; i++) {  /* a becomes the bytes above the layer's least */
    double least = HUGE_VAL;
    int least_o = -1;
    for (o = 0; o < K; o++) if (a[i * K + o] < least) { least = a[i * K + o]; least_o = o; }
    if (least_o < 0) return -1;
    room -= least;
    for (o = 0; o < K; o++) if (a[i * K + o] != HUGE_VAL) a[i * K + o] -= least;
    choice[i] = (unsigned char)least_o;
  }
  if (room < 0.0) return -1;
  if (room == 0.0) return 0;  /* the least-memory choice, and nothing else, fits */
  unit = room / B;
  for (j = 0; j <= B; j++) sc->best[j] = HUGE_VAL;
  sc->best[0] = 0.0;
  for (i = 0; i < n; i++) {
    unsigned char *ch = sc->choice + (size_t)i * (B + 1);
    double *tmp;
    for (j = 0; j <= B; j++) { sc->next[j] = HUGE_VAL; ch[j] = 0; }
    for (o = 0; o < K; o++) {
      double w = a[i * K + o] == HUGE_VAL ? HUGE_VAL : ceil(a[i * K + o] / unit - 1e-9);
      int wb;
      if (w > B) continue;
      wb = w > 0.0 ? (int)w : 0;
      for (j = wb; j <= B; j++) {
        double v = sc->best[j - wb] + r[i * K + o];
        if (v < sc->next[j]) { sc->next[j] = v; ch[j] = (unsigned char)o; }
      }
    }
    tmp = sc->best; sc->best = sc->next; sc->next = tmp;
  }
  best_j = -1;
  best_value = HUGE_VAL;
  for (j = 0; j <= B; j++)
    if (sc->best[j] < best_value) { best_value = sc->best[j]; best_j = j; }
  if (best_j < 0) return -1;
  for (i = n - 1; i >= 0; i--) {  /* walk back through the choices */
    unsigned char o_i = sc->choice[(size_t)i * (B + 1) + best_j];
    double w = ceil(a[i * K + o_i] / unit - 1e-9);
    choice[i] = o_i;
    best_j -= w > 0.0 ? (int)w : 0;
  }
  return 0;
}

/*
** The exact path for identical layers. The layers of one kind on a stage differ only in
** how many take each mode, so each kind's choices are the counts (b selective, c full) and
** their (bytes, seconds) Pareto front; the fronts of a stage's kinds merge pairwise, and the
** answer is the front's last point within the room. No rounding to buckets.
*/
typedef struct front_point {
  double mem, time, hide;   /* bytes, seconds, of which compute (what hides host copies) */
  int parent;               /* index in the previous merged front (-1 for the first kind) */
  short b, c;               /* this kind's selective and full counts */
} front_point;

typedef struct front {
  front_point *pt;
  int n;
} front;

#define FRONT_MAX 65536     /* beyond this many points a stage uses the bucket DP */

static int by_mem (const void *x, const void *y) {
  const front_point *a = (const front_point *)x, *b = (const front_point *)y;
  if (a->mem != b->mem) return a->mem < b->mem ? -1 : 1;
  return a->time < b->time ? -1 : a->time > b->time ? 1 : 0;
}

/* Sorts by bytes and keeps the points no other point beats on both bytes and time. */
static void prune (front *f) {
  int i, k = 0;
  double best = HUGE_VAL;
  qsort(f->pt, (size_t)f->n, sizeof *f->pt, by_mem);
  for (i = 0; i < f->n; i++)
    if (f->pt[i].time < best) { best = f->pt[i].time; f->pt[k++] = f->pt[i]; }
  f->n = k;
}

/* The front of n identical layers with per-layer bytes m[3] and seconds t[3] (h[3] of them
   compute). */
static int kind_front (int n, const double *m, const double *t, const double *h,
                       unsigned modes, front *out) {
  int b, c, k = 0, max = (n + 1) * (n + 2) / 2;
  out->pt = (front_point *)malloc((size_t)max * sizeof *out->pt);
  if (!out->pt) return -1;
  for (c = 0; c <= n; c++)
    for (b = 0; b + c <= n; b++) {
      int a = n - b - c;
      if ((a && !(modes & ND_RECOMPUTE_MASK(ND_RECOMPUTE_NONE)))
          || (b && !(modes & ND_RECOMPUTE_MASK(ND_RECOMPUTE_SELECTIVE)))
          || (c && !(modes & ND_RECOMPUTE_MASK(ND_RECOMPUTE_FULL))))
        continue;
      out->pt[k].mem = a * m[0] + b * m[1] + c * m[2];
      out->pt[k].time = b * t[1] + c * t[2];
      out->pt[k].hide = b * h[1] + c * h[2];
      out->pt[k].parent = -1;
      out->pt[k].b = (short)b;
      out->pt[k].c = (short)c;
      k++;
    }
  out->n = k;
  prune(out);
  return 0;
}

/*
** What a stage's choice costs. Without offload: its recompute seconds. With an offload
** share, the copies of what the layers keep to host and back also run on the stage, hidden
** behind its compute (which recompute lengthens) up to offload_overlap:
**   cost = d*R + max(0, k1*M - k0 - O*d*C)
** R: recompute seconds of the layers (the repeated forward's TP and EP traffic included),
** C: of which compute (what hides copies in estimate.c's stage time: the traffic does not),
** M: their weighted bytes, d: DualPipe's 1/2.
*/
/* Per-layer offload (ND_PLAN_OFFLOAD) adds k2*F + lat2 for F offloaded weighted bytes. */
typedef struct stage_cost { int offload; double d, k1, k0, O, k2, lat2; } stage_cost;

static double cost_of (const stage_cost *sc, double mem, double rec, double hide, double off) {
  double exposed;
  if (!sc || !sc->offload) return rec;
  exposed = sc->k1 * mem + sc->k2 * off + (off > 0.0 ? sc->lat2 : 0.0) - sc->k0
          - sc->O * sc->d * hide;
  return sc->d * rec + (exposed > 0.0 ? exposed : 0.0);
}

/*
** n identical layers in `room`, after other kinds that took base_mem bytes and base_rec
** seconds (base_hide of them compute): for each count c of full layers, the fewest
** selective ones that fit (bytes fall linearly with them), the rest kept; with offload
** every selective count is tried, as keeping less also copies less. t: seconds per mode,
** h: of which compute. Returns the least cost and writes b, c; HUGE_VAL when nothing fits.
*/
static double single_kind (int n, const double *m, const double *t, const double *h,
                           unsigned modes, double room, double base_mem, double base_rec,
                           double base_hide, const stage_cost *cost, double m_off,
                           int *best_b, int *best_c, int *best_o) {
  int c, has_none = (modes & ND_RECOMPUTE_MASK(ND_RECOMPUTE_NONE)) != 0;
  int has_sel = (modes & ND_RECOMPUTE_MASK(ND_RECOMPUTE_SELECTIVE)) != 0;
  int has_full = (modes & ND_RECOMPUTE_MASK(ND_RECOMPUTE_FULL)) != 0;
  double best = HUGE_VAL, limit = room * (1.0 + 1e-12), low = HUGE_VAL;
  int c0 = 0;
  *best_o = 0;
  /* fewer full layers than c0 cannot fit even if every other layer keeps the least that a
     mode short of full keeps: start there */
  if (has_none) low = m[0];
  if (has_sel && m[1] < low) low = m[1];
  if (has_none && m_off > 0.0 && m_off < low) low = m_off;
  if (has_full && low < HUGE_VAL && low > m[2]) {
    double need = (n * low - limit) / (low - m[2]);
    if (need > 0.0) c0 = need - 1e-9 >= n ? n : (int)floor(need - 1e-9);
  }
  for (c = c0; c <= (has_full ? n : 0); c++) {
    int o;
    /* every later c costs at least its full layers' time: nothing better is left */
    if ((cost && cost->offload ? cost->d : 1.0) * (base_rec + c * t[2]) >= best) break;
    for (o = 0; o <= (m_off > 0.0 && has_none ? n - c : 0); o++) {  /* offloaded, kept */
      int rest = n - c - o, b, b_last;
      if (!has_none) b = has_sel ? rest : (rest ? -1 : 0);
      else if (!has_sel || m[1] >= m[0]) b = 0;
      else {  /* a*m0 + b*m1 + c*m2 + o*m_off <= room with a = rest - b */
        double need = (rest * m[0] + c * m[2] + o * m_off - limit) / (m[0] - m[1]);
        /* compared before the conversion: a tiny saving per layer makes need huge */
        b = need <= 0.0 ? 0 : need - 1e-9 > rest ? -1 : (int)ceil(need - 1e-9);
      }
      if (b < 0) continue;
      b_last = cost && cost->offload && has_sel && m_off <= 0.0 ? rest : b;
      for (; b <= b_last; b++) {
        double mem = (rest - b) * m[0] + b * m[1] + c * m[2] + o * m_off, score;
        if (mem > limit) continue;
        score = cost_of(cost, base_mem + mem, base_rec + b * t[1] + c * t[2],
                        base_hide + b * h[1] + c * h[2], o * m_off);
        if (score < best) { best = score; *best_b = b; *best_c = c; *best_o = o; }
      }
    }
  }
  return best;
}

/*
** Several kinds: every combination of the smaller kinds' counts (when there are few), the
** largest kind solved alone in what is left; modes[k] the modes kind k may take, h the
** compute part of t. Returns 0 with the cost in *cost_out, 1 when nothing fits, -1 when the
** combinations are too many.
*/
#define COMBOS_MAX 4096
static int enumerate_counts (int nkinds, const int *kinds, const double *m, const double *t,
                             const double *h, const unsigned *modes, double room,
                             const stage_cost *cost,
                             const double *m_off, int counts[][ND_RECOMPUTE_COUNT],
                             int *offloaded, double *cost_out) {
  int big = 0, k, idx[MAX_KINDS], cur_b[MAX_KINDS], cur_c[MAX_KINDS];
  int keep_b[MAX_KINDS], keep_c[MAX_KINDS], keep_o = 0, found = 0;
  double combos = 1.0, best = HUGE_VAL;
  for (k = 1; k < nkinds; k++) if (kinds[k] > kinds[big]) big = k;
  for (k = 0; k < nkinds; k++)
    if (k != big) combos *= (kinds[k] + 1.0) * (kinds[k] + 2.0) / 2.0;
  if (combos > COMBOS_MAX) return -1;
  memset(idx, 0, sizeof idx);
  for (;;) {  /* odometer over (b, c) of every kind but the largest */
    double mem = 0.0, time = 0.0, hide = 0.0, rest;
    int ok = 1, bb = 0, cc = 0, oo = 0;
    for (k = 0; k < nkinds && ok; k++) {
      int n = kinds[k], b = 0, c = 0, i = idx[k], a;
      if (k == big) continue;
      while (i > n - c) { i -= n - c + 1; c++; }  /* idx -> (b, c) with b + c <= n */
      b = i;
      a = n - b - c;
      if ((a && !(modes[k] & ND_RECOMPUTE_MASK(ND_RECOMPUTE_NONE)))
          || (b && !(modes[k] & ND_RECOMPUTE_MASK(ND_RECOMPUTE_SELECTIVE)))
          || (c && !(modes[k] & ND_RECOMPUTE_MASK(ND_RECOMPUTE_FULL)))) ok = 0;
      mem += a * m[3 * k] + b * m[3 * k + 1] + c * m[3 * k + 2];
      time += b * t[3 * k + 1] + c * t[3 * k + 2];
      hide += b * h[3 * k + 1] + c * h[3 * k + 2];
      cur_b[k] = b; cur_c[k] = c;
    }
    if (ok) {
      /* the largest kind may offload (the others keep to recompute modes) */
      rest = single_kind(kinds[big], m + 3 * big, t + 3 * big, h + 3 * big, modes[big],
                         room - mem, mem, time, hide, cost, m_off ? m_off[big] : 0.0, &bb, &cc,
                         &oo);
      if (rest < best) {
        best = rest;
        keep_o = oo;
        memcpy(keep_b, cur_b, sizeof keep_b);
        memcpy(keep_c, cur_c, sizeof keep_c);
        keep_b[big] = bb; keep_c[big] = cc;
        found = 1;
      }
    }
    for (k = 0; k < nkinds; k++) {  /* next combination */
      if (k == big) continue;
      if (++idx[k] < (kinds[k] + 1) * (kinds[k] + 2) / 2) break;
      idx[k] = 0;
    }
    if (k == nkinds) break;
  }
  if (!found) return 1;
  *cost_out = best;
  for (k = 0; k < nkinds; k++) {
    counts[k][ND_RECOMPUTE_SELECTIVE] = keep_b[k];
    counts[k][ND_RECOMPUTE_FULL] = keep_c[k];
    counts[k][ND_RECOMPUTE_NONE] = kinds[k] - keep_b[k] - keep_c[k];  /* offloaded included */
    offloaded[k] = k == big ? keep_o : 0;
  }
  return 0;
}

/*
** Chooses the counts per kind for one stage: kinds[k] layers of kind k with costs m, t
** (3 per kind; h the compute part of t), modes[k] the modes kind k may take. Writes
** counts[k][mode] and the choice's cost (cost_of) in *cost_out. The front does not depend
** on the room: a larger room only offers more of its points. Returns 0, 1 when nothing
** fits, -1 when the fronts grow past FRONT_MAX (the caller falls back to the bucket DP) or
** memory runs out.
*/
static int choose_counts (int nkinds, const int *kinds, const double *m, const double *t,
                          const double *h, const unsigned *modes, double room,
                          const stage_cost *cost, int counts[][ND_RECOMPUTE_COUNT],
                          double *cost_out) {
  front level[MAX_KINDS];
  int k, i, j, best = -1, rc = -1;
  memset(level, 0, sizeof level);
  for (k = 0; k < nkinds; k++) {
    front kf;
    if (kinds[k] > 32767 || kind_front(kinds[k], m + 3 * k, t + 3 * k, h + 3 * k, modes[k], &kf) != 0)
      goto done;
    if (k == 0) { level[0] = kf; continue; }
    if ((double)level[k - 1].n * kf.n > FRONT_MAX) { free(kf.pt); goto done; }
    level[k].pt = (front_point *)malloc((size_t)level[k - 1].n * kf.n * sizeof *level[k].pt);
    if (!level[k].pt) { free(kf.pt); goto done; }
    for (i = 0; i < level[k - 1].n; i++)
      for (j = 0; j < kf.n; j++) {
        front_point *q = &level[k].pt[level[k].n++];
        *q = kf.pt[j];
        q->mem += level[k - 1].pt[i].mem;
        q->time += level[k - 1].pt[i].time;
        q->hide += level[k - 1].pt[i].hide;
        q->parent = i;
      }
    free(kf.pt);
    prune(&level[k]);
  }
  {  /* without copies the last point within the room is the fastest; with them, the
        cheapest of the points within it (keeping more also copies more) */
    const front *last = &level[nkinds - 1];
    double least = HUGE_VAL;
    for (i = 0; i < last->n && last->pt[i].mem <= room * (1.0 + 1e-12); i++) {
      double c = cost_of(cost, last->pt[i].mem, last->pt[i].time, last->pt[i].hide, 0.0);
      if (c <= least) { least = c; best = i; }
    }
    *cost_out = least;
  }
  if (best < 0) { rc = 1; goto done; }
  for (k = nkinds - 1; k >= 0; k--) {  /* walk back through the merges */
    const front_point *q = &level[k].pt[best];
    counts[k][ND_RECOMPUTE_SELECTIVE] = q->b;
    counts[k][ND_RECOMPUTE_FULL] = q->c;
    counts[k][ND_RECOMPUTE_NONE] = kinds[k] - q->b - q->c;
    best = q->parent;
  }
  rc = 0;
done:
  for (k = 0; k < nkinds; k++) free(level[k].pt);
  return rc;
}

static int by_value (const void *x, const void *y) {  /* doubles, largest first */
  double a = *(const double *)x, b = *(const double *)y;
  return a > b ? -1 : a < b ? 1 : 0;
}

/* What kind k rebuilds for its first backward under mode md (km holds bytes times w). */
static double rebuilt (const double *km, double w, int k, int md) {
  return w > 0.0 ? (km[3 * k + ND_RECOMPUTE_NONE] - km[3 * k + md]) / w : 0.0;
}

/* Adds working set t to the n caps unless it is there (or the array is full); the count. */
static int add_cap (double *caps, int n, int max, double t) {
  int c;
  for (c = 0; c < n; c++) if (caps[c] == t) return n;
  if (n < max) caps[n++] = t;
  return n;
}

/* The distinct working sets of the allowed (kind, mode) pairs, largest first; their count. */
static int working_caps (int nk, const double *km, double w, unsigned modes, double *caps) {
  int n = 0, k, md;
  for (k = 0; k < nk; k++)
    for (md = 0; md < ND_RECOMPUTE_COUNT; md++)
      if (modes & ND_RECOMPUTE_MASK(md))
        n = add_cap(caps, n, ND_RECOMPUTE_COUNT * MAX_KINDS, rebuilt(km, w, k, md));
  qsort(caps, (size_t)n, sizeof caps[0], by_value);
  return n;
}

/* The modes each kind may take under a working-set cap; 1 when only keep-everything is left. */
static int capped_modes (int nk, const double *km, double w, unsigned modes, double cap,
                         unsigned *kmodes) {
  int k, md, kept_only = 1;
  for (k = 0; k < nk; k++) {
    kmodes[k] = 0;
    for (md = 0; md < ND_RECOMPUTE_COUNT; md++)
      if ((modes & ND_RECOMPUTE_MASK(md)) && rebuilt(km, w, k, md) <= cap)
        kmodes[k] |= ND_RECOMPUTE_MASK(md);
    kept_only &= kmodes[k] == ND_RECOMPUTE_MASK(ND_RECOMPUTE_NONE);
  }
  return kept_only;
}

/*
** The fallbacks for stages too long for enumerate_counts: merged fronts, else the bucket DP
** over the layers one by one. What a plan rebuilds for its first backward (the working
** set) is that of its heaviest (kind, mode): each distinct amount is tried as a cap, the
** (kind, mode) pairs rebuilding more left out and the amount reserved. km, kt: bytes
** (times w) and seconds per kind and mode, kh the compute of kt; a, r: the same per layer
** (slot[i] its kind, kind_of[k] the slot of local kind k); choices compare by cost_of.
** Returns 0 with by_kind set, 2 with counts[slot] set (the DP), 1 when nothing fits, -1
** when memory runs out.
*/
static int fallback (int nk, const int *kinds, const double *km, const double *kt,
                     const double *kh, const stage_cost *sc_cost, double w, unsigned modes,
                     double room, int n, const int *slot, const int *kind_of,
                     const double *a, const double *r, scratch *sc, unsigned char *chosen,
                     unsigned char *picked, int by_kind[][ND_RECOMPUTE_COUNT],
                     int counts[][ND_RECOMPUTE_COUNT]) {
  double caps[ND_RECOMPUTE_COUNT * MAX_KINDS], best = HUGE_VAL;
  int ncaps = working_caps(nk, km, w, modes, caps), c, md, i, got = 1, use_dp = 0;
  int cand[MAX_KINDS][ND_RECOMPUTE_COUNT];
  double *ap;
  for (c = 0; c < ncaps && !use_dp; c++) {
    unsigned kmodes[MAX_KINDS];
    int rc;
    capped_modes(nk, km, w, modes, caps[c], kmodes);
    double cost = HUGE_VAL;
    rc = choose_counts(nk, kinds, km, kt, kh, kmodes, room - caps[c], sc_cost, cand, &cost);
    if (rc < 0) use_dp = 1;  /* fronts too large */
    else if (rc == 0 && cost < best) {
      best = cost;
      memcpy(by_kind, cand, (size_t)nk * sizeof cand[0]);
      got = 0;
    }
  }
  if (!use_dp) return got;
  /* the bucket DP, layer by layer, under each cap */
  if (ensure_scratch(sc, n) != 0) return -1;
  ap = (double *)malloc(3 * (size_t)n * sizeof *ap);
  if (!ap) return -1;
  best = HUGE_VAL;
  got = 1;
  for (c = 0; c < ncaps; c++) {
    unsigned kmodes[MAX_KINDS];
    double cost, mem = 0.0, rec = 0.0, hide = 0.0;
    int local_of[ND_MAX_LAYERS];
    capped_modes(nk, km, w, modes, caps[c], kmodes);
    for (i = 0; i < n; i++) {
      int local = 0;
      while (local < nk - 1 && kind_of[local] != slot[i]) local++;
      local_of[i] = local;
      for (md = 0; md < ND_RECOMPUTE_COUNT; md++)
        ap[i * 3 + md] = kmodes[local] & ND_RECOMPUTE_MASK(md) ? a[i * 3 + md] : HUGE_VAL;
    }
    if (knapsack(n, 3, ap, r, room - caps[c], sc, picked) != 0) continue;
    for (i = 0; i < n; i++) {
      mem += a[i * 3 + picked[i]];
      rec += r[i * 3 + picked[i]];
      hide += kh[3 * local_of[i] + picked[i]];
    }
    cost = cost_of(sc_cost, mem, rec, hide, 0.0);
    if (cost < best) { best = cost; memcpy(chosen, picked, (size_t)n); got = 2; }
  }
  free(ap);
  if (got == 2) for (i = 0; i < n; i++) counts[slot[i]][chosen[i]]++;
  return got;
}

/*
** Selective variants: the options of one layer kind are keep everything, full, and
** selective with every set of switches that drops something; the Pareto front of their
** (bytes, seconds) survives, keep-everything and full always kept.
*/
#define MAX_OPTIONS (2 + ND_OP_MASKS)
/* The DP costs layers x options x buckets (8 per layer) per working-set cap: past this many
   layers on a stage (no model stacks that many on one) the stage keeps one set of switches. */
#define VARIANTS_MAX_LAYERS 256

typedef struct option { double bytes, time; unsigned char mode, mask; } option;

static int by_bytes (const void *x, const void *y) {
  const option *a = (const option *)x, *b = (const option *)y;
  if (a->bytes != b->bytes) return a->bytes < b->bytes ? -1 : 1;
  return a->time < b->time ? -1 : a->time > b->time ? 1 : 0;
}

static int kind_options (const nd_layer_estimate *le, unsigned modes, option *out) {
  option all[MAX_OPTIONS];
  int n = 0, k = 0, i, mask;
  double best = HUGE_VAL;
  for (mask = 1; mask < ND_OP_MASKS && (modes & ND_RECOMPUTE_MASK(ND_RECOMPUTE_SELECTIVE)); mask++)
    /* (alt_mm is torchtitan's model-wide op policy, not a switch a layer can take alone) */
    if (!(mask & ND_OP_BIT(ND_OP_ALT_MM))
        && le->sel_activations[mask] < le->activations[ND_RECOMPUTE_NONE]) {
      all[n].bytes = le->sel_activations[mask];
      all[n].time = le->sel_recompute_s[mask];
      all[n].mode = ND_RECOMPUTE_SELECTIVE;
      all[n++].mask = (unsigned char)mask;
    }
  qsort(all, (size_t)n, sizeof all[0], by_bytes);
  if (modes & ND_RECOMPUTE_MASK(ND_RECOMPUTE_FULL)) {
    option f = {le->activations[ND_RECOMPUTE_FULL], le->recompute_s[ND_RECOMPUTE_FULL],
                ND_RECOMPUTE_FULL, 0};
    out[k++] = f;
    best = f.time;
  }
  for (i = 0; i < n; i++)  /* fewest bytes first: a point survives when it is faster */
    if (all[i].time < best && (k == 0 || all[i].bytes > out[k - 1].bytes)) {
      out[k++] = all[i];
      best = all[i].time;
    }
  if (modes & ND_RECOMPUTE_MASK(ND_RECOMPUTE_NONE)) {
    option none = {le->activations[ND_RECOMPUTE_NONE], 0.0, ND_RECOMPUTE_NONE, 0};
    out[k++] = none;
  }
  return k;
}

/* A planner's tables kept between runs (nd_recompute_workspace_new): the run's workspace,
   the bucket DP's scratch, which grows to the longest stage planned, and the tables of the
   switch-set variants and of the offload check, allocated on first use. */
struct nd_recompute_ws {
  workspace ws;
  scratch sc;
  option (*opts)[MAX_OPTIONS];  /* per kind, with variants */
  int *nopts;
  unsigned char *picked;
  double *va, *vr;
  nd_estimate *alt;             /* a whole-model mode against the plan (offload share) */
  nd_layer_plan uniform;        /* that mode, per layer */
  nd_price_cache *pc;           /* the caller's layer prices (nd_recompute_ws_cache), or NULL */
};

nd_recompute_ws *nd_recompute_ws_new (void) {
  nd_recompute_ws *w = (nd_recompute_ws *)malloc(sizeof *w);
  if (w) {
    memset(&w->sc, 0, sizeof w->sc);
    w->opts = NULL; w->nopts = NULL; w->picked = NULL; w->va = w->vr = NULL; w->alt = NULL;
    w->pc = NULL;
  }
  return w;
}

void nd_recompute_ws_cache (nd_recompute_ws *w, nd_price_cache *pc) { w->pc = pc; }

void nd_recompute_ws_free (nd_recompute_ws *w) {
  if (!w) return;
  free(w->sc.best); free(w->sc.next); free(w->sc.choice);
  free(w->opts); free(w->nopts); free(w->picked); free(w->va); free(w->vr); free(w->alt);
  free(w);
}

/* The variants' tables, on first use; 0, or -1 when out of memory. */
static int ensure_variants (nd_recompute_ws *w) {
  if (!w->opts) w->opts = (option (*)[MAX_OPTIONS])malloc(MAX_KINDS * sizeof *w->opts);
  if (!w->nopts) w->nopts = (int *)malloc(MAX_KINDS * sizeof *w->nopts);
  if (!w->picked) w->picked = (unsigned char *)malloc(ND_MAX_LAYERS);
  if (!w->va) w->va = (double *)malloc(MAX_OPTIONS * (size_t)ND_MAX_LAYERS * sizeof *w->va);
  if (!w->vr) w->vr = (double *)malloc(MAX_OPTIONS * (size_t)ND_MAX_LAYERS * sizeof *w->vr);
  return w->opts && w->nopts && w->picked && w->va && w->vr ? 0 : -1;
}

int nd_recompute_plan_run (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                           nd_strategy *st, const nd_costs *costs, double budget,
                           unsigned modes, nd_recompute_plan *plan, nd_estimate *out,
                           char *err, size_t errlen) {
  nd_recompute_ws *w = nd_recompute_ws_new();
  int rc;
  if (!w) {
    snprintf(err, errlen, "recompute: out of memory");
    return -1;
  }
  rc = nd_recompute_plan_run_ws(m, dev, job, st, costs, budget, modes, plan, out, w, err,
                                errlen);
  nd_recompute_ws_free(w);
  return rc;
}

/* One planning run (nd_recompute_plan_run_ws): what it was given, the strategy it builds
   and the ends of each stage's line. */
typedef struct plan_run {
  const nd_model_spec *m;
  const nd_device *dev;
  const nd_job *job;
  const nd_strategy *st;     /* as given */
  const nd_costs *costs;
  double budget;
  unsigned modes;
  nd_recompute_plan *plan;
  nd_estimate *out;
  char *err;
  size_t errlen;
  nd_recompute_ws *w;
  int variants, offload_ok, p, dual, total;
  double *full_peak, *none_peak, *inflight, *base_compute;  /* per stage */
  nd_strategy trial;         /* the plan being built */
} plan_run;

/* What planning stage s carries from one step to the next. */
typedef struct stage_plan {
  int s;
  double w, fixed, least, work_least, wd, saved;
  int copies_priced, use_variants;
  int counts[MAX_KINDS][ND_RECOMPUTE_COUNT], slot[ND_MAX_LAYERS];
  int off_left[MAX_KINDS];
  double raw_bytes[MAX_KINDS];
} stage_plan;

/*
** Every layer fully recomputed, then every layer kept: the two ends of each stage's line
** (peaks, micro-batches in flight, the compute that hides offload); trial is left with
** every layer full, per layer.
*/
static int plan_ends (plan_run *pr) {
  workspace *ws = &pr->w->ws;
  nd_estimate *out = pr->out;
  nd_layer_plan *pl;
  int s;
  pr->trial = *pr->st;
  pr->trial.layers = NULL;
  pr->trial.recompute = ND_RECOMPUTE_FULL;
  if (nd_estimate_run_cached(pr->m, pr->dev, pr->job, &pr->trial, pr->costs, pr->w->pc, out,
                      pr->err, pr->errlen) != 0) return -1;
  pr->p = out->stages;
  ws->kc.n = 0;
  if (pr->variants) {
    if (ensure_variants(pr->w) != 0) {
      snprintf(pr->err, pr->errlen, "recompute: out of memory");
      return -1;
    }
    memset(pr->w->nopts, 0, MAX_KINDS * sizeof *pr->w->nopts);
  }
  pr->full_peak = ws->per_stage;
  pr->none_peak = pr->full_peak + pr->p;
  pr->inflight = pr->none_peak + pr->p;
  pr->base_compute = pr->inflight + pr->p;
  for (s = 0; s < pr->p; s++) {
    pr->full_peak[s] = out->stage[s].peak;
    pr->inflight[s] = out->stage[s].inflight;
  }
  /* trial as the all-full estimate resolved it: resolving is idempotent, so it prices
     all-none as a fresh copy would */
  pr->trial.recompute = ND_RECOMPUTE_NONE;
  if (nd_estimate_run_cached(pr->m, pr->dev, pr->job, &pr->trial, pr->costs, pr->w->pc, out,
                      pr->err, pr->errlen) != 0) return -1;
  for (s = 0; s < pr->p; s++) {
    pr->none_peak[s] = out->stage[s].peak;
    pr->base_compute[s] = out->stage[s].fwd_s + out->stage[s].bwd_s;  /* what hides offload */
  }
  pr->dual = pr->trial.schedule == ND_SCHED_DUALPIPE;
  pl = &pr->plan->layers;  /* the caller's storage: the plan is built there */
  memset(pl->recompute, ND_RECOMPUTE_FULL, (size_t)pr->total);
  memset(pl->offload, 0, (size_t)pr->total);
  memset(pl->ops, 0, (size_t)pr->total);
  pr->trial.layers = pl;
  return 0;
}

/*
** Stage s's line: its layers (ws->list) and their bytes and times per mode (ws->a, ws->r,
** a scaled by w), the bytes per kept byte w, what does not depend on the choice (fixed) and
** the least the stage can need (plan->stage_need).
*/
static int stage_line (plan_run *pr, stage_plan *sp) {
  workspace *ws = &pr->w->ws;
  layer_list *list = &ws->list;
  double *a = ws->a, *r = ws->r;
  double sum_none = 0.0, sum_full = 0.0, work_full = 0.0, w;
  int i, s = sp->s, dual = pr->dual;
  /* a working set counts as estimate.c counts it: DualPipe's mean of two stages, and
     the allocator's slack on top of every live byte */
  sp->wd = (dual ? 0.5 : 1.0) * (1.0 + pr->costs->alloc_fragmentation);
  sp->least = sp->work_least = 0.0;
  list->n = 0;
  nd_stage_foreach(&pr->trial, (int)pr->m->num_layers, (int)pr->m->mtp_layers, s, collect, list);
  for (i = 0; i < list->n; i++) {
    /* priced from the strategy as given, resolved once per run (ws->priced) */
    const nd_layer_estimate *le = layer_costs(&ws->kc, pr->m, pr->dev, pr->job, pr->st,
                                              &ws->priced, pr->costs, pr->w->pc, list->layer[i],
                                              &sp->slot[i], pr->err, pr->errlen);
    int md;
    if (!le) return -1;
    for (md = 0; md < ND_RECOMPUTE_COUNT; md++) {
      a[i * 3 + md] = le->activations[md];
      r[i * 3 + md] = le->recompute_s[md];
    }
    sum_none += le->activations[ND_RECOMPUTE_NONE];
    sum_full += le->activations[ND_RECOMPUTE_FULL];
  }
  /* the all-full estimate's buffers hold its recompute working set (the largest layer
     rebuilt for the backward, estimate.c); the plan's own is added per choice below */
  for (i = 0; i < list->n; i++)
    if (sp->wd * (a[i * 3 + ND_RECOMPUTE_NONE] - a[i * 3 + ND_RECOMPUTE_FULL]) > work_full)
      work_full = sp->wd * (a[i * 3 + ND_RECOMPUTE_NONE] - a[i * 3 + ND_RECOMPUTE_FULL]);
  w = sum_none - sum_full > 0.0 ? (pr->none_peak[s] - (pr->full_peak[s] - work_full))
                                  / (sum_none - sum_full)
                                : pr->inflight[s];
  sp->w = w;
  sp->fixed = pr->full_peak[s] - work_full - w * sum_full;
  for (i = 0; i < list->n; i++) {
    int md, lo_md = -1;
    double lo = HUGE_VAL, raw[ND_RECOMPUTE_COUNT];
    for (md = 0; md < ND_RECOMPUTE_COUNT; md++) {
      raw[md] = a[i * 3 + md];
      a[i * 3 + md] *= w;
      if ((pr->modes & ND_RECOMPUTE_MASK(md)) && a[i * 3 + md] < lo) {
        lo = a[i * 3 + md];
        lo_md = md;
      }
    }
    if (pr->offload_ok && pr->inflight[s] > 1.0 && w > 0.0   /* offloaded: one micro-batch held */
        && a[i * 3 + ND_RECOMPUTE_NONE] * sp->wd / w < lo) {  /* reserved, as m_off */
      lo = a[i * 3 + ND_RECOMPUTE_NONE] * sp->wd / w;
      lo_md = ND_RECOMPUTE_NONE;  /* keeps everything: rebuilds nothing */
    }
    if (lo_md >= 0 && sp->wd * (raw[ND_RECOMPUTE_NONE] - raw[lo_md]) > sp->work_least)
      sp->work_least = sp->wd * (raw[ND_RECOMPUTE_NONE] - raw[lo_md]);
    sp->least += lo;
  }
  pr->plan->stage_need[s] = sp->fixed + sp->least + sp->work_least;
  if (dual) pr->plan->stage_need[pr->p - 1 - s] = pr->plan->stage_need[s];
  return 0;
}

/*
** How many layers of each kind take each mode (sp->counts) and are offloaded (off_left):
** exact fronts, or the bucket DP for very long stages. Returns 0, 1 when no choice fits the
** budget, or -1 when out of memory.
*/
static int stage_counts (plan_run *pr, stage_plan *sp) {
  workspace *ws = &pr->w->ws;
  layer_list *list = &ws->list;
  const double *a = ws->a, *r = ws->r;
  const nd_strategy *st = pr->st;
  const nd_costs *costs = pr->costs;
  const nd_device *dev = pr->dev;
  double w = sp->w, wd = sp->wd, fixed = sp->fixed, budget = pr->budget;
  unsigned modes = pr->modes;
  int s = sp->s, dual = pr->dual, i, k;
  int nk = 0, kinds[MAX_KINDS], got, kind_of[MAX_KINDS], by_kind[MAX_KINDS][ND_RECOMPUTE_COUNT];
  int offloaded[MAX_KINDS];
  double km[3 * MAX_KINDS], kt[3 * MAX_KINDS], kh[3 * MAX_KINDS];
  stage_cost cost = {0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  double m_off[MAX_KINDS];
  memset(sp->off_left, 0, sizeof sp->off_left);
  memset(sp->raw_bytes, 0, sizeof sp->raw_bytes);
  memset(sp->counts, 0, sizeof sp->counts);
  for (i = 0; i < list->n; i++) {
    int md, local = -1;
    for (k = 0; k < nk; k++) if (kind_of[k] == sp->slot[i]) local = k;
    if (local < 0) {
      local = nk++;
      kind_of[local] = sp->slot[i];
      kinds[local] = 0;
      for (md = 0; md < ND_RECOMPUTE_COUNT; md++) {
        km[3 * local + md] = a[i * 3 + md];
        kt[3 * local + md] = r[i * 3 + md];
        kh[3 * local + md] = r[i * 3 + md];
      }
      /* what hides host copies is compute: full's repeated forward without its traffic */
      kh[3 * local + ND_RECOMPUTE_FULL] = ws->kc.est[sp->slot[i]].forward_s;
    }
    kinds[local]++;
  }
  cost.d = dual ? 0.5 : 1.0;
  for (k = 0; k < nk; k++) m_off[k] = 0.0;
  if (st->offload > 0.0 && pr->inflight[s] > 1.0 && w > 0.0) {  /* copies the plan can hide */
    cost.offload = 1;
    cost.O = costs->offload_overlap;
    cost.k1 = 2.0 * st->offload * cost.d / (dev->host_link.bandwidth * w);
    cost.k0 = cost.O * pr->base_compute[s] - 2.0 * dev->host_link.latency;
  }
  else if (pr->offload_ok && pr->inflight[s] > 1.0 && w > 0.0) {
    /* an offloaded layer holds one micro-batch on the device: d * its bytes, reserved
       with the allocator's fragmentation like every live byte (wd); its d * bytes are
       what crosses the host link out and back (k2 takes the fragmentation out again) */
    cost.offload = 1;
    cost.O = costs->offload_overlap;
    cost.k2 = 2.0 / (dev->host_link.bandwidth * (1.0 + costs->alloc_fragmentation));
    cost.lat2 = 2.0 * dev->host_link.latency;
    cost.k0 = cost.O * pr->base_compute[s];
    for (k = 0; k < nk; k++) m_off[k] = km[3 * k + ND_RECOMPUTE_NONE] * sp->wd / w;
  }
  sp->copies_priced = cost.offload;
  memset(offloaded, 0, sizeof offloaded);
  {
    /* the working set is what the heaviest (kind, mode) a plan uses rebuilds: each
       distinct amount is tried as a cap, the pairs rebuilding more left out and the
       amount reserved */
    double kept = 0.0, caps[ND_RECOMPUTE_COUNT * MAX_KINDS], c_best = HUGE_VAL;
    int ncaps = working_caps(nk, km, w / wd, modes, caps), c;
    for (k = 0; k < nk; k++) kept += kinds[k] * km[3 * k + ND_RECOMPUTE_NONE];
    got = 1;
    if (fixed + sp->least + sp->work_least > budget) ncaps = 0;
    else if ((modes & ND_RECOMPUTE_MASK(ND_RECOMPUTE_NONE)) && !(st->offload > 0.0)
             && fixed + kept <= budget) {  /* all kept fits: nothing is rebuilt */
      for (k = 0; k < nk; k++) {
        by_kind[k][ND_RECOMPUTE_NONE] = kinds[k];
        by_kind[k][ND_RECOMPUTE_SELECTIVE] = by_kind[k][ND_RECOMPUTE_FULL] = 0;
      }
      got = 0;
      ncaps = 0;
    }
    for (c = 0; c < ncaps; c++) {
      unsigned kmodes[MAX_KINDS];
      int alt[MAX_KINDS][ND_RECOMPUTE_COUNT], alt_off[MAX_KINDS], solved;
      double c_alt = HUGE_VAL;
      /* everything kept, no copies priced: the check above decided it did not fit */
      if (capped_modes(nk, km, w / wd, modes, caps[c], kmodes) && !(st->offload > 0.0)
          && !cost.offload) continue;
      memset(alt_off, 0, sizeof alt_off);
      solved = enumerate_counts(nk, kinds, km, kt, kh, kmodes, budget - fixed - caps[c], &cost,
                                m_off, alt, alt_off, &c_alt);
      if (solved < 0) { got = -1; break; }  /* too many combinations: the fallbacks */
      if (solved == 0 && c_alt < c_best) {
        c_best = c_alt;
        memcpy(by_kind, alt, sizeof alt);
        memcpy(offloaded, alt_off, sizeof alt_off);
        got = 0;
      }
    }
    if (got < 0) got = fallback(nk, kinds, km, kt, kh, &cost, w / wd, modes, budget - fixed,
                                list->n, sp->slot, kind_of, a, r, &pr->w->sc, ws->chosen, ws->picked3,
                                by_kind, sp->counts);
  }
  if (got == 0) {
    for (k = 0; k < nk; k++) {
      for (i = 0; i < ND_RECOMPUTE_COUNT; i++) sp->counts[kind_of[k]][i] = by_kind[k][i];
      sp->off_left[kind_of[k]] = offloaded[k];
      sp->raw_bytes[kind_of[k]] = w > 0.0 ? km[3 * k + ND_RECOMPUTE_NONE] / w : 0.0;
    }
  }
  else if (got == 2) got = 0;  /* the bucket DP wrote counts[] itself */
  else if (got < 0) return -1;
  return got != 0;
}

/*
** The variants: every layer one option of its kind's front (switch sets too), by the
** bucket DP; kept (sp->use_variants, the options in ws->chosen) when it beats the counts
** (which offer one set of switches). The working set is what the heaviest option used
** rebuilds: each distinct amount t is tried as a cap, with the options rebuilding more left
** out and t reserved. 0, or -1 when out of memory.
*/
static int stage_variants (plan_run *pr, stage_plan *sp) {
  nd_recompute_ws *rw = pr->w;
  workspace *ws = &rw->ws;
  layer_list *list = &ws->list;
  kind_costs *kc = &ws->kc;
  option (*opts)[MAX_OPTIONS] = rw->opts;
  int *nopts = rw->nopts, *slot = sp->slot;
  double *va = rw->va, *vr = rw->vr, wd = sp->wd;
  double plain = 0.0, caps[MAX_KINDS * MAX_OPTIONS];
  int i, k, md, ncaps = 0, c;
  for (k = 0; k < kc->n; k++)
    for (md = 0; md < ND_RECOMPUTE_COUNT; md++)
      plain += sp->counts[k][md] * kc->est[k].recompute_s[md];
  for (i = 0; i < list->n; i++) {
    int o;
    if (nopts[slot[i]] == 0)
      nopts[slot[i]] = kind_options(&kc->est[slot[i]], pr->modes, opts[slot[i]]);
    for (o = 0; o < nopts[slot[i]]; o++)
      ncaps = add_cap(caps, ncaps, MAX_KINDS * MAX_OPTIONS,
                      wd * (kc->est[slot[i]].activations[ND_RECOMPUTE_NONE]
                            - opts[slot[i]][o].bytes));
  }
  if (ensure_scratch(&rw->sc, list->n) != 0) return -1;
  for (c = 0; c < ncaps; c++) {
    double with = 0.0;
    for (i = 0; i < list->n; i++) {
      int o;
      for (o = 0; o < MAX_OPTIONS; o++) {
        const option *op = &opts[slot[i]][o];
        int offered = o < nopts[slot[i]]
          && wd * (kc->est[slot[i]].activations[ND_RECOMPUTE_NONE] - op->bytes) <= caps[c];
        va[i * MAX_OPTIONS + o] = offered ? op->bytes * sp->w : HUGE_VAL;
        vr[i * MAX_OPTIONS + o] = offered ? op->time : 0.0;
      }
    }
    if (knapsack(list->n, MAX_OPTIONS, va, vr, pr->budget - sp->fixed - caps[c], &rw->sc,
                 rw->picked) != 0)
      continue;
    for (i = 0; i < list->n; i++) with += vr[i * MAX_OPTIONS + rw->picked[i]];
    if (with < plain * (1.0 - 1e-12)) {
      plain = with;
      sp->use_variants = 1;
      memcpy(ws->chosen, rw->picked, (size_t)list->n);
    }
  }
  for (i = 0; sp->use_variants && i < list->n; i++)  /* the winner's times, for the order */
    vr[i * MAX_OPTIONS + ws->chosen[i]] = opts[slot[i]][ws->chosen[i]].time;
  return 0;
}

/* Stage s's choice onto its layers of trial (and plan's offload bytes and savings). */
static void stage_assign (plan_run *pr, stage_plan *sp) {
  nd_recompute_ws *rw = pr->w;
  workspace *ws = &rw->ws;
  layer_list *list = &ws->list;
  const double *r = ws->r;
  unsigned char *chosen = ws->chosen;
  nd_strategy *trial = &pr->trial;
  nd_recompute_plan *plan = pr->plan;
  nd_layer_plan *pl = &plan->layers;  /* trial's plan */
  int i, k, *slot = sp->slot, s = sp->s, p = pr->p;
  sp->saved = 0.0;
  if (sp->use_variants) {
    const double *vr = rw->vr;
    option (*opts)[MAX_OPTIONS] = rw->opts;
    /* within a kind the layers are alike: the slowest options go on the first layers */
    for (i = 0; i < list->n; i++) {
      int j, best_j = i, layer = list->layer[i];
      const option *op;
      for (j = i + 1; j < list->n; j++)
        if (slot[j] == slot[i] && vr[j * MAX_OPTIONS + chosen[j]]
                                  > vr[best_j * MAX_OPTIONS + chosen[best_j]]) best_j = j;
      if (best_j != i) {
        unsigned char t = chosen[i];
        chosen[i] = chosen[best_j];
        chosen[best_j] = t;
      }
      op = &opts[slot[i]][chosen[i]];
      pl->recompute[layer] = op->mode;
      pl->ops[layer] = op->mode == ND_RECOMPUTE_SELECTIVE ? op->mask : 0;
      pl->offload[layer] = 0;
      plan->offload_bytes[layer] = 0.0;
      sp->saved += r[i * 3 + ND_RECOMPUTE_FULL] - op->time;
    }
  }
  /* the chosen counts per kind: heavier recompute on the stage's first layers, then the
     offloaded ones (their activations wait longest), then selective, then kept */
  else for (i = 0; i < list->n; i++) {
    int md, off = 0, layer = list->layer[i];
    k = slot[i];
    if (sp->counts[k][ND_RECOMPUTE_FULL] > 0) md = ND_RECOMPUTE_FULL;
    else if (sp->off_left[k] > 0) { md = ND_RECOMPUTE_NONE; off = 1; sp->off_left[k]--; }
    else if (sp->counts[k][ND_RECOMPUTE_SELECTIVE] > 0) md = ND_RECOMPUTE_SELECTIVE;
    else md = ND_RECOMPUTE_NONE;
    sp->counts[k][md]--;
    pl->recompute[layer] = (unsigned char)md;
    pl->offload[layer] = (unsigned char)off;
    plan->offload_bytes[layer] = off ? sp->raw_bytes[k] : 0.0;
    sp->saved += r[i * 3 + ND_RECOMPUTE_FULL] - r[i * 3 + md];
  }
  plan->stage_savings[s] = sp->saved * trial->mb * (pr->dual ? 0.5 : 1.0);
  if (pr->dual) plan->stage_savings[p - 1 - s] = plan->stage_savings[s];
}

/* Plans stage s: 0, or -1 with the reason in err (over memory: plan->failed_stage). */
static int plan_stage (plan_run *pr, stage_plan *sp, int s) {
  int failed;
  sp->s = s;
  sp->copies_priced = sp->use_variants = 0;
  if (stage_line(pr, sp) != 0) return -1;
  failed = stage_counts(pr, sp);
  if (failed < 0) {
    snprintf(pr->err, pr->errlen, "recompute: out of memory");
    return -1;
  }
  if (failed) {
    pr->plan->failed_stage = s;
    snprintf(pr->err, pr->errlen, "over memory: stage %d needs %.2f GiB with its least-memory "
             "recompute, budget %.2f GiB", s, gib(sp->fixed + sp->least + sp->work_least),
             gib(pr->budget));
    return -1;
  }
  if (pr->variants && !sp->copies_priced && pr->w->ws.list.n <= VARIANTS_MAX_LAYERS
      && stage_variants(pr, sp) != 0) {
    snprintf(pr->err, pr->errlen, "recompute: out of memory");
    return -1;
  }
  stage_assign(pr, sp);
  return 0;
}

/*
** The plan priced on the strategy as given, checked against the budget; with an offload
** share, a whole-model mode that fits and runs faster instead. Leaves the winner in trial.
*/
static int plan_finish (plan_run *pr) {
  const nd_strategy *st = pr->st;
  nd_estimate *out = pr->out;
  nd_recompute_plan *plan = pr->plan;
  double budget = pr->budget;
  int s, p = pr->p;
  /* the plan on the strategy as given (resolving twice would pin an interleaved layout) */
  pr->trial = *st;
  pr->trial.layers = &plan->layers;
  if (nd_estimate_run_cached(pr->m, pr->dev, pr->job, &pr->trial, pr->costs, pr->w->pc, out,
                      pr->err, pr->errlen) != 0) return -1;
  if (out->peak > budget * (1.0 + 1e-9)) {  /* the linear model above is exact: a bug */
    snprintf(pr->err, pr->errlen, "recompute: internal error, plan peaks at %.3f GiB over a "
             "%.3f GiB budget", gib(out->peak), gib(budget));
    return -1;
  }
  /* With an offload share the stage time also holds the exposed host copies, which the
     knapsack (recompute time only) does not see: a whole-model mode that fits and runs
     faster wins (fuzzing found plans slower than full recompute). */
  if (st->offload > 0.0) {
    nd_estimate *alt;
    double *full_rec = pr->inflight;  /* reused: per-stage recompute seconds under all-full */
    int md, priced_full = 0;
    if (!pr->w->alt) pr->w->alt = (nd_estimate *)malloc(sizeof *pr->w->alt);
    if (!(alt = pr->w->alt)) {
      snprintf(pr->err, pr->errlen, "recompute: out of memory");
      return -1;
    }
    for (md = ND_RECOMPUTE_FULL; md >= 0; md--) {  /* full first: savings are against it */
      nd_strategy uniform = *st;
      nd_layer_plan *u = &pr->w->uniform;  /* the workspace's: kept in plan->layers if it wins */
      memset(u->recompute, md, (size_t)pr->total);
      /* one mode for every layer: none of the given per-layer switch sets or offload */
      memset(u->ops, 0, (size_t)pr->total);
      memset(u->offload, 0, (size_t)pr->total);
      uniform.layers = u;
      if (nd_estimate_run_cached(pr->m, pr->dev, pr->job, &uniform, pr->costs, pr->w->pc, alt,
                          pr->err, pr->errlen) != 0) continue;
      if (md == ND_RECOMPUTE_FULL) {
        for (s = 0; s < p; s++) full_rec[s] = alt->stage[s].recompute_s;
        priced_full = 1;
      }
      if ((pr->modes & ND_RECOMPUTE_MASK(md)) && alt->peak <= budget
          && alt->step_time < out->step_time) {
        memcpy(out, alt, sizeof *out);
        nd_strategy_own_plan(&pr->trial, &uniform, &plan->layers, pr->total);
        for (s = 0; s < p; s++)
          plan->stage_savings[s] = priced_full
            ? (full_rec[s] - alt->stage[s].recompute_s) * pr->trial.mb : 0.0;
      }
    }
    pr->err[0] = '\0';
  }
  return 0;
}

int nd_recompute_plan_run_ws (const nd_model_spec *m, const nd_device *dev,
                              const nd_job *job, nd_strategy *st, const nd_costs *costs,
                              double budget, unsigned modes, nd_recompute_plan *plan,
                              nd_estimate *out, nd_recompute_ws *reuse, char *err,
                              size_t errlen) {
  plan_run pr;
  stage_plan sp;
  int s, stages_to_plan, total = (int)(m->num_layers + m->mtp_layers);
  modes &= ND_RECOMPUTE_ALL | ND_PLAN_OFFLOAD | ND_PLAN_VARIANTS;
  if ((modes & ND_RECOMPUTE_ALL) == 0) {
    snprintf(err, errlen, "recompute: no recompute mode allowed");
    return -1;
  }
  pr.m = m; pr.dev = dev; pr.job = job; pr.st = st; pr.costs = costs; pr.budget = budget;
  pr.modes = modes; pr.plan = plan; pr.out = out; pr.err = err; pr.errlen = errlen;
  pr.w = reuse;
  pr.total = total;
  pr.variants = (modes & ND_PLAN_VARIANTS) && (modes & ND_RECOMPUTE_MASK(ND_RECOMPUTE_SELECTIVE));
  /* layers offloaded one by one only where no strategy-wide share is set */
  pr.offload_ok = (modes & ND_PLAN_OFFLOAD) && !(st->offload > 0.0);
  /* the model's layers only: this runs once per searched candidate */
  memset(plan->offload_bytes, 0, (size_t)total * sizeof plan->offload_bytes[0]);
  plan->failed_stage = -1;
  if (plan_ends(&pr) != 0) return -1;
  /* DualPipe: devices s and p-1-s hold the same layers; plan one, the other follows */
  stages_to_plan = pr.dual ? pr.p / 2 : pr.p;
  for (s = 0; s < stages_to_plan; s++)
    if (plan_stage(&pr, &sp, s) != 0) return -1;
  if (plan_finish(&pr) != 0) return -1;
  *st = pr.trial;
  return 0;
}
