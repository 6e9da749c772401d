/*
 * rank_fail.c -- a job that outlives one of its ranks (issue 50;
 * tests/integration/test_rank_fail.c runs it):
 *
 *   rank_fail MODE VICTIM
 *
 * Every rank connects a SEND comm to every other rank and accepts a RECV
 * comm from each, and streams messages of 2 B .. RF_MSG bytes (default
 * 64 KiB; the victim's own at most RF_VICTIM_MSG, default RF_MSG) on all
 * of them, RF_WINDOW (4) in flight per direction, every
 * receive checked byte for byte (message i from s to r has contents that
 * depend on s, r, i and each byte's place). First 8 messages each way to
 * every peer and a barrier (ASR_SUCCESS: all alive); then each rank prints
 * "rank R: READY pid P" and streams on. Then the victim dies:
 *   kill    the test SIGKILLs it once every rank is READY (the job runs
 *           under asrrun --on-failure continue, whose daemons report the
 *           death);
 *   notify  the victim itself sends the launcher's rank-state event of its
 *           own death (common/asr_rank_ev.h: FAILED, with the line
 *           "peer rank V on host H died: it said so itself"), as a daemon
 *           would, prints "rank V: notified at NS", then waits RF_GRACE_MS
 *           (300) without touching libasr and exits 0 without finalizing
 *           (run it with --allow-early-exit). The survivors' comms to it
 *           then fail on the event alone, while its process is still there:
 *           what a death on another host looks like.
 * Each survivor notes (CLOCK_MONOTONIC) when it sees each of its two comms
 * to the victim fail (a post or a test that fails, or asr_comm_status
 * CONNECTION_ERROR) and prints "rank R: victim tx failed at NS, rx failed
 * at NS". Every request it had in flight to the victim must then end (done
 * or failed), its other comms must go on: it sends 32 more messages to
 * every other survivor, then a 1-byte end marker, and takes everything the
 * others send until their markers. Then, each bounded by 5 s: the
 * victim's state must read FAILED (asr_job_rank_state), each comm to it must
 * name the rank in asr_comm_error ("rank R: tx error: ..."), so must a
 * second SEND and a second RECV comm the survivor made to it before the
 * first barrier, which the victim never connects (they were still
 * connecting when it died: "rank R: connecting comms failed: ..."), and
 * asr_job_barrier must return ASR_PEER_FAILED ("rank R: barrier
 * ASR_PEER_FAILED in MS ms"). It closes every comm and finalizes, and
 * prints "rank R: DONE, N messages verified".
 *
 * Exit status 0 when all of that held; 1 with a "rank R: FAIL: ..." line
 * otherwise; 2 for bad arguments.
 */
#include <pmix.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "asr.h"
#include "asr_rank_ev.h"

#define MAXW 16
#define WARM 8   /* messages each way before READY */
#define AFTER 32 /* messages to each survivor after the victim's death */
#define BOUND_MS 5000
#define STREAM_MS 20000 /* a survivor that sees no death by then fails */

static int me, nranks, victim, killmode;
static size_t msg_max = 65536, victim_max = 65536;
static int win = 4;

typedef struct {
  int rank;
  asr_comm_t *tx, *rx;
  asr_tensor_t *st, *rt;
  asr_request_t *sq[MAXW], *rq[MAXW];
  uint64_t s_posted, s_done, r_posted, r_done;
  int end_posted, got_end;
  int tx_failed, rx_failed;
  uint64_t tx_fail_ns, rx_fail_ns;
  uint64_t after_from; /* s_done when this rank saw the victim die */
  uint64_t verified;
  uint64_t victim_done, victim_failed; /* requests to the victim that ended after its death */
} peer_t;

static peer_t peers[64];

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void fail(const char *f, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  printf("rank %d: FAIL: ", me);
  vprintf(f, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  exit(1);
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

/* Message i from s to r: its size (2 .. msg_max; 1 is the end marker) and byte j. */
static size_t size_of(int s, int r, uint64_t i) {
  uint64_t h = mix(((uint64_t)s << 48) ^ ((uint64_t)r << 32) ^ i);
  size_t max = s == victim ? victim_max : msg_max;
  return h % 4 == 0 ? 2 + h % 255 : 2 + (h >> 8) % (max - 1);
}
static uint8_t byte_of(int s, int r, uint64_t i, size_t j) {
  return (uint8_t)((unsigned)s * 131u ^ (unsigned)r * 71u ^ (unsigned)(i * 2654435761u >> 7) ^
                   (unsigned)(j * 7u + (j >> 8)));
}

static int is_victim(const peer_t *p) { return p->rank == victim; }

/* The victim's comm c failed (first sight): when. */
static void victim_failed(peer_t *p, int tx) {
  if (tx && !p->tx_failed) {
    p->tx_failed = 1;
    p->tx_fail_ns = now_ns();
  }
  if (!tx && !p->rx_failed) {
    p->rx_failed = 1;
    p->rx_fail_ns = now_ns();
  }
}

/* A post or a test of p's comm failed with rc. */
static void comm_failed(peer_t *p, int tx, const char *what, int rc) {
  if (!is_victim(p) || me == victim)
    fail("%s on the comm %s rank %d: %s (%s)", what, tx ? "to" : "from", p->rank, asr_strerror(rc),
         asr_comm_error(tx ? p->tx : p->rx) ? asr_comm_error(tx ? p->tx : p->rx) : "no comm error");
  victim_failed(p, tx);
}

/* Sends to p: tests the oldest in flight, posts while the window has room
 * and more is wanted (limit; end: the end marker after them). */
static void pump_send(peer_t *p, uint64_t limit, int end) {
  while (p->s_done < p->s_posted) {
    int slot = (int)(p->s_done % (uint64_t)win), done = 0, rc = asr_test(p->sq[slot], &done, NULL);
    if (rc) {
      if (p->tx_failed) p->victim_failed++;
      comm_failed(p, 1, "asr_test of a send", rc);
      p->s_done++; /* ended */
      continue;
    }
    if (!done) break;
    if (p->tx_failed) p->victim_done++;
    p->s_done++;
  }
  if (p->tx_failed) return; /* nothing new on a failed comm */
  while (p->s_posted - p->s_done < (uint64_t)win && !p->end_posted && (p->s_posted < limit || end)) {
    int slot = (int)(p->s_posted % (uint64_t)win);
    char *buf = (char *)asr_tensor_va(p->st) + (size_t)slot * msg_max;
    size_t len;
    if (p->s_posted >= limit) { /* end */
      len = 1;
      buf[0] = (char)0xEE;
    } else {
      len = size_of(me, p->rank, p->s_posted);
      for (size_t j = 0; j < len; j++) buf[j] = (char)byte_of(me, p->rank, p->s_posted, j);
    }
    int rc = asr_isend(p->tx, p->st, (size_t)slot * msg_max, len, &p->sq[slot]);
    if (rc) {
      comm_failed(p, 1, "asr_isend", rc);
      return;
    }
    if (len == 1) p->end_posted = 1;
    p->s_posted++;
  }
}

/* Receives from p: tests the oldest posted (checking it), posts while the
 * window has room and more is wanted (limit), until p's end marker. */
static void pump_recv(peer_t *p, uint64_t limit) {
  while (p->r_done < p->r_posted && !p->got_end) {
    int slot = (int)(p->r_done % (uint64_t)win), done = 0;
    size_t got = 0;
    int rc = asr_test(p->rq[slot], &done, &got);
    if (rc) {
      if (p->rx_failed) p->victim_failed++;
      comm_failed(p, 0, "asr_test of a receive", rc);
      p->r_done++;
      continue;
    }
    if (!done) break;
    if (p->rx_failed) p->victim_done++;
    const uint8_t *buf = (const uint8_t *)asr_tensor_va(p->rt) + (size_t)slot * msg_max;
    if (got == 1 && buf[0] == 0xEE) {
      p->got_end = 1;
    } else {
      size_t want = size_of(p->rank, me, p->r_done);
      if (got != want)
        fail("message %llu from rank %d: %zu bytes, sent %zu", (unsigned long long)p->r_done, p->rank, got,
             want);
      for (size_t j = 0; j < got; j++)
        if (buf[j] != byte_of(p->rank, me, p->r_done, j))
          fail("message %llu from rank %d: byte %zu is %u, sent %u", (unsigned long long)p->r_done, p->rank,
               j, buf[j], byte_of(p->rank, me, p->r_done, j));
      p->verified++;
    }
    p->r_done++;
  }
  if (p->rx_failed || p->got_end) return;
  while (p->r_posted - p->r_done < (uint64_t)win && p->r_posted < limit) {
    int slot = (int)(p->r_posted % (uint64_t)win);
    int rc = asr_irecv(p->rx, p->rt, (size_t)slot * msg_max, msg_max, &p->rq[slot]);
    if (rc) {
      comm_failed(p, 0, "asr_irecv", rc);
      return;
    }
    p->r_posted++;
  }
}

/* The victim's comms' states, looked at directly as well. */
static void look_at_victim(peer_t *p) {
  int st;
  if (!p->tx_failed && asr_comm_status(p->tx, &st) == ASR_SUCCESS && st == ASR_COMM_CONNECTION_ERROR)
    victim_failed(p, 1);
  if (!p->rx_failed && asr_comm_status(p->rx, &st) == ASR_SUCCESS && st == ASR_COMM_CONNECTION_ERROR)
    victim_failed(p, 0);
}

/* The victim reports its own death as its daemon would (asr_rank_ev.h). */
static void notify_own_death(const asr_job_info_t *info) {
  pmix_proc_t src;
  const char *ns = getenv("PMIX_NAMESPACE");
  PMIX_LOAD_PROCID(&src, ns ? ns : "", (pmix_rank_t)me);
  char why[256];
  snprintf(why, sizeof why, "peer rank %d on host %s died: it said so itself", me, info->hostname);
  uint32_t rank = (uint32_t)me, state = ASR_RANK_FAILED, inc = 0;
  bool yes = true;
  pmix_info_t ev[5];
  PMIX_INFO_LOAD(&ev[0], ASR_RANK_EV_RANK, &rank, PMIX_UINT32);
  PMIX_INFO_LOAD(&ev[1], ASR_RANK_EV_STATE, &state, PMIX_UINT32);
  PMIX_INFO_LOAD(&ev[2], ASR_RANK_EV_INCARNATION, &inc, PMIX_UINT32);
  PMIX_INFO_LOAD(&ev[3], ASR_RANK_EV_WHY, why, PMIX_STRING);
  PMIX_INFO_LOAD(&ev[4], PMIX_EVENT_NON_DEFAULT, &yes, PMIX_BOOL);
  uint64_t t = now_ns();
  pmix_status_t rc = PMIx_Notify_event(ASR_RANK_EV_CODE, &src, PMIX_RANGE_LOCAL, ev, 5, NULL, NULL);
  if (rc != PMIX_SUCCESS) fail("PMIx_Notify_event: %s", PMIx_Error_string(rc));
  printf("rank %d: notified at %llu\n", me, (unsigned long long)t);
  fflush(stdout);
}

static int env_num(const char *name, int def) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : def;
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "kill") && strcmp(argv[1], "notify")))
    return fprintf(stderr, "usage: rank_fail kill|notify VICTIM\n"), 2;
  killmode = strcmp(argv[1], "kill") == 0;
  victim = atoi(argv[2]);
  msg_max = (size_t)env_num("RF_MSG", 65536);
  victim_max = (size_t)env_num("RF_VICTIM_MSG", (int)msg_max);
  win = env_num("RF_WINDOW", 4);
  if (msg_max < 2 || victim_max < 2 || victim_max > msg_max || win < 1 || win > MAXW)
    return fprintf(stderr, "rank_fail: bad RF_MSG, RF_VICTIM_MSG or RF_WINDOW\n"), 2;
  asr_job_info_t info;
  int rc = asr_job_init(&info);
  if (rc) return fprintf(stderr, "rank_fail: asr_job_init: %s\n", asr_strerror(rc)), 1;
  me = info.rank;
  nranks = info.size;
  if (nranks > 64 || victim < 0 || victim >= nranks) fail("victim %d of %d ranks", victim, nranks);
  int np = 0;
  for (int r = 0; r < nranks; r++) {
    if (r == me) continue;
    peer_t *p = &peers[np++];
    p->rank = r;
    if ((rc = asr_tensor_alloc(msg_max * (size_t)win, &p->st)) ||
        (rc = asr_tensor_alloc(msg_max * (size_t)win, &p->rt)))
      fail("asr_tensor_alloc: %s", asr_strerror(rc));
    if ((rc = asr_job_connect(r, &p->tx)) || (rc = asr_job_accept(r, &p->rx)))
      fail("connect/accept rank %d: %s", r, asr_strerror(rc));
  }
  for (int i = 0; i < np; i++)
    if ((rc = asr_comm_wait_connected(peers[i].tx, 30000)) ||
        (rc = asr_comm_wait_connected(peers[i].rx, 30000)))
      fail("rank %d did not connect: %s", peers[i].rank, asr_strerror(rc));

  /* WARM messages each way with everyone, then all meet. */
  for (int busy = 1; busy;) {
    busy = 0;
    for (int i = 0; i < np; i++) {
      pump_send(&peers[i], WARM, 0);
      pump_recv(&peers[i], WARM);
      busy |= peers[i].s_done < WARM || peers[i].r_done < WARM;
    }
  }
  /* A survivor's second pair of comms to the victim, which the victim never
   * connects. Made before the barrier: the victim cannot die (killed once
   * every rank printed READY, or notifying after the barrier) before every
   * survivor has them, so they are still connecting at its death, never
   * refused as to a rank already failed. */
  asr_comm_t *pending_tx = NULL, *pending_rx = NULL;
  if (me != victim &&
      ((rc = asr_job_connect(victim, &pending_tx)) || (rc = asr_job_accept(victim, &pending_rx))))
    fail("the pending comms to rank %d: %s", victim, asr_strerror(rc));
  if ((rc = asr_job_barrier()) != ASR_SUCCESS) fail("the first barrier: %s", asr_strerror(rc));
  printf("rank %d: READY pid %d\n", me, (int)getpid());
  fflush(stdout);

  if (me == victim) {
    /* Stream on until killed, or until every peer took a few more (notify). */
    for (;;) {
      int more = 0;
      for (int i = 0; i < np; i++) {
        pump_send(&peers[i], UINT64_MAX, 0);
        pump_recv(&peers[i], UINT64_MAX);
        more |= peers[i].s_done < WARM + 16;
      }
      if (!killmode && !more) break;
    }
    notify_own_death(&info);
    usleep((useconds_t)env_num("RF_GRACE_MS", 300) * 1000);
    _exit(0);
  }

  /* A survivor: stream on with everyone until the victim's death is seen,
   * then AFTER more to each survivor and the end marker. */
  peer_t *v = NULL;
  for (int i = 0; i < np; i++)
    if (is_victim(&peers[i])) v = &peers[i];
  uint64_t t0 = now_ns(), seen_ns = 0;
  for (;;) {
    int dead = v->tx_failed && v->rx_failed;
    if (dead && !seen_ns) {
      seen_ns = now_ns();
      for (int i = 0; i < np; i++) peers[i].after_from = peers[i].s_done;
    }
    int finished = dead && v->s_done == v->s_posted && (v->r_done == v->r_posted || v->got_end);
    for (int i = 0; i < np; i++) {
      peer_t *p = &peers[i];
      if (is_victim(p)) {
        look_at_victim(p);
        pump_send(p, UINT64_MAX, 0);
        pump_recv(p, UINT64_MAX);
        continue;
      }
      uint64_t limit = dead ? p->after_from + AFTER : UINT64_MAX;
      pump_send(p, limit, dead);
      pump_recv(p, UINT64_MAX);
      finished &= p->end_posted && p->s_done == p->s_posted && p->got_end;
    }
    if (finished) break;
    if (now_ns() - t0 > (uint64_t)STREAM_MS * 1000000ull)
      fail("after %d ms: victim tx %s, rx %s; requests to it in flight %llu/%llu", STREAM_MS,
           v->tx_failed ? "failed" : "not failed", v->rx_failed ? "failed" : "not failed",
           (unsigned long long)(v->s_posted - v->s_done), (unsigned long long)(v->r_posted - v->r_done));
  }
  printf(
      "rank %d: victim tx failed at %llu, rx failed at %llu; %llu of its requests completed and %llu failed "
      "after that\n",
      me, (unsigned long long)v->tx_fail_ns, (unsigned long long)v->rx_fail_ns,
      (unsigned long long)v->victim_done, (unsigned long long)v->victim_failed);

  /* What the launcher said, each bounded. */
  char want[32];
  snprintf(want, sizeof want, "rank %d ", victim);
  int state = -1, inc = -1;
  const char *te = NULL, *re = NULL, *pte = NULL, *pre = NULL;
  uint64_t tw = now_ns();
  for (;;) {
    if (asr_job_rank_state(victim, &state, &inc) != ASR_SUCCESS) fail("asr_job_rank_state(%d)", victim);
    te = asr_comm_error(v->tx);
    re = asr_comm_error(v->rx);
    pte = asr_comm_error(pending_tx);
    pre = asr_comm_error(pending_rx);
    if (state == ASR_RANK_FAILED && te && strstr(te, want) && re && strstr(re, want) && pte &&
        strstr(pte, want) && pre && strstr(pre, want))
      break;
    if (now_ns() - tw > (uint64_t)BOUND_MS * 1000000ull)
      fail("after %d ms: rank %d's state %d, tx error '%s', rx error '%s', connecting tx '%s', rx '%s'",
           BOUND_MS, victim, state, te ? te : "(none)", re ? re : "(none)", pte ? pte : "(none)",
           pre ? pre : "(none)");
    usleep(1000);
  }
  if (asr_comm_wait_connected(pending_tx, 0) != ASR_CONN_ERROR ||
      asr_comm_wait_connected(pending_rx, 0) != ASR_CONN_ERROR)
    fail("the pending comms did not fail");
  printf("rank %d: connecting comms failed: %s\n", me, pte);
  printf("rank %d: rank %d FAILED (incarnation %d) seen in %llu ms\n", me, victim, inc,
         (unsigned long long)((now_ns() - tw) / 1000000));
  printf("rank %d: tx error: %s\n", me, te);
  printf("rank %d: rx error: %s\n", me, re);
  fflush(stdout);
  uint64_t tb = now_ns();
  rc = asr_job_barrier();
  printf("rank %d: barrier %s in %llu ms\n", me, rc == ASR_PEER_FAILED ? "ASR_PEER_FAILED" : asr_strerror(rc),
         (unsigned long long)((now_ns() - tb) / 1000000));
  fflush(stdout);
  if (rc != ASR_PEER_FAILED) fail("asr_job_barrier returned %d, expected ASR_PEER_FAILED", rc);
  asr_comm_t *c;
  if (asr_job_connect(victim, &c) != ASR_PEER_FAILED) fail("asr_job_connect to the failed rank did not fail");
  uint64_t tc = now_ns(), verified = 0;
  asr_comm_close(pending_tx);
  asr_comm_close(pending_rx);
  for (int i = 0; i < np; i++) {
    asr_comm_close(peers[i].tx);
    asr_comm_close(peers[i].rx);
    verified += peers[i].verified;
  }
  uint64_t close_ms = (now_ns() - tc) / 1000000;
  if (close_ms > BOUND_MS) fail("closing the comms took %llu ms", (unsigned long long)close_ms);
  if ((rc = asr_job_finalize())) fail("asr_job_finalize: %s", asr_strerror(rc));
  printf("rank %d: DONE, %llu messages verified, comms closed in %llu ms\n", me, (unsigned long long)verified,
         (unsigned long long)close_ms);
  return 0;
}
