/*
 * asr_env_warn.c -- the one warning about ASR_* names the table does not
 * know (asr_env.h). Apart from asr_env.c because it logs, and the logger
 * reads its own settings through asr_env: each uses the other one way.
 */
#include "config.h"

#include <pthread.h>
#include <string.h>

#include "asr_env.h"
#include "asr_log.h"

extern char **environ;

static void warn_unknown(void *arg, const char *name, const char *near) {
  (void)arg;
  if (strncmp(name, "ASR_", 4) != 0) return; /* libasr reads no ASRRUN_* name; asrrun checks those */
  asr_warn("env", "unknown variable %s%s%s%s; asrrun --list-env lists them", name,
           near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
}

static void warn_unknown_now(void) { asr_env_each_unknown(environ, warn_unknown, NULL); }

void asr_env_warn_unknown_once(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, warn_unknown_now);
}
