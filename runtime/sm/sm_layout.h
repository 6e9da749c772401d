/*
 * sm_layout.h -- asr's own same-host path ("sm"): the bytes two processes
 * share, and the one reader of the ring (doc/design.md, "The data path";
 * seed §2: a comm is single-producer / single-consumer, the n-th send meets
 * the n-th receive of the peer comm).
 *
 * One region per comm, made by the RECV side in LISTEN (the seed's
 * async_sr_ofi_listen) under a name the 128-byte net handle carries
 * (below), mapped by the SEND side in NET_CONNECT and unlinked by it right
 * after (both ends have it then). Nothing in it is a lock: every word has
 * one writer, and the reader of a word the peer writes validates what it
 * reads (another process of the same user may be buggy).
 *
 * The region (ASR_SM_REGION bytes, a multiple of 64; all integers in the
 * byte order of the host, which both ends share):
 *   line 0 (0..63), the receiver's, written before the handle is published
 *          and never again:
 *     0   4  magic "ASRM"
 *     4   4  version (ASR_SM_VERSION)
 *     8   4  region bytes (the file's size)
 *    12   4  ring bytes (region - ASR_SM_RING_OFF)
 *    16  20  the receiver's "who" (ofi.h)
 *   line 1 (64..127), the sender's:
 *    64   4  attached: 0, then 1 once the rest of the line is written (release)
 *    68  20  the sender's "who"
 *    88   8  probe address: a word of the sender's memory holding
 *    96   8  probe value, which the receiver reads with process_vm_readv to
 *            learn whether the kernel lets it copy from the sender
 *   104   8  fin: 0, or 1 + the number of messages the sender sent, written
 *            once when it closes (drain.c: the FIN of the mailbox path)
 *   112   8  one-sided tail: bytes the sender wrote into the one-sided ring
 *   120   8  notifications the sender posted (in the one-sided ring)
 *   line 2 (128..191), the receiver's:
 *   128   8  head: ring bytes consumed (the sender may reuse all before it)
 *   136   8  taken: messages consumed (completed, or refused as truncated)
 *   144   4  cma: 0 not known yet, 1 large messages are copied by the
 *            receiver from the sender's memory, 2 they go through the ring
 *   148   4  closed: 1 once the receiver closed its comm (drain.c: CLOSED)
 *   152   8  one-sided head: bytes of the one-sided ring the receiver applied
 *   160   8  notifications the receiver's program took
 *   line 3 (192..255): zero
 *   256 ...  the ring: ASR_SM_RING_BYTES(region) bytes, to the region's end
 *   region   then, beyond the region (the shared memory has
 *            ASR_SM_MAP_BYTES(region) bytes), the one-sided ring:
 *            ASR_SM_OSR_BYTES(region) bytes
 *
 * The one-sided ring (one-sided transfers, sm_rma.c) holds what the owner
 * applies itself: small writes, notifications, and the halves of large
 * writes and reads the initiator offers it. Records as the ring's
 * (64-byte aligned, never across its end, stamped (position / 64 + 1) mod
 * 2^32 last, with release), position counting the ring's bytes:
 *     0   4  stamp
 *     4   2  kind: 1 WRITE, 2 NOTIF, 3 PAD (skip to the ring's start),
 *            4 READ PART, 5 WRITE PART (one line each)
 *     6   2  flags: 1 the record carries a notification (never a PART)
 *     8   4  len: WRITE: payload bytes; PART: bytes of the part offered
 *    12   4  slot: WRITE, PART: the registration's slot in the owner's table
 *    16   8  key: WRITE, PART: its key
 *    24   8  dst: WRITE: where the payload goes in the owner; PART: where
 *            the part lies in the owner
 *    32   8  the notification; PART: where it lies in the initiator
 *    40 ...  payload; PART: 4 bytes of state, which both processes CAS:
 *            0 offered, 1 the owner took it, 2 the owner copied it, 3 the
 *            initiator took it back, 4 the owner declined it (the
 *            initiator copies it), 5 the owner's check refused it
 * The owner checks a WRITE or PART against its own registration (key,
 * bounds, access) before it copies; a record that breaks this layout fails the
 * comm. The sender posts a notification only while fewer than
 * ASR_NOTIF_DEPTH it posted are not taken by the owner's program (the two
 * counts above).
 *
 * The ring holds records, each at a 64-byte boundary, never across the
 * ring's end (a PAD record fills what is left before it). The sender
 * writes a record's bytes, then its stamp (release); the receiver
 * reads the stamp (acquire), and a record is there when its stamp is the
 * one its position expects: (position / 64 + 1) mod 2^32, position being
 * the absolute byte count (so a record of an earlier lap never matches).
 *     0   4  stamp
 *     4   2  kind: 1 INLINE (the whole message), 2 CMA (where the message
 *            lies in the sender's memory), 3 CHUNK (a piece of a message
 *            pipelined through the ring), 4 PAD (skip to the ring's start)
 *     6   2  flags (CHUNK: 1 first, 2 last)
 *     8   4  len: payload bytes of this record
 *    12   4  zero
 *    16   8  total: the message's length
 *    24 ...  payload (CMA: address u64, length u64)
 * A record takes 24 + len bytes rounded up to 64. head only moves by whole
 * records; the sender writes only into [tail, head + ring bytes).
 *
 * The net handle of an sm comm (the 128 bytes of ofi.h's table where the
 * path byte says 3):
 *     0   4  magic "ASRH"
 *     4   4  zero
 *     8   2  region name length (without the NUL)
 *    10  64  region name, NUL-padded
 *    74  20  the receiver's "who"
 *    94   4  region bytes
 *    98  14  zero
 *   112   8  the publisher's and its sender's incarnations (handle_inc.h;
 *            zeros outside a job)
 *   120   4  ordinal (connect.c)
 *   124   1  path: 3
 *   125   3  provider tag of "sm"
 */
#ifndef ASR_SM_LAYOUT_H
#define ASR_SM_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define ASR_SM_MAGIC 0x4d525341u /* "ASRM" */
#define ASR_SM_VERSION 5u
#define ASR_SM_LINE 64u
#define ASR_SM_RING_OFF 256u
#define ASR_SM_REC_HDR 24u
#define ASR_SM_PROVIDER "sm"

/* the region's fields (offsets above) */
#define ASR_SM_OFF_MAGIC 0
#define ASR_SM_OFF_VERSION 4
#define ASR_SM_OFF_REGION 8
#define ASR_SM_OFF_RING 12
#define ASR_SM_OFF_RECV_WHO 16
#define ASR_SM_OFF_ATTACHED 64
#define ASR_SM_OFF_SEND_WHO 68
#define ASR_SM_OFF_PROBE_ADDR 88
#define ASR_SM_OFF_PROBE_VAL 96
#define ASR_SM_OFF_FIN 104
#define ASR_SM_OFF_HEAD 128
#define ASR_SM_OFF_TAKEN 136
#define ASR_SM_OFF_CMA 144
#define ASR_SM_OFF_CLOSED 148
#define ASR_SM_OFF_OTAIL 112
#define ASR_SM_OFF_NPOSTED 120
#define ASR_SM_OFF_OHEAD 152
#define ASR_SM_OFF_NTAKEN 160
#define ASR_SM_NOTIF_SLOTS 256u /* asr.h's ASR_NOTIF_DEPTH (asserted in sm_rma.c) */
#define ASR_SM_OSR_HDR 40u

/* The one-sided ring's bytes in a region of region bytes: as many, between
 * 256 bytes and 64 KiB, a multiple of 64. A write goes through the ring
 * when its record fits half of it (sm_rma.c, asr__sm_inline_max), so with
 * the default region (16 KiB) the ring takes writes of up to
 * ASR_SM_INLINE_MAX's default, 4 KiB, three at a time. */
#define ASR_SM_OSR_BYTES(region) ((region) < 256u ? 256u : (region) > 65536u ? 65536u : (region) / 64u * 64u)
/* The ring's bytes in a region of region bytes, and the bytes of the
 * shared memory of a comm: the region, then the one-sided ring. */
#define ASR_SM_RING_BYTES(region) ((region)-ASR_SM_RING_OFF)
#define ASR_SM_MAP_BYTES(region) ((region) + ASR_SM_OSR_BYTES(region))

/* the handle's fields */
#define ASR_SM_HANDLE_LEN 128 /* ofi.h's ASR_OFI_HANDLE_LEN (asserted in sm.h) */
#define ASR_SM_H_NAMELEN 8
#define ASR_SM_H_NAME 10
#define ASR_SM_NAME_MAX 64 /* with its NUL */
#define ASR_SM_H_WHO 74
#define ASR_SM_H_REGION 94

/* the smallest and largest region (ASR_SM_REGION's bounds) */
#define ASR_SM_REGION_MIN 4096u
#define ASR_SM_REGION_MAX (64u << 20)

enum { ASR_SM_INLINE = 1, ASR_SM_CMA = 2, ASR_SM_CHUNK = 3, ASR_SM_PAD = 4 };
enum { ASR_SM_FIRST = 1, ASR_SM_LAST = 2 };
enum { ASR_SM_CMA_UNKNOWN = 0, ASR_SM_CMA_YES = 1, ASR_SM_CMA_NO = 2 };

/* The stamp a record at absolute position pos carries. */
static inline uint32_t asr__sm_stamp(uint64_t pos) { return (uint32_t)(pos / ASR_SM_LINE) + 1u; }

/* The ring bytes a record with len payload bytes takes. */
static inline uint64_t asr__sm_rec_size(uint64_t len) {
  return (ASR_SM_REC_HDR + len + ASR_SM_LINE - 1) / ASR_SM_LINE * ASR_SM_LINE;
}

/* One record as the receiver took it: its header copied out of the ring
 * once (the sender could change the ring's bytes under a second look). */
typedef struct {
  uint32_t kind, flags, len;
  uint64_t total;
  uint64_t size;       /* ring bytes it takes (PAD: to the ring's end) */
  uint64_t cma_addr;   /* CMA: where the message lies in the sender */
  const uint8_t *data; /* INLINE, CHUNK: its payload, in the ring */
} asr__sm_rec_t;

/* Reads the record at ring offset off (a multiple of 64, < ring_bytes) of
 * a ring whose next record has absolute position pos. in_msg is the
 * number of bytes of the current pipelined message already taken (0 when
 * a message starts here), of total msg_total. Returns 1 with *r filled
 * when a valid record is there, 0 when none is yet, or ASR_EPROTO with
 * why (a static string) when what is there breaks the layout above: the
 * peer is broken, and the comm fails. Never reads outside
 * [ring, ring + ring_bytes). Pure (one acquire load, then plain copies):
 * the fuzz target feeds it any bytes (tests/fuzz/fuzz_sm.c). */
int asr__sm_rec_read(const uint8_t *ring, uint64_t ring_bytes, uint64_t off, uint64_t pos, uint64_t in_msg,
                     uint64_t msg_total, asr__sm_rec_t *r, const char **why);

/* Reads what an sm handle names (from the KV store: outside bytes): 0 with
 * the region's name (NUL-ended, "/asrsm:...", made by the process whose
 * pid the handle's "who" carries, of user uid) and size, or ASR_EPROTO
 * with why (a static string). Pure: the fuzz target feeds it any bytes. */
int asr__sm_handle_read(const uint8_t handle[ASR_SM_HANDLE_LEN], unsigned uid, char name[ASR_SM_NAME_MAX],
                        uint32_t *region, const char **why);

#endif /* ASR_SM_LAYOUT_H */
