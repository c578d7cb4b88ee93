/*
** estimate.c -- memory per pipeline stage and step time of one strategy.
**
** Each distinct layer kind (attention x MLP x MTP) is priced once per call: activation
** bytes it holds under each recompute mode, forward GEMM/core/element-wise time, the
** communication of one forward pass, its local parameters. Stages add up their layers;
** the pipeline schedule decides how many micro-batches each stage keeps in flight and how
** long the bubble is. Formulas: Korthikanti et al. 2022 for activations (generalised to
** GQA, MLA, gated MLPs, MoE and linear attention), the ZeRO paper and Megatron for
** parameter/gradient/optimizer bytes, Narayanan et al. 2021 for the schedules.
*/
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/estimate.h"
#include "ndplan/data_parallel.h"
#include "estimate_ctx.h"

/* nd_costs_init and nd_costs_validate iterate the cost descriptors, and the names of the time
   parts and groups are listed with them (fields.c). */

/*
** What a collective of which `overlap` is hidden behind compute costs, as a share of its
** time: the exposed rest, plus the compute the hidden part slows down by taking
** overlap_sm_share of the device's compute units while it runs.
*/
static double exposed_share (const nd_costs *c, double overlap) {
  return 1.0 - overlap + overlap * c->overlap_sm_share;
}

/* Bytes per logit element held at a loss: a vocabulary split over TP may take the
   trainer's vocabulary-parallel loss, with its own transients (logits_bytes_tp). */
double nd_loss_bytes (const nd_costs *c, int tp) {
  return tp > 1 && c->logits_bytes_tp > 0.0 ? c->logits_bytes_tp : c->logits_bytes;
}

static double loss_bytes (const ctx *x) {
  return nd_loss_bytes(x->c, x->st->tp);
}

/* A GEMM of a linear layer, at the strategy's precision. */
static double gemm_time (const ctx *x, double flops) {
  double eff;
  if (flops <= 0.0) return 0.0;
  eff = nd_device_gemm_efficiency_at(x->dev, x->gemm, flops) * x->gemm_scale;
  return eff > 0.0 ? flops / (x->peak * eff) : 0.0;
}

/* A GEMM that stays in 16 bits under FP8 recipes (LM head, MTP head, router). */
static double gemm16_time (const ctx *x, double flops) {
  double eff;
  if (flops <= 0.0) return 0.0;
  eff = nd_device_gemm_efficiency(x->dev, flops);
  return eff > 0.0 ? flops / (x->peak16 * eff) : 0.0;
}

/*
** `count` linear layers of `rows` tokens from width k to width n: their forward GEMM time.
** Under FP8 each casts its input (forward) and its output gradient (backward) to FP8, a
** memory-bound pass of cast_bytes per element (setup: the recipe's), charged to the kind.
*/
static double lin (const ctx *x, layer_cost *lc, double count, double rows, double k,
                   double n) {
  if (x->quant) {
    lc->cast_s += count * x->cast_bytes * rows * k / x->hbm;
    lc->cast_bwd_s += count * x->cast_bytes * rows * n / x->hbm;
  }
  return count * gemm_time(x, 2.0 * rows * k * n);
}

/*
** The attention core (QK^T and AV over `keys` keys per query): the fused kernel in 16 bits.
** Its forward is priced at attn_fwd; flash attention's backward recomputes the scores and
** runs five products for the forward's two (2.5x the FLOPs) at attn_bwd. Without flash
** the scores are kept and the backward is two products per forward product, as a GEMM.
*/
static void attention_core (const ctx *x, layer_cost *lc, double flops, double keys) {
  double ef, eb;
  if (flops <= 0.0) return;
  if (!x->st->flash_attention) {
    double t = gemm16_time(x, flops);
    lc->core_s += t;
    lc->core_bwd_s += 2.0 * t;
    return;
  }
  ef = nd_device_attention_efficiency(x->dev, 0, keys);
  eb = nd_device_attention_efficiency(x->dev, 1, keys);
  lc->core_s += flops / (x->peak16 * ef);
  lc->core_bwd_s += 2.5 * flops / (x->peak16 * eb);
}

/* The forward work of a layer kind: GEMMs, attention core, element-wise, FP8 casts. */
static double fwd_work (const layer_cost *lc) {
  return lc->gemm_s + lc->core_s + lc->mem_s + lc->cast_s;
}

/* Keys one query attends to, on average: executed (flash skips masked blocks) or model. */
static double keys_per_query (const ctx *x, int sliding, int executed) {
  double s = (double)x->job->seq_len;
  double w = (double)x->m->sliding_window;
  /* chunked windows (Llama 4) are causal inside each chunk: w/2 on average, w materialised */
  if (sliding && w > 0 && w < s)
    return x->m->chunked_window && (!executed || x->st->flash_attention) ? w / 2.0 : w;
  return (executed && !x->st->flash_attention) ? s : s / 2.0;
}

/*
** Keys a query attends to under DeepSeek sparse attention: the index_topk best of the
** earlier ones, so a query at position p sees min(p, k): on average s/2 when s <= k, else
** k - k^2/(2s). The sparse kernel computes only those, so executed and model keys agree.
*/
static double dsa_keys (const ctx *x) {
  double s = (double)x->job->seq_len, k = (double)x->m->index_topk;
  return s <= k ? s / 2.0 : k - k * k / (2.0 * s);
}


static void price_attention (ctx *x, int attn, layer_cost *lc, act_parts *a) {
  const nd_model_spec *m = x->m;
  double T = x->T, t = x->st->tp, h = (double)m->hidden_size, ab = x->c->activation_bytes;
  double dm = x->c->dropout, keys, keys_model, hq, dqk, dv;
  double core_flops, tok;
  int sliding = attn == ND_ATTN_SLIDING;
  if (attn == ND_ATTN_LINEAR) {
    double kd = (double)(m->linear_k_heads * m->linear_k_dim);
    double vd = (double)(m->linear_v_heads * m->linear_v_dim);
    double nv = (double)m->linear_v_heads, dk = (double)m->linear_k_dim;
    double dvv = (double)m->linear_v_dim, chunk = 64.0;
    double per_tok_core = nv * (4.0 * dk * dvv + 2.0 * chunk * (dk + dvv));
    lc->gemm_s += lin(x, lc, 1, T, h, (2 * kd + 2 * vd + 2 * nv) / t)
                + lin(x, lc, 1, T, vd / t, h);
    {  /* the chunked scan: GEMM-like products in 16 bits, backward twice the forward */
      double scan = gemm16_time(x, T * per_tok_core / t);
      lc->core_s += scan;
      lc->core_bwd_s += 2.0 * scan;
    }
    a->rep += 2 * ab * T * h;
    a->in_rep += T * h;
    a->in_dev += T * vd / t;
    lc->op_bytes[ND_OP_NORMS] += ab * T * h * x->r;  /* the norm output feeding the block */
    a->dev += ab * T * ((2 * kd + 2 * vd + 2 * nv) + (m->conv_kernel > 0 ? 2 * kd + vd : 0)
                        + 2 * vd) / t;  /* projections, conv outputs (if any), gated norm */
    a->core += 4.0 * (T / chunk) * nv * dk * dvv / t;  /* fp32 chunk states */
    lc->flops_token += 2 * h * (2 * kd + 2 * vd + 2 * nv) + 2 * vd * h + per_tok_core;
    lc->core_flops_token += per_tok_core;
    return;
  }
  keys = keys_per_query(x, sliding, 1);
  keys_model = keys_per_query(x, sliding, 0);
  if (attn == ND_ATTN_MLA && m->index_topk > 0) keys = keys_model = dsa_keys(x);
  hq = (double)m->num_heads;
  if (attn == ND_ATTN_MLA) {
    double ql = (double)m->q_lora_rank, kvl = (double)m->kv_lora_rank;
    double rope = (double)m->qk_rope_head_dim;
    dqk = (double)(m->qk_nope_head_dim + m->qk_rope_head_dim);
    dv = (double)m->v_head_dim;
    if (ql > 0) {
      double up = lin(x, lc, 1, T, ql, hq * dqk / t);
      lc->gemm_s += lin(x, lc, 1, T, h, ql) + up;
      a->dev += 2 * ab * T * ql;  /* compressed q and its norm, on every TP rank */
      tok = 2 * h * ql + 2 * ql * hq * dqk;
      lc->op_bytes[ND_OP_MLA_UP] += ab * T * hq * dqk / t;  /* q, re-projected from its latent */
      lc->op_time[ND_OP_MLA_UP] += up;
      lc->op_flops[ND_OP_MLA_UP] += 2 * ql * hq * dqk;
    }
    else {
      lc->gemm_s += lin(x, lc, 1, T, h, hq * dqk / t);
      tok = 2 * h * hq * dqk;
    }
    {  /* k and v come from the kv latent: up-projected, droppable */
      double up = lin(x, lc, 1, T, kvl, hq * (dqk - rope + dv) / t);
      lc->gemm_s += lin(x, lc, 1, T, h, kvl + rope) + up + lin(x, lc, 1, T, hq * dv / t, h);
      lc->op_bytes[ND_OP_MLA_UP] += ab * T * hq * (dqk + dv) / t;
      lc->op_time[ND_OP_MLA_UP] += up;
      lc->op_flops[ND_OP_MLA_UP] += 2 * kvl * hq * (dqk - rope + dv);
    }
    a->dev += ab * T * (2 * kvl + rope);
    a->rep += 2 * ab * T * h;
    a->in_rep += T * h;
    a->in_dev += T * hq * dv / t;
    lc->op_bytes[ND_OP_NORMS] += ab * T * h * x->r;
    a->dev += ab * T * hq * (2 * dqk + 2 * dv) / t;
    tok += 2 * h * (kvl + rope) + 2 * kvl * hq * (dqk - rope + dv) + 2 * hq * dv * h;
  }
  else {
    double kv = (double)m->num_kv_heads, d = (double)m->head_dim;
    double kv_loc = (kv >= t ? kv / t : 1.0) * d, q_loc = hq * d / t;
    double gate = m->attn_output_gate ? q_loc : 0.0;
    dqk = dv = d;
    double qkv_s = lin(x, lc, 1, T, h, q_loc + gate + 2 * kv_loc), o_s = lin(x, lc, 1, T, q_loc, h);
    lc->gemm_s += qkv_s + o_s;
    /* every second projection in forward order (q, k, v, o): k's output and o's (k at its
       share of the fused projection's time) */
    lc->op_bytes[ND_OP_ALT_MM] += ab * T * kv_loc;
    lc->op_time[ND_OP_ALT_MM] += qkv_s * kv_loc / (q_loc + gate + 2 * kv_loc) + o_s;
    lc->op_flops[ND_OP_ALT_MM] += 2 * h * kv * d + 2 * hq * d * h;
    a->rep += 2 * ab * T * h;
    lc->op_bytes[ND_OP_NORMS] += ab * T * h * x->r;
    a->dev += ab * T * (2 * q_loc + gate + 2 * kv_loc);
    a->in_rep += T * h;      /* the QKV projection's input */
    a->in_dev += T * q_loc;  /* the output projection's input */
    tok = 2 * h * (hq * d * (m->attn_output_gate ? 2 : 1) + 2 * kv * d) + 2 * hq * d * h;
  }
  /* core: QK^T and AV over the keys each query sees */
  core_flops = 2.0 * T * keys * (hq / t) * (dqk + dv);
  attention_core(x, lc, core_flops, keys);
  if (x->st->flash_attention) a->core += 4.0 * (hq / t) * T;  /* fp32 log-sum-exp */
  else {
    a->core += (ab + dm * (1.0 + ab)) * (hq / t) * T * keys;  /* softmax, mask, dropout */
    lc->core_mem_s += x->c->memory_ops * (ab + dm * (1.0 + ab)) * (hq / t) * T * keys / x->hbm;
  }
  a->rep += dm * T * h;  /* attention dropout mask */
  lc->flops_token += tok + 2.0 * keys_model * hq * (dqk + dv);
  lc->core_flops_token += 2.0 * keys_model * hq * (dqk + dv);
}

/*
** Mamba-2 mixer, sharded as Megatron does: in_proj column-parallel (z, x, B, C and dt split
** by heads and groups), the conv and the scan on the local heads, out_proj row-parallel, so
** its TP traffic is one block's, like attention. The chunked scan (SSD) per token, with chunk
** Q, state N, head dim P, G groups and H heads: C.B^T inside the chunk (2QN per group), its
** masked product with x (2QP per head), the chunk's state B^T x (2NP per head) and the output
** read from the carried state (2NP per head); passing the states between chunks (NP per head
** per chunk) is left out of the FLOPs, not of the bytes: the chunk states stream through HBM
** between the scan's kernels (below). The conv (2K FLOPs per channel) and the gated norm are element-wise
** work, priced over HBM through the bytes they store like every element-wise kernel here.
** Under CP, Megatron's mixer trades the sequence split for a head split around the conv and
** the scan: an all-to-all of the in_proj output before them and of the scan output after.
** `shared`: the mixer reads the normed input the attention beside it already holds (Falcon-H1),
** so that input and its norm are not counted twice.
*/
static void price_mamba (ctx *x, layer_cost *lc, act_parts *a, int shared) {
  const nd_model_spec *m = x->m;
  double T = x->T, t = x->st->tp, h = (double)m->hidden_size, ab = x->c->activation_bytes;
  double H = (double)m->mamba_heads, P = (double)m->mamba_head_dim;
  double N = (double)m->mamba_state, G = (double)m->mamba_groups;
  double Q = (double)m->mamba_chunk, seq = (double)x->job->seq_len / x->st->cp;
  double inner = H * P, bc = 2.0 * G * N, in = 2.0 * inner + bc + H, conv = inner + bc;
  double core_tok;
  if (Q > seq) Q = seq;  /* one chunk when the sequence is shorter */
  core_tok = 2.0 * Q * N * G + 2.0 * Q * P * H + 4.0 * N * P * H;
  lc->gemm_s += lin(x, lc, 1, T, h, in / t) + lin(x, lc, 1, T, inner / t, h);
  {  /* the scan: GEMM-like products in 16 bits, backward twice the forward */
    double scan = gemm16_time(x, T * core_tok / t);
    lc->core_s += scan;
    lc->core_bwd_s += 2.0 * scan;
  }
  if (x->st->cp > 1)
    lc->cp_s += nd_alltoall_time(&x->fabric, &x->g[ND_GROUP_CP], ab * T * in / t)
              + nd_alltoall_time(&x->fabric, &x->g[ND_GROUP_CP], ab * T * inner / t);
  if (!shared) {
    a->rep += 2 * ab * T * h;                         /* norm input, mixer input */
    lc->op_bytes[ND_OP_NORMS] += ab * T * h * x->r;   /* the mixer input is the norm's output */
  }
  /* in_proj output (z, x, B, C, dt), conv output, scan output, gated-norm output (without
     the norm, the gate's product) */
  a->dev += ab * T * (in + conv + 2.0 * inner) / t;
  a->dev += 8.0 * T * H / t;                        /* fp32 dt and its cumulative decay */
  lc->op_bytes[ND_OP_ACT] += ab * T * conv / t;     /* the conv's SiLU output */
  /* the chunk states (P x N per head per chunk) pass between the scan's kernels through HBM:
     mamba_ssm's ssd_combined.py writes them in fp32 (_chunk_state_fwd, states_in_fp32),
     _state_passing_fwd reads them and writes the carried states in the inputs' 16 bits, and
     _chunk_scan_fwd reads those: 4 + 4 + 2 + 2 bytes per element. The autograd function saves
     none of them (its backward recomputes them), so they are traffic, not kept bytes. */
  lc->core_mem_s += (8.0 + 2.0 * ab) * (T / Q) * H * P * N / t / x->hbm;
  lc->flops_token += 2 * h * in + 2 * inner * h + 2.0 * (double)m->mamba_conv * conv + core_tok;
  lc->core_flops_token += core_tok;
}

/*
** Mamba-1 mixer (Jamba), sharded along its E channels as vLLM's MambaMixer is: in_proj
** column-parallel, the conv and the scan on the local channels, x_proj row-parallel (its
** dt, B and C need every channel: an all-reduce of dt_rank + 2N per token), dt_proj
** column-parallel, out_proj row-parallel. FLOPs per token: the projections (2 per weight),
** the conv (2K per channel) and the selective scan, 9 per channel and state (the count Mamba's
** author gives for discretising A and B, the state update and the read-out by C:
** state-spaces/mamba issue 110); the D skip and the z gate are element-wise. The scan is not
** chunked into matrix products: its fused kernel is memory-bound (Gu & Dao 2023, section
** 3.3.2), priced over HBM by the bytes it streams (x, dt, z, B, C
** in; y out), its backward (which recomputes the states) twice that. It stores in_proj's
** output, the conv output and its SiLU, x_proj's output (and Jamba's normed dt, B, C), dt,
** the scan output and the gated output; its fp32 chunk states (2N per channel every 2048
** tokens, under 0.5% of the rest) are left out. Under CP, as Mamba-2: an all-to-all of the
** in_proj output before the conv and of the gated output after the scan, and x_proj's
** partial sums all-reduced over the CP group.
*/
static void price_mamba1 (ctx *x, layer_cost *lc, act_parts *a) {
  const nd_model_spec *m = x->m;
  double T = x->T, t = x->st->tp, h = (double)m->hidden_size, ab = x->c->activation_bytes;
  double E = (double)m->mamba_inner, N = (double)m->mamba_state;
  double R = (double)m->mamba_dt_rank, K = (double)m->mamba_conv, sel = R + 2.0 * N;
  double scan_tok = 9.0 * E * N;
  lc->gemm_s += lin(x, lc, 1, T, h, 2.0 * E / t) + lin(x, lc, 1, T, E / t, sel)
              + lin(x, lc, 1, T, R, E / t) + lin(x, lc, 1, T, E / t, h);
  {  /* the selective scan: memory-bound, backward twice the forward */
    double scan = ab * T * (4.0 * E / t + 2.0 * N) / x->hbm;
    lc->core_s += scan;
    lc->core_bwd_s += 2.0 * scan;
  }
  if (t > 1)
    lc->tp_s += nd_allreduce_time(&x->fabric, &x->g[ND_GROUP_TP], ab * T * sel)
                * exposed_share(x->c, x->st->tp_comm_overlap ? x->c->tp_overlap_on
                                                             : x->c->tp_overlap);
  if (x->st->cp > 1)
    lc->cp_s += nd_alltoall_time(&x->fabric, &x->g[ND_GROUP_CP], ab * T * 2.0 * E / t)
              + nd_alltoall_time(&x->fabric, &x->g[ND_GROUP_CP], ab * T * E / t)
              + nd_allreduce_time(&x->fabric, &x->g[ND_GROUP_CP], ab * T * sel);
  a->rep += 2 * ab * T * h;                         /* norm input, mixer input */
  lc->op_bytes[ND_OP_NORMS] += ab * T * h * x->r;   /* the mixer input is the norm's output */
  a->in_rep += T * h;                               /* in_proj's input */
  /* in_proj output (x, z), conv output and its SiLU, dt, scan output, gated output */
  a->dev += ab * T * 7.0 * E / t;
  a->in_dev += T * (2.0 * E / t + R);               /* x_proj's, out_proj's, dt_proj's inputs */
  a->dev += ab * T * sel * (m->mamba_dt_norms ? 2.0 : 1.0);  /* x_proj output, normed */
  lc->op_bytes[ND_OP_ACT] += ab * T * E / t;        /* the conv's SiLU output */
  if (m->mamba_dt_norms) lc->op_bytes[ND_OP_NORMS] += ab * T * sel;
  lc->flops_token += 2 * h * 2 * E + 2 * K * E + 2 * E * sel + 2 * R * E + 2 * E * h + scan_tok;
  lc->core_flops_token += scan_tok;
}

/*
** The DSA indexer of an MLA layer (DeepSeek-V3.2), replicated across TP: its q from the q
** latent, one shared key, per-head weights, and every query scored against every earlier
** key (2 x heads x head_dim per pair, the weighting 2 x heads); it stores q, k, the weights
** and the chosen keys' int32 indices. The scores are not stored (the kernel fuses top-k).
*/
static void price_dsa_indexer (ctx *x, layer_cost *lc, act_parts *a) {
  const nd_model_spec *m = x->m;
  double T = x->T, h = (double)m->hidden_size, ab = x->c->activation_bytes;
  double H = (double)m->index_heads, d = (double)m->index_head_dim;
  double qin = m->q_lora_rank > 0 ? (double)m->q_lora_rank : h;
  double keys = keys_per_query(x, 0, 1), keys_model = keys_per_query(x, 0, 0);
  double proj = 2.0 * (qin * H * d + h * d + h * H), pair = 2.0 * H * d + 2.0 * H;
  lc->gemm_s += gemm_time(x, T * proj);
  {  /* the scoring: GEMM-like products in 16 bits; its backward (the indexer's loss) twice */
    double score = gemm16_time(x, T * keys * pair);
    lc->core_s += score;
    lc->core_bwd_s += 2.0 * score;
  }
  a->dev += ab * T * (H * d + d + H)
            + 4.0 * T * fmin((double)m->index_topk, (double)x->job->seq_len);
  lc->flops_token += proj + keys_model * pair;
  lc->core_flops_token += keys_model * pair;
}

/*
** One MoE dispatch (or combine) of `copy` bytes per routed copy, k copies per token. With
** node deduplication a token crosses the scale-out once per remote node it visits: of N
** nodes in the EP group, k experts placed at random visit N(1 - (1 - 1/N)^k) of them, and
** group-limited routing caps that at the nodes its groups_per_token groups span.
*/
static double dispatch_time (const ctx *x, double copy, double k) {
  const nd_group *g = &x->g[ND_GROUP_EP];
  const nd_model_spec *m = x->m;
  double N = (double)g->size / g->local, visited, intra;
  if (x->c->ep_node_dedup <= 0.0 || N <= 1.0)
    return nd_alltoall_time(&x->fabric, g, copy * k);
  visited = N * (1.0 - pow(1.0 - 1.0 / N, k));
  if (m->expert_groups > 0) {
    double span = (double)m->groups_per_token * N / (double)m->expert_groups;
    if (span < (double)m->groups_per_token) span = (double)m->groups_per_token;
    if (span < visited) visited = span;
  }
  intra = copy * k * (g->local - 1) / g->local;  /* every copy reaches its GPU in the node */
  return nd_alltoall_split_time(&x->fabric, g, intra, copy * visited * (N - 1.0) / N);
}

static void price_mlp (ctx *x, int layer, int mlp, layer_cost *lc, act_parts *a) {
  const nd_model_spec *m = x->m;
  double T = x->T, t = x->st->tp, h = (double)m->hidden_size, ab = x->c->activation_bytes;
  double mats = m->gated_mlp ? 3.0 : 2.0, shared = 0.0;
  a->rep += 2 * ab * T * h + x->c->dropout * T * h;  /* norm input, MLP input, mask */
  lc->op_bytes[ND_OP_NORMS] += ab * T * h * x->r;    /* the MLP input is the norm's output */
  if (mlp == ND_MLP_DENSE) shared = (double)nd_layer_ffn_size(m, layer);
  else {
    double E = (double)m->num_experts, k = (double)m->top_k, mf = (double)m->moe_ffn_size;
    double etp = x->st->etp, ep = x->st->ep, cf = x->c->capacity_factor;
    double Te = T * k * cf * etp / t;          /* token copies one device computes */
    double per_expert = Te / (E / ep);         /* grouped-GEMM size per local expert */
    double send = ab * h * T * x->r * k * cf;  /* all-to-all send buffer per device */
    lc->gemm_s += lin(x, lc, E / ep, per_expert, h, (mats - 1) * mf / etp)
                + lin(x, lc, E / ep, per_expert, mf / etp, h);
    lc->gemm_s += gemm16_time(x, 2 * T * x->r * h * E);  /* router */
    a->dev += 8.0 * T * x->r * E;                    /* fp32 router logits and probs */
    a->dev += ab * Te * (2 * h + mats * mf / etp);  /* dispatched in, hidden, out */
    a->in_dev += Te * (h + mf / etp);                /* the experts' two inputs */
    lc->op_bytes[ND_OP_ACT] += ab * Te * mf / etp;   /* the experts' activation output */
    {  /* dispatch and combine; dropping the dispatched inputs sends them again */
      double one = dispatch_time(x, send / k, k);
      lc->ep_s += 2.0 * one;
      lc->op_bytes[ND_OP_MOE_DISPATCH] += ab * Te * h;
      lc->op_time[ND_OP_MOE_DISPATCH] += one * exposed_share(x->c, x->c->ep_overlap);
    }
    if (etp > 1)
      lc->ep_s += nd_allgather_time(&x->fabric, &x->g[ND_GROUP_ETP], ab * h * Te)
                + nd_reducescatter_time(&x->fabric, &x->g[ND_GROUP_ETP], ab * h * Te);
    lc->flops_token += 2 * k * mats * h * mf + 2 * h * E;
    shared = (double)m->shared_ffn_size;
  }
  if (shared > 0) {
    double up_s = lin(x, lc, 1, T, h, (mats - 1) * shared / t), down_s = lin(x, lc, 1, T, shared / t, h);
    lc->gemm_s += up_s + down_s;
    /* every second projection after the attention's four: the up projection of a gated MLP
       (its output is kept otherwise; half the fused gate/up time), the down projection of a
       plain one (not kept) */
    if (m->gated_mlp) {
      lc->op_bytes[ND_OP_ALT_MM] += ab * T * shared / t;
      lc->op_time[ND_OP_ALT_MM] += up_s / (mats - 1);
    } else lc->op_time[ND_OP_ALT_MM] += down_s;
    lc->op_flops[ND_OP_ALT_MM] += 2 * h * shared;
    a->dev += ab * T * mats * shared / t;  /* gate/up outputs and activation output */
    a->in_rep += T * h;            /* the first projection's input (the norm output) */
    a->in_dev += T * shared / t;   /* the second's (the activation output) */
    lc->op_bytes[ND_OP_ACT] += ab * T * shared / t;
    lc->flops_token += 2 * mats * h * shared;
  }
}

/* Cache slot of a layer's kind (attention, MLP, MTP, MLP width), numbered once per model. */
static int kind_slot (const ctx *x, int layer) {
  return x->kinds->of[layer];
}

static void pass_costs (const ctx *x, layer_cost *lc);

/* Prices a layer kind (nd_layer_kind_equal) once; layer is one representative index. */
static layer_cost *price_kind (ctx *x, int layer) {
  const nd_model_spec *m = x->m;
  const nd_layer_kind *k = &m->layer[layer];
  layer_cost *lc = &x->kind[kind_slot(x, layer)];
  act_parts a = {0, 0, 0, 0, 0};
  double T = x->T, t = x->st->tp, h = (double)m->hidden_size, ab = x->c->activation_bytes;
  double act_all, tp_bytes, whole = 0.0;
  int identity = k->attention == ND_ATTN_NONE && k->mlp == ND_MLP_NONE;
  nd_layer_buckets pb;
  if (lc->ready) {
    if (x->stages && !lc->passed) { pass_costs(x, lc); lc->passed = 1; }
    return lc;
  }
  memset(lc, 0, sizeof *lc);
  if (!nd_price_cache_recall_mixer(x, kind_slot(x, layer), lc, &a)) {
    if (k->attention == ND_ATTN_MAMBA) price_mamba(x, lc, &a, 0);
    else if (k->attention == ND_ATTN_MAMBA1) price_mamba1(x, lc, &a);
    else if (k->attention == ND_ATTN_HYBRID) {  /* attention, and the mixer on its input */
      price_attention(x, ND_ATTN_FULL, lc, &a);
      price_mamba(x, lc, &a, 1);
    }
    else if (k->attention != ND_ATTN_NONE) price_attention(x, k->attention, lc, &a);
    if (k->attention == ND_ATTN_MLA && m->index_topk > 0) price_dsa_indexer(x, lc, &a);
    nd_price_cache_keep_mixer(x, kind_slot(x, layer), lc, &a);
  }
  if (k->mlp != ND_MLP_NONE) price_mlp(x, layer, k->mlp, lc, &a);
  if (m->norms_per_layer > 2 && !identity) {  /* Gemma's extra norms: droppable too */
    a.rep += (m->norms_per_layer - 2) * ab * T * h;
    lc->op_bytes[ND_OP_NORMS] += (m->norms_per_layer - 2) * ab * T * h * x->r;
  }
  if (k->mtp) {  /* DeepSeek MTP: two norms, the 2h concatenation, its own logits */
    a.rep += 4 * ab * T * h;
    lc->gemm_s += lin(x, lc, 1, T, 2 * h, h / t) + gemm16_time(x, 2 * T * h * x->vocab / t);
    a.dev += loss_bytes(x) * T * x->vocab / t;
    lc->flops_token += 2 * 2 * h * h + 2 * h * x->vocab;
  }
  /* bytes held per micro-batch under each mode */
  act_all = a.rep * x->r + a.dev + a.core;
  if (x->quant && x->c->fp8_saved_bytes < ab)  /* TE saves FP8 GEMMs' inputs as FP8 */
    act_all -= (ab - x->c->fp8_saved_bytes) * (a.in_rep * x->r + a.in_dev);
  if (x->r < 1.0 && x->c->sp_gather_kept > 0.0) {
    /* DTensor TP keeps the gathered norm outputs whole (the rest of the sequence beside
       the shard); they go with the norms when those are recomputed, which then gather
       them again (below) */
    double w = x->quant && x->c->fp8_saved_bytes < ab ? x->c->fp8_saved_bytes : ab;
    whole = x->c->sp_gather_kept * w * a.in_rep * (1.0 - x->r);
    act_all += whole;
  }
  lc->act[ND_RECOMPUTE_NONE] = act_all;
  /* the layer input only; an identity layer (no sublayers: no FLOPs, no parameters, nothing
     kept) hands its input on as its output, the tensor the next layer keeps */
  lc->act[ND_RECOMPUTE_FULL] = identity ? 0.0 : ab * T * h * x->r;
  /* (element-wise traffic: the kept gathers are written by the all-gather either way) */
  lc->mem_s = x->c->memory_ops * (act_all - a.core - whole) / x->hbm + lc->core_mem_s;
  lc->bwd_s = 2.0 * lc->gemm_s + lc->core_bwd_s + 2.0 * lc->mem_s + lc->cast_bwd_s;
  /* selective switches: the attention core only matters without flash attention (flash
     keeps no scores and recomputes them anyway); norms and activation functions repeat
     element-wise work; MLA's up-projections repeat their GEMMs (set above) */
  if (!x->st->flash_attention) {
    lc->op_bytes[ND_OP_ATTN_CORE] = a.core;
    lc->op_time[ND_OP_ATTN_CORE] = lc->core_s + lc->core_mem_s;
    lc->op_flops[ND_OP_ATTN_CORE] = lc->core_flops_token;
  }
  lc->op_time[ND_OP_NORMS] = x->c->memory_ops * lc->op_bytes[ND_OP_NORMS] / x->hbm;
  lc->op_bytes[ND_OP_NORMS] += whole;
  lc->op_time[ND_OP_ACT] = x->c->memory_ops * lc->op_bytes[ND_OP_ACT] / x->hbm;
  {
    double dropped = 0.0;
    int op;
    for (op = 0; op < ND_OP_COUNT; op++)
      if (x->st->selective_ops & ND_OP_BIT(op)) dropped += lc->op_bytes[op];
    lc->act[ND_RECOMPUTE_SELECTIVE] = act_all - dropped;
    if (lc->act[ND_RECOMPUTE_SELECTIVE] < lc->act[ND_RECOMPUTE_FULL])
      lc->act[ND_RECOMPUTE_SELECTIVE] = lc->act[ND_RECOMPUTE_FULL];
  }
  /* tensor parallelism: two all-reduces, or with SP two all-gathers and reduce-scatters;
     attention and a mixer side by side share theirs (one gather of the input, the outputs
     summed before one reduction) */
  tp_bytes = ab * T * h;
  if (t > 1) {
    int blocks = (k->attention != ND_ATTN_NONE)  /* attention or mixer, then the MLP */
               + (k->mlp == ND_MLP_DENSE || (k->mlp == ND_MLP_MOE && m->shared_ffn_size > 0));
    const nd_group *g = &x->g[ND_GROUP_TP];
    double one = x->st->sp ? nd_allgather_time(&x->fabric, g, x->tp_gather * T * h)
                             + nd_reducescatter_time(&x->fabric, g, tp_bytes)
                           : nd_allreduce_time(&x->fabric, g, tp_bytes);
    double shown = exposed_share(x->c, x->st->tp_comm_overlap ? x->c->tp_overlap_on
                                                              : x->c->tp_overlap);
    lc->tp_s += blocks * one * shown;
    if (whole > 0.0)  /* recomputed norms under DTensor TP: their all-gathers run again */
      lc->op_time[ND_OP_NORMS] += x->c->sp_gather_kept * blocks * shown
                                * nd_allgather_time(&x->fabric, g, x->tp_gather * T * h);
  }
  /* context parallelism: ring exchange of K and V, cp-1 steps */
  /* (the Mamba mixers price their own CP all-to-alls; beside attention, on top of it) */
  if (x->st->cp > 1 && k->attention != ND_ATTN_LINEAR && k->attention != ND_ATTN_MAMBA
      && k->attention != ND_ATTN_MAMBA1 && k->attention != ND_ATTN_NONE) {
    double kvw = k->attention == ND_ATTN_MLA
      ? (double)m->num_heads / t * (m->qk_nope_head_dim + m->qk_rope_head_dim + m->v_head_dim)
      : 2.0 * (m->num_kv_heads >= t ? m->num_kv_heads / t : 1.0) * m->head_dim;
    lc->cp_s += (x->st->cp - 1) * nd_p2p_time(&x->fabric, x->g[ND_GROUP_CP].stride,
                                             ab * T * kvw);
  }
  /* parameters held by one device */
  nd_layer_params(m, layer, &pb);
  lc->p_dense = (double)(pb.attention + pb.dense_mlp + pb.shared_experts + pb.mtp_proj) / t
              + (double)(pb.attention_replicated + pb.router + pb.norms);
  lc->p_expert = (double)pb.routed_experts / ((double)x->st->ep * x->st->etp);
  lc->q_dense = lc->p_dense - (double)(pb.router + pb.norms);
  lc->q_expert = lc->p_expert;
  lc->gather_bytes = x->c->weight_bytes * (lc->p_dense + lc->p_expert)
                   + (x->w.gather - x->c->weight_bytes) * (lc->q_dense + lc->q_expert);
  lc->launch = identity ? 0.0 : 1.0;
  if (x->stages) { pass_costs(x, lc); lc->passed = 1; }
  lc->ready = 1;
  return lc;
}

double nd_inflight (const nd_strategy *st, int s) {
  int p = st->pp, m = st->mb, v = st->vpp;
  switch (st->schedule) {
    case ND_SCHED_GPIPE: return m;
    case ND_SCHED_DUALPIPE: return p + 1;  /* DualPipe README: PP + 1 stage activations */
    case ND_SCHED_INTERLEAVED: {
      /* Megatron's warm-up: (p - s - 1)*2 + (v - 1)*p chunk forwards, plus the one in
         progress; forward j runs chunk (j mod p*v) / p, and each holds its chunk's share
         of the stage's layers (1/v when the chunks are equal) */
      int w = nd_pipeline_warmup(st, s) + 1, c, n = 0, full, rest;
      double held = 0.0;
      if (w > m * v) w = m * v;
      full = (w / (p * v)) * p;  /* forwards of each chunk in the complete rounds */
      rest = w % (p * v);
      for (c = 0; c < v; c++) {
        int k = st->stage_layers[c * p + s], r = rest - c * p;
        n += k;
        held += (double)k * (full + (r < 0 ? 0 : r > p ? p : r));
      }
      return n > 0 ? held / n : (double)w / v;
    }
    default: return p - s < m ? p - s : m;
  }
}

/* Bytes a layer keeps, seconds it repeats and FLOPs it redoes when selective recompute
   runs the switches in `mask`: each switch drops what its op produced. */
static double sel_act (const layer_cost *lc, unsigned mask) {
  double kept = lc->act[ND_RECOMPUTE_NONE];
  int op;
  for (op = 0; op < ND_OP_COUNT; op++) if (mask & ND_OP_BIT(op)) kept -= lc->op_bytes[op];
  return kept < lc->act[ND_RECOMPUTE_FULL] ? lc->act[ND_RECOMPUTE_FULL] : kept;
}

static double sel_time (const layer_cost *lc, unsigned mask) {
  double t = 0.0;
  int op;
  for (op = 0; op < ND_OP_COUNT; op++) if (mask & ND_OP_BIT(op)) t += lc->op_time[op];
  return t;
}

static double sel_flops (const layer_cost *lc, unsigned mask) {
  double f = 0.0;
  int op;
  for (op = 0; op < ND_OP_COUNT; op++) if (mask & ND_OP_BIT(op)) f += lc->op_flops[op];
  return f;
}

#define MAX_SEL_GROUPS (KIND_SLOTS * ND_OP_MASKS)  /* every (kind, switches) pair */

/* A stage's layers, summed. */
typedef struct stage_sum {
  ctx *x;
  double act, fwd, bwd, rec, tp, cp, ep, p_dense, p_expert, gather, flops_rec;
  double gather_grad;  /* the unsharded gradient of that layer, while it is reduce-scattered */
  double q_dense, q_expert;                   /* parameters of quantized linear layers */
  double core_s_total, layers, flops_model;
  double act_off;                             /* activation bytes of offloaded layers */
  double working;                             /* the largest bytes one recomputed layer
                                                 rebuilds for its backward */
  int nused, nsel;
  /* (what follows is not cleared per stage: count and count_off are zero again after
     stage_total; example, used and sel are written before they are read) */
  int count[KIND_SLOTS][ND_RECOMPUTE_COUNT];  /* layers per kind and recompute mode */
  int count_off[KIND_SLOTS][ND_RECOMPUTE_COUNT];  /* of which offloaded (layer_offload) */
  int example[KIND_SLOTS];                    /* one layer of each kind */
  int used[KIND_SLOTS];                       /* the kinds counted, in first-seen order */
  struct { int slot, mask, n, off; } sel[MAX_SEL_GROUPS];  /* selective layers with their
                                                              own switches (nsel) */
} stage_sum;

/*
** A layer's pass on the device: its work, but no less than the time the host takes to
** issue its kernels (kernel_overhead per pass, twice for the backward's two GEMMs per
** weight; none for an identity layer: passes 0). Small layers are launch-bound: vTrain's
** single-node runs take about the same time per layer at 1 and 2 sequences per micro-batch.
*/
static double layer_pass (const ctx *x, double work, double passes) {
  double floor = passes * x->dev->efficiency.kernel_overhead;
  return work > floor ? work : floor;
}

/*
** The part of a pass's inline communication (TP collectives) that shows: the device runs it
** while the host is still issuing the pass's kernels, so only what outlasts the launch
** floor adds to the pass (vTrain's single-node runs: TP 4 and 8 no slower than the floor).
*/
static double comm_shown (const ctx *x, double work, double comm, double passes) {
  double floor = passes * x->dev->efficiency.kernel_overhead;
  double shown = work + comm - (work > floor ? work : floor);
  return shown > 0.0 ? shown : 0.0;
}

/* Compute a layer's recompute mode adds per micro-batch (its communication apart). */
static double recompute_time (const ctx *x, const layer_cost *lc, int mode) {
  if (mode == ND_RECOMPUTE_FULL) return layer_pass(x, fwd_work(lc), lc->launch);
  if (mode == ND_RECOMPUTE_SELECTIVE) return sel_time(lc, x->st->selective_ops);
  return 0.0;
}

/*
** The exposed data-parallel time of stage s (of p) after overlap. The gradient reduction of
** a model chunk starts when that chunk's last backward ends; the parameter gather of the
** next step (Megatron --overlap-param-gather, FSDP prefetch) runs under the forward. Of v
** interleaved chunks, the first chunk's share hides behind its own last backward (first
** forward); chunk j's behind the j groups of pm = min(p, m) chunk passes that follow its
** last backward (precede its first forward) in the interleaved schedule (Megatron's
** micro-batch group per virtual stage is pp micro-batches). Stage s ends its last
** backward s backwards before stage 0, and starts s forwards after it: idle time that hides
** more. dp_overlap is the share of these windows the collectives use; what is hidden still
** costs the compute the communication kernels take (overlap_sm_share).
*/
static double dp_overlapped (const nd_costs *c, double grad_t, double gather_t,
                             const stage_sum *ss, const nd_strategy *st, int p, int s) {
  double v = st->schedule == ND_SCHED_INTERLEAVED ? (double)st->vpp : 1.0;
  double pm = st->mb < p ? (double)st->mb : (double)p;
  double ov = c->dp_overlap, exposed = 0.0, total = grad_t + gather_t, hidden;
  const double work[2] = {ss->bwd, ss->fwd}, part[2] = {grad_t, gather_t};
  int i;
  for (i = 0; i < 2; i++) {
    double share = part[i] / v, lag = s * work[i], chunk = pm * work[i] / v;
    double own = share - ov * (work[i] / v + lag), rest = share - ov * lag, n;
    exposed += own > 0.0 ? own : 0.0;
    /* chunk j = 1 .. v-1, j groups of chunk passes away from the end, leaves rest - ov j
       chunk exposed while that is positive: the first n of them, summed in closed form */
    if (rest <= 0.0 || v <= 1.0) continue;
    n = ov * chunk > 0.0 ? ceil(rest / (ov * chunk)) - 1.0 : v - 1.0;
    if (n > v - 1.0) n = v - 1.0;
    if (n > 0.0) exposed += n * rest - ov * chunk * n * (n + 1.0) / 2.0;
  }
  hidden = total - exposed;
  return exposed + c->overlap_sm_share * hidden;
}

/* What one layer of a priced kind adds to its stage per micro-batch, once per kind. */
static void pass_costs (const ctx *x, layer_cost *lc) {
  double work = fwd_work(lc);
  unsigned mask = x->st->selective_ops;
  lc->pass.fwd = layer_pass(x, work, lc->launch);
  lc->pass.bwd = layer_pass(x, lc->bwd_s, 2.0 * lc->launch);
  lc->pass.ep = lc->ep_s * exposed_share(x->c, x->c->ep_overlap);
  lc->pass.tp_f = comm_shown(x, work, lc->tp_s, 1.0);
  lc->pass.tp_b = comm_shown(x, lc->bwd_s, lc->tp_s, 2.0);
  lc->pass.sel_act = sel_act(lc, mask);
  lc->pass.sel_time = sel_time(lc, mask);
  lc->pass.sel_flops = sel_flops(lc, mask);
}

/* Adds n layers of one priced kind, all under recompute mode `mode` (selective: with the
   switches in `mask`), to a stage. */
static void add_layers (stage_sum *ss, const layer_cost *lc, int mode, unsigned mask, double n) {
  const ctx *x = ss->x;
  int own = mask == x->st->selective_ops;  /* the strategy's switches: priced with the kind */
  double ep = lc->pass.ep, tp_f = lc->pass.tp_f, tp_b = lc->pass.tp_b;
  ss->layers += n;
  ss->flops_model += n * lc->flops_token;
  ss->act += n * (mode == ND_RECOMPUTE_SELECTIVE ? (own ? lc->pass.sel_act : sel_act(lc, mask))
                                                 : lc->act[mode]);
  ss->fwd += n * lc->pass.fwd;
  ss->bwd += n * lc->pass.bwd;
  ss->tp += n * (tp_f + tp_b);  /* forward and backward */
  ss->ep += n * 2.0 * ep;
  ss->cp += n * 3.0 * lc->cp_s;  /* K,V forward; K,V and their gradients backward */
  if (mode == ND_RECOMPUTE_FULL) {  /* the forward again, with its communication */
    ss->rec += n * lc->pass.fwd;  /* (recompute_time's full pass) */
    ss->tp += n * tp_f;
    ss->ep += n * ep;
    ss->flops_rec += n * lc->flops_token;
  }
  else if (mode == ND_RECOMPUTE_SELECTIVE) {
    ss->rec += n * (own ? lc->pass.sel_time : sel_time(lc, mask));
    ss->flops_rec += n * (own ? lc->pass.sel_flops : sel_flops(lc, mask));
  }
  ss->p_dense += n * lc->p_dense;
  ss->p_expert += n * lc->p_expert;
  if (lc->gather_bytes > ss->gather) {
    ss->gather = lc->gather_bytes;
    ss->gather_grad = x->c->grad_bytes * (lc->p_dense + lc->p_expert);
  }
  ss->core_s_total += n * lc->core_s;  /* CP traffic hides behind the attention core */
}

/*
** Counts one layer of a stage per (kind, mode); stage_total prices each count once, since
** every sum is linear.
*/
static void count_layer (stage_sum *ss, int layer) {
  int slot = kind_slot(ss->x, layer);
  const nd_layer_plan *pl = ss->x->st->layers;  /* NULL: the whole-model mode */
  int mode = pl ? pl->recompute[layer] : (int)ss->x->st->recompute;
  unsigned mask = pl ? pl->ops[layer] : 0u;
  if (ss->x->quant && (layer >= ss->x->m->num_layers
                       || (layer >= ss->x->q_first && layer < ss->x->q_end))) {
    const layer_cost *lc = price_kind(ss->x, layer);  /* priced once per kind */
    ss->q_dense += lc->q_dense;
    ss->q_expert += lc->q_expert;
  }
  if (mode == ND_RECOMPUTE_SELECTIVE && mask && mask != ss->x->st->selective_ops) {
    int g;  /* a switch set of its own: counted apart, priced with its own bytes and time */
    for (g = 0; g < ss->nsel; g++)
      if (ss->sel[g].slot == slot && ss->sel[g].mask == (int)mask) break;
    if (g == ss->nsel) {
      ss->sel[g].slot = slot; ss->sel[g].mask = (int)mask; ss->sel[g].n = ss->sel[g].off = 0;
      ss->nsel++;
    }
    ss->sel[g].n++;
    if (pl->offload[layer]) ss->sel[g].off++;  /* mask set: a plan */
    if (ss->count[slot][ND_RECOMPUTE_NONE] + ss->count[slot][ND_RECOMPUTE_SELECTIVE]
        + ss->count[slot][ND_RECOMPUTE_FULL] == 0) ss->example[slot] = layer;
    return;
  }
  if (ss->count[slot][ND_RECOMPUTE_NONE] + ss->count[slot][ND_RECOMPUTE_SELECTIVE]
      + ss->count[slot][ND_RECOMPUTE_FULL] == 0) ss->used[ss->nused++] = slot;
  if (ss->count[slot][mode]++ == 0) ss->example[slot] = layer;
  if (pl && pl->offload[layer]) ss->count_off[slot][mode]++;
}

/*
** Counts the n layers from `first` of a stage's chunk: count_layer's counts, taken a run of
** one kind at a time when every layer runs the strategy's mode.
*/
static void count_chunk (stage_sum *ss, int first, int n) {
  const ctx *x = ss->x;
  int i = first, end = first + n, mode = (int)x->st->recompute, body = (int)x->m->num_layers;
  if (x->st->layers) {
    for (; i < end; i++) count_layer(ss, i);
    return;
  }
  while (i < end) {
    int e = x->kinds->run_end[i] < end ? x->kinds->run_end[i] : end, slot = kind_slot(x, i);
    if (x->quant) {  /* the quantized layers of the run, one by one as count_layer adds them */
      int a = i > x->q_first ? i : x->q_first, b = e < x->q_end ? e : x->q_end, j;
      int q = (b > a ? b - a : 0) + (e > body ? e - (i > body ? i : body) : 0);
      if (q > 0) {
        const layer_cost *lc = price_kind(ss->x, i);  /* priced once per kind */
        for (j = 0; j < q; j++) {
          ss->q_dense += lc->q_dense;
          ss->q_expert += lc->q_expert;
        }
      }
    }
    if (ss->count[slot][ND_RECOMPUTE_NONE] + ss->count[slot][ND_RECOMPUTE_SELECTIVE]
        + ss->count[slot][ND_RECOMPUTE_FULL] == 0) ss->used[ss->nused++] = slot;
    if (ss->count[slot][mode] == 0) ss->example[slot] = i;
    ss->count[slot][mode] += e - i;
    i = e;
  }
}

/* Prices a stage's counts (and clears them for the next stage). */
static void stage_total (stage_sum *ss) {
  int u, mode, g;
  for (u = 0; u < ss->nused; u++)  /* only the kinds the stage holds */
    for (mode = 0; mode < ND_RECOMPUTE_COUNT; mode++) {
      int slot = ss->used[u];
      if (ss->count[slot][mode] > 0) {
        const layer_cost *lc = price_kind(ss->x, ss->example[slot]);
        add_layers(ss, lc, mode, ss->x->st->selective_ops, ss->count[slot][mode]);
        ss->act_off += ss->count_off[slot][mode] * lc->act[mode];
        if (lc->act[ND_RECOMPUTE_NONE] - lc->act[mode] > ss->working)
          ss->working = lc->act[ND_RECOMPUTE_NONE] - lc->act[mode];
        ss->count[slot][mode] = ss->count_off[slot][mode] = 0;
      }
    }
  for (g = 0; g < ss->nsel; g++) {
    const layer_cost *lc = price_kind(ss->x, ss->example[ss->sel[g].slot]);
    double kept = sel_act(lc, (unsigned)ss->sel[g].mask);
    add_layers(ss, lc, ND_RECOMPUTE_SELECTIVE, (unsigned)ss->sel[g].mask, ss->sel[g].n);
    ss->act_off += ss->sel[g].off * kept;
    if (lc->act[ND_RECOMPUTE_NONE] - kept > ss->working)
      ss->working = lc->act[ND_RECOMPUTE_NONE] - kept;
  }
}

static void place_groups (ctx *x) {
  const nd_strategy *st = x->st;
  int dense = st->tp * st->cp * st->dp;
  x->g[ND_GROUP_TP] = nd_group_place(&x->fabric, st->tp, 1);
  x->g[ND_GROUP_CP] = nd_group_place(&x->fabric, st->cp, st->tp);
  nd_dp_groups_place(&x->fabric, x->m, st, st->dp, &x->dp_all);
  if (st->dp_shard < st->dp) nd_dp_groups_place(&x->fabric, x->m, st, st->dp_shard, &x->dp_shard);
  else x->dp_shard = x->dp_all;
  x->g[ND_GROUP_DP] = x->dp_all.dense;
  x->g[ND_GROUP_PP] = nd_group_place(&x->fabric, st->pp, dense);
  x->g[ND_GROUP_ETP] = nd_group_place(&x->fabric, st->etp, 1);
  x->g[ND_GROUP_EP] = nd_group_place(&x->fabric, st->ep, st->etp);
  x->g[ND_GROUP_EDP] = x->dp_all.expert;
}

static void init_ctx (ctx *x, const nd_model_spec *m, const nd_device *dev,
                      const nd_job *job, const nd_strategy *st, const nd_costs *costs) {
  int i;
  memset(x, 0, offsetof(ctx, kind));
  for (i = 0; i < KIND_SLOTS; i++) x->own_kind[i].ready = 0;
  x->kind = x->own_kind;
  x->m = m; x->dev = dev; x->job = job; x->st = st; x->c = costs;
  if (m->kinds.count != 0) x->kinds = &m->kinds;  /* numbered once per model */
  else {
    nd_kind_index_build(m, &x->own);
    x->kinds = &x->own;
  }
}

void nd_estimate_fabric (const nd_device *dev, nd_fabric *f) {
  f->domain = dev->scale_up.domain_size > 0 ? dev->scale_up.domain_size : 1;
  f->up.bandwidth = dev->scale_up.bandwidth * dev->efficiency.scale_up;
  f->up.latency = dev->scale_up.latency;
  f->out.bandwidth = dev->scale_out.bandwidth * dev->efficiency.scale_out;
  f->out.latency = dev->scale_out.latency;
}

/* Fills the per-call context: peaks, fabric, tokens per rank, groups. */
static int setup (ctx *x_, char *err, size_t errlen) {
  const nd_recipe *rec = nd_strategy_recipe(x_->st);
  if (x_->kinds->count < 0) {
    snprintf(err, errlen, "model: more than %d distinct layer kinds", KIND_SLOTS);
    return -1;
  }
  if (nd_recipe_check(x_->st, x_->dev, (int)x_->m->num_layers, err, errlen) != 0) return -1;
  x_->gemm = rec->gemm;
  x_->peak = nd_device_peak_flops(x_->dev, rec->gemm);  /* the recipe's GEMM precision */
  x_->quant = rec->element_bytes > 0.0;
  {
    int body = (int)x_->m->num_layers, first, last;
    nd_strategy_bf16_layers(x_->st, body, &first, &last);
    x_->q_first = first;
    x_->q_end = body - last;
  }
  {  /* row-wise scaled GEMMs run their own kernels, at their own fraction of the peak */
    const nd_efficiency *e = &x_->dev->efficiency;
    x_->gemm_scale = rec == nd_recipe_get(ND_RECIPE_FP8_ROWWISE) && e->gemm_fp8_rowwise > 0.0
                     && e->gemm_fp8 > 0.0 ? e->gemm_fp8_rowwise / e->gemm_fp8 : 1.0;
    if (rec->soft_blocks) x_->gemm_scale *= x_->c->fp8_block_gemm_rate;
  }
  /* a cast reads and writes fp8_cast_bytes per element; current scaling reads the input
     once more for its amax; a block format writes a scale per block for each copy */
  x_->cast_bytes = x_->c->fp8_cast_bytes + rec->amax_pass * x_->c->fp8_amax_bytes
                   + (rec->block > 0 ? (rec->copies > 0 ? rec->copies : 1) * rec->scale_bytes
                                       / rec->block : 0.0);
  x_->peak16 = rec->gemm == ND_PREC_FP16 ? x_->peak : nd_device_peak_flops(x_->dev, ND_PREC_BF16);
  {  /* SP all-gathers: a quantized recipe's element and block-scale bytes, the share
        tp_gather_quantized of them (row-wise scaling casts after the gather), else 16 bits */
    double ab = x_->c->activation_bytes, q = ab;
    if (x_->quant && rec != nd_recipe_get(ND_RECIPE_FP8_ROWWISE))
      q = rec->element_bytes + (rec->block > 0 ? rec->scale_bytes / rec->block : 0.0);
    x_->tp_gather = ab + x_->c->tp_gather_quantized * (q - ab);
  }
  nd_recipe_widths_of(rec, x_->st->param_gather, x_->st->zero, x_->c->weight_bytes,
                      x_->c->quant_cache, &x_->w);
  x_->hbm = x_->dev->hbm_bandwidth * x_->dev->efficiency.hbm;
  nd_estimate_fabric(x_->dev, &x_->fabric);
  x_->T = (double)x_->st->mbs * x_->job->seq_len / x_->st->cp;
  x_->r = x_->st->sp ? 1.0 / x_->st->tp : 1.0;
  {  /* Megatron pads the vocabulary to a multiple of 128 * tp */
    double unit = 128.0 * x_->st->tp;
    x_->vocab = ceil((double)x_->m->vocab_size / unit) * unit;
  }
  place_groups(x_);
  return 0;
}

/* What the stages of one run share and what they add up to (nd_estimate_run). */
typedef struct run_sums {
  double pp_one;       /* one activation transfer between pipeline stages */
  int64_t outer_first, outer_last, tied_copy;  /* nd_model_outer_params */
  int dual;            /* DualPipe */
  double slow;         /* the slowest stage's time per micro-batch */
  double zb_term, dual_term;  /* the worst stage's bubble terms of ZB and DualPipe */
  double dp_exposed, opt_time, flops_rec, flops_model;
} run_sums;

/* The head's forward and backward per micro-batch on the stage that holds it: its GEMM at
   16 bits over the padded vocabulary (vocabulary-parallel over TP; the backward's two),
   and the loss's element-wise passes over the logits. */
static void head_times (const ctx *x, double *fwd, double *bwd) {
  const nd_strategy *st = x->st;
  double h = (double)x->m->hidden_size;
  double loss = x->c->memory_ops * 4.0 * x->T * x->vocab / st->tp / x->hbm;
  *fwd = gemm16_time(x, 2.0 * x->T * h * x->vocab / st->tp) + loss;
  *bwd = 2.0 * gemm16_time(x, 2.0 * x->T * h * x->vocab / st->tp) + loss;
}

int nd_estimate_head (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                      nd_strategy *st, const nd_costs *costs, double *time_s) {
  ctx x;
  char err[8];
  double fwd, bwd;
  if (nd_strategy_resolve(st, m, job, err, sizeof err) != 0) return -1;
  init_ctx(&x, m, dev, job, st, costs);
  if (setup(&x, err, sizeof err) != 0) return -1;
  head_times(&x, &fwd, &bwd);
  *time_s = fwd + bwd;
  return 0;
}

/*
** The model's ends on stage s (embedding side, final norm and head) added to its sums, and
** DualPipe's halving; the activations the ends keep per micro-batch in *extra_act. Returns
** whether the stage holds the last end.
*/
static int stage_ends (const ctx *x, const run_sums *r, int s, stage_sum *ss, double *extra_act) {
  const nd_strategy *st = x->st;
  const nd_costs *costs = x->c;
  double h = (double)x->m->hidden_size;
  int p = st->pp, dual = r->dual;
  /* DualPipe: devices 0 and p-1 each hold both ends of the model */
  int first_end = s == 0 || (dual && s == p - 1);
  int last_end = s == p - 1 || (dual && s == 0);
  *extra_act = 0.0;
  if (first_end) {  /* embedding side: vocabulary-parallel over TP */
    ss->p_dense += (double)r->outer_first / st->tp;
    *extra_act += 8.0 * x->T + costs->dropout * x->T * h * x->r;  /* ids, embedding mask */
  }
  if (last_end) {  /* final norm, head (a copy when tied across stages) */
    double fwd, bwd;
    ss->p_dense += (double)r->outer_last / st->tp + (p > 1 ? (double)r->tied_copy / st->tp : 0.0);
    head_times(x, &fwd, &bwd);
    ss->fwd += fwd;
    ss->bwd += bwd;
  }
  if (dual) {  /* each direction carries half the micro-batches through one of the two
                  stages: per micro-batch, the work and the activations of their mean; and
                  as every layer is on two devices, the model's FLOPs per token are half
                  the stage's layers' (summed over the stages, each layer once) */
    ss->fwd *= 0.5; ss->bwd *= 0.5; ss->rec *= 0.5; ss->tp *= 0.5; ss->ep *= 0.5; ss->cp *= 0.5;
    ss->core_s_total *= 0.5; ss->act *= 0.5; ss->act_off *= 0.5; *extra_act *= 0.5;
    ss->flops_model *= 0.5; ss->flops_rec *= 0.5;
  }
  return last_end;
}

/*
** Stage s's memory (se's bytes and peak); returns the activation bytes of the waiting
** micro-batches that sit in host memory (offload), which the stage's time copies.
*/
static double stage_memory (const ctx *x, const run_sums *r, int s, const stage_sum *ss,
                            double extra_act, int last_end, nd_stage_estimate *se) {
  const nd_strategy *st = x->st;
  const nd_costs *costs = x->c;
  double h = (double)x->m->hidden_size, ab = costs->activation_bytes;
  double pd = ss->p_dense, pe = ss->p_expert;
  double dpc = x->dp_shard.dense_ranks, edp = x->dp_shard.expert_ranks;
  double inflight, off_copy;
  /* ZeRO: what data parallelism shards (dense over DPxCP, experts over expert-DP) */
  nd_zero_split z = nd_zero_split_of(st->zero, st->reshard);
  double wd = z.weights ? dpc : 1.0, we = z.weights ? edp : 1.0;  /* the weights' divisors */
  se->layers = (int)ss->layers;
  se->params = pd + pe;
  se->weights = costs->weight_bytes * (z.weights ? costs->zero3_weight_copy : 1.0)
              * (pd / wd + pe / we);
  se->quant_params = ss->q_dense + ss->q_expert;
  if (x->quant)  /* the recipe's stored width and the quantized copies it keeps */
    se->weights += (x->w.param - costs->weight_bytes) * (ss->q_dense / wd + ss->q_expert / we)
                 + x->w.cache * se->quant_params;
  se->grads = costs->grad_bytes * (pd / (z.grads ? dpc : 1.0) + pe / (z.grads ? edp : 1.0));
  se->optimizer = (costs->master_bytes + costs->optimizer_bytes)
                * (pd / (z.optimizer ? dpc : 1.0) + pe / (z.optimizer ? edp : 1.0));
  inflight = nd_inflight(st, s);
  se->inflight = inflight;
  /* offload: of the micro-batches waiting for their backward, a share of each one's
     layer activations sits in host memory; the one being computed stays */
  off_copy = inflight > 1.0 ? st->offload * (ss->act - ss->act_off) + ss->act_off : 0.0;
  se->activations = (ss->act + extra_act) * inflight - off_copy * (inflight - 1.0);
  if (last_end)  /* fp32 logits and their gradient, one micro-batch (Megatron); the head's
                    gathered input kept whole under DTensor TP */
    se->activations += 4.0 * x->T * h * x->r + loss_bytes(x) * x->T * x->vocab / st->tp
                     + costs->sp_gather_kept * ab * x->T * h * (1.0 - x->r);
  /* transient buffers: the largest of a TP/SP gather, a ZeRO-3 double-buffered gather;
     and the working set of recompute: when warm-up ends, the first backward rebuilds
     one layer's dropped activations for one micro-batch on top of all that is held */
  /* (DualPipe: the mean of the two stages, as every activation above) */
  se->buffers = nd_stage_buffers(costs, st->tp, st->zero >= 3 && st->reshard, x->T, h,
                                ss->gather, ss->gather_grad)
              + ss->working * (r->dual ? 0.5 : 1.0);
  se->reserve = x->dev->reserve_bytes;
  se->allocated = se->weights + se->grads + se->optimizer + se->activations + se->buffers;
  se->reserved = se->allocated * (1.0 + costs->alloc_fragmentation);
  se->peak = se->reserved + se->reserve;
  return off_copy;
}

/*
** Stage s's time per micro-batch (se's compute and exposed communication, with the host
** copies of off_copy bytes), into the run's bubble terms and, when it is the slowest stage,
** out's time parts (per micro-batch until pipeline_parts scales them).
*/
static void stage_time (const ctx *x, run_sums *r, stage_sum *ss, double off_copy,
                        nd_stage_estimate *se, nd_estimate *out) {
  const nd_costs *costs = x->c;
  double cp_hidden = costs->cp_overlap * 3.0 * ss->core_s_total, cp_exposed, off_s, t_mb;
  se->fwd_s = ss->fwd;
  se->bwd_s = ss->bwd;
  se->recompute_s = ss->rec;
  if (cp_hidden > ss->cp) cp_hidden = ss->cp;
  cp_exposed = ss->cp - cp_hidden + costs->overlap_sm_share * cp_hidden;
  if (r->dual) {  /* a forward and a backward chunk run together: each one's all-to-all
                     hides behind the other's compute (DeepSeek-V3 report, DualPipe) */
    double hidden;
    if (ss->ep > 0.0) {  /* the overlap costs compute units */
      double slowdown = 1.0 / (1.0 - costs->overlap_sm_share);
      ss->fwd *= slowdown; ss->bwd *= slowdown; ss->rec *= slowdown;
    }
    hidden = ss->fwd + ss->bwd + ss->rec;
    ss->ep = ss->ep > hidden ? ss->ep - hidden : 0.0;
  }
  se->comm_s = ss->tp + ss->ep + cp_exposed;
  off_s = 0.0;
  if (off_copy > 0.0) {  /* out after the forward, back before the backward */
    const nd_device_link *hl = &x->dev->host_link;
    off_s = 2.0 * (off_copy / hl->bandwidth + hl->latency)
          - costs->offload_overlap * (ss->fwd + ss->bwd + ss->rec);
    if (off_s < 0.0) off_s = 0.0;
  }
  t_mb = ss->fwd + ss->bwd + ss->rec + se->comm_s + off_s;
  /* the bubbles that credit the weight-gradient half of a backward take their stage's
     own terms, at the worst stage (not the slowest stage's mix): monotone in its work */
  if (t_mb - 0.5 * ss->bwd > r->zb_term) r->zb_term = t_mb - 0.5 * ss->bwd;
  if (t_mb + ss->rec - 0.5 * ss->bwd > r->dual_term) r->dual_term = t_mb + ss->rec - 0.5 * ss->bwd;
  if (t_mb > r->slow) {
    r->slow = t_mb;
    out->time_parts[ND_T_FORWARD] = ss->fwd;
    out->time_parts[ND_T_BACKWARD] = ss->bwd;
    out->time_parts[ND_T_RECOMPUTE] = ss->rec;
    out->time_parts[ND_T_TP] = ss->tp;
    out->time_parts[ND_T_CP] = cp_exposed;
    out->time_parts[ND_T_EP] = ss->ep;
    out->time_parts[ND_T_OFFLOAD] = off_s;
  }
}

/* Stage s's exposed data-parallel time per step: gradient reduction (and parameter gather
   after a sharded step). */
static double stage_dp_time (const ctx *x, int s, const stage_sum *ss) {
  const nd_strategy *st = x->st;
  const nd_costs *costs = x->c;
  double pd = ss->p_dense, pe = ss->p_expert, wd, we;
  /* parameter all-gathers at the recipe's width (param gather) */
  wd = costs->weight_bytes * pd + (x->w.gather - costs->weight_bytes) * ss->q_dense;
  we = costs->weight_bytes * pe + (x->w.gather - costs->weight_bytes) * ss->q_expert;
  if (st->zero == 3 && st->reshard) {
    /* ZeRO-3: gather before forward and backward (and the recompute), reduce-scatter,
       every micro-batch; HSDP's replicas all-reduce the shards once a step */
    double gathers = 2.0 + (ss->rec > 0.0 ? 1.0 : 0.0);
    double per_mb = nd_zero3_mb_time(&x->fabric, costs, &x->dp_shard, gathers, wd, we, pd, pe);
    return st->mb * nd_zero3_shown(costs, per_mb, ss->fwd + ss->bwd + ss->rec)
         + nd_dp_replica_time(&x->fabric, costs, &x->dp_shard, st->zero, pd, pe);
  } else {  /* sharded gradients or optimizer (FSDP unresharded: once per step) */
    double grad_t, gather_t;
    nd_dp_step_times(&x->fabric, costs, st->zero == 0 ? &x->dp_all : &x->dp_shard, st->zero,
                     pd, pe, wd, we, &grad_t, &gather_t);
    return dp_overlapped(costs, grad_t, gather_t, ss, st, st->pp, s);
  }
}

/* Prices stage s into out->stage[s] and the run's sums. */
static void price_stage (ctx *x, run_sums *r, int s, const int *starts, stage_sum *ss,
                         nd_estimate *out) {
  const nd_strategy *st = x->st;
  nd_stage_estimate *se = &out->stage[s];
  double extra_act, off_copy, dp_time;
  int last_end, k[ND_MAX_CHUNKS], n = nd_stage_chunks(st, s, k), c;
  memset(ss, 0, offsetof(stage_sum, count));  /* the sums of this stage */
  ss->x = x;
  for (c = 0; c < n; c++)
    if (st->stage_layers[k[c]] > 0) count_chunk(ss, starts[k[c]], st->stage_layers[k[c]]);
  stage_total(ss);
  last_end = stage_ends(x, r, s, ss, &extra_act);
  off_copy = stage_memory(x, r, s, ss, extra_act, last_end, se);
  if (se->peak > out->peak) { out->peak = se->peak; out->heaviest = s; }
  stage_time(x, r, ss, off_copy, se, out);
  dp_time = stage_dp_time(x, s, ss);
  if (dp_time > r->dp_exposed) r->dp_exposed = dp_time;
  {  /* optimizer step: streams the local shard of weights, grads and states */
    double pd = ss->p_dense, pe = ss->p_expert;
    double local = st->zero >= 1 ? pd / x->dp_shard.dense_ranks + pe / x->dp_shard.expert_ranks
                                 : pd + pe;
    double t_opt = x->c->optimizer_traffic * local / x->hbm;
    if (t_opt > r->opt_time) r->opt_time = t_opt;
  }
  r->flops_rec += ss->flops_rec;
  r->flops_model += ss->flops_model;
}

/* The pipeline: m micro-batches at the pace of the slowest stage, plus the bubble; the
   per-step parts (PP, DP, optimizer) into out. */
static void pipeline_parts (const ctx *x, const run_sums *r, nd_estimate *out) {
  const nd_strategy *st = x->st;
  const nd_costs *costs = x->c;
  double mb = st->mb, v = st->vpp, bubble, pp_t;
  int p = st->pp, i;
  switch (st->schedule) {
    case ND_SCHED_INTERLEAVED: bubble = (p - 1) * r->slow / v; break;
    case ND_SCHED_ZB:  /* ZB-H1: weight-gradient work fills the cool-down */
      bubble = (p - 1) * r->zb_term; break;
    case ND_SCHED_DUALPIPE:  /* (p/2 - 1)(F&B + B - 3W), W = half the backward */
      bubble = (p / 2 - 1) * r->dual_term;
      break;
    default: bubble = (p - 1) * r->slow; break;
  }
  for (i = ND_T_FORWARD; i <= ND_T_EP; i++) out->time_parts[i] *= mb;
  out->time_parts[ND_T_OFFLOAD] *= mb;
  /* each micro-batch crosses every chunk boundary forward and back; schedules that
     overlap the transfers hide pp_overlap of them, at the compute the kernels take */
  pp_t = p > 1 ? 2.0 * r->pp_one * (mb * v + p - 1) : 0.0;
  if (st->schedule == ND_SCHED_INTERLEAVED || st->schedule == ND_SCHED_DUALPIPE)
    pp_t *= exposed_share(costs, costs->pp_overlap);
  out->time_parts[ND_T_PP] = pp_t;
  out->time_parts[ND_T_DP] = r->dp_exposed;
  out->time_parts[ND_T_OPTIMIZER] = r->opt_time + costs->step_overhead;
  out->time_parts[ND_T_BUBBLE] = bubble;
}

/* The step from its parts: step time, throughput, model and hardware FLOPs, MFU and HFU,
   and the groups' placement. */
static void step_totals (const ctx *x, const run_sums *r, nd_estimate *out) {
  const nd_job *job = x->job;
  double h = (double)x->m->hidden_size, step = 0.0, tokens;
  int i;
  for (i = 0; i < ND_T_COUNT; i++) step += out->time_parts[i];
  out->step_time = step;
  tokens = (double)job->global_batch * job->seq_len;
  out->tokens_per_s = tokens / step;
  /* model FLOPs: 3 x forward (no recompute), causal attention halved, plus the head */
  {
    double per_token = r->flops_model + 2.0 * h * (double)x->m->vocab_size, rec_per_token;
    out->model_flops = 3.0 * per_token * tokens;
    /* flops_rec sums one replica's stages: per token it is already unsharded */
    rec_per_token = r->flops_rec;
    out->hardware_flops = out->model_flops + rec_per_token * tokens;
    out->mfu = out->model_flops / ((double)job->devices * x->peak * step);
    out->hfu = out->hardware_flops / ((double)job->devices * x->peak * step);
  }
  for (i = 0; i < ND_GROUP_COUNT; i++) {
    out->topology[i].size = x->g[i].size;
    out->topology[i].stride = x->g[i].stride;
    out->topology[i].local = x->g[i].local;
  }
}

int nd_estimate_run (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                     nd_strategy *st, const nd_costs *costs, nd_estimate *out,
                     char *err, size_t errlen) {
  return nd_estimate_run_cached(m, dev, job, st, costs, NULL, out, err, errlen);
}

int nd_estimate_run_cached (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                            nd_strategy *st, const nd_costs *costs, nd_price_cache *pc,
                            nd_estimate *out, char *err, size_t errlen) {
  ctx x;
  run_sums r;
  stage_sum ss;
  int s, p, starts[ND_MAX_CHUNKS];
  double h = (double)m->hidden_size, ab = costs->activation_bytes;
  if (!nd_price_cache_validated(pc, costs) && nd_costs_validate(costs, err, errlen) != 0) return -1;
  if (nd_strategy_resolve(st, m, job, err, errlen) != 0) return -1;
  init_ctx(&x, m, dev, job, st, costs);
  if (setup(&x, err, errlen) != 0) return -1;
  nd_price_cache_use(&x, pc);
  x.stages = 1;
  memset(out, 0, sizeof *out - sizeof out->stage);
  p = st->pp;
  out->stages = p;
  memset(&r, 0, sizeof r);
  r.dual = st->schedule == ND_SCHED_DUALPIPE;
  r.slow = -1.0;
  r.zb_term = r.dual_term = -HUGE_VAL;
  nd_model_outer_params(m, &r.outer_first, &r.outer_last, &r.tied_copy);
  r.pp_one = p > 1 ? nd_p2p_time(&x.fabric, x.g[ND_GROUP_PP].stride, ab * x.T * h * x.r) : 0.0;
  nd_chunk_starts(st, starts);
  memset(&ss, 0, offsetof(stage_sum, example));  /* the counts: zero again after each stage */
  for (s = 0; s < p; s++) price_stage(&x, &r, s, starts, &ss, out);
  pipeline_parts(&x, &r, out);
  step_totals(&x, &r, out);
  return 0;
}

/* Layer `layer`'s figures from its kind's prices (x set up for the strategy); sets: with
   those of every set of selective switches. */
static void layer_out (ctx *x, int layer, nd_layer_estimate *out, int sets) {
  const nd_costs *costs = x->c;
  layer_cost *lc = price_kind(x, layer);
  int i;
  for (i = 0; i < ND_RECOMPUTE_COUNT; i++) {
    out->activations[i] = lc->act[i];
    out->recompute_s[i] = recompute_time(x, lc, i);
    if (i == ND_RECOMPUTE_FULL)  /* the repeated forward's TP and EP traffic */
      out->recompute_s[i] += comm_shown(x, fwd_work(lc), lc->tp_s, 1.0)
                           + lc->ep_s * exposed_share(costs, costs->ep_overlap);
  }
  if (sets) {  /* every set of switches, each from the set without its lowest switch */
    double dropped[ND_OP_MASKS];
    dropped[0] = 0.0;
    out->sel_recompute_s[0] = 0.0;
    for (i = 1; i < ND_OP_MASKS; i++) {
      int low = 0;
      while (!(i & (1 << low))) low++;
      dropped[i] = dropped[i & (i - 1)] + lc->op_bytes[low];
      out->sel_recompute_s[i] = out->sel_recompute_s[i & (i - 1)] + lc->op_time[low];
    }
    for (i = 0; i < ND_OP_MASKS; i++) {  /* as sel_act: never below what full keeps */
      double kept = lc->act[ND_RECOMPUTE_NONE] - dropped[i];
      out->sel_activations[i] = kept < lc->act[ND_RECOMPUTE_FULL] ? lc->act[ND_RECOMPUTE_FULL]
                                                                  : kept;
    }
  }
  out->forward_s = layer_pass(x, fwd_work(lc), lc->launch);
  out->backward_s = layer_pass(x, lc->bwd_s, 2.0 * lc->launch);
  /* as pass_costs prices them for add_layers: the TP that shows, the exposed EP */
  out->backward_comm_s = comm_shown(x, lc->bwd_s, lc->tp_s, 2.0)
                       + lc->ep_s * exposed_share(costs, costs->ep_overlap);
  out->attn_core_s = lc->core_s;
  out->tp_comm_s = lc->tp_s;
  out->cp_comm_s = lc->cp_s;
  out->ep_comm_s = lc->ep_s;
  out->params = lc->p_dense + lc->p_expert;
  out->params_expert = lc->p_expert;
  out->flops_token = lc->flops_token;
}

int nd_estimate_layer (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                       nd_strategy *st, const nd_costs *costs, int layer,
                       nd_layer_estimate *out, char *err, size_t errlen) {
  return nd_estimate_layers(m, dev, job, st, costs, NULL, 1, &layer, out, err, errlen);
}

static int estimate_layers (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                            nd_strategy *st, const nd_costs *costs, nd_price_cache *pc, int n,
                            const int *layers, nd_layer_estimate *out, int sets, char *err,
                            size_t errlen) {
  ctx x;
  int i;
  if (!nd_price_cache_validated(pc, costs) && nd_costs_validate(costs, err, errlen) != 0) return -1;
  if (nd_strategy_resolve(st, m, job, err, errlen) != 0) return -1;
  for (i = 0; i < n; i++)
    if (layers[i] < 0 || layers[i] >= m->num_layers + m->mtp_layers) {
      snprintf(err, errlen, "layer: %d is not a layer of the model", layers[i]);
      return -1;
    }
  init_ctx(&x, m, dev, job, st, costs);
  if (setup(&x, err, errlen) != 0) return -1;
  nd_price_cache_use(&x, pc);
  for (i = 0; i < n; i++) layer_out(&x, layers[i], &out[i], sets);
  return 0;
}

int nd_estimate_layers (const nd_model_spec *m, const nd_device *dev, const nd_job *job,
                        nd_strategy *st, const nd_costs *costs, nd_price_cache *pc, int n,
                        const int *layers, nd_layer_estimate *out, char *err, size_t errlen) {
  return estimate_layers(m, dev, job, st, costs, pc, n, layers, out, 1, err, errlen);
}

int nd_estimate_layers_plain (const nd_model_spec *m, const nd_device *dev,
                              const nd_job *job, nd_strategy *st, const nd_costs *costs,
                              nd_price_cache *pc, int n, const int *layers,
                              nd_layer_estimate *out, char *err, size_t errlen) {
  return estimate_layers(m, dev, job, st, costs, pc, n, layers, out, 0, err, errlen);
}
