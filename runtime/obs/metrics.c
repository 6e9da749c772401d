/*
 * metrics.c -- libasr's histograms for asrrun --metrics-port (issue 52,
 * obs.h): a transfer's time from its post to the completion asr_test saw,
 * and a comm's time from its making to CONNECTED, per LNC and direction.
 * On only with ASR_METRICS=1 (asrd sets it for the ranks of a job that
 * serves metrics); the byte and request counters are the state report's,
 * always on (rt.h: rep_*).
 *
 * The data path's cost when on: the clock read at the completion (the one
 * at the post is obs.c's), and a relaxed load and store of a bucket and of
 * the sum of the comm's own histogram (in its pool), under the data-path
 * lock asr_test already holds: no atomic read-modify-write, no line shared
 * with another comm. The report thread sums the comms' histograms per LNC
 * and direction when asked (relaxed loads: a scrape may see a sum a
 * transfer ahead of or behind the buckets, never a torn value). The
 * connect times, off the data path, go to one histogram per LNC and
 * direction by atomic adds from the service threads.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "../rt.h"
#include "asr.h"
#include "asr_buf.h"
#include "obs.h"
#include "report_fmt.h"

typedef asr__hist_t hist_t;

/* [lnc][dir]: 128 x 2 x 216 bytes of zero pages, touched only for the LNCs
 * a process uses */
static hist_t conn[ASR_MAX_LNC][2];

/* Adds one to a counter that only the caller's lock's holders write. */
static inline void bump(_Atomic uint64_t *n, uint64_t by) {
  atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + by, memory_order_relaxed);
}

void asr__metrics_xfer_locked(asr__hist_t *h, uint64_t ns) {
  bump(&h->b[asr_report_hist_bucket(ns)], 1);
  bump(&h->sum_ns, ns);
}

void asr__metrics_connect(int lnc, int dir, uint64_t ns) {
  if ((unsigned)lnc >= ASR_MAX_LNC) return;
  hist_t *h = &conn[lnc][dir & 1];
  atomic_fetch_add_explicit(&h->b[asr_report_hist_bucket(ns)], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

/* Adds what h counted into into (the report thread's own copy). */
static void sum_into(hist_t *into, const hist_t *h) {
  bump(&into->sum_ns, atomic_load_explicit(&h->sum_ns, memory_order_relaxed));
  for (int i = 0; i < ASR_REPORT_HIST_BUCKETS; i++)
    bump(&into->b[i], atomic_load_explicit(&h->b[i], memory_order_relaxed));
}

/* One hist record, when h counted anything. */
static void render_one(asr_buf_t *out, const hist_t *h, const char *name, int lnc, int dir) {
  uint64_t b[ASR_REPORT_HIST_BUCKETS], n = 0;
  for (int i = 0; i < ASR_REPORT_HIST_BUCKETS; i++)
    n += b[i] = atomic_load_explicit(&h->b[i], memory_order_relaxed);
  if (!n) return;
  char line[64 + ASR_REPORT_HIST_BUCKETS * 21];
  int k = snprintf(line, sizeof line, "hist\tname=%s\tlnc=%d\tdir=%s\tsum_ns=%llu\tb=", name, lnc,
                   dir ? "RECV" : "SEND",
                   (unsigned long long)atomic_load_explicit(&h->sum_ns, memory_order_relaxed));
  for (int i = 0; i < ASR_REPORT_HIST_BUCKETS && k > 0 && (size_t)k < sizeof line; i++)
    k += snprintf(line + k, sizeof line - (size_t)k, "%s%llu", i ? "," : "", (unsigned long long)b[i]);
  if (k <= 0 || (size_t)k >= sizeof line - 1) return;
  line[k++] = '\n';
  asr_buf_put(out, line, (size_t)k);
}

void asr__metrics_render(asr_buf_t *out) {
  if (!ASR_OBS_METERING()) return;
  hist_t *xfer = calloc(ASR_MAX_LNC * 2, sizeof *xfer); /* [lnc * 2 + dir] */
  if (!xfer) return;
  /* the registry holds every comm from its handover to its free, and a
   * pool once made stays the comm's (rt.h): read under rep_mutex, as the
   * report's render reads them */
  pthread_mutex_lock(&asr__rep_mutex);
  for (struct asr_comm *c = asr__rep_comms; c; c = c->rep_next) {
    const asr_comm_pool_t *p = asr__comm_pool_of(c);
    if (p && (unsigned)c->lnc < ASR_MAX_LNC)
      sum_into(&xfer[c->lnc * 2 + (c->type == ASR_SEND_COMM ? 0 : 1)], &p->xfer_hist);
  }
  /* the comms closed so far (state_registry.c): as comm records of their
   * own, which asrrun sums with the live ones of the same key, so that no
   * counter goes down when a comm closes */
  for (int lnc = 0; lnc < ASR_MAX_LNC; lnc++)
    for (int dir = 0; dir < 2; dir++) sum_into(&xfer[lnc * 2 + dir], &asr__rep_retired_xfer[lnc][dir]);
  for (int i = 0; i < asr__rep_nretired; i++) {
    const asr__rep_retired_t *t = &asr__rep_retired[i];
    char line[320];
    int k = snprintf(line, sizeof line,
                     "comm\tlnc=%d\tdir=%s\tpeer_rank=%d\tpeer_lnc=%d\tstate=CLOSED\tposted=%llu\tdone=%llu"
                     "\tbytes=%llu\tfailed=%llu\n",
                     t->lnc, t->dir ? "RECV" : "SEND", t->peer_rank, t->peer_lnc,
                     (unsigned long long)(t->done + t->failed), (unsigned long long)t->done,
                     (unsigned long long)t->bytes, (unsigned long long)t->failed);
    if (k > 0 && (size_t)k < sizeof line) asr_buf_put(out, line, (size_t)k);
  }
  pthread_mutex_unlock(&asr__rep_mutex);
  for (int lnc = 0; lnc < ASR_MAX_LNC; lnc++)
    for (int dir = 0; dir < 2; dir++) {
      render_one(out, &xfer[lnc * 2 + dir], "xfer", lnc, dir);
      render_one(out, &conn[lnc][dir], "connect", lnc, dir);
    }
  free(xfer);
}
