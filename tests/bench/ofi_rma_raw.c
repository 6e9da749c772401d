/*
 * ofi_rma_raw -- the raw libfabric baseline of tests/bench/rma_bench.sh:
 * the one-sided patterns of tests/bench/asr_rma_bench.c (issue 51), written
 * straight on fi_write / fi_writedata / fi_read / fi_writemsg with nothing
 * of libasr in between.
 *
 *   ofi_rma_raw [-p PROVIDER] [-m lat|wbw|rbw|batch|all] [-z SIZES] [-s MIN] [-S MAX] [-n ITERS]
 *               [-w WINDOW] [-N MAX_WINDOWS] [-b BATCHES] [-v]
 *
 * One invocation forks the second rank; the two open their endpoints after
 * the fork and swap their addresses, and then the address and key of the
 * region the other may write and read, over a socketpair (tcp;ofi_rxm binds
 * 127.0.0.1). The endpoint is ofi_raw's (raw_ofi.h: libasr's settings) with
 * FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE added, the
 * RMA orderings (FI_ORDER_SAS | SAW | WAW | RAW | RAR: a notification and an
 * acknowledgement come after the data written before them) and 8 bytes of
 * remote CQ data. Each rank registers a local region (the source of its
 * writes, the destination of its reads) and a target region (where the
 * peer writes, what it reads). The remote address of offset off of the
 * peer's target region is the region's virtual address plus off when the
 * domain's mr_mode has FI_MR_VIRT_ADDR, off alone otherwise; the key is
 * fi_mr_key of the peer's registration (each registration asks for a key of
 * its own; with FI_MR_PROV_KEY the provider picks it). Writes and
 * notifications up to the inject limit use fi_inject_write(data) (libasr's
 * rule for sends, raw_ofi_inject_max: shm's inject size, none on other
 * providers; ASR_INJECT_MAX sets it). The domain's data progress is manual
 * on both providers: a target keeps reading its CQ while it waits, which is
 * also what moves the data written into it.
 *
 * Modes (-m; all: every one), for each size of -z (default
 * rma_util.h's RMA_DEFAULT_SIZES; -s/-S instead: the powers of 2 from MIN
 * to MAX):
 *   lat   write-with-notify ping-pong: rank 0 fi_writedata's SIZE bytes into
 *         rank 1's target region with the message's stamp as remote CQ data;
 *         rank 1 reads its CQ until the FI_REMOTE_CQ_DATA completion comes,
 *         checks the stamps, and writes back the same way. A round ends for
 *         each rank when its write has completed and the peer's
 *         notification has come. One-way = round trip / 2 (ITERS rounds, a
 *         tenth from 1 MiB, after 10 untimed, and bench_util.h's warm-up
 *         before the first size). While it waits, a target also watches the
 *         message's two stamps in its memory: the notification delivery
 *         latency is the time from the first poll that saw them to the CQ
 *         read that returned the notification (rank 0's median; a
 *         notification that comes before its data is an error).
 *   wbw   write bandwidth: rank 0 posts WINDOW fi_write's (default 64) to
 *         distinct offsets, the last one fi_writedata with the window's
 *         notification; rank 1 reads its CQ until the notification, checks
 *         every message's stamps and sends an 8-byte acknowledgement (a
 *         tagged send); rank 0 waits for every completion and the
 *         acknowledgement (ofi_raw's bandwidth loop, with writes).
 *   rbw   read bandwidth: rank 0 posts WINDOW fi_read's from distinct offsets
 *         of rank 1's target region and waits for their completions (the
 *         data is then local), checking every message's stamps; rank 1 only
 *         reads its CQ (manual progress) until rank 0's closing tagged
 *         message. wbw and rbw time bench_bw_windows's count of windows
 *         (enough to move 256 MiB), at most MAX_WINDOWS.
 *   batch the batch rows of rma_util.h (256 x 1 KiB, 1,024 x 4 KiB): rank 0
 *         posts COUNT fi_writemsg's into distinct offsets, the last with
 *         FI_REMOTE_CQ_DATA, and waits for their completions; rank 1 notes
 *         when its CQ returned the notification and sends that time back in
 *         the acknowledgement. A batch takes from rank 0's first post until
 *         the later of the notification and rank 0's last completion (one
 *         host: CLOCK_MONOTONIC is the same clock in both processes); the
 *         row is the median of BATCHES (default 200) timed batches, after
 *         RMA_BATCH_WARMUP untimed.
 *
 * After each size of lat, wbw and rbw, rank 1 sends rank 0 a settling
 * message once it is done with its target region (it checked the last
 * payloads written there, or, rbw, filled what is to be read): the next
 * size's writes and reads wait for it.
 *
 * -v: the provider's mr_mode, rank 0's key, the inject limit and the data
 * progress, on stderr.
 *
 * Output (rank 0), one line per row:
 *   wlat  SIZE  one-way usec
 *   notif SIZE  usec              (median delivery latency, see lat)
 *   wbw   SIZE  MB/s
 *   rbw   SIZE  MB/s
 *   batch COUNT SIZE GB/s usec    (GB/s of the median batch, its usec)
 * Every message's stamps are checked; whole payloads on the first and the
 * last message (lat) or window (wbw, rbw) or batch of each size, outside
 * the timed loop. Exits non-zero on any error or payload mismatch.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
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
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "bench_util.h"
#include "raw_ofi.h"
#include "rma_util.h"

#define MAXW 128
#define MAXOPS 1024 /* the largest batch: each of its writes has a context */
#define NOTQ 64     /* notifications taken from the CQ, not yet waited for */

typedef struct {
  struct fi_context2 ctx; /* first: the op context */
  int done;
} op_t;

/* A notification as the CQ returned it: the remote CQ data, and when the
 * fi_cq_read that returned it did. */
typedef struct {
  uint64_t value, t_ns;
} notif_t;

static int rank, iters = 1000, window = 64, max_windows = 16384, batches = 200, verbose;
static const char *prov = "shm";
static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_cq *cq;
static struct fid_av *av;
static struct fid_ep *ep;
static struct fid_mr *lmr, *tmr, *cmr;
static void *ldesc, *cdesc;
static fi_addr_t peer;
/* the local region, the target region (the peer's to access) and the
 * control messages' (8 B out at 0, 8 B in at 8) */
static unsigned char *lbuf, *tbuf, *cbuf;
static uint64_t peer_base, peer_key; /* the peer's target region: remote address of offset 0, key */
static uint64_t stag, rtag;          /* next tagged send / receive tag */
static size_t inject_max;
/* a window's or batch's writes and reads, then the acknowledgement's
 * (ops[MAXOPS]) and settle's (ops[MAXOPS + 1]) messages */
static op_t ops[MAXOPS + 2];
static notif_t notq[NOTQ];
static unsigned notq_head, notq_tail;
static unsigned long errors;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, long rc) {
  fprintf(stderr, "ofi_rma_raw rank %d: %s: %s\n", rank, what, rc < 0 ? fi_strerror((int)-rc) : "failed");
  exit(1);
}

/* Reads the CQ until it is empty: a local completion marks its op done; a
 * remote write's CQ data is queued with the time it was read. */
static void drain(void) {
  struct fi_cq_tagged_entry ent[32];
  for (;;) {
    ssize_t n = fi_cq_read(cq, ent, 32);
    if (n > 0) {
      uint64_t t = 0;
      for (ssize_t i = 0; i < n; i++) {
        if (ent[i].flags & FI_REMOTE_CQ_DATA) {
          if (notq_tail - notq_head == NOTQ) die("notification queue overflow", 0);
          if (!t) t = now_ns();
          notq[notq_tail % NOTQ] = (notif_t){ent[i].data, t};
          notq_tail++;
        } else if (ent[i].op_context) {
          ((op_t *)ent[i].op_context)->done = 1;
        }
      }
      if (n < 32) return;
      continue;
    }
    if (n == -FI_EAGAIN) return;
    if (n == -FI_EAVAIL) raw_ofi_cq_fail(cq, "ofi_rma_raw", rank);
    die("fi_cq_read", n);
  }
}

static void wait_op(op_t *op) {
  while (!op->done) drain();
}

#define POST RAW_OFI_POST

static void op_start(op_t *op) {
  memset(&op->ctx, 0, sizeof op->ctx);
  op->done = 0;
}

/* Writes [loff, loff + len) of lbuf to offset roff of the peer's target
 * region; with notify, with value as remote CQ data. An injected write is
 * done on return (no completion). */
static void post_write(size_t loff, size_t len, size_t roff, int notify, uint64_t value, op_t *op) {
  op_start(op);
  uint64_t ra = peer_base + roff;
  if (len <= inject_max) {
    if (notify)
      POST(fi_inject_writedata(ep, lbuf + loff, len, value, peer, ra, peer_key));
    else
      POST(fi_inject_write(ep, lbuf + loff, len, peer, ra, peer_key));
    op->done = 1;
  } else if (notify) {
    POST(fi_writedata(ep, lbuf + loff, len, ldesc, value, peer, ra, peer_key, op));
  } else {
    POST(fi_write(ep, lbuf + loff, len, ldesc, peer, ra, peer_key, op));
  }
}

/* One write of a batch: fi_writemsg, with FI_REMOTE_CQ_DATA on the last. */
static void post_writemsg(size_t loff, size_t len, size_t roff, int notify, uint64_t value, op_t *op) {
  op_start(op);
  struct iovec iov = {lbuf + loff, len};
  struct fi_rma_iov riov = {peer_base + roff, len, peer_key};
  void *desc = ldesc;
  struct fi_msg_rma msg = {.msg_iov = &iov,
                           .desc = &desc,
                           .iov_count = 1,
                           .addr = peer,
                           .rma_iov = &riov,
                           .rma_iov_count = 1,
                           .context = op,
                           .data = value};
  uint64_t flags = (notify ? FI_REMOTE_CQ_DATA : 0) | (len <= inject_max ? FI_INJECT : 0);
  POST(fi_writemsg(ep, &msg, flags));
}

static void post_read(size_t loff, size_t len, size_t roff, op_t *op) {
  op_start(op);
  POST(fi_read(ep, lbuf + loff, len, ldesc, peer, peer_base + roff, peer_key, op));
}

/* The control messages (acknowledgements): 8 bytes, tagged, in order. */
static void post_ctl_send(uint64_t v, op_t *op) {
  op_start(op);
  memcpy(cbuf, &v, 8);
  if (8 <= inject_max) {
    POST(fi_tinject(ep, cbuf, 8, peer, stag));
    op->done = 1;
  } else {
    POST(fi_tsend(ep, cbuf, 8, cdesc, peer, stag, op));
  }
  stag++;
}

static void post_ctl_recv(op_t *op) {
  op_start(op);
  POST(fi_trecv(ep, cbuf + 8, 8, cdesc, FI_ADDR_UNSPEC, rtag, 0, op));
  rtag++;
}

static uint64_t ctl_value(void) {
  uint64_t v;
  memcpy(&v, cbuf + 8, 8);
  return v;
}

/* Rank 1 tells rank 0 that it is done with its target region (it checked
 * what was written there, or it filled what rank 0 is to read): until then
 * rank 0 does not touch it. */
static void settle(uint64_t v) {
  if (rank == 1) {
    post_ctl_send(v, &ops[MAXOPS + 1]);
    wait_op(&ops[MAXOPS + 1]);
    return;
  }
  post_ctl_recv(&ops[MAXOPS + 1]);
  wait_op(&ops[MAXOPS + 1]);
  if (ctl_value() != v) die("a wrong settling message", 0);
}

/* Waits for the next notification, which must be expect, and returns when
 * the CQ returned it. With p, the message it rides on is at p: its stamps
 * are watched while waiting, and *deliver_ns is the time from the poll that
 * first saw them to the notification. */
static uint64_t wait_notif(uint64_t expect, const unsigned char *p, size_t size, uint64_t *deliver_ns) {
  uint64_t t_data = 0;
  while (notq_head == notq_tail) {
    if (p && !t_data && rma_landed(p, size, expect)) t_data = now_ns();
    drain();
  }
  notif_t n = notq[notq_head % NOTQ];
  notq_head++;
  if (n.value != expect) {
    fprintf(stderr, "ofi_rma_raw rank %d: notification 0x%llx, expected 0x%llx\n", rank,
            (unsigned long long)n.value, (unsigned long long)expect);
    errors++;
  }
  if (p) {
    if (!t_data) {
      if (!rma_landed(p, size, expect)) {
        fprintf(stderr, "ofi_rma_raw rank %d: a notification came before its %zu bytes\n", rank, size);
        errors++;
      }
      t_data = n.t_ns;
    }
    if (deliver_ns) *deliver_ns = n.t_ns - t_data;
  }
  return n.t_ns;
}

static void check(const unsigned char *p, size_t size, uint64_t stamp, int full, const char *what) {
  size_t bad = rma_check(p, size, stamp, full);
  if (bad) {
    fprintf(stderr, "ofi_rma_raw rank %d: %s: byte %zu of a %zu-byte message differs\n", rank, what, bad - 1,
            size);
    errors++;
  }
}

/* lat: n timed rounds (after 10 untimed); returns the one-way usec and
 * rank 0's median delivery latency in *notif_us. */
static double run_lat(size_t size, int n, double *notif_us) {
  double *dl = calloc((size_t)n, sizeof *dl);
  if (!dl) die("memory", 0);
  uint64_t t0 = 0;
  rma_fill(lbuf, size, 0, 1);
  for (int i = -10; i < n; i++) {
    if (i == 0) t0 = now_ns();
    int full = i == -10; /* the last round's every byte is checked once the clock has stopped */
    uint64_t stamp = bench_lat_stamp(i, size), d = 0;
    /* a rank checks the peer's message before it writes back: once it
     * has, the peer may write the next one over it */
    if (rank == 0) {
      rma_fill(lbuf, size, stamp, full);
      post_write(0, size, 0, 1, stamp, &ops[0]);
      wait_notif(stamp, tbuf, size, &d);
      check(tbuf, size, stamp, full, "lat");
      wait_op(&ops[0]);
    } else {
      wait_notif(stamp, tbuf, size, &d);
      check(tbuf, size, stamp, full, "lat");
      rma_fill(lbuf, size, stamp, full);
      post_write(0, size, 0, 1, stamp, &ops[0]);
      wait_op(&ops[0]);
    }
    if (i >= 0) dl[i] = (double)d / 1e3;
  }
  double us = (double)(now_ns() - t0) / 1e3 / n / 2.0;
  check(tbuf, size, bench_lat_stamp(n - 1, size), 1, "lat"); /* the last message received */
  *notif_us = rma_median(dl, n);
  free(dl);
  settle(size);
  return us;
}

/* wbw: n timed windows of w writes; returns seconds. */
static double run_wbw(size_t size, int n, int w) {
  uint64_t t0 = 0;
  for (int k = 0; k < w; k++) rma_fill(lbuf + (size_t)k * size, size, 0, 1);
  for (int i = -2; i < n; i++) {
    if (i == 0) t0 = now_ns();
    uint64_t last = bench_bw_stamp(i, w - 1, size);
    if (rank == 0) {
      post_ctl_recv(&ops[MAXOPS]);
      for (int k = 0; k < w; k++) {
        rma_fill(lbuf + (size_t)k * size, size, bench_bw_stamp(i, k, size), 0);
        post_write((size_t)k * size, size, (size_t)k * size, k == w - 1, last, &ops[k]);
      }
      for (int k = 0; k < w; k++) wait_op(&ops[k]);
      wait_op(&ops[MAXOPS]);
      if (ctl_value() != last) die("wbw: wrong acknowledgement", 0);
    } else {
      wait_notif(last, NULL, size, NULL);
      /* the last window's whole payloads are checked after its
       * acknowledgement, outside the clock */
      for (int k = 0; k < w; k++)
        check(tbuf + (size_t)k * size, size, bench_bw_stamp(i, k, size), i == -2, "wbw");
      post_ctl_send(last, &ops[MAXOPS]);
      wait_op(&ops[MAXOPS]);
    }
  }
  double secs = (double)(now_ns() - t0) / 1e9;
  if (rank == 1)
    for (int k = 0; k < w; k++)
      check(tbuf + (size_t)k * size, size, bench_bw_stamp(n - 1, k, size), 1, "wbw");
  settle(size);
  return secs;
}

/* rbw: n timed windows of w reads by rank 0; returns seconds. */
static double run_rbw(size_t size, int n, int w) {
  uint64_t t0 = 0;
  if (rank == 1) {
    for (int k = 0; k < w; k++) rma_fill(tbuf + (size_t)k * size, size, bench_bw_stamp(0, k, size), 1);
    settle(size);
    post_ctl_recv(&ops[MAXOPS]);
    wait_op(&ops[MAXOPS]); /* reading the CQ until then is what serves rank 0's reads */
    if (ctl_value() != (uint64_t)size) die("rbw: wrong closing message", 0);
    return 0;
  }
  settle(size);
  for (int i = -2; i < n; i++) {
    if (i == 0) t0 = now_ns();
    for (int k = 0; k < w; k++) {
      rma_clear(lbuf + (size_t)k * size, size);
      post_read((size_t)k * size, size, (size_t)k * size, &ops[k]);
    }
    for (int k = 0; k < w; k++) wait_op(&ops[k]);
    for (int k = 0; k < w; k++)
      check(lbuf + (size_t)k * size, size, bench_bw_stamp(0, k, size), i == -2, "rbw");
  }
  double secs = (double)(now_ns() - t0) / 1e9;
  for (int k = 0; k < w; k++) check(lbuf + (size_t)k * size, size, bench_bw_stamp(0, k, size), 1, "rbw");
  post_ctl_send(size, &ops[MAXOPS]);
  wait_op(&ops[MAXOPS]);
  return secs;
}

/* batch: nb timed batches of count writes of size bytes; returns the
 * median batch's usec (rank 0). */
static double run_batch(size_t count, size_t size, int nb) {
  double *us = calloc((size_t)nb, sizeof *us);
  if (!us) die("memory", 0);
  for (size_t j = 0; j < count; j++) rma_fill(lbuf + j * size, size, 0, 1);
  for (int b = -RMA_BATCH_WARMUP; b < nb; b++) {
    int full = b == -RMA_BATCH_WARMUP;
    uint64_t last = bench_bw_stamp(b, (int)count - 1, size);
    if (rank == 0) {
      for (size_t j = 0; j < count; j++) rma_fill(lbuf + j * size, size, bench_bw_stamp(b, (int)j, size), 0);
      post_ctl_recv(&ops[MAXOPS]);
      uint64_t t0 = now_ns();
      for (size_t j = 0; j < count; j++)
        post_writemsg(j * size, size, j * size, j == count - 1, last, &ops[j]);
      for (size_t j = 0; j < count; j++) wait_op(&ops[j]);
      uint64_t t_local = now_ns();
      wait_op(&ops[MAXOPS]);
      uint64_t t_notif = ctl_value(), t_end = t_notif > t_local ? t_notif : t_local;
      if (b >= 0) us[b] = (double)(t_end - t0) / 1e3;
    } else {
      uint64_t t_notif = wait_notif(last, NULL, size, NULL);
      for (size_t j = 0; j < count; j++)
        check(tbuf + j * size, size, bench_bw_stamp(b, (int)j, size), full || b == nb - 1, "batch");
      post_ctl_send(t_notif, &ops[MAXOPS]);
      wait_op(&ops[MAXOPS]);
    }
  }
  double med = rank == 0 ? rma_median(us, nb) : 0;
  free(us);
  return med;
}

static void xfer(int sock, const void *out, void *in, size_t len) {
  if (write(sock, out, len) != (ssize_t)len || read(sock, in, len) != (ssize_t)len) die("exchange", 0);
}

static void setup(int sock) {
  raw_ofi_env_defaults();
  int rc = raw_ofi_getinfo_caps(
      prov, FI_THREAD_SAFE, FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
      FI_ORDER_SAS | FI_ORDER_SAW | FI_ORDER_WAW | FI_ORDER_RAW | FI_ORDER_RAR, &info);
  if (rc) die("fi_getinfo", rc);
  if (info->domain_attr->mr_mode & FI_MR_RAW)
    die("the provider's keys are raw (FI_MR_RAW): not supported", 0);
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

/* Registers the three regions (need bytes for the local and the target
 * one) and swaps the target region's remote address and key with the
 * peer. */
static void reg(int sock, size_t need) {
  int need_desc = (info->domain_attr->mr_mode & FI_MR_LOCAL) != 0, rc;
  inject_max = raw_ofi_inject_max(prov, info);
  if (posix_memalign((void **)&lbuf, 4096, need) || posix_memalign((void **)&tbuf, 4096, need) ||
      posix_memalign((void **)&cbuf, 4096, 4096))
    die("memory", 0);
  memset(lbuf, 0, need);
  memset(tbuf, 0, need);
  memset(cbuf, 0, 4096);
  if ((rc = fi_mr_reg(domain, lbuf, need, FI_WRITE | FI_READ, 0, 1, 0, &lmr, NULL)))
    die("fi_mr_reg(local)", rc);
  if ((rc = fi_mr_reg(domain, tbuf, need, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 2, 0, &tmr, NULL)))
    die("fi_mr_reg(target)", rc);
  if ((rc = fi_mr_reg(domain, cbuf, 4096, FI_SEND | FI_RECV, 0, 3, 0, &cmr, NULL)))
    die("fi_mr_reg(control)", rc);
  ldesc = need_desc ? fi_mr_desc(lmr) : NULL;
  cdesc = need_desc ? fi_mr_desc(cmr) : NULL;
  uint64_t mine[2] = {(info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)tbuf : 0,
                      fi_mr_key(tmr)},
           theirs[2];
  if (mine[1] == FI_KEY_NOTAVAIL) die("fi_mr_key", 0);
  xfer(sock, mine, theirs, sizeof mine);
  peer_base = theirs[0];
  peer_key = theirs[1];
  if (verbose && rank == 0) {
    uint64_t mm = (uint64_t)info->domain_attr->mr_mode;
    fprintf(stderr, "ofi_rma_raw: %s: mr_mode%s%s%s%s, key 0x%llx, inject up to %zu B, data progress %s\n",
            info->fabric_attr->prov_name, mm & FI_MR_LOCAL ? " LOCAL" : "",
            mm & FI_MR_VIRT_ADDR ? " VIRT_ADDR" : "", mm & FI_MR_PROV_KEY ? " PROV_KEY" : "",
            mm & FI_MR_ALLOCATED ? " ALLOCATED" : "", (unsigned long long)mine[1], inject_max,
            info->domain_attr->data_progress == FI_PROGRESS_AUTO ? "auto" : "manual");
  }
}

/* Both ranks meet here so neither goes on (or closes) while the other
 * still needs it. */
static void sync_ranks(int sock) {
  char c = 's', d;
  xfer(sock, &c, &d, 1);
}

int main(int argc, char **argv) {
  const char *mode = "all", *list = NULL;
  size_t minsz = 0, maxsz = 0;
  int opt;
  const char *env = getenv("ASR_PROVIDER");
  if (env && *env) prov = env;
  while ((opt = getopt(argc, argv, "p:m:z:s:S:n:w:N:b:vh")) != -1) {
    switch (opt) {
      case 'p': prov = optarg; break;
      case 'm': mode = optarg; break;
      case 'z': list = optarg; break;
      case 's': minsz = strtoull(optarg, NULL, 0); break;
      case 'S': maxsz = strtoull(optarg, NULL, 0); break;
      case 'n': iters = atoi(optarg); break;
      case 'w': window = atoi(optarg); break;
      case 'N': max_windows = atoi(optarg); break;
      case 'b': batches = atoi(optarg); break;
      case 'v': verbose = 1; break;
      default: goto usage;
    }
  }
  size_t sizes[RMA_MAX_SIZES];
  int nsizes = 0;
  if (minsz || maxsz) {
    if (list || minsz < 8 || maxsz < minsz) goto usage;
    for (size_t s = minsz; s <= maxsz && nsizes < RMA_MAX_SIZES; s *= 2) sizes[nsizes++] = s;
  } else if ((nsizes = rma_parse_sizes(list ? list : RMA_DEFAULT_SIZES, sizes, RMA_MAX_SIZES)) < 0) {
    goto usage;
  }
  int do_lat = !strcmp(mode, "lat") || !strcmp(mode, "all");
  int do_wbw = !strcmp(mode, "wbw") || !strcmp(mode, "all");
  int do_rbw = !strcmp(mode, "rbw") || !strcmp(mode, "all");
  int do_batch = !strcmp(mode, "batch") || !strcmp(mode, "all");
  if (!(do_lat || do_wbw || do_rbw || do_batch) || iters < 1 || window < 1 || window > MAXW ||
      max_windows < 1 || batches < 1)
    goto usage;
  /* the regions: the largest window of the largest size, or batch */
  size_t need = 0;
  for (int i = 0; i < nsizes; i++) {
    size_t v = sizes[i] * (do_wbw || do_rbw ? (size_t)window : 1);
    if (v > need) need = v;
  }
  for (int i = 0; do_batch && i < RMA_NBATCH; i++)
    if (rma_batch_count[i] * rma_batch_size[i] > need) need = rma_batch_count[i] * rma_batch_size[i];
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
  reg(sock, need);
  sync_ranks(sock);
  if (do_lat) {
    double d;
    run_lat(sizes[0], bench_warmup_rounds(sizes[0], iters), &d); /* untimed (bench_util.h) */
    for (int i = 0; i < nsizes; i++) {
      double us = run_lat(sizes[i], bench_lat_rounds(sizes[i], iters), &d);
      if (rank == 0) printf("wlat %zu %.3f\nnotif %zu %.3f\n", sizes[i], us, sizes[i], d);
    }
  }
  for (int i = 0; do_wbw && i < nsizes; i++) {
    int n = bench_bw_windows(sizes[i], window);
    if (n > max_windows) n = max_windows;
    double secs = run_wbw(sizes[i], n, window);
    if (rank == 0) printf("wbw %zu %.3f\n", sizes[i], (double)sizes[i] * window * n / secs / 1e6);
  }
  for (int i = 0; do_rbw && i < nsizes; i++) {
    int n = bench_bw_windows(sizes[i], window);
    if (n > max_windows) n = max_windows;
    double secs = run_rbw(sizes[i], n, window);
    if (rank == 0) printf("rbw %zu %.3f\n", sizes[i], (double)sizes[i] * window * n / secs / 1e6);
  }
  for (int i = 0; do_batch && i < RMA_NBATCH; i++) {
    double us = run_batch(rma_batch_count[i], rma_batch_size[i], batches);
    if (rank == 0)
      printf("batch %zu %zu %.3f %.3f\n", rma_batch_count[i], rma_batch_size[i],
             (double)(rma_batch_count[i] * rma_batch_size[i]) / us / 1e3, us);
  }
  fflush(stdout);
  sync_ranks(sock);
  fi_close(&ep->fid);
  fi_close(&lmr->fid);
  fi_close(&tmr->fid);
  fi_close(&cmr->fid);
  fi_close(&av->fid);
  fi_close(&cq->fid);
  fi_close(&domain->fid);
  fi_close(&fabric->fid);
  fi_freeinfo(info);
  free(lbuf);
  free(tbuf);
  free(cbuf);
  if (errors) fprintf(stderr, "ofi_rma_raw rank %d: %lu payload errors\n", rank, errors);
  if (rank == 1) _exit(errors ? 1 : 0);
  int st = 0;
  if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "ofi_rma_raw: rank 1 failed\n");
    return 1;
  }
  return errors ? 1 : 0;
usage:
  fprintf(
      stderr,
      "usage: ofi_rma_raw [-p PROVIDER] [-m lat|wbw|rbw|batch|all] [-z SIZES] [-s MIN] [-S MAX] [-n ITERS]\n"
      "                   [-w WINDOW (1..%d)] [-N MAX_WINDOWS] [-b BATCHES] [-v]  (sizes at least 8 bytes)\n",
      MAXW);
  return 2;
}
