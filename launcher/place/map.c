/*
 * map.c -- rank placement for asrrun (--map-by slot|node) and its --dry-run
 * printout. See map.h for the rules.
 */
#include "config.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "asr_err.h"
#include "config_int.h"
#include "map.h"

/* The hosts a job may use: cfg's, or the one local host when none is given. */
typedef struct {
  const asr_cfg_host_t *v;
  int n;
  int implicit_local; /* no hosts were given: v is the local host alone */
  asr_cfg_host_t local;
} host_set_t;

static int host_set_init(host_set_t *hs, const asr_config_t *cfg, const char *local_hostname, char *errbuf,
                         size_t errlen) {
  memset(hs, 0, sizeof *hs);
  if (cfg->nhosts > 0) {
    hs->v = cfg->hosts;
    hs->n = cfg->nhosts;
    return 0;
  }
  const char *name = local_hostname && *local_hostname ? local_hostname : "localhost";
  if (strlen(name) >= sizeof hs->local.name)
    return asr_errf(errbuf, errlen, ASR_ECONFIG,
                    "this host's name '%.40s...' is longer than %zu bytes; use -H", name,
                    sizeof hs->local.name - 1);
  snprintf(hs->local.name, sizeof hs->local.name, "%s", name);
  hs->v = &hs->local;
  hs->n = 1;
  hs->implicit_local = 1;
  return 0;
}

/* What puts a fixed number of ranks on every host: --npernode or ppr. */
typedef struct {
  int per;      /* ranks per host; 0: as the slots say */
  char src[96]; /* "--npernode 2", "--map-by ppr:2:numa", for messages */
} per_host_t;

/* A host's slot count: its own, else --lnc-per-host, else, when the job runs
 * on this host alone, -n (so "asrrun -n 8 prog" needs no host list), else
 * the per-host count of --npernode / ppr, else 1. */
static int host_slots(const asr_config_t *cfg, const host_set_t *hs, int h, int per) {
  if (hs->v[h].slots > 0) return hs->v[h].slots;
  if (cfg->lnc_per_host > 0) return cfg->lnc_per_host;
  if (hs->implicit_local && cfg->np > 0) return cfg->np;
  if (hs->implicit_local && per > 0) return per;
  return 1;
}

/* Fills slots[] and returns the total, or ASR_ECONFIG for a host over the
 * LNC limit: an LNC is 0..127, so a host can run at most 128 ranks. */
static int count_slots(const asr_config_t *cfg, const host_set_t *hs, int per, int *slots, char *errbuf,
                       size_t errlen) {
  int total = 0;
  for (int h = 0; h < hs->n; h++) {
    slots[h] = host_slots(cfg, hs, h, per);
    if (slots[h] <= ASR_CFG_MAX_SLOTS) {
      total += slots[h];
    } else if (hs->implicit_local && hs->v[h].slots == 0 && cfg->lnc_per_host == 0) {
      return asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "-n %d puts %d ranks on host '%s' but a host runs at most %d (one per LNC); "
                      "add hosts with -H or --hostfile",
                      cfg->np, slots[h], hs->v[h].name, ASR_CFG_MAX_SLOTS);
    } else {
      return asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "host '%s' has %d slots but a host runs at most %d ranks (one per LNC); "
                      "lower its slots or add hosts",
                      hs->v[h].name, slots[h], ASR_CFG_MAX_SLOTS);
    }
  }
  return total;
}

static const char *plural(int n) { return n == 1 ? "" : "s"; }

static int too_many_ranks(int np, int total, int nhosts, char *errbuf, size_t errlen) {
  return asr_errf(errbuf, errlen, ASR_ECONFIG,
                  "%d rank%s requested but only %d slot%s on %d host%s; add hosts or slots, use "
                  "--lnc-per-host, or allow it with --oversubscribe",
                  np, plural(np), total, plural(total), nhosts, plural(nhosts));
}

/* Appends one line to m->warnings. */
static int warn(asr_map_t *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int warn(asr_map_t *m, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  size_t old = m->warnings ? strlen(m->warnings) : 0, n = strlen(line);
  char *w = realloc(m->warnings, old + n + 2);
  if (!w) return ASR_ENOMEM;
  memcpy(w + old, line, n);
  w[old + n] = '\n';
  w[old + n + 1] = '\0';
  m->warnings = w;
  return 0;
}

/* Places ranks r0..np-1 on hosts with room (used < cap): by slot the first
 * such host (host 0 fills up first), by node the next one round robin. The
 * caller has checked that the caps hold np ranks. */
static void place_ranks(int round_robin, int r0, int np, int nh, const int *cap, int *used, int *host_of,
                        int *lnc_of) {
  int h = 0;
  for (int r = r0; r < np; r++) {
    while (used[h] >= cap[h]) h = round_robin ? (h + 1) % nh : h + 1;
    host_of[r] = h;
    lnc_of[r] = used[h]++;
    if (round_robin) h = (h + 1) % nh;
  }
}

/* Copies the placement into *map, keeping only hosts that got ranks. */
static int fill_map(asr_map_t *map, const host_set_t *hs, int np, const int *used, const int *host_of,
                    const int *lnc_of, int *new_index) {
  int nused = 0;
  for (int h = 0; h < hs->n; h++) new_index[h] = used[h] ? nused++ : -1;
  map->nranks = np;
  map->nhosts = nused;
  map->host_names = calloc((size_t)nused, sizeof *map->host_names);
  map->nlocal = calloc((size_t)nused, sizeof *map->nlocal);
  map->ranks = calloc((size_t)np, sizeof *map->ranks);
  if (!map->host_names || !map->nlocal || !map->ranks) return ASR_ENOMEM;
  for (int h = 0; h < hs->n; h++)
    if (new_index[h] >= 0) {
      memcpy(map->host_names[new_index[h]], hs->v[h].name, sizeof map->host_names[0]);
      map->nlocal[new_index[h]] = used[h];
    }
  for (int r = 0; r < np; r++)
    map->ranks[r] = (asr_map_rank_t){.rank = r, .host = new_index[host_of[r]], .lnc = lnc_of[r]};
  return 0;
}

/* The settings that contradict each other, whatever the hosts. */
static int check_policy(const asr_config_t *cfg, const asr_topo_t *topo, per_host_t *ph, char *errbuf,
                        size_t errlen) {
  char map_by[64];
  asr__config_map_by_format(cfg, map_by, sizeof map_by);
  int ppr = cfg->map_by >= ASR_MAP_PPR_NODE;
  memset(ph, 0, sizeof *ph);
  if (cfg->npernode && ppr)
    return asr_errf(errbuf, errlen, ASR_ECONFIG,
                    "--npernode and --map-by %s both set the ranks per host; give one", map_by);
  if (cfg->nrf && (cfg->npernode || ppr))
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "--rankfile places every rank; leave out %s",
                    cfg->npernode ? "--npernode"
                    : ppr         ? "--map-by ppr"
                                  : "");
  if (cfg->cpus_per_rank > 1 && cfg->bind_to != ASR_BIND_CORE && cfg->bind_to != ASR_BIND_AUTO)
    return asr_errf(errbuf, errlen, ASR_ECONFIG,
                    "--cpus-per-rank %d binds each rank to %d cores, which needs --bind-to core or auto "
                    "(not %s)",
                    cfg->cpus_per_rank, cfg->cpus_per_rank, asr__config_bind_to_name(cfg->bind_to));
  if (cfg->npernode) {
    ph->per = cfg->npernode;
    snprintf(ph->src, sizeof ph->src, "--npernode %d", cfg->npernode);
  } else if (ppr) {
    int objs = 1;
    if (cfg->map_by != ASR_MAP_PPR_NODE) {
      if (!topo)
        return asr_errf(errbuf, errlen, ASR_ECONFIG,
                        "--map-by %s needs this host's topology, which hwloc could not load", map_by);
      objs = asr_topo_count(topo, cfg->map_by == ASR_MAP_PPR_NUMA ? ASR_BIND_NUMA : ASR_BIND_PACKAGE);
    }
    ph->per = cfg->ppr * objs;
    snprintf(ph->src, sizeof ph->src, "--map-by %s", map_by);
    if (ph->per > ASR_CFG_MAX_SLOTS)
      return asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "%s puts %d ranks on a host (%d objects) but a host runs at most %d (one per LNC)",
                      ph->src, ph->per, objs, ASR_CFG_MAX_SLOTS);
  }
  return 0;
}

/* Places np ranks on the host set: caps from slots or ph, --oversubscribe
 * past the slots. On success host_of/lnc_of/used are filled. */
static int place_all(const asr_config_t *cfg, const host_set_t *hs, const per_host_t *ph, const int *slots,
                     int total, int *np_io, int *cap, int *used, int **host_of, int **lnc_of, char *errbuf,
                     size_t errlen) {
  int nh = hs->n, np = *np_io;
  if (ph->per) {
    for (int h = 0; h < nh; h++) cap[h] = ph->per;
    int max = ph->per * nh;
    if (np == 0) np = max;
    if (np > max)
      return asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "-n %d but %s runs at most %d ranks on %d host%s; raise it or add hosts", np, ph->src,
                      max, nh, plural(nh));
  } else {
    memcpy(cap, slots, (size_t)nh * sizeof *cap);
    if (np == 0) np = total;
    if (np > total && !cfg->oversubscribe) return too_many_ranks(np, total, nh, errbuf, errlen);
    if (np > (long)nh * ASR_CFG_MAX_SLOTS)
      return asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "%d ranks requested but %d host%s run at most %ld (%d each, one per LNC); add hosts",
                      np, nh, plural(nh), (long)nh * ASR_CFG_MAX_SLOTS, ASR_CFG_MAX_SLOTS);
  }
  if (!(*host_of = calloc((size_t)np, sizeof **host_of)) || !(*lnc_of = calloc((size_t)np, sizeof **lnc_of)))
    return ASR_ENOMEM;
  int first = np < total || ph->per ? np : total;
  place_ranks(cfg->map_by == ASR_MAP_NODE, 0, first, nh, cap, used, *host_of, *lnc_of);
  if (first < np) { /* --oversubscribe: the rest round robin, one LNC each */
    for (int h = 0; h < nh; h++) cap[h] = ASR_CFG_MAX_SLOTS;
    place_ranks(1, first, np, nh, cap, used, *host_of, *lnc_of);
  }
  for (int h = 0; h < nh; h++)
    if (used[h] > slots[h] && !cfg->oversubscribe)
      return asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "host '%s' has %d slot%s but %s puts %d ranks on it; give it more slots (HOST:N, "
                      "slots=N, --lnc-per-host), or --oversubscribe to share them",
                      hs->v[h].name, slots[h], plural(slots[h]), ph->src, used[h]);
  *np_io = np;
  return 0;
}

/* --bind-to core|numa|package gives each rank objects of its own: a host
 * running more ranks than it has (times --cpus-per-rank for cores) is
 * refused, or with --oversubscribe warned about. auto and none never are:
 * auto binds only where the cores suffice, and an LNC is not a core. */
static int check_bindings(const asr_config_t *cfg, const asr_topo_t *topo, asr_map_t *m, char *errbuf,
                          size_t errlen) {
  asr_bind_to_t bt = cfg->bind_to;
  if (!topo || cfg->nrf || bt == ASR_BIND_NONE || bt == ASR_BIND_AUTO) return 0;
  static const char *const nouns[] = {"", "core", "NUMA node", "package"};
  int c = bt == ASR_BIND_CORE && cfg->cpus_per_rank > 1 ? cfg->cpus_per_rank : 1;
  int have = asr_topo_count(topo, bt);
  const char *noun = nouns[bt], *word = asr__config_bind_to_name(bt);
  for (int h = 0; h < m->nhosts; h++) {
    int nl = m->nlocal[h];
    if ((long)nl * c <= have) continue;
    char ranks[96];
    if (c > 1)
      snprintf(ranks, sizeof ranks, "%d rank%s of %d cores", nl, plural(nl), c);
    else
      snprintf(ranks, sizeof ranks, "%d rank%s", nl, plural(nl));
    if (!cfg->oversubscribe) {
      char with[64];
      if (c > 1)
        snprintf(with, sizeof with, "(--cpus-per-rank %d)", c);
      else
        snprintf(with, sizeof with, "with --bind-to %s", word);
      return asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "host '%s' runs %s %s but has %d %s%s (this host's topology); use fewer ranks, "
                      "--bind-to none, or --oversubscribe to share them",
                      m->host_names[h], ranks, with, have, noun, plural(have));
    }
    if (warn(m, "host %s: %s share %d %s%s (--bind-to %s, --oversubscribe)", m->host_names[h], ranks, have,
             noun, plural(have), word))
      return ASR_ENOMEM;
  }
  return 0;
}

int asr_map_needs_topo(const asr_config_t *cfg) {
  return cfg->dry_run || cfg->nrf || cfg->map_by == ASR_MAP_PPR_NUMA || cfg->map_by == ASR_MAP_PPR_PACKAGE ||
         cfg->bind_to == ASR_BIND_CORE || cfg->bind_to == ASR_BIND_NUMA || cfg->bind_to == ASR_BIND_PACKAGE;
}

/* Maps by --map-by, --npernode / ppr (ph, from check_policy) and the slots. */
static int build_policy(const asr_config_t *cfg, const char *local_hostname, const per_host_t *ph,
                        asr_map_t *m, char *errbuf, size_t errlen) {
  host_set_t hs;
  int rc = host_set_init(&hs, cfg, local_hostname, errbuf, errlen);
  if (rc) return rc;
  int *slots = calloc((size_t)hs.n, sizeof *slots), *used = calloc((size_t)hs.n, sizeof *used);
  int *cap = calloc((size_t)hs.n, sizeof *cap), *new_index = calloc((size_t)hs.n, sizeof *new_index);
  int *host_of = NULL, *lnc_of = NULL, np = cfg->np;
  int total = slots ? count_slots(cfg, &hs, ph->per, slots, errbuf, errlen) : ASR_ENOMEM;
  if (total < 0)
    rc = total;
  else if (!used || !cap || !new_index)
    rc = ASR_ENOMEM;
  else
    rc = place_all(cfg, &hs, ph, slots, total, &np, cap, used, &host_of, &lnc_of, errbuf, errlen);
  if (rc == 0) rc = fill_map(m, &hs, np, used, host_of, lnc_of, new_index);
  for (int h = 0; rc == 0 && h < hs.n; h++)
    if (used[h] > slots[h] && warn(m, "host %s: %d ranks on %d slot%s (--oversubscribe)", hs.v[h].name,
                                   used[h], slots[h], plural(slots[h])))
      rc = ASR_ENOMEM;
  if (rc == ASR_ENOMEM) asr_errf(errbuf, errlen, ASR_ECONFIG, "out of memory while mapping %d ranks", np);
  free(slots);
  free(used);
  free(cap);
  free(new_index);
  free(host_of);
  free(lnc_of);
  return rc;
}

/* ---- rankfiles ------------------------------------------------------------ */

/* The rankfile's hosts: with a host list, each must be in it (its index in
 * *hidx); without one, the rankfile's hosts in the order they first appear,
 * each with a slot for every rank it names. */
static int rankfile_hosts(const asr_config_t *cfg, asr__hostlist_t *hl, int *hidx, char *errbuf,
                          size_t errlen) {
  int rc = asr__hostlist_init(hl, errbuf, errlen);
  if (rc) return rc;
  if (cfg->nhosts > 0) {
    memcpy(hl->v, cfg->hosts, (size_t)cfg->nhosts * sizeof *hl->v);
    hl->n = cfg->nhosts;
  }
  for (int r = 0; r < cfg->nrf; r++) {
    const asr_cfg_rank_t *e = &cfg->rf[r];
    int h = 0;
    while (h < hl->n && strcmp(hl->v[h].name, e->host) != 0) h++;
    if (h == hl->n && cfg->nhosts > 0)
      return asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "%s:%d: host '%s' is not one of the job's hosts (-H, --hostfile or hosts)",
                      cfg->rankfile, e->line, e->host);
    if (h == hl->n &&
        (rc = asr__hostlist_add(hl, e->host, strlen(e->host), 0, cfg->rankfile, errbuf, errlen)) != 0)
      return rc;
    if (cfg->nhosts == 0) hl->v[h].slots++;
    hidx[r] = h;
  }
  return 0;
}

/* No two ranks of a host on one core, unless --oversubscribe (a warning).
 * owner[] (ASR_CFG_MAX_CORE entries, all -1) is left as it was found. */
static int rankfile_cores_shared(const asr_config_t *cfg, asr_map_t *m, const int *order, int n, int *owner,
                                 unsigned char *bits, char *errbuf, size_t errlen) {
  int rc = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    const asr_cfg_rank_t *e = &cfg->rf[order[i]];
    int max = -1;
    memset(bits, 0, ASR_CFG_MAX_CORE / 8);
    asr__config_parse_cores(e->cores, bits, ASR_CFG_MAX_CORE, &max); /* checked when read */
    int shared = 0;
    for (int c = 0; c <= max && rc == 0; c++) {
      if (!(bits[c / 8] & (1u << (c % 8)))) continue;
      if (owner[c] < 0) {
        owner[c] = e->rank;
        continue;
      }
      if (shared++) continue; /* one line per rank */
      const asr_cfg_rank_t *o = &cfg->rf[owner[c]];
      if (!cfg->oversubscribe)
        rc = asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "%s:%d: rank %d shares core %d with rank %d (line %d) on host %s; give each rank "
                      "its own cores, or --oversubscribe to share them",
                      cfg->rankfile, e->line, e->rank, c, o->rank, o->line, e->host);
      else if (warn(m, "host %s: rank %d shares core %d with rank %d (--oversubscribe)", e->host, e->rank, c,
                    o->rank))
        rc = ASR_ENOMEM;
    }
  }
  for (int i = 0; i < n; i++) { /* reset what this host set */
    int max = -1;
    memset(bits, 0, ASR_CFG_MAX_CORE / 8);
    asr__config_parse_cores(cfg->rf[order[i]].cores, bits, ASR_CFG_MAX_CORE, &max);
    for (int c = 0; c <= max; c++)
      if (bits[c / 8] & (1u << (c % 8))) owner[c] = -1;
  }
  return rc;
}

static int build_rankfile(const asr_config_t *cfg, const asr_topo_t *topo, asr_map_t *m, char *errbuf,
                          size_t errlen) {
  if (cfg->np && cfg->np != cfg->nrf)
    return asr_errf(errbuf, errlen, ASR_ECONFIG,
                    "%s: names %d ranks but -n is %d; leave out -n or make them agree", cfg->rankfile,
                    cfg->nrf, cfg->np);
  asr__hostlist_t hl = {0};
  host_set_t hs = {0};
  int n = cfg->nrf, rc;
  int *hidx = calloc((size_t)n, sizeof *hidx), *lnc = calloc((size_t)n, sizeof *lnc);
  int *used = NULL, *new_index = NULL, *order = NULL, *start = NULL, *owner = NULL;
  unsigned char *bits = malloc(ASR_CFG_MAX_CORE / 8);
  rc = hidx && lnc && bits ? rankfile_hosts(cfg, &hl, hidx, errbuf, errlen) : ASR_ENOMEM;
  if (rc == 0) {
    hs.v = hl.v;
    hs.n = hl.n;
    used = calloc((size_t)hs.n, sizeof *used);
    new_index = calloc((size_t)hs.n, sizeof *new_index);
    start = calloc((size_t)hs.n + 1, sizeof *start);
    order = calloc((size_t)n, sizeof *order);
    owner = malloc(ASR_CFG_MAX_CORE * sizeof *owner);
    if (!used || !new_index || !start || !order || !owner) rc = ASR_ENOMEM;
  }
  for (int r = 0; rc == 0 && r < n; r++) lnc[r] = used[hidx[r]]++;
  for (int h = 0; rc == 0 && h < hs.n; h++) {
    int slots = hs.v[h].slots > 0 ? hs.v[h].slots : cfg->lnc_per_host > 0 ? cfg->lnc_per_host : 1;
    if (used[h] > ASR_CFG_MAX_SLOTS)
      rc = asr_errf(errbuf, errlen, ASR_ECONFIG,
                    "%s: puts %d ranks on host '%s' but a host runs at most %d (one per LNC)", cfg->rankfile,
                    used[h], hs.v[h].name, ASR_CFG_MAX_SLOTS);
    else if (used[h] > slots && !cfg->oversubscribe)
      rc = asr_errf(errbuf, errlen, ASR_ECONFIG,
                    "%s: host '%s' has %d slot%s but the rankfile puts %d ranks on it; give it more slots "
                    "(HOST:N, slots=N, --lnc-per-host), or --oversubscribe to share them",
                    cfg->rankfile, hs.v[h].name, slots, plural(slots), used[h]);
    else if (used[h] > slots && warn(m, "host %s: %d ranks on %d slot%s (--oversubscribe)", hs.v[h].name,
                                     used[h], slots, plural(slots)))
      rc = ASR_ENOMEM;
  }
  if (rc == 0) rc = fill_map(m, &hs, n, used, hidx, lnc, new_index);
  for (int r = 0; rc == 0 && r < n; r++) {
    m->ranks[r].cores = cfg->rf[r].cores;
    m->ranks[r].line = cfg->rf[r].line;
  }
  /* the ranks of each host together (a counting sort), for the core checks */
  for (int r = 0; rc == 0 && r < n; r++) start[hidx[r] + 1]++;
  for (int h = 0; rc == 0 && h < hs.n; h++) start[h + 1] += start[h];
  if (rc == 0) {
    int *fill = used; /* reused as each host's next free place */
    memcpy(fill, start, (size_t)hs.n * sizeof *fill);
    for (int r = 0; r < n; r++) order[fill[hidx[r]]++] = r;
    for (int c = 0; c < ASR_CFG_MAX_CORE; c++) owner[c] = -1;
  }
  for (int h = 0; rc == 0 && h < hs.n; h++)
    rc =
        rankfile_cores_shared(cfg, m, order + start[h], start[h + 1] - start[h], owner, bits, errbuf, errlen);
  /* every core must be one of this host's (the hosts are taken to be alike) */
  for (int r = 0; rc == 0 && topo && r < n; r++) {
    asr_bind_policy_t p;
    asr_binding_t b;
    char inner[256];
    asr_bind_policy_of(cfg, &p);
    if (asr_bind_rank(topo, &p, lnc[r], 1, cfg->rf[r].cores, &b, NULL, inner, sizeof inner) != 0)
      rc = asr_errf(errbuf, errlen, ASR_ECONFIG, "%s:%d: rank %d: %s", cfg->rankfile, cfg->rf[r].line, r,
                    inner);
  }
  if (rc == ASR_ENOMEM) asr_errf(errbuf, errlen, ASR_ECONFIG, "out of memory while mapping %d ranks", n);
  asr__hostlist_fini(&hl);
  free(hidx);
  free(lnc);
  free(used);
  free(new_index);
  free(order);
  free(start);
  free(owner);
  free(bits);
  return rc;
}

int asr_map_build_topo(const asr_config_t *cfg, const char *local_hostname, const asr_topo_t *topo,
                       asr_map_t *map, char *errbuf, size_t errlen) {
  asr_map_t m = {0};
  per_host_t ph;
  int rc = check_policy(cfg, topo, &ph, errbuf, errlen);
  if (rc == 0)
    rc = cfg->nrf ? build_rankfile(cfg, topo, &m, errbuf, errlen)
                  : build_policy(cfg, local_hostname, &ph, &m, errbuf, errlen);
  if (rc == 0) rc = check_bindings(cfg, topo, &m, errbuf, errlen);
  if (rc) {
    asr_map_free(&m);
    return rc;
  }
  *map = m;
  return 0;
}

int asr_map_build(const asr_config_t *cfg, const char *local_hostname, asr_map_t *map, char *errbuf,
                  size_t errlen) {
  return asr_map_build_topo(cfg, local_hostname, NULL, map, errbuf, errlen);
}

/* Merging the hosts instead (their slots added, as Open MPI's -H does with
 * a repeated host) would be as easy, but launchers disagree on what a host
 * named twice means (Slurm's --nodelist drops the repeat, Hydra adds only
 * adjacent repeats), and config.c refuses a name listed twice for that
 * reason: a machine under two names is the same list written less
 * visibly, so it is refused the same way, naming both. */
int asr_map_check_hosts(const asr_config_t *cfg, const char *local_hostname, asr_map_here_fn here, void *arg,
                        char *errbuf, size_t errlen) {
  host_set_t hs;
  if (cfg->nhosts < 2) return 0;
  int rc = host_set_init(&hs, cfg, local_hostname, errbuf, errlen);
  if (rc) return rc;
  int first = -1, second = -1, slots = 0;
  for (int h = 0; h < hs.n; h++) {
    if (!here(cfg, hs.v[h].name, arg)) continue;
    if (first < 0)
      first = h;
    else if (second < 0)
      second = h;
    slots += host_slots(cfg, &hs, h, cfg->npernode);
  }
  if (second < 0) return 0;
  int local = cfg->launcher == ASR_LAUNCHER_LOCAL;
  return asr_errf(errbuf, errlen, ASR_ECONFIG,
                  "hosts '%s' and '%s' are both this machine (%s)%s, and asrrun starts one asrd per "
                  "machine: list it once, with all %d of its slots",
                  hs.v[first].name, hs.v[second].name,
                  local_hostname && *local_hostname ? local_hostname : "localhost",
                  local ? " under --launcher local, which starts every asrd here" : "", slots);
}

void asr_map_free(asr_map_t *map) {
  free(map->host_names);
  free(map->nlocal);
  free(map->ranks);
  free(map->warnings);
  memset(map, 0, sizeof *map);
}

static void print_header(const asr_map_t *map, const asr_config_t *cfg, FILE *out) {
  fprintf(out, "asrrun dry run: %d rank%s on %d host%s", map->nranks, map->nranks == 1 ? "" : "s",
          map->nhosts, map->nhosts == 1 ? "" : "s");
  if (cfg) {
    char map_by[64];
    asr__config_map_by_format(cfg, map_by, sizeof map_by);
    if (cfg->nrf)
      fprintf(out, " (rankfile %s, bind-to %s): %s", cfg->rankfile, asr__config_bind_to_name(cfg->bind_to),
              cfg->program);
    else
      fprintf(out, " (map-by %s, bind-to %s): %s", map_by, asr__config_bind_to_name(cfg->bind_to),
              cfg->program);
    for (int i = 0; i < cfg->nargs; i++) fprintf(out, " %s", cfg->args[i]);
  }
  fputc('\n', out);
}

void asr_map_print(const asr_map_t *map, const asr_config_t *cfg, FILE *out) {
  print_header(map, cfg, out);
  for (int r = 0; r < map->nranks; r++)
    fprintf(out, "rank %d -> host %s lnc %d\n", map->ranks[r].rank, map->host_names[map->ranks[r].host],
            map->ranks[r].lnc);
  for (int h = 0; h < map->nhosts; h++)
    fprintf(out, "host %s: %d rank%s\n", map->host_names[h], map->nlocal[h], map->nlocal[h] == 1 ? "" : "s");
}

void asr_map_print_bindings(const asr_map_t *map, const asr_config_t *cfg, const asr_topo_t *topo,
                            FILE *out) {
  if (!topo) {
    fprintf(out, "bindings: not shown (hwloc could not load this host's topology)\n");
    return;
  }
  char shape[160], line[640], err[256];
  asr_bind_policy_t p;
  asr_bind_policy_of(cfg, &p);
  asr_topo_describe(topo, shape, sizeof shape);
  fprintf(out, "bindings, each host taken to be like this one (%s):\n", shape);
  for (int r = 0; r < map->nranks; r++) {
    const asr_map_rank_t *mr = &map->ranks[r];
    asr_binding_t b;
    if (asr_bind_rank(topo, &p, mr->lnc, map->nlocal[mr->host], mr->cores, &b, NULL, err, sizeof err) != 0) {
      fprintf(out, "rank %d (host %s, lnc %d): %s\n", r, map->host_names[mr->host], mr->lnc, err);
      continue;
    }
    asr_bind_format(&b, r, map->host_names[mr->host], mr->lnc, line, sizeof line);
    fprintf(out, "%s\n", line);
  }
}
