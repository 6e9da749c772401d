/*
 * cacheline_floor -- the physical floor under any same-host message of
 * tests/bench/ofi_bench.sh: how long one cache line takes to travel from
 * one CPU to the other and back, with nothing else in the way.
 *
 *   cacheline_floor [-n ROUND_TRIPS]
 *
 * Forks a second process; the two share one anonymous mapping
 * (MAP_SHARED | MAP_ANONYMOUS) and bounce a single 64-byte-aligned word in it:
 * process 0 stores the odd value 2i+1 (a release store), process 1 spins
 * until it sees it (acquire loads), stores 2i+2, and process 0 spins until it
 * sees that. Each store moves the line to the writer's cache and each load
 * that then sees it moves it back, so one round trip is two transfers of one
 * line between the CPUs, the least any message between two processes can
 * cost (a shared-memory transport moves at least one line each way, its
 * flag and its payload in one). With BENCH_PIN=1 (ofi_bench.sh sets it) the
 * processes run on the first two CPUs this one may use, the CPUs every
 * two-rank run of the bench uses (tests/apps/bench_util.h).
 *
 * The spin is a bare load loop, no pause instruction: a pause costs tens of
 * nanoseconds on recent x86 cores, which would be a property of the wait,
 * not of the line's trip. Every 2^16 spins (far more than one trip takes
 * while both run) a waiter checks that its partner is still there, so
 * neither spins forever after the other died, and yields its CPU: when the
 * two share one CPU (unpinned, or the machine busy) the partner then runs at
 * once rather than after the waiter's whole time slice.
 *
 * ROUND_TRIPS (default 1000000) are timed on process 0 after 10000 untimed
 * ones. Prints one line:
 *   floor RTT_NS ONE_WAY_NS
 * (round trip and half of it, in nanoseconds). Exits non-zero on failure.
 */
#include "config.h"

#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define WARMUP 10000

/* The line that travels; padded to a whole line so nothing else shares it
 * (the mapping is page aligned, so the struct starts a line). */
typedef struct {
  _Atomic uint64_t v;
  char pad[64 - sizeof(uint64_t)];
} line_t;

static pid_t peer; /* process 0: the child's pid; process 1: the parent's */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Process 0 asks whether the child still runs; process 1 whether the parent
 * that forked it still does (it was reparented once it died). */
static int partner_gone(int rank) {
  if (rank == 1) return getppid() != peer;
  int st;
  return waitpid(peer, &st, WNOHANG) != 0;
}

/* Spins until the line holds want. Returns 0, or -1 when the partner died. */
static int wait_for(line_t *l, uint64_t want, int rank) {
  unsigned spins = 0;
  while (atomic_load_explicit(&l->v, memory_order_acquire) != want)
    if ((++spins & 0xffff) == 0) {
      if (partner_gone(rank)) return -1;
      sched_yield();
    }
  return 0;
}

/* Rounds i in [from, to) of one process: 0 sends the odd values, 1 answers. */
static int bounce(line_t *l, int rank, long from, long to) {
  for (long i = from; i < to; i++) {
    uint64_t ping = 2 * (uint64_t)i + 1;
    if (rank == 0) {
      atomic_store_explicit(&l->v, ping, memory_order_release);
      if (wait_for(l, ping + 1, rank)) return -1;
    } else {
      if (wait_for(l, ping, rank)) return -1;
      atomic_store_explicit(&l->v, ping + 1, memory_order_release);
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  long n = 1000000;
  int opt;
  while ((opt = getopt(argc, argv, "n:h")) != -1) {
    switch (opt) {
      case 'n': n = atol(optarg); break;
      default: fprintf(stderr, "usage: cacheline_floor [-n ROUND_TRIPS]\n"); return 2;
    }
  }
  if (n < 1) {
    fprintf(stderr, "cacheline_floor: -n must be at least 1\n");
    return 2;
  }
  line_t *l = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (l == MAP_FAILED) {
    perror("cacheline_floor: mmap");
    return 1;
  }
  atomic_store(&l->v, 0);
  pid_t parent = getpid();
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) {
    perror("cacheline_floor: fork");
    return 1;
  }
  int rank = child == 0;
  if (rank == 1) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    peer = parent;
    if (getppid() != parent) _exit(1);
  } else {
    peer = child;
  }
  bench_pin(rank);
  if (bounce(l, rank, 0, WARMUP)) goto gone;
  uint64_t t0 = now_ns();
  if (bounce(l, rank, WARMUP, WARMUP + n)) goto gone;
  uint64_t t1 = now_ns();
  if (rank == 1) _exit(0);
  int st;
  if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "cacheline_floor: the second process failed\n");
    return 1;
  }
  double rtt = (double)(t1 - t0) / (double)n;
  printf("floor %.1f %.1f\n", rtt, rtt / 2);
  return 0;
gone:
  fprintf(stderr, "cacheline_floor: process %d: its partner died\n", rank);
  if (rank == 1) _exit(1);
  return 1;
}
