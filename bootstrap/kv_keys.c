/* kv_keys.c -- see kv_keys.h. */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_buf.h"
#include "asr_err.h"
#include "asr_le.h"
#include "kv_frame.h"
#include "kv_keys.h"

int asr_kv_handle_key(uint8_t *out, uint32_t send_lnc, uint32_t recv_lnc, const char *hostname) {
  if (!out || !hostname || send_lnc > 127 || recv_lnc > 127) return ASR_EINVAL;
  size_t hl = strlen(hostname);
  if (hl == 0 || hl >= ASR_KV_HOSTNAME_LEN) return ASR_EINVAL;
  memset(out, 0, ASR_KV_HANDLE_KEY_LEN);
  memcpy(out, ASR_KV_HANDLE_PREFIX, 7);
  asr_le_put32(out + 7, send_lnc);
  asr_le_put32(out + 11, recv_lnc);
  memcpy(out + 15, hostname, hl);
  return ASR_KV_HANDLE_KEY_LEN;
}

int asr_kv_handle_key_parse(const uint8_t *key, size_t len, uint32_t *send_lnc, uint32_t *recv_lnc,
                            char *host, size_t hostlen) {
  if (!key || len != ASR_KV_HANDLE_KEY_LEN || memcmp(key, ASR_KV_HANDLE_PREFIX, 7) != 0) return ASR_EINVAL;
  /* LNCs are 0..127 (asr_kv_handle_key refuses others), so a key with a
   * larger one is no handle key and renders as its bytes */
  uint32_t s = asr_le_get32(key + 7), r = asr_le_get32(key + 11);
  if (s > 127 || r > 127) return ASR_EINVAL;
  const uint8_t *name = key + 15;
  size_t n = 0;
  while (n < ASR_KV_HOSTNAME_LEN && name[n]) n++;
  if (n == 0 || n == ASR_KV_HOSTNAME_LEN) return ASR_EINVAL;
  for (size_t i = n; i < ASR_KV_HOSTNAME_LEN; i++)
    if (name[i]) return ASR_EINVAL; /* padding must be zeros */
  for (size_t i = 0; i < n; i++)
    if (!isprint(name[i])) return ASR_EINVAL;
  if (send_lnc) *send_lnc = s;
  if (recv_lnc) *recv_lnc = r;
  if (host && hostlen) snprintf(host, hostlen, "%.*s", (int)n, (const char *)name);
  return 0;
}

/* The prefix asr_kv_key_parse reads as "handle:SEND:RECV:HOST". */
#define HANDLE_SPEC "handle:"
#define HANDLE_SPEC_LEN 7

/* Writes key bytes to out (outlen > 0): a printable byte as itself, any other
 * as \xNN, and also '\' and the 'h' of a leading "handle:", so that the text
 * reads back with asr_kv_key_parse as these bytes and not as an escape or a
 * handle key spec. A byte goes in only when it fits whole with the NUL after
 * it, so a cut text ends between two bytes' renderings and a text that fits
 * exactly is not cut. */
static void render_bytes(const uint8_t *p, size_t len, char *out, size_t outlen) {
  int spec = len >= HANDLE_SPEC_LEN && memcmp(p, HANDLE_SPEC, HANDLE_SPEC_LEN) == 0;
  size_t pos = 0;
  for (size_t i = 0; i < len; i++) {
    int literal = isprint(p[i]) && p[i] != '\\' && !(i == 0 && spec);
    if (outlen - pos <= (literal ? 1u : 4u)) break;
    if (literal)
      out[pos++] = (char)p[i];
    else
      pos += (size_t)snprintf(out + pos, outlen - pos, "\\x%02x", p[i]);
  }
  out[pos] = '\0';
}

char *asr_kv_key_render(const uint8_t *key, size_t len, char *out, size_t outlen) {
  if (!out || outlen == 0) return out;
  uint32_t s, r;
  char host[ASR_KV_HOSTNAME_LEN + 1];
  if (asr_kv_handle_key_parse(key, len, &s, &r, host, sizeof host) == 0)
    snprintf(out, outlen, "handle-<send %u><recv %u><host %s>", s, r, host);
  else
    render_bytes(key, len, out, outlen);
  return out;
}

char *asr_kv_value_render(const uint8_t *val, size_t len, char *out, size_t outlen) {
  if (!out || outlen == 0) return out;
  size_t n = 0;
  while (n < len && val[n]) n++;
  int text = n > 0;
  for (size_t i = 0; i < n && text; i++)
    if (!isprint(val[i])) text = 0;
  for (size_t i = n; i < len && text; i++)
    if (val[i]) text = 0;
  if (text) {
    snprintf(out, outlen, "%.*s%s", (int)n, (const char *)val, n < len ? " (zero-padded)" : "");
    return out;
  }
  size_t pos = (size_t)snprintf(out, outlen, "%zu bytes: ", len);
  for (size_t i = 0; i < len && pos + 3 < outlen; i++)
    pos += (size_t)snprintf(out + pos, outlen - pos, "%02x", val[i]);
  return out;
}

int asr_kv_key_parse(const char *text, uint8_t *out, size_t outcap) {
  if (!text || !out) return ASR_EINVAL;
  if (strncmp(text, HANDLE_SPEC, HANDLE_SPEC_LEN) == 0) {
    char *end;
    unsigned long s = strtoul(text + HANDLE_SPEC_LEN, &end, 10);
    if (*end != ':') return ASR_EINVAL;
    unsigned long r = strtoul(end + 1, &end, 10);
    if (*end != ':' || s > 127 || r > 127) return ASR_EINVAL;
    if (outcap < ASR_KV_HANDLE_KEY_LEN) return ASR_ETOOBIG;
    return asr_kv_handle_key(out, (uint32_t)s, (uint32_t)r, end + 1);
  }
  size_t n = 0;
  for (const char *p = text; *p; p++) {
    int c = (unsigned char)*p;
    if (c == '\\' && p[1] == '\\') {
      p++;
    } else if (c == '\\' && p[1] == 'x') {
      /* p[3] is read only when p[2] was a digit: p[2] may be the final NUL */
      int hi, lo;
      if (asr_hex_digit(p[2], &hi) != 0 || asr_hex_digit(p[3], &lo) != 0) return ASR_EINVAL;
      c = hi * 16 + lo;
      p += 3;
    }
    if (n >= outcap || n >= ASR_KV_KEY_MAX) return ASR_ETOOBIG;
    out[n++] = (uint8_t)c;
  }
  if (n == 0) return ASR_EINVAL;
  return (int)n;
}
