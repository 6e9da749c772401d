/*
 * kv_host.c -- this process's part in its host's KV server (seed §4 NOTE: one
 * process per host and port wins the file lock and serves every LNC).
 *
 * ASR_KV_SERVER=external (set by asrd, which serves the store itself): do
 * nothing but seed "hostname". ASR_KV_SERVER=auto (the default without a
 * launcher): the first context of the process races for the uid+port lock;
 * the winner serves on a thread of its own; a loser starts a watcher thread
 * that takes over when the leader exits. Every context then seeds "hostname"
 * on 127.0.0.1 (the seed's kv_store_set against 127.0.0.1), which also waits
 * until a server answers.
 *
 * Beyond the seed, the keys survive a change of leader, whether the old one
 * closed its last context or died: every leader marks the lock file once it
 * serves (kv_elect.h), each watcher notices a new mark within 100 ms, and
 * this process's RECV comms that still wait for their sender publish their
 * handles again on the new server (server_epoch; connect.c: republish_step).
 * Those are the only keys that still matter -- a host's store holds the
 * handles of its own processes' RECV comms, and "hostname", which every
 * leader seeds. In the seed they were lost with the leader, so a RECV comm
 * that had published its handle there could never be connected to.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_assert.h"
#include "asr_env.h"
#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "kv_elect.h"
#include "kv_keys.h"
#include "kv_secret.h"
#include "kv_server.h"
#include "rt.h"

static pthread_mutex_t host_mutex = PTHREAD_MUTEX_INITIALIZER;
static int users;
static uint16_t host_port;
/* Where this process reaches its host's KV server: the seed's 127.0.0.1,
 * or ASR_KV_BIND when an elected server listens on that address only (two
 * "hosts" on one machine's loopback addresses, as tests/bench/asr_bench -H
 * runs them, each serving its own). Written at the first join, before any
 * comm can ask (asr_init joins before it starts the service thread). */
static char host_ip[64] = "127.0.0.1";
static char host_name[ASR_KV_HOSTNAME_LEN];
static asr_kv_server_t *server;
static int lock_fd = -1;
static pthread_t watcher;
static int watcher_running;
static atomic_int watcher_stop;
/* Moves when this process sees its host's KV server change (a new leader's
 * mark, kv_elect.h): a RECV comm whose handle is published waits in
 * NET_CONNECT, and publishes it again when this moved since (connect.c). */
static atomic_uint server_epoch;

unsigned asr__kv_host_epoch(void) { return atomic_load(&server_epoch); }

const char *asr__kv_host_ip(void) { return host_ip; }

/* Starts serving after winning the lock. Called with host_mutex held. */
static int serve_locked(char *errbuf, size_t errlen) {
  assert(asr_mutex_held(&host_mutex));
  uint8_t secret[ASR_KV_SECRET_LEN];
  int rc = asr_kv_secret_from_env(secret, errbuf, errlen);
  const char *bind = NULL; /* NULL: every address */
  if (rc == 0) rc = asr_env_str(ASR_ENV_KV_BIND, &bind, errbuf, errlen);
  if (rc) return rc;
  asr_kv_server_opts_t o = {.bind_ip = bind, .port = host_port, .secret = secret};
  uint64_t until = asr_time_ms() + 3000;
  /* A previous leader's socket may linger a moment after its lock is gone. */
  while ((rc = asr_kv_server_new(&o, &server, errbuf, errlen)) == ASR_EADDRINUSE && asr_time_ms() < until)
    asr_sleep_ms(10);
  if (rc) return rc;
  uint8_t val[ASR_KV_HOSTNAME_LEN] = {0};
  memcpy(val, host_name, strlen(host_name));
  asr_kv_server_put(server, ASR_KV_HOSTNAME_KEY, ASR_KV_HOSTNAME_KEY_LEN, val, sizeof val, ASR_KV_VTYPE_TEXT);
  rc = asr_kv_server_start_thread(server);
  if (rc) {
    asr_kv_server_free(server);
    server = NULL;
    return rc;
  }
  /* Tells the others that the server changed (watch_leader); without the
   * mark, a leader's death would cost them their published handles. */
  if (asr_kv_elect_mark(lock_fd) != 0)
    asr_warn("kvs", "cannot mark the KV lock file of port %u: other processes will not publish again",
             host_port);
  asr_info("kvs", "elected: serving the host KV store on port %u", host_port);
  return 0;
}

/* Every 100 ms: take the lock if the leader is gone (and serve), else see
 * whether a new leader marked the lock file since the last look: then this
 * process's pending handles are gone with the old server, and its RECV comms
 * publish them again (server_epoch). */
static void *watch_leader(void *arg) {
  (void)arg;
  char mark[64] = "", now[64];
  int looked = 0;
  while (!atomic_load(&watcher_stop)) {
    char err[256];
    int fd = -1;
    int rc = asr_kv_elect_try(host_port, host_name, &fd, err, sizeof err);
    if (rc != 0 && asr_kv_elect_read_mark(host_port, host_name, now, sizeof now) == 0) {
      if (looked && strcmp(now, mark) != 0) {
        asr_debug("kvs", "port %u: the KV server changed; pending handles are published again", host_port);
        atomic_fetch_add(&server_epoch, 1);
      }
      memcpy(mark, now, sizeof mark);
      looked = 1;
    }
    if (rc == 0) {
      pthread_mutex_lock(&host_mutex);
      lock_fd = fd;
      if (serve_locked(err, sizeof err) != 0) {
        asr_error("kvs", "took over the KV leadership but cannot serve: %s", err);
        asr_kv_elect_release(lock_fd);
        lock_fd = -1;
      } else {
        asr_info("kvs",
                 "the previous KV server of port %u went away; this process serves now (the others "
                 "publish their pending handles again)",
                 host_port);
        atomic_fetch_add(&server_epoch, 1); /* our own pending handles go to our own server */
      }
      pthread_mutex_unlock(&host_mutex);
      return NULL;
    }
    asr_sleep_ms(100);
  }
  return NULL;
}

int asr__kv_host_join(uint16_t port, const char *hostname, char *errbuf, size_t errlen) {
  pthread_mutex_lock(&host_mutex);
  int rc = 0;
  if (users > 0 && port != host_port) {
    snprintf(errbuf, errlen, "bootstrap port %u differs from %u used by this process's other LNCs", port,
             host_port);
    pthread_mutex_unlock(&host_mutex);
    return ASR_EINVAL;
  }
  if (users++ == 0) {
    host_port = port;
    snprintf(host_name, sizeof host_name, "%s", hostname);
    int external = 0; /* ASR_KV_SERVER: auto (0) or external (1) */
    const char *bind = NULL;
    rc = asr_env_word(ASR_ENV_KV_SERVER, &external, errbuf, errlen);
    if (rc == 0) rc = asr_env_str(ASR_ENV_KV_BIND, &bind, errbuf, errlen);
    int one_addr = rc == 0 && !external && bind && *bind && strcmp(bind, "0.0.0.0") != 0;
    snprintf(host_ip, sizeof host_ip, "%s", one_addr ? bind : "127.0.0.1");
    if (rc == 0 && !external) {
      int fd = -1;
      rc = asr_kv_elect_try(port, host_name, &fd, errbuf, errlen);
      if (rc == 0) {
        lock_fd = fd;
        rc = serve_locked(errbuf, errlen);
        if (rc) {
          asr_kv_elect_release(lock_fd);
          lock_fd = -1;
        }
      } else if (rc == ASR_EBUSY) {
        atomic_store(&watcher_stop, 0);
        watcher_running = pthread_create(&watcher, NULL, watch_leader, NULL) == 0;
        if (watcher_running) (void)pthread_setname_np(watcher, "asr-kv-watch");
        rc = 0;
      }
    }
    if (rc) users = 0;
  }
  pthread_mutex_unlock(&host_mutex);
  if (rc) return rc;
  /* Seed "hostname" on our host's server (waits for it to answer). */
  rc = asr_kv_seed_hostname(host_ip, port, hostname, NULL, errbuf, errlen);
  if (rc) asr__kv_host_leave();
  return rc;
}

void asr__kv_host_leave(void) {
  pthread_mutex_lock(&host_mutex);
  if (users > 0 && --users == 0) {
    if (watcher_running) {
      atomic_store(&watcher_stop, 1);
      pthread_mutex_unlock(&host_mutex);
      pthread_join(watcher, NULL);
      pthread_mutex_lock(&host_mutex);
      watcher_running = 0;
    }
    if (server) {
      asr_kv_server_free(server);
      server = NULL;
    }
    asr_kv_elect_release(lock_fd);
    lock_fd = -1;
  }
  pthread_mutex_unlock(&host_mutex);
}
