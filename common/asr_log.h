/*
 * asr_log.h -- level- and subsystem-gated logging.
 *
 * ASR_LOG_LEVEL=error|warn|info|debug|trace (default warn) sets the level;
 * ASR_LOG_SUBSYS=kvs,svc,fab,... limits debug/trace output to those subsystems
 * (errors and warnings always print). Both are rows of asr_env.h; a bad level
 * is told once, as a warning, and warn is used (logging cannot fail). Each line looks like
 *     [asr role:id@host pid] subsys: message
 * and is written with one write(2) to stderr, so lines from many processes and
 * threads sharing one pipe never interleave mid-line.
 */
#ifndef ASR_LOG_H
#define ASR_LOG_H

#include <stdarg.h>

typedef enum {
  ASR_LOG_ERROR = 0,
  ASR_LOG_WARN = 1,
  ASR_LOG_INFO = 2,
  ASR_LOG_DEBUG = 3,
  ASR_LOG_TRACE = 4,
} asr_log_level_t;

/* Names this process in the prefix ("asrd", "rank", "asrkv" ...) and an id
 * (rank number, -1 for none). Safe to call at any time. */
void asr_log_set_role(const char *role, int id);

/* Overrides the host name printed in the prefix (emulated hosts). */
void asr_log_set_host(const char *host);

/* Re-reads ASR_LOG_LEVEL and ASR_LOG_SUBSYS (tests call this after setenv). */
void asr_log_reload_env(void);

/* Returns whether a message at level for subsys would be printed. */
int asr_log_enabled(asr_log_level_t level, const char *subsys);

void asr_log_write(asr_log_level_t level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void asr_log_vwrite(asr_log_level_t level, const char *subsys, const char *fmt, va_list ap);

#define ASR_LOG(level, subsys, ...)                                                        \
  do {                                                                                     \
    if (asr_log_enabled((level), (subsys))) asr_log_write((level), (subsys), __VA_ARGS__); \
  } while (0)

#define asr_error(subsys, ...) ASR_LOG(ASR_LOG_ERROR, subsys, __VA_ARGS__)
#define asr_warn(subsys, ...) ASR_LOG(ASR_LOG_WARN, subsys, __VA_ARGS__)
#define asr_info(subsys, ...) ASR_LOG(ASR_LOG_INFO, subsys, __VA_ARGS__)
#define asr_debug(subsys, ...) ASR_LOG(ASR_LOG_DEBUG, subsys, __VA_ARGS__)
#define asr_trace(subsys, ...) ASR_LOG(ASR_LOG_TRACE, subsys, __VA_ARGS__)

#endif /* ASR_LOG_H */
