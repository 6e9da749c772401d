/*
 * test_paths.c -- a path per peer (runtime/paths.c: asr__same_host): one
 * context reaches the peers of its host on asr's own path (sm, no
 * endpoint) and the others over tcp;ofi_rxm, whose endpoint is opened by
 * the first comm that needs it.
 *
 * Emulated hosts on the loopback, as asr_bench -H makes them: host h is
 * 127.0.0.(h+1), named rt-path-h<h>, with a KV server of its own (its own
 * ASR_KV_BIND and lock directory). Ranks 0 and 1 are on host 0 (LNCs 0 and
 * 1), rank 2 on host 1 (LNC 0); rank 3 of rt_util's group is the
 * orchestrator. Real processes, real providers, every byte verified.
 *
 * Cases:
 *   paths_pairwise          every ordered pair moves 8 B, 64 KiB and 1 MiB
 *                           both ways; each comm's asr_comm_provider is sm
 *                           within the host and tcp;ofi_rxm across; no rank
 *                           opened libfabric's shm endpoint; again with
 *                           ASR_SM_CMA=false (large messages pipelined)
 *   paths_forced_one        ASR_PROVIDER=tcp;ofi_rxm: every comm on it, and
 *                           one endpoint per context
 *   paths_provider_mismatch rank 2 forces shm while its receiver listens on
 *                           tcp;ofi_rxm: the SEND comm fails, saying so
 *   paths_provider_mismatch_sm  the same on one host: rank 1 forces shm
 *                           while rank 0 listens on sm
 *   paths_kill_each_path    rank 0 receives from rank 1 (sm) and rank 2
 *                           (tcp); rank 1 is SIGKILLed mid-transfer: its
 *                           comm fails, the tcp comm still moves data; then
 *                           rank 2 is killed and its comm fails too; again
 *                           with ASR_SM_CMA=false
 *   paths_shm_alone         rank 0 has a tcp endpoint; with its locks held
 *                           by the test, its same-host comm to rank 1 (sm)
 *                           still moves 200 ping-pongs and 1 MiB windows: a
 *                           same-host post or test never takes the tcp
 *                           endpoint's lock nor reads its CQ
 *   paths_api               asr_comm_provider: NULL comm, a comm not yet
 *                           connected, a connected one
 *   paths_handle_validated  what the SEND side reads of a handle's path
 *                           (bytes 124..127, from the KV store): a bad magic
 *                           or a path other than 1, 2 or 3 is refused; the
 *                           provider tag round-trips and tells shm, sm and
 *                           tcp apart
 */
#include "config.h"

#include <stdio.h>
#include <sys/stat.h>

#include "asr_err.h"
#include "rt_util.h"
#include "../../runtime/rt.h"

#define NR 3 /* ranks; rank NR is the orchestrator */
static const int host_of[NR] = {0, 0, 1};
static const int lnc_of[NR] = {0, 1, 0};

static const char *ip_of(int rank) { return host_of[rank] ? "127.0.0.2" : "127.0.0.1"; }

/* Makes this process a process of rank's host (before asr_init). */
static void join_host(int rank) {
  int h = host_of[rank];
  char dir[4096], name[32];
  snprintf(dir, sizeof dir, "%s/h%d", asr_test_tmpdir(), h);
  (void)mkdir(dir, 0700); /* EEXIST: the other process of the host made it */
  snprintf(name, sizeof name, "rt-path-h%d", h);
  setenv("ASR_IF_ADDR", ip_of(rank), 1);
  setenv("ASR_KV_BIND", ip_of(rank), 1);
  setenv("ASR_HOSTNAME", name, 1);
  setenv("ASR_KV_LOCK_DIR", dir, 1);
}

/* The per-peer default: neither variable forces a provider. */
static void per_peer(void) {
  unsetenv("ASR_PROVIDER");
  unsetenv("FI_PROVIDER");
}

/* A barrier of ranks 0 and 1 alone (rank 2 does not take part). */
static void rt_barrier2(int rank) {
  rt_send_u64(1 - rank, 1);
  (void)rt_recv_u64(1 - rank);
}

static const char *want_provider(int a, int b) { return host_of[a] == host_of[b] ? "sm" : "tcp;ofi_rxm"; }

static void alloc_tensor(size_t size, asr_tensor_t **t) { ASSERT_OK(asr_tensor_alloc(size, t)); }
static uint8_t *va_of(asr_tensor_t *t) { return asr_tensor_va(t); }

static void connect_all(int rank, asr_comm_t *sc[NR], asr_comm_t *rc[NR]) {
  for (int p = 0; p < NR; p++) {
    if (p == rank) continue;
    ASSERT_OK(asr_connect(lnc_of[rank], ip_of(p), lnc_of[p], &sc[p]));
    ASSERT_OK(asr_accept(lnc_of[rank], ip_of(p), lnc_of[p], &rc[p]));
  }
  for (int p = 0; p < NR; p++) {
    if (p == rank) continue;
    ASSERT_OK(asr_comm_wait_connected(sc[p], 60000));
    ASSERT_OK(asr_comm_wait_connected(rc[p], 60000));
  }
}

static const size_t sizes[] = {8, 64 << 10, 1 << 20};
#define NSIZES 3

/* Every ordered pair moves each size once, both ways at once. */
static void exchange(int rank, asr_comm_t *sc[NR], asr_comm_t *rc[NR], const char *what) {
  asr_tensor_t *out, *in;
  alloc_tensor((size_t)NR << 20, &out);
  alloc_tensor((size_t)NR << 20, &in);
  for (int z = 0; z < NSIZES; z++) {
    size_t len = sizes[z];
    asr_request_t *rq[NR][2];
    for (int p = 0; p < NR; p++) {
      if (p == rank) continue;
      rt_fill(va_of(out) + ((size_t)p << 20), len, (uint64_t)(rank * 16 + p) * 8 + (uint64_t)z);
      ASSERT_OK(asr_irecv(rc[p], in, (size_t)p << 20, len, &rq[p][0]));
      ASSERT_OK(asr_isend(sc[p], out, (size_t)p << 20, len, &rq[p][1]));
    }
    for (int p = 0; p < NR; p++) {
      if (p == rank) continue;
      size_t got = 0;
      ASSERT_OK(rt_wait_req(rq[p][0], &got, 30000));
      ASSERT_OK(rt_wait_req(rq[p][1], NULL, 30000));
      ASSERT_EQ(got, len);
      RT_ASSERT_DATA(va_of(in) + ((size_t)p << 20), len, (uint64_t)(p * 16 + rank) * 8 + (uint64_t)z,
                     "%s: %zu bytes from rank %d to rank %d", what, len, p, rank);
    }
  }
  asr_tensor_free(out);
  asr_tensor_free(in);
}

static void close_all(int rank, asr_comm_t *sc[NR], asr_comm_t *rc[NR]) {
  rt_barrier(); /* each host's KV leader outlives its peers' rendezvous */
  for (int p = 0; p < NR; p++) {
    if (p == rank || !sc[p]) continue; /* (a case may pair only some ranks) */
    ASSERT_OK(asr_comm_close(sc[p]));
    ASSERT_OK(asr_comm_close(rc[p]));
  }
  ASSERT_OK(asr_close(lnc_of[rank]));
}

/* Ranks come up host leader first (rank 0, then 2), so each host's KV
 * election has its winner before its other process starts. */
static void up(int rank) {
  join_host(rank);
  if (rank == 1) (void)rt_recv_u64(0);
  ASSERT_OK(asr_init(lnc_of[rank]));
  if (rank == 0) rt_send_u64(1, 1);
}

static void pairwise_proc(int rank, void *arg) {
  int forced = *(int *)arg;
  if (forced)
    setenv("ASR_PROVIDER", "tcp;ofi_rxm", 1);
  else
    per_peer();
  up(rank);
  asr_comm_t *sc[NR] = {0}, *rc[NR] = {0};
  connect_all(rank, sc, rc);
  for (int p = 0; p < NR; p++) {
    if (p == rank) continue;
    const char *want = forced ? "tcp;ofi_rxm" : want_provider(rank, p);
    const char *s = asr_comm_provider(sc[p]), *r = asr_comm_provider(rc[p]);
    ASSERT_MSG(s && strcmp(s, want) == 0, "rank %d SEND comm to rank %d: provider %s, wanted %s", rank, p,
               s ? s : "(none)", want);
    ASSERT_MSG(r && strcmp(r, want) == 0, "rank %d RECV comm from rank %d: provider %s, wanted %s", rank, p,
               r ? r : "(none)", want);
  }
  /* Lazily opened: a context opens the endpoints its peers need, no more. */
  asr_ctx_t *ctx = asr__comm_of(sc[rank == 0 ? 1 : 0])->ctx;
  int open0 = atomic_load(&ctx->fab.ep_open[0]), open1 = atomic_load(&ctx->fab.ep_open[1]);
  if (forced) {
    ASSERT_MSG(open0 && !open1, "rank %d: forced provider, endpoints open %d %d", rank, open0, open1);
  } else {
    /* every rank has a peer on another host; the same-host ones take sm */
    ASSERT_MSG(!open0 && open1, "rank %d: endpoints open shm %d tcp %d", rank, open0, open1);
  }
  exchange(rank, sc, rc, forced ? "forced tcp" : "per-peer paths");
  close_all(rank, sc, rc);
}

TEST(paths_pairwise) {
  int forced = 0;
  rt_group_run(NR, "shm", pairwise_proc, &forced, 50000);
  /* the same-host comms without cross-process copies (rt_util.h) */
  rt_group_run(NR, "sm-nocma", pairwise_proc, &forced, 50000);
}

TEST(paths_forced_one) {
  int forced = 1;
  rt_group_run(NR, "tcp;ofi_rxm", pairwise_proc, &forced, 50000);
}

/* Rank 2 forces shm; rank 0, per peer, listens for it on tcp;ofi_rxm. */
static void mismatch_proc(int rank, void *arg) {
  (void)arg;
  if (rank == 1) {
    rt_barrier();
    rt_barrier();
    return;
  }
  per_peer();
  if (rank == 2) setenv("ASR_PROVIDER", "shm", 1);
  setenv("ASR_KV_TIMEOUT_MS", "3000", 1);
  join_host(rank);
  ASSERT_OK(asr_init(lnc_of[rank]));
  rt_barrier();
  asr_comm_t *c;
  if (rank == 0) {
    ASSERT_OK(asr_accept(0, ip_of(2), 0, &c));
    /* its path is chosen once it knows its peer's host (LISTEN); its
     * sender never comes, so it never connects */
    uint64_t until = asr_time_ms() + 20000;
    while (!asr_comm_provider(c) && asr_time_ms() < until) asr_sleep_ms(1);
    ASSERT_STREQ(asr_comm_provider(c), "tcp;ofi_rxm");
    int w = asr_comm_wait_connected(c, 200);
    ASSERT_MSG(w == ASR_TIMEOUT || w == ASR_CONN_ERROR, "the RECV comm: %d", w);
  } else {
    ASSERT_OK(asr_connect(0, ip_of(0), 0, &c));
    ASSERT_EQ(asr_comm_wait_connected(c, 20000), ASR_CONN_ERROR);
    const char *err = asr_comm_error(c);
    ASSERT_MSG(err && strstr(err, "another provider than shm,") && strstr(err, "set ASR_PROVIDER alike"),
               "the SEND comm's error does not say why and what to set: %s", err ? err : "(none)");
    ASSERT(asr_comm_provider(c) == NULL); /* it never took a path */
  }
  rt_barrier();
  ASSERT_OK(asr_comm_close(c));
  ASSERT_OK(asr_close(0));
}

TEST(paths_provider_mismatch) { rt_group_run(NR, "shm", mismatch_proc, NULL, 40000); }

/* Rank 1 forces shm; rank 0, per peer, listens for it on sm (one host). */
static void mismatch_sm_proc(int rank, void *arg) {
  (void)arg;
  if (rank == 2) {
    rt_barrier();
    rt_barrier();
    return;
  }
  per_peer();
  if (rank == 1) setenv("ASR_PROVIDER", "shm", 1);
  setenv("ASR_KV_TIMEOUT_MS", "3000", 1);
  up(rank);
  rt_barrier();
  asr_comm_t *c;
  if (rank == 0) {
    ASSERT_OK(asr_accept(0, ip_of(1), 1, &c));
    uint64_t until = asr_time_ms() + 20000;
    while (!asr_comm_provider(c) && asr_time_ms() < until) asr_sleep_ms(1);
    ASSERT_STREQ(asr_comm_provider(c), "sm");
    int w = asr_comm_wait_connected(c, 200);
    ASSERT_MSG(w == ASR_TIMEOUT || w == ASR_CONN_ERROR, "the RECV comm: %d", w);
  } else {
    ASSERT_OK(asr_connect(1, ip_of(0), 0, &c));
    ASSERT_EQ(asr_comm_wait_connected(c, 20000), ASR_CONN_ERROR);
    const char *err = asr_comm_error(c);
    ASSERT_MSG(err && strstr(err, "own same-host path (sm)") && strstr(err, "set ASR_PROVIDER alike"),
               "the SEND comm's error does not say why and what to set: %s", err ? err : "(none)");
    ASSERT(asr_comm_provider(c) == NULL); /* it never took a path */
  }
  rt_barrier();
  ASSERT_OK(asr_comm_close(c));
  ASSERT_OK(asr_close(lnc_of[rank]));
}

TEST(paths_provider_mismatch_sm) { rt_group_run(NR, "shm", mismatch_sm_proc, NULL, 40000); }

#define KP_MSG ((size_t)256 << 10)
#define KP_RECVS 8
#define KP_SENDS 6 /* the last two receives of each victim's comm wait for nothing */

/* Rank 0 survives; ranks 1 (shm) and 2 (tcp) send it KP_SENDS messages and
 * wait to be killed, rank 1 first. */
static void kill_proc(int rank, void *arg) {
  (void)arg;
  const int orch = NR;
  per_peer();
  up(rank);
  asr_comm_t *sc[NR] = {0}, *rc[NR] = {0};
  /* only the pairs with rank 0 */
  if (rank == 0) {
    for (int p = 1; p < NR; p++) {
      ASSERT_OK(asr_connect(0, ip_of(p), lnc_of[p], &sc[p]));
      ASSERT_OK(asr_accept(0, ip_of(p), lnc_of[p], &rc[p]));
    }
    for (int p = 1; p < NR; p++) {
      ASSERT_OK(asr_comm_wait_connected(sc[p], 60000));
      ASSERT_OK(asr_comm_wait_connected(rc[p], 60000));
      ASSERT_STREQ(asr_comm_provider(rc[p]), want_provider(0, p));
    }
  } else {
    ASSERT_OK(asr_connect(lnc_of[rank], ip_of(0), 0, &sc[0]));
    ASSERT_OK(asr_accept(lnc_of[rank], ip_of(0), 0, &rc[0]));
    ASSERT_OK(asr_comm_wait_connected(sc[0], 60000));
    ASSERT_OK(asr_comm_wait_connected(rc[0], 60000));
  }
  asr_tensor_t *st, *rt;
  alloc_tensor(KP_MSG * KP_RECVS, &st);
  alloc_tensor(KP_MSG * KP_RECVS * NR, &rt);
  if (rank != 0) {
    asr_request_t *q[KP_SENDS];
    for (int k = 0; k < KP_SENDS; k++) {
      rt_fill(va_of(st) + (size_t)k * KP_MSG, KP_MSG, (uint64_t)rank * 100 + (uint64_t)k);
      ASSERT_OK(asr_isend(sc[0], st, (size_t)k * KP_MSG, KP_MSG, &q[k]));
    }
    if (rank == 2) { /* the tcp peer also takes one message sent after rank 1's death */
      asr_request_t *r;
      size_t got = 0;
      ASSERT_OK(asr_irecv(rc[0], rt, 0, KP_MSG, &r));
      ASSERT_OK(rt_wait_req(r, &got, 30000));
      ASSERT_EQ(got, KP_MSG);
      RT_ASSERT_DATA(va_of(rt), KP_MSG, 999, "the tcp peer's message after the shm peer died");
      rt_send_u64(0, 1);
    }
    for (;;) { /* poll the sends until killed: tcp moves data only while polled */
      for (int k = 0; k < KP_SENDS; k++) {
        int done = 0;
        if (q[k]) {
          ASSERT_OK(asr_test(q[k], &done, NULL));
          if (done) q[k] = NULL;
        }
      }
      asr_sleep_ms(1);
    }
  }
  asr_request_t *r[NR][KP_RECVS];
  for (int p = 1; p < NR; p++)
    for (int k = 0; k < KP_RECVS; k++)
      ASSERT_OK(asr_irecv(rc[p], rt, ((size_t)p * KP_RECVS + (size_t)k) * KP_MSG, KP_MSG, &r[p][k]));
  for (int victim = 1; victim < NR; victim++) {
    /* the transfer is under way: the first two arrived intact */
    for (int k = 0; k < 2; k++) {
      size_t got = 0;
      ASSERT_OK(rt_wait_req(r[victim][k], &got, 30000));
      ASSERT_EQ(got, KP_MSG);
      RT_ASSERT_DATA(va_of(rt) + ((size_t)victim * KP_RECVS + (size_t)k) * KP_MSG, KP_MSG,
                     (uint64_t)victim * 100 + (uint64_t)k, "from rank %d: message %d", victim, k);
    }
    rt_send_u64(orch, (uint64_t)victim);
    (void)rt_recv_u64(orch); /* the victim is dead */
    uint64_t t0 = asr_time_ms();
    int failed = 0;
    for (int k = 2; k < KP_RECVS; k++) {
      /* finished within 5 s: intact data from before the kill, or failed */
      for (;;) {
        int done = 0;
        size_t got = 0;
        int rc_ = asr_test(r[victim][k], &done, &got);
        if (rc_ != ASR_SUCCESS) {
          failed++;
          break;
        }
        if (done) {
          ASSERT_EQ(got, KP_MSG);
          RT_ASSERT_DATA(va_of(rt) + ((size_t)victim * KP_RECVS + (size_t)k) * KP_MSG, KP_MSG,
                         (uint64_t)victim * 100 + (uint64_t)k, "from rank %d: message %d", victim, k);
          ASSERT_MSG(k < KP_SENDS, "rank %d: receive %d completed, but it was never sent", victim, k);
          break;
        }
        ASSERT_MSG(asr_time_ms() - t0 < 5000, "rank %d (%s) killed: receive %d still pending after 5 s",
                   victim, want_provider(0, victim), k);
        asr_sleep_ms(1);
      }
    }
    ASSERT_MSG(failed >= KP_RECVS - KP_SENDS, "rank %d killed: only %d receives failed", victim, failed);
    int cs = -1;
    ASSERT_OK(asr_comm_status(rc[victim], &cs));
    ASSERT_EQ(cs, ASR_COMM_CONNECTION_ERROR);
    if (victim == 1) {
      /* the shm peer's death left the tcp path alone: one more message to rank 2 */
      ASSERT_OK(asr_comm_status(rc[2], &cs));
      ASSERT_EQ(cs, ASR_COMM_CONNECTED);
      ASSERT_OK(asr_comm_status(sc[2], &cs));
      ASSERT_EQ(cs, ASR_COMM_CONNECTED);
      asr_request_t *s;
      rt_fill(va_of(st), KP_MSG, 999);
      ASSERT_OK(asr_isend(sc[2], st, 0, KP_MSG, &s));
      (void)rt_recv_u64(2); /* rank 2 has it, verified */
      ASSERT_OK(rt_wait_req(s, NULL, 30000));
    }
  }
  for (int p = 1; p < NR; p++) {
    ASSERT_OK(asr_comm_close(sc[p]));
    ASSERT_OK(asr_comm_close(rc[p]));
  }
  ASSERT_OK(asr_close(0));
  asr_tensor_free(st);
  asr_tensor_free(rt);
}

static void kill_each_path(const char *label) {
  rt_group_start(NR, label, kill_proc, NULL);
  for (int k = 0; k < 2; k++) {
    int victim = (int)rt_recv_u64(0);
    ASSERT_EQ(kill(rt_g.pid[victim], SIGKILL), 0);
    int st;
    ASSERT_EQ(waitpid(rt_g.pid[victim], &st, 0), rt_g.pid[victim]);
    ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    rt_shm_unlink_pid(rt_g.pid[victim]);
    rt_g.pid[victim] = 0; /* expected death: not a failure */
    rt_send_u64(0, 1);
  }
  rt_group_finish(40000);
}

TEST(paths_kill_each_path) {
  kill_each_path("shm");
  kill_each_path("sm-nocma"); /* the same-host peer's 256 KiB messages pipelined */
}

/* Ranks 0 and 1 (shm) ping-pong; rank 0 also has a comm to rank 2, so its
 * tcp endpoint is open, and holds that endpoint's data-path lock (and its
 * control mutex, which the service thread takes first to read its CQ)
 * for the whole measured part. */
#define SA_ROUNDS 200
#define SA_BIG ((size_t)1 << 20)
static void shm_alone_proc(int rank, void *arg) {
  (void)arg;
  per_peer();
  up(rank);
  asr_comm_t *sc[NR] = {0}, *rc[NR] = {0};
  int peers[2], np = 0;
  if (rank == 0) {
    peers[np++] = 1;
    peers[np++] = 2;
  } else {
    peers[np++] = 0;
  }
  for (int i = 0; i < np; i++) {
    int p = peers[i];
    ASSERT_OK(asr_connect(lnc_of[rank], ip_of(p), lnc_of[p], &sc[p]));
    ASSERT_OK(asr_accept(lnc_of[rank], ip_of(p), lnc_of[p], &rc[p]));
  }
  for (int i = 0; i < np; i++) {
    ASSERT_OK(asr_comm_wait_connected(sc[peers[i]], 60000));
    ASSERT_OK(asr_comm_wait_connected(rc[peers[i]], 60000));
  }
  asr_tensor_t *out, *in;
  alloc_tensor(SA_BIG * 4, &out);
  alloc_tensor(SA_BIG * 4, &in);
  if (rank != 2) {
    int peer = 1 - rank;
    asr_ctx_t *ctx = asr__comm_of(sc[peer])->ctx;
    asr__ofi_t *tcp = &ctx->fab.eps[1];
    if (rank == 0) ASSERT_STREQ(asr_comm_provider(sc[2]), "tcp;ofi_rxm");
    /* warm up: every registration made (later posts take the fast path,
     * which needs no service thread) */
    for (int k = 0; k < 2; k++) {
      asr_request_t *a, *b;
      ASSERT_OK(asr_irecv(rc[peer], in, 0, SA_BIG * 4, &a));
      ASSERT_OK(asr_isend(sc[peer], out, 0, SA_BIG * 4, &b));
      ASSERT_OK(rt_wait_req(a, NULL, 30000));
      ASSERT_OK(rt_wait_req(b, NULL, 30000));
    }
    rt_barrier2(rank);
    if (rank == 0) {
      pthread_mutex_lock(tcp->lock);
      asr__ofi_lock(tcp);
    }
    for (int k = 0; k < SA_ROUNDS; k++) {
      asr_request_t *a, *b;
      size_t got = 0;
      if (rank == 0) {
        memcpy(va_of(out), &k, sizeof k);
        ASSERT_OK(asr_isend(sc[peer], out, 0, 8, &b));
        ASSERT_OK(rt_wait_req(b, NULL, 10000));
        ASSERT_OK(asr_irecv(rc[peer], in, 0, 8, &a));
        ASSERT_OK(rt_wait_req(a, &got, 10000));
      } else {
        ASSERT_OK(asr_irecv(rc[peer], in, 0, 8, &a));
        ASSERT_OK(rt_wait_req(a, &got, 10000));
        memcpy(va_of(out), va_of(in), 8);
        ASSERT_OK(asr_isend(sc[peer], out, 0, 8, &b));
        ASSERT_OK(rt_wait_req(b, NULL, 10000));
      }
      ASSERT_EQ(got, 8);
      ASSERT_MSG(memcmp(va_of(in), &k, sizeof k) == 0, "ping-pong %d corrupted", k);
    }
    /* 1 MiB messages, 4 in flight each way, verified */
    asr_request_t *a[4], *b[4];
    for (int j = 0; j < 4; j++) {
      rt_fill(va_of(out) + (size_t)j * SA_BIG, SA_BIG, 700 + (uint64_t)(rank * 4 + j));
      ASSERT_OK(asr_irecv(rc[peer], in, (size_t)j * SA_BIG, SA_BIG, &a[j]));
      ASSERT_OK(asr_isend(sc[peer], out, (size_t)j * SA_BIG, SA_BIG, &b[j]));
    }
    for (int j = 0; j < 4; j++) {
      size_t got = 0;
      ASSERT_OK(rt_wait_req(a[j], &got, 10000));
      ASSERT_OK(rt_wait_req(b[j], NULL, 10000));
      ASSERT_EQ(got, SA_BIG);
      RT_ASSERT_DATA(va_of(in) + (size_t)j * SA_BIG, SA_BIG, 700 + (uint64_t)(peer * 4 + j),
                     "shm window %d with the tcp endpoint locked", j);
    }
    if (rank == 0) {
      asr__ofi_unlock(tcp);
      pthread_mutex_unlock(tcp->lock);
    }
  }
  close_all(rank, sc, rc);
  asr_tensor_free(out);
  asr_tensor_free(in);
}

TEST(paths_shm_alone) { rt_group_run(NR, "shm", shm_alone_proc, NULL, 50000); }

static void api_proc(int rank, void *arg) {
  (void)arg;
  if (rank != 0) return;
  per_peer();
  join_host(0);
  ASSERT(asr_comm_provider(NULL) == NULL);
  ASSERT_OK(asr_init(0));
  asr_comm_t *c;
  /* a peer that never comes: the comm stays unconnected, with no path yet */
  ASSERT_OK(asr_connect(0, "127.0.0.1", 5, &c));
  asr_sleep_ms(50);
  ASSERT(asr_comm_provider(c) == NULL);
  ASSERT_OK(asr_comm_close(c));
  asr_comm_t *sc, *rc;
  ASSERT_OK(asr_connect(0, "127.0.0.1", 0, &sc)); /* to itself: sm (the same host) */
  ASSERT_OK(asr_accept(0, "127.0.0.1", 0, &rc));
  ASSERT_OK(asr_comm_wait_connected(sc, 30000));
  ASSERT_OK(asr_comm_wait_connected(rc, 30000));
  ASSERT_STREQ(asr_comm_provider(sc), "sm");
  ASSERT_STREQ(asr_comm_provider(rc), "sm");
  ASSERT_EQ(atomic_load(&asr__comm_of(sc)->ctx->fab.ep_open[0]), 0); /* no libfabric endpoint paid for */
  ASSERT_EQ(atomic_load(&asr__comm_of(sc)->ctx->fab.ep_open[1]), 0);
  ASSERT_OK(asr_comm_close(sc));
  ASSERT_OK(asr_comm_close(rc));
  ASSERT_OK(asr_close(0));
}

TEST(paths_api) { rt_group_run(1, "shm", api_proc, NULL, 30000); }

TEST(paths_handle_validated) {
  uint8_t h[ASR_OFI_HANDLE_LEN] = {0};
  uint32_t magic = ASR_OFI_HANDLE_MAGIC, tag = asr__ofi_prov_tag("tcp;ofi_rxm"), got_tag = 0;
  int path = 0;
  memcpy(h, &magic, 4);
  for (int i = 0; i < 3; i++) h[ASR_OFI_HANDLE_PROV_OFF + i] = (uint8_t)(tag >> (8 * i));
  const int paths[] = {0, 4, 255}; /* none of them a path */
  for (int i = 0; i < 3; i++) {
    h[ASR_OFI_HANDLE_PATH_OFF] = (uint8_t)paths[i];
    ASSERT_EQ(asr__ofi_handle_path(h, &path, &got_tag), ASR_EPROTO);
  }
  h[ASR_OFI_HANDLE_PATH_OFF] = ASR_PATH_NET;
  ASSERT_OK(asr__ofi_handle_path(h, &path, &got_tag));
  ASSERT_EQ(path, ASR_PATH_NET);
  ASSERT_EQ(got_tag, tag);
  ASSERT(tag <= 0xffffff && tag != asr__ofi_prov_tag("shm") && tag != asr__ofi_prov_tag(ASR_SM_PROVIDER));
  ASSERT(asr__ofi_prov_tag("shm") != asr__ofi_prov_tag(ASR_SM_PROVIDER));
  h[ASR_OFI_HANDLE_PATH_OFF] = ASR_PATH_SM;
  ASSERT_OK(asr__ofi_handle_path(h, &path, &got_tag));
  ASSERT_EQ(path, ASR_PATH_SM);
  h[0] ^= 1; /* not a handle */
  ASSERT_EQ(asr__ofi_handle_path(h, &path, &got_tag), ASR_EPROTO);
}
