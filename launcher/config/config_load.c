/*
 * config_load.c -- the whole precedence stack (doc/design.md, "The
 * launcher"), lowest first:
 * built-in defaults, $(sysconfdir)/asr/asrrun.yaml, ~/.config/asr/asrrun.yaml,
 * the job YAML (-f), the ASRRUN_* environment, the command line. It only
 * sequences the layers: config_yaml.c, config.c's environment layer and
 * config_cli.c.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_fs.h"
#include "config_int.h"

#ifndef ASR_SYSCONFDIR
#define ASR_SYSCONFDIR "/usr/local/etc" /* set by launcher/Makefile.mk from $(sysconfdir) */
#endif

/* ------------------------------------------------------------------------ */
/* The whole stack                                                          */
/* ------------------------------------------------------------------------ */

/* The path of a settings file: the variable when it is set (set but empty
 * means "no file": asr_env_raw tells that from unset), else the default.
 * Returns NULL for no file. */
static const char *config_path(asr_env_id_t var, const char *dflt) {
  const char *v = asr_env_raw(var);
  if (v) return *v ? v : NULL;
  return dflt;
}

static const char *user_default_path(char *buf, size_t len) {
  const char *home = getenv("HOME");
  if (!home || !*home) return NULL;
  int n = snprintf(buf, len, "%s/.config/asr/asrrun.yaml", home);
  return n > 0 && (size_t)n < len ? buf : NULL;
}

/* The system and user files are optional: a missing one is skipped, while
 * one that exists but is wrong is an error (a silently ignored typo in a
 * site file would be found only by its effects). */
static int load_optional_yaml(asr_config_t *cfg, const char *path, char *errbuf, size_t errlen) {
  if (!path) return 0;
  int rc = asr_config_load_yaml(cfg, path, errbuf, errlen);
  return rc == ASR_ENOENT ? 0 : rc;
}

static int load_job_yaml(asr_config_t *cfg, const char *path, char *errbuf, size_t errlen) {
  int rc = asr_config_load_yaml(cfg, path, errbuf, errlen);
  if (rc == ASR_ENOENT)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "-f: job file '%s' does not exist", path);
  if (rc == 0) snprintf(cfg->job_file, sizeof cfg->job_file, "%s", path);
  return rc;
}

int asr_config_load(asr_config_t *cfg, int argc, char **argv, char *errbuf, size_t errlen) {
  char user_buf[1100];
  asr__cfg_prescan_t ps;
  int rc = 0;
  asr_config_defaults(cfg);
  asr__config_prescan(argc, argv, &ps);
  if (!ps.info_only) {
    const char *sys = config_path(ASR_ENV_SYSTEM_CONFIG, ASR_SYSCONFDIR "/asr/asrrun.yaml");
    const char *user = config_path(ASR_ENV_USER_CONFIG, user_default_path(user_buf, sizeof user_buf));
    rc = asr_config_check_env(errbuf, errlen);
    if (rc == 0) rc = load_optional_yaml(cfg, sys, errbuf, errlen);
    if (rc == 0) rc = load_optional_yaml(cfg, user, errbuf, errlen);
    if (rc == 0 && ps.job_file) rc = load_job_yaml(cfg, ps.job_file, errbuf, errlen);
    if (rc == 0) rc = asr_config_load_env(cfg, errbuf, errlen);
  }
  if (rc == 0) rc = asr_config_parse_args(cfg, argc, argv, errbuf, errlen);
  if (rc == 0) rc = asr_config_check_policy(cfg, errbuf, errlen);
  return rc;
}
