/*
 * bind.h -- a host's hwloc topology and the CPUs each rank of it is bound
 * to (doc/design.md, "The launcher": --bind-to, --map-by, --cpus-per-rank,
 * --rankfile).
 *
 * One function, asr_bind_rank, turns (topology, policy, local rank, ranks on
 * the host, rankfile cores) into a rank's binding; asrd calls it for every
 * rank it starts (on its own host's topology) and asrrun's --dry-run for
 * every rank of the map (on this host's), so what the dry run prints is what
 * asrd applies wherever the hosts are alike. Both load the topology with
 * asr_topo_load, which hwloc points elsewhere when HWLOC_SYNTHETIC or
 * HWLOC_XMLFILE is set (hwloc reads them itself): that is how the tests show
 * NUMA and package cases on a machine of one package.
 */
#ifndef ASR_LAUNCHER_BIND_H
#define ASR_LAUNCHER_BIND_H

#include <sched.h>
#include <stddef.h>

#include "job_config.h"

typedef struct asr_topo asr_topo_t;

/* Loads a topology into *t: synthetic, hwloc's synthetic description
 * ("pack:2 numa:2 core:2 pu:1"), or NULL for this host's as hwloc finds it
 * (its HWLOC_SYNTHETIC / HWLOC_XMLFILE included). Caches and I/O objects are
 * left out (binding needs packages, NUMA nodes, cores and PUs only). Returns
 * 0, or ASR_ECONFIG with errbuf; free *t with asr_topo_free. */
int asr_topo_load(const char *synthetic, asr_topo_t **t, char *errbuf, size_t errlen);
void asr_topo_free(asr_topo_t *t);

/* The hwloc_topology_t inside (asrd lends it to its PMIx server). */
void *asr_topo_hwloc(const asr_topo_t *t);

/* The number of cores, NUMA nodes or packages (type CORE, NUMA, PACKAGE);
 * at least 1: a topology without that level counts as one object that is
 * the whole machine. */
int asr_topo_count(const asr_topo_t *t, asr_bind_to_t type);

/* "2 packages, 4 NUMA nodes, 8 cores, 8 PUs" into buf. */
void asr_topo_describe(const asr_topo_t *t, char *buf, size_t len);

/* What asr_bind_rank needs of the job's settings (asrd gets them in the JOB). */
typedef struct {
  asr_bind_to_t bind_to; /* AUTO resolved per host by asr_bind_rank */
  asr_map_by_t map_by;
  int ppr;           /* map_by PPR_*: ranks per object */
  int cpus_per_rank; /* >= 1 */
} asr_bind_policy_t;

void asr_bind_policy_of(const asr_config_t *cfg, asr_bind_policy_t *p);

/* What bind_to AUTO means on a host of ncores cores running nlocal ranks:
 * CORE while every rank gets cpus_per_rank cores of its own, else NONE
 * (sharing cores would slow the ranks down more than the OS moving them). */
asr_bind_to_t asr_bind_resolve(const asr_bind_policy_t *p, int ncores, int nlocal);

typedef struct {
  int bound;      /* 0: not bound (none, or AUTO with too few cores) */
  char what[160]; /* "core 1", "cores 0-1", "numa 0", "package 1" */
  char cpus[256]; /* the PUs' OS numbers, "0-3" (hwloc's list form) */
} asr_binding_t;

/* The binding of the host's rank with local index `local` (its LNC) of
 * nlocal, under policy p; cores, when not NULL, is the rank's rankfile
 * slot=CORES (hwloc logical core numbers), which binds it to those cores
 * whatever p says. How the rank's object is chosen:
 *   - its place: for map_by CORE/NUMA/PACKAGE the object (local % n) of that
 *     type, for PPR_NUMA/PPR_PACKAGE the object (local / ppr) % n; else the
 *     whole machine; k is the rank's index among those sharing its place;
 *   - then the objects of the bind type that overlap the place, in logical
 *     order (one, when the bind type is coarser): the rank takes the k-th,
 *     modulo their number, or for CORE with cpus_per_rank C the C of them
 *     from k*C on.
 * Fills *b and, if cpus is not NULL, *cpus (glibc's set: what
 * sched_setaffinity takes). Returns 0, or ASR_ECONFIG with errbuf for a
 * rankfile core the topology lacks. */
int asr_bind_rank(const asr_topo_t *t, const asr_bind_policy_t *p, int local, int nlocal, const char *cores,
                  asr_binding_t *b, cpu_set_t *cpus, char *errbuf, size_t errlen);

/* The one line --report-bindings and --dry-run print for a rank:
 * "rank R (host H, lnc L) bound to core 1: cpus 1" or "... not bound".
 * Returns its length (as snprintf). */
int asr_bind_format(const asr_binding_t *b, int rank, const char *host, int lnc, char *buf, size_t len);

#endif /* ASR_LAUNCHER_BIND_H */
