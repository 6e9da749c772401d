/* test_metrics.c -- asrrun --metrics-port's parts that need no job
 * (issue 52): the ranks' hist records (report_fmt.h) and their buckets,
 * the Prometheus text rendering (launcher/metrics/metrics_prom.c), and the
 * HTTP request reader (launcher/metrics/metrics_http.c). The served
 * endpoint under a real job, read by Prometheus' own parser, is
 * tests/python/test_metrics.py. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "asr_err.h"
#include "asr_test.h"
#include "metrics_http.h"
#include "metrics_prom.h"
#include "report_fmt.h"

/* b= with count n_i in bucket i, as a rank writes it */
static void buckets(char *out, size_t len, const unsigned *n) {
  size_t k = 0;
  for (int i = 0; i < ASR_REPORT_HIST_BUCKETS; i++)
    k += (size_t)snprintf(out + k, len - k, "%s%u", i ? "," : "", n[i]);
}

TEST(hist_buckets_are_powers_of_two_microseconds) {
  ASSERT_EQ(asr_report_hist_bucket(0), 0);
  ASSERT_EQ(asr_report_hist_bucket(1000), 0);
  ASSERT_EQ(asr_report_hist_bucket(1001), 1);
  ASSERT_EQ(asr_report_hist_bucket(2000), 1);
  ASSERT_EQ(asr_report_hist_bucket(2001), 2);
  ASSERT_EQ(asr_report_hist_bucket(1000ull << 24), 24);
  ASSERT_EQ(asr_report_hist_bucket((1000ull << 24) + 1), 25);
  ASSERT_EQ(asr_report_hist_bucket(UINT64_MAX / 2), ASR_REPORT_HIST_BUCKETS - 1);
  for (int i = 0; i < ASR_REPORT_HIST_BUCKETS - 1; i++) {
    ASSERT_EQ(asr_report_hist_bucket(ASR_REPORT_HIST_LE_NS(i)), i);         /* at most its bound */
    ASSERT_EQ(asr_report_hist_bucket(ASR_REPORT_HIST_LE_NS(i) + 1), i + 1); /* just over: the next */
  }
}

TEST(hist_records_parse_and_bad_ones_are_refused) {
  unsigned n[ASR_REPORT_HIST_BUCKETS] = {0};
  n[0] = 3, n[4] = 2, n[25] = 1;
  char b[400], text[600], why[200];
  buckets(b, sizeof b, n);
  snprintf(text, sizeof text, "hist\tname=connect\tlnc=3\tdir=RECV\tsum_ns=42\tb=%s\n", b);
  asr_report_t r;
  ASSERT_OK(asr_report_parse(text, strlen(text), &r, why, sizeof why));
  ASSERT_EQ(r.nhists, 1);
  ASSERT_EQ(r.hists[0].kind, 1);
  ASSERT_EQ(r.hists[0].lnc, 3);
  ASSERT_EQ(r.hists[0].dir, 1);
  ASSERT_EQ(r.hists[0].count, 6);
  ASSERT_EQ(r.hists[0].sum_ns, 42);
  asr_report_free(&r);
  const char *bad[] = {
      "hist\tname=xfer\tb=1,2,3\n",                                                 /* too few */
      "hist\tname=xfer\tb=0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n", /* too many */
      "hist\tname=xfer\tb=0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,\n",  /* a trailing comma */
      "hist\tname=xfer\tb=0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,-1,0\n",  /* a negative count */
      "hist\tname=other\n",                                                         /* an unknown name */
      "hist\tlnc=0\n",                                                              /* no name */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    why[0] = '\0';
    ASSERT_MSG(asr_report_parse(bad[i], strlen(bad[i]), &r, why, sizeof why) == ASR_EPROTO, "%s", bad[i]);
    ASSERT(why[0]);
  }
}

/* The line of out that starts with prefix, or NULL. */
static const char *line_of(const char *out, const char *prefix) {
  for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (strncmp(p, prefix, strlen(prefix)) == 0) return p;
  return NULL;
}

#define ASSERT_LINE(out, line)                                 \
  do {                                                         \
    const char *l_ = line_of(out, line "\n");                  \
    ASSERT_MSG(l_ != NULL, "no line '%s' in:\n%s", line, out); \
  } while (0)

static char *render(const asr_prom_job_t *job) {
  asr_buf_t b = {0};
  ASSERT_OK(asr_prom_render(job, &b));
  asr_buf_put(&b, "", 1);
  char *s = strdup((const char *)b.data + b.off);
  asr_buf_free(&b);
  return s;
}

TEST(render_sums_comms_per_peer_and_names_every_family) {
  unsigned n[ASR_REPORT_HIST_BUCKETS] = {0};
  n[0] = 5, n[3] = 2, n[25] = 1; /* 8 transfers: 5 of at most 1 us, 2 of at most 8 us, 1 over 16.8 s */
  char b[400], t0[2000], why[200];
  buckets(b, sizeof b, n);
  /* rank 0: two SEND comms to rank 1 (two ordinals: one sample), a RECV
   * comm from it, a comm made without a rank; its latency histogram */
  snprintf(t0, sizeof t0,
           "proc\tpid=10\trank=0\tsize=3\tlnc=0\taddr=\tfence=none\tfinalized=0\tjoined=1\n"
           "comm\tlnc=0\tdir=SEND\tordinal=0\tpeer_rank=1\tpeer_lnc=1\tstate=CONNECTED\tposted=10\tdone=7"
           "\tstashed=1\tbytes=700\tfailed=1\n"
           "comm\tlnc=0\tdir=SEND\tordinal=1\tpeer_rank=1\tpeer_lnc=1\tstate=CONNECTED\tposted=5\tdone=5"
           "\tbytes=50\tfailed=0\n"
           "comm\tlnc=0\tdir=RECV\tordinal=0\tpeer_rank=1\tpeer_lnc=1\tstate=CONNECTED\tposted=4\tdone="
           "3\tbytes=3\n"
           "comm\tlnc=0\tdir=SEND\tpeer_lnc=2\tstate=CONNECTED\tposted=1\tdone=1\tbytes=9\n"
           "hist\tname=xfer\tlnc=0\tdir=SEND\tsum_ns=17000000123\tb=%s\n",
           b);
  const char *t1 =
      "proc\tpid=11\trank=1\n"
      "comm\tlnc=1\tdir=RECV\tpeer_rank=0\tpeer_lnc=0\tstate=CONNECTED\tposted=12\tdone=12\tbytes=750\n";
  asr_report_t r0, r1;
  ASSERT_OK(asr_report_parse(t0, strlen(t0), &r0, why, sizeof why));
  ASSERT_OK(asr_report_parse(t1, strlen(t1), &r1, why, sizeof why));
  asr_prom_rank_t ranks[3] = {
      {.host = "a\"b", .answered = 1, .rep = &r0, .held = 4096},
      {.host = "c", .answered = 1, .rep = &r1, .restarts = 2, .failures = 2},
      {.host = "c", .missing = 1},
  };
  asr_prom_job_t job = {.nranks = 3, .ranks = ranks, .scrapes = 7};
  char *out = render(&job);
  ASSERT_LINE(out, "asr_metrics_ranks 3");
  ASSERT_LINE(out, "asr_metrics_missing_ranks 1");
  ASSERT_LINE(out, "asr_metrics_scrapes_total 7");
  ASSERT_LINE(out, "asr_metrics_rank_up{rank=\"2\",host=\"c\"} 0");
  ASSERT_LINE(out,
              "asr_bytes_total{rank=\"0\",peer=\"1\",lnc=\"0\",peer_lnc=\"1\",direction=\"send\",host="
              "\"a\\\"b\"} 750");
  ASSERT_LINE(out,
              "asr_messages_total{rank=\"0\",peer=\"1\",lnc=\"0\",peer_lnc=\"1\",direction=\"send\",host="
              "\"a\\\"b\"} 12");
  ASSERT_LINE(out,
              "asr_bytes_total{rank=\"0\",peer=\"-1\",lnc=\"0\",peer_lnc=\"2\",direction=\"send\",host="
              "\"a\\\"b\"} 9");
  ASSERT_LINE(
      out,
      "asr_bytes_total{rank=\"1\",peer=\"0\",lnc=\"1\",peer_lnc=\"0\",direction=\"recv\",host=\"c\"} 750");
  /* in flight: posted - done - failed, summed: (10 - 7 - 1) + 0 */
  ASSERT_LINE(out,
              "asr_requests_in_flight{rank=\"0\",peer=\"1\",lnc=\"0\",peer_lnc=\"1\",direction=\"send\",host="
              "\"a\\\"b\"} 2");
  ASSERT_LINE(out,
              "asr_requests_stashed{rank=\"0\",peer=\"1\",lnc=\"0\",peer_lnc=\"1\",direction=\"send\",host="
              "\"a\\\"b\"} 1");
  ASSERT_LINE(out,
              "asr_request_failures_total{rank=\"0\",peer=\"1\",lnc=\"0\",peer_lnc=\"1\",direction=\"send\","
              "host=\"a\\\"b\"} 1");
  /* the histogram: cumulative buckets, +Inf = _count, the sum in seconds */
  const char *lab = "rank=\"0\",lnc=\"0\",direction=\"send\",host=\"a\\\"b\"";
  char want[300];
  snprintf(want, sizeof want, "asr_transfer_latency_seconds_bucket{%s,le=\"1e-06\"} 5\n", lab);
  ASSERT_CONTAINS(out, want);
  snprintf(want, sizeof want, "asr_transfer_latency_seconds_bucket{%s,le=\"4e-06\"} 5\n", lab);
  ASSERT_CONTAINS(out, want);
  snprintf(want, sizeof want, "asr_transfer_latency_seconds_bucket{%s,le=\"8e-06\"} 7\n", lab);
  ASSERT_CONTAINS(out, want);
  snprintf(want, sizeof want, "asr_transfer_latency_seconds_bucket{%s,le=\"16.777216\"} 7\n", lab);
  ASSERT_CONTAINS(out, want);
  snprintf(want, sizeof want, "asr_transfer_latency_seconds_bucket{%s,le=\"+Inf\"} 8\n", lab);
  ASSERT_CONTAINS(out, want);
  snprintf(want, sizeof want, "asr_transfer_latency_seconds_count{%s} 8\n", lab);
  ASSERT_CONTAINS(out, want);
  snprintf(want, sizeof want, "asr_transfer_latency_seconds_sum{%s} 17.000000123\n", lab);
  ASSERT_CONTAINS(out, want);
  ASSERT_LINE(out, "asr_output_held_bytes{rank=\"0\",host=\"a\\\"b\"} 4096");
  ASSERT_LINE(out, "asr_rank_restarts_total{rank=\"1\",host=\"c\"} 2");
  ASSERT_LINE(out, "asr_rank_failures_total{rank=\"1\",host=\"c\"} 2");
  /* the format: each family once, HELP then TYPE, then only its samples */
  char fams[64][64];
  int nf = 0;
  const char *cur = NULL;
  for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
    if (strncmp(l, "# HELP ", 7) == 0) {
      char name[64];
      ASSERT(sscanf(l + 7, "%63s", name) == 1);
      for (int i = 0; i < nf; i++) ASSERT_MSG(strcmp(fams[i], name) != 0, "family %s twice", name);
      ASSERT(nf < 64);
      snprintf(fams[nf], sizeof fams[nf], "%s", name);
      cur = fams[nf++];
      l = strtok(NULL, "\n");
      ASSERT(l && strncmp(l, "# TYPE ", 7) == 0 && strncmp(l + 7, cur, strlen(cur)) == 0);
      const char *type = l + 7 + strlen(cur) + 1;
      ASSERT_MSG(strcmp(type, "counter") == 0 || strcmp(type, "gauge") == 0 || strcmp(type, "histogram") == 0,
                 "%s", l);
      ASSERT_MSG(strcmp(type, "counter") != 0 || strstr(cur, "_total"), "counter %s without _total", cur);
      continue;
    }
    ASSERT_MSG(cur && strncmp(l, cur, strlen(cur)) == 0, "sample '%s' outside its family", l);
  }
  ASSERT_EQ(nf, 14);
  free(out);
  asr_report_free(&r0);
  asr_report_free(&r1);
}

TEST(render_with_no_answer_at_all) {
  asr_prom_rank_t ranks[2] = {{.host = "h", .missing = 1}, {.host = "h"}}; /* one missing, one exited */
  asr_prom_job_t job = {.nranks = 2, .ranks = ranks, .scrapes = 1};
  char *out = render(&job);
  ASSERT_LINE(out, "asr_metrics_missing_ranks 1");
  ASSERT_LINE(out, "# TYPE asr_bytes_total counter");
  ASSERT(!strstr(out, "asr_bytes_total{"));
  free(out);
}

TEST(http_requests_read) {
  static const struct {
    const char *req;
    asr_http_req_t want;
  } cases[] = {
      {"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n", ASR_HTTP_METRICS},
      {"GET /metrics?name[]=up HTTP/1.0\r\n\r\n", ASR_HTTP_METRICS},
      {"GET /metrics HTTP/1.1\nHost: x\n\n", ASR_HTTP_METRICS}, /* LF alone */
      {"HEAD /metrics HTTP/1.1\r\n\r\n", ASR_HTTP_HEAD},
      {"GET / HTTP/1.1\r\n\r\n", ASR_HTTP_NOT_FOUND},
      {"GET /metricsx HTTP/1.1\r\n\r\n", ASR_HTTP_NOT_FOUND},
      {"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", ASR_HTTP_METHOD},
      {"GET /metrics HTTP/1.1\r\nHost: x\r\n", ASR_HTTP_MORE}, /* no end yet */
      {"GET /met", ASR_HTTP_MORE},
      {"", ASR_HTTP_MORE},
      {"GET /metrics HTTP/2\r\n\r\n", ASR_HTTP_BAD},
      {"GET metrics HTTP/1.1\r\n\r\n", ASR_HTTP_BAD},
      {"GET  /metrics HTTP/1.1\r\n\r\n", ASR_HTTP_BAD},
      {"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n", ASR_HTTP_BAD},
      {"GET /metrics HTTP/1.1\r\n: empty name\r\n\r\n", ASR_HTTP_BAD},
      {"GET /met\x01rics HTTP/1.1\r\n\r\n", ASR_HTTP_BAD},
      {"NONSENSE\r\n\r\n", ASR_HTTP_BAD},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    ASSERT_MSG(asr_http_parse(cases[i].req, strlen(cases[i].req)) == cases[i].want, "'%s'", cases[i].req);
  /* a NUL inside, and a head that never ends within the bound */
  ASSERT_EQ(asr_http_parse("GET /\0 HTTP/1.1\r\n\r\n", 19), ASR_HTTP_BAD);
  char *big = malloc(ASR_HTTP_HEAD_MAX);
  memset(big, 'a', ASR_HTTP_HEAD_MAX);
  ASSERT_EQ(asr_http_parse(big, ASR_HTTP_HEAD_MAX - 1), ASR_HTTP_MORE);
  ASSERT_EQ(asr_http_parse(big, ASR_HTTP_HEAD_MAX), ASR_HTTP_BAD);
  free(big);
  char head[200];
  size_t n = asr_http_head(200, ASR_PROM_CONTENT_TYPE, 12, head, sizeof head);
  ASSERT(n > 0 && n < sizeof head);
  ASSERT_STREQ(head,
               "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
               "Content-Length: 12\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(asr_http_head(404, NULL, 0, head, 20), 0); /* does not fit */
}
