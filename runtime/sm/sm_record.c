/*
 * sm_record.c -- the readers of what a peer wrote (sm_layout.h): one ring
 * record, for the receiver, whose every field is checked before it is
 * used, so that no stamp, kind, length or offset can send it outside its
 * ring; and the sm handle, for the sender, so that it opens only a region
 * of the form and the process the handle says.
 */
#include "config.h"

#include <string.h>

#include "asr_err.h"
#include "asr_le.h"
#include "asr_sm_name.h"
#include "sm_layout.h"

int asr__sm_rec_read(const uint8_t *ring, uint64_t ring_bytes, uint64_t off, uint64_t pos, uint64_t in_msg,
                     uint64_t msg_total, asr__sm_rec_t *r, const char **why) {
  *why = NULL;
  if (ring_bytes < 2 * ASR_SM_LINE || ring_bytes % ASR_SM_LINE || off >= ring_bytes || off % ASR_SM_LINE) {
    *why = "the ring position is out of range"; /* ours, not the peer's: never with a mapped ring */
    return ASR_EPROTO;
  }
  const uint8_t *h = ring + off;
  /* the stamp first (acquire): the rest of the record was written before it */
  uint32_t stamp = __atomic_load_n((const uint32_t *)(const void *)h, __ATOMIC_ACQUIRE);
  if (stamp != asr__sm_stamp(pos)) return 0;
  uint16_t kind, flags;
  uint32_t len;
  uint64_t total;
  memcpy(&kind, h + 4, 2);
  memcpy(&flags, h + 6, 2);
  memcpy(&len, h + 8, 4);
  memcpy(&total, h + 16, 8);
  uint64_t room = ring_bytes - off; /* to the ring's end */
  *r = (asr__sm_rec_t){.kind = kind, .flags = flags, .len = len, .total = total};
  if (kind == ASR_SM_PAD) {
    if (off == 0) return (*why = "a PAD record at the ring's start"), ASR_EPROTO;
    r->size = room;
    return 1;
  }
  if (len > room - ASR_SM_REC_HDR) return (*why = "a record longer than the ring has room for"), ASR_EPROTO;
  r->size = asr__sm_rec_size(len);
  switch (kind) {
    case ASR_SM_INLINE:
      if (in_msg) return (*why = "an INLINE record inside a pipelined message"), ASR_EPROTO;
      if (flags || total != len) return (*why = "an INLINE record whose total is not its length"), ASR_EPROTO;
      r->data = h + ASR_SM_REC_HDR;
      return 1;
    case ASR_SM_CMA: {
      if (in_msg) return (*why = "a CMA record inside a pipelined message"), ASR_EPROTO;
      uint64_t at, n;
      if (flags || len != 16) return (*why = "a CMA record whose payload is not 16 bytes"), ASR_EPROTO;
      memcpy(&at, h + ASR_SM_REC_HDR, 8);
      memcpy(&n, h + ASR_SM_REC_HDR + 8, 8);
      if (n != total || total == 0 || at + total < at)
        return (*why = "a CMA record whose extent is not its message"), ASR_EPROTO;
      r->cma_addr = at;
      return 1;
    }
    case ASR_SM_CHUNK: {
      int first = (flags & ASR_SM_FIRST) != 0, last = (flags & ASR_SM_LAST) != 0;
      if (flags & ~(unsigned)(ASR_SM_FIRST | ASR_SM_LAST))
        return (*why = "a CHUNK record with unknown flags"), ASR_EPROTO;
      if (len == 0) return (*why = "an empty CHUNK record"), ASR_EPROTO;
      if (first != (in_msg == 0)) return (*why = "a CHUNK record out of its message's order"), ASR_EPROTO;
      if (!first && total != msg_total)
        return (*why = "a CHUNK record of another message's length"), ASR_EPROTO;
      if (total < in_msg || len > total - in_msg)
        return (*why = "a CHUNK record beyond its message"), ASR_EPROTO;
      if (last != (in_msg + len == total))
        return (*why = "a CHUNK record whose last flag is wrong"), ASR_EPROTO;
      r->data = h + ASR_SM_REC_HDR;
      return 1;
    }
    default: return (*why = "a record of unknown kind"), ASR_EPROTO;
  }
}

int asr__sm_handle_read(const uint8_t handle[ASR_SM_HANDLE_LEN], unsigned uid, char name[ASR_SM_NAME_MAX],
                        uint32_t *region, const char **why) {
  *why = NULL;
  uint16_t n = asr_le_get16(handle + ASR_SM_H_NAMELEN);
  if (n < 2 || n >= ASR_SM_NAME_MAX || memchr(handle + ASR_SM_H_NAME, 0, n))
    return (*why = "its region name's length is out of range"), ASR_EPROTO;
  memcpy(name, handle + ASR_SM_H_NAME, n);
  name[n] = '\0';
  uint32_t pid = asr_le_get32(handle + ASR_SM_H_WHO);
  if (name[0] != '/' || strchr(name + 1, '/') || asr_sm_name_pid(name + 1, (uid_t)uid) <= 0 ||
      (uint32_t)asr_sm_name_pid(name + 1, (uid_t)uid) != pid) {
    name[0] = '\0';
    return (*why = "it names no sm region of its own process"), ASR_EPROTO;
  }
  uint32_t r = asr_le_get32(handle + ASR_SM_H_REGION);
  if (r < ASR_SM_REGION_MIN || r > ASR_SM_REGION_MAX || r % ASR_SM_LINE)
    return (*why = "its region size is out of range"), ASR_EPROTO;
  *region = r;
  return 0;
}
