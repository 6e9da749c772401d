/*
 * launch.h -- launch backends behind one ops table (the Hydra bootstrap
 * habit, bsci.h): each answers every question about how daemons start under
 * it, so that the programs above ask the table and never name a resource
 * manager. A backend says whether its resource manager's allocation is here
 * (detect), which hosts and slots that allocation holds (nodes), starts asrd
 * on one host so that it calls back (start), whether the manager starts
 * every daemon itself (starts_every_daemon), and what the user is told when
 * the process that was to start a daemon ended first (ended). One file per
 * backend (a backend that grows more, one per operation):
 *   launch_local.c   fork/exec on this host
 *   launch_rsh.c     through an agent command: AGENT... HOST asrd ARGS
 *                    (ssh, rsh, or any prefix such as "ip netns exec")
 *   launch_slurm.c   a one-task srun step on a node of the Slurm allocation;
 *                    launch_slurm_nodes.c: its detect and nodes
 * launch_pick.c chooses among them (asr_launch_pick, asr_launch_by_id).
 */
#ifndef ASR_LAUNCH_H
#define ASR_LAUNCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hostlist.h"
#include "job_config.h"

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

/* Looks up an environment variable: its value, or NULL when unset. */
typedef const char *(*asr_launch_getenv_fn)(const char *name, void *arg);

/* The environment a backend's detect and nodes read: fn(name, arg). Tests
 * and the fuzz target pass a made-up one; asrrun the process's. */
typedef struct {
  asr_launch_getenv_fn fn;
  void *arg;
} asr_launch_env_t;

/* A variable of env: its value, or NULL when it is unset or empty (a
 * manager's empty variable is as good as none). */
const char *asr_launch_env_get(const asr_launch_env_t *env, const char *name);

/* What a backend's detect finds in an environment. */
typedef enum {
  ASR_LAUNCH_ABSENT = 0, /* none of its manager's variables is set */
  ASR_LAUNCH_HINTED,     /* some are set (perhaps empty), but they make no allocation */
  ASR_LAUNCH_HERE        /* this process runs inside an allocation of its manager */
} asr_launch_found_t;

/* A backend's id. The JOB's tree_launch carries it from asrrun to every
 * parent daemon (ctl_msg.h), so these are wire values: never renumbered. A
 * parent starts its children on other hosts, so the local backend's id
 * never travels (asr_launch_for_children). */
typedef enum { ASR_LAUNCH_RSH = 0, ASR_LAUNCH_SLURM = 1, ASR_LAUNCH_LOCAL = 2 } asr_launch_id_t;

typedef struct {
  const char *name;        /* "local", "rsh", "slurm": the --launcher word that picks it */
  asr_launch_id_t id;      /* asr_launch_by_id's key */
  asr_launcher_t launcher; /* the --launcher setting that picks it */
  /* The program that starts a remote daemon, named in asrrun's messages
   * ("srun"); NULL: the configured --launch-agent. */
  const char *agent;
  /* 1: the resource manager starts each daemon itself, this host's too, so
   * asrrun forks none (nor one ahead of the job, asrrun_early.c): Slurm
   * tracks every daemon as a step of the job. */
  int starts_every_daemon;
  /* The asr_alloc_kind_t (alloc.h) asr_alloc_detect returns when this
   * backend's allocation gives the hosts; 0 for a backend without a
   * resource manager. */
  int alloc_kind;
  /* Whether env holds this backend's allocation; NULL for a backend
   * without a resource manager (then nodes, needs are NULL too). */
  asr_launch_found_t (*detect)(const asr_launch_env_t *env);
  /* The error when the launcher names this backend and detect does not
   * find its allocation (the manager cannot start daemons outside one). */
  const char *needs;
  /* The hosts of the allocation detect found, in the manager's order, with
   * its slots for each (0: not given) into out (zeroed by the caller; the
   * caller frees it on success), and in *what the name of their source for
   * messages (a static string, e.g. the variable they came from). Returns
   * 0, or a negative ASR_E* code with errbuf set and out empty. */
  int (*nodes)(const asr_launch_env_t *env, asr_nodelist_t *out, const char **what, char *errbuf,
               size_t errlen);
  /* Starts the daemon; returns the pid of the local process that represents
   * it (asrd itself, or the agent that runs it), or a negative ASR_E* code
   * with errbuf set. */
  pid_t (*start)(const asr_launch_args_t *a, char *errbuf, size_t errlen);
  /* Writes into msg what the user is told when the process start returned
   * for host ended (waitpid status) before asrd called back: what ended
   * and what to check. agent is the configured --launch-agent. */
  void (*ended)(const char *host, const char *agent, int status, char *msg, size_t len);
} asr_launch_ops_t;

extern const asr_launch_ops_t asr_launch_local;
extern const asr_launch_ops_t asr_launch_rsh;
extern const asr_launch_ops_t asr_launch_slurm;

/* launch_pick.c: every backend, NULL-terminated; those with a resource
 * manager in the order asr_alloc_detect asks them. */
extern const asr_launch_ops_t *const asr_launch_backends[];

/* The backend of a job whose configured launcher is launcher, read after
 * asr_alloc_detect: that turns auto into a manager's launcher where the
 * manager's allocation (its detect) gives the hosts, so auto left over
 * means hosts the user named (or none) and no manager to ask: rsh. local:
 * the local backend. Never NULL. */
const asr_launch_ops_t *asr_launch_pick(asr_launcher_t launcher);

/* The backend with id id, or NULL for none (asrd: the JOB's tree_launch). */
const asr_launch_ops_t *asr_launch_by_id(uint32_t id);

/* The backend a parent daemon starts its children with in a job that ops
 * starts: ops itself, but rsh for the local backend. A child is on another
 * host, never forked by its parent; and the local backend's tree is flat
 * (asrrun forks every daemon), so there the value only has to be one asrd
 * accepts. */
const asr_launch_ops_t *asr_launch_for_children(const asr_launch_ops_t *ops);

/* Whether, in a job that ops starts, asrrun forks the daemon of host itself
 * (the local backend) rather than ops starting it: every host under the
 * local backend, none where the manager starts every daemon, else a host
 * that is this one (asr_launch_host_is_local). */
int asr_launch_forks_here(const asr_launch_ops_t *ops, const char *host, const char *local_hostname);

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

/* launch_pick.c: whether host names this host ("localhost", this host's
 * name with or without its domain, or an address of one of its
 * interfaces). */
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
