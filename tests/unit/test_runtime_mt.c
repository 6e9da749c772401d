/*
 * test_runtime_mt.c -- libasr from many application threads at once (meant
 * to be clean under ThreadSanitizer: build with --enable-tsan).
 *
 * The API promises that posts on different comms, and asr_test on different
 * requests, may run concurrently from any threads; and that concurrent posts
 * on one comm are each matched in the order the comm took them. Every case
 * runs in a forked peer process per provider (shm, tcp;ofi_rxm) and checks
 * every byte.
 *
 *   mt_two_lncs            LNC 0 -> LNC 1 in one process: 4 threads with a comm
 *                          pair each, plus 2 threads sharing one pair
 *   mt_one_lnc             the same, every comm a connection of LNC 0 to itself
 *                          (one context, one endpoint, one service thread)
 *   mt_two_processes       the same split over two processes: senders in one,
 *                          receivers in the other
 *   mt_connect_close_cycles 4 threads, each bringing up its own two LNCs and
 *                          connecting, moving data and closing comms in cycles
 *   tsan_sees_the_providers_write  TSan reports an application's race with
 *                          the provider's write into a receive buffer
 */
#include "config.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "rt_util.h"
/* Internal records: the close race holds a context's comms.mutex and reads
 * its count of closers. */
#include "../../runtime/rt.h"

#define MT_OWN 4    /* threads with a comm pair of their own */
#define MT_SHARED 2 /* threads sharing one comm pair */
#define MT_PAIRS (MT_OWN + 1)
#define MT_MSGS 300 /* per own thread */
#define MT_WIN 16   /* requests in flight per direction per thread */
#define MT_SLOT 32768
#define SH_MSGS 300 /* sends (and receives) per sharing thread */
#define SH_LEN 2048
#define SH_MAGIC 0x53484152u /* "SHAR" */

static uint8_t *va_of(asr_tensor_t *t) { return asr_tensor_va(t); }

static size_t own_size(int th, int i) { return 1 + ((size_t)i * 2654435761u + (size_t)th * 977) % MT_SLOT; }
static uint64_t own_seed(int th, int i) { return 0xA0000000ull ^ ((uint64_t)th << 20) ^ (uint64_t)i; }
static uint64_t sh_seed(int th, int i) { return 0xB0000000ull ^ ((uint64_t)th << 20) ^ (uint64_t)i; }

typedef struct {
  int th;
  asr_comm_t *sc, *rc; /* either may be NULL: that direction is not this thread's (two processes) */
  asr_tensor_t *st, *rt;
  const char *prov;
  int fail_line;
  char why[256];
} mt_thread_t;

/* A failed check in a thread: record it, the main thread fails the case
 * (asr_test_fail would _exit the whole process from under the others). */
#define T_CHECK(t, cond, ...)                          \
  do {                                                 \
    if (!(cond)) {                                     \
      snprintf((t)->why, sizeof(t)->why, __VA_ARGS__); \
      (t)->fail_line = __LINE__;                       \
      return NULL;                                     \
    }                                                  \
  } while (0)

/* A thread with its own pair: streams MT_MSGS messages through it. */
static void *own_thread(void *arg) {
  mt_thread_t *t = arg;
  asr_request_t *sq[MT_WIN], *rq[MT_WIN];
  int s_next = 0, s_done = 0, r_next = 0, r_done = 0;
  int s_total = t->sc ? MT_MSGS : 0, r_total = t->rc ? MT_MSGS : 0;
  uint64_t until = asr_time_ms() + 90000;
  unsigned spins = 0;
  while (s_done < s_total || r_done < r_total) {
    int moved = 0;
    while (r_next < r_total && r_next - r_done < MT_WIN) {
      int slot = r_next % MT_WIN;
      int st = asr_irecv(t->rc, t->rt, (size_t)slot * MT_SLOT, own_size(t->th, r_next), &rq[slot]);
      T_CHECK(t, st == 0, "irecv %d: %d", r_next, st);
      r_next++;
      moved = 1;
    }
    while (s_next < s_total && s_next - s_done < MT_WIN) {
      int slot = s_next % MT_WIN;
      rt_fill(va_of(t->st) + (size_t)slot * MT_SLOT, own_size(t->th, s_next), own_seed(t->th, s_next));
      int st = asr_isend(t->sc, t->st, (size_t)slot * MT_SLOT, own_size(t->th, s_next), &sq[slot]);
      T_CHECK(t, st == 0, "isend %d: %d", s_next, st);
      s_next++;
      moved = 1;
    }
    int done;
    size_t got;
    if (s_done < s_next) {
      int st = asr_test(sq[s_done % MT_WIN], &done, &got);
      T_CHECK(t, st == 0, "test send %d: %d", s_done, st);
      if (done) {
        T_CHECK(t, got == own_size(t->th, s_done), "send %d: size %zu", s_done, got);
        s_done++;
        moved = 1;
      }
    }
    if (r_done < r_next) {
      int slot = r_done % MT_WIN;
      int st = asr_test(rq[slot], &done, &got);
      T_CHECK(t, st == 0, "test recv %d: %d", r_done, st);
      if (done) {
        size_t want = own_size(t->th, r_done);
        T_CHECK(t, got == want, "recv %d: %zu bytes, expected %zu", r_done, got, want);
        size_t at = rt_mismatch(va_of(t->rt) + (size_t)slot * MT_SLOT, want, own_seed(t->th, r_done));
        T_CHECK(t, at == want, "recv %d: byte %zu of %zu differs", r_done, at, want);
        r_done++;
        moved = 1;
      }
    }
    T_CHECK(t, asr_time_ms() < until, "stuck at send %d/%d, recv %d/%d", s_done, s_total, r_done, r_total);
    if (moved)
      spins = 0;
    else
      rt_relax(&spins);
  }
  return NULL;
}

/* The shared pair: each message says who sent it and which it was. */
static atomic_int sh_seen[MT_SHARED][SH_MSGS];

static void sh_fill(uint8_t *p, int th, int i) {
  uint32_t h[4] = {SH_MAGIC, (uint32_t)th, (uint32_t)i, 0};
  memcpy(p, h, sizeof h);
  rt_fill(p + sizeof h, SH_LEN - sizeof h, sh_seed(th, i));
}

/* Posts SH_MSGS sends and SH_MSGS receives on the shared comms while the
 * other sharing thread does the same. Which message lands in which receive
 * is not known in advance; each must be intact, arrive exactly once
 * overall, and the messages of one sender must arrive in its order within
 * the receives of one thread (the comm matches in the order it took posts). */
static void *shared_thread(void *arg) {
  mt_thread_t *t = arg;
  asr_request_t *sq[MT_WIN], *rq[MT_WIN];
  int last_from[MT_SHARED];
  for (int k = 0; k < MT_SHARED; k++) last_from[k] = -1;
  int s_next = 0, s_done = 0, r_next = 0, r_done = 0;
  int s_total = t->sc ? SH_MSGS : 0, r_total = t->rc ? SH_MSGS : 0;
  uint64_t until = asr_time_ms() + 90000;
  unsigned spins = 0;
  while (s_done < s_total || r_done < r_total) {
    int moved = 0;
    while (r_next < r_total && r_next - r_done < MT_WIN) {
      int slot = r_next % MT_WIN;
      int st = asr_irecv(t->rc, t->rt, (size_t)slot * SH_LEN, SH_LEN, &rq[slot]);
      T_CHECK(t, st == 0, "shared irecv %d: %d", r_next, st);
      r_next++;
      moved = 1;
    }
    while (s_next < s_total && s_next - s_done < MT_WIN) {
      int slot = s_next % MT_WIN;
      sh_fill(va_of(t->st) + (size_t)slot * SH_LEN, t->th, s_next);
      int st = asr_isend(t->sc, t->st, (size_t)slot * SH_LEN, SH_LEN, &sq[slot]);
      T_CHECK(t, st == 0, "shared isend %d: %d", s_next, st);
      s_next++;
      moved = 1;
    }
    int done;
    size_t got;
    if (s_done < s_next) {
      int st = asr_test(sq[s_done % MT_WIN], &done, &got);
      T_CHECK(t, st == 0, "test shared send %d: %d", s_done, st);
      if (done) s_done++, moved = 1;
    }
    if (r_done < r_next) {
      int slot = r_done % MT_WIN;
      int st = asr_test(rq[slot], &done, &got);
      T_CHECK(t, st == 0, "test shared recv %d: %d", r_done, st);
      if (done) {
        const uint8_t *p = va_of(t->rt) + (size_t)slot * SH_LEN;
        uint32_t h[4];
        memcpy(h, p, sizeof h);
        T_CHECK(t, got == SH_LEN, "shared recv %d: %zu bytes", r_done, got);
        T_CHECK(t, h[0] == SH_MAGIC && h[1] < MT_SHARED && h[2] < SH_MSGS, "shared recv %d: bad header",
                r_done);
        int from = (int)h[1], idx = (int)h[2];
        size_t at = rt_mismatch(p + sizeof h, SH_LEN - sizeof h, sh_seed(from, idx));
        T_CHECK(t, at == SH_LEN - sizeof h, "shared message %d of thread %d: byte %zu differs", idx, from,
                at);
        T_CHECK(t, idx > last_from[from], "shared messages of thread %d out of order: %d after %d", from, idx,
                last_from[from]);
        last_from[from] = idx;
        atomic_fetch_add(&sh_seen[from][idx], 1);
        r_done++;
        moved = 1;
      }
    }
    T_CHECK(t, asr_time_ms() < until, "shared: stuck at send %d/%d, recv %d/%d", s_done, s_total, r_done,
            r_total);
    if (moved)
      spins = 0;
    else
      rt_relax(&spins);
  }
  return NULL;
}

/* Runs the MT_OWN + MT_SHARED threads over comms S[0..MT_PAIRS) (SEND) and
 * R[0..MT_PAIRS) (RECV); pair MT_OWN is the shared one. Either array may be
 * all NULL (the other process has that side). */
static void run_threads(asr_comm_t **S, asr_comm_t **R, const char *prov) {
  mt_thread_t th[MT_OWN + MT_SHARED];
  pthread_t tid[MT_OWN + MT_SHARED];
  memset(th, 0, sizeof th);
  for (int k = 0; k < MT_SHARED; k++)
    for (int i = 0; i < SH_MSGS; i++) atomic_store(&sh_seen[k][i], 0);
  for (int i = 0; i < MT_OWN + MT_SHARED; i++) {
    int own = i < MT_OWN;
    th[i].th = own ? i : i - MT_OWN;
    th[i].sc = S[own ? i : MT_OWN];
    th[i].rc = R[own ? i : MT_OWN];
    th[i].prov = prov;
    size_t sz = own ? (size_t)MT_WIN * MT_SLOT : (size_t)MT_WIN * SH_LEN;
    ASSERT_OK(asr_tensor_alloc(sz, &th[i].st));
    ASSERT_OK(asr_tensor_alloc(sz, &th[i].rt));
  }
  for (int i = 0; i < MT_OWN + MT_SHARED; i++)
    ASSERT_EQ(pthread_create(&tid[i], NULL, i < MT_OWN ? own_thread : shared_thread, &th[i]), 0);
  for (int i = 0; i < MT_OWN + MT_SHARED; i++) pthread_join(tid[i], NULL);
  for (int i = 0; i < MT_OWN + MT_SHARED; i++)
    ASSERT_MSG(th[i].fail_line == 0, "%s: thread %d (%s): line %d: %s", prov, i,
               i < MT_OWN ? "own pair" : "shared", th[i].fail_line, th[i].why);
  if (R[MT_OWN])
    for (int k = 0; k < MT_SHARED; k++)
      for (int i = 0; i < SH_MSGS; i++)
        ASSERT_MSG(atomic_load(&sh_seen[k][i]) == 1, "%s: shared message %d of thread %d arrived %d times",
                   prov, i, k, atomic_load(&sh_seen[k][i]));
  /* close the comms (and their MR caches) before freeing the tensors they used */
  for (int i = 0; i < MT_PAIRS; i++) {
    if (S[i]) ASSERT_OK(asr_comm_close(S[i]));
    if (R[i]) ASSERT_OK(asr_comm_close(R[i]));
  }
  for (int i = 0; i < MT_OWN + MT_SHARED; i++) {
    asr_tensor_free(th[i].st);
    asr_tensor_free(th[i].rt);
  }
}

/* One process: SEND comms on LNC a to LNC b, RECV comms on b from a. The
 * k-th SEND comm pairs with the k-th RECV comm (creation order). */
static void one_process_proc(int rank, void *arg) {
  (void)rank;
  int same = *(int *)arg;
  int a = 0, b = same ? 0 : 1;
  ASSERT_OK(asr_init(a));
  if (b != a) ASSERT_OK(asr_init(b));
  asr_comm_t *S[MT_PAIRS], *R[MT_PAIRS];
  for (int i = 0; i < MT_PAIRS; i++) {
    ASSERT_OK(asr_connect(a, RT_PEER_IP, b, &S[i]));
    ASSERT_OK(asr_accept(b, RT_PEER_IP, a, &R[i]));
  }
  for (int i = 0; i < MT_PAIRS; i++) {
    ASSERT_OK(asr_comm_wait_connected(S[i], 60000));
    ASSERT_OK(asr_comm_wait_connected(R[i], 60000));
  }
  run_threads(S, R, rt_g.provider);
  if (b != a) ASSERT_OK(asr_close(b));
  ASSERT_OK(asr_close(a));
}

TEST_TIMEOUT(mt_two_lncs, 120) {
  int same = 0;
  for (int p = 0; p < RT_NPROV; p++) rt_group_run(1, rt_providers[p], one_process_proc, &same, 100000);
}

TEST_TIMEOUT(mt_one_lnc, 120) {
  int same = 1;
  for (int p = 0; p < RT_NPROV; p++) rt_group_run(1, rt_providers[p], one_process_proc, &same, 100000);
}

/* Two processes: rank 0 (LNC 0) runs the sending half of every thread,
 * rank 1 (LNC 1) the receiving half. */
static void two_process_proc(int rank, void *arg) {
  (void)arg;
  ASSERT_OK(asr_init(rank));
  asr_comm_t *S[MT_PAIRS] = {0}, *R[MT_PAIRS] = {0};
  for (int i = 0; i < MT_PAIRS; i++) {
    if (rank == 0)
      ASSERT_OK(asr_connect(0, RT_PEER_IP, 1, &S[i]));
    else
      ASSERT_OK(asr_accept(1, RT_PEER_IP, 0, &R[i]));
  }
  for (int i = 0; i < MT_PAIRS; i++) ASSERT_OK(asr_comm_wait_connected(rank == 0 ? S[i] : R[i], 60000));
  rt_barrier(); /* both have every comm connected */
  /* close only after the peer is done too: run_threads closes the comms */
  run_threads(S, R, rt_g.provider);
  rt_barrier();
  ASSERT_OK(asr_close(rank));
}

TEST_TIMEOUT(mt_two_processes, 120) {
  for (int p = 0; p < RT_NPROV; p++) rt_group_run(2, rt_providers[p], two_process_proc, NULL, 100000);
}

/* Each thread owns LNCs 2k and 2k+1: it brings them up, then, CC_CYCLES
 * times, connects 2k -> 2k+1, moves CC_MSGS verified messages and closes the
 * comms, and finally closes its LNCs, all while the other threads do the
 * same (init, KV participation, comm creation and close race each other). */
#define CC_THREADS 4
#define CC_CYCLES 3
#define CC_MSGS 40
#define CC_LEN 4096

static void *cycle_thread(void *arg) {
  mt_thread_t *t = arg;
  int a = 2 * t->th, b = a + 1;
  int st = asr_init(a);
  T_CHECK(t, st == 0, "asr_init(%d): %d", a, st);
  st = asr_init(b);
  T_CHECK(t, st == 0, "asr_init(%d): %d", b, st);
  asr_tensor_t *tx, *rx;
  T_CHECK(t, asr_tensor_alloc(CC_LEN, &tx) == 0 && asr_tensor_alloc(CC_LEN, &rx) == 0, "tensor alloc");
  for (int cyc = 0; cyc < CC_CYCLES; cyc++) {
    asr_comm_t *sc, *rc;
    T_CHECK(t, asr_connect(a, RT_PEER_IP, b, &sc) == 0, "connect");
    T_CHECK(t, asr_accept(b, RT_PEER_IP, a, &rc) == 0, "accept");
    T_CHECK(t, asr_comm_wait_connected(sc, 60000) == 0, "cycle %d: SEND comm never connected", cyc);
    T_CHECK(t, asr_comm_wait_connected(rc, 60000) == 0, "cycle %d: RECV comm never connected", cyc);
    for (int i = 0; i < CC_MSGS; i++) {
      size_t len = 1 + (size_t)(i * 131 + cyc * 17 + t->th) % CC_LEN;
      uint64_t seed = 0xC0000000ull ^ ((uint64_t)t->th << 24) ^ ((uint64_t)cyc << 16) ^ (uint64_t)i;
      rt_fill(va_of(tx), len, seed);
      asr_request_t *rq, *sq;
      T_CHECK(t, asr_irecv(rc, rx, 0, len, &rq) == 0, "irecv");
      T_CHECK(t, asr_isend(sc, tx, 0, len, &sq) == 0, "isend");
      size_t got = 0;
      int done_r = 0, done_s = 0;
      uint64_t until = asr_time_ms() + 30000;
      unsigned spins = 0;
      while (!done_r || !done_s) {
        if (!done_r) T_CHECK(t, asr_test(rq, &done_r, &got) == 0, "test recv");
        if (!done_s) T_CHECK(t, asr_test(sq, &done_s, NULL) == 0, "test send");
        T_CHECK(t, asr_time_ms() < until, "cycle %d message %d stuck", cyc, i);
        rt_relax(&spins);
      }
      T_CHECK(t, got == len, "cycle %d message %d: %zu bytes, expected %zu", cyc, i, got, len);
      size_t at = rt_mismatch(va_of(rx), len, seed);
      T_CHECK(t, at == len, "cycle %d message %d: byte %zu differs", cyc, i, at);
    }
    T_CHECK(t, asr_comm_close(sc) == 0 && asr_comm_close(rc) == 0, "comm close");
  }
  T_CHECK(t, asr_close(b) == 0 && asr_close(a) == 0, "asr_close");
  asr_tensor_free(tx);
  asr_tensor_free(rx);
  return NULL;
}

static void cycles_proc(int rank, void *arg) {
  (void)rank;
  (void)arg;
  mt_thread_t th[CC_THREADS];
  pthread_t tid[CC_THREADS];
  memset(th, 0, sizeof th);
  for (int i = 0; i < CC_THREADS; i++) {
    th[i].th = i;
    th[i].prov = rt_g.provider;
    ASSERT_EQ(pthread_create(&tid[i], NULL, cycle_thread, &th[i]), 0);
  }
  for (int i = 0; i < CC_THREADS; i++) pthread_join(tid[i], NULL);
  for (int i = 0; i < CC_THREADS; i++)
    ASSERT_MSG(th[i].fail_line == 0, "%s: thread %d: line %d: %s", rt_g.provider, i, th[i].fail_line,
               th[i].why);
}

TEST_TIMEOUT(mt_connect_close_cycles, 120) {
  for (int p = 0; p < RT_NPROV; p++) rt_group_run(1, rt_providers[p], cycles_proc, NULL, 100000);
}

/* asr_comm_close on other threads while asr_close runs: every comm is freed
 * once, by its closer; no cancel touches the closed endpoint; nothing hangs.
 * Before, a close whose handover the service thread had not taken yet was
 * marked "detached" by the thread's shutdown while the comm stayed on its
 * lists, so both its closer and asr_close freed it (an ASan build aborts on
 * the second free) and the closer's cancels ran on a closed endpoint. To
 * have every close in flight when asr_close starts, the test holds the
 * context's comms.mutex (the service thread needs it to let go of a comm)
 * until all closers wait inside asr_comm_close and asr_close has begun. */
#define CR_ROUNDS 10
#define CR_COMMS 8

typedef struct {
  asr_comm_t *c;
  int rc;
} cr_arg_t;

static void *cr_closer(void *arg) {
  cr_arg_t *a = arg;
  a->rc = asr_comm_close(a->c);
  return NULL;
}

static void *cr_lnc_closer(void *arg) {
  *(int *)arg = asr_close(0);
  return NULL;
}

static void close_race_proc(int rank, void *arg) {
  (void)rank;
  (void)arg;
  for (int round = 0; round < CR_ROUNDS; round++) {
    ASSERT_OK(asr_init(0));
    cr_arg_t a[CR_COMMS];
    pthread_t tid[CR_COMMS], lt;
    for (int i = 0; i < CR_COMMS; i += 2) rt_pair_up(0, 0, &a[i].c, &a[i + 1].c);
    asr_ctx_t *ctx = asr__comm_of(a[0].c)->ctx;
    pthread_mutex_lock(&ctx->comms.mutex);
    for (int i = 0; i < CR_COMMS; i++) {
      a[i].rc = -99;
      ASSERT_EQ(pthread_create(&tid[i], NULL, cr_closer, &a[i]), 0);
    }
    for (int waited = 0;; waited++) { /* every closer handed its comm over */
      pthread_mutex_lock(&ctx->task.mutex);
      int n = ctx->task.closers;
      pthread_mutex_unlock(&ctx->task.mutex);
      if (n == CR_COMMS) break;
      ASSERT_MSG(waited < 5000, "%s: %d of %d closers arrived", rt_g.provider, n, CR_COMMS);
      asr_sleep_ms(1);
    }
    int lrc = -99;
    ASSERT_EQ(pthread_create(&lt, NULL, cr_lnc_closer, &lrc), 0);
    asr_sleep_ms(round % 3 * 5); /* let asr_close get to its join, or not */
    pthread_mutex_unlock(&ctx->comms.mutex);
    pthread_join(lt, NULL);
    ASSERT_MSG(lrc == 0, "%s: round %d: asr_close returned %d", rt_g.provider, round, lrc);
    for (int i = 0; i < CR_COMMS; i++) {
      pthread_join(tid[i], NULL);
      ASSERT_MSG(a[i].rc == 0, "%s: round %d: asr_comm_close %d returned %d", rt_g.provider, round, i,
                 a[i].rc);
    }
  }
}

TEST_TIMEOUT(mt_comm_close_races_lnc_close, 120) {
  for (int p = 0; p < RT_NPROV; p++) rt_group_run(1, rt_providers[p], close_race_proc, NULL, 100000);
}

/* The TSan build of the suite ignores what uninstrumented libraries do
 * (scripts/test.sh: ignore_noninstrumented_modules=1); the drain tells TSan
 * of the provider's write into a receive buffer itself (common/asr_tsan.h).
 * An application that reads a buffer still being received must then be
 * reported, with that write's stack. Other builds: the application's
 * message arrives whole. */
TEST_TIMEOUT(tsan_sees_the_providers_write, 120) {
  rt_env_fresh();
  setenv("TSAN_OPTIONS", "ignore_noninstrumented_modules=1:exitcode=66", 1);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/tests/apps/tsan_racy_recv", asr_test_builddir());
  char *argv[] = {path, NULL};
  int out, err;
  pid_t pid = asr_test_spawn(argv, &out, &err);
  /* stderr first: it may hold a long report, stdout one line */
  char *e = asr_test_read_all(err, 90000), *o = asr_test_read_all(out, 10000);
  int st = asr_test_wait(pid, 10000);
  ASSERT_MSG(st != -1, "tsan_racy_recv did not exit; its stderr:\n%s", e);
  ASSERT_CONTAINS(o, "tsan_racy_recv: received 64 bytes");
#if defined(__SANITIZE_THREAD__)
  ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 66, "TSan reported no race (status 0x%x); stderr:\n%s", st,
             e);
  ASSERT_CONTAINS(e, "WARNING: ThreadSanitizer: data race");
  ASSERT_CONTAINS(e, "op_complete");
  ASSERT_CONTAINS(e, "tsan_racy_recv.c");
#else
  ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tsan_racy_recv exited with status 0x%x; stderr:\n%s", st,
             e);
#endif
  free(o), free(e);
}
