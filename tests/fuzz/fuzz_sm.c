/*
 * fuzz_sm.c -- libFuzzer target for the sm path's readers of what a peer
 * wrote (runtime/sm/): the receiver's (asr__sm_rec_read, and the progress
 * that takes records into posted receives: the ring and its header are
 * written by the peer process, which asr does not trust to be well-formed,
 * another process of the same user, perhaps buggy), and, when the first
 * byte is 0xff, the sender's reader of the handle (asr__sm_handle_read:
 * the rest of the input is the 128 bytes the KV store gave it).
 *
 * The input is a ring size, up to four receive capacities, a stamp mask,
 * and the ring's bytes. The target posts the receives (each buffer
 * allocated at exactly its capacity, so ASan sees any write past it), and
 * then, step by step, writes the stamp the next record's position expects
 * where the mask says so (random bytes alone would rarely carry one) and
 * lets the receiver progress. It checks what the receiver promises: its
 * head stays a 64-byte boundary inside the ring; a receive completes with
 * no more than its capacity, or with ASR_ETRUNC / ASR_EPROTO /
 * ASR_ECONNRESET (a CMA record: the "sender" is no process); a broken
 * layout makes the end fail for good, its receives with it. Nothing reads
 * or writes outside the region and the buffers (ASan).
 *
 * When the first byte is 0xfe, the rest is the one-sided ring (sm_rma.c)
 * as the owner finds it: stamps are put where records' positions expect
 * them, and the owner applies the ring with a check that accepts writes
 * into a 4 KiB target alone. Its head stays a 64-byte boundary, only the
 * target is written, and no more notifications are queued than the depth.
 * A PART record offers its part to an initiator that is no process (pid
 * 0): the owner declines it and never copies.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "asr_err.h"
#include "fuzz.h"
#include "sm.h"

#define NRECV 4

/* The sender's reader of the 128-byte handle (from the KV store): a
 * region it accepts has a name of the sm form, made by the process the
 * handle names, and a size in bounds. */
static void handle_case(const uint8_t *data, size_t size) {
  uint8_t h[ASR_SM_HANDLE_LEN] = {0};
  memcpy(h, data, size < sizeof h ? size : sizeof h);
  char name[ASR_SM_NAME_MAX];
  uint32_t region = 0;
  const char *why = NULL;
  int rc = asr__sm_handle_read(h, 0, name, &region, &why);
  if (rc) {
    FUZZ_ASSERT(rc == ASR_EPROTO && why && *why, "a refused handle without a reason");
    return;
  }
  FUZZ_ASSERT(strlen(name) < ASR_SM_NAME_MAX && strncmp(name, "/asrsm:", 7) == 0 && !strchr(name + 1, '/'),
              "accepted name '%s'", name);
  FUZZ_ASSERT(region >= ASR_SM_REGION_MIN && region <= ASR_SM_REGION_MAX && region % ASR_SM_LINE == 0,
              "accepted size %u", region);
}

static uint8_t osr_target[4096];

static int osr_check(void *arg, uint32_t slot, uint64_t key, uint64_t dst, uint64_t len, unsigned access) {
  (void)arg, (void)slot, (void)key, (void)access;
  uint64_t lo = (uint64_t)(uintptr_t)osr_target;
  return dst >= lo && dst - lo <= sizeof osr_target && len <= sizeof osr_target - (dst - lo) ? 0 : -1;
}

/* The owner's reader of the one-sided ring. */
static void osr_case(const uint8_t *data, size_t size) {
  static uint8_t base[ASR_SM_RING_OFF + 4096];
  asr__sm_t *s = calloc(1, sizeof *s);
  FUZZ_ASSERT(s, "calloc");
  s->base = base;
  s->osr = base + ASR_SM_RING_OFF;
  s->osr_bytes = 4096;
  memset(base, 0, sizeof base);
  memcpy(s->osr, data, size < 4096 ? size : 4096);
  /* a record's dst, when its bytes name an offset into the target, is made
   * one (random addresses alone would never pass the check) */
  for (uint64_t off = 0; off + 64 <= s->osr_bytes; off += 64) {
    uint64_t dst;
    memcpy(&dst, s->osr + off + 24, 8);
    if (dst < sizeof osr_target) {
      dst += (uint64_t)(uintptr_t)osr_target;
      memcpy(s->osr + off + 24, &dst, 8);
    }
  }
  for (int step = 0; step < 64 && !s->err; step++) {
    uint32_t stamp = (uint32_t)(s->ohead / ASR_SM_LINE) + 1u;
    memcpy(s->osr + s->ohoff, &stamp, 4);
    asr__sm_lock(s);
    int moved = asr__sm_osr_apply_locked(s, osr_check, NULL);
    asr__sm_unlock(s);
    FUZZ_ASSERT(s->ohead % ASR_SM_LINE == 0 && s->ohoff < s->osr_bytes, "head off a record boundary");
    FUZZ_ASSERT(s->nq_t - s->nq_h <= ASR_SM_NOTIF_SLOTS, "more notifications queued than the depth");
    if (!moved) break;
  }
  free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size >= 1 && data[0] == 0xfe) { /* the first byte 0xfe: the one-sided ring */
    osr_case(data + 1, size - 1);
    return 0;
  }
  if (size >= 1 && data[0] == 0xff) { /* the first byte 0xff: a handle */
    handle_case(data + 1, size - 1);
    return 0;
  }
  if (size < 1 + 2 * NRECV + 2) return 0;
  uint64_t ring_bytes = ASR_SM_LINE * (2 + data[0] % 62);
  size_t caps[NRECV];
  for (int i = 0; i < NRECV; i++) caps[i] = (size_t)(data[1 + 2 * i] | data[2 + 2 * i] << 8) % 9000;
  uint16_t stamp_mask = (uint16_t)(data[1 + 2 * NRECV] | data[2 + 2 * NRECV] << 8);
  const uint8_t *ring_in = data + 3 + 2 * NRECV;
  size_t ring_len = size - (3 + 2 * NRECV);

  size_t region = ASR_SM_RING_OFF + ring_bytes;
  uint8_t *base = calloc(1, region);
  asr__sm_t *s = calloc(1, sizeof *s);
  uint8_t *bufs[NRECV];
  asr__ofi_op_t ops[NRECV];
  int posted[NRECV] = {0};
  memset(ops, 0, sizeof ops);
  if (!base || !s) abort();
  memcpy(base + ASR_SM_RING_OFF, ring_in, ring_len < ring_bytes ? ring_len : ring_bytes);
  s->base = base;
  s->len = region;
  s->ring = base + ASR_SM_RING_OFF;
  s->ring_bytes = ring_bytes;
  s->cfg.inline_max = 4096;
  s->peer_pid = 0; /* no process: a CMA record's copy fails (ESRCH), never reads */
  snprintf(s->name, sizeof s->name, "/fuzz");

  asr__sm_lock(s);
  for (int i = 0; i < NRECV; i++) {
    bufs[i] = malloc(caps[i] ? caps[i] : 1);
    if (!bufs[i]) abort();
    int rc = asr__sm_recv_locked(s, bufs[i], caps[i], &ops[i]);
    FUZZ_ASSERT(rc == 0 || (rc == ASR_EPROTO && s->err), "a post failed with %d", rc);
    posted[i] = rc == 0;
  }
  for (int step = 0; step < 16 && !s->err; step++) {
    FUZZ_ASSERT(s->hoff < ring_bytes && s->hoff % ASR_SM_LINE == 0 && s->head % ring_bytes == s->hoff,
                "head %llu / offset %llu", (unsigned long long)s->head, (unsigned long long)s->hoff);
    if (stamp_mask & (1u << step)) {
      uint32_t st = asr__sm_stamp(s->head);
      memcpy(s->ring + s->hoff, &st, 4);
    }
    (void)asr__sm_progress_locked(s);
  }
  FUZZ_ASSERT(s->hoff < ring_bytes && s->hoff % ASR_SM_LINE == 0, "offset %llu", (unsigned long long)s->hoff);
  FUZZ_ASSERT(s->taken <= NRECV, "took %llu messages for %d receives", (unsigned long long)s->taken, NRECV);
  for (int i = 0; i < NRECV; i++) {
    if (!posted[i]) continue; /* refused: the end broke before it */
    if (!__atomic_load_n(&ops[i].done, __ATOMIC_ACQUIRE)) {
      FUZZ_ASSERT(!s->err, "receive %d left pending by a broken end", i);
      continue;
    }
    int err = ops[i].err;
    FUZZ_ASSERT(err == 0 || err == ASR_ETRUNC || err == ASR_EPROTO || err == ASR_ECONNRESET,
                "receive %d failed with %d", i, err);
    FUZZ_ASSERT(err != 0 || ops[i].len <= caps[i], "receive %d took %zu bytes into %zu", i, ops[i].len,
                caps[i]);
  }
  asr__sm_unlock(s);
  uint64_t taken = 0;
  (void)asr__sm_peer_fin(s, &taken);
  FUZZ_ASSERT(taken == s->taken, "taken %llu", (unsigned long long)taken);
  asr__sm_cancel_all(s);
  asr__sm_unlist(s);
  for (int i = 0; i < NRECV; i++) free(bufs[i]);
  free(s);
  free(base);
  return 0;
}
