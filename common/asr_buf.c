/* asr_buf.c -- see asr_buf.h. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_buf.h"
#include "asr_err.h"
#include "asr_le.h"

void asr_buf_free(asr_buf_t *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

int asr_buf_put(asr_buf_t *b, const void *p, size_t n) {
  if (b->off && b->off == b->len) b->off = b->len = 0;
  if (n > SIZE_MAX / 4 - b->len) return ASR_ENOMEM;
  if (b->len + n > b->cap) {
    if (b->off) { /* compact before growing */
      memmove(b->data, b->data + b->off, b->len - b->off);
      b->len -= b->off;
      b->off = 0;
    }
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < b->len + n) ncap *= 2;
    if (ncap != b->cap) {
      uint8_t *d = realloc(b->data, ncap);
      if (!d) return ASR_ENOMEM;
      b->data = d;
      b->cap = ncap;
    }
  }
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

int asr_buf_put_u32(asr_buf_t *b, uint32_t v) {
  uint8_t le[4];
  asr_le_put32(le, v);
  return asr_buf_put(b, le, 4);
}

int asr_buf_put_bytes(asr_buf_t *b, const void *p, size_t n) {
  if (n > UINT32_MAX) return ASR_ETOOBIG;
  size_t before = b->len;
  int rc = asr_buf_put_u32(b, (uint32_t)n);
  if (rc == 0) rc = asr_buf_put(b, p, n);
  if (rc && b->len > before) b->len = before; /* all or nothing */
  return rc;
}

int asr_buf_put_str(asr_buf_t *b, const char *s) {
  return asr_buf_put_bytes(b, s ? s : "", s ? strlen(s) : 0);
}

void asr_rd_init(asr_rd_t *r, const void *p, size_t len) {
  r->p = p;
  r->len = len;
  r->pos = 0;
  r->bad = 0;
}

uint32_t asr_rd_u32(asr_rd_t *r) {
  if (r->bad || r->len - r->pos < 4) {
    r->bad = 1;
    return 0;
  }
  const uint8_t *q = r->p + r->pos;
  r->pos += 4;
  return asr_le_get32(q);
}

const uint8_t *asr_rd_bytes(asr_rd_t *r, size_t *n) {
  uint32_t len = asr_rd_u32(r);
  if (r->bad || r->len - r->pos < len) {
    r->bad = 1;
    *n = 0;
    return NULL;
  }
  const uint8_t *q = r->p + r->pos;
  r->pos += len;
  *n = len;
  return q;
}

char *asr_rd_str(asr_rd_t *r, size_t max) {
  size_t n;
  const uint8_t *q = asr_rd_bytes(r, &n);
  if (!q) return NULL;
  if (n > max || memchr(q, '\0', n)) {
    r->bad = 1;
    return NULL;
  }
  char *s = malloc(n + 1);
  if (!s) {
    r->bad = 1;
    return NULL;
  }
  memcpy(s, q, n);
  s[n] = '\0';
  return s;
}

int asr_buf_vprintf(asr_buf_t *b, const char *fmt, va_list ap) {
  char line[1024], *p = line;
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  if (n >= 0 && (size_t)n >= sizeof line) { /* a longer text: formatted again, whole */
    p = malloc((size_t)n + 1);
    if (p) vsnprintf(p, (size_t)n + 1, fmt, again);
  }
  va_end(again);
  if (n < 0) return ASR_EINVAL;
  if (!p) return ASR_ENOMEM;
  int rc = asr_buf_put(b, p, (size_t)n);
  if (p != line) free(p);
  return rc;
}

int asr_buf_printf(asr_buf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = asr_buf_vprintf(b, fmt, ap);
  va_end(ap);
  return rc;
}
