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

#endif /* ASR_FUZZ_H */
