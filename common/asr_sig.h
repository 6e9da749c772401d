/*
 * asr_sig.h -- which signals this process handles.
 *
 * A child that runs on our memory until its execve (vfork, clone with
 * CLONE_VM: launcher/launch/launch_agent.c, launcher/asrd/asrd_spawn.c) must put back
 * the default action of every signal we have a handler for before it
 * unblocks signals, so that none of our handlers runs there, on borrowed
 * memory. The parent asks which once, with this, and the child resets just
 * those.
 */
#ifndef ASR_SIG_H
#define ASR_SIG_H

#include <signal.h>

/* Writes the signals that have a handler installed (neither SIG_DFL nor
 * SIG_IGN), in ascending order, into sigs, which has room for _NSIG
 * entries; returns how many. */
int asr_sig_handled(int sigs[_NSIG]);

#endif /* ASR_SIG_H */
