/*
 * metrics_prom.h -- a job's metrics in Prometheus' text exposition format
 * (version 0.0.4), from what each rank answered to a scrape (issue 52,
 * asrrun --metrics-port; the gathering is launcher/asrrun/asrrun_metrics.c).
 *
 * Each rank's answer is its state report with histograms
 * (bootstrap/report_fmt.h: comm and hist records), parsed. The rendering
 * sums a rank's comms of one (peer rank, LNC, peer LNC, direction) into one
 * sample each and names them:
 *
 *   asr_bytes_total             counter   bytes its completed transfers moved
 *   asr_messages_total          counter   its completed transfers
 *   asr_request_failures_total  counter   requests asr_test failed
 *   asr_requests_in_flight      gauge     posted, not completed nor failed
 *   asr_requests_stashed        gauge     waiting in the stash ring for the service thread
 *     labels rank, peer (-1: a comm made without a rank), lnc, peer_lnc,
 *     direction (send|recv), host (the rank's)
 *   asr_transfer_latency_seconds histogram  post to completion, per rank, lnc, direction, host
 *   asr_connect_seconds         histogram  a comm's making to CONNECTED, the same labels
 *   asr_output_held_bytes       gauge     output its daemon holds, not yet sent (back-pressure)
 *   asr_rank_failures_total     counter   its deaths absorbed by --on-failure continue|restart
 *   asr_rank_restarts_total     counter   its restarts in place (its incarnation)
 *   asr_metrics_rank_up         gauge     1: it answered this scrape
 *     labels rank, host
 *   asr_metrics_ranks           gauge     the job's ranks
 *   asr_metrics_missing_ranks   gauge     running ranks that did not answer in time (left out)
 *   asr_metrics_scrapes_total   counter   scrapes served, this one included
 *
 * Each family comes whole, after its HELP and TYPE lines; a histogram's
 * buckets are cumulative, in order, ending with le="+Inf" equal to _count.
 * The counters are sums over the comms a rank has now: a comm freed takes
 * its counts with it (Prometheus sees a counter reset).
 */
#ifndef ASR_METRICS_PROM_H
#define ASR_METRICS_PROM_H

#include <stdint.h>

#include "asr_buf.h"
#include "report_fmt.h"

/* One rank's part of a scrape. */
typedef struct {
  const char *host;        /* its host's name */
  int answered;            /* rep holds its answer */
  int missing;             /* it was running and gave no answer in time */
  const asr_report_t *rep; /* parsed answer, or NULL */
  uint64_t held;           /* output bytes its daemon holds */
  int failures, restarts;  /* asrrun's policy's counts */
} asr_prom_rank_t;

typedef struct {
  int nranks;
  const asr_prom_rank_t *ranks; /* [nranks], by rank */
  uint64_t scrapes;
} asr_prom_job_t;

/* Appends the job's exposition text to out: 0, or ASR_ENOMEM. */
int asr_prom_render(const asr_prom_job_t *job, asr_buf_t *out);

/* The content type of that text. */
#define ASR_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif /* ASR_METRICS_PROM_H */
