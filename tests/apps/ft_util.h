/*
 * ft_util.h -- what the failure-policy programs share (tests/apps/ft_bench.c,
 * tests/apps/restart_peer.c): one clock for every process of the machine,
 * network namespaces included, and a bounded wait for one request.
 * Header-only.
 */
#ifndef ASR_FT_UTIL_H
#define ASR_FT_UTIL_H

#include <stdint.h>
#include <time.h>

#include "asr.h"

static inline int64_t ft_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Polls req until it completes: 0, the status of a failed asr_test, or
 * ASR_TIMEOUT after bound_ns (< 0: no bound). */
static inline int ft_wait_req(asr_request_t *req, int64_t bound_ns) {
  int64_t until = ft_now_ns() + bound_ns;
  for (;;) {
    int done = 0;
    size_t n = 0;
    int rc = asr_test(req, &done, &n);
    if (rc != ASR_SUCCESS) return rc;
    if (done) return 0;
    if (bound_ns >= 0 && ft_now_ns() > until) return ASR_TIMEOUT;
  }
}

#endif /* ASR_FT_UTIL_H */
