/* launch_local.c -- start asrd on this host with posix_spawn (launch.h). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch.h"

extern char **environ;

static pid_t local_start(const asr_launch_args_t *a, char *errbuf, size_t errlen) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    snprintf(errbuf, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  char index[16], port[16];
  snprintf(index, sizeof index, "%d", a->index);
  snprintf(port, sizeof port, "%d", a->port);
  /* posix_spawn (a vfork in glibc) rather than fork: nothing of ours is
   * copied, and a daemon that cannot be executed is reported here, at once. */
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[0], 0); /* the secret comes on stdin */
  posix_spawnattr_init(&at);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
  /* index < 0: a daemon started ahead of the job, before its host index was
   * known; the JOB tells it (asrrun.c, "the early local daemon") */
  char *const argv[] = {"asrd",
                        "--ctl",
                        (char *)a->ctl_addr,
                        "--hostname",
                        (char *)a->host,
                        "--port",
                        port,
                        a->index >= 0 ? "--index" : NULL,
                        index,
                        NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, a->asrd_path, &fa, &at, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(p[0]);
  if (rc != 0) {
    close(p[1]);
    snprintf(errbuf, errlen, "cannot execute the daemon %s: %s", a->asrd_path, strerror(rc));
    return -1;
  }
  /* The secret travels through the pipe: no other user can see it. */
  dprintf(p[1], "ASR_JOB_SECRET=%s\n", a->secret_hex);
  close(p[1]);
  return pid;
}

const asr_launch_ops_t asr_launch_local = {"local", local_start};

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

void asr_launch_local_cleanup(pid_t pid) {
  const char *bases[] = {getenv("TMPDIR"), "/dev/shm", "/tmp"};
  char prefix[32];
  int plen = snprintf(prefix, sizeof prefix, "asrd.%ld.", (long)pid);
  for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
    if (!bases[b] || !*bases[b] || (b > 0 && bases[0] && !strcmp(bases[0], bases[b]))) continue;
    DIR *d = opendir(bases[b]);
    if (!d) continue;
    struct dirent *e;
    while ((e = readdir(d))) {
      /* exactly asrd.PID. and mkdtemp's six characters */
      if (strncmp(e->d_name, prefix, (size_t)plen) != 0 || strlen(e->d_name) != (size_t)plen + 6) continue;
      char path[4096];
      struct stat st;
      snprintf(path, sizeof path, "%s/%s", bases[b], e->d_name);
      if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
      nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
  }
}
