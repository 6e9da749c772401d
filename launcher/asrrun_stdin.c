/*
 * asrrun_stdin.c -- asrrun's stdin goes to rank 0 (asrrun.h), once rank 0's
 * daemon has started its ranks. A pipe or terminal is watched on the loop;
 * a regular file or /dev/null cannot be (epoll refuses them) and is read
 * whole at once; without a stdin at all, rank 0 gets EOF at once.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "asrrun.h"

enum { STDIN_CLOSED = 0, STDIN_WAITING, STDIN_FILE, STDIN_WATCHED };

static void on_stdin(asr_loop_t *loop, asr_loop_io_t *io, unsigned events) {
  (void)events;
  asrrun_t *run = io->arg;
  uint8_t buf[65536];
  ssize_t n = read(0, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  asrrun_daemons_stdin(run, buf, n > 0 ? (size_t)n : 0);
  if (n <= 0) {
    asr_loop_io_stop(loop, io);
    run->stdin_state = STDIN_CLOSED;
  }
}

void asrrun_stdin_poll(asrrun_t *run) {
  if (run->stdin_state == STDIN_WAITING && fcntl(0, F_GETFL) < 0) run->stdin_state = STDIN_FILE;
  if (run->stdin_state != STDIN_WAITING && run->stdin_state != STDIN_FILE) return;
  if (!asrrun_daemons_rank0_started(run)) return;
  if (run->stdin_state == STDIN_WAITING) {
    fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    if (asr_loop_io_start(run->loop, &run->stdin_io, 0, ASR_LOOP_READ, on_stdin, run) == 0) {
      run->stdin_state = STDIN_WATCHED;
      return;
    }
    run->stdin_state = STDIN_FILE;
  }
  /* a file (or none): all of it now, then EOF */
  while (run->stdin_state == STDIN_FILE) {
    uint8_t buf[65536];
    ssize_t k = fcntl(0, F_GETFL) < 0 ? 0 : read(0, buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    asrrun_daemons_stdin(run, buf, k > 0 ? (size_t)k : 0);
    if (k <= 0) run->stdin_state = STDIN_CLOSED;
  }
}

void asrrun_stdin_stop(asrrun_t *run) {
  if (run->stdin_state == STDIN_WATCHED) asr_loop_io_stop(run->loop, &run->stdin_io);
  run->stdin_state = STDIN_CLOSED;
}
