/*
 * test_kv_server.c -- the epoll KV server (kv_server.h), driven through the
 * real client (kv_conn.h) and through raw frames (kv_raw.h). The seed's
 * one-request-per-connection form is proved here with raw frames, and with
 * the client's blocking calls in the seed's form (kv_conn.h: seed_form),
 * which carry values of all 964 bytes; the pipelined form is
 * test_kv_conn's, beside the raw-frame cases here that need a server only.
 *
 * Every server here binds 127.0.0.1 on port 0 and runs either on its own
 * thread (asr_kv_server_start_thread) or, for the embedded case, on the
 * test's own loop (opts.loop). Clients always pass the all-zero
 * secret explicitly so an ASR_JOB_SECRET in the environment cannot matter.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_test.h"
#include "kv_conn.h"
#include "kv_frame.h"
#include "kv_keys.h"
#include "kv_raw.h"
#include "kv_secret.h"
#include "kv_server.h"

#define IP "127.0.0.1"
#define RAW_TMO 3000 /* ms: generous bound for one raw round trip */

static const uint8_t zero_secret[ASR_KV_SECRET_LEN];

/* --- fixtures --------------------------------------------------------------- */

static asr_kv_server_t *srv_new(asr_kv_server_opts_t o) {
  o.bind_ip = IP;
  o.port = 0;
  char err[256] = "";
  asr_kv_server_t *s = NULL;
  int rc = asr_kv_server_new(&o, &s, err, sizeof err);
  ASSERT_MSG(rc == 0, "asr_kv_server_new: %s (%s)", asr_test_errname(rc), err);
  ASSERT(s != NULL);
  ASSERT(asr_kv_server_port(s) != 0);
  return s;
}

static asr_kv_server_t *srv_start(asr_kv_server_opts_t o) {
  asr_kv_server_t *s = srv_new(o);
  ASSERT_OK(asr_kv_server_start_thread(s));
  return s;
}

static asr_kv_server_stats_t stats(asr_kv_server_t *s) {
  asr_kv_server_stats_t st;
  memset(&st, 0xff, sizeof st);
  asr_kv_server_stats(s, &st);
  return st;
}

/* Waits (up to 3 s) until the server holds exactly n connections. */
static void wait_clients(asr_kv_server_t *s, unsigned n) {
  uint64_t deadline = kv_raw_now_ms() + 3000;
  unsigned have;
  while ((have = stats(s).clients) != n && kv_raw_now_ms() < deadline) kv_raw_sleep_ms(2);
  ASSERT_MSG(have == n, "server holds %u connections, expected %u", have, n);
}

/* Waits (up to 3 s) until the server holds exactly n GETs for their keys. */
static void wait_held(asr_kv_server_t *s, unsigned n) {
  uint64_t deadline = kv_raw_now_ms() + 3000;
  while (stats(s).held != n && kv_raw_now_ms() < deadline) kv_raw_sleep_ms(1);
  ASSERT_MSG(stats(s).held == n, "server holds %u GETs, expected %u", stats(s).held, n);
}

/* The blocking calls' options: the seed's form, as asrkv speaks it. */
static asr_kv_pool_opts_t copts(const uint8_t *secret) {
  return (asr_kv_pool_opts_t){.secret = secret ? secret : zero_secret, .timeout_ms = 5000, .seed_form = 1};
}

/* A pool on loop, pipelined, for the cases that need requests in flight
 * while the test looks at the server. */
static asr_kv_pool_t *pool_on(asr_loop_t *loop) {
  asr_kv_pool_opts_t o = {.secret = zero_secret, .timeout_ms = 5000, .idle_ms = 60000};
  asr_kv_pool_t *p = NULL;
  char err[256] = "";
  int rc = asr_kv_pool_new(loop, &o, &p, err, sizeof err);
  ASSERT_MSG(rc == 0, "asr_kv_pool_new: %s (%s)", asr_test_errname(rc), err);
  return p;
}

static void set_ok(uint16_t port, const void *key, size_t klen, const void *val, size_t vlen, int vtype) {
  char err[700] = "";
  asr_kv_pool_opts_t o = copts(NULL);
  int rc = asr_kv_set(IP, port, key, klen, val, vlen, vtype, &o, err, sizeof err);
  ASSERT_MSG(rc == 0, "asr_kv_set: %s: %s", asr_test_errname(rc), err);
}

/* GETs key and asserts the value is exactly want[0..wlen). */
static void get_eq(uint16_t port, const void *key, size_t klen, const void *want, size_t wlen) {
  char err[700] = "";
  uint8_t buf[ASR_KV_VAL_MAX + 16];
  size_t n = 99999;
  asr_kv_pool_opts_t o = copts(NULL);
  int rc = asr_kv_get(IP, port, key, klen, 0, buf, sizeof buf, &n, &o, err, sizeof err);
  ASSERT_MSG(rc == 0, "asr_kv_get: %s: %s", asr_test_errname(rc), err);
  ASSERT_EQ(n, wlen);
  ASSERT_MEMEQ(buf, want, wlen);
}

static void get_missing(uint16_t port, const void *key, size_t klen) {
  char err[700] = "";
  uint8_t buf[ASR_KV_VAL_MAX];
  size_t n = 0;
  asr_kv_pool_opts_t o = copts(NULL);
  int rc = asr_kv_get(IP, port, key, klen, 0, buf, sizeof buf, &n, &o, err, sizeof err);
  ASSERT_MSG(rc == ASR_ENOTFOUND, "GET of a key that must be absent returned %s (%s)", asr_test_errname(rc),
             err);
}

static int raw_open(uint16_t port) {
  int fd = kv_raw_connect(port, RAW_TMO);
  ASSERT_MSG(fd >= 0, "connect to %s:%u: %s", IP, port, strerror(-fd));
  return fd;
}

/* One request frame out, one response in; asserts the response is a
 * well-formed frame with the given opcode and returns nothing else. */
static void raw_rt(int fd, const uint8_t *req, uint8_t *resp, int want_op) {
  int rc = kv_raw_request(fd, req, resp, RAW_TMO);
  ASSERT_MSG(rc == KV_RAW_OK, "raw round trip: %s", kv_raw_rc_name(rc));
  asr_kv_msg_t m;
  const char *why = NULL;
  ASSERT_MSG(asr_kv_frame_decode(resp, &m, &why) == 0, "response does not decode: %s", why);
  ASSERT_MSG(kv_raw_op(resp) == want_op, "response opcode %u (%s), expected %d (%s)", kv_raw_op(resp),
             asr_kv_op_name(kv_raw_op(resp)), want_op, asr_kv_op_name(want_op));
  /* responses carry a zero secret */
  ASSERT_MEMEQ(resp + ASR_KV_OFF_SECRET, zero_secret, ASR_KV_SECRET_LEN);
}

/* --- 1. SET / GET round trips ---------------------------------------------- */

TEST(set_get_roundtrip_text_and_binary) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(s);

  /* text */
  set_ok(port, "hostname", 8, "node-a.example", 14, ASR_KV_VTYPE_TEXT);
  get_eq(port, "hostname", 8, "node-a.example", 14);

  /* binary: a full 143-byte key with zero bytes in it, a full 964-byte value
   * holding every byte value */
  uint8_t key[ASR_KV_KEY_MAX], val[ASR_KV_VAL_MAX];
  for (size_t i = 0; i < sizeof key; i++) key[i] = (uint8_t)(i % 5 == 0 ? 0 : i * 3);
  for (size_t i = 0; i < sizeof val; i++) val[i] = (uint8_t)(255 - i);
  set_ok(port, key, sizeof key, val, sizeof val, ASR_KV_VTYPE_BINARY);
  get_eq(port, key, sizeof key, val, sizeof val);
  /* the key is binary: a prefix is another key */
  get_missing(port, key, sizeof key - 1);

  /* an empty value and an overwrite */
  set_ok(port, "empty", 5, NULL, 0, ASR_KV_VTYPE_BINARY);
  get_eq(port, "empty", 5, "", 0);
  set_ok(port, "hostname", 8, "b", 1, ASR_KV_VTYPE_TEXT);
  get_eq(port, "hostname", 8, "b", 1);
  get_missing(port, "nope", 4);

  /* a value that does not fit the caller's buffer */
  char err[700] = "";
  uint8_t small[10];
  size_t n = 0;
  asr_kv_pool_opts_t o = copts(NULL);
  ASSERT_EQ(asr_kv_get(IP, port, key, sizeof key, 0, small, sizeof small, &n, &o, err, sizeof err),
            ASR_ETOOBIG);
  ASSERT_CONTAINS(err, "964");

  /* raw frames: a text GET answers opcode 2, a binary GET opcode 3, with the
   * key echoed and the value byte-for-byte and zero-padded */
  uint8_t req[ASR_KV_FRAME_LEN], resp[ASR_KV_FRAME_LEN];
  int fd = raw_open(port);
  set_ok(port, "hostname", 8, "node-a.example", 14, ASR_KV_VTYPE_TEXT);
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_TEXT, 0, "hostname", 8, NULL, 0, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_GET_TEXT);
  ASSERT_EQ(resp[ASR_KV_OFF_VERSION], ASR_KV_VERSION);
  ASSERT_MEMEQ(resp + ASR_KV_OFF_MAGIC, "ASRK", 4);
  ASSERT_EQ(resp[ASR_KV_OFF_FLAGS], 0);
  ASSERT_EQ(kv_raw_vlen(resp), 14);
  ASSERT_MEMEQ(resp + ASR_KV_OFF_VAL, "node-a.example", 14);
  for (size_t i = 14; i < ASR_KV_VAL_MAX; i++) ASSERT_EQ(resp[ASR_KV_OFF_VAL + i], 0);
  ASSERT_EQ(kv_raw_klen(resp), 8);
  ASSERT_MEMEQ(resp + ASR_KV_OFF_KEY, "hostname", 8);

  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_BINARY, 0, key, sizeof key, NULL, 0, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_GET_BINARY);
  ASSERT_EQ(resp[ASR_KV_OFF_VTYPE], ASR_KV_VTYPE_BINARY);
  ASSERT_EQ(kv_raw_vlen(resp), sizeof val);
  ASSERT_MEMEQ(resp + ASR_KV_OFF_VAL, val, sizeof val);

  /* the response opcode follows the GET's vtype, not the stored one */
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_TEXT, 0, key, sizeof key, NULL, 0, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_GET_TEXT);
  ASSERT_MEMEQ(resp + ASR_KV_OFF_VAL, val, sizeof val);

  /* a raw SET is acknowledged with opcode 1 and is then visible */
  kv_raw_build(req, ASR_KV_OP_SET, ASR_KV_VTYPE_BINARY, 0, "raw\0key", 7, "\x01\x00\x02", 3, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_SET_ACK);
  get_eq(port, "raw\0key", 7, "\x01\x00\x02", 3);

  /* a miss is opcode 5, and the connection stays usable afterwards */
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_TEXT, 0, "absent", 6, NULL, 0, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_NOT_FOUND);
  ASSERT_EQ(kv_raw_vlen(resp), 0);
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_TEXT, 0, "hostname", 8, NULL, 0, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_GET_TEXT);
  close(fd);

  asr_kv_server_stats_t st = stats(s);
  ASSERT_EQ(st.keys, 4);
  ASSERT_EQ(st.errors, 0);
  ASSERT(st.frames >= 20);
  asr_kv_server_free(s);
}

/* --- 2. malformed frames ------------------------------------------------------ */

typedef struct {
  const char *name;
  int off; /* byte to overwrite, or -1 */
  uint8_t val;
  int off2; /* a second byte, or -1 */
  uint8_t val2;
  const char *reason; /* must appear in the opcode-6 value */
} bad_case_t;

/* Sends bytes on a fresh connection and asserts: one opcode-6 reply whose
 * value contains reason, then the server closes the connection. */
static void expect_refused(uint16_t port, const void *bytes, size_t len, int half_close, const char *reason,
                           const char *name) {
  int fd = raw_open(port);
  int rc = kv_raw_send(fd, bytes, len);
  /* the server may refuse (and close) before it has read everything */
  ASSERT_MSG(rc == KV_RAW_OK || rc == KV_RAW_CLOSED, "%s: send: %s", name, kv_raw_rc_name(rc));
  if (half_close) ASSERT_OK(shutdown(fd, SHUT_WR));
  uint8_t resp[ASR_KV_FRAME_LEN];
  size_t got = 0;
  rc = kv_raw_read_frame_n(fd, resp, RAW_TMO, &got);
  ASSERT_MSG(rc == KV_RAW_OK, "%s: no reply frame: %s after %zu bytes", name, kv_raw_rc_name(rc), got);
  asr_kv_msg_t m;
  const char *why = NULL;
  ASSERT_MSG(asr_kv_frame_decode(resp, &m, &why) == 0, "%s: reply does not decode: %s", name, why);
  char msg[ASR_KV_VAL_MAX + 1];
  kv_raw_val_str(resp, msg, sizeof msg);
  ASSERT_MSG(m.opcode == ASR_KV_OP_ERROR, "%s: reply opcode %u (%s), expected ERROR; value '%s'", name,
             m.opcode, asr_kv_op_name(m.opcode), msg);
  ASSERT_MSG(strstr(msg, reason) != NULL, "%s: reason '%s' does not mention '%s'", name, msg, reason);
  ASSERT_MEMEQ(resp + ASR_KV_OFF_SECRET, zero_secret, ASR_KV_SECRET_LEN);
  size_t extra = 0;
  rc = kv_raw_wait_closed_n(fd, RAW_TMO, &extra);
  ASSERT_MSG(rc == KV_RAW_CLOSED, "%s: the server did not close after the error: %s (%zu more bytes)", name,
             kv_raw_rc_name(rc), extra);
  close(fd);
}

TEST(malformed_frames_refused_and_connection_closed) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(s);
  set_ok(port, "keep", 4, "safe", 4, ASR_KV_VTYPE_TEXT);

  /* Each case corrupts a SET of "mal" -> "x", which must never be stored. */
  static const bad_case_t cases[] = {
      {"bad magic", ASR_KV_OFF_MAGIC, 'X', -1, 0, "magic"},
      {"bad magic (last byte)", ASR_KV_OFF_MAGIC + 3, 'k', -1, 0, "magic"},
      {"bad version 2", ASR_KV_OFF_VERSION, 2, -1, 0, "version"},
      {"bad version 0", ASR_KV_OFF_VERSION, 0, -1, 0, "version"},
      {"unknown opcode 4", ASR_KV_OFF_OPCODE, 4, -1, 0, "unknown opcode"},
      {"unknown opcode 200", ASR_KV_OFF_OPCODE, 200, -1, 0, "unknown opcode"},
      {"opcode 0 (INVALID)", ASR_KV_OFF_OPCODE, 0, -1, 0, "unknown opcode"},
      {"response opcode 1 as request", ASR_KV_OFF_OPCODE, ASR_KV_OP_SET_ACK, -1, 0, "not a request"},
      {"response opcode 6 as request", ASR_KV_OFF_OPCODE, ASR_KV_OP_ERROR, -1, 0, "not a request"},
      {"response opcode 7 as request", ASR_KV_OFF_OPCODE, ASR_KV_OP_LIST_ENTRY, -1, 0, "not a request"},
      {"key_len 144", ASR_KV_OFF_KEYLEN, 144, ASR_KV_OFF_KEYLEN + 1, 0, "key length"},
      {"key_len 0xffff", ASR_KV_OFF_KEYLEN, 0xff, ASR_KV_OFF_KEYLEN + 1, 0xff, "key length"},
      {"val_len 965", ASR_KV_OFF_VALLEN, 0xc5, ASR_KV_OFF_VALLEN + 1, 0x03, "value length"},
      {"val_len 0xffff", ASR_KV_OFF_VALLEN, 0xff, ASR_KV_OFF_VALLEN + 1, 0xff, "value length"},
      {"flags 2", ASR_KV_OFF_FLAGS, 2, -1, 0, "flags"},
      {"flags 0x80", ASR_KV_OFF_FLAGS, 0x80, -1, 0, "flags"},
      {"vtype 2", ASR_KV_OFF_VTYPE, 2, -1, 0, "value type"},
      {"vtype 255", ASR_KV_OFF_VTYPE, 255, -1, 0, "value type"},
      {"SET with an empty key", ASR_KV_OFF_KEYLEN, 0, -1, 0, "empty key"},
  };
  const size_t ncases = sizeof cases / sizeof cases[0];
  uint8_t good[ASR_KV_FRAME_LEN], f[ASR_KV_FRAME_LEN];
  kv_raw_build(good, ASR_KV_OP_SET, ASR_KV_VTYPE_TEXT, 0, "mal", 3, "x", 1, NULL);
  unsigned long errors0 = stats(s).errors;
  for (size_t i = 0; i < ncases; i++) {
    memcpy(f, good, sizeof f);
    f[cases[i].off] = cases[i].val;
    if (cases[i].off2 >= 0) f[cases[i].off2] = cases[i].val2;
    expect_refused(port, f, sizeof f, 0, cases[i].reason, cases[i].name);
    /* the server still serves others and the table is unchanged */
    get_eq(port, "keep", 4, "safe", 4);
    ASSERT_EQ(stats(s).keys, 1);
  }

  /* a truncated frame followed by a half-close: the reply says so */
  int fd = raw_open(port);
  ASSERT_EQ(kv_raw_send(fd, good, 500), KV_RAW_OK);
  ASSERT_OK(shutdown(fd, SHUT_WR));
  uint8_t resp[ASR_KV_FRAME_LEN];
  ASSERT_EQ(kv_raw_read_frame(fd, resp, RAW_TMO), KV_RAW_OK);
  char msg[ASR_KV_VAL_MAX + 1];
  ASSERT_EQ(kv_raw_op(resp), ASR_KV_OP_ERROR);
  kv_raw_val_str(resp, msg, sizeof msg);
  ASSERT_CONTAINS(msg, "truncated");
  ASSERT_CONTAINS(msg, "500 of 1156");
  ASSERT_EQ(kv_raw_wait_closed(fd, RAW_TMO), KV_RAW_CLOSED);
  close(fd);
  /* ... also through the common checker, with a 1-byte fragment */
  expect_refused(port, good, 1, 1, "truncated", "truncated 1 byte");

  /* a stream of garbage longer than a frame: refused on the first frame's
   * worth, and the rest is never answered */
  uint8_t garbage[3 * ASR_KV_FRAME_LEN + 17];
  uint32_t x = 0x12345678u;
  for (size_t i = 0; i < sizeof garbage; i++) {
    x = x * 1103515245u + 12345u;
    garbage[i] = (uint8_t)(x >> 24);
  }
  garbage[ASR_KV_OFF_MAGIC] = 'Z'; /* cannot be "ASRK" by chance */
  expect_refused(port, garbage, sizeof garbage, 0, "magic", "garbage stream");

  /* a valid frame first, then a bad one on the same connection: the good SET
   * is answered and stored, the bad one refused and the connection closed */
  fd = raw_open(port);
  uint8_t req[ASR_KV_FRAME_LEN];
  kv_raw_build(req, ASR_KV_OP_SET, ASR_KV_VTYPE_TEXT, 0, "good", 4, "1", 1, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_SET_ACK);
  memcpy(f, good, sizeof f);
  f[ASR_KV_OFF_VERSION] = 9;
  raw_rt(fd, f, resp, ASR_KV_OP_ERROR);
  ASSERT_CONTAINS(kv_raw_val_str(resp, msg, sizeof msg), "version");
  ASSERT_EQ(kv_raw_wait_closed(fd, RAW_TMO), KV_RAW_CLOSED);
  close(fd);

  get_missing(port, "mal", 3);
  get_eq(port, "good", 4, "1", 1);
  get_eq(port, "keep", 4, "safe", 4);
  asr_kv_server_stats_t st = stats(s);
  ASSERT_EQ(st.keys, 2);
  ASSERT_EQ(st.errors - errors0, ncases + 4);
  wait_clients(s, 0); /* every refused connection was closed server-side */
  asr_kv_server_free(s);
}

/* --- 3. the job secret ------------------------------------------------------------ */

TEST(wrong_secret_refused) {
  uint8_t secret[ASR_KV_SECRET_LEN], wrong[ASR_KV_SECRET_LEN];
  ASSERT_OK(asr_kv_secret_generate(secret));
  memcpy(wrong, secret, sizeof wrong);
  wrong[ASR_KV_SECRET_LEN - 1] ^= 0x01; /* one bit off */
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){.secret = secret});
  uint16_t port = asr_kv_server_port(s);
  asr_kv_server_put(s, "seeded", 6, "topsecret", 9, ASR_KV_VTYPE_TEXT);
  uint8_t req[ASR_KV_FRAME_LEN], resp[ASR_KV_FRAME_LEN];
  char msg[ASR_KV_VAL_MAX + 1];

  const uint8_t *bad[2] = {wrong, NULL /* zeros: "no job secret" */};
  for (int i = 0; i < 2; i++) {
    /* SET with a wrong secret: refused, closed, not stored */
    kv_raw_build(req, ASR_KV_OP_SET, ASR_KV_VTYPE_TEXT, 0, "k", 1, "v", 1, bad[i]);
    int fd = raw_open(port);
    raw_rt(fd, req, resp, ASR_KV_OP_ERROR);
    ASSERT_CONTAINS(kv_raw_val_str(resp, msg, sizeof msg), "secret");
    ASSERT_EQ(kv_raw_wait_closed(fd, RAW_TMO), KV_RAW_CLOSED);
    close(fd);
    ASSERT_EQ(stats(s).keys, 1);

    /* GET with a wrong secret: refused, and the value does not leak */
    kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_TEXT, 0, "seeded", 6, NULL, 0, bad[i]);
    fd = raw_open(port);
    raw_rt(fd, req, resp, ASR_KV_OP_ERROR);
    kv_raw_val_str(resp, msg, sizeof msg);
    ASSERT_CONTAINS(msg, "secret");
    ASSERT(strstr(msg, "topsecret") == NULL);
    ASSERT_EQ(kv_raw_wait_closed(fd, RAW_TMO), KV_RAW_CLOSED);
    close(fd);

    /* LIST too */
    kv_raw_build(req, ASR_KV_OP_LIST, 0, 0, NULL, 0, NULL, 0, bad[i]);
    fd = raw_open(port);
    raw_rt(fd, req, resp, ASR_KV_OP_ERROR);
    ASSERT_CONTAINS(kv_raw_val_str(resp, msg, sizeof msg), "secret");
    close(fd);
  }

  /* the right secret works, on a raw connection ... */
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_TEXT, 0, "k", 1, NULL, 0, secret);
  int fd = raw_open(port);
  raw_rt(fd, req, resp, ASR_KV_OP_NOT_FOUND); /* the refused SET stored nothing */
  kv_raw_build(req, ASR_KV_OP_SET, ASR_KV_VTYPE_TEXT, 0, "k", 1, "v", 1, secret);
  raw_rt(fd, req, resp, ASR_KV_OP_SET_ACK);
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_TEXT, 0, "seeded", 6, NULL, 0, secret);
  raw_rt(fd, req, resp, ASR_KV_OP_GET_TEXT);
  ASSERT_MEMEQ(resp + ASR_KV_OFF_VAL, "topsecret", 9);
  close(fd);

  /* ... and through the client */
  char err[700] = "";
  asr_kv_pool_opts_t good_o = copts(secret), bad_o = copts(wrong);
  ASSERT_OK(asr_kv_set(IP, port, "c", 1, "cv", 2, ASR_KV_VTYPE_TEXT, &good_o, err, sizeof err));
  uint8_t buf[64];
  size_t n = 0;
  ASSERT_OK(asr_kv_get(IP, port, "c", 1, 0, buf, sizeof buf, &n, &good_o, err, sizeof err));
  ASSERT_EQ(n, 2);
  ASSERT_MEMEQ(buf, "cv", 2);

  err[0] = '\0';
  ASSERT_EQ(asr_kv_set(IP, port, "d", 1, "dv", 2, ASR_KV_VTYPE_TEXT, &bad_o, err, sizeof err), ASR_EAUTH);
  ASSERT_CONTAINS(err, "secret");
  ASSERT_CONTAINS(err, "'d'"); /* names the key ... */
  char where[32];
  snprintf(where, sizeof where, "%s:%u", IP, port);
  ASSERT_CONTAINS(err, where); /* ... and the server */
  err[0] = '\0';
  ASSERT_EQ(asr_kv_get(IP, port, "c", 1, 0, buf, sizeof buf, &n, &bad_o, err, sizeof err), ASR_EAUTH);
  ASSERT_CONTAINS(err, "secret");

  asr_kv_server_stats_t st = stats(s);
  ASSERT_EQ(st.keys, 3); /* seeded, k, c -- never d */
  ASSERT_EQ(st.errors, 8);
  asr_kv_pool_opts_t zero_o = copts(NULL);
  ASSERT_EQ(asr_kv_get(IP, port, "d", 1, 0, buf, sizeof buf, &n, &good_o, err, sizeof err), ASR_ENOTFOUND);
  ASSERT_EQ(asr_kv_get(IP, port, "c", 1, 0, buf, sizeof buf, &n, &zero_o, err, sizeof err), ASR_EAUTH);
  asr_kv_server_free(s);
}

/* --- 4. stalled, idle and slow clients --------------------------------------------- */

/* A client that stops mid-frame delays no one (kv_server.h) and is dropped
 * by the stall timeout. Every bound below is one the server guarantees,
 * whatever the load: the stall clock starts when the server reads the
 * staller's bytes, which is after the test began to send them and before
 * it answered anyone else (epoll reports the staller's bytes, there since
 * before the others connected, no later than their connections), so the
 * drop comes no earlier than stall_ms after the send began and, but for
 * the timer's lateness, no later than stall_ms after the first other
 * answer; and the others are all served while the staller is still
 * connected, which a server that waited for it could not do. */
TEST_TIMEOUT(stalled_client_does_not_delay_others, 20) {
  const int stall_ms = 3000;
  asr_kv_server_t *s =
      srv_start((asr_kv_server_opts_t){.stall_timeout_ms = stall_ms, .idle_timeout_ms = 20000});
  uint16_t port = asr_kv_server_port(s);

  uint8_t half[ASR_KV_FRAME_LEN];
  kv_raw_build(half, ASR_KV_OP_SET, ASR_KV_VTYPE_TEXT, 0, "stall", 5, "x", 1, NULL);
  int staller = raw_open(port);
  uint64_t t_send = kv_raw_now_ms(); /* read before the send: the server reads the bytes after it */
  ASSERT_EQ(kv_raw_send(staller, half, ASR_KV_FRAME_LEN / 2), KV_RAW_OK);
  wait_clients(s, 1);

  /* 200 sequential SET+GET pairs from other clients while it stalls */
  uint64_t t_first = 0;
  for (int i = 0; i < 200; i++) {
    char k[32], v[32];
    int kl = snprintf(k, sizeof k, "key-%d", i), vl = snprintf(v, sizeof v, "value-%d", i * 7);
    set_ok(port, k, (size_t)kl, v, (size_t)vl, ASR_KV_VTYPE_TEXT);
    if (i == 0) t_first = kv_raw_now_ms();
    get_eq(port, k, (size_t)kl, v, (size_t)vl);
  }
  /* none of them waited for the staller: it is still there, mid-frame */
  ASSERT_MSG(stats(s).stalled == 0 && kv_raw_wait_closed(staller, 0) == KV_RAW_TIMEOUT,
             "the staller was dropped (%llu ms after it stalled) before the others were served",
             (unsigned long long)(kv_raw_now_ms() - t_send));

  /* dropped by its stall timeout, without a reply */
  int rc = kv_raw_wait_closed(staller, stall_ms + 3000);
  uint64_t closed = kv_raw_now_ms();
  ASSERT_MSG(rc == KV_RAW_CLOSED, "staller not dropped: %s", kv_raw_rc_name(rc));
  ASSERT_MSG(closed - t_send >= (uint64_t)stall_ms,
             "staller dropped %llu ms after its bytes were sent (stall %d ms)",
             (unsigned long long)(closed - t_send), stall_ms);
  ASSERT_MSG(closed - t_first <= (uint64_t)stall_ms + 1000,
             "staller dropped %llu ms after the first other answer (stall %d ms)",
             (unsigned long long)(closed - t_first), stall_ms);
  close(staller);

  asr_kv_server_stats_t st = stats(s);
  ASSERT_EQ(st.stalled, 1);
  ASSERT_EQ(st.errors, 0);
  ASSERT_EQ(st.keys, 200);
  get_missing(port, "stall", 5);
  asr_kv_server_free(s);
}

TEST_TIMEOUT(idle_client_dropped, 15) {
  const int idle_ms = 1000;
  asr_kv_server_t *s =
      srv_start((asr_kv_server_opts_t){.stall_timeout_ms = 10000, .idle_timeout_ms = idle_ms});
  uint16_t port = asr_kv_server_port(s);
  uint8_t req[ASR_KV_FRAME_LEN], resp[ASR_KV_FRAME_LEN];
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_TEXT, 0, "k", 1, NULL, 0, NULL);

  uint64_t t0 = kv_raw_now_ms();
  int a = raw_open(port); /* connects, never sends */
  int b = raw_open(port); /* one request, then silence */
  raw_rt(b, req, resp, ASR_KV_OP_NOT_FOUND);
  uint64_t tb = kv_raw_now_ms();
  int c = raw_open(port); /* keeps talking every 250 ms */
  uint64_t a_closed = 0, b_closed = 0;
  while (kv_raw_now_ms() - t0 < 1800) {
    raw_rt(c, req, resp, ASR_KV_OP_NOT_FOUND); /* c must never be dropped */
    uint64_t until = kv_raw_now_ms() + 250;
    while (kv_raw_now_ms() < until) {
      if (!a_closed && kv_raw_wait_closed(a, 0) == KV_RAW_CLOSED) a_closed = kv_raw_now_ms();
      if (!b_closed && kv_raw_wait_closed(b, 0) == KV_RAW_CLOSED) b_closed = kv_raw_now_ms();
      kv_raw_sleep_ms(5);
    }
  }
  raw_rt(c, req, resp, ASR_KV_OP_NOT_FOUND);
  ASSERT_MSG(a_closed, "a silent client was not dropped within 1.8 s (idle timeout %d ms)", idle_ms);
  ASSERT_MSG(b_closed, "an idle client was not dropped within 1.8 s (idle timeout %d ms)", idle_ms);
  ASSERT_MSG(a_closed - t0 >= (uint64_t)idle_ms - 50, "silent client dropped after only %llu ms",
             (unsigned long long)(a_closed - t0));
  ASSERT_MSG(b_closed - tb >= (uint64_t)idle_ms - 50, "idle client dropped after only %llu ms",
             (unsigned long long)(b_closed - tb));
  ASSERT_EQ(stats(s).stalled, 2);
  ASSERT_EQ(stats(s).clients, 1);
  /* now c falls silent too */
  uint64_t tc = kv_raw_now_ms();
  ASSERT_EQ(kv_raw_wait_closed(c, idle_ms + 1000), KV_RAW_CLOSED);
  ASSERT(kv_raw_now_ms() - tc >= (uint64_t)idle_ms - 50);
  ASSERT_EQ(stats(s).stalled, 3);
  close(a);
  close(b);
  close(c);
  asr_kv_server_free(s);
}

/* A client that pipelines requests but never reads the responses fills its
 * socket; the server must park it (not spin, not block) and later drop it. */
TEST_TIMEOUT(slow_reader_does_not_block_others, 15) {
  const int stall_ms = 1000;
  asr_kv_server_t *s =
      srv_start((asr_kv_server_opts_t){.stall_timeout_ms = stall_ms, .idle_timeout_ms = 20000});
  uint16_t port = asr_kv_server_port(s);
  set_ok(port, "big", 3, (uint8_t[ASR_KV_VAL_MAX]){1}, ASR_KV_VAL_MAX, ASR_KV_VTYPE_BINARY);

  int r = kv_raw_connect_ex(port, RAW_TMO, 4096);
  ASSERT(r >= 0);
  ASSERT_EQ(fcntl(r, F_SETFL, fcntl(r, F_GETFL) | O_NONBLOCK), 0);
  uint8_t req[ASR_KV_FRAME_LEN];
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_BINARY, 0, "big", 3, NULL, 0, NULL);
  /* push GETs until neither side can take more */
  size_t sent = 0, total = 0;
  uint64_t deadline = kv_raw_now_ms() + 5000;
  for (;;) {
    ssize_t n = send(r, req + sent, ASR_KV_FRAME_LEN - sent, MSG_NOSIGNAL);
    if (n > 0) {
      total += (size_t)n;
      sent = (sent + (size_t)n) % ASR_KV_FRAME_LEN;
      continue;
    }
    ASSERT_MSG(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK), "send: %s", strerror(errno));
    if (!(kv_raw_poll(r, POLLOUT, 200) & POLLOUT)) break; /* stuck for 200 ms: full */
    ASSERT_MSG(kv_raw_now_ms() < deadline, "the server kept reading from a client that never reads");
  }
  uint64_t t_full = kv_raw_now_ms();
  ASSERT(total > ASR_KV_FRAME_LEN * 4);

  /* others are served promptly meanwhile */
  for (int i = 0; i < 50; i++) {
    char k[16];
    int kl = snprintf(k, sizeof k, "o%d", i);
    set_ok(port, k, (size_t)kl, k, (size_t)kl, ASR_KV_VTYPE_TEXT);
    get_eq(port, k, (size_t)kl, k, (size_t)kl);
  }
  uint64_t others = kv_raw_now_ms() - t_full;
  ASSERT_MSG(others < 1500, "100 ops took %llu ms next to a slow reader", (unsigned long long)others);

  /* and the slow reader is dropped by the stall timeout (without draining it) */
  ASSERT_EQ(kv_raw_wait_hup(r, stall_ms + 3000), KV_RAW_CLOSED);
  close(r);
  asr_kv_server_stats_t st = stats(s);
  ASSERT_EQ(st.stalled, 1);
  ASSERT_EQ(st.keys, 51);
  asr_kv_server_free(s);
}

/* --- 5. limits ----------------------------------------------------------------------- */

TEST(limit_max_keys) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){.max_keys = 10});
  uint16_t port = asr_kv_server_port(s);
  for (int i = 0; i < 10; i++) {
    char k[8];
    snprintf(k, sizeof k, "k%d", i);
    set_ok(port, k, 2, "v", 1, ASR_KV_VTYPE_TEXT);
  }
  char err[700] = "";
  asr_kv_pool_opts_t o = copts(NULL);
  ASSERT_EQ(asr_kv_set(IP, port, "k10", 3, "v", 1, ASR_KV_VTYPE_TEXT, &o, err, sizeof err), ASR_ENOSPACE);
  ASSERT_CONTAINS(err, "full");
  get_missing(port, "k10", 3);

  /* raw: opcode 6 naming the problem; this refusal keeps the connection */
  uint8_t req[ASR_KV_FRAME_LEN], resp[ASR_KV_FRAME_LEN];
  char msg[ASR_KV_VAL_MAX + 1];
  int fd = raw_open(port);
  kv_raw_build(req, ASR_KV_OP_SET, ASR_KV_VTYPE_TEXT, 0, "k11", 3, "v", 1, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_ERROR);
  kv_raw_val_str(resp, msg, sizeof msg);
  ASSERT_CONTAINS(msg, "full");
  ASSERT_CONTAINS(msg, "10 keys");
  /* overwriting an existing key still works, on the same connection */
  kv_raw_build(req, ASR_KV_OP_SET, ASR_KV_VTYPE_TEXT, 0, "k3", 2, "new", 3, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_SET_ACK);
  close(fd);
  set_ok(port, "k4", 2, "newer", 5, ASR_KV_VTYPE_TEXT);
  get_eq(port, "k3", 2, "new", 3);
  get_eq(port, "k4", 2, "newer", 5);
  asr_kv_server_stats_t st = stats(s);
  ASSERT_EQ(st.keys, 10);
  ASSERT_EQ(st.errors, 2);
  asr_kv_server_free(s);
}

TEST(limit_max_bytes) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){.max_bytes = 2000});
  uint16_t port = asr_kv_server_port(s);
  uint8_t v[ASR_KV_VAL_MAX];
  memset(v, 0x5a, sizeof v);
  set_ok(port, "a", 1, v, 964, ASR_KV_VTYPE_BINARY); /* 965 bytes */
  set_ok(port, "b", 1, v, 964, ASR_KV_VTYPE_BINARY); /* 1930 */
  char err[700] = "";
  asr_kv_pool_opts_t o = copts(NULL);
  ASSERT_EQ(asr_kv_set(IP, port, "c", 1, v, 100, ASR_KV_VTYPE_BINARY, &o, err, sizeof err), ASR_ENOSPACE);
  ASSERT_CONTAINS(err, "full");
  get_missing(port, "c", 1);
  ASSERT_EQ(stats(s).bytes, 1930);
  /* shrinking an existing value frees room */
  set_ok(port, "a", 1, v, 900, ASR_KV_VTYPE_BINARY); /* 1866 */
  ASSERT_EQ(stats(s).bytes, 1866);
  set_ok(port, "c", 1, v, 60, ASR_KV_VTYPE_BINARY); /* 1927 */
  /* growing an existing value past the limit is refused and changes nothing */
  ASSERT_EQ(asr_kv_set(IP, port, "c", 1, v, 964, ASR_KV_VTYPE_BINARY, &o, err, sizeof err), ASR_ENOSPACE);
  get_eq(port, "c", 1, v, 60);
  asr_kv_server_stats_t st = stats(s);
  ASSERT_EQ(st.keys, 3);
  ASSERT_EQ(st.bytes, 1927);
  asr_kv_server_free(s);
}

TEST(limit_max_clients_pauses_accept) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){.max_clients = 4});
  uint16_t port = asr_kv_server_port(s);
  int idle[4];
  for (int i = 0; i < 4; i++) idle[i] = raw_open(port);
  wait_clients(s, 4);

  /* a fifth client connects (the kernel backlog holds it) but is not served */
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_pool_t *p = pool_on(loop);
  asr_kv_call_t *r = NULL;
  ASSERT_OK(asr_kv_pool_set(p, IP, port, "fifth", 5, "5", 1, ASR_KV_VTYPE_TEXT, NULL, NULL, &r));
  int rc = 0;
  uint64_t until = kv_raw_now_ms() + 400;
  while (!asr_kv_call_done(r, &rc) && kv_raw_now_ms() < until) ASSERT(asr_loop_run_once(loop, 20) >= 0);
  ASSERT_MSG(!asr_kv_call_done(r, &rc), "the 5th client finished (rc %s: %s) while 4 were open",
             asr_test_errname(rc), asr_kv_call_error(r));
  asr_kv_pool_stats_t ps;
  asr_kv_pool_stats(p, &ps);
  ASSERT_EQ(ps.connects, 1);   /* it connected ... */
  ASSERT_EQ(ps.frames_out, 1); /* ... and sent its SET, and waits */
  asr_kv_server_stats_t st = stats(s);
  ASSERT_EQ(st.clients, 4);
  ASSERT_EQ(st.accepted, 4);
  /* the idle ones are untouched */
  for (int i = 0; i < 4; i++) ASSERT_EQ(kv_raw_wait_closed(idle[i], 0), KV_RAW_TIMEOUT);

  /* one leaves: the fifth is accepted and completes, on its first connection */
  close(idle[0]);
  uint64_t t0 = kv_raw_now_ms();
  while (!asr_kv_call_done(r, &rc) && kv_raw_now_ms() - t0 < 3000) ASSERT(asr_loop_run_once(loop, 20) >= 0);
  ASSERT_MSG(asr_kv_call_done(r, &rc) && rc == 0, "5th client: rc=%s: %s", asr_test_errname(rc),
             asr_kv_call_error(r));
  ASSERT_EQ(asr_kv_call_retries(r), 0); /* paused, not dropped */
  asr_kv_pool_stats(p, &ps);
  ASSERT_EQ(ps.connects, 1);
  ASSERT_EQ(ps.breaks, 0);
  asr_kv_call_free(r);
  asr_kv_pool_free(p);
  asr_loop_free(loop);
  st = stats(s);
  ASSERT_EQ(st.accepted, 5);
  ASSERT_EQ(st.stalled, 0);
  get_eq(port, "fifth", 5, "5", 1);
  for (int i = 1; i < 4; i++) close(idle[i]);
  wait_clients(s, 0);
  asr_kv_server_free(s);
}

/* --- 6. pipelining ---------------------------------------------------------------- */

TEST(pipelined_frames_answered_in_order) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(s);
  enum { NF = 9 };
  uint8_t batch[NF * ASR_KV_FRAME_LEN];
  uint8_t *f = batch;
  kv_raw_build(f, ASR_KV_OP_SET, ASR_KV_VTYPE_TEXT, 0, "p1", 2, "one", 3, NULL), f += ASR_KV_FRAME_LEN;
  kv_raw_build(f, ASR_KV_OP_GET, ASR_KV_VTYPE_TEXT, 0, "p1", 2, NULL, 0, NULL), f += ASR_KV_FRAME_LEN;
  kv_raw_build(f, ASR_KV_OP_GET, ASR_KV_VTYPE_BINARY, 0, "p1", 2, NULL, 0, NULL), f += ASR_KV_FRAME_LEN;
  kv_raw_build(f, ASR_KV_OP_GET, ASR_KV_VTYPE_TEXT, 0, "p2", 2, NULL, 0, NULL), f += ASR_KV_FRAME_LEN;
  kv_raw_build(f, ASR_KV_OP_LIST, 0, 0, NULL, 0, NULL, 0, NULL), f += ASR_KV_FRAME_LEN;
  kv_raw_build(f, ASR_KV_OP_SET, ASR_KV_VTYPE_BINARY, 0, "p2", 2, "two", 3, NULL), f += ASR_KV_FRAME_LEN;
  kv_raw_build(f, ASR_KV_OP_LIST, 0, 1, NULL, 0, NULL, 0, NULL), f += ASR_KV_FRAME_LEN;
  kv_raw_build(f, ASR_KV_OP_LIST, 0, 2, NULL, 0, NULL, 0, NULL), f += ASR_KV_FRAME_LEN;
  kv_raw_build(f, ASR_KV_OP_END, 0, 0, NULL, 0, NULL, 0, NULL), f += ASR_KV_FRAME_LEN;
  ASSERT(f == batch + sizeof batch);

  int fd = raw_open(port);
  ASSERT_EQ(kv_raw_send(fd, batch, sizeof batch), KV_RAW_OK); /* one write */
  uint8_t r[ASR_KV_FRAME_LEN];
  static const struct {
    int op;
    const char *val;
    uint32_t aux;
    const char *key;
  } want[] = {
      {ASR_KV_OP_SET_ACK, "", 0, NULL},       {ASR_KV_OP_GET_TEXT, "one", 0, NULL},
      {ASR_KV_OP_GET_BINARY, "one", 0, NULL}, {ASR_KV_OP_NOT_FOUND, "", 0, NULL},
      {ASR_KV_OP_LIST_ENTRY, "one", 1, "p1"}, {ASR_KV_OP_SET_ACK, "", 0, NULL},
      {ASR_KV_OP_LIST_ENTRY, "two", 2, "p2"}, {ASR_KV_OP_NOT_FOUND, "", 2, NULL},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    int rc = kv_raw_read_frame(fd, r, RAW_TMO);
    ASSERT_MSG(rc == KV_RAW_OK, "response %zu: %s", i, kv_raw_rc_name(rc));
    ASSERT_MSG(kv_raw_op(r) == want[i].op, "response %zu: opcode %s, expected %s", i,
               asr_kv_op_name(kv_raw_op(r)), asr_kv_op_name(want[i].op));
    ASSERT_EQ(kv_raw_vlen(r), strlen(want[i].val));
    ASSERT_MEMEQ(r + ASR_KV_OFF_VAL, want[i].val, strlen(want[i].val));
    ASSERT_EQ(kv_raw_aux(r), want[i].aux);
    if (want[i].key) {
      ASSERT_EQ(kv_raw_klen(r), strlen(want[i].key));
      ASSERT_MEMEQ(r + ASR_KV_OFF_KEY, want[i].key, strlen(want[i].key));
    }
  }
  /* END: no reply, the server closes */
  size_t extra = 0;
  int rc = kv_raw_wait_closed_n(fd, RAW_TMO, &extra);
  ASSERT_MSG(rc == KV_RAW_CLOSED, "after END: %s (%zu bytes)", kv_raw_rc_name(rc), extra);
  close(fd);
  ASSERT_EQ(stats(s).frames, NF);

  /* More frames than one wakeup handles (FRAMES_PER_WAKEUP), split at odd
   * places, and a frame dribbled in one byte at a time. */
  enum { NB = 24 };
  static uint8_t many[NB * ASR_KV_FRAME_LEN];
  for (int i = 0; i < NB; i++) {
    char k[8];
    int kl = snprintf(k, sizeof k, "m%02d", i / 2);
    if (i % 2 == 0)
      kv_raw_build(many + i * ASR_KV_FRAME_LEN, ASR_KV_OP_SET, ASR_KV_VTYPE_BINARY, 0, k, (size_t)kl, k,
                   (size_t)kl, NULL);
    else
      kv_raw_build(many + i * ASR_KV_FRAME_LEN, ASR_KV_OP_GET, ASR_KV_VTYPE_BINARY, 0, k, (size_t)kl, NULL, 0,
                   NULL);
  }
  fd = raw_open(port);
  size_t cuts[] = {0, 1000, 1001, 5000, 7777, sizeof many};
  for (size_t c = 0; c + 1 < sizeof cuts / sizeof cuts[0]; c++) {
    ASSERT_EQ(kv_raw_send(fd, many + cuts[c], cuts[c + 1] - cuts[c]), KV_RAW_OK);
    kv_raw_sleep_ms(2);
  }
  for (int i = 0; i < NB; i++) {
    ASSERT_EQ(kv_raw_read_frame(fd, r, RAW_TMO), KV_RAW_OK);
    char k[8];
    int kl = snprintf(k, sizeof k, "m%02d", i / 2);
    if (i % 2 == 0) {
      ASSERT_EQ(kv_raw_op(r), ASR_KV_OP_SET_ACK);
    } else {
      ASSERT_EQ(kv_raw_op(r), ASR_KV_OP_GET_BINARY);
      ASSERT_EQ(kv_raw_vlen(r), kl);
      ASSERT_MEMEQ(r + ASR_KV_OFF_VAL, k, (size_t)kl);
    }
  }
  uint8_t one[ASR_KV_FRAME_LEN];
  kv_raw_build(one, ASR_KV_OP_GET, ASR_KV_VTYPE_BINARY, 0, "m05", 3, NULL, 0, NULL);
  for (size_t i = 0; i < ASR_KV_FRAME_LEN; i++) ASSERT_EQ(kv_raw_send(fd, one + i, 1), KV_RAW_OK);
  ASSERT_EQ(kv_raw_read_frame(fd, r, RAW_TMO), KV_RAW_OK);
  ASSERT_EQ(kv_raw_op(r), ASR_KV_OP_GET_BINARY);
  ASSERT_MEMEQ(r + ASR_KV_OFF_VAL, "m05", 3);
  kv_raw_build(one, ASR_KV_OP_END, 0, 0, NULL, 0, NULL, 0, NULL);
  ASSERT_EQ(kv_raw_send(fd, one, sizeof one), KV_RAW_OK);
  ASSERT_EQ(kv_raw_wait_closed(fd, RAW_TMO), KV_RAW_CLOSED);
  close(fd);
  asr_kv_server_stats_t st = stats(s);
  ASSERT_EQ(st.keys, 2 + NB / 2);
  ASSERT_EQ(st.errors, 0);
  asr_kv_server_free(s);
}

/* One dispatcher answers both framings (kv_frame.h), which differ where a
 * value is longer than a frame with an id holds (ASR_KV_VAL_MAX_ID): a
 * connection of the seed's kind gets all 964 bytes, a pipelined one a
 * refusal by id for the GET, the held GET and the LIST of it, and goes on
 * being answered. */
TEST_TIMEOUT(long_value_whole_in_seed_form_refused_by_id, 20) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(s);
  uint8_t longv[ASR_KV_VAL_MAX];
  for (size_t i = 0; i < sizeof longv; i++) longv[i] = (uint8_t)(i * 7 + 1);
  ASSERT_OK(asr_kv_server_put(s, "long", 4, longv, sizeof longv, ASR_KV_VTYPE_BINARY));
  ASSERT_OK(asr_kv_server_put(s, "short", 5, "s", 1, ASR_KV_VTYPE_BINARY));

  /* the seed's kind: the whole value, by GET and by LIST */
  uint8_t req[ASR_KV_FRAME_LEN], resp[ASR_KV_FRAME_LEN];
  int fd = raw_open(port);
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_BINARY, 0, "long", 4, NULL, 0, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_GET_BINARY);
  ASSERT_EQ(kv_raw_vlen(resp), sizeof longv);
  ASSERT_MEMEQ(resp + ASR_KV_OFF_VAL, longv, sizeof longv);
  kv_raw_build(req, ASR_KV_OP_LIST, 0, 0, NULL, 0, NULL, 0, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_LIST_ENTRY);
  ASSERT_EQ(kv_raw_vlen(resp), sizeof longv);
  ASSERT_MEMEQ(resp + ASR_KV_OFF_VAL, longv, sizeof longv);
  close(fd);
  ASSERT_EQ(stats(s).errors, 0);

  /* pipelined: ids 1 (GET), 2 (GET held for a key set later), 3 (LIST of
   * entry 0) and 4 (GET of a short value) in one write */
  enum { NF = 4 };
  uint8_t batch[NF * ASR_KV_FRAME_LEN];
  asr_kv_msg_t m = {.opcode = ASR_KV_OP_GET,
                    .vtype = ASR_KV_VTYPE_BINARY,
                    .flags = ASR_KV_FLAG_ID,
                    .id = 1,
                    .key_len = 4,
                    .key = (const uint8_t *)"long"};
  ASSERT_OK(asr_kv_frame_encode(batch, &m));
  m.id = 2, m.aux = 1500, m.key = (const uint8_t *)"late", m.key_len = 4;
  ASSERT_OK(asr_kv_frame_encode(batch + ASR_KV_FRAME_LEN, &m));
  asr_kv_msg_t l = {.opcode = ASR_KV_OP_LIST, .flags = ASR_KV_FLAG_ID, .id = 3};
  ASSERT_OK(asr_kv_frame_encode(batch + 2 * ASR_KV_FRAME_LEN, &l));
  m.id = 4, m.aux = 0, m.key = (const uint8_t *)"short", m.key_len = 5;
  ASSERT_OK(asr_kv_frame_encode(batch + 3 * ASR_KV_FRAME_LEN, &m));
  fd = raw_open(port);
  ASSERT_EQ(kv_raw_send(fd, batch, sizeof batch), KV_RAW_OK);
  static const struct {
    uint32_t id;
    int op;
  } want[] = {{1, ASR_KV_OP_ERROR}, {3, ASR_KV_OP_ERROR}, {4, ASR_KV_OP_GET_BINARY}};
  asr_kv_msg_t a;
  char msg[ASR_KV_VAL_MAX + 1];
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    ASSERT_EQ(kv_raw_read_frame(fd, resp, RAW_TMO), KV_RAW_OK);
    ASSERT_OK(asr_kv_frame_decode(resp, &a, NULL));
    ASSERT_MSG(a.id == want[i].id && a.opcode == want[i].op, "answer %zu: id %u %s, expected id %u %s", i,
               a.id, asr_kv_op_name(a.opcode), want[i].id, asr_kv_op_name(want[i].op));
    if (a.opcode == ASR_KV_OP_ERROR) ASSERT_CONTAINS(kv_raw_val_str(resp, msg, sizeof msg), "does not fit");
  }
  ASSERT_EQ(a.val_len, 1);
  ASSERT_MEMEQ(a.val, "s", 1);
  wait_held(s, 1);
  ASSERT_OK(asr_kv_server_put(s, "late", 4, longv, sizeof longv, ASR_KV_VTYPE_BINARY));
  ASSERT_EQ(kv_raw_read_frame(fd, resp, RAW_TMO), KV_RAW_OK);
  ASSERT_OK(asr_kv_frame_decode(resp, &a, NULL));
  ASSERT_EQ(a.id, 2);
  ASSERT_EQ(a.opcode, ASR_KV_OP_ERROR);
  ASSERT_CONTAINS(kv_raw_val_str(resp, msg, sizeof msg), "does not fit");
  /* none of the refusals ended the connection */
  m.id = 5;
  ASSERT_OK(asr_kv_frame_encode(req, &m));
  ASSERT_EQ(kv_raw_send(fd, req, sizeof req), KV_RAW_OK);
  ASSERT_EQ(kv_raw_read_frame(fd, resp, RAW_TMO), KV_RAW_OK);
  ASSERT_OK(asr_kv_frame_decode(resp, &a, NULL));
  ASSERT(a.id == 5 && a.opcode == ASR_KV_OP_GET_BINARY);
  close(fd);
  ASSERT_EQ(stats(s).errors, 3);
  ASSERT_EQ(stats(s).woken, 1);
  asr_kv_server_free(s);
}

/* --- 7. LIST --------------------------------------------------------------------------- */

typedef struct {
  int n;
  uint32_t total[8];
  char key[8][16];
  size_t klen[8];
  char val[8][16];
  size_t vlen[8];
  int vtype[8];
} list_sink_t;

static void list_cb(void *arg, uint32_t index, uint32_t total, const uint8_t *key, size_t klen,
                    const uint8_t *val, size_t vlen, int vtype) {
  list_sink_t *ls = arg;
  ASSERT_EQ(index, ls->n);
  ASSERT(ls->n < 8 && klen < 16 && vlen < 16);
  ls->total[ls->n] = total;
  memcpy(ls->key[ls->n], key, klen);
  ls->klen[ls->n] = klen;
  memcpy(ls->val[ls->n], val, vlen);
  ls->vlen[ls->n] = vlen;
  ls->vtype[ls->n] = vtype;
  ls->n++;
}

/* DEL over the wire (kv_frame.h, beyond the seed): a key that is there is
 * removed (SET_ACK; a GET then misses, another key stays), one that is not
 * gets NOT_FOUND, on the seed's connections and pipelined ones (asr_kv_del),
 * and an empty key is refused. */
TEST(del_removes_a_key) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(s);
  set_ok(port, "gone", 4, "G", 1, ASR_KV_VTYPE_TEXT);
  set_ok(port, "kept", 4, "K", 1, ASR_KV_VTYPE_TEXT);
  char err[700] = "";
  asr_kv_pool_opts_t o = copts(NULL);
  ASSERT_OK(asr_kv_del(IP, port, "gone", 4, &o, err, sizeof err));
  get_missing(port, "gone", 4);
  get_eq(port, "kept", 4, "K", 1);
  ASSERT_EQ(asr_kv_del(IP, port, "gone", 4, &o, err, sizeof err), ASR_ENOTFOUND);
  asr_kv_pool_opts_t piped = {.secret = zero_secret, .timeout_ms = 5000};
  ASSERT_OK(asr_kv_del(IP, port, "kept", 4, &piped, err, sizeof err));
  get_missing(port, "kept", 4);
  uint8_t req[ASR_KV_FRAME_LEN], resp[ASR_KV_FRAME_LEN];
  int fd = raw_open(port);
  set_ok(port, "raw", 3, "R", 1, ASR_KV_VTYPE_BINARY);
  kv_raw_build(req, ASR_KV_OP_DEL, 0, 0, "raw", 3, NULL, 0, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_SET_ACK);
  raw_rt(fd, req, resp, ASR_KV_OP_NOT_FOUND);
  kv_raw_build(req, ASR_KV_OP_DEL, 0, 0, NULL, 0, NULL, 0, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_ERROR);
  close(fd);
  asr_kv_server_free(s);
}

/* The handles of a dead process's SEND LNC go, and nothing else (issue 50:
 * asrd removes them when a rank's incarnation dies). */
TEST(del_sender_removes_its_handles) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(s);
  uint8_t k[6][ASR_KV_HANDLE_KEY_LEN];
  ASSERT_EQ(asr_kv_handle_key(k[0], 3, 0, "h1"), ASR_KV_HANDLE_KEY_LEN); /* its: two receivers */
  ASSERT_EQ(asr_kv_handle_key(k[1], 3, 7, "h1"), ASR_KV_HANDLE_KEY_LEN);
  ASSERT_EQ(asr_kv_handle_key(k[2], 3, 0, "h2"), ASR_KV_HANDLE_KEY_LEN); /* LNC 3 of another host */
  ASSERT_EQ(asr_kv_handle_key(k[3], 0, 3, "h1"), ASR_KV_HANDLE_KEY_LEN); /* a receiver of LNC 3 */
  ASSERT_EQ(asr_kv_handle_key(k[4], 4, 0, "h1"), ASR_KV_HANDLE_KEY_LEN);
  ASSERT_EQ(asr_kv_handle_key(k[5], 3, 1, "h1"), ASR_KV_HANDLE_KEY_LEN);
  for (int i = 0; i < 6; i++) set_ok(port, k[i], ASR_KV_HANDLE_KEY_LEN, "H", 1, ASR_KV_VTYPE_BINARY);
  set_ok(port, "hostname", 8, "h1", 2, ASR_KV_VTYPE_TEXT);
  ASSERT_EQ(asr_kv_server_del_sender(s, 3, "h1"), 3);
  get_missing(port, k[0], ASR_KV_HANDLE_KEY_LEN);
  get_missing(port, k[1], ASR_KV_HANDLE_KEY_LEN);
  get_missing(port, k[5], ASR_KV_HANDLE_KEY_LEN);
  for (int i = 2; i < 5; i++) get_eq(port, k[i], ASR_KV_HANDLE_KEY_LEN, "H", 1);
  get_eq(port, "hostname", 8, "h1", 2);
  ASSERT_EQ(asr_kv_server_del_sender(s, 3, "h1"), 0);
  asr_kv_server_free(s);
}

TEST(list_insertion_order) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(s);
  uint8_t req[ASR_KV_FRAME_LEN], resp[ASR_KV_FRAME_LEN];

  /* empty table */
  int fd = raw_open(port);
  kv_raw_build(req, ASR_KV_OP_LIST, 0, 0, NULL, 0, NULL, 0, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_NOT_FOUND);
  ASSERT_EQ(kv_raw_aux(resp), 0);
  list_sink_t ls = {0};
  char err[700] = "";
  asr_kv_pool_opts_t o = copts(NULL);
  ASSERT_OK(asr_kv_list(IP, port, list_cb, &ls, &o, err, sizeof err));
  ASSERT_EQ(ls.n, 0);

  /* not alphabetical, one binary key, one overwrite (keeps its place) */
  static const struct {
    const char *k;
    size_t kl;
    const char *v;
    int vt;
  } ent[] = {
      {"zeta", 4, "Z", ASR_KV_VTYPE_TEXT},
      {"alpha", 5, "A", ASR_KV_VTYPE_BINARY},
      {"b\0in", 4, "\x00\x01", ASR_KV_VTYPE_BINARY},
      {"mid", 3, "M", ASR_KV_VTYPE_TEXT},
  };
  for (size_t i = 0; i < 4; i++) set_ok(port, ent[i].k, ent[i].kl, ent[i].v, i == 2 ? 2 : 1, ent[i].vt);
  set_ok(port, "zeta", 4, "Z2", 2, ASR_KV_VTYPE_TEXT);

  for (uint32_t i = 0; i < 4; i++) {
    kv_raw_build(req, ASR_KV_OP_LIST, 0, i, NULL, 0, NULL, 0, NULL);
    raw_rt(fd, req, resp, ASR_KV_OP_LIST_ENTRY);
    ASSERT_EQ(kv_raw_aux(resp), 4);
    ASSERT_EQ(kv_raw_klen(resp), ent[i].kl);
    ASSERT_MEMEQ(resp + ASR_KV_OFF_KEY, ent[i].k, ent[i].kl);
    ASSERT_EQ(resp[ASR_KV_OFF_VTYPE], ent[i].vt);
    size_t vl = i == 0 ? 2 : i == 2 ? 2 : 1;
    ASSERT_EQ(kv_raw_vlen(resp), vl);
    ASSERT_MEMEQ(resp + ASR_KV_OFF_VAL, i == 0 ? "Z2" : ent[i].v, vl);
  }
  uint32_t past[] = {4, 5, 1000, 0xffffffffu};
  for (size_t i = 0; i < 4; i++) {
    kv_raw_build(req, ASR_KV_OP_LIST, 0, past[i], NULL, 0, NULL, 0, NULL);
    raw_rt(fd, req, resp, ASR_KV_OP_NOT_FOUND);
    ASSERT_EQ(kv_raw_aux(resp), 4);
  }
  close(fd);

  memset(&ls, 0, sizeof ls);
  ASSERT_OK(asr_kv_list(IP, port, list_cb, &ls, &o, err, sizeof err));
  ASSERT_EQ(ls.n, 4);
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(ls.total[i], 4);
    ASSERT_EQ(ls.klen[i], ent[i].kl);
    ASSERT_MEMEQ(ls.key[i], ent[i].k, ent[i].kl);
    ASSERT_EQ(ls.vtype[i], ent[i].vt);
  }
  ASSERT_EQ(ls.vlen[0], 2);
  ASSERT_MEMEQ(ls.val[0], "Z2", 2);
  ASSERT_EQ(ls.vlen[2], 2);
  ASSERT_MEMEQ(ls.val[2], "\x00\x01", 2);
  asr_kv_server_free(s);
}

/* --- 8. embedded in the caller's loop ------------------------------------------------ */

static int fd_readable(int fd, int ms) { return (kv_raw_poll(fd, POLLIN, ms) & POLLIN) != 0; }

static void get_into(void *arg, const uint8_t *val, size_t len) {
  char *out = arg;
  memcpy(out, val, len < 63 ? len : 63);
  out[len < 63 ? len : 63] = '\0';
}

TEST(embedded_in_callers_loop) {
  asr_loop_t *loop;
  ASSERT_OK(asr_loop_new(&loop));
  asr_kv_server_t *s = srv_new((asr_kv_server_opts_t){.loop = loop, .idle_timeout_ms = 300});
  uint16_t port = asr_kv_server_port(s);
  ASSERT_EQ(asr_kv_server_start_thread(s), ASR_ESTATE); /* it runs on the caller's loop */
  ASSERT_OK(asr_kv_server_put(s, "hostname", 8, "embedded", 8, ASR_KV_VTYPE_TEXT));
  ASSERT_EQ(asr_loop_run_once(loop, 50), 0); /* nothing to do yet */

  /* a new connection: one iteration of the caller's loop accepts it */
  int fd = raw_open(port); /* completes in the kernel backlog */
  ASSERT_EQ(stats(s).accepted, 0);
  ASSERT_EQ(asr_loop_run_once(loop, 2000), 1);
  asr_kv_server_stats_t st = stats(s);
  ASSERT_EQ(st.accepted, 1);
  ASSERT_EQ(st.clients, 1);

  /* a request: nobody answers until the caller's loop runs, then it does */
  uint8_t req[ASR_KV_FRAME_LEN], resp[ASR_KV_FRAME_LEN];
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_TEXT, 0, "hostname", 8, NULL, 0, NULL);
  ASSERT_EQ(kv_raw_send(fd, req, sizeof req), KV_RAW_OK);
  ASSERT(!fd_readable(fd, 50));
  for (int i = 0; i < 50 && !fd_readable(fd, 0); i++) ASSERT(asr_loop_run_once(loop, 20) >= 0);
  ASSERT_EQ(kv_raw_read_frame(fd, resp, 100), KV_RAW_OK);
  ASSERT_EQ(kv_raw_op(resp), ASR_KV_OP_GET_TEXT);
  ASSERT_MEMEQ(resp + ASR_KV_OFF_VAL, "embedded", 8);

  /* the idle timeout is the server's timer on that loop: a wait with a long
   * bound returns once the client is due, and drops it */
  uint64_t t0 = kv_raw_now_ms();
  while (stats(s).clients > 0 && kv_raw_now_ms() - t0 < 3000) ASSERT(asr_loop_run_once(loop, 5000) >= 0);
  uint64_t took = kv_raw_now_ms() - t0;
  ASSERT_MSG(took < 1500, "the loop took %llu ms to drop a client idle for 300 ms", (unsigned long long)took);
  ASSERT_EQ(stats(s).clients, 0);
  ASSERT_EQ(stats(s).stalled, 1);
  ASSERT_EQ(kv_raw_wait_closed(fd, 1000), KV_RAW_CLOSED);
  close(fd);

  /* the client's pool on the same loop, beside the server, on one thread */
  asr_kv_pool_t *p = pool_on(loop);
  asr_kv_call_t *r = NULL;
  char got[64] = "";
  ASSERT_OK(asr_kv_pool_get(p, IP, port, "hostname", 8, ASR_KV_VTYPE_TEXT, 0, get_into, got, NULL, NULL, &r));
  int rc = 0;
  t0 = kv_raw_now_ms();
  while (!asr_kv_call_done(r, &rc) && kv_raw_now_ms() - t0 < 3000) ASSERT(asr_loop_run_once(loop, 5) >= 0);
  ASSERT_MSG(asr_kv_call_done(r, &rc) && rc == 0, "embedded GET: rc=%s: %s", asr_test_errname(rc),
             asr_kv_call_error(r));
  ASSERT_STREQ(got, "embedded");
  asr_kv_call_free(r);
  asr_kv_pool_free(p);
  asr_kv_server_free(s);
  asr_loop_free(loop); /* the server took all of its sources off it */
}

/* --- 9. seeding and bind errors --------------------------------------------------------- */

TEST(put_seeds_and_port_in_use) {
  asr_kv_server_t *s = srv_new((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(s);
  ASSERT_OK(asr_kv_server_put(s, "hostname", 8, "node7", 5, ASR_KV_VTYPE_TEXT));
  ASSERT_OK(asr_kv_server_put(s, "blob", 4, "\x00\xff", 2, ASR_KV_VTYPE_BINARY));
  ASSERT_EQ(stats(s).keys, 2);
  ASSERT_OK(asr_kv_server_start_thread(s));
  ASSERT_EQ(asr_kv_server_start_thread(s), ASR_ESTATE);
  get_eq(port, "hostname", 8, "node7", 5);
  get_eq(port, "blob", 4, "\x00\xff", 2);
  uint8_t req[ASR_KV_FRAME_LEN], resp[ASR_KV_FRAME_LEN];
  int fd = raw_open(port);
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_TEXT, 0, "hostname", 8, NULL, 0, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_GET_TEXT);
  ASSERT_MEMEQ(resp + ASR_KV_OFF_VAL, "node7", 5);
  kv_raw_build(req, ASR_KV_OP_LIST, 0, 0, NULL, 0, NULL, 0, NULL);
  raw_rt(fd, req, resp, ASR_KV_OP_LIST_ENTRY);
  ASSERT_EQ(resp[ASR_KV_OFF_VTYPE], ASR_KV_VTYPE_TEXT); /* the seeded vtype is kept */
  ASSERT_EQ(kv_raw_aux(resp), 2);
  close(fd);

  /* a second server on the same port fails and says which port */
  asr_kv_server_opts_t o = {.bind_ip = IP, .port = port};
  asr_kv_server_t *s2 = (asr_kv_server_t *)1;
  char err[256] = "";
  ASSERT_EQ(asr_kv_server_new(&o, &s2, err, sizeof err), ASR_EADDRINUSE);
  char pstr[16];
  snprintf(pstr, sizeof pstr, ":%u", port);
  ASSERT_CONTAINS(err, pstr);
  ASSERT_CONTAINS(err, "in use");
  ASSERT(s2 == (asr_kv_server_t *)1); /* *out untouched on failure */
  /* and the first keeps serving */
  get_eq(port, "hostname", 8, "node7", 5);

  /* a bind address that is not an IPv4 address */
  o.bind_ip = "not-an-ip";
  o.port = 0;
  err[0] = '\0';
  ASSERT_EQ(asr_kv_server_new(&o, &s2, err, sizeof err), ASR_EINVAL);
  ASSERT_CONTAINS(err, "not-an-ip");

  asr_kv_server_stop_thread(s);
  asr_kv_server_stop_thread(s); /* twice is harmless */
  asr_kv_server_free(s);

  /* once freed the port is free again */
  o.bind_ip = IP;
  o.port = port;
  s2 = NULL;
  ASSERT_OK(asr_kv_server_new(&o, &s2, err, sizeof err));
  ASSERT_EQ(asr_kv_server_port(s2), port);
  asr_kv_server_free(s2);
}

/* --- held GETs (kv_frame.h: a GET's aux) ------------------------------------ */

/* Sends a GET of key that may wait wait_ms for it; returns the socket. */
static int held_get(uint16_t port, const char *key, uint32_t wait_ms) {
  int fd = raw_open(port);
  uint8_t req[ASR_KV_FRAME_LEN];
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_BINARY, wait_ms, key, strlen(key), NULL, 0, NULL);
  ASSERT_EQ(kv_raw_send(fd, req, sizeof req), KV_RAW_OK);
  return fd;
}

/* Reads the answer to a held GET: opcode want_op, and for a hit the value. */
static void held_answer(int fd, int want_op, const char *val, int timeout_ms) {
  uint8_t resp[ASR_KV_FRAME_LEN];
  int rc = kv_raw_read_frame(fd, resp, timeout_ms);
  ASSERT_MSG(rc == KV_RAW_OK, "no answer to the held GET within %d ms: %s", timeout_ms, kv_raw_rc_name(rc));
  asr_kv_msg_t m;
  const char *why = NULL;
  ASSERT_MSG(asr_kv_frame_decode(resp, &m, &why) == 0, "answer does not decode: %s", why);
  ASSERT_MSG(m.opcode == want_op, "answer %s, expected %s", asr_kv_op_name(m.opcode),
             asr_kv_op_name(want_op));
  if (val) {
    ASSERT_EQ(m.val_len, strlen(val));
    ASSERT_MEMEQ(m.val, val, strlen(val));
  }
}

TEST_TIMEOUT(held_get_answered_by_set, 20) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(s);
  /* two waiting for one key, one for another, one that does not wait */
  int a = held_get(port, "handle-x", 1500), b = held_get(port, "handle-x", 1500);
  int other = held_get(port, "handle-y", 1500);
  wait_held(s, 3);
  get_missing(port, "handle-x", 8); /* aux 0: NOT_FOUND at once, as before */
  ASSERT_EQ(stats(s).held, 3);
  uint64_t t0 = kv_raw_now_ms();
  set_ok(port, "handle-x", 8, "value-x", 7, ASR_KV_VTYPE_BINARY);
  held_answer(a, ASR_KV_OP_GET_BINARY, "value-x", 1000);
  held_answer(b, ASR_KV_OP_GET_BINARY, "value-x", 1000);
  uint64_t took = kv_raw_now_ms() - t0;
  ASSERT_MSG(took < 1000, "the held GETs were answered %llu ms after the SET", (unsigned long long)took);
  ASSERT_EQ(stats(s).woken, 2);
  ASSERT_EQ(stats(s).held, 1); /* handle-y still waits */
  /* the answered connections take further requests as before */
  uint8_t req[ASR_KV_FRAME_LEN], resp[ASR_KV_FRAME_LEN];
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_BINARY, 0, "handle-x", 8, NULL, 0, NULL);
  raw_rt(a, req, resp, ASR_KV_OP_GET_BINARY);
  /* asr_kv_server_put (asrd seeding a key) answers too */
  ASSERT_OK(asr_kv_server_put(s, "handle-y", 8, "value-y", 7, ASR_KV_VTYPE_BINARY));
  held_answer(other, ASR_KV_OP_GET_BINARY, "value-y", 1000);
  ASSERT_EQ(stats(s).woken, 3);
  ASSERT_EQ(stats(s).held, 0);
  close(a);
  close(b);
  close(other);
  asr_kv_server_free(s);
}

TEST_TIMEOUT(held_get_times_out_not_found, 20) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(s);
  uint64_t t0 = kv_raw_now_ms();
  int fd = held_get(port, "never-set", 200);
  int capped = held_get(port, "never-set-either", 600000); /* the server caps a wait at 2000 ms */
  held_answer(fd, ASR_KV_OP_NOT_FOUND, NULL, 3000);
  uint64_t took = kv_raw_now_ms() - t0;
  ASSERT_MSG(took >= 190 && took < 1500, "NOT_FOUND after %llu ms for a 200 ms wait",
             (unsigned long long)took);
  held_answer(capped, ASR_KV_OP_NOT_FOUND, NULL, 4000);
  took = kv_raw_now_ms() - t0;
  ASSERT_MSG(took >= 1990 && took < 3500, "NOT_FOUND after %llu ms for a wait capped at 2000 ms",
             (unsigned long long)took);
  ASSERT_EQ(stats(s).held, 0);
  ASSERT_EQ(stats(s).woken, 0);
  close(fd);
  close(capped);
  asr_kv_server_free(s);
}

TEST_TIMEOUT(held_get_client_leaves_or_talks, 20) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(s);
  int gone = held_get(port, "k-gone", 1500), chatty = held_get(port, "k-chatty", 1500);
  wait_held(s, 2);
  close(gone); /* hangs up while held: dropped, nothing answered later */
  wait_held(s, 1);
  /* a frame before the answer: refused with an error, then closed */
  uint8_t req[ASR_KV_FRAME_LEN];
  kv_raw_build(req, ASR_KV_OP_GET, ASR_KV_VTYPE_BINARY, 0, "k-other", 7, NULL, 0, NULL);
  ASSERT_EQ(kv_raw_send(chatty, req, sizeof req), KV_RAW_OK);
  held_answer(chatty, ASR_KV_OP_ERROR, NULL, 2000);
  ASSERT_EQ(kv_raw_wait_closed(chatty, 2000), KV_RAW_CLOSED);
  close(chatty);
  wait_held(s, 0);
  wait_clients(s, 0);
  set_ok(port, "k-gone", 6, "v", 1, ASR_KV_VTYPE_BINARY); /* no one left to answer */
  ASSERT_EQ(stats(s).woken, 0);
  get_eq(port, "k-gone", 6, "v", 1);
  asr_kv_server_free(s);
}

TEST_TIMEOUT(held_gets_many_and_freed_held, 30) {
  asr_kv_server_t *s = srv_start((asr_kv_server_opts_t){0});
  uint16_t port = asr_kv_server_port(s);
  enum { N = 200 };
  int fds[N];
  char key[32];
  for (int i = 0; i < N; i++) {
    snprintf(key, sizeof key, "many-%d", i % 50); /* four waiters per key */
    fds[i] = held_get(port, key, 2000);
  }
  wait_held(s, N);
  for (int k = 0; k < 25; k++) { /* half the keys set */
    snprintf(key, sizeof key, "many-%d", k);
    set_ok(port, key, strlen(key), key, strlen(key), ASR_KV_VTYPE_BINARY);
  }
  for (int i = 0; i < N; i++)
    if (i % 50 < 25) {
      snprintf(key, sizeof key, "many-%d", i % 50);
      held_answer(fds[i], ASR_KV_OP_GET_BINARY, key, 1000);
    }
  ASSERT_EQ(stats(s).woken, N / 2);
  ASSERT_EQ(stats(s).held, N / 2);
  asr_kv_server_free(s); /* frees the connections still held (ASan: no leak) */
  for (int i = 0; i < N; i++) close(fds[i]);
}
