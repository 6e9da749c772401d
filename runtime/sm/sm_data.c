/*
 * sm_data.c -- the sm path's data movement (sm.h says what each kind of
 * transfer does; sm_layout.h what the ring holds). Every function here runs
 * under the comm's own lock (asr__sm_lock), which only this process's
 * threads take: the peer shares no lock with us, only words that one side
 * writes and the other reads, so a peer that dies at any instruction
 * leaves nothing held.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/uio.h>

#include "asr_assert.h"
#include "asr_err.h"
#include "asr_log.h"
#include "sm.h"

static uint64_t *word64(asr__sm_t *s, size_t off) { return (uint64_t *)(void *)(s->base + off); }
static uint32_t *word32(asr__sm_t *s, size_t off) { return (uint32_t *)(void *)(s->base + off); }

/* The peer broke the layout: the comm takes no more posts, and what waits
 * fails (sticky; said once). */
static void broken(asr__sm_t *s, const char *why) {
  if (s->err) return;
  s->err = ASR_EPROTO;
  s->why = why;
  asr_error("fab",
            "sm region %s: the peer process %u broke the ring's layout: %s; failing the comm's transfers",
            s->name, s->peer_pid, why);
  for (; s->rq_h != s->rq_t; s->rq_h++) asr__sm_op_done(s->rq[s->rq_h % ASR_SM_SLOTS].op, 0, ASR_EPROTO);
  for (; s->wait_h != s->wait_t; s->wait_h++)
    asr__sm_op_done(s->wait[s->wait_h % ASR_SM_SLOTS].op, 0, ASR_EPROTO);
  if (s->pipe.op) asr__sm_op_done(s->pipe.op, 0, ASR_EPROTO);
  s->pipe.op = NULL;
  asr__sm_reads_fail(s, ASR_EPROTO);
}

/* --- the waiting ends --------------------------------------------------------
 * Under libfabric a poll of any request reads the endpoint's CQ, which
 * moves every transfer of the endpoint; an sm poll moves its own comm. That
 * alone deadlocks two processes that each pipeline a message to the other
 * and then wait for their receive: each one's receive needs the other's
 * send pushed, and only a poll of that send would push it (test_runtime
 * payload_sizes, sm-nocma). So every end whose transfers wait on something
 * only its own progress does -- a SEND end pushing chunks, a RECV end with
 * receives posted -- is on one list of the process, and a poll that found
 * its request not done moves them all (asr__sm_progress_waiting). The
 * list's mutex is taken inside an end's lock (relist), and the walk takes
 * each end's lock only with a try: no order between the two can deadlock.
 * An end leaves the list before it is freed (asr__sm_free), under the
 * mutex the walk holds, so the walk never stands on a freed end. */
static pthread_mutex_t waiting_lock = PTHREAD_MUTEX_INITIALIZER;
static asr__sm_t *waiting_head;
static _Atomic int nwaiting, npipes;

static void unlist_locked(asr__sm_t *s) {
  if (!s->waiting) return;
  if (s->wprev)
    s->wprev->wnext = s->wnext;
  else
    waiting_head = s->wnext;
  if (s->wnext) s->wnext->wprev = s->wprev;
  s->wprev = s->wnext = NULL;
  s->waiting = 0;
  atomic_fetch_sub(&nwaiting, 1);
  if (s->is_send) atomic_fetch_sub(&npipes, 1);
}

/* Whether s has something only a progress moves (s's lock held). */
static int wants_progress(const asr__sm_t *s) {
  return !s->err && (s->is_send ? s->pipe.op != NULL : s->rq_h != s->rq_t);
}

/* Puts s on the list when its state wants it there (s's lock held). It
 * comes off lazily, in the walk that finds it wanting nothing (or at its
 * free): a receiver's ping-pong would otherwise take the list's mutex
 * twice a message, listed at each post and off at each completion. */
static void relist(asr__sm_t *s) {
  if (s->waiting || !wants_progress(s)) return;
  pthread_mutex_lock(&waiting_lock);
  s->wprev = NULL;
  s->wnext = waiting_head;
  if (waiting_head) waiting_head->wprev = s;
  waiting_head = s;
  s->waiting = 1;
  atomic_fetch_add(&nwaiting, 1);
  if (s->is_send) atomic_fetch_add(&npipes, 1);
  pthread_mutex_unlock(&waiting_lock);
}

void asr__sm_unlist(asr__sm_t *s) {
  pthread_mutex_lock(&waiting_lock);
  unlist_locked(s);
  pthread_mutex_unlock(&waiting_lock);
}

int asr__sm_pipes_active(void) { return atomic_load_explicit(&npipes, memory_order_relaxed) > 0; }

/* --- SEND ------------------------------------------------------------------ */

/* Reads the receiver's head: 0, or ASR_EPROTO when it is impossible (broken). */
static int read_head(asr__sm_t *s) {
  uint64_t h = __atomic_load_n(word64(s, ASR_SM_OFF_HEAD), __ATOMIC_ACQUIRE);
  if (h < s->head_seen || h > s->tail) {
    broken(s, "its head moved backwards, or past what was written");
    return ASR_EPROTO;
  }
  s->head_seen = h;
  return 0;
}

/* Whether need bytes are free after the tail (the head is read again only
 * when what was last seen of it leaves too little): 1, 0, or ASR_EPROTO
 * (broken). */
static int room(asr__sm_t *s, uint64_t need) {
  if (s->ring_bytes - (s->tail - s->head_seen) >= need) return 1;
  if (read_head(s)) return ASR_EPROTO;
  return s->ring_bytes - (s->tail - s->head_seen) >= need;
}

/* Writes a record at the tail: its bytes, then its stamp (release). The
 * caller made sure it fits before the ring's end and in the free space. */
static void put_rec(asr__sm_t *s, uint16_t kind, uint16_t flags, const void *data, uint32_t len,
                    uint64_t total, uint64_t size) {
  uint8_t *h = s->ring + s->toff;
  uint32_t zero = 0;
  memcpy(h + 4, &kind, 2);
  memcpy(h + 6, &flags, 2);
  memcpy(h + 8, &len, 4);
  memcpy(h + 12, &zero, 4);
  memcpy(h + 16, &total, 8);
  if (len) memcpy(h + ASR_SM_REC_HDR, data, len);
  __atomic_store_n((uint32_t *)(void *)h, asr__sm_stamp(s->tail), __ATOMIC_RELEASE);
  s->tail += size;
  s->toff += size;
  if (s->toff == s->ring_bytes) s->toff = 0;
}

/* Room for a record of size bytes in one piece, a PAD first when it would
 * cross the ring's end: 1, 0 (not now), or ASR_EPROTO (broken). */
static int make_room(asr__sm_t *s, uint64_t size) {
  uint64_t pad = s->toff + size > s->ring_bytes ? s->ring_bytes - s->toff : 0;
  int r = room(s, pad + size);
  if (r <= 0) return r;
  if (pad) put_rec(s, ASR_SM_PAD, 0, NULL, 0, 0, pad);
  return 1;
}

/* The largest payload of one CHUNK record: a quarter of the ring, so that
 * the receiver takes one while the sender writes the next. */
static uint64_t chunk_max(const asr__sm_t *s) {
  return (s->ring_bytes / 4) / ASR_SM_LINE * ASR_SM_LINE - ASR_SM_REC_HDR;
}

/* Pushes the pipelined send's chunks while they fit; completes it when
 * its last is in. Returns how many it pushed. */
static int push_chunks(asr__sm_t *s) {
  int n = 0;
  while (s->pipe.op && s->pipe.off < s->pipe.total) {
    uint64_t left = s->pipe.total - s->pipe.off, max = chunk_max(s);
    uint32_t len = (uint32_t)(left < max ? left : max);
    if (make_room(s, asr__sm_rec_size(len)) <= 0) break;
    uint16_t flags = (uint16_t)((s->pipe.off == 0 ? ASR_SM_FIRST : 0) | (len == left ? ASR_SM_LAST : 0));
    put_rec(s, ASR_SM_CHUNK, flags, s->pipe.buf + s->pipe.off, len, s->pipe.total, asr__sm_rec_size(len));
    s->pipe.off += len;
    n++;
  }
  if (s->pipe.op && s->pipe.off == s->pipe.total) {
    asr__sm_op_done(s->pipe.op, 0, 0);
    s->pipe.op = NULL;
  }
  return n;
}

int asr__sm_send_locked(asr__sm_t *s, const void *buf, size_t len, asr__ofi_op_t *op) {
  assert(asr__sm_locked(s) && s->is_send && !s->rd_n); /* reads held were flushed (sm.h) */
  if (s->err) return s->err;
  if (s->pipe.op) return ASR_EAGAIN; /* the ring's order: nothing overtakes a message being pipelined */
  if (len <= s->cfg.inline_max) {
    uint64_t size = asr__sm_rec_size(len);
    int r = make_room(s, size);
    if (r <= 0) return r < 0 ? s->err : ASR_EAGAIN;
    asr__sm_op_posted(op);
    put_rec(s, ASR_SM_INLINE, 0, buf, (uint32_t)len, len, size);
    s->sent++;
    asr__sm_op_done(op, 0, 0); /* its bytes are in the ring: the buffer may be reused */
    return 0;
  }
  uint32_t cma = s->cfg.cma ? __atomic_load_n(word32(s, ASR_SM_OFF_CMA), __ATOMIC_ACQUIRE) : ASR_SM_CMA_NO;
  /* The receiver says at its accept how large messages go (sm_region.c):
   * until it did, one waits, stashed, rather than take the ring's way for
   * good while a single copy may be allowed a moment later. */
  if (cma == ASR_SM_CMA_UNKNOWN) return ASR_EAGAIN;
  if (cma == ASR_SM_CMA_YES) {
    uint64_t at[2] = {(uint64_t)(uintptr_t)buf, len};
    int r = make_room(s, ASR_SM_LINE);
    if (r <= 0) return r < 0 ? s->err : ASR_EAGAIN;
    asr__sm_op_posted(op);
    put_rec(s, ASR_SM_CMA, 0, at, sizeof at, len, ASR_SM_LINE);
    s->sent++;
    s->wait[s->wait_t++ % ASR_SM_SLOTS] =
        (asr__sm_wait_t){op, s->tail, 0}; /* at most ASR_SM_SLOTS requests exist */
    return 0;
  }
  asr__sm_op_posted(op);
  s->pipe.op = op;
  s->pipe.buf = buf;
  s->pipe.total = len;
  s->pipe.off = 0;
  if (push_chunks(s) == 0) { /* not even its first chunk fits: stash it */
    s->pipe.op = NULL;
    __atomic_store_n(&op->posted, 0, __ATOMIC_RELAXED);
    return s->err ? s->err : ASR_EAGAIN;
  }
  s->sent++;
  relist(s);
  return 0;
}

static int send_progress(asr__sm_t *s) {
  int moved = 0;
  if (s->wait_h != s->wait_t || s->pipe.op) {
    if (read_head(s)) return 1;
    for (; s->wait_h != s->wait_t && s->head_seen >= s->wait[s->wait_h % ASR_SM_SLOTS].end;
         s->wait_h++, moved = 1)
      asr__sm_op_done(s->wait[s->wait_h % ASR_SM_SLOTS].op, s->wait[s->wait_h % ASR_SM_SLOTS].len, 0);
    moved |= push_chunks(s) > 0;
  }
  return moved;
}

/* --- RECV ------------------------------------------------------------------ */

/* One copy of a message from the sender's memory (sm.h: cma). */
static int cma_copy(asr__sm_t *s, uint8_t *buf, uint64_t addr, uint64_t total) {
  uint64_t got = 0;
  while (got < total) {
    struct iovec l = {buf + got, (size_t)(total - got)},
                 r = {(void *)(uintptr_t)(addr + got), (size_t)(total - got)};
    ssize_t n = process_vm_readv((pid_t)s->peer_pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      /* EFAULT: the sender named memory it does not have; ESRCH: it is gone */
      asr_debug("fab", "sm region %s: copying %llu bytes from process %u: %s", s->name,
                (unsigned long long)total, s->peer_pid, strerror(e));
      return e == EFAULT ? ASR_EPROTO : e == ESRCH ? ASR_ECONNRESET : asr_err_from_errno(e);
    }
    if (n == 0) return ASR_EIO;
    got += (uint64_t)n;
  }
  return 0;
}

/* The head receive took its message (or refused it: err). */
static void take(asr__sm_t *s, size_t len, int err) {
  asr__sm_op_done(s->rq[s->rq_h % ASR_SM_SLOTS].op, len, err);
  s->rq_h++;
  s->taken++;
  __atomic_store_n(word64(s, ASR_SM_OFF_TAKEN), s->taken, __ATOMIC_RELEASE);
}

/* The record (of size bytes) at the head is consumed: the sender may
 * reuse its bytes (release: our copies out of it are done). */
static void advance(asr__sm_t *s, uint64_t size) {
  s->head += size;
  s->hoff += size;
  if (s->hoff == s->ring_bytes) s->hoff = 0;
  __atomic_store_n(word64(s, ASR_SM_OFF_HEAD), s->head, __ATOMIC_RELEASE);
}

static int recv_progress(asr__sm_t *s) {
  int moved = 0;
  while (!s->err) {
    asr__sm_rec_t r;
    const char *why;
    int k = asr__sm_rec_read(s->ring, s->ring_bytes, s->hoff, s->head, s->in_msg, s->msg_total, &r, &why);
    if (k == 0) break;
    if (k < 0) {
      broken(s, why);
      return 1;
    }
    if (r.kind == ASR_SM_PAD) {
      advance(s, r.size);
      moved = 1;
      continue;
    }
    if (s->rq_h == s->rq_t) break; /* no receive for it yet: it waits in the ring */
    asr__sm_recv_slot_t *q = &s->rq[s->rq_h % ASR_SM_SLOTS];
    switch (r.kind) {
      case ASR_SM_INLINE:
        if (r.total > q->cap) {
          take(s, (size_t)r.total, ASR_ETRUNC);
        } else {
          memcpy(q->buf, r.data, r.len);
          take(s, r.len, 0);
        }
        break;
      case ASR_SM_CMA:
        take(s, (size_t)r.total, r.total > q->cap ? ASR_ETRUNC : cma_copy(s, q->buf, r.cma_addr, r.total));
        break;
      default: /* ASR_SM_CHUNK (asr__sm_rec_read lets no other kind through) */
        if (r.flags & ASR_SM_FIRST) {
          s->msg_total = r.total;
          s->msg_skip = r.total > q->cap;
        }
        if (!s->msg_skip) memcpy(q->buf + s->in_msg, r.data, r.len);
        s->in_msg += r.len;
        if (r.flags & ASR_SM_LAST) {
          take(s, (size_t)r.total, s->msg_skip ? ASR_ETRUNC : 0);
          s->in_msg = 0;
          s->msg_skip = 0;
        }
        break;
    }
    advance(s, r.size);
    moved = 1;
  }
  return moved;
}

int asr__sm_recv_locked(asr__sm_t *s, void *buf, size_t cap, asr__ofi_op_t *op) {
  assert(asr__sm_locked(s) && !s->is_send);
  if (s->err) return s->err;
  asr__sm_op_posted(op);
  s->rq[s->rq_t++ % ASR_SM_SLOTS] =
      (asr__sm_recv_slot_t){op, buf, cap}; /* at most ASR_SM_SLOTS requests exist */
  s->posted++;
  (void)recv_progress(s); /* what already waits in the ring completes it now */
  relist(s);
  return 0;
}

int asr__sm_progress_locked(asr__sm_t *s) {
  assert(asr__sm_locked(s));
  int moved = s->is_send ? send_progress(s) : recv_progress(s);
  if (moved) relist(s);
  return moved;
}

int asr__sm_progress_waiting(asr__sm_t *skip) {
  /* nobody but skip (whose lock the caller holds, so its flag is steady)
   * waits: the usual case of a poll, and no lock taken for it */
  if (atomic_load_explicit(&nwaiting, memory_order_relaxed) <= (skip && skip->waiting ? 1 : 0)) return 0;
  int moved = 0;
  pthread_mutex_lock(&waiting_lock);
  for (asr__sm_t *s = waiting_head, *n; s; s = n) {
    n = s->wnext;
    if (s == skip || atomic_exchange_explicit(&s->lock, 1, memory_order_acquire))
      continue; /* busy: its holder moves it */
#ifndef NDEBUG
    atomic_store_explicit(&s->owner, asr_thread_id(), memory_order_relaxed);
#endif
    moved |= s->is_send ? send_progress(s) : recv_progress(s);
    if (!wants_progress(s)) unlist_locked(s); /* relist leaves that to us */
    asr__sm_unlock(s);
  }
  pthread_mutex_unlock(&waiting_lock);
  return moved;
}

void asr__sm_cancel_all(asr__sm_t *s) {
  asr__sm_lock(s);
  for (; s->rq_h != s->rq_t; s->rq_h++) asr__sm_op_done(s->rq[s->rq_h % ASR_SM_SLOTS].op, 0, ASR_ECANCELED);
  for (; s->wait_h != s->wait_t; s->wait_h++)
    asr__sm_op_done(s->wait[s->wait_h % ASR_SM_SLOTS].op, 0, ASR_ECANCELED);
  if (s->pipe.op) asr__sm_op_done(s->pipe.op, 0, ASR_ECANCELED);
  s->pipe.op = NULL;
  asr__sm_reads_fail(s, ASR_ECANCELED);
  s->err = s->err ? s->err : ASR_ECANCELED; /* nothing more is posted or taken */
  relist(s);
  asr__sm_unlock(s);
}

/* --- the close handshake -------------------------------------------------- */

uint64_t asr__sm_sent(asr__sm_t *s) {
  asr__sm_lock(s);
  uint64_t n = s->sent;
  asr__sm_unlock(s);
  return n;
}

void asr__sm_fin(asr__sm_t *s, uint64_t n) {
  __atomic_store_n(word64(s, ASR_SM_OFF_FIN), n + 1, __ATOMIC_RELEASE);
}

void asr__sm_peer_state(asr__sm_t *s, uint64_t *taken, int *closed) {
  asr__sm_lock(s);
  (void)send_progress(s); /* a pipelined send goes on while the closer waits */
  relist(s);
  uint64_t t = __atomic_load_n(word64(s, ASR_SM_OFF_TAKEN), __ATOMIC_ACQUIRE);
  *taken = t <= s->sent ? t : s->sent; /* no more than was sent, whatever the peer wrote */
  *closed = __atomic_load_n(word32(s, ASR_SM_OFF_CLOSED), __ATOMIC_ACQUIRE) != 0;
  asr__sm_unlock(s);
}

void asr__sm_closed(asr__sm_t *s) { __atomic_store_n(word32(s, ASR_SM_OFF_CLOSED), 1, __ATOMIC_RELEASE); }

uint64_t asr__sm_taken(asr__sm_t *s) {
  asr__sm_lock(s);
  (void)recv_progress(s);
  relist(s);
  uint64_t n = s->taken;
  asr__sm_unlock(s);
  return n;
}

uint64_t asr__sm_peer_fin(asr__sm_t *s, uint64_t *taken) {
  asr__sm_lock(s);
  (void)recv_progress(s);
  relist(s);
  uint64_t fin = __atomic_load_n(word64(s, ASR_SM_OFF_FIN), __ATOMIC_ACQUIRE);
  *taken = s->taken;
  asr__sm_unlock(s);
  return fin;
}
