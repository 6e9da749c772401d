/*
 * report_fmt.h -- a rank's state report (issue 24): the frames on the
 * channel asrd hands each rank at fork (ASR_REPORT_FD), and the text a rank
 * answers with, which asrrun parses to diagnose a stuck job.
 *
 * The channel is a stream socket pair. Every frame is a 12-byte header,
 * then its payload:
 *   offset size field
 *        0    4 magic   "ASRS" (0x53525341 little-endian)
 *        4    4 type    ASR_REPORT_HELLO / _ASK / _ANSWER
 *        8    4 length  payload bytes, at most ASR_REPORT_MAX
 *   type    from -> to     payload
 *   HELLO   rank -> asrd   u32 pid: the rank's report thread is up (libasr is loaded)
 *   ASK     asrd -> rank   u32 id
 *   ANSWER  rank -> asrd   u32 id, then the report text (no NUL)
 *   MASK    asrd -> rank   u32 id: asrrun --metrics-port's scrape (issue 52)
 *   METRICS rank -> asrd   u32 id, then the report text with its hist records
 * A wrong magic, type or length is a protocol error: the reader closes the
 * channel (asrd then says the rank gave no report).
 *
 * The report text is one record a line; a record is a word, then
 * tab-separated NAME=VALUE fields (a value never holds a tab or a newline:
 * keys are rendered as `asrkv dump` renders them, asr_kv_key_render, which
 * escapes every unprintable byte):
 *   proc  pid rank size lnc addr fence (none|init|barrier|finalize) finalized joined
 *   lnc   lnc host provider port
 *   comm  lnc dir (SEND|RECV) ordinal peer_rank (-1: unknown) peer_ip peer_lnc state
 *         state_ms (ms in that state) posted done (requests posted / completed)
 *         stashed ofi_posted (requests in those states now) oldest_ms (the
 *         oldest of those, -1: none) last_post_ms (-1: never) key server
 *         (the KV key the comm waits on and the server asked, "" when none)
 *         bytes (bytes its completed transfers moved) failed (requests that
 *         completed with an error); messages are done
 *   hist  name (xfer: a transfer's post to its completion; connect: a comm's
 *         making to CONNECTED) lnc dir (SEND|RECV) sum_ns b (ASR_REPORT_HIST_BUCKETS
 *         counts, comma-separated, bucket i counting values of at most
 *         ASR_REPORT_HIST_LE_NS(i), the last every larger one): only in a
 *         METRICS answer, only for what the process saw (ASR_METRICS=1)
 *   trunc (the rank cut its report at ASR_REPORT_TEXT_MAX)
 * Unknown record words and fields are skipped (a newer rank), but a known
 * field with a bad value fails the parse.
 */
#ifndef ASR_REPORT_FMT_H
#define ASR_REPORT_FMT_H

#include <stddef.h>
#include <stdint.h>

#define ASR_REPORT_MAGIC 0x53525341u
#define ASR_REPORT_HDR 12
#define ASR_REPORT_HELLO 1u
#define ASR_REPORT_ASK 2u
#define ASR_REPORT_ANSWER 3u
#define ASR_REPORT_MASK 4u
#define ASR_REPORT_METRICS 5u
#define ASR_REPORT_TEXT_MAX (96u << 10) /* a rank's text: a 64-rank mesh's 126 comms an LNC fit */
#define ASR_REPORT_MAX (ASR_REPORT_TEXT_MAX + 4u)

/* Checks a header: 0 with *type and *len, or ASR_EPROTO with why. */
int asr_report_header_parse(const uint8_t hdr[ASR_REPORT_HDR], uint32_t *type, uint32_t *len, char *why,
                            size_t whylen);
/* Writes a header. */
void asr_report_header_put(uint8_t hdr[ASR_REPORT_HDR], uint32_t type, uint32_t len);

typedef enum {
  ASR_REPORT_FENCE_NONE = 0,
  ASR_REPORT_FENCE_INIT,
  ASR_REPORT_FENCE_BARRIER,
  ASR_REPORT_FENCE_FINALIZE
} asr_report_fence_t;
const char *asr_report_fence_name(int f);

/* The histograms' buckets (hist records): powers of two from 1 us to
 * 2^24 us (16.8 s), then one for everything larger (Prometheus' +Inf). A
 * bucket is found with one count of leading zeros, no table walk. */
#define ASR_REPORT_HIST_BUCKETS 26
#define ASR_REPORT_HIST_LE_NS(i) (1000ull << (i)) /* i < ASR_REPORT_HIST_BUCKETS - 1 */
static inline int asr_report_hist_bucket(uint64_t ns) {
  uint64_t us = (ns + 999) / 1000; /* at most ASR_REPORT_HIST_LE_NS(i) ns: at most 2^i us, rounded up */
  if (us <= 1) return 0;
  int i = 64 - __builtin_clzll(us - 1);
  return i < ASR_REPORT_HIST_BUCKETS - 1 ? i : ASR_REPORT_HIST_BUCKETS - 1;
}

#define ASR_REPORT_KEY_TEXT 600 /* a rendered key, as kept in a record */

typedef struct {
  int lnc, dir; /* dir: 0 SEND, 1 RECV */
  int ordinal, peer_rank, peer_lnc;
  char peer_ip[64];
  char state[32];
  long long state_ms, oldest_ms, last_post_ms;
  unsigned long long posted, done, bytes, failed;
  int stashed, ofi_posted;
  char key[ASR_REPORT_KEY_TEXT];
  char server[80];
} asr_report_comm_t;

typedef struct {
  int kind; /* 0 xfer, 1 connect */
  int lnc, dir;
  unsigned long long sum_ns, count; /* count: the buckets' sum */
  unsigned long long b[ASR_REPORT_HIST_BUCKETS];
} asr_report_hist_t;

typedef struct {
  int have_proc;
  int pid, rank, size, lnc;
  char addr[64];
  int fence; /* asr_report_fence_t */
  int finalized, joined;
  int nlnc;
  struct {
    int lnc, port;
    char host[128], provider[64];
  } lncs[8]; /* the first eight LNCs a process reports (a rank has one) */
  int ncomms;
  asr_report_comm_t *comms; /* malloc'd */
  int nhists;
  asr_report_hist_t *hists; /* malloc'd */
  int truncated;
} asr_report_t;

/* Parses report text (len bytes, no NUL needed) into *r. 0, or ASR_EPROTO
 * with why (line number and field); on failure nothing is left to free. */
int asr_report_parse(const char *text, size_t len, asr_report_t *r, char *why, size_t whylen);
void asr_report_free(asr_report_t *r);

#endif /* ASR_REPORT_FMT_H */
