/*
 * asrd_up.c -- the control connection up to asrrun (asrd.h): the
 * non-blocking connect, HELLO, heartbeats both ways, sending.
 *
 * What asrrun says goes to d->cb.on_up_msg; the connection's end to
 * d->cb.on_up_lost. Heartbeats go up every second, so that asrrun can judge
 * this host. asrrun is never judged by its silence: it may be stopped
 * (Ctrl-Z, SIGSTOP) or busy, and still be there. It is lost on EOF, a reset,
 * or when its kernel stops answering: TCP keepalive probes on an idle
 * connection, and a bound on unacknowledged data otherwise (TCP_USER_TIMEOUT),
 * both about 3/2 of the heartbeat timeout, so that when the network is cut,
 * asrrun, which can tell the user, names the lost host first. A stopped
 * asrrun's kernel answers both.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_sock.h"
#include "asr_time.h"
#include "asr_trace.h"
#include "asrd.h"

#define CONNECT_TIMEOUT_MS 10000

static void on_msg(asr_ctl_conn_t *c, asr_ctl_msg_t *m, void *arg) {
  (void)c;
  asrd_t *d = arg;
  if (m->type == ASR_CTL_HEARTBEAT) return; /* its bytes already counted as a sign of life */
  d->cb.on_up_msg(d, m);
}

static void lost(asrd_t *d, const char *why, int quiet) {
  asr_loop_timer_stop(d->loop, &d->up.heartbeat);
  d->up.open = 0;
  d->cb.on_up_lost(d, why, quiet);
}

static void on_close(asr_ctl_conn_t *c, int err, const char *why, void *arg) {
  (void)c;
  asrd_t *d = arg;
  asr_debug("asrd", "control connection ended: %s (%s)", why, asr_err_name(err));
  lost(d, why, err == 0);
}

/* A parent that is another asrd (the tree, tree.h) is judged by the
 * heartbeat rule as it judges us: asrd is never stopped on purpose (it
 * ignores SIGTSTP), so its silence means its host froze or was cut off. */
static void on_heartbeat(asr_loop_t *loop, asr_loop_timer_t *t) {
  asrd_t *d = t->arg;
  (void)asr_ctl_send_empty(&d->up.conn, ASR_CTL_HEARTBEAT);
  uint64_t now = asr_loop_update_now(loop);
  if (d->have_job && d->down.parent >= 0 && d->state < ASRD_FINISHING &&
      now - d->up.conn.last_rx_ms > d->up.heartbeat_timeout_ms) {
    char why[300];
    snprintf(why, sizeof why, "lost contact with the parent asrd on host %s: nothing heard for %llu s",
             d->job.host_names[d->down.parent], (unsigned long long)(d->up.heartbeat_timeout_ms / 1000));
    asr_ctl_close(&d->up.conn);
    lost(d, why, 0);
    return;
  }
  asr_loop_timer_start(loop, t, HEARTBEAT_MS, on_heartbeat, d);
}

static void connect_stop(asrd_t *d) {
  asr_loop_io_stop(d->loop, &d->up.connect_io);
  asr_loop_timer_stop(d->loop, &d->up.heartbeat);
}

/* The connect finished (or failed): HELLO, then the heartbeats. */
static void on_connected(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)events;
  asrd_t *d = io->arg;
  int fd = d->up.connect_fd;
  connect_stop(d);
  d->up.connect_fd = -1;
  int rc = asr_sock_connect_result(fd);
  if (rc == 0) rc = asr_ctl_start(loop, &d->up.conn, fd, on_msg, on_close, d);
  if (rc) {
    close(fd);
    char why[160];
    snprintf(why, sizeof why, "cannot reach asrrun: %s", asr_strerror(rc));
    d->cb.on_up_lost(d, why, 0);
    return;
  }
  d->up.open = 1;
  asrd_up_set_liveness(d);
  asr_ctl_msg_t hello = {
      .type = ASR_CTL_HELLO,
      .u.hello = {.index = d->host_index < 0 ? ASR_CTL_INDEX_AHEAD : (uint32_t)d->host_index,
                  .pid = (uint32_t)getpid(),
                  .host = d->hostname,
                  .secret_hex = d->secret_hex}}; /* proves asrrun started us */
  asrd_up_send(d, &hello);
  asr_ctl_flush(&d->up.conn);
  asr_loop_timer_start(loop, &d->up.heartbeat, HEARTBEAT_MS, on_heartbeat, d);
  d->cb.on_up_ready(d);
}

static void on_connect_timeout(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  asrd_t *d = t->arg;
  connect_stop(d);
  close(d->up.connect_fd);
  d->up.connect_fd = -1;
  d->cb.on_up_lost(d, "cannot reach asrrun: the connect timed out", 0);
}

int asrd_up_connect(asrd_t *d, const char *hostport, char *err, size_t errlen) {
  char ip[64];
  const char *colon = strrchr(hostport, ':');
  if (!colon || (size_t)(colon - hostport) >= sizeof ip) {
    snprintf(err, errlen, "--ctl wants HOST:PORT, not '%s'", hostport);
    return ASR_EINVAL;
  }
  memcpy(ip, hostport, (size_t)(colon - hostport));
  ip[colon - hostport] = '\0';
  char *end;
  long port = strtol(colon + 1, &end, 10);
  struct sockaddr_in a;
  if (*end || port <= 0 || port > 65535 || asr_sock_parse_ipv4(ip, (uint16_t)port, &a) != 0) {
    snprintf(err, errlen, "--ctl: '%s' is not an IPv4 address and port", hostport);
    return ASR_EINVAL;
  }
  int inprog = 0;
  int fd;
  if (d->bind_addr[0]) {
    /* --addr: the connection leaves from this host's own address */
    struct sockaddr_in me;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      fd = asr_err_from_errno(errno);
    } else if (asr_sock_parse_ipv4(d->bind_addr, 0, &me) != 0 ||
               bind(fd, (struct sockaddr *)&me, sizeof me) != 0) {
      int e = errno ? errno : EINVAL;
      close(fd);
      snprintf(err, errlen, "--addr %s: cannot bind: %s", d->bind_addr, strerror(e));
      return asr_err_from_errno(e);
    } else if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
      int e = errno;
      close(fd);
      fd = asr_err_from_errno(e);
    }
  } else {
    fd = asr_sock_connect_start(&a, &inprog);
  }
  if (fd < 0) {
    snprintf(err, errlen, "cannot reach asrrun at %s: %s", hostport, asr_strerror(fd));
    return fd;
  }
  d->up.connect_fd = fd;
  int rc = asr_loop_io_start(d->loop, &d->up.connect_io, fd, ASR_LOOP_WRITE, on_connected, d);
  if (rc) {
    close(fd);
    d->up.connect_fd = -1;
    snprintf(err, errlen, "cannot watch the connection to asrrun: %s", asr_strerror(rc));
    return rc;
  }
  asr_loop_timer_start(d->loop, &d->up.heartbeat, CONNECT_TIMEOUT_MS, on_connect_timeout, d);
  return 0;
}

void asrd_up_set_liveness(asrd_t *d) {
  if (d->up.conn.fd < 0) return;
  int s = (int)((d->up.heartbeat_timeout_ms * 3 / 2 + 999) / 1000);
  int on = 1, idle = s / 2 > 0 ? s / 2 : 1, intvl = 1, cnt = s - idle > 0 ? s - idle : 1;
  unsigned user_ms = (unsigned)(d->up.heartbeat_timeout_ms * 3 / 2);
  /* best effort: without them, a cut network is noticed by TCP's own timers */
  (void)setsockopt(d->up.conn.fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  (void)setsockopt(d->up.conn.fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  (void)setsockopt(d->up.conn.fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  (void)setsockopt(d->up.conn.fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  (void)setsockopt(d->up.conn.fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof user_ms);
}

void asrd_up_send(asrd_t *d, const asr_ctl_msg_t *m) {
  if (!d->up.open) return;
  int rc = asr_ctl_send(&d->up.conn, m);
  if (rc && rc != ASR_ENOTCONN)
    asr_error("asrd", "cannot send %s to asrrun: %s", asr_ctl_type_name(m->type), asr_strerror(rc));
}

void asrd_up_send_routed(asrd_t *d, uint32_t host, const asr_ctl_msg_t *m) {
  if (!d->up.open) return;
  int rc = asr_ctl_send_routed(&d->up.conn, host, m);
  if (rc && rc != ASR_ENOTCONN)
    asr_error("asrd", "cannot relay %s of host %u: %s", asr_ctl_type_name(m->type), host, asr_strerror(rc));
}

void asrd_up_output(asrd_t *d, int rank, int stream, const char *line, size_t len) {
  asr_ctl_msg_t m = {
      .type = ASR_CTL_OUTPUT,
      .u.output = {
          .rank = (uint32_t)rank, .stream = (uint32_t)stream, .line = (const uint8_t *)line, .len = len}};
  asrd_up_send(d, &m);
  d->out.credit -= (int64_t)ASR_CTL_OUTPUT_COST(len); /* asrrun gives it back as for a rank's line */
}

void asrd_up_error(asrd_t *d, const char *msg) {
  asr_ctl_msg_t m = {.type = ASR_CTL_ERROR, .u.error.msg = (char *)msg};
  asrd_up_send(d, &m);
}

/* Fences: asrrun answers them in the order they were sent (its fence_check
 * gathers one blob per host, then answers every host), so one FIFO matches
 * each FENCE_DONE to its fence, whichever server (PMIx, PMI) sent it. */
void asrd_up_fence(asrd_t *d, asrd_fence_t *f, const uint8_t *blob, size_t len) {
  asr_ctl_msg_t m = {.type = ASR_CTL_FENCE, .u.fence = {.id = d->up.fence_seq++, .data = blob, .len = len}};
  if (d->cb.fence_gather)
    d->cb.fence_gather(d, blob, len); /* with its children's, as one FENCE_SUB */
  else
    asrd_up_send(d, &m);
  f->next = NULL;
  f->t0 = ASR_TRACE_ON() ? asr_time_ns() : 0;
  f->bytes = len;
  asrd_fence_t **pp = &d->up.fences;
  while (*pp) pp = &(*pp)->next;
  *pp = f;
}

void asrd_up_fence_done(asrd_t *d, const uint8_t *data, size_t len) {
  asrd_fence_t *f = d->up.fences;
  if (!f) {
    asr_warn("asrd", "FENCE_DONE without a pending fence; ignored");
    return;
  }
  d->up.fences = f->next;
  f->next = NULL;
  if (ASR_TRACE_ON() && f->t0)
    asr_trace_put(1, ASR_TR_FENCE, -1, 1, 0, f->t0, asr_time_ns(), (uint64_t)d->nlocal, len, 0, 0, NULL);
  f->done(d, f, 1, data, len); /* may free f */
}

void asrd_up_fences_fail(asrd_t *d) {
  while (d->up.fences) {
    asrd_fence_t *f = d->up.fences;
    d->up.fences = f->next;
    f->next = NULL;
    f->done(d, f, 0, NULL, 0);
  }
}

void asrd_up_joined(asrd_t *d, asrd_rank_t *r, int what, int via) {
  if (r->joined >= what) return;
  r->joined = what;
  r->via = via;
  asr_ctl_msg_t m = {.type = ASR_CTL_JOINED,
                     .u.joined = {.rank = (uint32_t)r->rank, .what = (uint32_t)what, .via = (uint32_t)via}};
  asrd_up_send(d, &m);
}

void asrd_up_finish(asrd_t *d) {
  if (!d->up.open) return;
  asr_loop_timer_stop(d->loop, &d->up.heartbeat);
  asr_ctl_finish(&d->up.conn, 2000);
}

void asrd_up_close(asrd_t *d) {
  if (d->up.connect_fd >= 0) {
    connect_stop(d);
    close(d->up.connect_fd);
    d->up.connect_fd = -1;
  }
  asr_loop_timer_stop(d->loop, &d->up.heartbeat);
  asr_ctl_close(&d->up.conn);
  d->up.open = 0;
}
