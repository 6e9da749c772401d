/*
 * asrrun_policy.c -- the failure policy (issue 50; asrrun --on-failure):
 * what a rank's end does when the job must not end with it.
 *
 *   abort     today's rule (asrrun_verdict.c): the first failure ends the job.
 *   continue  a rank that dies (a signal, a non-zero exit, an exit without
 *             finalizing, its host lost) is FAILED; every daemon is told
 *             (RANK_STATE) and tells its ranks (common/asr_rank_ev.h); the
 *             job goes on.
 *   restart   the same, but its daemon starts it again in place (same rank,
 *             host and LNC) as the next incarnation, while the job's budget
 *             (--max-restarts) lasts; then as under continue. A program
 *             that could not be executed is not started again (it would
 *             fail the same way), nor a rank of a lost host (no migration).
 *
 * Every daemon hears every state, each of one incarnation: FAILED and
 * RESTARTING of the incarnation that died (its daemon starts the next),
 * ALIVE of the new one when it joins, FINISHED (an exit 0 after
 * finalizing).
 *
 * The exit code: deaths the policy absorbed (a signal, a lost host, an exit
 * without finalizing) do not count. asrrun exits 0 when the last
 * incarnation of every rank that exited on its own exited 0, else with the
 * status of the one of those told first (the order daemons tell ends in is
 * causal: asrd_ends.c). The last line lists each failure and restart, first
 * cause first.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "asr_log.h"
#include "asrrun.h"

/* One end the policy absorbed. */
struct asrrun_failure {
  int rank, host, incarnation;
  uint64_t ms;    /* since the launch began */
  char cause[96]; /* "killed by signal 9", "exited with status 1", ... */
  int restarted;  /* it was started again as incarnation + 1 */
};

int asrrun_policy_failures(const asrrun_t *run, int rank) {
  int n = 0;
  for (int i = 0; i < run->policy.nfails; i++) n += run->policy.fails[i].rank == rank;
  return n;
}

int asrrun_policy_active(const asrrun_t *run) { return run->cfg.on_failure != ASR_ON_FAILURE_ABORT; }

void asrrun_policy_init(asrrun_t *run) {
  memset(&run->policy, 0, sizeof run->policy);
  run->policy.restarts_left = run->cfg.on_failure == ASR_ON_FAILURE_RESTART ? run->cfg.max_restarts : 0;
  for (int r = 0; run->ranks && r < run->map.nranks; r++) {
    run->ranks[r].state = ASR_CTL_RANK_ALIVE;
    run->ranks[r].incarnation = 0;
    run->ranks[r].own_status = -1;
  }
}

/* RANK_STATE to every daemon still connected (those of lost hosts hear
 * nothing: their ranks are gone with them). */
static void tell(asrrun_t *run, int rank, int state, int incarnation, int status, const char *why) {
  rank_t *r = &run->ranks[rank];
  r->state = state;
  asr_ctl_msg_t m = {.type = ASR_CTL_RANK_STATE,
                     .u.rank_state = {.rank = (uint32_t)rank,
                                      .state = (uint32_t)state,
                                      .incarnation = (uint32_t)incarnation,
                                      .status = (uint32_t)status,
                                      .why = (char *)why}};
  asr_tree_node_bcast(&run->tree.node, &m);
  asr_debug("asrrun", "rank %d incarnation %d: state %d (%s)", rank, incarnation, state, why);
  /* a fence is of the ranks alive: a host with none takes no part */
  int h = run->map.ranks[rank].host, live = 0;
  for (int q = 0; q < run->map.nranks && !live; q++)
    live = run->map.ranks[q].host == h && run->ranks[q].state == ASR_CTL_RANK_ALIVE;
  asr_tree_node_host_live(&run->tree.node, h, live);
}

static struct asrrun_failure *add_failure(asrrun_t *run, int rank, int host, const char *cause) {
  if (run->policy.nfails == run->policy.capfails) {
    int cap = run->policy.capfails ? 2 * run->policy.capfails : 8;
    struct asrrun_failure *f = realloc(run->policy.fails, (size_t)cap * sizeof *f);
    if (!f) return NULL; /* the summary misses it; the policy still acts */
    run->policy.fails = f;
    run->policy.capfails = cap;
  }
  struct asrrun_failure *f = &run->policy.fails[run->policy.nfails++];
  memset(f, 0, sizeof *f);
  f->rank = rank;
  f->host = host;
  f->incarnation = run->ranks[rank].incarnation;
  f->ms = asr_loop_now(run->loop) - run->tree.launch_ms;
  snprintf(f->cause, sizeof f->cause, "%s", cause);
  return f;
}

/* Fails rank (or restarts it, when allowed and the budget lasts). */
static void rank_failed(asrrun_t *run, int rank, int st, const char *cause, int may_restart) {
  rank_t *r = &run->ranks[rank];
  int host = run->map.ranks[rank].host;
  const char *hname = run->map.host_names[host];
  struct asrrun_failure *f = add_failure(run, rank, host, cause);
  char why[256];
  snprintf(why, sizeof why, "peer rank %d on host %s died: %s", rank, hname, cause);
  if (may_restart && run->policy.restarts_left > 0 && run->state < RUN_ABORTING) {
    run->policy.restarts_left--;
    if (f) f->restarted = 1;
    /* RESTARTING is of the incarnation that died; its daemon starts the next */
    tell(run, rank, ASR_CTL_RANK_RESTARTING, r->incarnation, st, why);
    r->incarnation++;
    /* the rank runs again: its end is to come */
    r->exited = 0;
    r->joined = 0;
    run->ranks_exited--;
    asrrun_notice(run, "rank %d on host %s: %s; restarting it as incarnation %d (%d restart%s left)", rank,
                  hname, cause, r->incarnation, run->policy.restarts_left,
                  run->policy.restarts_left == 1 ? "" : "s");
    return;
  }
  asrrun_notice(run, "rank %d on host %s: %s; the job goes on without it%s", rank, hname, cause,
                run->cfg.on_failure == ASR_ON_FAILURE_RESTART && may_restart ? " (no restart left)" : "");
  tell(run, rank, ASR_CTL_RANK_FAILED, r->incarnation, st, why);
}

void asrrun_policy_rank_ended(asrrun_t *run, daemon_t *d, int rank, int st, uint32_t flags) {
  (void)d;
  rank_t *r = &run->ranks[rank];
  if (WIFEXITED(st)) {
    r->own_status = WEXITSTATUS(st);
    r->own_seq = ++run->policy.seq;
  }
  int finalized = r->joined == ASR_CTL_JOINED_FINALIZED || (!r->joined && !run->any_joined);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && (finalized || run->cfg.allow_early_exit)) {
    tell(run, rank, ASR_CTL_RANK_FINISHED, r->incarnation, st, "finished");
    return;
  }
  char cause[96];
  if (WIFSIGNALED(st))
    snprintf(cause, sizeof cause, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else if (flags & ASR_CTL_EXIT_NOT_RUN)
    snprintf(cause, sizeof cause, "could not execute the program");
  else if (WEXITSTATUS(st) != 0)
    snprintf(cause, sizeof cause, "exited with status %d", WEXITSTATUS(st));
  else
    snprintf(cause, sizeof cause, "exited with status 0 without finalizing");
  rank_failed(run, rank, st, cause, !(flags & ASR_CTL_EXIT_NOT_RUN));
}

void asrrun_policy_rank_joined(asrrun_t *run, int rank) {
  rank_t *r = &run->ranks[rank];
  if (r->incarnation > 0 && r->state == ASR_CTL_RANK_RESTARTING)
    tell(run, rank, ASR_CTL_RANK_ALIVE, r->incarnation, 0, "alive");
}

void asrrun_policy_host_lost(asrrun_t *run, int h, const char *why) {
  for (int rank = 0; rank < run->map.nranks; rank++) {
    rank_t *r = &run->ranks[rank];
    if (run->map.ranks[rank].host != h || r->exited) continue;
    r->exited = 1;
    r->status = (int)W_EXITCODE(0, SIGKILL);
    run->ranks_exited++;
    char cause[96];
    snprintf(cause, sizeof cause, "lost with its host");
    rank_failed(run, rank, r->status, cause, 0);
  }
  asr_debug("asrrun", "host %s lost: %s", run->map.host_names[h], why);
}

int asrrun_policy_exit_code(const asrrun_t *run) {
  int code = 0;
  unsigned first = 0;
  for (int rank = 0; rank < run->map.nranks; rank++) {
    const rank_t *r = &run->ranks[rank];
    if (r->own_status > 0 && (!first || r->own_seq < first)) {
      first = r->own_seq;
      code = r->own_status;
    }
  }
  return code;
}

void asrrun_policy_summary(const asrrun_t *run) {
  int n = run->policy.nfails, restarts = 0;
  if (!n) return;
  for (int i = 0; i < n; i++) restarts += run->policy.fails[i].restarted;
  asr_buf_t b = {0};
  char head[128];
  int k = snprintf(head, sizeof head, "asrrun: %d failure%s, %d restart%s:", n, n == 1 ? "" : "s", restarts,
                   restarts == 1 ? "" : "s");
  asr_buf_put(&b, head, (size_t)k);
  for (int i = 0; i < n; i++) {
    const struct asrrun_failure *f = &run->policy.fails[i];
    char one[400];
    k = snprintf(one, sizeof one, "%s rank %d (host %s, incarnation %d) %s at %.3f s%s", i ? ";" : "",
                 f->rank, run->map.host_names[f->host], f->incarnation, f->cause, (double)f->ms / 1000.0,
                 f->restarted ? ", restarted" : "");
    asr_buf_put(&b, one, (size_t)k < sizeof one ? (size_t)k : sizeof one - 1);
  }
  asr_buf_put(&b, "\n", 1);
  fwrite(b.data + b.off, 1, asr_buf_pending(&b), stderr);
  fflush(stderr);
  asr_buf_free(&b);
}

void asrrun_policy_free(asrrun_t *run) {
  free(run->policy.fails);
  run->policy.fails = NULL;
  run->policy.nfails = run->policy.capfails = 0;
}
