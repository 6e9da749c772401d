/*
 * kv_elect.h -- leader election for the KV server of one (host, port).
 *
 * Without asrd (srun direct launch, standalone tools) several processes on a
 * host may each want to serve the bootstrap port. They race on an exclusive
 * flock(2) of a file named by uid AND port (the seed uses
 * /tmp/nrt_kv_store_server_lock_uid_<uid>; adding the port keeps two jobs of
 * one user apart, and the host name keeps apart emulated hosts that share a
 * file system, such as network-namespace or Slurm-emulated nodes). Exactly
 * one holds the lock and serves; the kernel releases it when that process
 * exits, and a waiter can take over.
 */
#ifndef ASR_KV_ELECT_H
#define ASR_KV_ELECT_H

#include <stddef.h>
#include <stdint.h>

/* Writes the lock file path for port into path: $ASR_KV_LOCK_DIR (default
 * /tmp) + "/asr_kv_server_lock_uid_<uid>_port_<port>", + "_host_<host>" when
 * host is given (NULL or "" for none). Returns 0, ASR_ETOOBIG, or
 * ASR_ECONFIG for a bad ASR_KV_LOCK_DIR (asr_env_check says why). */
int asr_kv_elect_path(uint16_t port, const char *host, char *path, size_t len);

/* Tries to become the leader for port without waiting. Returns 0 and the
 * held lock's fd in *lock_fd (keep it open while serving), ASR_EBUSY when
 * another process leads, or another ASR_E* (errbuf says why). */
int asr_kv_elect_try(uint16_t port, const char *host, int *lock_fd, char *errbuf, size_t errlen);

/* Waits until this process becomes the leader (blocking flock). Same results
 * as asr_kv_elect_try, without ASR_EBUSY. */
int asr_kv_elect_wait(uint16_t port, const char *host, int *lock_fd, char *errbuf, size_t errlen);

/* Gives up the leadership. */
void asr_kv_elect_release(int lock_fd);

/* The leader's mark: a leader that serves writes a token of its own (pid and
 * 64 random bits) into the lock file, so that the other processes can tell
 * that the server changed -- a new leader took over, after a close or a
 * death -- and publish their pending keys again (runtime/kv_host.c). _mark
 * returns 0 or an ASR_E*; _read_mark copies the current token (possibly ""
 * or, during a write, part of one) into buf and returns 0, or an ASR_E*
 * when the file cannot be read. */
int asr_kv_elect_mark(int lock_fd);
int asr_kv_elect_read_mark(uint16_t port, const char *host, char *buf, size_t len);

#endif /* ASR_KV_ELECT_H */
