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

#include "asrd.h"
#include "job_config.h"

static hwloc_topology_t topo;
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

static void load_topology(void) {
  topo_state = -1;
  if (hwloc_topology_init(&topo) != 0) return;
#if HWLOC_API_VERSION >= 0x00020800
  /* neither binding nor the PMIx server reads these: skip their discovery */
  hwloc_topology_set_flags(topo, HWLOC_TOPOLOGY_FLAG_NO_DISTANCES | HWLOC_TOPOLOGY_FLAG_NO_MEMATTRS |
                                     HWLOC_TOPOLOGY_FLAG_NO_CPUKINDS);
#endif
  /* nor these (binding is to cores, NUMA nodes or packages) */
  hwloc_topology_set_cache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_icache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
#if defined(__linux__) && HWLOC_API_VERSION >= 0x00020100
  /* On Linux the sysfs backend finds packages, cores, caches and NUMA
   * nodes by itself; the x86 (cpuid) backend on top of it only annotates,
   * and doubled the load time. */
  hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
#endif
  if (hwloc_topology_load(topo) == 0)
    topo_state = 1;
  else
    hwloc_topology_destroy(topo);
}

/* The load (about 1 ms) runs on a thread of its own, started first thing,
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
  return topo_state == 1 ? topo : NULL;
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

static hwloc_obj_type_t bind_type(int bind_to) {
  switch (bind_to) {
    case ASR_BIND_CORE: return HWLOC_OBJ_CORE;
    case ASR_BIND_NUMA: return HWLOC_OBJ_NUMANODE;
    case ASR_BIND_PACKAGE: return HWLOC_OBJ_PACKAGE;
    default: return HWLOC_OBJ_MACHINE;
  }
}

const char *asrd_topo_bind_name(int bind_to) {
  switch (bind_to) {
    case ASR_BIND_CORE: return "core";
    case ASR_BIND_NUMA: return "numa";
    case ASR_BIND_PACKAGE: return "package";
    default: return "none";
  }
}

int asrd_topo_binding(int bind_to, int local, cpu_set_t *cpus, int *obj_index, char *list, size_t listlen) {
  snprintf(list, listlen, "all");
  *obj_index = -1;
  if (bind_to == ASR_BIND_NONE || !asrd_topo()) return 1;
  /* round robin over the objects of the type; none of it (no NUMA objects,
   * say): the whole machine */
  hwloc_const_cpuset_t set;
  int n = hwloc_get_nbobjs_by_type(topo, bind_type(bind_to));
  if (n <= 0) {
    *obj_index = 0;
    set = hwloc_topology_get_topology_cpuset(topo);
  } else {
    hwloc_obj_t o = hwloc_get_obj_by_type(topo, bind_type(bind_to), (unsigned)(local % n));
    *obj_index = (int)o->logical_index;
    set = o->cpuset;
  }
  hwloc_bitmap_list_snprintf(list, listlen, set);
  /* The child is single-threaded: binding it is sched_setaffinity, which is
   * what hwloc_set_cpubind(HWLOC_CPUBIND_PROCESS) does for each thread. */
  return hwloc_cpuset_to_glibc_sched_affinity(topo, set, cpus, sizeof *cpus) == 0 ? 0 : 1;
}
