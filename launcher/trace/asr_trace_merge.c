/*
 * asr-trace-merge -- the trace files an ASR_TRACE=DIR run left in DIR (one
 * per process: common/asr_trace_fmt.h) into one Chrome trace-event JSON
 * file (doc/trace.md). `asrtrace merge DIR -o FILE` runs it.
 *
 *   asr-trace-merge DIR -o FILE
 *
 * Hosts are told apart by the host name each file names, and aligned by
 * the CLOCK_REALTIME / CLOCK_MONOTONIC pair each process read at its start
 * (the hosts' own clock error, which asr cannot know, is the bound). A
 * file that is not a whole trace file is named on stderr and left out;
 * the rest are merged. Exit status: 0, 1 when a file was left out, 2 on
 * a usage error or when nothing could be merged.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asr_err.h"
#include "trace_merge.h"

static int usage(const char *why) {
  fprintf(stderr, "asr-trace-merge: %s\nusage: asr-trace-merge DIR -o FILE\n", why);
  return 2;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
  const char *dir = NULL, *outpath = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
      outpath = argv[++i];
    else if (argv[i][0] == '-' || dir)
      return usage("unexpected argument");
    else
      dir = argv[i];
  }
  if (!dir || !outpath) return usage("needs a directory and -o FILE");
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "asr-trace-merge: cannot read the directory %s: %s\n", dir, strerror(errno));
    return 2;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".trc") != 0) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      char **v = realloc(names, cap * sizeof *v);
      if (!v) return usage("out of memory");
      names = v;
    }
    if (asprintf(&names[n], "%s/%s", dir, e->d_name) < 0) return usage("out of memory");
    n++;
  }
  closedir(d);
  if (!n) {
    fprintf(stderr,
            "asr-trace-merge: %s holds no trace files (*.trc): was ASR_TRACE set to it for the run?\n", dir);
    return 2;
  }
  qsort(names, n, sizeof *names, by_name);
  asr_trr_proc_t *procs = calloc(n, sizeof *procs);
  asr_trm_input_t *in = calloc(n, sizeof *in);
  asr_trm_host_t *hosts = calloc(n, sizeof *hosts);
  if (!procs || !in || !hosts) return usage("out of memory");
  int nin = 0, left_out = 0;
  char err[9000];
  for (size_t i = 0; i < n; i++) {
    if (asr_trr_load_file(names[i], &procs[nin], err, sizeof err) != 0) {
      fprintf(stderr, "asr-trace-merge: left out: %s\n", err);
      left_out = 1;
      continue;
    }
    in[nin] = (asr_trm_input_t){.proc = &procs[nin], .exited = ""};
    nin++;
  }
  if (!nin) {
    fprintf(stderr, "asr-trace-merge: no file in %s could be read\n", dir);
    return 2;
  }
  const char *clock = NULL;
  int nhosts = asr_trm_hosts_by_name(in, nin, hosts, &clock);
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", outpath, (long)getpid());
  FILE *out = fopen(tmp, "w");
  if (!out) {
    fprintf(stderr, "asr-trace-merge: cannot write %s: %s\n", tmp, strerror(errno));
    return 2;
  }
  asr_trm_opts_t opts = {.clock = clock, .job = procs[0].hdr.job};
  int rc = asr_trm_write(out, in, nin, hosts, nhosts, &opts, err, sizeof err);
  if (fclose(out) != 0 && !rc) {
    rc = ASR_EIO;
    snprintf(err, sizeof err, "cannot write %s: %s", tmp, strerror(errno));
  }
  if (!rc && rename(tmp, outpath) != 0) {
    rc = ASR_EIO;
    snprintf(err, sizeof err, "cannot rename %s to %s: %s", tmp, outpath, strerror(errno));
  }
  if (rc) {
    unlink(tmp);
    fprintf(stderr, "asr-trace-merge: %s\n", err);
    return 2;
  }
  for (int i = 0; i < nin; i++) asr_trr_free(&procs[i]);
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  free(procs);
  free(in);
  free(hosts);
  return left_out;
}
