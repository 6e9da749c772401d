/*
 * asr_launch.h -- a tiny fork launcher for the multi-rank test programs
 * (ring, stress, the mesh and rate programs of tests/bench). Header only: every function is
 * static, so each program gets its own copy.
 *
 *   launch_run(n, fn, arg, timeout_s)
 *
 * forks n children; child r runs fn(r, n, arg) and exits with its return
 * value. Children talk to the parent over one pipe pair each:
 *   launch_barrier()       blocks until every rank has reached it (out of band,
 *                          so no rank tears its endpoint down while a peer
 *                          still needs it);
 *   launch_report(v, k)    sends up to LAUNCH_NVAL doubles to the parent, which
 *                          keeps the last report of each rank (launch_reports;
 *                          launch_report_max gives each value's largest).
 * Before forking, the parent makes the environment self-contained: with no
 * ASR_BOOTSTRAP_PORT it picks a free TCP port on 127.0.0.1, and with no
 * ASR_KV_LOCK_DIR it makes a private temporary directory for the KV election
 * lock (removed afterwards), so runs never meet other jobs' KV servers; and
 * with no ASR_KV_BIND the elected KV server listens on 127.0.0.1 only.
 * If a child fails, dies or the timeout passes, the parent SIGKILLs every
 * child it started (by pid), removes the shm regions a killed child's
 * endpoints leave in /dev/shm, and returns non-zero. Children get
 * PR_SET_PDEATHSIG, so they also die with the parent.
 */
#ifndef ASR_LAUNCH_H
#define ASR_LAUNCH_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define LAUNCH_MAX 128
#define LAUNCH_NVAL 8

typedef int (*launch_fn)(int rank, int n, void *arg);

typedef struct {
  char type; /* 'B' barrier, 'R' report */
  double v[LAUNCH_NVAL];
} launch_msg_t;

static int launch_up_fd = -1, launch_down_fd = -1; /* in a child */
static double launch_reports[LAUNCH_MAX][LAUNCH_NVAL];
static int launch_nreports[LAUNCH_MAX];

static uint64_t launch_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int launch_write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

static int launch_read_all(int fd, void *buf, size_t len) {
  char *p = buf;
  while (len) {
    ssize_t r = read(fd, p, len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    len -= (size_t)r;
  }
  return 0;
}

/* In a child: wait until every rank called it. Returns 0, or -1 when the
 * launcher went away (or there is none: a single process passes at once). */
static int launch_barrier(void) {
  if (launch_up_fd < 0) return 0;
  launch_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = 'B';
  char c;
  if (launch_write_all(launch_up_fd, &m, sizeof m) != 0) return -1;
  return launch_read_all(launch_down_fd, &c, 1);
}

static void launch_report(const double *v, int k) {
  if (launch_up_fd < 0) return;
  launch_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = 'R';
  for (int i = 0; i < k && i < LAUNCH_NVAL; i++) m.v[i] = v[i];
  (void)launch_write_all(launch_up_fd, &m, sizeof m);
}

/* A free TCP port on 127.0.0.1 (0 on failure). */
static int launch_free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return 0;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  int port = 0;
  if (bind(s, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr *)&a, &al) == 0)
    port = ntohs(a.sin_port);
  close(s);
  return port;
}

static void launch_rmdir(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char p[1024];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
    closedir(d);
  }
  rmdir(dir);
}

/* A process that dies without closing its libfabric shm endpoints leaves
 * their regions behind as /dev/shm/<pid>:<n>:<ep>, and the sm regions of
 * its comms whose sender never mapped them as /dev/shm/asrsm:<pid>:...
 * (common/asr_sm_name.h): remove those of a child that was killed or
 * crashed. */
static void launch_rm_shm(pid_t pid) {
  char pre[32], sm[48];
  int n = snprintf(pre, sizeof pre, "%d:", (int)pid);
  int m = snprintf(sm, sizeof sm, "asrsm:%d:", (int)pid);
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, pre, (size_t)n) || !strncmp(e->d_name, sm, (size_t)m)) {
      char p[512];
      snprintf(p, sizeof p, "/dev/shm/%s", e->d_name);
      unlink(p);
    }
  closedir(d);
}

/* In the launcher, after launch_run: the largest of each of the first k
 * values the n ranks reported last (0 where none did) into max[0..k-1];
 * returns how many ranks reported. */
static inline int launch_report_max(int n, int k, double *max) {
  int reported = 0;
  for (int i = 0; i < k; i++) max[i] = 0;
  for (int r = 0; r < n && r < LAUNCH_MAX; r++)
    if (launch_nreports[r]) {
      reported++;
      for (int i = 0; i < k && i < LAUNCH_NVAL; i++)
        if (launch_reports[r][i] > max[i]) max[i] = launch_reports[r][i];
    }
  return reported;
}

/* Runs fn on n forked ranks. Returns 0 when every rank exited 0. */
static int launch_run(int n, launch_fn fn, void *arg, int timeout_s, const char *prog) {
  if (n < 1 || n > LAUNCH_MAX) return 2;
  char tmpdir[64] = "";
  const char *port = getenv("ASR_BOOTSTRAP_PORT");
  if ((!port || !*port) && !getenv("NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT")) {
    int p = launch_free_port();
    if (!p) {
      fprintf(stderr, "%s: cannot find a free port\n", prog);
      return 2;
    }
    char buf[16];
    snprintf(buf, sizeof buf, "%d", p);
    setenv("ASR_BOOTSTRAP_PORT", buf, 1);
  }
  setenv("ASR_KV_BIND", "127.0.0.1", 0);
  const char *ld = getenv("ASR_KV_LOCK_DIR");
  if (!ld || !*ld) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/asr-launch-XXXXXX");
    if (!mkdtemp(tmpdir)) {
      fprintf(stderr, "%s: mkdtemp: %s\n", prog, strerror(errno));
      return 2;
    }
    setenv("ASR_KV_LOCK_DIR", tmpdir, 1);
  }
  pid_t pids[LAUNCH_MAX];
  int up[LAUNCH_MAX], down[LAUNCH_MAX], alive[LAUNCH_MAX], status[LAUNCH_MAX], in_barrier[LAUNCH_MAX];
  memset(launch_nreports, 0, sizeof launch_nreports);
  fflush(stdout);
  fflush(stderr);
  int started = 0, failed = 0;
  for (int r = 0; r < n; r++) {
    int pu[2], pd[2];
    if (pipe(pu) != 0 || pipe(pd) != 0) {
      fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
      failed = 1;
      break;
    }
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
      close(pu[0]), close(pu[1]), close(pd[0]), close(pd[1]);
      failed = 1;
      break;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() == 1) _exit(3);
      for (int q = 0; q < r; q++) close(up[q]), close(down[q]);
      close(pu[0]);
      close(pd[1]);
      launch_up_fd = pu[1];
      launch_down_fd = pd[0];
      bench_pin(r);
      int rc = fn(r, n, arg);
      fflush(stdout);
      fflush(stderr);
      _exit(rc & 0xff);
    }
    close(pu[1]);
    close(pd[0]);
    pids[r] = pid;
    up[r] = pu[0];
    down[r] = pd[1];
    alive[r] = 1;
    status[r] = 0;
    in_barrier[r] = 0;
    started++;
  }
  uint64_t deadline = launch_now_ns() + (uint64_t)timeout_s * 1000000000ull;
  int nalive = started, nbarrier = 0, timed_out = 0;
  while (nalive > 0 && !failed) {
    struct pollfd pf[LAUNCH_MAX];
    int idx[LAUNCH_MAX], np = 0;
    for (int r = 0; r < started; r++)
      if (up[r] >= 0) {
        pf[np].fd = up[r];
        pf[np].events = POLLIN;
        idx[np++] = r;
      }
    uint64_t now = launch_now_ns();
    if (now >= deadline) {
      timed_out = 1;
      break;
    }
    int wait_ms = (int)((deadline - now) / 1000000ull);
    if (np == 0) {
      /* every pipe closed: reap */
      int st;
      pid_t p = waitpid(-1, &st, 0);
      if (p < 0 && errno == ECHILD) break;
      for (int r = 0; r < started; r++)
        if (p == pids[r] && alive[r]) {
          alive[r] = 0;
          status[r] = st;
          nalive--;
          if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
        }
      continue;
    }
    int rc = poll(pf, (nfds_t)np, wait_ms > 1000 ? 1000 : wait_ms);
    if (rc < 0 && errno != EINTR) break;
    for (int i = 0; i < np && rc > 0; i++) {
      if (!pf[i].revents) continue;
      int r = idx[i];
      launch_msg_t m;
      if (launch_read_all(up[r], &m, sizeof m) != 0) {
        close(up[r]);
        up[r] = -1; /* the child exited (or closed its end) */
        int st;
        if (waitpid(pids[r], &st, 0) == pids[r]) {
          alive[r] = 0;
          status[r] = st;
          nalive--;
          if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed = 1;
          else if (nbarrier > 0 && !in_barrier[r]) {
            /* exited while others wait in a barrier: they would hang */
            fprintf(stderr, "%s: rank %d exited while other ranks wait in a barrier\n", prog, r);
            failed = 1;
          }
        }
        continue;
      }
      if (m.type == 'R') {
        memcpy(launch_reports[r], m.v, sizeof m.v);
        launch_nreports[r]++;
      } else if (m.type == 'B' && !in_barrier[r]) {
        in_barrier[r] = 1;
        if (++nbarrier == n) {
          for (int q = 0; q < started; q++) {
            in_barrier[q] = 0;
            if (down[q] >= 0) (void)launch_write_all(down[q], "G", 1);
          }
          nbarrier = 0;
        }
      }
    }
    /* reap children that exited without closing their pipe yet */
    for (int r = 0; r < started; r++) {
      if (!alive[r]) continue;
      int st;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        alive[r] = 0;
        status[r] = st;
        nalive--;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
      }
    }
  }
  if (failed || timed_out) {
    if (timed_out) fprintf(stderr, "%s: timed out after %d s; killing the ranks\n", prog, timeout_s);
    for (int r = 0; r < started; r++)
      if (alive[r]) kill(pids[r], SIGKILL);
  }
  for (int r = 0; r < started; r++) {
    if (alive[r]) {
      int st = 0;
      if (waitpid(pids[r], &st, 0) == pids[r]) {
        status[r] = st;
        if (!timed_out && !failed && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) failed = 1;
      }
      alive[r] = 0;
    }
    if (up[r] >= 0) close(up[r]);
    close(down[r]);
    int st = status[r];
    if (WIFSIGNALED(st)) launch_rm_shm(pids[r]);
    if (WIFSIGNALED(st) && (WTERMSIG(st) != SIGKILL || !(failed || timed_out)))
      fprintf(stderr, "%s: rank %d killed by signal %d\n", prog, r, WTERMSIG(st));
    else if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
      fprintf(stderr, "%s: rank %d exited with status %d\n", prog, r, WEXITSTATUS(st));
  }
  if (tmpdir[0]) {
    launch_rmdir(tmpdir);
    unsetenv("ASR_KV_LOCK_DIR");
  }
  if (started < n) failed = 1;
  return failed || timed_out ? 1 : 0;
}

#endif /* ASR_LAUNCH_H */
