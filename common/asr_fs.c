/* asr_fs.c -- see asr_fs.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_fs.h"

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

void asr_rm_tree(const char *dir) { nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

/* Reads fd to its end into a buffer that grows by doubling up to max + 2
 * bytes: max + 1 of data, so that a file of exactly max bytes is told apart
 * from a longer one without reading the longer one's rest, and the NUL. */
static int read_all(int fd, size_t max, char **out, size_t *len) {
  size_t cap = max + 2 < 4096 ? max + 2 : 4096, used = 0;
  char *buf = malloc(cap);
  if (!buf) return ASR_ENOMEM;
  for (;;) {
    if (used + 1 == cap) { /* full but for the NUL's byte: used <= max, so cap <= max + 1 */
      size_t ncap = cap * 2 < max + 2 ? cap * 2 : max + 2;
      char *nbuf = realloc(buf, ncap);
      if (!nbuf) {
        free(buf);
        errno = ENOMEM;
        return ASR_ENOMEM;
      }
      buf = nbuf;
      cap = ncap;
    }
    ssize_t n = read(fd, buf + used, cap - 1 - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      free(buf);
      errno = err;
      return asr_err_from_errno(err);
    }
    if (n == 0) break;
    used += (size_t)n;
    if (used > max) {
      free(buf);
      errno = EFBIG;
      return ASR_ETOOBIG;
    }
  }
  buf[used] = '\0';
  *out = buf;
  *len = used;
  return 0;
}

int asr_fs_read_file(const char *path, size_t max, char **out, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return asr_err_from_errno(errno);
  int rc = read_all(fd, max, out, len), err = errno;
  close(fd);
  errno = err;
  return rc;
}
