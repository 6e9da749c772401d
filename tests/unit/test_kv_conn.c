/*
 * test_kv_conn.c -- the KV client (kv_conn.h): pools of persistent,
 * pipelined connections, the seed's form, and the blocking calls, against
 * the real server (kv_server.h) over real sockets: a pool on the test's own
 * loop, the server on a thread of its own (or in a child process, where a
 * case kills it, or `asrkv serve`), and raw frames (kv_raw.h) where a case
 * needs bytes the pool would never send or a client that stops reading.
 *
 * Clients pass the all-zero secret, so an ASR_JOB_SECRET in the
 * environment cannot matter, except in the cases about the environment,
 * which start from a clean one (clean_env).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_loop.h"
#include "asr_test.h"
#include "asr_time.h"
#include "kv_conn.h"
#include "kv_frame.h"
#include "kv_keys.h"
#include "kv_raw.h"
#include "kv_secret.h"
#include "kv_server.h"

#define IP "127.0.0.1"
#define RAW_TMO 3000

static const uint8_t zero_secret[ASR_KV_SECRET_LEN];

static asr_kv_server_t *srv_start_port(asr_kv_server_opts_t o, uint16_t port) {
  o.bind_ip = IP;
  o.port = port;
  char err[256] = "";
  asr_kv_server_t *s = NULL;
  int rc = asr_kv_server_new(&o, &s, err, sizeof err);
  ASSERT_MSG(rc == 0, "asr_kv_server_new: %s (%s)", asr_test_errname(rc), err);
  ASSERT_OK(asr_kv_server_start_thread(s));
  return s;
}

static asr_kv_server_t *srv_start(asr_kv_server_opts_t o) { return srv_start_port(o, 0); }

static asr_kv_server_stats_t stats(asr_kv_server_t *s) {
  asr_kv_server_stats_t st;
  asr_kv_server_stats(s, &st);
  return st;
}

static asr_kv_pool_t *pool_new(asr_loop_t *loop, int timeout_ms, int idle_ms) {
  asr_kv_pool_opts_t o = {.secret = zero_secret, .timeout_ms = timeout_ms, .idle_ms = idle_ms};
  asr_kv_pool_t *p = NULL;
  char err[256] = "";
  int rc = asr_kv_pool_new(loop, &o, &p, err, sizeof err);
  ASSERT_MSG(rc == 0, "asr_kv_pool_new: %s (%s)", asr_test_errname(rc), err);
  return p;
}

/* What one request saw: its value callback's calls and bytes, its done
 * callback's calls and whether the value came first. */
typedef struct {
  asr_kv_call_t *call;
  int value_calls, done_calls, value_before_done;
  size_t len;
  uint8_t val[ASR_KV_VAL_MAX];
  uint64_t done_ms;
} seen_t;

static void on_value(void *arg, const uint8_t *val, size_t len) {
  seen_t *s = arg;
  s->value_calls++;
  s->len = len;
  memcpy(s->val, val, len < sizeof s->val ? len : sizeof s->val);
}

static void on_done(void *arg, asr_kv_call_t *call) {
  seen_t *s = arg;
  ASSERT(call == s->call);
  s->done_calls++;
  s->value_before_done = s->value_calls > 0;
  s->done_ms = kv_raw_now_ms();
}

static void start_get(asr_kv_pool_t *p, uint16_t port, const char *key, int retry, seen_t *s) {
  memset(s, 0, sizeof *s);
  int rc = asr_kv_pool_get(p, IP, port, key, strlen(key), ASR_KV_VTYPE_BINARY, retry, on_value, s, on_done, s,
                           &s->call);
  ASSERT_MSG(rc == 0, "asr_kv_pool_get: %s", asr_test_errname(rc));
}

static void start_set(asr_kv_pool_t *p, uint16_t port, const char *key, const void *val, size_t vlen,
                      seen_t *s) {
  memset(s, 0, sizeof *s);
  int rc =
      asr_kv_pool_set(p, IP, port, key, strlen(key), val, vlen, ASR_KV_VTYPE_BINARY, on_done, s, &s->call);
  ASSERT_MSG(rc == 0, "asr_kv_pool_set: %s", asr_test_errname(rc));
}

/* Runs the loop until every one of n requests is done or ms pass. */
static void run_until_done(asr_loop_t *loop, seen_t **all, size_t n, int ms) {
  uint64_t deadline = kv_raw_now_ms() + (uint64_t)ms;
  for (;;) {
    size_t left = 0;
    for (size_t i = 0; i < n; i++) left += all[i]->done_calls == 0;
    if (!left) return;
    ASSERT_MSG(kv_raw_now_ms() < deadline, "%zu of %zu requests still pending after %d ms", left, n, ms);
    ASSERT(asr_loop_run_once(loop, 20) >= 0);
  }
}

static void run_for(asr_loop_t *loop, int ms) {
  uint64_t until = kv_raw_now_ms() + (uint64_t)ms;
  while (kv_raw_now_ms() < until) ASSERT(asr_loop_run_once(loop, 10) >= 0);
}

static int result(const seen_t *s) {
  int rc = 1;
  ASSERT(asr_kv_call_done(s->call, &rc));
  return rc;
}

/* --- basics ---------------------------------------------------------------- */

TEST(set_get_one_connection_many_frames_per_syscall) {
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(srv);
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_new(loop, 5000, 60000);
  enum { N = 200 };
  static seen_t sets[N], gets[N];
  seen_t *all[2 * N];
  char key[32], val[32];
  for (int i = 0; i < N; i++) {
    snprintf(key, sizeof key, "k%03d", i);
    int vl = snprintf(val, sizeof val, "value-%d", i * 7);
    start_set(p, port, key, val, (size_t)vl, &sets[i]);
    all[i] = &sets[i];
  }
  run_until_done(loop, all, N, 5000);
  for (int i = 0; i < N; i++) {
    snprintf(key, sizeof key, "k%03d", i);
    start_get(p, port, key, 0, &gets[i]);
    all[N + i] = &gets[i];
  }
  run_until_done(loop, all + N, N, 5000);
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(result(&sets[i]), 0);
    ASSERT_EQ(sets[i].done_calls, 1);
    ASSERT_EQ(result(&gets[i]), 0);
    ASSERT_EQ(gets[i].value_calls, 1);
    ASSERT_EQ(gets[i].done_calls, 1);
    ASSERT(gets[i].value_before_done);
    int vl = snprintf(val, sizeof val, "value-%d", i * 7);
    ASSERT_EQ(gets[i].len, (size_t)vl);
    ASSERT_MEMEQ(gets[i].val, val, (size_t)vl);
  }
  asr_kv_pool_stats_t ps;
  asr_kv_pool_stats(p, &ps);
  asr_kv_server_stats_t st = stats(srv);
  ASSERT_EQ(st.accepted, 1); /* every request over one connection */
  ASSERT_EQ(st.pipelined, 1);
  ASSERT_EQ(ps.connects, 1);
  ASSERT_EQ(ps.frames_out, 2 * N);
  ASSERT_EQ(ps.frames_in, 2 * N);
  /* many frames per system call, both ways: 200 frames started in one tick
   * go out in a few sends (the send buffer's bound is 256 frames) */
  ASSERT_MSG(ps.sends <= 2 * N / 8, "%lu sends for %d frames", ps.sends, 2 * N);
  ASSERT_MSG(ps.recvs < 2 * N, "%lu recvs for %d frames", ps.recvs, 2 * N);
  /* a GET without retry of a missing key: NOT_FOUND */
  seen_t miss;
  start_get(p, port, "absent", 0, &miss);
  seen_t *one = &miss;
  run_until_done(loop, &one, 1, 3000);
  ASSERT_EQ(result(&miss), ASR_ENOTFOUND);
  ASSERT_EQ(miss.value_calls, 0);
  for (int i = 0; i < N; i++) {
    asr_kv_call_free(sets[i].call);
    asr_kv_call_free(gets[i].call);
  }
  asr_kv_call_free(miss.call);
  asr_kv_pool_free(p);
  asr_loop_free(loop);
  asr_kv_server_free(srv);
}

/* A GET held for its key does not hold the requests behind it on the same
 * connection, and each answer reaches the request (the comm) it belongs to. */
TEST_TIMEOUT(answers_out_of_order_reach_the_right_request, 30) {
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(srv);
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_new(loop, 10000, 60000);
  ASSERT_OK(asr_kv_server_put(srv, "ready-1", 7, "one", 3, ASR_KV_VTYPE_BINARY));
  ASSERT_OK(asr_kv_server_put(srv, "ready-2", 7, "two", 3, ASR_KV_VTYPE_BINARY));
  seen_t late, r1, r2;
  start_get(p, port, "late", 1, &late); /* held: its key comes later */
  start_get(p, port, "ready-1", 1, &r1);
  start_get(p, port, "ready-2", 1, &r2);
  seen_t *both[2] = {&r1, &r2};
  run_until_done(loop, both, 2, 5000);
  ASSERT_EQ(late.done_calls, 0); /* still held, behind nothing */
  ASSERT_EQ(stats(srv).held, 1);
  ASSERT_EQ(r1.len, 3);
  ASSERT_MEMEQ(r1.val, "one", 3);
  ASSERT_MEMEQ(r2.val, "two", 3);
  ASSERT_OK(asr_kv_server_put(srv, "late", 4, "LATE!", 5, ASR_KV_VTYPE_BINARY));
  seen_t *l = &late;
  run_until_done(loop, &l, 1, 5000);
  ASSERT_EQ(result(&late), 0);
  ASSERT_EQ(late.value_calls, 1);
  ASSERT_EQ(late.len, 5);
  ASSERT_MEMEQ(late.val, "LATE!", 5);
  ASSERT(r1.done_ms <= late.done_ms && r2.done_ms <= late.done_ms);
  ASSERT_EQ(stats(srv).accepted, 1);
  asr_kv_call_free(late.call);
  asr_kv_call_free(r1.call);
  asr_kv_call_free(r2.call);
  asr_kv_pool_free(p);
  asr_loop_free(loop);

  /* The same on the wire: ids 7 (held) and 8 (ready) in one write; 8's
   * answer comes first, then 7's once its SET arrives on another connection. */
  int fd = kv_raw_connect(port, RAW_TMO);
  ASSERT(fd >= 0);
  uint8_t two[2 * ASR_KV_FRAME_LEN], r[ASR_KV_FRAME_LEN];
  asr_kv_msg_t g7 = {.opcode = ASR_KV_OP_GET,
                     .vtype = 1,
                     .flags = ASR_KV_FLAG_ID,
                     .id = 7,
                     .aux = 1500,
                     .key_len = 5,
                     .key = (const uint8_t *)"wire7"};
  asr_kv_msg_t g8 = g7;
  g8.id = 8;
  g8.key = (const uint8_t *)"ready";
  g8.key_len = 5;
  ASSERT_OK(asr_kv_server_put(srv, "ready", 5, "R", 1, ASR_KV_VTYPE_BINARY));
  ASSERT_OK(asr_kv_frame_encode(two, &g7));
  ASSERT_OK(asr_kv_frame_encode(two + ASR_KV_FRAME_LEN, &g8));
  ASSERT_EQ(kv_raw_send(fd, two, sizeof two), KV_RAW_OK);
  ASSERT_EQ(kv_raw_read_frame(fd, r, RAW_TMO), KV_RAW_OK);
  asr_kv_msg_t m;
  ASSERT_OK(asr_kv_frame_decode(r, &m, NULL));
  ASSERT_EQ(m.id, 8);
  ASSERT_EQ(m.opcode, ASR_KV_OP_GET_BINARY);
  ASSERT_EQ(m.flags, ASR_KV_FLAG_ID);
  ASSERT_OK(asr_kv_server_put(srv, "wire7", 5, "seven", 5, ASR_KV_VTYPE_BINARY));
  ASSERT_EQ(kv_raw_read_frame(fd, r, RAW_TMO), KV_RAW_OK);
  ASSERT_OK(asr_kv_frame_decode(r, &m, NULL));
  ASSERT_EQ(m.id, 7);
  ASSERT_EQ(m.opcode, ASR_KV_OP_GET_BINARY);
  ASSERT_EQ(m.val_len, 5);
  ASSERT_MEMEQ(m.val, "seven", 5);
  close(fd);
  asr_kv_server_free(srv);
}

/* --- the seed's form and LIST ------------------------------------------------ */

static asr_kv_pool_t *seed_pool_new(asr_loop_t *loop, int timeout_ms) {
  asr_kv_pool_opts_t o = {.secret = zero_secret, .timeout_ms = timeout_ms, .idle_ms = 60000, .seed_form = 1};
  asr_kv_pool_t *p = NULL;
  char err[256] = "";
  int rc = asr_kv_pool_new(loop, &o, &p, err, sizeof err);
  ASSERT_MSG(rc == 0, "asr_kv_pool_new: %s (%s)", asr_test_errname(rc), err);
  return p;
}

/* Runs the loop until the server holds n GETs for their keys (3 s at most). */
static void run_until_held(asr_loop_t *loop, asr_kv_server_t *srv, unsigned n) {
  uint64_t deadline = kv_raw_now_ms() + 3000;
  while (stats(srv).held != n && kv_raw_now_ms() < deadline) ASSERT(asr_loop_run_once(loop, 2) >= 0);
  ASSERT_MSG(stats(srv).held == n, "the server holds %u GETs, expected %u", stats(srv).held, n);
}

/* A pool of the seed's form (kv_conn.h) sends one request at a time on one
 * connection, without ids, and carries values of the whole field (964
 * bytes) where a pipelined pool's frames hold 960; a GET held for its key
 * holds the connection, and what is queued behind it goes out after. */
TEST_TIMEOUT(seed_form_one_request_at_a_time, 30) {
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(srv);
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = seed_pool_new(loop, 10000), *pp = pool_new(loop, 10000, 60000);
  uint8_t big[ASR_KV_VAL_MAX + 1];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 13 + 5);
  asr_kv_call_t *call = NULL;
  ASSERT_EQ(
      asr_kv_pool_set(p, IP, port, "k", 1, big, ASR_KV_VAL_MAX + 1, ASR_KV_VTYPE_BINARY, NULL, NULL, &call),
      ASR_ETOOBIG);
  ASSERT_EQ(asr_kv_pool_set(pp, IP, port, "k", 1, big, ASR_KV_VAL_MAX_ID + 1, ASR_KV_VTYPE_BINARY, NULL, NULL,
                            &call),
            ASR_ETOOBIG);
  ASSERT(call == NULL);
  enum { N = 20 };
  static seen_t sets[N], gets[N];
  seen_t *all[2 * N];
  char key[32];
  for (int i = 0; i < N; i++) {
    snprintf(key, sizeof key, "seed-%02d", i);
    start_set(p, port, key, big, i == 0 ? ASR_KV_VAL_MAX : (size_t)i, &sets[i]);
    start_get(p, port, key, 0, &gets[i]);
    all[2 * i] = &sets[i], all[2 * i + 1] = &gets[i];
  }
  run_until_done(loop, all, 2 * N, 5000);
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(result(&sets[i]), 0);
    ASSERT_MSG(result(&gets[i]) == 0, "GET %d: %s", i, asr_kv_call_error(gets[i].call));
    ASSERT_EQ(gets[i].value_calls, 1);
    ASSERT(gets[i].value_before_done);
    ASSERT_EQ(gets[i].len, i == 0 ? (size_t)ASR_KV_VAL_MAX : (size_t)i);
    ASSERT_MEMEQ(gets[i].val, big, gets[i].len);
    asr_kv_call_free(sets[i].call);
    asr_kv_call_free(gets[i].call);
  }
  asr_kv_pool_stats_t ps;
  asr_kv_pool_stats(p, &ps);
  ASSERT_EQ(ps.connects, 1);
  ASSERT_EQ(ps.frames_out, 2 * N);
  ASSERT_EQ(ps.sends, 2 * N); /* one request on the wire at a time */
  asr_kv_server_stats_t st = stats(srv);
  ASSERT_EQ(st.accepted, 1);
  ASSERT_EQ(st.pipelined, 0);
  ASSERT_EQ(st.errors, 0);

  /* the 964-byte value reaches a pipelined GET as a refusal, not cut short */
  seen_t pg;
  start_get(pp, port, "seed-00", 0, &pg);
  seen_t *one = &pg;
  run_until_done(loop, &one, 1, 5000);
  ASSERT_EQ(result(&pg), ASR_ESERVER);
  ASSERT_CONTAINS(asr_kv_call_error(pg.call), "does not fit");
  ASSERT_EQ(pg.value_calls, 0);
  asr_kv_call_free(pg.call);

  /* a held GET holds the connection: the SET behind it waits its turn */
  seen_t held, behind;
  start_get(p, port, "later", 1, &held);
  start_set(p, port, "behind", "b", 1, &behind);
  run_until_held(loop, srv, 1);
  run_for(loop, 50);
  ASSERT_EQ(behind.done_calls, 0);
  ASSERT_OK(asr_kv_server_put(srv, "later", 5, "L", 1, ASR_KV_VTYPE_BINARY));
  seen_t *two[2] = {&held, &behind};
  run_until_done(loop, two, 2, 5000);
  ASSERT_EQ(result(&held), 0);
  ASSERT_MEMEQ(held.val, "L", 1);
  ASSERT_EQ(stats(srv).woken, 1); /* the put answered the held GET */
  ASSERT_EQ(result(&behind), 0);
  ASSERT(held.done_ms <= behind.done_ms);
  asr_kv_call_free(held.call);
  asr_kv_call_free(behind.call);

  /* a request in flight that ends unanswered (freed here; its deadline does
   * the same) leaves its connection: the answer would carry no id */
  start_get(p, port, "never", 1, &held);
  start_set(p, port, "after", "a", 1, &behind);
  run_until_held(loop, srv, 1);
  asr_kv_call_free(held.call);
  one = &behind;
  run_until_done(loop, &one, 1, 5000);
  ASSERT_EQ(result(&behind), 0);
  asr_kv_call_free(behind.call);
  asr_kv_pool_stats(p, &ps);
  ASSERT_EQ(ps.connects, 2);
  ASSERT_EQ(stats(srv).accepted, 3); /* the two of p and the pipelined pool's */
  uint64_t until = kv_raw_now_ms() + 3000;
  while (stats(srv).held != 0 && kv_raw_now_ms() < until) kv_raw_sleep_ms(2);
  ASSERT_EQ(stats(srv).held, 0);   /* the server saw the first one close */
  ASSERT_EQ(stats(srv).errors, 1); /* the pipelined GET's refusal */
  asr_kv_pool_free(p);
  asr_kv_pool_free(pp);
  asr_loop_free(loop);
  asr_kv_server_free(srv);
}

typedef struct {
  int calls;
  uint32_t total;
  size_t klen, vlen;
  int vtype;
  uint8_t key[ASR_KV_KEY_MAX], val[ASR_KV_VAL_MAX];
} entry_t;

static void on_entry(void *arg, uint32_t total, const uint8_t *key, size_t klen, const uint8_t *val,
                     size_t vlen, int vtype) {
  entry_t *e = arg;
  e->calls++;
  e->total = total;
  e->klen = klen;
  memcpy(e->key, key, klen);
  e->vlen = vlen;
  memcpy(e->val, val, vlen);
  e->vtype = vtype;
}

/* LIST (asrkv dump) on both forms: the entries in insertion order with
 * the key count, NOT_FOUND past the end; an entry longer than a frame with
 * an id comes whole in the seed's form and as a refusal pipelined. */
TEST_TIMEOUT(list_entries_both_forms, 30) {
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(srv);
  uint8_t big[ASR_KV_VAL_MAX];
  memset(big, 'x', sizeof big);
  ASSERT_OK(asr_kv_server_put(srv, "zeta", 4, "Z", 1, ASR_KV_VTYPE_TEXT));
  ASSERT_OK(asr_kv_server_put(srv, "a\0b", 3, "\x00\x01", 2, ASR_KV_VTYPE_BINARY));
  ASSERT_OK(asr_kv_server_put(srv, "big", 3, big, sizeof big, ASR_KV_VTYPE_BINARY));
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  for (int form = 0; form < 2; form++) {
    asr_kv_pool_t *p = form ? seed_pool_new(loop, 5000) : pool_new(loop, 5000, 60000);
    entry_t e[4] = {{0}};
    seen_t s[4];
    seen_t *all[4];
    for (uint32_t i = 0; i < 4; i++) {
      memset(&s[i], 0, sizeof s[i]);
      ASSERT_OK(asr_kv_pool_list(p, IP, port, i, on_entry, &e[i], on_done, &s[i], &s[i].call));
      all[i] = &s[i];
    }
    run_until_done(loop, all, 4, 5000);
    ASSERT_EQ(result(&s[0]), 0);
    ASSERT_EQ(e[0].calls, 1);
    ASSERT_EQ(e[0].total, 3);
    ASSERT(e[0].klen == 4 && memcmp(e[0].key, "zeta", 4) == 0 && e[0].vtype == ASR_KV_VTYPE_TEXT);
    ASSERT(e[0].vlen == 1 && e[0].val[0] == 'Z');
    ASSERT_EQ(result(&s[1]), 0);
    ASSERT(e[1].klen == 3 && memcmp(e[1].key, "a\0b", 3) == 0 && e[1].vtype == ASR_KV_VTYPE_BINARY);
    ASSERT(e[1].vlen == 2 && memcmp(e[1].val, "\x00\x01", 2) == 0);
    if (form) {
      ASSERT_EQ(result(&s[2]), 0);
      ASSERT_EQ(e[2].vlen, sizeof big);
      ASSERT_MEMEQ(e[2].val, big, sizeof big);
    } else {
      ASSERT_EQ(result(&s[2]), ASR_ESERVER);
      ASSERT_CONTAINS(asr_kv_call_error(s[2].call), "does not fit");
      ASSERT_CONTAINS(asr_kv_call_error(s[2].call), "LIST on 127.0.0.1:");
      ASSERT_EQ(e[2].calls, 0);
    }
    ASSERT_EQ(result(&s[3]), ASR_ENOTFOUND); /* past the end */
    ASSERT_EQ(e[3].calls, 0);
    for (int i = 0; i < 4; i++) asr_kv_call_free(s[i].call);
    asr_kv_pool_free(p);
  }
  asr_loop_free(loop);
  asr_kv_server_free(srv);
}

/* --- bounds ---------------------------------------------------------------- */

/* What a pending request costs the client: a GET holds its key, a SET its
 * key and its value, and neither a failure message's room until it fails
 * (kv_conn.c: set_err). In a full mesh each service thread holds one per
 * connecting comm, and a pool may hold 10,000 (the test below): 5,000
 * GETs and 5,000 SETs of 128-byte handles, started and not yet sent, add
 * at most 400 and 600 bytes of heap each. */
TEST(pending_request_memory_small) {
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(srv);
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_new(loop, 60000, 60000);
  enum { N = 5000 };
  seen_t *s = calloc(2 * N, sizeof *s);
  ASSERT(s);
  char key[32];
  uint8_t val[128] = {1};
  start_get(p, port, "warm", 0, &s[0]); /* the connection's own buffers, once */
  struct mallinfo2 m0 = mallinfo2();
  for (int i = 1; i < N; i++) {
    snprintf(key, sizeof key, "mem-%05d", i);
    start_get(p, port, key, 1, &s[i]);
  }
  struct mallinfo2 m1 = mallinfo2();
  for (int i = 0; i < N; i++) {
    snprintf(key, sizeof key, "mem-%05d", i);
    start_set(p, port, key, val, sizeof val, &s[N + i]);
  }
  struct mallinfo2 m2 = mallinfo2();
  double get_b = (double)(m1.uordblks - m0.uordblks) / (N - 1),
         set_b = (double)(m2.uordblks - m1.uordblks) / N;
  ASSERT_MSG(get_b <= 400, "a pending GET takes %.0f bytes", get_b);
  ASSERT_MSG(set_b <= 600, "a pending SET of 128 bytes takes %.0f bytes", set_b);
  ASSERT_EQ(asr_kv_pool_pending(p), 2 * N);
  for (int i = 0; i < 2 * N; i++) asr_kv_call_free(s[i].call);
  ASSERT_EQ(asr_kv_pool_pending(p), 0);
  free(s);
  asr_kv_pool_free(p);
  asr_loop_free(loop);
  asr_kv_server_free(srv);
}

/* 10,000 requests in flight on one connection: half of them GETs held for
 * keys that the other half, behind them, sets. The server's bounds (64
 * unsent answers, 1000 held GETs) stop it reading until answers leave or
 * holds end, so what it keeps for the connection stays bounded; every
 * request still ends, once, with its own value. */
TEST_TIMEOUT(ten_thousand_in_flight_server_memory_bounded, 90) {
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){.max_unsent = 64, .max_held = 1000});
  uint16_t port = asr_kv_server_port(srv);
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_new(loop, 60000, 60000);
  enum { N = 5000 };
  seen_t *gets = calloc(N, sizeof *gets), *sets = calloc(N, sizeof *sets);
  seen_t **all = calloc(2 * N, sizeof *all);
  ASSERT(gets && sets && all);
  char key[32];
  uint8_t val[128];
  for (int i = 0; i < N; i++) {
    snprintf(key, sizeof key, "ten-%05d", i);
    start_get(p, port, key, 1, &gets[i]);
    all[i] = &gets[i];
  }
  for (int i = 0; i < N; i++) {
    snprintf(key, sizeof key, "ten-%05d", i);
    for (size_t b = 0; b < sizeof val; b++) val[b] = (uint8_t)(i * 31 + b);
    start_set(p, port, key, val, sizeof val, &sets[i]);
    all[N + i] = &sets[i];
  }
  ASSERT_EQ(asr_kv_pool_pending(p), 2 * N);
  run_until_done(loop, all, 2 * N, 80000);
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(result(&sets[i]), 0);
    ASSERT_EQ(sets[i].done_calls, 1);
    ASSERT_MSG(result(&gets[i]) == 0, "GET %d: %s", i, asr_kv_call_error(gets[i].call));
    ASSERT_EQ(gets[i].value_calls, 1);
    ASSERT_EQ(gets[i].done_calls, 1);
    ASSERT_EQ(gets[i].len, sizeof val);
    for (size_t b = 0; b < sizeof val; b++) val[b] = (uint8_t)(i * 31 + b);
    ASSERT_MEMEQ(gets[i].val, val, sizeof val);
  }
  asr_kv_server_stats_t st = stats(srv);
  ASSERT_EQ(st.accepted, 1);
  ASSERT_MSG(st.held_peak <= 1000, "held peak %u over the bound", st.held_peak);
  ASSERT_MSG(st.unsent_peak <= 64 + 1000, "%u answers waited on one connection", st.unsent_peak);
  ASSERT_MSG(st.paused > 0, "the bounds never stopped the server reading");
  ASSERT_EQ(asr_kv_pool_pending(p), 0);
  for (int i = 0; i < N; i++) {
    asr_kv_call_free(gets[i].call);
    asr_kv_call_free(sets[i].call);
  }
  free(gets), free(sets), free(all);
  asr_kv_pool_free(p);
  asr_loop_free(loop);

  /* And a raw client that writes 10,000 GETs before reading a single
   * answer: the server stops reading it at its bound; then, read, every id
   * is answered exactly once. */
  ASSERT_OK(asr_kv_server_put(srv, "hot", 3, "hot-value", 9, ASR_KV_VTYPE_BINARY));
  int fd = kv_raw_connect(port, RAW_TMO);
  ASSERT(fd >= 0);
  ASSERT_OK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK));
  enum { M = 10000 };
  static uint8_t seenid[M];
  uint8_t f[ASR_KV_FRAME_LEN], in[64 * ASR_KV_FRAME_LEN];
  size_t sent_frames = 0, fpos = ASR_KV_FRAME_LEN, in_len = 0, answers = 0;
  int reading = 0;
  uint64_t deadline = kv_raw_now_ms() + 60000;
  while (answers < M) {
    ASSERT_MSG(kv_raw_now_ms() < deadline, "%zu of %d answers", answers, M);
    if (sent_frames < M || fpos < ASR_KV_FRAME_LEN) {
      if (fpos == ASR_KV_FRAME_LEN) {
        asr_kv_msg_t g = {.opcode = ASR_KV_OP_GET,
                          .vtype = 1,
                          .flags = ASR_KV_FLAG_ID,
                          .id = (uint32_t)sent_frames,
                          .key_len = 3,
                          .key = (const uint8_t *)"hot"};
        ASSERT_OK(asr_kv_frame_encode(f, &g));
        fpos = 0;
        sent_frames++;
      }
      ssize_t n = send(fd, f + fpos, sizeof f - fpos, MSG_NOSIGNAL);
      if (n > 0) {
        fpos += (size_t)n;
        continue;
      }
      ASSERT_MSG(errno == EAGAIN || errno == EWOULDBLOCK, "send: %s", strerror(errno));
      if (!reading) { /* everything is full: the server must have stopped reading us */
        kv_raw_sleep_ms(200);
        asr_kv_server_stats_t s2 = stats(srv);
        ASSERT_MSG(s2.unsent_peak <= 64 + 1000, "unsent peak %u", s2.unsent_peak);
        ASSERT(sent_frames < M); /* kernel buffers cannot take 11 MB */
        reading = 1;
      }
    }
    kv_raw_poll(fd, POLLIN, 5);
    ssize_t n = recv(fd, in + in_len, sizeof in - in_len, 0);
    if (n > 0) in_len += (size_t)n;
    size_t off = 0;
    for (; in_len - off >= ASR_KV_FRAME_LEN; off += ASR_KV_FRAME_LEN) {
      asr_kv_msg_t m;
      ASSERT_OK(asr_kv_frame_decode(in + off, &m, NULL));
      ASSERT_EQ(m.opcode, ASR_KV_OP_GET_BINARY);
      ASSERT(m.id < M);
      ASSERT_MSG(!seenid[m.id], "id %u answered twice", m.id);
      seenid[m.id] = 1;
      ASSERT_MEMEQ(m.val, "hot-value", 9);
      answers++;
    }
    memmove(in, in + off, in_len - off);
    in_len -= off;
  }
  close(fd);
  asr_kv_server_free(srv);
}

/* A client that stops reading is closed stall_timeout_ms after its last
 * byte moved, and others are served meanwhile. */
TEST_TIMEOUT(non_reading_client_closed_others_not_delayed, 40) {
  enum { STALL_MS = 2500 }; /* long enough for the others' 100 requests on a loaded machine */
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){.stall_timeout_ms = STALL_MS, .max_unsent = 16});
  uint16_t port = asr_kv_server_port(srv);
  uint8_t big[900];
  memset(big, 'B', sizeof big);
  ASSERT_OK(asr_kv_server_put(srv, "big", 3, big, sizeof big, ASR_KV_VTYPE_BINARY));
  int fd = kv_raw_connect_ex(port, RAW_TMO, 4096);
  ASSERT(fd >= 0);
  ASSERT_OK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK));
  uint8_t f[ASR_KV_FRAME_LEN];
  asr_kv_msg_t g = {.opcode = ASR_KV_OP_GET,
                    .vtype = 1,
                    .flags = ASR_KV_FLAG_ID,
                    .key_len = 3,
                    .key = (const uint8_t *)"big"};
  /* write until nothing more goes in: the server's bound, then the kernel's
   * buffers both ways, are full */
  size_t frames = 0;
  uint64_t first_byte = kv_raw_now_ms(), last_progress = first_byte;
  for (;;) {
    g.id = (uint32_t)frames;
    ASSERT_OK(asr_kv_frame_encode(f, &g));
    size_t pos = 0;
    while (pos < sizeof f) {
      ssize_t n = send(fd, f + pos, sizeof f - pos, MSG_NOSIGNAL);
      if (n > 0) {
        pos += (size_t)n;
        last_progress = kv_raw_now_ms();
        continue;
      }
      ASSERT(errno == EAGAIN || errno == EWOULDBLOCK);
      if (kv_raw_now_ms() - last_progress > 300) goto full;
      kv_raw_sleep_ms(5);
    }
    frames++;
  }
full:
  ASSERT(frames > 16);
  /* meanwhile a pipelined client is served at once */
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_new(loop, 5000, 60000);
  enum { N = 100 };
  static seen_t gets[N];
  seen_t *all[N];
  for (int i = 0; i < N; i++) {
    start_get(p, port, "big", 0, &gets[i]);
    all[i] = &gets[i];
  }
  run_until_done(loop, all, N, 5000);
  uint64_t others_done = kv_raw_now_ms();
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(result(&gets[i]), 0);
    ASSERT_EQ(gets[i].len, sizeof big);
    ASSERT_MEMEQ(gets[i].val, big, sizeof big);
    asr_kv_call_free(gets[i].call);
  }
  /* the others were done while the stuck one was still open */
  int rc = kv_raw_wait_hup(fd, 0);
  ASSERT_MSG(rc == KV_RAW_TIMEOUT, "the non-reading client was closed before the others were served");
  ASSERT_EQ(stats(srv).clients, 2);
  rc = kv_raw_wait_hup(fd, STALL_MS + 3000);
  uint64_t closed = kv_raw_now_ms();
  ASSERT_MSG(rc == KV_RAW_CLOSED, "the non-reading client was not closed");
  /* The server's last byte moved is not the client's: the kernel's buffers
   * take the client's writes after the server stopped reading. It moved
   * one after the client's first, so that is the bound. */
  ASSERT_MSG(closed - first_byte >= STALL_MS - 100,
             "closed %llu ms after the client's first byte, before %d ms",
             (unsigned long long)(closed - first_byte), STALL_MS);
  ASSERT(closed >= others_done);
  ASSERT(stats(srv).stalled >= 1);
  close(fd);
  asr_kv_pool_free(p);
  asr_loop_free(loop);
  asr_kv_server_free(srv);
}

/* --- faults ------------------------------------------------------------------- */

/* Frames that are refused are answered by id and the good ones around them
 * are answered as ever; a frame that is not ours at all (no magic, no id)
 * ends the connection after the answers before it. */
TEST(garbage_interleaved_with_good_frames) {
  uint8_t secret[ASR_KV_SECRET_LEN];
  memset(secret, 0x5a, sizeof secret);
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){.secret = secret});
  uint16_t port = asr_kv_server_port(srv);
  enum { NF = 9 };
  uint8_t batch[NF * ASR_KV_FRAME_LEN];
  uint8_t *f = batch;
  asr_kv_msg_t set = {.opcode = ASR_KV_OP_SET,
                      .vtype = 1,
                      .flags = ASR_KV_FLAG_ID,
                      .id = 1,
                      .key_len = 2,
                      .key = (const uint8_t *)"gk",
                      .val_len = 4,
                      .val = (const uint8_t *)"good",
                      .secret = secret};
  ASSERT_OK(asr_kv_frame_encode(f, &set));
  f += ASR_KV_FRAME_LEN;
  asr_kv_msg_t get = {.opcode = ASR_KV_OP_GET,
                      .vtype = 1,
                      .flags = ASR_KV_FLAG_ID,
                      .id = 3,
                      .key_len = 2,
                      .key = (const uint8_t *)"gk",
                      .secret = secret};
  /* id 2: an unknown opcode */
  ASSERT_OK(asr_kv_frame_encode(f, &get));
  f[ASR_KV_OFF_OPCODE] = 99, kv_raw_put32(f + ASR_KV_OFF_ID, 2), f += ASR_KV_FRAME_LEN;
  ASSERT_OK(asr_kv_frame_encode(f, &get));
  f += ASR_KV_FRAME_LEN; /* id 3: good */
  /* id 4: the wrong secret */
  asr_kv_msg_t bad = get;
  bad.id = 4;
  bad.secret = zero_secret;
  ASSERT_OK(asr_kv_frame_encode(f, &bad));
  f += ASR_KV_FRAME_LEN;
  /* id 5: a key length past the field */
  bad = get;
  bad.id = 5;
  ASSERT_OK(asr_kv_frame_encode(f, &bad));
  kv_raw_put16(f + ASR_KV_OFF_KEYLEN, 500), f += ASR_KV_FRAME_LEN;
  /* id 6: a response opcode sent as a request */
  bad = get;
  bad.id = 6;
  bad.opcode = ASR_KV_OP_SET_ACK;
  ASSERT_OK(asr_kv_frame_encode(f, &bad));
  f += ASR_KV_FRAME_LEN;
  /* id 7: good again */
  get.id = 7;
  ASSERT_OK(asr_kv_frame_encode(f, &get));
  f += ASR_KV_FRAME_LEN;
  /* garbage: no magic, then a good frame that must never be answered */
  memset(f, 0xEE, ASR_KV_FRAME_LEN), f += ASR_KV_FRAME_LEN;
  get.id = 9;
  ASSERT_OK(asr_kv_frame_encode(f, &get));
  f += ASR_KV_FRAME_LEN;
  ASSERT(f == batch + sizeof batch);

  int fd = kv_raw_connect(port, RAW_TMO);
  ASSERT(fd >= 0);
  ASSERT_EQ(kv_raw_send(fd, batch, sizeof batch), KV_RAW_OK);
  static const struct {
    uint32_t id;
    int op;
    const char *text; /* in the value */
  } want[] = {
      {1, ASR_KV_OP_SET_ACK, ""},         {2, ASR_KV_OP_ERROR, "opcode"},
      {3, ASR_KV_OP_GET_BINARY, "good"},  {4, ASR_KV_OP_ERROR, "secret"},
      {5, ASR_KV_OP_ERROR, "key length"}, {6, ASR_KV_OP_ERROR, "not a request"},
      {7, ASR_KV_OP_GET_BINARY, "good"},  {0, ASR_KV_OP_ERROR, "no id"},
  };
  uint8_t r[ASR_KV_FRAME_LEN];
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    ASSERT_EQ(kv_raw_read_frame(fd, r, RAW_TMO), KV_RAW_OK);
    asr_kv_msg_t m;
    const char *why = NULL;
    ASSERT_MSG(asr_kv_frame_decode(r, &m, &why) == 0, "answer %zu: %s", i, why);
    ASSERT_MSG(m.id == want[i].id && m.opcode == want[i].op, "answer %zu: id %u %s, expected id %u %s", i,
               m.id, asr_kv_op_name(m.opcode), want[i].id, asr_kv_op_name(want[i].op));
    ASSERT_EQ(m.flags, ASR_KV_FLAG_ID);
    char text[ASR_KV_VAL_MAX + 1];
    memcpy(text, m.val, m.val_len);
    text[m.val_len] = '\0';
    ASSERT_CONTAINS(text, want[i].text);
  }
  ASSERT_EQ(kv_raw_wait_closed(fd, RAW_TMO), KV_RAW_CLOSED); /* id 9 never answered */
  close(fd);
  /* the table holds what the good frames did, and nothing else */
  asr_kv_server_stats_t st = stats(srv);
  ASSERT_EQ(st.keys, 1);
  ASSERT_EQ(st.errors, 5); /* ids 2, 4, 5, 6 and the garbage */
  /* a frame with an id on a connection of the seed's kind is refused */
  fd = kv_raw_connect(port, RAW_TMO);
  uint8_t two[2 * ASR_KV_FRAME_LEN];
  asr_kv_msg_t plain = {
      .opcode = ASR_KV_OP_GET, .vtype = 1, .key_len = 2, .key = (const uint8_t *)"gk", .secret = secret};
  ASSERT_OK(asr_kv_frame_encode(two, &plain));
  ASSERT_OK(asr_kv_frame_encode(two + ASR_KV_FRAME_LEN, &get));
  ASSERT_EQ(kv_raw_send(fd, two, sizeof two), KV_RAW_OK);
  ASSERT_EQ(kv_raw_read_frame(fd, r, RAW_TMO), KV_RAW_OK);
  ASSERT_EQ(kv_raw_op(r), ASR_KV_OP_GET_BINARY);
  ASSERT_EQ(r[ASR_KV_OFF_FLAGS], 0); /* the seed's answers carry no id */
  ASSERT_EQ(kv_raw_read_frame(fd, r, RAW_TMO), KV_RAW_OK);
  ASSERT_EQ(kv_raw_op(r), ASR_KV_OP_ERROR);
  ASSERT_EQ(kv_raw_wait_closed(fd, RAW_TMO), KV_RAW_CLOSED);
  close(fd);
  asr_kv_server_free(srv);
}

/* A server process that serves port until killed: the child of a fork, so
 * the test can SIGKILL it mid-pipeline as an elected server's exit would. */
static pid_t server_process(uint16_t port) {
  int pfd[2];
  ASSERT_OK(pipe(pfd));
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    close(pfd[0]);
    asr_kv_server_opts_t o = {.bind_ip = IP, .port = port};
    asr_kv_server_t *s = NULL;
    char err[256];
    uint64_t until = kv_raw_now_ms() + 5000; /* the old one's socket may linger */
    int rc;
    while ((rc = asr_kv_server_new(&o, &s, err, sizeof err)) == ASR_EADDRINUSE && kv_raw_now_ms() < until)
      kv_raw_sleep_ms(10);
    if (rc || asr_kv_server_start_thread(s)) _exit(3);
    (void)!write(pfd[1], "R", 1);
    for (;;) pause();
  }
  close(pfd[1]);
  char c = 0;
  ASSERT_MSG(read(pfd[0], &c, 1) == 1 && c == 'R', "the server process did not start");
  close(pfd[0]);
  return pid;
}

static void kill_server(pid_t pid) {
  ASSERT_OK(kill(pid, SIGKILL));
  int status;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
}

/* The server is killed with requests in flight, and a new one starts on the
 * same port: the pool reconnects and sends every pending request again;
 * none is lost, none answered twice, and the owner of the keys the dead
 * server held publishes them again (as kv_host.c's epoch makes RECV comms
 * do). What is in flight at the kill does not depend on timing: the waiter's
 * GETs of the second half of the keys are held by the first server (nobody
 * has set them yet), and the owner starts its SETs of that half while no
 * server is up. */
TEST_TIMEOUT(server_killed_and_restarted_mid_pipeline, 60) {
  uint16_t port = asr_test_free_port();
  pid_t pid = server_process(port);
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_new(loop, 30000, 60000);     /* the waiter */
  asr_kv_pool_t *owner = pool_new(loop, 30000, 60000); /* the keys' owner */
  enum { N = 1000, H = N / 2 };
  static seen_t gets[N], sets[N], resets[H];
  seen_t *all[N];
  char key[32];
  uint8_t val[128];
  for (int i = 0; i < N; i++) {
    snprintf(key, sizeof key, "rk-%04d", i);
    start_get(p, port, key, 1, &gets[i]); /* held until set */
    all[i] = &gets[i];
  }
  /* the first half is published on the first server */
  for (int i = 0; i < H; i++) {
    snprintf(key, sizeof key, "rk-%04d", i);
    for (size_t b = 0; b < sizeof val; b++) val[b] = (uint8_t)(i + 3 * b);
    start_set(owner, port, key, val, sizeof val, &sets[i]);
  }
  seen_t *first[H];
  for (int i = 0; i < H; i++) first[i] = &sets[i];
  run_until_done(loop, first, H, 20000);
  run_until_done(loop, all, H, 20000); /* their GETs are answered; the others stay held */
  for (int i = H; i < N; i++) ASSERT_EQ(gets[i].done_calls, 0);
  kill_server(pid);
  /* the second half is started while no server is up */
  for (int i = H; i < N; i++) {
    snprintf(key, sizeof key, "rk-%04d", i);
    for (size_t b = 0; b < sizeof val; b++) val[b] = (uint8_t)(i + 3 * b);
    start_set(owner, port, key, val, sizeof val, &sets[i]);
  }
  run_for(loop, 100); /* both pools find the server gone and keep trying */
  for (int i = H; i < N; i++) ASSERT_EQ(sets[i].done_calls, 0);
  pid = server_process(port);
  /* the owner learns that its server changed and publishes again what it
   * had published there */
  for (int i = 0; i < H; i++) {
    snprintf(key, sizeof key, "rk-%04d", i);
    for (size_t b = 0; b < sizeof val; b++) val[b] = (uint8_t)(i + 3 * b);
    start_set(owner, port, key, val, sizeof val, &resets[i]);
  }
  seen_t *rest[N];
  for (int i = 0; i < H; i++) rest[i] = &sets[H + i], rest[H + i] = &resets[i];
  run_until_done(loop, rest, N, 20000);
  run_until_done(loop, all, N, 20000);
  for (int i = 0; i < N; i++) {
    ASSERT_MSG(result(&sets[i]) == 0, "SET %d: %s", i, asr_kv_call_error(sets[i].call));
    ASSERT_EQ(sets[i].done_calls, 1);
    ASSERT_MSG(result(&gets[i]) == 0, "GET %d: %s", i, asr_kv_call_error(gets[i].call));
    ASSERT_EQ(gets[i].value_calls, 1);
    ASSERT_EQ(gets[i].done_calls, 1);
    for (size_t b = 0; b < sizeof val; b++) val[b] = (uint8_t)(i + 3 * b);
    ASSERT_EQ(gets[i].len, sizeof val);
    ASSERT_MEMEQ(gets[i].val, val, sizeof val);
  }
  for (int i = 0; i < H; i++) ASSERT_EQ(result(&resets[i]), 0);
  asr_kv_pool_stats_t ps, os;
  asr_kv_pool_stats(p, &ps);
  asr_kv_pool_stats(owner, &os);
  ASSERT_MSG(ps.breaks >= 1 && ps.reissued >= 1, "waiter: %lu breaks, %lu re-sent", ps.breaks, ps.reissued);
  ASSERT_MSG(os.breaks >= 1, "owner: %lu breaks", os.breaks);
  ASSERT(ps.connects >= 2 && os.connects >= 2);
  /* the new server holds the republished keys: a GET without retry finds one */
  seen_t check;
  start_get(owner, port, "rk-0000", 0, &check);
  seen_t *c1 = &check;
  run_until_done(loop, &c1, 1, 5000);
  ASSERT_EQ(result(&check), 0);
  /* more time: nothing else arrives, nothing is called again */
  run_for(loop, 200);
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(gets[i].value_calls, 1);
    ASSERT_EQ(gets[i].done_calls, 1);
    ASSERT_EQ(sets[i].done_calls, 1);
    asr_kv_call_free(gets[i].call);
    asr_kv_call_free(sets[i].call);
  }
  for (int i = 0; i < H; i++) asr_kv_call_free(resets[i].call);
  asr_kv_call_free(check.call);
  asr_kv_pool_free(p);
  asr_kv_pool_free(owner);
  asr_loop_free(loop);
  kill_server(pid);
}

/* Deadlines are the request's: one that cannot be answered fails on time
 * while the others on its connection go on; a server that is not there
 * fails them with the reason. */
TEST_TIMEOUT(deadline_per_request_not_per_connection, 30) {
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(srv);
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_new(loop, 600, 60000);
  seen_t never, fine;
  uint64_t t0 = kv_raw_now_ms();
  start_get(p, port, "never-set", 1, &never);
  run_for(loop, 300);
  start_set(p, port, "fine", "x", 1, &fine);
  seen_t *f = &fine;
  run_until_done(loop, &f, 1, 2000);
  ASSERT_EQ(result(&fine), 0);
  ASSERT_EQ(never.done_calls, 0);
  seen_t *n = &never;
  run_until_done(loop, &n, 1, 3000);
  ASSERT_EQ(result(&never), ASR_ETIMEDOUT);
  ASSERT_EQ(never.value_calls, 0);
  ASSERT(never.done_ms - t0 >= 550);
  ASSERT_CONTAINS(asr_kv_call_error(never.call), "never-set");
  ASSERT_CONTAINS(asr_kv_call_error(never.call), "timed out");
  asr_kv_call_free(never.call);
  asr_kv_call_free(fine.call);
  /* no server: refused, retried, then timed out with the reason */
  uint16_t dead = asr_test_free_port();
  seen_t lost;
  start_get(p, dead, "k", 1, &lost);
  seen_t *l = &lost;
  run_until_done(loop, &l, 1, 3000);
  ASSERT_EQ(result(&lost), ASR_ETIMEDOUT);
  ASSERT_CONTAINS(asr_kv_call_error(lost.call), "refused");
  asr_kv_call_free(lost.call);
  /* freed while pending: no callback ever runs, and its answer is dropped
   * (as the timed-out GET's NOT_FOUND was) */
  asr_kv_pool_stats_t ps;
  asr_kv_pool_stats(p, &ps);
  unsigned long stale0 = ps.stale;
  seen_t gone;
  start_get(p, port, "late-key", 1, &gone);
  run_for(loop, 50);
  asr_kv_call_free(gone.call);
  ASSERT_OK(asr_kv_server_put(srv, "late-key", 8, "v", 1, ASR_KV_VTYPE_BINARY));
  run_for(loop, 100);
  ASSERT_EQ(gone.value_calls, 0);
  ASSERT_EQ(gone.done_calls, 0);
  asr_kv_pool_stats(p, &ps);
  ASSERT_EQ(ps.stale, stale0 + 1);
  asr_kv_pool_free(p);
  asr_loop_free(loop);
  asr_kv_server_free(srv);
}

/* A connection with nothing to do closes after idle_ms, with an END the
 * server honours, and the next request opens a new one. */
TEST_TIMEOUT(idle_connection_closes_after_idle_ms, 30) {
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(srv);
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_new(loop, 5000, 1000);
  seen_t a;
  start_set(p, port, "idle", "1", 1, &a);
  seen_t *x = &a;
  run_until_done(loop, &x, 1, 2000);
  asr_kv_call_free(a.call);
  run_for(loop, 100);
  ASSERT_EQ(stats(srv).clients, 1); /* not yet */
  run_for(loop, 1500);
  asr_kv_pool_stats_t ps;
  asr_kv_pool_stats(p, &ps);
  ASSERT_EQ(ps.idle_closes, 1);
  ASSERT_EQ(ps.open, 0);
  uint64_t until = kv_raw_now_ms() + 2000;
  while (stats(srv).clients != 0 && kv_raw_now_ms() < until) kv_raw_sleep_ms(5);
  ASSERT_EQ(stats(srv).clients, 0);
  ASSERT_EQ(stats(srv).errors, 0); /* the END was a valid frame */
  start_get(p, port, "idle", 0, &a);
  run_until_done(loop, &x, 1, 2000);
  ASSERT_EQ(result(&a), 0);
  ASSERT_MEMEQ(a.val, "1", 1);
  asr_kv_pool_stats(p, &ps);
  ASSERT_EQ(ps.connects, 2);
  asr_kv_call_free(a.call);
  asr_kv_pool_free(p);
  asr_loop_free(loop);
  asr_kv_server_free(srv);
}

/* --- the client's promises, through pools and the blocking calls ----------- */

/* Every case below starts from the same environment: no job secret, no
 * deadline or idle time from the environment. */
static void clean_env(void) {
  unsetenv("ASR_JOB_SECRET");
  unsetenv("ASR_KV_TIMEOUT_MS");
  unsetenv("ASR_KV_IDLE_MS");
}

static void fill_pattern(uint8_t *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 131u + seed * 7u + (i >> 3)) ^ (seed >> 8));
}

/* A GET's value callback runs exactly once, before done and never after
 * (seed §4: the connect machine reads a handle only once it is copied), for
 * a text and a binary answer alike; a deadline that passes after the
 * answer does not turn it into a failure; and a blocking call opens one
 * connection of its own. */
TEST_TIMEOUT(value_once_before_done_and_after_deadline, 20) {
  clean_env();
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(srv);
  const char *val = "value-1 for alpha";
  ASSERT_OK(asr_kv_set(IP, port, "alpha", 5, val, strlen(val), ASR_KV_VTYPE_TEXT, NULL, NULL, 0));
  ASSERT_EQ(stats(srv).accepted, 1);
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_new(loop, 500, 60000);
  for (int vt = ASR_KV_VTYPE_TEXT; vt <= ASR_KV_VTYPE_BINARY; vt++) {
    seen_t g;
    memset(&g, 0, sizeof g);
    ASSERT_OK(asr_kv_pool_get(p, IP, port, "alpha", 5, vt, 0, on_value, &g, on_done, &g, &g.call));
    seen_t *one = &g;
    run_until_done(loop, &one, 1, 3000);
    ASSERT_EQ(result(&g), 0);
    ASSERT_EQ(g.value_calls, 1);
    ASSERT(g.value_before_done);
    ASSERT_EQ(g.len, strlen(val));
    ASSERT_MEMEQ(g.val, val, strlen(val));
    ASSERT_STREQ(asr_kv_call_error(g.call), "");
    run_for(loop, 600); /* past the 500 ms deadline: it stays done, once */
    ASSERT_EQ(result(&g), 0);
    ASSERT_EQ(g.value_calls, 1);
    ASSERT_EQ(g.done_calls, 1);
    asr_kv_call_free(g.call);
  }
  asr_kv_pool_free(p);
  asr_loop_free(loop);
  uint8_t buf[64];
  size_t n = 0;
  ASSERT_OK(asr_kv_get(IP, port, "alpha", 5, 0, buf, sizeof buf, &n, NULL, NULL, 0));
  ASSERT_EQ(n, strlen(val));
  asr_kv_server_stats_t st = stats(srv);
  ASSERT_EQ(st.accepted, 3); /* the blocking SET's, the pool's, the blocking GET's */
  ASSERT_EQ(st.keys, 1);
  ASSERT_EQ(st.errors, 0);
  asr_kv_server_free(srv);
}

/* Spawns `asrkv serve --port P --bind 127.0.0.1` and waits for its READY line. */
static pid_t spawn_asrkv(uint16_t port, int *out_fd) {
  char path[4096], portbuf[16];
  snprintf(path, sizeof path, "%s/bootstrap/asrkv", asr_test_builddir());
  snprintf(portbuf, sizeof portbuf, "%u", port);
  char *argv[] = {path, "serve", "--port", portbuf, "--bind", IP, NULL};
  pid_t pid = asr_test_spawn(argv, out_fd, NULL);
  ASSERT_MSG(pid > 0, "cannot spawn %s", path);
  char line[256];
  int n = asr_test_read_line(*out_fd, line, sizeof line, 10000);
  ASSERT_MSG(n > 0, "no READY line from %s", path);
  char want[64];
  snprintf(want, sizeof want, "READY port=%u ", port);
  ASSERT_MSG(strncmp(line, want, strlen(want)) == 0, "unexpected first line '%s'", line);
  return pid;
}

/* Requests started before their server exists keep trying (the server is
 * not up yet: refused), finish nothing and call nothing, and complete once
 * it comes up, in a thread or as an `asrkv serve` process. */
static void client_before_server(int use_process, int seed_form) {
  clean_env();
  uint16_t port = asr_test_free_port();
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = seed_form ? seed_pool_new(loop, 10000) : pool_new(loop, 10000, 60000);
  const char *val = "published late";
  seen_t set, get;
  start_set(p, port, "early", val, strlen(val), &set);
  start_get(p, port, "early", 1, &get);
  run_for(loop, 200); /* nobody listens: neither may finish */
  asr_kv_pool_stats_t ps;
  asr_kv_pool_stats(p, &ps);
  ASSERT_MSG(ps.breaks > 1, "the connection was tried %lu times", ps.breaks);
  ASSERT_EQ(ps.connects, 0);
  ASSERT(set.done_calls == 0 && get.done_calls == 0 && get.value_calls == 0);
  ASSERT_STREQ(asr_kv_call_error(set.call), "");
  ASSERT_STREQ(asr_kv_call_error(get.call), "");

  asr_kv_server_t *srv = NULL;
  pid_t pid = -1;
  int out_fd = -1;
  if (use_process)
    pid = spawn_asrkv(port, &out_fd);
  else
    srv = srv_start_port((asr_kv_server_opts_t){0}, port);
  seen_t *both[2] = {&set, &get};
  run_until_done(loop, both, 2, 5000);
  ASSERT_MSG(result(&set) == 0, "SET: %s", asr_kv_call_error(set.call));
  ASSERT_MSG(result(&get) == 0, "GET: %s", asr_kv_call_error(get.call));
  ASSERT_EQ(get.value_calls, 1);
  ASSERT_EQ(get.len, strlen(val));
  ASSERT_MEMEQ(get.val, val, strlen(val));
  asr_kv_call_free(set.call);
  asr_kv_call_free(get.call);
  asr_kv_pool_free(p);
  asr_loop_free(loop);
  if (use_process) {
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    int st = asr_test_wait(pid, 10000);
    ASSERT_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "asrkv serve status %d", st);
    char line[256];
    ASSERT(asr_test_read_line(out_fd, line, sizeof line, 2000) > 0);
    ASSERT_CONTAINS(line, "keys=1 ");
    close(out_fd);
  } else {
    ASSERT_EQ(stats(srv).keys, 1);
    asr_kv_server_free(srv);
  }
}

TEST_TIMEOUT(client_before_server_thread, 20) { client_before_server(0, 0); }
TEST_TIMEOUT(client_before_server_process_seed_form, 20) { client_before_server(1, 1); }

/* A GET with retry is held by the server until a SET from another process
 * stores its key, and answered by it, never polling: it asks again only
 * when a wait of its own ran out (kv_frame.h: aux), which only a loaded
 * machine's slow setter lets happen. Without retry a missing key ends the
 * GET with ASR_ENOTFOUND and no value. */
TEST_TIMEOUT(get_retry_meets_set_from_other_process, 20) {
  clean_env();
  asr_kv_server_opts_t so = {.bind_ip = IP};
  asr_kv_server_t *srv = NULL;
  char err[640] = "";
  ASSERT_OK(asr_kv_server_new(&so, &srv, err, sizeof err));
  uint16_t port = asr_kv_server_port(srv);
  uint8_t val[300];
  fill_pattern(val, sizeof val, 42);
  val[0] = 0;
  val[150] = 0; /* zero bytes inside the value */
  int go[2];
  ASSERT_OK(pipe(go));
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) { /* single-threaded child: the server thread starts after the fork */
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) != 1) _exit(2); /* the parent's GET is held */
    asr_kv_pool_opts_t o = {.timeout_ms = 10000};
    int rc = asr_kv_set(IP, port, "late-key", 8, val, sizeof val, ASR_KV_VTYPE_BINARY, &o, err, sizeof err);
    if (rc) fprintf(stderr, "child SET: %s\n", err);
    _exit(rc ? 1 : 0);
  }
  ASSERT_OK(asr_kv_server_start_thread(srv));
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_new(loop, 10000, 60000);
  seen_t g;
  close(go[0]);
  uint64_t t0 = kv_raw_now_ms();
  start_get(p, port, "late-key", 1, &g);
  run_until_held(loop, srv, 1);
  ASSERT_EQ(g.done_calls, 0);
  ASSERT_EQ(write(go[1], "S", 1), 1); /* now the child sets the key */
  close(go[1]);
  seen_t *one = &g;
  run_until_done(loop, &one, 1, 10000);
  uint64_t took = kv_raw_now_ms() - t0;
  ASSERT_MSG(result(&g) == 0, "%s", asr_kv_call_error(g.call));
  /* held for its key: an ask again only after a wait of 500 ms had half passed */
  ASSERT_MSG(asr_kv_call_retries(g.call) * 250 <= took, "%u asks again in %llu ms",
             asr_kv_call_retries(g.call), (unsigned long long)took);
  ASSERT_EQ(g.value_calls, 1);
  ASSERT_EQ(g.len, sizeof val);
  ASSERT_MEMEQ(g.val, val, sizeof val);
  asr_kv_call_free(g.call);
  int st = asr_test_wait(pid, 10000);
  ASSERT_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "setter child status %d", st);
  asr_kv_server_stats_t sst = stats(srv);
  ASSERT_EQ(sst.accepted, 2);
  ASSERT_EQ(sst.woken, 1); /* the SET answered the held GET */
  ASSERT_EQ(sst.held, 0);

  /* without retry: ASR_ENOTFOUND, no value, no retry, and it stays so */
  start_get(p, port, "nobody-sets-this", 0, &g);
  run_until_done(loop, &one, 1, 5000);
  ASSERT_EQ(result(&g), ASR_ENOTFOUND);
  ASSERT_EQ(g.value_calls, 0);
  ASSERT_EQ(asr_kv_call_retries(g.call), 0);
  run_for(loop, 50);
  ASSERT_EQ(result(&g), ASR_ENOTFOUND);
  ASSERT_EQ(g.done_calls, 1);
  asr_kv_call_free(g.call);
  asr_kv_pool_free(p);
  asr_loop_free(loop);
  uint8_t buf[16];
  size_t vlen = 12345;
  ASSERT_EQ(asr_kv_get(IP, port, "nobody-sets-this", 16, 0, buf, sizeof buf, &vlen, NULL, NULL, 0),
            ASR_ENOTFOUND);
  ASSERT_EQ(vlen, 12345); /* written only on success */
  asr_kv_server_free(srv);
}

/* A request past its deadline fails with ASR_ETIMEDOUT and one line naming
 * its kind, its key (rendered as asrkv dump renders it), the server and the
 * last reason; its value callback never runs. */
static void expect_timeout(uint16_t port, const uint8_t *key, size_t klen, int is_set, const char *rendered,
                           const char *reason) {
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_new(loop, 300, 60000);
  seen_t s;
  memset(&s, 0, sizeof s);
  uint64_t t0 = kv_raw_now_ms();
  if (is_set)
    ASSERT_OK(asr_kv_pool_set(p, IP, port, key, klen, "x", 1, ASR_KV_VTYPE_TEXT, on_done, &s, &s.call));
  else
    ASSERT_OK(
        asr_kv_pool_get(p, IP, port, key, klen, ASR_KV_VTYPE_BINARY, 1, on_value, &s, on_done, &s, &s.call));
  seen_t *one = &s;
  run_until_done(loop, &one, 1, 5000);
  uint64_t took = kv_raw_now_ms() - t0;
  ASSERT_EQ(result(&s), ASR_ETIMEDOUT);
  ASSERT_MSG(took >= 290 && took <= 1500, "timed out after %llu ms", (unsigned long long)took);
  const char *e = asr_kv_call_error(s.call);
  char server[32];
  snprintf(server, sizeof server, "%s:%u", IP, port);
  ASSERT_CONTAINS(e, rendered);
  ASSERT_CONTAINS(e, server);
  ASSERT_CONTAINS(e, "timed out");
  ASSERT_CONTAINS(e, reason);
  ASSERT_CONTAINS(e, is_set ? "SET" : "GET");
  if (!strcmp(reason, "key not found")) ASSERT(asr_kv_call_retries(s.call) > 0);
  ASSERT_EQ(s.value_calls, 0);
  run_for(loop, 20);
  ASSERT_EQ(result(&s), ASR_ETIMEDOUT);
  ASSERT_EQ(s.done_calls, 1);
  asr_kv_call_free(s.call);
  asr_kv_pool_free(p);
  asr_loop_free(loop);
}

TEST_TIMEOUT(deadline_expiry_names_key_server_and_reason, 20) {
  clean_env();
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(srv);
  uint8_t hk[ASR_KV_HANDLE_KEY_LEN];
  ASSERT_EQ(asr_kv_handle_key(hk, 3, 5, "node2"), ASR_KV_HANDLE_KEY_LEN);
  expect_timeout(port, hk, sizeof hk, 0, "'handle-<send 3><recv 5><host node2>'", "key not found");
  expect_timeout(port, (const uint8_t *)"k\0z", 3, 0, "'k\\x00z'", "key not found");
  asr_kv_server_free(srv);

  uint16_t closed = asr_test_free_port(); /* nobody listens there */
  expect_timeout(closed, (const uint8_t *)"nokey", 5, 0, "'nokey'", "connection refused");
  expect_timeout(closed, (const uint8_t *)"noset", 5, 1, "'noset'", "connection refused");

  /* the blocking calls report the same line */
  char err[640] = "";
  asr_kv_pool_opts_t o = {.timeout_ms = 200};
  uint8_t buf[8];
  ASSERT_EQ(asr_kv_get(IP, closed, "blk", 3, 1, buf, sizeof buf, NULL, &o, err, sizeof err), ASR_ETIMEDOUT);
  ASSERT_CONTAINS(err, "'blk'");
  ASSERT_CONTAINS(err, "timed out");
  ASSERT_CONTAINS(err, "connection refused");

  /* ASR_KV_TIMEOUT_MS is the deadline when the options do not say */
  setenv("ASR_KV_TIMEOUT_MS", "250", 1);
  uint64_t t0 = kv_raw_now_ms();
  ASSERT_EQ(asr_kv_get(IP, closed, "env", 3, 1, buf, sizeof buf, NULL, NULL, err, sizeof err), ASR_ETIMEDOUT);
  uint64_t took = kv_raw_now_ms() - t0;
  ASSERT_MSG(took >= 240 && took <= 1500, "env deadline hit after %llu ms", (unsigned long long)took);
  unsetenv("ASR_KV_TIMEOUT_MS");
}

/* A bad ASR_KV_TIMEOUT_MS, ASR_KV_IDLE_MS or ASR_JOB_SECRET fails what would
 * use it, with a message naming it, rather than a silent default. */
TEST(bad_env_fails_the_request) {
  clean_env();
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(srv);
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = (asr_kv_pool_t *)1;
  char err[640] = "";
  uint8_t buf[8];
  setenv("ASR_KV_TIMEOUT_MS", "soon", 1);
  asr_kv_pool_opts_t po = {.idle_ms = 1000};
  ASSERT_EQ(asr_kv_pool_new(loop, &po, &p, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "ASR_KV_TIMEOUT_MS: 'soon' is not a positive number");
  ASSERT(p == (asr_kv_pool_t *)1); /* *out untouched */
  ASSERT_EQ(asr_kv_set(IP, port, "k", 1, "v", 1, ASR_KV_VTYPE_TEXT, NULL, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "bad SET request: ASR_KV_TIMEOUT_MS: 'soon' is not a positive number");
  ASSERT_EQ(asr_kv_get(IP, port, "k", 1, 0, buf, sizeof buf, NULL, NULL, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "bad GET request: ASR_KV_TIMEOUT_MS: 'soon' is not a positive number");
  ASSERT_EQ(asr_kv_list(IP, port, NULL, NULL, NULL, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "ASR_KV_TIMEOUT_MS: 'soon' is not a positive number");
  /* a deadline in the options does not read the variable */
  asr_kv_pool_opts_t o = {.timeout_ms = 1000};
  ASSERT_OK(asr_kv_set(IP, port, "k", 1, "v", 1, ASR_KV_VTYPE_TEXT, &o, err, sizeof err));
  unsetenv("ASR_KV_TIMEOUT_MS");
  ASSERT_OK(asr_kv_set(IP, port, "k", 1, "v", 1, ASR_KV_VTYPE_TEXT, NULL, err, sizeof err));
  /* a pool reads ASR_KV_IDLE_MS; a blocking call, whose pool never idles, does not */
  setenv("ASR_KV_IDLE_MS", "later", 1);
  ASSERT_EQ(asr_kv_pool_new(loop, NULL, &p, err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "ASR_KV_IDLE_MS");
  ASSERT_OK(asr_kv_set(IP, port, "k", 1, "v", 1, ASR_KV_VTYPE_TEXT, NULL, err, sizeof err));
  unsetenv("ASR_KV_IDLE_MS");
  asr_loop_free(loop);
  asr_kv_server_free(srv);
}

/* The default secret is read once per process: a bad one fails every pool
 * and call that would send it (the server would only refuse them). */
TEST(bad_secret_fails_the_request) {
  clean_env();
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(srv);
  setenv("ASR_JOB_SECRET", "0123", 1);
  char err[640] = "";
  ASSERT_EQ(asr_kv_set(IP, port, "k", 1, "v", 1, ASR_KV_VTYPE_TEXT, NULL, err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "ASR_JOB_SECRET: the value (4 characters) is not 64 hex digits");
  ASSERT_EQ(asr_kv_list(IP, port, NULL, NULL, NULL, err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "ASR_JOB_SECRET: the value (4 characters) is not 64 hex digits");
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = NULL;
  asr_kv_pool_opts_t po = {.idle_ms = 1000};
  ASSERT_EQ(asr_kv_pool_new(loop, &po, &p, err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "ASR_JOB_SECRET");
  asr_loop_free(loop);
  asr_kv_pool_opts_t o = {.secret = zero_secret}; /* a secret in the options does not read the variable */
  ASSERT_OK(asr_kv_set(IP, port, "k", 1, "v", 1, ASR_KV_VTYPE_TEXT, &o, err, sizeof err));
  asr_kv_server_free(srv);
}

static void get_exact(uint16_t port, const void *key, size_t klen, const void *want, size_t wlen,
                      const asr_kv_pool_opts_t *o) {
  uint8_t buf[ASR_KV_VAL_MAX];
  size_t vlen = 0;
  char err[640] = "";
  int rc = asr_kv_get(IP, port, key, klen, 0, buf, sizeof buf, &vlen, o, err, sizeof err);
  ASSERT_MSG(rc == 0, "GET: %s: %s", asr_test_errname(rc), err);
  ASSERT_EQ(vlen, wlen);
  ASSERT_MEMEQ(buf, want, wlen);
}

/* Keys are binary (zero bytes, a prefix is another key, the last byte of a
 * 143-byte handle key matters); a 144-byte key and a value past the frame's
 * room (960 bytes with an id, 964 in the seed's form) are refused before
 * any request exists; bad arguments too. */
TEST_TIMEOUT(binary_keys_and_limits, 20) {
  clean_env();
  asr_kv_server_t *srv = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(srv);
  const asr_kv_pool_opts_t seed = {.seed_form = 1};
  static const struct {
    const char *key;
    size_t klen;
    const char *val;
  } kv[] = {{"a\0b", 3, "value of a-zero-b"}, {"a\0c", 3, "value of a-zero-c, longer"}, {"a", 1, "A"}};
  for (int i = 0; i < 3; i++)
    ASSERT_OK(asr_kv_set(IP, port, kv[i].key, kv[i].klen, kv[i].val, strlen(kv[i].val), ASR_KV_VTYPE_BINARY,
                         NULL, NULL, 0));
  for (int i = 0; i < 3; i++) get_exact(port, kv[i].key, kv[i].klen, kv[i].val, strlen(kv[i].val), NULL);
  uint8_t buf[ASR_KV_VAL_MAX + 8];
  ASSERT_EQ(asr_kv_get(IP, port, "a\0", 2, 0, buf, sizeof buf, NULL, NULL, NULL, 0), ASR_ENOTFOUND);
  ASSERT_EQ(stats(srv).keys, 3);

  /* the 143-byte handle key with a 128-byte net handle */
  uint8_t hk[ASR_KV_HANDLE_KEY_LEN], handle[ASR_KV_NET_HANDLE_LEN];
  ASSERT_EQ(asr_kv_handle_key(hk, 127, 0, "a-rather-long-host-name.example"), ASR_KV_HANDLE_KEY_LEN);
  fill_pattern(handle, sizeof handle, 7);
  ASSERT_OK(asr_kv_set(IP, port, hk, sizeof hk, handle, sizeof handle, ASR_KV_VTYPE_BINARY, NULL, NULL, 0));
  get_exact(port, hk, sizeof hk, handle, sizeof handle, NULL);
  hk[ASR_KV_HANDLE_KEY_LEN - 1] ^= 1; /* the last byte matters */
  ASSERT_EQ(asr_kv_get(IP, port, hk, sizeof hk, 0, buf, sizeof buf, NULL, NULL, NULL, 0), ASR_ENOTFOUND);

  /* 144-byte keys are refused before any request exists */
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_new(loop, 5000, 60000);
  uint8_t big[ASR_KV_KEY_MAX + 1];
  fill_pattern(big, sizeof big, 3);
  asr_kv_call_t *r = NULL;
  ASSERT_EQ(asr_kv_pool_get(p, IP, port, big, sizeof big, ASR_KV_VTYPE_BINARY, 0, NULL, NULL, NULL, NULL, &r),
            ASR_ETOOBIG);
  ASSERT_EQ(asr_kv_pool_set(p, IP, port, big, sizeof big, "v", 1, ASR_KV_VTYPE_BINARY, NULL, NULL, &r),
            ASR_ETOOBIG);
  ASSERT(r == NULL);
  ASSERT_EQ(asr_kv_set(IP, port, big, sizeof big, "v", 1, ASR_KV_VTYPE_BINARY, NULL, NULL, 0), ASR_ETOOBIG);
  /* ... while 143 bytes of anything is fine */
  ASSERT_OK(asr_kv_set(IP, port, big, ASR_KV_KEY_MAX, "max-key", 7, ASR_KV_VTYPE_BINARY, NULL, NULL, 0));
  get_exact(port, big, ASR_KV_KEY_MAX, "max-key", 7, NULL);

  /* the value's room: 960 bytes with an id, 964 in the seed's form */
  uint8_t v[ASR_KV_VAL_MAX + 1];
  fill_pattern(v, sizeof v, 99);
  v[0] = v[500] = v[ASR_KV_VAL_MAX - 1] = 0;
  ASSERT_OK(asr_kv_set(IP, port, "id-value", 8, v, ASR_KV_VAL_MAX_ID, ASR_KV_VTYPE_BINARY, NULL, NULL, 0));
  get_exact(port, "id-value", 8, v, ASR_KV_VAL_MAX_ID, NULL);
  ASSERT_EQ(asr_kv_set(IP, port, "too-big", 7, v, ASR_KV_VAL_MAX_ID + 1, ASR_KV_VTYPE_BINARY, NULL, NULL, 0),
            ASR_ETOOBIG);
  ASSERT_OK(asr_kv_set(IP, port, "big-value", 9, v, ASR_KV_VAL_MAX, ASR_KV_VTYPE_BINARY, &seed, NULL, 0));
  get_exact(port, "big-value", 9, v, ASR_KV_VAL_MAX, &seed);
  ASSERT_EQ(asr_kv_set(IP, port, "too-big", 7, v, ASR_KV_VAL_MAX + 1, ASR_KV_VTYPE_BINARY, &seed, NULL, 0),
            ASR_ETOOBIG);
  ASSERT_EQ(asr_kv_pool_set(p, IP, port, "too-big", 7, v, ASR_KV_VAL_MAX_ID + 1, ASR_KV_VTYPE_BINARY, NULL,
                            NULL, &r),
            ASR_ETOOBIG);
  /* a value that does not fit the caller's buffer */
  char err[640] = "";
  ASSERT_EQ(asr_kv_get(IP, port, "big-value", 9, 0, buf, 100, NULL, &seed, err, sizeof err), ASR_ETOOBIG);
  ASSERT_CONTAINS(err, "964");
  /* empty keys and bad arguments */
  ASSERT_EQ(asr_kv_pool_set(p, IP, port, "", 0, "v", 1, ASR_KV_VTYPE_BINARY, NULL, NULL, &r), ASR_EINVAL);
  ASSERT_EQ(asr_kv_pool_get(p, IP, port, "k", 1, 7, 0, NULL, NULL, NULL, NULL, &r), ASR_EINVAL);
  ASSERT_EQ(asr_kv_pool_get(p, "not-an-ip", port, "k", 1, ASR_KV_VTYPE_BINARY, 0, NULL, NULL, NULL, NULL, &r),
            ASR_EINVAL);
  ASSERT_EQ(asr_kv_pool_get(p, IP, 0, "k", 1, ASR_KV_VTYPE_BINARY, 0, NULL, NULL, NULL, NULL, &r),
            ASR_EINVAL);
  ASSERT_EQ(asr_kv_set("not-an-ip", port, "k", 1, "v", 1, ASR_KV_VTYPE_BINARY, NULL, err, sizeof err),
            ASR_EINVAL);
  ASSERT_CONTAINS(err, "bad SET request");
  ASSERT(r == NULL);
  ASSERT_EQ(asr_kv_pool_pending(p), 0);
  asr_kv_pool_free(p);
  asr_loop_free(loop);
  asr_kv_server_stats_t st = stats(srv);
  ASSERT_EQ(st.keys, 7);
  ASSERT_EQ(st.errors, 0);
  asr_kv_server_free(srv);
}

/* The job secret: from ASR_JOB_SECRET (read once per process, by threads
 * racing for it too) or the options; the wrong one is refused with a
 * reason that names the key, and a GET with retry does not retry it. */
static int child_env_secret(uint16_t port, const char *hex, int expect) {
  if (hex)
    setenv("ASR_JOB_SECRET", hex, 1);
  else
    unsetenv("ASR_JOB_SECRET");
  char err[640] = "";
  char key[32];
  snprintf(key, sizeof key, "env-%d", (int)getpid());
  int rc = asr_kv_set(IP, port, key, strlen(key), "by-env", 6, ASR_KV_VTYPE_TEXT, NULL, err, sizeof err);
  if (rc != expect) {
    fprintf(stderr, "child SET: %s, want %s: %s\n", asr_err_name(rc), asr_err_name(expect), err);
    return 1;
  }
  if (expect == 0) {
    uint8_t buf[16];
    size_t n = 0;
    rc = asr_kv_get(IP, port, key, strlen(key), 0, buf, sizeof buf, &n, NULL, err, sizeof err);
    if (rc || n != 6 || memcmp(buf, "by-env", 6) != 0) {
      fprintf(stderr, "child GET: %s: %s\n", asr_err_name(rc), err);
      return 2;
    }
  } else if (!strstr(err, "secret")) {
    fprintf(stderr, "child: error does not mention the secret: %s\n", err);
    return 3;
  }
  return 0;
}

static uint16_t mt_port;
static pthread_barrier_t mt_barrier;
static void *mt_setter(void *arg) {
  char key[32];
  snprintf(key, sizeof key, "mt-%d", (int)(intptr_t)arg);
  pthread_barrier_wait(&mt_barrier);
  int rc = asr_kv_set(IP, mt_port, key, strlen(key), "t", 1, ASR_KV_VTYPE_TEXT, NULL, NULL, 0);
  return (void *)(intptr_t)rc;
}

static int child_env_secret_threads(uint16_t port, const char *hex) {
  setenv("ASR_JOB_SECRET", hex, 1);
  mt_port = port;
  enum { NT = 4 };
  pthread_t t[NT];
  pthread_barrier_init(&mt_barrier, NULL, NT);
  for (int i = 0; i < NT; i++) pthread_create(&t[i], NULL, mt_setter, (void *)(intptr_t)i);
  int bad = 0;
  for (int i = 0; i < NT; i++) {
    void *ret;
    pthread_join(t[i], &ret);
    if ((intptr_t)ret != 0) {
      fprintf(stderr, "thread %d: %s\n", i, asr_err_name((int)(intptr_t)ret));
      bad = 1;
    }
  }
  return bad;
}

TEST_TIMEOUT(job_secret, 20) {
  clean_env();
  uint8_t secret[ASR_KV_SECRET_LEN], other[ASR_KV_SECRET_LEN];
  ASSERT_OK(asr_kv_secret_generate(secret));
  ASSERT_OK(asr_kv_secret_generate(other));
  ASSERT(memcmp(secret, other, sizeof secret) != 0);
  char hex[ASR_KV_SECRET_HEX_LEN + 1], ohex[ASR_KV_SECRET_HEX_LEN + 1];
  asr_kv_secret_to_hex(secret, hex);
  asr_kv_secret_to_hex(other, ohex);
  asr_kv_server_opts_t so = {.bind_ip = IP, .secret = secret};
  asr_kv_server_t *srv = NULL;
  char err[640] = "";
  ASSERT_OK(asr_kv_server_new(&so, &srv, err, sizeof err));
  uint16_t port = asr_kv_server_port(srv);

  /* Children fork before this process uses the client (the default secret
   * is loaded once per process) and before the server thread exists. */
  struct {
    const char *hex;
    int expect;
    int threads;
  } kids[] = {{hex, 0, 0}, {NULL, ASR_EAUTH, 0}, {ohex, ASR_EAUTH, 0}, {hex, 0, 1}};
  enum { NK = sizeof kids / sizeof kids[0] };
  pid_t pids[NK];
  for (int i = 0; i < NK; i++) {
    pids[i] = fork();
    ASSERT(pids[i] >= 0);
    if (pids[i] == 0)
      _exit(kids[i].threads ? child_env_secret_threads(port, kids[i].hex)
                            : child_env_secret(port, kids[i].hex, kids[i].expect));
  }
  ASSERT_OK(asr_kv_server_start_thread(srv));

  asr_kv_pool_opts_t good = {.secret = secret}, bad = {.secret = other};
  ASSERT_OK(asr_kv_set(IP, port, "sec", 3, "ok", 2, ASR_KV_VTYPE_TEXT, &good, err, sizeof err));
  uint8_t buf[16];
  size_t n = 0;
  ASSERT_OK(asr_kv_get(IP, port, "sec", 3, 0, buf, sizeof buf, &n, &good, err, sizeof err));
  ASSERT_EQ(n, 2);
  ASSERT_MEMEQ(buf, "ok", 2);
  /* the wrong secret: refused with a reason, and nothing changes */
  ASSERT_EQ(asr_kv_set(IP, port, "sec", 3, "evil", 4, ASR_KV_VTYPE_TEXT, &bad, err, sizeof err), ASR_EAUTH);
  ASSERT_CONTAINS(err, "secret");
  ASSERT_CONTAINS(err, "'sec'");
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  bad.idle_ms = 60000;
  asr_kv_pool_t *p = NULL;
  ASSERT_OK(asr_kv_pool_new(loop, &bad, &p, err, sizeof err));
  seen_t g;
  start_get(p, port, "sec", 1, &g);
  seen_t *one = &g;
  run_until_done(loop, &one, 1, 5000);
  ASSERT_EQ(result(&g), ASR_EAUTH); /* even with retry: an auth error is final */
  ASSERT_EQ(asr_kv_call_retries(g.call), 0);
  ASSERT_EQ(g.value_calls, 0);
  asr_kv_call_free(g.call);
  asr_kv_pool_free(p);
  asr_loop_free(loop);
  ASSERT_OK(asr_kv_get(IP, port, "sec", 3, 0, buf, sizeof buf, &n, &good, err, sizeof err));
  ASSERT_EQ(n, 2);
  ASSERT_MEMEQ(buf, "ok", 2);

  for (int i = 0; i < NK; i++) {
    int st = asr_test_wait(pids[i], 10000);
    ASSERT_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "secret child %d status %d", i, st);
  }
  ASSERT_EQ(stats(srv).keys, 1 + 1 + 4); /* "sec", the good env child, the 4 threads */
  asr_kv_server_free(srv);
}

/* 1,000 clients at once: 8 processes of 125 pools each (125 connections a
 * process; half the processes speak the seed's form), every pool SETs its
 * key, then every pool GETs it back, every byte checked. */
enum { LOAD_PROCS = 8, LOAD_PER_PROC = 125 };

static size_t load_vlen(int proc, int i) { return 64 + (size_t)((proc * LOAD_PER_PROC + i) * 37 % 897); }
static void load_val(uint8_t *v, size_t len, int proc, int i) {
  fill_pattern(v, len, (unsigned)(proc * 1000 + i));
  v[0] = (uint8_t)proc;
  v[1] = (uint8_t)i;
  v[2] = 0;
}

static int load_child(uint16_t port, int proc) {
  enum { N = LOAD_PER_PROC };
  static asr_kv_pool_t *pools[N];
  static seen_t sets[N], gets[N];
  static seen_t *all[N];
  static uint8_t vals[N][ASR_KV_VAL_MAX];
  char key[32], err[256];
  asr_loop_t *loop;
  if (asr_loop_new(&loop)) return 9;
  asr_kv_pool_opts_t o = {
      .secret = zero_secret, .timeout_ms = 20000, .idle_ms = 60000, .seed_form = proc % 2};
  for (int i = 0; i < N; i++) {
    if (asr_kv_pool_new(loop, &o, &pools[i], err, sizeof err)) return 10;
    snprintf(key, sizeof key, "load-%d-%d", proc, i);
    load_val(vals[i], load_vlen(proc, i), proc, i);
    if (asr_kv_pool_set(pools[i], IP, port, key, strlen(key), vals[i], load_vlen(proc, i),
                        ASR_KV_VTYPE_BINARY, on_done, &sets[i], &sets[i].call))
      return 11;
    all[i] = &sets[i];
  }
  run_until_done(loop, all, N, 25000);
  for (int i = 0; i < N; i++) {
    if (result(&sets[i])) {
      fprintf(stderr, "proc %d SET %d: %s\n", proc, i, asr_kv_call_error(sets[i].call));
      return 12;
    }
    snprintf(key, sizeof key, "load-%d-%d", proc, i);
    if (asr_kv_pool_get(pools[i], IP, port, key, strlen(key), ASR_KV_VTYPE_BINARY, 0, on_value, &gets[i],
                        on_done, &gets[i], &gets[i].call))
      return 13;
    all[i] = &gets[i];
  }
  run_until_done(loop, all, N, 25000);
  for (int i = 0; i < N; i++) {
    if (result(&gets[i])) {
      fprintf(stderr, "proc %d GET %d: %s\n", proc, i, asr_kv_call_error(gets[i].call));
      return 15;
    }
    size_t want = load_vlen(proc, i);
    if (gets[i].value_calls != 1 || gets[i].len != want || memcmp(gets[i].val, vals[i], want) != 0) {
      fprintf(stderr, "proc %d GET %d: %d calls, %zu bytes (want %zu), content %s\n", proc, i,
              gets[i].value_calls, gets[i].len, want,
              memcmp(gets[i].val, vals[i], want) ? "differs" : "same");
      return 16;
    }
    asr_kv_call_free(sets[i].call);
    asr_kv_call_free(gets[i].call);
    asr_kv_pool_free(pools[i]);
  }
  asr_loop_free(loop);
  return 0;
}

TEST_TIMEOUT(thousand_concurrent_clients, 40) {
  clean_env();
  /* the server holds every client's connection at once: room for them */
  struct rlimit rl;
  ASSERT_OK(getrlimit(RLIMIT_NOFILE, &rl));
  if (rl.rlim_cur < 4096 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
    ASSERT_OK(setrlimit(RLIMIT_NOFILE, &rl));
  }
  asr_kv_server_opts_t so = {.bind_ip = IP}; /* default limits */
  asr_kv_server_t *srv = NULL;
  char err[256] = "";
  ASSERT_OK(asr_kv_server_new(&so, &srv, err, sizeof err));
  uint16_t port = asr_kv_server_port(srv);
  pid_t pids[LOAD_PROCS];
  for (int p = 0; p < LOAD_PROCS; p++) {
    pids[p] = fork();
    ASSERT(pids[p] >= 0);
    if (pids[p] == 0) _exit(load_child(port, p));
  }
  /* clients connect into the backlog until the loop runs */
  ASSERT_OK(asr_kv_server_start_thread(srv));
  for (int p = 0; p < LOAD_PROCS; p++) {
    int st = asr_test_wait(pids[p], 30000);
    ASSERT_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "load process %d: status %d (exit %d)", p,
               st, st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
  asr_kv_server_stats_t st = stats(srv);
  ASSERT_EQ(st.keys, LOAD_PROCS * LOAD_PER_PROC);
  ASSERT(st.accepted >= LOAD_PROCS * LOAD_PER_PROC);
  ASSERT_EQ(st.errors, 0);
  size_t bytes = 0;
  for (int p = 0; p < LOAD_PROCS; p++)
    for (int i = 0; i < LOAD_PER_PROC; i++) bytes += load_vlen(p, i);
  ASSERT_MSG(st.bytes >= bytes, "server holds %zu bytes, values alone are %zu", st.bytes, bytes);
  uint8_t want[ASR_KV_VAL_MAX];
  load_val(want, load_vlen(5, 77), 5, 77);
  get_exact(port, "load-5-77", 9, want, load_vlen(5, 77), NULL);
  asr_kv_server_free(srv);
}

/* The least and the most a connection's waits after its first b breaks
 * can add up to: each is d/2 to d ms of a doubling d (1, 2, 4, ... 64). */
static void backoff_bounds(unsigned long b, unsigned long *lo, unsigned long *hi) {
  *lo = *hi = 0;
  for (unsigned long i = 0, d = 1; i<b; i++, d = d * 2> 64 ? 64 : d * 2) {
    *lo += d / 2;
    *hi += d;
  }
}

/* A client that cannot connect retries after a jittered, doubling backoff
 * (1 ms to 64 ms), not in a busy loop and not in step with the others that
 * started with it: 20 pools, one connection each, to a port where nobody
 * listens. What each pool chose to wait is read from its counters, so a
 * starved test process, whose loop turns late and fires many pools' retries
 * in one turn, cannot make the schedule look busy or in step. */
TEST_TIMEOUT(backoff_jitter_not_busy, 30) {
  clean_env();
  enum { N = 20, K = 7 };
  uint16_t port = asr_test_free_port();
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *pools[N];
  seen_t gets[N];
  for (int i = 0; i < N; i++) {
    pools[i] = pool_new(loop, 60000, 60000);
    start_get(pools[i], port, "never", 1, &gets[i]);
  }
  unsigned long at_300ms[N] = {0};
  uint64_t t0 = asr_time_ns(), mark = t0 + 300ull * 1000000, give_up = t0 + 20000ull * 1000000;
  long turns = 0;
  int reached = 0, marked = 0;
  asr_kv_pool_stats_t ps;
  /* run for 300 ms, and on (a loaded machine) until every pool has tried K times */
  while (!marked || reached < N) {
    uint64_t now = asr_time_ns();
    ASSERT_MSG(now < give_up, "only %d of %d pools tried %d times in 20 s", reached, N, K);
    reached = 0;
    for (int i = 0; i < N; i++) {
      asr_kv_pool_stats(pools[i], &ps);
      if (!marked && now >= mark) at_300ms[i] = ps.breaks;
      reached += ps.breaks >= K;
      ASSERT_EQ(gets[i].done_calls, 0);
    }
    if (now >= mark) marked = 1;
    ASSERT(asr_loop_run_once(loop, 0) >= 0);
    turns++;
    struct timespec ts = {0,
                          200000}; /* 200 us: the loop turns far more often than the backoff allows a try */
    nanosleep(&ts, NULL);
  }
  ASSERT(turns > 20); /* every pool had many turns: the low counts are the backoff's */
  /* not busy: every pool waited, after each break, what the doubling asks
   * (a busy loop would wait nothing), and in 300 ms tried far fewer times
   * than the loop turned (a slow machine only lowers that count) */
  unsigned long breaks[N], waited[N];
  for (int i = 0; i < N; i++) {
    unsigned long lo, hi;
    asr_kv_pool_stats(pools[i], &ps);
    backoff_bounds(ps.breaks, &lo, &hi);
    ASSERT_MSG(ps.backoff_ms >= lo && ps.backoff_ms <= hi,
               "pool %d waited %lu ms after %lu breaks (%lu..%lu)", i, ps.backoff_ms, ps.breaks, lo, hi);
    ASSERT_MSG(at_300ms[i] < 100, "pool %d tried %lu times in 300 ms", i, at_300ms[i]);
    breaks[i] = ps.breaks;
    waited[i] = ps.backoff_ms;
    asr_kv_call_free(gets[i].call);
    asr_kv_pool_free(pools[i]);
  }
  /* not in step: without jitter two pools with as many breaks would have
   * waited as long (20 pools share a few break counts: there are pairs) */
  int pairs = 0, differ = 0;
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++)
      if (breaks[i] == breaks[j]) {
        pairs++;
        differ |= waited[i] != waited[j];
      }
  ASSERT(pairs > 0);
  ASSERT_MSG(differ, "every pair of the %d pools with as many breaks waited as long: no jitter", N);
  asr_loop_free(loop);
}

/* How many descriptors this process has open. */
static int open_fds(void) {
  int n = 0;
  for (int fd = 0; fd < 4096; fd++) n += fcntl(fd, F_GETFD) >= 0;
  return n;
}

/* The server goes away while a GET waits on it, then another starts on its
 * port: the GET keeps asking on its one connection while the first
 * answers NOT_FOUND, keeps trying while no one listens, finishes on the
 * second with its value, and no socket outlives the pool. */
TEST_TIMEOUT(server_restart_mid_request, 20) {
  clean_env();
  int fds0 = open_fds();
  asr_kv_server_t *a = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(a);
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_new(loop, 10000, 60000);
  seen_t g;
  start_get(p, port, "moved", 1, &g);
  /* until NOT_FOUND has been asked again on A at least twice */
  uint64_t end = kv_raw_now_ms() + 5000;
  while (asr_kv_call_retries(g.call) < 2 && kv_raw_now_ms() < end) ASSERT(asr_loop_run_once(loop, 10) >= 0);
  ASSERT(asr_kv_call_retries(g.call) >= 2);
  ASSERT_EQ(g.done_calls, 0);
  ASSERT_EQ(stats(a).accepted, 1);
  asr_kv_server_free(a);

  /* A is gone: the pool notices and keeps trying (refused), unfinished */
  asr_kv_pool_stats_t ps;
  end = kv_raw_now_ms() + 5000;
  do {
    ASSERT(asr_loop_run_once(loop, 10) >= 0);
    asr_kv_pool_stats(p, &ps);
  } while (ps.breaks < 3 && kv_raw_now_ms() < end);
  ASSERT_MSG(ps.breaks >= 3, "%lu breaks", ps.breaks);
  ASSERT_EQ(g.done_calls, 0);
  ASSERT_EQ(g.value_calls, 0);

  asr_kv_server_t *b = srv_start_port((asr_kv_server_opts_t){0}, port);
  ASSERT_EQ(asr_kv_server_port(b), port);
  const char *val = "value from B";
  ASSERT_OK(asr_kv_set(IP, port, "moved", 5, val, strlen(val), ASR_KV_VTYPE_BINARY, NULL, NULL, 0));
  seen_t *one = &g;
  run_until_done(loop, &one, 1, 5000);
  ASSERT_MSG(result(&g) == 0, "%s", asr_kv_call_error(g.call));
  ASSERT_EQ(g.value_calls, 1);
  ASSERT_EQ(g.len, strlen(val));
  ASSERT_MEMEQ(g.val, val, strlen(val));
  ASSERT_EQ(stats(b).accepted, 2); /* the SET's and the GET's new connection */
  asr_kv_call_free(g.call);
  asr_kv_pool_free(p);
  asr_loop_free(loop);
  asr_kv_server_free(b);
  ASSERT_EQ(open_fds(), fds0);
}
