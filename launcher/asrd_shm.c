/*
 * asrd_shm.c -- what libfabric's shm provider leaves of a rank that did not
 * close its endpoints.
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
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asr_log.h"
#include "asrd_shm.h"

#define SHM_DIR "/dev/shm"

/* The pid of a "<pid>:<uid>:<digits>" name whose uid is ours, or 0. */
static pid_t region_pid(const char *name, uid_t uid) {
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

int asrd_shm_sweep(const pid_t *pids, int n) {
  if (n <= 0) return 0;
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
