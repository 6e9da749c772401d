/*
 * launch_agent.c -- starting an agent command that runs asrd elsewhere (ssh,
 * srun, ...), shared by launch_rsh.c and launch_slurm.c (launch.h).
 *
 * The agent runs in its own process group, so a Ctrl-C at the terminal
 * reaches asrrun (which forwards it) rather than killing the agent under it,
 * and it dies with asrrun (PR_SET_PDEATHSIG), which breaks the remote
 * daemon's connection. The job secret goes to its stdin (ssh and srun forward
 * it), never into a command line every user can read in /proc.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "asr_err.h"
#include "launch.h"

pid_t asr_launch_spawn_agent(char *const *argv, const char *secret_hex, char *errbuf, size_t errlen) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    int e = errno;
    snprintf(errbuf, errlen, "cannot start %s: pipe: %s", argv[0], strerror(e));
    return asr_err_from_errno(e);
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1); /* asrrun died before the prctl */
    dup2(p[0], 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvp(argv[0], argv);
    fprintf(stderr, "asrrun: cannot execute '%s': %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int e = errno;
  close(p[0]);
  if (pid < 0) {
    snprintf(errbuf, errlen, "fork: %s", strerror(e));
    pid = asr_err_from_errno(e);
  } else {
    setpgid(pid, pid); /* also here: no window in which a terminal signal reaches it */
    dprintf(p[1], "ASR_JOB_SECRET=%s\n", secret_hex);
  }
  close(p[1]);
  return pid;
}
