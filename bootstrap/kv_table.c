/* kv_table.c -- see kv_table.h. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "asr_err.h"
#include "kv_table.h"

/* FNV-1a, 64-bit: keys are short and binary; this is plenty. */
uint64_t asr_kv_key_hash(const uint8_t *key, size_t klen) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < klen; i++) {
    h ^= key[i];
    h *= 1099511628211ull;
  }
  return h;
}

void asr_kv_table_init(asr_kv_table_t *t, size_t max_keys, size_t max_bytes) {
  memset(t, 0, sizeof *t);
  t->max_keys = max_keys;
  t->max_bytes = max_bytes;
}

void asr_kv_table_fini(asr_kv_table_t *t) {
  for (size_t i = 0; i < t->count; i++) free(t->entries[i].val);
  free(t->entries);
  free(t->index);
  memset(t, 0, sizeof *t);
}

/* Returns the slot holding key, or the empty slot where it would go. */
static size_t find_slot(const asr_kv_table_t *t, const uint8_t *key, size_t klen) {
  size_t mask = t->index_cap - 1;
  size_t i = (size_t)asr_kv_key_hash(key, klen) & mask;
  for (;;) {
    uint32_t e = t->index[i];
    if (e == 0) return i;
    const asr_kv_entry_t *ent = &t->entries[e - 1];
    if (ent->klen == klen && memcmp(ent->key, key, klen) == 0) return i;
    i = (i + 1) & mask;
  }
}

static int grow_index(asr_kv_table_t *t) {
  size_t ncap = t->index_cap ? t->index_cap * 2 : 64;
  uint32_t *nidx = calloc(ncap, sizeof *nidx);
  if (!nidx) return ASR_ENOMEM;
  free(t->index);
  t->index = nidx;
  t->index_cap = ncap;
  for (size_t e = 0; e < t->count; e++) {
    size_t s = find_slot(t, t->entries[e].key, t->entries[e].klen);
    t->index[s] = (uint32_t)(e + 1);
  }
  return 0;
}

int asr_kv_table_del(asr_kv_table_t *t, const uint8_t *key, size_t klen) {
  if (!key || klen == 0 || klen > ASR_KV_KEY_MAX) return ASR_EINVAL;
  const asr_kv_entry_t *ent = asr_kv_table_get(t, key, klen);
  if (!ent) return ASR_ENOTFOUND;
  size_t e = (size_t)(ent - t->entries);
  t->bytes -= t->entries[e].klen + (size_t)t->entries[e].vlen;
  free(t->entries[e].val);
  /* the later entries move down one (insertion order stays), so the index,
   * which names entries by number, is built again: a delete is rare (a
   * dead process's keys), a lookup is not */
  memmove(&t->entries[e], &t->entries[e + 1], (t->count - e - 1) * sizeof *t->entries);
  t->count--;
  memset(t->index, 0, t->index_cap * sizeof *t->index);
  for (size_t i = 0; i < t->count; i++)
    t->index[find_slot(t, t->entries[i].key, t->entries[i].klen)] = (uint32_t)(i + 1);
  return 0;
}

const asr_kv_entry_t *asr_kv_table_get(const asr_kv_table_t *t, const uint8_t *key, size_t klen) {
  if (t->count == 0 || klen > ASR_KV_KEY_MAX) return NULL;
  uint32_t e = t->index[find_slot(t, key, klen)];
  return e ? &t->entries[e - 1] : NULL;
}

const asr_kv_entry_t *asr_kv_table_at(const asr_kv_table_t *t, size_t idx) {
  return idx < t->count ? &t->entries[idx] : NULL;
}

int asr_kv_table_set(asr_kv_table_t *t, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
                     int vtype) {
  if (!key || klen == 0 || klen > ASR_KV_KEY_MAX || vlen > ASR_KV_VAL_MAX || (vlen && !val))
    return ASR_EINVAL;
  asr_kv_entry_t *ent = (asr_kv_entry_t *)asr_kv_table_get(t, key, klen);
  size_t old = ent ? ent->vlen : 0;
  size_t need = ent ? t->bytes - old + vlen : t->bytes + klen + vlen;
  if (need > t->max_bytes) return ASR_ENOSPACE;
  if (!ent && t->count >= t->max_keys) return ASR_ENOSPACE;
  uint8_t *copy = NULL;
  if (vlen) {
    copy = malloc(vlen);
    if (!copy) return ASR_ENOMEM;
    memcpy(copy, val, vlen);
  }
  if (!ent) {
    if ((t->count + 1) * 2 > t->index_cap && grow_index(t) != 0) {
      free(copy);
      return ASR_ENOMEM;
    }
    if (t->count == t->cap) {
      size_t ncap = t->cap ? t->cap * 2 : 64;
      asr_kv_entry_t *ne = realloc(t->entries, ncap * sizeof *ne);
      if (!ne) {
        free(copy);
        return ASR_ENOMEM;
      }
      t->entries = ne;
      t->cap = ncap;
    }
    ent = &t->entries[t->count];
    memset(ent, 0, sizeof *ent);
    memcpy(ent->key, key, klen);
    ent->klen = (uint16_t)klen;
    t->index[find_slot(t, key, klen)] = (uint32_t)(t->count + 1);
    t->count++;
  } else {
    free(ent->val);
  }
  ent->val = copy;
  ent->vlen = (uint16_t)vlen;
  ent->vtype = (uint8_t)vtype;
  t->bytes = need;
  return 0;
}
