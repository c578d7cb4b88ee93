/*
** ndplan/units.h -- unit constants and formatting. Quantities inside ndplan are plain
** SI base units held in doubles: bytes, seconds, FLOP, bytes per second, FLOP/s.
** Decimal (kB, MB, GB) and binary (KiB, MiB, GiB) prefixes are kept apart.
*/
#ifndef NDPLAN_UNITS_H
#define NDPLAN_UNITS_H

#include <float.h>
#include <stddef.h>
#include <stdint.h>

#define ND_KB  1e3
#define ND_MB  1e6
#define ND_GB  1e9
#define ND_TB  1e12
#define ND_KIB 1024.0
#define ND_MIB (1024.0 * 1024.0)
#define ND_GIB (1024.0 * 1024.0 * 1024.0)
#define ND_TIB (1024.0 * 1024.0 * 1024.0 * 1024.0)

char *nd_format_bytes (char *buf, size_t size, double bytes, int binary);
char *nd_format_seconds (char *buf, size_t size, double seconds);

/*
** printf's "%.{precision}g" of x (precision 1 to 17; round to nearest, ties to even, as the
** C library under the default rounding mode), into buf (at least 24 bytes); returns the
** length. Most values (about 10^-22 to 10^38) are rounded exactly in 128-bit integers;
** where that cannot hold them, precisions to 9 are rounded in doubles unless a tie is too
** close to call, and the rest (outside 1e-300..1e300 always) go to snprintf: the bytes are
** always printf's, most of them without its long division (results.csv writes millions).
*/
int nd_format_g (char *buf, size_t size, double x, int precision);

/* The double that nd_format_g's text of x reads back as (strtod's), mostly without the
   text: x rounded to `precision` significant digits (results.csv's figures, read back). */
double nd_round_g (double x, int precision);

/* printf's "%lld" of v into buf (at least 21 bytes); returns the length. */
int nd_format_integer (char *buf, long long v);

/*
** The shortest exact text of a finite double, which every file ndplan writes uses: an
** integral value below 2^63 in magnitude as that integer ("%lld"); another in the fewest
** significant digits, 15 to 17, that read back (strtod) to the same double ("%.{15,16,17}g";
** mostly found and checked in exact integer arithmetic, else with snprintf and strtod).
** Into buf (at least 40 bytes); returns the length, 0 for NaN and infinities (buf then "").
*/
int nd_format_shortest (char *buf, size_t size, double x);

/*
** printf's "%.{decimals}f" of x (decimals 0 to 9) with the trailing zeros after the point
** and a bare point dropped, and "-0" written "0" (the charts' coordinates, ndplan.out.svg).
** Into buf; returns the length, snprintf's when buf is too small (then the text is cut, not
** trimmed). ND_FIXED_SIZE holds any double's text: the digits of DBL_MAX, a sign, the point
** and 9 decimals, and the NUL. Most values are written without printf's exact division.
*/
#define ND_FIXED_SIZE (DBL_MAX_10_EXP + 1 + 1 + 1 + 9 + 1)
int nd_format_fixed (char *buf, size_t size, double x, int decimals);

/*
** x as a float rounded towards -inf (nd_float_down: the largest float not above x) or
** towards +inf (nd_float_up: the smallest not below), whatever the rounding mode; beyond a
** float's range, the largest float or an infinity as the direction says; NaN stays NaN. The
** search's lower bounds keep their layer prices so, rounded the way that keeps them bounds.
*/
float nd_float_down (double x);
float nd_float_up (double x);

/*
** A float as a bfloat16 (its sign, exponent and top 7 significand bits: the float's high
** 16 bits), rounded towards -inf (nd_bf16_down) or +inf (nd_bf16_up), so within a
** relative 2^-7 of it when normal; infinities and zeros exactly, NaN stays NaN. nd_bf16_float gives
** its value back, exactly. The search's bound caches keep their prices so: half a float's
** bytes, the groups twice as many in the same room.
*/
uint16_t nd_bf16_down (float f);
uint16_t nd_bf16_up (float f);
float nd_bf16_float (uint16_t h);

#endif
