/*
 * state_registry.c -- every comm of the process, from its handover to its
 * free, for the state report (state_report.c reads it; comm.c adds and
 * removes). A file of its own so that comm.c and the report do not use
 * each other. asr__rep_mutex guards the list, the report's per-comm
 * sampler fields, and the unpublishing of a context (context.c: asr_close).
 */
#include "config.h"

#include <pthread.h>

#include "rt.h"

pthread_mutex_t asr__rep_mutex = PTHREAD_MUTEX_INITIALIZER;
struct asr_comm *asr__rep_comms;

void asr__rep_add(struct asr_comm *c) {
  pthread_mutex_lock(&asr__rep_mutex);
  c->rep_prev = NULL;
  c->rep_next = asr__rep_comms;
  if (asr__rep_comms) asr__rep_comms->rep_prev = c;
  asr__rep_comms = c;
  c->rep_listed = 1;
  pthread_mutex_unlock(&asr__rep_mutex);
}

void asr__rep_remove(struct asr_comm *c) {
  pthread_mutex_lock(&asr__rep_mutex);
  if (c->rep_listed) {
    if (c->rep_prev)
      c->rep_prev->rep_next = c->rep_next;
    else
      asr__rep_comms = c->rep_next;
    if (c->rep_next) c->rep_next->rep_prev = c->rep_prev;
    c->rep_listed = 0;
  }
  pthread_mutex_unlock(&asr__rep_mutex);
}
