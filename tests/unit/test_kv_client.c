/* test_kv_client.c -- the non-blocking KV client FSM against real servers
 * (in-process threads and `asrkv serve` children), real sockets on 127.0.0.1
 * and real processes. */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_test.h"
#include "asr_time.h"
#include "kv_client.h"
#include "kv_frame.h"
#include "kv_keys.h"
#include "kv_secret.h"
#include "kv_server.h"

#define IP "127.0.0.1"

/* --- helpers -------------------------------------------------------------- */

/* Every case starts from the same environment: no job secret, no timeout override. */
static void clean_env(void) {
  unsetenv("ASR_JOB_SECRET");
  unsetenv("ASR_KV_TIMEOUT_MS");
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* A server bound to 127.0.0.1 (port 0 = any), not yet polled. */
static asr_kv_server_t *server_new(uint16_t port, const uint8_t *secret) {
  asr_kv_server_opts_t o = {.bind_ip = IP, .port = port, .secret = secret};
  asr_kv_server_t *s = NULL;
  char err[256] = "";
  int rc = asr_kv_server_new(&o, &s, err, sizeof err);
  ASSERT_MSG(rc == 0, "asr_kv_server_new(port %u): %s (%s)", port, err, asr_test_errname(rc));
  return s;
}

static asr_kv_server_t *server_thread(uint16_t port, const uint8_t *secret) {
  asr_kv_server_t *s = server_new(port, secret);
  ASSERT_OK(asr_kv_server_start_thread(s));
  return s;
}

/* What a GET callback saw. */
typedef struct {
  int calls;
  asr_kv_req_t *req; /* when set, the state at callback time is recorded */
  asr_kv_req_state_t state_at_call;
  size_t len;
  uint8_t val[ASR_KV_VAL_MAX];
} capture_t;

static void capture_cb(void *arg, const uint8_t *val, size_t len) {
  capture_t *c = arg;
  c->calls++;
  if (c->req) c->state_at_call = asr_kv_req_state(c->req);
  c->len = len;
  if (len <= sizeof c->val) memcpy(c->val, val, len);
}

/* Drives r for up to max_ms. Returns the progress rc; *done says whether it finished. */
static int drive(asr_kv_req_t *r, int max_ms, int *done) {
  uint64_t end = asr_time_ms() + (uint64_t)max_ms;
  int rc = 0, made = 0;
  *done = 0;
  while (asr_time_ms() < end) {
    rc = asr_kv_progress(r, done, &made);
    if (*done) return rc;
    if (!made) asr_kv_req_wait(r, 5);
  }
  return rc;
}

/* Drives n requests round-robin for up to max_ms; rcs[i] gets each final rc.
 * Returns how many finished. */
static int drive_all(asr_kv_req_t **rq, int n, int *rcs, int max_ms) {
  uint64_t end = asr_time_ms() + (uint64_t)max_ms;
  int finished = 0;
  char fin[256] = {0};
  while (finished < n && asr_time_ms() < end) {
    int any = 0;
    for (int i = 0; i < n; i++) {
      if (fin[i]) continue;
      int done = 0, made = 0;
      int rc = asr_kv_progress(rq[i], &done, &made);
      any |= made;
      if (done) {
        fin[i] = 1;
        rcs[i] = rc;
        finished++;
      }
    }
    if (!any) sleep_us(500);
  }
  return finished;
}

static void fill_pattern(uint8_t *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 131u + seed * 7u + (i >> 3)) ^ (seed >> 8));
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

/* The allowed moves of a request against a healthy server: stay, advance one
 * step, or INIT -> SENDING when connect() completes at once. */
static int healthy_step(asr_kv_req_state_t from, asr_kv_req_state_t to) {
  if (to == from || (int)to == (int)from + 1) return 1;
  return from == ASR_KV_REQ_INIT && to == ASR_KV_REQ_SENDING;
}

/* --- 1. basic SET/GET, state order, callback before done ------------------- */

TEST_TIMEOUT(set_get_state_order, 20) {
  clean_env();
  asr_kv_server_t *s = server_thread(0, NULL);
  uint16_t port = asr_kv_server_port(s);
  const char *val = "value-1 for alpha";

  /* SET */
  asr_kv_req_t *r = NULL;
  ASSERT_OK(asr_kv_set_start(IP, port, "alpha", 5, val, strlen(val), ASR_KV_VTYPE_TEXT, NULL, &r));
  ASSERT_EQ(asr_kv_req_state(r), ASR_KV_REQ_INIT);
  ASSERT_STREQ(asr_kv_req_error(r), "");
  /* Nothing touches the network before the first progress call. */
  sleep_us(30000);
  asr_kv_server_stats_t st;
  asr_kv_server_stats(s, &st);
  ASSERT_EQ(st.accepted, 0);

  asr_kv_req_state_t prev = ASR_KV_REQ_INIT;
  int seen[ASR_KV_REQ_FAILED + 1] = {0};
  seen[prev] = 1;
  int done = 0, made = 0, rc = 0, calls = 0;
  uint64_t end = asr_time_ms() + 5000;
  while (!done && asr_time_ms() < end) {
    rc = asr_kv_progress(r, &done, &made);
    asr_kv_req_state_t now = asr_kv_req_state(r);
    ASSERT_MSG(healthy_step(prev, now), "SET moved %s -> %s", asr_kv_req_state_name(prev),
               asr_kv_req_state_name(now));
    if (now != prev)
      ASSERT_MSG(made == 1, "state moved to %s without made_progress", asr_kv_req_state_name(now));
    seen[now] = 1;
    prev = now;
    if (!made) asr_kv_req_wait(r, 10);
    calls++;
  }
  ASSERT(done);
  ASSERT_OK(rc);
  ASSERT_EQ(asr_kv_req_state(r), ASR_KV_REQ_DONE);
  ASSERT(seen[ASR_KV_REQ_SENDING] && seen[ASR_KV_REQ_RECEIVING] && seen[ASR_KV_REQ_CLOSING]);
  ASSERT(!seen[ASR_KV_REQ_FAILED]);
  ASSERT_EQ(asr_kv_req_retries(r), 0);
  ASSERT(calls >= 4); /* one socket operation per call: at least connect, send, recv, END */
  /* A finished request stays finished. */
  ASSERT_OK(asr_kv_progress(r, &done, &made));
  ASSERT(done && made == 0);
  asr_kv_req_free(r);

  /* GET, text and binary responses */
  for (int vt = ASR_KV_VTYPE_TEXT; vt <= ASR_KV_VTYPE_BINARY; vt++) {
    capture_t cap = {0};
    ASSERT_OK(asr_kv_get_start(IP, port, "alpha", 5, vt, 0, capture_cb, &cap, NULL, &r));
    cap.req = r;
    prev = ASR_KV_REQ_INIT;
    memset(seen, 0, sizeof seen);
    seen[prev] = 1;
    done = 0;
    end = asr_time_ms() + 5000;
    while (!done && asr_time_ms() < end) {
      rc = asr_kv_progress(r, &done, &made);
      asr_kv_req_state_t now = asr_kv_req_state(r);
      ASSERT_MSG(healthy_step(prev, now), "GET moved %s -> %s", asr_kv_req_state_name(prev),
                 asr_kv_req_state_name(now));
      if (now < ASR_KV_REQ_CLOSING)
        ASSERT_MSG(cap.calls == 0, "callback ran in state %s", asr_kv_req_state_name(now));
      if (done) ASSERT_MSG(cap.calls == 1, "done reported with %d callback runs", cap.calls);
      seen[now] = 1;
      prev = now;
      if (!made) asr_kv_req_wait(r, 10);
    }
    ASSERT(done);
    ASSERT_OK(rc);
    ASSERT_EQ(asr_kv_req_state(r), ASR_KV_REQ_DONE);
    ASSERT(seen[ASR_KV_REQ_SENDING] && seen[ASR_KV_REQ_RECEIVING] && seen[ASR_KV_REQ_CLOSING]);
    ASSERT_EQ(cap.calls, 1);
    ASSERT_EQ(cap.state_at_call, ASR_KV_REQ_RECEIVING); /* parsed, not yet closing */
    ASSERT_EQ(cap.len, strlen(val));
    ASSERT_MEMEQ(cap.val, val, strlen(val));
    for (int i = 0; i < 3; i++) { /* later calls never re-run the callback */
      ASSERT_OK(asr_kv_progress(r, &done, &made));
      ASSERT(done);
    }
    ASSERT_EQ(cap.calls, 1);
    ASSERT_STREQ(asr_kv_req_error(r), "");
    asr_kv_req_free(r);
  }
  asr_kv_server_stats(s, &st);
  ASSERT_EQ(st.accepted, 3); /* one connection per request */
  ASSERT_EQ(st.keys, 1);
  ASSERT_EQ(st.errors, 0);
  asr_kv_server_free(s);
}

/* A request whose answer has arrived must not turn into a failure because the
 * deadline passes while only the END frame is left: its callback already ran,
 * and a failed request's callback never runs. */
TEST_TIMEOUT(deadline_after_answer_is_not_a_failure, 20) {
  clean_env();
  asr_kv_server_t *s = server_thread(0, NULL);
  uint16_t port = asr_kv_server_port(s);
  ASSERT_OK(asr_kv_set(IP, port, "late", 4, "v", 1, ASR_KV_VTYPE_BINARY, NULL, NULL, 0));
  capture_t cap = {0};
  asr_kv_opts_t o = {.timeout_ms = 200};
  asr_kv_req_t *r;
  ASSERT_OK(asr_kv_get_start(IP, port, "late", 4, ASR_KV_VTYPE_BINARY, 0, capture_cb, &cap, &o, &r));
  int done = 0, made = 0;
  uint64_t end = asr_time_ms() + 150;
  while (asr_kv_req_state(r) != ASR_KV_REQ_CLOSING && asr_time_ms() < end) {
    ASSERT_OK(asr_kv_progress(r, &done, &made));
    ASSERT(!done);
    if (!made) asr_kv_req_wait(r, 5);
  }
  ASSERT_EQ(asr_kv_req_state(r), ASR_KV_REQ_CLOSING);
  ASSERT_EQ(cap.calls, 1);
  sleep_us(300000); /* the deadline passes with only END left to send */
  int rc = asr_kv_progress(r, &done, &made);
  ASSERT(done);
  ASSERT_MSG(rc == 0, "rc %s after the callback ran: %s", asr_test_errname(rc), asr_kv_req_error(r));
  ASSERT_EQ(asr_kv_req_state(r), ASR_KV_REQ_DONE);
  ASSERT_EQ(cap.calls, 1);
  asr_kv_req_free(r);
  asr_kv_server_free(s);
}

/* --- 2. client started before its server ----------------------------------- */

static void client_before_server(int use_process) {
  clean_env();
  uint16_t port = asr_test_free_port();
  const char *val = "published late";
  asr_kv_req_t *rq[2];
  capture_t cap = {0};
  ASSERT_OK(asr_kv_set_start(IP, port, "early", 5, val, strlen(val), ASR_KV_VTYPE_BINARY, NULL, &rq[0]));
  ASSERT_OK(asr_kv_get_start(IP, port, "early", 5, ASR_KV_VTYPE_BINARY, 1, capture_cb, &cap, NULL, &rq[1]));
  int rcs[2] = {99, 99};
  ASSERT_EQ(drive_all(rq, 2, rcs, 200), 0); /* nobody listens: neither may finish */
  for (int i = 0; i < 2; i++) {
    ASSERT_MSG(asr_kv_req_retries(rq[i]) > 0, "request %d never retried", i);
    asr_kv_req_state_t st = asr_kv_req_state(rq[i]);
    ASSERT_MSG(st == ASR_KV_REQ_INIT || st == ASR_KV_REQ_CONNECTING, "state %s without a server",
               asr_kv_req_state_name(st));
    ASSERT_STREQ(asr_kv_req_error(rq[i]), "");
  }
  ASSERT_EQ(cap.calls, 0);

  asr_kv_server_t *s = NULL;
  pid_t pid = -1;
  int out_fd = -1;
  if (use_process)
    pid = spawn_asrkv(port, &out_fd);
  else
    s = server_thread(port, NULL);
  ASSERT_EQ(drive_all(rq, 2, rcs, 5000), 2);
  ASSERT_MSG(rcs[0] == 0, "SET: %s: %s", asr_test_errname(rcs[0]), asr_kv_req_error(rq[0]));
  ASSERT_MSG(rcs[1] == 0, "GET: %s: %s", asr_test_errname(rcs[1]), asr_kv_req_error(rq[1]));
  ASSERT_EQ(asr_kv_req_state(rq[0]), ASR_KV_REQ_DONE);
  ASSERT_EQ(asr_kv_req_state(rq[1]), ASR_KV_REQ_DONE);
  ASSERT_EQ(cap.calls, 1);
  ASSERT_EQ(cap.len, strlen(val));
  ASSERT_MEMEQ(cap.val, val, strlen(val));
  asr_kv_req_free(rq[0]);
  asr_kv_req_free(rq[1]);
  if (use_process) {
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    int st = asr_test_wait(pid, 10000);
    ASSERT_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "asrkv serve status %d", st);
    char line[256];
    ASSERT(asr_test_read_line(out_fd, line, sizeof line, 2000) > 0);
    ASSERT_CONTAINS(line, "keys=1 ");
    close(out_fd);
  } else {
    asr_kv_server_stats_t st;
    asr_kv_server_stats(s, &st);
    ASSERT_EQ(st.keys, 1);
    asr_kv_server_free(s);
  }
}

TEST_TIMEOUT(client_before_server_thread, 20) { client_before_server(0); }
TEST_TIMEOUT(client_before_server_process, 20) { client_before_server(1); }

/* --- 3. GET with retry meets a SET from another process --------------------- */

TEST_TIMEOUT(get_retry_meets_set_from_other_process, 20) {
  clean_env();
  asr_kv_server_t *s = server_new(0, NULL);
  uint16_t port = asr_kv_server_port(s);
  uint8_t val[300];
  fill_pattern(val, sizeof val, 42);
  val[0] = 0;
  val[150] = 0; /* zero bytes inside the value */
  uint64_t t0 = asr_time_ms();
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) { /* single-threaded child: the server thread starts after the fork */
    sleep_us(300000);
    char err[640] = "";
    asr_kv_opts_t o = {.timeout_ms = 10000};
    int rc = asr_kv_set(IP, port, "late-key", 8, val, sizeof val, ASR_KV_VTYPE_BINARY, &o, err, sizeof err);
    if (rc) fprintf(stderr, "child SET: %s\n", err);
    _exit(rc ? 1 : 0);
  }
  ASSERT_OK(asr_kv_server_start_thread(s));
  capture_t cap = {0};
  asr_kv_req_t *r;
  ASSERT_OK(asr_kv_get_start(IP, port, "late-key", 8, ASR_KV_VTYPE_BINARY, 1, capture_cb, &cap, NULL, &r));
  int done;
  int rc = drive(r, 10000, &done);
  uint64_t took = asr_time_ms() - t0;
  ASSERT(done);
  ASSERT_MSG(rc == 0, "%s: %s", asr_test_errname(rc), asr_kv_req_error(r));
  ASSERT_MSG(took >= 250, "the GET finished after %llu ms, before the SET", (unsigned long long)took);
  /* The server held the GET (it asked to wait for the key) and answered it
   * when the SET came: no NOT_FOUND, no second ask. */
  ASSERT_EQ(asr_kv_req_retries(r), 0);
  ASSERT_EQ(cap.calls, 1);
  ASSERT_EQ(cap.len, sizeof val);
  ASSERT_MEMEQ(cap.val, val, sizeof val);
  asr_kv_req_free(r);
  int st = asr_test_wait(pid, 10000);
  ASSERT_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "setter child status %d", st);
  asr_kv_server_stats_t sst;
  asr_kv_server_stats(s, &sst);
  ASSERT_EQ(sst.accepted, 2);
  ASSERT_EQ(sst.woken, 1); /* the SET answered the held GET */
  ASSERT_EQ(sst.held, 0);

  /* Without retry: ASR_ENOTFOUND, no callback, no retry. */
  capture_t cap2 = {0};
  ASSERT_OK(asr_kv_get_start(IP, port, "nobody-sets-this", 16, ASR_KV_VTYPE_BINARY, 0, capture_cb, &cap2,
                             NULL, &r));
  rc = drive(r, 5000, &done);
  ASSERT(done);
  ASSERT_EQ(rc, ASR_ENOTFOUND);
  ASSERT_EQ(cap2.calls, 0);
  ASSERT_EQ(asr_kv_req_retries(r), 0);
  ASSERT_EQ(asr_kv_progress(r, &done, NULL), ASR_ENOTFOUND); /* and on later calls */
  asr_kv_req_free(r);
  uint8_t buf[16];
  size_t vlen = 12345;
  ASSERT_EQ(asr_kv_get(IP, port, "nobody-sets-this", 16, 0, buf, sizeof buf, &vlen, NULL, NULL, 0),
            ASR_ENOTFOUND);
  ASSERT_EQ(vlen, 12345);
  asr_kv_server_free(s);
}

/* --- 4. deadlines ----------------------------------------------------------- */

static void expect_timeout(uint16_t port, const uint8_t *key, size_t klen, int is_set, const char *rendered,
                           const char *reason) {
  asr_kv_opts_t o = {.timeout_ms = 300};
  capture_t cap = {0};
  asr_kv_req_t *r;
  uint64_t t0 = asr_time_ms();
  if (is_set)
    ASSERT_OK(asr_kv_set_start(IP, port, key, klen, "x", 1, ASR_KV_VTYPE_TEXT, &o, &r));
  else
    ASSERT_OK(asr_kv_get_start(IP, port, key, klen, ASR_KV_VTYPE_BINARY, 1, capture_cb, &cap, &o, &r));
  int done;
  int rc = drive(r, 5000, &done);
  uint64_t took = asr_time_ms() - t0;
  ASSERT(done);
  ASSERT_EQ(rc, ASR_ETIMEDOUT);
  ASSERT_EQ(asr_kv_req_state(r), ASR_KV_REQ_FAILED);
  ASSERT_MSG(took >= 290 && took <= 1500, "timed out after %llu ms", (unsigned long long)took);
  const char *e = asr_kv_req_error(r);
  char server[32];
  snprintf(server, sizeof server, "%s:%u", IP, port);
  ASSERT_CONTAINS(e, rendered);
  ASSERT_CONTAINS(e, server);
  ASSERT_CONTAINS(e, "timed out");
  ASSERT_CONTAINS(e, reason);
  ASSERT_CONTAINS(e, is_set ? "SET" : "GET");
  ASSERT(asr_kv_req_retries(r) > 0);
  ASSERT_EQ(cap.calls, 0);
  ASSERT_EQ(asr_kv_progress(r, &done, NULL), ASR_ETIMEDOUT);
  ASSERT_EQ(cap.calls, 0);
  asr_kv_req_free(r);
}

TEST_TIMEOUT(deadline_expiry, 20) {
  clean_env();
  asr_kv_server_t *s = server_thread(0, NULL);
  uint16_t port = asr_kv_server_port(s);
  uint8_t hk[ASR_KV_HANDLE_KEY_LEN];
  ASSERT_EQ(asr_kv_handle_key(hk, 3, 5, "node2"), ASR_KV_HANDLE_KEY_LEN);
  expect_timeout(port, hk, sizeof hk, 0, "'handle-<send 3><recv 5><host node2>'", "key not found");
  expect_timeout(port, (const uint8_t *)"k\0z", 3, 0, "'k\\x00z'", "key not found");
  asr_kv_server_free(s);

  uint16_t closed = asr_test_free_port(); /* nobody listens there */
  expect_timeout(closed, (const uint8_t *)"nokey", 5, 0, "'nokey'", "connection refused");
  expect_timeout(closed, (const uint8_t *)"noset", 5, 1, "'noset'", "connection refused");

  /* The blocking wrapper reports the same line. */
  char err[640] = "";
  asr_kv_opts_t o = {.timeout_ms = 200};
  uint8_t buf[8];
  ASSERT_EQ(asr_kv_get(IP, closed, "blk", 3, 1, buf, sizeof buf, NULL, &o, err, sizeof err), ASR_ETIMEDOUT);
  ASSERT_CONTAINS(err, "'blk'");
  ASSERT_CONTAINS(err, "timed out");
  ASSERT_CONTAINS(err, "connection refused");

  /* ASR_KV_TIMEOUT_MS is the default deadline when opts do not say. */
  setenv("ASR_KV_TIMEOUT_MS", "250", 1);
  uint64_t t0 = asr_time_ms();
  ASSERT_EQ(asr_kv_get(IP, closed, "env", 3, 1, buf, sizeof buf, NULL, NULL, err, sizeof err), ASR_ETIMEDOUT);
  uint64_t took = asr_time_ms() - t0;
  ASSERT_MSG(took >= 240 && took <= 1500, "env deadline hit after %llu ms", (unsigned long long)took);
  unsetenv("ASR_KV_TIMEOUT_MS");
}

/* A bad ASR_KV_TIMEOUT_MS or ASR_JOB_SECRET fails the request that would
 * have used it, with a message that names it, instead of a silent default. */
TEST(bad_env_fails_the_request) {
  clean_env();
  asr_kv_server_t *s = server_thread(0, NULL);
  uint16_t port = asr_kv_server_port(s);
  asr_kv_req_t *r = NULL;
  char err[640] = "";
  uint8_t buf[8];
  setenv("ASR_KV_TIMEOUT_MS", "soon", 1);
  ASSERT_EQ(asr_kv_get_start(IP, port, "k", 1, ASR_KV_VTYPE_BINARY, 0, NULL, NULL, NULL, &r), ASR_ECONFIG);
  ASSERT(r == NULL);
  ASSERT_EQ(asr_kv_set(IP, port, "k", 1, "v", 1, ASR_KV_VTYPE_TEXT, NULL, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "bad SET request: ASR_KV_TIMEOUT_MS: 'soon' is not a positive number");
  ASSERT_EQ(asr_kv_get(IP, port, "k", 1, 0, buf, sizeof buf, NULL, NULL, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "bad GET request: ASR_KV_TIMEOUT_MS: 'soon' is not a positive number");
  ASSERT_EQ(asr_kv_list(IP, port, NULL, NULL, NULL, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "ASR_KV_TIMEOUT_MS: 'soon' is not a positive number");
  /* a timeout in the options does not read the variable */
  asr_kv_opts_t o = {.timeout_ms = 1000};
  ASSERT_OK(asr_kv_set(IP, port, "k", 1, "v", 1, ASR_KV_VTYPE_TEXT, &o, err, sizeof err));
  unsetenv("ASR_KV_TIMEOUT_MS");
  ASSERT_OK(asr_kv_set(IP, port, "k", 1, "v", 1, ASR_KV_VTYPE_TEXT, NULL, err, sizeof err));
  asr_kv_server_free(s);
}

/* The default secret is read once per process: a bad one fails every
 * request that would send it (the server would only have refused them). */
TEST(bad_secret_fails_the_request) {
  clean_env();
  asr_kv_server_t *s = server_thread(0, NULL);
  uint16_t port = asr_kv_server_port(s);
  setenv("ASR_JOB_SECRET", "0123", 1);
  char err[640] = "";
  ASSERT_EQ(asr_kv_set(IP, port, "k", 1, "v", 1, ASR_KV_VTYPE_TEXT, NULL, err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "ASR_JOB_SECRET: the value (4 characters) is not 64 hex digits");
  ASSERT_EQ(asr_kv_list(IP, port, NULL, NULL, NULL, err, sizeof err), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "ASR_JOB_SECRET: the value (4 characters) is not 64 hex digits");
  uint8_t secret[ASR_KV_SECRET_LEN] = {0};
  asr_kv_opts_t o = {.secret = secret}; /* a secret in the options does not read the variable */
  ASSERT_OK(asr_kv_set(IP, port, "k", 1, "v", 1, ASR_KV_VTYPE_TEXT, &o, err, sizeof err));
  asr_kv_server_free(s);
}

/* --- 5. binary keys and size limits ----------------------------------------- */

static void get_exact(uint16_t port, const void *key, size_t klen, const void *want, size_t wlen) {
  uint8_t buf[ASR_KV_VAL_MAX];
  size_t vlen = 0;
  char err[640] = "";
  int rc = asr_kv_get(IP, port, key, klen, 0, buf, sizeof buf, &vlen, NULL, err, sizeof err);
  ASSERT_MSG(rc == 0, "GET: %s: %s", asr_test_errname(rc), err);
  ASSERT_EQ(vlen, wlen);
  ASSERT_MEMEQ(buf, want, wlen);
}

TEST_TIMEOUT(binary_keys_and_limits, 20) {
  clean_env();
  asr_kv_server_t *s = server_thread(0, NULL);
  uint16_t port = asr_kv_server_port(s);
  static const struct {
    const char *key;
    size_t klen;
    const char *val;
  } kv[] = {{"a\0b", 3, "value of a-zero-b"}, {"a\0c", 3, "value of a-zero-c, longer"}, {"a", 1, "A"}};
  for (int i = 0; i < 3; i++)
    ASSERT_OK(asr_kv_set(IP, port, kv[i].key, kv[i].klen, kv[i].val, strlen(kv[i].val), ASR_KV_VTYPE_BINARY,
                         NULL, NULL, 0));
  for (int i = 0; i < 3; i++) get_exact(port, kv[i].key, kv[i].klen, kv[i].val, strlen(kv[i].val));
  /* "a\0" (2 bytes) is none of them */
  uint8_t buf[ASR_KV_VAL_MAX + 8];
  ASSERT_EQ(asr_kv_get(IP, port, "a\0", 2, 0, buf, sizeof buf, NULL, NULL, NULL, 0), ASR_ENOTFOUND);
  asr_kv_server_stats_t st;
  asr_kv_server_stats(s, &st);
  ASSERT_EQ(st.keys, 3);

  /* The 143-byte handle key with a 128-byte net handle. */
  uint8_t hk[ASR_KV_HANDLE_KEY_LEN], handle[ASR_KV_NET_HANDLE_LEN];
  ASSERT_EQ(asr_kv_handle_key(hk, 127, 0, "a-rather-long-host-name.example"), ASR_KV_HANDLE_KEY_LEN);
  fill_pattern(handle, sizeof handle, 7);
  ASSERT_OK(asr_kv_set(IP, port, hk, sizeof hk, handle, sizeof handle, ASR_KV_VTYPE_BINARY, NULL, NULL, 0));
  get_exact(port, hk, sizeof hk, handle, sizeof handle);
  hk[ASR_KV_HANDLE_KEY_LEN - 1] ^= 1; /* the last byte matters */
  ASSERT_EQ(asr_kv_get(IP, port, hk, sizeof hk, 0, buf, sizeof buf, NULL, NULL, NULL, 0), ASR_ENOTFOUND);

  /* 144-byte keys are refused before any request exists. */
  uint8_t big[ASR_KV_KEY_MAX + 1];
  fill_pattern(big, sizeof big, 3);
  asr_kv_req_t *r = NULL;
  ASSERT_EQ(asr_kv_get_start(IP, port, big, sizeof big, ASR_KV_VTYPE_BINARY, 0, NULL, NULL, NULL, &r),
            ASR_ETOOBIG);
  ASSERT(r == NULL);
  ASSERT_EQ(asr_kv_set_start(IP, port, big, sizeof big, "v", 1, ASR_KV_VTYPE_BINARY, NULL, &r), ASR_ETOOBIG);
  ASSERT(r == NULL);
  ASSERT_EQ(asr_kv_set(IP, port, big, sizeof big, "v", 1, ASR_KV_VTYPE_BINARY, NULL, NULL, 0), ASR_ETOOBIG);
  /* ... while 143 bytes of anything is fine */
  ASSERT_OK(asr_kv_set(IP, port, big, ASR_KV_KEY_MAX, "max-key", 7, ASR_KV_VTYPE_BINARY, NULL, NULL, 0));
  get_exact(port, big, ASR_KV_KEY_MAX, "max-key", 7);

  /* 964-byte values round-trip; 965 is refused at start. */
  uint8_t v[ASR_KV_VAL_MAX + 1];
  fill_pattern(v, sizeof v, 99);
  v[0] = v[500] = v[ASR_KV_VAL_MAX - 1] = 0;
  ASSERT_OK(asr_kv_set(IP, port, "big-value", 9, v, ASR_KV_VAL_MAX, ASR_KV_VTYPE_BINARY, NULL, NULL, 0));
  get_exact(port, "big-value", 9, v, ASR_KV_VAL_MAX);
  ASSERT_EQ(asr_kv_set_start(IP, port, "too-big", 7, v, ASR_KV_VAL_MAX + 1, ASR_KV_VTYPE_BINARY, NULL, &r),
            ASR_ETOOBIG);
  ASSERT(r == NULL);
  ASSERT_EQ(asr_kv_set(IP, port, "too-big", 7, v, ASR_KV_VAL_MAX + 1, ASR_KV_VTYPE_BINARY, NULL, NULL, 0),
            ASR_ETOOBIG);
  /* A value that does not fit the caller's buffer. */
  char err[640] = "";
  ASSERT_EQ(asr_kv_get(IP, port, "big-value", 9, 0, buf, 100, NULL, NULL, err, sizeof err), ASR_ETOOBIG);
  ASSERT_CONTAINS(err, "964");
  /* Empty keys and bad arguments. */
  ASSERT_EQ(asr_kv_set_start(IP, port, "", 0, "v", 1, ASR_KV_VTYPE_BINARY, NULL, &r), ASR_EINVAL);
  ASSERT_EQ(asr_kv_get_start(IP, port, "k", 1, 7, 0, NULL, NULL, NULL, &r), ASR_EINVAL);
  ASSERT_EQ(asr_kv_get_start("not-an-ip", port, "k", 1, ASR_KV_VTYPE_BINARY, 0, NULL, NULL, NULL, &r),
            ASR_EINVAL);
  ASSERT_EQ(asr_kv_get_start(IP, 0, "k", 1, ASR_KV_VTYPE_BINARY, 0, NULL, NULL, NULL, &r), ASR_EINVAL);
  ASSERT(r == NULL);
  asr_kv_server_stats(s, &st);
  ASSERT_EQ(st.keys, 6);
  ASSERT_EQ(st.errors, 0);
  asr_kv_server_free(s);
}

/* --- 6. job secrets --------------------------------------------------------- */

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

/* Several threads whose first KV request loads the default secret at once. */
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
  asr_kv_server_t *s = server_new(0, secret);
  uint16_t port = asr_kv_server_port(s);

  /* Children fork before this process uses the client (the default secret is
   * loaded once per process) and before the server thread exists. */
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
  ASSERT_OK(asr_kv_server_start_thread(s));

  asr_kv_opts_t good = {.secret = secret}, bad = {.secret = other};
  char err[640] = "";
  ASSERT_OK(asr_kv_set(IP, port, "sec", 3, "ok", 2, ASR_KV_VTYPE_TEXT, &good, err, sizeof err));
  uint8_t buf[16];
  size_t n = 0;
  ASSERT_OK(asr_kv_get(IP, port, "sec", 3, 0, buf, sizeof buf, &n, &good, err, sizeof err));
  ASSERT_EQ(n, 2);
  ASSERT_MEMEQ(buf, "ok", 2);
  /* The wrong secret: refused with a reason, and nothing changes. */
  ASSERT_EQ(asr_kv_set(IP, port, "sec", 3, "evil", 4, ASR_KV_VTYPE_TEXT, &bad, err, sizeof err), ASR_EAUTH);
  ASSERT_CONTAINS(err, "secret");
  ASSERT_CONTAINS(err, "'sec'");
  capture_t cap = {0};
  asr_kv_req_t *r;
  ASSERT_OK(asr_kv_get_start(IP, port, "sec", 3, ASR_KV_VTYPE_TEXT, 1, capture_cb, &cap, &bad, &r));
  int done;
  ASSERT_EQ(drive(r, 5000, &done), ASR_EAUTH); /* even with retry: an auth error is final */
  ASSERT_EQ(asr_kv_req_state(r), ASR_KV_REQ_FAILED);
  ASSERT_EQ(cap.calls, 0);
  asr_kv_req_free(r);
  ASSERT_OK(asr_kv_get(IP, port, "sec", 3, 0, buf, sizeof buf, &n, &good, err, sizeof err));
  ASSERT_EQ(n, 2);
  ASSERT_MEMEQ(buf, "ok", 2);

  for (int i = 0; i < NK; i++) {
    int st = asr_test_wait(pids[i], 10000);
    ASSERT_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "secret child %d status %d", i, st);
  }
  asr_kv_server_stats_t st;
  asr_kv_server_stats(s, &st);
  ASSERT_EQ(st.keys, 1 + 1 + 4); /* "sec", the good env child, the 4 threads */
  asr_kv_server_free(s);
}

/* --- 7. 1,000 concurrent clients -------------------------------------------- */

enum { LOAD_PROCS = 8, LOAD_PER_PROC = 125 };

static size_t load_vlen(int proc, int i) { return 64 + (size_t)((proc * LOAD_PER_PROC + i) * 37 % 901); }
static void load_val(uint8_t *v, size_t len, int proc, int i) {
  fill_pattern(v, len, (unsigned)(proc * 1000 + i));
  v[0] = (uint8_t)proc;
  v[1] = (uint8_t)i;
  v[2] = 0;
}

/* One process: 125 concurrent SETs, then 125 concurrent GETs, every byte checked. */
static int load_child(uint16_t port, int proc) {
  enum { N = LOAD_PER_PROC };
  static asr_kv_req_t *rq[N];
  static capture_t cap[N];
  static uint8_t vals[N][ASR_KV_VAL_MAX];
  static char keys[N][32];
  int rcs[N];
  asr_kv_opts_t o = {.timeout_ms = 20000};
  for (int i = 0; i < N; i++) {
    snprintf(keys[i], sizeof keys[i], "load-%d-%d", proc, i);
    load_val(vals[i], load_vlen(proc, i), proc, i);
    if (asr_kv_set_start(IP, port, keys[i], strlen(keys[i]), vals[i], load_vlen(proc, i), ASR_KV_VTYPE_BINARY,
                         &o, &rq[i]))
      return 10;
  }
  if (drive_all(rq, N, rcs, 25000) != N) return 11;
  for (int i = 0; i < N; i++) {
    if (rcs[i]) {
      fprintf(stderr, "proc %d SET %d: %s\n", proc, i, asr_kv_req_error(rq[i]));
      return 12;
    }
    asr_kv_req_free(rq[i]);
  }
  for (int i = 0; i < N; i++)
    if (asr_kv_get_start(IP, port, keys[i], strlen(keys[i]), ASR_KV_VTYPE_BINARY, 0, capture_cb, &cap[i], &o,
                         &rq[i]))
      return 13;
  if (drive_all(rq, N, rcs, 25000) != N) return 14;
  for (int i = 0; i < N; i++) {
    if (rcs[i]) {
      fprintf(stderr, "proc %d GET %d: %s\n", proc, i, asr_kv_req_error(rq[i]));
      return 15;
    }
    size_t want = load_vlen(proc, i);
    if (cap[i].calls != 1 || cap[i].len != want || memcmp(cap[i].val, vals[i], want) != 0) {
      fprintf(stderr, "proc %d GET %d: %d calls, %zu bytes (want %zu), content %s\n", proc, i, cap[i].calls,
              cap[i].len, want, memcmp(cap[i].val, vals[i], want) ? "differs" : "same");
      return 16;
    }
    asr_kv_req_free(rq[i]);
  }
  return 0;
}

TEST_TIMEOUT(thousand_concurrent_clients, 40) {
  clean_env();
  asr_kv_server_t *s = server_new(0, NULL); /* default limits */
  uint16_t port = asr_kv_server_port(s);
  pid_t pids[LOAD_PROCS];
  for (int p = 0; p < LOAD_PROCS; p++) {
    pids[p] = fork();
    ASSERT(pids[p] >= 0);
    if (pids[p] == 0) _exit(load_child(port, p));
  }
  /* Clients connect into the backlog until the loop runs. */
  ASSERT_OK(asr_kv_server_start_thread(s));
  for (int p = 0; p < LOAD_PROCS; p++) {
    int st = asr_test_wait(pids[p], 30000);
    ASSERT_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "load process %d: status %d (exit %d)", p,
               st, st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
  asr_kv_server_stats_t st;
  asr_kv_server_stats(s, &st);
  ASSERT_EQ(st.keys, LOAD_PROCS * LOAD_PER_PROC);
  ASSERT(st.accepted >= 2 * LOAD_PROCS * LOAD_PER_PROC);
  ASSERT_EQ(st.errors, 0);
  size_t bytes = 0;
  for (int p = 0; p < LOAD_PROCS; p++)
    for (int i = 0; i < LOAD_PER_PROC; i++) bytes += load_vlen(p, i);
  ASSERT_MSG(st.bytes >= bytes, "server holds %zu bytes, values alone are %zu", st.bytes, bytes);
  /* Spot-check from here too. */
  uint8_t want[ASR_KV_VAL_MAX];
  load_val(want, load_vlen(5, 77), 5, 77);
  get_exact(port, "load-5-77", 9, want, load_vlen(5, 77));
  asr_kv_server_free(s);
}

/* --- 8. backoff is jittered and not a busy loop ----------------------------- */

TEST_TIMEOUT(backoff_jitter_not_busy, 20) {
  clean_env();
  enum { N = 20, K = 7 };
  uint16_t port = asr_test_free_port();
  asr_kv_req_t *rq[N];
  uint64_t at_k[N] = {0};
  for (int i = 0; i < N; i++)
    ASSERT_OK(asr_kv_get_start(IP, port, "never", 5, ASR_KV_VTYPE_BINARY, 1, NULL, NULL, NULL, &rq[i]));
  unsigned at_300ms[N] = {0};
  uint64_t t0 = asr_time_ns();
  uint64_t mark = t0 + 300ull * 1000000, give_up = t0 + 5000ull * 1000000;
  long calls = 0;
  int reached = 0, marked = 0;
  /* Pump for 300 ms, and on (a loaded machine) until every request has made K retries. */
  while (!marked || reached < N) {
    uint64_t now = asr_time_ns();
    ASSERT_MSG(now < give_up, "only %d of %d requests reached %d retries in 5 s", reached, N, K);
    if (!marked && now >= mark) {
      for (int i = 0; i < N; i++) at_300ms[i] = asr_kv_req_retries(rq[i]);
      marked = 1;
    }
    for (int i = 0; i < N; i++) {
      int done = 0;
      ASSERT_OK(asr_kv_progress(rq[i], &done, NULL));
      ASSERT(!done);
      calls++;
      if (!at_k[i] && asr_kv_req_retries(rq[i]) >= K) {
        at_k[i] = asr_time_ns() - t0;
        reached++;
      }
    }
    sleep_us(200);
  }
  unsigned rmin = ~0u, rmax = 0;
  uint64_t kmin = UINT64_MAX, kmax = 0;
  for (int i = 0; i < N; i++) {
    unsigned n = at_300ms[i];
    ASSERT_MSG(n >= 3 && n < 100, "request %d retried %u times in 300 ms", i, n);
    if (n < rmin) rmin = n;
    if (n > rmax) rmax = n;
    ASSERT_MSG(at_k[i] != 0, "request %d did not reach %d retries in 300 ms", i, K);
    if (at_k[i] < kmin) kmin = at_k[i];
    if (at_k[i] > kmax) kmax = at_k[i];
    asr_kv_req_free(rq[i]);
  }
  ASSERT(calls > 20 * N); /* we did call often: the low counts are the backoff's */
  /* Without jitter every request would reach its K-th retry in the same round. */
  ASSERT_MSG(kmax - kmin >= 3000000, "retry %d of all %d requests within %llu us (retries %u..%u)", K, N,
             (unsigned long long)((kmax - kmin) / 1000), rmin, rmax);
}

/* --- 9. the server restarts mid-request ------------------------------------- */

TEST_TIMEOUT(server_restart_mid_request, 20) {
  clean_env();
  asr_kv_server_t *a = server_thread(0, NULL);
  uint16_t port = asr_kv_server_port(a);
  capture_t cap = {0};
  asr_kv_req_t *r;
  ASSERT_OK(asr_kv_get_start(IP, port, "moved", 5, ASR_KV_VTYPE_BINARY, 1, capture_cb, &cap, NULL, &r));
  int done = 0, made = 0;
  /* Until NOT_FOUND has been asked again on A at least twice. */
  uint64_t end = asr_time_ms() + 5000;
  while (asr_kv_req_retries(r) < 2 && asr_time_ms() < end) {
    ASSERT_OK(asr_kv_progress(r, &done, &made));
    ASSERT(!done);
    if (!made) asr_kv_req_wait(r, 5);
  }
  unsigned before = asr_kv_req_retries(r);
  ASSERT(before >= 2);
  asr_kv_server_stats_t st;
  asr_kv_server_stats(a, &st);
  ASSERT_EQ(st.accepted, 1);
  asr_kv_server_free(a);

  /* A is gone: the request notices, goes back to INIT and keeps retrying
   * (connection refused) without finishing. */
  end = asr_time_ms() + 5000;
  int saw_init = 0;
  while ((asr_kv_req_retries(r) < before + 2 || !saw_init) && asr_time_ms() < end) {
    ASSERT_OK(asr_kv_progress(r, &done, &made));
    ASSERT(!done);
    saw_init |= asr_kv_req_state(r) == ASR_KV_REQ_INIT;
    if (!made) asr_kv_req_wait(r, 5);
  }
  ASSERT(saw_init);
  ASSERT(asr_kv_req_retries(r) >= before + 2);
  ASSERT_EQ(cap.calls, 0);

  asr_kv_server_t *b = server_thread(port, NULL);
  ASSERT_EQ(asr_kv_server_port(b), port);
  const char *val = "value from B";
  ASSERT_OK(asr_kv_set(IP, port, "moved", 5, val, strlen(val), ASR_KV_VTYPE_BINARY, NULL, NULL, 0));
  int rc = drive(r, 5000, &done);
  ASSERT(done);
  ASSERT_MSG(rc == 0, "%s: %s", asr_test_errname(rc), asr_kv_req_error(r));
  ASSERT_EQ(cap.calls, 1);
  ASSERT_EQ(cap.len, strlen(val));
  ASSERT_MEMEQ(cap.val, val, strlen(val));
  asr_kv_req_free(r);
  asr_kv_server_stats(b, &st);
  ASSERT_EQ(st.accepted, 2); /* the SET and the GET's new connection */
  asr_kv_server_free(b);
}

/* --- socket reports (asr_kv_req_watch_fd) ----------------------------------- */

typedef struct {
  int n, opens, closes, bad;
  int open_fd;   /* the socket reported open and not yet closed, or -1 */
  char why[200]; /* the first broken rule */
} fdlog_t;

static void fdlog_cb(void *arg, int fd, int open) {
  fdlog_t *l = arg;
  l->n++;
  const char *bad = NULL;
  if (fcntl(fd, F_GETFD) < 0)
    bad = open ? "a socket reported open is not open" : "a socket reported closing was already closed";
  else if (open && l->open_fd >= 0)
    bad = "a second socket reported open before the first was closed";
  else if (!open && l->open_fd != fd)
    bad = "a close reported for a socket that was not the open one";
  if (bad && !l->bad++)
    snprintf(l->why, sizeof l->why, "report %d (fd %d, %s): %s", l->n, fd, open ? "open" : "close", bad);
  if (open) {
    l->opens++;
    l->open_fd = fd;
  } else {
    l->closes++;
    l->open_fd = -1;
  }
}

/* Every socket a request opens is reported once opened and once before it is
 * closed -- across a retry from scratch (the server went away and came back)
 * and at the end -- and a socket already open when the callback is set is
 * reported at once. The runtime keeps these sockets in an epoll set on the
 * strength of that (runtime/context.c, sync_kv). */
TEST_TIMEOUT(fd_watch_reports_every_socket, 20) {
  clean_env();
  asr_kv_server_t *a = server_thread(0, NULL);
  uint16_t port = asr_kv_server_port(a);
  fdlog_t log = {.open_fd = -1};
  capture_t cap = {0};
  asr_kv_req_t *r;
  ASSERT_OK(asr_kv_get_start(IP, port, "later", 5, ASR_KV_VTYPE_BINARY, 1, capture_cb, &cap, NULL, &r));
  asr_kv_req_watch_fd(r, fdlog_cb, &log);
  ASSERT_EQ(log.n, 0); /* nothing is opened before the first progress */
  int done = 0, made = 0;
  uint64_t end = asr_time_ms() + 5000;
  while (asr_kv_req_retries(r) < 1 && asr_time_ms() < end) {
    ASSERT_OK(asr_kv_progress(r, &done, &made));
    if (!made) asr_kv_req_wait(r, 5);
  }
  ASSERT_EQ(log.opens, 1); /* NOT_FOUND is asked again on the same connection */
  ASSERT_EQ(log.closes, 0);
  asr_kv_server_free(a);
  end = asr_time_ms() + 5000;
  while (log.closes < 1 && asr_time_ms() < end) {
    ASSERT_OK(asr_kv_progress(r, &done, &made));
    if (!made) asr_kv_req_wait(r, 5);
  }
  ASSERT_MSG(log.closes >= 1, "the dropped connection's socket was never reported closed");
  asr_kv_server_t *b = server_thread(port, NULL);
  ASSERT_OK(asr_kv_set(IP, port, "later", 5, "v", 1, ASR_KV_VTYPE_BINARY, NULL, NULL, 0));
  int rc = drive(r, 5000, &done);
  ASSERT(done);
  ASSERT_MSG(rc == 0, "%s: %s", asr_test_errname(rc), asr_kv_req_error(r));
  ASSERT_EQ(cap.calls, 1);
  asr_kv_req_free(r);
  ASSERT_MSG(!log.bad, "%s", log.why);
  ASSERT(log.opens >= 2); /* the first connection and the one to B at least */
  ASSERT_EQ(log.opens, log.closes);
  ASSERT_EQ(log.open_fd, -1);

  /* Set on a request whose socket is already open: reported at once. */
  fdlog_t late = {.open_fd = -1};
  ASSERT_OK(asr_kv_get_start(IP, port, "later", 5, ASR_KV_VTYPE_BINARY, 0, NULL, NULL, NULL, &r));
  ASSERT_OK(asr_kv_progress(r, &done, &made)); /* INIT: the socket opens */
  ASSERT(!done);
  asr_kv_req_watch_fd(r, fdlog_cb, &late);
  ASSERT_EQ(late.opens, 1);
  ASSERT(late.open_fd >= 0);
  rc = drive(r, 5000, &done);
  ASSERT(done && rc == 0);
  asr_kv_req_free(r);
  ASSERT_MSG(!late.bad, "%s", late.why);
  ASSERT_EQ(late.closes, 1);
  asr_kv_server_free(b);
}
