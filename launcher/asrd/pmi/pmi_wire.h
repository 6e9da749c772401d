/*
 * pmi_wire.h -- the simple PMI-1 wire protocol, as MPICH's simple PMI
 * client (src/pmi/simple/simple_pmi.c, what Debian's libmpich.so.12 of
 * MPICH 4.0 speaks) and Hydra's proxy (src/pm/hydra, pmip_pmi_v1.c) use
 * it: the command table, the parser of one command line, the writer of a
 * reply, and a line assembler with a bound. No I/O here: asrd_pmi.c runs
 * the connections on asrd's loop, and tests/fuzz/fuzz_pmi.c feeds this
 * file arbitrary bytes.
 *
 * A command is one line: "cmd=NAME key=value key=value ...\n", the pairs
 * separated by spaces. A reply is one line the same way, naming the reply
 * ("cmd=put_result rc=0 msg=success\n"); "rc" is 0 for success, and a
 * failure carries "rc=-1 msg=WORDS_WITH_UNDERSCORES". A token without '='
 * continues the value before it (abort's "message=it is over" keeps its
 * spaces). The client's own parser (PMIU_parse_keyvals) splits at every
 * space and takes at most 1024 bytes of a line, so a reply never holds a
 * space inside a value and a value is at most ASR_PMI_VAL_MAX.
 *
 *   command             reply             attributes (command -> reply)
 *   init                response_to_init  pmi_version pmi_subversion -> the same, rc
 *   get_maxes           maxes             -> kvsname_max keylen_max vallen_max
 *   get_appnum          appnum            -> appnum
 *   get_universe_size   universe_size     -> size
 *   get_my_kvsname      my_kvsname        -> kvsname
 *   put                 put_result        kvsname key value -> rc msg
 *   get                 get_result        kvsname key -> rc msg value
 *   barrier_in          barrier_out       (none; the reply comes once every rank
 *                                         of the job entered, the puts exchanged)
 *   finalize            finalize_ack      (none)
 *   abort               (none)            exitcode message: the job is killed (the
 *                                         client waits for a reply that never comes)
 *   publish_name        publish_result    service port -> rc (not supported)
 *   unpublish_name      unpublish_result  service -> rc (not supported)
 *   lookup_name         lookup_result     service -> rc (not supported)
 *   spawn               spawn_result      "mcmd=spawn" ... "endcmd": several lines,
 *                                         answered once (not supported)
 * A line that is not a command (no "cmd=" first, a token that starts with
 * '=', too many attributes, a byte below 0x20) or names none of these gets
 * "cmd=error rc=-1 msg=..."; one longer than ASR_PMI_LINE_MAX is dropped
 * up to its newline and answered as its command's failure when its start
 * names one, else as an error. The connection goes on after each.
 */
#ifndef ASR_PMI_WIRE_H
#define ASR_PMI_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "asr_buf.h"

/* The limits a server announces (get_maxes: Hydra's) and keeps. */
#define ASR_PMI_KVSNAME_MAX 256
#define ASR_PMI_KEY_MAX 64
#define ASR_PMI_VAL_MAX 1024
/* The longest command line taken, without its newline: a put of the
 * longest key and value fits with room to spare. */
#define ASR_PMI_LINE_MAX 2048
/* The most key=value pairs one command may carry (cmd included). */
#define ASR_PMI_ATTRS_MAX 16

/* The commands, in one table: X(ENUM, command name, reply name). */
#define ASR_PMI_COMMANDS(X)                                  \
  X(INIT, "init", "response_to_init")                        \
  X(GET_MAXES, "get_maxes", "maxes")                         \
  X(GET_APPNUM, "get_appnum", "appnum")                      \
  X(GET_UNIVERSE_SIZE, "get_universe_size", "universe_size") \
  X(GET_MY_KVSNAME, "get_my_kvsname", "my_kvsname")          \
  X(PUT, "put", "put_result")                                \
  X(GET, "get", "get_result")                                \
  X(BARRIER_IN, "barrier_in", "barrier_out")                 \
  X(FINALIZE, "finalize", "finalize_ack")                    \
  X(ABORT, "abort", NULL)                                    \
  X(PUBLISH_NAME, "publish_name", "publish_result")          \
  X(UNPUBLISH_NAME, "unpublish_name", "unpublish_result")    \
  X(LOOKUP_NAME, "lookup_name", "lookup_result")             \
  X(SPAWN, "spawn", "spawn_result")

typedef enum {
  ASR_PMI_INVALID = 0, /* not a command (the wire headers' habit: zero is nothing) */
#define ASR_PMI_ENUM_ROW(e, name, reply) ASR_PMI_##e,
  ASR_PMI_COMMANDS(ASR_PMI_ENUM_ROW)
#undef ASR_PMI_ENUM_ROW
      ASR_PMI__COUNT
} asr_pmi_cmd_t;

/* One parsed command. key and val point into the line it was parsed from
 * (which the parser cuts into NUL-terminated pieces). */
typedef struct {
  asr_pmi_cmd_t cmd;
  int multi; /* "mcmd=": the first line of a multi-line command (spawn) */
  int nattrs;
  struct {
    const char *key, *val;
  } attrs[ASR_PMI_ATTRS_MAX];
} asr_pmi_msg_t;

/* The command's name and its reply's ("init", "response_to_init"), or NULL
 * for ASR_PMI_INVALID and anything out of range. */
const char *asr_pmi_cmd_name(int cmd);
const char *asr_pmi_reply_name(int cmd);
/* The command called name[0..len), or ASR_PMI_INVALID. */
asr_pmi_cmd_t asr_pmi_cmd_find(const char *name, size_t len);

/* Parses line[0..len) (no newline; it is modified in place and must have a
 * byte after len for the NUL) into *m. 0; ASR_ENOSYS for a well-formed line
 * whose command is none of the table's (m->cmd is ASR_PMI_INVALID then); or
 * ASR_EPROTO for a line that is not a command. why gets a reason made of
 * letters, digits and underscores (a reply's msg) on failure. */
int asr_pmi_parse(char *line, size_t len, asr_pmi_msg_t *m, char *why, size_t whylen);

/* The value of key in m (the first, when it repeats), or NULL. */
const char *asr_pmi_get(const asr_pmi_msg_t *m, const char *key);

/* Whether s is fit to go out as a reply's value: 1..max bytes, no space,
 * no '=' first, no byte below 0x20 or 0x7f. */
int asr_pmi_word_ok(const char *s, size_t max);

/* A reply: asr_pmi_reply_start(b, "put_result") then asr_pmi_reply_attr for
 * each pair, then asr_pmi_reply_end (the newline). Each returns 0 or
 * ASR_ENOMEM. */
int asr_pmi_reply_start(asr_buf_t *b, const char *reply);
int asr_pmi_reply_attr(asr_buf_t *b, const char *key, const char *val);
int asr_pmi_reply_int(asr_buf_t *b, const char *key, long val);
int asr_pmi_reply_end(asr_buf_t *b);
/* The failure of cmd (its reply with rc=-1 msg=why; "cmd=error" for
 * ASR_PMI_INVALID), whole. why's bytes that are no word's become '_'. */
int asr_pmi_reply_fail(asr_buf_t *b, int cmd, const char *why);

/* Assembles lines from a byte stream, each at most ASR_PMI_LINE_MAX bytes.
 * Zero it to start. */
typedef struct {
  char line[ASR_PMI_LINE_MAX + 1]; /* the line so far (room for a NUL) */
  size_t len;
  int dropping; /* inside a line too long: dropped up to its newline */
} asr_pmi_reader_t;

/* Takes up to n bytes of p and stops after the first whole line: returns
 * how many bytes it took. *line_len >= 0 when a line is complete: it is
 * r->line[0..*line_len) (no newline; parse it before the next call), with
 * *too_long set when it was longer than ASR_PMI_LINE_MAX (then line holds
 * only its first bytes). *line_len is -1 when more bytes are needed. */
size_t asr_pmi_reader_feed(asr_pmi_reader_t *r, const uint8_t *p, size_t n, long *line_len, int *too_long);

#endif /* ASR_PMI_WIRE_H */
