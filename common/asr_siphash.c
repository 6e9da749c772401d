/*
 * asr_siphash.c -- SipHash-2-4 (asr_siphash.h): two compression rounds per
 * 8-byte word, four finalization rounds, words read little-endian.
 */
#include "config.h"

#include "asr_le.h"
#include "asr_siphash.h"

static inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

#define SIPROUND(v0, v1, v2, v3) \
  do {                           \
    v0 += v1;                    \
    v1 = rotl(v1, 13);           \
    v1 ^= v0;                    \
    v0 = rotl(v0, 32);           \
    v2 += v3;                    \
    v3 = rotl(v3, 16);           \
    v3 ^= v2;                    \
    v0 += v3;                    \
    v3 = rotl(v3, 21);           \
    v3 ^= v0;                    \
    v2 += v1;                    \
    v1 = rotl(v1, 17);           \
    v1 ^= v2;                    \
    v2 = rotl(v2, 32);           \
  } while (0)

uint64_t asr_siphash24(const uint8_t key[16], const uint8_t *msg, size_t len) {
  uint64_t k0 = asr_le_get64(key), k1 = asr_le_get64(key + 8);
  uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
  uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
  size_t whole = len - len % 8;
  for (size_t i = 0; i < whole; i += 8) {
    uint64_t m = asr_le_get64(msg + i);
    v3 ^= m;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    v0 ^= m;
  }
  /* the last word: the remaining bytes, and the length's low byte on top */
  uint64_t b = (uint64_t)len << 56;
  for (size_t i = 0; i < len % 8; i++) b |= (uint64_t)msg[whole + i] << (8 * i);
  v3 ^= b;
  SIPROUND(v0, v1, v2, v3);
  SIPROUND(v0, v1, v2, v3);
  v0 ^= b;
  v2 ^= 0xff;
  for (int i = 0; i < 4; i++) SIPROUND(v0, v1, v2, v3);
  return v0 ^ v1 ^ v2 ^ v3;
}
