/*
 * ft_bench -- the figures of issue 50's benchmark (tests/bench/fail_bench.sh),
 * run under asrrun --on-failure continue:
 *
 *   ft_bench detect
 *     Rank 1 (the victim) connects both ways with rank 0, sends it one
 *     message, and once that send completed prints "ft_bench kill_ns=T"
 *     (CLOCK_MONOTONIC, one clock for every network namespace of a
 *     machine) and raises SIGKILL. Rank 0 keeps a receive posted from it
 *     and polls that request and both comms; the first failure it sees is
 *     "ft_bench detect_ns=T how=...". The script takes the difference.
 *     With "stop-host", the victim stops its daemon and itself (SIGSTOP)
 *     instead: its host falls silent (lost after --heartbeat-timeout), and
 *     its line never comes; with FT_KILL_FILE set, it also writes it there.
 *     Rank 0 spins on its polls, as a program waiting for data does; with
 *     FT_NAP_US=N it sleeps N microseconds between them instead, leaving
 *     the processor to the threads that carry the news (on a machine of
 *     few cores, the daemons' and its own PMIx and service threads).
 *
 *   ft_bench bw MS kill|none
 *     Four ranks: rank 0 streams 64 KiB messages to rank 1 (8 in flight)
 *     for MS milliseconds and prints "ft_bench bw_MBps=X"; ranks 2 and 3
 *     are a pair of their own, rank 2 polling (every 50 us) a receive posted from rank 3,
 *     and with "kill" rank 3 dies (SIGKILL) halfway through (it prints
 *     kill_ns, rank 2 detect_ns, as above). Rank 2 keeps
 *     polling until the end either way, so the only difference between
 *     the two runs is the death. Rank 1 checks the first and last byte of
 *     every message against the sender's pattern.
 *
 * A rank whose wait for something runs 10 s prints why and exits 1.
 */
#include "config.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "asr.h"
#include "ft_util.h"

#define MSG (64u << 10)
#define WINDOW 8

static asr_job_info_t me;

static void die(const char *what, int rc) {
  fprintf(stderr, "ft_bench rank %d: %s: %s\n", me.rank, what, asr_strerror(rc));
  exit(1);
}

/* Waits (10 s at most) until req completes: 0, or the failed test's status. */
static int wait_req(asr_request_t *req) {
  int rc = ft_wait_req(req, 10000000000LL);
  if (rc == ASR_TIMEOUT) die("a request did not complete within 10 s", rc);
  return rc;
}

static void pair(int peer, asr_comm_t **send, asr_comm_t **recv) {
  int rc = asr_job_connect(peer, send);
  if (rc == ASR_SUCCESS) rc = asr_job_accept(peer, recv);
  if (rc == ASR_SUCCESS) rc = asr_comm_wait_connected(*send, 10000);
  if (rc == ASR_SUCCESS) rc = asr_comm_wait_connected(*recv, 10000);
  if (rc != ASR_SUCCESS) die("connecting", rc);
}

/* Polls a receive posted on recv and both comms until one fails, or until
 * deadline (0: none); returns the time of the failure (0 at the deadline)
 * and what showed it in *how. */
static int64_t watch(asr_comm_t *send, asr_comm_t *recv, asr_request_t *req, int64_t deadline,
                     const char **how, int nap_us) {
  for (;;) {
    if (nap_us) usleep((useconds_t)nap_us);
    int done = 0, st = 0;
    size_t n = 0;
    if (asr_test(req, &done, &n) != ASR_SUCCESS) {
      *how = "the posted receive failed";
      return ft_now_ns();
    }
    if (done) die("a receive from the victim completed", ASR_INVALID);
    if (asr_comm_status(recv, &st) == ASR_SUCCESS && st == ASR_COMM_CONNECTION_ERROR) {
      *how = "the RECV comm failed";
      return ft_now_ns();
    }
    if (asr_comm_status(send, &st) == ASR_SUCCESS && st == ASR_COMM_CONNECTION_ERROR) {
      *how = "the SEND comm failed";
      return ft_now_ns();
    }
    if (deadline && ft_now_ns() > deadline) return 0;
  }
}

static int detect(int stop_host) {
  asr_tensor_t *t;
  if (asr_tensor_alloc(4096, &t) != ASR_SUCCESS) die("tensor", ASR_INVALID);
  asr_comm_t *send, *recv;
  asr_request_t *req;
  pair(me.rank == 0 ? 1 : 0, &send, &recv);
  /* a round trip first: the victim dies only once rank 0 has both comms
   * up (its own connect may finish after the victim's) */
  int rc;
  if (me.rank == 1) {
    rc = asr_irecv(recv, t, 0, 8, &req);
    if (rc == ASR_SUCCESS) rc = wait_req(req);
    if (rc == ASR_SUCCESS) rc = asr_isend(send, t, 0, 8, &req);
    if (rc == ASR_SUCCESS) rc = wait_req(req);
    if (rc) die("the round trip", rc);
    long long t0 = (long long)ft_now_ns();
    printf("ft_bench kill_ns=%lld\n", t0);
    fflush(stdout);
    /* a host that falls silent forwards none of its output: the time also
     * goes to a file, when asked (the namespaces share the file system) */
    const char *kf = getenv("FT_KILL_FILE");
    FILE *f = kf ? fopen(kf, "w") : NULL;
    if (f) fprintf(f, "ft_bench kill_ns=%lld\n", t0), fclose(f);
    if (stop_host) { /* the whole host falls silent: its daemon, then this rank */
      kill(getppid(), SIGSTOP);
      raise(SIGSTOP);
      pause();
    }
    raise(SIGKILL);
  }
  rc = asr_irecv(recv, t, 0, 8, &req);
  asr_request_t *sreq;
  if (rc == ASR_SUCCESS) rc = asr_isend(send, t, 8, 8, &sreq);
  if (rc == ASR_SUCCESS) rc = wait_req(sreq);
  if (rc) die("the round trip", rc);
  const char *how = "";
  int64_t t1 = 0;
  /* the victim's answer (it may die before this sees it: then its failure
   * is the detection), then a receive that only its death ends */
  if (wait_req(req) != 0) {
    t1 = ft_now_ns();
    how = "the receive of its answer failed";
  } else if ((rc = asr_irecv(recv, t, 0, 8, &req)) != ASR_SUCCESS) {
    t1 = ft_now_ns();
    how = "a post failed";
  } else {
    const char *nap = getenv("FT_NAP_US");
    t1 = watch(send, recv, req, ft_now_ns() + 10000000000LL, &how, nap ? atoi(nap) : 0);
  }
  if (!t1) die("the victim's death was not seen within 10 s", ASR_TIMEOUT);
  const char *why = asr_comm_error(recv) ? asr_comm_error(recv) : asr_comm_error(send);
  printf("ft_bench detect_ns=%lld how=%s why=%s\n", (long long)t1, how, why ? why : "(none)");
  fflush(stdout);
  asr_comm_close(send);
  asr_comm_close(recv);
  asr_tensor_free(t);
  return asr_job_finalize() == ASR_SUCCESS ? 0 : 1;
}

static uint8_t pattern(uint64_t msg, size_t at) { return (uint8_t)(msg * 131u + at * 7u + 1u); }

static int bw(int ms, int kill_it) {
  asr_comm_t *send = NULL, *recv = NULL;
  asr_tensor_t *t;
  if (asr_tensor_alloc((size_t)MSG * WINDOW, &t) != ASR_SUCCESS) die("tensor", ASR_INVALID);
  uint8_t *buf = asr_tensor_va(t);
  int peer = me.rank ^ 1;
  pair(peer, &send, &recv);
  if (asr_job_barrier() != ASR_SUCCESS) die("barrier", ASR_INVALID);
  int64_t t0 = ft_now_ns(), end = t0 + (int64_t)ms * 1000000;
  if (me.rank >= 2) {
    asr_request_t *req;
    if (me.rank == 3) {
      if (kill_it) {
        while (ft_now_ns() < t0 + (end - t0) / 2) usleep(100);
        printf("ft_bench kill_ns=%lld\n", (long long)ft_now_ns());
        fflush(stdout);
        raise(SIGKILL);
      }
      while (ft_now_ns() < end) usleep(100);
    } else {
      int rc = asr_irecv(recv, t, 0, 8, &req);
      if (rc) die("posting", rc);
      const char *how = "";
      /* polls every 50 us: on two cores, a third process spinning would
       * measure the scheduler rather than the stream */
      int64_t t1 = watch(send, recv, req, end, &how, 50);
      if (t1) {
        printf("ft_bench detect_ns=%lld how=%s\n", (long long)t1, how);
        while (ft_now_ns() < end) usleep(50); /* the same load as a run without the death */
      }
    }
  } else if (me.rank == 0) {
    asr_request_t *reqs[WINDOW] = {0};
    uint64_t sent = 0, done_bytes = 0;
    while (ft_now_ns() < end) {
      int slot = (int)(sent % WINDOW);
      if (reqs[slot]) {
        int rc = wait_req(reqs[slot]);
        if (rc) die("sending", rc);
        done_bytes += MSG;
      }
      uint8_t *m = buf + (size_t)slot * MSG;
      m[0] = pattern(sent, 0);
      m[MSG - 1] = pattern(sent, MSG - 1);
      int rc = asr_isend(send, t, (size_t)slot * MSG, MSG, &reqs[slot]);
      if (rc) die("posting a send", rc);
      sent++;
    }
    for (int i = 0; i < WINDOW; i++)
      if (reqs[i] && wait_req(reqs[i]) == 0) done_bytes += MSG;
    double secs = (ft_now_ns() - t0) / 1e9;
    printf("ft_bench bw_MBps=%.1f messages=%llu\n", done_bytes / secs / 1e6, (unsigned long long)sent);
    /* the count, so the receiver knows when to stop */
    uint64_t *cnt = (uint64_t *)buf;
    *cnt = sent;
    asr_request_t *req;
    int rc = asr_isend(send, t, 0, 8, &req);
    if (rc == ASR_SUCCESS) rc = wait_req(req);
    if (rc) die("sending the count", rc);
  } else {
    asr_request_t *reqs[WINDOW] = {0};
    uint64_t got = 0, posted = 0, bad = 0;
    /* every message is MSG bytes, the count 8: a receive of MSG takes either
     * (size says which) */
    for (;;) {
      while (posted < got + WINDOW) {
        int slot = (int)(posted % WINDOW);
        int rc = asr_irecv(recv, t, (size_t)slot * MSG, MSG, &reqs[slot]);
        if (rc) die("posting a receive", rc);
        posted++;
      }
      int slot = (int)(got % WINDOW);
      int done = 0;
      size_t n = 0;
      int64_t until = ft_now_ns() + 10000000000LL;
      while (!done) {
        int rc = asr_test(reqs[slot], &done, &n);
        if (rc) die("receiving", rc);
        if (ft_now_ns() > until) die("a message did not come within 10 s", ASR_TIMEOUT);
      }
      const uint8_t *m = buf + (size_t)slot * MSG;
      if (n == 8) {
        uint64_t want;
        memcpy(&want, m, 8);
        printf("ft_bench rank 1 received %llu messages of %llu, %llu bad\n", (unsigned long long)got,
               (unsigned long long)want, (unsigned long long)bad);
        if (want != got || bad) return 1;
        break;
      }
      if (m[0] != pattern(got, 0) || m[MSG - 1] != pattern(got, MSG - 1)) bad++;
      got++;
    }
  }
  fflush(stdout);
  return asr_job_finalize() == ASR_SUCCESS ? 0 : 1;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (asr_job_init(&me) != ASR_SUCCESS) return 1;
  if (argc >= 2 && strcmp(argv[1], "detect") == 0)
    return detect(argc >= 3 && strcmp(argv[2], "stop-host") == 0);
  if (argc >= 4 && strcmp(argv[1], "bw") == 0) return bw(atoi(argv[2]), strcmp(argv[3], "kill") == 0);
  fprintf(stderr, "usage: ft_bench detect [stop-host] | bw MS kill|none\n");
  return 2;
}
