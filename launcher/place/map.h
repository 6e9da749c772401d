/*
 * map.h -- where each rank runs: the host and the LNC (local rank) of every
 * rank of a job, computed from the settings and, for what counts NUMA
 * nodes, packages or cores, this host's topology (doc/design.md, "The
 * launcher": --map-by,
 * --npernode, --rankfile, --oversubscribe).
 *
 * asrrun builds the map once, prints it for --dry-run, and hands each host
 * daemon its share; nothing here talks to the network.
 */
#ifndef ASR_LAUNCHER_MAP_H
#define ASR_LAUNCHER_MAP_H

#include <stddef.h>
#include <stdio.h>

#include "bind.h"
#include "job_config.h"

typedef struct {
  int rank;          /* 0..nranks-1 */
  int host;          /* index into host_names/nlocal */
  int lnc;           /* the rank's index among the ranks of its host, 0..nlocal[host]-1 */
  const char *cores; /* its rankfile slot=CORES (in cfg->rf, which must outlive the map), or NULL */
  int line;          /* and that rankfile line; 0 without one */
} asr_map_rank_t;

typedef struct {
  int nranks, nhosts;      /* nhosts counts only hosts that run at least one rank */
  char (*host_names)[128]; /* in the order the hosts were given */
  int *nlocal;             /* ranks on each host */
  asr_map_rank_t *ranks;   /* indexed by rank */
  char *warnings;          /* what --oversubscribe lets ranks share, a line each ("host a: ..."); or NULL */
} asr_map_t;

/* Builds the map of cfg's job. With no hosts in cfg the job runs on one host
 * called local_hostname (or, with a rankfile, on the rankfile's hosts).
 *
 * A host's slot count (its LNCs) is its own slots, else --lnc-per-host,
 * else (the local host alone) np, else the ranks --npernode / ppr put on a
 * host, else 1. The ranks a host takes is its slots, or the per-host count
 * of --npernode N / ppr:N:node (N), ppr:N:numa|package (N times this host's
 * NUMA nodes or packages: the hosts are taken to be alike); np 0 fills them
 * all. --map-by node deals ranks to the hosts round robin, every other
 * policy fills a host first. A rankfile places every rank itself.
 *
 * More ranks on a host than its slots, ranks bound (--bind-to core, numa,
 * package; not auto or none) to more objects than topo has, or two ranks of
 * a rankfile on one core are errors, or with --oversubscribe a line of
 * map->warnings each; with --oversubscribe and more ranks than slots, the
 * rest go round robin over the hosts after every slot is taken. A host never
 * runs more than 128 ranks (one LNC each). topo may be NULL when nothing
 * needs it (then no binding is counted). Hosts that get no rank are left
 * out. Returns 0 with *map filled (free it with asr_map_free), or
 * ASR_ECONFIG with errbuf saying what to change; *map is written only on
 * success. */
int asr_map_build_topo(const asr_config_t *cfg, const char *local_hostname, const asr_topo_t *topo,
                       asr_map_t *map, char *errbuf, size_t errlen);

/* asr_map_build_topo without a topology. */
int asr_map_build(const asr_config_t *cfg, const char *local_hostname, asr_map_t *map, char *errbuf,
                  size_t errlen);

/* Whether cfg's job needs this host's topology to be mapped or checked. */
int asr_map_needs_topo(const asr_config_t *cfg);

/* Frees what asr_map_build allocated and zeroes *map; safe on a zeroed map. */
void asr_map_free(asr_map_t *map);

/* Whether host's asrd would run on this machine. asrrun passes the launch
 * backends' rule (launch.h: --launcher local, or a name of this host);
 * tests pass their own, so that nothing here asks the resolver. */
typedef int (*asr_map_here_fn)(const asr_config_t *cfg, const char *host, void *arg);

/* Refuses a host list that names this machine more than once ("localhost"
 * and its own name, two of its addresses, any two hosts under --launcher
 * local): asrrun starts one asrd per host it is given, and two on one
 * machine would both take the bootstrap port. Call it before asr_map_build
 * and before a dry run prints the map. here(cfg, name, arg) says which
 * names are this machine; local_hostname names it in the message. Returns
 * 0 (also for an empty list: the job runs here alone), or ASR_ECONFIG with
 * errbuf naming the first two such hosts and the slots of all of them
 * together, as asr_map_build would count them. */
int asr_map_check_hosts(const asr_config_t *cfg, const char *local_hostname, asr_map_here_fn here, void *arg,
                        char *errbuf, size_t errlen);

/* Prints the --dry-run view: a header, "rank R -> host H lnc L" for every
 * rank, then "host H: N ranks" for every host. cfg may be NULL. */
void asr_map_print(const asr_map_t *map, const asr_config_t *cfg, FILE *out);

/* Prints, after a header naming topo's shape, each rank's binding as asrd
 * would apply it on a host like topo (bind.h's asr_bind_rank and
 * asr_bind_format, the --report-bindings line); topo NULL: one line saying
 * none can be shown. */
void asr_map_print_bindings(const asr_map_t *map, const asr_config_t *cfg, const asr_topo_t *topo, FILE *out);

#endif /* ASR_LAUNCHER_MAP_H */
