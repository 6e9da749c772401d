/*
 * launch_slurm_nodes.c -- the Slurm backend's questions about its
 * allocation (launch_slurm.h): is asrrun inside one, and which nodes, with
 * how many tasks each, it holds.
 *
 * An allocation is SLURM_JOB_ID plus SLURM_JOB_NODELIST (or, when that is
 * unset, SLURM_NODELIST, a step's list), both non-empty: inside salloc,
 * sbatch and srun alike. A node's slots are its SLURM_TASKS_PER_NODE count
 * (one count per node, "2(x3),1" form), else SLURM_NTASKS_PER_NODE (one
 * number for every node; Slurm sets it only for --ntasks-per-node), else 0 =
 * not given, which the mapper reads as --lnc-per-host, else 1.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_err.h"
#include "hostlist.h"
#include "launch_slurm.h"

/* The variable holding the node list, or NULL when this is no Slurm job. */
static const char *nodelist_var(const asr_launch_env_t *env) {
  if (!asr_launch_env_get(env, "SLURM_JOB_ID")) return NULL;
  if (asr_launch_env_get(env, "SLURM_JOB_NODELIST")) return "SLURM_JOB_NODELIST";
  if (asr_launch_env_get(env, "SLURM_NODELIST")) return "SLURM_NODELIST";
  return NULL;
}

asr_launch_found_t asr__launch_slurm_detect(const asr_launch_env_t *env) {
  if (nodelist_var(env)) return ASR_LAUNCH_HERE;
  /* set even empty: asrrun's early daemon stays away from a job that looks
   * like one of Slurm's (asr_alloc_hinted) */
  static const char *const vars[] = {"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODELIST"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (env->fn(vars[i], env->arg)) return ASR_LAUNCH_HINTED;
  return ASR_LAUNCH_ABSENT;
}

/* Sets the slots of nodes from SLURM_TASKS_PER_NODE. */
static int tasks_per_node(asr_nodelist_t *nodes, const char *nodes_var, const char *spec, char *errbuf,
                          size_t errlen) {
  int *counts, ncounts;
  int rc = asr_slurm_tasks_expand(spec, "SLURM_TASKS_PER_NODE", &counts, &ncounts, errbuf, errlen);
  if (rc == 0) {
    char tasks_what[200];
    snprintf(tasks_what, sizeof tasks_what, "SLURM_TASKS_PER_NODE '%.100s'", spec);
    rc = asr_slurm_tasks_check(tasks_what, ncounts, nodes_var, nodes->n, errbuf, errlen);
  }
  for (int i = 0; rc == 0 && i < nodes->n; i++) nodes->slots[i] = counts[i];
  free(counts);
  return rc;
}

/* Sets every node's slots from SLURM_NTASKS_PER_NODE (a plain number). */
static int ntasks_per_node(asr_nodelist_t *nodes, const char *spec, char *errbuf, size_t errlen) {
  int *counts, ncounts;
  int rc = asr_slurm_tasks_expand(spec, "SLURM_NTASKS_PER_NODE", &counts, &ncounts, errbuf, errlen);
  if (rc == 0 && (ncounts != 1 || strchr(spec, '(')))
    rc = asr_errf(errbuf, errlen, ASR_EINVAL, "SLURM_NTASKS_PER_NODE '%.100s': not one number", spec);
  for (int i = 0; rc == 0 && i < nodes->n; i++) nodes->slots[i] = counts[0];
  free(counts);
  return rc;
}

int asr__launch_slurm_nodes(const asr_launch_env_t *env, asr_nodelist_t *out, const char **what, char *errbuf,
                            size_t errlen) {
  const char *nodes_var = nodelist_var(env);
  if (!nodes_var)
    return asr_errf(errbuf, errlen, ASR_ENOTFOUND,
                    "no Slurm node list: SLURM_JOB_ID and SLURM_JOB_NODELIST "
                    "are not both set");
  const char *tasks = asr_launch_env_get(env, "SLURM_TASKS_PER_NODE");
  const char *ntasks = asr_launch_env_get(env, "SLURM_NTASKS_PER_NODE");
  asr_nodelist_t nodes;
  int rc = asr_slurm_hostlist_expand(asr_launch_env_get(env, nodes_var), nodes_var, &nodes, errbuf, errlen);
  if (rc != 0) return rc;
  if (tasks)
    rc = tasks_per_node(&nodes, nodes_var, tasks, errbuf, errlen);
  else if (ntasks)
    rc = ntasks_per_node(&nodes, ntasks, errbuf, errlen);
  /* else: the slots stay 0 (not given) */
  if (rc != 0) {
    asr_nodelist_free(&nodes);
    return rc;
  }
  *out = nodes;
  *what = nodes_var;
  return 0;
}
