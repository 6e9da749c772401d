/*
 * asr_trace.c -- a process's trace file (asr_trace.h; the layout is
 * asr_trace_fmt.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_trace.h"

int asr_trace_on;

static char *base;           /* the mapping */
static asr_tr_hdr_t *hdr;    /* at base */
static asr_tr_thread_t *thr; /* the thread table */
static asr_tr_rec_t *keep;   /* the keep area */
static asr_tr_rec_t *rings;  /* max_threads rings of ring_recs */
static char path_copy[4096];
static pthread_mutex_t open_mutex = PTHREAD_MUTEX_INITIALIZER;

/* The calling thread's ring, once it has one, and whether it is the
 * thread's alone (then its head is written by this thread only). */
static __thread asr_tr_thread_t *my_thr;
static __thread asr_tr_rec_t *my_ring;
static __thread int my_own;

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void copy_text(char *dst, size_t cap, const char *src) {
  size_t n = src ? strnlen(src, cap - 1) : 0;
  if (n) memcpy(dst, src, n);
  dst[n] = '\0';
}

int asr_trace_open(const char *path, const asr_trace_cfg_t *cfg, char *err, size_t errlen) {
  if (!path || !*path || !cfg || cfg->ring_recs == 0 || cfg->ring_recs > (1u << 24) || cfg->keep_recs == 0 ||
      cfg->keep_recs > (1u << 24) || cfg->max_threads == 0 || cfg->max_threads > 4096) {
    snprintf(err, errlen,
             "trace: a file path, 1..2^24 records per thread and in the keep area, and "
             "1..4096 threads are needed");
    return ASR_EINVAL;
  }
  pthread_mutex_lock(&open_mutex);
  if (asr_trace_on) {
    pthread_mutex_unlock(&open_mutex);
    snprintf(err, errlen, "trace: this process's trace file is open already (%s)", path_copy);
    return ASR_EBUSY;
  }
  uint32_t ring = 1;
  while (ring < cfg->ring_recs) ring <<= 1;
  size_t tbl = ((size_t)cfg->max_threads * sizeof(asr_tr_thread_t) + 63) & ~(size_t)63;
  size_t size = ASR_TR_HDR_BYTES + tbl + (size_t)cfg->keep_recs * sizeof(asr_tr_rec_t) +
                (size_t)cfg->max_threads * ring * sizeof(asr_tr_rec_t);
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    int e = errno;
    pthread_mutex_unlock(&open_mutex);
    snprintf(err, errlen, "trace: cannot create %s: %s (the directory must exist and be writable)", path,
             strerror(e));
    return asr_err_from_errno(e);
  }
  /* the file's pages are made as they are first written: a thread's ring
   * costs memory only for the records it wrote */
  if (ftruncate(fd, (off_t)size) != 0) {
    int e = errno;
    close(fd);
    unlink(path);
    pthread_mutex_unlock(&open_mutex);
    snprintf(err, errlen, "trace: cannot size %s to %zu bytes: %s", path, size, strerror(e));
    return ASR_EIO;
  }
  void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    int e = errno;
    unlink(path);
    pthread_mutex_unlock(&open_mutex);
    snprintf(err, errlen, "trace: cannot map %s (%zu bytes): %s", path, size, strerror(e));
    return ASR_ENOMEM;
  }
  base = m;
  hdr = m;
  thr = (asr_tr_thread_t *)(base + ASR_TR_HDR_BYTES);
  keep = (asr_tr_rec_t *)(base + ASR_TR_HDR_BYTES + tbl);
  rings = keep + cfg->keep_recs;
  hdr->version = ASR_TR_VERSION;
  hdr->rec_bytes = sizeof(asr_tr_rec_t);
  hdr->thread_bytes = sizeof(asr_tr_thread_t);
  hdr->ring_recs = ring;
  hdr->keep_recs = cfg->keep_recs;
  hdr->max_threads = cfg->max_threads;
  hdr->kind = cfg->kind;
  hdr->os_pid = (int32_t)getpid();
  hdr->rank = cfg->rank;
  hdr->mono_ns = clock_ns(CLOCK_MONOTONIC);
  hdr->real_ns = clock_ns(CLOCK_REALTIME);
  copy_text(hdr->host, sizeof hdr->host, cfg->host);
  copy_text(hdr->job, sizeof hdr->job, cfg->job);
  copy_text(path_copy, sizeof path_copy, path);
  /* the magic last: a reader takes no file whose header is half written */
  char magic[8] = ASR_TR_MAGIC;
  uint64_t mw;
  memcpy(&mw, magic, sizeof mw);
  __atomic_store_n((uint64_t *)(void *)hdr->magic, mw, __ATOMIC_RELEASE);
  __atomic_store_n(&asr_trace_on, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&open_mutex);
  return 0;
}

void asr_trace_close(void) {
  if (asr_trace_on) __atomic_store_n(&hdr->done, 1, __ATOMIC_RELEASE);
}

const char *asr_trace_path(void) { return asr_trace_on ? path_copy : ""; }

/* The calling thread's ring: claimed at its first record. */
static asr_tr_thread_t *thread_ring(void) {
  if (my_thr) return my_thr;
  uint32_t i = __atomic_fetch_add(&hdr->threads, 1, __ATOMIC_RELAXED);
  if (i >= hdr->max_threads) i = hdr->max_threads - 1; /* shared: the fetch-add on its head keeps it exact */
  my_own = i < hdr->max_threads - 1;
  asr_tr_thread_t *t = &thr[i];
  /* (no system call here: this may be a data path's first record; the
   * service threads name themselves, asr_trace_thread_lnc) */
  if (!t->os_tid) t->lnc = -1;
  my_ring = rings + (size_t)i * hdr->ring_recs;
  my_thr = t;
  return t;
}

void asr_trace_thread_prepare(void) {
  if (!asr_trace_on || my_thr) return;
  asr_tr_thread_t *t = thread_ring();
  (void)t;
  /* its pages now, not at a first write on the data path: a fault each
   * 64 records otherwise (MADV_POPULATE_WRITE, Linux 5.14; else touched) */
  size_t len = (size_t)hdr->ring_recs * sizeof(asr_tr_rec_t);
  if (madvise(my_ring, len, MADV_POPULATE_WRITE) != 0) {
    long page = sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off<len; off += page> 0 ? (size_t)page : 4096)
      __atomic_store_n((char *)my_ring + off, 0, __ATOMIC_RELAXED); /* a stamp of 0 is no record's */
  }
}

void asr_trace_thread_lnc(int lnc) {
  if (!asr_trace_on) return;
  asr_trace_thread_prepare();
  asr_tr_thread_t *t = thread_ring();
  t->lnc = lnc;
  t->os_tid = (int32_t)syscall(SYS_gettid);
  (void)pthread_getname_np(pthread_self(), t->name, sizeof t->name);
}

asr_tr_rec_t *asr_trace_claim(int keep_it, uint32_t *stamp) {
  if (keep_it) {
    uint64_t i = __atomic_fetch_add(&hdr->keep_used, 1, __ATOMIC_RELAXED);
    if (i >= hdr->keep_recs) return NULL;
    *stamp = (uint32_t)(i + 1);
    return &keep[i];
  }
  asr_tr_thread_t *t = thread_ring();
  uint64_t i;
  if (my_own) { /* one writer: no locked instruction */
    i = __atomic_load_n(&t->head, __ATOMIC_RELAXED);
    __atomic_store_n(&t->head, i + 1, __ATOMIC_RELAXED);
  } else {
    i = __atomic_fetch_add(&t->head, 1, __ATOMIC_RELAXED);
  }
  *stamp = (uint32_t)(i + 1);
  /* the next record's line, on its way while this one is written: a ring
   * larger than the caches costs a miss per record otherwise */
  __builtin_prefetch(&my_ring[(i + 1) & (hdr->ring_recs - 1)], 1, 3);
  return &my_ring[i & (hdr->ring_recs - 1)];
}

void asr_trace_put(int keep_it, int kind, int lnc, int sub, uint32_t id, uint64_t t0, uint64_t t1, uint64_t a,
                   uint64_t b, uint64_t c, uint64_t d, const char *text) {
  if (!asr_trace_on) return;
  uint32_t stamp;
  asr_tr_rec_t *r = asr_trace_claim(keep_it, &stamp);
  if (!r) return;
  r->t0 = t0;
  r->t1 = t1;
  if (text) {
    size_t n = strnlen(text, ASR_TR_TEXT);
    memset(r->u.text, 0, sizeof r->u.text);
    memcpy(r->u.text, text, n);
  } else {
    r->u.v.a = a;
    r->u.v.b = b;
    r->u.v.c = c;
    r->u.v.d = d;
  }
  r->id = id;
  r->kind = (uint16_t)kind;
  r->lnc = (uint8_t)(lnc < 0 ? 0xff : lnc);
  r->sub = (uint8_t)sub;
  asr_trace_commit(r, stamp);
}
