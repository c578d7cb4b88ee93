/*
** layout_string.c -- Megatron-Core's pipeline layout language
** (--pipeline-model-parallel-layout), read and written.
**
** The rules, restated from Megatron-Core (PipelineParallelLayerLayout): commas are
** cosmetic and dropped; then every "(X)*n" whose X holds no ')' becomes n copies of X, in
** one left-to-right pass that does not rescan what it wrote; then every "c*n" (c any one
** character) becomes n copies of c, the same way. What is left is split at '|' into
** chunks (Megatron's virtual stages) in layer order: chunk k is chunk k / pp of stage
** k % pp. Each character is a layer: E embedding, t decoder, m MTP, L loss; nothing else.
** The chunk count must be a multiple of pp (vpp = count / pp); the first layer is the
** embedding and the last the loss, each exactly once; MTP layers come after every decoder,
** all in one chunk, which is the last chunk of its stage. Expansion is bounded here
** (ND_LAYOUT_MAX_CHARS); Megatron has no bound.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndplan/strategy.h"
#include "ndplan/units.h"

static int fail (char *err, size_t len, const char *fmt, ...) {
  if (err && len) {
    va_list ap;
    size_t n;
    snprintf(err, len, "layout: ");
    n = strlen(err);
    va_start(ap, fmt);
    vsnprintf(err + n, len - n, fmt, ap);
    va_end(ap);
  }
  return -1;
}

typedef struct buf { char *s; size_t n, cap; } buf;

/* Appends k copies of s[0..n); -1 past the expansion bound. */
static int put (buf *b, const char *s, size_t n, long long k) {
  long long i;
  if (n > 0 && (long long)(ND_LAYOUT_MAX_CHARS - b->n) / (long long)n < k) return -1;
  for (i = 0; i < k; i++) { memcpy(b->s + b->n, s, n); b->n += n; }
  b->s[b->n] = '\0';
  return 0;
}

/* Reads the digits at s (at least one): the count, capped past the bound. */
static size_t digits (const char *s, long long *k) {
  size_t i = 0;
  *k = 0;
  while (s[i] >= '0' && s[i] <= '9') {
    if (*k <= ND_LAYOUT_MAX_CHARS) *k = *k * 10 + (s[i] - '0');
    i++;
  }
  return i;
}

/* One pass: groups = 1 expands "(X)*n", else "c*n". Writes into out (fresh). */
static int expand (const char *in, buf *out, int groups) {
  size_t i = 0, len = strlen(in);
  out->n = 0;
  out->s[0] = '\0';
  while (i < len) {
    long long k;
    size_t nd;
    if (groups && in[i] == '(') {
      const char *close = strchr(in + i + 1, ')');
      if (close && close > in + i + 1 && close[1] == '*'
          && (nd = digits(close + 2, &k)) > 0) {
        if (put(out, in + i + 1, (size_t)(close - in - i - 1), k) != 0) return -1;
        i = (size_t)(close - in) + 2 + nd;
        continue;
      }
    }
    else if (!groups && i + 1 < len && in[i + 1] == '*' && in[i] != '\n'
             && (nd = digits(in + i + 2, &k)) > 0) {
      if (put(out, in + i, 1, k) != 0) return -1;
      i += 2 + nd;
      continue;
    }
    if (put(out, in + i, 1, 1) != 0) return -1;
    i++;
  }
  return 0;
}

/* The checks on the expanded text; fills the chunk sizes. */
static int place (nd_strategy *st, const char *x, char *err, size_t errlen) {
  int n = 1, k, pp = st->pp, vpp, e = 0, l = 0, mtp = 0, mtp_chunk = -1, decoders = 0;
  int layers[ND_MAX_CHUNKS];
  size_t i, len = strlen(x);
  long long last = -1;  /* index of the last layer character */
  for (i = 0; i < len; i++) if (x[i] == '|') n++;
  if (n > ND_MAX_CHUNKS) return fail(err, errlen, "%d chunks, over %d", n, ND_MAX_CHUNKS);
  if (pp < 1 || n % pp != 0)
    return fail(err, errlen, "%d chunks are not a multiple of pp %d", n, pp);
  vpp = n / pp;
  if (st->vpp > 1 && st->vpp != vpp)
    return fail(err, errlen, "vpp %d conflicts with the layout's %d chunks per stage "
                "(%d chunks over pp %d)", st->vpp, vpp, n, pp);
  memset(layers, 0, sizeof layers);
  for (i = 0, k = 0; i < len; i++) {
    char c = x[i];
    if (c == '|') { k++; continue; }
    if (c != 'E' && c != 't' && c != 'm' && c != 'L')
      return fail(err, errlen, "invalid layer character '%c' (known: E, t, m, L)", c);
    if (last < 0 && c != 'E')
      return fail(err, errlen, "the first layer must be the embedding (E), got '%c'", c);
    last = (long long)i;
    if (c == 'E') e++;
    else if (c == 'L') l++;
    else if (c == 't') {
      if (mtp > 0) return fail(err, errlen, "decoder layers (t) must come before MTP layers (m)");
      decoders++; layers[k]++;
    }
    else {
      if (mtp_chunk >= 0 && mtp_chunk != k)
        return fail(err, errlen, "every MTP layer (m) must be in one chunk");
      mtp_chunk = k; mtp++; layers[k]++;
    }
  }
  if (last < 0) return fail(err, errlen, "the first layer must be the embedding (E)");
  if (x[last] != 'L') return fail(err, errlen, "the last layer must be the loss (L), got '%c'", x[last]);
  if (e != 1) return fail(err, errlen, "the embedding (E) must appear exactly once, not %d times", e);
  if (l != 1) return fail(err, errlen, "the loss (L) must appear exactly once, not %d times", l);
  if (mtp_chunk >= 0 && mtp_chunk / pp != vpp - 1)
    return fail(err, errlen, "the MTP layers must be in the last chunk of their stage "
                "(they are in chunk %d of stage %d, of %d)", mtp_chunk / pp, mtp_chunk % pp, vpp);
  (void)decoders;
  memset(st->stage_layers, 0, sizeof st->stage_layers);
  for (k = 0; k < n; k++) {  /* a chunk's count is a short: no model has more layers */
    if (layers[k] > ND_MAX_LAYERS)
      return fail(err, errlen, "chunk %d holds %d layers, over %d", k, layers[k], ND_MAX_LAYERS);
    st->stage_layers[k] = (short)layers[k];
  }
  st->vpp = vpp;
  st->layout_mtp = (short)mtp;
  st->explicit_layout = ND_LAYOUT_STRING;
  return 0;
}

int nd_layout_parse (nd_strategy *st, const char *layout, char *err, size_t errlen) {
  buf a, b;
  size_t i, j, len = strlen(layout);
  int rc = -1;
  if (len > ND_LAYOUT_MAX_CHARS)
    return fail(err, errlen, "the string is longer than %d characters", ND_LAYOUT_MAX_CHARS);
  a.s = (char *)malloc(ND_LAYOUT_MAX_CHARS + 1);
  b.s = (char *)malloc(ND_LAYOUT_MAX_CHARS + 1);
  a.cap = b.cap = ND_LAYOUT_MAX_CHARS;
  if (!a.s || !b.s) { fail(err, errlen, "out of memory"); goto done; }
  for (i = j = 0; i < len; i++) if (layout[i] != ',') a.s[j++] = layout[i];
  a.s[j] = '\0';
  if (expand(a.s, &b, 1) != 0 || expand(b.s, &a, 0) != 0) {
    fail(err, errlen, "expands to more than %d layers and separators", ND_LAYOUT_MAX_CHARS);
    goto done;
  }
  rc = place(st, a.s, err, errlen);
done:
  free(a.s); free(b.s);
  return rc;
}

/* Text appended as snprintf would: what fits is written (always NUL-ended), the full
   length counted; a layout string is formatted for every result a caller reads. */
typedef struct text_out { char *s; size_t len, w; } text_out;

static void append (text_out *o, const char *text, size_t n) {
  if (o->w + 1 < o->len) {
    size_t room = o->len - 1 - o->w, k = n < room ? n : room;
    memcpy(o->s + o->w, text, k);
    o->s[o->w + k] = '\0';
  }
  o->w += n;
}

static void append_int (text_out *o, int v) {
  char digits[24];
  append(o, digits, (size_t)nd_format_integer(digits, v));
}

/* A run of n t's (or m's): "t", "tt", else "t*n". */
static void append_run (text_out *o, char c, int n) {
  char two[2];
  two[0] = two[1] = c;
  if (n <= 2) { append(o, two, (size_t)n); return; }
  append(o, two, 1);
  append(o, "*", 1);
  append_int(o, n);
}

/* One chunk as text: E first, t's, m's, L last (at most 26 bytes and the NUL). */
static int chunk_text (const nd_strategy *st, int k, int body, int mtp, char *out, size_t len) {
  int first = 0, i, n = st->stage_layers[k], t, mm, lo, hi, last = st->pp * st->vpp - 1;
  text_out o;
  o.s = out; o.len = len; o.w = 0;
  for (i = 0; i < k; i++) first += st->stage_layers[i];
  lo = first > body ? first : body;                        /* the MTP layers it holds */
  hi = first + n < body + mtp ? first + n : body + mtp;
  mm = hi > lo ? hi - lo : 0;
  t = n - mm;
  out[0] = '\0';
  if (k == 0) append(&o, "E", 1);
  if (t > 0) append_run(&o, 't', t);
  if (mm > 0) append_run(&o, 'm', mm);
  if (k == last) append(&o, "L", 1);
  return o.w < len ? 0 : -1;
}

int nd_layout_format (const nd_strategy *st, int body, int mtp, char *buf_, size_t len) {
  int n = st->pp * st->vpp, k = 0;
  char cur[32], next[32];
  text_out o;
  if (n < 1 || n > ND_MAX_CHUNKS || len == 0) return -1;
  o.s = buf_; o.len = len; o.w = 0;
  buf_[0] = '\0';
  while (k < n) {
    int r = 1;
    if (chunk_text(st, k, body, mtp, cur, sizeof cur) != 0) return -1;
    /* a run of equal chunks before the last one: "(X|)*r" */
    while (k + r < n - 1 && chunk_text(st, k + r, body, mtp, next, sizeof next) == 0
           && strcmp(cur, next) == 0) r++;
    if (r >= 2) {
      append(&o, "(", 1);
      append(&o, cur, strlen(cur));
      append(&o, "|)*", 3);
      append_int(&o, r);
      append(&o, ",", 1);
    } else {
      append(&o, cur, strlen(cur));
      if (k + 1 < n) append(&o, "|", 1);
    }
    k += r;
  }
  return (int)o.w;
}
