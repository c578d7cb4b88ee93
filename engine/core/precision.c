/*
** precision.c -- the table of training precision recipes and the rules that go with it:
** their byte widths, the BF16 layers they keep, and the checks that refuse a recipe a
** device or a strategy cannot run.
**
** Sources, restated (no code taken):
**   Megatron-LM arguments.py: --fp8-format {e4m3, hybrid}, --fp8-recipe {tensorwise,
**     delayed, mxfp8, blockwise} with `delayed` the default, --fp8-param-gather,
**     --first-last-layers-bf16 with --num-layers-at-start/end-in-bf16 (1 each),
**     --fp4-format e2m1, --fp4-recipe nvfp4, --fp4-param-gather.
**   Transformer Engine recipes: DelayedScaling (amax history), Float8CurrentScaling,
**     Float8BlockScaling (1x128 tiles of activations and gradients, 128x128 blocks of
**     weights, fp32 scales), MXFP8BlockScaling (E8M0 scale per 32 elements),
**     NVFP4BlockScaling (E2M1 values, E4M3 scale per 16 elements, an fp32 tensor scale).
**     A TE linear layer keeps its quantized weight between micro-batches (Megatron passes
**     is_first_microbatch), as a rowwise and a columnwise copy: the transpose on Hopper,
**     whose FP8 GEMMs take one layout only, and the copy scaled along the other axis for
**     the block formats. (Blackwell's FP8 GEMMs take either layout, so TE may skip the
**     transpose of a per-tensor FP8 weight there: costs.quant_cache = 0.5 says so.)
**   What the FP8 recipes cost beyond their widths (amax_pass, soft_blocks; the costs
**     fp8_amax_bytes and fp8_block_gemm_rate): delayed scaling takes each scale from the
**     amax history and reads a tensor once per cast; current scaling (tensorwise, torchao's
**     rowwise per row, NVFP4's fp32 tensor scale) reduces the tensor's amax first, a second
**     read (TE docs, "FP8 Delayed Scaling" and "FP8 Current Scaling"); the block formats
**     reduce each block's amax inside the cast and write one scale per block
**     (scale_bytes / block per element per copy, counted with the cast); Hopper's FP8
**     tensor cores take one scale per operand, so blockwise's 1x128 / 128x128 scales are
**     applied in the main loop on CUDA cores (DeepSeek-V3 report sec. 3.3.2), slower than a
**     per-tensor FP8 GEMM (NVIDIA, "Faster Training Throughput in FP8 Precision with NVIDIA
**     NeMo", 2025: 128x128 block scaling below tensor-wise on H100); MXFP8 and NVFP4 scales
**     are taken by Blackwell's tensor cores.
**   torchao float8 (torchtitan --float8.recipe_name): tensorwise is its default, rowwise
**     uses one fp32 scale per row; it casts weights on each use and keeps no copy;
**     enable_fsdp_float8_all_gather all-gathers FSDP parameters in float8 (tensorwise).
**   NVIDIA, "Pretraining Large Language Models with NVFP4" (arXiv 2509.25149): only the
**     GEMMs of linear layers (forward, dgrad, wgrad) run in NVFP4, 16x16 weight blocks and
**     1x16 activation and gradient blocks, random Hadamard transforms on wgrad inputs;
**     embeddings, output head, norms, non-linearities, softmax and the attention BMMs stay
**     in BF16, master weights, gradients and optimizer states in FP32, and about 16% of
**     the linear layers stay in BF16, most at the end: on their 62-block 12B model the
**     first 2 and last 8 blocks, ndplan's default.
*/
#include <stdio.h>
#include <string.h>

#include "ndplan/strategy.h"

#define BF16_COMMON "embedding, output head, norms, router, softmax and the attention " \
                    "core (flash attention runs in BF16); fp32 master weights, main " \
                    "gradients and Adam states"

static const nd_recipe recipes[ND_RECIPE_COUNT] = {
  {"bf16", "bf16", "none", ND_PREC_BF16, 0.0, 0, 0, 0, 0, 0.0, 0, 0, 0,
   "everything (mixed precision: fp32 master weights, gradients, optimizer states)",
   "Megatron --bf16", 0, 0},
  {"fp16", "fp16", "none", ND_PREC_FP16, 0.0, 0, 0, 0, 0, 0.0, 0, 0, 0,
   "everything (mixed precision with loss scaling)", "Megatron --fp16", 0, 0},
  {"fp8:delayed", "fp8", "delayed", ND_PREC_FP8, 1.0, 0, 0, 0, 0, 4.0, 2, 0, 0,
   BF16_COMMON, "TE DelayedScaling: one scale per tensor from the amax history; "
   "Megatron --fp8-recipe delayed (its default)", 0, 0},
  {"fp8:tensorwise", "fp8", "tensorwise", ND_PREC_FP8, 1.0, 0, 0, 0, 0, 4.0, 2, 0, 0,
   BF16_COMMON, "TE Float8CurrentScaling: one scale per tensor from its current amax; "
   "Megatron --fp8-recipe tensorwise; torchao tensorwise (torchtitan's default)", 1, 0},
  {"fp8:rowwise", "fp8", "rowwise", ND_PREC_FP8, 1.0, 0, 0, 0, 0, 4.0, 0, 0, 0,
   BF16_COMMON, "torchao rowwise (torchtitan --float8.recipe_name rowwise): one fp32 scale "
   "per row, weights cast on each use", 1, 0},
  {"fp8:blockwise", "fp8", "blockwise", ND_PREC_FP8, 1.0, 128, 128, 1, 128 * 128, 4.0, 2,
   0, 0, BF16_COMMON, "TE Float8BlockScaling (DeepSeek-V3's recipe): 1x128 activation and "
   "gradient tiles, 128x128 weight blocks, fp32 scales; Megatron --fp8-recipe blockwise", 0, 1},
  {"fp8:mxfp8", "fp8", "mxfp8", ND_PREC_MXFP8, 1.0, 32, 32, 0, 32, 1.0, 2, 0, 0,
   BF16_COMMON, "OCP MXFP8 (TE MXFP8BlockScaling): one E8M0 scale per 32 elements, each "
   "copy scaled along its own axis; Megatron --fp8-recipe mxfp8", 0, 0},
  {"nvfp4", "nvfp4", "nvfp4", ND_PREC_NVFP4, 0.5, 16, 16, 1, 16, 1.0, 2, 2, 8,
   BF16_COMMON "; the first 2 and last 8 body layers (about 16% of the linear layers)",
   "NVIDIA NVFP4 pretraining recipe (arXiv 2509.25149; TE NVFP4BlockScaling): E2M1 with "
   "an E4M3 scale per 16 elements (16x16 tiles for weights, stored per 16) and an fp32 "
   "tensor scale; Megatron --fp4-format e2m1 --fp4-recipe nvfp4", 1, 0},
};

/* The table is indexed by nd_recipe_id: a new id without its row would read garbage. */
typedef char recipe_table_complete[sizeof recipes / sizeof recipes[0] == ND_RECIPE_COUNT
                                   ? 1 : -1];

const nd_recipe *nd_recipe_get (nd_recipe_id id) {
  return (unsigned)id < ND_RECIPE_COUNT ? &recipes[id] : NULL;
}

int nd_recipe_parse (const char *name, nd_recipe_id *out) {
  int i;
  if (!name) return -1;
  if (strcmp(name, "fp8") == 0) { *out = ND_RECIPE_FP8_DEFAULT; return 0; }
  for (i = 0; i < ND_RECIPE_COUNT; i++)
    if (strcmp(name, recipes[i].name) == 0) { *out = (nd_recipe_id)i; return 0; }
  return -1;
}

double nd_recipe_quant_bytes (const nd_recipe *r) {
  if (!(r->element_bytes > 0.0)) return 0.0;
  return r->element_bytes + (r->weight_scale_elems > 0 ? r->scale_bytes / r->weight_scale_elems
                                                       : 0.0);
}

void nd_recipe_widths_of (const nd_recipe *r, int param_gather, int zero, double weight_bytes,
                          double cache_share, nd_recipe_widths *out) {
  double q = nd_recipe_quant_bytes(r);
  out->quant = q;
  out->param = weight_bytes;
  out->gather = weight_bytes;
  out->cache = 0.0;
  if (!(q > 0.0)) return;
  if (param_gather) out->gather = q;
  if (zero >= 3) return;  /* FSDP: the shard stays as it is; copies die with the gather */
  if (param_gather) {
    out->param = q;
    out->cache = (r->copies > 1 ? r->copies - 1 : 0) * q * cache_share;
  }
  else out->cache = r->copies * q * cache_share;
}

const nd_recipe *nd_strategy_recipe (const nd_strategy *st) {
  const nd_recipe *r = nd_recipe_get(st->precision);
  return r ? r : &recipes[ND_RECIPE_BF16];
}

void nd_strategy_bf16_layers (const nd_strategy *st, int body, int *first, int *last) {
  const nd_recipe *r = nd_strategy_recipe(st);
  int f = st->bf16_first >= 0 ? st->bf16_first : r->bf16_first;
  int l = st->bf16_last >= 0 ? st->bf16_last : r->bf16_last;
  if (!(r->element_bytes > 0.0)) f = l = 0;
  if (f > body) f = body;
  if (l > body - f) l = body - f;  /* a recipe default on a shallow model */
  *first = f;
  *last = l;
}

int nd_strategy_layer_quantized (const nd_strategy *st, int body, int layer) {
  int f, l;
  if (!(nd_strategy_recipe(st)->element_bytes > 0.0)) return 0;
  nd_strategy_bf16_layers(st, body, &f, &l);
  if (layer >= body) return 1;  /* MTP layers */
  return layer >= f && layer < body - l;
}

#define FAIL(...) do { if (err && len) snprintf(err, len, __VA_ARGS__); return -1; } while (0)

int nd_recipe_check (const nd_strategy *st, const nd_device *dev, int body, char *err,
                     size_t len) {
  const nd_recipe *r = nd_recipe_get(st->precision);
  const char *slot;
  if (!r) FAIL("precision: recipe %d is not in the table", (int)st->precision);
  slot = nd_precision_name(r->gemm);
  if (!(nd_device_peak_flops(dev, r->gemm) > 0.0))
    FAIL("precision: %s runs its GEMMs at %s and the device %s has no %s peak "
         "(peak_tflops.%s)", r->name, slot, dev->name, slot, slot);
  if (st->param_gather && !(r->element_bytes > 0.0))
    FAIL("fp8_param_gather: needs an fp8 or nvfp4 precision, not %s", r->name);
  if (st->param_gather && r->copies == 0 && st->zero < 3)
    FAIL("fp8_param_gather: %s keeps no quantized parameter; torchao all-gathers float8 "
         "under ZeRO-3 (FSDP) only", r->name);
  if (st->bf16_first < -1 || st->bf16_first > body)
    FAIL("bf16_first_layers: expected -1 (the recipe's) or 0..%d, got %d", body,
         st->bf16_first);
  if (st->bf16_last < -1 || st->bf16_last > body)
    FAIL("bf16_last_layers: expected -1 (the recipe's) or 0..%d, got %d", body,
         st->bf16_last);
  if (st->bf16_first >= 0 && st->bf16_last >= 0 && st->bf16_first + st->bf16_last > body)
    FAIL("bf16_first_layers + bf16_last_layers: %d + %d exceed the %d body layers",
         st->bf16_first, st->bf16_last, body);
  return 0;
}
