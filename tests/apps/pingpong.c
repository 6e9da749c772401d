/*
 * pingpong -- latency and bandwidth between two LNCs through libasr, every
 * payload checked.
 *
 *   pingpong -l LNC -p PEER_LNC [-a PEER_IP] [-r 0|1] [-s MIN] [-S MAX]
 *            [-n ITERS] [-w WINDOW] [-m lat|bw|rate|all]
 *
 * Rank 0 starts each exchange, rank 1 answers. Needs ASR_BOOTSTRAP_PORT.
 * Each side opens a SEND comm to the peer and a RECV comm from it. Every
 * message carries an 8-byte stamp (iteration and size) that the receiver
 * checks; the whole payload is compared byte for byte on the first and last
 * message of every size. Rank 0 prints one line per size and mode:
 *   lat  SIZE  one-way-usec
 *   bw   SIZE  MB/s        (window of W sends in flight; bench_bw_windows says how many)
 *   rate 8     msgs/s      (W 8-byte sends in flight)
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr.h"
#include "asr_time.h"
#include "bench_util.h"

static int rank = 0, iters = 1000, window = 64;
static asr_comm_t *sc, *rc;
static asr_tensor_t *sbuf, *rbuf;
static size_t maxsz;
static unsigned long errors;

static void die(const char *what, int st) {
  fprintf(stderr, "pingpong rank %d: %s: %s\n", rank, what, asr_strerror(st));
  exit(1);
}

static void wait_req(asr_request_t *r, size_t *size) {
  int done = 0;
  size_t sz = 0;
  while (!done) {
    int st = asr_test(r, &done, &sz);
    if (st) die("asr_test", st);
  }
  if (size) *size = sz;
}

static void check(const unsigned char *p, size_t size, uint64_t stamp, int full, size_t got) {
  if (got != size) {
    fprintf(stderr, "pingpong rank %d: received %zu bytes, expected %zu\n", rank, got, size);
    errors++;
    return;
  }
  if (!bench_stamp_ok(p, size, stamp)) {
    fprintf(stderr, "pingpong rank %d: wrong stamp in a %zu-byte message\n", rank, size);
    errors++;
  }
  if (full)
    for (size_t i = size >= 8 ? 8 : 1; i < size; i++)
      if (p[i] != (unsigned char)((i * 131 + size) & 0xff)) {
        fprintf(stderr, "pingpong rank %d: byte %zu of a %zu-byte message differs\n", rank, i, size);
        errors++;
        return;
      }
}

static double run_lat(size_t size, int n) {
  unsigned char *s = asr_tensor_va(sbuf), *r = asr_tensor_va(rbuf);
  bench_fill(s, size, 0, 1);
  uint64_t t0 = 0;
  for (int i = -10; i < n; i++) { /* 10 warm-up rounds */
    if (i == 0) t0 = asr_time_ns();
    int full = i == -10; /* the last round's every byte is checked once the clock has stopped */
    uint64_t stamp = bench_lat_stamp(i, size);
    asr_request_t *q;
    size_t got;
    if (rank == 0) {
      bench_fill(s, size, stamp, full);
      int st = asr_isend(sc, sbuf, 0, size, &q);
      if (st) die("asr_isend", st);
      wait_req(q, NULL);
      if ((st = asr_irecv(rc, rbuf, 0, size, &q))) die("asr_irecv", st);
      wait_req(q, &got);
      check(r, size, stamp, full, got);
    } else {
      int st = asr_irecv(rc, rbuf, 0, size, &q);
      if (st) die("asr_irecv", st);
      wait_req(q, &got);
      check(r, size, stamp, full, got);
      bench_fill(s, size, stamp, full);
      if ((st = asr_isend(sc, sbuf, 0, size, &q))) die("asr_isend", st);
      wait_req(q, NULL);
    }
  }
  double us = (double)(asr_time_ns() - t0) / 1e3 / n / 2.0;
  check(r, size, bench_lat_stamp(n - 1, size), 1, size); /* the last message received */
  return us;
}

/* Window of w messages of size; returns seconds for n windows. */
static double run_bw(size_t size, int n, int w) {
  unsigned char *s = asr_tensor_va(sbuf), *r = asr_tensor_va(rbuf);
  asr_request_t *q[ASR_MAX_REQUESTS];
  uint64_t t0 = 0;
  for (int k = 0; k < w; k++) bench_fill(s + (size_t)k * size, size, 0, 1);
  for (int i = -2; i < n; i++) {
    if (i == 0) t0 = asr_time_ns();
    /* Every byte of the first window is checked here and of the last once
     * the clock has stopped: at the largest sizes a byte loop over a whole
     * window takes about as long as the few windows timed, so inside the
     * clock it would be what the figure measured. */
    int full = i == -2;
    for (int k = 0; k < w; k++) {
      uint64_t stamp = bench_bw_stamp(i, k, size);
      int st = rank == 0 ? (bench_fill(s + (size_t)k * size, size, stamp, 0),
                            asr_isend(sc, sbuf, (size_t)k * size, size, &q[k]))
                         : asr_irecv(rc, rbuf, (size_t)k * size, size, &q[k]);
      if (st) die(rank == 0 ? "asr_isend" : "asr_irecv", st);
    }
    for (int k = 0; k < w; k++) {
      size_t got;
      wait_req(q[k], &got);
      if (rank == 1) {
        uint64_t stamp = bench_bw_stamp(i, k, size);
        check(r + (size_t)k * size, size, stamp, full, got);
      }
    }
    /* 1-byte ack closes the window */
    asr_request_t *a;
    int st = rank == 0 ? asr_irecv(rc, rbuf, 0, 1, &a) : asr_isend(sc, sbuf, 0, 1, &a);
    if (st) die("ack", st);
    wait_req(a, NULL);
  }
  double secs = (double)(asr_time_ns() - t0) / 1e9;
  if (rank == 1)
    for (int k = 0; k < w; k++) check(r + (size_t)k * size, size, bench_bw_stamp(n - 1, k, size), 1, size);
  return secs;
}

int main(int argc, char **argv) {
  int lnc = -1, peer = -1, opt;
  const char *peer_ip = "127.0.0.1", *mode = "all";
  size_t minsz = 1;
  maxsz = 4u << 20;
  while ((opt = getopt(argc, argv, "l:p:a:r:s:S:n:w:m:h")) != -1) {
    switch (opt) {
      case 'l': lnc = atoi(optarg); break;
      case 'p': peer = atoi(optarg); break;
      case 'a': peer_ip = optarg; break;
      case 'r': rank = atoi(optarg); break;
      case 's': minsz = strtoull(optarg, NULL, 0); break;
      case 'S': maxsz = strtoull(optarg, NULL, 0); break;
      case 'n': iters = atoi(optarg); break;
      case 'w': window = atoi(optarg); break;
      case 'm': mode = optarg; break;
      default:
        fprintf(stderr,
                "usage: pingpong -l LNC -p PEER_LNC [-a PEER_IP] [-r 0|1] [-s MIN] [-S MAX] [-n ITERS] [-w "
                "WINDOW] [-m lat|bw|rate|all]\n");
        return 2;
    }
  }
  if (lnc < 0 || peer < 0 || (rank != 0 && rank != 1) || minsz < 1 || maxsz < minsz || iters < 1 ||
      window < 1 || window > 120) {
    fprintf(stderr,
            "pingpong: need -l LNC and -p PEER_LNC (0..127), -r 0|1, 1 <= -s <= -S, -n >= 1, -w 1..120\n");
    return 2;
  }
  int st = asr_init(lnc);
  if (st) die("asr_init", st);
  if ((st = asr_connect(lnc, peer_ip, peer, &sc))) die("asr_connect", st);
  if ((st = asr_accept(lnc, peer_ip, peer, &rc))) die("asr_accept", st);
  if ((st = asr_comm_wait_connected(sc, 60000))) die("SEND comm", st);
  if ((st = asr_comm_wait_connected(rc, 60000))) die("RECV comm", st);
  size_t need = maxsz * (size_t)window;
  if ((st = asr_tensor_alloc(need, &sbuf)) || (st = asr_tensor_alloc(need, &rbuf)))
    die("asr_tensor_alloc", st);
  int do_lat = !strcmp(mode, "lat") || !strcmp(mode, "all");
  int do_bw = !strcmp(mode, "bw") || !strcmp(mode, "all");
  int do_rate = !strcmp(mode, "rate") || !strcmp(mode, "all");
  if (do_lat) run_lat(minsz, bench_warmup_rounds(minsz, iters)); /* untimed (bench_util.h) */
  for (size_t sz = minsz; sz <= maxsz && do_lat; sz *= 2) {
    int n = bench_lat_rounds(sz, iters);
    double us = run_lat(sz, n);
    if (rank == 0) printf("lat %zu %.3f\n", sz, us);
  }
  for (size_t sz = minsz; sz <= maxsz && do_bw; sz *= 2) {
    int n = bench_bw_windows(sz, window);
    double secs = run_bw(sz, n, window);
    if (rank == 0) printf("bw %zu %.3f\n", sz, (double)sz * window * n / secs / 1e6);
  }
  if (do_rate) {
    int w = window > 120 ? 120 : window;
    double secs = run_bw(8, iters / 10 > 10 ? iters / 10 : 10, w);
    if (rank == 0) printf("rate 8 %.0f\n", (double)w * (iters / 10 > 10 ? iters / 10 : 10) / secs);
  }
  fflush(stdout);
  /* a last exchange so neither side closes while the other still needs it */
  run_lat(1, 1);
  asr_comm_close(sc);
  asr_comm_close(rc);
  asr_tensor_free(sbuf);
  asr_tensor_free(rbuf);
  asr_close(lnc);
  if (errors) {
    fprintf(stderr, "pingpong rank %d: %lu payload errors\n", rank, errors);
    return 1;
  }
  return 0;
}
