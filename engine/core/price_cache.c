/*
** price_cache.c -- the layer kinds' prices kept between estimator calls (nd_price_cache):
** by the strategy's key, a few entries each holding every kind's price, and each kind's
** mixer apart from the experts' degrees.
*/
#include <stdlib.h>
#include <string.h>

#include "estimate_ctx.h"

/* What a kind's price reads of the strategy (price_kind and setup's fields it uses): the
   degrees of the layer's own groups (tp, cp, ep, etp; placed independently of dp and pp),
   the tokens per rank (mbs), SP, the recipe and ZeRO's gather widths (nd_recipe_widths_of)
   and the switches. dp, pp, vpp, the layout, the schedule and the recompute modes are
   read only by the stage sums. */
typedef struct price_key {
  int tp, cp, mbs, ep, etp, sp, zero, precision, flash, tp_overlap, param_gather;
  unsigned ops;
} price_key;

#define CACHE_WAYS 4  /* entries of a set, replaced least recently used first */

typedef struct price_entry {
  price_key key;
  unsigned long long used;   /* the cache's clock at its last use; 0: empty */
  layer_cost *kind;          /* its kinds' prices (count of them) */
} price_entry;

/*
** A kind's mixer (attention, Mamba, DSA's indexer): what price_kind holds after pricing it,
** the same under every ep and etp (the MLP's alone read them), so the kinds of a MoE model
** whose strategies differ in those only price it once: the search's bounds price each
** (tp, cp, mbs, sp) at every (ep, etp) pair (DeepSeek-V3 on 2,048 H800 with three recipes
** and HSDP: 58,000 groups, the mixers 99 M of their 439 M instructions).
*/
typedef struct mixer_memo {
  int held;                  /* the key below priced it */
  price_key key;             /* the strategy's, ep and etp 0 */
  layer_cost lc;             /* price_kind's sums after the mixer, from zero */
  act_parts a;
} mixer_memo;

struct nd_price_cache {
  const nd_model_spec *m;    /* what the entries were priced for */
  const nd_device *dev;
  const nd_job *job;
  const nd_costs *costs;
  int sets, count;           /* sets of CACHE_WAYS entries; kinds per entry */
  unsigned long long clock;
  price_entry *e;            /* sets x CACHE_WAYS */
  layer_cost *prices;        /* sets x CACHE_WAYS x count */
  mixer_memo *mixer;         /* count of them, by kind slot (NULL: none kept) */
};

/* The key of st's prices (nd_price_cache_use), ep and etp 0 without with_experts. */
static void price_key_of (const nd_strategy *st, int with_experts, price_key *k) {
  memset(k, 0, sizeof *k);
  k->tp = st->tp; k->cp = st->cp; k->mbs = st->mbs;
  if (with_experts) { k->ep = st->ep; k->etp = st->etp; }
  k->sp = st->sp; k->zero = st->zero; k->precision = (int)st->precision;
  k->flash = st->flash_attention; k->tp_overlap = st->tp_comm_overlap;
  k->param_gather = st->param_gather; k->ops = st->selective_ops;
}

int nd_price_cache_recall_mixer (const ctx *x, int slot, layer_cost *lc, act_parts *a) {
  const mixer_memo *mm;
  price_key k;
  if (!x->pc || !x->pc->mixer) return 0;
  mm = &x->pc->mixer[slot];
  price_key_of(x->st, 0, &k);
  if (!mm->held || memcmp(&mm->key, &k, sizeof k) != 0) return 0;
  *lc = mm->lc;
  *a = mm->a;
  return 1;
}

void nd_price_cache_keep_mixer (const ctx *x, int slot, const layer_cost *lc,
                                const act_parts *a) {
  mixer_memo *mm;
  if (!x->pc || !x->pc->mixer) return;
  mm = &x->pc->mixer[slot];
  price_key_of(x->st, 0, &mm->key);
  mm->lc = *lc;
  mm->a = *a;
  mm->held = 1;
}

nd_price_cache *nd_price_cache_new (int entries) {
  nd_price_cache *pc = (nd_price_cache *)calloc(1, sizeof *pc);
  int sets = 1;
  if (!pc) return NULL;
  while (sets * 2 * CACHE_WAYS <= entries) sets *= 2;
  pc->sets = sets;
  pc->e = (price_entry *)calloc((size_t)sets * CACHE_WAYS, sizeof *pc->e);
  if (!pc->e) { free(pc); return NULL; }
  return pc;
}

void nd_price_cache_free (nd_price_cache *pc) {
  if (!pc) return;
  free(pc->e);
  free(pc->prices);
  free(pc->mixer);
  free(pc);
}

void nd_price_cache_clear (nd_price_cache *pc) {
  if (!pc) return;
  pc->m = NULL; pc->dev = NULL; pc->job = NULL; pc->costs = NULL;  /* bound again on use */
}

int nd_price_cache_validated (const nd_price_cache *pc, const nd_costs *costs) {
  return pc && pc->prices && pc->costs == costs;
}

/* Empties the cache for another model, device, job or costs; 0, or -1 (no room). */
static int cache_bind (nd_price_cache *pc, const ctx *x) {
  int n = pc->sets * CACHE_WAYS, i, count = x->kinds->count;
  if (count != pc->count || !pc->prices) {
    free(pc->prices);
    free(pc->mixer);
    pc->prices = (layer_cost *)malloc((size_t)n * (size_t)count * sizeof *pc->prices);
    pc->mixer = (mixer_memo *)malloc((size_t)count * sizeof *pc->mixer);  /* (NULL: none) */
    pc->count = pc->prices ? count : 0;
    if (!pc->prices) return -1;
  }
  for (i = 0; pc->mixer && i < count; i++) pc->mixer[i].held = 0;
  for (i = 0; i < n; i++) {
    pc->e[i].used = 0;
    pc->e[i].kind = pc->prices + (size_t)i * count;
  }
  pc->m = x->m; pc->dev = x->dev; pc->job = x->job; pc->costs = x->c;
  return 0;
}

void nd_price_cache_use (ctx *x, nd_price_cache *pc) {
  const nd_strategy *st = x->st;
  price_key k;
  price_entry *set, *e;
  unsigned h = 2166136261u;
  const int *w;
  int i, n;
  if (!pc || x->kinds != &x->m->kinds || x->kinds->count <= 0) return;
  if ((pc->m != x->m || pc->dev != x->dev || pc->job != x->job || pc->costs != x->c
       || pc->count != x->kinds->count || !pc->prices) && cache_bind(pc, x) != 0)
    return;
  price_key_of(st, 1, &k);
  w = (const int *)&k;
  n = (int)(sizeof k / sizeof *w);
  for (i = 0; i < n; i++) h = (h ^ (unsigned)w[i]) * 16777619u;
  set = pc->e + (size_t)(h & (unsigned)(pc->sets - 1)) * CACHE_WAYS;
  e = set;
  for (i = 0; i < CACHE_WAYS; i++) {
    if (set[i].used && memcmp(&set[i].key, &k, sizeof k) == 0) { e = &set[i]; break; }
    if (set[i].used < e->used) e = &set[i];  /* the least recently used (an empty one) */
  }
  if (i == CACHE_WAYS) {  /* not there: replace e */
    e->key = k;
    for (i = 0; i < pc->count; i++) e->kind[i].ready = 0;
  }
  e->used = ++pc->clock;
  x->kind = e->kind;
  x->pc = pc;
}
