/*
 * asrrun_early.c -- this host's asrd, started before the configuration is
 * read (asrrun.h).
 *
 * Most of a short job's run time is asrd's own start (exec and loading
 * libpmix, PMIx_server_init), and asrrun's own work before it starts the
 * daemons (the YAML files, the map, finding the program) does not depend on
 * it. So when the command line may run a job on this host, asrrun starts
 * this host's asrd first, before reading its configuration: on a listener of
 * its own, under this host's name, holding a bootstrap port picked here, and
 * without a host index (the JOB tells it). asrd calls back and starts its
 * PMIx server meanwhile. If the job then runs on this host under that name,
 * the daemon is adopted (asrrun_early_adopt) and the job gets that port
 * unless one is configured; otherwise -- bad options, a missing program, a
 * dry run in a job file, only other hosts, Slurm -- it is dismissed: asrrun
 * closes its listener, and asrd, finding asrrun gone (its connect refused,
 * or the connection reset), removes what it made (its PMIx directory) and
 * exits quietly; asrrun reaps it before exiting itself (asrrun_early_finish).
 */
#include "config.h"

#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "asr_env.h"
#include "asr_sock.h"
#include "asrd_dir.h"
#include "asrrun.h"
#include "launch.h"

#define EARLY_REAP_MS 5000

void asrrun_asrd_path(char *out, size_t len) {
  const char *env = NULL; /* checked by asr_config_check_env before any daemon starts */
  if (asr_env_str(ASR_ENV_ASRD_PATH, &env, NULL, 0) == 0 && env) {
    snprintf(out, len, "%s", env);
    return;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  snprintf(out, len, "%s/asrd", dirname(exe));
}

int asrrun_pick_port(void) {
  int p = asr_sock_free_port("0.0.0.0");
  return p > 0 ? p : -1;
}

void asrrun_early_start(asrrun_t *run, int argc, char **argv) {
  asrrun_early_t *e = &run->early;
  /* Not when the command line asks for no job or names hosts (this host may
   * not be one of them), nor inside an allocation (its hosts, and perhaps
   * its manager's launcher: alloc.h). */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "--version") || !strcmp(a, "--dry-run") ||
        !strncmp(a, "--list-env", 10) || !strncmp(a, "-H", 2) || !strncmp(a, "--host", 6))
      return;
  }
  /* Nor when the environment holds a bad setting: the job will not run
   * (asr_config_load reports why). */
  if (asr_config_check_env(NULL, 0) != 0) return;
  if (asr_env_is_set(ASR_ENV_ASRRUN_HOSTFILE) || asr_alloc_hinted()) return;
  if (gethostname(e->host, sizeof e->host - 1) != 0 || !e->host[0]) return;
  e->bport = asrrun_pick_port();
  if (e->bport <= 0) return;
  char err[256], asrd[PATH_MAX], ctl[64];
  e->lfd = asr_sock_listen("127.0.0.1", 0, 16, &e->port, err, sizeof err);
  if (e->lfd < 0) return;
  asrrun_asrd_path(asrd, sizeof asrd);
  snprintf(ctl, sizeof ctl, "127.0.0.1:%u", e->port);
  asr_launch_args_t a = {.asrd_path = asrd,
                         .ctl_addr = ctl,
                         .secret_hex = run->job.secret_hex,
                         .host = e->host,
                         .index = -1,
                         .port = e->bport};
  e->pid = asr_launch_local.start(&a, err, sizeof err);
  if (e->pid <= 0) { /* the normal start reports what is wrong */
    e->pid = 0;
    close(e->lfd);
    e->lfd = -1;
  }
}

void asrrun_early_dismiss(asrrun_t *run) {
  if (run->early.lfd >= 0) close(run->early.lfd);
  run->early.lfd = -1;
}

void asrrun_early_adopt(asrrun_t *run, const int *is_local) {
  asrrun_early_t *e = &run->early;
  if (e->pid <= 0) return;
  /* the early daemon is one forked here: where the manager starts every
   * daemon, this host's is its step, never that one */
  int managed = asr_launch_pick(run->cfg.launcher)->starts_every_daemon;
  for (int h = 0; h < run->map.nhosts && !managed; h++)
    if (is_local[h] && !strcmp(run->map.host_names[h], e->host)) {
      e->index = h;
      return;
    }
  asrrun_early_dismiss(run);
}

typedef struct {
  asr_loop_pid_t p;
  asr_loop_timer_t t;
  asrrun_t *run;
} reaper_t;

static void on_early_exit(asr_loop_t *loop, asr_loop_pid_t *p, int have_status, int status) {
  reaper_t *r = p->arg;
  /* a daemon killed here could not remove its PMIx directory */
  if (have_status && WIFSIGNALED(status)) asrd_dir_remove_of(r->run->early.pid);
  r->run->early.pid = 0;
  asr_loop_timer_stop(loop, &r->t);
  asr_loop_stop(loop);
}

static void on_early_timeout(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)t;
  asr_loop_stop(loop);
}

/* A dismissed early daemon exits within milliseconds, once its PMIx server
 * is up and removed: asrrun waits for that on its loop, bounded like every
 * wait here, and then kills it. */
void asrrun_early_finish(asrrun_t *run) {
  asrrun_early_dismiss(run);
  pid_t pid = run->early.pid;
  if (pid <= 0) return;
  reaper_t r = {.run = run};
  if (run->loop && asr_loop_pid_start(run->loop, &r.p, pid, 1, on_early_exit, &r) == 0) {
    asr_loop_timer_start(run->loop, &r.t, EARLY_REAP_MS, on_early_timeout, &r);
    asr_loop_run(run->loop);
    asr_loop_timer_stop(run->loop, &r.t);
    asr_loop_pid_stop(run->loop, &r.p);
  }
  if (run->early.pid > 0) {
    kill(pid, SIGKILL);
    int st;
    if (waitpid(pid, &st, 0) == pid) asrd_dir_remove_of(pid);
    run->early.pid = 0;
  }
}
