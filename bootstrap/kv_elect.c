/* kv_elect.c -- see kv_elect.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_rand.h"
#include "kv_elect.h"

int asr_kv_elect_path(uint16_t port, const char *host, char *path, size_t len) {
  const char *dir;
  int rc = asr_env_str(ASR_ENV_KV_LOCK_DIR, &dir, NULL, 0);
  if (rc) return rc;
  char tag[80] = "";
  if (host && *host) {
    /* the host name goes into a file name: anything but [A-Za-z0-9._-] becomes '_' */
    size_t k = snprintf(tag, sizeof tag, "_host_");
    for (const char *c = host; *c && k + 1 < sizeof tag; c++)
      tag[k++] = (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", *c)) ? *c : '_';
    tag[k] = '\0';
  }
  int n = snprintf(path, len, "%s/asr_kv_server_lock_uid_%u_port_%u%s", dir, (unsigned)getuid(),
                   (unsigned)port, tag);
  return n > 0 && (size_t)n < len ? 0 : ASR_ETOOBIG;
}

/* Opens (creating) the lock file for (port, host) and takes LOCK_EX on it
 * (waiting, or not): 0 and the fd, ASR_EBUSY when it would wait and may
 * not, or another ASR_E* (errbuf says why). */
static int elect(uint16_t port, const char *host, int wait, int *lock_fd, char *errbuf, size_t errlen) {
  char path[512];
  if (port == 0 || !lock_fd) return ASR_EINVAL;
  int prc = asr_kv_elect_path(port, host, path, sizeof path);
  if (prc == ASR_ECONFIG) {
    asr_env_check(ASR_ENV_KV_LOCK_DIR, errbuf, errlen); /* says why */
    return prc;
  }
  if (prc) {
    if (errbuf) snprintf(errbuf, errlen, "lock path too long (check ASR_KV_LOCK_DIR)");
    return ASR_ETOOBIG;
  }
  /* O_NOFOLLOW: the path is in a shared directory; never follow a planted link. */
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    int e = errno;
    if (errbuf) snprintf(errbuf, errlen, "cannot open lock file %s: %s", path, strerror(e));
    return asr_err_from_errno(e);
  }
  int rc;
  do {
    rc = flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int e = errno;
    close(fd);
    if (e == EWOULDBLOCK) return ASR_EBUSY;
    if (errbuf) snprintf(errbuf, errlen, "cannot lock %s: %s", path, strerror(e));
    return asr_err_from_errno(e);
  }
  *lock_fd = fd;
  return 0;
}

int asr_kv_elect_try(uint16_t port, const char *host, int *lock_fd, char *errbuf, size_t errlen) {
  return elect(port, host, 0, lock_fd, errbuf, errlen);
}

int asr_kv_elect_wait(uint16_t port, const char *host, int *lock_fd, char *errbuf, size_t errlen) {
  return elect(port, host, 1, lock_fd, errbuf, errlen);
}

void asr_kv_elect_release(int lock_fd) {
  if (lock_fd < 0) return;
  flock(lock_fd, LOCK_UN);
  close(lock_fd);
}

int asr_kv_elect_mark(int lock_fd) {
  char tok[64];
  int n = snprintf(tok, sizeof tok, "%ld %016llx\n", (long)getpid(), (unsigned long long)asr_rand_u64());
  if (ftruncate(lock_fd, 0) != 0 || pwrite(lock_fd, tok, (size_t)n, 0) != n) return asr_err_from_errno(errno);
  return 0;
}

int asr_kv_elect_read_mark(uint16_t port, const char *host, char *buf, size_t len) {
  char path[512];
  if (port == 0 || !buf || len == 0) return ASR_EINVAL;
  int rc = asr_kv_elect_path(port, host, path, sizeof path);
  if (rc) return rc;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return asr_err_from_errno(errno);
  ssize_t n = pread(fd, buf, len - 1, 0);
  int e = errno;
  close(fd);
  if (n < 0) return asr_err_from_errno(e);
  buf[n] = '\0';
  return 0;
}
