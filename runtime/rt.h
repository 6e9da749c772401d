/*
 * rt.h -- libasr's internal records: context, comm, request (seed §1-§4).
 *
 * Seed name map:
 *   asr_ctx_t            async_sr_context (one per LNC, 0..127)
 *   ctx->task.n, .mutex  its task_n, task_mutex (the work count and its lock)
 *   asr_comm             nrt_async_sendrecv_comm
 *   asr_request          nrt_async_sendrecv_request (56 bytes, asserted below)
 *   asr__post            enc_async_sr_post_op
 *   asr_test             enc_async_sr_test_request
 *   asr__svc_main        async_sr_service_thread_fn
 *   asr__connect_step    async_sr_progress_connect_comm
 *   asr__ofi_*           async_sr_ofi_*_locked
 */
#ifndef ASR_RT_H
#define ASR_RT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "asr.h"
#include "asr_loop.h"
#include "handle.h"
#include "kv_conn.h"
#include "kv_keys.h"
#include "obs/obs.h"
#include "ofi.h"
#include "rma/rma_types.h"
#include "sm/sm.h"

#define ASR_RING 128 /* handover ring, stash ring, request pool, freelist */
_Static_assert(ASR_RING == ASR_SM_SLOTS, "an sm end holds a slot for every request of its comm");

typedef enum { ASR_SEND_COMM = 0, ASR_RECV_COMM = 1 } asr_comm_type_t;

/* async_sr_request_status */
typedef enum {
  ASR_REQ_FREE = 0,
  ASR_REQ_STASHED = 1,
  ASR_REQ_OFI_POSTED = 2,
  ASR_REQ_ERROR = 3
} asr_req_status_t;
typedef enum {
  ASR_REQ_NOTYPE = 0,
  ASR_REQ_SEND = 1,
  ASR_REQ_RECV = 2,
  ASR_REQ_WRITE = 3, /* one-sided (rma/rma.h): on a SEND comm, with the pool's rma args */
  ASR_REQ_READ = 4,
  ASR_REQ_XFER = 5 /* a prepared list's post */
} asr_req_type_t;

/* A SEND comm's close drain (drain.c): OPEN until a close asks for it;
 * POSTING while stashed sends wait to be posted; WAIT_TAKEN once the FIN
 * went out, until the peer says it took them all; DONE at the ACK, the
 * peer's CLOSED, its exit, or the deadline. */
typedef enum {
  ASR_DRAIN_OPEN = 0,
  ASR_DRAIN_POSTING = 1,
  ASR_DRAIN_WAIT_TAKEN = 2,
  ASR_DRAIN_DONE = 3
} asr_drain_state_t;

/* A tensor's record; the application holds its handle (handle.h), which
 * live checks (tensor.c's slab recycles the record). */
struct asr_tensor {
  _Atomic uint64_t live;
  void *va;
  size_t size;
  int owned; /* asr_tensor_alloc made the memory */
};

/* The 56-byte request record of seed §1: {comm, tensor, offset, length, type,
 * status, ofi_req}. ofi_req is NULL unless libfabric owns an operation for it.
 * live, where the seed has padding, is its handle's live word (handle.h):
 * set by each post of it, checked by asr_test, retired with its comm. */
struct asr_request {
  struct asr_comm *comm;
  struct asr_tensor *tensor;
  size_t offset;
  size_t length;
  int32_t type;
  _Atomic int32_t status;
  _Atomic uint64_t live;
  asr__ofi_op_t *ofi_req;
};
_Static_assert(sizeof(struct asr_request) == 56, "the seed's request record is 56 bytes");

/* One registration in a comm's MR cache. Written once, before it is
 * published; never changed. Freed when the comm is freed or, beyond the
 * seed, when asr_forget drops the memory it covers (unlinked under the
 * context's mr.mutex and ep_lock, which every lookup holds). */
typedef struct asr_mr_entry {
  uintptr_t va;
  size_t len;
  struct fid_mr *mr;
  struct asr_mr_entry *next; /* the registration published before this one */
} asr_mr_entry_t;

struct asr_ctx;

#define ASR_PEER_INC_NONE (-1L) /* a comm made without a rank (asr_comm.peer_inc) */

#define ASR_REP_HIST 16 /* post counts a comm's sampler remembers (state_report.c) */

/* A comm's 128 requests and what goes with them (seed: the comm's
 * locked_stack<request*,128>, pop data[--top], push data[top++]; the
 * constructor builds it with the comm). Beyond the seed, for scale, it is
 * made on the comm's first post instead (asr__comm_pool) and kept until the
 * comm is freed: it is 22 KB, and a full mesh of 64 LNCs on one host holds
 * 8,064 comms, most of which may never carry a message; made with each comm,
 * their pages were faulted in while the mesh connected. Its freelist's lock
 * is the data-path lock of the comm's own endpoint (ofi->ep_lock, a spin
 * lock; one per endpoint, so comms of the other path never contend for it):
 * a post pops and posts under one hold of it, and a test that polls drains
 * the CQ and pushes the request it completed under one hold (request.c).
 * The stash ring's slots are here too: nothing is stashed before a post.
 * Freeing the comm recycles its pool through a slab (comm.c), never to
 * malloc: its requests' live words stay (handle.h). */
typedef struct asr_comm_pool {
  struct asr_request reqs[ASR_RING];
  asr__ofi_op_t ops[ASR_RING];
  struct asr_request *free_data[ASR_RING];
  int free_top;
  struct asr_request *stash[ASR_RING];
  uint64_t stash_ticket[ASR_RING]; /* the context's post order (asr__drain_stashes) */
  asr__rma_t rma[ASR_RING];        /* a write's, read's or list post's target (rma/rma_types.h) */
  asr__obs_req_t obs[ASR_RING];    /* its trace state, when tracing (obs/obs.h) */
  asr__hist_t xfer_hist;           /* its transfer latencies, with ASR_METRICS (obs/metrics.c) */
} asr_comm_pool_t;

struct asr_comm {
  /* the application's handle is live while this is (handle.h): first, in
   * the line every call reads; comm.c's slab recycles the record */
  _Atomic uint64_t live;
  struct asr_ctx *ctx;
  asr_comm_type_t type;
  int lnc, peer_lnc;
  char peer_ip[64];
  uint32_t ordinal;   /* n-th comm of this direction to (peer_ip, peer_lnc) */
  _Atomic int status; /* asr_comm_status_t */

  /* rendezvous (service thread only) */
  asr_kv_call_t *kv_req; /* on the context's pool (ctx->kv.pool) */
  uint8_t net_handle[ASR_KV_NET_HANDLE_LEN];
  uint8_t peer_hostname[ASR_KV_HOSTNAME_LEN];
  int handle_len, hostname_len;
  uint64_t retry_at_ms;
  uint64_t connect_deadline_ms;   /* NET_CONNECT (SEND): give up on ASR_EAGAIN after this */
  uint64_t connect_warn_ms;       /* NET_CONNECT (SEND): warn once about ASR_EAGAIN after this */
  uint64_t connect_timeout_ms;    /* NET_CONNECT (SEND): ASR_KV_TIMEOUT_MS when it began */
  int sched;                      /* the schedule list it is on (ASR_SCHED_*, connect_sched.c) */
  struct asr_comm *sprev, *snext; /* on ctx->sched.lists[sched] */
  struct asr_peerq *q;            /* its peer queue (from the handover on) */
  int kv_first_publish;           /* RECV: kv_req is its handle's first SET, not yet answered */
  unsigned wait_ms;               /* NET_CONNECT: the next re-check's delay (1, 2, 4, 8 ms) */
  unsigned kv_epoch;              /* RECV: asr__kv_host_epoch() when the handle was published */

  /* transport halves, on the comm's own endpoint: ofi is NULL until the
   * connect machine chose the comm's path (RECV: LISTEN, SEND: NET_CONNECT)
   * and written once, by the service thread, before the comm turns
   * CONNECTED; everything that uses it either runs on that thread or first
   * saw CONNECTED (a sequentially consistent load) */
  asr__ofi_t *_Atomic ofi;
  int ep;   /* its index in ctx->fab.eps, or -1 while ofi is NULL */
  int path; /* ASR_PATH_LOCAL, ASR_PATH_NET or ASR_PATH_SM once chosen, else 0 */
  /* asr's own same-host path (sm/sm.h) instead of an endpoint: set, like
   * ofi, once by the service thread before the comm turns CONNECTED (RECV:
   * LISTEN, SEND: NET_CONNECT); a comm has one of the two, never both */
  asr__sm_t *_Atomic sm;
  asr__ofi_send_t osend;
  asr__ofi_recv_t orecv;

  /* request pool and its locked freelist, and the stash ring's slots: made
   * on the comm's first post (asr__comm_pool), NULL until then */
  asr_comm_pool_t *_Atomic pool;

  /* stash ring (SPSC: producers serialised by stash_mutex, one consumer;
   * its slots are the pool's) */
  pthread_mutex_t stash_mutex;
  uint64_t drain_blocked; /* service thread: the drain pass in which its head had to wait */
  _Atomic uint64_t stash_head, stash_tail;

  /* MR cache keyed by va (per comm, so (va, comm) as in the seed). The
   * seed's list only grows until the comm is freed; ours also shrinks when
   * the application says memory is going away (asr_forget, asr_tensor_free
   * of an allocated tensor), so a program that sends from fresh memory each
   * time (Python's habit) keeps it bounded. Inserts (the service thread's
   * lazy registration) and removals serialise on the context's mr.mutex;
   * lookups (every post) walk it under ep_lock, which removals take too, so
   * no lookup ever stands on an entry being freed. */
  asr_mr_entry_t *_Atomic mrs;
  struct asr_comm *mr_next; /* in ctx->mr.comms once it has a registration (mr.mutex) */
  int mr_listed;            /* it is there (mr.mutex) */

  /* service-thread bookkeeping */
  struct asr_comm *next; /* in a pending queue or the connected list */
  _Atomic int waiters;   /* asr_comm_wait_connected calls sleeping on this comm (comm.c) */
  _Atomic int close_requested;
  _Atomic int detached; /* the service thread let go of it */
  int watch;            /* index in ctx->watch.peers of the peer process, or -1 (peer_watch.c) */
  char err[320];
  /* Its peer's death (peer_watch.c, rank_fail.c). died: it failed because
   * its peer died (service thread). born_deaths: asr__job_deaths() when it
   * was made; only a death recorded after that fails it (a comm made once
   * the death was known is for the rank's next incarnation). why: the
   * launcher's line on that death, once heard (set once, by the service
   * thread, with release; freed with the comm): asr_comm_error prefers it
   * to err, which a death seen first on this host wrote. */
  int died;
  unsigned born_deaths;
  char *_Atomic why;
  /* The incarnation of its peer rank it was made for (the rank's newest,
   * the next while it is RESTARTING), or -1 when made without a rank
   * (ASR_PEER_INC_NONE: plain asr_connect / asr_accept): what its handle says and takes
   * (handle_inc.h), and when its peer queue's ordinals start again
   * (context.c, pickup). Written before the handover, never after. */
  long peer_inc;

  /* one-sided transfers (rma/rma_types.h says who writes what) */
  asr__comm_rma_t rma;

  /* its trace identity (obs/obs.h) */
  asr__obs_comm_t obs;

  /* the close handshake (drain.c; service thread, but where said) */
  _Atomic int drain;          /* SEND: asr_drain_state_t (OPEN -> POSTING by the closer, under task.mutex) */
  uint64_t drain_deadline_ms; /* SEND: set with POSTING */
  uint64_t drain_sent;        /* SEND: the FIN's count */
  int peer_said;              /* SEND: 0, or ASR_CTL_ACK / ASR_CTL_CLOSED from the peer */
  uint64_t peer_taken;        /* SEND: the count that came with it */
  int fin;                    /* RECV: the sender's FIN came (fin_count holds its count) */
  uint64_t fin_count;
  int answered;    /* RECV: ACK or CLOSED went out */
  int peer_exited; /* RECV: peer_watch.c saw its sender exit; drain.c decides */
  int lingering;   /* RECV: its sender exited before all it announced was taken */
  uint64_t linger_taken, linger_until_ms;

  /* the state report (state_report.c). rep_posted / rep_done: requests
   * posted (fast path or stashed) and completed by asr_test; each written
   * only under ep_lock, by a relaxed store, and read by the report thread;
   * rep_bytes / rep_failed the same way: bytes moved by the completed ones,
   * and the requests asr_test failed (in flight = posted - done - failed).
   * state_since_ms: when status last changed (asr__comm_set_status).
   * peer_rank: asr_job_connect / asr_job_accept's rank, else -1.
   * The rest is the sampler's, under asr__rep_mutex. */
  _Atomic uint64_t rep_posted, rep_done, rep_bytes, rep_failed;
  _Atomic uint64_t state_since_ms;
  _Atomic int peer_rank;
  _Atomic uint32_t rep_ordinal; /* a copy of ordinal for the report thread (set at pickup) */
  struct asr_comm *rep_next, *rep_prev;
  int rep_listed;
  uint64_t rep_seen, rep_last_post_ms;
  struct {
    uint64_t count, ms; /* the post count first seen at ms */
  } rep_hist[ASR_REP_HIST];
  int rep_nhist;
};

/* Counts one post or completion of c (the caller holds ep_lock, so the
 * load and the relaxed store cannot lose a count): the data path's whole
 * cost of the state report. */
static inline void asr__rep_count(_Atomic uint64_t *n) {
  atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* Adds n to a counter of c's, as asr__rep_count does (ep_lock held). */
static inline void asr__rep_count_n(_Atomic uint64_t *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

/* A peer process on this node whose death fails its comms (peer_watch.c). */
typedef struct {
  struct asr_ctx *ctx;
  int index; /* in ctx->watch.peers, as comms name it (c->watch) */
  uint32_t pid;
  uint64_t start;            /* its start time: a reused pid is another process */
  asr_loop_pid_t exit_watch; /* its exit, on the service thread's loop */
  int dead;
} asr_watch_t;

/* A peer IP's "hostname" (connect.c): asked by one comm (owner) at a time,
 * then known. */
typedef struct {
  char ip[64];
  uint8_t name[ASR_KV_HOSTNAME_LEN];
  int known;
  struct asr_comm *owner; /* the comm asking, while !known; NULL when none */
} asr_peer_host_t;

/* FIFO of comms to one (peer_ip, peer_lnc) in one direction. Every queue
 * stays on its direction's list (ctx->conn.pending: next_ordinal must go on
 * counting for as long as the LNC is up); the queues with comms in them are
 * also on ctx->conn.active (anext), which the safety walk and the "hostname"
 * waiters' wake walk (a tick steps only the heads on READY,
 * connect_sched.c): an empty queue may stay there until the next safety
 * walk drops it, a queue with comms in it is always there. */
typedef struct asr_peerq {
  char peer_ip[64];
  int peer_lnc;
  uint32_t next_ordinal;
  long peer_inc; /* the peer rank's incarnation next_ordinal counts for (handle_inc.h) */
  struct asr_comm *head, *tail;
  struct asr_peerq *next;
  struct asr_peerq *anext; /* on ctx->conn.active while listed */
  int listed;
} asr_peerq_t;

/* The paths a comm can take (paths.c: asr__same_host says which),
 * as the handle names them (ofi.h, byte 124). */
#define ASR_PATH_LOCAL 1 /* the peer has this LNC's host identity, one provider forced: its endpoint */
#define ASR_PATH_NET 2   /* any other peer: the network provider */
#define ASR_PATH_SM 3    /* the peer has this LNC's host identity: asr's own path (sm/sm.h) */
#define ASR_NEPS 2       /* endpoints a context may open */

/* The schedule lists of connecting comms (connect_sched.c): each queue
 * head is on at most one (asr_comm.sched); BATCH holds this tick's READY
 * comms while they step. */
enum { ASR_SCHED_NONE = 0, ASR_SCHED_READY, ASR_SCHED_TIMED, ASR_SCHED_ACCEPT, ASR_SCHED_BATCH, ASR_SCHED_N };
typedef struct {
  struct asr_comm *head, *tail;
} asr_schedq_t;

/* One LNC's context (seed: async_sr_context). Its state is grouped by the
 * module that writes it, one sub-struct each; the comment on each says who
 * writes it, under which lock, and which threads read it. "asr_init" means
 * written before the service thread starts and the context is published
 * (asr__ctxs, a release store), so every thread may read it without a lock;
 * "service thread only" means no other thread touches it while that thread
 * runs (asr_close frees it after joining the thread). */
typedef struct asr_ctx {
  /* Who this context is (context.c, asr_init; read by every thread). */
  int lnc;
  int trace; /* svc trace logging was on at asr_init: spares asr_test a check per completion */
  char hostname[ASR_KV_HOSTNAME_LEN]; /* this LNC's host identity (paths.c: asr__same_host; its KV keys) */
  uint8_t who[ASR_OFI_WHO_LEN];       /* ours (peer_watch.c), copied into every endpoint */

  /* The service thread (context.c). thread and loop are made by asr_init;
   * the loop is the thread's (its KV sockets, its peers' exits, its
   * wakeups), and any thread wakes it through asr__ctx_wake. */
  struct {
    pthread_t thread;
    asr_loop_t *loop;
  } svc;

  /* The KV link (context.c, asr_init): the service thread's KV connections,
   * one per server (kv_conn.h), used by the connect machine (connect.c) on
   * that thread alone; and the bootstrap port every KV server listens on,
   * read by any thread (the state report names servers by it). */
  struct {
    asr_kv_pool_t *pool;
    uint16_t port;
  } kv;

  /* The fabric (paths.c). eps[0] serves the local path and eps[1] the
   * network path, or eps[0] every peer when one provider is forced
   * (one_ep). Each is opened by the first comm that needs it
   * (asr__ctx_endpoint; forced: at asr_init), on the service thread, under
   * ep_mutex; ep_open[i] is set, with release, once eps[i] is whole, and
   * cleared only by asr_close after the service thread stopped. Any thread
   * reads an open endpoint (a comm's ofi points into eps: the data path,
   * under that endpoint's own locks, ofi.c "locking"). ep_prov, one_ep and
   * paths_desc are set by asr_init (asr__paths_choose) and read by any
   * thread. */
  struct {
    asr__ofi_t eps[ASR_NEPS];
    _Atomic int ep_open[ASR_NEPS];
    char ep_prov[ASR_NEPS][64]; /* the provider each endpoint runs */
    int one_ep;                 /* ASR_PROVIDER / FI_PROVIDER forced one provider for all */
    char paths_desc[192];       /* "shm" or "sm on host h, tcp;ofi_rxm to other hosts" (logs, reports) */
    pthread_mutex_t ep_mutex;
    asr__sm_cfg_t sm; /* the sm path's settings (ASR_SM_*, read by asr_init) */
  } fab;

  /* The service thread's work (seed: task_mutex, task_n, the connect-task
   * ring), all under task.mutex. Producers on any thread (asr_connect /
   * asr_accept: comm.c; asr_comm_close: close.c; stashing posts:
   * request.c; asr_close: context.c) add to it and wake the thread; the
   * service thread (context.c) takes it. n counts the units of work
   * (comms connecting, requests stashed) and is never negative: the
   * thread sleeps while it is 0. detach_cv wakes the closers waiting for
   * the service thread to let go of a comm, and those waiting for a drain
   * (drain.c). */
  struct {
    pthread_mutex_t mutex;
    int n;
    int shutdown;                    /* asr_close: the thread stops */
    struct asr_comm *ring[ASR_RING]; /* handover ring of new comms */
    unsigned ring_head, ring_tail;
    struct asr_comm *closing[ASR_RING]; /* comms asr_comm_close wants detached */
    unsigned nclosing;
    int closers; /* asr_comm_close calls past their handover: asr_close waits for them */
    pthread_cond_t detach_cv;
  } task;

  /* The stash rings' bookkeeping over all comms (request.c). count and
   * tickets are raised by the posting threads (any thread) and count
   * lowered by the service thread's drain (or its detach of a closing
   * comm, context.c); drain_pass and queue_full are the service thread's
   * only (context.c clears queue_full at each tick's drain). */
  struct {
    _Atomic unsigned count;   /* requests stashed and not yet drained */
    _Atomic uint64_t tickets; /* numbers every stashed request, in post order */
    uint64_t drain_pass;      /* numbers asr__drain_stashes's passes */
    int queue_full;           /* a stash waits for room in the provider's queue */
  } stash;

  /* The connect scheduler (connect_sched.c): which queue heads step when.
   * Service thread only, but for missed (atomic), which the tests read.
   * connect.c also writes accept_wait_ms and accept_at_ms
   * (asr__connect_accept_soon) and reads accept_cq_rc. */
  struct {
    asr_schedq_t lists[ASR_SCHED_N];
    uint64_t timed_due_ms;               /* the earliest retry_at_ms on TIMED */
    uint64_t safety_at_ms;               /* the next walk of every head */
    _Atomic unsigned long missed;        /* heads only the safety walk scheduled */
    uint64_t accept_at_ms;               /* the next CQ read for accepting comms */
    unsigned accept_wait_ms;             /* its delay (1, 2, 4, 8 ms: asr__sched_accepts) */
    int accept_cq_rc[ASR_NEPS];          /* this tick's CQ read for accepts */
    unsigned long accept_seen[ASR_NEPS]; /* eps[i].completions at the last look */
    unsigned accept_epoch;               /* asr__kv_host_epoch() at the last look */
  } sched;

  /* The connecting comms (service thread only): the peer queues, which
   * context.c fills at pickup and empties as comms connect, fail or are
   * detached (connect_sched.c drops emptied queues from active); the
   * "hostname" of each peer IP, which connect.c asks and keeps; and
   * connect.c's polling window. */
  struct {
    asr_peerq_t *pending[2]; /* per direction, keyed by (peer_ip, peer_lnc) */
    asr_peerq_t *active[2];  /* the queues of pending[dir] that may hold comms (asr_peerq_t) */
    asr_peer_host_t *hosts;  /* "hostname" of every peer IP asked so far (connect.c) */
    int nhosts, caphosts;
    uint64_t yield_until_ms; /* connects poll, yielding, until then (connect.c) */
  } conn;

  /* The comms that left their peer queue (context.c: connected or failed),
   * under comms.mutex. connected is written by the service thread alone,
   * which therefore reads it without the lock (drain.c); errored also by a
   * closer (close.c). Other threads read them under the lock (asr_close's
   * drain, drain.c), or after the service thread stopped (asr_close). */
  struct {
    pthread_mutex_t mutex;
    struct asr_comm *connected;
    struct asr_comm *errored;
  } comms;

  /* Peer liveness (peer_watch.c; service thread only). self_node is set
   * by asr_init from who. Each entry of peers is allocated once: the loop
   * holds its exit watch; a comm names its entry by index (c->watch). */
  struct {
    uint64_t self_node; /* our node id, from who */
    asr_watch_t **peers;
    int n, cap, live;
  } watch;

  /* The launcher's reports of ranks that died (rank_fail.c; service
   * thread only): how many of asr__job_deaths() this context has failed
   * its comms for. asr_init starts it at the count then: no comm of the
   * context was made before. */
  struct {
    unsigned seen;
  } rank;

  /* asr_comm_wait_connected's sleepers (comm.c): a comm that reaches
   * CONNECTED or CONNECTION_ERROR wakes them when some wait on that comm. */
  struct {
    pthread_mutex_t mutex;
    pthread_cond_t cv; /* on the monotonic clock */
  } wait;

  /* The close handshake (drain.c). timeout_ms is set by asr_init
   * (ASR_DRAIN_TIMEOUT_MS); ndraining is written by the closers and the
   * service thread under task.mutex; the rest is the service thread's
   * (peer_watch.c raises peer_exits). */
  struct {
    long timeout_ms;
    int ndraining;        /* SEND comms in POSTING or WAIT_TAKEN */
    int nwatching;        /* RECV comms with a FIN to answer, or lingering */
    int peer_exits;       /* RECV comms marked peer_exited, not yet looked at */
    uint64_t ctl_poll_at; /* when the CQ is read next for the mailbox */
  } drain;

  /* The comms with registrations (their mr_next), for asr_forget (comm.c):
   * every change to a comm's MR list, and to this list, holds mr.mutex.
   * The service thread adds (lazy registration); asr_forget and a comm's
   * free remove. */
  struct {
    pthread_mutex_t mutex;
    struct asr_comm *comms;
  } mr;

  /* One-sided transfers (rma/rma.h). mems, nmems, next_key, the table and
   * its free slots are mem.c's, under fab.ep_mutex (an endpoint's open
   * registers the live ones); rings[i] maps the RECV comm ids of endpoint
   * i to their notification rings (notif.c), under that endpoint's
   * ep_lock, which every drain that reads a ring's remote CQ data holds. */
  struct {
    struct asr_mem *mems;
    _Atomic int nmems;
    uint64_t next_key;
    int tab_fd;
    _Atomic uint64_t *tab;
    /* each slot's region and access, for the sm path's small writes that
     * the owner applies itself (notif.c checks them): written before the
     * slot's key is published, read by a check that reads the key again */
    _Atomic uint64_t *slot_va, *slot_len;
    _Atomic unsigned *slot_access;
    uint32_t *free_slots;
    uint32_t nfree, next_slot;
    asr__nring_tab_t rings[ASR_NEPS];
    uint64_t *revq; /* keys revoked, for the service thread to tell the senders (ep_mutex) */
    unsigned nrevq, caprevq;
    _Atomic unsigned revq_n;
    /* revocations queued (mem.c, ep_mutex) and told (notif.c: every key
     * queued up to then went out), and the senders' confirmations owed:
     * asr_mem_deregister waits for them (bounded) */
    _Atomic unsigned long revq_gen, revq_told;
    _Atomic long acks_owed;
    _Atomic int ring_asks;               /* SEND comms that want their peer's ring asked for (notif.c) */
    unsigned long drains_seen[ASR_NEPS]; /* eps[i].drains at the service thread's last look (notif.c) */
  } rma;
} asr_ctx_t;

/* The endpoint of comm c (rt.h: its ofi), for the data path: c is
 * CONNECTED, so it is set (unless c is on the sm path). */
static inline asr__ofi_t *asr__comm_ofi(const struct asr_comm *c) {
  return atomic_load_explicit(&c->ofi, memory_order_relaxed);
}

/* c's end of the sm path, or NULL when c is on an endpoint (or its path
 * is not chosen yet). */
static inline asr__sm_t *asr__comm_sm(const struct asr_comm *c) {
  return atomic_load_explicit(&c->sm, memory_order_relaxed);
}

/* The data path's lock of a CONNECTED comm: its endpoint's ep_lock, or
 * its sm end's own lock (request.c holds it around a post, a poll and a
 * freelist push or pop, whichever path). */
static inline void asr__comm_lock(struct asr_comm *c) {
  asr__sm_t *s = asr__comm_sm(c);
  if (s)
    asr__sm_lock(s);
  else
    asr__ofi_lock(asr__comm_ofi(c));
}
static inline void asr__comm_unlock(struct asr_comm *c) {
  asr__sm_t *s = asr__comm_sm(c);
  if (s)
    asr__sm_unlock(s);
  else
    asr__ofi_unlock(asr__comm_ofi(c));
}
#ifndef NDEBUG
static inline int asr__comm_locked(const struct asr_comm *c) {
  const asr__sm_t *s = asr__comm_sm(c);
  return s ? asr__sm_locked(s) : asr__ofi_locked(asr__comm_ofi(c));
}
#endif

/* Whether a peer whose host is called name (its "hostname" key, 128 bytes
 * zero-padded) is on this LNC's host (paths.c says what that means). */
int asr__same_host(const asr_ctx_t *ctx, const uint8_t *name);

/* The endpoint for path (ASR_PATH_*), opened when it is not yet: 0 with
 * *ep its index in ctx->fab.eps, or an ASR_E* code with err saying why and
 * what to set (paths.c). Service thread, or asr_init before it starts. */
int asr__ctx_endpoint(asr_ctx_t *ctx, int path, int *ep, char *err, size_t errlen);

/* Chooses which provider serves which path at asr_init (paths.c): 0, or
 * ASR_ECONFIG with err for a bad ASR_PROVIDER. */
int asr__paths_choose(asr_ctx_t *ctx, char *err, size_t errlen);

/* Releases every endpoint of ctx that was opened (paths.c). */
void asr__ctx_endpoints_close(asr_ctx_t *ctx);

/* The endpoint index path goes to in ctx. */
static inline int asr__ctx_ep_index(const asr_ctx_t *ctx, int path) {
  return ctx->fab.one_ep || path != ASR_PATH_NET ? 0 : 1;
}

/* The contexts by LNC (context.c). A slot is published with a release store
 * once its context is fully built. */
extern asr_ctx_t *asr__ctxs[ASR_MAX_LNC];

/* The context of lnc, or NULL when it is not initialised. Every post looks
 * its context up: an acquire load, no lock. */
static inline asr_ctx_t *asr__ctx_get(int lnc) {
  if (lnc < 0 || lnc >= ASR_MAX_LNC) return NULL;
  return __atomic_load_n(&asr__ctxs[lnc], __ATOMIC_ACQUIRE);
}

/* Wakes the service thread after adding work (publish the work first: the
 * loop's wake protocol then guarantees the next tick sees it). */
static inline void asr__ctx_wake(asr_ctx_t *ctx) { asr_loop_wake(ctx->svc.loop); }

/* c is failing or going away: a "hostname" it was asking for is asked again
 * by the next comm that needs it (connect.c). */
void asr__peer_host_forget(asr_ctx_t *ctx, struct asr_comm *c);

/* The schedule lists (connect_sched.c; service thread only). put moves c
 * onto list `which` (off the one it was on); unlink takes it off. */
void asr__sched_put(asr_ctx_t *ctx, struct asr_comm *c, int which);
void asr__sched_unlink(asr_ctx_t *ctx, struct asr_comm *c);
/* c stepped and is still connecting: onto the list its wait says. */
void asr__sched_after_step(asr_ctx_t *ctx, struct asr_comm *c, uint64_t now);
/* TIMED heads whose timer passed onto READY. */
void asr__sched_timers(asr_ctx_t *ctx, uint64_t now);
/* The CQ read for accepting comms, when due; those it (or another thread's
 * read) brought a connect message, or failed, onto READY. */
void asr__sched_accepts(asr_ctx_t *ctx, uint64_t now);
/* Every SAFETY_MS: a head on no list that can move onto READY (counted). */
void asr__sched_safety(asr_ctx_t *ctx, uint64_t now);
/* How long an idle tick may sleep for the lists' sake (ms, >= 0). */
int asr__sched_timeout(const asr_ctx_t *ctx, uint64_t now);

/* A RECV comm starts to wait for its connect message: the context reads
 * its CQ for accepts within a millisecond (connect.c; the read is
 * connect_sched.c's asr__sched_accepts). */
void asr__connect_accept_soon(asr_ctx_t *ctx);

/* Service thread entry (context.c). */
void *asr__svc_main(void *arg);

/* c (its queue's head) connected or failed (st): it leaves its peer queue
 * for the connected or the error list (connect_sched.c). asr__connect_done
 * is the connect machine's last step: the list, then CONNECTED, in that
 * order (asr__sched_leave_queue says why). Service thread. */
void asr__sched_leave_queue(asr_ctx_t *ctx, struct asr_comm *c, int st);
void asr__connect_done(asr_ctx_t *ctx, struct asr_comm *c);

/* One step of the connect machine (connect.c). Returns 1 when it made progress. */
int asr__connect_step(asr_ctx_t *ctx, struct asr_comm *c);
/* Whether the connect machine's provider waits poll now (yielding the CPU
 * between ticks) rather than sleep on their timers (connect.c:
 * CONNECT_YIELD_MS sets yield_until_ms). */
static inline int asr__connect_yielding(const asr_ctx_t *ctx, uint64_t now) {
  return now < ctx->conn.yield_until_ms;
}

/* Post drain of the stashed requests of one direction, in post order
 * (request.c). Returns 1 when it posted. */
int asr__drain_stashes(asr_ctx_t *ctx, asr_comm_type_t type);

/* Comm life cycle (comm.c). asr__comm_new takes a record from the comms'
 * slab (handle.h), its handle not live yet; asr__comm_free recycles it. */
struct asr_comm *asr__comm_new(asr_ctx_t *ctx, asr_comm_type_t type, const char *peer_ip, int peer_lnc);
/* asr_connect (ASR_SEND_COMM) or asr_accept (ASR_RECV_COMM) of a comm made
 * for rank (its peer_rank and peer_inc set before the service thread sees
 * it; -1: no rank, as asr_connect / asr_accept make): asr_job_connect and
 * asr_job_accept's (job_connect.c). Returns what they return. */
int asr__comm_queue(int lnc, const char *peer_ip, int peer_lnc, asr_comm_type_t type, int rank,
                    asr_comm_t **out);
void asr__comm_free(struct asr_comm *c, int endpoint_closed);
/* c's handle and its requests' name nothing from now on (handle.h): the
 * last step of asr_comm_close, and of asr_close for each comm it frees.
 * Later calls change nothing; the caller owns c, which stays until freed
 * (asr__comm_free retires it first). */
void asr__comm_retire(struct asr_comm *c);
/* The record of a live handle, or NULL for NULL or a handle that is not
 * live (closed, freed, of another kind): the check at every call that
 * takes one (handle.h). The callers log with the *_bad functions. */
static inline struct asr_comm *asr__comm_of(const asr_comm_t *h) {
  return asr__handle_rec(h, ASR_HK_COMM, offsetof(struct asr_comm, live));
}
static inline struct asr_request *asr__req_of(const asr_request_t *h) {
  return asr__handle_rec(h, ASR_HK_REQUEST, offsetof(struct asr_request, live));
}
static inline struct asr_tensor *asr__tensor_of(const asr_tensor_t *h) {
  return asr__handle_rec(h, ASR_HK_TENSOR, offsetof(struct asr_tensor, live));
}
static inline int asr__comm_live(const asr_comm_t *h) {
  return asr__handle_live(h, ASR_HK_COMM, offsetof(struct asr_comm, live));
}
static inline int asr__req_live(const asr_request_t *h) {
  return asr__handle_live(h, ASR_HK_REQUEST, offsetof(struct asr_request, live));
}
static inline int asr__tensor_live(const asr_tensor_t *h) {
  return asr__handle_live(h, ASR_HK_TENSOR, offsetof(struct asr_tensor, live));
}
static inline void asr__comm_bad(const char *fn, const asr_comm_t *h) {
  asr__handle_bad(fn, h, ASR_HK_COMM, offsetof(struct asr_comm, live));
}
static inline void asr__req_bad(const char *fn, const asr_request_t *h) {
  asr__handle_bad(fn, h, ASR_HK_REQUEST, offsetof(struct asr_request, live));
}
static inline void asr__tensor_bad(const char *fn, const asr_tensor_t *h) {
  asr__handle_bad(fn, h, ASR_HK_TENSOR, offsetof(struct asr_tensor, live));
}
/* c's pool, made by the first caller that needs one (any thread: the one
 * that installs it wins, the others recycle theirs); NULL when out of memory. */
asr_comm_pool_t *asr__comm_pool(struct asr_comm *c);
/* c's pool, or NULL while nothing was ever posted on c (so no request of c
 * exists, and no operation of its pool was ever libfabric's). */
static inline asr_comm_pool_t *asr__comm_pool_of(struct asr_comm *c) {
  return atomic_load_explicit(&c->pool, memory_order_acquire);
}
void asr__comm_set_status(struct asr_comm *c, int status);
/* Wakes the threads in asr_comm_wait_connected on c, whose close was
 * requested (close_requested set before: each then leaves with an error),
 * and waits until the last has left, so that c can be freed (close.c). */
void asr__comm_release_waiters(struct asr_comm *c);
int asr__mr_get_or_register(struct asr_comm *c, struct asr_tensor *t, struct fid_mr **mr);
void asr__req_recycle(struct asr_request *r);
/* A poll that found nothing / something (request.c): every IDLE_YIELD
 * polls in a row that found nothing, the thread yields the processor, so
 * that a program spinning on asr_test or asr_notif_poll lets its service
 * thread (which may hold a lock its peer waits for) run. */
extern __thread unsigned asr__idle_polls;
void asr__poll_yield(void) __attribute__((cold));
#define ASR_IDLE_YIELD 4096u
static inline void asr__poll_idle(void) {
  if (__builtin_expect(++asr__idle_polls % ASR_IDLE_YIELD == 0, 0)) asr__poll_yield();
}
static inline void asr__poll_found(void) { asr__idle_polls = 0; }
/* Posts a one-sided request (rma/rma.h) of type ASR_REQ_WRITE, _READ or
 * _XFER on SEND comm comm, through the seed's post (request.c: its checks,
 * the 128-request bound, the fast/slow gate and the stash), with rma its
 * target; tensor [offset, offset + length) is the local side (NULL for a
 * list). fn names the call in messages. Returns what asr_isend returns. */
int asr__post_rma(asr_comm_t *comm, asr_tensor_t *tensor, size_t offset, size_t length, int type,
                  const asr__rma_t *rma, const char *fn, asr_request_t **req);

/* Drops every registration of ctx's comms that lies within [va, va + len)
 * (asr_forget, context.c, which holds the LNC's init mutex). */
void asr__mr_forget(asr_ctx_t *ctx, uintptr_t va, size_t len);

/* Finds a registration of c covering [va, va + need) (seed: mhandle_cache.find
 * under mhandle_cache_mutex, on every post). The caller holds ep_lock: that
 * is the lock asr_forget's removals take before they free an entry, and a
 * post holds it anyway (its freelist pop and fast-path post), so the lookup
 * costs the fast path no lock of its own. */
static inline int asr__mr_lookup(struct asr_comm *c, void *va, size_t need, struct fid_mr **mr) {
  assert(asr__ofi_locked(asr__comm_ofi(c)));
  for (const asr_mr_entry_t *e = atomic_load_explicit(&c->mrs, memory_order_acquire); e; e = e->next)
    if (e->va == (uintptr_t)va && e->len >= need) {
      *mr = e->mr;
      return 1;
    }
  return 0;
}

/* Peer liveness (peer_watch.c). asr__watch_self fills our 20-byte "who";
 * asr__watch_comm starts watching the process a newly connected comm talks
 * to (c->watch = -1 when it is not on this node; its exit fails that comm
 * and the others to it, from the service thread's loop) and returns 1 when
 * that process is gone already. */
void asr__watch_self(uint8_t who[ASR_OFI_WHO_LEN]);
int asr__watch_comm(asr_ctx_t *ctx, struct asr_comm *c, const uint8_t who[ASR_OFI_WHO_LEN]);
void asr__watch_free(asr_ctx_t *ctx);

/* The close handshake (drain.c). asr__drain_tick is the service thread's
 * part of each tick (mailbox, FINs, ACKs, lingering comms; returns 1 when
 * it moved something, and lowers *tmo to when it needs the next tick);
 * asr__drain_comm and asr__drain_lnc are the closers' bounded waits before
 * asr_comm_close of a SEND comm and asr_close; asr__drain_closed tells the
 * sender of RECV comm c that it closed (from the closer, the service thread
 * having let go of c, or stopped; retrying a busy provider until until_ms);
 * asr__drain_detached un-counts a comm the service thread lets go of. */
void asr__drain_on_ctl(void *ctx);
int asr__drain_tick(asr_ctx_t *ctx, int *tmo);
void asr__drain_comm(asr_ctx_t *ctx, struct asr_comm *c);
void asr__drain_lnc(asr_ctx_t *ctx);
void asr__drain_closed(asr_ctx_t *ctx, struct asr_comm *c, uint64_t until_ms);
void asr__drain_detached(asr_ctx_t *ctx, struct asr_comm *c);
/* Fails connected comm c, whose peer process pid exited (peer_watch.c),
 * or whose peer rank died (rank_fail.c, which set c->why: err says that
 * then, pid is not used): CONNECTION_ERROR with c->err, its posted
 * receives cancelled. Service thread, comms.mutex held. */
void asr__watch_fail_comm(asr_ctx_t *ctx, struct asr_comm *c, uint32_t pid);

/* Ranks the launcher reports dead (rank_fail.c; job_ranks.c in bootstrap
 * keeps the reports). asr__rank_fail_init (asr_init) hands bootstrap the
 * hook that wakes every service thread at a death. asr__rank_fail_tick, at
 * each tick of the service thread, fails every comm of ctx to a rank that
 * died since the last tick: connected ones as a dead peer process's are
 * (asr__watch_fail_comm, its RECV comms through the close handshake's
 * look), those still connecting at once. asr__rank_doomed, at a comm's
 * pickup, fails c (err written; the caller moves it to the error list) if
 * a death ctx has already handled was its peer's: returns 1 then. */
void asr__rank_fail_init(asr_ctx_t *ctx);
void asr__rank_fail_tick(asr_ctx_t *ctx);
int asr__rank_doomed(asr_ctx_t *ctx, struct asr_comm *c);

/* The shm region of each open LNC, unlinked at exit for those never closed
 * (shm_names.c): kept by asr_init, dropped by asr_close. */
void asr__shm_name_keep(int lnc, const asr__ofi_t *o);
void asr__shm_name_drop(int lnc);

/* Host KV participation (kv_host.c): makes sure a KV server runs for this
 * host and port (electing one when ASR_KV_SERVER=auto) and seeds "hostname". */
int asr__kv_host_join(uint16_t port, const char *hostname, char *errbuf, size_t errlen);
void asr__kv_host_leave(void);
/* Moves each time this process sees its host's KV server change (kv_host.c). */
unsigned asr__kv_host_epoch(void);
/* The address of this host's KV server for this process's own requests:
 * 127.0.0.1, or ASR_KV_BIND when that names one address (kv_host.c). */
const char *asr__kv_host_ip(void);

/* The state report's registry (state_registry.c): a comm is listed from
 * its handover to its free; asr__rep_mutex also guards a context's
 * unpublishing in asr_close. asr__state_report_init registers the tables
 * with bootstrap's report thread and starts it (asr_init). */
extern pthread_mutex_t asr__rep_mutex;
extern struct asr_comm *asr__rep_comms; /* under asr__rep_mutex (state_registry.c) */
/* With metrics on: the counts of the comms that left the list, per key,
 * and their latency histograms per LNC and direction (asr__rep_mutex). */
typedef struct {
  int lnc, dir, peer_rank, peer_lnc; /* dir: 0 SEND, 1 RECV */
  uint64_t done, bytes, failed;
} asr__rep_retired_t;
extern asr__rep_retired_t *asr__rep_retired;
extern int asr__rep_nretired;
extern asr__hist_t asr__rep_retired_xfer[ASR_MAX_LNC][2];
void asr__rep_add(struct asr_comm *c);
void asr__rep_remove(struct asr_comm *c);
void asr__state_report_init(void);

#endif /* ASR_RT_H */
