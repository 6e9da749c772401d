/*
 * fuzz.h -- what the libFuzzer targets of tests/fuzz/ share.
 *
 * A target defines LLVMFuzzerTestOneInput, feeds the input to a decoder and
 * checks what the decoder promises with FUZZ_ASSERT. A broken promise aborts,
 * which libFuzzer reports as a crash and saves the input as a reproducer,
 * just as it does for what AddressSanitizer and UBSan find. tests/fuzz/run.sh
 * builds the targets and runs them.
 */
#ifndef ASR_FUZZ_H
#define ASR_FUZZ_H

#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libFuzzer's entry point; declared here because -Wmissing-prototypes wants
 * a prototype and libFuzzer ships no header for it. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond, ...)                                                       \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "%s:%d: FUZZ_ASSERT(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                  \
      fputc('\n', stderr);                                                           \
      abort();                                                                       \
    }                                                                                \
  } while (0)

/* A host name as asrrun keeps it (config.c's is_host_name): non-empty,
 * letters, digits, '-', '.', '_'. */
static inline void fuzz_check_host_name(const char *s) {
  FUZZ_ASSERT(*s, "an empty host name");
  for (const char *p = s; *p; p++)
    FUZZ_ASSERT(isalnum((unsigned char)*p) || *p == '-' || *p == '.' || *p == '_', "host name '%s'", s);
}

static inline int fuzz_strcmp_p(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks that no two of names[0..n) are equal, sorting the array (the
 * caller's copy of the pointers) so that the check costs n log n, not the n^2
 * that made a 1024-host input take half its time in the target itself. */
static inline void fuzz_check_distinct(const char **names, int n, const char *what) {
  qsort(names, (size_t)n, sizeof *names, fuzz_strcmp_p);
  for (int i = 1; i < n; i++)
    FUZZ_ASSERT(strcmp(names[i - 1], names[i]) != 0, "%s '%s' twice", what, names[i]);
}

/* fuzz_check_distinct on the host names of an asr_config_t-style array. */
#define FUZZ_CHECK_DISTINCT_HOSTS(hosts, n, what)                     \
  do {                                                                \
    const char **names_ = malloc(((size_t)(n) + 1) * sizeof *names_); \
    if (!names_) abort();                                             \
    for (int i_ = 0; i_ < (n); i_++) names_[i_] = (hosts)[i_].name;   \
    fuzz_check_distinct(names_, (n), (what));                         \
    free(names_);                                                     \
  } while (0)

#endif /* ASR_FUZZ_H */
