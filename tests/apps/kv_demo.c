/*
 * kv_demo -- a real KV rendezvous between N processes on this host, as the
 * runtime's connect machine will do it (seed §3), printed step by step.
 *
 *   kv_demo [-n RANKS] [-p PORT]
 *
 * Each rank is a process standing for one LNC. The ranks elect a KV server
 * with the uid+port file lock; the leader serves on 127.0.0.1:PORT and seeds
 * "hostname". Then every ordered pair (i -> j) meets the way a SEND comm on
 * LNC i and a RECV comm on LNC j do: j GETs "hostname", SETs its 128-byte net
 * handle under handle-(i, j, host); i GETs handle-(i, j, own host), retrying
 * NOT_FOUND until j has published it, and checks the bytes. The leader keeps
 * serving until every rank has reported done.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "kv_conn.h"
#include "kv_elect.h"
#include "kv_keys.h"
#include "kv_server.h"

static const char *host = "demo-host";

/* The fake net handle LNC j publishes for its RECV comm from LNC i. */
static void make_handle(uint8_t h[ASR_KV_NET_HANDLE_LEN], int i, int j) {
  memset(h, 0, ASR_KV_NET_HANDLE_LEN);
  snprintf((char *)h, ASR_KV_NET_HANDLE_LEN, "listen-handle of lnc %d for sender lnc %d", j, i);
  for (int k = 64; k < ASR_KV_NET_HANDLE_LEN; k++) h[k] = (uint8_t)(i * 31 + j * 7 + k);
}

static int rank_main(int rank, int n, uint16_t port) {
  char err[640];
  int lock_fd = -1;
  asr_kv_server_t *srv = NULL;
  asr_log_set_role("demo", rank);
  uint64_t t0 = asr_time_ms();
  if (asr_kv_elect_try(port, NULL, &lock_fd, err, sizeof err) == 0) {
    asr_kv_server_opts_t o = {.bind_ip = "127.0.0.1", .port = port};
    int rc = asr_kv_server_new(&o, &srv, err, sizeof err);
    if (rc) {
      fprintf(stderr, "rank %d: cannot serve: %s\n", rank, err);
      return 1;
    }
    uint8_t val[ASR_KV_HOSTNAME_LEN] = {0};
    memcpy(val, host, strlen(host));
    asr_kv_server_put(srv, ASR_KV_HOSTNAME_KEY, ASR_KV_HOSTNAME_KEY_LEN, val, sizeof val, 0);
    asr_kv_server_start_thread(srv);
    printf("rank %d: won the leader lock; KV server on 127.0.0.1:%u, seeded \"hostname\" = %s\n", rank, port,
           host);
  }
  fflush(stdout);
  /* RECV halves: learn the host name, publish one handle per sender. */
  char peer_host[ASR_KV_HOSTNAME_LEN + 1] = {0};
  size_t len = 0;
  int rc = asr_kv_get("127.0.0.1", port, ASR_KV_HOSTNAME_KEY, ASR_KV_HOSTNAME_KEY_LEN, 1, peer_host,
                      ASR_KV_HOSTNAME_LEN, &len, NULL, err, sizeof err);
  if (rc) goto fail;
  for (int i = 0; i < n; i++) {
    if (i == rank) continue;
    uint8_t key[ASR_KV_HANDLE_KEY_LEN], h[ASR_KV_NET_HANDLE_LEN];
    asr_kv_handle_key(key, (uint32_t)i, (uint32_t)rank, peer_host);
    make_handle(h, i, rank);
    rc = asr_kv_set("127.0.0.1", port, key, sizeof key, h, sizeof h, 1, NULL, err, sizeof err);
    if (rc) goto fail;
  }
  /* SEND halves: fetch each receiver's handle, retrying until it exists. */
  unsigned verified = 0;
  for (int j = 0; j < n; j++) {
    if (j == rank) continue;
    uint8_t key[ASR_KV_HANDLE_KEY_LEN], got[ASR_KV_NET_HANDLE_LEN], want[ASR_KV_NET_HANDLE_LEN];
    asr_kv_handle_key(key, (uint32_t)rank, (uint32_t)j, host);
    rc = asr_kv_get("127.0.0.1", port, key, sizeof key, 1, got, sizeof got, &len, NULL, err, sizeof err);
    if (rc) goto fail;
    make_handle(want, rank, j);
    if (len != sizeof want || memcmp(got, want, sizeof want) != 0) {
      fprintf(stderr, "rank %d: handle from lnc %d is corrupt\n", rank, j);
      return 1;
    }
    verified++;
  }
  printf("rank %d: sent %d handles, fetched and verified %u in %llu ms\n", rank, n - 1, verified,
         (unsigned long long)(asr_time_ms() - t0));
  fflush(stdout);
  char done_key[32];
  int klen = snprintf(done_key, sizeof done_key, "done-%d", rank);
  rc = asr_kv_set("127.0.0.1", port, done_key, (size_t)klen, "1", 1, 0, NULL, err, sizeof err);
  if (rc) goto fail;
  if (srv) {
    /* The leader keeps the store alive until every rank is finished with it. */
    for (int r = 0; r < n; r++) {
      char v[8];
      klen = snprintf(done_key, sizeof done_key, "done-%d", r);
      rc = asr_kv_get("127.0.0.1", port, done_key, (size_t)klen, 1, v, sizeof v, &len, NULL, err, sizeof err);
      if (rc) goto fail;
    }
    asr_kv_server_stats_t st;
    asr_kv_server_stats(srv, &st);
    printf("rank %d: every rank done; server handled %lu frames on %lu connections, %zu keys\n", rank,
           st.frames, st.accepted, st.keys);
    asr_kv_server_free(srv);
    asr_kv_elect_release(lock_fd);
  }
  return 0;
fail:
  fprintf(stderr, "rank %d: %s\n", rank, err);
  return 1;
}

int main(int argc, char **argv) {
  int n = 8;
  long port = 0;
  int opt;
  while ((opt = getopt(argc, argv, "n:p:h")) != -1) {
    if (opt == 'n')
      n = atoi(optarg);
    else if (opt == 'p')
      port = atol(optarg);
    else {
      fprintf(stderr, "usage: kv_demo [-n RANKS (2..128)] [-p PORT]\n");
      return opt == 'h' ? 0 : 2;
    }
  }
  if (n < 2 || n > 128 || port < 0 || port > 65535) {
    fprintf(stderr, "kv_demo: -n wants 2..128 ranks and -p a port 1..65535\n");
    return 2;
  }
  if (port == 0) port = 20000 + (getpid() % 20000);
  printf("kv_demo: %d ranks rendezvous through a KV server elected on 127.0.0.1:%ld\n", n, port);
  fflush(stdout);
  uint64_t t0 = asr_time_ms();
  pid_t pids[128];
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      int rc = rank_main(r, n, (uint16_t)port);
      fflush(NULL);
      _exit(rc);
    }
  }
  int failed = 0;
  for (int r = 0; r < n; r++) {
    int st;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed++;
  }
  if (failed) {
    printf("kv_demo: FAILED: %d of %d ranks did not finish\n", failed, n);
    return 1;
  }
  printf("kv_demo: OK: %d directional rendezvous (every ordered pair of %d ranks) verified in %llu ms\n",
         n * (n - 1), n, (unsigned long long)(asr_time_ms() - t0));
  return 0;
}
