/*
 * launch_slurm.h -- the Slurm backend's operations shared between its files
 * (launch.h's asr_launch_slurm is the table that holds them): the table and
 * start in launch_slurm.c, detect and nodes in launch_slurm_nodes.c.
 */
#ifndef ASR_LAUNCH_SLURM_H
#define ASR_LAUNCH_SLURM_H

#include "launch.h"

/* asr_launch_slurm.detect: HERE when SLURM_JOB_ID and a node list
 * (SLURM_JOB_NODELIST, else SLURM_NODELIST) are both non-empty. */
asr_launch_found_t asr__launch_slurm_detect(const asr_launch_env_t *env);

/* asr_launch_slurm.nodes: the expanded node list, with each node's
 * SLURM_TASKS_PER_NODE count, else SLURM_NTASKS_PER_NODE, else 0. */
int asr__launch_slurm_nodes(const asr_launch_env_t *env, asr_nodelist_t *out, const char **what, char *errbuf,
                            size_t errlen);

#endif /* ASR_LAUNCH_SLURM_H */
