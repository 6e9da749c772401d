/*
 * test_asrrun.c -- integration tests that drive real asrrun jobs.
 *
 * Every case starts bin/asrrun from the build tree (with --timeout as a
 * safety net) and checks what the ranks saw, what asrrun printed, its exit
 * code, and that nothing of the job is left behind. Two tricks:
 *
 *  - ASR_ASRD points asrrun at a "spy" script in the case's private directory
 *    that touches a file and execs the real asrd: whether any daemon was
 *    started is a file test, and the spy's path (in every job process's
 *    environment: asrd inherits asrrun's, the ranks asrd's) identifies this
 *    case's processes in /proc for the leftover checks. (asrrun may start
 *    this host's asrd before it reads its configuration and stop it again
 *    when the job is refused: a refused job must leave nothing behind.)
 *  - Each case runs with TMPDIR in its private directory, so asrd's PMIx
 *    directory can be checked for removal too.
 *
 * Cases: rank/size/LNC/env and -x; a configured bootstrap port; the job
 * secret off every command line;
 * tagged, whole, ordered output; --no-tag-output and --output-dir; the exit
 * code rules (0, a rank's status, 128+signal, 127, 2, 124, PMIx_Abort);
 * signal forwarding (SIGTERM, SIGINT twice, escalation to SIGKILL); no
 * process left after a failure or after the daemon is SIGKILLed; bad flags
 * and bad YAML; bad and unknown environment variables, --list-env; the
 * dry-run map; hwloc bindings as reported and as applied; stdin to rank 0;
 * the pairwise demo; a client that only uses libpmix; libpmix's own lines
 * kept out of the job's output; and a program started without a launcher.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_fs.h"
#include "asr_test.h"

#include "job_util.h"

/* ---------------------------------------------------------------------------------- */
/* 1. what the ranks see                                                              */

TEST_TIMEOUT(rank_env, 40) {
  setup();
  setenv("ASRT_FROM_ENV", "from asrrun's env", 1);
  setenv("ASRT_OVR", "old", 1);
  unsetenv("ASRT_UNSET");
  job_t j;
  RUN(&j, 30000, "--timeout", "25", "-n", "4", "-x", "ASRT_FROM_ENV", "-x", "ASRT_SET=val with spaces", "-x",
      "ASRT_OVR=new", "-x", "ASRT_UNSET", "sh", "-c",
      "echo \"$ASR_RANK|$ASR_SIZE|$ASR_LNC|$ASR_LOCAL_RANK|$ASR_LOCAL_SIZE|$ASR_HOSTNAME|$ASR_BOOTSTRAP_PORT|"
      "$ASR_KV_SERVER|$ASRT_FROM_ENV|$ASRT_SET|$ASRT_OVR|${ASRT_UNSET-unset}\"");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, exists(W.spied)); /* the spy works (the dry-run check relies on it) */
  if (j.errlen) JOB_FAIL(&j, "a successful job printed on stderr");
  int n;
  char **lines = split_lines(j.out, &n);
  if (n != 4) JOB_FAIL(&j, "%d lines, expected one per rank", n);
  int seen[4] = {0}, port = -1;
  for (int i = 0; i < n; i++) {
    const char *rest;
    int tag = tag_of(lines[i], &rest);
    ASSERT_MSG(tag >= 0 && tag < 4, "untagged line '%s'", lines[i]);
    char *copy = strdup(rest), *p = copy, *f[16];
    int nf = 0;
    while (nf < 16 && (f[nf] = strsep(&p, "|"))) nf++;
    ASSERT_MSG(nf == 12, "line '%s' has %d fields", lines[i], nf);
    ASSERT_EQ(atoi(f[0]), tag); /* ASR_RANK matches the tag */
    seen[tag]++;
    ASSERT_STREQ(f[1], "4");
    ASSERT_STREQ(f[2], f[3]); /* one host: LNC == local rank */
    ASSERT_EQ(atoi(f[3]), tag);
    ASSERT_STREQ(f[4], "4");
    ASSERT_STREQ(f[5], my_hostname());
    int pt = atoi(f[6]);
    ASSERT_MSG(pt > 0 && pt < 65536, "bad port '%s'", f[6]);
    if (port < 0) port = pt;
    ASSERT_EQ(pt, port); /* one bootstrap port for all */
    ASSERT_STREQ(f[7], "external");
    ASSERT_STREQ(f[8], "from asrrun's env");
    ASSERT_STREQ(f[9], "val with spaces");
    ASSERT_STREQ(f[10], "new");
    ASSERT_STREQ(f[11], "unset");
    free(copy);
  }
  for (int r = 0; r < 4; r++) ASSERT_EQ(seen[r], 1);
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  assert_tmpdir_clean();
  teardown();
}

/* torchrun's names: every rank sees RANK, LOCAL_RANK, WORLD_SIZE,
 * LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT (one free port for the
 * job, not the bootstrap port; on one host MASTER_ADDR is the ranks' own
 * address, 127.0.0.1); values inherited from asrrun's environment are
 * replaced, and -x wins. GLOO_SOCKET_IFNAME is for jobs over several hosts
 * only (the netns suite's case). */
TEST_TIMEOUT(torchrun_env, 40) {
  setup();
  setenv("RANK", "77", 1); /* inherited: not every rank's */
  setenv("MASTER_ADDR", "10.9.9.9", 1);
  unsetenv("GLOO_SOCKET_IFNAME");
  job_t j;
  const char *prog =
      "echo \"$RANK|$LOCAL_RANK|$WORLD_SIZE|$LOCAL_WORLD_SIZE|$MASTER_ADDR|$MASTER_PORT|"
      "$ASR_BOOTSTRAP_PORT|${GLOO_SOCKET_IFNAME-unset}|$ASR_RANK\"";
  RUN(&j, 30000, "--timeout", "25", "-n", "3", "sh", "-c", prog);
  ASSERT_CODE(&j, 0);
  int n;
  char **lines = split_lines(j.out, &n);
  if (n != 3) JOB_FAIL(&j, "%d lines, expected one per rank", n);
  int port = -1;
  for (int i = 0; i < n; i++) {
    const char *rest;
    int tag = tag_of(lines[i], &rest);
    ASSERT_MSG(tag >= 0 && tag < 3, "untagged line '%s'", lines[i]);
    char *copy = strdup(rest), *p = copy, *f[16];
    int nf = 0;
    while (nf < 16 && (f[nf] = strsep(&p, "|"))) nf++;
    ASSERT_MSG(nf == 9, "line '%s' has %d fields", lines[i], nf);
    ASSERT_EQ(atoi(f[0]), tag);
    ASSERT_STREQ(f[0], f[8]); /* RANK is ASR_RANK */
    ASSERT_EQ(atoi(f[1]), tag);
    ASSERT_STREQ(f[2], "3");
    ASSERT_STREQ(f[3], "3");
    ASSERT_STREQ(f[4], "127.0.0.1");
    int pt = atoi(f[5]);
    ASSERT_MSG(pt > 0 && pt < 65536, "bad MASTER_PORT '%s'", f[5]);
    ASSERT_MSG(pt != atoi(f[6]), "MASTER_PORT is the bootstrap port %d", pt);
    if (port < 0) port = pt;
    ASSERT_EQ(pt, port); /* one for the job */
    ASSERT_STREQ(f[7], "unset");
    free(copy);
  }
  /* the user's -x wins */
  RUN(&j, 30000, "--timeout", "25", "-n", "2", "-x", "MASTER_PORT=29555", "-x", "WORLD_SIZE=9", "-x",
      "MASTER_ADDR", "sh", "-c", "echo \"$MASTER_PORT|$WORLD_SIZE|$MASTER_ADDR|$RANK\"");
  ASSERT_CODE(&j, 0);
  lines = split_lines(j.out, &n);
  if (n != 2) JOB_FAIL(&j, "%d lines, expected one per rank", n);
  for (int i = 0; i < n; i++) {
    const char *rest;
    int tag = tag_of(lines[i], &rest);
    char *want = fmt("29555|9|10.9.9.9|%d", tag);
    ASSERT_STREQ(rest, want);
    free(want);
  }
  unsetenv("RANK");
  unsetenv("MASTER_ADDR");
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

/* A configured bootstrap port is the job's, although this host's asrd was
 * started (holding a port of asrrun's choice) before the configuration was
 * read. */
TEST_TIMEOUT(bootstrap_port_configured, 40) {
  setup();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  ASSERT(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  ASSERT(getsockname(fd, (struct sockaddr *)&a, &al) == 0);
  int port = ntohs(a.sin_port);
  close(fd);
  job_t j;
  RUN(&j, 30000, "--timeout", "25", "-n", "2", "--bootstrap-port", fmt("%d", port), "sh", "-c",
      "echo \"port $ASR_BOOTSTRAP_PORT\"");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, fmt("[0] port %d\n", port)) && strstr(j.out, fmt("[1] port %d\n", port)));
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  assert_tmpdir_clean();
  teardown();
}

/* The job secret: 64 hex digits, the same for every rank, on no command line
 * and in no environment but the ranks'. */
TEST_TIMEOUT(secret_not_visible, 40) {
  setup();
  const char *go = fmt("%s/go", W.dir);
  const char *script = fmt("echo \"$ASR_JOB_SECRET\"; while [ ! -e '%s' ]; do sleep 0.05; done", go);
  const char *const args[] = {"--timeout", "25", "-n", "2", "sh", "-c", script, NULL};
  job_t j;
  job_start(&j, IN_NULL, args);
  JOB_WAIT_LINES(&j, 2, 20000);
  char *copy = strdup(j.out);
  int n;
  char **lines = split_lines(copy, &n);
  const char *s0, *s1;
  ASSERT(tag_of(lines[0], &s0) >= 0 && tag_of(lines[1], &s1) >= 0);
  ASSERT_EQ(strlen(s0), 64);
  for (int i = 0; i < 64; i++) ASSERT_MSG(isxdigit((unsigned char)s0[i]), "secret '%s' is not hex", s0);
  ASSERT_STREQ(s0, s1);
  pid_t asrd = find_asrd(j.pid, 5000);
  ASSERT_MSG(asrd > 0, "no asrd child of asrrun %d", (int)j.pid);
  pid_t who[] = {j.pid, asrd};
  for (int k = 0; k < 2; k++)
    for (int f = 0; f < 2; f++) {
      char path[64];
      snprintf(path, sizeof path, "/proc/%d/%s", (int)who[k], f ? "environ" : "cmdline");
      size_t len = 0;
      char *s = read_file(path, &len);
      ASSERT_MSG(s, "cannot read %s", path);
      for (size_t i = 0; i < len; i++)
        if (!s[i]) s[i] = ' ';
      ASSERT_MSG(!strstr(s, s0), "the job secret is visible in %s (%s)", path, k ? "asrd" : "asrrun");
      free(s);
    }
  write_file(go, "", 0644);
  JOB_FINISH(&j, 20000);
  ASSERT_CODE(&j, 0);
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

/* ---------------------------------------------------------------------------------- */
/* 2. output                                                                          */

#define NLINES 2000
/* One run of the 4-rank output job below, every line checked. */
static void tagged_output_once(void) {
  /* awk writes in 4 KiB blocks, so lines reach asrd cut in the middle. */
  const char *prog =
      "awk -v r=\"$ASR_RANK\" 'BEGIN { p = sprintf(\"%100s\", \"\"); gsub(/ /, \"x\", p);"
      " for (i = 0; i < 2000; i++) printf \"r%d-l%05d-%s\\n\", r, i, p;"
      " printf \"r%d-long-\", r; for (i = 0; i < 200; i++) printf \"%s\", p; printf \"\\n\";"
      " for (i = 0; i < 50; i++) printf \"e%d-%d\\n\", r, i > \"/dev/stderr\" }'";
  job_t j;
  RUN(&j, 45000, "--timeout", "40", "-n", "4", "sh", "-c", prog);
  ASSERT_CODE(&j, 0);
  char pad[101], big[20001];
  memset(pad, 'x', 100);
  pad[100] = '\0';
  memset(big, 'x', 20000);
  big[20000] = '\0';
  int n, next[4] = {0}, longs[4] = {0};
  char **lines = split_lines(j.out, &n);
  if (n != 4 * (NLINES + 1)) JOB_FAIL(&j, "%d stdout lines, expected %d", n, 4 * (NLINES + 1));
  for (int i = 0; i < n; i++) {
    const char *rest;
    int r = tag_of(lines[i], &rest);
    ASSERT_MSG(r >= 0 && r < 4, "stdout line %d is not tagged: '%.60s'", i, lines[i]);
    char want[256];
    if (next[r] < NLINES) {
      snprintf(want, sizeof want, "r%d-l%05d-%s", r, next[r], pad);
      ASSERT_MSG(strcmp(rest, want) == 0, "rank %d line %d is '%.160s', expected '%s'", r, next[r], rest,
                 want);
      next[r]++;
    } else {
      snprintf(want, sizeof want, "r%d-long-", r);
      ASSERT_MSG(strncmp(rest, want, strlen(want)) == 0 && strcmp(rest + strlen(want), big) == 0,
                 "rank %d's 20000-byte line arrived damaged (%zu bytes)", r, strlen(rest));
      longs[r]++;
    }
  }
  for (int r = 0; r < 4; r++) {
    ASSERT_EQ(next[r], NLINES);
    ASSERT_EQ(longs[r], 1);
  }
  /* stderr: tagged, whole, in order per rank */
  int ne, enext[4] = {0};
  char **el = split_lines(j.err, &ne);
  for (int i = 0; i < ne; i++) {
    const char *rest;
    int r = tag_of(el[i], &rest);
    ASSERT_MSG(r >= 0 && r < 4, "stderr line '%s' is not tagged", el[i]);
    char want[64];
    snprintf(want, sizeof want, "e%d-%d", r, enext[r]++);
    ASSERT_STREQ(rest, want);
  }
  for (int r = 0; r < 4; r++) ASSERT_EQ(enext[r], 50);
  ASSERT_NO_LEFTOVERS(NULL, 3000);
}

TEST_TIMEOUT(tagged_output_whole_and_ordered, 60) {
  setup();
  tagged_output_once();
  teardown();
}

/* The long tier: the same job 200 times in a row. A lost line, a reset
 * control connection or a lost DONE shows up as a failure of one run; such
 * races (a close with unread input was one) show only over many runs. */
TEST_LONG(soak_tagged_output_200, 1200) {
  setup();
  for (int i = 0; i < 200; i++) tagged_output_once();
  teardown();
}

/* The long tier: a job of 128 ranks on this host (one per LNC of a
 * full host): every rank joins the job's fence and leaves; rank 0's data
 * reaches rank 1. */
TEST_LONG(large_job_128_ranks, 300) {
  setup();
  job_t j;
  RUN(&j, 280000, "--timeout", "270", "--bind-to", "none", "-n", "128", bin("examples/sendrecv"));
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, "[1] rank 1: received 1048576 bytes from rank 0, all verified\n"));
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

TEST_TIMEOUT(untagged_output_and_output_dir, 60) {
  setup();
  job_t j;
  RUN(&j, 30000, "--timeout", "25", "-n", "3", "--no-tag-output", "sh", "-c",
      "echo \"hello $ASR_RANK\"; echo \"oops $ASR_RANK\" >&2");
  ASSERT_CODE(&j, 0);
  int n;
  char **lines = split_lines(j.out, &n);
  ASSERT_EQ(n, 3);
  int seen[3] = {0};
  for (int i = 0; i < n; i++) {
    int r = -1;
    ASSERT_MSG(sscanf(lines[i], "hello %d", &r) == 1 && r >= 0 && r < 3, "raw line '%s'", lines[i]);
    seen[r]++;
  }
  for (int r = 0; r < 3; r++) ASSERT_EQ(seen[r], 1);
  for (int r = 0; r < 3; r++) ASSERT_EQ(count_substr(j.err, fmt("oops %d\n", r)), 1);
  ASSERT_EQ(count_substr(j.err, "["), 0);

  const char *od = fmt("%s/out", W.dir);
  job_t k;
  RUN(&k, 30000, "--timeout", "25", "-n", "3", "--output-dir", od, "sh", "-c",
      "echo \"out $ASR_RANK\"; echo \"more $ASR_RANK\"; echo \"err $ASR_RANK\" >&2");
  ASSERT_CODE(&k, 0);
  for (int r = 0; r < 3; r++) {
    char *so = read_file(fmt("%s/rank.%d/stdout", od, r), NULL);
    char *se = read_file(fmt("%s/rank.%d/stderr", od, r), NULL);
    ASSERT_MSG(so && se, "no %s/rank.%d/stdout or stderr", od, r);
    ASSERT_CONTAINS(so, fmt("out %d\n", r));
    ASSERT_CONTAINS(strstr(so, fmt("out %d\n", r)), fmt("more %d\n", r)); /* in order */
    ASSERT_CONTAINS(se, fmt("err %d\n", r));
    ASSERT_MSG(!strstr(so, "err") && !strstr(se, "out"), "rank %d: stdout and stderr mixed up", r);
    for (int q = 0; q < 3; q++)
      if (q != r) ASSERT_MSG(!strstr(so, fmt("out %d", q)), "rank %d's file holds rank %d's output", r, q);
    /* "also write each rank's output under DIR" (--help): the terminal still gets it */
    if (!strstr(k.out, fmt("[%d] out %d\n", r, r)) || !strstr(k.err, fmt("[%d] err %d\n", r, r)))
      JOB_FAIL(&k, "with --output-dir, rank %d's output no longer reaches asrrun's stdout/stderr", r);
  }
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

/* ---------------------------------------------------------------------------------- */
/* 3. exit codes                                                                      */

TEST_TIMEOUT(exit_code_rules, 80) {
  setup();
  job_t j;
  RUN(&j, 20000, "--timeout", "15", "-n", "3", "true");
  ASSERT_CODE(&j, 0);
  ASSERT_EQ(j.errlen, 0);

  /* one rank exits 7: 7, the summary names rank, host, status; the rest are killed */
  RUN(&j, 20000, "--timeout", "15", "-n", "4", "sh", "-c", "if [ $ASR_RANK = 2 ]; then exit 7; fi; sleep 12");
  ASSERT_CODE(&j, 7);
  ASSERT_JOB(&j, strstr(j.err, fmt("asrrun: rank 2 on host %s exited with status 7", my_hostname())));
  ASSERT_JOB(&j, j.ms < 8000); /* not the sleep's 12 s */
  ASSERT_NO_LEFTOVERS(NULL, 3000);

  /* a rank killed by SIGKILL: 128+9, and the summary says signal */
  RUN(&j, 20000, "--timeout", "15", "-n", "3", "sh", "-c",
      "if [ $ASR_RANK = 1 ]; then kill -9 $$; fi; sleep 12");
  ASSERT_CODE(&j, 137);
  ASSERT_JOB(&j, strstr(j.err, fmt("rank 1 on host %s was killed by signal 9", my_hostname())));
  ASSERT_JOB(&j, j.ms < 8000);
  ASSERT_NO_LEFTOVERS(NULL, 3000);

  /* --timeout 1 on sleep 30: 124 with a message, soon after 1 s */
  RUN(&j, 20000, "--timeout", "1", "-n", "2", "sleep", "30");
  ASSERT_CODE(&j, 124);
  ASSERT_JOB(&j, strstr(j.err, "timed out"));
  ASSERT_JOB(&j, j.ms >= 900 && j.ms < 6000);
  ASSERT_NO_LEFTOVERS(NULL, 3000);

  /* PMIx_Abort(5, msg) from rank 1 while the others wait in a fence: 5 */
  RUN(&j, 30000, "--timeout", "25", "-n", "3", bin("tests/apps/pmix_client"), "--abort", "1:5");
  ASSERT_CODE(&j, 5);
  ASSERT_JOB(&j, strstr(j.err, "rank 1") && strstr(j.err, "abort") && strstr(j.err, "status 5"));
  ASSERT_JOB(&j, strstr(j.err, "pmix_client was asked to abort"));
  ASSERT_JOB(&j, j.ms < 15000);
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  assert_tmpdir_clean();
  teardown();
}

TEST_TIMEOUT(exit_code_not_found, 30) {
  setup();
  const char *progs[] = {"asrt-no-such-program", "/nonexistent/dir/prog", "./asrt-also-missing"};
  for (int i = 0; i < 3; i++) {
    job_t j;
    RUN(&j, 10000, "--timeout", "10", "-n", "2", progs[i], "arg");
    ASSERT_CODE(&j, 127);
    ASSERT_JOB(&j, strstr(j.err, progs[i]) && strstr(j.err, "not found"));
    /* refused before anything starts: well before --timeout's 10 s (not a
     * speed bound: the margin is for a loaded machine) */
    ASSERT_JOB(&j, j.ms < 8000);
    ASSERT_STARTED_NOTHING();
  }
  /* a file that exists but is not executable is "not found" too */
  const char *noexec = fmt("%s/noexec.sh", W.dir);
  write_file(noexec, "#!/bin/sh\necho hi\n", 0644);
  job_t j;
  RUN(&j, 10000, "--timeout", "10", "-n", "2", noexec);
  ASSERT_CODE(&j, 127);
  ASSERT_STARTED_NOTHING();
  teardown();
}

/* ---------------------------------------------------------------------------------- */
/* 4. signals                                                                         */

TEST_TIMEOUT(sigterm_forwarded, 40) {
  setup();
  const char *const args[] = {"--timeout",
                              "30",
                              "-n",
                              "2",
                              "sh",
                              "-c",
                              "trap 'echo got TERM; exit 3' TERM; echo ready; while :; do sleep 0.05; done",
                              NULL};
  job_t j;
  job_start(&j, IN_NULL, args);
  JOB_WAIT_LINES(&j, 2, 20000);
  kill(j.pid, SIGTERM);
  JOB_FINISH(&j, 15000);
  ASSERT_CODE(&j, 143);
  ASSERT_JOB(&j, strstr(j.out, "[0] got TERM\n") && strstr(j.out, "[1] got TERM\n"));
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

TEST_TIMEOUT(sigint_twice_kills_at_once, 40) {
  setup();
  const char *const args[] = {
      "--timeout", "30", "-n", "2", "sh", "-c", "trap '' INT TERM; echo ready; while :; do sleep 0.05; done",
      NULL};
  job_t j;
  job_start(&j, IN_NULL, args);
  JOB_WAIT_LINES(&j, 2, 20000);
  kill(j.pid, SIGINT);
  sleep_ms(200);
  uint64_t t = now_ms();
  kill(j.pid, SIGINT);
  JOB_FINISH(&j, 15000);
  uint64_t took = now_ms() - t;
  ASSERT_CODE(&j, 130);
  ASSERT_JOB(&j, strstr(j.err, "asrrun: killing the job"));
  ASSERT_JOB(&j, took < 2800); /* SIGKILL at once: under the 3 s grace */
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

TEST_TIMEOUT(sigterm_ignored_escalates_to_kill, 55) {
  setup();
  const char *const args[] = {
      "--timeout", "30", "-n", "2", "sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done",
      NULL};
  job_t j;
  job_start(&j, IN_NULL, args);
  JOB_WAIT_LINES(&j, 2, 20000);
  uint64_t t = now_ms();
  kill(j.pid, SIGTERM);
  JOB_FINISH(&j, 30000);
  uint64_t took = now_ms() - t;
  ASSERT_CODE(&j, 143);
  ASSERT_JOB(&j, took >= 2500 && took < 20000); /* the 3 s grace, then SIGKILL */
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

/* ---------------------------------------------------------------------------------- */
/* 5. nothing left behind                                                             */

/* Ranks start background grandchildren; one rank fails. */
TEST_TIMEOUT(failure_leaves_no_orphans, 45) {
  setup();
  const char *mark = new_marker();
  job_t j;
  RUN(&j, 35000, "--timeout", "25", "-x", mark, "-n", "4", "sh", "-c",
      "sleep 40 & sleep 40 & if [ $ASR_RANK = 3 ]; then sleep 0.3; exit 5; fi; wait");
  ASSERT_CODE(&j, 5);
  ASSERT_JOB(&j, strstr(j.err, "rank 3") && strstr(j.err, "status 5"));
  ASSERT_JOB(&j, j.ms < 10000);
  ASSERT_NO_LEFTOVERS(mark, 3000);
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

/* The same when the failing rank's own background child holds its output
 * open and the rank exits first (its group outlives it). */
TEST_TIMEOUT(timeout_kills_exited_ranks_children, 45) {
  setup();
  const char *mark = new_marker();
  job_t j;
  RUN(&j, 35000, "--timeout", "2", "-x", mark, "-n", "2", "sh", "-c", "sleep 40 & exit 0");
  ASSERT_CODE(&j, 124);
  ASSERT_JOB(&j, j.ms < 10000);
  ASSERT_NO_LEFTOVERS(mark, 3000);
  teardown();
}

/* kill -9 of asrd: asrrun exits 125, the ranks and their children die, and
 * asrrun removes the PMIx directory the daemon left. */
TEST_TIMEOUT(asrd_killed, 45) {
  setup();
  const char *mark = new_marker();
  const char *const args[] = {
      "--timeout", "30", "-x", mark, "-n", "3", "sh", "-c", "sleep 40 & echo ready; wait", NULL};
  job_t j;
  job_start(&j, IN_NULL, args);
  JOB_WAIT_LINES(&j, 3, 20000);
  pid_t asrd = find_asrd(j.pid, 5000);
  ASSERT_MSG(asrd > 0, "no asrd child of asrrun %d", (int)j.pid);
  ASSERT(environ_has(asrd, W.envtag)); /* it is ours */
  kill(asrd, SIGKILL);
  JOB_FINISH(&j, 15000);
  ASSERT_CODE(&j, 125);
  ASSERT_JOB(&j, strstr(j.err, fmt("asrd on host %s", my_hostname())));
  ASSERT_JOB(&j, j.ms < 10000);
  ASSERT_NO_LEFTOVERS(mark, 3000);
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  assert_tmpdir_clean(); /* asrrun removed the PMIx directory asrd could not */
  teardown();
}

/* A daemon that stops answering (SIGSTOP) cannot hold asrrun forever once the
 * job is being killed (by a signal here; --timeout takes the same path): it
 * gives up on the daemon, kills it and its ranks' process groups, and exits. */
TEST_TIMEOUT(stuck_asrd_bounded, 55) {
  setup();
  const char *mark = new_marker();
  const char *const args[] = {
      "--timeout", "40", "-x", mark, "-n", "2", "sh", "-c", "sleep 40 & echo ready; wait", NULL};
  job_t j;
  job_start(&j, IN_NULL, args);
  JOB_WAIT_LINES(&j, 2, 20000);
  pid_t asrd = find_asrd(j.pid, 5000);
  ASSERT_MSG(asrd > 0 && environ_has(asrd, W.envtag), "no asrd of ours under asrrun %d", (int)j.pid);
  kill(asrd, SIGSTOP);
  sleep_ms(100);
  kill(j.pid, SIGTERM);
  JOB_FINISH(&j, 35000); /* grace 3 s, SIGKILL, 3 s more, SHUTDOWN, 5 s, kill asrd */
  ASSERT_CODE(&j, 143);
  ASSERT_JOB(&j, strstr(j.err, "giving up"));
  ASSERT_NO_LEFTOVERS(mark, 3000);
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  assert_tmpdir_clean();
  teardown();
}

/* ---------------------------------------------------------------------------------- */
/* 6. bad input, and the dry-run map                                                  */

TEST_TIMEOUT(bad_command_lines, 40) {
  setup();
  static const char *const bad[][6] = {
      {"--bogus", "-n", "2", "true", NULL},
      {"-n", NULL},
      {"-n", "abc", "true", NULL},
      {"-n", "-3", "true", NULL},
      {"--map-by", "diagonal", "-n", "2", "true", NULL},
      {"--bind-to", "elbow", "-n", "2", "true", NULL},
      {"--timeout", "soon", "-n", "2", "true", NULL},
      {"-n", "2", NULL}, /* no program */
  };
  static const char *const names[] = {"--bogus", "-n", "abc", "-3", "diagonal", "elbow", "soon", "program"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    job_t j;
    job_start(&j, IN_NULL, bad[i]);
    JOB_FINISH(&j, 10000);
    if (j.code != 2) JOB_FAIL(&j, "case %zu (%s): exit %d, expected 2", i, names[i], j.code);
    if (!strstr(j.err, "asrrun:") || !strstr(j.err, names[i]))
      JOB_FAIL(&j, "case %zu: the message does not name '%s'", i, names[i]);
    ASSERT_STARTED_NOTHING();
  }
  teardown();
}

TEST_TIMEOUT(bad_job_yaml, 30) {
  setup();
  const char *y1 = fmt("%s/unknown.yaml", W.dir);
  write_file(y1, "np: 2\nprogram: true\nbogus_key: 3\n", 0644);
  job_t j;
  RUN(&j, 10000, "-f", y1);
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, fmt("%s:3: bogus_key: unknown key", y1)));
  const char *y2 = fmt("%s/badvalue.yaml", W.dir);
  write_file(y2, "# a job\nnp: 2\nbind_to: elbow\nprogram: true\n", 0644);
  RUN(&j, 10000, "-f", y2);
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, fmt("%s:3: bind_to: 'elbow'", y2)));
  RUN(&j, 10000, "-f", fmt("%s/missing.yaml", W.dir));
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, "missing.yaml"));
  ASSERT_STARTED_NOTHING();
  /* a good file runs */
  const char *y3 = fmt("%s/good.yaml", W.dir);
  write_file(y3, "np: 2\ntimeout: 20\nprogram: sh\nargs: [\"-c\", \"echo yaml $ASR_RANK\"]\n", 0644);
  RUN(&j, 25000, "-f", y3);
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, "[0] yaml 0\n") && strstr(j.out, "[1] yaml 1\n"));
  teardown();
}

/* A bad value in asrrun's environment is an error as a bad flag is: exit 2,
 * a message naming the variable and the value, and nothing started -- not
 * even the early local daemon, which asrrun starts before it reads its
 * configuration only when the environment holds no bad setting. The ranks
 * and daemons inherit the environment, so asrrun checks the ASR_* variables
 * they read as well as its own ASRRUN_* ones. */
TEST_TIMEOUT(bad_env_values, 40) {
  setup();
  static const char *const cases[][3] = {
      {"ASRRUN_NP", "abc", "ASRRUN_NP: 'abc' is not a positive number"},
      {"ASRRUN_BIND_TO", "elbow", "ASRRUN_BIND_TO: 'elbow' is not one of none, core, numa, package, auto"},
      {"ASR_INJECT_MAX", "lots", "ASR_INJECT_MAX: 'lots' is not a number"},
      {"ASR_BOOTSTRAP_PORT", "70000", "ASR_BOOTSTRAP_PORT: '70000' is out of range: use 1 to 65535"},
      {"ASR_KV_TIMEOUT_MS", "5s", "ASR_KV_TIMEOUT_MS: '5s' is not a positive number"},
      {"ASR_IF_ADDR", "10.0.0", "ASR_IF_ADDR: '10.0.0' is not an IPv4 address: use A.B.C.D"},
      /* the logger itself can only warn and go on, but asrrun can refuse */
      {"ASR_LOG_LEVEL", "bogus", "ASR_LOG_LEVEL: 'bogus' is not one of error, warn, info, debug, trace"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    setenv(cases[i][0], cases[i][1], 1);
    job_t j;
    RUN(&j, 10000, "-n", "2", "true");
    unsetenv(cases[i][0]);
    if (j.code != 2) JOB_FAIL(&j, "%s=%s: exit %d, expected 2", cases[i][0], cases[i][1], j.code);
    if (!strstr(j.err, fmt("asrrun: %s\n", cases[i][2])))
      JOB_FAIL(&j, "%s=%s: the message is not 'asrrun: %s'", cases[i][0], cases[i][1], cases[i][2]);
    ASSERT_MSG(!exists(W.spied), "%s=%s: asrd was started", cases[i][0], cases[i][1]);
    ASSERT_STARTED_NOTHING();
  }
  /* an empty variable counts as unset */
  setenv("ASRRUN_NP", "", 1);
  job_t j;
  RUN(&j, 20000, "--timeout", "15", "-n", "1", "true");
  unsetenv("ASRRUN_NP");
  ASSERT_CODE(&j, 0);
  teardown();
}

/* An unknown ASRRUN_* variable is an error like an unknown flag (a typo
 * would otherwise go unnoticed: the setting silently keeps its default); an
 * unknown ASR_* one is a warning, printed once, since other programs of the
 * job may read names of their own. */
TEST_TIMEOUT(unknown_env_names, 40) {
  setup();
  job_t j;
  setenv("ASRRUN_BOGUS", "1", 1);
  RUN(&j, 10000, "-n", "2", "true");
  unsetenv("ASRRUN_BOGUS");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, "asrrun: unknown variable ASRRUN_BOGUS; asrrun --list-env lists them\n"));
  ASSERT_MSG(!exists(W.spied), "ASRRUN_BOGUS: asrd was started");
  ASSERT_STARTED_NOTHING();
  setenv("ASRRUN_TIMEOT", "5", 1); /* one letter off ASRRUN_TIMEOUT */
  RUN(&j, 10000, "-n", "2", "true");
  unsetenv("ASRRUN_TIMEOT");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(
      &j, strstr(j.err,
                 "asrrun: unknown variable ASRRUN_TIMEOT (did you mean ASRRUN_TIMEOUT?); asrrun --list-env "
                 "lists them\n"));
  ASSERT_STARTED_NOTHING();
  setenv("ASR_BOGUS_SETTING", "1", 1);
  RUN(&j, 20000, "--timeout", "15", "-n", "2", "true");
  unsetenv("ASR_BOGUS_SETTING");
  ASSERT_CODE(&j, 0);
  ASSERT_EQ(count_substr(j.err, "unknown variable ASR_BOGUS_SETTING"), 1);
  ASSERT_JOB(
      &j,
      strstr(j.err, "asrrun: warning: unknown variable ASR_BOGUS_SETTING; asrrun --list-env lists them\n"));
  teardown();
}

/* asrrun --list-env names every variable of the table (common/asr_env.h),
 * even in an environment that a job would be refused in, and starts nothing. */
TEST_TIMEOUT(list_env, 30) {
  setup();
  setenv("ASRRUN_NP", "abc", 1);
  setenv("ASRRUN_BOGUS", "1", 1);
  job_t j;
  RUN(&j, 10000, "--list-env");
  ASSERT_CODE(&j, 0);
  for (int i = 0; i < ASR_ENV__COUNT; i++) {
    const asr_env_row_t *r = asr_env_row((asr_env_id_t)i);
    if (!strstr(j.out, fmt("\n%s%s\n", r->name, r->who & ASR_ENV_FAMILY ? "*" : "")))
      JOB_FAIL(&j, "--list-env does not list %s", r->name);
  }
  ASSERT_JOB(&j, strstr(j.out, "\nNEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT\n    alias of ASR_BOOTSTRAP_PORT"));
  RUN(&j, 10000, "--list-env=markdown");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strncmp(j.out, "| Variable | Type | Default | Read by | Meaning |\n", 50) == 0);
  ASSERT_EQ(count_substr(j.out, "\n| `"), ASR_ENV__COUNT + 1); /* a line per row and alias */
  RUN(&j, 10000, "--list-env=yaml");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, "asrrun: --list-env: 'yaml' is not one of text, markdown\n"));
  unsetenv("ASRRUN_NP");
  unsetenv("ASRRUN_BOGUS");
  RUN(&j, 10000, "--help");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, "\n  --list-env[=markdown] "));
  ASSERT_MSG(!exists(W.spied), "--list-env or --help started asrd");
  ASSERT_STARTED_NOTHING();
  teardown();
}

TEST_TIMEOUT(dry_run_map, 30) {
  setup();
  job_t j;
  RUN(&j, 10000, "--dry-run", "-n", "6", "-H", "a:2,b:4", "--map-by", "node", "prog");
  ASSERT_CODE(&j, 0);
  static const char *const by_node[] = {"a 0", "b 0", "a 1", "b 1", "b 2", "b 3"};
  for (int r = 0; r < 6; r++) {
    char h[8];
    int l;
    sscanf(by_node[r], "%7s %d", h, &l);
    if (!strstr(j.out, fmt("rank %d -> host %s lnc %d\n", r, h, l))) JOB_FAIL(&j, "map-by node: rank %d", r);
  }
  ASSERT_EQ(count_substr(j.out, " -> host "), 6);
  RUN(&j, 10000, "--dry-run", "-n", "6", "-H", "a:2,b:4", "--map-by", "slot", "prog");
  ASSERT_CODE(&j, 0);
  static const char *const by_slot[] = {"a 0", "a 1", "b 0", "b 1", "b 2", "b 3"};
  for (int r = 0; r < 6; r++) {
    char h[8];
    int l;
    sscanf(by_slot[r], "%7s %d", h, &l);
    if (!strstr(j.out, fmt("rank %d -> host %s lnc %d\n", r, h, l))) JOB_FAIL(&j, "map-by slot: rank %d", r);
  }
  /* more ranks than slots is an error, not a silent shrink */
  RUN(&j, 10000, "--dry-run", "-n", "7", "-H", "a:2,b:4", "prog");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, "7 ranks") && strstr(j.err, "slots"));
  ASSERT_MSG(!exists(W.spied), "a dry run started asrd");
  teardown();
}

/* ---------------------------------------------------------------------------------- */
/* 7. bindings                                                                        */

static char *own_cpus(void) {
  char *st = read_file("/proc/self/status", NULL);
  char *p = strstr(st, "Cpus_allowed_list:");
  ASSERT(p);
  p += strlen("Cpus_allowed_list:");
  while (*p == ' ' || *p == '\t') p++;
  return strndup(p, strcspn(p, "\n"));
}

TEST_TIMEOUT(bindings, 40) {
  setup();
  job_t j;
  /* three ranks may share two cores only with --oversubscribe (a warning then) */
  RUN(&j, 25000, "--timeout", "20", "-n", "3", "--bind-to", "core", "--oversubscribe", "--report-bindings",
      "sh", "-c", "grep Cpus_allowed_list /proc/self/status");
  ASSERT_CODE(&j, 0);
  char *reported[3] = {0}, *actual[3] = {0};
  int n;
  char **el = split_lines(j.err, &n);
  for (int i = 0; i < n; i++) {
    const char *rest;
    if (strncmp(el[i], "asrrun: warning: host ", 22) == 0 && strstr(el[i], "--oversubscribe")) continue;
    int r = tag_of(el[i], &rest), rr, lnc, core;
    char cpus[256];
    if (r < 0 || r >= 3) JOB_FAIL(&j, "stray stderr line '%s'", el[i]);
    if (sscanf(rest, "asrrun: rank %d (host %*[^,], lnc %d) bound to core %d: cpus %255s", &rr, &lnc, &core,
               cpus) != 4)
      JOB_FAIL(&j, "bad binding report '%s'", el[i]);
    ASSERT_EQ(rr, r);
    ASSERT_EQ(lnc, r);
    ASSERT_MSG(!reported[r], "two reports for rank %d", r);
    reported[r] = strdup(cpus);
  }
  int no;
  char **ol = split_lines(j.out, &no);
  for (int i = 0; i < no; i++) {
    const char *rest;
    int r = tag_of(ol[i], &rest);
    ASSERT(r >= 0 && r < 3);
    const char *v = strchr(rest, ':');
    ASSERT(v);
    v++;
    while (*v == ' ' || *v == '\t') v++;
    actual[r] = strdup(v);
  }
  for (int r = 0; r < 3; r++) {
    ASSERT_MSG(reported[r] && actual[r], "rank %d: no report or no affinity line", r);
    ASSERT_MSG(strcmp(reported[r], actual[r]) == 0, "rank %d reported cpus %s but runs on %s", r, reported[r],
               actual[r]);
  }
  /* two ranks on a machine with two or more cores are on different cores */
  char *all = own_cpus();
  if (strcmp(all, reported[0]) != 0 && (strchr(all, ',') || strchr(all, '-')))
    ASSERT_MSG(strcmp(reported[0], reported[1]) != 0, "ranks 0 and 1 share cpus %s", reported[0]);

  RUN(&j, 25000, "--timeout", "20", "-n", "2", "--bind-to", "none", "--report-bindings", "sh", "-c",
      "grep Cpus_allowed_list /proc/self/status");
  ASSERT_CODE(&j, 0);
  for (int r = 0; r < 2; r++) {
    ASSERT_JOB(&j, strstr(j.out, fmt("[%d] Cpus_allowed_list:\t%s\n", r, all)));
    ASSERT_JOB(
        &j, strstr(j.err, fmt("[%d] asrrun: rank %d (host %s, lnc %d) not bound\n", r, r, my_hostname(), r)));
  }
  teardown();
}

/* ---------------------------------------------------------------------------------- */
/* 8. stdin                                                                           */

static const char *const STDIN_PROG = "while read l; do echo \"got:$l\"; done; echo \"eof $ASR_RANK\"";

TEST_TIMEOUT(stdin_to_rank0, 60) {
  setup();
  job_t j;
  const char *const args[] = {"--timeout", "20", "-n", "2", "sh", "-c", STDIN_PROG, NULL};
  job_start(&j, IN_PIPE, args);
  const char *data = "data line 1\nline2\n";
  ASSERT_EQ(write(j.in_fd, data, strlen(data)), (long long)strlen(data));
  JOB_FINISH(&j, 25000); /* closes stdin */
  ASSERT_CODE(&j, 0);
  char *r0 = calloc(1, j.outlen + 1); /* rank 0's lines, in order */
  for (char *p = j.out; (p = strstr(p, "[0] ")); p += 4)
    if (p == j.out || p[-1] == '\n') strncat(r0, p + 4, strcspn(p + 4, "\n") + 1);
  if (strcmp(r0, "got:data line 1\ngot:line2\neof 0\n") != 0) JOB_FAIL(&j, "rank 0 read '%s'", r0);
  ASSERT_JOB(&j, strstr(j.out, "[1] eof 1\n"));
  ASSERT_EQ(count_substr(j.out, "got:"), 2); /* rank 1 got nothing */

  /* 300000 bytes arrive whole */
  const char *const wc[] = {
      "--timeout", "20", "-n", "2", "sh", "-c", "if [ $ASR_RANK = 0 ]; then wc -c; else cat; echo none; fi",
      NULL};
  job_start(&j, IN_PIPE, wc);
  char *blob = malloc(300000);
  memset(blob, 'z', 300000);
  size_t off = 0;
  uint64_t until = now_ms() + 20000;
  while (off < 300000 && now_ms() < until) {
    ssize_t w = write(j.in_fd, blob + off, 300000 - off);
    if (w > 0) off += (size_t)w;
    job_pump(&j, 1);
  }
  ASSERT_EQ(off, 300000);
  JOB_FINISH(&j, 25000);
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, "[0] 300000\n") && strstr(j.out, "[1] none\n"));

  /* stdin closed, or /dev/null: the job still ends */
  job_start(&j, IN_CLOSED, args);
  JOB_FINISH(&j, 25000);
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, "[0] eof 0\n"));
  job_start(&j, IN_NULL, args);
  JOB_FINISH(&j, 25000);
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, "[0] eof 0\n"));

  /* stdin left open by the caller: a job that does not read it still ends */
  const char *const tr[] = {"--timeout", "20", "-n", "2", "true", NULL};
  job_start(&j, IN_PIPE, tr);
  int keep = j.in_fd;
  j.in_fd = -1; /* JOB_FINISH must not close it */
  JOB_FINISH(&j, 25000);
  close(keep);
  ASSERT_CODE(&j, 0);
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

/* ---------------------------------------------------------------------------------- */
/* 9-11. real programs                                                                */

TEST_TIMEOUT(pairwise_demo, 90) {
  setup();
  job_t j;
  RUN(&j, 80000, "--timeout", "75", "-n", "4", bin("examples/pairwise"), "-s", "262144", "-n", "200");
  ASSERT_CODE(&j, 0);
  for (int r = 0; r < 4; r++)
    if (!strstr(j.out, fmt("[%d] rank %d (host %s, lnc %d): connected to 3 peers", r, r, my_hostname(), r)) ||
        count_substr(j.out, fmt("[%d] rank %d (host", r, r)) != 1)
      JOB_FAIL(&j, "rank %d did not report", r);
  ASSERT_EQ(count_substr(j.out, "all verified\n"), 4);
  ASSERT_JOB(&j, strstr(j.out, "[0] rank 0 <-> rank 1: one-way latency ") && strstr(j.out, " bandwidth "));
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  assert_tmpdir_clean();
  teardown();
}

/* examples/sendrecv, the smallest example: rank 0's 1 MiB reaches rank 1
 * verified; a third rank only joins and leaves; one rank is told why not. */
TEST_TIMEOUT(example_sendrecv, 60) {
  setup();
  job_t j;
  RUN(&j, 50000, "--timeout", "45", "-n", "3", bin("examples/sendrecv"));
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, "[1] rank 1: received 1048576 bytes from rank 0, all verified\n"));
  ASSERT_EQ(count_substr(j.out, "all verified"), 1);
  RUN(&j, 50000, "--timeout", "45", "-n", "1", bin("examples/sendrecv"));
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, "sendrecv needs two ranks"));
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

/* One-sided transfers between the ranks of a job (issue 51), on each
 * same-host path: tests/apps/rma_job's pairs write, notify, read back and
 * see a revoked descriptor refused; an odd rank out meets the barriers. */
TEST_TIMEOUT(rma_job_each_path, 120) {
  setup();
  const char *paths[] = {NULL, "ASR_PROVIDER=shm", "ASR_PROVIDER=tcp;ofi_rxm"};
  const char *names[] = {"sm", "shm", "tcp;ofi_rxm"};
  for (int p = 0; p < 3; p++) {
    job_t j;
    if (paths[p])
      RUN(&j, 50000, "--timeout", "45", "-n", "5", "-x", paths[p], bin("tests/apps/rma_job"), "16", "4096");
    else
      RUN(&j, 50000, "--timeout", "45", "-n", "5", bin("tests/apps/rma_job"), "16", "4096");
    ASSERT_CODE(&j, 0);
    char want[96];
    snprintf(want, sizeof want, "rank 0 wrote 16 blocks to rank 1 (%s), verified", names[p]);
    ASSERT_JOB(&j, strstr(j.out, want));
    ASSERT_EQ(count_substr(j.out, "verified"), 2);
    ASSERT_EQ(count_substr(j.out, "revoked, untouched"), 2);
  }
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

/* A rank killed with SIGKILL after opening its LNC runs no exit handler and
 * leaves libfabric's 16 MiB shm region in /dev/shm; asrd removes it once it
 * has reaped the rank (launcher/asrd/asrd_shm.c). Rank 1 (pingpong, which opens
 * LNC 1 and then waits to connect to rank 0) has a background shell wait for
 * its region to appear, say so (the premise), and kill it: its pid is that
 * of the program the shell became. Rank 0 only sleeps, so the job's abort
 * (SIGTERM) meets no libfabric signal handler, which would do what a
 * sanitizer build rightly calls signal-unsafe. */
TEST_TIMEOUT(killed_rank_leaves_no_shm_region, 60) {
  setup();
  job_t j;
  const char *script = fmt(
      "if [ \"$ASR_RANK\" = 1 ]; then r=/dev/shm/$$:$(id -u):0; (i=0; while [ ! -e $r ] && [ $i -lt 1000 ]; "
      "do sleep 0.02; i=$((i+1)); done; [ -e $r ] && echo \"region $r seen\"; kill -9 $$) & "
      "exec '%s' -l 1 -p 0 -r 1 -m lat -s 8 -S 8; else exec sleep 30; fi",
      bin("tests/apps/pingpong"));
  RUN(&j, 50000, "--timeout", "40", "-x", "ASR_PROVIDER=shm", "-n", "2", "sh", "-c", script);
  ASSERT_CODE(&j, 137);
  const char *seen = strstr(j.out, "[1] region /dev/shm/");
  if (!seen) JOB_FAIL(&j, "rank 1 never saw its shm region (the premise)");
  char path[128];
  if (sscanf(seen, "[1] region %127s seen", path) != 1) JOB_FAIL(&j, "cannot read the region's name");
  ASSERT_MSG(access(path, F_OK) != 0, "%s is still there after the job: the killed rank's shm region leaked",
             path);
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

/* The same on the sm path: rank 1's RECV comm made its region in LISTEN
 * (/dev/shm/asrsm:<pid>:<uid>:<lnc>:<n>), which only its sender's mapping
 * unlinks; rank 0 never connects, rank 1 is killed, and asrd removes the
 * region (asrd_shm.c knows the name's form: common/asr_sm_name.h). */
TEST_TIMEOUT(killed_rank_leaves_no_sm_region, 60) {
  setup();
  job_t j;
  const char *script = fmt(
      "if [ \"$ASR_RANK\" = 1 ]; then (i=0; r=; while [ -z \"$r\" ] && [ $i -lt 1000 ]; do "
      "r=$(ls /dev/shm/asrsm:$$:$(id -u):* 2>/dev/null | head -1); [ -z \"$r\" ] && sleep 0.02; i=$((i+1)); "
      "done; [ -n \"$r\" ] && echo \"region $r seen\"; kill -9 $$) & "
      "exec '%s' -l 1 -p 0 -r 1 -m lat -s 8 -S 8; else exec sleep 30; fi",
      bin("tests/apps/pingpong"));
  RUN(&j, 50000, "--timeout", "40", "-n", "2", "sh", "-c", script);
  ASSERT_CODE(&j, 137);
  const char *seen = strstr(j.out, "[1] region /dev/shm/asrsm:");
  if (!seen) JOB_FAIL(&j, "rank 1 never saw its sm region (the premise)");
  char path[160];
  if (sscanf(seen, "[1] region %159s seen", path) != 1) JOB_FAIL(&j, "cannot read the region's name");
  ASSERT_MSG(access(path, F_OK) != 0, "%s is still there after the job: the killed rank's sm region leaked",
             path);
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

TEST_TIMEOUT(pmix_only_client, 80) {
  setup();
  static const int sizes[] = {1, 4, 8};
  for (int s = 0; s < 3; s++) {
    int np = sizes[s];
    job_t j;
    RUN(&j, 30000, "--timeout", "25", "-n", fmt("%d", np), "--bind-to", "none",
        bin("tests/apps/pmix_client"));
    ASSERT_CODE(&j, 0);
    for (int r = 0; r < np; r++) {
      const char *want = fmt(
          "[%d] pmix_client rank %d of %d (local %d of %d, host %s): verified %d of %d peers' keys, all ok\n",
          r, r, np, r, np, my_hostname(), np - 1, np - 1);
      if (!strstr(j.out, want)) JOB_FAIL(&j, "-n %d: no '%s'", np, want);
    }
    int n;
    split_lines(j.out, &n);
    ASSERT_EQ(n, np);
    if (j.errlen) JOB_FAIL(&j, "-n %d: output on stderr", np);
  }
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  assert_tmpdir_clean();
  teardown();
}

/* A PMIx client lost while the others wait in a fence (PMIx_Abort, or an exit
 * without PMIx_Finalize): the status is the rank's, and asrd ends cleanly
 * (libpmix 4.2.2 could crash asrd in PMIx_server_finalize here, now and then,
 * which left its directory behind: checked after each of several runs). */
TEST_TIMEOUT(pmix_client_lost_during_fence, 80) {
  setup();
  for (int i = 0; i < 8; i++) {
    int abort = i % 2 == 0;
    job_t j;
    RUN(&j, 30000, "--timeout", "25", "-n", "3", "--bind-to", "none", bin("tests/apps/pmix_client"),
        abort ? "--abort" : "--exit", abort ? "1:5" : "2:3");
    ASSERT_CODE(&j, abort ? 5 : 3);
    if (abort)
      ASSERT_JOB(&j, strstr(j.err, "rank 1") && strstr(j.err, "called abort with status 5"));
    else
      ASSERT_JOB(&j, strstr(j.err, "rank 2") && strstr(j.err, "exited with status 3"));
    ASSERT_NO_LEFTOVERS(NULL, 3000);
    assert_tmpdir_clean();
  }
  teardown();
}

/* Runs tests/apps/pmix_tool against the PMIx server at uri, and asserts
 * that the server refused it. As user nobody when this runs as root (any
 * local user reaches the server: it listens on loopback TCP), else as
 * ourselves: the tool is refused either way. Its environment holds PATH and
 * TMPDIR=/tmp alone, somewhere any user may make the tool's files. */
static void tool_refused(const char *uri) {
  struct passwd *pw = geteuid() == 0 ? getpwnam("nobody") : NULL;
  int as_nobody = pw && system("command -v setpriv >/dev/null 2>&1") == 0;
  char *reuid = fmt("--reuid=%u", pw ? (unsigned)pw->pw_uid : 0),
       *regid = fmt("--regid=%u", pw ? (unsigned)pw->pw_gid : 0), *tool = (char *)bin("tests/apps/pmix_tool");
  char *const with_setpriv[] = {"setpriv", reuid, regid, "--clear-groups", tool, (char *)uri, NULL},
              *alone[] = {tool, (char *)uri, NULL};
  /* (libpmix leaks in the tool's own process, which the sanitizer builds
   * would report and fail it for: leaks are the daemons' and ranks' to
   * check, setup()'s suppression file is not the tool's to read) */
  char *env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR=/tmp", "ASAN_OPTIONS=detect_leaks=0", NULL};
  int p[2];
  ASSERT(pipe2(p, O_CLOEXEC) == 0);
  fflush(NULL);
  pid_t c = fork();
  ASSERT(c >= 0);
  if (c == 0) {
    dup2(p[1], 1);
    dup2(p[1], 2);
    execvpe(as_nobody ? "setpriv" : tool, as_nobody ? with_setpriv : alone, env);
    _exit(126);
  }
  close(p[1]);
  char *out = asr_test_read_all(p[0], 15000);
  close(p[0]);
  int st = asr_test_wait(c, 15000);
  ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0 && out && strstr(out, "pmix_tool: refused"),
             "pmix_tool%s: status %d: %s", as_nobody ? " as nobody" : "", st, out ? out : "");
}

/* libpmix writes a line of its own, inside asrd, when it refuses a peer:
 * "PMIX ERROR: NOT-SUPPORTED in file ...ptl_base_connection_hdlr.c" for a
 * tool that asks for an identifier, which asrd does not serve. asrd's stderr
 * is the job's, and any local user can be that peer, so the line must never
 * reach the job's output (where it would read as the job's): it goes to
 * asrd's log, at info under "pmix". */
TEST_TIMEOUT(pmix_refused_peer_stays_out_of_output, 60) {
  setup();
  for (int logged = 0; logged < 2; logged++) {
    if (logged) {
      setenv("ASR_LOG_LEVEL", "info", 1);
      setenv("ASR_LOG_SUBSYS", "pmix", 1);
    }
    job_t j;
    /* rank 0 tells its server's URI and waits for stdin to close */
    const char *rank0 = "echo \"uri $PMIX_SERVER_URI41\"; read x; exit 0";
    const char *const args[] = {"--timeout", "40", "-n", "1", "--bind-to", "none", "sh", "-c", rank0, NULL};
    job_start(&j, IN_PIPE, args);
    const char *at;
    uint64_t until = now_ms() + 20000;
    while (!(at = strstr(j.out, "[0] uri ")) || !strchr(at, '\n')) {
      if (j.exited || now_ms() > until) JOB_FAIL(&j, "rank 0 did not print its server's URI");
      job_pump(&j, 20);
    }
    at += strlen("[0] uri ");
    tool_refused(fmt("%.*s", (int)strcspn(at, "\n"), at));
    JOB_FINISH(&j, 20000); /* closes stdin: the rank's read returns */
    ASSERT_CODE(&j, 0);
    if (strstr(j.out, "PMIX") || (!logged && strstr(j.err, "PMIX")))
      JOB_FAIL(&j, "libpmix's line is in the job's output%s", logged ? "" : " (default log level)");
    if (logged) {
      const char *line = strstr(j.err, "PMIX ERROR: NOT-SUPPORTED");
      while (line && line > j.err && line[-1] != '\n') line--;
      if (!line || strncmp(line, "[asr asrd", 9) != 0 || !strstr(line, "] pmix: PMIX ERROR: NOT-SUPPORTED"))
        JOB_FAIL(&j, "asrd's log (ASR_LOG_LEVEL=info) has no pmix line for the refused tool");
    }
  }
  unsetenv("ASR_LOG_LEVEL");
  unsetenv("ASR_LOG_SUBSYS");
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  assert_tmpdir_clean();
  teardown();
}

TEST_TIMEOUT(no_launcher, 30) {
  setup();
  const char *progs[] = {"examples/pairwise", "tests/apps/pmix_client"};
  for (int i = 0; i < 2; i++) {
    char *const argv[] = {(char *)bin(progs[i]), NULL};
    int out, err;
    uint64_t t = now_ms();
    pid_t pid = asr_test_spawn(argv, &out, &err);
    ASSERT(pid > 0);
    char *o = asr_test_read_all(out, 15000), *e = asr_test_read_all(err, 15000);
    int st = asr_test_wait(pid, 15000);
    ASSERT_MSG(st != -1, "%s did not exit", progs[i]);
    ASSERT_MSG(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "%s exited 0 without a launcher", progs[i]);
    ASSERT_MSG(strstr(e, "asrrun"), "%s: the message does not say to use asrrun: '%s'", progs[i], e);
    ASSERT(now_ms() - t < 10000);
    (void)o;
  }
  teardown();
}

/* kill -9 of asrd while a rank holds libfabric's shm region: the rank dies
 * with asrd (PDEATHSIG, SIGKILL: no handler of libfabric's or libasr's runs)
 * and asrd is not there to sweep after it, so asrd's watcher
 * (launcher/asrd/asrd_shm.c) must remove the region once both are gone. Rank 1
 * is pingpong waiting for rank 0 (which only sleeps), so its region stays
 * open until it is killed; a background shell says when it exists. */
TEST_TIMEOUT(asrd_killed_leaves_no_shm_region, 60) {
  setup();
  const char *mark = new_marker();
  const char *script = fmt(
      "if [ \"$ASR_RANK\" = 1 ]; then r=/dev/shm/$$:$(id -u):0; (i=0; while [ ! -e $r ] && [ $i -lt 1000 ]; "
      "do sleep 0.02; i=$((i+1)); done; [ -e $r ] && echo \"region $r seen\") & "
      "exec '%s' -l 1 -p 0 -r 1 -m lat -s 8 -S 8; else exec sleep 30; fi",
      bin("tests/apps/pingpong"));
  const char *const args[] = {"--timeout", "40",   "-x", "ASR_PROVIDER=shm", "-x", mark, "-n", "2", "sh",
                              "-c",        script, NULL};
  job_t j;
  job_start(&j, IN_NULL, args);
  JOB_WAIT_LINES(&j, 1, 25000);
  const char *seen = strstr(j.out, "[1] region /dev/shm/");
  if (!seen) JOB_FAIL(&j, "rank 1 never saw its shm region (the premise)");
  char path[128];
  if (sscanf(seen, "[1] region %127s seen", path) != 1) JOB_FAIL(&j, "cannot read the region's name");
  pid_t asrd = find_asrd(j.pid, 5000);
  ASSERT_MSG(asrd > 0 && environ_has(asrd, W.envtag), "no asrd of ours under asrrun %d", (int)j.pid);
  kill(asrd, SIGKILL);
  JOB_FINISH(&j, 15000);
  ASSERT_CODE(&j, 125);
  /* the watcher works after asrd's death, asynchronously: a bounded wait */
  uint64_t until = now_ms() + 3000;
  while (access(path, F_OK) == 0 && now_ms() < until) sleep_ms(20);
  ASSERT_MSG(access(path, F_OK) != 0, "%s is still there 3 s after asrd was killed: the region leaked", path);
  ASSERT_NO_LEFTOVERS(mark, 3000);
  ASSERT_NO_LEFTOVERS(NULL, 3000); /* the watcher too: it ends once it has swept */
  teardown();
}

/* This machine under two names ("localhost" and its own name, two loopback
 * addresses, a hostfile that lists both, any two hosts under --launcher
 * local) is refused before anything starts, with a message that says so:
 * one asrd serves a machine, and two would both bind the bootstrap port.
 * --dry-run refuses it the same way instead of printing two hosts. */
TEST_TIMEOUT(one_machine_under_two_names, 40) {
  setup();
  job_t j;
  const char *two = fmt("localhost:2,%s:2", my_hostname());
  const char *want =
      fmt("hosts 'localhost' and '%s' are both this machine (%s)", my_hostname(), my_hostname());
  RUN(&j, 10000, "--timeout", "20", "-H", two, "true");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, want) && strstr(j.err, "list it once, with all 4 of its slots"));
  ASSERT_JOB(&j, !strstr(j.err, "Address already in use"));
  ASSERT_STARTED_NOTHING();
  RUN(&j, 10000, "--dry-run", "-H", two, "true");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, want) && j.outlen == 0);
  RUN(&j, 10000, "--timeout", "20", "-H", "127.0.0.1:1,127.0.0.2", "true");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, "hosts '127.0.0.1' and '127.0.0.2' are both this machine") &&
                     strstr(j.err, "all 2 of its slots"));
  const char *hf = fmt("%s/hosts", W.dir);
  write_file(hf, fmt("%s slots=1\nlocalhost slots=3\n", my_hostname()), 0644);
  RUN(&j, 10000, "--timeout", "20", "--hostfile", hf, "true");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, fmt("hosts '%s' and 'localhost' are both this machine", my_hostname())));
  RUN(&j, 10000, "--timeout", "20", "--launcher", "local", "-H", "a:1,b:1", "true");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j,
             strstr(j.err, "hosts 'a' and 'b' are both this machine") && strstr(j.err, "--launcher local"));
  ASSERT_STARTED_NOTHING();
  /* written once, the same slots run */
  RUN(&j, 20000, "--timeout", "15", "-H", fmt("%s:4", my_hostname()), "true");
  ASSERT_CODE(&j, 0);
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

/* ---------------------------------------------------------------------------------- */
/* 13. placement: --npernode/-ppn, --map-by ppr/core/numa/package, --rankfile,        */
/*     --cpus-per-rank, --oversubscribe; the bindings --dry-run shows are asrd's      */

/* The dry run's line for rank r, "rank R (host H, lnc L) ...", or NULL. */
static char *dry_binding(const char *out, int r) {
  const char *p = strstr(out, fmt("\nrank %d (host ", r));
  if (!p) return NULL;
  p++;
  return strndup(p, strcspn(p, "\n"));
}

/* hwloc itself reads HWLOC_SYNTHETIC: asrrun and asrd see the topology it
 * describes, as the ranks' hwloc does. */
TEST_TIMEOUT(placement_dry_run_synthetic, 40) {
  setup();
  job_t j;
  setenv("HWLOC_SYNTHETIC", "pack:2 numa:2 core:2 pu:1", 1);
  RUN(&j, 10000, "--dry-run", "-H", "a:8,b:8", "--map-by", "ppr:2:numa", "--bind-to", "core", "prog");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, "(map-by ppr:2:numa, bind-to core)"));
  ASSERT_EQ(count_substr(j.out, " -> host "), 16);
  ASSERT_JOB(&j, strstr(j.out, "rank 8 -> host b lnc 0\n"));
  ASSERT_JOB(&j, strstr(j.out, "(2 packages, 4 NUMA nodes, 8 cores, 8 PUs)"));
  ASSERT_JOB(&j, strstr(j.out, "\nrank 3 (host a, lnc 3) bound to core 3: cpus 3\n"));
  /* bound to NUMA nodes, 8 ranks share 4: refused, or a warning that says so */
  RUN(&j, 10000, "--dry-run", "-H", "a:8", "--map-by", "ppr:2:numa", "--bind-to", "numa", "prog");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(
      &j, strstr(j.err, "host 'a' runs 8 ranks with --bind-to numa but has 4 NUMA nodes") && j.outlen == 0);
  RUN(&j, 10000, "--dry-run", "-H", "a:8", "--map-by", "ppr:2:numa", "--bind-to", "numa", "--oversubscribe",
      "prog");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.err,
                        "asrrun: warning: host a: 8 ranks share 4 NUMA nodes (--bind-to numa, "
                        "--oversubscribe)\n"));
  ASSERT_JOB(&j, strstr(j.out, "\nrank 5 (host a, lnc 5) bound to numa 2: cpus 4-5\n"));
  /* map by package, bind to cores within; -ppn; --cpus-per-rank */
  RUN(&j, 10000, "--dry-run", "-n", "4", "--map-by", "package", "prog");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, fmt("\nrank 1 (host %s, lnc 1) bound to core 4: cpus 4\n", my_hostname())));
  RUN(&j, 10000, "--dry-run", "-H", "a:4,b:4", "-ppn", "2", "--cpus-per-rank", "4", "--bind-to", "core",
      "prog");
  ASSERT_CODE(&j, 0);
  ASSERT_EQ(count_substr(j.out, " -> host "), 4);
  ASSERT_JOB(&j, strstr(j.out, "rank 2 -> host b lnc 0\n"));
  ASSERT_JOB(&j, strstr(j.out, "\nrank 1 (host a, lnc 1) bound to cores 4-7: cpus 4-7\n"));
  RUN(&j, 10000, "--dry-run", "-H", "a:4", "-ppn", "3", "--cpus-per-rank", "4", "--bind-to", "core", "prog");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, "host 'a' runs 3 ranks of 4 cores (--cpus-per-rank 4) but has 8 cores"));
  /* the same from a job file and from the environment */
  const char *y = fmt("%s/job.yaml", W.dir);
  write_file(y, "hosts: [a:8]\nmap_by: ppr:1:package\nbind_to: package\nprogram: prog\n", 0644);
  RUN(&j, 10000, "--dry-run", "-f", y);
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, "\nrank 1 (host a, lnc 1) bound to package 1: cpus 4-7\n"));
  setenv("ASRRUN_MAP_BY", "ppr:1:numa", 1);
  setenv("ASRRUN_BIND_TO", "numa", 1);
  RUN(&j, 10000, "--dry-run", "-H", "a:8", "prog");
  ASSERT_CODE(&j, 0);
  ASSERT_EQ(count_substr(j.out, " -> host "), 4);
  ASSERT_JOB(&j, strstr(j.out, "\nrank 3 (host a, lnc 3) bound to numa 3: cpus 6-7\n"));
  unsetenv("ASRRUN_MAP_BY");
  unsetenv("ASRRUN_BIND_TO");
  ASSERT_MSG(!exists(W.spied), "a dry run started asrd");
  teardown();
}

/* This machine's own topology: unbound ranks may outnumber its cores (LNCs
 * are not cores), ranks bound to cores may not, unless --oversubscribe. */
TEST_TIMEOUT(placement_oversubscribe_this_host, 40) {
  setup();
  unsetenv("HWLOC_SYNTHETIC");
  job_t j;
  RUN(&j, 10000, "--dry-run", "-n", "100", "--bind-to", "none", "prog");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, j.errlen == 0 && strstr(j.out, "rank 99 ("));
  /* how many cores: the dry run says */
  RUN(&j, 10000, "--dry-run", "-n", "1", "prog");
  ASSERT_CODE(&j, 0);
  const char *c = strstr(j.out, " NUMA node");
  int cores = 0;
  ASSERT_JOB(&j, c && sscanf(strchr(c, ',') + 1, "%d cores", &cores) == 1 && cores > 0);
  if (cores >= 128) SKIP("this host has %d cores: more ranks than cores do not fit one host's LNCs", cores);
  const char *np = fmt("%d", cores + 1);
  RUN(&j, 10000, "--dry-run", "-n", np, "--bind-to", "core", "prog");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, fmt("runs %d ranks with --bind-to core but has %d core", cores + 1, cores)));
  RUN(&j, 10000, "--dry-run", "-n", np, "--bind-to", "core", "--oversubscribe", "prog");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.err, fmt("ranks share %d core", cores)));
  /* the default binds to cores only while each rank has one */
  RUN(&j, 10000, "--dry-run", "-n", np, "prog");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, j.errlen == 0 && strstr(j.out, "lnc 0) not bound\n"));
  /* more ranks than slots */
  RUN(&j, 10000, "--dry-run", "-H", "a:1,b:1", "-n", "3", "prog");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(
      &j, strstr(j.err, "3 ranks requested but only 2 slots on 2 hosts") && strstr(j.err, "--oversubscribe"));
  RUN(&j, 10000, "--dry-run", "-H", "a:1,b:1", "-n", "3", "--bind-to", "none", "--oversubscribe", "prog");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.err, "asrrun: warning: host a: 2 ranks on 1 slot (--oversubscribe)\n"));
  ASSERT_JOB(&j, strstr(j.out, "rank 2 -> host a lnc 1\n"));
  ASSERT_MSG(!exists(W.spied), "a dry run started asrd");
  teardown();
}

TEST_TIMEOUT(placement_rankfile, 40) {
  setup();
  setenv("HWLOC_SYNTHETIC", "pack:2 numa:2 core:2 pu:1", 1);
  job_t j;
  const char *rf = fmt("%s/ranks", W.dir);
  write_file(rf, "# two hosts\nrank 1=b slot=2-3\nrank 0=a slot=0\nrank 2=a slot=5,7\n", 0644);
  RUN(&j, 10000, "--dry-run", "--rankfile", rf, "prog");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, "rank 0 -> host a lnc 0\nrank 1 -> host b lnc 0\nrank 2 -> host a lnc 1\n"));
  ASSERT_JOB(&j, strstr(j.out, "\nrank 1 (host b, lnc 0) bound to cores 2-3: cpus 2-3\n"));
  ASSERT_JOB(&j, strstr(j.out, "\nrank 2 (host a, lnc 1) bound to cores 5,7: cpus 5,7\n"));
  /* a bad line: file:line, nothing started */
  write_file(rf, "rank 0=a slot=0\nrank 1=a slot=x\n", 0644);
  RUN(&j, 10000, "--timeout", "10", "--rankfile", rf, "true");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, fmt("%s:2: slot 'x' is not a core list", rf)));
  ASSERT_STARTED_NOTHING();
  write_file(rf, "rank 0=a slot=0\nrank 1=a slot=0\n", 0644);
  RUN(&j, 10000, "--dry-run", "--rankfile", rf, "prog");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, fmt("%s:2: rank 1 shares core 0 with rank 0 (line 1) on host a", rf)));
  teardown();
}

/* A real job on a synthetic topology whose PUs are this machine's CPUs 0
 * and 1: what asrd binds and reports is what the dry run printed, and what
 * the kernel says each rank may run on. */
TEST_TIMEOUT(placement_asrd_binds_as_dry_run, 60) {
  setup();
  char *all = own_cpus();
  cpu_set_t mine;
  ASSERT(sched_getaffinity(0, sizeof mine, &mine) == 0);
  if (!CPU_ISSET(0, &mine) || !CPU_ISSET(1, &mine)) SKIP("CPUs 0 and 1 are not both ours (we have %s)", all);
  setenv("HWLOC_SYNTHETIC", "pack:2 [numa] core:1 pu:1", 1);
  static const char *const binds[] = {"package", "numa", "core"};
  for (int b = 0; b < 3; b++) {
    job_t d, j;
    RUN(&d, 10000, "--dry-run", "-n", "2", "--bind-to", binds[b], "sh");
    ASSERT_CODE(&d, 0);
    RUN(&j, 25000, "--timeout", "20", "-n", "2", "--bind-to", binds[b], "--report-bindings", "sh", "-c",
        "grep Cpus_allowed_list /proc/self/status");
    ASSERT_CODE(&j, 0);
    for (int r = 0; r < 2; r++) {
      char *want = dry_binding(d.out, r);
      ASSERT_MSG(want, "dry run shows no binding for rank %d:\n%s", r, d.out);
      if (!strstr(j.err, fmt("[%d] asrrun: %s\n", r, want)))
        JOB_FAIL(&j, "--bind-to %s: rank %d: no report '%s'", binds[b], r, want);
      ASSERT_JOB(&j, strstr(want, fmt("bound to %s %d: cpus %d", binds[b], r, r)));
      ASSERT_JOB(&j, strstr(j.out, fmt("[%d] Cpus_allowed_list:\t%d\n", r, r)));
      free(want);
    }
  }
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}
