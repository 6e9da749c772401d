/*
 * asr_sm_name.h -- the /dev/shm name of an sm region (runtime/sm/sm_layout.h),
 * in one place for the runtime that makes it and asrd, which removes what
 * a killed rank left (launcher/asrd/asrd_shm.c):
 *     asrsm:<pid>:<uid>:<lnc>:<n>
 * pid and uid of the process that made it (the RECV side), its LNC, and a
 * number that process never gives twice.
 */
#ifndef ASR_SM_NAME_H
#define ASR_SM_NAME_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define ASR_SM_NAME_PREFIX "asrsm:"

/* Writes the name (with a leading '/', for shm_open) into buf; the length
 * snprintf returns. */
static inline int asr_sm_name(char *buf, size_t len, pid_t pid, uid_t uid, int lnc, unsigned long n) {
  return snprintf(buf, len, "/" ASR_SM_NAME_PREFIX "%ld:%lu:%d:%lu", (long)pid, (unsigned long)uid, lnc, n);
}

/* The pid of an sm region name in /dev/shm (no '/') made by user uid, or 0
 * when name is not one. */
static inline pid_t asr_sm_name_pid(const char *name, uid_t uid) {
  if (strncmp(name, ASR_SM_NAME_PREFIX, sizeof ASR_SM_NAME_PREFIX - 1) != 0) return 0;
  const char *p = name + sizeof ASR_SM_NAME_PREFIX - 1;
  long v[4];
  for (int i = 0; i < 4; i++) {
    char *end;
    if (*p < '0' || *p > '9') return 0;
    v[i] = strtol(p, &end, 10);
    if (*end != (i < 3 ? ':' : '\0')) return 0;
    p = end + 1;
  }
  return v[0] > 0 && v[1] == (long)uid ? (pid_t)v[0] : 0;
}

#endif /* ASR_SM_NAME_H */
