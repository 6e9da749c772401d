/*
 * handle_inc.h -- incarnations in the 128-byte net handle (issue 50: a rank
 * the launcher restarted meets its peers afresh).
 *
 * Why. A handle stays in its KV server after the comm that published it
 * failed, and a restarted rank counts its comms' ordinals from 0 again. So
 * without more, a survivor's SEND comm to the restarted rank could take a
 * handle its dead incarnation published (same key, same ordinal), and the
 * restarted rank's SEND comm one that a survivor published for the dead
 * incarnation's comm. Each handle therefore also says who published it and
 * for whom:
 *
 *   112  4  the publisher's incarnation (ASR_INCARNATION)
 *   116  4  the incarnation of the sender this RECV comm waits for
 *           (ASR_HANDLE_FOR_ANY when the comm was made without a rank:
 *           plain asr_accept)
 *
 * and a SEND comm takes a handle only when the publisher's incarnation is
 * the one it expects of its peer rank (asr_job_rank_state's, the next one
 * while the rank is RESTARTING) and the handle is for its own incarnation.
 * Ordinals count from 0 again per peer when the peer's incarnation moves
 * (context.c, pickup), so a survivor's first comm to a restarted rank
 * meets that rank's first.
 *
 * Room. On the sm path bytes 98..119 are free (sm/sm_layout.h). On an
 * endpoint (ofi.h) bytes 10..119 hold the address and, when the address is
 * at most 90 bytes, the 20-byte "who" after it: the incarnations fit when
 * those end by byte 112 (tcp;ofi_rxm's 16-byte addresses do; so do shm's).
 * A handle without room carries none, and is taken as before.
 *
 * Without a job (asr_init and asr_connect alone) nothing is written and
 * nothing is checked: the rendezvous is exactly what it was.
 */
#ifndef ASR_HANDLE_INC_H
#define ASR_HANDLE_INC_H

#include <stdint.h>

#include "asr_le.h"
#include "ofi.h"

#define ASR_HANDLE_INC_OFF 112         /* the publisher's incarnation */
#define ASR_HANDLE_FOR_OFF 116         /* the sender's incarnation it waits for */
#define ASR_HANDLE_FOR_ANY 0xffffffffu /* made without a rank: any */
#define ASR_HANDLE_PATH_SM 3           /* rt.h's ASR_PATH_SM, as byte 124 says it */
_Static_assert(ASR_HANDLE_FOR_OFF + 4 == ASR_OFI_HANDLE_ORDINAL_OFF,
               "the incarnations end where the ordinal begins");

/* Whether handle h (its path byte and address length written) has room for
 * the incarnations. */
static inline int asr__handle_inc_room(const uint8_t h[ASR_OFI_HANDLE_LEN]) {
  if (h[ASR_OFI_HANDLE_PATH_OFF] == ASR_HANDLE_PATH_SM) return 1;
  unsigned al = asr_le_get16(h + 8);
  unsigned end = 10u + al;
  if (end + ASR_OFI_WHO_LEN <= ASR_OFI_HANDLE_ORDINAL_OFF) end += ASR_OFI_WHO_LEN; /* ofi.c writes the who */
  return end <= ASR_HANDLE_INC_OFF;
}

/* A RECV comm's handle says that own published it, for a sender of
 * incarnation peer (< 0: any). Nothing when it has no room. */
static inline void asr__handle_inc_put(uint8_t h[ASR_OFI_HANDLE_LEN], uint32_t own, long peer) {
  if (!asr__handle_inc_room(h)) return;
  asr_le_put32(h + ASR_HANDLE_INC_OFF, own);
  asr_le_put32(h + ASR_HANDLE_FOR_OFF, peer < 0 ? ASR_HANDLE_FOR_ANY : (uint32_t)peer);
}

/* Whether a SEND comm of a process in a job (job), of incarnation own,
 * that expects incarnation peer of its peer rank (< 0: it knows no rank),
 * takes handle h, whose ordinal is its own. Always 1 outside a job, and for
 * a handle without room. */
static inline int asr__handle_inc_takes(const uint8_t h[ASR_OFI_HANDLE_LEN], int job, uint32_t own,
                                        long peer) {
  if (!job || !asr__handle_inc_room(h)) return 1;
  uint32_t pub = asr_le_get32(h + ASR_HANDLE_INC_OFF), want = asr_le_get32(h + ASR_HANDLE_FOR_OFF);
  if (want != ASR_HANDLE_FOR_ANY && want != own) return 0;
  return peer < 0 || pub == (uint32_t)peer;
}

#endif /* ASR_HANDLE_INC_H */
