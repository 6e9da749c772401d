/*
 * launch.h -- launch backends behind one small ops table (the Hydra
 * bootstrap habit): each starts asrd on one host so that it calls back to
 * asrrun's control port. One file per backend:
 *   launch_local.c   fork/exec on this host
 *   launch_rsh.c     through an agent command: AGENT... HOST asrd ARGS
 *                    (ssh, rsh, or any prefix such as "ip netns exec")
 *   launch_slurm.c   a one-task srun step on a node of the Slurm allocation
 */
#ifndef ASR_LAUNCH_H
#define ASR_LAUNCH_H

#include <sys/types.h>

typedef struct {
  const char *asrd_path;  /* asrd to run */
  const char *ctl_addr;   /* "IP:PORT" asrd calls back to */
  const char *secret_hex; /* written to asrd's stdin, never on its command line */
  const char *host;       /* host name of this daemon */
  const char *agent;      /* rsh: the agent command (split on blanks; quotes group) */
  int index;              /* host index in the job (local: -1 = not known yet, the JOB says) */
  int port;               /* the bootstrap port (asrd holds it while it starts its PMIx server) */
  int verbose;
} asr_launch_args_t;

typedef struct {
  const char *name;
  /* Starts the daemon; returns the pid of the local process that represents
   * it (asrd itself, or the agent that runs it), or a negative ASR_E* code
   * with errbuf set. */
  pid_t (*start)(const asr_launch_args_t *a, char *errbuf, size_t errlen);
} asr_launch_ops_t;

extern const asr_launch_ops_t asr_launch_local;
extern const asr_launch_ops_t asr_launch_rsh;
extern const asr_launch_ops_t asr_launch_slurm;

/* Splits an agent command line into words: blanks separate, '...' and "..."
 * group, no other shell syntax. Returns the number of words (at most max,
 * each malloc'd, the caller frees them), or a negative ASR_E* code with
 * errbuf set and nothing allocated: ASR_EINVAL for an unbalanced quote or
 * no words, ASR_ETOOBIG for more than max, ASR_ENOMEM. */
int asr_launch_split(const char *cmd, char **words, int max, char *errbuf, size_t errlen);

/* launch_agent.c: forks and execs argv (searched in PATH) in its own process
 * group, dying with asrrun, with "ASR_JOB_SECRET=<hex>" on its stdin.
 * Returns its pid, or a negative ASR_E* code with errbuf set. */
pid_t asr_launch_spawn_agent(char *const *argv, const char *secret_hex, char *errbuf, size_t errlen);

/* launch_pick.c: which backend starts the daemon of host (local for
 * --launcher local and for this host itself, else rsh). */
int asr_launch_host_is_local(const char *host, const char *local_hostname);

/* Whether host is a name (or address) this host's resolver knows. */
int asr_launch_host_resolves(const char *host);

/* The address remote daemons call asrrun back on: if_include when it names
 * an address of this host, else the source address of the route to
 * remote_host, else the first non-loopback address. Returns 0, or
 * ASR_ENOTFOUND with errbuf set when this host has no such address. */
int asr_launch_callback_ip(const char *if_include, const char *remote_host, char ip[16], char *errbuf,
                           size_t errlen);

#endif /* ASR_LAUNCH_H */
