/*
 * asrd_pmi.c -- asrd as a PMI server for its ranks, the way Hydra's proxy
 * is one: the simple PMI-1 protocol (pmi_wire.h) and PMI-2 (pmi2_wire.h),
 * which starts as PMI-1 and turns into PMI-2 frames at its init (asrd.h).
 *
 * Programs built with MPICH (Debian's libmpich.so.12 does not link
 * libpmix) find their launcher through PMI_FD, PMI_RANK and PMI_SIZE: every
 * rank gets one end of a socket pair as PMI_FD (asrd_spawn.c keeps it open
 * across the execve), and asrd serves the other on its loop, one
 * connection per rank (conn_t; its state machine: conn_set_state).
 *
 * The KVS: a rank's puts go into this host's table at once (its own and its
 * neighbours' gets see them) and into the blob of this host's puts since
 * the last barrier. A barrier completes once every local rank entered it:
 * the blob goes up as a FENCE, through the same path as PMIx's fences
 * (asrd_up_fence), asrrun gathers every host's blob and answers each host
 * with all of them (FENCE_DONE), and each asrd adds the other hosts' puts
 * to its table before it lets its ranks out (barrier_out). So after a
 * barrier every rank of the job can get every key put before it. The table
 * also holds PMI_process_mapping (which ranks share a node, in MPICH's
 * "(vector,(node,nodes,ranks),...)" form), as Hydra's does. A PMI-2 kvs-fence
 * is the same barrier (a job may mix both kinds of rank), and PMI-2's node
 * attributes live in a second table of this host's only, where a get that
 * asks to wait is answered at the put.
 *
 * A rank joins the job (JOINED to asrrun, for the early-exit rule) at its
 * init (PMI-2: its fullinit) and finalizes at its finalize; its abort ends the job with its code
 * (ABORT to asrrun). Whatever a rank sends is bounded: a line is at most
 * ASR_PMI_LINE_MAX bytes (longer ones are answered with an error and
 * dropped), replies that it does not read stop its commands being read
 * (REPLY_MAX), and the KVS holds keys and values of the announced maxima.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asrd.h"
#include "pmi2_wire.h"
#include "pmi_wire.h"

#define REPLY_MAX (1u << 20) /* unread replies: past this the rank's commands wait */
#define READ_CHUNK 65536

/* A connection's life (conn_set_state makes every transition):
 *   OPEN      the rank has it (PMI_FD) and has not said init yet
 *   JOINED    init came: JOINED went up to asrrun
 *   BARRIER   barrier_in came: waiting for every rank and every host
 *   FINALIZED finalize came (finalize_ack sent); the rank is leaving
 *   CLOSED    the socket is closed (EOF, an error, or the job's end) */
typedef enum { CONN_OPEN = 0, CONN_JOINED, CONN_BARRIER, CONN_FINALIZED, CONN_CLOSED } conn_state_t;

static const char *const conn_state_names[] = {"OPEN", "JOINED", "BARRIER", "FINALIZED", "CLOSED"};

struct asrd_pmi_conn {
  asrd_rank_t *r;
  conn_state_t state;
  int fd;
  asr_loop_io_t io;
  unsigned watching;
  asr_pmi_reader_t rd;
  asr_buf_t out; /* replies not written yet */
  int in_mcmd;   /* inside a multi-line command (spawn), up to its "endcmd" */
  int v2;        /* past a PMI-2 init: the rest of the stream is PMI-2 frames */
  asr_pmi2_reader_t *rd2;
  char *wait_key; /* an info-getnodeattr with wait=TRUE, answered at that key's put */
};

/* One key of the KVS (a chained hash table). */
typedef struct kv {
  char *key, *val;
  struct kv *next;
} kv_t;

#define KV_BUCKETS_MIN 64

/* A table of keys. */
typedef struct {
  kv_t **buckets;
  size_t nbuckets, nkeys;
} kvt_t;

/* The job's PMI state on this host (one job per asrd). */
static struct {
  asrd_t *d;
  int ready;
  char kvsname[ASR_PMI_KVSNAME_MAX];
  kvt_t job;         /* the KVS: every rank's puts, every host's after a barrier */
  kvt_t node;        /* PMI-2's node attributes: this host's ranks' */
  asr_buf_t puts;    /* this host's puts since the last barrier: (u32 len, key, u32 len, value)... */
  int in_barrier;    /* local ranks in BARRIER */
  int fence_pending; /* the barrier's FENCE is up, FENCE_DONE not back */
  asrd_fence_t fence;
} S;

static void conn_close(asrd_pmi_conn_t *c);
static void conn_watch(asrd_pmi_conn_t *c);

/* --- the KVS -------------------------------------------------------------------- */

static size_t kv_hash(const char *s) {
  size_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static kv_t *kv_find(kvt_t *t, const char *key) {
  if (!t->buckets) return NULL;
  for (kv_t *e = t->buckets[kv_hash(key) % t->nbuckets]; e; e = e->next)
    if (strcmp(e->key, key) == 0) return e;
  return NULL;
}

/* Doubles the table once it holds a key per bucket (gets stay O(1) as the
 * job grows: every host holds every rank's keys). */
static void kv_grow(kvt_t *t) {
  size_t n = t->nbuckets * 2;
  kv_t **b = calloc(n, sizeof *b);
  if (!b) return; /* longer chains, still correct */
  for (size_t i = 0; i < t->nbuckets; i++)
    for (kv_t *e = t->buckets[i], *next; e; e = next) {
      next = e->next;
      size_t h = kv_hash(e->key) % n;
      e->next = b[h];
      b[h] = e;
    }
  free(t->buckets);
  t->buckets = b;
  t->nbuckets = n;
}

static int kv_init(kvt_t *t) {
  t->nbuckets = KV_BUCKETS_MIN;
  t->nkeys = 0;
  t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
  return t->buckets ? 0 : ASR_ENOMEM;
}

/* Sets key to val (a later put of a key wins, as in Hydra). 0 or ASR_ENOMEM. */
static int kv_set(kvt_t *t, const char *key, size_t klen, const char *val, size_t vlen) {
  char k[ASR_PMI_KEY_MAX + 1];
  if (klen > ASR_PMI_KEY_MAX) return ASR_ETOOBIG;
  memcpy(k, key, klen);
  k[klen] = '\0';
  char *v = malloc(vlen + 1);
  if (!v) return ASR_ENOMEM;
  memcpy(v, val, vlen);
  v[vlen] = '\0';
  kv_t *e = kv_find(t, k);
  if (e) {
    free(e->val);
    e->val = v;
    return 0;
  }
  e = calloc(1, sizeof *e);
  if (!e || !(e->key = strdup(k))) {
    free(e);
    free(v);
    return ASR_ENOMEM;
  }
  e->val = v;
  size_t h = kv_hash(k) % t->nbuckets;
  e->next = t->buckets[h];
  t->buckets[h] = e;
  if (++t->nkeys > t->nbuckets) kv_grow(t);
  return 0;
}

static void kv_free(kvt_t *t) {
  for (size_t i = 0; t->buckets && i < t->nbuckets; i++)
    for (kv_t *e = t->buckets[i], *next; e; e = next) {
      next = e->next;
      free(e->key);
      free(e->val);
      free(e);
    }
  free(t->buckets);
  t->buckets = NULL;
  t->nbuckets = t->nkeys = 0;
}

/* --- the process mapping ----------------------------------------------------------- */

/* PMI_process_mapping as MPICH reads it (MPIR_NODEMAP_populate_ids_from_mapping):
 * "(vector,(start,nodes,ranks),...)", each triple saying that the next
 * nodes x ranks ranks sit ranks each on nodes start, start + 1, ...; the
 * vector repeats until every rank is placed. Node ids count the hosts that
 * have ranks, in the order of their first rank. Runs of ranks on one host
 * make the triples; neighbours that continue a run of hosts merge; a list
 * that is a repeat of its start (a round-robin map) is cut to one period.
 * Returns a malloc'd string, or NULL when it would not fit in a value
 * (MPICH then finds the nodes by itself). */
static char *process_mapping(const asrd_t *d) {
  int n = d->nranks;
  int *node_of_host = malloc(sizeof *node_of_host * (size_t)d->nhosts);
  int(*t)[3] = malloc(sizeof *t * (size_t)n); /* at most one triple per rank */
  char *out = NULL;
  if (!node_of_host || !t) goto done;
  for (int h = 0; h < d->nhosts; h++) node_of_host[h] = -1;
  int nodes = 0, nt = 0;
  for (int r = 0; r < n;) {
    int h = (int)d->job.host_of[r], len = 1;
    while (r + len < n && (int)d->job.host_of[r + len] == h) len++;
    if (node_of_host[h] < 0) node_of_host[h] = nodes++;
    int node = node_of_host[h];
    if (nt && t[nt - 1][2] == len && t[nt - 1][0] + t[nt - 1][1] == node)
      t[nt - 1][1]++;
    else
      t[nt][0] = node, t[nt][1] = 1, t[nt][2] = len, nt++;
    r += len;
  }
  int period = nt;
  for (int p = 1; p < nt; p++) {
    if (nt % p) continue;
    int same = 1;
    for (int i = p; i < nt && same; i++) same = !memcmp(t[i], t[i % p], sizeof t[i]);
    if (same) {
      period = p;
      break;
    }
  }
  asr_buf_t b = {0};
  int bad = asr_buf_put(&b, "(vector", 7);
  for (int i = 0; i < period && !bad; i++) {
    char tri[48];
    int k = snprintf(tri, sizeof tri, ",(%d,%d,%d)", t[i][0], t[i][1], t[i][2]);
    bad = asr_buf_put(&b, tri, (size_t)k);
  }
  if (!bad) bad = asr_buf_put(&b, ")", 2); /* with its NUL */
  if (!bad && b.len - 1 <= ASR_PMI_VAL_MAX) {
    out = (char *)b.data;
    b.data = NULL;
  }
  asr_buf_free(&b);
done:
  free(node_of_host);
  free(t);
  return out;
}

int asrd_pmi_prepare(asrd_t *d, char *errbuf, size_t errlen) {
  memset(&S, 0, sizeof S);
  S.d = d;
  snprintf(S.kvsname, sizeof S.kvsname, "%s", d->job.nspace);
  char *map = process_mapping(d);
  static const char key[] = "PMI_process_mapping";
  int rc = kv_init(&S.job);
  if (rc == 0) rc = kv_init(&S.node);
  if (rc == 0 && map) rc = kv_set(&S.job, key, sizeof key - 1, map, strlen(map));
  if (!map) asr_debug("pmi", "PMI_process_mapping would be longer than a value: not set");
  free(map);
  if (rc) {
    kv_free(&S.job);
    kv_free(&S.node);
    snprintf(errbuf, errlen, "cannot prepare the PMI server: %s", asr_strerror(rc));
    return rc;
  }
  S.ready = 1;
  return 0;
}

/* --- replies ---------------------------------------------------------------------- */

/* The one place a connection's state changes. */
static void conn_set_state(asrd_pmi_conn_t *c, conn_state_t s) {
  if (c->state == s) return;
  asr_debug("pmi", "rank %d: %s -> %s", c->r->rank, conn_state_names[c->state], conn_state_names[s]);
  if (c->state == CONN_BARRIER) S.in_barrier--;
  if (s == CONN_BARRIER) S.in_barrier++;
  c->state = s;
}

/* Writes what c has to say, as far as the socket takes it. */
static void conn_flush(asrd_pmi_conn_t *c) {
  while (c->fd >= 0 && asr_buf_pending(&c->out)) {
    ssize_t n = send(c->fd, c->out.data + c->out.off, asr_buf_pending(&c->out), MSG_NOSIGNAL);
    if (n > 0) {
      c->out.off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    conn_close(c); /* the rank is gone: nobody reads */
    return;
  }
  if (!asr_buf_pending(&c->out)) c->out.off = c->out.len = 0;
  conn_watch(c);
}

/* A reply was built in c->out: send it (the build failed: the rank cannot
 * be answered, and its connection ends). */
static void conn_reply(asrd_pmi_conn_t *c, int rc) {
  if (rc) {
    asr_error("pmi", "rank %d: out of memory for a reply; closing its PMI connection", c->r->rank);
    conn_close(c);
    return;
  }
  conn_flush(c);
}

static void reply_fail(asrd_pmi_conn_t *c, int cmd, const char *why) {
  asr_debug("pmi", "rank %d: %s fails: %s", c->r->rank,
            asr_pmi_cmd_name(cmd) ? asr_pmi_cmd_name(cmd) : "line", why);
  conn_reply(c, asr_pmi_reply_fail(&c->out, cmd, why));
}

/* A reply with rc=0 and its pairs (NULL-terminated key, value list). */
static void reply_ok(asrd_pmi_conn_t *c, int cmd, const char *const *kv) {
  int rc = asr_pmi_reply_start(&c->out, asr_pmi_reply_name(cmd));
  for (; !rc && kv && kv[0]; kv += 2) rc = asr_pmi_reply_attr(&c->out, kv[0], kv[1]);
  if (!rc) rc = asr_pmi_reply_end(&c->out);
  conn_reply(c, rc);
}

/* PMI-2's replies: the frame for cmd with its pairs (a reply over the
 * frame's bound is a failure instead), and a failure. */
static void reply2_fail(asrd_pmi_conn_t *c, int cmd, const char *why) {
  asr_debug("pmi", "rank %d: %s fails: %s", c->r->rank,
            asr_pmi2_cmd_name(cmd) ? asr_pmi2_cmd_name(cmd) : "frame", why);
  conn_reply(c, asr_pmi2_reply_fail(&c->out, cmd, why));
}

static void reply2_ok(asrd_pmi_conn_t *c, int cmd, const char *const *kv) {
  int rc = asr_pmi2_reply(&c->out, asr_pmi2_reply_name(cmd), kv);
  if (rc == ASR_ETOOBIG) {
    reply2_fail(c, cmd, "the reply would be longer than a PMI-2 frame");
    return;
  }
  conn_reply(c, rc);
}

/* --- barriers ---------------------------------------------------------------------- */

/* FENCE_DONE: every host's puts since the barrier before (its own among
 * them, already in the table), then every local rank out of the barrier. */
static void barrier_done(asrd_t *d, asrd_fence_t *f, int ok, const uint8_t *data, size_t len) {
  (void)f;
  S.fence_pending = 0;
  if (!ok || !S.ready) return; /* the job ends: the ranks are killed */
  asr_rd_t rd;
  asr_rd_init(&rd, data, len);
  while (rd.pos < rd.len && !rd.bad) {
    size_t kl = 0, vl = 0;
    const uint8_t *k = asr_rd_bytes(&rd, &kl), *v = asr_rd_bytes(&rd, &vl);
    if (rd.bad || kl == 0 || kl > ASR_PMI_KEY_MAX || vl > ASR_PMI_VAL_MAX) {
      rd.bad = 1;
      break;
    }
    if (kv_set(&S.job, (const char *)k, kl, (const char *)v, vl) != 0) {
      asrd_up_error(d, "asrd: out of memory for the PMI keys of a barrier");
      return;
    }
  }
  if (rd.bad) {
    asrd_up_error(d, "asrd: a PMI barrier's keys from asrrun do not decode");
    return;
  }
  for (int i = 0; i < d->nlocal; i++) {
    asrd_pmi_conn_t *c = d->ranks[i].pmi;
    if (!c || c->state != CONN_BARRIER) continue;
    conn_set_state(c, CONN_JOINED);
    if (c->v2) {
      static const char *const rc0[] = {"rc", "0", NULL};
      reply2_ok(c, ASR_PMI2_KVS_FENCE, rc0);
    } else {
      reply_ok(c, ASR_PMI_BARRIER_IN, NULL);
    }
  }
}

/* Every local rank is in the barrier: this host's puts go up. */
static void barrier_check(asrd_t *d) {
  if (S.fence_pending || S.in_barrier < d->nlocal) return;
  S.fence_pending = 1;
  S.fence.done = barrier_done;
  asrd_up_fence(d, &S.fence, S.puts.data, S.puts.len);
  asr_buf_free(&S.puts);
}

/* --- commands ---------------------------------------------------------------------- */

/* Whether kvsname (optional: MPICH always sends it) names this job's KVS. */
static int our_kvs(const char *kvsname) { return !kvsname || strcmp(kvsname, S.kvsname) == 0; }

/* The key of a put or get, checked with the KVS it names; NULL (the
 * failure replied) when either is wrong. */
static const char *checked_key(asrd_pmi_conn_t *c, const asr_pmi_msg_t *m) {
  const char *key = asr_pmi_get(m, "key");
  if (!our_kvs(asr_pmi_get(m, "kvsname"))) {
    reply_fail(c, m->cmd, "no_such_kvs");
    return NULL;
  }
  if (!asr_pmi_word_ok(key, ASR_PMI_KEY_MAX)) {
    reply_fail(c, m->cmd, "bad_key");
    return NULL;
  }
  return key;
}

static void do_put(asrd_pmi_conn_t *c, const asr_pmi_msg_t *m) {
  const char *key = checked_key(c, m), *val = asr_pmi_get(m, "value");
  if (!key) return;
  if (!val) {
    reply_fail(c, m->cmd, "no_value");
    return;
  }
  /* an empty value is one; a value with a space could not go out again */
  if (*val && !asr_pmi_word_ok(val, ASR_PMI_VAL_MAX)) {
    reply_fail(c, m->cmd, "bad_value");
    return;
  }
  size_t kl = strlen(key), vl = strlen(val);
  int rc = kv_set(&S.job, key, kl, val, vl);
  if (rc == 0 && (asr_buf_put_bytes(&S.puts, key, kl) || asr_buf_put_bytes(&S.puts, val, vl)))
    rc = ASR_ENOMEM;
  if (rc) {
    reply_fail(c, m->cmd, "out_of_memory");
    return;
  }
  static const char *const ok[] = {"rc", "0", "msg", "success", NULL};
  reply_ok(c, m->cmd, ok);
}

static void do_get(asrd_pmi_conn_t *c, const asr_pmi_msg_t *m) {
  const char *key = checked_key(c, m);
  if (!key) return;
  kv_t *e = kv_find(&S.job, key);
  if (!e) {
    reply_fail(c, m->cmd, "key_not_found");
    return;
  }
  const char *ok[] = {"rc", "0", "msg", "success", "value", e->val, NULL};
  reply_ok(c, m->cmd, ok);
}

/* abort: the job ends with the rank's code (asrrun: ABORT); no reply. */
static void do_abort(asrd_pmi_conn_t *c, const asr_pmi_msg_t *m) {
  const char *code = asr_pmi_get(m, "exitcode"), *msg = asr_pmi_get(m, "message");
  char *end = NULL;
  long v = code ? strtol(code, &end, 10) : 1;
  if (!code || !*code || *end || v < 0 || v > 255) v = 1;
  asr_ctl_msg_t up = {
      .type = ASR_CTL_ABORT,
      .u.abort = {.rank = (uint32_t)c->r->rank, .status = (uint32_t)v, .msg = (char *)(msg ? msg : "")}};
  asrd_up_send(S.d, &up);
}

/* One command line of c's (the reader's buffer, parsed in place). */
static void handle_line(asrd_pmi_conn_t *c, char *line, size_t len, int too_long) {
  asrd_t *d = S.d;
  asr_pmi_msg_t m;
  char why[96];
  if (c->in_mcmd) { /* spawn's lines, up to its end: one answer for all */
    if (len == 6 && memcmp(line, "endcmd", 6) == 0) {
      c->in_mcmd = 0;
      reply_fail(c, ASR_PMI_SPAWN, "spawn_is_not_supported_by_asrrun");
    }
    return;
  }
  if (too_long) {
    /* its start may still name its command: answer as that command fails */
    if (len > 64) len = 64;
    int rc = asr_pmi_parse(line, len, &m, why, sizeof why);
    (void)rc;
    reply_fail(c, m.cmd, "line_too_long");
    return;
  }
  int rc = asr_pmi_parse(line, len, &m, why, sizeof why);
  if (rc) {
    reply_fail(c, ASR_PMI_INVALID, why);
    return;
  }
  char num[3][24];
  switch (m.cmd) {
    case ASR_PMI_INIT: {
      const char *v = asr_pmi_get(&m, "pmi_version");
      if (v && strcmp(v, "2") == 0 && c->state == CONN_OPEN) {
        /* PMI-2: the rest of the stream is frames; it joins at fullinit */
        c->rd2 = calloc(1, sizeof *c->rd2);
        if (!c->rd2) {
          reply_fail(c, m.cmd, "out_of_memory");
          return;
        }
        c->v2 = 1;
        static const char *const ok[] = {"pmi_version", "2", "pmi_subversion", "0", "rc", "0", NULL};
        reply_ok(c, m.cmd, ok);
        return;
      }
      if (!v || strcmp(v, "1") != 0) {
        reply_fail(c, m.cmd, "only_pmi_versions_1_and_2_are_served");
        return;
      }
      if (c->state == CONN_OPEN) conn_set_state(c, CONN_JOINED);
      asrd_up_joined(d, c->r, ASR_CTL_JOINED_INIT, ASR_CTL_VIA_PMI1);
      static const char *const ok[] = {"pmi_version", "1", "pmi_subversion", "1", "rc", "0", NULL};
      reply_ok(c, m.cmd, ok);
      return;
    }
    case ASR_PMI_GET_MAXES: {
      snprintf(num[0], sizeof num[0], "%d", ASR_PMI_KVSNAME_MAX);
      snprintf(num[1], sizeof num[1], "%d", ASR_PMI_KEY_MAX);
      snprintf(num[2], sizeof num[2], "%d", ASR_PMI_VAL_MAX);
      const char *ok[] = {"kvsname_max", num[0], "keylen_max", num[1], "vallen_max", num[2], NULL};
      reply_ok(c, m.cmd, ok);
      return;
    }
    case ASR_PMI_GET_APPNUM: {
      static const char *const ok[] = {"appnum", "0", NULL};
      reply_ok(c, m.cmd, ok);
      return;
    }
    case ASR_PMI_GET_UNIVERSE_SIZE: {
      snprintf(num[0], sizeof num[0], "%d", d->nranks);
      const char *ok[] = {"size", num[0], NULL};
      reply_ok(c, m.cmd, ok);
      return;
    }
    case ASR_PMI_GET_MY_KVSNAME: {
      const char *ok[] = {"kvsname", S.kvsname, NULL};
      reply_ok(c, m.cmd, ok);
      return;
    }
    case ASR_PMI_PUT: do_put(c, &m); return;
    case ASR_PMI_GET: do_get(c, &m); return;
    case ASR_PMI_BARRIER_IN:
      if (c->state == CONN_BARRIER) {
        reply_fail(c, m.cmd, "already_in_the_barrier");
        return;
      }
      conn_set_state(c, CONN_BARRIER);
      barrier_check(d);
      return;
    case ASR_PMI_FINALIZE: {
      if (c->state == CONN_BARRIER) {
        reply_fail(c, m.cmd, "finalize_inside_a_barrier");
        return;
      }
      conn_set_state(c, CONN_FINALIZED);
      asrd_up_joined(d, c->r, ASR_CTL_JOINED_FINALIZED, ASR_CTL_VIA_PMI1);
      static const char *const ok[] = {"rc", "0", NULL};
      reply_ok(c, m.cmd, ok);
      return;
    }
    case ASR_PMI_ABORT: do_abort(c, &m); return;
    case ASR_PMI_SPAWN:
      c->in_mcmd = 1; /* answered at its endcmd */
      return;
    case ASR_PMI_PUBLISH_NAME:
    case ASR_PMI_UNPUBLISH_NAME:
    case ASR_PMI_LOOKUP_NAME: reply_fail(c, m.cmd, "name_publishing_is_not_supported_by_asrrun"); return;
    case ASR_PMI_INVALID:
    case ASR_PMI__COUNT:
    default: reply_fail(c, ASR_PMI_INVALID, "unknown_command"); return;
  }
}

/* --- PMI-2 commands ------------------------------------------------------------------ */

/* Whether v is a PMI-2 boolean's TRUE. */
static int is_true(const char *v) { return v && strcmp(v, "TRUE") == 0; }

/* fullinit: the rank says who it is (pmirank from PMI_RANK, or the PMI_ID
 * asrd does not set); it must be this connection's rank. */
static void do2_fullinit(asrd_pmi_conn_t *c, const asr_pmi2_msg_t *m) {
  asrd_t *d = S.d;
  const char *who = asr_pmi2_get(m, "pmirank");
  if (!who) who = asr_pmi2_get(m, "srcid");
  char *end = NULL;
  long rank = who ? strtol(who, &end, 10) : c->r->rank;
  if (who && (!*who || *end || rank != c->r->rank)) {
    char why[128];
    snprintf(why, sizeof why, "this connection is rank %d's, not rank %s's", c->r->rank, who);
    reply2_fail(c, m->cmd, why);
    return;
  }
  if (c->state != CONN_OPEN) {
    reply2_fail(c, m->cmd, "fullinit came twice");
    return;
  }
  conn_set_state(c, CONN_JOINED);
  asrd_up_joined(d, c->r, ASR_CTL_JOINED_INIT, ASR_CTL_VIA_PMI2);
  char r[16], n[16];
  snprintf(r, sizeof r, "%d", c->r->rank);
  snprintf(n, sizeof n, "%d", d->nranks);
  const char *ok[] = {"rc",     "0", "pmi-version", "2",     "pmi-subversion", "0",     "rank", r, "size", n,
                      "appnum", "0", "debugged",    "FALSE", "pmiverbose",     "FALSE", NULL};
  reply2_ok(c, m->cmd, ok);
}

/* The key of a put or a get: 1..ASR_PMI2_KEY_MAX bytes (the client's own
 * PMI2_MAX_KEYLEN), or NULL with the failure replied. */
static const char *key2(asrd_pmi_conn_t *c, const asr_pmi2_msg_t *m) {
  const char *key = asr_pmi2_get(m, "key");
  if (!key || !*key) {
    reply2_fail(c, m->cmd, "no key");
    return NULL;
  }
  if (strlen(key) > ASR_PMI2_KEY_MAX) {
    reply2_fail(c, m->cmd, "a key longer than 64 bytes");
    return NULL;
  }
  return key;
}

static void do2_put(asrd_pmi_conn_t *c, const asr_pmi2_msg_t *m, kvt_t *t) {
  const char *key = key2(c, m), *val = asr_pmi2_get(m, "value");
  if (!key) return;
  if (!val) {
    reply2_fail(c, m->cmd, "no value");
    return;
  }
  size_t kl = strlen(key), vl = strlen(val);
  int rc = kv_set(t, key, kl, val, vl);
  if (rc == 0 && t == &S.job && (asr_buf_put_bytes(&S.puts, key, kl) || asr_buf_put_bytes(&S.puts, val, vl)))
    rc = ASR_ENOMEM;
  if (rc) {
    reply2_fail(c, m->cmd, "out of memory");
    return;
  }
  static const char *const ok[] = {"rc", "0", NULL};
  reply2_ok(c, m->cmd, ok);
  if (t != &S.node) return;
  /* the ranks that wait for this node attribute have it now */
  for (int i = 0; i < S.d->nlocal; i++) {
    asrd_pmi_conn_t *w = S.d->ranks[i].pmi;
    if (!w || w->fd < 0 || !w->wait_key || strcmp(w->wait_key, key) != 0) continue;
    free(w->wait_key);
    w->wait_key = NULL;
    kv_t *e = kv_find(&S.node, key);
    const char *found[] = {"rc", "0", "found", "TRUE", "value", e ? e->val : "", NULL};
    reply2_ok(w, ASR_PMI2_GETNODEATTR, found);
  }
}

/* A get from t: found or not, rc=0 either way; a node attribute asked with
 * wait=TRUE waits for its put. */
static void do2_get(asrd_pmi_conn_t *c, const asr_pmi2_msg_t *m, kvt_t *t) {
  const char *key = key2(c, m);
  if (!key) return;
  if (m->cmd == ASR_PMI2_KVS_GET) {
    const char *job = asr_pmi2_get(m, "jobid");
    if (job && *job && strcmp(job, S.kvsname) != 0) {
      reply2_fail(c, m->cmd, "no such job (asrrun serves one)");
      return;
    }
  }
  kv_t *e = kv_find(t, key);
  if (!e && t == &S.node && is_true(asr_pmi2_get(m, "wait"))) {
    free(c->wait_key);
    c->wait_key = strdup(key);
    if (!c->wait_key) reply2_fail(c, m->cmd, "out of memory");
    return;
  }
  const char *ok[] = {"rc", "0", "found", e ? "TRUE" : "FALSE", e ? "value" : NULL, e ? e->val : NULL, NULL};
  reply2_ok(c, m->cmd, ok);
}

/* info-getjobattr: the job's attributes MPICH's PMI-2 layer asks for. */
static void do2_jobattr(asrd_pmi_conn_t *c, const asr_pmi2_msg_t *m) {
  const char *key = key2(c, m);
  if (!key) return;
  char num[16];
  const char *val = NULL;
  if (strcmp(key, "PMI_process_mapping") == 0) {
    kv_t *e = kv_find(&S.job, key);
    val = e ? e->val : NULL;
  } else if (strcmp(key, "universeSize") == 0) {
    snprintf(num, sizeof num, "%d", S.d->nranks);
    val = num;
  }
  const char *ok[] = {"rc", "0", "found", val ? "TRUE" : "FALSE", val ? "value" : NULL, val, NULL};
  reply2_ok(c, m->cmd, ok);
}

/* abort: the job ends (asrrun: ABORT; PMI-2 carries no exit code, the
 * client exits 1 right after); no reply. */
static void do2_abort(asrd_pmi_conn_t *c, const asr_pmi2_msg_t *m) {
  const char *msg = asr_pmi2_get(m, "msg");
  asr_ctl_msg_t up = {
      .type = ASR_CTL_ABORT,
      .u.abort = {.rank = (uint32_t)c->r->rank, .status = 1, .msg = (char *)(msg ? msg : "")}};
  asrd_up_send(S.d, &up);
}

/* One PMI-2 frame of c's (the reader's buffer, parsed in place). */
static void handle_frame(asrd_pmi_conn_t *c, char *body, size_t len, int too_long) {
  asrd_t *d = S.d;
  if (too_long) {
    reply2_fail(c, asr_pmi2_cmd_of_prefix(body, len), "the command is longer than 8192 bytes");
    return;
  }
  asr_pmi2_msg_t m;
  char why[96];
  int rc = asr_pmi2_parse(body, len, &m, why, sizeof why);
  if (rc) {
    reply2_fail(c, m.cmd, why);
    return;
  }
  if (c->state == CONN_OPEN && m.cmd != ASR_PMI2_FULLINIT && m.cmd != ASR_PMI2_ABORT) {
    reply2_fail(c, m.cmd, "fullinit must come first");
    return;
  }
  switch (m.cmd) {
    case ASR_PMI2_FULLINIT: do2_fullinit(c, &m); return;
    case ASR_PMI2_JOB_GETID: {
      const char *ok[] = {"rc", "0", "jobid", S.kvsname, NULL};
      reply2_ok(c, m.cmd, ok);
      return;
    }
    case ASR_PMI2_KVS_PUT: do2_put(c, &m, &S.job); return;
    case ASR_PMI2_KVS_GET: do2_get(c, &m, &S.job); return;
    case ASR_PMI2_PUTNODEATTR: do2_put(c, &m, &S.node); return;
    case ASR_PMI2_GETNODEATTR: do2_get(c, &m, &S.node); return;
    case ASR_PMI2_GETJOBATTR: do2_jobattr(c, &m); return;
    case ASR_PMI2_KVS_FENCE:
      if (c->state == CONN_BARRIER) {
        reply2_fail(c, m.cmd, "already in the fence");
        return;
      }
      conn_set_state(c, CONN_BARRIER);
      barrier_check(d);
      return;
    case ASR_PMI2_FINALIZE: {
      if (c->state == CONN_BARRIER) {
        reply2_fail(c, m.cmd, "finalize inside a fence");
        return;
      }
      conn_set_state(c, CONN_FINALIZED);
      asrd_up_joined(d, c->r, ASR_CTL_JOINED_FINALIZED, ASR_CTL_VIA_PMI2);
      static const char *const ok[] = {"rc", "0", NULL};
      reply2_ok(c, m.cmd, ok);
      return;
    }
    case ASR_PMI2_ABORT: do2_abort(c, &m); return;
    case ASR_PMI2_JOB_CONNECT:
    case ASR_PMI2_JOB_DISCONNECT:
      reply2_fail(c, m.cmd, "connecting to other jobs is not supported by asrrun");
      return;
    case ASR_PMI2_NAME_PUBLISH:
    case ASR_PMI2_NAME_UNPUBLISH:
    case ASR_PMI2_NAME_LOOKUP: reply2_fail(c, m.cmd, "name publishing is not supported by asrrun"); return;
    case ASR_PMI2_SPAWN: reply2_fail(c, m.cmd, "spawn is not supported by asrrun"); return;
    case ASR_PMI2_RING: reply2_fail(c, m.cmd, "ring is not supported by asrrun"); return;
    case ASR_PMI2_INVALID:
    case ASR_PMI2__COUNT:
    default: reply2_fail(c, ASR_PMI2_INVALID, "unknown command"); return;
  }
}

/* --- the connection ------------------------------------------------------------------ */

/* Reads while the rank's replies are read (REPLY_MAX), writes while any wait. */
static void conn_watch(asrd_pmi_conn_t *c) {
  if (c->fd < 0) return;
  unsigned want = (asr_buf_pending(&c->out) < REPLY_MAX ? ASR_LOOP_READ : 0) |
                  (asr_buf_pending(&c->out) ? ASR_LOOP_WRITE : 0);
  if (want != c->watching && asr_loop_io_set(S.d->loop, &c->io, want) == 0) c->watching = want;
}

/* Reads and handles what is there; 1 while the connection is open. */
static int conn_read(asrd_pmi_conn_t *c) {
  static uint8_t buf[READ_CHUNK];
  for (;;) {
    if (c->fd < 0 || asr_buf_pending(&c->out) >= REPLY_MAX) return c->fd >= 0;
    ssize_t n = recv(c->fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
    if (n <= 0) {
      asrd_rank_t *r = c->r;
      conn_close(c); /* EOF: the rank closed it, or is gone */
      asrd_ends_sight(r, "its PMI connection closed");
      return 0;
    }
    for (size_t off = 0; off < (size_t)n && c->fd >= 0;) {
      if (c->v2) { /* past a PMI-2 init, even within this chunk */
        size_t took, len;
        asr_pmi2_feed_t f = asr_pmi2_reader_feed(c->rd2, buf + off, (size_t)n - off, &took, &len);
        off += took;
        if (f == ASR_PMI2_FRAME || f == ASR_PMI2_TOO_LONG) {
          handle_frame(c, c->rd2->body, len, f == ASR_PMI2_TOO_LONG);
        } else if (f == ASR_PMI2_BAD_LENGTH) {
          /* no frame's end can be found: say why, then hang up */
          asr_warn("pmi", "rank %d: a PMI-2 frame's length is not a number; closing its PMI connection",
                   c->r->rank);
          (void)asr_pmi2_reply_fail(&c->out, ASR_PMI2_INVALID, "a frame's length is not a number");
          conn_flush(c);
          conn_close(c);
          return 0;
        }
        continue;
      }
      long ll;
      int too_long;
      off += asr_pmi_reader_feed(&c->rd, buf + off, (size_t)n - off, &ll, &too_long);
      if (ll >= 0) handle_line(c, c->rd.line, (size_t)ll, too_long);
    }
  }
}

static void on_io(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)loop;
  asrd_pmi_conn_t *c = io->arg;
  if (events & ASR_LOOP_WRITE) conn_flush(c);
  if (c->fd >= 0 && (events & (ASR_LOOP_READ | ASR_LOOP_HUP | ASR_LOOP_ERR))) conn_read(c);
}

/* Closes the socket (the conn itself lives until asrd_pmi_stop: its rank
 * still points at it). */
static void conn_close(asrd_pmi_conn_t *c) {
  if (c->fd < 0) return;
  asr_loop_io_stop(S.d->loop, &c->io);
  close(c->fd);
  c->fd = -1;
  c->watching = 0;
  asr_buf_free(&c->out);
  conn_set_state(c, CONN_CLOSED);
}

int asrd_pmi_open(asrd_t *d, asrd_rank_t *r) {
  if (!S.ready) return ASR_ESTATE;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return asr_err_from_errno(errno);
  /* the child's end must not land on 0..2, which the spawn overwrites */
  if (sv[1] < 3) {
    int moved = fcntl(sv[1], F_DUPFD_CLOEXEC, 3);
    close(sv[1]);
    if (moved < 0) {
      close(sv[0]);
      return asr_err_from_errno(errno);
    }
    sv[1] = moved;
  }
  asrd_pmi_conn_t *c = calloc(1, sizeof *c);
  if (!c) {
    close(sv[0]);
    close(sv[1]);
    return ASR_ENOMEM;
  }
  c->r = r;
  c->fd = sv[0];
  fcntl(c->fd, F_SETFL, O_NONBLOCK);
  int rc = asr_loop_io_start(d->loop, &c->io, c->fd, ASR_LOOP_READ, on_io, c);
  if (rc) {
    close(sv[0]);
    close(sv[1]);
    free(c);
    return rc;
  }
  c->watching = ASR_LOOP_READ;
  r->pmi = c;
  return sv[1];
}

void asrd_pmi_drain(asrd_rank_t *r) {
  if (r->pmi && r->pmi->fd >= 0) conn_read(r->pmi);
}

void asrd_pmi_close_rank(asrd_rank_t *r) {
  asrd_pmi_conn_t *c = r->pmi;
  if (!c) return;
  conn_close(c);
  free(c->rd2);
  free(c->wait_key);
  free(c);
  r->pmi = NULL;
}

void asrd_pmi_stop(asrd_t *d) {
  for (int i = 0; d->ranks && i < d->nlocal; i++) asrd_pmi_close_rank(&d->ranks[i]);
  kv_free(&S.job);
  kv_free(&S.node);
  asr_buf_free(&S.puts);
  S.ready = 0;
}
