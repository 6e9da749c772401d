/*
 * asr_le.h -- little-endian integers in byte buffers: the one encoder and
 * decoder of the integers of every binary format asr writes (the control
 * channel, ctl.h, and its payloads, asr_buf.h; the KV frame, kv_frame.h; the
 * handle key, kv_keys.h; the report channel, report_fmt.h; the listen
 * handle, connect message, mailbox and "who" of runtime/ofi.h).
 *
 * Byte shifts, not memcpy and htole*: the bytes are little-endian on every
 * host by construction, p needs no alignment, and no <endian.h> is needed.
 * GCC and clang turn each function into one load or store on a
 * little-endian host. p must hold the 2, 4 or 8 bytes named; nothing is
 * checked here (the callers own the bounds).
 */
#ifndef ASR_LE_H
#define ASR_LE_H

#include <stdint.h>

static inline void asr_le_put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static inline void asr_le_put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline void asr_le_put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t asr_le_get16(const uint8_t *p) { return (uint16_t)(p[0] | ((unsigned)p[1] << 8)); }

static inline uint32_t asr_le_get32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t asr_le_get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

#endif /* ASR_LE_H */
