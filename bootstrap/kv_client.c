/*
 * kv_client.c -- the non-blocking KV client FSM (seed §4, kv_store_make_progress).
 *
 * One request = one connection = one frame out, one frame in, then an END
 * frame. Every state handler does at most one socket operation, so the
 * runtime's service thread can pump hundreds of requests without blocking on
 * any of them (seed §4 QUIRK: "the service thread never blocks on a TCP connect").
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asr_assert.h"
#include "asr_env.h"
#include "asr_err.h"
#include "asr_log.h"
#include "asr_rand.h"
#include "asr_sock.h"
#include "asr_time.h"
#include "kv_client.h"
#include "kv_frame.h"
#include "kv_keys.h"
#include "kv_secret.h"

#define BACKOFF_MIN_MS 1
#define BACKOFF_MAX_MS 64
/* A GET with retry asks the server to hold it this long for a missing key
 * (kv_frame.h: aux) before answering NOT_FOUND: the answer comes the moment
 * the key is set, and the request asks again about twice a second, not
 * every 1-64 ms. */
#define GET_WAIT_MS 500

struct asr_kv_req {
  asr_kv_req_state_t state;
  int fd;
  uint8_t op; /* ASR_KV_OP_GET / SET / LIST */
  uint8_t vtype;
  int retry;              /* re-send on NOT_FOUND */
  int result;             /* final ASR_E* once DONE/FAILED */
  int end_sent;           /* the CLOSING frame has been built */
  size_t sent;            /* bytes of out[] sent */
  size_t received;        /* bytes of in[] received */
  uint64_t deadline_ms;   /* 0 = none */
  uint64_t not_before_ms; /* backoff: no socket operation before this */
  uint64_t sent_ms;       /* when the request frame was last sent out */
  uint32_t wait_ms;       /* GET: how long it asked the server to hold it (0: not) */
  unsigned backoff_ms;
  unsigned retries;
  int start_errno_class; /* last retry reason (ASR_E*), for the deadline message */
  struct sockaddr_in addr;
  char server[32]; /* "ip:port" */
  asr_kv_get_cb cb;
  void *cb_arg;
  asr_kv_fd_cb fd_cb; /* told of every socket opened and closed (asr_kv_req_watch_fd) */
  void *fd_arg;
  uint8_t key[ASR_KV_KEY_MAX];
  size_t klen;
  uint8_t out[ASR_KV_FRAME_LEN]; /* the request frame, re-sent on retry */
  uint8_t in[ASR_KV_FRAME_LEN];  /* the response being received */
  char err[640];
};

static const char *const state_names[] = {"INIT",    "CONNECTING", "SENDING", "RECEIVING",
                                          "CLOSING", "DONE",       "FAILED"};

const char *asr_kv_req_state_name(asr_kv_req_state_t s) {
  return (unsigned)s < sizeof state_names / sizeof state_names[0] ? state_names[s] : "?";
}

asr_kv_req_state_t asr_kv_req_state(const asr_kv_req_t *r) { return r->state; }
const char *asr_kv_req_error(const asr_kv_req_t *r) { return r->err; }
unsigned asr_kv_req_retries(const asr_kv_req_t *r) { return r->retries; }

/* Every transition goes through here so it can be traced in one place. */
static void set_state(asr_kv_req_t *r, asr_kv_req_state_t s) {
  asr_trace("kvs", "req %p %s %s -> %s", (void *)r, asr_kv_op_name(r->op), asr_kv_req_state_name(r->state),
            asr_kv_req_state_name(s));
  r->state = s;
}

static void close_fd(asr_kv_req_t *r) {
  if (r->fd >= 0) {
    if (r->fd_cb) r->fd_cb(r->fd_arg, r->fd, 0);
    close(r->fd);
  }
  r->fd = -1;
}

void asr_kv_req_watch_fd(asr_kv_req_t *r, asr_kv_fd_cb cb, void *arg) {
  if (!r) return;
  r->fd_cb = cb;
  r->fd_arg = arg;
  if (cb && r->fd >= 0) cb(arg, r->fd, 1);
}

static void fail(asr_kv_req_t *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(asr_kv_req_t *r, int code, const char *fmt, ...) {
  char key[200];
  char what[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  asr_kv_key_render(r->key, r->klen, key, sizeof key);
  snprintf(r->err, sizeof r->err, "KV %s of key '%s' on server %s: %s", asr_kv_op_name(r->op), key, r->server,
           what);
  r->result = code;
  close_fd(r);
  set_state(r, ASR_KV_REQ_FAILED);
}

/* Schedules the next attempt after a jittered, doubling backoff. */
static void backoff(asr_kv_req_t *r, int reason) {
  unsigned d = r->backoff_ms ? r->backoff_ms : BACKOFF_MIN_MS;
  unsigned jitter = (unsigned)(asr_rand_u64() % (d / 2 + 1));
  r->not_before_ms = asr_time_ms() + d / 2 + jitter + (d == 1 ? 0 : 0);
  r->backoff_ms = d * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : d * 2;
  r->retries++;
  r->start_errno_class = reason;
}

/* A transport-level hiccup that a retry can cure: refused, reset, closed, or
 * local resource exhaustion (ephemeral ports, backlog). */
static int retryable(int asr_code) {
  return asr_code == ASR_ECONNREFUSED || asr_code == ASR_ECONNRESET || asr_code == ASR_EAGAIN ||
         asr_code == ASR_ETIMEDOUT || asr_code == ASR_ENOSPACE || asr_code == ASR_EIO;
}

static void retry_from_init(asr_kv_req_t *r, int reason) {
  close_fd(r);
  backoff(r, reason);
  set_state(r, ASR_KV_REQ_INIT);
}

/* Loaded once per process. Not a lazy flag: a thread that saw the flag set
 * could still read the bytes before another thread's writes land (a data race,
 * and in practice a wrong secret), so pthread_once orders them. A bad
 * ASR_JOB_SECRET is kept as its error: every request that would send the
 * default secret fails with it (the server would only have refused them). */
static uint8_t default_secret_bytes[ASR_KV_SECRET_LEN];
static int default_secret_rc;
static char default_secret_err[200];
static pthread_once_t default_secret_once = PTHREAD_ONCE_INIT;

static void default_secret_load(void) {
  default_secret_rc =
      asr_kv_secret_from_env(default_secret_bytes, default_secret_err, sizeof default_secret_err);
}

static const uint8_t *default_secret(void) {
  pthread_once(&default_secret_once, default_secret_load);
  return default_secret_bytes;
}

/* What a request takes from the environment when opts do not say: its
 * deadline (ASR_KV_TIMEOUT_MS) and the secret (ASR_JOB_SECRET). Returns 0
 * with *timeout_ms, or ASR_ECONFIG with errbuf naming the variable. */
static int env_settings(const asr_kv_opts_t *opts, int *timeout_ms, char *errbuf, size_t errlen) {
  if (!(opts && opts->secret)) {
    default_secret();
    if (default_secret_rc) {
      if (errbuf) snprintf(errbuf, errlen, "%s", default_secret_err);
      return default_secret_rc;
    }
  }
  if (opts && opts->timeout_ms) {
    *timeout_ms = opts->timeout_ms;
    return 0;
  }
  long ms;
  int rc = asr_env_int(ASR_ENV_KV_TIMEOUT_MS, &ms, errbuf, errlen);
  if (rc == 0) *timeout_ms = (int)ms; /* at most 86399999: the row's range */
  return rc;
}

int asr_kv_defaults(const asr_kv_opts_t *opts, const uint8_t **secret, int *timeout_ms, char *errbuf,
                    size_t errlen) {
  int rc = env_settings(opts, timeout_ms, errbuf, errlen);
  if (rc == 0 && secret) *secret = opts && opts->secret ? opts->secret : default_secret();
  return rc;
}

static int req_new(const char *ip, uint16_t port, uint8_t op, const void *key, size_t klen,
                   const asr_kv_opts_t *opts, asr_kv_req_t **out) {
  if (!ip || !out || (klen && !key) || klen > ASR_KV_KEY_MAX)
    return klen > ASR_KV_KEY_MAX ? ASR_ETOOBIG : ASR_EINVAL;
  if (port == 0) return ASR_EINVAL;
  asr_kv_req_t *r = calloc(1, sizeof *r);
  if (!r) return ASR_ENOMEM;
  if (asr_sock_parse_ipv4(ip, port, &r->addr) != 0) {
    free(r);
    return ASR_EINVAL;
  }
  r->fd = -1;
  r->op = op;
  r->state = ASR_KV_REQ_INIT;
  snprintf(r->server, sizeof r->server, "%s:%u", ip, (unsigned)port);
  if (klen) memcpy(r->key, key, klen);
  r->klen = klen;
  int tmo;
  int rc = env_settings(opts, &tmo, NULL, 0);
  if (rc) {
    free(r);
    return rc;
  }
  r->deadline_ms = tmo > 0 ? asr_time_ms() + (uint64_t)tmo : 0;
  *out = r;
  return 0;
}

static int encode_request(asr_kv_req_t *r, const void *val, size_t vlen, uint32_t aux,
                          const asr_kv_opts_t *opts) {
  asr_kv_msg_t m = {.opcode = r->op,
                    .vtype = r->vtype,
                    .aux = aux,
                    .key_len = (uint16_t)r->klen,
                    .val_len = (uint16_t)vlen,
                    .secret = opts && opts->secret ? opts->secret : default_secret(),
                    .key = r->key,
                    .val = val};
  return asr_kv_frame_encode(r->out, &m);
}

int asr_kv_get_start(const char *ip, uint16_t port, const void *key, size_t klen, int vtype, int retry,
                     asr_kv_get_cb cb, void *arg, const asr_kv_opts_t *opts, asr_kv_req_t **out) {
  if (klen == 0 || (vtype != ASR_KV_VTYPE_TEXT && vtype != ASR_KV_VTYPE_BINARY)) return ASR_EINVAL;
  asr_kv_req_t *r;
  int rc = req_new(ip, port, ASR_KV_OP_GET, key, klen, opts, &r);
  if (rc) return rc;
  r->vtype = (uint8_t)vtype;
  r->retry = retry != 0;
  r->cb = cb;
  r->cb_arg = arg;
  /* at most half the request's own time, so that the server's NOT_FOUND,
   * and the reason a deadline names, come before the deadline */
  uint64_t now = asr_time_ms();
  uint64_t half = !r->deadline_ms ? GET_WAIT_MS : r->deadline_ms > now ? (r->deadline_ms - now) / 2 : 0;
  r->wait_ms = !r->retry ? 0 : half < GET_WAIT_MS ? (uint32_t)half : GET_WAIT_MS;
  rc = encode_request(r, NULL, 0, r->wait_ms, opts);
  if (rc) {
    free(r);
    return rc;
  }
  *out = r;
  return 0;
}

int asr_kv_set_start(const char *ip, uint16_t port, const void *key, size_t klen, const void *val,
                     size_t vlen, int vtype, const asr_kv_opts_t *opts, asr_kv_req_t **out) {
  if (klen == 0 || (vlen && !val) || (vtype != ASR_KV_VTYPE_TEXT && vtype != ASR_KV_VTYPE_BINARY))
    return ASR_EINVAL;
  if (vlen > ASR_KV_VAL_MAX) return ASR_ETOOBIG;
  asr_kv_req_t *r;
  int rc = req_new(ip, port, ASR_KV_OP_SET, key, klen, opts, &r);
  if (rc) return rc;
  r->vtype = (uint8_t)vtype;
  rc = encode_request(r, val, vlen, 0, opts);
  if (rc) {
    free(r);
    return rc;
  }
  *out = r;
  return 0;
}

void asr_kv_req_free(asr_kv_req_t *r) {
  if (!r) return;
  close_fd(r);
  free(r);
}

/* INIT: open the socket and start the connect (one syscall pair). */
static void step_init(asr_kv_req_t *r, int *made) {
  int in_progress;
  int fd = asr_sock_connect_start(&r->addr, &in_progress);
  if (fd < 0) {
    if (retryable(fd) || fd == ASR_EUNREACH) {
      retry_from_init(r, fd);
      return;
    }
    fail(r, fd, "cannot connect: %s", asr_strerror(fd));
    return;
  }
  r->fd = fd;
  if (r->fd_cb) r->fd_cb(r->fd_arg, fd, 1);
  r->sent = 0;
  r->received = 0;
  *made = 1;
  set_state(r, in_progress ? ASR_KV_REQ_CONNECTING : ASR_KV_REQ_SENDING);
}

/* CONNECTING: poll(POLLOUT, 0) then SO_ERROR, as in the seed. */
static void step_connecting(asr_kv_req_t *r, int *made) {
  struct pollfd p = {.fd = r->fd, .events = POLLOUT};
  int n = poll(&p, 1, 0);
  if (n == 0) return;
  if (n < 0) {
    if (errno != EINTR) retry_from_init(r, asr_err_from_errno(errno));
    return;
  }
  int rc = asr_sock_connect_result(r->fd);
  if (rc == 0) {
    *made = 1;
    set_state(r, ASR_KV_REQ_SENDING);
    return;
  }
  if (retryable(rc) || rc == ASR_EUNREACH) {
    retry_from_init(r, rc); /* ECONNREFUSED: the server is not up yet */
    return;
  }
  fail(r, rc, "connect failed: %s", asr_strerror(rc));
}

/* SENDING / CLOSING: push the rest of out[] with one send(). Returns 1 when
 * the whole frame is out, 0 when some is left for the next call, or a
 * negative ASR_E* when the socket failed. */
static int send_some(asr_kv_req_t *r, int *made) {
  ssize_t n = send(r->fd, r->out + r->sent, ASR_KV_FRAME_LEN - r->sent, MSG_NOSIGNAL);
  if (n > 0) {
    r->sent += (size_t)n;
    *made = 1;
    return r->sent == ASR_KV_FRAME_LEN;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  return n < 0 ? asr_err_from_errno(errno) : ASR_ECONNRESET;
}

static void step_sending(asr_kv_req_t *r, int *made) {
  int rc = send_some(r, made);
  if (rc == 1) {
    r->received = 0;
    r->sent_ms = asr_time_ms();
    set_state(r, ASR_KV_REQ_RECEIVING);
  } else if (rc < 0) {
    /* The server dropped us (restart, overload, idle timeout while we backed
     * off): the request is idempotent, start over. */
    retry_from_init(r, ASR_ECONNRESET);
  }
}

static void begin_closing(asr_kv_req_t *r) {
  asr_kv_msg_t m = {.opcode = ASR_KV_OP_END, .secret = NULL};
  uint8_t secret[ASR_KV_SECRET_LEN];
  memcpy(secret, r->out + ASR_KV_OFF_SECRET, sizeof secret);
  m.secret = secret;
  asr_kv_frame_encode(r->out, &m);
  r->sent = 0;
  set_state(r, ASR_KV_REQ_CLOSING);
}

/* Handles one complete response frame in in[]. */
static void handle_response(asr_kv_req_t *r) {
  asr_kv_msg_t m;
  const char *why = NULL;
  if (asr_kv_frame_decode(r->in, &m, &why) != 0) {
    fail(r, ASR_EPROTO, "bad response frame: %s", why);
    return;
  }
  switch (m.opcode) {
    case ASR_KV_OP_SET_ACK:
      if (r->op != ASR_KV_OP_SET) break;
      r->result = 0;
      begin_closing(r);
      return;
    case ASR_KV_OP_GET_TEXT:
    case ASR_KV_OP_GET_BINARY:
      if (r->op != ASR_KV_OP_GET) break;
      /* The seed's callbacks copy the value into the comm before the connect
       * machine sees done; run it now, exactly once. */
      if (r->cb) r->cb(r->cb_arg, m.val, m.val_len);
      r->result = 0;
      begin_closing(r);
      return;
    case ASR_KV_OP_NOT_FOUND:
      if (r->op != ASR_KV_OP_GET) break;
      if (r->retry) {
        /* Re-send on the same connection: at once when the server held the
         * GET (most of the wait asked for has passed), else after a backoff
         * (a server that answers at once). */
        if (r->wait_ms && asr_time_ms() - r->sent_ms >= r->wait_ms / 2) {
          r->backoff_ms = 0;
          r->not_before_ms = 0;
          r->retries++;
          r->start_errno_class = ASR_ENOTFOUND;
        } else {
          backoff(r, ASR_ENOTFOUND);
        }
        r->sent = 0;
        set_state(r, ASR_KV_REQ_SENDING);
        return;
      }
      r->result = ASR_ENOTFOUND;
      snprintf(r->err, sizeof r->err, "key not found");
      begin_closing(r);
      return;
    case ASR_KV_OP_ERROR: {
      char msg[ASR_KV_VAL_MAX + 1];
      size_t n = m.val_len;
      memcpy(msg, m.val, n);
      msg[n] = '\0';
      int code = strstr(msg, "secret") ? ASR_EAUTH : strstr(msg, "full") ? ASR_ENOSPACE : ASR_ESERVER;
      fail(r, code, "server error: %s", n ? msg : "(no reason given)");
      return;
    }
    default: break;
  }
  fail(r, ASR_EPROTO, "unexpected response %s to %s", asr_kv_op_name(m.opcode), asr_kv_op_name(r->op));
}

static void step_receiving(asr_kv_req_t *r, int *made) {
  ssize_t n = recv(r->fd, r->in + r->received, ASR_KV_FRAME_LEN - r->received, 0);
  if (n > 0) {
    r->received += (size_t)n;
    *made = 1;
    if (r->received == ASR_KV_FRAME_LEN) handle_response(r);
    return;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  /* Closed by the server before a whole response: it may have restarted or
   * shed load. Retry (the request is idempotent) until the deadline says no. */
  retry_from_init(r, ASR_ECONNRESET);
}

static void step_closing(asr_kv_req_t *r, int *made) {
  int rc = send_some(r, made);
  if (rc == 0) return;
  /* END sent, or the server already closed: the operation itself is complete. */
  close_fd(r);
  *made = 1;
  set_state(r, r->result == 0 || r->result == ASR_ENOTFOUND ? ASR_KV_REQ_DONE : ASR_KV_REQ_FAILED);
}

const char *asr_kv_reason_text(int code) {
  switch (code) {
    case ASR_ECONNREFUSED: return "connection refused: is the KV server running on that host and port?";
    case ASR_ENOTFOUND: return "key not found: nobody has published it yet";
    case ASR_ECONNRESET: return "the server closed the connection";
    case 0: return "no answer yet";
    default: return asr_strerror(code);
  }
}

int asr_kv_progress(asr_kv_req_t *r, int *done, int *made_progress) {
  int made = 0;
  if (!r || !done) return ASR_EINVAL;
  if (r->state == ASR_KV_REQ_DONE || r->state == ASR_KV_REQ_FAILED) {
    *done = 1;
    if (made_progress) *made_progress = 0;
    return r->result;
  }
  uint64_t now = asr_time_ms();
  if (r->deadline_ms && now >= r->deadline_ms) {
    if (r->state == ASR_KV_REQ_CLOSING) {
      /* The answer is in (a GET's callback already ran) and only the courtesy
       * END frame is left: finish with the operation's result, not a failure. */
      close_fd(r);
      set_state(r, r->result == 0 || r->result == ASR_ENOTFOUND ? ASR_KV_REQ_DONE : ASR_KV_REQ_FAILED);
    } else {
      fail(r, ASR_ETIMEDOUT, "timed out after %u retries; last: %s", r->retries,
           asr_kv_reason_text(r->start_errno_class));
    }
    *done = 1;
    if (made_progress) *made_progress = 1;
    return r->result;
  }
  if (now < r->not_before_ms && (r->state == ASR_KV_REQ_INIT || r->state == ASR_KV_REQ_SENDING)) {
    *done = 0;
    if (made_progress) *made_progress = 0;
    return 0;
  }
  switch (r->state) {
    case ASR_KV_REQ_INIT: step_init(r, &made); break;
    case ASR_KV_REQ_CONNECTING: step_connecting(r, &made); break;
    case ASR_KV_REQ_SENDING: step_sending(r, &made); break;
    case ASR_KV_REQ_RECEIVING: step_receiving(r, &made); break;
    case ASR_KV_REQ_CLOSING: step_closing(r, &made); break;
    default:
      /* DONE and FAILED returned above; nothing else is ever stored. A
       * release build fails the request rather than stop the process. */
      assert(0 && "a KV request in no state of its machine");
      fail(r, ASR_ESTATE, "corrupt request state %d", (int)r->state);
      break;
  }
  if (made_progress) *made_progress = made;
  *done = r->state == ASR_KV_REQ_DONE || r->state == ASR_KV_REQ_FAILED;
  return *done ? r->result : 0;
}

void asr_kv_req_wait(asr_kv_req_t *r, int max_ms) {
  if (!r || max_ms <= 0) return;
  uint64_t now = asr_time_ms();
  short ev = 0;
  switch (r->state) {
    case ASR_KV_REQ_CONNECTING:
    case ASR_KV_REQ_CLOSING: ev = POLLOUT; break;
    case ASR_KV_REQ_SENDING: ev = now >= r->not_before_ms ? POLLOUT : 0; break;
    case ASR_KV_REQ_RECEIVING: ev = POLLIN; break;
    default: break;
  }
  int wait = max_ms;
  if (r->deadline_ms && r->deadline_ms > now && r->deadline_ms - now < (uint64_t)wait)
    wait = (int)(r->deadline_ms - now);
  if (r->not_before_ms > now && r->not_before_ms - now < (uint64_t)wait) wait = (int)(r->not_before_ms - now);
  if (ev && r->fd >= 0) {
    struct pollfd p = {.fd = r->fd, .events = ev};
    (void)poll(&p, 1, wait);
  } else if (r->not_before_ms > now) {
    asr_sleep_ms((unsigned)wait);
  }
}

int asr_kv_req_pollfd(const asr_kv_req_t *r, struct pollfd *pfd) {
  return asr_kv_req_pollfd_at(r, asr_time_ms(), pfd);
}

int asr_kv_req_pollfd_at(const asr_kv_req_t *r, uint64_t now, struct pollfd *pfd) {
  pfd->fd = -1;
  pfd->events = 0;
  pfd->revents = 0;
  if (r->state == ASR_KV_REQ_DONE || r->state == ASR_KV_REQ_FAILED) return 0;
  int64_t due = -1;
  if (r->deadline_ms) due = r->deadline_ms > now ? (int64_t)(r->deadline_ms - now) : 0;
  if ((r->state == ASR_KV_REQ_INIT || r->state == ASR_KV_REQ_SENDING) && r->not_before_ms > now) {
    int64_t b = (int64_t)(r->not_before_ms - now);
    return (int)(due < 0 || b < due ? b : due); /* backoff: timer only */
  }
  switch (r->state) {
    case ASR_KV_REQ_CONNECTING:
    case ASR_KV_REQ_SENDING:
    case ASR_KV_REQ_CLOSING:
      pfd->fd = r->fd;
      pfd->events = POLLOUT;
      break;
    case ASR_KV_REQ_RECEIVING:
      pfd->fd = r->fd;
      pfd->events = POLLIN;
      break;
    default: return 0; /* INIT: ready now */
  }
  return due > INT32_MAX ? INT32_MAX : (int)due;
}

/* --- blocking wrappers ---------------------------------------------------- */

static int run_blocking(asr_kv_req_t *r, char *errbuf, size_t errlen) {
  int done = 0, made = 0, rc = 0;
  for (;;) {
    rc = asr_kv_progress(r, &done, &made);
    if (done) break;
    if (!made) asr_kv_req_wait(r, 100);
  }
  if (rc && errbuf) snprintf(errbuf, errlen, "%s", r->err);
  return rc;
}

int asr_kv_set(const char *ip, uint16_t port, const void *key, size_t klen, const void *val, size_t vlen,
               int vtype, const asr_kv_opts_t *opts, char *errbuf, size_t errlen) {
  asr_kv_req_t *r;
  int rc = asr_kv_set_start(ip, port, key, klen, val, vlen, vtype, opts, &r);
  if (rc) {
    char why[256];
    int tmo;
    if (rc != ASR_ECONFIG || env_settings(opts, &tmo, why, sizeof why) == 0)
      snprintf(why, sizeof why, "%s", asr_strerror(rc));
    if (errbuf) snprintf(errbuf, errlen, "bad SET request: %s", why);
    return rc;
  }
  rc = run_blocking(r, errbuf, errlen);
  asr_kv_req_free(r);
  return rc;
}

struct get_sink {
  uint8_t *buf;
  size_t cap;
  size_t len;
  int too_big;
};

static void get_copy(void *arg, const uint8_t *val, size_t len) {
  struct get_sink *s = arg;
  s->len = len;
  if (len > s->cap) {
    s->too_big = 1;
    return;
  }
  memcpy(s->buf, val, len);
}

int asr_kv_get(const char *ip, uint16_t port, const void *key, size_t klen, int retry, void *val, size_t cap,
               size_t *vlen, const asr_kv_opts_t *opts, char *errbuf, size_t errlen) {
  struct get_sink sink = {.buf = val, .cap = cap};
  asr_kv_req_t *r;
  int rc = asr_kv_get_start(ip, port, key, klen, ASR_KV_VTYPE_BINARY, retry, get_copy, &sink, opts, &r);
  if (rc) {
    char why[256];
    int tmo;
    if (rc != ASR_ECONFIG || env_settings(opts, &tmo, why, sizeof why) == 0)
      snprintf(why, sizeof why, "%s", asr_strerror(rc));
    if (errbuf) snprintf(errbuf, errlen, "bad GET request: %s", why);
    return rc;
  }
  rc = run_blocking(r, errbuf, errlen);
  asr_kv_req_free(r);
  if (rc == 0 && sink.too_big) {
    if (errbuf)
      snprintf(errbuf, errlen, "value of %zu bytes does not fit the %zu-byte buffer", sink.len, cap);
    return ASR_ETOOBIG;
  }
  if (rc == 0 && vlen) *vlen = sink.len;
  return rc;
}

int asr_kv_list(const char *ip, uint16_t port, asr_kv_list_cb cb, void *arg, const asr_kv_opts_t *opts,
                char *errbuf, size_t errlen) {
  struct sockaddr_in addr;
  if (!ip || asr_sock_parse_ipv4(ip, port, &addr) != 0 || port == 0) {
    if (errbuf) snprintf(errbuf, errlen, "'%s:%u' is not an IPv4 address and port", ip ? ip : "", port);
    return ASR_EINVAL;
  }
  int tmo, rc = env_settings(opts, &tmo, errbuf, errlen);
  if (rc) return rc;
  uint64_t deadline = asr_time_ms() + (uint64_t)(tmo > 0 ? tmo : 86400000);
  int in_progress;
  int fd = asr_sock_connect_start(&addr, &in_progress);
  if (fd < 0) {
    if (errbuf) snprintf(errbuf, errlen, "cannot connect to %s:%u: %s", ip, port, asr_strerror(fd));
    return fd;
  }
  if (in_progress) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int n = poll(&p, 1, (int)(deadline - asr_time_ms()));
    rc = n > 0 ? asr_sock_connect_result(fd) : ASR_ETIMEDOUT;
    if (rc) {
      if (errbuf) snprintf(errbuf, errlen, "cannot connect to %s:%u: %s", ip, port, asr_strerror(rc));
      close(fd);
      return rc;
    }
  }
  const uint8_t *secret = opts && opts->secret ? opts->secret : default_secret();
  uint8_t frame[ASR_KV_FRAME_LEN];
  for (uint32_t idx = 0;; idx++) {
    asr_kv_msg_t q = {.opcode = ASR_KV_OP_LIST, .aux = idx, .secret = secret};
    asr_kv_frame_encode(frame, &q);
    rc = asr_sock_write_all(fd, frame, sizeof frame, deadline);
    if (rc == 0) rc = asr_sock_read_all(fd, frame, sizeof frame, deadline);
    if (rc) {
      if (errbuf) snprintf(errbuf, errlen, "LIST on %s:%u: %s", ip, port, asr_strerror(rc));
      break;
    }
    asr_kv_msg_t m;
    const char *why;
    if (asr_kv_frame_decode(frame, &m, &why) != 0) {
      if (errbuf) snprintf(errbuf, errlen, "LIST on %s:%u: bad response: %s", ip, port, why);
      rc = ASR_EPROTO;
      break;
    }
    if (m.opcode == ASR_KV_OP_NOT_FOUND) break; /* past the last entry */
    if (m.opcode == ASR_KV_OP_ERROR) {
      if (errbuf)
        snprintf(errbuf, errlen, "LIST on %s:%u: server error: %.*s", ip, port, (int)m.val_len,
                 (const char *)m.val);
      rc = ASR_ESERVER;
      break;
    }
    if (m.opcode != ASR_KV_OP_LIST_ENTRY) {
      if (errbuf)
        snprintf(errbuf, errlen, "LIST on %s:%u: unexpected %s", ip, port, asr_kv_op_name(m.opcode));
      rc = ASR_EPROTO;
      break;
    }
    if (cb) cb(arg, idx, m.aux, m.key, m.key_len, m.val, m.val_len, m.vtype);
  }
  asr_kv_msg_t end = {.opcode = ASR_KV_OP_END, .secret = secret};
  asr_kv_frame_encode(frame, &end);
  (void)send(fd, frame, sizeof frame, MSG_NOSIGNAL | MSG_DONTWAIT);
  close(fd);
  return rc;
}

int asr_kv_seed_hostname(const char *ip, uint16_t port, const char *hostname, const asr_kv_opts_t *opts,
                         char *errbuf, size_t errlen) {
  uint8_t val[ASR_KV_HOSTNAME_LEN];
  size_t hl = hostname ? strlen(hostname) : 0;
  if (hl == 0 || hl >= ASR_KV_HOSTNAME_LEN) {
    if (errbuf) snprintf(errbuf, errlen, "host name must be 1..127 bytes");
    return ASR_EINVAL;
  }
  memset(val, 0, sizeof val);
  memcpy(val, hostname, hl);
  return asr_kv_set(ip, port, ASR_KV_HOSTNAME_KEY, ASR_KV_HOSTNAME_KEY_LEN, val, sizeof val,
                    ASR_KV_VTYPE_TEXT, opts, errbuf, errlen);
}
