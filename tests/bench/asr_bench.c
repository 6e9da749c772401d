/*
 * asr_bench -- the libasr side of tests/bench/ofi_bench.sh beyond pingpong:
 * the time to connect a full mesh, and the small-message rate with all 128
 * requests of a comm in flight (pingpong's -w stops at 120).
 *
 *   asr_bench -m mesh [-R RANKS] [-L LNCS_PER_PROC] [-H HOSTS] [-l LNC0] [-t TIMEOUT_S]
 *   asr_bench -m rate [-w WINDOW] [-n ITERS] [-l LNC0] [-t TIMEOUT_S]
 *   asr_bench -m breakdown [-n ITERS] [-l LNC0] [-t TIMEOUT_S]
 *
 * mesh: forks RANKS / LNCS_PER_PROC processes (default 16 ranks, 1 LNC per
 * process); rank r is LNC LNC0 + r and lives in process r / LNCS_PER_PROC.
 * Every rank brings its LNC up (asr_init); once every process has (a
 * barrier, as ofi_raw_mesh's address exchange), each opens a SEND comm to and
 * a RECV comm from every other rank (RANKS * (RANKS - 1) comm pairs in all)
 * and waits until all of them are CONNECTED. The clock starts in the launcher
 * just before the first fork and stops when the last process has all its
 * comms connected; so the figure covers process start, asr_init (endpoint,
 * KV election), the KV rendezvous and the libfabric connection. Then, after
 * another barrier (a process that is done sleeps there, as ofi_raw_mesh's
 * do), every SEND comm carries one 8-byte stamp (from, to) that its RECV comm
 * checks, so every connection is proven to reach the right peer. Prints
 *   mesh RANKS PROCS init_ms connected_ms
 * (init_ms: until the last asr_init returned; connected_ms: until all were
 * connected, both from the start), then
 *   mesh_sm COMMS comms MAPPED KiB mapped RSS KiB resident (K KiB per comm)
 * the shared memory of the sm path's regions once every comm was connected
 * and had carried its stamp (half the sums of each process's mappings of
 * /dev/shm/asrsm:* from /proc/self/smaps: each region has two ends; zero
 * on the libfabric providers).
 *
 * With -H HOSTS (default 1) the ranks are split evenly over HOSTS "hosts"
 * on this machine's loopback addresses 127.0.0.1, 127.0.0.2, ...: host h
 * holds ranks h*P .. h*P+P-1 (P = RANKS / HOSTS, LNC LNC0 + r % P), and its
 * processes take ASR_IF_ADDR = ASR_KV_BIND = 127.0.0.(h+1), ASR_HOSTNAME
 * asr-bench-h<h> and ASR_KV_LOCK_DIR <dir>/h<h>, so each host elects a KV
 * server of its own. This is how a mesh gets past one host's 128 LNCs
 * (ASR_MAX_LNC): 192 ranks = 2 hosts x 96 LNCs.
 *
 * rate: two ranks (LNC0 and LNC0 + 1, one process each), the pattern of
 * pingpong's rate mode: rank 0 posts WINDOW (default 128) 8-byte sends on one
 * SEND comm, waits for all, then a 1-byte ack closes the window; ITERS
 * windows (default 1000) are timed after 2 warm-up windows. Every message's stamp is
 * checked. Prints
 *   rate 8 msgs/s
 *
 * breakdown: what libasr's own calls cost, with no second process in the
 * way: ONE process brings up LNC0 and LNC0 + 1, connects a SEND comm from
 * the first to the second and a RECV comm on the second from the first, and
 * sends ITERS (default 1000) 8-byte messages, one at a time: asr_irecv,
 * asr_isend, then asr_test on the send until it completes and on the
 * receive until it completes (each stamp checked). A first pass times the
 * whole loop (the cost of one message through libasr within a process,
 * memory traffic of one CPU's caches only); a second times every call on
 * its own, less what a clock read costs (measured first), and splits it.
 * Prints one line each:
 *   breakdown provider NAME      the path the comms took (asr_comm_provider)
 *   breakdown clock NS           one clock read, subtracted from each below
 *   breakdown message NS         one message (first pass: no clock per call)
 *   breakdown isend NS           per asr_isend
 *   breakdown irecv NS           per asr_irecv
 *   breakdown test_send NS       per asr_test call that completes a send
 *   breakdown test_recv NS       per asr_test call that completes a receive
 *   breakdown test_poll NS       per asr_test call that found its request
 *                                not yet done
 *   breakdown polls N            such calls per message
 * The process runs on one CPU with BENCH_PIN=1, as each rank of rate.
 *
 * Environment: ASR_PROVIDER (shm or 'tcp;ofi_rxm'; unset: libasr picks the
 * path for a peer on this host); without
 * ASR_BOOTSTRAP_PORT / ASR_KV_LOCK_DIR a free port / private lock directory
 * is used (asr_launch.h). Exits non-zero on any failure or wrong payload.
 */
#include "config.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "asr.h"
#include "asr_launch.h"

typedef struct {
  int ranks, per_proc, lnc0, window, iters, hosts;
  uint64_t t0;
} bench_opts_t;

/* Rank r's host (-H), LNC and address. */
static int rank_host(const bench_opts_t *o, int r) { return r / (o->ranks / o->hosts); }
static int rank_lnc(const bench_opts_t *o, int r) { return o->lnc0 + r % (o->ranks / o->hosts); }
static void rank_ip(const bench_opts_t *o, int r, char *ip, size_t cap) {
  snprintf(ip, cap, "127.0.0.%d", rank_host(o, r) + 1);
}

/* A process of host h (-H above 1): its address, KV server and lock dir. */
static int join_host(const bench_opts_t *o, int first_rank) {
  if (o->hosts <= 1) return 0;
  int h = rank_host(o, first_rank);
  char ip[32], name[32], dir[4096];
  rank_ip(o, first_rank, ip, sizeof ip);
  snprintf(name, sizeof name, "asr-bench-h%d", h);
  const char *base = getenv("ASR_KV_LOCK_DIR");
  snprintf(dir, sizeof dir, "%s/h%d", base && *base ? base : "/tmp", h);
  (void)mkdir(dir, 0700); /* EEXIST: another process of the host made it */
  if (setenv("ASR_IF_ADDR", ip, 1) || setenv("ASR_KV_BIND", ip, 1) || setenv("ASR_HOSTNAME", name, 1) ||
      setenv("ASR_KV_LOCK_DIR", dir, 1))
    return -1;
  return 0;
}

static int wait_req(asr_request_t *r, size_t *got) {
  int done = 0;
  size_t sz = 0;
  while (!done) {
    int st = asr_test(r, &done, &sz);
    if (st) {
      fprintf(stderr, "asr_bench: asr_test: %s\n", asr_strerror(st));
      return -1;
    }
  }
  if (got) *got = sz;
  return 0;
}

/* --- mesh ---------------------------------------------------------------- */

/* This process's mappings of sm regions (/proc/self/smaps: the files
 * /dev/shm/asrsm:*, unlinked once both ends mapped them): their size and
 * their resident pages, in KiB. Every region is mapped by its two ends, so
 * the sums over a mesh's processes are twice the host's sm memory. */
static void sm_maps(double *mapped_kib, double *rss_kib) {
  *mapped_kib = *rss_kib = 0;
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return;
  char line[1024];
  int in_sm = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    long kb;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ' ')) {
      in_sm = strstr(line, "/dev/shm/asrsm:") != NULL;
      if (in_sm) *mapped_kib += (double)(hi - lo) / 1024.0;
    } else if (in_sm && sscanf(line, "Rss: %ld kB", &kb) == 1) {
      *rss_kib += (double)kb;
    }
  }
  fclose(f);
}

static int mesh_proc(int proc, int nprocs, void *arg) {
  const bench_opts_t *o = arg;
  int R = o->ranks, L = o->per_proc, first = proc * L;
  (void)nprocs;
  if (join_host(o, first)) return 1;
  for (int i = 0; i < L; i++) {
    int st = asr_init(rank_lnc(o, first + i));
    if (st) {
      fprintf(stderr, "asr_bench mesh: asr_init(%d): %s\n", rank_lnc(o, first + i), asr_strerror(st));
      return 1;
    }
  }
  uint64_t t_init = launch_now_ns();
  /* Every rank is up before any comm is made, as in ofi_raw_mesh (its
   * address exchange is this barrier): the part after init is then the
   * whole mesh's rendezvous for both, not what was left of it once the
   * last rank came up (a rank that came up early could otherwise connect
   * to every rank already up while the figure's clock had not started, and
   * the figure swung with the order the ranks came up in). */
  if (launch_barrier() != 0) return 1;
  int per = R - 1, n = L * per;
  asr_comm_t **sc = calloc((size_t)n, sizeof *sc), **rc = calloc((size_t)n, sizeof *rc);
  if (!sc || !rc) return 1;
  for (int i = 0; i < L; i++) {
    int me = first + i, k = i * per;
    for (int q = 0; q < R; q++) {
      if (q == me) continue;
      char ip[32];
      rank_ip(o, q, ip, sizeof ip);
      int st = asr_connect(rank_lnc(o, me), ip, rank_lnc(o, q), &sc[k]);
      if (!st) st = asr_accept(rank_lnc(o, me), ip, rank_lnc(o, q), &rc[k]);
      if (st) {
        fprintf(stderr, "asr_bench mesh: rank %d to %d: %s\n", me, q, asr_strerror(st));
        return 1;
      }
      k++;
    }
  }
  for (int k = 0; k < n; k++) {
    int st = asr_comm_wait_connected(sc[k], 120000);
    if (!st) st = asr_comm_wait_connected(rc[k], 120000);
    if (st) {
      fprintf(stderr, "asr_bench mesh: process %d comm pair %d did not connect: %s\n", proc, k,
              asr_strerror(st));
      return 1;
    }
  }
  uint64_t t_conn = launch_now_ns();
  double rep[2] = {(double)(t_init - o->t0) / 1e6, (double)(t_conn - o->t0) / 1e6};
  launch_report(rep, 2);
  /* A process that has connected waits here, asleep, for the others (as
   * ofi_raw_mesh does once its messages are in): polling for stamps that
   * cannot come before the last process connects would take the CPUs from
   * the processes still connecting, and the figure would count it. */
  if (launch_barrier() != 0) return 1;
  /* prove every connection: one stamp per SEND comm, checked on its RECV comm */
  asr_tensor_t *sbuf, *rbuf;
  if (asr_tensor_alloc((size_t)n * 8, &sbuf) || asr_tensor_alloc((size_t)n * 8, &rbuf)) return 1;
  uint64_t *sv = asr_tensor_va(sbuf), *rv = asr_tensor_va(rbuf);
  asr_request_t **sq = calloc((size_t)n, sizeof *sq), **rq = calloc((size_t)n, sizeof *rq);
  if (!sq || !rq) return 1;
  for (int i = 0, k = 0; i < L; i++)
    for (int q = 0; q < R; q++) {
      int me = first + i;
      if (q == me) continue;
      sv[k] = ((uint64_t)me << 32) | (uint64_t)q;
      rv[k] = ~0ull;
      if (asr_irecv(rc[k], rbuf, (size_t)k * 8, 8, &rq[k]) ||
          asr_isend(sc[k], sbuf, (size_t)k * 8, 8, &sq[k])) {
        fprintf(stderr, "asr_bench mesh: posting the check messages failed\n");
        return 1;
      }
      k++;
    }
  int bad = 0;
  for (int i = 0, k = 0; i < L; i++)
    for (int q = 0; q < R; q++) {
      int me = first + i;
      if (q == me) continue;
      size_t got = 0;
      if (wait_req(sq[k], NULL) || wait_req(rq[k], &got)) return 1;
      if (got != 8 || rv[k] != (((uint64_t)q << 32) | (uint64_t)me)) {
        fprintf(stderr, "asr_bench mesh: rank %d got %zu bytes 0x%llx from rank %d\n", me, got,
                (unsigned long long)rv[k], q);
        bad++;
      }
      k++;
    }
  /* every comm connected and proven: the sm memory of the whole mesh */
  double rep2[4] = {rep[0], rep[1], 0, 0};
  sm_maps(&rep2[2], &rep2[3]);
  launch_report(rep2, 4);
  if (launch_barrier() != 0) return 1;
  for (int k = 0; k < n; k++) {
    asr_comm_close(sc[k]);
    asr_comm_close(rc[k]);
  }
  asr_tensor_free(sbuf);
  asr_tensor_free(rbuf);
  /* process 0 (most often the KV leader: it was forked first) goes last */
  if (proc != 0)
    for (int i = 0; i < L; i++) asr_close(rank_lnc(o, first + i));
  if (launch_barrier() != 0) return 1;
  if (proc == 0)
    for (int i = 0; i < L; i++) asr_close(rank_lnc(o, first + i));
  free(sc);
  free(rc);
  free(sq);
  free(rq);
  return bad ? 1 : 0;
}

/* --- rate ---------------------------------------------------------------- */

static int rate_rank(int rank, int nranks, void *arg) {
  const bench_opts_t *o = arg;
  (void)nranks;
  int lnc = o->lnc0 + rank, peer = o->lnc0 + 1 - rank, w = o->window;
  /* rank 0 comes up first (it serves the KV store) and shuts down last */
  if (rank == 1 && launch_barrier() != 0) return 1;
  int st = asr_init(lnc);
  if (rank == 0 && launch_barrier() != 0) return 1;
  asr_comm_t *sc, *rc;
  if (st || (st = asr_connect(lnc, "127.0.0.1", peer, &sc)) ||
      (st = asr_accept(lnc, "127.0.0.1", peer, &rc)) || (st = asr_comm_wait_connected(sc, 60000)) ||
      (st = asr_comm_wait_connected(rc, 60000))) {
    fprintf(stderr, "asr_bench rate rank %d: setup: %s\n", rank, asr_strerror(st));
    return 1;
  }
  asr_tensor_t *sbuf, *rbuf;
  if (asr_tensor_alloc((size_t)w * 8, &sbuf) || asr_tensor_alloc((size_t)w * 8, &rbuf)) return 1;
  uint64_t *s = asr_tensor_va(sbuf), *r = asr_tensor_va(rbuf);
  asr_request_t *q[ASR_MAX_REQUESTS];
  int n = o->iters; /* windows (ofi_bench.sh: RATE_ITERS, the same for ofi_raw -N) */
  unsigned long bad = 0;
  uint64_t t0 = 0;
  for (int i = -2; i < n; i++) {
    if (i == 0) t0 = launch_now_ns();
    for (int k = 0; k < w; k++) {
      uint64_t stamp = bench_bw_stamp(i, k, 8);
      if (rank == 0) s[k] = stamp;
      st = rank == 0 ? asr_isend(sc, sbuf, (size_t)k * 8, 8, &q[k])
                     : asr_irecv(rc, rbuf, (size_t)k * 8, 8, &q[k]);
      if (st) {
        fprintf(stderr, "asr_bench rate rank %d: post: %s\n", rank, asr_strerror(st));
        return 1;
      }
    }
    for (int k = 0; k < w; k++) {
      size_t got;
      if (wait_req(q[k], &got)) return 1;
      if (rank == 1 && (got != 8 || r[k] != bench_bw_stamp(i, k, 8))) bad++;
    }
    asr_request_t *a;
    st = rank == 0 ? asr_irecv(rc, rbuf, 0, 1, &a) : asr_isend(sc, sbuf, 0, 1, &a);
    if (st || wait_req(a, NULL)) {
      fprintf(stderr, "asr_bench rate rank %d: ack failed\n", rank);
      return 1;
    }
  }
  double secs = (double)(launch_now_ns() - t0) / 1e9;
  if (rank == 0) {
    printf("rate 8 %.0f\n", (double)w * n / secs);
    fflush(stdout);
  }
  if (bad) fprintf(stderr, "asr_bench rate rank %d: %lu wrong messages\n", rank, bad);
  if (launch_barrier() != 0) return 1;
  asr_comm_close(sc);
  asr_comm_close(rc);
  asr_tensor_free(sbuf);
  asr_tensor_free(rbuf);
  if (rank == 1) asr_close(lnc);
  if (launch_barrier() != 0) return 1;
  if (rank == 0) asr_close(lnc);
  return bad ? 1 : 0;
}

/* --- breakdown ------------------------------------------------------------ */

/* Sums of the per-call times (ns) of the instrumented pass, and counts. */
typedef struct {
  double isend, irecv, test_send, test_recv, poll;
  long polls;
} breakdown_t;

/* Polls r until it completes; with b, times each call (less clock_ns) into
 * *done_sum (the completing call) and b->poll (the others). Returns the
 * bytes it moved, or -1 on failure. */
static long bd_wait(asr_request_t *r, breakdown_t *b, double clock_ns, double *done_sum) {
  for (;;) {
    int done = 0;
    size_t sz = 0;
    uint64_t t0 = b ? launch_now_ns() : 0;
    int st = asr_test(r, &done, &sz);
    double dt = b ? (double)(launch_now_ns() - t0) - clock_ns : 0;
    if (st) {
      fprintf(stderr, "asr_bench breakdown: asr_test: %s\n", asr_strerror(st));
      return -1;
    }
    if (done) {
      if (b) *done_sum += dt;
      return (long)sz;
    }
    if (b) {
      b->poll += dt;
      b->polls++;
    }
  }
}

/* Rounds i in [from, to) of the one-message loop; with b, each call timed. */
static int bd_rounds(asr_comm_t *sc, asr_comm_t *rc, asr_tensor_t *sbuf, asr_tensor_t *rbuf, int from, int to,
                     breakdown_t *b, double clock_ns) {
  uint64_t *s = asr_tensor_va(sbuf), *r = asr_tensor_va(rbuf);
  for (int i = from; i < to; i++) {
    asr_request_t *sq, *rq;
    *s = bench_lat_stamp(i, 8);
    uint64_t t0 = b ? launch_now_ns() : 0;
    int st = asr_irecv(rc, rbuf, 0, 8, &rq);
    uint64_t t1 = b ? launch_now_ns() : 0;
    if (!st) st = asr_isend(sc, sbuf, 0, 8, &sq);
    uint64_t t2 = b ? launch_now_ns() : 0;
    if (st) {
      fprintf(stderr, "asr_bench breakdown: post: %s\n", asr_strerror(st));
      return -1;
    }
    if (b) {
      b->irecv += (double)(t1 - t0) - clock_ns;
      b->isend += (double)(t2 - t1) - clock_ns;
    }
    if (bd_wait(sq, b, clock_ns, b ? &b->test_send : NULL) != 8) return -1;
    if (bd_wait(rq, b, clock_ns, b ? &b->test_recv : NULL) != 8 || *r != bench_lat_stamp(i, 8)) {
      fprintf(stderr, "asr_bench breakdown: message %d arrived wrong\n", i);
      return -1;
    }
  }
  return 0;
}

/* What one clock read costs: the mean gap between two back-to-back reads,
 * which each timed call above carries once. */
static double bd_clock_ns(void) {
  enum { N = 100000 };
  uint64_t sum = 0;
  for (int i = 0; i < N; i++) {
    uint64_t a = launch_now_ns();
    sum += launch_now_ns() - a;
  }
  return (double)sum / N;
}

static int breakdown_proc(int proc, int nprocs, void *arg) {
  const bench_opts_t *o = arg;
  int a = o->lnc0, b = o->lnc0 + 1, n = o->iters, st;
  (void)proc, (void)nprocs;
  asr_comm_t *sc, *rc;
  if ((st = asr_init(a)) || (st = asr_init(b)) || (st = asr_connect(a, "127.0.0.1", b, &sc)) ||
      (st = asr_accept(b, "127.0.0.1", a, &rc)) || (st = asr_comm_wait_connected(sc, 60000)) ||
      (st = asr_comm_wait_connected(rc, 60000))) {
    fprintf(stderr, "asr_bench breakdown: setup: %s\n", asr_strerror(st));
    return 1;
  }
  asr_tensor_t *sbuf, *rbuf;
  if (asr_tensor_alloc(4096, &sbuf) || asr_tensor_alloc(4096, &rbuf)) return 1;
  int warm = n < BENCH_WARMUP_ROUNDS ? n : BENCH_WARMUP_ROUNDS;
  double clock_ns = bd_clock_ns();
  if (bd_rounds(sc, rc, sbuf, rbuf, -warm, 0, NULL, 0)) return 1;
  uint64_t t0 = launch_now_ns();
  if (bd_rounds(sc, rc, sbuf, rbuf, 0, n, NULL, 0)) return 1;
  double msg = (double)(launch_now_ns() - t0) / n;
  breakdown_t sum = {0};
  if (bd_rounds(sc, rc, sbuf, rbuf, n, 2 * n, &sum, clock_ns)) return 1;
  const char *prov = asr_comm_provider(sc);
  printf("breakdown provider %s\n", prov ? prov : "?");
  printf("breakdown clock %.1f\n", clock_ns);
  printf("breakdown message %.1f\n", msg);
  printf("breakdown isend %.1f\n", sum.isend / n);
  printf("breakdown irecv %.1f\n", sum.irecv / n);
  printf("breakdown test_send %.1f\n", sum.test_send / n);
  printf("breakdown test_recv %.1f\n", sum.test_recv / n);
  printf("breakdown test_poll %.1f\n", sum.polls ? sum.poll / (double)sum.polls : 0.0);
  printf("breakdown polls %.2f\n", (double)sum.polls / n);
  fflush(stdout);
  asr_comm_close(sc);
  asr_comm_close(rc);
  asr_tensor_free(sbuf);
  asr_tensor_free(rbuf);
  asr_close(b);
  asr_close(a);
  return 0;
}

int main(int argc, char **argv) {
  bench_opts_t o = {
      .ranks = 16, .per_proc = 1, .lnc0 = 0, .window = ASR_MAX_REQUESTS, .iters = 1000, .hosts = 1};
  const char *mode = NULL;
  int timeout_s = 300, opt;
  while ((opt = getopt(argc, argv, "m:R:L:H:l:w:n:t:h")) != -1) {
    switch (opt) {
      case 'm': mode = optarg; break;
      case 'R': o.ranks = atoi(optarg); break;
      case 'L': o.per_proc = atoi(optarg); break;
      case 'H': o.hosts = atoi(optarg); break;
      case 'l': o.lnc0 = atoi(optarg); break;
      case 'w': o.window = atoi(optarg); break;
      case 'n': o.iters = atoi(optarg); break;
      case 't': timeout_s = atoi(optarg); break;
      default: mode = NULL; goto usage;
    }
  }
  if (mode && !strcmp(mode, "mesh")) {
    if (o.ranks < 2 || o.per_proc < 1 || o.ranks % o.per_proc || o.lnc0 < 0 || o.hosts < 1 || o.hosts > 254 ||
        o.ranks % (o.hosts * o.per_proc) || o.lnc0 + o.ranks / o.hosts > ASR_MAX_LNC ||
        o.ranks / o.per_proc > LAUNCH_MAX) {
      fprintf(stderr, "asr_bench: mesh needs 2 <= -R, -H x -L dividing -R, -l + -R / -H <= 128\n");
      return 2;
    }
    int procs = o.ranks / o.per_proc;
    o.t0 = launch_now_ns();
    int rc = launch_run(procs, mesh_proc, &o, timeout_s, "asr_bench");
    double ms[2]; /* init, connected */
    int reported = launch_report_max(procs, 2, ms);
    if (rc || reported != procs) {
      fprintf(stderr, "asr_bench: mesh of %d ranks failed (%d of %d processes connected)\n", o.ranks,
              reported, procs);
      return 1;
    }
    printf("mesh %d %d %.1f %.1f\n", o.ranks, procs, ms[0], ms[1]);
    /* the host's sm memory once all of it was connected: half the sums of
     * every process's mappings (each region has two ends) */
    double mapped = 0, rss = 0;
    for (int r = 0; r < procs; r++) {
      mapped += launch_reports[r][2];
      rss += launch_reports[r][3];
    }
    int comms = o.ranks * (o.ranks - 1);
    printf("mesh_sm %d comms %.0f KiB mapped %.0f KiB resident (%.1f KiB per comm)\n", comms, mapped / 2,
           rss / 2, comms ? mapped / 2 / comms : 0.0);
    return 0;
  }
  if (mode && !strcmp(mode, "rate")) {
    if (o.window < 1 || o.window > ASR_MAX_REQUESTS || o.iters < 1 || o.lnc0 < 0 ||
        o.lnc0 + 2 > ASR_MAX_LNC) {
      fprintf(stderr, "asr_bench: rate needs 1 <= -w <= 128, -n >= 1, -l <= 126\n");
      return 2;
    }
    return launch_run(2, rate_rank, &o, timeout_s, "asr_bench") ? 1 : 0;
  }
  if (mode && !strcmp(mode, "breakdown")) {
    if (o.iters < 1 || o.iters > (1 << 28) || o.lnc0 < 0 || o.lnc0 + 2 > ASR_MAX_LNC) {
      fprintf(stderr, "asr_bench: breakdown needs 1 <= -n <= 2^28, -l <= 126\n");
      return 2;
    }
    /* one process, launched as the others are: its environment made
     * self-contained (port, lock directory) and, with BENCH_PIN, pinned */
    return launch_run(1, breakdown_proc, &o, timeout_s, "asr_bench") ? 1 : 0;
  }
usage:
  fprintf(stderr,
          "usage: asr_bench -m mesh [-R RANKS] [-L LNCS_PER_PROC] [-H HOSTS] [-l LNC0] [-t TIMEOUT_S]\n"
          "       asr_bench -m rate [-w WINDOW] [-n ITERS] [-l LNC0] [-t TIMEOUT_S]\n"
          "       asr_bench -m breakdown [-n ITERS] [-l LNC0] [-t TIMEOUT_S]\n");
  return 2;
}
