/*
 * fuzz_kv_frame.c -- libFuzzer target for the KV store's frame decoder
 * (bootstrap/kv_frame.c, asr_kv_frame_decode) and for the key and value
 * renderers and parsers of bootstrap/kv_keys.c that read what it decoded:
 * the code that takes the bytes a KV server or client gets from the network.
 *
 * The input is a byte stream as one connection carries it: it is cut into
 * ASR_KV_FRAME_LEN-byte frames and the last piece is padded with zeros, so a
 * short input is a frame whose tail is zeros and a long one is several
 * frames. For each frame that decodes:
 *  - the message is inside the limits decode promises (a known opcode, a
 *    vtype of 0 or 1, lengths within ASR_KV_KEY_MAX / ASR_KV_VAL_MAX, and
 *    pointers into the frame);
 *  - with the ID flag, its id is the frame's bytes 1152..1155 and its value
 *    at most ASR_KV_VAL_MAX_ID bytes; without it the id is 0; and the id
 *    decode_id reports for a refused frame is the one a frame with the
 *    magic, the version and the flag carries (a pipelined server refuses it
 *    by that id);
 *  - it re-encodes, the new frame decodes to the same message, and encoding
 *    that one gives the same bytes again (one trip reaches a fixed point);
 *  - its key and value render into buffers of several sizes, each result
 *    NUL-terminated inside its buffer;
 *  - a key that parses as a handle key is rebuilt to the same bytes by
 *    asr_kv_handle_key, and any other key renders to text that
 *    asr_kv_key_parse reads back as the same key (what `asrkv dump` prints
 *    is what `asrkv get` takes).
 */
#include "config.h"

#include <string.h>

#include "asr_err.h"
#include "fuzz.h"
#include "kv_frame.h"
#include "kv_keys.h"

#define RENDER_MAX ASR_KV_KEY_TEXT_MAX

/* The buffer sizes each render is tried with: the edges of render_bytes'
 * room check (a \xNN escape needs 5 bytes with its NUL) and a roomy one. */
static const size_t render_sizes[] = {1, 2, 4, 5, 6, 7, 9, 16, 40, RENDER_MAX};

static void check_msg(const asr_kv_msg_t *m, const uint8_t *frame) {
  FUZZ_ASSERT(asr_kv_op_is_request(m->opcode) || asr_kv_op_is_response(m->opcode), "opcode %u", m->opcode);
  FUZZ_ASSERT(m->vtype <= ASR_KV_VTYPE_BINARY, "vtype %u", m->vtype);
  FUZZ_ASSERT(m->key_len <= ASR_KV_KEY_MAX && m->val_len <= ASR_KV_VAL_MAX, "lengths %u %u", m->key_len,
              m->val_len);
  FUZZ_ASSERT(m->secret == frame + ASR_KV_OFF_SECRET && m->key == frame + ASR_KV_OFF_KEY &&
                  m->val == frame + ASR_KV_OFF_VAL,
              "pointers outside the frame");
  FUZZ_ASSERT(strcmp(asr_kv_op_name(m->opcode), "UNKNOWN") != 0, "opcode %u has no name", m->opcode);
  FUZZ_ASSERT((m->flags & ~ASR_KV_FLAG_ID) == 0, "flags %#x", m->flags);
  if (m->flags & ASR_KV_FLAG_ID) {
    uint32_t id = (uint32_t)frame[ASR_KV_OFF_ID] | ((uint32_t)frame[ASR_KV_OFF_ID + 1] << 8) |
                  ((uint32_t)frame[ASR_KV_OFF_ID + 2] << 16) | ((uint32_t)frame[ASR_KV_OFF_ID + 3] << 24);
    FUZZ_ASSERT(m->id == id, "id %u, the frame says %u", m->id, id);
    FUZZ_ASSERT(m->val_len <= ASR_KV_VAL_MAX_ID, "value of %u bytes beside an id", m->val_len);
  } else {
    FUZZ_ASSERT(m->id == 0, "id %u without the flag", m->id);
  }
}

/* A refused frame's id is reported exactly when it has the magic, the
 * version and the flag. */
static void check_refused_id(const uint8_t *frame) {
  asr_kv_msg_t m;
  int has = -1;
  uint32_t id = 12345;
  (void)asr_kv_frame_decode_id(frame, &m, NULL, &has, &id);
  int want = memcmp(frame + ASR_KV_OFF_MAGIC, "ASRK", 4) == 0 &&
             frame[ASR_KV_OFF_VERSION] == ASR_KV_VERSION && (frame[ASR_KV_OFF_FLAGS] & ASR_KV_FLAG_ID);
  FUZZ_ASSERT(has == want, "has_id %d, expected %d", has, want);
  uint32_t fid = (uint32_t)frame[ASR_KV_OFF_ID] | ((uint32_t)frame[ASR_KV_OFF_ID + 1] << 8) |
                 ((uint32_t)frame[ASR_KV_OFF_ID + 2] << 16) | ((uint32_t)frame[ASR_KV_OFF_ID + 3] << 24);
  FUZZ_ASSERT(id == (want ? fid : 0), "id %u reported", id);
}

static int same_msg(const asr_kv_msg_t *a, const asr_kv_msg_t *b) {
  return a->opcode == b->opcode && a->vtype == b->vtype && a->flags == b->flags && a->id == b->id &&
         a->aux == b->aux && a->key_len == b->key_len && a->val_len == b->val_len &&
         memcmp(a->secret, b->secret, ASR_KV_SECRET_LEN) == 0 && memcmp(a->key, b->key, a->key_len) == 0 &&
         memcmp(a->val, b->val, a->val_len) == 0;
}

/* Encode, decode, encode: the message survives and the bytes settle. */
static void check_roundtrip(const asr_kv_msg_t *m) {
  uint8_t f1[ASR_KV_FRAME_LEN], f2[ASR_KV_FRAME_LEN];
  asr_kv_msg_t m1, m2;
  const char *why = NULL;
  int rc = asr_kv_frame_encode(f1, m);
  FUZZ_ASSERT(rc == 0, "a decoded message does not encode: %s", asr_err_name(rc));
  rc = asr_kv_frame_decode(f1, &m1, &why);
  FUZZ_ASSERT(rc == 0, "an encoded frame does not decode: %s", why ? why : "?");
  FUZZ_ASSERT(same_msg(m, &m1), "the message changed on a round trip");
  FUZZ_ASSERT(asr_kv_frame_encode(f2, &m1) == 0, "second encode failed");
  FUZZ_ASSERT(memcmp(f1, f2, sizeof f1) == 0, "encoding is not a fixed point");
  FUZZ_ASSERT(asr_kv_frame_decode(f2, &m2, NULL) == 0 && same_msg(&m1, &m2), "second decode differs");
}

static void check_terminated(const char *out, size_t outlen, const char *what) {
  FUZZ_ASSERT(memchr(out, '\0', outlen) != NULL, "%s is not NUL-terminated in %zu bytes", what, outlen);
}

static void check_key(const uint8_t *key, size_t len) {
  char out[RENDER_MAX];
  for (size_t i = 0; i < sizeof render_sizes / sizeof render_sizes[0]; i++) {
    memset(out, 'Z', sizeof out);
    FUZZ_ASSERT(asr_kv_key_render(key, len, out, render_sizes[i]) == out, "render returned another pointer");
    check_terminated(out, render_sizes[i], "a rendered key");
  }
  /* out holds the roomy render now */
  uint32_t s, r;
  char host[ASR_KV_HOSTNAME_LEN + 1];
  uint8_t back[ASR_KV_KEY_CAP];
  if (asr_kv_handle_key_parse(key, len, &s, &r, host, sizeof host) == 0) {
    int n = asr_kv_handle_key(back, s, r, host);
    FUZZ_ASSERT(n == (int)len && memcmp(back, key, len) == 0,
                "handle key <send %u><recv %u><host %s> does not rebuild (%d)", s, r, host, n);
    return;
  }
  if (len == 0) return; /* the empty key has no text form: asr_kv_key_parse refuses "" */
  int n = asr_kv_key_parse(out, back, sizeof back);
  FUZZ_ASSERT(n == (int)len && memcmp(back, key, len) == 0, "key rendered as '%s' parses back to %d bytes",
              out, n);
}

static void check_value(const uint8_t *val, size_t len) {
  /* a value renders to "N bytes: " and two hex digits a byte */
  char out[2 * ASR_KV_VAL_MAX + 32];
  static const size_t sizes[] = {1, 2, 3, 12, 13, 14, 15, 200, sizeof out};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    memset(out, 'Z', sizeof out);
    asr_kv_value_render(val, len, out, sizes[i]);
    check_terminated(out, sizes[i], "a rendered value");
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t off = 0;
  do {
    uint8_t frame[ASR_KV_FRAME_LEN];
    size_t n = size - off < sizeof frame ? size - off : sizeof frame;
    memset(frame, 0, sizeof frame);
    if (n) memcpy(frame, data + off, n);
    off += n;
    asr_kv_msg_t m;
    const char *why = NULL;
    int rc = asr_kv_frame_decode(frame, &m, &why);
    check_refused_id(frame);
    if (rc != 0) {
      FUZZ_ASSERT(rc == ASR_EPROTO && why && *why, "decode failed with %s and no reason", asr_err_name(rc));
      continue;
    }
    check_msg(&m, frame);
    check_roundtrip(&m);
    check_key(m.key, m.key_len);
    check_value(m.val, m.val_len);
  } while (off < size);
  return 0;
}
