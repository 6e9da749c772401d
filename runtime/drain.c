/*
 * drain.c -- the close handshake: no completed send is lost to its
 * sender's exit (beyond the seed, whose enc_async_sr_close closes the
 * endpoint at once and loses whatever the peer had not taken yet).
 *
 * Why. A send completes when its buffer may be reused, not when the peer
 * has it: shm's injected sends (up to 4 KiB) and rxm's eager ones (up to
 * 16 KiB) complete at once, their data waiting in the peer's queues. If the
 * sender then closes its endpoint and exits, the receiver's peer watch
 * failed the comm (peer_watch.c) and its posts were refused, and rxm lost
 * what was still on the wire: a late receiver lost every message.
 *
 * How (ofi.h: "The mailbox"). Each LNC keeps one receive posted on control
 * tag 0, its mailbox, and the service thread takes what arrives there.
 *  - Closing a SEND comm (asr_comm_close, or asr_close for each one still
 *    open) drains it: once its stashed sends are posted, it sends FIN(n),
 *    n = the sends it posted, to the peer RECV comm, and waits -- bounded
 *    by ASR_DRAIN_TIMEOUT_MS, and said with the peer's name when the bound
 *    passes -- for ACK, for the peer's CLOSED, or for the peer to exit.
 *    A comm that posted nothing, or whose peer is gone, does not wait.
 *  - A RECV comm that got FIN(n) answers ACK once it has taken n messages:
 *    receives posted minus those libfabric still owns (asr__ofi_op_owned),
 *    since the n-th receive matches the n-th send and nothing follows a
 *    FIN. A RECV comm that closes first tells its sender CLOSED(taken), so
 *    that the sender's close does not wait for answers that cannot come.
 *  - A RECV comm whose sender exits after FIN(n) with fewer than n taken
 *    stays CONNECTED (it lingers): what arrived can still be taken. It
 *    turns CONNECTION_ERROR once all n are taken, or when no receive of it
 *    completes for ASR_DRAIN_TIMEOUT_MS (then it says how many were lost).
 *  - A SEND comm whose receiver said CLOSED while it was not closing
 *    itself turns CONNECTION_ERROR, saying so: nothing it has in flight,
 *    stashed or posts later can complete any more (peer_closed).
 * The service thread reads the CQ every ms while a handshake is under way,
 * and every ASR_CTL_POLL_MS while any comm is connected, so that a FIN
 * reaches an LNC whose application is busy elsewhere (under manual
 * progress nothing arrives unless someone reads the CQ).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "asr_assert.h"
#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "rma/rma.h"
#include "rt.h"

#define ASR_CTL_POLL_MS 10  /* the mailbox's CQ read while nothing is under way */
#define ASR_CTL_TAKE_MAX 64 /* mailbox messages taken per tick */

static const char *const drain_names[] = {"OPEN", "POSTING", "WAIT_TAKEN", "DONE"};

void asr__drain_on_ctl(void *ctx) { asr__ctx_wake(ctx); }

/* The one place a SEND comm's drain state changes (the closer's OPEN ->
 * POSTING aside, under task.mutex). DONE un-counts it and wakes the
 * closers waiting for it. Service thread. */
static void drain_set(asr_ctx_t *ctx, struct asr_comm *c, asr_drain_state_t to) {
  int from = atomic_exchange(&c->drain, (int)to);
  assert(from != (int)to && from != ASR_DRAIN_DONE);
  asr_debug("svc", "lnc %d SEND comm to %s/lnc %d: drain %s -> %s", c->lnc, c->peer_ip, c->peer_lnc,
            drain_names[from & 3], drain_names[to & 3]);
  if (to == ASR_DRAIN_DONE && from != ASR_DRAIN_OPEN) {
    pthread_mutex_lock(&ctx->task.mutex);
    ctx->drain.ndraining--;
    pthread_cond_broadcast(&ctx->task.detach_cv);
    pthread_mutex_unlock(&ctx->task.mutex);
  }
}

/* Whether RECV comm c holds a unit of ctx->drain.nwatching: a FIN to answer, or
 * lingering after its sender's exit. */
static int watched(const struct asr_comm *c) {
  return c->type == ASR_RECV_COMM && ((c->fin && !c->answered) || c->lingering);
}

/* The messages RECV comm c has taken: receives posted minus the ones
 * libfabric still owns (read after a CQ read, under ep_lock, so that no
 * post or completion is half seen). A completed receive holds its message
 * whether or not the application has tested it yet. */
static uint64_t recv_taken(asr_ctx_t *ctx, struct asr_comm *c) {
  (void)ctx;
  if (asr__comm_sm(c)) return asr__sm_taken(asr__comm_sm(c)); /* counted where it is taken */
  asr__ofi_t *o = asr__comm_ofi(c);
  asr__ofi_lock(o);
  (void)asr__ofi_drain_locked(o);
  uint64_t posted = c->orecv.seq;
  unsigned owned = 0;
  asr_comm_pool_t *pool = asr__comm_pool_of(c);
  for (int i = 0; pool && i < ASR_RING; i++) owned += asr__ofi_op_owned(&pool->ops[i]);
  asr__ofi_unlock(o);
  return posted - owned;
}

/* The connected comm of this type that has id at our endpoint o and whose
 * peer has id from at its own; NULL when none (closed meanwhile, or a
 * message that names nothing of ours). comms.mutex held. */
static struct asr_comm *find(asr_ctx_t *ctx, const asr__ofi_t *o, asr_comm_type_t type, uint32_t id,
                             uint32_t from) {
  for (struct asr_comm *c = ctx->comms.connected; c; c = c->next) {
    if (c->type != type || atomic_load(&c->status) != ASR_COMM_CONNECTED || asr__comm_ofi(c) != o) continue;
    if (type == ASR_SEND_COMM && c->osend.comm_id == id && c->osend.peer_comm_id == from) return c;
    if (type == ASR_RECV_COMM && c->orecv.comm_id == id && asr__ofi_recv_peer_id(&c->orecv) == from) return c;
  }
  return NULL;
}

/* SEND comm c's receiver closed its comm having taken `taken` messages:
 * it takes nothing more, so what c still has in flight or stashed, and
 * whatever is posted on it later, can never complete. Unless c is closing
 * itself (its drain ends at the CLOSED: send_step), it fails now, saying
 * so (its requests fail at their next asr_test, request.c). comms.mutex
 * held. */
static void peer_closed(asr_ctx_t *ctx, struct asr_comm *c, uint64_t taken) {
  if (atomic_load(&c->drain) != ASR_DRAIN_OPEN || atomic_load(&c->status) != ASR_COMM_CONNECTED) return;
  snprintf(c->err, sizeof c->err,
           "the peer (%s, lnc %d) closed its RECV comm having taken %llu messages: it takes nothing more",
           c->peer_ip, c->peer_lnc, (unsigned long long)taken);
  c->obs.peer_closed = 1; /* an orderly end, not a failure, to the trace (obs.c) */
  asr__comm_set_status(c, ASR_COMM_CONNECTION_ERROR);
  asr_debug("svc", "lnc %d SEND comm to %s/lnc %d: %s", ctx->lnc, c->peer_ip, c->peer_lnc, c->err);
}

/* One mailbox message, which came to endpoint o. comms.mutex held. */
static void dispatch(asr_ctx_t *ctx, const asr__ofi_t *o, const asr__ofi_ctl_t *m) {
  int to_recv = m->kind == ASR_CTL_FIN || m->kind == ASR_CTL_RING_ASK || m->kind == ASR_CTL_REVOKED_ACK;
  struct asr_comm *c = find(ctx, o, to_recv ? ASR_RECV_COMM : ASR_SEND_COMM, m->to, m->from);
  if (!c) {
    asr_debug("svc", "lnc %d: a control message (kind %u) for comm %u, which is not here (closed?)", ctx->lnc,
              m->kind, m->to);
    return;
  }
  switch (m->kind) {
    case ASR_CTL_FIN: {
      if (c->fin) {
        asr_warn("svc", "lnc %d RECV comm from %s/lnc %d: a second FIN from its sender, dropped", ctx->lnc,
                 c->peer_ip, c->peer_lnc);
        return;
      }
      asr__notif_on_fin(c); /* before the ACK that lets its sender free its comm */
      int before = watched(c);
      c->fin = 1;
      c->fin_count = m->count;
      ctx->drain.nwatching += watched(c) - before;
      asr_debug("svc", "lnc %d RECV comm from %s/lnc %d: its sender closes after %llu messages", ctx->lnc,
                c->peer_ip, c->peer_lnc, (unsigned long long)m->count);
      return;
    }
    case ASR_CTL_ACK:
    case ASR_CTL_CLOSED:
      if (c->peer_said == ASR_CTL_CLOSED) return; /* nothing follows a CLOSED */
      c->peer_said = (int)m->kind;
      c->peer_taken = m->count;
      if (m->kind == ASR_CTL_CLOSED) peer_closed(ctx, c, m->count);
      return;
    case ASR_CTL_RING_ASK:
    case ASR_CTL_RING:
    case ASR_CTL_RING_TAKEN:
    case ASR_CTL_REVOKED:
    case ASR_CTL_REVOKED_ACK: asr__notif_on_ctl(ctx, c, m); return;
    default:
      /* asr__ofi_ctl_decode lets no other kind through */
      assert(0 && "a mailbox message of a kind the decoder refuses");
      return;
  }
}

/* The deadline of SEND comm c passed: say so, naming the peer. */
static void drain_timed_out(asr_ctx_t *ctx, struct asr_comm *c, uint64_t stashed) {
  if (stashed)
    asr_warn("svc",
             "lnc %d SEND comm to %s/lnc %d: %llu requests were still waiting to be posted after %ld ms "
             "(ASR_DRAIN_TIMEOUT_MS); closing without them: the peer does not take what it is sent",
             ctx->lnc, c->peer_ip, c->peer_lnc, (unsigned long long)stashed, ctx->drain.timeout_ms);
  else
    asr_warn(
        "svc",
        "lnc %d SEND comm to %s/lnc %d: the peer confirmed it took %llu of the %llu messages sent within "
        "%ld ms (ASR_DRAIN_TIMEOUT_MS); closing without waiting longer: what it did not take may be lost",
        ctx->lnc, c->peer_ip, c->peer_lnc,
        (unsigned long long)(c->peer_said == ASR_CTL_ACK ? c->peer_taken : 0),
        (unsigned long long)c->drain_sent, ctx->drain.timeout_ms);
  drain_set(ctx, c, ASR_DRAIN_DONE);
}

/* What the receiver of sm comm c said, read where it says it (the
 * region's taken and closed words, sm/sm_layout.h): the ACK and CLOSED of
 * the mailbox path. */
static void sm_peer_said(struct asr_comm *c) {
  uint64_t taken;
  int closed;
  asr__sm_peer_state(asr__comm_sm(c), &taken, &closed);
  if (c->peer_said == ASR_CTL_CLOSED) return;
  c->peer_said = closed ? ASR_CTL_CLOSED : ASR_CTL_ACK;
  c->peer_taken = taken;
}

/* One step of SEND comm c's drain. comms.mutex held. Returns 1 when it moved. */
static int send_step(asr_ctx_t *ctx, struct asr_comm *c, uint64_t now) {
  if (atomic_load(&c->status) != ASR_COMM_CONNECTED) { /* the peer exited (peer_watch.c) */
    drain_set(ctx, c, ASR_DRAIN_DONE);
    return 1;
  }
  asr__sm_t *sm = asr__comm_sm(c);
  if (sm) sm_peer_said(c);
  if (c->peer_said == ASR_CTL_CLOSED) { /* the peer takes nothing more */
    asr_debug("svc", "lnc %d SEND comm to %s/lnc %d: the peer closed its comm having taken %llu messages",
              ctx->lnc, c->peer_ip, c->peer_lnc, (unsigned long long)c->peer_taken);
    drain_set(ctx, c, ASR_DRAIN_DONE);
    return 1;
  }
  switch (atomic_load(&c->drain)) {
    case ASR_DRAIN_POSTING: {
      uint64_t stashed = atomic_load(&c->stash_tail) - atomic_load(&c->stash_head);
      if (stashed) {
        if (now >= c->drain_deadline_ms) drain_timed_out(ctx, c, stashed);
        return 0;
      }
      uint64_t n; /* every send of c is posted: the FIN's count is final */
      if (sm) {
        n = asr__sm_sent(sm);
      } else {
        asr__ofi_lock(asr__comm_ofi(c));
        n = c->osend.seq;
        asr__ofi_unlock(asr__comm_ofi(c));
      }
      /* a comm with a credit word says FIN even with nothing sent: the
       * peer's answer means no credit write comes any more (notif.c) */
      if ((n == 0 && !c->rma.credit) || (c->peer_said == ASR_CTL_ACK && c->peer_taken >= n)) {
        drain_set(ctx, c, ASR_DRAIN_DONE);
        return 1;
      }
      int rc = 0;
      if (sm)
        asr__sm_fin(sm, n); /* a word of the region: nothing to retry */
      else
        rc = asr__ofi_ctl_to_recv(asr__comm_ofi(c), &c->osend, ASR_CTL_FIN, n, 0);
      if (rc == ASR_EAGAIN) {
        if (now >= c->drain_deadline_ms) drain_timed_out(ctx, c, 0);
        return 0;
      }
      c->drain_sent = n;
      if (rc) {
        asr_warn("svc",
                 "lnc %d SEND comm to %s/lnc %d: cannot tell the peer it closes (%s); not waiting for it",
                 ctx->lnc, c->peer_ip, c->peer_lnc, asr_strerror(rc));
        drain_set(ctx, c, ASR_DRAIN_DONE);
        return 1;
      }
      drain_set(ctx, c, ASR_DRAIN_WAIT_TAKEN);
      return 1;
    }
    case ASR_DRAIN_WAIT_TAKEN:
      if (c->peer_said == ASR_CTL_ACK && c->peer_taken >= c->drain_sent) {
        drain_set(ctx, c, ASR_DRAIN_DONE);
        return 1;
      }
      if (now >= c->drain_deadline_ms) {
        drain_timed_out(ctx, c, 0);
        return 1;
      }
      return 0;
    default:
      /* only POSTING and WAIT_TAKEN are stepped (asr__drain_tick) */
      assert(0 && "a SEND comm's drain stepped in a state it cannot be in");
      drain_set(ctx, c, ASR_DRAIN_DONE);
      return 1;
  }
}

/* Fails lingering RECV comm c: its sender is gone and so is what it did not take. */
static void linger_end(asr_ctx_t *ctx, struct asr_comm *c) {
  int before = watched(c);
  c->lingering = 0;
  ctx->drain.nwatching += watched(c) - before;
  uint32_t pid = c->watch >= 0 && c->watch < ctx->watch.n ? ctx->watch.peers[c->watch]->pid : 0;
  asr__watch_fail_comm(ctx, c, pid);
}

/* One step of watched RECV comm c (a FIN to answer, or lingering).
 * comms.mutex held. Returns 1 when it moved. */
static int recv_step(asr_ctx_t *ctx, struct asr_comm *c, uint64_t now) {
  uint64_t taken = recv_taken(ctx, c);
  if (c->fin && !c->answered && taken >= c->fin_count) {
    int rc = asr__ofi_ctl_to_send(asr__comm_ofi(c), &c->orecv, ASR_CTL_ACK, taken, 0);
    if (rc == ASR_EAGAIN) return 0; /* the next tick tries again */
    if (rc)
      asr_debug("svc", "lnc %d RECV comm from %s/lnc %d: cannot answer its sender's FIN: %s", ctx->lnc,
                c->peer_ip, c->peer_lnc, asr_strerror(rc));
    c->answered = 1;
    ctx->drain.nwatching--;
    return 1;
  }
  if (!c->lingering) return 0;
  if (taken >= c->fin_count) {
    linger_end(ctx, c);
    return 1;
  }
  if (taken > c->linger_taken) { /* the application is taking them: give it the time again */
    c->linger_taken = taken;
    c->linger_until_ms = now + (uint64_t)ctx->drain.timeout_ms;
    return 0;
  }
  if (now < c->linger_until_ms) return 0;
  asr_warn(
      "svc",
      "lnc %d RECV comm from %s/lnc %d: its sender exited and %llu of the %llu messages it sent were not "
      "taken within %ld ms (ASR_DRAIN_TIMEOUT_MS) after the last one was: they are lost",
      ctx->lnc, c->peer_ip, c->peer_lnc, (unsigned long long)(c->fin_count - taken),
      (unsigned long long)c->fin_count, ctx->drain.timeout_ms);
  linger_end(ctx, c);
  return 1;
}

/* Whether RECV comm c, whose sender exited, must stay CONNECTED for what
 * the sender announced and c has not taken yet (then it lingers). On the
 * sm path the announcement is the region's fin word, written by a sender
 * that closed (a killed one wrote none: the comm fails at once, and its
 * posted receives whose messages are wholly in the ring still complete
 * at their next poll, request.c). */
static int linger(asr_ctx_t *ctx, struct asr_comm *c) {
  int before = watched(c);
  uint64_t taken;
  if (asr__comm_sm(c)) {
    uint64_t fin = asr__sm_peer_fin(asr__comm_sm(c), &taken);
    if (fin && !c->fin) {
      c->fin = 1;
      c->fin_count = fin - 1;
    }
  } else {
    taken = recv_taken(ctx, c);
  }
  if (!c->fin) return 0; /* it never said how many: nothing to wait for */
  if (taken >= c->fin_count) return 0;
  c->lingering = 1;
  c->answered = 1; /* nobody to answer */
  c->linger_taken = taken;
  c->linger_until_ms = asr_time_ms() + (uint64_t)ctx->drain.timeout_ms;
  ctx->drain.nwatching += watched(c) - before;
  asr_debug("svc",
            "lnc %d RECV comm from %s/lnc %d: its sender exited with %llu of %llu messages not taken yet",
            ctx->lnc, c->peer_ip, c->peer_lnc, (unsigned long long)(c->fin_count - taken),
            (unsigned long long)c->fin_count);
  return 1;
}

/* The RECV comms whose sender peer_watch.c saw exit: each lingers or fails
 * now, the mailbox having been read (a FIN sent just before the exit is
 * in). comms.mutex held. */
static void peers_exited(asr_ctx_t *ctx) {
  ctx->drain.peer_exits = 0;
  for (struct asr_comm *c = ctx->comms.connected; c; c = c->next) {
    if (!c->peer_exited) continue;
    c->peer_exited = 0;
    if (atomic_load(&c->status) != ASR_COMM_CONNECTED || linger(ctx, c)) continue;
    uint32_t pid = c->watch >= 0 && c->watch < ctx->watch.n ? ctx->watch.peers[c->watch]->pid : 0;
    asr__watch_fail_comm(ctx, c, pid);
  }
}

int asr__drain_tick(asr_ctx_t *ctx, int *tmo) {
  int moved = 0;
  uint64_t now = asr_time_ms();
  pthread_mutex_lock(&ctx->task.mutex);
  int busy = ctx->drain.ndraining > 0 || ctx->drain.nwatching > 0 || ctx->drain.peer_exits > 0;
  pthread_mutex_unlock(&ctx->task.mutex);
  /* ctx->comms.connected is written by this thread alone: no lock to look at it */
  /* Each open endpoint has its own mailbox: a message names comms by
   * their ids at that endpoint (ofi.h), so it is dispatched among that
   * endpoint's comms only. */
  int poll = ctx->comms.connected && (busy || now >= ctx->drain.ctl_poll_at);
  if (poll) ctx->drain.ctl_poll_at = now + ASR_CTL_POLL_MS;
  for (int i = 0; i < ASR_NEPS; i++) {
    if (!atomic_load_explicit(&ctx->fab.ep_open[i], memory_order_acquire)) continue;
    asr__ofi_t *o = &ctx->fab.eps[i];
    if (poll) (void)asr__ofi_progress(o);
    if (!o->mbox_posted) (void)asr__ofi_mbox_post(o); /* a full queue: the next tick */
    asr__ofi_ctl_t m;
    for (int k = 0; k < ASR_CTL_TAKE_MAX; k++) {
      int r = asr__ofi_mbox_take(o, &m);
      if (r == 0) break;
      moved = 1;
      if (r != 1) continue; /* not a mailbox message: dropped (ofi.c said so) */
      pthread_mutex_lock(&ctx->comms.mutex);
      dispatch(ctx, o, &m);
      pthread_mutex_unlock(&ctx->comms.mutex);
    }
  }
  if (ctx->drain.peer_exits > 0) {
    pthread_mutex_lock(&ctx->comms.mutex);
    peers_exited(ctx);
    pthread_mutex_unlock(&ctx->comms.mutex);
    moved = 1;
  }
  /* the sm path's CLOSED is a word of the region (sm_peer_said), read at
   * each poll of the mailboxes */
  if (poll) {
    pthread_mutex_lock(&ctx->comms.mutex);
    for (struct asr_comm *c = ctx->comms.connected; c; c = c->next)
      if (c->type == ASR_SEND_COMM && asr__comm_sm(c) && atomic_load(&c->drain) == ASR_DRAIN_OPEN &&
          atomic_load(&c->status) == ASR_COMM_CONNECTED) {
        sm_peer_said(c);
        if (c->peer_said == ASR_CTL_CLOSED) peer_closed(ctx, c, c->peer_taken);
      }
    pthread_mutex_unlock(&ctx->comms.mutex);
  }
  pthread_mutex_lock(&ctx->task.mutex);
  busy = ctx->drain.ndraining > 0 || ctx->drain.nwatching > 0;
  pthread_mutex_unlock(&ctx->task.mutex);
  if (busy) {
    pthread_mutex_lock(&ctx->comms.mutex);
    for (struct asr_comm *c = ctx->comms.connected; c; c = c->next) {
      int d = atomic_load(&c->drain);
      if (c->type == ASR_SEND_COMM && (d == ASR_DRAIN_POSTING || d == ASR_DRAIN_WAIT_TAKEN))
        moved |= send_step(ctx, c, now);
      else if (watched(c))
        moved |= recv_step(ctx, c, now);
    }
    pthread_mutex_unlock(&ctx->comms.mutex);
    *tmo = 1;
  } else if (ctx->comms.connected) {
    *tmo = ctx->drain.ctl_poll_at > now ? (int)(ctx->drain.ctl_poll_at - now) : 0;
  } else {
    *tmo = ASR_LOOP_FOREVER;
  }
  return moved;
}

/* Starts the drain of SEND comm c: task.mutex held. 1 when it started. */
static int drain_start(asr_ctx_t *ctx, struct asr_comm *c, uint64_t deadline) {
  if (c->type != ASR_SEND_COMM || atomic_load(&c->status) != ASR_COMM_CONNECTED ||
      atomic_load(&c->drain) != ASR_DRAIN_OPEN)
    return 0;
  c->drain_deadline_ms = deadline; /* published to the service thread by task.mutex */
  atomic_store(&c->drain, ASR_DRAIN_POSTING);
  ctx->drain.ndraining++;
  return 1;
}

void asr__drain_comm(asr_ctx_t *ctx, struct asr_comm *c) {
  if (ctx->drain.timeout_ms <= 0 || c->type != ASR_SEND_COMM) return;
  /* A comm that posted nothing has nothing to drain: no need to involve
   * the service thread (its close stays as quick as it was). */
  asr__ofi_t *o = asr__comm_ofi(c);
  asr__sm_t *sm = asr__comm_sm(c);
  if (!o && !sm) return; /* never connected: nothing posted */
  uint64_t posted;
  if (sm) {
    posted = asr__sm_sent(sm);
  } else {
    asr__ofi_lock(o);
    posted = c->osend.seq;
    asr__ofi_unlock(o);
  }
  if (posted == 0 && atomic_load(&c->stash_head) == atomic_load(&c->stash_tail)) return;
  uint64_t t0 = ASR_OBS_TRACING() ? asr_time_ns() : 0;
  pthread_mutex_lock(&ctx->task.mutex);
  if (!ctx->task.shutdown && drain_start(ctx, c, asr_time_ms() + (uint64_t)ctx->drain.timeout_ms)) {
    asr__ctx_wake(ctx);
    /* the service thread ends it by the deadline (it ticks every ms meanwhile) */
    while (atomic_load(&c->drain) != ASR_DRAIN_DONE && !ctx->task.shutdown)
      pthread_cond_wait(&ctx->task.detach_cv, &ctx->task.mutex);
  }
  pthread_mutex_unlock(&ctx->task.mutex);
  if (ASR_OBS_TRACING())
    asr__obs_close(c, t0,
                   atomic_load(&c->drain) == ASR_DRAIN_DONE && atomic_load(&c->status) == ASR_COMM_CONNECTED);
}

void asr__drain_lnc(asr_ctx_t *ctx) {
  if (ctx->drain.timeout_ms <= 0) return;
  uint64_t deadline = asr_time_ms() + (uint64_t)ctx->drain.timeout_ms;
  pthread_mutex_lock(&ctx->comms.mutex);
  pthread_mutex_lock(&ctx->task.mutex);
  for (struct asr_comm *c = ctx->comms.connected; c; c = c->next)
    if (!atomic_load(&c->close_requested)) (void)drain_start(ctx, c, deadline);
  pthread_mutex_unlock(&ctx->task.mutex);
  pthread_mutex_unlock(&ctx->comms.mutex);
  pthread_mutex_lock(&ctx->task.mutex);
  asr__ctx_wake(ctx);
  while (ctx->drain.ndraining > 0 && !ctx->task.shutdown)
    pthread_cond_wait(&ctx->task.detach_cv, &ctx->task.mutex);
  pthread_mutex_unlock(&ctx->task.mutex);
}

void asr__drain_closed(asr_ctx_t *ctx, struct asr_comm *c, uint64_t until_ms) {
  if (c->type != ASR_RECV_COMM || c->answered || atomic_load(&c->status) != ASR_COMM_CONNECTED) return;
  if (asr__comm_sm(c)) { /* a word of the region (sm/sm_layout.h: closed) */
    asr__sm_closed(asr__comm_sm(c));
    c->answered = 1;
    return;
  }
  uint64_t taken = recv_taken(ctx, c);
  int rc;
  while ((rc = asr__ofi_ctl_to_send(asr__comm_ofi(c), &c->orecv, ASR_CTL_CLOSED, taken, 0)) == ASR_EAGAIN &&
         asr_time_ms() < until_ms)
    asr_sleep_ms(1);
  if (rc)
    asr_debug("svc", "lnc %d RECV comm from %s/lnc %d: cannot tell its sender it closed: %s", ctx->lnc,
              c->peer_ip, c->peer_lnc, asr_strerror(rc));
  c->answered = 1;
}

void asr__drain_detached(asr_ctx_t *ctx, struct asr_comm *c) {
  int d = atomic_load(&c->drain);
  if (d == ASR_DRAIN_POSTING || d == ASR_DRAIN_WAIT_TAKEN) drain_set(ctx, c, ASR_DRAIN_DONE);
  if (watched(c)) ctx->drain.nwatching--; /* off the connected list: never counted again */
  c->lingering = 0;
}
