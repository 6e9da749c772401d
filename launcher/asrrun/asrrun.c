/*
 * asrrun -- the job launcher's front end (asrrun.h for its files).
 *
 *   asrrun -n N [options] PROGRAM [ARGS]      asrrun -f job.yaml
 *
 * main and run only sequence: read the configuration (job_config.h), map
 * ranks onto hosts (map.h), find the program, start one asrd per host
 * (asrrun_daemons.c through a launch backend, launch.h), then run the job's
 * lifecycle on one asr_loop until it is DONE, and return the exit code.
 *
 * Exit codes (also in asrrun --help and the README):
 *   0        every rank exited 0
 *   1..123   the first rank that failed exited with this status (or called
 *            PMIx_Abort/asr abort with it; an abort with status 0 gives 1)
 *   124      --timeout expired
 *   125      the launch failed or a daemon died
 *   127      the program was not found
 *   128+S    the first rank that failed was killed by signal S, or asrrun
 *            itself got signal S (SIGINT: 130, SIGTERM: 143)
 *   2        bad command line or configuration
 */
#include "config.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "asr_err.h"
#include "asr_log.h"
#include "asr_rand.h"
#include "asr_sock.h"
#include "asrrun.h"
#include "launch.h"
#include "tree.h"

#define CLOSE_WAIT_MS 5000 /* CLOSING: connections closed and local daemons reaped within this */

static asrrun_t R;

static const char *const run_state_names[] = {"LAUNCHING", "RUNNING", "ABORTING",
                                              "KILLING",   "CLOSING", "DONE"};

static asr_loop_timer_t state_timer, job_deadline;
static asr_loop_signal_t sig_int, sig_term, sig_hup, sig_quit;
static asr_loop_signal_t sig_fwd[4], sig_tstp, sig_cont;
static const int fwd_sigs[4] = {SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH};

static void on_state_timer(asr_loop_t *loop, asr_loop_timer_t *t);

/* The one place the job's state changes. Entering a state does what the
 * state means (asrrun.h) and arms its deadline. */
static void run_set_state(asrrun_t *run, run_state_t s) {
  if (run->state == s) return;
  assert(run->state != RUN_DONE);
  asr_debug("asrrun", "job: %s -> %s", run_state_names[run->state], run_state_names[s]);
  run->state = s;
  asr_loop_timer_stop(run->loop, &state_timer);
  switch (s) {
    case RUN_LAUNCHING:
    case RUN_RUNNING: break;
    case RUN_ABORTING:
      asr_loop_timer_start(run->loop, &state_timer, ASRRUN_GRACE_MS, on_state_timer, run);
      break;
    case RUN_KILLING:
      asrrun_daemons_kill(run, SIGKILL);
      asr_loop_timer_start(run->loop, &state_timer, ASRRUN_GRACE_MS, on_state_timer, run);
      break;
    case RUN_CLOSING:
      asr_loop_timer_stop(run->loop, &job_deadline);
      asrrun_trace_finish(run); /* every daemon that could sent its files before its DONE */
      asrrun_daemons_shutdown(run);
      asr_loop_timer_start(run->loop, &state_timer, CLOSE_WAIT_MS, on_state_timer, run);
      if (asrrun_daemons_all_ended(run)) run_set_state(run, RUN_DONE);
      break;
    case RUN_DONE: asr_loop_stop(run->loop); break;
    default: assert(!"asrrun: unknown state");
  }
}

static void on_state_timer(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  asrrun_t *run = t->arg;
  switch (run->state) {
    case RUN_ABORTING: run_set_state(run, RUN_KILLING); break;
    case RUN_KILLING:
      /* --timeout and signals must bound asrrun even if a daemon never ends */
      asr_warn("asrrun",
               "the daemons did not report the end of the job %d s after SIGKILL; giving up on them",
               ASRRUN_GRACE_MS / 1000);
      run_set_state(run, RUN_CLOSING);
      break;
    case RUN_CLOSING:
      asrrun_daemons_say_unended(run, CLOSE_WAIT_MS);
      run_set_state(run, RUN_DONE); /* what is left is killed on the way out */
      break;
    default: break;
  }
}

/* Ends the job: the first caller decides the exit code and prints why; the
 * daemons get SIGTERM, then SIGKILL after the grace time. */
static void fail(asrrun_t *run, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(asrrun_t *run, int code, const char *fmt, ...) {
  if (run->exit_code < 0) {
    run->exit_code = code;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "asrrun: %s\n", msg);
  }
  if (run->state < RUN_ABORTING) {
    asrrun_daemons_kill(run, SIGTERM);
    run_set_state(run, RUN_ABORTING);
  }
}

static void daemon_changed(asrrun_t *run, daemon_t *d) {
  asrrun_trace_daemon(run, d);
  asrrun_verdict_check(run); /* a daemon DONE or gone owes no answer: the cause first, then the end */
  asrrun_stdin_poll(run);
  if (run->state < RUN_CLOSING && asrrun_daemons_all_done(run)) run_set_state(run, RUN_CLOSING);
  if (run->state == RUN_CLOSING && asrrun_daemons_all_ended(run)) run_set_state(run, RUN_DONE);
}

/* SIGINT, SIGTERM, SIGHUP, and a second SIGQUIT (on_quit): the first is
 * forwarded to the ranks (SIGQUIT, asrrun's own, as SIGTERM), a second
 * kills the job at once. */
static void on_signal(asr_loop_t *loop, asr_loop_signal_t *s, int sig, pid_t from) {
  (void)loop, (void)from;
  asrrun_t *run = s->arg;
  run->interrupts++;
  if (run->interrupts == 1) {
    const char *abbrev = sigabbrev_np(sig);
    asrrun_notice(run, "got SIG%s%s; %s (again to kill at once)", abbrev ? abbrev : "?",
                  sig == SIGQUIT ? " twice" : "",
                  sig == SIGQUIT ? "ending the job" : "forwarding it to the job");
    if (run->exit_code < 0) run->exit_code = 128 + sig;
    asrrun_daemons_kill(run, sig == SIGQUIT ? SIGTERM : sig);
    if (run->state < RUN_ABORTING) run_set_state(run, RUN_ABORTING);
  } else {
    asrrun_notice(run, "killing the job");
    if (run->state < RUN_KILLING) run_set_state(run, RUN_KILLING);
  }
}

/* A state report for asrrun's own stderr. */
static void report_to_stderr(asrrun_t *run, const char *text, size_t len, void *arg) {
  (void)run, (void)arg;
  asrrun_state_write(2, text, len);
}

/* SIGQUIT (Ctrl-\): the job's state report (asrrun_state.c), and the job
 * goes on; a second SIGQUIT within ASRRUN_QUIT_WINDOW_MS of the one before
 * ends the job as SIGINT would (exit 131), and once the job is ending any
 * SIGQUIT counts as a second signal. */
static uint64_t last_quit_ms;
static void on_quit(asr_loop_t *loop, asr_loop_signal_t *s, int sig, pid_t from) {
  asrrun_t *run = s->arg;
  uint64_t now = asr_loop_now(loop);
  int again = last_quit_ms && now - last_quit_ms <= ASRRUN_QUIT_WINDOW_MS;
  last_quit_ms = now;
  if (again || run->state >= RUN_ABORTING) {
    on_signal(loop, s, sig, from);
    return;
  }
  asrrun_notice(run,
                "got SIGQUIT: the job's state report follows; the job goes on (SIGQUIT again within %d s "
                "ends it)",
                ASRRUN_QUIT_WINDOW_MS / 1000);
  asrrun_state_ask(run, "SIGQUIT", report_to_stderr, NULL);
}

/* SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH: every rank gets it; the job goes on. */
static void on_forward(asr_loop_t *loop, asr_loop_signal_t *s, int sig, pid_t from) {
  (void)loop, (void)from;
  asrrun_daemons_kill(s->arg, sig);
}

/* SIGTSTP (Ctrl-Z): the ranks stop (SIGSTOP: a rank cannot ignore it), then
 * asrrun itself; SIGCONT (fg, bg, kill -CONT) resumes them. The local asrd
 * is not in the terminal's group and keeps running, so the heartbeats go on. */
static void on_tstp(asr_loop_t *loop, asr_loop_signal_t *s, int sig, pid_t from) {
  (void)loop, (void)sig, (void)from;
  asrrun_t *run = s->arg;
  asrrun_daemons_kill(run, SIGSTOP);
  asrrun_daemons_flush(run);
  raise(SIGSTOP);
}

static void on_cont(asr_loop_t *loop, asr_loop_signal_t *s, int sig, pid_t from) {
  (void)loop, (void)sig, (void)from;
  asrrun_daemons_kill(s->arg, SIGCONT);
}

/* --report-state-on-timeout: the report is printed, then the job ends. */
static void report_then_end(asrrun_t *run, const char *text, size_t len, void *arg) {
  (void)arg;
  asrrun_state_write(2, text, len);
  if (run->state >= RUN_CLOSING) return; /* it ended on its own meanwhile */
  fail(run, ASRRUN_EXIT_TIMEOUT, "the job timed out after %d s (--timeout); killing it", run->cfg.timeout_s);
}

static void on_job_deadline(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  asrrun_t *run = t->arg;
  if (run->cfg.report_state_on_timeout && run->state < RUN_ABORTING) {
    asrrun_notice(run, "the job timed out after %d s (--timeout); its state report follows",
                  run->cfg.timeout_s);
    asrrun_state_ask(run, "--timeout", report_then_end, NULL);
    return;
  }
  fail(run, ASRRUN_EXIT_TIMEOUT, "the job timed out after %d s (--timeout); killing it", run->cfg.timeout_s);
}

/* --- setup ------------------------------------------------------------------------ */

static int find_program(const char *prog, char *out, size_t outlen) {
  if (strchr(prog, '/')) {
    snprintf(out, outlen, "%s", prog);
    return access(prog, X_OK) == 0 ? 0 : ASR_ENOENT;
  }
  const char *path = getenv("PATH");
  if (!path) path = "/usr/bin:/bin";
  char *copy = strdup(path), *save = NULL;
  if (!copy) return ASR_ENOMEM;
  for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
    snprintf(out, outlen, "%s/%s", *dir ? dir : ".", prog);
    struct stat sb;
    if (stat(out, &sb) == 0 && S_ISREG(sb.st_mode) && access(out, X_OK) == 0) {
      free(copy);
      return 0;
    }
  }
  free(copy);
  return ASR_ENOENT;
}

/* --dry-run: the tree of daemons (tree.h), a line per parent. */
static void print_tree(const asr_map_t *map, int radix, int local, FILE *out) {
  int n = map->nhosts;
  if (radix <= 0 || n <= radix) {
    fprintf(out, "daemon tree: flat (%s), asrrun starts and connects to all %d daemon%s\n",
            local        ? "--launcher local forks every daemon"
            : radix <= 0 ? "--tree-radix 0"
                         : "no more hosts than the radix",
            n, n > 1 ? "s" : "");
    return;
  }
  fprintf(out,
          "daemon tree: radix %d, depth %d: asrrun connects to %d daemons, each parent starts its children\n",
          radix, asr_tree_depth(radix, n - 1), asr_tree_nchildren(radix, n, -1));
  for (int p = -1; p < n; p++) {
    int k = asr_tree_nchildren(radix, n, p), f = asr_tree_first_child(radix, p);
    if (!k) continue;
    fprintf(out, "  %s -> ", p < 0 ? "asrrun" : map->host_names[p]);
    for (int c = f; c < f + k; c++) fprintf(out, "%s%s", c > f ? " " : "", map->host_names[c]);
    fputc('\n', out);
  }
}

/* Whether host's daemon is forked on this machine (the rest the job's
 * launch backend starts): the backend's answer (asr_launch_forks_here).
 * arg is this host's name. The one rule for the host check and for the
 * launch. */
static int runs_here(const asr_config_t *cfg, const char *host, void *arg) {
  return asr_launch_forks_here(asr_launch_pick(cfg->launcher), host, arg);
}

/* Everything before the daemons start: configuration, map, program, the
 * bootstrap port and the control listener. Returns GO_ON, or the exit code
 * to end with (0 for --help, --version and --dry-run). */
#define GO_ON (-1)
static int prepare(asrrun_t *run, int argc, char **argv, char *ctl_local, char *ctl_remote, size_t ctllen) {
  asr_config_t *cfg = &run->cfg;
  char err[1024];
  int rc = asr_config_load(cfg, argc, argv, err, sizeof err);
  if (rc == 1) return 0; /* --help / --version */
  if (rc) {
    fprintf(stderr, "asrrun: %s\n", err);
    return ASRRUN_EXIT_USAGE;
  }
  /* Inside a Slurm or PBS allocation the hosts come from it (alloc.h). */
  int alloc = asr_alloc_detect(cfg, err, sizeof err);
  if (alloc < 0) {
    fprintf(stderr, "asrrun: %s\n", err);
    return ASRRUN_EXIT_USAGE;
  }
  if (cfg->verbose && cfg->quiet) {
    fprintf(stderr, "asrrun: -v and --quiet contradict each other: give one\n");
    return ASRRUN_EXIT_USAGE;
  }
  if (cfg->verbose && alloc > 0)
    fprintf(stderr, "asrrun: %d hosts from the %s allocation\n", cfg->nhosts, asr_alloc_name(alloc));
  char host[128] = "localhost";
  gethostname(host, sizeof host - 1);
  /* before the dry run too: it shows the job that would run, or why none would */
  /* This host's topology counts NUMA nodes, packages and cores for the map
   * and the dry run (the hosts are taken to be alike; each asrd binds on its
   * own). A job that needs none of it does not pay for the load. */
  asr_topo_t *topo = NULL;
  if (asr_map_needs_topo(cfg) && asr_topo_load(NULL, &topo, err, sizeof err) != 0 && cfg->verbose)
    fprintf(stderr, "asrrun: %s\n", err);
  rc = asr_map_check_hosts(cfg, host, runs_here, host, err, sizeof err);
  if (rc == 0) rc = asr_map_build_topo(cfg, host, topo, &run->map, err, sizeof err);
  if (rc) {
    asr_topo_free(topo);
    fprintf(stderr, "asrrun: %s\n", err);
    return ASRRUN_EXIT_USAGE;
  }
  /* what --oversubscribe lets ranks share, a warning line each */
  for (const char *w = run->map.warnings; w && *w;) {
    size_t n = strcspn(w, "\n");
    fprintf(stderr, "asrrun: warning: %.*s\n", (int)n, w);
    w += n + (w[n] == '\n');
  }
  /* --launcher local forks every daemon here: its tree is flat. (Under
   * Slurm srun still starts every daemon, a step each: asrrun its children's,
   * each parent daemon its own children's.) */
  run->tree.radix = cfg->launcher == ASR_LAUNCHER_LOCAL ? 0 : cfg->tree_radix;
  if (cfg->dry_run) {
    asr_map_print(&run->map, cfg, stdout);
    print_tree(&run->map, run->tree.radix, cfg->launcher == ASR_LAUNCHER_LOCAL, stdout);
    asr_map_print_bindings(&run->map, cfg, topo, stdout);
    asr_topo_free(topo);
    return 0;
  }
  asr_topo_free(topo);
  /* which ranks read our stdin */
  const char *si = cfg->stdin_to;
  char *end = NULL;
  long sr = *si ? strtol(si, &end, 10) : 0;
  if (!strcmp(si, "all"))
    run->input.rank = ASR_CTL_STDIN_ALL;
  else if (!strcmp(si, "none"))
    run->input.rank = ASR_CTL_STDIN_NONE;
  else if ((!*si || (end && !*end && isdigit((unsigned char)si[0]))) && sr >= 0 && sr < run->map.nranks)
    run->input.rank = (uint32_t)sr;
  else {
    fprintf(stderr, "asrrun: --stdin '%s': give a rank (0..%d), all or none\n", si, run->map.nranks - 1);
    return ASRRUN_EXIT_USAGE;
  }
  /* the ranks' directory: --wdir (absolute from here on, it must exist here
   * when this host runs ranks, and on every host: asrd checks), else ours */
  if (cfg->wdir[0]) {
    char abs[PATH_MAX];
    struct stat sb;
    if (!realpath(cfg->wdir, abs) || stat(abs, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
      fprintf(stderr, "asrrun: --wdir %s: %s; nothing was started\n", cfg->wdir,
              errno && !realpath(cfg->wdir, abs) ? strerror(errno) : "not a directory");
      return ASRRUN_EXIT_USAGE;
    }
    snprintf(run->job.wdir, sizeof run->job.wdir, "%s", abs);
  } else if (!getcwd(run->job.wdir, sizeof run->job.wdir)) {
    run->job.wdir[0] = '\0'; /* gone from under us: the ranks start in asrd's */
  }
  char resolved[2 * PATH_MAX + 2], rel[PATH_MAX];
  /* a relative path names a program in the ranks' directory */
  const char *prog = cfg->program;
  if (cfg->wdir[0] && strchr(prog, '/') && prog[0] != '/') {
    if (snprintf(rel, sizeof rel, "%s/%s", run->job.wdir, prog) >= (int)sizeof rel) {
      fprintf(stderr, "asrrun: --wdir %s: the program's path there is too long\n", run->job.wdir);
      return ASRRUN_EXIT_USAGE;
    }
    prog = rel;
  }
  if (find_program(prog, resolved, sizeof resolved) != 0) {
    fprintf(stderr, "asrrun: program '%s' not found or not executable (checked %s); nothing was started\n",
            cfg->program, strchr(cfg->program, '/') ? "that path" : "every directory in PATH");
    return ASRRUN_EXIT_NOTFOUND;
  }
  if (asrrun_output_prepare(run, err, sizeof err) != 0) {
    fprintf(stderr, "asrrun: %s; nothing was started\n", err);
    return ASRRUN_EXIT_USAGE;
  }
  /* Which daemons are forked here and which the launch backend starts (a
   * manager that starts every daemon, as srun does, starts this host's
   * too); the address the remote ones call back on. */
  const asr_launch_ops_t *backend = asr_launch_pick(cfg->launcher);
  int nremote = 0;
  const asr_map_t *map = &run->map;
  run->daemons = calloc((size_t)map->nhosts, sizeof *run->daemons);
  run->ranks = calloc((size_t)map->nranks, sizeof *run->ranks);
  int *is_local = calloc((size_t)map->nhosts, sizeof *is_local);
  if (!run->daemons || !run->ranks || !is_local) {
    free(is_local);
    fprintf(stderr, "asrrun: out of memory for a job of %d ranks\n", map->nranks);
    return ASRRUN_EXIT_LAUNCH;
  }
  asrrun_policy_init(run);
  for (int h = 0; h < map->nhosts; h++) {
    /* a daemon below another in the tree is started by that one, through
     * the agent, even on this host */
    is_local[h] = runs_here(cfg, map->host_names[h], host) && asr_tree_parent(run->tree.radix, h) < 0;
    if (!is_local[h]) nremote++;
  }
  char ctl_ip[16] = "127.0.0.1";
  for (int h = 0; h < map->nhosts && nremote; h++)
    if (!is_local[h]) {
      if (asr_launch_callback_ip(cfg->if_include, map->host_names[h], ctl_ip, err, sizeof err) != 0) {
        free(is_local);
        fprintf(stderr, "asrrun: %s\n", err);
        return ASRRUN_EXIT_LAUNCH;
      }
      break;
    }
  snprintf(run->job.nspace, sizeof run->job.nspace, "asr.%ld.%08x", (long)getpid(), (unsigned)asr_rand_u64());
  asrrun_early_adopt(run, is_local);
  /* the early daemon holds the port it was given: the job's, unless one is
   * configured (then it lets that one go and binds the job's) */
  run->job.port = cfg->bootstrap_port > 0 ? cfg->bootstrap_port
                  : run->early.index >= 0 ? run->early.bport
                                          : asrrun_pick_port();
  if (run->job.port <= 0) {
    free(is_local);
    fprintf(stderr, "asrrun: cannot find a free bootstrap port; give one with --bootstrap-port\n");
    return ASRRUN_EXIT_LAUNCH;
  }
  for (int h = 0; h < map->nhosts; h++) {
    run->daemons[h].run = run;
    run->daemons[h].index = h;
    run->daemons[h].nlocal = map->nlocal[h];
    run->daemons[h].local = is_local[h];
  }
  free(is_local);
  uint16_t ctl_port = 0;
  if (!nremote && run->early.lfd >= 0) {
    /* the early daemon's listener serves every daemon of a job on this host */
    run->tree.lfd = run->early.lfd;
    ctl_port = run->early.port;
    run->early.lfd = -1;
  } else {
    run->tree.lfd = asr_sock_listen(nremote ? "0.0.0.0" : "127.0.0.1", 0, 1024, &ctl_port, err, sizeof err);
    if (run->tree.lfd < 0) {
      fprintf(stderr, "asrrun: cannot open the control port: %s\n", err);
      return ASRRUN_EXIT_LAUNCH;
    }
  }
  snprintf(ctl_local, ctllen, "127.0.0.1:%u", ctl_port);
  snprintf(ctl_remote, ctllen, "%s:%u", ctl_ip, ctl_port);
  /* torchrun's names (asrd_spawn.c): on one host each asrd's own address;
   * across hosts rank 0's host as the other hosts reach it: this host by
   * the address its daemons call back on (chosen with --if-include), any
   * other by the name the host list gives it, or, where this host cannot
   * resolve that name (emulated hosts), by the address its asrd calls back
   * from (asrrun_daemons.c: the JOBs wait for that HELLO). The port is one free here,
   * as the bootstrap port is (rank 0's host is this one unless the host
   * list leaves it out). */
  run->job.master_port = asrrun_pick_port();
  if (run->job.master_port <= 0) {
    fprintf(stderr, "asrrun: cannot find a free port for MASTER_PORT\n");
    return ASRRUN_EXIT_LAUNCH;
  }
  int h0 = map->ranks[0].host;
  if (map->nhosts > 1 && run->daemons[h0].local)
    snprintf(run->job.master_addr, sizeof run->job.master_addr, "%s", ctl_ip);
  else if (map->nhosts > 1 && asr_launch_host_resolves(map->host_names[h0]))
    snprintf(run->job.master_addr, sizeof run->job.master_addr, "%s", map->host_names[h0]);
  else if (map->nhosts > 1 && asr_tree_parent(run->tree.radix, h0) < 0)
    run->job.master_later = 1; /* a name only its launch agent knows (emulated hosts) */
  else if (map->nhosts > 1)
    fprintf(stderr,
            "asrrun: warning: host %s of rank 0 is below another in the daemon tree and its name does not "
            "resolve here: MASTER_ADDR is each host's own address (put it among the first --tree-radix "
            "hosts)\n",
            map->host_names[h0]);
  if (backend->agent) /* for messages */
    snprintf(cfg->launch_agent, sizeof cfg->launch_agent, "%s", backend->agent);
  if (cfg->verbose && nremote)
    fprintf(stderr, "asrrun: %d remote host%s call back on %s through '%s'\n", nremote,
            nremote > 1 ? "s" : "", ctl_remote, cfg->launch_agent);
  return GO_ON;
}

static int run_job(asrrun_t *run, int argc, char **argv) {
  char ctl_local[64], ctl_remote[64];
  int rc = prepare(run, argc, argv, ctl_local, ctl_remote, sizeof ctl_local);
  if (rc != GO_ON) return rc;
  /* --metrics-port: listening before any daemon starts, so a port that
   * cannot be had ends asrrun before the job begins */
  rc = asrrun_metrics_start(run);
  if (rc) return rc;
  signal(SIGPIPE, SIG_IGN);
  /* blocked from here (the loop's signalfd reads them); the daemons start
   * with an empty mask (launch_local.c, launch_agent.c) */
  asr_loop_signal_start(run->loop, &sig_int, SIGINT, on_signal, run);
  asr_loop_signal_start(run->loop, &sig_term, SIGTERM, on_signal, run);
  asr_loop_signal_start(run->loop, &sig_hup, SIGHUP, on_signal, run);
  asr_loop_signal_start(run->loop, &sig_quit, SIGQUIT, on_quit, run);
  for (int i = 0; i < 4; i++) asr_loop_signal_start(run->loop, &sig_fwd[i], fwd_sigs[i], on_forward, run);
  asr_loop_signal_start(run->loop, &sig_tstp, SIGTSTP, on_tstp, run);
  asr_loop_signal_start(run->loop, &sig_cont, SIGCONT, on_cont, run);
  asrrun_report_map(run,
                    run->cfg.provider[0]  ? run->cfg.provider
                    : run->map.nhosts > 1 ? "sm within a host, tcp;ofi_rxm across"
                                          : "sm",
                    run->cfg.provider[0]  ? "--provider"
                    : run->map.nhosts > 1 ? "the job spans hosts"
                                          : "the job is on one host");
  rc = asrrun_output_start(run);
  if (rc) {
    fprintf(stderr, "asrrun: cannot start the output writer: %s\n", asr_strerror(rc));
    return ASRRUN_EXIT_LAUNCH;
  }
  /* asrrun_stdin.c: forwarded once the daemons of the ranks that read it run them */
  run->input.state = run->input.rank == ASR_CTL_STDIN_NONE ? 0 : 1;

  char asrd[PATH_MAX], remote_asrd[PATH_MAX + 16];
  asrrun_asrd_path(asrd, sizeof asrd);
  /* remote hosts run asrd from --prefix, else from where it is installed here */
  if (run->cfg.prefix[0])
    snprintf(remote_asrd, sizeof remote_asrd, "%s/bin/asrd", run->cfg.prefix);
  else
    snprintf(remote_asrd, sizeof remote_asrd, "%s", asrd);
  char terr[1400];
  if (asrrun_trace_start(run, terr, sizeof terr) != 0) {
    fprintf(stderr, "asrrun: %s\n", terr);
    return ASRRUN_EXIT_USAGE;
  }
  if (run->cfg.timeout_s > 0)
    asr_loop_timer_start(run->loop, &job_deadline, (uint64_t)run->cfg.timeout_s * 1000, on_job_deadline, run);
  run_set_state(run, RUN_LAUNCHING);
  asrrun_status_start(run); /* asrrun --status from another shell (asrrun_status.c) */
  asrrun_daemons_launch(run, asrd, remote_asrd, ctl_local, ctl_remote);
  asrrun_trace_launched(run);
  if (run->state == RUN_LAUNCHING) run_set_state(run, RUN_RUNNING);
  if (run->state != RUN_DONE) {
    rc = asr_loop_run(run->loop);
    if (rc) fail(run, ASRRUN_EXIT_LAUNCH, "event loop failed: %s", asr_strerror(rc));
  }
  asrrun_report_ctl(run);
  asrrun_stdin_stop(run);
  asrrun_status_stop(run);
  asrrun_metrics_stop(run);
  asrrun_state_stop(run);
  asrrun_daemons_stop(run);
  asrrun_trace_stop(run);
  asr_loop_timer_stop(run->loop, &state_timer);
  asr_loop_timer_stop(run->loop, &job_deadline);
  asr_loop_signal_stop(run->loop, &sig_cont);
  asr_loop_signal_stop(run->loop, &sig_tstp);
  for (int i = 0; i < 4; i++) asr_loop_signal_stop(run->loop, &sig_fwd[i]);
  asr_loop_signal_stop(run->loop, &sig_quit);
  asr_loop_signal_stop(run->loop, &sig_hup);
  asr_loop_signal_stop(run->loop, &sig_term);
  asr_loop_signal_stop(run->loop, &sig_int);
  asrrun_output_close(run);
  /* under --on-failure continue or restart the failures the policy
   * absorbed decide nothing; the ranks' own exits do (asrrun_policy.c) */
  if (run->exit_code < 0 && asrrun_policy_active(run)) run->exit_code = asrrun_policy_exit_code(run);
  asrrun_policy_summary(run);
  asrrun_policy_free(run);
  return run->exit_code < 0 ? 0 : run->exit_code;
}

int main(int argc, char **argv) {
  asrrun_t *r = &R;
  asr_log_set_role("asrrun", -1);
  /* asrrun --status [JOB]: a command of its own (asrrun_status.c) */
  if (argc >= 2 && (strcmp(argv[1], "--status") == 0 || strncmp(argv[1], "--status=", 9) == 0)) {
    const char *job = argv[1][8] == '=' ? argv[1] + 9 : argc >= 3 ? argv[2] : NULL;
    if (argc > (argv[1][8] == '=' ? 2 : 3)) {
      fprintf(stderr, "asrrun: --status takes one job at most: asrrun --status [JOB]\n");
      return ASRRUN_EXIT_USAGE;
    }
    return asrrun_status_client(job);
  }
  r->exit_code = -1;
  asrrun_verdict_init(r);
  r->tree.lfd = -1;
  r->tree.daemons_up = 0;
  r->early = (asrrun_early_t){.lfd = -1, .index = -1};
  r->cb.fail = fail;
  r->cb.daemon_changed = daemon_changed;
  r->cb.on_report = asrrun_state_on_report;
  r->cb.on_trace = asrrun_trace_msg;
  r->cb.on_metrics = asrrun_metrics_on_msg;
  r->cb.stdin_taken = asrrun_stdin_credit;
  uint8_t secret[ASR_KV_SECRET_LEN];
  asr_kv_secret_generate(secret);
  asr_kv_secret_to_hex(secret, r->job.secret_hex);
  int lrc = asr_loop_new(&r->loop);
  if (lrc) {
    fprintf(stderr, "asrrun: cannot make an event loop: %s\n", asr_strerror(lrc));
    return ASRRUN_EXIT_LAUNCH;
  }
  asrrun_early_start(r, argc, argv);
  int rc = run_job(r, argc, argv);
  asrrun_early_finish(r);
  if (r->tree.lfd >= 0) close(r->tree.lfd);
  asr_loop_free(r->loop);
  return rc;
}
