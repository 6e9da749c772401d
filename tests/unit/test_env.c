/* test_env.c -- the table of environment variables and its parser (common/asr_env.h). */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_log.h"
#include "asr_test.h"

/* Each case runs in its own forked process, so setenv() here never leaks
 * into another case. */

/* Runs getter rc checks in one line: the value must be good. */
static long int_of(asr_env_id_t id) {
  long v = -12345;
  char err[256] = "";
  int rc = asr_env_int(id, &v, err, sizeof err);
  ASSERT_MSG(rc == 0, "%s: rc %d: %s", asr_env_row(id)->name, rc, err);
  return v;
}

/* Sets name=val and expects asr_env_int(id) to fail with exactly msg. */
static void int_fails(asr_env_id_t id, const char *val, const char *msg) {
  setenv(asr_env_row(id)->name, val, 1);
  long v = -12345;
  char err[256] = "";
  ASSERT_EQ(asr_env_int(id, &v, err, sizeof err), ASR_ECONFIG);
  ASSERT_MSG(strcmp(err, msg) == 0, "got '%s', want '%s'", err, msg);
  ASSERT_EQ(v, -12345); /* out-parameters are written only on success */
  ASSERT_EQ(asr_env_check(id, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, msg);
}

static const char *str_of(asr_env_id_t id) {
  const char *v = "untouched";
  char err[256] = "";
  int rc = asr_env_str(id, &v, err, sizeof err);
  ASSERT_MSG(rc == 0, "%s: rc %d: %s", asr_env_row(id)->name, rc, err);
  return v;
}

static void str_fails(asr_env_id_t id, const char *val, const char *msg) {
  setenv(asr_env_row(id)->name, val, 1);
  const char *v = "untouched";
  char err[512] = "";
  ASSERT_EQ(asr_env_str(id, &v, err, sizeof err), ASR_ECONFIG);
  ASSERT_MSG(strcmp(err, msg) == 0, "got '%s', want '%s'", err, msg);
  ASSERT_STREQ(v, "untouched");
}

/* What fn printed on stderr (fd 2 goes to a file meanwhile). */

/* --- the table ------------------------------------------------------------ */

TEST(rows_are_well_formed) {
  for (int i = 0; i < ASR_ENV__COUNT; i++) {
    const asr_env_row_t *r = asr_env_row((asr_env_id_t)i);
    ASSERT(r && r->id == (asr_env_id_t)i);
    /* (torchrun's names are rows too: asrd sets them, applications read them) */
    ASSERT_MSG(strncmp(r->name, "ASR_", 4) == 0 || strncmp(r->name, "ASRRUN_", 7) == 0 ||
                   r->who == (ASR_ENV_APP | ASR_ENV_SET),
               "%s", r->name);
    ASSERT_MSG(r->doc && *r->doc && !strchr(r->doc, '|') && !strchr(r->doc, '\n'), "%s: doc", r->name);
    ASSERT_MSG(r->who & (ASR_ENV_ASRRUN | ASR_ENV_ASRD | ASR_ENV_LIBASR | ASR_ENV_ASRKV | ASR_ENV_APP |
                         ASR_ENV_TESTS),
               "%s: nobody reads it", r->name);
    ASSERT_MSG(r->min <= r->max || r->max == 0, "%s: range", r->name);
    ASSERT_MSG((r->type == ASR_ENV_T_WORD) == (r->words != NULL), "%s: words", r->name);
    for (int j = 0; j < i; j++)
      ASSERT_MSG(strcmp(r->name, asr_env_row((asr_env_id_t)j)->name), "%s twice", r->name);
    if (!(r->who & ASR_ENV_FAMILY)) ASSERT(asr_env_find(r->name) == r);
    /* every default is a good value: unset, each getter returns it */
    unsetenv(r->name);
    char err[256] = "";
    ASSERT_MSG(asr_env_check((asr_env_id_t)i, err, sizeof err) == 0, "%s: %s", r->name, err);
    if (r->dflt) {
      setenv(r->name, r->dflt, 1);
      ASSERT_MSG(asr_env_check((asr_env_id_t)i, err, sizeof err) == 0, "%s: default: %s", r->name, err);
      unsetenv(r->name);
    }
  }
  /* the launcher's variables for its ranks are rows (launcher/asrd/asrd_ranks.c) */
  static const char *const set[] = {
      "ASR_RANK",           "ASR_SIZE",         "ASR_LNC",        "ASR_LOCAL_RANK", "ASR_LOCAL_SIZE",
      "ASR_BOOTSTRAP_PORT", "ASR_JOB_SECRET",   "ASR_HOSTNAME",   "ASR_KV_SERVER",  "ASR_PROVIDER",
      "ASR_IF_ADDR",        "ASR_NUM_HOSTS",    "ASR_HOST_INDEX", "RANK",           "LOCAL_RANK",
      "WORLD_SIZE",         "LOCAL_WORLD_SIZE", "MASTER_ADDR",    "MASTER_PORT",    "GLOO_SOCKET_IFNAME",
      "ASR_REPORT_FD",      "ASR_INCARNATION",  "ASR_TRACE",      "ASR_METRICS"};
  int nset = 0;
  for (size_t i = 0; i < sizeof set / sizeof set[0]; i++) {
    const asr_env_row_t *r = asr_env_find(set[i]);
    ASSERT_MSG(r && (r->who & ASR_ENV_SET), "%s", set[i]);
  }
  for (int i = 0; i < ASR_ENV__COUNT; i++) nset += (asr_env_row((asr_env_id_t)i)->who & ASR_ENV_SET) != 0;
  ASSERT_EQ(nset, (long long)(sizeof set / sizeof set[0]));
  /* a family covers every name with its prefix, and only those */
  ASSERT(asr_env_find("ASR_SLURM_N1_NS=x") == asr_env_row(ASR_ENV_SLURM_TEST));
  ASSERT(asr_env_find("ASR_SLURM_") == NULL);
  ASSERT(asr_env_find("ASR_NOPE") == NULL);
  ASSERT(asr_env_find("ASR_SEQ_BITS=8") == asr_env_row(ASR_ENV_SEQ_BITS));
  ASSERT(asr_env_find("ASR_SEQ_BITSX") == NULL);
  ASSERT(asr_env_row(ASR_ENV__COUNT) == NULL);
}

/* The log levels' words are asr_log_level_t in order: the logger reads the
 * level as the word's index. */
TEST(log_level_words_follow_the_enum) {
  const char *const *w = asr_env_row(ASR_ENV_LOG_LEVEL)->words;
  ASSERT_STREQ(w[ASR_LOG_ERROR], "error");
  ASSERT_STREQ(w[ASR_LOG_WARN], "warn");
  ASSERT_STREQ(w[ASR_LOG_INFO], "info");
  ASSERT_STREQ(w[ASR_LOG_DEBUG], "debug");
  ASSERT_STREQ(w[ASR_LOG_TRACE], "trace");
  ASSERT(w[ASR_LOG_TRACE + 1] == NULL);
}

/* --- each type: good, bad, out of range, empty, unset ---------------------- */

TEST(int_types) {
  unsetenv("ASR_SEQ_BITS");
  ASSERT_EQ(int_of(ASR_ENV_SEQ_BITS), 40); /* the default */
  setenv("ASR_SEQ_BITS", "", 1);
  ASSERT_EQ(int_of(ASR_ENV_SEQ_BITS), 40); /* empty counts as unset */
  ASSERT(!asr_env_is_set(ASR_ENV_SEQ_BITS));
  setenv("ASR_SEQ_BITS", "12", 1);
  ASSERT_EQ(int_of(ASR_ENV_SEQ_BITS), 12);
  ASSERT(asr_env_is_set(ASR_ENV_SEQ_BITS));
  setenv("ASR_SEQ_BITS", "8", 1);
  ASSERT_EQ(int_of(ASR_ENV_SEQ_BITS), 8);
  int_fails(ASR_ENV_SEQ_BITS, "abc", "ASR_SEQ_BITS: 'abc' is not a number");
  int_fails(ASR_ENV_SEQ_BITS, "41", "ASR_SEQ_BITS: '41' is out of range: use 8 to 40");
  int_fails(ASR_ENV_SEQ_BITS, "7", "ASR_SEQ_BITS: '7' is out of range: use 8 to 40");
  int_fails(ASR_ENV_SEQ_BITS, "-9", "ASR_SEQ_BITS: '-9' is not a number");
  int_fails(ASR_ENV_SEQ_BITS, "+9", "ASR_SEQ_BITS: '+9' is not a number");
  int_fails(ASR_ENV_SEQ_BITS, " 9", "ASR_SEQ_BITS: ' 9' is not a number");
  int_fails(ASR_ENV_SEQ_BITS, "9x", "ASR_SEQ_BITS: '9x' is not a number");
  int_fails(ASR_ENV_SEQ_BITS, "99999999999999999999", "ASR_SEQ_BITS: '99999999999999999999' is not a number");
  /* milliseconds: at least 1 */
  unsetenv("ASR_KV_TIMEOUT_MS");
  ASSERT_EQ(int_of(ASR_ENV_KV_TIMEOUT_MS), 120000);
  int_fails(ASR_ENV_KV_TIMEOUT_MS, "0", "ASR_KV_TIMEOUT_MS: '0' is not a positive number");
  int_fails(ASR_ENV_KV_TIMEOUT_MS, "5s", "ASR_KV_TIMEOUT_MS: '5s' is not a positive number");
  int_fails(ASR_ENV_KV_TIMEOUT_MS, "86400000",
            "ASR_KV_TIMEOUT_MS: '86400000' is out of range: use 1 to 86399999");
  /* a port, with no default: 0 and not set */
  unsetenv("ASR_BOOTSTRAP_PORT");
  unsetenv("NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT");
  ASSERT_EQ(int_of(ASR_ENV_BOOTSTRAP_PORT), 0);
  ASSERT(!asr_env_is_set(ASR_ENV_BOOTSTRAP_PORT));
  int_fails(ASR_ENV_BOOTSTRAP_PORT, "70000", "ASR_BOOTSTRAP_PORT: '70000' is out of range: use 1 to 65535");
  int_fails(ASR_ENV_BOOTSTRAP_PORT, "0", "ASR_BOOTSTRAP_PORT: '0' is not a positive number");
  /* seconds and bytes */
  setenv("ASRRUN_TIMEOUT", "0", 1);
  ASSERT_EQ(int_of(ASR_ENV_ASRRUN_TIMEOUT), 0);
  int_fails(ASR_ENV_ASRRUN_TIMEOUT, "1h", "ASRRUN_TIMEOUT: '1h' is not a number");
  setenv("ASR_INJECT_MAX", "0", 1);
  ASSERT_EQ(int_of(ASR_ENV_INJECT_MAX), 0);
  int_fails(ASR_ENV_INJECT_MAX, "4k", "ASR_INJECT_MAX: '4k' is not a number");
}

TEST(bool_type) {
  unsetenv("ASR_OFI_PSM");
  int b = -1;
  char err[256];
  ASSERT_OK(asr_env_bool(ASR_ENV_OFI_PSM, &b, err, sizeof err));
  ASSERT_EQ(b, 0);
  static const char *const yes[] = {"1", "true", "Yes", "ON"}, *const no[] = {"0", "FALSE", "no", "off", ""};
  for (size_t i = 0; i < 4; i++) {
    setenv("ASR_OFI_PSM", yes[i], 1);
    ASSERT_OK(asr_env_bool(ASR_ENV_OFI_PSM, &b, err, sizeof err));
    ASSERT_EQ(b, 1);
  }
  for (size_t i = 0; i < 5; i++) {
    setenv("ASR_OFI_PSM", no[i], 1);
    ASSERT_OK(asr_env_bool(ASR_ENV_OFI_PSM, &b, err, sizeof err));
    ASSERT_EQ(b, 0);
  }
  setenv("ASR_OFI_PSM", "2", 1);
  b = -1;
  ASSERT_EQ(asr_env_bool(ASR_ENV_OFI_PSM, &b, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "ASR_OFI_PSM: '2' is not a boolean: use true or false (1 or 0)");
  ASSERT_EQ(b, -1);
}

TEST(word_type) {
  int w = -1;
  char err[256];
  unsetenv("ASR_KV_SERVER");
  ASSERT_OK(asr_env_word(ASR_ENV_KV_SERVER, &w, err, sizeof err));
  ASSERT_EQ(w, 0); /* auto */
  setenv("ASR_KV_SERVER", "external", 1);
  ASSERT_OK(asr_env_word(ASR_ENV_KV_SERVER, &w, err, sizeof err));
  ASSERT_EQ(w, 1);
  setenv("ASR_KV_SERVER", "", 1);
  ASSERT_OK(asr_env_word(ASR_ENV_KV_SERVER, &w, err, sizeof err));
  ASSERT_EQ(w, 0);
  setenv("ASR_KV_SERVER", "External", 1); /* words are exact, as in the YAML files and flags */
  w = -1;
  ASSERT_EQ(asr_env_word(ASR_ENV_KV_SERVER, &w, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "ASR_KV_SERVER: 'External' is not one of auto, external");
  ASSERT_EQ(w, -1);
  unsetenv("ASR_LOG_LEVEL");
  ASSERT_OK(asr_env_word(ASR_ENV_LOG_LEVEL, &w, err, sizeof err));
  ASSERT_EQ(w, ASR_LOG_WARN);
  setenv("ASR_LOG_LEVEL", "bogus", 1);
  ASSERT_EQ(asr_env_word(ASR_ENV_LOG_LEVEL, &w, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "ASR_LOG_LEVEL: 'bogus' is not one of error, warn, info, debug, trace");
}

TEST(text_types) {
  /* text: at most max bytes */
  unsetenv("ASR_HOSTNAME");
  ASSERT(str_of(ASR_ENV_HOSTNAME) == NULL); /* no default */
  char name[130];
  memset(name, 'h', 127);
  name[127] = '\0';
  setenv("ASR_HOSTNAME", name, 1);
  ASSERT_STREQ(str_of(ASR_ENV_HOSTNAME), name);
  strcat(name, "h");
  str_fails(ASR_ENV_HOSTNAME, name,
            "ASR_HOSTNAME: 'hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh...' is too long (at most 127 bytes)");
  /* a path with a default */
  unsetenv("ASR_KV_LOCK_DIR");
  ASSERT_STREQ(str_of(ASR_ENV_KV_LOCK_DIR), "/tmp");
  setenv("ASR_KV_LOCK_DIR", "", 1);
  ASSERT_STREQ(str_of(ASR_ENV_KV_LOCK_DIR), "/tmp");
  setenv("ASR_KV_LOCK_DIR", "/var/lock", 1);
  ASSERT_STREQ(str_of(ASR_ENV_KV_LOCK_DIR), "/var/lock");
  /* IPv4 addresses */
  unsetenv("ASR_IF_ADDR");
  ASSERT_STREQ(str_of(ASR_ENV_IF_ADDR), "127.0.0.1");
  setenv("ASR_IF_ADDR", "10.1.2.3", 1);
  ASSERT_STREQ(str_of(ASR_ENV_IF_ADDR), "10.1.2.3");
  str_fails(ASR_ENV_IF_ADDR, "10.1.2", "ASR_IF_ADDR: '10.1.2' is not an IPv4 address: use A.B.C.D");
  str_fails(ASR_ENV_IF_ADDR, "node1", "ASR_IF_ADDR: 'node1' is not an IPv4 address: use A.B.C.D");
  str_fails(ASR_ENV_IF_ADDR, "10.1.2.256", "ASR_IF_ADDR: '10.1.2.256' is not an IPv4 address: use A.B.C.D");
  /* interface specs: checked for form, not resolved (another host may have them) */
  static const char *const specs[] = {"eth0",     "ib0",           "10.0.0.0/8",
                                      "10.0.0.1", "192.168.7.0/0", "192.168.7.9/32"};
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    setenv("ASR_IF_INCLUDE", specs[i], 1);
    ASSERT_STREQ(str_of(ASR_ENV_IF_INCLUDE), specs[i]);
  }
  str_fails(ASR_ENV_IF_INCLUDE, "10.0.0.0/33",
            "ASR_IF_INCLUDE: '10.0.0.0/33': the prefix length after '/' must be 0..32");
  str_fails(ASR_ENV_IF_INCLUDE, "10.0.0.0/",
            "ASR_IF_INCLUDE: '10.0.0.0/': the prefix length after '/' must be 0..32");
  str_fails(ASR_ENV_IF_INCLUDE, "eth0/8",
            "ASR_IF_INCLUDE: 'eth0/8' is neither an interface name, A.B.C.D/N nor A.B.C.D");
  str_fails(ASR_ENV_IF_INCLUDE, "averyveryverylongname",
            "ASR_IF_INCLUDE: 'averyveryverylongname' is neither an interface name, A.B.C.D/N nor A.B.C.D");
  /* the secret: 64 hex digits, never repeated in a message */
  char hex[70];
  for (int i = 0; i < 64; i++) hex[i] = "0123456789abcdefABCDEF"[i % 22];
  hex[64] = '\0';
  setenv("ASR_JOB_SECRET", hex, 1);
  ASSERT_STREQ(str_of(ASR_ENV_JOB_SECRET), hex);
  hex[63] = '\0';
  str_fails(
      ASR_ENV_JOB_SECRET, hex,
      "ASR_JOB_SECRET: the value (63 characters) is not 64 hex digits; unset it or copy it from the job's "
      "launcher");
  hex[63] = 'g';
  str_fails(
      ASR_ENV_JOB_SECRET, hex,
      "ASR_JOB_SECRET: the value (64 characters) is not 64 hex digits; unset it or copy it from the job's "
      "launcher");
  unsetenv("ASR_JOB_SECRET");
  ASSERT(str_of(ASR_ENV_JOB_SECRET) == NULL);
}

/* A getter of the wrong type is a bug in its caller: a clear error, not a
 * misread value. */
TEST(wrong_getter) {
  char err[256];
  long v = 7;
  const char *s = "x";
  int b = 7;
  ASSERT_EQ(asr_env_int(ASR_ENV_HOSTNAME, &v, err, sizeof err), ASR_EINVAL);
  ASSERT_STREQ(err, "internal error: asr_env_int cannot read ASR_HOSTNAME");
  ASSERT_EQ(asr_env_str(ASR_ENV_SEQ_BITS, &s, err, sizeof err), ASR_EINVAL);
  ASSERT_EQ(asr_env_bool(ASR_ENV_KV_SERVER, &b, err, sizeof err), ASR_EINVAL);
  ASSERT_EQ(asr_env_word(ASR_ENV_OFI_PSM, &b, err, sizeof err), ASR_EINVAL);
  ASSERT_EQ(asr_env_int(ASR_ENV__COUNT, &v, err, sizeof err), ASR_EINVAL);
  ASSERT_EQ(v, 7);
  ASSERT_STREQ(s, "x");
  ASSERT_EQ(b, 7);
}

/* --- the seed's alias -------------------------------------------------------- */

TEST(alias_of_the_bootstrap_port) {
  const char *seed = "NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT";
  ASSERT_STREQ(asr_env_alias(ASR_ENV_BOOTSTRAP_PORT), seed);
  ASSERT(asr_env_alias(ASR_ENV_SEQ_BITS) == NULL);
  ASSERT(asr_env_find(seed) == asr_env_row(ASR_ENV_BOOTSTRAP_PORT));
  unsetenv("ASR_BOOTSTRAP_PORT");
  setenv(seed, "5000", 1);
  ASSERT(asr_env_is_set(ASR_ENV_BOOTSTRAP_PORT));
  ASSERT_EQ(int_of(ASR_ENV_BOOTSTRAP_PORT), 5000);
  ASSERT_STREQ(asr_env_raw(ASR_ENV_BOOTSTRAP_PORT), "5000");
  setenv("ASR_BOOTSTRAP_PORT", "6000", 1); /* our name wins */
  ASSERT_EQ(int_of(ASR_ENV_BOOTSTRAP_PORT), 6000);
  setenv("ASR_BOOTSTRAP_PORT", "", 1); /* empty is unset: the alias is read */
  ASSERT_EQ(int_of(ASR_ENV_BOOTSTRAP_PORT), 5000);
  unsetenv("ASR_BOOTSTRAP_PORT");
  setenv(seed, "port", 1); /* the message names the variable the value came from */
  long v;
  char err[256];
  ASSERT_EQ(asr_env_int(ASR_ENV_BOOTSTRAP_PORT, &v, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT: 'port' is not a positive number");
}

/* Only the set-but-empty config paths are told apart from unset, by asr_env_raw. */
TEST(raw_tells_empty_from_unset) {
  unsetenv("ASR_SYSTEM_CONFIG");
  ASSERT(asr_env_raw(ASR_ENV_SYSTEM_CONFIG) == NULL);
  setenv("ASR_SYSTEM_CONFIG", "", 1);
  ASSERT_STREQ(asr_env_raw(ASR_ENV_SYSTEM_CONFIG), "");
  ASSERT(!asr_env_is_set(ASR_ENV_SYSTEM_CONFIG));
}

TEST(check_all_by_reader) {
  char err[256] = "";
  for (int i = 0; i < ASR_ENV__COUNT; i++)
    if (!(asr_env_row((asr_env_id_t)i)->who & ASR_ENV_FAMILY)) unsetenv(asr_env_row((asr_env_id_t)i)->name);
  ASSERT_OK(asr_env_check_all(~0u, err, sizeof err));
  setenv("ASR_SEQ_BITS", "99", 1); /* read by libasr only */
  ASSERT_EQ(asr_env_check_all(ASR_ENV_LIBASR, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err, "ASR_SEQ_BITS: '99' is out of range: use 8 to 40");
  ASSERT_EQ(asr_env_check_all(~0u, err, sizeof err), ASR_ECONFIG);
  ASSERT_OK(asr_env_check_all(ASR_ENV_ASRKV, err, sizeof err));
  ASSERT_OK(asr_env_check_all(ASR_ENV_ASRRUN, err, sizeof err));
}

/* --- unknown names ------------------------------------------------------------- */

typedef struct {
  char names[10][64], nears[10][64];
  int n;
} seen_t;

static void collect(void *arg, const char *name, const char *near) {
  seen_t *s = arg;
  ASSERT(s->n < 10);
  snprintf(s->names[s->n], 64, "%s", name);
  snprintf(s->nears[s->n], 64, "%s", near ? near : "-");
  s->n++;
}

TEST(unknown_names_and_suggestions) {
  char *envp[] = {"PATH=/bin",
                  "ASRRUN_NP=2",
                  "ASR_BOGUS=1",
                  "ASRRUN_TIMEOT=5",
                  "ASR_NP=3",
                  "ASRRUN_LOG_LEVEL=debug",
                  "ASR_SLURM_N1_NS=x",
                  "ASRT_MARK=1",
                  "NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT=1",
                  "ASR_KV_TIMEOUT=100",
                  "ASR_KV=1",
                  "ASRRUN_=1",
                  NULL};
  seen_t s = {0};
  ASSERT_EQ(asr_env_each_unknown(envp, collect, &s), 7);
  ASSERT_STREQ(s.names[0], "ASR_BOGUS");
  ASSERT_STREQ(s.nears[0], "-");
  ASSERT_STREQ(s.names[1], "ASRRUN_TIMEOT");
  ASSERT_STREQ(s.nears[1], "ASRRUN_TIMEOUT");
  ASSERT_STREQ(s.names[2], "ASR_NP"); /* the same name under the other prefix */
  ASSERT_STREQ(s.nears[2], "ASRRUN_NP");
  ASSERT_STREQ(s.names[3], "ASRRUN_LOG_LEVEL");
  ASSERT_STREQ(s.nears[3], "ASR_LOG_LEVEL");
  ASSERT_STREQ(s.names[4], "ASR_KV_TIMEOUT");
  ASSERT_STREQ(s.nears[4], "ASR_KV_TIMEOUT_MS"); /* the one row that starts with it */
  ASSERT_STREQ(s.names[5], "ASR_KV");
  ASSERT_STREQ(s.nears[5], "-"); /* several rows start with it */
  ASSERT_STREQ(s.names[6], "ASRRUN_");
  ASSERT_STREQ(s.nears[6], "ASRRUN_NP"); /* two letters off */
  char *none[] = {"HOME=/", NULL};
  ASSERT_EQ(asr_env_each_unknown(none, NULL, NULL), 0);
}

static void warn_twice(void) {
  asr_env_warn_unknown_once();
  asr_env_warn_unknown_once();
}

/* libasr warns about an unknown ASR_* name once per process, however many
 * LNCs it brings up; ASRRUN_* names are asrrun's business. */
TEST(unknown_asr_name_warns_once) {
  setenv("ASR_BOGUS_SETTING", "1", 1);
  setenv("ASR_SEQ_BIT", "8", 1);
  setenv("ASRRUN_WHATEVER", "1", 1);
  asr_log_set_role("tester", -1);
  char *out = asr_test_stderr_of(warn_twice);
  ASSERT_EQ(strstr(out, "unknown variable ASR_BOGUS_SETTING; asrrun --list-env lists them\n") != NULL, 1);
  ASSERT_CONTAINS(out,
                  "env: warning: unknown variable ASR_SEQ_BIT (did you mean ASR_SEQ_BITS?); asrrun "
                  "--list-env lists them\n");
  int lines = 0;
  for (const char *p = out; *p; p++) lines += *p == '\n';
  ASSERT_MSG(lines == 2, "%d lines: '%s'", lines, out);
  ASSERT(strstr(out, "ASRRUN_WHATEVER") == NULL);
  free(out);
}

/* --- the printed table ------------------------------------------------------------- */

static char *printed(int markdown) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ASSERT(f);
  asr_env_print(f, markdown);
  fclose(f);
  return buf;
}

TEST(print_lists_every_row) {
  char *text = printed(0), *md = printed(1);
  for (int i = 0; i < ASR_ENV__COUNT; i++) {
    const asr_env_row_t *r = asr_env_row((asr_env_id_t)i);
    char want[128];
    snprintf(want, sizeof want, "\n%s%s\n", r->name, r->who & ASR_ENV_FAMILY ? "*" : "");
    ASSERT_CONTAINS(text, want);
    snprintf(want, sizeof want, "\n| `%s%s` | ", r->name, r->who & ASR_ENV_FAMILY ? "*" : "");
    ASSERT_CONTAINS(md, want);
  }
  ASSERT_CONTAINS(text, "\nNEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT\n    alias of ASR_BOOTSTRAP_PORT");
  ASSERT_CONTAINS(text, "\nASR_SEQ_BITS\n    integer 8..40; default: 40; read by libasr\n");
  ASSERT_CONTAINS(text,
                  "\nASR_LNC\n    integer 0..127; default: -; read by libasr, applications; asrd sets it for "
                  "every rank\n");
  ASSERT_CONTAINS(md, "\n| `NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT` | alias | | |");
  ASSERT_CONTAINS(
      md, "\n| `ASR_KV_SERVER` | one of auto, external | `auto` | libasr; asrd sets it for every rank | ");
  /* a Markdown table: a header, a rule, then one line per row and alias, five cells each */
  int lines = 0;
  for (char *p = md; *p; p++) lines += *p == '\n';
  ASSERT_EQ(lines, ASR_ENV__COUNT + 1 + 2);
  for (char *line = md; *line; line = strchr(line, '\n') + 1) {
    int bars = 0;
    for (char *p = line; *p != '\n'; p++) bars += *p == '|';
    ASSERT_MSG(bars == 6, "%d bars in '%.*s'", bars, (int)(strchr(line, '\n') - line), line);
  }
  free(text);
  free(md);
}

#define README_BEGIN "<!-- env-table begin: generated by scripts/gen-env-table.sh, do not edit -->\n"
#define README_END "<!-- env-table end -->\n"

/* README.md's table is the one --list-env=markdown prints: a new or changed
 * row fails here until scripts/gen-env-table.sh has rewritten it. */
TEST(readme_table_is_generated) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/README.md", ASR_TOP_SRCDIR);
  int fd = open(path, O_RDONLY);
  ASSERT_MSG(fd >= 0, "cannot open %s", path);
  char *readme = asr_test_read_all(fd, 2000);
  close(fd);
  char *b = strstr(readme, README_BEGIN), *e = b ? strstr(b, README_END) : NULL;
  ASSERT_MSG(b && e, "%s has no '%.40s...' and '%.20s...' markers", path, README_BEGIN, README_END);
  b += strlen(README_BEGIN);
  char *md = printed(1);
  ASSERT_MSG(strlen(md) == (size_t)(e - b) && memcmp(md, b, strlen(md)) == 0,
             "README.md's table of environment variables is out of date: run scripts/gen-env-table.sh");
  free(md);
  free(readme);
}
