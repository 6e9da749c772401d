/*
 * asrd_shm.h -- removes the shared-memory regions that libfabric's shm
 * provider left behind for ranks that are gone (see asrd_shm.c).
 */
#ifndef ASR_ASRD_SHM_H
#define ASR_ASRD_SHM_H

#include <sys/types.h>

/* Removes /dev/shm/<pid>:<uid>:<n> for each of the n processes in pids that
 * asrd has just reaped, those owned by this user only. Returns how many
 * regions it removed. */
int asrd_shm_sweep(const pid_t *pids, int n);

#endif /* ASR_ASRD_SHM_H */
