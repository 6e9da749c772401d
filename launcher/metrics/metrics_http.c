/* metrics_http.c -- see metrics_http.h. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "metrics_http.h"

/* Where the head ends (just past its empty line), or 0 when it does not yet. */
static size_t head_end(const char *b, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (b[i] != '\n') continue;
    if (i + 1 < len && b[i + 1] == '\n') return i + 2;
    if (i + 2 < len && b[i + 1] == '\r' && b[i + 2] == '\n') return i + 3;
  }
  return 0;
}

static int is(const char *p, size_t n, const char *s) { return n == strlen(s) && memcmp(p, s, n) == 0; }

asr_http_req_t asr_http_parse(const char *buf, size_t len) {
  size_t end = head_end(buf, len < ASR_HTTP_HEAD_MAX ? len : ASR_HTTP_HEAD_MAX);
  if (!end) return len >= ASR_HTTP_HEAD_MAX ? ASR_HTTP_BAD : ASR_HTTP_MORE;
  /* every byte of the head is printable, a tab, CR or LF */
  for (size_t i = 0; i < end; i++) {
    unsigned char c = (unsigned char)buf[i];
    if ((c < 0x20 && c != '\t' && c != '\r' && c != '\n') || c == 0x7f) return ASR_HTTP_BAD;
  }
  size_t le = 0;
  while (buf[le] != '\n') le++; /* the request line (a newline is there: end > 0) */
  size_t ll = le && buf[le - 1] == '\r' ? le - 1 : le;
  const char *m = buf, *sp1 = memchr(buf, ' ', ll);
  if (!sp1 || sp1 == m) return ASR_HTTP_BAD;
  const char *t = sp1 + 1, *sp2 = memchr(t, ' ', ll - (size_t)(t - buf));
  if (!sp2 || sp2 == t || *t != '/') return ASR_HTTP_BAD;
  const char *v = sp2 + 1;
  size_t vl = ll - (size_t)(v - buf);
  if (!is(v, vl, "HTTP/1.0") && !is(v, vl, "HTTP/1.1")) return ASR_HTTP_BAD;
  /* each header line has a name and a colon */
  for (size_t p = le + 1; p < end;) {
    size_t q = p;
    while (buf[q] != '\n') q++;
    size_t n = q > p && buf[q - 1] == '\r' ? q - 1 - p : q - p;
    if (n > 0) {
      const char *colon = memchr(buf + p, ':', n);
      if (!colon || colon == buf + p) return ASR_HTTP_BAD;
    }
    p = q + 1;
  }
  size_t ml = (size_t)(sp1 - m), tl = (size_t)(sp2 - t);
  const char *qm = memchr(t, '?', tl);
  if (qm) tl = (size_t)(qm - t);
  int get = is(m, ml, "GET"), head = is(m, ml, "HEAD");
  if (!get && !head) return ASR_HTTP_METHOD;
  if (!is(t, tl, "/metrics")) return ASR_HTTP_NOT_FOUND;
  return get ? ASR_HTTP_METRICS : ASR_HTTP_HEAD;
}

size_t asr_http_head(int status, const char *ctype, size_t body_len, char *out, size_t outlen) {
  const char *reason = status == 200   ? "OK"
                       : status == 404 ? "Not Found"
                       : status == 405 ? "Method Not Allowed"
                                       : "Bad Request";
  int n = snprintf(out, outlen,
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
                   status, reason, ctype ? ctype : "text/plain; charset=utf-8", body_len,
                   status == 405 ? "Allow: GET, HEAD\r\n" : "");
  return n > 0 && (size_t)n < outlen ? (size_t)n : 0;
}
