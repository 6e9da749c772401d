/*
 * notif.c -- notifications on the libfabric paths, and the owner's
 * progress (rma.h; asr.h, "One-sided transfers").
 *
 * A RECV comm's ring is ASR_NOTIF_DEPTH 64-bit slots of the owner's memory,
 * registered for its sender's remote writes. A notifying write whose
 * value has the direct form (rma.h) is one plain write with that remote
 * CQ data (ofi.c, OFI_POST_WRITEDATA), and the owner's drain puts the
 * value into the slot of its arrival. Any other is one operation
 * (OFI_POST_WRITE_NOTIFY): the data, then the value into slot seq mod the
 * depth, with remote CQ data in the ring form; or, on shm when only the
 * data fits the inject size, two in order (OFI_POST_INJECT_WRITE_NOTIFY):
 * the value, then the data with the remote CQ data. Either way the CQ
 * entry comes after both landed, and the owner's drain that reads that CQ
 * entry marks the slot arrived (on_rdata), and asr_notif_poll hands the
 * arrived slots out in sequence order. The sender never has more than the
 * depth not yet taken (the owner tells it what was taken), so a slot is
 * never written again before it was taken; a notifying write beyond that
 * waits, stashed (rma_ops.c).
 *
 * How the owner tells it: every quarter of the depth it takes, it writes
 * its taken count into the sender's credit word (an 8-byte inject write),
 * which the sender's own CQ reads land, so that its posts see the room
 * come back without its service thread; without a credit word, or when
 * the write cannot go, it says so on the mailbox instead (RING_TAKEN,
 * which the sender's service thread takes). The count only grows, and the
 * owner writes a count only once it took that many: the sender never
 * counts a slot free that is not.
 *
 * The handshake, on the mailbox (ofi.h), once per comm pair: the sender
 * makes its credit word and asks (RING_ASK with the word's key and
 * address: its first import of writable memory, or its first notifying
 * write); the owner's service thread makes the ring and answers RING (key,
 * target address).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "rma.h"

static int apply_sm_rings(asr_ctx_t *ctx);
#define TOMB ((asr__nring_t *)(uintptr_t)1)

/* --- an endpoint's rings by comm id (ep_lock held) ------------------------- */

static unsigned slot_of(uint32_t id, unsigned cap) { return (id * 2654435761u) & (cap - 1); }

static asr__nring_t *tab_find(const asr__nring_tab_t *t, uint32_t id) {
  if (!t->cap) return NULL;
  for (unsigned i = slot_of(id, t->cap), k = 0; k < t->cap; i = (i + 1) & (t->cap - 1), k++) {
    asr__nring_t *r = t->v[i];
    if (!r) return NULL;
    if (r != TOMB && r->comm_id == id) return r;
  }
  return NULL;
}

static int tab_put(asr__nring_tab_t *t, asr__nring_t *ring) {
  if (2 * (t->used + 1) > t->cap) { /* at most half full, tombstones included: rebuild */
    unsigned cap = t->cap ? t->cap : 16;
    while (2 * (atomic_load(&t->live) + 1) > cap / 2) cap *= 2;
    asr__nring_t **v = calloc(cap, sizeof *v);
    if (!v) return ASR_ENOMEM;
    for (unsigned i = 0; i < t->cap; i++)
      if (t->v[i] && t->v[i] != TOMB) {
        unsigned j = slot_of(t->v[i]->comm_id, cap);
        while (v[j]) j = (j + 1) & (cap - 1);
        v[j] = t->v[i];
      }
    free(t->v);
    t->v = v;
    t->cap = cap;
    t->used = atomic_load(&t->live);
  }
  unsigned j = slot_of(ring->comm_id, t->cap);
  while (t->v[j] && t->v[j] != TOMB) j = (j + 1) & (t->cap - 1);
  if (!t->v[j]) t->used++;
  t->v[j] = ring;
  atomic_fetch_add(&t->live, 1);
  return 0;
}

static void tab_del(asr__nring_tab_t *t, asr__nring_t *ring) {
  for (unsigned i = 0; i < t->cap; i++)
    if (t->v[i] == ring) {
      t->v[i] = TOMB;
      atomic_fetch_sub(&t->live, 1);
      return;
    }
}

/* A peer's notifying write landed (ofi.c's drain, ep_lock held): its
 * slot is marked arrived, after the owner wrote the value there itself
 * for the direct form (rma.h). */
static void on_rdata(void *arg, uint64_t data) {
  asr__nring_tab_t *t = arg;
  int direct = (data & ASR_NOTIF_DIRECT) != 0;
  uint32_t id = direct ? (uint32_t)((data >> 48) & (ASR_NOTIF_DIRECT_IDS - 1)) : (uint32_t)(data >> 40);
  asr__nring_t *r = tab_find(t, id);
  if (!r) {
    asr_debug("fab", "a notification for comm %u, which has no ring here (closed?): dropped", id);
    return;
  }
  /* the sender keeps within the depth (above): anything else is not ours */
  uint64_t full;
  if (direct) {
    full = r->nin;
    if (full - r->next >= ASR_NOTIF_DEPTH) {
      asr_warn("fab", "a notification for comm %u beyond the %d not yet taken: dropped", id, ASR_NOTIF_DEPTH);
      return;
    }
    r->vals[full % ASR_NOTIF_DEPTH] = data & ASR_NOTIF_DIRECT_VAL;
  } else {
    uint64_t seq = data & ASR_NOTIF_SEQ_MASK, next = r->next & ASR_NOTIF_SEQ_MASK;
    if (((seq - next) & ASR_NOTIF_SEQ_MASK) >= ASR_NOTIF_DEPTH) {
      asr_warn("fab", "a notification for comm %u with sequence %llu, outside the %d after %llu: dropped", id,
               (unsigned long long)seq, ASR_NOTIF_DEPTH, (unsigned long long)next);
      return;
    }
    full = r->next + ((seq - next) & ASR_NOTIF_SEQ_MASK);
  }
  r->arrived[full % ASR_NOTIF_DEPTH] = full + 1;
  if (full + 1 > r->nin) r->nin = full + 1;
}

void asr__notif_ep_opened(asr_ctx_t *ctx, int i) {
  ctx->fab.eps[i].on_rdata = on_rdata;
  ctx->fab.eps[i].rdata_arg = &ctx->rma.rings[i];
}

/* --- the handshake (service thread) ---------------------------------------- */

/* RECV comm c's ring, made when its sender first asks (its credit word
 * under credit_key at credit_addr; key 0: none): 0 or an ASR_E*. */
static int ring_make(asr_ctx_t *ctx, struct asr_comm *c, uint64_t credit_key, uint64_t credit_addr) {
  if (atomic_load_explicit(&c->rma.ring, memory_order_relaxed)) return 0; /* this thread made it */
  asr__ofi_t *o = asr__comm_ofi(c);
  asr__nring_t *r = calloc(1, sizeof *r);
  if (!r) return ASR_ENOMEM;
  if (posix_memalign((void **)&r->vals, 64, ASR_NOTIF_DEPTH * sizeof(uint64_t)) != 0) {
    free(r);
    return ASR_ENOMEM;
  }
  memset(r->vals, 0, ASR_NOTIF_DEPTH * sizeof(uint64_t));
  int rc = asr__ofi_mr_reg_remote(o, r->vals, ASR_NOTIF_DEPTH * sizeof(uint64_t), FI_REMOTE_WRITE, 0, &r->mr);
  if (rc) {
    free(r->vals);
    free(r);
    return rc;
  }
  r->comm_id = c->orecv.comm_id;
  r->comm = c;
  fi_addr_t peer;
  if (credit_key && asr__ofi_recv_peer(o, &c->orecv, &peer) == 0) {
    r->credit_peer = peer;
    r->credit_key = credit_key;
    r->credit_addr = credit_addr;
  }
  int i = c->ep;
  asr__ofi_lock(o);
  rc = tab_put(&ctx->rma.rings[i], r);
  asr__ofi_unlock(o);
  if (rc) {
    asr__ofi_mr_dereg(r->mr);
    free(r->vals);
    free(r);
    return rc;
  }
  atomic_store_explicit(&c->rma.ring, r, memory_order_release);
  return 0;
}

void asr__notif_on_ctl(asr_ctx_t *ctx, struct asr_comm *c, const asr__ofi_ctl_t *m) {
  switch (m->kind) {
    case ASR_CTL_RING_ASK: {
      int rc = ring_make(ctx, c, m->count, m->aux);
      asr__ofi_t *o = asr__comm_ofi(c);
      asr__nring_t *ring = atomic_load_explicit(&c->rma.ring, memory_order_relaxed);
      uint64_t key = rc ? 0 : asr__ofi_mr_key(ring->mr);
      uint64_t addr = rc ? 0 : asr__ofi_rma_base(o, ring->vals);
      if (rc)
        asr_error("fab", "lnc %d RECV comm from %s/lnc %d: cannot make its notification ring: %s", ctx->lnc,
                  c->peer_ip, c->peer_lnc, asr_strerror(rc));
      /* the answer is retried by the sender's ask, which it repeats while
       * it waits (asr__notif_tick) */
      int src = asr__ofi_ctl_to_send(o, &c->orecv, ASR_CTL_RING, key, addr);
      if (src)
        asr_debug("fab", "lnc %d: answering a ring ask from %s/lnc %d: %s", ctx->lnc, c->peer_ip, c->peer_lnc,
                  asr_strerror(src));
      return;
    }
    case ASR_CTL_RING:
      if (atomic_load(&c->rma.ring_state) >= 2) return;
      if (m->count == 0) { /* refused: its notifying writes fail (rma_ops.c) */
        asr_error("fab", "lnc %d SEND comm to %s/lnc %d: the peer could not make a notification ring",
                  ctx->lnc, c->peer_ip, c->peer_lnc);
        atomic_store_explicit(&c->rma.ring_state, 3, memory_order_release);
        ctx->stash.queue_full = 1;
        return;
      }
      c->rma.ring_key = m->count;
      c->rma.ring_addr = m->aux;
      atomic_store_explicit(&c->rma.ring_state, 2, memory_order_release);
      ctx->stash.queue_full = 1; /* what waited for it goes at the next drain */
      return;
    case ASR_CTL_REVOKED: {
      unsigned n = atomic_load(&c->rma.nrevoked);
      atomic_store_explicit(&c->rma.revoked[n % ASR_REVOKED_KEEP], m->count, memory_order_relaxed);
      atomic_store_explicit(&c->rma.nrevoked, n + 1, memory_order_release);
      /* posts read the list with acquire: every later one refuses the key */
      int rc = asr__ofi_ctl_to_recv(asr__comm_ofi(c), &c->osend, ASR_CTL_REVOKED_ACK, m->count, 0);
      if (rc == ASR_EAGAIN)
        rc = asr__ofi_ctl_to_recv(asr__comm_ofi(c), &c->osend, ASR_CTL_REVOKED_ACK, m->count, 0);
      if (rc)
        asr_debug("fab", "lnc %d: confirming a revocation to %s/lnc %d: %s", ctx->lnc, c->peer_ip,
                  c->peer_lnc, asr_strerror(rc));
      return;
    }
    case ASR_CTL_REVOKED_ACK:
      if (atomic_fetch_sub(&ctx->rma.acks_owed, 1) <= 0) atomic_fetch_add(&ctx->rma.acks_owed, 1);
      return;
    case ASR_CTL_RING_TAKEN: {
      uint64_t had = atomic_load(&c->rma.ntaken);
      if (m->count > had) atomic_store_explicit(&c->rma.ntaken, m->count, memory_order_release);
      ctx->stash.queue_full = 1;
      return;
    }
    default: return;
  }
}

/* The sender frees its credit word with its comm, which its close does
 * once this comm answered its FIN (ACK, drain.c), or its own CLOSED came:
 * a credit write after that would reach a key that is gone (which
 * tcp;ofi_rxm answers by dropping the connection). So the FIN stops them,
 * under ep_lock, which asr_notif_poll holds from its check of credit_key
 * to its write, and which the ACK's send takes after this: a credit write
 * is either on the wire before the ACK (in order: ASR_OFI_RMA_ORDER), or
 * never made. */
void asr__notif_on_fin(struct asr_comm *c) {
  asr__nring_t *r = atomic_load_explicit(&c->rma.ring, memory_order_acquire);
  if (!r || asr__comm_sm(c)) return;
  asr__ofi_t *o = asr__comm_ofi(c);
  asr__ofi_lock(o);
  r->credit_key = 0;
  asr__ofi_unlock(o);
}

#define ASK_AGAIN_MS 100 /* a ring asked for and not answered is asked again */

/* SEND comm c's credit word, registered for its owner's remote writes
 * (service thread, before its first RING_ASK). Without it (no memory, or
 * the registration failed) the owner answers on the mailbox alone. */
static void credit_make(struct asr_comm *c, asr__ofi_t *o) {
  uint64_t *w;
  if (posix_memalign((void **)&w, 64, 64) != 0) return;
  memset(w, 0, 64);
  struct fid_mr *mr = NULL;
  if (asr__ofi_mr_reg_remote(o, w, sizeof *w, FI_REMOTE_WRITE, 0, &mr) != 0) {
    free(w);
    return;
  }
  c->rma.credit_mr = mr;
  c->rma.credit = w;
}

int asr__notif_tick(asr_ctx_t *ctx, int *tmo) {
  int moved = 0;
  if (atomic_load(&ctx->rma.ring_asks) > 0) {
    atomic_store(&ctx->rma.ring_asks, 0);
    int again = 0;
    uint64_t now = asr_time_ms();
    pthread_mutex_lock(&ctx->comms.mutex);
    for (struct asr_comm *c = ctx->comms.connected; c; c = c->next) {
      if (c->type != ASR_SEND_COMM || asr__comm_sm(c) || !atomic_load(&c->rma.ring_wanted)) continue;
      int st = atomic_load(&c->rma.ring_state);
      if (st >= 2 || atomic_load(&c->status) != ASR_COMM_CONNECTED) continue;
      if (st == 1 && now < c->rma.ring_asked_ms + ASK_AGAIN_MS) {
        again = 1;
        continue;
      }
      asr__ofi_t *o = asr__comm_ofi(c);
      if (!c->rma.credit) credit_make(c, o);
      uint64_t key = c->rma.credit ? asr__ofi_mr_key(c->rma.credit_mr) : 0;
      uint64_t addr = c->rma.credit ? asr__ofi_rma_base(o, c->rma.credit) : 0;
      int rc = asr__ofi_ctl_to_recv(o, &c->osend, ASR_CTL_RING_ASK, key, addr);
      if (rc == 0) {
        atomic_store(&c->rma.ring_state, 1);
        c->rma.ring_asked_ms = now;
        moved = 1;
      }
      again = 1; /* until the answer came */
    }
    pthread_mutex_unlock(&ctx->comms.mutex);
    if (again) {
      atomic_fetch_add(&ctx->rma.ring_asks, 1);
      if (*tmo < 0 || *tmo > 1) *tmo = 1;
    }
  }
  /* Revocations (mem.c) told to the sender of every RECV comm on an
   * endpoint: the peers that may hold an import of this LNC's memory */
  if (atomic_load(&ctx->rma.revq_n) > 0) {
    pthread_mutex_lock(&ctx->fab.ep_mutex);
    unsigned n = ctx->rma.nrevq;
    unsigned long gen = atomic_load(&ctx->rma.revq_gen);
    uint64_t *keys = n ? malloc(n * sizeof *keys) : NULL;
    if (keys) {
      memcpy(keys, ctx->rma.revq, n * sizeof *keys);
      ctx->rma.nrevq = 0;
      atomic_store(&ctx->rma.revq_n, 0);
    }
    pthread_mutex_unlock(&ctx->fab.ep_mutex);
    pthread_mutex_lock(&ctx->comms.mutex);
    for (struct asr_comm *c = ctx->comms.connected; keys && c; c = c->next) {
      if (c->type != ASR_RECV_COMM || asr__comm_sm(c) || atomic_load(&c->status) != ASR_COMM_CONNECTED)
        continue;
      for (unsigned k = 0; k < n; k++) {
        /* best effort: a full queue now is a post the provider refuses later */
        int rc = asr__ofi_ctl_to_send(asr__comm_ofi(c), &c->orecv, ASR_CTL_REVOKED, keys[k], 0);
        if (rc == ASR_EAGAIN)
          rc = asr__ofi_ctl_to_send(asr__comm_ofi(c), &c->orecv, ASR_CTL_REVOKED, keys[k], 0);
        if (rc == 0)
          atomic_fetch_add(&ctx->rma.acks_owed, 1); /* its REVOKED_ACK pays it back */
        else
          asr_debug("fab", "lnc %d: telling %s/lnc %d of a revocation: %s", ctx->lnc, c->peer_ip, c->peer_lnc,
                    asr_strerror(rc));
      }
    }
    pthread_mutex_unlock(&ctx->comms.mutex);
    if (keys) atomic_store(&ctx->rma.revq_told, gen);
    free(keys);
    moved = 1;
  }
  /* Manual progress: a peer's write or read into this LNC's memory moves
   * only while its CQ is read. While the LNC has registrations or rings,
   * this thread reads each endpoint's every millisecond, unless another
   * thread read it since (a program polling its requests or
   * notifications): taking the endpoint's lock from a thread that polls
   * it without pause only holds that thread up. */
  int rings = 0;
  for (int i = 0; i < ASR_NEPS; i++) rings += (int)atomic_load(&ctx->rma.rings[i].live);
  if (atomic_load(&ctx->rma.nmems) > 0 || rings > 0) {
    moved |= apply_sm_rings(ctx);
    for (int i = 0; i < ASR_NEPS; i++) {
      if (!atomic_load_explicit(&ctx->fab.ep_open[i], memory_order_acquire)) continue;
      asr__ofi_t *o = &ctx->fab.eps[i];
      if (atomic_load_explicit(&o->drains, memory_order_relaxed) == ctx->rma.drains_seen[i])
        (void)asr__ofi_progress(o);
      ctx->rma.drains_seen[i] = atomic_load_explicit(&o->drains, memory_order_relaxed);
    }
    if (*tmo < 0 || *tmo > 1) *tmo = 1;
  }
  return moved;
}

void asr__notif_ctx_close(asr_ctx_t *ctx) {
  for (int i = 0; i < ASR_NEPS; i++) {
    free(ctx->rma.rings[i].v); /* every ring went with its comm */
    memset(&ctx->rma.rings[i], 0, sizeof ctx->rma.rings[i]);
  }
}

void asr__notif_comm_free(struct asr_comm *c) {
  if (c->rma.tab) munmap((void *)c->rma.tab, ASR_MEM_TAB_SLOTS * sizeof(uint64_t));
  c->rma.tab = NULL;
  if (c->rma.credit) {
    asr__ofi_mr_dereg(c->rma.credit_mr);
    free(c->rma.credit);
    c->rma.credit = NULL;
    c->rma.credit_mr = NULL;
  }
  asr__nring_t *r = atomic_load_explicit(&c->rma.ring, memory_order_acquire);
  if (!r) return;
  asr__ofi_t *o = asr__comm_ofi(c);
  asr__ofi_lock(o);
  tab_del(&c->ctx->rma.rings[c->ep], r);
  asr__ofi_unlock(o);
  asr__ofi_mr_dereg(r->mr);
  free(r->vals);
  free(r);
  atomic_store_explicit(&c->rma.ring, NULL, memory_order_relaxed);
}

/* --- the sm path's one-sided ring (sm/sm_rma.c) ------------------------------ */

/* The owner's check of a small write, or of a part of a large copy, its
 * ring carries (asr__sm_check_fn): the registration in slot is live under
 * key, grants want, and holds [dst, dst + len). The key is read again
 * after the region: a deregistration and a registration in the same slot
 * meanwhile change it (mem.c writes the region before it publishes the
 * key). */
static int owner_check(void *arg, uint32_t slot, uint64_t key, uint64_t dst, uint64_t len, unsigned want) {
  asr_ctx_t *ctx = arg;
  if (!ctx->rma.tab || slot >= ASR_MEM_TAB_SLOTS || !key) return ASR_EPERM;
  if (atomic_load_explicit(&ctx->rma.tab[slot], memory_order_acquire) != key) return ASR_EPERM;
  uint64_t va = atomic_load_explicit(&ctx->rma.slot_va[slot], memory_order_relaxed);
  uint64_t n = atomic_load_explicit(&ctx->rma.slot_len[slot], memory_order_relaxed);
  unsigned access = atomic_load_explicit(&ctx->rma.slot_access[slot], memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  if (atomic_load_explicit(&ctx->rma.tab[slot], memory_order_relaxed) != key) return ASR_EPERM;
  if ((access & want) != want || !want || dst < va || dst - va > n || len > n - (dst - va)) return ASR_EPERM;
  return 0;
}

/* Applies the one-sided rings of ctx's sm RECV comms that have records
 * waiting (service thread, each tick while registrations live): small
 * writes land while the owner's program makes no call. */
static int apply_sm_rings(asr_ctx_t *ctx) {
  int moved = 0;
  pthread_mutex_lock(&ctx->comms.mutex);
  for (struct asr_comm *c = ctx->comms.connected; c; c = c->next) {
    asr__sm_t *sm = c->type == ASR_RECV_COMM ? asr__comm_sm(c) : NULL;
    if (!sm || !asr__sm_osr_pending(sm)) continue;
    asr__sm_lock(sm);
    moved |= asr__sm_osr_apply_locked(sm, owner_check, ctx);
    asr__sm_unlock(sm);
  }
  pthread_mutex_unlock(&ctx->comms.mutex);
  return moved;
}

int asr__rma_sm_apply_locked(struct asr_comm *c) {
  return asr__sm_osr_apply_locked(asr__comm_sm(c), owner_check, c->ctx);
}

/* --- asr_notif_poll -------------------------------------------------------- */

int asr_notif_poll(asr_comm_t *h, uint64_t *values, int max, int *n) {
  struct asr_comm *c = asr__comm_of(h);
  if (!c) {
    asr__comm_bad("asr_notif_poll", h);
    return ASR_INVALID;
  }
  if (c->type != ASR_RECV_COMM || !values || max < 0 || !n) {
    asr_error("svc",
              "asr_notif_poll: needs a RECV comm (the owner's, from the writer), values, max >= 0 and n");
    return ASR_INVALID;
  }
  asr__sm_t *sm = asr__comm_sm(c);
  if (sm) {
    *n = asr__sm_notif_take(sm, values, max, owner_check, c->ctx);
    if (ASR_OBS_ON())
      for (int i = 0; i < *n; i++) asr__obs_notif(c, values[i]);
    if (*n)
      asr__poll_found();
    else
      asr__poll_idle();
    return ASR_SUCCESS;
  }
  asr__ofi_t *o = asr__comm_ofi(c);
  asr__nring_t *r = atomic_load_explicit(&c->rma.ring, memory_order_acquire);
  if (!o || !r) {
    /* no ring, no notification yet; the sender's ask makes it */
    if (o) (void)asr__ofi_progress(o);
    *n = 0;
    return ASR_SUCCESS;
  }
  int k = 0;
  asr__ofi_lock(o);
  (void)asr__ofi_drain_locked(o);
  for (; k < max && r->arrived[r->next % ASR_NOTIF_DEPTH] == r->next + 1; k++, r->next++) {
    values[k] = r->vals[r->next % ASR_NOTIF_DEPTH];
    if (ASR_OBS_ON()) asr__obs_notif(c, values[k]);
  }
  uint64_t next = r->next, tell = next - r->reported >= ASR_NOTIF_DEPTH / 4 ? next : 0;
  if (tell) r->reported = next;
  /* the sender's credit word first (the top of this file); the count is
   * copied before the call returns */
  if (tell && r->credit_key &&
      asr__ofi_inject_write_locked(o, r->credit_peer, &tell, sizeof tell, r->credit_addr, r->credit_key) == 0)
    tell = 0;
  asr__ofi_unlock(o);
  /* the sender may have this many more in flight: it learns it here */
  if (tell && asr__ofi_ctl_to_send(o, &c->orecv, ASR_CTL_RING_TAKEN, tell, 0) != 0) {
    asr__ofi_lock(o);
    if (r->reported == tell) r->reported = tell - ASR_NOTIF_DEPTH / 4; /* said again at the next poll */
    asr__ofi_unlock(o);
  }
  /* a thread spinning here lets its service thread run now and then
   * (rt.h: asr__poll_idle), as one spinning on asr_test does */
  if (k)
    asr__poll_found();
  else
    asr__poll_idle();
  *n = k;
  return ASR_SUCCESS;
}
