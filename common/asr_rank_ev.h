/*
 * asr_rank_ev.h -- the rank-state event (issue 50): how a daemon tells its
 * PMIx clients that a rank of the job changed state (it died, is being
 * restarted, came back, finished), and how libasr reads it (bootstrap/job.c).
 *
 * asrrun decides every rank's state under the job's failure policy
 * (asrrun --on-failure) and sends it to every daemon (ctl_msg.h's
 * RANK_STATE); each daemon hands it to its local ranks as one PMIx event of
 * code ASR_RANK_EV_CODE, range PMIX_RANGE_LOCAL, with these infos:
 *
 *   ASR_RANK_EV_RANK         PMIX_UINT32  the rank whose state changed
 *   ASR_RANK_EV_STATE        PMIX_UINT32  its new state: asr.h's ASR_RANK_*
 *   ASR_RANK_EV_INCARNATION  PMIX_UINT32  the incarnation the state is of
 *                                         (0 at first start; a restart's is
 *                                         one higher, ASR_INCARNATION):
 *                                         FAILED's and RESTARTING's is the one
 *                                         that died, ALIVE's the new one
 *   ASR_RANK_EV_WHY          PMIX_STRING  one line, as asr_comm_error gives it:
 *                                         "peer rank 3 on host h died: killed
 *                                         by signal 9"
 *   PMIX_EVENT_NON_DEFAULT   PMIX_BOOL    true: only handlers registered for
 *                                         this code see it
 *
 * For a death, a daemon also sends the event a PRRTE daemon sends, so that
 * a plain PMIx (or MPI) program learns of it: PMIX_ERR_PROC_ABORTED_BY_SIG
 * for a death by a signal, else PMIX_EVENT_PROC_TERMINATED, with
 * PMIX_EVENT_AFFECTED_PROC (the rank) and PMIX_EXIT_CODE.
 *
 * A rank's own incarnation is in its environment (ASR_INCARNATION). It is
 * no PMIx key of the rank's: libpmix 4.2's server has no call that changes
 * a registered process's data, and PMIx_Store_internal on the server does
 * not reach the clients (a client's PMIx_Get of such a key timed out).
 *
 * The events are cached by the library and replayed to a client that
 * registers its handler later (a restarted rank hears its job's history),
 * in no guaranteed order: a reader keeps, per rank, the newest
 * incarnation, and within one incarnation lets ALIVE turn FAILED,
 * RESTARTING or FINISHED and RESTARTING turn FAILED, never back.
 *
 * The code lies below PMIx's external base (pmix_common.h: codes of
 * programs and hosts are based on PMIX_EXTERNAL_ERR_BASE, -3000).
 */
#ifndef ASR_RANK_EV_H
#define ASR_RANK_EV_H

#define ASR_RANK_EV_CODE (-3000 - 50)
#define ASR_RANK_EV_RANK "asr.ev.rank"
#define ASR_RANK_EV_STATE "asr.ev.state"
#define ASR_RANK_EV_INCARNATION "asr.ev.inc"
#define ASR_RANK_EV_WHY "asr.ev.why"

#endif /* ASR_RANK_EV_H */
