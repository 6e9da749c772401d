/*
 * ofi.c -- the libfabric transport (see ofi.h). Setup unwinds in exact
 * reverse order; every endpoint and CQ call holds ep_lock (see "locking").
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_le.h"
#include "asr_log.h"
#include "asr_time.h"
#include "ofi.h"
#include "ofi_probe.h"

#define TAG_CTRL (1ull << 63)
#define TAG_COMM_SHIFT 40
#define TAG_COMM_MASK ((uint64_t)ASR_OFI_COMM_ID_MAX)
#define CTRL_MAGIC 0x43525341u          /* "ASRC" */
#define MBOX_MAGIC 0x44525341u          /* "ASRD" */
#define CONN_ID_OFF ASR_OFI_CONN_ID_OFF /* the connect message's fields (ofi.h) */
#define CONN_ALEN_OFF 28
#define CONN_ADDR_OFF 30
#define CONN_ADDR_MAX (ASR_OFI_CTRL_LEN - CONN_ADDR_OFF)
#define CQ_BATCH 32

/* The control-path lock of every shm endpoint of the process ("locking"). */
static pthread_mutex_t shm_ctl_mutex = PTHREAD_MUTEX_INITIALIZER;

static uint64_t make_tag(uint32_t comm_id, uint64_t seq, uint64_t mask) {
  return ((uint64_t)(comm_id & TAG_COMM_MASK) << TAG_COMM_SHIFT) | (seq & mask);
}

/* Maps a libfabric return code (0 or -FI_E*) onto 0 or a negative ASR_E*
 * (ofi.h: "Errors"). libfabric's codes below FI_ERRNO_OFFSET are errno
 * values; its own, above it, are mapped here one by one. */
static int ofi_err(ssize_t rc) {
  if (rc >= 0) return 0;
  switch (-rc) {
    case FI_EAGAIN: return ASR_EAGAIN;
    case FI_ETRUNC: return ASR_ETRUNC;
    case FI_ENODATA: return ASR_ENOSYS; /* fi_getinfo: no provider does what the hints ask */
    case FI_EADDRNOTAVAIL: return ASR_EUNREACH;
    case FI_EOPBADSTATE: return ASR_ESTATE;
    case FI_ETOOSMALL:
    case FI_EBADFLAGS:
    case FI_ENOEQ:
    case FI_EDOMAIN:
    case FI_ENOCQ:
    case FI_ENOAV: return ASR_EINVAL;
    case FI_ENOKEY:
    case FI_EKEYREJECTED: return ASR_EPERM;
    case FI_EOVERRUN:
    case FI_ENORX: return ASR_ENOSPACE;
    case FI_EOTHER:
    case FI_EAVAIL:
    case FI_ECRC: return ASR_EIO;
    default: return -rc < FI_ERRNO_OFFSET ? asr_err_from_errno((int)-rc) : ASR_EIO;
  }
}

/* ofi_err for a call that failed in a way its caller will report with
 * asr_strerror: the provider's own words go to the debug log first. */
static int ofi_fail(ssize_t rc, const char *call) {
  asr_debug("fab", "%s: %s (fi_errno %d)", call, fi_strerror((int)-rc), (int)-rc);
  return ofi_err(rc);
}

/* The settings asr__ofi_open reads (asr_env.h), all at once before it opens
 * anything, so that a bad one fails the open with its message and nothing
 * to unwind. */
typedef struct {
  const char *if_addr; /* ASR_IF_ADDR (default 127.0.0.1) */
  long inject_max;     /* ASR_INJECT_MAX; -1: not set */
  long seq_bits;       /* ASR_SEQ_BITS (default 40) */
} ofi_env_t;

int asr__ofi_forced_provider(const char **prov, char *errbuf, size_t errlen) {
  int rc = asr_env_str(ASR_ENV_PROVIDER, prov, errbuf, errlen);
  if (rc == 0 && !*prov) {
    const char *fi = getenv("FI_PROVIDER"); /* libfabric's own, as a fallback */
    *prov = fi && *fi ? fi : NULL;
  }
  return rc;
}

static int read_env(ofi_env_t *e, char *errbuf, size_t errlen) {
  int rc = asr_env_str(ASR_ENV_IF_ADDR, &e->if_addr, errbuf, errlen);
  e->inject_max = -1;
  if (rc == 0 && asr_env_is_set(ASR_ENV_INJECT_MAX))
    rc = asr_env_int(ASR_ENV_INJECT_MAX, &e->inject_max, errbuf, errlen);
  if (rc == 0) rc = asr_env_int(ASR_ENV_SEQ_BITS, &e->seq_bits, errbuf, errlen);
  return rc;
}

#ifdef ASR_DEBUG
/* A test hook of debug builds (test_runtime: ofi_open_unwinds): with
 * ASR_TEST_OFI_FAIL=<step>, that step of asr__ofi_open fails as if
 * libfabric had answered FI_EOTHER, without being called, so that the
 * unwinding of each later step can be checked. Release builds have neither
 * the hook nor its getenv. */
static int fail_injected(const char *step) {
  const char *f = NULL;
  if (asr_env_str(ASR_ENV_TEST_OFI_FAIL, &f, NULL, 0) != 0) f = NULL;
  return f && strcmp(f, step) == 0;
}
#define OFI_STEP(step, call) (fail_injected(step) ? -FI_EOTHER : (call))
#else
#define OFI_STEP(step, call) (call)
#endif

/* Closes one libfabric object; a failure (a domain that still has MRs, say)
 * is a leak of ours, so it is said, not hidden. */
static void close_fid(struct fid *f, const char *what) {
  int rc = fi_close(f);
  if (rc) asr_warn("fab", "fi_close(%s): %s; something opened on it was not closed", what, fi_strerror(-rc));
}

/* Acquires, in this order: (1) the control-path mutex, (2) the fi_info,
 * (3) the fabric, (4) the domain, (5) the CQ, (6) the AV and (7) the
 * endpoint, which is then bound, enabled and named. A failure releases
 * exactly what was acquired before it, in reverse order, through the labels
 * at the end: errN releases acquisition N and falls through to N-1 (the
 * libfabric tcp provider's err3:/err2:/err1: habit). asr__ofi_close
 * releases the same seven in the same order. */
int asr__ofi_open(asr__ofi_t *o, int lnc, const char *prov, char *errbuf, size_t errlen) {
  memset(o, 0, sizeof *o);
  ofi_env_t env;
  int erc = read_env(&env, errbuf, errlen);
  if (erc) return erc;
  snprintf(o->provider, sizeof o->provider, "%s", prov);
  int is_shm = strcmp(prov, "shm") == 0;
  const char *step = NULL; /* the failed step, for errbuf; NULL: errbuf is written already */
  int rc;
  pthread_mutex_init(&o->own_lock, NULL); /* 1 */
  o->lock = is_shm ? &shm_ctl_mutex : &o->own_lock;
  struct fi_info *hints = asr__ofi_hints(prov); /* ofi_probe.c: asrd asks the same ahead of a job */
  if (!hints) {
    snprintf(errbuf, errlen, "fi_allocinfo: out of memory");
    rc = -FI_ENOMEM;
    goto err1;
  }
  const char *node = NULL;
  uint64_t flags = 0;
  if (!is_shm) {
    node = env.if_addr;
    flags = FI_SOURCE;
  }
  /* One-sided transfers (rma.h) want remote reads and writes, ordered
   * after the sends and writes before them; a provider without them still
   * carries sends (o->rma says which it is). */
  uint64_t caps = hints->caps;
  hints->caps |= FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  hints->tx_attr->msg_order = hints->rx_attr->msg_order = ASR_OFI_RMA_ORDER;
  rc = fi_getinfo(FI_VERSION(1, 11), node, NULL, flags, hints, &o->info); /* 2 */
  o->rma = rc == 0;
  if (rc == -FI_ENODATA) {
    hints->caps = caps;
    hints->tx_attr->msg_order = hints->rx_attr->msg_order = FI_ORDER_SAS;
    rc = fi_getinfo(FI_VERSION(1, 11), node, NULL, flags, hints, &o->info);
  }
  fi_freeinfo(hints);
  if (rc) {
    snprintf(errbuf, errlen,
             "no libfabric provider '%s'%s%s for RDM tagged messaging: %s (set ASR_PROVIDER to shm or "
             "tcp;ofi_rxm)",
             prov, node ? " on " : "", node ? node : "", fi_strerror(-rc));
    goto err1;
  }
  step = "fi_fabric";
  rc = OFI_STEP(step, fi_fabric(o->info->fabric_attr, &o->fabric, NULL)); /* 3 */
  if (rc) goto err2;
  step = "fi_domain";
  rc = OFI_STEP(step, fi_domain(o->fabric, o->info, &o->domain, NULL)); /* 4 */
  if (rc) goto err3;
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE, .size = 4096};
  step = "fi_cq_open";
  rc = OFI_STEP(step, fi_cq_open(o->domain, &cq_attr, &o->cq, NULL)); /* 5 */
  if (rc) goto err4;
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
  step = "fi_av_open";
  rc = OFI_STEP(step, fi_av_open(o->domain, &av_attr, &o->av, NULL)); /* 6 */
  if (rc) goto err5;
  step = "fi_endpoint";
  rc = OFI_STEP(step, fi_endpoint(o->domain, o->info, &o->ep, NULL)); /* 7 */
  if (rc) goto err6;
  /* The AV is bound first: libfabric 1.17's ofi_rxm crashes closing an
   * endpoint that has none (even one that was only opened), so with the AV
   * bound a later failure can still unwind. */
  step = "fi_ep_bind(av)";
  rc = OFI_STEP(step, fi_ep_bind(o->ep, &o->av->fid, 0));
  if (rc) goto err7;
  /* One CQ bound for both directions: shm wants both a TX and an RX CQ. */
  step = "fi_ep_bind(cq)";
  rc = OFI_STEP(step, fi_ep_bind(o->ep, &o->cq->fid, FI_TRANSMIT | FI_RECV));
  if (rc) goto err7;
  step = "fi_enable";
  rc = OFI_STEP(step, fi_enable(o->ep));
  if (rc) goto err7;
  step = "fi_getname";
  o->addrlen = sizeof o->addr;
  rc = OFI_STEP(step, fi_getname(&o->ep->fid, o->addr, &o->addrlen));
  if (rc) goto err7;

  o->need_desc = (o->info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  o->rma_virt = (o->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  /* a provider that picks its own keys cannot take the one a descriptor
   * names for every endpoint of its owner (mem.c): no one-sided there */
  if (o->info->domain_attr->mr_mode & FI_MR_PROV_KEY) o->rma = 0;
  /* Small sends go out with fi_tinject (asr__ofi_isend_locked) on shm, up to
   * its inject size (4 KiB): shm copies the message into the peer's queue
   * before returning, so a small send completes with no completion to read
   * for it. Not on tcp;ofi_rxm: there an injected message leaves only when
   * the CQ is next read, so a reply injected just before a burst of receive
   * posts waits for all of them. ASR_INJECT_MAX sets the limit for any
   * provider (at most its inject size; 0: never). */
  o->inject_max = is_shm ? o->info->tx_attr->inject_size : 0;
  if (env.inject_max >= 0)
    o->inject_max = (size_t)env.inject_max < o->info->tx_attr->inject_size ? (size_t)env.inject_max
                                                                           : o->info->tx_attr->inject_size;
  o->next_key = ((uint64_t)lnc << 48) | 1;
  unsigned bits = (unsigned)env.seq_bits; /* 8..40: the row's range */
  o->seq_mask = (1ull << bits) - 1;
  o->next_comm_id = 1;
  asr_info("fab",
           "lnc %d: provider %s (%s), address %zu bytes, %u-bit sequence numbers, inject up to %zu bytes",
           lnc, o->info->fabric_attr->prov_name, o->info->domain_attr->name, o->addrlen, bits, o->inject_max);
  return 0;

err7:
  close_fid(&o->ep->fid, "endpoint");
  o->ep = NULL;
err6:
  close_fid(&o->av->fid, "address vector");
  o->av = NULL;
err5:
  close_fid(&o->cq->fid, "completion queue");
  o->cq = NULL;
err4:
  close_fid(&o->domain->fid, "domain");
  o->domain = NULL;
err3:
  close_fid(&o->fabric->fid, "fabric");
  o->fabric = NULL;
err2:
  fi_freeinfo(o->info);
  o->info = NULL;
  if (step) snprintf(errbuf, errlen, "%s on provider %s failed: %s", step, prov, fi_strerror(-rc));
err1:
  pthread_mutex_destroy(&o->own_lock);
  return ofi_err(rc);
}

/* The reverse of asr__ofi_open's acquisitions, 7 to 1. The endpoint may be
 * closed already: asr_close (context.c) closes it before it frees the
 * comms, so that no completion can name their memory. */
void asr__ofi_close(asr__ofi_t *o) {
  if (o->ep) close_fid(&o->ep->fid, "endpoint");
  o->ep = NULL;
  if (o->av) close_fid(&o->av->fid, "address vector");
  o->av = NULL;
  asr__ofi_av_free(o);
  if (o->cq) close_fid(&o->cq->fid, "completion queue");
  o->cq = NULL;
  if (o->domain) close_fid(&o->domain->fid, "domain");
  o->domain = NULL;
  if (o->fabric) close_fid(&o->fabric->fid, "fabric");
  o->fabric = NULL;
  if (o->info) fi_freeinfo(o->info);
  o->info = NULL;
  pthread_mutex_destroy(&o->own_lock);
}

/* --- locking ------------------------------------------------------------
 *
 * Every call into the endpoint or its CQ holds o->ep_lock. FI_THREAD_SAFE
 * alone is not enough with libfabric 1.17's shm: its progress matches an
 * arriving tagged message in two steps (smr_progress_cmd_msg: get_tag, then
 * queue_tag to the unexpected list), dropping its receive-queue lock in
 * between, so an fi_trecv on another thread can queue its receive as posted
 * in that window; the message then lands on the unexpected list and neither
 * ever matches (a hang: post_order_free under TSan, when polls drained the
 * CQ without the lock). So posts and drains are serialised here, as the seed
 * serialises them under async_sr_ofi_mutex[lnc].
 *
 * o->lock (the seed's async_sr_ofi_mutex[lnc], a pthread mutex) serialises
 * the control path -- listen, accept, connect, MR registration, cancel,
 * flush -- which takes ep_lock inside it for its provider calls. Beyond the
 * seed, every shm endpoint of the process shares one (shm_ctl_mutex) rather
 * than having its own: libfabric 1.17's shm takes its peer's region lock in
 * every send and its own in every progress, both pthread spin locks shared
 * between processes that never yield, so with the service threads of many
 * LNCs of a process in shm's control path at once on few CPUs, a thread
 * preempted inside one left others spinning out their time slices. The shm
 * endpoints of one process now enter it one at a time, as one thread per
 * process would drive them; none holds it for longer than one provider call
 * (asr__ofi_connect makes one attempt, cancel lets go between its tries), so
 * an LNC's connect never waits behind another's peer. Other providers keep
 * one per endpoint, so the paths of an LNC stay independent. The data
 * path -- a post and the sequence number it takes, a poll's drain -- takes
 * ep_lock alone: it is held for one provider call (plus, in request.c, the
 * request freelist's pop or push, which it also guards), and a spin lock
 * costs one atomic exchange where the mutex cost two atomic operations and
 * two library calls on every post and every poll. */

static inline void ep_lock(asr__ofi_t *o) { asr__ofi_lock(o); }

static inline void ep_unlock(asr__ofi_t *o) { asr__ofi_unlock(o); }

/* The control path: o->lock, then ep_lock. */
static void ctl_lock(asr__ofi_t *o) {
  pthread_mutex_lock(o->lock);
  ep_lock(o);
}

static void ctl_unlock(asr__ofi_t *o) {
  ep_unlock(o);
  pthread_mutex_unlock(o->lock);
}

/* Marks op completed (err 0 or a negative ASR_E*): len and err first,
 * then the release store of done that publishes them. That store is the
 * drain's last touch of op: from then on the poller may recycle it. */
static void op_complete(asr__ofi_op_t *op, size_t len, int err) {
#ifdef ASR_TSAN
  /* the provider's access to the op's buffer, in this thread and before the
   * store that publishes the completion (asr_tsan.h); a failed op moved
   * nothing we may read */
  if (!err && op->tsan_recv) asr_tsan_wrote(op->tsan_buf, len < op->tsan_cap ? len : op->tsan_cap);
  if (!err && !op->tsan_recv) asr_tsan_read(op->tsan_buf, op->tsan_cap);
#endif
  __atomic_store_n(&op->len, len, __ATOMIC_RELAXED);
  __atomic_store_n(&op->err, err, __ATOMIC_RELAXED);
  __atomic_store_n(&op->done, 1, __ATOMIC_RELEASE);
}

/* Reads every available completion. Called with ep_lock held. Returns 0, or
 * the ASR_E* of a failed CQ read; a failed completion is not a failure of
 * the read: it marks its op, with the code mapped (ofi_err). */
static int drain(asr__ofi_t *o) {
  assert(asr__ofi_locked(o));
  asr__ofi_count(&o->drains);
  struct fi_cq_tagged_entry ent[CQ_BATCH];
  for (;;) {
    ssize_t n = fi_cq_read(o->cq, ent, CQ_BATCH);
    if (n > 0) {
      for (ssize_t i = 0; i < n; i++) {
        if ((ent[i].flags & (FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE)) == (FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE)) {
          /* a peer's notifying write landed here: no op of ours (rma.h) */
          if (o->on_rdata) o->on_rdata(o->rdata_arg, ent[i].data);
          continue;
        }
        asr__ofi_op_t *op = ent[i].op_context;
        if (op) op_complete(op, ent[i].len, 0);
        if (op == &o->mbox_op && o->on_ctl) o->on_ctl(o->ctl_arg); /* the service thread takes it */
      }
      atomic_fetch_add_explicit(&o->completions, (unsigned long)n, memory_order_release);
      if (n < CQ_BATCH) return 0;
      continue;
    }
    if (n == 0 || n == -FI_EAGAIN) return 0;
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry e = {0};
      if (fi_cq_readerr(o->cq, &e, 0) > 0) {
        asr__ofi_op_t *op = e.op_context;
        if (e.err != FI_ECANCELED)
          asr_debug("fab", "completion error on op %p: %s (%s)", (void *)op, fi_strerror(e.err),
                    fi_cq_strerror(o->cq, e.prov_errno, e.err_data, NULL, 0));
        if (op) op_complete(op, e.len, ofi_err(-(ssize_t)(e.err ? e.err : FI_EOTHER)));
        if (op == &o->mbox_op && o->on_ctl) o->on_ctl(o->ctl_arg);
        atomic_fetch_add_explicit(&o->completions, 1, memory_order_release);
      }
      continue;
    }
    return ofi_fail(n, "fi_cq_read");
  }
}

int asr__ofi_progress(asr__ofi_t *o) {
  ctl_lock(o);
  int rc = drain(o);
  ctl_unlock(o);
  return rc;
}

int asr__ofi_drain_locked(asr__ofi_t *o) {
  assert(asr__ofi_locked(o));
  return drain(o);
}

/* --- posting while the queue is full -------------------------------------
 *
 * A post that finds the provider's queue full cannot simply wait for room:
 * under manual progress nothing moves until someone reads the CQ
 * (doc/design.md, "The data path": "Manual progress"). So the two retry
 * loops below, post_ctl_locked and post_data_locked, read it between
 * tries, and let go of ep_lock between tries (ep_let_others_in) so that
 * the endpoint's other posts and polls are not held up by the wait. They
 * differ in what they retry and for how long; each says why. A try is one
 * provider call, described by an ofi_post_t and made by post_try, which
 * builds the tag anew each time: while ep_lock was let go, another post on
 * the same comm may have taken the sequence number this one read. */

/* The provider call of a post, as data: kind picks fi_tsend, fi_tinject
 * or fi_trecv, the rest are its arguments. */
typedef enum {
  OFI_POST_TSEND = 1,
  OFI_POST_TINJECT,
  OFI_POST_TRECV,
  OFI_POST_WRITE,
  OFI_POST_WRITE_NOTIFY,
  OFI_POST_READ,
  OFI_POST_INJECT_WRITE,
  OFI_POST_INJECT_WRITE_NOTIFY,
  OFI_POST_WRITEDATA,
  OFI_POST_INJECT_WRITEDATA
} ofi_post_kind_t;
typedef struct {
  ofi_post_kind_t kind;
  void *buf;
  size_t len;
  void *desc;     /* the registration's descriptor, or NULL (an inject takes none) */
  fi_addr_t peer; /* a send's destination; FI_ADDR_UNSPEC for a receive */
  uint64_t ctrl;  /* TAG_CTRL for the control path's messages, else 0 */
  /* The tag's comm id and sequence number are read where they live, at
   * each try: the sequence number may move while ep_lock is let go, and
   * a copy of the comm id taken ahead of the loop made the compiler keep
   * the tag's half on the stack, a few instructions more per post. */
  const uint32_t *comm_id;   /* the receiving comm's id */
  const uint64_t *seq;       /* the comm's next sequence number; NULL: 0 */
  asr__ofi_op_t *op;         /* the op context; NULL for an inject, which completes nothing */
  const asr__ofi_rma_t *rma; /* a write's or read's target (WRITE, WRITE_NOTIFY, READ) */
} ofi_post_t;

/* One try of post p: the provider's return code (0 or a -FI_E* code).
 * Called with ep_lock held. Always inlined, with p's fields known at each
 * call site, so that a post costs what the provider call alone costs. */
static inline __attribute__((always_inline)) ssize_t post_try(asr__ofi_t *o, const ofi_post_t *p) {
  uint64_t tag = p->ctrl | make_tag(*p->comm_id, p->seq ? *p->seq : 0, o->seq_mask);
  switch (p->kind) {
    case OFI_POST_TSEND: return fi_tsend(o->ep, p->buf, p->len, p->desc, p->peer, tag, p->op);
    case OFI_POST_TINJECT: return fi_tinject(o->ep, p->buf, p->len, p->peer, tag);
    case OFI_POST_TRECV: return fi_trecv(o->ep, p->buf, p->len, p->desc, p->peer, tag, 0, p->op);
    /* a write completes as the provider's default says (asr.h: its
     * source may be reused; its data is the owner's by its notification) */
    case OFI_POST_WRITE:
      return fi_write(o->ep, p->buf, p->len, p->desc, p->peer, p->rma->raddr, p->rma->key, p->op);
    case OFI_POST_READ:
      return fi_read(o->ep, p->buf, p->len, p->desc, p->peer, p->rma->raddr, p->rma->key, p->op);
    case OFI_POST_INJECT_WRITE:
      return fi_inject_write(o->ep, p->buf, p->len, p->peer, p->rma->raddr, p->rma->key);
    /* a notification in the direct form (rma.h): the CQ data is all of it */
    case OFI_POST_WRITEDATA:
      return fi_writedata(o->ep, p->buf, p->len, p->desc, p->rma->imm, p->peer, p->rma->raddr, p->rma->key,
                          p->op);
    case OFI_POST_INJECT_WRITEDATA:
      return fi_inject_writedata(o->ep, p->buf, p->len, p->rma->imm, p->peer, p->rma->raddr, p->rma->key);
    case OFI_POST_INJECT_WRITE_NOTIFY: {
      /* the notification's value into its ring slot, then the data with
       * the remote CQ data that names the slot: the writes land in order
       * (ASR_OFI_RMA_ORDER), so the owner, which reads the slot only once
       * that CQ entry came, reads it after both. A try whose second write
       * did not go is made again whole: the same value written into the
       * same slot again changes nothing, and the owner reads the slot only
       * at the CQ entry, which only the second write brings. */
      const asr__ofi_rma_t *r = p->rma;
      ssize_t rc = fi_inject_write(o->ep, r->notif_val, sizeof(uint64_t), p->peer, r->ring_addr, r->ring_key);
      if (rc) return rc;
      return fi_inject_writedata(o->ep, p->buf, p->len, r->imm, p->peer, r->raddr, r->key);
    }
    case OFI_POST_WRITE_NOTIFY: {
      /* the data, then the notification's value into its slot of the
       * owner's ring, in one operation whose remote CQ data names the ring
       * and the slot: the owner reads it only after both landed */
      const asr__ofi_rma_t *r = p->rma;
      struct iovec iov[2] = {{p->buf, p->len}, {(void *)(uintptr_t)r->notif_val, sizeof(uint64_t)}};
      void *desc[2] = {p->desc, NULL};
      struct fi_rma_iov riov[2] = {{r->raddr, p->len, r->key}, {r->ring_addr, sizeof(uint64_t), r->ring_key}};
      struct fi_msg_rma m = {.msg_iov = iov,
                             .desc = desc,
                             .iov_count = p->len ? 2 : 1,
                             .addr = p->peer,
                             .rma_iov = riov,
                             .rma_iov_count = p->len ? 2 : 1,
                             .context = p->op,
                             .data = r->imm};
      if (!p->len) { /* a notification alone */
        iov[0] = iov[1];
        riov[0] = riov[1];
      }
      return fi_writemsg(o->ep, &m, FI_REMOTE_CQ_DATA | FI_COMPLETION);
    }
    default: assert(!"post_try: no such post kind"); return -FI_EINVAL;
  }
}

/* Lets the endpoint's other threads in between two tries of a post: drops
 * ep_lock and takes it again. Lock rule: the caller holds ep_lock before
 * and after, but whatever ep_lock guards may have changed in between (so
 * post_try reads the sequence number again); the control path's o->lock,
 * when the caller holds it, stays held throughout. */
static inline void ep_let_others_in(asr__ofi_t *o) {
  ep_unlock(o);
  ep_lock(o);
}

/* How long the control receive of a listen is retried while the queue is
 * full: the comm cannot connect without it, and the provider's queue
 * empties as the CQ is read. */
#define LISTEN_RETRY_MS 10000

/* Makes post p, retrying on -FI_EAGAIN with a CQ read between tries for up
 * to LISTEN_RETRY_MS: the control receive of a listen (asr__ofi_listen;
 * data posts do not wait this long: post_data_locked). Lock rule: called
 * with ep_lock held (inside the control path's o->lock), returns with it
 * held, and lets it go between tries (ep_let_others_in). Returns the
 * provider's code of the last try. */
static ssize_t post_ctl_locked(asr__ofi_t *o, const ofi_post_t *p) {
  assert(asr__ofi_locked(o));
  uint64_t until = 0;
  for (;;) {
    ssize_t rc = post_try(o, p);
    if (rc != -FI_EAGAIN) return rc;
    drain(o);
    if (!until)
      until = asr_time_ms() + LISTEN_RETRY_MS;
    else if (asr_time_ms() > until)
      return rc;
    ep_let_others_in(o);
  }
}

/* What op_complete tells TSan the provider touched (asr_tsan.h). Set only
 * while no drain can complete op: before its post. */
static inline void op_tsan_buf(asr__ofi_op_t *op, void *buf, size_t cap, int recv) {
#ifdef ASR_TSAN
  op->tsan_buf = buf;
  op->tsan_cap = cap;
  op->tsan_recv = recv;
#else
  (void)op, (void)buf, (void)cap, (void)recv;
#endif
}

/* Readies op for a post (called with ep_lock held). The previous use's
 * completion has been read: no drain touches op until it is posted again. */
static inline void op_arm(asr__ofi_op_t *op, void *buf, size_t cap, int recv) {
  assert(!asr__ofi_op_owned(op)); /* rearming an op libfabric owns would lose its completion */
  memset(&op->fctx, 0, sizeof op->fctx);
  op_tsan_buf(op, buf, cap, recv);
  __atomic_store_n(&op->err, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&op->len, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&op->done, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&op->posted, 1, __ATOMIC_RELAXED);
}

/* A post failed: libfabric does not own op. */
static void op_unarm(asr__ofi_op_t *op) { __atomic_store_n(&op->posted, 0, __ATOMIC_RELAXED); }

int asr__ofi_listen(asr__ofi_t *o, asr__ofi_recv_t *r, uint8_t handle[ASR_OFI_HANDLE_LEN], int path) {
  ctl_lock(o);
  r->comm_id = o->next_comm_id++;
  if (o->next_comm_id > TAG_COMM_MASK) o->next_comm_id = 1;
  r->seq = 0;
  op_arm(&r->ctrl_op, r->ctrl_buf, sizeof r->ctrl_buf, 1);
  ofi_post_t p = {.kind = OFI_POST_TRECV,
                  .buf = r->ctrl_buf,
                  .len = sizeof r->ctrl_buf,
                  .peer = FI_ADDR_UNSPEC,
                  .ctrl = TAG_CTRL,
                  .comm_id = &r->comm_id,
                  .op = &r->ctrl_op};
  ssize_t rc = post_ctl_locked(o, &p);
  if (rc) op_unarm(&r->ctrl_op);
  ctl_unlock(o);
  if (rc) return ofi_fail(rc, "fi_trecv (listen)");
  memset(handle, 0, ASR_OFI_HANDLE_LEN);
  asr_le_put32(handle, ASR_OFI_HANDLE_MAGIC);
  asr_le_put32(handle + ASR_OFI_HANDLE_COMM_OFF, r->comm_id);
  asr_le_put16(handle + 8, (uint16_t)o->addrlen);
  memcpy(handle + 10, o->addr, o->addrlen);
  if (10 + o->addrlen + ASR_OFI_WHO_LEN <= ASR_OFI_HANDLE_ORDINAL_OFF)
    memcpy(handle + 10 + o->addrlen, o->who, ASR_OFI_WHO_LEN);
  handle[ASR_OFI_HANDLE_PATH_OFF] = (uint8_t)path;
  uint32_t tag = asr__ofi_prov_tag(o->provider);
  for (int i = 0; i < 3; i++) handle[ASR_OFI_HANDLE_PROV_OFF + i] = (uint8_t)(tag >> (8 * i));
  return 0;
}

int asr__ofi_accept(const asr__ofi_recv_t *r, int *ready) {
  int done = __atomic_load_n(&r->ctrl_op.done, __ATOMIC_ACQUIRE);
  int err = done ? __atomic_load_n(&r->ctrl_op.err, __ATOMIC_RELAXED) : 0;
  if (done && err) return err;
  if (done && asr_le_get32(r->ctrl_buf) != CTRL_MAGIC) return ASR_EPROTO; /* not our connect message */
  *ready = done;
  return 0;
}

int asr__ofi_connect(asr__ofi_t *o, const uint8_t handle[ASR_OFI_HANDLE_LEN], asr__ofi_send_t *s) {
  unsigned al = 0;
  uint32_t peer_id = 0;
  if (asr__ofi_handle_peer(handle, &al, &peer_id) != 0) return ASR_EPROTO; /* not a handle */
  ctl_lock(o);
  if (!s->peer_inserted) {
    int rc = asr__ofi_av_get(o, handle + 10, al, &s->peer);
    if (rc) {
      ctl_unlock(o);
      return rc;
    }
    s->peer_inserted = 1;
    s->peer_comm_id = peer_id;
    s->seq = 0;
    /* our own id, so that the peer's mailbox answers name this comm */
    s->comm_id = o->next_comm_id++;
    if (o->next_comm_id > TAG_COMM_MASK) o->next_comm_id = 1;
    memset(s->ctrl_buf, 0, sizeof s->ctrl_buf);
    asr_le_put32(s->ctrl_buf, CTRL_MAGIC);
    memcpy(s->ctrl_buf + 4, o->who, ASR_OFI_WHO_LEN);
    asr_le_put32(s->ctrl_buf + CONN_ID_OFF, s->comm_id);
    if (o->addrlen <= CONN_ADDR_MAX) {
      asr_le_put16(s->ctrl_buf + CONN_ALEN_OFF, (uint16_t)o->addrlen);
      memcpy(s->ctrl_buf + CONN_ADDR_OFF, o->addr, o->addrlen);
    }
    memset(s->peer_who, 0, sizeof s->peer_who);
    if (10u + al + ASR_OFI_WHO_LEN <= ASR_OFI_HANDLE_ORDINAL_OFF)
      memcpy(s->peer_who, handle + 10 + al, ASR_OFI_WHO_LEN);
  }
  /* One attempt, not post_ctl_locked's retries: this runs on the service
   * thread, which must not wait here while the peer takes its time to
   * answer the provider's connection setup; the connect machine calls again
   * on a later tick. */
  op_arm(&s->ctrl_op, s->ctrl_buf, sizeof s->ctrl_buf, 0);
  ssize_t rc = fi_tsend(o->ep, s->ctrl_buf, sizeof s->ctrl_buf, NULL, s->peer,
                        TAG_CTRL | make_tag(s->peer_comm_id, 0, 0), &s->ctrl_op);
  if (rc) {
    op_unarm(&s->ctrl_op);
    if (rc == -FI_EAGAIN) drain(o); /* under manual progress nothing moves otherwise */
  }
  ctl_unlock(o);
  if (rc == 0 || rc == -FI_EAGAIN) return ofi_err(rc);
  return ofi_fail(rc, "fi_tsend (connect)");
}

/* Makes data post p, retrying while the queue is full (-FI_EAGAIN, or
 * shm's -FI_ENOMEM) with a CQ read between tries for at most spin_ms, then
 * gives up with -FI_EAGAIN: the request waits, stashed, for the service
 * thread (request.c), which tries again on its next ticks. A send's room
 * comes back as soon as the peer reads its queue, usually within
 * microseconds (a window of 128 injected 8-byte sends meets a full queue
 * all the time), so a send the application posts spins for up to
 * ASR_OFI_SEND_SPIN_MS; the service thread's drain spins once per pass
 * (request.c). A receive's room comes back only as messages arrive, which
 * may wait for this very thread's next send: one more try (spin_ms 0).
 * Never spinning long keeps a thread from holding up, for seconds, the
 * other posts that its peer's progress may need.
 * Lock rule: called with ep_lock held, returns with it held, and lets it
 * go between tries (ep_let_others_in). Returns 0, -FI_EAGAIN, or the
 * provider's other -FI_E* code. Always inlined, as post_try: the first
 * try is the data path's whole cost. */
static inline __attribute__((always_inline)) ssize_t post_data_locked(asr__ofi_t *o, const ofi_post_t *p,
                                                                      int spin_ms) {
  assert(asr__ofi_locked(o));
  uint64_t until = 0;
  for (;;) {
    ssize_t rc = post_try(o, p);
    if (rc != -FI_EAGAIN && rc != -FI_ENOMEM) return rc;
    drain(o);
    if (!until)
      until = asr_time_ms() + (uint64_t)spin_ms;
    else if (asr_time_ms() >= until)
      return -FI_EAGAIN;
    ep_let_others_in(o);
  }
}

/* seed: async_sr_ofi_isend_locked. The sequence number is read and advanced
 * under ep_lock with the post itself, so a send that fails does not use one
 * up and the receiver's next receive still matches. A send of at most the
 * provider's inject size goes out with fi_tinject: the provider copies it
 * before returning and writes no completion, so op completes here. */
int asr__ofi_isend_locked(asr__ofi_t *o, asr__ofi_send_t *s, void *buf, size_t len, void *desc,
                          asr__ofi_op_t *op, int spin_ms) {
  assert(asr__ofi_locked(o));
  ssize_t rc;
  if (len <= o->inject_max) {
    /* libfabric never sees op: no arming, and a failed inject leaves it as
     * it was (completed or never posted, so not the provider's) */
    ofi_post_t p = {.kind = OFI_POST_TINJECT,
                    .buf = buf,
                    .len = len,
                    .peer = s->peer,
                    .comm_id = &s->peer_comm_id,
                    .seq = &s->seq};
    rc = post_data_locked(o, &p, spin_ms);
    if (rc == 0) {
      op_tsan_buf(op, buf, len, 0); /* the provider copied it before returning */
      op_complete(op, len, 0);
    }
  } else {
    op_arm(op, buf, len, 0);
    ofi_post_t p = {.kind = OFI_POST_TSEND,
                    .buf = buf,
                    .len = len,
                    .desc = desc,
                    .peer = s->peer,
                    .comm_id = &s->peer_comm_id,
                    .seq = &s->seq,
                    .op = op};
    rc = post_data_locked(o, &p, spin_ms);
    if (rc != 0) op_unarm(op);
  }
  if (rc == 0) {
    s->seq++;
    return 0;
  }
  return rc == -FI_EAGAIN ? ASR_EAGAIN : ofi_fail(rc, len <= o->inject_max ? "fi_tinject" : "fi_tsend");
}

/* seed: async_sr_ofi_irecv_locked; the sequence number as in the send. A
 * full receive queue (shm: 1024 posted receives per endpoint, shared by
 * every comm of the LNC) empties only as messages arrive: post_data_locked
 * makes one more try. */
int asr__ofi_irecv_locked(asr__ofi_t *o, asr__ofi_recv_t *r, void *buf, size_t len, void *desc,
                          asr__ofi_op_t *op) {
  assert(asr__ofi_locked(o));
  op_arm(op, buf, len, 1);
  ofi_post_t p = {.kind = OFI_POST_TRECV,
                  .buf = buf,
                  .len = len,
                  .desc = desc,
                  .peer = FI_ADDR_UNSPEC,
                  .comm_id = &r->comm_id,
                  .seq = &r->seq,
                  .op = op};
  ssize_t rc = post_data_locked(o, &p, 0);
  if (rc == 0) {
    r->seq++;
    return 0;
  }
  op_unarm(op);
  return rc == -FI_EAGAIN ? ASR_EAGAIN : ofi_fail(rc, "fi_trecv");
}

int asr__ofi_rma_locked(asr__ofi_t *o, asr__ofi_send_t *s, int write, void *buf, size_t len, void *desc,
                        const asr__ofi_rma_t *rma, asr__ofi_op_t *op, int spin_ms) {
  assert(asr__ofi_locked(o));
  /* A write of at most the inject size goes as a send of that size goes
   * (asr__ofi_isend_locked): injected, the provider copies it before
   * returning and completes nothing, so op completes here and libfabric
   * never sees it. A notifying one does so only when its data fits alone
   * but not with the value beside it (OFI_POST_INJECT_WRITE_NOTIFY's two
   * injects): one fi_writemsg of both that fits the inject size takes
   * shm's same copy protocol in one command pair, while one that does
   * not fit goes to the single-copy protocol, whose completion waits for
   * the owner's copy. */
  int direct = write && rma->notif_val && rma->notif_direct;
  asr__ofi_rma_t alone;
  if (direct && !len) { /* a notification alone: no bytes, into its ring slot (which the key covers) */
    alone = *rma;
    alone.raddr = rma->ring_addr;
    alone.key = rma->ring_key;
    rma = &alone;
    buf = (void *)(uintptr_t)rma->notif_val;
  }
  if (write && o->inject_max && len <= o->inject_max &&
      (!rma->notif_val || direct || len + sizeof(uint64_t) > o->inject_max)) {
    ofi_post_t p = {.kind = direct           ? OFI_POST_INJECT_WRITEDATA
                            : rma->notif_val ? OFI_POST_INJECT_WRITE_NOTIFY
                                             : OFI_POST_INJECT_WRITE,
                    .buf = buf,
                    .len = len,
                    .peer = s->peer,
                    .comm_id = &s->peer_comm_id,
                    .rma = rma};
    ssize_t rc = post_data_locked(o, &p, spin_ms);
    if (rc == 0) {
      op_tsan_buf(op, buf, len, 0);
      op_complete(op, len, 0);
      return 0;
    }
    return rc == -FI_EAGAIN ? ASR_EAGAIN : ofi_fail(rc, "fi_inject_write");
  }
  op_arm(op, buf, len, !write);
  ofi_post_t p = {.kind = !write           ? OFI_POST_READ
                          : direct         ? OFI_POST_WRITEDATA
                          : rma->notif_val ? OFI_POST_WRITE_NOTIFY
                                           : OFI_POST_WRITE,
                  .buf = buf,
                  .len = len,
                  .desc = desc,
                  .peer = s->peer,
                  .comm_id = &s->peer_comm_id,
                  .op = op,
                  .rma = rma};
  ssize_t rc = post_data_locked(o, &p, spin_ms);
  if (rc == 0) return 0;
  op_unarm(op);
  return rc == -FI_EAGAIN ? ASR_EAGAIN : ofi_fail(rc, write ? "fi_write" : "fi_read");
}

int asr__ofi_inject_write_locked(asr__ofi_t *o, fi_addr_t peer, const void *buf, size_t len, uint64_t raddr,
                                 uint64_t key) {
  assert(asr__ofi_locked(o));
  if (!o->rma || len > o->info->tx_attr->inject_size) return ASR_ENOSYS;
  ssize_t rc = fi_inject_write(o->ep, buf, len, peer, raddr, key);
  if (rc == -FI_EAGAIN || rc == -FI_ENOMEM) return ASR_EAGAIN;
  return rc ? ofi_fail(rc, "fi_inject_write") : 0;
}

int asr__ofi_cancel(asr__ofi_t *o, asr__ofi_op_t *op, int timeout_ms) {
  uint64_t until = asr_time_ms() + (uint64_t)timeout_ms;
  ctl_lock(o);
  if (asr__ofi_op_owned(op)) fi_cancel(&o->ep->fid, op);
  while (asr__ofi_op_owned(op) && asr_time_ms() < until) {
    drain(o);
    if (asr__ofi_op_owned(op)) {
      ctl_unlock(o);
      asr_sleep_ms(1);
      ctl_lock(o);
    }
  }
  int ok = !asr__ofi_op_owned(op);
  ctl_unlock(o);
  return ok ? 0 : ASR_ETIMEDOUT;
}

int asr__ofi_mr_reg(asr__ofi_t *o, void *va, size_t len, struct fid_mr **mr) {
  ctl_lock(o);
  uint64_t key = o->next_key++;
  /* a tensor's memory is also the local side of writes and reads */
  uint64_t access = FI_SEND | FI_RECV | (o->rma ? FI_READ | FI_WRITE : 0);
  int rc = fi_mr_reg(o->domain, va, len, access, 0, key, 0, mr, NULL);
  ctl_unlock(o);
  return rc ? ofi_fail(rc, "fi_mr_reg") : 0;
}

int asr__ofi_mr_reg_remote(asr__ofi_t *o, void *va, size_t len, uint64_t access, uint64_t key,
                           struct fid_mr **mr) {
  if (!o->rma) return ASR_ENOSYS;
  ctl_lock(o);
  if (!key) key = o->next_key++;
  int rc = fi_mr_reg(o->domain, va, len, access, 0, key, 0, mr, NULL);
  ctl_unlock(o);
  return rc ? ofi_fail(rc, "fi_mr_reg (remote access)") : 0;
}

uint64_t asr__ofi_rma_base(const asr__ofi_t *o, const void *va) {
  return o->rma_virt ? (uint64_t)(uintptr_t)va : 0;
}

void asr__ofi_mr_dereg(struct fid_mr *mr) {
  if (mr) fi_close(&mr->fid);
}

/* --- the mailbox (ofi.h; the close handshake of drain.c) --------------------- */

int asr__ofi_ctl_decode(const uint8_t *buf, size_t len, asr__ofi_ctl_t *m) {
  if (len != ASR_OFI_MBOX_LEN || asr_le_get32(buf) != MBOX_MAGIC) return ASR_EPROTO;
  uint32_t kind = asr_le_get32(buf + 4);
  if (kind < ASR_CTL_FIN || kind > ASR_CTL_REVOKED_ACK) return ASR_EPROTO;
  uint64_t aux = asr_le_get64(buf + 24);
  if (aux && kind != ASR_CTL_RING && kind != ASR_CTL_RING_ASK) return ASR_EPROTO;
  *m = (asr__ofi_ctl_t){.kind = kind,
                        .to = asr_le_get32(buf + 8),
                        .from = asr_le_get32(buf + 12),
                        .count = asr_le_get64(buf + 16),
                        .aux = aux};
  return 0;
}

int asr__ofi_mbox_post(asr__ofi_t *o) {
  if (o->mbox_posted) return 0;
  ctl_lock(o);
  op_arm(&o->mbox_op, o->mbox_buf, sizeof o->mbox_buf, 1);
  ssize_t rc =
      fi_trecv(o->ep, o->mbox_buf, sizeof o->mbox_buf, NULL, FI_ADDR_UNSPEC, TAG_CTRL, 0, &o->mbox_op);
  if (rc) {
    op_unarm(&o->mbox_op);
    if (rc == -FI_EAGAIN || rc == -FI_ENOMEM) drain(o);
  }
  ctl_unlock(o);
  if (rc == 0) {
    o->mbox_posted = 1;
    return 0;
  }
  return rc == -FI_EAGAIN || rc == -FI_ENOMEM ? ASR_EAGAIN : ofi_fail(rc, "fi_trecv (mailbox)");
}

int asr__ofi_mbox_take(asr__ofi_t *o, asr__ofi_ctl_t *m) {
  if (!o->mbox_posted || !asr__ofi_op_done(&o->mbox_op)) return 0;
  size_t len = 0;
  int err = asr__ofi_op_result(&o->mbox_op, &len);
  int rc = err ? err : asr__ofi_ctl_decode(o->mbox_buf, len, m);
  if (rc)
    asr_warn("fab",
             "dropped a control message that is not libasr's (%zu bytes%s%s): a foreign program sends "
             "to this endpoint, or a peer of another libasr version",
             len, err ? ": " : "", err ? asr_strerror(err) : "");
  o->mbox_posted = 0;
  (void)asr__ofi_mbox_post(o); /* a full queue: the service thread tries again */
  return rc ? ASR_EPROTO : 1;
}

/* Injects one mailbox message to dest. */
static int ctl_send(asr__ofi_t *o, fi_addr_t dest, asr__ofi_ctl_kind_t kind, uint32_t to, uint32_t from,
                    uint64_t count, uint64_t aux) {
  uint8_t buf[ASR_OFI_MBOX_LEN] = {0};
  asr_le_put32(buf, MBOX_MAGIC);
  asr_le_put32(buf + 4, kind);
  asr_le_put32(buf + 8, to);
  asr_le_put32(buf + 12, from);
  asr_le_put64(buf + 16, count);
  asr_le_put64(buf + 24, aux);
  if (o->info->tx_attr->inject_size < sizeof buf) return ASR_ENOSYS;
  ctl_lock(o);
  ssize_t rc = fi_tinject(o->ep, buf, sizeof buf, dest, TAG_CTRL);
  if (rc == -FI_EAGAIN || rc == -FI_ENOMEM) drain(o); /* under manual progress nothing moves otherwise */
  ctl_unlock(o);
  if (rc == -FI_EAGAIN || rc == -FI_ENOMEM) return ASR_EAGAIN;
  return rc ? ofi_fail(rc, "fi_tinject (mailbox)") : 0;
}

int asr__ofi_ctl_to_recv(asr__ofi_t *o, asr__ofi_send_t *s, asr__ofi_ctl_kind_t kind, uint64_t count,
                         uint64_t aux) {
  if (!s->peer_inserted) return ASR_ESTATE;
  return ctl_send(o, s->peer, kind, s->peer_comm_id, s->comm_id, count, aux);
}

int asr__ofi_recv_peer(asr__ofi_t *o, asr__ofi_recv_t *r, fi_addr_t *peer) {
  if (r->peer_av == 0) {
    uint16_t al = asr_le_get16(r->ctrl_buf + CONN_ALEN_OFF);
    r->peer_av = -1;
    if (al > 0 && al <= CONN_ADDR_MAX) {
      ctl_lock(o);
      int rc = asr__ofi_av_get(o, r->ctrl_buf + CONN_ADDR_OFF, al, &r->peer);
      ctl_unlock(o);
      if (rc == 0)
        r->peer_av = 1;
      else
        asr_warn("fab", "cannot answer a connector (its address is not in this LNC's address vector: %s)%s",
                 asr_strerror(rc),
                 rc == ASR_ENOSPACE ? "; libfabric's shm holds 256 peer addresses per LNC, use "
                                      "ASR_PROVIDER=\"tcp;ofi_rxm\" for more"
                                    : "");
    }
  }
  if (r->peer_av < 0) return ASR_ENOSYS;
  *peer = r->peer;
  return 0;
}

int asr__ofi_ctl_to_send(asr__ofi_t *o, asr__ofi_recv_t *r, asr__ofi_ctl_kind_t kind, uint64_t count,
                         uint64_t aux) {
  fi_addr_t peer;
  int rc = asr__ofi_recv_peer(o, r, &peer);
  if (rc) return rc;
  return ctl_send(o, peer, kind, asr_le_get32(r->ctrl_buf + CONN_ID_OFF), r->comm_id, count, aux);
}
