/* asr_log.c -- see asr_log.h. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "asr_assert.h"
#include "asr_env.h"
#include "asr_log.h"

#define ASR_LOG_LINE_MAX 2048

/* The configuration is read once, lazily, and may be re-read by tests. The
 * strings are only written under cfg_lock; the level is an atomic so the
 * fast "is this enabled" check takes no lock. */
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t cfg_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int cfg_level = ASR_LOG_WARN;
static char cfg_subsys[256]; /* comma list; empty = all */
static char cfg_role[32] = "asr";
static int cfg_id = -1;
static char cfg_host[64];

/* Logging cannot fail, so a bad ASR_LOG_LEVEL is the one setting that does
 * not make its reader fail: the level falls back on warn and the problem is
 * told once per process (bad_level, printed by the caller once cfg_lock is
 * released, since printing takes it). asrrun, asr_init and asr_job_init
 * refuse the value before any of this matters. */
static char bad_level[256];          /* the warning, written under cfg_lock */
static atomic_int bad_level_pending; /* 1 while it waits to be printed */
static int bad_level_told;           /* under cfg_lock: once per process */

/* Reads ASR_LOG_LEVEL and ASR_LOG_SUBSYS; cfg_lock is held. */
static void load_env_locked(void) {
  assert(asr_mutex_held(&cfg_lock));
  int level = ASR_LOG_WARN;
  char err[200];
  if (asr_env_word(ASR_ENV_LOG_LEVEL, &level, err, sizeof err) != 0) {
    level = ASR_LOG_WARN;
    if (!bad_level_told) {
      snprintf(bad_level, sizeof bad_level, "%s; logging at warn", err);
      atomic_store(&bad_level_pending, 1);
    }
    bad_level_told = 1;
  }
  atomic_store(&cfg_level, level);
  const char *ss = NULL;
  if (asr_env_str(ASR_ENV_LOG_SUBSYS, &ss, NULL, 0) != 0) ss = NULL; /* any text: it cannot fail */
  snprintf(cfg_subsys, sizeof cfg_subsys, "%s", ss ? ss : "");
  if (cfg_host[0] == '\0') {
    if (gethostname(cfg_host, sizeof cfg_host - 1) != 0) snprintf(cfg_host, sizeof cfg_host, "?");
    cfg_host[sizeof cfg_host - 1] = '\0';
  }
}

/* Prints the bad-level warning load_env_locked left, if any. Called without cfg_lock. */
static void tell_bad_level(void) {
  if (!atomic_exchange(&bad_level_pending, 0)) return;
  char msg[sizeof bad_level];
  pthread_mutex_lock(&cfg_lock);
  snprintf(msg, sizeof msg, "%s", bad_level);
  pthread_mutex_unlock(&cfg_lock);
  asr_log_write(ASR_LOG_WARN, "log", "%s", msg);
}

static void load_once(void) {
  pthread_mutex_lock(&cfg_lock);
  load_env_locked();
  pthread_mutex_unlock(&cfg_lock);
}

/* The first use of the logger reads its settings (pthread_once); the
 * warning about a bad level comes right after, outside the once. */
static void ensure_loaded(void) {
  pthread_once(&cfg_once, load_once);
  if (atomic_load_explicit(&bad_level_pending, memory_order_relaxed)) tell_bad_level();
}

void asr_log_reload_env(void) {
  pthread_once(&cfg_once, load_once);
  pthread_mutex_lock(&cfg_lock);
  load_env_locked();
  pthread_mutex_unlock(&cfg_lock);
  tell_bad_level();
}

void asr_log_set_role(const char *role, int id) {
  ensure_loaded();
  pthread_mutex_lock(&cfg_lock);
  snprintf(cfg_role, sizeof cfg_role, "%s", role ? role : "asr");
  cfg_id = id;
  pthread_mutex_unlock(&cfg_lock);
}

void asr_log_set_host(const char *host) {
  ensure_loaded();
  pthread_mutex_lock(&cfg_lock);
  snprintf(cfg_host, sizeof cfg_host, "%s", host ? host : "?");
  pthread_mutex_unlock(&cfg_lock);
}

/* Whether subsys appears as a whole word in the comma list. Called under cfg_lock. */
static int subsys_listed(const char *subsys) {
  if (cfg_subsys[0] == '\0' || strcmp(cfg_subsys, "all") == 0) return 1;
  size_t n = strlen(subsys);
  for (const char *p = cfg_subsys; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && strncmp(p, subsys, n) == 0) return 1;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

int asr_log_enabled(asr_log_level_t level, const char *subsys) {
  ensure_loaded();
  if ((int)level > atomic_load_explicit(&cfg_level, memory_order_relaxed)) return 0;
  if (level <= ASR_LOG_WARN) return 1;
  pthread_mutex_lock(&cfg_lock);
  int ok = subsys_listed(subsys ? subsys : "");
  pthread_mutex_unlock(&cfg_lock);
  return ok;
}

void asr_log_vwrite(asr_log_level_t level, const char *subsys, const char *fmt, va_list ap) {
  char line[ASR_LOG_LINE_MAX];
  int saved_errno = errno;
  ensure_loaded();
  pthread_mutex_lock(&cfg_lock);
  int n;
  if (cfg_id >= 0)
    n = snprintf(line, sizeof line, "[asr %s:%d@%s %ld] %s: %s", cfg_role, cfg_id, cfg_host, (long)getpid(),
                 subsys ? subsys : "-",
                 level <= ASR_LOG_WARN ? (level == ASR_LOG_ERROR ? "error: " : "warning: ") : "");
  else
    n = snprintf(line, sizeof line, "[asr %s@%s %ld] %s: %s", cfg_role, cfg_host, (long)getpid(),
                 subsys ? subsys : "-",
                 level <= ASR_LOG_WARN ? (level == ASR_LOG_ERROR ? "error: " : "warning: ") : "");
  pthread_mutex_unlock(&cfg_lock);
  if (n < 0) n = 0;
  if ((size_t)n < sizeof line) {
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    if (m > 0) n += m;
  }
  if ((size_t)n >= sizeof line - 1) n = (int)sizeof line - 2; /* truncated: keep the newline */
  while (n > 0 && line[n - 1] == '\n') n--;
  line[n++] = '\n';
  /* One write per line; a short write on a pipe of < PIPE_BUF bytes cannot happen. */
  ssize_t w;
  do {
    w = write(STDERR_FILENO, line, (size_t)n);
  } while (w < 0 && errno == EINTR);
  errno = saved_errno;
}

void asr_log_write(asr_log_level_t level, const char *subsys, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  asr_log_vwrite(level, subsys, fmt, ap);
  va_end(ap);
}
