/* ctl.c -- the control channel's framing and connections (see ctl.h). */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_le.h"
#include "asr_sock.h"
#include "ctl.h"

#define READS_PER_WAKEUP 4 /* 4 x 64 KiB: one busy peer cannot hold a wakeup */

int asr_ctl_header_parse(const uint8_t hdr[ASR_CTL_HDR], int *type, uint32_t *len, char *why, size_t whylen) {
  uint32_t m = asr_le_get32(hdr), l = asr_le_get32(hdr + 8);
  uint16_t v = asr_le_get16(hdr + 4), t = asr_le_get16(hdr + 6);
  const char *what = NULL;
  if (m != ASR_CTL_MAGIC)
    what = "not a control message (bad magic)";
  else if (v != ASR_CTL_VERSION)
    what = "a control message of another asr version";
  else if (t == ASR_CTL_INVALID || t >= ASR_CTL__COUNT)
    what = "an unknown message type";
  else if (l > ASR_CTL_MAX_PAYLOAD)
    what = "a message longer than the limit";
  if (what) {
    if (why)
      snprintf(why, whylen, "%s (magic %08x, version %u, type %u, length %u; this is version %d)", what, m, v,
               t, l, ASR_CTL_VERSION);
    return ASR_EPROTO;
  }
  *type = t;
  *len = l;
  return 0;
}

int asr_ctl_frame(const asr_ctl_msg_t *m, asr_buf_t *b) {
  uint8_t hdr[ASR_CTL_HDR] = {0};
  size_t keep = asr_buf_pending(b);
  int rc = asr_buf_put(b, hdr, sizeof hdr);
  if (rc) return rc;
  rc = asr_ctl_msg_encode(m, b);
  size_t len = asr_buf_pending(b) - keep - ASR_CTL_HDR;
  if (rc == 0 && len > ASR_CTL_MAX_PAYLOAD) rc = ASR_ETOOBIG;
  if (rc) {
    b->len = b->off + keep;
    return rc;
  }
  size_t at = b->off + keep; /* where the header went (a put may have compacted b) */
  asr_le_put32(b->data + at, ASR_CTL_MAGIC);
  asr_le_put16(b->data + at + 4, ASR_CTL_VERSION);
  asr_le_put16(b->data + at + 6, (uint16_t)m->type);
  asr_le_put32(b->data + at + 8, (uint32_t)len);
  return 0;
}

/* --- the connection ----------------------------------------------------------- */

static void watch(asr_ctl_conn_t *c) {
  if (c->fd < 0) return;
  unsigned ev = ASR_LOOP_READ | (asr_ctl_pending(c) > 0 ? ASR_LOOP_WRITE : 0);
  (void)asr_loop_io_set(c->loop, &c->io, ev);
}

void asr_ctl_close(asr_ctl_conn_t *c) {
  if (c->fd < 0) return;
  asr_loop_io_stop(c->loop, &c->io);
  asr_loop_timer_stop(c->loop, &c->flush_timer);
  asr_loop_timer_stop(c->loop, &c->finish_timer);
  close(c->fd);
  c->fd = -1;
  asr_buf_free(&c->in);
  asr_buf_free(&c->out);
}

/* Closes c and tells its owner why; the owner may free c then, so nothing
 * touches c after this. */
static void end(asr_ctl_conn_t *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void end(asr_ctl_conn_t *c, int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
  asr_ctl_close(c);
  if (c->on_close) c->on_close(c, err, c->why, c->arg);
}

#define ENDED 1 /* write_out and deliver: c was closed (its owner may have freed it) */

/* Returns 0, or ENDED. */
static int write_out(asr_ctl_conn_t *c) {
  while (asr_ctl_pending(c) > 0) {
    ssize_t n = send(c->fd, c->out.data + c->out.off, asr_ctl_pending(c), MSG_NOSIGNAL);
    if (n > 0) {
      c->out.off += (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    end(c, ASR_ECONNRESET, "the connection broke while writing: %s", n < 0 ? strerror(errno) : "closed");
    return ENDED;
  }
  if (asr_ctl_pending(c) == 0) {
    c->out.off = c->out.len = 0;
    if (c->finishing && !c->shut) {
      shutdown(c->fd, SHUT_WR); /* the peer reads our EOF after the last message */
      c->shut = 1;
    }
  }
  watch(c);
  return 0;
}

void asr_ctl_flush(asr_ctl_conn_t *c) {
  if (c->fd >= 0) (void)write_out(c);
}

static void on_flush_timer(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  asr_ctl_flush(t->arg);
}

static void on_finish_timer(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  asr_ctl_conn_t *c = t->arg;
  end(c, ASR_ETIMEDOUT, "the peer did not close the connection in time (%zu bytes unsent)",
      asr_ctl_pending(c));
}

/* Hands every whole message in c->in to the owner. Returns 0, or ENDED
 * (closed by the owner, or a protocol error). */
static int deliver(asr_ctl_conn_t *c) {
  while (asr_buf_pending(&c->in) >= ASR_CTL_HDR) {
    const uint8_t *h = c->in.data + c->in.off;
    int type;
    uint32_t len;
    char why[200];
    if (asr_ctl_header_parse(h, &type, &len, why, sizeof why) != 0) {
      end(c, ASR_EPROTO, "%s", why);
      return ENDED;
    }
    if (asr_buf_pending(&c->in) - ASR_CTL_HDR < len) break;
    asr_ctl_msg_t m;
    if (asr_ctl_msg_decode(type, h + ASR_CTL_HDR, len, &m, why, sizeof why) != 0) {
      end(c, ASR_EPROTO, "malformed %s message: %s", asr_ctl_type_name(type), why);
      return ENDED;
    }
    /* consumed before the call; its bytes stay put until the next read */
    c->in.off += ASR_CTL_HDR + len;
    if (c->on_msg) c->on_msg(c, &m, c->arg);
    asr_ctl_msg_free(&m);
    if (c->fd < 0) return ENDED; /* the owner closed it */
  }
  if (c->in.off == c->in.len) c->in.off = c->in.len = 0;
  return 0;
}

static void on_io(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  asr_ctl_conn_t *c = io->arg;
  if ((events & ASR_LOOP_WRITE) && write_out(c) != 0) return;
  if (!(events & ASR_LOOP_READ)) return;
  for (int i = 0; i < READS_PER_WAKEUP; i++) {
    uint8_t tmp[65536];
    ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
    if (n > 0) {
      c->last_rx_ms = asr_loop_now(loop);
      if (asr_buf_put(&c->in, tmp, (size_t)n) != 0) {
        end(c, ASR_ENOMEM, "out of memory for %zd bytes of input", n);
        return;
      }
      if (deliver(c) != 0) return;
      if ((size_t)n < sizeof tmp) break;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    size_t partial = asr_buf_pending(&c->in);
    if (n == 0 && partial)
      end(c, ASR_EPROTO, "the connection ended in the middle of a message (%zu bytes of it)", partial);
    else if (n == 0 && c->finishing)
      end(c, 0, "closed after the last message");
    else if (n == 0)
      end(c, ASR_ECONNRESET, "the peer closed the connection");
    else
      end(c, ASR_ECONNRESET, "the connection broke: %s", strerror(errno));
    return;
  }
}

int asr_ctl_start(asr_loop_t *loop, asr_ctl_conn_t *c, int fd, asr_ctl_msg_cb on_msg,
                  asr_ctl_close_cb on_close, void *arg) {
  memset(c, 0, sizeof *c);
  c->loop = loop;
  c->fd = fd;
  c->on_msg = on_msg;
  c->on_close = on_close;
  c->arg = arg;
  c->last_rx_ms = asr_loop_now(loop);
  /* Every message is written whole as soon as it is made (a frame, or a
   * batch of them): Nagle's wait for the ACK of the last one would hold a
   * second small message until the peer's delayed ACK (40 ms on Linux) on
   * a connection that was accepted (only the connecting side set it). */
  asr_sock_nodelay(fd);
  int rc = asr_loop_io_start(loop, &c->io, fd, ASR_LOOP_READ, on_io, c);
  if (rc) c->fd = -1;
  return rc;
}

void asr_ctl_set_owner(asr_ctl_conn_t *c, asr_ctl_msg_cb on_msg, asr_ctl_close_cb on_close, void *arg) {
  c->on_msg = on_msg;
  c->on_close = on_close;
  c->arg = arg;
}

int asr_ctl_send(asr_ctl_conn_t *c, const asr_ctl_msg_t *m) {
  if (c->fd < 0 || c->finishing) return ASR_ENOTCONN;
  int rc = asr_ctl_frame(m, &c->out);
  if (rc) return rc;
  if (!asr_loop_timer_active(&c->flush_timer))
    asr_loop_timer_start(c->loop, &c->flush_timer, 0, on_flush_timer, c);
  return 0;
}

int asr_ctl_send_empty(asr_ctl_conn_t *c, asr_ctl_type_t type) {
  asr_ctl_msg_t m = {.type = type};
  return asr_ctl_send(c, &m);
}

int asr_ctl_send_routed(asr_ctl_conn_t *c, uint32_t host, const asr_ctl_msg_t *m) {
  asr_buf_t b = {0};
  int rc = asr_ctl_msg_encode(m, &b);
  if (rc == 0) {
    asr_ctl_msg_t r = {
        .type = ASR_CTL_ROUTED,
        .u.routed = {
            .host = host, .type = (uint32_t)m->type, .data = b.data + b.off, .len = asr_buf_pending(&b)}};
    rc = asr_ctl_send(c, &r);
  }
  asr_buf_free(&b);
  return rc;
}

void asr_ctl_finish(asr_ctl_conn_t *c, int timeout_ms) {
  if (c->fd < 0 || c->finishing) return;
  c->finishing = 1;
  asr_loop_timer_stop(c->loop, &c->flush_timer);
  asr_loop_timer_start(c->loop, &c->finish_timer, (uint64_t)(timeout_ms > 0 ? timeout_ms : 0),
                       on_finish_timer, c);
  (void)write_out(c); /* may end c */
}
