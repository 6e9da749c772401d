/*
 * job_ranks.c -- every rank's state as the launcher reports it (issue 50,
 * "jobs that outlive a failure"), the PMIx-client half: the table that
 * asr_job_rank_state reads and asr_job_barrier fences over (job.c), and the
 * list of deaths the runtime's service threads fail comms by
 * (runtime/rank_fail.c).
 *
 * Where the states come from. Under asrrun --on-failure continue|restart
 * every daemon hands its ranks one PMIx event per change of a rank's state
 * (common/asr_rank_ev.h has the contract): rank, state, incarnation, and a
 * line saying why. They arrive on PMIx's event thread (on_event), which
 * must never wait for anything of ours but this file's mutex: the runtime
 * learns of a death through a hook that only wakes its service threads,
 * and they read the death here.
 *
 * The table's rules (asr__job_ranks_apply). Events of one rank come in order from its
 * daemon, but a restarted rank may also be handed events PMIx cached
 * before it started, so the table keeps, per rank, the newest incarnation
 * it heard of: an event of an older incarnation is ignored, and at the same
 * incarnation a rank never comes back to ALIVE (ALIVE may turn FAILED,
 * RESTARTING or FINISHED; RESTARTING may turn FAILED, a restart that could
 * not be done). A death (FAILED or RESTARTING) is recorded once per
 * incarnation, even when it comes after news of a newer one, because the
 * comms to that incarnation must fail either way.
 *
 * Without a launcher that sends events (the default --on-failure abort, a
 * direct launch under srun) nothing arrives: every rank stays ALIVE, and
 * the barrier is the plain fence of every rank it always was.
 */
#include "config.h"

#include <pmix.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_rank_ev.h"
#include "job.h"

typedef struct {
  int state;       /* asr_rank_state_t */
  int incarnation; /* the newest heard of */
  int dead_inc;    /* the newest incarnation recorded dead, -1 when none */
} rank_entry_t;

/* All under mu; deaths[] is only appended to (realloc'd under mu), and
 * ndeaths is also published with a release store after each append so
 * that asr__job_deaths needs no lock. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static rank_entry_t *ranks; /* NULL outside asr_job_init .. asr_job_finalize */
static int nranks;
static int me; /* this rank: always in the barrier, whatever an event says */
static asr_job_death_t *deaths;
static unsigned capdeaths;
static _Atomic unsigned ndeaths;
static void (*_Atomic on_death)(void);
static size_t handler_ref;
static int handler_registered;

void asr__job_on_death(void (*fn)(void)) { atomic_store(&on_death, fn); }

unsigned asr__job_deaths(void) { return atomic_load_explicit(&ndeaths, memory_order_acquire); }

int asr__job_death(unsigned i, asr_job_death_t *out) {
  int rc = ASR_ENOTFOUND;
  pthread_mutex_lock(&mu);
  if (i < atomic_load_explicit(&ndeaths, memory_order_relaxed)) {
    *out = deaths[i];
    rc = 0;
  }
  pthread_mutex_unlock(&mu);
  return rc;
}

/* Whether a rank in state from may turn to state to at the same
 * incarnation (the header's rules). */
static int may_follow(int from, int to) {
  if (from == to) return 0;
  if (from == ASR_RANK_ALIVE) return 1;
  return from == ASR_RANK_RESTARTING && to == ASR_RANK_FAILED;
}

/* Appends a death; mu held. 0, or ASR_ENOMEM (then it is lost: logged). */
static int record_death(int rank, int inc, const char *why) {
  unsigned n = atomic_load_explicit(&ndeaths, memory_order_relaxed);
  if (n == capdeaths) {
    unsigned cap = capdeaths ? capdeaths * 2 : 8;
    asr_job_death_t *d = realloc(deaths, cap * sizeof *d);
    if (!d) return ASR_ENOMEM;
    deaths = d;
    capdeaths = cap;
  }
  asr_job_death_t *d = &deaths[n];
  d->rank = rank;
  d->incarnation = inc;
  if (why && *why)
    snprintf(d->why, sizeof d->why, "%s", why);
  else
    snprintf(d->why, sizeof d->why, "peer rank %d died (incarnation %d)", rank, inc);
  atomic_store_explicit(&ndeaths, n + 1, memory_order_release);
  return 0;
}

int asr__job_ranks_apply(int rank, int state, int inc, const char *why) {
  int died = 0;
  pthread_mutex_lock(&mu);
  if (!ranks || rank < 0 || rank >= nranks) {
    pthread_mutex_unlock(&mu);
    asr_warn("job", "a rank-state event names rank %d, which is not in this job of %d ranks: ignored", rank,
             nranks);
    return 0;
  }
  rank_entry_t *e = &ranks[rank];
  if ((state == ASR_RANK_FAILED || state == ASR_RANK_RESTARTING) && inc > e->dead_inc) {
    if (record_death(rank, inc, why) == 0) {
      e->dead_inc = inc;
      died = 1;
    } else {
      asr_error("job", "out of memory recording the death of rank %d: its comms do not fail", rank);
    }
  }
  int was = e->state, was_inc = e->incarnation;
  if (inc > e->incarnation || (inc == e->incarnation && may_follow(e->state, state))) {
    e->state = state;
    e->incarnation = inc;
  }
  int now = e->state, now_inc = e->incarnation;
  pthread_mutex_unlock(&mu);
  if (died) {
    void (*fn)(void) = atomic_load(&on_death);
    if (fn) fn();
  }
  if (now != was || now_inc != was_inc)
    asr_info("job", "rank %d: %s (incarnation %d)%s%s", rank,
             now == ASR_RANK_ALIVE        ? "ALIVE"
             : now == ASR_RANK_FAILED     ? "FAILED"
             : now == ASR_RANK_RESTARTING ? "RESTARTING"
                                          : "FINISHED",
             now_inc, why && *why && now != ASR_RANK_ALIVE ? ": " : "",
             why && now != ASR_RANK_ALIVE ? why : "");
  return died;
}

/* An integer info's value: 0, or ASR_EPROTO when it is not an integer. */
static int info_int(const pmix_value_t *v, long *out) {
  switch (v->type) {
    case PMIX_UINT32: *out = (long)v->data.uint32; return 0;
    case PMIX_INT32: *out = v->data.int32; return 0;
    case PMIX_UINT16: *out = v->data.uint16; return 0;
    case PMIX_INT: *out = v->data.integer; return 0;
    case PMIX_UINT: *out = (long)v->data.uint; return 0;
    case PMIX_PROC_RANK: *out = (long)v->data.rank; return 0;
    default: return ASR_EPROTO;
  }
}

/* The handler of ASR_RANK_EV_CODE, on PMIx's event thread. It never
 * blocks: asr__job_ranks_apply takes mu for a table update, and the runtime's hook only
 * wakes service threads. The event goes on to any other handler of the
 * code (the application may have one too). */
static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                     size_t ninfo, pmix_info_t *results, size_t nresults,
                     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata) {
  (void)id, (void)status, (void)source, (void)results, (void)nresults;
  long rank = -1, state = -1, inc = 0;
  const char *why = NULL;
  for (size_t i = 0; i < ninfo; i++) {
    long v;
    if (PMIX_CHECK_KEY(&info[i], ASR_RANK_EV_RANK) && info_int(&info[i].value, &v) == 0) rank = v;
    if (PMIX_CHECK_KEY(&info[i], ASR_RANK_EV_STATE) && info_int(&info[i].value, &v) == 0) state = v;
    if (PMIX_CHECK_KEY(&info[i], ASR_RANK_EV_INCARNATION) && info_int(&info[i].value, &v) == 0) inc = v;
    if (PMIX_CHECK_KEY(&info[i], ASR_RANK_EV_WHY) && info[i].value.type == PMIX_STRING)
      why = info[i].value.data.string;
  }
  if (rank < 0 || state < ASR_RANK_ALIVE || state > ASR_RANK_FINISHED || inc < 0) {
    asr_warn("job", "a rank-state event without a rank, a state or an incarnation we know: ignored");
  } else {
    (void)asr__job_ranks_apply((int)rank, (int)state, (int)inc, why);
  }
  if (cbfunc) cbfunc(PMIX_SUCCESS, NULL, 0, NULL, NULL, cbdata);
}

int asr__job_ranks_init(const char *nspace, int size, int self, int incarnation) {
  (void)nspace; /* the events name ranks of our own job: PMIX_RANGE_LOCAL */
  rank_entry_t *t = calloc((size_t)size, sizeof *t);
  if (!t) return ASR_ENOMEM;
  for (int i = 0; i < size; i++) t[i] = (rank_entry_t){.state = ASR_RANK_ALIVE, .dead_inc = -1};
  /* This rank's own earlier deaths (PMIx may hand a restarted rank the
   * events it cached) fail nothing: every comm of this process is of this
   * incarnation. */
  if (self >= 0 && self < size) t[self] = (rank_entry_t){ASR_RANK_ALIVE, incarnation, incarnation - 1};
  pthread_mutex_lock(&mu);
  free(ranks);
  ranks = t;
  nranks = size;
  me = self;
  pthread_mutex_unlock(&mu);
  /* Blocking registration (no callback): PMIx returns the handler's
   * reference, 0 or more, or a negative error. Registered after the table
   * exists, so the first event (maybe one PMIx cached before this process
   * started) finds it. */
  pmix_status_t code = ASR_RANK_EV_CODE;
  pmix_status_t rc = PMIx_Register_event_handler(&code, 1, NULL, 0, on_event, NULL, NULL);
  if (rc < 0) {
    asr_warn("job",
             "cannot register for the launcher's rank-state events (%s): a rank that dies is not heard of",
             PMIx_Error_string(rc));
  } else {
    handler_ref = (size_t)rc;
    handler_registered = 1;
  }
  return 0;
}

void asr__job_ranks_fini(void) {
  /* Blocking: once it returns, on_event runs no more (PMIx runs handlers
   * on the thread that processes the deregistration). */
  if (handler_registered) PMIx_Deregister_event_handler(handler_ref, NULL, NULL);
  handler_registered = 0;
  pthread_mutex_lock(&mu);
  free(ranks);
  ranks = NULL;
  nranks = 0;
  pthread_mutex_unlock(&mu);
}

int asr__job_ranks_live(int *out, int *n) {
  pthread_mutex_lock(&mu);
  if (!ranks) {
    pthread_mutex_unlock(&mu);
    return ASR_ESTATE;
  }
  int k = 0;
  for (int i = 0; i < nranks; i++)
    if (ranks[i].state == ASR_RANK_ALIVE || i == me) out[k++] = i;
  int whole = k == nranks;
  pthread_mutex_unlock(&mu);
  *n = k;
  return whole;
}

int asr__job_ranks_get(int rank, int *state, int *incarnation) {
  int rc = 0;
  pthread_mutex_lock(&mu);
  if (!ranks)
    rc = ASR_ESTATE;
  else if (rank < 0 || rank >= nranks)
    rc = ASR_EINVAL;
  else {
    *state = ranks[rank].state;
    *incarnation = ranks[rank].incarnation;
  }
  pthread_mutex_unlock(&mu);
  return rc;
}

int asr_job_rank_state(int rank, int *state, int *incarnation) {
  int s, inc;
  if (!state || !incarnation || asr__job_ranks_get(rank, &s, &inc) != 0) {
    asr_error("job", "asr_job_rank_state: %s",
              !state || !incarnation ? "NULL output" : "call asr_job_init first, with a rank of the job");
    return ASR_INVALID;
  }
  *state = s;
  *incarnation = inc;
  return ASR_SUCCESS;
}
