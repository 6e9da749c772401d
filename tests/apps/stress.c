/*
 * stress -- many comms, many tensors, random sizes and offsets, up to 128
 * requests in flight per comm, every byte verified.
 *
 *   stress [-P PROCS] [-c COMMS] [-m MSGS] [-w WINDOW] [-S MAXSIZE] [-t TENSORS]
 *          [-T TENSOR_MAX] [-x SEED] [-l LNC0] [-o TIMEOUT_S] [-v] [-C]
 *
 * One invocation forks PROCS processes (default 2); process p runs LNC
 * LNC0 + p. Every ordered pair (p, q) gets COMMS SEND comms p -> q (default 4)
 * and, on q, the matching COMMS RECV comms from p: several comms between the
 * same two LNCs in the same direction, matched by creation order. Each process
 * creates its comms in a random interleaving of peers and directions, keeping
 * the order within one (peer, direction). Each comm carries MSGS messages
 * (default 1500).
 *
 * The schedule is a pure function of SEED (-x, default 1): message j on the
 * i-th comm p -> q has a length drawn log-uniformly from 1 B .. MAXSIZE
 * (default 1 MiB; in blocks of 128 messages that are all tiny, all up to
 * 64 KiB, or all from the full range) and bytes from a stream keyed by
 * (SEED, p, q, i, j), so both sides know what to expect without talking.
 * Where a message lives is each side's own random choice: a random tensor
 * among TENSORS (default 8, half asr_tensor_alloc'd, half asr_tensor_wrap'ed
 * user memory at an odd address, sizes random up to TENSOR_MAX, default
 * 48 MiB) and a random offset in it, never overlapping another request in
 * flight in the same process. A comm keeps at most half its share of the
 * tensor memory in flight (so comms cannot starve each other into a
 * deadlock). One receive in eight is posted with slack (a longer buffer than
 * the message): the reported size must be the message's and the slack must
 * stay untouched. Each round a comm posts a random burst, and now and then
 * fills its whole window before reaping, up to WINDOW (default 128, the
 * runtime's limit) in flight; the first comm of a process to reach 128 also
 * checks that a 129th post is refused with ASR_QUEUE_FULL (that refusal logs
 * one expected error line). Requests are tested in any order, all of them.
 *
 * Environment: ASR_PROVIDER (shm by default, or 'tcp;ofi_rxm'); without
 * ASR_BOOTSTRAP_PORT / ASR_KV_LOCK_DIR a free port / private lock directory
 * is used (asr_launch.h). Exits 0 only when every message arrived intact.
 * -C is the checker's self-test: rank 0 spoils one byte of one message, and
 * the run must FAIL.
 */
#include "config.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr.h"
#include "asr_launch.h"

#define POISON 0xa5

typedef struct {
  int procs, comms, msgs, window, tensors, lnc0, timeout_s, verbose, corrupt;
  size_t maxsz, tmax;
  uint64_t seed;
} stress_opts_t;

typedef struct {
  asr_tensor_t *t;
  unsigned char *va;
  void *mem; /* malloc'd backing of a wrapped tensor */
  size_t size;
  size_t *ioff, *ilen; /* in-flight intervals */
  int nint, capint;
} tens_t;

typedef struct {
  asr_request_t *req;
  int tensor;
  size_t off, len, post_len;
  uint32_t seq;
  int live;
} op_t;

typedef struct {
  asr_comm_t *c;
  int is_send, peer, idx;
  uint32_t next, completed;
  op_t ops[ASR_MAX_REQUESTS];
  int count, max_seen;
  int full_windows; /* times ASR_MAX_REQUESTS were in flight */
  int hold;         /* filling the window: no reaping until nothing more can be posted */
  size_t bytes_in_flight;
} cs_t;

static const stress_opts_t *O;
static int me;
static tens_t *T;
static unsigned long errors;
static uint64_t rng_state;
static size_t comm_cap; /* in-flight bytes per comm (see rank_main) */

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

static uint64_t rnd(void) { return mix64(rng_state += 0x9e3779b97f4a7c15ull); }

static uint64_t msg_key(int src, int dst, int idx, uint32_t j) {
  return mix64(O->seed ^ mix64(((uint64_t)src << 48) ^ ((uint64_t)dst << 40) ^ ((uint64_t)idx << 32) ^ j));
}

/* The shared schedule: the length of message j on comm idx src -> dst. The
 * messages come in blocks of 128 of one kind (tiny, up to 256 B; small, up
 * to 64 KiB; or the full range), so a comm sees windows of 128 small
 * messages as well as long runs of large ones. Within a kind, the length is
 * log-uniform. */
static size_t msg_len(int src, int dst, int idx, uint32_t j) {
  uint64_t r = mix64(msg_key(src, dst, idx, j) ^ 0x1234567ull);
  uint64_t kind = mix64(msg_key(src, dst, idx, j / 128) ^ 0x7654321ull) % 4;
  size_t max = O->maxsz;
  if (kind == 0 && max > 256) max = 256;
  if (kind == 1 && max > 65536) max = 65536;
  int lg = 0;
  while (((size_t)2 << lg) <= max) lg++; /* 2^lg <= max */
  int b = (int)(r % (uint64_t)(lg + 1));
  size_t lo = (size_t)1 << b, hi = lo * 2 - 1;
  if (hi > max) hi = max;
  return lo + (size_t)((r >> 8) % (hi - lo + 1));
}

static void fill(unsigned char *p, size_t len, uint64_t key) {
  uint64_t s = key;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    s = mix64(s + 0x9e3779b97f4a7c15ull);
    memcpy(p + i, &s, 8);
  }
  if (i < len) {
    s = mix64(s + 0x9e3779b97f4a7c15ull);
    memcpy(p + i, &s, len - i);
  }
}

/* Index of the first byte that differs from the stream, or -1. */
static long long check(const unsigned char *p, size_t len, uint64_t key) {
  uint64_t s = key;
  for (size_t i = 0; i < len; i += 8) {
    s = mix64(s + 0x9e3779b97f4a7c15ull);
    size_t k = len - i < 8 ? len - i : 8;
    if (memcmp(p + i, &s, k) != 0) {
      unsigned char b[8];
      memcpy(b, &s, 8);
      for (size_t q = 0; q < k; q++)
        if (p[i + q] != b[q]) return (long long)(i + q);
    }
  }
  return -1;
}

static int overlaps(const tens_t *t, size_t off, size_t len) {
  for (int i = 0; i < t->nint; i++)
    if (off < t->ioff[i] + t->ilen[i] && t->ioff[i] < off + len) return 1;
  return 0;
}

static int add_interval(tens_t *t, size_t off, size_t len) {
  if (t->nint == t->capint) {
    int nc = t->capint ? t->capint * 2 : 64;
    size_t *a = realloc(t->ioff, (size_t)nc * sizeof *a), *b;
    if (!a) return -1;
    t->ioff = a;
    if (!(b = realloc(t->ilen, (size_t)nc * sizeof *b))) return -1;
    t->ilen = b;
    t->capint = nc;
  }
  t->ioff[t->nint] = off;
  t->ilen[t->nint++] = len;
  return 0;
}

static void del_interval(tens_t *t, size_t off, size_t len) {
  for (int i = 0; i < t->nint; i++)
    if (t->ioff[i] == off && t->ilen[i] == len) {
      t->nint--;
      t->ioff[i] = t->ioff[t->nint];
      t->ilen[i] = t->ilen[t->nint];
      return;
    }
  fprintf(stderr, "stress rank %d: internal: interval %zu+%zu not found\n", me, off, len);
  errors++;
}

/* A random free place for len bytes: a tensor and offset. */
static int place(size_t len, int *tensor, size_t *off) {
  for (int attempt = 0; attempt < 8; attempt++) {
    int ti = (int)(rnd() % (uint64_t)O->tensors);
    tens_t *t = &T[ti];
    if (len > t->size) continue;
    size_t o = (size_t)(rnd() % (uint64_t)(t->size - len + 1));
    if (overlaps(t, o, len)) continue;
    if (add_interval(t, o, len) != 0) return 0;
    *tensor = ti;
    *off = o;
    return 1;
  }
  return 0;
}

static const char *cname(const cs_t *c, char *buf, size_t n) {
  snprintf(buf, n, "%s comm %d %s rank %d", c->is_send ? "SEND" : "RECV", c->idx, c->is_send ? "to" : "from",
           c->peer);
  return buf;
}

/* Posts one message on c. Returns 1 posted, 0 no room now, -1 fatal. */
static int post_one(cs_t *c) {
  char nb[96];
  int src = c->is_send ? me : c->peer, dst = c->is_send ? c->peer : me;
  uint32_t j = c->next;
  size_t len = msg_len(src, dst, c->idx, j), post_len = len;
  if (!c->is_send && rnd() % 8 == 0) post_len = len + 1 + (size_t)(rnd() % 4096);
  if (c->count > 0 && c->bytes_in_flight + post_len > comm_cap) return 0;
  int ti;
  size_t off;
  if (!place(post_len, &ti, &off)) return 0;
  tens_t *t = &T[ti];
  if (c->is_send) {
    fill(t->va + off, len, msg_key(src, dst, c->idx, j));
    /* -C: the self-test of the checker spoils one byte of one message */
    if (O->corrupt && me == 0 && c->idx == 0 && j == 5) t->va[off + len / 2] ^= 0x40;
  } else
    memset(t->va + off, POISON, post_len);
  int slot = -1;
  for (int i = 0; i < ASR_MAX_REQUESTS; i++)
    if (!c->ops[i].live) {
      slot = i;
      break;
    }
  if (slot < 0) {
    fprintf(stderr, "stress rank %d: internal: no free op slot on %s\n", me, cname(c, nb, sizeof nb));
    return -1;
  }
  op_t *op = &c->ops[slot];
  int st =
      c->is_send ? asr_isend(c->c, t->t, off, len, &op->req) : asr_irecv(c->c, t->t, off, post_len, &op->req);
  if (st) {
    fprintf(stderr, "stress rank %d: %s on %s (msg %u, %zu bytes at %zu of tensor %d) failed: %s\n", me,
            c->is_send ? "asr_isend" : "asr_irecv", cname(c, nb, sizeof nb), j, post_len, off, ti,
            asr_strerror(st));
    return -1;
  }
  op->tensor = ti;
  op->off = off;
  op->len = len;
  op->post_len = post_len;
  op->seq = j;
  op->live = 1;
  c->next++;
  c->bytes_in_flight += post_len;
  if (++c->count > c->max_seen) c->max_seen = c->count;
  if (c->count == ASR_MAX_REQUESTS) c->full_windows++;
  return 1;
}

/* The 129th post must be refused (and must not consume a message). */
static int probe_queue_full(cs_t *c) {
  char nb[96];
  asr_request_t *r = NULL;
  int st = c->is_send ? asr_isend(c->c, T[0].t, 0, 1, &r) : asr_irecv(c->c, T[0].t, 0, 1, &r);
  if (st != ASR_QUEUE_FULL) {
    fprintf(stderr, "stress rank %d: a 129th post on %s returned %d (%s), expected ASR_QUEUE_FULL\n", me,
            cname(c, nb, sizeof nb), st, asr_strerror(st));
    errors++;
    return -1;
  }
  if (O->verbose)
    printf("stress rank %d: 129th post on %s refused with ASR_QUEUE_FULL as expected\n", me,
           cname(c, nb, sizeof nb));
  return 0;
}

/* Tests every op in flight on c. Returns completions, or -1 on a fatal error. */
static int reap(cs_t *c, uint64_t *bytes) {
  char nb[96];
  int n = 0;
  for (int i = 0; i < ASR_MAX_REQUESTS && c->count > 0; i++) {
    op_t *op = &c->ops[i];
    if (!op->live) continue;
    int done = 0;
    size_t got = 0;
    int st = asr_test(op->req, &done, &got);
    if (st) {
      fprintf(stderr, "stress rank %d: asr_test on %s msg %u failed: %s\n", me, cname(c, nb, sizeof nb),
              op->seq, asr_strerror(st));
      return -1;
    }
    if (!done) continue;
    tens_t *t = &T[op->tensor];
    if (got != op->len) {
      fprintf(stderr, "stress rank %d: %s msg %u: size %zu reported, expected %zu (posted %zu)\n", me,
              cname(c, nb, sizeof nb), op->seq, got, op->len, op->post_len);
      errors++;
    } else if (!c->is_send) {
      long long d = check(t->va + op->off, op->len, msg_key(c->peer, me, c->idx, op->seq));
      if (d >= 0) {
        fprintf(stderr, "stress rank %d: %s msg %u: byte %lld of %zu differs (tensor %d offset %zu)\n", me,
                cname(c, nb, sizeof nb), op->seq, d, op->len, op->tensor, op->off);
        errors++;
      }
      for (size_t k = op->len; k < op->post_len; k++)
        if (t->va[op->off + k] != POISON) {
          fprintf(stderr, "stress rank %d: %s msg %u: slack byte %zu (message %zu, buffer %zu) was written\n",
                  me, cname(c, nb, sizeof nb), op->seq, k, op->len, op->post_len);
          errors++;
          break;
        }
      *bytes += op->len;
    }
    del_interval(t, op->off, op->post_len);
    c->bytes_in_flight -= op->post_len;
    op->live = 0;
    c->count--;
    c->completed++;
    n++;
  }
  return n;
}

static int rank_main(int rank, int nprocs, void *arg) {
  (void)arg;
  me = rank;
  rng_state = mix64(O->seed * 1000003ull + (uint64_t)rank + 17);
  int lnc = O->lnc0 + rank;
  /* The ranks come up, race for the host's KV election and close in any
   * order: whoever leads, the RECV comms still waiting for a sender when it
   * closes publish their handles on the next leader. */
  int st = asr_init(lnc);
  if (st) {
    fprintf(stderr, "stress rank %d: asr_init(%d): %s\n", rank, lnc, asr_strerror(st));
    return 1;
  }
  /* tensors: half allocated, half wrapped user memory at an odd address */
  T = calloc((size_t)O->tensors, sizeof *T);
  if (!T) return 1;
  for (int i = 0; i < O->tensors; i++) {
    size_t lo = O->maxsz + 4096 + 1, span = O->tmax > lo ? O->tmax - lo : 1;
    size_t sz = lo + (size_t)(rnd() % span);
    T[i].size = sz;
    if (i % 2 == 0) {
      st = asr_tensor_alloc(sz, &T[i].t);
      T[i].va = st ? NULL : asr_tensor_va(T[i].t);
    } else {
      T[i].mem = malloc(sz + 16);
      st = T[i].mem ? asr_tensor_wrap((unsigned char *)T[i].mem + 3, sz, &T[i].t) : ASR_INVALID;
      T[i].va = (unsigned char *)T[i].mem + 3;
    }
    if (st) {
      fprintf(stderr, "stress rank %d: tensor %d of %zu bytes: %s\n", rank, i, sz, asr_strerror(st));
      return 1;
    }
  }
  /* comms: random interleaving, creation order kept per (peer, direction) */
  int ncs = (nprocs - 1) * O->comms * 2;
  /* Each comm may keep at most half its share of the tensor memory in flight
   * (always at least one message). Without such a cap the sends of one comm
   * could fill the memory the receives of another need, and two processes
   * could wait on each other for good. */
  size_t total = 0;
  for (int i = 0; i < O->tensors; i++) total += T[i].size;
  comm_cap = total / 2 / (size_t)ncs;
  cs_t *cs = calloc((size_t)ncs, sizeof *cs);
  int *made = calloc((size_t)nprocs * 2, sizeof *made);
  if (!cs || !made) return 1;
  for (int k = 0; k < ncs; k++) {
    int pick;
    do pick = (int)(rnd() % (uint64_t)(nprocs * 2));
    while (pick / 2 == rank || made[pick] == O->comms);
    int peer = pick / 2, is_send = pick % 2 == 0;
    cs_t *c = &cs[k];
    c->peer = peer;
    c->is_send = is_send;
    c->idx = made[pick]++;
    st = is_send ? asr_connect(lnc, "127.0.0.1", O->lnc0 + peer, &c->c)
                 : asr_accept(lnc, "127.0.0.1", O->lnc0 + peer, &c->c);
    if (st) {
      fprintf(stderr, "stress rank %d: %s: %s\n", rank, is_send ? "asr_connect" : "asr_accept",
              asr_strerror(st));
      return 1;
    }
  }
  free(made);
  for (int k = 0; k < ncs; k++)
    if ((st = asr_comm_wait_connected(cs[k].c, 60000))) {
      char nb[96];
      fprintf(stderr, "stress rank %d: %s did not connect: %s\n", rank, cname(&cs[k], nb, sizeof nb),
              asr_strerror(st));
      return 1;
    }
  uint64_t t0 = launch_now_ns(), last_progress = t0, bytes = 0, msgs = 0;
  int remaining = ncs, probed = 0;
  while (remaining > 0) {
    int start = (int)(rnd() % (uint64_t)ncs);
    for (int k0 = 0; k0 < ncs; k0++) {
      cs_t *c = &cs[(start + k0) % ncs];
      if (c->completed == (uint32_t)O->msgs) continue;
      /* Now and then a comm stops reaping until its window is full (or
       * nothing more fits), so 128 requests really are in flight at once. */
      if (!c->hold && rnd() % 32 == 0) c->hold = 1;
      int burst = c->hold ? ASR_MAX_REQUESTS : 1 + (int)(rnd() % 48), blocked = 0;
      while (burst-- > 0 && c->count < O->window && c->next < (uint32_t)O->msgs) {
        int p = post_one(c);
        if (p < 0) return 1;
        if (p == 0) {
          blocked = 1;
          break;
        }
      }
      if (c->count == ASR_MAX_REQUESTS && !probed) {
        probed = 1;
        if (probe_queue_full(c)) return 1;
      }
      if (c->hold) {
        if (c->count < O->window && c->next < (uint32_t)O->msgs && !blocked) continue;
        c->hold = 0;
      }
      int n = reap(c, &bytes);
      if (n < 0) return 1;
      if (n > 0) {
        msgs += (uint64_t)n;
        last_progress = launch_now_ns();
        if (c->completed == (uint32_t)O->msgs) remaining--;
      }
    }
    if (launch_now_ns() - last_progress > 60ull * 1000000000ull) {
      fprintf(stderr, "stress rank %d: no completion for 60 s; in flight:\n", rank);
      for (int k = 0; k < ncs; k++) {
        char nb[96];
        fprintf(stderr, "  %s: posted %u, completed %u, in flight %d\n", cname(&cs[k], nb, sizeof nb),
                cs[k].next, cs[k].completed, cs[k].count);
      }
      return 1;
    }
  }
  double secs = (double)(launch_now_ns() - t0) / 1e9;
  int maxw = 0, full = 0;
  for (int k = 0; k < ncs; k++) {
    if (cs[k].max_seen > maxw) maxw = cs[k].max_seen;
    full += cs[k].full_windows;
  }
  double rep[7] = {(double)errors, (double)bytes, (double)msgs,  secs,
                   (double)maxw,   (double)full,  (double)probed};
  launch_report(rep, 7);
  if (O->verbose)
    printf(
        "stress rank %d (lnc %d): %d comms, %llu requests, %llu bytes received and verified, max %d in "
        "flight "
        "(128 reached %d times), %lu errors, %.2f s\n",
        rank, lnc, ncs, (unsigned long long)msgs, (unsigned long long)bytes, maxw, full, errors, secs);
  fflush(stdout);
  if (launch_barrier() != 0) return 1;
  for (int k = 0; k < ncs; k++) asr_comm_close(cs[k].c);
  for (int i = 0; i < O->tensors; i++) {
    asr_tensor_free(T[i].t);
    free(T[i].mem);
    free(T[i].ioff);
    free(T[i].ilen);
  }
  free(T);
  free(cs);
  asr_close(lnc);
  return errors ? 1 : 0;
}

int main(int argc, char **argv) {
  static stress_opts_t o = {.procs = 2,
                            .comms = 4,
                            .msgs = 1500,
                            .window = ASR_MAX_REQUESTS,
                            .tensors = 8,
                            .lnc0 = 0,
                            .timeout_s = 300,
                            .maxsz = 1u << 20,
                            .tmax = 48u << 20,
                            .seed = 1};
  int opt;
  while ((opt = getopt(argc, argv, "P:c:m:w:S:t:T:x:l:o:vCh")) != -1) {
    switch (opt) {
      case 'P': o.procs = atoi(optarg); break;
      case 'c': o.comms = atoi(optarg); break;
      case 'm': o.msgs = atoi(optarg); break;
      case 'w': o.window = atoi(optarg); break;
      case 'S': o.maxsz = strtoull(optarg, NULL, 0); break;
      case 't': o.tensors = atoi(optarg); break;
      case 'T': o.tmax = strtoull(optarg, NULL, 0); break;
      case 'x': o.seed = strtoull(optarg, NULL, 0); break;
      case 'l': o.lnc0 = atoi(optarg); break;
      case 'o': o.timeout_s = atoi(optarg); break;
      case 'v': o.verbose = 1; break;
      case 'C': o.corrupt = 1; break;
      default:
        fprintf(stderr,
                "usage: stress [-P PROCS] [-c COMMS] [-m MSGS] [-w WINDOW] [-S MAXSIZE] [-t TENSORS] "
                "[-T TENSOR_MAX] [-x SEED] [-l LNC0] [-o TIMEOUT_S] [-v] [-C]\n");
        return 2;
    }
  }
  if (o.procs < 2 || o.procs > LAUNCH_MAX || o.lnc0 < 0 || o.lnc0 + o.procs > ASR_MAX_LNC || o.comms < 1 ||
      o.msgs < 1 || o.window < 1 || o.window > ASR_MAX_REQUESTS || o.maxsz < 1 || o.tensors < 1 ||
      o.timeout_s < 1) {
    fprintf(stderr,
            "stress: need 2 <= -P, -l + -P <= 128, -c >= 1, -m >= 1, 1 <= -w <= 128, -S >= 1, -t >= 1\n");
    return 2;
  }
  O = &o;
  uint64_t t0 = launch_now_ns();
  int rc = launch_run(o.procs, rank_main, NULL, o.timeout_s, "stress");
  double secs = (double)(launch_now_ns() - t0) / 1e9;
  double errs = 0, bytes = 0, msgs = 0;
  int reported = 0, maxw = 0, full = 0, probes = 0;
  for (int r = 0; r < o.procs; r++)
    if (launch_nreports[r]) {
      reported++;
      errs += launch_reports[r][0];
      bytes += launch_reports[r][1];
      msgs += launch_reports[r][2];
      if ((int)launch_reports[r][4] > maxw) maxw = (int)launch_reports[r][4];
      full += (int)launch_reports[r][5];
      probes += (int)launch_reports[r][6];
    }
  int ok = rc == 0 && errs == 0 && reported == o.procs;
  printf(
      "stress: %d procs x %d comms per direction per peer, %d msgs per comm, sizes 1..%zu B, seed %llu, "
      "provider %s: %.0f requests completed, %.0f bytes verified (%.1f MB/s), max %d in flight per comm "
      "(128 reached %d times; %d ranks saw a 129th post refused, the expected "
      "'Maximum number of pending requests' log line), %.0f errors, %.2f s: %s\n",
      o.procs, o.comms, o.msgs, o.maxsz, (unsigned long long)o.seed,
      getenv("ASR_PROVIDER") ? getenv("ASR_PROVIDER") : "shm", msgs, bytes, bytes / secs / 1e6, maxw, full,
      probes, errs, secs, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
