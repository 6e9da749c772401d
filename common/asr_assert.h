/*
 * asr_assert.h -- assert() and the helpers its invariants need.
 *
 * configure defines NDEBUG unless --enable-debug, so an assert() is live in
 * debug builds (the sanitizer builds of the suite are debug builds) and
 * costs nothing otherwise. The helpers below exist in debug builds only:
 * a call outside assert() does not compile in a release build, which keeps
 * them out of the code that runs there.
 */
#ifndef ASR_ASSERT_H
#define ASR_ASSERT_H

#include <assert.h>

#ifndef NDEBUG
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

_Static_assert(sizeof(pthread_t) <= sizeof(uintptr_t), "a thread id fits a lock's owner field");

/* The calling thread, as a lock's owner field holds it: never 0, and
 * distinct among the threads alive at once (glibc's pthread_t is the
 * address of the thread's descriptor). */
static inline uintptr_t asr_thread_id(void) { return (uintptr_t)pthread_self(); }

/* Whether some thread holds m. A normal mutex does not know its owner, so
 * this cannot tell the caller from another thread; it catches the common
 * mistake, a *_locked function called without the lock at all. */
static inline int asr_mutex_held(pthread_mutex_t *m) {
  int rc = pthread_mutex_trylock(m);
  if (rc == 0) pthread_mutex_unlock(m);
  return rc == EBUSY;
}
#endif

#endif /* ASR_ASSERT_H */
