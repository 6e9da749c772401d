/*
 * rma_util.h -- what the two sides of tests/bench/rma_bench.sh share, so
 * that the raw libfabric baseline (ofi_rma_raw.c) and libasr's one-sided
 * API (asr_rma_bench.c) move the same bytes, stamped and checked the same
 * way, and report the same rows. Header-only.
 *
 * A one-sided message of SIZE bytes (at least 8) carries its stamp in its
 * first 8 bytes and, from 16 bytes, again in its last 8; whole payloads
 * follow bench_fill's pattern. A notification carries the stamp of the
 * write it rides on. The target takes a message for landed when both of its
 * stamps are there: that is when the notification delivery latency
 * (rma_bench.sh's "notif" row) starts.
 */
#ifndef ASR_RMA_UTIL_H
#define ASR_RMA_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

/* The sizes of the latency and bandwidth rows when none are given: 8 B and
 * ofi_bench.sh's powers of 4 from 64 B to 4 MiB. */
#define RMA_DEFAULT_SIZES "8,64,256,1024,4096,16384,65536,262144,1048576,4194304"
#define RMA_MAX_SIZES 64

/* The batch rows: COUNT writes of SIZE bytes each into distinct offsets,
 * the notification after the last. */
#define RMA_NBATCH 2
static const size_t rma_batch_count[RMA_NBATCH] = {256, 1024};
static const size_t rma_batch_size[RMA_NBATCH] = {1024, 4096};
/* Untimed batches before the timed ones of each batch row. */
#define RMA_BATCH_WARMUP 10

/* The prepared list whose asr_xfer_prep is timed (asr side only): 15,000
 * writes of 4 KiB into distinct offsets. */
#define RMA_PREP_ENTRIES 15000
#define RMA_PREP_SIZE 4096

/* Parses a comma-separated list of sizes (each at least 8) into out.
 * Returns how many, or -1 for a bad list. */
static inline int rma_parse_sizes(const char *list, size_t *out, int max) {
  int n = 0;
  const char *p = list;
  while (*p) {
    char *end;
    unsigned long long v = strtoull(p, &end, 0);
    if (end == p || v < 8 || n == max || (*end && *end != ',')) return -1;
    out[n++] = (size_t)v;
    p = *end ? end + 1 : end;
  }
  return n ? n : -1;
}

/* Writes a one-sided message: bench_fill's stamp (and, when full, its
 * pattern), and the stamp again in the last 8 bytes from 16 bytes. */
static inline void rma_fill(unsigned char *p, size_t size, uint64_t stamp, int full) {
  bench_fill(p, size, stamp, full);
  if (size >= 16) memcpy(p + size - 8, &stamp, 8);
}

/* Zeroes a message's stamps, so that a read that moved nothing is seen. */
static inline void rma_clear(unsigned char *p, size_t size) {
  memset(p, 0, 8);
  if (size >= 16) memset(p + size - 8, 0, 8);
}

/* Whether both stamps of a message being written by a peer are there.
 * The barrier makes every call read the memory again. */
static inline int rma_landed(const unsigned char *p, size_t size, uint64_t stamp) {
  __asm__ volatile("" ::: "memory");
  return memcmp(p, &stamp, 8) == 0 && (size < 16 || memcmp(p + size - 8, &stamp, 8) == 0);
}

/* 0 when a message carries its stamps and, when full, bench_fill's
 * pattern in between; else the offset of the first wrong byte plus 1. */
static inline size_t rma_check(const unsigned char *p, size_t size, uint64_t stamp, int full) {
  if (memcmp(p, &stamp, 8) != 0) return 1;
  if (size >= 16 && memcmp(p + size - 8, &stamp, 8) != 0) return size - 7;
  if (full)
    for (size_t i = 8; i + (size >= 16 ? 8 : 0) < size; i++)
      if (p[i] != (unsigned char)((i * 131 + size) & 0xff)) return i + 1;
  return 0;
}

static inline int rma_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of v[0..n-1] (sorted in place); 0 for none. */
static inline double rma_median(double *v, int n) {
  if (n < 1) return 0;
  qsort(v, (size_t)n, sizeof *v, rma_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif /* ASR_RMA_UTIL_H */
