/*
 * connect.c -- the eight-state connect machine (seed §3,
 * async_sr_progress_connect_comm @0xee7e0). One call = at most one step.
 *
 *   SEND  0 START_INIT -> 2 WAIT_FOR_NET_HANDLE_GET -> 4 NET_CONNECT -> 6 CONNECTED
 *   RECV  0 START_INIT -> 1 WAIT_FOR_HOSTNAME -> 5 LISTEN -> 3 WAIT_FOR_NET_HANDLE_SET
 *           -> 4 NET_CONNECT -> 6 CONNECTED
 *   any error -> 7 CONNECTION_ERROR
 *
 * Beyond the seed: several comms between the same two LNCs in the same
 * direction share one rendezvous key, so a SEND comm could read the handle of
 * an earlier RECV comm that is still in the store. Each comm therefore has an
 * ordinal (its rank among comms to the same peer in its direction, assigned in
 * creation order); the RECV side writes it into its handle and the SEND side
 * accepts only the handle carrying its own ordinal, asking again otherwise.
 * Same-peer comms are also connected one after the other (peer queues, FIFO).
 *
 * Also beyond the seed: a peer IP's "hostname" is asked of its KV server once
 * per context. The first RECV comm that needs it asks; others that need it
 * meanwhile wait in START_INIT, woken when the answer comes or the asker
 * fails or is closed (a 20 ms timer only backs that up), and then
 * take the answer from the context (ctx->conn.hosts), still passing through
 * WAIT_FOR_HOSTNAME. A host's name does not change while the job runs, and
 * in a full mesh every RECV comm to a host would otherwise ask the same
 * question in the same tick, a large share of all the KV traffic of the
 * rendezvous. If the asking comm fails or is closed, the next
 * comm that needs the name asks. Nobody asks this host's own KV server
 * (the seed's 127.0.0.1, or ASR_KV_BIND): the "hostname" there is the name
 * each process of the host seeds and builds its own SEND keys with, so a
 * peer there has this context's name -- the rendezvous keys could not
 * match otherwise. The GET would only wait behind that server's backlog,
 * with every RECV comm of the context behind it.
 *
 * Beyond the seed, for scale (doc/design.md, "The KV store"): a comm's KV
 * requests are not connections of their own (the seed's
 * kv_store_make_progress opens one per request) but requests on the
 * service thread's pool (ctx->kv.pool, kv_conn.h), one pipelined connection per
 * KV server. The seed's states and their order are unchanged; what changes
 * is what a wait costs:
 *  - every frame started in one tick, by all of the LNC's comms, goes out
 *    in one send() when the tick ends, and their answers come back many to
 *    a recv(), in whatever order the server answers them (a held GET when
 *    its SET arrives, the others at once); a comm waits only for its own
 *    answer (on_kv_done), never behind another's;
 *  - a RECV comm passes WAIT_FOR_NET_HANDLE_SET without waiting for its
 *    SET's answer (the one round trip a comm waited on that no one else
 *    needs: the sender's GET is held by the server until the SET lands, and
 *    the SET goes ahead of anything later on the same connection); the
 *    answer is collected in NET_CONNECT, and a failed SET still fails the
 *    comm there, as the seed's WAIT_FOR_NET_HANDLE_SET would;
 *  - a connection lost mid-rendezvous (a server restart, the elected
 *    server's process exiting) is opened again and its pending requests go
 *    out again, each under its own deadline, so a comm never sees the break
 *    unless the deadline passes;
 *  - NET_CONNECT's provider waits poll, yielding the CPU between ticks,
 *    while connects are moving, and sleep on backoff timers only once
 *    nothing has moved for a while (CONNECT_YIELD_MS, below).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_assert.h"
#include "asr_env.h"
#include "asr_err.h"
#include "asr_le.h"
#include "asr_log.h"
#include "asr_time.h"
#include "handle_inc.h"
#include "job.h"
#include "kv_frame.h"
#include "rt.h"

/* The SEND callback: copy the 128-byte net handle (seed _M_invoke @0xee6b0). */
static void send_cb(void *arg, const uint8_t *val, size_t len) {
  struct asr_comm *c = arg;
  c->handle_len = (int)len;
  if (len == ASR_KV_NET_HANDLE_LEN) memcpy(c->net_handle, val, len);
}

/* The RECV callback: copy the peer's host name (seed _M_invoke @0xee620). */
static void recv_cb(void *arg, const uint8_t *val, size_t len) {
  struct asr_comm *c = arg;
  c->hostname_len = (int)len;
  if (len == ASR_KV_HOSTNAME_LEN) memcpy(c->peer_hostname, val, len);
}

static int fail(struct asr_comm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct asr_comm *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
  asr_error("svc", "lnc %d %s comm to %s/lnc %d: %s", c->lnc, c->type == ASR_SEND_COMM ? "SEND" : "RECV",
            c->peer_ip, c->peer_lnc, c->err);
  if (c->kv_req) {
    asr_kv_call_free(c->kv_req);
    c->kv_req = NULL;
  }
  asr__peer_host_forget(c->ctx, c);
  asr__comm_set_status(c, ASR_COMM_CONNECTION_ERROR);
  return 1;
}

/* The context's pool (kv_conn.h) calls this when a comm's request ends,
 * on the service thread: the comm steps in the next tick (seed §4: *done is
 * what the connect machine waits on in each WAIT_FOR_* state;
 * connect_sched.c). */
static void on_kv_done(void *arg, asr_kv_call_t *call) {
  struct asr_comm *c = arg;
  if (ASR_OBS_ON()) {
    int rc = 0;
    (void)asr_kv_call_done(call, &rc);
    asr__obs_kv_end(c, rc == 0);
  }
  asr__sched_put(c->ctx, c, ASR_SCHED_READY);
}

/* Looks at the comm's KV request. Returns 1 done, 0 not yet, or the
 * request's negative ASR_E* code when it failed (the comm failed with it). */
static int pump_kv(struct asr_comm *c, int *made) {
  int rc = 0;
  if (!asr_kv_call_done(c->kv_req, &rc)) return 0;
  *made = 1;
  if (rc) {
    fail(c, "rendezvous failed: %s", asr_kv_call_error(c->kv_req));
    return rc;
  }
  asr_kv_call_free(c->kv_req);
  c->kv_req = NULL;
  return 1;
}

static uint32_t handle_ordinal(const uint8_t *h) { return asr_le_get32(h + ASR_OFI_HANDLE_ORDINAL_OFF); }

/* A comm waiting for a "hostname" another comm asks looks again after this
 * long even if nothing woke it (wake_host_waiters is what moves it). */
#define HOST_WAIT_BACKUP_MS 20

/* A connect that has met a full queue this long says so (once). */
#define CONNECT_WARN_MS 5000

/* The provider waits of NET_CONNECT (beyond the seed, whose machine is
 * stepped in a busy loop). A SEND comm meets ASR_EAGAIN while the peer has
 * not answered the provider's connection set-up, and a RECV comm waits for
 * its sender's connect message; only CQ reads move either, on both sides
 * (shm's set-up is a message the peer's own CQ read takes in). While
 * comms of this context enter or leave NET_CONNECT, and for
 * CONNECT_YIELD_MS after the last one did, those waits poll: every tick
 * retries and reads, and a tick that moved nothing yields the CPU
 * (context.c: svc_tick) instead of sleeping. A set-up in flight is
 * answered within microseconds of the peer's next read, and a thread that
 * sleeps between reads holds back every peer waiting on it, one sleep per
 * step of the set-up. After the window, with nothing moving, a wait that
 * lasts (a sender that comes late, or never) sleeps again: 1, 2, 4, then
 * every 8 ms, so that dozens of LNCs per CPU waiting on absent peers do not
 * keep every service thread busy (test_runtime connect_wait_polls_then_sleeps). */
#define CONNECT_YIELD_MS 20

static void connect_moved(asr_ctx_t *ctx) { ctx->conn.yield_until_ms = asr_time_ms() + CONNECT_YIELD_MS; }

/* A SEND comm's ASR_EAGAIN in NET_CONNECT: retry at the next tick while
 * polling, else after the next backoff step (above). (A RECV comm's
 * NET_CONNECT waits on the context's one CQ read for all of them,
 * connect_sched.c: asr__sched_accepts.) Returns 0 (no progress). */
static int wait_a_little(struct asr_comm *c) {
  uint64_t now = asr_time_ms();
  if (asr__connect_yielding(c->ctx, now)) {
    c->retry_at_ms = now;
    return 0;
  }
  c->wait_ms = c->wait_ms ? (c->wait_ms >= 8 ? 8 : c->wait_ms * 2) : 1;
  c->retry_at_ms = now + c->wait_ms;
  return 0;
}

void asr__connect_accept_soon(asr_ctx_t *ctx) {
  ctx->sched.accept_wait_ms = 1;
  uint64_t at = asr_time_ms() + 1;
  if (ctx->sched.accept_at_ms > at) ctx->sched.accept_at_ms = at;
}

static const char *path_name(int path) { return path == ASR_PATH_NET ? "network" : "local"; }

/* Gives c the endpoint of path, opening it for the first comm that needs
 * it. Returns 1 when c failed (no endpoint: the message says why and what
 * to set). */
static int use_endpoint(asr_ctx_t *ctx, struct asr_comm *c, int path) {
  char err[768];
  int ep;
  if (asr__ctx_endpoint(ctx, path, &ep, err, sizeof err) != 0) return fail(c, "%s", err);
  c->ep = ep;
  c->path = path;
  atomic_store_explicit(&c->ofi, &ctx->fab.eps[ep], memory_order_release);
  return 0;
}

/* The SEND side follows the path its receiver chose and wrote into the
 * handle (asr__same_host: one decision for both ends). Its own endpoint
 * for that path must run the receiver's provider: otherwise the two were
 * configured apart (ASR_PROVIDER on some ranks only), and the comm fails
 * saying so rather than insert an address its provider cannot read.
 * Returns 1 when c failed. */
static int take_path_send(asr_ctx_t *ctx, struct asr_comm *c) {
  int path;
  uint32_t tag;
  if (asr__ofi_handle_path(c->net_handle, &path, &tag) != 0)
    return fail(c, "the peer's net handle names no path (a peer of another libasr version?)");
  if (path == ASR_PATH_SM) {
    if (ctx->fab.one_ep || tag != asr__ofi_prov_tag(ASR_SM_PROVIDER))
      return fail(
          c,
          "the peer listens for this comm on asr's own same-host path (sm), but this LNC uses %s: set "
          "ASR_PROVIDER alike on every rank of the job, or on none",
          ctx->fab.paths_desc);
    c->path = ASR_PATH_SM;
    return 0;
  }
  const char *mine = ctx->fab.ep_prov[asr__ctx_ep_index(ctx, path)];
  if (tag != asr__ofi_prov_tag(mine))
    return fail(c,
                "the peer listens for this comm on another provider than %s, which this LNC uses for its %s "
                "path (%s): set ASR_PROVIDER alike on every rank of the job, or on none",
                mine, path_name(path), ctx->fab.paths_desc);
  return use_endpoint(ctx, c, path);
}

/* What a failed connect on c's path may want set. */
static const char *path_hint(const asr_ctx_t *ctx, const struct asr_comm *c) {
  if (ctx->fab.one_ep) return "";
  return c->path == ASR_PATH_LOCAL ? " (this peer has this host's identity, so it is reached over shm: if "
                                     "it is on another machine, give each host its own ASR_HOSTNAME; if shm "
                                     "is refused here, set ASR_PROVIDER=tcp;ofi_rxm)"
                                   : "";
}

/* The one line per comm that names its path (ASR_LOG_LEVEL=info). */
static void say_path(const asr_ctx_t *ctx, const struct asr_comm *c) {
  asr_info("svc", "lnc %d %s comm %s %s/lnc %d: provider %s (%s path%s)", c->lnc,
           c->type == ASR_SEND_COMM ? "SEND" : "RECV", c->type == ASR_SEND_COMM ? "to" : "from", c->peer_ip,
           c->peer_lnc, c->sm ? ASR_SM_PROVIDER : c->ofi->provider, path_name(c->path),
           ctx->fab.one_ep           ? ", one provider forced by ASR_PROVIDER/FI_PROVIDER"
           : c->path != ASR_PATH_NET ? ": same host identity"
                                     : ": another host");
}

/* SEND, NET_CONNECT on the sm path: maps the receiver's region (no
 * provider set-up to wait for). Returns 1 (a step made; c failed or is
 * CONNECTED). */
static int connect_sm(asr_ctx_t *ctx, struct asr_comm *c) {
  char err[512];
  uint8_t peer_who[ASR_OFI_WHO_LEN];
  asr__sm_t *s = NULL;
  if (asr__sm_connect(&s, &ctx->fab.sm, c->net_handle, ctx->who, peer_who, err, sizeof err) != 0)
    return fail(c, "sm connect failed: %s", err);
  memcpy(c->osend.peer_who, peer_who,
         ASR_OFI_WHO_LEN); /* whose memory a descriptor may name (rma/rma_api.c) */
  atomic_store_explicit(&c->sm, s, memory_order_release);
  if (asr__watch_comm(ctx, c, peer_who)) return fail(c, "the peer process exited while connecting");
  say_path(ctx, c);
  asr__connect_done(ctx, c);
  connect_moved(ctx);
  return 1;
}

static int start_handle_get(asr_ctx_t *ctx, struct asr_comm *c) {
  uint8_t key[ASR_KV_HANDLE_KEY_LEN];
  if (asr_kv_handle_key(key, (uint32_t)c->lnc, (uint32_t)c->peer_lnc, ctx->hostname) < 0)
    return fail(c, "cannot build the handle key (host name '%s')", ctx->hostname);
  c->handle_len = 0;
  if (ASR_OBS_ON()) asr__obs_kv_begin(c, ASR_KV_OP_GET, key, sizeof key);
  int rc = asr_kv_pool_get(ctx->kv.pool, c->peer_ip, ctx->kv.port, key, sizeof key, ASR_KV_VTYPE_BINARY, 1,
                           send_cb, c, on_kv_done, c, &c->kv_req);
  if (rc) return fail(c, "cannot start the handle GET: %s", asr_strerror(rc));
  return 0;
}

static int send_step(asr_ctx_t *ctx, struct asr_comm *c) {
  int made = 0;
  switch (atomic_load(&c->status)) {
    case ASR_COMM_START_INIT:
      if (start_handle_get(ctx, c)) return 1;
      asr__comm_set_status(c, ASR_COMM_WAIT_FOR_NET_HANDLE_GET);
      return 1;
    case ASR_COMM_WAIT_FOR_NET_HANDLE_GET: {
      if (!c->kv_req) { /* waiting to ask again for a newer handle */
        if (asr_time_ms() < c->retry_at_ms) return 0;
        return start_handle_get(ctx, c) || 1;
      }
      int r = pump_kv(c, &made);
      if (r <= 0) return made || r < 0;
      if (c->handle_len != ASR_KV_NET_HANDLE_LEN)
        return fail(c, "the peer's net handle is %d bytes, expected %d", c->handle_len,
                    ASR_KV_NET_HANDLE_LEN);
      if (handle_ordinal(c->net_handle) != c->ordinal ||
          !asr__handle_inc_takes(c->net_handle, asr__job_active(), (uint32_t)asr__job_incarnation(),
                                 c->peer_inc)) {
        /* An earlier comm's handle, or one of (or for) another incarnation
         * of the ranks: ask again shortly. */
        c->retry_at_ms = asr_time_ms() + 1;
        return 1;
      }
      asr__comm_set_status(c, ASR_COMM_NET_CONNECT);
      connect_moved(ctx);
      return 1;
    }
    case ASR_COMM_NET_CONNECT: {
      /* The first send to a peer can meet ASR_EAGAIN for as long as the peer
       * has not answered the provider's connection setup (it answers only when
       * it makes progress, which a loaded host can delay for seconds). Retry on
       * later ticks, never blocking this thread, until the rendezvous deadline
       * (ASR_KV_TIMEOUT_MS, as for the KV requests). */
      if (!c->connect_deadline_ms) {
        long ms; /* the KV requests' own deadline (asr_env.h); a bad value fails the comm */
        char err[256];
        if (asr_env_int(ASR_ENV_KV_TIMEOUT_MS, &ms, err, sizeof err) != 0) return fail(c, "%s", err);
        c->connect_timeout_ms = (uint64_t)ms;
        c->connect_deadline_ms = asr_time_ms() + c->connect_timeout_ms;
        c->connect_warn_ms = asr_time_ms() + CONNECT_WARN_MS;
      }
      if (!c->ofi && !c->path && take_path_send(ctx, c)) return 1;
      if (c->path == ASR_PATH_SM) return connect_sm(ctx, c);
      int rc = asr__ofi_connect(c->ofi, c->net_handle, &c->osend);
      if (rc == ASR_EAGAIN) {
        uint64_t now = asr_time_ms();
        if (now >= c->connect_warn_ms && now < c->connect_deadline_ms) {
          /* Say why a connect can wait this long: with shm, the commonest
           * cause is a peer that was sent more messages than it can hold
           * before posting their receives (test_runtime
           * unexpected_messages_fill_provider shows the queue that fills). */
          int shm = strcmp(c->ofi->provider, "shm") == 0;
          asr_warn("svc",
                   "lnc %d SEND comm to %s/lnc %d: the peer's queue has been full for %d s; still trying "
                   "(for %llu s in all). %s",
                   c->lnc, c->peer_ip, c->peer_lnc, CONNECT_WARN_MS / 1000,
                   (unsigned long long)c->connect_timeout_ms / 1000,
                   shm ? "With shm, an LNC holds at most 1024 messages that arrived before their receives "
                         "were posted, and after that every message to it waits, the connection setup too: "
                         "the peer must post receives for what it was already sent."
                       : "The peer's provider answers the connection setup only while the peer makes "
                         "progress: a loaded host, or a peer short of memory or receive buffers, delays it.");
          c->connect_warn_ms = UINT64_MAX;
        }
        if (now < c->connect_deadline_ms) return wait_a_little(c);
        return fail(c,
                    "libfabric connect failed: the peer did not answer the connection setup within %llu ms%s",
                    (unsigned long long)c->connect_timeout_ms, path_hint(ctx, c));
      }
      if (rc == ASR_ENOSPACE)
        return fail(c,
                    "libfabric connect failed: this LNC's address vector is full (libfabric's shm holds %d "
                    "peer addresses per LNC from asr_init to asr_close); use ASR_PROVIDER=\"tcp;ofi_rxm\" "
                    "for more peers per LNC",
                    ASR_OFI_SHM_MAX_PEERS);
      if (rc == ASR_EPROTO)
        return fail(c,
                    "libfabric connect failed: the peer's handle in the KV store is not one asr wrote (its "
                    "magic, address length or comm id is out of range); check that nothing else writes "
                    "this job's keys");
      if (rc) return fail(c, "libfabric connect failed: %s%s", asr_strerror(rc), path_hint(ctx, c));
      if (asr__watch_comm(ctx, c, c->osend.peer_who))
        return fail(c, "the peer process exited while connecting");
      say_path(ctx, c);
      asr__connect_done(ctx, c);
      connect_moved(ctx);
      return 1;
    }
    default:
      /* States 1, 3, 5 are RECV-only (seed asserts at 0xBB), and a comm that
       * reached 6 or 7 left its peer queue in the tick it got there
       * (context.c: connect_comms), so it is never stepped again. A release
       * build fails the comm, loudly, rather than stop the process. */
      assert(0 && "a SEND comm stepped in a state it cannot be in");
      return fail(c, "SEND comm in impossible state %d", atomic_load(&c->status));
  }
}

/* Starts the SET of c's handle on this host's KV server. */
static int start_handle_set(asr_ctx_t *ctx, struct asr_comm *c) {
  uint8_t key[ASR_KV_HANDLE_KEY_LEN];
  if (asr_kv_handle_key(key, (uint32_t)c->peer_lnc, (uint32_t)c->lnc, (const char *)c->peer_hostname) < 0)
    return ASR_EINVAL;
  c->kv_epoch = asr__kv_host_epoch();
  if (ASR_OBS_ON()) asr__obs_kv_begin(c, ASR_KV_OP_SET, key, sizeof key);
  return asr_kv_pool_set(ctx->kv.pool, asr__kv_host_ip(), ctx->kv.port, key, sizeof key, c->net_handle,
                         ASR_KV_NET_HANDLE_LEN, ASR_KV_VTYPE_BINARY, on_kv_done, c, &c->kv_req);
}

/* Beyond the seed: a RECV comm waiting for its sender publishes its handle
 * again when the host's KV server changed since it did (kv_host.c: a new
 * leader took over, and the old one's keys may be gone with it), so that a
 * sender that comes later still finds it. A failure of such a republish is
 * not the comm's: a sender that has the handle can still connect. It also
 * collects the answer to the handle's first SET, which the comm did not
 * wait for (WAIT_FOR_NET_HANDLE_SET, below): that one's failure fails the
 * comm, as in the seed. Returns 1 when the comm failed. */
static int republish_step(asr_ctx_t *ctx, struct asr_comm *c, int *made) {
  if (c->kv_req) {
    int rc = 0;
    if (!asr_kv_call_done(c->kv_req, &rc)) return 0;
    *made = 1;
    if (rc && c->kv_first_publish) /* the seed's WAIT_FOR_NET_HANDLE_SET would have failed the comm */
      return fail(c, "rendezvous failed: %s", asr_kv_call_error(c->kv_req));
    if (rc)
      asr_warn("svc", "lnc %d RECV comm from %s/lnc %d: cannot publish its handle on the new KV server: %s",
               c->lnc, c->peer_ip, c->peer_lnc, asr_kv_call_error(c->kv_req));
    asr_kv_call_free(c->kv_req);
    c->kv_req = NULL;
    c->kv_first_publish = 0;
    return 0;
  }
  if (c->kv_epoch == asr__kv_host_epoch()) return 0;
  asr_debug("svc", "lnc %d RECV comm from %s/lnc %d: the KV server changed; publishing its handle again",
            c->lnc, c->peer_ip, c->peer_lnc);
  int rc = start_handle_set(ctx, c);
  if (rc)
    asr_warn("svc", "lnc %d RECV comm from %s/lnc %d: cannot publish its handle again: %s", c->lnc,
             c->peer_ip, c->peer_lnc, asr_strerror(rc));
  *made = 1;
  return 0;
}

/* The RECV queue heads waiting in START_INIT for ip's "hostname", which
 * another comm asks: they step in the next tick (onto READY), not when
 * their backup timer fires. */
static void wake_host_waiters(asr_ctx_t *ctx, const char *ip) {
  for (asr_peerq_t *q = ctx->conn.active[ASR_RECV_COMM]; q; q = q->anext)
    if (q->head && atomic_load(&q->head->status) == ASR_COMM_START_INIT && strcmp(q->head->peer_ip, ip) == 0)
      asr__sched_put(ctx, q->head, ASR_SCHED_READY);
}

static asr_peer_host_t *peer_host_find(asr_ctx_t *ctx, const char *ip) {
  for (int i = 0; i < ctx->conn.nhosts; i++)
    if (strcmp(ctx->conn.hosts[i].ip, ip) == 0) return &ctx->conn.hosts[i];
  return NULL;
}

/* ip's entry, made when missing; NULL without memory (then every comm asks).
 * A new entry for this host's own KV server's address is known at once: its
 * "hostname" is the name this process seeded there (kv_host.c) and sends
 * its own keys under, which is ctx->hostname. */
static asr_peer_host_t *peer_host_get(asr_ctx_t *ctx, const char *ip) {
  asr_peer_host_t *h = peer_host_find(ctx, ip);
  if (h) return h;
  if (ctx->conn.nhosts == ctx->conn.caphosts) {
    int cap = ctx->conn.caphosts ? ctx->conn.caphosts * 2 : 8;
    h = realloc(ctx->conn.hosts, (size_t)cap * sizeof *h);
    if (!h) return NULL;
    ctx->conn.hosts = h;
    ctx->conn.caphosts = cap;
  }
  h = &ctx->conn.hosts[ctx->conn.nhosts++];
  memset(h, 0, sizeof *h);
  snprintf(h->ip, sizeof h->ip, "%s", ip);
  if (strcmp(ip, asr__kv_host_ip()) == 0) {
    memcpy(h->name, ctx->hostname, sizeof h->name);
    h->known = 1;
  }
  return h;
}

void asr__peer_host_forget(asr_ctx_t *ctx, struct asr_comm *c) {
  for (int i = 0; i < ctx->conn.nhosts; i++)
    if (ctx->conn.hosts[i].owner == c) {
      ctx->conn.hosts[i].owner = NULL;
      wake_host_waiters(ctx, ctx->conn.hosts[i].ip); /* the next one asks */
    }
}

/* RECV, NET_CONNECT: the sender came (its connect message, or its attach
 * to the sm region), who it is in who. Returns 1 (c failed or is
 * CONNECTED). */
static int accepted(asr_ctx_t *ctx, struct asr_comm *c, const uint8_t who[ASR_OFI_WHO_LEN]) {
  if (asr__watch_comm(ctx, c, who)) return fail(c, "the peer process exited while connecting");
  if (c->kv_req) { /* a SET in flight: the handle is not needed any more (its answer is dropped) */
    asr_kv_call_free(c->kv_req);
    c->kv_req = NULL;
    c->kv_first_publish = 0;
  }
  say_path(ctx, c);
  asr__connect_done(ctx, c);
  connect_moved(ctx);
  return 1;
}

static int recv_step(asr_ctx_t *ctx, struct asr_comm *c) {
  int made = 0;
  switch (atomic_load(&c->status)) {
    case ASR_COMM_START_INIT: {
      asr_peer_host_t *h = peer_host_get(ctx, c->peer_ip);
      if (h && h->known) {
        memcpy(c->peer_hostname, h->name, ASR_KV_HOSTNAME_LEN);
        c->hostname_len = ASR_KV_HOSTNAME_LEN;
        /* WAIT_FOR_HOSTNAME has nothing to wait for: the next tick steps
         * it (asr__sched_after_step: READY), not the backup timer of a wait
         * for the asker, which would otherwise still hold it back. */
        c->retry_at_ms = 0;
        asr__comm_set_status(c, ASR_COMM_WAIT_FOR_HOSTNAME);
        return 1;
      }
      if (h && h->owner && h->owner != c) {
        /* Another comm is asking: the answer (or the asker's failure or
         * close) wakes this one (wake_host_waiters); the timer only backs
         * that up. */
        c->retry_at_ms = asr_time_ms() + HOST_WAIT_BACKUP_MS;
        return 0;
      }
      if (h) h->owner = c;
      c->hostname_len = 0;
      if (ASR_OBS_ON()) asr__obs_kv_begin(c, ASR_KV_OP_GET, ASR_KV_HOSTNAME_KEY, ASR_KV_HOSTNAME_KEY_LEN);
      int rc = asr_kv_pool_get(ctx->kv.pool, c->peer_ip, ctx->kv.port, ASR_KV_HOSTNAME_KEY,
                               ASR_KV_HOSTNAME_KEY_LEN, ASR_KV_VTYPE_TEXT, 1, recv_cb, c, on_kv_done, c,
                               &c->kv_req);
      if (rc) return fail(c, "cannot start the hostname GET: %s", asr_strerror(rc));
      asr__comm_set_status(c, ASR_COMM_WAIT_FOR_HOSTNAME);
      return 1;
    }
    case ASR_COMM_WAIT_FOR_HOSTNAME: {
      if (c->kv_req) { /* else the name was known (START_INIT) */
        int r = pump_kv(c, &made);
        if (r <= 0) return made || r < 0;
      }
      if (c->hostname_len != ASR_KV_HOSTNAME_LEN)
        return fail(c, "\"hostname\" on %s is %d bytes, expected %d", c->peer_ip, c->hostname_len,
                    ASR_KV_HOSTNAME_LEN);
      c->peer_hostname[ASR_KV_HOSTNAME_LEN - 1] = '\0';
      asr_peer_host_t *h = peer_host_get(ctx, c->peer_ip);
      if (h && !h->known) {
        memcpy(h->name, c->peer_hostname, ASR_KV_HOSTNAME_LEN);
        h->known = 1;
        h->owner = NULL;
        wake_host_waiters(ctx, c->peer_ip);
      }
      asr__comm_set_status(c, ASR_COMM_LISTEN);
      return 1;
    }
    case ASR_COMM_LISTEN: {
      /* The path is chosen here, by the receiver alone (asr__same_host):
       * asr's own path to a peer of this host, unless one provider is forced. */
      int same = asr__same_host(ctx, c->peer_hostname);
      int path = same && !ctx->fab.one_ep ? ASR_PATH_SM : same ? ASR_PATH_LOCAL : ASR_PATH_NET;
      if (path == ASR_PATH_SM) {
        char err[512];
        asr__sm_t *s = NULL;
        if (asr__sm_listen(&s, &ctx->fab.sm, ctx->lnc, ctx->who, c->net_handle, err, sizeof err) != 0)
          return fail(c, "sm listen failed: %s", err);
        c->path = ASR_PATH_SM;
        atomic_store_explicit(&c->sm, s, memory_order_release);
        c->net_handle[ASR_OFI_HANDLE_PATH_OFF] = ASR_PATH_SM;
        uint32_t tag = asr__ofi_prov_tag(ASR_SM_PROVIDER);
        for (int i = 0; i < 3; i++) c->net_handle[ASR_OFI_HANDLE_PROV_OFF + i] = (uint8_t)(tag >> (8 * i));
      } else {
        if (use_endpoint(ctx, c, path)) return 1;
        int rc = asr__ofi_listen(c->ofi, &c->orecv, c->net_handle, path);
        if (rc) return fail(c, "libfabric listen failed: %s", asr_strerror(rc));
      }
      asr_le_put32(c->net_handle + ASR_OFI_HANDLE_ORDINAL_OFF, c->ordinal);
      if (asr__job_active())
        asr__handle_inc_put(c->net_handle, (uint32_t)asr__job_incarnation(), c->peer_inc);
      int rc = start_handle_set(ctx, c);
      if (rc == ASR_EINVAL)
        return fail(c, "cannot build the handle key (peer host name '%s')", (const char *)c->peer_hostname);
      if (rc) return fail(c, "cannot start the handle SET: %s", asr_strerror(rc));
      asr__comm_set_status(c, ASR_COMM_WAIT_FOR_NET_HANDLE_SET);
      return 1;
    }
    case ASR_COMM_WAIT_FOR_NET_HANDLE_SET: {
      /* Beyond the seed: the SET is on its way down the pipelined
       * connection, ahead of anything this comm sends later, and nothing
       * this comm does next needs its answer -- the sender's GET is what
       * waits for the handle, held by the server until the SET lands. So
       * the comm goes on to NET_CONNECT at once and collects the answer
       * there (republish_step), failing as the seed would if the SET did. */
      asr__connect_accept_soon(ctx);
      connect_moved(ctx);
      if (c->kv_req && !asr_kv_call_done(c->kv_req, NULL)) {
        c->kv_first_publish = 1;
        asr__comm_set_status(c, ASR_COMM_NET_CONNECT);
        return 1;
      }
      int r = pump_kv(c, &made);
      if (r <= 0) return made || r < 0;
      asr__comm_set_status(c, ASR_COMM_NET_CONNECT);
      return 1;
    }
    case ASR_COMM_NET_CONNECT: {
      if (republish_step(ctx, c, &made)) return 1;
      if (c->path == ASR_PATH_SM) {
        /* the sender attaches to the region: polled, as a SEND comm's
         * provider wait is (wait_a_little), no CQ to read */
        uint8_t who[ASR_OFI_WHO_LEN];
        if (!asr__sm_accept(c->sm, ctx->lnc, who)) return wait_a_little(c) || made;
        return accepted(ctx, c, who);
      }
      int ready = 0;
      int rc = ctx->sched.accept_cq_rc[c->ep]; /* asr__sched_accepts read this endpoint's CQ for this tick */
      if (!rc) rc = asr__ofi_accept(&c->orecv, &ready);
      if (rc) return fail(c, "libfabric accept failed: %s", asr_strerror(rc));
      if (!ready) return made; /* asr__sched_accepts looks again after its next CQ read */
      return accepted(ctx, c, c->orecv.ctrl_buf + 4);
    }
    default:
      /* States 2, 6, 7 are not steps of a pending RECV comm (seed asserts at
       * 0x142): 2 is SEND-only, and 6 and 7 leave the peer queue at once. */
      assert(0 && "a RECV comm stepped in a state it cannot be in");
      return fail(c, "RECV comm in impossible state %d", atomic_load(&c->status));
  }
}

int asr__connect_step(asr_ctx_t *ctx, struct asr_comm *c) {
  return c->type == ASR_SEND_COMM ? send_step(ctx, c) : recv_step(ctx, c);
}
