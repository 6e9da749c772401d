/*
 * asr_rma_bench -- the libasr side of tests/bench/rma_bench.sh: one-sided
 * transfers through asr.h's API (issue 51), in the patterns of the raw
 * libfabric baseline tests/bench/ofi_rma_raw.c, and asr's two-sided
 * isend/irecv at the same sizes beside them.
 *
 *   asr_rma_bench [-m lat|wbw|rbw|batch|prep|slat|sbw|all] [-z SIZES] [-n ITERS] [-w WINDOW]
 *                 [-N MAX_WINDOWS] [-b BATCHES] [-r PREP_REPS] [-l LNC0] [-t TIMEOUT_S]
 *
 * Two ranks (LNC0 and LNC0 + 1, one forked process each, asr_launch.h).
 * Each opens a SEND comm to the other and a RECV comm from it, allocates a
 * local tensor (the source of its writes, the destination of its reads)
 * and a target tensor, registers the target tensor's memory on its LNC for
 * remote reads and writes (asr_mem_register), exports the descriptor and
 * sends it to the peer with asr_isend on its SEND comm (the comm the other
 * way from the one the peer writes on); the peer receives it on its RECV
 * comm and imports it on its SEND comm (asr_mem_import). Then, for each
 * size of -z (default rma_util.h's RMA_DEFAULT_SIZES), the modes (-m; all:
 * every one) run the patterns of ofi_rma_raw with the same stamps, checks,
 * round and window counts:
 *   lat   asr_write with ASR_WRITE_NOTIFY ping-pong: the owner takes the
 *         notification with asr_notif_poll on its RECV comm from the writer,
 *         checks the stamps and writes back the same way; a round ends for
 *         each rank when its write's request has completed and the peer's
 *         notification has come. One-way = round trip / 2. The notification
 *         delivery latency: the time from the first poll that saw the
 *         message's stamps in memory to the asr_notif_poll that returned the
 *         notification (rank 0's median).
 *   wbw   WINDOW asr_write's to distinct offsets, the last with
 *         ASR_WRITE_NOTIFY; the owner checks every message's stamps after
 *         the notification and acknowledges with an 8-byte asr_isend.
 *   rbw   WINDOW asr_read's; the owner makes no asr call but for the
 *         asr_test of the receive of rank 0's closing message (its service
 *         thread serves the reads).
 *   batch rma_util.h's batch rows (256 x 1 KiB, 1,024 x 4 KiB): one
 *         asr_xfer_prep of the list (untimed), then per batch one
 *         asr_xfer_post with the notification after all of its data; a
 *         batch takes from the post until the later of the notification
 *         (the owner sends the time it took it back) and the request's
 *         completion; the median of BATCHES.
 *   prep  the time of asr_xfer_prep of RMA_PREP_ENTRIES (15,000) writes of
 *         RMA_PREP_SIZE (4 KiB) into distinct offsets: the median of
 *         PREP_REPS (default 5) preps, each list freed untimed; then one post
 *         of the list, whose every entry the owner checks.
 *   slat  two-sided ping-pong at each size: asr_isend / asr_irecv (each
 *         rank's receive posted before the peer's message is sent).
 *   sbw   two-sided window: WINDOW asr_isend's, then an 8-byte
 *         acknowledgement.
 *
 * Between sizes and modes the ranks settle as ofi_rma_raw's do (an 8-byte
 * message from rank 1 once it is done with its target tensor).
 *
 * Output (rank 0), one line per row, ofi_rma_raw's and three more:
 *   wlat  SIZE  one-way usec
 *   notif SIZE  usec
 *   wbw   SIZE  MB/s
 *   rbw   SIZE  MB/s
 *   batch COUNT SIZE GB/s usec
 *   prep  ENTRIES SIZE ms
 *   slat  SIZE  one-way usec
 *   sbw   SIZE  MB/s
 *
 * Environment: ASR_PROVIDER (shm or 'tcp;ofi_rxm'; unset: libasr's own
 * path between two ranks of one host, sm); without ASR_BOOTSTRAP_PORT /
 * ASR_KV_LOCK_DIR a free port / private lock directory is used
 * (asr_launch.h). BENCH_PIN=1 pins rank r to the r-th allowed CPU. Exits
 * non-zero on any failure or wrong payload.
 */
#include "config.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr.h"
#include "asr_launch.h"
#include "rma_util.h"

#define MAXW 120                        /* a window and its acknowledgement within the comm's 128 requests */
#define DESC_MSG (8 + ASR_MEM_DESC_MAX) /* a descriptor message: its length, then the descriptor */
#define CTL_OUT 0                       /* the control tensor: 8-byte messages out, */
#define CTL_IN 64                       /* in, */
#define DESC_OUT 128                    /* the descriptor out */
#define DESC_IN (DESC_OUT + DESC_MSG)   /* and in */
#define CTL_SIZE (DESC_IN + DESC_MSG)

typedef struct {
  const char *mode;
  size_t sizes[RMA_MAX_SIZES];
  int nsizes, iters, window, max_windows, batches, prep_reps, lnc0;
} opts_t;

/* One rank's state: its comms, tensors (and their addresses), its
 * registration and the peer's import. */
typedef struct {
  int rank;
  asr_comm_t *sc, *rc; /* SEND comm to the peer, RECV comm from it */
  asr_tensor_t *lt, *tt, *ct;
  unsigned char *lv, *tv, *cv;
  asr_mem_t *mem;
  asr_rmem_t *rmem; /* the peer's target tensor, imported on sc */
  unsigned long errors;
} rank_t;

static int fail(const rank_t *r, const char *what, int st) {
  fprintf(stderr, "asr_rma_bench rank %d: %s: %s\n", r->rank, what, asr_strerror(st));
  return -1;
}

static int wait_req(rank_t *r, asr_request_t *q, size_t *got) {
  int done = 0;
  size_t sz = 0;
  while (!done) {
    int st = asr_test(q, &done, &sz);
    if (st) return fail(r, "asr_test", st);
  }
  if (got) *got = sz;
  return 0;
}

static void check(rank_t *r, const unsigned char *p, size_t size, uint64_t stamp, int full,
                  const char *what) {
  size_t bad = rma_check(p, size, stamp, full);
  if (bad) {
    fprintf(stderr, "asr_rma_bench rank %d: %s: byte %zu of a %zu-byte message differs\n", r->rank, what,
            bad - 1, size);
    r->errors++;
  }
}

/* 8-byte control messages: out on the SEND comm, in on the RECV comm. */
static int ctl_send(rank_t *r, uint64_t v, asr_request_t **q) {
  memcpy(r->cv + CTL_OUT, &v, 8);
  int st = asr_isend(r->sc, r->ct, CTL_OUT, 8, q);
  return st ? fail(r, "asr_isend", st) : 0;
}
static int ctl_recv(rank_t *r, asr_request_t **q) {
  int st = asr_irecv(r->rc, r->ct, CTL_IN, 8, q);
  return st ? fail(r, "asr_irecv", st) : 0;
}
static uint64_t ctl_value(const rank_t *r) {
  uint64_t v;
  memcpy(&v, r->cv + CTL_IN, 8);
  return v;
}

/* Rank 1 tells rank 0 that it is done with its target tensor (it checked
 * what was written there, or it filled what rank 0 is to read): until then
 * rank 0 does not touch it. */
static int settle(rank_t *r, uint64_t v) {
  asr_request_t *a;
  if (r->rank == 1) return ctl_send(r, v, &a) || wait_req(r, a, NULL) ? -1 : 0;
  if (ctl_recv(r, &a) || wait_req(r, a, NULL)) return -1;
  return ctl_value(r) == v ? 0 : fail(r, "a wrong settling message", ASR_INVALID);
}

/* Waits for the next notification on the RECV comm, which must be expect;
 * *t_ns: when asr_notif_poll returned it. With p, the message it rides on
 * is at p: its stamps are watched while waiting, and *deliver_ns is the
 * time from the poll that first saw them to the notification. */
static int wait_notif(rank_t *r, uint64_t expect, const unsigned char *p, size_t size, uint64_t *t_ns,
                      uint64_t *deliver_ns) {
  uint64_t t_data = 0, v = 0;
  int n = 0;
  for (;;) {
    if (p && !t_data && rma_landed(p, size, expect)) t_data = launch_now_ns();
    int st = asr_notif_poll(r->rc, &v, 1, &n);
    if (st) return fail(r, "asr_notif_poll", st);
    if (n) break;
  }
  uint64_t t = launch_now_ns();
  if (v != expect) {
    fprintf(stderr, "asr_rma_bench rank %d: notification 0x%llx, expected 0x%llx\n", r->rank,
            (unsigned long long)v, (unsigned long long)expect);
    r->errors++;
  }
  if (p) {
    if (!t_data) {
      if (!rma_landed(p, size, expect)) {
        fprintf(stderr, "asr_rma_bench rank %d: a notification came before its %zu bytes\n", r->rank, size);
        r->errors++;
      }
      t_data = t;
    }
    if (deliver_ns) *deliver_ns = t - t_data;
  }
  if (t_ns) *t_ns = t;
  return 0;
}

static int write1(rank_t *r, size_t loff, size_t len, size_t roff, uint64_t notif, unsigned flags,
                  asr_request_t **q) {
  int st = asr_write(r->sc, r->lt, loff, len, r->rmem, roff, notif, flags, q);
  return st ? fail(r, "asr_write", st) : 0;
}

/* --- one-sided rows ---------------------------------------------------------- */

static int run_lat(rank_t *r, size_t size, int n, double *us, double *notif_us) {
  double *dl = calloc((size_t)n, sizeof *dl);
  if (!dl) return -1;
  uint64_t t0 = 0;
  rma_fill(r->lv, size, 0, 1);
  for (int i = -10; i < n; i++) {
    if (i == 0) t0 = launch_now_ns();
    int full = i == -10; /* the last round's every byte is checked once the clock has stopped */
    uint64_t stamp = bench_lat_stamp(i, size), d = 0;
    asr_request_t *q;
    /* a rank checks the peer's message before it writes back: once it
     * has, the peer may write the next one over it */
    if (r->rank == 0) {
      rma_fill(r->lv, size, stamp, full);
      if (write1(r, 0, size, 0, stamp, ASR_WRITE_NOTIFY, &q) || wait_notif(r, stamp, r->tv, size, NULL, &d))
        return -1;
      check(r, r->tv, size, stamp, full, "lat");
      if (wait_req(r, q, NULL)) return -1;
    } else {
      if (wait_notif(r, stamp, r->tv, size, NULL, &d)) return -1;
      check(r, r->tv, size, stamp, full, "lat");
      rma_fill(r->lv, size, stamp, full);
      if (write1(r, 0, size, 0, stamp, ASR_WRITE_NOTIFY, &q) || wait_req(r, q, NULL)) return -1;
    }
    if (i >= 0) dl[i] = (double)d / 1e3;
  }
  *us = (double)(launch_now_ns() - t0) / 1e3 / n / 2.0;
  check(r, r->tv, size, bench_lat_stamp(n - 1, size), 1, "lat"); /* the last message received */
  *notif_us = rma_median(dl, n);
  free(dl);
  return settle(r, size);
}

static int run_wbw(rank_t *r, size_t size, int n, int w, double *secs) {
  asr_request_t *q[MAXW], *a;
  uint64_t t0 = 0;
  for (int k = 0; k < w; k++) rma_fill(r->lv + (size_t)k * size, size, 0, 1);
  for (int i = -2; i < n; i++) {
    if (i == 0) t0 = launch_now_ns();
    uint64_t last = bench_bw_stamp(i, w - 1, size);
    if (r->rank == 0) {
      if (ctl_recv(r, &a)) return -1;
      for (int k = 0; k < w; k++) {
        rma_fill(r->lv + (size_t)k * size, size, bench_bw_stamp(i, k, size), 0);
        if (write1(r, (size_t)k * size, size, (size_t)k * size, last, k == w - 1 ? ASR_WRITE_NOTIFY : 0,
                   &q[k]))
          return -1;
      }
      for (int k = 0; k < w; k++)
        if (wait_req(r, q[k], NULL)) return -1;
      if (wait_req(r, a, NULL)) return -1;
      if (ctl_value(r) != last) return fail(r, "wbw: wrong acknowledgement", ASR_INVALID);
    } else {
      if (wait_notif(r, last, NULL, size, NULL, NULL)) return -1;
      /* the last window's whole payloads are checked after its
       * acknowledgement, outside the clock */
      for (int k = 0; k < w; k++)
        check(r, r->tv + (size_t)k * size, size, bench_bw_stamp(i, k, size), i == -2, "wbw");
      if (ctl_send(r, last, &a) || wait_req(r, a, NULL)) return -1;
    }
  }
  *secs = (double)(launch_now_ns() - t0) / 1e9;
  if (r->rank == 1)
    for (int k = 0; k < w; k++)
      check(r, r->tv + (size_t)k * size, size, bench_bw_stamp(n - 1, k, size), 1, "wbw");
  return settle(r, size);
}

static int run_rbw(rank_t *r, size_t size, int n, int w, double *secs) {
  asr_request_t *q[MAXW], *a;
  uint64_t t0 = 0;
  if (r->rank == 1) {
    for (int k = 0; k < w; k++) rma_fill(r->tv + (size_t)k * size, size, bench_bw_stamp(0, k, size), 1);
    if (settle(r, size) || ctl_recv(r, &a) || wait_req(r, a, NULL)) return -1;
    if (ctl_value(r) != (uint64_t)size) return fail(r, "rbw: wrong closing message", ASR_INVALID);
    return 0;
  }
  if (settle(r, size)) return -1;
  for (int i = -2; i < n; i++) {
    if (i == 0) t0 = launch_now_ns();
    for (int k = 0; k < w; k++) {
      rma_clear(r->lv + (size_t)k * size, size);
      int st = asr_read(r->sc, r->lt, (size_t)k * size, size, r->rmem, (size_t)k * size, &q[k]);
      if (st) return fail(r, "asr_read", st);
    }
    for (int k = 0; k < w; k++)
      if (wait_req(r, q[k], NULL)) return -1;
    for (int k = 0; k < w; k++)
      check(r, r->lv + (size_t)k * size, size, bench_bw_stamp(0, k, size), i == -2, "rbw");
  }
  *secs = (double)(launch_now_ns() - t0) / 1e9;
  for (int k = 0; k < w; k++) check(r, r->lv + (size_t)k * size, size, bench_bw_stamp(0, k, size), 1, "rbw");
  return ctl_send(r, size, &a) || wait_req(r, a, NULL) ? -1 : 0;
}

/* A list of count writes of size bytes from local offset j * size to the
 * peer's offset j * size. */
static int prep_list(rank_t *r, size_t count, size_t size, asr_xfer_t **x) {
  asr_iov_t *l = calloc(count, sizeof *l);
  asr_riov_t *rm = calloc(count, sizeof *rm);
  if (!l || !rm) return -1;
  for (size_t j = 0; j < count; j++) {
    l[j] = (asr_iov_t){r->lt, j * size, size};
    rm[j] = (asr_riov_t){r->rmem, j * size};
  }
  int st = asr_xfer_prep(r->sc, ASR_XFER_WRITE, (int)count, l, rm, x);
  free(l);
  free(rm);
  return st ? fail(r, "asr_xfer_prep", st) : 0;
}

static int run_batch(rank_t *r, size_t count, size_t size, int nb, double *med_us) {
  double *us = calloc((size_t)nb, sizeof *us);
  asr_xfer_t *x = NULL;
  asr_request_t *q, *a;
  if (!us || (r->rank == 0 && prep_list(r, count, size, &x))) return -1;
  for (size_t j = 0; j < count; j++) rma_fill(r->lv + j * size, size, 0, 1);
  for (int b = -RMA_BATCH_WARMUP; b < nb; b++) {
    int full = b == -RMA_BATCH_WARMUP;
    uint64_t last = bench_bw_stamp(b, (int)count - 1, size);
    if (r->rank == 0) {
      for (size_t j = 0; j < count; j++) rma_fill(r->lv + j * size, size, bench_bw_stamp(b, (int)j, size), 0);
      if (ctl_recv(r, &a)) return -1;
      uint64_t t0 = launch_now_ns();
      int st = asr_xfer_post(x, last, &q);
      if (st) return fail(r, "asr_xfer_post", st);
      if (wait_req(r, q, NULL)) return -1;
      uint64_t t_local = launch_now_ns();
      if (wait_req(r, a, NULL)) return -1;
      uint64_t t_notif = ctl_value(r), t_end = t_notif > t_local ? t_notif : t_local;
      if (b >= 0) us[b] = (double)(t_end - t0) / 1e3;
    } else {
      uint64_t t_notif;
      if (wait_notif(r, last, NULL, size, &t_notif, NULL)) return -1;
      for (size_t j = 0; j < count; j++)
        check(r, r->tv + j * size, size, bench_bw_stamp(b, (int)j, size), full || b == nb - 1, "batch");
      if (ctl_send(r, t_notif, &a) || wait_req(r, a, NULL)) return -1;
    }
  }
  *med_us = r->rank == 0 ? rma_median(us, nb) : 0;
  asr_xfer_free(x);
  free(us);
  return 0;
}

/* prep: reps timed asr_xfer_prep's of the 15,000-entry list, then one
 * post of it that the owner checks entry by entry. */
static int run_prep(rank_t *r, int reps, double *med_ms) {
  const size_t count = RMA_PREP_ENTRIES, size = RMA_PREP_SIZE;
  uint64_t last = bench_bw_stamp(0, (int)count - 1, size);
  asr_request_t *q, *a;
  if (r->rank == 1) {
    if (wait_notif(r, last, NULL, size, NULL, NULL)) return -1;
    for (size_t j = 0; j < count; j++)
      check(r, r->tv + j * size, size, bench_bw_stamp(0, (int)j, size), 1, "prep");
    return ctl_send(r, last, &a) || wait_req(r, a, NULL) ? -1 : 0;
  }
  asr_iov_t *l = calloc(count, sizeof *l);
  asr_riov_t *rm = calloc(count, sizeof *rm);
  double *ms = calloc((size_t)reps, sizeof *ms);
  if (!l || !rm || !ms) return -1;
  for (size_t j = 0; j < count; j++) {
    l[j] = (asr_iov_t){r->lt, j * size, size};
    rm[j] = (asr_riov_t){r->rmem, j * size};
    rma_fill(r->lv + j * size, size, bench_bw_stamp(0, (int)j, size), 1);
  }
  asr_xfer_t *x = NULL;
  for (int i = 0; i < reps; i++) {
    if (x) asr_xfer_free(x);
    uint64_t t0 = launch_now_ns();
    int st = asr_xfer_prep(r->sc, ASR_XFER_WRITE, (int)count, l, rm, &x);
    uint64_t t1 = launch_now_ns();
    if (st) return fail(r, "asr_xfer_prep", st);
    ms[i] = (double)(t1 - t0) / 1e6;
  }
  *med_ms = rma_median(ms, reps);
  if (ctl_recv(r, &a)) return -1;
  int st = asr_xfer_post(x, last, &q);
  if (st) return fail(r, "asr_xfer_post", st);
  if (wait_req(r, q, NULL) || wait_req(r, a, NULL)) return -1;
  if (ctl_value(r) != last) return fail(r, "prep: wrong acknowledgement", ASR_INVALID);
  asr_xfer_free(x);
  free(l);
  free(rm);
  free(ms);
  return 0;
}

/* --- two-sided rows ---------------------------------------------------------- */

static int post(rank_t *r, int send, asr_tensor_t *t, size_t off, size_t len, asr_request_t **q) {
  int st = send ? asr_isend(r->sc, t, off, len, q) : asr_irecv(r->rc, t, off, len, q);
  return st ? fail(r, send ? "asr_isend" : "asr_irecv", st) : 0;
}

static int run_slat(rank_t *r, size_t size, int n, double *us) {
  uint64_t t0 = 0;
  asr_request_t *s, *q = NULL;
  size_t got = 0;
  rma_fill(r->lv, size, 0, 1);
  if (r->rank == 1 && post(r, 0, r->tt, 0, size, &q)) return -1;
  for (int i = -10; i < n; i++) {
    if (i == 0) t0 = launch_now_ns();
    int full = i == -10;
    uint64_t stamp = bench_lat_stamp(i, size);
    if (r->rank == 0) {
      rma_fill(r->lv, size, stamp, full);
      if (post(r, 0, r->tt, 0, size, &q) || post(r, 1, r->lt, 0, size, &s) || wait_req(r, s, NULL) ||
          wait_req(r, q, &got))
        return -1;
      check(r, r->tv, size, stamp, full, "slat");
    } else {
      if (wait_req(r, q, &got)) return -1;
      check(r, r->tv, size, stamp, full, "slat");
      if (i + 1 < n && post(r, 0, r->tt, 0, size, &q)) return -1;
      rma_fill(r->lv, size, stamp, full);
      if (post(r, 1, r->lt, 0, size, &s) || wait_req(r, s, NULL)) return -1;
    }
    if (got != size) return fail(r, "slat: short message", ASR_INVALID);
  }
  *us = (double)(launch_now_ns() - t0) / 1e3 / n / 2.0;
  return 0;
}

static int run_sbw(rank_t *r, size_t size, int n, int w, double *secs) {
  asr_request_t *q[MAXW], *a;
  uint64_t t0 = 0;
  for (int k = 0; k < w; k++) rma_fill(r->lv + (size_t)k * size, size, 0, 1);
  for (int i = -2; i < n; i++) {
    if (i == 0) t0 = launch_now_ns();
    for (int k = 0; k < w; k++) {
      if (r->rank == 0) rma_fill(r->lv + (size_t)k * size, size, bench_bw_stamp(i, k, size), 0);
      if (post(r, r->rank == 0, r->rank == 0 ? r->lt : r->tt, (size_t)k * size, size, &q[k])) return -1;
    }
    for (int k = 0; k < w; k++) {
      size_t got;
      if (wait_req(r, q[k], &got)) return -1;
      if (r->rank == 1) {
        if (got != size) return fail(r, "sbw: short message", ASR_INVALID);
        check(r, r->tv + (size_t)k * size, size, bench_bw_stamp(i, k, size), i == -2, "sbw");
      }
    }
    if (r->rank == 0 ? ctl_recv(r, &a) : ctl_send(r, (uint64_t)i, &a)) return -1;
    if (wait_req(r, a, NULL)) return -1;
  }
  *secs = (double)(launch_now_ns() - t0) / 1e9;
  if (r->rank == 1)
    for (int k = 0; k < w; k++)
      check(r, r->tv + (size_t)k * size, size, bench_bw_stamp(n - 1, k, size), 1, "sbw");
  return 0;
}

/* --- the ranks ----------------------------------------------------------------- */

/* Registers the target tensor, sends its descriptor to the peer and imports
 * the peer's. */
static int swap_descriptors(rank_t *r, int lnc, size_t need) {
  int st = asr_mem_register(lnc, r->tv, need, ASR_MEM_REMOTE_READ | ASR_MEM_REMOTE_WRITE, &r->mem);
  if (st) return fail(r, "asr_mem_register", st);
  size_t len = ASR_MEM_DESC_MAX;
  if ((st = asr_mem_export(r->mem, r->cv + DESC_OUT + 8, &len))) return fail(r, "asr_mem_export", st);
  uint64_t l64 = len;
  memcpy(r->cv + DESC_OUT, &l64, 8);
  asr_request_t *s, *q;
  size_t got = 0;
  if (post(r, 0, r->ct, DESC_IN, DESC_MSG, &q) || post(r, 1, r->ct, DESC_OUT, DESC_MSG, &s) ||
      wait_req(r, s, NULL) || wait_req(r, q, &got))
    return -1;
  memcpy(&l64, r->cv + DESC_IN, 8);
  if (got != DESC_MSG || l64 > ASR_MEM_DESC_MAX) return fail(r, "the peer's descriptor message", ASR_INVALID);
  if ((st = asr_mem_import(r->sc, r->cv + DESC_IN + 8, (size_t)l64, &r->rmem)))
    return fail(r, "asr_mem_import", st);
  return 0;
}

static int want(const opts_t *o, const char *m) { return !strcmp(o->mode, m) || !strcmp(o->mode, "all"); }

static int run_modes(rank_t *r, const opts_t *o) {
  const size_t *sz = o->sizes;
  int w = o->window;
  if (want(o, "lat")) {
    double us = 0, d = 0;
    if (run_lat(r, sz[0], bench_warmup_rounds(sz[0], o->iters), &us, &d)) return -1; /* untimed */
    for (int i = 0; i < o->nsizes; i++) {
      if (run_lat(r, sz[i], bench_lat_rounds(sz[i], o->iters), &us, &d)) return -1;
      if (r->rank == 0) printf("wlat %zu %.3f\nnotif %zu %.3f\n", sz[i], us, sz[i], d);
    }
  }
  for (int i = 0; want(o, "wbw") && i < o->nsizes; i++) {
    int n = bench_bw_windows(sz[i], w);
    double secs = 0;
    if (n > o->max_windows) n = o->max_windows;
    if (run_wbw(r, sz[i], n, w, &secs)) return -1;
    if (r->rank == 0) printf("wbw %zu %.3f\n", sz[i], (double)sz[i] * w * n / secs / 1e6);
  }
  for (int i = 0; want(o, "rbw") && i < o->nsizes; i++) {
    int n = bench_bw_windows(sz[i], w);
    double secs = 0;
    if (n > o->max_windows) n = o->max_windows;
    if (run_rbw(r, sz[i], n, w, &secs)) return -1;
    if (r->rank == 0) printf("rbw %zu %.3f\n", sz[i], (double)sz[i] * w * n / secs / 1e6);
  }
  for (int i = 0; want(o, "batch") && i < RMA_NBATCH; i++) {
    double us = 0;
    if (run_batch(r, rma_batch_count[i], rma_batch_size[i], o->batches, &us)) return -1;
    if (r->rank == 0)
      printf("batch %zu %zu %.3f %.3f\n", rma_batch_count[i], rma_batch_size[i],
             (double)(rma_batch_count[i] * rma_batch_size[i]) / us / 1e3, us);
  }
  if (want(o, "prep")) {
    double ms = 0;
    if (run_prep(r, o->prep_reps, &ms)) return -1;
    if (r->rank == 0) printf("prep %d %d %.3f\n", RMA_PREP_ENTRIES, RMA_PREP_SIZE, ms);
  }
  if (want(o, "slat")) {
    double us = 0;
    if (run_slat(r, sz[0], bench_warmup_rounds(sz[0], o->iters), &us)) return -1; /* untimed */
    for (int i = 0; i < o->nsizes; i++) {
      if (run_slat(r, sz[i], bench_lat_rounds(sz[i], o->iters), &us)) return -1;
      if (r->rank == 0) printf("slat %zu %.3f\n", sz[i], us);
    }
  }
  for (int i = 0; want(o, "sbw") && i < o->nsizes; i++) {
    int n = bench_bw_windows(sz[i], w);
    double secs = 0;
    if (n > o->max_windows) n = o->max_windows;
    if (run_sbw(r, sz[i], n, w, &secs)) return -1;
    if (r->rank == 0) printf("sbw %zu %.3f\n", sz[i], (double)sz[i] * w * n / secs / 1e6);
  }
  fflush(stdout);
  return 0;
}

/* The tensors' size: the largest window of the largest size, batch or
 * prepared list the modes need. */
static size_t need_bytes(const opts_t *o) {
  size_t need = 0;
  for (int i = 0; i < o->nsizes; i++) {
    size_t v = o->sizes[i] * (want(o, "wbw") || want(o, "rbw") || want(o, "sbw") ? (size_t)o->window : 1);
    if (v > need) need = v;
  }
  for (int i = 0; want(o, "batch") && i < RMA_NBATCH; i++)
    if (rma_batch_count[i] * rma_batch_size[i] > need) need = rma_batch_count[i] * rma_batch_size[i];
  if (want(o, "prep") && (size_t)RMA_PREP_ENTRIES * RMA_PREP_SIZE > need)
    need = (size_t)RMA_PREP_ENTRIES * RMA_PREP_SIZE;
  return need;
}

static int rma_rank(int rank, int nranks, void *arg) {
  const opts_t *o = arg;
  (void)nranks;
  rank_t r = {.rank = rank};
  int lnc = o->lnc0 + rank, peer = o->lnc0 + 1 - rank;
  size_t need = need_bytes(o);
  /* rank 0 comes up first (it serves the KV store) and shuts down last */
  if (rank == 1 && launch_barrier() != 0) return 1;
  int st = asr_init(lnc);
  if (rank == 0 && launch_barrier() != 0) return 1;
  if (st || (st = asr_connect(lnc, "127.0.0.1", peer, &r.sc)) ||
      (st = asr_accept(lnc, "127.0.0.1", peer, &r.rc)) || (st = asr_comm_wait_connected(r.sc, 60000)) ||
      (st = asr_comm_wait_connected(r.rc, 60000)) || (st = asr_tensor_alloc(need, &r.lt)) ||
      (st = asr_tensor_alloc(need, &r.tt)) || (st = asr_tensor_alloc(CTL_SIZE, &r.ct))) {
    fprintf(stderr, "asr_rma_bench rank %d: setup: %s\n", rank, asr_strerror(st));
    return 1;
  }
  r.lv = asr_tensor_va(r.lt);
  r.tv = asr_tensor_va(r.tt);
  r.cv = asr_tensor_va(r.ct);
  if (swap_descriptors(&r, lnc, need)) return 1;
  if (rank == 0) {
    const char *p = asr_comm_provider(r.sc);
    fprintf(stderr, "asr_rma_bench: path %s\n", p ? p : "?");
  }
  int rc = run_modes(&r, o);
  if (launch_barrier() != 0) return 1;
  asr_rmem_free(r.rmem);
  asr_mem_deregister(r.mem);
  asr_comm_close(r.sc);
  asr_comm_close(r.rc);
  asr_tensor_free(r.lt);
  asr_tensor_free(r.tt);
  asr_tensor_free(r.ct);
  if (rank == 1) asr_close(lnc);
  if (launch_barrier() != 0) return 1;
  if (rank == 0) asr_close(lnc);
  if (r.errors) fprintf(stderr, "asr_rma_bench rank %d: %lu payload errors\n", rank, r.errors);
  return rc || r.errors ? 1 : 0;
}

int main(int argc, char **argv) {
  opts_t o = {
      .mode = "all", .iters = 1000, .window = 64, .max_windows = 16384, .batches = 200, .prep_reps = 5};
  const char *list = RMA_DEFAULT_SIZES;
  int timeout_s = 300, opt;
  (void)launch_report; /* asr_launch.h's reports: the rows go to stdout here */
  while ((opt = getopt(argc, argv, "m:z:n:w:N:b:r:l:t:h")) != -1) {
    switch (opt) {
      case 'm': o.mode = optarg; break;
      case 'z': list = optarg; break;
      case 'n': o.iters = atoi(optarg); break;
      case 'w': o.window = atoi(optarg); break;
      case 'N': o.max_windows = atoi(optarg); break;
      case 'b': o.batches = atoi(optarg); break;
      case 'r': o.prep_reps = atoi(optarg); break;
      case 'l': o.lnc0 = atoi(optarg); break;
      case 't': timeout_s = atoi(optarg); break;
      default: goto usage;
    }
  }
  static const char *modes[] = {"lat", "wbw", "rbw", "batch", "prep", "slat", "sbw", "all"};
  int known = 0;
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) known |= !strcmp(o.mode, modes[i]);
  if (!known || (o.nsizes = rma_parse_sizes(list, o.sizes, RMA_MAX_SIZES)) < 0 || o.iters < 1 ||
      o.window < 1 || o.window > MAXW || o.max_windows < 1 || o.batches < 1 || o.prep_reps < 1 ||
      o.lnc0 < 0 || o.lnc0 + 2 > ASR_MAX_LNC)
    goto usage;
  return launch_run(2, rma_rank, &o, timeout_s, "asr_rma_bench") ? 1 : 0;
usage:
  fprintf(
      stderr,
      "usage: asr_rma_bench [-m lat|wbw|rbw|batch|prep|slat|sbw|all] [-z SIZES] [-n ITERS] [-w WINDOW "
      "(1..%d)]\n"
      "                     [-N MAX_WINDOWS] [-b BATCHES] [-r PREP_REPS] [-l LNC0 (0..126)] [-t TIMEOUT_S]\n",
      MAXW);
  return 2;
}
