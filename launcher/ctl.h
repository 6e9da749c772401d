/*
 * ctl.h -- the control channel between asrrun and each asrd (TCP).
 *
 * Every message is a 12-byte header followed by a payload:
 *   offset size field
 *        0    4 magic   "ASRL" (0x4c525341 little-endian)
 *        4    2 version ASR_CTL_VERSION
 *        6    2 type    asr_ctl_type_t (starts at INVALID = 0, the Hydra habit)
 *        8    4 length  payload bytes, at most ASR_CTL_MAX_PAYLOAD
 * Payloads are sequences of little-endian u32 and length-prefixed byte
 * strings written with asr_wire_*. A header with a wrong magic, version,
 * type or length is a protocol error: the receiver drops the connection.
 */
#ifndef ASR_CTL_H
#define ASR_CTL_H

#include <stddef.h>
#include <stdint.h>

#define ASR_CTL_MAGIC 0x4c525341u
#define ASR_CTL_VERSION 3
#define ASR_CTL_HDR 12
#define ASR_CTL_MAX_PAYLOAD (16u << 20)

typedef enum {
  ASR_CTL_INVALID = 0,
  ASR_CTL_HELLO,      /* asrd -> asrrun: host index (or ASR_CTL_INDEX_AHEAD), host name, pid, secret check */
  ASR_CTL_JOB,        /* asrrun -> asrd: the job (see asrd.c for the layout) */
  ASR_CTL_STARTED,    /* asrd -> asrrun: every local rank forked; count, their pids (= process groups) */
  ASR_CTL_OUTPUT,     /* asrd -> asrrun: rank, stream (1/2), one whole line */
  ASR_CTL_EXIT,       /* asrd -> asrrun: rank, wait status */
  ASR_CTL_FENCE,      /* asrd -> asrrun: fence id, this host's data blob */
  ASR_CTL_FENCE_DONE, /* asrrun -> asrd: fence id, every host's blob in host order */
  ASR_CTL_ABORT,      /* asrd -> asrrun: rank, status, message (PMIx_Abort) */
  ASR_CTL_KILL,       /* asrrun -> asrd: signal every local rank */
  ASR_CTL_STDIN,      /* asrrun -> asrd: bytes for rank 0's stdin; empty = EOF */
  ASR_CTL_ERROR,      /* either way: a fatal error message */
  ASR_CTL_DONE,       /* asrd -> asrrun: all local ranks exited, output flushed (one host: it exits) */
  ASR_CTL_SHUTDOWN,   /* asrrun -> asrd: exit now */
  ASR_CTL_HEARTBEAT,  /* either way, every second: "still here" (empty) */
  ASR_CTL__COUNT
} asr_ctl_type_t;

/* The host index in the HELLO of a daemon started ahead of the job, before
 * asrrun knew its host's index (asrrun's early local daemon); the JOB tells
 * it its index. */
#define ASR_CTL_INDEX_AHEAD 0xffffffffu

const char *asr_ctl_type_name(int type);

/* A growable byte buffer for building payloads / queuing output. */
typedef struct {
  uint8_t *data;
  size_t len, cap, off; /* off: bytes already consumed from the front */
} asr_buf_t;

void asr_buf_free(asr_buf_t *b);
int asr_buf_put(asr_buf_t *b, const void *p, size_t n);
void asr_buf_put_u32(asr_buf_t *b, uint32_t v);
void asr_buf_put_str(asr_buf_t *b, const char *s); /* u32 length + bytes (no NUL) */
void asr_buf_put_bytes(asr_buf_t *b, const void *p, size_t n);

/* A cursor over a received payload; every getter fails (returns -1) once the
 * payload is exhausted or malformed, and keeps failing. */
typedef struct {
  const uint8_t *p;
  size_t len, pos;
  int bad;
} asr_rd_t;

void asr_rd_init(asr_rd_t *r, const void *p, size_t len);
uint32_t asr_rd_u32(asr_rd_t *r);
/* Returns a malloc'd NUL-terminated copy (NULL on error). */
char *asr_rd_str(asr_rd_t *r);
/* Points into the payload; *n gets the length. */
const uint8_t *asr_rd_bytes(asr_rd_t *r, size_t *n);

/* One end of a control connection: non-blocking fd, input and output buffers. */
typedef struct {
  int fd;
  asr_buf_t in, out;
  int closed;
} asr_ctl_conn_t;

/* Queues a message (header + payload) on c->out and tries to write it. */
int asr_ctl_send(asr_ctl_conn_t *c, int type, const asr_buf_t *payload);

/* Only queues it: the caller flushes (asr_ctl_flush) once it has queued a
 * batch, so many small messages (one per output line or rank exit) leave in
 * one write. */
int asr_ctl_queue(asr_ctl_conn_t *c, int type, const asr_buf_t *payload);

/* Writes as much of c->out as the socket takes. Returns 0, or ASR_ECONNRESET. */
int asr_ctl_flush(asr_ctl_conn_t *c);

/* Reads what is available and calls on_msg for every whole message. Returns
 * 0, ASR_ECONNRESET when the peer closed, or ASR_EPROTO on a bad header. */
typedef void (*asr_ctl_msg_fn)(void *arg, asr_ctl_conn_t *c, int type, const uint8_t *payload, size_t len);
int asr_ctl_read(asr_ctl_conn_t *c, asr_ctl_msg_fn on_msg, void *arg);

/* Blocking helpers for the handshake: send everything / wait for one message. */
int asr_ctl_send_sync(asr_ctl_conn_t *c, int type, const asr_buf_t *payload, int timeout_ms);

void asr_ctl_close(asr_ctl_conn_t *c);

#endif /* ASR_CTL_H */
