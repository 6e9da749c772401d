/*
 * sendrecv -- the smallest asr job: rank 0 sends 1 MiB to rank 1, which
 * checks every byte. Ranks beyond the first two only join and leave.
 *
 *   asrrun -n 2 build/examples/sendrecv
 *
 * Build it against an installed asr with
 *   cc sendrecv.c $(pkg-config --cflags --libs asr) -o sendrecv
 */
#include <stdio.h>
#include <stdlib.h>

#include "asr.h"

#define BYTES (1u << 20)

static asr_job_info_t me;

/* Every asr call returns 0 or a status asr_strerror() explains. */
static void check(int st, const char *what) {
  if (st == 0) return;
  fprintf(stderr, "rank %d: %s: %s\n", me.rank, what, asr_strerror(st));
  exit(1);
}

static unsigned char pattern(size_t i) { return (unsigned char)(i * 7 + 3); }

int main(void) {
  /* Join the job asrrun (or srun --mpi=pmix) started: rank, size, LNC. */
  check(asr_job_init(&me), "asr_job_init");
  if (me.size < 2) {
    fprintf(stderr, "sendrecv needs two ranks: asrrun -n 2 sendrecv\n");
    asr_job_finalize();
    return 2;
  }
  if (me.rank <= 1) {
    /* A tensor is memory libasr may register with the network. */
    asr_tensor_t *t;
    check(asr_tensor_alloc(BYTES, &t), "asr_tensor_alloc");
    unsigned char *buf = asr_tensor_va(t);
    asr_comm_t *comm;
    asr_request_t *req;
    if (me.rank == 0) {
      for (size_t i = 0; i < BYTES; i++) buf[i] = pattern(i);
      /* A send comm to rank 1; it connects in the background. */
      check(asr_job_connect(1, &comm), "asr_job_connect");
      check(asr_comm_wait_connected(comm, 30000), "connecting to rank 1");
      check(asr_isend(comm, t, 0, BYTES, &req), "asr_isend");
    } else {
      check(asr_job_accept(0, &comm), "asr_job_accept");
      check(asr_comm_wait_connected(comm, 30000), "accepting rank 0");
      check(asr_irecv(comm, t, 0, BYTES, &req), "asr_irecv");
    }
    /* Completion is polled: asr_test says when the request is done. */
    int done = 0;
    size_t got = 0;
    while (!done) check(asr_test(req, &done, &got), "asr_test");
    if (me.rank == 1) {
      size_t bad = 0;
      for (size_t i = 0; i < got; i++) bad += buf[i] != pattern(i);
      if (got != BYTES || bad) {
        fprintf(stderr, "rank 1: received %zu bytes, %zu of them wrong\n", got, bad);
        return 1;
      }
      printf("rank 1: received %zu bytes from rank 0, all verified\n", got);
    }
    check(asr_comm_close(comm), "asr_comm_close");
    asr_tensor_free(t);
  }
  check(asr_job_finalize(), "asr_job_finalize");
  return 0;
}
