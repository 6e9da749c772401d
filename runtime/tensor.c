/* tensor.c -- host-memory tensors (seed: nrt_tensor_get_va / get_size). The
 * application holds a handle (handle.h), checked at every call. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asr_log.h"
#include "rt.h"

/* The records of freed tensors, for the next ones (handle.h: never given
 * back to malloc, so that a freed tensor's handle can be checked). */
static asr__slab_t tensor_slab =
    ASR_SLAB("tensor", sizeof(struct asr_tensor), offsetof(struct asr_tensor, live), 0, 1);

int asr_tensor_alloc(size_t size, asr_tensor_t **out) {
  if (!out || size == 0) {
    asr_error("svc", "asr_tensor_alloc: %s", !out ? "NULL output pointer" : "size must be > 0");
    return ASR_INVALID;
  }
  struct asr_tensor *t = asr__slab_take(&tensor_slab);
  if (!t) return ASR_INVALID;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (posix_memalign(&t->va, page, size) != 0) {
    asr_error("svc", "asr_tensor_alloc: cannot allocate %zu bytes", size);
    asr__slab_put(&tensor_slab, t);
    return ASR_INVALID;
  }
  memset(t->va, 0, size);
  t->size = size;
  t->owned = 1;
  *out = (asr_tensor_t *)(uintptr_t)asr__handle_renew(t, &t->live, ASR_HK_TENSOR);
  return ASR_SUCCESS;
}

int asr_tensor_wrap(void *va, size_t size, asr_tensor_t **out) {
  if (!out || !va || size == 0) {
    asr_error("svc", "asr_tensor_wrap: needs memory, a size > 0 and an output pointer");
    return ASR_INVALID;
  }
  struct asr_tensor *t = asr__slab_take(&tensor_slab);
  if (!t) return ASR_INVALID;
  t->va = va;
  t->size = size;
  *out = (asr_tensor_t *)(uintptr_t)asr__handle_renew(t, &t->live, ASR_HK_TENSOR);
  return ASR_SUCCESS;
}

void asr_tensor_free(asr_tensor_t *h) {
  if (!h) return;
  struct asr_tensor *t = asr__tensor_of(h);
  if (!t) {
    asr__tensor_bad("asr_tensor_free", h);
    return;
  }
  asr__handle_retire(&t->live); /* first: a later call on h reads nothing but this */
  /* Memory we free may come back from malloc for another tensor: a
   * registration of it left in a comm's cache would be found for that one. */
  if (t->owned) {
    asr_forget(t->va, t->size);
    free(t->va);
  }
  asr__slab_put(&tensor_slab, t);
}

/* The record of tensor handle h for the call fn, or NULL (logged unless h
 * is NULL, which answers 0 / NULL as it always did). */
static const struct asr_tensor *tensor_arg(const char *fn, const asr_tensor_t *h) {
  const struct asr_tensor *t = asr__tensor_of(h);
  if (!t && h) asr__tensor_bad(fn, h);
  return t;
}

size_t asr_tensor_size(const asr_tensor_t *h) {
  const struct asr_tensor *t = tensor_arg("asr_tensor_size", h);
  return t ? t->size : 0;
}

void *asr_tensor_va(const asr_tensor_t *h) {
  const struct asr_tensor *t = tensor_arg("asr_tensor_va", h);
  return t ? t->va : NULL;
}
