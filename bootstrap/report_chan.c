/* report_chan.c -- see report_chan.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_log.h"
#include "job.h"
#include "report_chan.h"
#include "report_fmt.h"

static pthread_mutex_t start_mutex = PTHREAD_MUTEX_INITIALIZER;
static int started; /* under start_mutex */
static int chan_fd = -1;
static const asr_report_provider_t *_Atomic provider;
static _Atomic int fence_now, finalized;
static pthread_mutex_t job_mutex = PTHREAD_MUTEX_INITIALIZER;
static asr_job_info_t job; /* under job_mutex; size 0 until asr_job_init has it */

void asr__report_set_job(const void *info) {
  pthread_mutex_lock(&job_mutex);
  job = *(const asr_job_info_t *)info;
  pthread_mutex_unlock(&job_mutex);
}

void asr__report_register(const asr_report_provider_t *p) { atomic_store(&provider, p); }
void asr__report_set_fence(int f) { atomic_store_explicit(&fence_now, f, memory_order_relaxed); }
void asr__report_set_finalized(void) { atomic_store_explicit(&finalized, 1, memory_order_relaxed); }

static int write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return ASR_EIO;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_all(int fd, void *p, size_t n) {
  char *c = p;
  while (n) {
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return ASR_EIO;
    c += r;
    n -= (size_t)r;
  }
  return 0;
}

static int send_frame(uint32_t type, uint32_t id, const void *text, size_t len) {
  uint8_t hdr[ASR_REPORT_HDR + 4];
  asr_report_header_put(hdr, type, (uint32_t)(4 + len));
  for (int i = 0; i < 4; i++) hdr[ASR_REPORT_HDR + i] = (uint8_t)(id >> (8 * i));
  int rc = write_all(chan_fd, hdr, sizeof hdr);
  if (rc == 0 && len) rc = write_all(chan_fd, text, len);
  return rc;
}

/* The process's own record (report_fmt.h: proc). */
static void render_proc(asr_buf_t *b) {
  char line[400];
  pthread_mutex_lock(&job_mutex);
  asr_job_info_t mine = job;
  pthread_mutex_unlock(&job_mutex);
  const asr_job_info_t *me = &mine;
  int joined = me->size > 0; /* asr_job_init succeeded once (finalize keeps what it learnt) */
  int n = snprintf(line, sizeof line,
                   "proc\tpid=%d\trank=%d\tsize=%d\tlnc=%d\taddr=%s\tfence=%s\tfinalized=%d\tjoined=%d\n",
                   (int)getpid(), joined ? me->rank : -1, joined ? me->size : 0, joined ? me->lnc : -1,
                   joined ? me->addr : "",
                   asr_report_fence_name(atomic_load_explicit(&fence_now, memory_order_relaxed)),
                   atomic_load_explicit(&finalized, memory_order_relaxed), joined);
  asr_buf_put(b, line, (size_t)n);
}

/* Answers ASK id with ANSWER, or (metrics) MASK id with METRICS. */
static void answer(uint32_t id, int metrics) {
  /* the tests' stand-ins for a rank that exits while asked and one that
   * never answers (tests/integration/test_stall.c) */
  int hook = 0;
  if (asr_env_is_set(ASR_ENV_TEST_REPORT) && asr_env_word(ASR_ENV_TEST_REPORT, &hook, NULL, 0) == 0) {
    if (hook == 1) _exit(3);
    if (hook == 2) return;
  }
  asr_buf_t b = {0};
  const asr_report_provider_t *p = atomic_load(&provider);
  if (p && p->tick) p->tick(p->arg);
  render_proc(&b);
  if (p && p->render) p->render(p->arg, &b);
  if (metrics && p && p->metrics) p->metrics(p->arg, &b);
  size_t len = asr_buf_pending(&b);
  if (len > ASR_REPORT_TEXT_MAX) {
    /* cut at the last whole line that leaves room for the mark */
    size_t cut = ASR_REPORT_TEXT_MAX - 8;
    while (cut > 0 && b.data[b.off + cut - 1] != '\n') cut--;
    memcpy(b.data + b.off + cut, "trunc\n", 6);
    len = cut + 6;
  }
  (void)send_frame(metrics ? ASR_REPORT_METRICS : ASR_REPORT_ANSWER, id, b.data + b.off, len);
  asr_buf_free(&b);
}

static void *report_main(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, NULL); /* no signal of the application's ever lands here */
  uint32_t pid = (uint32_t)getpid();
  if (send_frame(ASR_REPORT_HELLO, pid, NULL, 0) != 0) return NULL;
  for (;;) {
    struct pollfd pf = {.fd = chan_fd, .events = POLLIN};
    int n = poll(&pf, 1, ASR_REPORT_TICK_MS);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    const asr_report_provider_t *p = atomic_load(&provider);
    if (n == 0) {
      if (p && p->tick) p->tick(p->arg);
      continue;
    }
    uint8_t hdr[ASR_REPORT_HDR], body[4];
    uint32_t type, len;
    char why[128];
    if (read_all(chan_fd, hdr, sizeof hdr) != 0) break; /* asrd went away */
    int rc = asr_report_header_parse(hdr, &type, &len, why, sizeof why);
    if (rc != 0 || (type != ASR_REPORT_ASK && type != ASR_REPORT_MASK)) {
      asr_warn("job", "state report channel: %s; closing it", rc == 0 ? "not an ASK" : why);
      break;
    }
    if (read_all(chan_fd, body, sizeof body) != 0) break;
    answer((uint32_t)body[0] | (uint32_t)body[1] << 8 | (uint32_t)body[2] << 16 | (uint32_t)body[3] << 24,
           type == ASR_REPORT_MASK);
  }
  close(chan_fd);
  return NULL;
}

int asr__report_start(void) {
  pthread_mutex_lock(&start_mutex);
  int rc = 0;
  if (started) goto out;
  started = 1;
  if (!asr_env_is_set(ASR_ENV_REPORT_FD)) goto out;
  long fd;
  char err[256];
  if (asr_env_int(ASR_ENV_REPORT_FD, &fd, err, sizeof err) != 0) {
    asr_warn("job", "no state reports: %s", err);
    goto out;
  }
  /* a channel of ours only if it is a socket still open: a program started
   * by a rank inherits the variable but, close-on-exec, not the socket */
  int fl = fcntl((int)fd, F_GETFD);
  if (fl < 0) goto out;
  fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC);
  chan_fd = (int)fd;
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &a, report_main, NULL) != 0) {
    asr_warn("job", "no state reports: cannot start the report thread");
    rc = ASR_ENOMEM;
  } else {
    (void)pthread_setname_np(t, "asr-report");
  }
  pthread_attr_destroy(&a);
out:
  pthread_mutex_unlock(&start_mutex);
  return rc;
}
