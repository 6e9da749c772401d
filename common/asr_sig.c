/*
 * asr_sig.c -- which signals this process handles (asr_sig.h).
 */
#include "config.h"

#include "asr_sig.h"

int asr_sig_handled(int sigs[_NSIG]) {
  int n = 0;
  for (int sig = 1; sig < _NSIG; sig++) {
    struct sigaction sa;
    if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) != 0) continue;
    if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN) sigs[n++] = sig;
  }
  return n;
}
