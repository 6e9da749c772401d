/*
 * obs.c -- libasr's trace points (obs.h): the records they write
 * (common/asr_trace_fmt.h says each kind's fields).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "../rt.h"
#include "job.h"
#include "kv_frame.h"
#include "kv_keys.h"
#include "obs.h"

int asr__obs_on;

static _Atomic uint32_t comm_ids;
static pthread_mutex_t init_mutex = PTHREAD_MUTEX_INITIALIZER;
static int init_done, init_rc;
static char init_err[512];

int asr__obs_init(const char *host, char *err, size_t errlen) {
  pthread_mutex_lock(&init_mutex);
  if (init_done) {
    /* once per process: a later asr_init answers as the first did */
    if (init_rc) snprintf(err, errlen, "%s", init_err);
    pthread_mutex_unlock(&init_mutex);
    return init_rc;
  }
  init_done = 1;
  const char *dir = NULL;
  long ring = 0, keep = 0, rank = -1;
  int metrics = 0;
  int rc = asr_env_bool(ASR_ENV_METRICS, &metrics, init_err, sizeof init_err);
  if (rc == 0) rc = asr_env_str(ASR_ENV_TRACE, &dir, init_err, sizeof init_err);
  if (rc == 0 && dir) rc = asr_env_int(ASR_ENV_TRACE_BUF, &ring, init_err, sizeof init_err);
  if (rc == 0 && dir) rc = asr_env_int(ASR_ENV_TRACE_KEEP, &keep, init_err, sizeof init_err);
  /* the job's rank (asr_job_init's, under asrd or srun), else ASR_RANK
   * where a launcher set it, else none */
  const char *r = asr_env_raw(ASR_ENV_RANK);
  if (asr__job_active())
    rank = asr__job_info()->rank;
  else if (rc == 0 && dir && r && *r && asr_env_int(ASR_ENV_RANK, &rank, NULL, 0) != 0)
    rank = -1;
  if (rc == 0 && dir) {
    /* one file per process, named so that a directory shared by many
     * hosts and runs never sees two alike */
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.%ld.trc", dir, host, (long)getpid());
    asr_trace_cfg_t cfg = {.kind = ASR_TR_PROC_RANK,
                           .rank = rank,
                           .host = host,
                           .job = NULL,
                           .ring_recs = (unsigned)ring,
                           .keep_recs = (unsigned)keep,
                           .max_threads = 136}; /* 128 service threads, and the application's */
    rc = asr_trace_open(path, &cfg, init_err, sizeof init_err);
  }
  if (rc == 0)
    __atomic_store_n(&asr__obs_on, (dir ? ASR_OBS_TRACE : 0) | (metrics ? ASR_OBS_METRICS : 0),
                     __ATOMIC_RELEASE);
  init_rc = rc;
  if (rc) snprintf(err, errlen, "%s", init_err);
  pthread_mutex_unlock(&init_mutex);
  return rc;
}

void asr__obs_comm_new(struct asr_comm *c) {
  memset(&c->obs, 0, sizeof c->obs);
  if (!ASR_OBS_ON()) return;
  c->obs.id = atomic_fetch_add(&comm_ids, 1) + 1;
  c->obs.born_ns = c->obs.state_ns = asr_time_ns();
}

/* FNV-1a: the pair's hash needs no secret, only the same input on both ends */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* The same on the SEND and the RECV comm of one connection: the RECV's
 * net handle (which it published and the SEND read: it names the RECV's
 * endpoint and the ordinal), the sender's host name and the sender's LNC
 * (the handle key's other parts, connect.c). */
static uint64_t pair_hash(const struct asr_comm *c) {
  int send = c->type == ASR_SEND_COMM;
  const char *sender_host = send ? c->ctx->hostname : (const char *)c->peer_hostname;
  uint32_t sender_lnc = (uint32_t)(send ? c->lnc : c->peer_lnc);
  uint64_t h = fnv(0xcbf29ce484222325ull, c->net_handle, sizeof c->net_handle);
  h = fnv(h, sender_host, strnlen(sender_host, ASR_KV_HOSTNAME_LEN));
  return fnv(h, &sender_lnc, sizeof sender_lnc);
}

static void say_comm(struct asr_comm *c, int ok) {
  if (c->obs.said) return;
  c->obs.said = 1;
  const char *path = "";
  if (c->path == ASR_PATH_SM)
    path = ASR_SM_PROVIDER;
  else {
    const asr__ofi_t *o = atomic_load_explicit(&c->ofi, memory_order_acquire);
    if (o) path = o->provider;
  }
  uint64_t now = asr_time_ns();
  long peer = atomic_load(&c->peer_rank);
  asr_trace_put(1, ASR_TR_COMM, c->lnc, c->type == ASR_SEND_COMM ? 1 : 2, c->obs.id, now, now,
                ok ? pair_hash(c) : 0, (uint64_t)(int64_t)peer,
                (uint64_t)(uint32_t)c->peer_lnc | (uint64_t)c->ordinal << 32, (uint64_t)c->path, NULL);
  asr_trace_put(1, ASR_TR_COMM_PATH, c->lnc, 0, c->obs.id, now, now, 0, 0, 0, 0, path);
}

void asr__obs_state(struct asr_comm *c, int old, int now) {
  if (!ASR_OBS_ON() || !c->obs.id) return;
  uint64_t t = asr_time_ns();
  if ((asr__obs_on & ASR_OBS_METRICS) && now == ASR_COMM_CONNECTED)
    asr__metrics_connect(c->lnc, c->type == ASR_SEND_COMM ? 0 : 1, t - c->obs.born_ns);
  if (!(asr__obs_on & ASR_OBS_TRACE)) return;
  /* a span per connect state; CONNECTED is no longer connecting */
  if (old != ASR_COMM_CONNECTED)
    asr_trace_put(1, ASR_TR_STATE, c->lnc, old, c->obs.id, c->obs.state_ns, t, 0, 0, 0, 0, NULL);
  c->obs.state_ns = t;
  if (now == ASR_COMM_CONNECTED || (now == ASR_COMM_CONNECTION_ERROR && old != ASR_COMM_CONNECTED)) {
    int ok = now == ASR_COMM_CONNECTED;
    say_comm(c, ok);
    asr_trace_put(1, ASR_TR_CONNECT, c->lnc, ok, c->obs.id, c->obs.born_ns, t, 0, 0, 0, 0, NULL);
  }
  if (now == ASR_COMM_CONNECTION_ERROR && c->obs.peer_closed)
    asr_trace_put(1, ASR_TR_CLOSE, c->lnc, 2, c->obs.id, t, t, 0, 0, 0, 0, NULL);
  else if (now == ASR_COMM_CONNECTION_ERROR)
    asr__obs_fail(c, c->lnc, c->err[0] ? c->err : "the comm failed");
}

void asr__obs_post(struct asr_comm *c, asr__obs_req_t *o, int type) {
  o->t_post = asr_time_ns();
  o->t_out = 0;
  o->seq = type == ASR_REQ_SEND || type == ASR_REQ_RECV ? c->obs.seq++ : 0;
}

void asr__obs_done(struct asr_comm *c, const asr__obs_req_t *o, int type, size_t bytes, int ok) {
  if (!o->t_post) return;
  uint64_t t1 = asr_time_ns();
  if ((asr__obs_on & ASR_OBS_METRICS) && ok) /* the caller holds the data-path lock */
    asr__metrics_xfer_locked(&asr__comm_pool_of(c)->xfer_hist, t1 - o->t_post);
  if (!(asr__obs_on & ASR_OBS_TRACE) || !c->obs.id) return;
  uint32_t stamp;
  asr_tr_rec_t *r = asr_trace_claim(0, &stamp);
  r->t0 = o->t_post;
  r->t1 = t1;
  r->u.v.a = bytes;
  r->u.v.b = o->seq;
  r->u.v.c = o->t_out;
  r->u.v.d = 0;
  r->id = c->obs.id;
  r->kind = ASR_TR_XFER;
  r->lnc = (uint8_t)c->lnc;
  r->sub = (uint8_t)(type | (ok ? ASR_TR_X_OK : 0) | (o->t_out ? ASR_TR_X_STASHED : 0));
  asr_trace_commit(r, stamp);
}

void asr__obs_kv_begin(struct asr_comm *c, int op, const void *key, size_t keylen) {
  if (!ASR_OBS_TRACING() || !c->obs.id) return;
  c->obs.kv_op = op;
  c->obs.kv_t0 = asr_time_ns();
  c->obs.kv_keylen = keylen < sizeof c->obs.kv_key ? keylen : sizeof c->obs.kv_key;
  memcpy(c->obs.kv_key, key, c->obs.kv_keylen);
}

void asr__obs_kv_end(struct asr_comm *c, int ok) {
  if (!ASR_OBS_TRACING() || !c->obs.kv_t0) return;
  char text[ASR_KV_KEY_TEXT_MAX];
  asr_kv_key_render(c->obs.kv_key, c->obs.kv_keylen, text, sizeof text);
  asr_trace_put(0, ASR_TR_KV, c->lnc, (c->obs.kv_op & 0x7f) | (ok ? 0 : 0x80), c->obs.id, c->obs.kv_t0,
                asr_time_ns(), 0, 0, 0, 0, text);
  c->obs.kv_t0 = 0;
}

void asr__obs_mr(int lnc, size_t bytes, uint64_t t0) {
  if (!ASR_OBS_TRACING()) return;
  asr_trace_put(0, ASR_TR_MR, lnc, 0, 0, t0, asr_time_ns(), bytes, 0, 0, 0, NULL);
}

void asr__obs_flush(struct asr_comm *c, uint64_t t0) {
  if (!ASR_OBS_TRACING() || !c->obs.id) return;
  asr_trace_put(0, ASR_TR_FLUSH, c->lnc, 0, c->obs.id, t0, asr_time_ns(), 0, 0, 0, 0, NULL);
}

void asr__obs_close(struct asr_comm *c, uint64_t t0, int drained) {
  if (!ASR_OBS_TRACING() || !c->obs.id) return;
  asr_trace_put(1, ASR_TR_CLOSE, c->lnc, drained, c->obs.id, t0, asr_time_ns(), 0, 0, 0, 0, NULL);
}

void asr__obs_fail(struct asr_comm *c, int lnc, const char *what) {
  if (!ASR_OBS_TRACING()) return;
  uint64_t t = asr_time_ns();
  /* a line longer than a record goes on in the records after it (the
   * merger joins a failure's records while the next says ASR_TR_FAIL_MORE) */
  size_t n = strlen(what), off = 0;
  do {
    asr_trace_put(1, ASR_TR_FAIL, lnc, off ? 1 : 0, c ? c->obs.id : 0, t, t, 0, 0, 0, 0, what + off);
    off += ASR_TR_TEXT;
  } while (off < n && off < 8 * ASR_TR_TEXT);
}

void asr__obs_notif(struct asr_comm *c, uint64_t value) {
  if (!ASR_OBS_TRACING() || !c->obs.id) return;
  uint64_t t = asr_time_ns();
  asr_trace_put(0, ASR_TR_NOTIF, c->lnc, 0, c->obs.id, t, t, value, 0, 0, 0, NULL);
}
