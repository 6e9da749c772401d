/*
 * connect_sched.c -- which connecting comms a tick of the service thread
 * steps (beyond the seed, whose async_sr_connect_comms steps the head of
 * every peer queue on every pass of its busy loop), and how a head that
 * connected or failed leaves its queue (asr__sched_leave_queue).
 *
 * Only a queue head steps (peer queues are FIFO, context.c), and a head can
 * move only after an event: its KV answer came (on_kv_done, connect.c), its
 * timer passed (retry_at_ms), its sender's connect message was read from
 * the CQ (a RECV comm in NET_CONNECT), it became the head, or another comm
 * woke it (the "hostname" it waited for came). Each head is therefore on
 * at most one of the context's schedule lists (ctx->sched.lists[], c->sched):
 *
 *   READY   steps in the next tick;
 *   TIMED   moves to READY when its retry_at_ms passes;
 *   ACCEPT  a RECV comm in NET_CONNECT: looked at after each CQ read that
 *           completed something on its endpoint (the endpoint's completion
 *           count changed) or failed, and when the host's KV server changed
 *           (it may have to publish its handle again);
 *   none    waiting for its KV answer, which puts it on READY.
 *
 * so a tick touches the comms that can move, not every head (in a full mesh
 * most heads wait for a held GET or for their sender). Every list is the
 * service thread's alone (the pool's callbacks, the handover and the detach
 * all run there). A walk of every head every
 * SAFETY_MS (asr__sched_safety) puts on READY a head that an event left
 * off every list, and counts it (ctx->sched.missed, which the tests require
 * to stay 0), so that a missed event costs at most that long, not a hang.
 */
#include "config.h"

#include "asr_log.h"
#include "asr_time.h"
#include "kv_conn.h"
#include "rt.h"

#define SAFETY_MS 50

void asr__sched_unlink(asr_ctx_t *ctx, struct asr_comm *c) {
  if (c->sched == ASR_SCHED_NONE) return;
  asr_schedq_t *l = &ctx->sched.lists[c->sched];
  if (c->sprev)
    c->sprev->snext = c->snext;
  else
    l->head = c->snext;
  if (c->snext)
    c->snext->sprev = c->sprev;
  else
    l->tail = c->sprev;
  c->sprev = c->snext = NULL;
  c->sched = ASR_SCHED_NONE;
}

void asr__sched_put(asr_ctx_t *ctx, struct asr_comm *c, int which) {
  if (c->sched == which) return;
  asr__sched_unlink(ctx, c);
  asr_schedq_t *l = &ctx->sched.lists[which];
  c->sprev = l->tail;
  c->snext = NULL;
  if (l->tail)
    l->tail->snext = c;
  else
    l->head = c;
  l->tail = c;
  c->sched = which;
  if (which == ASR_SCHED_TIMED && c->retry_at_ms < ctx->sched.timed_due_ms)
    ctx->sched.timed_due_ms = c->retry_at_ms;
}

void asr__sched_after_step(asr_ctx_t *ctx, struct asr_comm *c, uint64_t now) {
  if (c->sched == ASR_SCHED_READY) return; /* an event during its step */
  if (c->type == ASR_RECV_COMM && atomic_load(&c->status) == ASR_COMM_NET_CONNECT && c->path != ASR_PATH_SM) {
    /* Its connect message may have completed in a read (on any thread)
     * whose count was seen while it was not on ACCEPT: look once now; a
     * completion after this look raises the count past what was seen. Its
     * SET's answer, if one is still coming, puts it on READY. */
    int ready = 0;
    asr__sched_put(ctx, c, asr__ofi_accept(&c->orecv, &ready) || ready ? ASR_SCHED_READY : ASR_SCHED_ACCEPT);
    return;
  }
  if (c->type == ASR_RECV_COMM && atomic_load(&c->status) == ASR_COMM_WAIT_FOR_NET_HANDLE_SET) {
    /* its next step goes on to NET_CONNECT without the SET's answer
     * (connect.c), which only its sender needs */
    asr__sched_put(ctx, c, ASR_SCHED_READY);
    return;
  }
  if (c->kv_req) {
    if (asr_kv_call_done(c->kv_req, NULL)) asr__sched_put(ctx, c, ASR_SCHED_READY);
    return; /* else on_kv_done puts it on READY */
  }
  asr__sched_put(ctx, c, c->retry_at_ms > now ? ASR_SCHED_TIMED : ASR_SCHED_READY);
}

void asr__sched_timers(asr_ctx_t *ctx, uint64_t now) {
  if (!ctx->sched.lists[ASR_SCHED_TIMED].head || now < ctx->sched.timed_due_ms) return;
  uint64_t due = UINT64_MAX;
  for (struct asr_comm *c = ctx->sched.lists[ASR_SCHED_TIMED].head, *n; c; c = n) {
    n = c->snext;
    if (c->retry_at_ms <= now)
      asr__sched_put(ctx, c, ASR_SCHED_READY);
    else if (c->retry_at_ms < due)
      due = c->retry_at_ms;
  }
  ctx->sched.timed_due_ms = due;
}

void asr__sched_accepts(asr_ctx_t *ctx, uint64_t now) {
  for (int i = 0; i < ASR_NEPS; i++) ctx->sched.accept_cq_rc[i] = 0; /* this tick's reads only */
  if (!ctx->sched.lists[ASR_SCHED_ACCEPT].head) return;
  unsigned epoch = asr__kv_host_epoch();
  int all = epoch != ctx->sched.accept_epoch; /* republish_step (connect.c) looks at each */
  ctx->sched.accept_epoch = epoch;
  int look[ASR_NEPS] = {0}, read = 0;
  if (now >= ctx->sched.accept_at_ms) {
    /* One CQ read per endpoint for every comm waiting on it, not one per
     * comm: on tcp;ofi_rxm each read polls every connection's socket. The
     * context's one timer says
     * when (1, 2, 4, then every 8 ms while reads complete nothing; 1 ms again
     * after one that did, or when a comm starts to wait: a timer per comm
     * woke each service thread once per waiting comm; every tick while
     * connects are moving, connect.c: CONNECT_YIELD_MS). */
    read = 1;
    for (int i = 0; i < ASR_NEPS; i++) {
      if (!atomic_load_explicit(&ctx->fab.ep_open[i], memory_order_acquire)) continue;
      ctx->sched.accept_cq_rc[i] = asr__ofi_progress(&ctx->fab.eps[i]); /* a failure fails each such comm */
      /* what any thread's reads completed since the last look (the count is
       * raised after each completion is recorded: ofi.c drain) */
      unsigned long n = atomic_load_explicit(&ctx->fab.eps[i].completions, memory_order_acquire);
      look[i] = ctx->sched.accept_cq_rc[i] || n != ctx->sched.accept_seen[i];
      ctx->sched.accept_seen[i] = n;
    }
  } else {
    /* completions another thread's drain read (asr_test) since the last look */
    for (int i = 0; i < ASR_NEPS; i++) {
      if (!atomic_load_explicit(&ctx->fab.ep_open[i], memory_order_acquire)) continue;
      unsigned long n = atomic_load_explicit(&ctx->fab.eps[i].completions, memory_order_acquire);
      look[i] = n != ctx->sched.accept_seen[i];
      ctx->sched.accept_seen[i] = n;
    }
  }
  int found = 0;
  for (struct asr_comm *c = ctx->sched.lists[ASR_SCHED_ACCEPT].head, *n; c; c = n) {
    n = c->snext;
    int ready = 0;
    if (all || (c->ep >= 0 && look[c->ep] &&
                (ctx->sched.accept_cq_rc[c->ep] || asr__ofi_accept(&c->orecv, &ready) || ready))) {
      asr__sched_put(ctx, c, ASR_SCHED_READY);
      found = 1;
    }
  }
  if (read) {
    unsigned w = ctx->sched.accept_wait_ms;
    ctx->sched.accept_wait_ms = found || !w ? 1 : w >= 8 ? 8 : w * 2;
    ctx->sched.accept_at_ms = asr__connect_yielding(ctx, now) ? now : now + ctx->sched.accept_wait_ms;
  }
}

void asr__sched_safety(asr_ctx_t *ctx, uint64_t now) {
  if (now < ctx->sched.safety_at_ms) return;
  ctx->sched.safety_at_ms = now + SAFETY_MS;
  for (int dir = 0; dir < 2; dir++)
    for (asr_peerq_t **pp = &ctx->conn.active[dir], *q; (q = *pp) != NULL;) {
      struct asr_comm *h = q->head;
      if (!h) { /* emptied (its last comm connected, failed or was closed): off the walk */
        *pp = q->anext;
        q->anext = NULL;
        q->listed = 0;
        continue;
      }
      pp = &q->anext;
      if (h->sched != ASR_SCHED_NONE || (h->kv_req && !asr_kv_call_done(h->kv_req, NULL))) continue;
      atomic_fetch_add_explicit(&ctx->sched.missed, 1, memory_order_relaxed);
      asr_warn("svc",
               "lnc %d %s comm %s %s/lnc %d: internal: no event scheduled it in state %d (moving it now)",
               ctx->lnc, h->type == ASR_SEND_COMM ? "SEND" : "RECV", h->type == ASR_SEND_COMM ? "to" : "from",
               h->peer_ip, h->peer_lnc, atomic_load(&h->status));
      asr__sched_put(ctx, h, ASR_SCHED_READY);
    }
}

int asr__sched_timeout(const asr_ctx_t *ctx, uint64_t now) {
  int tmo = SAFETY_MS;
  /* a head that stepped without moving and can step again at once (a
   * retry_at_ms reached): 1 ms rather than spin, as the connect machine's
   * waits always did */
  if (ctx->sched.lists[ASR_SCHED_READY].head) return 1;
  if (ctx->sched.lists[ASR_SCHED_TIMED].head) {
    uint64_t d = ctx->sched.timed_due_ms > now ? ctx->sched.timed_due_ms - now : 0;
    if (d < (uint64_t)tmo) tmo = (int)d;
  }
  if (ctx->sched.lists[ASR_SCHED_ACCEPT].head) {
    uint64_t d = ctx->sched.accept_at_ms > now ? ctx->sched.accept_at_ms - now : 0;
    if (d < (uint64_t)tmo) tmo = (int)d;
  }
  return tmo;
}

/* c connected or failed: it leaves its peer queue (it is the head), and the
 * next comm of the queue, now its head, steps in the next tick. A comm
 * that connected is put on the connected list and only then, under the
 * same hold of comms.mutex, turns CONNECTED (asr__connect_done): an
 * application that sees CONNECTED and closes its LNC at once finds it
 * there (asr__drain_lnc walks that list under the mutex), however soon. */
void asr__sched_leave_queue(asr_ctx_t *ctx, struct asr_comm *c, int st) {
  asr_peerq_t *q = c->q;
  asr__sched_unlink(ctx, c);
  q->head = c->next;
  if (q->head)
    asr__sched_put(ctx, q->head, ASR_SCHED_READY);
  else
    q->tail = NULL;
  pthread_mutex_lock(&ctx->comms.mutex);
  if (st == ASR_COMM_CONNECTED) {
    c->next = ctx->comms.connected;
    ctx->comms.connected = c;
    asr__comm_set_status(c, ASR_COMM_CONNECTED);
  } else {
    c->next = ctx->comms.errored;
    ctx->comms.errored = c;
  }
  pthread_mutex_unlock(&ctx->comms.mutex);
  pthread_mutex_lock(&ctx->task.mutex);
  ctx->task.n--;
  pthread_mutex_unlock(&ctx->task.mutex);
}

void asr__connect_done(asr_ctx_t *ctx, struct asr_comm *c) {
  asr__sched_leave_queue(ctx, c, ASR_COMM_CONNECTED);
}
