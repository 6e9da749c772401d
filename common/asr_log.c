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

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

/* Reads ASR_LOG_LEVEL and ASR_LOG_SUBSYS; cfg_lock is held. */
static void load_env_locked(void) {
  assert(asr_mutex_held(&cfg_lock));
  const char *lv = getenv("ASR_LOG_LEVEL");
  int level = ASR_LOG_WARN;
  if (lv && *lv) {
    for (int i = 0; i <= ASR_LOG_TRACE; i++)
      if (strcasecmp(lv, level_names[i]) == 0) level = i;
    if (lv[0] >= '0' && lv[0] <= '4' && lv[1] == '\0') level = lv[0] - '0';
  }
  atomic_store(&cfg_level, level);
  const char *ss = getenv("ASR_LOG_SUBSYS");
  snprintf(cfg_subsys, sizeof cfg_subsys, "%s", ss ? ss : "");
  if (cfg_host[0] == '\0') {
    if (gethostname(cfg_host, sizeof cfg_host - 1) != 0) snprintf(cfg_host, sizeof cfg_host, "?");
    cfg_host[sizeof cfg_host - 1] = '\0';
  }
}

static void load_once(void) {
  pthread_mutex_lock(&cfg_lock);
  load_env_locked();
  pthread_mutex_unlock(&cfg_lock);
}

void asr_log_reload_env(void) {
  pthread_once(&cfg_once, load_once);
  pthread_mutex_lock(&cfg_lock);
  load_env_locked();
  pthread_mutex_unlock(&cfg_lock);
}

void asr_log_set_role(const char *role, int id) {
  pthread_once(&cfg_once, load_once);
  pthread_mutex_lock(&cfg_lock);
  snprintf(cfg_role, sizeof cfg_role, "%s", role ? role : "asr");
  cfg_id = id;
  pthread_mutex_unlock(&cfg_lock);
}

void asr_log_set_host(const char *host) {
  pthread_once(&cfg_once, load_once);
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
  pthread_once(&cfg_once, load_once);
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
  pthread_once(&cfg_once, load_once);
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
