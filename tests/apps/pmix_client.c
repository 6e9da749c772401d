/*
 * pmix_client -- a job that uses nothing but libpmix's client API, so the
 * launcher's PMIx server is checked against the library rather than against
 * our own wrapper (bootstrap/job.c).
 *
 *   asrrun -n N pmix_client [--abort RANK:STATUS | --exit RANK:STATUS] [--fence-first]
 *
 * Every rank: PMIx_Init; PMIx_Get of PMIX_JOB_SIZE, PMIX_LOCAL_SIZE (job
 * level), PMIX_LOCAL_RANK and PMIX_HOSTNAME (its own); PMIx_Put of
 * "asrtest.value" (derived from its rank); PMIx_Commit; PMIx_Fence with
 * PMIX_COLLECT_DATA; PMIx_Get of every other rank's key, each checked;
 * PMIx_Finalize. When the launcher also set ASR_SIZE / ASR_RANK /
 * ASR_LOCAL_RANK / ASR_LOCAL_SIZE / ASR_HOSTNAME, the PMIx answers must agree
 * with them. It prints one summary line and exits 1 on any mismatch.
 *
 * With --abort R:S, rank R calls PMIx_Abort(S, ...) after PMIx_Init while the
 * others wait in a fence (the launcher must kill them and exit with S). With
 * --exit R:S, rank R exits with S without PMIx_Finalize instead. With
 * --fence-first as well, every rank first meets the others in a fence, so
 * that the abort or exit comes once the whole job is up (an application's
 * abort mid-run) rather than while other ranks may still be starting.
 */
#include "config.h"

#include <pmix.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY "asrtest.value"

static pmix_proc_t me;
static int failures;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "pmix_client rank %u: ", me.rank);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  failures++;
}

/* The value rank r publishes. */
static uint64_t value_of(uint32_t r) { return 0x5eed000000000000ull ^ ((uint64_t)r * 7919u + 13u); }

/* A numeric PMIx value as a long (the library chooses the width per key). */
static int number(const pmix_value_t *v, long *out) {
  switch (v->type) {
    case PMIX_UINT8: *out = v->data.uint8; return 0;
    case PMIX_UINT16: *out = v->data.uint16; return 0;
    case PMIX_UINT32: *out = (long)v->data.uint32; return 0;
    case PMIX_UINT64: *out = (long)v->data.uint64; return 0;
    case PMIX_INT: *out = v->data.integer; return 0;
    case PMIX_INT16: *out = v->data.int16; return 0;
    case PMIX_INT32: *out = v->data.int32; return 0;
    case PMIX_INT64: *out = (long)v->data.int64; return 0;
    case PMIX_UINT: *out = (long)v->data.uint; return 0;
    case PMIX_SIZE: *out = (long)v->data.size; return 0;
    default: return -1;
  }
}

static long get_number(const pmix_proc_t *who, const char *key) {
  pmix_value_t *v = NULL;
  pmix_status_t st = PMIx_Get(who, key, NULL, 0, &v);
  long n = -1;
  if (st != PMIX_SUCCESS || !v) {
    fail("PMIx_Get(%s) failed: %s", key, PMIx_Error_string(st));
    return -1;
  }
  if (number(v, &n) != 0) fail("PMIx_Get(%s) returned type %d, not a number", key, (int)v->type);
  PMIX_VALUE_RELEASE(v);
  return n;
}

/* If the launcher exported NAME, it must equal the PMIx answer. */
static void agree(const char *name, long pmix_value) {
  const char *e = getenv(name);
  if (e && *e && atol(e) != pmix_value)
    fail("%s=%s in the environment but PMIx says %ld", name, e, pmix_value);
}

int main(int argc, char **argv) {
  int abort_rank = -1, abort_status = 0, just_exit = 0, fence_first = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--fence-first") == 0) {
      fence_first = 1;
      continue;
    }
    if ((strcmp(argv[i], "--abort") == 0 || strcmp(argv[i], "--exit") == 0) && i + 1 < argc &&
        sscanf(argv[i + 1], "%d:%d", &abort_rank, &abort_status) == 2) {
      just_exit = argv[i][2] == 'e';
      i++;
      continue;
    }
    fprintf(stderr,
            "usage: pmix_client [--abort RANK:STATUS | --exit RANK:STATUS] [--fence-first]"
            "  (start it with asrrun -n N)\n");
    return 2;
  }
  if (fence_first && abort_rank < 0) {
    fprintf(stderr, "pmix_client: --fence-first goes with --abort or --exit\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  pmix_status_t st = PMIx_Init(&me, NULL, 0);
  if (st != PMIX_SUCCESS) {
    fprintf(stderr, "pmix_client: PMIx_Init failed (%s): start it with asrrun\n", PMIx_Error_string(st));
    return 1;
  }
  pmix_proc_t wild;
  PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);

  long size = get_number(&wild, PMIX_JOB_SIZE);
  long lsize = get_number(&wild, PMIX_LOCAL_SIZE);
  long lrank = get_number(&me, PMIX_LOCAL_RANK);
  char host[256] = "?";
  pmix_value_t *hv = NULL;
  if (PMIx_Get(&me, PMIX_HOSTNAME, NULL, 0, &hv) == PMIX_SUCCESS && hv && hv->type == PMIX_STRING)
    snprintf(host, sizeof host, "%s", hv->data.string);
  else
    fail("PMIx_Get(%s) gave no string", PMIX_HOSTNAME);
  if (hv) PMIX_VALUE_RELEASE(hv);
  const char *eh = getenv("ASR_HOSTNAME");
  if (eh && strcmp(eh, host) != 0) fail("ASR_HOSTNAME=%s but PMIx says %s", eh, host);
  agree("ASR_RANK", (long)me.rank);
  agree("ASR_SIZE", size);
  agree("ASR_LOCAL_RANK", lrank);
  agree("ASR_LOCAL_SIZE", lsize);
  if (size < 1 || (long)me.rank >= size) fail("bad job size %ld for rank %u", size, me.rank);
  if (lsize < 1 || lrank < 0 || lrank >= lsize) fail("bad local rank %ld of %ld", lrank, lsize);

  if (abort_rank >= 0) {
    if (fence_first && (st = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS)
      fail("PMIx_Fence before the abort: %s", PMIx_Error_string(st));
    if ((int)me.rank == abort_rank && just_exit) {
      printf("pmix_client rank %u: exiting with %d without PMIx_Finalize\n", me.rank, abort_status);
      fflush(stdout);
      _exit(abort_status);
    }
    if ((int)me.rank == abort_rank) {
      printf("pmix_client rank %u: calling PMIx_Abort(%d)\n", me.rank, abort_status);
      PMIx_Abort(abort_status, "pmix_client was asked to abort", NULL, 0);
      sleep(30); /* the launcher kills us */
      return 99;
    }
    /* The others wait in a fence that can never complete. */
    pmix_info_t inf;
    bool t = true;
    PMIX_INFO_LOAD(&inf, PMIX_COLLECT_DATA, &t, PMIX_BOOL);
    PMIx_Fence(NULL, 0, &inf, 1);
    sleep(30);
    return 98;
  }

  pmix_value_t val;
  PMIX_VALUE_CONSTRUCT(&val);
  val.type = PMIX_UINT64;
  val.data.uint64 = value_of(me.rank);
  if ((st = PMIx_Put(PMIX_GLOBAL, KEY, &val)) != PMIX_SUCCESS)
    fail("PMIx_Put(%s): %s", KEY, PMIx_Error_string(st));
  if ((st = PMIx_Commit()) != PMIX_SUCCESS) fail("PMIx_Commit: %s", PMIx_Error_string(st));
  pmix_info_t info;
  bool collect = true;
  PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  if ((st = PMIx_Fence(NULL, 0, &info, 1)) != PMIX_SUCCESS) fail("PMIx_Fence: %s", PMIx_Error_string(st));
  PMIX_INFO_DESTRUCT(&info);

  int verified = 0;
  for (long r = 0; r < size; r++) {
    if (r == (long)me.rank) continue;
    pmix_proc_t peer;
    PMIX_LOAD_PROCID(&peer, me.nspace, (pmix_rank_t)r);
    pmix_value_t *v = NULL;
    st = PMIx_Get(&peer, KEY, NULL, 0, &v);
    if (st != PMIX_SUCCESS || !v) {
      fail("PMIx_Get(%s) of rank %ld: %s", KEY, r, PMIx_Error_string(st));
    } else if (v->type != PMIX_UINT64 || v->data.uint64 != value_of((uint32_t)r)) {
      fail("rank %ld's key has the wrong value (type %d)", r, (int)v->type);
    } else {
      verified++;
    }
    if (v) PMIX_VALUE_RELEASE(v);
  }
  printf("pmix_client rank %u of %ld (local %ld of %ld, host %s): verified %d of %ld peers' keys%s\n",
         me.rank, size, lrank, lsize, host, verified, size - 1, failures ? ", FAILED" : ", all ok");
  if ((st = PMIx_Finalize(NULL, 0)) != PMIX_SUCCESS) fail("PMIx_Finalize: %s", PMIx_Error_string(st));
  return failures ? 1 : 0;
}
