/*
 * asrd.c -- the host daemon: main and its lifecycle (asrd.h).
 *
 *   asrd --ctl HOST:PORT [--index I] [--hostname NAME] [--port P] [--addr IP]
 *
 * --addr binds what this daemon opens to one address of its host's: for
 * emulated hosts, many to a network namespace, each with its own address.
 * In a tree of daemons (tree.h) the parent it calls is another asrd, which
 * started it; it starts its own children (asrd_down.c).
 *
 * The job secret arrives on stdin as one line "ASR_JOB_SECRET=<64 hex>", never
 * on the command line (which every user can read in /proc). asrd connects to
 * asrrun and says HELLO while a thread loads the hwloc topology, and starts
 * its PMIx server while the JOB is on its way (holding the bootstrap port,
 * --port, meanwhile). The JOB (which also tells a daemon started without
 * --index, ahead of the job, its host index) starts the job; then output,
 * exits, fences and aborts flow up until asrrun says SHUTDOWN or goes away
 * (then it kills its ranks and exits) -- or, in a one-host job, until its
 * ranks are done.
 *
 * Everything happens on one asr_loop; the lifecycle is one state machine
 * (asrd_state_t), every transition through asrd_set_state, which logs it
 * (ASR_LOG_LEVEL=debug) and arms the state's deadline.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_sock.h"
#include "asrd.h"
#include "asrd_pmix_log.h"
#include "asrd_shm.h"
#include "kv_secret.h"

#define GRACE_MS 3000       /* TERMINATING: SIGKILL after this */
#define REGISTER_MS 10000   /* STARTING: the PMIx registration must be done by then */
#define KILLED_WAIT_MS 5000 /* KILLED: a rank that does not die in this time is given up */
#define CHILDREN_MS (GRACE_MS + KILLED_WAIT_MS + 2000) /* FINISHING: the children's ends */

static asrd_t D;

static const char *const state_names[] = {"CONNECTING",  "WAITING_JOB", "STARTING",  "RUNNING", "IDLE",
                                          "TERMINATING", "KILLED",      "FINISHING", "DONE"};

const char *asrd_state_name(asrd_state_t s) { return s <= ASRD_DONE ? state_names[s] : "UNKNOWN"; }

static void kill_timer(asr_loop_t *loop, asr_loop_timer_t *t);
static void children_timeout(asr_loop_t *loop, asr_loop_timer_t *t);
static void register_timeout(asr_loop_t *loop, asr_loop_timer_t *t);
static void job_check_done(asrd_t *d);

/* The one place the state changes. Entering a state does what the state
 * means (see asrd.h) and arms its deadline. */
static void set_state(asrd_t *d, asrd_state_t s) {
  asrd_state_t old = d->state;
  if (old == s) return;
  assert(old != ASRD_DONE);
  d->state = s;
  asr_debug("asrd", "%s -> %s", asrd_state_name(old), asrd_state_name(s));
  asr_loop_timer_stop(d->loop, &d->state_timer);
  switch (s) {
    case ASRD_CONNECTING:
    case ASRD_WAITING_JOB:
    case ASRD_RUNNING:
    case ASRD_IDLE: break;
    case ASRD_STARTING:
      asr_loop_timer_start(d->loop, &d->state_timer, REGISTER_MS, register_timeout, d);
      break;
    case ASRD_TERMINATING: asr_loop_timer_start(d->loop, &d->state_timer, GRACE_MS, kill_timer, d); break;
    case ASRD_KILLED:
      asrd_ranks_signal(d, SIGKILL);
      asr_loop_timer_start(d->loop, &d->state_timer, KILLED_WAIT_MS, kill_timer, d);
      break;
    case ASRD_FINISHING:
      /* a parent in the tree closes after its children have (each got the
       * SHUTDOWN or the KILL first), so that what they still send goes up,
       * and ends once the loop reaped their agents; bounded by their own
       * ends (GRACE_MS + KILLED_WAIT_MS) */
      if (asrd_down_active(d)) {
        asr_loop_timer_start(d->loop, &d->state_timer, CHILDREN_MS, children_timeout, d);
        break;
      }
      asrd_up_finish(d);
      if (!d->up.open) set_state(d, ASRD_DONE);
      break;
    case ASRD_DONE: asr_loop_stop(d->loop); break;
    default: assert(!"asrd: unknown state");
  }
}

/* FINISHING: every child's connection and agent ended (or their time is up). */
static void children_ended(asrd_t *d) {
  if (d->state != ASRD_FINISHING) return;
  asr_loop_timer_stop(d->loop, &d->state_timer);
  asrd_up_finish(d);
  if (!d->up.open) set_state(d, ASRD_DONE);
}

static void children_timeout(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  asrd_t *d = t->arg;
  asr_warn("asrd", "children still connected %d s after this daemon finished; closing", CHILDREN_MS / 1000);
  asrd_down_close(d); /* children_ended follows */
  children_ended(d);
}

/* The ranks are gone (or never were): the connection closes cleanly, or
 * there is nothing left to close. */
static void wind_up(asrd_t *d) { set_state(d, d->up.open ? ASRD_FINISHING : ASRD_DONE); }

/* Signals the ranks with sig (SIGTERM, or what was forwarded); SIGKILL
 * follows after the grace time (TERMINATING), unless sig was SIGKILL. */
static void begin_kill(asrd_t *d, int sig) {
  if (sig == SIGKILL) {
    if (d->state != ASRD_KILLED) set_state(d, ASRD_KILLED);
  } else {
    asrd_ranks_signal(d, sig);
    if (d->state != ASRD_TERMINATING && d->state != ASRD_KILLED) set_state(d, ASRD_TERMINATING);
  }
  job_check_done(d); /* nothing alive: at once */
}

/* TERMINATING's deadline moves to KILLED; KILLED's gives up on ranks that
 * still do not die (they die with us: PDEATHSIG). */
static void kill_timer(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  asrd_t *d = t->arg;
  if (d->state == ASRD_TERMINATING) {
    set_state(d, ASRD_KILLED);
    return;
  }
  asr_warn("asrd", "%d rank(s) still alive %d s after SIGKILL; leaving them", d->nalive,
           KILLED_WAIT_MS / 1000);
  wind_up(d);
}

/* A fatal error of the job on this host: asrrun hears why, and the job ends. */
static void job_failed(asrd_t *d, const char *err) {
  char msg[700];
  snprintf(msg, sizeof msg, "asrd on %s: %s", d->hostname, err);
  asrd_up_error(d, msg);
  begin_kill(d, SIGKILL);
}

static void register_timeout(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  asrd_t *d = t->arg;
  job_failed(d, "registering the job with PMIx did not finish within 10 s");
}

static void on_started(asrd_t *d, int ok, const char *err) {
  if (d->state != ASRD_STARTING) return; /* killed meanwhile */
  if (!ok) {
    job_failed(d, err);
    return;
  }
  set_state(d, ASRD_RUNNING);
  job_check_done(d);
}

/* Every rank is done: DONE goes up. With one host nobody needs this daemon
 * any more (its KV server serves only its own ranks): it ends now rather
 * than after asrrun's SHUTDOWN. With several, other hosts' ranks may still
 * read our KV server until asrrun says the whole job is done. */
static void job_check_done(asrd_t *d) {
  if (d->state == ASRD_RUNNING && asrd_ranks_all_done(d) && !asrd_ranks_verdict_owed(d)) {
    if (asrd_trace_finish(d, job_check_done)) return; /* the trace goes up first, then DONE */
    asrd_up_send(d, &(asr_ctl_msg_t){.type = ASR_CTL_DONE});
    if (d->nhosts == 1)
      wind_up(d);
    else
      set_state(d, ASRD_IDLE);
    return;
  }
  if ((d->state == ASRD_TERMINATING || d->state == ASRD_KILLED) && d->nalive == 0) {
    if (d->have_job && asrd_trace_finish(d, job_check_done)) return;
    /* DONE only for a job that ran: every rank reported and drained */
    if (d->have_job && asrd_ranks_all_done(d)) asrd_up_send(d, &(asr_ctl_msg_t){.type = ASR_CTL_DONE});
    wind_up(d);
  }
}

static void on_rank_done(asrd_t *d) { job_check_done(d); }

/* --- what asrrun says ----------------------------------------------------------- */

static void on_job(asrd_t *d, asr_ctl_msg_t *m) {
  char err[512];
  if (d->state != ASRD_WAITING_JOB) {
    job_failed(d, "a second JOB message");
    return;
  }
  int rc = asrd_job_take(d, m, err, sizeof err);
  if (rc == 0) rc = asrd_trace_start(d, err, sizeof err);
  if (rc == 0) {
    set_state(d, ASRD_STARTING);
    rc = asrd_job_start(d, err, sizeof err);
  }
  /* then the tree below: its children start while this host's job does
   * (after the KV server took the bootstrap port from its hold, which a
   * forked agent would hold until its exec) */
  if (rc == 0) rc = asrd_down_start(d, err, sizeof err);
  if (rc) job_failed(d, err);
}

/* asrrun's RANK_STATE (--on-failure continue|restart): every local rank
 * hears it; a local rank's verdict may start it again. */
static void on_rank_state(asrd_t *d, asr_ctl_msg_t *m) {
  /* (IDLE: every local rank ended, and this daemon may still relay fences
   * for the hosts below it) */
  if (!d->have_job || (d->state != ASRD_RUNNING && d->state != ASRD_IDLE)) return;
  asrd_down_rank_state(d, (int)m->u.rank_state.rank, (int)m->u.rank_state.state);
  if (d->state != ASRD_RUNNING) return; /* no local rank to tell or to start again */
  asrd_pmix_notify_rank(d, m);
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    if (r->rank != (int)m->u.rank_state.rank) continue;
    uint32_t state = m->u.rank_state.state;
    if (d->kv && (state == ASR_CTL_RANK_FAILED || state == ASR_CTL_RANK_RESTARTING)) {
      /* the handles receivers published for its dead incarnation's SEND
       * comms must not reach its next (issue 50, point 4) */
      int n = asr_kv_server_del_sender(d->kv, (uint32_t)r->lnc, d->hostname);
      asr_debug("asrd", "rank %d (LNC %d) died: %d rendezvous key%s of its removed", r->rank, r->lnc, n,
                n == 1 ? "" : "s");
    }
    char err[512];
    if (asrd_ranks_verdict(d, r, m->u.rank_state.state, m->u.rank_state.incarnation, err, sizeof err) != 0) {
      char line[700];
      int n = snprintf(line, sizeof line, "asrrun: cannot start rank %d again on host %s: %s", r->rank,
                       d->hostname, err);
      asrd_up_output(d, r->rank, 2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
      /* its end stands: asrrun hears it again, as a failure to run */
      asr_ctl_msg_t x = {
          .type = ASR_CTL_EXIT,
          .u.exit = {.rank = (uint32_t)r->rank, .status = W_EXITCODE(127, 0), .flags = ASR_CTL_EXIT_NOT_RUN}};
      asrd_up_send(d, &x);
    }
  }
  job_check_done(d);
}

/* The signals asrrun sends to end the job (the others it forwards, e.g.
 * SIGUSR1, SIGSTOP/SIGCONT, leave the job running). */
static int ends_job(int sig) {
  return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT || sig == SIGKILL;
}

static void on_up_msg(asrd_t *d, asr_ctl_msg_t *m) {
  switch (m->type) {
    case ASR_CTL_JOB: on_job(d, m); break;
    case ASR_CTL_KILL:
      if (d->state >= ASRD_FINISHING) break;
      if (ends_job((int)m->u.kill.sig))
        begin_kill(d, (int)m->u.kill.sig);
      else
        asrd_ranks_forward(d, (int)m->u.kill.sig); /* the job goes on */
      break;
    case ASR_CTL_STDIN: asrd_stdio_input(d, m->u.input.data, m->u.input.len); break;
    case ASR_CTL_CREDIT: asrd_stdio_credit(d, m->u.credit.bytes); break;
    case ASR_CTL_OUTPUT_CLOSED: asrd_stdio_reader_gone(d, (int)m->u.closed.stream); break;
    case ASR_CTL_FENCE_DONE:
      asrd_down_fence_done(d, m); /* once per subtree: each child passes it on */
      /* (a host with no rank alive took no part: issue 50's policy) */
      if (d->up.fences ||
          (d->nlocal > 0 && (!d->down.node.live || d->host_index < 0 || d->down.node.live[d->host_index])))
        asrd_up_fence_done(d, m->u.fence.data, m->u.fence.len);
      break;
    case ASR_CTL_ROUTED: asrd_down_route(d, m); break;
    case ASR_CTL_ENDS_ASK: asrd_ends_ask(d, m->u.ends.id); break;
    case ASR_CTL_RANK_STATE: on_rank_state(d, m); break;
    case ASR_CTL_CLOCK: asrd_trace_on_clock(d, m); break;
    case ASR_CTL_REPORT_REQ:
      asrd_report_ask(d, m->u.report_req.id, m->u.report_req.timeout_ms, m->u.report_req.flags);
      break;
    case ASR_CTL_METRICS_REQ: asrd_metrics_ask(d, m->u.metrics_req.id, m->u.metrics_req.timeout_ms); break;
    case ASR_CTL_SHUTDOWN:
      if (d->state < ASRD_TERMINATING && d->nalive > 0)
        begin_kill(d, SIGTERM);
      else if (d->state < ASRD_FINISHING)
        wind_up(d);
      break;
    default: asr_warn("asrd", "unexpected control message %s; ignored", asr_ctl_type_name(m->type));
  }
}

static void on_up_ready(asrd_t *d) {
  set_state(d, ASRD_WAITING_JOB);
  /* Knowing the bootstrap port (--port), the PMIx server starts now, while
   * the JOB is on its way, with the generic topology (see asrd_pmix_init);
   * meanwhile the port is held so that its listener cannot take it. A
   * failure is reported once the JOB comes. */
  if (d->port_hold >= 0) {
    char err[512];
    if (asrd_pmix_init(d, asrd_topo_generic(), err, sizeof err) != 0)
      snprintf(d->pmix.err, sizeof d->pmix.err, "%s", err);
  }
}

/* asrrun is gone (or silent): the job is over here; no rank is left behind. */
static void on_up_lost(asrd_t *d, const char *why, int quiet) {
  if (d->state == ASRD_FINISHING) { /* the end we asked for */
    /* a parent that closed first (asrrun, after its SHUTDOWN) does not
     * cut short the wait for the children: children_ended ends it */
    if (!asrd_down_active(d)) set_state(d, ASRD_DONE);
    return;
  }
  /* A daemon started ahead of the job that asrrun dismissed ends quietly. */
  int ahead = d->host_index < 0;
  if (d->state == ASRD_CONNECTING && !ahead)
    fprintf(stderr, "asrd: %s\n", why);
  else if (!quiet && !ahead && d->state != ASRD_IDLE)
    asr_error("asrd", "%s; killing this host's ranks", why);
  d->exit_code = 1;
  if (d->state == ASRD_DONE) return;
  asrd_down_close(d); /* the children lose us at once and end as we do */
  begin_kill(d, SIGTERM);
}

/* SIGTERM, SIGINT, SIGHUP: the job is over here (a hang-up ends it with SIGTERM). */
static void on_signal(asr_loop_t *loop, asr_loop_signal_t *s, int signo, pid_t from) {
  (void)loop, (void)from;
  asrd_t *d = s->arg;
  if (d->state >= ASRD_FINISHING) return;
  begin_kill(d, signo == SIGHUP ? SIGTERM : signo);
}

/* --- start-up ------------------------------------------------------------------- */

/* A socket bound to the bootstrap port on every address (not listening):
 * while it exists no ephemeral port can be that one. Returns it, or a
 * negative ASR_E* when it cannot be bound (then the KV server's bind
 * reports why). */
static int hold_bootstrap_port(const char *ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return asr_err_from_errno(errno);
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_ANY)};
  if (ip[0] && asr_sock_parse_ipv4(ip, (uint16_t)port, &a) != 0) {
    close(fd);
    return ASR_EINVAL;
  }
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    int e = errno;
    close(fd);
    return asr_err_from_errno(e);
  }
  return fd;
}

static int read_secret(asrd_t *d) {
  char line[256];
  if (!fgets(line, sizeof line, stdin)) return ASR_EINVAL;
  line[strcspn(line, "\r\n")] = '\0';
  const char *pfx = "ASR_JOB_SECRET=";
  if (strncmp(line, pfx, strlen(pfx)) != 0) return ASR_EINVAL;
  if (asr_kv_secret_from_hex(line + strlen(pfx), d->secret) != 0) return ASR_EINVAL;
  asr_kv_secret_to_hex(d->secret, d->secret_hex);
  return 0;
}

static int usage(const char *bad) {
  fprintf(stderr,
          "asrd: unknown argument '%s'\nasrd is started by asrrun: asrd --ctl HOST:PORT [--index I] "
          "[--hostname NAME] [--port P] [--addr IP], with the job secret on stdin\n",
          bad);
  return 2;
}

int main(int argc, char **argv) {
  asrd_t *d = &D;
  const char *ctl = NULL, *host = NULL;
  int hold_port = 0;
  d->host_index = -1;
  d->port_hold = -1;
  d->up.connect_fd = -1;
  d->up.conn.fd = -1;
  d->down.lfd = -1;
  d->down.parent = -1;
  d->up.heartbeat_timeout_ms = 10000; /* until the JOB says */
  d->out.credit = ASR_CTL_OUTPUT_WINDOW;
  pthread_mutex_init(&d->pmix.ev_lock, NULL);
  for (int i = 1; i < argc; i++) {
    char *end = NULL;
    long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
    int num = end && *end == '\0' && argv[i + 1][0];
    if (!strcmp(argv[i], "--ctl") && i + 1 < argc)
      ctl = argv[++i];
    else if (!strcmp(argv[i], "--index") && num && v >= 0 && v < (long)ASR_CTL_MAX_HOSTS)
      d->host_index = (int)v, i++;
    else if (!strcmp(argv[i], "--hostname") && i + 1 < argc && strlen(argv[i + 1]) < sizeof d->hostname)
      host = argv[++i];
    else if (!strcmp(argv[i], "--port") && num && v > 0 && v < 65536)
      hold_port = (int)v, i++;
    else if (!strcmp(argv[i], "--addr") && i + 1 < argc && strlen(argv[i + 1]) < sizeof d->bind_addr)
      snprintf(d->bind_addr, sizeof d->bind_addr, "%s", argv[++i]);
    else if (!strcmp(argv[i], "--version")) {
      printf("asrd (asr) %s\n", PACKAGE_VERSION);
      return 0;
    } else
      return usage(argv[i]);
  }
  if (!ctl) {
    fprintf(stderr, "asrd: needs --ctl HOST:PORT (asrd is started by asrrun)\n");
    return 2;
  }
  /* Without --index asrd was started ahead of the job (asrrun's early local
   * daemon) and learns its host index from the JOB; until then asrrun may
   * dismiss it by closing its listener, so failing to reach it is no error
   * to report. */
  int ahead = d->host_index < 0;
  asr_log_set_role("asrd", d->host_index);
  signal(SIGPIPE, SIG_IGN);
  /* asrd runs in a process group of its own (asrrun starts it so): the
   * terminal's signals are asrrun's to handle, and a write to the terminal
   * from this background group must not stop it (stty tostop). */
  signal(SIGTTOU, SIG_IGN);
  signal(SIGTTIN, SIG_IGN);
  signal(SIGTSTP, SIG_IGN);
  /* PMIx's hwloc would otherwise probe for X11 displays and GPUs at every
   * start. Not when a synthetic or XML topology is asked for (the tests' NUMA
   * and package cases, bind.h): hwloc ignores HWLOC_SYNTHETIC and
   * HWLOC_XMLFILE once HWLOC_COMPONENTS is set, and asrd would then bind on
   * another topology than asrrun's --dry-run showed. */
  if (!getenv("HWLOC_SYNTHETIC") && !getenv("HWLOC_XMLFILE")) setenv("HWLOC_COMPONENTS", "-gl,-opencl", 0);
  if (host)
    snprintf(d->hostname, sizeof d->hostname, "%s", host);
  else
    gethostname(d->hostname, sizeof d->hostname - 1);
  if (read_secret(d) != 0) {
    fprintf(stderr, "asrd: expected 'ASR_JOB_SECRET=<64 hex digits>' on stdin\n");
    return 2;
  }
  /* The shm watcher is forked here, while asrd is one thread with only its
   * stdio open: it must hold no socket of asrd's (the bootstrap port, the
   * control connection) after asrd's death (asrd_shm.h). */
  int wrc = asrd_shm_watch_start();
  if (wrc)
    asr_warn("asrd", "no shm watcher (%s): if asrd is killed, its ranks' shm regions stay in /dev/shm",
             asr_strerror(wrc));
  /* libpmix's own lines are asrd's log, never the job's output (asrd_pmix_log.h);
   * still one thread here, as its setenv needs */
  wrc = asrd_pmix_log_open();
  if (wrc) asr_warn("pmix", "libpmix's own lines go to stderr: %s", asr_strerror(wrc));
  char err[512];
  int rc = asr_loop_new(&d->loop);
  if (rc) {
    fprintf(stderr, "asrd: cannot make an event loop: %s\n", asr_strerror(rc));
    return 1;
  }
  /* Signals arrive through the loop: blocked before any thread starts, so
   * every thread inherits the mask. */
  asr_loop_signal_start(d->loop, &d->sig_term, SIGTERM, on_signal, d);
  asr_loop_signal_start(d->loop, &d->sig_int, SIGINT, on_signal, d);
  asr_loop_signal_start(d->loop, &d->sig_hup, SIGHUP, on_signal, d);
  d->cb.on_up_msg = on_up_msg;
  d->cb.on_up_ready = on_up_ready;
  d->cb.on_up_lost = on_up_lost;
  d->cb.on_started = on_started;
  d->cb.on_rank_done = on_rank_done;
  d->cb.on_down_idle = children_ended;
  /* The hwloc topology (for binding) loads on its own thread while this
   * one calls asrrun back and starts the PMIx server; hwloc's one-time
   * set-up happens here, with the generic topology that server is lent. */
  if (hold_port > 0) {
    asrd_topo_generic();
    d->port_hold = hold_bootstrap_port(d->bind_addr, hold_port);
    if (d->port_hold < 0) d->port_hold = -1; /* not held: the KV server's bind says why */
  }
  asrd_topo_start();
  rc = asrd_up_connect(d, ctl, err, sizeof err);
  if (rc == 0) {
    set_state(d, ASRD_CONNECTING);
    rc = asr_loop_run(d->loop);
    if (rc) asr_error("asrd", "event loop failed: %s", asr_strerror(rc));
  } else if (!ahead) {
    fprintf(stderr, "asrd: %s\n", err);
  }
  if (rc) d->exit_code = 1;
  /* Whatever is still alive dies now: by here every rank was signalled or
   * is done. */
  asrd_ranks_signal(d, SIGKILL);
  asrd_topo(); /* joins the loading thread if no JOB came */
  asrd_down_stop(d);
  asrd_job_stop(d);
  asrd_up_close(d);
  asr_loop_timer_stop(d->loop, &d->trace.timer);
  asrd_trace_cleanup(d);
  asr_loop_signal_stop(d->loop, &d->sig_hup);
  asr_loop_signal_stop(d->loop, &d->sig_int);
  asr_loop_signal_stop(d->loop, &d->sig_term);
  asr_loop_timer_stop(d->loop, &d->state_timer);
  asr_loop_free(d->loop);
  return d->exit_code;
}
