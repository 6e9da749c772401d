/*
 * asr_test.h -- a tiny test harness (the libuv runner habit).
 *
 * A test binary defines cases with TEST(name) { ... } and links asr_test.c,
 * which provides main(). Each case runs in a forked child in its own process
 * group, under a timeout; afterwards the whole group is killed, so a case can
 * never leak a process. A case passes by returning, fails by ASSERT, and skips
 * with SKIP("reason") (exit 77). Output, one line per case:
 *     PASS: test_kv_frame/roundtrip (3 ms)
 *     FAIL: test_kv_server/stall (5012 ms): file.c:123: ASSERT(x == 1)
 *     SKIP: test_x/y: reason
 * `prog NAME...` runs the named cases; `prog --list` lists them all.
 *
 * Tiers: TEST_LONG(name, secs) marks a soak, a long stall or a large
 * emulation: it runs only with ASR_LONG=1 and is otherwise a visible SKIP
 * line ("the long tier"), never a silent pass.
 */
#ifndef ASR_TEST_H
#define ASR_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

typedef void (*asr_test_fn)(void);

enum { ASR_TEST_TIER_DEFAULT = 0, ASR_TEST_TIER_LONG = 1 };
void asr_test_register(const char *name, asr_test_fn fn, int timeout_s);
void asr_test_register_tier(const char *name, asr_test_fn fn, int timeout_s, int tier);
void asr_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
void asr_test_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

#define TEST_TIMEOUT(name, secs)                                   \
  static void test_##name(void);                                   \
  __attribute__((constructor)) static void register_##name(void) { \
    asr_test_register(#name, test_##name, (secs));                 \
  }                                                                \
  static void test_##name(void)
#define TEST(name) TEST_TIMEOUT(name, 60)
#define TEST_LONG(name, secs)                                               \
  static void test_##name(void);                                            \
  __attribute__((constructor)) static void register_##name(void) {          \
    asr_test_register_tier(#name, test_##name, (secs), ASR_TEST_TIER_LONG); \
  }                                                                         \
  static void test_##name(void)

#define ASSERT(cond)                                                     \
  do {                                                                   \
    if (!(cond)) asr_test_fail(__FILE__, __LINE__, "ASSERT(%s)", #cond); \
  } while (0)
#define ASSERT_MSG(cond, ...)                                    \
  do {                                                           \
    if (!(cond)) asr_test_fail(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define ASSERT_EQ(a, b)                                                                         \
  do {                                                                                          \
    long long a_ = (long long)(a), b_ = (long long)(b);                                         \
    if (a_ != b_) asr_test_fail(__FILE__, __LINE__, "%s == %s (%lld != %lld)", #a, #b, a_, b_); \
  } while (0)
#define ASSERT_OK(rc)                                                                                        \
  do {                                                                                                       \
    int rc_ = (rc);                                                                                          \
    if (rc_ != 0) asr_test_fail(__FILE__, __LINE__, "%s returned %d (%s)", #rc, rc_, asr_test_errname(rc_)); \
  } while (0)
#define ASSERT_STREQ(a, b)                                                                  \
  do {                                                                                      \
    const char *a_ = (a), *b_ = (b);                                                        \
    if (strcmp(a_, b_) != 0) asr_test_fail(__FILE__, __LINE__, "\"%s\" != \"%s\"", a_, b_); \
  } while (0)
#define ASSERT_CONTAINS(hay, needle)                                                               \
  do {                                                                                             \
    const char *h_ = (hay), *n_ = (needle);                                                        \
    if (!h_ || !strstr(h_, n_))                                                                    \
      asr_test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)", n_); \
  } while (0)
#define ASSERT_MEMEQ(a, b, n)                                                                              \
  do {                                                                                                     \
    if (memcmp((a), (b), (n)) != 0) asr_test_fail(__FILE__, __LINE__, "memory differs: %s vs %s", #a, #b); \
  } while (0)
#define SKIP(...) asr_test_skip(__VA_ARGS__)

/* The ASR_E* name of rc (set by the test binary's linked error module). */
const char *asr_test_errname(int rc);

/* The build tree's top directory (where bootstrap/asrkv lives). */
const char *asr_test_builddir(void);

/* A fresh private directory for this case, under $TMPDIR (default /tmp).
 * The runner makes it before the case starts and removes it once the case's
 * process group is gone -- unless the case failed: then it is kept, and its
 * path printed. */
const char *asr_test_tmpdir(void);

/* A TCP port on 127.0.0.1 that was free a moment ago. */
uint16_t asr_test_free_port(void);

/* Starts argv[0] (a path) with stdout on a pipe (*out_fd, non-blocking) and
 * stderr inherited, or on a second pipe when err_fd is given. Returns the pid. */
pid_t asr_test_spawn(char *const argv[], int *out_fd, int *err_fd);

/* Reads one line from fd into buf, waiting up to timeout_ms. Returns its
 * length, or -1 on timeout/EOF. Keeps a per-fd buffer of what follows. */
int asr_test_read_line(int fd, char *buf, size_t len, int timeout_ms);

/* Reads until EOF (or timeout) into a malloc'd NUL-terminated string. */
char *asr_test_read_all(int fd, int timeout_ms);

/* Runs fn with stderr in a file of the case's directory; returns what it
 * printed (malloc'd). */
char *asr_test_stderr_of(void (*fn)(void));

/* Waits for pid up to timeout_ms; returns its wait status, or -1 on timeout. */
int asr_test_wait(pid_t pid, int timeout_ms);

#endif /* ASR_TEST_H */
