/*
 * asr_loop.c -- the event loop (asr_loop.h): epoll for fds, a binary heap
 * of timers, an eventfd for wakeups, one signalfd for signals, pidfds for
 * process exits.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_loop.h"
#include "asr_time.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define SIGNALS_PER_DISPATCH 16 /* a signal storm cannot hold one wakeup */

struct asr_loop {
  int epfd;
  int wakefd;
  int sigfd; /* -1 until the first signal is watched */
  asr_loop_io_t wake_io, sig_io;
  sigset_t sigmask; /* what sigfd reads */
  asr_loop_signal_t *sigs[_NSIG];

  asr_loop_timer_t **heap; /* heap[1..nheap]: a min-heap by (due_ms, seq) */
  unsigned nheap, capheap;
  uint64_t timer_seq;
  uint64_t now;

  asr_loop_async_t *asyncs;
  int async_flag; /* atomic: some async was sent */

  /* The sleep protocol (asr_loop_wake): the loop publishes "sleeping"
   * before it looks at "woken" a last time, and a waker publishes "woken"
   * before it looks at "sleeping"; with both sequentially consistent, either
   * the loop sees the wake or the waker sees the sleep and writes wakefd. */
  int sleeping, woken, stop; /* atomics */

  asr_loop_before_sleep_cb before;
  asr_loop_after_sleep_cb after;
  void *hook_arg;

  /* The batch being dispatched: a source stopped meanwhile is struck out of
   * the rest of it (its record may be freed by then). */
  struct epoll_event *batch;
  int ibatch, nbatch;

  asr_loop_pid_t **gone; /* pids found gone at start, reported next dispatch */
  unsigned ngone, capgone;

  unsigned nsources; /* the owners' sources started and not stopped */
};

static unsigned to_epoll(unsigned want) {
  return (want & ASR_LOOP_READ ? EPOLLIN : 0u) | (want & ASR_LOOP_WRITE ? EPOLLOUT : 0u);
}

/* --- timers: a binary min-heap of records, each knowing its place -------- */

static int timer_before(const asr_loop_timer_t *a, const asr_loop_timer_t *b) {
  return a->due_ms < b->due_ms || (a->due_ms == b->due_ms && a->seq < b->seq);
}

static void heap_place(asr_loop_t *l, unsigned pos, asr_loop_timer_t *t) {
  l->heap[pos] = t;
  t->heap_pos = pos;
}

static void heap_up(asr_loop_t *l, unsigned pos) {
  asr_loop_timer_t *t = l->heap[pos];
  while (pos > 1 && timer_before(t, l->heap[pos / 2])) {
    heap_place(l, pos, l->heap[pos / 2]);
    pos /= 2;
  }
  heap_place(l, pos, t);
}

static void heap_down(asr_loop_t *l, unsigned pos) {
  asr_loop_timer_t *t = l->heap[pos];
  for (;;) {
    unsigned c = pos * 2;
    if (c > l->nheap) break;
    if (c + 1 <= l->nheap && timer_before(l->heap[c + 1], l->heap[c])) c++;
    if (!timer_before(l->heap[c], t)) break;
    heap_place(l, pos, l->heap[c]);
    pos = c;
  }
  heap_place(l, pos, t);
}

static void heap_remove(asr_loop_t *l, asr_loop_timer_t *t) {
  unsigned pos = t->heap_pos;
  assert(pos >= 1 && pos <= l->nheap && l->heap[pos] == t);
  asr_loop_timer_t *last = l->heap[l->nheap--];
  t->heap_pos = 0;
  if (last == t) return;
  heap_place(l, pos, last);
  heap_up(l, pos);
  heap_down(l, last->heap_pos);
}

void asr_loop_timer_start(asr_loop_t *l, asr_loop_timer_t *t, uint64_t delay_ms, asr_loop_timer_cb cb,
                          void *arg) {
  if (t->heap_pos)
    heap_remove(l, t);
  else
    l->nsources++;
  if (l->nheap + 1 >= l->capheap) {
    unsigned cap = l->capheap ? l->capheap * 2 : 16;
    asr_loop_timer_t **h = realloc(l->heap, cap * sizeof *h);
    if (!h) abort(); /* a few bytes per timer: without them the loop cannot keep its promises */
    l->heap = h;
    l->capheap = cap;
  }
  t->due_ms = l->now + delay_ms;
  t->seq = l->timer_seq++;
  t->cb = cb;
  t->arg = arg;
  heap_place(l, ++l->nheap, t);
  heap_up(l, l->nheap);
}

void asr_loop_timer_stop(asr_loop_t *l, asr_loop_timer_t *t) {
  if (!t->heap_pos) return;
  heap_remove(l, t);
  assert(l->nsources > 0);
  l->nsources--;
}

/* Runs the timers due now that were started before this call. */
static int run_timers(asr_loop_t *l) {
  uint64_t first_new = l->timer_seq;
  int ran = 0;
  while (l->nheap) {
    asr_loop_timer_t *t = l->heap[1];
    if (t->due_ms > l->now || t->seq >= first_new) break;
    asr_loop_timer_stop(l, t);
    t->cb(l, t);
    ran++;
  }
  return ran;
}

/* --- fds ------------------------------------------------------------------ */

static int epoll_apply(asr_loop_t *l, asr_loop_io_t *io, unsigned want) {
  struct epoll_event ev = {.events = to_epoll(want), .data.ptr = io};
  int op = !want ? EPOLL_CTL_DEL : io->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  if (!want && !io->in_epoll) return 0;
  if (epoll_ctl(l->epfd, op, io->fd, &ev) != 0) return asr_err_from_errno(errno);
  io->in_epoll = want != 0;
  return 0;
}

static int io_start(asr_loop_t *l, asr_loop_io_t *io, int fd, unsigned events, asr_loop_io_cb cb, void *arg) {
  assert(!io->active);
  io->fd = fd;
  io->cb = cb;
  io->arg = arg;
  io->in_epoll = 0;
  io->want = 0;
  int rc = epoll_apply(l, io, events & (ASR_LOOP_READ | ASR_LOOP_WRITE));
  if (rc) return rc;
  io->want = events & (ASR_LOOP_READ | ASR_LOOP_WRITE);
  io->active = 1;
  return 0;
}

/* Strikes io out of the batch being dispatched. */
static void io_forget(asr_loop_t *l, asr_loop_io_t *io) {
  for (int i = l->ibatch + 1; i < l->nbatch; i++)
    if (l->batch[i].data.ptr == io) l->batch[i].data.ptr = NULL;
}

static void io_stop(asr_loop_t *l, asr_loop_io_t *io) {
  if (!io->active) return;
  (void)epoll_apply(l, io, 0); /* fails only for an fd closed under us: gone from the set anyway */
  io_forget(l, io);
  io->active = 0;
  io->want = 0;
}

int asr_loop_io_start(asr_loop_t *l, asr_loop_io_t *io, int fd, unsigned events, asr_loop_io_cb cb,
                      void *arg) {
  if (fd < 0 || !cb) return ASR_EINVAL;
  int rc = io_start(l, io, fd, events, cb, arg);
  if (rc == 0) l->nsources++;
  return rc;
}

int asr_loop_io_set(asr_loop_t *l, asr_loop_io_t *io, unsigned events) {
  assert(io->active);
  events &= ASR_LOOP_READ | ASR_LOOP_WRITE;
  if (events == io->want) return 0;
  int rc = epoll_apply(l, io, events);
  if (rc) return rc;
  io->want = events;
  return 0;
}

void asr_loop_io_stop(asr_loop_t *l, asr_loop_io_t *io) {
  if (!io->active) return;
  io_stop(l, io);
  assert(l->nsources > 0);
  l->nsources--;
}

/* What an fd's callback is told: the wanted events that happened, and a
 * hang-up or error as such, together with the direction it wanted (so a
 * reader sees its EOF and a writer its EPIPE). */
static unsigned told(const asr_loop_io_t *io, uint32_t ev) {
  unsigned t = 0;
  if (ev & EPOLLIN) t |= ASR_LOOP_READ;
  if (ev & EPOLLOUT) t |= ASR_LOOP_WRITE;
  if (ev & (EPOLLHUP | EPOLLRDHUP)) t |= ASR_LOOP_HUP;
  if (ev & EPOLLERR) t |= ASR_LOOP_ERR;
  if (t & (ASR_LOOP_HUP | ASR_LOOP_ERR)) t |= io->want;
  t &= io->want | ASR_LOOP_HUP | ASR_LOOP_ERR;
  return t & (ASR_LOOP_READ | ASR_LOOP_WRITE) ? t : 0;
}

/* --- wakeups and asyncs ------------------------------------------------------ */

void asr_loop_wake(asr_loop_t *l) {
  __atomic_store_n(&l->woken, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&l->sleeping, __ATOMIC_SEQ_CST)) {
    uint64_t one = 1;
    (void)!write(l->wakefd, &one, sizeof one);
  }
}

/* The wakefd fired: this sleep was the one cut short, so the wake is
 * consumed (a later wake sets it again; work published before any wake is
 * seen by the next before-sleep hook, and asyncs keep their own flag). */
static void on_wake(asr_loop_t *l, asr_loop_io_t *io, unsigned events) {
  (void)events;
  uint64_t v;
  __atomic_store_n(&l->woken, 0, __ATOMIC_SEQ_CST);
  (void)!read(io->fd, &v, sizeof v);
}

void asr_loop_async_start(asr_loop_t *l, asr_loop_async_t *a, asr_loop_async_cb cb, void *arg) {
  assert(!a->loop);
  a->cb = cb;
  a->arg = arg;
  __atomic_store_n(&a->pending, 0, __ATOMIC_RELAXED);
  a->next = l->asyncs;
  l->asyncs = a;
  __atomic_store_n(&a->loop, l, __ATOMIC_RELEASE);
  l->nsources++;
}

void asr_loop_async_send(asr_loop_async_t *a) {
  asr_loop_t *l = __atomic_load_n(&a->loop, __ATOMIC_ACQUIRE);
  if (!l) return;
  __atomic_store_n(&a->pending, 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&l->async_flag, 1, __ATOMIC_SEQ_CST);
  asr_loop_wake(l);
}

void asr_loop_async_stop(asr_loop_t *l, asr_loop_async_t *a) {
  if (!a->loop) return;
  for (asr_loop_async_t **pp = &l->asyncs; *pp; pp = &(*pp)->next)
    if (*pp == a) {
      *pp = a->next;
      break;
    }
  __atomic_store_n(&a->loop, NULL, __ATOMIC_RELEASE);
  a->next = NULL;
  assert(l->nsources > 0);
  l->nsources--;
}

static int run_asyncs(asr_loop_t *l) {
  if (!__atomic_exchange_n(&l->async_flag, 0, __ATOMIC_SEQ_CST)) return 0;
  int ran = 0;
  for (asr_loop_async_t *a = l->asyncs, *next; a; a = next) {
    next = a->next; /* a callback may stop its own async */
    if (__atomic_exchange_n(&a->pending, 0, __ATOMIC_SEQ_CST)) {
      a->cb(l, a);
      ran++;
    }
  }
  return ran;
}

/* --- signals -------------------------------------------------------------- */

static void on_signals(asr_loop_t *l, asr_loop_io_t *io, unsigned events) {
  (void)events;
  for (int i = 0; i < SIGNALS_PER_DISPATCH; i++) {
    struct signalfd_siginfo si;
    if (read(io->fd, &si, sizeof si) != (ssize_t)sizeof si) return;
    int signo = (int)si.ssi_signo;
    asr_loop_signal_t *s = signo > 0 && signo < _NSIG ? l->sigs[signo] : NULL;
    if (s) s->cb(l, s, signo, (pid_t)si.ssi_pid);
  }
}

int asr_loop_signal_start(asr_loop_t *l, asr_loop_signal_t *s, int signo, asr_loop_signal_cb cb, void *arg) {
  if (signo <= 0 || signo >= _NSIG || signo == SIGKILL || signo == SIGSTOP || !cb) return ASR_EINVAL;
  if (l->sigs[signo] && l->sigs[signo] != s) return ASR_EBUSY;
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signo);
  pthread_sigmask(SIG_BLOCK, &one, NULL);
  sigset_t mask = l->sigmask;
  sigaddset(&mask, signo);
  int fd = signalfd(l->sigfd, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) return asr_err_from_errno(errno);
  if (l->sigfd < 0) {
    int rc = io_start(l, &l->sig_io, fd, ASR_LOOP_READ, on_signals, NULL);
    if (rc) {
      close(fd);
      return rc;
    }
    l->sigfd = fd;
  }
  l->sigmask = mask;
  if (!l->sigs[signo]) l->nsources++;
  l->sigs[signo] = s;
  s->signo = signo;
  s->cb = cb;
  s->arg = arg;
  return 0;
}

void asr_loop_signal_stop(asr_loop_t *l, asr_loop_signal_t *s) {
  if (!s->signo || l->sigs[s->signo] != s) return;
  l->sigs[s->signo] = NULL;
  sigdelset(&l->sigmask, s->signo);
  (void)signalfd(l->sigfd, &l->sigmask, SFD_NONBLOCK | SFD_CLOEXEC);
  s->signo = 0;
  assert(l->nsources > 0);
  l->nsources--;
}

/* --- process exits ------------------------------------------------------ */

static void pid_report(asr_loop_t *l, asr_loop_pid_t *p) {
  int st = 0, have = 0;
  if (p->reap) {
    pid_t r;
    do r = waitpid(p->pid, &st, WNOHANG);
    while (r < 0 && errno == EINTR);
    have = r == p->pid;
  }
  asr_loop_pid_stop(l, p); /* one-shot: the callback may start it again */
  p->cb(l, p, have, have ? st : 0);
}

static void on_pidfd(asr_loop_t *l, asr_loop_io_t *io, unsigned events) {
  (void)events;
  pid_report(l, (asr_loop_pid_t *)((char *)io - offsetof(asr_loop_pid_t, io)));
}

int asr_loop_pid_start(asr_loop_t *l, asr_loop_pid_t *p, pid_t pid, int reap, asr_loop_pid_cb cb, void *arg) {
  if (pid <= 0 || !cb) return ASR_EINVAL;
  assert(!p->pid);
  p->reap = reap;
  p->cb = cb;
  p->arg = arg;
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0 && errno != ESRCH) return errno == ENOSYS ? ASR_ENOSYS : asr_err_from_errno(errno);
  if (fd < 0) { /* gone already: reported at the next dispatch */
    if (l->ngone == l->capgone) {
      unsigned cap = l->capgone ? l->capgone * 2 : 8;
      asr_loop_pid_t **g = realloc(l->gone, cap * sizeof *g);
      if (!g) return ASR_ENOMEM;
      l->gone = g;
      l->capgone = cap;
    }
    l->gone[l->ngone++] = p;
    p->io.active = 0;
    p->pid = pid;
    l->nsources++;
    asr_loop_wake(l);
    return 0;
  }
  /* a pidfd is always close-on-exec */
  int rc = io_start(l, &p->io, fd, ASR_LOOP_READ, on_pidfd, p);
  if (rc) {
    close(fd);
    return rc;
  }
  p->pid = pid;
  l->nsources++;
  return 0;
}

void asr_loop_pid_stop(asr_loop_t *l, asr_loop_pid_t *p) {
  if (!p->pid) return;
  if (p->io.active) {
    int fd = p->io.fd;
    io_stop(l, &p->io);
    close(fd);
  } else {
    for (unsigned i = 0; i < l->ngone; i++)
      if (l->gone[i] == p) l->gone[i] = NULL;
  }
  p->pid = 0;
  assert(l->nsources > 0);
  l->nsources--;
}

static int run_gone(asr_loop_t *l) {
  int ran = 0;
  /* a callback may add to the list: only what was there at the start runs */
  unsigned n = l->ngone;
  for (unsigned i = 0; i < n; i++) {
    asr_loop_pid_t *p = l->gone[i];
    if (!p) continue;
    l->gone[i] = NULL;
    pid_report(l, p);
    ran++;
  }
  memmove(l->gone, l->gone + n, (l->ngone - n) * sizeof *l->gone);
  l->ngone -= n;
  return ran;
}

/* --- the loop ------------------------------------------------------------- */

int asr_loop_new(asr_loop_t **out) {
  asr_loop_t *l = calloc(1, sizeof *l);
  if (!l) return ASR_ENOMEM;
  int rc;
  l->sigfd = -1;
  sigemptyset(&l->sigmask);
  l->now = asr_time_ms();
  l->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (l->epfd < 0) {
    rc = asr_err_from_errno(errno);
    goto err_free;
  }
  l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (l->wakefd < 0) {
    rc = asr_err_from_errno(errno);
    goto err_epoll;
  }
  rc = io_start(l, &l->wake_io, l->wakefd, ASR_LOOP_READ, on_wake, NULL);
  if (rc) goto err_wakefd;
  *out = l;
  return 0;
err_wakefd:
  close(l->wakefd);
err_epoll:
  close(l->epfd);
err_free:
  free(l);
  return rc;
}

void asr_loop_free(asr_loop_t *l) {
  if (!l) return;
  assert(l->nsources == 0); /* every owner stopped its sources */
  if (l->sigfd >= 0) {
    io_stop(l, &l->sig_io);
    close(l->sigfd);
  }
  io_stop(l, &l->wake_io);
  close(l->wakefd);
  close(l->epfd);
  free(l->heap);
  free(l->gone);
  free(l);
}

uint64_t asr_loop_now(const asr_loop_t *l) { return l->now; }

int asr_loop_backend_fd(const asr_loop_t *l) { return l->epfd; }

uint64_t asr_loop_update_now(asr_loop_t *l) { return l->now = asr_time_ms(); }

void asr_loop_set_hooks(asr_loop_t *l, asr_loop_before_sleep_cb before, asr_loop_after_sleep_cb after,
                        void *arg) {
  l->before = before;
  l->after = after;
  l->hook_arg = arg;
}

void asr_loop_stop(asr_loop_t *l) {
  __atomic_store_n(&l->stop, 1, __ATOMIC_SEQ_CST);
  asr_loop_wake(l);
}

int asr_loop_stopping(const asr_loop_t *l) { return __atomic_load_n(&l->stop, __ATOMIC_SEQ_CST); }

/* The shorter of two timeouts, -1 meaning none. */
static int tmo_min(int a, int b) { return a < 0 ? b : b < 0 ? a : a < b ? a : b; }

int asr_loop_run_once(asr_loop_t *l, int timeout_ms) {
  asr_loop_update_now(l);
  int ran = run_timers(l);
  int tmo = timeout_ms;
  if (l->before) tmo = tmo_min(tmo, l->before(l, l->hook_arg));
  if (ran || l->ngone || asr_loop_stopping(l)) tmo = 0;
  if (tmo != 0 && l->nheap) {
    uint64_t now = asr_time_ms(), due = l->heap[1]->due_ms;
    tmo = tmo_min(tmo, due > now ? (int)(due - now < 86400000 ? due - now : 86400000) : 0);
  }
  struct epoll_event ev[ASR_LOOP_MAX_EVENTS];
  /* A wake since the last sleep (during this iteration's work included)
   * is consumed here: this sleep does not happen. */
  __atomic_store_n(&l->sleeping, 1, __ATOMIC_SEQ_CST);
  if (__atomic_exchange_n(&l->woken, 0, __ATOMIC_SEQ_CST)) tmo = 0;
  int n = epoll_wait(l->epfd, ev, ASR_LOOP_MAX_EVENTS, tmo);
  int err = errno;
  __atomic_store_n(&l->sleeping, 0, __ATOMIC_SEQ_CST);
  if (l->after) l->after(l, l->hook_arg);
  if (n < 0) return err == EINTR ? ran : asr_err_from_errno(err);
  asr_loop_update_now(l);
  l->batch = ev;
  l->nbatch = n;
  for (l->ibatch = 0; l->ibatch < n; l->ibatch++) {
    asr_loop_io_t *io = ev[l->ibatch].data.ptr;
    if (!io) continue; /* stopped by an earlier callback of this batch */
    unsigned t = told(io, ev[l->ibatch].events);
    if (!t) continue;
    io->cb(l, io, t);
    ran++;
  }
  l->batch = NULL;
  l->nbatch = l->ibatch = 0;
  ran += run_asyncs(l);
  if (l->ngone) ran += run_gone(l);
  return ran;
}

int asr_loop_run(asr_loop_t *l) {
  int rc = 0;
  while (!asr_loop_stopping(l)) {
    rc = asr_loop_run_once(l, -1);
    if (rc < 0) break;
    rc = 0;
  }
  __atomic_store_n(&l->stop, 0, __ATOMIC_SEQ_CST);
  return rc;
}
