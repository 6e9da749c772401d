/*
 * rma_api.c -- the initiator's calls (asr.h, "One-sided transfers"):
 * asr_mem_import, asr_rmem_free, asr_write, asr_read and the prepared
 * lists. Each checks every argument against the descriptor (the region,
 * its access, its owner: mem_desc.h) before anything is posted, so that an
 * access outside what was granted is refused here and the comm stays
 * CONNECTED; the owner's key check (its provider's, or on the sm path its
 * table: rma.h) stands behind it. Posting is request.c's (asr__post_rma).
 */
#include "config.h"

#define _GNU_SOURCE 1
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "rma.h"

static asr__slab_t rmem_slab =
    ASR_SLAB("imported memory", sizeof(struct asr_rmem), offsetof(struct asr_rmem, live), 0, 1);
static asr__slab_t xfer_slab =
    ASR_SLAB("prepared list", sizeof(struct asr_xfer), offsetof(struct asr_xfer, live), 0, 1);

static struct asr_rmem *rmem_of(const asr_rmem_t *h) {
  return asr__handle_rec(h, ASR_HK_RMEM, offsetof(struct asr_rmem, live));
}
static void rmem_bad(const char *fn, const asr_rmem_t *h) {
  asr__handle_bad(fn, h, ASR_HK_RMEM, offsetof(struct asr_rmem, live));
}
static struct asr_xfer *xfer_of(const asr_xfer_t *h) {
  return asr__handle_rec(h, ASR_HK_XFER, offsetof(struct asr_xfer, live));
}

/* The SEND comm of handle h, connected, for call fn; NULL (said why) else. */
static struct asr_comm *send_comm(const char *fn, asr_comm_t *h) {
  struct asr_comm *c = asr__comm_of(h);
  if (!c) {
    asr__comm_bad(fn, h);
    return NULL;
  }
  if (c->type != ASR_SEND_COMM) {
    asr_error("svc", "%s: comm %p is a RECV comm; one-sided transfers go on the SEND comm to the owner", fn,
              (void *)h);
    return NULL;
  }
  if (atomic_load(&c->status) != ASR_COMM_CONNECTED) {
    asr_error("svc", "%s: comm %p is not connected (state %s)", fn, (void *)h,
              asr_comm_status_name(atomic_load(&c->status)));
    return NULL;
  }
  return c;
}

/* Maps the registration table of the owner (pid) whose descriptor names
 * its file descriptor tab_fd, for sm comm c (rma.h: "The table"): 0, or an
 * ASR_E* with err. Under c's stash_mutex: one import maps it. */
static int map_table(struct asr_comm *c, uint32_t pid, uint32_t tab_fd, char *err, size_t errlen) {
  int rc = 0;
  pthread_mutex_lock(&c->stash_mutex);
  if (c->rma.tab) goto out;
  int pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
  int fd = pfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pfd, (int)tab_fd, 0);
  int e = errno;
  if (pfd >= 0) close(pfd);
  if (fd < 0) {
    rc = asr_errf(err, errlen, asr_err_from_errno(e),
                  "cannot reach the owner's registration table (process %u: %s)%s", pid, strerror(e),
                  e == EPERM ? "; the kernel's ptrace rules forbid it, as they forbid the sm path's single "
                               "copy: use ASR_PROVIDER=shm for one-sided transfers on this host"
                             : "");
    goto out;
  }
  struct stat st;
  size_t bytes = ASR_MEM_TAB_SLOTS * sizeof(uint64_t);
  void *p = fstat(fd, &st) == 0 && (size_t)st.st_size == bytes
                ? mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0)
                : MAP_FAILED;
  close(fd);
  if (p == MAP_FAILED) {
    rc = asr_errf(err, errlen, ASR_EPROTO, "the owner's registration table (process %u) is not one", pid);
    goto out;
  }
  c->rma.tab_slots = ASR_MEM_TAB_SLOTS;
  c->rma.tab = p;
out:
  pthread_mutex_unlock(&c->stash_mutex);
  return rc;
}

int asr_mem_import(asr_comm_t *hc, const void *desc, size_t len, asr_rmem_t **out) {
  const char *fn = "asr_mem_import";
  struct asr_comm *c = send_comm(fn, hc);
  if (!c) return ASR_INVALID;
  if (!desc || !out) {
    asr_error("svc", "%s: needs a descriptor and an output pointer", fn);
    return ASR_INVALID;
  }
  uint8_t secret[ASR_MEM_SECRET_LEN];
  char err[320];
  if (asr__mem_secret(secret, err, sizeof err) != 0) {
    asr_error("svc", "%s: %s", fn, err);
    return ASR_INVALID;
  }
  asr__mem_desc_t d;
  const char *why;
  if (asr__mem_desc_decode(desc, len, secret, &d, &why) != 0) {
    asr_error("svc", "%s: refused the descriptor (%zu bytes): %s", fn, len, why);
    return ASR_INVALID;
  }
  static const uint8_t none[ASR_OFI_WHO_LEN];
  if (d.lnc != c->peer_lnc ||
      (memcmp(c->osend.peer_who, none, sizeof none) && memcmp(c->osend.peer_who, d.who, sizeof none))) {
    asr_error(
        "svc",
        "%s: the descriptor names memory of process %u, lnc %d: not this comm's peer (%s, lnc %d); import "
        "it on a SEND comm to its owner",
        fn, asr_le_get32(d.who), d.lnc, c->peer_ip, c->peer_lnc);
    return ASR_INVALID;
  }
  uint64_t base;
  asr__sm_t *sm = asr__comm_sm(c);
  if (sm) {
    if (map_table(c, asr_le_get32(d.who), d.tab_fd, err, sizeof err) != 0) {
      asr_error("svc", "%s: %s", fn, err);
      return ASR_INVALID;
    }
    base = d.va;
  } else {
    /* An owner on this host: its table is checked before each post here
     * too (rma_ops.c), since libfabric 1.17's shm never completes an access
     * with a revoked key (the initiator would wait for ever). Without the
     * right to map it, revocation rests on the provider alone. */
    if (c->path == ASR_PATH_LOCAL && map_table(c, asr_le_get32(d.who), d.tab_fd, err, sizeof err) != 0)
      asr_debug("svc", "%s: %s", fn, err);
    asr__ofi_t *o = asr__comm_ofi(c);
    if (!o->rma) {
      asr_error("svc",
                "%s: the comm's provider %s has no one-sided transfers (FI_RMA); use sm, shm or tcp;ofi_rxm",
                fn, o->provider);
      return ASR_INVALID;
    }
    base = asr__ofi_rma_base(o, (const void *)(uintptr_t)d.va);
    /* notifying writes need the owner's ring: asked for now, so that the
     * first one does not wait for it (notif.c) */
    if ((d.access & ASR_MEM_REMOTE_WRITE) && atomic_load(&c->rma.ring_state) == 0 &&
        !atomic_exchange(&c->rma.ring_wanted, 1)) {
      atomic_fetch_add(&c->ctx->rma.ring_asks, 1);
      asr__ctx_wake(c->ctx);
    }
  }
  struct asr_rmem *rm = asr__slab_take(&rmem_slab);
  if (!rm) return ASR_INVALID;
  rm->comm = c;
  rm->hcomm = (uint64_t)(uintptr_t)hc;
  rm->d = d;
  rm->base = base;
  *out = (asr_rmem_t *)(uintptr_t)asr__handle_renew(rm, &rm->live, ASR_HK_RMEM);
  return ASR_SUCCESS;
}

void asr_rmem_free(asr_rmem_t *h) {
  if (!h) return;
  struct asr_rmem *rm = rmem_of(h);
  if (!rm) {
    rmem_bad("asr_rmem_free", h);
    return;
  }
  asr__handle_retire(&rm->live);
  asr__slab_put(&rmem_slab, rm);
}

/* The import h for comm hc and access need, with [off, off + len) inside
 * its region: its record, or NULL (said why, for call fn). */
static struct asr_rmem *target(const char *fn, asr_comm_t *hc, asr_rmem_t *h, unsigned need, size_t off,
                               size_t len) {
  struct asr_rmem *rm = rmem_of(h);
  if (!rm) {
    rmem_bad(fn, h);
    return NULL;
  }
  if (rm->hcomm != (uint64_t)(uintptr_t)hc) {
    asr_error("svc", "%s: the memory %p was imported on another comm; import its descriptor on this one", fn,
              (void *)h);
    return NULL;
  }
  if (!(rm->d.access & need)) {
    asr_error("svc", "%s: the owner did not grant %s access to this memory (it registered %s)", fn,
              need == ASR_MEM_REMOTE_WRITE ? "write" : "read",
              rm->d.access == ASR_MEM_REMOTE_READ ? "ASR_MEM_REMOTE_READ only" : "ASR_MEM_REMOTE_WRITE only");
    return NULL;
  }
  if (off > rm->d.len || len > rm->d.len - off) {
    asr_error("svc", "%s: %zu bytes at offset %zu are out of bounds of the owner's %llu-byte region", fn, len,
              off, (unsigned long long)rm->d.len);
    return NULL;
  }
  return rm;
}

int asr_write(asr_comm_t *comm, asr_tensor_t *src, size_t off, size_t len, asr_rmem_t *dst, size_t dst_off,
              uint64_t notif, unsigned flags, asr_request_t **req) {
  if (flags & ~ASR_WRITE_NOTIFY) {
    asr_error("svc", "asr_write: flags 0x%x: only ASR_WRITE_NOTIFY is known", flags);
    return ASR_INVALID;
  }
  if (!asr__comm_of(comm)) return asr__post_rma(comm, src, off, len, ASR_REQ_WRITE, NULL, "asr_write", req);
  struct asr_rmem *rm = target("asr_write", comm, dst, ASR_MEM_REMOTE_WRITE, dst_off, len);
  if (!rm) return ASR_INVALID;
  asr__rma_t a = {
      .raddr = rm->base + dst_off, .key = rm->d.key, .notif = notif, .flags = flags, .slot = rm->d.slot};
  return asr__post_rma(comm, src, off, len, ASR_REQ_WRITE, &a, "asr_write", req);
}

int asr_read(asr_comm_t *comm, asr_tensor_t *dst, size_t off, size_t len, asr_rmem_t *src, size_t src_off,
             asr_request_t **req) {
  if (!asr__comm_of(comm)) return asr__post_rma(comm, dst, off, len, ASR_REQ_READ, NULL, "asr_read", req);
  struct asr_rmem *rm = target("asr_read", comm, src, ASR_MEM_REMOTE_READ, src_off, len);
  if (!rm) return ASR_INVALID;
  asr__rma_t a = {.raddr = rm->base + src_off, .key = rm->d.key, .slot = rm->d.slot};
  return asr__post_rma(comm, dst, off, len, ASR_REQ_READ, &a, "asr_read", req);
}

static void xfer_release(struct asr_xfer *x) {
  free(x->ents);
  free(x->ops);
  free(x->liov);
  free(x->riov);
  x->ents = NULL;
  x->ops = NULL;
  x->liov = x->riov = NULL;
  asr__slab_put(&xfer_slab, x);
}

int asr_xfer_prep(asr_comm_t *hc, int op, int n, const asr_iov_t *local, const asr_riov_t *remote,
                  asr_xfer_t **out) {
  const char *fn = "asr_xfer_prep";
  struct asr_comm *c = send_comm(fn, hc);
  if (!c) return ASR_INVALID;
  if ((op != ASR_XFER_WRITE && op != ASR_XFER_READ) || n <= 0 || !local || !remote || !out) {
    asr_error("svc",
              "%s: needs op ASR_XFER_WRITE or ASR_XFER_READ, n > 0, the two lists and an output pointer", fn);
    return ASR_INVALID;
  }
  unsigned need = op == ASR_XFER_WRITE ? ASR_MEM_REMOTE_WRITE : ASR_MEM_REMOTE_READ;
  asr__sm_t *sm = asr__comm_sm(c);
  asr__ofi_t *o = sm ? NULL : asr__comm_ofi(c);
  struct asr_xfer *x = asr__slab_take(&xfer_slab);
  if (!x) return ASR_INVALID;
  x->ents = malloc((size_t)n * sizeof *x->ents);
  x->ops = sm ? NULL : calloc((size_t)n, sizeof *x->ops);
  x->liov = sm ? malloc((size_t)n * sizeof *x->liov) : NULL;
  x->riov = sm ? malloc((size_t)n * sizeof *x->riov) : NULL;
  if (!x->ents || (sm ? !x->liov || !x->riov : !x->ops)) {
    asr_error("svc", "%s: out of memory for a %d-entry list", fn, n);
    xfer_release(x);
    return ASR_INVALID;
  }
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    struct asr_tensor *t = asr__tensor_of(local[i].tensor);
    if (!t) {
      asr__tensor_bad(fn, local[i].tensor);
      goto bad;
    }
    if (local[i].off > t->size || local[i].len > t->size - local[i].off) {
      asr_error("svc", "%s: entry %d: %zu bytes at offset %zu are out of bounds of a %zu-byte tensor", fn, i,
                local[i].len, local[i].off, t->size);
      goto bad;
    }
    struct asr_rmem *rm = target(fn, hc, remote[i].rmem, need, remote[i].off, local[i].len);
    if (!rm) {
      asr_error("svc", "%s: entry %d refused (above)", fn, i);
      goto bad;
    }
    void *desc = NULL;
    if (o && o->need_desc) {
      struct fid_mr *mr = NULL;
      int rc = asr__mr_get_or_register(c, t, &mr);
      if (rc) {
        asr_error("svc", "%s: entry %d: cannot register its tensor: %s", fn, i, asr_strerror(rc));
        goto bad;
      }
      desc = asr__ofi_mr_desc(o, mr);
    }
    void *lva = (char *)t->va + local[i].off;
    uint64_t raddr = rm->base + remote[i].off;
    x->ents[i] = (asr__xent_t){
        .lva = lva, .len = local[i].len, .desc = desc, .raddr = raddr, .key = rm->d.key, .slot = rm->d.slot};
    if (sm) {
      x->liov[i] = (struct iovec){lva, local[i].len};
      x->riov[i] = (struct iovec){(void *)(uintptr_t)raddr, local[i].len};
    }
    total += local[i].len;
  }
  x->comm = c;
  x->hcomm = (uint64_t)(uintptr_t)hc;
  x->op = op;
  x->n = n;
  x->total = total;
  *out = (asr_xfer_t *)(uintptr_t)asr__handle_renew(x, &x->live, ASR_HK_XFER);
  return ASR_SUCCESS;
bad:
  xfer_release(x);
  return ASR_INVALID;
}

int asr_xfer_post_flags(asr_xfer_t *hx, uint64_t notif, unsigned flags, asr_request_t **req) {
  const char *fn = "asr_xfer_post";
  struct asr_xfer *x = xfer_of(hx);
  if (!x) {
    asr__handle_bad(fn, hx, ASR_HK_XFER, offsetof(struct asr_xfer, live));
    return ASR_INVALID;
  }
  if (flags & ~ASR_WRITE_NOTIFY) {
    asr_error("svc", "%s: flags 0x%x: only ASR_WRITE_NOTIFY is known", fn, flags);
    return ASR_INVALID;
  }
  if (x->op == ASR_XFER_READ) flags = 0; /* a read list notifies nobody */
  if (atomic_exchange(&x->busy, 1)) {
    asr_error("svc", "%s: the list's last post is still in flight: test its request to completion first", fn);
    return ASR_INVALID;
  }
  x->next_post = 0;
  x->n_active = 0;
  asr__rma_t a = {.notif = notif, .flags = flags, .x = x};
  int rc = asr__post_rma((asr_comm_t *)(uintptr_t)x->hcomm, NULL, 0, x->total, ASR_REQ_XFER, &a, fn, req);
  if (rc != ASR_SUCCESS) atomic_store(&x->busy, 0);
  return rc;
}

int asr_xfer_post(asr_xfer_t *x, uint64_t notif, asr_request_t **req) {
  struct asr_xfer *rec = xfer_of(x);
  return asr_xfer_post_flags(x, notif, rec && rec->op == ASR_XFER_WRITE ? ASR_WRITE_NOTIFY : 0, req);
}

void asr_xfer_free(asr_xfer_t *hx) {
  if (!hx) return;
  struct asr_xfer *x = xfer_of(hx);
  if (!x) {
    asr__handle_bad("asr_xfer_free", hx, ASR_HK_XFER, offsetof(struct asr_xfer, live));
    return;
  }
  if (atomic_load(&x->busy) && asr__comm_live((asr_comm_t *)(uintptr_t)x->hcomm)) {
    asr_error("svc", "asr_xfer_free: a post of the list is in flight: test its request to completion first");
    return;
  }
  for (int i = 0; x->ops && i < x->n; i++)
    if (asr__ofi_op_owned(&x->ops[i])) {
      /* its comm closed with the list in flight and libfabric kept an
       * entry: the entries stay, as the comm's own operations do */
      asr_warn("svc", "asr_xfer_free: entries of the list are still libfabric's; their memory is kept");
      asr__handle_retire(&x->live);
      return;
    }
  asr__handle_retire(&x->live);
  xfer_release(x);
}
