/*
 * kv_table.h -- the KV server's bounded key -> value table.
 *
 * Binary keys (compared by length and bytes, never as C strings), values up to
 * ASR_KV_VAL_MAX. Entries are kept in insertion order (LIST walks them by
 * index) with an open-addressing hash index on top. SET on an existing key
 * replaces its value; DEL removes a key (the keys of a process that is gone).
 * Both the number of keys and the bytes held (keys + values) are bounded.
 */
#ifndef ASR_KV_TABLE_H
#define ASR_KV_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "kv_frame.h"

typedef struct {
  uint8_t key[ASR_KV_KEY_MAX];
  uint16_t klen;
  uint16_t vlen;
  uint8_t vtype;
  uint8_t *val; /* malloc'd, vlen bytes (NULL when vlen == 0); owned by the table */
} asr_kv_entry_t;

typedef struct {
  asr_kv_entry_t *entries; /* insertion order */
  size_t count, cap;
  uint32_t *index;  /* hash slots: entry number + 1, 0 = empty */
  size_t index_cap; /* power of two, kept >= 2 * count */
  size_t bytes;     /* sum of klen + vlen */
  size_t max_keys, max_bytes;
} asr_kv_table_t;

void asr_kv_table_init(asr_kv_table_t *t, size_t max_keys, size_t max_bytes);
void asr_kv_table_fini(asr_kv_table_t *t);

/* Stores key -> val. Returns 0, ASR_ENOSPACE when a limit would be exceeded
 * (nothing changes), or ASR_ENOMEM. */
int asr_kv_table_set(asr_kv_table_t *t, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
                     int vtype);

/* Removes key and its value: 0, ASR_ENOTFOUND when it is not there, or
 * ASR_EINVAL for a bad key. The later entries keep their order. */
int asr_kv_table_del(asr_kv_table_t *t, const uint8_t *key, size_t klen);

/* Returns the entry for key, or NULL. Valid until the next set or del. */
/* FNV-1a (64-bit) of a key: the table's index, and the server's held GETs. */
uint64_t asr_kv_key_hash(const uint8_t *key, size_t klen);

const asr_kv_entry_t *asr_kv_table_get(const asr_kv_table_t *t, const uint8_t *key, size_t klen);

/* Returns the idx-th entry in insertion order, or NULL past the end. */
const asr_kv_entry_t *asr_kv_table_at(const asr_kv_table_t *t, size_t idx);

#endif /* ASR_KV_TABLE_H */
