/*
 * job_direct.c -- what asrd would have given a rank, worked out by the rank
 * itself when another PMIx server started it (srun --mpi=pmix; doc/design.md,
 * "The KV store": without asrd the ranks elect their host's KV server).
 *
 * asrd sets ASR_BOOTSTRAP_PORT, ASR_JOB_SECRET, ASR_HOSTNAME, ASR_IF_ADDR,
 * ASR_PROVIDER (one host, or --provider) and ASR_KV_SERVER=external. Without it, asr_job_init fills in
 * the same variables (each only when unset, so a user can still give any of
 * them) and the runtime reads them as usual:
 *   ASR_HOSTNAME        the node name from PMIx (Slurm's node name: emulated
 *                       nodes share gethostname())
 *   ASR_BOOTSTRAP_PORT  from SLURM_JOB_ID and SLURM_STEP_ID, so that two
 *                       jobs on one node do not collide:
 *                       10000 + (job * 16 + step mod 16) mod 10000; other
 *                       launchers: a hash of the PMIx namespace
 *   ASR_IF_ADDR         one node: 127.0.0.1; several: ASR_IF_INCLUDE
 *                       (asr_netif.h), else the source address of the route
 *                       to the node srun ran on, else the first non-loopback
 *   ASR_PROVIDER        left unset: libasr takes a path per peer (shm to the
 *                       ranks of the node, tcp;ofi_rxm to the others)
 *   ASR_KV_BIND         one node: 127.0.0.1
 *   ASR_JOB_SECRET      rank 0 draws one and puts it with its address; every
 *                       rank reads it after the fence asr_job_init does anyway
 * The host's KV server is then elected among the node's ranks (kv_host.c,
 * ASR_KV_SERVER=auto) and asr_job_finalize fences before any rank closes its
 * LNC, so the leader serves until every rank of the node is done with it.
 */
#include "config.h"

#include <errno.h>
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_log.h"
#include "asr_netif.h"
#include "job.h"
#include "kv_secret.h"

#define KEY_SECRET "asr.secret"

/* Sets a row of asr_env.h unless the user did (an empty value is unset):
 * 0, or the ASR_E* of setenv's errno. */
static int setenv_if_unset(asr_env_id_t id, const char *value) {
  if (asr_env_is_set(id)) return 0;
  return setenv(asr_env_row(id)->name, value, 1) == 0 ? 0 : asr_err_from_errno(errno);
}

static unsigned long env_ulong(const char *name, int *ok) {
  const char *v = getenv(name);
  char *end;
  *ok = 0;
  if (!v || !*v) return 0;
  unsigned long x = strtoul(v, &end, 10);
  *ok = *end == '\0';
  return x;
}

static int derive_port(const char *nspace) {
  int job_ok, step_ok;
  unsigned long job = env_ulong("SLURM_JOB_ID", &job_ok), step = env_ulong("SLURM_STEP_ID", &step_ok);
  if (job_ok) return 10000 + (int)((job * 16 + (step_ok ? step % 16 : 15)) % 10000);
  uint32_t h = 2166136261u; /* FNV-1a of the namespace */
  for (const char *p = nspace; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
  return 10000 + (int)(h % 10000);
}

static void pick_addr(int nnodes, char ip[ASR_NETIF_ADDRLEN]) {
  char err[512];
  const char *spec = NULL; /* its form was checked by asr_job_init (asr_env_check_all) */
  if (asr_env_str(ASR_ENV_IF_INCLUDE, &spec, err, sizeof err) != 0) spec = NULL;
  if (nnodes <= 1) {
    snprintf(ip, ASR_NETIF_ADDRLEN, "127.0.0.1");
  } else if (spec && *spec) {
    if (asr_netif_resolve(spec, ip, err, sizeof err) != 0) {
      asr_warn("job", "ASR_IF_INCLUDE: %s; choosing an address by myself", err);
      spec = NULL;
    }
  }
  if (nnodes > 1 && !(spec && *spec)) {
    const char *srun_host = getenv("SLURM_LAUNCH_NODE_IPADDR");
    if (!(srun_host && *srun_host && asr_netif_route_src(srun_host, ip) == 0 && strncmp(ip, "127.", 4)) &&
        asr_netif_first_external(ip) != 0)
      snprintf(ip, ASR_NETIF_ADDRLEN, "127.0.0.1");
  }
}

int asr__job_direct_prepare(const char *nspace, int rank, const char *hostname, int nnodes) {
  char buf[64];
  /* the seed's NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT counts as set too */
  snprintf(buf, sizeof buf, "%d", derive_port(nspace));
  setenv_if_unset(ASR_ENV_BOOTSTRAP_PORT, buf);
  setenv_if_unset(ASR_ENV_HOSTNAME, hostname);
  char ip[ASR_NETIF_ADDRLEN];
  pick_addr(nnodes, ip);
  setenv_if_unset(ASR_ENV_IF_ADDR, ip);
  if (nnodes <= 1) setenv_if_unset(ASR_ENV_KV_BIND, "127.0.0.1");
  asr_info("job", "direct launch: node %s, %d node%s, bootstrap port %s, address %s", hostname, nnodes,
           nnodes == 1 ? "" : "s", asr_env_raw(ASR_ENV_BOOTSTRAP_PORT), asr_env_raw(ASR_ENV_IF_ADDR));
  if (rank != 0 || asr_env_is_set(ASR_ENV_JOB_SECRET)) return 0;
  uint8_t secret[ASR_KV_SECRET_LEN];
  char hex[ASR_KV_SECRET_HEX_LEN + 1];
  asr_kv_secret_generate(secret);
  asr_kv_secret_to_hex(secret, hex);
  pmix_value_t v;
  PMIX_VALUE_LOAD(&v, hex, PMIX_STRING);
  pmix_status_t st = PMIx_Put(PMIX_GLOBAL, KEY_SECRET, &v);
  PMIX_VALUE_DESTRUCT(&v);
  if (st != PMIX_SUCCESS) {
    asr_error("job", "cannot publish the job secret: %s", PMIx_Error_string(st));
    return ASR_EIO;
  }
  return 0;
}

int asr__job_direct_secret(const char *nspace) {
  if (asr_env_is_set(ASR_ENV_JOB_SECRET)) return 0;
  pmix_proc_t p;
  PMIX_LOAD_PROCID(&p, nspace, 0);
  pmix_value_t *v = NULL;
  if (PMIx_Get(&p, KEY_SECRET, NULL, 0, &v) != PMIX_SUCCESS || v->type != PMIX_STRING) {
    if (v) PMIX_VALUE_RELEASE(v);
    asr_error("job", "rank 0 published no job secret (is every rank of this job using asr_job_init?)");
    return ASR_ENOTFOUND;
  }
  setenv("ASR_JOB_SECRET", v->data.string, 1);
  PMIX_VALUE_RELEASE(v);
  return 0;
}
