/*
 * fuzz_ctl.c -- libFuzzer target for the control channel's decoders
 * (launcher/ctl/ctl.c asr_ctl_header_parse, launcher/ctl/ctl_msg.c
 * asr_ctl_msg_decode): the bytes asrrun gets from each asrd and every asrd
 * from asrrun, which a peer on the network (or a stray connection to the
 * control port) can send.
 *
 * The input is a byte stream as one connection carries it: headers and
 * payloads, cut as ctl.c's deliver() cuts them. The first byte also picks
 * a message type, and the rest is decoded as that type's payload, so every
 * decoder sees arbitrary payloads even where a header would not let them
 * through. For each message that decodes:
 *  - its fields are inside the limits the decoder promises (ctl_msg.h);
 *  - it re-encodes, and the encoding decodes to a message that encodes to
 *    the same bytes (one trip reaches a fixed point);
 *  - framed, the header parses back to its type and length.
 * A message that does not decode must say why, and leave nothing to free
 * (ASan's leak check sees the rest).
 */
#include "config.h"

#include <string.h>

#include "asr_buf.h"
#include "asr_err.h"
#include "ctl.h"
#include "ctl_msg.h"
#include "job_config.h" /* asr_bind_to_t: the JOB carries one */
#include "fuzz.h"

static void check_fields(const asr_ctl_msg_t *m) {
  switch (m->type) {
    case ASR_CTL_HELLO:
      FUZZ_ASSERT(m->u.hello.host && m->u.hello.host[0] && strlen(m->u.hello.host) <= ASR_CTL_MAX_HOSTNAME,
                  "HELLO host");
      FUZZ_ASSERT(m->u.hello.secret_hex && strlen(m->u.hello.secret_hex) == ASR_CTL_SECRET_HEX,
                  "HELLO secret");
      break;
    case ASR_CTL_JOB: {
      const asr_ctl_job_t *j = &m->u.job;
      FUZZ_ASSERT(j->nranks >= 1 && j->nranks <= ASR_CTL_MAX_RANKS, "JOB nranks %u", j->nranks);
      FUZZ_ASSERT(j->nhosts >= 1 && j->nhosts <= ASR_CTL_MAX_HOSTS, "JOB nhosts %u", j->nhosts);
      FUZZ_ASSERT(j->index < j->nhosts, "JOB index");
      for (uint32_t h = 0; h < j->nhosts; h++)
        FUZZ_ASSERT(j->host_names[h] && j->host_names[h][0], "host name");
      for (uint32_t r = 0; r < j->nranks; r++)
        FUZZ_ASSERT(j->host_of[r] < j->nhosts && j->lnc_of[r] < ASR_CTL_MAX_LNC, "rank %u's place", r);
      FUZZ_ASSERT(j->program && j->program[0], "JOB program");
      FUZZ_ASSERT(j->args && j->args[j->nargs] == NULL, "JOB args end");
      for (uint32_t i = 0; i < j->nenv; i++)
        FUZZ_ASSERT(j->env_names[i][0] && !strchr(j->env_names[i], '='), "JOB env name");
      FUZZ_ASSERT(j->port >= 1 && j->port <= 65535, "JOB port");
      FUZZ_ASSERT(j->heartbeat_s >= 1 && j->heartbeat_s <= 3600, "JOB heartbeat");
      FUZZ_ASSERT(j->bind_to <= ASR_BIND_AUTO && j->report_bindings <= 1, "JOB binding");
      FUZZ_ASSERT(j->on_failure <= ASR_CTL_ON_FAILURE_MAX, "JOB failure policy");
      FUZZ_ASSERT(j->trace <= 1, "JOB trace");
      break;
    }
    case ASR_CTL_STARTED:
      for (uint32_t i = 0; i < m->u.started.n; i++)
        FUZZ_ASSERT(m->u.started.pids[i] > 1 && m->u.started.pids[i] <= 0x7fffffffu, "STARTED pid");
      break;
    case ASR_CTL_OUTPUT:
      FUZZ_ASSERT(m->u.output.stream == 1 || m->u.output.stream == 2, "OUTPUT stream");
      FUZZ_ASSERT(!(m->u.output.flags & ~ASR_CTL_OUT_FLAGS), "OUTPUT flags");
      break;
    case ASR_CTL_EXIT: FUZZ_ASSERT(!(m->u.exit.flags & ~ASR_CTL_EXIT_NOT_RUN), "EXIT flags"); break;
    case ASR_CTL_CREDIT:
    case ASR_CTL_STDIN_CREDIT: FUZZ_ASSERT(m->u.credit.bytes > 0, "credit of 0"); break;
    case ASR_CTL_OUTPUT_CLOSED:
      FUZZ_ASSERT(m->u.closed.stream == 1 || m->u.closed.stream == 2, "OUTPUT_CLOSED stream");
      break;
    case ASR_CTL_JOINED:
      FUZZ_ASSERT(m->u.joined.what == ASR_CTL_JOINED_INIT || m->u.joined.what == ASR_CTL_JOINED_FINALIZED,
                  "JOINED what");
      FUZZ_ASSERT(m->u.joined.via == ASR_CTL_VIA_PMIX || m->u.joined.via == ASR_CTL_VIA_PMI1 ||
                      m->u.joined.via == ASR_CTL_VIA_PMI2,
                  "JOINED via");
      break;
    case ASR_CTL_RANK_STATE:
      FUZZ_ASSERT(m->u.rank_state.rank < ASR_CTL_MAX_RANKS &&
                      m->u.rank_state.state <= ASR_CTL_RANK_FINISHED &&
                      m->u.rank_state.incarnation <= ASR_CTL_MAX_INCARNATION && m->u.rank_state.why,
                  "RANK_STATE fields");
      break;
    case ASR_CTL_TRACE:
      FUZZ_ASSERT(m->u.trace.exited && m->u.trace.file < ASR_CTL_TRACE_MAX_FILES &&
                      !(m->u.trace.flags & ~ASR_CTL_TRACE_LAST) && m->u.trace.len <= ASR_CTL_TRACE_PIECE,
                  "TRACE fields");
      break;
    case ASR_CTL_TRACE_END:
      FUZZ_ASSERT(m->u.trace_end.files <= ASR_CTL_TRACE_MAX_FILES, "TRACE_END files");
      break;
    case ASR_CTL_KILL: FUZZ_ASSERT(m->u.kill.sig >= 1 && m->u.kill.sig <= 64, "KILL signal"); break;
    case ASR_CTL_ABORT: FUZZ_ASSERT(m->u.abort.msg != NULL, "ABORT message"); break;
    case ASR_CTL_ERROR: FUZZ_ASSERT(m->u.error.msg != NULL, "ERROR message"); break;
    case ASR_CTL_REPORT_REQ:
      FUZZ_ASSERT(m->u.report_req.timeout_ms >= ASR_CTL_REPORT_MIN_MS &&
                      m->u.report_req.timeout_ms <= ASR_CTL_REPORT_MAX_MS,
                  "REPORT_REQ timeout");
      break;
    case ASR_CTL_REPORT:
      FUZZ_ASSERT(m->u.report.pstate && !(m->u.report.flags & ~ASR_CTL_REP_FLAGS), "REPORT flags");
      FUZZ_ASSERT(
          m->u.report.text_len <= ASR_CTL_MAX_REPORT_TEXT && m->u.report.stack_len <= ASR_CTL_MAX_STACK,
          "REPORT lengths");
      break;
    case ASR_CTL_METRICS_REQ:
      FUZZ_ASSERT(m->u.metrics_req.timeout_ms >= ASR_CTL_REPORT_MIN_MS &&
                      m->u.metrics_req.timeout_ms <= ASR_CTL_REPORT_MAX_MS,
                  "METRICS_REQ timeout");
      break;
    case ASR_CTL_METRICS:
      FUZZ_ASSERT(m->u.metrics.rank < ASR_CTL_MAX_RANKS && !(m->u.metrics.flags & ~ASR_CTL_REP_FLAGS) &&
                      !(m->u.metrics.flags & ASR_CTL_REP_NO_STACK_TOOL) &&
                      m->u.metrics.text_len <= ASR_CTL_MAX_REPORT_TEXT,
                  "METRICS fields");
      break;
    case ASR_CTL_ROUTED: {
      FUZZ_ASSERT(m->u.routed.host < ASR_CTL_MAX_HOSTS || m->u.routed.host == ASR_CTL_ALL_HOSTS,
                  "ROUTED host");
      FUZZ_ASSERT(m->u.routed.type > ASR_CTL_INVALID && m->u.routed.type < ASR_CTL__COUNT &&
                      m->u.routed.type != ASR_CTL_ROUTED,
                  "ROUTED type");
      /* what a hop passes on decodes as its type (the decoder checked) */
      asr_ctl_msg_t in;
      char w[256];
      FUZZ_ASSERT(
          asr_ctl_msg_decode((int)m->u.routed.type, m->u.routed.data, m->u.routed.len, &in, w, sizeof w) == 0,
          "ROUTED payload: %s", w);
      asr_ctl_msg_free(&in);
      break;
    }
    case ASR_CTL_FENCE_SUB: {
      const uint8_t *p = m->u.fence_sub.entries, *b;
      size_t len = m->u.fence_sub.len, bl;
      uint32_t h, n = 0;
      while (asr_ctl_fence_sub_next(&p, &len, &h, &b, &bl)) {
        FUZZ_ASSERT(h < ASR_CTL_MAX_HOSTS, "FENCE_SUB host");
        n++;
      }
      FUZZ_ASSERT(n == m->u.fence_sub.n && len == 0, "FENCE_SUB entries %u of %u", n, m->u.fence_sub.n);
      break;
    }
    case ASR_CTL_LOST: FUZZ_ASSERT(m->u.lost.why && m->u.lost.host < ASR_CTL_MAX_HOSTS, "LOST"); break;
    default: break;
  }
}

/* Decodes one payload of the given type and checks the round trip. */
static void one(int type, const uint8_t *p, size_t len) {
  asr_ctl_msg_t m;
  char why[256] = "";
  int rc = asr_ctl_msg_decode(type, p, len, &m, why, sizeof why);
  if (rc != 0) {
    FUZZ_ASSERT(rc == ASR_EPROTO && why[0], "a refusal without a reason (rc %d)", rc);
    return;
  }
  check_fields(&m);
  asr_buf_t a = {0}, b = {0};
  FUZZ_ASSERT(asr_ctl_frame(&m, &a) == 0, "a decoded %s does not encode", asr_ctl_type_name(type));
  int t2;
  uint32_t l2;
  FUZZ_ASSERT(
      asr_ctl_header_parse(a.data, &t2, &l2, why, sizeof why) == 0 && t2 == type && l2 == a.len - ASR_CTL_HDR,
      "the framed %s's header", asr_ctl_type_name(type));
  asr_ctl_msg_t m2;
  FUZZ_ASSERT(asr_ctl_msg_decode(type, a.data + ASR_CTL_HDR, l2, &m2, why, sizeof why) == 0, "re-decode: %s",
              why);
  FUZZ_ASSERT(asr_ctl_frame(&m2, &b) == 0, "re-encode");
  FUZZ_ASSERT(a.len == b.len && memcmp(a.data, b.data, a.len) == 0, "%s: no fixed point",
              asr_ctl_type_name(type));
  asr_ctl_msg_free(&m2);
  asr_ctl_msg_free(&m);
  asr_buf_free(&a);
  asr_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  /* every decoder on the raw bytes */
  one(1 + data[0] % (ASR_CTL__COUNT - 1), data + 1, size - 1);
  /* the stream as a connection cuts it */
  size_t off = 0;
  while (size - off >= ASR_CTL_HDR) {
    int type;
    uint32_t len;
    char why[256];
    if (asr_ctl_header_parse(data + off, &type, &len, why, sizeof why) != 0) {
      FUZZ_ASSERT(why[0], "a bad header without a reason");
      break;
    }
    FUZZ_ASSERT(type > ASR_CTL_INVALID && type < ASR_CTL__COUNT && len <= ASR_CTL_MAX_PAYLOAD,
                "header limits");
    if (size - off - ASR_CTL_HDR < len) break; /* the rest has not arrived */
    one(type, data + off + ASR_CTL_HDR, len);
    off += ASR_CTL_HDR + len;
  }
  return 0;
}
