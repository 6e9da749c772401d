/*
 * job.h -- the PMIx-client half of the job view (doc/design.md, "Parts and
 * layers"): everything a
 * rank learns from its launcher, without the runtime. runtime/job_connect.c
 * adds the calls that need libasr (asr_job_connect / asr_job_accept), so no
 * arrow points from bootstrap/ up into runtime/.
 */
#ifndef ASR_BOOTSTRAP_JOB_H
#define ASR_BOOTSTRAP_JOB_H

#include "asr.h"

/* Whether asr_job_init() succeeded in this process. */
int asr__job_active(void);

/* This rank's info (valid after asr_job_init). */
const asr_job_info_t *asr__job_info(void);

/* This rank's incarnation (ASR_INCARNATION, read by asr_job_init; 0 at the
 * first start): what its handles say (runtime/handle_inc.h). */
int asr__job_incarnation(void);

/* The fence asr_job_finalize does before closing the LNC when the ranks
 * elected their own KV servers (direct launch); a no-op under asrd.
 * Returns 0 or ASR_EIO (logged). */
int asr__job_finalize_fence(void);

/* job_direct.c: the ASR_* settings asrd would have given (before the fence),
 * and the job secret rank 0 published (after it). Each returns 0 or a
 * negative ASR_E* code, having logged why. */
int asr__job_direct_prepare(const char *nspace, int rank, const char *hostname, int nnodes);
int asr__job_direct_secret(const char *nspace);

/* PMIx_Finalize for asr_job_finalize (runtime/job_connect.c closes the LNC
 * first). Returns 0, ASR_ESTATE when asr_job_init had not succeeded, or
 * ASR_EIO when PMIx failed; asr_job_finalize maps either onto ASR_INVALID. */
int asr__job_finalize_pmix(void);

/* --- every rank's state (job_ranks.c; issue 50, common/asr_rank_ev.h) ----- */

/* Makes the table of size ranks (each ALIVE at incarnation 0, this rank
 * self at its own incarnation) and registers the handler of the launcher's
 * rank-state events with PMIx. asr_job_init calls it after PMIx_Init and
 * before its fence, so a death during the fence is heard. Returns 0, or
 * ASR_ENOMEM; a handler PMIx refuses is logged, and the table stays (every
 * rank ALIVE: what a launcher that sends no events means). */
int asr__job_ranks_init(const char *nspace, int size, int self, int incarnation);

/* One rank-state event's news into the table (job_ranks.c's header has
 * the rules): rank's state (asr_rank_state_t) at incarnation inc, why its
 * line (NULL: one is made up). A death recorded calls the hook
 * (asr__job_on_death). Returns 1 when a death was recorded, else 0 (an
 * event ignored is logged). The PMIx handler's, and the unit tests'. */
int asr__job_ranks_apply(int rank, int state, int inc, const char *why);

/* Deregisters the handler and frees the table (asr_job_finalize, and a
 * failing asr_job_init). The deaths recorded stay: see asr__job_deaths. */
void asr__job_ranks_fini(void);

/* The ranks that are ALIVE, this rank included, in rank order into
 * ranks[] (room for the job's size), their count into *n. Returns 1 when
 * that is every rank of the job, 0 when not, ASR_ESTATE without a table. */
int asr__job_ranks_live(int *ranks, int *n);

/* A rank's state (asr_rank_state_t) and incarnation: 0, or ASR_ESTATE
 * without a table, ASR_EINVAL for a rank out of range. */
int asr__job_ranks_get(int rank, int *state, int *incarnation);

/* A death the launcher reported (a rank FAILED or RESTARTING at an
 * incarnation not reported dead before), as the runtime's service threads
 * read it (runtime/rank_fail.c). */
typedef struct {
  int rank;        /* who died */
  int incarnation; /* the incarnation that died */
  char why[256];   /* the event's one line: "peer rank 3 on host h died: killed by signal 9" */
} asr_job_death_t;

/* How many deaths were recorded in this process so far: an acquire load,
 * no lock (every comm reads it when it is made). The count never goes
 * down, not even at asr_job_finalize, so that a comm compares it with the
 * count at its birth for as long as it lives: death i fails the comms made
 * while fewer than i + 1 deaths were recorded, never one made after. */
unsigned asr__job_deaths(void);

/* Death i (0 <= i < asr__job_deaths()) into *out: 0, or ASR_ENOTFOUND. */
int asr__job_death(unsigned i, asr_job_death_t *out);

/* fn runs after each death is recorded, on PMIx's event thread: it must
 * not block, and must not call PMIx (the runtime wakes its service
 * threads, which read the death). Set once by the runtime (asr_init). */
void asr__job_on_death(void (*fn)(void));

#endif /* ASR_BOOTSTRAP_JOB_H */
