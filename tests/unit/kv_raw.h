/*
 * kv_raw.h -- raw-socket helpers for KV server tests.
 *
 * Tests that poke at the wire need to send bytes the real client never would
 * (half frames, bad magic, garbage) and to see exactly what comes back. These
 * helpers do that over a plain blocking TCP socket to 127.0.0.1:port:
 *
 *   kv_raw_connect      connect, with SO_SNDTIMEO/SO_RCVTIMEO bounding every call
 *   kv_raw_send         send arbitrary bytes (all of them, or an error)
 *   kv_raw_read_frame   read one 1156-byte frame within a timeout
 *   kv_raw_wait_closed  wait for the peer to close (FIN or RST), noticing data
 *   kv_raw_wait_hup     the same without reading (for a peer we must not drain)
 *   kv_raw_build        lay out a frame by hand (independent of kv_frame.c, so
 *                       any opcode/vtype/length can be written)
 *
 * Everything is static inline so a test file includes it and pays only for
 * what it uses. Return codes are the KV_RAW_* values below.
 */
#ifndef ASR_TEST_KV_RAW_H
#define ASR_TEST_KV_RAW_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "kv_frame.h"

enum {
  KV_RAW_OK = 0,       /* a whole frame was read / everything was sent */
  KV_RAW_CLOSED = -1,  /* the peer closed (EOF, or the connection was reset) */
  KV_RAW_TIMEOUT = -2, /* nothing decisive happened before the timeout */
  KV_RAW_DATA = -3,    /* kv_raw_wait_closed: bytes arrived instead of a close */
  KV_RAW_ERROR = -4,   /* another socket error (errno kept) */
};

static inline uint64_t kv_raw_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void kv_raw_sleep_ms(unsigned ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static inline const char *kv_raw_rc_name(int rc) {
  switch (rc) {
    case KV_RAW_OK: return "OK";
    case KV_RAW_CLOSED: return "CLOSED";
    case KV_RAW_TIMEOUT: return "TIMEOUT";
    case KV_RAW_DATA: return "DATA";
    default: return "ERROR";
  }
}

/* Connects a blocking TCP socket to 127.0.0.1:port. Every later blocking call
 * on it (connect included) gives up after timeout_ms. rcvbuf > 0 shrinks the
 * receive buffer before connecting. Returns the fd, or -errno. */
static inline int kv_raw_connect_ex(uint16_t port, int timeout_ms, int rcvbuf) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (rcvbuf > 0) (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  while (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    if (errno == EINTR) continue;
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

static inline int kv_raw_connect(uint16_t port, int timeout_ms) {
  return kv_raw_connect_ex(port, timeout_ms, 0);
}

/* Sends all len bytes. Returns KV_RAW_OK, KV_RAW_CLOSED when the peer is gone
 * (EPIPE/ECONNRESET), KV_RAW_TIMEOUT when SO_SNDTIMEO expired, else KV_RAW_ERROR. */
static inline int kv_raw_send(int fd, const void *buf, size_t len) {
  const uint8_t *p = (const uint8_t *)buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return KV_RAW_TIMEOUT;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return KV_RAW_CLOSED;
    return KV_RAW_ERROR;
  }
  return KV_RAW_OK;
}

/* Waits up to ms for events on fd; returns poll's revents (0 on timeout). */
static inline short kv_raw_poll(int fd, short events, int ms) {
  uint64_t deadline = kv_raw_now_ms() + (uint64_t)(ms > 0 ? ms : 0);
  for (;;) {
    uint64_t now = kv_raw_now_ms();
    int left = now >= deadline ? 0 : (int)(deadline - now);
    struct pollfd p = {.fd = fd, .events = events};
    int n = poll(&p, 1, left);
    if (n > 0) return p.revents;
    if (n == 0) return 0;
    if (errno != EINTR) return POLLERR;
  }
}

/* Reads exactly one frame into frame[ASR_KV_FRAME_LEN] within timeout_ms.
 * Returns KV_RAW_OK, KV_RAW_CLOSED (EOF or reset before a whole frame),
 * KV_RAW_TIMEOUT or KV_RAW_ERROR; *got (optional) = bytes read. */
static inline int kv_raw_read_frame_n(int fd, uint8_t *frame, int timeout_ms, size_t *got) {
  size_t have = 0;
  uint64_t deadline = kv_raw_now_ms() + (uint64_t)timeout_ms;
  int rc = KV_RAW_OK;
  while (have < ASR_KV_FRAME_LEN) {
    uint64_t now = kv_raw_now_ms();
    if (now >= deadline) {
      rc = KV_RAW_TIMEOUT;
      break;
    }
    if (!kv_raw_poll(fd, POLLIN, (int)(deadline - now))) continue;
    ssize_t n = recv(fd, frame + have, ASR_KV_FRAME_LEN - have, MSG_DONTWAIT);
    if (n > 0) {
      have += (size_t)n;
      continue;
    }
    if (n == 0) {
      rc = KV_RAW_CLOSED;
      break;
    }
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    rc = errno == ECONNRESET ? KV_RAW_CLOSED : KV_RAW_ERROR;
    break;
  }
  if (got) *got = have;
  return rc;
}

static inline int kv_raw_read_frame(int fd, uint8_t *frame, int timeout_ms) {
  return kv_raw_read_frame_n(fd, frame, timeout_ms, NULL);
}

/* Waits up to timeout_ms for the peer to close. Returns KV_RAW_CLOSED (EOF or
 * reset), KV_RAW_TIMEOUT (still open), or KV_RAW_DATA when bytes arrived first
 * (they are consumed; *extra, when given, counts them). */
static inline int kv_raw_wait_closed_n(int fd, int timeout_ms, size_t *extra) {
  uint64_t deadline = kv_raw_now_ms() + (uint64_t)timeout_ms;
  if (extra) *extra = 0;
  for (;;) {
    uint64_t now = kv_raw_now_ms();
    int left = now >= deadline ? 0 : (int)(deadline - now);
    if (!kv_raw_poll(fd, POLLIN | POLLRDHUP, left)) return KV_RAW_TIMEOUT;
    uint8_t buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return KV_RAW_CLOSED;
    if (n > 0) {
      if (extra) *extra += (size_t)n;
      return KV_RAW_DATA;
    }
    if (errno == ECONNRESET || errno == EPIPE) return KV_RAW_CLOSED;
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
      if (left == 0) return KV_RAW_TIMEOUT;
      continue;
    }
    return KV_RAW_ERROR;
  }
}

static inline int kv_raw_wait_closed(int fd, int timeout_ms) {
  return kv_raw_wait_closed_n(fd, timeout_ms, NULL);
}

/* Waits for the peer to close without reading anything (the receive buffer may
 * be full of responses we must not drain). Returns KV_RAW_CLOSED or KV_RAW_TIMEOUT. */
static inline int kv_raw_wait_hup(int fd, int timeout_ms) {
  short ev = kv_raw_poll(fd, POLLRDHUP, timeout_ms);
  return ev & (POLLRDHUP | POLLHUP | POLLERR) ? KV_RAW_CLOSED : KV_RAW_TIMEOUT;
}

/* --- frames, laid out by hand (kv_frame.h's table) ------------------------ */

static inline void kv_raw_put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void kv_raw_put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t kv_raw_get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t kv_raw_get32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Writes a version-1 frame with magic "ASRK" and zero flags. Any opcode and
 * vtype are accepted; key/val are copied (clipped to their fields) and the
 * length fields set to klen/vlen as given, so a test can lie about them.
 * secret NULL = zeros. */
static inline void kv_raw_build(uint8_t *frame, uint8_t opcode, uint8_t vtype, uint32_t aux, const void *key,
                                size_t klen, const void *val, size_t vlen, const uint8_t *secret) {
  memset(frame, 0, ASR_KV_FRAME_LEN);
  frame[ASR_KV_OFF_OPCODE] = opcode;
  frame[ASR_KV_OFF_VERSION] = ASR_KV_VERSION;
  frame[ASR_KV_OFF_VTYPE] = vtype;
  frame[ASR_KV_OFF_FLAGS] = 0;
  memcpy(frame + ASR_KV_OFF_MAGIC, "ASRK", 4);
  kv_raw_put32(frame + ASR_KV_OFF_AUX, aux);
  kv_raw_put16(frame + ASR_KV_OFF_KEYLEN, (uint16_t)klen);
  kv_raw_put16(frame + ASR_KV_OFF_VALLEN, (uint16_t)vlen);
  if (secret) memcpy(frame + ASR_KV_OFF_SECRET, secret, ASR_KV_SECRET_LEN);
  if (key && klen) memcpy(frame + ASR_KV_OFF_KEY, key, klen < ASR_KV_KEY_CAP ? klen : ASR_KV_KEY_CAP);
  if (val && vlen) memcpy(frame + ASR_KV_OFF_VAL, val, vlen < ASR_KV_VAL_MAX ? vlen : ASR_KV_VAL_MAX);
}

/* Field accessors for a received frame. */
static inline uint8_t kv_raw_op(const uint8_t *f) { return f[ASR_KV_OFF_OPCODE]; }
static inline uint32_t kv_raw_aux(const uint8_t *f) { return kv_raw_get32(f + ASR_KV_OFF_AUX); }
static inline uint16_t kv_raw_klen(const uint8_t *f) { return kv_raw_get16(f + ASR_KV_OFF_KEYLEN); }
static inline uint16_t kv_raw_vlen(const uint8_t *f) { return kv_raw_get16(f + ASR_KV_OFF_VALLEN); }

/* The value field as a NUL-terminated string (for opcode-6 reasons). */
static inline const char *kv_raw_val_str(const uint8_t *f, char *buf, size_t cap) {
  size_t n = kv_raw_vlen(f);
  if (n > ASR_KV_VAL_MAX) n = ASR_KV_VAL_MAX;
  if (n >= cap) n = cap - 1;
  memcpy(buf, f + ASR_KV_OFF_VAL, n);
  buf[n] = '\0';
  return buf;
}

/* Sends one request frame and reads one response frame. */
static inline int kv_raw_request(int fd, const uint8_t *req, uint8_t *resp, int timeout_ms) {
  int rc = kv_raw_send(fd, req, ASR_KV_FRAME_LEN);
  if (rc != KV_RAW_OK) return rc;
  return kv_raw_read_frame(fd, resp, timeout_ms);
}

#endif /* ASR_TEST_KV_RAW_H */
