/*
 * context.c -- per-LNC contexts and their service threads (seed §4:
 * enc_async_sr_init, async_sr_service_thread_fn, enc_async_sr_close).
 *
 * The service thread is the single consumer of two producer queues: the
 * handover ring of new comms (filled by asr_connect/asr_accept) and each
 * connected comm's stash ring (filled by slow-path posts). It sleeps in
 * its event loop while task.n == 0 (the seed sleeps on task_cv; producers
 * wake the loop instead, asr__ctx_wake). Each tick it (1) moves
 * handed-over comms into per-direction FIFO queues keyed by (peer_ip,
 * peer_lnc), (2) advances the head comm of every queue by at most one
 * connect step, so it never blocks inside one comm's rendezvous, and (3)
 * drains the connected comms' stash rings in post order (svc_tick below
 * has the details).
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_le.h"
#include "asr_log.h"
#include "asr_time.h"
#include "rma/rma.h"
#include "rt.h"

asr_ctx_t *asr__ctxs[ASR_MAX_LNC];
static pthread_mutex_t init_mutex[ASR_MAX_LNC] = {[0 ... ASR_MAX_LNC - 1] = PTHREAD_MUTEX_INITIALIZER};

/* The bootstrap port: ASR_BOOTSTRAP_PORT, or the seed's
 * NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT (asr_env.h's alias). */
static int env_port(uint16_t *port) {
  long p;
  char err[256];
  if (asr_env_int(ASR_ENV_BOOTSTRAP_PORT, &p, err, sizeof err) != 0) {
    asr_error("svc", "asr_init: %s", err);
    return ASR_ECONFIG;
  }
  if (p == 0) { /* unset: the row has no default */
    asr_error("svc",
              "no bootstrap port: set ASR_BOOTSTRAP_PORT (start the program with asrrun, "
              "or export ASR_BOOTSTRAP_PORT=<port> on every host of the job)");
    return ASR_ECONFIG;
  }
  *port = (uint16_t)p;
  return 0;
}

static void own_hostname(char *out, size_t len) {
  const char *h = NULL; /* checked by asr_init's asr_env_check_all */
  if (asr_env_str(ASR_ENV_HOSTNAME, &h, NULL, 0) != 0) h = NULL;
  memset(out, 0, len);
  if (h)
    snprintf(out, len, "%s", h);
  else if (gethostname(out, len - 1) != 0)
    snprintf(out, len, "localhost");
}

/* Destroys the context's locks and condition variables, in the reverse of
 * asr_init's order (its failure path and asr_close). */
static void sync_destroy(asr_ctx_t *ctx) {
  pthread_cond_destroy(&ctx->wait.cv);
  pthread_mutex_destroy(&ctx->mr.mutex);
  pthread_mutex_destroy(&ctx->wait.mutex);
  pthread_mutex_destroy(&ctx->comms.mutex);
  pthread_cond_destroy(&ctx->task.detach_cv);
  pthread_mutex_destroy(&ctx->task.mutex);
}

int asr_init(int lnc) {
  if (lnc < 0 || lnc >= ASR_MAX_LNC) {
    asr_error("svc", "asr_init: LNC %d is out of range 0..%d", lnc, ASR_MAX_LNC - 1);
    return ASR_INVALID;
  }
  pthread_mutex_lock(&init_mutex[lnc]);
  int rc = ASR_INVALID;
  asr_ctx_t *ctx = NULL;
  char err[512];
  uint16_t port;
  if (asr__ctx_get(lnc)) {
    asr_error("svc", "asr_init: LNC %d is already initialised (call asr_close first)", lnc);
    goto out;
  }
  /* Every setting libasr reads, checked before anything starts: a bad one
   * fails here with its message (asr_env.h), not later inside a provider. */
  asr_env_warn_unknown_once();
  if (asr_env_check_all(ASR_ENV_LIBASR, err, sizeof err) != 0) {
    asr_error("svc", "asr_init: %s", err);
    goto out;
  }
  if (env_port(&port) != 0) goto out;
  long drain_ms = 0;
  if (asr_env_int(ASR_ENV_DRAIN_TIMEOUT_MS, &drain_ms, err, sizeof err) != 0) {
    asr_error("svc", "asr_init: %s", err);
    goto out;
  }
  asr__sm_cfg_t sm_cfg;
  if (asr__sm_cfg_read(&sm_cfg, err, sizeof err) != 0) {
    asr_error("svc", "asr_init: %s", err);
    goto out;
  }
  ctx = calloc(1, sizeof *ctx);
  if (!ctx) goto out;
  ctx->drain.timeout_ms = drain_ms;
  ctx->fab.sm = sm_cfg;
  ctx->lnc = lnc;
  ctx->kv.port = port;
  ctx->trace = asr_log_enabled(ASR_LOG_TRACE, "svc");
  own_hostname(ctx->hostname, sizeof ctx->hostname);
  if (strlen(ctx->hostname) == 0 || strlen(ctx->hostname) >= ASR_KV_HOSTNAME_LEN) {
    asr_error("svc", "asr_init: host name must be 1..127 bytes (set ASR_HOSTNAME)");
    goto err_free;
  }
  if (asr__obs_init(ctx->hostname, err, sizeof err) != 0) {
    asr_error("svc", "asr_init(lnc %d): %s", lnc, err);
    goto err_free;
  }
  asr_trace_thread_prepare(); /* the thread that brings an LNC up posts on it, most likely */
  if (asr__kv_host_join(port, ctx->hostname, err, sizeof err) != 0) {
    asr_error("svc", "asr_init(lnc %d): %s", lnc, err);
    goto err_free;
  }
  if (asr__paths_choose(ctx, err, sizeof err) != 0) {
    asr_error("fab", "asr_init(lnc %d): %s", lnc, err);
    goto err_kv;
  }
  pthread_mutex_init(&ctx->fab.ep_mutex, NULL);
  asr__rank_fail_init(ctx); /* deaths the launcher reports from now on (rank_fail.c) */
  asr__watch_self(ctx->who);
  ctx->watch.self_node = asr_le_get64(ctx->who + 12); /* the node id of "who" (ofi.h) */
  /* The mailbox (drain.c) of each endpoint: a completion read on any
   * thread wakes the service thread, which takes it. */
  for (int i = 0; i < ASR_NEPS; i++) {
    ctx->fab.eps[i].on_ctl = asr__drain_on_ctl;
    ctx->fab.eps[i].ctl_arg = ctx;
  }
  /* One provider forced: its endpoint now, so that a provider this host
   * lacks fails asr_init, as it always did. Per-peer paths: each endpoint
   * when its first comm needs it (asr__ctx_endpoint). */
  if (ctx->fab.one_ep) {
    int ep;
    if (asr__ctx_endpoint(ctx, ASR_PATH_LOCAL, &ep, err, sizeof err) != 0) {
      asr_error("fab", "asr_init(lnc %d): %s", lnc, err);
      goto err_ofi;
    }
  }
  int lrc = asr_loop_new(&ctx->svc.loop);
  if (lrc != 0) {
    asr_error("svc", "asr_init(lnc %d): cannot make the service thread's event loop: %s", lnc,
              asr_strerror(lrc));
    goto err_ofi;
  }
  /* The service thread's KV connections (made here, used only there). */
  lrc = asr_kv_pool_new(ctx->svc.loop, NULL, &ctx->kv.pool, err, sizeof err);
  if (lrc != 0) {
    asr_error("svc", "asr_init(lnc %d): %s", lnc, lrc == ASR_ECONFIG ? err : asr_strerror(lrc));
    goto err_loop;
  }
  pthread_mutex_init(&ctx->task.mutex, NULL);
  pthread_cond_init(&ctx->task.detach_cv, NULL);
  pthread_mutex_init(&ctx->comms.mutex, NULL);
  pthread_mutex_init(&ctx->wait.mutex, NULL);
  pthread_mutex_init(&ctx->mr.mutex, NULL);
  pthread_condattr_t ca; /* asr_comm_wait_connected's deadline is on the monotonic clock */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&ctx->wait.cv, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&ctx->svc.thread, NULL, asr__svc_main, ctx) != 0) {
    asr_error("svc", "asr_init(lnc %d): cannot start the service thread", lnc);
    goto err_sync;
  }
  char name[16]; /* for top -H, perf and gdb */
  snprintf(name, sizeof name, "asr-svc-%d", lnc);
  (void)pthread_setname_np(ctx->svc.thread, name);
  __atomic_store_n(&asr__ctxs[lnc], ctx, __ATOMIC_RELEASE);
  asr__state_report_init(); /* the state report's tables, and its thread (state_report.c) */
  asr_info("svc", "lnc %d up on host %s, bootstrap port %u, provider %s", lnc, ctx->hostname, port,
           ctx->fab.paths_desc);
  rc = ASR_SUCCESS;
  goto out;
  /* every failure undoes, in reverse, what came before it */
err_sync:
  sync_destroy(ctx);
  asr_kv_pool_free(ctx->kv.pool);
err_loop:
  asr_loop_free(ctx->svc.loop);
err_ofi:
  asr__ctx_endpoints_close(ctx);
  pthread_mutex_destroy(&ctx->fab.ep_mutex);
err_kv:
  asr__kv_host_leave();
err_free:
  free(ctx);
out:
  pthread_mutex_unlock(&init_mutex[lnc]);
  return rc;
}

static void free_list(struct asr_comm *c) {
  while (c) {
    struct asr_comm *n = c->next;
    asr__comm_free(c, 1);
    c = n;
  }
}

/* asr_forget (asr.h): each LNC that is up, under its init mutex so that
 * asr_close cannot free its context (and comms) meanwhile. An LNC that is
 * down has nothing registered: asr_close freed its comms, and asr_init
 * starts with none. */
int asr_forget(void *va, size_t len) {
  if (!va || len == 0) return ASR_INVALID;
  for (int lnc = 0; lnc < ASR_MAX_LNC; lnc++) {
    if (!asr__ctx_get(lnc)) continue; /* the common case: one lock per LNC that is up */
    pthread_mutex_lock(&init_mutex[lnc]);
    asr_ctx_t *ctx = asr__ctx_get(lnc);
    if (ctx) asr__mr_forget(ctx, (uintptr_t)va, len);
    pthread_mutex_unlock(&init_mutex[lnc]);
  }
  return ASR_SUCCESS;
}

int asr_close(int lnc) {
  if (lnc < 0 || lnc >= ASR_MAX_LNC) return ASR_INVALID;
  pthread_mutex_lock(&init_mutex[lnc]);
  asr_ctx_t *ctx = asr__ctx_get(lnc);
  if (!ctx) {
    pthread_mutex_unlock(&init_mutex[lnc]);
    asr_error("svc", "asr_close: LNC %d is not initialised", lnc);
    return ASR_INVALID;
  }
  /* No completed send lost to our exit (drain.c): every SEND comm still
   * open waits, bounded, for its peer to take what it was sent. */
  asr__drain_lnc(ctx);
  pthread_mutex_lock(&ctx->task.mutex);
  ctx->task.shutdown = 1;
  asr__ctx_wake(ctx);
  pthread_mutex_unlock(&ctx->task.mutex);
  pthread_join(ctx->svc.thread, NULL);
  /* comms being closed on other threads are theirs to finish first: they
   * still cancel operations on the endpoint closed below */
  pthread_mutex_lock(&ctx->task.mutex);
  while (ctx->task.closers > 0) pthread_cond_wait(&ctx->task.detach_cv, &ctx->task.mutex);
  pthread_mutex_unlock(&ctx->task.mutex);
  pthread_mutex_lock(&asr__rep_mutex); /* no report is reading it (state_report.c) */
  __atomic_store_n(&asr__ctxs[lnc], NULL, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&asr__rep_mutex);
  /* Our RECV comms' senders: we take nothing more, so their closes need
   * not wait for us (drain.c). The service thread has stopped. */
  uint64_t until = asr_time_ms() + 100;
  for (struct asr_comm *c = ctx->comms.connected; c; c = c->next) asr__drain_closed(ctx, c, until);
  asr__shm_name_drop(lnc); /* closing the endpoint unlinks it */

  /* The thread moved every comm still connecting to the error list. Close the
   * endpoints first: after that no completion can name our memory, so every
   * comm (posted or stashed requests included) can be freed. */
  for (int i = 0; i < ASR_NEPS; i++)
    if (atomic_load(&ctx->fab.ep_open[i]) && ctx->fab.eps[i].ep) {
      fi_close(&ctx->fab.eps[i].ep->fid);
      ctx->fab.eps[i].ep = NULL;
    }
  free_list(ctx->comms.connected);
  free_list(ctx->comms.errored);
  for (unsigned i = ctx->task.ring_head; i != ctx->task.ring_tail; i++)
    asr__comm_free(ctx->task.ring[i % ASR_RING], 1);
  /* the rest in the reverse order of asr_init */
  asr__watch_free(ctx);
  free(ctx->conn.hosts);
  assert(!ctx->mr.comms); /* each comm freed above took itself off */
  sync_destroy(ctx);
  asr_kv_pool_free(ctx->kv.pool); /* every comm's request went with its comm */
  asr_loop_free(ctx->svc.loop);   /* every source on it was stopped (asserted in debug builds) */
  asr__mem_ctx_close(ctx);        /* registrations revoked before their endpoints go */
  asr__notif_ctx_close(ctx);
  asr__ctx_endpoints_close(ctx);
  pthread_mutex_destroy(&ctx->fab.ep_mutex);
  asr__kv_host_leave();
  free(ctx);
  pthread_mutex_unlock(&init_mutex[lnc]);
  return ASR_SUCCESS;
}

/* --- the service thread ---------------------------------------------------- */

static asr_peerq_t *peerq_find(asr_ctx_t *ctx, int dir, const char *ip, int lnc) {
  for (asr_peerq_t *q = ctx->conn.pending[dir]; q; q = q->next)
    if (q->peer_lnc == lnc && strcmp(q->peer_ip, ip) == 0) return q;
  asr_peerq_t *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  snprintf(q->peer_ip, sizeof q->peer_ip, "%s", ip);
  q->peer_lnc = lnc;
  q->next = ctx->conn.pending[dir];
  ctx->conn.pending[dir] = q;
  return q;
}

/* pickup_connection_task: new comms go to the tail of their peer queue. The
 * ordinal (n-th comm to this peer in this direction) is assigned here, in
 * handover order, which is the application's creation order. */
static void pickup(asr_ctx_t *ctx, struct asr_comm *c) {
  /* A comm to a rank whose death this context handled already, made
   * before that (rank_fail.c), fails here: no queue would ever see it. */
  int doomed = asr__rank_doomed(ctx, c);
  asr_peerq_t *q = doomed ? NULL : peerq_find(ctx, c->type, c->peer_ip, c->peer_lnc);
  if (!q) {
    if (!doomed) snprintf(c->err, sizeof c->err, "out of memory queueing the comm");
    asr__comm_set_status(c, ASR_COMM_CONNECTION_ERROR);
    pthread_mutex_lock(&ctx->comms.mutex);
    c->next = ctx->comms.errored;
    ctx->comms.errored = c;
    pthread_mutex_unlock(&ctx->comms.mutex);
    /* the unit of work its handover counted (comm.c) */
    pthread_mutex_lock(&ctx->task.mutex);
    ctx->task.n--;
    pthread_mutex_unlock(&ctx->task.mutex);
    return;
  }
  /* A restarted peer rank counts its comms from 0 again: so do we, from
   * its first comm of the new incarnation (handle_inc.h). */
  if (c->peer_inc > q->peer_inc) {
    q->peer_inc = c->peer_inc;
    q->next_ordinal = 0;
  }
  c->ordinal = q->next_ordinal++;
  atomic_store_explicit(&c->rep_ordinal, c->ordinal, memory_order_relaxed);
  c->next = NULL;
  c->q = q;
  if (q->tail) {
    q->tail->next = c;
  } else {
    q->head = c;
    asr__sched_put(ctx, c, ASR_SCHED_READY); /* a new head steps in the next tick */
  }
  q->tail = c;
  if (!q->listed) {
    q->anext = ctx->conn.active[c->type];
    ctx->conn.active[c->type] = q;
    q->listed = 1;
  }
}

/* Removes c from whatever list of ours holds it. Service thread only. */
static void detach(asr_ctx_t *ctx, struct asr_comm *c) {
  for (int dir = 0; dir < 2; dir++)
    for (asr_peerq_t *q = ctx->conn.active[dir]; q; q = q->anext) { /* a queued comm's queue is listed */
      struct asr_comm *prev = NULL;
      for (struct asr_comm *x = q->head; x; prev = x, x = x->next) {
        if (x != c) continue;
        asr__sched_unlink(ctx, x);
        if (prev) {
          prev->next = x->next;
        } else {
          q->head = x->next;
          if (q->head) asr__sched_put(ctx, q->head, ASR_SCHED_READY); /* the new head */
        }
        if (q->tail == x) q->tail = prev;
        /* a comm still connecting held one unit of work */
        pthread_mutex_lock(&ctx->task.mutex);
        ctx->task.n--;
        pthread_mutex_unlock(&ctx->task.mutex);
        goto found;
      }
    }
  pthread_mutex_lock(&ctx->comms.mutex);
  for (struct asr_comm **pp = &ctx->comms.connected; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  for (struct asr_comm **pp = &ctx->comms.errored; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  pthread_mutex_unlock(&ctx->comms.mutex);
found:
  c->next = NULL;
  asr__drain_detached(ctx, c);
  asr__peer_host_forget(ctx, c);
  if (c->kv_req) {
    asr_kv_call_free(c->kv_req);
    c->kv_req = NULL;
  }
  /* Stashed requests of a closing comm will never be posted: release their work units. */
  uint64_t h = atomic_load(&c->stash_head), t = atomic_load(&c->stash_tail);
  if (t > h) {
    pthread_mutex_lock(&ctx->task.mutex);
    ctx->task.n -= (int)(t - h);
    pthread_mutex_unlock(&ctx->task.mutex);
    atomic_store(&c->stash_head, t);
    atomic_fetch_sub(&ctx->stash.count, (unsigned)(t - h));
  }
  atomic_store(&c->detached, 1);
}

/* async_sr_connect_comms: one step for each queue head that can move
 * (connect_sched.c says which: READY, after the timers and the CQ read for
 * accepts put theirs there). */
static int connect_comms(asr_ctx_t *ctx) {
  int progressed = 0;
  uint64_t now = asr_time_ms();
  asr__sched_accepts(ctx, now);
  asr__sched_timers(ctx, now);
  asr__sched_safety(ctx, now);
  /* This tick's READY comms step; what an event puts on READY meanwhile
   * (a new head, a woken "hostname" waiter, a head stepped again at once)
   * steps in the next tick. */
  asr_schedq_t *ready = &ctx->sched.lists[ASR_SCHED_READY], *batch = &ctx->sched.lists[ASR_SCHED_BATCH];
  for (struct asr_comm *c = ready->head; c; c = c->snext) c->sched = ASR_SCHED_BATCH;
  *batch = *ready;
  ready->head = ready->tail = NULL;
  struct asr_comm *c;
  while ((c = batch->head) != NULL) {
    asr__sched_unlink(ctx, c);
    if (c->q->head != c) continue; /* only a head steps (never the case: off every list when not) */
    progressed |= asr__connect_step(ctx, c);
    int st = atomic_load(&c->status);
    if (st == ASR_COMM_CONNECTED) {
      progressed = 1; /* it left its queue in the step (asr__connect_done) */
    } else if (st == ASR_COMM_CONNECTION_ERROR) {
      asr__sched_leave_queue(ctx, c, st);
      progressed = 1;
    } else {
      asr__sched_after_step(ctx, c, asr_time_ms());
    }
  }
  return progressed;
}

static int post_sendrecv_tasks(asr_ctx_t *ctx) {
  int progressed = 0;
  ctx->stash.queue_full = 0;
  /* Nothing stashed (the usual case): no walk over every connected comm. A
   * request stashed after this look wakes the thread for another tick. */
  if (atomic_load(&ctx->stash.count) == 0) return 0;
  pthread_mutex_lock(&ctx->comms.mutex);
  progressed |= asr__drain_stashes(ctx, ASR_SEND_COMM);
  progressed |= asr__drain_stashes(ctx, ASR_RECV_COMM);
  pthread_mutex_unlock(&ctx->comms.mutex);
  return progressed;
}

/*
 * One tick of the service thread (seed §4 LOOP), run by its loop before
 * each sleep; it returns how long the loop may sleep. It (1) takes the
 * handed-over comms into their peer queues and lets go of the comms being
 * closed, (2) advances the head of every peer queue that can move by one
 * connect step, (3) drains the stash rings; then it sleeps as long as
 * nothing can move: forever when there is no work (task.n == 0), else until
 * a KV socket it waits on is ready or a head's timer is due. Producers wake
 * it (asr__ctx_wake: the loop's wakeup, which makes the next sleep not
 * happen once work was published), and so does a watched peer's exit.
 */
static int svc_tick(asr_loop_t *loop, void *arg) {
  asr_ctx_t *ctx = arg;
  pthread_mutex_lock(&ctx->task.mutex);
  if (ctx->task.n < 0) asr_error("svc", "lnc %d: task count went negative (%d)", ctx->lnc, ctx->task.n);
  if (ctx->task.shutdown) {
    pthread_mutex_unlock(&ctx->task.mutex);
    asr_loop_stop(loop);
    return 0;
  }
  struct asr_comm *picked[ASR_RING];
  unsigned npicked = 0;
  while (ctx->task.ring_head != ctx->task.ring_tail)
    picked[npicked++] = ctx->task.ring[ctx->task.ring_head++ % ASR_RING];
  struct asr_comm *closing[ASR_RING];
  unsigned nclosing = ctx->task.nclosing;
  memcpy(closing, ctx->task.closing, nclosing * sizeof closing[0]);
  ctx->task.nclosing = 0;
  pthread_mutex_unlock(&ctx->task.mutex);

  for (unsigned i = 0; i < npicked; i++) pickup(ctx, picked[i]);
  asr__rank_fail_tick(ctx); /* ranks the launcher reported dead (rank_fail.c) */
  if (nclosing) {
    for (unsigned i = 0; i < nclosing; i++) detach(ctx, closing[i]);
    pthread_mutex_lock(&ctx->task.mutex);
    pthread_cond_broadcast(&ctx->task.detach_cv);
    pthread_mutex_unlock(&ctx->task.mutex);
  }
  int progressed = npicked > 0 || nclosing > 0;
  progressed |= connect_comms(ctx);
  progressed |= post_sendrecv_tasks(ctx);
  int ctl_tmo = ASR_LOOP_FOREVER; /* the close handshake's next look (drain.c) */
  progressed |= asr__drain_tick(ctx, &ctl_tmo);
  progressed |= asr__notif_tick(ctx, &ctl_tmo); /* one-sided: ring asks, the owner's progress */
  /* A pipelined sm send moves only when someone polls (sm_data.c): this
   * thread pushes it too, every millisecond while one is under way, so a
   * sender that polls nothing else still gets its message out. */
  if (asr__sm_pipes_active()) {
    progressed |= asr__sm_progress_waiting(NULL);
    if (ctl_tmo < 0 || ctl_tmo > 1) ctl_tmo = 1;
  }
  if (progressed) return 0; /* another tick at once: what moved may let more move */

  pthread_mutex_lock(&ctx->task.mutex);
  int busy = ctx->task.n > 0;
  pthread_mutex_unlock(&ctx->task.mutex);
  if (!busy) return ctl_tmo;
  if (asr__connect_yielding(ctx, asr_time_ms())) {
    /* connects are moving: tick again at once, after the peers whose
     * progress they wait for had the CPU (connect.c: CONNECT_YIELD_MS) */
    sched_yield();
    return 0;
  }
  int tmo = asr__sched_timeout(ctx, asr_time_ms());
  if (ctx->stash.queue_full && (tmo < 0 || tmo > 1)) tmo = 1; /* a stash waits for queue room */
  if (ctl_tmo >= 0 && (tmo < 0 || ctl_tmo < tmo)) tmo = ctl_tmo;
  return tmo;
}

void *asr__svc_main(void *arg) {
  asr_ctx_t *ctx = arg;
  asr_trace_thread_lnc(ctx->lnc);
  asr_loop_set_hooks(ctx->svc.loop, svc_tick, NULL, ctx);
  int rc = asr_loop_run(ctx->svc.loop);
  if (rc) asr_error("svc", "lnc %d: the service thread's loop failed: %s", ctx->lnc, asr_strerror(rc));
  /* SHUTDOWN. The comms asr_comm_close handed over are let go of first
   * (off every list of ours: their closers free them, and asr_close waits
   * for those); then the comms still connecting go to the error list. */
  pthread_mutex_lock(&ctx->task.mutex);
  struct asr_comm *closing[ASR_RING];
  unsigned nclosing = ctx->task.nclosing;
  memcpy(closing, ctx->task.closing, nclosing * sizeof closing[0]);
  ctx->task.nclosing = 0;
  pthread_mutex_unlock(&ctx->task.mutex);
  for (unsigned i = 0; i < nclosing; i++) detach(ctx, closing[i]);
  pthread_mutex_lock(&ctx->task.mutex);
  pthread_cond_broadcast(&ctx->task.detach_cv);
  pthread_mutex_unlock(&ctx->task.mutex);
  for (int dir = 0; dir < 2; dir++) {
    asr_peerq_t *q = ctx->conn.pending[dir];
    while (q) {
      for (struct asr_comm *c = q->head, *n; c; c = n) {
        n = c->next;
        if (c->kv_req) {
          asr_kv_call_free(c->kv_req);
          c->kv_req = NULL;
        }
        snprintf(c->err, sizeof c->err, "LNC %d closed while connecting", ctx->lnc);
        asr__comm_set_status(c, ASR_COMM_CONNECTION_ERROR);
        c->next = ctx->comms.errored;
        ctx->comms.errored = c;
      }
      asr_peerq_t *nq = q->next;
      free(q);
      q = nq;
    }
    ctx->conn.pending[dir] = NULL;
    ctx->conn.active[dir] = NULL;
  }
  for (int i = 0; i < ASR_SCHED_N; i++) ctx->sched.lists[i].head = ctx->sched.lists[i].tail = NULL;
  return NULL;
}
