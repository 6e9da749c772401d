/* asr_test.c -- the runner behind asr_test.h. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_fs.h"
#include "asr_sock.h"
#include "asr_test.h"

#define MAX_TESTS 256
#define SKIP_CODE 77

static struct {
  const char *name;
  asr_test_fn fn;
  int timeout_s;
  int tier; /* ASR_TEST_TIER_* */
} tests[MAX_TESTS];
static int ntests;
static const char *prog_name = "test";
static char tmpdir_path[PATH_MAX];

void asr_test_register(const char *name, asr_test_fn fn, int timeout_s) {
  asr_test_register_tier(name, fn, timeout_s, ASR_TEST_TIER_DEFAULT);
}

void asr_test_register_tier(const char *name, asr_test_fn fn, int timeout_s, int tier) {
  if (ntests < MAX_TESTS) tests[ntests++] = (typeof(tests[0])){name, fn, timeout_s, tier};
}

/* Whether the long tier runs (ASR_LONG=1, a row of asr_env.h). */
static int long_tier_on(void) {
  int on = 0;
  return asr_env_bool(ASR_ENV_LONG, &on, NULL, 0) == 0 && on;
}

const char *asr_test_errname(int rc) { return asr_err_name(rc); }

void asr_test_fail(const char *file, int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "FAILED AT %s:%d: %s\n", file, line, msg);
  fflush(NULL);
  _exit(1);
}

void asr_test_skip(const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "SKIP REASON: %s\n", msg);
  fflush(NULL);
  _exit(SKIP_CODE);
}

const char *asr_test_builddir(void) {
  static char dir[PATH_MAX];
  if (dir[0]) return dir;
  const char *env = getenv("ASR_BUILDDIR");
  if (env && *env) {
    snprintf(dir, sizeof dir, "%s", env);
    return dir;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return ".";
  exe[n] = '\0';
  /* <builddir>/tests/<kind>/<binary>, or .../<kind>/.libs/<binary> for a
   * program libtool linked against the shared libasr */
  char *d = dirname(exe);
  size_t dl = strlen(d);
  if (dl >= 6 && strcmp(d + dl - 6, "/.libs") == 0) d[dl - 6] = '\0';
  d = dirname(dirname(d));
  snprintf(dir, sizeof dir, "%s", d);
  return dir;
}

const char *asr_test_tmpdir(void) {
  if (tmpdir_path[0]) return tmpdir_path;
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir_path, sizeof tmpdir_path, "%s/asrtest.XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(tmpdir_path)) asr_test_fail(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
  return tmpdir_path;
}

uint16_t asr_test_free_port(void) {
  int p = asr_sock_free_port("127.0.0.1");
  if (p <= 0) asr_test_fail(__FILE__, __LINE__, "cannot find a free port on 127.0.0.1");
  return (uint16_t)p;
}

pid_t asr_test_spawn(char *const argv[], int *out_fd, int *err_fd) {
  int op[2] = {-1, -1}, ep[2] = {-1, -1};
  if (out_fd && pipe2(op, O_CLOEXEC) != 0) return -1;
  if (err_fd && pipe2(ep, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    if (out_fd) dup2(op[1], 1);
    if (err_fd) dup2(ep[1], 2);
    execv(argv[0], argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  if (out_fd) {
    close(op[1]);
    fcntl(op[0], F_SETFL, O_NONBLOCK);
    *out_fd = op[0];
  }
  if (err_fd) {
    close(ep[1]);
    fcntl(ep[0], F_SETFL, O_NONBLOCK);
    *err_fd = ep[0];
  }
  return pid;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Per-fd leftovers after a line (small fixed table: tests use a few fds). */
static struct {
  int fd;
  char buf[8192];
  size_t len;
} lines[16];

int asr_test_read_line(int fd, char *out, size_t outlen, int timeout_ms) {
  int slot = -1;
  for (int i = 0; i < 16; i++)
    if (lines[i].fd == fd && (lines[i].len || slot < 0)) slot = i;
  if (slot < 0 || lines[slot].fd != fd) {
    for (int i = 0; i < 16; i++)
      if (lines[i].len == 0) {
        slot = i;
        break;
      }
    lines[slot].fd = fd;
  }
  uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    char *nl = memchr(lines[slot].buf, '\n', lines[slot].len);
    if (nl) {
      size_t n = (size_t)(nl - lines[slot].buf);
      size_t c = n < outlen - 1 ? n : outlen - 1;
      memcpy(out, lines[slot].buf, c);
      out[c] = '\0';
      memmove(lines[slot].buf, nl + 1, lines[slot].len - n - 1);
      lines[slot].len -= n + 1;
      return (int)c;
    }
    uint64_t now = now_ms();
    if (now >= deadline || lines[slot].len == sizeof lines[slot].buf) return -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, (int)(deadline - now)) <= 0) continue;
    ssize_t r = read(fd, lines[slot].buf + lines[slot].len, sizeof lines[slot].buf - lines[slot].len);
    if (r == 0) return -1;
    if (r > 0) lines[slot].len += (size_t)r;
  }
}

char *asr_test_read_all(int fd, int timeout_ms) {
  size_t cap = 4096, len = 0;
  char *s = malloc(cap);
  uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    uint64_t now = now_ms();
    if (now >= deadline) break;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, (int)(deadline - now)) <= 0) continue;
    if (len + 1024 > cap) s = realloc(s, cap *= 2);
    ssize_t r = read(fd, s + len, cap - len - 1);
    if (r == 0) break;
    if (r > 0) len += (size_t)r;
  }
  s[len] = '\0';
  return s;
}

int asr_test_wait(pid_t pid, int timeout_ms) {
  uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return st;
    if (r < 0) return -1;
    if (now_ms() >= deadline) return -1;
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
}

/* Runs one case in a child process group; returns 0 pass, 1 fail, 2 skip. */
static int run_case(int i, uint64_t *ms) {
  int r = 1;
  tmpdir_path[0] = '\0';
  const char *dir = asr_test_tmpdir(); /* the case's own, made here so that it can be removed here */
  uint64_t t0 = now_ms();
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    setpgid(0, 0);
    signal(SIGPIPE, SIG_IGN);
    tests[i].fn();
    fflush(NULL);
    _exit(0);
  }
  setpgid(pid, pid);
  int st = 0, timed_out = 0;
  uint64_t deadline = t0 + (uint64_t)tests[i].timeout_s * 1000;
  for (;;) {
    if (waitpid(pid, &st, WNOHANG) == pid) break;
    if (now_ms() >= deadline) {
      timed_out = 1;
      kill(-pid, SIGKILL);
      waitpid(pid, &st, 0);
      break;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  kill(-pid, SIGKILL); /* whatever the case left behind */
  *ms = now_ms() - t0;
  if (timed_out)
    fprintf(stderr, "TIMEOUT after %d s\n", tests[i].timeout_s);
  else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
    r = 0;
  else if (WIFEXITED(st) && WEXITSTATUS(st) == SKIP_CODE)
    r = 2;
  else if (WIFSIGNALED(st))
    fprintf(stderr, "killed by signal %d\n", WTERMSIG(st));
  if (r == 1)
    fprintf(stderr, "(the case's directory is kept: %s)\n", dir);
  else
    asr_rm_tree(dir);
  return r;
}

/* Whether case i was named on the command line (none named: every case). */
static int named(int i, int argc, char **argv) {
  if (argc < 2) return 1;
  for (int a = 1; a < argc; a++)
    if (strcmp(argv[a], tests[i].name) == 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  prog_name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  if (argc > 1 && strcmp(argv[1], "--list") == 0) {
    for (int i = 0; i < ntests; i++) printf("%s\n", tests[i].name);
    return 0;
  }
  for (int a = 1; a < argc; a++) {
    int known = 0;
    for (int i = 0; i < ntests && !known; i++) known = strcmp(argv[a], tests[i].name) == 0;
    if (!known) {
      fprintf(stderr, "%s: no test named '%s' (try --list)\n", prog_name, argv[a]);
      return 2;
    }
  }
  int pass = 0, fail = 0, skip = 0;
  int long_on = long_tier_on();
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 0; i < ntests; i++) {
    if (!named(i, argc, argv)) continue;
    if (tests[i].tier == ASR_TEST_TIER_LONG && !long_on) {
      printf("SKIP: %s/%s: the long tier (ASR_LONG=1 runs it)\n", prog_name, tests[i].name);
      skip++;
      continue;
    }
    uint64_t ms = 0;
    int r = run_case(i, &ms);
    const char *tag = r == 0 ? "PASS" : r == 2 ? "SKIP" : "FAIL";
    printf("%s: %s/%s (%llu ms)\n", tag, prog_name, tests[i].name, (unsigned long long)ms);
    if (r == 0)
      pass++;
    else if (r == 2)
      skip++;
    else
      fail++;
  }
  printf("== %s: %d pass / %d fail / %d skip\n", prog_name, pass, fail, skip);
  return fail ? 1 : (pass == 0 && skip > 0 ? SKIP_CODE : 0);
}

char *asr_test_stderr_of(void (*fn)(void)) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/stderr.txt", asr_test_tmpdir());
  int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600), saved = dup(2);
  ASSERT(fd >= 0 && saved >= 0);
  dup2(fd, 2);
  fn();
  dup2(saved, 2);
  close(saved);
  lseek(fd, 0, SEEK_SET);
  char *out = asr_test_read_all(fd, 1000);
  close(fd);
  return out;
}
