/*
 * rma_job -- one-sided transfers between the ranks of a job (issue 51),
 * for tests/netns/netns.sh and test_apps: every even rank r writes blocks
 * into rank r+1's registered cache with a notification per block, reads
 * them back, then checks that the owner's deregistration revoked its
 * descriptor (a later write fails and never lands). The descriptor goes
 * from owner to writer as an asr message; after the revocation the ranks
 * meet in job barriers, since the refused write may have failed the
 * comms (across hosts: the owner's provider drops the connection).
 *
 *   asrrun -n 2 tests/apps/rma_job [BLOCKS [BLOCK_BYTES]]
 *
 * Each pair prints "rma_job: rank R wrote N blocks to rank R+1 (PATH),
 * verified" and the owner "rma_job: rank R+1 revoked, untouched".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr.h"

static asr_job_info_t me;

static void check(int st, const char *what) {
  if (st == 0) return;
  fprintf(stderr, "rma_job: rank %d: %s: %s\n", me.rank, what, asr_strerror(st));
  exit(1);
}

static void wait_req(asr_request_t *r, const char *what) {
  int done = 0;
  while (!done) check(asr_test(r, &done, NULL), what);
}

static unsigned char pat(size_t block, size_t i) { return (unsigned char)(block * 131 + i * 7 + 1); }

int main(int argc, char **argv) {
  size_t blocks = argc > 1 ? strtoul(argv[1], NULL, 0) : 32,
         bytes = argc > 2 ? strtoul(argv[2], NULL, 0) : 65536;
  check(asr_job_init(&me), "asr_job_init");
  int peer = me.rank ^ 1;
  if (peer >= me.size || blocks == 0 || bytes == 0) { /* no pair: it meets the others' barriers */
    for (int i = 0; i < 3; i++) check(asr_job_barrier(), "asr_job_barrier");
    return asr_job_finalize();
  }
  size_t total = blocks * bytes;
  asr_tensor_t *t, *d;
  check(asr_tensor_alloc(total, &t), "asr_tensor_alloc");
  check(asr_tensor_alloc(ASR_MEM_DESC_MAX + 8, &d), "asr_tensor_alloc");
  unsigned char *buf = asr_tensor_va(t), *desc = asr_tensor_va(d);
  asr_comm_t *s, *r;
  asr_request_t *q;
  check(asr_job_connect(peer, &s), "asr_job_connect");
  check(asr_job_accept(peer, &r), "asr_job_accept");
  check(asr_comm_wait_connected(s, 30000), "connecting");
  check(asr_comm_wait_connected(r, 30000), "accepting");
  if (me.rank % 2) { /* the owner: the "decode" side */
    memset(buf, 0, total);
    asr_mem_t *m;
    check(asr_mem_register(me.lnc, buf, total, ASR_MEM_REMOTE_READ | ASR_MEM_REMOTE_WRITE, &m), "register");
    size_t len = ASR_MEM_DESC_MAX;
    check(asr_mem_export(m, desc, &len), "export");
    check(asr_isend(s, d, 0, len, &q), "send the descriptor");
    wait_req(q, "send the descriptor");
    for (size_t b = 0; b < blocks;) {
      uint64_t v[16];
      int n = 0;
      check(asr_notif_poll(r, v, 16, &n), "asr_notif_poll");
      for (int k = 0; k < n; k++, b++) {
        if (v[k] != (1ull << 63) + b) {
          fprintf(stderr, "rma_job: rank %d: notification %zu is %llx\n", me.rank, b,
                  (unsigned long long)v[k]);
          return 1;
        }
        for (size_t i = 0; i < bytes; i++)
          if (buf[b * bytes + i] != pat(b, i)) {
            fprintf(stderr, "rma_job: rank %d: block %zu byte %zu wrong when its notification came\n",
                    me.rank, b, i);
            return 1;
          }
      }
    }
    /* the writer read everything back: now revoke, and say so through the
     * job (a write to a revoked key may take the comms' connection down on
     * tcp;ofi_rxm: asr.h, "One-sided transfers") */
    check(asr_job_barrier(), "asr_job_barrier");
    check(asr_mem_deregister(m), "deregister");
    memset(buf, 0, total);
    check(asr_job_barrier(), "asr_job_barrier"); /* revoked */
    check(asr_job_barrier(), "asr_job_barrier"); /* the writer tried */
    for (size_t i = 0; i < total; i++)
      if (buf[i]) {
        fprintf(stderr, "rma_job: rank %d: byte %zu written after deregistration\n", me.rank, i);
        return 1;
      }
    printf("rma_job: rank %d revoked, untouched\n", me.rank);
  } else { /* the writer: the "prefill" side */
    size_t got = 0;
    check(asr_irecv(r, d, 0, ASR_MEM_DESC_MAX, &q), "recv the descriptor");
    int done = 0;
    while (!done) check(asr_test(q, &done, &got), "recv the descriptor");
    asr_rmem_t *rm;
    check(asr_mem_import(s, desc, got, &rm), "asr_mem_import");
    for (size_t b = 0; b < blocks; b++) {
      for (size_t i = 0; i < bytes; i++) buf[b * bytes + i] = pat(b, i);
      check(asr_write(s, t, b * bytes, bytes, rm, b * bytes, (1ull << 63) + b, ASR_WRITE_NOTIFY, &q),
            "asr_write");
      wait_req(q, "asr_write");
    }
    memset(buf, 0, total);
    check(asr_read(s, t, 0, total, rm, 0, &q), "asr_read");
    wait_req(q, "asr_read");
    for (size_t b = 0; b < blocks; b++)
      for (size_t i = 0; i < bytes; i++)
        if (buf[b * bytes + i] != pat(b, i)) {
          fprintf(stderr, "rma_job: rank %d: read back block %zu byte %zu wrong\n", me.rank, b, i);
          return 1;
        }
    printf("rma_job: rank %d wrote %zu blocks to rank %d (%s), verified\n", me.rank, blocks, peer,
           asr_comm_provider(s));
    check(asr_job_barrier(), "asr_job_barrier");
    check(asr_job_barrier(), "asr_job_barrier"); /* revoked */
    memset(buf, 0xee, total);
    int rc = asr_write(s, t, 0, total, rm, 0, 0, 0, &q);
    if (rc == 0) {
      int fin = 0;
      while (!fin && (rc = asr_test(q, &fin, NULL)) == 0) {
      }
    }
    if (rc == 0) {
      fprintf(stderr, "rma_job: rank %d: a write after deregistration succeeded\n", me.rank);
      return 1;
    }
    asr_rmem_free(rm);
    check(asr_job_barrier(), "asr_job_barrier"); /* tried */
  }
  (void)asr_comm_close(s); /* closes a failed comm too */
  (void)asr_comm_close(r);
  asr_tensor_free(t);
  asr_tensor_free(d);
  return asr_job_finalize();
}
