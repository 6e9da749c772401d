/*
 * asrd_down.c -- the tree below this daemon (asrd.h, tree.h): its children,
 * supervised by the node code asrrun runs too (tree_node.h). This file is
 * what is asrd's own in it: starting the children with the job's agent,
 * the address they call back on, and what goes up.
 *
 * A child's HELLO goes up wrapped (ROUTED), so that asrrun counts it as
 * called back, and the child gets the JOB (this daemon's, with its index).
 * What it says goes up wrapped once, with its host (what it relays for its
 * own subtree is already wrapped and goes up as it came); its fences are
 * gathered with this host's into one FENCE_SUB. What the parent routes down
 * goes to the child whose subtree holds the host it is for, or to every
 * child. A child lost (its connection ended before the job did, silent for
 * the heartbeat timeout, or never called back) is said to the parent with
 * why (LOST); asrrun ends the job naming it and the hosts beneath it. So a
 * failure anywhere in the tree is told within the heartbeat timeout plus
 * one tick, at any depth: only the lost daemon's parent has to notice.
 */
#include "config.h"

#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_sock.h"
#include "asrd.h"
#include "launch.h"
#include "tree.h"

static const char *host_name(const asrd_t *d, int h) { return d->job.host_names[h]; }

static int ending(const asrd_t *d) { return d->state >= ASRD_TERMINATING; }

static asrd_t *owner(asr_tree_node_t *n) { return n->owner; }

/* --- the node's callbacks ----------------------------------------------------------- */

static void on_up(asr_tree_node_t *n, asr_tree_child_t *ch, const asr_ctl_msg_t *hello) {
  asrd_t *d = owner(n);
  asrd_up_send_routed(d, (uint32_t)ch->host, hello); /* asrrun counts it as called back */
  if (ending(d)) {
    /* it called back while the job is ending: it ends too */
    asr_ctl_msg_t k = {.type = ASR_CTL_KILL, .u.kill.sig = SIGKILL};
    (void)asr_ctl_send(ch->conn, &k);
    return;
  }
  (void)asr_tree_node_send_job(n, ch, &d->job);
}

static void on_msg(asr_tree_node_t *n, asr_tree_child_t *ch, asr_ctl_msg_t *m) {
  asrd_t *d = owner(n);
  char why[300];
  switch (m->type) {
    case ASR_CTL_ROUTED:
    case ASR_CTL_LOST: asrd_up_send(d, m); return; /* its subtree's (checked): up as it came */
    case ASR_CTL_STARTED:
    case ASR_CTL_OUTPUT:
    case ASR_CTL_EXIT:
    case ASR_CTL_ABORT:
    case ASR_CTL_ERROR:
    case ASR_CTL_STDIN_CREDIT:
    case ASR_CTL_JOINED:
    case ASR_CTL_REPORT:
    case ASR_CTL_METRICS:
    case ASR_CTL_ENDS:
    case ASR_CTL_CLOCK_ASK:
    case ASR_CTL_TRACE:
    case ASR_CTL_TRACE_END:
    case ASR_CTL_DONE:
      if (m->type == ASR_CTL_DONE) ch->done = 1;
      asrd_up_send_routed(d, (uint32_t)ch->host, m);
      return;
    default:
      snprintf(why, sizeof why, "asrd on host %s sent an unexpected %s message", host_name(d, ch->host),
               asr_ctl_type_name(m->type));
      asr_tree_node_lose(n, ch, why);
  }
}

/* Unless the job is ending (or it had done its part), the parent hears
 * that the child is lost, and why. */
static void on_over(asr_tree_node_t *n, asr_tree_child_t *ch, const char *why) {
  asrd_t *d = owner(n);
  if (ending(d) || ch->done) return;
  asr_ctl_msg_t m = {.type = ASR_CTL_LOST, .u.lost = {.host = (uint32_t)ch->host, .why = (char *)why}};
  asrd_up_send(d, &m);
}

/* The launch backend's words for a child whose agent ended before it
 * called back, and which daemon started it. */
static void agent_why(asr_tree_node_t *n, asr_tree_child_t *ch, int st, char *why, size_t len) {
  asrd_t *d = owner(n);
  const asr_launch_ops_t *ops = asr_launch_by_id(d->job.tree_launch);
  char said[1400];
  if (ops)
    ops->ended(host_name(d, ch->host), d->job.tree_agent, st, said, sizeof said);
  else
    snprintf(said, sizeof said, "the daemon of host %s ended before it called back", host_name(d, ch->host));
  snprintf(why, len, "%s (started by asrd on host %s)", said, d->hostname);
}

static void on_reaped(asr_tree_node_t *n, asr_tree_child_t *ch, pid_t pid, int st) {
  (void)n, (void)ch, (void)pid, (void)st;
}

static void on_fence(asr_tree_node_t *n, uint32_t seq, uint32_t cnt, const uint8_t *entries, size_t len) {
  asr_ctl_msg_t m = {.type = ASR_CTL_FENCE_SUB,
                     .u.fence_sub = {.id = seq, .n = cnt, .entries = entries, .len = len}};
  asrd_up_send(owner(n), &m);
}

static void on_error(asr_tree_node_t *n, const char *why) {
  char msg[300];
  snprintf(msg, sizeof msg, "asrd: %s", why);
  asrd_up_error(owner(n), msg);
}

static void on_idle(asr_tree_node_t *n) {
  asrd_t *d = owner(n);
  if (d->cb.on_down_idle) d->cb.on_down_idle(d);
}

static const asr_tree_node_ops_t node_ops = {.up = on_up,
                                             .msg = on_msg,
                                             .over = on_over,
                                             .agent_why = agent_why,
                                             .reaped = on_reaped,
                                             .fence = on_fence,
                                             .error = on_error,
                                             .idle = on_idle};

/* This host's blob for its next fence, into the subtree's gather. */
static void fence_local(asrd_t *d, const uint8_t *blob, size_t len) {
  asr_tree_node_fence_local(&d->down.node, blob, len);
}

/* --- start, down, stop ----------------------------------------------------------------- */

/* The address this daemon's children call back on: --addr, else the one it
 * reached its parent from; over loopback (a daemon on asrrun's own host),
 * asrrun's on the job's network (the JOB's tree_ip). */
static void callback_ip(asrd_t *d, char ip[64]) {
  snprintf(ip, 64, "%s", d->bind_addr);
  if (ip[0]) return;
  struct sockaddr_in me;
  socklen_t sl = sizeof me;
  if (getsockname(d->up.conn.fd, (struct sockaddr *)&me, &sl) == 0) inet_ntop(AF_INET, &me.sin_addr, ip, 64);
  if ((!ip[0] || !strncmp(ip, "127.", 4)) && d->job.tree_ip && d->job.tree_ip[0])
    snprintf(ip, 64, "%s", d->job.tree_ip);
}

int asrd_down_start(asrd_t *d, char *err, size_t errlen) {
  d->down.radix = (int)d->job.tree_radix;
  d->down.parent = asr_tree_parent(d->down.radix, d->host_index);
  d->down.host_ranks = calloc((size_t)d->nhosts, 1);
  if (!d->down.host_ranks) return asr_errf(err, errlen, ASR_ENOMEM, "out of memory for the tree below");
  for (int r = 0; r < d->nranks; r++)
    if (d->job.host_of[r] < (uint32_t)d->nhosts) d->down.host_ranks[d->job.host_of[r]] = 1;
  asr_tree_node_t *n = &d->down.node;
  int rc = asr_tree_node_init(n, d->loop, &node_ops, d, "asrd", d->host_index, d->down.radix, d->nhosts,
                              (const char *const *)d->job.host_names, d->down.host_ranks, d->secret_hex,
                              d->up.heartbeat_timeout_ms, err, errlen);
  if (rc || n->nchildren == 0) return rc;
  d->cb.fence_gather = fence_local;
  char ip[64], ctl[96];
  callback_ip(d, ip);
  uint16_t port = 0;
  d->down.lfd = asr_sock_listen(ip, 0, 1024, &port, err, errlen);
  if (d->down.lfd < 0) return d->down.lfd;
  rc = asr_tree_node_listen(n, d->down.lfd);
  if (rc)
    return asr_errf(err, errlen, rc, "cannot watch the listener for this daemon's children: %s",
                    asr_strerror(rc));
  snprintf(ctl, sizeof ctl, "%s:%u", ip, port);
  asr_debug("asrd", "starting %d children (hosts %d..%d) calling back on %s", n->nchildren,
            n->children[0].host, n->children[n->nchildren - 1].host, ctl);
  for (int i = 0; i < n->nchildren; i++) {
    asr_tree_child_t *ch = &n->children[i];
    asr_launch_args_t a = {.asrd_path = d->job.tree_asrd,
                           .ctl_addr = ctl,
                           .secret_hex = d->secret_hex,
                           .host = host_name(d, ch->host),
                           .agent = d->job.tree_agent,
                           .index = ch->host,
                           .port = d->port};
    char why[1024], msg[1300];
    /* the backend asrrun named: the JOB's decoder accepts only those that
     * start a daemon on another host (the agent, or an srun step on the
     * child's node whose srun runs here, inside this daemon's step) */
    const asr_launch_ops_t *ops = asr_launch_by_id(d->job.tree_launch);
    pid_t pid =
        ops ? ops->start(&a, why, sizeof why)
            : asr_errf(why, sizeof why, ASR_EPROTO, "no launch backend has id %u", d->job.tree_launch);
    if (pid < 0) {
      snprintf(msg, sizeof msg, "asrd on host %s cannot start asrd for host %s: %s", d->hostname,
               host_name(d, ch->host), why);
      asr_tree_node_lose(n, ch, msg);
      continue;
    }
    if (asr_tree_node_watch(n, ch, pid) != 0) {
      snprintf(msg, sizeof msg, "asrd on host %s cannot watch the agent of host %s", d->hostname,
               host_name(d, ch->host));
      asr_tree_node_lose(n, ch, msg);
    }
  }
  asr_tree_node_run(n);
  return 0;
}

void asrd_down_route(asrd_t *d, asr_ctl_msg_t *m) {
  uint32_t h = m->u.routed.host;
  if (h != ASR_CTL_ALL_HOSTS && h != (uint32_t)d->host_index) {
    /* for a daemon below: on toward it as it came (for a child that is
     * gone: dropped, as asrrun drops what a lost daemon would get) */
    if (d->have_job) (void)asr_tree_node_relay(&d->down.node, m);
    return;
  }
  asr_ctl_msg_t in;
  char why[256];
  if (asr_ctl_msg_decode((int)m->u.routed.type, m->u.routed.data, m->u.routed.len, &in, why, sizeof why)) {
    asr_warn("asrd", "a ROUTED message that does not decode (%s); ignored", why);
    return;
  }
  /* every child first: what this daemon does with it may end its links */
  if (h == ASR_CTL_ALL_HOSTS) (void)asr_tree_node_relay(&d->down.node, m);
  if (in.type == ASR_CTL_ROUTED || in.type == ASR_CTL_JOB)
    asr_warn("asrd", "a ROUTED %s; ignored", asr_ctl_type_name(in.type));
  else
    d->cb.on_up_msg(d, &in);
  asr_ctl_msg_free(&in);
}

void asrd_down_fence_done(asrd_t *d, const asr_ctl_msg_t *m) {
  (void)asr_tree_node_fence_done(&d->down.node, m);
}

void asrd_down_rank_state(asrd_t *d, int rank, int state) {
  if (!d->down.node.live || rank < 0 || rank >= d->nranks) return; /* a leaf: no fences gathered here */
  if (!d->down.alive) {
    d->down.alive = malloc((size_t)d->nranks);
    if (!d->down.alive) return; /* the fences then wait for every host, as without the policy */
    memset(d->down.alive, 1, (size_t)d->nranks);
  }
  d->down.alive[rank] = state == ASR_CTL_RANK_ALIVE;
  uint32_t h = d->job.host_of[rank];
  int live = 0;
  for (int q = 0; q < d->nranks && !live; q++) live = d->job.host_of[q] == h && d->down.alive[q];
  asr_tree_node_host_live(&d->down.node, (int)h, live);
}

int asrd_down_active(const asrd_t *d) { return asr_tree_node_active(&d->down.node); }

void asrd_down_close(asrd_t *d) { asr_tree_node_close(&d->down.node); }

void asrd_down_stop(asrd_t *d) {
  d->cb.on_down_idle = NULL;
  asr_tree_node_fini(&d->down.node, 0);
  if (d->down.lfd >= 0) {
    close(d->down.lfd);
    d->down.lfd = -1;
  }
  free(d->down.host_ranks);
  d->down.host_ranks = NULL;
  free(d->down.alive);
  d->down.alive = NULL;
}
