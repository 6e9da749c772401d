/*
 * trace_merge.h -- many processes' trace records (trace_read.h) into one
 * Chrome trace-event JSON file, as doc/trace.md says: a process per host,
 * a track per rank and LNC, the hosts' clocks aligned, a flow from each
 * send's post to its receive's completion.
 */
#ifndef ASR_TRACE_MERGE_H
#define ASR_TRACE_MERGE_H

#include <stdint.h>
#include <stdio.h>

#include "trace_read.h"

typedef struct {
  const char *name;  /* the host's name */
  int64_t offset_ns; /* its CLOCK_MONOTONIC minus the reference clock */
  int64_t error_ns;  /* the bound on offset_ns's error; -1 unknown */
} asr_trm_host_t;

typedef struct {
  const asr_trr_proc_t *proc;
  int host;           /* index in the hosts */
  const char *exited; /* "code 0", "signal 9", or "" when not known */
} asr_trm_input_t;

typedef struct {
  const char *clock; /* "asrrun", "realtime" or "one host" (doc/trace.md) */
  const char *job;   /* or "" */
} asr_trm_opts_t;

/* Writes the JSON object to out. Returns 0, or ASR_EIO (out failed) /
 * ASR_ENOMEM with err set. */
int asr_trm_write(FILE *out, const asr_trm_input_t *in, int nin, const asr_trm_host_t *hosts, int nhosts,
                  const asr_trm_opts_t *opts, char *err, size_t errlen);

/* The hosts of procs read from files that carry their own clock anchors
 * (ASR_TRACE=DIR runs): one host per distinct header host name, in order
 * of first appearance, aligned by each host's first file's
 * CLOCK_REALTIME / CLOCK_MONOTONIC pair (error -1: not known). Fills
 * in[i].host; returns the host count (hosts has room for nin) and sets
 * *clock to "realtime", or "one host" when there is one. */
int asr_trm_hosts_by_name(asr_trm_input_t *in, int nin, asr_trm_host_t *hosts, const char **clock);

#endif /* ASR_TRACE_MERGE_H */
