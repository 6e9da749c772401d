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
 *
 * Pipelined connections (kv_frame.h: the ID flag; the client is kv_conn.h)
 * are read many frames per recv() and answered in any order, many frames per
 * send(): a GET waiting for its key is held on its own, and the requests
 * behind it on the same connection are answered at once. Two bounds keep
 * one such connection from growing the server: while max_unsent answers
 * wait to be sent on it, or max_held of its GETs are held, the server reads
 * nothing more from it (the kernel's buffers, then the client, wait); and a
 * connection whose answers wait while its client reads nothing for
 * stall_timeout_ms is closed. So one connection holds at most max_unsent +
 * max_held answer frames (each 1156 bytes) and max_held held GETs, and a
 * client that stops reading delays no one else (every socket is
 * non-blocking and each wakeup does a bounded amount for each connection).
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
  int max_unsent;        /* 0 = 256: a pipelined connection's unsent answers before it is not read */
  int max_held;          /* 0 = 1024: a pipelined connection's held GETs before it is not read */
} asr_kv_server_opts_t;

typedef struct {
  unsigned clients;       /* connections open now */
  unsigned long accepted; /* connections accepted so far */
  unsigned long frames;   /* request frames handled */
  unsigned long errors;   /* opcode-6 replies sent */
  unsigned long stalled;  /* clients dropped by a timeout */
  unsigned held;          /* GETs held now, waiting for their key (kv_frame.h: aux) */
  unsigned long woken;    /* held GETs answered by a SET of their key */
  unsigned pipelined;     /* pipelined connections open now (kv_frame.h: the ID flag) */
  unsigned unsent_peak;   /* the most answer frames one connection ever had waiting to be sent */
  unsigned held_peak;     /* the most GETs one pipelined connection ever had held */
  unsigned long paused;   /* times a pipelined connection was not read because of a bound */
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

/* Removes every handle key (kv_keys.h) of the SEND LNC send_lnc on host:
 * the handles receivers published for the comms of a process that is gone
 * (issue 50: a rank's dead incarnation), which that LNC's next process must
 * not take for its own. Thread-safe as asr_kv_server_put is. Returns how
 * many were removed. */
int asr_kv_server_del_sender(asr_kv_server_t *s, uint32_t send_lnc, const char *host);

void asr_kv_server_stats(asr_kv_server_t *s, asr_kv_server_stats_t *st);

/* Stops the thread if running, closes every connection, takes everything
 * off the loop and frees s (from the loop's thread, for the caller's loop). */
void asr_kv_server_free(asr_kv_server_t *s);

#endif /* ASR_KV_SERVER_H */
