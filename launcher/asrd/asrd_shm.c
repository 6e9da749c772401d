/*
 * asrd_shm.c -- what libfabric's shm provider leaves of a rank that did not
 * close its endpoints, and the sm regions a killed rank made that no
 * sender mapped (and so unlinked) yet.
 *
 * Each shm endpoint is a 16 MiB region in /dev/shm named
 * "<pid>:<uid>:<endpoint index>" (libfabric 1.17, smr_endpoint_name). The
 * provider unlinks it when the endpoint is closed, and on SIGTERM, SIGINT,
 * SIGSEGV and SIGBUS (its own handlers), but not when the process is killed
 * (SIGKILL: asrrun's abort after the grace period, the OOM killer), aborts
 * (SIGABRT), or exits without closing (libasr unlinks the names of the LNCs
 * still open at exit, but that needs a libasr that exits normally). What is
 * left holds its memory until the machine reboots, and once the pid comes
 * round again the new process's first endpoint cannot be created
 * (fi_enable: "Device or resource busy"): pid_max is 32768 here.
 *
 * So asrd, which knows every rank's pid, removes them once it has reaped the
 * rank. The pid is free again by then, but pids are handed out in turn: a
 * just-freed one is the last to come round, so no new process can have made
 * a region under it in the microseconds between the reap and the sweep.
 *
 * When asrd itself is killed (kill -9, the OOM killer) its ranks die with it
 * (PDEATHSIG, SIGKILL: no handler runs) and nobody sweeps after them: asrrun
 * could only for a daemon on its own host. So every asrd forks a watcher at
 * start, on whichever host it runs. asrd writes it each rank's pid as the
 * rank starts and again (negated) once asrd has swept after it, on a pipe
 * whose only write end is asrd's; the watcher's set is therefore exactly the
 * ranks asrd started and did not sweep. At EOF (asrd is gone, however it
 * ended) the watcher waits, bounded, until each of them is dead, removes
 * their regions and exits. Waiting first matters: asrd's files are closed
 * before the kernel sends its children their PDEATHSIG, so a rank can still
 * be creating an endpoint when the EOF arrives. The pids are not stale: none
 * was reaped by asrd (its reap precedes its sweep), so each is a rank, a
 * zombie, or free only since asrd's death, and pids come round in turn.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_sm_name.h"
#include "asrd_shm.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define SHM_DIR "/dev/shm"

/* The watcher gives ranks this long to die after asrd's end; they were sent
 * SIGKILL by then (PDEATHSIG), so one still alive is stuck in the kernel and
 * will never run user code again: its regions are removed all the same. */
#define WATCH_WAIT_MS 5000

/* The write end of the pipe to the watcher (O_NONBLOCK), or -1 without one.
 * asrd's alone: its only other copy would be a child's, and it is
 * close-on-exec and closed in the watcher. */
static int watch_fd = -1;

/* The pid of a "<pid>:<uid>:<digits>" name whose uid is ours (libfabric
 * shm's), or of an sm region a rank made and no sender unlinked yet
 * (asr_sm_name.h: a RECV comm whose peer never came), or 0. */
static pid_t region_pid(const char *name, uid_t uid) {
  pid_t sm = asr_sm_name_pid(name, uid);
  if (sm) return sm;
  char *end;
  long pid = strtol(name, &end, 10);
  if (end == name || *end != ':' || pid <= 0) return 0;
  const char *u = end + 1;
  long owner = strtol(u, &end, 10);
  if (end == u || *end != ':' || owner != (long)uid) return 0;
  const char *idx = end + 1;
  if (!*idx || strspn(idx, "0123456789") != strlen(idx)) return 0;
  return (pid_t)pid;
}

/* One message to the watcher: pid > 0 started, < 0 swept. A write of 4
 * bytes to a pipe is atomic. The watcher reads as they come and the pipe
 * holds 16k of them, so only a stopped watcher loses one (asrd never waits
 * on it): a lost start is a region left if asrd is killed, a lost sweep a
 * pid the watcher sweeps again after asrd's end (harmless unless pids came
 * round meanwhile). A watcher that is gone (EPIPE) is written to no more. */
static void watch_send(int32_t v) {
  if (watch_fd < 0) return;
  ssize_t w;
  do w = write(watch_fd, &v, sizeof v);
  while (w < 0 && errno == EINTR);
  if (w < 0 && errno == EPIPE) {
    close(watch_fd);
    watch_fd = -1;
  }
}

/* Removes the regions of the n processes in pids; returns how many. */
static int sweep_dir(const pid_t *pids, int n) {
  DIR *dir = opendir(SHM_DIR);
  if (!dir) return 0;
  uid_t uid = geteuid();
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    pid_t pid = region_pid(e->d_name, uid);
    if (!pid) continue;
    int ours = 0;
    for (int i = 0; i < n && !ours; i++) ours = pids[i] == pid;
    if (!ours) continue;
    struct stat st;
    if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != uid)
      continue;
    if (unlinkat(dirfd(dir), e->d_name, 0) == 0) {
      removed++;
      asr_debug("asrd", "removed %s/%s, left by rank process %d", SHM_DIR, e->d_name, (int)pid);
    }
  }
  closedir(dir);
  return removed;
}

int asrd_shm_sweep(const pid_t *pids, int n) {
  if (n <= 0) return 0;
  int removed = sweep_dir(pids, n);
  /* Only now, after the sweep, does the watcher forget them: an asrd killed
   * between a reap and its sweep leaves the sweep to the watcher. (In the
   * watcher's own sweep watch_fd is -1.) */
  for (int i = 0; i < n; i++) watch_send(-(int32_t)pids[i]);
  return removed;
}

void asrd_shm_watch(pid_t pid) {
  if (pid > 0) watch_send((int32_t)pid);
}

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Waits until pid has exited (a zombie counts: it runs nothing) or until
 * the deadline: poll on a pidfd, or, on a kernel without them (before 5.3),
 * kill(pid, 0) every 10 ms until the pid is free. */
static void wait_dead(pid_t pid, uint64_t deadline) {
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0 && errno == ESRCH) return;
  for (;;) {
    uint64_t now = mono_ms();
    if (now >= deadline) break;
    if (fd >= 0) {
      struct pollfd p = {.fd = fd, .events = POLLIN};
      int n = poll(&p, 1, (int)(deadline - now));
      if (n != 0 && !(n < 0 && errno == EINTR)) break;
    } else {
      if (kill(pid, 0) != 0 && errno == ESRCH) break;
      struct timespec ts = {0, 10 * 1000000L};
      nanosleep(&ts, NULL);
    }
  }
  if (fd >= 0) close(fd);
}

/* The watcher's life (see the top of this file): read until EOF, keeping the
 * set; then wait for its ranks and sweep. Never returns. */
static void watcher_main(int rfd) {
  pid_t *set = NULL;
  int n = 0, cap = 0;
  for (;;) {
    int32_t v;
    ssize_t r = read(rfd, &v, sizeof v);
    if (r < 0 && errno == EINTR) continue;
    if (r != (ssize_t)sizeof v) break; /* EOF: asrd is gone (a part of a message cannot happen) */
    if (v > 0) {
      if (n == cap) {
        pid_t *g = realloc(set, (size_t)(cap ? 2 * cap : 64) * sizeof *set);
        if (!g) continue; /* that rank goes unwatched */
        set = g;
        cap = cap ? 2 * cap : 64;
      }
      set[n++] = (pid_t)v;
    } else {
      for (int i = 0; i < n; i++)
        if (set[i] == (pid_t)-v) {
          set[i] = set[--n];
          break;
        }
    }
  }
  uint64_t deadline = mono_ms() + WATCH_WAIT_MS;
  for (int i = 0; i < n; i++) wait_dead(set[i], deadline);
  int removed = asrd_shm_sweep(set, n);
  if (n) asr_debug("asrd", "watcher: asrd is gone; removed %d shm region(s) of %d rank(s)", removed, n);
  _exit(0);
}

int asrd_shm_watch_start(void) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return asr_err_from_errno(errno);
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    return asr_err_from_errno(e);
  }
  if (pid == 0) {
    /* Only asrd's end ends the watcher: the signals that reach asrd's
     * process group (a terminal's ^C, asrrun's) are asrd's to handle, and it
     * exits. stdin and stdout are not the watcher's to hold (an ssh session
     * waits for them); stderr is kept for its log. */
    close(p[1]);
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_NAME, "asrd-shm-watch", 0, 0, 0);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      if (null > 2) close(null);
    }
    watcher_main(p[0]);
  }
  close(p[0]);
  fcntl(p[1], F_SETFL, O_NONBLOCK);
  watch_fd = p[1];
  return 0;
}
