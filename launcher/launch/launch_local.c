/* launch_local.c -- start asrd on this host with posix_spawn (launch.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "launch.h"

extern char **environ;

static pid_t local_start(const asr_launch_args_t *a, char *errbuf, size_t errlen) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    int e = errno;
    snprintf(errbuf, errlen, "pipe: %s", strerror(e));
    return asr_err_from_errno(e);
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
  /* a process group of its own: a terminal's Ctrl-Z, Ctrl-C and Ctrl-\ go
   * to asrrun (the foreground group), which decides what the job gets */
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
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
    return asr_err_from_errno(rc); /* posix_spawn returns the errno value */
  }
  /* The secret travels through the pipe: no other user can see it. */
  dprintf(p[1], "ASR_JOB_SECRET=%s\n", a->secret_hex);
  close(p[1]);
  return pid;
}

/* The process start returned is asrd itself: it died. */
static void local_ended(const char *host, const char *agent, int st, char *msg, size_t len) {
  (void)agent;
  int sig = WIFSIGNALED(st), code = sig ? WTERMSIG(st) : WEXITSTATUS(st);
  snprintf(msg, len, "asrd on host %s died (%s %d) before the job finished", host, sig ? "signal" : "status",
           code);
}

const asr_launch_ops_t asr_launch_local = {
    .name = "local",
    .id = ASR_LAUNCH_LOCAL,
    .launcher = ASR_LAUNCHER_LOCAL,
    .start = local_start,
    .ended = local_ended,
};
