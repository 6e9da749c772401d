/* asr_err.c -- strings for the ASR_E* codes generated from ASR_ERRNO_MAP,
 * and asr_errf. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "asr_err.h"

const char *asr_strerror(int code) {
  switch (code) {
    case ASR_OK: return "success";
#define ASR__ERR_STR(name, num, msg) \
  case ASR_E##name: return msg;
      ASR_ERRNO_MAP(ASR__ERR_STR)
#undef ASR__ERR_STR
#define ASR__STATUS_STR(num, msg) \
  case num: return msg;
      ASR_STATUS_MAP(ASR__STATUS_STR)
#undef ASR__STATUS_STR
    default: return "unknown error";
  }
}

const char *asr_err_name(int code) {
  switch (code) {
    case ASR_OK: return "ASR_OK";
#define ASR__ERR_NAME(name, num, msg) \
  case ASR_E##name: return "ASR_E" #name;
      ASR_ERRNO_MAP(ASR__ERR_NAME)
#undef ASR__ERR_NAME
    default: return "ASR_EUNKNOWN";
  }
}

int asr_err_from_errno(int err) {
  switch (err) {
    case 0: return ASR_OK;
    case EINVAL: return ASR_EINVAL;
    case ENOMEM:
    case ENOBUFS: return ASR_ENOMEM;
    case ETIMEDOUT: return ASR_ETIMEDOUT;
    case ECONNREFUSED: return ASR_ECONNREFUSED;
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE: return ASR_ECONNRESET;
    case EAGAIN:
    case EINPROGRESS: return ASR_EAGAIN;
    case EADDRINUSE: return ASR_EADDRINUSE;
    case ENETUNREACH:
    case ENETDOWN:
    case EHOSTDOWN:
    case EHOSTUNREACH: return ASR_EUNREACH;
    case ENOTCONN: return ASR_ENOTCONN;
    case ENOENT: return ASR_ENOENT;
    case EACCES:
    case EPERM: return ASR_EPERM;
    case EMFILE:
    case ENFILE:
    case ENOSPC: return ASR_ENOSPACE;
    case EBUSY: return ASR_EBUSY;
    case ECANCELED: return ASR_ECANCELED;
    case EMSGSIZE:
    case E2BIG:
    case EOVERFLOW: return ASR_ETOOBIG;
    case ENOSYS:
    case EOPNOTSUPP: return ASR_ENOSYS;
    default: return ASR_EIO;
  }
}

int asr_errf(char *buf, size_t len, int code, const char *fmt, ...) {
  if (buf && len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
  }
  return code;
}
