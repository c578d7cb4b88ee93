/*
** device.c -- device records: defaults, validation, peak and GEMM-efficiency queries.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ndplan/device.h"

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
** Defaults for the knobs that are not on a datasheet. Sources:
**   scale_up 0.65, scale_out 0.9: Calculon's NVLink and InfiniBand efficiencies;
**   latencies 10 us / 20 us: Calculon's H100 system file (per collective step);
**   gemm 0.8, hbm 0.85: assumed, typical of large BF16 GEMMs and streaming kernels on
**   A100/H100; gemm_half_size stays 0 (no size effect) until a device file sets it;
**   kernel_overhead 20 us: assumed, ~10 kernels of ~2 us launch/sync per layer per pass;
**   reserve 2.5 GiB: assumed (CUDA context ~0.5-1 GiB, NCCL buffers, fragmentation).
*/
void nd_device_init (nd_device *dev) {
  memset(dev, 0, sizeof *dev);
  dev->scale_up.domain_size = 1;
  dev->scale_up.latency = 10e-6;
  dev->scale_out.latency = 20e-6;
  dev->host_link.latency = 10e-6;
  dev->efficiency.gemm = 0.8;
  dev->efficiency.gemm_half_size = 0.0;
  dev->efficiency.hbm = 0.85;
  dev->efficiency.scale_up = 0.65;
  dev->efficiency.scale_out = 0.9;
  dev->efficiency.kernel_overhead = 20e-6;
  dev->efficiency.gemm_fp8 = 0.8;  /* as gemm until a device file or stack profile says */
  dev->efficiency.gemm_fp8_rowwise = 0.0;  /* as gemm_fp8 */
  dev->efficiency.attn_fwd = 0.8;
  dev->efficiency.attn_bwd = 0.8;
  dev->efficiency.attn_half_keys = 0.0;
  dev->reserve_bytes = 2.5 * 1024.0 * 1024.0 * 1024.0;
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
  int i;
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
  if (check_fraction("efficiency.gemm", e->gemm, err, len)
      || check_nonnegative("efficiency.gemm_half_size", e->gemm_half_size, err, len)
      || check_fraction("efficiency.hbm", e->hbm, err, len)
      || check_fraction("efficiency.scale_up", e->scale_up, err, len)
      || check_fraction("efficiency.scale_out", e->scale_out, err, len)
      || check_nonnegative("efficiency.kernel_overhead", e->kernel_overhead, err, len)
      || check_fraction("efficiency.gemm_fp8", e->gemm_fp8, err, len)
      || (e->gemm_fp8_rowwise != 0.0  /* 0: as gemm_fp8 */
          && check_fraction("efficiency.gemm_fp8_rowwise", e->gemm_fp8_rowwise, err, len))
      || check_fraction("efficiency.attn_fwd", e->attn_fwd, err, len)
      || check_fraction("efficiency.attn_bwd", e->attn_bwd, err, len)
      || check_nonnegative("efficiency.attn_half_keys", e->attn_half_keys, err, len))
    return -1;
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
  double half = dev->efficiency.gemm_half_size;
  if (!(flops > 0.0)) return 0.0;
  if (isinf(flops) || half <= 0.0) return dev->efficiency.gemm;
  return dev->efficiency.gemm * (flops / (flops + half));
}

double nd_device_gemm_efficiency_at (const nd_device *dev, nd_precision p, double flops) {
  double top, half = dev->efficiency.gemm_half_size, b = dev->peak_flops[ND_PREC_BF16];
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
