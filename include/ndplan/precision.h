/*
** ndplan/precision.h -- training precision recipes: which number format a recipe's GEMMs
** run at (the device peak slot, ndplan/device.h), its byte widths (the quantized weight
** copies, their scales, the parameter all-gather width) and what it keeps in BF16.
** One table (precision.c) names every recipe; the bindings iterate it.
*/
#ifndef NDPLAN_PRECISION_H
#define NDPLAN_PRECISION_H

#include <stddef.h>

#include "ndplan/device.h"

typedef enum nd_recipe_id {
  ND_RECIPE_BF16 = 0,
  ND_RECIPE_FP16,
  ND_RECIPE_FP8_DELAYED,     /* Transformer Engine DelayedScaling: per-tensor scale from an
                                amax history (Megatron's --fp8-recipe default) */
  ND_RECIPE_FP8_TENSORWISE,  /* per-tensor current scaling (TE Float8CurrentScaling, torchao's
                                default) */
  ND_RECIPE_FP8_ROWWISE,     /* torchao rowwise: one fp32 scale per row */
  ND_RECIPE_FP8_BLOCKWISE,   /* TE Float8BlockScaling (DeepSeek-V3): 1x128 activation tiles,
                                128x128 weight blocks, fp32 scales */
  ND_RECIPE_FP8_MXFP8,       /* OCP MXFP8: E8M0 scale per 32 elements, in hardware */
  ND_RECIPE_NVFP4,           /* NVFP4: E2M1 with an E4M3 scale per 16 elements (16x16 for
                                weights) and an fp32 tensor scale */
  ND_RECIPE_COUNT
} nd_recipe_id;

/* What `fp8` alone means: Megatron-LM's --fp8-recipe default (delayed). */
#define ND_RECIPE_FP8_DEFAULT ND_RECIPE_FP8_DELAYED

typedef struct nd_recipe {
  const char *name;          /* as --precision takes it: "bf16", "fp8:tensorwise", "nvfp4" */
  const char *family;        /* "bf16", "fp16", "fp8" or "nvfp4" */
  const char *scaling;       /* "none", "delayed", "tensorwise", "rowwise", "blockwise",
                                "mxfp8", "nvfp4" */
  nd_precision gemm;         /* the peak slot its linear-layer GEMMs run at */
  double element_bytes;      /* bytes per quantized element (FP8 1, FP4 0.5); 0: none */
  int block;                 /* activations and gradients: elements per scale along a row
                                (0: one scale per tensor or per row) */
  int weight_block;          /* weights: elements per scale (0: per tensor or per row) */
  int weight_2d;             /* 1: weight scales cover weight_block x weight_block tiles */
  int weight_scale_elems;    /* weight elements per stored scale (0: per tensor or row) */
  double scale_bytes;        /* bytes per block scale (fp32 4, E8M0 or E4M3 1) */
  int copies;                /* quantized weight copies kept between micro-batches: TE keeps
                                a rowwise and a columnwise (transposed) copy, 2; torchao
                                re-quantizes each use, 0 */
  int bf16_first, bf16_last; /* body layers kept in BF16 at each end by default */
  const char *bf16_parts;    /* what stays in BF16 or FP32 */
  const char *source;        /* where these numbers come from */
  int amax_pass;             /* 1: the scale comes from the tensor's current amax, a reduction
                                pass over each GEMM input before its cast (costs.fp8_amax_bytes
                                per element); 0: from the amax history (delayed) or from each
                                block's own amax inside the cast kernel (block formats) */
  int soft_blocks;           /* 1: block scales the tensor cores do not take, applied in the
                                GEMM's main loop (blockwise on Hopper: costs.fp8_block_gemm_rate);
                                0: per-tensor, or scales the hardware takes (MXFP8, NVFP4 on
                                Blackwell) */
} nd_recipe;

/* The recipe, or NULL when id is out of range. */
const nd_recipe *nd_recipe_get (nd_recipe_id id);
/* Parses "bf16", "fp8", "fp8:RECIPE", "nvfp4". Returns 0 and sets *out, or -1. */
int nd_recipe_parse (const char *name, nd_recipe_id *out);
/* Bytes of one quantized copy per weight element, its block scales included (0 for
   bf16 and fp16); per-tensor and per-row scales are a few bytes per tensor: not counted. */
double nd_recipe_quant_bytes (const nd_recipe *r);

/* Byte widths per parameter of a quantized linear layer, for one strategy. */
typedef struct nd_recipe_widths {
  double quant;     /* one quantized copy (nd_recipe_quant_bytes) */
  double param;     /* the stored parameter: weight_bytes, or `quant` with param gather
                       (ZeRO < 3: Megatron's --fp8-param-gather keeps the parameter in FP8) */
  double cache;     /* the quantized copies kept besides it: copies x quant x cache_share,
                       one copy fewer with param gather; 0 under ZeRO-3 (made from each
                       gathered weight and freed with it) */
  double gather;    /* the parameter all-gather width: `quant` with param gather */
} nd_recipe_widths;

void nd_recipe_widths_of (const nd_recipe *r, int param_gather, int zero, double weight_bytes,
                          double cache_share, nd_recipe_widths *out);

#endif
