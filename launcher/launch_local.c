/* launch_local.c -- start asrd on this host with fork/exec (launch.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "launch.h"

static pid_t local_start(const asr_launch_args_t *a, char *errbuf, size_t errlen) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    snprintf(errbuf, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  char index[16];
  snprintf(index, sizeof index, "%d", a->index);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[0], 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execl(a->asrd_path, "asrd", "--ctl", a->ctl_addr, "--index", index, "--hostname", a->host, (char *)NULL);
    fprintf(stderr, "asrrun: cannot execute the daemon %s: %s\n", a->asrd_path, strerror(errno));
    _exit(127);
  }
  close(p[0]);
  if (pid < 0) {
    close(p[1]);
    snprintf(errbuf, errlen, "fork: %s", strerror(errno));
    return -1;
  }
  /* The secret travels through the pipe: no other user can see it. */
  dprintf(p[1], "ASR_JOB_SECRET=%s\n", a->secret_hex);
  close(p[1]);
  return pid;
}

const asr_launch_ops_t asr_launch_local = {"local", local_start};
