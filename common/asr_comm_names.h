/*
 * asr_comm_names.h -- the names of the seed's eight connect states (§3;
 * asr.h's asr_comm_status_t, in its order): libasr's asr_comm_status_name
 * and the trace merger, which names a span by the state, read them here.
 */
#ifndef ASR_COMM_NAMES_H
#define ASR_COMM_NAMES_H

static inline const char *asr_comm_state_text(int s) {
  static const char *const names[] = {
      "START_INIT", "WAIT_FOR_HOSTNAME", "WAIT_FOR_NET_HANDLE_GET", "WAIT_FOR_NET_HANDLE_SET", "NET_CONNECT",
      "LISTEN",     "CONNECTED",         "CONNECTION_ERROR"};
  return s >= 0 && s < (int)(sizeof names / sizeof names[0]) ? names[s] : "UNKNOWN";
}

#endif /* ASR_COMM_NAMES_H */
