/*
 * handle.c -- the slabs that recycle the records behind the application's
 * handles, and the message for a handle that is not live (handle.h says
 * what a handle is, and why records are recycled rather than freed).
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "asr_log.h"
#include "handle.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* Every slab's ring and list, under one lock: taken when a comm is made or
 * freed, its pool made or freed, a tensor made or freed; never by a post or
 * a test. Each slab lists every record it made (all), live or free: the
 * application holds handles, which LeakSanitizer cannot read as pointers
 * (the generation is in the top bits), so a live record is reachable from
 * here, as it was from the application's pointer before, and so is what it
 * points to. */
static pthread_mutex_t slab_mutex = PTHREAD_MUTEX_INITIALIZER;

static _Atomic uint64_t *live_word(const asr__slab_t *s, char *rec, int i) {
  return (_Atomic uint64_t *)(rec + s->live_off + (size_t)i * s->stride);
}

/* Zeroes rec but for its live words. */
static void zero_but_live(const asr__slab_t *s, char *rec) {
  size_t at = 0;
  for (int i = 0; i < s->nlive; i++) {
    size_t w = s->live_off + (size_t)i * s->stride;
    memset(rec + at, 0, w - at);
    at = w + sizeof(uint64_t);
  }
  memset(rec + at, 0, s->size - at);
}

void *asr__slab_take(asr__slab_t *s) {
  char *rec = NULL;
  pthread_mutex_lock(&slab_mutex);
  if (s->n > 0) {
    rec = s->ring[s->head];
    s->head = (s->head + 1) % s->cap;
    s->n--;
  }
  pthread_mutex_unlock(&slab_mutex);
  if (rec) {
    UNPOISON(rec, s->size);
    zero_but_live(s, rec);
    return rec;
  }
  /* 16-byte aligned: the low 3 bits of a handle are its kind */
  rec = aligned_alloc(16, (s->size + 15) & ~(size_t)15);
  if (!rec) return NULL;
  if (((uintptr_t)rec + s->size) >> 48) { /* the top 16 bits of a handle are its generation */
    asr_error("svc", "libasr's handles need memory below 2^48; malloc gave %p for a %s", (void *)rec,
              s->name);
    free(rec);
    return NULL;
  }
  pthread_mutex_lock(&slab_mutex);
  if (s->nall == s->capall) {
    size_t cap = s->capall ? 2 * s->capall : 64;
    void **all = realloc(s->all, cap * sizeof *all);
    if (!all) {
      pthread_mutex_unlock(&slab_mutex);
      free(rec);
      return NULL;
    }
    s->all = all;
    s->capall = cap;
  }
  s->all[s->nall++] = rec;
  pthread_mutex_unlock(&slab_mutex);
  memset(rec, 0, s->size);
  for (int i = 0; i < s->nlive; i++) atomic_init(live_word(s, rec, i), 0);
  return rec;
}

void asr__slab_put(asr__slab_t *s, void *rec) {
  pthread_mutex_lock(&slab_mutex);
  if (s->n == s->cap) {
    /* grow the ring, oldest first from 0 (a failed grow leaks rec: it
     * is never freed anyway, and its handles are retired) */
    size_t cap = s->cap ? 2 * s->cap : 64;
    void **ring = malloc(cap * sizeof *ring);
    if (!ring) {
      pthread_mutex_unlock(&slab_mutex);
      asr_warn("svc", "out of memory recycling a %s: its memory is lost", s->name);
      return;
    }
    for (size_t i = 0; i < s->n; i++) ring[i] = s->ring[(s->head + i) % s->cap];
    free(s->ring);
    s->ring = ring;
    s->cap = cap;
    s->head = 0;
  }
  s->ring[(s->head + s->n) % s->cap] = rec;
  s->n++;
  /* Poisoned under the lock: a take of it, which unpoisons, comes after. */
  POISON(rec, s->size);
  for (int i = 0; i < s->nlive; i++) UNPOISON(live_word(s, rec, i), sizeof(uint64_t));
  pthread_mutex_unlock(&slab_mutex);
}

void asr__handle_bad(const char *fn, const void *h, unsigned kind, size_t live_off) {
  static const char *const noun[] = {
      "handle",          "comm",          "request", "tensor", "memory registration",
      "imported memory", "prepared list", "handle"};
  static const char *const why[] = {"",
                                    "closed already, or its LNC was closed?",
                                    "",
                                    "freed already?",
                                    "deregistered already, or its LNC was closed?",
                                    "freed already?",
                                    "freed already, or its comm was closed?",
                                    ""};
  const char *want = noun[kind & 7];
  uint64_t v = (uint64_t)(uintptr_t)h, k = v & ASR_HK_MASK;
  if (!h) {
    asr_error("svc", "%s: NULL %s", fn, want);
  } else if (k == 0 || k > ASR_HK_XFER || !(v & ASR_H_ADDR)) {
    asr_error("svc", "%s: %p is no %s libasr returned (a pointer from elsewhere?)", fn, h, want);
  } else if (k != kind) {
    asr_error("svc", "%s: %p is a %s, not a %s", fn, h, noun[k], want);
  } else if (kind == ASR_HK_REQUEST) {
    /* not live: its comm closed; live under another generation: a later
     * post took its record (or its pool went to a newer comm) */
    const char *rec = (const char *)(uintptr_t)(v & ASR_H_ADDR);
    uint64_t live = atomic_load_explicit((_Atomic uint64_t *)(rec + live_off), memory_order_relaxed);
    asr_error("svc", "%s: request %p is not a live request (%s)", fn, h,
              live & ASR_HK_MASK ? "it completed and a later post took its record, or its comm was closed"
                                 : "its comm was closed?");
  } else {
    asr_error("svc", "%s: %s %p is not a live %s (%s)", fn, want, h, want, why[kind & 7]);
  }
}
