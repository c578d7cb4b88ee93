/*
** test_units.c -- nd_format_g against the C library's "%.{p}g", the oracle it must equal
** byte for byte (results.csv's figures): values log-uniform over 10^-43..10^43, random bit
** patterns (NaN, infinities, subnormals), decimals with few digits, exact halves (ties
** to even), and the edges where the exponent or the notation changes, at every precision
** 1 to 17; and its fallback for a buffer too small. nd_format_shortest, at the same values,
** against its rule written with printf and strtod (the fewest of 15, 16, 17 digits that
** read back); nd_format_integer against "%lld". nd_round_g, at each of those values and
** precisions, against strtod of printf's text, bit for bit. nd_format_fixed, at the same
** values and at chart coordinates (quarters, thirds, hundredths and the ties between them),
** against "%.{d}f" with its trailing zeros and bare point dropped and "-0" as "0", d 0 to 9.
** nd_float_down and nd_float_up at the same values, their negatives, floats' edges (zeros,
** subnormals, the largest float and past it) and floats themselves: each the float on its
** side of x with none between them and x (nextafterf the oracle); nd_bf16_down and
** nd_bf16_up at random floats and floats' edges likewise, to the bfloat16s beside them.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/units.h"
#include "fixtures.h"

static uint64_t state = 88172645463325252ULL;

static uint64_t next (void) {  /* xorshift64: the same values on every run */
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

static int mismatches;

/* Whether a float is a bfloat16's value: its low 16 bits zero. */
static int is_bf16 (float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (u & 0xffffu) == 0;
}

/* nd_bf16_down and nd_bf16_up of f: each the bfloat16 on its side of f with none between
   (the oracle steps float by float, nextafterf, to the first bfloat16 each way) */
static void directed_bf16 (float f) {
  float d = nd_bf16_float(nd_bf16_down(f)), u = nd_bf16_float(nd_bf16_up(f)), wd = f, wu = f;
  int ok;
  if (isnan(f)) ok = isnan(d) && isnan(u);
  else {
    while (!is_bf16(wd)) wd = nextafterf(wd, -HUGE_VALF);
    while (!is_bf16(wu)) wu = nextafterf(wu, HUGE_VALF);
    ok = d == wd && u == wu && signbit(d) == signbit(wd) && signbit(u) == signbit(wu);
  }
  if (!ok && mismatches++ < 10)
    CHECK(0, "bfloat16 of %.9g: down %.9g, up %.9g", (double)f, (double)d, (double)u);
}

/* nd_float_down and nd_float_up of x: each on its side of x, its neighbour towards x past it */
static void directed (double x) {
  float d = nd_float_down(x), u = nd_float_up(x);
  int ok;
  if (isnan(x)) ok = isnan(d) && isnan(u);
  else
    ok = (double)d <= x && (d == HUGE_VALF || (double)nextafterf(d, HUGE_VALF) > x)
      && (double)u >= x && (u == -HUGE_VALF || (double)nextafterf(u, -HUGE_VALF) < x);
  if (!ok && mismatches++ < 10)
    CHECK(0, "float of %.17g: down %.9g, up %.9g", x, (double)d, (double)u);
}

/* nd_format_shortest's rule, with the C library's text and reading */
static int shortest_oracle (char *out, size_t size, double x) {
  int digits;
  out[0] = '\0';
  if (!isfinite(x)) return 0;
  if (x == floor(x) && fabs(x) < 0x1p63) return snprintf(out, size, "%lld", (long long)x);
  for (digits = 15; digits < 17; digits++) {
    int n = snprintf(out, size, "%.*g", digits, x);
    if (strtod(out, NULL) == x) return n;
  }
  return snprintf(out, size, "%.17g", x);
}

static void same (double x) {
  char got[64], want[64];
  int p, n;
  n = nd_format_shortest(got, sizeof got, x);
  if (n != shortest_oracle(want, sizeof want, x) || strcmp(got, want) != 0) {
    if (mismatches++ < 10) CHECK(0, "shortest of %.17g: %s, printf and strtod %s", x, got, want);
  }
  for (p = 1; p <= 17; p++) {
    double back, read;
    n = nd_format_g(got, sizeof got, x, p);
    snprintf(want, sizeof want, "%.*g", p, x);
    if (strcmp(got, want) != 0 || n != (int)strlen(want)) {
      if (mismatches++ < 10) CHECK(0, "%%.%dg of %.17g: %s, printf %s", p, x, got, want);
    }
    if (p > 9) continue;  /* (nd_round_g's precisions) */
    /* nd_round_g: the bits strtod reads from printf's text (NaN: any NaN) */
    back = nd_round_g(x, p);
    read = strtod(want, NULL);
    if (memcmp(&back, &read, sizeof back) != 0 && !(isnan(back) && isnan(read))) {
      if (mismatches++ < 10) CHECK(0, "nd_round_g(%.17g, %d): %.17g, strtod %.17g", x, p, back, read);
    }
  }
}

/* the rule nd_format_fixed states, written with printf itself */
static void fixed_oracle (char *out, size_t size, double x, int d) {
  size_t len = (size_t)snprintf(out, size, "%.*f", d, x);
  if (strchr(out, '.')) {
    while (out[len - 1] == '0') out[--len] = '\0';
    if (out[len - 1] == '.') out[--len] = '\0';
  }
  if (strcmp(out, "-0") == 0) strcpy(out, "0");
}

static void same_fixed (double x) {
  static char got[ND_FIXED_SIZE], want[ND_FIXED_SIZE];
  int d, n;
  for (d = 0; d <= 9; d++) {
    n = nd_format_fixed(got, sizeof got, x, d);
    fixed_oracle(want, sizeof want, x, d);
    if (strcmp(got, want) != 0 || n != (int)strlen(want)) {
      if (mismatches++ < 10) CHECK(0, "fixed %d of %.17g: %s, printf %s", d, x, got, want);
    }
  }
}

int main (void) {
  static const double edges[] = {
    0.0, -0.0, 1e-5, 1e-4, 9.99999999e-5, 9.9999999995e-5, 0.0001, 0.00099999999995,
    999999999.5, 999999999.4, 999999998.5, 1e9, 123456788.5, 123456789.5, 0.5, 1.5, 2.5,
    0.05, 0.15, 0.25, 0.35, 1e22, 1e23, 9.999999995e22, 1e-22, 1e-23, 5e-324, 2.2250738585072014e-308,
    1.7976931348623157e308, 1e300, 1.0000000001e300, 1e-300, 9.99999e-301, 100, 1e8,
    99999999.95, 99999.95, 999999.5, 9999995, 123.440344, 33978.4, 0.24115, 15.9085003
  };
  char small[8];
  long i;
  for (i = 0; i < (long)(sizeof edges / sizeof edges[0]); i++) {
    same(edges[i]);
    same(-edges[i]);
    same_fixed(edges[i]);
    same_fixed(-edges[i]);
  }
  same(INFINITY); same(-INFINITY); same(NAN);
  same_fixed(INFINITY); same_fixed(-INFINITY); same_fixed(NAN);
  for (i = -40000; i <= 40000; i++) {  /* chart coordinates, and the ties of 2 decimals */
    same_fixed((double)i / 4);
    same_fixed((double)i / 3);
    same_fixed((double)i / 100);
    same_fixed((double)i / 1000 + 0.005);
    same_fixed((double)i * 1e5 + 0.125);
  }
  for (i = 0; i < 150000; i++) {
    uint64_t r = next();
    double x;
    switch (i % 5) {
      case 0: x = exp((double)(r % 2000000) / 1e4 - 100.0); break;
      case 1: memcpy(&x, &r, sizeof x); break;
      case 2: x = (double)(r % 100000000000ULL) / pow(10, (double)(r % 23)); break;
      case 3: x = (double)(r % 2000000001ULL) * 0.5; break;
      default: x = (double)(r % 1000) * pow(10, (double)((int)((r >> 20) % 40) - 20)); break;
    }
    same(r & 1 ? -x : x);
    same_fixed(r & 1 ? -x : x);
    directed(x);
    directed(-x);
    directed((double)(float)x);
  }
  {  /* floats' edges: zeros, the subnormals, the largest float and past it, infinities */
    static const double fedges[] = {0.0, -0.0, FLT_TRUE_MIN, FLT_TRUE_MIN / 2, FLT_TRUE_MIN * 1.5,
                                    FLT_MIN, FLT_MIN * (1 - 1e-9), FLT_MAX, FLT_MAX * (1 + 1e-9),
                                    FLT_MAX * 2, 1e300, HUGE_VAL, 1.0, 1.0 + 1e-12, 1e-50};
    for (i = 0; i < (long)(sizeof fedges / sizeof fedges[0]); i++) {
      directed(fedges[i]);
      directed(-fedges[i]);
    }
    directed(NAN);
  }
  for (i = 0; i < 600; i++) {  /* bfloat16: random floats (bits, and log-uniform), edges */
    uint64_t r = next();
    uint32_t bits = (uint32_t)r;
    float f;
    memcpy(&f, &bits, sizeof f);
    directed_bf16(f);
    directed_bf16((float)exp((double)(r >> 32 & 0xfffff) / 1e4 - 50.0));
  }
  {
    static const float bedges[] = {0.0f, -0.0f, FLT_TRUE_MIN, FLT_MIN, FLT_MAX, HUGE_VALF,
                                   1.0f, 1.00390625f, 1.0078125f, 3.0e38f};
    for (i = 0; i < (long)(sizeof bedges / sizeof bedges[0]); i++) {
      directed_bf16(bedges[i]);
      directed_bf16(-bedges[i]);
    }
    directed_bf16(NAN);
  }
  for (i = -80; i <= 80; i++) {  /* powers of two and their neighbours: the gap changes */
    double t = ldexp(1.0, (int)i);
    same(t); same(nextafter(t, 0)); same(nextafter(t, INFINITY));
    same(t * 0.1); same(t / 3); same(t * 1.1);
  }
  for (i = 0; i < 200000; i++) {  /* ratios of small integers: the shortest texts' usual input */
    uint64_t r = next();
    double x = (double)(r % 1000003) / (double)((r >> 24) % 9973 + 1) * pow(2, (double)(r % 61) - 30);
    char got[64], want[64];
    int n = nd_format_shortest(got, sizeof got, x);
    if (n != shortest_oracle(want, sizeof want, x) || strcmp(got, want) != 0) {
      if (mismatches++ < 10) CHECK(0, "shortest of %.17g: %s, printf and strtod %s", x, got, want);
    }
  }
  {
    static const long long ints[] = {0, 1, -1, 9, 10, 99, 100, -100, 123456789012345678LL,
                                     9223372036854775807LL, -9223372036854775807LL - 1};
    for (i = 0; i < (long)(sizeof ints / sizeof ints[0]) + 100000; i++) {
      long long v = i < (long)(sizeof ints / sizeof ints[0]) ? ints[i]
                    : (long long)(next() >> (next() % 64));
      char got[32], want[32];
      int n = nd_format_integer(got, i % 2 ? -v : v);
      snprintf(want, sizeof want, "%lld", i % 2 ? -v : v);
      if (strcmp(got, want) != 0 || n != (int)strlen(want)) {
        if (mismatches++ < 10) CHECK(0, "integer %s, printf %s", got, want);
      }
    }
  }
  CHECK(mismatches == 0, "%d mismatches with the oracles", mismatches);
  /* too small a buffer: printf's truncation and length */
  CHECK(nd_format_g(small, sizeof small, 123.456789, 9) == 10 && strcmp(small, "123.456") == 0,
        "truncated as snprintf: %s", small);
  CHECK(nd_format_fixed(small, sizeof small, 123456789.25, 2) == 12
        && strcmp(small, "1234567") == 0, "fixed, truncated as snprintf: %s", small);
  if (failures) fprintf(stderr, "test_units: %d failure(s)\n", failures);
  else printf("test_units: all passed\n");
  return failures ? 1 : 0;
}
