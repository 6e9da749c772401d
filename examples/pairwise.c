/*
 * pairwise -- the main demo job: every rank connects to every other rank
 * through libasr, moves verified data both ways, and rank 0 measures latency
 * and bandwidth to rank 1 (to each rank -p names, in turn).
 *
 *   asrrun -n 4 build/examples/pairwise [-s BYTES] [-n ITERS] [-p RANK]... [-v]
 *
 * -v prints, for each peer, the provider its SEND and RECV comms took
 * (asr_comm_provider: sm, asr's own path, to a peer on the same host,
 * tcp;ofi_rxm across).
 *
 * The quick start's job (scripts/quickstart.sh). Build it against an
 * installed asr with  cc pairwise.c $(pkg-config --cflags --libs asr)
 * Exits non-zero (so asrrun reports the rank) on any mismatch.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "asr.h"

static asr_job_info_t me;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *what, int st) {
  fprintf(stderr, "rank %d: %s failed: %s\n", me.rank, what, asr_strerror(st));
  exit(1);
}

static void wait_req(asr_request_t *r, size_t *size) {
  int done = 0;
  while (!done) {
    int st = asr_test(r, &done, size);
    if (st) die("asr_test", st);
  }
}

static unsigned char pattern(int src, int dst, size_t i) {
  return (unsigned char)(src * 37 + dst * 11 + i * 7);
}

int main(int argc, char **argv) {
  size_t bytes = 1 << 20;
  int iters = 1000, opt, verbose = 0, npeers = 0, peers[8];
  while ((opt = getopt(argc, argv, "s:n:p:v")) != -1) {
    if (opt == 's')
      bytes = strtoull(optarg, NULL, 0);
    else if (opt == 'n')
      iters = atoi(optarg);
    else if (opt == 'p' && npeers < 8 && atoi(optarg) > 0)
      peers[npeers++] = atoi(optarg);
    else if (opt == 'v')
      verbose = 1;
    else {
      fprintf(stderr,
              "usage: pairwise [-s BYTES] [-n ITERS] [-p RANK]... [-v]  (start it with asrrun -n N)\n");
      return 2;
    }
  }
  if (npeers == 0) peers[npeers++] = 1;
  if (bytes < 8 || iters < 1) {
    fprintf(stderr, "pairwise: -s wants at least 8 bytes and -n at least 1\n");
    return 2;
  }
  int st = asr_job_init(&me);
  if (st) return 1;
  int n = me.size;
  asr_comm_t **sc = calloc((size_t)n, sizeof *sc), **rc = calloc((size_t)n, sizeof *rc);
  double t0 = now_us();
  for (int p = 0; p < n; p++) {
    if (p == me.rank) continue;
    if ((st = asr_job_connect(p, &sc[p]))) die("asr_job_connect", st);
    if ((st = asr_job_accept(p, &rc[p]))) die("asr_job_accept", st);
  }
  for (int p = 0; p < n; p++) {
    if (p == me.rank) continue;
    if ((st = asr_comm_wait_connected(sc[p], 60000))) die("connecting a SEND comm", st);
    if ((st = asr_comm_wait_connected(rc[p], 60000))) die("connecting a RECV comm", st);
  }
  double t_conn = now_us() - t0;
  for (int p = 0; p < n && verbose; p++)
    if (p != me.rank)
      printf("rank %d (host %s) peer %d: send %s, recv %s\n", me.rank, me.hostname, p,
             asr_comm_provider(sc[p]), asr_comm_provider(rc[p]));

  /* Every ordered pair moves `bytes` with a pattern naming both ends. */
  asr_tensor_t *out, *in;
  if ((st = asr_tensor_alloc(bytes * (size_t)n, &out)) || (st = asr_tensor_alloc(bytes * (size_t)n, &in)))
    die("asr_tensor_alloc", st);
  unsigned char *o = asr_tensor_va(out), *i_ = asr_tensor_va(in);
  for (int p = 0; p < n; p++)
    for (size_t k = 0; k < bytes; k++) o[(size_t)p * bytes + k] = pattern(me.rank, p, k);
  asr_request_t **rq = calloc((size_t)n * 2, sizeof *rq);
  for (int p = 0; p < n; p++) {
    if (p == me.rank) continue;
    if ((st = asr_irecv(rc[p], in, (size_t)p * bytes, bytes, &rq[2 * p]))) die("asr_irecv", st);
    if ((st = asr_isend(sc[p], out, (size_t)p * bytes, bytes, &rq[2 * p + 1]))) die("asr_isend", st);
  }
  size_t verified = 0;
  for (int p = 0; p < n; p++) {
    if (p == me.rank) continue;
    size_t got = 0;
    wait_req(rq[2 * p], &got);
    wait_req(rq[2 * p + 1], NULL);
    if (got != bytes) {
      fprintf(stderr, "rank %d: got %zu bytes from rank %d, expected %zu\n", me.rank, got, p, bytes);
      return 1;
    }
    for (size_t k = 0; k < bytes; k++)
      if (i_[(size_t)p * bytes + k] != pattern(p, me.rank, k)) {
        fprintf(stderr, "rank %d: byte %zu from rank %d is wrong\n", me.rank, k, p);
        return 1;
      }
    verified += got;
  }
  printf("rank %d (host %s, lnc %d): connected to %d peers in %.1f ms, received %zu bytes, all verified\n",
         me.rank, me.hostname, me.lnc, n - 1, t_conn / 1e3, verified);
  fflush(stdout);
  asr_job_barrier();

  /* Rank 0 <-> each -p rank (1 by default), one after the other: 8-byte
   * ping-pong latency and windowed bandwidth. */
  for (int pi = 0; pi < npeers; pi++) {
    int other = peers[pi];
    /* one pair at a time: the next pair waits in the barrier, not spinning
     * in asr_test beside the pair being measured */
    if (pi > 0) asr_job_barrier();
    if (other >= n || (me.rank != 0 && me.rank != other)) continue;
    int peer = me.rank == 0 ? other : 0;
    asr_request_t *r;
    double t = 0;
    for (int k = -10; k < iters; k++) {
      if (k == 0) t = now_us();
      if (me.rank == 0) {
        memcpy(o, &k, sizeof k);
        if ((st = asr_isend(sc[peer], out, 0, 8, &r))) die("asr_isend", st);
        wait_req(r, NULL);
        if ((st = asr_irecv(rc[peer], in, 0, 8, &r))) die("asr_irecv", st);
        wait_req(r, NULL);
      } else {
        if ((st = asr_irecv(rc[peer], in, 0, 8, &r))) die("asr_irecv", st);
        wait_req(r, NULL);
        memcpy(o, i_, 8);
        if ((st = asr_isend(sc[peer], out, 0, 8, &r))) die("asr_isend", st);
        wait_req(r, NULL);
      }
      if (memcmp(i_, &k, sizeof k) != 0) {
        fprintf(stderr, "rank %d: ping-pong message %d corrupted\n", me.rank, k);
        return 1;
      }
    }
    double lat = (now_us() - t) / iters / 2;
    int win = n > 16 ? 16 : 16, rounds = 20;
    size_t chunk = bytes;
    asr_tensor_t *big;
    if ((st = asr_tensor_alloc(chunk * (size_t)win, &big))) die("asr_tensor_alloc", st);
    asr_request_t *w[16];
    t = now_us();
    for (int k = 0; k < rounds; k++) {
      for (int j = 0; j < win; j++) {
        st = me.rank == 0 ? asr_isend(sc[peer], big, (size_t)j * chunk, chunk, &w[j])
                          : asr_irecv(rc[peer], big, (size_t)j * chunk, chunk, &w[j]);
        if (st) die("windowed post", st);
      }
      for (int j = 0; j < win; j++) wait_req(w[j], NULL);
      st = me.rank == 0 ? asr_irecv(rc[peer], in, 0, 8, &r) : asr_isend(sc[peer], out, 0, 8, &r);
      if (st) die("ack", st);
      wait_req(r, NULL);
    }
    double bw = (double)chunk * win * rounds / (now_us() - t); /* bytes/us = MB/s */
    if (me.rank == 0)
      printf(
          "rank 0 <-> rank %d: one-way latency %.2f us (8 B, %d round trips), bandwidth %.0f MB/s "
          "(%zu-byte messages, window %d, provider %s)\n",
          other, lat, iters, bw, chunk, win, asr_comm_provider(sc[peer]));
    asr_tensor_free(big);
  }
  fflush(stdout);
  asr_job_barrier();
  for (int p = 0; p < n; p++) {
    if (sc[p]) asr_comm_close(sc[p]);
    if (rc[p]) asr_comm_close(rc[p]);
  }
  asr_tensor_free(out);
  asr_tensor_free(in);
  free(sc);
  free(rc);
  free(rq);
  asr_job_finalize();
  return 0;
}
