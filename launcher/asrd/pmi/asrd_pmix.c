/*
 * asrd_pmix.c -- asrd as a standard PMIx server for its ranks (libpmix 4.2
 * server API; see ../shared/notes/pmix-slurm-facts.md for the pitfalls).
 *
 * The job is registered with PMIX_NODE_MAP + PMIX_PROC_MAP alone, from which
 * the library derives job size, local size and peers, local and node ranks,
 * node ids and host names; nothing else is registered so the two can never
 * disagree. Upcalls arrive on PMIx's own thread: they queue an event and
 * wake the main loop through an eventfd, and every PMIx callback is completed
 * from the main loop (completing the log callback inside the upcall hangs
 * Open MPI). A fence with several daemons goes to asrrun, which answers with
 * every daemon's blob in host order (an allgather); with one daemon the
 * library completes fences itself. The registration of the job is also
 * completed on the loop: its last callback queues an event, and
 * d->cb.on_registered learns the outcome. The library's own output lines go to
 * asrd's log, never the job's output (asrd_pmix_log.h).
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <pmix.h>
#include <pmix_server.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_log.h"
#include "asr_time.h"
#include "asrd.h"
#include "asrd_dir.h"
#include "asrd_pmix_log.h"
#include "asr_rank_ev.h"

static asrd_t *the_daemon; /* the upcalls carry no pointer of ours */

/* Hands ev from PMIx's thread to the loop. The wake-up is sent under
 * ev_lock, and asrd_pmix_stop marks the hand-over closed under it too:
 * libpmix's threads outlive the loop (asrd_pmix_stop does not finalize the
 * library), so once stopped nothing of theirs may touch the loop, which
 * main frees next. */
static void queue_event(asrd_ev_t *ev) {
  asrd_t *d = the_daemon;
  pthread_mutex_lock(&d->pmix.ev_lock);
  if (d->pmix.stopped) {
    pthread_mutex_unlock(&d->pmix.ev_lock);
    free(ev->msg);
    free(ev->data);
    free(ev);
    return;
  }
  if (d->pmix.ev_tail)
    d->pmix.ev_tail->next = ev;
  else
    d->pmix.ev_head = ev;
  d->pmix.ev_tail = ev;
  asr_loop_async_send(&d->pmix.async);
  pthread_mutex_unlock(&d->pmix.ev_lock);
}

/* A rank joined or finalized: asrrun hears it (the early-exit rule).
 * Queued before the upcall returns, so before the client can exit. */
static pmix_status_t joined(const pmix_proc_t *proc, uint32_t what) {
  asrd_ev_t *ev = calloc(1, sizeof *ev);
  if (!ev) return PMIX_ERR_NOMEM;
  ev->type = ASRD_EV_JOINED;
  ev->rank = (int)proc->rank;
  ev->status = (int)what;
  queue_event(ev);
  return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t up_connected(const pmix_proc_t *proc, void *obj, pmix_op_cbfunc_t cb, void *cbdata) {
  (void)obj, (void)cb, (void)cbdata;
  asr_debug("pmix", "rank %u connected", proc->rank);
  return joined(proc, ASR_CTL_JOINED_INIT);
}

static pmix_status_t up_finalized(const pmix_proc_t *proc, void *obj, pmix_op_cbfunc_t cb, void *cbdata) {
  (void)obj, (void)cb, (void)cbdata;
  asr_debug("pmix", "rank %u finalized", proc->rank);
  return joined(proc, ASR_CTL_JOINED_FINALIZED);
}

static pmix_status_t up_abort(const pmix_proc_t *proc, void *obj, int status, const char msg[],
                              pmix_proc_t procs[], size_t nprocs, pmix_op_cbfunc_t cb, void *cbdata) {
  (void)obj, (void)procs, (void)nprocs, (void)cb, (void)cbdata;
  asrd_ev_t *ev = calloc(1, sizeof *ev);
  if (!ev) return PMIX_ERR_NOMEM;
  ev->type = ASRD_EV_ABORT;
  ev->rank = (int)proc->rank;
  ev->status = status;
  ev->msg = strdup(msg ? msg : "");
  queue_event(ev);
  return PMIX_OPERATION_SUCCEEDED; /* the job is killed; the client need not wait for us */
}

static pmix_status_t up_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                              size_t ninfo, char *data, size_t ndata, pmix_modex_cbfunc_t cb, void *cbdata) {
  (void)procs, (void)nprocs, (void)info, (void)ninfo;
  asrd_ev_t *ev = calloc(1, sizeof *ev);
  if (!ev) return PMIX_ERR_NOMEM;
  ev->type = ASRD_EV_FENCE;
  if (ndata) {
    ev->data = malloc(ndata); /* the library owns data: copy it */
    if (!ev->data) {
      free(ev);
      return PMIX_ERR_NOMEM;
    }
    memcpy(ev->data, data, ndata);
  }
  ev->ndata = ndata;
  ev->cbfunc = (void *)cb;
  ev->cbdata = cbdata;
  queue_event(ev);
  return PMIX_SUCCESS;
}

static pmix_status_t up_dmodex(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                               pmix_modex_cbfunc_t cb, void *cbdata) {
  (void)proc, (void)info, (void)ninfo, (void)cb, (void)cbdata;
  return PMIX_ERR_NOT_SUPPORTED; /* clients fence with collect; see the notes */
}

static void up_log(const pmix_proc_t *client, const pmix_info_t data[], size_t ndata,
                   const pmix_info_t dirs[], size_t ndirs, pmix_op_cbfunc_t cb, void *cbdata) {
  (void)dirs, (void)ndirs;
  char msg[1024] = "";
  size_t pos = 0;
  for (size_t i = 0; i < ndata && pos < sizeof msg - 1; i++)
    if (data[i].value.type == PMIX_STRING && data[i].value.data.string)
      pos += (size_t)snprintf(msg + pos, sizeof msg - pos, "%s%s", pos ? " " : "", data[i].value.data.string);
  asrd_ev_t *ev = calloc(1, sizeof *ev);
  if (!ev) {
    if (cb) cb(PMIX_ERR_NOMEM, cbdata);
    return;
  }
  ev->type = ASRD_EV_LOG;
  ev->rank = client ? (int)client->rank : -1;
  ev->msg = strdup(msg);
  ev->cbfunc = (void *)cb;
  ev->cbdata = cbdata;
  queue_event(ev);
}

static pmix_server_module_t module = {
    .client_connected = up_connected,
    .client_finalized = up_finalized,
    .abort = up_abort,
    .fence_nb = up_fence,
    .direct_modex = up_dmodex,
    .log = up_log,
};

/* Waits, bounded, for a number of PMIx op callbacks: never wait forever on
 * the library. Every waiter is static, so a callback that comes after a
 * timeout cannot write into a dead stack frame. */
typedef struct {
  pthread_mutex_t m;
  pthread_cond_t c;
  int pending;
  pmix_status_t st; /* the first failure */
  int notify;       /* the last completion queues ASRD_EV_REGISTERED */
} op_wait_t;

#define OP_WAIT_INIT \
  { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, PMIX_SUCCESS, 0 }

static void op_done(pmix_status_t st, void *cbdata) {
  op_wait_t *w = cbdata;
  pthread_mutex_lock(&w->m);
  if (st != PMIX_SUCCESS && w->st == PMIX_SUCCESS) w->st = st;
  int last = --w->pending == 0 && w->notify;
  if (last) w->notify = 0;
  pmix_status_t outcome = w->st;
  pthread_cond_signal(&w->c);
  pthread_mutex_unlock(&w->m);
  if (!last) return;
  asrd_ev_t *ev = calloc(1, sizeof *ev);
  if (!ev) abort(); /* without it the job never starts: no quiet way on */
  ev->type = ASRD_EV_REGISTERED;
  ev->status = outcome;
  queue_event(ev);
}

/* Counts an operation in before it is started (its callback may run at once). */
static void op_expect(op_wait_t *w) {
  pthread_mutex_lock(&w->m);
  w->pending++;
  pthread_mutex_unlock(&w->m);
}

/* Accounts for what the library returned: PMIX_SUCCESS means the callback
 * will come; anything else means it will not. */
static void op_started(op_wait_t *w, pmix_status_t rc) {
  if (rc == PMIX_SUCCESS) return;
  op_done(rc == PMIX_OPERATION_SUCCEEDED ? PMIX_SUCCESS : rc, w);
}

static pmix_status_t op_wait(op_wait_t *w, int timeout_ms) {
  /* Sleep on the condition op_done signals: a fixed poll would add up to
   * its period to every rank's registration. */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += timeout_ms / 1000;
  until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&w->m);
  while (w->pending > 0)
    if (pthread_cond_timedwait(&w->c, &w->m, &until) == ETIMEDOUT) break;
  pmix_status_t st = w->pending > 0 ? PMIX_ERR_TIMEOUT : w->st;
  pthread_mutex_unlock(&w->m);
  return st;
}

static void handle_events(asr_loop_t *loop, asr_loop_async_t *a);

int asrd_pmix_init(asrd_t *d, void *topo, char *errbuf, size_t errlen) {
  the_daemon = d;
  asr_loop_async_start(d->loop, &d->pmix.async, handle_events, d);
  if (asrd_dir_make(d->pmix.tmpdir, sizeof d->pmix.tmpdir) != 0) {
    int e = errno;
    snprintf(errbuf, errlen, "cannot create a private directory for PMIx: %s", strerror(e));
    return asr_err_from_errno(e);
  }
  /* Lend the library a topology of ours (without I/O devices): left alone
   * it discovers its own, PCI and block devices included, which is most of
   * what PMIx_server_init spends. It keeps the pointer and a copy for
   * PMIx_Get, and never frees a topology it was given; the clients never see
   * it (we do not ask for PMIX_SERVER_SHARE_TOPOLOGY). Of a server with
   * neither I/O devices nor per-rank cpusets registered, PMIx 4.2 uses
   * nothing else: its network/GPU modules look for PCI devices and its
   * device distances for I/O objects, which no topology of ours has. So a
   * server started before the job lends the generic one (machine and
   * processors, asrd_ranks_generic_topology) rather than wait for the full
   * one, which only the ranks' binding uses. Lending the server more (say,
   * sharing it with the clients, or registering cpusets for locality) would
   * need the full topology here. */
  static pmix_topology_t lent;
  lent.source = "hwloc";
  lent.topology = topo;
  pmix_info_t info[3];
  size_t ninfo = 0;
  PMIX_INFO_LOAD(&info[ninfo], PMIX_SERVER_TMPDIR, d->pmix.tmpdir, PMIX_STRING);
  ninfo++;
  PMIX_INFO_LOAD(&info[ninfo], PMIX_HOSTNAME, d->hostname, PMIX_STRING);
  ninfo++;
  if (lent.topology) {
    /* Set by hand: PMIX_INFO_LOAD would hwloc_topology_dup it, and
     * destructing this info would destroy our topology, so it is not. */
    PMIX_INFO_CONSTRUCT(&info[ninfo]);
    PMIX_LOAD_KEY(info[ninfo].key, PMIX_TOPOLOGY2);
    info[ninfo].value.type = PMIX_TOPO;
    info[ninfo].value.data.topo = &lent;
    ninfo++;
  }
  /* libpmix's own lines go to asrd's log from here on (asrd_pmix_log.h) */
  int lrc = asrd_pmix_log_start(d->loop);
  if (lrc) asr_warn("pmix", "libpmix's own lines are not logged: %s", asr_strerror(lrc));
  pmix_status_t st = PMIx_server_init(&module, info, ninfo);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (st != PMIX_SUCCESS) {
    snprintf(errbuf, errlen, "PMIx_server_init failed: %s", PMIx_Error_string(st));
    return ASR_EIO;
  }
  d->pmix.up = 1;
  return 0;
}

/* The registration in flight (static: see op_wait_t) and its job info. */
static op_wait_t reg_wait = OP_WAIT_INIT;
static pmix_info_t reg_job[2];
static int reg_job_set;

int asrd_pmix_register_start(asrd_t *d, char *errbuf, size_t errlen) {
  /* Node list and per-node rank lists ("0,1;2,3": generate_ppn does not
   * expand ranges in 4.2.2, so never pass "0-1"). */
  asr_buf_t nodes = {0}, ppn = {0};
  for (int h = 0; h < d->nhosts; h++) {
    if (h) asr_buf_put(&nodes, ",", 1);
    asr_buf_put(&nodes, d->job.host_names[h], strlen(d->job.host_names[h]));
    if (h) asr_buf_put(&ppn, ";", 1);
    int first = 1;
    for (int r = 0; r < d->nranks; r++) {
      if (d->job.host_of[r] != (uint32_t)h) continue;
      char num[16];
      int n = snprintf(num, sizeof num, "%s%d", first ? "" : ",", r);
      asr_buf_put(&ppn, num, (size_t)n);
      first = 0;
    }
  }
  asr_buf_put(&nodes, "", 1);
  asr_buf_put(&ppn, "", 1);
  char *node_regex = NULL, *ppn_regex = NULL;
  pmix_status_t st = PMIx_generate_regex((char *)nodes.data, &node_regex);
  if (st == PMIX_SUCCESS) st = PMIx_generate_ppn((char *)ppn.data, &ppn_regex);
  asr_buf_free(&nodes);
  asr_buf_free(&ppn);
  if (st != PMIX_SUCCESS) {
    snprintf(errbuf, errlen, "cannot describe the job to PMIx: %s", PMIx_Error_string(st));
    free(node_regex);
    return ASR_EIO;
  }
  PMIX_INFO_LOAD(&reg_job[0], PMIX_NODE_MAP, node_regex, PMIX_REGEX);
  PMIX_INFO_LOAD(&reg_job[1], PMIX_PROC_MAP, ppn_regex, PMIX_REGEX);
  reg_job_set = 1;
  free(node_regex);
  free(ppn_regex);
  /* The namespace and then every client, all at once: the library handles
   * them in order on its thread, and one wait for all of them replaces a
   * thread round trip per rank. (The info must live until the callback.)
   * One count more is held while they are started, so that the callbacks
   * of the first ones cannot report the whole registration done. */
  op_expect(&reg_wait);
  reg_wait.notify = 1;
  op_expect(&reg_wait);
  op_started(&reg_wait,
             PMIx_server_register_nspace(d->job.nspace, d->nlocal, reg_job, 2, op_done, &reg_wait));
  for (int i = 0; i < d->nlocal; i++) {
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, d->job.nspace, (pmix_rank_t)d->ranks[i].rank);
    op_expect(&reg_wait);
    op_started(&reg_wait,
               PMIx_server_register_client(&proc, getuid(), getgid(), &d->ranks[i], op_done, &reg_wait));
  }
  op_done(PMIX_SUCCESS, &reg_wait); /* the count held meanwhile */
  return 0;
}

/* The registration is over (every callback came): its info is freed, and
 * the daemon told. */
static void registered(asrd_t *d, pmix_status_t st) {
  if (reg_job_set) {
    PMIX_INFO_DESTRUCT(&reg_job[0]);
    PMIX_INFO_DESTRUCT(&reg_job[1]);
    reg_job_set = 0;
  }
  char err[256] = "";
  if (st != PMIX_SUCCESS)
    snprintf(err, sizeof err, "registering the job with PMIx failed: %s", PMIx_Error_string(st));
  if (d->cb.on_registered) d->cb.on_registered(d, st == PMIX_SUCCESS, err);
}

int asrd_pmix_setup_rank(asrd_t *d, asrd_rank_t *r, char ***env) {
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, d->job.nspace, (pmix_rank_t)r->rank);
  /* env is a malloc'd NULL-terminated array; the library appends to it. */
  pmix_status_t st = PMIx_server_setup_fork(&proc, env);
  if (st != PMIX_SUCCESS) {
    asr_error("pmix", "setup_fork(rank %d): %s", r->rank, PMIx_Error_string(st));
    return ASR_EIO;
  }
  return 0;
}

static void release_blob(void *cbdata) { free(cbdata); }

/* asrrun answered the fence (ok: every host's blob, copied for the library,
 * which frees it through release_blob), or the job ends first. */
static void fence_done(asrd_t *d, asrd_fence_t *f, int ok, const uint8_t *data, size_t len) {
  (void)d;
  asrd_ev_t *ev = (asrd_ev_t *)((char *)f - offsetof(asrd_ev_t, fence));
  pmix_modex_cbfunc_t cb = (pmix_modex_cbfunc_t)ev->cbfunc;
  if (!ok) {
    if (cb) cb(PMIX_ERR_TIMEOUT, NULL, 0, ev->cbdata, NULL, NULL);
  } else {
    char *copy = len ? malloc(len) : NULL;
    if (len && copy) memcpy(copy, data, len);
    if (cb)
      cb(PMIX_SUCCESS, copy, copy ? len : 0, ev->cbdata, release_blob, copy);
    else
      free(copy);
  }
  free(ev->data);
  free(ev);
}

static void handle_events(asr_loop_t *loop, asr_loop_async_t *a) {
  (void)loop;
  asrd_t *d = a->arg;
  asrd_pmix_take_events(d);
}

void asrd_pmix_take_events(asrd_t *d) {
  pthread_mutex_lock(&d->pmix.ev_lock);
  asrd_ev_t *ev = d->pmix.ev_head;
  d->pmix.ev_head = d->pmix.ev_tail = NULL;
  pthread_mutex_unlock(&d->pmix.ev_lock);
  while (ev) {
    asrd_ev_t *next = ev->next;
    ev->next = NULL;
    switch (ev->type) {
      case ASRD_EV_REGISTERED: registered(d, ev->status); break;
      case ASRD_EV_JOINED:
        for (int i = 0; i < d->nlocal; i++)
          if (d->ranks[i].rank == ev->rank) asrd_up_joined(d, &d->ranks[i], ev->status, ASR_CTL_VIA_PMIX);
        break;
      case ASRD_EV_FENCE:
        /* kept until asrrun answers (fence_done frees it) */
        ev->fence.done = fence_done;
        asrd_up_fence(d, &ev->fence, ev->data, ev->ndata);
        ev = NULL;
        break;
      case ASRD_EV_ABORT: {
        asr_ctl_msg_t m = {
            .type = ASR_CTL_ABORT,
            .u.abort = {.rank = (uint32_t)ev->rank, .status = (uint32_t)ev->status, .msg = ev->msg}};
        asrd_up_send(d, &m);
        break;
      }
      case ASRD_EV_LOG: {
        char line[1200];
        int n = snprintf(line, sizeof line, "asrrun: PMIx log from rank %d: %s", ev->rank,
                         ev->msg ? ev->msg : "");
        if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
        asrd_up_output(d, ev->rank >= 0 ? ev->rank : 0, 2, line, (size_t)n);
        pmix_op_cbfunc_t cb = (pmix_op_cbfunc_t)ev->cbfunc;
        if (cb) cb(PMIX_SUCCESS, ev->cbdata); /* from our thread, never inside the upcall */
        break;
      }
    }
    if (ev) {
      free(ev->msg);
      free(ev->data);
      free(ev);
    }
    ev = next;
  }
}

/* --- rank states (issue 50) -------------------------------------------------------- */

/* What one notification owns until the library is done with it. */
typedef struct {
  pmix_info_t *info;
  size_t ninfo;
} notify_t;

static void notify_done(pmix_status_t st, void *cbdata) {
  (void)st;
  notify_t *n = cbdata;
  PMIX_INFO_FREE(n->info, n->ninfo);
  free(n);
}

/* One event to every local client (the library's thread sends it). */
static void notify(asrd_t *d, pmix_status_t code, const pmix_proc_t *affected, int with_asr,
                   const asr_ctl_msg_t *m) {
  notify_t *n = calloc(1, sizeof *n);
  if (!n) return;
  n->ninfo = with_asr ? 7 : 3;
  PMIX_INFO_CREATE(n->info, n->ninfo);
  if (!n->info) {
    free(n);
    return;
  }
  bool yes = true;
  int exit_code = WIFEXITED((int)m->u.rank_state.status)     ? WEXITSTATUS((int)m->u.rank_state.status)
                  : WIFSIGNALED((int)m->u.rank_state.status) ? 128 + WTERMSIG((int)m->u.rank_state.status)
                                                             : 0;
  PMIX_INFO_LOAD(&n->info[0], PMIX_EVENT_AFFECTED_PROC, affected, PMIX_PROC);
  PMIX_INFO_LOAD(&n->info[1], PMIX_EXIT_CODE, &exit_code, PMIX_INT);
  if (with_asr) {
    uint32_t rank = m->u.rank_state.rank, state = m->u.rank_state.state, inc = m->u.rank_state.incarnation;
    PMIX_INFO_LOAD(&n->info[2], PMIX_EVENT_NON_DEFAULT, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&n->info[3], ASR_RANK_EV_RANK, &rank, PMIX_UINT32);
    PMIX_INFO_LOAD(&n->info[4], ASR_RANK_EV_STATE, &state, PMIX_UINT32);
    PMIX_INFO_LOAD(&n->info[5], ASR_RANK_EV_INCARNATION, &inc, PMIX_UINT32);
    PMIX_INFO_LOAD(&n->info[6], ASR_RANK_EV_WHY, m->u.rank_state.why, PMIX_STRING);
  } else {
    PMIX_INFO_LOAD(&n->info[2], PMIX_EVENT_NON_DEFAULT, &yes, PMIX_BOOL);
  }
  pmix_proc_t source;
  PMIX_LOAD_PROCID(&source, d->job.nspace, PMIX_RANK_UNDEF);
  pmix_status_t st = PMIx_Notify_event(code, &source, PMIX_RANGE_LOCAL, n->info, n->ninfo, notify_done, n);
  if (st != PMIX_SUCCESS) {
    if (st != PMIX_OPERATION_SUCCEEDED)
      asr_warn("pmix", "cannot tell the ranks of rank %u's state: %s", m->u.rank_state.rank,
               PMIx_Error_string(st));
    notify_done(st, n);
  }
}

void asrd_pmix_notify_rank(asrd_t *d, const asr_ctl_msg_t *m) {
  if (!d->pmix.up || d->nlocal == 0) return;
  pmix_proc_t affected;
  PMIX_LOAD_PROCID(&affected, d->job.nspace, (pmix_rank_t)m->u.rank_state.rank);
  notify(d, ASR_RANK_EV_CODE, &affected, 1, m);
  /* what a PRRTE daemon tells of a death, for plain PMIx and MPI programs */
  uint32_t state = m->u.rank_state.state;
  if (state == ASR_CTL_RANK_FAILED || state == ASR_CTL_RANK_RESTARTING) {
    int st = (int)m->u.rank_state.status;
    notify(d, WIFSIGNALED(st) ? PMIX_ERR_PROC_ABORTED_BY_SIG : PMIX_EVENT_PROC_TERMINATED, &affected, 0, m);
  }
}

void asrd_pmix_stop(asrd_t *d) {
  if (d->pmix.up) {
    /* A registration still in flight (the job failed to start) would create
     * files in our directory: let it finish (bounded) before removing it. */
    op_wait(&reg_wait, 2000);
    /* No PMIx_server_deregister_nspace or PMIx_server_finalize: asrd exits
     * right after this, every rank is gone, and the library's teardown would
     * only free memory, stop its two threads and remove its files under our
     * directory, which asrd_dir_remove does below. It costs thread round
     * trips for nothing, deregister can wedge when a registration went
     * wrong, and finalize can crash (libpmix 4.2.2, SIGSEGV) when a client
     * was lost while a fence it belonged to was pending. */
    d->pmix.up = 0;
  }
  /* What the library queued and the loop did not take is dropped: every
   * client is gone. (Its threads live on until asrd exits; what they queue
   * from now on is dropped in queue_event, which no longer wakes the loop.) */
  pthread_mutex_lock(&d->pmix.ev_lock);
  d->pmix.stopped = 1;
  pthread_mutex_unlock(&d->pmix.ev_lock);
  asr_loop_async_stop(d->loop, &d->pmix.async);
  asrd_pmix_log_stop(d->loop);
  pthread_mutex_lock(&d->pmix.ev_lock);
  for (asrd_ev_t *ev = d->pmix.ev_head, *next; ev; ev = next) {
    next = ev->next;
    free(ev->msg);
    free(ev->data);
    free(ev);
  }
  d->pmix.ev_head = d->pmix.ev_tail = NULL;
  pthread_mutex_unlock(&d->pmix.ev_lock);
  if (d->pmix.tmpdir[0]) asrd_dir_remove(d->pmix.tmpdir);
}
