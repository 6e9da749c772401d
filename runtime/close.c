/*
 * close.c -- asr_comm_close (seed §2 close: a comm's MRs deregistered, its
 * pool freed): the service thread lets go of the comm, what libfabric still
 * owns is cancelled, and the comm is freed. Before that a SEND comm drains
 * and a RECV comm tells its sender it closed (drain.c). Apart from comm.c
 * because it sits above the close handshake, which sits above the comm
 * records.
 */
#include "config.h"

#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "rma/rma.h"
#include "rt.h"

static int close_detached(asr_ctx_t *ctx, struct asr_comm *comm);

int asr_comm_close(asr_comm_t *h) {
  struct asr_comm *comm = asr__comm_of(h);
  if (!comm) {
    if (h) asr__comm_bad("asr_comm_close", h);
    return ASR_INVALID;
  }
  asr_ctx_t *ctx = comm->ctx;
  /* The handle stays live while the close runs (another thread's call on
   * it sees close_requested, as before); it is retired when the comm is
   * freed (asr__comm_free), or kept for asr_close (below). */
  if (atomic_exchange(&comm->close_requested, 1)) {
    asr_error("svc", "asr_comm_close: comm %p is already being closed", (void *)h);
    return ASR_INVALID;
  }
  /* A thread waiting for it to connect leaves now, with an error, and is
   * gone before the comm is freed (it slept on freed memory before). */
  asr__comm_release_waiters(comm);
  /* A SEND comm first waits, bounded, for its peer to take what it was
   * sent (drain.c): its posts are refused from here on (close_requested). */
  if (comm->type == ASR_SEND_COMM) asr__drain_comm(ctx, comm);
  /* Ask the service thread to let go of the comm, and wait until it has. */
  pthread_mutex_lock(&ctx->task.mutex);
  while (ctx->task.nclosing >= ASR_RING && !ctx->task.shutdown)
    pthread_cond_wait(&ctx->task.detach_cv, &ctx->task.mutex);
  if (ctx->task.shutdown) {
    /* asr_close is under way: it frees every comm of the LNC, this one too
     * (and retires its handle: it may be doing so already, so the comm is
     * not ours to touch any more) */
    pthread_mutex_unlock(&ctx->task.mutex);
    return ASR_SUCCESS;
  }
  ctx->task.closing[ctx->task.nclosing++] = comm;
  ctx->task.closers++; /* asr_close waits for us before it closes the endpoint */
  asr__ctx_wake(ctx);
  while (!atomic_load(&comm->detached)) pthread_cond_wait(&ctx->task.detach_cv, &ctx->task.mutex);
  pthread_mutex_unlock(&ctx->task.mutex);
  int rc = close_detached(ctx, comm);
  pthread_mutex_lock(&ctx->task.mutex);
  ctx->task.closers--;
  pthread_cond_broadcast(&ctx->task.detach_cv);
  pthread_mutex_unlock(&ctx->task.mutex);
  return rc;
}

/* The rest of asr_comm_close, once the service thread let go of comm. */
static int close_detached(asr_ctx_t *ctx, struct asr_comm *comm) {
  /* Cancel what libfabric still owns; its memory is ours once the completion
   * (or cancellation) has been read. Ask for every cancellation first, then
   * wait for all of them against one deadline: providers cannot cancel some
   * operations (a send nobody receives), and a wait per operation, one after
   * another, would make a close's time grow with the number of such
   * operations rather than stay within one bound. */
  /* Its sender takes back nothing more from us: it need not wait (drain.c). */
  asr__drain_closed(ctx, comm, asr_time_ms() + 100);
  /* An sm comm's ops are ours alone: given back at once (sm/sm.h). */
  if (asr__comm_sm(comm)) asr__sm_cancel_all(asr__comm_sm(comm));
  asr__ofi_op_t *ctrl = comm->type == ASR_RECV_COMM ? &comm->orecv.ctrl_op : &comm->osend.ctrl_op;
  /* Everything of comm libfabric can own is on its own endpoint; a comm
   * that never got one (closed before its path was chosen) owns nothing. */
  asr__ofi_t *o = asr__comm_ofi(comm);
  asr_comm_pool_t *pool = asr__comm_pool_of(comm); /* none: nothing was ever posted */
  for (int i = 0; pool && i < ASR_RING; i++)
    if (o && asr__ofi_op_owned(&pool->ops[i])) (void)asr__ofi_cancel(o, &pool->ops[i], 0);
  if (o && asr__ofi_op_owned(ctrl)) (void)asr__ofi_cancel(o, ctrl, 0);
  /* A comm whose peer died (peer_watch.c) has nobody to complete its sends:
   * take back what cancels at once, keep the rest without waiting. */
  int peer_gone = atomic_load(&comm->status) == ASR_COMM_CONNECTION_ERROR;
  uint64_t until = asr_time_ms() + (peer_gone ? 0 : 2000);
  int stuck = 0;
  for (int i = pool ? 0 : ASR_RING; i <= ASR_RING; i++) {
    asr__ofi_op_t *op = i < ASR_RING ? &pool->ops[i] : ctrl;
    uint64_t now = asr_time_ms();
    if (o && asr__ofi_op_owned(op) && asr__ofi_cancel(o, op, now < until ? (int)(until - now) : 0) != 0)
      stuck++;
  }
  /* a prepared list's entries are libfabric's ops of the list's own (rma/rma.h) */
  for (int i = 0; o && pool && i < ASR_RING; i++) {
    struct asr_request *r = &pool->reqs[i];
    if (r->type != ASR_REQ_XFER || !pool->rma[i].x) continue;
    asr__rma_xfer_cancel(o, pool->rma[i].x, until);
    for (int k = 0; k < pool->rma[i].x->n; k++) stuck += asr__ofi_op_owned(&pool->rma[i].x->ops[k]);
  }
  if (stuck) {
    /* The provider would not give the operations back: keep the memory on the
     * error list; asr_close frees it after the endpoint is closed. */
    asr_warn("svc", "lnc %d: %d operation(s) of a closed comm could not be cancelled; freeing at asr_close",
             ctx->lnc, stuck);
    asr__comm_retire(comm); /* closed, as far as the application can tell */
    pthread_mutex_lock(&ctx->comms.mutex);
    comm->next = ctx->comms.errored;
    ctx->comms.errored = comm;
    pthread_mutex_unlock(&ctx->comms.mutex);
    return ASR_SUCCESS;
  }
  asr__comm_release_waiters(comm); /* one that came since the first look is gone too */
  asr__comm_free(comm, 0);
  return ASR_SUCCESS;
}
