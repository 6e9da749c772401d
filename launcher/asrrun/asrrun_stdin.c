/*
 * asrrun_stdin.c -- asrrun's stdin goes to the ranks that read it (--stdin:
 * rank 0 by default, every rank, or none), once their daemons have started
 * them, and only as fast as the slowest of them reads it: at most
 * ASR_CTL_STDIN_WINDOW bytes are on their way to any daemon (ctl_msg.h),
 * and stdin is not read while they are, so a writer into asrrun blocks as
 * it would writing into rank 0 directly. A pipe or terminal is watched on
 * the loop; a regular file or /dev/null cannot be (epoll refuses them) and
 * is read a window at a time; without a stdin at all, rank 0 gets EOF at once.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "asrrun.h"

enum { STDIN_CLOSED = 0, STDIN_WAITING, STDIN_FILE, STDIN_WATCHED };

#define PIECE 65536

/* Reads one piece (at most the credit); 1 if it may go on. */
static int read_piece(asrrun_t *run, int fd_ok) {
  uint8_t buf[PIECE];
  int64_t room = asrrun_daemons_stdin_room(run);
  size_t want = room < PIECE ? (size_t)room : PIECE;
  if (want == 0) return 0;
  ssize_t n = fd_ok ? read(0, buf, want) : 0;
  if (n < 0 && errno == EINTR) return 1;
  if (n < 0 && errno == EAGAIN) return 0;
  asrrun_daemons_stdin(run, buf, n > 0 ? (size_t)n : 0);
  if (n <= 0) {
    if (run->input.state == STDIN_WATCHED) asr_loop_io_stop(run->loop, &run->input.io);
    run->input.state = STDIN_CLOSED;
    return 0;
  }
  return 1;
}

/* Watching follows the credit. */
static void watch(asrrun_t *run) {
  if (run->input.state != STDIN_WATCHED) return;
  int want = asrrun_daemons_stdin_room(run) > 0;
  if (want == run->input.reading) return;
  run->input.reading = want;
  (void)asr_loop_io_set(run->loop, &run->input.io, want ? ASR_LOOP_READ : 0);
}

static void on_stdin(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)loop, (void)events;
  asrrun_t *run = io->arg;
  (void)read_piece(run, 1);
  watch(run);
}

void asrrun_stdin_poll(asrrun_t *run) {
  if (run->input.state == STDIN_WAITING && fcntl(0, F_GETFL) < 0) run->input.state = STDIN_FILE;
  if (run->input.state != STDIN_WAITING && run->input.state != STDIN_FILE) return;
  if (!asrrun_daemons_stdin_ready(run)) return;
  if (run->input.state == STDIN_WAITING) {
    fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    if (asr_loop_io_start(run->loop, &run->input.io, 0, ASR_LOOP_READ, on_stdin, run) == 0) {
      run->input.state = STDIN_WATCHED;
      run->input.reading = 1;
      return;
    }
    run->input.state = STDIN_FILE;
  }
  /* a file (or none): a window of it now, the rest as rank 0 takes it */
  int fd_ok = fcntl(0, F_GETFL) >= 0;
  while (run->input.state == STDIN_FILE && read_piece(run, fd_ok)) {
  }
}

void asrrun_stdin_credit(asrrun_t *run, uint32_t n) {
  (void)n; /* the daemons' credit is counted there */
  if (run->input.state == STDIN_FILE)
    asrrun_stdin_poll(run);
  else
    watch(run);
}

void asrrun_stdin_stop(asrrun_t *run) {
  if (run->input.state == STDIN_WATCHED) asr_loop_io_stop(run->loop, &run->input.io);
  run->input.state = STDIN_CLOSED;
}
