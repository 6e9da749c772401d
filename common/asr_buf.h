/*
 * asr_buf.h -- a growable byte buffer, and the wire primitives the control
 * messages are made of: little-endian u32s and u32-length-prefixed byte
 * strings (launcher/ctl/ctl_msg.h).
 */
#ifndef ASR_BUF_H
#define ASR_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "asr_err.h"

/* A growable buffer with a consumed front (off): a queue of bytes. The
 * all-zero value is an empty buffer; asr_buf_free makes it so again. */
typedef struct {
  uint8_t *data;
  size_t len, cap, off; /* off: bytes already consumed from the front */
} asr_buf_t;

void asr_buf_free(asr_buf_t *b);

/* Bytes not yet consumed. */
static inline size_t asr_buf_pending(const asr_buf_t *b) { return b->len - b->off; }

/* Append; 0 or ASR_ENOMEM (then b is unchanged). */
int asr_buf_put(asr_buf_t *b, const void *p, size_t n);
int asr_buf_put_u32(asr_buf_t *b, uint32_t v);
int asr_buf_put_bytes(asr_buf_t *b, const void *p, size_t n); /* u32 length + bytes */
int asr_buf_put_str(asr_buf_t *b, const char *s);             /* as bytes, without the NUL; NULL = "" */
/* Appends printf's text, whole (no NUL): 0, or ASR_ENOMEM (or ASR_EINVAL
 * for a format vsnprintf refuses), b then unchanged. */
int asr_buf_printf(asr_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int asr_buf_vprintf(asr_buf_t *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* The value of hex digit c into *v: 0, or ASR_EINVAL when c is none. */
static inline int asr_hex_digit(int c, int *v) {
  if (c >= '0' && c <= '9')
    *v = c - '0';
  else if (c >= 'a' && c <= 'f')
    *v = c - 'a' + 10;
  else if (c >= 'A' && c <= 'F')
    *v = c - 'A' + 10;
  else
    return ASR_EINVAL;
  return 0;
}

/* A cursor over received bytes. Every getter fails once the bytes are
 * exhausted or a length does not fit, and keeps failing: `bad` is set and
 * getters return 0 / NULL, so a decoder reads every field and checks once. */
typedef struct {
  const uint8_t *p;
  size_t len, pos;
  int bad;
} asr_rd_t;

void asr_rd_init(asr_rd_t *r, const void *p, size_t len);
uint32_t asr_rd_u32(asr_rd_t *r);
/* Points into the bytes; *n gets the length. */
const uint8_t *asr_rd_bytes(asr_rd_t *r, size_t *n);
/* A malloc'd NUL-terminated copy, at most max bytes long and without a NUL
 * inside (else bad); NULL on error. */
char *asr_rd_str(asr_rd_t *r, size_t max);
/* Whether every byte was read and nothing was bad. */
static inline int asr_rd_done(const asr_rd_t *r) { return !r->bad && r->pos == r->len; }

#endif /* ASR_BUF_H */
