/*
 * alloc.c -- hosts from a Slurm or PBS/Torque allocation. See alloc.h for
 * the rules.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "asr_err.h"
#include "config_int.h"
#include "hostlist.h"

/* An environment variable's value, or NULL when unset or empty. */
typedef struct {
  asr_alloc_getenv_fn fn;
  void *arg;
} env_t;

static const char *env_get(const env_t *env, const char *name) {
  const char *v = env->fn(name, env->arg);
  return v && *v ? v : NULL;
}

static const char *process_getenv(const char *name, void *arg) {
  (void)arg;
  return getenv(name);
}

const char *asr_alloc_name(int kind) {
  switch (kind) {
    case ASR_ALLOC_NONE: return "none";
    case ASR_ALLOC_SLURM: return "slurm";
    case ASR_ALLOC_PBS: return "pbs";
  }
  return "?";
}

/* The errors of hostlist.c are bad settings here, like any other config
 * error asrrun reports (only running out of memory is something else). */
static int config_error(int rc) { return rc == ASR_ENOMEM ? rc : ASR_ECONFIG; }

static int clamp_slots(int slots) { return slots > ASR_CFG_MAX_SLOTS ? ASR_CFG_MAX_SLOTS : slots; }

/* Checks nl's names as -H would and, when all pass, makes them cfg's hosts.
 * what names the source in messages. */
static int commit_hosts(asr_config_t *cfg, const asr_nodelist_t *nl, const char *what, char *errbuf,
                        size_t errlen) {
  asr__hostlist_t hl;
  int rc = asr__hostlist_init(&hl, errbuf, errlen);
  for (int i = 0; rc == 0 && i < nl->n; i++)
    rc = asr__hostlist_add(&hl, nl->name[i], strlen(nl->name[i]), clamp_slots(nl->slots[i]), what, errbuf,
                           errlen);
  if (rc == 0) asr__config_set_hosts(cfg, &hl);
  asr__hostlist_fini(&hl);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Slurm                                                                    */
/* ------------------------------------------------------------------------ */

/* The variable holding the node list, or NULL when this is no Slurm job. */
static const char *slurm_nodelist_var(const env_t *env) {
  if (!env_get(env, "SLURM_JOB_ID")) return NULL;
  if (env_get(env, "SLURM_JOB_NODELIST")) return "SLURM_JOB_NODELIST";
  if (env_get(env, "SLURM_NODELIST")) return "SLURM_NODELIST";
  return NULL;
}

/* Sets the slots of nodes from SLURM_TASKS_PER_NODE. */
static int slurm_tasks_per_node(asr_nodelist_t *nodes, const char *nodes_var, const char *spec, char *errbuf,
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
static int slurm_ntasks_per_node(asr_nodelist_t *nodes, const char *spec, char *errbuf, size_t errlen) {
  int *counts, ncounts;
  int rc = asr_slurm_tasks_expand(spec, "SLURM_NTASKS_PER_NODE", &counts, &ncounts, errbuf, errlen);
  if (rc == 0 && (ncounts != 1 || strchr(spec, '('))) {
    if (errbuf && errlen) snprintf(errbuf, errlen, "SLURM_NTASKS_PER_NODE '%.100s': not one number", spec);
    rc = ASR_EINVAL;
  }
  for (int i = 0; rc == 0 && i < nodes->n; i++) nodes->slots[i] = counts[0];
  free(counts);
  return rc;
}

static int use_slurm(asr_config_t *cfg, const env_t *env, const char *nodes_var, char *errbuf,
                     size_t errlen) {
  asr_nodelist_t nodes;
  const char *tasks = env_get(env, "SLURM_TASKS_PER_NODE"), *ntasks = env_get(env, "SLURM_NTASKS_PER_NODE");
  int rc = asr_slurm_hostlist_expand(env_get(env, nodes_var), nodes_var, &nodes, errbuf, errlen);
  if (rc != 0) return config_error(rc);
  if (tasks)
    rc = slurm_tasks_per_node(&nodes, nodes_var, tasks, errbuf, errlen);
  else if (ntasks)
    rc = slurm_ntasks_per_node(&nodes, ntasks, errbuf, errlen);
  /* else: the slots stay 0 (not given) */
  if (rc == 0) rc = commit_hosts(cfg, &nodes, nodes_var, errbuf, errlen);
  asr_nodelist_free(&nodes);
  if (rc != 0) return config_error(rc);
  cfg->launcher = ASR_LAUNCHER_SLURM;
  return ASR_ALLOC_SLURM;
}

/* ------------------------------------------------------------------------ */
/* PBS/Torque                                                               */
/* ------------------------------------------------------------------------ */

static int use_pbs(asr_config_t *cfg, const char *path, char *errbuf, size_t errlen) {
  asr_nodelist_t nodes;
  char what[1100];
  int rc = asr_pbs_nodefile_read(path, &nodes, errbuf, errlen);
  if (rc != 0) return config_error(rc);
  snprintf(what, sizeof what, "PBS node file '%s'", path);
  rc = commit_hosts(cfg, &nodes, what, errbuf, errlen);
  asr_nodelist_free(&nodes);
  return rc == 0 ? ASR_ALLOC_PBS : config_error(rc);
}

/* ------------------------------------------------------------------------ */
/* The rules                                                                */
/* ------------------------------------------------------------------------ */

int asr_alloc_detect_env(asr_config_t *cfg, asr_alloc_getenv_fn getenv_fn, void *arg, char *errbuf,
                         size_t errlen) {
  const env_t env = {getenv_fn, arg};
  if (cfg->launcher == ASR_LAUNCHER_LOCAL) return ASR_ALLOC_NONE;
  const char *nodes_var = slurm_nodelist_var(&env);
  if (cfg->launcher == ASR_LAUNCHER_SLURM && !nodes_var)
    return asr_errf(errbuf, errlen, ASR_ECONFIG,
                    "launcher slurm needs a Slurm allocation, but SLURM_JOB_ID and "
                    "SLURM_JOB_NODELIST are not both set: run asrrun inside salloc or sbatch, "
                    "or choose another launcher");
  if (cfg->nhosts > 0) return ASR_ALLOC_NONE; /* the user's hosts win */
  if (nodes_var && (cfg->launcher == ASR_LAUNCHER_AUTO || cfg->launcher == ASR_LAUNCHER_SLURM))
    return use_slurm(cfg, &env, nodes_var, errbuf, errlen);
  const char *pbs = env_get(&env, "PBS_NODEFILE");
  if (pbs) return use_pbs(cfg, pbs, errbuf, errlen);
  return ASR_ALLOC_NONE;
}

int asr_alloc_detect(asr_config_t *cfg, char *errbuf, size_t errlen) {
  return asr_alloc_detect_env(cfg, process_getenv, NULL, errbuf, errlen);
}
