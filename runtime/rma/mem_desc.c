/*
 * mem_desc.c -- the memory descriptor's codec (mem_desc.h).
 */
#include "config.h"

#include <string.h>

#include "asr.h"
#include "asr_err.h"
#include "asr_le.h"
#include "asr_siphash.h"
#include "mem_desc.h"

#define BODY 64 /* the tagged bytes */

static void tag(const uint8_t secret[ASR_MEM_SECRET_LEN], const uint8_t *body, uint8_t out[16]) {
  asr_le_put64(out, asr_siphash24(secret, body, BODY));
  asr_le_put64(out + 8, asr_siphash24(secret + 16, body, BODY));
}

void asr__mem_desc_encode(const asr__mem_desc_t *d, const uint8_t secret[ASR_MEM_SECRET_LEN],
                          uint8_t out[ASR_MEM_DESC_LEN]) {
  memset(out, 0, ASR_MEM_DESC_LEN);
  asr_le_put32(out, ASR_MEM_DESC_MAGIC);
  asr_le_put16(out + 4, ASR_MEM_DESC_VERSION);
  asr_le_put16(out + 6, (uint16_t)d->access);
  asr_le_put32(out + 8, (uint32_t)d->lnc);
  asr_le_put32(out + 12, d->slot);
  memcpy(out + 16, d->who, ASR_MEM_WHO_LEN);
  asr_le_put32(out + 36, d->tab_fd);
  asr_le_put64(out + 40, d->va);
  asr_le_put64(out + 48, d->len);
  asr_le_put64(out + 56, d->key);
  tag(secret, out, out + BODY);
}

int asr__mem_desc_decode(const uint8_t *buf, size_t len, const uint8_t secret[ASR_MEM_SECRET_LEN],
                         asr__mem_desc_t *d, const char **why) {
#define REFUSE(w)      \
  do {                 \
    *why = (w);        \
    return ASR_EPROTO; \
  } while (0)
  if (!buf || len < 6) REFUSE("it is too short to be a descriptor");
  if (asr_le_get32(buf) != ASR_MEM_DESC_MAGIC) REFUSE("it is not a memory descriptor (no \"ASRX\" magic)");
  if (asr_le_get16(buf + 4) != ASR_MEM_DESC_VERSION)
    REFUSE("it is of another descriptor version (made by another libasr)");
  if (len != ASR_MEM_DESC_LEN) REFUSE("its length is not the descriptor's 80 bytes (truncated or padded?)");
  uint8_t want[16];
  tag(secret, buf, want);
  /* every byte compared, whatever differs first: the time taken says
   * nothing about the tag */
  unsigned diff = 0;
  for (int i = 0; i < 16; i++) diff |= (unsigned)(want[i] ^ buf[BODY + i]);
  if (diff) REFUSE("its tag is not this job's (a descriptor of another job, or damaged or forged)");
  unsigned access = asr_le_get16(buf + 6);
  uint32_t lnc = asr_le_get32(buf + 8);
  uint64_t va = asr_le_get64(buf + 40), n = asr_le_get64(buf + 48), key = asr_le_get64(buf + 56);
  if (access == 0 || (access & ~(ASR_MEM_REMOTE_READ | ASR_MEM_REMOTE_WRITE)))
    REFUSE("its access is not a mix of ASR_MEM_REMOTE_READ and ASR_MEM_REMOTE_WRITE");
  if (lnc >= ASR_MAX_LNC) REFUSE("its LNC is out of range");
  if (n == 0 || va + n < va) REFUSE("its region is empty or wraps around the address space");
  if (key == 0) REFUSE("its key is 0");
  d->access = access;
  d->lnc = (int)lnc;
  d->slot = asr_le_get32(buf + 12);
  d->tab_fd = asr_le_get32(buf + 36);
  memcpy(d->who, buf + 16, ASR_MEM_WHO_LEN);
  d->va = va;
  d->len = n;
  d->key = key;
  return 0;
#undef REFUSE
}
