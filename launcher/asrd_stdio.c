/*
 * asrd_stdio.c -- the ranks' output and rank 0's stdin (asrd.h).
 *
 * Output goes to asrrun one whole line at a time (a line longer than
 * LINE_MAX_BYTES in pieces of that size, and at EOF the last partial line):
 * asrrun prints each with one write(), so lines of different ranks never
 * mix. Each pipe is an io of its own on the loop.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "asr_log.h"
#include "asrd.h"

#define LINE_MAX_BYTES 65536  /* a longer "line" is sent in pieces */
#define READ_PER_WAKEUP 65536 /* one chatty rank cannot hold a wakeup */

/* Sends every whole line in part (and, at EOF, the remainder). */
static void emit_lines(asrd_t *d, int rank, int stream, asr_buf_t *part, int eof) {
  for (;;) {
    uint8_t *s = part->data + part->off;
    size_t n = part->len - part->off;
    uint8_t *nl = n ? memchr(s, '\n', n) : NULL;
    size_t take;
    if (nl)
      take = (size_t)(nl - s) + 1;
    else if (n >= LINE_MAX_BYTES || (eof && n > 0))
      take = n < LINE_MAX_BYTES ? n : LINE_MAX_BYTES;
    else
      break;
    size_t len = take;
    if (len && s[len - 1] == '\n') len--;
    asrd_up_output(d, rank, stream, (const char *)s, len);
    part->off += take;
  }
  if (part->off == part->len) part->off = part->len = 0;
}

static void stream_close(asrd_stream_t *st) {
  if (st->fd < 0) return;
  asr_loop_io_stop(st->rank->d->loop, &st->io);
  close(st->fd);
  st->fd = -1;
  asr_buf_free(&st->part);
}

/* Reads what the rank wrote on st, up to READ_PER_WAKEUP (16 times that
 * when drain is set: its process is gone, and what it left is taken now;
 * still bounded, as a descendant may hold the pipe and keep writing). */
static void stream_read(asrd_stream_t *st, int drain) {
  asrd_rank_t *r = st->rank;
  asrd_t *d = r->d;
  size_t got = 0;
  while (st->fd >= 0 && got < (size_t)READ_PER_WAKEUP * (drain ? 16 : 1)) {
    uint8_t buf[16384];
    ssize_t n = read(st->fd, buf, sizeof buf);
    if (n > 0) {
      got += (size_t)n;
      if (asr_buf_put(&st->part, buf, (size_t)n) != 0) {
        asr_error("asrd", "out of memory for rank %d's output; dropping %zd bytes", r->rank, n);
        continue;
      }
      emit_lines(d, r->rank, st->stream, &st->part, 0);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    emit_lines(d, r->rank, st->stream, &st->part, 1); /* EOF: the last partial line */
    stream_close(st);
    if (asrd_stdio_closed(r) && d->on_output_closed) d->on_output_closed(r);
    return;
  }
}

static void on_stream(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)loop, (void)events;
  stream_read(io->arg, 0);
}

static void stdin_close(asrd_rank_t *r) {
  if (r->in_fd < 0) return;
  asr_loop_io_stop(r->d->loop, &r->in_io);
  close(r->in_fd);
  r->in_fd = -1;
  asr_buf_free(&r->in_queue);
}

static void stdin_flush(asrd_rank_t *r) {
  while (r->in_fd >= 0 && asr_buf_pending(&r->in_queue) > 0) {
    ssize_t n = write(r->in_fd, r->in_queue.data + r->in_queue.off, asr_buf_pending(&r->in_queue));
    if (n > 0) {
      r->in_queue.off += (size_t)n;
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
  (void)asr_loop_io_set(r->d->loop, &r->in_io, 0);
  if (r->in_eof) stdin_close(r);
}

static void on_stdin_writable(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)loop, (void)events;
  stdin_flush(io->arg);
}

static int stream_start(asrd_t *d, asrd_rank_t *r, asrd_stream_t *st, int stream, int fd) {
  st->rank = r;
  st->stream = stream;
  st->fd = fd;
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
  r->in_fd = in_fd;
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
}

void asrd_stdio_input(asrd_t *d, const uint8_t *p, size_t n) {
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    if (r->rank != 0) continue;
    if (n == 0)
      r->in_eof = 1;
    else if (r->in_fd >= 0 && asr_buf_put(&r->in_queue, p, n) != 0)
      asr_error("asrd", "out of memory for rank 0's stdin; dropping %zu bytes", n);
    stdin_flush(r);
  }
}

int asrd_stdio_closed(const asrd_rank_t *r) { return r->out.fd < 0 && r->err.fd < 0; }

void asrd_stdio_stop(asrd_rank_t *r) {
  stream_close(&r->out);
  stream_close(&r->err);
  stdin_close(r);
}
