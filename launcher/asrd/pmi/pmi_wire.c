/*
 * pmi_wire.c -- the simple PMI-1 wire protocol: the command table, the
 * parser, the reply writer and the line assembler (pmi_wire.h).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "asr_err.h"
#include "pmi_wire.h"

static const char *const cmd_names[ASR_PMI__COUNT] = {
#define NAME_ROW(e, name, reply) [ASR_PMI_##e] = name,
    ASR_PMI_COMMANDS(NAME_ROW)
#undef NAME_ROW
};

static const char *const reply_names[ASR_PMI__COUNT] = {
#define REPLY_ROW(e, name, reply) [ASR_PMI_##e] = reply,
    ASR_PMI_COMMANDS(REPLY_ROW)
#undef REPLY_ROW
};

const char *asr_pmi_cmd_name(int cmd) { return cmd > 0 && cmd < ASR_PMI__COUNT ? cmd_names[cmd] : NULL; }

const char *asr_pmi_reply_name(int cmd) { return cmd > 0 && cmd < ASR_PMI__COUNT ? reply_names[cmd] : NULL; }

asr_pmi_cmd_t asr_pmi_cmd_find(const char *name, size_t len) {
  for (int c = 1; c < ASR_PMI__COUNT; c++)
    if (strlen(cmd_names[c]) == len && memcmp(cmd_names[c], name, len) == 0) return (asr_pmi_cmd_t)c;
  return ASR_PMI_INVALID;
}

/* why gets msg, a word (letters, digits, '_'). */
static int fail(int rc, char *why, size_t whylen, const char *msg) {
  if (whylen) snprintf(why, whylen, "%s", msg);
  return rc;
}

int asr_pmi_parse(char *line, size_t len, asr_pmi_msg_t *m, char *why, size_t whylen) {
  memset(m, 0, sizeof *m);
  line[len] = '\0';
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)line[i];
    if (c < 0x20 || c == 0x7f) return fail(ASR_EPROTO, why, whylen, "control_byte_in_command");
  }
  /* Cut into tokens at spaces; each "key=value" is a pair, and a token
   * without '=' goes on the value before it (with its space). */
  char *p = line;
  char *prev_end = NULL; /* the NUL that ends the last pair's value */
  while (*p) {
    while (*p == ' ') p++;
    if (!*p) break;
    char *tok = p;
    while (*p && *p != ' ') p++;
    char *end = p;
    if (*p) *p++ = '\0';
    char *eq = strchr(tok, '=');
    if (eq == tok) return fail(ASR_EPROTO, why, whylen, "a_token_starts_with_=");
    if (!eq) {
      if (!prev_end) return fail(ASR_EPROTO, why, whylen, "not_a_command_(no_cmd=)");
      /* rejoin: the value before runs on through this token */
      memmove(prev_end + 1, tok, (size_t)(end - tok) + 1);
      *prev_end = ' ';
      prev_end = prev_end + 1 + (end - tok);
      continue;
    }
    if (m->nattrs == ASR_PMI_ATTRS_MAX) return fail(ASR_EPROTO, why, whylen, "too_many_attributes");
    *eq = '\0';
    m->attrs[m->nattrs].key = tok;
    m->attrs[m->nattrs].val = eq + 1;
    m->nattrs++;
    prev_end = end;
  }
  if (m->nattrs == 0 || (strcmp(m->attrs[0].key, "cmd") != 0 && strcmp(m->attrs[0].key, "mcmd") != 0))
    return fail(ASR_EPROTO, why, whylen, "not_a_command_(no_cmd=)");
  m->multi = m->attrs[0].key[0] == 'm';
  const char *name = m->attrs[0].val;
  m->cmd = asr_pmi_cmd_find(name, strlen(name));
  if (m->cmd == ASR_PMI_INVALID) return fail(ASR_ENOSYS, why, whylen, "unknown_command");
  /* only spawn comes as several lines, and it only so */
  if (m->multi != (m->cmd == ASR_PMI_SPAWN)) {
    m->cmd = ASR_PMI_INVALID;
    return fail(ASR_EPROTO, why, whylen, "cmd=_and_mcmd=_mixed_up");
  }
  return 0;
}

const char *asr_pmi_get(const asr_pmi_msg_t *m, const char *key) {
  for (int i = 1; i < m->nattrs; i++)
    if (strcmp(m->attrs[i].key, key) == 0) return m->attrs[i].val;
  return NULL;
}

int asr_pmi_word_ok(const char *s, size_t max) {
  size_t n = 0;
  if (!s || !*s || *s == '=') return 0;
  for (; s[n]; n++) {
    unsigned char c = (unsigned char)s[n];
    if (c <= 0x20 || c == 0x7f || n >= max) return 0;
  }
  return 1;
}

int asr_pmi_reply_start(asr_buf_t *b, const char *reply) {
  return asr_buf_put(b, "cmd=", 4) || asr_buf_put(b, reply, strlen(reply)) ? ASR_ENOMEM : 0;
}

int asr_pmi_reply_attr(asr_buf_t *b, const char *key, const char *val) {
  if (asr_buf_put(b, " ", 1) || asr_buf_put(b, key, strlen(key)) || asr_buf_put(b, "=", 1) ||
      asr_buf_put(b, val, strlen(val)))
    return ASR_ENOMEM;
  return 0;
}

int asr_pmi_reply_int(asr_buf_t *b, const char *key, long val) {
  char num[24];
  snprintf(num, sizeof num, "%ld", val);
  return asr_pmi_reply_attr(b, key, num);
}

int asr_pmi_reply_end(asr_buf_t *b) { return asr_buf_put(b, "\n", 1) ? ASR_ENOMEM : 0; }

int asr_pmi_reply_fail(asr_buf_t *b, int cmd, const char *why) {
  const char *reply = asr_pmi_reply_name(cmd);
  char word[128];
  size_t n = 0;
  for (; why && why[n] && n < sizeof word - 1; n++) {
    unsigned char c = (unsigned char)why[n];
    word[n] = c > 0x20 && c < 0x7f && c != '=' ? (char)c : '_';
  }
  word[n] = '\0';
  if (!n) snprintf(word, sizeof word, "failed");
  if (asr_pmi_reply_start(b, reply ? reply : "error") || asr_pmi_reply_attr(b, "rc", "-1") ||
      asr_pmi_reply_attr(b, "msg", word) || asr_pmi_reply_end(b))
    return ASR_ENOMEM;
  return 0;
}

size_t asr_pmi_reader_feed(asr_pmi_reader_t *r, const uint8_t *p, size_t n, long *line_len, int *too_long) {
  *line_len = -1;
  *too_long = 0;
  const uint8_t *nl = n ? memchr(p, '\n', n) : NULL;
  size_t take = nl ? (size_t)(nl - p) : n; /* the bytes before the newline */
  /* keep what fits; past the bound the line is only dropped */
  size_t room = ASR_PMI_LINE_MAX - r->len;
  if (!r->dropping && take > room) r->dropping = 1;
  size_t keep = take < room ? take : room;
  memcpy(r->line + r->len, p, keep);
  r->len += keep;
  if (!nl) return n;
  /* a whole line (a "\r\n" ending loses its '\r') */
  size_t len = r->len;
  if (!r->dropping && len && r->line[len - 1] == '\r') len--;
  *line_len = (long)len;
  *too_long = r->dropping;
  r->len = 0;
  r->dropping = 0;
  return take + 1;
}
