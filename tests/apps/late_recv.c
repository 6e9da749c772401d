/*
 * late_recv.c -- a sender that leaves before its receiver has taken what it
 * sent (tests/integration/test_late_recv.c). Two ranks under asrrun:
 *
 *   late_recv MODE HEAD HEAD_SIZES TAIL TAIL_SIZES MARK
 *
 * Rank 0 sends HEAD + TAIL messages to rank 1: message i of the first HEAD
 * of HEAD_SIZES[i % count] bytes (a comma-separated list), message HEAD + k
 * of TAIL_SIZES[k % count], with contents that depend on i and on each
 * byte's place, at most 32 in flight, and waits for every send to complete.
 * Then it writes its pid to the file MARK ("every send completed") and
 * leaves: MODE "finalize" calls asr_job_finalize; "close" calls asr_close on
 * its LNC first, then asr_job_finalize. It prints how long leaving took.
 *
 * Rank 1 accepts and takes the first HEAD messages as they come. Then it
 * waits (up to LATE_RECV_WAIT_MS, default 5000 ms) for MARK to appear, and
 * up to 300 ms more for the sender to exit, so that the receives of the last
 * TAIL messages are posted only after the sender left or is leaving (a tail
 * that must be received before its sends complete -- shm's messages over
 * 4 KiB, more than a receive queue holds -- means the sender never writes
 * MARK: the receiver goes on when the wait ends). It checks every byte of
 * every message, then waits for its comm to report CONNECTION_ERROR once
 * the sender has gone. MODE "never": rank 1 posts nothing and waits for the
 * sender to exit (the sender's bounded wait).
 *
 * Exit status 0 when everything arrived as sent; 1 with a line on stderr
 * saying what was wrong; 2 for bad arguments.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "asr.h"

#define WINDOW 32
#define MAX_SIZES 16

static int rank = -1;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void die(const char *fmt, const char *what, int rc) {
  fprintf(stderr, "late_recv: rank %d: ", rank);
  fprintf(stderr, fmt, what);
  if (rc >= 0) fprintf(stderr, ": %s", asr_strerror(rc));
  fprintf(stderr, "\n");
  exit(1);
}

/* Byte j of message i: depends on both, so a message delivered into the
 * wrong receive, shifted or cut short is seen. */
static void fill(uint8_t *p, size_t len, uint32_t i) {
  uint32_t x = i * 2654435761u + 12345u;
  for (size_t j = 0; j < len; j++) {
    x = x * 1103515245u + 12345u;
    p[j] = (uint8_t)(x >> 16);
  }
}

/* Polls req until it completes; returns the bytes moved. */
static size_t wait_req(asr_request_t *req, const char *what) {
  uint64_t until = now_ms() + 60000;
  for (;;) {
    int done = 0;
    size_t size = 0;
    int rc = asr_test(req, &done, &size);
    if (rc != ASR_SUCCESS) die("%s failed", what, rc);
    if (done) return size;
    if (now_ms() > until) die("%s did not complete within 60 s", what, -1);
  }
}

static int parse_sizes(const char *s, size_t *sizes) {
  int n = 0;
  char *copy = strdup(s), *p = copy, *tok;
  while (n < MAX_SIZES && (tok = strsep(&p, ","))) {
    char *end;
    unsigned long v = strtoul(tok, &end, 10);
    if (*end || !*tok || v == 0) {
      free(copy);
      return -1;
    }
    sizes[n++] = v;
  }
  free(copy);
  return n;
}

/* The messages: HEAD of head sizes, then TAIL of tail sizes. */
typedef struct {
  int head, n;
  size_t hs[MAX_SIZES], ts[MAX_SIZES];
  int nhs, nts;
  size_t max;
} plan_t;

static size_t size_of(const plan_t *p, int i) {
  return i < p->head ? p->hs[i % p->nhs] : p->ts[(i - p->head) % p->nts];
}

static void sender(const asr_job_info_t *info, const char *mode, const plan_t *p, const char *mark) {
  asr_comm_t *c;
  int rc = asr_job_connect(1, &c);
  if (rc) die("%s", "asr_job_connect", rc);
  if ((rc = asr_comm_wait_connected(c, 30000))) die("%s", "asr_comm_wait_connected", rc);
  asr_tensor_t *t;
  if ((rc = asr_tensor_alloc(WINDOW * p->max, &t))) die("%s", "asr_tensor_alloc", rc);
  uint8_t *va = asr_tensor_va(t);
  asr_request_t *req[WINDOW] = {0};
  for (int i = 0; i < p->n; i++) {
    int slot = i % WINDOW;
    if (req[slot]) wait_req(req[slot], "a send");
    size_t len = size_of(p, i);
    fill(va + (size_t)slot * p->max, len, (uint32_t)i);
    if ((rc = asr_isend(c, t, (size_t)slot * p->max, len, &req[slot]))) die("%s", "asr_isend", rc);
  }
  for (int s = 0; s < WINDOW; s++)
    if (req[s]) wait_req(req[s], "a send");
  printf("rank 0: %d sends completed\n", p->n);
  fflush(stdout);
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", mark);
  FILE *f = fopen(tmp, "w");
  if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 || rename(tmp, mark) != 0)
    die("cannot write %s", mark, -1);
  uint64_t t0 = now_ms();
  if (!strcmp(mode, "close") && (rc = asr_close(info->lnc))) die("%s", "asr_close", rc);
  if ((rc = asr_job_finalize())) die("%s", "asr_job_finalize", rc);
  printf("rank 0: left in %llu ms\n", (unsigned long long)(now_ms() - t0));
  asr_tensor_free(t);
}

/* The sender's pid from its mark, once the mark is there (up to wait_ms). */
static pid_t wait_mark(const char *mark, int wait_ms) {
  uint64_t until = now_ms() + (uint64_t)wait_ms;
  do {
    FILE *f = fopen(mark, "r");
    int pid = 0;
    if (f) {
      int ok = fscanf(f, "%d", &pid) == 1;
      fclose(f);
      if (ok && pid > 0) return (pid_t)pid;
    }
    sleep_ms(5);
  } while (now_ms() < until);
  return 0;
}

static int gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

/* Receives messages [from, to), at most WINDOW posted, checking each. */
static void take(asr_comm_t *c, asr_tensor_t *t, const plan_t *p, int from, int to) {
  uint8_t *va = asr_tensor_va(t), *want = malloc(p->max);
  asr_request_t *req[WINDOW] = {0};
  int posted = from, checked = from, rc, st = -1;
  char what[96];
  while (checked < to) {
    /* post ahead up to the window, then take the oldest */
    while (posted < to && posted - checked < WINDOW) {
      int slot = posted % WINDOW;
      rc = asr_irecv(c, t, (size_t)slot * p->max, size_of(p, posted), &req[slot]);
      if (rc) {
        asr_comm_status(c, &st);
        snprintf(what, sizeof what, "asr_irecv of message %d (comm %s)", posted, asr_comm_status_name(st));
        die("%s", what, rc);
      }
      posted++;
    }
    int slot = checked % WINDOW;
    size_t len = size_of(p, checked);
    snprintf(what, sizeof what, "the receive of message %d", checked);
    size_t got = wait_req(req[slot], what);
    if (got != len) {
      fprintf(stderr, "late_recv: rank 1: message %d: %zu bytes, expected %zu\n", checked, got, len);
      exit(1);
    }
    fill(want, len, (uint32_t)checked);
    if (memcmp(va + (size_t)slot * p->max, want, len) != 0) {
      fprintf(stderr, "late_recv: rank 1: message %d (%zu bytes) differs from what was sent\n", checked, len);
      exit(1);
    }
    checked++;
  }
  free(want);
}

static void receiver(const char *mode, const plan_t *p, const char *mark) {
  asr_comm_t *c;
  int rc = asr_job_accept(0, &c);
  if (rc) die("%s", "asr_job_accept", rc);
  if ((rc = asr_comm_wait_connected(c, 30000))) die("%s", "asr_comm_wait_connected", rc);
  asr_tensor_t *t;
  if ((rc = asr_tensor_alloc(WINDOW * p->max, &t))) die("%s", "asr_tensor_alloc", rc);
  if (strcmp(mode, "never")) take(c, t, p, 0, p->head);
  const char *w = getenv("LATE_RECV_WAIT_MS");
  pid_t pid = wait_mark(mark, w ? atoi(w) : 5000);
  for (int i = 0; pid && i < 60 && !gone(pid); i++) sleep_ms(5);
  int st = -1;
  asr_comm_status(c, &st);
  printf("rank 1: took %d, receiving the rest after the sender %s (comm %s)\n", p->head,
         !pid        ? "blocked"
         : gone(pid) ? "exited"
                     : "began to leave",
         asr_comm_status_name(st));
  fflush(stdout);
  if (!strcmp(mode, "never")) {
    for (int i = 0; pid && i < 6000 && !gone(pid); i++) sleep_ms(5);
    printf("rank 1: the sender left\n");
  } else {
    take(c, t, p, p->head, p->n);
    printf("rank 1: received %d messages, all verified\n", p->n);
    /* What arrived was taken: now the sender may go, and the comm says so. */
    uint64_t until = now_ms() + 30000;
    while (asr_comm_status(c, &st) == ASR_SUCCESS && st != ASR_COMM_CONNECTION_ERROR && now_ms() < until)
      sleep_ms(5);
    printf("rank 1: comm %s after the sender left\n", asr_comm_status_name(st));
    asr_comm_close(c);
  }
  asr_tensor_free(t);
  if ((rc = asr_job_finalize())) die("%s", "asr_job_finalize", rc);
}

int main(int argc, char **argv) {
  plan_t p = {0};
  int ok =
      argc == 7 && (!strcmp(argv[1], "finalize") || !strcmp(argv[1], "close") || !strcmp(argv[1], "never"));
  if (ok) {
    p.head = atoi(argv[2]);
    p.n = p.head + atoi(argv[4]);
    p.nhs = parse_sizes(argv[3], p.hs);
    p.nts = parse_sizes(argv[5], p.ts);
    ok = p.head >= 0 && p.n > p.head && p.nhs > 0 && p.nts > 0;
  }
  if (!ok) {
    fprintf(stderr, "usage: late_recv finalize|close|never HEAD SIZE[,SIZE...] TAIL SIZE[,SIZE...] MARK\n");
    return 2;
  }
  p.max = 1;
  for (int i = 0; i < p.nhs; i++)
    if (p.hs[i] > p.max) p.max = p.hs[i];
  for (int i = 0; i < p.nts; i++)
    if (p.ts[i] > p.max) p.max = p.ts[i];
  asr_job_info_t info;
  int rc = asr_job_init(&info);
  if (rc) die("%s", "asr_job_init", rc);
  rank = info.rank;
  if (info.size != 2) {
    fprintf(stderr, "late_recv: needs two ranks\n");
    return 2;
  }
  if (rank == 0)
    sender(&info, argv[1], &p, argv[6]);
  else
    receiver(argv[1], &p, argv[6]);
  return 0;
}
