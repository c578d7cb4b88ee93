/*
** test_layout.c -- pipeline layouts against an independent oracle: Megatron-Core's own
** formulas for the layers a (pipeline rank, virtual stage) builds and their offset
** (get_num_layers_to_build, get_transformer_layer_offset), written out directly here
** rather than through the chunk sizes the core builds; the refusals Megatron makes; the
** layout language; resolve run twice; degree products that would wrap.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/estimate.h"
#include "ndplan/strategy.h"

static int failures = 0;

#define CHECK(cond, ...) \
  do { if (!(cond)) { fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
                      fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } } \
  while (0)

typedef struct lcase { int layers, pp, vpp, emb, loss, first, last; } lcase;

/* Megatron's decoder layers built on (pp rank r, virtual stage c). */
static int oracle_count (const lcase *k, int r, int c) {
  int per_rank, n;
  if (k->first || k->last) {
    int dist = k->layers, left = k->pp;
    if (k->first) { dist -= k->first; left--; }
    if (k->last) { dist -= k->last; left--; }
    per_rank = left > 0 ? dist / left : 0;
    if (r == 0 && k->first) per_rank = k->first;
    if (r == k->pp - 1 && k->last) per_rank = k->last;
  }
  else per_rank = (k->layers + k->emb + k->loss) / k->pp;
  n = k->vpp > 1 ? per_rank / k->vpp : per_rank;
  if (k->emb && r == 0 && c == 0) n--;
  if (k->loss && r == k->pp - 1 && c == k->vpp - 1) n--;
  return n;
}

/* Megatron's index of the first decoder layer of (r, c). */
static int oracle_offset (const lcase *k, int r, int c) {
  int v = k->vpp, off;
  if (k->pp == 1) return 0;
  if (k->first || k->last) {
    int mid_stages = k->pp - (k->first != 0) - (k->last != 0);
    int mid_layers = k->layers - k->first - k->last, mid_rank = k->first ? r - 1 : r;
    if (v > 1) {
      int fc = k->first / v, lc = k->last / v, mc = mid_layers / v, total = fc + mc + lc;
      if (r == 0) return c * total;
      return c * total + fc + mid_rank * (mid_stages > 0 ? mc / mid_stages : 0);
    }
    if (r == 0) return 0;
    return mid_rank * (mid_stages > 0 ? mid_layers / mid_stages : 0) + k->first;
  }
  {
    int n = k->layers + k->emb + k->loss, per_rank = n / k->pp;
    if (v > 1) off = c * (n / v) + r * (per_rank / v);
    else off = r * per_rank;
    if (k->emb && !(c == 0 && r == 0)) off--;
  }
  return off;
}

static void set_case (nd_strategy *st, const lcase *k) {
  nd_strategy_init(st);
  st->pp = k->pp; st->vpp = k->vpp;
  st->account = (unsigned char)((k->emb ? ND_ACCOUNT_EMBEDDING : 0) | (k->loss ? ND_ACCOUNT_LOSS : 0));
  st->first_layers = (short)k->first; st->last_layers = (short)k->last;
}

static void check_against_megatron (void) {
  static const lcase cases[] = {
    {126, 8, 8, 1, 1, 0, 0}, {126, 8, 1, 1, 1, 0, 0}, {30, 4, 2, 1, 1, 0, 0},
    {62, 8, 4, 1, 1, 0, 0}, {127, 8, 1, 1, 0, 0, 0}, {63, 4, 2, 0, 1, 0, 0},
    {61, 4, 1, 0, 0, 13, 14}, {64, 4, 2, 0, 0, 14, 18}, {62, 8, 2, 0, 0, 6, 8},
    {62, 4, 1, 0, 0, 14, 0}, {46, 4, 2, 0, 0, 0, 10}, {96, 8, 12, 0, 0, 0, 0},
    {96, 8, 4, 0, 0, 0, 0}, {61, 2, 1, 0, 0, 30, 31},
  };
  size_t i;
  int mtp;
  for (mtp = 0; mtp <= 1; mtp++)
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      const lcase *k = &cases[i];
      nd_strategy st;
      char err[256];
      int r, c;
      set_case(&st, k);
      if (nd_layout_resolve(&st, k->layers, mtp, err, sizeof err) != 0) {
        CHECK(0, "case %zu (%d layers, pp %d, vpp %d) refused: %s", i, k->layers, k->pp, k->vpp, err);
        continue;
      }
      for (r = 0; r < k->pp; r++)
        for (c = 0; c < k->vpp; c++) {
          int first, n = nd_chunk_layers(&st, r, c, &first);
          int extra = mtp && r == k->pp - 1 && c == k->vpp - 1;  /* MTP rides with the loss */
          CHECK(n - extra == oracle_count(k, r, c), "case %zu mtp %d (%d, %d): %d layers, "
                "Megatron builds %d", i, mtp, r, c, n - extra, oracle_count(k, r, c));
          CHECK(first == oracle_offset(k, r, c), "case %zu mtp %d (%d, %d): offset %d, "
                "Megatron's %d", i, mtp, r, c, first, oracle_offset(k, r, c));
        }
    }
}

/* What Megatron refuses, refused under "layout" (with the hint where one exists). */
static void check_refusals (void) {
  static const struct { lcase k; const char *want; } bad[] = {
    {{126, 8, 8, 1, 0, 0, 0}, "split into 64 chunks of 2 with --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"},
    {{126, 8, 3, 1, 1, 0, 0}, "16 layers per stage with --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split do not divide over vpp 3"},
    {{64, 4, 2, 0, 0, 13, 18}, "multiples of vpp 2"},
    {{64, 4, 1, 1, 0, 16, 0}, "cannot be set with"},
    {{64, 4, 1, 0, 0, 15, 0}, "49 middle layers do not divide over 3 middle stages"},
    {{64, 2, 1, 0, 0, 30, 30}, "4 middle layers remain for 0 middle stages"},
    {{64, 4, 2, 0, 0, 14, 16}, "17 layers per middle stage do not divide over vpp 2"},
  };
  size_t i;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    nd_strategy st;
    char err[256] = "";
    set_case(&st, &bad[i].k);
    CHECK(nd_layout_resolve(&st, bad[i].k.layers, 0, err, sizeof err) != 0, "case %zu accepted", i);
    CHECK(strncmp(err, "layout: ", 8) == 0 && strstr(err, bad[i].want) != NULL,
          "case %zu: '%s' lacks '%s'", i, err, bad[i].want);
  }
}

static int parse (nd_strategy *st, int pp, const char *text, char *err, size_t len) {
  nd_strategy_init(st);
  st->pp = pp;
  return nd_layout_parse(st, text, err, len);
}

static void check_language (void) {
  static const struct { int pp; const char *text, *want; } bad[] = {
    {2, "tE|L", "first layer must be the embedding"},
    {2, "Et|Lt", "last layer must be the loss"},
    {2, "EEt|L", "exactly once"},
    {2, "Et|tL|L", "not a multiple of pp 2"},
    {2, "Ex|L", "invalid layer character 'x'"},
    {2, "((t|)*2)*2E|L", "invalid layer character '('"},  /* Megatron does not nest groups */
    {2, "Etm|tL", "must come before MTP"},
    {2, "Ettt|m||L", "last chunk of their stage"},
    {2, "Et*2000000000|L", "expands to more than"},
    {2, "E(t|)*99999999L", "expands to more than"},
    {2, "Et*40000|L", "chunk 0 holds 40000 layers, over 1024"},  /* a chunk's count is a short */
    {1, "", "first layer must be the embedding"},
  };
  nd_strategy st;
  char err[256], text[512];
  size_t i;
  int k;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = '\0';
    CHECK(parse(&st, bad[i].pp, bad[i].text, err, sizeof err) != 0, "'%s' accepted", bad[i].text);
    CHECK(strstr(err, bad[i].want) != NULL, "'%s': '%s' lacks '%s'", bad[i].text, err, bad[i].want);
  }
  /* Megatron's own example: 61 layers + 1 MTP on pp 16 x vpp 2 */
  CHECK(parse(&st, 16, "Et*3|(tt|)*29,m|L", err, sizeof err) == 0, "example: %s", err);
  CHECK(st.vpp == 2 && st.layout_mtp == 1, "vpp %d, mtp %d", st.vpp, st.layout_mtp);
  CHECK(st.stage_layers[0] == 3 && st.stage_layers[29] == 2 && st.stage_layers[30] == 1
        && st.stage_layers[31] == 0, "chunks %d %d %d %d", st.stage_layers[0],
        st.stage_layers[29], st.stage_layers[30], st.stage_layers[31]);
  CHECK(nd_layout_resolve(&st, 61, 1, err, sizeof err) == 0, "resolve: %s", err);
  CHECK(nd_layout_resolve(&st, 60, 1, err, sizeof err) != 0 && strstr(err, "61 decoder"),
        "60 layers: %s", err);
  CHECK(nd_layout_resolve(&st, 61, 0, err, sizeof err) != 0 && strstr(err, "1 MTP"),
        "no MTP: %s", err);
  /* the most layers a model has fit one chunk */
  CHECK(parse(&st, 1, "Et*1024L", err, sizeof err) == 0 && st.stage_layers[0] == 1024,
        "1024 layers in a chunk: %s, %d", err, st.stage_layers[0]);
  /* an MTP layer on stage 0's last chunk is allowed (Megatron's rule is for earlier ones) */
  CHECK(parse(&st, 2, "Ett|tt|m|L", err, sizeof err) == 0, "mtp on stage 0: %s", err);
  /* a vpp already set must agree */
  nd_strategy_init(&st); st.pp = 2; st.vpp = 4;
  CHECK(nd_layout_parse(&st, "Et|tL", err, sizeof err) != 0 && strstr(err, "conflicts"), "%s", err);
  /* written and read back: the same chunks, the same text */
  {
    static const lcase forms[] = {{126, 8, 8, 1, 1, 0, 0}, {61, 4, 1, 0, 0, 13, 14},
                                  {29, 4, 2, 0, 0, 0, 0}, {96, 8, 12, 0, 0, 0, 0}};
    size_t f;
    for (f = 0; f < sizeof forms / sizeof forms[0]; f++) {
      nd_strategy a, b;
      char again[512];
      int n;
      set_case(&a, &forms[f]);
      CHECK(nd_layout_resolve(&a, forms[f].layers, 1, err, sizeof err) == 0, "%s", err);
      n = nd_layout_format(&a, forms[f].layers, 1, text, sizeof text);
      CHECK(n > 0 && (size_t)n < sizeof text, "format %zu: %d", f, n);
      CHECK(parse(&b, forms[f].pp, text, err, sizeof err) == 0, "'%s': %s", text, err);
      CHECK(b.vpp == forms[f].vpp, "'%s': vpp %d", text, b.vpp);
      CHECK(nd_layout_resolve(&b, forms[f].layers, 1, err, sizeof err) == 0, "'%s': %s", text, err);
      for (k = 0; k < forms[f].pp * forms[f].vpp; k++)
        CHECK(a.stage_layers[k] == b.stage_layers[k], "'%s': chunk %d %d vs %d", text, k,
              a.stage_layers[k], b.stage_layers[k]);
      nd_layout_format(&b, forms[f].layers, 1, again, sizeof again);
      CHECK(strcmp(text, again) == 0, "'%s' then '%s'", text, again);
    }
  }
}

static void small_model (nd_model_spec *m, int layers) {
  nd_model_init(m);
  strcpy(m->name, "small");
  m->hidden_size = 1024; m->num_layers = layers; m->num_heads = 16; m->num_kv_heads = 16;
  m->head_dim = 64; m->ffn_size = 4096; m->vocab_size = 32000;
  nd_model_default_stack(m);
}

/* nd_strategy_resolve twice: the same layout; degree products that would wrap. */
static void check_resolve (void) {
  nd_model_spec *m = (nd_model_spec *)malloc(sizeof *m);
  nd_strategy st, once;
  nd_job job = {64, 64, 4096};
  char err[256];
  small_model(m, 30);
  nd_strategy_init(&st);
  st.pp = 4; st.vpp = 2; st.mbs = 1;
  CHECK(nd_strategy_resolve(&st, m, &job, err, sizeof err) == 0, "first: %s", err);
  once = st;
  CHECK(nd_strategy_resolve(&st, m, &job, err, sizeof err) == 0, "second: %s", err);
  CHECK(memcmp(once.stage_layers, st.stage_layers, 8 * sizeof st.stage_layers[0]) == 0
        && once.dp == st.dp && once.mb == st.mb, "the second resolve changed the strategy");
  /* the even split of 30 layers over 8 chunks: chunks 1-6 hold 4, the first and last 3 */
  CHECK(st.stage_layers[0] == 3 && st.stage_layers[1] == 4 && st.stage_layers[7] == 3,
        "even: %d %d %d", st.stage_layers[0], st.stage_layers[1], st.stage_layers[7]);
  nd_strategy_init(&st);
  st.pp = 8; st.vpp = 536870916;
  job.devices = 64;
  CHECK(nd_strategy_resolve(&st, m, &job, err, sizeof err) != 0
        && strstr(err, "degree out of bounds"), "pp*vpp wraps: %s", err);
  nd_strategy_init(&st);
  st.tp = 536870912; st.cp = 536870912; st.pp = 64;
  CHECK(nd_strategy_resolve(&st, m, &job, err, sizeof err) != 0
        && strstr(err, "degree out of bounds"), "tp*cp*pp wraps: %s", err);
  nd_strategy_init(&st);
  st.tp = 65536; st.cp = 65536; st.pp = 2;
  job.devices = 1 << 30;
  CHECK(nd_strategy_resolve(&st, m, &job, err, sizeof err) != 0 && strstr(err, "devices"),
        "tp*cp*pp over the devices: %s", err);
  free(m);
}

/* In flight on an interleaved stage: the layers of the chunks actually in flight. */
static void check_inflight (void) {
  nd_strategy st;
  char err[256];
  nd_strategy_init(&st);
  st.pp = 4; st.vpp = 2; st.mb = 8; st.schedule = ND_SCHED_INTERLEAVED;
  CHECK(nd_layout_resolve(&st, 32, 0, err, sizeof err) == 0, "%s", err);
  /* equal chunks: warm-up (p-s-1)*2 + (v-1)*p + 1 chunk forwards, 1/v of the stage each */
  CHECK(nd_inflight(&st, 0) == (3 * 2 + 4 + 1) / 2.0, "even: %g", nd_inflight(&st, 0));
  /* stage 0 with chunks of 1 and 7 layers: 11 forwards, 4 of chunk 0, 4 of chunk 1, then
     3 of chunk 0 again: (7 * 1 + 4 * 7) / 8 stage-equivalents */
  st.explicit_layout = ND_LAYOUT_CHUNKS;
  st.stage_layers[0] = 1; st.stage_layers[4] = 7;
  CHECK(nd_inflight(&st, 0) == (7.0 * 1 + 4.0 * 7) / 8.0, "uneven: %g", nd_inflight(&st, 0));
}

int main (void) {
  check_against_megatron();
  check_refusals();
  check_language();
  check_resolve();
  check_inflight();
  if (failures) fprintf(stderr, "%d failures\n", failures);
  return failures ? 1 : 0;
}
