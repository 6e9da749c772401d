/*
 * trace_read.c -- reads and packs trace files (trace_read.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asr_err.h"
#include "trace_read.h"

#define MAX_RECS (1u << 24)
#define MAX_THREADS 4096u

static size_t table_bytes(uint32_t n) { return ((size_t)n * sizeof(asr_tr_thread_t) + 63) & ~(size_t)63; }

static int bad(char *err, size_t errlen, const char *what) {
  snprintf(err, errlen, "not a whole asr trace file: %s", what);
  return ASR_EPROTO;
}

void asr_trr_free(asr_trr_proc_t *p) {
  free(p->threads);
  free(p->first);
  free(p->keep);
  free(p->recs);
  memset(p, 0, sizeof *p);
}

/* Takes the record at r if its stamp says it is index idx's, whole. */
static int whole(const asr_tr_rec_t *r, uint64_t idx) {
  return __atomic_load_n(&r->stamp, __ATOMIC_ACQUIRE) == (uint32_t)(idx + 1);
}

static int load_mapped(const uint8_t *buf, size_t len, asr_trr_proc_t *p, char *err, size_t errlen) {
  const asr_tr_hdr_t *h = &p->hdr;
  if (h->ring_recs > MAX_RECS || (h->ring_recs & (h->ring_recs - 1)) || h->keep_recs == 0 ||
      h->keep_recs > MAX_RECS || h->max_threads == 0 || h->max_threads > MAX_THREADS)
    return bad(err, errlen, "its sizes are out of range");
  size_t tbl = table_bytes(h->max_threads);
  size_t need = ASR_TR_HDR_BYTES + tbl + (size_t)h->keep_recs * sizeof(asr_tr_rec_t) +
                (size_t)h->max_threads * h->ring_recs * sizeof(asr_tr_rec_t);
  if (len < need) return bad(err, errlen, "it is shorter than its header says");
  const asr_tr_thread_t *thr = (const asr_tr_thread_t *)(buf + ASR_TR_HDR_BYTES);
  const asr_tr_rec_t *keep = (const asr_tr_rec_t *)(buf + ASR_TR_HDR_BYTES + tbl);
  const asr_tr_rec_t *rings = keep + h->keep_recs;
  uint64_t used = h->keep_used < h->keep_recs ? h->keep_used : h->keep_recs;
  p->nthreads = h->threads < h->max_threads ? h->threads : h->max_threads;
  p->keep = malloc((used ? used : 1) * sizeof *p->keep);
  p->threads = calloc(p->nthreads ? p->nthreads : 1, sizeof *p->threads);
  p->first = calloc(p->nthreads ? p->nthreads : 1, sizeof *p->first);
  size_t total = 0;
  for (uint32_t i = 0; i < p->nthreads; i++) {
    uint64_t head = __atomic_load_n(&thr[i].head, __ATOMIC_ACQUIRE);
    total += head < h->ring_recs ? head : h->ring_recs;
  }
  p->recs = malloc((total ? total : 1) * sizeof *p->recs);
  if (!p->keep || !p->threads || !p->first || !p->recs) return ASR_ENOMEM;
  for (uint64_t i = 0; i < used; i++)
    if (whole(&keep[i], i)) p->keep[p->nkeep++] = keep[i];
  p->keep_dropped = h->keep_used - p->nkeep;
  for (uint32_t i = 0; i < p->nthreads; i++) {
    asr_tr_thread_t *t = &p->threads[i];
    *t = thr[i];
    t->name[sizeof t->name - 1] = '\0';
    t->head = __atomic_load_n(&thr[i].head, __ATOMIC_ACQUIRE);
    const asr_tr_rec_t *ring = rings + (size_t)i * h->ring_recs;
    uint64_t from = t->head > h->ring_recs ? t->head - h->ring_recs : 0;
    p->first[i] = (uint32_t)p->nrecs;
    t->count = 0;
    for (uint64_t k = from; k < t->head && p->nrecs < total; k++) {
      const asr_tr_rec_t *r = &ring[k & (h->ring_recs - 1)];
      if (!whole(r, k)) continue;
      p->recs[p->nrecs++] = *r;
      t->count++;
    }
    p->ring_dropped += t->head - t->count;
  }
  return 0;
}

static int load_packed(const uint8_t *buf, size_t len, asr_trr_proc_t *p, char *err, size_t errlen) {
  const asr_tr_hdr_t *h = &p->hdr;
  if (h->threads > MAX_THREADS || h->keep_recs > MAX_RECS || h->keep_used < h->keep_recs)
    return bad(err, errlen, "its sizes are out of range");
  size_t tbl = table_bytes(h->threads);
  size_t at = ASR_TR_HDR_BYTES + tbl + (size_t)h->keep_recs * sizeof(asr_tr_rec_t);
  if (len < at) return bad(err, errlen, "it is shorter than its header says");
  p->nthreads = h->threads;
  const asr_tr_thread_t *thr = (const asr_tr_thread_t *)(buf + ASR_TR_HDR_BYTES);
  size_t total = 0;
  for (uint32_t i = 0; i < p->nthreads; i++) {
    if (thr[i].count > MAX_RECS || thr[i].count > thr[i].head)
      return bad(err, errlen, "a ring's count is wrong");
    total += thr[i].count;
  }
  if (len != at + total * sizeof(asr_tr_rec_t))
    return bad(err, errlen, "its length is not what its counts say");
  p->keep = malloc((h->keep_recs ? h->keep_recs : 1) * sizeof *p->keep);
  p->threads = calloc(p->nthreads ? p->nthreads : 1, sizeof *p->threads);
  p->first = calloc(p->nthreads ? p->nthreads : 1, sizeof *p->first);
  p->recs = malloc((total ? total : 1) * sizeof *p->recs);
  if (!p->keep || !p->threads || !p->first || !p->recs) return ASR_ENOMEM;
  memcpy(p->threads, thr, p->nthreads * sizeof *thr);
  p->nkeep = h->keep_recs;
  if (p->nkeep) memcpy(p->keep, buf + ASR_TR_HDR_BYTES + tbl, p->nkeep * sizeof *p->keep);
  p->keep_dropped = h->keep_used - h->keep_recs;
  if (total) memcpy(p->recs, buf + at, total * sizeof *p->recs);
  p->nrecs = total;
  for (uint32_t i = 0, n = 0; i < p->nthreads; n += p->threads[i].count, i++) {
    p->threads[i].name[sizeof p->threads[i].name - 1] = '\0';
    p->first[i] = n;
    p->ring_dropped += p->threads[i].head - p->threads[i].count;
  }
  return 0;
}

int asr_trr_load(const uint8_t *buf, size_t len, asr_trr_proc_t *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  if (len < ASR_TR_HDR_BYTES) return bad(err, errlen, "it is shorter than its header");
  memcpy(&p->hdr, buf, sizeof p->hdr);
  asr_tr_hdr_t *h = &p->hdr;
  if (memcmp(h->magic, ASR_TR_MAGIC, sizeof h->magic) != 0) return bad(err, errlen, "its magic is wrong");
  if (h->version != ASR_TR_VERSION) {
    snprintf(err, errlen,
             "trace file version %u, this asr reads version %u: merge it with the asr that wrote it",
             h->version, ASR_TR_VERSION);
    return ASR_EPROTO;
  }
  if (h->rec_bytes != sizeof(asr_tr_rec_t) || h->thread_bytes != sizeof(asr_tr_thread_t))
    return bad(err, errlen, "its record sizes are not this machine's");
  h->host[sizeof h->host - 1] = '\0';
  h->job[sizeof h->job - 1] = '\0';
  int rc = h->ring_recs ? load_mapped(buf, len, p, err, errlen) : load_packed(buf, len, p, err, errlen);
  if (rc) {
    asr_tr_hdr_t keep_hdr = p->hdr;
    asr_trr_free(p);
    p->hdr = keep_hdr;
    if (rc == ASR_ENOMEM) snprintf(err, errlen, "out of memory reading a trace file");
  }
  return rc;
}

int asr_trr_load_file(const char *path, asr_trr_proc_t *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    snprintf(err, errlen, "cannot open %s: %s", path, strerror(e));
    return asr_err_from_errno(e);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)ASR_TR_HDR_BYTES) {
    close(fd);
    snprintf(err, errlen, "%s: not a trace file (not a regular file of at least %u bytes)", path,
             ASR_TR_HDR_BYTES);
    return ASR_EPROTO;
  }
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    int e = errno;
    snprintf(err, errlen, "cannot map %s: %s", path, strerror(e));
    return asr_err_from_errno(e);
  }
  char why[256];
  int rc = asr_trr_load(m, (size_t)st.st_size, p, why, sizeof why);
  munmap(m, (size_t)st.st_size);
  if (rc) snprintf(err, errlen, "%s: %s", path, why);
  return rc;
}

int asr_trr_pack(const asr_trr_proc_t *p, uint8_t **out, size_t *outlen) {
  size_t tbl = table_bytes(p->nthreads);
  size_t len = ASR_TR_HDR_BYTES + tbl + ((size_t)p->nkeep + p->nrecs) * sizeof(asr_tr_rec_t);
  uint8_t *b = calloc(1, len);
  if (!b) return ASR_ENOMEM;
  asr_tr_hdr_t h = p->hdr;
  h.ring_recs = 0;
  h.keep_recs = p->nkeep;
  h.keep_used = p->nkeep + p->keep_dropped;
  h.threads = p->nthreads;
  h.max_threads = p->nthreads;
  memcpy(b, &h, sizeof h);
  if (p->nthreads) memcpy(b + ASR_TR_HDR_BYTES, p->threads, p->nthreads * sizeof *p->threads);
  size_t at = ASR_TR_HDR_BYTES + tbl;
  if (p->nkeep) memcpy(b + at, p->keep, p->nkeep * sizeof *p->keep);
  at += p->nkeep * sizeof *p->keep;
  if (p->nrecs) memcpy(b + at, p->recs, p->nrecs * sizeof *p->recs);
  *out = b;
  *outlen = len;
  return 0;
}

uint64_t asr_trr_thread_dropped(const asr_trr_proc_t *p, uint32_t i) {
  return i < p->nthreads ? p->threads[i].head - p->threads[i].count : 0;
}
