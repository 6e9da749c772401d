/*
 * trace_job -- a job whose transfers are known, for the trace's tests
 * (issue 52, tests/python/test_trace.py): what it did is printed, so that
 * the merged trace can be checked against it.
 *
 *   asrrun --trace F -n N trace_job [-m MSGS] [-s BYTES] [-d DELAY_MS] [-k KILL_AFTER] [-h HOLD_S] [-E]
 *
 * Every rank connects to every other (asr_job_connect / asr_job_accept)
 * and sends MSGS messages of BYTES to each peer, receiving as many from
 * each; every payload is checked byte for byte. Then ranks 0 and 1 do the
 * delayed exchange (-d): rank 0 posts MSGS receives from rank 1 at once,
 * says so (one 8-byte message), and rank 1 then sends message i at
 * DELAY_MS * (i + 1) after it heard that; rank 0 prints each receive's
 * own post-to-completion time, measured around its asr_irecv and the
 * asr_test that saw it done:
 *   delayed i US
 * so each is at least DELAY_MS * (i + 1) ms and at least the trace's.
 * -E: no exchange (the delayed one alone, then).
 * -R: after the exchange, every comm is closed and made again, and each
 *     rank says "rank R: reconnected" (the metrics tests: the closed
 *     comms' counts must stay in the scrapes).
 * -k: rank 1 raises SIGKILL once KILL_AFTER sends of its exchange with
 * rank 0 have completed (the others go on, and fail as the peer dies).
 * -h: every rank sends 8-byte messages round the ring, one every 5 ms,
 * HOLD_S seconds' worth, before it ends (the metrics tests scrape meanwhile).
 * Each rank prints "rank R: sent S messages (B bytes), received S2 (B2)".
 */
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "asr.h"

static asr_job_info_t me;
static unsigned long long nsent, bsent, nrecv, brecv;

static void check(int st, const char *what) {
  if (st == 0) return;
  fprintf(stderr, "rank %d: %s: %s\n", me.rank, what, asr_strerror(st));
  exit(1);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static unsigned char pat(int from, int to, int i, size_t k) {
  return (unsigned char)(from * 31 + to * 7 + i + k);
}

static size_t wait_req(asr_request_t *r, const char *what) {
  int done = 0;
  size_t got = 0;
  while (!done) check(asr_test(r, &done, &got), what);
  return got;
}

/* A SEND and a RECV comm with every other rank, all connected; then says
 * so ("rank R: WHAT"). */
static void connect_all(asr_comm_t **sc, asr_comm_t **rc, int n, const char *what) {
  for (int p = 0; p < n; p++) {
    if (p == me.rank) continue;
    check(asr_job_connect(p, &sc[p]), "asr_job_connect");
    check(asr_job_accept(p, &rc[p]), "asr_job_accept");
  }
  for (int p = 0; p < n; p++)
    if (p != me.rank) {
      check(asr_comm_wait_connected(sc[p], 60000), "connect");
      check(asr_comm_wait_connected(rc[p], 60000), "accept");
    }
  printf("rank %d: %s\n", me.rank, what);
  fflush(stdout);
}

int main(int argc, char **argv) {
  int msgs = 4, delay_ms = 0, kill_after = -1, hold_s = 0, exchange = 1, reconnect = 0, opt;
  size_t bytes = 4096;
  while ((opt = getopt(argc, argv, "m:s:d:k:h:ER")) != -1) {
    switch (opt) {
      case 'm': msgs = atoi(optarg); break;
      case 's': bytes = (size_t)strtoul(optarg, NULL, 10); break;
      case 'd': delay_ms = atoi(optarg); break;
      case 'k': kill_after = atoi(optarg); break;
      case 'h': hold_s = atoi(optarg); break;
      case 'E': exchange = 0; break;
      case 'R': reconnect = 1; break;
      default:
        fprintf(
            stderr,
            "usage: trace_job [-m MSGS] [-s BYTES] [-d DELAY_MS] [-k KILL_AFTER] [-h HOLD_S] [-E] [-R]\n");
        return 2;
    }
  }
  if (msgs < 1 || msgs > 128 || bytes < 8 || bytes > (64u << 20)) {
    fprintf(stderr, "trace_job: -m wants 1..128 and -s 8..64 MiB\n");
    return 2;
  }
  check(asr_job_init(&me), "asr_job_init");
  int n = me.size;
  asr_comm_t **sc = calloc((size_t)n, sizeof *sc), **rc = calloc((size_t)n, sizeof *rc);
  unsigned char *sb = malloc(bytes * (size_t)msgs), *rb = malloc(bytes * (size_t)msgs);
  if (!sc || !rc || !sb || !rb) return 1;
  asr_tensor_t *st, *rt;
  check(asr_tensor_wrap(sb, bytes * (size_t)msgs, &st), "asr_tensor_wrap");
  check(asr_tensor_wrap(rb, bytes * (size_t)msgs, &rt), "asr_tensor_wrap");
  connect_all(sc, rc, n, "connected");
  /* the exchange: MSGS to each peer, MSGS from each */
  asr_request_t **rq = calloc((size_t)msgs * 2, sizeof *rq);
  if (!rq) return 1;
  for (int d = 1; exchange && d < n; d++) {
    int to = (me.rank + d) % n, from = (me.rank - d + n) % n;
    for (int i = 0; i < msgs; i++) {
      for (size_t k = 0; k < bytes; k++) sb[(size_t)i * bytes + k] = pat(me.rank, to, i, k);
      check(asr_irecv(rc[from], rt, (size_t)i * bytes, bytes, &rq[2 * i]), "asr_irecv");
      check(asr_isend(sc[to], st, (size_t)i * bytes, bytes, &rq[2 * i + 1]), "asr_isend");
    }
    for (int i = 0; i < msgs; i++) {
      size_t got = wait_req(rq[2 * i], "recv");
      wait_req(rq[2 * i + 1], "send");
      nsent++, bsent += bytes, nrecv++, brecv += got;
      for (size_t k = 0; k < bytes; k++)
        if (rb[(size_t)i * bytes + k] != pat(from, me.rank, i, k)) {
          fprintf(stderr, "rank %d: byte %zu of message %d from rank %d is wrong\n", me.rank, k, i, from);
          return 1;
        }
      if (kill_after >= 0 && me.rank == 1 && to == 0 && (int)nsent >= kill_after) {
        printf("rank 1: killing itself after %llu sends\n", nsent);
        fflush(stdout);
        raise(SIGKILL);
      }
    }
  }
  if (reconnect) {
    for (int p = 0; p < n; p++) {
      if (p == me.rank) continue;
      asr_comm_close(sc[p]);
      asr_comm_close(rc[p]);
    }
    connect_all(sc, rc, n, "reconnected");
  }
  /* the delayed exchange, rank 1 -> rank 0 */
  if (delay_ms > 0 && n >= 2 && me.rank < 2) {
    if (me.rank == 0) {
      double t0[128];
      for (int i = 0; i < msgs; i++) {
        t0[i] = now_us();
        check(asr_irecv(rc[1], rt, (size_t)i * 8, 8, &rq[i]), "asr_irecv");
      }
      asr_request_t *go;
      check(asr_isend(sc[1], st, 0, 8, &go), "asr_isend");
      wait_req(go, "go");
      nsent++, bsent += 8;
      for (int i = 0; i < msgs; i++) {
        int done = 0;
        size_t got = 0;
        while (!done) check(asr_test(rq[i], &done, &got), "delayed recv");
        printf("delayed %d %.3f\n", i, now_us() - t0[i]);
        nrecv++, brecv += got;
      }
    } else {
      asr_request_t *go;
      check(asr_irecv(rc[0], rt, 0, 8, &go), "asr_irecv");
      wait_req(go, "go");
      nrecv++, brecv += 8;
      double t = now_us();
      for (int i = 0; i < msgs; i++) {
        while (now_us() < t + (double)delay_ms * 1000.0 * (i + 1)) usleep(200);
        asr_request_t *r;
        check(asr_isend(sc[0], st, (size_t)i * 8, 8, &r), "asr_isend");
        wait_req(r, "delayed send");
        nsent++, bsent += 8;
      }
    }
  }
  /* -h: 8-byte messages round the ring, one every 5 ms, HOLD_S seconds'
   * worth (a count, the same at every rank: the ring ends as one) */
  if (hold_s > 0 && n >= 2) {
    int to = (me.rank + 1) % n, from = (me.rank - 1 + n) % n;
    for (int k = 0; k < hold_s * 200; k++) {
      asr_request_t *r, *s;
      check(asr_irecv(rc[from], rt, 0, 8, &r), "asr_irecv");
      check(asr_isend(sc[to], st, 0, 8, &s), "asr_isend");
      wait_req(s, "hold send");
      wait_req(r, "hold recv");
      nsent++, bsent += 8, nrecv++, brecv += 8;
      usleep(5000);
    }
  }
  printf("rank %d: sent %llu messages (%llu bytes), received %llu (%llu)\n", me.rank, nsent, bsent, nrecv,
         brecv);
  fflush(stdout);
  for (int p = 0; p < n; p++)
    if (p != me.rank) {
      asr_comm_close(sc[p]);
      asr_comm_close(rc[p]);
    }
  asr_tensor_free(st);
  asr_tensor_free(rt);
  check(asr_job_finalize(), "asr_job_finalize");
  return 0;
}
