/*
 * launch_slurm.c -- start asrd on a node of the Slurm allocation asrrun runs
 * in (launch.h), as a one-task job step on that node:
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
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "launch.h"

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

const asr_launch_ops_t asr_launch_slurm = {"slurm", slurm_start};
