/*
 * ofi_probe.c -- the fi_getinfo hints of an LNC, and a provider check ahead
 * of a job (ofi_probe.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "asr_err.h"
#include "ofi_probe.h"

struct fi_info *asr__ofi_hints(const char *prov) {
  struct fi_info *hints = fi_allocinfo();
  if (!hints) return NULL;
  int is_shm = prov && strcmp(prov, "shm") == 0;
  hints->ep_attr->type = FI_EP_RDM;
  /* shm is local-only and refuses FI_LOCAL_COMM/FI_REMOTE_COMM in the caps it
   * is asked for (libfabric 1.17): ask it for neither (doc/design.md,
   * "Pitfalls of libfabric 1.17"). */
  hints->caps = FI_TAGGED | FI_SEND | FI_RECV | (is_shm ? 0 : FI_LOCAL_COMM | FI_REMOTE_COMM);
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_SAFE;
  hints->domain_attr->control_progress = FI_PROGRESS_UNSPEC;
  hints->domain_attr->data_progress = FI_PROGRESS_UNSPEC;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  if (prov) {
    hints->fabric_attr->prov_name = strdup(prov); /* freed with hints */
    if (!hints->fabric_attr->prov_name) {
      fi_freeinfo(hints);
      return NULL;
    }
  }
  return hints;
}

/* The providers that answer libasr's hints, "shm, a, b" into out: shm is
 * asked apart (it is asked without the local/remote caps, see above). */
static void offered(char *out, size_t len) {
  out[0] = '\0';
  size_t k = 0;
  struct fi_info *hints = asr__ofi_hints("shm"), *info = NULL;
  if (hints && fi_getinfo(FI_VERSION(1, 11), NULL, NULL, 0, hints, &info) == 0) {
    k += (size_t)snprintf(out, len, "shm");
    fi_freeinfo(info);
    info = NULL;
  }
  if (hints) fi_freeinfo(hints);
  hints = asr__ofi_hints(NULL);
  if (!hints) return;
  if (fi_getinfo(FI_VERSION(1, 11), NULL, NULL, 0, hints, &info) == 0) {
    for (struct fi_info *i = info; i && k < len; i = i->next) {
      const char *name = i->fabric_attr && i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "?";
      int seen = 0;
      for (struct fi_info *j = info; j != i && !seen; j = j->next)
        seen = j->fabric_attr && j->fabric_attr->prov_name && !strcmp(j->fabric_attr->prov_name, name);
      if (!seen) k += (size_t)snprintf(out + k, len - k, "%s%s", k ? ", " : "", name);
    }
    fi_freeinfo(info);
  }
  fi_freeinfo(hints);
}

int asr__ofi_probe(const char *prov, char *err, size_t errlen) {
  struct fi_info *hints = asr__ofi_hints(prov), *info = NULL;
  if (!hints) {
    snprintf(err, errlen, "out of memory asking libfabric for '%s'", prov);
    return ASR_ENOMEM;
  }
  int rc = fi_getinfo(FI_VERSION(1, 11), NULL, NULL, 0, hints, &info);
  fi_freeinfo(hints);
  if (rc == 0) {
    fi_freeinfo(info);
    return 0;
  }
  char have[512];
  offered(have, sizeof have);
  snprintf(err, errlen, "libfabric offers no provider '%s' for RDM tagged messaging (%s); it offers: %s",
           prov, fi_strerror(-rc), have[0] ? have : "none");
  return ASR_ENOSYS;
}
