/*
 * comm.c -- comm records: creation and handover (seed: async_sr_queue_connect_task,
 * the nrt_async_sendrecv_comm constructor), the per-comm MR cache, status
 * queries and freeing (asr_comm_close is close.c's).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "asr_assert.h"
#include "asr_comm_names.h"
#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "job.h"
#include "rma/rma.h"
#include "rt.h"

const char *asr_comm_status_name(int s) { return asr_comm_state_text(s); }

void asr__comm_set_status(struct asr_comm *c, int status) {
  atomic_store_explicit(&c->state_since_ms, asr_time_ms(), memory_order_relaxed);
  int old = atomic_exchange(&c->status, status);
  if (ASR_OBS_ON()) asr__obs_state(c, old, status);
  asr_debug("svc", "lnc %d %s comm %p to %s/lnc %d: %s -> %s", c->lnc,
            c->type == ASR_SEND_COMM ? "SEND" : "RECV", (void *)c, c->peer_ip, c->peer_lnc,
            asr_comm_status_name(old), asr_comm_status_name(status));
  /* asr_comm_wait_connected's sleepers on c look again. The status is
   * stored before the count of c's sleepers is read, and a sleeper counts
   * itself before it reads the status (both sequentially consistent):
   * either it sees the new status, or we see it and wake it (under its
   * mutex, so not between its look and its sleep). Only a comm someone
   * waits on wakes anyone: a thread waiting on its comms one by one in a
   * mesh is not woken by each of the others. */
  if ((status == ASR_COMM_CONNECTED || status == ASR_COMM_CONNECTION_ERROR) && atomic_load(&c->waiters) > 0) {
    pthread_mutex_lock(&c->ctx->wait.mutex);
    pthread_cond_broadcast(&c->ctx->wait.cv);
    pthread_mutex_unlock(&c->ctx->wait.mutex);
  }
}

/* The records of closed comms and their pools, for the next ones (handle.h:
 * never given back to malloc, so that a closed comm's handle, and its
 * requests', can be checked). */
static asr__slab_t comm_slab =
    ASR_SLAB("comm", sizeof(struct asr_comm), offsetof(struct asr_comm, live), 0, 1);
static asr__slab_t pool_slab = ASR_SLAB("request pool", sizeof(asr_comm_pool_t),
                                        offsetof(asr_comm_pool_t, reqs) + offsetof(struct asr_request, live),
                                        sizeof(struct asr_request), ASR_RING);

struct asr_comm *asr__comm_new(asr_ctx_t *ctx, asr_comm_type_t type, const char *peer_ip, int peer_lnc) {
  struct asr_comm *c = asr__slab_take(&comm_slab); /* zeroed, as calloc's */
  if (!c) return NULL;
  c->ctx = ctx;
  c->type = type;
  c->lnc = ctx->lnc;
  c->peer_lnc = peer_lnc;
  snprintf(c->peer_ip, sizeof c->peer_ip, "%s", peer_ip);
  atomic_init(&c->status, ASR_COMM_START_INIT);
  atomic_init(&c->state_since_ms, asr_time_ms());
  atomic_init(&c->peer_rank, -1);
  c->peer_inc = ASR_PEER_INC_NONE;
  c->born_deaths = asr__job_deaths(); /* only later deaths fail it (rank_fail.c) */
  c->watch = -1;
  c->ep = -1;
  asr__obs_comm_new(c);
  pthread_mutex_init(&c->stash_mutex, NULL);
  return c;
}

asr_comm_pool_t *asr__comm_pool(struct asr_comm *c) {
  asr_comm_pool_t *p = asr__comm_pool_of(c);
  if (p) return p;
  p = asr__slab_take(&pool_slab); /* zeroed but for its requests' live words */
  if (!p) return NULL;
  /* The pool of 128 requests, recycled for as long as the comm lives. */
  for (int i = 0; i < ASR_RING; i++) {
    p->reqs[i].comm = c;
    atomic_init(&p->reqs[i].status, ASR_REQ_FREE);
    p->free_data[i] = &p->reqs[ASR_RING - 1 - i];
  }
  p->free_top = ASR_RING;
  asr_comm_pool_t *none = NULL;
  /* release: whoever loads the pointer (acquire) sees the pool built */
  if (atomic_compare_exchange_strong_explicit(&c->pool, &none, p, memory_order_acq_rel, memory_order_acquire))
    return p;
  asr__slab_put(&pool_slab, p); /* another thread's post made it first */
  return none;
}

void asr__comm_retire(struct asr_comm *c) {
  asr__handle_retire(&c->live);
  asr_comm_pool_t *p = asr__comm_pool_of(c);
  for (int i = 0; p && i < ASR_RING; i++) asr__handle_retire(&p->reqs[i].live);
}

/* Frees c. With endpoint_closed the transport can no longer complete any of
 * its operations (asr_close closed the endpoint first); otherwise the caller
 * (asr_comm_close) had the service thread let go of c and took back every
 * operation libfabric owned. What must hold then, asserted:
 * - no op of c is libfabric's: its completion would be written into freed
 *   memory (asr_comm_close keeps a comm whose cancels did not finish on the
 *   error list instead, for asr_close);
 * - the stash ring is empty: the service thread's detach dropped what was
 *   stashed, and no post is taken once close is requested;
 * - it has no KV request: the service thread's pool would call back into
 *   freed memory (detach freed it, on that thread).
 * Not that every request is FREE: one the application posted and never
 * tested stays OFI_POSTED, and closing with it is allowed (seed §2 close).
 * With endpoint_closed none of this holds: asr_close frees comms as they
 * were when the service thread stopped, stashed requests and all. */
void asr__comm_free(struct asr_comm *c, int endpoint_closed) {
  asr_comm_pool_t *pool = asr__comm_pool_of(c);
#ifndef NDEBUG
  if (!endpoint_closed) {
    for (int i = 0; pool && i < ASR_RING; i++) assert(!asr__ofi_op_owned(&pool->ops[i]));
    assert(!asr__ofi_op_owned(&c->orecv.ctrl_op) && !asr__ofi_op_owned(&c->osend.ctrl_op));
    assert(atomic_load(&c->stash_head) == atomic_load(&c->stash_tail));
    assert(!c->kv_req);
  }
#else
  (void)endpoint_closed;
#endif
  asr__comm_retire(c); /* the application's handles first: a later call on them fails unread */
  asr__rep_remove(c);  /* out of the state report's sight */
  /* asr_close: the service thread has stopped, so its pool may be touched */
  if (c->kv_req) asr_kv_call_free(c->kv_req);
  /* out of asr_forget's sight before its entries go */
  pthread_mutex_lock(&c->ctx->mr.mutex);
  if (c->mr_listed) {
    struct asr_comm **pp = &c->ctx->mr.comms;
    while (*pp != c) pp = &(*pp)->mr_next;
    *pp = c->mr_next;
    c->mr_listed = 0;
  }
  pthread_mutex_unlock(&c->ctx->mr.mutex);
  for (asr_mr_entry_t *e = atomic_load(&c->mrs), *n; e; e = n) {
    n = e->next;
    asr__ofi_mr_dereg(e->mr);
    free(e);
  }
  asr__notif_comm_free(c);       /* one-sided: its ring, or the owner's table it mapped (rma/rma.h) */
  asr__sm_free(asr__comm_sm(c)); /* its region: unmapped (and unlinked, if its sender never came) */
  pthread_mutex_destroy(&c->stash_mutex);
  free(atomic_load(&c->why)); /* rank_fail.c's copy of the death's line */
  if (pool) asr__slab_put(&pool_slab, pool);
  asr__slab_put(&comm_slab, c);
}

static int valid_ip(const char *ip) {
  struct in_addr a;
  return ip && inet_pton(AF_INET, ip, &a) == 1;
}

/* The incarnation a comm made now for rank is for: the rank's newest, the
 * next while it is being restarted; ASR_PEER_INC_NONE when the job knows no
 * such rank. */
static long expected_inc(int rank) {
  int state, inc;
  if (asr__job_ranks_get(rank, &state, &inc) != 0) return ASR_PEER_INC_NONE;
  return state == ASR_RANK_RESTARTING ? (long)inc + 1 : inc;
}

/* async_sr_queue_connect_task: build the comm and hand it to the service thread. */
int asr__comm_queue(int lnc, const char *peer_ip, int peer_lnc, asr_comm_type_t type, int rank,
                    asr_comm_t **out) {
  const char *fn = type == ASR_SEND_COMM ? "asr_connect" : "asr_accept";
  if (!out) {
    asr_error("svc", "%s: NULL output comm pointer", fn);
    return ASR_INVALID;
  }
  if (peer_lnc < 0 || peer_lnc >= ASR_MAX_LNC) {
    asr_error("svc", "%s: peer LNC %d is out of range 0..127", fn, peer_lnc);
    return ASR_INVALID;
  }
  if (!valid_ip(peer_ip)) {
    asr_error("svc", "%s: peer address '%s' is not an IPv4 address", fn, peer_ip ? peer_ip : "(null)");
    return ASR_INVALID;
  }
  asr_ctx_t *ctx = asr__ctx_get(lnc);
  if (!ctx) {
    asr_error("svc", "%s: LNC %d is not initialised (call asr_init(%d) first)", fn, lnc, lnc);
    return ASR_INVALID;
  }
  struct asr_comm *c = asr__comm_new(ctx, type, peer_ip, peer_lnc);
  if (!c) {
    asr_error("svc", "%s: out of memory", fn);
    return ASR_INVALID;
  }
  if (rank >= 0) {
    atomic_store_explicit(&c->peer_rank, rank, memory_order_relaxed); /* the report's, and rank_fail.c's */
    c->peer_inc = expected_inc(rank);
  }
  /* its handle, live from here on (before the handover, after which the
   * comm is the service thread's) */
  uint64_t h = asr__handle_renew(c, &c->live, ASR_HK_COMM);
  asr__rep_add(c);
  pthread_mutex_lock(&ctx->task.mutex);
  while (ctx->task.ring_tail - ctx->task.ring_head >= ASR_RING && !ctx->task.shutdown) {
    /* handover ring full: let the service thread pick up */
    pthread_mutex_unlock(&ctx->task.mutex);
    asr_sleep_ms(1);
    pthread_mutex_lock(&ctx->task.mutex);
  }
  ctx->task.ring[ctx->task.ring_tail++ % ASR_RING] = c;
  ctx->task.n++;
  asr__ctx_wake(ctx);
  pthread_mutex_unlock(&ctx->task.mutex);
  *out = (asr_comm_t *)(uintptr_t)h;
  return ASR_SUCCESS;
}

int asr_connect(int lnc, const char *peer_ip, int peer_lnc, asr_comm_t **send_comm) {
  return asr__comm_queue(lnc, peer_ip, peer_lnc, ASR_SEND_COMM, -1, send_comm);
}

int asr_accept(int lnc, const char *peer_ip, int peer_lnc, asr_comm_t **recv_comm) {
  return asr__comm_queue(lnc, peer_ip, peer_lnc, ASR_RECV_COMM, -1, recv_comm);
}

/* The record of comm handle h for the call fn: NULL (logged, unless h is
 * NULL, which the callers answer as they always did) when h is not live. */
static struct asr_comm *comm_arg(const char *fn, const asr_comm_t *h) {
  struct asr_comm *c = asr__comm_of(h);
  if (!c && h) asr__comm_bad(fn, h);
  return c;
}

int asr_comm_status(const asr_comm_t *h, int *status) {
  struct asr_comm *comm = comm_arg("asr_comm_status", h);
  if (!comm || !status) return ASR_INVALID;
  *status = atomic_load(&comm->status);
  return ASR_SUCCESS;
}

const char *asr_comm_provider(const asr_comm_t *h) {
  struct asr_comm *comm = comm_arg("asr_comm_provider", h);
  if (!comm) return NULL;
  /* the acquire pairs with the service thread's release in connect.c
   * (use_endpoint): the endpoint, its provider name included, was whole
   * before the comm was given it */
  if (atomic_load_explicit(&comm->sm, memory_order_acquire)) return ASR_SM_PROVIDER;
  const asr__ofi_t *o = atomic_load_explicit(&comm->ofi, memory_order_acquire);
  return o ? o->provider : NULL;
}

const char *asr_comm_error(const asr_comm_t *h) {
  struct asr_comm *comm = comm_arg("asr_comm_error", h);
  /* c->err is written before the status turns CONNECTION_ERROR (a
   * sequentially consistent store: connect.c fail, peer_watch.c, drain.c,
   * rank_fail.c) and never after. why, the launcher's line on the peer
   * rank's death, may come later (rank_fail.c): a caller that got err
   * keeps a string that lives as long as the comm, as why does. */
  if (!comm || atomic_load(&comm->status) != ASR_COMM_CONNECTION_ERROR) return NULL;
  const char *why = atomic_load_explicit(&comm->why, memory_order_acquire);
  return why ? why : comm->err;
}

int asr_comm_wait_connected(asr_comm_t *h, int timeout_ms) {
  struct asr_comm *comm = comm_arg("asr_comm_wait_connected", h);
  if (!comm) return ASR_INVALID;
  asr_ctx_t *ctx = comm->ctx;
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  if (timeout_ms >= 0) {
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
  }
  /* An accept completes only while someone reads the CQ; the service
   * thread does, we only sleep until it says (asr__comm_set_status). */
  int rc = ASR_SUCCESS;
  pthread_mutex_lock(&ctx->wait.mutex);
  atomic_fetch_add(&comm->waiters, 1);
  for (;;) {
    int st = atomic_load(&comm->status);
    if (st == ASR_COMM_CONNECTED) break;
    if (st == ASR_COMM_CONNECTION_ERROR) {
      rc = ASR_CONN_ERROR;
      break;
    }
    /* closed meanwhile: the closer waits for us to leave before it frees
     * the comm (asr__comm_release_waiters) */
    if (atomic_load(&comm->close_requested)) {
      asr_error("svc", "asr_comm_wait_connected: comm %p was closed while waiting to connect", (void *)h);
      rc = ASR_CONN_ERROR;
      break;
    }
    int w = timeout_ms >= 0 ? pthread_cond_timedwait(&ctx->wait.cv, &ctx->wait.mutex, &until)
                            : pthread_cond_wait(&ctx->wait.cv, &ctx->wait.mutex);
    if (w == ETIMEDOUT) {
      st = atomic_load(&comm->status);
      rc = st == ASR_COMM_CONNECTED          ? ASR_SUCCESS
           : st == ASR_COMM_CONNECTION_ERROR ? ASR_CONN_ERROR
                                             : ASR_TIMEOUT;
      break;
    }
  }
  if (atomic_fetch_sub(&comm->waiters, 1) == 1 && atomic_load(&comm->close_requested))
    pthread_cond_broadcast(&ctx->wait.cv); /* the closer waits for the last of us */
  pthread_mutex_unlock(&ctx->wait.mutex);
  return rc;
}

void asr__comm_release_waiters(struct asr_comm *c) {
  asr_ctx_t *ctx = c->ctx;
  pthread_mutex_lock(&ctx->wait.mutex);
  while (atomic_load(&c->waiters) > 0) {
    pthread_cond_broadcast(&ctx->wait.cv);
    pthread_cond_wait(&ctx->wait.cv, &ctx->wait.mutex);
  }
  pthread_mutex_unlock(&ctx->wait.mutex);
}

/* --- MR cache (seed: mhandle_cache keyed by (va, comm), never evicted) -----
 * Lookups: asr__mr_lookup (rt.h), under ep_lock. Inserts and removals
 * serialise on the context's mr.mutex. Beyond the seed, whose cache lives
 * until comm close, asr_forget evicts (asr__mr_forget). */

/* The service thread's lookup before a stashed request is posted, and its
 * lazy registration on a miss (outside every lock but the insert's: fi_mr_reg
 * may be slow). Returns 0 with *mr, or an ASR_E* code. */
int asr__mr_get_or_register(struct asr_comm *c, struct asr_tensor *t, struct fid_mr **mr) {
  asr__ofi_t *o = asr__comm_ofi(c);
  asr__ofi_lock(o);
  int hit = asr__mr_lookup(c, t->va, t->size, mr);
  asr__ofi_unlock(o);
  if (hit) return 0;
  asr_mr_entry_t *e = malloc(sizeof *e);
  if (!e) return ASR_ENOMEM;
  struct fid_mr *m = NULL;
  uint64_t t0 = ASR_OBS_TRACING() ? asr_time_ns() : 0;
  int rc = asr__ofi_mr_reg(o, t->va, t->size, &m);
  if (ASR_OBS_TRACING()) asr__obs_mr(c->lnc, rc ? 0 : t->size, t0);
  if (rc) {
    free(e);
    return rc;
  }
  asr_ctx_t *ctx = c->ctx;
  pthread_mutex_lock(&ctx->mr.mutex);
  *e = (asr_mr_entry_t){(uintptr_t)t->va, t->size, m, atomic_load_explicit(&c->mrs, memory_order_relaxed)};
  atomic_store_explicit(&c->mrs, e, memory_order_release);
  if (!c->mr_listed) {
    c->mr_next = ctx->mr.comms;
    ctx->mr.comms = c;
    c->mr_listed = 1;
  }
  pthread_mutex_unlock(&ctx->mr.mutex);
  *mr = m;
  return 0;
}

void asr__mr_forget(asr_ctx_t *ctx, uintptr_t va, size_t len) {
  asr_mr_entry_t *gone = NULL;
  pthread_mutex_lock(&ctx->mr.mutex);
  for (struct asr_comm *c = ctx->mr.comms; c; c = c->mr_next) {
    /* unlinked under ep_lock: a lookup, which holds it, never walks onto
     * an entry freed below */
    asr__ofi_t *o = asr__comm_ofi(c); /* a comm with registrations has its endpoint */
    asr__ofi_lock(o);
    asr_mr_entry_t *keep = NULL, **tail = &keep, *n;
    for (asr_mr_entry_t *e = atomic_load_explicit(&c->mrs, memory_order_relaxed); e; e = n) {
      n = e->next;
      if (e->va >= va && e->len <= len && e->va - va <= len - e->len) { /* within [va, va + len) */
        e->next = gone;
        gone = e;
      } else {
        *tail = e;
        tail = &e->next;
      }
    }
    *tail = NULL;
    atomic_store_explicit(&c->mrs, keep, memory_order_release);
    asr__ofi_unlock(o);
  }
  pthread_mutex_unlock(&ctx->mr.mutex);
  /* (deregistration outside the locks: nothing can reach these any more) */
  for (asr_mr_entry_t *n; gone; gone = n) {
    n = gone->next;
    asr__ofi_mr_dereg(gone->mr);
    free(gone);
  }
}
