/*
 * asrd_down.c -- the tree below this daemon (asrd.h, tree.h): its children,
 * started with the job's agent, their call back, what they say going up,
 * what goes down to them, their heartbeats and their ends.
 *
 * A child is to this daemon what a daemon is to asrrun (asrrun_daemons.c):
 * its connection must open with a HELLO carrying the job's secret and its
 * host index within HELLO_MS; it then gets the JOB (this daemon's, with its
 * index) and the HELLO goes up wrapped (ROUTED), so that asrrun counts it as
 * called back. What it says goes up wrapped once, with its host (what it
 * relays for its own subtree is already wrapped and goes up as it came);
 * its fences are gathered (FENCE_SUB). What the parent routes down goes to
 * the child whose subtree holds the host it is for, or to every child.
 *
 * Each child is judged by the heartbeat rule, as asrrun judges its own: a
 * child silent for the JOB's heartbeat timeout, or whose connection ends
 * before the job does, is LOST, said to the parent with why; asrrun ends
 * the job naming it and the hosts beneath it. So a failure anywhere in the
 * tree is told within the heartbeat timeout plus one tick (HEARTBEAT_MS),
 * at any depth: only the lost daemon's parent has to notice, and its LOST
 * goes up at once.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
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
#include "asrd_dir.h"
#include "launch.h"
#include "tree.h"

#define HEARTBEAT_MS 1000
#define HELLO_MS 5000     /* a new connection's HELLO */
#define CALLBACK_MS 30000 /* every child calls back within this (asrrun's bound too) */
#define REAP_MS 2000      /* at the end, each child's agent is reaped within this */

/* A connection from below, before and after its HELLO. */
struct asrd_link {
  asr_ctl_conn_t c;
  asr_loop_timer_t hello_timer;
  asrd_t *d;
  asrd_child_t *child;    /* once its HELLO was right */
  int dead;               /* closed; freed by its timer */
  struct asrd_link *next; /* d->down_links */
};
typedef struct asrd_link link_t;

/* A fence being gathered: its FENCE_SUB entries so far. */
struct asrd_gather {
  uint32_t seq;
  int got;
  uint32_t n;
  asr_buf_t entries;
  asrd_gather_t *next;
};

static const char *host_name(const asrd_t *d, int h) { return d->job.host_names[h]; }

static int ending(const asrd_t *d) { return d->state >= ASRD_TERMINATING; }

static void link_free(link_t *l) {
  for (link_t **pp = &l->d->down_links; *pp; pp = &(*pp)->next)
    if (*pp == l) {
      *pp = l->next;
      break;
    }
  asr_loop_timer_stop(l->d->loop, &l->hello_timer);
  asr_ctl_close(&l->c);
  free(l);
}

static void link_free_cb(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  link_free(t->arg);
}

/* Closed now, freed at the next iteration (we may be in its callback). */
static void link_discard(link_t *l) {
  asr_loop_timer_stop(l->d->loop, &l->hello_timer);
  asr_ctl_close(&l->c);
  l->dead = 1;
  asr_loop_timer_start(l->d->loop, &l->hello_timer, 0, link_free_cb, l);
}

int asrd_down_active(const asrd_t *d) {
  for (int i = 0; i < d->nchildren; i++)
    if (d->children[i].link || d->children[i].agent > 0) return 1;
  return 0;
}

/* The child's connection is gone. */
static void child_unlink(asrd_child_t *ch) {
  if (!ch->link) return;
  link_t *l = ch->link;
  ch->link = NULL;
  l->child = NULL;
  link_discard(l);
  asrd_t *d = ch->d;
  if (!asrd_down_active(d) && d->on_down_idle) d->on_down_idle(d);
}

/* The child is over; unless the job is ending (or it had done its part),
 * the parent hears that it is lost, and why. */
static void child_lost(asrd_child_t *ch, const char *why) {
  asrd_t *d = ch->d;
  if (ch->state == CHILD_OVER) return;
  ch->state = CHILD_OVER;
  if (!ending(d) && !ch->done) {
    asr_ctl_msg_t m = {.type = ASR_CTL_LOST, .u.lost = {.host = (uint32_t)ch->host, .why = (char *)why}};
    asrd_up_send(d, &m);
  }
  child_unlink(ch);
}

/* --- fences --------------------------------------------------------------------- */

static asrd_gather_t *gather_slot(asrd_t *d, uint32_t seq) {
  asrd_gather_t **pp = &d->gathers;
  for (; *pp; pp = &(*pp)->next)
    if ((*pp)->seq == seq) return *pp;
  asrd_gather_t *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->seq = seq;
  *pp = g; /* seqs come in order: the list stays sorted */
  return g;
}

/* A contribution came: the oldest fence, once whole, goes up. Each party
 * sends its fences in order, so the oldest is always the first to be whole. */
static void gather_check(asrd_t *d) {
  while (d->gathers && d->gathers->got >= d->gather_need) {
    asrd_gather_t *g = d->gathers;
    asr_ctl_msg_t m = {.type = ASR_CTL_FENCE_SUB,
                       .u.fence_sub = {.id = g->seq,
                                       .n = g->n,
                                       .entries = g->entries.data + g->entries.off,
                                       .len = asr_buf_pending(&g->entries)}};
    asrd_up_send(d, &m);
    d->gathers = g->next;
    asr_buf_free(&g->entries);
    free(g);
  }
}

static int gather_put(asrd_t *d, asrd_gather_t *g, uint32_t host, const uint8_t *blob, size_t len) {
  if (!g || asr_buf_put_u32(&g->entries, host) || asr_buf_put_bytes(&g->entries, blob, len)) {
    asrd_up_error(d, "asrd: out of memory gathering a fence");
    return ASR_ENOMEM;
  }
  g->n++;
  return 0;
}

/* This host's blob for its next fence, into the gather (d->fence_gather). */
static void fence_local(asrd_t *d, const uint8_t *blob, size_t len) {
  asrd_gather_t *g = gather_slot(d, d->gather_local++);
  if (gather_put(d, g, (uint32_t)d->host_index, blob, len) == 0) g->got++;
  gather_check(d);
}

static void child_fence(asrd_child_t *ch, const asr_ctl_msg_t *m) {
  asrd_t *d = ch->d;
  if (!ch->has_ranks) {
    child_lost(ch, "a daemon without ranks sent a fence");
    return;
  }
  asrd_gather_t *g = gather_slot(d, ch->fences++);
  if (!g) {
    asrd_up_error(d, "asrd: out of memory gathering a fence");
    return;
  }
  if (m->type == ASR_CTL_FENCE) {
    if (gather_put(d, g, (uint32_t)ch->host, m->u.fence.data, m->u.fence.len)) return;
  } else {
    /* its subtree's blobs, each checked to be of a host beneath it */
    const uint8_t *p = m->u.fence_sub.entries, *blob;
    size_t len = m->u.fence_sub.len, blen;
    uint32_t h;
    while (asr_ctl_fence_sub_next(&p, &len, &h, &blob, &blen)) {
      if (h >= (uint32_t)d->nhosts || !asr_tree_in_subtree(d->radix, ch->host, (int)h)) {
        char why[200];
        snprintf(why, sizeof why, "asrd on host %s sent a fence blob of host %u, not of its subtree",
                 host_name(d, ch->host), h);
        child_lost(ch, why);
        return;
      }
    }
    if (asr_buf_put(&g->entries, m->u.fence_sub.entries, m->u.fence_sub.len)) {
      asrd_up_error(d, "asrd: out of memory gathering a fence");
      return;
    }
    g->n += m->u.fence_sub.n;
  }
  g->got++;
  gather_check(d);
}

void asrd_down_fence_done(asrd_t *d, const asr_ctl_msg_t *m) {
  for (int i = 0; i < d->nchildren; i++)
    if (d->children[i].link && d->children[i].has_ranks) (void)asr_ctl_send(&d->children[i].link->c, m);
}

/* --- what a child says -------------------------------------------------------------- */

static void on_child_msg(asr_ctl_conn_t *c, asr_ctl_msg_t *m, void *arg) {
  (void)c;
  link_t *l = arg;
  asrd_child_t *ch = l->child;
  if (!ch) return;
  asrd_t *d = ch->d;
  char why[300];
  switch (m->type) {
    case ASR_CTL_HEARTBEAT: return;
    case ASR_CTL_FENCE:
    case ASR_CTL_FENCE_SUB: child_fence(ch, m); return;
    case ASR_CTL_ROUTED:
    case ASR_CTL_LOST: {
      /* its subtree's, already wrapped: up as it came */
      uint32_t h = m->type == ASR_CTL_ROUTED ? m->u.routed.host : m->u.lost.host;
      if (h >= (uint32_t)d->nhosts || (int)h == ch->host ||
          !asr_tree_in_subtree(d->radix, ch->host, (int)h)) {
        snprintf(why, sizeof why, "asrd on host %s relayed a %s of host %u, not one beneath it",
                 host_name(d, ch->host), asr_ctl_type_name(m->type), h);
        child_lost(ch, why);
        return;
      }
      asrd_up_send(d, m);
      return;
    }
    case ASR_CTL_STARTED:
    case ASR_CTL_OUTPUT:
    case ASR_CTL_EXIT:
    case ASR_CTL_ABORT:
    case ASR_CTL_ERROR:
    case ASR_CTL_STDIN_CREDIT:
    case ASR_CTL_JOINED:
    case ASR_CTL_REPORT:
    case ASR_CTL_ENDS:
    case ASR_CTL_DONE:
      if (m->type == ASR_CTL_DONE) ch->done = 1;
      asrd_up_send_routed(d, (uint32_t)ch->host, m);
      return;
    default:
      snprintf(why, sizeof why, "asrd on host %s sent an unexpected %s message", host_name(d, ch->host),
               asr_ctl_type_name(m->type));
      child_lost(ch, why);
  }
}

static void on_child_close(asr_ctl_conn_t *c, int err, const char *how, void *arg) {
  (void)c;
  link_t *l = arg;
  asrd_child_t *ch = l->child;
  if (!ch) {
    link_discard(l);
    return;
  }
  asrd_t *d = ch->d;
  char why[600];
  if (err == ASR_EPROTO)
    snprintf(why, sizeof why, "asrd on host %s: %s", host_name(d, ch->host), how);
  else
    snprintf(
        why, sizeof why,
        "lost the connection to asrd on host %s before the job finished (its parent, host %s, saw it end)",
        host_name(d, ch->host), d->hostname);
  child_lost(ch, why);
}

/* --- call back ------------------------------------------------------------------------- */

static void on_hello_timeout(asr_loop_t *loop, asr_loop_timer_t *t) {
  link_t *l = t->arg;
  (void)loop;
  asr_warn("asrd", "a connection from below sent no HELLO within %d s; closed", HELLO_MS / 1000);
  link_discard(l);
}

static void on_hello_close(asr_ctl_conn_t *c, int err, const char *why, void *arg) {
  (void)c, (void)err, (void)why;
  link_discard(arg);
}

static void send_job(asrd_child_t *ch) {
  asrd_t *d = ch->d;
  asr_ctl_msg_t m = {.type = ASR_CTL_JOB};
  m.u.job = d->job; /* read only: this daemon's JOB, for the child's host */
  m.u.job.index = (uint32_t)ch->host;
  int rc = asr_ctl_send(&ch->link->c, &m);
  if (rc) {
    char why[200];
    snprintf(why, sizeof why, "cannot send the job to host %s: %s", host_name(d, ch->host), asr_strerror(rc));
    child_lost(ch, why);
    return;
  }
  for (uint32_t s = 1; s <= 2; s++)
    if (d->out_closed[s]) {
      asr_ctl_msg_t g = {.type = ASR_CTL_OUTPUT_CLOSED, .u.closed.stream = s};
      (void)asr_ctl_send(&ch->link->c, &g);
    }
}

static void on_hello(asr_ctl_conn_t *c, asr_ctl_msg_t *m, void *arg) {
  link_t *l = arg;
  asrd_t *d = l->d;
  asrd_child_t *ch = NULL;
  if (m->type == ASR_CTL_HELLO && strcmp(m->u.hello.secret_hex, d->secret_hex) == 0)
    for (int i = 0; i < d->nchildren; i++)
      if ((uint32_t)d->children[i].host == m->u.hello.index && d->children[i].state == CHILD_LAUNCHING)
        ch = &d->children[i];
  if (!ch) {
    asr_warn("asrd", "refused a connection from below that is not one of this daemon's children");
    link_discard(l);
    return;
  }
  asr_loop_timer_stop(d->loop, &l->hello_timer);
  asr_ctl_set_owner(c, on_child_msg, on_child_close, l);
  l->child = ch;
  ch->link = l;
  ch->state = CHILD_UP;
  asrd_up_send_routed(d, (uint32_t)ch->host, m); /* asrrun counts it as called back */
  if (ending(d)) {
    /* it called back while the job is ending: it ends too */
    asr_ctl_msg_t k = {.type = ASR_CTL_KILL, .u.kill.sig = SIGKILL};
    (void)asr_ctl_send(c, &k);
    return;
  }
  send_job(ch);
}

static void on_listener(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)events;
  asrd_t *d = io->arg;
  for (int i = 0; i < 64; i++) {
    int fd = accept4(io->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    link_t *l = calloc(1, sizeof *l);
    if (!l || asr_ctl_start(loop, &l->c, fd, on_hello, on_hello_close, l) != 0) {
      close(fd);
      free(l);
      continue;
    }
    l->d = d;
    l->next = d->down_links;
    d->down_links = l;
    asr_loop_timer_start(loop, &l->hello_timer, HELLO_MS, on_hello_timeout, l);
  }
}

/* --- the agents, heartbeats, deadlines --------------------------------------------- */

static void on_agent_exit(asr_loop_t *loop, asr_loop_pid_t *p, int have_status, int st) {
  (void)loop;
  asrd_child_t *ch = p->arg;
  asrd_t *d = ch->d;
  /* a child killed whose agent was the daemon itself left its PMIx
   * directory here (asrrun_daemons.c: reaped) */
  if (have_status && WIFSIGNALED(st)) asrd_dir_remove_of(ch->agent);
  ch->agent = 0;
  if (!have_status) st = 0;
  if (ch->state != CHILD_LAUNCHING) { /* its connection says how it ended */
    asr_debug("asrd", "the agent of host %s ended", host_name(d, ch->host));
    if (!asrd_down_active(d) && d->on_down_idle) d->on_down_idle(d);
    return;
  }
  char why[1400];
  int sig = WIFSIGNALED(st), code = sig ? WTERMSIG(st) : WEXITSTATUS(st);
  snprintf(
      why, sizeof why,
      "the launch agent for host %s (%s, started by asrd on host %s) ended with %s %d before asrd called "
      "back; check that '%s %s true' works there and that asrd is installed there (--prefix)",
      host_name(d, ch->host), d->job.tree_agent, d->hostname, sig ? "signal" : "status", code,
      d->job.tree_agent, host_name(d, ch->host));
  child_lost(ch, why);
}

static void on_tick(asr_loop_t *loop, asr_loop_timer_t *t) {
  asrd_t *d = t->arg;
  uint64_t now = asr_loop_update_now(loop);
  for (int i = 0; i < d->nchildren; i++) {
    asrd_child_t *ch = &d->children[i];
    if (!ch->link) continue;
    (void)asr_ctl_send_empty(&ch->link->c, ASR_CTL_HEARTBEAT);
    if (!ending(d) && !ch->done && now - ch->link->c.last_rx_ms > d->heartbeat_timeout_ms) {
      char why[400];
      snprintf(why, sizeof why,
               "lost contact with asrd on host %s: nothing heard for %llu s (host down or network cut?); its "
               "parent, host %s, gave up on it; aborting the job",
               host_name(d, ch->host), (unsigned long long)(d->heartbeat_timeout_ms / 1000), d->hostname);
      child_lost(ch, why);
    }
  }
  asr_loop_timer_start(loop, t, HEARTBEAT_MS, on_tick, d);
}

static void on_deadline(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  asrd_t *d = t->arg;
  for (int i = 0; i < d->nchildren; i++)
    if (d->children[i].state == CHILD_LAUNCHING) {
      char why[300];
      snprintf(why, sizeof why, "asrd on host %s did not call back within %d s (its parent: host %s)",
               host_name(d, d->children[i].host), CALLBACK_MS / 1000, d->hostname);
      child_lost(&d->children[i], why);
    }
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
  if (getsockname(d->up.fd, (struct sockaddr *)&me, &sl) == 0) inet_ntop(AF_INET, &me.sin_addr, ip, 64);
  if ((!ip[0] || !strncmp(ip, "127.", 4)) && d->job.tree_ip && d->job.tree_ip[0])
    snprintf(ip, 64, "%s", d->job.tree_ip);
}

int asrd_down_start(asrd_t *d, char *err, size_t errlen) {
  d->radix = (int)d->job.tree_radix;
  d->parent = asr_tree_parent(d->radix, d->host_index);
  int n = asr_tree_nchildren(d->radix, d->nhosts, d->host_index);
  d->gather_need = d->nlocal > 0;
  if (n <= 0) return 0;
  d->children = calloc((size_t)n, sizeof *d->children);
  if (!d->children) {
    snprintf(err, errlen, "out of memory for %d children", n);
    return ASR_ENOMEM;
  }
  int first = asr_tree_first_child(d->radix, d->host_index);
  for (int i = 0; i < n; i++) {
    asrd_child_t *ch = &d->children[i];
    ch->d = d;
    ch->host = first + i;
    for (int r = 0; r < d->nranks && !ch->has_ranks; r++)
      ch->has_ranks = asr_tree_in_subtree(d->radix, ch->host, (int)d->job.host_of[r]);
    d->gather_need += ch->has_ranks;
  }
  d->nchildren = n;
  d->fence_gather = fence_local;
  char ip[64], ctl[96];
  callback_ip(d, ip);
  uint16_t port = 0;
  d->down_lfd = asr_sock_listen(ip, 0, 1024, &port, err, errlen);
  if (d->down_lfd < 0) return d->down_lfd;
  int rc = asr_loop_io_start(d->loop, &d->down_lio, d->down_lfd, ASR_LOOP_READ, on_listener, d);
  if (rc) {
    snprintf(err, errlen, "cannot watch the listener for this daemon's children: %s", asr_strerror(rc));
    return rc;
  }
  snprintf(ctl, sizeof ctl, "%s:%u", ip, port);
  asr_debug("asrd", "starting %d children (hosts %d..%d) calling back on %s", n, first, first + n - 1, ctl);
  for (int i = 0; i < n; i++) {
    asrd_child_t *ch = &d->children[i];
    asr_launch_args_t a = {.asrd_path = d->job.tree_asrd,
                           .ctl_addr = ctl,
                           .secret_hex = d->secret_hex,
                           .host = host_name(d, ch->host),
                           .agent = d->job.tree_agent,
                           .index = ch->host,
                           .port = d->port};
    char why[1024], msg[1300];
    /* under Slurm, an srun step on the child's node (its srun runs here,
     * inside this daemon's step, in the same allocation) */
    pid_t pid = (d->job.tree_srun ? &asr_launch_slurm : &asr_launch_rsh)->start(&a, why, sizeof why);
    if (pid < 0) {
      snprintf(msg, sizeof msg, "asrd on host %s cannot start asrd for host %s: %s", d->hostname,
               host_name(d, ch->host), why);
      child_lost(ch, msg);
      continue;
    }
    ch->agent = pid;
    if (asr_loop_pid_start(d->loop, &ch->agent_watch, pid, 1, on_agent_exit, ch) != 0) {
      snprintf(msg, sizeof msg, "asrd on host %s cannot watch the agent of host %s", d->hostname,
               host_name(d, ch->host));
      child_lost(ch, msg);
    }
  }
  asr_loop_timer_start(d->loop, &d->down_tick, HEARTBEAT_MS, on_tick, d);
  asr_loop_timer_start(d->loop, &d->down_deadline, CALLBACK_MS, on_deadline, d);
  return 0;
}

void asrd_down_route(asrd_t *d, asr_ctl_msg_t *m) {
  uint32_t h = m->u.routed.host;
  if (h != ASR_CTL_ALL_HOSTS && h != (uint32_t)d->host_index) {
    int c = d->have_job ? asr_tree_child_toward(d->radix, d->host_index, (int)h) : -1;
    for (int i = 0; i < d->nchildren; i++)
      if (d->children[i].host == c && d->children[i].link) (void)asr_ctl_send(&d->children[i].link->c, m);
    return; /* (for a child that is gone: dropped, as asrrun drops what a lost daemon would get) */
  }
  asr_ctl_msg_t in;
  char why[256];
  if (asr_ctl_msg_decode((int)m->u.routed.type, m->u.routed.data, m->u.routed.len, &in, why, sizeof why)) {
    asr_warn("asrd", "a ROUTED message that does not decode (%s); ignored", why);
    return;
  }
  /* every child first: what this daemon does with it may end its links */
  if (h == ASR_CTL_ALL_HOSTS)
    for (int i = 0; i < d->nchildren; i++)
      if (d->children[i].link) (void)asr_ctl_send(&d->children[i].link->c, m);
  if (in.type == ASR_CTL_ROUTED || in.type == ASR_CTL_JOB)
    asr_warn("asrd", "a ROUTED %s; ignored", asr_ctl_type_name(in.type));
  else
    d->on_up_msg(d, &in);
  asr_ctl_msg_free(&in);
}

void asrd_down_close(asrd_t *d) {
  for (int i = 0; i < d->nchildren; i++) {
    asrd_child_t *ch = &d->children[i];
    if (ch->state != CHILD_OVER) ch->state = CHILD_OVER;
    child_unlink(ch);
  }
}

void asrd_down_stop(asrd_t *d) {
  asr_loop_timer_stop(d->loop, &d->down_tick);
  asr_loop_timer_stop(d->loop, &d->down_deadline);
  if (d->down_lfd >= 0) {
    asr_loop_io_stop(d->loop, &d->down_lio);
    close(d->down_lfd);
    d->down_lfd = -1;
  }
  d->on_down_idle = NULL;
  for (int i = 0; i < d->nchildren; i++) {
    asrd_child_t *ch = &d->children[i];
    ch->link = NULL;
    asr_loop_pid_stop(d->loop, &ch->agent_watch);
  }
  while (d->down_links) link_free(d->down_links); /* children's, waiting for a HELLO, discarded */
  /* The children's agents (under "ip netns exec" and srun on their node, the
   * daemons themselves) end once their connections have, and the loop
   * reaps them (FINISHING waits for that); what is left here, when the
   * children's time ran out or the loop failed, is reaped so that none
   * outlives this daemon unwaited (bounded; what is left dies with us:
   * PDEATHSIG). */
  for (int waited = 0;; waited += 10) {
    int left = 0;
    for (int i = 0; i < d->nchildren; i++) {
      asrd_child_t *ch = &d->children[i];
      if (ch->agent > 0 && waitpid(ch->agent, NULL, WNOHANG) == 0)
        left++;
      else
        ch->agent = 0;
    }
    if (!left || waited >= REAP_MS) break;
    usleep(10000);
  }
  while (d->gathers) {
    asrd_gather_t *g = d->gathers;
    d->gathers = g->next;
    asr_buf_free(&g->entries);
    free(g);
  }
  free(d->children);
  d->children = NULL;
  d->nchildren = 0;
}
