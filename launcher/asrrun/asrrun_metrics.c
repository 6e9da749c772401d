/*
 * asrrun_metrics.c -- asrrun --metrics-port [ADDR:]PORT (issue 52): a tiny
 * HTTP server on asrrun's loop that answers GET /metrics with the job's
 * counters and histograms in Prometheus' text format, gathered on demand
 * from every daemon through the tree; its partner on each host is
 * launcher/asrd/asrd_metrics.c, and the text is
 * launcher/metrics/metrics_prom.c's.
 *
 * A scrape: the request's head is read (launcher/metrics/metrics_http.c,
 * at most ASR_HTTP_HEAD_MAX bytes), then a METRICS_REQ goes to every
 * daemon that has ranks, as a REPORT_REQ does (asrrun_state.c); each
 * answers with one METRICS a local rank. When every daemon asked has sent
 * its last, or GATHER_MS passed, the answers are rendered and every
 * scraper waiting gets the same text: scrapes that come while one is
 * gathered join it, so many scrapers cost the ranks one round. A rank that
 * did not answer in time is left out and counted (asr_metrics_missing_ranks).
 *
 * Nothing here blocks the loop: every socket is non-blocking, each
 * connection keeps its own cursor, a connection that does not finish its
 * request or take its answer within CONN_MS is closed, and at most
 * MAX_CONNS are open (more are closed at once).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_sock.h"
#include "asrrun.h"
#include "metrics_http.h"
#include "metrics_prom.h"

#define ASK_MS 1000    /* each daemon's bound on its ranks (METRICS_REQ's timeout) */
#define GATHER_MS 2500 /* the scrape's bound: ASK_MS plus the answers' way up the tree */
#define CONN_MS 10000  /* a connection's whole life */
#define MAX_CONNS 64

typedef struct conn {
  struct asrrun_metrics *m;
  int fd;
  asr_loop_io_t io;
  asr_loop_timer_t deadline;
  char in[ASR_HTTP_HEAD_MAX];
  size_t inlen;
  int waiting; /* for the scrape being gathered */
  int head;    /* HEAD: the answer's head alone */
  asr_buf_t out;
  struct conn *next;
} conn_t;

/* What one rank said to the scrape. */
typedef struct {
  int have;
  uint32_t flags, held;
  char *text;
  size_t len;
} answer_t;

struct asrrun_metrics {
  asrrun_t *run;
  int lfd;
  asr_loop_io_t io;
  conn_t *conns;
  int nconns;
  uint64_t scrapes;
  /* the scrape being gathered */
  int active;
  uint32_t id;
  int *expect;      /* [nhosts]: its METRICS are still to come */
  answer_t *answer; /* [nranks] */
  asr_loop_timer_t timer;
};

static uint32_t next_id = 1;

static void conn_close(conn_t *c) {
  struct asrrun_metrics *m = c->m;
  for (conn_t **p = &m->conns; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  m->nconns--;
  asr_loop_io_stop(m->run->loop, &c->io);
  asr_loop_timer_stop(m->run->loop, &c->deadline);
  close(c->fd);
  asr_buf_free(&c->out);
  free(c);
}

/* Writes what c has to say; closes it when all is out or the peer is gone. */
static void conn_write(conn_t *c) {
  while (asr_buf_pending(&c->out)) {
    ssize_t w = send(c->fd, c->out.data + c->out.off, asr_buf_pending(&c->out), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c->out.off += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      (void)asr_loop_io_set(c->m->run->loop, &c->io, ASR_LOOP_WRITE);
      return;
    }
    break; /* the scraper went away */
  }
  conn_close(c);
}

/* Queues an answer on c (body NULL: none) and starts writing it. */
static void conn_answer(conn_t *c, int status, const char *ctype, const void *body, size_t len) {
  char head[256];
  size_t hl = asr_http_head(status, ctype, len, head, sizeof head);
  c->waiting = 0;
  if (!hl || asr_buf_put(&c->out, head, hl) != 0 ||
      (body && !c->head && asr_buf_put(&c->out, body, len) != 0)) {
    conn_close(c);
    return;
  }
  conn_write(c);
}

static void free_answers(struct asrrun_metrics *m) {
  for (int r = 0; m->answer && r < m->run->map.nranks; r++) {
    free(m->answer[r].text);
    m->answer[r] = (answer_t){0};
  }
}

/* The scrape's answers rendered, to every scraper waiting. */
static void complete(struct asrrun_metrics *m) {
  asrrun_t *run = m->run;
  m->active = 0;
  asr_loop_timer_stop(run->loop, &m->timer);
  int n = run->map.nranks;
  asr_prom_rank_t *pr = calloc((size_t)n, sizeof *pr);
  asr_report_t *rep = calloc((size_t)n, sizeof *rep);
  asr_buf_t body = {0};
  int rc = pr && rep ? 0 : ASR_ENOMEM;
  m->scrapes++;
  for (int r = 0; rc == 0 && r < n; r++) {
    answer_t *a = &m->answer[r];
    pr[r].host = run->map.host_names[run->map.ranks[r].host];
    pr[r].held = a->held;
    pr[r].restarts = run->ranks[r].incarnation;
    pr[r].failures = asrrun_policy_failures(run, r);
    char why[160];
    if (a->have && (a->flags & ASR_CTL_REP_ANSWERED) &&
        asr_report_parse(a->text, a->len, &rep[r], why, sizeof why) == 0) {
      pr[r].rep = &rep[r];
      pr[r].answered = 1;
    } else if (a->have && (a->flags & ASR_CTL_REP_ANSWERED)) {
      asr_debug("asrrun", "metrics: rank %d's answer does not parse: %s", r, why);
    }
    /* a rank gone or never started has nothing to say; a running one that
     * said nothing in time is missing */
    pr[r].missing = !pr[r].answered && !(a->flags & (ASR_CTL_REP_EXITED | ASR_CTL_REP_GONE));
  }
  if (rc == 0) {
    asr_prom_job_t job = {.nranks = n, .ranks = pr, .scrapes = m->scrapes};
    rc = asr_prom_render(&job, &body);
  }
  for (int r = 0; rep && r < n; r++) asr_report_free(&rep[r]);
  free(rep);
  free(pr);
  free_answers(m);
  for (conn_t *c = m->conns, *next; c; c = next) {
    next = c->next;
    if (!c->waiting) continue;
    if (rc == 0)
      conn_answer(c, 200, ASR_PROM_CONTENT_TYPE, body.data + body.off, asr_buf_pending(&body));
    else
      conn_close(c);
  }
  asr_buf_free(&body);
}

static void on_gather_timeout(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  complete(t->arg);
}

/* Asks every daemon with ranks (a scrape being gathered: joins it). */
static void gather(struct asrrun_metrics *m) {
  if (m->active) return;
  asrrun_t *run = m->run;
  m->active = 1;
  m->id = next_id++;
  asr_ctl_msg_t msg = {.type = ASR_CTL_METRICS_REQ, .u.metrics_req = {.id = m->id, .timeout_ms = ASK_MS}};
  if (!asrrun_daemons_ask(run, &msg, m->expect)) {
    complete(m);
    return;
  }
  asr_loop_timer_start(run->loop, &m->timer, GATHER_MS, on_gather_timeout, m);
}

void asrrun_metrics_on_msg(asrrun_t *run, daemon_t *d, const asr_ctl_msg_t *msg) {
  struct asrrun_metrics *m = run->metrics;
  uint32_t rank = msg->u.metrics.rank;
  /* a late answer to a scrape already served, or none asked: dropped */
  if (!m || !m->active || msg->u.metrics.id != m->id || !m->expect[d->index]) return;
  if (rank >= (uint32_t)run->map.nranks || run->map.ranks[rank].host != d->index) {
    asr_warn("asrrun", "asrd on host %s sent metrics of rank %u, which is not one of its ranks",
             run->map.host_names[d->index], rank);
    return;
  }
  answer_t *a = &m->answer[rank];
  free(a->text);
  a->text = malloc(msg->u.metrics.text_len + 1);
  a->len = a->text ? msg->u.metrics.text_len : 0;
  if (a->text) memcpy(a->text, msg->u.metrics.text, a->len);
  a->have = 1;
  a->flags = msg->u.metrics.flags;
  a->held = msg->u.metrics.held;
  if (msg->u.metrics.flags & ASR_CTL_REP_LAST) m->expect[d->index] = 0;
  for (int h = 0; h < run->map.nhosts; h++)
    if (m->expect[h]) return;
  complete(m);
}

static void on_conn_deadline(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  conn_close(t->arg);
}

static void on_conn(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)loop;
  conn_t *c = io->arg;
  if (events & ASR_LOOP_WRITE) {
    conn_write(c);
    return;
  }
  if (c->waiting || asr_buf_pending(&c->out)) {
    /* the request is read; anything more (a pipelined request, a body) is
     * not: drop it, and notice a scraper that hung up */
    char sink[512];
    ssize_t r = recv(c->fd, sink, sizeof sink, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) conn_close(c);
    return;
  }
  for (;;) {
    size_t room = sizeof c->in - c->inlen;
    ssize_t r = room ? recv(c->fd, c->in + c->inlen, room, MSG_DONTWAIT) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (r > 0) c->inlen += (size_t)r;
    asr_http_req_t q = asr_http_parse(c->in, c->inlen);
    if (q == ASR_HTTP_MORE && r > 0) continue;
    if (q == ASR_HTTP_MORE) { /* the peer closed (or errored) before a whole head */
      conn_close(c);
      return;
    }
    static const char nf[] = "404 not found: asrrun serves /metrics\n", meth[] = "405: GET or HEAD only\n",
                      bad[] = "400 bad request\n";
    switch (q) {
      case ASR_HTTP_METRICS:
      case ASR_HTTP_HEAD:
        c->head = q == ASR_HTTP_HEAD;
        c->waiting = 1;
        gather(c->m); /* may answer at once (no daemon to ask): c may be gone */
        return;
      case ASR_HTTP_NOT_FOUND: conn_answer(c, 404, NULL, nf, sizeof nf - 1); return;
      case ASR_HTTP_METHOD: conn_answer(c, 405, NULL, meth, sizeof meth - 1); return;
      default: conn_answer(c, 400, NULL, bad, sizeof bad - 1); return;
    }
  }
}

static void on_accept(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)events;
  struct asrrun_metrics *m = io->arg;
  for (;;) {
    int fd = accept4(m->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    conn_t *c = m->nconns < MAX_CONNS ? calloc(1, sizeof *c) : NULL;
    if (!c) { /* too many at once: this one is refused */
      close(fd);
      continue;
    }
    c->m = m;
    c->fd = fd;
    if (asr_loop_io_start(loop, &c->io, fd, ASR_LOOP_READ, on_conn, c) != 0) {
      close(fd);
      free(c);
      continue;
    }
    c->next = m->conns;
    m->conns = c;
    m->nconns++;
    asr_loop_timer_start(loop, &c->deadline, CONN_MS, on_conn_deadline, c);
  }
}

int asrrun_metrics_start(asrrun_t *run) {
  const char *spec = run->cfg.metrics_port;
  if (!spec[0]) return 0;
  char addr[64], err[256];
  int port;
  if (asr_config_parse_listen(spec, addr, sizeof addr, &port) != 0) { /* the config checked it */
    fprintf(stderr, "asrrun: --metrics-port '%s': write PORT or ADDR:PORT\n", spec);
    return ASRRUN_EXIT_USAGE;
  }
  struct asrrun_metrics *m = calloc(1, sizeof *m);
  if (m) {
    m->expect = calloc((size_t)run->map.nhosts, sizeof *m->expect);
    m->answer = calloc((size_t)run->map.nranks, sizeof *m->answer);
  }
  if (!m || !m->expect || !m->answer) {
    if (m) free(m->expect), free(m->answer), free(m);
    fprintf(stderr, "asrrun: --metrics-port: out of memory\n");
    return ASRRUN_EXIT_LAUNCH;
  }
  m->run = run;
  uint16_t bound = 0;
  m->lfd = asr_sock_listen(addr, (uint16_t)port, 64, &bound, err, sizeof err);
  if (m->lfd < 0 || asr_loop_io_start(run->loop, &m->io, m->lfd, ASR_LOOP_READ, on_accept, m) != 0) {
    fprintf(stderr, "asrrun: --metrics-port %s: cannot listen on %s:%d: %s\n", spec, addr, port,
            m->lfd < 0 ? err : "cannot watch it");
    if (m->lfd >= 0) close(m->lfd);
    free(m->expect), free(m->answer), free(m);
    return ASRRUN_EXIT_LAUNCH;
  }
  run->metrics = m;
  /* the line a script waits for, even with --quiet: it asked for the port */
  if (port == 0) fprintf(stderr, "asrrun: metrics on http://%s:%u/metrics\n", addr, (unsigned)bound);
  return 0;
}

void asrrun_metrics_stop(asrrun_t *run) {
  struct asrrun_metrics *m = run->metrics;
  if (!m) return;
  asr_loop_timer_stop(run->loop, &m->timer);
  while (m->conns) conn_close(m->conns);
  asr_loop_io_stop(run->loop, &m->io);
  close(m->lfd);
  free_answers(m);
  free(m->answer);
  free(m->expect);
  free(m);
  run->metrics = NULL;
}
