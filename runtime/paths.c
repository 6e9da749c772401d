/*
 * paths.c -- a path per peer (doc/design.md, "The data path"): which
 * endpoint of an LNC context carries a comm, and opening each endpoint when
 * its first comm needs it.
 * The connect machine (connect.c) asks asr__same_host at LISTEN and
 * asr__ctx_endpoint for the endpoint; asr_init (context.c) calls
 * asr__paths_choose, and asr__ctx_endpoint itself when one provider is
 * forced; asr_close releases them with asr__ctx_endpoints_close.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "rma/rma.h"
#include "rt.h"

/*
 * Same host (doc/design.md, "The data path": asr's own path, sm, for a
 * peer on the same host, as the launcher names hosts). Two LNCs are on the same host when
 * their host identities are equal: the name this LNC took at asr_init
 * (ctx->hostname: ASR_HOSTNAME, which asrd sets to its host's name and
 * asr_job_init to the PMIx node name under a direct launch; else
 * gethostname()) and the
 * "hostname" the peer's host KV server holds, which asrd (or the elected
 * server, kv_host.c) seeds with that same name. Names, not kernels or
 * addresses: emulated hosts in network namespaces, or Slurm's emulated
 * nodes, share a kernel and could reach each other's shared memory, yet they
 * are separate hosts and take the network path, as separate machines
 * would; and two machines given one name would be told to use sm, which
 * fails loudly at connect (the region is not there: connect.c), never
 * silently. Only the RECV side
 * decides (it learns the peer's name in WAIT_FOR_HOSTNAME) and writes its
 * choice into the handle, which the SEND side follows, so both ends of a
 * comm always agree.
 */
int asr__same_host(const asr_ctx_t *ctx, const uint8_t *name) {
  return strncmp(ctx->hostname, (const char *)name, ASR_KV_HOSTNAME_LEN) == 0;
}

/* Which provider serves which path (rt.h: eps, one_ep): ASR_PROVIDER or
 * FI_PROVIDER forces one for every peer, as before per-peer paths;
 * otherwise asr's own path (sm, no endpoint: connect.c) to the peers on
 * this host and tcp;ofi_rxm to the others (doc/design.md, "The data
 * path"). A job on one host then opens no endpoint at all: no peer ever
 * has another host identity. ep_prov[0] (shm) serves only a forced
 * provider. */
int asr__paths_choose(asr_ctx_t *ctx, char *err, size_t errlen) {
  const char *forced = NULL;
  if (asr__ofi_forced_provider(&forced, err, errlen) != 0) return ASR_ECONFIG;
  ctx->fab.one_ep = forced != NULL;
  if (forced) {
    snprintf(ctx->fab.ep_prov[0], sizeof ctx->fab.ep_prov[0], "%s", forced);
    snprintf(ctx->fab.paths_desc, sizeof ctx->fab.paths_desc, "%s", forced);
  } else {
    snprintf(ctx->fab.ep_prov[0], sizeof ctx->fab.ep_prov[0], "shm");
    snprintf(ctx->fab.ep_prov[1], sizeof ctx->fab.ep_prov[1], "tcp;ofi_rxm");
    snprintf(ctx->fab.paths_desc, sizeof ctx->fab.paths_desc,
             "per peer: sm on host %s, tcp;ofi_rxm to other hosts", ctx->hostname);
  }
  return 0;
}

/* This process's resident set in KiB (/proc/self/statm), or -1. */
static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = -1, res = -1;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = -1;
    fclose(f);
  }
  return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

int asr__ctx_endpoint(asr_ctx_t *ctx, int path, int *ep, char *err, size_t errlen) {
  int i = asr__ctx_ep_index(ctx, path);
  *ep = i;
  if (atomic_load_explicit(&ctx->fab.ep_open[i], memory_order_acquire)) return 0;
  pthread_mutex_lock(&ctx->fab.ep_mutex);
  int rc = 0;
  if (atomic_load_explicit(&ctx->fab.ep_open[i], memory_order_relaxed)) goto out;
  asr__ofi_t *o = &ctx->fab.eps[i];
  void (*on_ctl)(void *) = o->on_ctl; /* asr__ofi_open clears o */
  void *ctl_arg = o->ctl_arg;
  const char *prov = ctx->fab.ep_prov[i];
  long rss0 = rss_kib();
  uint64_t t0 = asr_time_ns();
  char why[512];
  rc = asr__ofi_open(o, ctx->lnc, prov, why, sizeof why);
  if (rc) {
    snprintf(err, errlen, "cannot open the %s endpoint%s: %s%s", prov,
             ctx->fab.one_ep        ? ""
             : path == ASR_PATH_NET ? " for peers on other hosts"
                                    : " for peers on this host",
             why,
             ctx->fab.one_ep        ? ""
             : path == ASR_PATH_NET ? " (set ASR_PROVIDER=shm if every peer is on this host, or make "
                                      "tcp;ofi_rxm available)"
                                    : " (set ASR_PROVIDER=tcp;ofi_rxm to reach the peers on this host "
                                      "over the network, or give each host its own ASR_HOSTNAME)");
    goto out;
  }
  o->on_ctl = on_ctl;
  o->ctl_arg = ctl_arg;
  memcpy(o->who, ctx->who, sizeof o->who);
  /* The flush fence's 4-byte buffer, registered with the endpoint (seed: enc_async_sr_flush). */
  rc = asr__ofi_mr_reg(o, o->flush_buf, sizeof o->flush_buf, &o->flush_mr);
  if (rc) {
    snprintf(err, errlen, "cannot register the flush buffer on the %s endpoint: %s", prov, asr_strerror(rc));
    asr__ofi_close(o);
    goto out;
  }
  (void)asr__ofi_mbox_post(o); /* a full queue now: the service thread's ticks post it */
  asr__shm_name_keep(ctx->lnc, o);
  uint64_t ns = asr_time_ns() - t0;
  long rss1 = rss_kib();
  /* one-sided transfers (rma/rma.h): the rings' remote CQ data, and the
   * LNC's registrations, which this endpoint's peers may now reach */
  asr__notif_ep_opened(ctx, i);
  asr__mem_ep_opened(ctx, i);
  atomic_store_explicit(&ctx->fab.ep_open[i], 1, memory_order_release);
  /* the cost of each endpoint, which tests/bench/netns_bench.sh reads */
  asr_info("fab", "lnc %d: endpoint %s opened for %s in %.2f ms, resident memory +%ld KiB", ctx->lnc, prov,
           ctx->fab.one_ep        ? "every peer"
           : path == ASR_PATH_NET ? "peers on other hosts"
                                  : "peers on this host",
           (double)ns / 1e6, rss0 >= 0 && rss1 >= 0 ? rss1 - rss0 : -1L);
out:
  pthread_mutex_unlock(&ctx->fab.ep_mutex);
  return rc;
}

/* Releases every endpoint that was opened (asr_init's failure, asr_close). */
void asr__ctx_endpoints_close(asr_ctx_t *ctx) {
  for (int i = 0; i < ASR_NEPS; i++) {
    if (!atomic_load(&ctx->fab.ep_open[i])) continue;
    asr__ofi_mr_dereg(ctx->fab.eps[i].flush_mr);
    asr__ofi_close(&ctx->fab.eps[i]);
    atomic_store(&ctx->fab.ep_open[i], 0);
  }
}
