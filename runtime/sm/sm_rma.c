/*
 * sm_rma.c -- one-sided transfers on the sm path (rma/rma.h; sm_layout.h:
 * the one-sided ring). The initiator holds the SEND end. A small write
 * (at most the end's inline size) goes into the one-sided ring and the
 * owner copies it into place when it applies the ring (at its next
 * asr_notif_poll, or its service thread's next tick): no system call. A
 * larger write and every read are one copy straight between the two
 * processes' memories (process_vm_writev / readv), made only once the
 * owner has applied all of the ring before it, so that transfers of one
 * comm reach the owner's memory in post order; a notification follows its
 * write in the ring. Small reads are held and copied together ("deferred
 * reads" below). Everything on the SEND end runs under its lock, as its
 * sends do (sm_data.c); the owner's side under the RECV end's lock.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "asr.h"
#include "asr_assert.h"
#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "sm.h"

_Static_assert(ASR_SM_NOTIF_SLOTS == ASR_NOTIF_DEPTH, "the sm path holds asr.h's notification depth");

enum { OSR_WRITE = 1, OSR_NOTIF = 2, OSR_PAD = 3, OSR_READ_PART = 4, OSR_WRITE_PART = 5 };
enum { OSR_HAS_NOTIF = 1 };
/* a PART record's state (sm_layout.h) */
enum {
  PART_OFFERED = 0,
  PART_TAKEN = 1,
  PART_COPIED = 2,
  PART_TAKEN_BACK = 3,
  PART_DECLINED = 4,
  PART_REFUSED = 5
};
#define OSR_OFF_STATE 40

static _Atomic uint64_t *word(asr__sm_t *s, size_t off) {
  return (_Atomic uint64_t *)(void *)(s->base + off);
}

/* The end broke (sticky): what waits fails, as sm_data.c's broken does. */
static int osr_broken(asr__sm_t *s, const char *why) {
  if (!s->err) {
    s->err = ASR_EPROTO;
    s->why = why;
    asr_error("fab",
              "sm region %s: the peer process %u broke the one-sided ring: %s; failing the comm's transfers",
              s->name, s->peer_pid, why);
  }
  return s->err;
}

/* Copies every byte of the n pieces local[i] <-> remote[i] (each pair of
 * one length), 64 pieces per system call: 0 or an ASR_E*. */
static int cma(asr__sm_t *s, int write, const struct iovec *local, const struct iovec *remote, int n) {
  int i = 0;
  size_t skip = 0; /* bytes of piece i moved by an earlier, partial call */
  for (;;) {
    /* an empty piece moves nothing: a copy of nothing at all is done, not
     * a failure (process_vm_* return 0 for it) */
    while (i < n && local[i].iov_len == skip) i++, skip = 0;
    if (i == n) break;
    struct iovec l[64], r[64];
    int k = 0;
    for (int j = i; j < n && k < 64; j++, k++) {
      size_t off = j == i ? skip : 0;
      l[k] = (struct iovec){(char *)local[j].iov_base + off, local[j].iov_len - off};
      r[k] = (struct iovec){(char *)remote[j].iov_base + off, remote[j].iov_len - off};
    }
    ssize_t got = write ? process_vm_writev((pid_t)s->peer_pid, l, (unsigned long)k, r, (unsigned long)k, 0)
                        : process_vm_readv((pid_t)s->peer_pid, l, (unsigned long)k, r, (unsigned long)k, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int e = errno;
      asr_debug("fab", "sm region %s: %s process %u: %s", s->name, write ? "writing into" : "reading from",
                s->peer_pid, strerror(e));
      /* EFAULT: the owner's memory is not there any more; ESRCH: the owner is gone */
      return e == EFAULT ? ASR_EPROTO : e == ESRCH ? ASR_ECONNRESET : asr_err_from_errno(e);
    }
    if (got == 0) return ASR_EIO;
    /* a partial copy stops at a piece's boundary or inside one: go on from there */
    size_t left = (size_t)got;
    for (int j = 0; j < k && left; j++) {
      if (left >= l[j].iov_len) {
        left -= l[j].iov_len;
        i++;
        skip = 0;
      } else {
        skip += left;
        left = 0;
      }
    }
  }
  return 0;
}

/* --- SEND ------------------------------------------------------------------ */

/* The owner's applied head: 0, or ASR_EPROTO (broken) when impossible. */
static int osr_read_head(asr__sm_t *s) {
  uint64_t h = atomic_load_explicit(word(s, ASR_SM_OFF_OHEAD), memory_order_acquire);
  if (h < s->ohead_seen || h > s->otail)
    return osr_broken(s, "its one-sided head moved backwards, or past the tail");
  s->ohead_seen = h;
  return 0;
}

/* Whether another notification may be posted: fewer than the depth not
 * taken by the owner's program. 1, 0, or ASR_EPROTO. */
static int notif_room(asr__sm_t *s) {
  uint64_t taken = atomic_load_explicit(word(s, ASR_SM_OFF_NTAKEN), memory_order_acquire);
  if (taken > s->nposted) return osr_broken(s, "its count of notifications taken passed what was posted");
  return s->nposted - taken < ASR_SM_NOTIF_SLOTS;
}

/* Writes the header of a record at the tail (room made; sm_layout.h: the
 * one-sided ring), all but its stamp: where its payload or state go. */
static uint8_t *osr_header(asr__sm_t *s, uint16_t kind, uint16_t flags, uint32_t len, uint32_t slot,
                           uint64_t key, uint64_t dst, uint64_t v) {
  uint8_t *h = s->osr + s->otoff;
  memcpy(h + 4, &kind, 2);
  memcpy(h + 6, &flags, 2);
  memcpy(h + 8, &len, 4);
  memcpy(h + 12, &slot, 4);
  memcpy(h + 16, &key, 8);
  memcpy(h + 24, &dst, 8);
  memcpy(h + 32, &v, 8);
  return h;
}

/* Publishes the record of size bytes at the tail, its bytes written: its
 * stamp (release), then the tail word the owner's checks read. */
static void osr_publish(asr__sm_t *s, uint64_t size) {
  __atomic_store_n((uint32_t *)(void *)(s->osr + s->otoff), (uint32_t)(s->otail / ASR_SM_LINE) + 1u,
                   __ATOMIC_RELEASE);
  s->otail += size;
  s->otoff += size;
  if (s->otoff == s->osr_bytes) s->otoff = 0;
  atomic_store_explicit(word(s, ASR_SM_OFF_OTAIL), s->otail, memory_order_release);
}

/* Whether need bytes of the ring are free, the owner's head read again
 * when they do not seem to be: 1, 0, or ASR_EPROTO. */
static int osr_fits(asr__sm_t *s, uint64_t need) {
  if (s->osr_bytes - (s->otail - s->ohead_seen) >= need) return 1;
  int rc = osr_read_head(s);
  return rc ? rc : s->osr_bytes - (s->otail - s->ohead_seen) >= need;
}

/* Room for a record of size bytes at the tail, a PAD first when it would
 * cross the ring's end: 1, 0 (not now), or ASR_EPROTO. */
static int osr_room(asr__sm_t *s, uint64_t size) {
  uint64_t pad = s->otoff + size > s->osr_bytes ? s->osr_bytes - s->otoff : 0;
  int fits = osr_fits(s, pad + size);
  if (fits <= 0) return fits;
  if (pad) {
    (void)osr_header(s, OSR_PAD, 0, 0, 0, 0, 0, 0);
    osr_publish(s, pad);
  }
  return 1;
}

/* Puts a WRITE or NOTIF record at the tail (room made), which the owner
 * must apply before a later copy (oneed). */
static void osr_put(asr__sm_t *s, uint16_t kind, const uint64_t *notif, uint32_t slot, uint64_t key,
                    uint64_t dst, const void *data, uint32_t len) {
  uint8_t *h = osr_header(s, kind, notif ? OSR_HAS_NOTIF : 0, len, slot, key, dst, notif ? *notif : 0);
  if (len) memcpy(h + ASR_SM_OSR_HDR, data, len);
  osr_publish(s, (ASR_SM_OSR_HDR + len + ASR_SM_LINE - 1) / ASR_SM_LINE * ASR_SM_LINE);
  s->oneed = s->otail;
  if (notif) atomic_store_explicit(word(s, ASR_SM_OFF_NPOSTED), ++s->nposted, memory_order_release);
}

/* Whether the owner applied every write and notification in the ring (a
 * PART record after them needs no applying): 1, 0, or ASR_EPROTO. */
static int osr_applied(asr__sm_t *s) {
  if (s->ohead_seen >= s->oneed) return 1;
  int rc = osr_read_head(s);
  return rc ? rc : s->ohead_seen >= s->oneed;
}

/* Completes op, posted, in post order: at once, or with the send still in
 * flight before it (sm_data.c's wait queue). */
static void op_done_in_order(asr__sm_t *s, asr__ofi_op_t *op, size_t total) {
  if (s->wait_h != s->wait_t) {
    s->wait[s->wait_t % ASR_SM_SLOTS] =
        (asr__sm_wait_t){op, s->wait[(s->wait_t - 1) % ASR_SM_SLOTS].end, total};
    s->wait_t++;
  } else {
    asr__sm_op_done(op, total, 0);
  }
}

/* Posts op now and completes it in post order. */
static void op_posted_done(asr__sm_t *s, asr__ofi_op_t *op, size_t total) {
  asr__sm_op_posted(op);
  op_done_in_order(s, op, total);
}

int asr__sm_write_inline_locked(asr__sm_t *s, const void *src, size_t len, uint64_t dst, uint32_t slot,
                                uint64_t key, const uint64_t *notif, asr__ofi_op_t *op) {
  assert(asr__sm_locked(s) && s->is_send && !s->rd_n); /* reads held were flushed (sm.h) */
  if (s->err) return s->err;
  if (s->pipe.op) return ASR_EAGAIN; /* the ring's order: nothing overtakes a message being pipelined */
  if (notif) {
    int r = notif_room(s);
    if (r <= 0) return r < 0 ? r : ASR_EAGAIN;
  }
  int r = osr_room(s, (ASR_SM_OSR_HDR + len + ASR_SM_LINE - 1) / ASR_SM_LINE * ASR_SM_LINE);
  if (r <= 0) return r < 0 ? r : ASR_EAGAIN;
  osr_put(s, OSR_WRITE, notif, slot, key, dst, src, (uint32_t)len);
  op_posted_done(s, op, len); /* its source may be reused (asr.h) */
  return 0;
}

size_t asr__sm_inline_max(const asr__sm_t *s) {
  size_t cap = s->osr_bytes / 2 - ASR_SM_OSR_HDR;
  return s->cfg.inline_max < cap ? s->cfg.inline_max : cap;
}

int asr__sm_rma_locked(asr__sm_t *s, int write, const struct iovec *local, const struct iovec *remote, int n,
                       size_t total, const uint64_t *notif, asr__ofi_op_t *op) {
  assert(asr__sm_locked(s) && s->is_send && !s->rd_n); /* reads held were flushed (sm.h) */
  if (s->err) return s->err;
  if (!s->peer_pid) return ASR_ENOSYS;
  if (s->pipe.op) return ASR_EAGAIN;
  /* the owner applies the one-sided ring first: a copy straight into its
   * memory must not overtake a small write before it */
  int ap = osr_applied(s);
  if (ap <= 0) return ap < 0 ? ap : ASR_EAGAIN;
  if (notif) {
    int r = notif_room(s);
    if (r <= 0) return r < 0 ? r : ASR_EAGAIN;
    r = osr_room(s, ASR_SM_LINE);
    if (r <= 0) return r < 0 ? r : ASR_EAGAIN;
  }
  int rc = cma(s, write, local, remote, n);
  if (rc) return rc;
  if (notif) osr_put(s, OSR_NOTIF, notif, 0, 0, 0, NULL, 0);
  op_posted_done(s, op, total);
  return 0;
}

/* --- deferred reads ----------------------------------------------------------
 * A read needs nothing of the owner: it is one copy out of the owner's
 * memory. A system call per read would cost more than the copy of a small
 * one, so reads of at most ASR_SM_READ_DEFER_MAX are held on the end, in
 * post order, and copied together -- up to ASR_SM_READS pieces in one
 * process_vm_readv -- by the first of: a test of the comm's requests, any
 * other post on the end, or the (ASR_SM_READS + 1)-th read. The order of
 * the comm's transfers holds: every other post flushes first (sm.h), so no
 * later write or send reaches the owner before a held read copied, and a
 * flush waits, as a read at its post did, until the owner applied every
 * write before it. Each registration is checked again at the copy: one
 * revoked since the post fails its read with ASR_EREVOKED, uncopied. */

void asr__sm_reads_fail(asr__sm_t *s, int err) {
  for (unsigned i = 0; i < s->rd_n; i++) asr__sm_op_done(s->rd[i].op, 0, err);
  s->rd_n = 0;
}

int asr__sm_reads_flush_locked(asr__sm_t *s, asr__sm_alive_fn alive, void *arg) {
  assert(asr__sm_locked(s) && s->is_send);
  if (!s->rd_n) return 0;
  if (s->err) {
    asr__sm_reads_fail(s, s->err);
    return 0;
  }
  if (s->pipe.op) return ASR_EAGAIN;
  int ap = osr_applied(s);
  if (ap < 0) {
    asr__sm_reads_fail(s, ap);
    return 0;
  }
  if (!ap) return ASR_EAGAIN;
  struct iovec l[ASR_SM_READS], r[ASR_SM_READS];
  int err[ASR_SM_READS];
  unsigned k = 0;
  for (unsigned i = 0; i < s->rd_n; i++) {
    asr__sm_read_t *d = &s->rd[i];
    err[i] = alive(arg, d->slot, d->key) ? 0 : ASR_EREVOKED;
    if (err[i]) continue;
    l[k] = (struct iovec){d->lva, d->len};
    r[k++] = (struct iovec){(void *)(uintptr_t)d->raddr, d->len};
  }
  /* one piece's failure would stop the pieces after it too: then each is
   * copied again alone, to say whose failure it is */
  if (cma(s, 0, l, r, (int)k))
    for (unsigned i = 0, j = 0; i < s->rd_n; i++)
      if (!err[i]) err[i] = cma(s, 0, &l[j], &r[j], 1), j++;
  for (unsigned i = 0; i < s->rd_n; i++) {
    if (err[i])
      asr__sm_op_done(s->rd[i].op, 0, err[i]);
    else
      op_done_in_order(s, s->rd[i].op, s->rd[i].len); /* posted when it was held */
  }
  s->rd_n = 0;
  return 0;
}

int asr__sm_read_defer_locked(asr__sm_t *s, void *lva, uint64_t raddr, size_t len, uint32_t slot,
                              uint64_t key, asr__ofi_op_t *op, asr__sm_alive_fn alive, void *arg) {
  assert(asr__sm_locked(s) && s->is_send && len <= ASR_SM_READ_DEFER_MAX);
  if (s->err) return s->err;
  if (!s->peer_pid) return ASR_ENOSYS;
  if (s->rd_n == ASR_SM_READS) {
    int rc = asr__sm_reads_flush_locked(s, alive, arg);
    if (rc) return rc;
  }
  asr__sm_op_posted(op);
  s->rd[s->rd_n++] = (asr__sm_read_t){op, lva, raddr, key, len, slot};
  return 0;
}

/* --- large copies the owner helps ---------------------------------------------
 * A large write or read is one copy; one process_vm_writev / readv makes it
 * on the initiator's core alone. The initiator offers the owner the copy's
 * second half as a PART record in the one-sided ring and copies the first
 * half meanwhile. An owner that applies the ring before the initiator is
 * done (its program polling the comm, or its service thread's tick) takes
 * the offer with a CAS of the record's state, checks the part against its
 * registration, and copies it on its own core, between its memory and the
 * initiator's (process_vm_readv for a write's part, _writev for a read's):
 * still one copy of each byte. An initiator done first takes the offer
 * back with a CAS of the same word and copies the half itself; so a busy
 * or idle owner costs it nothing but the record. The initiator holds its
 * end's lock until the state is final, so the owner never touches a
 * buffer the initiator let go, and no later record of the end (a write's
 * notification comes after both halves) is posted before it. The offer
 * needs no applying for the comm's order: a copy waits only for the
 * writes and notifications before it (oneed), never for a PART record,
 * taken back, still in the ring. */

static int peer_gone(pid_t pid) {
  /* a pidfd is readable once the process ended, zombie or reaped */
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) return errno == ESRCH;
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int gone = poll(&p, 1, 0) > 0;
  close(fd);
  return gone;
}

/* Waits for the owner to finish the part it took: its final state, or
 * PART_TAKEN when the owner died holding it. A spin first (the copy takes
 * microseconds), then yields, asking now and then whether it still lives. */
static uint32_t wait_owner(asr__sm_t *s, _Atomic uint32_t *st) {
  for (unsigned spins = 0;; spins++) {
    uint32_t v = atomic_load_explicit(st, memory_order_acquire);
    if (v != PART_TAKEN) return v;
    if (spins < 4096) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      if (spins % 64 == 0 && peer_gone((pid_t)s->peer_pid)) return PART_TAKEN;
      sched_yield();
    }
  }
}

static int cma_ok(asr__sm_t *s) {
  return s->peer_pid && __atomic_load_n((const uint32_t *)(const void *)(s->base + ASR_SM_OFF_CMA),
                                        __ATOMIC_ACQUIRE) == ASR_SM_CMA_YES;
}

int asr__sm_halves_locked(asr__sm_t *s, int write, void *lva, uint64_t raddr, size_t len, uint32_t slot,
                          uint64_t key, const uint64_t *notif, asr__ofi_op_t *op) {
  assert(asr__sm_locked(s) && s->is_send && !s->rd_n); /* reads held were flushed (sm.h) */
  struct iovec l = {lva, len}, r = {(void *)(uintptr_t)raddr, len};
  uint64_t part = len / 2 / ASR_SM_LINE * ASR_SM_LINE;
  if (s->err || s->pipe.op || part == 0 || part > UINT32_MAX || !cma_ok(s))
    return asr__sm_rma_locked(s, write, &l, &r, 1, len, notif, op);
  int ok = osr_applied(s);
  if (ok <= 0) return ok < 0 ? ok : ASR_EAGAIN;
  if (notif) {
    ok = notif_room(s);
    if (ok <= 0) return ok < 0 ? ok : ASR_EAGAIN;
  }
  /* the offer, and the notification after the data: one line each, which
   * never needs a PAD (the ring and every record are whole lines) */
  ok = osr_fits(s, (notif ? 2 : 1) * ASR_SM_LINE);
  if (ok < 0) return ok;
  if (!ok) return asr__sm_rma_locked(s, write, &l, &r, 1, len, notif, op); /* no room to offer */
  size_t first = len - part;
  uint64_t own = raddr + first, mine = (uint64_t)(uintptr_t)lva + first;
  uint8_t *h = osr_header(s, write ? OSR_WRITE_PART : OSR_READ_PART, 0, (uint32_t)part, slot, key, own, mine);
  _Atomic uint32_t *st = (_Atomic uint32_t *)(void *)(h + OSR_OFF_STATE);
  atomic_store_explicit(st, PART_OFFERED, memory_order_relaxed);
  osr_publish(s, ASR_SM_LINE);

  struct iovec l1 = {lva, first}, r1 = {(void *)(uintptr_t)raddr, first};
  int rc = cma(s, write, &l1, &r1, 1);
  /* a test's schedule (test_rma sm_large_halves): the owner answers the
   * offer, when it polls within offer_hold_ms, before it is taken back */
  for (uint64_t until = s->offer_hold_ms ? asr_time_ms() + s->offer_hold_ms : 0;
       until && atomic_load_explicit(st, memory_order_acquire) == PART_OFFERED && asr_time_ms() < until;)
    sched_yield();
  uint32_t v = PART_OFFERED;
  if (!atomic_compare_exchange_strong_explicit(st, &v, PART_TAKEN_BACK, memory_order_acq_rel,
                                               memory_order_acquire))
    v = v == PART_TAKEN ? wait_owner(s, st) : v;
  int rc2 = 0;
  switch (v) {
    case PART_OFFERED: /* taken back */
    case PART_DECLINED: {
      struct iovec l2 = {(void *)(uintptr_t)mine, part}, r2 = {(void *)(uintptr_t)own, part};
      rc2 = cma(s, write, &l2, &r2, 1);
      break;
    }
    case PART_COPIED: s->helped[write != 0]++; break;
    case PART_REFUSED: rc2 = ASR_EREVOKED; break;
    case PART_TAKEN:
      rc2 = ASR_ECONNRESET; /* the owner died copying it */
      break;
    default: return osr_broken(s, "a PART record's state that is none");
  }
  if (rc || rc2) return rc ? rc : rc2;
  if (notif) osr_put(s, OSR_NOTIF, notif, 0, 0, 0, NULL, 0); /* room made above */
  op_posted_done(s, op, len);
  return 0;
}

/* The owner's side of a PART record (its state PART_OFFERED, taken here):
 * the part, at own in its memory, checked against its registration, then
 * copied from or into the initiator's memory at peer. */
static void owner_copies(asr__sm_t *s, int write_part, _Atomic uint32_t *st, uint32_t slot, uint64_t key,
                         uint64_t own, uint64_t peer, uint32_t len, asr__sm_check_fn check, void *arg) {
  uint32_t v = PART_OFFERED;
  if (!atomic_compare_exchange_strong_explicit(st, &v, PART_TAKEN, memory_order_acq_rel,
                                               memory_order_acquire))
    return; /* taken back (or a state that is none: the initiator's to judge) */
  uint32_t end = PART_DECLINED;
  if (check(arg, slot, key, own, len, write_part ? ASR_MEM_REMOTE_WRITE : ASR_MEM_REMOTE_READ) != 0) {
    end = PART_REFUSED;
  } else if (cma_ok(s)) {
    struct iovec l = {(void *)(uintptr_t)own, len}, r = {(void *)(uintptr_t)peer, len};
    if (cma(s, !write_part, &l, &r, 1) == 0) end = PART_COPIED;
  }
  atomic_store_explicit(st, end, memory_order_release);
}

/* --- RECV (the owner) -------------------------------------------------------- */

int asr__sm_osr_pending(asr__sm_t *s) {
  /* the two words of the region, not the end's own copy of its head,
   * which its lock guards */
  return atomic_load_explicit(word(s, ASR_SM_OFF_OTAIL), memory_order_relaxed) !=
         atomic_load_explicit(word(s, ASR_SM_OFF_OHEAD), memory_order_relaxed);
}

int asr__sm_osr_apply_locked(asr__sm_t *s, asr__sm_check_fn check, void *arg) {
  assert(asr__sm_locked(s) && !s->is_send);
  int moved = 0;
  while (!s->err) {
    uint8_t *h = s->osr + s->ohoff;
    uint32_t stamp = __atomic_load_n((const uint32_t *)(const void *)h, __ATOMIC_ACQUIRE);
    if (stamp != (uint32_t)(s->ohead / ASR_SM_LINE) + 1u) break; /* nothing there yet */
    uint16_t kind, flags;
    uint32_t len, slot;
    uint64_t key, dst, v;
    memcpy(&kind, h + 4, 2);
    memcpy(&flags, h + 6, 2);
    memcpy(&len, h + 8, 4);
    memcpy(&slot, h + 12, 4);
    memcpy(&key, h + 16, 8);
    memcpy(&dst, h + 24, 8);
    memcpy(&v, h + 32, 8);
    uint64_t size;
    if (kind == OSR_PAD) {
      size = s->osr_bytes - s->ohoff;
    } else if (kind == OSR_READ_PART || kind == OSR_WRITE_PART) {
      if (flags) {
        osr_broken(s, "a PART record with flags");
        break;
      }
      size = ASR_SM_LINE;
      owner_copies(s, kind == OSR_WRITE_PART, (_Atomic uint32_t *)(void *)(h + OSR_OFF_STATE), slot, key, dst,
                   v, len, check, arg);
    } else {
      if ((kind != OSR_WRITE && kind != OSR_NOTIF) || (flags & ~OSR_HAS_NOTIF) ||
          (kind == OSR_NOTIF && (len || !(flags & OSR_HAS_NOTIF))) ||
          len > s->osr_bytes - s->ohoff - ASR_SM_OSR_HDR) {
        osr_broken(s, "a record that is not one");
        break;
      }
      size = (ASR_SM_OSR_HDR + len + ASR_SM_LINE - 1) / ASR_SM_LINE * ASR_SM_LINE;
      if ((flags & OSR_HAS_NOTIF) && s->nq_t - s->nq_h == ASR_SM_NOTIF_SLOTS)
        break; /* the program takes first */
      if (kind == OSR_WRITE) {
        /* A write its sender checked against a registration revoked since
         * (or one that names none) is dropped: it never touches the memory
         * (asr.h); its notification, which the sender counts, still comes. */
        if (check(arg, slot, key, dst, len, ASR_MEM_REMOTE_WRITE) == 0)
          memcpy((void *)(uintptr_t)dst, h + ASR_SM_OSR_HDR, len);
        else if (!s->warned_drop++)
          asr_warn("fab",
                   "sm region %s: dropped a write of %u bytes from process %u: not in a live registration "
                   "(deregistered while it was on its way?)",
                   s->name, len, s->peer_pid);
      }
      if (flags & OSR_HAS_NOTIF) s->nq[s->nq_t++ % ASR_SM_NOTIF_SLOTS] = v;
    }
    s->ohead += size;
    s->ohoff += size;
    if (s->ohoff == s->osr_bytes) s->ohoff = 0;
    atomic_store_explicit(word(s, ASR_SM_OFF_OHEAD), s->ohead, memory_order_release);
    moved = 1;
  }
  return moved;
}

int asr__sm_notif_take(asr__sm_t *s, uint64_t *values, int max, asr__sm_check_fn check, void *arg) {
  asr__sm_lock(s);
  (void)asr__sm_osr_apply_locked(s, check, arg);
  int k = 0;
  for (; k < max && s->nq_h != s->nq_t; k++) values[k] = s->nq[s->nq_h++ % ASR_SM_NOTIF_SLOTS];
  if (k) {
    s->ntaken += (uint64_t)k;
    atomic_store_explicit(word(s, ASR_SM_OFF_NTAKEN), s->ntaken, memory_order_release);
    (void)asr__sm_osr_apply_locked(s, check, arg); /* what waited for room in the queue */
  }
  asr__sm_unlock(s);
  return k;
}
