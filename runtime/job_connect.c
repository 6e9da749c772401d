/*
 * job_connect.c -- the runtime half of the job view: connect and accept by
 * rank (asr.h). The PMIx half is bootstrap/job.c.
 */
#include "config.h"

#include "asr_log.h"
#include "job.h"
#include "rt.h"

static int opened_lnc = -1; /* the LNC asr_job_* brought up, closed at finalize */

static int ensure_lnc(void) {
  const asr_job_info_t *me = asr__job_info();
  if (!asr__job_active()) {
    asr_error("job", "call asr_job_init first");
    return ASR_INVALID;
  }
  if (asr__ctx_get(me->lnc)) return ASR_SUCCESS;
  int st = asr_init(me->lnc);
  if (st == ASR_SUCCESS) opened_lnc = me->lnc;
  return st;
}

static int by_rank(int rank, asr_comm_t **comm, int send) {
  int st = ensure_lnc();
  if (st) return st;
  /* A rank the launcher reported FAILED never connects: no comm that
   * would wait for it for good (a RESTARTING one comes back, and a comm
   * made now is for its next incarnation: rank_fail.c). */
  int state, inc;
  if (asr__job_ranks_get(rank, &state, &inc) == 0 && state == ASR_RANK_FAILED) {
    asr_error("job", "%s: rank %d failed (incarnation %d)", send ? "asr_job_connect" : "asr_job_accept", rank,
              inc);
    return ASR_PEER_FAILED;
  }
  char addr[64];
  int lnc;
  if ((st = asr_job_peer(rank, addr, sizeof addr, &lnc))) return st;
  const asr_job_info_t *me = asr__job_info();
  return asr__comm_queue(me->lnc, addr, lnc, send ? ASR_SEND_COMM : ASR_RECV_COMM, rank, comm);
}

int asr_job_connect(int rank, asr_comm_t **send_comm) { return by_rank(rank, send_comm, 1); }
int asr_job_accept(int rank, asr_comm_t **recv_comm) { return by_rank(rank, recv_comm, 0); }

int asr_job_finalize(void) {
  asr__job_finalize_fence();
  if (opened_lnc >= 0 && asr__ctx_get(opened_lnc)) asr_close(opened_lnc);
  opened_lnc = -1;
  return asr__job_finalize_pmix() == 0 ? ASR_SUCCESS : ASR_INVALID;
}
