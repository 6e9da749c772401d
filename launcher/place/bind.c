/*
 * bind.c -- topologies and each rank's binding in one (bind.h): the one
 * place asrd's binding and asrrun's --dry-run are computed.
 */
#include "config.h"

#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr_err.h"
#include "bind.h"
#include "config_int.h"

struct asr_topo {
  hwloc_topology_t topo;
};

int asr_topo_load(const char *synthetic, asr_topo_t **out, char *errbuf, size_t errlen) {
  asr_topo_t *t = calloc(1, sizeof *t);
  if (!t || hwloc_topology_init(&t->topo) != 0) {
    free(t);
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "cannot start hwloc (out of memory)");
  }
#if HWLOC_API_VERSION >= 0x00020800
  /* binding reads none of these: skip their discovery */
  hwloc_topology_set_flags(t->topo, HWLOC_TOPOLOGY_FLAG_NO_DISTANCES | HWLOC_TOPOLOGY_FLAG_NO_MEMATTRS |
                                        HWLOC_TOPOLOGY_FLAG_NO_CPUKINDS);
#endif
  /* nor these (binding is to cores, NUMA nodes or packages) */
  hwloc_topology_set_cache_types_filter(t->topo, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_icache_types_filter(t->topo, HWLOC_TYPE_FILTER_KEEP_NONE);
#if defined(__linux__) && HWLOC_API_VERSION >= 0x00020100
  /* On Linux the sysfs backend finds packages, cores and NUMA nodes by
   * itself; the x86 (cpuid) backend on top of it only annotates, and
   * doubled the load time. */
  hwloc_topology_set_components(t->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
#endif
  if (synthetic && hwloc_topology_set_synthetic(t->topo, synthetic) != 0) {
    hwloc_topology_destroy(t->topo);
    free(t);
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "'%s' is not an hwloc synthetic topology", synthetic);
  }
  if (hwloc_topology_load(t->topo) != 0) {
    hwloc_topology_destroy(t->topo);
    free(t);
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "hwloc cannot load %s topology",
                    synthetic ? "the synthetic" : "this host's");
  }
  *out = t;
  return 0;
}

void asr_topo_free(asr_topo_t *t) {
  if (!t) return;
  hwloc_topology_destroy(t->topo);
  free(t);
}

void *asr_topo_hwloc(const asr_topo_t *t) { return t->topo; }

/* The hwloc type of a --bind-to or --map-by object. A topology without
 * cores (some virtual machines show PUs only) binds "cores" to PUs. */
static hwloc_obj_type_t obj_type(const asr_topo_t *t, asr_bind_to_t type) {
  switch (type) {
    case ASR_BIND_CORE:
      return hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    case ASR_BIND_NUMA: return HWLOC_OBJ_NUMANODE;
    case ASR_BIND_PACKAGE: return HWLOC_OBJ_PACKAGE;
    default: return HWLOC_OBJ_MACHINE;
  }
}

int asr_topo_count(const asr_topo_t *t, asr_bind_to_t type) {
  int n = hwloc_get_nbobjs_by_type(t->topo, obj_type(t, type));
  return n > 0 ? n : 1;
}

void asr_topo_describe(const asr_topo_t *t, char *buf, size_t len) {
  int p = asr_topo_count(t, ASR_BIND_PACKAGE), n = asr_topo_count(t, ASR_BIND_NUMA),
      c = asr_topo_count(t, ASR_BIND_CORE), u = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_PU);
  snprintf(buf, len, "%d package%s, %d NUMA node%s, %d core%s, %d PU%s", p, p == 1 ? "" : "s", n,
           n == 1 ? "" : "s", c, c == 1 ? "" : "s", u, u == 1 ? "" : "s");
}

void asr_bind_policy_of(const asr_config_t *cfg, asr_bind_policy_t *p) {
  p->bind_to = cfg->bind_to;
  p->map_by = cfg->map_by;
  p->ppr = cfg->ppr;
  p->cpus_per_rank = cfg->cpus_per_rank > 0 ? cfg->cpus_per_rank : 1;
}

asr_bind_to_t asr_bind_resolve(const asr_bind_policy_t *p, int ncores, int nlocal) {
  if (p->bind_to != ASR_BIND_AUTO) return p->bind_to;
  int c = p->cpus_per_rank > 0 ? p->cpus_per_rank : 1;
  return (long)nlocal * c <= ncores ? ASR_BIND_CORE : ASR_BIND_NONE;
}

static const char *type_word(asr_bind_to_t type) {
  switch (type) {
    case ASR_BIND_CORE: return "core";
    case ASR_BIND_NUMA: return "numa";
    case ASR_BIND_PACKAGE: return "package";
    default: return "none";
  }
}

/* Writes "core 1" or "cores 0-1" (the logical numbers in ids) to b->what. */
static void name_objects(asr_binding_t *b, asr_bind_to_t type, hwloc_const_bitmap_t ids) {
  char list[128];
  hwloc_bitmap_list_snprintf(list, sizeof list, ids);
  snprintf(b->what, sizeof b->what, "%s%s %s", type_word(type), hwloc_bitmap_weight(ids) > 1 ? "s" : "",
           list);
}

/* A rankfile's cores: their logical numbers must be this topology's. */
static int rankfile_cores(const asr_topo_t *t, const char *cores, hwloc_bitmap_t set, hwloc_bitmap_t ids,
                          char *errbuf, size_t errlen) {
  if (hwloc_bitmap_list_sscanf(ids, cores) != 0)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "'%s' is not a core list", cores);
  hwloc_obj_type_t type = obj_type(t, ASR_BIND_CORE);
  int n = hwloc_get_nbobjs_by_type(t->topo, type), c;
  hwloc_bitmap_foreach_begin(c, ids) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t->topo, type, (unsigned)c);
    if (!o)
      return asr_errf(errbuf, errlen, ASR_ECONFIG, "core %d is not one of this host's %d cores (0-%d)", c, n,
                      n - 1);
    hwloc_bitmap_or(set, set, o->cpuset);
  }
  hwloc_bitmap_foreach_end();
  return 0;
}

/* The rank's place (bind.h): its object's cpuset, and in *k its index among
 * the ranks that share the place. */
static hwloc_const_cpuset_t place_of(const asr_topo_t *t, const asr_bind_policy_t *p, int local, int *k) {
  asr_bind_to_t ptype = ASR_BIND_NONE;
  int per = 0; /* ranks per object (ppr), 0: dealt in turn */
  switch (p->map_by) {
    case ASR_MAP_CORE: ptype = ASR_BIND_CORE; break;
    case ASR_MAP_NUMA: ptype = ASR_BIND_NUMA; break;
    case ASR_MAP_PACKAGE: ptype = ASR_BIND_PACKAGE; break;
    case ASR_MAP_PPR_NUMA: ptype = ASR_BIND_NUMA, per = p->ppr; break;
    case ASR_MAP_PPR_PACKAGE: ptype = ASR_BIND_PACKAGE, per = p->ppr; break;
    default: break;
  }
  hwloc_obj_type_t type = obj_type(t, ptype);
  int n = hwloc_get_nbobjs_by_type(t->topo, type);
  if (ptype == ASR_BIND_NONE || n <= 0) {
    *k = local;
    return hwloc_topology_get_topology_cpuset(t->topo);
  }
  int i;
  if (per > 0) {
    /* per ranks fill each object; ranks past per * n (--oversubscribe)
     * start over, each a further index in its object */
    i = (local / per) % n;
    *k = local % per + per * (local / (per * n));
  } else {
    i = local % n;
    *k = local / n;
  }
  return hwloc_get_obj_by_type(t->topo, type, (unsigned)i)->cpuset;
}

/* Binds by policy: the k-th (or for cores, C from k*C) of the bind type's
 * objects that overlap the place, into set and ids. */
static void policy_objects(const asr_topo_t *t, const asr_bind_policy_t *p, asr_bind_to_t btype, int local,
                           hwloc_bitmap_t set, hwloc_bitmap_t ids) {
  int k;
  hwloc_const_cpuset_t place = place_of(t, p, local, &k);
  hwloc_obj_type_t type = obj_type(t, btype);
  int n = hwloc_get_nbobjs_by_type(t->topo, type), ncand = 0;
  if (n <= 0) { /* no such objects (a machine without packages): the machine */
    hwloc_bitmap_copy(set, hwloc_topology_get_topology_cpuset(t->topo));
    hwloc_bitmap_set(ids, 0);
    return;
  }
  hwloc_obj_t *cand = calloc((size_t)n, sizeof *cand);
  for (int i = 0; cand && i < n; i++) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t->topo, type, (unsigned)i);
    if (hwloc_bitmap_intersects(o->cpuset, place)) cand[ncand++] = o;
  }
  if (ncand == 0) { /* out of memory, or a place no object overlaps: the place */
    hwloc_bitmap_copy(set, place);
    hwloc_bitmap_set(ids, 0);
    free(cand);
    return;
  }
  int c = btype == ASR_BIND_CORE ? p->cpus_per_rank : 1;
  if (c < 1) c = 1;
  for (int j = 0; j < c; j++) {
    hwloc_obj_t o = cand[((long)k * c + j) % ncand];
    hwloc_bitmap_or(set, set, o->cpuset);
    hwloc_bitmap_set(ids, o->logical_index);
  }
  free(cand);
}

int asr_bind_rank(const asr_topo_t *t, const asr_bind_policy_t *p, int local, int nlocal, const char *cores,
                  asr_binding_t *b, cpu_set_t *cpus, char *errbuf, size_t errlen) {
  asr_binding_t r = {0};
  snprintf(r.cpus, sizeof r.cpus, "all");
  asr_bind_to_t btype = cores ? ASR_BIND_CORE : asr_bind_resolve(p, asr_topo_count(t, ASR_BIND_CORE), nlocal);
  if (btype == ASR_BIND_NONE) {
    *b = r;
    return 0;
  }
  hwloc_bitmap_t set = hwloc_bitmap_alloc(), ids = hwloc_bitmap_alloc();
  int rc = set && ids ? 0 : asr_errf(errbuf, errlen, ASR_ECONFIG, "out of memory binding a rank");
  if (rc == 0 && cores)
    rc = rankfile_cores(t, cores, set, ids, errbuf, errlen);
  else if (rc == 0)
    policy_objects(t, p, btype, local, set, ids);
  if (rc == 0) {
    name_objects(&r, btype, ids);
    hwloc_bitmap_list_snprintf(r.cpus, sizeof r.cpus, set);
    r.bound = 1;
    if (cpus && hwloc_cpuset_to_glibc_sched_affinity(t->topo, set, cpus, sizeof *cpus) != 0)
      rc = asr_errf(errbuf, errlen, ASR_ECONFIG, "cpus %s do not fit a cpu_set_t", r.cpus);
  }
  hwloc_bitmap_free(set);
  hwloc_bitmap_free(ids);
  if (rc == 0) *b = r;
  return rc;
}

int asr_bind_format(const asr_binding_t *b, int rank, const char *host, int lnc, char *buf, size_t len) {
  if (!b->bound) return snprintf(buf, len, "rank %d (host %s, lnc %d) not bound", rank, host, lnc);
  return snprintf(buf, len, "rank %d (host %s, lnc %d) bound to %s: cpus %s", rank, host, lnc, b->what,
                  b->cpus);
}
