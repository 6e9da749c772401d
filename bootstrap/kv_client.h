/*
 * kv_client.h -- the non-blocking rendezvous KV client (seed §4,
 * kv_store_make_progress @0xf2730), plus blocking wrappers for tools.
 *
 * A request is one GET, SET or LIST against one server, over one TCP
 * connection of its own. asr_kv_progress() performs at most one socket
 * operation per call and walks the state machine
 *
 *     INIT -> CONNECTING -> SENDING -> RECEIVING -> CLOSING -> DONE
 *                                                     \-> FAILED
 *
 * ECONNREFUSED (server not up yet) and a dropped connection go back to INIT;
 * NOT_FOUND re-sends the GET on the same connection when retry is set. Beyond
 * the seed, every retry waits a jittered exponential backoff (1 ms doubling to
 * 64 ms), and every request has a deadline: past it the request FAILS with
 * ASR_ETIMEDOUT and a message naming the key, the server and the last reason.
 * A GET's callback runs when the response is parsed, before done is reported;
 * if a request fails its callback never runs.
 */
#ifndef ASR_KV_CLIENT_H
#define ASR_KV_CLIENT_H

#include <stddef.h>
#include <stdint.h>

typedef struct asr_kv_req asr_kv_req_t;

/* Called once with the value of a successful GET; val is valid during the call. */
typedef void (*asr_kv_get_cb)(void *arg, const uint8_t *val, size_t len);

typedef struct {
  const uint8_t *secret; /* 32 bytes; NULL = this process's default (ASR_JOB_SECRET) */
  int timeout_ms;        /* deadline from start; 0 = default (ASR_KV_TIMEOUT_MS or 120000); <0 = none */
} asr_kv_opts_t;

typedef enum {
  ASR_KV_REQ_INIT = 0,
  ASR_KV_REQ_CONNECTING,
  ASR_KV_REQ_SENDING,
  ASR_KV_REQ_RECEIVING,
  ASR_KV_REQ_CLOSING,
  ASR_KV_REQ_DONE,
  ASR_KV_REQ_FAILED,
} asr_kv_req_state_t;

/* Starts a GET of key (klen bytes, binary) from ip:port. vtype picks the
 * response kind (ASR_KV_VTYPE_TEXT/BINARY). With retry, NOT_FOUND is asked
 * again until the deadline; without it the request ends with ASR_ENOTFOUND.
 * Nothing touches the network until the first asr_kv_progress(). The caller
 * owns *out and frees it with asr_kv_req_free(). */
int asr_kv_get_start(const char *ip, uint16_t port, const void *key, size_t klen, int vtype, int retry,
                     asr_kv_get_cb cb, void *arg, const asr_kv_opts_t *opts, asr_kv_req_t **out);

/* Starts a SET of key -> val (vlen <= ASR_KV_VAL_MAX). */
int asr_kv_set_start(const char *ip, uint16_t port, const void *key, size_t klen, const void *val,
                     size_t vlen, int vtype, const asr_kv_opts_t *opts, asr_kv_req_t **out);

/* Advances r by at most one socket operation. *done becomes 1 once the request
 * finished (successfully or not); *made_progress is 1 when the state moved or
 * bytes were transferred. Returns 0 while running or after success, and the
 * failure's ASR_E* code once done and failed (also on later calls). */
int asr_kv_progress(asr_kv_req_t *r, int *done, int *made_progress);

/* Blocks up to max_ms until progress is possible (socket ready or backoff
 * over). For loops that have nothing else to do. */
void asr_kv_req_wait(asr_kv_req_t *r, int max_ms);

/* For callers that drive many requests from one poll(): fills *pfd (fd,
 * events) with what r waits for and returns the ms until its timer (backoff or
 * deadline) is due, -1 when none. pfd->fd is -1 when r waits on its timer
 * only; a return of 0 means progress is possible now. */
struct pollfd;
int asr_kv_req_pollfd(const asr_kv_req_t *r, struct pollfd *pfd);
/* The same with the clock read by the caller (now_ms: asr_time_ms()), for a
 * caller that asks about many requests at once. */
int asr_kv_req_pollfd_at(const asr_kv_req_t *r, uint64_t now_ms, struct pollfd *pfd);

asr_kv_req_state_t asr_kv_req_state(const asr_kv_req_t *r);
const char *asr_kv_req_state_name(asr_kv_req_state_t s);

/* One line saying why the request failed ("" while it has not). */
const char *asr_kv_req_error(const asr_kv_req_t *r);

/* What a retry's last failure (an ASR_E* code, 0 for none yet) means to
 * the user, for a timed-out request's message; kv_conn.c words its
 * timeouts the same way. */
const char *asr_kv_reason_text(int code);

/* How many times the request went back to INIT or re-sent (for tests). */
unsigned asr_kv_req_retries(const asr_kv_req_t *r);

/* Called with the socket r has just opened (open = 1), and with the socket it
 * is about to close (open = 0): a request opens one per attempt, and closes it
 * when it ends, fails, retries from scratch or is freed. A caller that keeps
 * r's sockets in an epoll set drops each one here, before its close, so that
 * a socket number the kernel hands out again is never mistaken for it, and no
 * registration outlives the socket (a forked child's copy of it would keep
 * it alive in the set). */
typedef void (*asr_kv_fd_cb)(void *arg, int fd, int open);

/* Sets r's socket callback (NULL: none, the default). A socket r already has
 * is reported at once, as opened. */
void asr_kv_req_watch_fd(asr_kv_req_t *r, asr_kv_fd_cb cb, void *arg);

/* Closes the socket (if any) and frees r. NULL is ignored. */
void asr_kv_req_free(asr_kv_req_t *r);

/* What a request takes from opts or, where they do not say, from the
 * environment: the secret (ASR_JOB_SECRET; the pointer stays valid) and the
 * deadline in ms (ASR_KV_TIMEOUT_MS; <0 = none). Returns 0, or ASR_ECONFIG
 * with errbuf naming the variable. For kv_conn.c, which shares them. */
int asr_kv_defaults(const asr_kv_opts_t *opts, const uint8_t **secret, int *timeout_ms, char *errbuf,
                    size_t errlen);

/* --- Blocking wrappers (tools, tests, the launcher) --------------------- */

/* SET and wait. errbuf receives the failure reason. */
int asr_kv_set(const char *ip, uint16_t port, const void *key, size_t klen, const void *val, size_t vlen,
               int vtype, const asr_kv_opts_t *opts, char *errbuf, size_t errlen);

/* GET and wait; the value is copied into val (cap bytes) and *vlen set. A
 * value longer than cap fails with ASR_ETOOBIG. */
int asr_kv_get(const char *ip, uint16_t port, const void *key, size_t klen, int retry, void *val, size_t cap,
               size_t *vlen, const asr_kv_opts_t *opts, char *errbuf, size_t errlen);

/* Lists every key on ip:port in insertion order over one connection, calling
 * cb for each (beyond the seed: the LIST opcode of kv_frame.h). */
typedef void (*asr_kv_list_cb)(void *arg, uint32_t index, uint32_t total, const uint8_t *key, size_t klen,
                               const uint8_t *val, size_t vlen, int vtype);
int asr_kv_list(const char *ip, uint16_t port, asr_kv_list_cb cb, void *arg, const asr_kv_opts_t *opts,
                char *errbuf, size_t errlen);

/* Seeds "hostname" -> hostname (zero-padded to 128 bytes) on the KV server at
 * ip:port, blocking until acknowledged or the deadline in opts. errbuf gets a
 * one-line reason on failure. */
int asr_kv_seed_hostname(const char *ip, uint16_t port, const char *hostname, const asr_kv_opts_t *opts,
                         char *errbuf, size_t errlen);

#endif /* ASR_KV_CLIENT_H */
