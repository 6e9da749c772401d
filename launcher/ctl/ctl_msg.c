/*
 * ctl_msg.c -- each control message's encoder beside its decoder (the table
 * is ctl_msg.h's). A decoder reads every field through an asr_rd_t, which
 * turns bad once anything is short, then checks the values and that nothing
 * is left over.
 */
#include "config.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "asr_err.h"
#include "ctl_msg.h"

static const char *const type_names[ASR_CTL__COUNT] = {
    "INVALID",    "HELLO",     "JOB",          "STARTED",       "OUTPUT", "EXIT",       "FENCE",
    "FENCE_DONE", "ABORT",     "KILL",         "STDIN",         "ERROR",  "DONE",       "SHUTDOWN",
    "HEARTBEAT",  "CREDIT",    "STDIN_CREDIT", "OUTPUT_CLOSED", "JOINED", "REPORT_REQ", "REPORT",
    "ROUTED",     "FENCE_SUB", "LOST",         "ENDS_ASK",      "ENDS",   "RANK_STATE", "CLOCK_ASK",
    "CLOCK",      "TRACE",     "TRACE_END",    "METRICS_REQ",   "METRICS"};

const char *asr_ctl_type_name(int type) {
  return type >= 0 && type < ASR_CTL__COUNT ? type_names[type] : "UNKNOWN";
}

/* Strings an encoder writes must decode: no longer than max, no NUL inside
 * (a C string has none). */
static int str_ok(const char *s, size_t max) { return !s || strlen(s) <= max; }

/* --- HELLO ------------------------------------------------------------------ */

static int enc_hello(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (!str_ok(m->u.hello.host, ASR_CTL_MAX_HOSTNAME) || !m->u.hello.secret_hex ||
      strlen(m->u.hello.secret_hex) != ASR_CTL_SECRET_HEX)
    return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.hello.index) || asr_buf_put_str(b, m->u.hello.host) ||
         asr_buf_put_u32(b, m->u.hello.pid) || asr_buf_put_str(b, m->u.hello.secret_hex);
}

static int dec_hello(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.hello.index = asr_rd_u32(r);
  m->u.hello.host = asr_rd_str(r, ASR_CTL_MAX_HOSTNAME);
  m->u.hello.pid = asr_rd_u32(r);
  m->u.hello.secret_hex = asr_rd_str(r, ASR_CTL_SECRET_HEX);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "HELLO is truncated or a string is too long");
  if (!m->u.hello.host[0]) return asr_errf(why, wl, ASR_EPROTO, "HELLO names no host");
  if (strlen(m->u.hello.secret_hex) != ASR_CTL_SECRET_HEX)
    return asr_errf(why, wl, ASR_EPROTO, "HELLO's secret is %zu characters, not %d",
                    strlen(m->u.hello.secret_hex), ASR_CTL_SECRET_HEX);
  return 0;
}

/* --- JOB -------------------------------------------------------------------- */

static int enc_job(const asr_ctl_msg_t *m, asr_buf_t *b) {
  const asr_ctl_job_t *j = &m->u.job;
  if (j->nranks == 0 || j->nranks > ASR_CTL_MAX_RANKS || j->nhosts == 0 || j->nhosts > ASR_CTL_MAX_HOSTS ||
      j->index >= j->nhosts || j->nargs > ASR_CTL_MAX_ARGS || j->nenv > ASR_CTL_MAX_ARGS || !j->program ||
      !j->program[0] || j->port == 0 || j->port > 65535 || j->heartbeat_s < 1 || j->heartbeat_s > 3600 ||
      j->provider_given > 1 || (j->provider_given && (!j->provider || !j->provider[0])) ||
      j->wdir_given > 1 || (j->wdir_given && (!j->wdir || !j->wdir[0])) ||
      !str_ok(j->wdir, ASR_CTL_MAX_TEXT) ||
      (j->stdin_rank >= j->nranks && j->stdin_rank != ASR_CTL_STDIN_ALL &&
       j->stdin_rank != ASR_CTL_STDIN_NONE) ||
      !str_ok(j->master_addr, ASR_CTL_MAX_HOSTNAME) || j->master_port == 0 || j->master_port > 65535 ||
      j->tree_radix > ASR_CTL_MAX_RADIX || j->tree_launch > 1 || !str_ok(j->tree_agent, ASR_CTL_MAX_TEXT) ||
      !str_ok(j->tree_asrd, ASR_CTL_MAX_TEXT) || !str_ok(j->tree_ip, ASR_CTL_MAX_HOSTNAME) ||
      j->on_failure > ASR_CTL_ON_FAILURE_MAX || j->trace > 1)
    return ASR_EINVAL;
  int rc = asr_buf_put_u32(b, j->nranks) || asr_buf_put_u32(b, j->nhosts) || asr_buf_put_u32(b, j->index);
  for (uint32_t h = 0; h < j->nhosts; h++) {
    if (!j->host_names[h] || !j->host_names[h][0] || !str_ok(j->host_names[h], ASR_CTL_MAX_HOSTNAME))
      return ASR_EINVAL;
    rc = rc || asr_buf_put_str(b, j->host_names[h]);
  }
  for (uint32_t i = 0; i < j->nranks; i++) {
    if (j->host_of[i] >= j->nhosts || j->lnc_of[i] >= ASR_CTL_MAX_LNC) return ASR_EINVAL;
    rc = rc || asr_buf_put_u32(b, j->host_of[i]) || asr_buf_put_u32(b, j->lnc_of[i]);
  }
  rc = rc || asr_buf_put_str(b, j->program) || asr_buf_put_u32(b, j->nargs);
  for (uint32_t i = 0; i < j->nargs; i++) rc = rc || asr_buf_put_str(b, j->args[i]);
  rc = rc || asr_buf_put_u32(b, j->nenv);
  for (uint32_t i = 0; i < j->nenv; i++) {
    if (!j->env_names[i] || !j->env_names[i][0] || strchr(j->env_names[i], '=')) return ASR_EINVAL;
    rc = rc || asr_buf_put_str(b, j->env_names[i]) || asr_buf_put_str(b, j->env_values[i]);
  }
  rc = rc || asr_buf_put_u32(b, j->bind_to) || asr_buf_put_u32(b, j->report_bindings) ||
       asr_buf_put_u32(b, j->port) || asr_buf_put_str(b, j->provider) || asr_buf_put_str(b, j->nspace) ||
       asr_buf_put_str(b, j->if_spec) || asr_buf_put_u32(b, j->heartbeat_s) || asr_buf_put_str(b, j->wdir) ||
       asr_buf_put_u32(b, j->wdir_given) || asr_buf_put_u32(b, j->stdin_rank) ||
       asr_buf_put_u32(b, j->provider_given);
  if (j->bind_to > 4 || j->map_by > 7 || j->ppr > ASR_CTL_MAX_LNC || j->cpus_per_rank < 1 ||
      j->cpus_per_rank > ASR_CTL_MAX_CPUS_PER_RANK)
    return ASR_EINVAL;
  rc = rc || asr_buf_put_u32(b, j->map_by) || asr_buf_put_u32(b, j->ppr) ||
       asr_buf_put_u32(b, j->cpus_per_rank) || asr_buf_put_u32(b, j->cores ? 1 : 0);
  for (uint32_t i = 0; j->cores && i < j->nranks; i++) {
    if (!j->cores[i] || !str_ok(j->cores[i], 255)) return ASR_EINVAL;
    rc = rc || asr_buf_put_str(b, j->cores[i]);
  }
  rc = rc || asr_buf_put_str(b, j->master_addr) || asr_buf_put_u32(b, j->master_port);
  rc = rc || asr_buf_put_u32(b, j->tree_radix) || asr_buf_put_u32(b, j->tree_launch) ||
       asr_buf_put_str(b, j->tree_agent) || asr_buf_put_str(b, j->tree_asrd) ||
       asr_buf_put_str(b, j->tree_ip);
  rc = rc || asr_buf_put_u32(b, j->on_failure) || asr_buf_put_u32(b, j->trace);
  return rc ? ASR_ENOMEM : 0;
}

/* Reads n strings into a malloc'd, NULL-terminated array (the caller frees
 * it through asr_ctl_job_free, also when it fails half way). */
static char **rd_strs(asr_rd_t *r, uint32_t n, size_t max, int nonempty) {
  char **v = calloc((size_t)n + 1, sizeof *v);
  if (!v) {
    r->bad = 1;
    return NULL;
  }
  for (uint32_t i = 0; i < n && !r->bad; i++) {
    v[i] = asr_rd_str(r, max);
    if (v[i] && nonempty && !v[i][0]) r->bad = 1;
  }
  return v;
}

static int dec_job(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  asr_ctl_job_t *j = &m->u.job;
  j->nranks = asr_rd_u32(r);
  j->nhosts = asr_rd_u32(r);
  j->index = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "JOB is truncated");
  if (j->nranks == 0 || j->nranks > ASR_CTL_MAX_RANKS || j->nhosts == 0 || j->nhosts > ASR_CTL_MAX_HOSTS)
    return asr_errf(why, wl, ASR_EPROTO, "JOB has %u ranks on %u hosts (1..%u ranks, 1..%u hosts)", j->nranks,
                    j->nhosts, ASR_CTL_MAX_RANKS, ASR_CTL_MAX_HOSTS);
  if (j->index >= j->nhosts)
    return asr_errf(why, wl, ASR_EPROTO, "JOB is for host %u of %u", j->index, j->nhosts);
  /* every count is checked against the bytes left before anything that
   * size is allocated: a short message cannot make us allocate much */
  size_t left = r->len - r->pos;
  if ((size_t)j->nhosts * 4 > left || (size_t)j->nranks * 8 > left)
    return asr_errf(why, wl, ASR_EPROTO, "JOB is truncated");
  j->host_names = rd_strs(r, j->nhosts, ASR_CTL_MAX_HOSTNAME, 1);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "JOB's host names are truncated, empty or too long");
  j->host_of = calloc(j->nranks, sizeof *j->host_of);
  j->lnc_of = calloc(j->nranks, sizeof *j->lnc_of);
  if (!j->host_of || !j->lnc_of)
    return asr_errf(why, wl, ASR_EPROTO, "out of memory for a JOB of %u ranks", j->nranks);
  for (uint32_t i = 0; i < j->nranks; i++) {
    j->host_of[i] = asr_rd_u32(r);
    j->lnc_of[i] = asr_rd_u32(r);
    if (!r->bad && (j->host_of[i] >= j->nhosts || j->lnc_of[i] >= ASR_CTL_MAX_LNC))
      return asr_errf(why, wl, ASR_EPROTO, "JOB puts rank %u on host %u, LNC %u (%u hosts, LNCs 0..%d)", i,
                      j->host_of[i], j->lnc_of[i], j->nhosts, ASR_CTL_MAX_LNC - 1);
  }
  j->program = asr_rd_str(r, ASR_CTL_MAX_TEXT);
  j->nargs = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "JOB is truncated before its arguments");
  if (!j->program[0]) return asr_errf(why, wl, ASR_EPROTO, "JOB names no program");
  if (j->nargs > ASR_CTL_MAX_ARGS || (size_t)j->nargs * 4 > r->len - r->pos)
    return asr_errf(why, wl, ASR_EPROTO, "JOB has %u arguments", j->nargs);
  j->args = rd_strs(r, j->nargs, ASR_CTL_MAX_TEXT, 0);
  j->nenv = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "JOB's arguments are truncated or too long");
  if (j->nenv > ASR_CTL_MAX_ARGS || (size_t)j->nenv * 8 > r->len - r->pos)
    return asr_errf(why, wl, ASR_EPROTO, "JOB has %u environment variables", j->nenv);
  j->env_names = calloc((size_t)j->nenv + 1, sizeof *j->env_names);
  j->env_values = calloc((size_t)j->nenv + 1, sizeof *j->env_values);
  if (!j->env_names || !j->env_values)
    return asr_errf(why, wl, ASR_EPROTO, "out of memory for the JOB's environment");
  for (uint32_t i = 0; i < j->nenv && !r->bad; i++) {
    j->env_names[i] = asr_rd_str(r, ASR_CTL_MAX_TEXT);
    j->env_values[i] = asr_rd_str(r, ASR_CTL_MAX_TEXT);
    if (!r->bad && (!j->env_names[i][0] || strchr(j->env_names[i], '=')))
      return asr_errf(why, wl, ASR_EPROTO, "JOB's environment variable %u has the name '%s'", i,
                      j->env_names[i]);
  }
  j->bind_to = asr_rd_u32(r);
  j->report_bindings = asr_rd_u32(r);
  j->port = asr_rd_u32(r);
  j->provider = asr_rd_str(r, ASR_CTL_MAX_TEXT);
  j->nspace = asr_rd_str(r, ASR_CTL_MAX_TEXT);
  j->if_spec = asr_rd_str(r, ASR_CTL_MAX_TEXT);
  j->heartbeat_s = asr_rd_u32(r);
  j->wdir = asr_rd_str(r, ASR_CTL_MAX_TEXT);
  j->wdir_given = asr_rd_u32(r);
  j->stdin_rank = asr_rd_u32(r);
  j->provider_given = asr_rd_u32(r);
  j->map_by = asr_rd_u32(r);
  j->ppr = asr_rd_u32(r);
  j->cpus_per_rank = asr_rd_u32(r);
  uint32_t has_cores = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "JOB is truncated or a string in it is too long");
  if (has_cores > 1 || (has_cores && (size_t)j->nranks * 4 > r->len - r->pos))
    return asr_errf(why, wl, ASR_EPROTO, "JOB's rankfile cores are truncated");
  if (has_cores) {
    j->cores = rd_strs(r, j->nranks, 255, 1);
    if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "JOB's rankfile cores are truncated, empty or too long");
  }
  j->master_addr = asr_rd_str(r, ASR_CTL_MAX_HOSTNAME);
  j->master_port = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "JOB's MASTER_ADDR is truncated or too long");
  j->tree_radix = asr_rd_u32(r);
  j->tree_launch = asr_rd_u32(r);
  j->tree_agent = asr_rd_str(r, ASR_CTL_MAX_TEXT);
  j->tree_asrd = asr_rd_str(r, ASR_CTL_MAX_TEXT);
  j->tree_ip = asr_rd_str(r, ASR_CTL_MAX_HOSTNAME);
  j->on_failure = asr_rd_u32(r);
  j->trace = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "JOB's tree is truncated or a string in it is too long");
  if (j->on_failure > ASR_CTL_ON_FAILURE_MAX)
    return asr_errf(why, wl, ASR_EPROTO, "JOB's failure policy is %u (0..%u)", j->on_failure,
                    ASR_CTL_ON_FAILURE_MAX);
  if (j->trace > 1) return asr_errf(why, wl, ASR_EPROTO, "JOB's trace is %u (0 or 1)", j->trace);
  if (j->tree_radix > ASR_CTL_MAX_RADIX || j->tree_launch > 1)
    return asr_errf(why, wl, ASR_EPROTO, "JOB's tree radix is %u (0..%u), srun %u", j->tree_radix,
                    ASR_CTL_MAX_RADIX, j->tree_launch);
  if (j->tree_radix && (!j->tree_agent[0] || !j->tree_asrd[0]))
    return asr_errf(why, wl, ASR_EPROTO, "JOB's tree of radix %u names no agent or asrd", j->tree_radix);
  if (j->map_by > 7 || j->ppr > ASR_CTL_MAX_LNC || j->cpus_per_rank < 1 ||
      j->cpus_per_rank > ASR_CTL_MAX_CPUS_PER_RANK)
    return asr_errf(why, wl, ASR_EPROTO, "JOB has map-by %u, ppr %u and %u cpus per rank", j->map_by, j->ppr,
                    j->cpus_per_rank);
  if (j->bind_to > 4 || j->report_bindings > 1)
    return asr_errf(why, wl, ASR_EPROTO, "JOB has binding %u and report %u", j->bind_to, j->report_bindings);
  if (j->port == 0 || j->port > 65535)
    return asr_errf(why, wl, ASR_EPROTO, "JOB's bootstrap port is %u", j->port);
  if (j->master_port == 0 || j->master_port > 65535)
    return asr_errf(why, wl, ASR_EPROTO, "JOB's MASTER_PORT is %u", j->master_port);
  if (j->heartbeat_s < 1 || j->heartbeat_s > 3600)
    return asr_errf(why, wl, ASR_EPROTO, "JOB's heartbeat timeout is %u s (1..3600)", j->heartbeat_s);
  if (j->stdin_rank >= j->nranks && j->stdin_rank != ASR_CTL_STDIN_ALL && j->stdin_rank != ASR_CTL_STDIN_NONE)
    return asr_errf(why, wl, ASR_EPROTO, "JOB's stdin goes to rank %u of %u", j->stdin_rank, j->nranks);
  if (j->provider_given > 1 || (j->provider_given && !j->provider[0]))
    return asr_errf(why, wl, ASR_EPROTO, "JOB's provider is '%s' (given %u)", j->provider, j->provider_given);
  if (j->wdir_given > 1 || (j->wdir_given && !j->wdir[0]))
    return asr_errf(why, wl, ASR_EPROTO, "JOB's working directory is '%s' (given %u)", j->wdir,
                    j->wdir_given);
  return 0;
}

void asr_ctl_job_free(asr_ctl_job_t *j) {
  for (uint32_t h = 0; j->host_names && h < j->nhosts; h++) free(j->host_names[h]);
  for (uint32_t i = 0; j->args && i < j->nargs; i++) free(j->args[i]);
  for (uint32_t i = 0; j->env_names && i < j->nenv; i++) free(j->env_names[i]);
  for (uint32_t i = 0; j->env_values && i < j->nenv; i++) free(j->env_values[i]);
  free(j->host_names);
  free(j->host_of);
  free(j->lnc_of);
  free(j->program);
  free(j->args);
  free(j->env_names);
  free(j->env_values);
  free(j->provider);
  free(j->nspace);
  free(j->if_spec);
  free(j->wdir);
  for (uint32_t i = 0; j->cores && i < j->nranks; i++) free(j->cores[i]);
  free(j->cores);
  free(j->master_addr);
  free(j->tree_agent);
  free(j->tree_asrd);
  free(j->tree_ip);
  memset(j, 0, sizeof *j);
}

/* --- STARTED ------------------------------------------------------------------ */

static int pid_ok(uint32_t pid) { return pid > 1 && pid <= 0x7fffffffu; }

static int enc_started(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (m->u.started.n > ASR_CTL_MAX_RANKS) return ASR_EINVAL;
  int rc = asr_buf_put_u32(b, m->u.started.n);
  for (uint32_t i = 0; i < m->u.started.n; i++) {
    if (!pid_ok(m->u.started.pids[i])) return ASR_EINVAL;
    rc = rc || asr_buf_put_u32(b, m->u.started.pids[i]);
  }
  return rc;
}

static int dec_started(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  uint32_t n = asr_rd_u32(r);
  if (r->bad || n > ASR_CTL_MAX_RANKS || (size_t)n * 4 > r->len - r->pos)
    return asr_errf(why, wl, ASR_EPROTO, "STARTED announces %u ranks in %zu bytes", n, r->len);
  m->u.started.n = n;
  m->u.started.pids = calloc(n ? n : 1, sizeof *m->u.started.pids);
  if (!m->u.started.pids) return asr_errf(why, wl, ASR_EPROTO, "out of memory for STARTED");
  for (uint32_t i = 0; i < n; i++) {
    m->u.started.pids[i] = asr_rd_u32(r);
    if (!pid_ok(m->u.started.pids[i]))
      return asr_errf(why, wl, ASR_EPROTO, "STARTED names pid %u", m->u.started.pids[i]);
  }
  return 0;
}

/* --- OUTPUT, EXIT, FENCE, FENCE_DONE, ABORT, KILL, STDIN, ERROR ------------------ */

static int enc_output(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (m->u.output.stream != 1 && m->u.output.stream != 2) return ASR_EINVAL;
  if (m->u.output.flags & ~ASR_CTL_OUT_FLAGS) return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.output.rank) || asr_buf_put_u32(b, m->u.output.stream) ||
         asr_buf_put_u32(b, m->u.output.flags) || asr_buf_put_bytes(b, m->u.output.line, m->u.output.len);
}

static int dec_output(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.output.rank = asr_rd_u32(r);
  m->u.output.stream = asr_rd_u32(r);
  m->u.output.flags = asr_rd_u32(r);
  m->u.output.line = asr_rd_bytes(r, &m->u.output.len);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "OUTPUT is truncated");
  if (m->u.output.stream != 1 && m->u.output.stream != 2)
    return asr_errf(why, wl, ASR_EPROTO, "OUTPUT names stream %u (1 or 2)", m->u.output.stream);
  if (m->u.output.flags & ~ASR_CTL_OUT_FLAGS)
    return asr_errf(why, wl, ASR_EPROTO, "OUTPUT has unknown flags %#x", m->u.output.flags);
  return 0;
}

static int enc_exit(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (m->u.exit.flags & ~ASR_CTL_EXIT_NOT_RUN) return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.exit.rank) || asr_buf_put_u32(b, m->u.exit.status) ||
         asr_buf_put_u32(b, m->u.exit.flags);
}

static int dec_exit(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.exit.rank = asr_rd_u32(r);
  m->u.exit.status = asr_rd_u32(r);
  m->u.exit.flags = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "EXIT is truncated");
  if (m->u.exit.flags & ~ASR_CTL_EXIT_NOT_RUN)
    return asr_errf(why, wl, ASR_EPROTO, "EXIT has unknown flags %#x", m->u.exit.flags);
  return 0;
}

static int enc_fence(const asr_ctl_msg_t *m, asr_buf_t *b) {
  return asr_buf_put_u32(b, m->u.fence.id) || asr_buf_put_bytes(b, m->u.fence.data, m->u.fence.len);
}

static int dec_fence(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.fence.id = asr_rd_u32(r);
  m->u.fence.data = asr_rd_bytes(r, &m->u.fence.len);
  return r->bad ? asr_errf(why, wl, ASR_EPROTO, "%s is truncated", type_names[m->type]) : 0;
}

static int enc_abort(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (!str_ok(m->u.abort.msg, ASR_CTL_MAX_TEXT)) return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.abort.rank) || asr_buf_put_u32(b, m->u.abort.status) ||
         asr_buf_put_str(b, m->u.abort.msg);
}

static int dec_abort(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.abort.rank = asr_rd_u32(r);
  m->u.abort.status = asr_rd_u32(r);
  m->u.abort.msg = asr_rd_str(r, ASR_CTL_MAX_TEXT);
  return r->bad ? asr_errf(why, wl, ASR_EPROTO, "ABORT is truncated or its message too long") : 0;
}

static int enc_kill(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (m->u.kill.sig < 1 || m->u.kill.sig > 64) return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.kill.sig);
}

static int dec_kill(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.kill.sig = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "KILL is truncated");
  if (m->u.kill.sig < 1 || m->u.kill.sig > 64)
    return asr_errf(why, wl, ASR_EPROTO, "KILL names signal %u", m->u.kill.sig);
  return 0;
}

static int enc_stdin(const asr_ctl_msg_t *m, asr_buf_t *b) {
  return asr_buf_put_bytes(b, m->u.input.data, m->u.input.len);
}

static int dec_stdin(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.input.data = asr_rd_bytes(r, &m->u.input.len);
  return r->bad ? asr_errf(why, wl, ASR_EPROTO, "STDIN is truncated") : 0;
}

static int enc_error(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (!str_ok(m->u.error.msg, ASR_CTL_MAX_TEXT)) return ASR_EINVAL;
  return asr_buf_put_str(b, m->u.error.msg);
}

static int dec_error(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.error.msg = asr_rd_str(r, ASR_CTL_MAX_TEXT);
  return r->bad ? asr_errf(why, wl, ASR_EPROTO, "ERROR is truncated or its message too long") : 0;
}

static int enc_credit(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (m->u.credit.bytes == 0) return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.credit.bytes);
}

static int dec_credit(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.credit.bytes = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "%s is truncated", type_names[m->type]);
  if (m->u.credit.bytes == 0)
    return asr_errf(why, wl, ASR_EPROTO, "%s gives back 0 bytes", type_names[m->type]);
  return 0;
}

static int enc_closed(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (m->u.closed.stream != 1 && m->u.closed.stream != 2) return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.closed.stream);
}

static int dec_closed(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.closed.stream = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "OUTPUT_CLOSED is truncated");
  if (m->u.closed.stream != 1 && m->u.closed.stream != 2)
    return asr_errf(why, wl, ASR_EPROTO, "OUTPUT_CLOSED names stream %u (1 or 2)", m->u.closed.stream);
  return 0;
}

static int joined_ok(uint32_t what) {
  return what == ASR_CTL_JOINED_INIT || what == ASR_CTL_JOINED_FINALIZED;
}

static int via_ok(uint32_t via) {
  return via == ASR_CTL_VIA_PMIX || via == ASR_CTL_VIA_PMI1 || via == ASR_CTL_VIA_PMI2;
}

static int enc_joined(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (!joined_ok(m->u.joined.what) || !via_ok(m->u.joined.via)) return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.joined.rank) || asr_buf_put_u32(b, m->u.joined.what) ||
         asr_buf_put_u32(b, m->u.joined.via);
}

static int dec_joined(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.joined.rank = asr_rd_u32(r);
  m->u.joined.what = asr_rd_u32(r);
  m->u.joined.via = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "JOINED is truncated");
  if (!joined_ok(m->u.joined.what))
    return asr_errf(why, wl, ASR_EPROTO, "JOINED says %u (1 or 2)", m->u.joined.what);
  if (!via_ok(m->u.joined.via))
    return asr_errf(why, wl, ASR_EPROTO, "JOINED through %u (1 or 2)", m->u.joined.via);
  return 0;
}

/* --- REPORT_REQ, REPORT (issue 24) ----------------------------------------- */

static int report_req_ok(const asr_ctl_msg_t *m) {
  return m->u.report_req.timeout_ms >= ASR_CTL_REPORT_MIN_MS &&
         m->u.report_req.timeout_ms <= ASR_CTL_REPORT_MAX_MS &&
         (m->u.report_req.flags & ~ASR_CTL_REPORT_STACKS) == 0;
}

static int enc_report_req(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (!report_req_ok(m)) return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.report_req.id) || asr_buf_put_u32(b, m->u.report_req.timeout_ms) ||
         asr_buf_put_u32(b, m->u.report_req.flags);
}

static int dec_report_req(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.report_req.id = asr_rd_u32(r);
  m->u.report_req.timeout_ms = asr_rd_u32(r);
  m->u.report_req.flags = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "REPORT_REQ is truncated");
  if (!report_req_ok(m))
    return asr_errf(why, wl, ASR_EPROTO, "REPORT_REQ with timeout %u ms (%u..%u) or flags %#x",
                    m->u.report_req.timeout_ms, ASR_CTL_REPORT_MIN_MS, ASR_CTL_REPORT_MAX_MS,
                    m->u.report_req.flags);
  return 0;
}

static int enc_report(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if ((m->u.report.flags & ~ASR_CTL_REP_FLAGS) || m->u.report.rank >= ASR_CTL_MAX_RANKS ||
      !str_ok(m->u.report.pstate, 256) || m->u.report.text_len > ASR_CTL_MAX_REPORT_TEXT ||
      m->u.report.stack_len > ASR_CTL_MAX_STACK)
    return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.report.id) || asr_buf_put_u32(b, m->u.report.rank) ||
         asr_buf_put_u32(b, m->u.report.pid) || asr_buf_put_u32(b, m->u.report.flags) ||
         asr_buf_put_str(b, m->u.report.pstate) ||
         asr_buf_put_bytes(b, m->u.report.text, m->u.report.text_len) ||
         asr_buf_put_bytes(b, m->u.report.stack, m->u.report.stack_len);
}

static int dec_report(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.report.id = asr_rd_u32(r);
  m->u.report.rank = asr_rd_u32(r);
  m->u.report.pid = asr_rd_u32(r);
  m->u.report.flags = asr_rd_u32(r);
  m->u.report.pstate = asr_rd_str(r, 256);
  m->u.report.text = asr_rd_bytes(r, &m->u.report.text_len);
  m->u.report.stack = asr_rd_bytes(r, &m->u.report.stack_len);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "REPORT is truncated or its state is too long");
  if (m->u.report.rank >= ASR_CTL_MAX_RANKS)
    return asr_errf(why, wl, ASR_EPROTO, "REPORT for rank %u", m->u.report.rank);
  if (m->u.report.flags & ~ASR_CTL_REP_FLAGS)
    return asr_errf(why, wl, ASR_EPROTO, "REPORT flags %#x", m->u.report.flags);
  if (m->u.report.text_len > ASR_CTL_MAX_REPORT_TEXT || m->u.report.stack_len > ASR_CTL_MAX_STACK)
    return asr_errf(why, wl, ASR_EPROTO, "REPORT of %zu + %zu bytes is too long", m->u.report.text_len,
                    m->u.report.stack_len);
  return 0;
}

/* --- METRICS_REQ, METRICS (issue 52: asrrun --metrics-port) ------------------------ */

static int metrics_req_ok(const asr_ctl_msg_t *m) {
  return m->u.metrics_req.timeout_ms >= ASR_CTL_REPORT_MIN_MS &&
         m->u.metrics_req.timeout_ms <= ASR_CTL_REPORT_MAX_MS;
}

static int enc_metrics_req(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (!metrics_req_ok(m)) return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.metrics_req.id) || asr_buf_put_u32(b, m->u.metrics_req.timeout_ms);
}

static int dec_metrics_req(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.metrics_req.id = asr_rd_u32(r);
  m->u.metrics_req.timeout_ms = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "METRICS_REQ is truncated");
  if (!metrics_req_ok(m))
    return asr_errf(why, wl, ASR_EPROTO, "METRICS_REQ with timeout %u ms (%u..%u)",
                    m->u.metrics_req.timeout_ms, ASR_CTL_REPORT_MIN_MS, ASR_CTL_REPORT_MAX_MS);
  return 0;
}

#define METRICS_FLAGS (ASR_CTL_REP_FLAGS & ~ASR_CTL_REP_NO_STACK_TOOL)

static int enc_metrics(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if ((m->u.metrics.flags & ~METRICS_FLAGS) || m->u.metrics.rank >= ASR_CTL_MAX_RANKS ||
      m->u.metrics.text_len > ASR_CTL_MAX_REPORT_TEXT)
    return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.metrics.id) || asr_buf_put_u32(b, m->u.metrics.rank) ||
         asr_buf_put_u32(b, m->u.metrics.flags) || asr_buf_put_u32(b, m->u.metrics.held) ||
         asr_buf_put_bytes(b, m->u.metrics.text, m->u.metrics.text_len);
}

static int dec_metrics(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.metrics.id = asr_rd_u32(r);
  m->u.metrics.rank = asr_rd_u32(r);
  m->u.metrics.flags = asr_rd_u32(r);
  m->u.metrics.held = asr_rd_u32(r);
  m->u.metrics.text = asr_rd_bytes(r, &m->u.metrics.text_len);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "METRICS is truncated");
  if (m->u.metrics.rank >= ASR_CTL_MAX_RANKS)
    return asr_errf(why, wl, ASR_EPROTO, "METRICS for rank %u", m->u.metrics.rank);
  if (m->u.metrics.flags & ~METRICS_FLAGS)
    return asr_errf(why, wl, ASR_EPROTO, "METRICS flags %#x", m->u.metrics.flags);
  if (m->u.metrics.text_len > ASR_CTL_MAX_REPORT_TEXT)
    return asr_errf(why, wl, ASR_EPROTO, "METRICS of %zu bytes is too long", m->u.metrics.text_len);
  return 0;
}

/* --- ROUTED, FENCE_SUB, LOST (issue 28: the tree of daemons) ------------------ */

static int routed_type_ok(uint32_t t) {
  return t > ASR_CTL_INVALID && t < ASR_CTL__COUNT && t != ASR_CTL_ROUTED;
}

static int enc_routed(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if ((m->u.routed.host >= ASR_CTL_MAX_HOSTS && m->u.routed.host != ASR_CTL_ALL_HOSTS) ||
      !routed_type_ok(m->u.routed.type))
    return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.routed.host) || asr_buf_put_u32(b, m->u.routed.type) ||
         asr_buf_put_bytes(b, m->u.routed.data, m->u.routed.len);
}

/* The inner message is decoded here too (and let go): whatever a hop passes
 * on was checked, and a hop that acts on it decodes it again. */
static int dec_routed(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.routed.host = asr_rd_u32(r);
  m->u.routed.type = asr_rd_u32(r);
  m->u.routed.data = asr_rd_bytes(r, &m->u.routed.len);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "ROUTED is truncated");
  if (m->u.routed.host >= ASR_CTL_MAX_HOSTS && m->u.routed.host != ASR_CTL_ALL_HOSTS)
    return asr_errf(why, wl, ASR_EPROTO, "ROUTED for host %u", m->u.routed.host);
  if (!routed_type_ok(m->u.routed.type))
    return asr_errf(why, wl, ASR_EPROTO, "ROUTED carries message type %u", m->u.routed.type);
  asr_ctl_msg_t in;
  char w[200];
  if (asr_ctl_msg_decode((int)m->u.routed.type, m->u.routed.data, m->u.routed.len, &in, w, sizeof w) != 0)
    return asr_errf(why, wl, ASR_EPROTO, "ROUTED %s: %s", type_names[m->u.routed.type], w);
  asr_ctl_msg_free(&in);
  return 0;
}

int asr_ctl_fence_sub_next(const uint8_t **p, size_t *len, uint32_t *host, const uint8_t **blob,
                           size_t *blob_len) {
  if (*len == 0) return 0;
  asr_rd_t r;
  asr_rd_init(&r, *p, *len);
  *host = asr_rd_u32(&r);
  *blob = asr_rd_bytes(&r, blob_len);
  if (r.bad) return 0; /* the decoder checked every entry: not reached */
  *p += r.pos;
  *len -= r.pos;
  return 1;
}

static int enc_fence_sub(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (m->u.fence_sub.n == 0 || m->u.fence_sub.n > ASR_CTL_MAX_HOSTS) return ASR_EINVAL;
  int rc = asr_buf_put_u32(b, m->u.fence_sub.id) || asr_buf_put_u32(b, m->u.fence_sub.n);
  return rc || asr_buf_put(b, m->u.fence_sub.entries, m->u.fence_sub.len);
}

static int dec_fence_sub(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.fence_sub.id = asr_rd_u32(r);
  m->u.fence_sub.n = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "FENCE_SUB is truncated");
  if (m->u.fence_sub.n == 0 || m->u.fence_sub.n > ASR_CTL_MAX_HOSTS)
    return asr_errf(why, wl, ASR_EPROTO, "FENCE_SUB of %u hosts (1..%u)", m->u.fence_sub.n,
                    ASR_CTL_MAX_HOSTS);
  m->u.fence_sub.entries = r->p + r->pos;
  size_t start = r->pos;
  for (uint32_t i = 0; i < m->u.fence_sub.n; i++) {
    uint32_t h = asr_rd_u32(r);
    size_t n;
    (void)asr_rd_bytes(r, &n);
    if (r->bad)
      return asr_errf(why, wl, ASR_EPROTO, "FENCE_SUB's entry %u of %u is truncated", i, m->u.fence_sub.n);
    if (h >= ASR_CTL_MAX_HOSTS)
      return asr_errf(why, wl, ASR_EPROTO, "FENCE_SUB's entry %u is for host %u", i, h);
  }
  m->u.fence_sub.len = r->pos - start;
  return 0;
}

static int enc_lost(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (m->u.lost.host >= ASR_CTL_MAX_HOSTS || !m->u.lost.why || !str_ok(m->u.lost.why, ASR_CTL_MAX_TEXT))
    return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.lost.host) || asr_buf_put_str(b, m->u.lost.why);
}

static int dec_lost(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.lost.host = asr_rd_u32(r);
  m->u.lost.why = asr_rd_str(r, ASR_CTL_MAX_TEXT);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "LOST is truncated or its reason too long");
  if (m->u.lost.host >= ASR_CTL_MAX_HOSTS)
    return asr_errf(why, wl, ASR_EPROTO, "LOST names host %u", m->u.lost.host);
  return 0;
}

/* --- RANK_STATE (issue 50: the failure policy) --------------------------------- */

static int rank_state_ok(const asr_ctl_msg_t *m) {
  return m->u.rank_state.rank < ASR_CTL_MAX_RANKS && m->u.rank_state.state <= ASR_CTL_RANK_FINISHED &&
         m->u.rank_state.incarnation <= ASR_CTL_MAX_INCARNATION;
}

static int enc_rank_state(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (!rank_state_ok(m) || !m->u.rank_state.why || !str_ok(m->u.rank_state.why, ASR_CTL_MAX_TEXT))
    return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.rank_state.rank) || asr_buf_put_u32(b, m->u.rank_state.state) ||
         asr_buf_put_u32(b, m->u.rank_state.incarnation) || asr_buf_put_u32(b, m->u.rank_state.status) ||
         asr_buf_put_str(b, m->u.rank_state.why);
}

static int dec_rank_state(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.rank_state.rank = asr_rd_u32(r);
  m->u.rank_state.state = asr_rd_u32(r);
  m->u.rank_state.incarnation = asr_rd_u32(r);
  m->u.rank_state.status = asr_rd_u32(r);
  m->u.rank_state.why = asr_rd_str(r, ASR_CTL_MAX_TEXT);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "RANK_STATE is truncated or its reason too long");
  if (!rank_state_ok(m))
    return asr_errf(why, wl, ASR_EPROTO, "RANK_STATE for rank %u, state %u, incarnation %u",
                    m->u.rank_state.rank, m->u.rank_state.state, m->u.rank_state.incarnation);
  return 0;
}

/* --- ENDS_ASK, ENDS (the verdict's round, asrrun_verdict.c) ------------------- */

static int enc_ends(const asr_ctl_msg_t *m, asr_buf_t *b) { return asr_buf_put_u32(b, m->u.ends.id); }

static int dec_ends(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.ends.id = asr_rd_u32(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "%s is truncated", type_names[m->type]);
  return 0;
}

/* --- CLOCK_ASK, CLOCK, TRACE, TRACE_END (issue 52: the job's trace) ------------ */

static int put_u64(asr_buf_t *b, uint64_t v) {
  return asr_buf_put_u32(b, (uint32_t)(v >> 32)) || asr_buf_put_u32(b, (uint32_t)v);
}

static uint64_t rd_u64(asr_rd_t *r) {
  uint64_t hi = asr_rd_u32(r);
  return hi << 32 | asr_rd_u32(r);
}

static int enc_clock(const asr_ctl_msg_t *m, asr_buf_t *b) {
  return asr_buf_put_u32(b, m->u.clock.seq) || put_u64(b, m->u.clock.t) ||
         (m->type == ASR_CTL_CLOCK && put_u64(b, m->u.clock.answer));
}

static int dec_clock(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.clock.seq = asr_rd_u32(r);
  m->u.clock.t = rd_u64(r);
  if (m->type == ASR_CTL_CLOCK) m->u.clock.answer = rd_u64(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "%s is truncated", type_names[m->type]);
  return 0;
}

static int enc_trace(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (m->u.trace.file >= ASR_CTL_TRACE_MAX_FILES || (m->u.trace.flags & ~ASR_CTL_TRACE_LAST) ||
      !str_ok(m->u.trace.exited, 64) || m->u.trace.len > ASR_CTL_TRACE_PIECE)
    return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.trace.file) || asr_buf_put_u32(b, m->u.trace.flags) ||
         asr_buf_put_str(b, m->u.trace.exited) || asr_buf_put_bytes(b, m->u.trace.data, m->u.trace.len);
}

static int dec_trace(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.trace.file = asr_rd_u32(r);
  m->u.trace.flags = asr_rd_u32(r);
  m->u.trace.exited = asr_rd_str(r, 64);
  m->u.trace.data = asr_rd_bytes(r, &m->u.trace.len);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "TRACE is truncated or its end's text too long");
  if (m->u.trace.file >= ASR_CTL_TRACE_MAX_FILES || (m->u.trace.flags & ~ASR_CTL_TRACE_LAST) ||
      m->u.trace.len > ASR_CTL_TRACE_PIECE)
    return asr_errf(why, wl, ASR_EPROTO, "TRACE of file %u, flags %#x, %zu bytes (at most %u)",
                    m->u.trace.file, m->u.trace.flags, m->u.trace.len, ASR_CTL_TRACE_PIECE);
  return 0;
}

static int enc_trace_end(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (m->u.trace_end.files > ASR_CTL_TRACE_MAX_FILES) return ASR_EINVAL;
  return asr_buf_put_u32(b, m->u.trace_end.files) || put_u64(b, m->u.trace_end.offset) ||
         put_u64(b, m->u.trace_end.error);
}

static int dec_trace_end(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  m->u.trace_end.files = asr_rd_u32(r);
  m->u.trace_end.offset = rd_u64(r);
  m->u.trace_end.error = rd_u64(r);
  if (r->bad) return asr_errf(why, wl, ASR_EPROTO, "TRACE_END is truncated");
  if (m->u.trace_end.files > ASR_CTL_TRACE_MAX_FILES)
    return asr_errf(why, wl, ASR_EPROTO, "TRACE_END of %u files (at most %u)", m->u.trace_end.files,
                    ASR_CTL_TRACE_MAX_FILES);
  return 0;
}

/* DONE, SHUTDOWN, HEARTBEAT carry nothing. */
static int enc_empty(const asr_ctl_msg_t *m, asr_buf_t *b) {
  (void)m, (void)b;
  return 0;
}

static int dec_empty(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t wl) {
  (void)r, (void)m, (void)why, (void)wl;
  return 0;
}

int asr_ctl_killed_from_outside(int st) {
  if (!WIFSIGNALED(st)) return 0;
  switch (WTERMSIG(st)) {
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
    case SIGABRT:
    case SIGTRAP:
    case SIGSYS:
    case SIGPIPE:
    case SIGXCPU:
    case SIGXFSZ: return 0;
    default: return 1;
  }
}

/* --- the table ------------------------------------------------------------------ */

typedef struct {
  int (*enc)(const asr_ctl_msg_t *m, asr_buf_t *b);
  int (*dec)(asr_rd_t *r, asr_ctl_msg_t *m, char *why, size_t whylen);
} codec_t;

static const codec_t codecs[ASR_CTL__COUNT] = {
    [ASR_CTL_HELLO] = {enc_hello, dec_hello},
    [ASR_CTL_JOB] = {enc_job, dec_job},
    [ASR_CTL_STARTED] = {enc_started, dec_started},
    [ASR_CTL_OUTPUT] = {enc_output, dec_output},
    [ASR_CTL_EXIT] = {enc_exit, dec_exit},
    [ASR_CTL_FENCE] = {enc_fence, dec_fence},
    [ASR_CTL_FENCE_DONE] = {enc_fence, dec_fence},
    [ASR_CTL_ABORT] = {enc_abort, dec_abort},
    [ASR_CTL_KILL] = {enc_kill, dec_kill},
    [ASR_CTL_STDIN] = {enc_stdin, dec_stdin},
    [ASR_CTL_ERROR] = {enc_error, dec_error},
    [ASR_CTL_DONE] = {enc_empty, dec_empty},
    [ASR_CTL_SHUTDOWN] = {enc_empty, dec_empty},
    [ASR_CTL_HEARTBEAT] = {enc_empty, dec_empty},
    [ASR_CTL_CREDIT] = {enc_credit, dec_credit},
    [ASR_CTL_STDIN_CREDIT] = {enc_credit, dec_credit},
    [ASR_CTL_OUTPUT_CLOSED] = {enc_closed, dec_closed},
    [ASR_CTL_JOINED] = {enc_joined, dec_joined},
    [ASR_CTL_REPORT_REQ] = {enc_report_req, dec_report_req},
    [ASR_CTL_REPORT] = {enc_report, dec_report},
    [ASR_CTL_ROUTED] = {enc_routed, dec_routed},
    [ASR_CTL_FENCE_SUB] = {enc_fence_sub, dec_fence_sub},
    [ASR_CTL_LOST] = {enc_lost, dec_lost},
    [ASR_CTL_ENDS_ASK] = {enc_ends, dec_ends},
    [ASR_CTL_ENDS] = {enc_ends, dec_ends},
    [ASR_CTL_RANK_STATE] = {enc_rank_state, dec_rank_state},
    [ASR_CTL_CLOCK_ASK] = {enc_clock, dec_clock},
    [ASR_CTL_CLOCK] = {enc_clock, dec_clock},
    [ASR_CTL_TRACE] = {enc_trace, dec_trace},
    [ASR_CTL_TRACE_END] = {enc_trace_end, dec_trace_end},
    [ASR_CTL_METRICS_REQ] = {enc_metrics_req, dec_metrics_req},
    [ASR_CTL_METRICS] = {enc_metrics, dec_metrics},
};

int asr_ctl_msg_encode(const asr_ctl_msg_t *m, asr_buf_t *b) {
  if (m->type <= ASR_CTL_INVALID || m->type >= ASR_CTL__COUNT) return ASR_EINVAL;
  size_t keep = asr_buf_pending(b); /* a put may compact b: count from its front */
  int rc = codecs[m->type].enc(m, b);
  if (rc) b->len = b->off + keep;  /* nothing half written */
  return rc > 0 ? ASR_ENOMEM : rc; /* the encoders give 1 for a failed put */
}

int asr_ctl_msg_decode(int type, const uint8_t *p, size_t len, asr_ctl_msg_t *m, char *why, size_t whylen) {
  memset(m, 0, sizeof *m);
  if (type <= ASR_CTL_INVALID || type >= ASR_CTL__COUNT)
    return asr_errf(why, whylen, ASR_EPROTO, "unknown message type %d", type);
  m->type = (asr_ctl_type_t)type;
  asr_rd_t r;
  asr_rd_init(&r, p, len);
  int rc = codecs[type].dec(&r, m, why, whylen);
  if (rc == 0 && !asr_rd_done(&r))
    rc = asr_errf(why, whylen, ASR_EPROTO, "%s: %zu bytes after its last field", type_names[type],
                  r.len - r.pos);
  if (rc) {
    asr_ctl_msg_free(m);
    m->type = (asr_ctl_type_t)type;
  }
  return rc;
}

void asr_ctl_msg_free(asr_ctl_msg_t *m) {
  switch (m->type) {
    case ASR_CTL_HELLO:
      free(m->u.hello.host);
      free(m->u.hello.secret_hex);
      break;
    case ASR_CTL_JOB: asr_ctl_job_free(&m->u.job); break;
    case ASR_CTL_STARTED: free(m->u.started.pids); break;
    case ASR_CTL_ABORT: free(m->u.abort.msg); break;
    case ASR_CTL_ERROR: free(m->u.error.msg); break;
    case ASR_CTL_REPORT: free(m->u.report.pstate); break;
    case ASR_CTL_LOST: free(m->u.lost.why); break;
    case ASR_CTL_RANK_STATE: free(m->u.rank_state.why); break;
    case ASR_CTL_TRACE: free(m->u.trace.exited); break;
    default: break; /* nothing owned */
  }
  memset(&m->u, 0, sizeof m->u);
}
