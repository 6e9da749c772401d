/*
 * handle.h -- the handles the application holds (asr_comm_t *,
 * asr_request_t *, asr_tensor_t *), checked at every call: a call on a
 * comm that was closed, a request of it, or a tensor that was freed fails
 * with a message and reads nothing that was freed (issue 50, point 5).
 *
 * A handle is a 64-bit value:
 *
 *   bits 63..48  generation, 1..65535 (0 is never used)
 *   bits 47..3   its record's address (records are 8-byte aligned)
 *   bits  2..0   kind: 1 comm, 2 request, 3 tensor, 4 memory registration,
 *                5 imported descriptor, 6 prepared list (0, 7: no handle)
 *
 * Every record has a live word: its handle while that is live, the same
 * with kind 0 once retired (so it keeps the generation). Records are
 * never given back to malloc: a comm's record, its request pool and a
 * tensor's record are recycled through slabs (asr__slab_take,
 * asr__slab_put), one per kind of record, so a record's memory stays a
 * record of that kind with its live word where it was. Closing or freeing
 * retires the handle and recycles the record; its next use gets the next
 * generation. Checking a handle (asr__handle_rec) is a test of its kind,
 * then one load of the live word, compared with the handle itself, from
 * memory that is always libasr's. The word lies in a cache line of the
 * record that the call reads anyway: the check costs the data path a few
 * instructions, not a load that the rest of the call waits for. A
 * generation is never 0, so a handle is at least 2^48: never a user-space
 * address (x86-64 and aarch64 keep those below 2^47 unless a mapping asks
 * for more), and code that dereferences one faults.
 *
 * Why recycled records, and not:
 * - a registry of live record addresses: a hash probe per call, and malloc
 *   gives a freed record's address to the next record, so a stale pointer
 *   passes the check and names the new one;
 * - cells apart from the records (16 bytes each: the live handle and the
 *   record's address; only they recycled, the records freed): the record's
 *   address then comes from a load that the rest of every call waits for,
 *   a cost this tree measured on asr_isend, asr_irecv and asr_test (the
 *   commit that brought this file has the figures), and one that grows
 *   where libfabric's memory pushes the cells out of L1.
 * The price: memory. What a closed comm or freed tensor held stays in its
 * slab, for the next one, up to the most that were alive at once (a comm's
 * record is 1.9 KB, its pool 22 KB once it posted, a tensor's 32 bytes).
 * Under AddressSanitizer a record in a slab is poisoned but for its live
 * words, so a use of it that is not a handle check is still reported, as
 * it was when records were freed.
 *
 * Requests. A comm's 128 requests are its pool's records (rt.h); a post
 * gives the request it pops the next generation (asr__handle_renew), so a
 * completed request's handle stays "not in use" (the seed's
 * ASR_UNCONNECTED) once a later post took its record, rather than name
 * that post's transfer as the seed's pointer did (whose test could
 * complete it behind its owner's back). Closing the comm retires all 128.
 *
 * Limits. A generation wraps after 65535 uses of a record (a request: posts
 * of it): a handle kept that long names the record's current use, which is
 * live, so memory stays safe, but the call acts on it. A handle closed on
 * one thread while another thread is inside a call on it is still the
 * application's error: the check and the use are not one atomic step (that
 * would take a reference count on every post and test). A value libasr
 * never returned that has kind bits set is read as a record; one without
 * (NULL, a pointer to anything 8-byte aligned) is refused unread.
 */
#ifndef ASR_HANDLE_H
#define ASR_HANDLE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define ASR_HK_COMM 1u
#define ASR_HK_REQUEST 2u
#define ASR_HK_TENSOR 3u
#define ASR_HK_MEM 4u  /* asr_mem_t (rma/mem.c) */
#define ASR_HK_RMEM 5u /* asr_rmem_t (rma/rma_api.c) */
#define ASR_HK_XFER 6u /* asr_xfer_t (rma/rma_api.c) */
#define ASR_HK_MASK 0x7ull
#define ASR_H_ADDR 0x0000fffffffffff8ull

_Static_assert(sizeof(void *) == 8, "a handle holds a 48-bit address and a generation in 64 bits");

/* Whether h is a live handle of kind `kind` whose record keeps its live
 * word at live_off. No lock and no write: the data path's whole check
 * (asr_isend, asr_irecv, asr_test; one test of the kind bits, one load,
 * one compare). The acquire pairs with asr__handle_renew's release: what
 * was written to the record before it went live is seen. */
static inline int asr__handle_live(const void *h, unsigned kind, size_t live_off) {
  uint64_t v = (uint64_t)(uintptr_t)h;
  return (v & ASR_HK_MASK) == kind &&
         atomic_load_explicit((_Atomic uint64_t *)(uintptr_t)((v & ASR_H_ADDR) + live_off),
                              memory_order_acquire) == v;
}

/* The record of handle h, once asr__handle_live said it is live. */
static inline void *asr__handle_addr(const void *h) { return (void *)((uintptr_t)h & ASR_H_ADDR); }

/* The record handle h names if it is live (asr__handle_live), else NULL. */
static inline void *asr__handle_rec(const void *h, unsigned kind, size_t live_off) {
  return asr__handle_live(h, kind, live_off) ? asr__handle_addr(h) : NULL;
}

/* Makes record rec, whose live word is *live, live as kind under its next
 * generation, and returns its handle; every earlier handle of it is dead.
 * The caller owns the record (a post: its comm's data-path lock, holding
 * the request it popped; a new comm or tensor: nobody else has it yet). */
static inline uint64_t asr__handle_renew(void *rec, _Atomic uint64_t *live, unsigned kind) {
  /* the low 48 bits all ones, plus one: the generation's next, the rest 0 */
  uint64_t v = (atomic_load_explicit(live, memory_order_relaxed) | ASR_H_ADDR | ASR_HK_MASK) + 1;
  if (!v) v = 1ull << 48; /* after 65535: 1, never 0 (a handle is never a user-space address) */
  v |= (uint64_t)(uintptr_t)rec | kind;
  atomic_store_explicit(live, v, memory_order_release);
  return v;
}

/* Retires the live handle of the record whose live word is *live (its
 * owner alone: a close, a free); a retired one stays retired. */
static inline void asr__handle_retire(_Atomic uint64_t *live) {
  atomic_fetch_and_explicit(live, ~ASR_HK_MASK, memory_order_release);
}

/* A slab: the recycled records of one kind, never given back to malloc
 * (see above). live_off, stride and nlive say where a record's live words
 * are (a pool: one in each of its 128 requests). Define one with
 * ASR_SLAB; its functions take the module's lock, never on a post or a
 * test. */
typedef struct asr__slab {
  const char *name; /* for messages */
  size_t size;      /* of one record */
  size_t live_off, stride;
  int nlive;
  void **ring; /* the free records, oldest first: a ring of cap */
  size_t cap, head, n;
  void **all; /* every record it made, live or free (LeakSanitizer's view: below) */
  size_t nall, capall;
} asr__slab_t;
#define ASR_SLAB(name_, size_, live_off_, stride_, nlive_) \
  { .name = (name_), .size = (size_), .live_off = (live_off_), .stride = (stride_), .nlive = (nlive_) }

/* A record of s: the one freed longest ago, or a new one; every byte zero
 * but its live words, which keep their generations (not live). NULL when
 * out of memory. Any thread. */
void *asr__slab_take(asr__slab_t *s);

/* Recycles rec, whose handles its owner retired and which nothing else
 * uses any more (under ASan it is poisoned but for its live words). Any
 * thread. */
void asr__slab_put(asr__slab_t *s, void *rec);

/* Logs, in one line, why h is not a live handle of kind `kind` for the
 * call fn ("asr_test: request 0x... is not a live request (its comm was
 * closed?)"). live_off is where its kind keeps the live word. The callers
 * return ASR_INVALID, or asr_test ASR_UNCONNECTED. */
void asr__handle_bad(const char *fn, const void *h, unsigned kind, size_t live_off) __attribute__((cold));

#endif /* ASR_HANDLE_H */
