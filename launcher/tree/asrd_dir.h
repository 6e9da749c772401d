/*
 * asrd_dir.h -- the private directory asrd makes for its PMIx server (its
 * shared-memory segments and rendezvous files): BASE/asrd.PID.XXXXXX, made by
 * asrd (asrd_pmix.c) and removed by it at exit, or by asrrun when a local
 * asrd was killed before it could (asrrun.c).
 */
#ifndef ASR_ASRD_DIR_H
#define ASR_ASRD_DIR_H

#include <stddef.h>
#include <sys/types.h>

/* Makes this process's directory: under $TMPDIR when it is set, else under
 * /dev/shm when we can write there, else under /tmp. Returns 0 with its path
 * in out, or a negative ASR_E* code (errno, left as mkdtemp set it, says
 * why). */
int asrd_dir_make(char *out, size_t outlen);

/* Removes dir and everything in it. */
void asrd_dir_remove(const char *dir);

/* Removes the directories a dead asrd of this pid left, under every base
 * asrd_dir_make may use, those owned by this user only. Call it once the
 * daemon is reaped (until then the pid is still its). */
void asrd_dir_remove_of(pid_t pid);

#endif /* ASR_ASRD_DIR_H */
