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
#define WAIT_BUCKETS 1024 /* power of two */
#define HOLD_MAX_MS 2000  /* the longest a GET may wait for its key (aux) */

enum { LIST_NONE = 0, LIST_IDLE, LIST_BUSY, LIST_HELD };

#define CONN_DROPPED 1 /* conn_io and held_input: the connection is gone */

typedef struct conn {
  asr_loop_io_t io; /* its socket, and what the loop watches it for */
  struct asr_kv_server *server;
  int fd;
  int writing;     /* a response is being written */
  int close_after; /* drop once the response is out */
  int list;
  size_t rpos, wpos;
  uint64_t last_ms; /* LIST_HELD: when the wait ends */
  struct conn *prev, *next;
  uint64_t key_hash;          /* LIST_HELD: the GET's key, hashed */
  struct conn *wprev, *wnext; /* LIST_HELD: the waiters bucket chain */
  uint8_t rbuf[ASR_KV_FRAME_LEN];
  uint8_t wbuf[ASR_KV_FRAME_LEN];
} conn_t;

typedef struct {
  conn_t *head, *tail;
} conn_list_t;

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
  pthread_mutex_t lock; /* guards everything below against asr_kv_server_put/stats */
  asr_kv_table_t table;
  conn_list_t idle, busy, held;
  conn_t *waiters[WAIT_BUCKETS];
  asr_kv_server_stats_t st;
  pthread_t thread;
  int thread_running;
};

static void list_remove(asr_kv_server_t *s, conn_t *c) {
  conn_list_t *l = c->list == LIST_BUSY   ? &s->busy
                   : c->list == LIST_IDLE ? &s->idle
                   : c->list == LIST_HELD ? &s->held
                                          : NULL;
  if (!l) return;
  if (c->list == LIST_HELD) { /* out of its waiters bucket too */
    if (c->wprev)
      c->wprev->wnext = c->wnext;
    else
      s->waiters[c->key_hash & (WAIT_BUCKETS - 1)] = c->wnext;
    if (c->wnext) c->wnext->wprev = c->wprev;
    c->wprev = c->wnext = NULL;
    s->st.held--;
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
  list_append(s, c, (c->rpos > 0 || c->writing) ? LIST_BUSY : LIST_IDLE);
}

static void set_accepting(asr_kv_server_t *s, int on) {
  if (s->accepting == on) return;
  (void)asr_loop_io_set(s->loop, &s->lio, on ? ASR_LOOP_READ : 0);
  s->accepting = on;
}

static void drop(asr_kv_server_t *s, conn_t *c) {
  list_remove(s, c);
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

static void reply(conn_t *c, uint8_t opcode, uint8_t vtype, uint32_t aux, const uint8_t *key, size_t klen,
                  const uint8_t *val, size_t vlen) {
  asr_kv_msg_t m = {.opcode = opcode,
                    .vtype = vtype,
                    .aux = aux,
                    .key_len = (uint16_t)klen,
                    .val_len = (uint16_t)vlen,
                    .key = key,
                    .val = val};
  asr_kv_frame_encode(c->wbuf, &m);
  c->writing = 1;
  c->wpos = 0;
}

static void reply_error(asr_kv_server_t *s, conn_t *c, int close_after, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void reply_error(asr_kv_server_t *s, conn_t *c, int close_after, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
  asr_debug("kvs", "refusing a request on fd %d: %s", c->fd, msg);
  reply(c, ASR_KV_OP_ERROR, 0, 0, NULL, 0, (const uint8_t *)msg, (size_t)n);
  c->close_after = close_after;
  s->st.errors++;
}

/* Holds c's GET (its frame in c->rbuf, already checked) until its key is
 * set or `wait_ms` has passed: on the held list, ordered by that moment,
 * and in its key's waiters bucket. */
static void hold(asr_kv_server_t *s, conn_t *c, const asr_kv_msg_t *m, uint32_t wait_ms, uint64_t now) {
  list_remove(s, c);
  c->last_ms = now + (wait_ms < HOLD_MAX_MS ? wait_ms : HOLD_MAX_MS);
  c->key_hash = asr_kv_key_hash(m->key, m->key_len);
  conn_t *after = s->held.tail; /* the waits are mostly alike: found near the tail */
  while (after && after->last_ms > c->last_ms) after = after->prev;
  c->list = LIST_HELD;
  c->prev = after;
  c->next = after ? after->next : s->held.head;
  if (c->next)
    c->next->prev = c;
  else
    s->held.tail = c;
  if (after)
    after->next = c;
  else
    s->held.head = c;
  conn_t **b = &s->waiters[c->key_hash & (WAIT_BUCKETS - 1)];
  c->wprev = NULL;
  c->wnext = *b;
  if (*b) (*b)->wprev = c;
  *b = c;
  s->st.held++;
}

/* Answers a held GET: with e's value, or NOT_FOUND when e is NULL (its wait
 * is over). The response goes out when the socket is writable. */
static void answer_held(asr_kv_server_t *s, conn_t *c, const asr_kv_entry_t *e, uint64_t now) {
  asr_kv_msg_t m;
  const char *why = NULL;
  list_remove(s, c);
  (void)asr_kv_frame_decode(c->rbuf, &m, &why); /* it was a valid GET when held */
  if (e)
    reply(c, m.vtype == ASR_KV_VTYPE_TEXT ? ASR_KV_OP_GET_TEXT : ASR_KV_OP_GET_BINARY, m.vtype, 0, m.key,
          m.key_len, e->val, e->vlen);
  else
    reply(c, ASR_KV_OP_NOT_FOUND, m.vtype, 0, m.key, m.key_len, NULL, 0);
  touch(s, c, now);
  want_events(s, c, ASR_LOOP_WRITE);
}

/* A SET of key: answers every GET held for it. Each answer is only queued
 * (answer_held: poll() sends it once the socket is writable), so no other
 * request is handled during the walk and the bucket cannot change under it. */
static void wake_waiters(asr_kv_server_t *s, const uint8_t *key, size_t klen, uint64_t now) {
  uint64_t h = asr_kv_key_hash(key, klen);
  const asr_kv_entry_t *e = asr_kv_table_get(&s->table, key, klen);
  conn_t *c = s->waiters[h & (WAIT_BUCKETS - 1)];
  while (c) {
    conn_t *next = c->wnext;
    asr_kv_msg_t m;
    const char *why = NULL;
    if (c->key_hash == h && asr_kv_frame_decode(c->rbuf, &m, &why) == 0 && m.key_len == klen &&
        memcmp(m.key, key, klen) == 0) {
      answer_held(s, c, e, now);
      s->st.woken++;
    }
    c = next;
  }
}

/* Answers NOT_FOUND to the held GETs whose wait is over. */
static void expire_held(asr_kv_server_t *s, uint64_t now) {
  while (s->held.head && s->held.head->last_ms <= now) answer_held(s, s->held.head, NULL, now);
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
  list_remove(s, c);
  reply_error(s, c, 1, "a request arrived before the answer to the waiting GET");
  touch(s, c, now);
  want_events(s, c, ASR_LOOP_WRITE);
  return 0;
}

/* Handles the complete request in c->rbuf and prepares the response.
 * Returns 0, 1 when the connection should simply be closed (END), or 2
 * when the request is a GET held for its key (nothing to write yet). */
static int handle_frame(asr_kv_server_t *s, conn_t *c, uint64_t now) {
  asr_kv_msg_t m;
  const char *why = NULL;
  s->st.frames++;
  if (asr_kv_frame_decode(c->rbuf, &m, &why) != 0) {
    reply_error(s, c, 1, "malformed frame: %s", why);
    return 0;
  }
  if (!asr_kv_op_is_request(m.opcode)) {
    reply_error(s, c, 1, "opcode %u (%s) is not a request", m.opcode, asr_kv_op_name(m.opcode));
    return 0;
  }
  if (!asr_kv_secret_equal(m.secret, s->secret)) {
    reply_error(s, c, 1,
                "wrong job secret: this KV server belongs to another job "
                "(check ASR_JOB_SECRET and the bootstrap port)");
    return 0;
  }
  switch (m.opcode) {
    case ASR_KV_OP_END: return 1;
    case ASR_KV_OP_SET: {
      if (m.key_len == 0) {
        reply_error(s, c, 1, "SET with an empty key");
        return 0;
      }
      int rc = asr_kv_table_set(&s->table, m.key, m.key_len, m.val, m.val_len, m.vtype);
      if (rc == ASR_ENOSPACE) {
        reply_error(s, c, 0,
                    "KV table full: %zu keys and %zu bytes held (limits %zu keys, %zu bytes); "
                    "raise the server's key/byte limits",
                    s->table.count, s->table.bytes, s->table.max_keys, s->table.max_bytes);
        return 0;
      }
      if (rc) {
        reply_error(s, c, 0, "SET failed: %s", asr_strerror(rc));
        return 0;
      }
      if (asr_log_enabled(ASR_LOG_DEBUG, "kvs")) {
        char k[200];
        asr_debug("kvs", "SET %s (%u bytes)", asr_kv_key_render(m.key, m.key_len, k, sizeof k), m.val_len);
      }
      if (s->st.held) wake_waiters(s, m.key, m.key_len, now);
      reply(c, ASR_KV_OP_SET_ACK, m.vtype, 0, NULL, 0, NULL, 0);
      return 0;
    }
    case ASR_KV_OP_GET: {
      const asr_kv_entry_t *e = asr_kv_table_get(&s->table, m.key, m.key_len);
      if (!e) {
        if (m.aux > 0) { /* it asked to wait for the key */
          hold(s, c, &m, m.aux, now);
          return 2;
        }
        reply(c, ASR_KV_OP_NOT_FOUND, m.vtype, 0, m.key, m.key_len, NULL, 0);
        return 0;
      }
      reply(c, m.vtype == ASR_KV_VTYPE_TEXT ? ASR_KV_OP_GET_TEXT : ASR_KV_OP_GET_BINARY, m.vtype, 0, m.key,
            m.key_len, e->val, e->vlen);
      return 0;
    }
    case ASR_KV_OP_LIST: {
      const asr_kv_entry_t *e = asr_kv_table_at(&s->table, m.aux);
      uint32_t total = (uint32_t)s->table.count;
      if (!e)
        reply(c, ASR_KV_OP_NOT_FOUND, 0, total, NULL, 0, NULL, 0);
      else
        reply(c, ASR_KV_OP_LIST_ENTRY, e->vtype, total, e->key, e->klen, e->val, e->vlen);
      return 0;
    }
    default: reply_error(s, c, 1, "unsupported opcode %u", m.opcode); return 0;
  }
}

/* Moves bytes for c; returns 0, or CONN_DROPPED when c was dropped (and
 * freed). */
static int conn_io(asr_kv_server_t *s, conn_t *c, uint64_t now) {
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
      int hf = handle_frame(s, c, now);
      if (hf == 1) { /* END */
        drop(s, c);
        return CONN_DROPPED;
      }
      if (hf == 2) return 0; /* held: on the held list until its key or its time comes */
      continue;              /* go write the response */
    }
    if (n == 0) {
      if (c->rpos > 0) {
        /* Truncated frame and EOF: say so (the peer may still read), then close. */
        reply_error(s, c, 1, "truncated frame: %zu of %d bytes before end of stream", c->rpos,
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
    int left = s->held.head->last_ms > now ? (int)(s->held.head->last_ms - now) : 0;
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
  for (conn_t *c = s->held.head, *next; c; c = next) {
    next = c->next; /* answering takes c off the held list */
    asr_kv_msg_t m;
    const char *why = NULL;
    if (asr_kv_frame_decode(c->rbuf, &m, &why) != 0) continue;
    const asr_kv_entry_t *e = asr_kv_table_get(&s->table, m.key, m.key_len);
    if (!e) continue;
    answer_held(s, c, e, now);
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
  while (s->held.head) drop(s, s->held.head);
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
