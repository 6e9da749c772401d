/*
 * asrrun_output.c -- the ranks' output as asrrun prints it (asrrun.h):
 * each line whole, tagged "[rank] " unless --no-tag-output, on asrrun's
 * stdout or stderr as the rank wrote it, and with --output-dir also in
 * DIR/rank.N/stdout|stderr.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asrrun.h"

static int open_rank_file(asrrun_t *run, int rank, int stream) {
  char dir[PATH_MAX], path[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/rank.%d", run->cfg.output_dir, rank);
  mkdir(run->cfg.output_dir, 0755);
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/%s", dir, stream == 1 ? "stdout" : "stderr");
  return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644);
}

void asrrun_output_line(asrrun_t *run, int rank, int stream, const uint8_t *s, size_t n) {
  char *buf = malloc(n + 32);
  if (!buf) return;
  size_t k = 0;
  if (run->cfg.tag_output) k = (size_t)snprintf(buf, 32, "[%d] ", rank);
  memcpy(buf + k, s, n);
  k += n;
  buf[k++] = '\n';
  int fds[2] = {stream == 1 ? 1 : 2, -1};
  if (run->cfg.output_dir[0] && rank >= 0 && rank < run->map.nranks) {
    /* "also write each rank's output under DIR": the terminal keeps it too */
    rank_t *r = &run->ranks[rank];
    if (r->out_fd[stream] <= 0) r->out_fd[stream] = open_rank_file(run, rank, stream);
    if (r->out_fd[stream] > 0) fds[1] = r->out_fd[stream];
  }
  for (int f = 0; f < 2 && fds[f] >= 0; f++) {
    size_t off = 0;
    while (off < k) {
      ssize_t w = write(fds[f], buf + off, k - off);
      if (w > 0)
        off += (size_t)w;
      else if (w < 0 && errno == EINTR)
        continue;
      else
        break;
    }
  }
  free(buf);
}

void asrrun_output_close(asrrun_t *run) {
  for (int i = 0; run->ranks && i < run->map.nranks; i++)
    for (int s = 1; s <= 2; s++)
      if (run->ranks[i].out_fd[s] > 0) close(run->ranks[i].out_fd[s]);
}
