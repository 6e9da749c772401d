/*
 * obs.h -- libasr's trace points (issue 52): what the runtime's modules
 * call, and the one test that guards each (ASR_OBS_ON). Off (no ASR_TRACE,
 * no ASR_METRICS), a point is that test of a word written once in asr_init
 * before any comm exists, and never again; compiled out (configure
 * --disable-trace), not even that. The word is a mask: ASR_OBS_TRACE (the
 * trace records, obs.c) and ASR_OBS_METRICS (the histograms asrrun
 * --metrics-port serves, metrics.c), each point doing what its bits ask.
 *
 * The data path's cost when on (request.c): one clock read at the post and
 * one at the completion that asr_test sees, kept in the pool's obs[] slot
 * of the request between the two, and one record stored at the completion
 * (asr_trace.h: a claim on the thread's own ring, the fields, a stamp).
 * Everything else here is off the data path: connect states, KV requests,
 * registrations, closes, failures.
 */
#ifndef ASR_OBS_H
#define ASR_OBS_H

#include <stddef.h>
#include <stdint.h>

#include "asr_buf.h"
#include "report_fmt.h"
#include "asr_trace.h"
#include "asr_time.h"

#define ASR_OBS_TRACE 1   /* ASR_TRACE: the trace records */
#define ASR_OBS_METRICS 2 /* ASR_METRICS=1: the histograms (metrics.c) */
#ifdef ASR_NO_TRACE
#define ASR_OBS_ON() 0
#else
#define ASR_OBS_ON() __builtin_expect(asr__obs_on != 0, 0)
#endif
#define ASR_OBS_TRACING() (ASR_OBS_ON() && (asr__obs_on & ASR_OBS_TRACE))
#define ASR_OBS_METERING() (ASR_OBS_ON() && (asr__obs_on & ASR_OBS_METRICS))
extern int asr__obs_on;

struct asr_comm;
struct asr_request;
struct asr_ctx;

/* A request's trace state between its post and its completion (the comm
 * pool's obs[], request.c; written under the comm's data-path lock). */
typedef struct {
  uint64_t t_post; /* asr_time_ns() at the post */
  uint64_t t_out;  /* when the service thread posted it, if it was stashed; else 0 */
  uint32_t seq;    /* the comm's n-th send or receive (sends and receives match in order, seed §2) */
  uint32_t pad;
} asr__obs_req_t;

/* A comm's transfer-latency histogram (metrics.c; in its pool, rt.h):
 * written under the comm's data-path lock by a relaxed load and store,
 * read relaxed by the report thread. */
typedef struct {
  _Atomic uint64_t sum_ns;
  _Atomic uint64_t b[ASR_REPORT_HIST_BUCKETS];
} asr__hist_t;

/* A comm's trace identity and counters (in struct asr_comm). */
typedef struct {
  uint32_t id;       /* the process's n-th comm, 1 up (0: made before the trace was on) */
  uint32_t seq;      /* sends or receives posted (data-path lock) */
  uint64_t born_ns;  /* made */
  uint64_t state_ns; /* its connect state last changed */
  int said;          /* its ASR_TR_COMM record is out */
  int peer_closed;   /* it ends because its peer closed its RECV comm (drain.c), not a failure */
  int kv_op;         /* its KV request in flight: the op (kv_frame.h), when it began, the key */
  uint64_t kv_t0;
  uint8_t kv_key[160];
  size_t kv_keylen;
} asr__obs_comm_t;

/* Once per process, from the first asr_init: reads ASR_TRACE and opens
 * the file there, and ASR_METRICS. Returns 0, or ASR_ECONFIG / an ASR_E* with err set. */
int asr__obs_init(const char *host, char *err, size_t errlen);

/* A comm was made (comm.c). */
void asr__obs_comm_new(struct asr_comm *c);

/* c's connect state went from old to now (comm.c: asr__comm_set_status). */
void asr__obs_state(struct asr_comm *c, int old, int now);

/* The data path (request.c), each under the comm's data-path lock. */
static inline uint64_t asr__obs_now(void) { return asr_time_ns(); }
void asr__obs_post(struct asr_comm *c, asr__obs_req_t *o, int type);
void asr__obs_done(struct asr_comm *c, const asr__obs_req_t *o, int type, size_t bytes, int ok);

/* c's KV request (connect.c) begins: op (kv_frame.h) on key; and ends
 * (its answer came; ok or not). */
void asr__obs_kv_begin(struct asr_comm *c, int op, const void *key, size_t keylen);
void asr__obs_kv_end(struct asr_comm *c, int ok);

/* An MR registration of bytes on LNC lnc, from t0 to now. */
void asr__obs_mr(int lnc, size_t bytes, uint64_t t0);

/* An asr_flush of RECV comm c, from t0 to now. */
void asr__obs_flush(struct asr_comm *c, uint64_t t0);

/* c's close drain, from t0 to now; drained or not. */
void asr__obs_close(struct asr_comm *c, uint64_t t0, int drained);

/* A failure (one line), of comm c or (c NULL) of LNC lnc (-1: the process). */
void asr__obs_fail(struct asr_comm *c, int lnc, const char *what);

/* A notification taken by asr_notif_poll on c. */
void asr__obs_notif(struct asr_comm *c, uint64_t value);

/* metrics.c: the histograms of a transfer's time from its post to the
 * completion asr_test saw, per comm (h: its pool's; the data-path lock
 * held), and of a comm's time from its making to CONNECTED, per LNC and
 * direction (dir 0 SEND, 1 RECV; an atomic add, from the service thread). */
void asr__metrics_xfer_locked(asr__hist_t *h, uint64_t ns);
void asr__metrics_connect(int lnc, int dir, uint64_t ns);
/* Appends a hist record (bootstrap/report_fmt.h) for each histogram that
 * counted something, the comms' summed per LNC and direction; the report
 * thread's (state_report.c), which must not hold asr__rep_mutex. */
void asr__metrics_render(asr_buf_t *b);

#endif /* ASR_OBS_H */
