/*
 * pmi2_job.c -- a PMI-2 program for tests/integration/test_mpi.c, built by
 * the test itself against Slurm's PMI-2 client library (Debian's
 * libpmi2-0-dev: <slurm/pmi2.h>, -lpmi2), the library MPICH builds
 * configured --with-pmi=pmi2 use; so asrd's PMI-2 server is checked
 * against a real client.
 *
 *   pmi2_job hello         every rank prints "hello R of N appnum A spawned S"
 *   pmi2_job exchange      every rank puts "key-R" (a value with ';' in it,
 *                          which the wire doubles), fences, and gets every
 *                          rank's key back: it prints "exchange R of N ok"
 *                          or says which value was wrong
 *   pmi2_job nodeattr      the first rank of each host puts the node
 *                          attribute "greeting"; every rank of the host asks
 *                          for it, waiting for its put: "nodeattr R got V"
 *   pmi2_job jobattr       rank 0 prints "jobattr PMI_process_mapping=V"
 *   pmi2_job missing       every rank asks for a key nobody put:
 *                          "missing R of N: get failed" (or what came)
 *   pmi2_job abort         every rank prints "ready R of N" and fences; then
 *                          the last rank calls PMI2_Abort, the others fence
 *                          again, which never completes
 *
 * A rank that runs as a singleton (no launcher reached) prints "of 1".
 */
#include <slurm/pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what, int rc) {
  fprintf(stderr, "pmi2_job: %s failed: %d\n", what, rc);
  exit(3);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "hello";
  int spawned = 0, size = 0, rank = 0, appnum = -1, rc;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if ((rc = PMI2_Init(&spawned, &size, &rank, &appnum)) != PMI2_SUCCESS) die("PMI2_Init", rc);
  char jobid[256] = "";
  if (size > 1 && (rc = PMI2_Job_GetId(jobid, sizeof jobid)) != PMI2_SUCCESS) die("PMI2_Job_GetId", rc);
  if (!strcmp(mode, "hello")) {
    printf("hello %d of %d appnum %d spawned %d\n", rank, size, appnum, spawned);
  } else if (!strcmp(mode, "exchange")) {
    char key[64], val[PMI2_MAX_VALLEN], want[PMI2_MAX_VALLEN];
    snprintf(key, sizeof key, "key-%d", rank);
    snprintf(val, sizeof val, "value;of;%d;;", rank);
    if ((rc = PMI2_KVS_Put(key, val)) != PMI2_SUCCESS) die("PMI2_KVS_Put", rc);
    if ((rc = PMI2_KVS_Fence()) != PMI2_SUCCESS) die("PMI2_KVS_Fence", rc);
    int bad = 0;
    for (int r = 0; r < size && !bad; r++) {
      int len = 0;
      snprintf(key, sizeof key, "key-%d", r);
      snprintf(want, sizeof want, "value;of;%d;;", r);
      memset(val, 0, sizeof val);
      rc = PMI2_KVS_Get(jobid, r, key, val, sizeof val, &len);
      if (rc != PMI2_SUCCESS || strcmp(val, want) != 0 || len != (int)strlen(want)) {
        printf("exchange %d of %d: rank %d's value is '%s' (%d bytes, rc %d), expected '%s'\n", rank, size, r,
               val, len, rc, want);
        bad = 1;
      }
    }
    if (!bad) printf("exchange %d of %d ok\n", rank, size);
  } else if (!strcmp(mode, "nodeattr")) {
    const char *local = getenv("ASR_LOCAL_RANK");
    if (local && !strcmp(local, "0")) {
      char v[64];
      snprintf(v, sizeof v, "hi-from-%d", rank);
      if ((rc = PMI2_Info_PutNodeAttr("greeting", v)) != PMI2_SUCCESS) die("PMI2_Info_PutNodeAttr", rc);
    }
    char got[PMI2_MAX_VALLEN] = "";
    int found = 0;
    rc = PMI2_Info_GetNodeAttr("greeting", got, sizeof got, &found, 1);
    if (rc != PMI2_SUCCESS || !found) die("PMI2_Info_GetNodeAttr", rc ? rc : -1);
    printf("nodeattr %d got %s\n", rank, got);
  } else if (!strcmp(mode, "jobattr")) {
    char v[PMI2_MAX_VALLEN] = "";
    int found = 0;
    rc = PMI2_Info_GetJobAttr("PMI_process_mapping", v, sizeof v, &found);
    if (rc != PMI2_SUCCESS) die("PMI2_Info_GetJobAttr", rc);
    if (rank == 0) printf("jobattr PMI_process_mapping=%s\n", found ? v : "(not found)");
  } else if (!strcmp(mode, "missing")) {
    char v[PMI2_MAX_VALLEN] = "";
    int len = 0;
    rc = PMI2_KVS_Get(jobid, 0, "nobody-put-this", v, sizeof v, &len);
    if (rc != PMI2_SUCCESS)
      printf("missing %d of %d: get failed\n", rank, size);
    else
      printf("missing %d of %d: got '%s'\n", rank, size, v);
  } else if (!strcmp(mode, "abort")) {
    printf("ready %d of %d\n", rank, size);
    if ((rc = PMI2_KVS_Fence()) != PMI2_SUCCESS) die("PMI2_KVS_Fence", rc);
    if (rank == size - 1) PMI2_Abort(1, "pmi2_job aborts the job");
    PMI2_KVS_Fence(); /* never completes: the last rank is gone */
  } else {
    fprintf(stderr, "pmi2_job: unknown mode '%s'\n", mode);
    return 2;
  }
  if ((rc = PMI2_Finalize()) != PMI2_SUCCESS) die("PMI2_Finalize", rc);
  return 0;
}
