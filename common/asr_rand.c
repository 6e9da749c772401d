/* asr_rand.c -- see asr_rand.h. */
#include "config.h"

#include <errno.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_rand.h"

int asr_rand_bytes(void *buf, size_t len) {
  unsigned char *p = buf;
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ASR_EIO;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

uint64_t asr_rand_u64(void) {
  static __thread uint64_t state;
  if (state == 0) {
    if (asr_rand_bytes(&state, sizeof state) != 0 || state == 0)
      state = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
  }
  uint64_t x = state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  state = x;
  return x;
}
