/*
 * kv_server.h -- the rendezvous KV server: one per (host, bootstrap port).
 *
 * Event-driven (epoll, level-triggered, every fd non-blocking), single
 * threaded: it can be embedded in another loop through asr_kv_server_fd() and
 * asr_kv_server_poll(), or run on a thread of its own. Memory is bounded: at
 * most max_clients connections (beyond that it stops accepting, and the kernel
 * backlog holds the rest), max_keys keys and max_bytes of keys plus values.
 *
 * Robustness rules: a frame that does not decode, carries a response opcode,
 * or the wrong secret gets an opcode-6 reply with a one-line reason and the
 * connection is closed; nothing in the table changes. A client that stops
 * mid-frame for stall_timeout_ms, or sits idle between frames for
 * idle_timeout_ms, is dropped. No client can delay another: every socket
 * operation is non-blocking and each wakeup handles a bounded number of frames
 * per connection.
 */
#ifndef ASR_KV_SERVER_H
#define ASR_KV_SERVER_H

#include <stddef.h>
#include <stdint.h>

typedef struct asr_kv_server asr_kv_server_t;

typedef struct {
  const char *bind_ip;   /* NULL = 0.0.0.0 (peers on other hosts must reach it) */
  uint16_t port;         /* 0 = choose a free port (see asr_kv_server_port) */
  const uint8_t *secret; /* 32 bytes; NULL = all zeros (no job secret) */
  size_t max_keys;       /* 0 = 65536 */
  size_t max_bytes;      /* 0 = 64 MiB of keys + values */
  int max_clients;       /* 0 = 16384, capped by RLIMIT_NOFILE */
  int stall_timeout_ms;  /* 0 = 5000: mid-frame silence before a client is dropped */
  int idle_timeout_ms;   /* 0 = 60000: silence between frames before a client is dropped */
  int backlog;           /* 0 = 4096 (the kernel caps it at somaxconn) */
} asr_kv_server_opts_t;

typedef struct {
  unsigned clients;       /* connections open now */
  unsigned long accepted; /* connections accepted so far */
  unsigned long frames;   /* request frames handled */
  unsigned long errors;   /* opcode-6 replies sent */
  unsigned long stalled;  /* clients dropped by a timeout */
  unsigned held;          /* GETs held now, waiting for their key (kv_frame.h: aux) */
  unsigned long woken;    /* held GETs answered by a SET of their key */
  size_t keys, bytes;
} asr_kv_server_stats_t;

/* Creates the server and its listening socket. errbuf gets the reason on
 * failure (for example the port in use). The caller owns *out. */
int asr_kv_server_new(const asr_kv_server_opts_t *opts, asr_kv_server_t **out, char *errbuf, size_t errlen);

/* The TCP port it listens on. */
uint16_t asr_kv_server_port(const asr_kv_server_t *s);

/* An fd that becomes readable when asr_kv_server_poll() has work (its epoll fd). */
int asr_kv_server_fd(const asr_kv_server_t *s);

/* Waits up to timeout_ms for events and handles them, then drops timed-out
 * clients. Returns 0 or a negative ASR_E* on a fatal error. Not for use while
 * the server's own thread runs. */
int asr_kv_server_poll(asr_kv_server_t *s, int timeout_ms);

/* Stores a key directly (seeding "hostname" before clients arrive). Only from
 * the thread that polls, or before asr_kv_server_start_thread(). */
int asr_kv_server_put(asr_kv_server_t *s, const void *key, size_t klen, const void *val, size_t vlen,
                      int vtype);

/* Runs the poll loop on a new thread until asr_kv_server_stop_thread(). */
int asr_kv_server_start_thread(asr_kv_server_t *s);
void asr_kv_server_stop_thread(asr_kv_server_t *s);

void asr_kv_server_stats(asr_kv_server_t *s, asr_kv_server_stats_t *st);

/* Stops the thread if running, closes every connection and frees s. */
void asr_kv_server_free(asr_kv_server_t *s);

#endif /* ASR_KV_SERVER_H */
