/*
 * mem.c -- registrations (rma.h): asr_mem_register, asr_mem_deregister,
 * asr_mem_export; each registration's libfabric registration on every
 * endpoint of its LNC, and the LNC's table of live keys.
 */
#include "config.h"

#define _GNU_SOURCE 1
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "kv_secret.h"
#include "rma.h"

/* The records of deregistered memory, for the next (handle.h). */
static asr__slab_t mem_slab =
    ASR_SLAB("memory registration", sizeof(struct asr_mem), offsetof(struct asr_mem, live), 0, 1);

_Static_assert(ASR_MEM_SECRET_LEN == ASR_KV_SECRET_LEN, "a descriptor is tagged with the job secret");
_Static_assert(ASR_MEM_DESC_LEN <= ASR_MEM_DESC_MAX, "a descriptor fits what asr.h promises");
_Static_assert(ASR_MEM_WHO_LEN == ASR_OFI_WHO_LEN, "a descriptor names its owner by its who");

int asr__mem_secret(uint8_t secret[ASR_MEM_SECRET_LEN], char *err, size_t errlen) {
  return asr_kv_secret_from_env(secret, err, errlen);
}

static uint64_t remote_access(unsigned access) {
  return (access & ASR_MEM_REMOTE_READ ? FI_REMOTE_READ : 0) |
         (access & ASR_MEM_REMOTE_WRITE ? FI_REMOTE_WRITE : 0);
}

/* Registers m on endpoint i (ep_mutex held): 0 or an ASR_E* with err. */
static int reg_on(asr_ctx_t *ctx, struct asr_mem *m, int i, char *err, size_t errlen) {
  asr__ofi_t *o = &ctx->fab.eps[i];
  if (!o->rma) {
    /* the endpoint's provider has no remote access: peers on that path
     * cannot reach the memory, and their posts say so (rma_api.c) */
    return 0;
  }
  int rc = asr__ofi_mr_reg_remote(o, m->va, m->len, remote_access(m->access), m->key, &m->mr[i]);
  if (rc) snprintf(err, errlen, "registering it with %s: %s", o->provider, asr_strerror(rc));
  return rc;
}

void asr__mem_ep_opened(asr_ctx_t *ctx, int i) {
  for (struct asr_mem *m = ctx->rma.mems; m; m = m->next) {
    char err[256];
    if (reg_on(ctx, m, i, err, sizeof err) != 0)
      asr_error("fab", "lnc %d: memory at %p (%zu bytes) stays out of reach of the peers of %s: %s", ctx->lnc,
                m->va, m->len, ctx->fab.ep_prov[i], err);
  }
}

/* The LNC's table (rma.h), made at its first registration: 0 or an ASR_E*. */
static int table_make(asr_ctx_t *ctx, char *err, size_t errlen) {
  if (ctx->rma.tab) return 0;
  size_t bytes = ASR_MEM_TAB_SLOTS * sizeof(uint64_t);
  char name[32];
  snprintf(name, sizeof name, "asr-mem-lnc%d", ctx->lnc);
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return asr_errf(err, errlen, asr_err_from_errno(e), "cannot make the LNC's registration table: %s",
                    strerror(e));
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return asr_errf(err, errlen, asr_err_from_errno(e), "cannot map the LNC's registration table: %s",
                    strerror(e));
  }
  ctx->rma.free_slots = malloc(ASR_MEM_TAB_SLOTS * sizeof(uint32_t));
  ctx->rma.slot_va = calloc(ASR_MEM_TAB_SLOTS, sizeof *ctx->rma.slot_va);
  ctx->rma.slot_len = calloc(ASR_MEM_TAB_SLOTS, sizeof *ctx->rma.slot_len);
  ctx->rma.slot_access = calloc(ASR_MEM_TAB_SLOTS, sizeof *ctx->rma.slot_access);
  if (!ctx->rma.free_slots || !ctx->rma.slot_va || !ctx->rma.slot_len || !ctx->rma.slot_access) {
    free(ctx->rma.free_slots);
    free((void *)ctx->rma.slot_va);
    free((void *)ctx->rma.slot_len);
    free((void *)ctx->rma.slot_access);
    ctx->rma.free_slots = NULL;
    ctx->rma.slot_va = ctx->rma.slot_len = NULL;
    ctx->rma.slot_access = NULL;
    munmap(p, bytes);
    close(fd);
    return asr_errf(err, errlen, ASR_ENOMEM, "no memory for the LNC's registration table");
  }
  ctx->rma.tab = p;
  ctx->rma.tab_fd = fd;
  ctx->rma.nfree = 0;
  ctx->rma.next_slot = 0;
  return 0;
}

int asr_mem_register(int lnc, void *va, size_t len, unsigned access, asr_mem_t **out) {
  if (!out || !va || len == 0 || access == 0 || (access & ~(ASR_MEM_REMOTE_READ | ASR_MEM_REMOTE_WRITE))) {
    asr_error("svc",
              "asr_mem_register: needs memory, a length > 0, an access of ASR_MEM_REMOTE_READ and/or "
              "ASR_MEM_REMOTE_WRITE and an output pointer");
    return ASR_INVALID;
  }
  if ((uintptr_t)va + len < (uintptr_t)va) {
    asr_error("svc", "asr_mem_register: %zu bytes at %p wrap around the address space", len, va);
    return ASR_INVALID;
  }
  asr_ctx_t *ctx = asr__ctx_get(lnc);
  if (!ctx) {
    asr_error("svc", "asr_mem_register: LNC %d is not initialised (asr_init or asr_job_init first)", lnc);
    return ASR_INVALID;
  }
  struct asr_mem *m = asr__slab_take(&mem_slab);
  if (!m) return ASR_INVALID;
  m->ctx = ctx;
  m->va = va;
  m->len = len;
  m->access = access;
  char err[256];
  int rc = 0;
  pthread_mutex_lock(&ctx->fab.ep_mutex);
  if ((rc = table_make(ctx, err, sizeof err)) == 0) {
    if (ctx->rma.nfree)
      m->slot = ctx->rma.free_slots[--ctx->rma.nfree];
    else if (ctx->rma.next_slot < ASR_MEM_TAB_SLOTS)
      m->slot = ctx->rma.next_slot++;
    else
      rc = asr_errf(err, sizeof err, ASR_ENOSPACE,
                    "LNC %d holds %u registrations already: deregister some first", lnc, ASR_MEM_TAB_SLOTS);
  }
  if (rc == 0) {
    m->key = ((uint64_t)lnc << 48) | ASR_MEM_KEY_BIT | ++ctx->rma.next_key;
    for (int i = 0; i < ASR_NEPS && rc == 0; i++)
      if (atomic_load_explicit(&ctx->fab.ep_open[i], memory_order_acquire))
        rc = reg_on(ctx, m, i, err, sizeof err);
    if (rc) {
      for (int i = 0; i < ASR_NEPS; i++) asr__ofi_mr_dereg(m->mr[i]);
      ctx->rma.free_slots[ctx->rma.nfree++] = m->slot;
    }
  }
  if (rc == 0) {
    atomic_store_explicit(&ctx->rma.slot_va[m->slot], (uint64_t)(uintptr_t)va, memory_order_relaxed);
    atomic_store_explicit(&ctx->rma.slot_len[m->slot], len, memory_order_relaxed);
    atomic_store_explicit(&ctx->rma.slot_access[m->slot], access, memory_order_relaxed);
    atomic_store_explicit(&ctx->rma.tab[m->slot], m->key, memory_order_release);
    m->next = ctx->rma.mems;
    if (m->next) m->next->prev = m;
    ctx->rma.mems = m;
    atomic_fetch_add(&ctx->rma.nmems, 1);
  }
  pthread_mutex_unlock(&ctx->fab.ep_mutex);
  if (rc) {
    asr_error("svc", "asr_mem_register: %zu bytes at %p on LNC %d: %s", len, va, lnc, err);
    asr__slab_put(&mem_slab, m);
    return ASR_INVALID;
  }
  *out = (asr_mem_t *)(uintptr_t)asr__handle_renew(m, &m->live, ASR_HK_MEM);
  return ASR_SUCCESS;
}

/* Revokes m (ep_mutex held): its key leaves the table, its libfabric
 * registrations close (the providers refuse the key from then on), its
 * handle dies. Returns 1 when its senders are to be told (tell, and it
 * was registered on an endpoint). */
static int mem_revoke(asr_ctx_t *ctx, struct asr_mem *m, int tell) {
  asr__handle_retire(&m->live);
  /* peers on other hosts cannot see the table: their senders are told
   * (notif.c), so that their later posts are refused before they go; the
   * provider, which refuses the closed key, stands behind */
  int net = 0, told = 0;
  for (int i = 0; i < ASR_NEPS; i++) net |= m->mr[i] != NULL;
  if (tell && net) {
    if (ctx->rma.nrevq == ctx->rma.caprevq) {
      unsigned cap = ctx->rma.caprevq ? 2 * ctx->rma.caprevq : 16;
      uint64_t *q = realloc(ctx->rma.revq, cap * sizeof *q);
      if (q) {
        ctx->rma.revq = q;
        ctx->rma.caprevq = cap;
      }
    }
    if (ctx->rma.nrevq < ctx->rma.caprevq) {
      ctx->rma.revq[ctx->rma.nrevq++] = m->key;
      atomic_store(&ctx->rma.revq_n, ctx->rma.nrevq);
      atomic_fetch_add(&ctx->rma.revq_gen, 1);
      asr__ctx_wake(ctx);
      told = 1;
    }
  }
  atomic_store_explicit(&ctx->rma.tab[m->slot], 0, memory_order_release);
  for (int i = 0; i < ASR_NEPS; i++) {
    asr__ofi_mr_dereg(m->mr[i]);
    m->mr[i] = NULL;
  }
  if (m->prev)
    m->prev->next = m->next;
  else
    ctx->rma.mems = m->next;
  if (m->next) m->next->prev = m->prev;
  ctx->rma.free_slots[ctx->rma.nfree++] = m->slot;
  atomic_fetch_sub(&ctx->rma.nmems, 1);
  return told;
}

int asr_mem_deregister(asr_mem_t *h) {
  if (!h) return ASR_SUCCESS;
  struct asr_mem *m = asr__handle_rec(h, ASR_HK_MEM, offsetof(struct asr_mem, live));
  if (!m) {
    asr__handle_bad("asr_mem_deregister", h, ASR_HK_MEM, offsetof(struct asr_mem, live));
    return ASR_INVALID;
  }
  asr_ctx_t *ctx = m->ctx;
  pthread_mutex_lock(&ctx->fab.ep_mutex);
  int told = mem_revoke(ctx, m, 1);
  unsigned long gen = atomic_load(&ctx->rma.revq_gen);
  pthread_mutex_unlock(&ctx->fab.ep_mutex);
  asr__slab_put(&mem_slab, m);
  /* The peers on endpoints are told (notif.c), and each confirms that its
   * SEND comm refuses the key from now on: once they did, a later post of
   * theirs is refused before it goes (asr.h). A peer that does not answer
   * within ASR_DRAIN_TIMEOUT_MS is left to its provider's key check. */
  if (told) {
    uint64_t until = asr_time_ms() + (uint64_t)ctx->drain.timeout_ms;
    while ((atomic_load(&ctx->rma.revq_told) < gen || atomic_load(&ctx->rma.acks_owed) > 0) &&
           asr_time_ms() < until)
      asr_sleep_ms(1);
    if (atomic_load(&ctx->rma.revq_told) < gen || atomic_load(&ctx->rma.acks_owed) > 0)
      asr_warn("svc",
               "asr_mem_deregister: lnc %d: %ld peer(s) did not confirm the revocation within %ld ms "
               "(ASR_DRAIN_TIMEOUT_MS); their providers still refuse the key",
               ctx->lnc, atomic_load(&ctx->rma.acks_owed), ctx->drain.timeout_ms);
  }
  return ASR_SUCCESS;
}

int asr_mem_export(const asr_mem_t *h, void *desc, size_t *len) {
  struct asr_mem *m = asr__handle_rec(h, ASR_HK_MEM, offsetof(struct asr_mem, live));
  if (!m) {
    asr__handle_bad("asr_mem_export", h, ASR_HK_MEM, offsetof(struct asr_mem, live));
    return ASR_INVALID;
  }
  if (!desc || !len) {
    asr_error("svc", "asr_mem_export: needs a buffer and its capacity in *len");
    return ASR_INVALID;
  }
  if (*len < ASR_MEM_DESC_LEN) {
    asr_error("svc",
              "asr_mem_export: the buffer holds %zu bytes; a descriptor takes %d (ASR_MEM_DESC_MAX: %d)",
              *len, ASR_MEM_DESC_LEN, ASR_MEM_DESC_MAX);
    return ASR_INVALID;
  }
  uint8_t secret[ASR_MEM_SECRET_LEN];
  char err[256];
  if (asr__mem_secret(secret, err, sizeof err) != 0) {
    asr_error("svc", "asr_mem_export: %s", err);
    return ASR_INVALID;
  }
  asr__mem_desc_t d = {.access = m->access,
                       .lnc = m->ctx->lnc,
                       .slot = m->slot,
                       .tab_fd = (uint32_t)m->ctx->rma.tab_fd,
                       .va = (uint64_t)(uintptr_t)m->va,
                       .len = m->len,
                       .key = m->key};
  memcpy(d.who, m->ctx->who, ASR_MEM_WHO_LEN);
  asr__mem_desc_encode(&d, secret, desc);
  *len = ASR_MEM_DESC_LEN;
  return ASR_SUCCESS;
}

void asr__mem_ctx_close(asr_ctx_t *ctx) {
  pthread_mutex_lock(&ctx->fab.ep_mutex);
  while (ctx->rma.mems) {
    struct asr_mem *m = ctx->rma.mems;
    mem_revoke(ctx, m, 0);
    asr__slab_put(&mem_slab, m);
  }
  if (ctx->rma.tab) {
    munmap((void *)ctx->rma.tab, ASR_MEM_TAB_SLOTS * sizeof(uint64_t));
    close(ctx->rma.tab_fd);
    ctx->rma.tab = NULL;
  }
  free(ctx->rma.free_slots);
  ctx->rma.free_slots = NULL;
  free((void *)ctx->rma.slot_va);
  free((void *)ctx->rma.slot_len);
  free((void *)ctx->rma.slot_access);
  ctx->rma.slot_va = ctx->rma.slot_len = NULL;
  ctx->rma.slot_access = NULL;
  free(ctx->rma.revq);
  ctx->rma.revq = NULL;
  pthread_mutex_unlock(&ctx->fab.ep_mutex);
}
