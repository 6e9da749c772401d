/*
 * trace_read.h -- reads a process's trace file (common/asr_trace_fmt.h),
 * as mapped by the process that wrote it or in the packed form a daemon
 * sends up, into its records; and packs one. Every byte is checked: the
 * file may be damaged, cut short, or written by a process killed mid-record
 * (a record whose stamp is not whole is skipped, and counted as dropped).
 */
#ifndef ASR_TRACE_READ_H
#define ASR_TRACE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "asr_trace_fmt.h"

typedef struct {
  asr_tr_hdr_t hdr;         /* a copy; host and job NUL-terminated */
  uint32_t nthreads;        /* rings written */
  asr_tr_thread_t *threads; /* nthreads; .count = its records in recs */
  uint32_t *first;          /* nthreads: where each ring's records start in recs */
  asr_tr_rec_t *keep;       /* the keep area's whole records, in claim order */
  uint32_t nkeep;
  uint64_t keep_dropped; /* keep records lost (the area was full, or torn) */
  asr_tr_rec_t *recs;    /* the rings' records, ring by ring, oldest first */
  size_t nrecs;
  uint64_t ring_dropped; /* all rings' records lost (wrapped over, or torn) */
} asr_trr_proc_t;

/* Reads the len bytes at buf (either form). Returns 0 with *p filled (free
 * it with asr_trr_free), or ASR_EPROTO with what was wrong in err. */
int asr_trr_load(const uint8_t *buf, size_t len, asr_trr_proc_t *p, char *err, size_t errlen);

/* Maps path read-only and reads it (asr_trr_load). */
int asr_trr_load_file(const char *path, asr_trr_proc_t *p, char *err, size_t errlen);

/* The packed form of p: malloc'd *out of *outlen bytes. 0 or ASR_ENOMEM. */
int asr_trr_pack(const asr_trr_proc_t *p, uint8_t **out, size_t *outlen);

/* Records of thread i that were lost (its ring wrapped, or torn). */
uint64_t asr_trr_thread_dropped(const asr_trr_proc_t *p, uint32_t i);

void asr_trr_free(asr_trr_proc_t *p);

#endif /* ASR_TRACE_READ_H */
