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
  for (i = 0; i < ND_RECOMPUTE_COUNT; i++)
    if (strcmp(name, recompute_names[i]) == 0) { *out = (nd_recompute)i; return 0; }
  return -1;
}

nd_schedule nd_schedule_of (nd_schedule s, int vpp) {
  if (vpp > 1) return ND_SCHED_INTERLEAVED;
  return s == ND_SCHED_INTERLEAVED ? ND_SCHED_1F1B : s;
}

int nd_schedule_megatron (nd_schedule s) {
  return s == ND_SCHED_1F1B || s == ND_SCHED_INTERLEAVED;
}

int nd_pipeline_warmup (const nd_strategy *st, int s) {
  int p = st->pp, m = st->mb, v = st->vpp, w;
  switch (st->schedule) {
    case ND_SCHED_GPIPE: return m;
    case ND_SCHED_INTERLEAVED:
      w = (p - s - 1) * 2 + (v - 1) * p;
      return w < m * v ? w : m * v;
    default:
      w = p - s - 1;
      return w < m ? w : m;
  }
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
  st->reshard = -1;  /* the trainer's default for the pipeline degree */
  st->flash_attention = 1;
  st->layers = NULL;  /* the whole-model mode */
}

void nd_strategy_own_plan (nd_strategy *dst, const nd_strategy *src, nd_layer_plan *storage,
                           int layers) {
  const nd_layer_plan *from = src->layers;
  *dst = *src;
  if (!from) return;
  if (from != storage) {
    size_t n = layers < 0 ? 0 : layers > ND_MAX_LAYERS ? ND_MAX_LAYERS : (size_t)layers;
    memcpy(storage->recompute, from->recompute, n);
    memcpy(storage->offload, from->offload, n);
    memcpy(storage->ops, from->ops, n);
  }
  dst->layers = storage;
}

static const char *const op_names[ND_OP_COUNT] = {"attn_core", "norms", "act", "mla_up",
                                                  "moe_dispatch", "alt_mm"};

const char *nd_op_name (int op) {
  return op >= 0 && op < ND_OP_COUNT ? op_names[op] : NULL;
}

int nd_op_parse (const char *name, int *op) {
  int i;
  for (i = 0; i < ND_OP_COUNT; i++)
    if (strcmp(name, op_names[i]) == 0) { *op = i; return 0; }
  return -1;
}

/* Where a check says why it refuses: the message (err may be NULL) and the refusal. */
typedef struct why {
  char *err;
  size_t len;
  int code;   /* nd_refusal of the refusal, -1 while none */
} why;

static int refuse (why *w, int code, const char *fmt, ...) {
  w->code = code;
  if (w->err && w->len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, w->len, fmt, ap);
    va_end(ap);
  }
  return -1;
}

int nd_job_check (long long devices, long long global_batch, long long seq_len, char *err,
                  size_t errlen) {
  why w = {err, errlen, -1};
  if (devices < 1 || devices > ND_MAX_DEVICES)
    return refuse(&w, ND_REFUSE_BOUNDS, "devices: expected 1 to %d, got %lld", ND_MAX_DEVICES,
                  devices);
  if (global_batch < 1 || global_batch > ND_MAX_GLOBAL_BATCH)
    return refuse(&w, ND_REFUSE_BOUNDS, "global_batch: expected 1 to %d sequences, got %lld",
                  ND_MAX_GLOBAL_BATCH, global_batch);
  if (seq_len < 1 || seq_len > ND_MAX_SEQ_LEN)
    return refuse(&w, ND_REFUSE_BOUNDS, "seq_len: expected 1 to %d tokens, got %lld",
                  ND_MAX_SEQ_LEN, seq_len);
  return 0;
}

/*
** The degrees against the job, every product in 64 bits and bounded by the device count
** (or the chunk bound) before the next factor, so none wraps. Fills nothing.
*/
static int check_degrees (const nd_strategy *st, const nd_job *job, why *w) {
  long long mp, n = job->devices;
  if (st->pp > ND_MAX_STAGES)
    return refuse(w, ND_REFUSE_BOUNDS, "degree out of bounds: pp %d over %d", st->pp, ND_MAX_STAGES);
  if ((long long)st->pp * st->vpp > ND_MAX_CHUNKS)
    return refuse(w, ND_REFUSE_BOUNDS, "degree out of bounds: pp*vpp = %lld chunks over %d",
                  (long long)st->pp * st->vpp, ND_MAX_CHUNKS);
  if (st->tp > n || st->cp > n || st->pp > n || st->dp > n)
    return refuse(w, ND_REFUSE_BOUNDS, "degree out of bounds: a degree over the %d devices "
                  "(dp %d tp %d cp %d pp %d)", job->devices, st->dp, st->tp, st->cp, st->pp);
  mp = (long long)st->tp * st->cp;  /* each factor <= n < 2^31: no product wraps */
  if (mp > n || mp * st->pp > n)
    return refuse(w, ND_REFUSE_BOUNDS, "devices: tp*cp*pp = %lld is over the %d devices",
                  mp > n ? mp : mp * st->pp, job->devices);
  mp *= st->pp;
  if (st->dp == 0) {
    if (n % mp != 0)
      return refuse(w, ND_REFUSE_BOUNDS, "devices: %d is not a multiple of tp*cp*pp = %lld",
                    job->devices, mp);
  }
  else if ((long long)st->dp * mp != n)
    return refuse(w, ND_REFUSE_BOUNDS, "devices: dp*tp*cp*pp = %lld, not the %d devices",
                  (long long)st->dp * mp, job->devices);
  if ((long long)st->mbs > job->global_batch || (long long)st->mb > job->global_batch)
    return refuse(w, ND_REFUSE_BATCH, "global batch: mbs %d or mb %d over the global batch %lld",
                  st->mbs, st->mb, job->global_batch);
  return 0;
}

/* The accounting flags as Megatron spells them, for messages. */
static const char *account_flags (int bits) {
  switch (bits) {
    case ND_ACCOUNT_EMBEDDING: return "--account-for-embedding-in-pipeline-split";
    case ND_ACCOUNT_LOSS: return "--account-for-loss-in-pipeline-split";
    case ND_ACCOUNT_EMBEDDING | ND_ACCOUNT_LOSS:
      return "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split";
    default: return "no accounting flag";
  }
}

/* Whether Megatron's accounting split (bits) takes body layers on pp x vpp chunks. */
static int account_fits (int body, int pp, int vpp, int bits) {
  int n = body + ((bits & ND_ACCOUNT_EMBEDDING) != 0) + ((bits & ND_ACCOUNT_LOSS) != 0);
  return n % pp == 0 && (n / pp) % vpp == 0;
}

/* A hint for a split that does not divide: the accounting flags that would, if any (only
   for a refusal whose text is asked for: the search's checks ask for none). */
static void account_hint (const why *w, char *hint, size_t len, int body, int pp, int vpp,
                          int bits) {
  static const int order[3] = {ND_ACCOUNT_EMBEDDING | ND_ACCOUNT_LOSS, ND_ACCOUNT_EMBEDDING,
                               ND_ACCOUNT_LOSS};
  int i;
  hint[0] = '\0';
  if (!w->err || !w->len) return;
  for (i = 0; i < 3; i++)
    if (order[i] != bits && account_fits(body, pp, vpp, order[i])) {
      int n = body + ((order[i] & ND_ACCOUNT_EMBEDDING) != 0) + ((order[i] & ND_ACCOUNT_LOSS) != 0);
      snprintf(hint, len, " (%d layers%s%s split into %d chunks of %d with %s)", body,
               order[i] & ND_ACCOUNT_EMBEDDING ? " + embedding" : "",
               order[i] & ND_ACCOUNT_LOSS ? " + loss" : "", pp * vpp, n / (pp * vpp),
               account_flags(order[i]));
      return;
    }
}

/*
** Megatron's --account-for-embedding/loss-in-pipeline-split: the embedding (loss) counts
** as one layer, the body+flags layers split evenly over pp stages and each stage's over
** its vpp chunks; the first chunk of the first stage (the last chunk of the last stage)
** builds one decoder layer fewer.
*/
static int account_layout (nd_strategy *st, int body, why *w) {
  int bits = st->account, pp = st->pp, v = st->vpp, k, n, per;
  char hint[200];
  n = body + ((bits & ND_ACCOUNT_EMBEDDING) != 0) + ((bits & ND_ACCOUNT_LOSS) != 0);
  if (!account_fits(body, pp, v, bits)) {
    account_hint(w, hint, sizeof hint, body, pp, v, bits);
    if (n % pp != 0)
      return refuse(w, ND_REFUSE_LAYOUT, "layout: %d layers with %s do not divide over pp %d%s", n,
                    account_flags(bits), pp, hint);
    return refuse(w, ND_REFUSE_LAYOUT, "layout: %d layers per stage with %s do not divide over vpp "
                  "%d%s", n / pp, account_flags(bits), v, hint);
  }
  per = n / (pp * v);
  for (k = 0; k < pp * v; k++) st->stage_layers[k] = per;
  if (bits & ND_ACCOUNT_EMBEDDING) st->stage_layers[0]--;
  if (bits & ND_ACCOUNT_LOSS) st->stage_layers[pp * v - 1]--;
  return 0;
}

/*
** Megatron's --decoder-first/last-pipeline-num-layers (Megatron-LM d98e8a6,
** megatron/training/arguments.py:3095-3102): the first (last) stage holds that many layers,
** more than 0 and a multiple of vpp each; the middle stages split the rest evenly, each a
** multiple of vpp; no middle layers without middle stages, nor the reverse
** (megatron/core/transformer/transformer_config.py:2294-2366); a stage's layers split
** evenly over its vpp chunks (transformer_block.py:103-146, 161-179); neither flag with the
** accounting flags (transformer_config.py:2229-2239); VPP stated by
** --num-virtual-stages-per-pipeline-rank, not per-chunk layers (arguments.py:954-956).
*/
static int first_last_layout (nd_strategy *st, int body, why *w) {
  int pp = st->pp, v = st->vpp, f = st->first_layers, l = st->last_layers, mid = pp, rest = body;
  int s, c, per = 0;
  if (f < 0 || l < 0)
    return refuse(w, ND_REFUSE_LAYOUT, "layout: first and last stage layers must be larger than 0");
  if ((f && f % v) || (l && l % v))
    return refuse(w, ND_REFUSE_LAYOUT, "layout: the first (%d) and last (%d) stage layers must be "
                  "multiples of vpp %d", f, l, v);
  if (f) { rest -= f; mid--; }
  if (l) { rest -= l; mid--; }
  if (mid < 0 || rest < 0 || (rest != 0) != (mid != 0))
    return refuse(w, ND_REFUSE_LAYOUT, "layout: %d middle layers remain for %d middle stages "
                  "(first %d, last %d of %d layers on pp %d)", rest, mid < 0 ? 0 : mid, f, l,
                  body, pp);
  if (mid > 0 && (rest % mid != 0 || (rest / mid) % v != 0)) {
    char hint[200];
    account_hint(w, hint, sizeof hint, body, pp, v, 0);
    if (rest % mid != 0)
      return refuse(w, ND_REFUSE_LAYOUT, "layout: %d middle layers do not divide over %d middle "
                    "stages%s", rest, mid, hint);
    return refuse(w, ND_REFUSE_LAYOUT, "layout: %d layers per middle stage do not divide over vpp "
                  "%d%s", rest / mid, v, hint);
  }
  if (mid > 0) per = rest / mid;
  for (s = 0; s < pp; s++) {
    int n = s == 0 && f ? f : s == pp - 1 && l ? l : per;
    for (c = 0; c < v; c++) st->stage_layers[c * pp + s] = n / v;
  }
  return 0;
}

/*
** The even split: body layers over the pp*vpp chunks in layer order, the remainder one
** each to chunks 1, 2, ... (never the first, which carries the embedding and keeps the
** most micro-batches in flight; for vpp 1 these are stages 1..remainder). Megatron runs
** it as its plain split when it divides, else through a layout string.
*/
static void even_layout (nd_strategy *st, int body) {
  int n = st->pp * st->vpp, k, base = body / n, extra = body % n;
  for (k = 0; k < n; k++) st->stage_layers[k] = base + (k >= 1 && k <= extra);
}

/* An explicit layout (chunk sizes or a string): its counts against the model, and the MTP
   layers in one chunk, the last of its stage. */
static int check_explicit (const nd_strategy *st, int body, int mtp, why *w) {
  int n = st->pp * st->vpp, k, sum = 0, at = -1, pos = 0;
  for (k = 0; k < n; k++) {
    if (st->stage_layers[k] < 0)
      return refuse(w, ND_REFUSE_BOUNDS, "stage_layers: chunk %d has a negative count", k);
    sum += st->stage_layers[k];
  }
  if (st->explicit_layout == ND_LAYOUT_STRING) {
    if (st->layout_mtp != mtp)
      return refuse(w, ND_REFUSE_LAYOUT, "layout: the layout places %d MTP layers, the model has %d",
                    st->layout_mtp, mtp);
    if (sum - mtp != body)
      return refuse(w, ND_REFUSE_LAYOUT, "layout: the layout places %d decoder layers, the model "
                    "has %d", sum - mtp, body);
  }
  else if (sum != body + mtp)
    return refuse(w, ND_REFUSE_BOUNDS, "stage_layers: the %s hold %d layers, the model has %d",
                  st->vpp > 1 ? "chunks" : "stages", sum, body + mtp);
  for (k = 0; k < n && mtp > 0; pos += st->stage_layers[k], k++) {
    int lo = pos, hi = pos + st->stage_layers[k];
    if (hi <= body || lo >= body + mtp) continue;
    if (at >= 0 || lo > body || hi < body + mtp)
      return refuse(w, ND_REFUSE_LAYOUT, "layout: every MTP layer must be in one chunk");
    at = k;
  }
  if (at >= 0 && at / st->pp != st->vpp - 1)
    return refuse(w, ND_REFUSE_LAYOUT, "layout: the MTP layers must be in the last chunk of their "
                  "stage");
  return 0;
}

/* The layout of a strategy whose degrees are valid: Megatron's conflicts, then one rule. */
static int resolve_layout (nd_strategy *st, int body, int mtp, why *w) {
  int n = st->pp * st->vpp, fl = st->first_layers || st->last_layers;
  if (st->account & ~(ND_ACCOUNT_EMBEDDING | ND_ACCOUNT_LOSS))
    return refuse(w, ND_REFUSE_LAYOUT, "layout: unknown accounting bits %u", (unsigned)st->account);
  if (st->explicit_layout > ND_LAYOUT_STRING)
    return refuse(w, ND_REFUSE_LAYOUT, "layout: unknown layout source %u", (unsigned)st->explicit_layout);
  if (st->explicit_layout && (fl || st->account))
    return refuse(w, ND_REFUSE_LAYOUT, "layout: %s cannot be set with other pipeline layout "
                  "arguments (first/last stage layers, accounting flags)",
                  st->explicit_layout == ND_LAYOUT_STRING ? "--pipeline-model-parallel-layout"
                                                          : "stage_layers");
  if (fl && st->account)
    return refuse(w, ND_REFUSE_LAYOUT, "layout: --decoder-first/last-pipeline-num-layers cannot be "
                  "set with %s", account_flags(st->account));
  /* entries past pp*vpp are not part of the layout (and not cleared: resolve is hot) */
  if (st->explicit_layout) return check_explicit(st, body, mtp, w);
  if (fl) { if (first_last_layout(st, body, w) != 0) return -1; }
  else if (st->account) { if (account_layout(st, body, w) != 0) return -1; }
  else even_layout(st, body);
  st->stage_layers[n - 1] += mtp;  /* MTP with the loss: the last chunk of the last stage */
  return 0;
}

int nd_layout_resolve (nd_strategy *st, int body, int mtp, char *err, size_t errlen) {
  why wy = {NULL, 0, -1}, *w = &wy;
  wy.err = err; wy.len = errlen;
  if (st->pp < 1 || st->vpp < 1 || st->pp > ND_MAX_STAGES
      || (long long)st->pp * st->vpp > ND_MAX_CHUNKS)
    return refuse(w, ND_REFUSE_BOUNDS, "degree out of bounds: pp %d x vpp %d (at most %d chunks)",
                  st->pp, st->vpp, ND_MAX_CHUNKS);
  if (body < 1 || mtp < 0 || body + mtp > ND_MAX_LAYERS)
    return refuse(w, ND_REFUSE_LAYOUT, "layout: %d body and %d MTP layers", body, mtp);
  if (st->vpp > 1 && st->pp == 1)
    return refuse(w, ND_REFUSE_LAYOUT, "layout: interleaving (vpp %d) needs pp > 1", st->vpp);
  return resolve_layout(st, body, mtp, w);
}

int nd_strategy_resolve (nd_strategy *st, const nd_model_spec *m, const nd_job *job,
                         char *err, size_t errlen) {
  return nd_strategy_check(st, m, job, err, errlen) < 0 ? 0 : -1;
}

int nd_strategy_resolve_to (const nd_strategy *in, const nd_model_spec *m, const nd_job *job,
                            nd_strategy *out, char *err, size_t errlen) {
  if (out != in) *out = *in;
  return nd_strategy_resolve(out, m, job, err, errlen);
}

/* The checks and derivations of resolve, each refusal with its code (why.code). */
static int resolve (nd_strategy *st, const nd_model_spec *m, const nd_job *job, why *w) {
  int body = (int)m->num_layers, mtp = (int)m->mtp_layers, s;
  long long per_replica;
  if (st->tp < 1 || st->pp < 1 || st->cp < 1 || st->ep < 1 || st->etp < 1 || st->vpp < 1
      || st->mbs < 1 || st->dp < 0 || st->mb < 0)
    return refuse(w, ND_REFUSE_BOUNDS, "degree out of bounds: every degree must be at least 1");
  if (st->zero < 0 || st->zero > 3)
    return refuse(w, ND_REFUSE_BOUNDS, "zero: expected 0, 1, 2 or 3, got %d", st->zero);
  if (nd_job_check(job->devices, job->global_batch, job->seq_len, w->err, w->len) != 0) {
    w->code = ND_REFUSE_BOUNDS;
    return -1;
  }
  if (check_degrees(st, job, w) != 0) return -1;
  if (st->dp == 0) st->dp = (int)(job->devices / ((long long)st->tp * st->cp * st->pp));
  /* model divisibility */
  if (m->num_heads % st->tp != 0)
    return refuse(w, ND_REFUSE_BOUNDS, "degree out of bounds: tp %d does not divide %lld heads",
                  st->tp, (long long)m->num_heads);
  if (m->num_kv_heads > 0 && m->num_kv_heads % st->tp != 0 && st->tp % m->num_kv_heads != 0)
    return refuse(w, ND_REFUSE_BOUNDS, "degree out of bounds: tp %d and %lld KV heads (one must "
                  "divide the other)", st->tp, (long long)m->num_kv_heads);
  if (st->pp > body)
    return refuse(w, ND_REFUSE_BOUNDS, "degree out of bounds: pp %d over %d layers", st->pp, body);
  if (st->sp && st->tp == 1) st->sp = 0;  /* nothing to split */
  /* experts */
  if (m->num_experts > 0) {
    long long dense_group = (long long)st->tp * st->cp * st->dp;
    if (st->ep > m->num_experts || (long long)st->ep * st->etp > dense_group)
      return refuse(w, ND_REFUSE_EP_OVER, "EP over the experts or DP x TP: ep %d x etp %d, %lld "
                    "experts, dp*cp*tp %lld", st->ep, st->etp, (long long)m->num_experts,
                    dense_group);
    if (m->num_experts % st->ep != 0 || dense_group % ((long long)st->ep * st->etp) != 0)
      return refuse(w, ND_REFUSE_EP_DIV, "EP divisibility: ep %d must divide %lld experts and "
                    "ep*etp must divide dp*cp*tp %lld", st->ep, (long long)m->num_experts,
                    dense_group);
    if (m->moe_ffn_size % st->etp != 0)  /* the expert width over the expert TP degree (the
                                            search's walk checks the same rule) */
      return refuse(w, ND_REFUSE_EP_DIV, "EP divisibility: etp %d must divide the experts' width %lld",
                    st->etp, (long long)m->moe_ffn_size);
    /* Megatron-LM d98e8a6 warns "sequence parallelism must be used" with EP and TP
       (megatron/core/model_parallel_config.py:559-564): its token dispatchers take the
       sequence split over TP; torchtitan's TP plan always splits it */
    if (st->tp > 1 && !st->sp)
      return refuse(w, ND_REFUSE_SP, "sequence parallelism: MoE with tensor parallelism needs "
                    "sequence parallelism");
  }
  else if (st->ep != 1 || st->etp != 1)
    return refuse(w, ND_REFUSE_EP_OVER, "EP over the experts or DP x TP: the model has no experts");
  /* context parallelism: a load-balanced causal split needs 2*cp chunks */
  if (st->cp > 1 && job->seq_len % (2 * st->cp) != 0)
    return refuse(w, ND_REFUSE_CP, "CP constraints: seq_len %d is not a multiple of 2*cp = %d",
                  job->seq_len, 2 * st->cp);
  /* global batch = dp * mb * mbs */
  per_replica = (long long)st->dp * st->mbs;
  if (job->global_batch % per_replica != 0)
    return refuse(w, ND_REFUSE_BATCH, "global batch: %lld is not a multiple of dp*mbs = %lld",
                  job->global_batch, per_replica);
  if (st->mb == 0) st->mb = (int)(job->global_batch / per_replica);
  else if ((long long)st->mb * per_replica != job->global_batch)
    return refuse(w, ND_REFUSE_BATCH, "global batch: dp*mb*mbs = %lld, not %lld",
                  (long long)st->mb * per_replica, job->global_batch);
  /* schedule */
  st->schedule = nd_schedule_of(st->schedule, st->vpp);
  if (st->schedule == ND_SCHED_INTERLEAVED) {
    if (st->pp == 1)  /* Megatron: interleaving needs pp > 1 (with its p2p overlap) */
      return refuse(w, ND_REFUSE_LAYOUT, "layout: interleaving (vpp %d) needs pp > 1", st->vpp);
    /* Megatron-LM d98e8a6 megatron/core/pipeline_parallel/schedules.py:1160-1180: the
       micro-batches run in groups of --microbatch-group-size-per-virtual-pipeline-stage
       (default pp, the only one ndplan schedules), the last group 0 or at least pp */
    if (st->mb % st->pp != 0)
      return refuse(w, ND_REFUSE_SCHEDULE, "schedule: interleaving needs micro-batches (%d) to "
                    "be a multiple of pp (%d)", st->mb, st->pp);
  }
  if (st->schedule == ND_SCHED_DUALPIPE) {  /* the DualPipe README's requirements */
    if (st->pp < 2 || st->pp % 2 != 0)
      return refuse(w, ND_REFUSE_SCHEDULE, "schedule: dualpipe needs an even pp >= 2, got %d", st->pp);
    if (st->mb < 2 * st->pp || st->mb % 2 != 0)
      return refuse(w, ND_REFUSE_SCHEDULE, "schedule: dualpipe needs an even number of "
                    "micro-batches >= 2*pp = %d, got %d", 2 * st->pp, st->mb);
  }
  if (!(st->offload >= 0.0 && st->offload <= 1.0))
    return refuse(w, ND_REFUSE_BOUNDS, "offload: expected a share in [0, 1], got %g", st->offload);
  /* FSDP with pipeline parallelism (torchtitan): by default each stage keeps its gathered
     parameters for the step instead of gathering them for every micro-batch */
  /* HSDP: the shard group divides the data-parallel ranks (and, with experts, holds whole
     expert replicas); one group of all of dp by default */
  if (st->dp_shard < 0 || st->dp_replicate < 0)
    return refuse(w, ND_REFUSE_BOUNDS, "degree out of bounds: dp_shard %d, dp_replicate %d",
                  st->dp_shard, st->dp_replicate);
  if (st->dp_replicate > 0) {
    if (st->dp % st->dp_replicate != 0
        || (st->dp_shard > 0 && (long long)st->dp_shard * st->dp_replicate != st->dp))
      return refuse(w, ND_REFUSE_BOUNDS, "degree out of bounds: dp_replicate %d must divide dp %d (dp "
                    "= dp_shard x dp_replicate)", st->dp_replicate, st->dp);
    st->dp_shard = st->dp / st->dp_replicate;
  }
  if (st->dp_shard == 0) st->dp_shard = st->dp;
  if (st->dp_shard > st->dp || st->dp % st->dp_shard != 0)
    return refuse(w, ND_REFUSE_BOUNDS, "degree out of bounds: dp_shard %d must divide dp %d (dp = "
                  "dp_shard x dp_replicate)", st->dp_shard, st->dp);
  if (st->zero == 0 && st->dp_shard < st->dp)  /* nothing sharded: no group to shard within */
    return refuse(w, ND_REFUSE_BOUNDS, "degree out of bounds: dp_shard %d below dp %d needs "
                  "ZeRO 1 or more (ZeRO 0 all-reduces over all of dp)", st->dp_shard, st->dp);
  if (m->num_experts > 0 && ((long long)st->tp * st->cp * st->dp_shard)
                            % ((long long)st->ep * st->etp) != 0)
    return refuse(w, ND_REFUSE_EP_DIV, "EP divisibility: ep*etp %d must divide the shard group's "
                  "tp*cp*dp_shard %lld", st->ep * st->etp,
                  (long long)st->tp * st->cp * st->dp_shard);
  if (st->reshard < 0 || st->reshard > 1) st->reshard = st->pp > 1 ? 0 : 1;
  if (resolve_layout(st, body, mtp, w) != 0) return -1;
  if (st->layers)
    for (s = 0; s < body + mtp; s++) {
      if (st->layers->recompute[s] >= ND_RECOMPUTE_COUNT)
        return refuse(w, ND_REFUSE_BOUNDS, "recompute: layer %d has an unknown mode", s);
      if (st->layers->ops[s] >= ND_OP_MASKS)
        return refuse(w, ND_REFUSE_BOUNDS, "recompute: layer %d has unknown selective switches", s);
    }
  return 0;
}

int nd_strategy_check (nd_strategy *st, const nd_model_spec *m, const nd_job *job,
                       char *err, size_t errlen) {
  why wy = {NULL, 0, -1};
  wy.err = err; wy.len = errlen;
  if (resolve(st, m, job, &wy) == 0) return -1;
  return wy.code >= 0 ? wy.code : ND_REFUSE_BOUNDS;
}

static const char *const refusal_labels[ND_REFUSE_COUNT] = {
  "degree out of bounds", "EP over the experts or DP x TP", "EP divisibility",
  "filtered out", "CP constraints", "global batch", "layout", "schedule", "sequence parallelism",
  "same run", "over memory", "out of memory"
};

/* resolve's order: ZeRO's range, the degrees, the model's divisibility, the experts (EP
   over, EP divisibility, sequence parallelism), CP, the global batch, the schedule (layout,
   schedule), the offload share; then HSDP's shard group with ZeRO (degree out of bounds, EP
   divisibility) and the layout. The labels only the rules before HSDP's give; of those,
   the schedule's read VPP (check_degrees reads it too, under "degree out of bounds"): */
int nd_refusal_shared (nd_refusal r, int split) {
  return r == ND_REFUSE_EP_OVER || r == ND_REFUSE_SP || r == ND_REFUSE_CP
      || r == ND_REFUSE_BATCH || (!split && r == ND_REFUSE_SCHEDULE);
}

const char *nd_refusal_label (nd_refusal r) {
  return (unsigned)r < ND_REFUSE_COUNT ? refusal_labels[r] : NULL;
}

static const char *const variant_names[ND_VARIANT_COUNT] = {
  "even", "account", "account_embedding", "account_loss", "first_last", "first_last_loss"
};

const char *nd_layout_variant_name (int variant) {
  return variant >= 0 && variant < ND_VARIANT_COUNT ? variant_names[variant] : NULL;
}

/*
** Megatron takes each accounting flag on its own or both: each adds one to the layers it
** splits, the sum must divide over pp and each stage's share over vpp (Megatron-LM
** d98e8a6, megatron/core/transformer/transformer_config.py:2370-2415 and
** megatron/training/arguments.py:962-973, 991-998), and the first chunk of the first
** stage (embedding) or the last chunk of the last stage (loss) builds one decoder layer
** fewer (megatron/core/transformer/transformer_block.py:188-201). So each flag set is a
** layout of its own: with body + 1 dividing, the embedding's and the loss's differ in
** which end is short.
*/
int nd_layout_variant (nd_strategy *st, int body, int variant) {
  int pp = st->pp, v = st->vpp, bits = -1;
  st->account = 0;
  st->first_layers = st->last_layers = 0;
  st->explicit_layout = ND_LAYOUT_RESOLVED;
  if (variant == ND_VARIANT_EVEN) return 0;
  if (pp < 2 || v < 1) return -1;
  if (variant == ND_VARIANT_ACCOUNT) bits = ND_ACCOUNT_EMBEDDING | ND_ACCOUNT_LOSS;
  else if (variant == ND_VARIANT_ACCOUNT_EMBEDDING) bits = ND_ACCOUNT_EMBEDDING;
  else if (variant == ND_VARIANT_ACCOUNT_LOSS) bits = ND_ACCOUNT_LOSS;
  if (bits > 0) {
    if (!account_fits(body, pp, v, bits)) return -1;
    st->account = (unsigned char)bits;
    return 0;
  }
  if (variant == ND_VARIANT_FIRST_LAST || variant == ND_VARIANT_FIRST_LAST_LOSS) {
    /* the offsets a trainer picks: every middle stage at the most a chunk can hold
       (ceil(body / (pp*vpp)) per chunk), the first and last stage the rest, halved, a
       multiple of vpp each (first_last_layout's rules) -- each end at most a few layers
       lighter, which end the lighter one the variant */
    long long mid = ((long long)body + (long long)pp * v - 1) / ((long long)pp * v) * v;
    long long rest = body - (pp - 2) * mid, lighter;
    if (rest < 2 * v || rest % v != 0 || rest > 2 * 32767) return -1;
    lighter = rest / v / 2 * v;
    st->first_layers = (short)(variant == ND_VARIANT_FIRST_LAST ? lighter : rest - lighter);
    st->last_layers = (short)(rest - st->first_layers);
    return 0;
  }
  return -1;
}

int nd_chunk_layers (const nd_strategy *st, int s, int c, int *first) {
  int k, at = c * st->pp + s, pos = 0;
  for (k = 0; k < at; k++) pos += st->stage_layers[k];
  if (first) *first = pos;
  return st->stage_layers[at];
}

void nd_chunk_starts (const nd_strategy *st, int *first) {
  int k, n = st->pp * st->vpp, pos = 0;
  for (k = 0; k < n; k++) { first[k] = pos; pos += st->stage_layers[k]; }
}

/*
** Which layers a stage holds: chunk c of stage s is chunk c*pp + s in layer order
** (stage_layers; vpp = 1: one chunk per stage, and DualPipe adds stage pp-1-s as chunk 1),
** in the order the stage runs its chunks.
*/
int nd_stage_chunks (const nd_strategy *st, int s, int *k) {
  int c, p = st->pp;
  for (c = 0; c < st->vpp; c++) k[c] = c * p + s;  /* round c: chunks c*p .. c*p + p-1 */
  if (st->vpp <= 1 && st->schedule == ND_SCHED_DUALPIPE && st->pp - 1 - s != s) {
    k[1] = st->pp - 1 - s;  /* the reverse way */
    return 2;
  }
  return st->vpp;
}

void nd_stage_foreach (const nd_strategy *st, int body, int mtp, int s,
                       void (*fn)(int layer, int chunk, void *ud), void *ud) {
  int starts[ND_MAX_CHUNKS], k[ND_MAX_CHUNKS], n = nd_stage_chunks(st, s, k), c, i;
  (void)body; (void)mtp;
  nd_chunk_starts(st, starts);
  for (c = 0; c < n; c++)
    for (i = 0; i < st->stage_layers[k[c]]; i++) fn(starts[k[c]] + i, c, ud);
}
