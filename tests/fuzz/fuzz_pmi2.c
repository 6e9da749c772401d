/*
 * fuzz_pmi2.c -- libFuzzer target for the PMI-2 wire protocol
 * (launcher/asrd/pmi/pmi2_wire.c): the frames asrd reads from every rank's PMI_FD
 * once the rank asked for PMI-2, which any program a user runs can send.
 *
 * The input is a byte stream as one connection carries it, fed to the
 * frame assembler in pieces whose sizes the first byte picks. For each
 * frame:
 *  - the assembler took at least one byte per call (or stopped for good at
 *    a length field that is not a number) and a frame is at most
 *    ASR_PMI2_CMD_MAX bytes;
 *  - a frame that parses names a command of the table as its first pair;
 *    every key is 1..64 bytes without '=' or ';' and every value at most
 *    1024 bytes;
 *  - written back as a reply (every pair, escaped), it parses back to the
 *    same pairs, and its length field is its length;
 *  - a frame that does not parse says why, and its failure reply (as asrd
 *    sends it) parses back with rc=-1 and errmsg.
 */
#include "config.h"

#include <string.h>

#include "asr_buf.h"
#include "asr_err.h"
#include "fuzz.h"
#include "pmi2_wire.h"

static asr_pmi2_reader_t rd; /* big: not on the stack */
static char copy[2 * ASR_PMI2_CMD_MAX + 64];

/* Parses the one reply frame in b back into m (copy holds its body). */
static void reparse(const asr_buf_t *b, asr_pmi2_msg_t *m) {
  FUZZ_ASSERT(b->len >= ASR_PMI2_LEN_SIZE, "a reply has its length field");
  char field[ASR_PMI2_LEN_SIZE + 1];
  memcpy(field, b->data, ASR_PMI2_LEN_SIZE);
  field[ASR_PMI2_LEN_SIZE] = '\0';
  size_t body = b->len - ASR_PMI2_LEN_SIZE;
  FUZZ_ASSERT((size_t)atol(field) == body, "the length field says %s for %zu bytes", field, body);
  FUZZ_ASSERT(body <= ASR_PMI2_CMD_MAX && body < sizeof copy, "a reply of %zu bytes", body);
  memcpy(copy, b->data + ASR_PMI2_LEN_SIZE, body);
  char why[96];
  int rc = asr_pmi2_parse(copy, body, m, why, sizeof why);
  /* "error" and the replies are no commands of the table: they parse as unknown */
  FUZZ_ASSERT(rc == 0 || rc == ASR_ENOSYS, "a reply parses back (%s)", why);
}

static void one_frame(char *body, size_t len, int too_long) {
  FUZZ_ASSERT(len <= ASR_PMI2_CMD_MAX, "frame of %zu bytes", len);
  asr_pmi2_msg_t m;
  char why[96] = "";
  int rc = too_long ? ASR_EPROTO : asr_pmi2_parse(body, len, &m, why, sizeof why);
  int cmd = too_long ? asr_pmi2_cmd_of_prefix(body, len) : m.cmd;
  asr_buf_t b = {0};
  if (rc == 0) {
    FUZZ_ASSERT(m.cmd > ASR_PMI2_INVALID && m.cmd < ASR_PMI2__COUNT, "command %d", m.cmd);
    FUZZ_ASSERT(m.nattrs >= 1 && m.nattrs <= ASR_PMI2_ATTRS_MAX, "nattrs %d", m.nattrs);
    FUZZ_ASSERT(strcmp(m.attrs[0].val, asr_pmi2_cmd_name(m.cmd)) == 0, "the first pair names the command");
    const char *kv[2 * ASR_PMI2_ATTRS_MAX + 1];
    int k = 0;
    for (int i = 1; i < m.nattrs; i++) {
      size_t kl = strlen(m.attrs[i].key);
      FUZZ_ASSERT(kl >= 1 && kl <= ASR_PMI2_KEY_MAX, "a key of %zu bytes", kl);
      FUZZ_ASSERT(!strchr(m.attrs[i].key, '=') && !strchr(m.attrs[i].key, ';'), "key '%s'", m.attrs[i].key);
      FUZZ_ASSERT(strlen(m.attrs[i].val) <= ASR_PMI2_VAL_MAX, "a value over the bound");
      kv[k++] = m.attrs[i].key;
      kv[k++] = m.attrs[i].val;
    }
    kv[k] = NULL;
    /* the pairs written back (escaped) and parsed again are the same */
    int wrc = asr_pmi2_reply(&b, asr_pmi2_cmd_name(m.cmd), kv);
    FUZZ_ASSERT(wrc == 0 || wrc == ASR_ETOOBIG, "reply: %d", wrc);
    if (wrc == 0) {
      asr_pmi2_msg_t back;
      reparse(&b, &back);
      FUZZ_ASSERT(back.cmd == m.cmd && back.nattrs == m.nattrs, "the reply's pairs: %d of %d", back.nattrs,
                  m.nattrs);
      for (int i = 1; i < m.nattrs; i++)
        FUZZ_ASSERT(!strcmp(back.attrs[i].key, m.attrs[i].key) && !strcmp(back.attrs[i].val, m.attrs[i].val),
                    "pair %d changed on the way back", i);
    } else {
      FUZZ_ASSERT(b.len == 0, "a reply too big left bytes behind");
    }
    asr_buf_free(&b);
  } else if (!too_long) {
    FUZZ_ASSERT(rc == ASR_EPROTO || rc == ASR_ENOSYS, "parse returned %d", rc);
    FUZZ_ASSERT(why[0], "a failure without a reason");
  }
  FUZZ_ASSERT(asr_pmi2_reply_fail(&b, rc == 0 ? m.cmd : cmd, why) == 0, "failure reply");
  asr_pmi2_msg_t f;
  reparse(&b, &f);
  const char *v = asr_pmi2_get(&f, "rc");
  FUZZ_ASSERT(v && strcmp(v, "-1") == 0, "a failure says rc=-1");
  FUZZ_ASSERT(asr_pmi2_get(&f, "errmsg") != NULL, "a failure says why");
  asr_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  memset(&rd, 0, sizeof rd);
  if (size == 0) return 0;
  size_t piece = (size_t)data[0] * 37 + 1; /* 1 .. 9436 bytes at a time */
  data++, size--;
  for (size_t off = 0; off < size;) {
    size_t n = size - off < piece ? size - off : piece;
    size_t used = 0;
    while (used < n) {
      size_t took, len;
      asr_pmi2_feed_t f = asr_pmi2_reader_feed(&rd, data + off + used, n - used, &took, &len);
      FUZZ_ASSERT(took <= n - used, "the reader took %zu of %zu", took, n - used);
      if (f == ASR_PMI2_BAD_LENGTH) {
        size_t t2, l2;
        FUZZ_ASSERT(asr_pmi2_reader_feed(&rd, data, size, &t2, &l2) == ASR_PMI2_BAD_LENGTH && t2 == 0,
                    "the reader goes on after a bad length field");
        return 0;
      }
      FUZZ_ASSERT(took > 0, "the reader took nothing");
      used += took;
      if (f == ASR_PMI2_FRAME || f == ASR_PMI2_TOO_LONG) one_frame(rd.body, len, f == ASR_PMI2_TOO_LONG);
    }
    off += n;
  }
  return 0;
}
