/*
 * ofi_raw -- the raw libfabric baseline of tests/bench/ofi_bench.sh: the
 * exact message pattern of tests/apps/pingpong.c (latency, windowed
 * bandwidth with a 1-byte ack, small-message rate), written straight on
 * fi_tsend / fi_trecv with nothing of libasr in between.
 *
 *   ofi_raw [-p PROVIDER] [-m lat|bw|rate|all] [-s MIN] [-S MAX] [-n ITERS] [-w WINDOW] [-r RATE_WINDOW]
 *           [-N RATE_ITERS] [-T safe|domain]
 *
 * One invocation forks the second rank; the two open their endpoints after
 * the fork and swap addresses over a socketpair (tcp;ofi_rxm binds
 * 127.0.0.1). The endpoint is set up as libasr's runtime/ofi.c sets up its
 * own: RDM, FI_TAGGED, FI_CONTEXT2, FI_MR_LOCAL | FI_MR_VIRT_ADDR |
 * FI_MR_ALLOCATED | FI_MR_PROV_KEY, FI_THREAD_SAFE, send-after-send ordering,
 * one CQ (FI_CQ_FORMAT_TAGGED) bound for both directions, registered
 * buffers, one tag per message (a sequence number), libasr's default of
 * 1024 ofi_rxm bounce buffers (FI_OFI_RXM_MSG_RX_SIZE), and small sends with
 * fi_tinject where libasr uses it (shm, up to its inject size; ASR_INJECT_MAX
 * sets the limit for both, 0 turns it off). So asr/raw isolates what
 * libasr adds (its locks, request pool, stash and service thread), not
 * provider settings. -T domain
 * asks for FI_THREAD_DOMAIN instead (what a caller that serialises its own
 * calls, as libasr does under its transport lock, could ask for), to measure
 * what the provider's own locking costs.
 *
 * Output (rank 0), the format of pingpong:
 *   lat  SIZE  one-way usec   (round trip / 2, ITERS rounds, ITERS/10 >= 1 MiB)
 *   bw   SIZE  MB/s           (WINDOW sends in flight, then a 1-byte ack)
 *   rate SIZE  msgs/s         (RATE_WINDOW 8-byte sends in flight, default 128;
 *                             RATE_ITERS windows, default ITERS/10, at least 10)
 * Every message carries an 8-byte stamp the receiver checks; whole payloads
 * are compared on the first and last message of each size. Exits non-zero on
 * any error or payload mismatch.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "bench_util.h"
#include "raw_ofi.h"

#define MAXW 128

typedef struct {
  struct fi_context2 ctx; /* first: the op context */
  int done;
  size_t len;
} op_t;

static int rank, iters = 1000, window = 64, rate_window = 128, rate_iters;
static const char *prov = "shm";
static int thread_domain; /* -T domain: FI_THREAD_DOMAIN instead of libasr's FI_THREAD_SAFE */
static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_cq *cq;
static struct fid_av *av;
static struct fid_ep *ep;
static struct fid_mr *smr, *rmr;
static void *sdesc, *rdesc;
static fi_addr_t peer;
static unsigned char *sbuf, *rbuf;
static uint64_t stag, rtag; /* next send / receive tag */
static size_t inject_max;   /* sends up to this size use fi_tinject (libasr's rule) */
static op_t ops[MAXW + 2];
static unsigned long errors;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, long rc) {
  fprintf(stderr, "ofi_raw rank %d: %s: %s\n", rank, what, rc < 0 ? fi_strerror((int)-rc) : "failed");
  exit(1);
}

static void drain(void) {
  struct fi_cq_tagged_entry ent[32];
  for (;;) {
    ssize_t n = fi_cq_read(cq, ent, 32);
    if (n > 0) {
      for (ssize_t i = 0; i < n; i++) {
        op_t *op = ent[i].op_context;
        op->len = ent[i].len;
        op->done = 1;
      }
      if (n < 32) return;
      continue;
    }
    if (n == -FI_EAGAIN) return;
    if (n == -FI_EAVAIL) raw_ofi_cq_fail(cq, "ofi_raw", rank);
    die("fi_cq_read", n);
  }
}

static void wait_op(op_t *op) {
  while (!op->done) drain();
}

#define POST RAW_OFI_POST

static void post_send(size_t off, size_t len, op_t *op) {
  memset(&op->ctx, 0, sizeof op->ctx);
  op->done = 0;
  if (len <= inject_max) { /* no completion: done on return */
    POST(fi_tinject(ep, sbuf + off, len, peer, stag));
    op->len = len;
    op->done = 1;
  } else {
    POST(fi_tsend(ep, sbuf + off, len, sdesc, peer, stag, op));
  }
  stag = (stag + 1) & ((1ull << 40) - 1);
}

static void post_recv(size_t off, size_t len, op_t *op) {
  memset(&op->ctx, 0, sizeof op->ctx);
  op->done = 0;
  POST(fi_trecv(ep, rbuf + off, len, rdesc, FI_ADDR_UNSPEC, rtag, 0, op));
  rtag = (rtag + 1) & ((1ull << 40) - 1);
}

static void check(const unsigned char *p, size_t size, uint64_t stamp, int full, size_t got) {
  if (got != size) {
    fprintf(stderr, "ofi_raw rank %d: received %zu bytes, expected %zu\n", rank, got, size);
    errors++;
    return;
  }
  if (!bench_stamp_ok(p, size, stamp)) {
    fprintf(stderr, "ofi_raw rank %d: wrong stamp in a %zu-byte message\n", rank, size);
    errors++;
  }
  if (full)
    for (size_t i = size >= 8 ? 8 : 1; i < size; i++)
      if (p[i] != (unsigned char)((i * 131 + size) & 0xff)) {
        fprintf(stderr, "ofi_raw rank %d: byte %zu of a %zu-byte message differs\n", rank, i, size);
        errors++;
        return;
      }
}

static double run_lat(size_t size, int n) {
  uint64_t t0 = 0;
  bench_fill(sbuf, size, 0, 1);
  for (int i = -10; i < n; i++) {
    if (i == 0) t0 = now_ns();
    int full = i == -10; /* the last round's every byte is checked once the clock has stopped */
    uint64_t stamp = bench_lat_stamp(i, size);
    if (rank == 0) {
      bench_fill(sbuf, size, stamp, full);
      post_send(0, size, &ops[0]);
      wait_op(&ops[0]);
      post_recv(0, size, &ops[1]);
      wait_op(&ops[1]);
      check(rbuf, size, stamp, full, ops[1].len);
    } else {
      post_recv(0, size, &ops[1]);
      wait_op(&ops[1]);
      check(rbuf, size, stamp, full, ops[1].len);
      bench_fill(sbuf, size, stamp, full);
      post_send(0, size, &ops[0]);
      wait_op(&ops[0]);
    }
  }
  double us = (double)(now_ns() - t0) / 1e3 / n / 2.0;
  check(rbuf, size, bench_lat_stamp(n - 1, size), 1, size); /* the last message received */
  return us;
}

static double run_bw(size_t size, int n, int w) {
  uint64_t t0 = 0;
  for (int k = 0; k < w; k++) bench_fill(sbuf + (size_t)k * size, size, 0, 1);
  for (int i = -2; i < n; i++) {
    if (i == 0) t0 = now_ns();
    int full = i == -2; /* the last window's every byte is checked once the clock has stopped (as pingpong) */
    for (int k = 0; k < w; k++) {
      uint64_t stamp = bench_bw_stamp(i, k, size);
      if (rank == 0) {
        bench_fill(sbuf + (size_t)k * size, size, stamp, 0);
        post_send((size_t)k * size, size, &ops[k]);
      } else {
        post_recv((size_t)k * size, size, &ops[k]);
      }
    }
    for (int k = 0; k < w; k++) {
      wait_op(&ops[k]);
      if (rank == 1) {
        uint64_t stamp = bench_bw_stamp(i, k, size);
        check(rbuf + (size_t)k * size, size, stamp, full, ops[k].len);
      }
    }
    /* 1-byte ack closes the window */
    if (rank == 0)
      post_recv(0, 1, &ops[MAXW]);
    else
      post_send(0, 1, &ops[MAXW]);
    wait_op(&ops[MAXW]);
  }
  double secs = (double)(now_ns() - t0) / 1e9;
  if (rank == 1)
    for (int k = 0; k < w; k++) check(rbuf + (size_t)k * size, size, bench_bw_stamp(n - 1, k, size), 1, size);
  return secs;
}

static void setup(int sock) {
  raw_ofi_env_defaults();
  int rc = raw_ofi_getinfo(prov, thread_domain ? FI_THREAD_DOMAIN : FI_THREAD_SAFE, &info);
  if (rc) die("fi_getinfo", rc);
  if ((rc = fi_fabric(info->fabric_attr, &fabric, NULL))) die("fi_fabric", rc);
  if ((rc = fi_domain(fabric, info, &domain, NULL))) die("fi_domain", rc);
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE, .size = 4096};
  if ((rc = fi_cq_open(domain, &cq_attr, &cq, NULL))) die("fi_cq_open", rc);
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
  if ((rc = fi_av_open(domain, &av_attr, &av, NULL))) die("fi_av_open", rc);
  if ((rc = fi_endpoint(domain, info, &ep, NULL))) die("fi_endpoint", rc);
  if ((rc = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV))) die("fi_ep_bind(cq)", rc);
  if ((rc = fi_ep_bind(ep, &av->fid, 0))) die("fi_ep_bind(av)", rc);
  if ((rc = fi_enable(ep))) die("fi_enable", rc);
  unsigned char addr[256], paddr[256];
  size_t alen = sizeof addr;
  if ((rc = fi_getname(&ep->fid, addr, &alen))) die("fi_getname", rc);
  uint32_t l = (uint32_t)alen, pl = 0;
  if (write(sock, &l, 4) != 4 || write(sock, addr, alen) != (ssize_t)alen) die("address exchange", 0);
  if (read(sock, &pl, 4) != 4 || pl > sizeof paddr || read(sock, paddr, pl) != (ssize_t)pl)
    die("address exchange", 0);
  if (fi_av_insert(av, paddr, 1, &peer, 0, NULL) != 1) die("fi_av_insert", 0);
}

static void reg(size_t need) {
  int need_desc = (info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  inject_max = raw_ofi_inject_max(prov, info);
  if (posix_memalign((void **)&sbuf, 4096, need) || posix_memalign((void **)&rbuf, 4096, need))
    die("memory", 0);
  memset(sbuf, 0, need);
  memset(rbuf, 0, need);
  int rc;
  if ((rc = fi_mr_reg(domain, sbuf, need, FI_SEND | FI_RECV, 0, 1, 0, &smr, NULL))) die("fi_mr_reg", rc);
  if ((rc = fi_mr_reg(domain, rbuf, need, FI_SEND | FI_RECV, 0, 2, 0, &rmr, NULL))) die("fi_mr_reg", rc);
  sdesc = need_desc ? fi_mr_desc(smr) : NULL;
  rdesc = need_desc ? fi_mr_desc(rmr) : NULL;
}

/* Both ranks meet here so neither closes while the other still needs it. */
static void sync_ranks(int sock) {
  char c = 's';
  if (write(sock, &c, 1) != 1 || read(sock, &c, 1) != 1) die("final sync", 0);
}

int main(int argc, char **argv) {
  const char *mode = "all";
  size_t minsz = 1, maxsz = 4u << 20;
  int opt;
  const char *env = getenv("ASR_PROVIDER");
  if (env && *env) prov = env;
  while ((opt = getopt(argc, argv, "p:m:s:S:n:w:r:N:T:h")) != -1) {
    switch (opt) {
      case 'p': prov = optarg; break;
      case 'm': mode = optarg; break;
      case 's': minsz = strtoull(optarg, NULL, 0); break;
      case 'S': maxsz = strtoull(optarg, NULL, 0); break;
      case 'n': iters = atoi(optarg); break;
      case 'w': window = atoi(optarg); break;
      case 'r': rate_window = atoi(optarg); break;
      case 'N': rate_iters = atoi(optarg); break;
      case 'T': thread_domain = !strcmp(optarg, "domain"); break;
      default:
        fprintf(stderr,
                "usage: ofi_raw [-p PROVIDER] [-m lat|bw|rate|all] [-s MIN] [-S MAX] [-n ITERS] [-w WINDOW] "
                "[-r RATE_WINDOW] [-N RATE_ITERS] [-T safe|domain]\n");
        return 2;
    }
  }
  if (minsz < 1 || maxsz < minsz || iters < 1 || window < 1 || window > MAXW || rate_window < 1 ||
      rate_window > MAXW) {
    fprintf(stderr, "ofi_raw: need 1 <= -s <= -S, -n >= 1, 1 <= -w, -r <= %d\n", MAXW);
    return 2;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    perror("socketpair");
    return 1;
  }
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    rank = 1;
    close(sv[0]);
  } else {
    close(sv[1]);
  }
  bench_pin(rank);
  int sock = rank == 0 ? sv[0] : sv[1];
  setup(sock);
  size_t need = maxsz * (size_t)window;
  if (need < 8 * (size_t)rate_window) need = 8 * (size_t)rate_window;
  reg(need);
  sync_ranks(sock);
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
    int n = rate_iters > 0 ? rate_iters : iters / 10 > 10 ? iters / 10 : 10;
    double secs = run_bw(8, n, rate_window);
    if (rank == 0) printf("rate 8 %.0f\n", (double)rate_window * n / secs);
  }
  fflush(stdout);
  sync_ranks(sock);
  fi_close(&ep->fid);
  fi_close(&smr->fid);
  fi_close(&rmr->fid);
  fi_close(&av->fid);
  fi_close(&cq->fid);
  fi_close(&domain->fid);
  fi_close(&fabric->fid);
  fi_freeinfo(info);
  free(sbuf);
  free(rbuf);
  if (errors) fprintf(stderr, "ofi_raw rank %d: %lu payload errors\n", rank, errors);
  if (rank == 1) _exit(errors ? 1 : 0);
  int st = 0;
  if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "ofi_raw: rank 1 failed\n");
    return 1;
  }
  return errors ? 1 : 0;
}
