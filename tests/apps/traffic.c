/*
 * traffic.c -- two ranks that keep exchanging messages for a while, for the
 * live metrics' test (tests/python/test_metrics.py, asrrun --metrics-port):
 *
 *   traffic SECONDS [SIZE [STOPFILE]]
 *
 * Under asrrun -n 2: each rank connects to the other (a SEND comm and a
 * RECV comm), then rank 0 sends a message of SIZE bytes (default 4096) and
 * rank 1 sends it back, over and over. Once SECONDS have passed on rank 0,
 * its next message carries a stop mark in its first byte; rank 1 sends
 * that one back and stops, and so does rank 0 when it is back: both make
 * the same number of transfers and finalize cleanly. With STOPFILE, rank 0
 * also stops as soon as that file exists (the test's way to end it early
 * once it has seen what it wanted). Each prints how many
 * round trips it made. Exit status 0, 1 with a line on stderr when a call
 * failed or a message came back changed, 2 for bad arguments.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "asr.h"

static int rank = -1;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void die(const char *what, int rc) {
  fprintf(stderr, "traffic: rank %d: %s: %s\n", rank, what, asr_strerror(rc));
  exit(1);
}

/* Polls req until it completes (at most 60 s). */
static void wait_req(asr_request_t *req, const char *what) {
  uint64_t until = now_ms() + 60000;
  for (;;) {
    int done = 0;
    size_t size = 0;
    int rc = asr_test(req, &done, &size);
    if (rc != ASR_SUCCESS) die(what, rc);
    if (done) return;
    if (now_ms() > until) die(what, ASR_TIMEOUT);
  }
}

int main(int argc, char **argv) {
  char *end = NULL;
  long seconds = argc >= 2 ? strtol(argv[1], &end, 10) : -1;
  long size = argc >= 3 ? strtol(argv[2], NULL, 10) : 4096;
  const char *stopfile = argc >= 4 ? argv[3] : NULL;
  if (argc < 2 || argc > 4 || *end || seconds < 0 || size < 1 || size > (1 << 24)) {
    fprintf(stderr, "usage: traffic SECONDS [SIZE [STOPFILE]]\n");
    return 2;
  }
  asr_job_info_t info;
  int rc = asr_job_init(&info);
  if (rc) die("asr_job_init", rc);
  rank = info.rank;
  if (info.size != 2) {
    fprintf(stderr, "traffic: run it with 2 ranks, not %d\n", info.size);
    return 2;
  }
  int peer = 1 - rank;
  asr_comm_t *sc, *rcomm;
  /* rank 0 connects first and rank 1 accepts first: neither waits for the other's other half */
  if (rank == 0) {
    if ((rc = asr_job_connect(peer, &sc))) die("asr_job_connect", rc);
    if ((rc = asr_job_accept(peer, &rcomm))) die("asr_job_accept", rc);
  } else {
    if ((rc = asr_job_accept(peer, &rcomm))) die("asr_job_accept", rc);
    if ((rc = asr_job_connect(peer, &sc))) die("asr_job_connect", rc);
  }
  if ((rc = asr_comm_wait_connected(sc, 30000))) die("asr_comm_wait_connected (send)", rc);
  if ((rc = asr_comm_wait_connected(rcomm, 30000))) die("asr_comm_wait_connected (recv)", rc);
  asr_tensor_t *sbuf, *rbuf;
  if ((rc = asr_tensor_alloc((size_t)size, &sbuf)) || (rc = asr_tensor_alloc((size_t)size, &rbuf)))
    die("asr_tensor_alloc", rc);
  uint8_t *s = asr_tensor_va(sbuf), *r = asr_tensor_va(rbuf);
  memset(s, 0, (size_t)size);
  uint64_t until = now_ms() + (uint64_t)seconds * 1000u;
  long trips = 0;
  for (int stop = 0; !stop; trips++) {
    asr_request_t *req;
    if (rank == 0) {
      /* the stop file is looked for every 256th trip: a stat() each trip would cost more than the trip */
      s[0] = now_ms() >= until || (stopfile && trips % 256 == 0 && access(stopfile, F_OK) == 0);
      s[1] = (uint8_t)trips;
      if ((rc = asr_isend(sc, sbuf, 0, (size_t)size, &req))) die("asr_isend", rc);
      wait_req(req, "a send");
      if ((rc = asr_irecv(rcomm, rbuf, 0, (size_t)size, &req))) die("asr_irecv", rc);
      wait_req(req, "a receive");
      if (r[0] != s[0] || r[1] != s[1]) {
        fprintf(stderr, "traffic: rank 0: round trip %ld came back changed\n", trips);
        return 1;
      }
      stop = r[0];
    } else {
      if ((rc = asr_irecv(rcomm, rbuf, 0, (size_t)size, &req))) die("asr_irecv", rc);
      wait_req(req, "a receive");
      memcpy(s, r, (size_t)size);
      if ((rc = asr_isend(sc, sbuf, 0, (size_t)size, &req))) die("asr_isend", rc);
      wait_req(req, "a send");
      stop = r[0];
    }
  }
  printf("traffic: rank %d: %ld round trips\n", rank, trips);
  fflush(stdout);
  asr_tensor_free(sbuf);
  asr_tensor_free(rbuf);
  if ((rc = asr_job_finalize())) die("asr_job_finalize", rc);
  return 0;
}
