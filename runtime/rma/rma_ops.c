/*
 * rma_ops.c -- posting one-sided transfers on a comm's path, and a
 * prepared list's completion (rma.h). request.c calls these with the
 * comm's data-path lock held, as it posts sends.
 */
#include "config.h"

#include <sys/uio.h>

#include "asr_assert.h"
#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "rma.h"

/* A request exists only in its comm's pool. */
static asr__ofi_op_t *op_of(struct asr_request *r) {
  asr_comm_pool_t *p = asr__comm_pool_of(r->comm);
  return &p->ops[r - p->reqs];
}

/* Whether the owner's table still holds key in slot (rma.h: "The table";
 * an owner whose table is not mapped: yes, its provider checks). */
static int alive(struct asr_comm *c, uint32_t slot, uint64_t key) {
  unsigned n = atomic_load_explicit(&c->rma.nrevoked, memory_order_acquire);
  for (unsigned i = n > ASR_REVOKED_KEEP ? n - ASR_REVOKED_KEEP : 0; i < n; i++)
    if (atomic_load_explicit(&c->rma.revoked[i % ASR_REVOKED_KEEP], memory_order_relaxed) == key) return 0;
  if (!c->rma.tab) return 1;
  return slot < c->rma.tab_slots && atomic_load_explicit(&c->rma.tab[slot], memory_order_acquire) == key;
}

/* How many notifications of SEND comm c its owner took, as far as c
 * knows: the larger of what the mailbox said (ntaken) and the credit word
 * (notif.c). The word is written by c's endpoint's provider only inside
 * calls on that endpoint (data progress is manual: its CQ reads), all made
 * under ep_lock, which the caller holds: it is never read half-written.
 * The owner never writes more than c posted; a word that says so is not
 * the owner's and is ignored. */
static uint64_t notif_taken(struct asr_comm *c) {
  uint64_t taken = atomic_load_explicit(&c->rma.ntaken, memory_order_acquire);
  if (c->rma.credit) {
    uint64_t w = *(volatile uint64_t *)c->rma.credit;
    if (w > taken && w <= c->rma.nposted) taken = w;
  }
  return taken;
}

/* Whether a notification may go now on SEND comm c's libfabric path
 * (endpoint o, whose ep_lock the caller holds): 1 when the peer's ring is
 * known and has room (notif.c), 0 when it must wait, ASR_ENOMEM when the
 * peer could not make its ring. When the ring is not asked for yet, the
 * service thread is told to ask. A full ring reads the CQ once: the
 * owner's credit write may be waiting there. */
static int notif_ready(struct asr_comm *c, asr__ofi_t *o) {
  int st = atomic_load_explicit(&c->rma.ring_state, memory_order_acquire);
  if (st == 3) return ASR_ENOMEM; /* the peer could not make its ring */
  if (st != 2) {
    if (st == 0 && !atomic_exchange(&c->rma.ring_wanted, 1)) {
      atomic_fetch_add(&c->ctx->rma.ring_asks, 1);
      asr__ctx_wake(c->ctx);
    }
    return 0;
  }
  if (c->rma.nposted - notif_taken(c) < ASR_NOTIF_DEPTH) return 1;
  if (!c->rma.credit) return 0;
  (void)asr__ofi_drain_locked(o);
  return c->rma.nposted - notif_taken(c) < ASR_NOTIF_DEPTH;
}

/* Fills t's notification half for the next notification of c, in the
 * direct form where the value has one (rma.h). */
static void notif_target(struct asr_comm *c, asr__ofi_rma_t *t, const uint64_t *val) {
  uint64_t seq = c->rma.nposted;
  t->notif_val = val;
  t->ring_addr = c->rma.ring_addr + (seq % ASR_NOTIF_DEPTH) * sizeof(uint64_t);
  t->ring_key = c->rma.ring_key;
  t->notif_direct = asr__notif_imm_direct(c->osend.peer_comm_id, *val, &t->imm);
  if (!t->notif_direct) t->imm = asr__notif_imm_ring(c->osend.peer_comm_id, seq);
}

static int post_list_ofi(struct asr_comm *c, asr__ofi_t *o, struct asr_xfer *x, asr__rma_t *a,
                         asr__ofi_op_t *agg, int spin_ms) {
  int write = x->op == ASR_XFER_WRITE, notify = write && (a->flags & ASR_WRITE_NOTIFY);
  if (x->next_post == 0) {
    for (int i = 0; i < x->n; i++)
      if (!alive(c, x->ents[i].slot, x->ents[i].key)) return ASR_EREVOKED;
    /* nothing of it goes before the notification can go too */
    int ready = notify ? notif_ready(c, o) : 1;
    if (ready <= 0) return ready < 0 ? ready : ASR_EAGAIN;
    __atomic_store_n(&agg->posted, 0, __ATOMIC_RELAXED); /* never libfabric's: its entries are */
    __atomic_store_n(&agg->done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&agg->err, 0, __ATOMIC_RELAXED);
    x->next_done = 0;
    x->failed = 0;
  }
  while (x->next_post < x->n) {
    const asr__xent_t *e = &x->ents[x->next_post];
    asr__ofi_rma_t t = {.raddr = e->raddr, .key = e->key};
    int last = x->next_post == x->n - 1;
    if (last && notify) notif_target(c, &t, &a->notif);
    int rc =
        asr__ofi_rma_locked(o, &c->osend, write, e->lva, e->len, e->desc, &t, &x->ops[x->next_post], spin_ms);
    if (rc == ASR_EAGAIN) return rc;
    if (rc) {
      if (x->next_post == 0) return rc;
      /* entries are in flight: the list completes with this error once they did */
      x->failed = rc;
      x->n_active = x->next_post;
      x->next_post = x->n;
      return 0;
    }
    if (last && notify) c->rma.nposted++;
    x->next_post++;
  }
  x->n_active = x->n;
  return 0;
}

int asr__rma_post_ofi_locked(struct asr_comm *c, struct asr_request *r, asr__rma_t *a, void *va,
                             struct fid_mr *mr, int spin_ms) {
  asr__ofi_t *o = asr__comm_ofi(c);
  if (!o->rma) return ASR_ENOSYS;
  asr__ofi_op_t *op = op_of(r);
  if (r->type == ASR_REQ_XFER) return post_list_ofi(c, o, a->x, a, op, spin_ms);
  if (!alive(c, a->slot, a->key)) return ASR_EREVOKED;
  int write = r->type == ASR_REQ_WRITE, notify = write && (a->flags & ASR_WRITE_NOTIFY);
  asr__ofi_rma_t t = {.raddr = a->raddr, .key = a->key};
  if (notify) {
    int ready = notif_ready(c, o);
    if (ready <= 0) return ready < 0 ? ready : ASR_EAGAIN;
    notif_target(c, &t, &a->notif);
  }
  int rc = asr__ofi_rma_locked(o, &c->osend, write, (char *)va + r->offset, r->length,
                               asr__ofi_mr_desc(o, mr), &t, op, spin_ms);
  if (rc == 0 && notify) c->rma.nposted++;
  return rc;
}

int asr__rma_xfer_poll_locked(struct asr_xfer *x, asr__ofi_op_t *op) {
  if (x->next_post < x->n) return 0; /* not all posted yet (it is stashed) */
  while (x->next_done < x->n_active && asr__ofi_op_done(&x->ops[x->next_done])) {
    int err = asr__ofi_op_result(&x->ops[x->next_done], NULL);
    if (err && !x->failed) x->failed = err;
    x->next_done++;
  }
  if (x->next_done < x->n_active) return 0;
  __atomic_store_n(&op->len, x->total, __ATOMIC_RELAXED);
  __atomic_store_n(&op->err, x->failed, __ATOMIC_RELAXED);
  __atomic_store_n(&op->done, 1, __ATOMIC_RELEASE);
  return 1;
}

void asr__rma_xfer_cancel(asr__ofi_t *o, struct asr_xfer *x, uint64_t until_ms) {
  if (!x->ops) return;
  for (int i = 0; i < x->n; i++)
    if (asr__ofi_op_owned(&x->ops[i])) {
      uint64_t now = asr_time_ms();
      (void)asr__ofi_cancel(o, &x->ops[i], now < until_ms ? (int)(until_ms - now) : 0);
    }
}

/* The sm end's check of a held read, just before its copy (asr__sm_alive_fn). */
static int sm_alive(void *arg, uint32_t slot, uint64_t key) { return alive(arg, slot, key); }

int asr__rma_sm_flush_locked(struct asr_comm *c) {
  return asr__sm_reads_flush_locked(asr__comm_sm(c), sm_alive, c);
}

int asr__rma_post_sm_locked(struct asr_comm *c, struct asr_request *r, asr__rma_t *a, void *va) {
  asr__sm_t *s = asr__comm_sm(c);
  if (!c->rma.tab) return ASR_ENOSYS; /* the import maps it on this path */
  asr__ofi_op_t *op = op_of(r);
  if (r->type == ASR_REQ_READ && r->length <= ASR_SM_READ_DEFER_MAX) {
    if (!alive(c, a->slot, a->key)) return ASR_EREVOKED;
    return asr__sm_read_defer_locked(s, (char *)va + r->offset, a->raddr, r->length, a->slot, a->key, op,
                                     sm_alive, c);
  }
  /* nothing overtakes a read held (sm/sm.h) */
  if (asr__sm_reads_held(s)) {
    int rc = asr__rma_sm_flush_locked(c);
    if (rc) return rc;
  }
  if (r->type == ASR_REQ_XFER) {
    struct asr_xfer *x = a->x;
    for (int i = 0; i < x->n; i++)
      if (!alive(c, x->ents[i].slot, x->ents[i].key)) return ASR_EREVOKED;
    int write = x->op == ASR_XFER_WRITE;
    return asr__sm_rma_locked(s, write, x->liov, x->riov, x->n, x->total,
                              write && (a->flags & ASR_WRITE_NOTIFY) ? &a->notif : NULL, op);
  }
  if (!alive(c, a->slot, a->key)) return ASR_EREVOKED;
  int write = r->type == ASR_REQ_WRITE;
  /* a small write: into the one-sided ring, which the owner applies (no
   * system call; sm/sm_rma.c) */
  if (write && r->length <= asr__sm_inline_max(s))
    return asr__sm_write_inline_locked(s, (char *)va + r->offset, r->length, a->raddr, a->slot, a->key,
                                       (a->flags & ASR_WRITE_NOTIFY) ? &a->notif : NULL, op);
  if (r->length > ASR_SM_HALVES_MIN)
    return asr__sm_halves_locked(s, write, (char *)va + r->offset, a->raddr, r->length, a->slot, a->key,
                                 write && (a->flags & ASR_WRITE_NOTIFY) ? &a->notif : NULL, op);
  struct iovec l = {(char *)va + r->offset, r->length}, rr = {(void *)(uintptr_t)a->raddr, r->length};
  return asr__sm_rma_locked(s, write, &l, &rr, 1, r->length,
                            write && (a->flags & ASR_WRITE_NOTIFY) ? &a->notif : NULL, op);
}
