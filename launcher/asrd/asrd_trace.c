/*
 * asrd_trace.c -- a traced job on this host (issue 52, doc/trace.md).
 *
 * When the JOB says trace, asrd makes a private directory (asrd_dir.h:
 * removed at exit, or by asrrun for a killed asrd), writes its own records
 * to a file there (spawns, fences, output stalls) and names the directory
 * to every rank (ASR_TRACE): each rank's libasr writes its file there.
 * The files are mapped shared by their writers, so a rank killed by
 * SIGKILL leaves its records up to its death.
 *
 * At the job's end here (every local rank gone), before DONE, asrd
 * measures its clock against asrrun's: ASR_TRACE_ROUNDS CLOCK_ASK / CLOCK
 * round trips, one at a time, the one of least round trip kept (its
 * offset is the midpoint's, its error half the round trip); then sends
 * every file of the directory, packed (trace_read.h), as TRACE pieces and
 * TRACE_END with the offset. On the same link as DONE, after which asrrun
 * merges: so the records reach asrrun whatever ended the job (a normal
 * end, --timeout, a signal, an abort), as long as this daemon does.
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "asr_trace.h"
#include "asrd.h"
#include "asrd_dir.h"
#include "trace_read.h"

#define ASR_TRACE_ROUNDS 8
#define CLOCK_WAIT_MS 2000 /* an answer later than this: the offset is not measured */

int asrd_trace_start(asrd_t *d, char *err, size_t errlen) {
  if (!d->job.trace || d->trace.on) return 0;
  if (asrd_dir_make(d->trace.dir, sizeof d->trace.dir) != 0) {
    snprintf(err, errlen, "--trace: cannot make a directory for the trace files on host %s", d->hostname);
    d->trace.dir[0] = '\0';
    return ASR_EIO;
  }
  long ring = 0, keep = 0;
  char why[512];
  if (asr_env_int(ASR_ENV_TRACE_BUF, &ring, why, sizeof why) != 0 ||
      asr_env_int(ASR_ENV_TRACE_KEEP, &keep, why, sizeof why) != 0) {
    snprintf(err, errlen, "--trace on host %s: %s", d->hostname, why);
    return ASR_ECONFIG;
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/asrd.%ld.trc", d->trace.dir, (long)getpid());
  asr_trace_cfg_t cfg = {.kind = ASR_TR_PROC_ASRD,
                         .rank = -1,
                         .host = d->hostname,
                         .job = d->job.nspace,
                         .ring_recs = (unsigned)ring,
                         .keep_recs = (unsigned)keep,
                         .max_threads = 4};
  if (asr_trace_open(path, &cfg, why, sizeof why) != 0) {
    snprintf(err, errlen, "--trace on host %s: %s", d->hostname, why);
    return ASR_EIO;
  }
  d->trace.on = 1;
  return 0;
}

void asrd_trace_cleanup(asrd_t *d) {
  if (d->trace.dir[0]) asrd_dir_remove(d->trace.dir);
  d->trace.dir[0] = '\0';
}

/* How the process of pid ended, as its rank's wait status says. */
static void ended(const asrd_t *d, pid_t pid, char *out, size_t len) {
  out[0] = '\0';
  for (int i = 0; i < d->nlocal; i++) {
    const asrd_rank_t *r = &d->ranks[i];
    if (r->pid != pid || !r->exited) continue;
    if (WIFSIGNALED(r->status))
      snprintf(out, len, "signal %d", WTERMSIG(r->status));
    else if (WIFEXITED(r->status))
      snprintf(out, len, "code %d", WEXITSTATUS(r->status));
  }
}

/* One file: read, packed, sent in pieces. 1 sent, 0 left out (said why). */
static int send_file(asrd_t *d, const char *path, uint32_t file) {
  asr_trr_proc_t p;
  char err[4400];
  if (asr_trr_load_file(path, &p, err, sizeof err) != 0) {
    asr_warn("asrd", "trace: a file left out: %s", err);
    return 0;
  }
  uint8_t *buf;
  size_t len;
  char how[64];
  ended(d, (pid_t)p.hdr.os_pid, how, sizeof how);
  int rc = asr_trr_pack(&p, &buf, &len);
  asr_trr_free(&p);
  if (rc) {
    asr_warn("asrd", "trace: out of memory packing %s; left out", path);
    return 0;
  }
  /* pieces in order, the last one marked (a packed file is never empty:
   * it has its header) */
  for (size_t off = 0; off < len;) {
    size_t n = len - off < ASR_CTL_TRACE_PIECE ? len - off : ASR_CTL_TRACE_PIECE;
    asr_ctl_msg_t m = {.type = ASR_CTL_TRACE,
                       .u.trace = {.file = file,
                                   .flags = off + n == len ? ASR_CTL_TRACE_LAST : 0,
                                   .exited = how,
                                   .data = buf + off,
                                   .len = n}};
    asrd_up_send(d, &m);
    off += n;
  }
  free(buf);
  return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

static int trc_only(const struct dirent *e) {
  size_t n = strlen(e->d_name);
  return n > 4 && strcmp(e->d_name + n - 4, ".trc") == 0;
}

/* Every file of the directory up, then TRACE_END; then what waits. */
static void send_all(asrd_t *d) {
  asr_loop_timer_stop(d->loop, &d->trace.timer);
  d->trace.phase = 2;
  asr_trace_close();
  struct dirent **names = NULL;
  int n = scandir(d->trace.dir, &names, trc_only, by_name);
  uint32_t files = 0;
  for (int i = 0; i < n; i++) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", d->trace.dir, names[i]->d_name);
    if (files < ASR_CTL_TRACE_MAX_FILES && send_file(d, path, files)) files++;
    free(names[i]);
  }
  free(names);
  int measured = d->trace.best_rtt != UINT64_MAX;
  asr_ctl_msg_t m = {.type = ASR_CTL_TRACE_END,
                     .u.trace_end = {.files = files,
                                     .offset = measured ? (uint64_t)d->trace.best_off : 0,
                                     .error = measured ? d->trace.best_rtt / 2 : ASR_CTL_TRACE_NO_CLOCK}};
  asrd_up_send(d, &m);
  void (*then)(asrd_t *) = d->trace.then;
  d->trace.then = NULL;
  if (then) then(d);
}

static void ask(asrd_t *d) {
  d->trace.seq++;
  d->trace.asked_ns = asr_time_ns();
  asr_ctl_msg_t m = {.type = ASR_CTL_CLOCK_ASK, .u.clock = {.seq = d->trace.seq, .t = d->trace.asked_ns}};
  asrd_up_send(d, &m);
}

static void clock_late(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  asrd_t *d = t->arg;
  asr_warn("asrd", "trace: asrrun did not answer the clock's round %d within %d ms; sending what there is",
           d->trace.rounds + 1, CLOCK_WAIT_MS);
  send_all(d);
}

int asrd_trace_finish(asrd_t *d, void (*then)(asrd_t *d)) {
  if (!d->trace.on || d->trace.phase == 2) return 0;
  if (d->trace.phase == 1) return 1;
  d->trace.then = then;
  if (!d->up.open) { /* nobody to send them to */
    d->trace.phase = 2;
    d->trace.then = NULL;
    return 0;
  }
  d->trace.phase = 1;
  d->trace.best_rtt = UINT64_MAX;
  d->trace.rounds = 0;
  ask(d);
  asr_loop_timer_start(d->loop, &d->trace.timer, CLOCK_WAIT_MS, clock_late, d);
  return 1;
}

void asrd_trace_on_clock(asrd_t *d, const asr_ctl_msg_t *m) {
  uint64_t now = asr_time_ns();
  if (d->trace.phase != 1 || m->u.clock.seq != d->trace.seq || m->u.clock.t != d->trace.asked_ns) return;
  uint64_t rtt = now - d->trace.asked_ns;
  if (rtt < d->trace.best_rtt) {
    d->trace.best_rtt = rtt;
    /* asrrun's answer was read between the ask and now: at the midpoint,
     * to within half the round trip */
    d->trace.best_off = (int64_t)(d->trace.asked_ns + rtt / 2) - (int64_t)m->u.clock.answer;
  }
  asr_loop_timer_stop(d->loop, &d->trace.timer);
  if (++d->trace.rounds >= ASR_TRACE_ROUNDS) {
    send_all(d);
    return;
  }
  ask(d);
  asr_loop_timer_start(d->loop, &d->trace.timer, CLOCK_WAIT_MS, clock_late, d);
}

const char *asrd_trace_dir(const asrd_t *d) { return d->trace.on ? d->trace.dir : NULL; }
