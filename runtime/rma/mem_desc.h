/*
 * mem_desc.h -- the memory descriptor asr_mem_export writes and
 * asr_mem_import reads (asr.h, "One-sided transfers"): what a peer needs
 * to reach a registration, tagged with the job's secret.
 *
 * 80 bytes, integers little-endian (asr_le.h):
 *     0   4  magic "ASRX"
 *     4   2  version (ASR_MEM_DESC_VERSION)
 *     6   2  access: ASR_MEM_REMOTE_READ | ASR_MEM_REMOTE_WRITE, not 0
 *     8   4  the owner's LNC (0..127)
 *    12   4  slot: the registration's entry in the owner's table (mem.c)
 *    16  20  the owner's "who" (runtime/ofi.h): pid, start time, node id
 *    36   4  the owner's table's file descriptor (rma.h: "The table"),
 *             which a peer on its host maps
 *    40   8  va: where the region starts in the owner
 *    48   8  len: its bytes (> 0; va + len does not wrap)
 *    56   8  key: the registration's libfabric key, never 0, never reused
 *             by the owner's LNC (also what its table entry holds while the
 *             registration lives)
 *    64   8  tag: SipHash-2-4 of bytes 0..63 under the first half of the
 *             job secret (ASR_JOB_SECRET; zeros outside a job)
 *    72   8  tag: the same under the second half
 * A descriptor is refused unless every field is as above and both tags
 * are the importer's own (so a descriptor from another job, or one with a
 * byte changed, is refused).
 */
#ifndef ASR_MEM_DESC_H
#define ASR_MEM_DESC_H

#include <stddef.h>
#include <stdint.h>

#define ASR_MEM_DESC_LEN 80
#define ASR_MEM_DESC_VERSION 1
#define ASR_MEM_DESC_MAGIC 0x58525341u /* "ASRX" */
#define ASR_MEM_WHO_LEN 20
#define ASR_MEM_SECRET_LEN 32

typedef struct {
  unsigned access;
  int lnc;
  uint32_t slot;
  uint32_t tab_fd;
  uint8_t who[ASR_MEM_WHO_LEN];
  uint64_t va, len, key;
} asr__mem_desc_t;

/* Writes d's 80 bytes into out, tagged with secret. */
void asr__mem_desc_encode(const asr__mem_desc_t *d, const uint8_t secret[ASR_MEM_SECRET_LEN],
                          uint8_t out[ASR_MEM_DESC_LEN]);

/* Reads len bytes of a descriptor into *d: 0, or ASR_EPROTO with why (a
 * static string saying what is wrong) when it is not one this job made.
 * Pure: the fuzz target feeds it any bytes (tests/fuzz/fuzz_mem_desc.c). */
int asr__mem_desc_decode(const uint8_t *buf, size_t len, const uint8_t secret[ASR_MEM_SECRET_LEN],
                         asr__mem_desc_t *d, const char **why);

#endif /* ASR_MEM_DESC_H */
