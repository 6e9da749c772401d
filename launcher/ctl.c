/* ctl.c -- framing for the asrrun <-> asrd control channel (see ctl.h). */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_time.h"
#include "ctl.h"

static const char *const type_names[] = {"INVALID", "HELLO", "JOB",        "STARTED",  "OUTPUT",
                                         "EXIT",    "FENCE", "FENCE_DONE", "ABORT",    "KILL",
                                         "STDIN",   "ERROR", "DONE",       "SHUTDOWN", "HEARTBEAT"};

const char *asr_ctl_type_name(int type) {
  return type >= 0 && type < ASR_CTL__COUNT ? type_names[type] : "UNKNOWN";
}

void asr_buf_free(asr_buf_t *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

int asr_buf_put(asr_buf_t *b, const void *p, size_t n) {
  if (b->off && b->off == b->len) b->off = b->len = 0;
  if (b->len + n > b->cap) {
    if (b->off) { /* compact before growing */
      memmove(b->data, b->data + b->off, b->len - b->off);
      b->len -= b->off;
      b->off = 0;
    }
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < b->len + n) ncap *= 2;
    uint8_t *d = realloc(b->data, ncap);
    if (!d) return ASR_ENOMEM;
    b->data = d;
    b->cap = ncap;
  }
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

void asr_buf_put_u32(asr_buf_t *b, uint32_t v) {
  uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  asr_buf_put(b, le, 4);
}

void asr_buf_put_bytes(asr_buf_t *b, const void *p, size_t n) {
  asr_buf_put_u32(b, (uint32_t)n);
  asr_buf_put(b, p, n);
}

void asr_buf_put_str(asr_buf_t *b, const char *s) { asr_buf_put_bytes(b, s ? s : "", s ? strlen(s) : 0); }

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
  return (uint32_t)q[0] | ((uint32_t)q[1] << 8) | ((uint32_t)q[2] << 16) | ((uint32_t)q[3] << 24);
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

char *asr_rd_str(asr_rd_t *r) {
  size_t n;
  const uint8_t *q = asr_rd_bytes(r, &n);
  if (!q) return NULL;
  char *s = malloc(n + 1);
  if (!s) {
    r->bad = 1;
    return NULL;
  }
  memcpy(s, q, n);
  s[n] = '\0';
  return s;
}

int asr_ctl_flush(asr_ctl_conn_t *c) {
  while (c->out.len > c->out.off) {
    ssize_t n = send(c->fd, c->out.data + c->out.off, c->out.len - c->out.off, MSG_NOSIGNAL);
    if (n > 0) {
      c->out.off += (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n < 0 && errno == EINTR) continue;
    c->closed = 1;
    return ASR_ECONNRESET;
  }
  c->out.off = c->out.len = 0;
  return 0;
}

int asr_ctl_queue(asr_ctl_conn_t *c, int type, const asr_buf_t *payload) {
  if (c->closed) return ASR_ECONNRESET;
  size_t len = payload ? payload->len - payload->off : 0;
  if (len > ASR_CTL_MAX_PAYLOAD) return ASR_ETOOBIG;
  uint8_t hdr[ASR_CTL_HDR];
  uint32_t m = ASR_CTL_MAGIC, l = (uint32_t)len;
  uint16_t v = ASR_CTL_VERSION, t = (uint16_t)type;
  memcpy(hdr, &m, 4);
  memcpy(hdr + 4, &v, 2);
  memcpy(hdr + 6, &t, 2);
  memcpy(hdr + 8, &l, 4);
  if (asr_buf_put(&c->out, hdr, sizeof hdr) ||
      (len && asr_buf_put(&c->out, payload->data + payload->off, len)))
    return ASR_ENOMEM;
  return 0;
}

int asr_ctl_send(asr_ctl_conn_t *c, int type, const asr_buf_t *payload) {
  int rc = asr_ctl_queue(c, type, payload);
  return rc ? rc : asr_ctl_flush(c);
}

int asr_ctl_read(asr_ctl_conn_t *c, asr_ctl_msg_fn on_msg, void *arg) {
  for (;;) {
    uint8_t tmp[65536];
    ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
    if (n > 0) {
      if (asr_buf_put(&c->in, tmp, (size_t)n)) return ASR_ENOMEM;
      if ((size_t)n < sizeof tmp) break;
      continue;
    }
    if (n == 0) {
      c->closed = 1;
      break;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    if (errno == EINTR) continue;
    c->closed = 1;
    break;
  }
  /* Deliver every whole message. */
  while (c->in.len - c->in.off >= ASR_CTL_HDR) {
    const uint8_t *h = c->in.data + c->in.off;
    uint32_t m, l;
    uint16_t v, t;
    memcpy(&m, h, 4);
    memcpy(&v, h + 4, 2);
    memcpy(&t, h + 6, 2);
    memcpy(&l, h + 8, 4);
    if (m != ASR_CTL_MAGIC || v != ASR_CTL_VERSION || t == ASR_CTL_INVALID || t >= ASR_CTL__COUNT ||
        l > ASR_CTL_MAX_PAYLOAD) {
      c->closed = 1;
      return ASR_EPROTO;
    }
    if (c->in.len - c->in.off < ASR_CTL_HDR + l) break;
    c->in.off += ASR_CTL_HDR + l;
    on_msg(arg, c, t, h + ASR_CTL_HDR, l);
    if (c->fd < 0) return ASR_ECONNRESET; /* the handler closed us */
  }
  if (c->in.off == c->in.len) c->in.off = c->in.len = 0;
  return c->closed ? ASR_ECONNRESET : 0;
}

int asr_ctl_send_sync(asr_ctl_conn_t *c, int type, const asr_buf_t *payload, int timeout_ms) {
  int rc = asr_ctl_send(c, type, payload);
  uint64_t until = asr_time_ms() + (uint64_t)timeout_ms;
  while (rc == 0 && c->out.len > c->out.off) {
    if (asr_time_ms() >= until) return ASR_ETIMEDOUT;
    struct pollfd p = {.fd = c->fd, .events = POLLOUT};
    poll(&p, 1, 100);
    rc = asr_ctl_flush(c);
  }
  return rc;
}

void asr_ctl_close(asr_ctl_conn_t *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->closed = 1;
  asr_buf_free(&c->in);
  asr_buf_free(&c->out);
}
