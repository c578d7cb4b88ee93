/*
** fixtures.h -- what the C tests share: the CHECK macro (counting into `failures`) and the
** device and model most of them price: an H100-like device and Llama-3.1-8B's shape.
** Included by one test file each (the definitions are static).
*/
#ifndef NDPLAN_SPEC_FIXTURES_H
#define NDPLAN_SPEC_FIXTURES_H

#include <stdio.h>
#include <string.h>

#include "ndplan/device.h"
#include "ndplan/model.h"

static int failures = 0;

#define CHECK(cond, ...) \
  do { if (!(cond)) { fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
                      fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } } \
  while (0)

/* H100 SXM's datasheet numbers (examples/devices/h100.yaml), the efficiencies left at their
   defaults (gemm_half_size derived). */
static inline void fixture_h100 (nd_device *d) {
  nd_device_init(d);
  strcpy(d->name, "H100");
  d->peak_flops[ND_PREC_BF16] = 989e12;
  d->peak_flops[ND_PREC_FP16] = 989e12;
  d->peak_flops[ND_PREC_FP8] = 1979e12;
  d->hbm_bytes = 80e9;
  d->hbm_bandwidth = 3.35e12;
  d->scale_up.domain_size = 8;
  d->scale_up.bandwidth = 450e9;
  d->scale_out.bandwidth = 50e9;
  d->host_link.bandwidth = 64e9;
}

/* Llama-3.1-8B: 32 layers, GQA with 8 KV heads, a gated MLP. */
static inline void fixture_llama8b (nd_model_spec *m) {
  nd_model_init(m);
  m->num_layers = 32; m->hidden_size = 4096; m->num_heads = 32; m->num_kv_heads = 8;
  m->head_dim = 128; m->ffn_size = 14336; m->vocab_size = 128256; m->max_position = 8192;
  nd_model_default_stack(m);
}

#endif
