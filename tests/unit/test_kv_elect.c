/* test_kv_elect.c -- leader election: the flock API, and racing `asrkv serve --elect`. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_test.h"
#include "kv_conn.h"
#include "kv_elect.h"
#include "kv_frame.h"

/* Every case keeps its lock files in its own directory, never in /tmp where
 * real jobs of this user keep theirs. */
static void private_lock_dir(void) {
  ASSERT_OK(setenv("ASR_KV_LOCK_DIR", asr_test_tmpdir(), 1));
  unsetenv("ASR_JOB_SECRET"); /* servers and clients below agree on "no secret" */
  unsetenv("ASR_KV_TIMEOUT_MS");
}

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* --- the API ------------------------------------------------------------ */

TEST(elect_path_names_uid_and_port) {
  private_lock_dir();
  char path[512], want[512];
  ASSERT_OK(asr_kv_elect_path(4711, NULL, path, sizeof path));
  snprintf(want, sizeof want, "%s/asr_kv_server_lock_uid_%u_port_4711", asr_test_tmpdir(),
           (unsigned)getuid());
  ASSERT_STREQ(path, want);
  char uid[32];
  snprintf(uid, sizeof uid, "uid_%u_", (unsigned)getuid());
  ASSERT_CONTAINS(path, uid);
  ASSERT_CONTAINS(path, "port_4711");

  /* Two ports, two files. */
  char other[512];
  ASSERT_OK(asr_kv_elect_path(4712, NULL, other, sizeof other));
  ASSERT(strcmp(path, other) != 0);

  /* Default directory is /tmp (only the path is computed; nothing is created). */
  unsetenv("ASR_KV_LOCK_DIR");
  ASSERT_OK(asr_kv_elect_path(4711, NULL, path, sizeof path));
  ASSERT(strncmp(path, "/tmp/asr_kv_server_lock_uid_", 28) == 0);
  setenv("ASR_KV_LOCK_DIR", "", 1);
  ASSERT_OK(asr_kv_elect_path(4711, NULL, path, sizeof path));
  ASSERT(strncmp(path, "/tmp/", 5) == 0);

  /* Too small a buffer is refused, not truncated. */
  private_lock_dir();
  ASSERT_EQ(asr_kv_elect_path(4711, NULL, path, 10), ASR_ETOOBIG);
}

TEST(elect_try_busy_within_process) {
  private_lock_dir();
  char err[256] = "";
  int a = -1, b = -1;
  ASSERT_OK(asr_kv_elect_try(5001, NULL, &a, err, sizeof err));
  ASSERT(a >= 0);
  /* flock belongs to the open file description: a second open in the same
   * process conflicts with the first. */
  ASSERT_EQ(asr_kv_elect_try(5001, NULL, &b, err, sizeof err), ASR_EBUSY);
  ASSERT_EQ(b, -1);
  ASSERT_EQ(asr_kv_elect_try(5001, NULL, &b, err, sizeof err), ASR_EBUSY); /* still busy, no fd leaked to b */

  /* A different port is a different job: no conflict. */
  int c = -1;
  ASSERT_OK(asr_kv_elect_try(5002, NULL, &c, err, sizeof err));
  ASSERT(c >= 0 && c != a);

  /* Emulated hosts sharing this file system elect one leader each. */
  int h1 = -1, h2 = -1, h1b = -1;
  ASSERT_OK(asr_kv_elect_try(5001, "n1", &h1, err, sizeof err));
  ASSERT_OK(asr_kv_elect_try(5001, "n2", &h2, err, sizeof err));
  ASSERT_EQ(asr_kv_elect_try(5001, "n1", &h1b, err, sizeof err), ASR_EBUSY);
  char tagged[512];
  ASSERT_OK(asr_kv_elect_path(5001, "n/../x y", tagged, sizeof tagged));
  ASSERT_CONTAINS(tagged, "_port_5001_host_n_.._x_y"); /* no '/' from a host name */
  asr_kv_elect_release(h1);
  asr_kv_elect_release(h2);

  /* The lock file exists where asr_kv_elect_path says, mode 0600. */
  char path[512];
  ASSERT_OK(asr_kv_elect_path(5001, NULL, path, sizeof path));
  struct stat st;
  ASSERT_EQ(stat(path, &st), 0);
  ASSERT(S_ISREG(st.st_mode));
  ASSERT_EQ(st.st_mode & 0777, 0600);

  /* The lock fd is close-on-exec, so a spawned server never inherits it. */
  ASSERT(fcntl(a, F_GETFD) & FD_CLOEXEC);

  asr_kv_elect_release(a);
  ASSERT_OK(asr_kv_elect_try(5001, NULL, &b, err, sizeof err));
  ASSERT(b >= 0);
  int d = -1;
  ASSERT_EQ(asr_kv_elect_try(5001, NULL, &d, err, sizeof err), ASR_EBUSY);
  asr_kv_elect_release(b);
  asr_kv_elect_release(c);
  asr_kv_elect_release(-1); /* ignored */

  /* Released fds are closed. */
  errno = 0;
  ASSERT_EQ(fcntl(b, F_GETFD), -1);
  ASSERT_EQ(errno, EBADF);
}

TEST(elect_try_bad_arguments) {
  private_lock_dir();
  char err[256] = "";
  int fd = -1;
  ASSERT_EQ(asr_kv_elect_try(0, NULL, &fd, err, sizeof err), ASR_EINVAL);
  ASSERT_EQ(asr_kv_elect_try(5003, NULL, NULL, err, sizeof err), ASR_EINVAL);
  ASSERT_EQ(asr_kv_elect_wait(0, NULL, &fd, err, sizeof err), ASR_EINVAL);

  /* A missing lock directory: an error that names the file, not EBUSY. */
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/does/not/exist", asr_test_tmpdir());
  setenv("ASR_KV_LOCK_DIR", dir, 1);
  err[0] = '\0';
  int rc = asr_kv_elect_try(5003, NULL, &fd, err, sizeof err);
  ASSERT(rc != 0 && rc != ASR_EBUSY);
  ASSERT_CONTAINS(err, "cannot open lock file");
  ASSERT_CONTAINS(err, dir);
  ASSERT_EQ(fd, -1);

  /* A lock directory too long for the path buffer: refused as a bad
   * setting (asr_env.h's ASR_KV_LOCK_DIR is at most 400 bytes). */
  char longdir[600];
  memset(longdir, 'd', sizeof longdir - 1);
  longdir[0] = '/';
  longdir[sizeof longdir - 1] = '\0';
  setenv("ASR_KV_LOCK_DIR", longdir, 1);
  err[0] = '\0';
  ASSERT_EQ(asr_kv_elect_try(5003, NULL, &fd, err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "ASR_KV_LOCK_DIR: '/ddd");
  ASSERT_CONTAINS(err, "' is too long (at most 400 bytes)");
  ASSERT_EQ(asr_kv_elect_read_mark(5003, NULL, err, sizeof err), ASR_ECONFIG);

  /* NULL errbuf is allowed. */
  setenv("ASR_KV_LOCK_DIR", dir, 1);
  rc = asr_kv_elect_try(5003, NULL, &fd, NULL, 0);
  ASSERT(rc != 0 && rc != ASR_EBUSY);
}

TEST(elect_refuses_planted_symlink) {
  private_lock_dir();
  char path[512], target[PATH_MAX], err[256] = "";
  ASSERT_OK(asr_kv_elect_path(5004, NULL, path, sizeof path));
  snprintf(target, sizeof target, "%s/victim", asr_test_tmpdir());
  ASSERT_EQ(symlink(target, path), 0);
  int fd = -1;
  int rc = asr_kv_elect_try(5004, NULL, &fd, err, sizeof err);
  ASSERT(rc != 0 && rc != ASR_EBUSY);
  ASSERT_CONTAINS(err, path);
  ASSERT_EQ(access(target, F_OK), -1); /* the link was not followed */
}

TEST(elect_wait_takes_over_when_holder_exits) {
  private_lock_dir();
  char err[256] = "";
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    int fd = -1;
    if (asr_kv_elect_try(5005, NULL, &fd, NULL, 0) != 0) _exit(3);
    (void)!write(ready[1], "x", 1);
    char c;
    (void)!read(go[0], &c, 1); /* hold until told; exit releases the lock */
    _exit(0);
  }
  close(ready[1]);
  close(go[0]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  int fd = -1;
  ASSERT_EQ(asr_kv_elect_try(5005, NULL, &fd, err, sizeof err), ASR_EBUSY);

  /* Release the holder shortly; elect_wait must block until then. */
  uint64_t t0 = mono_ms();
  pid_t releaser = fork();
  ASSERT(releaser >= 0);
  if (releaser == 0) {
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    (void)!write(go[1], "x", 1);
    _exit(0);
  }
  close(go[1]);
  ASSERT_OK(asr_kv_elect_wait(5005, NULL, &fd, err, sizeof err));
  ASSERT(mono_ms() - t0 >= 250);
  ASSERT(fd >= 0);
  int st = asr_test_wait(pid, 5000);
  ASSERT(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  st = asr_test_wait(releaser, 5000);
  ASSERT(st != -1 && WIFEXITED(st));
  asr_kv_elect_release(fd);
}

TEST(elect_other_process_sees_busy_and_kill_releases) {
  private_lock_dir();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    int fd = -1;
    if (asr_kv_elect_try(5006, NULL, &fd, NULL, 0) != 0) _exit(3);
    (void)!write(ready[1], "x", 1);
    for (;;) pause();
  }
  close(ready[1]);
  char c, err[256];
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  int fd = -1;
  ASSERT_EQ(asr_kv_elect_try(5006, NULL, &fd, err, sizeof err), ASR_EBUSY);
  ASSERT_OK(asr_kv_elect_try(5007, NULL, &fd, err, sizeof err)); /* another port is free */
  asr_kv_elect_release(fd);
  /* SIGKILL gives no chance to unlock: the kernel releases the lock. */
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int st = asr_test_wait(pid, 5000);
  ASSERT(st != -1 && WIFSIGNALED(st));
  ASSERT_OK(asr_kv_elect_try(5006, NULL, &fd, err, sizeof err));
  asr_kv_elect_release(fd);
}

/* --- racing servers ---------------------------------------------------- */

#define NSERV 8

typedef struct {
  pid_t pid;
  int out;
  int alive;
  int leader;
} serv_t;

static void spawn_electors(serv_t *s, int n, uint16_t port) {
  char bin[PATH_MAX], portstr[16];
  snprintf(bin, sizeof bin, "%s/bootstrap/asrkv", asr_test_builddir());
  ASSERT_MSG(access(bin, X_OK) == 0, "no %s (build bootstrap/asrkv first)", bin);
  snprintf(portstr, sizeof portstr, "%u", port);
  char *argv[] = {bin, "serve", "--port", portstr, "--bind", "127.0.0.1", "--elect", NULL};
  for (int i = 0; i < n; i++) {
    int out = -1;
    pid_t pid = asr_test_spawn(argv, &out, NULL);
    s[i] = (serv_t){.pid = pid, .out = out, .alive = 1};
    ASSERT(s[i].pid > 0);
  }
}

/* Reads every process's first line: exactly one READY with its own pid, the
 * rest WAITING. Returns the leader's index. */
static int first_lines(serv_t *s, int n, uint16_t port) {
  int leader = -1;
  for (int i = 0; i < n; i++) {
    char line[256];
    int len = asr_test_read_line(s[i].out, line, sizeof line, 10000);
    ASSERT_MSG(len > 0, "server %d (pid %d) printed nothing", i, (int)s[i].pid);
    if (strncmp(line, "READY ", 6) == 0) {
      ASSERT_MSG(leader < 0, "two leaders: %d and %d", leader, i);
      char want[128];
      snprintf(want, sizeof want, "READY port=%u pid=%d", port, (int)s[i].pid);
      ASSERT_STREQ(line, want);
      leader = i;
      s[i].leader = 1;
    } else {
      ASSERT_MSG(strncmp(line, "WAITING ", 8) == 0, "server %d said '%s'", i, line);
      char portstr[32];
      snprintf(portstr, sizeof portstr, "port %u ", port);
      ASSERT_CONTAINS(line, portstr);
    }
  }
  ASSERT_MSG(leader >= 0, "no leader among %d", n);
  return leader;
}

/* After the leader died: within timeout_ms exactly one live server prints
 * READY; then nobody else does for settle_ms. Returns its index. */
static int next_leader(serv_t *s, int n, uint16_t port, int timeout_ms, int settle_ms) {
  int leader = -1;
  uint64_t deadline = mono_ms() + (uint64_t)timeout_ms, settle_end = 0;
  for (;;) {
    uint64_t now = mono_ms();
    if (leader < 0 && now >= deadline) break;
    if (leader >= 0 && now >= settle_end) break;
    struct pollfd p[NSERV];
    int idx[NSERV], np = 0;
    for (int i = 0; i < n; i++)
      if (s[i].alive && !s[i].leader) {
        p[np] = (struct pollfd){.fd = s[i].out, .events = POLLIN};
        idx[np++] = i;
      }
    uint64_t until = leader < 0 ? deadline : settle_end;
    if (poll(p, (nfds_t)np, (int)(until - now)) <= 0) continue;
    for (int k = 0; k < np; k++) {
      if (!p[k].revents) continue;
      int i = idx[k];
      char line[256];
      int len = asr_test_read_line(s[i].out, line, sizeof line, 100);
      ASSERT_MSG(len > 0, "server %d (pid %d) closed its output or printed a partial line", i, (int)s[i].pid);
      ASSERT_MSG(strncmp(line, "READY ", 6) == 0, "waiter %d said '%s'", i, line);
      ASSERT_MSG(leader < 0, "two new leaders: %d and %d", leader, i);
      char want[128];
      snprintf(want, sizeof want, "READY port=%u pid=%d", port, (int)s[i].pid);
      ASSERT_STREQ(line, want);
      leader = i;
      s[i].leader = 1;
      settle_end = mono_ms() + (uint64_t)settle_ms;
    }
  }
  ASSERT_MSG(leader >= 0, "no new leader within %d ms", timeout_ms);
  return leader;
}

static void client_roundtrip(uint16_t port, const char *key, const char *val) {
  asr_kv_pool_opts_t o = {.timeout_ms = 5000};
  char err[400] = "";
  int rc = asr_kv_set("127.0.0.1", port, key, strlen(key), val, strlen(val), ASR_KV_VTYPE_TEXT, &o, err,
                      sizeof err);
  ASSERT_MSG(rc == 0, "SET %s on port %u: %s", key, port, err);
  char got[ASR_KV_VAL_MAX];
  size_t glen = 0;
  rc = asr_kv_get("127.0.0.1", port, key, strlen(key), 0, got, sizeof got, &glen, &o, err, sizeof err);
  ASSERT_MSG(rc == 0, "GET %s on port %u: %s", key, port, err);
  ASSERT_EQ(glen, strlen(val));
  ASSERT_MEMEQ(got, val, glen);
}

static void kill_leader(serv_t *s, int i) {
  ASSERT_EQ(kill(s[i].pid, SIGKILL), 0);
  int st = asr_test_wait(s[i].pid, 5000);
  ASSERT_MSG(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "leader %d not reaped after SIGKILL", i);
  s[i].alive = 0;
  s[i].leader = 0;
}

/* SIGTERMs every live server and reaps it; all must be gone. */
static void stop_all(serv_t *s, int n) {
  for (int i = 0; i < n; i++)
    if (s[i].alive) ASSERT_EQ(kill(s[i].pid, SIGTERM), 0);
  for (int i = 0; i < n; i++) {
    if (!s[i].alive) continue;
    int st = asr_test_wait(s[i].pid, 5000);
    ASSERT_MSG(st != -1, "server %d (pid %d) ignored SIGTERM", i, (int)s[i].pid);
    ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server %d ended with status 0x%x", i, st);
    if (s[i].leader) {
      char line[256];
      ASSERT(asr_test_read_line(s[i].out, line, sizeof line, 2000) > 0);
      ASSERT_MSG(strncmp(line, "STOPPED ", 8) == 0, "leader said '%s' on SIGTERM", line);
    }
    s[i].alive = 0;
  }
  for (int i = 0; i < n; i++) {
    errno = 0;
    ASSERT_EQ(waitpid(s[i].pid, NULL, WNOHANG), -1); /* reaped: nothing left */
    ASSERT_EQ(errno, ECHILD);
    ASSERT_EQ(kill(s[i].pid, 0), -1);
  }
}

TEST_TIMEOUT(elect_eight_racing_servers, 40) {
  private_lock_dir();
  uint16_t port = asr_test_free_port();
  serv_t s[NSERV];
  spawn_electors(s, NSERV, port);
  int leader = first_lines(s, NSERV, port);
  client_roundtrip(port, "round0", "first leader");

  for (int round = 1; round <= 2; round++) {
    kill_leader(s, leader);
    uint64_t t0 = mono_ms();
    leader = next_leader(s, NSERV, port, 5000, 600);
    ASSERT_MSG(mono_ms() - t0 < 5000, "takeover took %llu ms", (unsigned long long)(mono_ms() - t0));
    /* The new leader is a fresh, empty store: the old key is gone, a new one works. */
    char key[32], val[64];
    snprintf(key, sizeof key, "round%d", round);
    snprintf(val, sizeof val, "leader %d of round %d", leader, round);
    client_roundtrip(port, key, val);
    asr_kv_pool_opts_t o = {.timeout_ms = 3000};
    char got[64], err[400];
    size_t glen;
    ASSERT_EQ(asr_kv_get("127.0.0.1", port, "round0", 6, 0, got, sizeof got, &glen, &o, err, sizeof err),
              ASR_ENOTFOUND);
  }
  int live = 0;
  for (int i = 0; i < NSERV; i++) live += s[i].alive;
  ASSERT_EQ(live, NSERV - 2);
  stop_all(s, NSERV);
  for (int i = 0; i < NSERV; i++) close(s[i].out);
}

TEST_TIMEOUT(elect_two_jobs_two_leaders, 30) {
  private_lock_dir();
  uint16_t p1 = asr_test_free_port(), p2;
  do p2 = asr_test_free_port();
  while (p2 == p1);
  serv_t a[3], b[3];
  spawn_electors(a, 3, p1);
  spawn_electors(b, 3, p2);
  int la = first_lines(a, 3, p1);
  int lb = first_lines(b, 3, p2);
  client_roundtrip(p1, "job", "one");
  client_roundtrip(p2, "job", "two");
  /* Each job sees only its own value. */
  asr_kv_pool_opts_t o = {.timeout_ms = 3000};
  char got[64], err[400];
  size_t glen;
  ASSERT_OK(asr_kv_get("127.0.0.1", p1, "job", 3, 0, got, sizeof got, &glen, &o, err, sizeof err));
  ASSERT(glen == 3 && memcmp(got, "one", 3) == 0);
  /* Killing one job's leader does not disturb the other job. */
  kill_leader(a, la);
  next_leader(a, 3, p1, 5000, 300);
  client_roundtrip(p1, "job", "one again");
  ASSERT_OK(asr_kv_get("127.0.0.1", p2, "job", 3, 0, got, sizeof got, &glen, &o, err, sizeof err));
  ASSERT(glen == 3 && memcmp(got, "two", 3) == 0);
  ASSERT(b[lb].alive && b[lb].leader);
  stop_all(a, 3);
  stop_all(b, 3);
  for (int i = 0; i < 3; i++) {
    close(a[i].out);
    close(b[i].out);
  }
}

TEST(elect_serve_needs_port) {
  private_lock_dir();
  char bin[PATH_MAX];
  snprintf(bin, sizeof bin, "%s/bootstrap/asrkv", asr_test_builddir());
  char *argv[] = {bin, "serve", "--elect", NULL};
  int out = -1, errfd = -1;
  pid_t pid = asr_test_spawn(argv, &out, &errfd);
  char *o = asr_test_read_all(out, 5000), *e = asr_test_read_all(errfd, 5000);
  int st = asr_test_wait(pid, 5000);
  ASSERT(st != -1 && WIFEXITED(st));
  ASSERT_EQ(WEXITSTATUS(st), 2);
  ASSERT_CONTAINS(e, "--elect needs an explicit --port");
  ASSERT_STREQ(o, "");
  free(o);
  free(e);
}

/* The leader's mark: each mark is a new token that readers see whole; a
 * port nobody has locked has no file to read. */
TEST(mark_changes_with_each_leader) {
  private_lock_dir();
  char a[64] = "x", b[64] = "x", c[64];
  ASSERT(asr_kv_elect_read_mark(4713, "h1", a, sizeof a) != 0);
  int fd = -1;
  ASSERT_OK(asr_kv_elect_try(4713, "h1", &fd, NULL, 0));
  ASSERT_OK(asr_kv_elect_read_mark(4713, "h1", a, sizeof a));
  ASSERT_STREQ(a, ""); /* locked, not marked yet */
  ASSERT_OK(asr_kv_elect_mark(fd));
  ASSERT_OK(asr_kv_elect_read_mark(4713, "h1", a, sizeof a));
  char want[32];
  snprintf(want, sizeof want, "%ld ", (long)getpid());
  ASSERT_MSG(strncmp(a, want, strlen(want)) == 0 && strlen(a) == strlen(want) + 17, "mark '%s'", a);
  asr_kv_elect_release(fd);
  /* the mark outlives its leader; the next leader's differs */
  ASSERT_OK(asr_kv_elect_read_mark(4713, "h1", b, sizeof b));
  ASSERT_STREQ(b, a);
  ASSERT_OK(asr_kv_elect_try(4713, "h1", &fd, NULL, 0));
  ASSERT_OK(asr_kv_elect_mark(fd));
  ASSERT_OK(asr_kv_elect_read_mark(4713, "h1", b, sizeof b));
  ASSERT_MSG(strcmp(a, b) != 0, "two leaders wrote the same mark '%s'", a);
  /* a short buffer gets a prefix, terminated */
  ASSERT_OK(asr_kv_elect_read_mark(4713, "h1", c, 4));
  ASSERT_EQ(strlen(c), 3);
  ASSERT_EQ(asr_kv_elect_read_mark(0, "h1", c, sizeof c), ASR_EINVAL);
  ASSERT_EQ(asr_kv_elect_read_mark(4713, "h1", c, 0), ASR_EINVAL);
  asr_kv_elect_release(fd);
}
