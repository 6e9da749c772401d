/*
 * init_barrier.c -- the smallest asr job: asr_job_init, one asr_job_barrier,
 * asr_job_finalize, exit 0. tests/bench/launch_bench.sh times it under asrrun
 * beside MPI_Init + MPI_Barrier + MPI_Finalize (tests/bench/mpi_init_barrier.c).
 */
#include <stdio.h>

#include "asr.h"

int main(void) {
  asr_job_info_t info;
  int rc = asr_job_init(&info);
  if (rc != ASR_SUCCESS) {
    fprintf(stderr, "init_barrier: asr_job_init: %s\n", asr_strerror(rc));
    return 1;
  }
  rc = asr_job_barrier();
  if (rc != ASR_SUCCESS) {
    fprintf(stderr, "init_barrier: rank %d: asr_job_barrier: %s\n", info.rank, asr_strerror(rc));
    return 1;
  }
  rc = asr_job_finalize();
  if (rc != ASR_SUCCESS) {
    fprintf(stderr, "init_barrier: rank %d: asr_job_finalize: %s\n", info.rank, asr_strerror(rc));
    return 1;
  }
  return 0;
}
