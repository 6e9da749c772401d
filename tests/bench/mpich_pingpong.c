/*
 * mpich_pingpong -- the MPICH column of tests/bench/ofi_bench.sh: one-way
 * latency between two MPI ranks, in the way the usual MPI PingPong
 * benchmarks time it, to set libasr's same-host latency beside an MPI
 * library's on the same two CPUs.
 *
 *   mpiexec -n 2 mpich_pingpong [-n ITERS] [-w WARMUP] SIZE...
 *
 * For each SIZE (bytes, in the order given): both ranks pass a barrier,
 * then WARMUP untimed round trips (default: ITERS, at most 1000) and ITERS
 * timed ones (default 1000; a tenth of it, at least 10, from 1 MiB, as
 * tests/apps/bench_util.h counts pingpong's). A round trip: rank 0
 * MPI_Send then MPI_Recv, rank 1 MPI_Recv then MPI_Send, the same buffer
 * size each way, with the same tag on MPI_COMM_WORLD. One-way latency is
 * the timed loop's time (MPI_Wtime on rank 0) / (2 * ITERS). Every message
 * carries a stamp (round and size) in its first bytes that the receiver
 * checks; the first warm-up round's and the last timed round's are compared
 * byte for byte.
 * Rank 0 prints one line per size, pingpong's format:
 *   lat SIZE one-way-usec
 * Exits non-zero (MPI_Abort) on a wrong payload or a bad argument.
 *
 * It is not part of the autotools build: ofi_bench.sh compiles it with
 * mpicc.mpich into its work directory when that compiler is there.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

static int rank;

static void fail(const char *msg) {
  fprintf(stderr, "mpich_pingpong rank %d: %s\n", rank, msg);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static uint64_t stamp_of(long i, size_t size) { return ((uint64_t)i << 32) ^ (uint64_t)size; }

static void check(const unsigned char *p, size_t size, uint64_t stamp, int full, size_t got) {
  if (got != size) fail("a message of the wrong length");
  if (!bench_stamp_ok(p, size, stamp)) fail("a message with the wrong stamp");
  if (full)
    for (size_t i = size >= 8 ? 8 : 1; i < size; i++)
      if (p[i] != (unsigned char)((i * 131 + size) & 0xff)) fail("a message whose bytes differ");
}

/* Rounds i in [from, to) of one size; returns the time they took. Only the
 * stamp is written per round (the pattern behind it was filled once); every
 * byte is compared on the round `full` (the first warm-up round; -1: none),
 * the last timed round's message after the clock stopped (main). */
static double rounds(unsigned char *s, unsigned char *r, size_t size, long from, long to, long full) {
  MPI_Status st;
  int n = (int)size;
  double t0 = MPI_Wtime();
  for (long i = from; i < to; i++) {
    uint64_t stamp = stamp_of(i, size);
    if (rank == 0) {
      bench_fill(s, size, stamp, 0);
      MPI_Send(s, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(r, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, &st);
    } else {
      MPI_Recv(r, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &st);
      bench_fill(s, size, stamp, 0);
      MPI_Send(s, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    check(r, size, stamp, i == full, (size_t)got);
  }
  return MPI_Wtime() - t0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (nranks != 2) fail("needs exactly 2 ranks");
  long iters = 1000, warm = -1;
  int a = 1;
  for (; a < argc && argv[a][0] == '-'; a++) {
    if (!strcmp(argv[a], "-n") && a + 1 < argc)
      iters = atol(argv[++a]);
    else if (!strcmp(argv[a], "-w") && a + 1 < argc)
      warm = atol(argv[++a]);
    else
      fail("usage: mpich_pingpong [-n ITERS] [-w WARMUP] SIZE...");
  }
  if (iters < 1 || a == argc) fail("usage: mpich_pingpong [-n ITERS] [-w WARMUP] SIZE...");
  size_t maxsz = 1;
  for (int k = a; k < argc; k++) {
    long v = atol(argv[k]);
    if (v < 0 || v > (1l << 30)) fail("a size must be 0 .. 1 GiB");
    if ((size_t)v > maxsz) maxsz = (size_t)v;
  }
  unsigned char *s = malloc(maxsz), *r = malloc(maxsz);
  if (!s || !r) fail("out of memory");
  memset(s, 0, maxsz);
  memset(r, 0, maxsz);
  for (int k = a; k < argc; k++) {
    size_t size = (size_t)atol(argv[k]);
    long n = size >= ((size_t)1 << 20) ? (iters / 10 > 10 ? iters / 10 : 10) : iters;
    long w = warm >= 0 ? warm : (n < 1000 ? n : 1000);
    bench_fill(s, size, 0, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    if (w > 0) rounds(s, r, size, -w, 0, -w);
    double t = rounds(s, r, size, 0, n, -1);
    check(r, size, stamp_of(n - 1, size), 1, size); /* the last timed round's message, every byte */
    if (rank == 0) {
      printf("lat %zu %.3f\n", size, t * 1e6 / (2.0 * (double)n));
      fflush(stdout);
    }
  }
  free(s);
  free(r);
  MPI_Finalize();
  return 0;
}
