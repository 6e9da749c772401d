/*
 * early_exit.c -- a job in which one rank leaves early:
 *   early_exit noinit R     rank R exits 0 at once, without asr_job_init
 *   early_exit nofinal R    rank R calls asr_job_init, then exits 0 without
 *                           finalizing while the others wait in a barrier
 *                           (R "all": every rank does)
 *   early_exit killed R     rank R calls asr_job_init, then dies of SIGKILL; the
 *                           others leave (exit 0 without finalizing) once
 *                           the barrier it left fails
 *   early_exit none         every rank: init, barrier, finalize (the control)
 * Every other rank calls asr_job_init, asr_job_barrier and asr_job_finalize,
 * printing "rank N: joined" and "rank N: done".
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asr.h"

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  const char *r = getenv("ASR_RANK");
  int rank = r ? atoi(r) : -1;
  int all = argc > 2 && !strcmp(argv[2], "all");
  int who = all ? rank : argc > 2 ? atoi(argv[2]) : -1;
  if (!strcmp(argv[1], "noinit") && rank == who) return 0;
  asr_job_info_t info;
  int rc = asr_job_init(&info);
  if (rc != ASR_SUCCESS) {
    fprintf(stderr, "early_exit: asr_job_init: %s\n", asr_strerror(rc));
    return 1;
  }
  printf("rank %d: joined\n", info.rank);
  fflush(stdout);
  if (!strcmp(argv[1], "nofinal") && rank == who) return 0;
  if (!strcmp(argv[1], "killed") && rank == who) raise(SIGKILL);
  rc = asr_job_barrier();
  if (!strcmp(argv[1], "killed")) {
    printf("rank %d: barrier: %s; leaving\n", info.rank, asr_strerror(rc));
    return 0;
  }
  if (rc != ASR_SUCCESS) {
    fprintf(stderr, "early_exit: rank %d: asr_job_barrier: %s\n", info.rank, asr_strerror(rc));
    return 1;
  }
  asr_job_finalize();
  printf("rank %d: done\n", info.rank);
  return 0;
}
