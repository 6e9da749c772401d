/*
 * asrrun_state.c -- gathering a job's state report (issue 24): a
 * REPORT_REQ to every daemon that has the job, one REPORT back per local
 * rank (asrd_report.c), then asrrun_diag.c renders them and each caller
 * that asked (SIGQUIT, --report-state-on-timeout, a --status client) gets
 * the text. It never hangs asrrun: a daemon that does not answer within
 * ASRRUN_REPORT_ASK_MS plus a margin (and the stack traces' bound when
 * asked for) leaves its ranks unknown, and the report says so.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asr_log.h"
#include "asrrun.h"

#define MARGIN_MS 1500 /* a daemon's answer on its way up */
#define STACKS_MS 8000 /* asrd_report.c's STACK_TOTAL_MS */
#define MAX_WAITERS 16

typedef struct {
  asrrun_state_cb cb;
  void *arg;
} waiter_t;

struct asrrun_state {
  uint32_t id;
  char why[64];
  uint64_t at_ms;
  asrrun_rank_state_t *st; /* [nranks] */
  int *expect;             /* [nhosts]: its REPORTs are still to come */
  waiter_t waiters[MAX_WAITERS];
  int nwaiters;
  asr_loop_timer_t timer;
};

static uint32_t next_id = 1;

static void state_free(asrrun_t *run) {
  struct asrrun_state *s = run->rep_state;
  if (!s) return;
  asr_loop_timer_stop(run->loop, &s->timer);
  for (int r = 0; s->st && r < run->map.nranks; r++) {
    free(s->st[r].text);
    free(s->st[r].stack);
  }
  free(s->st);
  free(s->expect);
  free(s);
  run->rep_state = NULL;
}

static void complete(asrrun_t *run) {
  struct asrrun_state *s = run->rep_state;
  asr_buf_t out = {0};
  asrrun_diag_render(run, s->st, s->why, s->at_ms, &out);
  waiter_t w[MAX_WAITERS];
  int n = s->nwaiters;
  memcpy(w, s->waiters, sizeof w);
  state_free(run); /* before the callbacks: one may ask again, or end the job */
  for (int i = 0; i < n; i++) w[i].cb(run, (const char *)out.data + out.off, asr_buf_pending(&out), w[i].arg);
  asr_buf_free(&out);
}

static void on_timer(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  complete(t->arg);
}

void asrrun_state_ask(asrrun_t *run, const char *why, asrrun_state_cb cb, void *arg) {
  struct asrrun_state *s = run->rep_state;
  if (s) { /* one being gathered: join it */
    if (s->nwaiters < MAX_WAITERS) {
      s->waiters[s->nwaiters++] = (waiter_t){cb, arg};
      return;
    }
    const char *busy = "asrrun: too many state reports asked at once; ask again\n";
    cb(run, busy, strlen(busy), arg);
    return;
  }
  s = calloc(1, sizeof *s);
  if (s) {
    s->st = calloc((size_t)run->map.nranks, sizeof *s->st);
    s->expect = calloc((size_t)run->map.nhosts, sizeof *s->expect);
  }
  if (!s || !s->st || !s->expect) {
    if (s) free(s->st), free(s->expect), free(s);
    const char *oom = "asrrun: no state report: out of memory\n";
    cb(run, oom, strlen(oom), arg);
    return;
  }
  run->rep_state = s;
  s->id = next_id++;
  snprintf(s->why, sizeof s->why, "%s", why);
  s->at_ms = asr_loop_now(run->loop) - run->tree.launch_ms;
  s->waiters[s->nwaiters++] = (waiter_t){cb, arg};
  asr_ctl_msg_t m = {.type = ASR_CTL_REPORT_REQ,
                     .u.report_req = {.id = s->id,
                                      .timeout_ms = ASRRUN_REPORT_ASK_MS,
                                      .flags = run->cfg.get_stack_traces ? ASR_CTL_REPORT_STACKS : 0}};
  if (!asrrun_daemons_ask(run, &m, s->expect)) {
    complete(run);
    return;
  }
  uint64_t bound = ASRRUN_REPORT_ASK_MS + MARGIN_MS + (run->cfg.get_stack_traces ? STACKS_MS : 0);
  asr_loop_timer_start(run->loop, &s->timer, bound, on_timer, run);
}

void asrrun_state_on_report(asrrun_t *run, daemon_t *d, const asr_ctl_msg_t *m) {
  struct asrrun_state *s = run->rep_state;
  uint32_t rank = m->u.report.rank;
  /* a late answer to a report already rendered, or a rank not of that host: dropped */
  if (!s || m->u.report.id != s->id || !s->expect[d->index]) return;
  if (rank >= (uint32_t)run->map.nranks || run->map.ranks[rank].host != d->index) {
    asr_warn("asrrun", "asrd on host %s reported rank %u, which is not one of its ranks",
             run->map.host_names[d->index], rank);
    return;
  }
  asrrun_rank_state_t *r = &s->st[rank];
  free(r->text);
  free(r->stack);
  r->have = 1;
  r->flags = m->u.report.flags;
  r->pid = m->u.report.pid;
  snprintf(r->pstate, sizeof r->pstate, "%s", m->u.report.pstate);
  r->text = malloc(m->u.report.text_len + 1);
  r->stack = malloc(m->u.report.stack_len + 1);
  if (r->text) memcpy(r->text, m->u.report.text, m->u.report.text_len);
  if (r->stack) memcpy(r->stack, m->u.report.stack, m->u.report.stack_len);
  r->text_len = r->text ? m->u.report.text_len : 0;
  r->stack_len = r->stack ? m->u.report.stack_len : 0;
  if (m->u.report.flags & ASR_CTL_REP_LAST) s->expect[d->index] = 0;
  for (int h = 0; h < run->map.nhosts; h++)
    if (s->expect[h]) return;
  complete(run);
}

void asrrun_state_write(int fd, const char *text, size_t len) {
  while (len) {
    ssize_t w = write(fd, text, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    text += w;
    len -= (size_t)w;
  }
}

void asrrun_state_stop(asrrun_t *run) { state_free(run); }
