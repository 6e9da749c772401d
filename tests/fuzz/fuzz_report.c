/*
 * fuzz_report.c -- libFuzzer target for a rank's state report
 * (bootstrap/report_fmt.c): the frame headers asrd reads on each rank's
 * report channel (asr_report_header_parse) and the report text asrrun
 * parses (asr_report_parse; with the hist records of a METRICS answer,
 * asrrun --metrics-port), both written by a process asr does not trust
 * to be well-formed (any program a job runs can write to ASR_REPORT_FD).
 * The first byte picks which; for text that parses, every field is inside
 * the limits the parser promises, and a refusal says why and leaves
 * nothing to free (ASan's leak check sees the rest).
 */
#include "config.h"

#include <string.h>

#include "asr_err.h"
#include "fuzz.h"
#include "report_fmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  char why[256] = "";
  if (data[0] & 1) {
    if (size - 1 < ASR_REPORT_HDR) return 0;
    uint32_t type = 0, len = 0;
    int rc = asr_report_header_parse(data + 1, &type, &len, why, sizeof why);
    if (rc) {
      FUZZ_ASSERT(rc == ASR_EPROTO && why[0], "a bad header without a reason");
      return 0;
    }
    FUZZ_ASSERT(type >= ASR_REPORT_HELLO && type <= ASR_REPORT_METRICS && len >= 4 && len <= ASR_REPORT_MAX,
                "header limits");
    FUZZ_ASSERT(type == ASR_REPORT_ANSWER || type == ASR_REPORT_METRICS || len == 4, "a u32 frame's length");
    return 0;
  }
  asr_report_t r;
  int rc = asr_report_parse((const char *)data + 1, size - 1, &r, why, sizeof why);
  if (rc) {
    FUZZ_ASSERT(rc == ASR_EPROTO && why[0], "a refusal without a reason (rc %d)", rc);
    return 0;
  }
  FUZZ_ASSERT(r.nlnc >= 0 && r.nlnc <= 8 && r.ncomms >= 0, "counts");
  FUZZ_ASSERT(r.lnc >= -1 && r.lnc <= 127 && r.fence >= 0 && r.fence <= 3, "proc fields");
  for (int i = 0; i < r.ncomms; i++) {
    const asr_report_comm_t *c = &r.comms[i];
    FUZZ_ASSERT(c->state[0] && strlen(c->state) < sizeof c->state, "comm state");
    FUZZ_ASSERT(c->dir == 0 || c->dir == 1, "comm dir");
    FUZZ_ASSERT(c->stashed <= 128 && c->ofi_posted <= 128 && c->peer_lnc <= 127, "comm counts");
    FUZZ_ASSERT(strlen(c->key) < sizeof c->key && strlen(c->peer_ip) < sizeof c->peer_ip, "comm texts");
  }
  FUZZ_ASSERT(r.nhists >= 0 && r.nhists <= 4096, "histogram count");
  for (int i = 0; i < r.nhists; i++) {
    const asr_report_hist_t *h = &r.hists[i];
    unsigned long long n = 0;
    for (int k = 0; k < ASR_REPORT_HIST_BUCKETS; k++) n += h->b[k];
    FUZZ_ASSERT(
        (h->kind == 0 || h->kind == 1) && (h->dir == 0 || h->dir == 1) && h->lnc >= 0 && h->lnc <= 127,
        "hist fields");
    FUZZ_ASSERT(n == h->count && n <= (1ull << 62), "hist count is the buckets' sum");
  }
  asr_report_free(&r);
  return 0;
}
