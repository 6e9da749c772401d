/*
 * asr_siphash.h -- SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast
 * short-input PRF", 2012): a keyed 64-bit tag of a short message. asr tags
 * what a peer hands back to a process with a key only the job knows (a
 * memory descriptor, runtime/rma/mem_desc.h, with the job secret), so that
 * bytes it did not make, or made in another job, are refused.
 */
#ifndef ASR_SIPHASH_H
#define ASR_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* The tag of [msg, msg + len) under the 16-byte key. */
uint64_t asr_siphash24(const uint8_t key[16], const uint8_t *msg, size_t len);

#endif /* ASR_SIPHASH_H */
