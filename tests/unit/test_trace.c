/* test_trace.c -- the trace file (issue 52): the writer (common/asr_trace.c)
 * and the reader (launcher/trace/trace_read.c). Each writer runs in a child
 * process: a process opens one trace file in its life. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_err.h"
#include "asr_test.h"
#include "asr_trace.h"
#include "trace_read.h"

static void put_n(int keep, int n, uint64_t base) {
  for (int i = 0; i < n; i++)
    asr_trace_put(keep, ASR_TR_XFER, 3, 1 | ASR_TR_X_OK, 7, base + (uint64_t)i, base + (uint64_t)i + 1,
                  (uint64_t)i, 0, 0, 0, NULL);
}

static void *second_thread(void *arg) {
  (void)arg;
  asr_trace_thread_lnc(5);
  put_n(0, 10, 1000000);
  return NULL;
}

/* The child: a ring of 64, a keep area of 16; 100 records on the main
 * thread (the ring wraps), 10 on a second, 30 kept (14 too many). */
static int writer(const char *path) {
  asr_trace_cfg_t cfg = {.kind = ASR_TR_PROC_RANK,
                         .rank = 3,
                         .host = "hostA",
                         .job = "job-1",
                         .ring_recs = 50, /* rounded up to 64 */
                         .keep_recs = 16,
                         .max_threads = 4};
  char err[512];
  if (asr_trace_open(path, &cfg, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  if (asr_trace_open(path, &cfg, err, sizeof err) != ASR_EBUSY) return 2; /* once per process */
  put_n(0, 100, 1000);
  put_n(1, 30, 5000);
  pthread_t t;
  pthread_create(&t, NULL, second_thread, NULL);
  pthread_join(t, NULL);
  asr_trace_put(1, ASR_TR_FAIL, -1, 0, 0, 9, 9, 0, 0, 0, 0,
                "a text longer than one record's thirty-two bytes");
  asr_trace_close();
  return 0;
}

static void write_in_child(const char *path) {
  pid_t pid = fork();
  if (pid == 0) _exit(writer(path));
  int st;
  waitpid(pid, &st, 0);
  ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the writer failed (%d)", st);
}

TEST(writer_reader_wrap_and_drops) {
  char path[4200];
  snprintf(path, sizeof path, "%s/p.trc", asr_test_tmpdir());
  write_in_child(path);
  asr_trr_proc_t p;
  char err[512];
  ASSERT_OK(asr_trr_load_file(path, &p, err, sizeof err));
  ASSERT_STREQ(p.hdr.host, "hostA");
  ASSERT_STREQ(p.hdr.job, "job-1");
  ASSERT_EQ(p.hdr.rank, 3);
  ASSERT_EQ(p.hdr.done, 1u);
  ASSERT_EQ(p.nthreads, 2u);
  /* the main thread's ring holds its last 64 of 100, oldest first */
  ASSERT_EQ(p.threads[0].count, 64u);
  ASSERT_EQ(p.threads[0].head, 100u);
  ASSERT_EQ(asr_trr_thread_dropped(&p, 0), 36u);
  for (uint32_t i = 0; i < 64; i++) ASSERT_EQ(p.recs[i].u.v.a, 36u + i);
  ASSERT_EQ(p.threads[1].count, 10u);
  ASSERT_EQ(p.threads[1].lnc, 5);
  ASSERT_EQ(p.recs[p.first[1]].t0, 1000000u);
  ASSERT_EQ(p.ring_dropped, 36u);
  /* the keep area kept its first 16 of 31 */
  ASSERT_EQ(p.nkeep, 16u);
  ASSERT_EQ(p.keep_dropped, 15u);
  ASSERT_EQ(p.keep[0].t0, 5000u);
  /* packed and read again: the same */
  uint8_t *b;
  size_t len;
  ASSERT_OK(asr_trr_pack(&p, &b, &len));
  asr_trr_proc_t q;
  ASSERT_OK(asr_trr_load(b, len, &q, err, sizeof err));
  ASSERT_EQ(q.nrecs, p.nrecs);
  ASSERT_EQ(q.nkeep, p.nkeep);
  ASSERT_EQ(q.keep_dropped, p.keep_dropped);
  ASSERT_EQ(q.ring_dropped, p.ring_dropped);
  ASSERT_MEMEQ(q.recs, p.recs, p.nrecs * sizeof *p.recs);
  /* one byte short, or one more: refused */
  asr_trr_proc_t r;
  ASSERT_EQ(asr_trr_load(b, len - 1, &r, err, sizeof err), ASR_EPROTO);
  ASSERT_CONTAINS(err, "not a whole asr trace file");
  free(b);
  asr_trr_free(&q);
  asr_trr_free(&p);
}

/* A record whose stamp is not whole (its writer died mid-record, or the
 * ring overtook it) is skipped and counted, never read. */
TEST(torn_record_skipped) {
  char path[4200];
  snprintf(path, sizeof path, "%s/t.trc", asr_test_tmpdir());
  write_in_child(path);
  asr_trr_proc_t p;
  char err[512];
  ASSERT_OK(asr_trr_load_file(path, &p, err, sizeof err));
  /* the 80th claim of the main thread's ring: slot 79 % 64 */
  size_t tbl = (p.hdr.max_threads * sizeof(asr_tr_thread_t) + 63) & ~(size_t)63;
  off_t at = (off_t)(ASR_TR_HDR_BYTES + tbl + (size_t)p.hdr.keep_recs * 64 + (79 % 64) * 64 +
                     offsetof(asr_tr_rec_t, stamp));
  asr_trr_free(&p);
  FILE *f = fopen(path, "r+b");
  ASSERT(f != NULL);
  uint32_t bad = 12345;
  ASSERT_EQ(fseeko(f, at, SEEK_SET), 0);
  ASSERT_EQ(fwrite(&bad, sizeof bad, 1, f), 1u);
  fclose(f);
  ASSERT_OK(asr_trr_load_file(path, &p, err, sizeof err));
  ASSERT_EQ(p.threads[0].count, 63u);
  ASSERT_EQ(p.ring_dropped, 37u);
  for (uint32_t i = 0; i < 63; i++) ASSERT(p.recs[i].u.v.a != 79u);
  asr_trr_free(&p);
}

TEST(reader_refuses_damage) {
  uint8_t b[ASR_TR_HDR_BYTES + 64];
  memset(b, 0, sizeof b);
  asr_trr_proc_t p;
  char err[512];
  ASSERT_EQ(asr_trr_load(b, 100, &p, err, sizeof err), ASR_EPROTO);
  ASSERT_CONTAINS(err, "shorter than its header");
  ASSERT_EQ(asr_trr_load(b, sizeof b, &p, err, sizeof err), ASR_EPROTO);
  ASSERT_CONTAINS(err, "magic");
  asr_tr_hdr_t h = {.magic = ASR_TR_MAGIC, .version = 99, .rec_bytes = 64, .thread_bytes = 64};
  memcpy(b, &h, sizeof h);
  ASSERT_EQ(asr_trr_load(b, sizeof b, &p, err, sizeof err), ASR_EPROTO);
  ASSERT_CONTAINS(err, "version 99");
  h.version = ASR_TR_VERSION;
  h.ring_recs = 48; /* not a power of two */
  h.keep_recs = h.max_threads = 1;
  memcpy(b, &h, sizeof h);
  ASSERT_EQ(asr_trr_load(b, sizeof b, &p, err, sizeof err), ASR_EPROTO);
  ASSERT_CONTAINS(err, "out of range");
  h.ring_recs = 0; /* packed: one keep record said, none there */
  h.keep_recs = h.keep_used = 2;
  h.threads = 0;
  memcpy(b, &h, sizeof h);
  ASSERT_EQ(asr_trr_load(b, sizeof b, &p, err, sizeof err), ASR_EPROTO);
  ASSERT_CONTAINS(err, "shorter than its header says");
  ASSERT_EQ(asr_trr_load_file("/nonexistent/x.trc", &p, err, sizeof err), ASR_ENOENT);
  ASSERT_CONTAINS(err, "/nonexistent/x.trc");
}

TEST(open_refuses_bad_settings) {
  char err[512];
  asr_trace_cfg_t cfg = {
      .kind = ASR_TR_PROC_RANK, .rank = -1, .ring_recs = 0, .keep_recs = 1, .max_threads = 1};
  ASSERT_EQ(asr_trace_open("/tmp/x", &cfg, err, sizeof err), ASR_EINVAL);
  cfg.ring_recs = 64;
  char path[4200];
  snprintf(path, sizeof path, "%s/no-such-dir/x.trc", asr_test_tmpdir());
  ASSERT(asr_trace_open(path, &cfg, err, sizeof err) != 0);
  ASSERT_CONTAINS(err, "cannot create");
  ASSERT_EQ(asr_trace_on, 0);
  ASSERT_STREQ(asr_trace_path(), "");
}
