/*
 * kv_conn.c -- the KV client: persistent, pipelined connections, and the
 * blocking calls built on them (see kv_conn.h).
 *
 * A connection is a small machine, one switch per event, every transition
 * through conn_set_state:
 *
 *     CLOSED -> CONNECTING -> UP -> CLOSED (broken, or idle)
 *
 * A request is in exactly one place: the connection's queue (QUEUED: not
 * yet framed), its in-flight table (SENT: framed with an id, in the send
 * buffer or on the wire; found by id when its answer comes), a backoff
 * (WAIT: no place but the pool's list of pending requests, which holds every
 * request not yet ended), or nowhere (DONE). A broken connection puts what
 * it had in flight back at the head of its queue, in id order, which is the
 * order they were first sent in; each gets a new id when framed again, so an
 * answer the old connection still had on its way (there is none: it is
 * gone) or a request's earlier incarnation can never complete it.
 *
 * A pool of the seed's form (kv_conn.h: seed_form) frames at most one
 * request at a time on a connection: the in-flight table then holds one,
 * seed_id names it, and the answer, which carries no id, is its.
 *
 * The pool has one timer, armed for the earliest moment anything needs the
 * loop without a socket event: a deadline, a backoff's end, a reconnect, an
 * idle close. Its callback looks at every pending request and connection
 * (O(pending): requests are few per service thread, and the timer fires on
 * deadlines and backoffs, not per frame).
 */
#include "config.h"

#include <errno.h>
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
#include "kv_conn.h"
#include "kv_frame.h"
#include "kv_keys.h"
#include "kv_secret.h"

#define BACKOFF_MIN_MS 1
#define BACKOFF_MAX_MS 64
/* A GET with retry asks the server to hold it this long for a missing key
 * (kv_frame.h: aux) before answering NOT_FOUND: the answer comes the moment
 * the key is set, and the request asks again about twice a second, not
 * every 1-64 ms as the seed's client would. */
#define GET_WAIT_MS 500
#define IN_CAP (56 * ASR_KV_FRAME_LEN)
#define ID_BUCKETS 256 /* power of two */

typedef enum { CONN_CLOSED = 0, CONN_CONNECTING, CONN_UP } conn_state_t;
typedef enum { OP_QUEUED = 0, OP_SENT, OP_WAIT, OP_DONE } op_state_t;

static const char *const conn_state_names[] = {"CLOSED", "CONNECTING", "UP"};

typedef struct pconn pconn_t;

struct asr_kv_call {
  asr_kv_pool_t *pool;
  pconn_t *conn;
  op_state_t state;
  uint8_t opcode, vtype;
  int retry;
  int result;
  uint32_t id;  /* OP_SENT: the id its frame carries (the seed's form: ours only, not on the wire) */
  uint32_t aux; /* the frame's aux: a GET's wait for its key, a LIST's index (kv_frame.h) */
  uint64_t deadline_ms, not_before_ms, sent_ms;
  unsigned backoff_ms, retries;
  int last_reason;
  asr_kv_get_cb cb;    /* a GET's value callback */
  asr_kv_entry_cb ecb; /* a LIST's entry callback */
  void *cb_arg;
  asr_kv_call_done_cb done;
  void *done_arg;
  struct asr_kv_call *lprev, *lnext; /* the pool's pending list (every state but DONE) */
  struct asr_kv_call *qprev, *qnext; /* OP_QUEUED: its connection's queue */
  struct asr_kv_call *hnext;         /* OP_SENT: its id bucket */
  uint16_t klen, vlen;
  char *err; /* why it failed (malloc'd when it does); NULL until then */
  uint8_t key[ASR_KV_KEY_MAX];
  uint8_t val[]; /* a SET's value (vlen bytes); a GET has none */
};

struct pconn {
  asr_kv_pool_t *pool;
  pconn_t *next;
  conn_state_t state;
  int fd;
  asr_loop_io_t io;
  struct sockaddr_in addr;
  char name[32];          /* "ip:port" */
  uint64_t not_before_ms; /* CLOSED: no connect before this (backoff) */
  unsigned backoff_ms;
  int last_err;           /* why the last connection ended or failed */
  uint64_t idle_since_ms; /* UP with nothing in flight or queued: since when (0: not idle) */
  asr_kv_call_t *qhead, *qtail;
  asr_kv_call_t *sent[ID_BUCKETS];
  unsigned nsent, nqueued;
  uint32_t seed_id; /* the seed's form: the id of the one request in flight */
  uint8_t *out;     /* framed requests (out_cap bytes), out_pos of out_len sent */
  size_t out_cap, out_len, out_pos;
  uint8_t *in; /* answers read (in_cap bytes, after out in one allocation), in_len not yet handled */
  size_t in_cap, in_len;
};

struct asr_kv_pool {
  asr_loop_t *loop;
  uint8_t secret[ASR_KV_SECRET_LEN];
  int timeout_ms, idle_ms;
  int seed_form; /* kv_conn.h: one request at a time on a connection, frames without ids */
  uint32_t next_id;
  pconn_t *conns;
  asr_kv_call_t *pending; /* every op not DONE */
  unsigned npending;
  asr_loop_timer_t timer;
  asr_kv_pool_stats_t st;
};

static void conn_set_state(pconn_t *c, conn_state_t s) {
  asr_trace("kvs", "conn %s %s -> %s", c->name, conn_state_names[c->state], conn_state_names[s]);
  c->state = s;
}

/* --- the timer ---------------------------------------------------------------- */

static void on_timer(asr_loop_t *loop, asr_loop_timer_t *t);

/* Makes sure the pool's timer fires no later than due_ms (loop clock). */
static void arm_at(asr_kv_pool_t *p, uint64_t due_ms) {
  if (asr_loop_timer_active(&p->timer) && p->timer.due_ms <= due_ms) return;
  uint64_t now = asr_loop_now(p->loop);
  asr_loop_timer_start(p->loop, &p->timer, due_ms > now ? due_ms - now : 0, on_timer, p);
}

/* --- requests ------------------------------------------------------------------- */

static void queue_push_tail(pconn_t *c, asr_kv_call_t *op) {
  op->qnext = NULL;
  op->qprev = c->qtail;
  if (c->qtail)
    c->qtail->qnext = op;
  else
    c->qhead = op;
  c->qtail = op;
  c->nqueued++;
}

static void queue_push_head(pconn_t *c, asr_kv_call_t *op) {
  op->qprev = NULL;
  op->qnext = c->qhead;
  if (c->qhead)
    c->qhead->qprev = op;
  else
    c->qtail = op;
  c->qhead = op;
  c->nqueued++;
}

static void queue_remove(pconn_t *c, asr_kv_call_t *op) {
  if (op->qprev)
    op->qprev->qnext = op->qnext;
  else
    c->qhead = op->qnext;
  if (op->qnext)
    op->qnext->qprev = op->qprev;
  else
    c->qtail = op->qprev;
  op->qprev = op->qnext = NULL;
  c->nqueued--;
}

static void sent_add(pconn_t *c, asr_kv_call_t *op) {
  asr_kv_call_t **b = &c->sent[op->id & (ID_BUCKETS - 1)];
  op->hnext = *b;
  *b = op;
  c->nsent++;
}

/* Finds and unlinks the request in flight with id; NULL when none. */
static asr_kv_call_t *sent_take(pconn_t *c, uint32_t id) {
  for (asr_kv_call_t **pp = &c->sent[id & (ID_BUCKETS - 1)]; *pp; pp = &(*pp)->hnext)
    if ((*pp)->id == id) {
      asr_kv_call_t *op = *pp;
      *pp = op->hnext;
      op->hnext = NULL;
      c->nsent--;
      return op;
    }
  return NULL;
}

static void conn_kick(pconn_t *c);
static void conn_check_idle(pconn_t *c);
static void conn_abandon(pconn_t *c);

/* Takes op out of whatever place it is in (kv_conn.c's header). */
static void op_unplace(asr_kv_call_t *op) {
  pconn_t *c = op->conn;
  if (op->state == OP_QUEUED) {
    queue_remove(c, op);
  } else if (op->state == OP_SENT) {
    (void)sent_take(c, op->id);
    if (op->pool->seed_form) conn_abandon(c);
  }
}

/* Ends op with rc: off every list, its value callback already run (GET hit)
 * or never (a failure), its done callback last (which may free it). */
static void op_finish(asr_kv_call_t *op, int rc) {
  asr_kv_pool_t *p = op->pool;
  op_unplace(op);
  op->state = OP_DONE;
  op->result = rc;
  if (op->lprev)
    op->lprev->lnext = op->lnext;
  else
    p->pending = op->lnext;
  if (op->lnext) op->lnext->lprev = op->lprev;
  op->lprev = op->lnext = NULL;
  p->npending--;
  pconn_t *c = op->conn;
  conn_check_idle(c);
  if (op->done) op->done(op->done_arg, op);
}

/* op's failure message (what asr_kv_call_error says). A request that
 * succeeds never holds one, so the message takes no room until then. */
static void set_err(asr_kv_call_t *op, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(asr_kv_call_t *op, const char *fmt, ...) {
  char buf[640];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  free(op->err);
  op->err = strdup(buf); /* without memory: no message, the code still says what failed */
}

static void op_fail(asr_kv_call_t *op, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void op_fail(asr_kv_call_t *op, int code, const char *fmt, ...) {
  char key[200], what[240];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (op->opcode == ASR_KV_OP_LIST) {
    set_err(op, "LIST on %s: %s", op->conn->name, what); /* the words asrkv dump has always printed */
  } else {
    asr_kv_key_render(op->key, op->klen, key, sizeof key);
    set_err(op, "KV %s of key '%s' on server %s: %s", asr_kv_op_name(op->opcode), key, op->conn->name, what);
  }
  op_finish(op, code);
}

/* Queues op (again) on its connection now, or after a backoff when
 * `backoff` is set (a NOT_FOUND answered at once). */
static void op_requeue(asr_kv_call_t *op, int backoff, int reason) {
  op->retries++;
  op->last_reason = reason;
  if (backoff) {
    unsigned d = op->backoff_ms ? op->backoff_ms : BACKOFF_MIN_MS;
    op->backoff_ms = d * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : d * 2;
    op->not_before_ms = asr_loop_now(op->pool->loop) + d / 2 + asr_rand_u64() % (d / 2 + 1);
    op->state = OP_WAIT;
    arm_at(op->pool, op->not_before_ms);
    return;
  }
  op->state = OP_QUEUED;
  queue_push_tail(op->conn, op);
  conn_kick(op->conn);
}

/* --- connections -------------------------------------------------------------- */

static void on_io(asr_loop_t *loop, asr_loop_io_t *io, unsigned events);

static pconn_t *conn_get(asr_kv_pool_t *p, const char *ip, uint16_t port) {
  char name[32];
  snprintf(name, sizeof name, "%s:%u", ip, (unsigned)port);
  for (pconn_t *c = p->conns; c; c = c->next)
    if (strcmp(c->name, name) == 0) return c;
  pconn_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  if (asr_sock_parse_ipv4(ip, port, &c->addr) != 0) {
    free(c);
    return NULL;
  }
  memcpy(c->name, name, sizeof name);
  c->pool = p;
  c->fd = -1;
  /* A pipelined connection sends up to ASR_KV_CONN_MAX_UNSENT frames a
   * send() and reads IN_CAP bytes a recv(); one of the seed's form has one
   * request on the wire at a time, so one frame each way is all it uses
   * (and a blocking call, which makes one per call, pays for no more). */
  c->out_cap = p->seed_form ? ASR_KV_FRAME_LEN : (size_t)ASR_KV_CONN_MAX_UNSENT * ASR_KV_FRAME_LEN;
  c->in_cap = p->seed_form ? ASR_KV_FRAME_LEN : IN_CAP;
  c->out = malloc(c->out_cap + c->in_cap);
  if (!c->out) {
    free(c);
    return NULL;
  }
  c->in = c->out + c->out_cap;
  c->next = p->conns;
  p->conns = c;
  return c;
}

static void conn_close_fd(pconn_t *c) {
  if (c->fd < 0) return;
  asr_loop_io_stop(c->pool->loop, &c->io);
  close(c->fd);
  c->fd = -1;
  c->pool->st.open--;
}

/* Whether c may frame its queue's head now: it is up, and a connection of
 * the seed's form has nothing in flight (its answer would have no id to
 * tell it from the next one's). */
static int conn_can_frame(const pconn_t *c) {
  return c->qhead && c->state == CONN_UP && !(c->pool->seed_form && c->nsent);
}

static void conn_want(pconn_t *c) {
  if (c->fd < 0) return;
  unsigned ev = ASR_LOOP_READ;
  if (c->state == CONN_CONNECTING || c->out_pos < c->out_len || conn_can_frame(c)) ev |= ASR_LOOP_WRITE;
  if (c->state == CONN_CONNECTING) ev = ASR_LOOP_WRITE;
  (void)asr_loop_io_set(c->pool->loop, &c->io, ev);
}

typedef struct {
  uint32_t age;
  asr_kv_call_t *op;
} aged_t;

static int by_age(const void *a, const void *b) {
  uint32_t x = ((const aged_t *)a)->age, y = ((const aged_t *)b)->age;
  return x < y ? -1 : x > y;
}

/* The connection is lost (reason: an ASR_E*): what was in flight goes back
 * to the head of the queue, in the order it was sent, and a new connection
 * is opened after a backoff while anything is queued. */
static void conn_broken(pconn_t *c, int reason) {
  asr_kv_pool_t *p = c->pool;
  conn_close_fd(c);
  conn_set_state(c, CONN_CLOSED);
  c->last_err = reason;
  c->out_len = c->out_pos = 0;
  c->in_len = 0;
  c->idle_since_ms = 0;
  /* Collect what was in flight and push each on the queue's head, youngest
   * first, so that the oldest ends up first: ids grow in sending order, and
   * next_id - id (mod 2^32) is a request's age even across a wrap. */
  if (c->nsent) {
    unsigned n = 0;
    aged_t *all = malloc(c->nsent * sizeof *all);
    for (int b = 0; b < ID_BUCKETS; b++) {
      for (asr_kv_call_t *op = c->sent[b], *nx; op; op = nx) {
        nx = op->hnext;
        op->hnext = NULL;
        if (all) {
          all[n].age = (uint32_t)(p->next_id - op->id);
          all[n++].op = op;
        } else { /* no memory to keep the order: keep the requests */
          op->state = OP_QUEUED;
          queue_push_head(c, op);
        }
      }
      c->sent[b] = NULL;
    }
    c->nsent = 0;
    if (all) {
      qsort(all, n, sizeof *all, by_age); /* youngest first */
      for (unsigned i = 0; i < n; i++) {
        all[i].op->state = OP_QUEUED;
        all[i].op->retries++;
        all[i].op->last_reason = reason;
        queue_push_head(c, all[i].op);
      }
      p->st.reissued += n;
      free(all);
    }
  }
  if (c->qhead) {
    p->st.breaks++;
    unsigned d = c->backoff_ms ? c->backoff_ms : BACKOFF_MIN_MS;
    c->backoff_ms = d * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : d * 2;
    unsigned wait = d / 2 + (unsigned)(asr_rand_u64() % (d / 2 + 1));
    p->st.backoff_ms += wait;
    c->not_before_ms = asr_loop_now(p->loop) + wait;
    arm_at(p, c->not_before_ms);
    asr_debug("kvs", "connection to %s lost (%s): %u requests go out again on a new one", c->name,
              asr_strerror(reason), c->nqueued);
  }
}

/* The seed's form: the request in flight on c ended unanswered (its
 * deadline passed, or it was freed). Its answer may still come, and would
 * carry no id to tell it from the next request's, so c is not used again
 * (the seed's client, too, closes a request's connection with it): it is
 * closed at once, and what is queued goes out on a new one. */
static void conn_abandon(pconn_t *c) {
  conn_close_fd(c);
  conn_set_state(c, CONN_CLOSED);
  c->out_len = c->out_pos = 0;
  c->in_len = 0;
  c->idle_since_ms = 0;
  if (c->qhead) conn_kick(c);
}

/* Opens the connection when it is closed, has work, and its backoff is over;
 * asks for writability when it is up and has frames to send. */
static void conn_kick(pconn_t *c) {
  asr_kv_pool_t *p = c->pool;
  c->idle_since_ms = 0;
  if (c->state == CONN_UP || c->state == CONN_CONNECTING) {
    conn_want(c);
    return;
  }
  if (!c->qhead) return;
  uint64_t now = asr_loop_now(p->loop);
  if (now < c->not_before_ms) {
    arm_at(p, c->not_before_ms);
    return;
  }
  int in_progress = 0;
  int fd = asr_sock_connect_start(&c->addr, &in_progress);
  if (fd < 0) {
    conn_broken(c, fd);
    if (!c->qhead) return;
    return;
  }
  if (asr_loop_io_start(p->loop, &c->io, fd, in_progress ? ASR_LOOP_WRITE : ASR_LOOP_READ | ASR_LOOP_WRITE,
                        on_io, c) != 0) {
    close(fd);
    conn_broken(c, ASR_ENOMEM);
    return;
  }
  c->fd = fd;
  p->st.open++;
  conn_set_state(c, in_progress ? CONN_CONNECTING : CONN_UP);
  if (c->state == CONN_UP) p->st.connects++;
}

/* A connection with nothing in flight or queued starts its idle time. */
static void conn_check_idle(pconn_t *c) {
  if (c->state != CONN_UP || c->nsent || c->qhead || c->idle_since_ms) return;
  c->idle_since_ms = asr_loop_now(c->pool->loop);
  arm_at(c->pool, c->idle_since_ms + (uint64_t)c->pool->idle_ms);
}

/* Frames queued requests into the send buffer (up to its bound), each with
 * a fresh id, and moves them into the in-flight table. */
static void conn_frame_queued(pconn_t *c) {
  asr_kv_pool_t *p = c->pool;
  if (c->out_pos == c->out_len) c->out_pos = c->out_len = 0;
  if (c->out_pos > 0 && c->qhead) { /* make room at the end */
    memmove(c->out, c->out + c->out_pos, c->out_len - c->out_pos);
    c->out_len -= c->out_pos;
    c->out_pos = 0;
  }
  uint64_t now = asr_loop_now(p->loop);
  while (conn_can_frame(c) && c->out_len + ASR_KV_FRAME_LEN <= c->out_cap) {
    asr_kv_call_t *op = c->qhead;
    queue_remove(c, op);
    op->id = p->next_id++;
    if (p->seed_form) c->seed_id = op->id;
    asr_kv_msg_t m = {.opcode = op->opcode,
                      .vtype = op->vtype,
                      .flags = p->seed_form ? 0 : ASR_KV_FLAG_ID,
                      .id = p->seed_form ? 0 : op->id,
                      .aux = op->aux,
                      .key_len = op->klen,
                      .val_len = op->vlen,
                      .secret = p->secret,
                      .key = op->key,
                      .val = op->val};
    int rc = asr_kv_frame_encode(c->out + c->out_len, &m);
    assert(rc == 0); /* every field was checked when the request started */
    (void)rc;
    c->out_len += ASR_KV_FRAME_LEN;
    op->state = OP_SENT;
    op->sent_ms = now;
    sent_add(c, op);
    p->st.frames_out++;
  }
}

/* Sends what the buffer holds, as much as one send() takes. Returns 0, or
 * the failure (the connection is broken). */
static int conn_flush(pconn_t *c) {
  for (;;) {
    conn_frame_queued(c);
    if (c->out_pos == c->out_len) return 0;
    ssize_t n = send(c->fd, c->out + c->out_pos, c->out_len - c->out_pos, MSG_NOSIGNAL);
    if (n > 0) {
      c->out_pos += (size_t)n;
      c->pool->st.sends++;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return n < 0 ? asr_err_from_errno(errno) : ASR_ECONNRESET;
  }
}

/* The code of an opcode-6 answer, from its reason (kv_server.c words them). */
static int error_code(const char *msg) {
  return strstr(msg, "secret") ? ASR_EAUTH : strstr(msg, "full") ? ASR_ENOSPACE : ASR_ESERVER;
}

/* One answer frame. Returns 0, or an ASR_E* when the connection must be
 * dropped (the stream is not a pipelined server's). */
static int conn_answer(pconn_t *c, const uint8_t *f) {
  asr_kv_pool_t *p = c->pool;
  asr_kv_msg_t m;
  const char *why = NULL;
  p->st.frames_in++;
  if (asr_kv_frame_decode(f, &m, &why) != 0) {
    asr_warn("kvs", "dropping the connection to %s: bad answer frame: %s", c->name, why);
    return ASR_EPROTO;
  }
  asr_kv_call_t *op;
  if (p->seed_form) {
    if (m.flags & ASR_KV_FLAG_ID) {
      asr_warn("kvs", "dropping the connection to %s: an answer with an id to a request without one",
               c->name);
      return ASR_EPROTO;
    }
    op = c->nsent ? sent_take(c, c->seed_id) : NULL; /* the one request in flight */
  } else if (!(m.flags & ASR_KV_FLAG_ID)) {
    /* The server refused the stream as a whole (an answer without an id):
     * no request of it can succeed there, so each fails with the reason. */
    char msg[ASR_KV_VAL_MAX + 1];
    memcpy(msg, m.val, m.val_len);
    msg[m.val_len] = '\0';
    int code = m.opcode == ASR_KV_OP_ERROR ? error_code(msg) : ASR_EPROTO;
    while (c->nsent) {
      for (int b = 0; b < ID_BUCKETS; b++)
        if (c->sent[b]) {
          op_fail(c->sent[b], code, "%s", m.opcode == ASR_KV_OP_ERROR ? msg : "answer without an id");
          break;
        }
    }
    return code;
  } else {
    op = sent_take(c, m.id);
  }
  if (!op) { /* its request ended already (deadline, freed): not answered twice */
    p->st.stale++;
    return 0;
  }
  /* Placeless now (OP_WAIT has no queue or table) until it is finished or
   * queued again below. */
  op->state = OP_WAIT;
  c->backoff_ms = 0; /* the server answers: a later break starts its backoff over */
  switch (m.opcode) {
    case ASR_KV_OP_SET_ACK:
      if (op->opcode != ASR_KV_OP_SET && op->opcode != ASR_KV_OP_DEL) break;
      op_finish(op, 0);
      return 0;
    case ASR_KV_OP_GET_TEXT:
    case ASR_KV_OP_GET_BINARY:
      if (op->opcode != ASR_KV_OP_GET) break;
      /* the seed's callbacks copy the value before the connect machine sees done */
      if (op->cb) op->cb(op->cb_arg, m.val, m.val_len);
      op_finish(op, 0);
      return 0;
    case ASR_KV_OP_LIST_ENTRY:
      if (op->opcode != ASR_KV_OP_LIST) break;
      if (op->ecb) op->ecb(op->cb_arg, m.aux, m.key, m.key_len, m.val, m.val_len, m.vtype);
      op_finish(op, 0);
      return 0;
    case ASR_KV_OP_NOT_FOUND:
      if (op->opcode == ASR_KV_OP_DEL) { /* nothing to remove */
        set_err(op, "key not found");
        op_finish(op, ASR_ENOTFOUND);
        return 0;
      }
      if (op->opcode == ASR_KV_OP_LIST) { /* past the last entry (kv_frame.h) */
        set_err(op, "no entry %u: the server holds %u keys", op->aux, m.aux);
        op_finish(op, ASR_ENOTFOUND);
        return 0;
      }
      if (op->opcode != ASR_KV_OP_GET) break;
      if (op->retry) {
        uint64_t now = asr_loop_now(p->loop);
        /* held for most of its wait: ask again at once; else back off */
        op_requeue(op, !(op->aux && now - op->sent_ms >= op->aux / 2), ASR_ENOTFOUND);
        return 0;
      }
      set_err(op, "key not found");
      op_finish(op, ASR_ENOTFOUND);
      return 0;
    case ASR_KV_OP_ERROR: {
      char msg[ASR_KV_VAL_MAX + 1];
      memcpy(msg, m.val, m.val_len);
      msg[m.val_len] = '\0';
      op_fail(op, error_code(msg), "server error: %s", m.val_len ? msg : "(no reason given)");
      return 0;
    }
    default: break;
  }
  op_fail(op, ASR_EPROTO, "unexpected answer %s to %s", asr_kv_op_name(m.opcode), asr_kv_op_name(op->opcode));
  return 0;
}

/* Reads what is there (many frames a recv) and handles each whole answer.
 * Returns 0, or the failure (the connection is broken). */
static int conn_read(pconn_t *c) {
  for (int i = 0; i < 4; i++) {
    ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (n == 0) return ASR_ECONNRESET; /* the server closed: restarted, or dropped us */
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return asr_err_from_errno(errno);
    }
    c->pool->st.recvs++;
    c->in_len += (size_t)n;
    size_t off = 0;
    while (c->in_len - off >= ASR_KV_FRAME_LEN) {
      int rc = conn_answer(c, c->in + off);
      off += ASR_KV_FRAME_LEN;
      if (rc) return rc;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    /* drained, or nothing more is owed (what may follow, a stale answer or
     * the end of the stream, the next event reads) */
    if ((size_t)n < c->in_cap || !c->nsent) return 0;
  }
  return 0;
}

static void on_io(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)loop;
  pconn_t *c = io->arg;
  switch (c->state) {
    case CONN_CONNECTING: {
      int rc = asr_sock_connect_result(c->fd);
      if (rc) {
        conn_broken(c, rc); /* ECONNREFUSED: the server is not up (yet, or again) */
        return;
      }
      conn_set_state(c, CONN_UP);
      c->pool->st.connects++;
      break;
    }
    case CONN_UP: break;
    default: assert(0 && "an event on a closed KV connection"); return;
  }
  /* Only a readable socket (or a hang-up or error, which a recv reports)
   * is read: the writable one of a connect that just completed has
   * nothing to read yet. */
  int rc = events & (ASR_LOOP_READ | ASR_LOOP_HUP | ASR_LOOP_ERR) ? conn_read(c) : 0;
  if (rc == 0 && c->state == CONN_UP) rc = conn_flush(c);
  if (rc) {
    conn_broken(c, rc);
    if (c->qhead) conn_kick(c);
    return;
  }
  conn_want(c);
  conn_check_idle(c);
}

/* What a retry's last failure (an ASR_E* code, 0 for none yet) means to
 * the user, for a timed-out request's message. */
static const char *reason_text(int code) {
  switch (code) {
    case ASR_ECONNREFUSED: return "connection refused: is the KV server running on that host and port?";
    case ASR_ENOTFOUND: return "key not found: nobody has published it yet";
    case ASR_ECONNRESET: return "the server closed the connection";
    case 0: return "no answer yet";
    default: return asr_strerror(code);
  }
}

static void on_timer(asr_loop_t *loop, asr_loop_timer_t *t) {
  asr_kv_pool_t *p = t->arg;
  uint64_t now = asr_loop_now(loop);
  uint64_t next = UINT64_MAX;
  for (asr_kv_call_t *op = p->pending, *n; op; op = n) {
    n = op->lnext; /* op_fail takes op off the list (and its done callback may free it) */
    if (op->deadline_ms && now >= op->deadline_ms) {
      op_fail(op, ASR_ETIMEDOUT, "timed out after %u retries; last: %s", op->retries,
              reason_text(op->last_reason ? op->last_reason : op->conn->last_err));
      n = p->pending; /* a done callback may have freed others: start over (rare: deadlines) */
      continue;
    }
    if (op->state == OP_WAIT && now >= op->not_before_ms) {
      op->state = OP_QUEUED;
      queue_push_tail(op->conn, op);
      conn_kick(op->conn);
    }
    if (op->deadline_ms && op->deadline_ms < next) next = op->deadline_ms;
    if (op->state == OP_WAIT && op->not_before_ms < next) next = op->not_before_ms;
  }
  for (pconn_t *c = p->conns; c; c = c->next) {
    if (c->state == CONN_CLOSED && c->qhead) {
      if (now >= c->not_before_ms)
        conn_kick(c);
      else if (c->not_before_ms < next)
        next = c->not_before_ms;
    }
    if (c->state == CONN_UP && c->idle_since_ms && !c->nsent && !c->qhead) {
      uint64_t due = c->idle_since_ms + (uint64_t)p->idle_ms;
      if (now >= due) {
        /* The END frame is a courtesy (the server would time us out): one
         * try, never a wait. */
        asr_kv_msg_t m = {
            .opcode = ASR_KV_OP_END, .flags = p->seed_form ? 0 : ASR_KV_FLAG_ID, .secret = p->secret};
        uint8_t f[ASR_KV_FRAME_LEN];
        asr_kv_frame_encode(f, &m);
        (void)send(c->fd, f, sizeof f, MSG_NOSIGNAL | MSG_DONTWAIT);
        conn_close_fd(c);
        conn_set_state(c, CONN_CLOSED);
        c->idle_since_ms = 0;
        c->backoff_ms = 0;
        c->not_before_ms = 0;
        p->st.idle_closes++;
      } else if (due < next) {
        next = due;
      }
    }
  }
  if (next != UINT64_MAX) arm_at(p, next);
}

/* --- the environment's defaults -------------------------------------------- */

/* Loaded once per process. Not a lazy flag: a thread that saw the flag set
 * could still read the bytes before another thread's writes land (a data
 * race, and in practice a wrong secret), so pthread_once orders them. A bad
 * ASR_JOB_SECRET is kept as its error: every pool that would send the
 * default secret fails with it (the server would only refuse its requests). */
static uint8_t default_secret_bytes[ASR_KV_SECRET_LEN];
static int default_secret_rc;
static char default_secret_err[200];
static pthread_once_t default_secret_once = PTHREAD_ONCE_INIT;

static void default_secret_load(void) {
  default_secret_rc =
      asr_kv_secret_from_env(default_secret_bytes, default_secret_err, sizeof default_secret_err);
}

/* What a pool takes from the environment where opts do not say: the secret
 * (ASR_JOB_SECRET; *secret stays valid) and each request's deadline in ms
 * (ASR_KV_TIMEOUT_MS; <0 = none). Returns 0, or ASR_ECONFIG with errbuf
 * naming the variable. */
static int env_defaults(const asr_kv_pool_opts_t *o, const uint8_t **secret, int *timeout_ms, char *errbuf,
                        size_t errlen) {
  if (o->secret) {
    *secret = o->secret;
  } else {
    pthread_once(&default_secret_once, default_secret_load);
    if (default_secret_rc) {
      if (errbuf) snprintf(errbuf, errlen, "%s", default_secret_err);
      return default_secret_rc;
    }
    *secret = default_secret_bytes;
  }
  if (o->timeout_ms) {
    *timeout_ms = o->timeout_ms;
    return 0;
  }
  long ms;
  int rc = asr_env_int(ASR_ENV_KV_TIMEOUT_MS, &ms, errbuf, errlen);
  if (rc == 0) *timeout_ms = (int)ms; /* at most 86399999: the row's range */
  return rc;
}

/* --- the API ---------------------------------------------------------------- */

int asr_kv_pool_new(asr_loop_t *loop, const asr_kv_pool_opts_t *opts, asr_kv_pool_t **out, char *errbuf,
                    size_t errlen) {
  if (!loop || !out) return ASR_EINVAL;
  asr_kv_pool_opts_t o = opts ? *opts : (asr_kv_pool_opts_t){0};
  const uint8_t *secret = NULL;
  int tmo = 0;
  int rc = env_defaults(&o, &secret, &tmo, errbuf, errlen);
  if (rc) return rc;
  int idle = o.idle_ms;
  if (idle <= 0) {
    long ms;
    rc = asr_env_int(ASR_ENV_KV_IDLE_MS, &ms, errbuf, errlen);
    if (rc) return rc;
    idle = (int)ms;
  }
  asr_kv_pool_t *p = calloc(1, sizeof *p);
  if (!p) return ASR_ENOMEM;
  p->loop = loop;
  memcpy(p->secret, secret, ASR_KV_SECRET_LEN);
  p->timeout_ms = tmo;
  p->idle_ms = idle;
  p->seed_form = o.seed_form != 0;
  p->next_id = (uint32_t)asr_rand_u64(); /* a restarted pool's ids differ from its predecessor's */
  *out = p;
  return 0;
}

void asr_kv_pool_free(asr_kv_pool_t *p) {
  if (!p) return;
  assert(p->npending == 0 && "every request is freed before its pool");
  asr_loop_timer_stop(p->loop, &p->timer);
  for (pconn_t *c = p->conns, *n; c; c = n) {
    n = c->next;
    if (c->fd >= 0 && c->state == CONN_UP) {
      asr_kv_msg_t m = {
          .opcode = ASR_KV_OP_END, .flags = p->seed_form ? 0 : ASR_KV_FLAG_ID, .secret = p->secret};
      uint8_t f[ASR_KV_FRAME_LEN];
      asr_kv_frame_encode(f, &m);
      (void)send(c->fd, f, sizeof f, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    conn_close_fd(c);
    free(c->out);
    free(c);
  }
  free(p);
}

static int op_start(asr_kv_pool_t *p, const char *ip, uint16_t port, uint8_t opcode, const void *key,
                    size_t klen, size_t vlen, asr_kv_call_t **out) {
  if (!p || !ip || !out || port == 0 || (klen && !key) || (klen == 0 && opcode != ASR_KV_OP_LIST))
    return ASR_EINVAL;
  if (klen > ASR_KV_KEY_MAX) return ASR_ETOOBIG;
  pconn_t *c = conn_get(p, ip, port);
  if (!c) return ASR_EINVAL; /* not an IPv4 address (or no memory) */
  /* sized to its value: in a mesh's rendezvous each service thread holds
   * a GET or a SET of a 128-byte handle per connecting comm */
  asr_kv_call_t *op = malloc(sizeof *op + vlen);
  if (!op) return ASR_ENOMEM;
  memset(op, 0, sizeof *op);
  op->pool = p;
  op->conn = c;
  op->opcode = opcode;
  if (klen) memcpy(op->key, key, klen);
  op->klen = (uint16_t)klen;
  uint64_t now = asr_loop_update_now(p->loop);
  op->deadline_ms = p->timeout_ms > 0 ? now + (uint64_t)p->timeout_ms : 0;
  op->lnext = p->pending;
  if (p->pending) p->pending->lprev = op;
  p->pending = op;
  p->npending++;
  if (op->deadline_ms) arm_at(p, op->deadline_ms);
  *out = op;
  return 0;
}

/* The last step of every pool request: op, filled in by its caller, is
 * queued on its connection, which is kicked to write it. */
static int op_queue(asr_kv_call_t *op, asr_kv_call_done_cb done, void *done_arg, asr_kv_call_t **out) {
  op->done = done;
  op->done_arg = done_arg;
  op->state = OP_QUEUED;
  queue_push_tail(op->conn, op);
  conn_kick(op->conn);
  *out = op;
  return 0;
}

int asr_kv_pool_get(asr_kv_pool_t *p, const char *ip, uint16_t port, const void *key, size_t klen, int vtype,
                    int retry, asr_kv_get_cb cb, void *cb_arg, asr_kv_call_done_cb done, void *done_arg,
                    asr_kv_call_t **out) {
  if (vtype != ASR_KV_VTYPE_TEXT && vtype != ASR_KV_VTYPE_BINARY) return ASR_EINVAL;
  asr_kv_call_t *op;
  int rc = op_start(p, ip, port, ASR_KV_OP_GET, key, klen, 0, &op);
  if (rc) return rc;
  op->vtype = (uint8_t)vtype;
  op->retry = retry != 0;
  op->cb = cb;
  op->cb_arg = cb_arg;
  /* at most half the request's own time, so that the server's NOT_FOUND,
   * and the reason a deadline names, come before the deadline */
  op->aux = retry ? GET_WAIT_MS : 0;
  if (retry && p->timeout_ms > 0 && (uint32_t)p->timeout_ms / 2 < op->aux)
    op->aux = (uint32_t)p->timeout_ms / 2;
  return op_queue(op, done, done_arg, out);
}

int asr_kv_pool_set(asr_kv_pool_t *p, const char *ip, uint16_t port, const void *key, size_t klen,
                    const void *val, size_t vlen, int vtype, asr_kv_call_done_cb done, void *done_arg,
                    asr_kv_call_t **out) {
  if ((vtype != ASR_KV_VTYPE_TEXT && vtype != ASR_KV_VTYPE_BINARY) || (vlen && !val)) return ASR_EINVAL;
  if (vlen > (p && p->seed_form ? ASR_KV_VAL_MAX : ASR_KV_VAL_MAX_ID)) return ASR_ETOOBIG;
  asr_kv_call_t *op;
  int rc = op_start(p, ip, port, ASR_KV_OP_SET, key, klen, vlen, &op);
  if (rc) return rc;
  op->vtype = (uint8_t)vtype;
  if (vlen) memcpy(op->val, val, vlen);
  op->vlen = (uint16_t)vlen;
  return op_queue(op, done, done_arg, out);
}

int asr_kv_pool_del(asr_kv_pool_t *p, const char *ip, uint16_t port, const void *key, size_t klen,
                    asr_kv_call_done_cb done, void *done_arg, asr_kv_call_t **out) {
  asr_kv_call_t *op;
  int rc = op_start(p, ip, port, ASR_KV_OP_DEL, key, klen, 0, &op);
  if (rc) return rc;
  return op_queue(op, done, done_arg, out);
}

int asr_kv_pool_list(asr_kv_pool_t *p, const char *ip, uint16_t port, uint32_t index, asr_kv_entry_cb cb,
                     void *cb_arg, asr_kv_call_done_cb done, void *done_arg, asr_kv_call_t **out) {
  asr_kv_call_t *op;
  int rc = op_start(p, ip, port, ASR_KV_OP_LIST, NULL, 0, 0, &op);
  if (rc) return rc;
  op->aux = index;
  op->ecb = cb;
  op->cb_arg = cb_arg;
  return op_queue(op, done, done_arg, out);
}

int asr_kv_call_done(const asr_kv_call_t *op, int *rc) {
  if (!op || op->state != OP_DONE) return 0;
  if (rc) *rc = op->result;
  return 1;
}

const char *asr_kv_call_error(const asr_kv_call_t *op) { return op && op->err ? op->err : ""; }
unsigned asr_kv_call_retries(const asr_kv_call_t *op) { return op ? op->retries : 0; }

void asr_kv_call_free(asr_kv_call_t *op) {
  if (!op) return;
  if (op->state != OP_DONE) {
    op->done = NULL; /* cancelled: no callback runs */
    op->cb = NULL;
    op->ecb = NULL;
    op_finish(op, ASR_ECANCELED);
  }
  free(op->err);
  free(op);
}

void asr_kv_pool_stats(const asr_kv_pool_t *p, asr_kv_pool_stats_t *st) { *st = p->st; }

unsigned asr_kv_pool_pending(const asr_kv_pool_t *p) { return p->npending; }

/* --- blocking calls ------------------------------------------------------------ */

/* One blocking call's loop and pool, made from the caller's opts. */
typedef struct {
  asr_loop_t *loop;
  asr_kv_pool_t *pool;
} solo_t;

/* Makes b's loop and pool. A pool lives for one call here, so it never
 * idles: ASR_KV_IDLE_MS is neither read nor needed. Returns 0, or the
 * failure with errbuf saying why. */
static int solo_open(solo_t *b, const asr_kv_pool_opts_t *opts, char *errbuf, size_t errlen) {
  asr_kv_pool_opts_t o = opts ? *opts : (asr_kv_pool_opts_t){0};
  o.idle_ms = 86400000;
  int rc = asr_loop_new(&b->loop);
  if (rc) {
    if (errbuf) snprintf(errbuf, errlen, "cannot make an event loop: %s", asr_strerror(rc));
    return rc;
  }
  rc = asr_kv_pool_new(b->loop, &o, &b->pool, errbuf, errlen);
  if (rc) asr_loop_free(b->loop);
  return rc;
}

/* Runs b's loop until op ends; returns its result, with errbuf holding
 * its reason when it failed. */
static int solo_run(solo_t *b, asr_kv_call_t *op, char *errbuf, size_t errlen) {
  int rc = 0;
  while (!asr_kv_call_done(op, &rc)) {
    int n = asr_loop_run_once(b->loop, ASR_LOOP_FOREVER); /* the pool's timer bounds the wait */
    if (n < 0) {
      if (errbuf) snprintf(errbuf, errlen, "the client's event loop failed: %s", asr_strerror(n));
      return n;
    }
  }
  if (rc && errbuf) snprintf(errbuf, errlen, "%s", asr_kv_call_error(op));
  return rc;
}

/* Frees b's pool (which sends END on its connection and closes it) and loop. */
static void solo_close(solo_t *b) {
  asr_kv_pool_free(b->pool);
  asr_loop_free(b->loop);
}

/* One blocking request (SET, GET or DEL): what it asks. */
typedef struct {
  uint8_t opcode;
  const char *ip;
  uint16_t port;
  const void *key, *val;
  size_t klen, vlen;
  int vtype, retry;
  asr_kv_get_cb cb; /* GET: where the value goes */
  void *cb_arg;
} solo_req_t;

/* Runs r on a loop and pool of its own (the blocking calls' one body). */
static int solo_do(const solo_req_t *r, const asr_kv_pool_opts_t *opts, char *errbuf, size_t errlen) {
  const char *what = asr_kv_op_name(r->opcode), *ip = r->ip ? r->ip : "";
  char why[256];
  solo_t b;
  int rc = solo_open(&b, opts, why, sizeof why);
  if (rc) {
    if (errbuf) snprintf(errbuf, errlen, "bad %s request: %s", what, why);
    return rc;
  }
  asr_kv_call_t *op;
  if (r->opcode == ASR_KV_OP_SET)
    rc = asr_kv_pool_set(b.pool, ip, r->port, r->key, r->klen, r->val, r->vlen, r->vtype, NULL, NULL, &op);
  else if (r->opcode == ASR_KV_OP_GET)
    rc = asr_kv_pool_get(b.pool, ip, r->port, r->key, r->klen, ASR_KV_VTYPE_BINARY, r->retry, r->cb,
                         r->cb_arg, NULL, NULL, &op);
  else
    rc = asr_kv_pool_del(b.pool, ip, r->port, r->key, r->klen, NULL, NULL, &op);
  if (rc) {
    if (errbuf) snprintf(errbuf, errlen, "bad %s request: %s", what, asr_strerror(rc));
  } else {
    rc = solo_run(&b, op, errbuf, errlen);
    asr_kv_call_free(op);
  }
  solo_close(&b);
  return rc;
}

int asr_kv_set(const char *ip, uint16_t port, const void *key, size_t klen, const void *val, size_t vlen,
               int vtype, const asr_kv_pool_opts_t *opts, char *errbuf, size_t errlen) {
  solo_req_t r = {.opcode = ASR_KV_OP_SET,
                  .ip = ip,
                  .port = port,
                  .key = key,
                  .klen = klen,
                  .val = val,
                  .vlen = vlen,
                  .vtype = vtype};
  return solo_do(&r, opts, errbuf, errlen);
}

int asr_kv_del(const char *ip, uint16_t port, const void *key, size_t klen, const asr_kv_pool_opts_t *opts,
               char *errbuf, size_t errlen) {
  solo_req_t r = {.opcode = ASR_KV_OP_DEL, .ip = ip, .port = port, .key = key, .klen = klen};
  return solo_do(&r, opts, errbuf, errlen);
}

/* Where a blocking GET's value goes. */
typedef struct {
  uint8_t *buf;
  size_t cap, len;
  int too_big;
} get_sink_t;

static void get_copy(void *arg, const uint8_t *val, size_t len) {
  get_sink_t *s = arg;
  s->len = len;
  s->too_big = len > s->cap;
  if (!s->too_big) memcpy(s->buf, val, len);
}

int asr_kv_get(const char *ip, uint16_t port, const void *key, size_t klen, int retry, void *val, size_t cap,
               size_t *vlen, const asr_kv_pool_opts_t *opts, char *errbuf, size_t errlen) {
  get_sink_t sink = {.buf = val, .cap = val ? cap : 0};
  solo_req_t r = {.opcode = ASR_KV_OP_GET,
                  .ip = ip,
                  .port = port,
                  .key = key,
                  .klen = klen,
                  .retry = retry,
                  .cb = get_copy,
                  .cb_arg = &sink};
  int rc = solo_do(&r, opts, errbuf, errlen);
  if (rc == 0 && sink.too_big) {
    if (errbuf)
      snprintf(errbuf, errlen, "value of %zu bytes does not fit the %zu-byte buffer", sink.len, sink.cap);
    return ASR_ETOOBIG;
  }
  if (rc == 0 && vlen) *vlen = sink.len;
  return rc;
}

/* One blocking LIST's caller callback and the index it asked for. */
typedef struct {
  asr_kv_list_cb cb;
  void *arg;
  uint32_t index;
} list_sink_t;

static void list_entry(void *arg, uint32_t total, const uint8_t *key, size_t klen, const uint8_t *val,
                       size_t vlen, int vtype) {
  list_sink_t *s = arg;
  if (s->cb) s->cb(s->arg, s->index, total, key, klen, val, vlen, vtype);
}

int asr_kv_list(const char *ip, uint16_t port, asr_kv_list_cb cb, void *arg, const asr_kv_pool_opts_t *opts,
                char *errbuf, size_t errlen) {
  solo_t b;
  int rc = solo_open(&b, opts, errbuf, errlen);
  if (rc) return rc;
  /* one entry a request, on the one connection, until NOT_FOUND says the
   * index is past the last (kv_frame.h: LIST) */
  list_sink_t sink = {.cb = cb, .arg = arg};
  for (;; sink.index++) {
    asr_kv_call_t *op;
    rc = asr_kv_pool_list(b.pool, ip ? ip : "", port, sink.index, list_entry, &sink, NULL, NULL, &op);
    if (rc) {
      if (errbuf && rc == ASR_EINVAL)
        snprintf(errbuf, errlen, "'%s:%u' is not an IPv4 address and port", ip ? ip : "", port);
      else if (errbuf)
        snprintf(errbuf, errlen, "bad LIST request: %s", asr_strerror(rc));
      break;
    }
    rc = solo_run(&b, op, errbuf, errlen);
    asr_kv_call_free(op);
    if (rc) break;
  }
  solo_close(&b);
  return rc == ASR_ENOTFOUND ? 0 : rc;
}

int asr_kv_seed_hostname(const char *ip, uint16_t port, const char *hostname, const asr_kv_pool_opts_t *opts,
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
