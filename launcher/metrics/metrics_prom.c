/* metrics_prom.c -- see metrics_prom.h. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_err.h"
#include "metrics_prom.h"

/* One sample of the comm families: a rank's comms of one key, summed. */
typedef struct {
  int rank, peer, lnc, peer_lnc, dir;
  unsigned long long bytes, msgs, failed, inflight, stashed;
} agg_t;

typedef struct {
  asr_buf_t *b;
  int rc;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = asr_buf_vprintf(o->b, fmt, ap);
  va_end(ap);
  if (o->rc == 0) o->rc = rc;
}

/* A label value as the format wants it: \, " and newline escaped. */
static const char *esc(const char *s, char *buf, size_t len) {
  size_t k = 0;
  for (; *s && k + 2 < len; s++) {
    if (*s == '\\' || *s == '"' || *s == '\n') buf[k++] = '\\';
    buf[k++] = *s == '\n' ? 'n' : *s;
  }
  buf[k] = '\0';
  return buf;
}

static void family(out_t *o, const char *name, const char *type, const char *help) {
  put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int agg_cmp(const void *a, const void *b) {
  const agg_t *x = a, *y = b;
  int kx[5] = {x->rank, x->peer, x->lnc, x->peer_lnc, x->dir},
      ky[5] = {y->rank, y->peer, y->lnc, y->peer_lnc, y->dir};
  for (int i = 0; i < 5; i++)
    if (kx[i] != ky[i]) return kx[i] < ky[i] ? -1 : 1;
  return 0;
}

/* Every answered rank's comms, one entry a key, in key order: *n of them
 * (malloc'd), or NULL with *n 0 when there are none or no memory. */
static agg_t *aggregate(const asr_prom_job_t *job, int *n) {
  size_t total = 0;
  for (int r = 0; r < job->nranks; r++)
    if (job->ranks[r].rep) total += (size_t)job->ranks[r].rep->ncomms;
  *n = 0;
  agg_t *a = total ? malloc(total * sizeof *a) : NULL;
  if (!a) return NULL;
  size_t k = 0;
  for (int r = 0; r < job->nranks; r++) {
    const asr_report_t *rep = job->ranks[r].rep;
    for (int i = 0; rep && i < rep->ncomms; i++) {
      const asr_report_comm_t *c = &rep->comms[i];
      unsigned long long ended = c->done + c->failed;
      a[k++] = (agg_t){.rank = r,
                       .peer = c->peer_rank,
                       .lnc = c->lnc,
                       .peer_lnc = c->peer_lnc,
                       .dir = c->dir,
                       .bytes = c->bytes,
                       .msgs = c->done,
                       .failed = c->failed,
                       /* read at different moments: never below zero */
                       .inflight = c->posted > ended ? c->posted - ended : 0,
                       .stashed = (unsigned long long)c->stashed};
    }
  }
  qsort(a, k, sizeof *a, agg_cmp);
  size_t w = 0;
  for (size_t i = 0; i < k; i++) {
    if (w && agg_cmp(&a[w - 1], &a[i]) == 0) {
      a[w - 1].bytes += a[i].bytes;
      a[w - 1].msgs += a[i].msgs;
      a[w - 1].failed += a[i].failed;
      a[w - 1].inflight += a[i].inflight;
      a[w - 1].stashed += a[i].stashed;
    } else {
      a[w++] = a[i];
    }
  }
  *n = (int)w;
  return a;
}

static const char *host_of(const asr_prom_job_t *job, int r, char *buf, size_t len) {
  return esc(job->ranks[r].host ? job->ranks[r].host : "", buf, len);
}

static void comm_family(out_t *o, const asr_prom_job_t *job, const agg_t *a, int n, const char *name,
                        const char *type, const char *help, size_t field) {
  family(o, name, type, help);
  char hb[300];
  for (int i = 0; i < n; i++) {
    unsigned long long v = *(const unsigned long long *)((const char *)&a[i] + field);
    put(o, "%s{rank=\"%d\",peer=\"%d\",lnc=\"%d\",peer_lnc=\"%d\",direction=\"%s\",host=\"%s\"} %llu\n", name,
        a[i].rank, a[i].peer, a[i].lnc, a[i].peer_lnc, a[i].dir ? "recv" : "send",
        host_of(job, a[i].rank, hb, sizeof hb), v);
  }
}

/* The histogram family of kind (0 xfer, 1 connect): per rank, LNC and
 * direction, the rank's records of one key summed (a process has one). */
static void hist_family(out_t *o, const asr_prom_job_t *job, int kind, const char *name, const char *help) {
  family(o, name, "histogram", help);
  char hb[300];
  for (int r = 0; r < job->nranks; r++) {
    const asr_report_t *rep = job->ranks[r].rep;
    for (int i = 0; rep && i < rep->nhists; i++) {
      const asr_report_hist_t *h = &rep->hists[i];
      if (h->kind != kind) continue;
      int seen = 0; /* an earlier record of the same key took this one in */
      for (int j = 0; j < i && !seen; j++)
        seen = rep->hists[j].kind == kind && rep->hists[j].lnc == h->lnc && rep->hists[j].dir == h->dir;
      if (seen) continue;
      unsigned long long b[ASR_REPORT_HIST_BUCKETS], sum_ns = 0;
      memset(b, 0, sizeof b);
      for (int j = i; j < rep->nhists; j++) {
        const asr_report_hist_t *g = &rep->hists[j];
        if (g->kind != kind || g->lnc != h->lnc || g->dir != h->dir) continue;
        sum_ns += g->sum_ns;
        for (int k = 0; k < ASR_REPORT_HIST_BUCKETS; k++) b[k] += g->b[k];
      }
      char labels[400];
      snprintf(labels, sizeof labels, "rank=\"%d\",lnc=\"%d\",direction=\"%s\",host=\"%s\"", r, h->lnc,
               h->dir ? "recv" : "send", host_of(job, r, hb, sizeof hb));
      unsigned long long cum = 0;
      for (int k = 0; k < ASR_REPORT_HIST_BUCKETS; k++) {
        cum += b[k];
        if (k < ASR_REPORT_HIST_BUCKETS - 1)
          put(o, "%s_bucket{%s,le=\"%.9g\"} %llu\n", name, labels, (double)ASR_REPORT_HIST_LE_NS(k) / 1e9,
              cum);
        else
          put(o, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, cum);
      }
      put(o, "%s_sum{%s} %.9f\n", name, labels, (double)sum_ns / 1e9);
      put(o, "%s_count{%s} %llu\n", name, labels, cum);
    }
  }
}

/* A family of one value per rank. */
static void rank_family(out_t *o, const asr_prom_job_t *job, const char *name, const char *type,
                        const char *help, int which) {
  family(o, name, type, help);
  char hb[300];
  for (int r = 0; r < job->nranks; r++) {
    const asr_prom_rank_t *p = &job->ranks[r];
    unsigned long long v = which == 0   ? p->held
                           : which == 1 ? (unsigned long long)p->failures
                           : which == 2 ? (unsigned long long)p->restarts
                                        : (unsigned long long)(p->answered != 0);
    put(o, "%s{rank=\"%d\",host=\"%s\"} %llu\n", name, r, host_of(job, r, hb, sizeof hb), v);
  }
}

int asr_prom_render(const asr_prom_job_t *job, asr_buf_t *b) {
  out_t o = {b, 0};
  int n = 0;
  agg_t *a = aggregate(job, &n);
  int missing = 0;
  for (int r = 0; r < job->nranks; r++) missing += job->ranks[r].missing != 0;
  family(&o, "asr_metrics_ranks", "gauge", "Ranks in the job.");
  put(&o, "asr_metrics_ranks %d\n", job->nranks);
  family(&o, "asr_metrics_missing_ranks", "gauge",
         "Running ranks that did not answer this scrape in time; their samples are left out.");
  put(&o, "asr_metrics_missing_ranks %d\n", missing);
  family(&o, "asr_metrics_scrapes_total", "counter", "Scrapes this asrrun served, this one included.");
  put(&o, "asr_metrics_scrapes_total %llu\n", (unsigned long long)job->scrapes);
  rank_family(&o, job, "asr_metrics_rank_up", "gauge", "1 when the rank answered this scrape.", 3);
  comm_family(&o, job, a, n, "asr_bytes_total", "counter",
              "Bytes moved by the rank's completed transfers with a peer, by direction.",
              offsetof(agg_t, bytes));
  comm_family(&o, job, a, n, "asr_messages_total", "counter",
              "Transfers the rank completed with a peer, by direction.", offsetof(agg_t, msgs));
  comm_family(&o, job, a, n, "asr_request_failures_total", "counter",
              "Requests with a peer that completed with an error.", offsetof(agg_t, failed));
  comm_family(&o, job, a, n, "asr_requests_in_flight", "gauge",
              "Requests with a peer posted and not yet completed.", offsetof(agg_t, inflight));
  comm_family(&o, job, a, n, "asr_requests_stashed", "gauge",
              "Requests with a peer waiting in the stash ring for the service thread to post them.",
              offsetof(agg_t, stashed));
  hist_family(&o, job, 0, "asr_transfer_latency_seconds",
              "Time from a transfer's post to the completion asr_test saw (ASR_METRICS).");
  hist_family(&o, job, 1, "asr_connect_seconds", "Time from a comm's making to CONNECTED (ASR_METRICS).");
  rank_family(&o, job, "asr_output_held_bytes", "gauge",
              "The rank's output its daemon read and holds, not yet sent to asrrun (back-pressure).", 0);
  rank_family(&o, job, "asr_rank_failures_total", "counter",
              "The rank's deaths that --on-failure continue or restart absorbed.", 1);
  rank_family(&o, job, "asr_rank_restarts_total", "counter", "The rank's restarts in place.", 2);
  free(a);
  return o.rc;
}
