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

#endif /* ASR_BOOTSTRAP_JOB_H */
