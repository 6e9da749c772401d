/*
 * fuzz_pmi.c -- libFuzzer target for the simple PMI-1 wire protocol
 * (launcher/asrd/pmi/pmi_wire.c): the bytes asrd reads from every rank's PMI_FD,
 * which any program a user runs can send.
 *
 * The input is a byte stream as one connection carries it, fed to the line
 * assembler in pieces whose sizes the first byte picks. For each line:
 *  - it is at most ASR_PMI_LINE_MAX bytes, with no newline inside;
 *  - a line that parses names a command of the table, as its first pair,
 *    and every pair has a key that is non-empty, without '=' or a space;
 *  - a line that does not parse says why, and its failure reply (as asrd
 *    sends it, for the command or as "cmd=error") is one line that parses
 *    back, with rc=-1;
 *  - values asr_pmi_word_ok accepts are words: no space, no control byte.
 */
#include "config.h"

#include <string.h>

#include "asr_buf.h"
#include "asr_err.h"
#include "fuzz.h"
#include "pmi_wire.h"

static asr_pmi_reader_t rd; /* big: not on the stack */

static void check_reply_line(const asr_buf_t *b) {
  FUZZ_ASSERT(b->len >= 2 && b->data[b->len - 1] == '\n', "a reply ends with its newline");
  FUZZ_ASSERT(memchr(b->data, '\n', b->len - 1) == NULL, "a reply is one line");
  static char copy[4096];
  FUZZ_ASSERT(b->len < sizeof copy, "a failure reply is short");
  memcpy(copy, b->data, b->len - 1);
  asr_pmi_msg_t m;
  char why[96];
  int rc = asr_pmi_parse(copy, b->len - 1, &m, why, sizeof why);
  /* "cmd=error" is no command of the table: it parses as unknown */
  FUZZ_ASSERT(rc == 0 || rc == ASR_ENOSYS, "a reply parses back (%s)", why);
  const char *v = asr_pmi_get(&m, "rc");
  FUZZ_ASSERT(v && strcmp(v, "-1") == 0, "a failure says rc=-1");
  FUZZ_ASSERT(asr_pmi_get(&m, "msg") != NULL, "a failure says why");
}

static void one_line(char *line, size_t len, int too_long) {
  FUZZ_ASSERT(len <= ASR_PMI_LINE_MAX, "line of %zu bytes", len);
  FUZZ_ASSERT(memchr(line, '\n', len) == NULL, "a newline inside a line");
  if (too_long && len > 64) len = 64;
  asr_pmi_msg_t m;
  char why[96] = "";
  int rc = asr_pmi_parse(line, len, &m, why, sizeof why);
  if (rc == 0) {
    FUZZ_ASSERT(m.cmd > ASR_PMI_INVALID && m.cmd < ASR_PMI__COUNT, "command %d", m.cmd);
    FUZZ_ASSERT(m.nattrs >= 1 && m.nattrs <= ASR_PMI_ATTRS_MAX, "nattrs %d", m.nattrs);
    FUZZ_ASSERT(strcmp(m.attrs[0].val, asr_pmi_cmd_name(m.cmd)) == 0, "the first pair names the command");
    FUZZ_ASSERT(m.multi == (m.cmd == ASR_PMI_SPAWN), "only spawn is a multi-line command");
    for (int i = 0; i < m.nattrs; i++) {
      FUZZ_ASSERT(m.attrs[i].key[0] && !strchr(m.attrs[i].key, '=') && !strchr(m.attrs[i].key, ' '), "key");
      if (asr_pmi_word_ok(m.attrs[i].val, ASR_PMI_VAL_MAX))
        for (const char *p = m.attrs[i].val; *p; p++)
          FUZZ_ASSERT((unsigned char)*p > 0x20 && (unsigned char)*p != 0x7f, "a word with a space");
    }
  } else {
    FUZZ_ASSERT(rc == ASR_EPROTO || rc == ASR_ENOSYS, "parse returned %d", rc);
    FUZZ_ASSERT(why[0], "a failure without a reason");
  }
  asr_buf_t b = {0};
  FUZZ_ASSERT(asr_pmi_reply_fail(&b, rc == 0 && !too_long ? m.cmd : ASR_PMI_INVALID, why) == 0, "reply");
  check_reply_line(&b);
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
      long ll;
      int too_long;
      size_t took = asr_pmi_reader_feed(&rd, data + off + used, n - used, &ll, &too_long);
      FUZZ_ASSERT(took > 0 && took <= n - used, "the reader took %zu of %zu", took, n - used);
      used += took;
      if (ll >= 0) one_line(rd.line, (size_t)ll, too_long);
    }
    off += n;
  }
  return 0;
}
