/*
 * alloc.h -- taking asrrun's hosts from a batch system's allocation.
 *
 * Inside a Slurm or PBS/Torque job the hosts (and how many ranks each may
 * take) are already decided; asrrun uses them when the user named none. A
 * resource manager with a launch backend of its own (Slurm: launch.h's
 * asr_launch_slurm) answers through that backend whether its allocation is
 * here (detect) and which nodes it holds (nodes); PBS has no backend (an
 * rsh-style agent starts asrd there), so its node file is read here. The
 * rules, in order:
 *
 *  1. launcher local: the allocation is ignored and cfg is left alone (the
 *     job runs on this host only).
 *  2. A launcher that names a backend whose allocation is not here is an
 *     error (the backend's needs: Slurm's srun needs SLURM_JOB_ID plus
 *     SLURM_JOB_NODELIST or SLURM_NODELIST, both non-empty: run asrrun
 *     inside salloc or sbatch).
 *  3. Hosts the user gave (-H, --hostfile, YAML hosts: cfg->nhosts > 0) win:
 *     cfg is left alone.
 *  4. A backend's allocation, when the launcher is auto or names that
 *     backend: the hosts are its node list, in its order, with its slots
 *     (Slurm: SLURM_TASKS_PER_NODE, else SLURM_NTASKS_PER_NODE, else 0 =
 *     not given, which the mapper reads as --lnc-per-host, else 1;
 *     launch_slurm_nodes.c). Launcher auto becomes that backend's. (Launcher
 *     rsh ignores a Slurm allocation: the user chose how to start asrd and
 *     names the hosts.)
 *  5. PBS, when PBS_NODEFILE is set (non-empty) and rule 4 did not apply: the
 *     hosts and slots of the node file (one line per slot); the launcher is
 *     left as it is (an rsh-style one starts asrd there).
 *  6. Otherwise cfg is left alone.
 *
 * Slots above ASR_CFG_MAX_SLOTS (128, one rank per LNC) are lowered to it: an
 * allocation may grant more CPUs than asr runs ranks on one host, and that is
 * no error of the user's. Host names are checked as -H checks them (letters,
 * digits, '-', '.', '_'; at most ASR_CFG_MAX_HOSTS hosts).
 */
#ifndef ASR_LAUNCHER_ALLOC_H
#define ASR_LAUNCHER_ALLOC_H

#include <stddef.h>

#include "job_config.h"
#include "launch.h"

/* Which allocation asr_alloc_detect() took the hosts from. */
typedef enum { ASR_ALLOC_NONE = 0, ASR_ALLOC_SLURM = 1, ASR_ALLOC_PBS = 2 } asr_alloc_kind_t;

/* Looks up an environment variable: its value, or NULL when unset. */
typedef asr_launch_getenv_fn asr_alloc_getenv_fn;

/* Applies the rules above to a loaded cfg, reading the process environment.
 * Returns the asr_alloc_kind_t used (>= 0; ASR_ALLOC_NONE when cfg was left
 * alone), or ASR_ECONFIG (ASR_ENOMEM) with errbuf naming the variable and
 * what is wrong; on error cfg is unchanged. */
int asr_alloc_detect(asr_config_t *cfg, char *errbuf, size_t errlen);

/* The same with the environment read through getenv_fn(name, arg). */
int asr_alloc_detect_env(asr_config_t *cfg, asr_alloc_getenv_fn getenv_fn, void *arg, char *errbuf,
                         size_t errlen);

/* "none", "slurm", "pbs" (for messages and --dry-run); "?" for anything else. */
const char *asr_alloc_name(int kind);

/* Whether the process environment so much as names an allocation: a
 * variable of a backend's resource manager (asr_launch_ops_t.detect: set,
 * even empty or without the rest) or PBS_NODEFILE (set, even empty).
 * asrrun starts no daemon ahead of the job then (asrrun_early.c): inside a
 * manager's job the daemons are likely its to start, on its nodes. */
int asr_alloc_hinted(void);

#endif /* ASR_LAUNCHER_ALLOC_H */
