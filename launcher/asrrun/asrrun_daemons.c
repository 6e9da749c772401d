/*
 * asrrun_daemons.c -- the daemons as asrrun sees them (asrrun.h): their
 * launch, their call back, what they say, their heartbeats, their ends.
 *
 * A new control connection must open with a HELLO carrying the job's
 * secret (and a host index that has no connection yet) within HELLO_MS;
 * then it is that daemon's, the JOB goes to it, and everything it says
 * arrives in on_msg. Every daemon process (asrd forked here, or the agent
 * or srun that runs it elsewhere) is our child, watched through a pid
 * source; a daemon is over when its connection has ended: FINISHED after
 * its DONE, LOST before (daemon_set_state).
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
#include "asrd_dir.h"
#include "asrrun.h"
#include "launch.h"
#include "tree.h"

#define HEARTBEAT_MS 1000
#define HELLO_MS 5000     /* a new connection's HELLO */
#define CALLBACK_MS 30000 /* every daemon calls back within this */
#define DRAIN_MS 1000     /* a daemon reaped before DONE: its last messages */
#define CLOSE_MS 2000     /* SHUTDOWN: the connection closes within this */

/* A control connection, before and after its HELLO. */
typedef struct {
  asr_ctl_conn_t c; /* first: a daemon's conn pointer is its link */
  asr_loop_timer_t hello_timer;
  asrrun_t *run;
  int rejected; /* freed by its timer */
} link_t;

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
  d->run->daemon_changed(d->run, d);
}

static int over(const daemon_t *d) { return d->state == DAEMON_FINISHED || d->state == DAEMON_LOST; }

/* It said DONE: its ranks are done and their output delivered. */
static int did_its_part(const daemon_t *d) { return d->state >= DAEMON_DONE && d->state != DAEMON_LOST; }

/* A daemon process of ours ended (status st). One killed before its ranks
 * ended could not kill them; its ranks die with it (PDEATHSIG), but not
 * what they started. A daemon forked here runs on this host: kill their
 * process groups here. (A remote daemon's pids mean nothing on this host;
 * its ranks die with it.) A daemon killed here could not remove its PMIx
 * directory either; its pid is ours until now (just reaped), so asrd.PID.*
 * are its. */
static void reaped(daemon_t *d, pid_t pid, int st) {
  asrrun_t *run = d->run;
  if (pid == run->early.pid) run->early.pid = 0;
  d->pid = 0;
  d->reaped = 1;
  d->reaped_status = st;
  if (WIFSIGNALED(st) && !did_its_part(d) && d->local)
    for (int i = 0; i < d->npgids; i++) kill(-d->pgids[i], SIGKILL);
  /* A daemon killed cannot remove its PMIx directory. Ours (local) left
   * it here; so did one whose agent became the daemon (exec: "ip netns
   * exec", tests/netns/agent.sh), which the end of a job whose daemon could
   * not be told (frozen, cut off) kills. Under ssh or srun no directory
   * here has the agent's pid. */
  if (WIFSIGNALED(st)) asrd_dir_remove_of(pid);
}

static void link_free(asr_loop_t *loop, link_t *l) {
  asr_loop_timer_stop(loop, &l->hello_timer);
  asr_ctl_close(&l->c);
  free(l);
}

/* Sends m to daemon d: on its own connection, or wrapped on that of the
 * child of asrrun's above it. */
static int dsend(daemon_t *d, const asr_ctl_msg_t *m) {
  if (!d->conn) return ASR_ENOTCONN;
  return d->routed ? asr_ctl_send_routed(d->conn, (uint32_t)d->index, m) : asr_ctl_send(d->conn, m);
}

/* Whether host h has daemons below it in the tree. */
static int has_below(const asrrun_t *run, int h) {
  return asr_tree_nchildren(run->tree_radix, run->map.nhosts, h) > 0;
}

/* m to every daemon that can still hear it: to each child of asrrun's, for
 * its whole subtree when it has one. */
static void bcast(asrrun_t *run, const asr_ctl_msg_t *m) {
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    if (!d->conn || over(d) || d->routed) continue;
    if (has_below(run, h))
      (void)asr_ctl_send_routed(d->conn, ASR_CTL_ALL_HOSTS, m);
    else
      (void)asr_ctl_send(d->conn, m);
  }
}

/* run->ask_ends: the verdict's round (asrrun_verdict.c). */
static int ask_ends(asrrun_t *run, uint32_t id) {
  int n = 0;
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    d->ends_owed = d->conn && !over(d) && d->state >= DAEMON_JOINED && d->state < DAEMON_DONE;
    n += d->ends_owed;
  }
  asr_ctl_msg_t m = {.type = ASR_CTL_ENDS_ASK, .u.ends.id = id};
  if (n) bcast(run, &m);
  return n;
}

/* The daemon's connection is gone (closed here or by its end). A routed
 * daemon's is its top's: only let go. */
static void drop_conn(daemon_t *d) {
  if (!d->conn) return;
  if (d->routed) {
    d->conn = NULL;
    return;
  }
  link_free(d->run->loop, (link_t *)d->conn);
  d->conn = NULL;
  asr_loop_timer_stop(d->run->loop, &d->drain_timer);
}

/* "; lost with it, the N hosts beneath it in the tree (A, B, ...)" for the
 * daemons below d that are not over yet, or "". */
static void beneath(const daemon_t *d, char *out, size_t len) {
  asrrun_t *run = d->run;
  out[0] = '\0';
  int n = 0;
  for (int h = d->index + 1; h < run->map.nhosts; h++)
    if (asr_tree_in_subtree(run->tree_radix, d->index, h) && !over(&run->daemons[h])) n++;
  if (!n) return;
  size_t k = (size_t)snprintf(out, len, "; lost with it, the %d host%s beneath it in the tree (", n,
                              n > 1 ? "s" : "");
  int said = 0;
  for (int h = d->index + 1; h < run->map.nhosts && k < len; h++) {
    if (!asr_tree_in_subtree(run->tree_radix, d->index, h) || over(&run->daemons[h])) continue;
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
    if (!asr_tree_in_subtree(run->tree_radix, d->index, h)) continue;
    drop_conn(b);
    if (b->state >= DAEMON_DONE && b->state <= DAEMON_CLOSING) {
      daemon_set_state(b, DAEMON_FINISHED);
    } else if (!over(b)) {
      /* (when d's own end was a failure, that one was told first) */
      run->fail(run, ASRRUN_EXIT_LAUNCH,
                "asrd on host %s ended before host %s beneath it in the tree finished", host_of(d),
                host_of(b));
      asrrun_output_daemon_lost(run, h);
      daemon_set_state(b, DAEMON_LOST);
    }
  }
}

/* Its connection ended: the daemon is over. How it ended before its DONE
 * says what to tell the user; in the tree its subtree ends with it. */
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
  int st = d->reaped_status;
  char more[1600];
  beneath(d, more, sizeof more);
  if (why)
    run->fail(run, ASRRUN_EXIT_LAUNCH, "%s%s", why, more);
  else if (d->reaped)
    run->fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s died (%s %d) before the job finished%s", host_of(d),
              WIFSIGNALED(st) ? "signal" : "status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), more);
  else
    run->fail(run, ASRRUN_EXIT_LAUNCH, "lost the connection to asrd on host %s before the job finished%s",
              host_of(d), more);
  daemon_set_state(d, DAEMON_LOST);
  below_over(d);
}

/* --- fences ----------------------------------------------------------------- */

/* Whether a daemon of host h's subtree sent the fence's blob. */
static int subtree_fenced(const asrrun_t *run, int h) {
  for (int k = h; k < run->map.nhosts; k++)
    if (run->daemons[k].fence_in && asr_tree_in_subtree(run->tree_radix, h, k)) return 1;
  return 0;
}

/* Once every daemon with ranks has sent its blob, every blob goes to each of
 * them in host order (an allgather): in the tree once to each child of
 * asrrun's whose subtree took part (its parents pass it on). */
static void fence_check(asrrun_t *run) {
  for (int h = 0; h < run->map.nhosts; h++)
    if (run->daemons[h].nlocal > 0 && !run->daemons[h].fence_in) return;
  asr_buf_t all = {0};
  for (int h = 0; h < run->map.nhosts; h++)
    if (run->daemons[h].fence_in &&
        asr_buf_put(&all, run->daemons[h].fence_blob, run->daemons[h].fence_len)) {
      run->fail(run, ASRRUN_EXIT_LAUNCH, "out of memory gathering a fence");
      break;
    }
  asr_ctl_msg_t m = {.type = ASR_CTL_FENCE_DONE, .u.fence = {.id = 0, .data = all.data, .len = all.len}};
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    if (!d->routed && d->conn && subtree_fenced(run, h) && asr_ctl_send(d->conn, &m) == 0) run->fence_out++;
  }
  run->fences++;
  run->fence_bytes += all.len;
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    if (!d->fence_in) continue;
    free(d->fence_blob);
    d->fence_blob = NULL;
    d->fence_len = 0;
    d->fence_in = 0;
  }
  asr_buf_free(&all);
}

/* Whether daemon h has a rank that reads stdin. */
static int reads_stdin(const asrrun_t *run, int h) {
  if (run->stdin_rank == ASR_CTL_STDIN_NONE) return 0;
  if (run->stdin_rank == ASR_CTL_STDIN_ALL) return run->daemons[h].nlocal > 0;
  return run->map.ranks[run->stdin_rank].host == h;
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
    run->fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s sent JOINED for rank %u, not one of its ranks",
              host_of(d), rank);
    return;
  }
  rank_t *r = &run->ranks[rank];
  if ((int)what > r->joined) r->joined = (int)what;
  r->via = (int)via;
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
static void on_fence_sub(daemon_t *top, asr_ctl_msg_t *m);
static void on_lost(daemon_t *top, asr_ctl_msg_t *m);

static void on_msg(asr_ctl_conn_t *c, asr_ctl_msg_t *m, void *arg) {
  (void)c;
  daemon_t *d = arg;
  asrrun_t *run = d->run;
  if (!d->routed) run->ctl_in++; /* (what a routed daemon said came in its top's ROUTED) */
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
      if (run->stdin_taken) run->stdin_taken(run, m->u.credit.bytes);
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
    case ASR_CTL_FENCE:
      if (d->routed || has_below(run, d->index)) {
        /* a parent gathers its subtree's blobs: FENCE_SUB */
        run->fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s sent a FENCE, not its subtree's FENCE_SUB",
                  host_of(d));
        break;
      }
      run->fence_in++;
      if (d->fence_in) {
        run->fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s sent a second fence before the first was done",
                  host_of(d));
        break;
      }
      d->fence_blob = malloc(m->u.fence.len ? m->u.fence.len : 1);
      if (!d->fence_blob) {
        run->fail(run, ASRRUN_EXIT_LAUNCH, "out of memory for a fence of %zu bytes", m->u.fence.len);
        break;
      }
      if (m->u.fence.len) memcpy(d->fence_blob, m->u.fence.data, m->u.fence.len);
      d->fence_len = m->u.fence.len;
      d->fence_in = 1;
      fence_check(run);
      break;
    case ASR_CTL_ERROR: run->fail(run, ASRRUN_EXIT_LAUNCH, "%s", m->u.error.msg); break;
    case ASR_CTL_DONE:
      if (d->state < DAEMON_DONE) daemon_set_state(d, DAEMON_DONE);
      break;
    case ASR_CTL_REPORT:
      if (run->on_report) run->on_report(run, d, m);
      break;
    case ASR_CTL_ROUTED:
      if (!d->routed) {
        on_routed(d, m);
        break;
      }
      goto unexpected;
    case ASR_CTL_FENCE_SUB:
      if (!d->routed) {
        on_fence_sub(d, m);
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
      run->fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s sent an unexpected %s message", host_of(d),
                asr_ctl_type_name(m->type));
  }
}

/* --- the tree: what a child of asrrun's relays ------------------------------------ */

/* Whether host h is below top (a child of asrrun's) in the tree. */
static int below(const daemon_t *top, uint32_t h) {
  return h < (uint32_t)top->run->map.nhosts && (int)h != top->index &&
         asr_tree_in_subtree(top->run->tree_radix, top->index, (int)h);
}

/* A routed daemon called its parent back (its parent checked the HELLO's
 * secret and sent it the JOB). */
static void routed_join(daemon_t *top, daemon_t *d, const asr_ctl_msg_t *hello) {
  asrrun_t *run = d->run;
  if (d->state != DAEMON_LAUNCHING || d->conn || hello->u.hello.index != (uint32_t)d->index ||
      strcmp(hello->u.hello.secret_hex, run->secret_hex) != 0) {
    run->fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s relayed a HELLO of host %s that is not right",
              host_of(top), host_of(d));
    return;
  }
  d->conn = top->conn;
  d->top = top;
  d->stdin_credit = ASR_CTL_STDIN_WINDOW;
  daemon_set_state(d, DAEMON_JOINED);
  asrrun_report_daemon_up(run, d, ++run->daemons_up, asr_loop_now(run->loop) - run->launch_ms);
  if (run->daemons_up == run->map.nhosts) asr_loop_timer_stop(run->loop, &run->progress);
  if (run->state >= RUN_ABORTING) {
    asr_ctl_msg_t k = {.type = ASR_CTL_KILL, .u.kill.sig = SIGKILL};
    (void)dsend(d, &k);
  }
}

static void on_routed(daemon_t *top, asr_ctl_msg_t *m) {
  asrrun_t *run = top->run;
  uint32_t h = m->u.routed.host;
  if (!below(top, h)) {
    run->fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s relayed a message of host %u, not one beneath it",
              host_of(top), h);
    return;
  }
  daemon_t *d = &run->daemons[h];
  asr_ctl_msg_t in;
  char why[256];
  if (asr_ctl_msg_decode((int)m->u.routed.type, m->u.routed.data, m->u.routed.len, &in, why, sizeof why)) {
    run->fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s relayed for host %s: %s", host_of(top), host_of(d),
              why);
    return;
  }
  if (in.type == ASR_CTL_HELLO)
    routed_join(top, d, &in);
  else if (d->conn && !over(d) && in.type != ASR_CTL_FENCE_SUB && in.type != ASR_CTL_LOST &&
           in.type != ASR_CTL_FENCE)
    on_msg(d->conn, &in, d);
  else if (!over(d))
    run->fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s relayed an unexpected %s of host %s", host_of(top),
              asr_ctl_type_name(in.type), host_of(d));
  asr_ctl_msg_free(&in);
}

/* A subtree's blobs for the fence, gathered by its root (asrrun's child). */
static void on_fence_sub(daemon_t *top, asr_ctl_msg_t *m) {
  asrrun_t *run = top->run;
  const uint8_t *p = m->u.fence_sub.entries, *blob;
  size_t len = m->u.fence_sub.len, blen;
  uint32_t h;
  run->fence_in++;
  while (asr_ctl_fence_sub_next(&p, &len, &h, &blob, &blen)) {
    daemon_t *d = h < (uint32_t)run->map.nhosts ? &run->daemons[h] : NULL;
    if (!d || (d != top && !below(top, h)) || d->fence_in || d->nlocal == 0) {
      run->fail(run, ASRRUN_EXIT_LAUNCH,
                "asrd on host %s sent a fence blob of host %u: not of its subtree, of no ranks, or twice",
                host_of(top), h);
      return;
    }
    d->fence_blob = malloc(blen ? blen : 1);
    if (!d->fence_blob) {
      run->fail(run, ASRRUN_EXIT_LAUNCH, "out of memory for a fence of %zu bytes", blen);
      return;
    }
    if (blen) memcpy(d->fence_blob, blob, blen);
    d->fence_len = blen;
    d->fence_in = 1;
  }
  fence_check(run);
}

/* A parent below lost a child: that daemon and its subtree are over. */
static void on_lost(daemon_t *top, asr_ctl_msg_t *m) {
  asrrun_t *run = top->run;
  if (!below(top, m->u.lost.host)) {
    run->fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s says host %u is lost, not one beneath it",
              host_of(top), m->u.lost.host);
    return;
  }
  daemon_over(&run->daemons[m->u.lost.host], m->u.lost.why);
}

static void on_close(asr_ctl_conn_t *c, int err, const char *why, void *arg) {
  (void)c;
  daemon_t *d = arg;
  char msg[400];
  const char *say = NULL;
  if (err == ASR_EPROTO) { /* garbage from a daemon is worth naming */
    snprintf(msg, sizeof msg, "asrd on host %s: %s", host_of(d), why);
    say = msg;
  }
  daemon_over(d, say);
}

/* --- the JOB ------------------------------------------------------------------ */

static void send_job(daemon_t *d) {
  asrrun_t *run = d->run;
  if (run->master_later) { /* MASTER_ADDR is what rank 0's asrd calls from: it first */
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
    run->fail(run, ASRRUN_EXIT_LAUNCH, "out of memory describing the job");
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
  asr_ctl_msg_t m = {.type = ASR_CTL_JOB};
  m.u.job = (asr_ctl_job_t){
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
      .port = (uint32_t)run->port,
      .provider = (char *)(cfg->provider[0]  ? cfg->provider
                           : map->nhosts > 1 ? "tcp;ofi_rxm"
                                             : "shm"),
      .nspace = run->nspace,
      /* the spec each asrd resolves on its host ("" = the address it reached us from) */
      .if_spec = (char *)(map->nhosts == 1 && !cfg->if_include[0] ? "127.0.0.1" : cfg->if_include),
      .heartbeat_s = (uint32_t)cfg->heartbeat_timeout_s,
      .wdir = run->wdir,
      .wdir_given = cfg->wdir[0] != '\0',
      .stdin_rank = run->stdin_rank,
      .provider_given = cfg->provider[0] != '\0',
      .map_by = (uint32_t)cfg->map_by,
      .ppr = (uint32_t)cfg->ppr,
      .cpus_per_rank = (uint32_t)cfg->cpus_per_rank,
      .cores = cores,
      .master_addr = run->master_addr,
      .master_port = (uint32_t)run->master_port,
      .tree_radix = (uint32_t)run->tree_radix,
      .tree_srun = run->cfg.launcher == ASR_LAUNCHER_SLURM,
      .tree_agent = run->cfg.launch_agent,
      .tree_asrd = run->tree_asrd,
      .tree_ip = run->tree_ip,
  };
  int rc = asr_ctl_send(d->conn, &m);
  if (rc)
    run->fail(run, ASRRUN_EXIT_LAUNCH, "cannot send the job to host %s: %s", host_of(d), asr_strerror(rc));
  for (uint32_t s = 1; s <= 2; s++)
    if (asrrun_output_gone(run, (int)s)) {
      asr_ctl_msg_t g = {.type = ASR_CTL_OUTPUT_CLOSED, .u.closed.stream = s};
      (void)asr_ctl_send(d->conn, &g);
    }
out:
  free(host_of_rank);
  free(lnc_of_rank);
  free(hosts);
  free(env_n);
  free(env_v);
  free(cores);
}

/* --- call back -------------------------------------------------------------------- */

static void on_hello_timeout(asr_loop_t *loop, asr_loop_timer_t *t) {
  link_t *l = t->arg;
  if (!l->rejected)
    asr_warn("asrrun", "a control connection sent no HELLO within %d s; closed", HELLO_MS / 1000);
  link_free(loop, l);
}

/* Closed now, freed at the next iteration (we may be inside its callback). */
static void link_discard(link_t *l) {
  asr_ctl_close(&l->c);
  l->rejected = 1;
  asr_loop_timer_start(l->run->loop, &l->hello_timer, 0, on_hello_timeout, l);
}

static void on_hello_close(asr_ctl_conn_t *c, int err, const char *why, void *arg) {
  (void)c, (void)err, (void)why;
  link_discard(arg);
}

static void reject(link_t *l) {
  asr_warn("asrrun",
           "refused a control connection that did not identify itself as one of this job's daemons");
  link_discard(l);
}

static void on_hello(asr_ctl_conn_t *c, asr_ctl_msg_t *m, void *arg) {
  link_t *l = arg;
  asrrun_t *run = l->run;
  if (m->type != ASR_CTL_HELLO) {
    reject(l);
    return;
  }
  uint32_t in = m->u.hello.index;
  /* the early local daemon learns its index from the JOB (asrrun_early.c) */
  int index = in == ASR_CTL_INDEX_AHEAD ? run->early.index : in < (uint32_t)run->map.nhosts ? (int)in : -1;
  if (index < 0 || strcmp(m->u.hello.secret_hex, run->secret_hex) != 0 || run->daemons[index].conn ||
      run->daemons[index].state != DAEMON_LAUNCHING || run->daemons[index].routed) {
    reject(l);
    return;
  }
  daemon_t *d = &run->daemons[index];
  asr_loop_timer_stop(run->loop, &l->hello_timer);
  asr_ctl_set_owner(c, on_msg, on_close, d);
  d->conn = &l->c;
  run->ctl_links++;
  d->stdin_credit = ASR_CTL_STDIN_WINDOW;
  daemon_set_state(d, DAEMON_JOINED);
  asrrun_report_daemon_up(run, d, ++run->daemons_up, asr_loop_now(run->loop) - run->launch_ms);
  if (run->daemons_up == run->map.nhosts) asr_loop_timer_stop(run->loop, &run->progress);
  if (run->state >= RUN_ABORTING) {
    /* it called back while the job is ending: it ends too */
    asr_ctl_msg_t k = {.type = ASR_CTL_KILL, .u.kill.sig = SIGKILL};
    (void)asr_ctl_send(d->conn, &k);
    return;
  }
  if (run->master_later && d->index == run->map.ranks[0].host) {
    /* rank 0's host as the others reach it: the address its asrd called us
     * from (the job's network, as asrd's own default --if-include) */
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    if (getpeername(d->conn->fd, (struct sockaddr *)&a, &al) == 0 &&
        inet_ntop(AF_INET, &a.sin_addr, run->master_addr, sizeof run->master_addr))
      run->master_later = 0;
    else
      run->fail(run, ASRRUN_EXIT_LAUNCH, "cannot tell the address of host %s for MASTER_ADDR", host_of(d));
    for (int h = 0; !run->master_later && h < run->map.nhosts; h++)
      if (run->daemons[h].job_waits && &run->daemons[h] != d) {
        run->daemons[h].job_waits = 0;
        send_job(&run->daemons[h]);
      }
  }
  send_job(d);
}

static void on_listener(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)events;
  asrrun_t *run = io->arg;
  for (int i = 0; i < 64; i++) {
    int fd = accept4(io->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    link_t *l = calloc(1, sizeof *l);
    if (!l || asr_ctl_start(loop, &l->c, fd, on_hello, on_hello_close, l) != 0) {
      close(fd);
      free(l);
      continue;
    }
    l->run = run;
    asr_loop_timer_start(loop, &l->hello_timer, HELLO_MS, on_hello_timeout, l);
  }
}

/* --- the processes ---------------------------------------------------------- */

static void on_drain_timeout(asr_loop_t *loop, asr_loop_timer_t *t) {
  (void)loop;
  daemon_over(t->arg, NULL); /* it died: what it had sent came, DONE did not */
}

static void on_daemon_exit(asr_loop_t *loop, asr_loop_pid_t *p, int have_status, int st) {
  daemon_t *d = p->arg;
  asrrun_t *run = d->run;
  if (!have_status) st = 0;
  reaped(d, d->pid, st);
  if (over(d) || d->state >= DAEMON_DONE) {
    run->daemon_changed(run, d);
    return;
  }
  if (d->conn) {
    /* Its last messages (DONE among them) may still sit in its socket: the
     * connection ends, or a bounded wait does. */
    asr_loop_timer_start(loop, &d->drain_timer, DRAIN_MS, on_drain_timeout, d);
    return;
  }
  char msg[3072];
  int sig = WIFSIGNALED(st), code = sig ? WTERMSIG(st) : WEXITSTATUS(st);
  if (!d->local && run->cfg.launcher == ASR_LAUNCHER_SLURM)
    snprintf(
        msg, sizeof msg,
        "the srun step for node %s ended with %s %d before asrd called back; check that 'srun -N 1 -w %s "
        "true' works in this allocation and that asrd is installed there (--prefix)",
        host_of(d), sig ? "signal" : "status", code, host_of(d));
  else if (!d->local)
    snprintf(msg, sizeof msg,
             "the launch agent for host %s (%s) ended with %s %d before asrd called back; check that '%s %s "
             "true' works and that asrd is installed there (--prefix)",
             host_of(d), run->cfg.launch_agent, sig ? "signal" : "status", code, run->cfg.launch_agent,
             host_of(d));
  else
    snprintf(msg, sizeof msg, "asrd on host %s died (%s %d) before the job finished", host_of(d),
             sig ? "signal" : "status", code);
  daemon_over(d, msg);
}

/* The heartbeat rule counts only time in which asrrun itself ran: a tick
 * that comes late by more than a period means asrrun was stopped (Ctrl-Z,
 * SIGSTOP) or starved, and the daemons' silence meanwhile says nothing of
 * them (their heartbeats wait unread in the sockets); that gap is forgiven. */
static void on_heartbeat(asr_loop_t *loop, asr_loop_timer_t *t) {
  asrrun_t *run = t->arg;
  uint64_t now = asr_loop_update_now(loop), silence_ms = (uint64_t)run->cfg.heartbeat_timeout_s * 1000;
  uint64_t gap = run->last_tick_ms && now - run->last_tick_ms > 2 * HEARTBEAT_MS
                     ? now - run->last_tick_ms - HEARTBEAT_MS
                     : 0;
  run->last_tick_ms = now;
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    if (!d->conn || over(d) || d->routed) continue; /* a routed daemon's parent judges it */
    if (gap) d->conn->last_rx_ms = d->conn->last_rx_ms + gap < now ? d->conn->last_rx_ms + gap : now;
    /* a daemon that is done still hears from us: with several hosts it
     * serves its KV store until SHUTDOWN, and takes silence for our end */
    (void)asr_ctl_send_empty(d->conn, ASR_CTL_HEARTBEAT);
    if (d->state < DAEMON_DONE && now - d->conn->last_rx_ms > silence_ms) {
      /* A host cut off or frozen: TCP would not notice for many minutes. */
      char msg[300];
      snprintf(
          msg, sizeof msg,
          "lost contact with asrd on host %s: nothing heard for %d s (host down or network cut?); aborting "
          "the job",
          host_of(d), run->cfg.heartbeat_timeout_s);
      daemon_over(d, msg);
    }
  }
  asr_loop_timer_start(loop, t, HEARTBEAT_MS, on_heartbeat, run);
}

/* -v: a launch that takes over a second says how far it got, each second. */
static void on_progress(asr_loop_t *loop, asr_loop_timer_t *t) {
  asrrun_t *run = t->arg;
  if (run->daemons_up >= run->map.nhosts || run->state >= RUN_ABORTING) return;
  asrrun_report_progress(run, run->daemons_up, asr_loop_now(loop) - run->launch_ms);
  asr_loop_timer_start(loop, t, 1000, on_progress, run);
}

/* Every daemon calls back within CALLBACK_MS of its parent's start: in the
 * tree, one d hops down within d times that of the launch (each level's
 * agents start once their parent has its JOB). */
static void on_callback_deadline(asr_loop_t *loop, asr_loop_timer_t *t) {
  asrrun_t *run = t->arg;
  uint64_t elapsed = asr_loop_now(loop) - run->launch_ms;
  int later = 0;
  for (int h = 0; h < run->map.nhosts; h++) {
    if (run->daemons[h].state != DAEMON_LAUNCHING) continue;
    uint64_t bound = (uint64_t)CALLBACK_MS * (uint64_t)asr_tree_depth(run->tree_radix, h);
    if (elapsed + 100 >= bound)
      run->fail(run, ASRRUN_EXIT_LAUNCH, "asrd on host %s did not call back within %llu s",
                host_of(&run->daemons[h]), (unsigned long long)(bound / 1000));
    else
      later = 1;
  }
  if (later && run->state < RUN_ABORTING)
    asr_loop_timer_start(loop, t, CALLBACK_MS, on_callback_deadline, run);
}

/* The output flow control (asrrun_output.c calls these through run). */
static void give_credit(asrrun_t *run, int h, uint32_t bytes) {
  daemon_t *d = &run->daemons[h];
  if (!d->conn || over(d)) return;
  asr_ctl_msg_t m = {.type = ASR_CTL_CREDIT, .u.credit.bytes = bytes};
  (void)dsend(d, &m);
}

static void reader_gone(asrrun_t *run, int stream) {
  asr_ctl_msg_t m = {.type = ASR_CTL_OUTPUT_CLOSED, .u.closed.stream = (uint32_t)stream};
  bcast(run, &m);
}

int asrrun_daemons_launch(asrrun_t *run, const char *asrd_local, const char *asrd_remote,
                          const char *ctl_local, const char *ctl_remote) {
  run->ask_ends = ask_ends;
  int rc = asr_loop_io_start(run->loop, &run->lio, run->lfd, ASR_LOOP_READ, on_listener, run);
  if (rc == 0 && run->early.lfd >= 0)
    rc = asr_loop_io_start(run->loop, &run->early_lio, run->early.lfd, ASR_LOOP_READ, on_listener, run);
  if (rc) {
    run->fail(run, ASRRUN_EXIT_LAUNCH, "cannot watch the control port: %s", asr_strerror(rc));
    return rc;
  }
  int slurm = run->cfg.launcher == ASR_LAUNCHER_SLURM;
  char err[1024];
  run->launch_ms = asr_loop_now(run->loop);
  if (run->cfg.verbose) asr_loop_timer_start(run->loop, &run->progress, 1000, on_progress, run);
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    /* in the tree, a daemon below another is that one's to start */
    d->top = &run->daemons[run->tree_radix > 0 ? asr_tree_child_toward(run->tree_radix, -1, h) : h];
    d->routed = d->top != d;
    if (d->routed) continue;
    if (d->pid <= 0) {
      const asr_launch_ops_t *ops = d->local ? &asr_launch_local
                                    : slurm  ? &asr_launch_slurm
                                             : &asr_launch_rsh;
      asr_launch_args_t a = {.asrd_path = d->local ? asrd_local : asrd_remote,
                             .ctl_addr = d->local ? ctl_local : ctl_remote,
                             .secret_hex = run->secret_hex,
                             .host = run->map.host_names[h],
                             .agent = run->cfg.launch_agent,
                             .index = h,
                             .port = run->port,
                             .verbose = run->cfg.verbose};
      d->pid = ops->start(&a, err, sizeof err);
      if (d->pid < 0) {
        d->pid = 0;
        run->fail(run, ASRRUN_EXIT_LAUNCH, "cannot start asrd for host %s: %s", host_of(d), err);
        daemon_set_state(d, DAEMON_LOST);
        continue;
      }
    }
    rc = asr_loop_pid_start(run->loop, &d->exit_watch, d->pid, 1, on_daemon_exit, d);
    if (rc)
      run->fail(run, ASRRUN_EXIT_LAUNCH, "cannot watch asrd for host %s: %s", host_of(d), asr_strerror(rc));
  }
  run->output_credit = give_credit;
  /* what a parent in the tree starts its children with (the JOB's tree fields) */
  snprintf(run->tree_asrd, sizeof run->tree_asrd, "%s", asrd_remote);
  snprintf(run->tree_ip, sizeof run->tree_ip, "%.*s", (int)strcspn(ctl_remote, ":"), ctl_remote);
  run->output_gone = reader_gone;
  run->last_tick_ms = asr_loop_now(run->loop);
  asr_loop_timer_start(run->loop, &run->heartbeat, HEARTBEAT_MS, on_heartbeat, run);
  asr_loop_timer_start(run->loop, &run->hello_deadline, CALLBACK_MS, on_callback_deadline, run);
  return 0;
}

void asrrun_daemons_kill(asrrun_t *run, int sig) {
  asr_ctl_msg_t m = {.type = ASR_CTL_KILL, .u.kill.sig = (uint32_t)sig};
  bcast(run, &m);
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    /* a daemon that never called back cannot be told: after SIGKILL its
     * local process is killed directly */
    if (sig == SIGKILL && d->state == DAEMON_LAUNCHING && d->pid > 0) kill(d->pid, SIGKILL);
  }
}

int asrrun_daemons_send(asrrun_t *run, int h, const asr_ctl_msg_t *m) {
  daemon_t *d = &run->daemons[h];
  if (!d->conn || over(d) || d->state < DAEMON_JOINED) return ASR_ENOTCONN;
  return dsend(d, m);
}

void asrrun_daemons_flush(asrrun_t *run) {
  for (int h = 0; h < run->map.nhosts; h++)
    if (run->daemons[h].conn && !run->daemons[h].routed) asr_ctl_flush(run->daemons[h].conn);
}

void asrrun_daemons_shutdown(asrrun_t *run) {
  asr_loop_timer_stop(run->loop, &run->heartbeat);
  asr_loop_timer_stop(run->loop, &run->hello_deadline);
  asr_ctl_msg_t m = {.type = ASR_CTL_SHUTDOWN};
  int depth = asr_tree_depth(run->tree_radix, run->map.nhosts - 1);
  for (int h = 0; h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    if (!d->conn) continue;
    if (!d->routed) {
      if (has_below(run, h))
        (void)asr_ctl_send_routed(d->conn, ASR_CTL_ALL_HOSTS, &m); /* its parents pass it on */
      else
        (void)asr_ctl_send(d->conn, &m);
      /* a parent closes once its children have: each level's close is bounded */
      asr_ctl_finish(d->conn, CLOSE_MS * (has_below(run, h) ? depth : 1));
    }
    if (d->state == DAEMON_DONE) daemon_set_state(d, DAEMON_CLOSING);
  }
}

int asrrun_daemons_all_done(const asrrun_t *run) {
  for (int h = 0; h < run->map.nhosts; h++)
    if (run->daemons[h].state < DAEMON_DONE) return 0;
  return 1;
}

int asrrun_daemons_all_ended(const asrrun_t *run) {
  for (int h = 0; h < run->map.nhosts; h++)
    if (run->daemons[h].conn || run->daemons[h].pid > 0) return 0;
  return 1;
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
  asr_loop_timer_stop(run->loop, &run->progress);
  asr_loop_timer_stop(run->loop, &run->heartbeat);
  asr_loop_timer_stop(run->loop, &run->hello_deadline);
  asr_loop_io_stop(run->loop, &run->lio);
  asr_loop_io_stop(run->loop, &run->early_lio);
  for (int h = 0; run->daemons && h < run->map.nhosts; h++) {
    daemon_t *d = &run->daemons[h];
    drop_conn(d);
    asr_loop_pid_stop(run->loop, &d->exit_watch);
    if (d->pid > 0) {
      /* bounded waits are over: what is left is killed and reaped */
      pid_t pid = d->pid;
      kill(pid, SIGKILL);
      int st = 0;
      while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
      reaped(d, pid, st);
    }
    free(d->fence_blob);
    free(d->pgids);
  }
}
