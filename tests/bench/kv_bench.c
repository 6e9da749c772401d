/*
 * kv_bench.c -- benchmark of the rendezvous KV store against raw loopback TCP.
 *
 *   kv_bench [-r REPS] [-n OPS] [-m LIST] [-q] [-v]      (`make bench` runs it)
 *
 * Everything runs on 127.0.0.1 in separate processes:
 *
 *   - the real KV server, `<builddir>/bootstrap/asrkv serve --port 0 --bind
 *     127.0.0.1` (fork+exec, in a process group of its own; the port comes
 *     from its READY line, its counters from its STOPPED line). The build dir
 *     is ASR_BUILDDIR, else derived from /proc/self/exe
 *     (<builddir>/tests/bench/kv_bench);
 *   - a tiny epoll echo server written here (echoes the whole 1156-byte
 *     frames each recv brings with one send), the "raw TCP request/response"
 *     baseline;
 *   - 1, 8, 32 or 64 client processes (fork) that wait on a start gate (a pipe
 *     whose write end the parent closes once all of them are ready) and report
 *     the monotonic time they finished through a result pipe. A figure is the
 *     time from gate open to the last client's end. A client with a
 *     persistent connection (asr, raw, TCPStore alike) opens it and does one
 *     request/response on it before it reports ready (TCPStore's constructor
 *     connects and ADDs to "init/"), and closes it after its end. No
 *     client exits before every client has its result: the exit of a
 *     process is not part of what is measured, nor may it take the CPU from
 *     those still measured.
 *
 * Measured (median over REPS repetitions, three times as many for the
 * rendezvous rows unless -r is given; asr, raw and TCPStore interleaved):
 *   1. ops/s with 1, 8 and 32 clients, each doing a fixed number of operations
 *      over one TCP connection per operation: asr = blocking
 *      asr_kv_set/asr_kv_get (kv_conn.h) in the seed's form, as asrkv
 *      speaks it, alternating SET and GET of its own keys (every
 *      GET verified byte for byte); raw = connect + send 1156 + recv 1156 +
 *      close (the echo verified). For reference also a persistent connection
 *      per client: asr = SET/GET frames written straight to the KV server on
 *      one connection; raw = echo request/response on one connection.
 *      And pipelined (kv_conn.h, what the runtime's service thread uses):
 *      each client keeps PIPE_WINDOW requests in flight on its one
 *      connection (SET/GET pairs, every GET verified); raw = the same window
 *      of echo request/responses on one connection.
 *   2. a 64-client rendezvous: every process SETs its rank's 128-byte address,
 *      then GETs all 64 keys with retry=1 and verifies them. Once with blocking
 *      GETs one after the other, once with the 64 GETs in flight together,
 *      each on a connection of its own in the seed's form (a pool per GET on
 *      one loop: the seed's client's pattern), once pipelined (the SET and
 *      the 64 GETs on one connection, each GET held by the server until its
 *      key is set).
 *      The raw baseline does the same 1 + 64 request/responses per process
 *      (sequential, resp. all 64 at once under one poll(), resp. all 65 on
 *      one connection).
 *   3. PyTorch's TCPStore, in the same run, interleaved with the others: one
 *      /usr/bin/python3 process imports torch once (`python3 -c 'import
 *      torch...'`, tcpstore_script below), starts a TCPStore server in a
 *      child of its own, and for each measurement forks the same number of
 *      client processes behind a start gate: ops/s = each client alternates
 *      store.set/store.get of its own keys (128-byte values, every get
 *      verified) on its persistent connection; rendezvous = each of 64
 *      clients store.set()s its address, then store.get()s all 64 (get
 *      waits for its key). The column reads "not installed" when torch
 *      cannot be imported.
 *
 * Exit status: 0 when every run completed and verified, 1 on any failure (a
 * mismatch, a failed or timed-out child, a server that died), 2 on a usage
 * error. Every child started here is killed and reaped by pid (the KV server
 * by its process group) on every exit path, SIGINT/SIGTERM included; children
 * also die with the parent (PR_SET_PDEATHSIG).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "asr_loop.h"
#include "kv_conn.h"
#include "kv_frame.h"
#include "kv_secret.h"

#define FRAME ASR_KV_FRAME_LEN
#define ADDR_LEN 128       /* a rank's "address" in the rendezvous */
#define KEYS_PER_CLIENT 16 /* each ops client cycles over this many keys of its own */
#define RDV_RANKS 64
#define MAX_CHILDREN 128
#define CLIENT_TIMEOUT_MS 30000 /* per KV request; a hung run fails instead of hanging */
#define PHASE_TIMEOUT_MS 90000  /* parent: longest wait for one phase's clients */

#define PIPE_WINDOW 128 /* pipelined requests in flight per client */
#define PIPE_KEYS 128   /* each pipelined client cycles over this many keys (>= the window's pairs) */

/* ------------------------------------------------------------------------ */
/* Child bookkeeping: every pid we start is recorded so it can be killed and
 * reaped on any exit path, including SIGINT/SIGTERM. */

static volatile pid_t g_pids[MAX_CHILDREN + 8];
static volatile int g_npids;
static volatile pid_t g_group;    /* the KV server leads a process group of its own (0: none) */
static volatile pid_t g_group_py; /* so does the TCPStore python process, with its children */
static pid_t g_parent;
static int g_verbose;

static void track(pid_t p) {
  for (int i = 0; i < g_npids; i++)
    if (g_pids[i] == 0) {
      g_pids[i] = p;
      return;
    }
  if (g_npids < (int)(sizeof g_pids / sizeof g_pids[0])) g_pids[g_npids++] = p;
}

static void untrack(pid_t p) {
  for (int i = 0; i < g_npids; i++)
    if (g_pids[i] == p) g_pids[i] = 0;
}

/* Async-signal-safe: SIGKILL and reap every child still recorded. The KV
 * server is killed by its process group, so that anything it started (a
 * wrapper's child, say) goes too. */
static void kill_all(void) {
  if (g_group > 0) kill(-g_group, SIGKILL);
  if (g_group_py > 0) kill(-g_group_py, SIGKILL);
  for (int i = 0; i < g_npids; i++) {
    pid_t p = g_pids[i];
    if (p > 0) kill(p, SIGKILL);
  }
  for (int i = 0; i < g_npids; i++) {
    pid_t p = g_pids[i];
    if (p > 0) {
      while (waitpid(p, NULL, 0) < 0 && errno == EINTR) {
      }
      g_pids[i] = 0;
    }
  }
}

static void on_signal(int sig) {
  if (getpid() != g_parent) _exit(128 + sig);
  kill_all();
  _exit(128 + sig);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "kv_bench: FAIL: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  kill_all();
  exit(1);
}

/* In a child: report to stderr and return 1 (the child's exit status). */
static int cfail(int id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cfail(int id, const char *fmt, ...) {
  char buf[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "kv_bench: FAIL: client %d (pid %ld): %s\n", id, (long)getpid(), buf);
  return 1;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Child side of fork: die with the parent, default signal dispositions. */
static void child_setup(void) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != g_parent) _exit(1);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
}

static pid_t fork_child(void) {
  fflush(NULL);
  pid_t p = fork();
  if (p < 0) die("fork: %s", strerror(errno));
  if (p == 0) {
    child_setup();
    return 0;
  }
  track(p);
  return p;
}

/* Waits for p (at most ms), SIGKILLing it after that. Returns the wait status. */
static int reap(pid_t p, int ms) {
  int st = 0;
  uint64_t until = now_ns() + (uint64_t)ms * 1000000ull;
  for (;;) {
    pid_t r = waitpid(p, &st, WNOHANG);
    if (r == p) break;
    if (r < 0 && errno != EINTR) {
      st = -1;
      break;
    }
    if (now_ns() > until) {
      kill(p, SIGKILL);
      while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    usleep(1000);
  }
  untrack(p);
  return st;
}

/* ------------------------------------------------------------------------ */
/* Small blocking socket helpers (the raw baseline and the persistent loop). */

static int write_full(int fd, const void *buf, size_t len) {
  const uint8_t *p = buf;
  while (len) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int read_full(int fd, void *buf, size_t len) {
  uint8_t *p = buf;
  while (len) {
    ssize_t n = recv(fd, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static struct sockaddr_in loopback(uint16_t port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

/* Blocking connect to 127.0.0.1:port with TCP_NODELAY (as the KV client sets).
 * Retries EADDRNOTAVAIL/EAGAIN (ephemeral port exhaustion) briefly, as the KV
 * client does. Returns the fd or -1 with errno. */
static int connect_blocking(uint16_t port) {
  struct sockaddr_in a = loopback(port);
  for (int tries = 0;; tries++) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
    int e = errno;
    close(fd);
    if ((e == EADDRNOTAVAIL || e == EAGAIN || e == EINTR) && tries < 1000) {
      usleep(1000);
      continue;
    }
    errno = e;
    return -1;
  }
}

/* ------------------------------------------------------------------------ */
/* Phases: N client processes behind a start gate. */

/* The servers (KV and echo): a phase fails at once if one of them dies. */
static pid_t g_watch[2];
static const char *const g_watch_name[2] = {"asrkv serve", "the echo server"};

static void check_servers(const char *what) {
  for (int i = 0; i < 2; i++) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (g_watch[i] > 0 && waitid(P_PID, (id_t)g_watch[i], &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        si.si_pid == g_watch[i])
      die("%s: %s (pid %ld) died (%s %d)", what, g_watch_name[i], (long)g_watch[i],
          si.si_code == CLD_EXITED ? "exit status" : "signal", si.si_status);
  }
}

typedef int (*work_fn)(int id, const void *ctx, uint64_t *ops);

/* Runs in a client before it reports ready: opens what stays open through
 * the timed part (a persistent connection), as TCPStore's constructor does
 * before its client reaches the gate. */
typedef int (*prep_fn)(int id, const void *ctx);

/* Set by a prep_fn: closes what it opened, after the client's end time is
 * taken (a TCPStore client's connection, too, outlives its measured part). */
static void (*g_close_open)(void);

typedef struct {
  int32_t id, rc;
  uint64_t t_end_ns, ops, retries;
} result_t;

/* Set by a workload in its child: KV request retries (NOT_FOUND re-sends and
 * reconnects), summed per phase for -v. */
static uint64_t g_child_retries;
static uint64_t g_phase_retries;

/* Runs work(id, ctx) in n client processes started together. On success
 * returns 0 and sets *wall_s (gate open to the last client's end) and *ops. */
static int run_phase(const char *what, int n, prep_fn prep, work_fn work, const void *ctx, double *wall_s,
                     uint64_t *ops_total) {
  int ready[2], go[2], res[2], leave[2];
  pid_t kids[MAX_CHILDREN];
  if (n > MAX_CHILDREN) die("too many clients (%d)", n);
  if (pipe2(ready, O_CLOEXEC) || pipe2(go, O_CLOEXEC) || pipe2(res, O_CLOEXEC) || pipe2(leave, O_CLOEXEC))
    die("pipe: %s", strerror(errno));
  for (int i = 0; i < n; i++) {
    pid_t p = fork_child();
    if (p == 0) {
      close(ready[0]);
      close(go[1]);
      close(res[0]);
      close(leave[1]);
      int prc = prep ? prep(i, ctx) : 0; /* a failure is reported as the result */
      char c = 'r';
      if (write(ready[1], &c, 1) != 1) _exit(1);
      close(ready[1]);
      ssize_t g;
      while ((g = read(go[0], &c, 1)) < 0 && errno == EINTR) {
      }
      if (g != 0) _exit(1); /* the gate opens by EOF only */
      result_t r = {.id = i};
      r.rc = prc ? prc : work(i, ctx, &r.ops);
      r.t_end_ns = now_ns();
      r.retries = g_child_retries;
      if (write(res[1], &r, sizeof r) != (ssize_t)sizeof r) _exit(1);
      close(res[1]);
      /* Stay until every client has its result: one client's exit (its
       * address space torn down) must not take the CPU from those still in
       * the measured part, which a job's ranks do not do either. */
      while (read(leave[0], &c, 1) < 0 && errno == EINTR) {
      }
      if (g_close_open) g_close_open();
      fflush(NULL);
      _exit(r.rc ? 1 : 0);
    }
    kids[i] = p;
  }
  close(ready[1]);
  close(go[0]);
  close(res[1]);
  close(leave[0]);

  int failed = 0;
  /* Wait until every client sits at the gate. */
  for (int got = 0; got < n;) {
    struct pollfd p = {.fd = ready[0], .events = POLLIN};
    if (poll(&p, 1, 10000) <= 0) {
      fprintf(stderr, "kv_bench: FAIL: %s: clients did not become ready\n", what);
      failed = 1;
      break;
    }
    char buf[MAX_CHILDREN];
    ssize_t r = read(ready[0], buf, sizeof buf);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      fprintf(stderr, "kv_bench: FAIL: %s: a client died before the start\n", what);
      failed = 1;
      break;
    }
    got += (int)r;
  }
  close(ready[0]);
  uint64_t t0 = now_ns();
  close(go[1]); /* open the gate */

  uint64_t t_last = t0, ops = 0;
  g_phase_retries = 0;
  int nres = 0;
  if (!failed) {
    uint64_t deadline = t0 + (uint64_t)PHASE_TIMEOUT_MS * 1000000ull;
    size_t have = 0;
    result_t rbuf[MAX_CHILDREN];
    while (nres < n && !failed) { /* one failed client fails the phase: stop the rest */
      uint64_t now = now_ns();
      if (now >= deadline) {
        fprintf(stderr, "kv_bench: FAIL: %s: only %d of %d clients finished within %d ms\n", what, nres, n,
                PHASE_TIMEOUT_MS);
        failed = 1;
        break;
      }
      struct pollfd p = {.fd = res[0], .events = POLLIN};
      int pr = poll(&p, 1, 200);
      check_servers(what);
      if (pr < 0 && errno == EINTR) continue;
      if (pr <= 0) continue;
      ssize_t r = read(res[0], (uint8_t *)rbuf + have, sizeof rbuf - have);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        fprintf(stderr, "kv_bench: FAIL: %s: %d of %d clients exited without a result\n", what, n - nres, n);
        failed = 1;
        break;
      }
      have += (size_t)r;
      while (have >= sizeof(result_t)) {
        result_t x = rbuf[0];
        memmove(rbuf, rbuf + 1, have - sizeof(result_t));
        have -= sizeof(result_t);
        nres++;
        if (x.rc) failed = 1;
        if (x.t_end_ns > t_last) t_last = x.t_end_ns;
        ops += x.ops;
        g_phase_retries += x.retries;
      }
    }
  }
  close(res[0]);
  close(leave[1]); /* every client may leave */
  for (int i = 0; i < n; i++) {
    if (failed) kill(kids[i], SIGKILL);
    int st = reap(kids[i], 10000);
    if (!failed && (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
      fprintf(stderr, "kv_bench: FAIL: %s: client %d exited with status 0x%x\n", what, i, st);
      failed = 1;
    }
  }
  if (failed) return -1;
  *wall_s = (double)(t_last - t0) / 1e9;
  if (ops_total) *ops_total = ops;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Deterministic contents. */

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static void fill_pattern(uint8_t *buf, size_t len, uint64_t seed) {
  for (size_t i = 0; i < len; i += 8) {
    uint64_t v = mix64(seed + i);
    size_t k = len - i < 8 ? len - i : 8;
    memcpy(buf + i, &v, k);
  }
}

static void report_mismatch(int id, const char *what, const uint8_t *want, size_t wlen, const uint8_t *got,
                            size_t glen) {
  size_t i = 0;
  while (i < wlen && i < glen && want[i] == got[i]) i++;
  cfail(id,
        "%s: value mismatch: expected %zu bytes, got %zu; first difference at byte %zu "
        "(expected 0x%02x, got 0x%02x)",
        what, wlen, glen, i, i < wlen ? want[i] : 0, i < glen ? got[i] : 0);
}

/* ------------------------------------------------------------------------ */
/* Workloads. */

typedef struct {
  uint16_t port;
  int ops;
  int rep;
  int nranks;
  const uint8_t *secret;
} wctx_t;

/* The blocking calls' options: the seed's form, one request at a time on a
 * connection of its own, as asrkv (and the seed's client) speak it. */
static asr_kv_pool_opts_t kv_opts(const wctx_t *c) {
  asr_kv_pool_opts_t o = {.secret = c->secret, .timeout_ms = CLIENT_TIMEOUT_MS, .seed_form = 1};
  return o;
}

/* Ops keys do not depend on the repetition (the values do), so the table
 * stays small however many repetitions run. */
static size_t ops_key(char *key, size_t cap, int id, int slot) {
  return (size_t)snprintf(key, cap, "bench/ops/c%d/k%d", id, slot);
}

/* asr: blocking SET/GET alternating, one connection per op (the client's own
 * pattern); every GET is checked against the value just SET. */
static int w_kv_ops(int id, const void *vctx, uint64_t *ops) {
  const wctx_t *c = vctx;
  asr_kv_pool_opts_t o = kv_opts(c);
  uint8_t val[ADDR_LEN], got[ASR_KV_VAL_MAX];
  char key[96], err[700];
  for (int i = 0; i + 1 < c->ops; i += 2) {
    int slot = (i / 2) % KEYS_PER_CLIENT;
    size_t klen = ops_key(key, sizeof key, id, slot);
    fill_pattern(val, sizeof val, ((uint64_t)id << 40) ^ ((uint64_t)c->rep << 32) ^ (uint64_t)i);
    int rc = asr_kv_set("127.0.0.1", c->port, key, klen, val, sizeof val, ASR_KV_VTYPE_BINARY, &o, err,
                        sizeof err);
    if (rc) return cfail(id, "op %d: SET %s failed: %s", i, key, err);
    size_t glen = 0;
    rc = asr_kv_get("127.0.0.1", c->port, key, klen, 0, got, sizeof got, &glen, &o, err, sizeof err);
    if (rc) return cfail(id, "op %d: GET %s failed: %s", i + 1, key, err);
    if (glen != sizeof val || memcmp(got, val, sizeof val) != 0) {
      report_mismatch(id, key, val, sizeof val, got, glen);
      return 1;
    }
    *ops += 2;
  }
  return 0;
}

/* raw: connect + send 1156 + recv 1156 + close per op; the echo is verified. */
static int raw_rr_once(int id, uint16_t port, uint64_t seed) {
  uint8_t out[FRAME], in[FRAME];
  fill_pattern(out, 64, seed); /* a distinct head per op; the echo check covers all 1156 bytes */
  memset(out + 64, 0x5a, FRAME - 64);
  int fd = connect_blocking(port);
  if (fd < 0) return cfail(id, "raw connect to 127.0.0.1:%u: %s", port, strerror(errno));
  int rc = write_full(fd, out, FRAME) || read_full(fd, in, FRAME);
  close(fd);
  if (rc) return cfail(id, "raw request/response on 127.0.0.1:%u failed: %s", port, strerror(errno));
  if (memcmp(in, out, FRAME) != 0) {
    report_mismatch(id, "raw echo", out, FRAME, in, FRAME);
    return 1;
  }
  return 0;
}

static int w_raw_ops(int id, const void *vctx, uint64_t *ops) {
  const wctx_t *c = vctx;
  for (int i = 0; i + 1 < c->ops; i += 2) {
    /* same op count as w_kv_ops (which does them in SET/GET pairs) */
    for (int k = 0; k < 2; k++) {
      if (raw_rr_once(id, c->port, ((uint64_t)id << 40) ^ (uint64_t)(i + k))) return 1;
      (*ops)++;
    }
  }
  return 0;
}

/* asr, persistent: SET/GET frames on one connection, then END. */
static int kv_frame_rr(int id, int fd, uint8_t *frame, asr_kv_msg_t *resp) {
  const char *why = NULL;
  if (write_full(fd, frame, FRAME) || read_full(fd, frame, FRAME))
    return cfail(id, "persistent KV connection failed: %s", strerror(errno));
  if (asr_kv_frame_decode(frame, resp, &why) != 0) return cfail(id, "bad KV response: %s", why);
  return 0;
}

/* The connection a persistent or pipelined client opens before the gate
 * (prep_*) and its workload uses; each client is a fresh process. */
static struct {
  int fd;
  asr_loop_t *loop;
  asr_kv_pool_t *pool;
} g_open = {.fd = -1};

static const uint8_t *g_open_secret;

static void close_kv_conn(void) {
  uint8_t frame[FRAME];
  asr_kv_msg_t end = {.opcode = ASR_KV_OP_END, .secret = g_open_secret};
  asr_kv_frame_encode(frame, &end);
  (void)write_full(g_open.fd, frame, FRAME);
  close(g_open.fd);
}

static void close_raw_conn(void) { close(g_open.fd); }

static size_t hello_key(char *key, size_t cap, int id) {
  return (size_t)snprintf(key, cap, "bench/hello/c%d", id);
}

/* persistent KV: connect, then one SET of the client's own key -- the
 * runtime's once-per-context "hostname" SET, TCPStore's constructor ADD. */
static int prep_kv_conn(int id, const void *vctx) {
  const wctx_t *c = vctx;
  uint8_t frame[FRAME];
  char key[64];
  g_open.fd = connect_blocking(c->port);
  if (g_open.fd < 0) return cfail(id, "connect to the KV server: %s", strerror(errno));
  g_open_secret = c->secret;
  g_close_open = close_kv_conn;
  asr_kv_msg_t m = {.opcode = ASR_KV_OP_SET,
                    .vtype = ASR_KV_VTYPE_BINARY,
                    .key_len = (uint16_t)hello_key(key, sizeof key, id),
                    .val_len = sizeof c->rep,
                    .secret = c->secret,
                    .key = (const uint8_t *)key,
                    .val = (const uint8_t *)&c->rep};
  asr_kv_msg_t r;
  asr_kv_frame_encode(frame, &m);
  if (kv_frame_rr(id, g_open.fd, frame, &r)) return 1;
  if (r.opcode != ASR_KV_OP_SET_ACK) return cfail(id, "SET %s answered %s", key, asr_kv_op_name(r.opcode));
  return 0;
}

/* raw: connect, then one echo request/response (verified). */
static int prep_raw_conn(int id, const void *vctx) {
  const wctx_t *c = vctx;
  uint8_t out[FRAME], in[FRAME];
  g_open.fd = connect_blocking(c->port);
  if (g_open.fd < 0) return cfail(id, "raw connect: %s", strerror(errno));
  g_close_open = close_raw_conn;
  fill_pattern(out, sizeof out, ((uint64_t)id << 40) ^ 0xfeed);
  if (write_full(g_open.fd, out, FRAME) || read_full(g_open.fd, in, FRAME))
    return cfail(id, "raw request/response failed: %s", strerror(errno));
  if (memcmp(in, out, FRAME) != 0) {
    report_mismatch(id, "raw echo", out, FRAME, in, FRAME);
    return 1;
  }
  return 0;
}

static int w_kv_persist(int id, const void *vctx, uint64_t *ops) {
  const wctx_t *c = vctx;
  uint8_t val[ADDR_LEN], frame[FRAME];
  char key[96];
  int fd = g_open.fd;
  int rc = 0;
  for (int i = 0; i + 1 < c->ops && !rc; i += 2) {
    int slot = (i / 2) % KEYS_PER_CLIENT;
    size_t klen = (size_t)snprintf(key, sizeof key, "bench/persist/c%d/k%d", id, slot);
    fill_pattern(val, sizeof val, ((uint64_t)id << 40) ^ ((uint64_t)c->rep << 32) ^ (uint64_t)i ^ 1);
    asr_kv_msg_t m = {.opcode = ASR_KV_OP_SET,
                      .vtype = ASR_KV_VTYPE_BINARY,
                      .key_len = (uint16_t)klen,
                      .val_len = sizeof val,
                      .secret = c->secret,
                      .key = (const uint8_t *)key,
                      .val = val};
    asr_kv_msg_t r;
    asr_kv_frame_encode(frame, &m);
    if ((rc = kv_frame_rr(id, fd, frame, &r)) != 0) break;
    if (r.opcode != ASR_KV_OP_SET_ACK) {
      rc = cfail(id, "SET %s answered %s", key, asr_kv_op_name(r.opcode));
      break;
    }
    m.opcode = ASR_KV_OP_GET;
    m.val_len = 0;
    m.val = NULL;
    asr_kv_frame_encode(frame, &m);
    if ((rc = kv_frame_rr(id, fd, frame, &r)) != 0) break;
    if (r.opcode != ASR_KV_OP_GET_BINARY) {
      rc = cfail(id, "GET %s answered %s", key, asr_kv_op_name(r.opcode));
      break;
    }
    if (r.val_len != sizeof val || memcmp(r.val, val, sizeof val) != 0) {
      report_mismatch(id, key, val, sizeof val, r.val, r.val_len);
      rc = 1;
      break;
    }
    *ops += 2;
  }
  return rc;
}

static int w_raw_persist(int id, const void *vctx, uint64_t *ops) {
  const wctx_t *c = vctx;
  uint8_t out[FRAME], in[FRAME];
  memset(out, 0x5a, sizeof out);
  int fd = g_open.fd;
  int rc = 0;
  for (int i = 0; i + 1 < c->ops; i += 2) {
    for (int k = 0; k < 2 && !rc; k++) {
      fill_pattern(out, 64, ((uint64_t)id << 40) ^ (uint64_t)(i + k));
      if (write_full(fd, out, FRAME) || read_full(fd, in, FRAME))
        rc = cfail(id, "raw persistent rr failed: %s", strerror(errno));
      else if (memcmp(in, out, FRAME) != 0) {
        report_mismatch(id, "raw echo", out, FRAME, in, FRAME);
        rc = 1;
      } else {
        (*ops)++;
      }
    }
    if (rc) break;
  }
  return rc;
}

/* --- rendezvous ---------------------------------------------------------- */

static size_t rdv_key(char *key, size_t cap, const char *tag, int rep, int rank) {
  return (size_t)snprintf(key, cap, "bench/rdv-%s/r%d/rank%d", tag, rep, rank);
}

static void rdv_addr(uint8_t *addr, int rep, int rank) {
  fill_pattern(addr, ADDR_LEN, 0xadd0000000000000ull ^ ((uint64_t)rep << 32) ^ (uint64_t)rank);
  snprintf((char *)addr, 24, "rank %d rep %d", rank, rep); /* readable head */
}

/* Each rank SETs its address, then GETs every rank's (retry=1) in rank order
 * starting after its own, one blocking GET after the other. */
static int w_kv_rdv_seq(int id, const void *vctx, uint64_t *ops) {
  const wctx_t *c = vctx;
  asr_kv_pool_opts_t o = kv_opts(c);
  uint8_t addr[ADDR_LEN], want[ADDR_LEN], got[ASR_KV_VAL_MAX];
  char key[96], err[700];
  rdv_addr(addr, c->rep, id);
  size_t klen = rdv_key(key, sizeof key, "seq", c->rep, id);
  int rc = asr_kv_set("127.0.0.1", c->port, key, klen, addr, sizeof addr, ASR_KV_VTYPE_BINARY, &o, err,
                      sizeof err);
  if (rc) return cfail(id, "rendezvous SET %s failed: %s", key, err);
  (*ops)++;
  for (int k = 1; k <= c->nranks; k++) {
    int peer = (id + k) % c->nranks;
    klen = rdv_key(key, sizeof key, "seq", c->rep, peer);
    size_t glen = 0;
    rc = asr_kv_get("127.0.0.1", c->port, key, klen, 1, got, sizeof got, &glen, &o, err, sizeof err);
    if (rc) return cfail(id, "rendezvous GET %s failed: %s", key, err);
    rdv_addr(want, c->rep, peer);
    if (glen != ADDR_LEN || memcmp(got, want, ADDR_LEN) != 0) {
      report_mismatch(id, key, want, ADDR_LEN, got, glen);
      return 1;
    }
    (*ops)++;
  }
  return 0;
}

typedef struct {
  uint8_t buf[ADDR_LEN];
  size_t len;
  int calls;
} get_slot_t;

static void get_slot_cb(void *arg, const uint8_t *val, size_t len) {
  get_slot_t *s = arg;
  s->len = len;
  s->calls++;
  memcpy(s->buf, val, len < ADDR_LEN ? len : ADDR_LEN);
}

/* A concurrent GET ends: count it (its slot keeps the value). */
static void conc_done(void *arg, asr_kv_call_t *call) {
  (void)call;
  (*(int *)arg)--;
}

/* The same, with all GETs in flight at once, each on a connection of its
 * own in the seed's form: a pool per GET, all on one loop (the seed's
 * client's one-request-per-connection pattern, driven by one thread). */
static int w_kv_rdv_conc(int id, const void *vctx, uint64_t *ops) {
  const wctx_t *c = vctx;
  asr_kv_pool_opts_t o = kv_opts(c);
  uint8_t addr[ADDR_LEN], want[ADDR_LEN];
  char key[96], err[700];
  asr_kv_pool_t *pools[RDV_RANKS] = {0};
  asr_kv_call_t *calls[RDV_RANKS] = {0};
  get_slot_t slots[RDV_RANKS];
  int n = c->nranks, rc = 0, pending = 0;
  memset(slots, 0, sizeof slots);

  rdv_addr(addr, c->rep, id);
  size_t klen = rdv_key(key, sizeof key, "conc", c->rep, id);
  rc = asr_kv_set("127.0.0.1", c->port, key, klen, addr, sizeof addr, ASR_KV_VTYPE_BINARY, &o, err,
                  sizeof err);
  if (rc) return cfail(id, "rendezvous SET %s failed: %s", key, err);
  (*ops)++;
  asr_loop_t *loop;
  if (asr_loop_new(&loop) != 0) return cfail(id, "asr_loop_new failed");
  o.idle_ms = CLIENT_TIMEOUT_MS;
  for (int k = 0; k < n; k++) {
    int peer = (id + 1 + k) % n;
    klen = rdv_key(key, sizeof key, "conc", c->rep, peer);
    if (asr_kv_pool_new(loop, &o, &pools[peer], err, sizeof err) != 0) {
      rc = cfail(id, "asr_kv_pool_new: %s", err);
      goto out;
    }
    rc = asr_kv_pool_get(pools[peer], "127.0.0.1", c->port, key, klen, ASR_KV_VTYPE_BINARY, 1, get_slot_cb,
                         &slots[peer], conc_done, &pending, &calls[peer]);
    if (rc) {
      rc = cfail(id, "asr_kv_pool_get(%s) failed: %d", key, rc);
      goto out;
    }
    pending++;
  }
  while (pending > 0)
    if (asr_loop_run_once(loop, ASR_LOOP_FOREVER) < 0) {
      rc = cfail(id, "the client's loop failed");
      goto out;
    }
  for (int p = 0; p < n; p++) {
    int prc = 0;
    asr_kv_call_done(calls[p], &prc);
    g_child_retries += asr_kv_call_retries(calls[p]);
    if (prc) {
      rc = cfail(id, "concurrent GET of rank %d failed: %s", p, asr_kv_call_error(calls[p]));
      goto out;
    }
    rdv_addr(want, c->rep, p);
    klen = rdv_key(key, sizeof key, "conc", c->rep, p);
    if (slots[p].calls != 1) {
      rc = cfail(id, "GET %s: callback ran %d times", key, slots[p].calls);
      goto out;
    }
    if (slots[p].len != ADDR_LEN || memcmp(slots[p].buf, want, ADDR_LEN) != 0) {
      report_mismatch(id, key, want, ADDR_LEN, slots[p].buf, slots[p].len);
      rc = 1;
      goto out;
    }
    (*ops)++;
  }
out:
  for (int p = 0; p < n; p++) {
    asr_kv_call_free(calls[p]);
    asr_kv_pool_free(pools[p]);
  }
  asr_loop_free(loop);
  return rc;
}

/* --- pipelined (kv_conn.h) ------------------------------------------------ */

typedef struct {
  asr_kv_call_t *call;
  int busy, is_get, id;
  long index; /* op number */
  uint8_t want[ADDR_LEN];
  uint8_t got[ADDR_LEN];
  size_t glen;
  int calls;
} pipe_slot_t;

typedef struct {
  int failed;
  uint64_t done;
  char err[800];
} pipe_state_t;

static pipe_state_t g_pipe;

static void pipe_value(void *arg, const uint8_t *val, size_t len) {
  pipe_slot_t *s = arg;
  s->calls++;
  s->glen = len;
  memcpy(s->got, val, len < ADDR_LEN ? len : ADDR_LEN);
}

static void pipe_done(void *arg, asr_kv_call_t *call) {
  pipe_slot_t *s = arg;
  int rc = 0;
  asr_kv_call_done(call, &rc);
  g_child_retries += asr_kv_call_retries(call);
  if (rc && !g_pipe.failed) {
    g_pipe.failed = 1;
    snprintf(g_pipe.err, sizeof g_pipe.err, "op %ld: %s", s->index, asr_kv_call_error(call));
  } else if (s->is_get && (s->calls != 1 || s->glen != ADDR_LEN || memcmp(s->got, s->want, ADDR_LEN) != 0) &&
             !g_pipe.failed) {
    g_pipe.failed = 1;
    snprintf(g_pipe.err, sizeof g_pipe.err,
             "op %ld: GET returned %zu bytes (%d calls) that differ from the SET", s->index, s->glen,
             s->calls);
  }
  asr_kv_call_free(call);
  s->call = NULL;
  s->busy = 0;
  g_pipe.done++;
}

static int pipe_setup(int id, const wctx_t *c, asr_loop_t **loop, asr_kv_pool_t **pool) {
  char err[256];
  if (asr_loop_new(loop) != 0) return cfail(id, "asr_loop_new failed");
  asr_kv_pool_opts_t o = {.secret = c->secret, .timeout_ms = CLIENT_TIMEOUT_MS};
  if (asr_kv_pool_new(*loop, &o, pool, err, sizeof err) != 0) return cfail(id, "asr_kv_pool_new: %s", err);
  memset(&g_pipe, 0, sizeof g_pipe);
  return 0;
}

static void pipe_teardown(asr_loop_t *loop, asr_kv_pool_t *pool) {
  asr_kv_pool_free(pool);
  asr_loop_free(loop);
}

static void close_kv_pool(void) { pipe_teardown(g_open.loop, g_open.pool); }

/* pipelined: the client's loop and pool, and one SET of its own key, which
 * opens the pool's connection (as prep_kv_conn). */
static int prep_kv_pool(int id, const void *vctx) {
  const wctx_t *c = vctx;
  if (pipe_setup(id, c, &g_open.loop, &g_open.pool)) return 1;
  g_close_open = close_kv_pool;
  static pipe_slot_t hello;
  char key[64];
  hello.busy = 1;
  if (asr_kv_pool_set(g_open.pool, "127.0.0.1", c->port, key, hello_key(key, sizeof key, id), &c->rep,
                      sizeof c->rep, ASR_KV_VTYPE_BINARY, pipe_done, &hello, &hello.call))
    return cfail(id, "cannot start the first SET");
  while (g_pipe.done < 1 && !g_pipe.failed)
    if (asr_loop_run_once(g_open.loop, 100) < 0) return cfail(id, "the client's loop failed");
  if (g_pipe.failed) return cfail(id, "the first SET: %s", g_pipe.err);
  memset(&g_pipe, 0, sizeof g_pipe);
  g_child_retries = 0;
  return 0;
}

/* asr, pipelined: PIPE_WINDOW requests in flight on the client's one
 * connection, SET/GET pairs of its own keys (a GET follows its SET on the
 * connection, which the server handles in order, so it sees that value). */
static int w_kv_pipe(int id, const void *vctx, uint64_t *ops) {
  const wctx_t *c = vctx;
  asr_loop_t *loop = g_open.loop;
  asr_kv_pool_t *pool = g_open.pool;
  static pipe_slot_t slots[PIPE_WINDOW];
  memset(slots, 0, sizeof slots);
  long next = 0, total = c->ops;
  char key[96];
  uint8_t val[ADDR_LEN];
  while ((long)g_pipe.done < total && !g_pipe.failed) {
    for (int k = 0; k + 1 < PIPE_WINDOW && next < total; k += 2) {
      if (slots[k].busy || slots[k + 1].busy) continue;
      long pair = next / 2;
      size_t klen = (size_t)snprintf(key, sizeof key, "bench/pipe/c%d/k%ld", id, pair % PIPE_KEYS);
      fill_pattern(val, sizeof val, ((uint64_t)id << 40) ^ ((uint64_t)c->rep << 32) ^ (uint64_t)pair ^ 2);
      pipe_slot_t *s = &slots[k], *g = &slots[k + 1];
      memset(s, 0, sizeof *s);
      memset(g, 0, sizeof *g);
      s->busy = g->busy = 1;
      s->index = next;
      g->index = next + 1;
      g->is_get = 1;
      memcpy(g->want, val, sizeof val);
      if (asr_kv_pool_set(pool, "127.0.0.1", c->port, key, klen, val, sizeof val, ASR_KV_VTYPE_BINARY,
                          pipe_done, s, &s->call) ||
          asr_kv_pool_get(pool, "127.0.0.1", c->port, key, klen, ASR_KV_VTYPE_BINARY, 0, pipe_value, g,
                          pipe_done, g, &g->call))
        return cfail(id, "cannot start a pipelined request");
      next += 2;
    }
    if (asr_loop_run_once(loop, 100) < 0) return cfail(id, "the client's loop failed");
  }
  int rc = g_pipe.failed ? cfail(id, "pipelined %s", g_pipe.err) : 0;
  for (int k = 0; k < PIPE_WINDOW; k++) asr_kv_call_free(slots[k].call);
  *ops = g_pipe.done;
  return rc;
}

/* raw, pipelined: the same window of echo request/responses on one
 * connection (every echo verified). */
static int w_raw_pipe(int id, const void *vctx, uint64_t *ops) {
  const wctx_t *c = vctx;
  int fd = g_open.fd;
  static uint8_t out[PIPE_WINDOW * FRAME], in[PIPE_WINDOW * FRAME];
  long sent = 0, recvd = 0, total = c->ops;
  int rc = 0;
  while (recvd < total && !rc) {
    long batch = 0;
    while (sent < total && sent - recvd < PIPE_WINDOW && batch < PIPE_WINDOW) {
      uint8_t *f = out + batch * FRAME;
      fill_pattern(f, 64, ((uint64_t)id << 40) ^ (uint64_t)sent);
      memset(f + 64, 0x5a, FRAME - 64);
      sent++, batch++;
    }
    if (batch && write_full(fd, out, (size_t)batch * FRAME))
      rc = cfail(id, "raw pipelined send: %s", strerror(errno));
    /* read what is due before sending more (half the window, or the rest),
     * as much of it as each recv brings */
    long until = sent - recvd > PIPE_WINDOW / 2 ? recvd + PIPE_WINDOW / 2 : sent;
    size_t have = 0;
    while (!rc && recvd < until) {
      ssize_t n = recv(fd, in + have, (size_t)(until - recvd) * FRAME - have, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        rc = cfail(id, "raw pipelined recv: %s", n ? strerror(errno) : "closed");
        break;
      }
      have += (size_t)n;
      size_t off = 0;
      for (; have - off >= FRAME && !rc; off += FRAME, recvd++) {
        uint8_t want[64];
        fill_pattern(want, 64, ((uint64_t)id << 40) ^ (uint64_t)recvd);
        if (memcmp(in + off, want, 64) != 0) {
          report_mismatch(id, "raw pipelined echo", want, 64, in + off, 64);
          rc = 1;
        }
      }
      memmove(in, in + off, have - off);
      have -= off;
    }
  }
  *ops = (uint64_t)recvd;
  return rc;
}

/* The pipelined rendezvous: the SET and all 64 GETs (retry: each held by
 * the server until its key is set) on one connection at once. */
static int w_kv_rdv_pipe(int id, const void *vctx, uint64_t *ops) {
  const wctx_t *c = vctx;
  asr_loop_t *loop = g_open.loop;
  asr_kv_pool_t *pool = g_open.pool;
  static pipe_slot_t slots[RDV_RANKS + 1];
  memset(slots, 0, sizeof slots);
  char key[96];
  uint8_t addr[ADDR_LEN];
  rdv_addr(addr, c->rep, id);
  size_t klen = rdv_key(key, sizeof key, "pipe", c->rep, id);
  slots[0].busy = 1;
  if (asr_kv_pool_set(pool, "127.0.0.1", c->port, key, klen, addr, sizeof addr, ASR_KV_VTYPE_BINARY,
                      pipe_done, &slots[0], &slots[0].call))
    return cfail(id, "cannot start the rendezvous SET");
  for (int k = 1; k <= c->nranks; k++) {
    int peer = (id + k) % c->nranks;
    pipe_slot_t *g = &slots[k];
    g->busy = g->is_get = 1;
    g->index = peer;
    rdv_addr(g->want, c->rep, peer);
    klen = rdv_key(key, sizeof key, "pipe", c->rep, peer);
    if (asr_kv_pool_get(pool, "127.0.0.1", c->port, key, klen, ASR_KV_VTYPE_BINARY, 1, pipe_value, g,
                        pipe_done, g, &g->call))
      return cfail(id, "cannot start the rendezvous GET of rank %d", peer);
  }
  while ((int)g_pipe.done < c->nranks + 1 && !g_pipe.failed)
    if (asr_loop_run_once(loop, 100) < 0) return cfail(id, "the client's loop failed");
  int rc = g_pipe.failed ? cfail(id, "pipelined rendezvous: %s", g_pipe.err) : 0;
  for (int k = 0; k <= c->nranks; k++) asr_kv_call_free(slots[k].call);
  *ops = g_pipe.done;
  return rc;
}

/* raw floor of the pipelined rendezvous: 65 echo request/responses written
 * at once on one connection, then read. */
static int w_raw_rdv_pipe(int id, const void *vctx, uint64_t *ops) {
  const wctx_t *c = vctx;
  wctx_t w = *c;
  w.ops = c->nranks + 1;
  return w_raw_pipe(id, &w, ops);
}

/* raw rendezvous floor: the same 1 + nranks request/responses, sequential. */
static int w_raw_rdv_seq(int id, const void *vctx, uint64_t *ops) {
  const wctx_t *c = vctx;
  for (int k = 0; k <= c->nranks; k++) {
    if (raw_rr_once(id, c->port, ((uint64_t)id << 40) ^ (uint64_t)k)) return 1;
    (*ops)++;
  }
  return 0;
}

/* raw rendezvous floor, concurrent: one rr, then nranks non-blocking
 * connect/send/recv/close driven by one poll() set. */
static int w_raw_rdv_conc(int id, const void *vctx, uint64_t *ops) {
  const wctx_t *c = vctx;
  struct {
    int fd, state; /* 0 connecting, 1 receiving, 2 done */
    size_t got;
    uint8_t out[FRAME], in[FRAME];
  } *s = calloc((size_t)c->nranks, sizeof *s);
  struct pollfd pfd[RDV_RANKS];
  int map[RDV_RANKS], rc = 0;
  if (!s) return cfail(id, "out of memory");
  if (raw_rr_once(id, c->port, (uint64_t)id << 40)) {
    free(s);
    return 1;
  }
  (*ops)++;
  struct sockaddr_in a = loopback(c->port);
  for (int k = 0; k < c->nranks; k++) {
    s[k].fd = -1;
    fill_pattern(s[k].out, 64, ((uint64_t)id << 40) ^ (uint64_t)(k + 1));
    memset(s[k].out + 64, 0x5a, FRAME - 64);
  }
  for (int k = 0; k < c->nranks && !rc; k++) {
    for (int tries = 0;; tries++) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        rc = cfail(id, "socket: %s", strerror(errno));
        break;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 || errno == EINPROGRESS) {
        s[k].fd = fd;
        break;
      }
      int e = errno;
      close(fd);
      if ((e == EADDRNOTAVAIL || e == EAGAIN) && tries < 1000) {
        usleep(1000);
        continue;
      }
      rc = cfail(id, "raw connect: %s", strerror(e));
      break;
    }
  }
  uint64_t deadline = now_ns() + (uint64_t)CLIENT_TIMEOUT_MS * 1000000ull;
  for (int left = c->nranks; left > 0 && !rc;) {
    int np = 0;
    for (int k = 0; k < c->nranks; k++) {
      if (s[k].state == 2) continue;
      pfd[np] = (struct pollfd){.fd = s[k].fd, .events = s[k].state == 0 ? POLLOUT : POLLIN};
      map[np++] = k;
    }
    int pr = poll(pfd, (nfds_t)np, 1000);
    if (pr < 0 && errno != EINTR) {
      rc = cfail(id, "poll: %s", strerror(errno));
      break;
    }
    if (now_ns() > deadline) {
      rc = cfail(id, "raw concurrent rr timed out");
      break;
    }
    for (int j = 0; j < np && pr > 0; j++) {
      if (!pfd[j].revents) continue;
      int k = map[j];
      if (s[k].state == 0) {
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(s[k].fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err || send(s[k].fd, s[k].out, FRAME, MSG_NOSIGNAL) != FRAME) {
          rc = cfail(id, "raw concurrent connect/send: %s", strerror(err ? err : errno));
          break;
        }
        s[k].state = 1;
      } else {
        ssize_t r = recv(s[k].fd, s[k].in + s[k].got, FRAME - s[k].got, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (r <= 0) {
          rc = cfail(id, "raw concurrent recv: %s", r ? strerror(errno) : "closed");
          break;
        }
        s[k].got += (size_t)r;
        if (s[k].got < FRAME) continue;
        if (memcmp(s[k].in, s[k].out, FRAME) != 0) {
          report_mismatch(id, "raw echo", s[k].out, FRAME, s[k].in, FRAME);
          rc = 1;
          break;
        }
        close(s[k].fd);
        s[k].fd = -1;
        s[k].state = 2;
        left--;
        (*ops)++;
      }
    }
  }
  for (int k = 0; k < c->nranks; k++)
    if (s[k].fd >= 0) close(s[k].fd);
  free(s);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* The raw echo server: epoll, level-triggered, non-blocking; answers the
 * whole 1156-byte frames that one recv brings (up to ECHO_FRAMES) with one
 * send of the same bytes, as asrkv's pipelined connections batch theirs. */

#define ECHO_FRAMES 64

typedef struct {
  int fd;
  int out_armed;      /* waiting for EPOLLOUT */
  size_t len;         /* bytes read and not yet echoed */
  size_t whole, sent; /* the whole frames at the front being echoed, and how much of them is sent */
  uint8_t buf[ECHO_FRAMES * FRAME];
} echo_conn_t;

static void echo_close(echo_conn_t *c) {
  close(c->fd); /* also leaves the epoll set */
  free(c);
}

static void echo_serve(int lfd) {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) _exit(1);
  static char listen_tag;
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &listen_tag};
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  struct epoll_event evs[256];
  for (;;) {
    int n = epoll_wait(ep, evs, 256, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      _exit(1);
    }
    for (int i = 0; i < n; i++) {
      if (evs[i].data.ptr == &listen_tag) {
        for (int k = 0; k < 256; k++) {
          int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0) break;
          int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          echo_conn_t *c = malloc(sizeof *c);
          if (!c) {
            close(fd);
            continue;
          }
          c->fd = fd;
          c->out_armed = 0;
          c->len = c->whole = c->sent = 0;
          struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
          if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev) != 0) echo_close(c);
        }
        continue;
      }
      echo_conn_t *c = evs[i].data.ptr;
      for (;;) {
        if (c->whole) {
          ssize_t w = send(c->fd, c->buf + c->sent, c->whole - c->sent, MSG_NOSIGNAL);
          if (w > 0) {
            c->sent += (size_t)w;
            if (c->sent < c->whole) continue;
            memmove(c->buf, c->buf + c->whole, c->len - c->whole);
            c->len -= c->whole;
            c->whole = c->sent = 0;
            if (c->out_armed) {
              struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
              epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &cev);
              c->out_armed = 0;
            }
            break; /* the next frames: the next EPOLLIN */
          }
          if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct epoll_event cev = {.events = EPOLLOUT, .data.ptr = c};
            epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &cev);
            c->out_armed = 1;
            break;
          }
          echo_close(c);
          break;
        }
        ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (r > 0) {
          c->len += (size_t)r;
          c->whole = c->len / FRAME * FRAME;
          c->sent = 0;
          continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) break;
        echo_close(c); /* EOF or error */
        break;
      }
    }
  }
}

static pid_t start_echo_server(uint16_t *port) {
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (lfd < 0) die("echo server socket: %s", strerror(errno));
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = loopback(0);
  socklen_t al = sizeof a;
  if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 4096) ||
      getsockname(lfd, (struct sockaddr *)&a, &al))
    die("echo server bind/listen on 127.0.0.1: %s", strerror(errno));
  *port = ntohs(a.sin_port);
  pid_t p = fork_child();
  if (p == 0) {
    echo_serve(lfd);
    _exit(0);
  }
  close(lfd);
  return p;
}

/* ------------------------------------------------------------------------ */
/* The real KV server: fork + exec asrkv serve, read its READY line. */

typedef struct {
  pid_t pid;
  int out; /* its stdout */
  uint16_t port;
} kv_server_t;

static void find_asrkv(char *path, size_t cap) {
  const char *bd = getenv("ASR_BUILDDIR");
  char dir[PATH_MAX];
  if (bd && *bd) {
    snprintf(dir, sizeof dir, "%s", bd);
  } else {
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0) die("readlink /proc/self/exe: %s (set ASR_BUILDDIR)", strerror(errno));
    dir[n] = '\0';
    /* <builddir>/tests/bench[/.libs]/kv_bench -> <builddir> */
    char *s = strrchr(dir, '/');
    if (s) *s = '\0';
    size_t l = strlen(dir);
    if (l >= 6 && strcmp(dir + l - 6, "/.libs") == 0) dir[l - 6] = '\0';
    l = strlen(dir);
    if (l >= 12 && strcmp(dir + l - 12, "/tests/bench") == 0)
      dir[l - 12] = '\0';
    else
      die("cannot derive the build dir from %s (set ASR_BUILDDIR)", dir);
  }
  snprintf(path, cap, "%s/bootstrap/asrkv", dir);
  if (access(path, X_OK) != 0)
    die("%s: %s (build it with `make bench`, or set ASR_BUILDDIR)", path, strerror(errno));
}

static void start_kv_server(const char *asrkv, const char *secret_hex, kv_server_t *s) {
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC)) die("pipe: %s", strerror(errno));
  pid_t p = fork_child();
  if (p == 0) {
    setpgid(0, 0);
    dup2(pfd[1], 1);
    setenv("ASR_JOB_SECRET", secret_hex, 1);
    execl(asrkv, "asrkv", "serve", "--port", "0", "--bind", "127.0.0.1", (char *)NULL);
    fprintf(stderr, "kv_bench: exec %s: %s\n", asrkv, strerror(errno));
    _exit(127);
  }
  setpgid(p, p); /* also here: no window in which kill_all misses it */
  g_group = p;
  close(pfd[1]);
  s->pid = p;
  s->out = pfd[0];
  char line[256];
  size_t len = 0;
  uint64_t until = now_ns() + 10000000000ull;
  while (!memchr(line, '\n', len)) {
    struct pollfd q = {.fd = s->out, .events = POLLIN};
    int left = (int)((until - now_ns()) / 1000000ull);
    if (now_ns() >= until || poll(&q, 1, left > 0 ? left : 0) <= 0)
      die("asrkv serve did not print READY within 10 s");
    ssize_t r = read(s->out, line + len, sizeof line - 1 - len);
    if (r <= 0) die("asrkv serve exited before READY (see its stderr above)");
    len += (size_t)r;
    if (len >= sizeof line - 1) break;
  }
  line[len] = '\0';
  unsigned port = 0;
  long rpid = 0;
  if (sscanf(line, "READY port=%u pid=%ld", &port, &rpid) != 2 || port == 0 || port > 65535)
    die("unexpected first line from asrkv serve: %s", line);
  s->port = (uint16_t)port;
}

/* SIGTERM, collect the STOPPED line (server counters), reap. */
static void stop_kv_server(kv_server_t *s, char *stats, size_t cap) {
  stats[0] = '\0';
  kill(-s->pid, SIGTERM); /* the group: a wrapper (strace, valgrind) passes it on too */
  char buf[1024];
  size_t len = 0;
  uint64_t until = now_ns() + 5000000000ull;
  for (;;) {
    struct pollfd q = {.fd = s->out, .events = POLLIN};
    if (now_ns() >= until || poll(&q, 1, 200) < 0) break;
    if (!q.revents) continue;
    ssize_t r = read(s->out, buf + len, sizeof buf - 1 - len);
    if (r <= 0) break;
    len += (size_t)r;
    if (len >= sizeof buf - 1) break;
  }
  buf[len] = '\0';
  char *st = strstr(buf, "STOPPED");
  if (st) {
    char *nl = strchr(st, '\n');
    if (nl) *nl = '\0';
    snprintf(stats, cap, "%s", st);
  }
  close(s->out);
  /* Wait (up to 2 s) for it to exit without reaping it: while it is a zombie
   * its group id stays reserved, so killing the group hits only what it left
   * behind. Then reap it (reap() SIGKILLs it first if it still runs). */
  siginfo_t si;
  for (int i = 0; i < 2000; i++) {
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)s->pid, &si, WEXITED | WNOWAIT | WNOHANG) != 0 || si.si_pid == s->pid) break;
    usleep(1000);
  }
  kill(-s->pid, SIGKILL);
  int status = reap(s->pid, 0);
  g_group = 0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fprintf(stderr, "kv_bench: warning: asrkv serve ended with status 0x%x\n", status);
}

/* ------------------------------------------------------------------------ */
/* PyTorch's TCPStore, measured in the same run (kv_bench.c's header, 3).
 * One python process (torch imported once) takes commands on stdin and
 * answers one line each on stdout:
 *   "ops CLIENTS OPS REP"  -> "OK WALL_S OPS" | "FAIL why"
 *   "rdv RANKS REP"        -> "OK WALL_S OPS" | "FAIL why"
 * It first prints "READY PORT VERSION", or "NOTORCH why" and exits. The
 * TCPStore server runs in a child it forks before anything else (so no
 * client is forked from a process with the server's threads). */

static const char tcpstore_script[] =
    "import os, sys, time, struct, datetime\n"
    "try:\n"
    "    import torch\n"
    "    from torch.distributed import TCPStore\n"
    "except Exception as e:\n"
    "    print('NOTORCH', type(e).__name__, str(e).replace('\\n', ' ')[:160], flush=True)\n"
    "    sys.exit(0)\n"
    "TMO = datetime.timedelta(seconds=60)\n"
    "r, w = os.pipe()\n"
    "srv = os.fork()\n"
    "if srv == 0:\n"
    "    os.close(r)\n"
    "    try:\n"
    "        st = TCPStore('127.0.0.1', 0, 1, True, TMO, wait_for_workers=False)\n"
    "        os.write(w, b'%d\\n' % st.port)\n"
    "    except Exception as e:\n"
    "        os.write(w, b'0\\n')\n"
    "        os._exit(1)\n"
    "    os.close(w)\n"
    "    while True:\n"
    "        time.sleep(3600)\n"
    "os.close(w)\n"
    "port = int(os.read(r, 64).split()[0] or 0)\n"
    "os.close(r)\n"
    "if not port:\n"
    "    print('NOTORCH the TCPStore server did not start', flush=True)\n"
    "    sys.exit(0)\n"
    "print('READY', port, torch.__version__, flush=True)\n"
    "def val(cid, rep, i):\n"
    "    return struct.pack('<QQQQ', cid, rep, i, 0x5a5a) * 4\n"
    "def addr(rep, rank):\n"
    "    return struct.pack('<QQ', rep, rank) * 8\n"
    "def work(kind, cid, n, ops, rep, store):\n"
    "    done = 0\n"
    "    if kind == 'ops':\n"
    "        for i in range(0, ops - 1, 2):\n"
    "            k = 'bench/ops/c%d/k%d' % (cid, (i // 2) % 16)\n"
    "            v = val(cid, rep, i)\n"
    "            store.set(k, v)\n"
    "            if store.get(k) != v:\n"
    "                raise RuntimeError('value mismatch for ' + k)\n"
    "            done += 2\n"
    "    else:\n"
    "        store.set('bench/rdv/r%d/rank%d' % (rep, cid), addr(rep, cid))\n"
    "        done += 1\n"
    "        for k in range(1, n + 1):\n"
    "            peer = (cid + k) % n\n"
    "            if store.get('bench/rdv/r%d/rank%d' % (rep, peer)) != addr(rep, peer):\n"
    "                raise RuntimeError('rendezvous value mismatch for rank %d' % peer)\n"
    "            done += 1\n"
    "    return done\n"
    "for line in sys.stdin:\n"
    "    a = line.split()\n"
    "    if not a or a[0] == 'quit':\n"
    "        break\n"
    "    kind = a[0]\n"
    "    n = int(a[1])\n"
    "    ops = int(a[2]) if kind == 'ops' else 0\n"
    "    rep = int(a[-1])\n"
    "    ready_r, ready_w = os.pipe()\n"
    "    leave_r, leave_w = os.pipe()\n"
    "    go_r, go_w = os.pipe()\n"
    "    res_r, res_w = os.pipe()\n"
    "    kids = []\n"
    "    for cid in range(n):\n"
    "        pid = os.fork()\n"
    "        if pid == 0:\n"
    "            code = 1\n"
    "            try:\n"
    "                os.close(ready_r); os.close(go_w); os.close(res_r); os.close(leave_w)\n"
    "                store = TCPStore('127.0.0.1', port, 1, False, TMO)\n"
    "                os.write(ready_w, b'r')\n"
    "                os.read(go_r, 1)\n"
    "                done = work(kind, cid, n, ops, rep, store)\n"
    "                os.write(res_w, b'%d %d\\n' % (time.monotonic_ns(), done))\n"
    "                code = 0\n"
    "                os.close(res_w)\n"
    "                os.read(leave_r, 1)\n"
    "            except Exception as e:\n"
    "                sys.stderr.write('kv_bench: TCPStore client %d: %s\\n' % (cid, e))\n"
    "            os._exit(code)\n"
    "        kids.append(pid)\n"
    "    os.close(ready_w); os.close(go_r); os.close(res_w)\n"
    "    got = 0\n"
    "    while got < n:\n"
    "        b = os.read(ready_r, 256)\n"
    "        if not b:\n"
    "            break\n"
    "        got += len(b)\n"
    "    t0 = time.monotonic_ns()\n"
    "    os.close(go_w)\n"
    "    out = b''\n"
    "    while True:\n"
    "        b = os.read(res_r, 65536)\n"
    "        if not b:\n"
    "            break\n"
    "        out += b\n"
    "    os.close(ready_r); os.close(res_r); os.close(leave_w); os.close(leave_r)\n"
    "    bad = 0\n"
    "    for pid in kids:\n"
    "        _, status = os.waitpid(pid, 0)\n"
    "        bad += status != 0\n"
    "    rows = [l.split() for l in out.decode().splitlines()]\n"
    "    if got < n or bad or len(rows) != n:\n"
    "        print('FAIL %d of %d clients ready, %d failed, %d results' % (got, n, bad, len(rows)), "
    "flush=True)\n"
    "        continue\n"
    "    t_end = max(int(x[0]) for x in rows)\n"
    "    print('OK %.9f %d' % ((t_end - t0) / 1e9, sum(int(x[1]) for x in rows)), flush=True)\n";

typedef struct {
  pid_t pid;
  FILE *in, *out; /* its stdin and stdout */
  char version[64];
  char why[600]; /* why it is not there ("" when it is) */
} tcpstore_t;

/* Starts the python process. On any failure t->pid is 0 and t->why says
 * why (the column then reads "not installed"). */
static void tcpstore_start(tcpstore_t *t) {
  memset(t, 0, sizeof *t);
  const char *py = "/usr/bin/python3";
  if (access(py, X_OK) != 0) {
    snprintf(t->why, sizeof t->why, "%s: %s", py, strerror(errno));
    return;
  }
  int to[2], from[2];
  if (pipe2(to, O_CLOEXEC) || pipe2(from, O_CLOEXEC)) die("pipe: %s", strerror(errno));
  pid_t p = fork_child();
  if (p == 0) {
    setpgid(0, 0);
    dup2(to[0], 0);
    dup2(from[1], 1);
    execl(py, "python3", "-c", tcpstore_script, (char *)NULL);
    _exit(127);
  }
  setpgid(p, p);
  g_group_py = p;
  close(to[0]);
  close(from[1]);
  t->pid = p;
  t->in = fdopen(to[1], "w");
  t->out = fdopen(from[0], "r");
  char line[512];
  struct pollfd q = {.fd = from[0], .events = POLLIN};
  if (poll(&q, 1, 60000) <= 0 || !fgets(line, sizeof line, t->out)) {
    snprintf(t->why, sizeof t->why, "python3 did not answer");
  } else if (strncmp(line, "READY ", 6) == 0) {
    unsigned port;
    if (sscanf(line, "READY %u %63s", &port, t->version) == 2) return;
    snprintf(t->why, sizeof t->why, "unexpected line: %s", line);
  } else {
    line[strcspn(line, "\n")] = '\0';
    snprintf(t->why, sizeof t->why, "%s", strncmp(line, "NOTORCH ", 8) == 0 ? line + 8 : line);
  }
  kill(-p, SIGKILL);
  reap(p, 3000);
  g_group_py = 0;
  fclose(t->in);
  fclose(t->out);
  t->pid = 0;
}

/* One measurement; returns 0 with *wall_s and *ops, or -1 (fails the run). */
static int tcpstore_run(tcpstore_t *t, const char *cmd, double *wall_s, uint64_t *ops) {
  char line[512];
  fprintf(t->in, "%s\n", cmd);
  fflush(t->in);
  struct pollfd q = {.fd = fileno(t->out), .events = POLLIN};
  if (poll(&q, 1, PHASE_TIMEOUT_MS) <= 0 || !fgets(line, sizeof line, t->out)) {
    fprintf(stderr, "kv_bench: FAIL: TCPStore %s: no answer from python3\n", cmd);
    return -1;
  }
  unsigned long long n = 0;
  if (sscanf(line, "OK %lf %llu", wall_s, &n) != 2) {
    fprintf(stderr, "kv_bench: FAIL: TCPStore %s: %s", cmd, line);
    return -1;
  }
  *ops = n;
  return 0;
}

static void tcpstore_stop(tcpstore_t *t) {
  if (!t->pid) return;
  fprintf(t->in, "quit\n");
  fclose(t->in);
  fclose(t->out);
  kill(-t->pid, SIGKILL); /* it and its TCPStore server child */
  reap(t->pid, 3000);
  g_group_py = 0;
}

/* ------------------------------------------------------------------------ */
/* Statistics and output. */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
  double t[64];
  memcpy(t, v, sizeof(double) * (size_t)n);
  qsort(t, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

enum { M_OPS1, M_OPS8, M_OPS32, M_P1, M_P32, M_PIPE1, M_PIPE8, M_PIPE32, M_RDV, M_RDVC, M_RDVP, M_COUNT };
enum { TS_NONE = 0, TS_OPS, TS_RDV }; /* the TCPStore measurement a row is set beside */

static const struct {
  const char *name; /* for -m */
  const char *label;
  int clients;
  int is_ms; /* 1: value is wall ms (lower is better); 0: ops/s */
  int kind;  /* 0 one connection per op, 1 persistent, 2 pipelined */
  int ops;   /* default operations per client (ops/s figures); sized for ~0.5 s a run */
  int ts;    /* TS_* */
} metrics[M_COUNT] = {
    [M_OPS1] = {"ops1", "ops/s, 1 client", 1, 0, 0, 4000, TS_OPS},
    [M_OPS8] = {"ops8", "ops/s, 8 clients", 8, 0, 0, 1000, TS_OPS},
    [M_OPS32] = {"ops32", "ops/s, 32 clients", 32, 0, 0, 400, TS_OPS},
    [M_P1] = {"p1", "ops/s, 1 client, persistent conn", 1, 0, 1, 8000, TS_OPS},
    [M_P32] = {"p32", "ops/s, 32 clients, persistent conn", 32, 0, 1, 1000, TS_OPS},
    [M_PIPE1] = {"pipe1", "ops/s, 1 client, pipelined", 1, 0, 2, 40000, TS_OPS},
    [M_PIPE8] = {"pipe8", "ops/s, 8 clients, pipelined", 8, 0, 2, 10000, TS_OPS},
    [M_PIPE32] = {"pipe32", "ops/s, 32 clients, pipelined", 32, 0, 2, 4000, TS_OPS},
    [M_RDV] = {"rdv", "64-client rendezvous (ms)", RDV_RANKS, 1, 0, 0, TS_RDV},
    [M_RDVC] = {"rdvc", "64-client rendezvous, concurrent GETs (ms)", RDV_RANKS, 1, 0, 0, TS_RDV},
    [M_RDVP] = {"rdvp", "64-client rendezvous, pipelined (ms)", RDV_RANKS, 1, 2, 0, TS_RDV},
};

/* TCPStore's operations per client, by client count: the one-connection-
 * per-op rows' counts (about 0.5 s a run for it too). */
static int tcpstore_ops(int clients) { return clients == 1 ? 4000 : clients == 8 ? 1000 : 400; }

static void usage(FILE *f) {
  fprintf(f,
          "usage: kv_bench [-r REPS] [-n OPS] [-m LIST] [-q] [-v]\n"
          "  -r REPS  repetitions per figure; the median is reported (default 5, and 15 for\n"
          "           the rendezvous rows)\n"
          "  -n OPS   operations per client in every ops/s run (default: 4000 for 1 client,\n"
          "           1000 for 8, 400 for 32; persistent: 8000 for 1, 1000 for 32)\n"
          "  -q       quick smoke test: 1/20 of the default ops, 1 repetition\n"
          "           pipelined: 40000 for 1, 10000 for 8, 4000 for 32)\n"
          "  -m LIST  only these figures, comma-separated:\n"
          "           ops1,ops8,ops32,p1,p32,pipe1,pipe8,pipe32,rdv,rdvc,rdvp\n"
          "  -T       no TCPStore column (do not start python3)\n"
          "  -v       print every sample\n"
          "The KV server is <builddir>/bootstrap/asrkv (builddir from ASR_BUILDDIR or /proc/self/exe).\n"
          "PyTorch's TCPStore is measured in the same run through /usr/bin/python3 -c 'import torch...'.\n");
}

int main(int argc, char **argv) {
  int reps = 5, ops = 0, quick = 0, opt, reps_set = 0, no_tcpstore = 0;
  int sel[M_COUNT];
  for (int m = 0; m < M_COUNT; m++) sel[m] = 1;
  while ((opt = getopt(argc, argv, "r:n:m:qvTh")) != -1) {
    switch (opt) {
      case 'm': {
        char list[256];
        snprintf(list, sizeof list, "%s", optarg);
        for (int m = 0; m < M_COUNT; m++) sel[m] = 0;
        for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
          int found = 0;
          for (int m = 0; m < M_COUNT; m++)
            if (strcmp(t, metrics[m].name) == 0) sel[m] = found = 1;
          if (!found) {
            fprintf(stderr, "kv_bench: -m: unknown figure '%s'\n", t);
            return 2;
          }
        }
        break;
      }
      case 'r':
        reps = atoi(optarg);
        reps_set = 1;
        if (reps < 1 || reps > 64) {
          fprintf(stderr, "kv_bench: -r wants 1..64\n");
          return 2;
        }
        break;
      case 'n':
        ops = atoi(optarg);
        if (ops < 2 || ops > 10000000) {
          fprintf(stderr, "kv_bench: -n wants 2..10000000\n");
          return 2;
        }
        break;
      case 'q': quick = 1; break;
      case 'v': g_verbose = 1; break;
      case 'T': no_tcpstore = 1; break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (optind != argc) {
    usage(stderr);
    return 2;
  }
  if (quick && !reps_set) reps = 1;
  /* Repetitions per row: a rendezvous sample (one burst of 64 processes on
   * however few cores) swings more than an ops/s run of about 0.5 s and
   * costs less, so without -r those rows take three times as many. */
  int mreps[M_COUNT], max_reps = 0;
  for (int m = 0; m < M_COUNT; m++) {
    mreps[m] = metrics[m].is_ms && !reps_set && !quick ? 3 * reps : reps;
    if (mreps[m] > 64) mreps[m] = 64;
    if (sel[m] && mreps[m] > max_reps) max_reps = mreps[m];
  }
  int mops[M_COUNT]; /* operations per client, even (SET/GET pairs) */
  for (int m = 0; m < M_COUNT; m++) {
    mops[m] = ops ? ops : quick ? metrics[m].ops / 20 : metrics[m].ops;
    if (mops[m] < 2) mops[m] = 2;
    mops[m] &= ~1;
  }

  g_parent = getpid();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  char asrkv[PATH_MAX + 32];
  find_asrkv(asrkv, sizeof asrkv);

  /* A job secret of our own, so the secret check runs as in a real job. */
  uint8_t secret[ASR_KV_SECRET_LEN];
  char secret_hex[ASR_KV_SECRET_HEX_LEN + 1];
  if (asr_kv_secret_generate(secret) != 0) die("cannot generate a job secret");
  asr_kv_secret_to_hex(secret, secret_hex);

  kv_server_t kv;
  uint16_t echo_port;
  start_kv_server(asrkv, secret_hex, &kv);
  pid_t echo = start_echo_server(&echo_port);
  g_watch[0] = kv.pid;
  g_watch[1] = echo;
  if (g_verbose)
    printf("asrkv serve pid %ld on 127.0.0.1:%u, echo server pid %ld on 127.0.0.1:%u\n", (long)kv.pid,
           kv.port, (long)echo, echo_port);
  tcpstore_t ts;
  memset(&ts, 0, sizeof ts);
  if (no_tcpstore)
    snprintf(ts.why, sizeof ts.why, "not measured (-T)");
  else
    tcpstore_start(&ts);
  if (!ts.pid) fprintf(stderr, "kv_bench: TCPStore column: not installed (%s)\n", ts.why);

  double asr[M_COUNT][64], raw[M_COUNT][64], tcp[M_COUNT][64];
  /* TCPStore per repetition, by what it measures: rendezvous, or ops with
   * 1, 8 or 32 clients; each measured once a repetition, beside the first
   * row that wants it, and set beside every such row */
  double ts_val[4][64];
  int ts_have[4][64];
  memset(ts_have, 0, sizeof ts_have);
  uint64_t t_start = now_ns();
  for (int r = 0; r < max_reps; r++) {
    for (int m = 0; m < M_COUNT; m++) {
      if (!sel[m] || r >= mreps[m]) continue;
      wctx_t ca = {.port = kv.port, .ops = mops[m], .rep = r, .nranks = RDV_RANKS, .secret = secret};
      wctx_t cr = ca;
      cr.port = echo_port;
      work_fn wa, wr;
      prep_fn pa = NULL, pr = NULL; /* persistent connections open before the gate */
      if (metrics[m].kind == 1) pa = prep_kv_conn, pr = prep_raw_conn;
      if (metrics[m].kind == 2) pa = prep_kv_pool, pr = prep_raw_conn;
      if (m == M_RDV) {
        wa = w_kv_rdv_seq;
        wr = w_raw_rdv_seq;
      } else if (m == M_RDVC) {
        wa = w_kv_rdv_conc;
        wr = w_raw_rdv_conc;
      } else if (m == M_RDVP) {
        wa = w_kv_rdv_pipe;
        wr = w_raw_rdv_pipe;
      } else if (metrics[m].kind == 2) {
        wa = w_kv_pipe;
        wr = w_raw_pipe;
      } else if (metrics[m].kind == 1) {
        wa = w_kv_persist;
        wr = w_raw_persist;
      } else {
        wa = w_kv_ops;
        wr = w_raw_ops;
      }
      int tsi = metrics[m].ts == TS_RDV ? 3 : metrics[m].clients == 1 ? 0 : metrics[m].clients == 8 ? 1 : 2;
      int want_ts = ts.pid && metrics[m].ts != TS_NONE && !ts_have[tsi][r];
      double ta, tr;
      uint64_t na = 0, nr = 0, retries = 0;
      char what[128];
      /* the order rotates from repetition to repetition: no order bias */
      for (int k = 0; k < 3; k++) {
        int which = (k + r) % 3; /* 0 asr, 1 raw, 2 TCPStore */
        if (which == 0) {
          snprintf(what, sizeof what, "asr %s (rep %d)", metrics[m].label, r + 1);
          if (run_phase(what, metrics[m].clients, pa, wa, &ca, &ta, &na)) die("%s failed", what);
          retries = g_phase_retries;
        } else if (which == 1) {
          snprintf(what, sizeof what, "raw %s (rep %d)", metrics[m].label, r + 1);
          if (run_phase(what, metrics[m].clients, pr, wr, &cr, &tr, &nr)) die("%s failed", what);
        } else if (want_ts) {
          char cmd[96];
          int cl = metrics[m].clients;
          int tops = ops ? ops : quick ? tcpstore_ops(cl) / 20 : tcpstore_ops(cl);
          tops = tops < 2 ? 2 : tops & ~1;
          if (metrics[m].ts == TS_RDV)
            snprintf(cmd, sizeof cmd, "rdv %d %d", RDV_RANKS, r);
          else
            snprintf(cmd, sizeof cmd, "ops %d %d %d", cl, tops, r);
          double tw;
          uint64_t tn;
          if (tcpstore_run(&ts, cmd, &tw, &tn)) die("TCPStore %s failed", cmd);
          uint64_t twant =
              metrics[m].ts == TS_RDV ? (uint64_t)RDV_RANKS * (RDV_RANKS + 1) : (uint64_t)cl * (uint64_t)tops;
          if (tn != twant)
            die("TCPStore %s: %llu ops, expected %llu", cmd, (unsigned long long)tn,
                (unsigned long long)twant);
          ts_val[tsi][r] = metrics[m].ts == TS_RDV ? tw * 1e3 : (double)tn / tw;
          ts_have[tsi][r] = 1;
        }
      }
      tcp[m][r] = ts_have[tsi][r] ? ts_val[tsi][r] : 0;
      if (metrics[m].is_ms) {
        asr[m][r] = ta * 1e3;
        raw[m][r] = tr * 1e3;
      } else {
        uint64_t want = (uint64_t)metrics[m].clients * (uint64_t)mops[m];
        if (na != want || nr != want)
          die("%s: %llu asr / %llu raw ops completed, expected %llu", metrics[m].label,
              (unsigned long long)na, (unsigned long long)nr, (unsigned long long)want);
        asr[m][r] = (double)na / ta;
        raw[m][r] = (double)nr / tr;
      }
      if (g_verbose)
        printf("  rep %d %-44s asr %10.1f  raw %10.1f  TCPStore %10.1f  (asr retries %llu)\n", r + 1,
               metrics[m].label, asr[m][r], raw[m][r], tcp[m][r], (unsigned long long)retries);
    }
  }
  double total_s = (double)(now_ns() - t_start) / 1e9;

  char stats[512];
  g_watch[0] = g_watch[1] = 0;
  stop_kv_server(&kv, stats, sizeof stats);
  kill(echo, SIGKILL);
  reap(echo, 3000);
  tcpstore_stop(&ts);

  printf("asr KV benchmark (loopback, %d-byte frames, one TCP connection per op unless noted), median of %d",
         FRAME, reps);
  if (mreps[M_RDV] != reps) printf(" (rendezvous rows: of %d)", mreps[M_RDV]);
  printf("\n");
  printf(
      "ops/s runs: each client does a fixed number of ops (alternating SET/GET of its own keys,"
      " every GET verified):");
  for (int m = 0, first = 1; m < M_COUNT; m++)
    if (sel[m] && !metrics[m].is_ms) {
      printf("%s %s %d", first ? "" : ",", metrics[m].name, mops[m]);
      first = 0;
    }
  printf(
      "\nrendezvous: %d processes x (1 SET of a %d-byte address + %d GETs with retry=1, all "
      "verified)\n",
      RDV_RANKS, ADDR_LEN, RDV_RANKS);
  printf("(ratios: for ops/s above 1 means asr is faster; for ms above 1 means asr is slower)\n");
  if (ts.pid)
    printf(
        "TCPStore: PyTorch %s, python3 clients (set/get on a persistent connection each), measured in this "
        "run\n",
        ts.version);
  else
    printf("TCPStore: not installed (%s)\n", ts.why);
  printf("%-44s %12s %12s %9s %12s %9s\n", "metric", "asr", "raw TCP rr", "asr/raw", "TCPStore", "asr/TCPS");
  double med_a[M_COUNT], med_r[M_COUNT], med_t[M_COUNT];
  for (int m = 0; m < M_COUNT; m++) {
    if (!sel[m]) continue;
    med_a[m] = median(asr[m], mreps[m]);
    med_r[m] = median(raw[m], mreps[m]);
    med_t[m] = median(tcp[m], mreps[m]);
    char tcol[32], tratio[32];
    if (ts.pid && med_t[m] > 0) {
      snprintf(tcol, sizeof tcol, "%.*f", metrics[m].is_ms ? 1 : 0, med_t[m]);
      snprintf(tratio, sizeof tratio, "%.2f", med_a[m] / med_t[m]);
    } else {
      snprintf(tcol, sizeof tcol, "%s", ts.pid ? "-" : "not installed");
      snprintf(tratio, sizeof tratio, "-");
    }
    printf("%-44s %12.*f %12.*f %9.2f %12s %9s\n", metrics[m].label, metrics[m].is_ms ? 1 : 0, med_a[m],
           metrics[m].is_ms ? 1 : 0, med_r[m], med_r[m] > 0 ? med_a[m] / med_r[m] : 0.0, tcol, tratio);
  }
  if (sel[M_P1] || sel[M_P32])
    printf(
        "(persistent conn: asr = SET/GET frames on one connection to asrkv, one at a time; raw = "
        "echo rr on one connection)\n");
  if (sel[M_PIPE1] || sel[M_PIPE8] || sel[M_PIPE32])
    printf(
        "(pipelined: asr = kv_conn, %d requests in flight on one connection; raw = the same window of echo "
        "rr)\n",
        PIPE_WINDOW);
  if (sel[M_P1] || sel[M_P32] || sel[M_PIPE1] || sel[M_PIPE8] || sel[M_PIPE32] || sel[M_RDVP])
    printf(
        "(a persistent connection -- asr's, raw's, TCPStore's -- is opened with one request/response before "
        "the gate; no client exits before the last one's end)\n");
  if (sel[M_RDV] || sel[M_RDVC] || sel[M_RDVP])
    printf(
        "(rendezvous raw = the same 1 + %d request/responses per process against the echo server, "
        "no NOT_FOUND retries)\n",
        RDV_RANKS);
  if (ts.pid && sel[M_PIPE32] && med_t[M_PIPE32] > 0)
    printf("goal: pipelined, 32 clients >= 5x TCPStore's ops/s: %.2fx (%s)\n",
           med_a[M_PIPE32] / med_t[M_PIPE32], med_a[M_PIPE32] >= 5 * med_t[M_PIPE32] ? "met" : "NOT met");
  if (ts.pid && sel[M_RDVP] && med_t[M_RDVP] > 0)
    printf("goal: pipelined 64-client rendezvous <= 1/8 of TCPStore's time: 1/%.1f (%s)\n",
           med_t[M_RDVP] / med_a[M_RDVP], med_a[M_RDVP] * 8 <= med_t[M_RDVP] ? "met" : "NOT met");
  printf("server: %s\n", stats[0] ? stats : "(no STOPPED line)");
  printf("total %.1f s, all values verified\n", total_s);
  return 0;
}
