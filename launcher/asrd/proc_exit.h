/*
 * proc_exit.h -- what the kernel shows of a child process's end before its
 * parent reaps it: gone (a zombie, its wait status known), in its exit, or
 * alive. asrd orders its ranks' ends by it (asrd_ends.c, doc/design.md
 * "Verdicts by cause").
 */
#ifndef ASR_PROC_EXIT_H
#define ASR_PROC_EXIT_H

#include <sys/types.h>

enum {
  ASR_PROC_LIVE = 0, /* running (or stopped), or nothing could be read of it */
  ASR_PROC_DYING,    /* in its exit, its wait status not known yet (an exit 0, so far) */
  ASR_PROC_ENDED     /* a zombie, or in its exit with its wait status set: *status */
};

/* What the kernel shows of process pid's end (pid: a child of the caller's,
 * not reaped; it is not reaped here either). ASR_PROC_ENDED writes the wait
 * status, as waitpid would give it, to *status. */
int asr_proc_exit_state(pid_t pid, int *status);

#endif /* ASR_PROC_EXIT_H */
