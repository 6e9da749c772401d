/*
 * rt_util.h -- helpers shared by the runtime tests (test_runtime.c,
 * test_runtime_mt.c): a data pattern to verify every byte, a group of forked
 * peer processes with pipe barriers, and request polling with deadlines.
 *
 * Process model. A test case (itself a forked child of the harness) never
 * calls asr_init: it forks one process per peer (rt_group_run), each of which
 * sets ASR_PROVIDER and brings up its own LNCs, so no process forks while the
 * runtime's threads run. All peers share a fresh ASR_BOOTSTRAP_PORT and a
 * private ASR_KV_LOCK_DIR, so cases never meet each other's KV server. The
 * process that wins the KV election serves the host's store on a thread and
 * must not close before its peers have finished their rendezvous: tests
 * therefore rt_barrier() before asr_close.
 */
#ifndef ASR_RT_UTIL_H
#define ASR_RT_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "asr.h"
#include "asr_sm_name.h"
#include "asr_test.h"
#include "asr_time.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#define RT_PEER_IP "127.0.0.1"
#define RT_MAXP 4

/* Every test that moves data runs on each path: asr's own same-host path
 * ("sm": ASR_PROVIDER unset), the same without cross-process copies
 * ("sm-nocma": ASR_SM_CMA=false, large messages pipelined through the
 * ring), and libfabric's shm and tcp;ofi_rxm forced (rt_provider_env). */
static const char *const rt_providers[] = {"sm", "sm-nocma", "shm", "tcp;ofi_rxm"};
#define RT_NPROV ((int)(sizeof rt_providers / sizeof rt_providers[0]))

/* --- data pattern -------------------------------------------------------- */

static inline uint64_t rt_mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The data of a message is a window of one random pattern, at an offset
 * chosen by the message's seed: different seeds give different contents
 * (shifted random bytes), and filling / checking is one memcpy / memcmp
 * (fast under the sanitizers too, unlike a byte loop). The pattern is built
 * once per process, before any thread uses it (rt_pattern_reserve). */
#define RT_PAT_SHIFT 65521u    /* offsets 0..65520 */
#define RT_PAT_PERIOD 1048573u /* a prime */
static uint8_t *rt_pat;
static size_t rt_pat_len;

/* Makes the pattern cover messages of up to len bytes. Not thread-safe:
 * call it before starting threads (peers call it with 16 MiB at start). */
static inline void rt_pattern_reserve(size_t len) {
  size_t need = (len + RT_PAT_SHIFT + 15) / 8 * 8;
  if (need <= rt_pat_len) return;
  uint8_t *p = realloc(rt_pat, need);
  if (!p) asr_test_fail(__FILE__, __LINE__, "no memory for a %zu-byte pattern", need);
  /* RT_PAT_PERIOD random bytes, then copies of them: cheap to build for 64
   * MiB (under the sanitizers too). The period is prime, so data displaced by
   * a power-of-two chunk (how providers split large messages) never lines up
   * with the expected bytes. */
  size_t k = rt_pat_len;
  for (; k < need && k < RT_PAT_PERIOD + 8; k += 8) {
    uint64_t w = rt_mix64(0x5EEDull * 0x9e3779b97f4a7c15ull + k);
    memcpy(p + k, &w, 8);
  }
  for (; k < need; k += RT_PAT_PERIOD)
    memcpy(p + k, p + k - RT_PAT_PERIOD, need - k < RT_PAT_PERIOD ? need - k : RT_PAT_PERIOD);
  rt_pat = p;
  rt_pat_len = need;
}

static inline const uint8_t *rt_expected(size_t len, uint64_t seed) {
  if (len + RT_PAT_SHIFT + 8 > rt_pat_len)
    asr_test_fail(__FILE__, __LINE__, "message of %zu bytes is beyond the reserved pattern", len);
  return rt_pat + seed % RT_PAT_SHIFT; /* seeds less than RT_PAT_SHIFT apart: different contents */
}

/* Fills len bytes at buf with the content for seed. */
static inline void rt_fill(void *buf, size_t len, uint64_t seed) { memcpy(buf, rt_expected(len, seed), len); }

/* Returns len when buf holds the content for seed, else the first bad offset. */
static inline size_t rt_mismatch(const void *buf, size_t len, uint64_t seed) {
  const uint8_t *e = rt_expected(len, seed), *p = buf;
  if (memcmp(p, e, len) == 0) return len;
  for (size_t i = 0; i < len; i++)
    if (p[i] != e[i]) return i;
  return len;
}

#define RT_ASSERT_DATA(buf, len, seed, ...)                                                    \
  do {                                                                                         \
    size_t at_ = rt_mismatch((buf), (len), (seed));                                            \
    if (at_ != (size_t)(len)) {                                                                \
      char what_[256];                                                                         \
      snprintf(what_, sizeof what_, __VA_ARGS__);                                              \
      asr_test_fail(__FILE__, __LINE__, "%s: byte %zu of %zu differs (seed %llu)", what_, at_, \
                    (size_t)(len), (unsigned long long)(seed));                                \
    }                                                                                          \
  } while (0)

/* --- polling --------------------------------------------------------------- */

/* Backs off a polling loop: yield first, then short sleeps (2 cores, many
 * processes: a pure spin would starve the peer that has to make progress). */
static inline void rt_relax(unsigned *spins) {
  if (++*spins < 64) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, *spins < 2000 ? 20000 : 200000};
  nanosleep(&ts, NULL);
}

/* Polls r until done; fails the case after timeout_ms. Returns the status of
 * the last asr_test (0 when done; non-zero stops early and is returned). */
static inline int rt_wait_req_at(const char *file, int line, asr_request_t *r, size_t *size, int timeout_ms) {
  uint64_t until = asr_time_ms() + (uint64_t)timeout_ms;
  unsigned spins = 0;
  for (;;) {
    int done = 0;
    size_t sz = 0;
    int st = asr_test(r, &done, &sz);
    if (st != ASR_SUCCESS) return st;
    if (done) {
      if (size) *size = sz;
      return 0;
    }
    if (asr_time_ms() > until) asr_test_fail(file, line, "request did not complete within %d ms", timeout_ms);
    rt_relax(&spins);
  }
}
#define rt_wait_req(r, size, ms) rt_wait_req_at(__FILE__, __LINE__, (r), (size), (ms))

/* --- environment and leak check -------------------------------------------- */

/* A fresh bootstrap port and this case's private lock directory. */
static inline uint16_t rt_env_fresh(void) {
  uint16_t port = asr_test_free_port();
  char buf[16];
  snprintf(buf, sizeof buf, "%u", port);
  setenv("ASR_BOOTSTRAP_PORT", buf, 1);
  unsetenv("NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT");
  setenv("ASR_KV_LOCK_DIR", asr_test_tmpdir(), 1);
  unsetenv("ASR_KV_SERVER");
  return port;
}

/* Under ASan: everything the runtime allocated must be gone after asr_close.
 * (The harness leaves a case with _exit, which skips LeakSanitizer's atexit
 * check, so peers ask for it explicitly.) */
static inline void rt_leak_check(void) {
#if defined(__SANITIZE_ADDRESS__)
  ASSERT_MSG(__lsan_do_recoverable_leak_check() == 0, "LeakSanitizer reported leaks (see above)");
#endif
}

/* Whether test path prov is asr's own same-host path (no libfabric endpoint). */
static inline int rt_is_sm(const char *prov) { return strncmp(prov, "sm", 2) == 0; }

/* The environment of a test path (rt_providers): "sm" and "sm-nocma"
 * leave ASR_PROVIDER unset (libasr's default: its own path to peers on
 * this host), the others force that libfabric provider. */
static inline void rt_provider_env(const char *prov) {
  unsetenv("FI_PROVIDER");
  unsetenv("ASR_SM_CMA");
  if (rt_is_sm(prov)) {
    unsetenv("ASR_PROVIDER");
    if (strcmp(prov, "sm-nocma") == 0) setenv("ASR_SM_CMA", "false", 1);
  } else {
    setenv("ASR_PROVIDER", prov, 1);
  }
}

/* The provider name asr_comm_provider reports for a same-host comm on path prov. */
static inline const char *rt_provider_name(const char *prov) { return rt_is_sm(prov) ? "sm" : prov; }

/* Counts the shared-memory regions of process pid (libfabric shm's, and
 * the sm path's that no sender unlinked yet), removing them when
 * unlink_them is set. */
static inline int rt_shm_regions(pid_t pid, int unlink_them) {
  char prefix[64];
  int n = snprintf(prefix, sizeof prefix, "%d:%u:", (int)pid, (unsigned)getuid());
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  struct dirent *e;
  int found = 0;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, (size_t)n) != 0 && asr_sm_name_pid(e->d_name, getuid()) != pid) continue;
    found++;
    if (!unlink_them) continue;
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
    unlink(path);
  }
  closedir(d);
  return found;
}

/* Removes the shm provider's regions of process pid (/dev/shm/<pid>:<uid>:<n>).
 * A process killed with SIGKILL cannot unlink them, and libfabric 1.17 creates
 * a region with O_EXCL under a name made of the pid: a later process that
 * gets the same pid (pid_max may be as low as 32768) then fails to open a shm
 * endpoint, and asr_init with it. Tests call this for every peer they reap
 * (one that failed an ASSERT or was killed leaves its regions behind) and,
 * in each peer before its first asr_init, for the peer's own pid (any region
 * with that name is stale then). */
static inline void rt_shm_unlink_pid(pid_t pid) { rt_shm_regions(pid, 1); }

/* --- a group of peer processes --------------------------------------------- */

typedef void (*rt_proc_fn)(int rank, void *arg);

/* Ranks 0..n-1 are the peers; rank n is the orchestrator (the case process). */
static struct {
  int n, rank;
  int p[RT_MAXP + 1][RT_MAXP + 1][2]; /* p[from][to]: a byte pipe from rank `from` to rank `to` */
  pid_t pid[RT_MAXP];
  const char *provider;
} rt_g;

static inline int rt_pipe_read(int from, void *buf, size_t len, int timeout_ms) {
  size_t got = 0;
  while (got < len) {
    struct pollfd pf = {.fd = rt_g.p[from][rt_g.rank][0], .events = POLLIN};
    int pr = poll(&pf, 1, timeout_ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr != 1) return -1;
    ssize_t r = read(pf.fd, (char *)buf + got, len - got);
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

/* Whether rank `from` has written something not read yet (no wait). */
static inline int rt_pipe_ready(int from) {
  struct pollfd pf = {.fd = rt_g.p[from][rt_g.rank][0], .events = POLLIN};
  return poll(&pf, 1, 0) == 1;
}

/* Waits until every other peer of the group reached its matching call. */
static inline void rt_barrier(void) {
  char b = 'b';
  for (int j = 0; j < rt_g.n; j++)
    if (j != rt_g.rank)
      ASSERT_MSG(write(rt_g.p[rt_g.rank][j][1], &b, 1) == 1, "barrier write: %s", strerror(errno));
  for (int j = 0; j < rt_g.n; j++)
    if (j != rt_g.rank) ASSERT_MSG(rt_pipe_read(j, &b, 1, 90000) == 0, "barrier: rank %d never arrived", j);
}

/* Sends / receives one 64-bit value to / from another rank (rank n is the
 * orchestrator). */
static inline void rt_send_u64(int to, uint64_t v) {
  ASSERT(write(rt_g.p[rt_g.rank][to][1], &v, sizeof v) == (ssize_t)sizeof v);
}
static inline uint64_t rt_recv_u64(int from) {
  uint64_t v = 0;
  ASSERT_MSG(rt_pipe_read(from, &v, sizeof v, 90000) == 0, "no value from rank %d", from);
  return v;
}

/* The end of a peer process: leak check, then leave. Under TSan through
 * exit(): its atexit hook turns any race it reported into exit status 66, so
 * the case fails (with _exit a race would only be printed). Otherwise with
 * _exit, so the parent's atexit handlers do not run a second time. */
static inline void rt_child_exit(void) {
  rt_leak_check();
  fflush(NULL);
#if defined(__SANITIZE_THREAD__)
  exit(0);
#else
  _exit(0);
#endif
}

/* Forks n peers (ranks 0..n-1) on provider prov with a fresh bootstrap port
 * and runs fn(rank, arg) in each; returns at once in the case process, which
 * becomes rank n (the orchestrator). */
static inline void rt_group_start(int n, const char *prov, rt_proc_fn fn, void *arg) {
  ASSERT(n >= 1 && n <= RT_MAXP);
  rt_env_fresh();
  memset(&rt_g, 0, sizeof rt_g);
  rt_g.n = n;
  rt_g.provider = prov;
  for (int i = 0; i <= n; i++)
    for (int j = 0; j <= n; j++)
      if (i != j) ASSERT(pipe(rt_g.p[i][j]) == 0);
  fflush(NULL);
  for (int i = 0; i < n; i++) {
    rt_g.pid[i] = fork();
    ASSERT(rt_g.pid[i] >= 0);
    if (rt_g.pid[i] == 0) {
      rt_g.rank = i;
      rt_provider_env(prov);
      rt_shm_unlink_pid(getpid());
      rt_pattern_reserve((size_t)16 << 20);
      for (int a = 0; a <= n; a++)
        for (int b = 0; b <= n; b++) {
          if (a == b) continue;
          if (a != i) close(rt_g.p[a][b][1]); /* EOF when a peer dies */
          if (b != i) close(rt_g.p[a][b][0]);
        }
      fn(i, arg);
      rt_child_exit();
    }
  }
  rt_g.rank = n;
  for (int a = 0; a <= n; a++)
    for (int b = 0; b <= n; b++) {
      if (a == b) continue;
      if (a != n) close(rt_g.p[a][b][1]);
      if (b != n) close(rt_g.p[a][b][0]);
    }
}

/* Waits up to timeout_ms for every peer still running; a peer that fails
 * fails the case (the others are killed, by pid). */
static inline void rt_group_finish(int timeout_ms) {
  int n = rt_g.n, left = 0, failed = -1, fstatus = 0;
  for (int i = 0; i < n; i++) left += rt_g.pid[i] > 0;
  uint64_t until = asr_time_ms() + (uint64_t)timeout_ms;
  while (left > 0 && failed < 0) {
    for (int i = 0; i < n; i++) {
      if (rt_g.pid[i] <= 0) continue;
      int st;
      if (waitpid(rt_g.pid[i], &st, WNOHANG) != rt_g.pid[i]) continue;
      rt_shm_unlink_pid(rt_g.pid[i]); /* nothing, unless it died without asr_close */
      rt_g.pid[i] = 0;
      left--;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        failed = i;
        fstatus = st;
      }
    }
    if (left > 0 && failed < 0) {
      if (asr_time_ms() > until) break;
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
    }
  }
  for (int i = 0; i < n; i++)
    if (rt_g.pid[i] > 0) {
      kill(rt_g.pid[i], SIGKILL);
      waitpid(rt_g.pid[i], NULL, 0);
      rt_shm_unlink_pid(rt_g.pid[i]);
      rt_g.pid[i] = 0;
    }
  for (int a = 0; a <= n; a++)
    for (int b = 0; b <= n; b++)
      if (a != b && (a == n || b == n)) close(rt_g.p[a][b][a == n ? 1 : 0]);
  const char *prov = rt_g.provider;
  if (failed >= 0) {
    if (WIFSIGNALED(fstatus))
      asr_test_fail(__FILE__, __LINE__, "provider %s: rank %d killed by signal %d", prov, failed,
                    WTERMSIG(fstatus));
    asr_test_fail(__FILE__, __LINE__, "provider %s: rank %d failed (exit %d)", prov, failed,
                  WEXITSTATUS(fstatus));
  }
  if (left > 0)
    asr_test_fail(__FILE__, __LINE__, "provider %s: %d of %d ranks still running after %d ms", prov, left, n,
                  timeout_ms);
}

/* Runs fn in n peers on provider prov and waits for all of them. */
static inline void rt_group_run(int n, const char *prov, rt_proc_fn fn, void *arg, int timeout_ms) {
  const char *only = getenv("ASR_TEST_ONLY_PROVIDER"); /* debugging: run one provider */
  if (only && *only && strcmp(only, prov) != 0) return;
  rt_group_start(n, prov, fn, arg);
  rt_group_finish(timeout_ms);
}

/* Brings up lnc and a SEND comm to / a RECV comm from peer (same host). */
static inline void rt_pair_up(int lnc, int peer, asr_comm_t **sc, asr_comm_t **rc) {
  ASSERT_OK(asr_connect(lnc, RT_PEER_IP, peer, sc));
  ASSERT_OK(asr_accept(lnc, RT_PEER_IP, peer, rc));
  ASSERT_OK(asr_comm_wait_connected(*sc, 60000));
  ASSERT_OK(asr_comm_wait_connected(*rc, 60000));
}

#endif /* ASR_RT_UTIL_H */
