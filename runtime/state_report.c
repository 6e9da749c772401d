/*
 * state_report.c -- libasr's tables for a state report (issue 24): every
 * comm of every LNC with its connect state and how long it has been in it,
 * the KV key it waits on and the server asked, its requests by state and
 * the oldest's age, and its counts of posts and completions. The report
 * thread (bootstrap/report_chan.c) calls tick and render; this file
 * registers them there, so bootstrap never calls up into the runtime.
 *
 * What the data path pays: one relaxed store of a counter per post and per
 * completion (request.c: posted, done; each written only under the
 * context's ep_lock, so a plain load and a relaxed store are exact). The
 * ages come from here: each tick (ASR_REPORT_TICK_MS) samples every comm's
 * post count and keeps, per comm, when each new count was first seen, so
 * the oldest outstanding request's age is known to within a tick without a
 * clock read on the data path. The comm's bytes and failed requests
 * (rep_bytes, rep_failed) are counted the same way, at the completion, and
 * serve asrrun --metrics-port as well (issue 52), whose METRICS answer adds
 * the histograms of obs/metrics.c.
 *
 * The registry (asr__rep_comms) holds every comm from its handover to its free;
 * rep_mutex guards it, the sampler's per-comm fields, and the unpublishing
 * of a context (asr_close), so a render never reads a context or comm being
 * freed. A comm's other fields it reads are written once before the
 * handover (type, lnc, peer, ordinal once picked up is read relaxed as a
 * hint) or are atomics.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "asr_time.h"
#include "kv_frame.h"
#include "kv_keys.h"
#include "report_chan.h"
#include "rt.h"

/* One comm's sample (asr__rep_mutex held). */
static void sample(struct asr_comm *c, uint64_t now) {
  uint64_t p = atomic_load_explicit(&c->rep_posted, memory_order_relaxed);
  uint64_t d = atomic_load_explicit(&c->rep_done, memory_order_relaxed);
  if (p != c->rep_seen) {
    c->rep_seen = p;
    c->rep_last_post_ms = now;
    if (c->rep_nhist == ASR_REP_HIST) { /* drop the oldest: ages are never overstated */
      memmove(c->rep_hist, c->rep_hist + 1, (ASR_REP_HIST - 1) * sizeof c->rep_hist[0]);
      c->rep_nhist--;
    }
    c->rep_hist[c->rep_nhist].count = p;
    c->rep_hist[c->rep_nhist].ms = now;
    c->rep_nhist++;
  }
  /* what was completed leaves the history, but for the last entry */
  int drop = 0;
  while (drop < c->rep_nhist - 1 && c->rep_hist[drop].count <= d) drop++;
  if (drop) {
    memmove(c->rep_hist, c->rep_hist + drop, (size_t)(c->rep_nhist - drop) * sizeof c->rep_hist[0]);
    c->rep_nhist -= drop;
  }
}

static void tick(void *arg) {
  (void)arg;
  uint64_t now = asr_time_ms();
  pthread_mutex_lock(&asr__rep_mutex);
  for (struct asr_comm *c = asr__rep_comms; c; c = c->rep_next) sample(c, now);
  pthread_mutex_unlock(&asr__rep_mutex);
}

/* The key c waits on (or, a RECV comm past publishing, the one it
 * published for its sender) and the server it asked: "" when none. */
static void wait_key(const struct asr_comm *c, int st, char *key, size_t keylen, char *server, size_t slen) {
  const asr_ctx_t *ctx = c->ctx;
  uint8_t k[ASR_KV_HANDLE_KEY_LEN];
  key[0] = server[0] = '\0';
  if (c->type == ASR_SEND_COMM && (st == ASR_COMM_START_INIT || st == ASR_COMM_WAIT_FOR_NET_HANDLE_GET)) {
    if (asr_kv_handle_key(k, (uint32_t)c->lnc, (uint32_t)c->peer_lnc, ctx->hostname) < 0) return;
    asr_kv_key_render(k, sizeof k, key, keylen);
    snprintf(server, slen, "%s:%u", c->peer_ip, ctx->kv.port);
  } else if (c->type == ASR_RECV_COMM && (st == ASR_COMM_START_INIT || st == ASR_COMM_WAIT_FOR_HOSTNAME)) {
    asr_kv_key_render((const uint8_t *)ASR_KV_HOSTNAME_KEY, ASR_KV_HOSTNAME_KEY_LEN, key, keylen);
    snprintf(server, slen, "%s:%u", c->peer_ip, ctx->kv.port);
  } else if (c->type == ASR_RECV_COMM && (st == ASR_COMM_LISTEN || st == ASR_COMM_WAIT_FOR_NET_HANDLE_SET ||
                                          st == ASR_COMM_NET_CONNECT)) {
    /* peer_hostname was written before the state moved past WAIT_FOR_HOSTNAME */
    char host[ASR_KV_HOSTNAME_LEN + 1];
    memcpy(host, c->peer_hostname, ASR_KV_HOSTNAME_LEN);
    host[ASR_KV_HOSTNAME_LEN] = '\0';
    if (asr_kv_handle_key(k, (uint32_t)c->peer_lnc, (uint32_t)c->lnc, host) < 0) return;
    asr_kv_key_render(k, sizeof k, key, keylen);
    snprintf(server, slen, "127.0.0.1:%u", ctx->kv.port);
  }
}

static void render_comm(struct asr_comm *c, uint64_t now, asr_buf_t *b) {
  int st = atomic_load(&c->status);
  int stashed = 0, posted_now = 0;
  asr_comm_pool_t *pool = asr__comm_pool_of(c);
  for (int i = 0; pool && i < ASR_RING; i++) {
    int s = atomic_load_explicit(&pool->reqs[i].status, memory_order_relaxed);
    stashed += s == ASR_REQ_STASHED;
    posted_now += s == ASR_REQ_OFI_POSTED;
  }
  uint64_t p = atomic_load_explicit(&c->rep_posted, memory_order_relaxed);
  uint64_t d = atomic_load_explicit(&c->rep_done, memory_order_relaxed);
  long long oldest = -1;
  if (p > d)
    for (int i = 0; i < c->rep_nhist; i++)
      if (c->rep_hist[i].count > d) {
        oldest = (long long)(now - c->rep_hist[i].ms);
        break;
      }
  char key[ASR_KV_KEY_TEXT_MAX], server[96];
  wait_key(c, st, key, sizeof key, server, sizeof server);
  uint64_t since = atomic_load_explicit(&c->state_since_ms, memory_order_relaxed);
  char line[1400];
  int n = snprintf(
      line, sizeof line,
      "comm\tlnc=%d\tdir=%s\tordinal=%u\tpeer_rank=%d\tpeer_ip=%s\tpeer_lnc=%d\tstate=%s\tstate_ms=%llu"
      "\tposted=%llu\tdone=%llu\tstashed=%d\tofi_posted=%d\toldest_ms=%lld\tlast_post_ms=%lld"
      "\tkey=%s\tserver=%s\tbytes=%llu\tfailed=%llu\n",
      c->lnc, c->type == ASR_SEND_COMM ? "SEND" : "RECV",
      atomic_load_explicit(&c->rep_ordinal, memory_order_relaxed),
      atomic_load_explicit(&c->peer_rank, memory_order_relaxed), c->peer_ip, c->peer_lnc,
      asr_comm_status_name(st), (unsigned long long)(now > since ? now - since : 0), (unsigned long long)p,
      (unsigned long long)d, stashed, posted_now, oldest,
      c->rep_seen ? (long long)(now - c->rep_last_post_ms) : -1LL, key, server,
      (unsigned long long)atomic_load_explicit(&c->rep_bytes, memory_order_relaxed),
      (unsigned long long)atomic_load_explicit(&c->rep_failed, memory_order_relaxed));
  if (n > 0) asr_buf_put(b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static void render(void *arg, asr_buf_t *b) {
  (void)arg;
  uint64_t now = asr_time_ms();
  pthread_mutex_lock(&asr__rep_mutex);
  char line[400];
  for (int lnc = 0; lnc < ASR_MAX_LNC; lnc++) {
    const asr_ctx_t *ctx = asr__ctx_get(lnc);
    if (!ctx) continue;
    int n = snprintf(line, sizeof line, "lnc\tlnc=%d\thost=%s\tprovider=%s\tport=%u\n", lnc, ctx->hostname,
                     ctx->fab.one_ep ? ctx->fab.ep_prov[0] : "sm+tcp;ofi_rxm", ctx->kv.port);
    asr_buf_put(b, line, (size_t)n);
  }
  for (struct asr_comm *c = asr__rep_comms; c; c = c->rep_next) render_comm(c, now, b);
  pthread_mutex_unlock(&asr__rep_mutex);
}

/* A METRICS answer's records beyond the report's: the histograms. */
static void metrics(void *arg, asr_buf_t *b) {
  (void)arg;
  asr__metrics_render(b);
}

static const asr_report_provider_t provider = {tick, render, metrics, NULL};

void asr__state_report_init(void) {
  asr__report_register(&provider);
  (void)asr__report_start();
}
