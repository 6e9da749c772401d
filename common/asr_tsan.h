/*
 * asr_tsan.h -- ThreadSanitizer annotations of the memory a library that is
 * not built with TSan reads or writes on our behalf.
 *
 * The suite runs its TSan build with ignore_noninstrumented_modules=1
 * (scripts/test.sh): the memset/memcpy that libfabric, libpmix or libevent
 * call are not checked, since their own buffers are not our code's and
 * their shadow is what made that build slow. What that would hide is the
 * one hand-off that is ours: the provider writes a receive's buffer (reads
 * a send's) in the thread that reads its completion, and libasr must order
 * that before the application's next touch of the buffer (the release store
 * of ofi.c's op_complete, the acquire of its poll). So the drain tells TSan
 * of that access itself, in the thread and at the point where the provider
 * made it: before it publishes the completion.
 *
 * Other builds: the calls compile to nothing.
 */
#ifndef ASR_TSAN_H
#define ASR_TSAN_H

#include <stddef.h>

#if defined(__SANITIZE_THREAD__)
#define ASR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ASR_TSAN 1
#endif
#endif

#ifdef ASR_TSAN
/* libtsan's entry points; no installed header declares them (GCC 12's
 * sanitizer/tsan_interface.h has the annotations of locks only). GCC knows
 * them as built-ins taking a signed size, clang's runtime an unsigned one. */
#if defined(__clang__)
typedef unsigned long asr_tsan_size_t;
#else
typedef long asr_tsan_size_t;
#endif
void __tsan_read_range(void *addr, asr_tsan_size_t size);
void __tsan_write_range(void *addr, asr_tsan_size_t size);
static inline void asr_tsan_wrote(void *addr, size_t len) {
  if (addr && len) __tsan_write_range(addr, (asr_tsan_size_t)len);
}
static inline void asr_tsan_read(void *addr, size_t len) {
  if (addr && len) __tsan_read_range(addr, (asr_tsan_size_t)len);
}
#else
static inline void asr_tsan_wrote(void *addr, size_t len) {
  (void)addr;
  (void)len;
}
static inline void asr_tsan_read(void *addr, size_t len) {
  (void)addr;
  (void)len;
}
#endif

#endif /* ASR_TSAN_H */
