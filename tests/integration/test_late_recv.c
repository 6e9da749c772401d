/*
 * test_late_recv.c -- no completed send is lost to its sender's exit.
 *
 * Each case runs tests/apps/late_recv under a real asrrun job of two ranks:
 * rank 0 sends, waits for its sends to complete and leaves (asr_job_finalize,
 * or asr_close then asr_job_finalize); rank 1 posts its receives only once
 * the sender has left or is leaving, checks every byte of every message, and
 * then sees its comm turn CONNECTION_ERROR (the sender gone, and only then).
 * On both providers: a hundred messages that complete at the sender before
 * anyone receives them (shm's injected sends up to 4 KiB, rxm's eager ones
 * up to 16 KiB), and more than 1,024 messages of sizes on both sides of
 * shm's 4 KiB inject and rxm's 16 KiB eager limits. On asr's own path (sm)
 * what fits the ring completes at once and the rest waits for the
 * receiver, and the sender's close waits for it to be taken. One more case: a
 * receiver that takes nothing holds the sender's exit for ASR_DRAIN_TIMEOUT_MS
 * only, and the sender says which peer it gave up on.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asr_test.h"
#include "job_util.h"

/* Runs late_recv as asked (its arguments after MODE: HEAD HEAD_SIZES TAIL
 * TAIL_SIZES), with ASR_DRAIN_TIMEOUT_MS=drain_ms, on path prov: a
 * libfabric provider forced, or "sm" / "sm-nocma" (asr's own path, with or
 * without cross-process copies: no provider forced). */
static void late_job(job_t *j, const char *prov, const char *mode, const char *plan, const char *drain_ms) {
  int sm = strncmp(prov, "sm", 2) == 0;
  char *p = strdup(plan), *f[4];
  for (int i = 0; i < 4; i++) f[i] = strsep(&p, " ");
  ASSERT(f[3]);
  const char *mark = fmt("%s/sent-%s", W.dir, new_marker());
  const char *args[] = {"--timeout", "100", "-n", "2", "-x", fmt("ASR_PROVIDER=%s", sm ? "" : prov), "-x",
                        fmt("ASR_SM_CMA=%s", strcmp(prov, "sm-nocma") == 0 ? "false" : "true"), "-x",
                        /* on sm a tail larger than the ring keeps the sender's last
                         * sends from completing (they wait for the receiver), so
                         * its MARK never comes: the receiver waits this long */
                        fmt("LATE_RECV_WAIT_MS=%s", sm ? "500" : "5000"), "-x",
                        fmt("ASR_DRAIN_TIMEOUT_MS=%s", drain_ms), bin("tests/apps/late_recv"), mode, f[0],
                        f[1], f[2], f[3], mark, NULL};
  job_start(j, IN_NULL, args);
  JOB_FINISH(j, 110000);
}

static void late_case(const char *prov, const char *mode, int n, const char *plan) {
  setup();
  job_t j;
  late_job(&j, prov, mode, plan, "20000");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, fmt("[1] rank 1: received %d messages, all verified\n", n)));
  ASSERT_JOB(&j, strstr(j.out, "[1] rank 1: comm CONNECTION_ERROR after the sender left\n"));
  ASSERT_JOB(&j, strstr(j.out, "[0] rank 0: left in "));
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

/* The observed loss: 100 sends completed (injected or eager), the sender
 * left, and only then did the receiver post. */
TEST_TIMEOUT(late_recv_completed_shm, 120) { late_case("shm", "finalize", 100, "0 1 100 1,64,4095,4096"); }
/* On the sm path what does not fit the ring waits in the sender's stash,
 * and its close waits (ASR_DRAIN_TIMEOUT_MS) until the receiver took it. */
TEST_TIMEOUT(late_recv_completed_sm, 120) {
  late_case("sm", "finalize", 100, "0 1 100 1,64,4095,4096,65536");
}
TEST_TIMEOUT(late_recv_completed_sm_nocma, 120) {
  late_case("sm-nocma", "finalize", 100, "0 1 100 1,64,4095,4096,65536");
}
TEST_TIMEOUT(late_recv_completed_tcp, 120) {
  late_case("tcp;ofi_rxm", "finalize", 100, "0 1 100 1,4096,16383,16384");
}

/* More than 1,024 messages, on both sides of both limits, the first 1,000
 * taken as they come and the last 100 (small enough to complete unreceived)
 * once the sender is leaving; the sender closes its LNC, then finalizes. */
#define MIXED "8,4095,4096,4097,16383,16384,16385,65536"
TEST_TIMEOUT(late_recv_mixed_shm, 120) { late_case("shm", "close", 1100, "1000 " MIXED " 100 8,4096"); }
TEST_TIMEOUT(late_recv_mixed_sm, 120) { late_case("sm", "close", 1100, "1000 " MIXED " 100 8,4096"); }
TEST_TIMEOUT(late_recv_mixed_tcp, 120) {
  late_case("tcp;ofi_rxm", "close", 1100, "1000 " MIXED " 100 8,4096,16384");
}

/* A sender that gives up waiting (ASR_DRAIN_TIMEOUT_MS=100) and exits
 * before the receiver posts: the receiver's comm lingers, CONNECTED, and
 * what the sender announced is still taken: on shm the 100 messages its
 * provider had delivered into the receiver's queue, on the sm path the 10
 * of 64 B its ring holds (the region's fin word announces them). */
static void gave_up(const char *prov, int n) {
  setup();
  job_t j;
  late_job(&j, prov, "finalize", fmt("0 1 %d 1,64,4096", n), "100");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(
      &j, strstr(j.out, "[1] rank 1: took 0, receiving the rest after the sender exited (comm CONNECTED)"));
  ASSERT_JOB(&j, strstr(j.out, fmt("[1] rank 1: received %d messages, all verified\n", n)));
  ASSERT_JOB(&j, strstr(j.out, "[1] rank 1: comm CONNECTION_ERROR after the sender left\n"));
  ASSERT_JOB(&j, strstr(j.err, fmt("confirmed it took 0 of the %d messages sent", n)));
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

TEST_TIMEOUT(late_recv_after_sender_gave_up_shm, 60) { gave_up("shm", 100); }
TEST_TIMEOUT(late_recv_after_sender_gave_up_sm, 60) { gave_up("sm", 10); }

/* A receiver that never takes anything: the sender waits ASR_DRAIN_TIMEOUT_MS
 * (here 500 ms) and no longer, naming the peer and what it did not take;
 * on shm, and on the sm path (whose ring holds the 10 messages). */
static void drain_bounded(const char *prov) {
  setup();
  job_t j;
  late_job(&j, prov, "never", "0 1 10 64", "500");
  ASSERT_CODE(&j, 0);
  ASSERT_JOB(&j, strstr(j.out, "[1] rank 1: the sender left\n"));
  const char *left = strstr(j.out, "[0] rank 0: left in ");
  ASSERT_JOB(&j, left);
  long ms = atol(left + strlen("[0] rank 0: left in "));
  ASSERT_MSG(ms >= 400 && ms < 5000, "the sender left after %ld ms, expected about 500", ms);
  ASSERT_JOB(&j, strstr(j.err, "took 0 of the 10 messages sent") && strstr(j.err, "127.0.0.1/lnc 1"));
  ASSERT_NO_LEFTOVERS(NULL, 3000);
  teardown();
}

TEST_TIMEOUT(late_recv_drain_bounded, 60) { drain_bounded("shm"); }
TEST_TIMEOUT(late_recv_drain_bounded_sm, 60) { drain_bounded("sm"); }
