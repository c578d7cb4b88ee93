/*
** test_refusal.c -- nd_strategy_check: one refusal code per rule, the code the search
** counts and the label its message begins with (the two must name the same rule, since
** nothing recovers a code from text any more); nd_strategy_resolve_to on a const input;
** resolving a resolved strategy again changes nothing.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/strategy.h"

#include "fixtures.h"

/* A small MoE model: 8 layers, 16 heads (4 KV heads), 8 experts of width 1000. */
static void small_moe (nd_model_spec *m) {
  nd_model_init(m);
  strcpy(m->name, "small-moe");
  m->hidden_size = 1024; m->num_layers = 8; m->num_heads = 16; m->num_kv_heads = 4;
  m->head_dim = 64; m->ffn_size = 0; m->vocab_size = 32000;
  m->num_experts = 8; m->top_k = 2; m->moe_ffn_size = 1000;
  nd_model_default_stack(m);
}

typedef struct rcase {
  const char *what;
  int tp, pp, vpp, cp, ep, etp, sp, mbs, zero, devices, seq;
  long long batch;
  int expect;   /* nd_refusal, or -1: runs */
} rcase;

static const rcase cases[] = {
  {"runs", 2, 2, 1, 1, 4, 1, 1, 1, 1, 16, 4096, 64, -1},
  {"interleaved runs", 2, 2, 2, 1, 2, 1, 1, 1, 0, 16, 4096, 64, -1},
  {"tp over the heads", 32, 1, 1, 1, 1, 1, 1, 1, 0, 32, 4096, 64, ND_REFUSE_BOUNDS},
  {"devices not a multiple", 2, 3, 1, 1, 1, 1, 1, 1, 0, 16, 4096, 64, ND_REFUSE_BOUNDS},
  {"zero 4", 1, 1, 1, 1, 1, 1, 0, 1, 4, 8, 4096, 64, ND_REFUSE_BOUNDS},
  {"ep over the experts", 1, 1, 1, 1, 16, 1, 0, 1, 0, 16, 4096, 64, ND_REFUSE_EP_OVER},
  {"ep does not divide the experts", 1, 1, 1, 1, 3, 1, 0, 1, 0, 12, 4096, 48, ND_REFUSE_EP_DIV},
  {"etp does not divide the width", 16, 1, 1, 1, 1, 16, 1, 1, 0, 16, 4096, 64, ND_REFUSE_EP_DIV},
  {"etp 8 over width 1000", 8, 1, 1, 1, 1, 8, 1, 1, 0, 8, 4096, 64, -1},
  {"MoE tp without sp", 2, 1, 1, 1, 1, 1, 0, 1, 0, 8, 4096, 64, ND_REFUSE_SP},
  {"cp splits the sequence unevenly", 1, 1, 1, 3, 1, 1, 0, 1, 0, 3, 4096, 3, ND_REFUSE_CP},
  {"batch not a multiple", 1, 1, 1, 1, 1, 1, 0, 3, 0, 8, 4096, 64, ND_REFUSE_BATCH},
  {"interleaving, mb not a multiple of pp", 1, 4, 2, 1, 1, 1, 0, 1, 0, 8, 4096, 6,
   ND_REFUSE_SCHEDULE},
  {"interleaving without a pipeline", 1, 1, 2, 1, 1, 1, 0, 1, 0, 4, 4096, 16, ND_REFUSE_LAYOUT},
};

static void load (nd_strategy *st, const rcase *k) {
  nd_strategy_init(st);
  st->tp = k->tp; st->pp = k->pp; st->vpp = k->vpp; st->cp = k->cp; st->ep = k->ep;
  st->etp = k->etp; st->sp = k->sp; st->mbs = k->mbs; st->zero = k->zero;
}

static void check_codes (const nd_model_spec *m) {
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const rcase *k = &cases[i];
    nd_job job;
    nd_strategy st;
    char err[256];
    int r, again;
    job.devices = k->devices; job.seq_len = k->seq; job.global_batch = k->batch;
    load(&st, k);
    err[0] = '\0';
    r = nd_strategy_check(&st, m, &job, err, sizeof err);
    CHECK(r == k->expect, "%s: code %d, expected %d (%s)", k->what, r, k->expect, err);
    if (r >= 0) {  /* out of bounds also counts the rules that name their field (devices:) */
      const char *label = nd_refusal_label((nd_refusal)r);
      CHECK(label && (strncmp(err, label, strlen(label)) == 0
                      || (r == ND_REFUSE_BOUNDS && strchr(err, ':'))),
            "%s: message '%s' does not begin with its label '%s'", k->what, err,
            label ? label : "?");
    }
    /* the same without a message: the same code */
    load(&st, k);
    again = nd_strategy_check(&st, m, &job, NULL, 0);
    CHECK(again == r, "%s: %d without a message, %d with one", k->what, again, r);
    /* resolve agrees */
    load(&st, k);
    CHECK((nd_strategy_resolve(&st, m, &job, err, sizeof err) == 0) == (r < 0),
          "%s: resolve and check disagree", k->what);
  }
}

/* resolve_to leaves its input alone; resolving the result again gives the same bytes. */
static void check_resolve_to (const nd_model_spec *m) {
  nd_strategy in, out, twice, before;
  nd_job job = {16, 64, 4096};
  char err[256];
  load(&in, &cases[1]);  /* pp 2, vpp 2: interleaved */
  before = in;
  CHECK(nd_strategy_resolve_to(&in, m, &job, &out, err, sizeof err) == 0, "resolve_to: %s", err);
  CHECK(memcmp(&in, &before, sizeof in) == 0, "resolve_to changed its input");
  CHECK(out.dp == 4 && out.mb == 16 && out.schedule == ND_SCHED_INTERLEAVED,
        "resolved dp %d mb %d schedule %d", out.dp, out.mb, (int)out.schedule);
  CHECK(nd_strategy_resolve_to(&out, m, &job, &twice, err, sizeof err) == 0, "again: %s", err);
  CHECK(memcmp(&out, &twice, sizeof out) == 0, "resolving a resolved strategy changed it");
  CHECK(nd_strategy_resolve_to(&out, m, &job, &out, err, sizeof err) == 0
        && memcmp(&out, &twice, sizeof out) == 0, "resolve_to in place");
}

int main (void) {
  nd_model_spec *m = (nd_model_spec *)malloc(sizeof *m);
  if (!m) return 1;
  small_moe(m);
  check_codes(m);
  check_resolve_to(m);
  free(m);
  if (failures) fprintf(stderr, "%d failures\n", failures);
  return failures ? 1 : 0;
}
