/*
 * job_util.h -- helpers of the integration tests that drive real asrrun
 * jobs (job_util.c): each case calls setup() first, which gives it a
 * private directory, TMPDIR inside it and an asrd "spy" (ASR_ASRD) whose
 * path tags every process of the case's jobs, so leftovers can be found in
 * /proc; teardown() removes the directory of a case that passed.
 */
#ifndef ASR_JOB_UTIL_H
#define ASR_JOB_UTIL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "asr_test.h"

uint64_t now_ms(void);
void sleep_ms(int ms);
/* A malloc'd printf (never NULL: the harness has nothing to recover with). */
char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
/* path under the build directory */
const char *bin(const char *rel);
/* The whole file, NUL-terminated (its length in *lenp), or NULL. */
char *read_file(const char *path, size_t *lenp);
void write_file(const char *path, const char *text, mode_t mode);
int exists(const char *path);
/* Splits s (modified) into lines; returns a malloc'd array and the count. */
char **split_lines(char *s, int *n);
/* "[r] rest": returns r and points *rest after the tag, or -1. */
int tag_of(const char *line, const char **rest);
int count_substr(const char *hay, const char *needle);
const char *my_hostname(void);

/* The case's private world. */
typedef struct {
  const char *dir;            /* asr_test_tmpdir() */
  const char *spy;            /* the ASR_ASRD script */
  const char *spied;          /* touched when a daemon starts */
  char envtag[PATH_MAX + 16]; /* "ASR_ASRD=<spy>": in every process of this case's jobs */
} job_world_t;
extern job_world_t W;

void setup(void);
void teardown(void);
/* Whether environ of pid holds the exact entry tag. */
int environ_has(pid_t pid, const char *tag);
/* Live processes of this case's jobs (or of those carrying tag); pids to pids[]. */
int job_processes(const char *tag, pid_t *pids, int max);
/* "pid 'cmdline'" */
char *describe(pid_t pid);

/* Asserts that, within wait_ms, no process of the case's jobs remains. */
#define ASSERT_NO_LEFTOVERS(tag, wait_ms) assert_no_leftovers(__FILE__, __LINE__, (tag), (wait_ms))
void assert_no_leftovers(const char *file, int line, const char *tag, int wait_ms);
/* Asserts that asrd's PMIx directory under TMPDIR was removed. */
void assert_tmpdir_clean(void);

/* A job refused before it starts leaves nothing behind. asrrun may have
 * started this host's asrd ahead of reading its configuration (its early
 * local daemon), but then it stopped it and reaped it before exiting: no
 * process and no PMIx directory remain, right away. */
#define ASSERT_STARTED_NOTHING()  \
  do {                            \
    ASSERT_NO_LEFTOVERS(NULL, 0); \
    assert_tmpdir_clean();        \
  } while (0)

/* --- running asrrun --- */

enum { IN_NULL, IN_PIPE, IN_CLOSED };

typedef struct {
  pid_t pid;
  int in_fd, out_fd, err_fd;
  char *out, *err;
  size_t outlen, errlen, outcap, errcap;
  int exited, status, code; /* code: exit status, or 128+signal */
  uint64_t t0, ms;
} job_t;

/* Starts asrrun with argv (argv[0] is filled in) and stdin as asked. */
void job_start(job_t *j, int in_mode, const char *const *args);
/* Reads whatever is there within ms; notes asrrun's exit. */
void job_pump(job_t *j, int ms);
void job_fail(const char *file, int line, job_t *j, const char *why) __attribute__((noreturn));
int job_finish(const char *file, int line, job_t *j, int timeout_ms);
void job_wait_lines(const char *file, int line, job_t *j, int n, int timeout_ms);
/* The pid of asrrun's asrd child (comm "asrd"), waiting up to ms. */
pid_t find_asrd(pid_t asrrun, int ms);
/* A unique value for -x ASRT_MARK=... */
const char *new_marker(void);

#define JOB_FAIL(j, ...) job_fail(__FILE__, __LINE__, (j), fmt(__VA_ARGS__))
#define JOB_FINISH(j, ms) job_finish(__FILE__, __LINE__, (j), (ms))
#define JOB_WAIT_LINES(j, n, ms) job_wait_lines(__FILE__, __LINE__, (j), (n), (ms))
#define RUN(j, ms, ...)                              \
  do {                                               \
    const char *const args_[] = {__VA_ARGS__, NULL}; \
    job_start((j), IN_NULL, args_);                  \
    JOB_FINISH((j), (ms));                           \
  } while (0)
#define ASSERT_CODE(j, want)                                                                    \
  do {                                                                                          \
    if ((j)->code != (want)) JOB_FAIL((j), "asrrun exited %d, expected %d", (j)->code, (want)); \
  } while (0)
#define ASSERT_JOB(j, cond)                          \
  do {                                               \
    if (!(cond)) JOB_FAIL((j), "ASSERT(%s)", #cond); \
  } while (0)
#endif /* ASR_JOB_UTIL_H */
