/*
** units.c -- sizes, rates and times: formatting with the unit kept explicit.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/units.h"

/*
** Formats a byte count with binary (KiB, MiB, …) or decimal (kB, MB, …) prefixes, three
** significant digits. Returns buf.
*/
char *nd_format_bytes (char *buf, size_t size, double bytes, int binary) {
  static const char *const bin[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  static const char *const dec[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  double step = binary ? 1024.0 : 1000.0;
  double v = fabs(bytes);
  int i = 0;
  while (v >= step && i < 6) { v /= step; i++; }
  if (bytes < 0) v = -v;
  if (i == 0) snprintf(buf, size, "%.0f B", v);
  else snprintf(buf, size, "%.*f %s", fabs(v) >= 100 ? 0 : fabs(v) >= 10 ? 1 : 2, v,
                binary ? bin[i] : dec[i]);
  return buf;
}

/* Formats a duration in s, ms, us or ns, three significant digits. Returns buf. */
char *nd_format_seconds (char *buf, size_t size, double s) {
  static const char *const unit[] = {"s", "ms", "us", "ns"};
  double v = s;
  int i = 0;
  while (fabs(v) < 1.0 && v != 0.0 && i < 3) { v *= 1000.0; i++; }
  snprintf(buf, size, "%.*f %s", fabs(v) >= 100 ? 0 : fabs(v) >= 10 ? 1 : 2, v, unit[i]);
  return buf;
}

/* 10^k for k in 0..22: exact doubles. */
static const double pow10_exact[] = {
  1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
  1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22
};

/*
** x scaled by 10^s (|s| <= 22) with one rounding: the product or quotient of x and an exact
** power of ten, within half an ulp of the exact value.
*/
static double scale10 (double x, int s) {
  return s >= 0 ? x * pow10_exact[s] : x / pow10_exact[-s];
}

/*
** printf's "%.{precision}g" digits of a (> 0, 1e-300..1e300; precision 1 to 9): *n, the
** precision digits as an integer, and *e, the decimal exponent of the first; 0 where only
** printf's exact division can tell them (a tie too close to call, an exponent too far).
*/
static int g_digits (double a, int precision, unsigned long *n, int *e) {
  double y, lo, hi, frac;
  int s, tries;
  lo = pow10_exact[precision - 1];
  hi = pow10_exact[precision];
  /* e: the decimal exponent of a (log10's guess, corrected so a x 10^(p-1-e) lies in
     [10^(p-1), 10^p)); too far for exact powers of ten: printf */
  *e = (int)floor(log10(a));
  for (tries = 0;; tries++) {
    s = precision - 1 - *e;
    if (s > 22 || s < -22 || tries > 2) return 0;
    y = scale10(a, s);
    if (y < lo) (*e)--;
    else if (y >= hi) (*e)++;
    else break;
  }
  /* y is within 2^-53 y (< 2^-23 for y < 10^9) of a x 10^s: rounding it to an integer gives
     printf's digits unless its fraction is that close to a half */
  frac = y - floor(y);
  if (fabs(frac - 0.5) < 1e-6) return 0;
  *n = (unsigned long)floor(y) + (frac > 0.5);
  if (*n == (unsigned long)hi) { *n /= 10; (*e)++; }  /* 9.99..5 rounds up to 10^(e+1) */
  return 1;
}

int nd_format_g (char *buf, size_t size, double x, int precision) {
  char digits[12], *o = buf;
  double a = fabs(x);
  unsigned long n;
  int e, i, len, point;
  if (precision < 1 || precision > 9 || size < 24 || !(a >= 1e-300 && a <= 1e300)
      || !g_digits(a, precision, &n, &e))
    return snprintf(buf, size, "%.*g", precision, x);
  for (i = precision - 1; i >= 0; i--) { digits[i] = (char)('0' + n % 10); n /= 10; }
  len = precision;
  if (signbit(x)) *o++ = '-';
  if (e < -4 || e >= precision) {  /* d.ddde+XX, trailing zeros dropped */
    while (len > 1 && digits[len - 1] == '0') len--;
    *o++ = digits[0];
    if (len > 1) { *o++ = '.'; memcpy(o, digits + 1, (size_t)(len - 1)); o += len - 1; }
    *o++ = 'e';
    *o++ = e < 0 ? '-' : '+';
    i = e < 0 ? -e : e;
    if (i >= 100) *o++ = (char)('0' + i / 100);
    *o++ = (char)('0' + i / 10 % 10);
    *o++ = (char)('0' + i % 10);
  } else {  /* fixed: precision - 1 - e decimals, trailing zeros and a bare point dropped */
    point = e + 1;  /* digits before the point (<= 0: leading zeros after "0.") */
    while (len > point && len > 0 && digits[len - 1] == '0') len--;
    if (point <= 0) {
      *o++ = '0';
      *o++ = '.';
      for (i = point; i < 0; i++) *o++ = '0';
      memcpy(o, digits, (size_t)len);
      o += len;
    } else {
      memcpy(o, digits, (size_t)point);
      o += point;
      if (len > point) {
        *o++ = '.';
        memcpy(o, digits + point, (size_t)(len - point));
        o += len - point;
      }
    }
  }
  *o = '\0';
  return (int)(o - buf);
}

double nd_round_g (double x, int precision) {
  char text[64];
  double a = fabs(x), v;
  unsigned long n;
  int e, k;
  if (precision >= 1 && precision <= 9 && a >= 1e-300 && a <= 1e300
      && g_digits(a, precision, &n, &e)) {
    /* n x 10^k with n < 10^9 and 10^|k| exact: one correctly rounded operation gives the
       double nearest the decimal, which is what strtod reads (Clinger's fast path) */
    k = e - (precision - 1);
    if (k >= -22 && k <= 22) {
      v = k >= 0 ? (double)n * pow10_exact[k] : (double)n / pow10_exact[-k];
      return signbit(x) ? -v : v;
    }
  }
  nd_format_g(text, sizeof text, x, precision);
  return strtod(text, NULL);
}

int nd_format_shortest (char *buf, size_t size, double x) {
  int digits;
  buf[0] = '\0';
  if (!isfinite(x)) return 0;
  if (x == floor(x) && fabs(x) < 0x1p63) return snprintf(buf, size, "%lld", (long long)x);
  for (digits = 15; digits <= 17; digits++) {  /* 17 always reads back */
    int n = snprintf(buf, size, "%.*g", digits, x);
    if (strtod(buf, NULL) == x) return n;
  }
  return 0;
}

/* Below this, x·10^d (one rounding, scale10) is within 2^-22 of the exact product, so a
   fraction more than 1e-6 from a half rounds as the exact value does. */
#define FIXED_FAST_LIMIT 0x1p31
#define FIXED_TIE_MARGIN 1e-6

/* Writes the decimal digits of n (no sign) at o; returns the end. */
static char *put_digits (char *o, unsigned long n, int width) {
  char tmp[24];
  int k = 0;
  do { tmp[k++] = (char)('0' + n % 10); n /= 10; } while (n > 0 || k < width);
  while (k > 0) *o++ = tmp[--k];
  return o;
}

int nd_format_fixed (char *buf, size_t size, double x, int decimals) {
  double a = fabs(x), y, frac;
  int len;
  if (decimals >= 0 && decimals <= 9 && size >= 24
      && (y = scale10(a, decimals)) < FIXED_FAST_LIMIT
      && fabs((frac = y - floor(y)) - 0.5) >= FIXED_TIE_MARGIN) {
    unsigned long n = (unsigned long)floor(y) + (frac > 0.5);
    unsigned long unit = (unsigned long)pow10_exact[decimals];
    unsigned long part = n % unit;
    int places = decimals;
    char *o = buf;
    if (n > 0 && signbit(x)) *o++ = '-';  /* a value rounding to 0 is "0", never "-0" */
    o = put_digits(o, n / unit, 1);
    if (part > 0) {
      while (part % 10 == 0) { part /= 10; places--; }
      *o++ = '.';
      o = put_digits(o, part, places);
    }
    *o = '\0';
    return (int)(o - buf);
  }
  len = snprintf(buf, size, "%.*f", decimals, x);
  if (len < 0 || (size_t)len >= size) return len;
  if (strchr(buf, '.')) {
    while (buf[len - 1] == '0') buf[--len] = '\0';
    if (buf[len - 1] == '.') buf[--len] = '\0';
  }
  if (strcmp(buf, "-0") == 0) { buf[0] = '0'; buf[1] = '\0'; len = 1; }
  return len;
}
