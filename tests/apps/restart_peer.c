/*
 * restart_peer -- a rank restarted in place meets its peers afresh (issue
 * 50, asrrun --on-failure restart; tests/integration/test_policy.c and
 * tests/netns/failure.sh run it):
 *
 *   restart_peer VICTIM DEATHS
 *
 * Every incarnation of rank VICTIM connects a SEND and a RECV comm with
 * every other rank (asr_job_connect / asr_job_accept, as at first), sends
 * each of them MSGS messages and receives MSGS from each, every byte
 * checked (its contents depend on sender, receiver, incarnation and
 * message), and then, while its incarnation is below DEATHS, SIGKILLs
 * itself; the last one finalizes. Every other rank does the same with the
 * victim's incarnation 0, 1, ... DEATHS in turn: after an exchange with
 * incarnation i < DEATHS it keeps a receive posted until its comms to the
 * victim fail, closes them, waits until asr_job_rank_state says the
 * victim is ALIVE as incarnation i + 1, and connects again. Meanwhile the
 * others exchange with each other between rounds, so their comms are seen
 * to go on. No wait has a bound of its own: how soon a death is seen and a
 * rank comes back depends on the machine's load (tests/bench/fail_bench.sh
 * measures it), so a run that never gets there is ended by asrrun's
 * --timeout, and its last "waits for" line says where. Each rank prints
 * "restart_peer rank R: incarnation I: N messages verified" per round and
 * "restart_peer rank R: ok" at the end; exit 1 with a FAIL line otherwise.
 */
#include "config.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "asr.h"
#include "ft_util.h"

#define MSGS 16
#define LEN 4096

static asr_job_info_t me;
static int victim, deaths, my_inc;

static void fail(const char *fmt, const char *what, int rc) {
  printf("restart_peer rank %d: FAIL: ", me.rank);
  printf(fmt, what);
  printf(" (%s)\n", asr_strerror(rc));
  fflush(stdout);
  exit(1);
}

static uint8_t byte_of(int from, int to, int inc, int msg, size_t at) {
  return (uint8_t)(from * 31 + to * 17 + inc * 101 + msg * 7 + (int)at * 3 + 1);
}

static int wait_req(asr_request_t *req) { return ft_wait_req(req, -1); }

typedef struct {
  asr_comm_t *send, *recv;
} link_t;

static void connect_peer(int peer, link_t *l) {
  int rc = asr_job_connect(peer, &l->send);
  if (rc == ASR_SUCCESS) rc = asr_job_accept(peer, &l->recv);
  if (rc == ASR_SUCCESS) rc = asr_comm_wait_connected(l->send, -1);
  if (rc == ASR_SUCCESS) rc = asr_comm_wait_connected(l->recv, -1);
  if (rc != ASR_SUCCESS) {
    char what[32];
    snprintf(what, sizeof what, "%d", peer);
    fail("connecting with rank %s", what, rc);
  }
}

/* MSGS messages each way with peer, the victim's incarnation inc in the
 * contents; every byte checked. */
static void exchange(int peer, link_t *l, int inc, asr_tensor_t *t) {
  uint8_t *b = asr_tensor_va(t);
  asr_request_t *s[MSGS], *r[MSGS];
  for (int m = 0; m < MSGS; m++) {
    int rc = asr_irecv(l->recv, t, (size_t)(MSGS + m) * LEN, LEN, &r[m]);
    if (rc) fail("posting a receive from rank %s", "peer", rc);
  }
  for (int m = 0; m < MSGS; m++) {
    for (size_t i = 0; i < LEN; i++) b[(size_t)m * LEN + i] = byte_of(me.rank, peer, inc, m, i);
    int rc = asr_isend(l->send, t, (size_t)m * LEN, LEN, &s[m]);
    if (rc) fail("posting a send to rank %s", "peer", rc);
  }
  for (int m = 0; m < MSGS; m++) {
    int rc = wait_req(s[m]);
    if (rc == 0) rc = wait_req(r[m]);
    if (rc) fail("a transfer with rank %s", peer == victim ? "VICTIM" : "peer", rc);
    const uint8_t *p = b + (size_t)(MSGS + m) * LEN;
    for (size_t i = 0; i < LEN; i++)
      if (p[i] != byte_of(peer, me.rank, inc, m, i)) fail("a byte from rank %s differs", "peer", ASR_INVALID);
  }
}

/* After an exchange with the victim's incarnation inc, which will die:
 * a receive stays posted until the comms fail; they are closed. */
static void see_death(link_t *l, asr_tensor_t *t) {
  asr_request_t *r;
  int st0 = 0, rc = ASR_UNCONNECTED;
  /* (a comm that failed already takes no post) */
  if (asr_comm_status(l->recv, &st0) == ASR_SUCCESS && st0 != ASR_COMM_CONNECTION_ERROR)
    rc = asr_irecv(l->recv, t, 0, LEN, &r);
  if (rc == ASR_SUCCESS) {
    rc = wait_req(r);
    if (rc == 0) fail("a receive from the dead %s completed", "victim", ASR_INVALID);
  }
  int st;
  const char *why = asr_comm_error(l->recv);
  if (asr_comm_status(l->recv, &st) != ASR_SUCCESS || st != ASR_COMM_CONNECTION_ERROR || !why)
    fail("the RECV comm from the %s did not fail", "victim", ASR_INVALID);
  printf("restart_peer rank %d: comm failed: %s\n", me.rank, why);
  asr_comm_close(l->send);
  asr_comm_close(l->recv);
}

static void wait_alive(int inc) {
  printf("restart_peer rank %d: waits for incarnation %d\n", me.rank, inc);
  for (;;) {
    int st, i;
    if (asr_job_rank_state(victim, &st, &i) == ASR_SUCCESS && st == ASR_RANK_ALIVE && i == inc) return;
    usleep(1000);
  }
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc != 3) {
    fprintf(stderr, "usage: restart_peer VICTIM DEATHS\n");
    return 2;
  }
  victim = atoi(argv[1]);
  deaths = atoi(argv[2]);
  const char *e = getenv("ASR_INCARNATION");
  my_inc = e ? atoi(e) : 0;
  if (asr_job_init(&me) != ASR_SUCCESS) return 1;
  asr_tensor_t *t;
  if (asr_tensor_alloc((size_t)2 * MSGS * LEN, &t) != ASR_SUCCESS) return 1;
  link_t *links = calloc((size_t)me.size, sizeof *links);
  if (me.rank == victim) {
    for (int p = 0; p < me.size; p++)
      if (p != me.rank) connect_peer(p, &links[p]);
    for (int p = 0; p < me.size; p++)
      if (p != me.rank) exchange(p, &links[p], my_inc, t);
    printf("restart_peer rank %d: incarnation %d: %d messages verified\n", me.rank, my_inc,
           MSGS * (me.size - 1));
    if (my_inc < deaths) raise(SIGKILL);
  } else {
    /* the others' comms among themselves, kept through every round */
    for (int p = 0; p < me.size; p++)
      if (p != me.rank && p != victim) connect_peer(p, &links[p]);
    link_t vl;
    for (int inc = 0; inc <= deaths; inc++) {
      if (inc > 0) wait_alive(inc);
      connect_peer(victim, &vl);
      exchange(victim, &vl, inc, t);
      int verified = MSGS;
      for (int p = 0; p < me.size; p++)
        if (p != me.rank && p != victim) {
          exchange(p, &links[p], inc, t);
          verified += MSGS;
        }
      printf("restart_peer rank %d: incarnation %d: %d messages verified\n", me.rank, inc, verified);
      if (inc < deaths) see_death(&vl, t);
    }
    asr_comm_close(vl.send);
    asr_comm_close(vl.recv);
  }
  for (int p = 0; p < me.size; p++)
    if (links[p].send) asr_comm_close(links[p].send), asr_comm_close(links[p].recv);
  asr_tensor_free(t);
  free(links);
  if (asr_job_finalize() != ASR_SUCCESS) fail("finalize %s", "", ASR_INVALID);
  printf("restart_peer rank %d: ok\n", me.rank);
  return 0;
}
