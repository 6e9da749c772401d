/*
 * tree_node.h -- one node of the tree of daemons (tree.h) and its children:
 * asrrun is the root node, every asrd with children an interior one, and
 * both run this code, as every PRRTE daemon runs the same launch and fence
 * code (doc/design.md, "The tree of daemons").
 *
 * The node holds what supervising children takes, the same at every level:
 *   - the listener(s) its children call back to, each new connection's
 *     HELLO (the job's secret, the host index of one of its children still
 *     launching) within HELLO_MS;
 *   - the heartbeat: HEARTBEAT to each child every HEARTBEAT_MS, and the
 *     judgement of a child silent for the heartbeat timeout (time in which
 *     the node itself was stopped is forgiven);
 *   - the call-back deadline (CALLBACK_MS from the start);
 *   - each child's agent (the local process that represents it: asrd
 *     itself, or the agent or srun that runs it): watched, reaped, its PMIx
 *     directory removed when it was killed, and killed when the child is
 *     lost, so that nobody waits for a daemon given up on;
 *   - the fence gathering: this node's blob and each child's (a leaf's
 *     FENCE, an interior child's FENCE_SUB), each checked to be of a host
 *     beneath it that has ranks, once; whole fences leave in order;
 *   - relaying: a ROUTED or LOST from a child must be of a host beneath it;
 *     what goes down goes to the child whose subtree holds the host, wrapped
 *     once, or to every child for its whole subtree.
 * The owner (asrrun_daemons.c, asrd_down.c) starts the agents through its
 * launch backend, builds the JOB, and hears what happens through
 * asr_tree_node_ops_t. Everything runs on the owner's loop thread.
 */
#ifndef ASR_TREE_NODE_H
#define ASR_TREE_NODE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "asr_loop.h"
#include "ctl.h"

typedef struct asr_tree_node asr_tree_node_t;
typedef struct asr_tree_child asr_tree_child_t;

/* A child's life: LAUNCHING (started, not called back), UP (its HELLO was
 * right), OVER (its connection ended, it was given up on, or it could not
 * be started). */
typedef enum { ASR_TREE_CHILD_LAUNCHING = 0, ASR_TREE_CHILD_UP, ASR_TREE_CHILD_OVER } asr_tree_child_state_t;

struct asr_tree_child {
  asr_tree_node_t *node;
  int host;      /* its host index in the job */
  int has_ranks; /* its subtree has ranks: it takes part in every fence */
  int has_below; /* it has children of its own: it relays for its subtree */
  asr_tree_child_state_t state;
  int done;             /* the owner's: it said DONE, so its end is no loss */
  int party;            /* its subtree has a host with a rank alive: it takes part in fences */
  asr_ctl_conn_t *conn; /* from its HELLO until its connection ends */
  pid_t agent;          /* the local process that represents it; 0 once reaped */
  int reaped, reaped_status;
  asr_loop_pid_t agent_watch;
  asr_loop_timer_t drain_timer; /* its agent was reaped while it was up: its last words */
  uint32_t fences;              /* fences it sent so far */
  struct tree_link *link;
  void *data; /* the owner's record of it */
};

typedef struct {
  /* A child's HELLO was right: ch->conn is set, ch is UP. The owner sends
   * the JOB (asr_tree_node_send_job), or KILL when the job is ending. */
  void (*up)(asr_tree_node_t *n, asr_tree_child_t *ch, const asr_ctl_msg_t *hello);
  /* What a child said: anything but HEARTBEAT and its fences. A ROUTED or
   * LOST is of a host beneath it (checked). The owner may not free ch. */
  void (*msg)(asr_tree_node_t *n, asr_tree_child_t *ch, asr_ctl_msg_t *m);
  /* The child is over (once): why says how, in a sentence for the user
   * that names the host (and this node's host when it is not the root).
   * It is a loss unless ch->done; its connection is gone and, for a loss,
   * its agent was killed. */
  void (*over)(asr_tree_node_t *n, asr_tree_child_t *ch, const char *why);
  /* The agent of a child that never called back ended (status): writes
   * into why what the user should check (the launch backend's words). */
  void (*agent_why)(asr_tree_node_t *n, asr_tree_child_t *ch, int status, char *why, size_t len);
  /* The child's agent was reaped (status); called before any over(). */
  void (*reaped)(asr_tree_node_t *n, asr_tree_child_t *ch, pid_t pid, int status);
  /* Fence seq is whole: count entries of (u32 host, bytes blob), one for
   * each host with ranks in this node's subtree. */
  void (*fence)(asr_tree_node_t *n, uint32_t seq, uint32_t count, const uint8_t *entries, size_t len);
  /* The node cannot go on with what the job asked (out of memory). */
  void (*error)(asr_tree_node_t *n, const char *why);
  /* No child has a connection or an agent left. May be NULL. */
  void (*idle)(asr_tree_node_t *n);
} asr_tree_node_ops_t;

struct asr_tree_node {
  asr_loop_t *loop;
  const asr_tree_node_ops_t *ops;
  void *owner;
  const char *role;              /* the log's subsystem: "asrrun" or "asrd" */
  int host;                      /* this node's host, -1 for asrrun */
  int radix, nhosts;             /* the tree (tree.h) */
  const char *const *host_names; /* nhosts, the owner's */
  const uint8_t *host_ranks;     /* nhosts: whether host h has ranks (the owner's) */
  const char *secret_hex;        /* the job's secret, every HELLO's */
  int ahead_index;               /* the host of a HELLO with ASR_CTL_INDEX_AHEAD, or -1 */
  uint64_t heartbeat_timeout_ms;
  asr_tree_child_t *children;
  int nchildren;
  /* internal */
  struct tree_link *links; /* every connection from below, until freed */
  int nlisten;
  asr_loop_io_t lio[2];
  asr_loop_timer_t tick, deadline;
  uint64_t last_tick_ms, last_beat_ms;
  struct tree_gather *gathers; /* fences being gathered, oldest first */
  uint32_t gather_local;       /* this host's own fences so far */
  int gather_need;             /* parties per fence: this host (with ranks) and each child with ranks */
  /* the fences' parties as the failure policy leaves them (issue 50,
   * asr_tree_node_host_live): per host, whether it has a rank alive */
  uint8_t *live;
  uint32_t seq_next; /* one past the newest fence gathered or being gathered */
  int out_closed[3]; /* asrrun's stdout (1) / stderr (2) reader went away */
  /* what the node handled (asrrun -v at the end, the tree bench) */
  int links_up;
  uint64_t msgs_in, fence_msgs_in;
};

/* Sets the node up with its children: the hosts below host (-1: asrrun) in
 * the tree of radix over nhosts; the pointers are the owner's and must
 * outlive the node. 0, or ASR_ENOMEM with err set. */
int asr_tree_node_init(asr_tree_node_t *n, asr_loop_t *loop, const asr_tree_node_ops_t *ops, void *owner,
                       const char *role, int host, int radix, int nhosts, const char *const *host_names,
                       const uint8_t *host_ranks, const char *secret_hex, uint64_t heartbeat_timeout_ms,
                       char *err, size_t errlen);

/* The child of host h, or NULL. */
asr_tree_child_t *asr_tree_node_child(asr_tree_node_t *n, int h);

/* Watches listening socket fd (at most two: asrrun's early listener too);
 * the caller keeps and closes it. 0 or an ASR_E* code. */
int asr_tree_node_listen(asr_tree_node_t *n, int fd);

/* Starts the heartbeat and the call-back deadline: call once the agents
 * are started. */
void asr_tree_node_run(asr_tree_node_t *n);

/* ch's agent is pid (just started, or asrrun's early daemon): watched and
 * reaped on the loop. 0 or an ASR_E* code. */
int asr_tree_node_watch(asr_tree_node_t *n, asr_tree_child_t *ch, pid_t pid);

/* Gives up on ch (it could not be started, or broke the protocol): over()
 * with why, its agent killed. */
void asr_tree_node_lose(asr_tree_node_t *n, asr_tree_child_t *ch, const char *why);

/* Sends m to host h: to its child when h is one, else wrapped (ROUTED) to
 * the child whose subtree holds it. 0, or ASR_ENOTCONN when that child has
 * no connection (what it would get is dropped, as it is for a lost one). */
int asr_tree_node_send(asr_tree_node_t *n, int h, const asr_ctl_msg_t *m);

/* Passes a ROUTED from above on as it came: to the child whose subtree
 * holds its host, or (ASR_CTL_ALL_HOSTS) to every child. 0, ASR_EINVAL for
 * a host out of range, or ASR_ENOTCONN when that child has no connection. */
int asr_tree_node_relay(asr_tree_node_t *n, const asr_ctl_msg_t *m);

/* Sends m to every daemon below: once to each child with a connection,
 * wrapped for its whole subtree when it has one (ROUTED to
 * ASR_CTL_ALL_HOSTS). */
void asr_tree_node_bcast(asr_tree_node_t *n, const asr_ctl_msg_t *m);

/* Sends job (a template: its index is set to ch's host) to ch, and then an
 * OUTPUT_CLOSED for each of asrrun's streams already gone. 0 or the send's
 * error (ch is then lost). */
int asr_tree_node_send_job(asr_tree_node_t *n, asr_tree_child_t *ch, const asr_ctl_job_t *job);

/* asrrun's reader of stream (1, 2) went away: told to every child now and
 * to each child that calls back later. */
void asr_tree_node_output_closed(asr_tree_node_t *n, int stream);

/* This host's own blob for its next fence (a node with local ranks). */
void asr_tree_node_fence_local(asr_tree_node_t *n, const uint8_t *blob, size_t len);

/* Under asrrun --on-failure continue|restart (issue 50): host h has a
 * rank alive (live) or none (every rank of it failed, finished, is being
 * restarted, or the host was lost). A fence is of the ranks alive
 * (libasr's asr_job_barrier), so only hosts with one take part: the
 * fences being gathered stop waiting for a subtree without one, a late
 * blob of such a host is dropped, and a subtree that has a rank alive
 * again takes part from the next fence on (its count of fences is set to
 * the node's next). */
void asr_tree_node_host_live(asr_tree_node_t *n, int h, int live);

/* m (FENCE_DONE) to every child that takes part in fences; returns how
 * many it went to. */
int asr_tree_node_fence_done(asr_tree_node_t *n, const asr_ctl_msg_t *m);

/* Sends m (SHUTDOWN) to every daemon below and finishes each child's
 * connection within leaf_ms, or parent_ms for a child with its own
 * children (a parent closes once its children have). */
void asr_tree_node_shutdown(asr_tree_node_t *n, const asr_ctl_msg_t *m, int leaf_ms, int parent_ms);

/* Flushes what is queued to each child. */
void asr_tree_node_flush(asr_tree_node_t *n);

/* Whether a child still has a connection or an agent not yet reaped. */
int asr_tree_node_active(const asr_tree_node_t *n);

/* Ends every child's connection now (this node's parent is gone); the
 * children are over without a word. A node never set up (all zero: a
 * daemon that got no JOB) may be closed, and finished, all the same. */
void asr_tree_node_close(asr_tree_node_t *n);

/* Stops everything, kills (SIGKILL) the agents not reaped yet when kill_left
 * is set, and reaps them, each within a bounded wait; frees the children. */
void asr_tree_node_fini(asr_tree_node_t *n, int kill_left);

#endif /* ASR_TREE_NODE_H */
