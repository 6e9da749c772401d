/*
 * tree_node.c -- one node of the tree of daemons and its children
 * (tree_node.h): asrrun's and every interior asrd's supervision of the
 * daemons it starts, one code for both.
 */
#include "config.h"

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
#include "asrd_dir.h"
#include "tree.h"
#include "tree_node.h"

#define DRAIN_MS 1000 /* an agent reaped while its child was up: its last messages */
#define REAP_MS 2000  /* at the end, each agent left is reaped within this */

/* A connection from below, before and after its HELLO. */
struct tree_link {
  asr_ctl_conn_t c;
  asr_loop_timer_t timer; /* the HELLO deadline, then its own freeing */
  asr_tree_node_t *n;
  asr_tree_child_t *child; /* once its HELLO was right */
  int dead;                /* closed; freed by its timer */
  struct tree_link *next;  /* n->links */
};
typedef struct tree_link link_t;

/* A fence being gathered: its entries so far, and whose they are. */
struct tree_gather {
  uint32_t seq;
  int got;      /* parties heard */
  uint32_t cnt; /* entries */
  asr_buf_t entries;
  uint8_t *seen; /* nhosts: a blob of host h is in */
  struct tree_gather *next;
};
typedef struct tree_gather gather_t;

static const char *host_name(const asr_tree_node_t *n, int h) { return n->host_names[h]; }

/* ", its parent, host X," and the like: who noticed, when it is a daemon. */
static const char *me(const asr_tree_node_t *n) { return n->host >= 0 ? host_name(n, n->host) : NULL; }

static void link_free(link_t *l) {
  for (link_t **pp = &l->n->links; *pp; pp = &(*pp)->next)
    if (*pp == l) {
      *pp = l->next;
      break;
    }
  asr_loop_timer_stop(l->n->loop, &l->timer);
  asr_ctl_close(&l->c);
  free(l);
}

static void link_free_cb(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  link_free(t->arg);
}

/* Closed now, freed at the next iteration (we may be in its callback). */
static void link_discard(link_t *l) {
  asr_loop_timer_stop(l->n->loop, &l->timer);
  asr_ctl_close(&l->c);
  l->dead = 1;
  asr_loop_timer_start(l->n->loop, &l->timer, 0, link_free_cb, l);
}

int asr_tree_node_active(const asr_tree_node_t *n) {
  for (int i = 0; i < n->nchildren; i++)
    if (n->children[i].conn || n->children[i].agent > 0) return 1;
  return 0;
}

static void check_idle(asr_tree_node_t *n) {
  if (!asr_tree_node_active(n) && n->ops->idle) n->ops->idle(n);
}

/* The child's connection is gone. */
static void unlink_child(asr_tree_child_t *ch) {
  asr_loop_timer_stop(ch->node->loop, &ch->drain_timer);
  if (!ch->link) return;
  link_t *l = ch->link;
  ch->link = NULL;
  ch->conn = NULL;
  l->child = NULL;
  link_discard(l);
}

/* The one place a child ends: over() once, and a child given up on has its
 * agent killed, so that the end of the job does not wait for it (its reap
 * comes through the loop, or asr_tree_node_fini). */
static void child_over(asr_tree_child_t *ch, const char *why) {
  asr_tree_node_t *n = ch->node;
  if (ch->state == ASR_TREE_CHILD_OVER) return;
  ch->state = ASR_TREE_CHILD_OVER;
  unlink_child(ch);
  if (!ch->done && ch->agent > 0) {
    asr_debug(n->role, "killing the agent of host %s (pid %d): the daemon is given up on",
              host_name(n, ch->host), (int)ch->agent);
    kill(ch->agent, SIGKILL);
  }
  n->ops->over(n, ch, why);
  check_idle(n);
}

void asr_tree_node_lose(asr_tree_node_t *n, asr_tree_child_t *ch, const char *why) {
  (void)n;
  child_over(ch, why);
}

/* --- fences ------------------------------------------------------------------------ */

static void gather_free(gather_t *g) {
  asr_buf_free(&g->entries);
  free(g->seen);
  free(g);
}

static gather_t *gather_slot(asr_tree_node_t *n, uint32_t seq) {
  gather_t **pp = &n->gathers;
  for (; *pp; pp = &(*pp)->next)
    if ((*pp)->seq == seq) return *pp;
  gather_t *g = calloc(1, sizeof *g);
  if (!g || !(g->seen = calloc((size_t)n->nhosts, 1))) {
    free(g);
    n->ops->error(n, "out of memory gathering a fence");
    return NULL;
  }
  g->seq = seq;
  if (seq + 1 > n->seq_next) n->seq_next = seq + 1;
  *pp = g; /* each party sends its fences in order: the list stays sorted */
  return g;
}

/* The oldest fence, once whole, goes to the owner. Each party sends its
 * fences in order, so the oldest is always the first to be whole. */
static void gather_check(asr_tree_node_t *n) {
  while (n->gathers && n->gathers->got >= n->gather_need) {
    gather_t *g = n->gathers;
    n->gathers = g->next;
    n->ops->fence(n, g->seq, g->cnt, g->entries.data + g->entries.off, asr_buf_pending(&g->entries));
    gather_free(g);
  }
}

/* One blob into g: host's, once, and a host with ranks. 0, ASR_EPROTO, or
 * ASR_ENOMEM (the owner told). */
static int gather_put(asr_tree_node_t *n, gather_t *g, uint32_t host, const uint8_t *blob, size_t len) {
  if (host >= (uint32_t)n->nhosts || !n->host_ranks[host] || g->seen[host]) return ASR_EPROTO;
  if (n->live && !n->live[host]) return 0; /* a host with no rank alive any more: late, dropped */
  if (asr_buf_put_u32(&g->entries, host) || asr_buf_put_bytes(&g->entries, blob, len)) {
    n->ops->error(n, "out of memory gathering a fence");
    return ASR_ENOMEM;
  }
  g->seen[host] = 1;
  g->cnt++;
  return 0;
}

void asr_tree_node_fence_local(asr_tree_node_t *n, const uint8_t *blob, size_t len) {
  gather_t *g = gather_slot(n, n->gather_local++);
  if (!g || gather_put(n, g, (uint32_t)n->host, blob, len)) return;
  g->got++;
  gather_check(n);
}

static void child_fence(asr_tree_child_t *ch, const asr_ctl_msg_t *m) {
  asr_tree_node_t *n = ch->node;
  char why[300];
  n->fence_msgs_in++;
  if (!ch->has_ranks || (m->type == ASR_CTL_FENCE && ch->has_below)) {
    snprintf(why, sizeof why, "asrd on host %s sent a %s: %s", host_name(n, ch->host),
             asr_ctl_type_name(m->type),
             !ch->has_ranks ? "no host of its subtree has ranks"
                            : "a parent gathers its subtree's blobs (FENCE_SUB)");
    child_over(ch, why);
    return;
  }
  if (!ch->party) { /* its subtree has no rank alive: sent before it knew */
    asr_debug(n->role, "a fence of host %s, which takes no part in fences any more: dropped",
              host_name(n, ch->host));
    return;
  }
  gather_t *g = gather_slot(n, ch->fences++);
  if (!g) return;
  int rc = 0;
  uint32_t h = (uint32_t)ch->host;
  if (m->type == ASR_CTL_FENCE) {
    rc = gather_put(n, g, h, m->u.fence.data, m->u.fence.len);
  } else {
    /* its subtree's blobs, each of a host beneath it with ranks, once */
    const uint8_t *p = m->u.fence_sub.entries, *blob;
    size_t len = m->u.fence_sub.len, blen;
    while (rc == 0 && asr_ctl_fence_sub_next(&p, &len, &h, &blob, &blen))
      rc = h < (uint32_t)n->nhosts && asr_tree_in_subtree(n->radix, ch->host, (int)h)
               ? gather_put(n, g, h, blob, blen)
               : ASR_EPROTO;
  }
  if (rc == ASR_EPROTO) {
    snprintf(why, sizeof why,
             "asrd on host %s sent a fence blob of host %u: not of its subtree, of no ranks, or twice",
             host_name(n, ch->host), h);
    child_over(ch, why);
    return;
  }
  if (rc) return;
  g->got++;
  gather_check(n);
}

int asr_tree_node_fence_done(asr_tree_node_t *n, const asr_ctl_msg_t *m) {
  int sent = 0;
  for (int i = 0; i < n->nchildren; i++)
    if (n->children[i].conn && n->children[i].party && asr_ctl_send(n->children[i].conn, m) == 0) sent++;
  return sent;
}

/* Whether host h, or a host in its subtree, has a rank alive. */
static int subtree_live(const asr_tree_node_t *n, int top) {
  for (int h = top; h < n->nhosts; h++)
    if (n->live[h] && asr_tree_in_subtree(n->radix, top, h)) return 1;
  return 0;
}

void asr_tree_node_host_live(asr_tree_node_t *n, int h, int live) {
  if (!n->live || h < 0 || h >= n->nhosts || !n->host_ranks[h] || n->live[h] == (uint8_t) !!live) return;
  n->live[h] = (uint8_t) !!live;
  int need = 0;
  if (n->host >= 0 && n->host_ranks[n->host]) {
    /* this host back among the parties: its next fence is the node's next */
    if (h == n->host && live) n->gather_local = n->seq_next;
    need += n->live[n->host];
  }
  for (int i = 0; i < n->nchildren; i++) {
    asr_tree_child_t *ch = &n->children[i];
    int party = ch->has_ranks && subtree_live(n, ch->host);
    if (party && !ch->party) ch->fences = n->seq_next; /* (the same, for a subtree) */
    ch->party = party;
    need += party;
  }
  asr_debug(n->role, "host %s %s: %d part%s in each fence", host_name(n, h),
            live ? "has a rank alive again" : "has no rank alive", need, need == 1 ? "y" : "ies");
  n->gather_need = need;
  gather_check(n);
}

/* --- what a child says ---------------------------------------------------------------- */

static void on_child_msg(asr_ctl_conn_t *c, asr_ctl_msg_t *m, void *arg) {
  (void)c;
  link_t *l = arg;
  asr_tree_child_t *ch = l->child;
  if (!ch) return;
  asr_tree_node_t *n = ch->node;
  n->msgs_in++;
  switch (m->type) {
    case ASR_CTL_HEARTBEAT: return; /* its bytes already counted as a sign of life */
    case ASR_CTL_FENCE:
    case ASR_CTL_FENCE_SUB: child_fence(ch, m); return;
    case ASR_CTL_ROUTED:
    case ASR_CTL_LOST: {
      /* its subtree's, already wrapped */
      uint32_t h = m->type == ASR_CTL_ROUTED ? m->u.routed.host : m->u.lost.host;
      if (h >= (uint32_t)n->nhosts || (int)h == ch->host ||
          !asr_tree_in_subtree(n->radix, ch->host, (int)h)) {
        char why[300];
        snprintf(why, sizeof why, "asrd on host %s relayed a %s of host %u, not one beneath it",
                 host_name(n, ch->host), asr_ctl_type_name(m->type), h);
        child_over(ch, why);
        return;
      }
      break;
    }
    default: break;
  }
  n->ops->msg(n, ch, m);
}

static void on_child_close(asr_ctl_conn_t *c, int err, const char *how, void *arg) {
  (void)c;
  link_t *l = arg;
  asr_tree_child_t *ch = l->child;
  if (!ch) {
    link_discard(l);
    return;
  }
  asr_tree_node_t *n = ch->node;
  char why[700];
  if (err == ASR_EPROTO)
    snprintf(why, sizeof why, "asrd on host %s: %s", host_name(n, ch->host), how);
  else if (ch->reaped && WIFSIGNALED(ch->reaped_status))
    snprintf(why, sizeof why, "asrd on host %s died (signal %d) before the job finished",
             host_name(n, ch->host), WTERMSIG(ch->reaped_status));
  else if (ch->reaped)
    snprintf(why, sizeof why, "asrd on host %s died (status %d) before the job finished",
             host_name(n, ch->host), WEXITSTATUS(ch->reaped_status));
  else if (me(n))
    snprintf(
        why, sizeof why,
        "lost the connection to asrd on host %s before the job finished (its parent, host %s, saw it end)",
        host_name(n, ch->host), me(n));
  else
    snprintf(why, sizeof why, "lost the connection to asrd on host %s before the job finished",
             host_name(n, ch->host));
  child_over(ch, why);
}

/* --- call back ----------------------------------------------------------------------- */

static void on_hello_timeout(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  link_t *l = t->arg;
  asr_warn(l->n->role, "a control connection sent no HELLO within %d s; closed", HELLO_MS / 1000);
  link_discard(l);
}

static void on_hello_close(asr_ctl_conn_t *c, int err, const char *why, void *arg) {
  (void)c, (void)err, (void)why;
  link_discard(arg);
}

/* A connection's first message must be a HELLO with the job's secret and
 * the index of a child still launching (the early local daemon's index
 * comes from the JOB: ahead_index). */
static void on_hello(asr_ctl_conn_t *c, asr_ctl_msg_t *m, void *arg) {
  link_t *l = arg;
  asr_tree_node_t *n = l->n;
  asr_tree_child_t *ch = NULL;
  if (m->type == ASR_CTL_HELLO && strcmp(m->u.hello.secret_hex, n->secret_hex) == 0) {
    uint32_t in = m->u.hello.index;
    int h = in == ASR_CTL_INDEX_AHEAD ? n->ahead_index : in < (uint32_t)n->nhosts ? (int)in : -1;
    ch = asr_tree_node_child(n, h);
    if (ch && ch->state != ASR_TREE_CHILD_LAUNCHING) ch = NULL;
  }
  if (!ch) {
    asr_warn(n->role,
             "refused a control connection that did not identify itself as one of this job's daemons");
    link_discard(l);
    return;
  }
  asr_loop_timer_stop(n->loop, &l->timer);
  asr_ctl_set_owner(c, on_child_msg, on_child_close, l);
  l->child = ch;
  ch->link = l;
  ch->conn = &l->c;
  ch->state = ASR_TREE_CHILD_UP;
  n->links_up++;
  n->ops->up(n, ch, m);
}

static void on_listener(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)events;
  asr_tree_node_t *n = io->arg;
  for (int i = 0; i < 64; i++) {
    int fd = accept4(io->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    link_t *l = calloc(1, sizeof *l);
    if (!l || asr_ctl_start(loop, &l->c, fd, on_hello, on_hello_close, l) != 0) {
      close(fd);
      free(l);
      continue;
    }
    l->n = n;
    l->next = n->links;
    n->links = l;
    asr_loop_timer_start(loop, &l->timer, HELLO_MS, on_hello_timeout, l);
  }
}

int asr_tree_node_listen(asr_tree_node_t *n, int fd) {
  if (n->nlisten >= 2) return ASR_EINVAL;
  int rc = asr_loop_io_start(n->loop, &n->lio[n->nlisten], fd, ASR_LOOP_READ, on_listener, n);
  if (rc == 0) n->nlisten++;
  return rc;
}

int asr_tree_node_send_job(asr_tree_node_t *n, asr_tree_child_t *ch, const asr_ctl_job_t *job) {
  asr_ctl_msg_t m = {.type = ASR_CTL_JOB};
  m.u.job = *job; /* read only: the template, for ch's host */
  m.u.job.index = (uint32_t)ch->host;
  int rc = ch->conn ? asr_ctl_send(ch->conn, &m) : ASR_ENOTCONN;
  if (rc) {
    char why[300];
    snprintf(why, sizeof why, "cannot send the job to host %s: %s", host_name(n, ch->host), asr_strerror(rc));
    child_over(ch, why);
    return rc;
  }
  for (uint32_t s = 1; s <= 2; s++)
    if (n->out_closed[s]) {
      asr_ctl_msg_t g = {.type = ASR_CTL_OUTPUT_CLOSED, .u.closed.stream = s};
      (void)asr_ctl_send(ch->conn, &g);
    }
  return 0;
}

void asr_tree_node_output_closed(asr_tree_node_t *n, int stream) {
  if (stream < 1 || stream > 2 || n->out_closed[stream]) return;
  n->out_closed[stream] = 1;
  asr_ctl_msg_t m = {.type = ASR_CTL_OUTPUT_CLOSED, .u.closed.stream = (uint32_t)stream};
  asr_tree_node_bcast(n, &m);
}

/* --- the agents, heartbeats, deadline ---------------------------------------------- */

static void on_drain_timeout(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  asr_tree_child_t *ch = t->arg;
  char why[300];
  int st = ch->reaped_status;
  snprintf(why, sizeof why, "asrd on host %s died (%s %d) before the job finished",
           host_name(ch->node, ch->host), WIFSIGNALED(st) ? "signal" : "status",
           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  child_over(ch, why); /* what it had sent came; its connection did not end */
}

static void on_agent_exit(asr_loop_t *loop, asr_loop_pid_t *p, int have_status, int st) {
  asr_tree_child_t *ch = p->arg;
  asr_tree_node_t *n = ch->node;
  pid_t pid = ch->agent;
  if (!have_status) st = 0;
  ch->agent = 0;
  ch->reaped = 1;
  ch->reaped_status = st;
  /* A daemon killed cannot remove its PMIx directory. One forked here (or
   * whose agent became the daemon: "ip netns exec", tests/netns/agent.sh)
   * left it on this host, and its pid is ours until now (just reaped), so
   * asrd.PID.* are its. Under ssh or srun no directory here has the pid. */
  if (WIFSIGNALED(st)) asrd_dir_remove_of(pid);
  n->ops->reaped(n, ch, pid, st);
  if (ch->state == ASR_TREE_CHILD_LAUNCHING) {
    char why[1600];
    n->ops->agent_why(n, ch, st, why, sizeof why);
    child_over(ch, why);
    return;
  }
  if (ch->state == ASR_TREE_CHILD_UP && !ch->done) {
    /* Its last messages (DONE among them) may still sit in its socket: the
     * connection ends, or a bounded wait does. */
    asr_loop_timer_start(loop, &ch->drain_timer, DRAIN_MS, on_drain_timeout, ch);
    return;
  }
  asr_debug(n->role, "the agent of host %s ended", host_name(n, ch->host));
  check_idle(n);
}

int asr_tree_node_watch(asr_tree_node_t *n, asr_tree_child_t *ch, pid_t pid) {
  ch->agent = pid;
  return asr_loop_pid_start(n->loop, &ch->agent_watch, pid, 1, on_agent_exit, ch);
}

/* The heartbeat rule counts only time in which this node itself ran: a
 * tick late by more than a heartbeat period means it was stopped (Ctrl-Z,
 * SIGSTOP) or starved, and its children's silence meanwhile says nothing
 * of them (their heartbeats wait unread in the sockets); that gap is
 * forgiven. The node looks for silence every CHECK_MS, a quarter of the
 * heartbeat period, so that a host that falls silent is given up on within
 * the heartbeat timeout plus CHECK_MS of its last word (issue 50's bound,
 * the timeout plus 1 s, with room for the news to travel); it sends its
 * own heartbeat every HEARTBEAT_MS. */
#define CHECK_MS (HEARTBEAT_MS / 4)

static void on_tick(asr_loop_t *loop, asr_loop_timer_t *t) {
  asr_tree_node_t *n = t->arg;
  uint64_t now = asr_loop_update_now(loop);
  uint64_t gap =
      n->last_tick_ms && now - n->last_tick_ms > 2 * HEARTBEAT_MS ? now - n->last_tick_ms - CHECK_MS : 0;
  n->last_tick_ms = now;
  int beat = now - n->last_beat_ms >= HEARTBEAT_MS;
  if (beat) n->last_beat_ms = now;
  for (int i = 0; i < n->nchildren; i++) {
    asr_tree_child_t *ch = &n->children[i];
    if (!ch->conn) continue;
    if (gap) ch->conn->last_rx_ms = ch->conn->last_rx_ms + gap < now ? ch->conn->last_rx_ms + gap : now;
    /* a child that is done still hears from us: it serves its KV store
     * until SHUTDOWN, and takes silence for our end */
    if (beat) (void)asr_ctl_send_empty(ch->conn, ASR_CTL_HEARTBEAT);
    if (!ch->done && now - ch->conn->last_rx_ms > n->heartbeat_timeout_ms) {
      /* A host cut off or frozen: TCP would not notice for many minutes. */
      char why[500];
      if (me(n))
        snprintf(
            why, sizeof why,
            "lost contact with asrd on host %s: nothing heard for %llu s (host down or network cut?); its "
            "parent, host %s, gave up on it",
            host_name(n, ch->host), (unsigned long long)(n->heartbeat_timeout_ms / 1000), me(n));
      else
        snprintf(why, sizeof why,
                 "lost contact with asrd on host %s: nothing heard for %llu s (host down or network cut?)",
                 host_name(n, ch->host), (unsigned long long)(n->heartbeat_timeout_ms / 1000));
      child_over(ch, why);
    }
  }
  asr_loop_timer_start(loop, t, CHECK_MS, on_tick, n);
}

static void on_deadline(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  asr_tree_node_t *n = t->arg;
  for (int i = 0; i < n->nchildren; i++)
    if (n->children[i].state == ASR_TREE_CHILD_LAUNCHING) {
      char why[300];
      if (me(n))
        snprintf(why, sizeof why, "asrd on host %s did not call back within %d s (its parent: host %s)",
                 host_name(n, n->children[i].host), CALLBACK_MS / 1000, me(n));
      else
        snprintf(why, sizeof why, "asrd on host %s did not call back within %d s",
                 host_name(n, n->children[i].host), CALLBACK_MS / 1000);
      child_over(&n->children[i], why);
    }
}

void asr_tree_node_run(asr_tree_node_t *n) {
  n->last_tick_ms = n->last_beat_ms = asr_loop_now(n->loop);
  asr_loop_timer_start(n->loop, &n->tick, CHECK_MS, on_tick, n);
  asr_loop_timer_start(n->loop, &n->deadline, CALLBACK_MS, on_deadline, n);
}

/* --- going down ------------------------------------------------------------------------ */

asr_tree_child_t *asr_tree_node_child(asr_tree_node_t *n, int h) {
  if (n->nchildren <= 0 || h < n->children[0].host || h > n->children[n->nchildren - 1].host) return NULL;
  return &n->children[h - n->children[0].host];
}

int asr_tree_node_send(asr_tree_node_t *n, int h, const asr_ctl_msg_t *m) {
  asr_tree_child_t *ch = asr_tree_node_child(n, asr_tree_child_toward(n->radix, n->host, h));
  if (!ch || !ch->conn) return ASR_ENOTCONN;
  return ch->host == h ? asr_ctl_send(ch->conn, m) : asr_ctl_send_routed(ch->conn, (uint32_t)h, m);
}

int asr_tree_node_relay(asr_tree_node_t *n, const asr_ctl_msg_t *m) {
  uint32_t h = m->u.routed.host;
  if (h == ASR_CTL_ALL_HOSTS) {
    for (int i = 0; i < n->nchildren; i++)
      if (n->children[i].conn) (void)asr_ctl_send(n->children[i].conn, m);
    return 0;
  }
  if (h >= (uint32_t)n->nhosts) return ASR_EINVAL;
  asr_tree_child_t *ch = asr_tree_node_child(n, asr_tree_child_toward(n->radix, n->host, (int)h));
  return ch && ch->conn ? asr_ctl_send(ch->conn, m) : ASR_ENOTCONN;
}

void asr_tree_node_bcast(asr_tree_node_t *n, const asr_ctl_msg_t *m) {
  for (int i = 0; i < n->nchildren; i++) {
    asr_tree_child_t *ch = &n->children[i];
    if (!ch->conn) continue;
    if (ch->has_below)
      (void)asr_ctl_send_routed(ch->conn, ASR_CTL_ALL_HOSTS, m);
    else
      (void)asr_ctl_send(ch->conn, m);
  }
}

void asr_tree_node_shutdown(asr_tree_node_t *n, const asr_ctl_msg_t *m, int leaf_ms, int parent_ms) {
  asr_loop_timer_stop(n->loop, &n->tick);
  asr_loop_timer_stop(n->loop, &n->deadline);
  asr_tree_node_bcast(n, m);
  for (int i = 0; i < n->nchildren; i++)
    if (n->children[i].conn)
      asr_ctl_finish(n->children[i].conn, n->children[i].has_below ? parent_ms : leaf_ms);
}

void asr_tree_node_flush(asr_tree_node_t *n) {
  for (int i = 0; i < n->nchildren; i++)
    if (n->children[i].conn) asr_ctl_flush(n->children[i].conn);
}

void asr_tree_node_close(asr_tree_node_t *n) {
  if (!n->ops) return; /* never set up: a daemon that got no JOB has no children */
  for (int i = 0; i < n->nchildren; i++) {
    asr_tree_child_t *ch = &n->children[i];
    ch->state = ASR_TREE_CHILD_OVER;
    unlink_child(ch);
  }
  check_idle(n);
}

/* --- life ------------------------------------------------------------------------------ */

int asr_tree_node_init(asr_tree_node_t *n, asr_loop_t *loop, const asr_tree_node_ops_t *ops, void *owner,
                       const char *role, int host, int radix, int nhosts, const char *const *host_names,
                       const uint8_t *host_ranks, const char *secret_hex, uint64_t heartbeat_timeout_ms,
                       char *err, size_t errlen) {
  *n = (asr_tree_node_t){.loop = loop,
                         .ops = ops,
                         .owner = owner,
                         .role = role,
                         .host = host,
                         .radix = radix,
                         .nhosts = nhosts,
                         .host_names = host_names,
                         .host_ranks = host_ranks,
                         .secret_hex = secret_hex,
                         .ahead_index = -1,
                         .heartbeat_timeout_ms = heartbeat_timeout_ms};
  int k = asr_tree_nchildren(radix, nhosts, host), first = asr_tree_first_child(radix, host);
  n->gather_need = host >= 0 && host_ranks[host];
  n->live = malloc((size_t)nhosts);
  if (!n->live) return asr_errf(err, errlen, ASR_ENOMEM, "out of memory for %d hosts", nhosts);
  memcpy(n->live, host_ranks, (size_t)nhosts);
  if (k <= 0) return 0;
  n->children = calloc((size_t)k, sizeof *n->children);
  if (!n->children) return asr_errf(err, errlen, ASR_ENOMEM, "out of memory for %d children", k);
  for (int i = 0; i < k; i++) {
    asr_tree_child_t *ch = &n->children[i];
    ch->node = n;
    ch->host = first + i;
    ch->has_below = asr_tree_nchildren(radix, nhosts, ch->host) > 0;
    for (int h = ch->host; h < nhosts && !ch->has_ranks; h++)
      ch->has_ranks = host_ranks[h] && asr_tree_in_subtree(radix, ch->host, h);
    ch->party = ch->has_ranks;
    n->gather_need += ch->has_ranks;
  }
  n->nchildren = k;
  return 0;
}

void asr_tree_node_fini(asr_tree_node_t *n, int kill_left) {
  if (!n->loop) return; /* never set up */
  asr_loop_timer_stop(n->loop, &n->tick);
  asr_loop_timer_stop(n->loop, &n->deadline);
  for (int i = 0; i < n->nlisten; i++) asr_loop_io_stop(n->loop, &n->lio[i]);
  n->nlisten = 0;
  for (int i = 0; i < n->nchildren; i++) {
    asr_tree_child_t *ch = &n->children[i];
    asr_loop_timer_stop(n->loop, &ch->drain_timer);
    asr_loop_pid_stop(n->loop, &ch->agent_watch);
    if (ch->link) ch->link->child = NULL;
    ch->link = NULL;
    ch->conn = NULL;
    if (kill_left && ch->agent > 0) kill(ch->agent, SIGKILL);
  }
  while (n->links) link_free(n->links); /* links still waiting for a HELLO, or discarded */
  /* The agents end once their connections have (under "ip netns exec" and
   * srun on their node, they are the daemons themselves), and the loop
   * reaps them; what is left here, when time ran out or the loop failed,
   * is reaped so that none outlives this process unwaited (bounded; what
   * is left dies with us: PDEATHSIG). */
  for (int waited = 0;; waited += 10) {
    int left = 0;
    for (int i = 0; i < n->nchildren; i++) {
      asr_tree_child_t *ch = &n->children[i];
      if (ch->agent <= 0) continue;
      int st = 0;
      pid_t r = waitpid(ch->agent, &st, WNOHANG);
      if (r == 0) {
        left++;
        continue;
      }
      pid_t pid = ch->agent;
      ch->agent = 0;
      if (r == pid) {
        ch->reaped = 1;
        ch->reaped_status = st;
        if (WIFSIGNALED(st)) asrd_dir_remove_of(pid);
        n->ops->reaped(n, ch, pid, st);
      }
    }
    if (!left || waited >= REAP_MS) break;
    usleep(10000);
  }
  while (n->gathers) {
    gather_t *g = n->gathers;
    n->gathers = g->next;
    gather_free(g);
  }
  free(n->children);
  n->children = NULL;
  n->nchildren = 0;
  free(n->live);
  n->live = NULL;
}
