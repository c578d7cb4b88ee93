/*
** units.c -- sizes, rates and times: formatting with the unit kept explicit.
*/
#include <math.h>
#include <stdio.h>

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
