/*
 * kv_server.h -- the rendezvous KV server: one per (host, bootstrap port).
 *
 * Event-driven (an asr_loop, every fd non-blocking), single threaded: it
 * runs on the caller's loop (opts.loop: asrd's), or on a loop of its own on
 * a thread of its own (asr_kv_server_start_thread). Memory is bounded: at
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

#include "asr_loop.h"

typedef struct asr_kv_server asr_kv_server_t;

typedef struct {
  asr_loop_t *loop;      /* the loop to run on (its thread only); NULL = one of its own, for start_thread */
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

/* Stores a key directly (seeding "hostname" before clients arrive), and
 * answers the GETs held for it. From the loop's thread, or from any thread
 * while the server runs on its own (start_thread). */
int asr_kv_server_put(asr_kv_server_t *s, const void *key, size_t klen, const void *val, size_t vlen,
                      int vtype);

/* Runs the server's own loop on a new thread until
 * asr_kv_server_stop_thread(). ASR_ESTATE when it runs already, or on the
 * caller's loop. */
int asr_kv_server_start_thread(asr_kv_server_t *s);
void asr_kv_server_stop_thread(asr_kv_server_t *s);

void asr_kv_server_stats(asr_kv_server_t *s, asr_kv_server_stats_t *st);

/* Stops the thread if running, closes every connection, takes everything
 * off the loop and frees s (from the loop's thread, for the caller's loop). */
void asr_kv_server_free(asr_kv_server_t *s);

#endif /* ASR_KV_SERVER_H */
