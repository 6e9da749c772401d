/*
 * kv_secret.h -- the per-job secret every KV frame carries (beyond the seed).
 *
 * asrrun generates 32 random bytes per job and hands them to daemons and ranks
 * as 64 hex digits in ASR_JOB_SECRET. A process without ASR_JOB_SECRET uses
 * the all-zero secret, which only a server started without one accepts.
 */
#ifndef ASR_KV_SECRET_H
#define ASR_KV_SECRET_H

#include <stddef.h>
#include <stdint.h>

#include "kv_frame.h"

#define ASR_KV_SECRET_HEX_LEN (2 * ASR_KV_SECRET_LEN)

/* Fills secret with fresh random bytes. */
int asr_kv_secret_generate(uint8_t secret[ASR_KV_SECRET_LEN]);

/* Writes 64 lowercase hex digits and a NUL into hex (65 bytes). */
void asr_kv_secret_to_hex(const uint8_t secret[ASR_KV_SECRET_LEN], char hex[ASR_KV_SECRET_HEX_LEN + 1]);

/* Parses exactly 64 hex digits. Returns 0 or ASR_EINVAL. */
int asr_kv_secret_from_hex(const char *hex, uint8_t secret[ASR_KV_SECRET_LEN]);

/* Reads ASR_JOB_SECRET (asr_env.h): zeros when unset; ASR_ECONFIG (and a
 * message in errbuf that does not repeat the value) when set but not 64 hex
 * digits. */
int asr_kv_secret_from_env(uint8_t secret[ASR_KV_SECRET_LEN], char *errbuf, size_t errlen);

/* Compares two secrets in constant time; 1 when equal. */
int asr_kv_secret_equal(const uint8_t *a, const uint8_t *b);

#endif /* ASR_KV_SECRET_H */
