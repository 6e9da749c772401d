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
 *   mpi_job cvar NAME       every rank prints "cvar NAME R of N = V", the
 *                           value of the MPI_T control variable NAME (an
 *                           int or bool), or "= none" where there is none
 *
 * A rank that runs as a singleton (its MPI saw no launcher) prints "of 1":
 * the sums prove that every rank was in one job of N.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of the int-sized MPI_T control variable name, or -1 when the
 * MPI has none of that name. */
static int cvar_value(const char *name) {
  int provided, n = 0, value = -1;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return -1;
  MPI_T_cvar_get_num(&n);
  for (int i = 0; i < n && value < 0; i++) {
    char cname[256], desc[256];
    int nlen = sizeof cname, dlen = sizeof desc, verb, bind, scope, count;
    MPI_Datatype type;
    MPI_T_enum e;
    if (MPI_T_cvar_get_info(i, cname, &nlen, &verb, &type, &e, desc, &dlen, &bind, &scope) != MPI_SUCCESS)
      continue;
    if (strcmp(cname, name) != 0 || (type != MPI_INT && type != MPI_C_BOOL && type != MPI_UNSIGNED)) continue;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_handle_alloc(i, NULL, &h, &count) != MPI_SUCCESS) continue;
    int v = 0;
    if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) value = type == MPI_C_BOOL ? *(_Bool *)&v : v;
    MPI_T_cvar_handle_free(&h);
  }
  MPI_T_finalize();
  return value;
}

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
  } else if (!strcmp(mode, "cvar") && argc > 2) {
    int v = cvar_value(argv[2]);
    if (v < 0)
      printf("cvar %s %d of %d = none\n", argv[2], rank, size);
    else
      printf("cvar %s %d of %d = %d\n", argv[2], rank, size, v);
  } else {
    fprintf(stderr, "mpi_job: unknown mode '%s'\n", mode);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return 0;
}
