/*
 * asrd_metrics.c -- a scrape of asrrun --metrics-port (issue 52) on this
 * host; its partner is launcher/asrrun/asrrun_metrics.c. asrrun's
 * METRICS_REQ asks every local rank still running on its state-report
 * channel (asrd_report.c reads the channel: a MASK out, a METRICS frame
 * back, report_fmt.h); when each has answered, exited, or the request's
 * timeout passed, one METRICS goes up per local rank with what it said
 * (or why it said nothing, as a REPORT's flags say) and the bytes of its
 * output this daemon holds under back-pressure (asrd_stdio.c).
 *
 * It travels as a state report does and is kept apart from it: a scrape
 * and a report may be open at once, each with its own id, timer and
 * answers, so a Prometheus scraping every few seconds never cuts a
 * --status short. Nothing here waits on a rank: a rank that never answers
 * only costs the scrape its timeout, and is left out of it.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "asr_log.h"
#include "asrd.h"
#include "report_fmt.h"

static int anyone_waits(const asrd_t *d) {
  for (int i = 0; i < d->nlocal; i++)
    if (d->ranks[i].met_waiting) return 1;
  return 0;
}

/* One METRICS a local rank, the last marked, then the request is closed. */
static void finish(asrd_t *d) {
  if (!d->met.active) return;
  d->met.active = 0;
  asr_loop_timer_stop(d->loop, &d->met.timer);
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    if (r->met_waiting) {
      r->met_waiting = 0;
      r->met_flags |= ASR_CTL_REP_TIMEOUT;
    }
    size_t held = asrd_stdio_held(r);
    size_t tl = r->met_text && r->met_len <= ASR_CTL_MAX_REPORT_TEXT ? r->met_len : 0;
    asr_ctl_msg_t m = {.type = ASR_CTL_METRICS,
                       .u.metrics = {.id = d->met.id,
                                     .rank = (uint32_t)r->rank,
                                     .flags = r->met_flags | (i == d->nlocal - 1 ? ASR_CTL_REP_LAST : 0),
                                     .held = held > UINT32_MAX ? UINT32_MAX : (uint32_t)held,
                                     .text = r->met_text,
                                     .text_len = tl}};
    asrd_up_send(d, &m);
    free(r->met_text);
    r->met_text = NULL;
    r->met_len = 0;
  }
  if (d->up.open) asr_ctl_flush(&d->up.conn);
}

static void on_timeout(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  finish(t->arg);
}

static void on_answer(asrd_rank_t *r, uint32_t id, const uint8_t *text, size_t len);
static void on_gone(asrd_rank_t *r);

void asrd_metrics_ask(asrd_t *d, uint32_t id, uint32_t timeout_ms) {
  d->cb.on_metrics = on_answer; /* what the channel's reader (asrd_report.c) calls */
  d->cb.on_chan_gone = on_gone;
  finish(d); /* an earlier scrape still open is answered as it stands */
  if (d->nlocal == 0) return;
  d->met.active = 1;
  d->met.id = id;
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    r->met_waiting = asrd_report_send_ask(r, ASR_REPORT_MASK, id, &r->met_flags);
  }
  if (!anyone_waits(d)) {
    finish(d);
    return;
  }
  asr_loop_timer_start(d->loop, &d->met.timer, timeout_ms, on_timeout, d);
}

/* r's channel brought a METRICS frame (asrd_report.c, d->cb.on_metrics). */
static void on_answer(asrd_rank_t *r, uint32_t id, const uint8_t *text, size_t len) {
  asrd_t *d = r->d;
  if (!r->met_waiting || !d->met.active || id != d->met.id) return; /* a late answer: dropped */
  free(r->met_text);
  r->met_text = malloc(len ? len : 1);
  r->met_len = r->met_text ? len : 0;
  if (r->met_text) memcpy(r->met_text, text, len);
  r->met_waiting = 0;
  r->met_flags |= ASR_CTL_REP_ANSWERED;
  if (!anyone_waits(d)) finish(d);
}

/* r's channel closed, or r exited (d->cb.on_chan_gone): a wait for it ends. */
static void on_gone(asrd_rank_t *r) {
  if (!r->met_waiting) return;
  r->met_waiting = 0;
  r->met_flags |= ASR_CTL_REP_GONE;
  if (r->d->met.active && !anyone_waits(r->d)) finish(r->d);
}

void asrd_metrics_stop(asrd_t *d) {
  asr_loop_timer_stop(d->loop, &d->met.timer);
  d->met.active = 0;
  for (int i = 0; i < d->nlocal; i++) {
    free(d->ranks[i].met_text);
    d->ranks[i].met_text = NULL;
    d->ranks[i].met_waiting = 0;
  }
}
