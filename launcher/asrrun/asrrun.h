/*
 * asrrun.h -- the launcher's front end, shared by its files, each one job:
 *   asrrun.c          main: configuration, map, launch, the job's lifecycle, exit code
 *   asrrun_daemons.c  the daemons: launching, their call back (HELLO), what they
 *                     say (output, exits, fences, aborts), heartbeats, KILL
 *   asrrun_output.c   printing the ranks' lines (on a writer thread, with credit
 *                     back to the daemons), and --output-dir files
 *   asrrun_stdin.c    asrrun's stdin to rank 0
 *   asrrun_early.c    this host's asrd started before the configuration is read
 *   asrrun_report.c   what -v tells as the job goes, and notices --quiet silences
 *   asrrun_state.c    the job's state report: asking every daemon, gathering (issue 24)
 *   asrrun_diag.c     rendering it: the diagnosis, a block per host and rank, missing keys
 *   asrrun_status.c   asrrun --status: this job's socket in the user's 0700 directory, and
 *                     the client that asks a running job from another shell
 *   asrrun_policy.c   --on-failure continue|restart: each rank's state, restarts, the exit
 *                     code and the summary of failures
 *   asrrun_trace.c    --trace FILE: the launch's phases, the daemons' clock rounds and trace
 *                     files, the merged file (issue 52)
 * Files below asrrun.c never call up into it: a failure of the job or a
 * daemon's change goes through the callbacks in asrrun_t.
 */
#ifndef ASR_ASRRUN_H
#define ASR_ASRRUN_H

#include <stdint.h>
#include <sys/types.h>

#include "asr_loop.h"
#include "ctl.h"
#include "job_config.h"
#include "kv_secret.h"
#include "map.h"
#include "tree_node.h"

/* Exit codes (asrrun --help and the README say the same). */
#define ASRRUN_EXIT_USAGE 2
#define ASRRUN_EXIT_TIMEOUT 124
#define ASRRUN_EXIT_LAUNCH 125
#define ASRRUN_EXIT_NOTFOUND 127

#define ASRRUN_STALL_MS 2000       /* a wait or a request this old gets a diagnosis line */
#define ASRRUN_REPORT_ASK_MS 2000  /* each asrd waits this long for its ranks' reports */
#define ASRRUN_QUIT_WINDOW_MS 2000 /* a second SIGQUIT within this ends the job */
#define ASRRUN_ENDS_MS 5000        /* a daemon that cannot answer ENDS_ASK (asrrun_verdict.c) */
/* A REPORT's flags, as asrd sets them (ctl_msg.h) */
#define ASRRUN_REP_ANSWERED ASR_CTL_REP_ANSWERED
#define ASRRUN_REP_EXITED ASR_CTL_REP_EXITED
#define ASRRUN_REP_NO_LIBASR ASR_CTL_REP_NO_LIBASR
#define ASRRUN_REP_TIMEOUT ASR_CTL_REP_TIMEOUT
#define ASRRUN_REP_GONE ASR_CTL_REP_GONE
#define ASRRUN_REP_NO_STACK_TOOL ASR_CTL_REP_NO_STACK_TOOL

#define ASRRUN_GRACE_MS 3000 /* SIGTERM, then SIGKILL after this; then give up after as long again */

/* A daemon as asrrun sees it (asrrun_daemons.c: daemon_set_state):
 *   LAUNCHING  started (forked here, or through the agent or srun), not called back yet
 *   JOINED     its HELLO was right; the JOB went to it
 *   RUNNING    it started its ranks (STARTED)
 *   DONE       its ranks are done and their output delivered (DONE)
 *   CLOSING    SHUTDOWN sent; its connection is being closed
 *   FINISHED   its connection ended after DONE: it did its part
 *   LOST       it ended, or went silent, before DONE */
typedef enum {
  DAEMON_LAUNCHING = 0,
  DAEMON_JOINED,
  DAEMON_RUNNING,
  DAEMON_DONE,
  DAEMON_CLOSING,
  DAEMON_FINISHED,
  DAEMON_LOST,
} daemon_state_t;

typedef struct asrrun asrrun_t;

/* One rank's part of a state report, as its daemon's REPORT said
 * (asrrun_state.c gathers, asrrun_diag.c renders). */
typedef struct {
  int have; /* a REPORT came for it */
  uint32_t flags, pid;
  char pstate[257];
  char *text, *stack; /* malloc'd */
  size_t text_len, stack_len;
} asrrun_rank_state_t;

typedef struct daemon {
  asrrun_t *run;
  int index;
  daemon_state_t state;
  asr_ctl_conn_t *conn; /* from its HELLO until its connection ends */
  int nlocal;
  int local; /* forked on this host (else started through the rsh agent or srun) */
  /* a child of asrrun's: the node's record of it (its connection, its
   * agent); NULL for a daemon below another */
  asr_tree_child_t *child;
  pid_t *pgids; /* its ranks' process groups (from STARTED) */
  int npgids;
  int64_t stdin_credit; /* STDIN bytes it will still take (ctl_msg.h's window) */
  int job_waits;        /* its JOB waits for MASTER_ADDR (run->master_later) */
  /* the tree (tree.h): a daemon below one of asrrun's children is routed:
   * conn is then that child's, borrowed while it lasts (ROUTED messages) */
  int routed;
  struct daemon *top; /* the child of asrrun's whose subtree holds it (itself when not routed) */
  int ends_owed;      /* it owes an answer (ENDS) to the verdict's ENDS_ASK (run->ask_ends) */
} daemon_t;

typedef struct {
  int exited;
  int status;
  int joined; /* 0, ASR_CTL_JOINED_INIT or ASR_CTL_JOINED_FINALIZED (its daemon's JOINED) */
  int via;    /* how it joined: ASR_CTL_VIA_PMIX, _PMI1, _PMI2, or 0 */
  /* the failure policy's (asrrun_policy.c, --on-failure continue|restart) */
  int state;        /* ASR_CTL_RANK_*: as every daemon was last told */
  int incarnation;  /* its current incarnation: 0, one more at each restart */
  int own_status;   /* the exit status of its last incarnation that exited on its own, or -1 */
  unsigned own_seq; /* when that exit was told (the policy's order of ends) */
  int out_fd[3];    /* --output-dir files (stdout, stderr): the writer thread's */
  int partial[3];   /* a line of stream 1 / 2 is open: its next piece has no tag */
} rank_t;

/* The job as asrrun runs it (asrrun.c: run_set_state):
 *   LAUNCHING  starting the daemons
 *   RUNNING    the daemons run the job
 *   ABORTING   KILL(SIGTERM, or a forwarded signal) sent to every daemon
 *   KILLING    KILL(SIGKILL) sent; after the grace time asrrun gives up on them
 *   CLOSING    every daemon is done (or gone): SHUTDOWN, connections closed, local
 *              daemons reaped (bounded)
 *   DONE       the loop stops; the exit code is decided */
typedef enum { RUN_LAUNCHING = 0, RUN_RUNNING, RUN_ABORTING, RUN_KILLING, RUN_CLOSING, RUN_DONE } run_state_t;

/* The early local daemon (asrrun_early.c). */
typedef struct {
  pid_t pid;      /* > 0: started and not reaped yet (once adopted, also daemons[index].pid) */
  int lfd;        /* the listener it calls back to (127.0.0.1), -1 once closed or taken over */
  uint16_t port;  /* that listener's port */
  int bport;      /* the bootstrap port it holds while it starts (the job's unless one is configured) */
  char host[128]; /* the host name it was given: this host's */
  int index;      /* the host it serves once adopted, else -1 */
} asrrun_early_t;

struct asrrun {
  asr_loop_t *loop;
  asr_config_t cfg; /* asrrun.c: read once, then read only */
  asr_map_t map;    /* asrrun.c: built once, then read only */
  daemon_t *daemons;
  rank_t *ranks;
  run_state_t state; /* asrrun.c: run_set_state */
  int exit_code;     /* decided by the first failure; -1 until then */
  int interrupts;
  int ranks_exited;
  int any_joined; /* a rank joined the job (JOINED): the early-exit rule applies */

  /* the job as asrrun.c prepared it before the launch; read by the JOB
   * (asrrun_daemons.c) and --status */
  struct {
    char secret_hex[ASR_KV_SECRET_HEX_LEN + 1];
    char nspace[64];
    int port;
    int master_port;       /* MASTER_PORT: free here when the job was prepared */
    char master_addr[128]; /* MASTER_ADDR: rank 0's host on the job's network ("" on one host) */
    int master_later;      /* rank 0's host has no address here: it is the one its asrd calls from,
                            * and JOBs wait for that asrd's HELLO (asrrun_daemons.c) */
    char wdir[4096];       /* the ranks' working directory: --wdir made absolute, else asrrun's */
  } job;

  /* the job's cause, being decided (asrrun_verdict.c) */
  struct {
    int open;    /* ENDS_ASK went out; answers awaited */
    uint32_t id; /* the round's id */
    /* the first end told of each kind (asrrun_end_kind_t): its exit code
     * (-1: none yet) and the line that names it */
    int code[3];
    char line[3][1024];
    asr_loop_timer_t deadline; /* ASRRUN_ENDS_MS */
  } verdict;

  /* the failure policy (asrrun_policy.c): under --on-failure continue or
   * restart, each rank's end that the policy absorbed, in the order told */
  struct {
    int restarts_left; /* the job's budget (--max-restarts) */
    unsigned seq;      /* ends told so far */
    struct asrrun_failure *fails;
    int nfails, capfails;
  } policy;

  /* the root of the tree of daemons (asrrun_daemons.c on tree_node.h; the
   * radix and the listener are asrrun.c's, set before the launch) */
  struct {
    int radix; /* 0: flat */
    int lfd;   /* the listener (the early daemon's, when it has one, is the node's too) */
    asr_tree_node_t node;
    uint8_t *host_ranks;    /* per host: it has ranks */
    const char **host_ptrs; /* per host: its name (the map's) */
    asr_loop_timer_t progress;
    uint64_t launch_ms; /* when the daemons' launch began (the loop's clock) */
    int daemons_up;
    /* what the root handled (-v at the end, the tree bench): fences and
     * their messages out (links and messages in: the node's) */
    uint64_t fences, fence_out, fence_bytes;
    /* what a parent starts its children with (the JOB's tree fields):
     * asrd's path on the other hosts, the address they call back on */
    char asrd[4200];
    char ip[64];
  } tree;

  asrrun_early_t early; /* asrrun_early.c */

  struct asrrun_out *out; /* asrrun_output.c */

  /* stdin (asrrun_stdin.c) */
  struct {
    int state; /* 0 closed, 1 waiting for rank 0's daemon, 2 a file, 3 watched */
    asr_loop_io_t io;
    int reading;   /* io waits for input (there is credit) */
    uint32_t rank; /* --stdin: a rank, ASR_CTL_STDIN_ALL or ASR_CTL_STDIN_NONE */
  } input;

  /* How the files below asrrun.c reach each other and it, each set by the
   * file named (asrrun.h's header: nothing calls up into asrrun.c) */
  struct {
    /* asrrun.c: the job must end (the first caller decides the exit
     * code and prints why); a daemon changed state */
    void (*fail)(asrrun_t *run, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
    void (*daemon_changed)(asrrun_t *run, daemon_t *d);
    /* asrrun_daemons.c: give a daemon output credit back; a reader of
     * asrrun's stream (1, 2) went away */
    void (*output_credit)(asrrun_t *run, int daemon, uint32_t bytes);
    void (*output_gone)(asrrun_t *run, int stream);
    /* asrrun.c: rank 0's daemon took n more bytes of stdin (STDIN_CREDIT) */
    void (*stdin_taken)(asrrun_t *run, uint32_t n);
    /* asrrun_daemons.c: ENDS_ASK id to every daemon that runs the job
     * and may still tell of its ranks' ends (each is marked ends_owed until
     * it answers, says DONE or is gone); how many were asked */
    int (*ask_ends)(asrrun_t *run, uint32_t id);
    /* asrrun.c: a daemon's REPORT (asrrun_state_on_report) */
    void (*on_report)(asrrun_t *run, daemon_t *d, const asr_ctl_msg_t *m);
    /* asrrun.c: a daemon's TRACE or TRACE_END (asrrun_trace_msg) */
    void (*on_trace)(asrrun_t *run, daemon_t *d, const asr_ctl_msg_t *m);
    /* asrrun.c: a daemon's METRICS (asrrun_metrics_on_msg) */
    void (*on_metrics)(asrrun_t *run, daemon_t *d, const asr_ctl_msg_t *m);
  } cb;

  struct asrrun_state *rep_state; /* asrrun_state.c: the state report being gathered */
  struct asrrun_trace *trace;     /* asrrun_trace.c: --trace's records, or NULL */
  struct asrrun_status *status;   /* asrrun_status.c: this job's --status socket */
  struct asrrun_metrics *metrics; /* asrrun_metrics.c: --metrics-port's server */
};

const char *asrrun_daemon_state_name(daemon_state_t s);

/* asrrun_daemons.c */
/* Watches the control listener(s) and starts every daemon not started yet. */
int asrrun_daemons_launch(asrrun_t *run, const char *asrd_local, const char *asrd_remote,
                          const char *ctl_local, const char *ctl_remote);
/* KILL(sig) to every daemon that can still hear it; SIGKILL also kills the
 * local processes of daemons that never called back. */
void asrrun_daemons_kill(asrrun_t *run, int sig);
/* Writes what is queued for every daemon now (before asrrun stops itself). */
void asrrun_daemons_flush(asrrun_t *run);
/* SHUTDOWN to every daemon still connected, and their connections closed. */
void asrrun_daemons_shutdown(asrrun_t *run);
/* Whether every daemon is done (DONE or beyond) or gone; whether every
 * daemon process of asrrun's is reaped and every connection closed, those
 * of daemons given up on (LOST) excepted: they are not waited for (their
 * agents were killed; asrrun_daemons_stop reaps them). */
int asrrun_daemons_all_done(const asrrun_t *run);
int asrrun_daemons_all_ended(const asrrun_t *run);
/* Warns, for each daemon all_ended still waits for, that it did not end
 * within waited_ms of the job's end (asrrun.c's CLOSING deadline). */
void asrrun_daemons_say_unended(const asrrun_t *run, int waited_ms);
/* Sends STDIN bytes (n == 0: EOF) to the daemons of the ranks that read it. */
void asrrun_daemons_stdin(asrrun_t *run, const uint8_t *p, size_t n);
/* How many bytes every one of those daemons will take now. */
int64_t asrrun_daemons_stdin_room(const asrrun_t *run);
/* Whether the daemons of the ranks that read stdin have started them. */
int asrrun_daemons_stdin_ready(const asrrun_t *run);
/* Stops every source of theirs on the loop, kills and frees what is left. */
void asrrun_daemons_stop(asrrun_t *run);

/* A request (REPORT_REQ, METRICS_REQ) to every daemon with ranks that can
 * still hear it, sent now; expect[h] says which got it. Returns how many. */
int asrrun_daemons_ask(asrrun_t *run, const asr_ctl_msg_t *m, int *expect);
/* Sends m to daemon h when it can still hear it: 0, or ASR_ENOTCONN. */
int asrrun_daemons_send(asrrun_t *run, int h, const asr_ctl_msg_t *m);

/* asrrun_verdict.c: the job's cause (doc/design.md, "Verdicts by cause").
 * The kinds of end that end the job, in the order they are named when
 * told together: */
typedef enum {
  ASRRUN_END_KILLED = 0, /* a death by a signal from outside (asr_ctl_killed_from_outside) */
  ASRRUN_END_LEFT,       /* an exit 0 after joining without finalizing, or without joining */
  ASRRUN_END_FAILED      /* any other: a non-zero exit, a signal of its own, an abort, not run */
} asrrun_end_kind_t;
void asrrun_verdict_init(asrrun_t *run);
/* An end of that kind, told by a daemon, with its exit code for asrrun and
 * the line that names it. Opens a round (ENDS_ASK) unless one is open. */
void asrrun_verdict_end(asrrun_t *run, asrrun_end_kind_t kind, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Daemon d answered ENDS_ASK id. */
void asrrun_verdict_answer(asrrun_t *run, daemon_t *d, uint32_t id);
/* A daemon changed state: once none owes an answer, the cause is named
 * (run->fail). */
void asrrun_verdict_check(asrrun_t *run);
/* The job ends: no round waits any more. */
void asrrun_verdict_stop(asrrun_t *run);

/* asrrun_policy.c: --on-failure continue|restart (issue 50) */
void asrrun_policy_init(asrrun_t *run);
/* Whether the policy decides what rank ends do (not abort). */
int asrrun_policy_active(const asrrun_t *run);
/* Rank `rank` of daemon d ended with wait status st (flags: EXIT's): it
 * finished, or it failed and is restarted in place or left failed; every
 * daemon is told (RANK_STATE). */
void asrrun_policy_rank_ended(asrrun_t *run, daemon_t *d, int rank, int st, uint32_t flags);
/* A rank joined (JOINED INIT): a restarted incarnation is alive again. */
void asrrun_policy_rank_joined(asrrun_t *run, int rank);
/* Host h was lost (why): its ranks still running failed with it. */
void asrrun_policy_host_lost(asrrun_t *run, int h, const char *why);
/* The job's exit code under the policy: 0 when every rank's last
 * incarnation that exited on its own exited 0, else the first such status. */
int asrrun_policy_exit_code(const asrrun_t *run);
/* How many of rank's ends the policy absorbed (failed, or restarted). */
int asrrun_policy_failures(const asrrun_t *run, int rank);
/* The last line: each failure and restart, first cause first (nothing
 * when none). */
void asrrun_policy_summary(const asrrun_t *run);
void asrrun_policy_free(asrrun_t *run);

/* asrrun_metrics.c: --metrics-port (issue 52) */
/* Listens on the port and tells it (port 0) on stderr: 0, or asrrun's
 * exit code (the port cannot be had), said on stderr. */
int asrrun_metrics_start(asrrun_t *run);
/* A daemon's METRICS for the scrape being gathered. */
void asrrun_metrics_on_msg(asrrun_t *run, daemon_t *d, const asr_ctl_msg_t *m);
/* Closes the server and every connection (nothing more is answered). */
void asrrun_metrics_stop(asrrun_t *run);

/* asrrun_state.c */
/* What to do with a state report once it is rendered (text, len). */
typedef void (*asrrun_state_cb)(asrrun_t *run, const char *text, size_t len, void *arg);
/* Asks every daemon for its ranks' state (a report already being gathered
 * is shared: cb joins it). cb follows within a bound, once. */
void asrrun_state_ask(asrrun_t *run, const char *why, asrrun_state_cb cb, void *arg);
/* A daemon's REPORT. */
void asrrun_state_on_report(asrrun_t *run, daemon_t *d, const asr_ctl_msg_t *m);
/* Writes text to fd whole (blocking); the usual cb's body. */
void asrrun_state_write(int fd, const char *text, size_t len);
/* Ends a report being gathered (its callbacks are not called) and frees it. */
void asrrun_state_stop(asrrun_t *run);

/* asrrun_diag.c */
/* Renders the report of the ranks' states st[nranks] into out: the diagnosis,
 * a block per host and rank, the keys waited on that no rank has set. */
void asrrun_diag_render(const asrrun_t *run, const asrrun_rank_state_t *st, const char *why, uint64_t at_ms,
                        asr_buf_t *out);

/* asrrun_status.c */
/* This job's socket in the user's directory (a warning when it cannot be
 * made: the job runs without --status). */
void asrrun_status_start(asrrun_t *run);
void asrrun_status_stop(asrrun_t *run);
/* asrrun --status [JOB]: the client. Returns the exit code. */
int asrrun_status_client(const char *job);

/* asrrun_output.c */
/* --output-dir made (mkdir -p) and writable, before launch; else why. */
int asrrun_output_prepare(asrrun_t *run, char *err, size_t errlen);
/* The writer thread (after the map is known). */
int asrrun_output_start(asrrun_t *run);
/* An OUTPUT of daemon's (-1: asrrun's own, costing no credit): queued for
 * the writer, each line written with one write() so lines never mix. */
void asrrun_output_msg(asrrun_t *run, int daemon, int rank, int stream, uint32_t flags, const uint8_t *line,
                       size_t len);
/* The daemon is lost: a line of its left open no longer holds the others. */
void asrrun_output_daemon_lost(asrrun_t *run, int daemon);
/* Whether stream's reader went away (the daemons were told). */
int asrrun_output_gone(const asrrun_t *run, int stream);
/* Writes everything still queued (blocking), ends the writer, closes files. */
void asrrun_output_close(asrrun_t *run);

/* asrrun_stdin.c */
/* Forwards asrrun's stdin once rank 0's daemon has started its ranks, as
 * far as its credit goes. */
void asrrun_stdin_poll(asrrun_t *run);
/* Rank 0's daemon took n more bytes (STDIN_CREDIT). */
void asrrun_stdin_credit(asrrun_t *run, uint32_t n);
void asrrun_stdin_stop(asrrun_t *run);

/* asrrun_report.c */
/* One line "asrrun: ..." on stderr, unless --quiet. */
void asrrun_notice(const asrrun_t *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* -v: the map and the provider (why: how it was chosen); -vv every rank. */
void asrrun_report_map(const asrrun_t *run, const char *provider, const char *why);
/* -v: a daemon called back, the up-th of them, ms after the launch began. */
void asrrun_report_daemon_up(const asrrun_t *run, const daemon_t *d, int up, uint64_t ms);
/* -v: a launch taking long: how many are up, which are awaited. */
void asrrun_report_progress(const asrrun_t *run, int up, uint64_t ms);
/* -v, at the end: what asrrun handled itself (connections, messages, fences). */
void asrrun_report_ctl(const asrrun_t *run);
/* -v: a daemon started its ranks (-vv: each rank with its pid). */
void asrrun_report_started(const asrrun_t *run, const daemon_t *d);

/* asrrun_early.c */
void asrrun_early_start(asrrun_t *run, int argc, char **argv);
void asrrun_early_adopt(asrrun_t *run, const int *is_local);
void asrrun_early_dismiss(asrrun_t *run);
/* Reaps a dismissed early daemon (bounded), on the loop. */
void asrrun_early_finish(asrrun_t *run);
/* The path of asrd next to this asrrun (or ASR_ASRD); a free port, or -1. */
void asrrun_asrd_path(char *out, size_t len);
int asrrun_pick_port(void);

/* asrrun_trace.c (issue 52) */
/* --trace FILE: FILE's directory checked, asrrun's own records started. 0
 * (also without --trace), or an ASR_E* with err set. */
int asrrun_trace_start(asrrun_t *run, char *err, size_t errlen);
/* Every daemon of asrrun's own was started (its agent or srun forked, or
 * the daemon itself): the launch's "agents started". */
void asrrun_trace_launched(asrrun_t *run);
/* The JOB went to daemon d (a child of asrrun's): "job sent" once all did. */
void asrrun_trace_job_sent(asrrun_t *run, const daemon_t *d);
/* Daemon d changed state: the launch's phases. */
void asrrun_trace_daemon(asrrun_t *run, const daemon_t *d);
/* TRACE or TRACE_END from daemon d. */
void asrrun_trace_msg(asrrun_t *run, daemon_t *d, const asr_ctl_msg_t *m);
/* The job is over: the merged file is written (once). */
void asrrun_trace_finish(asrrun_t *run);
/* Writes it if not yet, and frees everything. */
void asrrun_trace_stop(asrrun_t *run);

#endif /* ASR_ASRRUN_H */
