/*
 * rma_types.h -- the records of one-sided transfers (asr.h, "One-sided
 * transfers"; issue 51) that rt.h's comm, request pool and context hold.
 * rma.h has the functions over them.
 */
#ifndef ASR_RMA_TYPES_H
#define ASR_RMA_TYPES_H

#include <stdatomic.h>
#include <stdint.h>

#include "asr.h"

struct asr_xfer;
struct fid_mr;

#define ASR_REVOKED_KEEP 32 /* revoked keys a SEND comm remembers */

/* What a write, read or list post carries beside the 56-byte request
 * record (seed §1's size stays): one per request, in the comm's pool, at
 * the request's index. Written by the post before the request is posted
 * or stashed, read by whoever posts it. */
typedef struct {
  uint64_t raddr;     /* the target address as the owner's provider takes it (or, sm: the owner's va) */
  uint64_t key;       /* the registration's key */
  uint64_t notif;     /* the notification (ASR_WRITE_NOTIFY) */
  uint64_t nseq;      /* its sequence number on the comm, given when it is posted */
  unsigned flags;     /* ASR_WRITE_NOTIFY */
  uint32_t slot;      /* sm: the registration's entry in the owner's table */
  struct asr_xfer *x; /* a list post: its list */
} asr__rma_t;

/* The notification ring of a RECV comm on a libfabric path (notif.c):
 * vals, registered for the sender's remote writes, gets each
 * notification's value; arrived[i] is seq + 1 of the one in vals[i] once
 * its remote CQ data was read. Both are the comm's endpoint's (ep_lock). */
typedef struct asr__nring {
  uint64_t *vals; /* ASR_NOTIF_DEPTH values, registered */
  uint64_t arrived[ASR_NOTIF_DEPTH];
  uint64_t next;     /* the next sequence number the owner takes */
  uint64_t nin;      /* notifications arrived (the next direct one's number: rma.h) */
  uint64_t reported; /* the taken count last told to the sender */
  /* the sender's credit word (notif.c), from its RING_ASK; key 0: none */
  uint64_t credit_addr, credit_key;
  uint64_t credit_peer; /* the sender's fi_addr_t (with credit_key) */
  struct fid_mr *mr;
  uint32_t comm_id; /* the RECV comm's id on its endpoint (the remote CQ data names it) */
  struct asr_comm *comm;
} asr__nring_t;

/* An endpoint's rings by their RECV comm's id (notif.c): open addressing,
 * cap a power of two (0: none yet), a removed ring leaving a tombstone. */
typedef struct {
  asr__nring_t **v;
  unsigned cap, used; /* used: rings and tombstones */
  _Atomic unsigned live;
} asr__nring_tab_t;

/* A comm's one-sided state. */
typedef struct {
  /* SEND, libfabric path: the peer RECV comm's ring, once it told us
   * (ring_state: 0 not asked, 1 asked, 2 known, 3 refused by the peer,
   * written by the service thread; ring_addr and ring_key before 2, with
   * release) */
  _Atomic int ring_state;
  uint64_t ring_addr, ring_key;
  uint64_t nposted;        /* notifications posted (under the comm's data-path lock) */
  _Atomic uint64_t ntaken; /* how many the owner said it took (service thread) */
  /* the credit word (notif.c): the owner writes its taken count here;
   * made, registered for remote writes, before the first RING_ASK */
  uint64_t *credit;
  struct fid_mr *credit_mr;
  _Atomic int ring_wanted; /* an import asked for the ring: the service thread asks the peer */
  uint64_t ring_asked_ms;  /* when it last asked (service thread) */
  /* SEND, sm path: the owner's registration table, mapped at the first
   * import (its slots' keys; NULL until then) */
  const _Atomic uint64_t *tab;
  uint32_t tab_slots;
  /* SEND: the keys its owner said it revoked, newest last (REVOKED, service
   * thread: the key, then nrevoked, with release); a post of one of the
   * last ASR_REVOKED_KEEP is refused before anything is sent (rma_ops.c) */
  _Atomic uint64_t revoked[ASR_REVOKED_KEEP];
  _Atomic unsigned nrevoked;
  /* RECV, libfabric path: its ring, made when the sender asked (by the
   * service thread, published with release once whole; asr_notif_poll
   * loads it with acquire) */
  asr__nring_t *_Atomic ring;
} asr__comm_rma_t;

#endif /* ASR_RMA_TYPES_H */
