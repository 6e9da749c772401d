/*
 * alloc.h -- taking asrrun's hosts from a batch system's allocation.
 *
 * Inside a Slurm or PBS/Torque job the hosts (and how many ranks each may
 * take) are already decided; asrrun uses them when the user named none. The
 * rules, in order:
 *
 *  1. launcher local: the allocation is ignored and cfg is left alone (the
 *     job runs on this host only).
 *  2. A Slurm allocation is SLURM_JOB_ID plus SLURM_JOB_NODELIST (or, when
 *     that is unset, SLURM_NODELIST), both non-empty. launcher slurm without
 *     one is an error: run asrrun inside salloc or sbatch.
 *  3. Hosts the user gave (-H, --hostfile, YAML hosts: cfg->nhosts > 0) win:
 *     cfg is left alone.
 *  4. Slurm, when launcher is auto or slurm: the hosts are the expanded node
 *     list; a host's slots are its SLURM_TASKS_PER_NODE count (one count per
 *     node, "2(x3),1" form), else SLURM_NTASKS_PER_NODE (one number for every
 *     node; Slurm sets it only for --ntasks-per-node), else 0 = not given,
 *     which the mapper reads as --lnc-per-host, else 1. Launcher auto becomes
 *     slurm. (Launcher rsh ignores a Slurm allocation: the user chose how to
 *     start asrd and names the hosts.)
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

/* Which allocation asr_alloc_detect() took the hosts from. */
typedef enum { ASR_ALLOC_NONE = 0, ASR_ALLOC_SLURM = 1, ASR_ALLOC_PBS = 2 } asr_alloc_kind_t;

/* Looks up an environment variable: its value, or NULL when unset. */
typedef const char *(*asr_alloc_getenv_fn)(const char *name, void *arg);

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

#endif /* ASR_LAUNCHER_ALLOC_H */
