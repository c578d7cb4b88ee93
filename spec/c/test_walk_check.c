/*
** test_walk_check.c -- the walk's verdict on each candidate against nd_strategy_check and
** nd_strategy_resolve, over a grid of every degree (tp, pp, vpp, cp, ep, etp, mbs, ZeRO,
** SP) on a small MoE and a small dense model. Each candidate is walked alone (every
** dimension pinned, nothing pruned), so the counts say what the walk did with it:
**  - priced: check admits it and resolve succeeds, deriving the walk's dp and mb;
**  - refused under a label other than "degree out of bounds": check returns that code, and
**    resolve fails;
**  - refused as out of bounds while check admits it: a degree is over a bound the search
**    states before its loops (nd_search_bounds_of), which are narrower than what runs;
**  - not walked at all (the loops' ranges skip it, e.g. sp on at tp 1), or walked in
**    several layout variants (layers that do not divide into pp x vpp chunks): not
**    asserted.
** The grid must reach every label the walk and check share, so the test cannot pass by
** exercising none of them.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/search.h"
#include "ndplan/strategy.h"

#include "fixtures.h"

static void pin (nd_dim_set *s, int v) {
  s->is_auto = 0;
  s->n = 1;
  s->v[0] = v;
}

typedef struct grid_point { int tp, pp, vpp, cp, ep, etp, mbs, zero, sp; } grid_point;

static void load (nd_strategy *st, const grid_point *g) {
  nd_strategy_init(st);
  st->tp = g->tp; st->pp = g->pp; st->vpp = g->vpp; st->cp = g->cp; st->ep = g->ep;
  st->etp = g->etp; st->mbs = g->mbs; st->zero = g->zero; st->sp = g->sp;
}

static int over_bounds (const nd_search_bounds *b, const grid_point *g) {
  return g->tp > b->tp || g->pp > b->pp || g->vpp > b->vpp || g->cp > b->cp || g->ep > b->ep
      || g->etp > b->etp || g->mbs > b->mbs;
}

/* Walks one candidate: -1 priced, a refusal code, or -2 not walked. */
static int walk_one (const nd_model_spec *m, const nd_device *d, const nd_job *job,
                     const grid_point *g, nd_search_counts *c, nd_search_bounds *b) {
  nd_search_params p;
  nd_costs costs;
  char err[256];
  int k;
  nd_search_params_init(&p);
  pin(&p.dim[ND_DIM_TP], g->tp); pin(&p.dim[ND_DIM_PP], g->pp); pin(&p.dim[ND_DIM_VPP], g->vpp);
  pin(&p.dim[ND_DIM_CP], g->cp); pin(&p.dim[ND_DIM_EP], g->ep); pin(&p.dim[ND_DIM_ETP], g->etp);
  pin(&p.dim[ND_DIM_MBS], g->mbs); pin(&p.dim[ND_DIM_ZERO], g->zero);
  pin(&p.dim[ND_DIM_SP], g->sp);
  p.budget = 1e15;  /* nothing over memory */
  p.exhaustive = 1;
  nd_costs_init(&costs);
  nd_search_bounds_of(&p, m, job, b);  /* what the search states for this space */
  if (nd_search_run(&p, m, d, job, &costs, NULL, c, err, sizeof err) != ND_SEARCH_OK) {
    CHECK(0, "the walk failed: %s", err);
    return -2;
  }
  if (c->tested != 1) return -2;  /* not walked, or walked in several layouts */
  if (c->priced == 1) return -1;
  for (k = 0; k < ND_REFUSE_COUNT; k++)
    if (c->refused[k]) return k;
  CHECK(0, "a tested candidate neither priced nor refused");
  return -2;
}

static void check_grid (const nd_model_spec *m, const nd_device *d, const nd_job *job,
                        const char *what, int want_labels) {
  static const int tps[] = {1, 2, 3, 4, 8, 16}, pps[] = {1, 2, 3, 4}, vpps[] = {1, 2, 3},
                   cps[] = {1, 2, 3}, eps[] = {1, 2, 3, 4, 8}, etps[] = {1, 2},
                   mbss[] = {1, 2, 3}, zeros[] = {0, 1, 3};
  nd_search_bounds b;
  int a, i, j, k, l, e, f, h, s, seen = 0, priced = 0;
#define N(x) (int)(sizeof x / sizeof x[0])
  for (a = 0; a < N(tps); a++) for (i = 0; i < N(pps); i++) for (j = 0; j < N(vpps); j++)
  for (k = 0; k < N(cps); k++) for (l = 0; l < N(eps); l++) for (e = 0; e < N(etps); e++)
  for (f = 0; f < N(mbss); f++) for (h = 0; h < N(zeros); h++) for (s = 0; s < 2; s++) {
    grid_point g;
    nd_search_counts c;
    nd_strategy st, out;
    char err[256];
    int walk, chk, res;
    g.tp = tps[a]; g.pp = pps[i]; g.vpp = vpps[j]; g.cp = cps[k]; g.ep = eps[l];
    g.etp = etps[e]; g.mbs = mbss[f]; g.zero = zeros[h]; g.sp = s;
    walk = walk_one(m, d, job, &g, &c, &b);
    if (walk == -2) continue;
    load(&st, &g);
    err[0] = '\0';
    chk = nd_strategy_check(&st, m, job, err, sizeof err);
    load(&st, &g);
    res = nd_strategy_resolve_to(&st, m, job, &out, err, sizeof err);
    CHECK((res == 0) == (chk < 0), "%s tp%d pp%d vpp%d cp%d ep%d etp%d mbs%d: resolve %d, "
          "check %d", what, g.tp, g.pp, g.vpp, g.cp, g.ep, g.etp, g.mbs, res, chk);
    if (walk == -1) {
      priced++;
      CHECK(chk < 0, "%s tp%d pp%d vpp%d cp%d ep%d etp%d mbs%d z%d sp%d: priced by the walk, "
            "refused by check (%d): %s", what, g.tp, g.pp, g.vpp, g.cp, g.ep, g.etp, g.mbs,
            g.zero, g.sp, chk, err);
      CHECK(res != 0 || out.dp == job->devices / (g.tp * g.pp * g.cp),
            "%s: resolved dp %d", what, out.dp);
    } else if (walk != ND_REFUSE_BOUNDS) {
      seen |= 1 << walk;
      CHECK(chk == walk, "%s tp%d pp%d vpp%d cp%d ep%d etp%d mbs%d z%d sp%d: the walk says '%s', "
            "check %d", what, g.tp, g.pp, g.vpp, g.cp, g.ep, g.etp, g.mbs, g.zero, g.sp,
            nd_refusal_label((nd_refusal)walk), chk);
    } else if (chk < 0) {
      CHECK(over_bounds(&b, &g), "%s tp%d pp%d vpp%d cp%d ep%d etp%d mbs%d: out of bounds in "
            "the walk, within every stated bound, and check admits it", what, g.tp, g.pp, g.vpp,
            g.cp, g.ep, g.etp, g.mbs);
    }
  }
#undef N
  CHECK(priced > 100, "%s: %d priced", what, priced);
  CHECK((seen & want_labels) == want_labels, "%s: labels reached %#x, expected %#x", what,
        (unsigned)seen, (unsigned)want_labels);
}

int main (void) {
  nd_model_spec *moe = (nd_model_spec *)malloc(sizeof *moe);
  nd_model_spec *dense = (nd_model_spec *)malloc(sizeof *dense);
  nd_device d;
  nd_job job = {16, 48, 4096};
  if (!moe || !dense) return 1;
  fixture_h100(&d);
  /* 8 layers, 16 heads (4 KV), 8 experts of width 1000 */
  nd_model_init(moe);
  moe->hidden_size = 1024; moe->num_layers = 8; moe->num_heads = 16; moe->num_kv_heads = 4;
  moe->head_dim = 64; moe->vocab_size = 32000;
  moe->num_experts = 8; moe->top_k = 2; moe->moe_ffn_size = 1000;
  nd_model_default_stack(moe);
  check_grid(moe, &d, &job, "moe", (1 << ND_REFUSE_EP_OVER) | (1 << ND_REFUSE_SCHEDULE)
                                   | (1 << ND_REFUSE_SP));
  /* 12 layers, 8 heads (8 KV), dense */
  nd_model_init(dense);
  dense->hidden_size = 1024; dense->num_layers = 12; dense->num_heads = 8;
  dense->num_kv_heads = 8; dense->head_dim = 128; dense->ffn_size = 4096;
  dense->vocab_size = 32000;
  nd_model_default_stack(dense);
  check_grid(dense, &d, &job, "dense", 1 << ND_REFUSE_SCHEDULE);
  free(moe);
  free(dense);
  if (failures) fprintf(stderr, "test_walk_check: %d failure(s)\n", failures);
  else printf("test_walk_check: all passed\n");
  return failures ? 1 : 0;
}
