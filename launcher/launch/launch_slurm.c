/*
 * launch_slurm.c -- the Slurm backend (launch.h): its ops table, and how it
 * starts asrd on a node of the Slurm allocation asrrun runs in, as a
 * one-task job step on that node:
 *
 *   srun --nodes=1 --ntasks=1 --nodelist=NODE --overlap --whole --kill-on-bad-exit=1
 *        --mpi=none --quiet ASRD --ctl IP:PORT --index I --hostname NODE --port P
 *
 * One step per node, each with explicit counts: a step would otherwise
 * inherit the allocation's SLURM_NTASKS and start a daemon per task (see
 * ../shared/notes/pmix-slurm-facts.md), and one step per node keeps the
 * "one local process represents one daemon" shape of the other backends.
 * --overlap lets the steps (and a user's other steps) share the nodes;
 * --whole gives the step every CPU the job has on the node (a one-task step
 * would otherwise be confined to one CPU, and every rank asrd forks with it);
 * --mpi=none keeps a site's MpiDefault=pmix from giving asrd a PMIx server of
 * its own; the ranks are asrd's children, so Slurm's process tracking of the
 * step also covers them. The node is named by Slurm's node name, never
 * gethostname() (emulated nodes share one). The secret goes through srun's
 * stdin, which srun forwards to its single task.
 *
 * Slurm starts every daemon, this host's too (starts_every_daemon): Slurm
 * then tracks each daemon, and the ranks under it, as a step of the job, and
 * so signals, accounts for and cleans up after all of them. In a tree of
 * daemons each parent starts its children's steps the same way (its srun
 * runs inside its own step, in the same allocation). Whether asrrun runs
 * inside an allocation, and its nodes: launch_slurm_nodes.c.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "asr_env.h"
#include "asr_err.h"
#include "launch_slurm.h"

static pid_t slurm_start(const asr_launch_args_t *a, char *errbuf, size_t errlen) {
  char index[16], port[16], nodelist[160];
  snprintf(index, sizeof index, "%d", a->index);
  snprintf(port, sizeof port, "%d", a->port);
  snprintf(nodelist, sizeof nodelist, "--nodelist=%s", a->host);
  const char *srun;
  if (asr_env_str(ASR_ENV_SRUN, &srun, errbuf, errlen) != 0) return ASR_ECONFIG;
  const char *argv[] = {
      srun,         "--nodes=1", "--ntasks=1", nodelist, "--overlap", "--whole", "--kill-on-bad-exit=1",
      "--mpi=none", "--quiet",   a->asrd_path, "--ctl",  a->ctl_addr, "--index", index,
      "--hostname", a->host,     "--port",     port,     NULL,
  };
  /* own process group: a Ctrl-C reaches asrrun, which forwards it; srun
   * would otherwise cancel the step on its own */
  return asr_launch_spawn_agent((char *const *)argv, a->secret_hex, errbuf, errlen);
}

static void slurm_ended(const char *host, const char *agent, int st, char *msg, size_t len) {
  (void)agent;
  int sig = WIFSIGNALED(st), code = sig ? WTERMSIG(st) : WEXITSTATUS(st);
  snprintf(msg, len,
           "the srun step for node %s ended with %s %d before asrd called back; check that 'srun -N 1 -w %s "
           "true' works in this allocation and that asrd is installed there (--prefix)",
           host, sig ? "signal" : "status", code, host);
}

const asr_launch_ops_t asr_launch_slurm = {
    .name = "slurm",
    .id = ASR_LAUNCH_SLURM,
    .launcher = ASR_LAUNCHER_SLURM,
    .agent = "srun",
    .starts_every_daemon = 1,
    .alloc_kind = ASR_ALLOC_SLURM,
    .detect = asr__launch_slurm_detect,
    .needs =
        "launcher slurm needs a Slurm allocation, but SLURM_JOB_ID and SLURM_JOB_NODELIST are not both set: "
        "run asrrun inside salloc or sbatch, or choose another launcher",
    .nodes = asr__launch_slurm_nodes,
    .start = slurm_start,
    .ended = slurm_ended,
};
