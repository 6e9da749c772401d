/*
 * kv_server.c -- the epoll KV server (the seed's kv_store_handle_client_fn,
 * rebuilt event-driven with bounds; see kv_server.h for the rules).
 *
 * Connections live on one of two intrusive lists ordered by last activity:
 * "busy" (mid-frame: part of a request read, or a response not yet written)
 * and "idle" (between frames). Each list has one timeout, so the oldest entry
 * is always at its head and expiry is O(1) per dropped client.
 *
 * A third list holds GETs that asked to wait for a missing key (aux = how
 * long, kv_frame.h), ordered by when their wait ends; each is also chained
 * into a bucket of `waiters` by its key's hash, so that a SET answers the
 * GETs waiting for its key at once, and the end of a wait answers NOT_FOUND.
 * A client that waits this way asks again once instead of every few
 * milliseconds (the SEND side of a rendezvous waits on the RECV side's
 * handle: a 64-rank mesh sent about 11 frames per connection, most of them
 * NOT_FOUND and its retry).
 *
 * Held GETs are records of their own (held_t): a connection of the seed's
 * kind has at most one and sits on the held list's side (LIST_HELD: off the
 * busy and idle lists, so no timeout but the wait's own applies); a
 * pipelined one (kv_frame.h: the ID flag) may have up to max_held, each
 * answered with its id when its key or its time comes, while the
 * connection goes on being read and stays on the busy or idle list.
 *
 * A pipelined connection reads into a PIPE_IN_CAP-byte buffer (many frames
 * per recv) and queues its answers in `out` (many frames per send). It is
 * busy while a frame is half read or an answer waits to be sent, so the
 * busy list's stall timeout is also what closes a client that stops
 * reading: the server stops reading it at the bounds (kv_server.h), so it
 * makes no progress, and is dropped stall_ms after its last byte moved.
 *
 * The server lives on an asr_loop (asr_loop.h): the listener and every
 * connection are ios with their own callbacks, and one timer is armed for
 * the earliest of the lists' deadlines (arm). Every callback runs under
 * s->lock, which asr_kv_server_put and _stats take from other threads; a
 * put from another thread than the loop's leaves the waking of held GETs to
 * the loop's thread (an async), since only that thread may change what the
 * loop watches.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_loop.h"
#include "asr_sock.h"
#include "asr_time.h"
#include "kv_frame.h"
#include "kv_keys.h"
#include "kv_secret.h"
#include "kv_server.h"
#include "kv_table.h"

#define FRAMES_PER_WAKEUP 16 /* fairness: one client cannot hog a wakeup */
#define ACCEPTS_PER_WAKEUP 256
#define WAIT_BUCKETS 1024                     /* power of two */
#define HOLD_MAX_MS 2000                      /* the longest a GET may wait for its key (aux) */
#define PIPE_IN_CAP (56 * ASR_KV_FRAME_LEN)   /* a pipelined connection's read buffer: 56 frames a recv */
#define PIPE_READS_PER_WAKEUP 4               /* fairness, as FRAMES_PER_WAKEUP */
#define PIPE_OUT_KEEP (32 * ASR_KV_FRAME_LEN) /* an emptied answer queue bigger than this is freed */

enum { LIST_NONE = 0, LIST_IDLE, LIST_BUSY, LIST_HELD };

#define CONN_DROPPED 1 /* conn_io and held_input: the connection is gone */

struct conn;

/* A GET waiting for its key (kv_frame.h: aux): on the server's held list,
 * ordered by when its wait ends, in its key's waiters bucket, and on its
 * connection's chain. Freed when answered or with its connection. */
typedef struct held {
  struct conn *c;
  uint64_t due_ms;
  uint64_t key_hash;
  uint32_t id; /* pipelined: the request's id, for the answer */
  uint8_t vtype;
  uint16_t klen;
  uint8_t key[ASR_KV_KEY_MAX];
  struct held *prev, *next;   /* the held list */
  struct held *wprev, *wnext; /* the waiters bucket */
  struct held *cprev, *cnext; /* the connection's */
} held_t;

typedef struct conn {
  asr_loop_io_t io; /* its socket, and what the loop watches it for */
  struct asr_kv_server *server;
  int fd;
  int writing;     /* a response is being written (seed's kind) */
  int close_after; /* drop once the response (pipelined: every answer) is out */
  int list;
  int pipelined;    /* its first frame had the ID flag (kv_frame.h) */
  unsigned nframes; /* request frames read so far */
  size_t rpos, wpos;
  uint64_t last_ms;
  struct conn *prev, *next;
  held_t *held; /* its held GETs (the seed's kind: at most one, and then LIST_HELD) */
  unsigned nheld;
  /* pipelined only */
  uint8_t *in; /* PIPE_IN_CAP bytes read, in_len of them not yet handled */
  size_t in_len;
  uint8_t *out; /* answers, out_pos of out_len bytes sent */
  size_t out_len, out_pos, out_cap;
  int broken; /* no memory for an answer: dropped at the end of its wakeup */
  uint8_t rbuf[ASR_KV_FRAME_LEN];
  uint8_t wbuf[ASR_KV_FRAME_LEN];
} conn_t;

typedef struct {
  conn_t *head, *tail;
} conn_list_t;

typedef struct {
  held_t *head, *tail;
} held_list_t;

struct asr_kv_server {
  asr_loop_t *loop;
  int own_loop; /* made here (no loop in the options): freed with the server */
  asr_loop_io_t lio;
  asr_loop_timer_t timer;   /* the earliest deadline of the lists (arm) */
  asr_loop_async_t recheck; /* a put from another thread: wake its held GETs */
  int lfd;
  int accepting;
  uint64_t resume_accept_ms; /* paused for lack of fds: try again then */
  uint16_t port;
  uint8_t secret[ASR_KV_SECRET_LEN];
  int max_clients, stall_ms, idle_ms;
  unsigned max_unsent, max_held;
  pthread_mutex_t lock; /* guards everything below against asr_kv_server_put/stats */
  asr_kv_table_t table;
  conn_list_t idle, busy;
  held_list_t held;
  held_t *waiters[WAIT_BUCKETS];
  asr_kv_server_stats_t st;
  pthread_t thread;
  int thread_running;
};

/* Takes c off the busy or idle list (or out of LIST_HELD). */
static void list_remove(asr_kv_server_t *s, conn_t *c) {
  conn_list_t *l = c->list == LIST_BUSY ? &s->busy : c->list == LIST_IDLE ? &s->idle : NULL;
  if (!l) {
    c->list = LIST_NONE;
    return;
  }
  if (c->prev)
    c->prev->next = c->next;
  else
    l->head = c->next;
  if (c->next)
    c->next->prev = c->prev;
  else
    l->tail = c->prev;
  c->prev = c->next = NULL;
  c->list = LIST_NONE;
}

/* Unlinks h from the held list, its bucket and its connection, and frees it. */
static void held_free(asr_kv_server_t *s, held_t *h) {
  if (h->wprev)
    h->wprev->wnext = h->wnext;
  else
    s->waiters[h->key_hash & (WAIT_BUCKETS - 1)] = h->wnext;
  if (h->wnext) h->wnext->wprev = h->wprev;
  if (h->prev)
    h->prev->next = h->next;
  else
    s->held.head = h->next;
  if (h->next)
    h->next->prev = h->prev;
  else
    s->held.tail = h->prev;
  conn_t *c = h->c;
  if (h->cprev)
    h->cprev->cnext = h->cnext;
  else
    c->held = h->cnext;
  if (h->cnext) h->cnext->cprev = h->cprev;
  c->nheld--;
  s->st.held--;
  free(h);
}

static void list_append(asr_kv_server_t *s, conn_t *c, int which) {
  conn_list_t *l = which == LIST_BUSY ? &s->busy : &s->idle;
  c->list = which;
  c->prev = l->tail;
  c->next = NULL;
  if (l->tail)
    l->tail->next = c;
  else
    l->head = c;
  l->tail = c;
}

/* Moves c to the tail of the list its state belongs to, stamped now. */
static void touch(asr_kv_server_t *s, conn_t *c, uint64_t now) {
  list_remove(s, c);
  c->last_ms = now;
  int busy = c->pipelined ? (c->in_len % ASR_KV_FRAME_LEN) != 0 || c->out_pos < c->out_len
                          : c->rpos > 0 || c->writing;
  list_append(s, c, busy ? LIST_BUSY : LIST_IDLE);
}

static void set_accepting(asr_kv_server_t *s, int on) {
  if (s->accepting == on) return;
  (void)asr_loop_io_set(s->loop, &s->lio, on ? ASR_LOOP_READ : 0);
  s->accepting = on;
}

static void drop(asr_kv_server_t *s, conn_t *c) {
  list_remove(s, c);
  while (c->held) held_free(s, c->held);
  if (c->pipelined) s->st.pipelined--;
  free(c->in);
  free(c->out);
  asr_loop_io_stop(s->loop, &c->io);
  /* Discard unread input first: closing a socket with unread data sends a
   * reset, which could destroy an error reply still in flight. */
  char sink[4096];
  for (int i = 0; i < 16 && recv(c->fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++) {
  }
  close(c->fd);
  free(c);
  s->st.clients--;
  if (!s->accepting && (int)s->st.clients < s->max_clients && !s->resume_accept_ms) set_accepting(s, 1);
}

static void want_events(asr_kv_server_t *s, conn_t *c, unsigned events) {
  (void)asr_loop_io_set(s->loop, &c->io, events);
}

/* Where c's next answer goes: wbuf (the seed's kind: one at a time), or the
 * tail of `out` (pipelined), grown as needed. NULL without memory (then c
 * is marked broken and dropped by its wakeup). */
static uint8_t *answer_slot(conn_t *c) {
  if (!c->pipelined) {
    c->writing = 1;
    c->wpos = 0;
    return c->wbuf;
  }
  if (c->out_len + ASR_KV_FRAME_LEN > c->out_cap) {
    size_t cap = c->out_cap ? c->out_cap * 2 : 8 * ASR_KV_FRAME_LEN;
    uint8_t *o = realloc(c->out, cap);
    if (!o) {
      c->broken = 1;
      return NULL;
    }
    c->out = o;
    c->out_cap = cap;
  }
  uint8_t *f = c->out + c->out_len;
  c->out_len += ASR_KV_FRAME_LEN;
  asr_kv_server_t *s = c->server;
  unsigned unsent = (unsigned)((c->out_len - c->out_pos) / ASR_KV_FRAME_LEN);
  if (unsent > s->st.unsent_peak) s->st.unsent_peak = unsent;
  return f;
}

/* Queues an answer on c: with the request's id when c is pipelined; a
 * connection of the seed's kind answers in order, with no id to echo. */
static void reply(conn_t *c, uint32_t id, uint8_t opcode, uint8_t vtype, uint32_t aux, const uint8_t *key,
                  size_t klen, const uint8_t *val, size_t vlen) {
  asr_kv_msg_t m = {.opcode = opcode,
                    .vtype = vtype,
                    .flags = c->pipelined ? ASR_KV_FLAG_ID : 0,
                    .id = c->pipelined ? id : 0,
                    .aux = aux,
                    .key_len = (uint16_t)klen,
                    .val_len = (uint16_t)vlen,
                    .key = key,
                    .val = val};
  uint8_t *f = answer_slot(c);
  if (f) asr_kv_frame_encode(f, &m);
}

/* Refuses request id on c with an opcode-6 answer saying why; with
 * close_after, c is dropped once its answers are out. */
static void refuse(asr_kv_server_t *s, conn_t *c, uint32_t id, int close_after, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void refuse(asr_kv_server_t *s, conn_t *c, uint32_t id, int close_after, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
  asr_debug("kvs", "refusing a request on fd %d: %s", c->fd, msg);
  reply(c, id, ASR_KV_OP_ERROR, 0, 0, NULL, 0, (const uint8_t *)msg, (size_t)n);
  if (close_after) c->close_after = 1;
  s->st.errors++;
}

/* Answers request id on c with entry e's value (opcode: a GET's answer or
 * LIST_ENTRY). A value longer than ASR_KV_VAL_MAX_ID does not fit a frame
 * with an id (kv_frame.h), so a pipelined connection gets a refusal by id
 * for it instead, and goes on. */
static void reply_value(asr_kv_server_t *s, conn_t *c, uint32_t id, uint8_t opcode, uint8_t vtype,
                        uint32_t aux, const uint8_t *key, size_t klen, const asr_kv_entry_t *e) {
  if (c->pipelined && e->vlen > ASR_KV_VAL_MAX_ID)
    refuse(s, c, id, 0, "the value of %u bytes does not fit a frame with an id (at most %d)", e->vlen,
           ASR_KV_VAL_MAX_ID);
  else
    reply(c, id, opcode, vtype, aux, key, klen, e->val, e->vlen);
}

/* The answer opcode of a GET of value type vtype (kv_frame.h). */
static uint8_t get_answer_op(uint8_t vtype) {
  return vtype == ASR_KV_VTYPE_TEXT ? ASR_KV_OP_GET_TEXT : ASR_KV_OP_GET_BINARY;
}

/* Holds a GET (m, already checked) of c until its key is set or `wait_ms`
 * has passed: on the held list, ordered by that moment, in its key's
 * waiters bucket, and on c's chain. A connection of the seed's kind leaves
 * the busy and idle lists meanwhile (LIST_HELD). Returns 0, or ASR_ENOMEM
 * (nothing held). */
static int hold(asr_kv_server_t *s, conn_t *c, const asr_kv_msg_t *m, uint32_t wait_ms, uint64_t now) {
  held_t *h = calloc(1, sizeof *h);
  if (!h) return ASR_ENOMEM;
  h->c = c;
  h->id = m->id;
  h->vtype = m->vtype;
  h->klen = m->key_len;
  memcpy(h->key, m->key, m->key_len);
  h->due_ms = now + (wait_ms < HOLD_MAX_MS ? wait_ms : HOLD_MAX_MS);
  h->key_hash = asr_kv_key_hash(m->key, m->key_len);
  held_t *after = s->held.tail; /* the waits are mostly alike: found near the tail */
  while (after && after->due_ms > h->due_ms) after = after->prev;
  h->prev = after;
  h->next = after ? after->next : s->held.head;
  if (h->next)
    h->next->prev = h;
  else
    s->held.tail = h;
  if (after)
    after->next = h;
  else
    s->held.head = h;
  held_t **b = &s->waiters[h->key_hash & (WAIT_BUCKETS - 1)];
  h->wnext = *b;
  if (*b) (*b)->wprev = h;
  *b = h;
  h->cnext = c->held;
  if (c->held) c->held->cprev = h;
  c->held = h;
  c->nheld++;
  s->st.held++;
  if (c->pipelined && c->nheld > s->st.held_peak) s->st.held_peak = c->nheld;
  if (!c->pipelined) {
    list_remove(s, c);
    c->list = LIST_HELD;
  }
  return 0;
}

static void want_pipe_events(asr_kv_server_t *s, conn_t *c);

/* Answers a held GET: with e's value, or NOT_FOUND when e is NULL (its wait
 * is over), and frees h. The response goes out when the socket is writable. */
static void answer_held(asr_kv_server_t *s, held_t *h, const asr_kv_entry_t *e, uint64_t now) {
  conn_t *c = h->c;
  if (e)
    reply_value(s, c, h->id, get_answer_op(h->vtype), h->vtype, 0, h->key, h->klen, e);
  else
    reply(c, h->id, ASR_KV_OP_NOT_FOUND, h->vtype, 0, h->key, h->klen, NULL, 0);
  held_free(s, h);
  if (c->pipelined) {
    want_pipe_events(s, c);
  } else {
    c->list = LIST_NONE;
    want_events(s, c, ASR_LOOP_WRITE);
  }
  touch(s, c, now);
}

/* A SET of key: answers every GET held for it. Each answer is only queued
 * (answer_held: the loop sends it once the socket is writable), so no other
 * request is handled during the walk and the bucket cannot change under it
 * except by the answers' own unlinking. */
static void wake_waiters(asr_kv_server_t *s, const uint8_t *key, size_t klen, uint64_t now) {
  uint64_t h = asr_kv_key_hash(key, klen);
  const asr_kv_entry_t *e = asr_kv_table_get(&s->table, key, klen);
  held_t *w = s->waiters[h & (WAIT_BUCKETS - 1)];
  while (w) {
    held_t *next = w->wnext;
    if (w->key_hash == h && w->klen == klen && memcmp(w->key, key, klen) == 0) {
      answer_held(s, w, e, now);
      s->st.woken++;
    }
    w = next;
  }
}

/* Answers NOT_FOUND to the held GETs whose wait is over. */
static void expire_held(asr_kv_server_t *s, uint64_t now) {
  while (s->held.head && s->held.head->due_ms <= now) answer_held(s, s->held.head, NULL, now);
}

/* Input on a held connection: its client hung up (drop it) or sent a frame
 * before its GET was answered (refuse it and close). Returns 0, or
 * CONN_DROPPED when c was dropped (and freed). */
static int held_input(asr_kv_server_t *s, conn_t *c, uint64_t now) {
  char b;
  ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  if (n <= 0) {
    drop(s, c);
    return CONN_DROPPED;
  }
  while (c->held) held_free(s, c->held);
  c->list = LIST_NONE;
  refuse(s, c, 0, 1, "a request arrived before the answer to the waiting GET");
  touch(s, c, now);
  want_events(s, c, ASR_LOOP_WRITE);
  return 0;
}

/* What a request frame leaves its connection to do (handle_request). */
typedef enum {
  REQ_ANSWERED = 0, /* its answer, or its refusal, is queued */
  REQ_HELD,         /* a GET held for its key: answered when it is set or the wait ends */
  REQ_END,          /* END: no answer; the connection closes */
} req_outcome_t;

/* The one request dispatcher, for both framings (kv_frame.h): conn_io calls
 * it for each frame of a connection of the seed's kind, one answered at a
 * time, and pipe_input for each frame of a pipelined one. It decodes f,
 * checks it, applies it to the table and queues its answer (reply: by id
 * on a pipelined connection). The two framings differ only where their
 * wires do:
 *
 *  - A refused request gets an opcode-6 answer on both. A connection of the
 *    seed's kind is then closed, for a frame that is not a valid request of
 *    this job (kv_server.h): its answers carry no id, and a client that sent
 *    such a frame may have lost its framing. A pipelined one goes on, since
 *    each answer names its request; only a frame without the ID flag there
 *    (the stream is not a pipelined client's, or lost its framing) closes
 *    it, after the answers before it (kv_frame.h: the first frame decides).
 *  - A value longer than ASR_KV_VAL_MAX_ID does not fit a frame with an id
 *    (reply_value).
 *  - A held GET holds a connection of the seed's kind whole (hold); a
 *    pipelined one goes on being read.
 *
 * Called with s->lock held, from the loop's thread. */
static req_outcome_t handle_request(asr_kv_server_t *s, conn_t *c, const uint8_t *f, uint64_t now) {
  asr_kv_msg_t m;
  const char *why = NULL;
  int has_id = 0;
  uint32_t id = 0;
  s->st.frames++;
  c->nframes++;
  int rc = asr_kv_frame_decode_id(f, &m, &why, &has_id, &id);
  if (c->pipelined && !has_id) {
    refuse(s, c, 0, 1, "malformed frame on a pipelined connection (no id): %s",
           rc ? why : "every frame of a pipelined connection has the ID flag");
    return REQ_ANSWERED;
  }
  if (!c->pipelined && has_id) {
    refuse(s, c, 0, 1, "a frame with an id on a connection without ids (kv_frame.h)");
    return REQ_ANSWERED;
  }
  /* A refusal of what no valid request of this job sends: it ends a
   * connection of the seed's kind, not a pipelined one (above). */
  int fatal = !c->pipelined;
  if (rc) {
    refuse(s, c, id, fatal, "malformed frame: %s", why);
    return REQ_ANSWERED;
  }
  if (!asr_kv_op_is_request(m.opcode)) {
    refuse(s, c, id, fatal, "opcode %u (%s) is not a request", m.opcode, asr_kv_op_name(m.opcode));
    return REQ_ANSWERED;
  }
  if (!asr_kv_secret_equal(m.secret, s->secret)) {
    refuse(s, c, id, fatal,
           "wrong job secret: this KV server belongs to another job "
           "(check ASR_JOB_SECRET and the bootstrap port)");
    return REQ_ANSWERED;
  }
  switch (m.opcode) {
    case ASR_KV_OP_END: return REQ_END;
    case ASR_KV_OP_SET: {
      if (m.key_len == 0) {
        refuse(s, c, id, fatal, "SET with an empty key");
        return REQ_ANSWERED;
      }
      int trc = asr_kv_table_set(&s->table, m.key, m.key_len, m.val, m.val_len, m.vtype);
      if (trc == ASR_ENOSPACE) {
        refuse(s, c, id, 0,
               "KV table full: %zu keys and %zu bytes held (limits %zu keys, %zu bytes); "
               "raise the server's key/byte limits",
               s->table.count, s->table.bytes, s->table.max_keys, s->table.max_bytes);
        return REQ_ANSWERED;
      }
      if (trc) {
        refuse(s, c, id, 0, "SET failed: %s", asr_strerror(trc));
        return REQ_ANSWERED;
      }
      if (asr_log_enabled(ASR_LOG_DEBUG, "kvs")) {
        char k[200];
        asr_debug("kvs", "SET %s (%u bytes)", asr_kv_key_render(m.key, m.key_len, k, sizeof k), m.val_len);
      }
      if (s->st.held) wake_waiters(s, m.key, m.key_len, now);
      reply(c, id, ASR_KV_OP_SET_ACK, m.vtype, 0, NULL, 0, NULL, 0);
      return REQ_ANSWERED;
    }
    case ASR_KV_OP_GET: {
      const asr_kv_entry_t *e = asr_kv_table_get(&s->table, m.key, m.key_len);
      if (e) {
        reply_value(s, c, id, get_answer_op(m.vtype), m.vtype, 0, m.key, m.key_len, e);
        return REQ_ANSWERED;
      }
      /* It asked to wait for the key (aux); without memory to hold it, it
       * is answered at once, as a client that asks again expects. */
      if (m.aux > 0 && hold(s, c, &m, m.aux, now) == 0) return REQ_HELD;
      reply(c, id, ASR_KV_OP_NOT_FOUND, m.vtype, 0, m.key, m.key_len, NULL, 0);
      return REQ_ANSWERED;
    }
    case ASR_KV_OP_DEL: {
      if (m.key_len == 0) {
        refuse(s, c, id, fatal, "DEL with an empty key");
        return REQ_ANSWERED;
      }
      int gone = asr_kv_table_del(&s->table, m.key, m.key_len) == 0;
      if (asr_log_enabled(ASR_LOG_DEBUG, "kvs")) {
        char k[200];
        asr_debug("kvs", "DEL %s%s", asr_kv_key_render(m.key, m.key_len, k, sizeof k),
                  gone ? "" : " (not there)");
      }
      reply(c, id, gone ? ASR_KV_OP_SET_ACK : ASR_KV_OP_NOT_FOUND, m.vtype, 0, m.key, m.key_len, NULL, 0);
      return REQ_ANSWERED;
    }
    case ASR_KV_OP_LIST: {
      const asr_kv_entry_t *e = asr_kv_table_at(&s->table, m.aux);
      uint32_t total = (uint32_t)s->table.count;
      if (e)
        reply_value(s, c, id, ASR_KV_OP_LIST_ENTRY, e->vtype, total, e->key, e->klen, e);
      else
        reply(c, id, ASR_KV_OP_NOT_FOUND, 0, total, NULL, 0, NULL, 0);
      return REQ_ANSWERED;
    }
    default:
      /* asr_kv_op_is_request admits only the opcodes above. */
      assert(0 && "a request opcode without a case");
      refuse(s, c, id, fatal, "unsupported opcode %u", m.opcode);
      return REQ_ANSWERED;
  }
}

/* Moves bytes for c; returns 0, or CONN_DROPPED when c was dropped (and
 * freed). */
static int pipe_io(asr_kv_server_t *s, conn_t *c, uint64_t now);

/* The first frame of c, in rbuf, has the ID flag: from now on c is
 * pipelined (kv_frame.h). Returns 0, or ASR_ENOMEM. */
static int become_pipelined(asr_kv_server_t *s, conn_t *c) {
  c->in = malloc(PIPE_IN_CAP);
  if (!c->in) return ASR_ENOMEM;
  memcpy(c->in, c->rbuf, ASR_KV_FRAME_LEN);
  c->in_len = ASR_KV_FRAME_LEN;
  c->rpos = 0;
  c->pipelined = 1;
  s->st.pipelined++;
  return 0;
}

static int frame_has_id(const uint8_t *f) {
  return memcmp(f + ASR_KV_OFF_MAGIC, "ASRK", 4) == 0 && f[ASR_KV_OFF_VERSION] == ASR_KV_VERSION &&
         (f[ASR_KV_OFF_FLAGS] & ASR_KV_FLAG_ID);
}

static int conn_io(asr_kv_server_t *s, conn_t *c, uint64_t now) {
  if (c->pipelined) return pipe_io(s, c, now);
  if (c->list == LIST_HELD) return held_input(s, c, now);
  int frames = 0, moved = 0;
  for (;;) {
    if (c->writing) {
      ssize_t n = send(c->fd, c->wbuf + c->wpos, ASR_KV_FRAME_LEN - c->wpos, MSG_NOSIGNAL);
      if (n > 0) {
        c->wpos += (size_t)n;
        moved = 1;
        if (c->wpos < ASR_KV_FRAME_LEN) continue;
        c->writing = 0;
        if (c->close_after) {
          drop(s, c);
          return CONN_DROPPED;
        }
        c->rpos = 0;
        want_events(s, c, ASR_LOOP_READ);
        if (++frames >= FRAMES_PER_WAKEUP) break;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        want_events(s, c, ASR_LOOP_WRITE);
        break;
      }
      if (n < 0 && errno == EINTR) continue;
      drop(s, c);
      return CONN_DROPPED;
    }
    ssize_t n = recv(c->fd, c->rbuf + c->rpos, ASR_KV_FRAME_LEN - c->rpos, 0);
    if (n > 0) {
      c->rpos += (size_t)n;
      moved = 1;
      if (c->rpos < ASR_KV_FRAME_LEN) continue;
      /* kv_frame.h: the first frame decides the connection's kind */
      if (c->nframes == 0 && frame_has_id(c->rbuf) && become_pipelined(s, c) == 0) return pipe_io(s, c, now);
      switch (handle_request(s, c, c->rbuf, now)) {
        case REQ_ANSWERED: continue; /* go write the answer */
        case REQ_HELD: return 0;     /* on the held list until its key or its time comes */
        case REQ_END: drop(s, c); return CONN_DROPPED;
        default: assert(0 && "a request outcome without a case"); continue;
      }
    }
    if (n == 0) {
      if (c->rpos > 0) {
        /* Truncated frame and EOF: say so (the peer may still read), then close. */
        refuse(s, c, 0, 1, "truncated frame: %zu of %d bytes before end of stream", c->rpos,
               ASR_KV_FRAME_LEN);
        (void)send(c->fd, c->wbuf, ASR_KV_FRAME_LEN, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      drop(s, c);
      return CONN_DROPPED;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    if (errno == EINTR) continue;
    drop(s, c);
    return CONN_DROPPED;
  }
  if (moved) touch(s, c, now);
  return 0;
}

/* --- pipelined connections -------------------------------------------------- */

static unsigned unsent_frames(const conn_t *c) {
  return (unsigned)((c->out_len - c->out_pos + ASR_KV_FRAME_LEN - 1) / ASR_KV_FRAME_LEN);
}

/* Whether c may be read: below both bounds (kv_server.h) and not closing. */
static int pipe_can_read(const asr_kv_server_t *s, const conn_t *c) {
  return !c->close_after && unsent_frames(c) < s->max_unsent && c->nheld < s->max_held;
}

static void want_pipe_events(asr_kv_server_t *s, conn_t *c) {
  unsigned ev = 0;
  if (pipe_can_read(s, c) && c->in_len < PIPE_IN_CAP) ev |= ASR_LOOP_READ;
  if (c->out_pos < c->out_len) ev |= ASR_LOOP_WRITE;
  want_events(s, c, ev);
}

/* Handles the whole frames read so far, while the bounds allow. Returns
 * how many it handled. */
static int pipe_input(asr_kv_server_t *s, conn_t *c, uint64_t now) {
  size_t off = 0;
  int n = 0;
  while (c->in_len - off >= ASR_KV_FRAME_LEN && pipe_can_read(s, c) && !c->broken) {
    if (handle_request(s, c, c->in + off, now) == REQ_END)
      c->close_after = 1; /* the answers before it go out */
    off += ASR_KV_FRAME_LEN;
    n++;
  }
  if (c->in_len - off >= ASR_KV_FRAME_LEN && !pipe_can_read(s, c) && !c->close_after) s->st.paused++;
  if (off) {
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
  }
  return n;
}

/* Moves bytes both ways for pipelined c: answers out (as many as one send
 * takes), frames in (up to PIPE_IN_CAP a recv, PIPE_READS_PER_WAKEUP recvs
 * a wakeup), each frame handled as it completes. Returns 0, or
 * CONN_DROPPED when c was dropped (and freed). */
static int pipe_io(asr_kv_server_t *s, conn_t *c, uint64_t now) {
  int reads = 0, moved = 0;
  for (;;) {
    int progressed = 0;
    while (c->out_pos < c->out_len) {
      ssize_t n = send(c->fd, c->out + c->out_pos, c->out_len - c->out_pos, MSG_NOSIGNAL);
      if (n > 0) {
        c->out_pos += (size_t)n;
        progressed = moved = 1;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      drop(s, c);
      return CONN_DROPPED;
    }
    if (c->out_pos == c->out_len) {
      c->out_pos = c->out_len = 0;
      if (c->out_cap > PIPE_OUT_KEEP) { /* a burst is over: give its memory back */
        free(c->out);
        c->out = NULL;
        c->out_cap = 0;
      }
      if (c->close_after) {
        drop(s, c);
        return CONN_DROPPED;
      }
    }
    if (pipe_input(s, c, now) > 0) progressed = 1;
    if (c->broken) {
      asr_warn("kvs", "dropping pipelined client fd %d: out of memory for its answers", c->fd);
      drop(s, c);
      return CONN_DROPPED;
    }
    if (pipe_can_read(s, c) && c->in_len < PIPE_IN_CAP && reads < PIPE_READS_PER_WAKEUP) {
      ssize_t n = recv(c->fd, c->in + c->in_len, PIPE_IN_CAP - c->in_len, 0);
      if (n > 0) {
        c->in_len += (size_t)n;
        reads++;
        progressed = moved = 1;
      } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        /* The client is gone (or broke off mid-frame): nothing it asked
         * can be answered any more. */
        drop(s, c);
        return CONN_DROPPED;
      } else if (errno == EINTR) {
        progressed = 1;
      }
    }
    if (!progressed) break;
  }
  want_pipe_events(s, c);
  if (moved) touch(s, c, now);
  return 0;
}

static void on_conn(asr_loop_t *loop, asr_loop_io_t *io, unsigned events);

static void accept_clients(asr_kv_server_t *s, uint64_t now) {
  for (int i = 0; i < ACCEPTS_PER_WAKEUP; i++) {
    if ((int)s->st.clients >= s->max_clients) {
      set_accepting(s, 0); /* the kernel backlog queues the rest */
      asr_debug("kvs", "at %d clients: pausing accept", s->max_clients);
      return;
    }
    int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        /* Pause instead of spinning on a listener that stays readable; a
         * dropped client or the timer (arm) resumes it. */
        asr_warn("kvs", "out of file descriptors at %u clients; pausing accept for 100 ms", s->st.clients);
        set_accepting(s, 0);
        s->resume_accept_ms = now + 100;
      }
      return; /* EAGAIN: drained */
    }
    conn_t *c = malloc(sizeof *c);
    if (!c) {
      close(fd);
      return;
    }
    memset(c, 0, offsetof(conn_t, rbuf));
    c->fd = fd;
    c->server = s;
    asr_sock_nodelay(fd);
    if (asr_loop_io_start(s->loop, &c->io, fd, ASR_LOOP_READ, on_conn, c) != 0) {
      close(fd);
      free(c);
      continue;
    }
    s->st.clients++;
    s->st.accepted++;
    touch(s, c, now);
  }
}

static void expire(asr_kv_server_t *s, conn_list_t *l, int timeout_ms, uint64_t now) {
  while (l->head && now - l->head->last_ms >= (uint64_t)timeout_ms) {
    conn_t *c = l->head;
    asr_info("kvs", "dropping client fd %d: %s for %d ms", c->fd,
             l == &s->busy ? "stalled mid-frame" : "idle", timeout_ms);
    s->st.stalled++;
    drop(s, c);
  }
}

/* Milliseconds until the earliest deadline (an accept pause, a held GET's
 * wait, the oldest busy or idle client's timeout), or -1 when none. */
static int next_timeout(asr_kv_server_t *s, uint64_t now) {
  int timeout_ms = -1;
  if (s->resume_accept_ms) {
    int left = s->resume_accept_ms > now ? (int)(s->resume_accept_ms - now) : 0;
    if (timeout_ms < 0 || left < timeout_ms) timeout_ms = left;
  }
  if (s->held.head) {
    int left = s->held.head->due_ms > now ? (int)(s->held.head->due_ms - now) : 0;
    if (timeout_ms < 0 || left < timeout_ms) timeout_ms = left;
  }
  const conn_list_t *lists[2] = {&s->busy, &s->idle};
  const int tmo[2] = {s->stall_ms, s->idle_ms};
  for (int i = 0; i < 2; i++) {
    if (!lists[i]->head) continue;
    uint64_t due = lists[i]->head->last_ms + (uint64_t)tmo[i];
    int left = due > now ? (int)(due - now) : 0;
    if (timeout_ms < 0 || left < timeout_ms) timeout_ms = left;
  }
  return timeout_ms;
}

/* The one timer follows the earliest deadline. Every list is ordered by
 * its deadline, so that is one look at each head. Called with the lock. */
static void on_timer(asr_loop_t *loop, asr_loop_timer_t *t);
static void arm(asr_kv_server_t *s) {
  int left = next_timeout(s, asr_loop_now(s->loop));
  if (left < 0) {
    asr_loop_timer_stop(s->loop, &s->timer);
    return;
  }
  uint64_t due = asr_loop_now(s->loop) + (uint64_t)left;
  if (!asr_loop_timer_active(&s->timer) || s->timer.due_ms != due)
    asr_loop_timer_start(s->loop, &s->timer, (uint64_t)left, on_timer, s);
}

static void on_timer(asr_loop_t *loop, asr_loop_timer_t *t) {
  asr_kv_server_t *s = t->arg;
  pthread_mutex_lock(&s->lock);
  uint64_t now = asr_loop_now(loop);
  if (s->resume_accept_ms && now >= s->resume_accept_ms) {
    s->resume_accept_ms = 0;
    if ((int)s->st.clients < s->max_clients) set_accepting(s, 1);
  }
  expire_held(s, now);
  expire(s, &s->busy, s->stall_ms, now);
  expire(s, &s->idle, s->idle_ms, now);
  arm(s);
  pthread_mutex_unlock(&s->lock);
}

static void on_listen(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)events;
  asr_kv_server_t *s = io->arg;
  pthread_mutex_lock(&s->lock);
  accept_clients(s, asr_loop_now(loop));
  arm(s);
  pthread_mutex_unlock(&s->lock);
}

static void on_conn(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  conn_t *c = io->arg;
  asr_kv_server_t *s = c->server;
  pthread_mutex_lock(&s->lock);
  (void)events; /* a hang-up or error shows in the next recv or send */
  conn_io(s, c, asr_loop_now(loop));
  arm(s);
  pthread_mutex_unlock(&s->lock);
}

/* A put from another thread stored keys that held GETs may wait for. */
static void on_recheck(asr_loop_t *loop, asr_loop_async_t *a) {
  asr_kv_server_t *s = a->arg;
  pthread_mutex_lock(&s->lock);
  uint64_t now = asr_loop_now(loop);
  for (held_t *h = s->held.head, *next; h; h = next) {
    next = h->next; /* answering frees h, and only h */
    const asr_kv_entry_t *e = asr_kv_table_get(&s->table, h->key, h->klen);
    if (!e) continue;
    answer_held(s, h, e, now);
    s->st.woken++;
  }
  arm(s);
  pthread_mutex_unlock(&s->lock);
}

int asr_kv_server_new(const asr_kv_server_opts_t *opts, asr_kv_server_t **out, char *errbuf, size_t errlen) {
  asr_kv_server_opts_t o = opts ? *opts : (asr_kv_server_opts_t){0};
  if (!out) return ASR_EINVAL;
  asr_kv_server_t *s = calloc(1, sizeof *s);
  if (!s) return ASR_ENOMEM;
  int rc;
  pthread_mutex_init(&s->lock, NULL);
  if (o.secret) memcpy(s->secret, o.secret, ASR_KV_SECRET_LEN);
  s->max_clients = o.max_clients > 0 ? o.max_clients : 16384;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      (rlim_t)s->max_clients + 64 > rl.rlim_cur)
    s->max_clients = rl.rlim_cur > 128 ? (int)rl.rlim_cur - 64 : 64;
  s->stall_ms = o.stall_timeout_ms > 0 ? o.stall_timeout_ms : 5000;
  s->idle_ms = o.idle_timeout_ms > 0 ? o.idle_timeout_ms : 60000;
  s->max_unsent = o.max_unsent > 0 ? (unsigned)o.max_unsent : 256;
  s->max_held = o.max_held > 0 ? (unsigned)o.max_held : 1024;
  asr_kv_table_init(&s->table, o.max_keys ? o.max_keys : 65536, o.max_bytes ? o.max_bytes : 64u << 20);
  s->loop = o.loop;
  if (!s->loop) {
    rc = asr_loop_new(&s->loop);
    if (rc) {
      if (errbuf) snprintf(errbuf, errlen, "cannot make the server's event loop: %s", asr_strerror(rc));
      goto err_table;
    }
    s->own_loop = 1;
  }
  s->lfd = asr_sock_listen(o.bind_ip ? o.bind_ip : "0.0.0.0", o.port, o.backlog > 0 ? o.backlog : 4096,
                           &s->port, errbuf, errlen);
  if (s->lfd < 0) {
    rc = s->lfd;
    goto err_loop;
  }
  rc = asr_loop_io_start(s->loop, &s->lio, s->lfd, ASR_LOOP_READ, on_listen, s);
  if (rc) {
    if (errbuf) snprintf(errbuf, errlen, "cannot watch the listening socket: %s", asr_strerror(rc));
    goto err_listen;
  }
  s->accepting = 1;
  asr_loop_async_start(s->loop, &s->recheck, on_recheck, s);
  asr_info("kvs", "KV server listening on %s:%u", o.bind_ip ? o.bind_ip : "0.0.0.0", s->port);
  *out = s;
  return 0;
err_listen:
  close(s->lfd);
err_loop:
  if (s->own_loop) asr_loop_free(s->loop);
err_table:
  asr_kv_table_fini(&s->table);
  pthread_mutex_destroy(&s->lock);
  free(s);
  return rc;
}

uint16_t asr_kv_server_port(const asr_kv_server_t *s) { return s->port; }

int asr_kv_server_put(asr_kv_server_t *s, const void *key, size_t klen, const void *val, size_t vlen,
                      int vtype) {
  pthread_mutex_lock(&s->lock);
  int rc = asr_kv_table_set(&s->table, key, klen, val, vlen, vtype);
  int foreign = s->thread_running && !pthread_equal(pthread_self(), s->thread);
  if (rc == 0 && s->st.held) {
    if (foreign) {
      asr_loop_async_send(&s->recheck); /* the loop's thread answers them (on_recheck) */
    } else {
      wake_waiters(s, key, klen, asr_loop_now(s->loop)); /* the loop writes the answers */
      arm(s);
    }
  }
  pthread_mutex_unlock(&s->lock);
  return rc;
}

int asr_kv_server_del_sender(asr_kv_server_t *s, uint32_t send_lnc, const char *host) {
  pthread_mutex_lock(&s->lock);
  int n = 0;
  /* from the last entry down: a removal keeps the earlier ones in place */
  for (size_t i = s->table.count; i-- > 0;) {
    const asr_kv_entry_t *e = asr_kv_table_at(&s->table, i);
    uint32_t sl, rl;
    char h[ASR_KV_HOSTNAME_LEN];
    if (!e || asr_kv_handle_key_parse(e->key, e->klen, &sl, &rl, h, sizeof h) != 0) continue;
    if (sl != send_lnc || strcmp(h, host) != 0) continue;
    uint8_t key[ASR_KV_HANDLE_KEY_LEN];
    memcpy(key, e->key, e->klen);
    if (asr_kv_table_del(&s->table, key, ASR_KV_HANDLE_KEY_LEN) == 0) n++;
  }
  pthread_mutex_unlock(&s->lock);
  return n;
}

void asr_kv_server_stats(asr_kv_server_t *s, asr_kv_server_stats_t *st) {
  pthread_mutex_lock(&s->lock);
  *st = s->st;
  st->keys = s->table.count;
  st->bytes = s->table.bytes;
  pthread_mutex_unlock(&s->lock);
}

static void *server_thread(void *arg) {
  asr_kv_server_t *s = arg;
  int rc = asr_loop_run(s->loop);
  if (rc) asr_error("kvs", "KV server loop failed: %s", asr_strerror(rc));
  return NULL;
}

int asr_kv_server_start_thread(asr_kv_server_t *s) {
  if (s->thread_running || !s->own_loop) return ASR_ESTATE;
  int e = pthread_create(&s->thread, NULL, server_thread, s);
  if (e) return asr_err_from_errno(e);
  (void)pthread_setname_np(s->thread, "asr-kv-server"); /* for top -H, perf and gdb */
  s->thread_running = 1;
  return 0;
}

void asr_kv_server_stop_thread(asr_kv_server_t *s) {
  if (!s->thread_running) return;
  asr_loop_stop(s->loop);
  pthread_join(s->thread, NULL);
  s->thread_running = 0;
}

void asr_kv_server_free(asr_kv_server_t *s) {
  if (!s) return;
  asr_kv_server_stop_thread(s);
  while (s->busy.head) drop(s, s->busy.head);
  while (s->idle.head) drop(s, s->idle.head);
  while (s->held.head) drop(s, s->held.head->c);
  assert(s->st.clients == 0); /* every connection was on one of the lists */
  asr_loop_timer_stop(s->loop, &s->timer);
  asr_loop_async_stop(s->loop, &s->recheck);
  asr_loop_io_stop(s->loop, &s->lio);
  close(s->lfd);
  if (s->own_loop) asr_loop_free(s->loop);
  asr_kv_table_fini(&s->table);
  pthread_mutex_destroy(&s->lock);
  free(s);
}
