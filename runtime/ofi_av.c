/*
 * ofi_av.c -- each peer address in an LNC's address vector once.
 *
 * Every SEND comm inserts its peer's address (asr__ofi_connect) and every
 * RECV comm that answers its connector inserts the connector's
 * (asr__ofi_ctl_to_send), so in a mesh each peer's address would go in
 * twice, and again for every later comm between the same two LNCs. Beyond
 * the seed (whose one comm per peer inserted once): libfabric 1.17's shm
 * counts each insert as a new entry, the same address included, and refuses
 * any after 256 (smr_av_insert), so a 160-rank mesh or the 129th
 * connect/close cycle between two LNCs failed; and its fi_av_remove drops
 * the peer at the first remove of an address inserted several times. So an
 * address goes in once per endpoint, the first time a comm needs it, and
 * stays until the endpoint is closed (asr__ofi_close); a comm only looks its
 * fi_addr_t up here. With shm an LNC then reaches at most 256 distinct peer
 * endpoints from asr_init to asr_close, which the error says.
 *
 * Called with the control lock held (ofi.c: ctl_lock), like every AV call.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "asr_err.h"
#include "asr_log.h"
#include "ofi.h"

struct asr__ofi_av_entry {
  uint16_t len;
  uint8_t addr[ASR_OFI_ADDR_MAX];
  fi_addr_t fi;
};

int asr__ofi_av_get(asr__ofi_t *o, const uint8_t *addr, size_t len, fi_addr_t *out) {
  if (len == 0 || len > ASR_OFI_ADDR_MAX) return ASR_EPROTO;
  for (int i = 0; i < o->avn; i++)
    if (o->avtab[i].len == len && memcmp(o->avtab[i].addr, addr, len) == 0) {
      *out = o->avtab[i].fi;
      return 0;
    }
  if (o->avn == o->avcap) {
    int cap = o->avcap ? o->avcap * 2 : 64;
    struct asr__ofi_av_entry *t = realloc(o->avtab, (size_t)cap * sizeof *t);
    if (!t) return ASR_ENOMEM;
    o->avtab = t;
    o->avcap = cap;
  }
  fi_addr_t fi = FI_ADDR_NOTAVAIL;
  int n = fi_av_insert(o->av, addr, 1, &fi, 0, NULL);
  if (n != 1) {
    asr_debug("fab", "fi_av_insert of peer address %d of this endpoint: %s", o->avn + 1,
              n < 0 ? fi_strerror(-n) : "not inserted");
    /* shm inserts nothing, and says so only in its own log, once it holds
     * 256 (libfabric 1.17: SMR_MAX_PEERS) */
    if (n >= 0 && strcmp(o->provider, "shm") == 0 && o->avn >= ASR_OFI_SHM_MAX_PEERS) return ASR_ENOSPACE;
    return n < 0 ? ASR_EIO : ASR_EUNREACH;
  }
  struct asr__ofi_av_entry *e = &o->avtab[o->avn++];
  e->len = (uint16_t)len;
  memcpy(e->addr, addr, len);
  e->fi = fi;
  *out = fi;
  return 0;
}

void asr__ofi_av_free(asr__ofi_t *o) {
  free(o->avtab);
  o->avtab = NULL;
  o->avn = o->avcap = 0;
}
