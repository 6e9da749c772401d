/*
 * asrd.h -- the host daemon's state, shared by its files:
 *   asrd.c        main, the event loop, the control channel to asrrun
 *   asrd_pmix.c   the PMIx server (libpmix server API) and its upcalls
 *   asrd_ranks.c  starting, binding and watching the local ranks, their output
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
#include <stdint.h>
#include <sys/types.h>

#include "ctl.h"
#include "kv_frame.h"
#include "kv_server.h"

typedef struct {
  int rank, lnc, local;
  pid_t pid;
  int out_fd, err_fd, in_fd;    /* pipes; -1 when closed */
  asr_buf_t out_part, err_part; /* partial lines */
  asr_buf_t in_queue;           /* stdin bytes not yet written (rank 0) */
  int in_eof;                   /* close in_fd once in_queue drains */
  int exited, status;
  int exit_sent;
} asrd_rank_t;

/* Events from PMIx's own thread, handed to the main loop through a queue. */
typedef enum { ASRD_EV_FENCE = 1, ASRD_EV_ABORT, ASRD_EV_LOG } asrd_ev_type_t;
typedef struct asrd_ev {
  asrd_ev_type_t type;
  int rank, status;
  char *msg;
  uint8_t *data;
  size_t ndata;
  void *cbfunc, *cbdata; /* PMIx callback to complete from the main loop */
  struct asrd_ev *next;
} asrd_ev_t;

typedef struct asrd {
  int epfd, sigfd, evfd;
  asr_ctl_conn_t ctl;
  int host_index;
  char hostname[128];
  char secret_hex[2 * ASR_KV_SECRET_LEN + 1];
  uint8_t secret[ASR_KV_SECRET_LEN];

  /* the job */
  int nranks, nhosts;
  char **host_names;
  int *host_of_rank, *lnc_of_rank;
  char *program;
  char **args;
  int nargs;
  char **env_names, **env_values;
  int nenv;
  int bind_to, report_bindings;
  int port;
  int port_hold; /* a socket bound to the bootstrap port (--port) until the KV server takes it, or -1 */
  char *provider, *nspace, *if_addr;
  uint64_t heartbeat_timeout_ms; /* asrrun silent this long: it is lost */

  asrd_rank_t *ranks;
  int nlocal, nalive;
  int started, done_sent;
  asr_kv_server_t *kv;
  asr_loop_t *kvloop;

  /* PMIx */
  int pmix_up;
  char pmix_err[512]; /* why PMIx_server_init failed before the JOB came */
  char tmpdir[256];
  pthread_mutex_t ev_lock;
  asrd_ev_t *ev_head, *ev_tail;
  asrd_ev_t *fence_pending; /* waiting for FENCE_DONE */
  uint32_t fence_seq;
} asrd_t;

/* asrd_pmix.c */
/* Starts the PMIx server: its directory, PMIx_server_init, lent topo (an
 * hwloc_topology_t of ours that outlives the server, or NULL). */
int asrd_pmix_init(asrd_t *d, void *topo, char *errbuf, size_t errlen);
/* Registers the job's namespace and every local rank (the library does it on
 * its thread); _wait waits for both. */
int asrd_pmix_register_start(asrd_t *d, char *errbuf, size_t errlen);
int asrd_pmix_register_wait(asrd_t *d, char *errbuf, size_t errlen);
/* Appends rank r's PMIx variables to env (malloc'd, NULL-terminated). */
int asrd_pmix_setup_rank(asrd_t *d, asrd_rank_t *r, char ***env);
void asrd_pmix_handle_events(asrd_t *d);
void asrd_pmix_fence_done(asrd_t *d, const uint8_t *data, size_t len);
void asrd_pmix_stop(asrd_t *d);

/* asrd_ranks.c */
/* Starts loading this host's hwloc topology on a thread of its own (call it
 * while asrd has no other thread). */
void asrd_ranks_topology_start(void);
/* The topology: waits for that load, or loads it on the first call (NULL if
 * it cannot be loaded). Called first before PMIx's threads exist. */
void *asrd_ranks_topology(void);
/* The machine and its processors only (hwloc's OS-independent discovery, a
 * tenth of a millisecond), for a PMIx server that starts before the full
 * topology is loaded; kept for the life of asrd (NULL if it cannot be made).
 * Called first before PMIx's threads exist. */
void *asrd_ranks_generic_topology(void);
/* What every rank's start needs (environment, stacks, /dev/null); then the
 * ranks themselves. */
int asrd_ranks_prepare(asrd_t *d, char *errbuf, size_t errlen);
int asrd_ranks_start(asrd_t *d, char *errbuf, size_t errlen);
void asrd_ranks_on_fd(asrd_t *d, int fd, uint32_t events);
void asrd_ranks_reap(asrd_t *d);
void asrd_ranks_signal(asrd_t *d, int sig);
void asrd_ranks_stdin(asrd_t *d, const uint8_t *p, size_t n);
int asrd_ranks_all_done(asrd_t *d);

/* asrd.c */
void asrd_send_output(asrd_t *d, int rank, int stream, const char *line, size_t len);
void asrd_watch(asrd_t *d, int fd, uint32_t events);
void asrd_watch_new(asrd_t *d, int fd, uint32_t events); /* an fd not yet watched */
void asrd_unwatch(asrd_t *d, int fd);

#endif /* ASR_ASRD_H */
