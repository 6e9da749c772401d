/*
 * asrd_ends.c -- the order in which this host's ranks end, as the kernel
 * shows it, and the answer to asrrun's ENDS_ASK. The rule is
 * doc/design.md's "Verdicts by cause"; this file is its daemon half, and
 * asrrun_verdict.c its other half.
 *
 * A rank is seen ending when a sign of its end reaches the loop (its end
 * watch, an output pipe, its PMI connection or its state-report channel
 * closing, its exit) and the kernel confirms that its process is in its
 * exit or gone (proc_exit.h). Each rank seen ending gets the next number
 * (end_seq), and a rank's failure goes up (EXIT) once every rank numbered
 * before it has been reported: those are in their exit, so their reaping
 * is all it waits for, never a timer.
 *
 * The end watch makes that order follow the ranks' deaths: it is a pipe
 * whose write end each rank holds on the highest descriptor it may open
 * (asrd_ends_fd), and a process that exits releases its files last
 * descriptor first (the kernel queues each final release as task work and
 * runs the queue newest first), so the watch reports the end before what
 * the rank held on lower descriptors (its PMIx connection, whose loss
 * fails the others' fence; its sockets to its peers) can make another
 * rank end. (A file another thread of the rank is using at that moment is
 * released by that thread, maybe earlier: the order is then asrrun's
 * rule's to settle.)
 *
 * ENDS_ASK numbers every rank the kernel shows ending at that moment and
 * is answered once all of those have been reported, so that asrrun, when
 * every daemon has answered, knows every end that could have caused the
 * one that made it ask.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asrd.h"
#include "proc_exit.h"

int asrd_ends_fd(void) {
  struct rlimit rl;
  rlim_t top = 1024;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < top) top = rl.rlim_cur;
  return top > 3 ? (int)top - 1 : -1;
}

static void on_end_watch(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)loop, (void)events;
  asrd_rank_t *r = io->arg;
  char buf[256];
  ssize_t n;
  while ((n = read(r->end_fd, buf, sizeof buf)) > 0) {
  } /* (what a rank writes there means nothing) */
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  asrd_ends_unwatch(r);
  asrd_ends_sight(r, "its end watch closed");
}

int asrd_ends_watch(asrd_rank_t *r, int fd) {
  r->end_fd = fd;
  int rc = asr_loop_io_start(r->d->loop, &r->end_io, fd, ASR_LOOP_READ, on_end_watch, r);
  if (rc) {
    close(fd);
    r->end_fd = -1;
  }
  return rc;
}

void asrd_ends_unwatch(asrd_rank_t *r) {
  if (r->end_fd < 0) return;
  asr_loop_io_stop(r->d->loop, &r->end_io);
  close(r->end_fd);
  r->end_fd = -1;
}

/* r's end, as far as known: ASR_PROC_ENDED with *status, _DYING or _LIVE. */
static int end_state(const asrd_rank_t *r, int *status) {
  if (r->exited) {
    *status = r->status;
    return ASR_PROC_ENDED;
  }
  return asr_proc_exit_state(r->pid, status);
}

static void number(asrd_rank_t *r, const char *sign) {
  r->end_seq = ++r->d->ends.seen;
  asr_debug("asrd", "rank %d is seen ending (%u: %s)", r->rank, r->end_seq, sign);
}

void asrd_ends_sight(asrd_rank_t *r, const char *sign) {
  if (r->end_seq || r->pid <= 0) return;
  int st = 0, kind = end_state(r, &st);
  if (kind == ASR_PROC_LIVE) { /* a pipe closed, the process lives on */
    asr_debug("asrd", "rank %d: %s, but it is not in its exit", r->rank, sign);
    return;
  }
  number(r, sign);
}

/* r failed, or joined and left without finalizing: asrrun may take its end
 * for the job's cause (asrrun_verdict.c). */
static int may_be_cause(const asrd_rank_t *r) {
  int ok = WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0;
  return !ok || r->joined == ASR_CTL_JOINED_INIT;
}

/* Whether q still has to be reported before a rank numbered after it. */
static int unreported(const asrd_rank_t *q) { return !q->exited || (may_be_cause(q) && !q->exit_sent); }

int asrd_ends_may_report(const asrd_rank_t *r) {
  if (r->d->state >= ASRD_TERMINATING) return 1; /* the daemon ends them: nothing to order */
  for (int i = 0; i < r->d->nlocal; i++) {
    const asrd_rank_t *q = &r->d->ranks[i];
    if (q != r && q->end_seq && q->end_seq < r->end_seq && unreported(q)) return 0;
  }
  return 1;
}

void asrd_ends_ask(asrd_t *d, uint32_t id) {
  for (int i = 0; i < d->nlocal; i++) asrd_ends_sight(&d->ranks[i], "asked");
  d->ends.asked = 1;
  d->ends.ask_id = id;
  asrd_ends_progress(d);
}

void asrd_ends_progress(asrd_t *d) {
  if (!d->ends.asked) return;
  if (d->state < ASRD_TERMINATING)
    for (int i = 0; i < d->nlocal; i++)
      if (d->ranks[i].end_seq && unreported(&d->ranks[i])) return;
  d->ends.asked = 0;
  asr_ctl_msg_t m = {.type = ASR_CTL_ENDS, .u.ends.id = d->ends.ask_id};
  asrd_up_send(d, &m);
}
