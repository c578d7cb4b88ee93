/* Precision recipes: the table, names, byte widths, BF16 layers and the refusals. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ndplan/strategy.h"

static int failures = 0;

static void check (int ok, const char *what) {
  if (!ok) {
    printf("FAIL %s\n", what);
    failures++;
  }
}

int main (void) {
  nd_recipe_id id;
  nd_recipe_widths w;
  nd_strategy st;
  nd_device d;
  char err[256];
  int i, first, last;

  /* every id has its row, named as it parses */
  for (i = 0; i < ND_RECIPE_COUNT; i++) {
    const nd_recipe *r = nd_recipe_get((nd_recipe_id)i);
    check(r != NULL && nd_recipe_parse(r->name, &id) == 0 && id == (nd_recipe_id)i, "row");
    check(nd_precision_name(r->gemm) != NULL, "a peak slot");
  }
  check(nd_recipe_get(ND_RECIPE_COUNT) == NULL, "out of range");
  check(nd_recipe_parse("fp8", &id) == 0 && id == ND_RECIPE_FP8_DELAYED, "fp8 = delayed");
  check(nd_recipe_parse("fp8:", &id) != 0 && nd_recipe_parse("mxfp8", &id) != 0, "bad names");
  check(nd_recipe_parse(NULL, &id) != 0, "NULL");

  /* one quantized copy: element + block scale */
  check(nd_recipe_quant_bytes(nd_recipe_get(ND_RECIPE_BF16)) == 0.0, "bf16 quantizes nothing");
  check(nd_recipe_quant_bytes(nd_recipe_get(ND_RECIPE_FP8_MXFP8)) == 1.0 + 1.0 / 32, "mxfp8");
  check(nd_recipe_quant_bytes(nd_recipe_get(ND_RECIPE_NVFP4)) == 0.5 + 1.0 / 16, "nvfp4");
  check(nd_recipe_quant_bytes(nd_recipe_get(ND_RECIPE_FP8_BLOCKWISE)) == 1.0 + 4.0 / 16384,
        "blockwise");

  /* widths: TE keeps two copies; param gather makes the parameter one of them */
  nd_recipe_widths_of(nd_recipe_get(ND_RECIPE_FP8_DELAYED), 0, 1, 2.0, 1.0, &w);
  check(w.param == 2.0 && w.cache == 2.0 && w.gather == 2.0, "delayed");
  nd_recipe_widths_of(nd_recipe_get(ND_RECIPE_FP8_DELAYED), 1, 1, 2.0, 1.0, &w);
  check(w.param == 1.0 && w.cache == 1.0 && w.gather == 1.0, "delayed, param gather");
  nd_recipe_widths_of(nd_recipe_get(ND_RECIPE_FP8_DELAYED), 1, 3, 2.0, 1.0, &w);
  check(w.param == 2.0 && w.cache == 0.0 && w.gather == 1.0, "ZeRO-3: shard kept, fp8 gather");
  nd_recipe_widths_of(nd_recipe_get(ND_RECIPE_FP8_DELAYED), 0, 1, 2.0, 0.5, &w);
  check(w.cache == 1.0, "cache share");
  nd_recipe_widths_of(nd_recipe_get(ND_RECIPE_BF16), 1, 1, 2.0, 1.0, &w);
  check(w.param == 2.0 && w.cache == 0.0 && w.gather == 2.0, "bf16 unchanged");

  /* BF16 layers: the recipe's default, the strategy's, clamped to the model */
  nd_strategy_init(&st);
  st.precision = ND_RECIPE_NVFP4;
  nd_strategy_bf16_layers(&st, 62, &first, &last);
  check(first == 2 && last == 8, "nvfp4 keeps 2 + 8");
  nd_strategy_bf16_layers(&st, 5, &first, &last);
  check(first == 2 && last == 3, "clamped to a shallow model");
  check(!nd_strategy_layer_quantized(&st, 62, 1) && nd_strategy_layer_quantized(&st, 62, 2)
        && nd_strategy_layer_quantized(&st, 62, 53) && !nd_strategy_layer_quantized(&st, 62, 54)
        && nd_strategy_layer_quantized(&st, 62, 62), "which layers: 2..53 and MTP");
  st.bf16_first = 0;
  st.bf16_last = 1;
  nd_strategy_bf16_layers(&st, 62, &first, &last);
  check(first == 0 && last == 1, "the strategy's counts");
  st.precision = ND_RECIPE_BF16;
  check(!nd_strategy_layer_quantized(&st, 62, 10), "bf16 quantizes no layer");

  /* refusals */
  nd_device_init(&d);
  strcpy(d.name, "H100");
  d.peak_flops[ND_PREC_BF16] = 989e12;
  d.peak_flops[ND_PREC_FP8] = 1979e12;
  nd_strategy_init(&st);
  st.precision = ND_RECIPE_FP8_MXFP8;
  check(nd_recipe_check(&st, &d, 32, err, sizeof err) != 0
        && strcmp(err, "precision: fp8:mxfp8 runs its GEMMs at mxfp8 and the device H100 "
                       "has no mxfp8 peak (peak_tflops.mxfp8)") == 0, err);
  st.precision = ND_RECIPE_FP8_BLOCKWISE;
  check(nd_recipe_check(&st, &d, 32, err, sizeof err) == 0, "blockwise on Hopper");
  st.precision = ND_RECIPE_BF16;
  st.param_gather = 1;
  check(nd_recipe_check(&st, &d, 32, err, sizeof err) != 0 && strstr(err, "fp8_param_gather"),
        "param gather needs a quantized recipe");
  st.param_gather = 0;
  st.precision = ND_RECIPE_FP8_DELAYED;
  st.bf16_first = 33;
  check(nd_recipe_check(&st, &d, 32, err, sizeof err) != 0 && strstr(err, "bf16_first_layers"),
        "first out of range");

  if (failures) printf("%d failure(s)\n", failures);
  return failures != 0;
}
