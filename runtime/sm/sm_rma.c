/*
 * sm_rma.c -- one-sided transfers on the sm path (rma/rma.h; sm_layout.h:
 * the notification slots): the initiator, which holds the SEND end, copies
 * straight between its memory and the owner's (process_vm_writev / readv:
 * one copy, nothing for the owner to do), and publishes a notification in
 * the region after the data is in place. Everything on the SEND end runs
 * under its lock, as its sends do (sm_data.c); the RECV end's taking of
 * notifications under the RECV end's lock.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/uio.h>

#include "asr.h"
#include "asr_assert.h"
#include "asr_err.h"
#include "asr_log.h"
#include "sm.h"

_Static_assert(ASR_SM_NOTIF_SLOTS == ASR_NOTIF_DEPTH, "the sm path holds asr.h's notification depth");

static _Atomic uint64_t *word(asr__sm_t *s, size_t off) {
  return (_Atomic uint64_t *)(void *)(s->base + off);
}
static uint64_t *slot(asr__sm_t *s, uint64_t n) {
  return (uint64_t *)(void *)(s->base + s->len - ASR_SM_NOTIF_BYTES + (n % ASR_SM_NOTIF_SLOTS) * 8);
}

/* Copies every byte of the n pieces local[i] <-> remote[i] (each pair of
 * one length), IOV_MAX pieces per system call: 0 or an ASR_E*. */
static int cma(asr__sm_t *s, int write, const struct iovec *local, const struct iovec *remote, int n) {
  int i = 0;
  size_t skip = 0; /* bytes of piece i moved by an earlier, partial call */
  while (i < n) {
    struct iovec l[64], r[64];
    int k = 0;
    for (int j = i; j < n && k < 64; j++, k++) {
      size_t off = j == i ? skip : 0;
      l[k] = (struct iovec){(char *)local[j].iov_base + off, local[j].iov_len - off};
      r[k] = (struct iovec){(char *)remote[j].iov_base + off, remote[j].iov_len - off};
    }
    ssize_t got = write ? process_vm_writev((pid_t)s->peer_pid, l, (unsigned long)k, r, (unsigned long)k, 0)
                        : process_vm_readv((pid_t)s->peer_pid, l, (unsigned long)k, r, (unsigned long)k, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int e = errno;
      asr_debug("fab", "sm region %s: %s process %u: %s", s->name, write ? "writing into" : "reading from",
                s->peer_pid, strerror(e));
      /* EFAULT: the owner's memory is not there any more; ESRCH: the owner is gone */
      return e == EFAULT ? ASR_EPROTO : e == ESRCH ? ASR_ECONNRESET : asr_err_from_errno(e);
    }
    if (got == 0) return ASR_EIO;
    /* a partial copy stops at a piece's boundary or inside one: go on from there */
    size_t left = (size_t)got;
    for (int j = 0; j < k && left; j++) {
      if (left >= l[j].iov_len) {
        left -= l[j].iov_len;
        i++;
        skip = 0;
      } else {
        skip += left;
        left = 0;
      }
    }
  }
  return 0;
}

int asr__sm_rma_locked(asr__sm_t *s, int write, const struct iovec *local, const struct iovec *remote, int n,
                       size_t total, const uint64_t *notif, asr__ofi_op_t *op) {
  assert(asr__sm_locked(s) && s->is_send);
  if (s->err) return s->err;
  if (!s->peer_pid) return ASR_ENOSYS;
  /* the ring's order: a transfer waits behind a message being pipelined */
  if (s->pipe.op) return ASR_EAGAIN;
  uint64_t tail = 0;
  if (notif) {
    tail = atomic_load_explicit(word(s, ASR_SM_OFF_NTAIL), memory_order_relaxed);
    uint64_t head = atomic_load_explicit(word(s, ASR_SM_OFF_NHEAD), memory_order_acquire);
    if (head > tail) {
      s->err = ASR_EPROTO;
      s->why = "its notification head passed what was published";
      asr_error("fab", "sm region %s: the peer process %u broke the layout: %s", s->name, s->peer_pid,
                s->why);
      return s->err;
    }
    if (tail - head >= ASR_SM_NOTIF_SLOTS) return ASR_EAGAIN; /* full: the write waits, stashed */
  }
  int rc = cma(s, write, local, remote, n);
  if (rc) return rc;
  if (notif) {
    *slot(s, tail) = *notif;
    atomic_store_explicit(word(s, ASR_SM_OFF_NTAIL), tail + 1, memory_order_release);
  }
  __atomic_store_n(&op->done, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&op->err, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&op->len, total, __ATOMIC_RELAXED);
  __atomic_store_n(&op->posted, 1, __ATOMIC_RELAXED);
  if (s->wait_h != s->wait_t) {
    /* posts of a comm complete in post order: with the send before it */
    s->wait[s->wait_t % ASR_SM_SLOTS] = (asr__sm_wait_t){op, s->wait[(s->wait_t - 1) % ASR_SM_SLOTS].end};
    s->wait_t++;
  } else {
    __atomic_store_n(&op->done, 1, __ATOMIC_RELEASE);
  }
  return 0;
}

int asr__sm_notif_take(asr__sm_t *s, uint64_t *values, int max) {
  asr__sm_lock(s);
  int k = 0;
  if (!s->err) {
    uint64_t head = atomic_load_explicit(word(s, ASR_SM_OFF_NHEAD), memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(word(s, ASR_SM_OFF_NTAIL), memory_order_acquire);
    if (tail < head || tail - head > ASR_SM_NOTIF_SLOTS) {
      asr_error("fab",
                "sm region %s: the peer process %u broke the layout: its notification tail is %llu, "
                "the head %llu; no more notifications are taken",
                s->name, s->peer_pid, (unsigned long long)tail, (unsigned long long)head);
      s->err = ASR_EPROTO;
      s->why = "its notification tail is out of range";
    } else {
      for (; k < max && head < tail; k++, head++) values[k] = *slot(s, head);
      atomic_store_explicit(word(s, ASR_SM_OFF_NHEAD), head, memory_order_release);
    }
  }
  asr__sm_unlock(s);
  return k;
}
