/*
 * asrrun_verdict.c -- which end is the job's cause (doc/design.md,
 * "Verdicts by cause"): asrrun's half; asrd_ends.c is the daemons'.
 *
 * Several ranks often end together: one dies, and those whose fence or
 * transfer it failed leave or fail a moment later, maybe on other hosts,
 * and their daemons may tell asrrun of them first. So the first end that
 * would end the job (a failed exit, a rank leaving early, an abort) is not
 * named at once: it opens a round. ENDS_ASK goes to every daemon, and each
 * answers (ENDS) once it has told every end of its ranks that its kernel
 * shows, in the order it saw them end. Whatever made the first end happen
 * had begun its own end before that (a process's death is visible to the
 * kernel before any other process can notice it), so when the last daemon
 * has answered, every cause of it has been told. A daemon that said DONE
 * has told all of its ends; one that is gone owes nothing (its loss is a
 * verdict of its own, asrrun_daemons.c).
 *
 * The cause is then the first end told in the round of the first kind
 * among: a death by a signal from outside (a rank killed reacts to
 * nobody), an orderly exit without finalizing (a rank that chose to leave,
 * failing the fence it left), any other failure (what a rank that saw a
 * fence or a transfer fail does). What comes after the round is closed is
 * the abort's consequence, not its cause.
 *
 * A daemon answers once the processes its kernel shows in their exit are
 * reaped: one stuck in its exit (in the kernel, uninterruptible) would
 * keep it from answering, and the job from ending. ASRRUN_ENDS_MS bounds
 * that wait; what is known then names the cause, and a warning names the
 * daemons that did not answer. It decides nothing in the ordinary case,
 * where every answer comes within the round trip of the tree.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "asr_log.h"
#include "asrrun.h"

static void close_round(asrrun_t *run) {
  run->verdict.open = 0;
  asr_loop_timer_stop(run->loop, &run->verdict.deadline);
  int k = 0;
  while (k < 2 && run->verdict.code[k] < 0) k++;
  asr_debug("asrrun", "verdict: round %u closed", run->verdict.id);
  run->cb.fail(run, run->verdict.code[k], "%s", run->verdict.line[k]);
}

static void on_deadline(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  asrrun_t *run = t->arg;
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    if (d->ends_owed)
      asr_warn("asrrun",
               "asrd on host %s did not say within %d ms which of its ranks ended (a process stuck in its "
               "exit?); naming the cause from what is known",
               run->map.host_names[h], ASRRUN_ENDS_MS);
  }
  close_round(run);
}

void asrrun_verdict_init(asrrun_t *run) {
  memset(&run->verdict, 0, sizeof run->verdict);
  for (int k = 0; k < 3; k++) run->verdict.code[k] = -1;
}

void asrrun_verdict_end(asrrun_t *run, asrrun_end_kind_t kind, int code, const char *fmt, ...) {
  if (run->state >= RUN_ABORTING) return; /* a consequence of the abort, not its cause */
  if (run->verdict.code[kind] < 0) {
    run->verdict.code[kind] = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(run->verdict.line[kind], sizeof run->verdict.line[kind], fmt, ap);
    va_end(ap);
  }
  if (!run->verdict.open) {
    run->verdict.open = 1;
    run->verdict.id++;
    int owed = run->cb.ask_ends ? run->cb.ask_ends(run, run->verdict.id) : 0;
    asr_debug("asrrun", "verdict: round %u asks %d daemons", run->verdict.id, owed);
    asr_loop_timer_start(run->loop, &run->verdict.deadline, ASRRUN_ENDS_MS, on_deadline, run);
  }
  asrrun_verdict_check(run);
}

void asrrun_verdict_answer(asrrun_t *run, daemon_t *d, uint32_t id) {
  if (run->verdict.open && id == run->verdict.id) d->ends_owed = 0;
  asrrun_verdict_check(run);
}

void asrrun_verdict_check(asrrun_t *run) {
  if (!run->verdict.open) return;
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    if (d->ends_owed) return;
  }
  close_round(run);
}

void asrrun_verdict_stop(asrrun_t *run) { asr_loop_timer_stop(run->loop, &run->verdict.deadline); }
