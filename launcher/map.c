/*
 * map.c -- rank placement for asrrun (--map-by slot|node) and its --dry-run
 * printout. See map.h for the rules.
 */
#include "config.h"

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
    return asr__config_fail(errbuf, errlen, "this host's name '%.40s...' is longer than %zu bytes; use -H",
                            name, sizeof hs->local.name - 1);
  snprintf(hs->local.name, sizeof hs->local.name, "%s", name);
  hs->v = &hs->local;
  hs->n = 1;
  hs->implicit_local = 1;
  return 0;
}

/* A host's slot count: its own, else --lnc-per-host, else, when the job runs
 * on this host alone, -n (so "asrrun -n 8 prog" needs no host list), else 1. */
static int host_slots(const asr_config_t *cfg, const host_set_t *hs, int h) {
  if (hs->v[h].slots > 0) return hs->v[h].slots;
  if (cfg->lnc_per_host > 0) return cfg->lnc_per_host;
  if (hs->implicit_local && cfg->np > 0) return cfg->np;
  return 1;
}

/* Fills slots[] and returns the total, or ASR_ECONFIG for a host over the
 * LNC limit: an LNC is 0..127, so a host can run at most 128 ranks. */
static int count_slots(const asr_config_t *cfg, const host_set_t *hs, int *slots, char *errbuf,
                       size_t errlen) {
  int total = 0;
  for (int h = 0; h < hs->n; h++) {
    slots[h] = host_slots(cfg, hs, h);
    if (slots[h] <= ASR_CFG_MAX_SLOTS) {
      total += slots[h];
    } else if (hs->implicit_local && hs->v[h].slots == 0 && cfg->lnc_per_host == 0) {
      return asr__config_fail(errbuf, errlen,
                              "-n %d puts %d ranks on host '%s' but a host runs at most %d (one per LNC); "
                              "add hosts with -H or --hostfile",
                              cfg->np, slots[h], hs->v[h].name, ASR_CFG_MAX_SLOTS);
    } else {
      return asr__config_fail(errbuf, errlen,
                              "host '%s' has %d slots but a host runs at most %d ranks (one per LNC); "
                              "lower its slots or add hosts",
                              hs->v[h].name, slots[h], ASR_CFG_MAX_SLOTS);
    }
  }
  return total;
}

static int too_many_ranks(int np, int total, int nhosts, char *errbuf, size_t errlen) {
  return asr__config_fail(errbuf, errlen,
                          "%d rank%s requested but only %d slot%s on %d host%s; add hosts or slots, or use "
                          "--lnc-per-host",
                          np, np == 1 ? "" : "s", total, total == 1 ? "" : "s", nhosts,
                          nhosts == 1 ? "" : "s");
}

/* Places rank r on a host: by slot, the first host with a free slot (host 0
 * fills up first); by node, the next host round robin that still has one.
 * np <= the total slot count, so a free slot always exists. */
static void place_ranks(asr_map_by_t by, int np, int nh, const int *slots, int *used, int *host_of,
                        int *lnc_of) {
  int h = 0;
  for (int r = 0; r < np; r++) {
    while (used[h] == slots[h]) h = by == ASR_MAP_NODE ? (h + 1) % nh : h + 1;
    host_of[r] = h;
    lnc_of[r] = used[h]++;
    if (by == ASR_MAP_NODE) h = (h + 1) % nh;
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

int asr_map_build(const asr_config_t *cfg, const char *local_hostname, asr_map_t *map, char *errbuf,
                  size_t errlen) {
  host_set_t hs;
  asr_map_t m = {0};
  int rc = host_set_init(&hs, cfg, local_hostname, errbuf, errlen);
  if (rc) return rc;
  int *slots = calloc((size_t)hs.n, sizeof *slots), *used = calloc((size_t)hs.n, sizeof *used);
  int *new_index = calloc((size_t)hs.n, sizeof *new_index);
  int total = slots ? count_slots(cfg, &hs, slots, errbuf, errlen) : ASR_ENOMEM;
  int np = cfg->np > 0 ? cfg->np : total;
  int *host_of = NULL, *lnc_of = NULL;
  if (total < 0) {
    rc = total;
  } else if (np > total) {
    rc = too_many_ranks(np, total, hs.n, errbuf, errlen);
  } else if (!used || !new_index || !(host_of = calloc((size_t)np, sizeof *host_of)) ||
             !(lnc_of = calloc((size_t)np, sizeof *lnc_of))) {
    rc = ASR_ENOMEM;
  } else {
    place_ranks(cfg->map_by, np, hs.n, slots, used, host_of, lnc_of);
    rc = fill_map(&m, &hs, np, used, host_of, lnc_of, new_index);
  }
  if (rc == ASR_ENOMEM) asr__config_fail(errbuf, errlen, "out of memory while mapping %d ranks", np);
  free(slots);
  free(used);
  free(new_index);
  free(host_of);
  free(lnc_of);
  if (rc) {
    asr_map_free(&m);
    return rc;
  }
  *map = m;
  return 0;
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
    slots += host_slots(cfg, &hs, h);
  }
  if (second < 0) return 0;
  int local = cfg->launcher == ASR_LAUNCHER_LOCAL;
  return asr__config_fail(errbuf, errlen,
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
  memset(map, 0, sizeof *map);
}

static void print_header(const asr_map_t *map, const asr_config_t *cfg, FILE *out) {
  fprintf(out, "asrrun dry run: %d rank%s on %d host%s", map->nranks, map->nranks == 1 ? "" : "s",
          map->nhosts, map->nhosts == 1 ? "" : "s");
  if (cfg) {
    fprintf(out, " (map-by %s, bind-to %s): %s", asr__config_map_by_name(cfg->map_by),
            asr__config_bind_to_name(cfg->bind_to), cfg->program);
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
