/* test_loop.c -- common/asr_loop: fds, timers, wakeups, asyncs, signals,
 * process exits, hooks, bounded dispatch, and sources stopped mid-dispatch. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_loop.h"
#include "asr_test.h"
#include "asr_time.h"

static int pipe_nb(int p[2]) { return pipe2(p, O_NONBLOCK | O_CLOEXEC); }

typedef struct {
  asr_loop_io_t io;
  int calls;
  unsigned last;
  char got[64];
  size_t ngot;
} reader_t;

static void on_read(asr_loop_t *l, asr_loop_io_t *io, unsigned ev) {
  (void)l;
  reader_t *r = io->arg;
  r->calls++;
  r->last = ev;
  ssize_t n = read(io->fd, r->got + r->ngot, sizeof r->got - r->ngot);
  if (n > 0) r->ngot += (size_t)n;
}

/* An fd's callback gets its own argument and what happened; a quiet io
 * (events 0) is not called; io_set changes the interest; EOF comes as HUP. */
TEST(io_read_write_hup) {
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  int p[2];
  ASSERT_OK(pipe_nb(p));
  reader_t r = {0};
  ASSERT_OK(asr_loop_io_start(l, &r.io, p[0], ASR_LOOP_READ, on_read, &r));
  ASSERT(asr_loop_io_active(&r.io));
  ASSERT_EQ(asr_loop_run_once(l, 0), 0);
  ASSERT_EQ(write(p[1], "abc", 3), 3);
  ASSERT_EQ(asr_loop_run_once(l, 1000), 1);
  ASSERT_EQ(r.calls, 1);
  ASSERT_EQ(r.last, ASR_LOOP_READ);
  ASSERT_MEMEQ(r.got, "abc", 3);
  /* quiet: data waits, nothing is called */
  ASSERT_OK(asr_loop_io_set(l, &r.io, 0));
  ASSERT_EQ(write(p[1], "d", 1), 1);
  ASSERT_EQ(asr_loop_run_once(l, 20), 0);
  ASSERT_EQ(r.calls, 1);
  ASSERT_OK(asr_loop_io_set(l, &r.io, ASR_LOOP_READ));
  ASSERT_EQ(asr_loop_run_once(l, 1000), 1);
  ASSERT_EQ(r.ngot, 4u);
  close(p[1]);
  ASSERT_EQ(asr_loop_run_once(l, 1000), 1);
  ASSERT(r.last & ASR_LOOP_HUP);
  ASSERT(r.last & ASR_LOOP_READ);
  asr_loop_io_stop(l, &r.io);
  ASSERT(!asr_loop_io_active(&r.io));
  close(p[0]);
  asr_loop_free(l);
}

typedef struct {
  asr_loop_io_t io;
  int wrote;
} writer_t;

static void on_writable(asr_loop_t *l, asr_loop_io_t *io, unsigned ev) {
  writer_t *w = io->arg;
  ASSERT(ev & ASR_LOOP_WRITE);
  w->wrote += (int)write(io->fd, "x", 1);
  asr_loop_io_set(l, io, 0); /* once */
}

TEST(io_write_interest) {
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  int p[2];
  ASSERT_OK(pipe_nb(p));
  writer_t w = {0};
  ASSERT_OK(asr_loop_io_start(l, &w.io, p[1], ASR_LOOP_WRITE, on_writable, &w));
  ASSERT_EQ(asr_loop_run_once(l, 1000), 1);
  ASSERT_EQ(asr_loop_run_once(l, 0), 0);
  ASSERT_EQ(w.wrote, 1);
  char c;
  ASSERT_EQ(read(p[0], &c, 1), 1);
  asr_loop_io_stop(l, &w.io);
  ASSERT_EQ(asr_loop_io_start(l, &w.io, -1, ASR_LOOP_READ, on_writable, &w), ASR_EINVAL);
  close(p[0]);
  close(p[1]);
  asr_loop_free(l);
}

/* A callback that stops (and frees) another source of the same batch: that
 * source is not called; a new io on the reused fd number is not handed the
 * old one's event. */
typedef struct {
  asr_loop_io_t io;
  int calls;
  struct pair *owner;
} victim_t;
struct pair {
  victim_t *v[2];
  int p[2][2];
  int killer_calls;
};

static void on_victim(asr_loop_t *l, asr_loop_io_t *io, unsigned ev) {
  (void)ev;
  victim_t *me = io->arg;
  me->calls++;
  struct pair *pr = me->owner;
  /* whoever runs first stops and frees the other */
  int other = pr->v[0] == me ? 1 : 0;
  if (pr->v[other]) {
    asr_loop_io_stop(l, &pr->v[other]->io);
    free(pr->v[other]);
    pr->v[other] = NULL;
    pr->killer_calls++;
  }
  char b[8];
  (void)!read(io->fd, b, sizeof b);
}

TEST(io_stopped_mid_batch_not_called) {
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  struct pair pr = {0};
  for (int i = 0; i < 2; i++) {
    ASSERT_OK(pipe_nb(pr.p[i]));
    pr.v[i] = calloc(1, sizeof(victim_t));
    pr.v[i]->owner = &pr;
    ASSERT_OK(asr_loop_io_start(l, &pr.v[i]->io, pr.p[i][0], ASR_LOOP_READ, on_victim, pr.v[i]));
    ASSERT_EQ(write(pr.p[i][1], "z", 1), 1);
  }
  /* both are ready in one batch; the one that runs frees the other */
  ASSERT_EQ(asr_loop_run_once(l, 1000), 1);
  ASSERT_EQ(pr.killer_calls, 1);
  int alive = pr.v[0] ? 0 : 1;
  ASSERT(pr.v[alive] && pr.v[alive]->calls == 1);
  asr_loop_io_stop(l, &pr.v[alive]->io);
  free(pr.v[alive]);
  for (int i = 0; i < 2; i++) close(pr.p[i][0]), close(pr.p[i][1]);
  asr_loop_free(l);
}

/* At most ASR_LOOP_MAX_EVENTS sources per iteration; the rest next time. */
TEST(bounded_dispatch) {
  enum { N = ASR_LOOP_MAX_EVENTS + 36 };
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  static reader_t r[N];
  static int p[N][2];
  for (int i = 0; i < N; i++) {
    memset(&r[i], 0, sizeof r[i]);
    ASSERT_OK(pipe_nb(p[i]));
    ASSERT_OK(asr_loop_io_start(l, &r[i].io, p[i][0], ASR_LOOP_READ, on_read, &r[i]));
    ASSERT_EQ(write(p[i][1], "q", 1), 1);
  }
  ASSERT_EQ(asr_loop_run_once(l, 1000), ASR_LOOP_MAX_EVENTS);
  ASSERT_EQ(asr_loop_run_once(l, 1000), N - ASR_LOOP_MAX_EVENTS);
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(r[i].calls, 1);
    asr_loop_io_stop(l, &r[i].io);
    close(p[i][0]);
    close(p[i][1]);
  }
  asr_loop_free(l);
}

typedef struct {
  asr_loop_timer_t t;
  int id;
  int *order, *n;
  int restart; /* restart itself with delay 0 this many times */
} tmr_t;

static void on_timer(asr_loop_t *l, asr_loop_timer_t *t) {
  tmr_t *x = t->arg;
  x->order[(*x->n)++] = x->id;
  if (x->restart > 0) {
    x->restart--;
    asr_loop_timer_start(l, t, 0, on_timer, x);
  }
}

/* Timers fire in due order (equal dues in start order), a stopped one never,
 * a restarted one at its new time; one restarted from its own callback with
 * delay 0 waits for the next iteration. */
TEST(timers_order_stop_restart) {
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  int order[16], n = 0;
  tmr_t t[6];
  memset(t, 0, sizeof t);
  uint64_t delays[6] = {30, 10, 10, 20, 5, 40};
  /* The dues count from the loop's now (asr_loop_timer_start), which
   * asr_loop_new read: a clock read here, later, can be milliseconds past
   * it on a slow machine (or under TSan). */
  uint64_t start = asr_loop_now(l);
  for (int i = 0; i < 6; i++) {
    t[i].id = i;
    t[i].order = order;
    t[i].n = &n;
    asr_loop_timer_start(l, &t[i].t, delays[i], on_timer, &t[i]);
    ASSERT(asr_loop_timer_active(&t[i].t));
  }
  asr_loop_timer_stop(l, &t[4].t);                      /* never */
  asr_loop_timer_start(l, &t[5].t, 1, on_timer, &t[5]); /* now first */
  while (n < 5 && asr_time_ms() - start < 2000) ASSERT(asr_loop_run_once(l, -1) >= 0);
  ASSERT_EQ(n, 5);
  int want[5] = {5, 1, 2, 3, 0};
  for (int i = 0; i < 5; i++) ASSERT_EQ(order[i], want[i]);
  ASSERT(asr_time_ms() - start >= 30); /* the sleep waited for the timers, no spinning past them */
  /* restarted from its own callback, delay 0: once per iteration */
  n = 0;
  t[0].restart = 2;
  asr_loop_timer_start(l, &t[0].t, 0, on_timer, &t[0]);
  ASSERT_EQ(asr_loop_run_once(l, 0), 1);
  ASSERT_EQ(n, 1);
  ASSERT_EQ(asr_loop_run_once(l, 0), 1);
  ASSERT_EQ(asr_loop_run_once(l, 0), 1);
  ASSERT_EQ(asr_loop_run_once(l, 0), 0);
  ASSERT_EQ(n, 3);
  asr_loop_free(l);
}

/* Many timers in random order come out sorted (the heap). */
TEST(timers_heap_many) {
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  enum { N = 500 };
  static tmr_t t[N];
  static int order[N];
  int n = 0;
  unsigned s = 12345;
  for (int i = 0; i < N; i++) {
    memset(&t[i], 0, sizeof t[i]);
    s = s * 1103515245u + 12345u;
    t[i].id = (int)((s >> 8) % 50);
    t[i].order = order;
    t[i].n = &n;
    asr_loop_timer_start(l, &t[i].t, (uint64_t)t[i].id, on_timer, &t[i]);
  }
  for (int i = 0; i < N; i += 7) asr_loop_timer_stop(l, &t[i].t);
  int stopped = (N + 6) / 7;
  uint64_t start = asr_time_ms();
  while (n < N - stopped && asr_time_ms() - start < 3000) asr_loop_run_once(l, -1);
  ASSERT_EQ(n, N - stopped);
  for (int i = 1; i < n; i++) ASSERT(order[i - 1] <= order[i]);
  asr_loop_free(l);
}

/* asr_loop_wake from another thread ends a sleep with no bound at once. */
static void *waker(void *arg) {
  asr_sleep_ms(50);
  asr_loop_wake(arg);
  return NULL;
}

TEST(wake_from_thread) {
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  pthread_t th;
  uint64_t t0 = asr_time_ms();
  ASSERT_EQ(pthread_create(&th, NULL, waker, l), 0);
  ASSERT(asr_loop_run_once(l, 5000) >= 0);
  uint64_t dt = asr_time_ms() - t0;
  pthread_join(th, NULL);
  ASSERT(dt >= 40 && dt < 2000);
  /* a wake while awake makes the next sleep not sleep */
  asr_loop_wake(l);
  t0 = asr_time_ms();
  ASSERT(asr_loop_run_once(l, 5000) >= 0);
  ASSERT(asr_time_ms() - t0 < 1000);
  asr_loop_free(l);
}

/* Asyncs: many sends from other threads, one call per batch of sends, on
 * the loop's thread; none lost. */
typedef struct {
  asr_loop_async_t a;
  atomic_int sent;
  int seen_calls;
  pthread_t loop_thread;
  int wrong_thread;
} async_box_t;

static void on_async(asr_loop_t *l, asr_loop_async_t *a) {
  (void)l;
  async_box_t *b = a->arg;
  b->seen_calls++;
  if (!pthread_equal(pthread_self(), b->loop_thread)) b->wrong_thread = 1;
}

static void *sender(void *arg) {
  async_box_t *b = arg;
  for (int i = 0; i < 1000; i++) {
    atomic_fetch_add(&b->sent, 1);
    asr_loop_async_send(&b->a);
  }
  return NULL;
}

TEST(async_from_threads) {
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  async_box_t b = {0};
  b.loop_thread = pthread_self();
  asr_loop_async_start(l, &b.a, on_async, &b);
  pthread_t th[4];
  for (int i = 0; i < 4; i++) ASSERT_EQ(pthread_create(&th[i], NULL, sender, &b), 0);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  /* every send happened before these iterations: at least one call, and
   * after it nothing is pending */
  ASSERT(asr_loop_run_once(l, 1000) >= 1);
  ASSERT(b.seen_calls >= 1 && b.seen_calls <= 4000);
  int calls = b.seen_calls;
  ASSERT_EQ(asr_loop_run_once(l, 0), 0);
  ASSERT_EQ(b.seen_calls, calls);
  ASSERT(!b.wrong_thread);
  asr_loop_async_stop(l, &b.a);
  asr_loop_async_send(&b.a); /* stopped: ignored */
  asr_loop_free(l);
}

typedef struct {
  asr_loop_signal_t s;
  int signo;
  pid_t sender;
  int calls;
} sig_box_t;

static void on_sig(asr_loop_t *l, asr_loop_signal_t *s, int signo, pid_t from) {
  (void)l;
  sig_box_t *b = s->arg;
  b->signo = signo;
  b->sender = from;
  b->calls++;
}

/* Signals arrive as callbacks with their sender; two signals, two handlers;
 * a second handler for one signal is refused. */
TEST(signals_through_the_loop) {
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  sig_box_t a = {0}, b = {0}, c = {0};
  ASSERT_OK(asr_loop_signal_start(l, &a.s, SIGUSR1, on_sig, &a));
  ASSERT_OK(asr_loop_signal_start(l, &b.s, SIGUSR2, on_sig, &b));
  ASSERT_EQ(asr_loop_signal_start(l, &c.s, SIGUSR1, on_sig, &c), ASR_EBUSY);
  ASSERT_EQ(asr_loop_signal_start(l, &c.s, SIGKILL, on_sig, &c), ASR_EINVAL);
  kill(getpid(), SIGUSR1);
  kill(getpid(), SIGUSR2);
  uint64_t t0 = asr_time_ms();
  while ((a.calls == 0 || b.calls == 0) && asr_time_ms() - t0 < 2000) asr_loop_run_once(l, 100);
  ASSERT_EQ(a.calls, 1);
  ASSERT_EQ(a.signo, SIGUSR1);
  ASSERT_EQ(a.sender, getpid());
  ASSERT_EQ(b.calls, 1);
  ASSERT_EQ(b.signo, SIGUSR2);
  asr_loop_signal_stop(l, &a.s);
  asr_loop_signal_stop(l, &b.s);
  /* stopped, still blocked: a new signal stays pending, not delivered */
  kill(getpid(), SIGUSR1);
  asr_loop_run_once(l, 20);
  ASSERT_EQ(a.calls, 1);
  sigset_t pend;
  sigpending(&pend);
  ASSERT(sigismember(&pend, SIGUSR1));
  asr_loop_free(l);
}

typedef struct {
  asr_loop_pid_t p;
  int calls, have, status;
} pid_box_t;

static void on_exit_cb(asr_loop_t *l, asr_loop_pid_t *p, int have, int status) {
  (void)l;
  pid_box_t *b = p->arg;
  b->calls++;
  b->have = have;
  b->status = status;
}

/* A child's exit is reported once, reaped, with its status; a process that
 * is gone before the watch starts is reported at the next iteration; a
 * non-child is reported without a status. */
TEST(pid_exit_reaped) {
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  pid_t c = fork();
  if (c == 0) {
    usleep(30000);
    _exit(7);
  }
  pid_box_t b = {0};
  ASSERT_OK(asr_loop_pid_start(l, &b.p, c, 1, on_exit_cb, &b));
  uint64_t t0 = asr_time_ms();
  while (!b.calls && asr_time_ms() - t0 < 3000) asr_loop_run_once(l, -1);
  ASSERT_EQ(b.calls, 1);
  ASSERT_EQ(b.have, 1);
  ASSERT(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 7);
  ASSERT_EQ(waitpid(c, NULL, WNOHANG), -1); /* reaped by the loop */
  asr_loop_run_once(l, 0);
  ASSERT_EQ(b.calls, 1);
  /* a child that exited and was reaped before the watch: pidfd_open fails */
  pid_t d = fork();
  if (d == 0) _exit(0);
  ASSERT(waitpid(d, NULL, 0) == d);
  pid_box_t g = {0};
  ASSERT_OK(asr_loop_pid_start(l, &g.p, d, 1, on_exit_cb, &g));
  ASSERT(asr_loop_run_once(l, 1000) >= 1);
  ASSERT_EQ(g.calls, 1);
  ASSERT_EQ(g.have, 0);
  /* not ours to reap: our parent; it lives on, nothing is reported */
  pid_box_t q = {0};
  ASSERT_OK(asr_loop_pid_start(l, &q.p, getppid(), 0, on_exit_cb, &q));
  ASSERT_EQ(asr_loop_run_once(l, 10), 0);
  asr_loop_pid_stop(l, &q.p);
  ASSERT_EQ(q.calls, 0);
  asr_loop_free(l);
}

typedef struct {
  int before, after;
  int bound;
  int locked; /* the "lock" the hooks drop around the sleep */
  int slept_locked;
} hooks_box_t;

static int hook_before(asr_loop_t *l, void *arg) {
  (void)l;
  hooks_box_t *h = arg;
  h->before++;
  h->locked = 0;
  return h->bound;
}

static void hook_after(asr_loop_t *l, void *arg) {
  (void)l;
  hooks_box_t *h = arg;
  h->after++;
  h->locked = 1;
}

static hooks_box_t *the_hooks;

static void on_read_check_lock(asr_loop_t *l, asr_loop_io_t *io, unsigned ev) {
  the_hooks->slept_locked = the_hooks->locked;
  on_read(l, io, ev);
}

/* The hooks run around every sleep, and before_sleep's bound limits it. */
TEST(hooks_around_sleep) {
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  hooks_box_t h = {.bound = 30, .locked = 1};
  the_hooks = &h;
  asr_loop_set_hooks(l, hook_before, hook_after, &h);
  uint64_t t0 = asr_time_ms();
  ASSERT_EQ(asr_loop_run_once(l, -1), 0);
  uint64_t dt = asr_time_ms() - t0;
  ASSERT(dt >= 25 && dt < 2000);
  ASSERT_EQ(h.before, 1);
  ASSERT_EQ(h.after, 1);
  ASSERT_EQ(h.locked, 1);
  h.bound = 0; /* "do not sleep" */
  t0 = asr_time_ms();
  for (int i = 0; i < 10; i++) asr_loop_run_once(l, 5000);
  ASSERT(asr_time_ms() - t0 < 1000);
  ASSERT_EQ(h.before, 11);
  int p[2];
  ASSERT_OK(pipe_nb(p));
  reader_t r = {0};
  ASSERT_OK(asr_loop_io_start(l, &r.io, p[0], ASR_LOOP_READ, on_read_check_lock, &r));
  ASSERT_EQ(write(p[1], "k", 1), 1);
  ASSERT_EQ(asr_loop_run_once(l, 1000), 1);
  ASSERT_EQ(h.slept_locked, 1); /* callbacks run after after_sleep: with the lock */
  asr_loop_io_stop(l, &r.io);
  close(p[0]);
  close(p[1]);
  asr_loop_set_hooks(l, NULL, NULL, NULL);
  asr_loop_free(l);
}

/* asr_loop_run until asr_loop_stop (from a callback, and from a thread). */
static void stop_cb(asr_loop_t *l, asr_loop_timer_t *t) {
  (void)t;
  asr_loop_stop(l);
}

static void *stopper(void *arg) {
  asr_sleep_ms(30);
  asr_loop_stop(arg);
  return NULL;
}

TEST(run_until_stop) {
  /* t0 before the loop is made: its timers count from the loop's cached
   * clock (asr_loop_now, read at its start and at each wakeup), which a
   * slow start-up (TSan) leaves behind the real one */
  uint64_t t0 = asr_time_ms();
  asr_loop_t *l;
  ASSERT_OK(asr_loop_new(&l));
  asr_loop_timer_t t = {0};
  asr_loop_timer_start(l, &t, 20, stop_cb, NULL);
  ASSERT_OK(asr_loop_run(l));
  ASSERT(asr_time_ms() - t0 >= 15);
  ASSERT(!asr_loop_stopping(l));
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, stopper, l), 0);
  ASSERT_OK(asr_loop_run(l));
  pthread_join(th, NULL);
  asr_loop_free(l);
}
