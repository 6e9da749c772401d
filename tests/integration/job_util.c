/*
 * job_util.c -- what the integration tests share: a case's private world
 * (tmpdir, TMPDIR, the asrd spy), starting asrrun and collecting what it
 * prints, and the checks that nothing of a job is left behind.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "asr_fs.h"
#include "job_util.h"

/* --- small utilities ------------------------------------------------------------ */

uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* A malloc'd printf (never NULL: the harness has nothing to recover with). */
char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  char *s = NULL;
  if (vasprintf(&s, f, ap) < 0) asr_test_fail(__FILE__, __LINE__, "out of memory");
  va_end(ap);
  return s;
}

const char *bin(const char *rel) { return fmt("%s/%s", asr_test_builddir(), rel); }

char *read_file(const char *path, size_t *lenp) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  size_t cap = 4096, len = 0;
  char *s = malloc(cap);
  for (;;) {
    if (len + 1 >= cap) s = realloc(s, cap *= 2);
    ssize_t n = read(fd, s + len, cap - len - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(fd);
  s[len] = '\0';
  if (lenp) *lenp = len;
  return s;
}

void write_file(const char *path, const char *text, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  ASSERT_MSG(fd >= 0, "cannot create %s: %s", path, strerror(errno));
  ASSERT_EQ(write(fd, text, strlen(text)), (long long)strlen(text));
  close(fd);
}

int exists(const char *path) { return access(path, F_OK) == 0; }

/* Splits s (modified) into lines; returns a malloc'd array and the count. */
char **split_lines(char *s, int *n) {
  int cap = 64, k = 0;
  char **v = malloc((size_t)cap * sizeof *v);
  char *p = s;
  while (*p) {
    char *nl = strchr(p, '\n');
    if (k == cap) v = realloc(v, (size_t)(cap *= 2) * sizeof *v);
    v[k++] = p;
    if (!nl) break;
    *nl = '\0';
    p = nl + 1;
  }
  *n = k;
  return v;
}

/* "[r] rest": returns r and points *rest after the tag, or -1. */
int tag_of(const char *line, const char **rest) {
  if (line[0] != '[' || !isdigit((unsigned char)line[1])) return -1;
  char *end;
  long r = strtol(line + 1, &end, 10);
  if (end[0] != ']' || end[1] != ' ') return -1;
  if (rest) *rest = end + 2;
  return (int)r;
}

int count_substr(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

const char *my_hostname(void) {
  static char host[256];
  if (!host[0]) gethostname(host, sizeof host - 1);
  return host;
}

/* --- the case's private world: tmpdir, TMPDIR, the asrd spy ---------------------- */

job_world_t W;

void setup(void) {
  W.dir = asr_test_tmpdir();
  const char *tmp = fmt("%s/tmp", W.dir);
  ASSERT(mkdir(tmp, 0700) == 0);
  setenv("TMPDIR", tmp, 1);
  W.spy = fmt("%s/asrd-spy.sh", W.dir);
  W.spied = fmt("%s/asrd-started", W.dir);
  write_file(W.spy, fmt("#!/bin/sh\ntouch '%s'\nexec '%s' \"$@\"\n", W.spied, bin("bin/asrd")), 0755);
  setenv("ASR_ASRD", W.spy, 1);
  snprintf(W.envtag, sizeof W.envtag, "ASR_ASRD=%s", W.spy);
  /* Sanitizer builds: libpmix frees little of what it allocates (even inside
   * PMIx_server_init and on its own thread); every other leak of asrrun, asrd
   * or an app is still reported, and any report fails the case (job_finish). */
  const char *supp = fmt("%s/lsan.supp", W.dir);
  write_file(supp, "leak:libpmix.so\n", 0644);
  const char *lsan = getenv("LSAN_OPTIONS");
  setenv("LSAN_OPTIONS",
         fmt("%s%ssuppressions=%s:print_suppressions=0", lsan ? lsan : "", lsan && *lsan ? ":" : "", supp),
         1);
  /* a clean slate: no launcher environment leaks into the jobs */
  unsetenv("ASR_RANK");
  unsetenv("ASR_SIZE");
  unsetenv("ASR_JOB_SECRET");
}

/* A case that passed removes its private directory (a failed one keeps it). */
void teardown(void) {
  if (W.dir) asr_rm_tree(W.dir);
}

/* Whether environ of pid holds the exact entry tag. */
int environ_has(pid_t pid, const char *tag) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  size_t len = 0;
  char *env = read_file(path, &len);
  if (!env) return 0;
  int found = 0;
  for (size_t off = 0; off < len && !found; off += strlen(env + off) + 1) found = strcmp(env + off, tag) == 0;
  free(env);
  return found;
}

/* Live processes (zombies read as an empty environ) of this case's jobs, or
 * of those that carry the entry tag; their pids go to pids[]. */
int job_processes(const char *tag, pid_t *pids, int max) {
  DIR *d = opendir("/proc");
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    pid_t pid = (pid_t)atoi(e->d_name);
    if (pid == getpid()) continue;
    if (environ_has(pid, tag ? tag : W.envtag)) {
      if (n < max) pids[n] = pid;
      n++;
    }
  }
  closedir(d);
  return n;
}

char *describe(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
  size_t len = 0;
  char *s = read_file(path, &len);
  if (!s) return fmt("%d (gone)", (int)pid);
  for (size_t i = 0; i + 1 < len; i++)
    if (s[i] == '\0') s[i] = ' ';
  char *r = fmt("%d '%s'", (int)pid, s);
  free(s);
  return r;
}

/* Asserts that, within wait_ms, no process of the case's jobs remains. */
void assert_no_leftovers(const char *file, int line, const char *tag, int wait_ms) {
  uint64_t until = now_ms() + (uint64_t)wait_ms;
  pid_t pids[16];
  int n;
  while ((n = job_processes(tag, pids, 16)) > 0 && now_ms() < until) sleep_ms(20);
  if (n == 0) return;
  char *first = describe(pids[0]);
  /* clean up after ourselves before failing: they are this case's processes */
  for (int i = 0; i < n && i < 16; i++) kill(pids[i], SIGKILL);
  asr_test_fail(file, line, "%d process(es) of the job are left behind, e.g. %s", n, first);
}

/* Asserts that asrd's PMIx directory under TMPDIR was removed. */
void assert_tmpdir_clean(void) {
  const char *tmp = getenv("TMPDIR");
  DIR *d = opendir(tmp);
  ASSERT(d);
  struct dirent *e;
  while ((e = readdir(d)))
    ASSERT_MSG(strncmp(e->d_name, "asrd.", 5) != 0, "asrd left %s/%s behind", tmp, e->d_name);
  closedir(d);
}

/* --- running asrrun ----------------------------------------------------------------- */

/* Starts asrrun with argv (argv[0] is filled in) and stdin as asked. */
void job_start(job_t *j, int in_mode, const char *const *args) {
  memset(j, 0, sizeof *j);
  int n = 0;
  while (args[n]) n++;
  char **argv = calloc((size_t)n + 2, sizeof *argv);
  argv[0] = (char *)bin("bin/asrrun");
  for (int i = 0; i < n; i++) argv[i + 1] = (char *)args[i];
  int ip[2] = {-1, -1}, op[2], ep[2];
  ASSERT(pipe2(op, O_CLOEXEC) == 0 && pipe2(ep, O_CLOEXEC) == 0);
  if (in_mode == IN_PIPE) ASSERT(pipe2(ip, O_CLOEXEC) == 0);
  fflush(NULL);
  j->t0 = now_ms();
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    dup2(op[1], 1);
    dup2(ep[1], 2);
    if (in_mode == IN_PIPE)
      dup2(ip[0], 0);
    else if (in_mode == IN_CLOSED)
      close(0);
    else {
      int nul = open("/dev/null", O_RDONLY);
      dup2(nul, 0);
      if (nul > 0) close(nul);
    }
    signal(SIGPIPE, SIG_DFL);
    execv(argv[0], argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(126);
  }
  free(argv);
  close(op[1]);
  close(ep[1]);
  if (ip[0] >= 0) close(ip[0]);
  j->pid = pid;
  j->in_fd = ip[1];
  j->out_fd = op[0];
  j->err_fd = ep[0];
  fcntl(j->out_fd, F_SETFL, O_NONBLOCK);
  fcntl(j->err_fd, F_SETFL, O_NONBLOCK);
  j->out = calloc(1, j->outcap = 65536);
  j->err = calloc(1, j->errcap = 4096);
}

static void append(char **buf, size_t *len, size_t *cap, int *fd) {
  for (;;) {
    if (*len + 16384 + 1 > *cap) *buf = realloc(*buf, *cap *= 2);
    ssize_t n = read(*fd, *buf + *len, *cap - *len - 1);
    if (n > 0) {
      *len += (size_t)n;
      (*buf)[*len] = '\0';
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    close(*fd);
    *fd = -1;
    return;
  }
}

/* Reads whatever is there within ms; notes asrrun's exit. */
void job_pump(job_t *j, int ms) {
  struct pollfd p[2] = {{.fd = j->out_fd, .events = POLLIN}, {.fd = j->err_fd, .events = POLLIN}};
  if (j->out_fd >= 0 || j->err_fd >= 0)
    poll(p, 2, ms);
  else
    sleep_ms(ms);
  if (j->out_fd >= 0) append(&j->out, &j->outlen, &j->outcap, &j->out_fd);
  if (j->err_fd >= 0) append(&j->err, &j->errlen, &j->errcap, &j->err_fd);
  if (!j->exited && waitpid(j->pid, &j->status, WNOHANG) == j->pid) {
    j->exited = 1;
    j->ms = now_ms() - j->t0;
    j->code = WIFEXITED(j->status) ? WEXITSTATUS(j->status) : 128 + WTERMSIG(j->status);
  }
}

void job_fail(const char *file, int line, job_t *j, const char *why) {
  const char *o = j->outlen > 1500 ? j->out + j->outlen - 1500 : j->out;
  const char *e = j->errlen > 1500 ? j->err + j->errlen - 1500 : j->err;
  fprintf(stderr, "---- asrrun stdout (tail) ----\n%s\n---- asrrun stderr (tail) ----\n%s\n----\n", o, e);
  pid_t pids[16];
  int n = job_processes(NULL, pids, 16);
  for (int i = 0; i < n && i < 16; i++) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pids[i]);
    char *st = read_file(path, NULL);
    fprintf(stderr, "job process %s: %.60s\n", describe(pids[i]), st ? st : "?");
  }
  asr_test_fail(file, line, "%s", why);
}

/* Runs the job to its end (asrrun exited and its output closed). */
int job_finish(const char *file, int line, job_t *j, int timeout_ms) {
  uint64_t until = now_ms() + (uint64_t)timeout_ms;
  if (j->in_fd >= 0) {
    close(j->in_fd);
    j->in_fd = -1;
  }
  while (!j->exited && now_ms() < until) job_pump(j, 20);
  if (!j->exited) {
    kill(j->pid, SIGKILL);
    waitpid(j->pid, &j->status, 0);
    job_fail(file, line, j, fmt("asrrun did not finish within %d ms", timeout_ms));
  }
  /* asrd inherits asrrun's stdout/stderr: EOF comes when it is gone too */
  uint64_t eof_until = now_ms() + 5000;
  while ((j->out_fd >= 0 || j->err_fd >= 0) && now_ms() < eof_until) job_pump(j, 20);
  if (j->out_fd >= 0 || j->err_fd >= 0)
    job_fail(file, line, j,
             fmt("asrrun exited (%d) but something still holds its output open 5 s later", j->code));
  if (strstr(j->err, "Sanitizer") || strstr(j->err, "runtime error:"))
    job_fail(file, line, j, fmt("a sanitizer reported an error in asrrun, asrd or a rank"));
  return j->code;
}

/* Pumps until stdout holds at least n lines. */
void job_wait_lines(const char *file, int line, job_t *j, int n, int timeout_ms) {
  uint64_t until = now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    int k = 0;
    for (size_t i = 0; i < j->outlen; i++) k += j->out[i] == '\n';
    if (k >= n) return;
    if (j->exited && j->out_fd < 0)
      job_fail(file, line, j, fmt("asrrun ended (%d) after %d of %d lines", j->code, k, n));
    if (now_ms() >= until) {
      kill(j->pid, SIGKILL);
      job_fail(file, line, j, fmt("only %d of %d lines within %d ms", k, n, timeout_ms));
    }
    job_pump(j, 20);
  }
}

/* Runs asrrun to its end with stdin on /dev/null. */

/* The pid of asrrun's asrd child (comm "asrd"), waiting up to ms. */
pid_t find_asrd(pid_t asrrun, int ms) {
  uint64_t until = now_ms() + (uint64_t)ms;
  do {
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;
    while (d && (e = readdir(d)) && !found) {
      if (!isdigit((unsigned char)e->d_name[0])) continue;
      char path[64];
      snprintf(path, sizeof path, "/proc/%d/stat", atoi(e->d_name));
      char *st = read_file(path, NULL);
      if (!st) continue;
      char *rp = strrchr(st, ')');
      int ppid = 0;
      if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == asrrun && strstr(st, "(asrd)"))
        found = atoi(e->d_name);
      free(st);
    }
    if (d) closedir(d);
    if (found) return found;
    sleep_ms(10);
  } while (now_ms() < until);
  return 0;
}

/* A unique value for -x ASRT_MARK=... */
const char *new_marker(void) {
  static int seq;
  return fmt("ASRT_MARK=m%d.%d.%llx", (int)getpid(), ++seq, (unsigned long long)now_ms());
}
