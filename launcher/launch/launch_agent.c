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
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_sig.h"
#include "launch.h"

pid_t asr_launch_spawn_agent(char *const *argv, const char *secret_hex, char *errbuf, size_t errlen) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    int e = errno;
    snprintf(errbuf, errlen, "cannot start %s: pipe: %s", argv[0], strerror(e));
    return asr_err_from_errno(e);
  }
  pid_t parent = getpid();
  /* vfork: the child runs on our memory until its execve, so nothing is
   * copied (fork copied this process's page tables and made every page
   * copy-on-write, once per agent: an interior daemon of the tree starts up
   * to radix agents, asrrun one per child). This thread waits meanwhile;
   * every signal stays blocked across it, so that no handler of ours runs
   * on the borrowed stack, and the child puts back the default action of
   * each handled one (its handler table is its own) before it unblocks. It
   * calls only system call wrappers; an exec failure is said by us, from
   * exec_err, once it has exited. */
  int handled[_NSIG], nhandled = asr_sig_handled(handled);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  volatile int exec_err = 0;
  pid_t pid = vfork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1); /* asrrun died before the prctl */
    dup2(p[0], 0);
    for (int i = 0; i < nhandled; i++) sigaction(handled[i], &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvp(argv[0], argv);
    exec_err = errno;
    _exit(127);
  }
  int e = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  close(p[0]);
  if (pid < 0) {
    snprintf(errbuf, errlen, "fork: %s", strerror(e));
    pid = asr_err_from_errno(e);
  } else {
    if (exec_err) fprintf(stderr, "asrrun: cannot execute '%s': %s\n", argv[0], strerror(exec_err));
    setpgid(pid, pid); /* also here: no window in which a terminal signal reaches it */
    dprintf(p[1], "ASR_JOB_SECRET=%s\n", secret_hex);
  }
  close(p[1]);
  return pid;
}
