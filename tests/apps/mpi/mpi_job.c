/*
 * mpi_job.c -- the MPI program of tests/integration/test_mpi.c, built by
 * the test itself with each MPI's compiler (mpicc.openmpi, mpicc.mpich),
 * so that the launcher is checked against real MPI libraries.
 *
 *   mpi_job hello           every rank prints "hello R of N"
 *   mpi_job ring            a token goes 0 -> 1 -> ... -> N-1 -> 0, each rank
 *                           adding its rank + 1; rank 0 prints "ring N sum S"
 *   mpi_job allreduce       MPI_Allreduce of rank + 1 over MPI_COMM_WORLD:
 *                           every rank prints "allreduce R of N sum S"
 *   mpi_job abort CODE      every rank prints "ready R of N"; after a
 *                           barrier the last rank calls
 *                           MPI_Abort(MPI_COMM_WORLD, CODE); the others wait
 *                           in a second barrier that never completes
 *   mpi_job fail CODE       the same, but the last rank just exits CODE
 *                           (no MPI_Finalize)
 *
 * A rank that runs as a singleton (its MPI saw no launcher) prints "of 1":
 * the sums prove that every rank was in one job of N.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "hello";
  int code = argc > 2 ? atoi(argv[2]) : 1;
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!strcmp(mode, "hello")) {
    printf("hello %d of %d\n", rank, size);
  } else if (!strcmp(mode, "ring")) {
    long token = 0;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    if (size == 1) {
      token = 1;
    } else if (rank == 0) {
      token = 1;
      MPI_Send(&token, 1, MPI_LONG, next, 7, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_LONG, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&token, 1, MPI_LONG, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      token += rank + 1;
      MPI_Send(&token, 1, MPI_LONG, next, 7, MPI_COMM_WORLD);
    }
    if (rank == 0) printf("ring %d sum %ld\n", size, token);
  } else if (!strcmp(mode, "allreduce")) {
    long mine = rank + 1, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    printf("allreduce %d of %d sum %ld\n", rank, size, sum);
  } else if (!strcmp(mode, "abort") || !strcmp(mode, "fail")) {
    printf("ready %d of %d\n", rank, size); /* before the barrier: every line is out */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == size - 1) {
      if (!strcmp(mode, "abort")) MPI_Abort(MPI_COMM_WORLD, code);
      exit(code);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* never completes: the last rank is gone */
  } else {
    fprintf(stderr, "mpi_job: unknown mode '%s'\n", mode);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return 0;
}
