/*
 * trace_merge.c -- trace records into one Chrome trace-event JSON file
 * (trace_merge.h; doc/trace.md is the format, common/asr_trace_fmt.h the
 * records'). Nothing a record says is trusted: an unknown kind is skipped,
 * a comm number no ASR_TR_COMM record named gives an event without a
 * comm, and every text is escaped.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "asr_comm_names.h"
#include "asr_err.h"
#include "trace_merge.h"

/* ASR_PATH_* of runtime/rt.h */
#define PATH_SM 3

typedef struct {
  int known;
  int send;
  int64_t peer;
  uint32_t peer_lnc, ordinal;
  uint64_t pair;
  char path[ASR_TR_TEXT + 1];
} comm_t;

typedef struct {
  const asr_trm_input_t *in;
  int pid;          /* the host's pid in the file */
  int64_t tid_base; /* the process's first track */
  comm_t *comms;    /* by comm number */
  uint32_t ncomms;
} proc_t;

typedef struct {
  uint64_t pair, seq;
  const proc_t *p;
  const asr_tr_rec_t *r;
  uint64_t t; /* the send's post or the receive's completion, on its host's clock */
} end_t;

typedef struct {
  int a, b;      /* hosts: a flow from a to b */
  int64_t slack; /* the least of its flows' (receive's end - send's post), each on its own clock */
} edge_t;

typedef struct {
  int pid;
  int64_t tid;
  long rank;
  int lnc;
} track_t;

typedef struct {
  FILE *out;
  int first;     /* no event written yet */
  uint64_t tmin; /* the earliest aligned stamp */
  const asr_trm_host_t *hosts;
  int nhosts;
} writer_t;

static void jstr(FILE *f, const char *s, size_t max) {
  fputc('"', f);
  for (size_t i = 0; i < max && s[i]; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20 || ch >= 0x7f)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

/* ns as microseconds with three decimals: exact */
static void jus(FILE *f, uint64_t ns) { fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000)); }

/* A stamp of proc p on the reference clock, less the job's first stamp. */
static uint64_t on_ref(const asr_trm_host_t *h, uint64_t t) {
  return t - (uint64_t)h->offset_ns; /* modulo 2^64: a stamp never trusted */
}

static uint64_t align(const writer_t *w, const proc_t *p, uint64_t t) {
  uint64_t v = on_ref(&w->hosts[p->in->host], t) - w->tmin;
  return v > UINT64_MAX / 2 ? 0 : v; /* before the first stamp: a damaged one */
}

static void ev_begin(writer_t *w, const char *name, const char *cat, char ph, int pid, int64_t tid,
                     uint64_t ts) {
  FILE *f = w->out;
  fputs(w->first ? "\n" : ",\n", f);
  w->first = 0;
  fputs("{\"name\":", f);
  jstr(f, name, 256);
  fprintf(f, ",\"cat\":\"%s\",\"ph\":\"%c\",\"pid\":%d,\"tid\":%" PRId64 ",\"ts\":", cat, ph, pid, tid);
  jus(f, ts);
}

/* An X event of record r: its span, then its args (the caller closes). */
static void ev_span(writer_t *w, const proc_t *p, const asr_tr_rec_t *r, int64_t tid, const char *name,
                    const char *cat) {
  uint64_t t0 = align(w, p, r->t0), t1 = align(w, p, r->t1 > r->t0 ? r->t1 : r->t0);
  ev_begin(w, name, cat, 'X', p->pid, tid, t0);
  fputs(",\"dur\":", w->out);
  jus(w->out, t1 - t0);
  fputs(",\"args\":{", w->out);
}

static const comm_t *comm_of(const proc_t *p, uint32_t id) {
  return id && id < p->ncomms && p->comms[id].known ? &p->comms[id] : NULL;
}

static void comm_name(FILE *f, const proc_t *p, const asr_tr_rec_t *r, const comm_t *c) {
  long rank = (long)p->in->proc->hdr.rank;
  if (!c) {
    fprintf(f, "\"comm\":\"r%ld.l%d.%u\"", rank, r->lnc == 0xff ? -1 : r->lnc, r->id);
    return;
  }
  fprintf(f, "\"comm\":\"r%ld.l%d.%c.", rank, r->lnc == 0xff ? -1 : r->lnc, c->send ? 's' : 'r');
  if (c->peer >= 0)
    fprintf(f, "%" PRId64, c->peer);
  else
    fputc('-', f);
  fprintf(f, ".l%u.%u\"", c->peer_lnc, c->ordinal);
}

static int64_t track_of(const proc_t *p, const asr_tr_rec_t *r) {
  if (p->in->proc->hdr.kind != ASR_TR_PROC_RANK) return p->tid_base;
  return p->tid_base + (r->lnc == 0xff ? 0 : 1 + r->lnc);
}

static const char *xfer_name(int type) {
  static const char *const n[] = {"request", "send", "recv", "write", "read", "xfer"};
  return type >= 1 && type <= 5 ? n[type] : n[0];
}

static const char *kv_name(int op) {
  switch (op) {
    case 16: return "kv SET";
    case 17: return "kv GET";
    case 19: return "kv LIST";
    case 20: return "kv DEL";
    default: return "kv request";
  }
}

static void text_of(const asr_tr_rec_t *r, char *out) {
  memcpy(out, r->u.text, ASR_TR_TEXT);
  out[ASR_TR_TEXT] = '\0';
}

/* A failure's text: its record and the continuations after it in the
 * keep area (same t0, id and lnc, sub 1). Returns the records it took. */
static size_t fail_text(const asr_tr_rec_t *keep, size_t n, size_t i, char *out, size_t cap) {
  size_t len = 0, k = i;
  for (; k < n; k++) {
    const asr_tr_rec_t *r = &keep[k];
    if (k > i && (r->kind != ASR_TR_FAIL || r->sub != 1 || r->t0 != keep[i].t0 || r->id != keep[i].id ||
                  r->lnc != keep[i].lnc))
      break;
    size_t m = strnlen(r->u.text, ASR_TR_TEXT);
    if (len + m >= cap) m = cap - 1 - len;
    memcpy(out + len, r->u.text, m);
    len += m;
  }
  out[len] = '\0';
  return k - i;
}

static void emit(writer_t *w, proc_t *p, const asr_tr_rec_t *r, const asr_tr_rec_t *keep, size_t nkeep,
                 size_t *skip, size_t at) {
  FILE *f = w->out;
  int64_t tid = track_of(p, r);
  const comm_t *c = comm_of(p, r->id);
  char text[8 * ASR_TR_TEXT + 1];
  switch (r->kind) {
    case ASR_TR_CONNECT:
      ev_span(w, p, r, tid, "connect", "connect");
      comm_name(f, p, r, c);
      fprintf(f,
              ",\"type\":\"%s\",\"peer\":%" PRId64
              ",\"peer_lnc\":%u,\"ordinal\":%u,\"result\":\"%s\",\"path\":",
              c && c->send ? "send"
              : c          ? "recv"
                           : "",
              c ? c->peer : -1, c ? c->peer_lnc : 0, c ? c->ordinal : 0,
              r->sub ? "CONNECTED" : "CONNECTION_ERROR");
      jstr(f, c ? c->path : "", ASR_TR_TEXT);
      fputs("}}", f);
      break;
    case ASR_TR_STATE:
      ev_span(w, p, r, tid, asr_comm_state_text(r->sub), "connect");
      comm_name(f, p, r, c);
      fputs("}}", f);
      break;
    case ASR_TR_XFER: {
      int type = r->sub & 0xf, ok = !!(r->sub & ASR_TR_X_OK);
      uint64_t stashed = (r->sub & ASR_TR_X_STASHED) && r->u.v.c > r->t0 ? r->u.v.c - r->t0 : 0;
      ev_span(w, p, r, tid, xfer_name(type), "xfer");
      comm_name(f, p, r, c);
      fprintf(f, ",\"peer\":%" PRId64 ",\"peer_lnc\":%u,\"bytes\":%" PRIu64 ",\"path\":", c ? c->peer : -1,
              c ? c->peer_lnc : 0, r->u.v.a);
      jstr(f, c ? c->path : "", ASR_TR_TEXT);
      fprintf(f, ",\"seq\":%" PRIu64 ",\"stashed_us\":", r->u.v.b);
      jus(f, stashed);
      fprintf(f, ",\"ok\":%s}}", ok ? "true" : "false");
      if (stashed) {
        asr_tr_rec_t s = *r;
        s.t1 = r->u.v.c;
        ev_span(w, p, &s, tid, "stashed", "stash");
        comm_name(f, p, r, c);
        fprintf(f, ",\"seq\":%" PRIu64 "}}", r->u.v.b);
      }
      break;
    }
    case ASR_TR_KV:
      text_of(r, text);
      ev_span(w, p, r, tid, kv_name(r->sub & 0x7f), "kv");
      fputs("\"key\":", f);
      jstr(f, text, ASR_TR_TEXT);
      fprintf(f, ",\"ok\":%s}}", r->sub & 0x80 ? "false" : "true");
      break;
    case ASR_TR_MR:
      ev_span(w, p, r, tid, "mr register", "mr");
      fprintf(f, "\"bytes\":%" PRIu64 "}}", r->u.v.a);
      break;
    case ASR_TR_FLUSH:
      ev_span(w, p, r, tid, "flush", "flush");
      comm_name(f, p, r, c);
      fputs("}}", f);
      break;
    case ASR_TR_CLOSE:
      if (r->sub == 2) {
        ev_begin(w, "peer closed", "close", 'i', p->pid, tid, align(w, p, r->t0));
        fputs(",\"s\":\"t\",\"args\":{", f);
        comm_name(f, p, r, c);
        fputs("}}", f);
        break;
      }
      ev_span(w, p, r, tid, "close drain", "close");
      comm_name(f, p, r, c);
      fprintf(f, ",\"result\":\"%s\"}}", r->sub ? "drained" : "not drained");
      break;
    case ASR_TR_NOTIF:
      ev_begin(w, "notification", "rma", 'i', p->pid, tid, align(w, p, r->t0));
      fputs(",\"s\":\"t\",\"args\":{", f);
      comm_name(f, p, r, c);
      fprintf(f, ",\"value\":\"%" PRIu64 "\"}}", r->u.v.a);
      break;
    case ASR_TR_FAIL:
      if (r->sub == 1) break; /* a continuation whose first record was not whole */
      *skip = fail_text(keep, nkeep, at, text, sizeof text) - 1;
      ev_begin(w, "failure", "fail", 'i', p->pid, tid, align(w, p, r->t0));
      fputs(",\"s\":\"t\",\"args\":{\"what\":", f);
      jstr(f, text, sizeof text);
      fputs("}}", f);
      break;
    case ASR_TR_PHASE:
      text_of(r, text);
      ev_span(w, p, r, tid, text, "launch");
      if (r->id && r->id <= (uint32_t)w->nhosts) {
        fputs("\"host\":", f);
        jstr(f, w->hosts[r->id - 1].name ? w->hosts[r->id - 1].name : "", 256);
      }
      fputs("}}", f);
      break;
    case ASR_TR_SPAWN:
      ev_span(w, p, r, tid, "spawn", "launch");
      fprintf(f, "\"rank\":%" PRId64 ",\"os_pid\":%" PRIu64 "}}", (int64_t)r->u.v.a, r->u.v.b);
      break;
    case ASR_TR_FENCE:
      ev_span(w, p, r, tid, r->sub == 2 ? "get" : r->sub == 3 ? "pmi fence" : "fence", "pmix");
      fprintf(f, "\"ranks\":%" PRIu64 ",\"bytes\":%" PRIu64 "}}", r->u.v.a, r->u.v.b);
      break;
    case ASR_TR_STALL:
      ev_span(w, p, r, tid, "output stall", "output");
      fprintf(f, "\"rank\":%" PRId64 ",\"stream\":\"%s\",\"bytes\":%" PRIu64 "}}", (int64_t)r->u.v.a,
              r->sub == 2 ? "stderr" : "stdout", r->u.v.b);
      break;
    default: break; /* COMM, COMM_PATH: read before; unknown kinds: skipped */
  }
}

static int cmp_end(const void *a, const void *b) {
  const end_t *x = a, *y = b;
  if (x->pair != y->pair) return x->pair < y->pair ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_edge(const void *a, const void *b) {
  const edge_t *x = a, *y = b;
  if (x->a != y->a) return x->a < y->a ? -1 : 1;
  return x->b < y->b ? -1 : x->b > y->b;
}

static int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

/* Each flow between two hosts bounds their offsets: on the reference
 * clock its receive cannot end before its send was posted, so
 * off_b - off_a <= t_recv - t_send (the edge's slack). The pings give
 * each measured host an interval [off - err, off + err] that holds its
 * true offset; narrowed by the edges (difference constraints, relaxed
 * until nothing moves), each still holds it, as the true offsets meet
 * every edge; and the intervals' midpoints meet every edge too (hi_b <=
 * hi_a + slack and lo_b <= lo_a + slack), so no flow of the file ends
 * before it starts. Hosts without a measured offset (err < 0) take no
 * part; if the intervals come out empty (a record that cannot be right),
 * nothing is changed. */
static void tighten(asr_trm_host_t *h, int n, edge_t *e, size_t ne) {
  int64_t *lo = malloc((size_t)n * sizeof *lo), *hi = malloc((size_t)n * sizeof *hi);
  if (!lo || !hi) goto out;
  for (int i = 0; i < n; i++) {
    lo[i] = sat_add(h[i].offset_ns, h[i].error_ns < 0 ? 0 : -h[i].error_ns);
    hi[i] = sat_add(h[i].offset_ns, h[i].error_ns < 0 ? 0 : h[i].error_ns);
  }
  int moved = 1;
  for (int round = 0; moved && round <= n + 1; round++) {
    moved = 0;
    for (size_t k = 0; k < ne; k++) {
      int a = e[k].a, b = e[k].b;
      if (h[a].error_ns < 0 || h[b].error_ns < 0) continue;
      int64_t c = e[k].slack;
      if (hi[b] > sat_add(hi[a], c)) hi[b] = sat_add(hi[a], c), moved = 1;
      if (lo[a] < sat_add(lo[b], -c)) lo[a] = sat_add(lo[b], -c), moved = 1;
    }
  }
  if (moved) goto out; /* did not settle: left as measured */
  for (int i = 0; i < n; i++)
    if (h[i].error_ns >= 0 && lo[i] > hi[i]) goto out;
  for (int i = 0; i < n; i++) {
    if (h[i].error_ns < 0) continue;
    h[i].offset_ns = lo[i] + (int64_t)(((uint64_t)hi[i] - (uint64_t)lo[i]) / 2);
    h[i].error_ns = (int64_t)(((uint64_t)hi[i] - (uint64_t)lo[i] + 1) / 2);
  }
out:
  free(lo);
  free(hi);
}

static int cmp_track(const void *a, const void *b) {
  const track_t *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int cmp_ospid(const void *a, const void *b) {
  const proc_t *x = *(proc_t *const *)a, *y = *(proc_t *const *)b;
  return x->in->proc->hdr.os_pid - y->in->proc->hdr.os_pid;
}

/* Reads each process's comms from its keep area. */
static int read_comms(proc_t *p) {
  const asr_trr_proc_t *t = p->in->proc;
  uint32_t max = 0;
  for (uint32_t i = 0; i < t->nkeep; i++)
    if ((t->keep[i].kind == ASR_TR_COMM || t->keep[i].kind == ASR_TR_COMM_PATH) && t->keep[i].id > max &&
        t->keep[i].id <= t->nkeep)
      max = t->keep[i].id;
  p->ncomms = max + 1;
  p->comms = calloc(p->ncomms, sizeof *p->comms);
  if (!p->comms) return ASR_ENOMEM;
  for (uint32_t i = 0; i < t->nkeep; i++) {
    const asr_tr_rec_t *r = &t->keep[i];
    if (r->id == 0 || r->id >= p->ncomms) continue;
    comm_t *c = &p->comms[r->id];
    if (r->kind == ASR_TR_COMM) {
      c->known = 1;
      c->send = r->sub == 1;
      c->pair = r->u.v.a;
      c->peer = (int64_t)r->u.v.b;
      c->peer_lnc = (uint32_t)r->u.v.c;
      c->ordinal = (uint32_t)(r->u.v.c >> 32);
      if (r->u.v.d == PATH_SM && !c->path[0]) snprintf(c->path, sizeof c->path, "sm");
    } else if (r->kind == ASR_TR_COMM_PATH) {
      memcpy(c->path, r->u.text, ASR_TR_TEXT);
      c->path[ASR_TR_TEXT] = '\0';
    }
  }
  return 0;
}

int asr_trm_write(FILE *out, const asr_trm_input_t *in, int nin, const asr_trm_host_t *hosts, int nhosts,
                  const asr_trm_opts_t *opts, char *err, size_t errlen) {
  int rc = ASR_ENOMEM;
  proc_t *ps = calloc(nin ? (size_t)nin : 1, sizeof *ps);
  proc_t **rankless = calloc(nin ? (size_t)nin : 1, sizeof *rankless);
  asr_trm_host_t *hs = malloc((nhosts ? (size_t)nhosts : 1) * sizeof *hs);
  end_t *sends = NULL, *recvs = NULL;
  edge_t *edges = NULL;
  size_t *match = NULL;
  track_t *tracks = NULL;
  size_t nsends = 0, nrecvs = 0, ntracks = 0, nrl = 0, nmatch = 0, nedges = 0;
  if (!ps || !rankless || !hs) goto out;
  if (nhosts) memcpy(hs, hosts, (size_t)nhosts * sizeof *hs);
  /* processes, tracks, the comms */
  size_t nxfer = 0, ntr = 0;
  writer_t w = {.out = out, .first = 1, .tmin = UINT64_MAX, .hosts = hs, .nhosts = nhosts};
  for (int i = 0; i < nin; i++) {
    proc_t *p = &ps[i];
    const asr_trr_proc_t *t = in[i].proc;
    p->in = &in[i];
    p->pid = in[i].host + 1;
    if (t->hdr.kind == ASR_TR_PROC_ASRRUN)
      p->tid_base = 0;
    else if (t->hdr.kind == ASR_TR_PROC_ASRD)
      p->tid_base = 1;
    else if (t->hdr.rank >= 0 && t->hdr.rank < (1ll << 40))
      p->tid_base = 1000 * (t->hdr.rank + 1);
    else
      rankless[nrl++] = p;
    if (read_comms(p)) goto out;
    for (size_t k = 0; k < t->nrecs; k++) nxfer += t->recs[k].kind == ASR_TR_XFER;
    ntr += 1 + t->nthreads + 128;
  }
  qsort(rankless, nrl, sizeof *rankless, cmp_ospid);
  for (size_t k = 0; k < nrl; k++) rankless[k]->tid_base = 1000000 + 1000 * (int64_t)k;
  sends = malloc((nxfer ? nxfer : 1) * sizeof *sends);
  recvs = malloc((nxfer ? nxfer : 1) * sizeof *recvs);
  match = malloc((nxfer ? nxfer : 1) * 2 * sizeof *match);
  edges = malloc((nxfer ? nxfer : 1) * sizeof *edges);
  tracks = malloc(ntr * sizeof *tracks);
  if (!sends || !recvs || !match || !edges || !tracks) goto out;
  /* each send's flow: the n-th send of a connection matches its n-th
   * receive (seed §2's order) */
  for (int i = 0; i < nin; i++) {
    const asr_trr_proc_t *t = in[i].proc;
    for (size_t k = 0; k < t->nrecs; k++) {
      const asr_tr_rec_t *r = &t->recs[k];
      const comm_t *c = comm_of(&ps[i], r->id);
      int type = r->sub & 0xf;
      if (r->kind != ASR_TR_XFER || !(r->sub & ASR_TR_X_OK) || !c || !c->pair) continue;
      if (type == 1 && c->send)
        sends[nsends++] = (end_t){c->pair, r->u.v.b, &ps[i], r, r->t0};
      else if (type == 2 && !c->send)
        recvs[nrecvs++] = (end_t){c->pair, r->u.v.b, &ps[i], r, r->t1 > r->t0 ? r->t1 : r->t0};
    }
  }
  qsort(sends, nsends, sizeof *sends, cmp_end);
  qsort(recvs, nrecvs, sizeof *recvs, cmp_end);
  for (size_t a = 0, b = 0; a < nsends && b < nrecvs;) {
    int d = cmp_end(&sends[a], &recvs[b]);
    if (d < 0) {
      a++;
    } else if (d > 0) {
      b++;
    } else {
      int ha = sends[a].p->in->host, hb = recvs[b].p->in->host;
      if (ha != hb) edges[nedges++] = (edge_t){ha, hb, (int64_t)(recvs[b].t - sends[a].t)};
      match[2 * nmatch] = a++;
      match[2 * nmatch++ + 1] = b++;
    }
  }
  /* one edge per pair of hosts, its least slack */
  qsort(edges, nedges, sizeof *edges, cmp_edge);
  size_t ne = 0;
  for (size_t k = 0; k < nedges; k++) {
    if (ne && edges[ne - 1].a == edges[k].a && edges[ne - 1].b == edges[k].b) {
      if (edges[k].slack < edges[ne - 1].slack) edges[ne - 1].slack = edges[k].slack;
    } else {
      edges[ne++] = edges[k];
    }
  }
  tighten(hs, nhosts, edges, ne);
  /* the earliest stamp, on the reference clock */
  for (int i = 0; i < nin; i++) {
    const asr_trr_proc_t *t = in[i].proc;
    const asr_tr_rec_t *sets[2] = {t->keep, t->recs};
    size_t ns[2] = {t->nkeep, t->nrecs};
    for (int s = 0; s < 2; s++)
      for (size_t k = 0; k < ns[s]; k++) {
        uint64_t v = on_ref(&hs[in[i].host], sets[s][k].t0);
        if (v < w.tmin) w.tmin = v;
      }
  }
  if (w.tmin == UINT64_MAX) w.tmin = 0;

  fputs("{\"traceEvents\":[", out);
  for (int h = 0; h < nhosts; h++) {
    ev_begin(&w, "process_name", "__metadata", 'M', h + 1, 0, 0);
    fputs(",\"args\":{\"name\":", out);
    jstr(out, hosts[h].name ? hosts[h].name : "", 256);
    fputs("}}", out);
    ev_begin(&w, "process_sort_index", "__metadata", 'M', h + 1, 0, 0);
    fprintf(out, ",\"args\":{\"sort_index\":%d}}", h + 1);
  }
  for (int i = 0; i < nin; i++) {
    proc_t *p = &ps[i];
    const asr_trr_proc_t *t = p->in->proc;
    long rank = t->hdr.kind == ASR_TR_PROC_RANK ? (long)t->hdr.rank : -1;
    tracks[ntracks++] = (track_t){p->pid, p->tid_base, rank, -1};
    if (t->hdr.kind == ASR_TR_PROC_RANK) {
      int seen[256] = {0};
      for (int s = 0; s < 2; s++) {
        const asr_tr_rec_t *v = s ? t->recs : t->keep;
        size_t n = s ? t->nrecs : t->nkeep;
        for (size_t k = 0; k < n; k++)
          if (v[k].lnc != 0xff && v[k].lnc < 128 && !seen[v[k].lnc]) {
            seen[v[k].lnc] = 1;
            tracks[ntracks++] = (track_t){p->pid, p->tid_base + 1 + v[k].lnc, rank, v[k].lnc};
          }
      }
    }
    for (size_t k = 0; k < t->nkeep; k++) {
      size_t skip = 0;
      emit(&w, p, &t->keep[k], t->keep, t->nkeep, &skip, k);
      k += skip;
    }
    for (size_t k = 0; k < t->nrecs; k++) emit(&w, p, &t->recs[k], NULL, 0, &(size_t){0}, 0);
  }
  /* a flow from each send's post to its receive's completion */
  for (size_t k = 0; k < nmatch; k++) {
    const end_t *a = &sends[match[2 * k]], *b = &recvs[match[2 * k + 1]];
    ev_begin(&w, "msg", "flow", 's', a->p->pid, track_of(a->p, a->r), align(&w, a->p, a->t));
    fprintf(out, ",\"id\":%zu}", k + 1);
    ev_begin(&w, "msg", "flow", 'f', b->p->pid, track_of(b->p, b->r), align(&w, b->p, b->t));
    fprintf(out, ",\"bp\":\"e\",\"id\":%zu}", k + 1);
  }
  /* the tracks' names */
  qsort(tracks, ntracks, sizeof *tracks, cmp_track);
  for (size_t k = 0; k < ntracks; k++) {
    if (k && tracks[k].pid == tracks[k - 1].pid && tracks[k].tid == tracks[k - 1].tid) continue;
    char name[96];
    if (tracks[k].tid == 0)
      snprintf(name, sizeof name, "asrrun");
    else if (tracks[k].tid == 1)
      snprintf(name, sizeof name, "asrd");
    else if (tracks[k].rank < 0)
      snprintf(name, sizeof name, "process %" PRId64, (tracks[k].tid - 1000000) / 1000);
    else
      snprintf(name, sizeof name, "rank %ld", tracks[k].rank);
    if (tracks[k].tid > 1 && tracks[k].lnc >= 0)
      snprintf(name + strlen(name), sizeof name - strlen(name), " lnc %d", tracks[k].lnc);
    ev_begin(&w, "thread_name", "__metadata", 'M', tracks[k].pid, tracks[k].tid, 0);
    fprintf(out, ",\"args\":{\"name\":\"%s\",\"rank\":%ld,\"lnc\":%d}}", name, tracks[k].rank, tracks[k].lnc);
    ev_begin(&w, "thread_sort_index", "__metadata", 'M', tracks[k].pid, tracks[k].tid, 0);
    fprintf(out, ",\"args\":{\"sort_index\":%" PRId64 "}}", tracks[k].tid);
  }
  fputs("\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"asr_trace\":1,\"job\":", out);
  jstr(out, opts && opts->job ? opts->job : "", 256);
  fputs(",\"clock\":", out);
  jstr(out, opts && opts->clock ? opts->clock : "one host", 64);
  fputs(",\"hosts\":[", out);
  for (int h = 0; h < nhosts; h++) {
    fprintf(out, "%s{\"pid\":%d,\"name\":", h ? "," : "", h + 1);
    jstr(out, hosts[h].name ? hosts[h].name : "", 256);
    fprintf(out, ",\"offset_ns\":%" PRId64 ",\"error_ns\":%" PRId64 ",\"measured_error_ns\":%" PRId64 "}",
            hs[h].offset_ns, hs[h].error_ns, hosts[h].error_ns);
  }
  fputs("],\"drops\":[", out);
  int any = 0;
  for (int i = 0; i < nin; i++) {
    const asr_trr_proc_t *t = ps[i].in->proc;
    for (uint32_t k = 0; k < t->nthreads; k++) {
      uint64_t d = asr_trr_thread_dropped(t, k);
      if (!d) continue;
      int lnc = t->threads[k].lnc;
      int64_t tid = ps[i].tid_base + (t->hdr.kind == ASR_TR_PROC_RANK && lnc >= 0 && lnc < 128 ? 1 + lnc : 0);
      fprintf(out, "%s{\"pid\":%d,\"tid\":%" PRId64 ",\"dropped\":%" PRIu64 "}", any++ ? "," : "", ps[i].pid,
              tid, d);
    }
    if (t->keep_dropped)
      fprintf(out, "%s{\"pid\":%d,\"tid\":%" PRId64 ",\"dropped\":%" PRIu64 ",\"keep\":true}",
              any++ ? "," : "", ps[i].pid, ps[i].tid_base, t->keep_dropped);
  }
  fputs("],\"processes\":[", out);
  for (int i = 0; i < nin; i++) {
    const asr_trr_proc_t *t = ps[i].in->proc;
    const char *kind = t->hdr.kind == ASR_TR_PROC_ASRRUN ? "asrrun"
                       : t->hdr.kind == ASR_TR_PROC_ASRD ? "asrd"
                                                         : "rank";
    fprintf(out, "%s{\"pid\":%d,\"os_pid\":%d,\"rank\":%" PRId64 ",\"kind\":\"%s\",\"exited\":", i ? "," : "",
            ps[i].pid, t->hdr.os_pid, t->hdr.kind == ASR_TR_PROC_RANK ? t->hdr.rank : -1, kind);
    jstr(out, ps[i].in->exited ? ps[i].in->exited : "", 64);
    fputs("}", out);
  }
  fputs("]}}\n", out);
  rc = fflush(out) == 0 && !ferror(out) ? 0 : ASR_EIO;
  if (rc) snprintf(err, errlen, "cannot write the trace file: %s", asr_strerror(rc));
out:
  if (rc == ASR_ENOMEM) snprintf(err, errlen, "out of memory merging the trace");
  for (int i = 0; ps && i < nin; i++) free(ps[i].comms);
  free(ps);
  free(rankless);
  free(sends);
  free(match);
  free(edges);
  free(hs);
  free(recvs);
  free(tracks);
  return rc;
}

int asr_trm_hosts_by_name(asr_trm_input_t *in, int nin, asr_trm_host_t *hosts, const char **clock) {
  int n = 0;
  for (int i = 0; i < nin; i++) {
    const asr_tr_hdr_t *h = &in[i].proc->hdr;
    int k = 0;
    while (k < n && strcmp(hosts[k].name, h->host) != 0) k++;
    if (k == n) hosts[n++] = (asr_trm_host_t){h->host, (int64_t)(h->mono_ns - h->real_ns), -1};
    in[i].host = k;
  }
  if (n == 1) hosts[0].offset_ns = 0, hosts[0].error_ns = 0;
  *clock = n == 1 ? "one host" : "realtime";
  return n;
}
