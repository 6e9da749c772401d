/*
 * bench_util.h -- what the benchmark programs share, so that libasr's side
 * (tests/apps/pingpong.c, tests/apps/asr_launch.h), the raw libfabric
 * baseline (tests/bench/ofi_raw.c) and MPICH's (tests/bench/mpich_pingpong.c)
 * measure alike. Header-only.
 */
#ifndef ASR_BENCH_UTIL_H
#define ASR_BENCH_UTIL_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* BENCH_PIN=1 (tests/bench/ofi_bench.sh sets it): rank r runs on CPU r modulo
 * the CPUs it may use, as asrrun --bind-to core would place it; threads it
 * starts later inherit the CPU. Unpinned, two spinning ranks on a machine
 * with few CPUs get figures that swing from run to run with the scheduler's
 * placement of them, more than any change they are run to compare. */
static inline void bench_pin(int r) {
  const char *v = getenv("BENCH_PIN");
  if (!v || strcmp(v, "1") != 0) return;
  cpu_set_t allowed, one;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 1) return;
  int want = r % CPU_COUNT(&allowed), seen = 0;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &allowed) && seen++ == want) {
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      (void)sched_setaffinity(0, sizeof one, &one);
      return;
    }
}

/* Untimed round trips before the first latency size. Each size also gets 10
 * of its own, but on tcp;ofi_rxm the first size measured after connecting
 * still ran slow, well above the sizes after it: the socket path needs more
 * than 10 exchanges to settle. Both pingpong and ofi_raw run these, so both
 * sides start alike. */
#define BENCH_WARMUP_ROUNDS 1000

/* Timed round trips for a latency size: iters, a tenth of it (at least 10)
 * from 1 MiB. The warm-up is BENCH_WARMUP_ROUNDS or this, whichever is less. */
static inline int bench_lat_rounds(size_t size, int iters) {
  return size >= ((size_t)1 << 20) ? (iters / 10 > 10 ? iters / 10 : 10) : iters;
}
static inline int bench_warmup_rounds(size_t size, int iters) {
  int n = bench_lat_rounds(size, iters);
  return n < BENCH_WARMUP_ROUNDS ? n : BENCH_WARMUP_ROUNDS;
}

/* The stamp in a message's first 8 bytes (its first byte below 8 bytes):
 * latency round i (from -10, the warm-up) of size, and message k of
 * bandwidth window i (from -2) of size. Every message is checked by it. */
static inline uint64_t bench_lat_stamp(int i, size_t size) { return ((uint64_t)(i + 10) << 32) | size; }
static inline uint64_t bench_bw_stamp(int i, int k, size_t size) {
  return ((uint64_t)(i + 2) << 40) | ((uint64_t)k << 32) | size;
}

/* How many windows the bandwidth of a size is timed over: enough to move
 * 256 MiB, between 5 and 16384 windows. Up to 256 B that is the cap, about
 * a million messages at a window of 64: long enough that one preemption of
 * a rank does not decide a small size's figure, short enough that
 * tcp;ofi_rxm's smallest sizes take seconds, not minutes. Longer runs would
 * not remove the machine's own swings from one run to the next: that is
 * what ofi_bench.sh's repeated, interleaved runs and paired ratios are for. */
static inline int bench_bw_windows(size_t size, int w) {
  size_t per = size * (size_t)w, n = per ? ((size_t)256 << 20) / per : 16384;
  return n < 5 ? 5 : n > 16384 ? 16384 : (int)n;
}

/* Writes a message's stamp (its low byte, below 8 bytes) and, when full,
 * a pattern of (offset, size) in the rest: the payload every benchmark
 * program sends (pingpong, ofi_raw, mpich_pingpong). */
static inline void bench_fill(unsigned char *p, size_t size, uint64_t stamp, int full) {
  if (full)
    for (size_t i = 0; i < size; i++) p[i] = (unsigned char)((i * 131 + size) & 0xff);
  if (size >= 8)
    memcpy(p, &stamp, 8);
  else if (size)
    p[0] = (unsigned char)stamp;
}

/* Whether a message of size bytes carries stamp (bench_fill's). */
static inline int bench_stamp_ok(const unsigned char *p, size_t size, uint64_t stamp) {
  return size >= 8 ? memcmp(p, &stamp, 8) == 0 : !size || p[0] == (unsigned char)stamp;
}

#endif /* ASR_BENCH_UTIL_H */
