/*
 * state_registry.c -- every comm of the process, from its handover to its
 * free, for the state report (state_report.c reads it; comm.c adds and
 * removes). A file of its own so that comm.c and the report do not use
 * each other. asr__rep_mutex guards the list, the report's per-comm
 * sampler fields, and the unpublishing of a context (context.c: asr_close).
 *
 * With metrics on (--metrics-port), a comm that leaves the list leaves
 * its counts and its latency histogram behind, folded into the totals of
 * its key (lnc, direction, peer rank, peer LNC) under the same hold of
 * the mutex, so that a scrape, which reads both under it, never sees a
 * counter go down when a comm is closed (obs/metrics.c renders them).
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include "rt.h"

pthread_mutex_t asr__rep_mutex = PTHREAD_MUTEX_INITIALIZER;
struct asr_comm *asr__rep_comms;
asr__rep_retired_t *asr__rep_retired;
int asr__rep_nretired;
asr__hist_t asr__rep_retired_xfer[ASR_MAX_LNC][2];
static int retired_cap;

/* c's counts into its key's totals (asr__rep_mutex held). */
static void retire(struct asr_comm *c) {
  if (!ASR_OBS_METERING() || (unsigned)c->lnc >= ASR_MAX_LNC) return;
  int dir = c->type == ASR_SEND_COMM ? 0 : 1, peer = atomic_load(&c->peer_rank);
  int i = 0;
  while (i < asr__rep_nretired &&
         !(asr__rep_retired[i].lnc == c->lnc && asr__rep_retired[i].dir == dir &&
           asr__rep_retired[i].peer_rank == peer && asr__rep_retired[i].peer_lnc == c->peer_lnc))
    i++;
  if (i == asr__rep_nretired) {
    if (i == retired_cap) {
      int cap = retired_cap ? 2 * retired_cap : 16;
      asr__rep_retired_t *v = realloc(asr__rep_retired, (size_t)cap * sizeof *v);
      if (!v) return; /* (its counts are lost to the scrapes: out of memory) */
      asr__rep_retired = v;
      retired_cap = cap;
    }
    asr__rep_retired[i] =
        (asr__rep_retired_t){.lnc = c->lnc, .dir = dir, .peer_rank = peer, .peer_lnc = c->peer_lnc};
    asr__rep_nretired++;
  }
  asr__rep_retired_t *t = &asr__rep_retired[i];
  uint64_t failed = atomic_load_explicit(&c->rep_failed, memory_order_relaxed);
  t->done += atomic_load_explicit(&c->rep_done, memory_order_relaxed);
  t->bytes += atomic_load_explicit(&c->rep_bytes, memory_order_relaxed);
  t->failed += failed;
  const asr_comm_pool_t *p = asr__comm_pool_of(c);
  if (!p) return;
  asr__hist_t *h = &asr__rep_retired_xfer[c->lnc][dir];
  atomic_fetch_add_explicit(&h->sum_ns, atomic_load_explicit(&p->xfer_hist.sum_ns, memory_order_relaxed),
                            memory_order_relaxed);
  for (int k = 0; k < ASR_REPORT_HIST_BUCKETS; k++)
    atomic_fetch_add_explicit(&h->b[k], atomic_load_explicit(&p->xfer_hist.b[k], memory_order_relaxed),
                              memory_order_relaxed);
}

void asr__rep_add(struct asr_comm *c) {
  pthread_mutex_lock(&asr__rep_mutex);
  c->rep_prev = NULL;
  c->rep_next = asr__rep_comms;
  if (asr__rep_comms) asr__rep_comms->rep_prev = c;
  asr__rep_comms = c;
  c->rep_listed = 1;
  pthread_mutex_unlock(&asr__rep_mutex);
}

void asr__rep_remove(struct asr_comm *c) {
  pthread_mutex_lock(&asr__rep_mutex);
  if (c->rep_listed) {
    if (c->rep_prev)
      c->rep_prev->rep_next = c->rep_next;
    else
      asr__rep_comms = c->rep_next;
    if (c->rep_next) c->rep_next->rep_prev = c->rep_prev;
    c->rep_listed = 0;
    retire(c);
  }
  pthread_mutex_unlock(&asr__rep_mutex);
}
