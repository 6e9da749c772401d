/*
 * asr_trace_fmt.h -- the layout of a process's trace file (issue 52): what
 * libasr, asrd and asrrun write (asr_trace.c) and the merger reads
 * (launcher/trace/trace_read.c). doc/trace.md is what the merger makes of it.
 *
 * One file per process, mapped shared, so that what a process wrote up to
 * its death (even SIGKILL) is in the file for its daemon to read:
 *
 *   [header: ASR_TR_HDR_BYTES]
 *   [thread table: max_threads x asr_tr_thread_t]
 *   [keep area: keep_recs records]           connect spans, launch phases,
 *                                            failures: never overwritten
 *   [rings: max_threads x ring_recs records] the data path's records, one
 *                                            ring per thread, oldest
 *                                            overwritten first
 *
 * A record is claimed with one relaxed fetch-add of its area's counter,
 * written, and published by a release store of its stamp (the claim's
 * index + 1) last: a reader takes a record only if its stamp is the index
 * it expects, so a torn record (its writer killed mid-write, or overtaken
 * by the ring's wrap while read) is skipped, never misread. Host byte
 * order: a file is read on the machine kind that wrote it (the header's
 * magic and sizes say so).
 */
#ifndef ASR_TRACE_FMT_H
#define ASR_TRACE_FMT_H

#include <stdint.h>

#define ASR_TR_MAGIC "ASRTRC1"
#define ASR_TR_VERSION 1u
#define ASR_TR_HDR_BYTES 4096u
#define ASR_TR_TEXT 32 /* bytes of text a record carries (asr_tr_rec_t.u.text) */

/* What wrote the file (asr_tr_hdr_t.kind). */
enum { ASR_TR_PROC_RANK = 1, ASR_TR_PROC_ASRD = 2, ASR_TR_PROC_ASRRUN = 3 };

/* Record kinds (asr_tr_rec_t.kind). K: in the keep area; D: a ring's. */
enum {
  ASR_TR_NONE = 0,
  ASR_TR_COMM,      /* K  a comm's identity, at CONNECTED or failure; id = its number */
  ASR_TR_CONNECT,   /* K  t0 made, t1 CONNECTED or failed; sub = result (1 ok) */
  ASR_TR_STATE,     /* K  one connect state: sub = the state (asr_comm_status_t), t0..t1 */
  ASR_TR_XFER,      /* D  a request: t0 post, t1 completion seen by asr_test */
  ASR_TR_KV,        /* D  a KV request: t0 start, t1 answer; sub = op | 0x80 if it failed; text = key */
  ASR_TR_MR,        /* D  an MR registration: a = bytes */
  ASR_TR_CLOSE,     /* K  a comm's close drain: sub = 1 drained, 0 not; 2: an instant, the peer
                     *    closed its RECV comm (this SEND comm takes no more) */
  ASR_TR_NOTIF,     /* D  a notification taken by asr_notif_poll: a = value */
  ASR_TR_FAIL,      /* K  a failure: text = what (id = comm or 0); a longer line goes on in
                     *    records of the same t0, id and lnc with sub = 1, in order */
  ASR_TR_PHASE,     /* K  a launch phase (asrrun, asrd): text = name, id = host index + 1 or 0 */
  ASR_TR_SPAWN,     /* K  asrd spawned a rank: a = rank, b = os pid */
  ASR_TR_FENCE,     /* K  asrd served a fence: sub = 1 fence, 2 get, 3 pmi fence; a = ranks, b = bytes */
  ASR_TR_STALL,     /* K  asrd held output under back-pressure: a = rank, b = bytes, sub = stream */
  ASR_TR_COMM_PATH, /* K a comm's path's name ("sm", "shm", "tcp;ofi_rxm"): text; id = the comm */
  ASR_TR_FLUSH,     /* D an asr_flush of a RECV comm: t0..t1 */
  ASR_TR_NKINDS
};

/* ASR_TR_XFER's sub: the request type (low nibble: 1 send, 2 recv, 3
 * write, 4 read, 5 list), ASR_TR_X_OK if it succeeded, ASR_TR_X_STASHED
 * if it waited in the stash (then c = when the service thread posted it). */
#define ASR_TR_X_OK 0x10u
#define ASR_TR_X_STASHED 0x20u

/* A record: 64 bytes, one cache line. A kind carries either numbers
 * (v.a .. v.d) or a text (not NUL-terminated when full), never both. */
typedef struct {
  uint64_t t0, t1; /* CLOCK_MONOTONIC ns; t1 = t0 for an instant */
  union {
    struct {
      uint64_t a, b, c, d;
    } v;
    char text[ASR_TR_TEXT];
  } u;
  uint32_t id;    /* the comm's number in the process (ASR_TR_COMM's id), or by kind */
  uint16_t kind;  /* ASR_TR_* */
  uint8_t lnc;    /* the LNC, or 0xff */
  uint8_t sub;    /* by kind */
  uint32_t stamp; /* the claim's index + 1, stored last (release) */
  uint32_t spare;
} asr_tr_rec_t;
_Static_assert(sizeof(asr_tr_rec_t) == 64, "a trace record is one cache line");

/* ASR_TR_COMM: the comm's identity. v.a = the pair's hash (the same on
 * the SEND and the RECV comm of one connection: runtime/obs), v.b = peer
 * rank (int64, -1 none), v.c = peer_lnc | ordinal << 32, v.d = the path
 * (ASR_PATH_* of rt.h: 1 local, 2 net, 3 sm; 0 none); sub = 1 SEND, 2 RECV. */

/* One thread's ring (and its name, for the track): a cache line of its
 * own, so that two threads' claims never share one. */
typedef struct {
  uint64_t head;  /* records claimed (atomic); the ring holds the last ring_recs */
  int32_t os_tid; /* gettid() of a service thread (asr_trace_thread_lnc), else 0 */
  int32_t lnc;    /* the LNC whose service thread it is, else -1 */
  char name[16];  /* pthread name at claim */
  uint32_t count; /* packed form only: the records of this ring that follow */
  uint32_t spare[7];
} asr_tr_thread_t;
_Static_assert(sizeof(asr_tr_thread_t) == 64, "a thread's ring's head is one cache line");

/* The packed form (launcher/trace/trace_read.c: what a daemon sends up):
 * the header with ring_recs = 0 and keep_recs = the keep records that
 * follow, threads = the table's entries, then the table, the keep
 * records, and each ring's records (its count), oldest first; only
 * records whose stamps were whole. */

typedef struct {
  char magic[8];         /* ASR_TR_MAGIC */
  uint32_t version;      /* ASR_TR_VERSION */
  uint16_t rec_bytes;    /* sizeof(asr_tr_rec_t) */
  uint16_t thread_bytes; /* sizeof(asr_tr_thread_t) */
  uint32_t ring_recs;    /* records per thread ring (a power of two) */
  uint32_t keep_recs;    /* records in the keep area */
  uint32_t max_threads;  /* rings */
  uint32_t threads;      /* rings claimed (atomic; may pass max_threads: those threads share the last) */
  uint64_t keep_used;    /* keep records claimed (atomic; beyond keep_recs: dropped) */
  int32_t kind;          /* ASR_TR_PROC_* */
  int32_t os_pid;
  int64_t rank;              /* -1 none */
  uint64_t mono_ns, real_ns; /* CLOCK_MONOTONIC and CLOCK_REALTIME read together at open */
  char host[64];             /* the host's name */
  char job[64];              /* the job's id, or "" */
  uint32_t done;             /* 1 once the process closed the file (a clean exit) */
} asr_tr_hdr_t;
_Static_assert(sizeof(asr_tr_hdr_t) <= ASR_TR_HDR_BYTES, "the header fits its page");

#endif /* ASR_TRACE_FMT_H */
