/*
 * asr_trace.h -- a process's trace file (issue 52; the layout is
 * asr_trace_fmt.h): libasr, asrd and asrrun each open one and put records
 * in it. Off until asr_trace_open: then asr_trace_on is 0 and a trace point
 * costs its one test of it (ASR_TRACE_ON), which never changes after open.
 *
 * On the data path a record costs a claim (one relaxed fetch-add on the
 * calling thread's own ring: no lock, no allocation, no system call), the
 * stores of its fields and a release store of its stamp. A thread's first
 * record claims it a ring (one fetch-add on the header; threads beyond
 * max_threads share the last ring, which the fetch-add keeps exact).
 */
#ifndef ASR_TRACE_H
#define ASR_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "asr_trace_fmt.h"

/* Non-zero once asr_trace_open succeeded; never cleared (the mapping stays
 * for the process's life, so a thread still writing is never cut off). */
extern int asr_trace_on;
#define ASR_TRACE_ON() __builtin_expect(asr_trace_on != 0, 0)

typedef struct {
  int kind;             /* ASR_TR_PROC_* */
  long rank;            /* -1 none */
  const char *host;     /* the host's name */
  const char *job;      /* the job's id, or NULL */
  unsigned ring_recs;   /* records per thread (rounded up to a power of two) */
  unsigned keep_recs;   /* records in the keep area */
  unsigned max_threads; /* rings */
} asr_trace_cfg_t;

/* Creates path (mode 0600; it must not exist), sizes and maps it, and
 * writes the header. Returns 0, or a negative ASR_E* with a message in err
 * naming the file and the cause. Once per process: a second call fails. */
int asr_trace_open(const char *path, const asr_trace_cfg_t *cfg, char *err, size_t errlen);

/* Says the process is done writing (the header's done word): a clean exit.
 * The mapping stays. */
void asr_trace_close(void);

/* Claims the calling thread's next ring record (keep: 0) or the next keep
 * record (keep: 1, NULL when the keep area is full: counted as dropped).
 * Fill it, then asr_trace_commit(rec, stamp). */
asr_tr_rec_t *asr_trace_claim(int keep, uint32_t *stamp);

/* Publishes a claimed record: its stamp, stored last with release order. */
static inline void asr_trace_commit(asr_tr_rec_t *r, uint32_t stamp) {
  __atomic_store_n(&r->stamp, stamp, __ATOMIC_RELEASE);
}

/* One record in one call, for the places off the data path. text may be
 * NULL (then a..d are the numbers), else it is copied (at most
 * ASR_TR_TEXT bytes) and a..d are ignored. */
void asr_trace_put(int keep, int kind, int lnc, int sub, uint32_t id, uint64_t t0, uint64_t t1, uint64_t a,
                   uint64_t b, uint64_t c, uint64_t d, const char *text);

/* The path of the trace file of this process, or "" when off. */
const char *asr_trace_path(void);

/* Gives the calling thread its ring now, its pages made (asr_init's
 * thread, a service thread), so that its first records on the data path
 * fault no page. Once per thread; nothing when off. */
void asr_trace_thread_prepare(void);

/* Names the calling thread's ring after the LNC it serves (its service
 * thread's first act): the merger's drop counts name that LNC's track. */
void asr_trace_thread_lnc(int lnc);

#endif /* ASR_TRACE_H */
