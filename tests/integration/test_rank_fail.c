/*
 * test_rank_fail.c -- jobs that outlive a failure (issue 50), libasr's
 * half: a rank of a 4-rank job dies mid-stream and the three others go on.
 *
 * Each case runs tests/apps/rank_fail (its header says what every rank
 * does and prints) under a real asrrun job, rank 3 the victim, and checks
 * what each survivor printed: both of its comms to the victim failed within
 * 5 s of the death (CONNECTION_ERROR, or a post or test that failed), every
 * request it had in flight to it ended, every message of its other comms
 * was verified, the victim's state read FAILED, each comm to it names rank
 * 3 in asr_comm_error, so did two more comms to it that were still
 * connecting when it died, asr_job_barrier returned ASR_PEER_FAILED within
 * 5 s, and it closed and finalized. The detection time (the later of the two
 * comms, from the death) is printed per survivor, a benchmark figure.
 *
 *   rank_notified_{sm,tcp}  the victim sends its own death's rank-state
 *       event (common/asr_rank_ev.h), as its daemon would, and stays alive
 *       300 ms before it exits 0 without finalizing (--allow-early-exit):
 *       the survivors' comms fail on the event alone, as comms to another
 *       host do, and asr_comm_error is the event's line. Runs with today's
 *       asrrun, whatever its failure policy.
 *   rank_killed_{sm,tcp}    the test SIGKILLs the victim once every rank
 *       printed READY, under asrrun --on-failure continue, which must
 *       absorb the death (exit 0, its last line naming rank 3). On
 *       tcp;ofi_rxm the victim's messages stay eager (at most 8 KiB): a
 *       receive that a survivor posts, between the victim's death and its
 *       comm failing, and that matches a rendezvous or segmented message
 *       the victim sent before it was posted, crashes libfabric 1.17's
 *       rxm (tests/unit/test_peer_kill.c, "posted ahead", says how); no
 *       library above it can close that window, only keep it short.
 *
 * "sm" is the same-host default path (libasr's own), "tcp" forces
 * tcp;ofi_rxm on every comm.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "asr_test.h"
#include "job_util.h"

#define VICTIM 3
#define BOUND_MS 5000

static uint64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The number after `what` on rank r's line that holds it, or fails. */
static uint64_t number_after(job_t *j, int r, const char *what) {
  const char *at = strstr(j->out, fmt("[%d] rank %d: %s", r, r, what));
  if (!at) JOB_FAIL(j, "no line of rank %d with '%s'", r, what);
  at += strlen(fmt("[%d] rank %d: %s", r, r, what));
  return strtoull(at, NULL, 10);
}

/* Pumps the job's output until it holds needle n times, within ms. */
static void wait_for(job_t *j, const char *needle, int n, int ms) {
  uint64_t until = now_ms() + (uint64_t)ms;
  while (count_substr(j->out, needle) < n) {
    if (j->exited && j->out_fd < 0)
      JOB_FAIL(j, "asrrun ended (%d) before %d lines with '%s'", j->code, n, needle);
    if (now_ms() >= until) {
      kill(j->pid, SIGKILL);
      JOB_FAIL(j, "fewer than %d lines with '%s' within %d ms", n, needle, ms);
    }
    job_pump(j, 20);
  }
}

/* What every survivor must have printed; death_ns is when the victim died
 * (CLOCK_MONOTONIC, which the ranks share on this host). want_why, when
 * not NULL, is the error both comms to the victim must give. */
static void check_survivors(job_t *j, uint64_t death_ns, const char *want_why, const char *path) {
  for (int r = 0; r < VICTIM; r++) {
    uint64_t tx = number_after(j, r, "victim tx failed at ");
    const char *rx_at =
        strstr(strstr(j->out, fmt("[%d] rank %d: victim tx failed at ", r, r)), "rx failed at ");
    ASSERT_JOB(j, rx_at);
    uint64_t rx = strtoull(rx_at + strlen("rx failed at "), NULL, 10);
    ASSERT_JOB(j, tx >= death_ns && rx >= death_ns);
    uint64_t tx_ms = (tx - death_ns) / 1000000, rx_ms = (rx - death_ns) / 1000000;
    fprintf(stderr,
            "%s: rank %d saw its comms to rank %d fail %.1f ms (SEND) and %.1f ms (RECV) after the death\n",
            path, r, VICTIM, (double)(tx - death_ns) / 1e6, (double)(rx - death_ns) / 1e6);
    if (tx_ms > BOUND_MS || rx_ms > BOUND_MS)
      JOB_FAIL(j, "rank %d saw the death after %" PRIu64 " / %" PRIu64 " ms", r, tx_ms, rx_ms);
    ASSERT_JOB(j, strstr(j->out, fmt("[%d] rank %d: rank %d FAILED (incarnation 0)", r, r, VICTIM)));
    if (want_why) {
      ASSERT_JOB(j, strstr(j->out, fmt("[%d] rank %d: tx error: %s\n", r, r, want_why)));
      ASSERT_JOB(j, strstr(j->out, fmt("[%d] rank %d: rx error: %s\n", r, r, want_why)));
      ASSERT_JOB(j, strstr(j->out, fmt("[%d] rank %d: connecting comms failed: %s\n", r, r, want_why)));
    }
    uint64_t barrier_ms = number_after(j, r, "barrier ASR_PEER_FAILED in ");
    if (barrier_ms > BOUND_MS) JOB_FAIL(j, "rank %d's barrier took %" PRIu64 " ms", r, barrier_ms);
    uint64_t verified = number_after(j, r, "DONE, ");
    ASSERT_JOB(j, verified > 0);
  }
}

static void rank_notified(const char *prov) {
  setup();
  job_t j;
  const char *args[] = {"--timeout",
                        "60",
                        "-n",
                        "4",
                        "--allow-early-exit",
                        "-x",
                        fmt("ASR_PROVIDER=%s", prov),
                        bin("tests/apps/rank_fail"),
                        "notify",
                        "3",
                        NULL};
  job_start(&j, IN_NULL, args);
  JOB_FINISH(&j, 70000);
  ASSERT_CODE(&j, 0);
  const char *host = my_hostname();
  check_survivors(&j, number_after(&j, VICTIM, "notified at "),
                  fmt("peer rank %d on host %s died: it said so itself", VICTIM, host), *prov ? prov : "sm");
  ASSERT_NO_LEFTOVERS(NULL, 5000);
  teardown();
}

TEST_TIMEOUT(rank_notified_sm, 90) { rank_notified(""); }
TEST_TIMEOUT(rank_notified_tcp, 90) { rank_notified("tcp;ofi_rxm"); }

static void rank_killed(const char *prov, const char *victim_msg, int runs) {
  setup();
  for (int run = 0; run < runs; run++) {
    job_t j;
    const char *args[] = {"--timeout",
                          "60",
                          "-n",
                          "4",
                          "-x",
                          fmt("RF_VICTIM_MSG=%s", victim_msg),
                          "--on-failure",
                          "continue",
                          "-x",
                          fmt("ASR_PROVIDER=%s", prov),
                          bin("tests/apps/rank_fail"),
                          "kill",
                          "3",
                          NULL};
    job_start(&j, IN_NULL, args);
    wait_for(&j, ": READY pid ", 4, 60000);
    pid_t victim = (pid_t)number_after(&j, VICTIM, "READY pid ");
    ASSERT_JOB(&j, victim > 1);
    uint64_t death_ns = mono_ns();
    ASSERT_JOB(&j, kill(victim, SIGKILL) == 0);
    JOB_FINISH(&j, 70000);
    /* the death is absorbed: the survivors finished, and asrrun says so */
    ASSERT_CODE(&j, 0);
    ASSERT_JOB(&j, strstr(j.err, fmt("asrrun: 1 failure, 0 restarts: rank %d (host ", VICTIM)) &&
                       strstr(j.err, "killed by signal 9 (Killed) at "));
    check_survivors(&j, death_ns, NULL, *prov ? prov : "sm");
    ASSERT_NO_LEFTOVERS(NULL, 5000);
  }
  teardown();
}

/* 5 runs of each scenario in the default tier, 100 in the long tier */
TEST_TIMEOUT(rank_killed_sm, 120) { rank_killed("", "65536", 5); }
TEST_TIMEOUT(rank_killed_tcp, 120) { rank_killed("tcp;ofi_rxm", "8192", 5); }
TEST_LONG(rank_killed_sm_100, 1200) { rank_killed("", "65536", 100); }
TEST_LONG(rank_killed_tcp_100, 1200) { rank_killed("tcp;ofi_rxm", "8192", 100); }
