/*
 * test_policy.c -- asrrun's failure policy on one host (issue 50,
 * --on-failure abort|continue|restart, --max-restarts): real jobs of
 * tests/apps/pmix_ft, a plain libpmix client, in which one rank dies. Each
 * scenario runs 5 times (the default tier; tests/netns/failure.sh
 * has the same across hosts). What each asserts:
 *   - under continue, the job goes on: every other rank hears PRRTE's event
 *     and asr's FAILED for the dead rank (pmix_ft bounds each wait at 5 s),
 *     asrrun exits 0 for a death by a signal and with the status of a rank
 *     that exited non-zero, and its last line lists the failure;
 *   - under restart, the rank comes back in place as incarnation 1
 *     (ASR_INCARNATION), the others hear it is ALIVE, and the budget is
 *     kept: once spent, the next failure is handled as under continue;
 *     a libasr rank restarted twice (tests/apps/restart_peer) meets its
 *     peers afresh each time, every byte checked;
 *   - abort stays the default;
 *   - the settings are checked on the command line, in YAML and in the
 *     environment, and continue or restart with libfabric's shm is refused.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_test.h"
#include "job_util.h"

/* Each scenario runs RUNS times in a row in the default tier, and
 * LONG_RUNS times in the long tier (ASR_LONG=1: the 100-run loops). */
#define RUNS 5
#define LONG_RUNS 100

/* The last line of asrrun's stderr (its summary). */
static const char *last_line(const job_t *j) {
  const char *e = j->err, *last = e;
  size_t n = j->errlen;
  while (n && e[n - 1] == '\n') n--;
  for (size_t i = 0; i < n; i++)
    if (e[i] == '\n') last = e + i + 1;
  return last;
}

static void continue_absorbs_a_death_runs(int runs) {
  setup();
  for (int run = 0; run < runs; run++) {
    job_t j;
    RUN(&j, 30000, "--timeout", "25", "--on-failure", "continue", "-n", "3", bin("tests/apps/pmix_ft"),
        "--kill", "1");
    ASSERT_CODE(&j, 0);
    ASSERT_JOB(&j, count_substr(j.out, ": ok\n") == 2);
    ASSERT_JOB(&j,
               strstr(j.out, "[0] pmix_ft rank 0: PMIX_ERR_PROC_ABORTED_BY_SIG for rank 1 (exit code 137)"));
    ASSERT_JOB(&j,
               strstr(j.out, fmt("[2] pmix_ft rank 2: asr rank 1 is FAILED (incarnation 0): peer rank 1 on "
                                 "host %s died: killed by signal 9",
                                 my_hostname())));
    ASSERT_JOB(
        &j, !strncmp(last_line(&j),
                     fmt("asrrun: 1 failure, 0 restarts: rank 1 (host %s, incarnation 0) killed by signal 9",
                         my_hostname()),
                     40));
    ASSERT_JOB(&j, strstr(last_line(&j), "killed by signal 9 (Killed) at "));
    ASSERT_NO_LEFTOVERS(NULL, 3000);
  }
  assert_tmpdir_clean();
  teardown();
}

static void continue_keeps_a_failed_status_runs(int runs) {
  setup();
  for (int run = 0; run < runs; run++) {
    job_t j;
    RUN(&j, 30000, "--timeout", "25", "--on-failure", "continue", "-n", "3", bin("tests/apps/pmix_ft"),
        "--kill", "2", "--exit-status", "3");
    /* an exit of the rank's own counts: the job goes on, and ends with it */
    ASSERT_CODE(&j, 3);
    ASSERT_JOB(&j, count_substr(j.out, ": ok\n") == 2);
    ASSERT_JOB(&j, strstr(j.out, "PMIX_EVENT_PROC_TERMINATED for rank 2 (exit code 3)"));
    ASSERT_JOB(&j,
               strstr(last_line(&j), "rank 2 (host ") && strstr(last_line(&j), "exited with status 3 at "));
    ASSERT_NO_LEFTOVERS(NULL, 3000);
  }
  teardown();
}

static void restart_in_place_runs(int runs) {
  setup();
  for (int run = 0; run < runs; run++) {
    job_t j;
    RUN(&j, 30000, "--timeout", "25", "--on-failure", "restart", "-n", "3", bin("tests/apps/pmix_ft"),
        "--kill", "1", "--expect-restart");
    ASSERT_CODE(&j, 0);
    ASSERT_JOB(&j, count_substr(j.out, ": ok\n") == 3);
    ASSERT_JOB(&j, strstr(j.out, "[1] pmix_ft rank 1: incarnation 1 up\n"));
    ASSERT_JOB(&j, strstr(j.out, "[0] pmix_ft rank 0: asr rank 1 is RESTARTING (incarnation 0)"));
    ASSERT_JOB(&j, strstr(j.out, "[2] pmix_ft rank 2: asr rank 1 is ALIVE (incarnation 1)"));
    ASSERT_JOB(&j, strstr(j.err, "restarting it as incarnation 1 (2 restarts left)"));
    ASSERT_JOB(&j, strstr(last_line(&j), "asrrun: 1 failure, 1 restart: rank 1 (host ") &&
                       strstr(last_line(&j), ", restarted"));
    ASSERT_NO_LEFTOVERS(NULL, 3000);
  }
  assert_tmpdir_clean();
  teardown();
}

static void restart_budget_is_kept_runs(int runs) {
  setup();
  for (int run = 0; run < runs; run++) {
    job_t j;
    /* every incarnation of rank 2 dies: two restarts, then it stays failed;
     * deaths by a signal do not count against the exit status */
    RUN(&j, 30000, "--timeout", "25", "--on-failure", "restart", "--max-restarts", "2", "-n", "3",
        bin("tests/apps/pmix_ft"), "--kill", "2", "--always");
    ASSERT_CODE(&j, 0);
    ASSERT_JOB(&j, strstr(j.out, "[2] pmix_ft rank 2: incarnation 2 up\n"));
    ASSERT_JOB(&j, !strstr(j.out, "incarnation 3 up"));
    ASSERT_JOB(&j, strstr(j.err, "the job goes on without it (no restart left)"));
    ASSERT_JOB(&j, !strncmp(last_line(&j), "asrrun: 3 failures, 2 restarts: rank 2 (host ", 45));
    ASSERT_JOB(&j, strstr(last_line(&j), "incarnation 2) killed by signal 9 (Killed) at "));
    ASSERT_NO_LEFTOVERS(NULL, 3000);
  }
  teardown();
}

/* libasr: a rank restarted twice meets its peers afresh each time (its
 * own rendezvous, the survivors' reconnection), every byte checked */
static void restart_reconnects_runs(int runs) {
  setup();
  for (int run = 0; run < runs; run++) {
    job_t j;
    RUN(&j, 30000, "--timeout", "25", "--on-failure", "restart", "-n", "3", bin("tests/apps/restart_peer"),
        "1", "2");
    ASSERT_CODE(&j, 0);
    ASSERT_JOB(&j, count_substr(j.out, ": ok\n") == 3);
    for (int inc = 0; inc <= 2; inc++)
      for (int r = 0; r < 3; r++)
        ASSERT_JOB(&j, strstr(j.out, fmt("[%d] restart_peer rank %d: incarnation %d: 32 messages verified\n",
                                         r, r, inc)));
    ASSERT_JOB(&j, strstr(last_line(&j), "asrrun: 2 failures, 2 restarts: rank 1 (host "));
    ASSERT_NO_LEFTOVERS(NULL, 3000);
  }
  assert_tmpdir_clean();
  teardown();
}

/* asrrun --status of a running job names a restarted rank's incarnation */
TEST_TIMEOUT(status_shows_restarts, 60) {
  setup();
  const char *hold = fmt("%s/hold", W.dir);
  job_t j, s;
  const char *const args[] = {
      "--timeout", "25", "--on-failure",     "restart", "-n", "3", bin("tests/apps/pmix_ft"),
      "--kill",    "1",  "--expect-restart", "--hold",  hold, NULL};
  job_start(&j, IN_NULL, args);
  while (count_substr(j.out, ": heard\n") < 2 && !j.exited && now_ms() - j.t0 < 20000) job_pump(&j, 100);
  ASSERT_JOB(&j, count_substr(j.out, ": heard\n") == 2);
  const char *const sargs[] = {"--status", fmt("%d", (int)j.pid), NULL};
  job_start(&s, IN_NULL, sargs);
  JOB_FINISH(&s, 30000);
  write_file(hold, "", 0644);
  JOB_FINISH(&j, 30000);
  ASSERT_CODE(&j, 0);
  ASSERT_CODE(&s, 0);
  ASSERT_JOB(&s, strstr(s.out, ", lnc 1): exited with status 0; incarnation 1 (restarted 1 time)") ||
                     strstr(s.out, "; incarnation 1 (restarted 1 time)"));
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

TEST_TIMEOUT(abort_is_the_default, 60) {
  setup();
  job_t j;
  RUN(&j, 30000, "--timeout", "25", "-n", "3", bin("tests/apps/pmix_ft"), "--kill", "1");
  ASSERT_CODE(&j, 137);
  ASSERT_JOB(&j, strstr(j.err, fmt("rank 1 on host %s was killed by signal 9", my_hostname())));
  ASSERT_JOB(&j, !strstr(j.err, "failure, "));
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

TEST_TIMEOUT(policy_settings_checked, 60) {
  setup();
  job_t j;
  RUN(&j, 10000, "--on-failure", "sometimes", "-n", "1", "true");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, "--on-failure: 'sometimes' is not one of abort, continue, restart"));
  RUN(&j, 10000, "--max-restarts", "-1", "-n", "1", "true");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, "--max-restarts"));
  /* libfabric's shm cannot keep a survivor out of a dead peer's lock */
  RUN(&j, 10000, "--on-failure", "continue", "--provider", "shm", "-n", "1", "true");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(
      &j, strstr(j.err, "--on-failure continue with libfabric's shm provider (--provider=shm) is refused"));
  RUN(&j, 10000, "--on-failure", "restart", "-x", "ASR_PROVIDER=shm", "-n", "1", "true");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j,
             strstr(j.err, "(-x ASR_PROVIDER=shm) is refused") && strstr(j.err, "asr's own same-host path"));
  ASSERT_STARTED_NOTHING();
  const char *yaml = fmt("%s/job.yaml", W.dir);
  write_file(yaml, "on_failure: never\n", 0644);
  RUN(&j, 10000, "-f", yaml, "-n", "1", "true");
  ASSERT_CODE(&j, 2);
  ASSERT_JOB(&j, strstr(j.err, "on_failure") && strstr(j.err, "'never'"));
  /* YAML and the environment set it as the flag does */
  write_file(yaml, "on_failure: continue\nmax_restarts: 1\n", 0644);
  RUN(&j, 30000, "--timeout", "25", "-f", yaml, "-n", "2", bin("tests/apps/pmix_ft"), "--kill", "1");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(last_line(&j), "asrrun: 1 failure, 0 restarts"));
  setenv("ASRRUN_ON_FAILURE", "restart", 1);
  RUN(&j, 30000, "--timeout", "25", "-n", "2", bin("tests/apps/pmix_ft"), "--kill", "1", "--expect-restart");
  unsetenv("ASRRUN_ON_FAILURE");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(last_line(&j), "asrrun: 1 failure, 1 restart"));
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

/* --- the cases: each scenario RUNS times, and LONG_RUNS in the long tier ---------------- */

TEST_TIMEOUT(continue_absorbs_a_death, 120) { continue_absorbs_a_death_runs(RUNS); }
TEST_LONG(continue_absorbs_a_death_100, 1200) { continue_absorbs_a_death_runs(LONG_RUNS); }
TEST_TIMEOUT(continue_keeps_a_failed_status, 120) { continue_keeps_a_failed_status_runs(RUNS); }
TEST_LONG(continue_keeps_a_failed_status_100, 1200) { continue_keeps_a_failed_status_runs(LONG_RUNS); }
TEST_TIMEOUT(restart_in_place, 120) { restart_in_place_runs(RUNS); }
TEST_LONG(restart_in_place_100, 1200) { restart_in_place_runs(LONG_RUNS); }
TEST_TIMEOUT(restart_budget_is_kept, 120) { restart_budget_is_kept_runs(RUNS); }
TEST_LONG(restart_budget_is_kept_100, 1200) { restart_budget_is_kept_runs(LONG_RUNS); }
TEST_TIMEOUT(restart_reconnects, 120) { restart_reconnects_runs(RUNS); }
TEST_LONG(restart_reconnects_100, 1200) { restart_reconnects_runs(LONG_RUNS); }
