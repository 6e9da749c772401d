/*
 * asr_err.h -- the one list of asr error codes.
 *
 * Every internal function returns 0 on success or a negative ASR_E* code.
 * The list below is an X-macro (the libuv habit): it generates the enum,
 * asr_strerror() and asr_err_name(), so a new code is one line here.
 */
#ifndef ASR_ERR_H
#define ASR_ERR_H

#include <stddef.h>

#define ASR_ERRNO_MAP(X)                                             \
  X(INVAL, 1, "invalid argument")                                    \
  X(NOMEM, 2, "out of memory")                                       \
  X(IO, 3, "input/output error")                                     \
  X(TIMEDOUT, 4, "operation timed out")                              \
  X(CONNREFUSED, 5, "connection refused")                            \
  X(CONNRESET, 6, "connection closed by peer")                       \
  X(NOTFOUND, 7, "key not found")                                    \
  X(SERVER, 8, "the server reported an error")                       \
  X(PROTO, 9, "protocol error (malformed or unexpected frame)")      \
  X(AGAIN, 10, "resource temporarily unavailable, try again")        \
  X(BUSY, 11, "resource busy (another process holds it)")            \
  X(NOSPACE, 12, "limit reached (no space left in a bounded table)") \
  X(TOOBIG, 13, "value or key too large")                            \
  X(AUTH, 14, "wrong or missing job secret")                         \
  X(ADDRINUSE, 15, "address already in use")                         \
  X(UNREACH, 16, "peer unreachable")                                 \
  X(NOTCONN, 17, "not connected")                                    \
  X(STATE, 18, "operation not allowed in the current state")         \
  X(NOSYS, 19, "operation not supported")                            \
  X(CANCELED, 20, "operation canceled")                              \
  X(CONFIG, 21, "bad configuration")                                 \
  X(NOENT, 22, "no such file or directory")                          \
  X(PERM, 23, "permission denied")                                   \
  X(TRUNC, 24, "message truncated (larger than the receive buffer)") \
  X(REVOKED, 25, "the memory was deregistered by its owner")

typedef enum {
  ASR_OK = 0,
#define ASR__ERR_ENUM(name, num, msg) ASR_E##name = -(num),
  ASR_ERRNO_MAP(ASR__ERR_ENUM)
#undef ASR__ERR_ENUM
      ASR_E__LAST = -1000
} asr_err_t;

/* The public API's status codes (asr.h, the seed's 0/1/3/4 plus ours). */
#define ASR_STATUS_MAP(X)                                                    \
  X(1, "invalid argument, transfer out of bounds, or post failure")          \
  X(3, "communicator not connected, or request not in use")                  \
  X(4, "Maximum number of pending requests 128 reached")                     \
  X(5, "timed out")                                                          \
  X(6, "connection error: the comm failed to connect (see the log for why)") \
  X(7, "a peer rank of the job failed (asr_job_rank_state says which)")

/* Returns a static, human-readable message for code: 0, a negative ASR_E*,
 * or a positive status of the public API. Exported by libasr. */
__attribute__((visibility("default"))) const char *asr_strerror(int code);

/* Returns the code's symbolic name ("ASR_ETIMEDOUT"), or "ASR_EUNKNOWN". */
const char *asr_err_name(int code);

/* Maps a positive errno value onto the closest ASR_E* code (ASR_EIO when
 * none is close). Foreign codes are mapped where they enter: errno values
 * here, libfabric's -FI_E* in runtime/ofi.c (whose codes below 256 are
 * errno values and come through here too). */
int asr_err_from_errno(int err);

/* Formats the message into buf (as snprintf: truncated to len - 1 bytes and
 * NUL-terminated; nothing is written when buf is NULL or len is 0) and
 * returns code, so that a failing parser reports why in one line:
 *   return asr_errf(errbuf, errlen, ASR_ECONFIG, "bad value '%s'", v);
 * The caller owns buf. */
int asr_errf(char *buf, size_t len, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif /* ASR_ERR_H */
