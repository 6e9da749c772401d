/* test_kv_frame.c -- frame codec, keys, secrets and the bounded table. */
#include "config.h"

#include "asr_err.h"
#include "asr_test.h"
#include "kv_frame.h"
#include "kv_keys.h"
#include "kv_secret.h"
#include "kv_table.h"

TEST(frame_layout_constants) {
  ASSERT_EQ(ASR_KV_FRAME_LEN, 1156);
  ASSERT_EQ(ASR_KV_OFF_VAL + ASR_KV_VAL_MAX, ASR_KV_FRAME_LEN);
  ASSERT_EQ(ASR_KV_OFF_KEY + ASR_KV_KEY_CAP, ASR_KV_OFF_VAL);
  ASSERT_EQ(ASR_KV_OFF_SECRET + ASR_KV_SECRET_LEN, ASR_KV_OFF_KEY);
  ASSERT(ASR_KV_VAL_MAX >= 128);
  ASSERT_EQ(ASR_KV_KEY_MAX, 143);
  /* the seed's response opcodes */
  ASSERT_EQ(ASR_KV_OP_SET_ACK, 1);
  ASSERT_EQ(ASR_KV_OP_GET_TEXT, 2);
  ASSERT_EQ(ASR_KV_OP_GET_BINARY, 3);
  ASSERT_EQ(ASR_KV_OP_NOT_FOUND, 5);
  ASSERT_EQ(ASR_KV_OP_ERROR, 6);
}

TEST(frame_roundtrip_every_opcode) {
  static const int ops[] = {ASR_KV_OP_SET_ACK,   ASR_KV_OP_GET_TEXT, ASR_KV_OP_GET_BINARY,
                            ASR_KV_OP_NOT_FOUND, ASR_KV_OP_ERROR,    ASR_KV_OP_LIST_ENTRY,
                            ASR_KV_OP_SET,       ASR_KV_OP_GET,      ASR_KV_OP_END,
                            ASR_KV_OP_LIST,      ASR_KV_OP_DEL};
  uint8_t secret[ASR_KV_SECRET_LEN], key[ASR_KV_KEY_MAX], val[ASR_KV_VAL_MAX];
  for (int i = 0; i < ASR_KV_SECRET_LEN; i++) secret[i] = (uint8_t)(i * 7 + 1);
  for (int i = 0; i < ASR_KV_KEY_MAX; i++) key[i] = (uint8_t)(i % 3 == 0 ? 0 : i); /* zero bytes inside */
  for (int i = 0; i < ASR_KV_VAL_MAX; i++) val[i] = (uint8_t)(i * 13);
  size_t klens[] = {0, 1, 8, 142, 143};
  size_t vlens[] = {0, 1, 128, 963, 964};
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
    for (size_t k = 0; k < 5; k++)
      for (size_t v = 0; v < 5; v++) {
        uint8_t frame[ASR_KV_FRAME_LEN];
        asr_kv_msg_t in = {.opcode = (uint8_t)ops[o],
                           .vtype = (uint8_t)(v & 1),
                           .aux = 0xdeadbeefu - (uint32_t)k,
                           .key_len = (uint16_t)klens[k],
                           .val_len = (uint16_t)vlens[v],
                           .secret = secret,
                           .key = key,
                           .val = val};
        ASSERT_OK(asr_kv_frame_encode(frame, &in));
        asr_kv_msg_t out;
        const char *why = NULL;
        ASSERT_OK(asr_kv_frame_decode(frame, &out, &why));
        ASSERT_EQ(out.opcode, ops[o]);
        ASSERT_EQ(out.vtype, v & 1);
        ASSERT_EQ(out.aux, 0xdeadbeefu - (uint32_t)k);
        ASSERT_EQ(out.key_len, klens[k]);
        ASSERT_EQ(out.val_len, vlens[v]);
        ASSERT_MEMEQ(out.secret, secret, ASR_KV_SECRET_LEN);
        ASSERT_MEMEQ(out.key, key, klens[k]);
        ASSERT_MEMEQ(out.val, val, vlens[v]);
        /* padding is zero */
        for (size_t z = klens[k]; z < ASR_KV_KEY_CAP; z++) ASSERT_EQ(frame[ASR_KV_OFF_KEY + z], 0);
      }
}

TEST(frame_encode_bounds) {
  uint8_t frame[ASR_KV_FRAME_LEN], buf[2000] = {0};
  asr_kv_msg_t m = {.opcode = ASR_KV_OP_SET, .key_len = 144, .key = buf};
  ASSERT_EQ(asr_kv_frame_encode(frame, &m), ASR_ETOOBIG);
  m.key_len = 1;
  m.val_len = 965;
  m.val = buf;
  ASSERT_EQ(asr_kv_frame_encode(frame, &m), ASR_ETOOBIG);
  m.val_len = 0;
  m.opcode = 4; /* not an opcode */
  ASSERT_EQ(asr_kv_frame_encode(frame, &m), ASR_EINVAL);
  m.opcode = ASR_KV_OP_GET;
  m.vtype = 2;
  ASSERT_EQ(asr_kv_frame_encode(frame, &m), ASR_EINVAL);
  m.vtype = 0;
  m.key = NULL;
  ASSERT_EQ(asr_kv_frame_encode(frame, &m), ASR_EINVAL);
  ASSERT_EQ(asr_kv_frame_encode(NULL, &m), ASR_EINVAL);
}

TEST(frame_decode_rejects) {
  uint8_t good[ASR_KV_FRAME_LEN], f[ASR_KV_FRAME_LEN];
  asr_kv_msg_t m = {.opcode = ASR_KV_OP_GET, .key_len = 3, .key = (const uint8_t *)"abc"}, out;
  ASSERT_OK(asr_kv_frame_encode(good, &m));
  const char *why;
  struct {
    int off;
    uint8_t val;
    const char *reason;
  } cases[] = {
      {ASR_KV_OFF_MAGIC, 'X', "magic"},         {ASR_KV_OFF_VERSION, 2, "version"},
      {ASR_KV_OFF_OPCODE, 0, "opcode"},         {ASR_KV_OFF_OPCODE, 4, "opcode"},
      {ASR_KV_OFF_OPCODE, 200, "opcode"},       {ASR_KV_OFF_VTYPE, 9, "value type"},
      {ASR_KV_OFF_FLAGS, 2, "flags"},           {ASR_KV_OFF_KEYLEN, 144, "key length"},
      {ASR_KV_OFF_KEYLEN + 1, 1, "key length"}, {ASR_KV_OFF_VALLEN, 0xc5 /* 965 = 0x3c5 */, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(f, good, sizeof f);
    f[cases[i].off] = cases[i].val;
    if (!cases[i].reason) {
      f[ASR_KV_OFF_VALLEN + 1] = 0x03;
      cases[i].reason = "value length";
    }
    why = NULL;
    ASSERT_EQ(asr_kv_frame_decode(f, &out, &why), ASR_EPROTO);
    ASSERT_CONTAINS(why, cases[i].reason);
  }
  ASSERT_OK(asr_kv_frame_decode(good, &out, &why));
  ASSERT(asr_kv_op_is_request(ASR_KV_OP_LIST));
  ASSERT(!asr_kv_op_is_request(ASR_KV_OP_SET_ACK));
  ASSERT(asr_kv_op_is_response(ASR_KV_OP_NOT_FOUND));
  ASSERT_STREQ(asr_kv_op_name(ASR_KV_OP_GET_BINARY), "GET_BINARY");
}

/* The ID flag: the id sits in the last 4 bytes (little-endian), the value
 * loses them, and a refused frame still tells its id when it has the magic,
 * the version and the flag. */
TEST(frame_id_field) {
  uint8_t f[ASR_KV_FRAME_LEN], v[ASR_KV_VAL_MAX];
  memset(v, 'v', sizeof v);
  asr_kv_msg_t m = {.opcode = ASR_KV_OP_GET,
                    .vtype = 1,
                    .flags = ASR_KV_FLAG_ID,
                    .id = 0xA1B2C3D4u,
                    .key_len = 1,
                    .key = (const uint8_t *)"k",
                    .val_len = ASR_KV_VAL_MAX_ID,
                    .val = v};
  ASSERT_OK(asr_kv_frame_encode(f, &m));
  ASSERT_EQ(ASR_KV_OFF_ID, ASR_KV_FRAME_LEN - 4);
  ASSERT_EQ(f[ASR_KV_OFF_FLAGS], ASR_KV_FLAG_ID);
  ASSERT_EQ(f[ASR_KV_OFF_ID], 0xD4);
  ASSERT_EQ(f[ASR_KV_OFF_ID + 3], 0xA1);
  ASSERT_EQ(f[ASR_KV_OFF_ID - 1], 'v'); /* the value runs up to the id */
  asr_kv_msg_t out;
  const char *why = NULL;
  ASSERT_OK(asr_kv_frame_decode(f, &out, &why));
  ASSERT_EQ(out.id, 0xA1B2C3D4u);
  ASSERT_EQ(out.flags, ASR_KV_FLAG_ID);
  ASSERT_EQ(out.val_len, ASR_KV_VAL_MAX_ID);
  m.val_len = ASR_KV_VAL_MAX_ID + 1; /* the id's bytes are not the value's */
  ASSERT_EQ(asr_kv_frame_encode(f, &m), ASR_ETOOBIG);
  m.flags = 0; /* without the flag the whole field is the value's, and no id is written */
  m.val_len = ASR_KV_VAL_MAX;
  ASSERT_OK(asr_kv_frame_encode(f, &m));
  ASSERT_OK(asr_kv_frame_decode(f, &out, &why));
  ASSERT_EQ(out.id, 0);
  ASSERT_EQ(out.val_len, ASR_KV_VAL_MAX);
  /* a flagged frame claiming 961 bytes is refused, by id */
  m.flags = ASR_KV_FLAG_ID;
  m.val_len = 4;
  ASSERT_OK(asr_kv_frame_encode(f, &m));
  f[ASR_KV_OFF_VALLEN] = 0xc1, f[ASR_KV_OFF_VALLEN + 1] = 0x03; /* 961 */
  int has = 0;
  uint32_t id = 0;
  ASSERT_EQ(asr_kv_frame_decode_id(f, &out, &why, &has, &id), ASR_EPROTO);
  ASSERT_CONTAINS(why, "with an id");
  ASSERT_EQ(has, 1);
  ASSERT_EQ(id, 0xA1B2C3D4u);
  f[ASR_KV_OFF_MAGIC] = 'X'; /* no magic: no id to trust */
  ASSERT_EQ(asr_kv_frame_decode_id(f, &out, &why, &has, &id), ASR_EPROTO);
  ASSERT_EQ(has, 0);
  ASSERT_EQ(id, 0);
  m.flags = 0x02; /* reserved */
  ASSERT_EQ(asr_kv_frame_encode(f, &m), ASR_EINVAL);
}

TEST(handle_key_layout) {
  uint8_t k[ASR_KV_HANDLE_KEY_LEN];
  ASSERT_EQ(asr_kv_handle_key(k, 3, 5, "node2"), 143);
  ASSERT_MEMEQ(k, "handle-", 7);
  static const uint8_t lnc[8] = {3, 0, 0, 0, 5, 0, 0, 0};
  ASSERT_MEMEQ(k + 7, lnc, 8);
  ASSERT_MEMEQ(k + 15, "node2", 5);
  for (int i = 20; i < 143; i++) ASSERT_EQ(k[i], 0);
  uint32_t s, r;
  char host[130];
  ASSERT_OK(asr_kv_handle_key_parse(k, 143, &s, &r, host, sizeof host));
  ASSERT_EQ(s, 3);
  ASSERT_EQ(r, 5);
  ASSERT_STREQ(host, "node2");
  char out[300];
  ASSERT_STREQ(asr_kv_key_render(k, 143, out, sizeof out), "handle-<send 3><recv 5><host node2>");
  ASSERT_EQ(asr_kv_handle_key(k, 128, 0, "h"), ASR_EINVAL);
  ASSERT_EQ(asr_kv_handle_key(k, 0, 0, ""), ASR_EINVAL);
  char longname[200];
  memset(longname, 'a', 128);
  longname[128] = '\0';
  ASSERT_EQ(asr_kv_handle_key(k, 0, 0, longname), ASR_EINVAL);
  longname[127] = '\0';
  ASSERT_EQ(asr_kv_handle_key(k, 127, 127, longname), 143);
  ASSERT_OK(asr_kv_handle_key_parse(k, 143, &s, &r, NULL, 0));
  /* a key with an LNC above 127 is none that asr_kv_handle_key builds: it is
   * not parsed and renders as its bytes (found by tests/fuzz/fuzz_kv_frame.c) */
  ASSERT_EQ(asr_kv_handle_key(k, 3, 5, "node2"), 143);
  k[11] = 128;
  ASSERT_EQ(asr_kv_handle_key_parse(k, 143, &s, &r, host, sizeof host), ASR_EINVAL);
  ASSERT_CONTAINS(asr_kv_key_render(k, 143, out, sizeof out), "handle-\\x03\\x00\\x00\\x00\\x80");
  k[11] = 5;
  k[10] = 1; /* send LNC 3 + 2^24 */
  ASSERT_EQ(asr_kv_handle_key_parse(k, 143, &s, &r, host, sizeof host), ASR_EINVAL);
}

/* Seed §3: the SEND side builds (lnc, peer_lnc, own host), the RECV side
 * (peer_lnc, lnc, peer_host); for a matching pair they are the same bytes. */
TEST(handle_key_send_equals_recv) {
  for (uint32_t send_lnc = 0; send_lnc < 128; send_lnc += 9)
    for (uint32_t recv_lnc = 0; recv_lnc < 128; recv_lnc += 13) {
      uint8_t send_side[143], recv_side[143], swapped[143];
      const char *host = "node-a";
      /* sender: lnc = send_lnc, peer_lnc = recv_lnc, hostname = host */
      ASSERT_EQ(asr_kv_handle_key(send_side, send_lnc, recv_lnc, host), 143);
      /* receiver: lnc = recv_lnc, peer_lnc = send_lnc, peer_hostname = host */
      uint32_t lnc = recv_lnc, peer_lnc = send_lnc;
      ASSERT_EQ(asr_kv_handle_key(recv_side, peer_lnc, lnc, host), 143);
      ASSERT_MEMEQ(send_side, recv_side, 143);
      if (send_lnc != recv_lnc) {
        ASSERT_EQ(asr_kv_handle_key(swapped, recv_lnc, send_lnc, host), 143);
        ASSERT(memcmp(send_side, swapped, 143) != 0);
      }
      uint8_t other_host[143];
      ASSERT_EQ(asr_kv_handle_key(other_host, send_lnc, recv_lnc, "node-b"), 143);
      ASSERT(memcmp(send_side, other_host, 143) != 0);
    }
}

TEST(key_parse_and_render) {
  uint8_t k[ASR_KV_KEY_MAX];
  ASSERT_EQ(asr_kv_key_parse("hostname", k, sizeof k), 8);
  ASSERT_MEMEQ(k, "hostname", 8);
  ASSERT_EQ(asr_kv_key_parse("a\\x00b\\\\", k, sizeof k), 4);
  ASSERT_MEMEQ(k, "a\0b\\", 4);
  ASSERT_EQ(asr_kv_key_parse("handle:1:2:hostX", k, sizeof k), 143);
  char out[300];
  ASSERT_STREQ(asr_kv_key_render(k, 143, out, sizeof out), "handle-<send 1><recv 2><host hostX>");
  ASSERT_EQ(asr_kv_key_parse("handle:1:200:h", k, sizeof k), ASR_EINVAL);
  ASSERT_EQ(asr_kv_key_parse("bad\\xZZ", k, sizeof k), ASR_EINVAL);
  ASSERT_EQ(asr_kv_key_parse("", k, sizeof k), ASR_EINVAL);
  char big[300];
  memset(big, 'k', 144);
  big[144] = '\0';
  ASSERT_EQ(asr_kv_key_parse(big, k, sizeof k), ASR_ETOOBIG);
  ASSERT_STREQ(asr_kv_key_render((const uint8_t *)"a\0b", 3, out, sizeof out), "a\\x00b");
  /* a text that fits its buffer exactly is whole; a longer one is cut
   * between two bytes' renderings (found by tests/fuzz/fuzz_kv_frame.c) */
  ASSERT_STREQ(asr_kv_key_render((const uint8_t *)"a\0b", 3, out, 7), "a\\x00b");
  ASSERT_STREQ(asr_kv_key_render((const uint8_t *)"a\0b", 3, out, 6), "a\\x00");
  ASSERT_STREQ(asr_kv_key_render((const uint8_t *)"a\0b", 3, out, 5), "a");
  ASSERT_STREQ(asr_kv_key_render((const uint8_t *)"hostname", 8, out, 9), "hostname");
  /* a text key that starts "handle:" renders so that it parses back as
   * itself, not as a handle key spec (found by tests/fuzz/fuzz_kv_frame.c) */
  ASSERT_STREQ(asr_kv_key_render((const uint8_t *)"handle:1:2:h", 12, out, sizeof out), "\\x68andle:1:2:h");
  ASSERT_EQ(asr_kv_key_parse(out, k, sizeof k), 12);
  ASSERT_MEMEQ(k, "handle:1:2:h", 12);
  ASSERT_STREQ(asr_kv_key_render((const uint8_t *)"handle:1:2:h", 12, out, 5), "\\x68");
  ASSERT_STREQ(asr_kv_key_render((const uint8_t *)"handle:1:2:h", 12, out, 4), "");
  ASSERT_STREQ(asr_kv_key_render((const uint8_t *)"handle", 6, out, sizeof out), "handle");
  uint8_t zeros[ASR_KV_KEY_MAX] = {0};
  char text[ASR_KV_KEY_TEXT_MAX];
  asr_kv_key_render(zeros, sizeof zeros, text, sizeof text);
  ASSERT_EQ(strlen(text), sizeof text - 1);
  ASSERT_EQ(asr_kv_key_parse(text, k, sizeof k), ASR_KV_KEY_MAX);
  ASSERT_MEMEQ(k, zeros, sizeof zeros);
  uint8_t v[128] = "node1";
  ASSERT_STREQ(asr_kv_value_render(v, 128, out, sizeof out), "node1 (zero-padded)");
  uint8_t bin[3] = {1, 2, 0xff};
  ASSERT_STREQ(asr_kv_value_render(bin, 3, out, sizeof out), "3 bytes: 0102ff");
}

TEST(secret_hex) {
  uint8_t s[32], t[32];
  char hex[65];
  ASSERT_OK(asr_kv_secret_generate(s));
  asr_kv_secret_to_hex(s, hex);
  ASSERT_EQ(strlen(hex), 64);
  ASSERT_OK(asr_kv_secret_from_hex(hex, t));
  ASSERT_MEMEQ(s, t, 32);
  ASSERT(asr_kv_secret_equal(s, t));
  t[31] ^= 1;
  ASSERT(!asr_kv_secret_equal(s, t));
  ASSERT_EQ(asr_kv_secret_from_hex("abc", t), ASR_EINVAL);
  hex[5] = 'g';
  ASSERT_EQ(asr_kv_secret_from_hex(hex, t), ASR_EINVAL);
  char err[256];
  setenv("ASR_JOB_SECRET", "nothex", 1);
  ASSERT_EQ(asr_kv_secret_from_env(t, err, sizeof err), ASR_ECONFIG);
  ASSERT_STREQ(err,
               "ASR_JOB_SECRET: the value (6 characters) is not 64 hex digits; unset it or copy it from the "
               "job's launcher");
  unsetenv("ASR_JOB_SECRET");
  ASSERT_OK(asr_kv_secret_from_env(t, err, sizeof err));
  uint8_t zero[32] = {0};
  ASSERT_MEMEQ(t, zero, 32);
}

TEST(table_bounds_and_order) {
  asr_kv_table_t t;
  asr_kv_table_init(&t, 100, 100000);
  uint8_t key[16], val[964];
  memset(val, 0xab, sizeof val);
  for (int i = 0; i < 100; i++) {
    int n = snprintf((char *)key, sizeof key, "k%d", i);
    key[n] = 0; /* include a zero byte in the key */
    ASSERT_OK(asr_kv_table_set(&t, key, (size_t)n + 1, val, (size_t)i, i & 1));
  }
  ASSERT_EQ(t.count, 100);
  ASSERT_EQ(asr_kv_table_set(&t, (const uint8_t *)"new", 3, val, 1, 0), ASR_ENOSPACE);
  /* overwrite is not a new key */
  ASSERT_OK(asr_kv_table_set(&t, (const uint8_t *)"k5\0", 3, val, 900, 1));
  const asr_kv_entry_t *e = asr_kv_table_get(&t, (const uint8_t *)"k5\0", 3);
  ASSERT(e && e->vlen == 900);
  ASSERT(asr_kv_table_get(&t, (const uint8_t *)"k5", 2) == NULL); /* length matters */
  ASSERT_STREQ((const char *)asr_kv_table_at(&t, 7)->key, "k7");
  ASSERT(asr_kv_table_at(&t, 100) == NULL);
  asr_kv_table_fini(&t);
  /* byte limit */
  asr_kv_table_init(&t, 1000, 2000);
  ASSERT_OK(asr_kv_table_set(&t, (const uint8_t *)"a", 1, val, 964, 1));
  ASSERT_OK(asr_kv_table_set(&t, (const uint8_t *)"b", 1, val, 964, 1));
  ASSERT_EQ(asr_kv_table_set(&t, (const uint8_t *)"c", 1, val, 964, 1), ASR_ENOSPACE);
  ASSERT_EQ(t.count, 2);
  ASSERT_EQ(t.bytes, 2 * 965);
  asr_kv_table_fini(&t);
}

/* DEL removes a key, its bytes and nothing else: the others keep their
 * insertion order and are all still found (the index is built again), the
 * key can be set again (at the end), and a missing key is ASR_ENOTFOUND. */
TEST(table_delete) {
  asr_kv_table_t t;
  asr_kv_table_init(&t, 1000, 1 << 20);
  uint8_t key[16];
  for (int i = 0; i < 300; i++) {
    int n = snprintf((char *)key, sizeof key, "k%d", i);
    ASSERT_OK(asr_kv_table_set(&t, key, (size_t)n, key, (size_t)n, 1));
  }
  size_t bytes = t.bytes;
  ASSERT_OK(asr_kv_table_del(&t, (const uint8_t *)"k17", 3));
  ASSERT_EQ(t.count, 299);
  ASSERT_EQ(t.bytes, bytes - 6);
  ASSERT(asr_kv_table_get(&t, (const uint8_t *)"k17", 3) == NULL);
  ASSERT_EQ(asr_kv_table_del(&t, (const uint8_t *)"k17", 3), ASR_ENOTFOUND);
  ASSERT_EQ(asr_kv_table_del(&t, (const uint8_t *)"", 0), ASR_EINVAL);
  for (int i = 0, at = 0; i < 300; i++) {
    if (i == 17) continue;
    int n = snprintf((char *)key, sizeof key, "k%d", i);
    const asr_kv_entry_t *e = asr_kv_table_get(&t, key, (size_t)n);
    ASSERT_MSG(e && e->vlen == (size_t)n && memcmp(e->val, key, (size_t)n) == 0, "k%d after a delete", i);
    ASSERT(asr_kv_table_at(&t, (size_t)at++) == e); /* order kept */
  }
  ASSERT_OK(asr_kv_table_set(&t, (const uint8_t *)"k17", 3, (const uint8_t *)"x", 1, 0));
  ASSERT_EQ(t.count, 300);
  ASSERT(asr_kv_table_at(&t, 299) == asr_kv_table_get(&t, (const uint8_t *)"k17", 3));
  asr_kv_table_fini(&t);
}

TEST(table_many_keys) {
  asr_kv_table_t t;
  asr_kv_table_init(&t, 100000, 64u << 20);
  for (uint32_t i = 0; i < 50000; i++) {
    uint8_t k[143];
    ASSERT_EQ(asr_kv_handle_key(k, i % 128, (i / 128) % 128, i < 16384 ? "ha" : "hb"), 143);
    ASSERT_OK(asr_kv_table_set(&t, k, 143, (const uint8_t *)&i, 4, 1));
  }
  ASSERT_EQ(t.count, 2 * 16384);
  for (uint32_t i = 0; i < 16384; i++) {
    uint8_t k[143];
    asr_kv_handle_key(k, i % 128, (i / 128) % 128, "ha");
    const asr_kv_entry_t *e = asr_kv_table_get(&t, k, 143);
    ASSERT(e);
    uint32_t v;
    memcpy(&v, e->val, 4);
    ASSERT_EQ(v, i);
  }
  asr_kv_table_fini(&t);
}
