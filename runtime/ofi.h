/*
 * ofi.h -- the thin libfabric transport under libasr (seed §5: the
 * async_sr_ofi_*_locked wrappers; doc/design.md, "The data path" and
 * "Pitfalls of libfabric 1.17").
 *
 * One RDM tagged endpoint per LNC context and path (paths.c: a path per
 * peer -- shm to the peers of the same host identity, the network provider
 * to the others, or one provider for all), shared by the comms of that
 * path, with one completion queue bound for both transmit and receive. An
 * asr__ofi_t is one such endpoint and everything it owns: its locks, its
 * mailbox, its flush buffer. Every call that touches the endpoint or the CQ
 * holds that endpoint's own lock (ep_lock), so the comms of one path never
 * wait for, or drive the progress of, another path's endpoint;
 * the control path (listen, accept, connect, MR registration, cancel, flush)
 * takes the transport lock (the seed's async_sr_ofi_mutex[lnc]; for shm,
 * one for all of the process's shm endpoints) around it,
 * the data path (a post, a poll) ep_lock alone: ofi.c says why both, and why
 * FI_THREAD_SAFE alone does not do. Completions are harvested by draining the
 * CQ (manual progress: data moves only while someone reads it), which marks
 * the asr__ofi_op_t handed to libfabric as the operation context; that op
 * must stay valid until it is marked done. A poll reads an op's done flag
 * before it takes any lock, so an op's fields are accessed atomically.
 *
 * Errors: this is the boundary where libfabric's codes enter. Every function
 * here returns 0 or a negative ASR_E* code (asr_err.h), never a -FI_E*:
 * ofi.c maps them (ofi_err), and where it writes an errbuf or a log line
 * keeps libfabric's own words (fi_strerror) in it. The provider's queue
 * being full is ASR_EAGAIN.
 *
 * Tags (64 bits):  bit 63 = control message;  bits 62..40 = the receiving
 * comm's id (23 bits, unique per endpoint);  bits 39..0 = per-comm sequence
 * number, masked to ASR_SEQ_BITS (default 40; tests lower it to cross the
 * wrap point quickly -- 128 outstanding requests never need more than 8 bits).
 *
 * Byte order: every integer in the listen handle, the connect message, the
 * mailbox and "who" below is little-endian (asr_le.h), on every host: the
 * handle travels between hosts through the KV store, the connect message
 * and the mailbox between endpoints. An endpoint address is the provider's own bytes
 * (fi_getname), copied as they are.
 *
 * The 128-byte listen handle (the seed's net_handle):
 *     0    4  magic "ASRH"
 *     4    4  receiving comm id
 *     8    2  address length
 *    10  110  endpoint address (fi_getname), zero-padded; right after the
 *              address (when it is at most 90 bytes) the listener's 20-byte
 *              "who" (below), else zeros; in bytes 112..119, when the
 *              address and its who end by byte 112, the publisher's and
 *              its sender's incarnations (handle_inc.h: a job's ranks
 *              write them; zeros otherwise)
 *   120    4  ordinal: this RECV comm is the n-th from its (peer, peer LNC);
 *              a SEND comm takes only the handle with its own ordinal (see
 *              connect.c: why same-peer comms need it)
 *   124    1  path the listener chose for this comm: 1 local (the peer has
 *              the listener's host identity, one provider forced), 2
 *              network (context.c, asr__same_host), 3 asr's own same-host
 *              path, whose handle holds a region's name instead of an
 *              address in bytes 4..119 (sm/sm_layout.h); 0 is never
 *              written (a handle without a path is refused)
 *   125    3  provider tag: 24-bit FNV-1a hash of the name of the provider
 *              the listener's endpoint runs (asr__ofi_prov_tag), so a
 *              SEND comm whose own endpoint for that path runs another
 *              provider fails saying so, rather than insert an address its
 *              provider cannot read
 *
 * The 128-byte connect message (SEND -> RECV, control tag of the comm id):
 *     0    4  magic "ASRC"
 *     4   20  the connector's "who"
 *    24    4  the SEND comm's own id at its endpoint (its mailbox messages
 *              name it: "to" below)
 *    28    2  the connector's address length; 0 when it is longer than 98
 *              bytes (then the receiver cannot answer: no close handshake)
 *    30   98  the connector's endpoint address, zero-padded
 *
 * The mailbox (beyond the seed: the close handshake of drain.c). Each LNC
 * keeps one 128-byte receive posted for control tag 0 (comm id 0 is never
 * given to a comm), which every peer's 32-byte control messages reach (32:
 * small enough to be injected on shm and on tcp;ofi_rxm, whose inject size
 * is 64 bytes):
 *     0    4  magic "ASRD"
 *     4    4  kind (asr__ofi_ctl_kind_t; INVALID = 0 is never sent)
 *     8    4  "to": the comm id, at the receiving endpoint, it is about
 *    12    4  "from": the sender's comm id, at its own endpoint
 *    16    8  count (FIN: sends posted on the SEND comm; ACK, CLOSED:
 *              messages the RECV comm has taken; RING: the notification
 *              ring's key; RING_ASK: the sender's credit word's key, 0
 *              for none; RING_TAKEN: notifications taken; REVOKED: the
 *              key of a registration its owner revoked)
 *    24    8  aux: RING: the ring's target address; RING_ASK: the credit
 *              word's; zero in every other kind
 * A message that is not this (another length, magic or kind, or non-zero
 * padding) is dropped with a warning; one naming a comm that is not there
 * (closed meanwhile) is dropped quietly.
 *
 * "who" (peer_watch.c): pid u32, start time u64 (clock ticks since boot),
 * node id u64 (kernel boot and pid namespace); all zero: not watchable.
 */
#ifndef ASR_OFI_H
#define ASR_OFI_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "asr_assert.h"
#include "asr_err.h"
#include "asr_le.h"
#include "asr_tsan.h"

#define ASR_OFI_HANDLE_LEN 128
#define ASR_OFI_ADDR_MAX 110
#define ASR_OFI_HANDLE_ORDINAL_OFF 120
#define ASR_OFI_HANDLE_PATH_OFF 124
#define ASR_OFI_HANDLE_MAGIC 0x48525341u /* "ASRH" */
#define ASR_OFI_HANDLE_COMM_OFF 4
/* Comm ids run 1..ASR_OFI_COMM_ID_MAX on each endpoint: 23 bits, the field
 * a tag (ofi.c) and a notification's ring-form CQ data (rma/rma.h) give
 * them. */
#define ASR_OFI_COMM_ID_MAX 0x7fffffu
#define ASR_OFI_HANDLE_PROV_OFF 125
#define ASR_OFI_CTRL_LEN 128
#define ASR_OFI_WHO_LEN 20
#define ASR_OFI_MBOX_LEN 32

/* A spin lock for critical sections of a few instructions to one provider
 * call, none of which blocks: an uncontended lock is one atomic exchange and
 * its unlock a plain release store, where a pthread mutex costs two atomic
 * read-modify-writes and two library calls. A waiter yields after a short
 * spin, so a holder that was descheduled (few cores, busy pollers) gets the
 * CPU back instead of the waiter burning its time slice. */
typedef atomic_int asr__spin_t;

static inline void asr__spin_lock(asr__spin_t *l) {
  while (atomic_exchange_explicit(l, 1, memory_order_acquire)) {
    for (unsigned n = 0; atomic_load_explicit(l, memory_order_relaxed); n++) {
      if (n < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        sched_yield();
      }
    }
  }
}

static inline void asr__spin_unlock(asr__spin_t *l) { atomic_store_explicit(l, 0, memory_order_release); }

/* One libfabric operation in flight; the op context handed to libfabric.
 * Every field but fctx is read and written with __atomic builtins. posted is
 * written only by the poster; done only by the drain that reads the
 * completion (its last touch of op), with release: it publishes err and len. */
typedef struct asr__ofi_op {
  struct fi_context2 fctx; /* must be first: libfabric's context area */
  int posted;              /* handed to libfabric (cleared when a post fails) */
  int done;                /* completion read */
  int err;                 /* 0 or the ASR_E* of a failed completion (mapped from its fi_errno) */
  size_t len;              /* bytes moved (receives: bytes received) */
#ifdef ASR_TSAN
  /* What the provider may touch until the completion, told to TSan by the
   * drain (asr_tsan.h): the buffer, its size, and whether it is written. */
  void *tsan_buf;
  size_t tsan_cap;
  int tsan_recv;
#endif
} asr__ofi_op_t;

/* Whether libfabric still owns op: posted, completion not read yet. Once it
 * says no, the drain that completed op is done with it (acquire on done). */
static inline int asr__ofi_op_owned(const asr__ofi_op_t *op) {
  return !__atomic_load_n(&op->done, __ATOMIC_ACQUIRE) && __atomic_load_n(&op->posted, __ATOMIC_RELAXED);
}

typedef struct asr__ofi {
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_av *av;
  struct fid_cq *cq;
  struct fid_ep *ep;
  pthread_mutex_t *lock;    /* the control path's: own_lock, or shm's one (ofi.c, "locking") */
  pthread_mutex_t own_lock; /* the seed's async_sr_ofi_mutex[lnc] */
  asr__spin_t ep_lock;      /* every endpoint / CQ call (inside lock on the control path) */
#ifndef NDEBUG
  /* Debug builds: the thread holding ep_lock (asr_thread_id), 0 when none,
   * so that asr__ofi_locked can be asserted. Written by the holder only,
   * read by any thread: relaxed atomics, no cost in release builds. */
  _Atomic uintptr_t ep_owner;
#endif
  uint8_t addr[ASR_OFI_ADDR_MAX];
  size_t addrlen;
  uint8_t who[ASR_OFI_WHO_LEN]; /* ours, sent to every peer (set by the context) */
  uint64_t next_key;            /* unique MR keys: tcp before libfabric 2.2 wants them */
  uint64_t seq_mask;
  uint32_t next_comm_id;
  int need_desc;     /* FI_MR_LOCAL: pass descriptors */
  size_t inject_max; /* sends up to this size go out with fi_tinject (0: none) */
  char provider[64];
  /* the mailbox (its receive is posted by asr__ofi_mbox_post, taken by
   * asr__ofi_mbox_take: the service thread alone); on_ctl(ctl_arg) runs in
   * the drain that reads its completion, under ep_lock, on any thread */
  asr__ofi_op_t mbox_op;
  uint8_t mbox_buf[ASR_OFI_CTRL_LEN];
  int mbox_posted;
  void (*on_ctl)(void *arg);
  void *ctl_arg;
  /* the flush fence's 4-byte buffer (seed: enc_async_sr_flush), and the
   * address table, at the end: the fields above keep the places they had
   * with one endpoint per context */
  struct fid_mr *flush_mr;
  uint8_t flush_buf[4];
  /* one-sided transfers (rma.h): rma says the endpoint was opened with
   * remote read and write (and keys we choose), rma_virt that a target
   * address is the owner's virtual address rather than an offset in its
   * region; on_rdata(rdata_arg, data) runs in the drain that reads a
   * peer's notifying write (remote CQ data), under ep_lock, on any thread */
  int rma, rma_virt;
  /* CQ reads so far, by any thread (raised under ep_lock, read without
   * it): the service thread reads the CQ for a peer's one-sided access only
   * when nobody else did since its last look (rma/notif.c) */
  _Atomic unsigned long drains;
  void (*on_rdata)(void *arg, uint64_t data);
  void *rdata_arg;
  /* every peer address inserted, once each (ofi_av.c; under the control lock) */
  struct asr__ofi_av_entry *avtab;
  int avn, avcap;
  /* completions read so far, by any thread's drain, raised after each is
   * recorded in its op (release): a reader that sees the count changed sees
   * those ops done (connect_sched.c looks at its accepting comms then) */
  _Atomic unsigned long completions;
} asr__ofi_t;

/* Counts one event under ep_lock (the load and the relaxed store cannot
 * lose a count; a reader elsewhere sees some recent value). */
static inline void asr__ofi_count(_Atomic unsigned long *n) {
  atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* The peer addresses libfabric 1.17's shm holds per endpoint (SMR_MAX_PEERS). */
#define ASR_OFI_SHM_MAX_PEERS 256

/* addr's fi_addr_t on o's address vector, inserted the first time it is
 * asked for and kept until o is closed (ofi_av.c says why). Called with the
 * control lock held. 0; ASR_ENOSPACE when shm's vector is full; ASR_EPROTO
 * for a length out of range; ASR_EUNREACH / ASR_EIO when libfabric refused
 * it (its words in the debug log). */
int asr__ofi_av_get(asr__ofi_t *o, const uint8_t *addr, size_t len, fi_addr_t *out);
/* Frees the table (asr__ofi_close, after the address vector is closed). */
void asr__ofi_av_free(asr__ofi_t *o);

/* A mailbox message, decoded (see "The mailbox" above). */
typedef enum {
  ASR_CTL_INVALID = 0,
  ASR_CTL_FIN = 1,    /* SEND -> RECV: closing; count = sends posted, the last ones it will make */
  ASR_CTL_ACK = 2,    /* RECV -> SEND: count = messages taken, all that the FIN announced */
  ASR_CTL_CLOSED = 3, /* RECV -> SEND: the RECV comm closed, having taken count messages */
  /* one-sided transfers (notif.c) */
  /* RING_ASK: make the notification ring; count is the key and aux the
   * address of the sender's credit word (notif.c), count 0: it has none */
  ASR_CTL_RING_ASK = 4,
  ASR_CTL_RING = 5,        /* RECV -> SEND: the ring is at aux with key count (count 0: refused) */
  ASR_CTL_RING_TAKEN = 6,  /* RECV -> SEND: count notifications were taken */
  ASR_CTL_REVOKED = 7,     /* RECV -> SEND: the registration with key count was revoked */
  ASR_CTL_REVOKED_ACK = 8, /* SEND -> RECV: the SEND comm refuses key count from now on */
} asr__ofi_ctl_kind_t;

typedef struct {
  uint32_t kind; /* asr__ofi_ctl_kind_t */
  uint32_t to, from;
  uint64_t count;
  uint64_t aux; /* bytes 24..31: zero but in RING and RING_ASK */
} asr__ofi_ctl_t;

/* The receiving half: a listen id plus the control receive that accept waits on. */
typedef struct {
  uint32_t comm_id;
  uint64_t seq; /* next receive's sequence number */
  asr__ofi_op_t ctrl_op;
  uint8_t ctrl_buf[ASR_OFI_CTRL_LEN]; /* after accept: the connector's message (its who at 4) */
  fi_addr_t peer;                     /* the connector, for mailbox answers: */
  int peer_av;                        /* 0 not inserted yet, 1 inserted, -1 cannot be (no address) */
} asr__ofi_recv_t;

/* The sending half: the peer's address and comm id. */
typedef struct {
  fi_addr_t peer;
  int peer_inserted; /* peer is in the AV (asr__ofi_connect may be called again) */
  uint32_t peer_comm_id;
  uint32_t comm_id; /* our own, for the peer's mailbox answers (given at the first connect) */
  uint64_t seq;     /* next send's sequence number */
  asr__ofi_op_t ctrl_op;
  uint8_t ctrl_buf[ASR_OFI_CTRL_LEN];
  uint8_t peer_who[ASR_OFI_WHO_LEN]; /* from the handle; zeros when it had none */
} asr__ofi_send_t;

/* The connector's comm id, from the connect message accept took. */
#define ASR_OFI_CONN_ID_OFF 24
static inline uint32_t asr__ofi_recv_peer_id(const asr__ofi_recv_t *r) {
  return asr_le_get32(r->ctrl_buf + ASR_OFI_CONN_ID_OFF);
}

/* Decodes a mailbox message of len bytes into *m; 0, or ASR_EPROTO when it
 * is not one (m untouched). Pure: the fuzzable part of the mailbox. */
int asr__ofi_ctl_decode(const uint8_t *buf, size_t len, asr__ofi_ctl_t *m);

/* Posts the mailbox receive when it is not posted (LNC start, and after
 * each message taken). 0, ASR_EAGAIN (queue full: try again later) or an
 * ASR_E* code. */
int asr__ofi_mbox_post(asr__ofi_t *o);

/* Takes the message the mailbox received, if any, and posts the receive
 * again. Returns 1 with *m filled, 0 when none came, or ASR_EPROTO when
 * what came was not a mailbox message (dropped; the log says what). */
int asr__ofi_mbox_take(asr__ofi_t *o, asr__ofi_ctl_t *m);

/* Sends a mailbox message (an inject: nothing to complete) from a SEND
 * comm to its peer RECV comm (FIN), or from a RECV comm to its connector
 * (ACK, CLOSED; the connector's address is put in the AV the first time).
 * 0, ASR_EAGAIN (the provider's queue or connection is not ready: the CQ
 * was read, try again), ASR_ENOSYS when the connector gave no address, or
 * another ASR_E* code. */
int asr__ofi_ctl_to_recv(asr__ofi_t *o, asr__ofi_send_t *s, asr__ofi_ctl_kind_t kind, uint64_t count,
                         uint64_t aux);
int asr__ofi_ctl_to_send(asr__ofi_t *o, asr__ofi_recv_t *r, asr__ofi_ctl_kind_t kind, uint64_t count,
                         uint64_t aux);
/* The connector's address of RECV half r, put in the AV the first time
 * (the thread that answers its mailbox messages: ctl_to_send's): 0 with
 * *peer, or ASR_ENOSYS when the connector gave none. */
int asr__ofi_recv_peer(asr__ofi_t *o, asr__ofi_recv_t *r, fi_addr_t *peer);

/* The provider the user forces for every peer: ASR_PROVIDER, else
 * FI_PROVIDER; *prov = NULL when neither is set (then the context picks a
 * path per peer). 0, or ASR_ECONFIG with errbuf for a bad setting. */
int asr__ofi_forced_provider(const char **prov, char *errbuf, size_t errlen);

/* The 24-bit tag of a provider name that a handle carries (FNV-1a). */
static inline uint32_t asr__ofi_prov_tag(const char *prov) {
  uint32_t h = 2166136261u;
  for (const unsigned char *p = (const unsigned char *)prov; *p; p++) h = (h ^ *p) * 16777619u;
  return (h ^ (h >> 24)) & 0xffffffu;
}

/* Opens an endpoint for lnc on provider prov, with ASR_IF_ADDR (network
 * providers), ASR_INJECT_MAX and ASR_SEQ_BITS. Returns 0, or a negative
 * ASR_E* code (ASR_ECONFIG for a bad setting) with errbuf saying why
 * (libfabric's words); on failure nothing of o is left acquired, and o needs
 * no asr__ofi_close. */
int asr__ofi_open(asr__ofi_t *o, int lnc, const char *prov, char *errbuf, size_t errlen);

/* Closes what asr__ofi_open acquired, in reverse order; posted operations are
 * discarded with the endpoint. The caller (asr_close) has closed every MR. */
void asr__ofi_close(asr__ofi_t *o);

/* Drains the CQ, marking completed ops (the flush): takes the transport lock, then ep_lock. */
int asr__ofi_progress(asr__ofi_t *o);

/* RECV side, LISTEN: allocates a comm id, posts the control receive and
 * writes the 128-byte handle, naming path (1 local, 2 network) and o's
 * provider (seed: async_sr_ofi_listen). */
int asr__ofi_listen(asr__ofi_t *o, asr__ofi_recv_t *r, uint8_t handle[ASR_OFI_HANDLE_LEN], int path);

/* What a handle says of its path: 0 with *path (1 local, 2 network, 3 sm) and
 * *prov_tag, or ASR_EPROTO when it is not a handle or names no path (the
 * handle comes from the KV store: outside bytes). Pure, inline so that the
 * tests can feed it any bytes. */
static inline int asr__ofi_handle_path(const uint8_t handle[ASR_OFI_HANDLE_LEN], int *path,
                                       uint32_t *prov_tag) {
  if (asr_le_get32(handle) != ASR_OFI_HANDLE_MAGIC) return ASR_EPROTO;
  int p = handle[ASR_OFI_HANDLE_PATH_OFF];
  if (p != 1 && p != 2 && p != 3) return ASR_EPROTO;
  uint32_t tag = 0;
  for (int i = 0; i < 3; i++) tag |= (uint32_t)handle[ASR_OFI_HANDLE_PROV_OFF + i] << (8 * i);
  *path = p;
  *prov_tag = tag;
  return 0;
}

/* What a handle says of the endpoint to connect to: 0 with *addrlen (its
 * address is at byte 10) and *id (the receiving comm's), or ASR_EPROTO when
 * it is not a handle, its address length is outside 1..ASR_OFI_ADDR_MAX, or
 * its comm id is outside 1..ASR_OFI_COMM_ID_MAX (outside bytes, which the
 * comm's tags and notifications would carry cut short). Pure, as above. */
static inline int asr__ofi_handle_peer(const uint8_t handle[ASR_OFI_HANDLE_LEN], unsigned *addrlen,
                                       uint32_t *id) {
  unsigned al = asr_le_get16(handle + 8);
  uint32_t v = asr_le_get32(handle + ASR_OFI_HANDLE_COMM_OFF);
  if (asr_le_get32(handle) != ASR_OFI_HANDLE_MAGIC || al == 0 || al > ASR_OFI_ADDR_MAX || v == 0 ||
      v > ASR_OFI_COMM_ID_MAX)
    return ASR_EPROTO;
  *addrlen = al;
  *id = v;
  return 0;
}

/* RECV side, NET_CONNECT: *ready = 1 once the sender's control message
 * arrived (seed: async_sr_ofi_accept; never blocks). It does not read the
 * CQ: the service thread reads it once per tick for all its waiting comms
 * (context.c, connect_comms). */
int asr__ofi_accept(const asr__ofi_recv_t *r, int *ready);

/* SEND side, NET_CONNECT: resolves the handle and posts the control message;
 * returns without waiting for anything the acceptor must do, so connecting to
 * oneself cannot deadlock (seed: async_sr_ofi_connect). Makes one attempt:
 * ASR_EAGAIN (after draining the CQ) means the provider is still setting up
 * its connection to the peer (shm's address exchange, rxm's on-demand
 * connect), which needs the peer to make progress; call again later. */
int asr__ofi_connect(asr__ofi_t *o, const uint8_t handle[ASR_OFI_HANDLE_LEN], asr__ofi_send_t *s);

/* How long a send the application posts spins for room in a full queue
 * before it is stashed (ofi.c: post_data_locked says why so short). */
#define ASR_OFI_SEND_SPIN_MS 50

/* The target of a write or read (rma.h): raddr and key in the owner's
 * registration; for a notifying write also the value's address (valid
 * until the op completes), the owner's ring slot for it and the remote CQ
 * data (rma.h's two forms: notif_direct says it carries the value itself,
 * and nothing goes to the slot). notif_val NULL: no notification. */
typedef struct {
  uint64_t raddr, key;
  const uint64_t *notif_val;
  uint64_t ring_addr, ring_key, imm;
  int notif_direct;
} asr__ofi_rma_t;

/* Posts a write (write = 1) or read of [buf, buf + len) to / from rma's
 * target through the SEND comm's peer, as asr__ofi_isend_locked posts a
 * send (same lock rule, spin_ms and results). A write of len 0 with a
 * notification carries the notification alone. */
int asr__ofi_rma_locked(asr__ofi_t *o, asr__ofi_send_t *s, int write, void *buf, size_t len, void *desc,
                        const asr__ofi_rma_t *rma, asr__ofi_op_t *op, int spin_ms);

/* The bits of ofi.c's hints for the order one-sided transfers keep: sends
 * after sends and writes, writes after writes, reads after writes. */
#define ASR_OFI_RMA_ORDER (FI_ORDER_SAS | FI_ORDER_SAW | FI_ORDER_WAW | FI_ORDER_RAW)

#ifndef NDEBUG
/* Whether the calling thread holds o's ep_lock; for assert() in debug
 * builds (release builds do not track the owner). */
static inline int asr__ofi_locked(const asr__ofi_t *o) {
  return atomic_load_explicit(&o->ep_owner, memory_order_relaxed) == asr_thread_id();
}
#endif

/* The data path's lock, ep_lock, for a caller that does more under it than
 * one provider call: request.c pops and pushes its comms' request freelists
 * under it, so that a post or a test that polls takes one lock, not two.
 * ofi.c takes it through these too. It is not recursive: a thread that
 * takes it twice would spin forever (asserted in debug builds). */
static inline void asr__ofi_lock(asr__ofi_t *o) {
  assert(!asr__ofi_locked(o));
  asr__spin_lock(&o->ep_lock);
#ifndef NDEBUG
  atomic_store_explicit(&o->ep_owner, asr_thread_id(), memory_order_relaxed);
#endif
}
static inline void asr__ofi_unlock(asr__ofi_t *o) {
  assert(asr__ofi_locked(o));
#ifndef NDEBUG
  atomic_store_explicit(&o->ep_owner, 0, memory_order_relaxed);
#endif
  asr__spin_unlock(&o->ep_lock);
}

/* Posts the next send / receive of a comm (the post and the sequence
 * number it takes move together), and drains the CQ (the data path's
 * poll). Lock rule: the caller holds o's ep_lock (asr__ofi_lock); a post
 * lets it go and takes it again between tries while the provider's queue
 * is full. A queue that stays full gives ASR_EAGAIN (shm's -FI_ENOMEM
 * included): a send after retrying for up to spin_ms (reading the CQ
 * between tries; ASR_OFI_SEND_SPIN_MS for a post from the application), a
 * receive after one retry (ofi.c: post_data_locked). Each returns 0 or a
 * negative ASR_E* code. */
int asr__ofi_isend_locked(asr__ofi_t *o, asr__ofi_send_t *s, void *buf, size_t len, void *desc,
                          asr__ofi_op_t *op, int spin_ms);
int asr__ofi_irecv_locked(asr__ofi_t *o, asr__ofi_recv_t *r, void *buf, size_t len, void *desc,
                          asr__ofi_op_t *op);
int asr__ofi_drain_locked(asr__ofi_t *o);
/* Writes len bytes of buf (at most the provider's inject size) to raddr
 * under key at peer, as an inject: buf may be reused on return, and no
 * completion comes. 0, ASR_EAGAIN (queue full), or another ASR_E*. */
int asr__ofi_inject_write_locked(asr__ofi_t *o, fi_addr_t peer, const void *buf, size_t len, uint64_t raddr,
                                 uint64_t key);

/* Whether op has completed (seed: async_sr_ofi_test_locked -> ncclNetTest
 * reads this after a drain): the acquire load pairs with the drain's
 * release. Once it has, *len is the length moved and the result 0, or
 * the ASR_E* code of the error it completed with (ASR_ETRUNC: the message
 * was larger than the receive buffer; ASR_ECANCELED: cancelled). */
static inline int asr__ofi_op_done(const asr__ofi_op_t *op) {
  return __atomic_load_n(&op->done, __ATOMIC_ACQUIRE);
}
static inline int asr__ofi_op_result(const asr__ofi_op_t *op, size_t *len) {
  if (len) *len = __atomic_load_n(&op->len, __ATOMIC_RELAXED);
  return __atomic_load_n(&op->err, __ATOMIC_RELAXED);
}

/* Cancels a posted op and waits (bounded) for its completion to be read, so
 * its memory can be reused. Returns 0, or ASR_ETIMEDOUT when it never came. */
int asr__ofi_cancel(asr__ofi_t *o, asr__ofi_op_t *op, int timeout_ms);

/* Registers [va, va + len) for send and receive with a unique key. */
int asr__ofi_mr_reg(asr__ofi_t *o, void *va, size_t len, struct fid_mr **mr);
static inline void *asr__ofi_mr_desc(asr__ofi_t *o, struct fid_mr *mr) {
  return o->need_desc && mr ? fi_mr_desc(mr) : NULL;
}
void asr__ofi_mr_dereg(struct fid_mr *mr);
/* Registers [va, va + len) for peers' access (FI_REMOTE_READ / WRITE)
 * under key (0: the endpoint's next own key). ASR_ENOSYS when the
 * endpoint has no one-sided transfers (o->rma). */
int asr__ofi_mr_reg_remote(asr__ofi_t *o, void *va, size_t len, uint64_t access, uint64_t key,
                           struct fid_mr **mr);
static inline uint64_t asr__ofi_mr_key(struct fid_mr *mr) { return fi_mr_key(mr); }
/* Where a region registered at va starts, as the endpoint's provider takes
 * a target address: va itself (FI_MR_VIRT_ADDR) or 0 (offsets). */
uint64_t asr__ofi_rma_base(const asr__ofi_t *o, const void *va);

#endif /* ASR_OFI_H */
