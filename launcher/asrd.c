/*
 * asrd.c -- the host daemon: main, event loop and control channel (asrd.h).
 *
 *   asrd --ctl HOST:PORT [--index I] [--hostname NAME] [--port P]
 *
 * The job secret arrives on stdin as one line "ASR_JOB_SECRET=<64 hex>", never
 * on the command line (which every user can read in /proc). asrd connects to
 * asrrun and says HELLO while a thread loads the hwloc topology, and starts
 * its PMIx server while the JOB is on its way (holding the bootstrap port,
 * --port, meanwhile). It receives the JOB (which also tells a daemon started
 * without --index, ahead of the job, its host index), starts the host's KV
 * server on the bootstrap port with "hostname" seeded, registers the job
 * with PMIx, starts the ranks, and then relays output, exits, fences and
 * aborts until asrrun says SHUTDOWN or goes away (then it kills its ranks
 * and exits) -- or, in a one-host job, until its ranks are done.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_netif.h"
#include "asr_sock.h"
#include "asr_time.h"
#include "asrd.h"
#include "kv_keys.h"
#include "kv_secret.h"

#define GRACE_MS 3000

static asrd_t D;
static int shutting_down;
static uint64_t kill_deadline; /* SIGKILL the ranks after this (0 = none) */
static int ctl_watch_out;      /* the control fd is watched for EPOLLOUT too */

void asrd_watch(asrd_t *d, int fd, uint32_t events) {
  struct epoll_event ev = {.events = events, .data.fd = fd};
  if (epoll_ctl(d->epfd, EPOLL_CTL_MOD, fd, &ev) != 0) epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void asrd_watch_new(asrd_t *d, int fd, uint32_t events) {
  struct epoll_event ev = {.events = events, .data.fd = fd};
  epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void asrd_unwatch(asrd_t *d, int fd) { epoll_ctl(d->epfd, EPOLL_CTL_DEL, fd, NULL); }

void asrd_send_output(asrd_t *d, int rank, int stream, const char *line, size_t len) {
  asr_buf_t b = {0};
  asr_buf_put_u32(&b, (uint32_t)rank);
  asr_buf_put_u32(&b, (uint32_t)stream);
  asr_buf_put_bytes(&b, line, len);
  asr_ctl_queue(&d->ctl, ASR_CTL_OUTPUT, &b); /* the main loop flushes */
  asr_buf_free(&b);
}

static void send_error(asrd_t *d, const char *msg) {
  asr_buf_t b = {0};
  asr_buf_put_str(&b, msg);
  asr_ctl_send_sync(&d->ctl, ASR_CTL_ERROR, &b, 2000);
  asr_buf_free(&b);
}

/* JOB payload (asrrun.c writes it in the same order):
 *   u32 nranks, u32 nhosts, u32 this daemon's host index,
 *   nhosts x str host name, nranks x (u32 host, u32 lnc),
 *   str program, u32 nargs, nargs x str, u32 nenv, nenv x (str name, str value),
 *   u32 bind_to, u32 report_bindings, u32 bootstrap port, str provider,
 *   str nspace, str if_spec (--if-include, resolved here; "" = the address
 *   asrrun is reached from), u32 heartbeat timeout in seconds. */
static int parse_job(asrd_t *d, const uint8_t *p, size_t len, char *err, size_t errlen) {
  asr_rd_t r;
  asr_rd_init(&r, p, len);
  d->nranks = (int)asr_rd_u32(&r);
  d->nhosts = (int)asr_rd_u32(&r);
  uint32_t index = asr_rd_u32(&r);
  if (r.bad || d->nranks <= 0 || d->nhosts <= 0 || d->nranks > 1 << 20 || d->nhosts > 1 << 16 ||
      index >= (uint32_t)d->nhosts || (d->host_index >= 0 && (uint32_t)d->host_index != index)) {
    snprintf(err, errlen, "malformed JOB message (sizes)");
    return -1;
  }
  if (d->host_index < 0) {
    d->host_index = (int)index; /* started ahead of the job (no --index) */
    asr_log_set_role("asrd", d->host_index);
  }
  d->host_names = calloc((size_t)d->nhosts, sizeof *d->host_names);
  for (int h = 0; h < d->nhosts; h++) d->host_names[h] = asr_rd_str(&r);
  d->host_of_rank = calloc((size_t)d->nranks, sizeof(int));
  d->lnc_of_rank = calloc((size_t)d->nranks, sizeof(int));
  /* d->nlocal is set only with d->ranks below: a JOB rejected in between
   * must leave no local ranks for the error path to signal. */
  int nlocal = 0;
  for (int i = 0; i < d->nranks; i++) {
    d->host_of_rank[i] = (int)asr_rd_u32(&r);
    d->lnc_of_rank[i] = (int)asr_rd_u32(&r);
    if (d->host_of_rank[i] == d->host_index) nlocal++;
  }
  d->program = asr_rd_str(&r);
  d->nargs = (int)asr_rd_u32(&r);
  if (r.bad || d->nargs < 0 || d->nargs > 65536) goto bad;
  d->args = calloc((size_t)d->nargs + 1, sizeof *d->args);
  for (int i = 0; i < d->nargs; i++) d->args[i] = asr_rd_str(&r);
  d->nenv = (int)asr_rd_u32(&r);
  if (r.bad || d->nenv < 0 || d->nenv > 65536) goto bad;
  d->env_names = calloc((size_t)d->nenv + 1, sizeof(char *));
  d->env_values = calloc((size_t)d->nenv + 1, sizeof(char *));
  for (int i = 0; i < d->nenv; i++) {
    d->env_names[i] = asr_rd_str(&r);
    d->env_values[i] = asr_rd_str(&r);
  }
  d->bind_to = (int)asr_rd_u32(&r);
  d->report_bindings = (int)asr_rd_u32(&r);
  d->port = (int)asr_rd_u32(&r);
  d->provider = asr_rd_str(&r);
  d->nspace = asr_rd_str(&r);
  d->if_addr = asr_rd_str(&r);
  uint32_t hb = asr_rd_u32(&r);
  if (r.bad || !d->program || d->port <= 0 || d->port > 65535 || hb < 1 || hb > 3600) goto bad;
  d->heartbeat_timeout_ms = (uint64_t)hb * 1000;
  if (d->pmix_up && strcmp(d->hostname, d->host_names[d->host_index]) != 0) {
    /* its PMIx server already serves the name it was started with */
    snprintf(err, errlen, "started for host '%s' but got the job of host '%s'", d->hostname,
             d->host_names[d->host_index]);
    return -1;
  }
  snprintf(d->hostname, sizeof d->hostname, "%s", d->host_names[d->host_index]);
  if (d->if_addr[0]) {
    char ip[ASR_NETIF_ADDRLEN], why[400];
    if (asr_netif_resolve(d->if_addr, ip, why, sizeof why) != 0) {
      snprintf(err, errlen, "--if-include: %s", why);
      return -1;
    }
    free(d->if_addr);
    d->if_addr = strdup(ip);
  } else {
    /* The address this host reaches asrrun from is one its peers can reach. */
    struct sockaddr_in me;
    socklen_t sl = sizeof me;
    char ip[64];
    if (getsockname(d->ctl.fd, (struct sockaddr *)&me, &sl) == 0 &&
        inet_ntop(AF_INET, &me.sin_addr, ip, sizeof ip)) {
      free(d->if_addr);
      d->if_addr = strdup(ip);
    }
  }
  asr_log_set_host(d->hostname);
  d->ranks = calloc((size_t)(nlocal ? nlocal : 1), sizeof *d->ranks);
  if (!d->ranks) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  d->nlocal = nlocal;
  int k = 0;
  for (int i = 0; i < d->nranks; i++)
    if (d->host_of_rank[i] == d->host_index) {
      d->ranks[k].rank = i;
      d->ranks[k].lnc = d->lnc_of_rank[i];
      d->ranks[k].local = k;
      k++;
    }
  return 0;
bad:
  snprintf(err, errlen, "malformed JOB message");
  return -1;
}

/* A socket bound to the bootstrap port on every address (not listening):
 * while it exists no ephemeral port can be that one. -1 if it cannot be
 * bound (then the KV server's bind reports why). */
static int hold_bootstrap_port(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_ANY)};
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Runs the job: KV server, PMIx server, ranks. */
static int start_job(asrd_t *d, char *err, size_t errlen) {
  if (d->pmix_err[0]) { /* the PMIx server started before the JOB failed */
    snprintf(err, errlen, "%s", d->pmix_err);
    return -1;
  }
  /* A one-host job keeps its KV traffic on loopback; otherwise peers on other
   * hosts must reach this server. The PMIx server's listener takes an
   * ephemeral port, which could be the bootstrap port (asrrun only found it
   * free; it does not hold it): so the PMIx server starts either while asrd
   * holds that port (--port, before the JOB) or after the KV server has
   * bound it (here). */
  if (d->port_hold >= 0) close(d->port_hold);
  d->port_hold = -1;
  if (asr_loop_new(&d->kvloop) != 0) {
    snprintf(err, errlen, "cannot make the KV server's event loop");
    return -1;
  }
  asr_kv_server_opts_t o = {.loop = d->kvloop,
                            .bind_ip = d->nhosts == 1 ? "127.0.0.1" : NULL,
                            .port = (uint16_t)d->port,
                            .secret = d->secret};
  if (asr_kv_server_new(&o, &d->kv, err, errlen) != 0) return -1;
  uint8_t val[ASR_KV_HOSTNAME_LEN] = {0};
  memcpy(val, d->hostname, strnlen(d->hostname, ASR_KV_HOSTNAME_LEN - 1));
  /* "hostname" is in the store before any rank exists. */
  asr_kv_server_put(d->kv, ASR_KV_HOSTNAME_KEY, ASR_KV_HOSTNAME_KEY_LEN, val, sizeof val, ASR_KV_VTYPE_TEXT);
  asrd_watch(d, asr_loop_backend_fd(d->kvloop), EPOLLIN);
  if (!d->pmix_up && asrd_pmix_init(d, asrd_ranks_topology(), err, errlen) != 0) return -1;
  /* PMIx registers the job on its own thread while this one waits for the
   * topology and prepares the ranks; they start once both are done. */
  if (asrd_pmix_register_start(d, err, errlen) != 0) return -1;
  asrd_ranks_topology();
  if (asrd_ranks_prepare(d, err, errlen) != 0) return -1;
  if (asrd_pmix_register_wait(d, err, errlen) != 0) return -1;
  if (asrd_ranks_start(d, err, errlen) != 0) return -1;
  d->started = 1;
  /* The ranks' process groups: if this daemon is SIGKILLed, asrrun (when it
   * runs on this host) kills them, so the ranks' own children die too. */
  asr_buf_t b = {0};
  asr_buf_put_u32(&b, (uint32_t)d->nlocal);
  for (int i = 0; i < d->nlocal; i++) asr_buf_put_u32(&b, (uint32_t)d->ranks[i].pid);
  asr_ctl_queue(&d->ctl, ASR_CTL_STARTED, &b);
  asr_buf_free(&b);
  return 0;
}

/* Before the control connection is closed: waits (until `until`) for the
 * kernel to have delivered what was written to it, then reads what asrrun
 * sent meanwhile. Closing a TCP socket with input unread resets the
 * connection, and the reset throws away what asrrun had not acknowledged
 * yet: the last output lines and DONE, when asrrun was busy writing 8000
 * lines of output (test_asrrun tagged_output_whole_and_ordered: "lost the
 * connection to asrd ... before the job finished", now and then). */
static void ctl_settle(asrd_t *d, uint64_t until) {
  if (d->ctl.fd < 0) return;
  for (;;) {
    int queued = 0;
    if (ioctl(d->ctl.fd, SIOCOUTQ, &queued) != 0 || queued <= 0 || asr_time_ms() >= until) break;
    poll(NULL, 0, 1);
  }
  char buf[4096];
  while (recv(d->ctl.fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
}

static void begin_kill(asrd_t *d, int sig) {
  asrd_ranks_signal(d, sig);
  if (sig != SIGKILL && !kill_deadline) kill_deadline = asr_time_ms() + GRACE_MS;
}

static void on_ctl(void *arg, asr_ctl_conn_t *c, int type, const uint8_t *p, size_t len) {
  asrd_t *d = arg;
  (void)c;
  asr_rd_t r;
  asr_rd_init(&r, p, len);
  switch (type) {
    case ASR_CTL_JOB: {
      char err[512];
      if (d->started || parse_job(d, p, len, err, sizeof err) != 0 || start_job(d, err, sizeof err) != 0) {
        if (d->started) snprintf(err, sizeof err, "a second JOB message");
        char msg[700];
        snprintf(msg, sizeof msg, "asrd on %s: %s", d->hostname, err);
        send_error(d, msg);
        asrd_ranks_signal(d, SIGKILL);
        shutting_down = 1;
      }
      break;
    }
    case ASR_CTL_KILL: {
      int sig = (int)asr_rd_u32(&r);
      if (r.bad || sig <= 0 || sig >= 65) sig = SIGTERM;
      begin_kill(d, sig);
      break;
    }
    case ASR_CTL_STDIN: {
      size_t n;
      const uint8_t *b = asr_rd_bytes(&r, &n);
      if (b) asrd_ranks_stdin(d, b, n);
      break;
    }
    case ASR_CTL_FENCE_DONE: {
      size_t n;
      (void)asr_rd_u32(&r);
      const uint8_t *b = asr_rd_bytes(&r, &n);
      if (!r.bad) asrd_pmix_fence_done(d, b, n);
      break;
    }
    case ASR_CTL_SHUTDOWN: shutting_down = 1; break;
    case ASR_CTL_HEARTBEAT: break;
    default: asr_warn("asrd", "unexpected control message %s; ignored", asr_ctl_type_name(type));
  }
}

static int connect_ctl(asrd_t *d, const char *hostport, char *err, size_t errlen) {
  char ip[64];
  const char *colon = strrchr(hostport, ':');
  if (!colon || (size_t)(colon - hostport) >= sizeof ip) {
    snprintf(err, errlen, "--ctl wants HOST:PORT, not '%s'", hostport);
    return -1;
  }
  memcpy(ip, hostport, (size_t)(colon - hostport));
  ip[colon - hostport] = '\0';
  struct sockaddr_in a;
  if (asr_sock_parse_ipv4(ip, (uint16_t)atoi(colon + 1), &a) != 0) {
    snprintf(err, errlen, "--ctl: '%s' is not an IPv4 address and port", hostport);
    return -1;
  }
  int inprog;
  int fd = asr_sock_connect_start(&a, &inprog);
  if (fd >= 0 && inprog) {
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    int rc = poll(&pf, 1, 10000) > 0 ? asr_sock_connect_result(fd) : ASR_ETIMEDOUT;
    if (rc) {
      close(fd);
      fd = rc;
    }
  }
  if (fd < 0) {
    snprintf(err, errlen, "cannot reach asrrun at %s: %s", hostport, asr_strerror(fd));
    return -1;
  }
  d->ctl.fd = fd;
  return 0;
}

static int read_secret(asrd_t *d) {
  char line[256];
  if (!fgets(line, sizeof line, stdin)) return -1;
  line[strcspn(line, "\r\n")] = '\0';
  const char *pfx = "ASR_JOB_SECRET=";
  if (strncmp(line, pfx, strlen(pfx)) != 0) return -1;
  if (asr_kv_secret_from_hex(line + strlen(pfx), d->secret) != 0) return -1;
  asr_kv_secret_to_hex(d->secret, d->secret_hex);
  return 0;
}

int main(int argc, char **argv) {
  asrd_t *d = &D;
  const char *ctl = NULL, *host = NULL;
  int hold_port = 0;
  d->host_index = -1;
  d->port_hold = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ctl") && i + 1 < argc)
      ctl = argv[++i];
    else if (!strcmp(argv[i], "--index") && i + 1 < argc && atoi(argv[i + 1]) >= 0)
      d->host_index = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--hostname") && i + 1 < argc)
      host = argv[++i];
    else if (!strcmp(argv[i], "--port") && i + 1 < argc && atoi(argv[i + 1]) > 0 && atoi(argv[i + 1]) < 65536)
      hold_port = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--version")) {
      printf("asrd (asr) %s\n", PACKAGE_VERSION);
      return 0;
    } else {
      fprintf(stderr,
              "asrd: unknown argument '%s'\nasrd is started by asrrun: asrd --ctl HOST:PORT [--index I] "
              "[--hostname NAME] [--port P], with the job secret on stdin\n",
              argv[i]);
      return 2;
    }
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
  /* Signals arrive through the signalfd only: blocked before any thread
   * starts, so every thread inherits the mask. */
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  signal(SIGPIPE, SIG_IGN);
  /* PMIx's hwloc would otherwise probe for X11 displays and GPUs at every start. */
  setenv("HWLOC_COMPONENTS", "-gl,-opencl", 0);
  if (host)
    snprintf(d->hostname, sizeof d->hostname, "%s", host);
  else
    gethostname(d->hostname, sizeof d->hostname - 1);
  if (read_secret(d) != 0) {
    fprintf(stderr, "asrd: expected 'ASR_JOB_SECRET=<64 hex digits>' on stdin\n");
    return 2;
  }
  /* The hwloc topology (for binding) loads on its own thread while this
   * one calls asrrun back and starts the PMIx server; hwloc's one-time
   * set-up happens here, with the generic topology that server is lent. */
  if (hold_port > 0) asrd_ranks_generic_topology();
  asrd_ranks_topology_start();
  char err[512];
  if (connect_ctl(d, ctl, err, sizeof err) != 0) {
    if (!ahead) fprintf(stderr, "asrd: %s\n", err);
    asrd_ranks_topology(); /* joins the loading thread */
    return 1;
  }
  d->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  d->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  d->epfd = epoll_create1(EPOLL_CLOEXEC);
  asrd_watch(d, d->ctl.fd, EPOLLIN);
  asrd_watch(d, d->sigfd, EPOLLIN);
  asrd_watch(d, d->evfd, EPOLLIN);

  asr_buf_t hello = {0};
  asr_buf_put_u32(&hello, ahead ? ASR_CTL_INDEX_AHEAD : (uint32_t)d->host_index);
  asr_buf_put_str(&hello, d->hostname);
  asr_buf_put_u32(&hello, (uint32_t)getpid());
  asr_buf_put_str(&hello, d->secret_hex); /* proves we were started by this asrrun */
  asr_ctl_send(&d->ctl, ASR_CTL_HELLO, &hello);
  asr_buf_free(&hello);
  /* Knowing the bootstrap port (--port), the PMIx server starts now, while
   * the JOB is on its way, with the generic topology (see asrd_pmix_init);
   * meanwhile the port is held so that its listener cannot take it. A
   * failure is reported once the JOB comes. */
  if (hold_port > 0) {
    d->port_hold = hold_bootstrap_port(hold_port);
    if (asrd_pmix_init(d, asrd_ranks_generic_topology(), err, sizeof err) != 0)
      snprintf(d->pmix_err, sizeof d->pmix_err, "%s", err);
  }

  int lost = 0;
  d->heartbeat_timeout_ms = 10000; /* until the JOB says */
  uint64_t last_rx = asr_time_ms(), next_heartbeat = last_rx + 1000;
  while (!shutting_down || d->nalive > 0) {
    struct epoll_event evs[64];
    int tmo = 200;
    int n = epoll_wait(d->epfd, evs, 64, tmo);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == d->ctl.fd) {
        if (evs[i].events & EPOLLOUT) asr_ctl_flush(&d->ctl);
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
          last_rx = asr_time_ms(); /* any bytes from asrrun prove it is there */
          int rc = asr_ctl_read(&d->ctl, on_ctl, d);
          if (rc && !lost) {
            /* asrrun is gone: the job is over; do not leave ranks behind. */
            lost = 1;
            shutting_down = 1;
            asrd_unwatch(d, d->ctl.fd);
            begin_kill(d, SIGTERM);
          }
        }
      } else if (fd == d->sigfd) {
        struct signalfd_siginfo si;
        while (read(d->sigfd, &si, sizeof si) == sizeof si) {
          if (si.ssi_signo == SIGCHLD)
            asrd_ranks_reap(d);
          else {
            shutting_down = 1;
            begin_kill(d, (int)si.ssi_signo == SIGHUP ? SIGTERM : (int)si.ssi_signo);
          }
        }
      } else if (fd == d->evfd) {
        asrd_pmix_handle_events(d);
      } else if (d->kv && fd == asr_loop_backend_fd(d->kvloop)) {
        asr_loop_run_once(d->kvloop, 0);
      } else {
        asrd_ranks_on_fd(d, fd, evs[i].events);
      }
    }
    uint64_t now = asr_time_ms();
    if (!lost && now >= next_heartbeat) {
      next_heartbeat = now + 1000;
      asr_ctl_send(&d->ctl, ASR_CTL_HEARTBEAT, NULL);
      /* half as long again as asrrun waits: when the network is cut, asrrun
       * (which can tell the user) names the lost host first */
      if (now - last_rx > d->heartbeat_timeout_ms * 3 / 2) {
        /* asrrun's host is cut off or frozen: end the job here too */
        asr_error("asrd", "nothing heard from asrrun for %llu s; killing this host's ranks",
                  (unsigned long long)(d->heartbeat_timeout_ms * 3 / 2000));
        lost = 1;
        shutting_down = 1;
        asrd_unwatch(d, d->ctl.fd);
        begin_kill(d, SIGTERM);
      }
    }
    if (kill_deadline && asr_time_ms() >= kill_deadline) {
      asrd_ranks_signal(d, SIGKILL);
      kill_deadline = 0;
    }
    if (d->kv) asr_loop_run_once(d->kvloop, 0); /* expire stalled KV clients */
    if (d->started && !d->done_sent && asrd_ranks_all_done(d)) {
      asr_ctl_queue(&d->ctl, ASR_CTL_DONE, NULL);
      d->done_sent = 1;
      /* With one host nobody needs this daemon any more (its KV server
       * serves only its own ranks): exit now rather than after asrrun's
       * SHUTDOWN. With several, other hosts' ranks may still read our KV
       * server until asrrun says the whole job is done. */
      if (d->nhosts == 1) shutting_down = 1;
    }
    /* What this round queued for asrrun (output lines, exits, DONE) leaves
     * in one write; EPOLLOUT is watched only while the socket is full. */
    if (!lost) {
      if (d->ctl.out.len > d->ctl.out.off) asr_ctl_flush(&d->ctl);
      int want_out = d->ctl.out.len > d->ctl.out.off;
      if (want_out != ctl_watch_out) {
        asrd_watch(d, d->ctl.fd, EPOLLIN | (want_out ? EPOLLOUT : 0));
        ctl_watch_out = want_out;
      }
    }
    if (lost && d->nalive == 0) break;
  }
  asrd_ranks_signal(d, SIGKILL);
  while (d->nalive > 0 && waitpid(-1, NULL, 0) > 0) d->nalive--;
  /* Deliver what is still queued for asrrun (last output lines, DONE). */
  uint64_t until = asr_time_ms() + 2000;
  while (!lost && d->ctl.out.len > d->ctl.out.off && asr_time_ms() < until) {
    struct pollfd pf = {.fd = d->ctl.fd, .events = POLLOUT};
    poll(&pf, 1, 100);
    if (asr_ctl_flush(&d->ctl)) break;
  }
  if (!lost) ctl_settle(d, until);
  asrd_ranks_topology(); /* joins the loading thread if no JOB came */
  if (d->port_hold >= 0) close(d->port_hold);
  asrd_pmix_stop(d);
  if (d->kv) asr_kv_server_free(d->kv);
  if (d->kvloop) asr_loop_free(d->kvloop);
  asr_ctl_close(&d->ctl);
  return lost ? 1 : 0;
}
