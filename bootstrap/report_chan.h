/*
 * report_chan.h -- the rank's end of its state-report channel (issue 24;
 * frames and text in report_fmt.h). asrd hands each rank one end of a
 * socket pair at fork (ASR_REPORT_FD); the first asr_job_init or asr_init
 * of the process starts a thread of its own that serves it: it says HELLO,
 * and answers each ASK with the report, built from this process's job state
 * (kept here) and the tables the runtime registered (runtime/state_report.c),
 * and each MASK (asrrun --metrics-port's scrape) with METRICS: the same
 * report and the runtime's histograms.
 * The application's threads take no part and get no signal: the thread
 * blocks every signal, and the data path only stores counters.
 *
 * Layering (doc/design.md, "Parts and layers"): this file is bootstrap's;
 * the runtime registers a provider, so no call goes from bootstrap up into
 * runtime.
 */
#ifndef ASR_REPORT_CHAN_H
#define ASR_REPORT_CHAN_H

#include "asr_buf.h"

#define ASR_REPORT_TICK_MS 500 /* how often the thread calls the provider's tick */

typedef struct {
  /* On the report thread every ASR_REPORT_TICK_MS and before each render. */
  void (*tick)(void *arg);
  /* Appends the provider's records (report_fmt.h) to out. */
  void (*render)(void *arg, asr_buf_t *out);
  /* A METRICS answer's records after render's (report_fmt.h: hist). */
  void (*metrics)(void *arg, asr_buf_t *out);
  void *arg;
} asr_report_provider_t;

/* Starts the thread when asrd gave the process a channel (idempotent; 0
 * also when there is none), else a negative ASR_E* (logged). */
int asr__report_start(void);

/* Sets the provider (the runtime's; one). p must outlive the process. */
void asr__report_register(const asr_report_provider_t *p);

/* The job state a report tells (relaxed stores: the report thread reads it). */
void asr__report_set_fence(int fence); /* asr_report_fence_t */
void asr__report_set_finalized(void);
/* The rank's job view, once asr_job_init has it (copied under a lock). */
void asr__report_set_job(const void *info); /* an asr_job_info_t */

#endif /* ASR_REPORT_CHAN_H */
