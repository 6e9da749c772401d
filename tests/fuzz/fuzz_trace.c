/*
 * fuzz_trace.c -- libFuzzer target for the trace file's reader
 * (launcher/trace/trace_read.c asr_trr_load) and the merger behind it
 * (trace_merge.c): the bytes a daemon sends up (TRACE) or a file of an
 * ASR_TRACE directory, which may be damaged, cut short or forged.
 *
 * A file that loads has whole records only, counts that add up, and packs
 * into a file that loads again to the same records; merged (with records
 * of any kind, comm numbers and texts) it gives JSON whose every string is
 * closed: the merger never trusts a record.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "asr_err.h"
#include "fuzz.h"
#include "trace_merge.h"
#include "trace_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  asr_trr_proc_t p;
  char err[512] = "";
  int rc = asr_trr_load(data, size, &p, err, sizeof err);
  if (rc) {
    FUZZ_ASSERT(rc == ASR_EPROTO || rc == ASR_ENOMEM, "rc %d", rc);
    FUZZ_ASSERT(err[0], "a refusal says why");
    return 0;
  }
  size_t total = 0;
  for (uint32_t i = 0; i < p.nthreads; i++) {
    FUZZ_ASSERT(p.first[i] == total, "ring %u starts at %u, not %zu", i, p.first[i], total);
    total += p.threads[i].count;
    FUZZ_ASSERT(p.threads[i].count <= p.threads[i].head, "ring %u: more records than claims", i);
  }
  FUZZ_ASSERT(total == p.nrecs, "rings' counts %zu, records %zu", total, p.nrecs);
  uint8_t *packed;
  size_t plen;
  FUZZ_ASSERT(asr_trr_pack(&p, &packed, &plen) == 0, "pack");
  asr_trr_proc_t q;
  FUZZ_ASSERT(asr_trr_load(packed, plen, &q, err, sizeof err) == 0, "packed does not load: %s", err);
  FUZZ_ASSERT(q.nrecs == p.nrecs && q.nkeep == p.nkeep && q.nthreads == p.nthreads, "packed counts differ");
  FUZZ_ASSERT(!p.nrecs || memcmp(q.recs, p.recs, p.nrecs * sizeof *p.recs) == 0, "packed records differ");
  FUZZ_ASSERT(!p.nkeep || memcmp(q.keep, p.keep, p.nkeep * sizeof *p.keep) == 0, "packed keep differs");
  FUZZ_ASSERT(q.keep_dropped == p.keep_dropped && q.ring_dropped == p.ring_dropped, "packed drops differ");
  /* merged twice, as two hosts' processes: JSON with every string closed */
  char *json = NULL;
  size_t jlen = 0;
  FILE *f = open_memstream(&json, &jlen);
  FUZZ_ASSERT(f, "open_memstream");
  asr_trm_input_t in[2] = {{.proc = &p, .host = 0, .exited = "code 0"},
                           {.proc = &q, .host = 1, .exited = ""}};
  asr_trm_host_t hosts[2] = {{"h0", 0, 0}, {"h\"1", 12345, 10}};
  asr_trm_opts_t opts = {.clock = "asrrun", .job = "fuzz"};
  FUZZ_ASSERT(asr_trm_write(f, in, 2, hosts, 2, &opts, err, sizeof err) == 0, "merge: %s", err);
  fclose(f);
  int quotes = 0;
  for (size_t i = 0; i < jlen; i++) {
    if (json[i] == '\\') {
      i++;
      continue;
    }
    FUZZ_ASSERT((unsigned char)json[i] >= 0x20 || json[i] == '\n', "a raw control byte in the JSON");
    quotes += json[i] == '"';
  }
  FUZZ_ASSERT(quotes % 2 == 0, "an unclosed string in the JSON");
  free(json);
  free(packed);
  asr_trr_free(&q);
  asr_trr_free(&p);
  return 0;
}
