/*
** device.c -- device records: defaults, validation, peak and GEMM-efficiency queries.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ndplan/device.h"
#include "ndplan/fields.h"

static const char *const precision_names[ND_PREC_COUNT] = {"bf16", "fp16", "fp8", "mxfp8",
                                                            "nvfp4", "mxfp4"};

const char *nd_precision_name (nd_precision p) {
  return ((int)p >= 0 && p < ND_PREC_COUNT) ? precision_names[p] : NULL;
}

int nd_precision_parse (const char *name, nd_precision *out) {
  int i;
  for (i = 0; i < ND_PREC_COUNT; i++)
    if (name && strcmp(name, precision_names[i]) == 0) {
      *out = (nd_precision)i;
      return 0;
    }
  return -1;
}

/*
** Defaults for the knobs that are not on a datasheet: the efficiencies from their
** descriptors (fields.c, with their sources); latencies 10 us / 20 us from Calculon's H100
** system file (per collective step); reserve 2.5 GiB assumed (CUDA context ~0.5-1 GiB,
** NCCL buffers, fragmentation).
*/
void nd_device_init (nd_device *dev) {
  int i, n;
  const nd_field *f = nd_efficiency_fields(&n);
  memset(dev, 0, sizeof *dev);
  dev->scale_up.domain_size = 1;
  dev->scale_up.latency = 10e-6;
  dev->scale_out.latency = 20e-6;
  dev->host_link.latency = 10e-6;
  for (i = 0; i < n; i++) *nd_field_slot(&dev->efficiency, &f[i]) = f[i].dflt;
  dev->reserve_bytes = 2.5 * 1024.0 * 1024.0 * 1024.0;
}

double nd_device_half_size (const nd_device *dev) {
  double h = dev->efficiency.gemm_half_size;
  return h == ND_DERIVED ? dev->peak_flops[ND_PREC_BF16] * ND_HALF_SIZE_SECONDS : h;
}

void nd_device_complete (nd_device *dev) {
  dev->efficiency.gemm_half_size = nd_device_half_size(dev);
}

/*
** The checks are written as !(x > 0) rather than x <= 0 so that NaN fails them too.
*/
#define FAIL(...) do { if (err && len) snprintf(err, len, __VA_ARGS__); return -1; } while (0)

static int check_positive (const char *field, double x, char *err, size_t len) {
  if (!(x > 0.0) || isinf(x)) FAIL("%s must be a positive finite number, got %g", field, x);
  return 0;
}

static int check_nonnegative (const char *field, double x, char *err, size_t len) {
  if (!(x >= 0.0) || isinf(x)) FAIL("%s must be zero or a positive finite number, got %g",
                                    field, x);
  return 0;
}

static int check_fraction (const char *field, double x, char *err, size_t len) {
  if (!(x > 0.0 && x <= 1.0)) FAIL("%s must be a fraction in (0, 1], got %g", field, x);
  return 0;
}

int nd_device_validate (const nd_device *dev, char *err, size_t len) {
  static const char *const peak_fields[ND_PREC_COUNT] = {
    "peak_flops.bf16", "peak_flops.fp16", "peak_flops.fp8", "peak_flops.mxfp8",
    "peak_flops.nvfp4", "peak_flops.mxfp4"
  };
  const nd_efficiency *e = &dev->efficiency;
  int i, nf;
  const nd_field *f = nd_efficiency_fields(&nf);
  if (memchr(dev->name, '\0', sizeof dev->name) == NULL || dev->name[0] == '\0')
    FAIL("name must be a non-empty string shorter than %d bytes", ND_DEVICE_NAME_MAX);
  if (memchr(dev->description, '\0', sizeof dev->description) == NULL)
    FAIL("description must be shorter than %d bytes", ND_DEVICE_DESC_MAX);
  if (check_positive(peak_fields[ND_PREC_BF16], dev->peak_flops[ND_PREC_BF16], err, len))
    return -1;
  for (i = 1; i < ND_PREC_COUNT; i++)   /* 0 means unsupported: FP8 on an A100 */
    if (check_nonnegative(peak_fields[i], dev->peak_flops[i], err, len)) return -1;
  if (check_positive("hbm_bytes", dev->hbm_bytes, err, len)
      || check_positive("hbm_bandwidth", dev->hbm_bandwidth, err, len))
    return -1;
  if (dev->scale_up.domain_size < 1)
    FAIL("scale_up.domain_size must be at least 1, got %d", dev->scale_up.domain_size);
  if (check_positive("scale_up.bandwidth", dev->scale_up.bandwidth, err, len)
      || check_nonnegative("scale_up.latency", dev->scale_up.latency, err, len)
      || check_positive("scale_out.bandwidth", dev->scale_out.bandwidth, err, len)
      || check_nonnegative("scale_out.latency", dev->scale_out.latency, err, len)
      || check_positive("host_link.bandwidth", dev->host_link.bandwidth, err, len)
      || check_nonnegative("host_link.latency", dev->host_link.latency, err, len))
    return -1;
  for (i = 0; i < nf; i++) {  /* the efficiencies, by their descriptors */
    char name[64];
    double v = f[i].offset == offsetof(nd_efficiency, gemm_half_size)
             ? nd_device_half_size(dev) : nd_field_get(e, &f[i]);
    snprintf(name, sizeof name, "efficiency.%s", f[i].name);
    if (f[i].lo_open ? check_fraction(name, v, err, len)
                     : check_nonnegative(name, v, err, len))
      return -1;
  }
  if (check_nonnegative("reserve_bytes", dev->reserve_bytes, err, len)) return -1;
  if (dev->node_size < 0
      || (dev->node_size > 0 && dev->scale_up.domain_size % dev->node_size != 0
          && dev->node_size % dev->scale_up.domain_size != 0))
    FAIL("node_size (%d) must divide scale_up.domain_size (%d) or be a multiple of it",
         dev->node_size, dev->scale_up.domain_size);
  if (!(dev->reserve_bytes < dev->hbm_bytes))
    FAIL("reserve_bytes (%g) must be smaller than hbm_bytes (%g)", dev->reserve_bytes,
         dev->hbm_bytes);
  if (err && len) err[0] = '\0';
  return 0;
}

double nd_device_peak_flops (const nd_device *dev, nd_precision p) {
  if ((int)p < 0 || p >= ND_PREC_COUNT) return 0.0;
  return dev->peak_flops[p];
}

double nd_device_gemm_efficiency (const nd_device *dev, double flops) {
  double half = nd_device_half_size(dev);
  if (!(flops > 0.0)) return 0.0;
  if (isinf(flops) || half <= 0.0) return dev->efficiency.gemm;
  return dev->efficiency.gemm * (flops / (flops + half));
}

double nd_device_gemm_efficiency_at (const nd_device *dev, nd_precision p, double flops) {
  double top, half = nd_device_half_size(dev), b = dev->peak_flops[ND_PREC_BF16];
  if (p == ND_PREC_BF16 || p == ND_PREC_FP16) return nd_device_gemm_efficiency(dev, flops);
  if (!(flops > 0.0)) return 0.0;
  top = dev->efficiency.gemm_fp8;
  if (isinf(flops) || half <= 0.0) return top;
  if (b > 0.0 && dev->peak_flops[p] > 0.0) half *= dev->peak_flops[p] / b;
  return top * (flops / (flops + half));
}

double nd_device_attention_efficiency (const nd_device *dev, int bwd, double keys) {
  double top = bwd ? dev->efficiency.attn_bwd : dev->efficiency.attn_fwd;
  double half = dev->efficiency.attn_half_keys;
  if (!(keys > 0.0)) return 0.0;
  if (isinf(keys) || half <= 0.0) return top;
  return top * (keys / (keys + half));
}
