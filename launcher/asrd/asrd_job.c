/*
 * asrd_job.c -- taking the JOB and starting it (asrd.h): the host's KV
 * server on the bootstrap port with "hostname" seeded, the PMIx
 * registration (on PMIx's thread, finished on the loop), then the ranks.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_netif.h"
#include "asrd.h"
#include "kv_keys.h"

int asrd_job_take(asrd_t *d, asr_ctl_msg_t *m, char *err, size_t errlen) {
  asr_ctl_job_t *j = &m->u.job;
  if (d->host_index >= 0 && (uint32_t)d->host_index != j->index) {
    snprintf(err, errlen, "started for host index %d but got the job of host index %u", d->host_index,
             j->index);
    return ASR_EINVAL;
  }
  if (d->pmix.up && strcmp(d->hostname, j->host_names[j->index]) != 0) {
    /* its PMIx server already serves the name it was started with */
    snprintf(err, errlen, "started for host '%s' but got the job of host '%s'", d->hostname,
             j->host_names[j->index]);
    return ASR_EINVAL;
  }
  /* the job is ours from here: the message's copy is emptied */
  d->job = *j;
  memset(j, 0, sizeof *j);
  d->have_job = 1;
  d->nranks = (int)d->job.nranks;
  d->nhosts = (int)d->job.nhosts;
  d->port = (int)d->job.port;
  d->up.heartbeat_timeout_ms = (uint64_t)d->job.heartbeat_s * 1000;
  asrd_up_set_liveness(d);
  if (d->host_index < 0) {
    d->host_index = (int)d->job.index; /* started ahead of the job (no --index) */
    asr_log_set_role("asrd", d->host_index);
  }
  snprintf(d->hostname, sizeof d->hostname, "%s", d->job.host_names[d->host_index]);
  asr_log_set_host(d->hostname);
  /* The ranks start in the job's directory (and a relative program is found
   * from there): --wdir's must exist; asrrun's own is taken where it does. */
  if (d->job.wdir[0] && chdir(d->job.wdir) != 0) {
    if (d->job.wdir_given) {
      snprintf(err, errlen, "--wdir %s: %s on host %s", d->job.wdir, strerror(errno), d->hostname);
      return ASR_EINVAL;
    }
    asr_debug("asrd", "asrrun's directory %s is not here (%s): the ranks start in asrd's", d->job.wdir,
              strerror(errno));
  }
  if (d->job.if_spec[0]) {
    char ip[ASR_NETIF_ADDRLEN], why[400];
    if (asr_netif_resolve(d->job.if_spec, ip, why, sizeof why) != 0) {
      snprintf(err, errlen, "--if-include: %s", why);
      return ASR_EINVAL;
    }
    d->if_addr = strdup(ip);
  } else {
    /* The address this host reaches asrrun from is one its peers can reach. */
    struct sockaddr_in me;
    socklen_t sl = sizeof me;
    char ip[64];
    if (getsockname(d->up.conn.fd, (struct sockaddr *)&me, &sl) == 0 &&
        inet_ntop(AF_INET, &me.sin_addr, ip, sizeof ip))
      d->if_addr = strdup(ip);
  }
  int nlocal = 0;
  for (int i = 0; i < d->nranks; i++)
    if (d->job.host_of[i] == (uint32_t)d->host_index) nlocal++;
  d->ranks = calloc((size_t)(nlocal ? nlocal : 1), sizeof *d->ranks);
  if (!d->ranks) {
    snprintf(err, errlen, "out of memory");
    return ASR_ENOMEM;
  }
  int k = 0;
  for (int i = 0; i < d->nranks; i++) {
    if (d->job.host_of[i] != (uint32_t)d->host_index) continue;
    asrd_rank_t *r = &d->ranks[k];
    r->d = d;
    r->rank = i;
    r->lnc = (int)d->job.lnc_of[i];
    r->local = k++;
    r->out.fd = r->err.fd = r->in_fd = r->rep_fd = r->end_fd = -1;
  }
  d->nlocal = nlocal;
  return 0;
}

static void on_registered(asrd_t *d, int ok, const char *err) {
  if (d->cb.on_started && !ok) d->cb.on_started(d, 0, err);
  if (!ok) return;
  char why[512];
  int rc = asrd_job_start_ranks(d, why, sizeof why);
  if (d->cb.on_started) d->cb.on_started(d, rc == 0, why);
}

/* Runs asr-ofi-probe PROVIDER (runtime/asr_ofi_probe.c: the runtime's own
 * libfabric query, in a process of its own so that asrd never links the
 * runtime): beside asrd in the build tree (../runtime), else where make
 * install put it. 0 when the provider is there, or when no probe can be
 * run (then the ranks' asr_init says what is wrong, as before); else
 * ASR_ENOSYS with the probe's words in why. */
static int probe_provider(const char *prov, char *why, size_t whylen) {
  char self[PATH_MAX], path[PATH_MAX + 64];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  path[0] = '\0';
  if (n > 0) {
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    snprintf(path, sizeof path, "%s/../runtime/asr-ofi-probe", self);
  }
  if (!path[0] || access(path, X_OK) != 0) snprintf(path, sizeof path, "%s/asr-ofi-probe", ASR_PKGLIBEXECDIR);
  if (access(path, X_OK) != 0) {
    asr_debug("asrd", "no asr-ofi-probe (%s): --provider %s is not checked ahead", path, prov);
    return 0;
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return 0;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  char *const argv[] = {path, (char *)prov, NULL};
  extern char **environ;
  pid_t pid;
  int rc = posix_spawn(&pid, path, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  if (rc != 0) {
    close(p[0]);
    return 0;
  }
  size_t got = 0;
  for (;;) {
    ssize_t k = read(p[0], why + got, whylen - 1 - got);
    if (k > 0 && (got += (size_t)k) < whylen - 1) continue;
    if (k < 0 && errno == EINTR) continue;
    break;
  }
  close(p[0]);
  why[got] = '\0';
  why[strcspn(why, "\n")] = '\0';
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 1 && why[0]) return ASR_ENOSYS;
  asr_debug("asrd", "asr-ofi-probe %s ended with status %#x: --provider not checked ahead", prov, st);
  return 0;
}

int asrd_job_start(asrd_t *d, char *err, size_t errlen) {
  if (d->pmix.err[0]) { /* the PMIx server started before the JOB failed */
    snprintf(err, errlen, "%s", d->pmix.err);
    return ASR_EIO;
  }
  /* A --provider this host's libfabric lacks fails here, before any rank
   * starts, rather than in every rank's asr_init (the default providers
   * are libfabric's own: not asked, loading libfabric costs time). */
  if (d->job.provider_given && d->nlocal > 0) {
    char why[700];
    int prc = probe_provider(d->job.provider, why, sizeof why);
    if (prc) {
      snprintf(err, errlen, "--provider %s: %s", d->job.provider, why);
      return prc;
    }
  }
  /* A one-host job keeps its KV traffic on loopback; otherwise peers on other
   * hosts must reach this server. The PMIx server's listener takes an
   * ephemeral port, which could be the bootstrap port (asrrun only found it
   * free; it does not hold it): so the PMIx server starts either while asrd
   * holds that port (--port, before the JOB) or after the KV server has
   * bound it (here). */
  if (d->port_hold >= 0) close(d->port_hold);
  d->port_hold = -1;
  asr_kv_server_opts_t o = {.loop = d->loop,
                            .bind_ip = d->nhosts == 1    ? "127.0.0.1"
                                       : d->bind_addr[0] ? d->bind_addr
                                                         : NULL,
                            .port = (uint16_t)d->port,
                            .secret = d->secret};
  int rc = asr_kv_server_new(&o, &d->kv, err, errlen);
  if (rc) return rc;
  uint8_t val[ASR_KV_HOSTNAME_LEN] = {0};
  memcpy(val, d->hostname, strnlen(d->hostname, ASR_KV_HOSTNAME_LEN - 1));
  /* "hostname" is in the store before any rank exists. */
  asr_kv_server_put(d->kv, ASR_KV_HOSTNAME_KEY, ASR_KV_HOSTNAME_KEY_LEN, val, sizeof val, ASR_KV_VTYPE_TEXT);
  if (!d->pmix.up && (rc = asrd_pmix_init(d, asrd_topo(), err, errlen)) != 0) return rc;
  /* PMIx registers the job on its own thread while this one waits for the
   * topology; the ranks start once the registration is done (on_registered). */
  d->cb.on_registered = on_registered;
  if ((rc = asrd_pmix_register_start(d, err, errlen)) != 0) return rc;
  asrd_topo();
  return 0;
}

int asrd_job_start_ranks(asrd_t *d, char *err, size_t errlen) {
  int rc = asrd_ranks_start(d, err, errlen);
  /* The ranks' process groups: if this daemon is SIGKILLed, asrrun (when it
   * runs on this host) kills them, so the ranks' own children die too. */
  uint32_t *pids = calloc((size_t)(d->nlocal ? d->nlocal : 1), sizeof *pids);
  uint32_t n = 0;
  for (int i = 0; pids && i < d->nlocal; i++)
    if (d->ranks[i].pid > 0) pids[n++] = (uint32_t)d->ranks[i].pid;
  asr_ctl_msg_t m = {.type = ASR_CTL_STARTED, .u.started = {.n = n, .pids = pids}};
  if (pids) asrd_up_send(d, &m);
  free(pids);
  return rc;
}

void asrd_job_stop(asrd_t *d) {
  asrd_metrics_stop(d);
  asrd_report_stop(d);
  asrd_ranks_stop(d);
  asrd_up_fences_fail(d); /* no client waits on a fence of ours */
  asrd_pmix_stop(d);
  asrd_pmi_stop(d);
  if (d->kv) asr_kv_server_free(d->kv);
  d->kv = NULL;
  if (d->port_hold >= 0) close(d->port_hold);
  d->port_hold = -1;
  free(d->ranks);
  d->ranks = NULL;
  d->nlocal = 0;
  free(d->if_addr);
  d->if_addr = NULL;
  asr_ctl_job_free(&d->job);
}
