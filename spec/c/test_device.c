/* Device records: defaults, validation messages, peaks and the GEMM-efficiency curve. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ndplan/device.h"
#include "fixtures.h"

static void check (int ok, const char *what) {
  if (!ok) {
    printf("FAIL %s\n", what);
    failures++;
  }
}

/* An H100-like device that validates, with a round GEMM half size. */
static void make_h100 (nd_device *d) {
  fixture_h100(d);
  d->efficiency.gemm_half_size = 1e9;
}

/* Breaks one field and expects validation to fail with a message naming `field`. */
static void expect_invalid (const char *field, void (*breaker)(nd_device *)) {
  nd_device d;
  char err[256];
  make_h100(&d);
  breaker(&d);
  if (nd_device_validate(&d, err, sizeof err) == 0) {
    printf("FAIL %s: broken device validated\n", field);
    failures++;
  }
  else if (strstr(err, field) == NULL) {
    printf("FAIL %s: message does not name the field: %s\n", field, err);
    failures++;
  }
}

static void no_name (nd_device *d) { d->name[0] = '\0'; }
static void no_bf16 (nd_device *d) { d->peak_flops[ND_PREC_BF16] = 0; }
static void neg_fp8 (nd_device *d) { d->peak_flops[ND_PREC_FP8] = -1; }
static void nan_hbm (nd_device *d) { d->hbm_bytes = NAN; }
static void inf_bw (nd_device *d) { d->hbm_bandwidth = INFINITY; }
static void zero_domain (nd_device *d) { d->scale_up.domain_size = 0; }
static void no_out (nd_device *d) { d->scale_out.bandwidth = 0; }
static void neg_latency (nd_device *d) { d->scale_up.latency = -1e-6; }
static void no_host (nd_device *d) { d->host_link.bandwidth = 0; }
static void big_gemm (nd_device *d) { d->efficiency.gemm = 1.5; }
static void zero_hbm_eff (nd_device *d) { d->efficiency.hbm = 0; }
static void nan_up_eff (nd_device *d) { d->efficiency.scale_up = NAN; }
static void neg_half (nd_device *d) { d->efficiency.gemm_half_size = -0.5; }  /* -1: ND_DERIVED */
static void huge_reserve (nd_device *d) { d->reserve_bytes = 90e9; }

int main (void) {
  nd_device d;
  char err[256];
  nd_precision p;

  /* defaults alone are not a device: hardware numbers are zero */
  nd_device_init(&d);
  check(nd_device_validate(&d, err, sizeof err) != 0, "defaults alone must not validate");
  check(d.efficiency.scale_up == 0.65 && d.efficiency.scale_out == 0.9, "Calculon defaults");
  check(d.scale_up.domain_size == 1, "default domain of one");

  make_h100(&d);
  check(nd_device_validate(&d, err, sizeof err) == 0, "H100 validates");
  check(err[0] == '\0', "no message when valid");
  check(nd_device_validate(&d, NULL, 0) == 0, "NULL err buffer is allowed");

  expect_invalid("name", no_name);
  expect_invalid("peak_flops.bf16", no_bf16);
  expect_invalid("peak_flops.fp8", neg_fp8);
  expect_invalid("hbm_bytes", nan_hbm);
  expect_invalid("hbm_bandwidth", inf_bw);
  expect_invalid("scale_up.domain_size", zero_domain);
  expect_invalid("scale_out.bandwidth", no_out);
  expect_invalid("scale_up.latency", neg_latency);
  expect_invalid("host_link.bandwidth", no_host);
  expect_invalid("efficiency.gemm", big_gemm);
  expect_invalid("efficiency.hbm", zero_hbm_eff);
  expect_invalid("efficiency.scale_up", nan_up_eff);
  expect_invalid("efficiency.gemm_half_size", neg_half);
  expect_invalid("reserve_bytes", huge_reserve);

  /* an unterminated name is refused, not read past */
  make_h100(&d);
  memset(d.name, 'x', sizeof d.name);
  check(nd_device_validate(&d, err, sizeof err) != 0, "unterminated name refused");

  /* precisions */
  check(strcmp(nd_precision_name(ND_PREC_FP8), "fp8") == 0, "fp8 name");
  check(nd_precision_name(ND_PREC_COUNT) == NULL, "out-of-range name is NULL");
  check(nd_precision_parse("bf16", &p) == 0 && p == ND_PREC_BF16, "parse bf16");
  check(nd_precision_parse("fp32", &p) != 0, "fp32 is not a precision");
  make_h100(&d);
  check(nd_device_peak_flops(&d, ND_PREC_FP8) == 1979e12, "fp8 peak");
  check(nd_device_peak_flops(&d, ND_PREC_COUNT) == 0.0, "out-of-range peak is 0");

  /* GEMM efficiency: 0 at 0, half at the half size, monotone, bounded by gemm */
  {
    double prev = 0.0, f;
    int monotone = 1, bounded = 1;
    check(nd_device_gemm_efficiency(&d, 0.0) == 0.0, "zero-size GEMM");
    check(nd_device_gemm_efficiency(&d, -5.0) == 0.0, "negative size");
    check(fabs(nd_device_gemm_efficiency(&d, 1e9) - 0.4) < 1e-12, "half at half size");
    for (f = 1e3; f < 1e18; f *= 1.7) {
      double e = nd_device_gemm_efficiency(&d, f);
      if (e < prev) monotone = 0;
      if (!(e > 0.0 && e < d.efficiency.gemm)) bounded = 0;
      prev = e;
    }
    check(monotone, "efficiency is monotone in size");
    check(bounded, "efficiency stays in (0, gemm)");
    check(d.efficiency.gemm - prev < 1e-6, "efficiency approaches gemm for huge GEMMs");
    check(nd_device_gemm_efficiency(&d, INFINITY) == d.efficiency.gemm, "limit is gemm");
    d.efficiency.gemm_half_size = 0.0;
    check(nd_device_gemm_efficiency(&d, 1.0) == d.efficiency.gemm, "no size effect at 0");
  }

  if (failures) printf("%d failure(s)\n", failures);
  else printf("test_device: all passed\n");
  return failures ? 1 : 0;
}
