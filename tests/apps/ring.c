/*
 * ring -- N ranks in a ring through libasr: every round each rank sends a
 * verified buffer to rank+1 and receives one from rank-1.
 *
 *   ring [-n RANKS] [-k ROUNDS] [-s MIN] [-S MAX] [-l LNC0] [-t TIMEOUT_S] [-q] [-C]
 *
 * One invocation forks RANKS processes (default 4, 1..128) on this host;
 * rank r runs on LNC LNC0 + r (default LNC0 = 0, so LNC = rank) and opens a
 * SEND comm to LNC0 + (r+1)%N and a RECV comm from LNC0 + (r-1+N)%N over
 * 127.0.0.1 (one rank: a ring to itself). Round k moves a message whose size
 * steps through MIN, 2*MIN, ... MAX (defaults 1 B .. 1 MiB) and whose bytes
 * are derived from (sender, round), so the receiver checks every byte and
 * the length it was told. The receive buffer is poisoned before each round.
 * The sizes cycle, and the send and receive slots alternate between two
 * tensors so back-to-back rounds use different memory.
 *
 * Environment: ASR_PROVIDER (shm by default, or 'tcp;ofi_rxm'). Without
 * ASR_BOOTSTRAP_PORT a free port is picked, without ASR_KV_LOCK_DIR a private
 * lock directory is used (see asr_launch.h).
 *
 * Prints one line per rank (rounds, bytes, errors, microseconds per round)
 * (-q: only the summary); exits 0 only when every rank saw every byte it
 * expected. -C is the checker's self-test: rank 0 spoils one byte in round 3,
 * and the run must FAIL.
 */
#include "config.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr.h"
#include "asr_launch.h"

typedef struct {
  int rounds, lnc0, quiet, corrupt;
  size_t minsz, maxsz;
} ring_opts_t;

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/* Fills / checks p[0..len) with the stream of (sender, round). */
static void fill(unsigned char *p, size_t len, int sender, int round) {
  uint64_t s = mix64(((uint64_t)sender << 32) ^ (uint64_t)round ^ 0x5a5a5a5aull);
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    s = mix64(s + 0x9e3779b97f4a7c15ull);
    memcpy(p + i, &s, 8);
  }
  if (i < len) {
    s = mix64(s + 0x9e3779b97f4a7c15ull);
    memcpy(p + i, &s, len - i);
  }
}

static size_t first_diff(const unsigned char *p, size_t len, int sender, int round, unsigned char *scratch) {
  fill(scratch, len, sender, round);
  if (memcmp(p, scratch, len) == 0) return (size_t)-1;
  for (size_t i = 0; i < len; i++)
    if (p[i] != scratch[i]) return i;
  return (size_t)-1;
}

static size_t round_size(const ring_opts_t *o, int round) {
  int steps = 0;
  for (size_t s = o->minsz; s <= o->maxsz && s * 2 > s; s *= 2) steps++;
  size_t sz = o->minsz;
  for (int i = 0; i < round % steps; i++) sz *= 2;
  return sz;
}

static int wait_req(asr_request_t *r, size_t *got, int rank, const char *what) {
  int done = 0;
  size_t sz = 0;
  while (!done) {
    int st = asr_test(r, &done, &sz);
    if (st) {
      fprintf(stderr, "ring rank %d: %s failed: %s\n", rank, what, asr_strerror(st));
      return -1;
    }
  }
  if (got) *got = sz;
  return 0;
}

static int rank_main(int rank, int n, void *arg) {
  const ring_opts_t *o = arg;
  int lnc = o->lnc0 + rank, next = o->lnc0 + (rank + 1) % n, prev = o->lnc0 + (rank - 1 + n) % n;
  asr_comm_t *sc = NULL, *rc = NULL;
  asr_tensor_t *sbuf[2] = {NULL, NULL}, *rbuf[2] = {NULL, NULL};
  unsigned long errors = 0;
  /* The ranks come up, race for the host's KV election and close in any
   * order: whoever leads, the RECV comms still waiting for a sender when it
   * closes publish their handles on the next leader. */
  int st = asr_init(lnc);
  if (st) {
    fprintf(stderr, "ring rank %d: asr_init(%d): %s\n", rank, lnc, asr_strerror(st));
    return 1;
  }
  if ((st = asr_connect(lnc, "127.0.0.1", next, &sc)) || (st = asr_accept(lnc, "127.0.0.1", prev, &rc))) {
    fprintf(stderr, "ring rank %d: connect/accept: %s\n", rank, asr_strerror(st));
    return 1;
  }
  if ((st = asr_comm_wait_connected(sc, 60000)) || (st = asr_comm_wait_connected(rc, 60000))) {
    fprintf(stderr, "ring rank %d: comms did not connect: %s\n", rank, asr_strerror(st));
    return 1;
  }
  for (int i = 0; i < 2; i++)
    if ((st = asr_tensor_alloc(o->maxsz + 64, &sbuf[i])) ||
        (st = asr_tensor_alloc(o->maxsz + 64, &rbuf[i]))) {
      fprintf(stderr, "ring rank %d: asr_tensor_alloc: %s\n", rank, asr_strerror(st));
      return 1;
    }
  unsigned char *scratch = malloc(o->maxsz + 64);
  if (!scratch) return 1;
  uint64_t bytes = 0, t0 = launch_now_ns();
  for (int k = 0; k < o->rounds; k++) {
    size_t sz = round_size(o, k);
    /* an odd offset every other round, so unaligned slices are covered too */
    size_t off = (k & 2) ? 7 : 0;
    asr_tensor_t *s = sbuf[k & 1], *r = rbuf[k & 1];
    unsigned char *sp = (unsigned char *)asr_tensor_va(s) + off,
                  *rp = (unsigned char *)asr_tensor_va(r) + off;
    memset(rp, 0xa5, sz + 8);
    fill(sp, sz, rank, k);
    if (o->corrupt && rank == 0 && k == 3) sp[sz / 2] ^= 0x40; /* -C: the checker's self-test */
    asr_request_t *rq, *sq;
    if ((st = asr_irecv(rc, r, off, sz, &rq))) {
      fprintf(stderr, "ring rank %d: asr_irecv round %d: %s\n", rank, k, asr_strerror(st));
      return 1;
    }
    if ((st = asr_isend(sc, s, off, sz, &sq))) {
      fprintf(stderr, "ring rank %d: asr_isend round %d: %s\n", rank, k, asr_strerror(st));
      return 1;
    }
    size_t got = 0;
    if (wait_req(sq, NULL, rank, "send") || wait_req(rq, &got, rank, "receive")) return 1;
    if (got != sz) {
      fprintf(stderr, "ring rank %d: round %d: received %zu bytes from rank %d, expected %zu\n", rank, k, got,
              (rank - 1 + n) % n, sz);
      errors++;
      continue;
    }
    size_t d = first_diff(rp, sz, (rank - 1 + n) % n, k, scratch);
    if (d != (size_t)-1) {
      fprintf(stderr, "ring rank %d: round %d: byte %zu of %zu from rank %d differs\n", rank, k, d, sz,
              (rank - 1 + n) % n);
      errors++;
    }
    for (size_t i = sz; i < sz + 8; i++)
      if (rp[i] != 0xa5) {
        fprintf(stderr, "ring rank %d: round %d: byte %zu past the %zu-byte message was written\n", rank, k,
                i, sz);
        errors++;
        break;
      }
    bytes += sz;
  }
  double us = (double)(launch_now_ns() - t0) / 1e3;
  double rep[3] = {(double)errors, (double)bytes, us};
  launch_report(rep, 3);
  if (!o->quiet)
    printf("ring rank %d (lnc %d -> %d): %d rounds, %llu bytes received, %lu errors, %.2f us/round\n", rank,
           lnc, next, o->rounds, (unsigned long long)bytes, errors, us / o->rounds);
  fflush(stdout);
  /* nobody closes before every rank is done with its peers */
  if (launch_barrier() != 0) return 1;
  asr_comm_close(sc);
  asr_comm_close(rc);
  for (int i = 0; i < 2; i++) {
    asr_tensor_free(sbuf[i]);
    asr_tensor_free(rbuf[i]);
  }
  free(scratch);
  asr_close(lnc);
  return errors ? 1 : 0;
}

int main(int argc, char **argv) {
  ring_opts_t o = {.rounds = 200, .lnc0 = 0, .minsz = 1, .maxsz = 1u << 20};
  int n = 4, timeout_s = 120, opt;
  while ((opt = getopt(argc, argv, "n:k:s:S:l:t:qCh")) != -1) {
    switch (opt) {
      case 'n': n = atoi(optarg); break;
      case 'k': o.rounds = atoi(optarg); break;
      case 's': o.minsz = strtoull(optarg, NULL, 0); break;
      case 'S': o.maxsz = strtoull(optarg, NULL, 0); break;
      case 'l': o.lnc0 = atoi(optarg); break;
      case 't': timeout_s = atoi(optarg); break;
      case 'q': o.quiet = 1; break;
      case 'C': o.corrupt = 1; break;
      default:
        fprintf(stderr,
                "usage: ring [-n RANKS] [-k ROUNDS] [-s MIN] [-S MAX] [-l LNC0] [-t TIMEOUT_S] [-q] [-C]\n");
        return 2;
    }
  }
  if (n < 1 || n > LAUNCH_MAX || o.lnc0 < 0 || o.lnc0 + n > ASR_MAX_LNC || o.rounds < 1 || o.minsz < 1 ||
      o.maxsz < o.minsz || timeout_s < 1) {
    fprintf(stderr, "ring: need 1 <= -n, -l + -n <= 128, -k >= 1, 1 <= -s <= -S, -t >= 1\n");
    return 2;
  }
  uint64_t t0 = launch_now_ns();
  int rc = launch_run(n, rank_main, &o, timeout_s, "ring");
  double secs = (double)(launch_now_ns() - t0) / 1e9;
  double errors = 0, bytes = 0, us = 0;
  int reported = 0;
  for (int r = 0; r < n; r++)
    if (launch_nreports[r]) {
      reported++;
      errors += launch_reports[r][0];
      bytes += launch_reports[r][1];
      if (launch_reports[r][2] > us) us = launch_reports[r][2];
    }
  printf(
      "ring: %d ranks, %d rounds, sizes %zu..%zu B, provider %s: %d/%d ranks reported, %.0f bytes verified, "
      "%.0f errors, slowest rank %.2f us/round, %.2f s in all: %s\n",
      n, o.rounds, o.minsz, o.maxsz, getenv("ASR_PROVIDER") ? getenv("ASR_PROVIDER") : "shm", reported, n,
      bytes, errors, reported ? us / o.rounds : 0.0, secs,
      rc == 0 && errors == 0 && reported == n ? "PASS" : "FAIL");
  return rc == 0 && errors == 0 && reported == n ? 0 : 1;
}
