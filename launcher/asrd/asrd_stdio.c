/*
 * asrd_stdio.c -- the ranks' output and rank 0's stdin (asrd.h), with
 * back-pressure both ways (ctl_msg.h: flow control).
 *
 * Output goes to asrrun one whole line per OUTPUT message, so asrrun can
 * print each with one write() and lines of different ranks never mix. A
 * line of up to LINE_WHOLE bytes stays whole; a longer one goes in pieces of
 * that size marked PARTIAL, and while such a line is open nothing else of
 * this daemon is sent, so the pieces arrive back to back and asrrun prints
 * them as one line (holding other daemons' lines meanwhile).
 *
 * Bounds: a stream holds at most STREAM_MAX bytes read from its pipe and not
 * yet sent; at that point the pipe is no longer read, the pipe fills and the
 * rank blocks in write(), as under any slow reader. Sending stops when the
 * daemon's credit runs out and resumes as asrrun gives it back. So this
 * daemon holds at most 2 x STREAM_MAX per rank, whatever the ranks print.
 * Streams take turns (one message each per pass), so one chatty rank cannot
 * starve another.
 *
 * Stdin: asrrun sends at most ASR_CTL_STDIN_WINDOW bytes not yet given back;
 * they are given back (STDIN_CREDIT) as they go into the reading ranks'
 * pipes (the JOB's stdin_rank, or every rank with --stdin all), so each
 * in_queue stays within that window.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "asr_log.h"
#include "asr_time.h"
#include "asr_trace.h"
#include "asrd.h"

#define LINE_WHOLE (1u << 20)          /* a line up to this is one message */
#define STREAM_MAX (LINE_WHOLE + 1)    /* enough to see a LINE_WHOLE line's newline */
#define READ_PER_WAKEUP 65536          /* one chatty rank cannot hold a wakeup */
#define STDIN_CREDIT_BATCH (64u << 10) /* give stdin credit back in pieces this big */

size_t asrd_stdio_held(const asrd_rank_t *r) {
  return asr_buf_pending(&r->out.part) + asr_buf_pending(&r->err.part);
}

static asrd_stream_t *stream_at(asrd_t *d, int i) {
  asrd_rank_t *r = &d->ranks[i / 2];
  return i % 2 ? &r->err : &r->out;
}

/* Reading goes on while the stream has room. */
static void watch(asrd_stream_t *st) {
  if (st->fd < 0) return;
  unsigned want = asr_buf_pending(&st->part) < STREAM_MAX ? ASR_LOOP_READ : 0;
  if (want == st->watching) return;
  st->watching = want;
  (void)asr_loop_io_set(st->rank->d->loop, &st->io, want);
}

static void stream_close_fd(asrd_stream_t *st) {
  if (st->fd < 0) return;
  asr_loop_io_stop(st->rank->d->loop, &st->io);
  close(st->fd);
  st->fd = -1;
}

/* Sends the stream's next message if it has one: a whole line, a LINE_WHOLE
 * piece of a longer one, or at EOF what is left. Returns 1 if it sent. */
static int send_one(asrd_t *d, asrd_stream_t *st) {
  asr_buf_t *p = &st->part;
  const uint8_t *s = p->data + p->off;
  size_t n = asr_buf_pending(p);
  const uint8_t *nl = n ? memchr(s, '\n', n < STREAM_MAX ? n : STREAM_MAX) : NULL;
  int eof = st->fd < 0;
  size_t take, len;
  uint32_t flags = 0;
  if (nl) {
    take = (size_t)(nl - s) + 1;
    len = take - 1;
  } else if (n >= LINE_WHOLE) {
    take = len = LINE_WHOLE;
    flags = ASR_CTL_OUT_PARTIAL;
  } else if (eof && (n > 0 || st->open)) {
    /* the last piece (perhaps empty: it closes a line left open) */
    take = len = n;
    flags = ASR_CTL_OUT_PARTIAL | ASR_CTL_OUT_EOF;
  } else {
    return 0;
  }
  if (!d->out.closed[st->stream]) {
    asr_ctl_msg_t m = {.type = ASR_CTL_OUTPUT,
                       .u.output = {.rank = (uint32_t)st->rank->rank,
                                    .stream = (uint32_t)st->stream,
                                    .flags = flags,
                                    .line = s,
                                    .len = len}};
    asrd_up_send(d, &m);
    d->out.credit -= (int64_t)ASR_CTL_OUTPUT_COST(len);
  }
  p->off += take;
  if (asr_buf_pending(p) == 0) p->off = p->len = 0;
  st->open = (flags & ASR_CTL_OUT_PARTIAL) && !(flags & ASR_CTL_OUT_EOF);
  d->out.open_stream = st->open ? st : NULL;
  return 1;
}

/* A stream whose pipe is closed and whose bytes are all sent has ended. */
static void check_ended(asrd_stream_t *st) {
  if (st->ended || st->fd >= 0 || asr_buf_pending(&st->part) > 0 || st->open) return;
  st->ended = 1;
  asr_buf_free(&st->part);
  asrd_rank_t *r = st->rank;
  if (asrd_stdio_closed(r) && r->d->cb.on_output_closed) r->d->cb.on_output_closed(r);
}

/* Sends what waits, in turns, while there is credit. */
static void pump(asrd_t *d) {
  int nstreams = 2 * d->nlocal;
  for (int progress = 1; progress && d->out.credit > 0;) {
    progress = 0;
    for (int k = 0; k < nstreams && d->out.credit > 0; k++) {
      int i = (d->out.rr + k) % nstreams;
      asrd_stream_t *st = stream_at(d, i);
      if (d->out.open_stream && d->out.open_stream != st) continue;
      if (send_one(d, st)) {
        progress = 1;
        d->out.rr = (i + 1) % nstreams;
      }
    }
  }
  /* the trace's output stall: from the pass that left output waiting for
   * credit to the one that sent it all (or could again) */
  if (ASR_TRACE_ON()) {
    uint64_t held = 0;
    for (int i = 0; i < nstreams; i++) held += asr_buf_pending(&stream_at(d, i)->part);
    if (d->out.credit <= 0 && held && !d->trace.stall_ns) {
      d->trace.stall_ns = asr_time_ns();
    } else if (d->trace.stall_ns && (d->out.credit > 0 || !held)) {
      asr_trace_put(1, ASR_TR_STALL, -1, 0, 0, d->trace.stall_ns, asr_time_ns(), 0, held, 0, 0, NULL);
      d->trace.stall_ns = 0;
    }
  }
  /* reading resumes where there is room again; ends are noticed (these may
   * free streams' buffers and report exits, so they come last) */
  for (int i = 0; i < nstreams; i++) watch(stream_at(d, i));
  for (int i = 0; i < nstreams; i++) check_ended(stream_at(d, i));
}

/* Reads what the rank wrote on st, as far as there is room (up to
 * READ_PER_WAKEUP, or everything there is when drain is set: its process is
 * gone; a descendant may still hold the pipe and keep writing, so this is
 * bounded by the room too). */
static void stream_read(asrd_stream_t *st, int drain) {
  size_t got = 0;
  while (st->fd >= 0 && (drain || got < READ_PER_WAKEUP)) {
    size_t room = STREAM_MAX - asr_buf_pending(&st->part);
    if (room == 0) break;
    uint8_t buf[16384];
    ssize_t n = read(st->fd, buf, room < sizeof buf ? room : sizeof buf);
    if (n > 0) {
      got += (size_t)n;
      if (asr_buf_put(&st->part, buf, (size_t)n) != 0) {
        asr_error("asrd", "out of memory for rank %d's output; dropping %zd bytes", st->rank->rank, n);
        break;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    stream_close_fd(st); /* EOF: what is left goes as the last piece */
    st->eof = 1;
    asrd_rank_t *r = st->rank;
    if (r->d->cb.on_output_eof) r->d->cb.on_output_eof(r);
  }
}

static void on_stream(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)loop, (void)events;
  asrd_stream_t *st = io->arg;
  stream_read(st, 0);
  pump(st->rank->d);
}

/* --- stdin ------------------------------------------------------------------- */

/* Credit goes back as the slowest reading rank takes what it was sent
 * (written into its pipe, or dropped once its stdin is closed): with
 * --stdin all every local rank gets every byte, and one that does not read
 * holds the others back, as one pipe would. */
static void stdin_give_back(asrd_t *d, int force) {
  uint64_t low = UINT64_MAX;
  for (int i = 0; i < d->nlocal; i++)
    if (d->ranks[i].in_reads && d->ranks[i].in_taken < low) low = d->ranks[i].in_taken;
  if (low == UINT64_MAX || low <= d->out.in_given) return;
  uint64_t n = low - d->out.in_given;
  if (!force && n < STDIN_CREDIT_BATCH) return;
  while (n > 0) {
    uint32_t k = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    asr_ctl_msg_t m = {.type = ASR_CTL_STDIN_CREDIT, .u.credit.bytes = k};
    asrd_up_send(d, &m);
    n -= k;
  }
  d->out.in_given = low;
}

static void stdin_close(asrd_rank_t *r) {
  if (r->in_fd < 0) return;
  asr_loop_io_stop(r->d->loop, &r->in_io);
  close(r->in_fd);
  r->in_fd = -1;
  /* dropped bytes are taken too: asrrun goes on reading to its EOF */
  r->in_taken = r->in_got;
  asr_buf_free(&r->in_queue);
  stdin_give_back(r->d, 1);
}

static void stdin_flush(asrd_rank_t *r) {
  while (r->in_fd >= 0 && asr_buf_pending(&r->in_queue) > 0) {
    ssize_t n = write(r->in_fd, r->in_queue.data + r->in_queue.off, asr_buf_pending(&r->in_queue));
    if (n > 0) {
      r->in_queue.off += (size_t)n;
      r->in_taken += (uint64_t)n;
      stdin_give_back(r->d, 0);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      (void)asr_loop_io_set(r->d->loop, &r->in_io, ASR_LOOP_WRITE);
      return;
    }
    stdin_close(r); /* the rank closed its stdin */
    return;
  }
  if (r->in_fd < 0) return;
  r->in_queue.off = r->in_queue.len = 0;
  stdin_give_back(r->d, 1);
  (void)asr_loop_io_set(r->d->loop, &r->in_io, 0);
  if (r->in_eof) stdin_close(r);
}

static void on_stdin_writable(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)loop, (void)events;
  stdin_flush(io->arg);
}

/* --- the interface ----------------------------------------------------------------- */

static int stream_start(asrd_t *d, asrd_rank_t *r, asrd_stream_t *st, int stream, int fd) {
  st->rank = r;
  st->stream = stream;
  st->fd = fd;
  st->watching = ASR_LOOP_READ;
  int rc = asr_loop_io_start(d->loop, &st->io, fd, ASR_LOOP_READ, on_stream, st);
  if (rc) {
    close(fd);
    st->fd = -1;
  }
  return rc;
}

int asrd_stdio_start(asrd_t *d, asrd_rank_t *r, int out_fd, int err_fd, int in_fd) {
  int rc = stream_start(d, r, &r->out, 1, out_fd);
  int rc2 = stream_start(d, r, &r->err, 2, err_fd);
  if (d->out.closed[1]) stream_close_fd(&r->out);
  if (d->out.closed[2]) stream_close_fd(&r->err);
  r->in_fd = in_fd;
  r->in_reads = in_fd >= 0;
  if (in_fd >= 0 && asr_loop_io_start(d->loop, &r->in_io, in_fd, 0, on_stdin_writable, r) != 0) {
    close(in_fd);
    r->in_fd = -1;
  }
  return rc ? rc : rc2;
}

void asrd_stdio_drain(asrd_rank_t *r) {
  stream_read(&r->out, 1);
  stream_read(&r->err, 1);
  stdin_close(r);
  pump(r->d);
}

void asrd_stdio_input(asrd_t *d, const uint8_t *p, size_t n) {
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    if (!r->in_reads) continue;
    r->in_got += n;
    if (n == 0)
      r->in_eof = 1;
    else if (r->in_fd < 0)
      r->in_taken += n; /* its stdin is closed: dropped */
    else if (asr_buf_put(&r->in_queue, p, n) != 0) {
      asr_error("asrd", "out of memory for rank %d's stdin; dropping %zu bytes", r->rank, n);
      r->in_taken += n;
    }
    stdin_flush(r);
  }
  stdin_give_back(d, 1);
}

void asrd_stdio_credit(asrd_t *d, uint32_t bytes) {
  d->out.credit += bytes;
  pump(d);
}

void asrd_stdio_reader_gone(asrd_t *d, int stream) {
  assert(stream == 1 || stream == 2);
  d->out.closed[stream] = 1;
  for (int i = 0; i < d->nlocal; i++) {
    asrd_stream_t *st = stream == 1 ? &d->ranks[i].out : &d->ranks[i].err;
    stream_close_fd(st);
    st->part.off = st->part.len = 0;
    st->open = 0;
    if (d->out.open_stream == st) d->out.open_stream = NULL;
  }
  pump(d);
}

int asrd_stdio_closed(const asrd_rank_t *r) { return r->out.ended && r->err.ended; }

void asrd_stdio_stop(asrd_rank_t *r) {
  stream_close_fd(&r->out);
  stream_close_fd(&r->err);
  asr_buf_free(&r->out.part);
  asr_buf_free(&r->err.part);
  if (r->d->out.open_stream == &r->out || r->d->out.open_stream == &r->err) r->d->out.open_stream = NULL;
  stdin_close(r);
}
