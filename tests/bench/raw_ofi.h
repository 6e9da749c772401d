/*
 * raw_ofi.h -- what the raw libfabric baselines of tests/bench/ofi_bench.sh
 * (ofi_raw.c, ofi_raw_mesh.c) and of tests/bench/rma_bench.sh
 * (ofi_rma_raw.c) share: libasr's provider settings, so that asr/raw
 * compares what libasr adds, not how the provider was set up. Header-only.
 */
#ifndef ASR_RAW_OFI_H
#define ASR_RAW_OFI_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

/* libasr's rule (runtime/ofi_env.c): 1024 ofi_rxm bounce buffers per
 * endpoint unless the environment says otherwise (libfabric's 4096 cost
 * 64 MiB and tens of ms per endpoint). rxm reads it at the process's first
 * fi_getinfo: call this before. */
static inline void raw_ofi_env_defaults(void) {
  const char *rx = getenv("FI_OFI_RXM_MSG_RX_SIZE");
  if (!rx || !*rx) setenv("FI_OFI_RXM_MSG_RX_SIZE", "1024", 1);
}

/* The hints of raw_ofi_getinfo (below) with extra_caps added to the tagged ones and
 * msg_order (tx and rx) instead of send-after-send alone: the one-sided
 * baseline (ofi_rma_raw.c) asks for FI_RMA | FI_READ | FI_WRITE |
 * FI_REMOTE_READ | FI_REMOTE_WRITE and the RMA orderings, and, with FI_RMA,
 * 8 bytes of remote CQ data (what a notification carries). Returns
 * fi_getinfo's result. */
static inline int raw_ofi_getinfo_caps(const char *prov, enum fi_threading threading, uint64_t extra_caps,
                                       uint64_t msg_order, struct fi_info **info) {
  int is_shm = strcmp(prov, "shm") == 0;
  struct fi_info *hints = fi_allocinfo();
  if (!hints) return -FI_ENOMEM;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_SEND | FI_RECV | extra_caps | (is_shm ? 0 : FI_LOCAL_COMM | FI_REMOTE_COMM);
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = threading;
  if (extra_caps & FI_RMA) hints->domain_attr->cq_data_size = 8;
  hints->tx_attr->msg_order = msg_order;
  hints->rx_attr->msg_order = msg_order;
  hints->fabric_attr->prov_name = strdup(prov);
  int rc =
      fi_getinfo(FI_VERSION(1, 11), is_shm ? NULL : "127.0.0.1", NULL, is_shm ? 0 : FI_SOURCE, hints, info);
  fi_freeinfo(hints);
  return rc;
}

/* fi_getinfo with libasr's hints (runtime/ofi.c, asr__ofi_open): RDM,
 * tagged, FI_CONTEXT2, FI_MR_LOCAL | VIRT_ADDR | ALLOCATED | PROV_KEY,
 * send-after-send ordering; shm asked for neither FI_LOCAL_COMM nor
 * FI_REMOTE_COMM, other providers bound to 127.0.0.1. threading is libasr's
 * FI_THREAD_SAFE unless asked otherwise. Returns fi_getinfo's result. */
static inline int raw_ofi_getinfo(const char *prov, enum fi_threading threading, struct fi_info **info) {
  return raw_ofi_getinfo_caps(prov, threading, 0, FI_ORDER_SAS, info);
}

/* libasr's rule (runtime/ofi.c): shm injects sends up to its inject size,
 * other providers not at all; ASR_INJECT_MAX sets the limit for any
 * provider (at most its inject size; 0: never). */
static inline size_t raw_ofi_inject_max(const char *prov, const struct fi_info *info) {
  size_t max = strcmp(prov, "shm") == 0 ? info->tx_attr->inject_size : 0;
  const char *im = getenv("ASR_INJECT_MAX");
  if (im && *im) {
    unsigned long long v = strtoull(im, NULL, 10);
    max = v < info->tx_attr->inject_size ? (size_t)v : info->tx_attr->inject_size;
  }
  return max;
}

/* A failed completion ends a baseline: the CQ's error entry is read and
 * said, naming the program and its rank. */
static inline void raw_ofi_cq_fail(struct fid_cq *cq, const char *prog, int rank) {
  struct fi_cq_err_entry e;
  memset(&e, 0, sizeof e);
  fi_cq_readerr(cq, &e, 0);
  fprintf(stderr, "%s rank %d: completion error: %s\n", prog, rank, fi_strerror(e.err));
  exit(1);
}

/* Makes the post `call`, reading the CQ (drain()) while the provider's
 * queue is full; any other failure ends the program (die()). The program
 * defines drain and die. */
#define RAW_OFI_POST(call)                        \
  do {                                            \
    ssize_t rc_;                                  \
    while ((rc_ = (call)) == -FI_EAGAIN) drain(); \
    if (rc_) die(#call, rc_);                     \
  } while (0)

#endif
