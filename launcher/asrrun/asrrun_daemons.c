/*
 * asrrun_daemons.c -- the daemons as asrrun sees them (asrrun.h): their
 * launch, their call back, what they say, their heartbeats, their ends.
 *
 * asrrun is the root node of the tree of daemons: its children (every
 * daemon in a flat job) are supervised by the node code every interior
 * asrd runs too (tree_node.h: the listener, HELLO, heartbeats, agents,
 * fence gathering). This file is what is asrrun's own: starting them
 * through the launch backend, the JOB, what each daemon says, and each
 * daemon's state: over when its connection has ended, FINISHED after its
 * DONE, LOST before (daemon_set_state).
 *
 * In a tree of daemons (tree.h, --tree-radix) asrrun starts and connects
 * to its own children only; a daemon below one is "routed": its parent
 * starts it, checks its HELLO, hands it the JOB, and everything it says
 * arrives wrapped in ROUTED on the connection of asrrun's child above it.
 * What goes to one daemon goes down that connection wrapped the same way;
 * what goes to every daemon (KILL, SHUTDOWN, OUTPUT_CLOSED) goes once to
 * each child for its whole subtree (ROUTED to ASR_CTL_ALL_HOSTS), and a
 * fence's FENCE_DONE once to each child whose subtree took part. A parent
 * that loses a child says LOST; a child of asrrun's that is lost takes its
 * subtree with it (daemon_over names the hosts beneath it).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "asrrun.h"
#include "launch.h"
#include "tree.h"

#define CLOSE_MS 2000 /* SHUTDOWN: the connection closes within this */

static const char *const daemon_state_names[] = {"LAUNCHING", "JOINED",   "RUNNING", "DONE",
                                                 "CLOSING",   "FINISHED", "LOST"};

const char *asrrun_daemon_state_name(daemon_state_t s) {
  return s <= DAEMON_LOST ? daemon_state_names[s] : "UNKNOWN";
}

static const char *host_of(const daemon_t *d) { return d->run->map.host_names[d->index]; }

/* The one place a daemon's state changes. */
static void daemon_set_state(daemon_t *d, daemon_state_t s) {
  if (d->state == s) return;
  asr_debug("asrrun", "asrd on host %s: %s -> %s", host_of(d), asrrun_daemon_state_name(d->state),
            asrrun_daemon_state_name(s));
  d->state = s;
  if (s >= DAEMON_DONE) d->ends_owed = 0; /* it has told all it will */
  d->run->cb.daemon_changed(d->run, d);
}

static int over(const daemon_t *d) { return d->state == DAEMON_FINISHED || d->state == DAEMON_LOST; }

/* It said DONE: its ranks are done and their output delivered. */
static int did_its_part(const daemon_t *d) { return d->state >= DAEMON_DONE && d->state != DAEMON_LOST; }

/* The node reaped a daemon process of ours (status st). One killed before
 * its ranks ended could not kill them; its ranks die with it (PDEATHSIG),
 * but not what they started. A daemon forked here runs on this host: kill
 * their process groups here. (A remote daemon's pids mean nothing on this
 * host; its ranks die with it.) */
static void on_reaped(asr_tree_node_t *n, asr_tree_child_t *ch, pid_t pid, int st) {
  daemon_t *d = ch->data;
  asrrun_t *run = n->owner;
  if (pid == run->early.pid) run->early.pid = 0;
  if (WIFSIGNALED(st) && !did_its_part(d) && d->local)
    for (int i = 0; i < d->npgids; i++) kill(-d->pgids[i], SIGKILL);
  if (run->state < RUN_DONE) run->cb.daemon_changed(run, d);
}

/* Sends m to daemon d: on its own connection, or wrapped on that of the
 * child of asrrun's above it. */
static int dsend(daemon_t *d, const asr_ctl_msg_t *m) {
  if (!d->conn) return ASR_ENOTCONN;
  return asr_tree_node_send(&d->run->tree.node, d->index, m);
}

/* run->cb.ask_ends: the verdict's round (asrrun_verdict.c). */
static int ask_ends(asrrun_t *run, uint32_t id) {
  int n = 0;
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    d->ends_owed = d->conn && !over(d) && d->state >= DAEMON_JOINED && d->state < DAEMON_DONE;
    n += d->ends_owed;
  }
  asr_ctl_msg_t m = {.type = ASR_CTL_ENDS_ASK, .u.ends.id = id};
  if (n) asr_tree_node_bcast(&run->tree.node, &m);
  return n;
}

/* The daemon's connection is gone (the node lets go of its own children's;
 * a routed daemon's is its top's). */
static void drop_conn(daemon_t *d) { d->conn = NULL; }

/* "; lost with it, the N hosts beneath it in the tree (A, B, ...)" for the
 * daemons below d that are not over yet, or "". */
static void beneath(const daemon_t *d, char *out, size_t len) {
  asrrun_t *run = d->run;
  out[0] = '\0';
  int n = 0;
  for (int h = d->index + 1; h < run->map.nhosts; h++)
    if (asr_tree_in_subtree(run->tree.radix, d->index, h) && !over(&run->daemons[h])) n++;
  if (!n) return;
  size_t k = (size_t)snprintf(out, len, "; lost with it, the %d host%s beneath it in the tree (", n,
                              n > 1 ? "s" : "");
  int said = 0;
  for (int h = d->index + 1; h < run->map.nhosts && k < len; h++) {
    if (!asr_tree_in_subtree(run->tree.radix, d->index, h) || over(&run->daemons[h])) continue;
    if (k + strlen(run->map.host_names[h]) + 16 >= len) {
      k += (size_t)snprintf(out + k, len - k, ", ...");
      break;
    }
    k += (size_t)snprintf(out + k, len - k, "%s%s", said++ ? ", " : "", run->map.host_names[h]);
  }
  if (k < len) snprintf(out + k, len - k, ")");
}

/* The daemons below d, over with it: their ends are d's. */
static void below_over(daemon_t *d) {
  asrrun_t *run = d->run;
  for (int h = d->index + 1; h < run->map.nhosts; h++) {
    daemon_t *b = &run->daemons[h];
    if (!asr_tree_in_subtree(run->tree.radix, d->index, h)) continue;
    drop_conn(b);
    if (b->state >= DAEMON_DONE && b->state <= DAEMON_CLOSING) {
      daemon_set_state(b, DAEMON_FINISHED);
    } else if (!over(b)) {
      /* (when d's own end was a failure, that one was told first) */
      if (asrrun_policy_active(run) && run->state < RUN_ABORTING)
        asrrun_policy_host_lost(run, h, "its parent in the tree was lost");
      else
        run->cb.fail(run, ASRRUN_EXIT_LAUNCH,
                     "asrd on host %s ended before host %s beneath it in the tree finished", host_of(d),
                     host_of(b));
      asrrun_output_daemon_lost(run, h);
      daemon_set_state(b, DAEMON_LOST);
    }
  }
}

/* Its connection ended: the daemon is over. Before its DONE, why (the
 * node's words, or its parent's LOST) is what the user is told; in the tree
 * its subtree ends with it. */
static void daemon_over(daemon_t *d, const char *why) {
  asrrun_t *run = d->run;
  drop_conn(d);
  if (d->state >= DAEMON_DONE && d->state <= DAEMON_CLOSING) {
    daemon_set_state(d, DAEMON_FINISHED);
    below_over(d);
    return;
  }
  if (over(d)) return;
  asrrun_output_daemon_lost(run, d->index);
  char more[1600];
  beneath(d, more, sizeof more);
  /* under --on-failure continue or restart a host lost after its ranks
   * started takes only its ranks (asrrun_policy.c) */
  if (asrrun_policy_active(run) && run->state == RUN_RUNNING && d->state >= DAEMON_RUNNING) {
    asrrun_notice(run, "%s%s", why, more);
    asrrun_policy_host_lost(run, d->index, why);
  } else {
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "%s%s", why, more);
  }
  daemon_set_state(d, DAEMON_LOST);
  below_over(d);
}

/* --- fences ----------------------------------------------------------------- */

/* A fence is whole at the root: one blob of every host with ranks
 * (checked by the node: of the subtree that sent it, once). Every blob goes
 * to each daemon that took part, in host order (an allgather): once to
 * each child of asrrun's whose subtree took part (its parents pass it on). */
static void on_fence(asr_tree_node_t *n, uint32_t seq, uint32_t cnt, const uint8_t *entries, size_t len) {
  asrrun_t *run = n->owner;
  /* one blob of each host with a rank alive (all of them, unless the
   * failure policy saw some go: asr_tree_node_host_live), and maybe of a
   * host that had one when it sent it */
  int want = 0, most = 0;
  for (int h = 0; h < run->map.nhosts; h++) {
    want += n->live[h];
    most += run->daemons[h].nlocal > 0;
  }
  const uint8_t **blob = calloc((size_t)run->map.nhosts, sizeof *blob);
  size_t *blen = calloc((size_t)run->map.nhosts, sizeof *blen);
  asr_buf_t all = {0};
  if (!blob || !blen) {
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "out of memory gathering a fence");
    goto out;
  }
  if (cnt < (uint32_t)want || cnt > (uint32_t)most) {
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH,
                 "fence %u came whole with %u blobs, not one of each of the %d hosts with ranks alive", seq,
                 cnt, want);
    goto out;
  }
  const uint8_t *p = entries, *b;
  size_t left = len, bl;
  uint32_t h;
  while (asr_ctl_fence_sub_next(&p, &left, &h, &b, &bl)) {
    blob[h] = b;
    blen[h] = bl;
  }
  for (int k = 0; k < run->map.nhosts; k++)
    if (blob[k] && asr_buf_put(&all, blob[k], blen[k])) {
      run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "out of memory gathering a fence");
      goto out;
    }
  asr_ctl_msg_t m = {.type = ASR_CTL_FENCE_DONE, .u.fence = {.id = 0, .data = all.data, .len = all.len}};
  run->tree.fence_out += (uint64_t)asr_tree_node_fence_done(n, &m);
  run->tree.fences++;
  run->tree.fence_bytes += all.len;
out:
  free(blob);
  free(blen);
  asr_buf_free(&all);
}

/* Whether daemon h has a rank that reads stdin. */
static int reads_stdin(const asrrun_t *run, int h) {
  if (run->input.rank == ASR_CTL_STDIN_NONE) return 0;
  if (run->input.rank == ASR_CTL_STDIN_ALL) return run->daemons[h].nlocal > 0;
  return run->map.ranks[run->input.rank].host == h;
}

/* --- what a daemon says ------------------------------------------------------------ */

static int rank_failed_code(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 1;
}

/* A rank that exited 0 before joining a job others joined, or after joining
 * without finalizing, while other ranks still run, ends the job (mpirun and
 * srun end such jobs too: the others would wait for it forever). */
static void early_exit_check(asrrun_t *run, int rank) {
  rank_t *r = &run->ranks[rank];
  if (run->cfg.allow_early_exit || run->state >= RUN_ABORTING || !r->exited) return;
  if (asrrun_policy_active(run)) return;                            /* the policy judged it when it ended */
  if (!WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0) return; /* a failure is reported as one */
  if (r->joined == ASR_CTL_JOINED_FINALIZED || (!r->joined && !run->any_joined)) return;
  /* the last rank to end, with no other end being judged: nobody waited for it */
  if (run->ranks_exited >= run->map.nranks && !run->verdict.open) return;
  const char *host = run->map.host_names[run->map.ranks[rank].host];
  if (r->joined)
    asrrun_verdict_end(run, ASRRUN_END_LEFT, ASRRUN_EXIT_LAUNCH,
                       "rank %d exited with status 0 after joining the job, without finalizing, while other "
                       "ranks ran (host %s); ending the job (--allow-early-exit allows this)",
                       rank, host);
  else
    asrrun_verdict_end(run, ASRRUN_END_LEFT, ASRRUN_EXIT_LAUNCH,
                       "rank %d exited with status 0 without joining the job while other ranks joined it "
                       "(host %s); ending the job (--allow-early-exit allows this)",
                       rank, host);
}

static void on_joined_msg(daemon_t *d, uint32_t rank, uint32_t what, uint32_t via) {
  asrrun_t *run = d->run;
  if (rank >= (uint32_t)run->map.nranks || run->map.ranks[rank].host != d->index) {
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s sent JOINED for rank %u, not one of its ranks",
                 host_of(d), rank);
    return;
  }
  rank_t *r = &run->ranks[rank];
  if ((int)what > r->joined) r->joined = (int)what;
  r->via = (int)via;
  if (what == ASR_CTL_JOINED_INIT && asrrun_policy_active(run)) asrrun_policy_rank_joined(run, (int)rank);
  if (run->any_joined) return;
  run->any_joined = 1;
  /* ranks that left before anyone joined are judged now */
  for (int i = 0; i < run->map.nranks; i++) early_exit_check(run, i);
}

/* -v: how a rank ended and how it had joined the job, so that a rank that
 * ran as a singleton (an MPI program that saw no launcher: Open MPI or
 * MPICH that found neither PMIx nor PMI-1) stands out from a PMIx and a
 * PMI-1 rank. */
static void say_how_it_ended(daemon_t *d, int rank, int st) {
  const rank_t *r = &d->run->ranks[rank];
  char how[64];
  if (WIFSIGNALED(st))
    snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(st));
  else
    snprintf(how, sizeof how, "exited with status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  const char *via = r->via == ASR_CTL_VIA_PMI1 ? "PMI-1" : r->via == ASR_CTL_VIA_PMI2 ? "PMI-2" : "PMIx";
  if (r->joined)
    fprintf(stderr, "asrrun: rank %d (host %s) %s; it joined the job through %s and %s\n", rank, host_of(d),
            how, via, r->joined == ASR_CTL_JOINED_FINALIZED ? "finalized" : "did not finalize");
  else
    fprintf(stderr,
            "asrrun: rank %d (host %s) %s; it never joined the job (neither a PMIx nor a PMI client: an MPI "
            "program there ran as a singleton)\n",
            rank, host_of(d), how);
}

static void on_exit_msg(daemon_t *d, uint32_t rank, uint32_t status, uint32_t flags) {
  asrrun_t *run = d->run;
  if (rank >= (uint32_t)run->map.nranks || run->ranks[rank].exited) return;
  int st = (int)status;
  if (run->cfg.verbose) say_how_it_ended(d, (int)rank, st);
  run->ranks[rank].exited = 1;
  run->ranks[rank].status = st;
  run->ranks_exited++;
  if (asrrun_policy_active(run) && run->state < RUN_ABORTING) {
    asrrun_policy_rank_ended(run, d, (int)rank, st, flags);
    return;
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    early_exit_check(run, (int)rank);
    return;
  }
  int code = rank_failed_code(st);
  if (WIFSIGNALED(st))
    asrrun_verdict_end(run, asr_ctl_killed_from_outside(st) ? ASRRUN_END_KILLED : ASRRUN_END_FAILED, code,
                       "rank %u on host %s was killed by signal %d (%s); aborting the job", rank, host_of(d),
                       WTERMSIG(st), strsignal(WTERMSIG(st)));
  else if (flags & ASR_CTL_EXIT_NOT_RUN)
    asrrun_verdict_end(run, ASRRUN_END_FAILED, ASRRUN_EXIT_NOTFOUND,
                       "rank %u on host %s: program '%s' could not be executed; aborting the job", rank,
                       host_of(d), run->cfg.program);
  else
    asrrun_verdict_end(run, ASRRUN_END_FAILED, code,
                       "rank %u on host %s exited with status %d; aborting the job", rank, host_of(d),
                       WEXITSTATUS(st));
}

static void on_routed(daemon_t *top, asr_ctl_msg_t *m);
static void on_lost(daemon_t *top, asr_ctl_msg_t *m);

/* What daemon d said: on its own connection (the node's msg), or wrapped
 * in a ROUTED of the child of asrrun's above it (on_routed). */
static void handle(daemon_t *d, asr_ctl_msg_t *m) {
  asrrun_t *run = d->run;
  switch (m->type) {
    case ASR_CTL_HEARTBEAT: break;
    case ASR_CTL_STARTED:
      if (m->u.started.n > (uint32_t)d->nlocal || d->pgids) break;
      d->pgids = calloc(m->u.started.n ? m->u.started.n : 1, sizeof *d->pgids);
      for (uint32_t i = 0; d->pgids && i < m->u.started.n; i++)
        d->pgids[d->npgids++] = (pid_t)m->u.started.pids[i];
      if (d->state == DAEMON_JOINED) daemon_set_state(d, DAEMON_RUNNING);
      asrrun_report_started(run, d);
      break;
    case ASR_CTL_OUTPUT:
      asrrun_output_msg(run, d->index, (int)m->u.output.rank, (int)m->u.output.stream, m->u.output.flags,
                        m->u.output.line, m->u.output.len);
      break;
    case ASR_CTL_JOINED: on_joined_msg(d, m->u.joined.rank, m->u.joined.what, m->u.joined.via); break;
    case ASR_CTL_STDIN_CREDIT:
      if (!reads_stdin(run, d->index)) break;
      d->stdin_credit += m->u.credit.bytes;
      if (d->stdin_credit > ASR_CTL_STDIN_WINDOW)
        d->stdin_credit = ASR_CTL_STDIN_WINDOW; /* no more than lent */
      if (run->cb.stdin_taken) run->cb.stdin_taken(run, m->u.credit.bytes);
      break;
    case ASR_CTL_EXIT: on_exit_msg(d, m->u.exit.rank, m->u.exit.status, m->u.exit.flags); break;
    case ASR_CTL_ABORT: {
      int status = (int)m->u.abort.status;
      const char *msg = m->u.abort.msg;
      asrrun_verdict_end(run, ASRRUN_END_FAILED, status > 0 && status < 124 ? status : 1,
                         "rank %u on host %s called abort with status %d%s%s", m->u.abort.rank, host_of(d),
                         status, msg[0] ? ": " : "", msg);
      break;
    }
    case ASR_CTL_ENDS: asrrun_verdict_answer(run, d, m->u.ends.id); break;
    case ASR_CTL_ERROR: run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "%s", m->u.error.msg); break;
    case ASR_CTL_DONE:
      if (d->child) d->child->done = 1; /* its end is no loss, nor its silence */
      if (d->state < DAEMON_DONE) daemon_set_state(d, DAEMON_DONE);
      break;
    case ASR_CTL_REPORT:
      if (run->cb.on_report) run->cb.on_report(run, d, m);
      break;
    case ASR_CTL_CLOCK_ASK: {
      /* answered at once, traced or not: the daemon's round trip bounds
       * the offset it works out (asrd_trace.c) */
      asr_ctl_msg_t a = {.type = ASR_CTL_CLOCK,
                         .u.clock = {.seq = m->u.clock.seq, .t = m->u.clock.t, .answer = asr_time_ns()}};
      (void)dsend(d, &a);
      break;
    }
    case ASR_CTL_TRACE:
    case ASR_CTL_TRACE_END:
      if (run->cb.on_trace) run->cb.on_trace(run, d, m);
      break;
    case ASR_CTL_METRICS:
      if (run->cb.on_metrics) run->cb.on_metrics(run, d, m);
      break;
    case ASR_CTL_ROUTED:
      if (!d->routed) {
        on_routed(d, m);
        break;
      }
      goto unexpected;
    case ASR_CTL_LOST:
      if (!d->routed) {
        on_lost(d, m);
        break;
      }
      goto unexpected;
    default:
    unexpected:
      run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s sent an unexpected %s message", host_of(d),
                   asr_ctl_type_name(m->type));
  }
}

/* --- the tree: what a child of asrrun's relays ------------------------------------ */

/* Whether host h is below top (a child of asrrun's) in the tree. */
static int below(const daemon_t *top, uint32_t h) {
  return h < (uint32_t)top->run->map.nhosts && (int)h != top->index &&
         asr_tree_in_subtree(top->run->tree.radix, top->index, (int)h);
}

/* Daemon d called back (its own HELLO, or its parent's relayed): conn is
 * how it is reached (its own, or its top's). One that calls back while the
 * job is ending ends too: 0 then, else 1 (the JOB may go to it). */
static int daemon_joined(daemon_t *d, asr_ctl_conn_t *conn) {
  asrrun_t *run = d->run;
  d->conn = conn;
  d->stdin_credit = ASR_CTL_STDIN_WINDOW;
  daemon_set_state(d, DAEMON_JOINED);
  asrrun_report_daemon_up(run, d, ++run->tree.daemons_up, asr_loop_now(run->loop) - run->tree.launch_ms);
  if (run->tree.daemons_up == run->map.nhosts) asr_loop_timer_stop(run->loop, &run->tree.progress);
  if (run->state < RUN_ABORTING) return 1;
  asr_ctl_msg_t k = {.type = ASR_CTL_KILL, .u.kill.sig = SIGKILL};
  (void)dsend(d, &k);
  return 0;
}

/* A routed daemon called its parent back (its parent checked the HELLO's
 * secret and sent it the JOB). */
static void routed_join(daemon_t *top, daemon_t *d, const asr_ctl_msg_t *hello) {
  asrrun_t *run = d->run;
  if (d->state != DAEMON_LAUNCHING || d->conn || hello->u.hello.index != (uint32_t)d->index ||
      strcmp(hello->u.hello.secret_hex, run->job.secret_hex) != 0) {
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s relayed a HELLO of host %s that is not right",
                 host_of(top), host_of(d));
    return;
  }
  d->top = top;
  (void)daemon_joined(d, top->conn);
}

static void on_routed(daemon_t *top, asr_ctl_msg_t *m) {
  asrrun_t *run = top->run;
  uint32_t h = m->u.routed.host;
  if (!below(top, h)) {
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s relayed a message of host %u, not one beneath it",
                 host_of(top), h);
    return;
  }
  daemon_t *d = &run->daemons[h];
  asr_ctl_msg_t in;
  char why[256];
  if (asr_ctl_msg_decode((int)m->u.routed.type, m->u.routed.data, m->u.routed.len, &in, why, sizeof why)) {
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s relayed for host %s: %s", host_of(top), host_of(d),
                 why);
    return;
  }
  if (in.type == ASR_CTL_HELLO)
    routed_join(top, d, &in);
  else if (d->conn && !over(d) && in.type != ASR_CTL_FENCE_SUB && in.type != ASR_CTL_LOST &&
           in.type != ASR_CTL_FENCE)
    handle(d, &in);
  else if (!over(d))
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s relayed an unexpected %s of host %s", host_of(top),
                 asr_ctl_type_name(in.type), host_of(d));
  asr_ctl_msg_free(&in);
}

/* A parent below lost a child: that daemon and its subtree are over. */
static void on_lost(daemon_t *top, asr_ctl_msg_t *m) {
  asrrun_t *run = top->run;
  if (!below(top, m->u.lost.host)) {
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s says host %u is lost, not one beneath it",
                 host_of(top), m->u.lost.host);
    return;
  }
  daemon_over(&run->daemons[m->u.lost.host], m->u.lost.why);
}

static void on_msg(asr_tree_node_t *n, asr_tree_child_t *ch, asr_ctl_msg_t *m) {
  (void)n;
  handle(ch->data, m);
}

/* The node is done with a child of asrrun's: why says how it ended. */
static void on_over(asr_tree_node_t *n, asr_tree_child_t *ch, const char *why) {
  (void)n;
  daemon_over(ch->data, why);
}

/* --- the JOB ------------------------------------------------------------------ */

static void send_job(daemon_t *d) {
  asrrun_t *run = d->run;
  if (run->job.master_later) { /* MASTER_ADDR is what rank 0's asrd calls from: it first */
    d->job_waits = 1;
    return;
  }
  const asr_config_t *cfg = &run->cfg;
  const asr_map_t *map = &run->map;
  uint32_t *host_of_rank = calloc((size_t)map->nranks, sizeof *host_of_rank);
  uint32_t *lnc_of_rank = calloc((size_t)map->nranks, sizeof *lnc_of_rank);
  char **hosts = calloc((size_t)map->nhosts, sizeof *hosts);
  char **env_n = calloc((size_t)cfg->nenv + 1, sizeof *env_n),
       **env_v = calloc((size_t)cfg->nenv + 1, sizeof *env_v);
  char **cores = cfg->nrf ? calloc((size_t)map->nranks, sizeof *cores) : NULL;
  if (!host_of_rank || !lnc_of_rank || !hosts || !env_n || !env_v || (cfg->nrf && !cores)) {
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "out of memory describing the job");
    goto out;
  }
  for (int h = 0; h < map->nhosts; h++) hosts[h] = (char *)map->host_names[h];
  for (int r = 0; r < map->nranks; r++) {
    host_of_rank[r] = (uint32_t)map->ranks[r].host;
    lnc_of_rank[r] = (uint32_t)map->ranks[r].lnc;
    if (cores) cores[r] = (char *)map->ranks[r].cores;
  }
  uint32_t nenv = 0;
  for (int i = 0; i < cfg->nenv; i++) {
    const char *v = cfg->env[i].has_value ? cfg->env[i].value : getenv(cfg->env[i].name);
    if (!v) continue; /* -x VAR of a variable asrrun does not have */
    env_n[nenv] = (char *)cfg->env[i].name;
    env_v[nenv++] = (char *)v;
  }
  if (cfg->metrics_port[0]) { /* --metrics-port: libasr keeps its histograms (the room was made above) */
    env_n[nenv] = "ASR_METRICS";
    env_v[nenv++] = "1";
  }
  asr_ctl_job_t job = {
      .nranks = (uint32_t)map->nranks,
      .nhosts = (uint32_t)map->nhosts,
      .index = (uint32_t)d->index,
      .host_names = hosts,
      .host_of = host_of_rank,
      .lnc_of = lnc_of_rank,
      .program = (char *)cfg->program,
      .nargs = (uint32_t)cfg->nargs,
      .args = (char **)cfg->args,
      .nenv = nenv,
      .env_names = env_n,
      .env_values = env_v,
      .bind_to = (uint32_t)cfg->bind_to,
      .report_bindings = (uint32_t)cfg->report_bindings,
      .port = (uint32_t)run->job.port,
      .provider = (char *)(cfg->provider[0]  ? cfg->provider
                           : map->nhosts > 1 ? "tcp;ofi_rxm"
                                             : "sm"),
      .nspace = run->job.nspace,
      /* the spec each asrd resolves on its host ("" = the address it reached us from) */
      .if_spec = (char *)(map->nhosts == 1 && !cfg->if_include[0] ? "127.0.0.1" : cfg->if_include),
      .heartbeat_s = (uint32_t)cfg->heartbeat_timeout_s,
      .wdir = run->job.wdir,
      .wdir_given = cfg->wdir[0] != '\0',
      .stdin_rank = run->input.rank,
      .provider_given = cfg->provider[0] != '\0',
      .map_by = (uint32_t)cfg->map_by,
      .ppr = (uint32_t)cfg->ppr,
      .cpus_per_rank = (uint32_t)cfg->cpus_per_rank,
      .cores = cores,
      .master_addr = run->job.master_addr,
      .master_port = (uint32_t)run->job.master_port,
      .tree_radix = (uint32_t)run->tree.radix,
      .tree_launch = asr_launch_for_children(asr_launch_pick(run->cfg.launcher))->id,
      .tree_agent = run->cfg.launch_agent,
      .tree_asrd = run->tree.asrd,
      .tree_ip = run->tree.ip,
      .on_failure = (uint32_t)cfg->on_failure,
      .trace = run->trace ? 1 : 0,
  };
  /* (a failure loses the daemon: on_over says why) */
  if (asr_tree_node_send_job(&run->tree.node, d->child, &job) == 0) asrrun_trace_job_sent(run, d);
out:
  free(host_of_rank);
  free(lnc_of_rank);
  free(hosts);
  free(env_n);
  free(env_v);
  free(cores);
}

/* --- call back -------------------------------------------------------------------- */

/* A child of asrrun's called back (the node checked its HELLO). */
static void on_up(asr_tree_node_t *n, asr_tree_child_t *ch, const asr_ctl_msg_t *hello) {
  (void)hello;
  asrrun_t *run = n->owner;
  daemon_t *d = ch->data;
  if (!daemon_joined(d, ch->conn)) return;
  if (run->job.master_later && d->index == run->map.ranks[0].host) {
    /* rank 0's host as the others reach it: the address its asrd called us
     * from (the job's network, as asrd's own default --if-include) */
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    if (getpeername(d->conn->fd, (struct sockaddr *)&a, &al) == 0 &&
        inet_ntop(AF_INET, &a.sin_addr, run->job.master_addr, sizeof run->job.master_addr))
      run->job.master_later = 0;
    else
      run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "cannot tell the address of host %s for MASTER_ADDR", host_of(d));
    for (int h = 0; !run->job.master_later && h < run->map.nhosts; h++)
      if (run->daemons[h].job_waits && &run->daemons[h] != d) {
        run->daemons[h].job_waits = 0;
        send_job(&run->daemons[h]);
      }
  }
  send_job(d);
}

/* --- the processes ---------------------------------------------------------- */

/* The backend that starts d: fork for a daemon of this host (d->local),
 * else the job's. */
static const asr_launch_ops_t *backend_of(const asrrun_t *run, const daemon_t *d) {
  return d->local ? &asr_launch_local : asr_launch_pick(run->cfg.launcher);
}

/* What the user is told when the process that was to start a daemon ended
 * before the daemon called back: the launch backend's words. */
static void agent_why(asr_tree_node_t *n, asr_tree_child_t *ch, int st, char *msg, size_t len) {
  asrrun_t *run = n->owner;
  daemon_t *d = ch->data;
  backend_of(run, d)->ended(host_of(d), run->cfg.launch_agent, st, msg, len);
}

static void on_error(asr_tree_node_t *n, const char *why) {
  asrrun_t *run = n->owner;
  run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "%s", why);
}

static const asr_tree_node_ops_t node_ops = {.up = on_up,
                                             .msg = on_msg,
                                             .over = on_over,
                                             .agent_why = agent_why,
                                             .reaped = on_reaped,
                                             .fence = on_fence,
                                             .error = on_error,
                                             .idle = NULL};

/* -v: a launch that takes over a second says how far it got, each second. */
static void on_progress(asr_loop_t *loop, asr_loop_timer_t *t) {
  asrrun_t *run = t->arg;
  if (run->tree.daemons_up >= run->map.nhosts || run->state >= RUN_ABORTING) return;
  asrrun_report_progress(run, run->tree.daemons_up, asr_loop_now(loop) - run->tree.launch_ms);
  asr_loop_timer_start(loop, t, 1000, on_progress, run);
}

/* The output flow control (asrrun_output.c calls these through run). */
static void give_credit(asrrun_t *run, int h, uint32_t bytes) {
  daemon_t *d = &run->daemons[h];
  if (!d->conn || over(d)) return;
  asr_ctl_msg_t m = {.type = ASR_CTL_CREDIT, .u.credit.bytes = bytes};
  (void)dsend(d, &m);
}

static void reader_gone(asrrun_t *run, int stream) { asr_tree_node_output_closed(&run->tree.node, stream); }

int asrrun_daemons_launch(asrrun_t *run, const char *asrd_local, const char *asrd_remote,
                          const char *ctl_local, const char *ctl_remote) {
  run->cb.ask_ends = ask_ends;
  char err[1024];
  run->tree.host_ranks = calloc((size_t)run->map.nhosts, 1);
  run->tree.host_ptrs = calloc((size_t)run->map.nhosts, sizeof *run->tree.host_ptrs);
  if (!run->tree.host_ranks || !run->tree.host_ptrs) {
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "out of memory for %d hosts", run->map.nhosts);
    return ASR_ENOMEM;
  }
  for (int h = 0; h < run->map.nhosts; h++) {
    run->tree.host_ranks[h] = run->daemons[h].nlocal > 0;
    run->tree.host_ptrs[h] = run->map.host_names[h];
  }
  asr_tree_node_t *n = &run->tree.node;
  int rc = asr_tree_node_init(n, run->loop, &node_ops, run, "asrrun", -1, run->tree.radix, run->map.nhosts,
                              run->tree.host_ptrs, run->tree.host_ranks, run->job.secret_hex,
                              (uint64_t)run->cfg.heartbeat_timeout_s * 1000, err, sizeof err);
  if (rc) {
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "%s", err);
    return rc;
  }
  n->ahead_index = run->early.index;
  rc = asr_tree_node_listen(n, run->tree.lfd);
  if (rc == 0 && run->early.lfd >= 0) rc = asr_tree_node_listen(n, run->early.lfd);
  if (rc) {
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "cannot watch the control port: %s", asr_strerror(rc));
    return rc;
  }
  run->tree.launch_ms = asr_loop_now(run->loop);
  if (run->cfg.verbose) asr_loop_timer_start(run->loop, &run->tree.progress, 1000, on_progress, run);
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    /* in the tree, a daemon below another is that one's to start */
    d->top = &run->daemons[run->tree.radix > 0 ? asr_tree_child_toward(run->tree.radix, -1, h) : h];
    d->routed = d->top != d;
    if (d->routed) continue;
    d->child = asr_tree_node_child(n, h);
    d->child->data = d;
  }
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    if (d->routed) continue;
    pid_t pid = h == run->early.index ? run->early.pid : 0;
    if (pid <= 0) {
      const asr_launch_ops_t *ops = backend_of(run, d);
      asr_launch_args_t a = {.asrd_path = d->local ? asrd_local : asrd_remote,
                             .ctl_addr = d->local ? ctl_local : ctl_remote,
                             .secret_hex = run->job.secret_hex,
                             .host = run->map.host_names[h],
                             .agent = run->cfg.launch_agent,
                             .index = h,
                             .port = run->job.port,
                             .verbose = run->cfg.verbose};
      pid = ops->start(&a, err, sizeof err);
      if (pid < 0) {
        char msg[1200];
        snprintf(msg, sizeof msg, "cannot start asrd for host %s: %s", host_of(d), err);
        asr_tree_node_lose(n, d->child, msg);
        continue;
      }
    }
    rc = asr_tree_node_watch(n, d->child, pid);
    if (rc) {
      char msg[300];
      snprintf(msg, sizeof msg, "cannot watch asrd for host %s: %s", host_of(d), asr_strerror(rc));
      asr_tree_node_lose(n, d->child, msg);
    }
  }
  run->cb.output_credit = give_credit;
  /* what a parent in the tree starts its children with (the JOB's tree fields) */
  snprintf(run->tree.asrd, sizeof run->tree.asrd, "%s", asrd_remote);
  snprintf(run->tree.ip, sizeof run->tree.ip, "%.*s", (int)strcspn(ctl_remote, ":"), ctl_remote);
  run->cb.output_gone = reader_gone;
  asr_tree_node_run(n);
  return 0;
}

void asrrun_daemons_kill(asrrun_t *run, int sig) {
  asr_ctl_msg_t m = {.type = ASR_CTL_KILL, .u.kill.sig = (uint32_t)sig};
  asr_tree_node_bcast(&run->tree.node, &m);
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    /* a daemon that never called back cannot be told: after SIGKILL its
     * local process is killed directly */
    if (sig == SIGKILL && d->state == DAEMON_LAUNCHING && d->child && d->child->agent > 0)
      kill(d->child->agent, SIGKILL);
  }
}

int asrrun_daemons_send(asrrun_t *run, int h, const asr_ctl_msg_t *m) {
  daemon_t *d = &run->daemons[h];
  if (!d->conn || over(d) || d->state < DAEMON_JOINED) return ASR_ENOTCONN;
  return dsend(d, m);
}

int asrrun_daemons_ask(asrrun_t *run, const asr_ctl_msg_t *m, int *expect) {
  int asked = 0;
  for (int h = 0; h < run->map.nhosts; h++) {
    expect[h] = run->daemons[h].nlocal > 0 && asrrun_daemons_send(run, h, m) == 0;
    if (!expect[h]) continue;
    asked++;
    asr_ctl_flush(run->daemons[h].conn); /* now: the answers' clock runs */
  }
  return asked;
}

void asrrun_daemons_flush(asrrun_t *run) { asr_tree_node_flush(&run->tree.node); }

void asrrun_daemons_shutdown(asrrun_t *run) {
  asr_ctl_msg_t m = {.type = ASR_CTL_SHUTDOWN};
  /* a parent closes once its children have: each level's close is bounded */
  int depth = asr_tree_depth(run->tree.radix, run->map.nhosts - 1);
  asr_tree_node_shutdown(&run->tree.node, &m, CLOSE_MS, CLOSE_MS * depth);
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    if (d->conn && d->state == DAEMON_DONE) daemon_set_state(d, DAEMON_CLOSING);
  }
}

int asrrun_daemons_all_done(const asrrun_t *run) {
  for (int h = 0; h < run->map.nhosts; h++)
    if (run->daemons[h].state < DAEMON_DONE) return 0;
  return 1;
}

/* A daemon given up on (LOST) is not waited for: the node killed its agent,
 * and asrrun_daemons_stop reaps it. */
int asrrun_daemons_all_ended(const asrrun_t *run) {
  for (int h = 0; h < run->map.nhosts; h++) {
    const daemon_t *d = &run->daemons[h];
    if (d->conn || (d->child && d->child->agent > 0 && d->state != DAEMON_LOST)) return 0;
  }
  return 1;
}

void asrrun_daemons_say_unended(const asrrun_t *run, int waited_ms) {
  for (int h = 0; h < run->map.nhosts; h++) {
    const daemon_t *d = &run->daemons[h];
    if (d->conn || (d->child && d->child->agent > 0 && d->state != DAEMON_LOST))
      asr_warn("asrrun", "asrd on host %s (%s) did not end within %d s of the job's end; killing it",
               host_of(d), asrrun_daemon_state_name(d->state), waited_ms / 1000);
  }
}

void asrrun_daemons_stdin(asrrun_t *run, const uint8_t *p, size_t n) {
  asr_ctl_msg_t m = {.type = ASR_CTL_STDIN, .u.input = {.data = p, .len = n}};
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    if (!reads_stdin(run, h)) continue;
    d->stdin_credit -= (int64_t)n;
    if (d->conn && !over(d)) (void)dsend(d, &m);
  }
}

int64_t asrrun_daemons_stdin_room(const asrrun_t *run) {
  int64_t room = -1;
  for (int h = 0; h < run->map.nhosts; h++) {
    const daemon_t *d = &run->daemons[h];
    /* a daemon that is gone takes nothing more: it does not hold the others */
    if (!reads_stdin(run, h) || !d->conn || over(d)) continue;
    if (room < 0 || d->stdin_credit < room) room = d->stdin_credit;
  }
  return room < 0 ? 0 : room;
}

int asrrun_daemons_stdin_ready(const asrrun_t *run) {
  for (int h = 0; h < run->map.nhosts; h++)
    if (reads_stdin(run, h) && run->daemons[h].state < DAEMON_RUNNING) return 0;
  return 1;
}

void asrrun_daemons_stop(asrrun_t *run) {
  asrrun_verdict_stop(run);
  asr_loop_timer_stop(run->loop, &run->tree.progress);
  for (int h = 0; run->daemons && h < run->map.nhosts; h++) drop_conn(&run->daemons[h]);
  /* bounded waits are over: what is left is killed and reaped */
  asr_tree_node_fini(&run->tree.node, 1);
  for (int h = 0; run->daemons && h < run->map.nhosts; h++) {
    run->daemons[h].child = NULL;
    free(run->daemons[h].pgids);
  }
  free(run->tree.host_ranks);
  free(run->tree.host_ptrs);
  run->tree.host_ranks = NULL;
  run->tree.host_ptrs = NULL;
}
