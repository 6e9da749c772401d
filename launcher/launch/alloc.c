/*
 * alloc.c -- hosts from a batch system's allocation: a launch backend's
 * resource manager (asked through its ops, launch.h) or a PBS/Torque node
 * file. See alloc.h for the rules.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "asr_err.h"
#include "config_int.h"
#include "hostlist.h"
#include "launch.h"

static const char *process_getenv(const char *name, void *arg) {
  (void)arg;
  return getenv(name);
}

const char *asr_alloc_name(int kind) {
  if (kind == ASR_ALLOC_NONE) return "none";
  if (kind == ASR_ALLOC_PBS) return "pbs";
  for (const asr_launch_ops_t *const *b = asr_launch_backends; *b; b++)
    if ((*b)->detect && (*b)->alloc_kind == kind) return (*b)->name;
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
/* A backend's resource manager                                             */
/* ------------------------------------------------------------------------ */

static int use_manager(asr_config_t *cfg, const asr_launch_ops_t *rm, const asr_launch_env_t *env,
                       char *errbuf, size_t errlen) {
  asr_nodelist_t nodes = {0};
  const char *what = NULL;
  int rc = rm->nodes(env, &nodes, &what, errbuf, errlen);
  if (rc != 0) return config_error(rc);
  rc = commit_hosts(cfg, &nodes, what, errbuf, errlen);
  asr_nodelist_free(&nodes);
  if (rc != 0) return config_error(rc);
  cfg->launcher = rm->launcher;
  return rm->alloc_kind;
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
  const asr_launch_env_t env = {getenv_fn, arg};
  if (cfg->launcher == ASR_LAUNCHER_LOCAL) return ASR_ALLOC_NONE;
  /* the backend whose allocation gives the hosts: the one the launcher
   * names, or for auto the first whose allocation is here */
  const asr_launch_ops_t *rm = NULL;
  for (const asr_launch_ops_t *const *b = asr_launch_backends; *b; b++) {
    if (!(*b)->detect) continue;
    int here = (*b)->detect(&env) == ASR_LAUNCH_HERE;
    if (cfg->launcher == (*b)->launcher && !here)
      return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s", (*b)->needs);
    if (here && !rm && (cfg->launcher == ASR_LAUNCHER_AUTO || cfg->launcher == (*b)->launcher)) rm = *b;
  }
  if (cfg->nhosts > 0) return ASR_ALLOC_NONE; /* the user's hosts win */
  if (rm) return use_manager(cfg, rm, &env, errbuf, errlen);
  const char *pbs = asr_launch_env_get(&env, "PBS_NODEFILE");
  if (pbs) return use_pbs(cfg, pbs, errbuf, errlen);
  return ASR_ALLOC_NONE;
}

int asr_alloc_detect(asr_config_t *cfg, char *errbuf, size_t errlen) {
  return asr_alloc_detect_env(cfg, process_getenv, NULL, errbuf, errlen);
}

int asr_alloc_hinted(void) {
  const asr_launch_env_t env = {process_getenv, NULL};
  if (getenv("PBS_NODEFILE")) return 1;
  for (const asr_launch_ops_t *const *b = asr_launch_backends; *b; b++)
    if ((*b)->detect && (*b)->detect(&env) != ASR_LAUNCH_ABSENT) return 1;
  return 0;
}
