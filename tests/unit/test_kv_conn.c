/*
 * test_kv_conn.c -- persistent, pipelined KV connections (kv_conn.h) against
 * the real server (kv_server.h) over real sockets: a pool on the test's own
 * loop, the server on a thread of its own (or in a child process, where a
 * case kills it), and raw frames (kv_raw.h) where a case needs bytes the
 * pool would never send or a client that stops reading.
 *
 * Clients pass the all-zero secret, so an ASR_JOB_SECRET in the
 * environment cannot matter.
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_loop.h"
#include "asr_test.h"
#include "kv_conn.h"
#include "kv_frame.h"
#include "kv_raw.h"
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
  ASSERT_EQ(asr_kv_call_retries(held.call), 0);
  ASSERT_MEMEQ(held.val, "L", 1);
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
      ASSERT_CONTAINS(asr_kv_call_error(s[2].call), "LIST of entry 2");
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
