/*
 * asrrun_trace.c -- asrrun --trace FILE (issue 52, doc/trace.md): asrrun's
 * own records (the launch's phases), the daemons' clock rounds answered,
 * their processes' files gathered (TRACE pieces, TRACE_END with each
 * host's offset), and, once the job is over, the one merged file.
 *
 * asrrun's records go to a file of its own in a private directory (the
 * same writer as every process's, common/asr_trace.h), removed once
 * merged. The phases, on asrrun's track, each from the launch's start:
 * "agents started" (every daemon of asrrun's own forked: its agent, srun,
 * or itself), "hello" of each daemon (to its HELLO), "daemons up" (to the
 * last HELLO), "job sent" (to the last JOB to a daemon of asrrun's own);
 * then "ranks spawned" (the first JOB sent to the last STARTED) and "job
 * ran" (the last STARTED to the last DONE).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_fs.h"
#include "asr_log.h"
#include "asr_time.h"
#include "asr_trace.h"
#include "asrrun.h"
#include "trace_merge.h"
#include "tree.h"

typedef struct {
  uint8_t *buf;
  size_t len;
  char exited[65];
  int whole; /* its last piece came */
} tfile_t;

typedef struct {
  tfile_t *files;
  uint32_t nfiles;
  int ended; /* its TRACE_END came */
  int64_t offset, error;
} thost_t;

struct asrrun_trace {
  char dir[4096]; /* asrrun's own file's */
  char own[4200];
  thost_t *hosts;
  int nhosts;
  uint64_t launch_ns, first_job_ns, all_running_ns;
  int joined, running, done; /* daemons past each */
  int children, jobs_sent;   /* asrrun's own daemons (the tree's first level), and the JOBs sent them */
  int written;
};

int asrrun_trace_start(asrrun_t *run, char *err, size_t errlen) {
  if (!run->cfg.trace[0]) return 0;
  /* the file's directory must take it: said now, not after the job */
  char copy[1024];
  snprintf(copy, sizeof copy, "%s", run->cfg.trace);
  const char *dir = dirname(copy);
  if (access(dir, W_OK) != 0) {
    snprintf(err, errlen, "--trace %s: cannot write in %s: %s", run->cfg.trace, dir, strerror(errno));
    return ASR_EINVAL;
  }
  struct asrrun_trace *t = calloc(1, sizeof *t);
  if (!t) return ASR_ENOMEM;
  t->nhosts = run->map.nhosts;
  t->hosts = calloc((size_t)t->nhosts, sizeof *t->hosts);
  const char *tmp = getenv("TMPDIR");
  snprintf(t->dir, sizeof t->dir, "%s/asrrun-trace.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!t->hosts || !mkdtemp(t->dir)) {
    snprintf(err, errlen, "--trace: cannot make asrrun's own trace directory %s: %s", t->dir,
             strerror(errno));
    free(t->hosts);
    free(t);
    return ASR_EIO;
  }
  long ring = 0, keep = 0;
  char why[512], host[128];
  if (asr_env_int(ASR_ENV_TRACE_BUF, &ring, why, sizeof why) != 0 ||
      asr_env_int(ASR_ENV_TRACE_KEEP, &keep, why, sizeof why) != 0) {
    snprintf(err, errlen, "--trace: %s", why);
    asr_rm_tree(t->dir);
    free(t->hosts);
    free(t);
    return ASR_ECONFIG;
  }
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "asrrun");
  host[sizeof host - 1] = '\0';
  snprintf(t->own, sizeof t->own, "%s/asrrun.%ld.trc", t->dir, (long)getpid());
  asr_trace_cfg_t cfg = {.kind = ASR_TR_PROC_ASRRUN,
                         .rank = -1,
                         .host = host,
                         .job = run->job.nspace,
                         .ring_recs = (unsigned)ring,
                         .keep_recs = (unsigned)keep,
                         .max_threads = 4};
  if (asr_trace_open(t->own, &cfg, why, sizeof why) != 0) {
    snprintf(err, errlen, "--trace: %s", why);
    asr_rm_tree(t->dir);
    free(t->hosts);
    free(t);
    return ASR_EIO;
  }
  t->launch_ns = asr_time_ns();
  /* a daemon below another gets its JOB from its parent */
  for (int h = 0; h < t->nhosts; h++) t->children += asr_tree_parent(run->tree.radix, h) < 0;
  run->trace = t;
  return 0;
}

static void phase(const char *name, uint32_t host, uint64_t t0) {
  asr_trace_put(1, ASR_TR_PHASE, -1, 0, host, t0, asr_time_ns(), 0, 0, 0, 0, name);
}

void asrrun_trace_launched(asrrun_t *run) {
  if (run->trace) phase("agents started", 0, run->trace->launch_ns);
}

void asrrun_trace_job_sent(asrrun_t *run, const daemon_t *d) {
  struct asrrun_trace *t = run->trace;
  (void)d;
  if (t && ++t->jobs_sent == t->children) phase("job sent", 0, t->launch_ns);
}

void asrrun_trace_daemon(asrrun_t *run, const daemon_t *d) {
  struct asrrun_trace *t = run->trace;
  if (!t) return;
  int n = run->map.nhosts;
  switch (d->state) {
    case DAEMON_JOINED:
      phase("hello", (uint32_t)d->index + 1, t->launch_ns);
      if (!t->first_job_ns) t->first_job_ns = asr_time_ns();
      if (++t->joined == n) phase("daemons up", 0, t->launch_ns);
      break;
    case DAEMON_RUNNING:
      if (++t->running == n) {
        phase("ranks spawned", 0, t->first_job_ns ? t->first_job_ns : t->launch_ns);
        t->all_running_ns = asr_time_ns();
      }
      break;
    case DAEMON_DONE:
      if (++t->done == n && t->all_running_ns) phase("job ran", 0, t->all_running_ns);
      break;
    default: break;
  }
}

static void on_piece(asrrun_t *run, thost_t *h, const daemon_t *d, const asr_ctl_msg_t *m) {
  uint32_t f = m->u.trace.file;
  if (f >= h->nfiles) {
    uint32_t n = f + 1;
    tfile_t *v = realloc(h->files, n * sizeof *v);
    if (!v) {
      asr_warn("asrrun", "trace: out of memory for host %d's files; some are left out", d->index);
      return;
    }
    memset(v + h->nfiles, 0, (n - h->nfiles) * sizeof *v);
    h->files = v;
    h->nfiles = n;
  }
  tfile_t *tf = &h->files[f];
  if (tf->whole) {
    asr_warn("asrrun", "trace: host %d sent file %u again; ignored", d->index, f);
    return;
  }
  uint8_t *b = realloc(tf->buf, tf->len + m->u.trace.len + 1);
  if (!b) {
    asr_warn("asrrun", "trace: out of memory for host %d's file %u; left out", d->index, f);
    return;
  }
  memcpy(b + tf->len, m->u.trace.data, m->u.trace.len);
  tf->buf = b;
  tf->len += m->u.trace.len;
  snprintf(tf->exited, sizeof tf->exited, "%s", m->u.trace.exited ? m->u.trace.exited : "");
  tf->whole = (m->u.trace.flags & ASR_CTL_TRACE_LAST) != 0;
  (void)run;
}

void asrrun_trace_msg(asrrun_t *run, daemon_t *d, const asr_ctl_msg_t *m) {
  struct asrrun_trace *t = run->trace;
  if (!t || d->index < 0 || d->index >= t->nhosts) return;
  thost_t *h = &t->hosts[d->index];
  if (m->type == ASR_CTL_TRACE) {
    on_piece(run, h, d, m);
  } else if (m->type == ASR_CTL_TRACE_END) {
    h->ended = 1;
    h->offset = (int64_t)m->u.trace_end.offset;
    h->error = m->u.trace_end.error == ASR_CTL_TRACE_NO_CLOCK ? -1 : (int64_t)m->u.trace_end.error;
  }
}

static void free_all(struct asrrun_trace *t) {
  for (int i = 0; i < t->nhosts; i++) {
    for (uint32_t f = 0; f < t->hosts[i].nfiles; f++) free(t->hosts[i].files[f].buf);
    free(t->hosts[i].files);
  }
  free(t->hosts);
  asr_rm_tree(t->dir);
  free(t);
}

/* Merges what came into run->cfg.trace. */
static void write_merged(asrrun_t *run, struct asrrun_trace *t) {
  asr_trace_close();
  size_t cap = 1;
  for (int i = 0; i < t->nhosts; i++) cap += t->hosts[i].nfiles;
  asr_trr_proc_t *procs = calloc(cap, sizeof *procs);
  asr_trm_input_t *in = calloc(cap, sizeof *in);
  asr_trm_host_t *hosts = calloc((size_t)t->nhosts + 1, sizeof *hosts);
  if (!procs || !in || !hosts) {
    fprintf(stderr, "asrrun: --trace: out of memory merging the trace; no file written\n");
    goto out;
  }
  int nin = 0, nhosts = t->nhosts, missing = 0;
  char me[128];
  if (gethostname(me, sizeof me) != 0) me[0] = '\0';
  me[sizeof me - 1] = '\0';
  char err[4400];
  for (int i = 0; i < t->nhosts; i++) {
    thost_t *h = &t->hosts[i];
    hosts[i] = (asr_trm_host_t){run->map.host_names[i], h->ended ? h->offset : 0, h->ended ? h->error : -1};
    /* a daemon on asrrun's own host reads asrrun's clock: no offset at all */
    if (strcmp(run->map.host_names[i], me) == 0) hosts[i].offset_ns = hosts[i].error_ns = 0;
    if (!h->ended) missing++;
    for (uint32_t f = 0; f < h->nfiles; f++) {
      tfile_t *tf = &h->files[f];
      if (!tf->whole) continue;
      if (asr_trr_load(tf->buf, tf->len, &procs[nin], err, sizeof err) != 0) {
        fprintf(stderr, "asrrun: --trace: a file from host %s left out: %s\n", run->map.host_names[i], err);
        continue;
      }
      in[nin] = (asr_trm_input_t){.proc = &procs[nin], .host = i, .exited = tf->exited};
      nin++;
    }
  }
  /* asrrun's own: on the host of the same name, else on a host of its own
   * at offset 0 (its clock is the reference) */
  if (asr_trr_load_file(t->own, &procs[nin], err, sizeof err) == 0) {
    int k = 0;
    while (k < t->nhosts && strcmp(run->map.host_names[k], procs[nin].hdr.host) != 0) k++;
    if (k == t->nhosts) hosts[nhosts++] = (asr_trm_host_t){procs[nin].hdr.host, 0, 0};
    in[nin] = (asr_trm_input_t){.proc = &procs[nin], .host = k, .exited = ""};
    nin++;
  } else {
    fprintf(stderr, "asrrun: --trace: asrrun's own records left out: %s\n", err);
  }
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", run->cfg.trace, (long)getpid());
  FILE *out = fopen(tmp, "w");
  if (!out) {
    fprintf(stderr, "asrrun: --trace: cannot write %s: %s\n", tmp, strerror(errno));
    goto out;
  }
  asr_trm_opts_t opts = {.clock = nhosts > 1 ? "asrrun" : "one host", .job = run->job.nspace};
  int rc = asr_trm_write(out, in, nin, hosts, nhosts, &opts, err, sizeof err);
  if (fclose(out) != 0 && !rc) {
    rc = ASR_EIO;
    snprintf(err, sizeof err, "cannot write %s: %s", tmp, strerror(errno));
  }
  if (!rc && rename(tmp, run->cfg.trace) != 0) {
    rc = ASR_EIO;
    snprintf(err, sizeof err, "cannot rename %s to %s: %s", tmp, run->cfg.trace, strerror(errno));
  }
  if (rc) {
    unlink(tmp);
    fprintf(stderr, "asrrun: --trace: %s\n", err);
    goto out;
  }
  uint64_t dropped = 0;
  for (int i = 0; i < nin; i++) dropped += procs[i].ring_dropped + procs[i].keep_dropped;
  asrrun_notice(run, "trace of %d process%s written to %s%s", nin, nin == 1 ? "" : "es", run->cfg.trace,
                missing ? " (some hosts sent none)" : "");
  if (dropped)
    asrrun_notice(run, "trace: %llu records were dropped (ASR_TRACE_BUF too small): the oldest go first",
                  (unsigned long long)dropped);
out:
  for (size_t i = 0; procs && i < cap; i++) asr_trr_free(&procs[i]);
  free(procs);
  free(in);
  free(hosts);
}

void asrrun_trace_finish(asrrun_t *run) {
  struct asrrun_trace *t = run->trace;
  if (!t || t->written) return;
  t->written = 1;
  write_merged(run, t);
}

void asrrun_trace_stop(asrrun_t *run) {
  struct asrrun_trace *t = run->trace;
  if (!t) return;
  asrrun_trace_finish(run);
  free_all(t);
  run->trace = NULL;
}
