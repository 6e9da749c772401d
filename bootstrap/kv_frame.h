/*
 * kv_frame.h -- the rendezvous KV store's wire format (seed §4).
 *
 * Every message, in both directions, is one fixed-size frame of
 * ASR_KV_FRAME_LEN = 1156 bytes (the seed's KV_STORE_BUFFER_LENGTH). A client
 * connection carries a sequence of request/response pairs and ends with an
 * END request, after which the server closes it. All integers are
 * little-endian.
 *
 * Two kinds of connection share the one format. The seed's: frames without
 * the ID flag, each answered in order before the next is read (a held GET
 * holds the whole connection). Beyond the seed, a pipelined one (kv_conn.h):
 * every frame carries the ID flag and a request id, the client sends many
 * without waiting, and the server answers each as soon as it can -- at once,
 * or a held GET when its SET arrives -- in any order, echoing the id. The
 * first frame decides: a connection whose first request has the flag is
 * pipelined to the end, and a frame without it there is refused (and the
 * connection closed). The flag costs the value field its last 4 bytes.
 *
 *   offset  size  field     meaning
 *   ------  ----  --------  ----------------------------------------------------
 *        0     1  opcode    ASR_KV_OP_* below
 *        1     1  version   ASR_KV_VERSION (1); anything else is refused
 *        2     1  vtype     value type: 0 text (e.g. "hostname"), 1 binary
 *                           (e.g. a net handle); a GET's vtype picks the response
 *                           opcode (2 for text, 3 for binary)
 *        3     1  flags     bit 0 ASR_KV_FLAG_ID: the frame carries a request id
 *                           (a pipelined connection); the other bits are
 *                           reserved and must be zero
 *        4     4  magic     "ASRK"; a frame without it is not ours
 *        8     4  aux       LIST: request = index of the entry wanted,
 *                           response = total number of keys; GET request:
 *                           how many ms the server may hold the GET while its
 *                           key is missing (answering the moment a SET stores
 *                           it, else NOT_FOUND when the time is up; the
 *                           server caps it at 2000; 0 = answer at once);
 *                           else 0
 *       12     2  key_len   0..ASR_KV_KEY_MAX (143) bytes used in key
 *       14     2  val_len   0..ASR_KV_VAL_MAX (964) bytes used in value
 *       16    32  secret    the per-job secret (zeros when the job has none);
 *                           requests only, responses carry zeros
 *       48   144  key       binary key (may hold zero bytes), zero-padded;
 *                           144 = the seed's KV_STORE_KEY_LENGTH
 *      192   964  value     binary value, zero-padded; with ASR_KV_FLAG_ID at
 *                           most ASR_KV_VAL_MAX_ID (960) bytes of it, because
 *     1152     4  id        (ID flag only) the request id, chosen by the client
 *                           and echoed in the answer; the server never reads
 *                           it otherwise (any value, 0 included, is valid)
 *   ------  ----
 *     1156 total
 *
 * Opcodes. Requests start at 16 so a request can never be mistaken for a
 * response. The response numbers 1, 2, 3, 5 and 6 are the seed's; 4 is not
 * used (the seed does not show it); 7 and LIST are ours.
 *
 *   value  name          direction  meaning
 *       0  INVALID       -          never sent
 *       1  SET_ACK       response   the SET was stored
 *       2  GET_TEXT      response   GET hit, value is text (vtype 0)
 *       3  GET_BINARY    response   GET hit, value is binary (vtype 1)
 *       5  NOT_FOUND     response   GET miss, at once or when its wait (aux) is
 *                                   over (a client with retry asks again)
 *       6  ERROR         response   the server refused the request; value holds
 *                                   a one-line reason (bad secret, bad frame,
 *                                   table full); for a request that was not a
 *                                   valid frame the server closes afterwards
 *       7  LIST_ENTRY    response   beyond the seed: key+value of entry aux of
 *                                   the request; the response's aux = key count
 *                                   (an index past the end gets NOT_FOUND with
 *                                   aux = key count)
 *      16  SET           request    store key -> value (overwrites)
 *      17  GET           request    fetch key
 *      18  END           request    no response; the server closes
 *      19  LIST          request    beyond the seed, for `asrkv dump`: fetch the
 *                                   aux-th key in insertion order
 *      20  DEL           request    beyond the seed: remove key (the keys of a
 *                                   process that is gone, so that its successor's
 *                                   peers never read them); answered SET_ACK when
 *                                   it was there, NOT_FOUND when it was not
 */
#ifndef ASR_KV_FRAME_H
#define ASR_KV_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define ASR_KV_FRAME_LEN 1156
#define ASR_KV_VERSION 1
#define ASR_KV_KEY_CAP 144 /* KV_STORE_KEY_LENGTH: keys are < 144 bytes */
#define ASR_KV_KEY_MAX 143
#define ASR_KV_VAL_MAX 964
#define ASR_KV_VAL_MAX_ID 960 /* the value's room in a frame with the ID flag */
#define ASR_KV_SECRET_LEN 32

#define ASR_KV_OFF_OPCODE 0
#define ASR_KV_OFF_VERSION 1
#define ASR_KV_OFF_VTYPE 2
#define ASR_KV_OFF_FLAGS 3
#define ASR_KV_OFF_MAGIC 4
#define ASR_KV_OFF_AUX 8
#define ASR_KV_OFF_KEYLEN 12
#define ASR_KV_OFF_VALLEN 14
#define ASR_KV_OFF_SECRET 16
#define ASR_KV_OFF_KEY 48
#define ASR_KV_OFF_VAL 192
#define ASR_KV_OFF_ID 1152 /* only with ASR_KV_FLAG_ID */

#define ASR_KV_FLAG_ID 0x01

typedef enum {
  ASR_KV_OP_INVALID = 0,
  ASR_KV_OP_SET_ACK = 1,
  ASR_KV_OP_GET_TEXT = 2,
  ASR_KV_OP_GET_BINARY = 3,
  ASR_KV_OP_NOT_FOUND = 5,
  ASR_KV_OP_ERROR = 6,
  ASR_KV_OP_LIST_ENTRY = 7,
  ASR_KV_OP_SET = 16,
  ASR_KV_OP_GET = 17,
  ASR_KV_OP_END = 18,
  ASR_KV_OP_LIST = 19,
  ASR_KV_OP_DEL = 20,
} asr_kv_op_t;

enum { ASR_KV_VTYPE_TEXT = 0, ASR_KV_VTYPE_BINARY = 1 };

/* A decoded view of one frame. The pointers point into the frame buffer it
 * was decoded from (or, for encode, into caller memory). */
typedef struct {
  uint8_t opcode;
  uint8_t vtype;
  uint8_t flags; /* ASR_KV_FLAG_ID or 0 */
  uint32_t id;   /* the request id, with ASR_KV_FLAG_ID (else 0) */
  uint32_t aux;
  uint16_t key_len;
  uint16_t val_len;
  const uint8_t *secret; /* ASR_KV_SECRET_LEN bytes, or NULL for zeros */
  const uint8_t *key;
  const uint8_t *val;
} asr_kv_msg_t;

/* Writes msg into frame (ASR_KV_FRAME_LEN bytes, fully overwritten), with
 * its id when msg->flags has ASR_KV_FLAG_ID. Returns 0, or ASR_ETOOBIG when
 * the key or value does not fit (960 bytes of value with the flag),
 * ASR_EINVAL for an unknown opcode, vtype or flag. */
int asr_kv_frame_encode(uint8_t *frame, const asr_kv_msg_t *msg);

/* Parses frame into msg (pointers into frame). Returns 0 or ASR_EPROTO and,
 * when why is given, a static string saying what was wrong. A frame that
 * has the magic, the version and the ID flag has its id read into *id_out
 * (when given) even when a later check fails, so that a pipelined server
 * can refuse it by id; *id_out is set to 0 otherwise. */
int asr_kv_frame_decode_id(const uint8_t *frame, asr_kv_msg_t *msg, const char **why, int *has_id,
                           uint32_t *id_out);

/* The same, without the id of a refused frame. */
int asr_kv_frame_decode(const uint8_t *frame, asr_kv_msg_t *msg, const char **why);

/* Whether op is a request opcode / a response opcode. */
int asr_kv_op_is_request(int op);
int asr_kv_op_is_response(int op);

/* "SET", "GET_BINARY", ... or "UNKNOWN". */
const char *asr_kv_op_name(int op);

#endif /* ASR_KV_FRAME_H */
