/*
 * asrd.h -- the host daemon's state, shared by its files, each one job:
 *   asrd.c        main and the daemon's lifecycle (one state machine)
 *   asrd_up.c     the control connection up to asrrun: HELLO, heartbeats, sending
 *   asrd_job.c    taking the JOB and starting it: KV server, PMIx registration, ranks
 *   asrd_pmix.c   the PMIx server (libpmix server API) and its upcalls
 *   asrd_pmi.c    the simple PMI-1 server (MPICH's wire protocol, pmi_wire.h)
 *                 on a socket each rank gets as PMI_FD
 *   asrd_ranks.c  the local ranks: start, exit, signals, what is still running
 *   asrd_spawn.c  the environment every rank gets, and the clone() that starts one
 *   asrd_topo.c   the hwloc topology and each rank's binding
 *   asrd_stdio.c  the ranks' output (whole lines) and rank 0's stdin
 *   asrd_report.c the ranks' state reports (asrrun's REPORT_REQ, issue 24)
 *   asrd_trace.c  a traced job's files: made, named to the ranks, sent up (issue 52)
 *   asrd_metrics.c a scrape of asrrun --metrics-port (METRICS_REQ, issue 52)
 * The files below asrd.c never call up into it: what it must hear (a message
 * from asrrun, a rank's exit, the registration done) comes through the
 * callbacks it sets in asrd_t.
 *
 * One asrd runs per host of a job. It connects back to asrrun, receives the
 * job, runs the host's KV server on the bootstrap port (seeding "hostname"
 * before any rank starts), serves PMIx to its ranks, starts them, and streams
 * their output and exit statuses to asrrun. It dies with its job: when the
 * control connection to asrrun breaks it kills its ranks and exits; in a
 * one-host job it exits as soon as its ranks are done (nobody else needs it).
 */
#ifndef ASR_ASRD_H
#define ASR_ASRD_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/types.h>

#include "asr_buf.h"
#include "asr_loop.h"
#include "bind.h"
#include "ctl.h"
#include "kv_frame.h"
#include "kv_server.h"
#include "tree_node.h"

/* The daemon's lifecycle (asrd.c: asrd_set_state makes every transition).
 *   CONNECTING   calling asrrun back
 *   WAITING_JOB  HELLO sent (the PMIx server may start meanwhile)
 *   STARTING     the JOB came: KV server, PMIx registration, then the ranks
 *   RUNNING      ranks, or output of theirs, are still alive
 *   IDLE         every rank is done and DONE was sent; waiting for SHUTDOWN
 *                (a job of several hosts: other hosts' ranks may still ask
 *                this host's KV server)
 *   TERMINATING  ranks were signalled (asrrun's KILL, a signal, asrrun lost);
 *                waits for every rank to die; after a grace time: KILLED
 *   KILLED       SIGKILL sent; waits (bounded) for every rank to die
 *   FINISHING    the control connection is closed cleanly (ctl.h: finish)
 *   DONE         the loop stops; main cleans up and exits */
typedef enum {
  ASRD_CONNECTING = 0,
  ASRD_WAITING_JOB,
  ASRD_STARTING,
  ASRD_RUNNING,
  ASRD_IDLE,
  ASRD_TERMINATING,
  ASRD_KILLED,
  ASRD_FINISHING,
  ASRD_DONE,
} asrd_state_t;

typedef struct asrd asrd_t;
typedef struct asrd_rank asrd_rank_t;
typedef struct asrd_pmi_conn asrd_pmi_conn_t;

/* A fence sent up to asrrun (FENCE) and not answered yet (asrd_up.c keeps
 * them in order: each FENCE_DONE answers the oldest). Its owner (the PMIx
 * or the PMI server) embeds it and learns the outcome through done: ok with
 * every host's blobs, or not ok (data NULL) when the job ends first. */
typedef struct asrd_fence asrd_fence_t;
struct asrd_fence {
  void (*done)(asrd_t *d, asrd_fence_t *f, int ok, const uint8_t *data, size_t len);
  asrd_fence_t *next;
  uint64_t t0; /* when it went up (the trace's span: asrd_up.c) */
  size_t bytes;
};

/* One output stream of a rank (asrd_stdio.c). */
typedef struct {
  asrd_rank_t *rank;
  int stream;        /* 1 stdout, 2 stderr */
  int fd;            /* the pipe's read end; -1 once it reached EOF (or was closed) */
  asr_loop_io_t io;  /* while fd >= 0 */
  unsigned watching; /* the events io waits for now (read while part has room) */
  asr_buf_t part;    /* read and not yet sent: at most ASRD_STREAM_MAX bytes */
  int open;          /* a piece of a line went up without its end */
  int eof;           /* its read met EOF (not: closed because asrrun's reader went away) */
  int ended;         /* EOF reached and everything sent (or dropped) */
} asrd_stream_t;

struct asrd_rank {
  asrd_t *d;
  int rank, lnc, local;
  pid_t pid;                 /* 0 until started */
  asr_loop_pid_t exit_watch; /* its exit, reaped by the loop */
  asrd_stream_t out, err;
  int in_fd; /* rank 0's stdin pipe; -1 when closed */
  asr_loop_io_t in_io;
  asr_buf_t in_queue;        /* stdin bytes not yet written */
  int in_eof;                /* close in_fd once in_queue drains */
  int in_reads;              /* it reads the job's stdin (the JOB's stdin_rank, or all) */
  uint64_t in_got, in_taken; /* stdin bytes sent to it; written into its pipe or dropped */
  int exited, status;
  unsigned end_seq; /* the order this daemon saw the ranks end in (1, 2, ...; 0 not yet):
                     * asrd_ends.c */
  int exit_sent;
  int end_fd;           /* the read end of its end watch (asrd_ends.c), or -1 */
  asr_loop_io_t end_io; /* while end_fd >= 0 */
  int not_run;          /* its execve failed (asrd_spawn.c) */
  int incarnation;      /* 0 at first start; one more at each restart in place (ASR_INCARNATION) */
  int verdict_owed;     /* --on-failure restart: it ended, and asrrun's RANK_STATE is still to come
                         * (it may be started again: this daemon is not done meanwhile) */
  int joined;           /* 0, ASR_CTL_JOINED_INIT or ASR_CTL_JOINED_FINALIZED (PMIx upcalls, PMI commands) */
  int via;              /* how it joined: ASR_CTL_VIA_PMIX, _PMI1 or _PMI2 (0 until then) */
  asrd_pmi_conn_t *pmi; /* its PMI-1 connection (asrd_pmi.c), or NULL */
  /* its state-report channel (asrd_report.c) */
  int rep_fd; /* our end, or -1 */
  asr_loop_io_t rep_io;
  asr_buf_t rep_in;
  int rep_hello;   /* libasr's report thread said HELLO */
  int rep_waiting; /* asked, no answer yet */
  uint32_t rep_flags;
  uint8_t *rep_text; /* its answer to the open request */
  size_t rep_len;
  /* the open scrape's (asrd_metrics.c), on the same channel */
  int met_waiting; /* asked, no answer yet */
  uint32_t met_flags;
  uint8_t *met_text; /* its METRICS answer */
  size_t met_len;
};

/* Events from PMIx's own thread, handed to the loop (asrd_pmix.c). */
typedef enum {
  ASRD_EV_FENCE = 1,
  ASRD_EV_ABORT,
  ASRD_EV_LOG,
  ASRD_EV_REGISTERED,
  ASRD_EV_JOINED
} asrd_ev_type_t;
typedef struct asrd_ev {
  asrd_ev_type_t type;
  asrd_fence_t fence; /* ASRD_EV_FENCE: while asrrun has it */
  int rank, status;
  char *msg;
  uint8_t *data;
  size_t ndata;
  void *cbfunc, *cbdata; /* PMIx callback to complete from the loop */
  struct asrd_ev *next;
} asrd_ev_t;

struct asrd {
  asr_loop_t *loop;
  asrd_state_t state; /* asrd.c: set_state */
  int exit_code;
  asr_loop_signal_t sig_term, sig_int, sig_hup;
  asr_loop_timer_t state_timer; /* the current state's deadline (asrd.c) */

  int host_index; /* -1 until known (a daemon started ahead of the job) */
  char hostname[128];
  char secret_hex[2 * ASR_KV_SECRET_LEN + 1];
  uint8_t secret[ASR_KV_SECRET_LEN];
  int port_hold; /* a socket bound to the bootstrap port (--port) until the KV server takes it, or -1 */
  /* --addr: this host's own address (emulated hosts sharing a network
   * namespace): the connection up, the KV server and the bootstrap port's
   * hold are bound to it */
  char bind_addr[64];

  /* the connection up, to asrrun or the parent daemon (asrd_up.c) */
  struct {
    asr_ctl_conn_t conn;
    int open; /* conn carries messages (connected, not closed) */
    asr_loop_io_t connect_io;
    int connect_fd;
    asr_loop_timer_t heartbeat;
    uint64_t heartbeat_timeout_ms; /* the parent silent this long is lost (the JOB says) */
    /* fences sent up, waiting for FENCE_DONE, oldest first */
    asrd_fence_t *fences;
    uint32_t fence_seq;
  } up;

  /* output flow control (asrd_stdio.c, ctl_msg.h's windows) */
  struct {
    int64_t credit;
    asrd_stream_t *open_stream; /* a line whose start went up: only it is sent until it ends */
    int rr;                     /* the stream the next pass starts with (fair turns) */
    int closed[3];              /* asrrun's reader of stream 1 / 2 went away */
    uint64_t in_given;          /* STDIN bytes given back (STDIN_CREDIT) so far */
  } out;

  /* the job (asrd_job.c): the JOB as decoded, owned here */
  asr_ctl_job_t job;
  int have_job;
  int nranks, nhosts, port;
  char *if_addr; /* the address this host's ranks publish (resolved --if-include) */
  asrd_rank_t *ranks;
  int nlocal, nalive;
  asr_kv_server_t *kv;

  /* the order the ranks end in, and asrrun's ENDS_ASK (asrd_ends.c) */
  struct {
    unsigned seen;   /* ranks numbered so far (asrd_rank_t's end_seq) */
    int asked;       /* an ENDS_ASK waits for its answer */
    uint32_t ask_id; /* its id */
  } ends;

  /* PMIx (asrd_pmix.c); ev_* are handed over from PMIx's own thread */
  struct {
    int up;
    char err[512]; /* why PMIx_server_init failed before the JOB came */
    char tmpdir[256];
    asr_loop_async_t async;
    pthread_mutex_t ev_lock;
    asrd_ev_t *ev_head, *ev_tail;
    int stopped; /* under ev_lock: asrd_pmix_stop ran, the hand-over is closed */
  } pmix;

  /* the open state-report request (asrd_report.c) */
  struct {
    int active;
    uint32_t id, req_flags;
    asr_loop_timer_t timer;
  } rep;

  /* a traced job (asrd_trace.c) */
  struct {
    int on;
    char dir[4096];
    int phase; /* 0: the job runs; 1: measuring the clock; 2: the files went up */
    uint32_t seq;
    int rounds;
    uint64_t asked_ns, best_rtt;
    int64_t best_off;
    asr_loop_timer_t timer;
    void (*then)(asrd_t *d);
    uint64_t stall_ns; /* output held under back-pressure since (asrd_stdio.c), or 0 */
  } trace;
  /* the open scrape (asrd_metrics.c) */
  struct {
    int active;
    uint32_t id;
    asr_loop_timer_t timer;
  } met;

  /* the tree below this daemon (asrd_down.c on tree_node.h) */
  struct {
    int radix, parent;    /* the JOB's radix; this host's parent (-1: asrrun) */
    asr_tree_node_t node; /* this daemon's children, supervised */
    uint8_t *host_ranks;  /* per host of the job: it has ranks (the node's) */
    int lfd;              /* the listener its children call back to, or -1 */
    uint8_t *alive;       /* per rank of the job: ALIVE as asrrun last said (RANK_STATE) */
  } down;

  /* How asrd's files reach each other, each set by the file named */
  struct {
    /* asrd.c: a message from above; the connection up connected / ended */
    void (*on_up_msg)(asrd_t *d, asr_ctl_msg_t *m);
    void (*on_up_ready)(asrd_t *d);
    void (*on_up_lost)(asrd_t *d, const char *why, int quiet);
    /* asrd.c: the ranks are started / a rank's exit was reported, or its
     * output ended (the job may be over) */
    void (*on_started)(asrd_t *d, int ok, const char *err);
    void (*on_rank_done)(asrd_t *d);
    /* asrd_job.c: PMIx finished (ok) or failed the registration */
    void (*on_registered)(asrd_t *d, int ok, const char *err);
    /* asrd_ranks.c: both output streams of r ended (EOF, all sent) */
    void (*on_output_closed)(asrd_rank_t *r);
    /* asrd_ranks.c: a read of an output pipe of r met EOF (the rank, and
     * whatever else held it, closed it: usually its death) */
    void (*on_output_eof)(asrd_rank_t *r);
    /* asrd_down.c, for a daemon with children: this host's blob for its
     * next fence goes into its subtree's gather, not up */
    void (*fence_gather)(asrd_t *d, const uint8_t *blob, size_t len);
    /* asrd.c: every child's connection has ended */
    void (*on_down_idle)(asrd_t *d);
    /* asrd_metrics.c (from its first scrape on; asrd_report.c calls them):
     * r's channel brought a METRICS frame; r's channel closed or r exited */
    void (*on_metrics)(asrd_rank_t *r, uint32_t id, const uint8_t *text, size_t len);
    void (*on_chan_gone)(asrd_rank_t *r);
  } cb;
};

const char *asrd_state_name(asrd_state_t s);

/* asrd_ends.c: which local rank ended first (doc/design.md, "Verdicts by
 * cause"). */
/* The descriptor each rank holds its end watch on: the highest it may
 * open, at most 1023 (-1: none fits). */
int asrd_ends_fd(void);
/* Watches fd, the read end of r's end watch (owned from now on): its EOF
 * is the first sign of r's end. 0 or an ASR_E* (fd is closed then). */
int asrd_ends_watch(asrd_rank_t *r, int fd);
/* Stops watching (the job ends). */
void asrd_ends_unwatch(asrd_rank_t *r);
/* A sign of r's end reached the loop (an output pipe's EOF, its PMI
 * connection closing, its exit): numbered if the kernel confirms it. */
void asrd_ends_sight(asrd_rank_t *r, const char *sign);
/* Whether r's EXIT (a failure's, or a leaver's) may go: every rank seen
 * ending before it has been reported. */
int asrd_ends_may_report(const asrd_rank_t *r);
/* asrrun's ENDS_ASK id: answered (ENDS) once what the kernel shows ending
 * now has been reported. */
void asrd_ends_ask(asrd_t *d, uint32_t id);
/* An EXIT went or a rank was reaped: the answer may go now. */
void asrd_ends_progress(asrd_t *d);

/* asrd_trace.c (issue 52) */
/* A JOB that says trace: the directory, asrd's own file. 0 or an ASR_E*
 * with err set. */
int asrd_trace_start(asrd_t *d, char *err, size_t errlen);
/* The directory the ranks write their files to, or NULL when not traced. */
const char *asrd_trace_dir(const asrd_t *d);
/* Every local rank is gone: measures the clock, sends the files up, then
 * calls then(d). 1 while that goes on; 0 when done or not traced. */
int asrd_trace_finish(asrd_t *d, void (*then)(asrd_t *d));
/* asrrun's CLOCK. */
void asrd_trace_on_clock(asrd_t *d, const asr_ctl_msg_t *m);
/* Removes the directory (asrd's exit). */
void asrd_trace_cleanup(asrd_t *d);

/* asrd_up.c */
/* Starts calling asrrun back at HOST:PORT; on_up_ready or on_up_lost follows. */
int asrd_up_connect(asrd_t *d, const char *hostport, char *errbuf, size_t errlen);
/* Sends m to asrrun (dropped once the connection is gone). */
void asrd_up_send(asrd_t *d, const asr_ctl_msg_t *m);
/* One line of asrd's own for a rank's stream (it takes output credit too). */
void asrd_up_output(asrd_t *d, int rank, int stream, const char *line, size_t len);
/* Sets the connection's keepalive and unacknowledged-data bounds from
 * heartbeat_timeout_ms (again once the JOB sets it). */
void asrd_up_set_liveness(asrd_t *d);
void asrd_up_error(asrd_t *d, const char *msg);
/* Sends this host's blob as the next FENCE; f->done follows, once. */
void asrd_up_fence(asrd_t *d, asrd_fence_t *f, const uint8_t *blob, size_t len);
/* asrrun's FENCE_DONE: every host's blobs, for the oldest fence. */
void asrd_up_fence_done(asrd_t *d, const uint8_t *data, size_t len);
/* The job ends: every fence still pending is done, not ok. */
void asrd_up_fences_fail(asrd_t *d);
/* Tells asrrun that rank r joined (ASR_CTL_JOINED_INIT) or finalized
 * through via (ASR_CTL_VIA_*); once per step, in order. */
void asrd_up_joined(asrd_t *d, asrd_rank_t *r, int what, int via);
/* Ends the connection cleanly (on_up_lost with quiet = 1 once it is closed). */
void asrd_up_finish(asrd_t *d);
void asrd_up_close(asrd_t *d);

/* The same, wrapped for host (ROUTED): what a child said, going up. */
void asrd_up_send_routed(asrd_t *d, uint32_t host, const asr_ctl_msg_t *m);

/* asrd_down.c: the tree below this daemon (tree.h) */
/* After the JOB: listens for its children and starts them with the agent
 * (nothing to do for a leaf). 0, or a negative ASR_E* with err. */
int asrd_down_start(asrd_t *d, char *err, size_t errlen);
/* A ROUTED from the parent: for this daemon, for every daemon below (and
 * this one), or for the child whose subtree holds its host. */
void asrd_down_route(asrd_t *d, asr_ctl_msg_t *m);
/* The parent's FENCE_DONE, passed to every child that took part. */
void asrd_down_fence_done(asrd_t *d, const asr_ctl_msg_t *m);
/* asrrun's RANK_STATE (issue 50): a fence is of the ranks alive, so a
 * host of the subtree with none takes no part (asr_tree_node_host_live). */
void asrd_down_rank_state(asrd_t *d, int rank, int state);
/* Whether a child's connection is still open, or its agent not yet reaped
 * (a parent ends after its children's processes have: reaped by the loop,
 * as they end). */
int asrd_down_active(const asrd_t *d);
/* Ends every child's connection now (the parent is gone: they end too). */
void asrd_down_close(asrd_t *d);
void asrd_down_stop(asrd_t *d);

/* asrd_job.c */
/* Takes the JOB (moves m's job into d) and checks it against this daemon. */
int asrd_job_take(asrd_t *d, asr_ctl_msg_t *m, char *err, size_t errlen);
/* Starts the job: KV server, PMIx registration; on_started follows. */
int asrd_job_start(asrd_t *d, char *err, size_t errlen);
/* After the registration: the ranks themselves, and STARTED to asrrun. */
int asrd_job_start_ranks(asrd_t *d, char *err, size_t errlen);
void asrd_job_stop(asrd_t *d);

/* asrd_pmix.c */
/* Starts the PMIx server: its directory, PMIx_server_init, lent topo (an
 * hwloc_topology_t of ours that outlives the server, or NULL). */
int asrd_pmix_init(asrd_t *d, void *topo, char *errbuf, size_t errlen);
/* Registers the job's namespace and every local rank (the library does it on
 * its thread); d->on_registered follows on the loop. */
int asrd_pmix_register_start(asrd_t *d, char *errbuf, size_t errlen);
/* Appends rank r's PMIx variables to env (malloc'd, NULL-terminated). */
int asrd_pmix_setup_rank(asrd_t *d, asrd_rank_t *r, char ***env);
/* Handles what PMIx's thread queued, now (a rank's exit is reported after
 * its JOINED: its upcalls happened before it could exit). */
void asrd_pmix_take_events(asrd_t *d);
/* asrrun's RANK_STATE: tells every local client (common/asr_rank_ev.h's
 * event, and for a death PRRTE's own). */
void asrd_pmix_notify_rank(asrd_t *d, const asr_ctl_msg_t *m);
void asrd_pmix_stop(asrd_t *d);

/* asrd_pmi.c */
/* Once per job, before the first rank starts: the KVS (its name, the
 * PMI_process_mapping key). */
int asrd_pmi_prepare(asrd_t *d, char *errbuf, size_t errlen);
/* Rank r's connection: a socket pair whose one end asrd serves on its loop;
 * returns the other end (for the child: PMI_FD; the caller closes it once
 * the child has it) or a negative ASR_E*. */
int asrd_pmi_open(asrd_t *d, asrd_rank_t *r);
/* Handles what rank r sent and asrd has not read yet (its process ended:
 * its last commands, its JOINED among them, go before its EXIT). */
void asrd_pmi_drain(asrd_rank_t *r);
/* Closes rank r's connection and frees it (r is started again). */
void asrd_pmi_close_rank(asrd_rank_t *r);
/* Closes every connection and frees the KVS. */
void asrd_pmi_stop(asrd_t *d);

/* asrd_topo.c */
/* Starts loading this host's hwloc topology on a thread of its own (call it
 * while asrd has no other thread). */
void asrd_topo_start(void);
/* The topology: waits for that load, or loads it on the first call (NULL if
 * it cannot be loaded). Called first before PMIx's threads exist. */
void *asrd_topo(void);
/* The machine and its processors only (hwloc's OS-independent discovery, a
 * tenth of a millisecond), for a PMIx server that starts before the full
 * topology is loaded; kept for the life of asrd (NULL if it cannot be made).
 * Called first before PMIx's threads exist. */
void *asrd_topo_generic(void);
/* Whether asrd set HWLOC_PLUGINS_BLACKLIST itself (the ranks do not get it). */
int asrd_topo_env_set(void);
/* Whether nlocal ranks of cpus_per_rank cores each oversubscribe this host:
 * more cores asked for than its topology has (or than the CPUs asrd may
 * run on, when fewer), the rule by which --bind-to auto leaves ranks
 * unbound (bind.c's asr_bind_resolve). */
int asrd_topo_oversubscribed(int nlocal, int cpus_per_rank);
/* The binding of local rank `local` of nlocal (cores: its rankfile cores, or
 * NULL) on this host's topology: bind.h's asr_bind_rank, the function
 * asrrun's --dry-run prints with. Fills *b and *cpus (glibc's set); returns
 * 0 when bound, 1 when not (bind none, auto with too few cores, or no
 * topology), or ASR_ECONFIG with errbuf (a rankfile core this host lacks). */
int asrd_topo_binding(const asr_bind_policy_t *p, int local, int nlocal, const char *cores, cpu_set_t *cpus,
                      asr_binding_t *b, char *errbuf, size_t errlen);

/* asrd_spawn.c */
/* Once per job, before the first start: the environment common to every rank,
 * the program's path, the child stacks. */
int asrd_spawn_prepare(asrd_t *d, char *errbuf, size_t errlen);
/* Starts rank r: stdout/stderr on pipes (*out_fd, *err_fd), stdin from
 * in_fd (-1: /dev/null), bound to cpus when bind; returns its pid or a
 * negative ASR_E* with errbuf set. */
/* pmi_fd (or -1) stays open across its execve, as PMI_FD. */
/* rep_fd (or -1) too, as ASR_REPORT_FD. end_w (or -1), the end watch's
 * write end, is moved to asrd_ends_fd() across it. */
pid_t asrd_spawn_rank(asrd_t *d, asrd_rank_t *r, int in_fd, int out_w, int err_w, int pmi_fd, int rep_fd,
                      int end_w, const cpu_set_t *cpus, int bind, char *errbuf, size_t errlen);
/* After the last start: waits until every child is past its execve, writes
 * their exec errors to their stderr, frees what prepare made. */
void asrd_spawn_done(void);

/* asrd_stdio.c */
/* Watches a started rank's output pipes (read ends) and, for rank 0, stdin. */
int asrd_stdio_start(asrd_t *d, asrd_rank_t *r, int out_fd, int err_fd, int in_fd);
/* Reads what a rank's pipes hold now (its process ended). */
void asrd_stdio_drain(asrd_rank_t *r);
/* Bytes from asrrun for rank 0's stdin; n == 0 is EOF. */
void asrd_stdio_input(asrd_t *d, const uint8_t *p, size_t n);
/* asrrun gave back output credit (CREDIT): what waits is sent. */
void asrd_stdio_credit(asrd_t *d, uint32_t bytes);
/* asrrun's reader of stream (1 or 2) went away: every rank's pipe of that
 * stream is closed, so the ranks see what a writer to a closed pipe sees. */
void asrd_stdio_reader_gone(asrd_t *d, int stream);
/* Whether both output pipes reached EOF. */
int asrd_stdio_closed(const asrd_rank_t *r);
void asrd_stdio_stop(asrd_rank_t *r);
/* The bytes of r's output read from its pipes and not yet sent up. */
size_t asrd_stdio_held(const asrd_rank_t *r);

/* asrd_report.c */
/* Rank r's report channel: our end on the loop; returns the rank's end (for
 * the child: ASR_REPORT_FD; the caller closes it once the child has it) or
 * a negative ASR_E*. */
int asrd_report_open(asrd_t *d, asrd_rank_t *r);
/* asrrun's REPORT_REQ: asks every local rank; a REPORT per rank follows
 * within timeout_ms (plus the stack traces' bound). */
void asrd_report_ask(asrd_t *d, uint32_t id, uint32_t timeout_ms, uint32_t flags);
/* r's process ended: what it still sent is read, and a wait for it ends. */
void asrd_report_rank_exited(asrd_rank_t *r);
/* Closes r's channel (r is started again, with a new one). */
void asrd_report_rank_close(asrd_rank_t *r);
void asrd_report_stop(asrd_t *d);
/* Reads what r's channel holds now, when nothing of it is buffered (a
 * HELLO just sent, before r is asked). */
void asrd_report_poll(asrd_rank_t *r);
/* Asks r on its channel: the frame of type (ASR_REPORT_ASK, a state
 * report; ASR_REPORT_MASK, metrics) with id. 1 when it went (the answer
 * is awaited); else 0, with *flags saying why not (ASR_CTL_REP_EXITED,
 * _GONE, _NO_LIBASR, or _TIMEOUT: the rank stopped reading). */
int asrd_report_send_ask(asrd_rank_t *r, int type, uint32_t id, uint32_t *flags);

/* asrd_metrics.c */
/* asrrun's METRICS_REQ: asks every local rank; a METRICS per rank follows
 * within timeout_ms. */
void asrd_metrics_ask(asrd_t *d, uint32_t id, uint32_t timeout_ms);
void asrd_metrics_stop(asrd_t *d);

/* asrd_ranks.c */
/* Starts every local rank (spawn, stdio, exit watch). */
int asrd_ranks_start(asrd_t *d, char *errbuf, size_t errlen);
/* Signals every local rank and its process group. */
void asrd_ranks_signal(asrd_t *d, int sig);
/* A signal forwarded to the job (SIGUSR1, ...): every local rank still
 * running gets it, not what it started (as under mpirun); SIGSTOP and
 * SIGCONT go to the whole process group, so that nothing of it runs on. */
void asrd_ranks_forward(asrd_t *d, int sig);
/* Every rank's exit was reported and its output ended. */
int asrd_ranks_all_done(const asrd_t *d);
/* Whether a rank's end still waits for asrrun's verdict (verdict_owed). */
int asrd_ranks_verdict_owed(const asrd_t *d);
/* asrrun's RANK_STATE for a local rank: its verdict came; RESTARTING (of
 * the incarnation that died) starts it again in place as incarnation + 1
 * (asrrun --on-failure restart).
 * 0, or a negative ASR_E* with err (the rank stays ended). */
int asrd_ranks_verdict(asrd_t *d, asrd_rank_t *r, uint32_t state, uint32_t incarnation, char *err,
                       size_t errlen);
void asrd_ranks_stop(asrd_t *d);

#endif /* ASR_ASRD_H */
