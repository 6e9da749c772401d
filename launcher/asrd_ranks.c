/*
 * asrd_ranks.c -- the local ranks: environment, hwloc binding, fork/exec,
 * output capture (whole lines only), stdin for rank 0, reaping and signals.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_log.h"
#include "asrd.h"
#include "job_config.h"

#define LINE_MAX_BYTES 65536 /* a longer "line" is sent in pieces */

extern char **environ;

static hwloc_topology_t topo;
static int topo_loaded;

static hwloc_obj_type_t bind_type(int bind_to) {
  switch (bind_to) {
    case ASR_BIND_CORE: return HWLOC_OBJ_CORE;
    case ASR_BIND_NUMA: return HWLOC_OBJ_NUMANODE;
    case ASR_BIND_PACKAGE: return HWLOC_OBJ_PACKAGE;
    default: return HWLOC_OBJ_MACHINE;
  }
}

static const char *bind_name(int bind_to) {
  switch (bind_to) {
    case ASR_BIND_CORE: return "core";
    case ASR_BIND_NUMA: return "numa";
    case ASR_BIND_PACKAGE: return "package";
    default: return "none";
  }
}

/* The cpuset for local rank `local` (round robin over the objects), or NULL. */
static hwloc_const_cpuset_t pick_cpuset(int bind_to, int local, int *obj_index) {
  if (bind_to == ASR_BIND_NONE) return NULL;
  if (!topo_loaded) {
    if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) return NULL;
    topo_loaded = 1;
  }
  int n = hwloc_get_nbobjs_by_type(topo, bind_type(bind_to));
  if (n <= 0) { /* e.g. no NUMA objects: fall back to the whole machine */
    *obj_index = 0;
    return hwloc_topology_get_topology_cpuset(topo);
  }
  hwloc_obj_t o = hwloc_get_obj_by_type(topo, bind_type(bind_to), (unsigned)(local % n));
  *obj_index = (int)o->logical_index;
  return o->cpuset;
}

static int env_has_prefix(const char *e, const char *name) {
  size_t n = strlen(name);
  return strncmp(e, name, n) == 0 && e[n] == '=';
}

/* Builds the rank's environment: ours, minus what we set, plus the ASR_*
 * variables, the -x list, and (by the caller) PMIx's. */
static char **build_env(asrd_t *d, asrd_rank_t *r) {
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + (size_t)d->nenv + 32, sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  static const char *const ours[] = {"ASR_RANK",       "ASR_SIZE",
                                     "ASR_LNC",        "ASR_LOCAL_RANK",
                                     "ASR_LOCAL_SIZE", "ASR_BOOTSTRAP_PORT",
                                     "ASR_JOB_SECRET", "ASR_HOSTNAME",
                                     "ASR_KV_SERVER",  "ASR_PROVIDER",
                                     "ASR_IF_ADDR",    "ASR_NUM_HOSTS",
                                     "ASR_HOST_INDEX", NULL};
  for (size_t i = 0; i < n; i++) {
    int skip = strncmp(environ[i], "PMIX_", 5) == 0;
    for (int j = 0; ours[j] && !skip; j++) skip = env_has_prefix(environ[i], ours[j]);
    for (int j = 0; j < d->nenv && !skip; j++) skip = env_has_prefix(environ[i], d->env_names[j]);
    if (!skip) env[k++] = strdup(environ[i]);
  }
  char tmp[1200];
#define SETENV(fmt, ...)                         \
  do {                                           \
    snprintf(tmp, sizeof tmp, fmt, __VA_ARGS__); \
    env[k++] = strdup(tmp);                      \
  } while (0)
  SETENV("ASR_RANK=%d", r->rank);
  SETENV("ASR_SIZE=%d", d->nranks);
  SETENV("ASR_LNC=%d", r->lnc);
  SETENV("ASR_LOCAL_RANK=%d", r->local);
  SETENV("ASR_LOCAL_SIZE=%d", d->nlocal);
  SETENV("ASR_BOOTSTRAP_PORT=%d", d->port);
  SETENV("ASR_JOB_SECRET=%s", d->secret_hex);
  SETENV("ASR_HOSTNAME=%s", d->hostname);
  SETENV("ASR_KV_SERVER=%s", "external");
  SETENV("ASR_NUM_HOSTS=%d", d->nhosts);
  SETENV("ASR_HOST_INDEX=%d", d->host_index);
  if (d->provider && *d->provider) SETENV("ASR_PROVIDER=%s", d->provider);
  if (d->if_addr && *d->if_addr) SETENV("ASR_IF_ADDR=%s", d->if_addr);
  for (int j = 0; j < d->nenv; j++) SETENV("%s=%s", d->env_names[j], d->env_values[j]);
#undef SETENV
  env[k] = NULL;
  return env;
}

static void free_env(char **env) {
  if (!env) return;
  for (char **e = env; *e; e++) free(*e);
  free(env);
}

static int pipe_nb(int p[2]) {
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  return 0;
}

/* Forks one rank. Its stdout/stderr go to pipes we read; rank 0's stdin is a
 * pipe fed from asrrun, everyone else's is /dev/null. */
static int start_rank(asrd_t *d, asrd_rank_t *r, char *errbuf, size_t errlen) {
  char **env = build_env(d, r);
  if (!env || asrd_pmix_setup_rank(d, r, &env) != 0) {
    free_env(env);
    snprintf(errbuf, errlen, "cannot prepare the environment of rank %d", r->rank);
    return -1;
  }
  int op[2], ep[2], ip[2] = {-1, -1};
  if (pipe_nb(op) || pipe_nb(ep) || (r->rank == 0 && pipe2(ip, O_CLOEXEC) != 0)) {
    free_env(env);
    snprintf(errbuf, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  int obj = -1;
  hwloc_const_cpuset_t set = pick_cpuset(d->bind_to, r->local, &obj);
  if (d->report_bindings) {
    char line[512], cpus[256] = "all";
    if (set) hwloc_bitmap_list_snprintf(cpus, sizeof cpus, set);
    int n = d->bind_to == ASR_BIND_NONE
                ? snprintf(line, sizeof line, "asrrun: rank %d (host %s, lnc %d) not bound", r->rank,
                           d->hostname, r->lnc)
                : snprintf(line, sizeof line, "asrrun: rank %d (host %s, lnc %d) bound to %s %d: cpus %s",
                           r->rank, d->hostname, r->lnc, bind_name(d->bind_to), obj, cpus);
    asrd_send_output(d, r->rank, 2, line, (size_t)n);
  }
  const char **argv = calloc((size_t)d->nargs + 2, sizeof *argv);
  argv[0] = d->program;
  for (int i = 0; i < d->nargs; i++) argv[i + 1] = d->args[i];
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0); /* its own group: a signal reaches whatever it started too */
    /* If asrd dies (even by SIGKILL) its ranks must not outlive it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    dup2(op[1], 1);
    dup2(ep[1], 2);
    if (ip[0] >= 0) {
      dup2(ip[0], 0);
    } else {
      int nul = open("/dev/null", O_RDONLY);
      if (nul >= 0) dup2(nul, 0);
    }
    if (set && hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) != 0)
      fprintf(stderr, "asrrun: warning: cannot bind rank %d: %s\n", r->rank, strerror(errno));
    execvpe(d->program, (char *const *)argv, env);
    fprintf(stderr, "asrrun: cannot execute '%s' on host %s: %s\n", d->program, d->hostname, strerror(errno));
    _exit(127);
  }
  free(argv);
  free_env(env);
  close(op[1]);
  close(ep[1]);
  if (ip[0] >= 0) close(ip[0]);
  if (pid < 0) {
    close(op[0]);
    close(ep[0]);
    if (ip[1] >= 0) close(ip[1]);
    snprintf(errbuf, errlen, "fork: %s", strerror(errno));
    return -1;
  }
  setpgid(pid, pid);
  r->pid = pid;
  r->out_fd = op[0];
  r->err_fd = ep[0];
  r->in_fd = ip[1];
  if (r->in_fd >= 0) fcntl(r->in_fd, F_SETFL, O_NONBLOCK);
  asrd_watch(d, r->out_fd, EPOLLIN);
  asrd_watch(d, r->err_fd, EPOLLIN);
  d->nalive++;
  return 0;
}

int asrd_ranks_start(asrd_t *d, char *errbuf, size_t errlen) {
  for (int i = 0; i < d->nlocal; i++) {
    d->ranks[i].out_fd = d->ranks[i].err_fd = d->ranks[i].in_fd = -1;
  }
  for (int i = 0; i < d->nlocal; i++)
    if (start_rank(d, &d->ranks[i], errbuf, errlen) != 0) return -1;
  return 0;
}

/* Sends every whole line in part (and, at EOF, the remainder). */
static void emit_lines(asrd_t *d, asrd_rank_t *r, int stream, asr_buf_t *part, int eof) {
  for (;;) {
    uint8_t *s = part->data + part->off;
    size_t n = part->len - part->off;
    uint8_t *nl = n ? memchr(s, '\n', n) : NULL;
    size_t take;
    if (nl)
      take = (size_t)(nl - s) + 1;
    else if (n >= LINE_MAX_BYTES || (eof && n > 0))
      take = n;
    else
      break;
    size_t len = take;
    if (len && s[len - 1] == '\n') len--;
    asrd_send_output(d, r->rank, stream, (const char *)s, len);
    part->off += take;
  }
  if (part->off == part->len) part->off = part->len = 0;
}

static void close_stream(asrd_t *d, int *fd) {
  if (*fd < 0) return;
  asrd_unwatch(d, *fd);
  close(*fd);
  *fd = -1;
}

/* Reads what a rank wrote on fd. */
static void read_stream(asrd_t *d, asrd_rank_t *r, int stream) {
  int *fd = stream == 1 ? &r->out_fd : &r->err_fd;
  asr_buf_t *part = stream == 1 ? &r->out_part : &r->err_part;
  for (;;) {
    uint8_t buf[16384];
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n > 0) {
      asr_buf_put(part, buf, (size_t)n);
      emit_lines(d, r, stream, part, 0);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    emit_lines(d, r, stream, part, 1); /* EOF: the last partial line */
    close_stream(d, fd);
    return;
  }
}

static void flush_stdin(asrd_t *d, asrd_rank_t *r) {
  while (r->in_fd >= 0 && r->in_queue.len > r->in_queue.off) {
    ssize_t n = write(r->in_fd, r->in_queue.data + r->in_queue.off, r->in_queue.len - r->in_queue.off);
    if (n > 0) {
      r->in_queue.off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EAGAIN) {
      asrd_watch(d, r->in_fd, EPOLLOUT);
      return;
    }
    close_stream(d, &r->in_fd); /* the rank closed its stdin */
    return;
  }
  r->in_queue.off = r->in_queue.len = 0;
  if (r->in_fd >= 0) asrd_unwatch(d, r->in_fd);
  if (r->in_eof) close_stream(d, &r->in_fd);
}

void asrd_ranks_stdin(asrd_t *d, const uint8_t *p, size_t n) {
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    if (r->rank != 0) continue;
    if (n == 0)
      r->in_eof = 1;
    else if (r->in_fd >= 0)
      asr_buf_put(&r->in_queue, p, n);
    flush_stdin(d, r);
  }
}

/* Sends EXIT for ranks whose process is gone and whose output is drained. A
 * rank that failed is reported at once even if a descendant still holds its
 * output open: otherwise nobody learns of the failure, the job is never
 * aborted, and that descendant is never killed. */
static void report_exits(asrd_t *d) {
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    int failed = !(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0);
    if (!r->exited || r->exit_sent || (!failed && (r->out_fd >= 0 || r->err_fd >= 0))) continue;
    asr_buf_t b = {0};
    asr_buf_put_u32(&b, (uint32_t)r->rank);
    asr_buf_put_u32(&b, (uint32_t)r->status);
    asr_ctl_send(&d->ctl, ASR_CTL_EXIT, &b);
    asr_buf_free(&b);
    r->exit_sent = 1;
  }
}

void asrd_ranks_on_fd(asrd_t *d, int fd, uint32_t events) {
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    if (fd == r->out_fd)
      read_stream(d, r, 1);
    else if (fd == r->err_fd)
      read_stream(d, r, 2);
    else if (fd == r->in_fd && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
      flush_stdin(d, r);
    else
      continue;
    break;
  }
  report_exits(d);
}

void asrd_ranks_reap(asrd_t *d) {
  for (;;) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid <= 0) break;
    for (int i = 0; i < d->nlocal; i++) {
      asrd_rank_t *r = &d->ranks[i];
      if (r->pid != pid || r->exited) continue;
      r->exited = 1;
      r->status = st;
      d->nalive--;
      /* Its output may still sit in the pipes: drain what is there now. A
       * descendant that keeps a pipe open delays the EXIT until it is gone. */
      if (r->out_fd >= 0) read_stream(d, r, 1);
      if (r->err_fd >= 0) read_stream(d, r, 2);
      close_stream(d, &r->in_fd);
    }
  }
  report_exits(d);
}

void asrd_ranks_signal(asrd_t *d, int sig) {
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    if (r->pid <= 0) continue;
    /* The group outlives its leader while anything the rank started is alive
     * (and its id cannot be reused until then): signal it even after the
     * rank itself exited, or such descendants are never killed. */
    kill(-r->pid, sig);
    if (!r->exited) kill(r->pid, sig);
  }
}

int asrd_ranks_all_done(asrd_t *d) {
  for (int i = 0; i < d->nlocal; i++)
    if (!d->ranks[i].exit_sent || d->ranks[i].out_fd >= 0 || d->ranks[i].err_fd >= 0) return 0;
  return 1;
}
