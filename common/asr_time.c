/* asr_time.c -- see asr_time.h. */
#include "config.h"

#include <errno.h>
#include <time.h>

#include "asr_time.h"

uint64_t asr_time_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t asr_time_ms(void) { return asr_time_ns() / 1000000ull; }

void asr_sleep_ms(unsigned ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}
