/*
 * asrd_topo.c -- this host's hwloc topology, loaded once (and lent to the
 * PMIx server), and each rank's binding in it (asrd.h).
 */
#include "config.h"

#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asrd.h"
#include "bind.h"
#include "job_config.h"

static asr_topo_t *topo;
static int topo_state; /* 0: not tried yet, 1: loaded, -1: failed */

/* hwloc dlopens every plugin it finds at its first topology_init: on Debian
 * that is OpenCL, X11 (gl), libxml2 with ICU, and PCI, most of its start-up
 * time. Nothing here needs them (no I/O objects, no XML export), so they stay
 * out. The variable is set once, before asrd's first topology (and before
 * any other thread reads the environment), and stays set; when we set it,
 * the ranks' environment leaves it out (asrd_spawn.c), so the ranks see
 * hwloc as the user configured it. */
#define PLUGINS_BLACKLIST \
  "hwloc_pci,hwloc_opencl,hwloc_gl,hwloc_xml_libxml,hwloc_cuda,hwloc_nvml,hwloc_rsmi,hwloc_levelzero"
static int topo_env_set;

static void topo_env(void) {
  static int done;
  if (done) return;
  done = 1;
  topo_env_set = !getenv("HWLOC_PLUGINS_BLACKLIST");
  if (topo_env_set) setenv("HWLOC_PLUGINS_BLACKLIST", PLUGINS_BLACKLIST, 1);
}

int asrd_topo_env_set(void) { return topo_env_set; }

/* The same load as asrrun's dry run (bind.c), so both see one topology. */
static void load_topology(void) {
  char err[256];
  topo_state = asr_topo_load(NULL, &topo, err, sizeof err) == 0 ? 1 : -1;
}

/* The load runs on a thread of its own, started first thing,
 * on another CPU than asrd's main thread where there is one: the main
 * thread meanwhile calls asrrun back and starts the PMIx server, and the
 * ranks need the topology only once the job is registered. (Left to the
 * scheduler, the new thread waited on the main thread's CPU while the other
 * one idled.) */
static pthread_t topo_thread;
static int topo_thread_running;

static void *topo_thread_main(void *arg) {
  load_topology();
  return arg;
}

void asrd_topo_start(void) {
  if (topo_state != 0 || topo_thread_running) return;
  topo_env();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  cpu_set_t others;
  int cpu = sched_getcpu();
  if (sched_getaffinity(0, sizeof others, &others) == 0 && cpu >= 0 && cpu < CPU_SETSIZE &&
      CPU_ISSET(cpu, &others) && CPU_COUNT(&others) >= 2) {
    CPU_CLR(cpu, &others);
    pthread_attr_setaffinity_np(&attr, sizeof others, &others);
  }
  /* if it cannot start, asrd_topo loads on the caller's thread */
  topo_thread_running = pthread_create(&topo_thread, &attr, topo_thread_main, NULL) == 0;
  if (topo_thread_running) (void)pthread_setname_np(topo_thread, "asrd-topology");
  pthread_attr_destroy(&attr);
}

void *asrd_topo(void) {
  if (topo_thread_running) {
    pthread_join(topo_thread, NULL);
    topo_thread_running = 0;
  } else if (topo_state == 0) {
    topo_env();
    load_topology();
  }
  return topo_state == 1 ? asr_topo_hwloc(topo) : NULL;
}

void *asrd_topo_generic(void) {
  static hwloc_topology_t generic;
  static int state; /* as topo_state */
  if (state == 0) {
    topo_env();
    state = -1;
    if (hwloc_topology_init(&generic) == 0) {
      /* without the OS backend and cpuid, hwloc's OS-independent discovery
       * remains: the machine and its processors */
      hwloc_topology_set_components(generic, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "linux");
      hwloc_topology_set_components(generic, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
      if (hwloc_topology_load(generic) == 0)
        state = 1;
      else
        hwloc_topology_destroy(generic);
    }
  }
  return state == 1 ? generic : NULL;
}

int asrd_topo_oversubscribed(int nlocal, int cpus_per_rank) {
  int ncores = asrd_topo() ? asr_topo_count(topo, ASR_BIND_CORE) : 0;
  cpu_set_t mine;
  if (sched_getaffinity(0, sizeof mine, &mine) == 0 && (ncores == 0 || CPU_COUNT(&mine) < ncores))
    ncores = CPU_COUNT(&mine);
  if (ncores <= 0) return 0; /* nothing known: not claimed */
  return (long)nlocal * (cpus_per_rank > 0 ? cpus_per_rank : 1) > ncores;
}

int asrd_topo_binding(const asr_bind_policy_t *p, int local, int nlocal, const char *cores, cpu_set_t *cpus,
                      asr_binding_t *b, char *errbuf, size_t errlen) {
  memset(b, 0, sizeof *b);
  snprintf(b->cpus, sizeof b->cpus, "all");
  if ((p->bind_to == ASR_BIND_NONE && !cores) || !asrd_topo()) return 1;
  int rc = asr_bind_rank(topo, p, local, nlocal, cores, b, cpus, errbuf, errlen);
  if (rc) return rc;
  return b->bound ? 0 : 1;
}
