/* report_fmt.c -- see report_fmt.h. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_err.h"
#include "asr_le.h"
#include "report_fmt.h"

int asr_report_header_parse(const uint8_t hdr[ASR_REPORT_HDR], uint32_t *type, uint32_t *len, char *why,
                            size_t whylen) {
  uint32_t m = asr_le_get32(hdr), t = asr_le_get32(hdr + 4), n = asr_le_get32(hdr + 8);
  if (m != ASR_REPORT_MAGIC) {
    snprintf(why, whylen, "bad magic 0x%08x on the report channel", m);
    return ASR_EPROTO;
  }
  if (t < ASR_REPORT_HELLO || t > ASR_REPORT_METRICS) {
    snprintf(why, whylen, "unknown report frame type %u", t);
    return ASR_EPROTO;
  }
  /* HELLO, ASK and MASK carry one u32; an ANSWER or METRICS its id and at
   * most the text bound */
  int text = t == ASR_REPORT_ANSWER || t == ASR_REPORT_METRICS;
  if ((!text && n != 4) || (text && (n < 4 || n > ASR_REPORT_MAX))) {
    snprintf(why, whylen, "report frame type %u with a %u-byte payload", t, n);
    return ASR_EPROTO;
  }
  *type = t;
  *len = n;
  return 0;
}

void asr_report_header_put(uint8_t hdr[ASR_REPORT_HDR], uint32_t type, uint32_t len) {
  asr_le_put32(hdr, ASR_REPORT_MAGIC);
  asr_le_put32(hdr + 4, type);
  asr_le_put32(hdr + 8, len);
}

static const char *const fence_names[] = {"none", "init", "barrier", "finalize"};

const char *asr_report_fence_name(int f) { return f >= 0 && f <= 3 ? fence_names[f] : "?"; }

/* One field's value as text into out (cap bytes, cut values fail). */
static int get_text(const char *v, size_t vlen, char *out, size_t cap) {
  if (vlen >= cap) return ASR_EPROTO;
  memcpy(out, v, vlen);
  out[vlen] = '\0';
  return 0;
}

static int get_ll(const char *v, size_t vlen, long long lo, long long hi, long long *out) {
  char tmp[32];
  if (vlen == 0 || get_text(v, vlen, tmp, sizeof tmp) != 0) return ASR_EPROTO;
  char *end;
  errno = 0;
  long long x = strtoll(tmp, &end, 10);
  if (errno || *end || x < lo || x > hi) return ASR_EPROTO;
  *out = x;
  return 0;
}

static int get_int(const char *v, size_t vlen, long long lo, long long hi, int *out) {
  long long x;
  if (get_ll(v, vlen, lo, hi, &x) != 0) return ASR_EPROTO;
  *out = (int)x;
  return 0;
}

static int get_ull(const char *v, size_t vlen, unsigned long long *out) {
  long long x;
  if (get_ll(v, vlen, 0, (long long)1 << 62, &x) != 0) return ASR_EPROTO;
  *out = (unsigned long long)x;
  return 0;
}

#define MAX_MS (1000LL * 86400 * 366 * 100) /* a century */

static int proc_field(asr_report_t *r, const char *n, size_t nl, const char *v, size_t vl) {
#define IS(s) (nl == sizeof(s) - 1 && memcmp(n, s, nl) == 0)
  if (IS("pid")) return get_int(v, vl, 1, 0x7fffffff, &r->pid);
  if (IS("rank")) return get_int(v, vl, -1, 1 << 24, &r->rank);
  if (IS("size")) return get_int(v, vl, 0, 1 << 24, &r->size);
  if (IS("lnc")) return get_int(v, vl, -1, 127, &r->lnc);
  if (IS("addr")) return get_text(v, vl, r->addr, sizeof r->addr);
  if (IS("finalized")) return get_int(v, vl, 0, 1, &r->finalized);
  if (IS("joined")) return get_int(v, vl, 0, 1, &r->joined);
  if (IS("fence")) {
    for (int f = 0; f < 4; f++)
      if (vl == strlen(fence_names[f]) && memcmp(v, fence_names[f], vl) == 0) {
        r->fence = f;
        return 0;
      }
    return ASR_EPROTO;
  }
  return 0;
}

static int lnc_field(asr_report_t *r, const char *n, size_t nl, const char *v, size_t vl) {
  if (r->nlnc == 0) return 0; /* past the eighth: not kept */
  int i = r->nlnc - 1;
  if (IS("lnc")) return get_int(v, vl, 0, 127, &r->lncs[i].lnc);
  if (IS("port")) return get_int(v, vl, 0, 65535, &r->lncs[i].port);
  if (IS("host")) return get_text(v, vl, r->lncs[i].host, sizeof r->lncs[i].host);
  if (IS("provider")) return get_text(v, vl, r->lncs[i].provider, sizeof r->lncs[i].provider);
  return 0;
}

static int comm_field(asr_report_comm_t *c, const char *n, size_t nl, const char *v, size_t vl) {
  if (IS("lnc")) return get_int(v, vl, 0, 127, &c->lnc);
  if (IS("dir")) {
    if (vl == 4 && memcmp(v, "SEND", 4) == 0) return c->dir = 0, 0;
    if (vl == 4 && memcmp(v, "RECV", 4) == 0) return c->dir = 1, 0;
    return ASR_EPROTO;
  }
  if (IS("ordinal")) return get_int(v, vl, 0, 0x7fffffff, &c->ordinal);
  if (IS("peer_rank")) return get_int(v, vl, -1, 1 << 24, &c->peer_rank);
  if (IS("peer_lnc")) return get_int(v, vl, 0, 127, &c->peer_lnc);
  if (IS("peer_ip")) return get_text(v, vl, c->peer_ip, sizeof c->peer_ip);
  if (IS("state")) return vl == 0 ? ASR_EPROTO : get_text(v, vl, c->state, sizeof c->state);
  if (IS("state_ms")) return get_ll(v, vl, 0, MAX_MS, &c->state_ms);
  if (IS("oldest_ms")) return get_ll(v, vl, -1, MAX_MS, &c->oldest_ms);
  if (IS("last_post_ms")) return get_ll(v, vl, -1, MAX_MS, &c->last_post_ms);
  if (IS("posted")) return get_ull(v, vl, &c->posted);
  if (IS("done")) return get_ull(v, vl, &c->done);
  if (IS("stashed")) return get_int(v, vl, 0, 128, &c->stashed);
  if (IS("ofi_posted")) return get_int(v, vl, 0, 128, &c->ofi_posted);
  if (IS("key")) return get_text(v, vl, c->key, sizeof c->key);
  if (IS("server")) return get_text(v, vl, c->server, sizeof c->server);
  if (IS("bytes")) return get_ull(v, vl, &c->bytes);
  if (IS("failed")) return get_ull(v, vl, &c->failed);
  return 0;
}

/* b=: exactly ASR_REPORT_HIST_BUCKETS counts, comma-separated; count is
 * their sum, which must stay within 2^62 as each count must. */
static int hist_buckets(asr_report_hist_t *h, const char *v, size_t vl) {
  size_t i = 0;
  h->count = 0;
  for (int k = 0; k < ASR_REPORT_HIST_BUCKETS; k++) {
    size_t j = i;
    while (j < vl && v[j] != ',') j++;
    if (get_ull(v + i, j - i, &h->b[k]) != 0 || h->b[k] > (1ull << 62) - h->count) return ASR_EPROTO;
    h->count += h->b[k];
    if (j == vl) return k == ASR_REPORT_HIST_BUCKETS - 1 ? 0 : ASR_EPROTO; /* too few */
    i = j + 1;
  }
  return ASR_EPROTO; /* too many */
}

static int hist_field(asr_report_hist_t *h, const char *n, size_t nl, const char *v, size_t vl) {
  if (IS("name")) {
    if (vl == 4 && memcmp(v, "xfer", 4) == 0) return h->kind = 0, 0;
    if (vl == 7 && memcmp(v, "connect", 7) == 0) return h->kind = 1, 0;
    return ASR_EPROTO;
  }
  if (IS("lnc")) return get_int(v, vl, 0, 127, &h->lnc);
  if (IS("dir")) {
    if (vl == 4 && memcmp(v, "SEND", 4) == 0) return h->dir = 0, 0;
    if (vl == 4 && memcmp(v, "RECV", 4) == 0) return h->dir = 1, 0;
    return ASR_EPROTO;
  }
  if (IS("sum_ns")) return get_ull(v, vl, &h->sum_ns);
  if (IS("b")) return hist_buckets(h, v, vl);
  return 0;
#undef IS
}

/* Makes room for one more of an array of n (cap: its room), up to max. */
static void *grow(void *arr, int n, int *cap, size_t size, int max) {
  if (n < *cap) return arr;
  if (*cap >= max) return NULL;
  int nc = *cap ? *cap * 2 : 16;
  void *a = realloc(arr, (size_t)nc * size);
  if (a) *cap = nc;
  return a;
}

int asr_report_parse(const char *text, size_t len, asr_report_t *r, char *why, size_t whylen) {
  memset(r, 0, sizeof *r);
  r->rank = -1;
  r->lnc = -1;
  int cap = 0, hcap = 0, line = 0;
  size_t pos = 0;
  while (pos < len) {
    line++;
    size_t end = pos;
    while (end < len && text[end] != '\n') end++;
    const char *p = text + pos, *e = text + end;
    pos = end + 1;
    for (const char *q = p; q < e; q++)
      if (*q == '\0') {
        snprintf(why, whylen, "line %d: a NUL byte", line);
        goto bad;
      }
    const char *w = p;
    while (w < e && *w != '\t') w++;
    size_t wl = (size_t)(w - p);
    enum { SKIP, PROC, LNC, COMM, HIST } kind = SKIP;
    asr_report_comm_t *c = NULL;
    asr_report_hist_t *h = NULL;
    if (wl == 4 && memcmp(p, "proc", 4) == 0) {
      kind = PROC;
      r->have_proc = 1;
    } else if (wl == 3 && memcmp(p, "lnc", 3) == 0) {
      kind = LNC;
      if (r->nlnc < 8) r->nlnc++;
    } else if (wl == 4 && memcmp(p, "comm", 4) == 0) {
      kind = COMM;
      if (r->ncomms == cap) {
        if (cap >= 65536) {
          snprintf(why, whylen, "line %d: more than 65536 comms", line);
          goto bad;
        }
        int nc = cap ? cap * 2 : 16;
        asr_report_comm_t *n = realloc(r->comms, (size_t)nc * sizeof *n);
        if (!n) {
          snprintf(why, whylen, "out of memory");
          goto bad;
        }
        r->comms = n;
        cap = nc;
      }
      c = &r->comms[r->ncomms++];
      memset(c, 0, sizeof *c);
      c->peer_rank = -1;
      c->oldest_ms = c->last_post_ms = -1;
    } else if (wl == 4 && memcmp(p, "hist", 4) == 0) {
      kind = HIST;
      asr_report_hist_t *a = grow(r->hists, r->nhists, &hcap, sizeof *a, 4096);
      if (!a) {
        snprintf(why, whylen, "line %d: more than 4096 histograms, or out of memory", line);
        goto bad;
      }
      r->hists = a;
      h = &r->hists[r->nhists++];
      memset(h, 0, sizeof *h);
      h->kind = -1;
    } else if (wl == 5 && memcmp(p, "trunc", 5) == 0) {
      r->truncated = 1;
    }
    while (kind != SKIP && w < e) {
      const char *f = w + 1, *fe = f;
      while (fe < e && *fe != '\t') fe++;
      w = fe;
      const char *eq = memchr(f, '=', (size_t)(fe - f));
      if (!eq) {
        snprintf(why, whylen, "line %d: a field without '='", line);
        goto bad;
      }
      size_t nl = (size_t)(eq - f), vl = (size_t)(fe - eq - 1);
      int rc = kind == PROC   ? proc_field(r, f, nl, eq + 1, vl)
               : kind == LNC  ? lnc_field(r, f, nl, eq + 1, vl)
               : kind == HIST ? hist_field(h, f, nl, eq + 1, vl)
                              : comm_field(c, f, nl, eq + 1, vl);
      if (rc) {
        snprintf(why, whylen, "line %d: bad field '%.*s'", line, (int)(nl < 40 ? nl : 40), f);
        goto bad;
      }
    }
    if (kind == COMM && !c->state[0]) {
      snprintf(why, whylen, "line %d: a comm without a state", line);
      goto bad;
    }
    if (kind == HIST && h->kind < 0) {
      snprintf(why, whylen, "line %d: a histogram without a name", line);
      goto bad;
    }
  }
  return 0;
bad:
  asr_report_free(r);
  return ASR_EPROTO;
}

void asr_report_free(asr_report_t *r) {
  free(r->comms);
  r->comms = NULL;
  r->ncomms = 0;
  free(r->hists);
  r->hists = NULL;
  r->nhists = 0;
}
