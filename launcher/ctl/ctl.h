/*
 * ctl.h -- the control channel between asrrun and each asrd: a TCP
 * connection on an asr_loop carrying the messages of ctl_msg.h.
 *
 * Every message is a 12-byte header followed by its payload:
 *   offset size field
 *        0    4 magic   "ASRL" (0x4c525341 little-endian)
 *        4    2 version ASR_CTL_VERSION
 *        6    2 type    asr_ctl_type_t (starts at INVALID = 0, the Hydra habit)
 *        8    4 length  payload bytes, at most ASR_CTL_MAX_PAYLOAD
 * A header with a wrong magic, version, type or length, or a payload that
 * does not decode, is a protocol error: the connection is closed, and its
 * owner told why.
 *
 * A connection reads whatever arrives and hands each whole message, decoded,
 * to its owner's on_msg; messages sent during one loop iteration leave
 * together at the start of the next (one write for a burst of output lines).
 * Ending it cleanly (asr_ctl_finish) means: everything queued is written,
 * then the write side is shut, and the connection waits for the peer to
 * close its end -- so that closing never resets a connection whose last
 * messages the peer has not read yet (a close with unread input sends a
 * reset, which discards what the peer had not acknowledged).
 */
#ifndef ASR_CTL_H
#define ASR_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "asr_buf.h"
#include "asr_loop.h"
#include "ctl_msg.h"

#define ASR_CTL_MAGIC 0x4c525341u
#define ASR_CTL_VERSION 8
#define ASR_CTL_HDR 12
#define ASR_CTL_MAX_PAYLOAD (16u << 20)

/* Checks a header; 0 with *type and *len, or ASR_EPROTO with why. */
int asr_ctl_header_parse(const uint8_t hdr[ASR_CTL_HDR], int *type, uint32_t *len, char *why, size_t whylen);

/* Appends m framed (header + payload) to b. 0, ASR_EINVAL, ASR_ETOOBIG or ASR_ENOMEM. */
int asr_ctl_frame(const asr_ctl_msg_t *m, asr_buf_t *b);

typedef struct asr_ctl_conn asr_ctl_conn_t;

/* A decoded message; it and what it points to live until on_msg returns,
 * unless the callback takes what m owns (zeroing those fields: they are
 * freed after it returns). The callback may send, finish or close the
 * connection, but not free it. */
typedef void (*asr_ctl_msg_cb)(asr_ctl_conn_t *c, asr_ctl_msg_t *m, void *arg);

/* The connection ended: err 0 when the peer closed it after a finish or
 * cleanly, ASR_ECONNRESET when it went away, ASR_EPROTO when it sent
 * something malformed (why says what), ASR_ETIMEDOUT when a finish waited
 * too long. The connection is closed by then: the owner may free it. */
typedef void (*asr_ctl_close_cb)(asr_ctl_conn_t *c, int err, const char *why, void *arg);

struct asr_ctl_conn {
  asr_loop_t *loop;
  asr_loop_io_t io;
  asr_loop_timer_t flush_timer; /* what was queued leaves at the next iteration's start */
  asr_loop_timer_t finish_timer;
  int fd; /* -1 once closed */
  asr_buf_t in, out;
  int finishing; /* asr_ctl_finish: write the rest, shut the write side, wait for the peer */
  int shut;      /* the write side is shut */
  asr_ctl_msg_cb on_msg;
  asr_ctl_close_cb on_close;
  void *arg;
  uint64_t last_rx_ms; /* when bytes last arrived (the loop's clock) */
  char why[256];
};

/* Takes fd (a connected, non-blocking socket) onto loop. */
int asr_ctl_start(asr_loop_t *loop, asr_ctl_conn_t *c, int fd, asr_ctl_msg_cb on_msg,
                  asr_ctl_close_cb on_close, void *arg);

/* Hands the connection to another owner (the same connection, new callbacks). */
void asr_ctl_set_owner(asr_ctl_conn_t *c, asr_ctl_msg_cb on_msg, asr_ctl_close_cb on_close, void *arg);

/* Queues m. 0, or the encoder's error, or ASR_ENOTCONN once finishing or closed. */
int asr_ctl_send(asr_ctl_conn_t *c, const asr_ctl_msg_t *m);

/* Shorthand for a message with no fields (DONE, SHUTDOWN, HEARTBEAT). */
int asr_ctl_send_empty(asr_ctl_conn_t *c, asr_ctl_type_t type);

/* Queues m wrapped in a ROUTED for host (or ASR_CTL_ALL_HOSTS): the tree's
 * relaying (tree.h). 0, or asr_ctl_send's error. */
int asr_ctl_send_routed(asr_ctl_conn_t *c, uint32_t host, const asr_ctl_msg_t *m);

/* Writes what is queued now, as far as the socket takes it. */
void asr_ctl_flush(asr_ctl_conn_t *c);

/* Bytes queued and not yet written. */
static inline size_t asr_ctl_pending(const asr_ctl_conn_t *c) { return asr_buf_pending(&c->out); }

/* Ends the connection cleanly (see above), within timeout_ms; on_close
 * reports how it ended. Messages that arrive meanwhile still reach on_msg. */
void asr_ctl_finish(asr_ctl_conn_t *c, int timeout_ms);

/* Closes at once, dropping what is queued; on_close is not called. */
void asr_ctl_close(asr_ctl_conn_t *c);

#endif /* ASR_CTL_H */
