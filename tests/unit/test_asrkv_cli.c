/* test_asrkv_cli.c -- the asrkv admin CLI, driven as a real binary: exit codes and text. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_test.h"

/* Exit codes of asrkv: 0 ok, 1 runtime failure, 2 usage, 3 key not found. */

static const char *kv_bin(void) {
  static char bin[PATH_MAX];
  if (!bin[0]) snprintf(bin, sizeof bin, "%s/bootstrap/asrkv", asr_test_builddir());
  ASSERT_MSG(access(bin, X_OK) == 0, "no %s (build bootstrap/asrkv first)", bin);
  return bin;
}

static void clean_env(void) {
  ASSERT_EQ(setenv("ASR_KV_LOCK_DIR", asr_test_tmpdir(), 1), 0);
  unsetenv("ASR_JOB_SECRET");
  unsetenv("ASR_KV_TIMEOUT_MS");
}

typedef struct {
  int st;    /* raw wait status */
  char *out; /* stdout */
  char *err; /* stderr */
} res_t;

/* Runs asrkv with args (argv[1..], NULL-terminated array) to completion. */
static res_t run_argv(char *const *args) {
  char *argv[40];
  int n = 0;
  argv[n++] = (char *)kv_bin();
  while (args[n - 1] && n < 39) {
    argv[n] = args[n - 1];
    n++;
  }
  argv[n] = NULL;
  int out = -1, err = -1;
  pid_t pid = asr_test_spawn(argv, &out, &err);
  ASSERT(pid > 0);
  res_t r;
  r.out = asr_test_read_all(out, 15000);
  r.err = asr_test_read_all(err, 15000);
  r.st = asr_test_wait(pid, 15000);
  close(out);
  close(err);
  ASSERT_MSG(r.st != -1, "asrkv %s did not finish", args[0] ? args[0] : "");
  ASSERT_MSG(!WIFSIGNALED(r.st), "asrkv %s died of signal %d; stderr: %s", args[0] ? args[0] : "",
             WTERMSIG(r.st), r.err);
  return r;
}

/* Same, with the arguments inline: run("get", addr, "k", NULL). */
static res_t run(const char *first, ...) {
  char *args[40];
  int n = 0;
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a && n < 39; a = va_arg(ap, const char *)) args[n++] = (char *)a;
  va_end(ap);
  args[n] = NULL;
  return run_argv(args);
}

static int code(res_t r) { return WIFEXITED(r.st) ? WEXITSTATUS(r.st) : -1; }

static void res_free(res_t r) {
  free(r.out);
  free(r.err);
}

#define EXPECT(r, rc, out_sub, err_sub)                                                              \
  do {                                                                                               \
    ASSERT_MSG(code(r) == (rc), "exit %d, want %d; stdout '%s' stderr '%s'", code(r), (rc), (r).out, \
               (r).err);                                                                             \
    if (out_sub) ASSERT_CONTAINS((r).out, (const char *)(out_sub));                                  \
    if (err_sub) ASSERT_CONTAINS((r).err, (const char *)(err_sub));                                  \
  } while (0)

/* A running `asrkv serve` on 127.0.0.1. */
typedef struct {
  pid_t pid;
  int out, err;
  uint16_t port;
  char addr[32];
} server_t;

static server_t serve(const char *extra1, const char *extra2) {
  server_t s = {0};
  char *argv[] = {(char *)kv_bin(), "serve",        "--port",       "0", "--bind",
                  "127.0.0.1",      (char *)extra1, (char *)extra2, NULL};
  s.pid = asr_test_spawn(argv, &s.out, &s.err);
  ASSERT(s.pid > 0);
  char line[256];
  int len = asr_test_read_line(s.out, line, sizeof line, 10000);
  ASSERT_MSG(len > 0, "serve printed no READY line");
  unsigned port = 0;
  long pid = 0;
  ASSERT_MSG(sscanf(line, "READY port=%u pid=%ld", &port, &pid) == 2, "serve said '%s'", line);
  ASSERT(port > 0 && port < 65536);
  ASSERT_EQ(pid, s.pid);
  s.port = (uint16_t)port;
  snprintf(s.addr, sizeof s.addr, "127.0.0.1:%u", port);
  return s;
}

/* Sends sig, expects STOPPED and exit 0; returns the STOPPED line (static). */
static const char *stop(server_t *s, int sig) {
  static char line[512];
  ASSERT_EQ(kill(s->pid, sig), 0);
  int st = asr_test_wait(s->pid, 10000);
  ASSERT_MSG(st != -1, "serve ignored signal %d", sig);
  char *err = asr_test_read_all(s->err, 2000);
  ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "serve ended with status 0x%x; stderr: %s", st, err);
  free(err);
  ASSERT(asr_test_read_line(s->out, line, sizeof line, 2000) > 0);
  ASSERT_MSG(strncmp(line, "STOPPED ", 8) == 0, "serve said '%s' on signal %d", line, sig);
  close(s->out);
  close(s->err);
  return line;
}

/* --- 1. round trips ------------------------------------------------------ */

TEST_TIMEOUT(cli_roundtrip_set_get_dump, 30) {
  clean_env();
  server_t s = serve("--hostname", "node7");
  res_t r;

  r = run("get", s.addr, "hostname", NULL);
  EXPECT(r, 0, NULL, NULL);
  ASSERT_STREQ(r.out, "node7 (zero-padded)\n");
  res_free(r);

  r = run("set", s.addr, "greeting", "hello world", NULL);
  EXPECT(r, 0, NULL, NULL);
  ASSERT_STREQ(r.out, "");
  ASSERT_STREQ(r.err, "");
  res_free(r);
  r = run("get", s.addr, "greeting", NULL);
  EXPECT(r, 0, NULL, NULL);
  ASSERT_STREQ(r.out, "hello world\n");
  res_free(r);

  /* Overwrite; localhost is accepted as 127.0.0.1; --timeout is accepted. */
  char lh[32];
  snprintf(lh, sizeof lh, "localhost:%u", s.port);
  r = run("set", lh, "greeting", "bye", "--timeout", "3000", NULL);
  EXPECT(r, 0, NULL, NULL);
  res_free(r);
  r = run("get", s.addr, "greeting", "--timeout", "3000", NULL);
  EXPECT(r, 0, NULL, NULL);
  ASSERT_STREQ(r.out, "bye\n");
  res_free(r);

  /* A handle key typed as handle:SEND:RECV:HOST. */
  r = run("set", s.addr, "handle:3:5:node2", "nethandle", NULL);
  EXPECT(r, 0, NULL, NULL);
  res_free(r);
  r = run("get", s.addr, "handle:3:5:node2", NULL);
  EXPECT(r, 0, NULL, NULL);
  ASSERT_STREQ(r.out, "nethandle\n");
  res_free(r);
  r = run("get", s.addr, "handle:5:3:node2", NULL); /* the other direction is another key */
  EXPECT(r, 3, NULL, "not found");
  res_free(r);

  /* A binary value. */
  r = run("set", s.addr, "blob", "0102fFaB00", "--hex", NULL);
  EXPECT(r, 0, NULL, NULL);
  res_free(r);
  r = run("get", s.addr, "blob", NULL);
  EXPECT(r, 0, NULL, NULL);
  ASSERT_STREQ(r.out, "5 bytes: 0102ffab00\n");
  res_free(r);

  /* Keys with \x00 escapes: the zero byte is part of the key. */
  r = run("set", s.addr, "a\\x00b", "zero inside", NULL);
  EXPECT(r, 0, NULL, NULL);
  res_free(r);
  r = run("get", s.addr, "a\\x00b", NULL);
  EXPECT(r, 0, NULL, NULL);
  ASSERT_STREQ(r.out, "zero inside\n");
  res_free(r);
  r = run("get", s.addr, "a", NULL); /* not the same key as "a\0b" */
  EXPECT(r, 3, NULL, NULL);
  res_free(r);
  r = run("set", s.addr, "back\\\\slash", "bs", NULL);
  EXPECT(r, 0, NULL, NULL);
  res_free(r);

  /* Limits: a 143-byte key and a 964-byte value are fine. */
  char key143[144], val964[965];
  memset(key143, 'k', 143);
  key143[143] = '\0';
  memset(val964, 'v', 964);
  val964[964] = '\0';
  r = run("set", s.addr, key143, val964, NULL);
  EXPECT(r, 0, NULL, NULL);
  res_free(r);
  r = run("get", s.addr, key143, NULL);
  EXPECT(r, 0, NULL, NULL);
  ASSERT_EQ(strlen(r.out), 965);
  ASSERT(strncmp(r.out, val964, 964) == 0);
  res_free(r);

  r = run("dump", s.addr, NULL);
  EXPECT(r, 0, NULL, NULL);
  ASSERT_STREQ(r.err, "");
  ASSERT_MSG(strncmp(r.out, "# 7 keys\n", 9) == 0, "dump starts '%.40s'", r.out);
  ASSERT_CONTAINS(r.out, "\nhostname = node7 (zero-padded)\n");
  ASSERT_CONTAINS(r.out, "\ngreeting = bye\n");
  ASSERT_CONTAINS(r.out, "\nhandle-<send 3><recv 5><host node2> = nethandle\n");
  ASSERT_CONTAINS(r.out, "\nblob = 5 bytes: 0102ffab00\n");
  ASSERT_CONTAINS(r.out, "\na\\x00b = zero inside\n");
  ASSERT_CONTAINS(r.out, "\nback\\x5cslash = bs\n");
  ASSERT_CONTAINS(r.out, key143);
  /* insertion order: hostname (seeded at start) first */
  ASSERT(strstr(r.out, "hostname =") < strstr(r.out, "greeting ="));
  ASSERT(strstr(r.out, "greeting =") < strstr(r.out, "handle-<"));
  int lines = 0;
  for (const char *p = r.out; *p; p++) lines += *p == '\n';
  ASSERT_EQ(lines, 8);
  res_free(r);

  const char *stopped = stop(&s, SIGTERM);
  ASSERT_CONTAINS(stopped, " keys=7 ");
}

TEST(cli_dump_empty_store) {
  clean_env();
  server_t s = serve(NULL, NULL);
  res_t r = run("dump", s.addr, NULL);
  EXPECT(r, 0, NULL, NULL);
  ASSERT_STREQ(r.out, "# 0 keys\n");
  res_free(r);
  const char *stopped = stop(&s, SIGINT); /* SIGINT ends it just like SIGTERM */
  ASSERT_CONTAINS(stopped, " keys=0 ");
}

/* --- 2. missing keys, waiting, no server ---------------------------------- */

TEST_TIMEOUT(cli_get_missing_wait_and_refused, 30) {
  clean_env();
  server_t s = serve(NULL, NULL);
  res_t r;

  r = run("get", s.addr, "nope", NULL);
  EXPECT(r, 3, NULL, "--wait");
  ASSERT_CONTAINS(r.err, "'nope' not found");
  ASSERT_CONTAINS(r.err, s.addr);
  ASSERT_STREQ(r.out, "");
  res_free(r);

  r = run("get", s.addr, "nope", "--wait", "--timeout", "300", NULL);
  EXPECT(r, 1, NULL, "timed out");
  ASSERT_CONTAINS(r.err, "nope");
  res_free(r);

  /* --wait returns once someone publishes the key. */
  char *argv[] = {(char *)kv_bin(), "get", s.addr, "later", "--wait", "--timeout", "10000", NULL};
  int out = -1;
  pid_t waiter = asr_test_spawn(argv, &out, NULL);
  usleep(200 * 1000);
  ASSERT_EQ(waitpid(waiter, NULL, WNOHANG), 0); /* still waiting */
  r = run("set", s.addr, "later", "arrived", NULL);
  EXPECT(r, 0, NULL, NULL);
  res_free(r);
  char *got = asr_test_read_all(out, 10000);
  int st = asr_test_wait(waiter, 10000);
  ASSERT(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  ASSERT_STREQ(got, "arrived\n");
  free(got);
  close(out);
  stop(&s, SIGTERM);

  /* Nobody listens on the port (the server above is gone). */
  r = run("get", s.addr, "k", "--timeout", "400", NULL);
  EXPECT(r, 1, NULL, "connection refused");
  res_free(r);
  r = run("set", s.addr, "k", "v", "--timeout", "400", NULL);
  EXPECT(r, 1, NULL, "connection refused");
  res_free(r);
  r = run("dump", s.addr, "--timeout", "400", NULL);
  EXPECT(r, 1, NULL, "connection refused");
  res_free(r);
}

/* --- 3. secrets ------------------------------------------------------------ */

static void new_secret(char hex[65]) {
  res_t r = run("secret", NULL);
  EXPECT(r, 0, NULL, NULL);
  ASSERT_EQ(strlen(r.out), 65);
  memcpy(hex, r.out, 64);
  hex[64] = '\0';
  res_free(r);
}

TEST_TIMEOUT(cli_job_secret, 30) {
  clean_env();
  char s1[65], s2[65];
  new_secret(s1);
  new_secret(s2);
  ASSERT(strcmp(s1, s2) != 0);

  ASSERT_EQ(setenv("ASR_JOB_SECRET", s1, 1), 0);
  server_t s = serve(NULL, NULL);
  res_t r = run("set", s.addr, "k", "v", NULL);
  EXPECT(r, 0, NULL, NULL);
  res_free(r);
  r = run("get", s.addr, "k", NULL);
  EXPECT(r, 0, "v\n", NULL);
  res_free(r);

  /* Another job's secret. */
  setenv("ASR_JOB_SECRET", s2, 1);
  r = run("get", s.addr, "k", NULL);
  EXPECT(r, 1, NULL, "secret");
  ASSERT_STREQ(r.out, "");
  res_free(r);
  r = run("set", s.addr, "k", "evil", NULL);
  EXPECT(r, 1, NULL, "secret");
  res_free(r);
  r = run("dump", s.addr, NULL);
  EXPECT(r, 1, NULL, "secret");
  ASSERT_STREQ(r.out, "");
  res_free(r);

  /* No secret at all against a server that has one. */
  unsetenv("ASR_JOB_SECRET");
  r = run("get", s.addr, "k", NULL);
  EXPECT(r, 1, NULL, "secret");
  res_free(r);

  /* Malformed: named clearly, before any network traffic. */
  static const char *const bad[] = {"xyz", "0123",
                                    "zz23456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                                    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef00"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("ASR_JOB_SECRET", bad[i], 1);
    r = run("get", s.addr, "k", NULL);
    EXPECT(r, 1, NULL, "ASR_JOB_SECRET");
    ASSERT_CONTAINS(r.err, "64 hex digits");
    res_free(r);
    r = run("serve", "--port", "0", "--bind", "127.0.0.1", NULL);
    EXPECT(r, 1, NULL, "ASR_JOB_SECRET");
    ASSERT_STREQ(r.out, ""); /* never got to READY */
    res_free(r);
  }

  /* The right secret still works: the bad tries changed nothing. */
  setenv("ASR_JOB_SECRET", s1, 1);
  r = run("get", s.addr, "k", NULL);
  EXPECT(r, 0, "v\n", NULL);
  res_free(r);
  const char *stopped = stop(&s, SIGTERM);
  ASSERT_CONTAINS(stopped, " keys=1 ");
}

/* --- 4. bad input ---------------------------------------------------------- */

typedef struct {
  const char *args[8];
  int rc;
  const char *err_sub;
} bad_case_t;

TEST_TIMEOUT(cli_bad_input, 40) {
  clean_env();
  char long_key[200], long_val[1000], long_hex[2 * 965 + 1];
  memset(long_key, 'k', 144);
  long_key[144] = '\0';
  memset(long_val, 'v', 965);
  long_val[965] = '\0';
  memset(long_hex, 'a', 2 * 965);
  long_hex[2 * 965] = '\0';
  /* No server is needed: every case fails before connecting. A closed port
   * makes sure a case that did connect would not succeed by accident. */
  char addr[32];
  snprintf(addr, sizeof addr, "127.0.0.1:%u", asr_test_free_port());
  const bad_case_t cases[] = {
      {{"frobnicate"}, 2, "unknown command 'frobnicate'"},
      {{"get", addr, "k", "--bogus"}, 2, "unknown option '--bogus'"},
      {{"set", addr, "k", "v", "-x", "--nope"}, 2, "unexpected argument '-x'"},
      {{"serve", "--bogus"}, 2, "unknown serve option '--bogus'"},
      {{"serve", "--bogus", "1"}, 2, "unknown serve option '--bogus'"},
      {{"serve", "stray"}, 2, "unknown serve option 'stray'"},
      {{"serve", "--port"}, 2, "'--port' needs a value"},
      {{"serve", "--port", "abc"}, 2, "--port wants 0..65535, not 'abc'"},
      {{"serve", "--port", "70000"}, 2, "--port wants"},
      {{"serve", "--port", "-1"}, 2, "--port wants"},
      {{"serve", "--max-keys", "0"}, 2, "--max-keys wants a positive number, not '0'"},
      {{"serve", "--max-bytes", "x"}, 2, "--max-bytes"},
      {{"serve", "--max-clients", "0"}, 2, "--max-clients"},
      {{"serve", "--stall-timeout", "0"}, 2, "--stall-timeout"},
      {{"serve", "--idle-timeout", "1e3"}, 2, "--idle-timeout"},
      {{"serve", "--hostname", ""}, 2, "--hostname"},
      {{"serve", "--elect"}, 2, "--elect needs an explicit --port"},
      {{"serve", "--port", "0", "--bind", "999.0.0.1"}, 1, "999.0.0.1"},
      {{"get"}, 2, "expected HOST:PORT"},
      {{"get", "nohost", "k"}, 2, "expected HOST:PORT"},
      {{"get", "1.2.3.4:0", "k"}, 2, "'1.2.3.4:0'"},
      {{"get", "127.0.0.1:99999", "k"}, 2, "'127.0.0.1:99999'"},
      {{"get", "127.0.0.1:", "k"}, 2, "expected HOST:PORT"},
      {{"get", ":80", "k"}, 2, "expected HOST:PORT"},
      {{"get", "127.0.0.1:8x", "k"}, 2, "expected HOST:PORT"},
      {{"get", "not.an.ip:80", "k"}, 2, "'not.an.ip:80'"},
      {{"dump", "999.1.1.1:80"}, 2, "expected HOST:PORT"},
      {{"get", addr}, 2, "'get' is missing arguments"},
      {{"set", addr, "k"}, 2, "'set' is missing arguments"},
      {{"get", addr, "a", "b"}, 2, "unexpected argument 'b'"},
      {{"dump", addr, "extra"}, 2, "unexpected argument 'extra'"},
      {{"get", addr, "k", "--timeout"}, 2, "--timeout wants milliseconds"},
      {{"get", addr, "k", "--timeout", "0"}, 2, "--timeout wants milliseconds > 0, not '0'"},
      {{"get", addr, "k", "--timeout", "soon"}, 2, "--timeout"},
      {{"get", addr, long_key}, 2, "keys are 1..143 bytes"},
      {{"set", addr, long_key, "v"}, 2, "bad key"},
      {{"get", addr, ""}, 2, "bad key ''"},
      {{"get", addr, "a\\x0g"}, 2, "bad key"},
      {{"get", addr, "a\\x"}, 2, "bad key"},
      {{"get", addr, "handle:1:200:x"}, 2, "LNCs 0..127"},
      {{"get", addr, "handle:200:1:x"}, 2, "bad key"},
      {{"get", addr, "handle:1:2:"}, 2, "bad key"},
      {{"get", addr, "handle:1:x"}, 2, "bad key"},
      {{"set", addr, "k", long_val}, 2, "value longer than 964 bytes"},
      {{"set", addr, "k", "abc", "--hex"}, 2, "--hex VALUE must be an even number of hex digits"},
      {{"set", addr, "k", "zz", "--hex"}, 2, "--hex VALUE"},
      {{"set", addr, "k", "+f+f", "--hex"}, 2, "--hex VALUE"},
      {{"set", addr, "k", " 1 2", "--hex"}, 2, "--hex VALUE"},
      {{"set", addr, "k", "0x", "--hex"}, 2, "--hex VALUE"},
      {{"set", addr, "k", long_hex, "--hex"}, 2, "at most 964 bytes"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    res_t r = run_argv((char *const *)cases[i].args);
    ASSERT_MSG(code(r) == cases[i].rc, "case %zu (%s %s): exit %d, want %d; stderr '%s'", i, cases[i].args[0],
               cases[i].args[1] ? cases[i].args[1] : "", code(r), cases[i].rc, r.err);
    ASSERT_MSG(strstr(r.err, cases[i].err_sub), "case %zu (%s %s): stderr '%s' lacks '%s'", i,
               cases[i].args[0], cases[i].args[1] ? cases[i].args[1] : "", r.err, cases[i].err_sub);
    ASSERT_MSG(strncmp(r.err, "asrkv: ", 7) == 0, "case %zu: stderr '%s'", i, r.err);
    ASSERT_MSG(r.out[0] == '\0', "case %zu: unexpected stdout '%s'", i, r.out);
    /* usage errors point at --help; a bad key explains the key syntax instead */
    if (cases[i].rc == 2 && !strstr(r.err, "bad key")) ASSERT_CONTAINS(r.err, "asrkv --help");
    res_free(r);
  }

  /* No arguments: usage on stderr, exit 2. */
  res_t r = run(NULL);
  EXPECT(r, 2, NULL, "usage: asrkv serve");
  ASSERT_STREQ(r.out, "");
  res_free(r);
}

/* --- 5. serve lifecycle ---------------------------------------------------- */

TEST_TIMEOUT(cli_serve_port_in_use, 30) {
  clean_env();
  server_t s = serve(NULL, NULL);
  char port[16];
  snprintf(port, sizeof port, "%u", s.port);
  res_t r = run("serve", "--port", port, "--bind", "127.0.0.1", NULL);
  EXPECT(r, 1, NULL, "cannot start the KV server");
  ASSERT_CONTAINS(r.err, s.addr); /* "cannot bind 127.0.0.1:P: ..." */
  ASSERT_STREQ(r.out, "");
  res_free(r);

  /* With --elect this process wins the lock (the first server never took it),
   * retries the bind for a while, then fails the same way and lets go of the lock. */
  r = run("serve", "--port", port, "--bind", "127.0.0.1", "--elect", NULL);
  EXPECT(r, 1, NULL, s.addr);
  ASSERT_STREQ(r.out, "");
  res_free(r);

  /* The first server is unharmed. */
  r = run("set", s.addr, "still", "here", NULL);
  EXPECT(r, 0, NULL, NULL);
  res_free(r);
  stop(&s, SIGTERM);
}

TEST_TIMEOUT(cli_serve_sigterm_and_waiting, 30) {
  clean_env();
  uint16_t p = asr_test_free_port();
  char port[16];
  snprintf(port, sizeof port, "%u", p);
  char *argv[] = {(char *)kv_bin(), "serve",   "--port",     port, "--bind",
                  "127.0.0.1",      "--elect", "--max-keys", "2",  NULL};
  server_t lead = {0}, waiter = {0};
  lead.pid = asr_test_spawn(argv, &lead.out, &lead.err);
  char line[256], want[128];
  ASSERT(asr_test_read_line(lead.out, line, sizeof line, 10000) > 0);
  snprintf(want, sizeof want, "READY port=%u pid=%d", p, (int)lead.pid);
  ASSERT_STREQ(line, want);
  snprintf(lead.addr, sizeof lead.addr, "127.0.0.1:%u", p);

  waiter.pid = asr_test_spawn(argv, &waiter.out, &waiter.err);
  ASSERT(asr_test_read_line(waiter.out, line, sizeof line, 10000) > 0);
  ASSERT_MSG(strncmp(line, "WAITING ", 8) == 0, "second elector said '%s'", line);
  ASSERT_CONTAINS(line, port);

  /* --max-keys 2 is in force. */
  res_t r = run("set", lead.addr, "a", "1", NULL);
  EXPECT(r, 0, NULL, NULL);
  res_free(r);
  r = run("set", lead.addr, "b", "2", NULL);
  EXPECT(r, 0, NULL, NULL);
  res_free(r);
  r = run("set", lead.addr, "c", "3", NULL);
  EXPECT(r, 1, NULL, "full");
  res_free(r);

  /* A waiting elector leaves quietly on SIGTERM. */
  ASSERT_EQ(kill(waiter.pid, SIGTERM), 0);
  int st = asr_test_wait(waiter.pid, 5000);
  ASSERT(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  close(waiter.out);
  close(waiter.err);

  const char *stopped = stop(&lead, SIGTERM);
  ASSERT_CONTAINS(stopped, "keys=2 ");
  ASSERT_CONTAINS(stopped, "accepted=");
}

/* --- 6. secret, --version, --help ------------------------------------------ */

TEST(cli_secret_version_help) {
  clean_env();
  char a[65], b[65];
  new_secret(a);
  new_secret(b);
  ASSERT(strcmp(a, b) != 0);
  for (int i = 0; i < 64; i++) {
    ASSERT(isxdigit((unsigned char)a[i]) && !isupper((unsigned char)a[i]));
    ASSERT(isxdigit((unsigned char)b[i]) && !isupper((unsigned char)b[i]));
  }
  /* It does not need (or read) a valid ASR_JOB_SECRET. */
  setenv("ASR_JOB_SECRET", "garbage", 1);
  res_t r = run("secret", NULL);
  EXPECT(r, 0, NULL, NULL);
  ASSERT_EQ(strlen(r.out), 65);
  res_free(r);
  unsetenv("ASR_JOB_SECRET");

  r = run("--version", NULL);
  EXPECT(r, 0, "asrkv (asr) ", NULL);
  ASSERT_CONTAINS(r.out, PACKAGE_VERSION);
  res_free(r);

  r = run("--help", NULL);
  EXPECT(r, 0, "usage: asrkv serve", NULL);
  ASSERT_CONTAINS(r.out, "asrkv secret");
  ASSERT_CONTAINS(r.out, "ASR_JOB_SECRET");
  ASSERT_STREQ(r.err, "");
  res_free(r);
  r = run("-h", NULL);
  EXPECT(r, 0, "usage: asrkv serve", NULL);
  res_free(r);
}
