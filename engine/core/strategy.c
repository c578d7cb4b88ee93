/*
** strategy.c -- a parallel strategy: defaults, the checks that refuse what cannot run,
** the derived micro-batch count and the layer layout over pipeline stages.
*/
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ndplan/strategy.h"

static const char *const schedule_names[ND_SCHED_COUNT] = {"1f1b", "interleaved", "gpipe", "zb",
                                                            "dualpipe"};
static const char *const recompute_names[ND_RECOMPUTE_COUNT] = {"none", "selective", "full"};

const char *nd_schedule_name (nd_schedule s) {
  return (unsigned)s < ND_SCHED_COUNT ? schedule_names[s] : NULL;
}

const char *nd_recompute_name (nd_recompute r) {
  return (unsigned)r < ND_RECOMPUTE_COUNT ? recompute_names[r] : NULL;
}

int nd_schedule_parse (const char *name, nd_schedule *out) {
  int i;
  for (i = 0; i < ND_SCHED_COUNT; i++)
    if (strcmp(name, schedule_names[i]) == 0) { *out = (nd_schedule)i; return 0; }
  return -1;
}

int nd_recompute_parse (const char *name, nd_recompute *out) {
  int i;
  if (strcmp(name, "off") == 0) { *out = ND_RECOMPUTE_NONE; return 0; }
  for (i = 0; i < ND_RECOMPUTE_COUNT; i++)
    if (strcmp(name, recompute_names[i]) == 0) { *out = (nd_recompute)i; return 0; }
  return -1;
}

void nd_strategy_init (nd_strategy *st) {
  memset(st, 0, sizeof *st);
  st->dp = 0;  /* derived from the device count */
  st->tp = st->pp = st->vpp = st->cp = st->ep = st->etp = 1;
  st->mbs = 1;
  st->schedule = ND_SCHED_1F1B;
  st->recompute = ND_RECOMPUTE_NONE;
  st->selective_ops = ND_OP_BIT(ND_OP_ATTN_CORE);  /* Megatron's classic selective */
  st->precision = ND_RECIPE_BF16;
  st->param_gather = 0;
  st->bf16_first = st->bf16_last = -1;
  st->flash_attention = 1;
}

static const char *const op_names[ND_OP_COUNT] = {"attn_core", "norms", "act", "mla_up",
                                                  "moe_dispatch"};

const char *nd_op_name (int op) {
  return op >= 0 && op < ND_OP_COUNT ? op_names[op] : NULL;
}

int nd_op_parse (const char *name, int *op) {
  int i;
  for (i = 0; i < ND_OP_COUNT; i++)
    if (strcmp(name, op_names[i]) == 0) { *op = i; return 0; }
  return -1;
}

static int refuse (char *err, size_t len, const char *fmt, ...) {
  if (err && len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/*
** The even layout: body layers spread over pp*vpp chunks (the remainder going to the
** middle stages, which carry neither the embedding nor the head), MTP layers on the last.
** Stored per stage in stage_layers; chunks of one stage hold equal shares.
*/
static void even_layout (nd_strategy *st, int body, int mtp) {
  int p = st->pp, s, base = body / p, extra = body % p;
  for (s = 0; s < p; s++) st->stage_layers[s] = base;
  /* extra < p, so stages 1..extra absorb it: stage 0 keeps the most micro-batches in
     flight and the embedding, so it never takes more */
  for (s = 1; s <= extra; s++) st->stage_layers[s]++;
  st->stage_layers[p - 1] += mtp;
}

int nd_strategy_resolve (nd_strategy *st, const nd_model_spec *m, const nd_job *job,
                         char *err, size_t errlen) {
  int body = (int)m->num_layers, mtp = (int)m->mtp_layers, s, sum = 0, explicit_layout = 0;
  long long per_replica;
  if (st->tp < 1 || st->pp < 1 || st->cp < 1 || st->ep < 1 || st->etp < 1 || st->vpp < 1
      || st->mbs < 1 || st->dp < 0 || st->mb < 0)
    return refuse(err, errlen, "degree out of bounds: every degree must be at least 1");
  if (st->zero < 0 || st->zero > 3)
    return refuse(err, errlen, "zero: expected 0, 1, 2 or 3, got %d", st->zero);
  if (job->devices < 1) return refuse(err, errlen, "devices: must be at least 1");
  if (job->seq_len < 1) return refuse(err, errlen, "seq_len: must be at least 1");
  if (job->global_batch < 1) return refuse(err, errlen, "global_batch: must be at least 1");
  if (st->pp > ND_MAX_STAGES)
    return refuse(err, errlen, "degree out of bounds: pp %d over %d", st->pp, ND_MAX_STAGES);
  if (st->dp == 0) {
    long long mp = (long long)st->tp * st->cp * st->pp;
    if (job->devices % mp != 0)
      return refuse(err, errlen, "devices: %d is not a multiple of tp*cp*pp = %lld",
                    job->devices, mp);
    st->dp = (int)(job->devices / mp);
  }
  if ((long long)st->dp * st->tp * st->cp * st->pp != job->devices)
    return refuse(err, errlen, "devices: dp*tp*cp*pp = %lld, not the %d devices",
                  (long long)st->dp * st->tp * st->cp * st->pp, job->devices);
  /* model divisibility */
  if (m->num_heads % st->tp != 0)
    return refuse(err, errlen, "degree out of bounds: tp %d does not divide %lld heads",
                  st->tp, (long long)m->num_heads);
  if (m->num_kv_heads > 0 && m->num_kv_heads % st->tp != 0 && st->tp % m->num_kv_heads != 0)
    return refuse(err, errlen, "degree out of bounds: tp %d and %lld KV heads (one must "
                  "divide the other)", st->tp, (long long)m->num_kv_heads);
  if (st->pp > body)
    return refuse(err, errlen, "degree out of bounds: pp %d over %d layers", st->pp, body);
  if (st->sp && st->tp == 1) st->sp = 0;  /* nothing to split */
  /* experts */
  if (m->num_experts > 0) {
    long long dense_group = (long long)st->tp * st->cp * st->dp;
    if (st->ep > m->num_experts || (long long)st->ep * st->etp > dense_group)
      return refuse(err, errlen, "EP over the experts or DP x TP: ep %d x etp %d, %lld "
                    "experts, dp*cp*tp %lld", st->ep, st->etp, (long long)m->num_experts,
                    dense_group);
    if (m->num_experts % st->ep != 0 || dense_group % ((long long)st->ep * st->etp) != 0)
      return refuse(err, errlen, "EP divisibility: ep %d must divide %lld experts and "
                    "ep*etp must divide dp*cp*tp %lld", st->ep, (long long)m->num_experts,
                    dense_group);
    if (st->tp > 1 && !st->sp)
      return refuse(err, errlen, "filtered out: MoE with tensor parallelism needs "
                    "sequence parallelism");
  }
  else if (st->ep != 1 || st->etp != 1)
    return refuse(err, errlen, "EP over the experts or DP x TP: the model has no experts");
  /* context parallelism: a load-balanced causal split needs 2*cp chunks */
  if (st->cp > 1 && job->seq_len % (2 * st->cp) != 0)
    return refuse(err, errlen, "CP constraints: seq_len %d is not a multiple of 2*cp = %d",
                  job->seq_len, 2 * st->cp);
  /* global batch = dp * mb * mbs */
  per_replica = (long long)st->dp * st->mbs;
  if (job->global_batch % per_replica != 0)
    return refuse(err, errlen, "global batch: %lld is not a multiple of dp*mbs = %lld",
                  job->global_batch, per_replica);
  if (st->mb == 0) st->mb = (int)(job->global_batch / per_replica);
  else if ((long long)st->mb * per_replica != job->global_batch)
    return refuse(err, errlen, "global batch: dp*mb*mbs = %lld, not %lld",
                  (long long)st->mb * per_replica, job->global_batch);
  /* schedule */
  if (st->vpp > 1) st->schedule = ND_SCHED_INTERLEAVED;
  else if (st->schedule == ND_SCHED_INTERLEAVED) st->schedule = ND_SCHED_1F1B;
  if (st->schedule == ND_SCHED_INTERLEAVED) {
    if (st->pp == 1)
      return refuse(err, errlen, "filtered out: interleaving (vpp %d) needs pp > 1", st->vpp);
    if (body % (st->pp * st->vpp) != 0)
      return refuse(err, errlen, "filtered out: %d layers do not split into pp*vpp = %d "
                    "equal chunks", body, st->pp * st->vpp);
    if (st->mb % st->pp != 0)
      return refuse(err, errlen, "filtered out: interleaving needs micro-batches (%d) to "
                    "be a multiple of pp (%d)", st->mb, st->pp);
  }
  if (st->schedule == ND_SCHED_DUALPIPE) {  /* the DualPipe README's requirements */
    if (st->pp < 2 || st->pp % 2 != 0)
      return refuse(err, errlen, "filtered out: dualpipe needs an even pp >= 2, got %d", st->pp);
    if (st->mb < 2 * st->pp || st->mb % 2 != 0)
      return refuse(err, errlen, "filtered out: dualpipe needs an even number of "
                    "micro-batches >= 2*pp = %d, got %d", 2 * st->pp, st->mb);
  }
  if (!(st->offload >= 0.0 && st->offload <= 1.0))
    return refuse(err, errlen, "offload: expected a share in [0, 1], got %g", st->offload);
  if (st->zero == 3 && st->pp > 1)
    return refuse(err, errlen, "filtered out: ZeRO-3 does not combine with pipeline "
                  "parallelism");
  /* layout */
  for (s = 0; s < st->pp; s++) {
    if (st->stage_layers[s] < 0)
      return refuse(err, errlen, "stage_layers: stage %d has a negative count", s);
    if (st->stage_layers[s] > 0) explicit_layout = 1;
    sum += st->stage_layers[s];
  }
  for (s = st->pp; s < ND_MAX_STAGES; s++) st->stage_layers[s] = 0;
  if (explicit_layout) {
    if (st->vpp > 1)
      return refuse(err, errlen, "stage_layers: an explicit layout needs vpp = 1");
    if (sum != body + mtp)
      return refuse(err, errlen, "stage_layers: the stages hold %d layers, the model has %d",
                    sum, body + mtp);
    for (s = 0; s < st->pp; s++)
      if (st->stage_layers[s] == 0)
        return refuse(err, errlen, "stage_layers: stage %d has no layer", s);
  }
  else even_layout(st, body, mtp);
  if (st->per_layer)
    for (s = 0; s < body + mtp; s++) {
      if (st->layer_recompute[s] >= ND_RECOMPUTE_COUNT)
        return refuse(err, errlen, "recompute: layer %d has an unknown mode", s);
      if (st->layer_ops[s] >= ND_OP_MASKS)
        return refuse(err, errlen, "recompute: layer %d has unknown selective switches", s);
    }
  return 0;
}

/*
** Which layers a stage holds: contiguous for vpp = 1 (DualPipe adds stage pp-1-s as
** chunk 1); with interleaving, chunk c of stage
** s holds body layers [(c*pp + s)*L/(pp*vpp), ...) and MTP layers go to the last stage.
** Calls fn(layer, chunk, ud) for each, in the order the stage runs its chunks.
*/
void nd_stage_foreach (const nd_strategy *st, int body, int mtp, int s,
                       void (*fn)(int layer, int chunk, void *ud), void *ud) {
  int i, c;
  if (st->vpp <= 1) {
    int first = 0, mirror = st->pp - 1 - s;
    for (i = 0; i < s; i++) first += st->stage_layers[i];
    for (i = 0; i < st->stage_layers[s]; i++) fn(first + i, 0, ud);
    if (st->schedule == ND_SCHED_DUALPIPE && mirror != s) {  /* the reverse direction's stage */
      for (first = 0, i = 0; i < mirror; i++) first += st->stage_layers[i];
      for (i = 0; i < st->stage_layers[mirror]; i++) fn(first + i, 1, ud);
    }
    return;
  }
  {
    int per_chunk = body / (st->pp * st->vpp);
    for (c = 0; c < st->vpp; c++)
      for (i = 0; i < per_chunk; i++) fn((c * st->pp + s) * per_chunk + i, c, ud);
    if (s == st->pp - 1)
      for (i = 0; i < mtp; i++) fn(body + i, st->vpp - 1, ud);
  }
}
