/*
 * request.c -- post, progress and complete (seed §2): enc_async_sr_post_op,
 * the service thread's post drain, enc_async_sr_test_request, and the flush.
 */
#include "config.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "asr_assert.h"
#include "asr_err.h"
#include "asr_log.h"
#include "rma/rma.h"
#include "rt.h"

static const char *const req_status_names[] = {"FREE", "STASHED", "OFI_POSTED", "ERROR"};

static const char *req_type_name(int type) {
  static const char *const names[] = {"untyped", "send", "recv", "write", "read", "list"};
  return type >= 0 && type <= ASR_REQ_XFER ? names[type] : "?";
}

/* A request exists only in its comm's pool, so the pool is there. */
static asr__ofi_op_t *op_of(struct asr_request *r) {
  asr_comm_pool_t *p = asr__comm_pool_of(r->comm);
  return &p->ops[r - p->reqs];
}

/* The one place a request's status changes (seed §1's machine: FREE ->
 * STASHED -> OFI_POSTED -> FREE, FREE -> OFI_POSTED on the fast path, any
 * of those -> ERROR -> FREE). A release store: whoever reads the status
 * with an acquire load sees the request's fields as they were set before.
 * Debug builds check the transition and log it (ASR_LOG_LEVEL=trace); a
 * release build pays the store alone, on the post and completion paths. */
static inline void req_set_status(struct asr_request *r, asr_req_status_t to) {
#ifndef NDEBUG
  int from = atomic_load_explicit(&r->status, memory_order_relaxed);
  assert(from != (int)to);
  assert(
      to == ASR_REQ_ERROR || (from == ASR_REQ_FREE && (to == ASR_REQ_STASHED || to == ASR_REQ_OFI_POSTED)) ||
      (from == ASR_REQ_STASHED && to == ASR_REQ_OFI_POSTED) || (from != ASR_REQ_FREE && to == ASR_REQ_FREE));
  if (r->comm->ctx->trace)
    asr_trace("svc", "request %p: %s -> %s", (void *)r, req_status_names[from & 3], req_status_names[to & 3]);
#endif
  atomic_store_explicit(&r->status, to, memory_order_release);
}

/* Resets r and pushes it back on its comm's freelist; the comm's data-path
 * lock is held (asr__comm_lock: ep_lock, or the sm end's). */
static void recycle_locked(struct asr_request *r) {
  struct asr_comm *c = r->comm;
  assert(asr__comm_locked(c));
  r->tensor = NULL;
  r->offset = 0;
  r->length = 0;
  r->type = ASR_REQ_NOTYPE;
  r->ofi_req = NULL;
  /* (a request popped for a fast-path post that failed was never anything but FREE) */
  if (atomic_load_explicit(&r->status, memory_order_relaxed) != ASR_REQ_FREE) req_set_status(r, ASR_REQ_FREE);
  asr_comm_pool_t *p = asr__comm_pool_of(c);
  if (p->free_top < ASR_RING) p->free_data[p->free_top++] = r;
}

/* r's trace record (obs/obs.h), before r is recycled */
static void obs_done(struct asr_request *r, size_t bytes, int ok) {
  asr_comm_pool_t *p = asr__comm_pool_of(r->comm);
  asr__obs_done(r->comm, &p->obs[r - p->reqs], r->type, bytes, ok);
}

/* A request asr_test failed goes back, counted (rep_failed). */
static void recycle_failed(struct asr_request *r) {
  asr__comm_lock(r->comm);
  asr__rep_count(&r->comm->rep_failed);
  recycle_locked(r);
  asr__comm_unlock(r->comm);
}

void asr__req_recycle(struct asr_request *r) {
  asr__comm_lock(r->comm);
  recycle_locked(r);
  asr__comm_unlock(r->comm);
}

/* The one-sided arguments of request r (rma/rma_types.h). */
static asr__rma_t *rma_of(struct asr_request *r) {
  asr_comm_pool_t *p = asr__comm_pool_of(r->comm);
  return &p->rma[r - p->reqs];
}

/* Posts r on c's sm end (sm/sm.h); its lock is held. No registration:
 * the sm path copies from and into the application's memory as it is. */
static inline int post_sm_locked(struct asr_comm *c, struct asr_request *r, void *va) {
  if (__builtin_expect(r->type > ASR_REQ_RECV, 0)) {
    int rc = asr__rma_post_sm_locked(c, r, rma_of(r), va);
    if (rc == 0) r->ofi_req = op_of(r);
    return rc;
  }
  asr__sm_t *s = asr__comm_sm(c);
  asr__ofi_op_t *op = op_of(r);
  char *buf = (char *)va + r->offset;
  /* a send never overtakes a read held (sm/sm.h: deferred reads) */
  if (__builtin_expect(asr__sm_reads_held(s), 0)) {
    int rc = asr__rma_sm_flush_locked(c);
    if (rc) return rc;
  }
  int rc = c->type == ASR_SEND_COMM ? asr__sm_send_locked(s, buf, r->length, op)
                                    : asr__sm_recv_locked(s, buf, r->length, op);
  if (rc == 0) r->ofi_req = op;
  return rc;
}

/* Posts r to libfabric. Lock rule: the caller holds the comm's ep_lock
 * (post's fast path, which pops r and looks its registration up under the
 * same hold: one lock per post, ofi.c "locking"). A post finding the
 * provider's queue full retries for up to spin_ms (ofi.h), letting ep_lock
 * go between tries (ofi.c, post_data_locked). */
static inline int post_ofi_locked(struct asr_comm *c, struct asr_request *r, void *va, struct fid_mr *mr,
                                  int spin_ms) {
  asr__ofi_t *o = asr__comm_ofi(c);
  assert(asr__ofi_locked(o));
  if (__builtin_expect(r->type > ASR_REQ_RECV, 0)) {
    int rc = asr__rma_post_ofi_locked(c, r, rma_of(r), va, mr, spin_ms);
    if (rc == 0) r->ofi_req = op_of(r);
    return rc;
  }
  asr__ofi_op_t *op = op_of(r);
  void *desc = asr__ofi_mr_desc(o, mr);
  char *buf = (char *)va + r->offset;
  int rc = c->type == ASR_SEND_COMM ? asr__ofi_isend_locked(o, &c->osend, buf, r->length, desc, op, spin_ms)
                                    : asr__ofi_irecv_locked(o, &c->orecv, buf, r->length, desc, op);
  if (rc == 0) r->ofi_req = op;
  return rc;
}

/* Posts r to libfabric, taking the comm's ep_lock for the post alone. Lock
 * rule: the caller does not hold it (drain_one, the service thread's post
 * of a stashed request, whose registration was just looked up or made
 * under the control path's locks: asr__mr_get_or_register). */
static int post_ofi(struct asr_comm *c, struct asr_request *r, void *va, struct fid_mr *mr, int spin_ms) {
  asr__ofi_t *o = asr__comm_ofi(c);
  asr__ofi_lock(o);
  int rc = post_ofi_locked(c, r, va, mr, spin_ms);
  asr__ofi_unlock(o);
  return rc;
}

/* A post's comm, tensor or request pointer is missing or not live: says
 * which (out of post's way: the data path only tests for it). */
static __attribute__((cold, noinline)) int post_bad_args(const char *fn, asr_comm_t *hc, asr_tensor_t *ht) {
  if (hc && !asr__comm_of(hc))
    asr__comm_bad(fn, hc);
  else if (ht && !asr__tensor_of(ht))
    asr__tensor_bad(fn, ht);
  else
    asr_error("svc", "%s: Expected valid tensor/communicator (and a request pointer)", fn);
  return ASR_INVALID;
}

/* enc_async_sr_post_op: validation battery, freelist pop, fast/slow gate.
 * Inlined into asr_isend / asr_irecv, so each gets the direction folded in.
 * The handles are checked first (handle.h): a closed comm or a freed
 * tensor is refused before anything of it is read. */
static inline __attribute__((always_inline)) int post(asr_comm_t *hc, asr_tensor_t *ht, size_t offset,
                                                      size_t length, asr_request_t **out,
                                                      asr_comm_type_t want, int rtype, const asr__rma_t *rma,
                                                      const char *fn) {
  /* a list post has no tensor of its own: its entries name theirs */
  int list = rtype == ASR_REQ_XFER;
  if (__builtin_expect(!out || !asr__comm_live(hc) || (!list && !asr__tensor_live(ht)), 0))
    return post_bad_args(fn, hc, ht);
  struct asr_comm *comm = asr__handle_addr(hc);
  struct asr_tensor *tensor = list ? NULL : asr__handle_addr(ht);
  if (comm->type != want) {
    asr_error("svc", "%s: comm %p is a %s comm", fn, (void *)hc,
              comm->type == ASR_SEND_COMM ? "SEND" : "RECV");
    return ASR_INVALID;
  }
  asr_ctx_t *ctx = comm->ctx;
  if (!ctx || asr__ctx_get(comm->lnc) != ctx) {
    asr_error("svc", "%s: the comm's LNC %d is not initialised", fn, comm->lnc);
    return ASR_INVALID;
  }
  if (atomic_load(&comm->status) != ASR_COMM_CONNECTED || atomic_load(&comm->close_requested)) {
    asr_error("svc", "%s: post on unconnected communicator (state %s)", fn,
              asr_comm_status_name(atomic_load(&comm->status)));
    return ASR_UNCONNECTED;
  }
  if (!list && (offset > tensor->size || length > tensor->size - offset)) {
    asr_error("svc", "%s: transfer of %zu bytes at offset %zu is out of bounds of a %zu-byte tensor", fn,
              length, offset, tensor->size);
    return ASR_INVALID;
  }
  void *va = list ? NULL : tensor->va;
  if (!list && !va) {
    asr_error("svc", "%s: Failed to obtain virtual address of tensor", fn);
    return ASR_INVALID;
  }
  /* the comm's first post makes its pool; every later one only loads it */
  asr_comm_pool_t *pool = asr__comm_pool_of(comm);
  if (!pool && !(pool = asr__comm_pool(comm))) {
    asr_error("svc", "%s: out of memory making the comm's request pool", fn);
    return ASR_INVALID;
  }
  /* The MR lookup, the freelist pop and the fast path's post share one
   * hold of ep_lock (the lookup needs it: asr_forget frees entries under it),
   * the lock of the comm's own endpoint: a post on a shm comm never waits
   * for a tcp comm's post or poll in the same context. An sm comm's lock
   * is its own (asr__comm_lock). */
  asr__sm_t *sm = asr__comm_sm(comm);
  asr__comm_lock(comm);
  /* FAST PATH only if the MR is cached AND the stash ring is empty: once
   * anything is stashed every later post stashes too, so the service thread
   * can never let a registration-pending request be overtaken (seed §2 QUIRK).
   * The sm path registers nothing: its fast path is "stash ring empty and
   * room in the ring" (no room: ASR_EAGAIN below, the request stashes). */
  struct fid_mr *mr = NULL;
  int fast = atomic_load(&comm->stash_head) == atomic_load(&comm->stash_tail) &&
             (sm || list || asr__mr_lookup(comm, va, tensor->size, &mr));
  if (pool->free_top == 0) {
    asr__comm_unlock(comm);
    asr_error("svc", "%s: Maximum number of pending requests %d reached", fn, ASR_RING);
    return ASR_QUEUE_FULL;
  }
  struct asr_request *r = pool->free_data[--pool->free_top];
  /* its handle: the record's next generation, so that no earlier handle
   * of it names this transfer (handle.h) */
  asr_request_t *h = (asr_request_t *)(uintptr_t)asr__handle_renew(r, &r->live, ASR_HK_REQUEST);
  r->tensor = tensor;
  r->offset = offset;
  r->length = length;
  r->type = rtype;
  if (rma) pool->rma[r - pool->reqs] = *rma;
  if (ASR_OBS_ON()) asr__obs_post(comm, &pool->obs[r - pool->reqs], rtype);
  if (fast) {
    int rc = sm ? post_sm_locked(comm, r, va) : post_ofi_locked(comm, r, va, mr, ASR_OFI_SEND_SPIN_MS);
    if (rc == 0) {
      req_set_status(r, ASR_REQ_OFI_POSTED);
      asr__rep_count(&comm->rep_posted);
      asr__comm_unlock(comm);
      *out = h;
      return ASR_SUCCESS;
    }
    if (rc != ASR_EAGAIN) {
      recycle_locked(r);
      asr__comm_unlock(comm);
      asr_error("fab", "%s: Failed to post %s %s request: %s%s%s", fn, sm ? "sm" : "ofi",
                req_type_name(rtype), asr_strerror(rc), sm && sm->why ? ": " : "",
                sm && sm->why ? sm->why : "");
      return ASR_INVALID;
    }
    /* the provider's queue is full: the service thread posts it once there
     * is room (asr__drain_stashes), and every later post of the comm queues
     * behind it */
  }
  asr__rep_count(&comm->rep_posted); /* stashed: posted, as the application sees it */
  asr__comm_unlock(comm);

  /* SLOW PATH: stash for the service thread. Count the work unit before the
   * request becomes visible in the ring (the seed's order): the service
   * thread may drain it the moment it is pushed and un-count it, and task.n
   * must never go below zero. The wakeup comes after the push, so the
   * thread cannot look at the ring too early and then sleep through it. */
  req_set_status(r, ASR_REQ_STASHED);
  pthread_mutex_lock(&ctx->task.mutex);
  ctx->task.n++;
  pthread_mutex_unlock(&ctx->task.mutex);
  pthread_mutex_lock(&comm->stash_mutex);
  uint64_t tail = atomic_load(&comm->stash_tail);
  pool->stash[tail % ASR_RING] = r; /* cannot overflow: at most 128 requests exist */
  pool->stash_ticket[tail % ASR_RING] = atomic_fetch_add(&ctx->stash.tickets, 1);
  atomic_store(&comm->stash_tail, tail + 1);
  pthread_mutex_unlock(&comm->stash_mutex);
  atomic_fetch_add(&ctx->stash.count, 1);
  pthread_mutex_lock(&ctx->task.mutex);
  asr__ctx_wake(ctx);
  pthread_mutex_unlock(&ctx->task.mutex);
  *out = h;
  return ASR_SUCCESS;
}

int asr_isend(asr_comm_t *comm, asr_tensor_t *tensor, size_t offset, size_t length, asr_request_t **req) {
  return post(comm, tensor, offset, length, req, ASR_SEND_COMM, ASR_REQ_SEND, NULL, "asr_isend");
}

int asr_irecv(asr_comm_t *comm, asr_tensor_t *tensor, size_t offset, size_t length, asr_request_t **req) {
  return post(comm, tensor, offset, length, req, ASR_RECV_COMM, ASR_REQ_RECV, NULL, "asr_irecv");
}

int asr__post_rma(asr_comm_t *comm, asr_tensor_t *tensor, size_t offset, size_t length, int type,
                  const asr__rma_t *rma, const char *fn, asr_request_t **req) {
  return post(comm, tensor, offset, length, req, ASR_SEND_COMM, type, rma, fn);
}

/* What drain_one did with the head of a comm's stash ring. */
typedef enum {
  DRAIN_EMPTY, /* the ring was empty */
  DRAIN_WAITS, /* the head stays STASHED: the provider's queue is full */
  DRAIN_LEFT   /* the head left the ring: posted, or failed as ERROR */
} drain_result_t;

/* Posts the head of c's stash (lazy MR registration). When the provider's
 * queue is full (asr__ofi_irecv_locked) the head stays STASHED and a later
 * tick tries again, soon (ctx->stash.queue_full bounds the thread's sleep, and
 * asr__drain_stashes reads the CQ so that arriving messages make room even
 * while the application only polls). */
static drain_result_t drain_one(asr_ctx_t *ctx, struct asr_comm *c, int spin_ms) {
  uint64_t head = atomic_load(&c->stash_head);
  if (head == atomic_load(&c->stash_tail)) return DRAIN_EMPTY;
  struct asr_request *r = asr__comm_pool_of(c)->stash[head % ASR_RING]; /* stashed: it has a pool */
  struct fid_mr *mr = NULL;
  if (atomic_load(&c->status) == ASR_COMM_CONNECTION_ERROR ||
      (r->type > ASR_REQ_RECV && atomic_load(&c->close_requested))) {
    /* the peer died (peer_watch.c): nothing stashed is posted any more;
     * nor is a write, read or list of a comm being closed (its close
     * drains sends alone: a notifying write that waits for the owner's
     * ring to make room would hold the sends behind it until the
     * deadline) */
    req_set_status(r, ASR_REQ_ERROR);
  } else {
    int list = r->type == ASR_REQ_XFER; /* its entries carry their own memory */
    int has_va = list || (r->tensor && r->tensor->va);
    void *va = list ? NULL : r->tensor->va;
    asr__sm_t *sm = asr__comm_sm(c);
    int rc = !has_va ? ASR_EINVAL : sm || list ? 0 : asr__mr_get_or_register(c, r->tensor, &mr);
    /* before the post: once posted, its completion may be read at once
     * (the status's release store below orders it for asr_test) */
    if (ASR_OBS_TRACING()) asr__comm_pool_of(c)->obs[r - asr__comm_pool_of(c)->reqs].t_out = asr_time_ns();
    if (rc == 0 && sm) {
      asr__sm_lock(sm);
      rc = post_sm_locked(c, r, va);
      asr__sm_unlock(sm);
    } else if (rc == 0) {
      rc = post_ofi(c, r, va, mr, spin_ms);
    }
    if (rc == ASR_EAGAIN) {
      ctx->stash.queue_full = 1;
      return DRAIN_WAITS;
    }
    if (rc != 0) {
      asr_error("fab", "lnc %d: Failed to post async sendrecv request %p type %s: %s", ctx->lnc, (void *)r,
                req_type_name(r->type), has_va ? asr_strerror(rc) : "no virtual address");
      req_set_status(r, ASR_REQ_ERROR);
    } else {
      req_set_status(r, ASR_REQ_OFI_POSTED);
    }
  }
  /* Advance only after the post: an empty ring means "everything stashed is posted". */
  atomic_store(&c->stash_head, head + 1);
  atomic_fetch_sub(&ctx->stash.count, 1);
  pthread_mutex_lock(&ctx->task.mutex);
  ctx->task.n--;
  pthread_mutex_unlock(&ctx->task.mutex);
  return DRAIN_LEFT;
}

/* The service thread's post drain (seed: each comm's stash, FIFO, lazy MR
 * registration). Beyond the seed, the stashed requests of one direction,
 * over all the LNC's comms, go out in the order the application made them
 * (their tickets), not comm by comm; a request that has to wait for room
 * holds back the rest of its own comm (post order within a comm) but not
 * the other comms. Both matter once a provider queue is full:
 * - order: a receiver that posted comm by comm could fill its receive queue
 *   with one comm's receives while the messages in flight, for another comm,
 *   had nowhere to go (and a sender could do the same to its peer); in post
 *   order, a peer that posts the other side in the same order always finds
 *   the receives its messages need;
 * - not stopping: shm's 1024 receive entries hold both the posted receives
 *   and the messages that arrived before their receive (unexpected), and its
 *   command queue is one FIFO for all peers. Once the entries are gone, the
 *   message at the head of that queue waits, and with it every message
 *   behind it; what frees an entry is a receive that matches a message
 *   already there (it needs no new entry). A drain that stopped at the
 *   first receive with no room never posted those, and hung for good
 *   ("Error getting rx_entry" at every shm progress; test_runtime
 *   unexpected_messages_fill_provider).
 * The CQ is read once after a pass that left something waiting (not in
 * between: an entry freed mid-pass would go to a later request, ahead of
 * the earlier one still waiting). Sends and receives are drained apart:
 * neither waits for room in the other's queue. Called with comms.mutex
 * held. */
int asr__drain_stashes(asr_ctx_t *ctx, asr_comm_type_t type) {
  int posted = 0, waiting = 0;
  uint64_t pass = ++ctx->stash.drain_pass; /* marks the comms held back in this pass */
  for (;;) {
    struct asr_comm *first = NULL;
    uint64_t first_ticket = UINT64_MAX;
    for (struct asr_comm *c = ctx->comms.connected; c; c = c->next) {
      if (c->type != type || c->drain_blocked == pass) continue;
      uint64_t head = atomic_load(&c->stash_head);
      if (head == atomic_load(&c->stash_tail)) continue;
      uint64_t ticket = asr__comm_pool_of(c)->stash_ticket[head % ASR_RING];
      if (ticket < first_ticket) {
        first_ticket = ticket;
        first = c;
      }
    }
    if (!first) break;
    /* a send may spin for room once per pass (ofi.h), not once per comm:
     * the pass would otherwise hold this thread for ASR_OFI_SEND_SPIN_MS
     * per blocked comm */
    if (drain_one(ctx, first, waiting ? 0 : ASR_OFI_SEND_SPIN_MS) == DRAIN_LEFT) {
      posted = 1;
    } else {
      first->drain_blocked = pass;
      waiting = 1;
    }
  }
  if (waiting)
    for (int i = 0; i < ASR_NEPS; i++)
      if (atomic_load_explicit(&ctx->fab.ep_open[i], memory_order_acquire))
        asr__ofi_progress(&ctx->fab.eps[i]);
  return posted;
}

int asr_test(asr_request_t *h, int *done, size_t *size) {
  if (__builtin_expect(!done || !asr__req_live(h), 0)) {
    if (h && !asr__req_live(h))
      asr__req_bad("asr_test", h);
    else
      asr_error("svc", "asr_test: Expected request/communicator");
    return ASR_UNCONNECTED;
  }
  struct asr_request *req = asr__handle_addr(h); /* live (handle.h) */
  struct asr_comm *c = req->comm;
  int status = atomic_load_explicit(&req->status, memory_order_acquire);
  switch (status) {
    case ASR_REQ_OFI_POSTED: {
      /* Completed by an earlier drain (another request's test, or the
       * service thread), or not yet: then drain the CQ. Either way one hold
       * of ep_lock also pushes the request back when it is done. Only the
       * comm's own endpoint is read: a shm request's test never drives the
       * network endpoint's progress (nor takes its lock). An sm request's
       * test moves its own comm alone (sm/sm.h: progress). */
      asr__sm_t *sm = asr__comm_sm(c);
      asr__ofi_op_t *op = req->ofi_req;
      /* The peer's death is read BEFORE the poll: what it completed before
       * dying (an sm receiver's head past our send, a completion in the
       * CQ) is then seen by the poll below, since its death, which turned
       * the comm CONNECTION_ERROR, came after. Read after the poll, a death
       * between the two would fail a request that had completed. */
      int peer_gone = atomic_load(&c->status) == ASR_COMM_CONNECTION_ERROR;
      int d = asr__ofi_op_done(op);
      asr__comm_lock(c);
      if (!d) {
        if (sm) {
          asr__sm_progress_locked(sm);
          if (asr__sm_reads_held(sm)) (void)asr__rma_sm_flush_locked(c); /* held reads (sm/sm.h) */
          if (c->type == ASR_RECV_COMM && asr__sm_osr_pending(sm)) (void)asr__rma_sm_apply_locked(c);
        } else
          asr__ofi_drain_locked(asr__comm_ofi(c));
        d = asr__ofi_op_done(op);
        /* not done: the other sm comms that wait move too (sm_data.c: a
         * poll moves them all, as a CQ read moves a whole endpoint) */
        if (!d && sm && asr__sm_progress_waiting(sm)) d = asr__ofi_op_done(op);
        /* a list is done once each of its entries is (rma_ops.c) */
        if (!d && !sm && req->type == ASR_REQ_XFER) d = asr__rma_xfer_poll_locked(rma_of(req)->x, op);
      }
      if (d && req->type == ASR_REQ_XFER) atomic_store(&rma_of(req)->x->busy, 0); /* it may be posted again */
      size_t len = 0;
      int rc = d ? asr__ofi_op_result(op, &len) : 0;
      if (d && rc == 0) {
        size_t moved = req->type == ASR_REQ_RECV ? len : req->type == ASR_REQ_XFER ? len : req->length;
        if (ASR_OBS_ON()) obs_done(req, moved, 1);
        recycle_locked(req);
        asr__rep_count(&c->rep_done);
        asr__rep_count_n(&c->rep_bytes, moved);
        asr__comm_unlock(c);
        *done = 1;
        asr__poll_found();
        if (size) *size = moved;
        if (c->ctx->trace) asr_trace("svc", "Successfully tested request %p (%zu bytes)", (void *)h, moved);
        return ASR_SUCCESS;
      }
      asr__comm_unlock(c);
      /* Not done and the peer died (peer_watch.c): nothing will complete it.
       * Its op stays libfabric's (a send cannot be cancelled), but no post
       * reuses it: the comm takes no more posts. */
      int gone = !d && peer_gone;
      if (rc || gone) {
        asr_error("fab", "lnc %d: request %p failed: %s", c->lnc, (void *)h,
                  atomic_load(&c->status) == ASR_COMM_CONNECTION_ERROR ? c->err : asr_strerror(rc));
        req_set_status(req, ASR_REQ_ERROR);
        if (ASR_OBS_ON()) obs_done(req, 0, 0);
        recycle_failed(req);
        return ASR_INVALID;
      }
      *done = 0;
      if (size) *size = 0;
      asr__poll_idle();
      return ASR_SUCCESS;
    }
    case ASR_REQ_FREE: asr_error("svc", "asr_test: Request not in use"); return ASR_UNCONNECTED;
    case ASR_REQ_STASHED:
      /* not yet posted by the service thread: keep polling (seed §1 GOTCHA) */
      *done = 0;
      if (size) *size = 0;
      return ASR_SUCCESS;
    case ASR_REQ_ERROR:
    default:
      /* nothing but the four states is ever stored in a request */
      assert(status == ASR_REQ_ERROR);
      if (req->type == ASR_REQ_XFER) atomic_store(&rma_of(req)->x->busy, 0);
      asr_error("svc", "asr_test: Request state %s%s%s", req_status_names[status & 3],
                atomic_load(&c->status) == ASR_COMM_CONNECTION_ERROR ? ": " : "",
                atomic_load(&c->status) == ASR_COMM_CONNECTION_ERROR ? c->err : "");
      if (ASR_OBS_ON()) obs_done(req, 0, 0);
      recycle_failed(req);
      return ASR_INVALID;
  }
}

int asr_flush(asr_comm_t *h) {
  struct asr_comm *comm = asr__comm_of(h);
  if (!comm) {
    if (h)
      asr__comm_bad("asr_flush", h);
    else
      asr_error("svc", "asr_flush: Expected valid communicator");
    return ASR_INVALID;
  }
  if (comm->type != ASR_RECV_COMM) {
    asr_error("svc", "asr_flush: only a RECV comm can be flushed");
    return ASR_INVALID;
  }
  if (atomic_load(&comm->status) != ASR_COMM_CONNECTED) return ASR_UNCONNECTED;
  /* Host memory needs no read-back: a receive's data is visible to the host
   * once its completion has been read. Harvest every completion now so the
   * fence covers receives that finished but were not yet polled. */
  uint64_t t0 = ASR_OBS_TRACING() ? asr_time_ns() : 0;
  asr__sm_t *sm = asr__comm_sm(comm);
  if (sm) {
    asr__sm_lock(sm);
    asr__sm_progress_locked(sm);
    asr__sm_unlock(sm);
  } else {
    asr__ofi_progress(asr__comm_ofi(comm)); /* the comm's own endpoint */
  }
  if (ASR_OBS_TRACING()) asr__obs_flush(comm, t0);
  return ASR_SUCCESS;
}
