/*
 * mpi_init_barrier.c -- the MPI side of tests/bench/launch_bench.sh:
 * MPI_Init, MPI_Barrier, MPI_Finalize, exit 0. Not part of the automake
 * build; the script compiles it with mpicc.openmpi / mpicc.mpich when they
 * are installed.
 */
#include <mpi.h>

int main(int argc, char **argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
  if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) return 1;
  if (MPI_Finalize() != MPI_SUCCESS) return 1;
  return 0;
}
