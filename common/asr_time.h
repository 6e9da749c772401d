/* asr_time.h -- monotonic clock helpers. */
#ifndef ASR_TIME_H
#define ASR_TIME_H

#include <stdint.h>

/* Monotonic time in nanoseconds / milliseconds (CLOCK_MONOTONIC). */
uint64_t asr_time_ns(void);
uint64_t asr_time_ms(void);

/* Sleeps for ms milliseconds, resuming after signals. */
void asr_sleep_ms(unsigned ms);

#endif /* ASR_TIME_H */
