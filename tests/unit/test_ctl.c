/* test_ctl.c -- the control messages (ctl_msg.h) and connections (ctl.h):
 * every message round-trips; truncated, oversized, wrong-version and
 * out-of-range ones are refused with a reason; a connection on the loop
 * delivers bursts in order, ends cleanly, and reports a peer's garbage. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_loop.h"
#include "asr_sock.h"
#include "asr_test.h"
#include "asr_time.h"
#include "ctl.h"

static char *secret64(void) {
  static char s[65];
  for (int i = 0; i < 64; i++) s[i] = "0123456789abcdef"[i % 16];
  return s;
}

/* One valid example of every message type. */
static char *hosts[] = {"alpha", "beta"};
static uint32_t host_of[] = {0, 0, 1};
static uint32_t lnc_of[] = {0, 1, 0};
static char *args[] = {"--x", "", "two words"};
static char *env_n[] = {"FOO", "EMPTY"};
static char *env_v[] = {"bar=baz", ""};
static char *cores[] = {"0", "1-3", "4,6"};
static uint32_t pids[] = {4242, 4243, 99999};
static const uint8_t blob[] = {0, 1, 2, 0xff, 0};

/* A KILL(15) payload, and a FENCE_SUB's two entries: host 1 "ab", host 4 empty. */
static const uint8_t kill15[] = {15, 0, 0, 0};
static const uint8_t sub_entries[] = {1, 0, 0, 0, 2, 0, 0, 0, 'a', 'b', 4, 0, 0, 0, 0, 0, 0, 0};

static asr_ctl_msg_t example(int type) {
  asr_ctl_msg_t m = {.type = (asr_ctl_type_t)type};
  switch (type) {
    case ASR_CTL_HELLO:
      m.u.hello.index = 3;
      m.u.hello.host = "node-3";
      m.u.hello.pid = 1234;
      m.u.hello.secret_hex = secret64();
      break;
    case ASR_CTL_JOB:
      m.u.job = (asr_ctl_job_t){.nranks = 3,
                                .nhosts = 2,
                                .index = 1,
                                .host_names = hosts,
                                .host_of = host_of,
                                .lnc_of = lnc_of,
                                .program = "/bin/prog",
                                .nargs = 3,
                                .args = args,
                                .nenv = 2,
                                .env_names = env_n,
                                .env_values = env_v,
                                .bind_to = 1,
                                .report_bindings = 1,
                                .port = 7777,
                                .provider = "shm",
                                .nspace = "asr.1.x",
                                .if_spec = "",
                                .heartbeat_s = 10,
                                .wdir = "/work/dir",
                                .wdir_given = 1,
                                .stdin_rank = 2,
                                .provider_given = 1,
                                .map_by = 6, /* ppr:2:numa */
                                .ppr = 2,
                                .cpus_per_rank = 3,
                                .cores = cores,
                                .master_addr = "10.1.0.7",
                                .master_port = 29500,
                                .tree_radix = 4,
                                .tree_launch = 1,
                                .tree_agent = "ssh -p 2222",
                                .tree_asrd = "/opt/asr/bin/asrd",
                                .tree_ip = "10.1.0.1",
                                .on_failure = 2,
                                .trace = 1};
      break;
    case ASR_CTL_STARTED:
      m.u.started.n = 3;
      m.u.started.pids = pids;
      break;
    case ASR_CTL_OUTPUT:
      m.u.output.rank = 2;
      m.u.output.stream = 2;
      m.u.output.flags = ASR_CTL_OUT_PARTIAL | ASR_CTL_OUT_EOF;
      m.u.output.line = (const uint8_t *)"a line\twith tab";
      m.u.output.len = 15;
      break;
    case ASR_CTL_EXIT:
      m.u.exit.rank = 1;
      m.u.exit.status = 0x0900;
      m.u.exit.flags = ASR_CTL_EXIT_NOT_RUN;
      break;
    case ASR_CTL_FENCE:
    case ASR_CTL_FENCE_DONE:
      m.u.fence.id = 5;
      m.u.fence.data = blob;
      m.u.fence.len = sizeof blob;
      break;
    case ASR_CTL_ABORT:
      m.u.abort.rank = 7;
      m.u.abort.status = 3;
      m.u.abort.msg = "giving up";
      break;
    case ASR_CTL_KILL: m.u.kill.sig = 15; break;
    case ASR_CTL_STDIN:
      m.u.input.data = (const uint8_t *)"input\n";
      m.u.input.len = 6;
      break;
    case ASR_CTL_ERROR: m.u.error.msg = "asrd on x: broken"; break;
    case ASR_CTL_CREDIT: m.u.credit.bytes = 4096; break;
    case ASR_CTL_STDIN_CREDIT: m.u.credit.bytes = 65536; break;
    case ASR_CTL_OUTPUT_CLOSED: m.u.closed.stream = 1; break;
    case ASR_CTL_JOINED:
      m.u.joined.rank = 4;
      m.u.joined.what = ASR_CTL_JOINED_FINALIZED;
      m.u.joined.via = ASR_CTL_VIA_PMI1;
      break;
    case ASR_CTL_REPORT_REQ:
      m.u.report_req.id = 7;
      m.u.report_req.timeout_ms = 2000;
      m.u.report_req.flags = ASR_CTL_REPORT_STACKS;
      break;
    case ASR_CTL_REPORT:
      m.u.report.id = 7;
      m.u.report.rank = 3;
      m.u.report.pid = 4242;
      m.u.report.flags = ASR_CTL_REP_ANSWERED | ASR_CTL_REP_LAST;
      m.u.report.pstate = "S (sleeping) in hrtimer_nanosleep";
      m.u.report.text = (const uint8_t *)"proc\tpid=4242\n";
      m.u.report.text_len = 14;
      m.u.report.stack = (const uint8_t *)"#0 main";
      m.u.report.stack_len = 7;
      break;
    case ASR_CTL_METRICS_REQ:
      m.u.metrics_req.id = 9;
      m.u.metrics_req.timeout_ms = 1000;
      break;
    case ASR_CTL_METRICS:
      m.u.metrics.id = 9;
      m.u.metrics.rank = 5;
      m.u.metrics.flags = ASR_CTL_REP_ANSWERED | ASR_CTL_REP_LAST;
      m.u.metrics.held = 1234;
      m.u.metrics.text = (const uint8_t *)"proc\tpid=77\n";
      m.u.metrics.text_len = 12;
      break;
    case ASR_CTL_ROUTED:
      m.u.routed.host = 3;
      m.u.routed.type = ASR_CTL_KILL;
      m.u.routed.data = kill15;
      m.u.routed.len = sizeof kill15;
      break;
    case ASR_CTL_FENCE_SUB:
      m.u.fence_sub.id = 2;
      m.u.fence_sub.n = 2;
      m.u.fence_sub.entries = sub_entries;
      m.u.fence_sub.len = sizeof sub_entries;
      break;
    case ASR_CTL_LOST:
      m.u.lost.host = 5;
      m.u.lost.why = "lost contact with asrd on host n5";
      break;
    case ASR_CTL_ENDS_ASK:
    case ASR_CTL_ENDS: m.u.ends.id = 0xfffffffeu; break;
    case ASR_CTL_RANK_STATE:
      m.u.rank_state.rank = 3;
      m.u.rank_state.state = ASR_CTL_RANK_RESTARTING;
      m.u.rank_state.incarnation = 2;
      m.u.rank_state.status = 9;
      m.u.rank_state.why = "peer rank 3 on host n2 died: killed by signal 9 (Killed)";
      break;
    case ASR_CTL_CLOCK_ASK:
    case ASR_CTL_CLOCK:
      m.u.clock.seq = 5;
      m.u.clock.t = 0x123456789abcdef0ull;
      m.u.clock.answer = type == ASR_CTL_CLOCK ? 0xfedcba9876543210ull : 0;
      break;
    case ASR_CTL_TRACE:
      m.u.trace.file = 2;
      m.u.trace.flags = ASR_CTL_TRACE_LAST;
      m.u.trace.exited = "signal 9";
      m.u.trace.data = (const uint8_t *)"ASRTRC1";
      m.u.trace.len = 8;
      break;
    case ASR_CTL_TRACE_END:
      m.u.trace_end.files = 3;
      m.u.trace_end.offset = (uint64_t)-12345;
      m.u.trace_end.error = 678;
      break;
    default: break;
  }
  return m;
}

static void check_same(const asr_ctl_msg_t *a, const asr_ctl_msg_t *b) {
  ASSERT_EQ(a->type, b->type);
  switch (a->type) {
    case ASR_CTL_HELLO:
      ASSERT_EQ(a->u.hello.index, b->u.hello.index);
      ASSERT_STREQ(a->u.hello.host, b->u.hello.host);
      ASSERT_EQ(a->u.hello.pid, b->u.hello.pid);
      ASSERT_STREQ(a->u.hello.secret_hex, b->u.hello.secret_hex);
      break;
    case ASR_CTL_JOB: {
      const asr_ctl_job_t *x = &a->u.job, *y = &b->u.job;
      ASSERT_EQ(x->nranks, y->nranks);
      ASSERT_EQ(x->nhosts, y->nhosts);
      ASSERT_EQ(x->index, y->index);
      for (uint32_t i = 0; i < x->nhosts; i++) ASSERT_STREQ(x->host_names[i], y->host_names[i]);
      for (uint32_t i = 0; i < x->nranks; i++) {
        ASSERT_EQ(x->host_of[i], y->host_of[i]);
        ASSERT_EQ(x->lnc_of[i], y->lnc_of[i]);
      }
      ASSERT_STREQ(x->program, y->program);
      ASSERT_EQ(x->nargs, y->nargs);
      for (uint32_t i = 0; i < x->nargs; i++) ASSERT_STREQ(x->args[i], y->args[i]);
      ASSERT(y->args[y->nargs] == NULL);
      ASSERT_EQ(x->nenv, y->nenv);
      for (uint32_t i = 0; i < x->nenv; i++) {
        ASSERT_STREQ(x->env_names[i], y->env_names[i]);
        ASSERT_STREQ(x->env_values[i], y->env_values[i]);
      }
      ASSERT_EQ(x->bind_to, y->bind_to);
      ASSERT_EQ(x->report_bindings, y->report_bindings);
      ASSERT_EQ(x->port, y->port);
      ASSERT_STREQ(x->provider, y->provider);
      ASSERT_STREQ(x->nspace, y->nspace);
      ASSERT_STREQ(x->if_spec, y->if_spec);
      ASSERT_EQ(x->heartbeat_s, y->heartbeat_s);
      ASSERT_STREQ(x->wdir, y->wdir);
      ASSERT_EQ(x->wdir_given, y->wdir_given);
      ASSERT_EQ(x->stdin_rank, y->stdin_rank);
      ASSERT_EQ(x->provider_given, y->provider_given);
      ASSERT_EQ(x->map_by, y->map_by);
      ASSERT_EQ(x->ppr, y->ppr);
      ASSERT_EQ(x->cpus_per_rank, y->cpus_per_rank);
      ASSERT_EQ(!x->cores, !y->cores);
      for (uint32_t i = 0; x->cores && i < x->nranks; i++) ASSERT_STREQ(x->cores[i], y->cores[i]);
      ASSERT_STREQ(x->master_addr, y->master_addr);
      ASSERT_EQ(x->master_port, y->master_port);
      ASSERT_EQ(x->tree_radix, y->tree_radix);
      ASSERT_EQ(x->tree_launch, y->tree_launch);
      ASSERT_STREQ(x->tree_agent, y->tree_agent);
      ASSERT_STREQ(x->tree_asrd, y->tree_asrd);
      ASSERT_STREQ(x->tree_ip, y->tree_ip);
      ASSERT_EQ(x->trace, y->trace);
      ASSERT_EQ(x->on_failure, y->on_failure);
      break;
    }
    case ASR_CTL_STARTED:
      ASSERT_EQ(a->u.started.n, b->u.started.n);
      for (uint32_t i = 0; i < a->u.started.n; i++) ASSERT_EQ(a->u.started.pids[i], b->u.started.pids[i]);
      break;
    case ASR_CTL_OUTPUT:
      ASSERT_EQ(a->u.output.rank, b->u.output.rank);
      ASSERT_EQ(a->u.output.stream, b->u.output.stream);
      ASSERT_EQ(a->u.output.flags, b->u.output.flags);
      ASSERT_EQ(a->u.output.len, b->u.output.len);
      ASSERT_MEMEQ(a->u.output.line, b->u.output.line, a->u.output.len);
      break;
    case ASR_CTL_EXIT:
      ASSERT_EQ(a->u.exit.rank, b->u.exit.rank);
      ASSERT_EQ(a->u.exit.status, b->u.exit.status);
      ASSERT_EQ(a->u.exit.flags, b->u.exit.flags);
      break;
    case ASR_CTL_FENCE:
    case ASR_CTL_FENCE_DONE:
      ASSERT_EQ(a->u.fence.id, b->u.fence.id);
      ASSERT_EQ(a->u.fence.len, b->u.fence.len);
      ASSERT_MEMEQ(a->u.fence.data, b->u.fence.data, a->u.fence.len);
      break;
    case ASR_CTL_ABORT:
      ASSERT_EQ(a->u.abort.rank, b->u.abort.rank);
      ASSERT_EQ(a->u.abort.status, b->u.abort.status);
      ASSERT_STREQ(a->u.abort.msg, b->u.abort.msg);
      break;
    case ASR_CTL_KILL: ASSERT_EQ(a->u.kill.sig, b->u.kill.sig); break;
    case ASR_CTL_STDIN:
      ASSERT_EQ(a->u.input.len, b->u.input.len);
      ASSERT_MEMEQ(a->u.input.data, b->u.input.data, a->u.input.len);
      break;
    case ASR_CTL_ERROR: ASSERT_STREQ(a->u.error.msg, b->u.error.msg); break;
    case ASR_CTL_CREDIT:
    case ASR_CTL_STDIN_CREDIT: ASSERT_EQ(a->u.credit.bytes, b->u.credit.bytes); break;
    case ASR_CTL_OUTPUT_CLOSED: ASSERT_EQ(a->u.closed.stream, b->u.closed.stream); break;
    case ASR_CTL_JOINED:
      ASSERT_EQ(a->u.joined.rank, b->u.joined.rank);
      ASSERT_EQ(a->u.joined.what, b->u.joined.what);
      ASSERT_EQ(a->u.joined.via, b->u.joined.via);
      break;
    case ASR_CTL_REPORT_REQ:
      ASSERT_EQ(a->u.report_req.id, b->u.report_req.id);
      ASSERT_EQ(a->u.report_req.timeout_ms, b->u.report_req.timeout_ms);
      ASSERT_EQ(a->u.report_req.flags, b->u.report_req.flags);
      break;
    case ASR_CTL_REPORT:
      ASSERT_EQ(a->u.report.id, b->u.report.id);
      ASSERT_EQ(a->u.report.rank, b->u.report.rank);
      ASSERT_EQ(a->u.report.pid, b->u.report.pid);
      ASSERT_EQ(a->u.report.flags, b->u.report.flags);
      ASSERT_STREQ(a->u.report.pstate, b->u.report.pstate);
      ASSERT_EQ(a->u.report.text_len, b->u.report.text_len);
      ASSERT_MEMEQ(a->u.report.text, b->u.report.text, a->u.report.text_len);
      ASSERT_EQ(a->u.report.stack_len, b->u.report.stack_len);
      ASSERT_MEMEQ(a->u.report.stack, b->u.report.stack, a->u.report.stack_len);
      break;
    case ASR_CTL_METRICS_REQ:
      ASSERT_EQ(a->u.metrics_req.id, b->u.metrics_req.id);
      ASSERT_EQ(a->u.metrics_req.timeout_ms, b->u.metrics_req.timeout_ms);
      break;
    case ASR_CTL_METRICS:
      ASSERT_EQ(a->u.metrics.id, b->u.metrics.id);
      ASSERT_EQ(a->u.metrics.rank, b->u.metrics.rank);
      ASSERT_EQ(a->u.metrics.flags, b->u.metrics.flags);
      ASSERT_EQ(a->u.metrics.held, b->u.metrics.held);
      ASSERT_EQ(a->u.metrics.text_len, b->u.metrics.text_len);
      ASSERT_MEMEQ(a->u.metrics.text, b->u.metrics.text, a->u.metrics.text_len);
      break;
    case ASR_CTL_ROUTED:
      ASSERT_EQ(a->u.routed.host, b->u.routed.host);
      ASSERT_EQ(a->u.routed.type, b->u.routed.type);
      ASSERT_EQ(a->u.routed.len, b->u.routed.len);
      ASSERT_MEMEQ(a->u.routed.data, b->u.routed.data, a->u.routed.len);
      break;
    case ASR_CTL_FENCE_SUB: {
      ASSERT_EQ(a->u.fence_sub.id, b->u.fence_sub.id);
      ASSERT_EQ(a->u.fence_sub.n, b->u.fence_sub.n);
      ASSERT_EQ(a->u.fence_sub.len, b->u.fence_sub.len);
      ASSERT_MEMEQ(a->u.fence_sub.entries, b->u.fence_sub.entries, a->u.fence_sub.len);
      const uint8_t *p = b->u.fence_sub.entries, *eb;
      size_t len = b->u.fence_sub.len, blen;
      uint32_t h;
      ASSERT(asr_ctl_fence_sub_next(&p, &len, &h, &eb, &blen));
      ASSERT_EQ(h, 1u);
      ASSERT_EQ(blen, 2u);
      ASSERT_MEMEQ(eb, "ab", 2);
      ASSERT(asr_ctl_fence_sub_next(&p, &len, &h, &eb, &blen));
      ASSERT_EQ(h, 4u);
      ASSERT_EQ(blen, 0u);
      ASSERT(!asr_ctl_fence_sub_next(&p, &len, &h, &eb, &blen));
      break;
    }
    case ASR_CTL_LOST:
      ASSERT_EQ(a->u.lost.host, b->u.lost.host);
      ASSERT_STREQ(a->u.lost.why, b->u.lost.why);
      break;
    case ASR_CTL_ENDS_ASK:
    case ASR_CTL_ENDS: ASSERT_EQ(a->u.ends.id, b->u.ends.id); break;
    case ASR_CTL_RANK_STATE:
      ASSERT_EQ(a->u.rank_state.rank, b->u.rank_state.rank);
      ASSERT_EQ(a->u.rank_state.state, b->u.rank_state.state);
      ASSERT_EQ(a->u.rank_state.incarnation, b->u.rank_state.incarnation);
      ASSERT_EQ(a->u.rank_state.status, b->u.rank_state.status);
      ASSERT_STREQ(a->u.rank_state.why, b->u.rank_state.why);
      break;
    case ASR_CTL_CLOCK_ASK:
    case ASR_CTL_CLOCK:
      ASSERT_EQ(a->u.clock.seq, b->u.clock.seq);
      ASSERT_EQ(a->u.clock.t, b->u.clock.t);
      ASSERT_EQ(a->u.clock.answer, b->u.clock.answer);
      break;
    case ASR_CTL_TRACE:
      ASSERT_EQ(a->u.trace.file, b->u.trace.file);
      ASSERT_EQ(a->u.trace.flags, b->u.trace.flags);
      ASSERT_STREQ(a->u.trace.exited, b->u.trace.exited);
      ASSERT_EQ(a->u.trace.len, b->u.trace.len);
      ASSERT_MEMEQ(a->u.trace.data, b->u.trace.data, a->u.trace.len);
      break;
    case ASR_CTL_TRACE_END:
      ASSERT_EQ(a->u.trace_end.files, b->u.trace_end.files);
      ASSERT_EQ(a->u.trace_end.offset, b->u.trace_end.offset);
      ASSERT_EQ(a->u.trace_end.error, b->u.trace_end.error);
      break;
    default: break;
  }
}

/* Every message type: encode, frame, parse the header, decode, compare. */
TEST(roundtrip_every_message) {
  for (int t = ASR_CTL_INVALID + 1; t < ASR_CTL__COUNT; t++) {
    asr_ctl_msg_t m = example(t);
    asr_buf_t b = {0};
    ASSERT_OK(asr_ctl_frame(&m, &b));
    ASSERT(b.len >= ASR_CTL_HDR);
    int type;
    uint32_t len;
    char why[256];
    ASSERT_OK(asr_ctl_header_parse(b.data, &type, &len, why, sizeof why));
    ASSERT_EQ(type, t);
    ASSERT_EQ(len, b.len - ASR_CTL_HDR);
    asr_ctl_msg_t d;
    int rc = asr_ctl_msg_decode(type, b.data + ASR_CTL_HDR, len, &d, why, sizeof why);
    ASSERT_MSG(rc == 0, "%s: %s", asr_ctl_type_name(t), why);
    check_same(&m, &d);
    asr_ctl_msg_free(&d);
    asr_buf_free(&b);
  }
  ASSERT_STREQ(asr_ctl_type_name(ASR_CTL_FENCE_DONE), "FENCE_DONE");
  ASSERT_STREQ(asr_ctl_type_name(99), "UNKNOWN");
}

/* Every strict prefix of every non-empty payload is refused, and so is the
 * payload with one byte more. */
TEST(truncated_and_trailing_refused) {
  for (int t = ASR_CTL_INVALID + 1; t < ASR_CTL__COUNT; t++) {
    asr_ctl_msg_t m = example(t);
    asr_buf_t b = {0};
    ASSERT_OK(asr_ctl_msg_encode(&m, &b));
    for (size_t n = 0; n < b.len; n++) {
      asr_ctl_msg_t d;
      char why[256] = "";
      int rc = asr_ctl_msg_decode(t, b.data, n, &d, why, sizeof why);
      ASSERT_MSG(rc == ASR_EPROTO, "%s decoded from %zu of %zu bytes", asr_ctl_type_name(t), n, b.len);
      ASSERT(why[0] != '\0');
    }
    asr_buf_put(&b, "x", 1);
    asr_ctl_msg_t d;
    char why[256] = "";
    ASSERT_EQ(asr_ctl_msg_decode(t, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
    ASSERT_CONTAINS(why, "after its last field");
    asr_buf_free(&b);
  }
}

/* Headers: wrong magic, wrong version, type 0 or past the end, length over
 * the limit, each refused with words that say which. */
TEST(bad_headers_refused) {
  asr_ctl_msg_t m = example(ASR_CTL_HEARTBEAT);
  asr_buf_t b = {0};
  ASSERT_OK(asr_ctl_frame(&m, &b));
  uint8_t h[ASR_CTL_HDR];
  int type;
  uint32_t len;
  char why[256];
  struct {
    int off;
    uint8_t val;
    const char *words;
  } cases[] = {{0, 'X', "bad magic"},
               {4, ASR_CTL_VERSION + 1, "another asr version"},
               {6, 0, "unknown message type"},
               {6, ASR_CTL__COUNT, "unknown message type"},
               {11, 0x7f, "longer than the limit"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(h, b.data, sizeof h);
    h[cases[i].off] = cases[i].val;
    why[0] = '\0';
    ASSERT_EQ(asr_ctl_header_parse(h, &type, &len, why, sizeof why), ASR_EPROTO);
    ASSERT_CONTAINS(why, cases[i].words);
  }
  asr_buf_free(&b);
}

/* Values out of range: the encoder refuses to write them, the decoder to
 * read them. */
/* The tree's messages (issue 28): a ROUTED never nests and its payload
 * must decode as its type; a FENCE_SUB has hosts and whole entries; a JOB's
 * radix is bounded and a tree names its agent. */
TEST(tree_messages_checked) {
  asr_buf_t b = {0};
  char why[256];
  asr_ctl_msg_t d;
  asr_ctl_msg_t r = example(ASR_CTL_ROUTED);
  r.u.routed.type = ASR_CTL_ROUTED;
  ASSERT_EQ(asr_ctl_msg_encode(&r, &b), ASR_EINVAL);
  asr_buf_put_u32(&b, 3), asr_buf_put_u32(&b, ASR_CTL_ROUTED), asr_buf_put_bytes(&b, kill15, 4);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_ROUTED, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "carries message type");
  asr_buf_free(&b);
  /* a KILL of signal 0 inside */
  static const uint8_t kill0[] = {0, 0, 0, 0};
  asr_buf_put_u32(&b, ASR_CTL_ALL_HOSTS), asr_buf_put_u32(&b, ASR_CTL_KILL), asr_buf_put_bytes(&b, kill0, 4);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_ROUTED, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "ROUTED KILL");
  asr_buf_free(&b);
  asr_buf_put_u32(&b, ASR_CTL_MAX_HOSTS), asr_buf_put_u32(&b, ASR_CTL_KILL), asr_buf_put_bytes(&b, kill15, 4);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_ROUTED, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "for host");
  asr_buf_free(&b);
  /* FENCE_SUB: no entries; an entry cut short; more entries than n */
  asr_ctl_msg_t f = example(ASR_CTL_FENCE_SUB);
  f.u.fence_sub.n = 0;
  ASSERT_EQ(asr_ctl_msg_encode(&f, &b), ASR_EINVAL);
  asr_buf_put_u32(&b, 1), asr_buf_put_u32(&b, 0);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_FENCE_SUB, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "of 0 hosts");
  asr_buf_free(&b);
  asr_buf_put_u32(&b, 1), asr_buf_put_u32(&b, 3), asr_buf_put(&b, sub_entries, sizeof sub_entries);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_FENCE_SUB, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "entry 2 of 3");
  asr_buf_free(&b);
  asr_buf_put_u32(&b, 1), asr_buf_put_u32(&b, 1), asr_buf_put(&b, sub_entries, sizeof sub_entries);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_FENCE_SUB, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "after its last field");
  asr_buf_free(&b);
  /* LOST of a host out of range */
  asr_ctl_msg_t l = example(ASR_CTL_LOST);
  l.u.lost.host = ASR_CTL_MAX_HOSTS;
  ASSERT_EQ(asr_ctl_msg_encode(&l, &b), ASR_EINVAL);
  /* JOB: radix above the bound; a tree without an agent */
  asr_ctl_msg_t j = example(ASR_CTL_JOB);
  j.u.job.tree_radix = ASR_CTL_MAX_RADIX + 1;
  ASSERT_EQ(asr_ctl_msg_encode(&j, &b), ASR_EINVAL);
  j.u.job.tree_radix = 2;
  j.u.job.tree_launch = 2;
  ASSERT_EQ(asr_ctl_msg_encode(&j, &b), ASR_EINVAL);
  j.u.job.tree_launch = 0;
  j.u.job.tree_radix = 2;
  j.u.job.tree_agent = "";
  ASSERT_OK(asr_ctl_msg_encode(&j, &b));
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_JOB, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "names no agent");
  asr_buf_free(&b);
}

TEST(out_of_range_fields_refused) {
  asr_buf_t b = {0};
  char why[256];
  asr_ctl_msg_t d;
  /* KILL 0 and 65 */
  asr_ctl_msg_t k = {.type = ASR_CTL_KILL, .u.kill.sig = 65};
  ASSERT_EQ(asr_ctl_msg_encode(&k, &b), ASR_EINVAL);
  ASSERT_EQ(b.len, 0u);
  asr_buf_put_u32(&b, 0);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_KILL, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "signal 0");
  asr_buf_free(&b);
  /* OUTPUT on stream 3 */
  asr_ctl_msg_t o = example(ASR_CTL_OUTPUT);
  o.u.output.stream = 3;
  ASSERT_EQ(asr_ctl_msg_encode(&o, &b), ASR_EINVAL);
  asr_buf_put_u32(&b, 0), asr_buf_put_u32(&b, 3), asr_buf_put_u32(&b, 0), asr_buf_put_bytes(&b, "x", 1);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_OUTPUT, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "stream 3");
  asr_buf_free(&b);
  /* OUTPUT with an unknown flag */
  o = example(ASR_CTL_OUTPUT);
  o.u.output.flags = 4;
  ASSERT_EQ(asr_ctl_msg_encode(&o, &b), ASR_EINVAL);
  asr_buf_put_u32(&b, 0), asr_buf_put_u32(&b, 1), asr_buf_put_u32(&b, 4), asr_buf_put_bytes(&b, "x", 1);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_OUTPUT, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "flags");
  asr_buf_free(&b);
  /* CREDIT of 0, OUTPUT_CLOSED of stream 0, JOINED saying 3, JOINED through 3 */
  asr_ctl_msg_t c = {.type = ASR_CTL_CREDIT};
  ASSERT_EQ(asr_ctl_msg_encode(&c, &b), ASR_EINVAL);
  asr_buf_put_u32(&b, 0);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_STDIN_CREDIT, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "0 bytes");
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_OUTPUT_CLOSED, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "stream 0");
  asr_buf_put_u32(&b, 3);
  asr_buf_put_u32(&b, ASR_CTL_VIA_PMIX);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_JOINED, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "says 3");
  asr_buf_free(&b);
  /* REPORT_REQ with a timeout of 0 or an unknown flag; REPORT with an unknown flag */
  asr_ctl_msg_t q = example(ASR_CTL_REPORT_REQ);
  q.u.report_req.timeout_ms = 0;
  ASSERT_EQ(asr_ctl_msg_encode(&q, &b), ASR_EINVAL);
  asr_buf_put_u32(&b, 1), asr_buf_put_u32(&b, 0), asr_buf_put_u32(&b, 0);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_REPORT_REQ, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "timeout 0 ms");
  asr_buf_free(&b);
  asr_ctl_msg_t rp = example(ASR_CTL_REPORT);
  rp.u.report.flags = 1u << 9;
  ASSERT_EQ(asr_ctl_msg_encode(&rp, &b), ASR_EINVAL);
  asr_buf_put_u32(&b, 1), asr_buf_put_u32(&b, 0), asr_buf_put_u32(&b, 1), asr_buf_put_u32(&b, 1u << 9);
  asr_buf_put_str(&b, "R"), asr_buf_put_bytes(&b, "", 0), asr_buf_put_bytes(&b, "", 0);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_REPORT, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "flags");
  asr_buf_free(&b);
  asr_buf_put_u32(&b, 0), asr_buf_put_u32(&b, ASR_CTL_JOINED_INIT), asr_buf_put_u32(&b, 4);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_JOINED, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "through 4");
  asr_buf_free(&b);
  /* a JOB whose rank sits on a host that does not exist, or LNC 128 */
  asr_ctl_msg_t j = example(ASR_CTL_JOB);
  uint32_t bad_host[] = {0, 0, 2};
  j.u.job.host_of = bad_host;
  ASSERT_EQ(asr_ctl_msg_encode(&j, &b), ASR_EINVAL);
  j = example(ASR_CTL_JOB);
  uint32_t bad_lnc[] = {0, 128, 0};
  j.u.job.lnc_of = bad_lnc;
  ASSERT_EQ(asr_ctl_msg_encode(&j, &b), ASR_EINVAL);
  /* a binding policy asrd could not follow: bind_to past auto, no cpus per rank, ppr 129 */
  j = example(ASR_CTL_JOB);
  j.u.job.bind_to = 5;
  ASSERT_EQ(asr_ctl_msg_encode(&j, &b), ASR_EINVAL);
  j = example(ASR_CTL_JOB);
  j.u.job.cpus_per_rank = 0;
  ASSERT_EQ(asr_ctl_msg_encode(&j, &b), ASR_EINVAL);
  j = example(ASR_CTL_JOB);
  j.u.job.ppr = 129;
  ASSERT_EQ(asr_ctl_msg_encode(&j, &b), ASR_EINVAL);
  /* hand-made: a JOB announcing a million ranks in a few bytes */
  asr_buf_put_u32(&b, ASR_CTL_MAX_RANKS), asr_buf_put_u32(&b, 1), asr_buf_put_u32(&b, 0);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_JOB, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_CONTAINS(why, "truncated");
  asr_buf_free(&b);
  /* a string with a NUL inside, and a host name of 128 bytes */
  asr_buf_put_u32(&b, 0), asr_buf_put_bytes(&b, "a\0b", 3), asr_buf_put_u32(&b, 1);
  asr_buf_put_str(&b, secret64());
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_HELLO, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  asr_buf_free(&b);
  char longname[129];
  memset(longname, 'h', 128);
  longname[128] = '\0';
  asr_ctl_msg_t h = example(ASR_CTL_HELLO);
  h.u.hello.host = longname;
  ASSERT_EQ(asr_ctl_msg_encode(&h, &b), ASR_EINVAL);
  /* a message with no fields that carries some */
  asr_buf_put_u32(&b, 1);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_DONE, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  ASSERT_EQ(asr_ctl_msg_decode(ASR_CTL_INVALID, b.data, b.len, &d, why, sizeof why), ASR_EPROTO);
  asr_buf_free(&b);
}

/* --- connections --------------------------------------------------------------- */

typedef struct {
  asr_ctl_conn_t c;
  int got, bad_order, closed, close_err;
  char close_why[256];
  int finish_on_done;
} peer_t;

static void on_msg(asr_ctl_conn_t *c, asr_ctl_msg_t *m, void *arg) {
  peer_t *p = arg;
  if (m->type == ASR_CTL_EXIT) {
    if (m->u.exit.rank != (uint32_t)p->got) p->bad_order = 1;
    p->got++;
  }
  if (m->type == ASR_CTL_DONE && p->finish_on_done) asr_ctl_finish(c, 2000);
}

static void on_close(asr_ctl_conn_t *c, int err, const char *why, void *arg) {
  (void)c;
  peer_t *p = arg;
  p->closed++;
  p->close_err = err;
  snprintf(p->close_why, sizeof p->close_why, "%s", why);
}

static void pair(asr_loop_t *l, peer_t *a, peer_t *b) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_OK(asr_ctl_start(l, &a->c, sv[0], on_msg, on_close, a));
  ASSERT_OK(asr_ctl_start(l, &b->c, sv[1], on_msg, on_close, b));
}

/* 20000 messages sent in one go arrive whole and in order; then a clean
 * finish: the sender shuts its side after the last one, the receiver
 * finishes on DONE, both see 0 and nothing is left in flight. */
TEST(conn_burst_in_order_and_clean_finish) {
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  peer_t a = {0}, b = {0};
  pair(l, &a, &b);
  b.finish_on_done = 1;
  for (int i = 0; i < 20000; i++) {
    asr_ctl_msg_t m = {.type = ASR_CTL_EXIT, .u.exit = {.rank = (uint32_t)i, .status = 0}};
    ASSERT_OK(asr_ctl_send(&a.c, &m));
  }
  ASSERT_OK(asr_ctl_send_empty(&a.c, ASR_CTL_DONE));
  asr_ctl_finish(&a.c, 5000);
  ASSERT_EQ(asr_ctl_send_empty(&a.c, ASR_CTL_HEARTBEAT), ASR_ENOTCONN); /* finishing: no more */
  uint64_t t0 = asr_time_ms();
  while ((a.closed == 0 || b.closed == 0) && asr_time_ms() - t0 < 5000) asr_loop_run_once(l, 100);
  ASSERT_EQ(b.got, 20000);
  ASSERT(!b.bad_order);
  ASSERT_EQ(a.closed, 1);
  ASSERT_EQ(b.closed, 1);
  ASSERT_MSG(a.close_err == 0, "sender: %s", a.close_why);
  ASSERT_MSG(b.close_err == 0, "receiver: %s", b.close_why);
  asr_loop_free(l);
}

/* A control connection over TCP has Nagle off on both ends, the accepted
 * one too (accept does not set it): otherwise a small message written while
 * the last one is unacknowledged waits for the peer's delayed ACK, 40 ms on
 * Linux, at every hop of the tree. */
TEST(conn_tcp_no_delay_both_ends) {
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  uint16_t port = 0;
  int lfd = asr_sock_listen("127.0.0.1", 0, 4, &port, NULL, 0);
  ASSERT(lfd >= 0);
  int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT(cfd >= 0);
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ASSERT_EQ(connect(cfd, (struct sockaddr *)&a, sizeof a), 0);
  int afd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  ASSERT(afd >= 0);
  peer_t x = {0}, y = {0};
  ASSERT_OK(asr_ctl_start(l, &x.c, afd, on_msg, on_close, &x));
  ASSERT_OK(asr_ctl_start(l, &y.c, cfd, on_msg, on_close, &y));
  int fds[2] = {afd, cfd};
  for (int i = 0; i < 2; i++) {
    int v = 0;
    socklen_t len = sizeof v;
    ASSERT_EQ(getsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &v, &len), 0);
    ASSERT_MSG(v != 0, "the %s end of a control connection has Nagle on", i ? "connecting" : "accepted");
  }
  asr_ctl_close(&x.c);
  asr_ctl_close(&y.c);
  close(lfd);
  asr_loop_free(l);
}

/* Garbage from the peer: the connection ends with ASR_EPROTO and a reason;
 * a peer that vanishes: ASR_ECONNRESET; a finish the peer never answers:
 * ASR_ETIMEDOUT. */
TEST(conn_errors_reported) {
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  peer_t a = {0};
  ASSERT_OK(asr_ctl_start(l, &a.c, sv[0], on_msg, on_close, &a));
  ASSERT_EQ(write(sv[1], "GET / HTTP/1.0\r\n\r\n", 18), 18);
  for (int i = 0; i < 20 && !a.closed; i++) asr_loop_run_once(l, 100);
  ASSERT_EQ(a.closed, 1);
  ASSERT_EQ(a.close_err, ASR_EPROTO);
  ASSERT_CONTAINS(a.close_why, "bad magic");
  close(sv[1]);

  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  peer_t b = {0};
  ASSERT_OK(asr_ctl_start(l, &b.c, sv[0], on_msg, on_close, &b));
  /* half a message, then the peer goes */
  asr_buf_t f = {0};
  asr_ctl_msg_t m = example(ASR_CTL_ERROR);
  ASSERT_OK(asr_ctl_frame(&m, &f));
  ASSERT_EQ(write(sv[1], f.data, f.len - 3), (ssize_t)f.len - 3);
  close(sv[1]);
  for (int i = 0; i < 20 && !b.closed; i++) asr_loop_run_once(l, 100);
  ASSERT_EQ(b.close_err, ASR_EPROTO);
  ASSERT_CONTAINS(b.close_why, "middle of a message");
  asr_buf_free(&f);

  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  peer_t c = {0};
  ASSERT_OK(asr_ctl_start(l, &c.c, sv[0], on_msg, on_close, &c));
  close(sv[1]);
  for (int i = 0; i < 20 && !c.closed; i++) asr_loop_run_once(l, 100);
  ASSERT_EQ(c.close_err, ASR_ECONNRESET);

  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  peer_t d = {0};
  ASSERT_OK(asr_ctl_start(l, &d.c, sv[0], on_msg, on_close, &d));
  asr_ctl_finish(&d.c, 100); /* the peer (sv[1]) never closes */
  uint64_t t0 = asr_time_ms();
  while (!d.closed && asr_time_ms() - t0 < 3000) asr_loop_run_once(l, 500);
  ASSERT_EQ(d.close_err, ASR_ETIMEDOUT);
  ASSERT(asr_time_ms() - t0 < 1500);
  close(sv[1]);
  asr_loop_free(l);
}

/* A death by a signal from outside (doc/design.md, "Verdicts by cause"),
 * not one the process brought on itself, nor an exit. */
TEST(killed_from_outside) {
  ASSERT(asr_ctl_killed_from_outside(SIGKILL));
  ASSERT(asr_ctl_killed_from_outside(SIGTERM));
  ASSERT(asr_ctl_killed_from_outside(SIGINT));
  ASSERT(asr_ctl_killed_from_outside(SIGKILL | 0x80)); /* core dumped */
  ASSERT(!asr_ctl_killed_from_outside(SIGSEGV));
  ASSERT(!asr_ctl_killed_from_outside(SIGABRT | 0x80));
  ASSERT(!asr_ctl_killed_from_outside(SIGPIPE));
  ASSERT(!asr_ctl_killed_from_outside(SIGBUS));
  ASSERT(!asr_ctl_killed_from_outside(0));
  ASSERT(!asr_ctl_killed_from_outside(9 << 8)); /* exit 9 */
}
