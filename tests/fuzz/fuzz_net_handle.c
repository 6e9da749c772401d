/*
 * fuzz_net_handle.c -- libFuzzer target for the readers of the 128-byte
 * net handle (runtime/ofi.h asr__ofi_handle_path and asr__ofi_handle_peer,
 * runtime/handle_inc.h): the bytes a SEND comm takes from the KV store,
 * which any process that reaches the store can have written.
 *
 * The input is the handle (zero-padded to 128 bytes), then 8 bytes of
 * incarnations (the publisher's, the sender's). The target checks what the
 * readers promise:
 *  - a path it accepts is 1, 2 or 3, with a 24-bit provider tag;
 *  - an endpoint it accepts has its address inside the handle and a comm
 *    id a tag and a ring-form notification hold, and the same fields,
 *    written into an empty handle, read back the same;
 *  - writing incarnations touches only their 8 bytes, and only where the
 *    handle has room; a handle so written is taken by the sender it was
 *    written for, and any handle is taken outside a job.
 */
#include "config.h"

#include <string.h>

#include "asr_err.h"
#include "asr_le.h"
#include "fuzz.h"
#include "handle_inc.h"
#include "ofi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t h[ASR_OFI_HANDLE_LEN] = {0};
  memcpy(h, data, size < sizeof h ? size : sizeof h);
  uint32_t pub = 0, want = 0;
  if (size >= sizeof h + 8) {
    pub = asr_le_get32(data + sizeof h);
    want = asr_le_get32(data + sizeof h + 4);
  }

  int path = 0;
  uint32_t tag = 0;
  int rc = asr__ofi_handle_path(h, &path, &tag);
  FUZZ_ASSERT(rc == 0 || rc == ASR_EPROTO, "handle_path rc %d", rc);
  if (rc == 0)
    FUZZ_ASSERT((path == 1 || path == 2 || path == 3) && tag < (1u << 24), "path %d tag %x", path, tag);

  unsigned al = 0;
  uint32_t id = 0;
  rc = asr__ofi_handle_peer(h, &al, &id);
  FUZZ_ASSERT(rc == 0 || rc == ASR_EPROTO, "handle_peer rc %d", rc);
  if (rc == 0) {
    FUZZ_ASSERT(al >= 1 && 10 + al <= ASR_OFI_HANDLE_ORDINAL_OFF, "address of %u bytes", al);
    FUZZ_ASSERT(id >= 1 && id <= ASR_OFI_COMM_ID_MAX && ((uint64_t)id << 40) < (1ull << 63), "comm id %u",
                id);
    uint8_t again[ASR_OFI_HANDLE_LEN] = {0};
    asr_le_put32(again, ASR_OFI_HANDLE_MAGIC);
    asr_le_put32(again + ASR_OFI_HANDLE_COMM_OFF, id);
    asr_le_put16(again + 8, (uint16_t)al);
    unsigned al2 = 0;
    uint32_t id2 = 0;
    FUZZ_ASSERT(asr__ofi_handle_peer(again, &al2, &id2) == 0 && al2 == al && id2 == id, "fields read back");
  }

  int room = asr__handle_inc_room(h);
  FUZZ_ASSERT(room == 0 || room == 1, "room %d", room);
  FUZZ_ASSERT(asr__handle_inc_takes(h, 0, want, (long)pub), "a handle refused outside a job");
  uint8_t put[ASR_OFI_HANDLE_LEN];
  memcpy(put, h, sizeof h);
  asr__handle_inc_put(put, pub, (long)want);
  if (!room) {
    FUZZ_ASSERT(memcmp(put, h, sizeof h) == 0, "incarnations written into a handle without room");
  } else {
    FUZZ_ASSERT(memcmp(put, h, ASR_HANDLE_INC_OFF) == 0 &&
                    memcmp(put + ASR_OFI_HANDLE_ORDINAL_OFF, h + ASR_OFI_HANDLE_ORDINAL_OFF,
                           sizeof h - ASR_OFI_HANDLE_ORDINAL_OFF) == 0,
                "incarnations written outside their bytes");
    FUZZ_ASSERT(asr__handle_inc_takes(put, 1, want, (long)pub), "a handle refused by the sender it names");
  }
  return 0;
}
