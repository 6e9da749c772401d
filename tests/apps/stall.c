/*
 * stall.c -- jobs stuck on purpose, for the state report's tests
 * (tests/integration/test_stall.c, tests/netns/netns.sh). Two ranks or more;
 * rank 0 and rank 1 play the parts, the others (if any) wait in a barrier.
 *   stall accept          rank 0 connects to rank 1; rank 1 never accepts (it sleeps)
 *   stall recv BYTES      rank 0 connects to rank 1 and sends 4 x BYTES, testing them;
 *                         rank 1 accepts and never posts a receive (it sleeps)
 *   stall sleep [HOOK]    rank 0 posts a receive from rank 1; rank 1 connects and sleeps;
 *                         HOOK (exit, mute) is rank 1's ASR_TEST_REPORT: its report thread
 *                         exits the process, or never answers, when asked
 *   stall barrier         every rank but the last calls asr_job_barrier; the last sleeps
 *   stall nolib           rank 1 exec's sleep before asr_job_init (no libasr); the rest
 *                         wait in asr_job_init's fence
 *   stall run SECONDS [STOP]
 *                         rank 0 and 1 exchange 64 KiB every 10 ms for SECONDS, or
 *                         until the file STOP exists (verified), then every rank
 *                         finalizes and exits 0; "rank N: running" once connected
 * Each part prints "rank N: waiting" once it is where it stays.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "asr.h"

static int rank;

static void say(const char *what) {
  printf("rank %d: %s\n", rank, what);
  fflush(stdout);
}

static void forever(void) {
  say("waiting");
  for (;;) sleep(1000);
}

static void die(const char *what, int rc) {
  fprintf(stderr, "stall: rank %d: %s: %s\n", rank, what, asr_strerror(rc));
  exit(1);
}

static asr_comm_t *connect_wait(int peer, int send) {
  asr_comm_t *c;
  int rc = send ? asr_job_connect(peer, &c) : asr_job_accept(peer, &c);
  if (rc) die(send ? "asr_job_connect" : "asr_job_accept", rc);
  rc = asr_comm_wait_connected(c, -1);
  if (rc) die("asr_comm_wait_connected", rc);
  return c;
}

/* Tests req until done, or forever: a stuck request is what the test wants. */
static void test_until_done(asr_request_t *r) {
  int done = 0;
  while (!done) {
    int rc = asr_test(r, &done, NULL);
    if (rc) die("asr_test", rc);
    if (!done) usleep(1000);
  }
}

static int run_for(double secs, const char *stop, asr_job_info_t *me) {
  if (me->rank > 1) return 0;
  size_t n = 64 << 10;
  asr_tensor_t *t = NULL;
  int rc = asr_tensor_alloc(n, &t);
  if (rc) die("asr_tensor_alloc", rc);
  unsigned char *p = asr_tensor_va(t);
  asr_comm_t *c = connect_wait(1 - me->rank, me->rank == 0);
  say("running");
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (unsigned it = 0;; it++) {
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    /* both sides agree on the count: rank 0 decides and says so in byte 0 */
    if (me->rank == 0) {
      memset(p, (int)(it & 0xff), n);
      p[0] = el >= secs || (stop && access(stop, F_OK) == 0) ? 1 : 0;
    }
    asr_request_t *r;
    rc = me->rank == 0 ? asr_isend(c, t, 0, n, &r) : asr_irecv(c, t, 0, n, &r);
    if (rc) die("post", rc);
    test_until_done(r);
    if (me->rank == 1)
      for (size_t i = 1; i < n; i++)
        if (p[i] != (unsigned char)(it & 0xff)) {
          fprintf(stderr, "stall: rank 1: byte %zu of message %u is %u\n", i, it, p[i]);
          exit(1);
        }
    if (p[0] == 1) break;
    usleep(10000);
  }
  asr_comm_close(c);
  asr_tensor_free(t);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  const char *mode = argv[1];
  const char *r = getenv("ASR_RANK"), *s = getenv("ASR_SIZE");
  rank = r ? atoi(r) : -1;
  int size = s ? atoi(s) : 0;
  if (!strcmp(mode, "nolib") && rank == 1) {
    execl("/bin/sleep", "sleep", "3600", (char *)NULL);
    return 127;
  }
  if (!strcmp(mode, "sleep") && argc > 2 && rank == 1) setenv("ASR_TEST_REPORT", argv[2], 1);
  asr_job_info_t me;
  int rc = asr_job_init(&me);
  if (rc) die("asr_job_init", rc);
  if (!strcmp(mode, "barrier")) {
    if (rank == size - 1) forever();
    say("waiting");
    asr_job_barrier();
    return 1;
  }
  if (!strcmp(mode, "run")) {
    run_for(argc > 2 ? atof(argv[2]) : 5, argc > 3 ? argv[3] : NULL, &me);
    asr_job_finalize();
    say("done");
    return 0;
  }
  if (rank > 1) {
    say("waiting");
    asr_job_barrier();
    return 1;
  }
  if (!strcmp(mode, "accept")) {
    if (rank == 1) forever();
    asr_comm_t *c;
    rc = asr_job_connect(1, &c);
    if (rc) die("asr_job_connect", rc);
    say("waiting");
    asr_comm_wait_connected(c, -1);
    return 1;
  }
  if (!strcmp(mode, "recv")) {
    size_t n = argc > 2 ? (size_t)atol(argv[2]) : 64;
    asr_comm_t *c = connect_wait(1 - rank, rank == 0);
    if (rank == 1) forever();
    asr_tensor_t *t;
    rc = asr_tensor_alloc(n, &t);
    if (rc) die("asr_tensor_alloc", rc);
    memset(asr_tensor_va(t), 0x5a, n);
    asr_request_t *reqs[4];
    for (int i = 0; i < 4; i++) {
      rc = asr_isend(c, t, 0, n, &reqs[i]);
      if (rc) die("asr_isend", rc);
    }
    say("waiting");
    for (int i = 0; i < 4; i++) test_until_done(reqs[i]);
    forever();
  }
  if (!strcmp(mode, "sleep")) {
    asr_comm_t *c = connect_wait(1 - rank, rank == 1);
    if (rank == 1) forever();
    asr_tensor_t *t;
    rc = asr_tensor_alloc(4096, &t);
    if (rc) die("asr_tensor_alloc", rc);
    asr_request_t *req;
    rc = asr_irecv(c, t, 0, 4096, &req);
    if (rc) die("asr_irecv", rc);
    say("waiting");
    test_until_done(req);
    return 1;
  }
  return 2;
}
