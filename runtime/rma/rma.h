/*
 * rma.h -- one-sided transfers (asr.h, "One-sided transfers"; issue 51):
 * the records behind asr_mem_t, asr_rmem_t and asr_xfer_t, and the
 * functions the rest of libasr calls.
 *
 * Modules, one way only (tests/check-layering.sh):
 *   mem_desc.c  the descriptor's codec (pure; fuzzed)
 *   mem.c       registrations: asr_mem_register / deregister / export, their
 *               libfabric registrations on each endpoint, the table peers on
 *               this host check (below)
 *   rma_ops.c   posting a write, read or list post on a comm's path, and a
 *               list's completion: request.c calls it
 *   rma_api.c   asr_mem_import, asr_write, asr_read, asr_xfer_*: checks
 *               every argument and posts through request.c
 *   notif.c     notifications: the rings of the libfabric paths, their
 *               mailbox handshake, asr_notif_poll; the owner's progress
 *
 * Keys. A registration gets one key for its whole life, used on every
 * endpoint of its LNC (those open and those opened later: mem.c registers
 * it there then): (lnc << 48) | (1 << 47) | n, n counting from 1, so that
 * no key ever names two registrations of an LNC (a revoked registration's
 * key stays unused: a peer holding it reaches nothing) and none collides
 * with ofi.c's own keys, which count from (lnc << 48) | 1.
 *
 * The table (asr_mem_register makes it): one memfd per LNC of
 * ASR_MEM_TAB_SLOTS 64-bit words, word i the key of the registration in
 * slot i while it lives, 0 once it is revoked (or never used). The sm
 * path's initiator copies into and out of the owner's memory itself
 * (process_vm_writev / readv), so the owner's provider checks nothing
 * there: the initiator maps the owner's table (pidfd_getfd of the
 * descriptor's fd, the right that process_vm_writev needs too) and checks
 * the word of its slot before each access. asr_mem_deregister zeroes the
 * word before it returns.
 */
#ifndef ASR_RMA_H
#define ASR_RMA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "mem_desc.h"
#include "../rt.h"

#define ASR_MEM_TAB_SLOTS 65536u /* registrations an LNC holds at once */
#define ASR_MEM_KEY_BIT (1ull << 47)

/* The remote CQ data of a notifying write on a libfabric path (notif.c),
 * in one of two forms, told apart by bit 63:
 *   ring    (0)  the RECV comm's id << 40 | the notification's sequence
 *                number; the value went into the ring slot of that number
 *   direct  (1)  bit 63 | the comm's id << 48 | the value: a value below
 *                2^48 for a comm whose id is below 2^15 rides in the CQ
 *                data alone, so the write is one plain fi_writedata, as
 *                raw libfabric's is; the owner puts it into its ring
 *                itself, in the slot of its arrival
 * Both forms arrive in the order they were posted (the writes of one
 * endpoint pair are ordered: ASR_OFI_RMA_ORDER), so the n-th arrival of a
 * comm is its n-th notification whichever form each took. */
#define ASR_NOTIF_SEQ_MASK ((1ull << 40) - 1)
#define ASR_NOTIF_DIRECT (1ull << 63)
#define ASR_NOTIF_DIRECT_VAL ((1ull << 48) - 1)
#define ASR_NOTIF_DIRECT_IDS (1u << 15)
_Static_assert(((uint64_t)ASR_OFI_COMM_ID_MAX << 40) < ASR_NOTIF_DIRECT,
               "a ring-form comm id never reaches the direct form's bit (ofi.h)");

static inline uint64_t asr__notif_imm_ring(uint32_t comm_id, uint64_t seq) {
  return ((uint64_t)comm_id << 40) | (seq & ASR_NOTIF_SEQ_MASK);
}
/* The direct form of value for comm_id in *imm: 1, or 0 when it has none. */
static inline int asr__notif_imm_direct(uint32_t comm_id, uint64_t value, uint64_t *imm) {
  if (value > ASR_NOTIF_DIRECT_VAL || comm_id >= ASR_NOTIF_DIRECT_IDS) return 0;
  *imm = ASR_NOTIF_DIRECT | ((uint64_t)comm_id << 48) | value;
  return 1;
}

/* A registration (asr_mem_t). Its fields are written by asr_mem_register
 * before its handle is live, and never after, but mr[] (under the LNC's
 * ep_mutex: an endpoint opened later registers it, mem.c). */
struct asr_mem {
  _Atomic uint64_t live;
  struct asr_ctx *ctx;
  void *va;
  size_t len;
  unsigned access;
  uint64_t key;
  uint32_t slot;
  struct fid_mr *mr[ASR_NEPS];
  struct asr_mem *next, *prev; /* on ctx->rma.mems (ep_mutex) */
};

/* An import (asr_rmem_t): the descriptor, checked, for one SEND comm. */
struct asr_rmem {
  _Atomic uint64_t live;
  struct asr_comm *comm;
  uint64_t hcomm; /* the comm's handle at import: a post checks it still lives */
  asr__mem_desc_t d;
  uint64_t base; /* the target address of the region's first byte on the comm's path */
};

/* One entry of a prepared list: the local bytes and the remote target. */
typedef struct {
  void *lva;
  size_t len;
  void *desc;     /* the local registration's descriptor (FI_MR_LOCAL), else NULL */
  uint64_t raddr; /* as asr__rma_t's */
  uint64_t key;
  uint32_t slot;
} asr__xent_t;

/* A prepared list (asr_xfer_t). ents and ops are made by asr_xfer_prep;
 * a post owns the rest until its request completes (busy). */
struct asr_xfer {
  _Atomic uint64_t live;
  struct asr_comm *comm;
  uint64_t hcomm;
  int op; /* ASR_XFER_WRITE or ASR_XFER_READ */
  int n;
  asr__xent_t *ents;
  asr__ofi_op_t *ops;        /* one per entry (libfabric paths) */
  struct iovec *liov, *riov; /* the same entries for the sm path's copies */
  size_t total;              /* the bytes of all entries */
  int next_post;             /* entries posted so far by this post */
  int n_active;              /* entries this post put in flight (n, or fewer when one failed) */
  int next_done;             /* entries before it completed */
  int failed;                /* the first error of an entry (ASR_E*), or 0 */
  _Atomic int busy;          /* a post of it is in flight */
};

/* --- mem.c ------------------------------------------------------------------ */

/* The job secret that tags descriptors (ASR_JOB_SECRET; zeros without
 * one). 0, or ASR_ECONFIG with err when it is malformed. */
int asr__mem_secret(uint8_t secret[ASR_MEM_SECRET_LEN], char *err, size_t errlen);
/* Endpoint i of ctx was just opened (paths.c, ep_mutex held): registers
 * every live registration of ctx there. */
void asr__mem_ep_opened(asr_ctx_t *ctx, int i);
/* asr_close of ctx: every registration is revoked and freed (its handle
 * dies), the table unmapped; before the endpoints close. */
void asr__mem_ctx_close(asr_ctx_t *ctx);

/* --- rma_ops.c ----------------------------------------------------------------- */

/* Posts write, read or list request r (its rma args a) on c's endpoint
 * or sm end, whose lock the caller holds; va is r's tensor's memory
 * (writes, reads) and mr its registration (or NULL). As a send's post:
 * 0, ASR_EAGAIN (stash it: no room, or a notification must wait for the
 * owner's ring or room in it), or another ASR_E*. A list that could post
 * only some of its entries returns ASR_EAGAIN and goes on from there at
 * the next call. */
int asr__rma_post_ofi_locked(struct asr_comm *c, struct asr_request *r, asr__rma_t *a, void *va,
                             struct fid_mr *mr, int spin_ms);
int asr__rma_post_sm_locked(struct asr_comm *c, struct asr_request *r, asr__rma_t *a, void *va);
/* Copies the reads SEND comm c's sm end holds (sm/sm.h: deferred reads;
 * its lock held): 0, or ASR_EAGAIN when they must wait. */
int asr__rma_sm_flush_locked(struct asr_comm *c);
/* Applies RECV comm c's sm one-sided ring (its lock held), as its
 * asr_notif_poll does: a test of the owner's requests serves the reads
 * its peer offers it (sm/sm_rma.c). 1 when something moved. */
int asr__rma_sm_apply_locked(struct asr_comm *c);
/* A list request on a libfabric path: completes op (its pool op) once
 * every entry completed; 1 then. The comm's lock is held. */
int asr__rma_xfer_poll_locked(struct asr_xfer *x, asr__ofi_op_t *op);
/* Cancels the entries of list x still libfabric's (asr_comm_close). */
void asr__rma_xfer_cancel(asr__ofi_t *o, struct asr_xfer *x, uint64_t until_ms);

/* --- notif.c ------------------------------------------------------------------- */

/* A mailbox message of the ring handshake for comm c (drain.c's dispatch;
 * service thread, comms.mutex held). */
void asr__notif_on_ctl(asr_ctx_t *ctx, struct asr_comm *c, const asr__ofi_ctl_t *m);
/* RECV comm c got its sender's FIN (drain.c's dispatch, before it can
 * answer ACK): no credit write goes to the sender from now on. */
void asr__notif_on_fin(struct asr_comm *c);
/* The service thread's part (each tick): asks the peers of SEND comms that
 * want a ring for it, and moves each endpoint while registrations live
 * (manual progress: a peer's write or read lands only when the owner's CQ
 * is read). Lowers *tmo to 1 ms then. Returns 1 when it did something. */
int asr__notif_tick(asr_ctx_t *ctx, int *tmo);
/* Hooks endpoint i's remote CQ data to ctx's rings (paths.c, at open). */
void asr__notif_ep_opened(asr_ctx_t *ctx, int i);
/* asr_close of ctx, its comms freed: the rings' tables go. */
void asr__notif_ctx_close(asr_ctx_t *ctx);
/* Comm c is being freed: its ring (RECV), or the owner's table it mapped
 * (SEND, sm path), goes. */
void asr__notif_comm_free(struct asr_comm *c);

#endif /* ASR_RMA_H */
