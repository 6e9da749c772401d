/* kv_frame.c -- encode and decode the 1156-byte KV frames of kv_frame.h. */
#include "config.h"

#include <string.h>

#include "asr_err.h"
#include "asr_le.h"
#include "kv_frame.h"

static const uint8_t frame_magic[4] = {'A', 'S', 'R', 'K'};

int asr_kv_op_is_request(int op) {
  return op == ASR_KV_OP_SET || op == ASR_KV_OP_GET || op == ASR_KV_OP_END || op == ASR_KV_OP_LIST ||
         op == ASR_KV_OP_DEL;
}

int asr_kv_op_is_response(int op) {
  return op == ASR_KV_OP_SET_ACK || op == ASR_KV_OP_GET_TEXT || op == ASR_KV_OP_GET_BINARY ||
         op == ASR_KV_OP_NOT_FOUND || op == ASR_KV_OP_ERROR || op == ASR_KV_OP_LIST_ENTRY;
}

const char *asr_kv_op_name(int op) {
  switch (op) {
    case ASR_KV_OP_INVALID: return "INVALID";
    case ASR_KV_OP_SET_ACK: return "SET_ACK";
    case ASR_KV_OP_GET_TEXT: return "GET_TEXT";
    case ASR_KV_OP_GET_BINARY: return "GET_BINARY";
    case ASR_KV_OP_NOT_FOUND: return "NOT_FOUND";
    case ASR_KV_OP_ERROR: return "ERROR";
    case ASR_KV_OP_LIST_ENTRY: return "LIST_ENTRY";
    case ASR_KV_OP_SET: return "SET";
    case ASR_KV_OP_GET: return "GET";
    case ASR_KV_OP_END: return "END";
    case ASR_KV_OP_LIST: return "LIST";
    case ASR_KV_OP_DEL: return "DEL";
    default: return "UNKNOWN";
  }
}

int asr_kv_frame_encode(uint8_t *frame, const asr_kv_msg_t *msg) {
  if (!frame || !msg) return ASR_EINVAL;
  if (!asr_kv_op_is_request(msg->opcode) && !asr_kv_op_is_response(msg->opcode)) return ASR_EINVAL;
  if (msg->vtype > ASR_KV_VTYPE_BINARY || (msg->flags & ~ASR_KV_FLAG_ID)) return ASR_EINVAL;
  size_t vmax = msg->flags & ASR_KV_FLAG_ID ? ASR_KV_VAL_MAX_ID : ASR_KV_VAL_MAX;
  if (msg->key_len > ASR_KV_KEY_MAX || msg->val_len > vmax) return ASR_ETOOBIG;
  if ((msg->key_len && !msg->key) || (msg->val_len && !msg->val)) return ASR_EINVAL;
  memset(frame, 0, ASR_KV_FRAME_LEN);
  frame[ASR_KV_OFF_OPCODE] = msg->opcode;
  frame[ASR_KV_OFF_VERSION] = ASR_KV_VERSION;
  frame[ASR_KV_OFF_VTYPE] = msg->vtype;
  frame[ASR_KV_OFF_FLAGS] = msg->flags;
  memcpy(frame + ASR_KV_OFF_MAGIC, frame_magic, sizeof frame_magic);
  asr_le_put32(frame + ASR_KV_OFF_AUX, msg->aux);
  asr_le_put16(frame + ASR_KV_OFF_KEYLEN, msg->key_len);
  asr_le_put16(frame + ASR_KV_OFF_VALLEN, msg->val_len);
  if (msg->secret) memcpy(frame + ASR_KV_OFF_SECRET, msg->secret, ASR_KV_SECRET_LEN);
  if (msg->key_len) memcpy(frame + ASR_KV_OFF_KEY, msg->key, msg->key_len);
  if (msg->val_len) memcpy(frame + ASR_KV_OFF_VAL, msg->val, msg->val_len);
  if (msg->flags & ASR_KV_FLAG_ID) asr_le_put32(frame + ASR_KV_OFF_ID, msg->id);
  return 0;
}

int asr_kv_frame_decode(const uint8_t *frame, asr_kv_msg_t *msg, const char **why) {
  return asr_kv_frame_decode_id(frame, msg, why, NULL, NULL);
}

int asr_kv_frame_decode_id(const uint8_t *frame, asr_kv_msg_t *msg, const char **why, int *has_id,
                           uint32_t *id_out) {
  const char *reason = NULL;
  int with_id = 0;
  if (has_id) *has_id = 0;
  if (id_out) *id_out = 0;
  if (frame && memcmp(frame + ASR_KV_OFF_MAGIC, frame_magic, sizeof frame_magic) == 0 &&
      frame[ASR_KV_OFF_VERSION] == ASR_KV_VERSION && (frame[ASR_KV_OFF_FLAGS] & ASR_KV_FLAG_ID)) {
    with_id = 1;
    if (has_id) *has_id = 1;
    if (id_out) *id_out = asr_le_get32(frame + ASR_KV_OFF_ID);
  }
  if (!frame || !msg) {
    reason = "no frame";
  } else if (memcmp(frame + ASR_KV_OFF_MAGIC, frame_magic, sizeof frame_magic) != 0) {
    reason = "bad magic (not an asr KV frame)";
  } else if (frame[ASR_KV_OFF_VERSION] != ASR_KV_VERSION) {
    reason = "unsupported frame version";
  } else if (!asr_kv_op_is_request(frame[ASR_KV_OFF_OPCODE]) &&
             !asr_kv_op_is_response(frame[ASR_KV_OFF_OPCODE])) {
    reason = "unknown opcode";
  } else if (frame[ASR_KV_OFF_VTYPE] > ASR_KV_VTYPE_BINARY) {
    reason = "unknown value type";
  } else if (frame[ASR_KV_OFF_FLAGS] & ~ASR_KV_FLAG_ID) {
    reason = "reserved flags set";
  } else if (asr_le_get16(frame + ASR_KV_OFF_KEYLEN) > ASR_KV_KEY_MAX) {
    reason = "key length over 143 bytes";
  } else if (asr_le_get16(frame + ASR_KV_OFF_VALLEN) > ASR_KV_VAL_MAX) {
    reason = "value length over 964 bytes";
  } else if (with_id && asr_le_get16(frame + ASR_KV_OFF_VALLEN) > ASR_KV_VAL_MAX_ID) {
    reason = "value length over 960 bytes in a frame with an id";
  }
  if (reason) {
    if (why) *why = reason;
    return ASR_EPROTO;
  }
  msg->opcode = frame[ASR_KV_OFF_OPCODE];
  msg->vtype = frame[ASR_KV_OFF_VTYPE];
  msg->flags = frame[ASR_KV_OFF_FLAGS];
  msg->id = with_id ? asr_le_get32(frame + ASR_KV_OFF_ID) : 0;
  msg->aux = asr_le_get32(frame + ASR_KV_OFF_AUX);
  msg->key_len = asr_le_get16(frame + ASR_KV_OFF_KEYLEN);
  msg->val_len = asr_le_get16(frame + ASR_KV_OFF_VALLEN);
  msg->secret = frame + ASR_KV_OFF_SECRET;
  msg->key = frame + ASR_KV_OFF_KEY;
  msg->val = frame + ASR_KV_OFF_VAL;
  return 0;
}
