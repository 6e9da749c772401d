/* test_hostlist.c -- Slurm host lists and tasks-per-node strings, PBS node
 * files, asrrun's allocation detection, and what the launch backends answer
 * about their resource managers (launcher/launch/hostlist.c, alloc.c,
 * launch.h). */
#include "config.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "asr_err.h"
#include "asr_test.h"
#include "config_int.h" /* launcher/: found by -I; it brings job_config.h (asr_config_t) */
#include "hostlist.h"
#include "launch.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

/* Each case ends in the harness's _exit(), where LeakSanitizer never looks;
 * ask it here so a leak fails the case that caused it. */
static void check_no_leaks(void) {
#if defined(__SANITIZE_ADDRESS__)
  ASSERT_MSG(__lsan_do_recoverable_leak_check() == 0, "LeakSanitizer found leaks (see above)");
#endif
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* Expands list and checks the names are exactly want[] (NULL-ended). */
static void expect_hosts(const char *list, const char *const *want) {
  asr_nodelist_t nl;
  char err[512] = "";
  int rc = asr_slurm_hostlist_expand(list, NULL, &nl, err, sizeof err);
  ASSERT_MSG(rc == 0, "'%s': rc %d: %s", list, rc, err);
  int n = 0;
  while (want[n]) n++;
  ASSERT_MSG(nl.n == n, "'%s': %d hosts, want %d", list, nl.n, n);
  for (int i = 0; i < n; i++) {
    ASSERT_MSG(strcmp(nl.name[i], want[i]) == 0, "'%s': host %d is '%s', want '%s'", list, i, nl.name[i],
               want[i]);
    ASSERT_EQ(nl.slots[i], 0);
  }
  asr_nodelist_free(&nl);
  ASSERT(nl.n == 0 && nl.name == NULL && nl.slots == NULL);
}
#define EXPECT_HOSTS(list, ...) expect_hosts((list), (const char *const[]){__VA_ARGS__, NULL})

/* Expands list, expecting rc and an error message holding each of msgs[]. */
static void expect_hostlist_error(const char *list, int want_rc, const char *const *msgs) {
  asr_nodelist_t nl;
  char err[512] = "";
  int rc = asr_slurm_hostlist_expand(list, "SLURM_JOB_NODELIST", &nl, err, sizeof err);
  ASSERT_MSG(rc == want_rc, "'%s': rc %d (%s), want %d: %s", list, rc, asr_err_name(rc), want_rc, err);
  ASSERT(nl.n == 0 && nl.name == NULL && nl.slots == NULL); /* nothing left to free */
  for (int i = 0; msgs[i]; i++) ASSERT_CONTAINS(err, msgs[i]);
}
#define EXPECT_HOSTLIST_ERROR(list, rc, ...) \
  expect_hostlist_error((list), (rc), (const char *const[]){__VA_ARGS__, NULL})

/* Expands spec and checks the counts are exactly want[0..n). */
static void expect_tasks(const char *spec, const int *want, int n) {
  int *counts, ncounts;
  char err[512] = "";
  int rc = asr_slurm_tasks_expand(spec, NULL, &counts, &ncounts, err, sizeof err);
  ASSERT_MSG(rc == 0, "'%s': rc %d: %s", spec, rc, err);
  ASSERT_MSG(ncounts == n, "'%s': %d counts, want %d", spec, ncounts, n);
  for (int i = 0; i < n; i++) ASSERT_MSG(counts[i] == want[i], "'%s': count %d is %d", spec, i, counts[i]);
  free(counts);
}
#define EXPECT_TASKS(spec, ...) \
  expect_tasks((spec), (const int[]){__VA_ARGS__}, (int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int)))

static void expect_tasks_error(const char *spec, int want_rc, const char *msg) {
  int *counts = (int *)&want_rc, ncounts = -1;
  char err[512] = "";
  int rc = asr_slurm_tasks_expand(spec, "SLURM_TASKS_PER_NODE", &counts, &ncounts, err, sizeof err);
  ASSERT_MSG(rc == want_rc, "'%s': rc %d (%s), want %d: %s", spec, rc, asr_err_name(rc), want_rc, err);
  ASSERT(counts == NULL && ncounts == 0);
  ASSERT_CONTAINS(err, msg);
}

/* Writes content to a file in the case's temp dir; returns its path (static). */
static const char *write_file(const char *name, const char *content) {
  static char paths[4][PATH_MAX];
  static int next;
  char *path = paths[next++ % 4];
  snprintf(path, PATH_MAX, "%s/%s", asr_test_tmpdir(), name);
  FILE *f = fopen(path, "w");
  ASSERT_MSG(f, "cannot write %s", path);
  fputs(content, f);
  fclose(f);
  return path;
}

/* A fake environment: name=value pairs, NULL-ended. */
static const char *fake_getenv(const char *name, void *arg) {
  const char *const *kv = arg;
  size_t len = strlen(name);
  for (; *kv; kv++)
    if (strncmp(*kv, name, len) == 0 && (*kv)[len] == '=') return *kv + len + 1;
  return NULL;
}

static int detect(asr_config_t *cfg, char *err, size_t errlen, const char *const *env) {
  err[0] = '\0';
  return asr_alloc_detect_env(cfg, fake_getenv, (void *)env, err, errlen);
}
#define DETECT(cfg, err, ...) detect((cfg), (err), sizeof(err), (const char *const[]){__VA_ARGS__, NULL})

static asr_config_t *cfg_new(asr_launcher_t launcher) {
  asr_config_t *cfg = malloc(sizeof *cfg);
  ASSERT(cfg);
  asr_config_defaults(cfg);
  cfg->launcher = launcher;
  return cfg;
}

static void cfg_del(asr_config_t *cfg) {
  asr_config_free(cfg);
  free(cfg);
}

/* Checks cfg's hosts are "name:slots" items of want[] (NULL-ended). */
static void expect_cfg_hosts(const asr_config_t *cfg, const char *const *want) {
  int n = 0;
  while (want[n]) n++;
  ASSERT_MSG(cfg->nhosts == n, "%d hosts, want %d", cfg->nhosts, n);
  for (int i = 0; i < n; i++) {
    char got[160];
    snprintf(got, sizeof got, "%s:%d", cfg->hosts[i].name, cfg->hosts[i].slots);
    ASSERT_MSG(strcmp(got, want[i]) == 0, "host %d is %s, want %s", i, got, want[i]);
  }
}
#define EXPECT_CFG_HOSTS(cfg, ...) expect_cfg_hosts((cfg), (const char *const[]){__VA_ARGS__, NULL})

/* ------------------------------------------------------------------------ */
/* Slurm host lists                                                         */
/* ------------------------------------------------------------------------ */

TEST(hostlist_plain_names) {
  EXPECT_HOSTS("a", "a");
  EXPECT_HOSTS("a,b,c", "a", "b", "c");
  EXPECT_HOSTS("node-1.example.org,x_y", "node-1.example.org", "x_y");
  check_no_leaks();
}

TEST(hostlist_ranges) {
  EXPECT_HOSTS("n[1-3]", "n1", "n2", "n3");
  EXPECT_HOSTS("n[5]", "n5");
  EXPECT_HOSTS("n[1,3,5]", "n1", "n3", "n5");
  EXPECT_HOSTS("n[8-11]", "n8", "n9", "n10", "n11");
  EXPECT_HOSTS("[1-2]", "1", "2");
  EXPECT_HOSTS("n[0-0]", "n0");
  check_no_leaks();
}

TEST(hostlist_zero_padding_follows_first_number) {
  EXPECT_HOSTS("node[01-04,07]", "node01", "node02", "node03", "node04", "node07");
  EXPECT_HOSTS("n[098-100]", "n098", "n099", "n100");
  EXPECT_HOSTS("n[001-3]", "n001", "n002", "n003");
  EXPECT_HOSTS("n[9-010]", "n9", "n10");
  EXPECT_HOSTS("n[1,02,003]", "n1", "n02", "n003");
  check_no_leaks();
}

TEST(hostlist_mixed_items_and_commas_in_brackets) {
  EXPECT_HOSTS("a,n[1-2],b", "a", "n1", "n2", "b");
  EXPECT_HOSTS("n[1,3],m[2-3,5]", "n1", "n3", "m2", "m3", "m5");
  EXPECT_HOSTS("n[1-2]-ib,c", "n1-ib", "n2-ib", "c");
  check_no_leaks();
}

TEST(hostlist_several_groups_cartesian_first_slowest) {
  EXPECT_HOSTS("r[1-2]-n[1-2]", "r1-n1", "r1-n2", "r2-n1", "r2-n2");
  EXPECT_HOSTS("r[1,3]n[08-09]x", "r1n08x", "r1n09x", "r3n08x", "r3n09x");
  EXPECT_HOSTS("a[1-2]b[1]c[5-6],z", "a1b1c5", "a1b1c6", "a2b1c5", "a2b1c6", "z");
  asr_nodelist_t nl;
  char err[256];
  ASSERT_OK(asr_slurm_hostlist_expand("x[1-4]y[1-5]z[1-6]", NULL, &nl, err, sizeof err));
  ASSERT_EQ(nl.n, 120);
  ASSERT_STREQ(nl.name[0], "x1y1z1");
  ASSERT_STREQ(nl.name[1], "x1y1z2");
  ASSERT_STREQ(nl.name[6], "x1y2z1");
  ASSERT_STREQ(nl.name[30], "x2y1z1");
  ASSERT_STREQ(nl.name[119], "x4y5z6");
  asr_nodelist_free(&nl);
  check_no_leaks();
}

TEST(hostlist_largest) {
  asr_nodelist_t nl;
  char err[256];
  ASSERT_OK(asr_slurm_hostlist_expand("n[1-65536]", NULL, &nl, err, sizeof err));
  ASSERT_EQ(nl.n, 65536);
  ASSERT_STREQ(nl.name[65535], "n65536");
  asr_nodelist_free(&nl);
  ASSERT_OK(asr_slurm_hostlist_expand("r[1-256]n[1-256]", NULL, &nl, err, sizeof err));
  ASSERT_EQ(nl.n, 65536);
  ASSERT_STREQ(nl.name[257], "r2n2");
  asr_nodelist_free(&nl);
  check_no_leaks();
}

TEST(hostlist_bad_brackets) {
  EXPECT_HOSTLIST_ERROR("n[1-3", ASR_EINVAL,
                        "SLURM_JOB_NODELIST 'n[1-3': ", "'[' without a matching ']' in 'n[1-3'");
  EXPECT_HOSTLIST_ERROR("a,n[1,2", ASR_EINVAL, "'[' without a matching ']' in 'n[1,2'");
  EXPECT_HOSTLIST_ERROR("n1-3]", ASR_EINVAL, "']' without a matching '[' in 'n1-3]'");
  EXPECT_HOSTLIST_ERROR("n[1-2]]", ASR_EINVAL, "']' without a matching '['");
  EXPECT_HOSTLIST_ERROR("n[1[2]]", ASR_EINVAL, "'[' inside '[...]' in 'n[1[2]]'");
  EXPECT_HOSTLIST_ERROR("n[[1]", ASR_EINVAL, "'[' inside '[...]'");
  check_no_leaks();
}

TEST(hostlist_bad_ranges) {
  EXPECT_HOSTLIST_ERROR("n[3-1]", ASR_EINVAL, "SLURM_JOB_NODELIST 'n[3-1]': range '3-1' goes downwards");
  EXPECT_HOSTLIST_ERROR("n[]", ASR_EINVAL, "'n[]': empty range inside '[...]'");
  EXPECT_HOSTLIST_ERROR("n[1,,2]", ASR_EINVAL, "empty range");
  EXPECT_HOSTLIST_ERROR("n[1,]", ASR_EINVAL, "empty range");
  EXPECT_HOSTLIST_ERROR("n[,1]", ASR_EINVAL, "empty range");
  EXPECT_HOSTLIST_ERROR("n[1-a]", ASR_EINVAL, "'1-a' inside '[...]' is not a number or a range LO-HI");
  EXPECT_HOSTLIST_ERROR("n[x]", ASR_EINVAL, "'x' inside '[...]' is not a number or a range LO-HI");
  EXPECT_HOSTLIST_ERROR("n[1-]", ASR_EINVAL, "'1-' inside");
  EXPECT_HOSTLIST_ERROR("n[-3]", ASR_EINVAL, "'-3' inside");
  EXPECT_HOSTLIST_ERROR("n[1-2-3]", ASR_EINVAL, "'1-2-3' inside");
  EXPECT_HOSTLIST_ERROR("n[ 1]", ASR_EINVAL, "' 1' inside");
  EXPECT_HOSTLIST_ERROR("n[+1]", ASR_EINVAL, "'+1' inside");
  EXPECT_HOSTLIST_ERROR("a,n[2-1],b[x]", ASR_EINVAL, "range '2-1' goes downwards");
  check_no_leaks();
}

TEST(hostlist_empty_names) {
  EXPECT_HOSTLIST_ERROR("", ASR_EINVAL, "SLURM_JOB_NODELIST '': empty host name");
  EXPECT_HOSTLIST_ERROR("a,,b", ASR_EINVAL, "'a,,b': empty host name (a comma at an end, or two in a row)");
  EXPECT_HOSTLIST_ERROR("a,", ASR_EINVAL, "empty host name");
  EXPECT_HOSTLIST_ERROR(",a", ASR_EINVAL, "empty host name");
  check_no_leaks();
}

TEST(hostlist_absurd_sizes) {
  EXPECT_HOSTLIST_ERROR("n[0-65536]", ASR_ETOOBIG, "range '0-65536' has more than 65536 hosts");
  EXPECT_HOSTLIST_ERROR("n[1-99999999999]", ASR_ETOOBIG, "has more than 65536 hosts");
  EXPECT_HOSTLIST_ERROR("n[1-40000,1-40000]", ASR_ETOOBIG, "'n[1-40000,1-40000]' expands to more than 65536");
  EXPECT_HOSTLIST_ERROR("r[1-300]-n[1-300]", ASR_ETOOBIG, "expands to more than 65536 hosts");
  EXPECT_HOSTLIST_ERROR("a[1-40000],b[1-40000]", ASR_ETOOBIG, "': more than 65536 hosts");
  EXPECT_HOSTLIST_ERROR("n[1234567890123456789]", ASR_ETOOBIG, "a number has more than 18 digits");
  /* the product check must not overflow with many groups */
  EXPECT_HOSTLIST_ERROR("n[1-65536][1-65536][1-65536][1-65536]", ASR_ETOOBIG, "expands to more than");
  char name[300];
  memset(name, 'x', 256);
  name[256] = '\0';
  EXPECT_HOSTLIST_ERROR(name, ASR_ETOOBIG, "a host name is longer than 255 bytes");
  memset(name, 'x', 254);
  strcpy(name + 254, "[9-10]");
  EXPECT_HOSTLIST_ERROR(name, ASR_ETOOBIG, "a host name is longer than 255 bytes");
  name[255] = '\0'; /* 254 x and '[' */
  strcpy(name + 254, "[9]");
  asr_nodelist_t nl; /* exactly 255 bytes is fine */
  char err[256];
  ASSERT_OK(asr_slurm_hostlist_expand(name, NULL, &nl, err, sizeof err));
  ASSERT_EQ(nl.n, 1);
  ASSERT_EQ(strlen(nl.name[0]), 255);
  asr_nodelist_free(&nl);
  /* deep nesting of groups stops at the name length, not the stack */
  char *deep = malloc(30001 * 3 + 1);
  ASSERT(deep);
  for (int i = 0; i < 30001; i++) memcpy(deep + 3 * i, "[1]", 3);
  deep[30001 * 3] = '\0';
  EXPECT_HOSTLIST_ERROR(deep, ASR_ETOOBIG, "...': a host name is longer than 255 bytes");
  free(deep);
  check_no_leaks();
}

TEST(hostlist_messages) {
  asr_nodelist_t nl;
  char err[512];
  /* what defaults; a long input is quoted in part */
  ASSERT_EQ(asr_slurm_hostlist_expand("n[2-1]", NULL, &nl, err, sizeof err), ASR_EINVAL);
  ASSERT_STREQ(err, "Slurm host list 'n[2-1]': range '2-1' goes downwards (LO must not exceed HI)");
  char list[400];
  memset(list, 'a', 300);
  strcpy(list + 300, ",n[");
  ASSERT_EQ(asr_slurm_hostlist_expand(list, "X", &nl, err, sizeof err), ASR_EINVAL);
  ASSERT(strncmp(err, "X 'aaaa", 7) == 0);
  ASSERT_CONTAINS(err, "aaa...': '[' without a matching ']' in 'n['");
  /* a short or missing errbuf is no problem */
  ASSERT_EQ(asr_slurm_hostlist_expand("n[2-1]", NULL, &nl, err, 5), ASR_EINVAL);
  ASSERT_STREQ(err, "Slur");
  ASSERT_EQ(asr_slurm_hostlist_expand("n[2-1]", NULL, &nl, NULL, 0), ASR_EINVAL);
  check_no_leaks();
}

/* ------------------------------------------------------------------------ */
/* Slurm tasks per node                                                     */
/* ------------------------------------------------------------------------ */

TEST(tasks_forms) {
  EXPECT_TASKS("1", 1);
  EXPECT_TASKS("2(x3)", 2, 2, 2);
  EXPECT_TASKS("2,1", 2, 1);
  EXPECT_TASKS("4(x2),1", 4, 4, 1);
  EXPECT_TASKS("1,3(x1),2(x2),5", 1, 3, 2, 2, 5);
  EXPECT_TASKS("128(x2)", 128, 128);
  int *counts, n;
  char err[256];
  ASSERT_OK(asr_slurm_tasks_expand("7(x65536)", NULL, &counts, &n, err, sizeof err));
  ASSERT_EQ(n, 65536);
  ASSERT_EQ(counts[65535], 7);
  free(counts);
  check_no_leaks();
}

TEST(tasks_errors) {
  expect_tasks_error("", ASR_EINVAL, "SLURM_TASKS_PER_NODE '': empty count");
  expect_tasks_error("2,", ASR_EINVAL, "'2,': empty count (a comma at an end, or two in a row)");
  expect_tasks_error(",2", ASR_EINVAL, "empty count");
  expect_tasks_error("2,,1", ASR_EINVAL, "empty count");
  expect_tasks_error("x", ASR_EINVAL, "'x': 'x' is not COUNT or COUNT(xREPEAT)");
  expect_tasks_error("2(x)", ASR_EINVAL, "'2(x)' is not COUNT or COUNT(xREPEAT)");
  expect_tasks_error("2(3)", ASR_EINVAL, "'2(3)' is not");
  expect_tasks_error("2(x3", ASR_EINVAL, "'2(x3' is not");
  expect_tasks_error("2(x3))", ASR_EINVAL, "'2(x3))' is not");
  expect_tasks_error("2(x3)4", ASR_EINVAL, "'2(x3)4' is not");
  expect_tasks_error("(x3)", ASR_EINVAL, "'(x3)' is not");
  expect_tasks_error("-1", ASR_EINVAL, "'-1' is not");
  expect_tasks_error("2 ", ASR_EINVAL, "'2 ' is not");
  expect_tasks_error("0", ASR_EINVAL, "'0': counts and repeats must be at least 1");
  expect_tasks_error("2(x0)", ASR_EINVAL, "'2(x0)': counts and repeats must be at least 1");
  expect_tasks_error("65537", ASR_ETOOBIG, "'65537': a number is larger than 65536");
  expect_tasks_error("1(x99999999999999999999)", ASR_ETOOBIG, "a number is larger than 65536");
  expect_tasks_error("1(x65536),1", ASR_ETOOBIG,
                     "SLURM_TASKS_PER_NODE '1(x65536),1': more than 65536 counts");
  int *counts, n;
  char err[256];
  ASSERT_EQ(asr_slurm_tasks_expand("0", NULL, &counts, &n, err, sizeof err), ASR_EINVAL);
  ASSERT_STREQ(err, "Slurm tasks per node '0': '0': counts and repeats must be at least 1");
  check_no_leaks();
}

TEST(tasks_check_counts_match_nodes) {
  char err[256] = "";
  ASSERT_OK(asr_slurm_tasks_check("T", 3, "N", 3, err, sizeof err));
  ASSERT_EQ(
      asr_slurm_tasks_check("SLURM_TASKS_PER_NODE '2(x3)'", 3, "SLURM_JOB_NODELIST", 2, err, sizeof err),
      ASR_EINVAL);
  ASSERT_STREQ(err,
               "SLURM_TASKS_PER_NODE '2(x3)' gives 3 task counts but SLURM_JOB_NODELIST has 2 nodes; they "
               "must match one for one");
  ASSERT_EQ(asr_slurm_tasks_check("T", 1, "N", 2, err, sizeof err), ASR_EINVAL);
  ASSERT_STREQ(err, "T gives 1 task count but N has 2 nodes; they must match one for one");
  ASSERT_EQ(asr_slurm_tasks_check("T", 2, "N", 1, NULL, 0), ASR_EINVAL);
}

/* ------------------------------------------------------------------------ */
/* PBS node files                                                           */
/* ------------------------------------------------------------------------ */

TEST(pbs_nodefile_counts_slots_in_first_order) {
  const char *path = write_file("nodes", "n2\nn1\nn2\n\n  n3  \r\n\tn1\nn2\n\n   \nn4");
  asr_nodelist_t nl;
  char err[512] = "";
  ASSERT_OK(asr_pbs_nodefile_read(path, &nl, err, sizeof err));
  ASSERT_EQ(nl.n, 4);
  const char *names[] = {"n2", "n1", "n3", "n4"};
  const int slots[] = {3, 2, 1, 1};
  for (int i = 0; i < 4; i++) {
    ASSERT_STREQ(nl.name[i], names[i]);
    ASSERT_EQ(nl.slots[i], slots[i]);
  }
  asr_nodelist_free(&nl);
  check_no_leaks();
}

TEST(pbs_nodefile_many_lines) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/big", asr_test_tmpdir());
  FILE *f = fopen(path, "w");
  ASSERT(f);
  for (int h = 0; h < 200; h++)
    for (int s = 0; s < 64; s++) fprintf(f, "node%03d.cluster\n", h);
  fprintf(f, "node000.cluster\n"); /* a host seen again after others */
  fclose(f);
  asr_nodelist_t nl;
  char err[512] = "";
  ASSERT_OK(asr_pbs_nodefile_read(path, &nl, err, sizeof err));
  ASSERT_EQ(nl.n, 200);
  ASSERT_STREQ(nl.name[199], "node199.cluster");
  ASSERT_EQ(nl.slots[0], 65);
  ASSERT_EQ(nl.slots[199], 64);
  asr_nodelist_free(&nl);
  check_no_leaks();
}

TEST(pbs_nodefile_errors) {
  asr_nodelist_t nl;
  char err[512] = "", path[PATH_MAX];
  snprintf(path, sizeof path, "%s/absent", asr_test_tmpdir());
  ASSERT_EQ(asr_pbs_nodefile_read(path, &nl, err, sizeof err), ASR_ENOENT);
  ASSERT_CONTAINS(err, "cannot open PBS node file '");
  ASSERT_CONTAINS(err, "/absent': No such file or directory");
  ASSERT(nl.n == 0 && nl.name == NULL);

  /* a directory opens but does not read */
  ASSERT(asr_pbs_nodefile_read(asr_test_tmpdir(), &nl, err, sizeof err) < 0);
  ASSERT_CONTAINS(err, asr_test_tmpdir());
  ASSERT(nl.n == 0 && nl.name == NULL);

  const char *empty = write_file("empty", "\n  \n\t\n");
  ASSERT_EQ(asr_pbs_nodefile_read(empty, &nl, err, sizeof err), ASR_EINVAL);
  ASSERT_CONTAINS(err, "PBS node file '");
  ASSERT_CONTAINS(err, "/empty' lists no hosts");

  const char *two = write_file("two", "a\nb\nc d\n");
  ASSERT_EQ(asr_pbs_nodefile_read(two, &nl, err, sizeof err), ASR_EINVAL);
  ASSERT_CONTAINS(err, "/two:3: 'c d' is not one host name (one name a line)");
  ASSERT(nl.n == 0 && nl.name == NULL); /* the hosts before the error are gone */

  char longname[400];
  memset(longname, 'h', 300);
  strcpy(longname + 300, "\n");
  const char *lng = write_file("long", longname);
  ASSERT_EQ(asr_pbs_nodefile_read(lng, &nl, err, sizeof err), ASR_ETOOBIG);
  ASSERT_CONTAINS(err, "/long:1: host name 'hhhh");
  ASSERT_CONTAINS(err, "' is longer than 255 bytes");

  if (geteuid() != 0) { /* root reads anything */
    const char *locked = write_file("locked", "a\n");
    ASSERT(chmod(locked, 0) == 0);
    ASSERT_EQ(asr_pbs_nodefile_read(locked, &nl, err, sizeof err), ASR_EPERM);
    ASSERT_CONTAINS(err, "/locked': Permission denied");
  }
  check_no_leaks();
}

/* The buffer entry point is the file reader's parser; the name stands for the
 * path in messages. A file past the size bound is refused. */
TEST(pbs_nodefile_parse_buffer) {
  static const char text[] = "n1\n n2 \nn1\nn1"; /* no newline at the end */
  asr_nodelist_t nl;
  char err[512] = "";
  ASSERT_OK(asr_pbs_nodefile_parse("mem", text, strlen(text), &nl, err, sizeof err));
  ASSERT_EQ(nl.n, 2);
  ASSERT_STREQ(nl.name[0], "n1");
  ASSERT_EQ(nl.slots[0], 3);
  ASSERT_EQ(nl.slots[1], 1);
  asr_nodelist_free(&nl);
  ASSERT_EQ(asr_pbs_nodefile_parse("mem", "a\nb c", 5, &nl, err, sizeof err), ASR_EINVAL);
  ASSERT_STREQ(err, "PBS node file mem:2: 'b c' is not one host name (one name a line)");
  ASSERT(nl.n == 0 && nl.name == NULL);
  /* a NUL byte would cut a name short: "a<NUL>b" and "a<NUL>c" were two hosts
   * named "a" (found by tests/fuzz/fuzz_hostfile.c) */
  ASSERT_EQ(asr_pbs_nodefile_parse("mem", "x\na\0b\na\0c\n", 10, &nl, err, sizeof err), ASR_EINVAL);
  ASSERT_STREQ(err, "PBS node file mem:2: a NUL byte; a node file is text, one host name a line");
  ASSERT(nl.n == 0 && nl.name == NULL);
  ASSERT_EQ(asr_pbs_nodefile_parse("mem", NULL, 0, &nl, err, sizeof err), ASR_EINVAL);
  ASSERT_STREQ(err, "PBS node file 'mem' lists no hosts");
  ASSERT_EQ(asr_pbs_nodefile_read("/dev/zero", &nl, err, sizeof err), ASR_ETOOBIG);
  ASSERT_CONTAINS(err, "PBS node file '/dev/zero' is larger than 64 MiB");
  ASSERT(nl.n == 0 && nl.name == NULL);
  check_no_leaks();
}

/* ------------------------------------------------------------------------ */
/* Allocation detection                                                     */
/* ------------------------------------------------------------------------ */

TEST(alloc_slurm_tasks_per_node) {
  asr_config_t *cfg = cfg_new(ASR_LAUNCHER_AUTO);
  char err[512];
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=42", "SLURM_JOB_NODELIST=n[1-3]", "SLURM_TASKS_PER_NODE=2(x2),1",
                   "SLURM_NTASKS_PER_NODE=9", "PBS_NODEFILE=/nonexistent"),
            ASR_ALLOC_SLURM);
  EXPECT_CFG_HOSTS(cfg, "n1:2", "n2:2", "n3:1");
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_SLURM);
  ASSERT_STREQ(cfg->hostfile, "");
  cfg_del(cfg);

  cfg = cfg_new(ASR_LAUNCHER_SLURM); /* asked for explicitly */
  ASSERT_EQ(
      DETECT(cfg, err, "SLURM_JOB_ID=42", "SLURM_JOB_NODELIST=r[1-2]-n[1-2]", "SLURM_TASKS_PER_NODE=4(x4)"),
      ASR_ALLOC_SLURM);
  EXPECT_CFG_HOSTS(cfg, "r1-n1:4", "r1-n2:4", "r2-n1:4", "r2-n2:4");
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_SLURM);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(alloc_slurm_fallbacks) {
  asr_config_t *cfg = cfg_new(ASR_LAUNCHER_AUTO);
  char err[512];
  /* SLURM_NODELIST when SLURM_JOB_NODELIST is unset; SLURM_NTASKS_PER_NODE for every node */
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=42", "SLURM_NODELIST=a,b", "SLURM_NTASKS_PER_NODE=3"),
            ASR_ALLOC_SLURM);
  EXPECT_CFG_HOSTS(cfg, "a:3", "b:3");
  cfg_del(cfg);

  /* SLURM_JOB_NODELIST wins over SLURM_NODELIST (a step's list) */
  cfg = cfg_new(ASR_LAUNCHER_AUTO);
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=42", "SLURM_NODELIST=a", "SLURM_JOB_NODELIST=b,c"),
            ASR_ALLOC_SLURM);
  EXPECT_CFG_HOSTS(cfg, "b:0", "c:0"); /* no counts: the mapper's rule (--lnc-per-host, else 1) */
  cfg_del(cfg);

  /* an empty SLURM_TASKS_PER_NODE counts as unset */
  cfg = cfg_new(ASR_LAUNCHER_AUTO);
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=42", "SLURM_JOB_NODELIST=b",
                   "SLURM_TASKS_PER_NODE=", "SLURM_NTASKS_PER_NODE=2"),
            ASR_ALLOC_SLURM);
  EXPECT_CFG_HOSTS(cfg, "b:2");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(alloc_slurm_slots_capped_at_128) {
  asr_config_t *cfg = cfg_new(ASR_LAUNCHER_AUTO);
  char err[512];
  ASSERT_EQ(
      DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-3]", "SLURM_TASKS_PER_NODE=256,128,129"),
      ASR_ALLOC_SLURM);
  EXPECT_CFG_HOSTS(cfg, "n1:128", "n2:128", "n3:128");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(alloc_slurm_errors_leave_cfg_alone) {
  asr_config_t *cfg = cfg_new(ASR_LAUNCHER_AUTO);
  char err[512];
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-3]", "SLURM_TASKS_PER_NODE=2(x2)"),
            ASR_ECONFIG);
  ASSERT_STREQ(
      err,
      "SLURM_TASKS_PER_NODE '2(x2)' gives 2 task counts but SLURM_JOB_NODELIST has 3 nodes; they must "
      "match one for one");
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[3-1]"), ASR_ECONFIG);
  ASSERT_STREQ(err, "SLURM_JOB_NODELIST 'n[3-1]': range '3-1' goes downwards (LO must not exceed HI)");
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_NODELIST=n[1-2", "PBS_NODEFILE=/x"), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "SLURM_NODELIST 'n[1-2': '[' without a matching ']'");
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=a", "SLURM_TASKS_PER_NODE=x"),
            ASR_ECONFIG);
  ASSERT_STREQ(err, "SLURM_TASKS_PER_NODE 'x': 'x' is not COUNT or COUNT(xREPEAT)");
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=a", "SLURM_NTASKS_PER_NODE=2(x1)"),
            ASR_ECONFIG);
  ASSERT_STREQ(err, "SLURM_NTASKS_PER_NODE '2(x1)': not one number");
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=a,b", "SLURM_NTASKS_PER_NODE=0"),
            ASR_ECONFIG);
  ASSERT_CONTAINS(err, "SLURM_NTASKS_PER_NODE '0': '0': counts and repeats must be at least 1");
  /* names are checked as -H checks them */
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=a;b"), ASR_ECONFIG);
  ASSERT_STREQ(err, "SLURM_JOB_NODELIST: 'a;b' is not a host name (letters, digits, '-', '.', '_')");
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-2],n2"), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "SLURM_JOB_NODELIST: host 'n2' is listed twice");
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-1025]"), ASR_ECONFIG);
  ASSERT_STREQ(err, "SLURM_JOB_NODELIST: more than 1024 hosts");
  char longname[200];
  memset(longname, 'x', 150);
  strcpy(longname + 150, "[1-2]");
  char var[256];
  snprintf(var, sizeof var, "SLURM_JOB_NODELIST=%s", longname);
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", var), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "is longer than 127 bytes");
  /* nothing was changed by any of them */
  ASSERT_EQ(cfg->nhosts, 0);
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_AUTO);
  /* the largest allowed works */
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-1024]"), ASR_ALLOC_SLURM);
  ASSERT_EQ(cfg->nhosts, 1024);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(alloc_launcher_slurm_needs_an_allocation) {
  asr_config_t *cfg = cfg_new(ASR_LAUNCHER_SLURM);
  char err[512];
  const char *want =
      "launcher slurm needs a Slurm allocation, but SLURM_JOB_ID and SLURM_JOB_NODELIST are not both set: "
      "run "
      "asrrun inside salloc or sbatch, or choose another launcher";
  ASSERT_EQ(DETECT(cfg, err, "PBS_NODEFILE=/x"), ASR_ECONFIG);
  ASSERT_STREQ(err, want);
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1"), ASR_ECONFIG);
  ASSERT_STREQ(err, want);
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_NODELIST=a"), ASR_ECONFIG);
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=", "SLURM_JOB_NODELIST=a"), ASR_ECONFIG); /* empty = unset */
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST="), ASR_ECONFIG);
  /* even with hosts given: srun needs an allocation */
  ASSERT_OK(asr_config_parse_hostlist(cfg, "a,b", err, sizeof err));
  ASSERT_EQ(DETECT(cfg, err, "HOME=/"), ASR_ECONFIG);
  ASSERT_STREQ(err, want);
  EXPECT_CFG_HOSTS(cfg, "a:0", "b:0");
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_SLURM);
  /* inside one, given hosts are kept */
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-4]"), ASR_ALLOC_NONE);
  EXPECT_CFG_HOSTS(cfg, "a:0", "b:0");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(alloc_launcher_local_ignores_allocations) {
  asr_config_t *cfg = cfg_new(ASR_LAUNCHER_LOCAL);
  const char *nodefile = write_file("nodes", "p1\np2\n");
  char err[512], pbs[PATH_MAX + 20];
  snprintf(pbs, sizeof pbs, "PBS_NODEFILE=%s", nodefile);
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-2]", pbs), ASR_ALLOC_NONE);
  ASSERT_EQ(cfg->nhosts, 0);
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_LOCAL);
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[3-1]", "PBS_NODEFILE=/nonexistent"),
            ASR_ALLOC_NONE); /* not even read */
  ASSERT_EQ(cfg->nhosts, 0);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(alloc_explicit_hosts_win) {
  asr_config_t *cfg = cfg_new(ASR_LAUNCHER_AUTO);
  char err[512];
  ASSERT_OK(asr_config_parse_hostlist(cfg, "x:2,y", err, sizeof err));
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-2]", "PBS_NODEFILE=/nonexistent"),
            ASR_ALLOC_NONE);
  EXPECT_CFG_HOSTS(cfg, "x:2", "y:0");
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_AUTO);
  /* a hostfile too */
  const char *hf = write_file("hosts", "h1 slots=3\nh2\n");
  ASSERT_OK(asr_config_read_hostfile(cfg, hf, err, sizeof err));
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-2]"), ASR_ALLOC_NONE);
  EXPECT_CFG_HOSTS(cfg, "h1:3", "h2:0");
  ASSERT_STREQ(cfg->hostfile, hf);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(alloc_pbs) {
  const char *nodefile = write_file("nodes", "p1\np1\np2\np1\n");
  char err[512], pbs[PATH_MAX + 20];
  snprintf(pbs, sizeof pbs, "PBS_NODEFILE=%s", nodefile);
  asr_config_t *cfg = cfg_new(ASR_LAUNCHER_AUTO);
  ASSERT_EQ(DETECT(cfg, err, pbs, "PBS_JOBID=7"), ASR_ALLOC_PBS);
  EXPECT_CFG_HOSTS(cfg, "p1:3", "p2:1");
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_AUTO); /* left as it is */
  cfg_del(cfg);

  cfg = cfg_new(ASR_LAUNCHER_RSH);
  ASSERT_EQ(DETECT(cfg, err, pbs), ASR_ALLOC_PBS);
  EXPECT_CFG_HOSTS(cfg, "p1:3", "p2:1");
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_RSH);
  cfg_del(cfg);

  /* rsh does not take a Slurm allocation's hosts, so PBS's apply */
  cfg = cfg_new(ASR_LAUNCHER_RSH);
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-2]", pbs), ASR_ALLOC_PBS);
  EXPECT_CFG_HOSTS(cfg, "p1:3", "p2:1");
  cfg_del(cfg);

  /* Slurm wins over PBS */
  cfg = cfg_new(ASR_LAUNCHER_AUTO);
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-2]", pbs), ASR_ALLOC_SLURM);
  EXPECT_CFG_HOSTS(cfg, "n1:0", "n2:0");
  cfg_del(cfg);
  check_no_leaks();
}

TEST(alloc_pbs_errors) {
  asr_config_t *cfg = cfg_new(ASR_LAUNCHER_AUTO);
  char err[512], pbs[PATH_MAX + 20];
  snprintf(pbs, sizeof pbs, "PBS_NODEFILE=%s/absent", asr_test_tmpdir());
  ASSERT_EQ(DETECT(cfg, err, pbs), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "cannot open PBS node file '");
  ASSERT_CONTAINS(err, "/absent': No such file or directory");

  /* over 128 slots a host is capped; a bad name is refused as -H refuses it */
  char *lines = malloc(200 * 3 + 16);
  ASSERT(lines);
  lines[0] = '\0';
  for (int i = 0; i < 200; i++) strcat(lines, "b\n");
  strcat(lines, "a\n");
  const char *path = write_file("nodes", lines);
  free(lines);
  snprintf(pbs, sizeof pbs, "PBS_NODEFILE=%s", path);
  ASSERT_EQ(DETECT(cfg, err, pbs), ASR_ALLOC_PBS);
  EXPECT_CFG_HOSTS(cfg, "b:128", "a:1");

  asr_config_t *cfg2 = cfg_new(ASR_LAUNCHER_AUTO);
  path = write_file("bad", "ok\nb@d\n");
  snprintf(pbs, sizeof pbs, "PBS_NODEFILE=%s", path);
  ASSERT_EQ(DETECT(cfg2, err, pbs), ASR_ECONFIG);
  ASSERT_CONTAINS(err, "PBS node file '");
  ASSERT_CONTAINS(err, "/bad': 'b@d' is not a host name");
  ASSERT_EQ(cfg2->nhosts, 0);
  cfg_del(cfg2);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(alloc_none) {
  asr_config_t *cfg = cfg_new(ASR_LAUNCHER_AUTO);
  char err[512];
  ASSERT_EQ(DETECT(cfg, err, "HOME=/"), ASR_ALLOC_NONE);
  ASSERT_EQ(cfg->nhosts, 0);
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_AUTO);
  /* half a Slurm environment is none */
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=5"), ASR_ALLOC_NONE);
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_NODELIST=n1"), ASR_ALLOC_NONE);
  ASSERT_EQ(DETECT(cfg, err, "PBS_NODEFILE="), ASR_ALLOC_NONE);
  ASSERT_EQ(cfg->nhosts, 0);
  cfg->launcher = ASR_LAUNCHER_RSH;
  ASSERT_EQ(DETECT(cfg, err, "SLURM_JOB_ID=5", "SLURM_JOB_NODELIST=n1"), ASR_ALLOC_NONE);
  ASSERT_EQ(cfg->nhosts, 0);
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_RSH);
  cfg_del(cfg);
  check_no_leaks();
}

/* The process environment (the harness forks each case, so setenv is private). */
TEST(alloc_detect_reads_the_environment) {
  static const char *const vars[] = {"SLURM_JOB_ID",         "SLURM_JOB_NODELIST",    "SLURM_NODELIST",
                                     "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "PBS_NODEFILE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  asr_config_t *cfg = cfg_new(ASR_LAUNCHER_AUTO);
  char err[512] = "";
  ASSERT_EQ(asr_alloc_detect(cfg, err, sizeof err), ASR_ALLOC_NONE);
  ASSERT_EQ(cfg->nhosts, 0);
  setenv("SLURM_JOB_ID", "99", 1);
  setenv("SLURM_JOB_NODELIST", "c[07-08]", 1);
  setenv("SLURM_TASKS_PER_NODE", "16(x2)", 1);
  ASSERT_EQ(asr_alloc_detect(cfg, err, sizeof err), ASR_ALLOC_SLURM);
  EXPECT_CFG_HOSTS(cfg, "c07:16", "c08:16");
  ASSERT_EQ(cfg->launcher, ASR_LAUNCHER_SLURM);
  cfg_del(cfg);
  check_no_leaks();
}

TEST(alloc_names) {
  ASSERT_STREQ(asr_alloc_name(ASR_ALLOC_NONE), "none");
  ASSERT_STREQ(asr_alloc_name(ASR_ALLOC_SLURM), "slurm");
  ASSERT_STREQ(asr_alloc_name(ASR_ALLOC_PBS), "pbs");
  ASSERT_STREQ(asr_alloc_name(ASR_ECONFIG), "?");
  ASSERT_STREQ(asr_alloc_name(3), "?");
}

/* ------------------------------------------------------------------------ */
/* The launch backends' answers                                             */
/* ------------------------------------------------------------------------ */

static asr_launch_found_t found(const asr_launch_ops_t *ops, const char *const *env) {
  const asr_launch_env_t e = {fake_getenv, (void *)env};
  return ops->detect(&e);
}
#define FOUND(ops, ...) found((ops), (const char *const[]){__VA_ARGS__, NULL})

TEST(launch_pick_and_ids) {
  ASSERT(asr_launch_pick(ASR_LAUNCHER_LOCAL) == &asr_launch_local);
  ASSERT(asr_launch_pick(ASR_LAUNCHER_RSH) == &asr_launch_rsh);
  ASSERT(asr_launch_pick(ASR_LAUNCHER_SLURM) == &asr_launch_slurm);
  /* auto after asr_alloc_detect: no manager's allocation gave the hosts */
  ASSERT(asr_launch_pick(ASR_LAUNCHER_AUTO) == &asr_launch_rsh);
  /* the JOB's tree_launch: these values are on the wire */
  ASSERT_EQ(asr_launch_rsh.id, 0);
  ASSERT_EQ(asr_launch_slurm.id, 1);
  ASSERT(asr_launch_by_id(0) == &asr_launch_rsh);
  ASSERT(asr_launch_by_id(1) == &asr_launch_slurm);
  ASSERT(asr_launch_by_id(ASR_LAUNCH_LOCAL) == &asr_launch_local);
  ASSERT(asr_launch_by_id(3) == NULL);
  ASSERT(asr_launch_by_id(0xffffffffu) == NULL);
  /* a parent's children are on other hosts: never forked by it */
  ASSERT(asr_launch_for_children(&asr_launch_local) == &asr_launch_rsh);
  ASSERT(asr_launch_for_children(&asr_launch_rsh) == &asr_launch_rsh);
  ASSERT(asr_launch_for_children(&asr_launch_slurm) == &asr_launch_slurm);
  for (const asr_launch_ops_t *const *b = asr_launch_backends; *b; b++) {
    ASSERT((*b)->name && (*b)->start && (*b)->ended);
    ASSERT(asr_launch_by_id((*b)->id) == *b);
    ASSERT(asr_launch_pick((*b)->launcher) == *b);
    /* a resource manager comes with its node list and its error */
    ASSERT_EQ(!(*b)->detect, !(*b)->nodes);
    ASSERT_EQ(!(*b)->detect, !(*b)->needs);
    ASSERT_EQ(!(*b)->detect, !(*b)->alloc_kind);
  }
}

TEST(launch_forks_here) {
  char me[256] = "";
  ASSERT_OK(gethostname(me, sizeof me - 1));
  /* local: every host is this one */
  ASSERT(asr_launch_forks_here(&asr_launch_local, "elsewhere.invalid", me));
  /* rsh: this host's names only */
  ASSERT(asr_launch_forks_here(&asr_launch_rsh, "localhost", me));
  ASSERT(asr_launch_forks_here(&asr_launch_rsh, me, me));
  ASSERT(!asr_launch_forks_here(&asr_launch_rsh, "elsewhere.invalid", me));
  /* Slurm starts every daemon, this host's too */
  ASSERT(asr_launch_slurm.starts_every_daemon);
  ASSERT(!asr_launch_rsh.starts_every_daemon && !asr_launch_local.starts_every_daemon);
  ASSERT(!asr_launch_forks_here(&asr_launch_slurm, "localhost", me));
  ASSERT(!asr_launch_forks_here(&asr_launch_slurm, me, me));
}

TEST(launch_slurm_detect) {
  ASSERT_EQ(FOUND(&asr_launch_slurm, "SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n1"), ASR_LAUNCH_HERE);
  ASSERT_EQ(FOUND(&asr_launch_slurm, "SLURM_JOB_ID=1", "SLURM_NODELIST=n1"), ASR_LAUNCH_HERE);
  /* part of one, or empty: no allocation, but Slurm's all the same */
  ASSERT_EQ(FOUND(&asr_launch_slurm, "SLURM_JOB_ID=1"), ASR_LAUNCH_HINTED);
  ASSERT_EQ(FOUND(&asr_launch_slurm, "SLURM_NODELIST=n1"), ASR_LAUNCH_HINTED);
  ASSERT_EQ(FOUND(&asr_launch_slurm, "SLURM_JOB_ID=", "SLURM_JOB_NODELIST=n1"), ASR_LAUNCH_HINTED);
  ASSERT_EQ(FOUND(&asr_launch_slurm, "SLURM_JOB_NODELIST="), ASR_LAUNCH_HINTED);
  ASSERT_EQ(FOUND(&asr_launch_slurm, "PBS_NODEFILE=/x", "HOME=/"), ASR_LAUNCH_ABSENT);
}

TEST(launch_slurm_nodes) {
  const char *const env[] = {"SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-2]", "SLURM_TASKS_PER_NODE=3,1", NULL};
  const asr_launch_env_t e = {fake_getenv, (void *)env};
  asr_nodelist_t nl = {0};
  const char *what = NULL;
  char err[256] = "";
  ASSERT_OK(asr_launch_slurm.nodes(&e, &nl, &what, err, sizeof err));
  ASSERT_STREQ(what, "SLURM_JOB_NODELIST");
  ASSERT_EQ(nl.n, 2);
  ASSERT_STREQ(nl.name[0], "n1");
  ASSERT_EQ(nl.slots[0], 3);
  ASSERT_STREQ(nl.name[1], "n2");
  ASSERT_EQ(nl.slots[1], 1);
  asr_nodelist_free(&nl);
  /* an error leaves the list empty and names the variable */
  const char *const bad[] = {"SLURM_JOB_ID=1", "SLURM_NODELIST=n[2-1]", NULL};
  const asr_launch_env_t b = {fake_getenv, (void *)bad};
  ASSERT_EQ(asr_launch_slurm.nodes(&b, &nl, &what, err, sizeof err), ASR_EINVAL);
  ASSERT_CONTAINS(err, "SLURM_NODELIST 'n[2-1]'");
  ASSERT(nl.n == 0 && nl.name == NULL);
  check_no_leaks();
}

/* The words each backend has for a start that ended before asrd called
 * back (the integration and Slurm suites grep for them). */
TEST(launch_ended_messages) {
  char msg[512];
  asr_launch_rsh.ended("h2", "ssh -p 22", 3 << 8, msg, sizeof msg);
  ASSERT_STREQ(
      msg,
      "the launch agent for host h2 (ssh -p 22) ended with status 3 before asrd called back; check that "
      "'ssh -p 22 h2 true' works and that asrd is installed there (--prefix)");
  asr_launch_slurm.ended("n2", "srun", 9, msg, sizeof msg);
  ASSERT_STREQ(
      msg,
      "the srun step for node n2 ended with signal 9 before asrd called back; check that 'srun -N 1 -w "
      "n2 true' works in this allocation and that asrd is installed there (--prefix)");
  asr_launch_local.ended("h1", "ssh", 15, msg, sizeof msg);
  ASSERT_STREQ(msg, "asrd on host h1 died (signal 15) before the job finished");
  asr_launch_local.ended("h1", "ssh", 1 << 8, msg, sizeof msg);
  ASSERT_STREQ(msg, "asrd on host h1 died (status 1) before the job finished");
  ASSERT_STREQ(asr_launch_slurm.agent, "srun");
  ASSERT(asr_launch_rsh.agent == NULL); /* the configured --launch-agent */
}

/* The early daemon's question (the harness forks each case, so setenv is private). */
TEST(alloc_hinted) {
  static const char *const vars[] = {"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "PBS_NODEFILE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  ASSERT_EQ(asr_alloc_hinted(), 0);
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    setenv(vars[i], "", 1); /* set even empty */
    ASSERT_MSG(asr_alloc_hinted() == 1, "%s set", vars[i]);
    unsetenv(vars[i]);
  }
  ASSERT_EQ(asr_alloc_hinted(), 0);
}
