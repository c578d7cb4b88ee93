/*
** search_bound.c -- lower bounds on a candidate's step time and peak memory, from the
** estimator's own per-layer prices (nd_estimate_layer), so that they follow the estimator
** when its efficiencies, curves or per-layer formulas change.
**
** Why each is a bound of nd_estimate_run (estimate.c), as it composes a step:
**
**  Time. A step is the sum of non-negative parts: m micro-batches at the pace `slow` of the
**  slowest stage (forward, backward, recompute, TP, CP, EP and offload parts, each the
**  slowest stage's per micro-batch times m), the pipeline's bubble, PP, DP, the optimizer.
**  A stage's pace per micro-batch is at least the sum over its layers of each layer's
**  forward and backward pass (forward_s, backward_s: the estimator's layer_pass, launch
**  floor included), plus what its mode recomputes (recompute_s: the repeated forward with its
**  TP and EP traffic under full, the switches' work under selective), plus the part of the
**  forward's TP and EP traffic that shows (recompute_s[full] - forward_s), which the stage
**  pays at least once more in its own forward, and what its backward's TP and EP traffic
**  adds (backward_comm_s: the TP that shows, the exposed EP, as add_layers counts them per
**  layer), and the CP exchange that shows (cp_exposed); the last stage's, the head's
**  forward and backward too (nd_estimate_head: DeepSeek-V3's vocabulary of 129,280 costs
**  the last stage about one and a half layers; with recipes and HSDP on 2,048 H800 the
**  search priced 17,232 without it, 12,486 with it); the embedding only adds. So slow >=
**  the largest stage sum S, and the step >= m*S + bubble + step_overhead,
**  with the bubble as each schedule states it in slow:
**  (p-1)*slow for 1F1B and GPipe, (p-1)*slow/v interleaved; zero-bubble's is counted 0.
**  Resharded ZeRO-3 adds the DP time its gathers and reduce-scatters show every
**  micro-batch, and HSDP's replica all-reduce once a step (zero3_dp_lo: DeepSeek-V3's run
**  2-3x past the ranking's cut, 5,293 of the 32,882 priced with recipes and HSDP on 2,048
**  H800), and any other ZeRO stage what stage 0's gradient reduction, sharded weights'
**  gather and HSDP's replica all-reduce show past its own compute (dp_lo: 0.8-2.8 s of
**  12 s steps at ZeRO 2 with HSDP there); PP traffic and the optimizer add too, and are
**  left out. The groups, what each ZeRO stage shards
**  and the collectives are the estimator's own (ndplan/data_parallel.h).
**  DualPipe (which hides the EP traffic and halves the stages' work) gets a bound of its
**  own: its passes alone, each device's two chunks' parameters (dual_time).
**
**  Memory. A stage's peak is (weights + grads + optimizer + activations + buffers) x (1 +
**  alloc_fragmentation) + the device's reserve. Its layers' parameters are at least those
**  the layer prices give, sharded over the ZeRO shard group (dp_shard x cp for dense
**  parameters, its expert-data-parallel part for routed experts) as stage_memory shards
**  them: optimizer states from ZeRO 1, gradients from 2, weights from 3 (zero3_weight_copy
**  of the sharded working copy), FSDP without resharding (the resolved reshard) keeping
**  its weights and gradients whole; a recipe that quantizes the weights gives each
**  weight the least of weight_bytes and the recipe's stored width (nd_recipe_widths: FP8
**  with param gather stores its quantized bytes), its quantized copies left out (no
**  weight bytes at all, before: DeepSeek-V3 in FP8 on 2,048 H800 went 35 GiB under its
**  peaks, and 47,407 of 71,816 candidates priced with recipes and HSDP did not fit).
**  Activations are the stage's micro-batches in flight (nd_inflight) times its
**  layers' bytes under the candidate's mode, or under the least of the three modes for a
**  per-layer or Megatron plan (what no recompute removes); the logits of the last stage;
**  the transient buffers at least buffers_lo (a TP gather, ZeRO-3's gathered layers). The
**  embedding's activations and the recompute working set only add. The heaviest stage's
**  peak is at least each stage's bound.
**
**  Sub-trees (nd_bound_spread). Every layout of a pp holds all the layers, so its largest
**  stage sum S and heaviest stage's parameters are at least the model's over pp: one bound
**  for every VPP (its bubble) and layout of a group, the CP exchange taken of the sums
**  (cp_exposed is at least that of the sums), activations left out.
**
** Layer prices depend on tp, cp, mbs, ep, etp and sp (and the search's fixed schedule,
** precision and costs), not on pp, vpp, ZeRO or the layout: they are priced once per such
** group (a set-associative cache) and summed per stage through prefix counts of each
** layer kind. The pricing threads of one search share the cache (nd_bound_cache): each
** group is priced once for all of them, where caches of their own priced a third more at
** -j 2 (each thread met half of a group's reuse). A thread finds a group and copies its
** prices out without a lock, reading only (lookup: a set's change count says when a store
** ran meanwhile); it prices a missing one into its own copy and stores it under the lock
** of the group's set. A group's prices are a function of its key, so which thread priced
** it, or whether it was evicted meanwhile, changes no bound.
** spec/c/test_search_bound.c checks each bound under the estimate, strategy by
** strategy; the search's equality spec (pruned against exhaustive walks) holds the rest.
*/
#define _DEFAULT_SOURCE  /* mmap's MAP_ANONYMOUS */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ndplan/data_parallel.h"
#include "ndplan/units.h"
#include "search_bound.h"

#define BOUND_KINDS ND_MAX_LAYER_KINDS  /* distinct kinds (nd_layer_kind_equal) */
/* Groups of layer prices kept: sets of GROUP_WAYS, the first stored of those not found since
   the set last replaced one replaced first (victim: found groups mark a bit, no order), at
   most as many as the caller's cache_bytes of prices hold (at most MAX_GROUPS, at least one
   set). The walk visits a tp's groups once per pp (pp's loop is outside cp's, mbs', ep's and
   etp's), in the first recompute pass over every tp, then again in the other passes at
   that tp (walk: they go tp by tp). DeepSeek-V3 on 2,048 devices has 17,996 groups (23,288
   on 16,384), 511 at tp 1 to 3,684 at tp 64: 32,768 kept in sets of 8 price 19,390
   (28,097), 2 MiB of them (one tp's) 36,657 (51,919); when every pass walked every tp,
   4,096 in sets of 4 priced 73,129 and 32,768 in sets of 8 20,711 (32,939). A dense
   model has a few hundred (Llama-3.1-405B on 16,384 devices: 548), so the cache starts at
   the caller's first_bytes and doubles in place (grow) rather than replace a group once half
   its room is used, up to cache_bytes. Its arrays are mapped at their most and used from
   their start, the sets in use written in as they come (populate), so a search holds the
   memory of the sets its groups need; realloc would have copied them once the allocator
   had reused a search's freed cache for its heap (a bench process of eleven searches: 21 -> 25 MB).
   A set's head (tags, each way's block, order, marks) is one line and a group's key and
   prices one block, which stays where it was first stored (growing rehashes the heads
   only): a hit reads the head, then the block (about 3 lines), where keys beside doubles read
   about 9; DeepSeek-V3's 32,768 ways take 5.6 MB, not 9.2 (the search's data reads past a
   2 MiB cache, cachegrind at -j 1: 429 k -> 264 k). */
#define GROUP_WAYS 8
#define MAX_GROUPS 32768
/* The estimate's own price cache of a bound (price_group): a group is priced once, so it
   keeps a few entries only, for what the estimate checks once per cache (the costs). */
#define CACHE_KINDS_GROUPS 8

/*
** One layer kind's prices in a group (by mode; a plan's, ND_RECOMPUTE_COUNT: the least),
** rounded the way that lowers a bound: down for what the bounds add, up for the attention
** core (it hides CP traffic: cp_exposed falls as it grows). Each bound grows with what it
** adds and falls with the core, so a bound from these is at most the bound from the exact
** prices, which is under the estimate. The cache keeps each as a bfloat16 (nd_bf16_down,
** nd_bf16_up: within a relative 2^-7), a thread's copy their exact values as floats: the
** groups a large MoE search keeps are most of its memory, and every lookup reads one; a
** bfloat16 holds twice the groups of a float in the same room (three recipes' 54,000
** groups, priced twice each where they did not fit), where the looser bounds price about
** 1-2% more candidates (DeepSeek-V3 on 2,048 H800, auto: 7,469 priced against 7,370; with
** three recipes and HSDP 16,951 against 16,594; Llama-3.1-405B on 16,384 H100 4,935
** against 4,908).
*/
typedef struct kind_price {
  float t[ND_RECOMPUTE_COUNT];         /* seconds per micro-batch, by mode */
  float act[ND_RECOMPUTE_COUNT];       /* bytes per micro-batch, by mode */
  float pd, pe;                        /* dense and routed-expert parameters per device */
  float cp, core;                      /* CP traffic (forward and backward), attention core */
  float rate;                          /* the least seconds per micro-batch its recompute
                                          modes cost per byte they remove (inf: none) */
  float fb;                            /* its forward and backward passes alone (no traffic,
                                          no recompute): DualPipe's bound (dual_time) */
} kind_price;

/* A kind's figure (t or act) under mode, the least of the modes for a plan. */
static double by_mode (const float *v, int mode) {
  float x = v[0];
  int md;
  if (mode < ND_RECOMPUTE_COUNT) return v[mode];
  for (md = 1; md < ND_RECOMPUTE_COUNT; md++) if (v[md] < x) x = v[md];
  return x;
}

/* A group the cache keeps, a block of block_bytes read and written a 32-bit word at a time
   (word: lookups read it unlocked, see lookup): its key (tp, cp, mbs, ep, etp, sp), ok
   (0: the estimator refused a layer, no bound), its hash (its set at any number of sets),
   then its nkinds prices, each figure of kind_price a bfloat16, two to a word. */
typedef _Atomic unsigned word;
enum { KEPT_KEY = 0, KEPT_OK = 6, KEPT_HASH = 7, KEPT_WORDS = 8 };
#define PRICE_FIGURES (sizeof(kind_price) / sizeof(float))
#define CORE_FIGURE (offsetof(kind_price, core) / sizeof(float))  /* the one rounded up */
_Static_assert(sizeof(kind_price) % sizeof(float) == 0, "kind_price is floats");

/* Words of nkinds kinds' prices packed. */
static size_t price_words (int nkinds) {
  return ((size_t)nkinds * PRICE_FIGURES + 1) / 2;
}
#define PACKED_MAX ((BOUND_KINDS * PRICE_FIGURES + 1) / 2)

/* n kinds' prices into packed words (each figure rounded as the bounds need), and back. */
static void pack_prices (const kind_price *k, int n, unsigned *out) {
  const float *f = (const float *)(const void *)k;
  size_t i, total = (size_t)n * PRICE_FIGURES;
  memset(out, 0, price_words(n) * sizeof *out);
  for (i = 0; i < total; i++) {
    unsigned h = i % PRICE_FIGURES == CORE_FIGURE ? nd_bf16_up(f[i]) : nd_bf16_down(f[i]);
    out[i / 2] |= h << (16 * (i % 2));
  }
}

static void unpack_prices (const unsigned *in, int n, kind_price *k) {
  unsigned char *f = (unsigned char *)(void *)k;
  size_t i, total = (size_t)n * PRICE_FIGURES;
  for (i = 0; i + 1 < total; i += 2) {  /* a word's two figures (a float's high halves) */
    unsigned lo = in[i / 2] << 16, hi = in[i / 2] & 0xffff0000u;
    memcpy(f + i * sizeof(float), &lo, sizeof lo);
    memcpy(f + (i + 1) * sizeof(float), &hi, sizeof hi);
  }
  if (i < total) {
    unsigned lo = in[i / 2] << 16;
    memcpy(f + i * sizeof(float), &lo, sizeof lo);
  }
}

/* A set's bookkeeping, one cache line: which ways hold a group (a tag of the group's hash,
   0: empty), so that a lookup reads the key of a likely match only; which were used since
   the set last replaced one (ref); their order of storing; and seq, odd while a thread
   changes the set (its lock held), which a lookup reads before and after it reads. */
typedef struct set_head {
  _Atomic unsigned seq;
  _Atomic unsigned short block[GROUP_WAYS];  /* each way's block (blocks[], never moved) */
  unsigned short clock;                /* the set's stores (wrapping only misorders them) */
  unsigned short used[GROUP_WAYS];     /* each way's clock when stored (0: empty) */
  _Atomic unsigned char tag[GROUP_WAYS];
  _Atomic unsigned char ref;           /* bit i: way i found since the set last replaced */
  unsigned char spare[64 - 4 - 2 * GROUP_WAYS - 2 - 2 * GROUP_WAYS - GROUP_WAYS - 1];
} set_head;
_Static_assert(sizeof(set_head) == 64, "a set's head is one cache line");
_Static_assert(MAX_GROUPS <= 65536, "a way's block index fits 16 bits");

/* A group's prices as a bound uses them: its thread's copy of the cache's. */
typedef struct group {
  int key[6];
  int ok;
  kind_price k[BOUND_KINDS];   /* nkinds entries */
} group;

/* Locks of the shared cache, taken to store a group, never to find one. A group's lock is
   its hash's low bits (lock_mask: the first number of sets less one, at most LOCK_STRIPES
   - 1), which its set at any later number of sets keeps: the groups of one set always
   share a lock, and a store knows its lock before it reads the number of sets, which only
   grow changes, holding every lock. */
#define LOCK_STRIPES 64

/* A lock alone on its cache line: two threads taking neighbouring stripes do not share one. */
typedef union stripe {
  pthread_mutex_t mu;
  char line[64 > sizeof(pthread_mutex_t) ? 64 : sizeof(pthread_mutex_t)];
} stripe;

struct nd_bound_cache {
  int nkinds;
  _Atomic int sets;                /* of GROUP_WAYS groups (a power of two) */
  _Atomic unsigned grown;          /* odd while grow moves groups (every lock held) */
  int max_sets;
  int locked;                      /* shared by threads: stores take their set's lock */
  unsigned lock_mask;
  set_head *head;                  /* per set */
  unsigned char *blocks;           /* max_sets x GROUP_WAYS blocks, taken in turn as ways
                                      fill (next_block) and kept where they are: growing
                                      moves the sets' heads, not the groups (it copied
                                      them: 6.7 ms of DeepSeek-V3's search on 2,048 H800,
                                      1.3 MB at 0.4 GB/s into cold pages) */
  _Atomic unsigned next_block;     /* blocks taken: the ways ever filled (a replacement
                                      reuses its way's), at most the sets' ways */
  size_t block_bytes;              /* KEPT_WORDS words and nkinds kind_price */
  size_t head_bytes, all_block_bytes;  /* mapped: for max_sets */
  char apart[64];                  /* the fields above, read by every lookup, on lines that
                                      the counts below, written by stores, do not share */
  int held[LOCK_STRIPES];          /* groups kept, by lock (each counted under its own) */
  stripe lock[LOCK_STRIPES];
};

static word *block_at (const nd_bound_cache *c, size_t i) {
  return (word *)(void *)(c->blocks + i * c->block_bytes);
}

/* n words of a block into dst, and from src into one (in the orders begin_change states). */
static void load_words (void *dst, const word *w, size_t n) {
  unsigned char *d = (unsigned char *)dst;
  size_t i;
  for (i = 0; i < n; i++) {
    unsigned v = atomic_load_explicit(&w[i], memory_order_acquire);
    memcpy(d + i * sizeof v, &v, sizeof v);
  }
}

static void store_words (word *w, const void *src, size_t n) {
  const unsigned char *s = (const unsigned char *)src;
  size_t i;
  for (i = 0; i < n; i++) {
    unsigned v;
    memcpy(&v, s + i * sizeof v, sizeof v);
    atomic_store_explicit(&w[i], v, memory_order_release);
  }
}

/* A way's tag: the hash's high bits (the sets take its low ones), never 0. */
static unsigned char tag_of (unsigned h) {
  unsigned char t = (unsigned char)(h >> 24);
  return t ? t : 1;
}

/* A candidate's per-stage sums, kept for the next ones: the ZeRO and SP loops are inside
   the walk's layout loop, and ZeRO changes only how the parameters shard. */
#define PLAN_SEGS 4

typedef struct memo {
  int key[6];                      /* the group's (key[0] = 0: none kept) */
  int p, v, mb, layout, mode, schedule;
  double slow;                     /* the largest stage sum of layer times */
  double time[ND_MAX_STAGES];      /* each stage's sum of layer times */
  double act[ND_MAX_STAGES];       /* activation bytes in flight */
  double act_none[ND_MAX_STAGES];  /* plans: the same with every layer kept */
  double pd[ND_MAX_STAGES], pe[ND_MAX_STAGES];  /* dense and expert parameters */
  double gmax[ND_MAX_STAGES];      /* the parameters of its largest layer kind */
  int start[ND_MAX_CHUNKS];        /* each chunk's first layer */
  /* plans: each stage's kinds by least rate (recompute_lo), built when first asked for:
     stage s's when built[s] == gen; past PLAN_SEGS kinds, the rest as one at their least */
  unsigned gen, built[ND_MAX_STAGES];
  /* whole-model modes: the stages a pair's memory peak can be at, with ZeRO-3's gather
     buffers [1] or without [0] (peak_stages), and each stage's buffers; built when
     first asked for, as their sums' when peak_gen[z] == gen */
  unsigned peak_gen[2];
  int npeak[2], peak_at[2][ND_MAX_STAGES];
  double buf[2][ND_MAX_STAGES];
  int nseg[ND_MAX_STAGES];
  double seg_rate[ND_MAX_STAGES][PLAN_SEGS], seg_room[ND_MAX_STAGES][PLAN_SEGS];
  double cp[ND_MAX_STAGES], core[ND_MAX_STAGES];  /* CP traffic, attention cores */
} memo;

struct nd_bound {
  const nd_model_spec *m;
  const nd_device *dev;
  const nd_job *job;
  const nd_costs *costs;
  double budget;                   /* the plans' budget (bytes per device) */
  nd_schedule schedule;            /* the search's (nd_schedule_of gives each VPP's) */
  nd_strategy st;                  /* a candidate's degrees, for nd_estimate_layer */
  int nkinds, total;
  double outer_first, outer_last, tied_copy;  /* nd_model_outer_params */
  nd_fabric fabric;                /* the estimate's (nd_estimate_fabric) */
  double weight_lo[4];             /* by ZeRO stage: the least bytes a stored weight takes
                                      (a quantized recipe's width, else weight_bytes) */
  double gather_lo, gather_hi;     /* ZeRO-3: the least and most bytes a gathered weight
                                      takes (weight_bytes; the recipe's gather width) */
  double kept[4][2], split[4][2];  /* by ZeRO stage and reshard: a parameter's bytes kept
                                      whole and sharded at least (param_bytes) */
  int rep[BOUND_KINDS];            /* a layer of each kind */
  int *prefix;                     /* (total + 1) x nkinds: layers of each kind before i */
  nd_bound_cache *cache;           /* the groups' prices, perhaps shared */
  int owns_cache;
  nd_price_cache *pc;              /* for price_group: the costs validated once, not per
                                      group (NULL: validated each time) */
  group local;                     /* the group in use: a copy of the cache's */
  int expert[BOUND_KINDS];         /* the kind's MLP is MoE: its price reads ep and etp */
  int nexpert;                     /* such kinds (a dense kind's price reads neither) */
  struct {                         /* the dense kinds' prices at the last (tp, cp, mbs, sp)
                                      priced, as the groups of its ep and etp share them */
    int key[4], held;
    kind_price k[BOUND_KINDS];
  } dense;
  memo memo[2];                     /* the last stage sums, by sp */
  struct {                         /* the head's time at the last (tp, cp, mbs) asked */
    int key[3], held;
    double s;
  } head;
  struct floor_entry *floor;        /* FLOOR_ENTRIES (NULL: none yet, or no memory) */
};

static int same_kind (const nd_layer_kind *a, const nd_layer_kind *b) {
  return nd_layer_kind_equal(a, b);
}

/* The layer kinds the bounds price: a representative layer of each, into rep; their count,
   or -1 past BOUND_KINDS. */
static int kinds_of (const nd_model_spec *m, int total, int *rep) {
  int i, k, n = 0;
  for (i = 0; i < total; i++) {
    for (k = 0; k < n; k++) if (same_kind(&m->layer[rep[k]], &m->layer[i])) break;
    if (k == n) {
      if (n == BOUND_KINDS) return -1;
      rep[n++] = i;
    }
  }
  return n;
}

/* Bytes of one kept group with its prices. */
static size_t block_size (int nkinds) {
  return (KEPT_WORDS + price_words(nkinds)) * sizeof(unsigned);
}

/* The sets (a power of two, at least one, at most MAX_GROUPS groups) whose groups fit bytes. */
static int sets_for (size_t bytes, int nkinds) {
  int n = 1;
  while (n * 2 * GROUP_WAYS <= MAX_GROUPS
         && (size_t)n * 2 * (GROUP_WAYS * block_size(nkinds) + sizeof(set_head)) <= bytes)
    n *= 2;
  return n;
}

/* Writes in the pages of sets [from, to) at once (before they are used): the system's page
   faults one at a time cost DeepSeek-V3's search on 2,048 devices about 1,400 faults of
   5 us each in a VM (6% of it at -j 1, more at -j 2, where the threads share the address
   space); the sets a cache grows to get groups in every page anyway (their hashes spread
   them). Advice only: without it (Linux before 5.14, other systems) the pages fault. */
static void populate_bytes (unsigned char *base, size_t from, size_t to) {
#ifdef MADV_POPULATE_WRITE
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (page == 0 || (page & (page - 1)) != 0) return;
  from &= ~(page - 1);  /* madvise takes whole pages from a page's start */
  (void)madvise(base + from, to - from, MADV_POPULATE_WRITE);
#else
  (void)base; (void)from; (void)to;
#endif
}

static void populate (nd_bound_cache *c, int from, int to) {
  size_t set_blocks = GROUP_WAYS * c->block_bytes;
  populate_bytes(c->blocks, (size_t)from * set_blocks, (size_t)to * set_blocks);
  populate_bytes((unsigned char *)c->head, (size_t)from * sizeof(set_head),
                 (size_t)to * sizeof(set_head));
}

/* bytes of zeros, mapped (NULL: none). */
static void *zero_pages (size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

nd_bound_cache *nd_bound_cache_new (const nd_model_spec *m, size_t first_bytes,
                                    size_t cache_bytes, int threads) {
  nd_bound_cache *c;
  int rep[BOUND_KINDS], i, n, total = (int)(m->num_layers + m->mtp_layers), nkinds;
  if (total < 1 || total > ND_MAX_LAYERS || (nkinds = kinds_of(m, total, rep)) < 1) return NULL;
  c = (nd_bound_cache *)calloc(1, sizeof *c);
  if (!c) return NULL;
  c->nkinds = nkinds;
  c->max_sets = sets_for(cache_bytes, nkinds);
  n = sets_for(first_bytes, nkinds);
  if (n > c->max_sets) n = c->max_sets;
  atomic_init(&c->sets, n);
  atomic_init(&c->grown, 0u);
  c->lock_mask = (unsigned)(n < LOCK_STRIPES ? n : LOCK_STRIPES) - 1u;
  c->block_bytes = block_size(nkinds);
  c->head_bytes = (size_t)c->max_sets * sizeof *c->head;
  c->all_block_bytes = (size_t)c->max_sets * GROUP_WAYS * c->block_bytes;
  c->head = (set_head *)zero_pages(c->head_bytes);
  c->blocks = (unsigned char *)zero_pages(c->all_block_bytes);
  if (!c->head || !c->blocks) {
    nd_bound_cache_free(c);
    return NULL;
  }
  populate(c, 0, n);
  c->locked = threads > 1;
  for (i = 0; c->locked && i <= (int)c->lock_mask; i++) pthread_mutex_init(&c->lock[i].mu, NULL);
  return c;
}

void nd_bound_cache_free (nd_bound_cache *c) {
  int i;
  if (!c) return;
  for (i = 0; c->locked && i <= (int)c->lock_mask; i++) pthread_mutex_destroy(&c->lock[i].mu);
  if (c->head) munmap(c->head, c->head_bytes);
  if (c->blocks) munmap(c->blocks, c->all_block_bytes);
  free(c);
}

size_t nd_bound_cache_most (const nd_model_spec *m) {
  int rep[BOUND_KINDS], total = (int)(m->num_layers + m->mtp_layers), nkinds;
  if (total < 1 || total > ND_MAX_LAYERS || (nkinds = kinds_of(m, total, rep)) < 1) return 0;
  return (size_t)(MAX_GROUPS / GROUP_WAYS) * (GROUP_WAYS * block_size(nkinds) + sizeof(set_head));
}

int nd_bound_cache_room (nd_bound_cache *c) {
  return atomic_load_explicit(&c->sets, memory_order_acquire) * GROUP_WAYS;
}

nd_bound *nd_bound_new_shared (const nd_model_spec *m, const nd_device *dev,
                               const nd_job *job, const nd_costs *costs,
                               const nd_strategy *base, double budget, nd_bound_cache *cache) {
  nd_bound *b;
  int i, k, total = (int)(m->num_layers + m->mtp_layers);
  if (!cache || total < 1 || total > ND_MAX_LAYERS) return NULL;
  b = (nd_bound *)calloc(1, sizeof *b);
  if (!b) return NULL;
  b->m = m; b->dev = dev; b->job = job; b->costs = costs; b->budget = budget;
  b->st = *base;
  b->schedule = base->schedule;
  b->total = total;
  {
    int64_t first, last, tied;
    nd_model_outer_params(m, &first, &last, &tied);
    b->outer_first = (double)first; b->outer_last = (double)last; b->tied_copy = (double)tied;
  }
  nd_estimate_fabric(dev, &b->fabric);
  for (i = 0; i < 4; i++) {
    /* a quantized parameter is stored at the recipe's width (weight_bytes, or its quantized
       bytes with param gather), its quantized copies kept beside: weight_bytes or less; and
       ZeRO-3 gathers it at the recipe's gather width */
    nd_recipe_widths wd;
    nd_recipe_widths_of(nd_strategy_recipe(base), base->param_gather, i, costs->weight_bytes,
                        0.0, &wd);
    b->weight_lo[i] = wd.param < costs->weight_bytes ? wd.param : costs->weight_bytes;
    b->gather_lo = wd.gather < costs->weight_bytes ? wd.gather : costs->weight_bytes;
    b->gather_hi = wd.gather > costs->weight_bytes ? wd.gather : costs->weight_bytes;
  }
  for (i = 0; i < 8; i++) {  /* what each ZeRO stage (and reshard) keeps whole and shards */
    nd_zero_split z = nd_zero_split_of(i / 2, i % 2);
    /* FSDP2 keeps no sharded working copy (zero3_weight_copy 0) */
    double w = z.weights ? costs->weight_bytes * costs->zero3_weight_copy : b->weight_lo[i / 2];
    double o = costs->master_bytes + costs->optimizer_bytes;
    b->kept[i / 2][i % 2] = (z.weights ? 0.0 : w) + (z.grads ? 0.0 : costs->grad_bytes)
                          + (z.optimizer ? 0.0 : o);
    b->split[i / 2][i % 2] = (z.weights ? w : 0.0) + (z.grads ? costs->grad_bytes : 0.0)
                           + (z.optimizer ? o : 0.0);
  }
  b->nkinds = kinds_of(m, total, b->rep);
  if (b->nkinds != cache->nkinds) { free(b); return NULL; }  /* another model's cache */
  for (k = 0; k < b->nkinds; k++) {
    b->expert[k] = m->layer[b->rep[k]].mlp == ND_MLP_MOE;
    b->nexpert += b->expert[k];
  }
  b->cache = cache;
  b->pc = nd_price_cache_new(CACHE_KINDS_GROUPS);
  b->prefix = (int *)calloc((size_t)(total + 1) * b->nkinds, sizeof *b->prefix);
  if (!b->prefix) { nd_price_cache_free(b->pc); free(b); return NULL; }
  for (i = 0; i < total; i++) {
    int *row = b->prefix + (size_t)i * b->nkinds, *next = row + b->nkinds;
    memcpy(next, row, (size_t)b->nkinds * sizeof *row);
    for (k = 0; k < b->nkinds; k++) if (same_kind(&m->layer[b->rep[k]], &m->layer[i])) next[k]++;
  }
  return b;
}

nd_bound *nd_bound_new (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                        const nd_costs *costs, const nd_strategy *base, double budget,
                        size_t cache_bytes) {
  nd_bound_cache *c = nd_bound_cache_new(m, cache_bytes, cache_bytes, 1);
  nd_bound *b = c ? nd_bound_new_shared(m, dev, job, costs, base, budget, c) : NULL;
  if (!b) { nd_bound_cache_free(c); return NULL; }
  b->owns_cache = 1;
  return b;
}

void nd_bound_free (nd_bound *b) {
  if (!b) return;
  if (b->owns_cache) nd_bound_cache_free(b->cache);
  nd_price_cache_free(b->pc);
  free(b->prefix);
  free(b->floor);
  free(b);
}

/* The degrees and layout of a resolved strategy, onto the bound's own (which resolves it
   again inside nd_estimate_layer). */
static void load_degrees (nd_strategy *d, const nd_strategy *s) {
  d->dp = s->dp; d->tp = s->tp; d->pp = s->pp; d->vpp = s->vpp; d->cp = s->cp;
  d->ep = s->ep; d->etp = s->etp; d->mbs = s->mbs; d->mb = s->mb; d->sp = s->sp;
  d->zero = s->zero; d->schedule = s->schedule; d->reshard = s->reshard;
  d->dp_shard = s->dp_shard; d->dp_replicate = 0;
  d->recompute = ND_RECOMPUTE_NONE; d->layers = NULL;
  d->account = s->account; d->first_layers = s->first_layers; d->last_layers = s->last_layers;
  d->explicit_layout = ND_LAYOUT_RESOLVED;
}

/* The head's forward and backward per micro-batch at st's (tp, cp, mbs), the last
   stage's (nd_estimate_head), 0 where the estimator gives none. */
static double head_s (nd_bound *b, const nd_strategy *st) {
  int key[3] = {st->tp, st->cp, st->mbs};
  if (!b->head.held || memcmp(b->head.key, key, sizeof key) != 0) {
    load_degrees(&b->st, st);
    if (nd_estimate_head(b->m, b->dev, b->job, &b->st, b->costs, &b->head.s) != 0
        || !(b->head.s > 0.0))
      b->head.s = 0.0;
    memcpy(b->head.key, key, sizeof key);
    b->head.held = 1;
  }
  return b->head.s;
}

/* A kind's figures for the bounds, of its exact prices le. */
static void kind_price_of (const nd_layer_estimate *le, kind_price *kp) {
  double shown, t[ND_RECOMPUTE_COUNT], rate = HUGE_VAL;
  int md;
  /* the forward's TP and EP traffic that shows, as the full mode repeats it */
  shown = le->recompute_s[ND_RECOMPUTE_FULL] - le->forward_s;
  if (!(shown > 0.0)) shown = 0.0;
  for (md = 0; md < ND_RECOMPUTE_COUNT; md++) {
    double rec = le->recompute_s[md] > 0.0 ? le->recompute_s[md] : 0.0;
    t[md] = le->forward_s + le->backward_s + shown + le->backward_comm_s + rec;
    kp->t[md] = nd_float_down(t[md]);
    kp->act[md] = nd_float_down(le->activations[md]);
  }
  /* what each byte a mode removes costs it, of the exact prices (for plans' bounds) */
  for (md = ND_RECOMPUTE_SELECTIVE; md < ND_RECOMPUTE_COUNT; md++) {
    double saved = le->activations[ND_RECOMPUTE_NONE] - le->activations[md];
    double cost = t[md] - t[ND_RECOMPUTE_NONE];
    if (saved > 0.0 && (cost > 0.0 ? cost : 0.0) / saved < rate)
      rate = (cost > 0.0 ? cost : 0.0) / saved;
  }
  kp->rate = nd_float_down(rate);
  kp->pe = nd_float_down(le->params_expert);
  /* CP traffic: K,V forward; K,V and their gradients backward */
  kp->cp = nd_float_down(3.0 * le->cp_comm_s);
  kp->core = nd_float_up(le->attn_core_s);
  kp->pd = nd_float_down(le->params - le->params_expert);
  kp->fb = nd_float_down(le->forward_s + le->backward_s);
}

/*
** Prices each layer kind for the group of st (one set-up for all of them). A model with
** dense and MoE kinds prices its dense ones once for the groups of one (tp, cp, mbs, sp)
** walked in a row (ep and etp are the walk's inner degrees): DeepSeek-V3's dense layers
** were a third of the kinds priced.
*/
static void price_group (nd_bound *b, group *g, const nd_strategy *st) {
  int k, n = 0, layers[BOUND_KINDS], at[BOUND_KINDS];
  int key[4] = {st->tp, st->cp, st->mbs, st->sp ? 1 : 0};
  int mixed = b->nexpert > 0 && b->nexpert < b->nkinds;
  int reuse = mixed && b->dense.held && memcmp(b->dense.key, key, sizeof key) == 0;
  char err[8];
  nd_layer_estimate le[BOUND_KINDS];
  for (k = 0; k < b->nkinds; k++)
    if (!reuse || b->expert[k]) { at[n] = k; layers[n++] = b->rep[k]; }
  load_degrees(&b->st, st);
  g->ok = nd_estimate_layers_plain(b->m, b->dev, b->job, &b->st, b->costs, b->pc, n, layers,
                                   le, err, sizeof err) == 0;
  if (!g->ok) return;
  for (k = 0; k < n; k++) kind_price_of(&le[k], &g->k[at[k]]);
  for (k = 0; reuse && k < b->nkinds; k++)
    if (!b->expert[k]) g->k[k] = b->dense.k[k];
  if (mixed && !reuse) {
    memcpy(b->dense.key, key, sizeof key);
    memcpy(b->dense.k, g->k, (size_t)b->nkinds * sizeof g->k[0]);
    b->dense.held = 1;
  }
}

/*
** The CP exchange a stage's time shows, of its traffic cp and attention cores core, as the
** estimator's stage_time counts it: of cp, what cp_overlap x 3 x core hides costs
** overlap_sm_share (at most 0.99) of itself. As a function of (cp, core) it is convex and
** grows linearly along rays, so over several stages it is at least that of their sums.
*/
static double cp_exposed (const nd_costs *co, double cp, double core) {
  double hidden = co->cp_overlap * 3.0 * core;
  if (hidden > cp) hidden = cp;
  return cp - hidden + co->overlap_sm_share * hidden;
}

/* The hash of a group's key: FNV-1a, then MurmurHash3's finalizer, as the sets are its low
   bits and FNV's multiplications carry only upwards (the powers of two of cp and mbs from
   256 on met in one set). */
static unsigned key_hash (const int *key) {
  unsigned h = 2166136261u;
  int i;
  for (i = 0; i < 6; i++) h = (h ^ (unsigned)key[i]) * 16777619u;
  h ^= h >> 16; h *= 0x85ebca6bu;
  h ^= h >> 13; h *= 0xc2b2ae35u;
  return h ^ (h >> 16);
}

static void lock_all (nd_bound_cache *c) {
  unsigned i;
  for (i = 0; c->locked && i <= c->lock_mask; i++) pthread_mutex_lock(&c->lock[i].mu);
}

static void unlock_all (nd_bound_cache *c) {
  unsigned i;
  for (i = 0; c->locked && i <= c->lock_mask; i++) pthread_mutex_unlock(&c->lock[i].mu);
}

static int sets_now (nd_bound_cache *c) {
  return atomic_load_explicit(&c->sets, memory_order_relaxed);
}

/* Whether at least half the cache's room holds groups (every lock held): below, a full
   set replaces a group (a few sets fill while most have room), above, the cache grows. */
static int half_full (nd_bound_cache *c) {
  long n = 0;
  unsigned i;
  for (i = 0; i <= c->lock_mask; i++) n += c->held[i];
  return 2 * n >= (long)sets_now(c) * GROUP_WAYS;
}

/* A writer's marks around its change of a set, or of every set (grow): odd while it
   writes, even again after. The words between are stored with release and read with
   acquire order, so a lookup that read any of them sees the count changed when it reads
   it again; a lookup that read the even count after sees every word (no fences: the
   thread sanitizer follows these orders, not fences; on x86 each is a plain move). */
static void begin_change (_Atomic unsigned *seq) {
  atomic_store_explicit(seq, atomic_load_explicit(seq, memory_order_relaxed) + 1u,
                        memory_order_relaxed);
}

static void end_change (_Atomic unsigned *seq) {
  atomic_store_explicit(seq, atomic_load_explicit(seq, memory_order_relaxed) + 1u,
                        memory_order_release);
}

/* Doubles the sets (every lock held, sets < max_sets): set i's groups stay in i or move to
   i + sets, as their hashes say, so none is lost (each new set holds at most what one old
   one held). The new sets' pages are the mapping's zeros, never used before. */
static void grow (nd_bound_cache *c) {
  int n = sets_now(c), si, i, moved;
  populate(c, n, 2 * n);
  begin_change(&c->grown);
  for (si = 0; si < n; si++) {
    set_head *from = &c->head[si], *to = &c->head[si + n];
    to->clock = from->clock;
    for (i = moved = 0; i < GROUP_WAYS; i++) {
      unsigned short bi = atomic_load_explicit(&from->block[i], memory_order_relaxed);
      const word *k = block_at(c, bi);
      unsigned char t = atomic_load_explicit(&from->tag[i], memory_order_relaxed);
      if (t == 0 || !(atomic_load_explicit(&k[KEPT_HASH], memory_order_relaxed) & (unsigned)n))
        continue;
      atomic_store_explicit(&to->block[moved], bi, memory_order_release);
      atomic_store_explicit(&to->tag[moved], t, memory_order_release);
      to->used[moved] = from->used[i];
      moved++;
      atomic_store_explicit(&from->tag[i], 0, memory_order_release);
      from->used[i] = 0;
    }
  }
  atomic_store_explicit(&c->sets, 2 * n, memory_order_release);
  end_change(&c->grown);
}

/* The way of set hd that holds key (tag: its hash's), or -1. */
static int find_way (const nd_bound_cache *c, const set_head *hd, int si, unsigned char tag,
                     const int *key) {
  int i, j;
  for (i = 0; i < GROUP_WAYS; i++) {
    const word *k;
    if (atomic_load_explicit(&hd->tag[i], memory_order_acquire) != tag) continue;
    k = block_at(c, atomic_load_explicit(&hd->block[i], memory_order_acquire));
    for (j = 0; j < 6; j++)
      if (atomic_load_explicit(&k[KEPT_KEY + j], memory_order_acquire) != (unsigned)key[j]) break;
    if (j == 6) return i;
  }
  return -1;
}

/*
** Finds key's group (hash h, tag) and copies its prices into mine, reading words only:
** 1 found, -1 not kept, 0 a thread changed its set or grew the cache meanwhile (what was
** read may be torn). A store holds its set's lock and grow every lock, so under the lock
** of key's set the answer is 1 or -1. Lookups write nothing but a way's first use (ref):
** threads that find the same groups share the lines they read (a lock and a use count
** written by every lookup moved them between processors: DeepSeek-V3 on 2,048 devices at
** -j 2, 0.101 -> 0.094 s without them).
*/
static int lookup (nd_bound_cache *c, unsigned h, unsigned char tag, const int *key,
                   group *mine, int K) {
  unsigned grown = atomic_load_explicit(&c->grown, memory_order_acquire), seq;
  int si, way;
  set_head *hd;
  unsigned packed[PACKED_MAX];
  if (grown & 1u) return 0;
  si = (int)(h & (unsigned)(atomic_load_explicit(&c->sets, memory_order_acquire) - 1));
  hd = &c->head[si];
  seq = atomic_load_explicit(&hd->seq, memory_order_acquire);
  if (seq & 1u) return 0;
  way = find_way(c, hd, si, tag, key);
  if (way >= 0) {
    const word *k = block_at(c, atomic_load_explicit(&hd->block[way], memory_order_acquire));
    mine->ok = (int)atomic_load_explicit(&k[KEPT_OK], memory_order_acquire);
    load_words(packed, k + KEPT_WORDS, price_words(K));
  }
  if (atomic_load_explicit(&hd->seq, memory_order_relaxed) != seq
      || atomic_load_explicit(&c->grown, memory_order_relaxed) != grown)
    return 0;
  if (way < 0) return -1;
  unpack_prices(packed, K, mine->k);  /* (read whole: the set did not change meanwhile) */
  if (!(atomic_load_explicit(&hd->ref, memory_order_relaxed) & (1u << way)))
    atomic_fetch_or_explicit(&hd->ref, (unsigned char)(1u << way), memory_order_relaxed);
  return 1;
}

/* The way of set hd to store a group in (its lock held): an empty one, else the first
   stored of those not found since the set last replaced one (all, if each was). */
static int victim (const set_head *hd) {
  unsigned ref = atomic_load_explicit(&hd->ref, memory_order_relaxed);
  int i, way = -1;
  for (i = 0; i < GROUP_WAYS; i++) {
    if (atomic_load_explicit(&hd->tag[i], memory_order_relaxed) == 0) return i;
    if (ref != (1u << GROUP_WAYS) - 1u && (ref & (1u << i))) continue;
    if (way < 0 || hd->used[i] < hd->used[way]) way = i;
  }
  return way;
}

/* The prices of st's group, in the bound's own copy: the cache's, else priced and stored. */
static const group *group_of (nd_bound *b, const nd_strategy *st) {
  nd_bound_cache *c = b->cache;
  int key[6], si, way, K = b->nkinds, may_grow, found;
  unsigned h, bi;
  unsigned char tag;
  set_head *hd;
  word *k;
  group *mine = &b->local;
  pthread_mutex_t *lock;
  unsigned packed[PACKED_MAX];
  key[0] = st->tp; key[1] = st->cp; key[2] = st->mbs; key[3] = st->ep; key[4] = st->etp;
  key[5] = st->sp ? 1 : 0;
  if (memcmp(mine->key, key, sizeof key) == 0) return mine;  /* the same group again */
  h = key_hash(key);
  tag = tag_of(h);
  lock = c->locked ? &c->lock[h & c->lock_mask].mu : NULL;
  mine->key[0] = 0;  /* (mine is being overwritten) */
  found = lookup(c, h, tag, key, mine, K);
  while (found == 0) {  /* a store or grow ran meanwhile: again, as stores wait */
    if (lock) pthread_mutex_lock(lock);
    found = lookup(c, h, tag, key, mine, K);
    if (lock) pthread_mutex_unlock(lock);
  }
  memcpy(mine->key, key, sizeof key);
  if (found > 0) return mine;
  price_group(b, mine, st);  /* not kept: priced for this group (unlocked), then stored */
  /* as the cache keeps it: a group's bounds are the same found or priced */
  pack_prices(mine->k, K, packed);
  unpack_prices(packed, K, mine->k);
  may_grow = 1;
  for (;;) {  /* where to store it, the set's lock held */
    if (lock) pthread_mutex_lock(lock);
    si = (int)(h & (unsigned)(sets_now(c) - 1));
    hd = &c->head[si];
    if (find_way(c, hd, si, tag, key) >= 0) {  /* stored meanwhile */
      if (lock) pthread_mutex_unlock(lock);
      return mine;
    }
    way = victim(hd);
    if (atomic_load_explicit(&hd->tag[way], memory_order_relaxed) == 0 || !may_grow
        || sets_now(c) >= c->max_sets)
      break;
    if (lock) pthread_mutex_unlock(lock);  /* a full set: the cache grows rather than replace */
    lock_all(c);
    if (si == (int)(h & (unsigned)(sets_now(c) - 1))) {  /* (else grown meanwhile) */
      if (half_full(c) && sets_now(c) < c->max_sets) grow(c);
      else may_grow = 0;  /* a few full sets: this one replaces its first stored */
    }
    unlock_all(c);  /* the set looked at again */
  }
  if (atomic_load_explicit(&hd->tag[way], memory_order_relaxed) == 0) {
    bi = atomic_fetch_add_explicit(&c->next_block, 1u, memory_order_relaxed);
    if (bi >= (unsigned)c->max_sets * GROUP_WAYS) {  /* (more than its ways: never) */
      if (lock) pthread_mutex_unlock(lock);
      return mine;
    }
  }
  else bi = atomic_load_explicit(&hd->block[way], memory_order_relaxed);  /* reused */
  begin_change(&hd->seq);
  if (atomic_load_explicit(&hd->tag[way], memory_order_relaxed) == 0)
    c->held[h & c->lock_mask]++;
  else
    atomic_store_explicit(&hd->ref, 0, memory_order_relaxed);  /* a replacement: uses anew */
  k = block_at(c, bi);
  atomic_store_explicit(&hd->block[way], (unsigned short)bi, memory_order_release);
  store_words(k + KEPT_KEY, key, 6);
  atomic_store_explicit(&k[KEPT_OK], (unsigned)mine->ok, memory_order_release);
  atomic_store_explicit(&k[KEPT_HASH], h, memory_order_release);
  store_words(k + KEPT_WORDS, packed, price_words(K));
  atomic_store_explicit(&hd->tag[way], tag, memory_order_release);
  hd->used[way] = ++hd->clock;
  end_change(&hd->seq);
  if (lock) pthread_mutex_unlock(lock);
  return mine;
}

/* The per-stage sums of candidate c (strategy st) on group g into mm. 0, or -1. */
static int stage_sums (nd_bound *b, const group *g, const nd_candidate *c,
                       const nd_strategy *st, int mode, memo *mm) {
  int p = st->pp, v = st->vpp, K = b->nkinds, s, j, k, pos = 0;
  double *stime = mm->time;
  for (s = 0; s < p; s++) {
    stime[s] = mm->act[s] = mm->pd[s] = mm->pe[s] = mm->act_none[s] = mm->gmax[s] = 0.0;
    mm->cp[s] = mm->core[s] = 0.0;
  }
  for (j = 0; j < v; j++)  /* round j: chunk j*p + s of stage s, in layer order */
    for (s = 0; s < p; s++) {
      int n = st->stage_layers[j * p + s], to = pos + n;
      const int *lo, *hi;
      if (n < 0 || to > b->total) return -1;
      mm->start[j * p + s] = pos;
      lo = b->prefix + (size_t)pos * K;
      hi = b->prefix + (size_t)to * K;
      for (k = 0; k < K; k++) {
        double cnt = (double)(hi[k] - lo[k]);
        const kind_price *kp = &g->k[k];
        if (cnt == 0.0) continue;
        stime[s] += cnt * by_mode(kp->t, mode);
        mm->act[s] += cnt * by_mode(kp->act, mode);
        mm->pd[s] += cnt * kp->pd;
        mm->pe[s] += cnt * kp->pe;
        if ((double)kp->pd + kp->pe > mm->gmax[s]) mm->gmax[s] = (double)kp->pd + kp->pe;
        mm->cp[s] += cnt * kp->cp;
        mm->core[s] += cnt * kp->core;
        if (mode == ND_RECOMPUTE_COUNT)  /* a plan: what it holds with every layer kept */
          mm->act_none[s] += cnt * kp->act[ND_RECOMPUTE_NONE];
      }
      pos = to;
    }
  mm->slow = 0.0;
  stime[p - 1] += head_s(b, st);
  for (s = 0; s < p; s++) {
    double inflight = nd_inflight(st, s);
    stime[s] += cp_exposed(b->costs, mm->cp[s], mm->core[s]);
    if (stime[s] > mm->slow) mm->slow = stime[s];
    mm->act[s] *= inflight;
    mm->act_none[s] *= inflight;
  }
  {  /* the ends, as the estimator's stage_ends and stage_memory add them: the embedding's
        and the head's parameters (vocabulary-parallel over TP, the head a copy when tied
        across stages), the loss's logits of one micro-batch (the padded vocabulary at
        least the model's) */
    double logits = nd_loss_bytes(b->costs, st->tp) * st->mbs * (double)b->job->seq_len / st->cp
                  * (double)b->m->vocab_size / st->tp;
    mm->pd[0] += b->outer_first / st->tp;
    mm->pd[p - 1] += (b->outer_last + (p > 1 ? b->tied_copy : 0.0)) / st->tp;
    mm->act[p - 1] += logits;
    mm->act_none[p - 1] += logits;
  }
  memcpy(mm->key, g->key, sizeof mm->key);
  if (++mm->gen == 0) {  /* (recompute_lo's segments and peak_stages' of the sums before:
                            stale) */
    memset(mm->built, 0, sizeof mm->built);  /* (wrapped: none is this one's) */
    memset(mm->peak_gen, 0, sizeof mm->peak_gen);
    mm->gen = 1;
  }
  mm->p = p; mm->v = v; mm->mb = st->mb; mm->layout = c->layout;
  mm->mode = mode; mm->schedule = (int)st->schedule;
  return 0;
}

/* The bubble in units of the slowest stage's pace, as each schedule states it. */
static double bubble_of (nd_schedule schedule, int p, int v) {
  switch (schedule) {
    case ND_SCHED_INTERLEAVED: return (double)(p - 1) / v;
    case ND_SCHED_ZB: return 0.0;
    default: return (double)(p - 1);  /* 1F1B, GPipe */
  }
}

/* Bytes per dense (*kd) and per routed-expert (*ke) parameter at ZeRO `zero` over the shard
   group `shard`, each part sharded as the estimator's stage_memory shards it (see above):
   what the stage keeps whole, and what it shards over the dense and expert ranks. */
static void param_bytes (const nd_bound *b, const nd_strategy *st, int zero, int shard,
                         double *kd, double *ke) {
  int z = zero < 0 ? 0 : zero > 3 ? 3 : zero, rs = st->reshard ? 1 : 0;
  double dpc, edp;
  nd_dp_ranks(st, shard, &dpc, &edp);
  if (edp < 1.0) edp = 1.0;
  *kd = b->kept[z][rs] + b->split[z][rs] / dpc;
  *ke = b->kept[z][rs] + b->split[z][rs] / edp;
}

/*
** What a stage's peak holds besides its parameters and activations, at least: the
** estimator's transient buffers (stage_memory), a TP gather of the micro-batch's input, or
** under resharded ZeRO-3 (z3) the double-buffered gather of its largest layer and that
** layer's unsharded gradient (gmax: the parameters of the stage's largest layer kind; the
** gathered layer holds gather_lo bytes a parameter at least, and as many parameters as its
** gathered bytes over gather_hi).
*/
static double buffers_lo (const nd_bound *b, const nd_strategy *st, int z3, double gmax) {
  double T = (double)st->mbs * b->job->seq_len / st->cp, gather = 0.0, grad = 0.0;
  if (!(b->gather_hi > 0.0)) z3 = 0;
  if (z3) {
    gather = gmax * b->gather_lo;
    grad = gmax * b->costs->grad_bytes * b->gather_lo / b->gather_hi;
  }
  return nd_stage_buffers(b->costs, st->tp, z3, T, (double)b->m->hidden_size, gather, grad);
}

/*
** Resharded ZeRO-3 over the shard group `shard`: the step's exposed DP time at least, given
** slow, a lower bound on the slowest stage's pace. The estimator (stage_dp_time) gathers a
** stage's weights twice at least and reduce-scatters its gradients every micro-batch
** (nd_zero3_mb_time: per), hiding zero3_overlap of the stage's compute C <= pace under it
** at overlap_sm_share of what it hides (nd_zero3_shown), and adds HSDP's replica all-reduce
** once a step: mb x shown(per, C) + replica. With the pace in the step m x pace + bubble,
** the sum grows with C (its slope m (1 - (1 - sm) ov) >= 0) and C = slow gives its least:
** the time bound's m x slow plus this, for the stage where it is the largest.
*/
static double zero3_dp_lo (const nd_bound *b, const nd_strategy *st, const memo *mm,
                           int shard, double slow) {
  const nd_costs *co = b->costs;
  int s;
  nd_dp_groups g;
  double most = 0.0;
  nd_dp_groups_place(&b->fabric, b->m, st, shard, &g);
  for (s = 0; s < mm->p; s++) {
    double pd = mm->pd[s], pe = mm->pe[s];
    double per = nd_zero3_mb_time(&b->fabric, co, &g, 2.0, b->gather_lo * pd,
                                  b->gather_lo * pe, pd, pe);
    double t = st->mb * nd_zero3_shown(co, per, slow)
             + nd_dp_replica_time(&b->fabric, co, &g, 3, pd, pe);
    if (t > most) most = t;
  }
  return most;
}

/* dp_lo's T: stage 0's DP traffic at ZeRO 0 (zero 0) or sharded (zero 1) over `shard`: the
   gradients' reduction (HSDP's replica all-reduce with it) and the weights' gather. */
static double dp_traffic (const nd_bound *b, const nd_strategy *st, const memo *mm, int zero,
                          int shard) {
  double pd = mm->pd[0], pe = mm->pe[0], grad, gather;
  nd_dp_groups g;
  nd_dp_groups_place(&b->fabric, b->m, st, zero == 0 ? st->dp : shard, &g);
  nd_dp_step_times(&b->fabric, b->costs, &g, zero, pd, pe, b->gather_lo * pd,
                   b->gather_lo * pe, &grad, &gather);
  return grad + gather;
}

/* The traffic of the shard groups one bound evaluation meets (ZeRO 1, 2 and unresharded 3
   share theirs), so that each is priced once: at most DP_SEEN of them. */
#define DP_SEEN 8
typedef struct dp_seen {
  int n, zero[DP_SEEN], shard[DP_SEEN];
  double t[DP_SEEN];
} dp_seen;

/*
** The step's exposed DP time at least, at ZeRO `zero` over the shard group `shard`, given
** slow, a lower bound on the slowest stage's pace. Resharded ZeRO-3: zero3_dp_lo. Else the
** estimator (stage_dp_time, dp_overlapped) reduces stage 0's gradients, gathers its sharded
** weights and, under HSDP, all-reduces the shards across the replicas: T seconds, of which
** what its own compute W <= pace does not hide shows, at least max(0, T - ov W) / v (its
** own chunk's share; the other chunks' terms only add), and what is hidden costs
** overlap_sm_share of itself: sm T + (1 - sm) max(0, T - ov W) / v. With the pace in the
** step m x pace + bubble the sum is least at W = slow (its slope past it is m - (1 - sm) ov
** / v >= 0).
*/
static double dp_lo (const nd_bound *b, const nd_strategy *st, const memo *mm, int zero,
                     int shard, double slow, dp_seen *seen) {
  const nd_costs *co = b->costs;
  double v = st->schedule == ND_SCHED_INTERLEAVED ? (double)st->vpp : 1.0, t = -1.0, shown;
  int i, cls = zero == 0 ? 0 : 1;
  if (zero == 3 && st->reshard) return zero3_dp_lo(b, st, mm, shard, slow);
  for (i = 0; i < seen->n; i++)
    if (seen->zero[i] == cls && seen->shard[i] == shard) { t = seen->t[i]; break; }
  if (t < 0.0) {
    t = dp_traffic(b, st, mm, cls, shard);
    if (seen->n < DP_SEEN) {
      seen->zero[seen->n] = cls; seen->shard[seen->n] = shard; seen->t[seen->n++] = t;
    }
  }
  shown = t - co->dp_overlap * slow;
  return co->overlap_sm_share * t + (1.0 - co->overlap_sm_share) * (shown > 0.0 ? shown : 0.0) / v;
}

/*
** The floor of a (tp, cp, mbs, sp), one bound's (a thread's, one recipe's): the least layer
** time (with the head's, head_s) by mode (ND_RECOMPUTE_COUNT: a plan's least) of the (ep,
** etp) pairs nd_bound_spread met there, and those pairs. The walk meets a node's group
** again at every PP and in every recompute pass, and most nodes it meets are over the time
** cut by their floor already (DeepSeek-V3 on 2,048 H800 with three recipes and HSDP: 90%
** of 166,000, in batches of some 25 ep and etp at one (tp, pp, cp, mbs)), so
** nd_bound_floor prunes them without the group's lookup, its prices copied and summed, or
** the memory bound of each pair. Entries are found by their key's hash, one to a slot (a
** key met there replaces it: a floor forgotten is only a lookup more); pairs past
** FLOOR_PAIRS, or of an ep from 1,024 or an etp from 64, are not kept (no floor for them).
** That search met 608 keys of up to 62 pairs each.
*/
#define FLOOR_ENTRIES 1024
#define FLOOR_PAIRS 64
#define FLOOR_NO_PAIR 0xffffu
typedef struct floor_entry {
  int key[4];                          /* tp, cp, mbs, sp (tp 0: empty) */
  unsigned char n;                     /* pairs kept */
  unsigned char next;                  /* where the next pair looked for likely is: the walk
                                          meets them in the order they were kept */
  unsigned short pair[FLOOR_PAIRS];    /* ep << 6 | etp */
  double t[ND_RECOMPUTE_COUNT + 1];    /* the least layer time of theirs, by mode */
} floor_entry;

/* The layer time of every layer under mode (by_mode) of group g, CP's exchange with it
   (count: every layer by kind). */
static double layer_time (const nd_bound *b, const group *g, const int *count, int mode) {
  double t = 0.0, cp = 0.0, core = 0.0;
  int k;
  for (k = 0; k < b->nkinds; k++) {
    t += count[k] * by_mode(g->k[k].t, mode);
    cp += count[k] * g->k[k].cp;
    core += count[k] * g->k[k].core;
  }
  return t + cp_exposed(b->costs, cp, core);
}

/* The slot of st's (tp, cp, mbs, sp) and its pair in *pair (FLOOR_NO_PAIR: none kept). */
static floor_entry *floor_slot (const nd_bound *b, const nd_strategy *st, unsigned *pair) {
  unsigned h = 2166136261u;
  h = (h ^ (unsigned)st->tp) * 16777619u;
  h = (h ^ (unsigned)st->cp) * 16777619u;
  h = (h ^ (unsigned)st->mbs) * 16777619u;
  h = (h ^ (st->sp ? 1u : 0u)) * 16777619u;
  h ^= h >> 15;
  *pair = st->ep >= 1 && st->ep < 1024 && st->etp >= 1 && st->etp < 64
          ? (unsigned)st->ep << 6 | (unsigned)st->etp : FLOOR_NO_PAIR;
  return &b->floor[h & (FLOOR_ENTRIES - 1)];
}

static int floor_holds (const floor_entry *f, const nd_strategy *st) {
  return f->key[0] == st->tp && f->key[1] == st->cp && f->key[2] == st->mbs
         && f->key[3] == (st->sp ? 1 : 0);
}

static int floor_has (floor_entry *f, unsigned pair) {
  int i;
  if (pair == FLOOR_NO_PAIR) return 0;
  if (f->next < f->n && f->pair[f->next] == pair) { f->next++; return 1; }
  for (i = 0; i < f->n; i++)
    if (f->pair[i] == pair) { f->next = (unsigned char)(i + 1); return 1; }
  return 0;
}

/* The layer and head time of group g under each mode (nd_bound_spread's sum) into st's
   floor. */
static void floor_add (nd_bound *b, const nd_strategy *st, const group *g, const int *count) {
  floor_entry *f;
  unsigned pair;
  int md;
  if (!b->floor) {
    b->floor = (floor_entry *)calloc(FLOOR_ENTRIES, sizeof *b->floor);
    if (!b->floor) return;
  }
  f = floor_slot(b, st, &pair);
  if (!floor_holds(f, st)) {
    f->key[0] = st->tp; f->key[1] = st->cp; f->key[2] = st->mbs; f->key[3] = st->sp ? 1 : 0;
    f->n = f->next = 0;
    for (md = 0; md <= ND_RECOMPUTE_COUNT; md++) f->t[md] = HUGE_VAL;
  }
  if (f->n == FLOOR_PAIRS || pair == FLOOR_NO_PAIR || floor_has(f, pair)) return;
  for (md = 0; md <= ND_RECOMPUTE_COUNT; md++) {
    double t = layer_time(b, g, count, md) + head_s(b, st);
    if (t < f->t[md]) f->t[md] = t;
  }
  f->pair[f->n++] = (unsigned short)pair;
}

/* Whether nd_bound_spread bounds st at all (else it returns -1: the node is walked). */
static int spread_applies (const nd_strategy *st, int nv, const int *vpp) {
  int i;
  if (st->offload > 0.0 || st->pp < 1 || st->pp > ND_MAX_STAGES) return 0;
  for (i = 0; i < nv; i++) if (vpp[i] < 1) return 0;
  return 1;
}

/* nd_bound_spread's time of each VPP, from layer time t (DualPipe's: from dual_t, its
   passes alone, the bubble left out). */
static void spread_times (const nd_bound *b, const nd_strategy *st, double t, double dual_t,
                          int nv, const int *vpp, double *time_s) {
  int i, p = st->pp;
  /* the slowest stage's layers take the average at least */
  for (i = 0; i < nv; i++) {
    nd_schedule sc = nd_schedule_of(b->schedule, vpp[i]);
    time_s[i] = sc == ND_SCHED_DUALPIPE
              ? dual_t / p * (double)st->mb + b->costs->step_overhead
              : t / p * ((double)st->mb + bubble_of(sc, p, vpp[i])) + b->costs->step_overhead;
  }
}

/* Every layer's forward and backward passes alone (kind_price.fb) of group g. */
static double passes_time (const nd_bound *b, const group *g, const int *count) {
  double t = 0.0;
  int k;
  for (k = 0; k < b->nkinds; k++) t += count[k] * g->k[k].fb;
  return t;
}

int nd_bound_floor (nd_bound *b, const nd_candidate *c, const nd_strategy *st, int nv,
                    const int *vpp, double *least_s) {
  int mode = c->recompute < ND_RECOMPUTE_COUNT ? c->recompute : ND_RECOMPUTE_COUNT, i;
  unsigned pair;
  floor_entry *f;
  double least = HUGE_VAL;
  if (!b->floor || nv < 1 || st->offload > 0.0 || st->pp < 1 || st->pp > ND_MAX_STAGES)
    return -1;
  f = floor_slot(b, st, &pair);
  if (!floor_holds(f, st) || !floor_has(f, pair)) return -1;
  for (i = 0; i < nv; i++) {  /* spread_times' least over the VPPs, DualPipe's aside */
    nd_schedule sc = vpp[i] < 1 ? ND_SCHED_DUALPIPE : nd_schedule_of(b->schedule, vpp[i]);
    double bubble;
    if (sc == ND_SCHED_DUALPIPE) return -1;
    bubble = bubble_of(sc, st->pp, vpp[i]);
    if (bubble < least) least = bubble;
  }
  *least_s = f->t[mode] / st->pp * ((double)st->mb + least) + b->costs->step_overhead;
  return 0;
}

int nd_bound_spread (nd_bound *b, const nd_candidate *c, const nd_strategy *st, int nv,
                     const int *vpp, double *time_s, double *params) {
  const group *g;
  const int *count = b->prefix + (size_t)b->total * b->nkinds;  /* every layer, by kind */
  int p = st->pp, k, mode = c->recompute < ND_RECOMPUTE_COUNT ? c->recompute
                                                             : ND_RECOMPUTE_COUNT;
  double pd = 0.0, pe = 0.0;
  if (!spread_applies(st, nv, vpp)) return -1;
  g = group_of(b, st);
  if (!g->ok) return -1;
  floor_add(b, st, g, count);
  for (k = 0; k < b->nkinds; k++) {
    pd += count[k] * g->k[k].pd;
    pe += count[k] * g->k[k].pe;
  }
  pd += (b->outer_first + b->outer_last + (p > 1 ? b->tied_copy : 0.0)) / st->tp;  /* ends */
  spread_times(b, st, layer_time(b, g, count, mode) + head_s(b, st),
               passes_time(b, g, count) + head_s(b, st), nv, vpp, time_s);
  params[0] = pd / p;  /* the slowest stage's parameters: the average at least */
  params[1] = pe / p;
  return 0;
}

double nd_bound_spread_memory (const nd_bound *b, const nd_strategy *st, const double *params,
                               int zero, int shard) {
  double kd, ke;
  if (shard < 1) return 0.0;
  param_bytes(b, st, zero, shard, &kd, &ke);
  return (kd * params[0] + ke * params[1]) * (1.0 + b->costs->alloc_fragmentation)
         + b->dev->reserve_bytes;
}

/* Stage s's kinds by least rate into mm (recompute_lo). */
static void plan_segments (const nd_bound *b, const group *g, const nd_strategy *st, memo *mm,
                           int s) {
  int p = st->pp, v = st->vpp, K = b->nkinds, j, k, i, n = 0;
  double cnt[BOUND_KINDS] = {0.0}, rate[BOUND_KINDS], room[BOUND_KINDS];
  double per = nd_inflight(st, s) * (1.0 + b->costs->alloc_fragmentation);
  for (j = 0; j < v; j++) {
    const int *lo = b->prefix + (size_t)mm->start[j * p + s] * K;
    const int *hi = lo + (size_t)st->stage_layers[j * p + s] * K;
    for (k = 0; k < K; k++) cnt[k] += (double)(hi[k] - lo[k]);
  }
  for (k = 0; k < K; k++) {  /* by rate, ascending (a few kinds) */
    const kind_price *kp = &g->k[k];
    double keep = kp->act[ND_RECOMPUTE_SELECTIVE] < kp->act[ND_RECOMPUTE_FULL]
                  ? kp->act[ND_RECOMPUTE_SELECTIVE] : kp->act[ND_RECOMPUTE_FULL];
    double most = (double)kp->act[ND_RECOMPUTE_NONE] - keep
                + 2.5e-7 * kp->act[ND_RECOMPUTE_NONE], r;
    if (cnt[k] == 0.0 || !(kp->rate < HUGE_VAL) || !(most > 0.0)) continue;
    r = kp->rate / per;
    for (i = n; i > 0 && rate[i - 1] > r; i--) { rate[i] = rate[i - 1]; room[i] = room[i - 1]; }
    rate[i] = r;
    room[i] = cnt[k] * most * per;
    n++;
  }
  for (i = PLAN_SEGS; i < n; i++) room[PLAN_SEGS - 1] += room[i];  /* at the 4th's rate */
  mm->nseg[s] = n < PLAN_SEGS ? n : PLAN_SEGS;
  for (i = 0; i < mm->nseg[s]; i++) { mm->seg_rate[s][i] = rate[i]; mm->seg_room[s][i] = room[i]; }
  mm->built[s] = mm->gen;
}

/*
** What a plan's recompute adds to stage s's pace, at least, to remove `excess` bytes of its
** peak: each layer's modes cost it no less than its kind's least rate (rate: seconds per
** micro-batch per byte removed), and remove at most its kind's most (none's bytes less the
** least mode's), so the kinds taken cheapest first, each up to what its layers in the stage
** can remove, bound it (a fractional knapsack over the kinds; the stage's least rate for
** every byte, before: DeepSeek-V3 with recipes and HSDP priced 25,039 against 23,728). More
** than they can remove: what removing all of it costs (the memory bound refuses such a
** plan). The float prices' rounding down (under one step, 2^-23 of a value) is made up by
** 2.5e-7 of none's bytes in each kind's room.
*/
static double recompute_lo (const nd_bound *b, const group *g, const nd_strategy *st,
                            memo *mm, int s, double excess) {
  double t = 0.0;
  int i;
  if (mm->built[s] != mm->gen) plan_segments(b, g, st, mm, s);
  for (i = 0; i < mm->nseg[s] && excess > 0.0; i++) {
    double take = mm->seg_room[s][i] < excess ? mm->seg_room[s][i] : excess;
    t += take * mm->seg_rate[s][i];
    excess -= take;
  }
  return t;
}

/*
** The stages of mm at which a pair's memory bound (kd x pd + ke x pe + buffers + activations,
** kd and ke a pair's bytes per parameter, not negative) can peak, with ZeRO-3's gather
** buffers (z3) or without, into mm->peak_at[z3] (their count); each stage's buffers into
** mm->buf[z3]. A stage whose four figures are each at most another's is left out: each
** operation of the sum is monotone, rounding included, so its sum is at most the other's
** and the peak over those kept is the peak over all, to the bit. 1F1B's first stage holds
** the most activations, its last the head and the logits, the stages between the same
** layers: a few are kept of pp (every pair looked at each stage).
*/
static int peak_stages (const nd_bound *b, const nd_strategy *st, memo *mm, int z3) {
  int p = st->pp, s, i, n = 0;
  int *at = mm->peak_at[z3];
  const double *pd = mm->pd, *pe = mm->pe, *act = mm->act, *buf = mm->buf[z3];
  if (mm->peak_gen[z3] == mm->gen) return mm->npeak[z3];
  for (s = 0; s < p; s++) mm->buf[z3][s] = buffers_lo(b, st, z3, mm->gmax[s]);
  for (s = 0; s < p; s++) {
    int covered = 0, k = 0;
    for (i = 0; i < n && !covered; i++)
      covered = pd[s] <= pd[at[i]] && pe[s] <= pe[at[i]] && buf[s] <= buf[at[i]]
                && act[s] <= act[at[i]];
    if (covered) continue;
    for (i = 0; i < n; i++)  /* the kept ones s covers go */
      if (!(pd[at[i]] <= pd[s] && pe[at[i]] <= pe[s] && buf[at[i]] <= buf[s]
            && act[at[i]] <= act[s]))
        at[k++] = at[i];
    at[k++] = s;
    n = k;
  }
  mm->npeak[z3] = n;
  mm->peak_gen[z3] = mm->gen;
  return n;
}

/* The stage sums of c's layout (st resolved) in *mm, with its group in *g: 0, or -1 when
   no bound applies. */
static int layout_sums (nd_bound *b, const nd_candidate *c, const nd_strategy *st,
                        const group **g, memo **mm) {
  int p = st->pp, v = st->vpp;
  int mode = c->recompute < ND_RECOMPUTE_COUNT ? c->recompute : ND_RECOMPUTE_COUNT;
  memo *m;
  if (st->schedule == ND_SCHED_DUALPIPE || st->offload > 0.0 || p < 1 || p > ND_MAX_STAGES
      || (long long)p * v > ND_MAX_CHUNKS)
    return -1;
  *g = group_of(b, st);
  if (!(*g)->ok) return -1;
  m = *mm = &b->memo[st->sp ? 1 : 0];
  if (memcmp(m->key, (*g)->key, sizeof m->key) != 0 || m->p != p || m->v != v
      || m->mb != st->mb || m->layout != c->layout || m->mode != mode
      || m->schedule != (int)st->schedule) {
    m->key[0] = 0;
    if (stage_sums(b, *g, c, st, mode, m) != 0) return -1;
  }
  return 0;
}

/*
** DualPipe's step at least (st resolved, vpp 1): device s holds chunks s and p-1-s, and
** devices 0 and p-1 both ends of the model; each direction carries half the micro-batches,
** so a device's pace is the mean of its two chunks' work (the estimator's stage_ends), and
** that work is at least the chunks' forward and backward passes (kind_price.fb: the
** traffic hidden or not, recompute and the slowdown the overlap costs only add), the head's
** on devices 0 and p-1. The step is m x the slowest pace at least (its bubble, PP, DP and
** optimizer parts only add). Each device's parameters, both chunks' and on devices 0 and
** p-1 both ends', into pd[s] and pe[s] (pd NULL: not asked). 0, or -1 when no bound
** applies.
*/
static int dual_time (nd_bound *b, const nd_strategy *st, double *time_s, double *pd,
                      double *pe) {
  const group *g;
  int p = st->pp, K = b->nkinds, s, k, pos = 0;
  double chunk[ND_MAX_STAGES], cd[ND_MAX_STAGES], ce[ND_MAX_STAGES], slow = 0.0, head;
  if (st->offload > 0.0 || p < 2 || p % 2 != 0 || p > ND_MAX_STAGES || st->vpp != 1)
    return -1;  /* (an odd p's middle device would hold one chunk: DualPipe refuses it) */
  g = group_of(b, st);
  if (!g->ok) return -1;
  for (s = 0; s < p; s++) {
    int n = st->stage_layers[s], to = pos + n;
    const int *lo = b->prefix + (size_t)pos * K, *hi;
    if (n < 0 || to > b->total) return -1;
    hi = b->prefix + (size_t)to * K;
    chunk[s] = cd[s] = ce[s] = 0.0;
    for (k = 0; k < K; k++) {
      double cnt = (double)(hi[k] - lo[k]);
      chunk[s] += cnt * g->k[k].fb;
      cd[s] += cnt * g->k[k].pd;
      ce[s] += cnt * g->k[k].pe;
    }
    pos = to;
  }
  head = head_s(b, st);
  for (s = 0; s < p; s++) {
    int ends = s == 0 || s == p - 1;
    double pace = 0.5 * (chunk[s] + chunk[p - 1 - s] + (ends ? head : 0.0));
    if (pace > slow) slow = pace;
    if (pd) {  /* (the embedding's, the head's and its tied copy, vocabulary-parallel) */
      pd[s] = cd[s] + cd[p - 1 - s]
            + (ends ? (b->outer_first + b->outer_last + b->tied_copy) / st->tp : 0.0);
      pe[s] = ce[s] + ce[p - 1 - s];
    }
  }
  *time_s = slow * (double)st->mb + b->costs->step_overhead;
  return 0;
}

int nd_bound_layout_time (nd_bound *b, const nd_candidate *c, const nd_strategy *st,
                          double *time_s) {
  const group *g;
  memo *mm;
  if (st->schedule == ND_SCHED_DUALPIPE) return dual_time(b, st, time_s, NULL, NULL);
  if (layout_sums(b, c, st, &g, &mm) != 0) return -1;
  *time_s = mm->slow * ((double)st->mb + bubble_of(st->schedule, st->pp, st->vpp))
          + b->costs->step_overhead;
  return 0;
}

int nd_bound_eval_shards (nd_bound *b, const nd_candidate *c, const nd_strategy *st, int n,
                          const int *zero, const int *shard, double cut, double *time_s,
                          double *mem_b) {
  const nd_costs *co = b->costs;
  const group *g;
  memo *mm;
  dp_seen seen;
  int p = st->pp, v = st->vpp, s, i;
  int mode = c->recompute < ND_RECOMPUTE_COUNT ? c->recompute : ND_RECOMPUTE_COUNT;
  double bubble, frag = 1.0 + co->alloc_fragmentation;
  for (i = 0; i < n; i++) if (shard[i] < 1) return -1;
  if (st->schedule == ND_SCHED_DUALPIPE) {  /* the time; memory: the parameters' alone */
    double t, pd[ND_MAX_STAGES], pe[ND_MAX_STAGES];
    if (dual_time(b, st, &t, pd, pe) != 0) return -1;
    for (i = 0; i < n; i++) {
      double kd, ke, most = 0.0;
      param_bytes(b, st, zero[i], shard[i], &kd, &ke);
      for (s = 0; s < p; s++)
        if (kd * pd[s] + ke * pe[s] > most) most = kd * pd[s] + ke * pe[s];
      time_s[i] = t;
      mem_b[i] = most * frag + b->dev->reserve_bytes;
    }
    return 0;
  }
  if (layout_sums(b, c, st, &g, &mm) != 0) return -1;
  bubble = bubble_of(st->schedule, p, v);
  seen.n = 0;
  for (i = 0; i < n; i++) {
    double peak = 0.0, kd, ke, slow = mm->slow, budget = b->budget;
    int z3 = zero[i] == 3 && st->reshard, np, j;
    param_bytes(b, st, zero[i], shard[i], &kd, &ke);
    np = peak_stages(b, st, mm, z3);  /* (and each stage's buffers) */
    if (mode != ND_RECOMPUTE_COUNT)  /* only the peak: at the stages it can be at */
      for (j = 0; j < np; j++) {
        int at = mm->peak_at[z3][j];
        double bytes = kd * mm->pd[at] + ke * mm->pe[at] + mm->buf[z3][at] + mm->act[at];
        if (bytes > peak) peak = bytes;
      }
    else for (s = 0; s < p; s++) {
      double fixed = kd * mm->pd[s] + ke * mm->pe[s] + mm->buf[z3][s];
      double bytes = fixed + mm->act[s];
      if (bytes > peak) peak = bytes;
      if (mode == ND_RECOMPUTE_COUNT && budget > 0.0) {
        /* a plan that fits removes at least the stage's excess with every layer kept
           (recompute_lo: each kind's bytes at no less than its least rate) */
        double excess = (fixed + mm->act_none[s]) * frag + b->dev->reserve_bytes - budget;
        if (excess > 0.0) {
          double paced = mm->time[s] + recompute_lo(b, g, st, mm, s, excess);
          if (paced > slow) slow = paced;
        }
      }
    }
    time_s[i] = slow * ((double)st->mb + bubble) + co->step_overhead;
    if (!(time_s[i] * (1.0 - 1e-9) > cut))  /* (past the cut already: the DP part only adds) */
      time_s[i] += dp_lo(b, st, mm, zero[i], shard[i], slow, &seen);
    mem_b[i] = peak * frag + b->dev->reserve_bytes;
  }
  return 0;
}

int nd_bound_eval (nd_bound *b, const nd_candidate *c, const nd_strategy *st, double *time_s,
                   double *mem_b) {
  int zero = st->zero, shard = st->dp_shard;
  return nd_bound_eval_shards(b, c, st, 1, &zero, &shard, HUGE_VAL, time_s, mem_b);
}
