/* kv_secret.c -- see kv_secret.h. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_env.h"
#include "asr_buf.h"
#include "asr_err.h"
#include "asr_rand.h"
#include "kv_secret.h"

int asr_kv_secret_generate(uint8_t secret[ASR_KV_SECRET_LEN]) {
  return asr_rand_bytes(secret, ASR_KV_SECRET_LEN);
}

void asr_kv_secret_to_hex(const uint8_t secret[ASR_KV_SECRET_LEN], char hex[ASR_KV_SECRET_HEX_LEN + 1]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < ASR_KV_SECRET_LEN; i++) {
    hex[2 * i] = digits[secret[i] >> 4];
    hex[2 * i + 1] = digits[secret[i] & 15];
  }
  hex[ASR_KV_SECRET_HEX_LEN] = '\0';
}

int asr_kv_secret_from_hex(const char *hex, uint8_t secret[ASR_KV_SECRET_LEN]) {
  if (!hex || strlen(hex) != ASR_KV_SECRET_HEX_LEN) return ASR_EINVAL;
  uint8_t tmp[ASR_KV_SECRET_LEN];
  for (int i = 0; i < ASR_KV_SECRET_LEN; i++) {
    int hi, lo;
    if (asr_hex_digit(hex[2 * i], &hi) != 0 || asr_hex_digit(hex[2 * i + 1], &lo) != 0) return ASR_EINVAL;
    tmp[i] = (uint8_t)(hi << 4 | lo);
  }
  memcpy(secret, tmp, sizeof tmp);
  return 0;
}

_Static_assert(ASR_KV_SECRET_HEX_LEN == 64, "asr_env.h's ASR_JOB_SECRET row says 64 hex digits");

int asr_kv_secret_from_env(uint8_t secret[ASR_KV_SECRET_LEN], char *errbuf, size_t errlen) {
  const char *s;
  int rc = asr_env_str(ASR_ENV_JOB_SECRET, &s, errbuf, errlen);
  if (rc) return rc;
  if (!s) {
    memset(secret, 0, ASR_KV_SECRET_LEN);
    return 0;
  }
  return asr_kv_secret_from_hex(s, secret); /* cannot fail: the row checked the digits */
}

int asr_kv_secret_equal(const uint8_t *a, const uint8_t *b) {
  uint8_t diff = 0;
  for (int i = 0; i < ASR_KV_SECRET_LEN; i++) diff |= (uint8_t)(a[i] ^ b[i]);
  return diff == 0;
}
