/*
 * rank_fail.c -- fails the comms to a rank the launcher reports dead (issue
 * 50, "jobs that outlive a failure"): the runtime half of the rank-state
 * events whose PMIx half is bootstrap/job_ranks.c.
 *
 * Why. Under asrrun --on-failure continue|restart the job goes on after a
 * rank dies, and its survivors must not wait for it: a receive is posted
 * for a tag, not a connection, so no provider fails it when its sender
 * dies, and across hosts no pidfd sees the death (peer_watch.c watches the
 * processes of this host only). The launcher's event is what says so.
 *
 * How. The event arrives on PMIx's thread, which must not touch our comms:
 * job_ranks.c records the death (append-only, numbered) and calls the hook
 * set here, which only wakes every service thread (wake_all). Each service
 * thread, at its next tick, reads the deaths it has not handled yet
 * (ctx->rank.seen) and, for each, fails its comms whose peer is that rank:
 * the comm's peer_rank (asr_job_connect / asr_job_accept), or its peer
 * address and LNC equal to what the rank published (asr_job_peer, asked
 * once per dead rank, here on a service thread, never on PMIx's). Only
 * comms made before the death was recorded fail (c->born_deaths): a comm
 * made after it is for the rank's next incarnation, if it is restarted.
 *  - A connected SEND comm fails at once, as one to a dead process of this
 *    host does (asr__watch_fail_comm): its posts are refused and its
 *    requests in flight fail at their next asr_test.
 *  - A connected RECV comm is marked as one whose sender exited
 *    (peer_exited): the close handshake's next look (drain.c, later in the
 *    same tick) reads the mailbox first, so a sender that closed, announced
 *    what it sent and then died leaves its messages to be taken (the comm
 *    lingers, bounded by ASR_DRAIN_TIMEOUT_MS); any other fails there, its
 *    posted receives cancelled. On tcp;ofi_rxm that matters: a receive
 *    posted after its peer's connection is gone can crash libfabric 1.17
 *    (tests/unit/test_peer_kill.c, "posted ahead"), and a failed comm takes
 *    no more posts, its stashed receives failing instead of being posted.
 *  - A comm still connecting to that rank fails at once (a RECV comm would
 *    wait for its sender for good), and so does one handed over, not yet
 *    picked up, when it is (asr__rank_doomed).
 *  - A comm that had failed already because its peer process exited (the
 *    pidfd is faster on one host) keeps its state and takes the launcher's
 *    line as its error (c->why: asr_comm_error prefers it), which names the
 *    rank and why it died.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_log.h"
#include "job.h"
#include "rt.h"

/* --- where each dead rank was: asked once, shared by every context -------- */

typedef struct {
  int rank;
  int ok; /* it published an address and an LNC */
  char addr[64];
  int lnc;
} dead_peer_t;

static pthread_mutex_t peers_mu = PTHREAD_MUTEX_INITIALIZER;
static dead_peer_t *peers; /* one per rank asked about; grows, never shrinks */
static int npeers, cappeers;

/* Where rank published it is (its address and LNC) into *out. Asked of
 * PMIx outside the lock (asr_job_peer; a dead rank's keys stay with the
 * server), then kept: two threads that ask at once both ask. Service
 * thread. */
static void peer_of(int rank, dead_peer_t *out) {
  pthread_mutex_lock(&peers_mu);
  for (int i = 0; i < npeers; i++)
    if (peers[i].rank == rank) {
      *out = peers[i];
      pthread_mutex_unlock(&peers_mu);
      return;
    }
  pthread_mutex_unlock(&peers_mu);
  dead_peer_t p = {.rank = rank, .lnc = -1};
  p.ok = asr_job_peer(rank, p.addr, sizeof p.addr, &p.lnc) == ASR_SUCCESS;
  pthread_mutex_lock(&peers_mu);
  if (npeers == cappeers) {
    int cap = cappeers ? cappeers * 2 : 8;
    dead_peer_t *n = realloc(peers, (size_t)cap * sizeof *n);
    if (n) {
      peers = n;
      cappeers = cap;
    }
  }
  if (npeers < cappeers) peers[npeers++] = p; /* (out of memory: asked again next time) */
  pthread_mutex_unlock(&peers_mu);
  *out = p;
}

/* Whether c's peer is the rank d names, at p. */
static int is_peer(const struct asr_comm *c, const asr_job_death_t *d, const dead_peer_t *p) {
  if (atomic_load_explicit(&((struct asr_comm *)c)->peer_rank, memory_order_relaxed) == d->rank) return 1;
  return p->ok && c->peer_lnc == p->lnc && strcmp(c->peer_ip, p->addr) == 0;
}

/* c takes d's line as its error (the header says when): once. Service
 * thread. */
static void take_why(struct asr_comm *c, const asr_job_death_t *d) {
  if (atomic_load_explicit(&c->why, memory_order_relaxed)) return;
  char *w = strdup(d->why);
  if (w) atomic_store_explicit(&c->why, w, memory_order_release);
}

static const char *dir_name(const struct asr_comm *c) { return c->type == ASR_SEND_COMM ? "SEND" : "RECV"; }

/* Death i (d, its rank at p) for the connected comms of ctx. */
static void fail_connected(asr_ctx_t *ctx, unsigned i, const asr_job_death_t *d, const dead_peer_t *p) {
  pthread_mutex_lock(&ctx->comms.mutex);
  for (struct asr_comm *c = ctx->comms.connected; c; c = c->next) {
    if (c->born_deaths > i || !is_peer(c, d, p)) continue;
    int st = atomic_load(&c->status);
    if (st == ASR_COMM_CONNECTION_ERROR) {
      if (c->died) take_why(c, d); /* its pidfd came first: the launcher says more */
      continue;
    }
    if (st != ASR_COMM_CONNECTED) continue;
    take_why(c, d);
    if (c->type == ASR_SEND_COMM) {
      asr__watch_fail_comm(ctx, c, 0); /* err from why */
    } else if (!c->peer_exited && !c->lingering) {
      c->peer_exited = 1; /* drain.c decides, this tick: linger or fail */
      ctx->drain.peer_exits++;
    }
  }
  pthread_mutex_unlock(&ctx->comms.mutex);
}

/* Fails c, a queue head still connecting, with d's line; it leaves its
 * queue for the error list (what connect.c's failures do). */
static void fail_connecting(asr_ctx_t *ctx, struct asr_comm *c, const asr_job_death_t *d) {
  snprintf(c->err, sizeof c->err, "%s", d->why);
  c->died = 1;
  if (c->kv_req) {
    asr_kv_call_free(c->kv_req);
    c->kv_req = NULL;
  }
  asr__peer_host_forget(ctx, c);
  asr_info("svc", "lnc %d %s comm to %s/lnc %d, still connecting: %s", ctx->lnc, dir_name(c), c->peer_ip,
           c->peer_lnc, c->err);
  asr__comm_set_status(c, ASR_COMM_CONNECTION_ERROR);
  asr__sched_leave_queue(ctx, c, ASR_COMM_CONNECTION_ERROR);
}

/* Death i for the comms of ctx still connecting: the heads of the queues
 * to that rank, one after the other (a queue is in the order its comms
 * were made, so those made after the death stay). */
static void fail_queued(asr_ctx_t *ctx, unsigned i, const asr_job_death_t *d, const dead_peer_t *p) {
  for (int dir = 0; dir < 2; dir++)
    for (asr_peerq_t *q = ctx->conn.active[dir]; q; q = q->anext)
      while (q->head && q->head->born_deaths <= i && is_peer(q->head, d, p)) fail_connecting(ctx, q->head, d);
}

void asr__rank_fail_tick(asr_ctx_t *ctx) {
  unsigned n = asr__job_deaths();
  if (ctx->rank.seen == n) return; /* every tick: one acquire load */
  for (unsigned i = ctx->rank.seen; i < n; i++) {
    asr_job_death_t d;
    if (asr__job_death(i, &d) != 0) continue;
    dead_peer_t p;
    peer_of(d.rank, &p);
    asr_debug("svc", "lnc %d: rank %d died (incarnation %d): failing its comms", ctx->lnc, d.rank,
              d.incarnation);
    fail_connected(ctx, i, &d, &p);
    fail_queued(ctx, i, &d, &p);
  }
  ctx->rank.seen = n;
}

int asr__rank_doomed(asr_ctx_t *ctx, struct asr_comm *c) {
  for (unsigned i = c->born_deaths; i < ctx->rank.seen; i++) {
    asr_job_death_t d;
    if (asr__job_death(i, &d) != 0) continue;
    dead_peer_t p;
    peer_of(d.rank, &p);
    if (!is_peer(c, &d, &p)) continue;
    snprintf(c->err, sizeof c->err, "%s", d.why);
    c->died = 1;
    asr_info("svc", "lnc %d %s comm to %s/lnc %d: %s", ctx->lnc, dir_name(c), c->peer_ip, c->peer_lnc,
             c->err);
    return 1;
  }
  return 0;
}

/* bootstrap's hook, on PMIx's event thread: every service thread looks at
 * the new death at its next tick. Under asr__rep_mutex, which asr_close
 * holds to unpublish a context before it frees it (context.c), so no
 * context is freed while it is woken here. */
static void wake_all(void) {
  pthread_mutex_lock(&asr__rep_mutex);
  for (int lnc = 0; lnc < ASR_MAX_LNC; lnc++) {
    asr_ctx_t *ctx = asr__ctx_get(lnc);
    if (ctx) asr__ctx_wake(ctx);
  }
  pthread_mutex_unlock(&asr__rep_mutex);
}

void asr__rank_fail_init(asr_ctx_t *ctx) {
  ctx->rank.seen = asr__job_deaths();
  asr__job_on_death(wake_all);
}
