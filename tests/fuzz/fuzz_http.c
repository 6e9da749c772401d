/*
 * fuzz_http.c -- libFuzzer target for the one HTTP request asrrun
 * --metrics-port reads (launcher/metrics/metrics_http.c asr_http_parse):
 * bytes any process that reaches the port may send. For every input, and
 * for each of its prefixes a connection might have delivered so far:
 *  - the answer is one of the request kinds;
 *  - MORE only while no head ended within the bound, and never at the
 *    bound (a head that long is BAD: the reader stops reading);
 *  - a served request (GET or HEAD of /metrics) starts with its method and
 *    " /metrics".
 */
#include "config.h"

#include <string.h>

#include "fuzz.h"
#include "metrics_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *b = (const char *)data;
  size_t step = size / 16 + 1;
  for (size_t n = 0;; n = n + step < size ? n + step : size) {
    asr_http_req_t q = asr_http_parse(b, n);
    FUZZ_ASSERT(q >= ASR_HTTP_MORE && q <= ASR_HTTP_BAD, "kind %d", (int)q);
    FUZZ_ASSERT(q != ASR_HTTP_MORE || n < ASR_HTTP_HEAD_MAX, "MORE at the bound");
    if (q == ASR_HTTP_METRICS) FUZZ_ASSERT(n >= 13 && memcmp(b, "GET /metrics", 12) == 0, "served GET");
    if (q == ASR_HTTP_HEAD) FUZZ_ASSERT(n >= 14 && memcmp(b, "HEAD /metrics", 13) == 0, "served HEAD");
    if (n == size) break;
  }
  char head[256];
  size_t hl = asr_http_head(200, NULL, size, head, sizeof head);
  FUZZ_ASSERT(hl > 0 && hl < sizeof head && memcmp(head + hl - 4, "\r\n\r\n", 4) == 0, "answer head");
  return 0;
}
