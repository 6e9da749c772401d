/*
 * poll_idle.c -- when a polling thread yields (rt.h: asr__poll_idle):
 * asr_test (request.c) and asr_notif_poll (rma/notif.c) share the rule.
 */
#include "config.h"

#include <sched.h>

#include "rt.h"

/* A thread that keeps polling requests that are not done (or, rt.h:
 * asr__poll_idle, notifications that do not come) yields the processor
 * once every ASR_IDLE_YIELD polls in a row that found nothing (reset by a
 * completion). A program's thread that spins on asr_test shares the
 * processors with the threads that bring it news: its own service thread
 * and PMIx's event thread (a peer rank's death, issue 50), and on a
 * machine of few cores its host's daemon. Spinning, it held them off for
 * tens to hundreds of milliseconds; a wait shorter than ASR_IDLE_YIELD polls
 * (a ping-pong's, well under a microsecond each) never yields, and a yield
 * with nothing else to run returns at once. */
__thread unsigned asr__idle_polls;

void asr__poll_yield(void) { sched_yield(); }
