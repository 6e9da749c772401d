/*
 * metrics_http.h -- the one HTTP request asrrun --metrics-port understands
 * (issue 52): its reading of a request's head, which any process that can
 * reach the port may send, and the answers' heads. The server on asrrun's
 * loop is launcher/asrrun/asrrun_metrics.c.
 *
 * A request is its head alone (a body is never read): a request line
 * "METHOD TARGET HTTP/1.x", header lines, an empty line; lines end in CRLF
 * or LF. GET or HEAD of /metrics (a query string is ignored) is served;
 * another target is 404, another method 405, and anything malformed, a
 * NUL or control byte, or a head longer than the bound is 400. Every answer
 * closes the connection (Connection: close).
 */
#ifndef ASR_METRICS_HTTP_H
#define ASR_METRICS_HTTP_H

#include <stddef.h>

#define ASR_HTTP_HEAD_MAX 8192 /* a request's head, at most */

typedef enum {
  ASR_HTTP_MORE = 0,  /* no whole head yet: read on */
  ASR_HTTP_METRICS,   /* GET /metrics */
  ASR_HTTP_HEAD,      /* HEAD /metrics */
  ASR_HTTP_NOT_FOUND, /* 404 */
  ASR_HTTP_METHOD,    /* 405 */
  ASR_HTTP_BAD        /* 400 */
} asr_http_req_t;

/* Reads the len bytes received so far (no NUL needed). */
asr_http_req_t asr_http_parse(const char *buf, size_t len);

/* Writes an answer's head for status (200, 400, 404, 405) with a body of
 * body_len bytes of content type ctype (NULL: text/plain) into out: its
 * length, or 0 when it does not fit. */
size_t asr_http_head(int status, const char *ctype, size_t body_len, char *out, size_t outlen);

#endif /* ASR_METRICS_HTTP_H */
