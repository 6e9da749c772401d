/*
 * outgen.c -- output of known shape for the job-control tests:
 *   outgen lines N        N lines "R:SEQ:<fill>" (about 80 bytes each)
 *   outgen bytes N        lines as above until N bytes are written
 *   outgen forever        lines as above until a write fails
 *   outgen line N [K]     K lines (default 1) of N bytes each ("R:" then
 *                         letters), each ending in a newline
 *   outgen binary N       N bytes of a fixed pseudo-random sequence (every byte
 *                         value, newlines and NULs included), no trailing newline
 * R is $ASR_RANK (or 0). A failed write ends it with status 3, unless
 * SIGPIPE ended it first.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put(const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(1, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) exit(3);
    p += w;
    n -= (size_t)w;
  }
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  const char *r = getenv("ASR_RANK");
  int rank = r ? atoi(r) : 0;
  long long n = argc > 2 ? atoll(argv[2]) : 0;
  char line[128];
  if (!strcmp(argv[1], "lines") || !strcmp(argv[1], "bytes") || !strcmp(argv[1], "forever")) {
    long long bytes = 0;
    for (long long seq = 0;; seq++) {
      if (!strcmp(argv[1], "lines") && seq >= n) break;
      if (!strcmp(argv[1], "bytes") && bytes >= n) break;
      int k = snprintf(line, sizeof line, "%d:%lld:%s\n", rank, seq,
                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghij");
      put(line, (size_t)k);
      bytes += k;
    }
    return 0;
  }
  if (!strcmp(argv[1], "line")) {
    long long count = argc > 3 ? atoll(argv[3]) : 1;
    char *buf = malloc((size_t)n + 1);
    if (!buf) return 4;
    int k = snprintf(buf, (size_t)n + 1, "%d:", rank);
    for (long long i = k; i < n; i++) buf[i] = (char)('a' + i % 26);
    buf[n] = '\n';
    for (long long c = 0; c < count; c++) put(buf, (size_t)n + 1);
    free(buf);
    return 0;
  }
  if (!strcmp(argv[1], "binary")) {
    unsigned x = 12345u;
    char buf[4096];
    for (long long done = 0; done < n;) {
      size_t k = 0;
      while (k < sizeof buf && done + (long long)k < n) {
        x = x * 1103515245u + 12345u;
        buf[k++] = (char)(x >> 16);
      }
      put(buf, k);
      done += (long long)k;
    }
    return 0;
  }
  return 2;
}
