/*
 * kv_conn.h -- the KV client (doc/design.md, "The KV store"): the requests
 * of the seed's client (seed §4, kv_store_make_progress: a GET with or
 * without retry, a SET; beyond the seed, a LIST) over persistent,
 * pipelined connections, on the caller's loop; and blocking calls built on
 * them, for tools and a process's one-off requests (below). The server,
 * kv_server.h, answers these and the seed's own one-request-at-a-time
 * connections alike (kv_frame.h).
 *
 * A pool belongs to one thread and runs on its asr_loop (the runtime's
 * service thread: one pool per LNC). It keeps at most one connection per KV
 * server (ip:port) and multiplexes every request started on it over that
 * connection: each frame carries the ID flag and a request id, many go out
 * per send() and come in per recv(), and the server answers them in any
 * order. What a request promises is what the seed's client does, with a
 * deadline beyond it:
 *
 *  - a GET's value callback runs exactly once, when its answer is parsed
 *    and before the request is reported done; a request that fails never
 *    calls it;
 *  - a GET with retry asks the server to hold it until its key is set (at
 *    most GET_WAIT_MS; kv_frame.h: aux) and asks again on NOT_FOUND, at
 *    once after a held wait, after a backoff (1 ms doubling to 64 ms) after
 *    an immediate one;
 *  - every request has its own deadline (opts, else ASR_KV_TIMEOUT_MS): past
 *    it the request fails with ASR_ETIMEDOUT and a message naming the key,
 *    the server and the last reason, whatever its connection does.
 *
 * Faults. A connection that is refused, breaks, or is closed by the server
 * (a restart, an elected server's process exiting) is opened again after a
 * backoff of its own (1 ms doubling to 64 ms, reset by the first answer),
 * and every request that was in flight on it is sent again on the new one,
 * in its original order. An answer is matched to its request by id, and ids
 * are never reused within a pool, so an answer to a request that already
 * ended (timed out, was freed, or went out again) is dropped: no request is
 * answered twice, and none is lost while its deadline lasts. (The keys a
 * restarted server lost are published again by their owners: kv_host.c.)
 *
 * Bounds. At most ASR_KV_CONN_MAX_UNSENT frames wait in a connection's send
 * buffer; further requests wait in its queue (no memory beyond the request
 * itself). A connection with nothing in flight or queued is closed
 * (with an END frame) after idle_ms, so LNCs x hosts sockets do not pile up.
 *
 * The seed's form (opts.seed_form). A pool may instead speak the form of
 * the seed's client (kv_frame.h): frames without the ID flag, and one
 * request on the wire per connection at a time, answered before the next
 * goes out (the others wait in the queue; a held GET holds the connection).
 * Its frames then have room for a value of ASR_KV_VAL_MAX (964) bytes, where
 * a frame with an id has ASR_KV_VAL_MAX_ID (960): for a client whose values
 * may take the whole field. Everything above holds as well, except that a
 * request in flight that ends unanswered (its deadline, or freed) closes its
 * connection, since its answer, if it came, would carry no id to tell it
 * from the next request's.
 *
 * Ownership: the caller owns each asr_kv_call_t it starts and frees it with
 * asr_kv_call_free, done or not (a pending one is cancelled: no callback
 * runs after). asr_kv_pool_free requires every op to be freed first.
 */
#ifndef ASR_KV_CONN_H
#define ASR_KV_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "asr_loop.h"

#define ASR_KV_CONN_MAX_UNSENT 256 /* frames in a connection's send buffer */

typedef struct asr_kv_pool asr_kv_pool_t;
typedef struct asr_kv_call asr_kv_call_t;

/* Called once with the value of a successful GET; val is valid during the
 * call. */
typedef void (*asr_kv_get_cb)(void *arg, const uint8_t *val, size_t len);

/* Called once when op ends (done or failed), after a GET's value callback.
 * It may free op. */
typedef void (*asr_kv_call_done_cb)(void *arg, asr_kv_call_t *op);

typedef struct {
  const uint8_t *secret; /* 32 bytes; NULL = this process's default (ASR_JOB_SECRET) */
  int timeout_ms;        /* each request's deadline; 0 = ASR_KV_TIMEOUT_MS; <0 = none */
  int idle_ms;           /* close an idle connection after this; 0 = ASR_KV_IDLE_MS */
  int seed_form;         /* 1: speak the seed's form (above), one request at a time without ids */
} asr_kv_pool_opts_t;

typedef struct {
  unsigned open;             /* connections open (or opening) now */
  unsigned long connects;    /* connections opened (attempts that got through) */
  unsigned long breaks;      /* connections lost with requests in flight or queued */
  unsigned long backoff_ms;  /* the waits chosen after those breaks, in total (jittered) */
  unsigned long idle_closes; /* connections closed for being idle */
  unsigned long reissued;    /* requests sent again on a new connection */
  unsigned long stale;       /* answers to no request in flight (dropped) */
  unsigned long frames_out, frames_in;
  unsigned long sends, recvs; /* system calls that moved bytes */
} asr_kv_pool_stats_t;

/* Makes a pool on loop (which must be run by the calling thread, the only
 * one that may use the pool). errbuf gets the reason for ASR_ECONFIG (a bad
 * ASR_JOB_SECRET, ASR_KV_TIMEOUT_MS or ASR_KV_IDLE_MS). */
int asr_kv_pool_new(asr_loop_t *loop, const asr_kv_pool_opts_t *opts, asr_kv_pool_t **out, char *errbuf,
                    size_t errlen);

/* Closes every connection and frees p. Every op must have been freed. */
void asr_kv_pool_free(asr_kv_pool_t *p);

/* Starts a GET of key (klen bytes, binary) from ip:port; vtype picks the
 * answer's kind (ASR_KV_VTYPE_TEXT/BINARY). With retry, NOT_FOUND is asked
 * again until the deadline; without it the request ends with ASR_ENOTFOUND.
 * The frame goes out from the loop (with the others of this tick, in one
 * send). */
int asr_kv_pool_get(asr_kv_pool_t *p, const char *ip, uint16_t port, const void *key, size_t klen, int vtype,
                    int retry, asr_kv_get_cb cb, void *cb_arg, asr_kv_call_done_cb done, void *done_arg,
                    asr_kv_call_t **out);

/* Starts a SET of key -> val (vlen <= ASR_KV_VAL_MAX_ID; ASR_KV_VAL_MAX in
 * the seed's form). */
int asr_kv_pool_set(asr_kv_pool_t *p, const char *ip, uint16_t port, const void *key, size_t klen,
                    const void *val, size_t vlen, int vtype, asr_kv_call_done_cb done, void *done_arg,
                    asr_kv_call_t **out);

/* Called once with the entry a LIST found: the server's key count, and
 * the entry's key, value and value type; the pointers are valid during the
 * call. */
typedef void (*asr_kv_entry_cb)(void *arg, uint32_t total, const uint8_t *key, size_t klen,
                                const uint8_t *val, size_t vlen, int vtype);

/* Starts a DEL of key on ip:port (kv_frame.h: beyond the seed, the keys of
 * a process that is gone). It ends with 0 when the server held the key,
 * ASR_ENOTFOUND when it did not. */
int asr_kv_pool_del(asr_kv_pool_t *p, const char *ip, uint16_t port, const void *key, size_t klen,
                    asr_kv_call_done_cb done, void *done_arg, asr_kv_call_t **out);

/* Starts a LIST of entry `index` (insertion order) on ip:port (kv_frame.h:
 * beyond the seed, for `asrkv dump`). It ends with ASR_ENOTFOUND when
 * index is past the last entry. */
int asr_kv_pool_list(asr_kv_pool_t *p, const char *ip, uint16_t port, uint32_t index, asr_kv_entry_cb cb,
                     void *cb_arg, asr_kv_call_done_cb done, void *done_arg, asr_kv_call_t **out);

/* Whether op ended; *rc gets its result (0, ASR_ENOTFOUND for a GET
 * without retry or a LIST past the end, or the failure's code) once it
 * has. */
int asr_kv_call_done(const asr_kv_call_t *op, int *rc);

/* One line saying why op failed ("" while it has not). */
const char *asr_kv_call_error(const asr_kv_call_t *op);

/* How many times op was sent again (NOT_FOUND, a lost connection). */
unsigned asr_kv_call_retries(const asr_kv_call_t *op);

/* Cancels op if pending and frees it. NULL is ignored. */
void asr_kv_call_free(asr_kv_call_t *op);

void asr_kv_pool_stats(const asr_kv_pool_t *p, asr_kv_pool_stats_t *st);

/* How many of p's requests are pending (started, not ended, not freed). */
unsigned asr_kv_pool_pending(const asr_kv_pool_t *p);

/* --- Blocking calls -----------------------------------------------------------
 *
 * For tools, tests and a process's one-off requests (asrkv; seeding
 * "hostname", runtime/kv_host.c). Each call makes a loop and a pool of its
 * own from opts (NULL: every default; idle_ms is not used), runs its
 * request to its end and frees both: it opens one connection, and closes
 * it with END. With opts->seed_form it speaks the seed's form on it, as
 * asrkv does. Each returns 0 or the request's ASR_E* code, errbuf (when
 * given) holding a one-line reason: the request's own (asr_kv_call_error),
 * or what was wrong with the arguments or the environment. Any thread. */

/* SETs key -> val and waits for the server's acknowledgement. */
int asr_kv_set(const char *ip, uint16_t port, const void *key, size_t klen, const void *val, size_t vlen,
               int vtype, const asr_kv_pool_opts_t *opts, char *errbuf, size_t errlen);

/* GETs key (binary) and copies its value into val (cap bytes), its length
 * into *vlen. Without retry a missing key is ASR_ENOTFOUND; a value longer
 * than cap is ASR_ETOOBIG. *vlen is written only on success. */
int asr_kv_get(const char *ip, uint16_t port, const void *key, size_t klen, int retry, void *val, size_t cap,
               size_t *vlen, const asr_kv_pool_opts_t *opts, char *errbuf, size_t errlen);

/* DELs key and waits for the answer: 0, or ASR_ENOTFOUND when the server
 * did not hold it. */
int asr_kv_del(const char *ip, uint16_t port, const void *key, size_t klen, const asr_kv_pool_opts_t *opts,
               char *errbuf, size_t errlen);

/* LISTs every key on ip:port in insertion order, one request per entry on
 * the one connection, calling cb with each entry's index, the key count
 * and the entry (beyond the seed, for `asrkv dump`). */
typedef void (*asr_kv_list_cb)(void *arg, uint32_t index, uint32_t total, const uint8_t *key, size_t klen,
                               const uint8_t *val, size_t vlen, int vtype);
int asr_kv_list(const char *ip, uint16_t port, asr_kv_list_cb cb, void *arg, const asr_kv_pool_opts_t *opts,
                char *errbuf, size_t errlen);

/* Seeds "hostname" -> hostname (zero-padded to 128 bytes) on the KV server
 * at ip:port (seed §3: the RECV side learns the peer's host name from it)
 * and waits for the acknowledgement. */
int asr_kv_seed_hostname(const char *ip, uint16_t port, const char *hostname, const asr_kv_pool_opts_t *opts,
                         char *errbuf, size_t errlen);

#endif /* ASR_KV_CONN_H */
