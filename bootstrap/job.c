/*
 * job.c -- asr_job_init and friends over the PMIx client API (asr.h).
 *
 * Rank, size and local rank come from the PMIx server (asrd, or Slurm's
 * plugin); the bootstrap port, secret and host name from the environment asrd
 * sets (ASR_*), falling back to PMIx's host name. Started by another PMIx
 * server (srun --mpi=pmix), a rank works those out itself (job_direct.c). Each rank puts "asr.addr"
 * (the address its peers reach it at) and "asr.lnc" and fences with data
 * collection, so asr_job_peer() is a local lookup afterwards.
 *
 * Jobs that outlive a failure (issue 50): every rank's state comes from the
 * launcher's events (job_ranks.c). A rank the launcher restarted
 * (ASR_INCARNATION > 0) puts and commits as the others did but does not
 * fence: the others are past asr_job_init's fence and will not join
 * another, and the server holds what that fence collected, so
 * asr_job_peer's PMIx_Get of any rank is answered from it. The barrier
 * fences over the ranks that are ALIVE only.
 */
#include "config.h"

#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_log.h"
#include "asr_rank_ev.h"
#include "job.h"
#include "report_chan.h"
#include "report_fmt.h"

#define KEY_ADDR "asr.addr"
#define KEY_LNC "asr.lnc"

static pmix_proc_t me;
static asr_job_info_t info;
static int incarnation; /* ASR_INCARNATION: how many times the launcher restarted us */
static int active;
static int direct; /* not started by asrd: see job_direct.c */

int asr__job_active(void) { return active; }
const asr_job_info_t *asr__job_info(void) { return &info; }
int asr__job_incarnation(void) { return incarnation; }

/* An integer setting of asrd's (asr_env.h), or def when it is unset. Every
 * libasr row was checked when asr_job_init began, so a failure here means
 * the environment changed meanwhile; it still fails, with the message. */
static int env_int(asr_env_id_t id, int def, int *out) {
  long v;
  char err[256];
  if (!asr_env_is_set(id)) {
    *out = def;
    return 0;
  }
  if (asr_env_int(id, &v, err, sizeof err) != 0) {
    asr_error("job", "asr_job_init: %s", err);
    return ASR_INVALID;
  }
  *out = (int)v; /* the rows' ranges fit an int */
  return 0;
}

static int env_text(asr_env_id_t id, const char **out) {
  char err[256];
  if (asr_env_str(id, out, err, sizeof err) == 0) return 0;
  asr_error("job", "asr_job_init: %s", err);
  return ASR_INVALID;
}

static int env_word(asr_env_id_t id, int *out) {
  char err[256];
  if (asr_env_word(id, out, err, sizeof err) == 0) return 0;
  asr_error("job", "asr_job_init: %s", err);
  return ASR_INVALID;
}

/* Reads a key of proc (rank, or PMIX_RANK_WILDCARD for job-level). */
static pmix_status_t get_value(pmix_rank_t rank, const char *key, pmix_value_t **val) {
  pmix_proc_t p;
  PMIX_LOAD_PROCID(&p, me.nspace, rank);
  return PMIx_Get(&p, key, NULL, 0, val);
}

/* Reads an integer key of proc into *out: 0, ASR_ENOTFOUND when the server
 * has no such key, or ASR_EPROTO when its value is not an integer (*out is
 * written only on success: a caller keeps its default otherwise). */
static int get_long(pmix_rank_t rank, const char *key, long *out) {
  pmix_value_t *v = NULL;
  if (get_value(rank, key, &v) != PMIX_SUCCESS) {
    if (v) PMIX_VALUE_RELEASE(v);
    return ASR_ENOTFOUND;
  }
  int rc = 0;
  switch (v->type) {
    case PMIX_UINT32: *out = v->data.uint32; break;
    case PMIX_INT32: *out = v->data.int32; break;
    case PMIX_UINT16: *out = v->data.uint16; break;
    case PMIX_INT: *out = v->data.integer; break;
    case PMIX_UINT: *out = v->data.uint; break;
    case PMIX_PROC_RANK: *out = v->data.rank; break;
    default: rc = ASR_EPROTO; break;
  }
  PMIX_VALUE_RELEASE(v);
  return rc;
}

/* Undoes a failing asr_job_init past PMIx_Init; returns ASR_INVALID. */
static int init_fail(void) {
  asr__job_ranks_fini();
  PMIx_Finalize(NULL, 0);
  return ASR_INVALID;
}

/* What a fence's status means to the caller: 0 when it completed with
 * every participant, ASR_EAGAIN when a participant died during it, else
 * ASR_EIO. Measured with libpmix 4.2.2 on one host (the library completes
 * a fence of local ranks itself): a participant that dies before it
 * contributed, or was already dead when the fence began, completes the
 * fence for the others with PMIX_ERR_PARTIAL_SUCCESS at once, never a
 * hang; a fence over only the ranks still alive completes with
 * PMIX_SUCCESS. The lost-connection codes are taken alike in case a
 * server reports the death so. */
static int fence_status(pmix_status_t st) {
  switch (st) {
    case PMIX_SUCCESS: return 0;
    case PMIX_ERR_PARTIAL_SUCCESS:
    case PMIX_ERR_LOST_CONNECTION:
    case PMIX_ERR_PROC_ABORTED:
    case PMIX_ERR_PROC_ABORTED_BY_SIG: return ASR_EAGAIN;
    default: return ASR_EIO;
  }
}

int asr_job_init(asr_job_info_t *out) {
  if (active) {
    if (out) *out = info;
    return ASR_SUCCESS;
  }
  /* libasr's settings first, as asr_init checks them: a bad one fails here
   * with its message rather than somewhere inside the bootstrap */
  char err[512];
  asr_env_warn_unknown_once();
  if (asr_env_check_all(ASR_ENV_LIBASR, err, sizeof err) != 0) {
    asr_error("job", "asr_job_init: %s", err);
    return ASR_INVALID;
  }
  if (!getenv("PMIX_NAMESPACE") && !getenv("PMIX_SERVER_URI41") && !getenv("PMIX_SERVER_URI4") &&
      !getenv("PMIX_SERVER_URI3") && !getenv("PMIX_SERVER_URI2")) {
    asr_error("job",
              "this program was not started by a launcher (no PMIx server in its environment): "
              "start it with 'asrrun -n N PROGRAM' or 'srun --mpi=pmix PROGRAM'");
    return ASR_INVALID;
  }
  (void)asr__report_start(); /* asrd's state-report channel, if it gave one (report_chan.h) */
  pmix_status_t st = PMIx_Init(&me, NULL, 0);
  if (st != PMIX_SUCCESS) {
    asr_error("job",
              "cannot reach the launcher's PMIx server (%s): start the program with "
              "'asrrun -n N PROGRAM' or 'srun --mpi=pmix PROGRAM'",
              PMIx_Error_string(st));
    return ASR_INVALID;
  }
  memset(&info, 0, sizeof info);
  info.rank = (int)me.rank;
  pmix_value_t *v = NULL;
  long n;
  /* A key the server lacks, or gives as something other than an integer,
   * leaves the default: a size of 0 fails the check below. */
  if (get_long(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE, &n) == 0) info.size = (int)n;
  if (get_long(me.rank, PMIX_LOCAL_RANK, &n) == 0) info.local_rank = (int)n;
  const char *h = NULL, *a = NULL;
  int kvmode = 0;
  if (env_int(ASR_ENV_INCARNATION, 0, &incarnation) != 0 ||
      env_int(ASR_ENV_LOCAL_SIZE, 0, &info.local_size) != 0 ||
      env_int(ASR_ENV_LNC, info.local_rank, &info.lnc) ||
      env_int(ASR_ENV_BOOTSTRAP_PORT, 0, &info.bootstrap_port) || env_text(ASR_ENV_HOSTNAME, &h) ||
      env_word(ASR_ENV_KV_SERVER, &kvmode)) {
    PMIx_Finalize(NULL, 0);
    return ASR_INVALID;
  }
  if (!info.local_size && get_long(PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE, &n) == 0) info.local_size = (int)n;
  if (h) {
    snprintf(info.hostname, sizeof info.hostname, "%s", h);
  } else if (get_value(me.rank, PMIX_HOSTNAME, &v) == PMIX_SUCCESS && v->type == PMIX_STRING) {
    snprintf(info.hostname, sizeof info.hostname, "%s", v->data.string);
    PMIX_VALUE_RELEASE(v);
  } else {
    gethostname(info.hostname, sizeof info.hostname - 1);
  }
  direct = kvmode != 1; /* ASR_KV_SERVER=external: asrd started us */
  if (direct) {
    int nnodes = 1;
    if (get_long(PMIX_RANK_WILDCARD, PMIX_NUM_NODES, &n) == 0) nnodes = (int)n;
    if (asr__job_direct_prepare(me.nspace, info.rank, info.hostname, nnodes) != 0) {
      PMIx_Finalize(NULL, 0);
      return ASR_INVALID;
    }
    if (env_int(ASR_ENV_BOOTSTRAP_PORT, 0, &info.bootstrap_port) != 0) {
      PMIx_Finalize(NULL, 0);
      return ASR_INVALID;
    }
  }
  if (env_text(ASR_ENV_IF_ADDR, &a) != 0) { /* default 127.0.0.1 */
    PMIx_Finalize(NULL, 0);
    return ASR_INVALID;
  }
  snprintf(info.addr, sizeof info.addr, "%s", a);
  if (info.size <= 0 || info.lnc < 0 || info.lnc > 127) {
    asr_error("job", "the launcher gave an unusable job description (size %d, LNC %d)", info.size, info.lnc);
    PMIx_Finalize(NULL, 0);
    return ASR_INVALID;
  }
  /* Every rank's state from here on, a death during the fence below
   * included (job_ranks.c). */
  if (asr__job_ranks_init(me.nspace, info.size, info.rank, incarnation) != 0) {
    asr_error("job", "asr_job_init: out of memory for the table of %d ranks", info.size);
    PMIx_Finalize(NULL, 0);
    return ASR_INVALID;
  }
  /* Publish where peers reach us, then one collecting fence (none for a
   * restarted rank: the header says why). */
  pmix_value_t pv;
  PMIX_VALUE_LOAD(&pv, info.addr, PMIX_STRING);
  st = PMIx_Put(PMIX_GLOBAL, KEY_ADDR, &pv);
  PMIX_VALUE_DESTRUCT(&pv);
  uint32_t lnc = (uint32_t)info.lnc;
  PMIX_VALUE_LOAD(&pv, &lnc, PMIX_UINT32);
  if (st == PMIX_SUCCESS) st = PMIx_Put(PMIX_GLOBAL, KEY_LNC, &pv);
  if (st == PMIX_SUCCESS) st = PMIx_Commit();
  if (st == PMIX_SUCCESS && incarnation > 0) {
    /* what it missed (the deaths and restarts of other ranks) PMIx hands it
     * from its cache of events (common/asr_rank_ev.h) */
    asr_info("job", "rank %d restarted (incarnation %d): joining without the fence", info.rank, incarnation);
  } else if (st == PMIX_SUCCESS) {
    pmix_info_t collect;
    bool yes = true;
    PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    asr__report_set_fence(ASR_REPORT_FENCE_INIT);
    st = PMIx_Fence(NULL, 0, &collect, 1);
    asr__report_set_fence(ASR_REPORT_FENCE_NONE);
    PMIX_INFO_DESTRUCT(&collect);
    /* A rank that died during the fence (a job that outlives it): the
     * others go on; its address is missing, and it is FAILED or RESTARTING
     * once its daemon says so. */
    if (fence_status(st) == ASR_EAGAIN) {
      asr_warn("job", "a rank left during asr_job_init's fence (%s); going on without it",
               PMIx_Error_string(st));
      st = PMIX_SUCCESS;
    }
  }
  if (st != PMIX_SUCCESS) {
    asr_error("job", "publishing this rank's address failed: %s", PMIx_Error_string(st));
    return init_fail();
  }
  if (direct && asr__job_direct_secret(me.nspace) != 0) return init_fail();
  active = 1;
  asr__report_set_job(&info);
  asr_log_set_role("rank", info.rank);
  if (out) *out = info;
  return ASR_SUCCESS;
}

int asr_job_peer(int rank, char *addr, size_t addrlen, int *lnc) {
  if (!active || rank < 0 || rank >= info.size || !addr || !lnc) {
    asr_error("job", "asr_job_peer: %s",
              !active ? "call asr_job_init first" : "rank out of range or NULL output");
    return ASR_INVALID;
  }
  pmix_value_t *v = NULL;
  if (get_value((pmix_rank_t)rank, KEY_ADDR, &v) != PMIX_SUCCESS || v->type != PMIX_STRING) {
    if (v) PMIX_VALUE_RELEASE(v);
    asr_error("job", "rank %d published no address", rank);
    return ASR_INVALID;
  }
  snprintf(addr, addrlen, "%s", v->data.string);
  PMIX_VALUE_RELEASE(v);
  long n;
  if (get_long((pmix_rank_t)rank, KEY_LNC, &n) != 0) {
    asr_error("job", "rank %d published no LNC", rank);
    return ASR_INVALID;
  }
  *lnc = (int)n;
  return ASR_SUCCESS;
}

/* A fence without data over procs (NULL: every rank of the job): 0,
 * ASR_EAGAIN when a participant died during it (fence_status), or ASR_EIO
 * (logged). what is the report's name for it (report_fmt.h). */
static int fence(int what, const pmix_proc_t *procs, size_t nprocs) {
  asr__report_set_fence(what);
  pmix_status_t st = PMIx_Fence(procs, nprocs, NULL, 0);
  asr__report_set_fence(ASR_REPORT_FENCE_NONE);
  int rc = fence_status(st);
  if (rc == ASR_EIO) asr_error("job", "barrier failed: %s", PMIx_Error_string(st));
  if (rc == ASR_EAGAIN) asr_info("job", "barrier: a rank died during it (%s)", PMIx_Error_string(st));
  return rc;
}

/* Every ALIVE rank meets here (job_ranks.c keeps who is). While all are,
 * the fence is over the job's wildcard, as it always was; otherwise over
 * the explicit list of the ALIVE ranks. The two are different fences to
 * PMIx, so ranks whose views differ (one heard of a death, another not
 * yet) do not meet: the one that did not hear fences with the dead rank,
 * which PMIx completes with PMIX_ERR_PARTIAL_SUCCESS (fence_status), so it
 * returns ASR_PEER_FAILED too and, called again, meets the others. */
int asr_job_barrier(void) {
  if (!active) return ASR_INVALID;
  int *live = malloc((size_t)info.size * sizeof *live);
  if (!live) return ASR_INVALID;
  int n = 0;
  int whole = asr__job_ranks_live(live, &n);
  int rc;
  if (whole == 1) {
    rc = fence(ASR_REPORT_FENCE_BARRIER, NULL, 0);
  } else {
    pmix_proc_t *procs = calloc((size_t)(n ? n : 1), sizeof *procs);
    if (!procs) {
      free(live);
      return ASR_INVALID;
    }
    for (int i = 0; i < n; i++) PMIX_LOAD_PROCID(&procs[i], me.nspace, (pmix_rank_t)live[i]);
    rc = fence(ASR_REPORT_FENCE_BARRIER, procs, (size_t)n);
    free(procs);
  }
  free(live);
  if (rc == ASR_EIO) return ASR_INVALID;
  return rc == 0 && whole == 1 ? ASR_SUCCESS : ASR_PEER_FAILED;
}

int asr_job_abort(int status, const char *msg) {
  if (!active) return ASR_INVALID;
  PMIx_Abort(status, msg ? msg : "asr_job_abort", NULL, 0);
  return ASR_SUCCESS;
}

int asr__job_finalize_fence(void) {
  /* Without asrd one rank of each node serves the node's KV store: nobody
   * closes (and maybe takes the server away) before every rank is done. */
  if (!active || !direct) return 0;
  return fence(ASR_REPORT_FENCE_FINALIZE, NULL, 0) == 0 ? 0 : ASR_EIO;
}

int asr__job_finalize_pmix(void) {
  if (!active) return ASR_ESTATE;
  active = 0;
  asr__report_set_finalized();
  asr__job_ranks_fini();
  return PMIx_Finalize(NULL, 0) == PMIX_SUCCESS ? 0 : ASR_EIO;
}
