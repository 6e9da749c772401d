/*
 * asrd_shm.h -- removes the shared-memory regions that libfabric's shm
 * provider left behind for ranks that are gone: asrd once it has reaped a
 * rank, and a watcher process once asrd itself is gone (see asrd_shm.c).
 */
#ifndef ASR_ASRD_SHM_H
#define ASR_ASRD_SHM_H

#include <sys/types.h>

/* Removes /dev/shm/<pid>:<uid>:<n> for each of the n processes in pids that
 * asrd has just reaped, those owned by this user only, and tells the
 * watcher that they are done with. Returns how many regions it removed. */
int asrd_shm_sweep(const pid_t *pids, int n);

/* Forks the watcher: a process that outlives asrd (even kill -9) and then
 * sweeps for every rank asrd started and did not sweep itself. Call it once,
 * early in main, while asrd is one thread with nothing open but its stdio.
 * Returns 0, or a negative ASR_E* (asrd then runs without one). */
int asrd_shm_watch_start(void);

/* Tells the watcher that rank process pid was started (asrd_ranks.c calls
 * it before anything could reap pid). Does nothing without a watcher. */
void asrd_shm_watch(pid_t pid);

#endif /* ASR_ASRD_SHM_H */
