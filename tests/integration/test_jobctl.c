/*
 * test_jobctl.c -- a healthy job never fails because of its terminal:
 * output back-pressure (a paused or blocked reader, bounded memory, `| head
 * -1`, long lines, byte-exact untagged output, --output-dir), liveness apart
 * from output (asrrun stopped), signals (forwarded ones, Ctrl-Z and Ctrl-\
 * through a real pty), ranks that leave early, and stdin that is not read.
 *
 * Each case drives a real asrrun job (job_util.h) running tests/apps/outgen
 * (output of known shape) or tests/apps/early_exit, and checks every line
 * that came back, the exit code, and that nothing of the job is left.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "job_util.h"

/* --- what the tests look at -------------------------------------------------------- */

/* A field of /proc/PID/status in kB ("VmRSS", "VmHWM"), or -1. */
static long status_kb(pid_t pid, const char *field) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  char *s = read_file(path, NULL);
  if (!s) return -1;
  long kb = -1;
  char *p = strstr(s, field);
  if (p) sscanf(p + strlen(field) + 1, "%ld", &kb);
  free(s);
  return kb;
}

/* The state letter of pid ('R', 'S', 'T', ...), or 0. */
static char proc_state(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  char *s = read_file(path, NULL);
  if (!s) return 0;
  char *rp = strrchr(s, ')');
  char c = rp && rp[1] == ' ' ? rp[2] : 0;
  free(s);
  return c;
}

/* The children of parent that lead their own process group (for an asrd:
 * its ranks, not its shm watcher), up to max. */
static int children_of(pid_t parent, pid_t *pids, int max) {
  DIR *d = opendir("/proc");
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    char *st = read_file(path, NULL);
    if (!st) continue;
    char *rp = strrchr(st, ')');
    int ppid = 0, pgid = 0;
    if (rp && sscanf(rp + 2, "%*c %d %d", &ppid, &pgid) == 2 && ppid == parent && pgid == atoi(e->d_name) &&
        n < max)
      pids[n++] = atoi(e->d_name);
    free(st);
  }
  if (d) closedir(d);
  return n;
}

/* Whether every process of group pgid is stopped: in state T, or in D
 * with a child in T. The second is dash's vfork: the shell waits
 * uninterruptibly until its child execs, and the group's SIGSTOP stopped
 * the child first; the shell can no more run than a stopped process until
 * SIGCONT. */
static int group_stopped(pid_t pgid) {
  struct {
    pid_t pid, ppid;
    char st;
  } p[256];
  int n = 0;
  DIR *d = opendir("/proc");
  struct dirent *e;
  while (d && (e = readdir(d)) && n < 256) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    char *st = read_file(path, NULL);
    if (!st) continue;
    char *rp = strrchr(st, ')');
    char c;
    int ppid = 0, pg = 0;
    if (rp && sscanf(rp + 2, "%c %d %d", &c, &ppid, &pg) == 3 && pg == pgid)
      p[n].pid = atoi(e->d_name), p[n].ppid = ppid, p[n++].st = c;
    free(st);
  }
  if (d) closedir(d);
  for (int i = 0; i < n; i++) {
    int ok = p[i].st == 'T';
    for (int j = 0; !ok && p[i].st == 'D' && j < n; j++) ok = p[j].ppid == p[i].pid && p[j].st == 'T';
    if (!ok) return 0;
  }
  return n > 0;
}

/* Waits up to ms for n children of asrd (their pids to pids), each one's
 * process group stopped. */
static int ranks_stopped(pid_t asrd, int n, int ms, pid_t *pids) {
  uint64_t until = now_ms() + (uint64_t)ms;
  do {
    int k = children_of(asrd, pids, 64), ok = k == n;
    for (int i = 0; ok && i < k; i++) ok = group_stopped(pids[i]);
    if (ok) return 1;
    sleep_ms(20);
  } while (now_ms() < until);
  return 0;
}

/* Checks that stdout holds, for each of nranks ranks, outgen's lines
 * "R:SEQ:..." with SEQ 0, 1, 2, ... in order and nothing else; returns the
 * total count and each rank's bytes (its lines with their newlines). */
static long check_outgen_lines(job_t *j, int nranks, int tagged, long long *bytes) {
  long next[64] = {0};
  long total = 0;
  char *copy = malloc(j->outlen + 1);
  memcpy(copy, j->out, j->outlen + 1);
  int n;
  char **v = split_lines(copy, &n);
  for (int i = 0; i < nranks; i++) bytes[i] = 0;
  for (int i = 0; i < n; i++) {
    const char *s = v[i];
    if (!*s && i == n - 1) break;
    int tag = tagged ? tag_of(s, &s) : -1;
    int r;
    long seq;
    if (sscanf(s, "%d:%ld:", &r, &seq) != 2 || r < 0 || r >= nranks || (tagged && tag != r))
      JOB_FAIL(j, "line %d is not one of outgen's: '%.80s'", i, v[i]);
    if (seq != next[r])
      JOB_FAIL(j, "rank %d's line %ld came where line %ld was due ('%.60s')", r, seq, next[r], s);
    next[r]++;
    bytes[r] += (long long)strlen(s) + 1;
    total++;
  }
  free(v);
  free(copy);
  return total;
}

/* Pumps stdout except during pauses: holds off reading asrrun's stdout for
 * pause_ms, sampling the peak RSS of asrrun and its asrd meanwhile. */
static void pause_reader(job_t *j, int pause_ms, long *asrrun_kb, long *asrd_kb) {
  pid_t asrd = find_asrd(j->pid, 5000);
  uint64_t until = now_ms() + (uint64_t)pause_ms;
  *asrrun_kb = *asrd_kb = 0;
  while (now_ms() < until) {
    long a = status_kb(j->pid, "VmRSS"), d = asrd ? status_kb(asrd, "VmRSS") : -1;
    if (a > *asrrun_kb) *asrrun_kb = a;
    if (d > *asrd_kb) *asrd_kb = d;
    /* stderr still read: only stdout is the slow consumer */
    if (j->err_fd >= 0) {
      struct pollfd p = {.fd = j->err_fd, .events = POLLIN};
      if (poll(&p, 1, 50) > 0) {
        char buf[4096];
        ssize_t k = read(j->err_fd, buf, sizeof buf);
        if (k > 0) {
          if (j->errlen + (size_t)k + 1 > j->errcap)
            j->err = realloc(j->err, j->errcap = 2 * j->errcap + (size_t)k);
          memcpy(j->err + j->errlen, buf, (size_t)k);
          j->errlen += (size_t)k;
          j->err[j->errlen] = '\0';
        }
      }
    } else {
      sleep_ms(50);
    }
  }
}

#define START(j, in, ...)                            \
  do {                                               \
    const char *const args_[] = {__VA_ARGS__, NULL}; \
    job_start((j), (in), args_);                     \
  } while (0)

/* ---------------------------------------------------------------------------------- */
/* 1. back-pressure                                                                    */

/* A reader that pauses 3 s gets every line, and the job exits 0: a paused
 * reader holds the ranks back, never loses their lines, and never makes
 * asrd look dead (before flow control it did both: most lines lost, and
 * 125, "asrd on host ... died"). */
TEST_TIMEOUT(paused_reader_gets_every_line, 60) {
  setup();
  job_t j;
  START(&j, IN_NULL, "-n", "1", bin("tests/apps/outgen"), "bytes", "1000000");
  long a, d;
  pause_reader(&j, 3000, &a, &d);
  JOB_FINISH(&j, 40000);
  ASSERT_CODE(&j, 0);
  long long bytes[1];
  long n = check_outgen_lines(&j, 1, 1, bytes);
  ASSERT_JOB(&j, bytes[0] >= 1000000 && bytes[0] < 1000100);
  ASSERT_JOB(&j, n > 12000);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* 4 ranks x 50 MB behind a reader paused 4 s: asrrun and asrd stay within
 * their bounds (asrrun a fixed few MiB, asrd 1 MiB per rank plus a base,
 * however much the ranks write; before flow control both grew with it),
 * and every line arrives. */
TEST_TIMEOUT(output_memory_bounded, 240) {
  setup();
  job_t j;
  START(&j, IN_NULL, "-n", "4", bin("tests/apps/outgen"), "bytes", "50000000");
  long a, d;
  pause_reader(&j, 4000, &a, &d);
  JOB_FINISH(&j, 200000);
  ASSERT_CODE(&j, 0);
  long long bytes[4];
  check_outgen_lines(&j, 4, 1, bytes);
  for (int r = 0; r < 4; r++) ASSERT_JOB(&j, bytes[r] >= 50000000 && bytes[r] < 50000100);
  fprintf(stderr, "peak RSS during the pause: asrrun %ld kB, asrd %ld kB\n", a, d);
  if (a > 24 * 1024) JOB_FAIL(&j, "asrrun grew to %ld kB behind a paused reader", a);
  if (d > 32 * 1024) JOB_FAIL(&j, "asrd grew to %ld kB behind a paused reader", d);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* stdout blocked longer than the heartbeat timeout: heartbeats do not wait
 * behind output, the job exits 0 with every line (at bbdac0b: "nothing heard
 * from asrrun", 125). */
TEST_TIMEOUT(stdout_blocked_past_heartbeat, 90) {
  setup();
  job_t j;
  START(&j, IN_NULL, "-n", "2", "--heartbeat-timeout", "2", bin("tests/apps/outgen"), "lines", "100000");
  long a, d;
  pause_reader(&j, 6000, &a, &d);
  JOB_FINISH(&j, 60000);
  ASSERT_CODE(&j, 0);
  long long bytes[2];
  ASSERT_EQ(check_outgen_lines(&j, 2, 1, bytes), 200000);
  ASSERT_JOB(&j, !strstr(j.err, "heard"));
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* The same for 20 s with the default heartbeat timeout (10 s). */
TEST_LONG(stdout_blocked_20s, 120) {
  setup();
  job_t j;
  START(&j, IN_NULL, "-n", "2", bin("tests/apps/outgen"), "lines", "100000");
  long a, d;
  pause_reader(&j, 20000, &a, &d);
  JOB_FINISH(&j, 60000);
  ASSERT_CODE(&j, 0);
  long long bytes[2];
  ASSERT_EQ(check_outgen_lines(&j, 2, 1, bytes), 200000);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* `| head -1`: the reader goes away; the ranks see a closed pipe (SIGPIPE
 * ends outgen) and the job ends by their own behaviour: 128+SIGPIPE. */
TEST_TIMEOUT(reader_goes_away, 60) {
  setup();
  job_t j;
  START(&j, IN_NULL, "-n", "2", bin("tests/apps/outgen"), "forever");
  JOB_WAIT_LINES(&j, 1, 20000);
  close(j.out_fd);
  j.out_fd = -1;
  JOB_FINISH(&j, 20000);
  ASSERT_CODE(&j, 128 + SIGPIPE);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* A 1 MiB line is one tagged line; a 3 MB one continues without an added
 * newline or a second tag, and the other rank's lines stay whole around it
 * (before, a long line arrived cut into many tagged lines). */
TEST_TIMEOUT(long_lines_stay_whole, 90) {
  setup();
  const char *og = bin("tests/apps/outgen");
  const char *prog =
      fmt("if [ $ASR_RANK = 0 ]; then exec %s line 1048576 2; "
          "elif [ $ASR_RANK = 1 ]; then exec %s line 3000000; else exec %s lines 3000; fi",
          og, og, og);
  job_t j;
  RUN(&j, 60000, "-n", "3", "sh", "-c", prog);
  ASSERT_CODE(&j, 0);
  int n;
  char **v = split_lines(j.out, &n);
  int big0 = 0, big1 = 0;
  long next = 0;
  for (int i = 0; i < n; i++) {
    const char *s;
    int tag = tag_of(v[i], &s);
    if (!*v[i] && i == n - 1) break;
    size_t len = strlen(s);
    if (tag == 0) {
      if (len != 1048576 || strncmp(s, "0:", 2) != 0)
        JOB_FAIL(&j, "rank 0's line %d is %zu bytes", big0, len);
      for (size_t k = 2; k < len; k++)
        if (s[k] != (char)('a' + k % 26)) JOB_FAIL(&j, "rank 0's line differs at byte %zu", k);
      big0++;
    } else if (tag == 1) {
      if (len != 3000000 || strncmp(s, "1:", 2) != 0) JOB_FAIL(&j, "rank 1's line is %zu bytes", len);
      for (size_t k = 2; k < len; k++)
        if (s[k] != (char)('a' + k % 26)) JOB_FAIL(&j, "rank 1's line differs at byte %zu", k);
      big1++;
    } else if (tag == 2) {
      long seq;
      if (sscanf(s, "2:%ld:", &seq) != 1 || seq != next)
        JOB_FAIL(&j, "rank 2's line %ld is '%.60s'", next, s);
      next++;
    } else {
      JOB_FAIL(&j, "line %d has no tag: '%.60s'", i, v[i]);
    }
  }
  ASSERT_EQ(big0, 2);
  ASSERT_EQ(big1, 1);
  ASSERT_EQ(next, 3000);
  teardown();
}

/* --no-tag-output passes a rank's bytes through exactly: no newline added
 * (at bbdac0b: one after every 64 KiB piece and at the end). */
TEST_TIMEOUT(untagged_output_byte_exact, 60) {
  setup();
  job_t j;
  RUN(&j, 40000, "-n", "1", "--no-tag-output", bin("tests/apps/outgen"), "binary", "300000");
  ASSERT_CODE(&j, 0);
  ASSERT_EQ(j.outlen, 300000);
  unsigned x = 12345u;
  for (size_t i = 0; i < 300000; i++) {
    x = x * 1103515245u + 12345u;
    if ((unsigned char)j.out[i] != (unsigned char)(x >> 16)) JOB_FAIL(&j, "byte %zu differs", i);
  }
  teardown();
}

/* --output-dir is made with its parents; one that cannot be made is an error
 * before launch (at bbdac0b: exit 0, nothing written). */
TEST_TIMEOUT(output_dir_made_or_refused, 60) {
  setup();
  const char *dir = fmt("%s/x/a/b", W.dir);
  job_t j;
  RUN(&j, 30000, "-n", "2", "--output-dir", dir, bin("tests/apps/outgen"), "lines", "10");
  ASSERT_CODE(&j, 0);
  for (int r = 0; r < 2; r++) {
    size_t len = 0;
    char *s = read_file(fmt("%s/rank.%d/stdout", dir, r), &len);
    if (!s) JOB_FAIL(&j, "%s/rank.%d/stdout was not written", dir, r);
    ASSERT_EQ(count_substr(s, "\n"), 10);
    ASSERT(strncmp(s, fmt("%d:0:", r), 3) == 0);
    free(s);
  }
  const char *file = fmt("%s/plain", W.dir);
  write_file(file, "a file\n", 0644);
  const char *bad = fmt("%s/sub", file);
  job_t k;
  RUN(&k, 30000, "-n", "1", "--output-dir", bad, "true");
  ASSERT_CODE(&k, 2);
  ASSERT_CONTAINS(k.err, bad);
  ASSERT_CONTAINS(k.err, "--output-dir");
  ASSERT_STARTED_NOTHING();
  teardown();
}

/* A full disk under --output-dir is an error naming the file. */
TEST_TIMEOUT(output_dir_full_disk, 60) {
  setup();
  const char *dir = fmt("%s/small", W.dir);
  ASSERT(mkdir(dir, 0755) == 0);
  if (mount("asrtest", dir, "tmpfs", 0, "size=128k") != 0)
    SKIP("cannot mount a small tmpfs: %s", strerror(errno));
  job_t j;
  START(&j, IN_NULL, "-n", "1", "--output-dir", dir, bin("tests/apps/outgen"), "bytes", "2000000");
  int code = JOB_FINISH(&j, 30000);
  umount2(dir, MNT_DETACH);
  ASSERT_JOB(&j, code != 0);
  ASSERT_CONTAINS(j.err, fmt("%s/rank.0/stdout", dir));
  ASSERT_CONTAINS(j.err, "No space left");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* 64 MiB into rank 0's stdin while it reads nothing for 4 s: asrrun and asrd
 * hold a bounded amount (the writer blocks), and rank 0 then reads every byte
 * (before, asrd held all of it, resident, until the rank read it). */
TEST_TIMEOUT(unread_stdin_bounded, 120) {
  setup();
  job_t j;
  START(&j, IN_PIPE, "-n", "1", "sh", "-c", "sleep 4; wc -c");
  fcntl(j.in_fd, F_SETFL, O_NONBLOCK);
  pid_t asrd = find_asrd(j.pid, 5000);
  ASSERT(asrd > 0);
  static char chunk[65536];
  memset(chunk, 'x', sizeof chunk);
  const long long total = 64ll << 20;
  long long sent = 0;
  long peak_a = 0, peak_d = 0;
  uint64_t pause_end = now_ms() + 3000;
  while (sent < total) {
    ssize_t w =
        write(j.in_fd, chunk,
              (size_t)(total - sent < (long long)sizeof chunk ? total - sent : (long long)sizeof chunk));
    if (w > 0) sent += w;
    if (now_ms() < pause_end) {
      long a = status_kb(j.pid, "VmRSS"), d = status_kb(asrd, "VmRSS");
      if (a > peak_a) peak_a = a;
      if (d > peak_d) peak_d = d;
    }
    if (w < 0 && errno != EAGAIN) JOB_FAIL(&j, "writing asrrun's stdin: %s", strerror(errno));
    if (w < 0) job_pump(&j, 10);
    if (j.exited) JOB_FAIL(&j, "asrrun exited (%d) while its stdin was written", j.code);
  }
  JOB_FINISH(&j, 60000);
  ASSERT_CODE(&j, 0);
  fprintf(stderr, "peak RSS while stdin was not read: asrrun %ld kB, asrd %ld kB\n", peak_a, peak_d);
  ASSERT_CONTAINS(j.out, "[0] 67108864\n");
  if (peak_a > 24 * 1024) JOB_FAIL(&j, "asrrun grew to %ld kB on unread stdin", peak_a);
  if (peak_d > 24 * 1024) JOB_FAIL(&j, "asrd grew to %ld kB on unread stdin", peak_d);
  teardown();
}

/* ---------------------------------------------------------------------------------- */
/* 2. liveness apart from output                                                       */

static void stopped_asrrun(int stop_s, int hb_s) {
  setup();
  job_t j;
  const char *prog = fmt("sleep %d; echo done $ASR_RANK", stop_s + 2);
  const char *hb = fmt("%d", hb_s);
  START(&j, IN_NULL, "-n", "2", "--heartbeat-timeout", hb, "sh", "-c", prog);
  ASSERT(find_asrd(j.pid, 5000) > 0);
  sleep_ms(300);
  kill(j.pid, SIGSTOP);
  sleep_ms(stop_s * 1000);
  kill(j.pid, SIGCONT);
  JOB_FINISH(&j, (stop_s + 30) * 1000);
  ASSERT_CODE(&j, 0);
  ASSERT_CONTAINS(j.out, "[0] done 0");
  ASSERT_CONTAINS(j.out, "[1] done 1");
  ASSERT_JOB(&j, !strstr(j.err, "heard") && !strstr(j.err, "host down"));
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* asrrun stopped (SIGSTOP) three times the heartbeat timeout, then continued:
 * the job carries on (at bbdac0b asrd killed the ranks). */
TEST_TIMEOUT(asrrun_stopped_then_continued, 60) { stopped_asrrun(6, 2); }
TEST_LONG(asrrun_stopped_20s, 120) { stopped_asrrun(20, 10); }

/* ---------------------------------------------------------------------------------- */
/* 3. signals                                                                          */

static const char *const TRAPS =
    "for s in USR1 USR2 ALRM WINCH; do trap \"echo got $s\" $s; done; echo ready; "
    "i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done";

/* SIGUSR1, SIGUSR2, SIGALRM and SIGWINCH reach every rank (at bbdac0b the
 * first three killed asrrun and the job). */
TEST_TIMEOUT(signals_forwarded, 60) {
  setup();
  job_t j;
  START(&j, IN_NULL, "-n", "3", "sh", "-c", TRAPS);
  JOB_WAIT_LINES(&j, 3, 20000);
  const int sigs[] = {SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH};
  const char *names[] = {"USR1", "USR2", "ALRM", "WINCH"};
  for (int s = 0; s < 4; s++) {
    kill(j.pid, sigs[s]);
    JOB_WAIT_LINES(&j, 3 + 3 * (s + 1), 10000);
    for (int r = 0; r < 3; r++)
      if (!strstr(j.out, fmt("[%d] got %s\n", r, names[s])))
        JOB_FAIL(&j, "rank %d did not get SIG%s", r, names[s]);
  }
  kill(j.pid, SIGTERM);
  JOB_FINISH(&j, 20000);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* SIGTSTP stops the ranks and asrrun; SIGCONT resumes them and the job ends
 * normally. */
TEST_TIMEOUT(sigtstp_stops_ranks, 60) {
  setup();
  job_t j;
  START(&j, IN_NULL, "-n", "2", "sh", "-c", "echo up; sleep 2; echo done");
  JOB_WAIT_LINES(&j, 2, 20000);
  pid_t asrd = find_asrd(j.pid, 5000), pids[64];
  ASSERT(asrd > 0);
  kill(j.pid, SIGTSTP);
  if (!ranks_stopped(asrd, 2, 5000, pids)) JOB_FAIL(&j, "the ranks were not stopped by SIGTSTP");
  sleep_ms(3000); /* past the ranks' sleep: they print "done" only once continued */
  job_pump(&j, 10);
  ASSERT_JOB(&j, !strstr(j.out, "done"));
  kill(j.pid, SIGCONT);
  JOB_FINISH(&j, 20000);
  ASSERT_CODE(&j, 0);
  ASSERT_EQ(count_substr(j.out, "done\n"), 2);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* asrrun on a real terminal (a pty): runs job_start's part by hand. */
typedef struct {
  pid_t pid;
  int master;
  char out[65536];
  size_t len;
} ptyjob_t;

static void pty_start(ptyjob_t *p, const char *const *args) {
  memset(p, 0, sizeof *p);
  int n = 0;
  while (args[n]) n++;
  char **argv = calloc((size_t)n + 2, sizeof *argv);
  argv[0] = (char *)bin("bin/asrrun");
  for (int i = 0; i < n; i++) argv[i + 1] = (char *)args[i];
  fflush(NULL);
  struct termios tio;
  memset(&tio, 0, sizeof tio);
  cfmakeraw(&tio);
  tio.c_lflag |= ISIG; /* ^Z, ^C, ^\ become signals for the foreground group */
  tio.c_cc[VINTR] = 3;
  tio.c_cc[VQUIT] = 28;
  tio.c_cc[VSUSP] = 26;
  tio.c_cc[VMIN] = 1;
  pid_t pid = forkpty(&p->master, NULL, &tio, NULL);
  ASSERT(pid >= 0);
  if (pid == 0) {
    signal(SIGPIPE, SIG_DFL);
    execv(argv[0], argv);
    _exit(126);
  }
  free(argv);
  p->pid = pid;
  fcntl(p->master, F_SETFL, O_NONBLOCK);
}

static void pty_pump(ptyjob_t *p, int ms) {
  struct pollfd q = {.fd = p->master, .events = POLLIN};
  if (poll(&q, 1, ms) > 0) {
    ssize_t k = read(p->master, p->out + p->len, sizeof p->out - p->len - 1);
    if (k > 0) p->len += (size_t)k;
    p->out[p->len] = '\0';
  }
}

static int pty_wait_text(ptyjob_t *p, const char *text, int ms) {
  uint64_t until = now_ms() + (uint64_t)ms;
  while (!strstr(p->out, text) && now_ms() < until) pty_pump(p, 20);
  return strstr(p->out, text) != NULL;
}

/* asrrun's exit code (128+signal), or -1 past ms (then it is killed). */
static int pty_finish(ptyjob_t *p, int ms) {
  uint64_t until = now_ms() + (uint64_t)ms;
  int st;
  for (;;) {
    pty_pump(p, 20);
    if (waitpid(p->pid, &st, WNOHANG) == p->pid) break;
    if (now_ms() >= until) {
      kill(p->pid, SIGKILL);
      waitpid(p->pid, &st, 0);
      fprintf(stderr, "---- terminal ----\n%s\n----\n", p->out);
      close(p->master);
      return -1;
    }
  }
  close(p->master);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Ctrl-Z on asrrun's terminal stops the ranks too (the local asrd keeps
 * running: it is not in the terminal's foreground group); `fg` (SIGCONT)
 * resumes them and the job ends normally. */
TEST_TIMEOUT(terminal_ctrl_z, 60) {
  setup();
  ptyjob_t p;
  const char *const args[] = {"-n", "2", "sh", "-c", "echo up; sleep 2; echo finished", NULL};
  pty_start(&p, args);
  ASSERT_MSG(pty_wait_text(&p, "[1] up", 20000) && pty_wait_text(&p, "[0] up", 5000), "no 'up' lines: %s",
             p.out);
  pid_t asrd = find_asrd(p.pid, 5000), pids[64];
  ASSERT(asrd > 0);
  ASSERT(write(p.master, "\x1a", 1) == 1);
  int stopped = ranks_stopped(asrd, 2, 5000, pids);
  char asrd_state = proc_state(asrd);
  char run_state = proc_state(p.pid);
  sleep_ms(2500);
  pty_pump(&p, 10);
  int early = strstr(p.out, "finished") != NULL;
  kill(p.pid, SIGCONT);
  int code = pty_finish(&p, 20000);
  ASSERT_MSG(stopped, "Ctrl-Z did not stop the ranks");
  ASSERT_MSG(asrd_state != 'T', "the local asrd was stopped by the terminal's Ctrl-Z");
  ASSERT_MSG(run_state == 'T', "asrrun did not stop on Ctrl-Z (state %c)", run_state);
  ASSERT_MSG(!early, "the ranks ran on while stopped");
  ASSERT_EQ(code, 0);
  ASSERT_EQ(count_substr(p.out, "finished"), 2);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* Ctrl-\ is asrrun's own (the terminal's SIGQUIT reaches neither the local
 * asrd nor the ranks directly): once, it prints the job's state report and
 * the job goes on (issue 24; before it, the job ended at once); twice within
 * 2 s, it ends the job with 131, and nothing is left behind. */
TEST_TIMEOUT(terminal_ctrl_backslash, 60) {
  setup();
  ptyjob_t p;
  const char *const args[] = {"-n", "2", "sh", "-c", "echo up; exec sleep 30", NULL};
  pty_start(&p, args);
  ASSERT_MSG(pty_wait_text(&p, "[1] up", 20000) && pty_wait_text(&p, "[0] up", 5000), "no 'up' lines: %s",
             p.out);
  ASSERT(write(p.master, "\x1c", 1) == 1);
  ASSERT_MSG(pty_wait_text(&p, "asrrun: end of state report", 15000), "no state report: %s", p.out);
  ASSERT_CONTAINS(p.out, "rank 0 is not a libasr process (no report)");
  sleep_ms(2500); /* past the window: the job still runs */
  ASSERT_MSG(waitpid(p.pid, NULL, WNOHANG) == 0, "asrrun ended after one Ctrl-\\: %s", p.out);
  ASSERT(write(p.master, "\x1c", 1) == 1);
  sleep_ms(200);
  ASSERT(write(p.master, "\x1c", 1) == 1);
  int code = pty_finish(&p, 20000);
  ASSERT_MSG(code == 128 + SIGQUIT, "asrrun exited %d after Ctrl-\\; terminal: %s", code, p.out);
  ASSERT_CONTAINS(p.out, "SIGQUIT");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* ---------------------------------------------------------------------------------- */
/* 4. ranks that leave early                                                           */

/* A rank that exits 0 without joining while the others wait for it ends the
 * job with a line naming it (at bbdac0b the others waited forever). */
TEST_TIMEOUT(rank_exits_without_init, 60) {
  setup();
  job_t j;
  RUN(&j, 40000, "-n", "3", "--timeout", "30", bin("tests/apps/early_exit"), "noinit", "2");
  ASSERT_CODE(&j, 125);
  ASSERT_CONTAINS(j.err, "rank 2 exited with status 0 without joining the job");
  ASSERT_CONTAINS(j.err, "--allow-early-exit");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* One that joins, then exits while the others wait in a barrier. */
TEST_TIMEOUT(rank_exits_mid_fence, 60) {
  setup();
  job_t j;
  RUN(&j, 40000, "-n", "3", "--timeout", "30", bin("tests/apps/early_exit"), "nofinal", "1");
  ASSERT_CODE(&j, 125);
  ASSERT_CONTAINS(j.err, "rank 1 exited with status 0 after joining the job, without finalizing");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* The other way round: one dies (SIGKILL) and the others, their barrier
 * failed, leave without finalizing a moment later. The death came first
 * and is the job's cause: 137 naming rank 1, not 125 naming a leaver
 * (the first of these to be seen used to go up at once while the death
 * was held, asrd_ranks.c: FAIL_HOLD_MS). */
TEST_TIMEOUT(rank_killed_then_others_leave, 60) {
  setup();
  job_t j;
  RUN(&j, 40000, "-n", "3", "--timeout", "30", bin("tests/apps/early_exit"), "killed", "1");
  ASSERT_CODE(&j, 137);
  ASSERT_CONTAINS(j.err, "rank 1 on host");
  ASSERT_CONTAINS(j.err, "was killed by signal 9");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* The same when the others learn of the death before its daemon could:
 * rank 1 dies of SIGKILL with 1 MiB sends to rank 0 in flight over shm,
 * whose receiver copies out of the sender's memory, which a killed
 * process loses before it closes its files; rank 0 fails its receive and
 * exits 1, and the third rank leaves when its barrier fails. The death is
 * still the job's cause (at f5eaf72 rank 0's exit 1 was named now and
 * then: asrd reported it before it had reaped the dying rank). */
TEST_TIMEOUT(rank_killed_mid_transfer, 60) {
  setup();
  job_t j;
  RUN(&j, 40000, "-n", "3", "--timeout", "30", "-x", "ASR_PROVIDER=shm", bin("tests/apps/killed_peer"),
      "transfer", "1");
  ASSERT_CODE(&j, 137);
  ASSERT_CONTAINS(j.err, "rank 1 on host");
  ASSERT_CONTAINS(j.err, "was killed by signal 9");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* --allow-early-exit lets it be (the others then wait: --timeout ends it);
 * plain programs that never join, and a job whose ranks all finalize, are
 * unaffected. */
TEST_TIMEOUT(early_exit_allowed_and_unaffected, 60) {
  setup();
  job_t j;
  RUN(&j, 40000, "-n", "3", "--timeout", "3", "--allow-early-exit", bin("tests/apps/early_exit"), "noinit",
      "2");
  ASSERT_CODE(&j, 124);
  job_t k;
  RUN(&k, 30000, "-n", "4", "true");
  ASSERT_CODE(&k, 0);
  job_t l;
  RUN(&l, 30000, "-n", "3", bin("tests/apps/early_exit"), "none");
  ASSERT_CODE(&l, 0);
  ASSERT_EQ(count_substr(l.out, ": done\n"), 3);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* ---------------------------------------------------------------------------------- */
/* exit codes: a rank's own 127 is the rank's                                          */

/* A rank that runs and exits 127 (its own shell's "command not found") is
 * reported as that rank's status, not as a program asrd could not start
 * (at 05e6c52: "could not be executed"); one that asrd cannot execute (a
 * script whose interpreter is missing) still is. */
TEST_TIMEOUT(rank_status_127_is_the_ranks, 60) {
  setup();
  job_t j;
  RUN(&j, 30000, "-n", "2", "sh", "-c", "[ $ASR_RANK = 1 ] && exit 127; sleep 5");
  ASSERT_CODE(&j, 127);
  ASSERT_CONTAINS(j.err, "rank 1 on host");
  ASSERT_CONTAINS(j.err, "exited with status 127");
  ASSERT_JOB(&j, !strstr(j.err, "could not be executed"));
  const char *script = fmt("%s/badinterp.sh", W.dir);
  write_file(script, "#!/nonexistent/asrt-interp\necho hi\n", 0755);
  job_t k;
  RUN(&k, 30000, "-n", "2", script);
  ASSERT_CODE(&k, 127);
  ASSERT_CONTAINS(k.err, "could not be executed");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* --timestamp-output stamps every line (before the tag) with the time asrrun
 * got it; the --output-dir file keeps the rank's bytes only. */
TEST_TIMEOUT(timestamp_output, 60) {
  setup();
  const char *dir = fmt("%s/out", W.dir);
  job_t j;
  RUN(&j, 30000, "-n", "2", "--timestamp-output", "--output-dir", dir, bin("tests/apps/outgen"), "lines",
      "3");
  ASSERT_CODE(&j, 0);
  int n;
  char **v = split_lines(j.out, &n);
  int seen = 0;
  for (int i = 0; i < n; i++) {
    if (!*v[i]) continue;
    int y, mo, d, h, mi, s, ms, r, r2;
    long seq;
    char c;
    if (sscanf(v[i], "%4d-%2d-%2dT%2d:%2d:%2d.%3d [%d] %d:%ld:%c", &y, &mo, &d, &h, &mi, &s, &ms, &r, &r2,
               &seq, &c) != 11 ||
        r != r2 || y < 2024 || mo < 1 || mo > 12)
      JOB_FAIL(&j, "line %d is not stamped: '%s'", i, v[i]);
    seen++;
  }
  ASSERT_EQ(seen, 6);
  char *f = read_file(fmt("%s/rank.1/stdout", dir), NULL);
  ASSERT(f && strncmp(f, "1:0:", 4) == 0);
  free(f);
  teardown();
}

/* --wdir: the ranks start there (and a relative program is found there);
 * without it, in asrrun's directory; a missing one is refused before
 * launch. */
TEST_TIMEOUT(wdir, 60) {
  setup();
  const char *dir = fmt("%s/work", W.dir);
  ASSERT(mkdir(dir, 0755) == 0);
  write_file(fmt("%s/where.sh", dir), "#!/bin/sh\necho \"in $(pwd)\"\n", 0755);
  job_t j;
  RUN(&j, 30000, "-n", "2", "--wdir", dir, "./where.sh");
  ASSERT_CODE(&j, 0);
  ASSERT_CONTAINS(j.out, fmt("[0] in %s\n", dir));
  ASSERT_CONTAINS(j.out, fmt("[1] in %s\n", dir));
  char cwd[4096];
  ASSERT(getcwd(cwd, sizeof cwd));
  job_t k;
  RUN(&k, 30000, "-n", "1", "pwd");
  ASSERT_CODE(&k, 0);
  ASSERT_CONTAINS(k.out, fmt("[0] %s\n", cwd));
  job_t l;
  const char *missing = fmt("%s/nope", W.dir);
  RUN(&l, 30000, "-n", "1", "--wdir", missing, "pwd");
  ASSERT_CODE(&l, 2);
  ASSERT_CONTAINS(l.err, "--wdir");
  ASSERT_CONTAINS(l.err, missing);
  ASSERT_STARTED_NOTHING();
  teardown();
}

/* --stdin all: every rank reads every byte; --stdin 2: only rank 2; --stdin
 * none: nobody (rank 0 reads EOF at once); a bad one is refused. */
TEST_TIMEOUT(stdin_choice, 60) {
  setup();
  const char *prog = "wc -c | sed \"s/^/$ASR_RANK got /\"";
  const char *modes[] = {"all", "2", "none"};
  for (int m = 0; m < 3; m++) {
    job_t j;
    START(&j, IN_PIPE, "-n", "3", "--stdin", modes[m], "sh", "-c", prog);
    static char chunk[300000];
    memset(chunk, 'y', sizeof chunk);
    size_t off = 0;
    fcntl(j.in_fd, F_SETFL, O_NONBLOCK);
    uint64_t until = now_ms() + 20000;
    while (off < sizeof chunk && now_ms() < until) {
      ssize_t w = write(j.in_fd, chunk + off, sizeof chunk - off);
      if (w > 0) off += (size_t)w;
      if (w < 0 && errno != EAGAIN) break; /* none: asrrun does not read it (EPIPE at its end) */
      if (w < 0) job_pump(&j, 10);
    }
    JOB_FINISH(&j, 30000);
    ASSERT_CODE(&j, 0);
    for (int r = 0; r < 3; r++) {
      int reads = m == 0 || (m == 1 && r == 2);
      const char *want = fmt("[%d] %d got %d\n", r, r, reads ? (int)sizeof chunk : 0);
      if (!strstr(j.out, want)) JOB_FAIL(&j, "--stdin %s: no '%s'", modes[m], want);
    }
  }
  job_t k;
  RUN(&k, 30000, "-n", "3", "--stdin", "3", "true");
  ASSERT_CODE(&k, 2);
  ASSERT_CONTAINS(k.err, "--stdin '3'");
  teardown();
}

/* -v tells the map, the provider, each daemon coming up and each host's
 * ranks starting (-vv every rank); --quiet silences asrrun's notices (the
 * signal it forwards) but not its errors; both at once are refused. */
TEST_TIMEOUT(verbose_and_quiet, 60) {
  setup();
  job_t j;
  RUN(&j, 30000, "-v", "-n", "3", "true");
  ASSERT_CODE(&j, 0);
  ASSERT_CONTAINS(j.err, "asrrun: 3 ranks of 'true' on 1 host; provider sm");
  ASSERT_CONTAINS(j.err, fmt("asrrun: host %s: 3 ranks (0..2)", my_hostname()));
  ASSERT_CONTAINS(j.err, fmt("asrrun: asrd on host %s is up (1 of 1,", my_hostname()));
  ASSERT_CONTAINS(j.err, fmt("asrrun: host %s started 3 ranks (pids ", my_hostname()));
  ASSERT_JOB(&j, !strstr(j.err, "rank 0 -> host"));
  job_t k;
  RUN(&k, 30000, "-vv", "-n", "2", "true");
  ASSERT_CONTAINS(k.err, fmt("asrrun: rank 1 -> host %s lnc 1", my_hostname()));
  ASSERT_CONTAINS(k.err, fmt("asrrun: rank 1 started on host %s (pid ", my_hostname()));
  job_t q;
  START(&q, IN_NULL, "--quiet", "-n", "2", "sh", "-c", "echo up; exec sleep 20");
  JOB_WAIT_LINES(&q, 2, 20000);
  kill(q.pid, SIGTERM);
  JOB_FINISH(&q, 20000);
  ASSERT_CODE(&q, 128 + SIGTERM);
  ASSERT_JOB(&q, !strstr(q.err, "got SIGTERM"));
  job_t e;
  RUN(&e, 30000, "--quiet", "-n", "2", "sh", "-c", "exit 3");
  ASSERT_CODE(&e, 3);
  ASSERT_CONTAINS(e.err, "exited with status 3");
  job_t b;
  RUN(&b, 30000, "-v", "--quiet", "-n", "1", "true");
  ASSERT_CODE(&b, 2);
  ASSERT_CONTAINS(b.err, "contradict");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

/* A --provider that libfabric here does not offer is refused before any
 * rank starts, naming what it offers (at 6dcea9d each rank failed in its
 * own asr_init); a real one runs. */
TEST_TIMEOUT(provider_checked_before_ranks, 60) {
  setup();
  const char *mark = fmt("%s/rank-ran", W.dir);
  job_t j;
  RUN(&j, 30000, "-n", "2", "--provider", "asrt-no-such-provider", "sh", "-c", fmt("touch %s", mark));
  ASSERT_CODE(&j, 125);
  ASSERT_CONTAINS(j.err, "--provider asrt-no-such-provider: libfabric offers no provider");
  ASSERT_CONTAINS(j.err, "it offers: ");
  ASSERT_CONTAINS(j.err, "shm");
  ASSERT_JOB(&j, !exists(mark));
  job_t k;
  RUN(&k, 30000, "-n", "2", "--provider", "shm", bin("tests/apps/early_exit"), "none");
  ASSERT_CODE(&k, 0);
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}
