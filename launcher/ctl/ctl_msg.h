/*
 * ctl_msg.h -- the control messages between asrrun and each asrd: the one
 * table of what each carries, with its encoder and decoder side by side in
 * ctl_msg.c. The framing (a 12-byte header before each payload) is ctl.h's.
 *
 * Payloads are made of little-endian u32s and u32-length-prefixed byte
 * strings (asr_buf.h), in this order, and nothing after the last field:
 *
 *   type        from -> to       fields
 *   HELLO       asrd -> asrrun   u32 host index (ASR_CTL_INDEX_AHEAD: not known yet),
 *                                str host name, u32 pid, str job secret (64 hex: proves
 *                                the daemon was started by this asrrun)
 *   JOB         asrrun -> asrd   asr_ctl_job_t, below
 *   STARTED     asrd -> asrrun   u32 n, n x u32 pid (= process group) of each local rank
 *   OUTPUT      asrd -> asrrun   u32 rank, u32 stream (1 stdout, 2 stderr), u32 flags,
 *                                bytes line: one whole line without its newline, or
 *                                with ASR_CTL_OUT_PARTIAL a piece of one not ended
 *                                here; ASR_CTL_OUT_EOF: the stream ended after it.
 *                                Costs the sender ASR_CTL_OUTPUT_COST(len) of credit
 *   EXIT        asrd -> asrrun   u32 rank, u32 wait status, u32 flags (ASR_CTL_EXIT_NOT_RUN:
 *                                asrd could not execute the program; the status is 127)
 *   FENCE       asrd -> asrrun   u32 fence id, bytes this host's blob
 *   FENCE_DONE  asrrun -> asrd   u32 fence id, bytes every host's blob in host order
 *   ABORT       asrd -> asrrun   u32 rank, u32 status, str message (PMIx_Abort)
 *   KILL        asrrun -> asrd   u32 signal (1..64) for every local rank
 *   STDIN       asrrun -> asrd   bytes for the stdin of the JOB's stdin_rank (or of every
 *                                local rank: ASR_CTL_STDIN_ALL); empty = EOF
 *   ERROR       either way       str message: the sender cannot go on
 *   DONE        asrd -> asrrun   (none) every local rank exited, its output sent
 *   SHUTDOWN    asrrun -> asrd   (none) the job is over: exit
 *   HEARTBEAT   either way       (none) every second: "still here"
 *   CREDIT      asrrun -> asrd   u32 bytes of output credit given back (their OUTPUTs
 *                                were written): the window, below
 *   STDIN_CREDIT asrd -> asrrun  u32 bytes of STDIN written into rank 0's pipe (or
 *                                dropped, once it closed its stdin): the window, below
 *   OUTPUT_CLOSED asrrun -> asrd u32 stream: asrrun's stdout (1) or stderr (2) reader
 *                                went away; the ranks' pipes of that stream are closed
 *   JOINED      asrd -> asrrun   u32 rank, u32 what (ASR_CTL_JOINED_INIT: the rank
 *                                joined; ASR_CTL_JOINED_FINALIZED: and finalized),
 *                                u32 via (ASR_CTL_VIA_PMIX: through PMIx,
 *                                ASR_CTL_VIA_PMI1: through PMI-1,
 *                                ASR_CTL_VIA_PMI2: through PMI-2), sent before that
 *                                rank's EXIT
 *   REPORT_REQ  asrrun -> asrd   u32 id, u32 timeout_ms (ASR_CTL_REPORT_MIN_MS..MAX_MS),
 *                                u32 flags (ASR_CTL_REPORT_STACKS: stack traces too):
 *                                ask every local rank for its state report (issue 24)
 *   REPORT      asrd -> asrrun   u32 id, u32 rank, u32 pid, u32 flags (ASR_CTL_REP_*),
 *                                str process state, bytes the rank's report text
 *                                (report_fmt.h, at most ASR_REPORT_TEXT_MAX), bytes its
 *                                stack trace (at most ASR_CTL_MAX_STACK): one a local
 *                                rank, the last with ASR_CTL_REP_LAST; within the
 *                                REPORT_REQ's timeout plus the stack traces' bound
 *   ROUTED      either way       u32 host (or ASR_CTL_ALL_HOSTS), u32 type, bytes payload:
 *                                in a tree of daemons (tree.h), a message of another
 *                                daemon's. Up: host sent it, the hops wrap it once and
 *                                pass it on; down: for host, or (ALL) for every daemon
 *                                of the receiver's subtree, passed on once per subtree.
 *                                Never nested; the payload decodes as its type
 *   FENCE_SUB   asrd -> parent   u32 fence id, u32 n, n x (u32 host, bytes blob): a
 *                                subtree's blobs for one fence, gathered by its root
 *   LOST        asrd -> parent   u32 host, str why: a child of the sender's (and its
 *                                subtree, tree.h) is gone before the job ended
 *   ENDS_ASK    asrrun -> asrd   u32 id: before asrrun names the cause of the job's end,
 *                                every daemon is asked which of its ranks have ended
 *                                (asrd_ends.c, doc/design.md "Verdicts by cause")
 *   ENDS        asrd -> asrrun   u32 id: the answer, once the EXIT of every local rank
 *                                the kernel showed ended or in its exit when ENDS_ASK id
 *                                came has gone before it; each daemon answers an id once
 *   RANK_STATE  asrrun -> asrd   u32 rank, u32 state (ASR_CTL_RANK_*), u32 incarnation,
 *                                u32 wait status of the end (0 for ALIVE), str why: under
 *                                --on-failure continue or restart, a rank's new state, to
 *                                every daemon (it tells its PMIx clients: asr_rank_ev.h);
 *                                the incarnation is the one the state is of: RESTARTING's
 *                                is the one that died, and tells the rank's own daemon to
 *                                start incarnation + 1
 *   CLOCK_ASK   asrd -> asrrun   u32 seq, u64 t (asrd's CLOCK_MONOTONIC ns): a round of
 *                                the trace's clock alignment (issue 52, asrd_trace.c)
 *   CLOCK       asrrun -> asrd   u32 seq, u64 t (the ask's, echoed), u64 asrrun's clock
 *                                when it answered
 *   TRACE       asrd -> asrrun   u32 file, u32 flags (ASR_CTL_TRACE_LAST: the file's last
 *                                piece), str how its process ended ("code 0", "signal 9",
 *                                or ""), bytes a piece (at most ASR_CTL_TRACE_PIECE) of
 *                                the packed trace file (launcher/trace/trace_read.h) of
 *                                one process of the host; files numbered 0 up, pieces in
 *                                order; sent before DONE by a daemon of a traced job
 *   TRACE_END   asrd -> asrrun   u32 files, u64 offset (asrd's clock minus asrrun's, two's
 *                                complement), u64 its error bound (ns; ASR_CTL_TRACE_NO_CLOCK:
 *                                not measured): the host's last TRACE
 *   METRICS_REQ asrrun -> asrd   u32 id, u32 timeout_ms (ASR_CTL_REPORT_MIN_MS..MAX_MS):
 *                                a scrape of asrrun --metrics-port (issue 52): ask every
 *                                local rank for its counters and histograms
 *   METRICS     asrd -> asrrun   u32 id, u32 rank, u32 flags (ASR_CTL_REP_*, but
 *                                NO_STACK_TOOL), u32 output bytes of the rank this daemon
 *                                holds (back-pressure: asrd_stdio.c), bytes the rank's
 *                                METRICS text (report_fmt.h, at most ASR_REPORT_TEXT_MAX):
 *                                one a local rank, the last with ASR_CTL_REP_LAST, within
 *                                the METRICS_REQ's timeout
 *
 * Flow control: an asrd may send OUTPUT while its credit is above zero; it
 * starts at ASR_CTL_OUTPUT_WINDOW and each OUTPUT takes its cost (a last one
 * may overdraw it, by at most one message); asrrun gives the cost back once
 * it has written that line. So what asrrun holds for one daemon is bounded
 * by the window plus one message, and what an asrd holds is bounded by its
 * own buffers (asrd_stdio.c). STDIN works the same way the other way round,
 * with ASR_CTL_STDIN_WINDOW: asrrun sends at most that many unacknowledged
 * bytes. Neither window holds back any other message.
 *
 * Decoding checks every field (counts, ranges, string lengths, no NUL inside
 * a string, nothing left over): a message that fails is a protocol error
 * with a one-line reason, and its connection is dropped (ctl.h).
 */
#ifndef ASR_CTL_MSG_H
#define ASR_CTL_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "asr_buf.h"

typedef enum {
  ASR_CTL_INVALID = 0, /* never sent (the Hydra habit: a zeroed header is no message) */
  ASR_CTL_HELLO,
  ASR_CTL_JOB,
  ASR_CTL_STARTED,
  ASR_CTL_OUTPUT,
  ASR_CTL_EXIT,
  ASR_CTL_FENCE,
  ASR_CTL_FENCE_DONE,
  ASR_CTL_ABORT,
  ASR_CTL_KILL,
  ASR_CTL_STDIN,
  ASR_CTL_ERROR,
  ASR_CTL_DONE,
  ASR_CTL_SHUTDOWN,
  ASR_CTL_HEARTBEAT,
  ASR_CTL_CREDIT,
  ASR_CTL_STDIN_CREDIT,
  ASR_CTL_OUTPUT_CLOSED,
  ASR_CTL_JOINED,
  ASR_CTL_REPORT_REQ,
  ASR_CTL_REPORT,
  ASR_CTL_ROUTED,
  ASR_CTL_FENCE_SUB,
  ASR_CTL_LOST,
  ASR_CTL_ENDS_ASK,
  ASR_CTL_ENDS,
  ASR_CTL_RANK_STATE,
  ASR_CTL_CLOCK_ASK,
  ASR_CTL_CLOCK,
  ASR_CTL_TRACE,
  ASR_CTL_TRACE_END,
  ASR_CTL_METRICS_REQ,
  ASR_CTL_METRICS,
  ASR_CTL__COUNT
} asr_ctl_type_t;

/* The protocol's clock, the same at every end of every link of the tree
 * (asrrun, each asrd): HEARTBEAT goes each way every HEARTBEAT_MS (a peer
 * silent for the JOB's heartbeat timeout is lost); a new connection's
 * HELLO must come within HELLO_MS; a daemon started must call back within
 * CALLBACK_MS of its start. */
#define HEARTBEAT_MS 1000
#define HELLO_MS 5000
#define CALLBACK_MS 30000

/* The host index in the HELLO of a daemon started ahead of the job, before
 * asrrun knew its host's index (asrrun's early local daemon); the JOB tells
 * it its index. */
#define ASR_CTL_INDEX_AHEAD 0xffffffffu

/* ROUTED's host for every daemon of the receiver's subtree */
#define ASR_CTL_ALL_HOSTS 0xffffffffu
/* The largest --tree-radix */
#define ASR_CTL_MAX_RADIX 1024u

/* OUTPUT flags */
#define ASR_CTL_OUT_PARTIAL 1u /* no newline after this piece: the line goes on */
#define ASR_CTL_OUT_EOF 2u     /* the rank's stream ended after this piece */
#define ASR_CTL_OUT_FLAGS (ASR_CTL_OUT_PARTIAL | ASR_CTL_OUT_EOF)

/* The flow-control windows (above) and what one OUTPUT costs. */
#define ASR_CTL_OUTPUT_WINDOW (256u << 10)
#define ASR_CTL_OUTPUT_COST(len) ((uint64_t)(len) + 64u)
#define ASR_CTL_STDIN_WINDOW (1u << 20)

/* JOB's stdin_rank besides a rank */
#define ASR_CTL_STDIN_ALL 0xffffffffu
#define ASR_CTL_STDIN_NONE 0xfffffffeu

/* EXIT flags */
#define ASR_CTL_EXIT_NOT_RUN 1u

/* JOINED's what */
#define ASR_CTL_JOINED_INIT 1u
#define ASR_CTL_JOINED_FINALIZED 2u
/* JOINED's via */
#define ASR_CTL_VIA_PMIX 1u
#define ASR_CTL_VIA_PMI1 2u
#define ASR_CTL_VIA_PMI2 3u

/* REPORT_REQ */
#define ASR_CTL_REPORT_STACKS 1u
#define ASR_CTL_REPORT_MIN_MS 10u
#define ASR_CTL_REPORT_MAX_MS 60000u
/* REPORT flags */
#define ASR_CTL_REP_ANSWERED 1u       /* the text is the rank's answer */
#define ASR_CTL_REP_EXITED 2u         /* the rank had exited before it was asked */
#define ASR_CTL_REP_NO_LIBASR 4u      /* it never started libasr's report thread: no report */
#define ASR_CTL_REP_TIMEOUT 8u        /* it did not answer within the timeout */
#define ASR_CTL_REP_GONE 16u          /* its channel closed while it was asked (it exited) */
#define ASR_CTL_REP_LAST 32u          /* the host's last REPORT for this id */
#define ASR_CTL_REP_NO_STACK_TOOL 64u /* stacks asked, and neither eu-stack nor gdb is installed */
#define ASR_CTL_REP_FLAGS 127u
#define ASR_CTL_MAX_STACK (64u << 10)
#define ASR_CTL_MAX_REPORT_TEXT (96u << 10) /* report_fmt.h's ASR_REPORT_TEXT_MAX */

/* RANK_STATE's states: asr.h's ASR_RANK_* (the rank's state as libasr's
 * asr_job_rank_state tells it) */
#define ASR_CTL_RANK_ALIVE 0u
#define ASR_CTL_RANK_FAILED 1u
#define ASR_CTL_RANK_RESTARTING 2u
#define ASR_CTL_RANK_FINISHED 3u
#define ASR_CTL_MAX_INCARNATION 1000000u /* ASR_INCARNATION's range */
/* JOB's on_failure: job_config.h's asr_on_failure_t */
#define ASR_CTL_ON_FAILURE_ABORT 0u
#define ASR_CTL_ON_FAILURE_CONTINUE 1u
#define ASR_CTL_ON_FAILURE_RESTART 2u
#define ASR_CTL_ON_FAILURE_MAX ASR_CTL_ON_FAILURE_RESTART

/* TRACE */
#define ASR_CTL_TRACE_LAST 1u
#define ASR_CTL_TRACE_PIECE (1u << 20)
#define ASR_CTL_TRACE_MAX_FILES 65536u
#define ASR_CTL_TRACE_NO_CLOCK UINT64_MAX

/* Bounds a decoder enforces (a larger job is refused by asrrun's config). */
#define ASR_CTL_MAX_RANKS (1u << 20)
#define ASR_CTL_MAX_HOSTS (1u << 16)
#define ASR_CTL_MAX_LNC 128 /* LNCs per host: 0..127 (the runtime's contexts) */
#define ASR_CTL_MAX_ARGS 65536u
#define ASR_CTL_MAX_HOSTNAME 127 /* the KV store's 128-byte hostname field, with its NUL */
#define ASR_CTL_MAX_TEXT 65536   /* messages, names, values, arguments, paths */
#define ASR_CTL_SECRET_HEX 64
#define ASR_CTL_MAX_CPUS_PER_RANK 4096

/* The job, as asrrun hands it to each daemon. Decoded, every pointer is
 * malloc'd and the job's (asr_ctl_job_free); encoded, it is only read. */
typedef struct {
  uint32_t nranks, nhosts;
  uint32_t index;    /* the receiving daemon's host */
  char **host_names; /* [nhosts] */
  uint32_t *host_of; /* [nranks]: each rank's host */
  uint32_t *lnc_of;  /* [nranks]: each rank's LNC on its host */
  char *program;     /* as the user named it (asrd searches PATH) */
  uint32_t nargs;    /* argv[1..] */
  char **args;       /* [nargs] (decoded: NULL-terminated) */
  uint32_t nenv;     /* -x list */
  char **env_names;  /* [nenv] */
  char **env_values; /* [nenv] */
  uint32_t bind_to;  /* asr_bind_to_t, AUTO included (each asrd resolves it: bind.h) */
  uint32_t report_bindings;
  uint32_t port;           /* the bootstrap port, 1..65535 */
  char *provider;          /* "" = libasr's default */
  char *nspace;            /* the PMIx namespace */
  char *if_spec;           /* --if-include, resolved on each host ("" = the address asrrun is reached from) */
  uint32_t heartbeat_s;    /* asrrun silent this long is lost: 1..3600 */
  char *wdir;              /* the ranks' working directory ("" = asrd's own) */
  uint32_t wdir_given;     /* --wdir: it must exist (else asrrun's own, where it exists) */
  uint32_t stdin_rank;     /* the rank that reads STDIN, or ASR_CTL_STDIN_ALL / _NONE */
  uint32_t provider_given; /* --provider: asrd checks that libfabric offers it before ranks start */
  /* the rest of bind.h's policy, so asrd binds as asrrun's --dry-run shows */
  uint32_t map_by;        /* asr_map_by_t */
  uint32_t ppr;           /* map_by PPR_*: ranks per object, 1..128; else 0 */
  uint32_t cpus_per_rank; /* 1..ASR_CTL_MAX_CPUS_PER_RANK */
  char **cores;           /* [nranks]: each rank's rankfile slot=CORES, or NULL for none at all */
  /* torchrun's rendezvous (MASTER_ADDR, MASTER_PORT): rank 0's host as the
   * job's network reaches it ("" = each asrd's own address: one host), and
   * a port asrrun found free, 1..65535 */
  char *master_addr;
  uint32_t master_port;
  /* the tree of daemons (tree.h): its radix (0: every daemon is asrrun's
   * child), and how a daemon starts its children: the agent, asrd's path
   * there, and the address its children call back on when it reached its
   * parent over loopback (asrrun's own address on the job's network); and
   * the launch backend that starts them, by its id (launch.h's
   * asr_launch_id_t, wire values): 0 the agent (rsh), 1 srun steps (Slurm;
   * the agent is not used). A child is on another host, so the local
   * backend's id never comes: the decoder refuses anything above 1. */
  uint32_t tree_radix;
  uint32_t tree_launch;
  char *tree_agent, *tree_asrd, *tree_ip;
  /* the failure policy (--on-failure: 0 abort, 1 continue, 2 restart): under
   * restart a daemon holds its DONE while a failed rank of its waits for
   * asrrun's RANK_STATE (it may be started again) */
  uint32_t on_failure;
  /* --trace (issue 52): 1 when the ranks and the daemons trace, and the
   * daemons send their files up (TRACE) before DONE */
  uint32_t trace;
} asr_ctl_job_t;

/* One message. Byte strings of OUTPUT, FENCE, FENCE_DONE, STDIN, ROUTED,
 * FENCE_SUB and METRICS point
 * into the payload they were decoded from (valid while it is); every other
 * string and array is malloc'd (asr_ctl_msg_free). */
typedef struct {
  asr_ctl_type_t type;
  union {
    struct {
      uint32_t index, pid;
      char *host, *secret_hex;
    } hello;
    asr_ctl_job_t job;
    struct {
      uint32_t n;
      uint32_t *pids;
    } started;
    struct {
      uint32_t rank, stream, flags;
      const uint8_t *line;
      size_t len;
    } output;
    struct {
      uint32_t bytes;
    } credit; /* CREDIT and STDIN_CREDIT */
    struct {
      uint32_t stream;
    } closed; /* OUTPUT_CLOSED */
    struct {
      uint32_t rank, what, via;
    } joined;
    struct {
      uint32_t rank, status, flags;
    } exit;
    struct {
      uint32_t id;
      const uint8_t *data;
      size_t len;
    } fence; /* FENCE and FENCE_DONE */
    struct {
      uint32_t rank, status;
      char *msg;
    } abort;
    struct {
      uint32_t sig;
    } kill;
    struct {
      const uint8_t *data;
      size_t len;
    } input; /* STDIN */
    struct {
      char *msg;
    } error;
    struct {
      uint32_t id, timeout_ms, flags;
    } report_req;
    struct {
      uint32_t host, type;
      const uint8_t *data;
      size_t len;
    } routed;
    struct {
      uint32_t id, n;
      const uint8_t *entries; /* n x (u32 host, bytes blob), each checked (asr_ctl_fence_sub_next) */
      size_t len;
    } fence_sub;
    struct {
      uint32_t host;
      char *why;
    } lost;
    struct {
      uint32_t id;
    } ends; /* ENDS_ASK and ENDS */
    struct {
      uint32_t rank, state, incarnation, status;
      char *why;
    } rank_state;
    struct {
      uint32_t seq;
      uint64_t t, answer; /* answer: CLOCK's only */
    } clock;              /* CLOCK_ASK and CLOCK */
    struct {
      uint32_t file, flags;
      char *exited;
      const uint8_t *data;
      size_t len;
    } trace;
    struct {
      uint32_t files;
      uint64_t offset, error;
    } trace_end;
    struct {
      uint32_t id, timeout_ms;
    } metrics_req;
    struct {
      uint32_t id, rank, flags, held;
      const uint8_t *text; /* into the payload */
      size_t text_len;
    } metrics;
    struct {
      uint32_t id, rank, pid, flags;
      char *pstate;
      const uint8_t *text, *stack;
      size_t text_len, stack_len;
    } report;
  } u;
} asr_ctl_msg_t;

/* "HELLO", ..., or "UNKNOWN". */
const char *asr_ctl_type_name(int type);

/* Appends m's payload (not the header) to b. 0, ASR_EINVAL for a message
 * that would not decode (a field out of range), or ASR_ENOMEM. */
int asr_ctl_msg_encode(const asr_ctl_msg_t *m, asr_buf_t *b);

/* Decodes a payload of the given type into *m. 0, or ASR_EPROTO with a
 * one-line reason in why; on failure nothing is left to free. */
int asr_ctl_msg_decode(int type, const uint8_t *p, size_t len, asr_ctl_msg_t *m, char *why, size_t whylen);

/* Frees what a decoded message owns (not what its pointers point into). */
void asr_ctl_msg_free(asr_ctl_msg_t *m);

/* The next entry of a decoded FENCE_SUB's entries (*p, *len move past it):
 * 1 with host and blob, or 0 at the end. */
int asr_ctl_fence_sub_next(const uint8_t **p, size_t *len, uint32_t *host, const uint8_t **blob,
                           size_t *blob_len);

/* Whether wait status st is a death by a signal from outside the process
 * (SIGKILL, SIGTERM, SIGINT, ...), not one of its own doing (a fault,
 * abort(), a write to a closed pipe, a resource limit): such a rank reacts
 * to nobody (doc/design.md, "Verdicts by cause"). */
int asr_ctl_killed_from_outside(int st);

/* Frees a decoded job's arrays and strings; *job is zeroed. */
void asr_ctl_job_free(asr_ctl_job_t *job);

#endif /* ASR_CTL_MSG_H */
