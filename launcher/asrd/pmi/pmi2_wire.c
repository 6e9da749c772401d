/*
 * pmi2_wire.c -- the PMI-2 wire protocol: the command table, the frame
 * assembler, the parser and the reply writer (pmi2_wire.h).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "asr_err.h"
#include "pmi2_wire.h"

static const char *const cmd_names[ASR_PMI2__COUNT] = {
#define NAME_ROW(e, name, reply) [ASR_PMI2_##e] = name,
    ASR_PMI2_COMMANDS(NAME_ROW)
#undef NAME_ROW
};

static const char *const reply_names[ASR_PMI2__COUNT] = {
#define REPLY_ROW(e, name, reply) [ASR_PMI2_##e] = reply,
    ASR_PMI2_COMMANDS(REPLY_ROW)
#undef REPLY_ROW
};

const char *asr_pmi2_cmd_name(int cmd) { return cmd > 0 && cmd < ASR_PMI2__COUNT ? cmd_names[cmd] : NULL; }

const char *asr_pmi2_reply_name(int cmd) {
  return cmd > 0 && cmd < ASR_PMI2__COUNT ? reply_names[cmd] : NULL;
}

asr_pmi2_cmd_t asr_pmi2_cmd_find(const char *name, size_t len) {
  for (int c = 1; c < ASR_PMI2__COUNT; c++)
    if (strlen(cmd_names[c]) == len && memcmp(cmd_names[c], name, len) == 0) return (asr_pmi2_cmd_t)c;
  return ASR_PMI2_INVALID;
}

static int fail(int rc, char *why, size_t whylen, const char *msg) {
  if (whylen) snprintf(why, whylen, "%s", msg);
  return rc;
}

int asr_pmi2_parse(char *body, size_t len, asr_pmi2_msg_t *m, char *why, size_t whylen) {
  memset(m, 0, sizeof *m);
  body[len] = '\0';
  if (memchr(body, '\0', len)) return fail(ASR_EPROTO, why, whylen, "a NUL byte in the command");
  /* Each pair is "key=value;": the key runs to its '=', the value to the
   * first ';' that is not doubled; the doubled ones are made single in
   * place (the value only shrinks). */
  size_t i = 0;
  while (i < len) {
    char *key = body + i;
    while (i < len && body[i] != '=' && body[i] != ';') i++;
    if (i == len || body[i] == ';') return fail(ASR_EPROTO, why, whylen, "a pair without '='");
    size_t klen = (size_t)(body + i - key);
    if (klen == 0) return fail(ASR_EPROTO, why, whylen, "a pair with an empty key");
    if (klen > ASR_PMI2_KEY_MAX) return fail(ASR_EPROTO, why, whylen, "a key longer than 64 bytes");
    body[i++] = '\0';
    char *val = body + i, *w = val;
    for (;;) {
      if (i == len) return fail(ASR_EPROTO, why, whylen, "a value without its ';'");
      if (body[i] == ';') {
        if (i + 1 < len && body[i + 1] == ';') {
          *w++ = ';';
          i += 2;
          continue;
        }
        break;
      }
      *w++ = body[i++];
    }
    i++; /* the ';' */
    if ((size_t)(w - val) > ASR_PMI2_VAL_MAX)
      return fail(ASR_EPROTO, why, whylen, "a value longer than 1024 bytes");
    *w = '\0';
    if (m->nattrs == ASR_PMI2_ATTRS_MAX) return fail(ASR_EPROTO, why, whylen, "too many pairs");
    m->attrs[m->nattrs].key = key;
    m->attrs[m->nattrs].val = val;
    m->nattrs++;
  }
  if (m->nattrs == 0 || strcmp(m->attrs[0].key, "cmd") != 0)
    return fail(ASR_EPROTO, why, whylen, "not a command (no cmd= first)");
  const char *name = m->attrs[0].val;
  m->cmd = asr_pmi2_cmd_find(name, strlen(name));
  if (m->cmd == ASR_PMI2_INVALID) return fail(ASR_ENOSYS, why, whylen, "unknown command");
  return 0;
}

const char *asr_pmi2_get(const asr_pmi2_msg_t *m, const char *key) {
  for (int i = 1; i < m->nattrs; i++)
    if (strcmp(m->attrs[i].key, key) == 0) return m->attrs[i].val;
  return NULL;
}

asr_pmi2_cmd_t asr_pmi2_cmd_of_prefix(const char *body, size_t len) {
  if (len < 4 || memcmp(body, "cmd=", 4) != 0) return ASR_PMI2_INVALID;
  const char *name = body + 4, *end = memchr(name, ';', len - 4);
  return end ? asr_pmi2_cmd_find(name, (size_t)(end - name)) : ASR_PMI2_INVALID;
}

/* Appends key=value; with value's ';' doubled. */
static int put_pair(asr_buf_t *b, const char *key, const char *val) {
  if (asr_buf_put(b, key, strlen(key)) || asr_buf_put(b, "=", 1)) return ASR_ENOMEM;
  for (const char *p = val; *p; p++) {
    const char *semi = strchr(p, ';');
    size_t run = semi ? (size_t)(semi - p) : strlen(p);
    if (asr_buf_put(b, p, run)) return ASR_ENOMEM;
    p += run;
    if (!semi) break;
    if (asr_buf_put(b, ";;", 2)) return ASR_ENOMEM;
  }
  return asr_buf_put(b, ";", 1) ? ASR_ENOMEM : 0;
}

int asr_pmi2_reply(asr_buf_t *b, const char *reply, const char *const *kv) {
  size_t start = b->len;
  int rc = asr_buf_put(b, "      ", ASR_PMI2_LEN_SIZE) ? ASR_ENOMEM : put_pair(b, "cmd", reply);
  for (; !rc && kv && kv[0]; kv += 2) rc = put_pair(b, kv[0], kv[1] ? kv[1] : "");
  size_t body = b->len - start - ASR_PMI2_LEN_SIZE;
  if (!rc && body > ASR_PMI2_CMD_MAX) rc = ASR_ETOOBIG;
  if (rc) {
    b->len = start;
    return rc;
  }
  char field[ASR_PMI2_LEN_SIZE + 1];
  snprintf(field, sizeof field, "%-6zu", body);
  memcpy(b->data + start, field, ASR_PMI2_LEN_SIZE);
  return 0;
}

int asr_pmi2_reply_fail(asr_buf_t *b, int cmd, const char *why) {
  const char *reply = asr_pmi2_reply_name(cmd);
  char msg[256];
  snprintf(msg, sizeof msg, "%s", why && *why ? why : "failed");
  const char *kv[] = {"rc", "-1", "errmsg", msg, NULL};
  return asr_pmi2_reply(b, reply ? reply : "error", kv);
}

/* The length field's value: digits, then spaces only ("%-6d"; leading
 * spaces too, as atoi would take them). ASR_EPROTO when it is not a number. */
static long field_value(const char *f) {
  size_t i = 0;
  while (i < ASR_PMI2_LEN_SIZE && f[i] == ' ') i++;
  if (i == ASR_PMI2_LEN_SIZE || f[i] < '0' || f[i] > '9') return ASR_EPROTO;
  long v = 0;
  while (i < ASR_PMI2_LEN_SIZE && f[i] >= '0' && f[i] <= '9') v = v * 10 + (f[i++] - '0');
  while (i < ASR_PMI2_LEN_SIZE && f[i] == ' ') i++;
  return i == ASR_PMI2_LEN_SIZE ? v : ASR_EPROTO;
}

asr_pmi2_feed_t asr_pmi2_reader_feed(asr_pmi2_reader_t *r, const uint8_t *p, size_t n, size_t *taken,
                                     size_t *len) {
  size_t used = 0;
  *len = 0;
  if (r->len_got == ASR_PMI2_LEN_SIZE + 1) { /* after a bad length field */
    *taken = 0;
    return ASR_PMI2_BAD_LENGTH;
  }
  if (r->len_got < ASR_PMI2_LEN_SIZE) {
    size_t k = ASR_PMI2_LEN_SIZE - r->len_got;
    if (k > n) k = n;
    memcpy(r->len_field + r->len_got, p, k);
    r->len_got += k;
    used += k;
    if (r->len_got < ASR_PMI2_LEN_SIZE) {
      *taken = used;
      return ASR_PMI2_MORE;
    }
    long v = field_value(r->len_field);
    if (v < 0) {
      r->len_got = ASR_PMI2_LEN_SIZE + 1;
      *taken = used;
      return ASR_PMI2_BAD_LENGTH;
    }
    r->need = (size_t)v;
    r->got = 0;
  }
  size_t k = r->need - r->got;
  if (k > n - used) k = n - used;
  if (r->got < ASR_PMI2_CMD_MAX) { /* keep what fits; the rest is only counted */
    size_t keep = ASR_PMI2_CMD_MAX - r->got < k ? ASR_PMI2_CMD_MAX - r->got : k;
    memcpy(r->body + r->got, p + used, keep);
  }
  r->got += k;
  used += k;
  *taken = used;
  if (r->got < r->need) return ASR_PMI2_MORE;
  r->len_got = 0; /* the next frame starts with its length field */
  if (r->need > ASR_PMI2_CMD_MAX) {
    *len = ASR_PMI2_CMD_MAX;
    return ASR_PMI2_TOO_LONG;
  }
  *len = r->need;
  return ASR_PMI2_FRAME;
}
