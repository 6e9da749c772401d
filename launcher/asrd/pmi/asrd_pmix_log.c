/*
 * asrd_pmix_log.c -- libpmix's own output lines, into asrd's log
 * (asrd_pmix_log.h says why).
 *
 * The pipe's invariants:
 *   - its write end is never closed: the library keeps the number for the
 *     life of the process (its threads outlive asrd_pmix_stop), and a
 *     number reused by another file would take its lines;
 *   - its write end is non-blocking: a full pipe (asrd's loop busy, or no
 *     longer reading) loses lines rather than stall the library's thread,
 *     which serves every rank;
 *   - both ends are close-on-exec, and a rank's environment leaves out
 *     asrd's PMIX_* variables (asrd_spawn.c), so no rank inherits either.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asrd_pmix_log.h"

/* The longest line logged whole; a longer one is logged in pieces. The
 * library's lines are a file name, a line number and a status. */
#define LINE_MAX_BYTES 1024

static int read_fd = -1; /* the write end is the library's, by number */
static asr_loop_io_t reader;
static char line[LINE_MAX_BYTES];
static size_t used; /* bytes of line[] not logged yet: the start of a line */

int asrd_pmix_log_open(void) {
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
    int e = errno;
    /* a value inherited (a parent daemon's) names no fd of ours */
    unsetenv("PMIX_OUTPUT_STDERR_FD");
    return asr_err_from_errno(e);
  }
  char num[16];
  snprintf(num, sizeof num, "%d", p[1]);
  if (setenv("PMIX_OUTPUT_STDERR_FD", num, 1) != 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    /* a value inherited (a parent daemon's) names no fd of ours */
    unsetenv("PMIX_OUTPUT_STDERR_FD");
    return asr_err_from_errno(e);
  }
  read_fd = p[0];
  return 0;
}

/* The length of libpmix's "[HOST:PID] " at the start of s[0..n), or 0. */
static size_t prefix_len(const char *s, size_t n) {
  const char *end = n && s[0] == '[' ? memchr(s, ']', n) : NULL;
  if (!end || (size_t)(end - s) + 2 > n || end[1] != ' ') return 0;
  const char *d = end;
  while (d > s + 1 && d[-1] >= '0' && d[-1] <= '9') d--;
  return d < end && d[-1] == ':' ? (size_t)(end - s) + 2 : 0;
}

/* Logs one line (no newline), without the library's prefix: asrd's own
 * says the same. */
static void log_line(const char *s, size_t n) {
  size_t skip = prefix_len(s, n);
  if (n > skip) asr_info("pmix", "%.*s", (int)(n - skip), s + skip);
}

/* Logs every whole line of line[0..used) and keeps the rest at the start;
 * a full buffer without a newline is logged as it is. */
static void log_lines(void) {
  size_t start = 0;
  for (char *nl; (nl = memchr(line + start, '\n', used - start)) != NULL; start = (size_t)(nl - line) + 1)
    log_line(line + start, (size_t)(nl - line) - start);
  if (start == 0 && used == sizeof line) {
    log_line(line, used);
    start = used;
  }
  memmove(line, line + start, used - start);
  used -= start;
}

/* Reads once (level-triggered: what is left wakes the loop again).
 * Returns what read returned. */
static ssize_t read_some(void) {
  ssize_t n = read(read_fd, line + used, sizeof line - used);
  if (n > 0) {
    used += (size_t)n;
    log_lines();
  }
  return n;
}

static void on_readable(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)events;
  ssize_t n = read_some();
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    /* not while the library's write end is open, which it stays; stop
     * rather than spin */
    asr_warn("pmix", "libpmix's output pipe failed (%s); its lines are no longer logged",
             n == 0 ? "closed" : strerror(errno));
    asr_loop_io_stop(loop, io);
  }
}

int asrd_pmix_log_start(asr_loop_t *loop) {
  if (read_fd < 0 || asr_loop_io_active(&reader)) return 0;
  return asr_loop_io_start(loop, &reader, read_fd, ASR_LOOP_READ, on_readable, NULL);
}

void asrd_pmix_log_stop(asr_loop_t *loop) {
  if (read_fd < 0) return;
  if (asr_loop_io_active(&reader)) asr_loop_io_stop(loop, &reader);
  /* bounded, should the library write as fast as this reads */
  for (int i = 0; i < 256 && read_some() > 0; i++) continue;
  if (used) log_line(line, used);
  used = 0;
  /* the library's later writes fail with EPIPE (asrd ignores SIGPIPE) */
  close(read_fd);
  read_fd = -1;
}
