/*
 * tsan_racy_recv.c -- an application with a data race on a receive buffer,
 * for test_runtime_mt's tsan_sees_the_providers_write.
 *
 * One process, shm: LNC 0 sends one message to LNC 1. The main thread
 * posts the receive, then reads the buffer while the receive is in flight,
 * without asr_test, until the message's bytes are there; only then does it
 * poll the request. The provider's write into the buffer is made by LNC 1's
 * service thread (its drain), so those reads race with it: a TSan build
 * must say so, also where the suite tells it to ignore what uninstrumented
 * libraries do (asr_tsan.h). Exit 0 once the bytes arrived and the request
 * completed with them; 1 on any error (said on stderr). The caller sets
 * ASR_BOOTSTRAP_PORT and ASR_KV_LOCK_DIR.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "asr.h"

#define LEN 64

static int fail(const char *what, int rc) {
  fprintf(stderr, "tsan_racy_recv: %s: %s\n", what, asr_strerror(rc));
  return 1;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int main(void) {
  setenv("ASR_PROVIDER", "shm", 1);
  int rc;
  if ((rc = asr_init(0)) != ASR_SUCCESS) return fail("asr_init(0)", rc);
  if ((rc = asr_init(1)) != ASR_SUCCESS) return fail("asr_init(1)", rc);
  asr_comm_t *s, *r;
  if ((rc = asr_connect(0, "127.0.0.1", 1, &s)) != ASR_SUCCESS) return fail("asr_connect", rc);
  if ((rc = asr_accept(1, "127.0.0.1", 0, &r)) != ASR_SUCCESS) return fail("asr_accept", rc);
  if ((rc = asr_comm_wait_connected(s, 60000)) != ASR_SUCCESS) return fail("SEND comm", rc);
  if ((rc = asr_comm_wait_connected(r, 60000)) != ASR_SUCCESS) return fail("RECV comm", rc);
  asr_tensor_t *st, *rt;
  if ((rc = asr_tensor_alloc(LEN, &st)) != ASR_SUCCESS) return fail("asr_tensor_alloc", rc);
  if ((rc = asr_tensor_alloc(LEN, &rt)) != ASR_SUCCESS) return fail("asr_tensor_alloc", rc);
  uint8_t *out = asr_tensor_va(st);
  volatile uint8_t *in = asr_tensor_va(rt); /* zeroed */
  for (int i = 0; i < LEN; i++) out[i] = (uint8_t)(0xa5 ^ i);
  asr_request_t *rq, *sq;
  if ((rc = asr_irecv(r, rt, 0, LEN, &rq)) != ASR_SUCCESS) return fail("asr_irecv", rc);
  if ((rc = asr_isend(s, st, 0, LEN, &sq)) != ASR_SUCCESS) return fail("asr_isend", rc);
  /* the race: reading what the service thread's drain writes, before the
   * request says it is done */
  uint64_t until = now_ms() + 30000;
  while (in[LEN - 1] != (uint8_t)(0xa5 ^ (LEN - 1))) {
    if (now_ms() > until) {
      fprintf(stderr, "tsan_racy_recv: the message's bytes did not arrive within 30 s\n");
      return 1;
    }
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  int rdone = 0, sdone = 0;
  size_t sz = 0, ssz = 0;
  until = now_ms() + 30000;
  while (!rdone || !sdone) {
    if (!rdone && (rc = asr_test(rq, &rdone, &sz)) != ASR_SUCCESS) return fail("asr_test (receive)", rc);
    if (!sdone && (rc = asr_test(sq, &sdone, &ssz)) != ASR_SUCCESS) return fail("asr_test (send)", rc);
    if (now_ms() > until) {
      fprintf(stderr, "tsan_racy_recv: the requests did not complete within 30 s\n");
      return 1;
    }
  }
  if (sz != LEN || memcmp((const void *)in, out, LEN) != 0) {
    fprintf(stderr, "tsan_racy_recv: the receive completed with %zu bytes, not the %d sent\n", sz, LEN);
    return 1;
  }
  if ((rc = asr_comm_close(s)) != ASR_SUCCESS) return fail("asr_comm_close (SEND)", rc);
  if ((rc = asr_comm_close(r)) != ASR_SUCCESS) return fail("asr_comm_close (RECV)", rc);
  asr_tensor_free(st);
  asr_tensor_free(rt);
  if ((rc = asr_close(1)) != ASR_SUCCESS) return fail("asr_close(1)", rc);
  if ((rc = asr_close(0)) != ASR_SUCCESS) return fail("asr_close(0)", rc);
  printf("tsan_racy_recv: received %d bytes\n", LEN);
  return 0;
}
