/*
 * test_job_ranks.c -- the table of every rank's state (bootstrap/job_ranks.c;
 * issue 50): what a rank-state event does to it, fed straight to
 * asr__job_ranks_apply as the PMIx handler would (no PMIx server here: the
 * handler's registration fails, with a warning, and the table stays).
 * Each case runs in a process of its own (the harness forks), so each starts
 * with no table and no deaths.
 */
#include "config.h"

#include <string.h>

#include "asr_err.h"
#include "asr_test.h"
#include "job.h"

static int hooked;
static void hook(void) { hooked++; }

static void expect(int rank, int state, int inc) {
  int s = -1, i = -1;
  ASSERT_EQ(asr_job_rank_state(rank, &s, &i), ASR_SUCCESS);
  ASSERT_MSG(s == state && i == inc, "rank %d: state %d incarnation %d, want %d %d", rank, s, i, state, inc);
}

/* Before asr_job_init, for a bad rank and for NULL outputs: ASR_INVALID,
 * nothing written. */
TEST(rank_state_refuses_what_it_cannot_answer) {
  int s = 42, i = 42;
  ASSERT_EQ(asr_job_rank_state(0, &s, &i), ASR_INVALID);
  ASSERT_EQ(asr__job_ranks_init("ns", 4, 1, 0), 0);
  ASSERT_EQ(asr_job_rank_state(4, &s, &i), ASR_INVALID);
  ASSERT_EQ(asr_job_rank_state(-1, &s, &i), ASR_INVALID);
  ASSERT_EQ(asr_job_rank_state(0, NULL, &i), ASR_INVALID);
  ASSERT_EQ(asr_job_rank_state(0, &s, NULL), ASR_INVALID);
  ASSERT(s == 42 && i == 42);
  expect(0, ASR_RANK_ALIVE, 0);
  asr__job_ranks_fini();
  ASSERT_EQ(asr_job_rank_state(0, &s, &i), ASR_INVALID);
}

/* A death is recorded once per incarnation, with its line, and calls the
 * hook; the barrier's live list leaves the dead out but never this rank. */
TEST(a_death_is_recorded_once) {
  asr__job_on_death(hook);
  ASSERT_EQ(asr__job_ranks_init("ns", 4, 1, 0), 0);
  ASSERT_EQ(asr__job_deaths(), 0u);
  ASSERT_EQ(asr__job_ranks_apply(3, ASR_RANK_FAILED, 0, "peer rank 3 on host h died: killed by signal 9"), 1);
  ASSERT_EQ(asr__job_ranks_apply(3, ASR_RANK_FAILED, 0, "again"), 0);
  ASSERT_EQ(asr__job_deaths(), 1u);
  ASSERT_EQ(hooked, 1);
  asr_job_death_t d;
  ASSERT_EQ(asr__job_death(0, &d), 0);
  ASSERT(d.rank == 3 && d.incarnation == 0);
  ASSERT_STREQ(d.why, "peer rank 3 on host h died: killed by signal 9");
  ASSERT_EQ(asr__job_death(1, &d), ASR_ENOTFOUND);
  expect(3, ASR_RANK_FAILED, 0);
  /* no way back to ALIVE at the same incarnation */
  ASSERT_EQ(asr__job_ranks_apply(3, ASR_RANK_ALIVE, 0, NULL), 0);
  expect(3, ASR_RANK_FAILED, 0);
  int live[4], n = -1;
  ASSERT_EQ(asr__job_ranks_live(live, &n), 0);
  ASSERT(n == 3 && live[0] == 0 && live[1] == 1 && live[2] == 2);
  /* this rank stays in the barrier whatever an event says of it */
  ASSERT_EQ(asr__job_ranks_apply(1, ASR_RANK_FINISHED, 0, NULL), 0);
  ASSERT_EQ(asr__job_ranks_live(live, &n), 0);
  ASSERT(n == 3 && live[1] == 1);
  /* a death without a line gets one */
  ASSERT_EQ(asr__job_ranks_apply(0, ASR_RANK_FAILED, 0, NULL), 1);
  ASSERT_EQ(asr__job_death(1, &d), 0);
  ASSERT_STREQ(d.why, "peer rank 0 died (incarnation 0)");
  /* deaths outlive the table: comms compare their birth count with it */
  asr__job_ranks_fini();
  ASSERT_EQ(asr__job_deaths(), 2u);
}

/* A restart: RESTARTING with the incarnation that died, then ALIVE with the
 * next; news of an older incarnation changes nothing, but an older death
 * not recorded yet still is (its comms must fail). */
TEST(a_restart_follows_incarnations) {
  ASSERT_EQ(asr__job_ranks_init("ns", 4, 0, 0), 0);
  ASSERT_EQ(asr__job_ranks_apply(2, ASR_RANK_RESTARTING, 0, "peer rank 2 on host h died: exit status 1"), 1);
  expect(2, ASR_RANK_RESTARTING, 0);
  int live[4], n;
  ASSERT_EQ(asr__job_ranks_live(live, &n), 0);
  ASSERT_EQ(n, 3);
  ASSERT_EQ(asr__job_ranks_apply(2, ASR_RANK_ALIVE, 1, NULL), 0);
  expect(2, ASR_RANK_ALIVE, 1);
  ASSERT_EQ(asr__job_ranks_live(live, &n), 1);
  ASSERT_EQ(n, 4);
  ASSERT_EQ(asr__job_ranks_apply(2, ASR_RANK_RESTARTING, 0, "late"), 0); /* recorded already */
  ASSERT_EQ(asr__job_ranks_apply(2, ASR_RANK_FAILED, 0, "late"), 0);
  expect(2, ASR_RANK_ALIVE, 1);
  /* rank 3's ALIVE of incarnation 1 came before its death of 0 */
  ASSERT_EQ(asr__job_ranks_apply(3, ASR_RANK_ALIVE, 1, NULL), 0);
  ASSERT_EQ(asr__job_ranks_apply(3, ASR_RANK_RESTARTING, 0, "peer rank 3 died"), 1);
  expect(3, ASR_RANK_ALIVE, 1);
  /* a restart that could not be done: RESTARTING turns FAILED */
  ASSERT_EQ(asr__job_ranks_apply(2, ASR_RANK_RESTARTING, 1, "again"), 1);
  ASSERT_EQ(asr__job_ranks_apply(2, ASR_RANK_FAILED, 1, "gave up"), 0);
  expect(2, ASR_RANK_FAILED, 1);
  ASSERT_EQ(asr__job_deaths(), 3u);
  /* a rank out of the job: ignored */
  ASSERT_EQ(asr__job_ranks_apply(4, ASR_RANK_FAILED, 0, NULL), 0);
  ASSERT_EQ(asr__job_deaths(), 3u);
  asr__job_ranks_fini();
}

/* A restarted rank starts at its own incarnation, the others at 0; news of
 * its own earlier deaths (events PMIx cached) records nothing: its comms
 * are all of this incarnation. */
TEST(own_incarnation_at_start) {
  ASSERT_EQ(asr__job_ranks_init("ns", 2, 1, 5), 0);
  expect(0, ASR_RANK_ALIVE, 0);
  expect(1, ASR_RANK_ALIVE, 5);
  ASSERT_EQ(asr__job_ranks_apply(1, ASR_RANK_RESTARTING, 4, "an old one"), 0);
  ASSERT_EQ(asr__job_deaths(), 0u);
  expect(1, ASR_RANK_ALIVE, 5);
  asr__job_ranks_fini();
}
