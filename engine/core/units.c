/*
** units.c -- sizes, rates and times: formatting with the unit kept explicit.
*/
#include <math.h>
#include <stdint.h>
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

/* 10^k for k in 0..19: exact in 64 bits. */
static const unsigned long long pow10_u64[] = {
  1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL,
  1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL,
  100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
  1000000000000000000ULL, 10000000000000000000ULL
};

/* Two decimal digits per step: "00" .. "99". */
static const char two_digits[] =
  "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
  "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
  "8081828384858687888990919293949596979899";

/* The number of decimal digits of u (1 for 0). */
static int digit_count (unsigned long long u) {
  int n = 1;
  while (n < 20 && u >= pow10_u64[n]) n++;
  return n;
}

/* Writes the last `count` decimal digits of u (zero-padded) so that they end at `end`. */
static void put_backward (char *end, unsigned long long u, int count) {
  for (; count >= 2; count -= 2) {
    unsigned d = (unsigned)(u % 100) * 2;
    u /= 100;
    *--end = two_digits[d + 1];
    *--end = two_digits[d];
  }
  if (count) *--end = (char)('0' + u % 10);
}

/* Writes the decimal digits of u at o (at least `width` of them, zero-padded); returns the
   end. */
static char *put_digits (char *o, unsigned long long u, int width) {
  int n = digit_count(u);
  if (n < width) n = width;
  put_backward(o + n, u, n);
  return o + n;
}

int nd_format_integer (char *buf, long long v) {
  char *o = buf;
  unsigned long long u = (unsigned long long)v;
  if (v < 0) { *o++ = '-'; u = 0ULL - u; }
  o = put_digits(o, u, 1);
  *o = '\0';
  return (int)(o - buf);
}

#ifdef __SIZEOF_INT128__
typedef unsigned __int128 u128;

/* 10^k for k in 0..22 (below 2^74), exactly */
static u128 pow10_wide (int k) {
  return k <= 19 ? (u128)pow10_u64[k] : (u128)pow10_u64[19] * pow10_u64[k - 19];
}

/* A positive normal double as m x 2^q, m an integer of 53 bits. */
typedef struct binary_value { unsigned long long m; int q; } binary_value;

/*
** The exact decimal digits of a = m x 2^q rounded to p significant digits (1 to 17), in
** integers: *n (p digits) and *e, the decimal exponent of the first. a x 10^s (s = p-1-e)
** is formed exactly in 128 bits and rounded to nearest, ties to even (printf's rounding).
** 0 where a product would not fit (very small or very large a, subnormals): the callers'
** other ways then.
*/
static int exact_digits (binary_value v, int p, unsigned long long *n, int *e) {
  int tries, e10 = ((v.q + 52) * 78913) >> 18;  /* floor(log10 2^(q+52)): e or e - 1 */
  for (tries = 0; tries < 2; tries++, e10++) {
    int s = p - 1 - e10;
    u128 f, rem, half, unit = pow10_u64[p];
    int up;
    if (s >= 0) {
      u128 P;
      if (s > 22) return 0;
      P = (u128)v.m * pow10_wide(s);  /* below 2^127 */
      if (v.q >= 0) {
        if (v.q > 127 || (P >> (127 - v.q)) != 0) return 0;
        f = P << v.q;
        up = 0;
      } else {
        int k = -v.q;
        if (k > 127) return 0;
        f = P >> k;
        rem = P - (f << k);
        half = (u128)1 << (k - 1);
        up = rem > half || (rem == half && (f & 1));
      }
    } else {
      int t = -s, k = v.q < 0 ? -v.q : 0;
      u128 d;
      if (t > 19) return 0;
      d = pow10_u64[t];
      if (v.q >= 0) {  /* m 2^q / 10^t */
        u128 I;
        if (v.q > 74) return 0;
        I = (u128)v.m << v.q;
        f = I / d;
        rem = I - f * d;
      } else {  /* m / (10^t 2^k) */
        if (k > 63) return 0;
        d <<= k;
        f = (u128)v.m / d;
        rem = (u128)v.m - f * d;
      }
      up = 2 * rem > d || (2 * rem == d && (f & 1));
    }
    if (f >= unit) continue;  /* e10 was one low */
    if (f < unit / 10) return 0;  /* (never: the guess is at most one low) */
    f += (unsigned)up;
    if (f == unit) { f /= 10; e10++; }  /* 9.99..5 rounds up to 10^(e+1) */
    *n = (unsigned long long)f;
    *e = e10;
    return 1;
  }
  return 0;
}
#endif

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

/* A positive normal double as m x 2^q; 0 for a subnormal (or non-finite) one. */
static int binary_of (double a, binary_value *v) {
  unsigned long long bits;
  int biased;
  memcpy(&bits, &a, sizeof bits);
  biased = (int)(bits >> 52 & 0x7ff);
  if (biased == 0 || biased == 0x7ff) return 0;
  v->m = (bits & ((1ULL << 52) - 1)) | 1ULL << 52;
  v->q = biased - 1075;
  return 1;
}

/* printf's "%.{p}g" text of the p digits n (the first at decimal exponent e), signed:
   trailing zeros dropped, the digits written in place. */
static int g_text (char *buf, unsigned long long n, int p, int e, int negative) {
  char *o = buf;
  int len = p, i;
  if (negative) *o++ = '-';
  if (e < -4 || e >= p) {  /* d.ddde+XX */
    while (len > 1 && n % 10 == 0) { n /= 10; len--; }
    *o = (char)('0' + n / pow10_u64[len - 1]);
    if (len > 1) {
      o[1] = '.';
      put_backward(o + len + 1, n, len - 1);
      o += len + 1;
    } else o++;
    *o++ = 'e';
    *o++ = e < 0 ? '-' : '+';
    i = e < 0 ? -e : e;
    if (i >= 100) *o++ = (char)('0' + i / 100);
    *o++ = (char)('0' + i / 10 % 10);
    *o++ = (char)('0' + i % 10);
  } else {  /* fixed: p - 1 - e decimals, trailing zeros and a bare point dropped */
    int point = e + 1;  /* digits before the point (<= 0: leading zeros after "0.") */
    while (len > point && len > 1 && n % 10 == 0) { n /= 10; len--; }
    if (point <= 0) {
      *o++ = '0';
      *o++ = '.';
      for (i = point; i < 0; i++) *o++ = '0';
      put_backward(o + len, n, len);
      o += len;
    } else if (len > point) {
      int frac = len - point;
      put_backward(o + len + 1, n, frac);
      put_backward(o + point, n / pow10_u64[frac], point);
      o[point] = '.';
      o += len + 1;
    } else {
      put_backward(o + point, n, point);
      o += point;
    }
  }
  *o = '\0';
  return (int)(o - buf);
}

int nd_format_g (char *buf, size_t size, double x, int precision) {
  double a = fabs(x);
  if (precision >= 1 && precision <= 17 && size >= 24 && a >= 1e-300 && a <= 1e300) {
    unsigned long n9;
    int e;
#ifdef __SIZEOF_INT128__
    binary_value v;
    unsigned long long n;
    if (binary_of(a, &v) && exact_digits(v, precision, &n, &e))
      return g_text(buf, n, precision, e, signbit(x));
#endif
    if (precision <= 9 && g_digits(a, precision, &n9, &e))
      return g_text(buf, n9, precision, e, signbit(x));
  }
  return snprintf(buf, size, "%.*g", precision, x);
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

#ifdef __SIZEOF_INT128__
/* Does the decimal n x 10^-s read back (strtod, to nearest) as v? 1 or 0; -1 where the
   exact comparison would not fit in 128 bits. Scaled by 10^s 2^(1-q), the distance between
   the decimal and v is compared with half the gap to v's neighbours: 10^s, half that below
   2^52 x 2^q (the gap below a power of two is half the one above). No tie can occur: v is
   not an integer (q < 0), so a midpoint (2m+1) 2^(q-1) = (2m+1) 5^(1-q) / 10^(1-q) has the
   digits of an odd multiple of 25 above 2^53: 18 or more. */
static int reads_back (binary_value v, unsigned long long n, int s) {
  int k = -v.q;
  u128 a, b, ten;
  if (s < 0 || s > 22 || v.q >= 0 || k + 1 > 70) return -1;
  ten = pow10_wide(s);
  a = (u128)n << (k + 1);          /* below 2^57 x 2^70 */
  b = ((u128)v.m * ten) << 1;       /* below 2^54 x 10^22 < 2^128 */
  if (a >= b) return a - b < ten;
  return v.m == 1ULL << 52 ? 2 * (b - a) < ten : b - a < ten;
}
#endif

int nd_format_shortest (char *buf, size_t size, double x) {
  int digits;
  buf[0] = '\0';
  if (!isfinite(x)) return 0;
  if (x == floor(x) && fabs(x) < 0x1p63) {
    if (size >= 24) return nd_format_integer(buf, (long long)x);
    return snprintf(buf, size, "%lld", (long long)x);
  }
#ifdef __SIZEOF_INT128__
  {  /* the digits of 15, 16 and 17, exactly; read back exactly */
    binary_value v;
    unsigned long long n;
    int e;
    if (size >= 24 && binary_of(fabs(x), &v)) {
      for (digits = 15; digits <= 17; digits++) {
        int back;
        if (!exact_digits(v, digits, &n, &e)) break;
        back = digits == 17 ? 1 : reads_back(v, n, digits - 1 - e);
        if (back < 0) break;
        if (back) return g_text(buf, n, digits, e, signbit(x));
      }
    }
  }
#endif
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

/* The float next to f (finite) towards -inf (dir < 0) or +inf, by its bits: one integer
   step of the representation, as nextafterf takes, without a library call per price. */
static float float_step (float f, int dir) {
  uint32_t u;
  if (f == 0.0f) return dir < 0 ? -FLT_TRUE_MIN : FLT_TRUE_MIN;
  memcpy(&u, &f, sizeof u);
  if ((f > 0.0f) == (dir > 0)) u++; else u--;  /* away from zero, or towards it */
  memcpy(&f, &u, sizeof f);
  return f;
}

float nd_float_down (double x) {
  float f;
  if (x != x) return (float)x;
  if (x > FLT_MAX) return x == HUGE_VAL ? HUGE_VALF : FLT_MAX;
  if (x < -FLT_MAX) return -HUGE_VALF;
  f = (float)x;  /* to nearest: at most one step above x */
  return (double)f > x ? float_step(f, -1) : f;
}

float nd_float_up (double x) {
  float f;
  if (x != x) return (float)x;
  if (x > FLT_MAX) return HUGE_VALF;
  if (x < -FLT_MAX) return x == -HUGE_VAL ? -HUGE_VALF : -FLT_MAX;
  f = (float)x;
  return (double)f < x ? float_step(f, 1) : f;
}

static uint32_t float_bits (float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* The high half of f's bits (towards zero), one step away from zero instead when the low
   half is not zero and away is the way asked: down for a negative f, up for a positive
   one; a NaN kept a NaN (quiet). */
static uint16_t bf16_round (float f, int down) {
  uint32_t u = float_bits(f);
  int negative = (u >> 31) != 0;
  if (f != f) return (uint16_t)((u >> 16) | 0x40u);
  if ((u & 0xffffu) != 0 && negative == down) u += 0x10000u;
  return (uint16_t)(u >> 16);
}

uint16_t nd_bf16_down (float f) { return bf16_round(f, 1); }

uint16_t nd_bf16_up (float f) { return bf16_round(f, 0); }

float nd_bf16_float (uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
