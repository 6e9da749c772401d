/*
 * sm.h -- asr's own same-host path, one comm's end of it (sm_layout.h
 * says what the two ends share; doc/design.md, "The data path").
 *
 * An asr__sm_t is process-local: the mapping of the comm's region, the
 * lock that serialises this process's threads on it (never shared with the
 * peer), and what this end keeps of the transfers in flight. Its
 * operations are the asr__ofi_op_t of the comm's request pool, as on the
 * libfabric paths: a post marks its op posted, and the progress that
 * finishes it sets done (release), err and len, so that asr_test
 * (request.c) reads an sm op as it reads a libfabric one.
 *
 *   send, inline (len <= ASR_SM_INLINE_MAX): copied into the ring at the
 *        post; done at once (its bytes may be overwritten: asr.h's promise).
 *   send, large, the receiver able to copy from us (cma = 1): a CMA record
 *        names the buffer; done once the receiver's head passed the record
 *        (it copied the message with process_vm_readv, one copy).
 *   send, large, otherwise (ASR_SM_CMA=0 on either end, or the kernel
 *        refused the probe): CHUNK records, pushed as the ring has room by
 *        each progress of the comm; done when the last one is in.
 *   recv: queued in post order; the progress that finds the n-th message
 *        in the ring copies it into the n-th receive.
 * A post that finds no room returns ASR_EAGAIN (the caller stashes, seed
 * §2: "a full ring stashes the request as an EAGAIN from the provider").
 */
#ifndef ASR_SM_H
#define ASR_SM_H

#include <stdint.h>

#include "../ofi.h"
#include "sm_layout.h"

_Static_assert(ASR_SM_HANDLE_LEN == ASR_OFI_HANDLE_LEN, "an sm handle is a net handle");

/* The requests a comm can have in flight (rt.h: ASR_RING, the seed's
 * 128-request pool; asserted there): so many slots never overflow. */
#define ASR_SM_SLOTS 128

typedef struct {
  asr__ofi_op_t *op;
  uint8_t *buf;
  size_t cap;
} asr__sm_recv_slot_t;

typedef struct {
  asr__ofi_op_t *op;
  uint64_t end; /* the head that completes it */
  size_t len;   /* what its completion says it moved (a send's: 0, asr_test says its length) */
} asr__sm_wait_t;

/* The reads a SEND end holds before one system call copies them all
 * (sm_rma.c: "deferred reads"): as many as that call takes pieces. */
#define ASR_SM_READS 64
/* The largest read deferred; a larger one is copied at its post. */
#define ASR_SM_READ_DEFER_MAX ((size_t)64 << 10)

typedef struct {
  asr__ofi_op_t *op;
  uint8_t *lva;
  uint64_t raddr, key;
  size_t len;
  uint32_t slot;
} asr__sm_read_t;

/* The settings an LNC read at asr_init (ASR_SM_*). */
typedef struct {
  uint32_t region; /* bytes per comm's region */
  uint32_t inline_max;
  int cma; /* 0: large messages never copied across processes */
} asr__sm_cfg_t;

typedef struct asr__sm {
  asr__spin_t lock;
#ifndef NDEBUG
  _Atomic uintptr_t owner; /* the thread holding lock (debug builds) */
#endif
  uint8_t *base; /* the mapping */
  size_t len;
  uint8_t *ring;
  uint64_t ring_bytes;
  char name[ASR_SM_NAME_MAX];
  int named; /* the name may still be in /dev/shm (ours to unlink) */
  int is_send;
  uint32_t peer_pid; /* 0 until known */
  asr__sm_cfg_t cfg;
  int err;         /* ASR_EPROTO once the peer broke the layout (sticky) */
  const char *why; /* what it broke */
  /* SEND */
  uint64_t tail;                     /* absolute position of the next record */
  uint64_t toff;                     /* its offset in the ring */
  uint64_t head_seen;                /* the receiver's head, as last read */
  uint64_t sent;                     /* messages whose first record is in the ring */
  asr__sm_wait_t wait[ASR_SM_SLOTS]; /* CMA sends waiting for the head, in ring order */
  unsigned wait_h, wait_t;
  struct {
    asr__ofi_op_t *op; /* the pipelined send being pushed, or NULL */
    const uint8_t *buf;
    uint64_t total, off;
  } pipe;
  /* RECV */
  uint64_t head;  /* absolute position of the next record to read */
  uint64_t hoff;  /* its offset in the ring */
  uint64_t taken; /* messages consumed */
  uint64_t posted;
  asr__sm_recv_slot_t rq[ASR_SM_SLOTS]; /* posted receives, in post order */
  unsigned rq_h, rq_t;
  uint64_t in_msg, msg_total; /* the pipelined message being taken */
  int msg_skip;               /* it is refused (truncated): its chunks are dropped */
  /* the one-sided ring (sm_layout.h; sm_rma.c) */
  uint8_t *osr;
  uint64_t osr_bytes;
  uint64_t otail, otoff, ohead_seen, nposted; /* SEND */
  uint64_t oneed;                             /* SEND: the tail after the last record the owner must apply */
  uint64_t helped[2];                         /* SEND: reads [0], writes [1] whose half the owner made */
  unsigned offer_hold_ms; /* SEND, tests only: how long an offer waits for the owner's answer (sm_rma.c) */
  asr__sm_read_t rd[ASR_SM_READS]; /* SEND: reads posted, not yet copied, in post order */
  unsigned rd_n;
  uint64_t ohead, ohoff, ntaken;   /* RECV */
  uint64_t nq[ASR_SM_NOTIF_SLOTS]; /* RECV: notifications applied, not yet taken */
  unsigned nq_h, nq_t;
  unsigned warned_drop; /* RECV: writes dropped by the owner's check (said once) */
  /* on the process's list of ends with work that only a progress moves
   * (sm_data.c: "the waiting ends") */
  struct asr__sm *wprev, *wnext;
  int waiting;
} asr__sm_t;

static inline void asr__sm_lock(asr__sm_t *s) {
  asr__spin_lock(&s->lock);
#ifndef NDEBUG
  atomic_store_explicit(&s->owner, asr_thread_id(), memory_order_relaxed);
#endif
}
static inline void asr__sm_unlock(asr__sm_t *s) {
#ifndef NDEBUG
  atomic_store_explicit(&s->owner, 0, memory_order_relaxed);
#endif
  asr__spin_unlock(&s->lock);
}

/* An op's post, and its last touch (ofi.h: done, with release, publishes
 * err and len), on either of the sm path's files. */
static inline void asr__sm_op_posted(asr__ofi_op_t *op) {
  __atomic_store_n(&op->done, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&op->err, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&op->len, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&op->posted, 1, __ATOMIC_RELAXED);
}
static inline void asr__sm_op_done(asr__ofi_op_t *op, size_t len, int err) {
  __atomic_store_n(&op->len, len, __ATOMIC_RELAXED);
  __atomic_store_n(&op->err, err, __ATOMIC_RELAXED);
  __atomic_store_n(&op->done, 1, __ATOMIC_RELEASE);
}
#ifndef NDEBUG
static inline int asr__sm_locked(const asr__sm_t *s) {
  return atomic_load_explicit(&s->owner, memory_order_relaxed) == asr_thread_id();
}
#endif

/* Reads ASR_SM_REGION, ASR_SM_INLINE_MAX and ASR_SM_CMA: 0, or ASR_ECONFIG
 * with err (asr_init fails with it). */
int asr__sm_cfg_read(asr__sm_cfg_t *cfg, char *err, size_t errlen);

/* RECV, LISTEN: makes the comm's region (lnc names it), writes the handle
 * (ordinal and path bytes aside: connect.c). 0, or an ASR_E* with err. */
int asr__sm_listen(asr__sm_t **out, const asr__sm_cfg_t *cfg, int lnc, const uint8_t who[ASR_OFI_WHO_LEN],
                   uint8_t handle[ASR_OFI_HANDLE_LEN], char *err, size_t errlen);

/* RECV, NET_CONNECT: 1 once the sender attached (its who in *who), 0 not
 * yet. At the first 1 it probes whether it may copy from the sender and
 * says which way large messages go (info log). */
int asr__sm_accept(asr__sm_t *s, int lnc, uint8_t who[ASR_OFI_WHO_LEN]);

/* SEND, NET_CONNECT: maps the region the handle names, checks it, writes
 * our who and unlinks the name. 0, or an ASR_E* with err. */
int asr__sm_connect(asr__sm_t **out, const asr__sm_cfg_t *cfg, const uint8_t handle[ASR_OFI_HANDLE_LEN],
                    const uint8_t who[ASR_OFI_WHO_LEN], uint8_t peer_who[ASR_OFI_WHO_LEN], char *err,
                    size_t errlen);

/* Unmaps and frees s (a RECV end whose sender never attached unlinks its
 * name first). NULL is allowed. */
void asr__sm_free(asr__sm_t *s);

/* Posts (the caller holds s's lock): 0, ASR_EAGAIN (no room: stash), or
 * the sticky ASR_EPROTO. */
int asr__sm_send_locked(asr__sm_t *s, const void *buf, size_t len, asr__ofi_op_t *op);
int asr__sm_recv_locked(asr__sm_t *s, void *buf, size_t cap, asr__ofi_op_t *op);

/* Moves what can move on s (the caller holds its lock): a SEND end reads
 * the head, completes the CMA sends it passed and pushes the pipelined
 * send; a RECV end takes the messages in the ring into its receives.
 * Returns 1 when something moved. */
int asr__sm_progress_locked(asr__sm_t *s);

/* Completes every op s still holds as ASR_ECANCELED (asr_comm_close, before
 * the comm's pool is freed: no later progress may touch them). */
void asr__sm_cancel_all(asr__sm_t *s);

/* Progress for the ends of this process that wait on their peers: each
 * SEND end pushing a pipelined message, each RECV end with receives
 * posted (sm_data.c says why a poll of one comm moves the others).
 * skip (locked by the caller, or NULL) is left out. Any thread; takes no
 * lock it would wait for. Returns 1 when something moved. */
int asr__sm_progress_waiting(asr__sm_t *skip);
/* Whether some SEND end of this process pushes a pipelined message, or did
 * until the last walk (the service thread then ticks every millisecond,
 * pushing it; the walk takes an end whose push ended off the list). */
int asr__sm_pipes_active(void);
/* Takes s off that list (asr__sm_free does, before it unmaps s). */
void asr__sm_unlist(asr__sm_t *s);

/* The close handshake (drain.c), on the region's words. SEND: the
 * messages sent; fin writes them; peer_state reads taken and closed.
 * RECV: closed tells the sender; taken counts what was taken; peer_fin is
 * 1 + the count the sender's fin announced (0: none: it died without
 * closing), with *taken read at the same moment. */
uint64_t asr__sm_sent(asr__sm_t *s);
void asr__sm_fin(asr__sm_t *s, uint64_t n);
void asr__sm_peer_state(asr__sm_t *s, uint64_t *taken, int *closed);
void asr__sm_closed(asr__sm_t *s);
uint64_t asr__sm_taken(asr__sm_t *s);
uint64_t asr__sm_peer_fin(asr__sm_t *s, uint64_t *taken);

/* One-sided transfers (sm_rma.c), on a SEND end whose lock the caller
 * holds. asr__sm_rma_locked copies the n pieces local[i] into the peer's
 * remote[i] (write) or back (read), total bytes in all, then posts *notif
 * (NULL: none); asr__sm_write_inline_locked puts a write of len bytes (at
 * most asr__sm_inline_max) to the owner's dst, of its registration (slot,
 * key), into the one-sided ring, with *notif. 0 with op completed (or,
 * behind a send still in flight, completing with it); ASR_EAGAIN when it
 * must wait (a message being pipelined, no room in the ring, the depth of
 * notifications reached, or, for a copy, the owner has not applied the
 * ring yet): nothing was moved; another ASR_E* when the copy failed. */
struct iovec;
int asr__sm_rma_locked(asr__sm_t *s, int write, const struct iovec *local, const struct iovec *remote, int n,
                       size_t total, const uint64_t *notif, asr__ofi_op_t *op);
int asr__sm_write_inline_locked(asr__sm_t *s, const void *src, size_t len, uint64_t dst, uint32_t slot,
                                uint64_t key, const uint64_t *notif, asr__ofi_op_t *op);
size_t asr__sm_inline_max(const asr__sm_t *s);
/* Deferred reads (sm_rma.c), on a SEND end whose lock the caller holds.
 * alive(arg, slot, key) says whether the owner's registration (slot, key)
 * still lives; it is asked again just before the copy. read_defer takes
 * a read of len (at most ASR_SM_READ_DEFER_MAX) bytes from the owner's
 * raddr into lva: 0 (op posted, not done), ASR_EAGAIN (ASR_SM_READS held
 * and they cannot be copied yet: stash) or the end's sticky error.
 * reads_flush copies every read held, completing each op (an error of one
 * read is its op's): 0, or ASR_EAGAIN when they must wait (a message being
 * pipelined, or the owner has not applied the one-sided ring before them).
 * Every other post of the end flushes first: nothing overtakes a read. */
typedef int (*asr__sm_alive_fn)(void *arg, uint32_t slot, uint64_t key);
int asr__sm_read_defer_locked(asr__sm_t *s, void *lva, uint64_t raddr, size_t len, uint32_t slot,
                              uint64_t key, asr__ofi_op_t *op, asr__sm_alive_fn alive, void *arg);
int asr__sm_reads_flush_locked(asr__sm_t *s, asr__sm_alive_fn alive, void *arg);
/* Fails every read held with err (the end broke, or its comm closes). */
void asr__sm_reads_fail(asr__sm_t *s, int err);
static inline int asr__sm_reads_held(const asr__sm_t *s) { return s->rd_n != 0; }
/* A write (write 1) of lva to the owner's raddr, or a read back, of more
 * than ASR_SM_HALVES_MIN bytes of the owner's registration (slot, key),
 * copied at its post; the owner, when it polls meanwhile, copies its
 * second half (sm_rma.c: "large copies the owner helps"). As
 * asr__sm_rma_locked, and ASR_EREVOKED when the owner's check refused its
 * part. */
#define ASR_SM_HALVES_MIN ((size_t)64 << 10)
int asr__sm_halves_locked(asr__sm_t *s, int write, void *lva, uint64_t raddr, size_t len, uint32_t slot,
                          uint64_t key, const uint64_t *notif, asr__ofi_op_t *op);
/* The owner's check of a write or read the ring carries: 0 when [dst,
 * dst + len) lies in its live registration (slot, key), which grants
 * access (ASR_MEM_REMOTE_WRITE or _READ). */
typedef int (*asr__sm_check_fn)(void *arg, uint32_t slot, uint64_t key, uint64_t dst, uint64_t len,
                                unsigned access);
/* A RECV end: applies the one-sided ring (its lock held; 1 when something
 * moved); whether it has records not applied (a racy look, no lock); takes
 * up to max notifications, oldest first, applying the ring first (takes
 * the lock): how many. */
int asr__sm_osr_apply_locked(asr__sm_t *s, asr__sm_check_fn check, void *arg);
int asr__sm_osr_pending(asr__sm_t *s);
int asr__sm_notif_take(asr__sm_t *s, uint64_t *values, int max, asr__sm_check_fn check, void *arg);

/* An exit handler unlinks the regions made and not yet attached (a
 * process that exits with RECV comms still waiting for their senders). */
void asr__sm_names_exit(void);

#endif /* ASR_SM_H */
