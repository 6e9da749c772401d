/* asr_rand.h -- randomness for secrets (getrandom) and retry jitter. */
#ifndef ASR_RAND_H
#define ASR_RAND_H

#include <stddef.h>
#include <stdint.h>

/* Fills buf with len bytes from the kernel's CSPRNG. Returns 0 or ASR_EIO. */
int asr_rand_bytes(void *buf, size_t len);

/* A fast per-thread pseudo-random number (xorshift, seeded from getrandom);
 * for jitter only, never for secrets. */
uint64_t asr_rand_u64(void);

#endif /* ASR_RAND_H */
