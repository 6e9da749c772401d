/*
 * pmi2_wire.h -- the PMI-2 wire protocol, as Slurm's PMI-2 client library
 * speaks it (contribs/pmi2/pmi2_api.c; Debian's libpmi2-0, which MPICH
 * builds configured --with-pmi=pmi2 and other PMI-2 programs link) and as
 * MPICH's own PMI-2 client and Hydra's proxy (pmip_pmi_v2.c) frame it: the
 * command table, the frame assembler with a bound, the parser of one
 * command and the writer of a reply. No I/O here: asrd_pmi.c runs the
 * connections, and tests/fuzz/fuzz_pmi2.c feeds this file arbitrary bytes.
 *
 * A PMI-2 connection starts as a PMI-1 one: the client's first line is
 * "cmd=init pmi_version=2 pmi_subversion=0\n" (pmi_wire.h), answered with
 * "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n"; from then on
 * every command and reply is a frame: its length in decimal in
 * ASR_PMI2_LEN_SIZE bytes, left-aligned and padded with spaces ("%-6d"),
 * then that many bytes of "key=value;" pairs, the first being
 * "cmd=NAME;". A ';' inside a value is written twice. A reply names the
 * command's reply ("cmd=kvs-put-response;rc=0;"); rc is 0 for success,
 * anything else a failure, with errmsg= saying why. Booleans are TRUE and
 * FALSE.
 *
 *   command            reply                       attributes (command -> reply)
 *   fullinit           fullinit-response           pmirank (or pmiid/srcid) threaded ->
 *                                                  rc pmi-version pmi-subversion rank size appnum
 *                                                  debugged pmiverbose
 *   job-getid          job-getid-response          -> rc jobid
 *   kvs-put            kvs-put-response            key value -> rc
 *   kvs-fence          kvs-fence-response          (none; the reply comes once every rank of the
 *                                                  job entered, the puts exchanged) -> rc
 *   kvs-get            kvs-get-response            jobid srcid key -> rc found value
 *   info-getjobattr    info-getjobattr-response    key -> rc found value
 *   info-putnodeattr   info-putnodeattr-response   key value -> rc
 *   info-getnodeattr   info-getnodeattr-response   key wait -> rc found value (wait=TRUE: the
 *                                                  reply waits until a rank of the host puts key)
 *   finalize           finalize-response           -> rc
 *   abort              (none)                      isworld msg: the job is killed
 *   job-connect, job-disconnect, name-publish, name-unpublish, name-lookup,
 *   spawn, ring        ...-response                -> rc (not supported)
 *
 * A frame whose length field is not a number has no end to find: the
 * connection is lost (asrd answers "cmd=error" and closes it). A frame
 * longer than ASR_PMI2_CMD_MAX is dropped whole and answered as its
 * command's failure; a frame that does not parse (no "cmd=" first, a pair
 * without '=' or ';', a key or value over its bound, a NUL byte, too many
 * pairs) or names none of these commands is answered with a failure too.
 * The connection goes on after each.
 */
#ifndef ASR_PMI2_WIRE_H
#define ASR_PMI2_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "asr_buf.h"

/* The length field, and the bounds a server keeps (the client's own:
 * PMI2_MAX_KEYLEN, PMI2_MAX_VALLEN). */
#define ASR_PMI2_LEN_SIZE 6
#define ASR_PMI2_KEY_MAX 64
#define ASR_PMI2_VAL_MAX 1024
/* The longest frame taken: a put of the longest key and of a value made of
 * ';' only (written twice) fits with room to spare. */
#define ASR_PMI2_CMD_MAX 8192
/* The most key=value pairs one command may carry (cmd included). */
#define ASR_PMI2_ATTRS_MAX 32

/* The commands, in one table: X(ENUM, command name, reply name). */
#define ASR_PMI2_COMMANDS(X)                                      \
  X(FULLINIT, "fullinit", "fullinit-response")                    \
  X(JOB_GETID, "job-getid", "job-getid-response")                 \
  X(KVS_PUT, "kvs-put", "kvs-put-response")                       \
  X(KVS_FENCE, "kvs-fence", "kvs-fence-response")                 \
  X(KVS_GET, "kvs-get", "kvs-get-response")                       \
  X(GETJOBATTR, "info-getjobattr", "info-getjobattr-response")    \
  X(PUTNODEATTR, "info-putnodeattr", "info-putnodeattr-response") \
  X(GETNODEATTR, "info-getnodeattr", "info-getnodeattr-response") \
  X(FINALIZE, "finalize", "finalize-response")                    \
  X(ABORT, "abort", NULL)                                         \
  X(JOB_CONNECT, "job-connect", "job-connect-response")           \
  X(JOB_DISCONNECT, "job-disconnect", "job-disconnect-response")  \
  X(NAME_PUBLISH, "name-publish", "name-publish-response")        \
  X(NAME_UNPUBLISH, "name-unpublish", "name-unpublish-response")  \
  X(NAME_LOOKUP, "name-lookup", "name-lookup-response")           \
  X(SPAWN, "spawn", "spawn-response")                             \
  X(RING, "ring", "ring-response")

typedef enum {
  ASR_PMI2_INVALID = 0, /* not a command (the wire headers' habit: zero is nothing) */
#define ASR_PMI2_ENUM_ROW(e, name, reply) ASR_PMI2_##e,
  ASR_PMI2_COMMANDS(ASR_PMI2_ENUM_ROW)
#undef ASR_PMI2_ENUM_ROW
      ASR_PMI2__COUNT
} asr_pmi2_cmd_t;

/* One parsed command. key and val point into the frame it was parsed from
 * (which the parser cuts into NUL-terminated pieces, a doubled ';' made
 * one). */
typedef struct {
  asr_pmi2_cmd_t cmd;
  int nattrs;
  struct {
    const char *key, *val;
  } attrs[ASR_PMI2_ATTRS_MAX];
} asr_pmi2_msg_t;

/* The command's name and its reply's ("kvs-put", "kvs-put-response"), or
 * NULL for ASR_PMI2_INVALID, abort's reply and anything out of range. */
const char *asr_pmi2_cmd_name(int cmd);
const char *asr_pmi2_reply_name(int cmd);
/* The command called name[0..len), or ASR_PMI2_INVALID. */
asr_pmi2_cmd_t asr_pmi2_cmd_find(const char *name, size_t len);

/* Parses body[0..len) (a frame without its length field; modified in place,
 * with a byte after len for the NUL) into *m. 0; ASR_ENOSYS for a
 * well-formed frame whose command is none of the table's (m->cmd is
 * ASR_PMI2_INVALID then); ASR_EPROTO for one that is not a command. why
 * gets a reason in words on failure. */
int asr_pmi2_parse(char *body, size_t len, asr_pmi2_msg_t *m, char *why, size_t whylen);
/* The value of key in m (the first, when it repeats; never cmd's), or NULL. */
const char *asr_pmi2_get(const asr_pmi2_msg_t *m, const char *key);
/* A command's name at the start of a frame that was too long to parse
 * (body[0..len), len bytes kept): its enum, or ASR_PMI2_INVALID. */
asr_pmi2_cmd_t asr_pmi2_cmd_of_prefix(const char *body, size_t len);

/* Appends one whole reply frame to b: the reply's name, then the pairs of
 * kv (key, value, ..., NULL; values escaped). 0, ASR_ENOMEM, or ASR_ETOOBIG
 * when it would be longer than ASR_PMI2_CMD_MAX (nothing is appended then). */
int asr_pmi2_reply(asr_buf_t *b, const char *reply, const char *const *kv);
/* The failure of cmd: its reply (or "error" for ASR_PMI2_INVALID and abort)
 * with rc=-1 and errmsg=why, whole. */
int asr_pmi2_reply_fail(asr_buf_t *b, int cmd, const char *why);

/* Assembles frames from a byte stream. Zero it to start. */
typedef struct {
  char len_field[ASR_PMI2_LEN_SIZE];
  size_t len_got;                  /* bytes of the length field so far */
  size_t need;                     /* the frame's length, once its field is whole */
  size_t got;                      /* bytes of the frame so far (kept: up to ASR_PMI2_CMD_MAX) */
  char body[ASR_PMI2_CMD_MAX + 1]; /* room for a NUL */
} asr_pmi2_reader_t;

/* What asr_pmi2_reader_feed found. */
typedef enum {
  ASR_PMI2_MORE = 0,  /* more bytes are needed */
  ASR_PMI2_FRAME,     /* a whole frame: r->body[0..*len) (parse it before the next call) */
  ASR_PMI2_TOO_LONG,  /* a frame over the bound, whole: r->body holds its first *len bytes */
  ASR_PMI2_BAD_LENGTH /* the length field is not a number: the stream cannot go on */
} asr_pmi2_feed_t;

/* Takes up to n bytes of p and stops after the first whole frame; *taken
 * says how many bytes it took. After ASR_PMI2_BAD_LENGTH the reader takes
 * nothing more. */
asr_pmi2_feed_t asr_pmi2_reader_feed(asr_pmi2_reader_t *r, const uint8_t *p, size_t n, size_t *taken,
                                     size_t *len);

#endif /* ASR_PMI2_WIRE_H */
