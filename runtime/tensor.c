/* tensor.c -- host-memory tensors (seed: nrt_tensor_get_va / get_size). */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asr_log.h"
#include "rt.h"

int asr_tensor_alloc(size_t size, asr_tensor_t **out) {
  if (!out || size == 0) {
    asr_error("svc", "asr_tensor_alloc: %s", !out ? "NULL output pointer" : "size must be > 0");
    return ASR_INVALID;
  }
  asr_tensor_t *t = calloc(1, sizeof *t);
  if (!t) return ASR_INVALID;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (posix_memalign(&t->va, page, size) != 0) {
    asr_error("svc", "asr_tensor_alloc: cannot allocate %zu bytes", size);
    free(t);
    return ASR_INVALID;
  }
  memset(t->va, 0, size);
  t->size = size;
  t->owned = 1;
  *out = t;
  return ASR_SUCCESS;
}

int asr_tensor_wrap(void *va, size_t size, asr_tensor_t **out) {
  if (!out || !va || size == 0) {
    asr_error("svc", "asr_tensor_wrap: needs memory, a size > 0 and an output pointer");
    return ASR_INVALID;
  }
  asr_tensor_t *t = calloc(1, sizeof *t);
  if (!t) return ASR_INVALID;
  t->va = va;
  t->size = size;
  *out = t;
  return ASR_SUCCESS;
}

void asr_tensor_free(asr_tensor_t *t) {
  if (!t) return;
  /* Memory we free may come back from malloc for another tensor: a
   * registration of it left in a comm's cache would be found for that one. */
  if (t->owned) {
    asr_forget(t->va, t->size);
    free(t->va);
  }
  free(t);
}

size_t asr_tensor_size(const asr_tensor_t *t) { return t ? t->size : 0; }
void *asr_tensor_va(const asr_tensor_t *t) { return t ? t->va : NULL; }
