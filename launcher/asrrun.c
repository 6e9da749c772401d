/*
 * asrrun -- the job launcher's front end.
 *
 *   asrrun -n N [options] PROGRAM [ARGS]      asrrun -f job.yaml
 *
 * It reads the configuration (job_config.h), maps ranks onto hosts (map.h),
 * starts one asrd per host through a launch backend (launch.h), hands each
 * daemon the job over the control channel (ctl.h), prints the ranks' output
 * line by line, routes fences between daemons, forwards signals and stdin,
 * and decides the exit code.
 *
 * Exit codes (also in asrrun --help and the README):
 *   0        every rank exited 0
 *   1..123   the first rank that failed exited with this status (or called
 *            PMIx_Abort/asr abort with it; an abort with status 0 gives 1)
 *   124      --timeout expired
 *   125      the launch failed or a daemon died
 *   127      the program was not found
 *   128+S    the first rank that failed was killed by signal S, or asrrun
 *            itself got signal S (SIGINT: 130, SIGTERM: 143)
 *   2        bad command line or configuration
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_rand.h"
#include "asr_sock.h"
#include "asr_time.h"
#include "ctl.h"
#include "kv_secret.h"
#include "alloc.h"
#include "asrd_dir.h"
#include "launch.h"
#include "map.h"

#define GRACE_MS 3000
#define HEARTBEAT_MS 1000
#define EXIT_TIMEOUT 124
#define EXIT_LAUNCH 125
#define EXIT_NOTFOUND 127
#define EXIT_USAGE 2

typedef struct {
  asr_ctl_conn_t conn; /* fd -1 until it calls back */
  pid_t pid;           /* local process that represents it */
  int nlocal;
  int hello, started, done, gone;
  uint8_t *fence_blob;
  size_t fence_len;
  int fence_in;
  pid_t *pgids; /* its ranks' process groups (from STARTED) */
  int npgids;
  int local;        /* forked on this host (else started through the rsh agent) */
  uint64_t last_rx; /* when it was last heard from (heartbeats included) */
} daemon_t;

typedef struct {
  int exited;
  int status;
  int out_fd[3]; /* --output-dir files (stdout, stderr) */
} rank_t;

static asr_config_t cfg;
static asr_map_t map;
static daemon_t *daemons;
static rank_t *ranks;
static int epfd, sigfd, lfd;
static char secret_hex[ASR_KV_SECRET_HEX_LEN + 1];
static char nspace[64];
static int port;
static int exit_code = -1; /* decided at the first failure */
static int aborting;       /* KILL(SIGTERM) sent */
static uint64_t kill_at;   /* when to escalate to SIGKILL */
static int interrupts;
static int stdin_open = 1;
static int ranks_exited;
static uint64_t deadline_ms;
static uint64_t giveup_at; /* after SIGKILL: stop waiting for the daemons */

/* This host's asrd, started before the configuration is read (early_start). */
static struct {
  pid_t pid;      /* > 0: started and not reaped yet (once adopted, also daemons[index].pid) */
  int lfd;        /* the listener it calls back to (127.0.0.1), -1 once closed or taken over */
  uint16_t port;  /* that listener's port */
  int bport;      /* the bootstrap port it holds while it starts (the job's unless one is configured) */
  char host[128]; /* the host name it was given: this host's */
  int index;      /* the host it serves once adopted, else -1 */
} early = {0, -1, 0, 0, "", -1};

static void kill_all(int sig) {
  asr_buf_t b = {0};
  asr_buf_put_u32(&b, (uint32_t)sig);
  for (int h = 0; h < map.nhosts; h++)
    if (daemons[h].conn.fd >= 0 && !daemons[h].gone) asr_ctl_send(&daemons[h].conn, ASR_CTL_KILL, &b);
  asr_buf_free(&b);
}

/* Ends the job: the first caller decides the exit code and prints why. */
static void abort_job(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void abort_job(int code, const char *fmt, ...) {
  if (exit_code < 0) {
    exit_code = code;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "asrrun: %s\n", msg);
  }
  if (!aborting) {
    aborting = 1;
    kill_all(SIGTERM);
    kill_at = asr_time_ms() + GRACE_MS;
  }
}

static void watch(int fd, uint32_t ev, void *ptr) {
  struct epoll_event e = {.events = ev, .data.ptr = ptr};
  if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &e) != 0) epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e);
}

static char sig_tag, lfd_tag, early_lfd_tag, stdin_tag;

/* --- output ---------------------------------------------------------------- */

static int open_rank_file(int rank, int stream) {
  char dir[PATH_MAX], path[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/rank.%d", cfg.output_dir, rank);
  mkdir(cfg.output_dir, 0755);
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/%s", dir, stream == 1 ? "stdout" : "stderr");
  return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644);
}

/* One whole line, written with one write() so lines never interleave. */
static void print_line(int rank, int stream, const uint8_t *s, size_t n) {
  char *buf = malloc(n + 32);
  if (!buf) return;
  size_t k = 0;
  if (cfg.tag_output) k = (size_t)snprintf(buf, 32, "[%d] ", rank);
  memcpy(buf + k, s, n);
  k += n;
  buf[k++] = '\n';
  int fds[2] = {stream == 1 ? 1 : 2, -1};
  if (cfg.output_dir[0] && rank >= 0 && rank < map.nranks) {
    /* "also write each rank's output under DIR": the terminal keeps it too */
    rank_t *r = &ranks[rank];
    if (r->out_fd[stream] <= 0) r->out_fd[stream] = open_rank_file(rank, stream);
    if (r->out_fd[stream] > 0) fds[1] = r->out_fd[stream];
  }
  for (int f = 0; f < 2 && fds[f] >= 0; f++) {
    size_t off = 0;
    while (off < k) {
      ssize_t w = write(fds[f], buf + off, k - off);
      if (w > 0)
        off += (size_t)w;
      else if (w < 0 && errno == EINTR)
        continue;
      else
        break;
    }
  }
  free(buf);
}

/* --- the job message --------------------------------------------------------- */

static void send_job(int h) {
  asr_buf_t b = {0};
  asr_buf_put_u32(&b, (uint32_t)map.nranks);
  asr_buf_put_u32(&b, (uint32_t)map.nhosts);
  asr_buf_put_u32(&b, (uint32_t)h);
  for (int i = 0; i < map.nhosts; i++) asr_buf_put_str(&b, map.host_names[i]);
  for (int r = 0; r < map.nranks; r++) {
    asr_buf_put_u32(&b, (uint32_t)map.ranks[r].host);
    asr_buf_put_u32(&b, (uint32_t)map.ranks[r].lnc);
  }
  asr_buf_put_str(&b, cfg.program);
  asr_buf_put_u32(&b, (uint32_t)cfg.nargs);
  for (int i = 0; i < cfg.nargs; i++) asr_buf_put_str(&b, cfg.args[i]);
  int nenv = 0;
  for (int i = 0; i < cfg.nenv; i++)
    if (cfg.env[i].has_value || getenv(cfg.env[i].name)) nenv++;
  asr_buf_put_u32(&b, (uint32_t)nenv);
  for (int i = 0; i < cfg.nenv; i++) {
    const char *v = cfg.env[i].has_value ? cfg.env[i].value : getenv(cfg.env[i].name);
    if (!v) continue;
    asr_buf_put_str(&b, cfg.env[i].name);
    asr_buf_put_str(&b, v);
  }
  asr_buf_put_u32(&b, (uint32_t)cfg.bind_to);
  asr_buf_put_u32(&b, (uint32_t)cfg.report_bindings);
  asr_buf_put_u32(&b, (uint32_t)port);
  const char *prov = cfg.provider[0] ? cfg.provider : map.nhosts > 1 ? "tcp;ofi_rxm" : "shm";
  asr_buf_put_str(&b, prov);
  asr_buf_put_str(&b, nspace);
  /* the spec each asrd resolves on its host ("" = the address it reached us from) */
  asr_buf_put_str(&b, map.nhosts == 1 && !cfg.if_include[0] ? "127.0.0.1" : cfg.if_include);
  asr_buf_put_u32(&b, (uint32_t)cfg.heartbeat_timeout_s);
  asr_ctl_send(&daemons[h].conn, ASR_CTL_JOB, &b);
  asr_buf_free(&b);
}

/* --- control messages ---------------------------------------------------------- */

static void fence_check(void) {
  for (int h = 0; h < map.nhosts; h++)
    if (daemons[h].nlocal > 0 && !daemons[h].fence_in) return;
  asr_buf_t all = {0}, b = {0};
  for (int h = 0; h < map.nhosts; h++)
    if (daemons[h].fence_in) asr_buf_put(&all, daemons[h].fence_blob, daemons[h].fence_len);
  asr_buf_put_u32(&b, 0);
  asr_buf_put_bytes(&b, all.data, all.len);
  for (int h = 0; h < map.nhosts; h++) {
    if (!daemons[h].fence_in) continue;
    asr_ctl_send(&daemons[h].conn, ASR_CTL_FENCE_DONE, &b);
    free(daemons[h].fence_blob);
    daemons[h].fence_blob = NULL;
    daemons[h].fence_len = 0;
    daemons[h].fence_in = 0;
  }
  asr_buf_free(&all);
  asr_buf_free(&b);
}

static int rank_failed_code(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 1;
}

static void on_msg(void *arg, asr_ctl_conn_t *c, int type, const uint8_t *p, size_t len) {
  daemon_t *d = arg;
  int h = (int)(d - daemons);
  (void)c;
  asr_rd_t r;
  asr_rd_init(&r, p, len);
  d->last_rx = asr_time_ms();
  switch (type) {
    case ASR_CTL_HEARTBEAT: break;
    case ASR_CTL_STARTED: {
      d->started = 1;
      uint32_t n = asr_rd_u32(&r);
      if (r.bad || n > (uint32_t)d->nlocal || d->pgids) break;
      d->pgids = calloc(n ? n : 1, sizeof *d->pgids);
      for (uint32_t i = 0; d->pgids && i < n; i++) {
        uint32_t pid = asr_rd_u32(&r);
        if (!r.bad && pid > 1 && pid < (uint32_t)INT32_MAX) d->pgids[d->npgids++] = (pid_t)pid;
      }
      break;
    }
    case ASR_CTL_OUTPUT: {
      int rank = (int)asr_rd_u32(&r), stream = (int)asr_rd_u32(&r);
      size_t n;
      const uint8_t *s = asr_rd_bytes(&r, &n);
      if (!r.bad) print_line(rank, stream == 2 ? 2 : 1, s, n);
      break;
    }
    case ASR_CTL_EXIT: {
      int rank = (int)asr_rd_u32(&r), status = (int)asr_rd_u32(&r);
      if (r.bad || rank < 0 || rank >= map.nranks || ranks[rank].exited) break;
      ranks[rank].exited = 1;
      ranks[rank].status = status;
      ranks_exited++;
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !aborting) {
        int code = rank_failed_code(status);
        if (WIFSIGNALED(status))
          abort_job(code, "rank %d on host %s was killed by signal %d (%s); aborting the job", rank,
                    map.host_names[h], WTERMSIG(status), strsignal(WTERMSIG(status)));
        else if (WEXITSTATUS(status) == 127)
          abort_job(EXIT_NOTFOUND, "rank %d on host %s: program '%s' could not be executed; aborting the job",
                    rank, map.host_names[h], cfg.program);
        else
          abort_job(code, "rank %d on host %s exited with status %d; aborting the job", rank,
                    map.host_names[h], WEXITSTATUS(status));
      }
      break;
    }
    case ASR_CTL_ABORT: {
      int rank = (int)asr_rd_u32(&r), status = (int)asr_rd_u32(&r);
      char *msg = asr_rd_str(&r);
      abort_job(status > 0 && status < 124 ? status : 1, "rank %d on host %s called abort with status %d%s%s",
                rank, map.host_names[h], status, msg && *msg ? ": " : "", msg ? msg : "");
      free(msg);
      break;
    }
    case ASR_CTL_FENCE: {
      (void)asr_rd_u32(&r);
      size_t n;
      const uint8_t *blob = asr_rd_bytes(&r, &n);
      if (r.bad || d->fence_in) {
        abort_job(EXIT_LAUNCH, "asrd on host %s sent a bad fence", map.host_names[h]);
        break;
      }
      d->fence_blob = malloc(n ? n : 1);
      if (n) memcpy(d->fence_blob, blob, n);
      d->fence_len = n;
      d->fence_in = 1;
      fence_check();
      break;
    }
    case ASR_CTL_ERROR: {
      char *msg = asr_rd_str(&r);
      abort_job(EXIT_LAUNCH, "%s", msg ? msg : "a daemon failed");
      free(msg);
      break;
    }
    case ASR_CTL_DONE: d->done = 1; break;
    default:
      abort_job(EXIT_LAUNCH, "asrd on host %s sent an unexpected %s message", map.host_names[h],
                asr_ctl_type_name(type));
  }
}

/* The first message of a new connection must be a HELLO with our secret. */
static void on_hello_msg(void *arg, asr_ctl_conn_t *c, int type, const uint8_t *p, size_t len) {
  (void)arg;
  asr_rd_t r;
  asr_rd_init(&r, p, len);
  if (type != ASR_CTL_HELLO) goto reject;
  uint32_t index_in = asr_rd_u32(&r);
  /* the early local daemon learns its index from the JOB (see early_start) */
  int index = index_in == ASR_CTL_INDEX_AHEAD ? early.index : (int)index_in;
  char *host = asr_rd_str(&r);
  (void)asr_rd_u32(&r);
  char *sec = asr_rd_str(&r);
  int ok = !r.bad && index >= 0 && index < map.nhosts && sec && strcmp(sec, secret_hex) == 0 &&
           daemons[index].conn.fd < 0;
  free(host);
  free(sec);
  if (!ok) goto reject;
  daemons[index].conn = *c;
  daemons[index].hello = 1;
  daemons[index].last_rx = asr_time_ms();
  c->fd = -1; /* ownership moved; stop the caller's loop */
  memset(&c->in, 0, sizeof c->in);
  memset(&c->out, 0, sizeof c->out);
  watch(daemons[index].conn.fd, EPOLLIN, &daemons[index]);
  send_job(index);
  return;
reject:
  asr_warn("asrrun",
           "refused a control connection that did not identify itself as one of this job's daemons");
  c->closed = 1;
}

static void accept_daemon(int listener) {
  int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return;
  /* The HELLO is small: wait for it briefly here (daemons are few). */
  asr_ctl_conn_t c = {.fd = fd};
  uint64_t until = asr_time_ms() + 5000;
  while (c.fd >= 0 && !c.closed && asr_time_ms() < until) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    if (poll(&pf, 1, 100) <= 0) continue;
    asr_ctl_read(&c, on_hello_msg, NULL);
  }
  if (c.fd >= 0) asr_ctl_close(&c);
}

/* --- stdin and signals --------------------------------------------------------- */

static void forward_stdin(void) {
  uint8_t buf[65536];
  ssize_t n = read(0, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  int h0 = map.ranks[0].host;
  asr_buf_t b = {0};
  asr_buf_put_bytes(&b, buf, n > 0 ? (size_t)n : 0);
  if (daemons[h0].conn.fd >= 0) asr_ctl_send(&daemons[h0].conn, ASR_CTL_STDIN, &b);
  asr_buf_free(&b);
  if (n <= 0) {
    epoll_ctl(epfd, EPOLL_CTL_DEL, 0, NULL);
    stdin_open = 0;
  }
}

/* A daemon killed before its ranks ended could not kill them; its ranks die
 * with it (PDEATHSIG), but not what they started. A daemon forked here runs
 * on this host: kill their process groups here. (A remote daemon's pids mean
 * nothing on this host; its ranks die with it.) */
static void daemon_reaped(int h, int st) {
  pid_t pid = daemons[h].pid;
  if (pid == early.pid) early.pid = 0;
  daemons[h].pid = 0;
  if (WIFSIGNALED(st) && !daemons[h].done && daemons[h].local)
    for (int i = 0; i < daemons[h].npgids; i++) kill(-daemons[h].pgids[i], SIGKILL);
  /* A daemon killed here could not remove its PMIx directory; its pid is
   * ours until now (just reaped), so asrd.PID.* are its. */
  if (WIFSIGNALED(st) && daemons[h].local) asrd_dir_remove_of(pid);
}

static void on_msg(void *arg, asr_ctl_conn_t *c, int type, const uint8_t *p, size_t len);

/* Reads what a daemon whose process has ended still sent: until its DONE,
 * the end of the connection, or DRAIN_MS without data. asr_ctl_read returns
 * after a read shorter than its buffer, which does not mean the socket is
 * empty (TCP hands queued data over in pieces), and one such pass could end
 * before the DONE behind 8000 output lines (test_asrrun
 * tagged_output_whole_and_ordered: "asrd on host vm died (status 0) before
 * the job finished"; asrd's ctl_settle fixed the main cause). A local asrd
 * that exited has sent everything and closed its end, so this ends at once;
 * a remote one's launch agent may end before it, hence the bound. */
#define DRAIN_MS 1000
static void drain_daemon(daemon_t *d) {
  uint64_t until = asr_time_ms() + DRAIN_MS;
  while (!d->gone && !d->done) {
    int r = asr_ctl_read(&d->conn, on_msg, d);
    if (r) {
      d->gone = 1;
      epoll_ctl(epfd, EPOLL_CTL_DEL, d->conn.fd, NULL);
      break;
    }
    uint64_t now = asr_time_ms();
    if (d->done || d->conn.fd < 0 || now >= until) break;
    struct pollfd pf = {.fd = d->conn.fd, .events = POLLIN};
    if (poll(&pf, 1, (int)(until - now)) <= 0) break; /* nothing more came */
  }
}

static void on_signal(void) {
  struct signalfd_siginfo si;
  while (read(sigfd, &si, sizeof si) == sizeof si) {
    int sig = (int)si.ssi_signo;
    if (sig == SIGCHLD) {
      int st;
      pid_t pid;
      while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        if (pid == early.pid && early.index < 0) early.pid = 0; /* a dismissed early daemon */
        for (int h = 0; h < map.nhosts; h++)
          if (daemons[h].pid == pid) {
            daemon_reaped(h, st);
            /* A daemon's last messages (DONE among them) may still sit in
             * its socket when its exit is reported: read them first. */
            if (!daemons[h].done && daemons[h].conn.fd >= 0 && !daemons[h].gone) drain_daemon(&daemons[h]);
            if (daemons[h].done || exit_code >= 0) continue;
            if (!daemons[h].local && !daemons[h].hello && cfg.launcher == ASR_LAUNCHER_SLURM)
              abort_job(EXIT_LAUNCH,
                        "the srun step for node %s ended with %s %d before asrd called back; check that "
                        "'srun -N 1 -w %s true' works in this allocation and that asrd is installed there "
                        "(--prefix)",
                        map.host_names[h], WIFSIGNALED(st) ? "signal" : "status",
                        WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), map.host_names[h]);
            else if (!daemons[h].local && !daemons[h].hello)
              abort_job(EXIT_LAUNCH,
                        "the launch agent for host %s (%s) ended with %s %d before asrd called back; check "
                        "that '%s %s true' works and that asrd is installed there (--prefix)",
                        map.host_names[h], cfg.launch_agent, WIFSIGNALED(st) ? "signal" : "status",
                        WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), cfg.launch_agent,
                        map.host_names[h]);
            else
              abort_job(EXIT_LAUNCH, "asrd on host %s died (%s %d) before the job finished",
                        map.host_names[h], WIFSIGNALED(st) ? "signal" : "status",
                        WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
          }
      }
      continue;
    }
    interrupts++;
    if (interrupts == 1) {
      fprintf(stderr, "asrrun: got %s; forwarding it to the job (again to kill at once)\n", strsignal(sig));
      if (exit_code < 0) exit_code = 128 + sig;
      kill_all(sig);
      aborting = 1;
      kill_at = asr_time_ms() + GRACE_MS;
    } else {
      fprintf(stderr, "asrrun: killing the job\n");
      kill_all(SIGKILL);
    }
  }
}

/* --- setup ------------------------------------------------------------------------ */

static int find_program(const char *prog, char *out, size_t outlen) {
  if (strchr(prog, '/')) {
    snprintf(out, outlen, "%s", prog);
    return access(prog, X_OK) == 0 ? 0 : -1;
  }
  const char *path = getenv("PATH");
  if (!path) path = "/usr/bin:/bin";
  char *copy = strdup(path), *save = NULL;
  for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
    snprintf(out, outlen, "%s/%s", *dir ? dir : ".", prog);
    struct stat sb;
    if (stat(out, &sb) == 0 && S_ISREG(sb.st_mode) && access(out, X_OK) == 0) {
      free(copy);
      return 0;
    }
  }
  free(copy);
  return -1;
}

static void asrd_path(char *out, size_t len) {
  const char *env = getenv("ASR_ASRD");
  if (env && *env) {
    snprintf(out, len, "%s", env);
    return;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  snprintf(out, len, "%s/asrd", dirname(exe));
}

static int pick_port(void) {
  int p = asr_sock_free_port("0.0.0.0");
  return p > 0 ? p : -1;
}

/* --- the early local daemon ------------------------------------------------------- */

/*
 * Most of a short job's run time is asrd's own start (exec and loading
 * libpmix, PMIx_server_init), and asrrun's own work before it starts the
 * daemons (the YAML files, the map, finding the program) does not depend on
 * it. So when the command line may run a job on this host, asrrun starts
 * this host's asrd first, before reading its configuration: on a listener of
 * its own, under this host's name, holding a bootstrap port picked here, and
 * without a host index (the JOB tells it). asrd calls back and starts its
 * PMIx server meanwhile. If the job then runs on this host under that name,
 * the daemon is adopted (early_adopt) and the job gets that port unless one
 * is configured; otherwise -- bad options, a missing program, a dry run in a
 * job file, only other hosts, Slurm -- it is dismissed: asrrun closes its
 * listener, and asrd, finding asrrun gone (its connect refused, or the
 * connection reset), removes what it made (its PMIx directory) and exits
 * quietly; asrrun reaps it before exiting itself (early_finish). (On a
 * 2-CPU VM this took about half a millisecond off a one-rank job.)
 */
static void early_start(int argc, char **argv) {
  /* Not when the command line asks for no job or names hosts (this host may
   * not be one of them), nor inside an allocation (daemons start with srun). */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "--version") || !strcmp(a, "--dry-run") ||
        !strncmp(a, "-H", 2) || !strncmp(a, "--host", 6))
      return;
  }
  if (getenv("ASRRUN_HOSTFILE") || getenv("PBS_NODEFILE") || getenv("SLURM_JOB_ID") ||
      getenv("SLURM_JOB_NODELIST") || getenv("SLURM_NODELIST"))
    return;
  if (gethostname(early.host, sizeof early.host - 1) != 0 || !early.host[0]) return;
  early.bport = pick_port();
  if (early.bport <= 0) return;
  char err[256], asrd[PATH_MAX], ctl[64];
  early.lfd = asr_sock_listen("127.0.0.1", 0, 16, &early.port, err, sizeof err);
  if (early.lfd < 0) return;
  asrd_path(asrd, sizeof asrd);
  snprintf(ctl, sizeof ctl, "127.0.0.1:%u", early.port);
  asr_launch_args_t a = {.asrd_path = asrd,
                         .ctl_addr = ctl,
                         .secret_hex = secret_hex,
                         .host = early.host,
                         .index = -1,
                         .port = early.bport};
  early.pid = asr_launch_local.start(&a, err, sizeof err);
  if (early.pid <= 0) { /* the normal start reports what is wrong */
    early.pid = 0;
    close(early.lfd);
    early.lfd = -1;
  }
}

/* Closes the early daemon's listener: if it has not called back yet, it
 * never will, and then it exits. */
static void early_dismiss(void) {
  if (early.lfd >= 0) close(early.lfd);
  early.lfd = -1;
}

/* The job's first host that runs here under the early daemon's name gets it;
 * with none (or under Slurm, which starts every daemon) it is dismissed. */
static void early_adopt(const int *is_local) {
  if (early.pid <= 0) return;
  for (int h = 0; h < map.nhosts && cfg.launcher != ASR_LAUNCHER_SLURM; h++)
    if (is_local[h] && !strcmp(map.host_names[h], early.host)) {
      early.index = h;
      return;
    }
  early_dismiss();
}

/* Before asrrun exits: a dismissed early daemon is reaped (it exits within
 * milliseconds, once its PMIx server is up and removed), bounded like every
 * wait here. */
static void early_finish(void) {
  early_dismiss();
  uint64_t until = asr_time_ms() + 5000;
  while (early.pid > 0) {
    int st;
    pid_t r = waitpid(early.pid, &st, WNOHANG);
    if (r == early.pid && WIFSIGNALED(st)) asrd_dir_remove_of(early.pid);
    if (r == early.pid || (r < 0 && errno != EINTR)) break;
    if (asr_time_ms() >= until) {
      kill(early.pid, SIGKILL);
      if (waitpid(early.pid, &st, 0) == early.pid) asrd_dir_remove_of(early.pid);
      break;
    }
    struct timespec ts = {0, 200 * 1000};
    nanosleep(&ts, NULL);
  }
  early.pid = 0;
}

static int run(int argc, char **argv);

int main(int argc, char **argv) {
  asr_log_set_role("asrrun", -1);
  uint8_t secret[ASR_KV_SECRET_LEN];
  asr_kv_secret_generate(secret);
  asr_kv_secret_to_hex(secret, secret_hex);
  early_start(argc, argv);
  int rc = run(argc, argv);
  early_finish();
  return rc;
}

static int run(int argc, char **argv) {
  char err[1024];
  int rc = asr_config_load(&cfg, argc, argv, err, sizeof err);
  if (rc == 1) return 0; /* --help / --version */
  if (rc) {
    fprintf(stderr, "asrrun: %s\n", err);
    return EXIT_USAGE;
  }
  /* Inside a Slurm or PBS allocation the hosts come from it (alloc.h). */
  int alloc = asr_alloc_detect(&cfg, err, sizeof err);
  if (alloc < 0) {
    fprintf(stderr, "asrrun: %s\n", err);
    return EXIT_USAGE;
  }
  if (cfg.verbose && alloc > 0)
    fprintf(stderr, "asrrun: %d hosts from the %s allocation\n", cfg.nhosts, asr_alloc_name(alloc));
  char host[128] = "localhost";
  gethostname(host, sizeof host - 1);
  if (asr_map_build(&cfg, host, &map, err, sizeof err) != 0) {
    fprintf(stderr, "asrrun: %s\n", err);
    return EXIT_USAGE;
  }
  if (cfg.dry_run) {
    asr_map_print(&map, &cfg, stdout);
    return 0;
  }
  char resolved[PATH_MAX];
  if (find_program(cfg.program, resolved, sizeof resolved) != 0) {
    fprintf(stderr, "asrrun: program '%s' not found or not executable (checked %s); nothing was started\n",
            cfg.program, strchr(cfg.program, '/') ? "that path" : "every directory in PATH");
    return EXIT_NOTFOUND;
  }
  /* Which daemons are forked here and which go through the agent (or srun:
   * under Slurm every daemon is a step, so Slurm tracks all of them); the
   * address the remote ones call back on. */
  int slurm = cfg.launcher == ASR_LAUNCHER_SLURM;
  int nremote = 0;
  int *is_local = calloc((size_t)map.nhosts, sizeof *is_local);
  for (int h = 0; h < map.nhosts; h++) {
    is_local[h] =
        cfg.launcher == ASR_LAUNCHER_LOCAL || (!slurm && asr_launch_host_is_local(map.host_names[h], host));
    if (!is_local[h]) nremote++;
  }
  char ctl_ip[16] = "127.0.0.1";
  for (int h = 0; h < map.nhosts && nremote; h++)
    if (!is_local[h]) {
      if (asr_launch_callback_ip(cfg.if_include, map.host_names[h], ctl_ip, err, sizeof err) != 0) {
        fprintf(stderr, "asrrun: %s\n", err);
        return EXIT_LAUNCH;
      }
      break;
    }

  snprintf(nspace, sizeof nspace, "asr.%ld.%08x", (long)getpid(), (unsigned)asr_rand_u64());
  early_adopt(is_local);
  /* the early daemon holds the port it was given: the job's, unless one is
   * configured (then it lets that one go and binds the job's) */
  port = cfg.bootstrap_port > 0 ? cfg.bootstrap_port : early.index >= 0 ? early.bport : pick_port();
  if (port <= 0) {
    fprintf(stderr, "asrrun: cannot find a free bootstrap port; give one with --bootstrap-port\n");
    return EXIT_LAUNCH;
  }
  daemons = calloc((size_t)map.nhosts, sizeof *daemons);
  ranks = calloc((size_t)map.nranks, sizeof *ranks);
  for (int h = 0; h < map.nhosts; h++) {
    daemons[h].conn.fd = -1;
    daemons[h].nlocal = map.nlocal[h];
    daemons[h].local = is_local[h];
  }
  if (early.index >= 0) daemons[early.index].pid = early.pid;
  free(is_local);
  uint16_t ctl_port = 0;
  if (!nremote && early.lfd >= 0) {
    /* the early daemon's listener serves every daemon of a job on this host */
    lfd = early.lfd;
    ctl_port = early.port;
    early.lfd = -1;
  } else {
    lfd = asr_sock_listen(nremote ? "0.0.0.0" : "127.0.0.1", 0, 1024, &ctl_port, err, sizeof err);
    if (lfd < 0) {
      fprintf(stderr, "asrrun: cannot open the control port: %s\n", err);
      return EXIT_LAUNCH;
    }
  }

  signal(SIGPIPE, SIG_IGN);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  epfd = epoll_create1(EPOLL_CLOEXEC);
  watch(sigfd, EPOLLIN, &sig_tag);
  watch(lfd, EPOLLIN, &lfd_tag);
  if (early.lfd >= 0) watch(early.lfd, EPOLLIN, &early_lfd_tag);
  /* stdin is watched once rank 0's daemon has started its ranks (see main loop). */
  if (fcntl(0, F_GETFL) < 0) stdin_open = 2; /* no stdin: rank 0 gets EOF at once */

  char asrd[PATH_MAX], remote_asrd[PATH_MAX + 16], ctl_local[64], ctl_remote[64];
  asrd_path(asrd, sizeof asrd);
  /* remote hosts run asrd from --prefix, else from where it is installed here */
  if (cfg.prefix[0])
    snprintf(remote_asrd, sizeof remote_asrd, "%s/bin/asrd", cfg.prefix);
  else
    snprintf(remote_asrd, sizeof remote_asrd, "%s", asrd);
  snprintf(ctl_local, sizeof ctl_local, "127.0.0.1:%u", ctl_port);
  snprintf(ctl_remote, sizeof ctl_remote, "%s:%u", ctl_ip, ctl_port);
  if (slurm) snprintf(cfg.launch_agent, sizeof cfg.launch_agent, "srun"); /* for messages */
  if (cfg.verbose && nremote)
    fprintf(stderr, "asrrun: %d remote host%s call back on %s through '%s'\n", nremote,
            nremote > 1 ? "s" : "", ctl_remote, cfg.launch_agent);
  for (int h = 0; h < map.nhosts; h++) {
    if (daemons[h].pid > 0) continue; /* the early daemon */
    const asr_launch_ops_t *ops = daemons[h].local ? &asr_launch_local
                                  : slurm          ? &asr_launch_slurm
                                                   : &asr_launch_rsh;
    asr_launch_args_t a = {.asrd_path = daemons[h].local ? asrd : remote_asrd,
                           .ctl_addr = daemons[h].local ? ctl_local : ctl_remote,
                           .secret_hex = secret_hex,
                           .host = map.host_names[h],
                           .agent = cfg.launch_agent,
                           .index = h,
                           .port = port,
                           .verbose = cfg.verbose};
    daemons[h].pid = ops->start(&a, err, sizeof err);
    if (daemons[h].pid < 0) {
      abort_job(EXIT_LAUNCH, "cannot start asrd for host %s: %s", map.host_names[h], err);
      break;
    }
  }
  uint64_t start = asr_time_ms();
  deadline_ms = cfg.timeout_s > 0 ? start + (uint64_t)cfg.timeout_s * 1000 : 0;
  uint64_t hello_deadline = start + 30000;
  uint64_t next_heartbeat = start + HEARTBEAT_MS;
  const uint64_t silence_ms = (uint64_t)cfg.heartbeat_timeout_s * 1000;

  for (;;) {
    int all_done = 1, all_gone = 1;
    for (int h = 0; h < map.nhosts; h++) {
      if (!daemons[h].done && !daemons[h].gone) all_done = 0;
      if (daemons[h].pid > 0) all_gone = 0;
    }
    if (all_done) break;
    if (all_gone && exit_code >= 0) break;
    struct epoll_event evs[64];
    int n = epoll_wait(epfd, evs, 64, 100);
    for (int i = 0; i < n; i++) {
      void *p = evs[i].data.ptr;
      if (p == &sig_tag)
        on_signal();
      else if (p == &lfd_tag)
        accept_daemon(lfd);
      else if (p == &early_lfd_tag)
        accept_daemon(early.lfd);
      else if (p == &stdin_tag)
        forward_stdin();
      else {
        daemon_t *d = p;
        if (evs[i].events & EPOLLOUT) asr_ctl_flush(&d->conn);
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
          int r = asr_ctl_read(&d->conn, on_msg, d);
          if (r && !d->gone) {
            d->gone = 1;
            epoll_ctl(epfd, EPOLL_CTL_DEL, d->conn.fd, NULL);
            if (!d->done && exit_code < 0)
              abort_job(EXIT_LAUNCH, "lost the connection to asrd on host %s before the job finished",
                        map.host_names[d - daemons]);
          }
        }
        if (!d->gone && d->conn.fd >= 0)
          watch(d->conn.fd, EPOLLIN | (d->conn.out.len > d->conn.out.off ? EPOLLOUT : 0), d);
      }
    }
    uint64_t now = asr_time_ms();
    if (stdin_open == 1 && daemons[map.ranks[0].host].started) {
      /* Rank 0 exists now: forward asrrun's stdin to it. */
      fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
      struct epoll_event e = {.events = EPOLLIN, .data.ptr = &stdin_tag};
      /* a regular file or /dev/null cannot be polled: read it all at once */
      stdin_open = epoll_ctl(epfd, EPOLL_CTL_ADD, 0, &e) == 0 ? 3 : 2;
    }
    if (stdin_open == 2) {
      int h0 = map.ranks[0].host;
      if (daemons[h0].started) {
        while (stdin_open == 2) {
          uint8_t buf[65536];
          ssize_t k = fcntl(0, F_GETFL) < 0 ? 0 : read(0, buf, sizeof buf);
          asr_buf_t b = {0};
          asr_buf_put_bytes(&b, buf, k > 0 ? (size_t)k : 0);
          asr_ctl_send(&daemons[h0].conn, ASR_CTL_STDIN, &b);
          asr_buf_free(&b);
          if (k <= 0) stdin_open = 0;
        }
      }
    }
    for (int h = 0; h < map.nhosts; h++)
      if (!daemons[h].hello && now > hello_deadline && exit_code < 0)
        abort_job(EXIT_LAUNCH, "asrd on host %s did not call back within 30 s", map.host_names[h]);
    if (now >= next_heartbeat) {
      next_heartbeat = now + HEARTBEAT_MS;
      for (int h = 0; h < map.nhosts; h++) {
        daemon_t *d = &daemons[h];
        if (!d->hello || d->gone || d->done) continue;
        asr_ctl_send(&d->conn, ASR_CTL_HEARTBEAT, NULL);
        watch(d->conn.fd, EPOLLIN | (d->conn.out.len > d->conn.out.off ? EPOLLOUT : 0), d);
        if (now - d->last_rx > silence_ms) {
          /* A host cut off or frozen: TCP would not notice for many minutes. */
          d->gone = 1;
          epoll_ctl(epfd, EPOLL_CTL_DEL, d->conn.fd, NULL);
          if (exit_code < 0)
            abort_job(
                EXIT_LAUNCH,
                "lost contact with asrd on host %s: nothing heard for %d s (host down or network cut?); "
                "aborting the job",
                map.host_names[h], cfg.heartbeat_timeout_s);
        }
      }
    }
    if (deadline_ms && now >= deadline_ms && exit_code < 0)
      abort_job(EXIT_TIMEOUT, "the job timed out after %d s (--timeout); killing it", cfg.timeout_s);
    if (kill_at && now >= kill_at) {
      kill_all(SIGKILL);
      kill_at = 0;
      giveup_at = now + GRACE_MS;
    }
    if (giveup_at && now >= giveup_at) {
      /* --timeout and signals must bound asrrun even if a daemon never ends */
      asr_warn("asrrun",
               "the daemons did not report the end of the job %d s after SIGKILL; giving up on them",
               GRACE_MS / 1000);
      break;
    }
    if (aborting && !kill_at) {
      /* after SIGKILL, daemons that never connected are killed directly */
      for (int h = 0; h < map.nhosts; h++)
        if (!daemons[h].hello && daemons[h].pid > 0) kill(daemons[h].pid, SIGKILL);
    }
  }
  /* Everyone is done: release the daemons and reap them. */
  for (int h = 0; h < map.nhosts; h++)
    if (daemons[h].conn.fd >= 0 && !daemons[h].gone)
      asr_ctl_send_sync(&daemons[h].conn, ASR_CTL_SHUTDOWN, NULL, 2000);
  uint64_t until = asr_time_ms() + 5000;
  for (int h = 0; h < map.nhosts; h++) {
    while (daemons[h].pid > 0) {
      int st;
      pid_t r = waitpid(daemons[h].pid, &st, WNOHANG);
      if (r == daemons[h].pid) {
        daemon_reaped(h, st); /* clears daemons[h].pid */
        break;
      }
      if (r < 0) break;
      uint64_t now = asr_time_ms();
      if (now > until) {
        kill(daemons[h].pid, SIGKILL);
        if (waitpid(daemons[h].pid, &st, 0) == daemons[h].pid) daemon_reaped(h, st);
        break;
      }
      /* Sleep until a child exits (SIGCHLD arrives on the signalfd), not a
       * fixed tick: the daemon is usually a fraction of a millisecond from
       * its exit here, and this wait is part of every job's run time. Other
       * signals are dropped, as they always were at this point. */
      struct pollfd pf = {.fd = sigfd, .events = POLLIN};
      if (poll(&pf, 1, (int)(until - now) + 1) > 0) {
        struct signalfd_siginfo si;
        while (read(sigfd, &si, sizeof si) == sizeof si) {
        }
      }
    }
  }
  if (exit_code < 0) exit_code = 0;
  for (int i = 0; i < map.nranks; i++)
    for (int s = 1; s <= 2; s++)
      if (ranks[i].out_fd[s] > 0) close(ranks[i].out_fd[s]);
  return exit_code;
}
