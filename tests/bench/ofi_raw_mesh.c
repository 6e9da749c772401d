/*
 * ofi_raw_mesh -- the raw libfabric baseline for the mesh connect of
 * tests/bench/ofi_bench.sh (asr_bench -m mesh): the same processes, the same
 * endpoints, and one message from every rank to every other rank, written
 * straight on libfabric with nothing of libasr in between.
 *
 *   ofi_raw_mesh [-p PROVIDER] [-R RANKS] [-L LNCS_PER_PROC] [-T] [-Z] [-t TIMEOUT_S]
 *
 * Forks RANKS / LNCS_PER_PROC processes with asr_bench's launcher
 * (tests/apps/asr_launch.h, so both start alike); rank r lives in process
 * r / LNCS_PER_PROC. Each rank opens its own endpoint as libasr opens an
 * LNC's (runtime/ofi.c: fabric, domain, CQ, AV, RDM endpoint, the same hints;
 * one fi_getinfo per process) and writes its address into a table the
 * launcher shared with every process before forking (an address exchange
 * that costs next to nothing, where libasr's goes through its KV store).
 * After a barrier every rank inserts all addresses, posts one receive per
 * other rank and sends each other rank one 8-byte stamp (from, to): on an
 * RDM endpoint that first message is what sets up the connection (tcp's
 * socket, shm's region mapping), so "connected" for raw libfabric means
 * every message has arrived, and each is checked. A rank's process drives
 * all its endpoints from one thread, retrying full queues.
 *
 * Two options give the baseline libasr's shape, each alone or both (-T -Z):
 * -T drives each endpoint from a thread of its own (libasr's service thread
 * per LNC), and -Z inserts a peer into the AV only just before the first
 * send to it (libasr learns a peer's address from that comm's rendezvous,
 * so its AV fills as its comms connect; up front, every region is mapped
 * before any peer's connection request comes in).
 *
 * The clock starts in the launcher just before the first fork and stops when
 * the last process has all its messages; prints, as asr_bench,
 *   mesh RANKS PROCS init_ms connected_ms
 * (init_ms: until the last endpoint was up). Exits non-zero on any failure
 * or wrong payload. PROVIDER defaults to ASR_PROVIDER, else shm.
 */
#include "config.h"

#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "asr_launch.h"
#include "raw_ofi.h"

#define ADDR_MAX 256
/* Ranks, not processes (LAUNCH_MAX of those): shm's address vector holds
 * at most 256 peers, and asr_bench's 192-rank mesh is the largest asked. */
#define RANKS_MAX 256

typedef struct { /* the table the launcher maps shared before forking */
  uint32_t len[RANKS_MAX];
  unsigned char addr[RANKS_MAX][ADDR_MAX];
} addr_table_t;

typedef struct {
  int ranks, per_proc;
  int thread_per_ep; /* -T: each endpoint driven by a thread of its own */
  int lazy_av;       /* -Z: each peer inserted just before the first send to it */
  const char *prov;
  uint64_t t0;
  addr_table_t *table;
} mesh_opts_t;

typedef struct {
  struct fi_context2 ctx; /* first: the op context */
  int done;
  size_t len;
} op_t;

typedef struct { /* one rank's endpoint and its messages */
  int rank;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_cq *cq;
  struct fid_av *av;
  struct fid_ep *ep;
  struct fid_mr *mr;
  void *desc;
  fi_addr_t *peers;      /* by rank */
  uint64_t *sbuf, *rbuf; /* slot q: the message to / from rank q */
  op_t *sops, *rops;     /* by rank */
  int next_send;         /* next rank to send to */
  addr_table_t *lazy;    /* -Z: insert each peer just before the first send to it */
  int inserted;          /* -Z: peers below this one are in the AV */
  int open;              /* completions still to come */
} rank_ep_t;

static int fail(int rank, const char *what, long rc) {
  fprintf(stderr, "ofi_raw_mesh rank %d: %s: %s\n", rank, what, rc < 0 ? fi_strerror((int)-rc) : "failed");
  return 1;
}

static struct fi_info *get_info(const char *prov) {
  struct fi_info *info = NULL;
  int rc = raw_ofi_getinfo(prov, FI_THREAD_SAFE, &info);
  if (rc) fprintf(stderr, "ofi_raw_mesh: fi_getinfo(%s): %s\n", prov, fi_strerror(-rc));
  return rc ? NULL : info;
}

static int open_ep(rank_ep_t *e, struct fi_info *info, int ranks, addr_table_t *t) {
  int rc;
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE, .size = 4096};
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
  if ((rc = fi_fabric(info->fabric_attr, &e->fabric, NULL))) return fail(e->rank, "fi_fabric", rc);
  if ((rc = fi_domain(e->fabric, info, &e->domain, NULL))) return fail(e->rank, "fi_domain", rc);
  if ((rc = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL))) return fail(e->rank, "fi_cq_open", rc);
  if ((rc = fi_av_open(e->domain, &av_attr, &e->av, NULL))) return fail(e->rank, "fi_av_open", rc);
  if ((rc = fi_endpoint(e->domain, info, &e->ep, NULL))) return fail(e->rank, "fi_endpoint", rc);
  if ((rc = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV)))
    return fail(e->rank, "fi_ep_bind(cq)", rc);
  if ((rc = fi_ep_bind(e->ep, &e->av->fid, 0))) return fail(e->rank, "fi_ep_bind(av)", rc);
  if ((rc = fi_enable(e->ep))) return fail(e->rank, "fi_enable", rc);
  size_t alen = ADDR_MAX;
  if ((rc = fi_getname(&e->ep->fid, t->addr[e->rank], &alen))) return fail(e->rank, "fi_getname", rc);
  t->len[e->rank] = (uint32_t)alen;
  size_t n = (size_t)ranks;
  e->sbuf = calloc(2 * n, sizeof *e->sbuf);
  e->peers = calloc(n, sizeof *e->peers);
  e->sops = calloc(n, sizeof *e->sops);
  e->rops = calloc(n, sizeof *e->rops);
  if (!e->sbuf || !e->peers || !e->sops || !e->rops) return fail(e->rank, "memory", 0);
  e->rbuf = e->sbuf + n;
  if ((rc = fi_mr_reg(e->domain, e->sbuf, 2 * n * sizeof *e->sbuf, FI_SEND | FI_RECV, 0, 0, 0, &e->mr, NULL)))
    return fail(e->rank, "fi_mr_reg", rc);
  e->desc = (info->domain_attr->mr_mode & FI_MR_LOCAL) ? fi_mr_desc(e->mr) : NULL;
  return 0;
}

static void close_ep(rank_ep_t *e) {
  if (e->ep) fi_close(&e->ep->fid);
  if (e->mr) fi_close(&e->mr->fid);
  if (e->av) fi_close(&e->av->fid);
  if (e->cq) fi_close(&e->cq->fid);
  if (e->domain) fi_close(&e->domain->fid);
  if (e->fabric) fi_close(&e->fabric->fid);
  free(e->sbuf);
  free(e->peers);
  free(e->sops);
  free(e->rops);
}

/* Reads e's completions; -1 on a failed one. */
static int drain(rank_ep_t *e) {
  struct fi_cq_tagged_entry ent[32];
  for (;;) {
    ssize_t n = fi_cq_read(e->cq, ent, 32);
    if (n > 0) {
      for (ssize_t i = 0; i < n; i++) {
        op_t *op = ent[i].op_context;
        op->len = ent[i].len;
        op->done = 1;
        e->open--;
      }
      continue;
    }
    if (n == -FI_EAGAIN) return 0;
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry err;
      memset(&err, 0, sizeof err);
      fi_cq_readerr(e->cq, &err, 0);
      fprintf(stderr, "ofi_raw_mesh rank %d: completion error: %s\n", e->rank, fi_strerror(err.err));
      return -1;
    }
    return fail(e->rank, "fi_cq_read", n) ? -1 : 0;
  }
}

/* Posts e's next sends until the provider says its queue is full; -1 on an error. */
static int post_sends(rank_ep_t *e, int ranks, size_t inject_max) {
  while (e->next_send < ranks) {
    int q = e->next_send;
    if (q == e->rank) {
      e->next_send++;
      continue;
    }
    if (e->lazy && q >= e->inserted) {
      if (fi_av_insert(e->av, e->lazy->addr[q], 1, &e->peers[q], 0, NULL) != 1)
        return fail(e->rank, "fi_av_insert", 0) ? -1 : 0;
      e->inserted = q + 1;
    }
    e->sbuf[q] = ((uint64_t)e->rank << 32) | (uint64_t)q;
    ssize_t rc;
    if (inject_max >= 8) /* libasr's rule: shm injects small sends, no completion */
      rc = fi_tinject(e->ep, &e->sbuf[q], 8, e->peers[q], (uint64_t)e->rank);
    else
      rc = fi_tsend(e->ep, &e->sbuf[q], 8, e->desc, e->peers[q], (uint64_t)e->rank, &e->sops[q]);
    if (rc == -FI_EAGAIN || rc == -FI_ENOMEM) return 0;
    if (rc) return fail(e->rank, "send", rc) ? -1 : 0;
    if (inject_max >= 8) e->open--;
    e->next_send++;
  }
  return 0;
}

typedef struct {
  rank_ep_t *e;
  int ranks;
  size_t inject_max;
  int bad;
} ep_thread_t;

/* -T: one endpoint's sends and completions, on a thread of its own (as
 * libasr drives each LNC from its own service thread). */
static void *ep_thread(void *arg) {
  ep_thread_t *t = arg;
  rank_ep_t *e = t->e;
  while (e->open > 0 && !t->bad) {
    int before = e->open, next = e->next_send;
    if (post_sends(e, t->ranks, t->inject_max) || drain(e)) t->bad = 1;
    if (e->open == before && e->next_send == next && e->open > 0) sched_yield();
  }
  return NULL;
}

static int mesh_proc(int proc, int nprocs, void *arg) {
  const mesh_opts_t *o = arg;
  int R = o->ranks, L = o->per_proc;
  (void)nprocs;
  struct fi_info *info = get_info(o->prov);
  if (!info) return 1;
  size_t inject_max = raw_ofi_inject_max(o->prov, info);
  rank_ep_t *eps = calloc((size_t)L, sizeof *eps);
  if (!eps) return 1;
  int bad = 0;
  for (int i = 0; i < L && !bad; i++) {
    eps[i].rank = proc * L + i;
    bad = open_ep(&eps[i], info, R, o->table);
  }
  uint64_t t_init = launch_now_ns();
  /* every address is in the table once all ranks pass the barrier */
  if (launch_barrier() != 0) bad = 1;
  for (int i = 0; i < L && !bad; i++) {
    rank_ep_t *e = &eps[i];
    if (o->lazy_av) e->lazy = o->table;
    for (int q = 0; q < R && !bad && !o->lazy_av; q++)
      if (fi_av_insert(e->av, o->table->addr[q], 1, &e->peers[q], 0, NULL) != 1)
        bad = fail(e->rank, "fi_av_insert", 0);
    e->open = 2 * (R - 1);
    for (int q = 0; q < R && !bad; q++) {
      if (q == e->rank) continue;
      e->rbuf[q] = ~0ull;
      ssize_t rc;
      while ((rc = fi_trecv(e->ep, &e->rbuf[q], 8, e->desc, FI_ADDR_UNSPEC, (uint64_t)q, 0, &e->rops[q])) ==
             -FI_EAGAIN)
        if (drain(e)) break;
      if (rc) bad = fail(e->rank, "fi_trecv", rc);
    }
  }
  if (o->thread_per_ep && !bad) {
    ep_thread_t *ts = calloc((size_t)L, sizeof *ts);
    pthread_t *tids = calloc((size_t)L, sizeof *tids);
    int started = 0;
    if (!ts || !tids) bad = fail(proc, "memory", 0);
    for (int i = 0; i < L && !bad; i++) {
      ts[i] = (ep_thread_t){.e = &eps[i], .ranks = R, .inject_max = inject_max};
      if (pthread_create(&tids[i], NULL, ep_thread, &ts[i]) != 0)
        bad = fail(eps[i].rank, "pthread_create", 0);
      else
        started++;
    }
    for (int i = 0; i < started; i++) {
      pthread_join(tids[i], NULL);
      if (ts[i].bad) bad = 1;
    }
    free(ts);
    free(tids);
  }
  /* one thread drives every endpoint of the process: a full queue waits for
   * a peer's progress, which may be this very process's next round */
  for (int left = o->thread_per_ep ? 0 : L; left > 0 && !bad;) {
    int moved = 0;
    left = 0;
    for (int i = 0; i < L && !bad; i++) {
      rank_ep_t *e = &eps[i];
      int before = e->open;
      if (post_sends(e, R, inject_max) || drain(e)) bad = 1;
      if (e->open != before) moved = 1;
      if (e->open > 0) left++;
    }
    /* A round that moved nothing gives the CPU away: with 16 processes on a
     * machine's 2 CPUs, ranks that only spin keep the ones they wait for
     * from running (libasr's service threads sleep between ticks). */
    if (!moved && left) sched_yield();
  }
  uint64_t t_conn = launch_now_ns();
  for (int i = 0; i < L && !bad; i++)
    for (int q = 0; q < R; q++) {
      rank_ep_t *e = &eps[i];
      if (q == e->rank) continue;
      if (eps[i].rops[q].len != 8 || e->rbuf[q] != (((uint64_t)q << 32) | (uint64_t)e->rank)) {
        fprintf(stderr, "ofi_raw_mesh: rank %d got %zu bytes 0x%llx from rank %d\n", e->rank, e->rops[q].len,
                (unsigned long long)e->rbuf[q], q);
        bad = 1;
      }
    }
  if (!bad) {
    double rep[2] = {(double)(t_init - o->t0) / 1e6, (double)(t_conn - o->t0) / 1e6};
    launch_report(rep, 2);
  }
  /* nobody closes an endpoint a peer may still need */
  if (launch_barrier() != 0) bad = 1;
  for (int i = 0; i < L; i++) close_ep(&eps[i]);
  free(eps);
  fi_freeinfo(info);
  return bad;
}

int main(int argc, char **argv) {
  mesh_opts_t o = {.ranks = 16, .per_proc = 1};
  int timeout_s = 300, opt;
  o.prov = getenv("ASR_PROVIDER");
  if (!o.prov || !*o.prov) o.prov = "shm";
  while ((opt = getopt(argc, argv, "p:R:L:TZt:h")) != -1) {
    switch (opt) {
      case 'p': o.prov = optarg; break;
      case 'R': o.ranks = atoi(optarg); break;
      case 'L': o.per_proc = atoi(optarg); break;
      case 'T': o.thread_per_ep = 1; break;
      case 'Z': o.lazy_av = 1; break;
      case 't': timeout_s = atoi(optarg); break;
      default:
        fprintf(stderr,
                "usage: ofi_raw_mesh [-p PROVIDER] [-R RANKS] [-L LNCS_PER_PROC] [-T] [-t TIMEOUT_S]\n");
        return 2;
    }
  }
  raw_ofi_env_defaults();
  if (o.ranks < 2 || o.ranks > RANKS_MAX || o.per_proc < 1 || o.ranks % o.per_proc ||
      o.ranks / o.per_proc > LAUNCH_MAX || timeout_s < 1) {
    fprintf(stderr, "ofi_raw_mesh: needs 2 <= -R <= %d, -L dividing -R into at most %d processes, -t >= 1\n",
            RANKS_MAX, LAUNCH_MAX);
    return 2;
  }
  o.table = mmap(NULL, sizeof *o.table, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (o.table == MAP_FAILED) {
    perror("ofi_raw_mesh: mmap");
    return 1;
  }
  int procs = o.ranks / o.per_proc;
  o.t0 = launch_now_ns();
  int rc = launch_run(procs, mesh_proc, &o, timeout_s, "ofi_raw_mesh");
  double ms[2]; /* init, connected */
  int reported = launch_report_max(procs, 2, ms);
  munmap(o.table, sizeof *o.table);
  if (rc || reported != procs) {
    fprintf(stderr, "ofi_raw_mesh: mesh of %d ranks failed (%d of %d processes done)\n", o.ranks, reported,
            procs);
    return 1;
  }
  printf("mesh %d %d %.1f %.1f\n", o.ranks, procs, ms[0], ms[1]);
  return 0;
}
