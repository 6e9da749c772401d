/*
 * asr_loop.h -- the one event loop every asr process runs on (in the manner
 * of Redis's ae and libuv's uv_run).
 *
 * A loop watches sources, each a small record its owner embeds in its own
 * struct and the loop never frees:
 *   asr_loop_io_t      an fd, with a callback for the events it wants
 *   asr_loop_timer_t   a one-shot timer (restart it from its callback to repeat)
 *   asr_loop_signal_t  a signal, delivered through one signalfd per loop
 *   asr_loop_pid_t     a process's exit, through a pidfd (reaped for children)
 *   asr_loop_async_t   a wakeup another thread may send
 * A module registers its own sources with its own callbacks, so the owner of
 * the loop never dispatches on fd numbers and nothing calls back up into it.
 *
 * One iteration (asr_loop_run_once):
 *   1. the timers due at the iteration's start run (a timer started by a
 *      timer callback waits for the next iteration, even with delay 0);
 *   2. the before-sleep hook runs; it returns how long the loop may sleep
 *      (-1: as long as nothing happens, 0: not at all);
 *   3. the loop waits in epoll_wait until an fd is ready, the first timer is
 *      due, the hook's bound passes, or asr_loop_wake is called;
 *   4. the after-sleep hook runs;
 *   5. at most ASR_LOOP_MAX_EVENTS ready sources are dispatched: a wakeup
 *      does a bounded amount of work, and what is left stays ready for the
 *      next one (epoll is level-triggered).
 * The hooks let a thread hold a lock while it works and drop it around the
 * wait (the runtime's service thread does).
 *
 * Threads: a loop belongs to the thread that runs it. Only asr_loop_wake,
 * asr_loop_async_send and asr_loop_stop may be called from other threads.
 * Callbacks may start and stop any source, including their own; a source
 * stopped during a dispatch is not called again by that dispatch.
 *
 * Errors are 0 or a negative ASR_E* code (asr_err.h).
 */
#ifndef ASR_LOOP_H
#define ASR_LOOP_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct asr_loop asr_loop_t;

/* The events an fd can be watched for, and what its callback is told. */
enum {
  ASR_LOOP_READ = 1u << 0,
  ASR_LOOP_WRITE = 1u << 1,
  ASR_LOOP_HUP = 1u << 2, /* told only: the peer hung up (reported with READ when it was wanted) */
  ASR_LOOP_ERR = 1u << 3, /* told only: an error is pending on the fd */
};

/* The most sources one iteration dispatches. */
#define ASR_LOOP_MAX_EVENTS 64

typedef struct asr_loop_io asr_loop_io_t;
typedef void (*asr_loop_io_cb)(asr_loop_t *loop, asr_loop_io_t *io, unsigned events);
struct asr_loop_io {
  int fd;
  unsigned want; /* ASR_LOOP_READ | ASR_LOOP_WRITE, or 0 (started but quiet) */
  int active;    /* started and not stopped (a zero-filled record is stopped) */
  int in_epoll;  /* the fd is in the epoll set now (want != 0) */
  asr_loop_io_cb cb;
  void *arg; /* the owner's */
};

typedef struct asr_loop_timer asr_loop_timer_t;
typedef void (*asr_loop_timer_cb)(asr_loop_t *loop, asr_loop_timer_t *t);
struct asr_loop_timer {
  uint64_t due_ms;   /* on asr_loop_now's clock */
  uint64_t seq;      /* start order: equal due times run in the order they were started */
  unsigned heap_pos; /* 1-based place in the loop's heap; 0 while stopped */
  asr_loop_timer_cb cb;
  void *arg;
};

typedef struct asr_loop_signal asr_loop_signal_t;
typedef void (*asr_loop_signal_cb)(asr_loop_t *loop, asr_loop_signal_t *s, int signo, pid_t sender);
struct asr_loop_signal {
  int signo; /* 0 while stopped */
  asr_loop_signal_cb cb;
  void *arg;
};

typedef struct asr_loop_pid asr_loop_pid_t;
/* have_status is 1 when the process was our child and was reaped (status is
 * its wait status), 0 when it was not ours to reap. */
typedef void (*asr_loop_pid_cb)(asr_loop_t *loop, asr_loop_pid_t *p, int have_status, int status);
struct asr_loop_pid {
  asr_loop_io_t io; /* its pidfd */
  pid_t pid;        /* 0 while stopped */
  int reap;         /* waitpid it when it exits (it is our child) */
  asr_loop_pid_cb cb;
  void *arg;
};

typedef struct asr_loop_async asr_loop_async_t;
typedef void (*asr_loop_async_cb)(asr_loop_t *loop, asr_loop_async_t *a);
struct asr_loop_async {
  asr_loop_t *loop; /* NULL while stopped */
  int pending;      /* atomic: sent and not yet called */
  asr_loop_async_cb cb;
  void *arg;
  asr_loop_async_t *next;
};

/* A sleep with no bound of its own (a hook's answer, a run_once argument). */
#define ASR_LOOP_FOREVER (-1)

/* The hooks of step 2 and 4. before_sleep returns the longest the loop may
 * sleep in ms (ASR_LOOP_FOREVER = no bound of its own). */
typedef int (*asr_loop_before_sleep_cb)(asr_loop_t *loop, void *arg);
typedef void (*asr_loop_after_sleep_cb)(asr_loop_t *loop, void *arg);

/* Makes a loop (its epoll set and wakeup eventfd). */
int asr_loop_new(asr_loop_t **out);

/* Frees the loop. Every source must be stopped first (asserted in debug
 * builds): the loop owns none of them. */
void asr_loop_free(asr_loop_t *loop);

/* One iteration (see above), waiting at most timeout_ms (-1 = no bound).
 * Returns the number of sources dispatched (timers included), or a negative
 * ASR_E* when the wait itself failed. */
int asr_loop_run_once(asr_loop_t *loop, int timeout_ms);

/* Iterates until asr_loop_stop. Returns 0, or the first wait failure. */
int asr_loop_run(asr_loop_t *loop);

/* Ends asr_loop_run after the current iteration. Any thread. */
void asr_loop_stop(asr_loop_t *loop);

/* Whether asr_loop_stop was called since the loop last started running. */
int asr_loop_stopping(const asr_loop_t *loop);

/* The loop's clock (monotonic ms), read at the start of each iteration. */
uint64_t asr_loop_now(const asr_loop_t *loop);

/* Reads the clock again (after long work in a callback). */
uint64_t asr_loop_update_now(asr_loop_t *loop);

/* The epoll fd: readable while some watched fd is ready, for running this
 * loop from another one's poll (libuv's uv_backend_fd). */
int asr_loop_backend_fd(const asr_loop_t *loop);

/* Cuts the current or next sleep short. Any thread; cheap when the loop is
 * awake (an atomic store, no system call). */
void asr_loop_wake(asr_loop_t *loop);

void asr_loop_set_hooks(asr_loop_t *loop, asr_loop_before_sleep_cb before, asr_loop_after_sleep_cb after,
                        void *arg);

/* Watches fd for `events` (READ/WRITE; 0 = started but quiet). The fd stays
 * the owner's: stop the io before closing it. A zero-filled record is a
 * stopped one; a started one must not be started again. */
int asr_loop_io_start(asr_loop_t *loop, asr_loop_io_t *io, int fd, unsigned events, asr_loop_io_cb cb,
                      void *arg);
/* Changes what a started io waits for (a no-op when unchanged). */
int asr_loop_io_set(asr_loop_t *loop, asr_loop_io_t *io, unsigned events);
void asr_loop_io_stop(asr_loop_t *loop, asr_loop_io_t *io);
static inline int asr_loop_io_active(const asr_loop_io_t *io) { return io->active; }

/* (Re)starts t to fire delay_ms from the loop's now. */
void asr_loop_timer_start(asr_loop_t *loop, asr_loop_timer_t *t, uint64_t delay_ms, asr_loop_timer_cb cb,
                          void *arg);
void asr_loop_timer_stop(asr_loop_t *loop, asr_loop_timer_t *t);
static inline int asr_loop_timer_active(const asr_loop_timer_t *t) { return t->heap_pos != 0; }

/* Delivers signo through the loop. The signal is blocked in the calling
 * thread here; a process with other threads must block it before it starts
 * them (they inherit the mask), or they may take it. One handler per signal. */
int asr_loop_signal_start(asr_loop_t *loop, asr_loop_signal_t *s, int signo, asr_loop_signal_cb cb,
                          void *arg);
/* Stops watching; the signal stays blocked (a pending one is not lost). */
void asr_loop_signal_stop(asr_loop_t *loop, asr_loop_signal_t *s);

/* Calls cb once pid has exited, reaping it first when reap is set (it must
 * then be our child, not reaped by anyone else). A process that is already
 * gone is reported on the next iteration. ASR_ENOSYS without pidfds. */
int asr_loop_pid_start(asr_loop_t *loop, asr_loop_pid_t *p, pid_t pid, int reap, asr_loop_pid_cb cb,
                       void *arg);
void asr_loop_pid_stop(asr_loop_t *loop, asr_loop_pid_t *p);

/* An async: asr_loop_async_send (any thread) makes the loop call cb once on
 * its own thread, however many sends came before that call. */
void asr_loop_async_start(asr_loop_t *loop, asr_loop_async_t *a, asr_loop_async_cb cb, void *arg);
void asr_loop_async_send(asr_loop_async_t *a);
void asr_loop_async_stop(asr_loop_t *loop, asr_loop_async_t *a);

#endif /* ASR_LOOP_H */
