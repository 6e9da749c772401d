/*
 * pmix_ft -- a plain libpmix client that lives through a rank's death
 * (issue 50), so the launcher's failure policy is checked against the
 * library rather than against libasr:
 *
 *   asrrun -n N --on-failure continue|restart pmix_ft --kill RANK [--expect-restart]
 *           [--exit-status S | --kill-daemon | --stop-daemon] [--always] [--hold PATH]
 *           [--fence DEATHS]
 *
 * Every rank: PMIx_Init; handlers for PMIX_EVENT_PROC_TERMINATED,
 * PMIX_ERR_PROC_ABORTED_BY_SIG (PRRTE's events) and asr's rank-state event
 * (common/asr_rank_ev.h); a fence (incarnation 0 only: a restarted rank
 * meets nobody). Rank RANK then kills itself with SIGKILL (or, with
 * --exit-status S, exits with S without finalizing; with --kill-daemon, it
 * kills its daemon with SIGKILL: its whole host is lost; with --stop-daemon
 * it stops its daemon and itself with SIGSTOP: its host falls silent, and
 * is lost after the heartbeat timeout). Every other rank waits
 * (5 s at most) until it has seen PRRTE's event and asr's FAILED or
 * RESTARTING for that rank, each naming it; with --expect-restart also
 * asr's ALIVE of incarnation 1. The restarted rank (ASR_INCARNATION=1)
 * checks that it is rank RANK and leaves (with --always it dies again,
 * every incarnation). Each rank prints what it saw,
 * "pmix_ft rank R: ok" at the end, and exits 1 when something it waited
 * for did not come. With --hold PATH, the ranks that lived stay until
 * PATH exists (20 s at most) before they finalize, so that a test can ask
 * the job's state meanwhile. With --fence DEATHS, the ranks that lived wait
 * (5 s at most) until they heard of DEATHS ranks' deaths, then meet in a
 * fence of the others (PMIx_Fence_nb over the ranks not heard dead) and
 * print "fence of N ranks: STATUS" once it completes (5 s at most).
 */
#include "config.h"

#include <pmix.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "asr_rank_ev.h"

static pmix_proc_t me;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
#define MAX_RANKS 1024
static char saw_prrte[MAX_RANKS];  /* the ranks PRRTE's events named */
static char saw_failed[MAX_RANKS]; /* the ranks asr's FAILED / RESTARTING named */
static int saw_alive_inc = -1;

static void on_prrte(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                     size_t ninfo, pmix_info_t results[], size_t nresults,
                     pmix_event_notification_cbfunc_fn_t cb, void *cbdata) {
  (void)id, (void)source, (void)results, (void)nresults;
  int rank = -1, code = -1;
  for (size_t i = 0; i < ninfo; i++) {
    if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && info[i].value.type == PMIX_PROC)
      rank = (int)info[i].value.data.proc->rank;
    if (PMIX_CHECK_KEY(&info[i], PMIX_EXIT_CODE) && info[i].value.type == PMIX_INT)
      code = info[i].value.data.integer;
  }
  printf(
      "pmix_ft rank %u: %s for rank %d (exit code %d)\n", me.rank,
      status == PMIX_ERR_PROC_ABORTED_BY_SIG ? "PMIX_ERR_PROC_ABORTED_BY_SIG" : "PMIX_EVENT_PROC_TERMINATED",
      rank, code);
  fflush(stdout);
  pthread_mutex_lock(&mu);
  if (rank >= 0 && rank < MAX_RANKS) saw_prrte[rank] = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  if (cb) cb(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void on_asr(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                   size_t ninfo, pmix_info_t results[], size_t nresults,
                   pmix_event_notification_cbfunc_fn_t cb, void *cbdata) {
  (void)id, (void)status, (void)source, (void)results, (void)nresults;
  int rank = -1, state = -1, inc = -1;
  const char *why = "";
  for (size_t i = 0; i < ninfo; i++) {
    if (PMIX_CHECK_KEY(&info[i], ASR_RANK_EV_RANK) && info[i].value.type == PMIX_UINT32)
      rank = (int)info[i].value.data.uint32;
    if (PMIX_CHECK_KEY(&info[i], ASR_RANK_EV_STATE) && info[i].value.type == PMIX_UINT32)
      state = (int)info[i].value.data.uint32;
    if (PMIX_CHECK_KEY(&info[i], ASR_RANK_EV_INCARNATION) && info[i].value.type == PMIX_UINT32)
      inc = (int)info[i].value.data.uint32;
    if (PMIX_CHECK_KEY(&info[i], ASR_RANK_EV_WHY) && info[i].value.type == PMIX_STRING)
      why = info[i].value.data.string;
  }
  static const char *const names[] = {"ALIVE", "FAILED", "RESTARTING", "FINISHED"};
  printf("pmix_ft rank %u: asr rank %d is %s (incarnation %d): %s\n", me.rank, rank,
         state >= 0 && state < 4 ? names[state] : "?", inc, why);
  fflush(stdout);
  pthread_mutex_lock(&mu);
  if ((state == 1 || state == 2) && rank >= 0 && rank < MAX_RANKS) {
    saw_failed[rank] = 1;
  }
  if (state == 0) saw_alive_inc = inc;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  if (cb) cb(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* Waits until cond holds (under mu), 5 s at most: 1 when it holds. */
static int wait_for(int (*cond)(void)) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 5;
  pthread_mutex_lock(&mu);
  while (!cond())
    if (pthread_cond_timedwait(&cv, &mu, &until) != 0) break;
  int ok = cond();
  pthread_mutex_unlock(&mu);
  return ok;
}

static int victim = -1, expect_restart, kill_daemon, stop_daemon, always, fence_deaths = -1;
static const char *hold;
static int died_seen(void) {
  return victim >= 0 && victim < MAX_RANKS && saw_prrte[victim] && saw_failed[victim];
}
static int alive_seen(void) { return saw_alive_inc == 1; }
static int deaths_seen(void) {
  int n = 0;
  for (int r = 0; r < MAX_RANKS; r++) n += saw_failed[r];
  return n >= fence_deaths;
}

static pmix_status_t fence_st;
static int fence_done;
static void on_fence(pmix_status_t st, void *cbdata) {
  (void)cbdata;
  pthread_mutex_lock(&mu);
  fence_st = st;
  fence_done = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}
static int fenced(void) { return fence_done; }

/* A fence of the ranks not heard dead: 1 when it completed within 5 s. */
static int fence_live(uint32_t size) {
  pmix_proc_t *procs = calloc(size, sizeof *procs);
  size_t n = 0;
  pthread_mutex_lock(&mu);
  for (uint32_t r = 0; r < size; r++)
    if (r >= MAX_RANKS || !saw_failed[r]) {
      PMIX_LOAD_PROCID(&procs[n], me.nspace, r); /* (a macro: its argument is read more than once) */
      n++;
    }
  pthread_mutex_unlock(&mu);
  pmix_status_t st = PMIx_Fence_nb(procs, n, NULL, 0, on_fence, NULL);
  int ok = st == PMIX_SUCCESS && wait_for(fenced);
  printf("pmix_ft rank %u: fence of %zu ranks: %s\n", me.rank, n,
         st != PMIX_SUCCESS ? PMIx_Error_string(st)
         : ok               ? PMIx_Error_string(fence_st)
                            : "not done within 5 s");
  free(procs);
  return ok && fence_st == PMIX_SUCCESS;
}

int main(int argc, char **argv) {
  int exit_status = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--kill") && i + 1 < argc)
      victim = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--expect-restart"))
      expect_restart = 1;
    else if (!strcmp(argv[i], "--kill-daemon"))
      kill_daemon = 1;
    else if (!strcmp(argv[i], "--stop-daemon"))
      stop_daemon = 1;
    else if (!strcmp(argv[i], "--always"))
      always = 1;
    else if (!strcmp(argv[i], "--hold") && i + 1 < argc)
      hold = argv[++i];
    else if (!strcmp(argv[i], "--fence") && i + 1 < argc)
      fence_deaths = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--exit-status") && i + 1 < argc)
      exit_status = atoi(argv[++i]);
    else {
      fprintf(
          stderr,
          "usage: pmix_ft --kill RANK [--expect-restart] [--exit-status S | --kill-daemon | --stop-daemon] "
          "[--always] [--hold PATH]\n");
      return 2;
    }
  }
  const char *inc_s = getenv("ASR_INCARNATION");
  int inc = inc_s ? atoi(inc_s) : 0;
  pmix_status_t st = PMIx_Init(&me, NULL, 0);
  if (st != PMIX_SUCCESS) {
    fprintf(stderr, "pmix_ft: PMIx_Init: %s\n", PMIx_Error_string(st));
    return 1;
  }
  pmix_status_t codes[2] = {PMIX_EVENT_PROC_TERMINATED, PMIX_ERR_PROC_ABORTED_BY_SIG};
  st = PMIx_Register_event_handler(codes, 2, NULL, 0, on_prrte, NULL, NULL);
  pmix_status_t asr_code = ASR_RANK_EV_CODE;
  if (st >= 0) st = PMIx_Register_event_handler(&asr_code, 1, NULL, 0, on_asr, NULL, NULL);
  if (st < 0) {
    fprintf(stderr, "pmix_ft: PMIx_Register_event_handler: %s\n", PMIx_Error_string(st));
    return 1;
  }
  if (inc > 0) {
    int ok = (int)me.rank == victim;
    printf("pmix_ft rank %u: incarnation %d up%s\n", me.rank, inc, ok ? "" : " (not the victim!)");
    fflush(stdout);
    if (ok && always) raise(SIGKILL);
    PMIx_Finalize(NULL, 0);
    if (ok) printf("pmix_ft rank %u: ok\n", me.rank);
    return ok ? 0 : 1;
  }
  st = PMIx_Fence(NULL, 0, NULL, 0);
  if (st != PMIX_SUCCESS) {
    fprintf(stderr, "pmix_ft rank %u: fence: %s\n", me.rank, PMIx_Error_string(st));
    return 1;
  }
  printf("pmix_ft rank %u: READY\n", me.rank);
  fflush(stdout);
  if ((int)me.rank == victim) {
    if (exit_status >= 0) _exit(exit_status);
    if (stop_daemon) {
      kill(getppid(), SIGSTOP);
      raise(SIGSTOP); /* until its lost daemon's end kills it (PDEATHSIG) */
      pause();
    }
    if (kill_daemon) {
      kill(getppid(), SIGKILL);
      pause(); /* its end comes with its daemon's (PDEATHSIG) */
    }
    raise(SIGKILL);
  }
  int ok = wait_for(died_seen);
  if (!ok) printf("pmix_ft rank %u: did not hear of rank %d's death within 5 s\n", me.rank, victim);
  if (ok && expect_restart && !(ok = wait_for(alive_seen)))
    printf("pmix_ft rank %u: did not hear of rank %d's incarnation 1 within 5 s\n", me.rank, victim);
  if (ok && fence_deaths >= 0) {
    if (!(ok = wait_for(deaths_seen)))
      printf("pmix_ft rank %u: did not hear of %d deaths within 5 s\n", me.rank, fence_deaths);
    pmix_value_t *v = NULL;
    uint32_t size = 0;
    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if (ok && PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v) == PMIX_SUCCESS && v->type == PMIX_UINT32)
      size = v->data.uint32;
    if (v) PMIX_VALUE_RELEASE(v);
    if (ok) ok = size > 0 && fence_live(size);
  }
  if (ok) printf("pmix_ft rank %u: heard\n", me.rank);
  fflush(stdout);
  for (int i = 0; hold && i < 2000 && access(hold, F_OK) != 0; i++) usleep(10000);
  PMIx_Finalize(NULL, 0);
  if (ok) printf("pmix_ft rank %u: ok\n", me.rank);
  return ok ? 0 : 1;
}
