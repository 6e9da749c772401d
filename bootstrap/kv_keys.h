/*
 * kv_keys.h -- the rendezvous keys of seed §3 and their rendering.
 *
 * The directional handle key (async_sr_create_handle_req_key @0xee4a0) is
 *   "handle-" (7 B) + send_lnc (4 B LE) + recv_lnc (4 B LE) + hostname (128 B, zero-padded)
 * = 143 bytes, binary. The RECV side builds it as (peer_lnc, lnc, peer_hostname)
 * and SETs it; the SEND side builds it as (lnc, peer_lnc, own hostname) and GETs
 * it: both name the same (send, recv, host) triple, so they meet on one entry.
 * The well-known key "hostname" maps to the host's name, zero-padded to 128 bytes.
 */
#ifndef ASR_KV_KEYS_H
#define ASR_KV_KEYS_H

#include <stddef.h>
#include <stdint.h>

#define ASR_KV_HOSTNAME_KEY "hostname"
#define ASR_KV_HOSTNAME_KEY_LEN 8
#define ASR_KV_HOSTNAME_LEN 128 /* the value of "hostname", and the name inside a handle key */
#define ASR_KV_HANDLE_PREFIX "handle-"
#define ASR_KV_HANDLE_KEY_LEN 143
#define ASR_KV_NET_HANDLE_LEN 128
#define ASR_KV_KEY_TEXT_MAX (4 * ASR_KV_KEY_MAX + 1) /* a rendered key: \xNN a byte, and the NUL */

/* Builds the handle key for (send_lnc, recv_lnc, hostname) into out
 * (ASR_KV_HANDLE_KEY_LEN bytes). Returns the key length (143), or ASR_EINVAL
 * when an LNC is out of 0..127 or the host name is empty or over 127 bytes. */
int asr_kv_handle_key(uint8_t *out, uint32_t send_lnc, uint32_t recv_lnc, const char *hostname);

/* Decodes a handle key. Returns 0 and fills the fields, or ASR_EINVAL when key
 * is not a well-formed handle key, that is not one asr_kv_handle_key builds
 * (LNCs 0..127, a printable name of 1..127 bytes, zero padding). host gets a
 * NUL-terminated name. */
int asr_kv_handle_key_parse(const uint8_t *key, size_t len, uint32_t *send_lnc, uint32_t *recv_lnc,
                            char *host, size_t hostlen);

/* Renders any key readably into out (always NUL-terminated):
 * "handle-<send 3><recv 5><host node2>" for handle keys, the text itself for
 * printable keys, and \xNN escapes for other bytes (and '\', and the 'h' of
 * a text key that starts "handle:"), so that asr_kv_key_parse reads the
 * text of any key but a handle key back as that key. A text longer
 * than outlen - 1 is cut between two bytes' renderings; ASR_KV_KEY_TEXT_MAX
 * bytes hold any key's. Returns out. */
char *asr_kv_key_render(const uint8_t *key, size_t len, char *out, size_t outlen);

/* Renders a value: text up to its first zero byte when the rest is zero
 * padding and it is printable, else hex. Returns out. */
char *asr_kv_value_render(const uint8_t *val, size_t len, char *out, size_t outlen);

/* Parses a user-typed key: "handle:SEND:RECV:HOST" builds a handle key;
 * anything else is text in which \xNN and \\ are escapes. Returns the length
 * or ASR_EINVAL / ASR_ETOOBIG. */
int asr_kv_key_parse(const char *text, uint8_t *out, size_t outcap);

#endif /* ASR_KV_KEYS_H */
