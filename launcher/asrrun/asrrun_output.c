/*
 * asrrun_output.c -- the ranks' output as asrrun prints it (asrrun.h):
 * each line whole, tagged "[rank] " unless --no-tag-output (and with
 * --timestamp-output stamped with the time it came), on asrrun's
 * stdout or stderr as the rank wrote it, and with --output-dir also in
 * DIR/rank.N/stdout|stderr (exactly the rank's bytes).
 *
 * The writes happen on a thread of their own, so that a slow or stopped
 * reader of asrrun's output never stops the loop: heartbeats, signals and
 * every other message go on while that thread is blocked in write(). What
 * waits for it is bounded by the daemons' credit (ctl_msg.h: a daemon sends
 * OUTPUT only while it has credit, and gets each line's cost back once the
 * line is written), so asrrun holds at most ASR_CTL_OUTPUT_WINDOW plus one
 * line per daemon.
 *
 * A line too long to come in one message (PARTIAL pieces, asrd_stdio.c)
 * is printed as one: its first piece carries the tag, its last the newline,
 * and meanwhile other ranks' lines for the same stream wait here (held).
 * Only other daemons' lines can be held (asrd sends nothing else while a
 * line of its is open), and those are bounded by their own credit.
 *
 * When a reader goes away (EPIPE: `| head -1`), nothing more is written to
 * that stream, its lines' credit is given back at once, and the daemons are
 * told (output_gone) so that the ranks' own writes fail as they would have.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "asr_err.h"
#include "asrrun.h"

typedef struct item {
  struct item *next;
  int daemon;      /* whose credit it is */
  uint64_t cost;   /* ASR_CTL_OUTPUT_COST of its line */
  int rank;        /* -1: none (no file) */
  int stream;      /* 1 or 2 */
  uint32_t flags;  /* the OUTPUT's */
  size_t term_len; /* buf[0..term_len) goes to asrrun's stream */
  size_t file_off, file_len;
  uint8_t buf[];
} item_t;

typedef struct {
  item_t *head, *tail;
} queue_t;

struct asrrun_out {
  pthread_t thread;
  int started;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  queue_t todo;             /* for the writer */
  int stopping;             /* the writer ends once todo is empty */
  uint64_t *given_back;     /* [ndaemons]: cost of written lines, not yet sent as CREDIT */
  int gone[3];              /* the writer saw EPIPE on stream 1 / 2 */
  char err[PATH_MAX + 128]; /* the first --output-dir write failure */
  int err_told;
  int gone_told[3];
  asr_loop_async_t async; /* the writer made progress */

  /* loop side: who owns an open line of each stream, and what waits for it */
  int open_rank[3];
  queue_t held[3];
};

static void q_put(queue_t *q, item_t *it) {
  it->next = NULL;
  if (q->tail)
    q->tail->next = it;
  else
    q->head = it;
  q->tail = it;
}

static item_t *q_take(queue_t *q) {
  item_t *it = q->head;
  if (it && !(q->head = it->next)) q->tail = NULL;
  return it;
}

/* --- the writer thread -------------------------------------------------------- */

/* Writes all of p to fd, waiting while a non-blocking fd is full. 0, or errno. */
static int write_all(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd q = {.fd = fd, .events = POLLOUT};
      (void)poll(&q, 1, -1);
      continue;
    }
    return w < 0 ? errno : EIO;
  }
  return 0;
}

/* Opens DIR/rank.N/stdout|stderr into *fd (its path in path); 0, or the
 * errno value of what failed. */
static int open_rank_file(asrrun_t *run, int rank, int stream, char *path, size_t pathlen, int *fd) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/rank.%d", run->cfg.output_dir, rank);
  snprintf(path, pathlen, "%s/%s", dir, stream == 1 ? "stdout" : "stderr");
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) return errno;
  *fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644);
  return *fd < 0 ? errno : 0;
}

static void write_item(asrrun_t *run, struct asrrun_out *o, item_t *it) {
  pthread_mutex_lock(&o->lock);
  int gone = o->gone[it->stream], failed = o->err[0] != '\0';
  pthread_mutex_unlock(&o->lock);
  if (!gone && it->term_len) {
    int e = write_all(it->stream, it->buf, it->term_len);
    if (e) {
      /* EPIPE: the reader went away; anything else: the same for us */
      pthread_mutex_lock(&o->lock);
      o->gone[it->stream] = 1;
      pthread_mutex_unlock(&o->lock);
    }
  }
  if (!failed && it->rank >= 0 && run->cfg.output_dir[0]) {
    rank_t *r = &run->ranks[it->rank];
    char path[PATH_MAX + 32] = "";
    int e = 0;
    if (r->out_fd[it->stream] <= 0) {
      e = open_rank_file(run, it->rank, it->stream, path, sizeof path, &r->out_fd[it->stream]);
    }
    if (!e && it->file_len) e = write_all(r->out_fd[it->stream], it->buf + it->file_off, it->file_len);
    if (e) {
      if (!path[0])
        snprintf(path, sizeof path, "%s/rank.%d/%s", run->cfg.output_dir, it->rank,
                 it->stream == 1 ? "stdout" : "stderr");
      pthread_mutex_lock(&o->lock);
      if (!o->err[0]) snprintf(o->err, sizeof o->err, "cannot write %s: %s", path, strerror(e));
      pthread_mutex_unlock(&o->lock);
    }
  }
}

static void *writer_main(void *arg) {
  asrrun_t *run = arg;
  struct asrrun_out *o = run->out;
  pthread_mutex_lock(&o->lock);
  for (;;) {
    item_t *it = q_take(&o->todo);
    if (!it) {
      if (o->stopping) break;
      pthread_cond_wait(&o->cond, &o->lock);
      continue;
    }
    pthread_mutex_unlock(&o->lock);
    write_item(run, o, it);
    int h = it->daemon;
    pthread_mutex_lock(&o->lock);
    if (h >= 0) o->given_back[h] += it->cost;
    free(it);
    /* the loop gives credit back in batches: a quarter window, or when idle */
    int wake = !o->todo.head || (h >= 0 && o->given_back[h] >= ASR_CTL_OUTPUT_WINDOW / 4);
    pthread_mutex_unlock(&o->lock);
    if (wake) asr_loop_async_send(&o->async);
    pthread_mutex_lock(&o->lock);
  }
  pthread_mutex_unlock(&o->lock);
  return NULL;
}

/* --- the loop's side ------------------------------------------------------------ */

/* Credit given back, readers gone, a file that failed: acted on here. */
static void on_progress(asr_loop_t *loop, asr_loop_async_t *a) {
  (void)loop;
  asrrun_t *run = a->arg;
  struct asrrun_out *o = run->out;
  int nd = run->map.nhosts;
  pthread_mutex_lock(&o->lock);
  uint64_t back[nd > 0 ? nd : 1];
  for (int h = 0; h < nd; h++) {
    back[h] = o->given_back[h];
    o->given_back[h] = 0;
  }
  int gone[3] = {0, o->gone[1] && !o->gone_told[1], o->gone[2] && !o->gone_told[2]};
  o->gone_told[1] |= gone[1];
  o->gone_told[2] |= gone[2];
  char err[sizeof o->err] = "";
  if (o->err[0] && !o->err_told) {
    memcpy(err, o->err, sizeof err);
    o->err_told = 1;
  }
  pthread_mutex_unlock(&o->lock);
  for (int h = 0; h < nd; h++)
    while (back[h] > 0 && run->cb.output_credit) {
      uint32_t n = back[h] > UINT32_MAX ? UINT32_MAX : (uint32_t)back[h];
      run->cb.output_credit(run, h, n);
      back[h] -= n;
    }
  for (int s = 1; s <= 2; s++)
    if (gone[s] && run->cb.output_gone) run->cb.output_gone(run, s);
  if (err[0]) run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "%s (--output-dir); ending the job", err);
}

static void to_writer(struct asrrun_out *o, item_t *it) {
  pthread_mutex_lock(&o->lock);
  q_put(&o->todo, it);
  pthread_cond_signal(&o->cond);
  pthread_mutex_unlock(&o->lock);
}

static int opens_line(const item_t *it) {
  return it->rank >= 0 && (it->flags & ASR_CTL_OUT_PARTIAL) && !(it->flags & ASR_CTL_OUT_EOF);
}

/* Passes on, in order, every held line of stream s that may go now: any
 * while no line is open, else the open line's own pieces. A line that
 * closes lets the others go (from the front again: their order is kept). */
static void release(asrrun_t *run, int s) {
  struct asrrun_out *o = run->out;
  for (int again = 1; again;) {
    again = 0;
    item_t **pp = &o->held[s].head, *prev = NULL;
    while (*pp) {
      item_t *it = *pp;
      if (o->open_rank[s] >= 0 && o->open_rank[s] != it->rank) {
        prev = it;
        pp = &it->next;
        continue;
      }
      *pp = it->next;
      if (o->held[s].tail == it) o->held[s].tail = prev;
      int was_open = o->open_rank[s] >= 0;
      o->open_rank[s] = opens_line(it) ? it->rank : -1;
      to_writer(o, it);
      if (was_open && o->open_rank[s] < 0) {
        again = 1;
        break;
      }
    }
  }
}

/* "2026-12-01T23:59:59.123 ": the local time asrrun got the line (not when
 * the rank wrote it: hosts' clocks need not agree). */
static size_t stamp(char *buf, size_t len) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  localtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
  n += (size_t)snprintf(buf + n, len - n, ".%03ld ", ts.tv_nsec / 1000000);
  return n;
}

static item_t *make_item(asrrun_t *run, int daemon, int rank, int stream, uint32_t flags, const uint8_t *line,
                         size_t len) {
  int known = rank >= 0 && rank < run->map.nranks;
  int *partial = known ? &run->ranks[rank].partial[stream] : NULL;
  if (!known) flags = 0; /* a line of nobody's: whole, with no state */
  int open = partial && *partial;
  int tag = run->cfg.tag_output && !open;
  char tagbuf[64] = "";
  size_t taglen = 0;
  if (run->cfg.timestamp_output && !open) taglen = stamp(tagbuf, sizeof tagbuf);
  if (tag) taglen += (size_t)snprintf(tagbuf + taglen, sizeof tagbuf - taglen, "[%d] ", rank);
  int newline = !(flags & ASR_CTL_OUT_PARTIAL);
  /* the end of a stream closes an open line: a tagged terminal gets the
   * newline the rank did not write (the file, and untagged output, do not) */
  int prefixed = run->cfg.tag_output || run->cfg.timestamp_output;
  int eof_newline = (flags & ASR_CTL_OUT_EOF) && prefixed && (open || len > 0);
  item_t *it = malloc(sizeof *it + taglen + len + 1);
  if (!it) return NULL;
  memcpy(it->buf, tagbuf, taglen);
  if (len) memcpy(it->buf + taglen, line, len);
  size_t n = taglen + len;
  it->file_off = taglen;
  it->file_len = len + (size_t)newline;
  if (newline || eof_newline) it->buf[n++] = '\n';
  it->term_len = n;
  it->daemon = daemon;
  it->cost = daemon >= 0 ? ASR_CTL_OUTPUT_COST(len) : 0;
  it->rank = known ? rank : -1;
  it->stream = stream;
  it->flags = flags;
  it->next = NULL;
  if (partial) *partial = (flags & ASR_CTL_OUT_PARTIAL) && !(flags & ASR_CTL_OUT_EOF);
  return it;
}

void asrrun_output_msg(asrrun_t *run, int daemon, int rank, int stream, uint32_t flags, const uint8_t *line,
                       size_t len) {
  struct asrrun_out *o = run->out;
  assert(stream == 1 || stream == 2);
  item_t *it = make_item(run, daemon, rank, stream, flags, line, len);
  if (!it) {
    run->cb.fail(run, ASRRUN_EXIT_LAUNCH, "out of memory for a line of %zu bytes of rank %d", len, rank);
    return;
  }
  q_put(&o->held[stream], it); /* behind what already waits */
  release(run, stream);
}

void asrrun_output_daemon_lost(asrrun_t *run, int daemon) {
  struct asrrun_out *o = run->out;
  if (!o) return;
  /* a line its rank will never finish: the others go on */
  for (int s = 1; s <= 2; s++) {
    int r = o->open_rank[s];
    if (r >= 0 && run->map.ranks[r].host == daemon) {
      run->ranks[r].partial[s] = 0;
      o->open_rank[s] = -1;
      release(run, s);
    }
  }
}

int asrrun_output_gone(const asrrun_t *run, int stream) {
  struct asrrun_out *o = run->out;
  if (!o) return 0;
  pthread_mutex_lock(&o->lock);
  int g = o->gone_told[stream];
  pthread_mutex_unlock(&o->lock);
  return g;
}

/* --- set-up and the end ------------------------------------------------------------ */

/* mkdir -p */
static int make_dirs(const char *path, char *err, size_t errlen) {
  char p[PATH_MAX];
  if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) {
    snprintf(err, errlen, "--output-dir %s: the path is too long", path);
    return ASR_EINVAL;
  }
  for (char *c = p + 1;; c++) {
    if (*c != '/' && *c != '\0') continue;
    char keep = *c;
    *c = '\0';
    struct stat sb;
    if (mkdir(p, 0755) != 0 && (errno != EEXIST || stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
      int e = errno == EEXIST ? ENOTDIR : errno;
      snprintf(err, errlen, "--output-dir %s: cannot create %s: %s", path, p, strerror(e));
      return asr_err_from_errno(e);
    }
    if (!(*c = keep)) break;
  }
  if (access(path, W_OK | X_OK) != 0) {
    snprintf(err, errlen, "--output-dir %s: cannot write there: %s", path, strerror(errno));
    return asr_err_from_errno(errno);
  }
  return 0;
}

int asrrun_output_prepare(asrrun_t *run, char *err, size_t errlen) {
  if (!run->cfg.output_dir[0]) return 0;
  return make_dirs(run->cfg.output_dir, err, errlen);
}

int asrrun_output_start(asrrun_t *run) {
  struct asrrun_out *o = calloc(1, sizeof *o);
  int nd = run->map.nhosts > 0 ? run->map.nhosts : 1;
  if (!o || !(o->given_back = calloc((size_t)nd, sizeof *o->given_back))) {
    free(o);
    return ASR_ENOMEM;
  }
  pthread_mutex_init(&o->lock, NULL);
  pthread_cond_init(&o->cond, NULL);
  o->open_rank[1] = o->open_rank[2] = -1;
  run->out = o;
  asr_loop_async_start(run->loop, &o->async, on_progress, run);
  /* the loop blocks every signal it watches; the writer must not take any */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&o->thread, NULL, writer_main, run);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) {
    asr_loop_async_stop(run->loop, &o->async);
    return asr_err_from_errno(rc);
  }
  o->started = 1;
  return 0;
}

void asrrun_output_close(asrrun_t *run) {
  struct asrrun_out *o = run->out;
  if (o) {
    /* lines still held (a line never finished): they go out as they are */
    for (int s = 1; s <= 2; s++) {
      o->open_rank[s] = -1;
      for (item_t *it; (it = q_take(&o->held[s]));) to_writer(o, it);
    }
    if (o->started) {
      /* The job is over and the loop gone: while the last lines wait for a
       * stuck reader, the terminal's signals act as on any program. */
      sigset_t term;
      sigemptyset(&term);
      int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGCONT};
      for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaddset(&term, sigs[i]);
      pthread_sigmask(SIG_UNBLOCK, &term, NULL);
      pthread_mutex_lock(&o->lock);
      o->stopping = 1;
      pthread_cond_signal(&o->cond);
      pthread_mutex_unlock(&o->lock);
      pthread_join(o->thread, NULL);
    } else {
      for (item_t *it; (it = q_take(&o->todo));) free(it);
    }
    asr_loop_async_stop(run->loop, &o->async);
    pthread_cond_destroy(&o->cond);
    pthread_mutex_destroy(&o->lock);
    free(o->given_back);
    free(o);
    run->out = NULL;
  }
  for (int i = 0; run->ranks && i < run->map.nranks; i++)
    for (int s = 1; s <= 2; s++)
      if (run->ranks[i].out_fd[s] > 0) close(run->ranks[i].out_fd[s]);
}
