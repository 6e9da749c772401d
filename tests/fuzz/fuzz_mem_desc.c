/*
 * fuzz_mem_desc.c -- libFuzzer target for the memory descriptor's decoder
 * (runtime/rma/mem_desc.c asr__mem_desc_decode): the bytes asr_mem_import
 * takes from a peer, which may come from anywhere (a send, a KV value, a
 * file).
 *
 * The first byte picks what the rest is:
 *   0: the fields of a descriptor, encoded with the target's secret and
 *      decoded again: fields the encoder can hold come back as they were
 *      (access, LNC and region as the decoder accepts them), and one byte
 *      changed anywhere is refused;
 *   else: a descriptor as a peer hands it over, decoded with the secret.
 * A descriptor that decodes has fields inside the decoder's promises and
 * encodes back to the same bytes; one that does not says why.
 */
#include "config.h"

#include <string.h>

#include "asr.h"
#include "asr_err.h"
#include "fuzz.h"
#include "mem_desc.h"

static const uint8_t secret[ASR_MEM_SECRET_LEN] = "fuzz: the job secret of a test..";

static void check(const asr__mem_desc_t *d) {
  FUZZ_ASSERT(d->access && !(d->access & ~(ASR_MEM_REMOTE_READ | ASR_MEM_REMOTE_WRITE)), "access %u",
              d->access);
  FUZZ_ASSERT(d->lnc >= 0 && d->lnc < ASR_MAX_LNC, "lnc %d", d->lnc);
  FUZZ_ASSERT(d->len > 0 && d->va + d->len >= d->va, "region");
  FUZZ_ASSERT(d->key != 0, "key");
}

static uint64_t u64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  asr__mem_desc_t d, back;
  const char *why = NULL;
  uint8_t enc[ASR_MEM_DESC_LEN];
  if (data[0] == 0 && size >= 1 + 4 + 4 + 4 + 4 + 20 + 24) {
    const uint8_t *p = data + 1;
    memset(&d, 0, sizeof d);
    d.access = p[0] % 3 + 1;
    d.lnc = p[1] % ASR_MAX_LNC;
    memcpy(&d.slot, p + 4, 4);
    memcpy(&d.tab_fd, p + 8, 4);
    memcpy(d.who, p + 16, ASR_MEM_WHO_LEN);
    d.va = u64(p + 36);
    d.len = u64(p + 44) | 1;
    if (d.va + d.len < d.va) d.va = 0;
    d.key = u64(p + 52) | 1;
    asr__mem_desc_encode(&d, secret, enc);
    FUZZ_ASSERT(asr__mem_desc_decode(enc, sizeof enc, secret, &back, &why) == 0, "its own encoding: %s", why);
    FUZZ_ASSERT(back.access == d.access && back.lnc == d.lnc && back.slot == d.slot &&
                    back.tab_fd == d.tab_fd && !memcmp(back.who, d.who, ASR_MEM_WHO_LEN) && back.va == d.va &&
                    back.len == d.len && back.key == d.key,
                "the fields came back changed");
    size_t at = p[2] % ASR_MEM_DESC_LEN;
    enc[at] ^= (uint8_t)(p[3] | 1);
    FUZZ_ASSERT(asr__mem_desc_decode(enc, sizeof enc, secret, &back, &why) != 0, "byte %zu changed, accepted",
                at);
    FUZZ_ASSERT(why && *why, "a refusal says why");
    return 0;
  }
  int rc = asr__mem_desc_decode(data + 1, size - 1, secret, &d, &why);
  if (rc != 0) {
    FUZZ_ASSERT(rc == ASR_EPROTO && why && *why, "a refusal is ASR_EPROTO and says why");
    return 0;
  }
  check(&d);
  asr__mem_desc_encode(&d, secret, enc);
  FUZZ_ASSERT(size - 1 == ASR_MEM_DESC_LEN && !memcmp(enc, data + 1, ASR_MEM_DESC_LEN), "not a fixed point");
  return 0;
}
