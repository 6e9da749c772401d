/*
 * asr.h -- the public API of libasr: asynchronous point-to-point tensor
 * transfers between LNCs (logical cores 0..127 per host).
 *
 * Model (seed §1-§5). asr_init(lnc) brings up one context per LNC with one
 * service thread. asr_connect() / asr_accept() return at once with a SEND /
 * RECV comm queued for that thread, which drives the rendezvous (through the
 * host KV servers on the bootstrap port) and the libfabric connection. Once a
 * comm is CONNECTED, asr_isend() / asr_irecv() post a slice of a tensor and
 * return a request; asr_test() polls it. The n-th send on a comm matches the
 * n-th receive on its peer comm; posts on one comm complete in post order.
 *
 * Return values: the seed's status codes (asr_status_t) -- 0 success,
 * 1 invalid argument or post failure, 3 unconnected comm or bad request,
 * 4 all 128 requests of the comm in flight -- plus three of ours: 5 timeout
 * (asr_comm_wait_connected), 6 connection error and 7 a peer rank failed
 * (asr_job_barrier, asr_job_connect). asr_strerror() gives a message for
 * each. Functions write their out-parameters only on success.
 *
 * Environment. A program started by asrrun (or by srun --mpi=pmix, with
 * asr_job_init) needs to set nothing. Without a launcher, asr_init needs
 * ASR_BOOTSTRAP_PORT (or the seed's NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT),
 * the same port on every host of the job. Each comm takes a path by its
 * peer: asr's own path ("sm": rings in shared memory, large messages
 * copied once) to a peer with this host's identity (ASR_HOSTNAME),
 * tcp;ofi_rxm to any other, its endpoint opened by its first comm
 * (asr_comm_provider says which a comm took); ASR_PROVIDER (else
 * FI_PROVIDER) forces one libfabric provider for every peer ("shm" is
 * libfabric's own shared-memory provider). ASR_SM_* tune the sm path. ASR_IF_ADDR is the address peers reach
 * this process at over the network (default 127.0.0.1). A bad value of any variable libasr reads makes
 * asr_init and asr_job_init fail with a message that names it. `asrrun --list-env`, and README.md's table
 * "Environment variables", list every variable with its type and default.
 */
#ifndef ASR_H
#define ASR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ASR_API __attribute__((visibility("default")))
#else
#define ASR_API
#endif

#define ASR_MAX_LNC 128      /* LNCs are 0..127 */
#define ASR_MAX_REQUESTS 128 /* outstanding requests per comm */

typedef enum {
  ASR_SUCCESS = 0,     /* done, or still in flight when polled */
  ASR_INVALID = 1,     /* invalid argument, transfer out of bounds, or post failure */
  ASR_UNCONNECTED = 3, /* comm not connected, or request not in use */
  ASR_QUEUE_FULL = 4,  /* "Maximum number of pending requests 128 reached" */
  ASR_TIMEOUT = 5,     /* beyond the seed: a wait ran out of time */
  ASR_CONN_ERROR = 6,  /* beyond the seed: the comm is in CONNECTION_ERROR */
  ASR_PEER_FAILED = 7, /* beyond the seed: a rank of the job failed (asr_job_barrier, asr_job_connect) */
} asr_status_t;

/* The eight connect states of seed §3 (async_sr_comm_status). */
typedef enum {
  ASR_COMM_START_INIT = 0,
  ASR_COMM_WAIT_FOR_HOSTNAME = 1,
  ASR_COMM_WAIT_FOR_NET_HANDLE_GET = 2,
  ASR_COMM_WAIT_FOR_NET_HANDLE_SET = 3,
  ASR_COMM_NET_CONNECT = 4,
  ASR_COMM_LISTEN = 5,
  ASR_COMM_CONNECTED = 6,
  ASR_COMM_CONNECTION_ERROR = 7,
} asr_comm_status_t;

/* Handles. Comms, requests and tensors are named by opaque handles, not
 * by pointers the application may read through. Every call checks the
 * handle it is given: one on a comm that was closed (asr_comm_close, or
 * asr_close of its LNC), on a request of such a comm, or on a tensor that
 * was freed fails with a message that names the call (ASR_INVALID;
 * asr_test: ASR_UNCONNECTED), and reads nothing the close or free let go
 * of. A handle closed on one thread while another thread is inside a call
 * on it is still the application's error. */
typedef struct asr_tensor_handle asr_tensor_t;
typedef struct asr_comm_handle asr_comm_t;
typedef struct asr_request_handle asr_request_t;

/* A message for any asr status code (positive) or internal ASR_E* (negative). */
ASR_API const char *asr_strerror(int status);

/* "CONNECTED", "WAIT_FOR_HOSTNAME", ... for an asr_comm_status_t. */
ASR_API const char *asr_comm_status_name(int status);

/* Brings up LNC lnc (0..127): endpoint, KV participation and the service
 * thread, under the LNC's init mutex. Initialising an LNC that is up is
 * invalid. Returns ASR_SUCCESS or ASR_INVALID (the log says why: no bootstrap
 * port, no provider, ...). */
ASR_API int asr_init(int lnc);

/* Shuts LNC lnc down. First every SEND comm still open is drained as
 * asr_comm_close drains one (all at once, against one deadline), so that
 * when asr_close returns every send that completed on the LNC has been
 * taken by its peer, or the peer closed its comm or exited, or
 * ASR_DRAIN_TIMEOUT_MS passed (a warning names the peer and what it had
 * not confirmed). Then it stops and joins the service thread, moves comms
 * still connecting to the error list, tells the senders of its RECV comms
 * that nothing more is taken here, and closes every comm (cancelling posted
 * and stashed requests) and the endpoint. */
ASR_API int asr_close(int lnc);

/* Allocates a host-memory tensor of size bytes (page aligned, zeroed). */
ASR_API int asr_tensor_alloc(size_t size, asr_tensor_t **out);

/* Wraps user memory [va, va + size) without copying; the caller keeps it
 * valid until asr_tensor_free() and until every comm that used it is
 * closed, or until asr_forget() of it returned. */
ASR_API int asr_tensor_wrap(void *va, size_t size, asr_tensor_t **out);

/* Frees the tensor (and its memory when asr_tensor_alloc made it: then its
 * registrations are dropped first, as asr_forget does). No request on it
 * may be stashed or in flight. NULL is ignored; a tensor freed already is
 * left alone, with a message. */
ASR_API void asr_tensor_free(asr_tensor_t *t);

/* Says that memory [va, va + len) is going away: every comm of every LNC
 * drops the registrations it holds that lie within it (a comm registers a
 * tensor's memory at its first post on it and, in the seed, keeps that until
 * the comm is closed). Call it before freeing memory that asr_tensor_wrap
 * wrapped, so that a program that sends from fresh memory each time (a new
 * array per message) keeps every comm's cache, and its memory, bounded,
 * and so that memory malloc hands out again at that address is never taken
 * for the old registration. No request on that memory may be stashed or in
 * flight; a later post on it registers it again. It may run while other
 * threads post and test (on other memory); while asr_close of an LNC runs
 * on another thread it waits for that close. Returns ASR_SUCCESS, or ASR_INVALID for NULL or len 0. */
ASR_API int asr_forget(void *va, size_t len);

/* The tensor's size in bytes / virtual address (0 / NULL for NULL, and,
 * with a message, for a tensor freed already). */
ASR_API size_t asr_tensor_size(const asr_tensor_t *t);
ASR_API void *asr_tensor_va(const asr_tensor_t *t);

/* Creates a SEND comm from lnc to (peer_ip, peer_lnc), where peer_ip is the
 * address of the peer host (its KV server listens there on the bootstrap
 * port). Returns at once; the service thread connects it. */
ASR_API int asr_connect(int lnc, const char *peer_ip, int peer_lnc, asr_comm_t **send_comm);

/* Creates a RECV comm on lnc for data from (peer_ip, peer_lnc). Returns at once. */
ASR_API int asr_accept(int lnc, const char *peer_ip, int peer_lnc, asr_comm_t **recv_comm);

/* Reads the comm's connect state (asr_comm_status_t) into *status. A
 * connected comm turns CONNECTION_ERROR when the peer process on this
 * machine exits (the service thread watches it), or when the launcher says
 * the peer's rank died (a job that outlives a failure: asrrun --on-failure
 * continue|restart; under the default the launcher ends the job instead):
 * posts then return ASR_UNCONNECTED and requests still in flight fail at
 * their next asr_test. A comm still connecting to a rank that died fails
 * too. A RECV comm whose sender
 * closed it (announcing how many it sent) and then exited turns
 * CONNECTION_ERROR only once all of those were taken (see asr_isend). */
ASR_API int asr_comm_status(const asr_comm_t *comm, int *status);

/* What carries the comm's data: "sm", asr's own same-host path, when its
 * peer is on this host (the same host identity: ASR_HOSTNAME, which asrrun
 * sets to the host's name), "tcp;ofi_rxm" when it is on another, or the
 * one libfabric provider ASR_PROVIDER (else FI_PROVIDER) forces for every
 * peer ("shm" then names libfabric's). Set once
 * the comm's path is chosen (a RECV comm: once it learnt its peer's host;
 * a SEND comm: once it read its peer's handle), so always by the time the
 * comm is CONNECTED; NULL before that, and for NULL. The string lives as
 * long as the comm's LNC. ASR_LOG_LEVEL=info logs the same, one line per
 * comm, when it connects. */
ASR_API const char *asr_comm_provider(const asr_comm_t *comm);

/* Why the comm is CONNECTION_ERROR, in one line ("the peer process 4711
 * (127.0.0.1, lnc 1) exited", "the peer (...) closed its RECV comm ...",
 * a rendezvous that failed); once the launcher has said that the peer's
 * rank died, its line instead ("peer rank 3 on host h died: killed by
 * signal 9"), which may replace a death seen first on this host. NULL
 * while it is not CONNECTION_ERROR, and for NULL. Each string it returns
 * lives as long as the comm. */
ASR_API const char *asr_comm_error(const asr_comm_t *comm);

/* Waits until the comm is CONNECTED (ASR_SUCCESS), fails (ASR_CONN_ERROR) or
 * timeout_ms passes (ASR_TIMEOUT; < 0 waits forever). */
ASR_API int asr_comm_wait_connected(asr_comm_t *comm, int timeout_ms);

/* Posts a send (SEND comm) / receive (RECV comm) of [offset, offset + length)
 * of tensor. On ASR_SUCCESS *req is the request to poll with asr_test(). A
 * completed send means its bytes may be overwritten, not that the peer has
 * them: a send small enough to be injected (ASR_INJECT_MAX above) completes
 * at its first asr_test, its data already copied. What a completed send
 * does guarantee: its peer can still receive it after the sender closed the
 * comm, closed the LNC, finalized and exited -- those wait (bounded by
 * ASR_DRAIN_TIMEOUT_MS, default 10 s) until the peer has taken every send,
 * and a receiving comm whose sender exited stays CONNECTED until it has
 * taken all its sender announced at close (or no receive of it completed
 * for ASR_DRAIN_TIMEOUT_MS: then it fails, saying how many were lost). A post that finds the
 * provider's queue full (shm holds 1024 posted receives per LNC, all comms
 * together) still succeeds: the request waits, stashed, and the LNC's
 * service thread posts the waiting requests in the order they were made
 * (a request that must wait holds back only the later ones of its comm).
 * With shm those 1024 entries also hold the messages that arrived before
 * their receive was posted; once they are all taken, every later message to
 * the LNC waits, from any peer, connection setups included (the connecting
 * side warns after 5 s): post receives for what an LNC is sent rather than
 * let a peer run more than about a thousand messages ahead of them. */
ASR_API int asr_isend(asr_comm_t *comm, asr_tensor_t *tensor, size_t offset, size_t length,
                      asr_request_t **req);
ASR_API int asr_irecv(asr_comm_t *comm, asr_tensor_t *tensor, size_t offset, size_t length,
                      asr_request_t **req);

/* Polls a request. ASR_SUCCESS with *done = 0 while stashed or in flight;
 * with *done = 1 (and *size = bytes moved) when complete, after which the
 * request is recycled and must not be used again. ASR_INVALID when it failed
 * (also recycled), including when the peer process exited before it
 * completed; ASR_UNCONNECTED for NULL or a request not in use: one already
 * reported (complete or failed), whose comm was closed, or that is not a
 * request. A post never returns the handle of an earlier request, so an
 * old handle never names a later transfer. */
ASR_API int asr_test(asr_request_t *req, int *done, size_t *size);

/* The read-after-receive fence of a RECV comm (seed: enc_async_sr_flush):
 * returns once data of every completed receive is visible to the host. */
ASR_API int asr_flush(asr_comm_t *comm);

/* Closes a comm. A SEND comm first waits until the peer has taken every
 * send posted on it (its stashed sends are posted first), the peer closed
 * its comm or exited, or ASR_DRAIN_TIMEOUT_MS passed (0: no wait; a warning
 * names the peer when the bound passes); a comm that posted nothing does
 * not wait. A RECV comm tells its sender it takes nothing more, so that the
 * sender's close does not wait for it. Then close cancels what is still
 * posted or stashed, deregisters the memory regions and frees the comm.
 * Requests of the comm become invalid. */
ASR_API int asr_comm_close(asr_comm_t *comm);

/* --- One-sided transfers ---------------------------------------------------
 *
 * A process registers memory on an LNC and exports a descriptor of it; a
 * peer that imports the descriptor on its SEND comm to that LNC writes into
 * the memory or reads from it without the owner posting anything. A write
 * may carry a 64-bit notification, which the owner takes from its RECV comm
 * from that peer (asr_notif_poll) after the write's data has landed.
 *
 * Model. Writes, reads and prepared lists are requests of the SEND comm, as
 * sends are: they complete through asr_test, in post order with the comm's
 * sends, and count against its 128 requests; closing the comm fails those
 * still stashed (its close drains sends, not writes). A completed write's
 * source may be reused (as a completed send's may); its data is in the
 * owner's memory once the owner took its notification (or that of a later
 * write of the comm), and a read posted after it on the same comm sees it
 * (on the sm path a completed write's data is there already). A completed
 * read's data is in dst. Notifications of one comm come
 * in the order their writes were posted, each after its write's data (and
 * the data of every earlier write of the comm). A RECV comm holds up to
 * ASR_NOTIF_DEPTH notifications not yet polled; beyond that, notifying
 * writes wait at the initiator, stashed, until the owner polls (none is
 * dropped). The owner's service thread moves incoming writes and reads
 * while the application makes no asr call.
 *
 * Safety. A descriptor names its owner (the process and LNC), grants
 * exactly its region and the access it was registered with, and carries a
 * tag made with the job's secret (ASR_JOB_SECRET): asr_mem_import refuses
 * one from another job, one forged or damaged, and one for another owner
 * than the comm's peer; a post refuses (ASR_INVALID, nothing sent, the comm
 * stays CONNECTED) an access outside the region or one it does not grant.
 * asr_mem_deregister revokes at once: a later access fails at the initiator
 * and never touches the memory; imports held elsewhere do not delay it. A
 * peer on this host checks the owner's table of live registrations before
 * each post (the refusal is ASR_INVALID at the post, the comm stays
 * CONNECTED). Peers on libfabric endpoints are told as well, and
 * asr_mem_deregister returns once each confirmed that its comm refuses the
 * key (bounded by ASR_DRAIN_TIMEOUT_MS, with a warning): a peer on another
 * host then refuses at the post too. Behind that, the owner's provider
 * refuses the closed key (an access that reaches it fails, and tcp;ofi_rxm
 * then drops the connection).
 *
 * Paths. On libfabric's shm and tcp;ofi_rxm a write is fi_write (with its
 * notification fi_writedata whose remote CQ data holds a value below 2^48,
 * or fi_writemsg that also writes a larger one into the owner's ring; on
 * shm, one of at most its inject size is injected, as a send is), a read
 * fi_read; on asr's
 * own same-host path ("sm") a write of at most ASR_SM_INLINE_MAX bytes goes
 * through the comm's shared region, with its notification, and the owner
 * copies it into place (its asr_notif_poll, or its service thread), while
 * a larger write and a read are one copy straight between the two
 * processes' memories by the initiator. */

#define ASR_MEM_REMOTE_READ 0x1u  /* peers may read the memory (asr_read) */
#define ASR_MEM_REMOTE_WRITE 0x2u /* peers may write it (asr_write) */
#define ASR_MEM_DESC_MAX 128      /* the most bytes asr_mem_export writes */
#define ASR_WRITE_NOTIFY 0x1u     /* asr_write's flags: deliver notif to the owner after the data */
#define ASR_XFER_WRITE 1          /* asr_xfer_prep's op */
#define ASR_XFER_READ 2
#define ASR_NOTIF_DEPTH 256 /* notifications a RECV comm holds before notifying writes wait */

typedef struct asr_mem_handle asr_mem_t;   /* a registration (owner side) */
typedef struct asr_rmem_handle asr_rmem_t; /* an imported descriptor (initiator side) */
typedef struct asr_xfer_handle asr_xfer_t; /* a prepared list */

/* One local piece of a prepared list: [off, off + len) of tensor. */
typedef struct {
  asr_tensor_t *tensor;
  size_t off;
  size_t len;
} asr_iov_t;

/* One remote piece: the same length at off of an imported region. */
typedef struct {
  asr_rmem_t *rmem;
  size_t off;
} asr_riov_t;

/* Registers [va, va + len) of this process for one-sided access by peers
 * of LNC lnc (which must be initialised), with access a non-empty mix of
 * ASR_MEM_REMOTE_READ and ASR_MEM_REMOTE_WRITE. The memory must stay valid
 * until asr_mem_deregister returns. */
ASR_API int asr_mem_register(int lnc, void *va, size_t len, unsigned access, asr_mem_t **mem);

/* Revokes and frees a registration: once it returns, no later access by any
 * peer reaches the memory (a later write or read fails at its initiator).
 * Accesses in flight when it is called may still complete. NULL is
 * ignored. */
ASR_API int asr_mem_deregister(asr_mem_t *mem);

/* Writes the registration's descriptor into desc: *len is desc's capacity
 * in (at least the descriptor's length, at most ASR_MEM_DESC_MAX suffices)
 * and the descriptor's length out. The descriptor is plain bytes, versioned,
 * to be handed to a peer any way (a send, the job's KV, a file). */
ASR_API int asr_mem_export(const asr_mem_t *mem, void *desc, size_t *len);

/* Imports a descriptor for writes and reads on SEND comm comm, whose peer
 * must be the descriptor's owner. ASR_INVALID, with a message saying why,
 * for a descriptor that is damaged, forged, of another job or another
 * owner. */
ASR_API int asr_mem_import(asr_comm_t *comm, const void *desc, size_t len, asr_rmem_t **rmem);

/* Frees an import (never the owner's registration). NULL is ignored. The
 * requests posted with it must have completed, or failed (a close of the
 * comm fails them): closing the comm or its LNC leaves its imports and
 * prepared lists to the application to free. */
ASR_API void asr_rmem_free(asr_rmem_t *rmem);

/* Writes [off, off + len) of src to [dst_off, dst_off + len) of dst, on SEND
 * comm comm (dst imported on it). flags: 0 or ASR_WRITE_NOTIFY, which
 * delivers notif to the owner's RECV comm from this peer after the data. */
ASR_API int asr_write(asr_comm_t *comm, asr_tensor_t *src, size_t off, size_t len, asr_rmem_t *dst,
                      size_t dst_off, uint64_t notif, unsigned flags, asr_request_t **req);

/* Reads [src_off, src_off + len) of src into [off, off + len) of dst. */
ASR_API int asr_read(asr_comm_t *comm, asr_tensor_t *dst, size_t off, size_t len, asr_rmem_t *src,
                     size_t src_off, asr_request_t **req);

/* Takes up to max notifications that arrived on RECV comm recv_comm, oldest
 * first, into values; *n says how many (0 when none). */
ASR_API int asr_notif_poll(asr_comm_t *recv_comm, uint64_t *values, int max, int *n);

/* Prepares a list of n writes (op ASR_XFER_WRITE: local[i] to remote[i]) or
 * reads (ASR_XFER_READ: remote[i] into local[i]) on SEND comm comm, each
 * entry checked once here. The tensors and imports must outlive the list. */
ASR_API int asr_xfer_prep(asr_comm_t *comm, int op, int n, const asr_iov_t *local, const asr_riov_t *remote,
                          asr_xfer_t **x);

/* Posts every entry of list x as one request. A write list delivers notif
 * (any 64-bit value) once, after all of its data; a read list delivers
 * nothing. A list may be posted again once the request of its last post
 * completed (a post while one is in flight is ASR_INVALID). */
ASR_API int asr_xfer_post(asr_xfer_t *x, uint64_t notif, asr_request_t **req);

/* asr_xfer_post with asr_write's flags: 0 posts a write list without a
 * notification, ASR_WRITE_NOTIFY with one. */
ASR_API int asr_xfer_post_flags(asr_xfer_t *x, uint64_t notif, unsigned flags, asr_request_t **req);

/* Frees a prepared list (no post of it may be in flight, unless its comm
 * was closed). NULL is ignored. */
ASR_API void asr_xfer_free(asr_xfer_t *x);

/* --- The job view (ranks started by asrrun or srun --mpi=pmix) ------------ */

/* What a rank knows about itself once asr_job_init() returned. */
typedef struct {
  int rank, size;             /* this rank and the job's rank count */
  int lnc;                    /* this rank's LNC on its host (ASR_LNC, else the PMIx local rank) */
  int local_rank, local_size; /* among the ranks of this host */
  int bootstrap_port;         /* the host KV servers' port */
  char hostname[128];         /* this host's name (ASR_HOSTNAME, else PMIx's) */
  char addr[64];              /* the address peers reach this rank at */
} asr_job_info_t;

/* Joins the job through PMIx: learns rank, size, LNC, host name, bootstrap
 * port and secret, and publishes this rank's address and LNC to every rank
 * (PMIx put, commit and a collecting fence). From then on it follows every
 * rank's state as the launcher reports it (asr_job_rank_state). A rank the
 * launcher restarted (ASR_INCARNATION > 0, asrrun --on-failure restart)
 * joins without the fence, which the others are past: it reads their
 * addresses from the PMIx server. A program started without a launcher
 * gets ASR_INVALID and a message saying how to start it. */
ASR_API int asr_job_init(asr_job_info_t *info);

/* The address and LNC rank `rank` published. */
ASR_API int asr_job_peer(int rank, char *addr, size_t addrlen, int *lnc);

/* asr_connect / asr_accept to or from rank `rank` (bringing this rank's LNC
 * up with asr_init first if needed). ASR_PEER_FAILED, and no comm, when the
 * launcher reported the rank FAILED: it will never connect. */
ASR_API int asr_job_connect(int rank, asr_comm_t **send_comm);
ASR_API int asr_job_accept(int rank, asr_comm_t **recv_comm);

/* A rank's state, as its launcher reports it (asrrun --on-failure continue
 * or restart; under the default policy a failure ends the job and every
 * rank stays ALIVE here). A death gives FAILED, or RESTARTING when the
 * launcher restarts the rank, with the incarnation that died; the restarted
 * rank's join gives ALIVE with the next incarnation (0 at the first start);
 * a rank that finalized and exited 0 is FINISHED. */
typedef enum {
  ASR_RANK_ALIVE = 0,
  ASR_RANK_FAILED = 1,
  ASR_RANK_RESTARTING = 2,
  ASR_RANK_FINISHED = 3,
} asr_rank_state_t;

/* Writes rank `rank`'s state (asr_rank_state_t) and incarnation as this
 * rank last heard them. ASR_INVALID before asr_job_init, for a rank out of
 * range and for a NULL output. */
ASR_API int asr_job_rank_state(int rank, int *state, int *incarnation);

/* A barrier over every rank of the job that is ALIVE (a PMIx fence over
 * them): a rank that failed, or is being restarted, is not waited for.
 * ASR_SUCCESS when every rank of the job took part; ASR_PEER_FAILED when
 * some did not, or one died during the barrier (the ranks that return it
 * may not all agree on who was alive: call it again to meet the others). */
ASR_API int asr_job_barrier(void);

/* Ends the job abnormally: every rank is killed and asrrun exits with status. */
ASR_API int asr_job_abort(int status, const char *msg);

/* Leaves the job (PMIx_Finalize). Closes this rank's LNC if asr_job_* opened it,
 * with asr_close's guarantee: every completed send of this rank can still
 * be received by its peer after asr_job_finalize returns and the rank exits
 * (bounded by ASR_DRAIN_TIMEOUT_MS). */
ASR_API int asr_job_finalize(void);

#ifdef __cplusplus
}
#endif

#endif /* ASR_H */
