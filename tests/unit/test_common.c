/* test_common.c -- the common/ layer: errors, logging, time, sockets, files. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_buf.h"
#include "asr_err.h"
#include "asr_fs.h"
#include "asr_le.h"
#include "asr_log.h"
#include "asr_siphash.h"
#include "asr_sock.h"
#include "asr_test.h"
#include "asr_time.h"

TEST(err_strings) {
  ASSERT_STREQ(asr_strerror(0), "success");
  ASSERT_STREQ(asr_err_name(ASR_ETIMEDOUT), "ASR_ETIMEDOUT");
  ASSERT_STREQ(asr_strerror(ASR_ETIMEDOUT), "operation timed out");
  ASSERT_STREQ(asr_err_name(-999), "ASR_EUNKNOWN");
  ASSERT_STREQ(asr_strerror(12345), "unknown error");
  /* every code has a distinct, non-empty name and message */
#define CHECK(name, num, msg)                    \
  ASSERT_EQ(ASR_E##name, -(num));                \
  ASSERT(strlen(asr_strerror(ASR_E##name)) > 0); \
  ASSERT_STREQ(asr_err_name(ASR_E##name), "ASR_E" #name);
  ASR_ERRNO_MAP(CHECK)
#undef CHECK
  ASSERT_EQ(asr_err_from_errno(ECONNREFUSED), ASR_ECONNREFUSED);
  ASSERT_EQ(asr_err_from_errno(EPIPE), ASR_ECONNRESET);
  ASSERT_EQ(asr_err_from_errno(ECANCELED), ASR_ECANCELED);
  ASSERT_EQ(asr_err_from_errno(EMSGSIZE), ASR_ETOOBIG);
  ASSERT_EQ(asr_err_from_errno(EOPNOTSUPP), ASR_ENOSYS);
  ASSERT_EQ(asr_err_from_errno(EBUSY), ASR_EBUSY);
  ASSERT_EQ(asr_err_from_errno(ENOTTY), ASR_EIO); /* nothing close: a plain I/O error */
}

/* asr_errf returns its code, truncates like snprintf, and writes nothing
 * where the caller gave no buffer. */
/* SipHash-2-4's published vectors (the paper's appendix, and the
 * reference implementation's table): key 00..0f, messages 00..(n-1). */
TEST(siphash_vectors) {
  uint8_t key[16], msg[64];
  for (int i = 0; i < 16; i++) key[i] = (uint8_t)i;
  for (int i = 0; i < 64; i++) msg[i] = (uint8_t)i;
  ASSERT_EQ(asr_siphash24(key, msg, 0), 0x726fdb47dd0e0e31ull);
  ASSERT_EQ(asr_siphash24(key, msg, 1), 0x74f839c593dc67fdull);
  ASSERT_EQ(asr_siphash24(key, msg, 8), 0x93f5f5799a932462ull);
  ASSERT_EQ(asr_siphash24(key, msg, 15), 0xa129ca6149be45e5ull);
  ASSERT_EQ(asr_siphash24(key, msg, 63), 0x958a324ceb064572ull);
}

TEST(errf) {
  char buf[8];
  ASSERT_EQ(asr_errf(buf, sizeof buf, ASR_ECONFIG, "bad %s", "value"), ASR_ECONFIG);
  ASSERT_STREQ(buf, "bad val");
  ASSERT_EQ(asr_errf(NULL, 0, ASR_EPROTO, "%d", 1), ASR_EPROTO);
  ASSERT_EQ(asr_errf(buf, 0, 0, "x"), 0);
  ASSERT_STREQ(buf, "bad val");
}

/* asr_le.h writes the least significant byte first on every host, reads
 * back what it wrote, and needs no alignment (odd offsets below). */
TEST(le_bytes) {
  uint8_t b[1 + 8 + 4 + 2] = {0};
  asr_le_put64(b + 1, 0x0807060504030201ull);
  asr_le_put32(b + 9, 0x4c525341u); /* ctl.h: "ASRL" */
  asr_le_put16(b + 13, 0xbeefu);
  const uint8_t want[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 'A', 'S', 'R', 'L', 0xef, 0xbe};
  ASSERT_EQ(memcmp(b, want, sizeof want), 0);
  ASSERT_EQ(asr_le_get64(b + 1), 0x0807060504030201ull);
  ASSERT_EQ(asr_le_get32(b + 9), 0x4c525341u);
  ASSERT_EQ(asr_le_get16(b + 13), 0xbeefu);
  asr_le_put64(b + 1, UINT64_MAX);
  asr_le_put32(b + 9, UINT32_MAX);
  ASSERT_EQ(asr_le_get64(b + 1), UINT64_MAX);
  ASSERT_EQ(asr_le_get32(b + 9), UINT32_MAX);
}

TEST(log_one_line_prefixed) {
  int p[2];
  ASSERT_OK(pipe(p));
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 2);
    setenv("ASR_LOG_LEVEL", "debug", 1);
    setenv("ASR_LOG_SUBSYS", "kvs", 1);
    asr_log_reload_env();
    asr_log_set_role("tester", 7);
    asr_log_set_host("nodeA");
    asr_debug("kvs", "hello %d", 42);
    asr_debug("fab", "filtered out");
    asr_trace("kvs", "below level");
    asr_error("fab", "errors always print");
    _exit(0);
  }
  close(p[1]);
  char *out = asr_test_read_all(p[0], 5000);
  ASSERT(asr_test_wait(pid, 5000) == 0);
  char want[128];
  snprintf(want, sizeof want, "[asr tester:7@nodeA %ld] kvs: hello 42\n", (long)pid);
  ASSERT_CONTAINS(out, want);
  ASSERT(strstr(out, "filtered out") == NULL);
  ASSERT(strstr(out, "below level") == NULL);
  ASSERT_CONTAINS(out, "fab: error: errors always print\n");
  free(out);
}

/* Logging cannot fail, so a bad ASR_LOG_LEVEL costs one warning, printed
 * once however often the configuration is read, and the default level. */
TEST(log_bad_level_warns_once) {
  int p[2];
  ASSERT_OK(pipe(p));
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 2);
    setenv("ASR_LOG_LEVEL", "bogus", 1);
    unsetenv("ASR_LOG_SUBSYS");
    asr_log_reload_env();
    asr_log_reload_env();
    asr_log_set_role("tester", -1);
    asr_info("kvs", "info is below warn");
    asr_warn("kvs", "warn still prints");
    setenv("ASR_LOG_LEVEL", "DEBUG", 1); /* words are exact: another bad value, no second warning */
    asr_log_reload_env();
    asr_debug("kvs", "debug is below warn");
    _exit(0);
  }
  close(p[1]);
  char *out = asr_test_read_all(p[0], 5000);
  ASSERT(asr_test_wait(pid, 5000) == 0);
  ASSERT_CONTAINS(out,
                  "log: warning: ASR_LOG_LEVEL: 'bogus' is not one of error, warn, info, debug, trace; "
                  "logging at warn\n");
  ASSERT_CONTAINS(out, "kvs: warning: warn still prints\n");
  ASSERT(strstr(out, "below warn") == NULL);
  int lines = 0;
  for (const char *c = out; *c; c++) lines += *c == '\n';
  ASSERT_MSG(lines == 2, "%d lines: %s", lines, out);
  free(out);
}

TEST(time_monotonic) {
  uint64_t a = asr_time_ns();
  asr_sleep_ms(20);
  uint64_t b = asr_time_ns();
  ASSERT(b - a >= 19000000ull);
  ASSERT(b - a < 2000000000ull);
}

TEST(sock_listen_connect_roundtrip) {
  uint16_t port = 0;
  char err[128];
  int lfd = asr_sock_listen("127.0.0.1", 0, 16, &port, err, sizeof err);
  ASSERT(lfd >= 0);
  ASSERT(port != 0);
  ASSERT(fcntl(lfd, F_GETFL) & O_NONBLOCK);
  ASSERT(fcntl(lfd, F_GETFD) & FD_CLOEXEC);
  struct sockaddr_in a;
  ASSERT_OK(asr_sock_parse_ipv4("127.0.0.1", port, &a));
  int inprog;
  int cfd = asr_sock_connect_start(&a, &inprog);
  ASSERT(cfd >= 0);
  int sfd = -1;
  uint64_t until = asr_time_ms() + 2000;
  while (sfd < 0 && asr_time_ms() < until) sfd = accept(lfd, NULL, NULL);
  ASSERT(sfd >= 0);
  ASSERT_OK(asr_sock_connect_result(cfd));
  ASSERT_OK(asr_sock_write_all(cfd, "ping", 4, asr_time_ms() + 2000));
  char buf[4];
  ASSERT_OK(asr_sock_read_all(sfd, buf, 4, asr_time_ms() + 2000));
  ASSERT_MEMEQ(buf, "ping", 4);
  close(cfd);
  ASSERT_EQ(asr_sock_read_all(sfd, buf, 1, asr_time_ms() + 2000), ASR_ECONNRESET);
  /* the same port again is in use */
  int l2 = asr_sock_listen("127.0.0.1", port, 16, NULL, err, sizeof err);
  ASSERT_EQ(l2, ASR_EADDRINUSE);
  ASSERT_CONTAINS(err, "cannot bind 127.0.0.1:");
  ASSERT_EQ(asr_sock_listen("not-an-ip", 0, 16, NULL, err, sizeof err), ASR_EINVAL);
  close(sfd);
  close(lfd);
}

/* asr_sock_free_port: a port below the ephemeral range (when the range
 * leaves room), free to listen on, and different from try to try. */
TEST(sock_free_port_below_ephemeral_range) {
  unsigned lo = 32768, hi = 60999;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    ASSERT_EQ(fscanf(f, "%u %u", &lo, &hi), 2);
    fclose(f);
  }
  int seen[8], differ = 0;
  for (int i = 0; i < 8; i++) {
    int p = asr_sock_free_port("127.0.0.1");
    ASSERT(p > 0);
    if (lo > 11000) ASSERT_MSG(p >= 10000 && (unsigned)p < lo, "port %d, ephemeral range %u-%u", p, lo, hi);
    char err[128];
    int fd = asr_sock_listen("127.0.0.1", (uint16_t)p, 4, NULL, err, sizeof err);
    ASSERT_MSG(fd >= 0, "listening on the free port %d: %s", p, err);
    close(fd);
    seen[i] = p;
    differ += i > 0 && p != seen[0];
  }
  ASSERT(differ > 0);
  ASSERT(asr_sock_free_port("not-an-ip") == 0);
}

TEST(sock_refused) {
  uint16_t port = asr_test_free_port();
  struct sockaddr_in a;
  ASSERT_OK(asr_sock_parse_ipv4("127.0.0.1", port, &a));
  int inprog;
  int fd = asr_sock_connect_start(&a, &inprog);
  if (fd >= 0) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    poll(&p, 1, 2000);
    ASSERT_EQ(asr_sock_connect_result(fd), ASR_ECONNREFUSED);
    close(fd);
  } else {
    ASSERT_EQ(fd, ASR_ECONNREFUSED);
  }
}

/* A connect to a port of this host that nobody listens on can reach
 * itself: when the kernel picks that very port as the local one (the
 * bootstrap port is in the ephemeral range, the server not up yet), TCP's
 * simultaneous open connects the socket to itself, and a KV client would
 * read its own request back as the answer. asr_sock_connect_result calls
 * that refused, as it is. Made here on purpose: bound to the port it
 * connects to. */
TEST(sock_self_connect_is_refused) {
  uint16_t port = asr_test_free_port();
  struct sockaddr_in a;
  ASSERT_OK(asr_sock_parse_ipv4("127.0.0.1", port, &a));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ASSERT(fd >= 0);
  int one = 1;
  ASSERT(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
  ASSERT(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  ASSERT_MSG(rc == 0 || errno == EINPROGRESS, "connect to itself: %s", strerror(errno));
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  ASSERT(poll(&p, 1, 2000) == 1);
  ASSERT_EQ(asr_sock_connect_result(fd), ASR_ECONNREFUSED);
  close(fd);
}

/* asr_fs_read_file reads a file whole, NUL-terminated, and refuses one over
 * its bound without reading the rest (/dev/zero has no end). */
TEST(fs_read_file_whole_and_bounded) {
  char path[PATH_MAX], *text = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/f", asr_test_tmpdir());
  FILE *f = fopen(path, "w");
  ASSERT(f);
  for (int i = 0; i < 3000; i++) fputs("0123456789", f); /* 30000 bytes: several reads and regrowths */
  fclose(f);
  ASSERT_OK(asr_fs_read_file(path, 30000, &text, &len));
  ASSERT_EQ(len, 30000);
  ASSERT_EQ(text[len], '\0');
  ASSERT(memcmp(text + 29990, "0123456789", 10) == 0);
  free(text);
  text = NULL;
  ASSERT_EQ(asr_fs_read_file(path, 29999, &text, &len), ASR_ETOOBIG);
  ASSERT_EQ(errno, EFBIG);
  ASSERT(text == NULL && len == 30000); /* left alone on failure */
  ASSERT_EQ(asr_fs_read_file("/dev/zero", 1 << 20, &text, &len), ASR_ETOOBIG);
  ASSERT_OK(asr_fs_read_file("/dev/null", 0, &text, &len));
  ASSERT_EQ(len, 0);
  ASSERT_EQ(text[0], '\0');
  free(text);
  snprintf(path, sizeof path, "%s/absent", asr_test_tmpdir());
  ASSERT_EQ(asr_fs_read_file(path, 100, &text, &len), ASR_ENOENT);
  ASSERT_EQ(errno, ENOENT);
  ASSERT(asr_fs_read_file(asr_test_tmpdir(), 100, &text, &len) < 0);
  ASSERT_EQ(errno, EISDIR);
}

/* asr_buf_printf appends the whole text, however long, and nothing else. */
TEST(buf_printf_whole) {
  asr_buf_t b = {0};
  ASSERT_OK(asr_buf_printf(&b, "%s=%d;", "a", 7));
  char big[3000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  ASSERT_OK(asr_buf_printf(&b, "[%s]", big));
  ASSERT_EQ(b.len, 4 + 2 + sizeof big - 1);
  ASSERT_MEMEQ(b.data, "a=7;[x", 6);
  ASSERT_EQ(b.data[b.len - 1], ']');
  asr_buf_free(&b);
}
