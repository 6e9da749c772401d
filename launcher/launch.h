/*
 * launch.h -- launch backends behind one small ops table (the Hydra
 * bootstrap habit): each starts asrd on one host so that it calls back to
 * asrrun's control port. One file per backend:
 *   launch_local.c   fork/exec on this host
 *   (launch_rsh.c and launch_slurm.c come with the multi-host and Slurm work)
 */
#ifndef ASR_LAUNCH_H
#define ASR_LAUNCH_H

#include <sys/types.h>

typedef struct {
  const char *asrd_path;  /* asrd to run */
  const char *ctl_addr;   /* "IP:PORT" asrd calls back to */
  const char *secret_hex; /* written to asrd's stdin, never on its command line */
  const char *host;       /* host name of this daemon */
  int index;              /* host index in the job */
  int verbose;
} asr_launch_args_t;

typedef struct {
  const char *name;
  /* Starts the daemon; returns the pid of the local process that represents
   * it (asrd itself, or the agent that runs it), or -1 with errbuf set. */
  pid_t (*start)(const asr_launch_args_t *a, char *errbuf, size_t errlen);
} asr_launch_ops_t;

extern const asr_launch_ops_t asr_launch_local;

#endif /* ASR_LAUNCH_H */
