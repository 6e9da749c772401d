/*
 * asrd_ranks.c -- the local ranks (asrd.h): starting each (pipes, binding,
 * asrd_spawn.c), watching its exit (a pid source, reaped by the loop),
 * reporting EXIT to asrrun, signals.
 *
 * A rank's EXIT goes up once its process is gone and its output is drained
 * (both pipes at EOF), so that its last lines reach asrrun first. A rank
 * that failed, or that joined and left without finalizing, is reported at
 * once even if a descendant still holds its output open: otherwise nobody
 * learns of the failure, the job is never aborted, and that descendant is
 * never killed (this daemon's DONE still waits for every pipe's EOF).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "asr_trace.h"
#include "asrd.h"
#include "asrd_shm.h"
#include "job_config.h"

/* The shm regions the ranks that exited this iteration may have left are
 * swept once, at the next iteration (one scan of /dev/shm for them all). */
static pid_t gone[64];
static int ngone;
static asr_loop_timer_t sweep_timer;

static void on_sweep(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop, (void)t;
  asrd_shm_sweep(gone, ngone);
  ngone = 0;
}

static void sweep_later(asrd_t *d, pid_t pid) {
  if (ngone == (int)(sizeof gone / sizeof gone[0])) on_sweep(d->loop, &sweep_timer);
  gone[ngone++] = pid;
  if (!asr_loop_timer_active(&sweep_timer)) asr_loop_timer_start(d->loop, &sweep_timer, 0, on_sweep, NULL);
}

/* r failed (anything but exit 0). */
static int exit_failed(const asrd_rank_t *r) {
  return !(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0);
}

/* r joined and exited 0 without finalizing: asrrun ends the job for it as
 * for a failure (asrrun_daemons.c: early_exit_check). */
static int exit_left(const asrd_rank_t *r) { return !exit_failed(r) && r->joined == ASR_CTL_JOINED_INIT; }

static void send_exit(asrd_rank_t *r) {
  asr_ctl_msg_t m = {.type = ASR_CTL_EXIT,
                     .u.exit = {.rank = (uint32_t)r->rank,
                                .status = (uint32_t)r->status,
                                .flags = r->not_run ? ASR_CTL_EXIT_NOT_RUN : 0}};
  asrd_up_send(r->d, &m);
  r->exit_sent = 1;
}

/* Whether r's EXIT is due. A failure, and a rank that joined and left
 * without finalizing (the failures it causes, the fence it left failing
 * for the others, must not overtake it), go at once, even if a descendant
 * still holds their output open, after every rank seen ending before them
 * (asrd_ends.c); any other exit once its output is drained. */
static int exit_due(const asrd_rank_t *r) {
  if (!r->exited || r->exit_sent) return 0;
  return exit_failed(r) || exit_left(r) ? asrd_ends_may_report(r) : asrd_stdio_closed(r);
}

/* Every EXIT that is due now, in the order the ranks were seen ending (an
 * EXIT that went may let later ones go), then asrrun's answer if it waits. */
static void report_due(asrd_t *d) {
  for (;;) {
    asrd_rank_t *next = NULL;
    for (int i = 0; i < d->nlocal; i++) {
      asrd_rank_t *q = &d->ranks[i];
      if (exit_due(q) && (!next || q->end_seq < next->end_seq)) next = q;
    }
    if (!next) break;
    send_exit(next);
  }
  asrd_ends_progress(d);
}

/* A sign of r's end: one of its output pipes met EOF. */
static void on_output_eof(asrd_rank_t *r) { asrd_ends_sight(r, "an output pipe closed"); }

static void on_output_closed(asrd_rank_t *r) {
  report_due(r->d);
  if (r->d->cb.on_rank_done) r->d->cb.on_rank_done(r->d);
}

static void on_exit_cb(asr_loop_t *loop, asr_loop_pid_t *p, int have_status, int status) {
  (void)loop;
  asrd_rank_t *r = p->arg;
  asrd_t *d = r->d;
  r->exited = 1;
  /* not reaped here only if someone else reaped it: no status to tell */
  r->status = have_status ? status : (int)(W_EXITCODE(1, 0));
  d->nalive--;
  /* under restart every end waits for asrrun's verdict: it may run again */
  r->verdict_owed = d->job.on_failure == ASR_CTL_ON_FAILURE_RESTART;
  sweep_later(d, r->pid);
  asrd_pmix_take_events(d); /* its JOINED goes before its EXIT */
  asrd_pmi_drain(r);        /* so do its last PMI commands */
  asrd_report_rank_exited(r);
  /* Its output may still sit in the pipes: take what is there now. A
   * descendant that keeps a pipe open delays the EXIT until it is gone. */
  asrd_stdio_drain(r);
  asrd_ends_sight(r, "its exit");
  report_due(d);
  if (d->cb.on_rank_done) d->cb.on_rank_done(d);
}

static int pipe_nb(int p[2]) {
  if (pipe2(p, O_CLOEXEC) != 0) return asr_err_from_errno(errno);
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  return 0;
}

/* Starts one rank. Its stdout/stderr go to pipes we read; the stdin of the
 * ranks that read the job's (--stdin: rank 0 by default) is a pipe fed from
 * asrrun, everyone else's is /dev/null. */
static int start_rank(asrd_t *d, asrd_rank_t *r, char *errbuf, size_t errlen) {
  int op[2], ep[2], ip[2] = {-1, -1};
  int rc = pipe_nb(op);
  if (rc == 0 && (rc = pipe_nb(ep)) != 0) close(op[0]), close(op[1]);
  /* a restarted incarnation reads no stdin: what its first read is gone */
  int reads = r->incarnation == 0 &&
              (d->job.stdin_rank == ASR_CTL_STDIN_ALL || d->job.stdin_rank == (uint32_t)r->rank);
  if (rc == 0 && reads && pipe2(ip, O_CLOEXEC) != 0) {
    rc = asr_err_from_errno(errno);
    close(op[0]), close(op[1]), close(ep[0]), close(ep[1]);
  }
  if (rc) {
    snprintf(errbuf, errlen, "pipe: %s", asr_strerror(rc));
    return rc;
  }
  cpu_set_t cpus;
  asr_binding_t b;
  char berr[256], line[700];
  asr_bind_policy_t p = {.bind_to = (asr_bind_to_t)d->job.bind_to,
                         .map_by = (asr_map_by_t)d->job.map_by,
                         .ppr = (int)d->job.ppr,
                         .cpus_per_rank = (int)d->job.cpus_per_rank};
  const char *cores = d->job.cores ? d->job.cores[r->rank] : NULL;
  int brc = asrd_topo_binding(&p, r->local, d->nlocal, cores, &cpus, &b, berr, sizeof berr);
  int bind = brc == 0;
  if (brc < 0) { /* a rankfile core this host lacks: run it unbound, and say why */
    int n = snprintf(line, sizeof line, "asrrun: warning: cannot bind rank %d on host %s: %s", r->rank,
                     d->hostname, berr);
    asrd_up_output(d, r->rank, 2, line, (size_t)n);
  }
  if (d->job.report_bindings) {
    /* the dry run's line for the rank (bind.h), after asrrun's prefix */
    int n = snprintf(line, sizeof line, "asrrun: ");
    n += asr_bind_format(&b, r->rank, d->hostname, r->lnc, line + n, sizeof line - (size_t)n);
    asrd_up_output(d, r->rank, 2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  }
  /* its PMI_FD: without one it would still run (MPICH as a singleton), but
   * not as the rank of a job the user asked for */
  int pmi_fd = asrd_pmi_open(d, r);
  if (pmi_fd < 0) {
    snprintf(errbuf, errlen, "cannot make rank %d's PMI connection: %s", r->rank, asr_strerror(pmi_fd));
    close(op[0]), close(op[1]), close(ep[0]), close(ep[1]);
    if (ip[0] >= 0) close(ip[0]), close(ip[1]);
    return pmi_fd;
  }
  /* its state-report channel (asrd_report.c): without one it still runs,
   * and a report says it gave none */
  int rep_fd = asrd_report_open(d, r);
  if (rep_fd < 0) asr_warn("asrd", "rank %d gets no state-report channel: %s", r->rank, asr_strerror(rep_fd));
  /* its end watch (asrd_ends.c): without one its end is seen by the other
   * signs, maybe after what it caused */
  int ew[2] = {-1, -1};
  if (pipe_nb(ew) != 0 || asrd_ends_watch(r, ew[0]) != 0) {
    asr_warn("asrd", "rank %d gets no end watch", r->rank);
    if (ew[1] >= 0) close(ew[1]);
    ew[1] = -1;
  }
  /* ep[1] is the spawn's now (it closes it once the child is past execve) */
  uint64_t t0 = ASR_TRACE_ON() ? asr_time_ns() : 0;
  pid_t pid = asrd_spawn_rank(d, r, ip[0], op[1], ep[1], pmi_fd, rep_fd, ew[1], &cpus, bind, errbuf, errlen);
  if (ASR_TRACE_ON() && pid > 0)
    asr_trace_put(1, ASR_TR_SPAWN, -1, 0, 0, t0, asr_time_ns(), (uint64_t)r->rank, (uint64_t)pid, 0, 0, NULL);
  /* the child has its own copies of these (or has exec'd already) */
  close(op[1]);
  close(pmi_fd);
  if (rep_fd >= 0) close(rep_fd);
  if (ew[1] >= 0) close(ew[1]);
  if (ip[0] >= 0) close(ip[0]);
  if (pid < 0) {
    close(op[0]);
    close(ep[0]);
    if (ip[1] >= 0) close(ip[1]);
    return (int)pid;
  }
  r->pid = pid;
  asrd_shm_watch(pid); /* before the loop can reap it */
  if (ip[1] >= 0) fcntl(ip[1], F_SETFL, O_NONBLOCK);
  asrd_stdio_start(d, r, op[0], ep[0], ip[1]);
  d->nalive++;
  rc = asr_loop_pid_start(d->loop, &r->exit_watch, pid, 1, on_exit_cb, r);
  if (rc) {
    /* Without a watch its exit would never be seen: kill it now, and say so. */
    snprintf(errbuf, errlen, "cannot watch rank %d (pid %d): %s", r->rank, (int)pid, asr_strerror(rc));
    kill(pid, SIGKILL);
    return rc;
  }
  return 0;
}

int asrd_ranks_start(asrd_t *d, char *errbuf, size_t errlen) {
  if (d->nlocal == 0) return 0;
  d->cb.on_output_closed = on_output_closed;
  d->cb.on_output_eof = on_output_eof;
  int rc = asrd_pmi_prepare(d, errbuf, errlen);
  if (rc == 0) rc = asrd_spawn_prepare(d, errbuf, errlen);
  for (int i = 0; i < d->nlocal && rc == 0; i++) rc = start_rank(d, &d->ranks[i], errbuf, errlen);
  asrd_spawn_done();
  return rc;
}

int asrd_ranks_verdict_owed(const asrd_t *d) {
  for (int i = 0; i < d->nlocal; i++)
    if (d->ranks[i].verdict_owed) return 1;
  return 0;
}

/* Starts r again in place, as incarnation: what its last incarnation held
 * (output pipes, end watch, report channel) is let go of first; its rank,
 * LNC and binding are the same. */
static int restart_rank(asrd_t *d, asrd_rank_t *r, int incarnation, char *errbuf, size_t errlen) {
  asr_loop_pid_stop(d->loop, &r->exit_watch);
  asrd_ends_unwatch(r);
  asrd_stdio_stop(r);
  asrd_pmi_close_rank(r);
  asrd_report_rank_close(r);
  memset(&r->out, 0, sizeof r->out);
  memset(&r->err, 0, sizeof r->err);
  r->in_fd = -1;
  r->in_reads = 0;
  r->exited = r->status = r->exit_sent = r->not_run = r->joined = r->via = 0;
  r->end_seq = 0;
  r->end_fd = -1;
  r->incarnation = incarnation;
  int rc = asrd_spawn_prepare(d, errbuf, errlen);
  if (rc == 0) rc = start_rank(d, r, errbuf, errlen);
  asrd_spawn_done();
  if (rc) {
    /* it stays ended: its EXIT went, and its output is closed */
    r->exited = r->exit_sent = 1;
    r->out.ended = r->err.ended = 1;
    r->out.fd = r->err.fd = -1;
  }
  return rc;
}

int asrd_ranks_verdict(asrd_t *d, asrd_rank_t *r, uint32_t state, uint32_t incarnation, char *err,
                       size_t errlen) {
  if (!r->exited || !r->exit_sent) return 0; /* not ended here yet, or a restart it already had */
  r->verdict_owed = 0;
  if (state != ASR_CTL_RANK_RESTARTING) return 0;
  int rc = restart_rank(d, r, (int)incarnation + 1, err, errlen); /* RESTARTING is of the one that died */
  if (rc == 0) asr_info("asrd", "rank %d started again as incarnation %d", r->rank, r->incarnation);
  return rc;
}

void asrd_ranks_signal(asrd_t *d, int sig) {
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    if (r->pid <= 0) continue;
    /* The group outlives its leader while anything the rank started is alive
     * (and its id cannot be reused until then): signal it even after the
     * rank itself exited, or such descendants are never killed. */
    kill(-r->pid, sig);
    if (!r->exited) kill(r->pid, sig);
  }
}

void asrd_ranks_forward(asrd_t *d, int sig) {
  if (sig == SIGSTOP || sig == SIGCONT) {
    asrd_ranks_signal(d, sig);
    return;
  }
  for (int i = 0; i < d->nlocal; i++)
    if (d->ranks[i].pid > 0 && !d->ranks[i].exited) kill(d->ranks[i].pid, sig);
}

int asrd_ranks_all_done(const asrd_t *d) {
  for (int i = 0; i < d->nlocal; i++)
    if (!d->ranks[i].exit_sent || !asrd_stdio_closed(&d->ranks[i])) return 0;
  return 1;
}

void asrd_ranks_stop(asrd_t *d) {
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    asr_loop_pid_stop(d->loop, &r->exit_watch);
    asrd_ends_unwatch(r);
    asrd_stdio_stop(r);
  }
  /* what is held goes now, before the ranks are let go of */
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    if (r->exited && !r->exit_sent && (exit_failed(r) || exit_left(r))) send_exit(r);
  }
  d->ends.seen = 0;
  if (asr_loop_timer_active(&sweep_timer)) {
    asr_loop_timer_stop(d->loop, &sweep_timer);
    on_sweep(d->loop, &sweep_timer);
  }
}
