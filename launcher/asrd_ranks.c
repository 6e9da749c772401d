/*
 * asrd_ranks.c -- the local ranks: environment, hwloc binding, spawning,
 * output capture (whole lines only), stdin for rank 0, reaping and signals.
 *
 * Start-up cost matters here (asrrun -n N /bin/true is benchmarked against
 * mpiexec): the environment common to every rank is built once, the hwloc
 * topology is loaded once (and lent to the PMIx server), and ranks are started
 * with clone(CLONE_VM) without waiting for their execve (see "spawning").
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asr_log.h"
#include "asrd.h"
#include "asrd_shm.h"
#include "job_config.h"

#define LINE_MAX_BYTES 65536 /* a longer "line" is sent in pieces */

extern char **environ;

static hwloc_topology_t topo;
static int topo_state; /* 0: not tried yet, 1: loaded, -1: failed */

/* hwloc dlopens every plugin it finds at its first topology_init: on Debian
 * that is OpenCL, X11 (gl), libxml2 with ICU, and PCI, most of its start-up
 * time. Nothing here needs them (no I/O objects, no XML export), so they stay
 * out. The variable is set once, before asrd's first topology (and before
 * any other thread reads the environment), and stays set; when we set it,
 * the ranks' environment leaves it out (build_base_env), so the ranks see
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
   * and doubled the load time (2.6 -> 1.3 ms here). */
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

void asrd_ranks_topology_start(void) {
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
  /* if it cannot start, asrd_ranks_topology loads on the caller's thread */
  topo_thread_running = pthread_create(&topo_thread, &attr, topo_thread_main, NULL) == 0;
  if (topo_thread_running) (void)pthread_setname_np(topo_thread, "asrd-topology");
  pthread_attr_destroy(&attr);
}

void *asrd_ranks_topology(void) {
  if (topo_thread_running) {
    pthread_join(topo_thread, NULL);
    topo_thread_running = 0;
  } else if (topo_state == 0) {
    topo_env();
    load_topology();
  }
  return topo_state == 1 ? topo : NULL;
}

void *asrd_ranks_generic_topology(void) {
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

static const char *bind_name(int bind_to) {
  switch (bind_to) {
    case ASR_BIND_CORE: return "core";
    case ASR_BIND_NUMA: return "numa";
    case ASR_BIND_PACKAGE: return "package";
    default: return "none";
  }
}

/* The cpuset for local rank `local` (round robin over the objects), or NULL. */
static hwloc_const_cpuset_t pick_cpuset(int bind_to, int local, int *obj_index) {
  if (bind_to == ASR_BIND_NONE || !asrd_ranks_topology()) return NULL;
  int n = hwloc_get_nbobjs_by_type(topo, bind_type(bind_to));
  if (n <= 0) { /* e.g. no NUMA objects: fall back to the whole machine */
    *obj_index = 0;
    return hwloc_topology_get_topology_cpuset(topo);
  }
  hwloc_obj_t o = hwloc_get_obj_by_type(topo, bind_type(bind_to), (unsigned)(local % n));
  *obj_index = (int)o->logical_index;
  return o->cpuset;
}

static int env_has_prefix(const char *e, const char *name) {
  size_t n = strlen(name);
  return strncmp(e, name, n) == 0 && e[n] == '=';
}

/* The environment every local rank shares, built once per job: ours minus
 * what we set, the ASR_* variables, the -x list. The slots of the three
 * per-rank variables are NULL here and filled in by rank_env. */
static char **base_env;
static size_t nbase, slot_rank, slot_lnc, slot_local;

static int build_base_env(asrd_t *d) {
  size_t n = 0;
  while (environ[n]) n++;
  base_env = calloc(n + (size_t)d->nenv + 32, sizeof *base_env);
  if (!base_env) return -1;
  size_t k = 0;
  static const char *const ours[] = {"ASR_RANK",       "ASR_SIZE",
                                     "ASR_LNC",        "ASR_LOCAL_RANK",
                                     "ASR_LOCAL_SIZE", "ASR_BOOTSTRAP_PORT",
                                     "ASR_JOB_SECRET", "ASR_HOSTNAME",
                                     "ASR_KV_SERVER",  "ASR_PROVIDER",
                                     "ASR_IF_ADDR",    "ASR_NUM_HOSTS",
                                     "ASR_HOST_INDEX", NULL};
  for (size_t i = 0; i < n; i++) {
    int skip = strncmp(environ[i], "PMIX_", 5) == 0 ||
               (topo_env_set && env_has_prefix(environ[i], "HWLOC_PLUGINS_BLACKLIST"));
    for (int j = 0; ours[j] && !skip; j++) skip = env_has_prefix(environ[i], ours[j]);
    for (int j = 0; j < d->nenv && !skip; j++) skip = env_has_prefix(environ[i], d->env_names[j]);
    if (!skip) base_env[k++] = environ[i]; /* borrowed: copied per rank */
  }
  char tmp[1200];
#define SETENV(fmt, ...)                         \
  do {                                           \
    snprintf(tmp, sizeof tmp, fmt, __VA_ARGS__); \
    base_env[k++] = strdup(tmp);                 \
  } while (0)
  slot_rank = k++;
  SETENV("ASR_SIZE=%d", d->nranks);
  slot_lnc = k++;
  slot_local = k++;
  SETENV("ASR_LOCAL_SIZE=%d", d->nlocal);
  SETENV("ASR_BOOTSTRAP_PORT=%d", d->port);
  SETENV("ASR_JOB_SECRET=%s", d->secret_hex);
  SETENV("ASR_HOSTNAME=%s", d->hostname);
  SETENV("ASR_KV_SERVER=%s", "external");
  SETENV("ASR_NUM_HOSTS=%d", d->nhosts);
  SETENV("ASR_HOST_INDEX=%d", d->host_index);
  if (d->provider && *d->provider) SETENV("ASR_PROVIDER=%s", d->provider);
  if (d->if_addr && *d->if_addr) SETENV("ASR_IF_ADDR=%s", d->if_addr);
  for (int j = 0; j < d->nenv; j++) SETENV("%s=%s", d->env_names[j], d->env_values[j]);
#undef SETENV
  nbase = k;
  return 0;
}

static void free_base_env(void) {
  for (size_t i = slot_rank; i < nbase; i++) free(base_env[i]); /* the rest is environ's */
  free(base_env);
  base_env = NULL;
  nbase = 0;
}

/* Rank r's environment: a malloc'd copy of every string, as PMIx's
 * setup_fork may replace or append entries (and frees what it replaces). */
static char **rank_env(asrd_rank_t *r) {
  char **env = calloc(nbase + 1, sizeof *env);
  if (!env) return NULL;
  for (size_t i = 0; i < nbase; i++) {
    int rc = 0;
    if (i == slot_rank)
      rc = asprintf(&env[i], "ASR_RANK=%d", r->rank);
    else if (i == slot_lnc)
      rc = asprintf(&env[i], "ASR_LNC=%d", r->lnc);
    else if (i == slot_local)
      rc = asprintf(&env[i], "ASR_LOCAL_RANK=%d", r->local);
    else
      env[i] = base_env[i] ? strdup(base_env[i]) : NULL;
    if (rc < 0) env[i] = NULL;
    if (!env[i]) {
      for (size_t j = 0; j < i; j++) free(env[j]);
      free(env);
      return NULL;
    }
  }
  return env;
}

static void free_env(char **env) {
  if (!env) return;
  for (char **e = env; *e; e++) free(*e);
  free(env);
}

static int pipe_nb(int p[2]) {
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  return 0;
}

/* --- spawning ---------------------------------------------------------------------- */

/*
 * Ranks are started with clone(CLONE_VM): the child runs on our memory, so
 * nothing is copied (fork would copy this daemon's page tables for every
 * rank), and, unlike vfork, we do not wait for its execve before starting the
 * next one (waiting cost about 1 ms a rank on a 2-vCPU VM: cross-CPU wake-ups
 * while the CPUs idle, twice the time of the whole spawn). The price: until
 * its execve the child shares our memory while our threads keep running, so
 * it makes raw system calls only (in libc, errno and every lock live in
 * memory we are using), reads only its slot and writes only its results
 * there. The kernel zeroes slot->tid once the child has exec'd or exited
 * (CLONE_CHILD_CLEARTID); only then is the slot (stack, environment) reused.
 * Where raw system calls are not written out below, the child is a vfork
 * child instead (CLONE_VFORK: we wait for its execve) using libc.
 */
#if defined(__x86_64__)
#define SPAWN_RAW 1
static inline __attribute__((always_inline)) long raw_sys(long n, long a, long b, long c, long d) {
  register long r10 __asm__("r10") = d;
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
  return ret;
}
#elif defined(__aarch64__)
#define SPAWN_RAW 1
static inline __attribute__((always_inline)) long raw_sys(long n, long a, long b, long c, long d) {
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory", "cc");
  return x0;
}
#else
#define SPAWN_RAW 0
static long raw_sys(long n, long a, long b, long c, long d) {
  long r = syscall(n, a, b, c, d);
  return r == -1 ? -errno : r;
}
#endif

#if SPAWN_RAW
/* The kernel's struct sigaction on x86_64 and aarch64; all zero is SIG_DFL. */
struct ksigaction {
  void *handler;
  unsigned long flags;
  void *restorer;
  unsigned long mask;
};
static const struct ksigaction ksig_default;
static const unsigned long ksig_empty; /* an empty signal mask */
#endif

/* TSan's runtime cannot run a CLONE_VM child on our memory (its shadow state
 * is shared with us): the TSan build forks each rank instead, and the child
 * reports an exec failure itself. */
#if defined(__SANITIZE_THREAD__)
#define SPAWN_FORK 1
#else
#define SPAWN_FORK 0
#endif

#define SPAWN_SLOTS 32          /* children between clone and execve at once */
#define SPAWN_STACK (32 * 1024) /* the child's stack: a few system calls */

typedef struct {
  volatile pid_t tid; /* nonzero until the child has exec'd or exited */
  char *stack;
  /* read by the child */
  const char *path; /* the program, searched in PATH (NULL: not found) */
  char *const *argv, *const *sh_argv, *const *envp;
  int fds[3]; /* become its 0, 1, 2 */
  cpu_set_t cpus;
  int bind;
  pid_t parent;
  /* written by the child */
  int bind_err, exec_err;
  const char *program, *hostname; /* for the SPAWN_FORK child's message */
  /* ours: what to finish once the child is past its execve */
  asrd_rank_t *rank;
  char **env;
  int err_w; /* our copy of its stderr, for our messages about it */
} spawn_slot_t;

static spawn_slot_t *slots;
static int devnull = -1; /* every rank's stdin but rank 0's */
static char *slot_stacks;
static int handled_sigs[_NSIG], nhandled_sigs;
static const char **job_argv, **job_sh_argv;
static char job_path[4096];
static int job_path_found;

/* The child. Everything it uses is in *s or constant; see above. No
 * sanitizer instruments it: its stack is none they know, and their runtimes
 * keep per-thread state in memory it shares with us. */
__attribute__((no_sanitize("address", "undefined", "thread"))) static int spawn_child(void *arg) {
  spawn_slot_t *s = arg;
  raw_sys(SYS_setpgid, 0, 0, 0, 0); /* its own group: a signal reaches whatever it starts */
  /* If asrd dies (even by SIGKILL) its ranks must not outlive it. */
  raw_sys(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0);
  if (raw_sys(SYS_getppid, 0, 0, 0, 0) != s->parent) raw_sys(SYS_exit_group, 127, 0, 0, 0);
  /* Every signal is blocked (we blocked them around clone) until the execve,
   * and none of our handlers may ever run here, on our memory. */
  for (int i = 0; i < nhandled_sigs; i++) {
#if SPAWN_RAW
    raw_sys(SYS_rt_sigaction, handled_sigs[i], (long)&ksig_default, 0, sizeof ksig_empty);
#else
    signal(handled_sigs[i], SIG_DFL);
#endif
  }
#if SPAWN_RAW
  raw_sys(SYS_rt_sigaction, SIGPIPE, (long)&ksig_default, 0, sizeof ksig_empty);
#else
  signal(SIGPIPE, SIG_DFL);
#endif
  for (int i = 0; i < 3; i++) {
    if (s->fds[i] != i)
      raw_sys(SYS_dup3, s->fds[i], i, 0, 0);
    else
      raw_sys(SYS_fcntl, i, F_SETFD, 0, 0); /* keep it across the execve */
  }
  if (s->bind) {
    long rc = raw_sys(SYS_sched_setaffinity, 0, sizeof s->cpus, (long)&s->cpus, 0);
    if (rc < 0) s->bind_err = (int)-rc;
  }
#if SPAWN_RAW
  raw_sys(SYS_rt_sigprocmask, SIG_SETMASK, (long)&ksig_empty, 0, sizeof ksig_empty);
#else
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
#endif
  long rc = -ENOENT;
  if (s->path) {
    rc = raw_sys(SYS_execve, (long)s->path, (long)s->argv, (long)s->envp, 0);
    /* execvp's rule: a file the kernel cannot run is a shell script */
    if (rc == -ENOEXEC) rc = raw_sys(SYS_execve, (long)s->sh_argv[0], (long)s->sh_argv, (long)s->envp, 0);
  }
  s->exec_err = (int)-rc;
#if SPAWN_FORK
  /* our own copy of memory: libc is usable, and nobody reads s->exec_err */
  dprintf(2, "asrrun: cannot execute '%s' on host %s: %s\n", s->program, s->hostname, strerror(s->exec_err));
#endif
  raw_sys(SYS_exit_group, 127, 0, 0, 0);
  return 127;
}

/* execvpe's search of PATH (ours, as execvpe used), done once per job. */
static void find_program(const char *prog) {
  job_path_found = 0;
  if (strchr(prog, '/')) {
    job_path_found = snprintf(job_path, sizeof job_path, "%s", prog) < (int)sizeof job_path;
    return;
  }
  const char *path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin"; /* glibc's default */
  for (const char *p = path;; p++) {
    const char *end = strchr(p, ':');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    int k = snprintf(job_path, sizeof job_path, "%.*s%s%s", (int)n, p, n ? "/" : "", prog);
    struct stat st;
    if (k < (int)sizeof job_path && stat(job_path, &st) == 0 && S_ISREG(st.st_mode) &&
        access(job_path, X_OK) == 0) {
      job_path_found = 1;
      return;
    }
    if (!end) return;
    p = end;
  }
}

static void spawn_cleanup(void) {
  if (slot_stacks) munmap(slot_stacks, (size_t)SPAWN_SLOTS * SPAWN_STACK);
  slot_stacks = NULL;
  free(slots);
  slots = NULL;
  free(job_argv);
  free(job_sh_argv);
  job_argv = job_sh_argv = NULL;
}

/* Once per job: the slots and their stacks, argv (the same for every rank),
 * the program's path, and which signals have a handler here. */
static int spawn_prepare(asrd_t *d) {
  slots = calloc(SPAWN_SLOTS, sizeof *slots);
  job_argv = calloc((size_t)d->nargs + 2, sizeof *job_argv);
  job_sh_argv = calloc((size_t)d->nargs + 3, sizeof *job_sh_argv);
  void *st = mmap(NULL, (size_t)SPAWN_SLOTS * SPAWN_STACK, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (!slots || !job_argv || !job_sh_argv || st == MAP_FAILED) {
    if (st != MAP_FAILED) munmap(st, (size_t)SPAWN_SLOTS * SPAWN_STACK);
    spawn_cleanup();
    return -1;
  }
  slot_stacks = st;
  for (int i = 0; i < SPAWN_SLOTS; i++) slots[i].stack = slot_stacks + (size_t)i * SPAWN_STACK;
  find_program(d->program);
  job_argv[0] = d->program;
  job_sh_argv[0] = "/bin/sh";
  job_sh_argv[1] = job_path;
  for (int i = 0; i < d->nargs; i++) job_argv[i + 1] = job_sh_argv[i + 2] = d->args[i];
  nhandled_sigs = 0;
  for (int sig = 1; sig < _NSIG; sig++) {
    struct sigaction sa;
    if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) != 0) continue;
    if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN) handled_sigs[nhandled_sigs++] = sig;
  }
  return 0;
}

/* Waits until the slot's child is past its execve, writes what went wrong
 * to the rank's stderr as if the child had, and frees the slot. */
static void spawn_finish(asrd_t *d, spawn_slot_t *s) {
  if (!s->rank) return;
  pid_t t;
  while ((t = __atomic_load_n(&s->tid, __ATOMIC_ACQUIRE)) != 0)
    syscall(SYS_futex, &s->tid, FUTEX_WAIT, t, NULL, NULL, 0);
  if (s->bind_err)
    dprintf(s->err_w, "asrrun: warning: cannot bind rank %d: %s\n", s->rank->rank, strerror(s->bind_err));
  if (s->exec_err)
    dprintf(s->err_w, "asrrun: cannot execute '%s' on host %s: %s\n", d->program, d->hostname,
            strerror(s->exec_err));
  close(s->err_w);
  free_env(s->env);
  s->env = NULL;
  s->rank = NULL;
}

/* Starts one rank in slot s. Its stdout/stderr go to pipes we read; rank 0's
 * stdin is a pipe fed from asrrun, everyone else's is /dev/null. */
static int start_rank(asrd_t *d, asrd_rank_t *r, spawn_slot_t *s, char *errbuf, size_t errlen) {
  char **env = rank_env(r);
  if (!env || asrd_pmix_setup_rank(d, r, &env) != 0) {
    free_env(env);
    snprintf(errbuf, errlen, "cannot prepare the environment of rank %d", r->rank);
    return -1;
  }
  int op[2], ep[2], ip[2] = {-1, -1};
  if (pipe_nb(op) || pipe_nb(ep) || (r->rank == 0 && pipe2(ip, O_CLOEXEC) != 0)) {
    free_env(env);
    snprintf(errbuf, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  int obj = -1;
  hwloc_const_cpuset_t set = pick_cpuset(d->bind_to, r->local, &obj);
  if (d->report_bindings) {
    char line[512], cpus[256] = "all";
    if (set) hwloc_bitmap_list_snprintf(cpus, sizeof cpus, set);
    int n = d->bind_to == ASR_BIND_NONE
                ? snprintf(line, sizeof line, "asrrun: rank %d (host %s, lnc %d) not bound", r->rank,
                           d->hostname, r->lnc)
                : snprintf(line, sizeof line, "asrrun: rank %d (host %s, lnc %d) bound to %s %d: cpus %s",
                           r->rank, d->hostname, r->lnc, bind_name(d->bind_to), obj, cpus);
    asrd_send_output(d, r->rank, 2, line, (size_t)n);
  }
  s->path = job_path_found ? job_path : NULL;
  s->argv = (char *const *)job_argv;
  s->sh_argv = (char *const *)job_sh_argv;
  s->envp = env;
  s->fds[0] = ip[0] >= 0 ? ip[0] : devnull;
  s->fds[1] = op[1];
  s->fds[2] = ep[1];
  /* The child is single-threaded: binding it is sched_setaffinity, which is
   * what hwloc_set_cpubind(HWLOC_CPUBIND_PROCESS) does for each thread. */
  s->bind = set && hwloc_cpuset_to_glibc_sched_affinity(topo, set, &s->cpus, sizeof s->cpus) == 0;
  s->parent = getpid();
  s->bind_err = s->exec_err = 0;
  s->tid = 1;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  s->program = d->program;
  s->hostname = d->hostname;
#if SPAWN_FORK
  pid_t pid = fork();
  if (pid == 0) spawn_child(s);
  int clone_errno = errno;
  s->tid = 0; /* nothing of the child's is in our memory */
#else
  pid_t pid = clone(spawn_child, s->stack + SPAWN_STACK,
                    CLONE_VM | CLONE_CHILD_CLEARTID | SIGCHLD | (SPAWN_RAW ? 0 : CLONE_VFORK), s, NULL, NULL,
                    &s->tid);
  int clone_errno = errno;
#endif
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  /* The child has its own copies of these (or has already exec'd). */
  close(op[1]);
  if (ip[0] >= 0) close(ip[0]);
  if (pid < 0) {
    s->tid = 0;
    free_env(env);
    close(op[0]);
    close(ep[0]);
    close(ep[1]);
    if (ip[1] >= 0) close(ip[1]);
    snprintf(errbuf, errlen, "clone: %s", strerror(clone_errno));
    return -1;
  }
  s->rank = r;
  s->env = env;
  s->err_w = ep[1];
  r->pid = pid;
  r->out_fd = op[0];
  r->err_fd = ep[0];
  r->in_fd = ip[1];
  if (r->in_fd >= 0) fcntl(r->in_fd, F_SETFL, O_NONBLOCK);
  asrd_watch_new(d, r->out_fd, EPOLLIN);
  asrd_watch_new(d, r->err_fd, EPOLLIN);
  d->nalive++;
  return 0;
}

int asrd_ranks_prepare(asrd_t *d, char *errbuf, size_t errlen) {
  for (int i = 0; i < d->nlocal; i++) {
    d->ranks[i].out_fd = d->ranks[i].err_fd = d->ranks[i].in_fd = -1;
  }
  if (d->nlocal == 0) return 0;
  devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || build_base_env(d) != 0 || spawn_prepare(d) != 0) {
    snprintf(errbuf, errlen, "cannot prepare the ranks: %s", strerror(errno));
    if (devnull >= 0) close(devnull);
    devnull = -1;
    free_base_env();
    return -1;
  }
  return 0;
}

int asrd_ranks_start(asrd_t *d, char *errbuf, size_t errlen) {
  if (d->nlocal == 0) return 0;
  int rc = 0;
  for (int i = 0; i < d->nlocal && rc == 0; i++) {
    spawn_slot_t *s = &slots[i % SPAWN_SLOTS];
    spawn_finish(d, s); /* the slot's previous child, if it is still before its execve */
    rc = start_rank(d, &d->ranks[i], s, errbuf, errlen);
  }
  for (int i = 0; i < SPAWN_SLOTS; i++) spawn_finish(d, &slots[i]);
  spawn_cleanup();
  close(devnull);
  devnull = -1;
  free_base_env();
  return rc;
}

/* Sends every whole line in part (and, at EOF, the remainder). */
static void emit_lines(asrd_t *d, asrd_rank_t *r, int stream, asr_buf_t *part, int eof) {
  for (;;) {
    uint8_t *s = part->data + part->off;
    size_t n = part->len - part->off;
    uint8_t *nl = n ? memchr(s, '\n', n) : NULL;
    size_t take;
    if (nl)
      take = (size_t)(nl - s) + 1;
    else if (n >= LINE_MAX_BYTES || (eof && n > 0))
      take = n;
    else
      break;
    size_t len = take;
    if (len && s[len - 1] == '\n') len--;
    asrd_send_output(d, r->rank, stream, (const char *)s, len);
    part->off += take;
  }
  if (part->off == part->len) part->off = part->len = 0;
}

static void close_stream(asrd_t *d, int *fd) {
  if (*fd < 0) return;
  asrd_unwatch(d, *fd);
  close(*fd);
  *fd = -1;
}

/* Reads what a rank wrote on fd. */
static void read_stream(asrd_t *d, asrd_rank_t *r, int stream) {
  int *fd = stream == 1 ? &r->out_fd : &r->err_fd;
  asr_buf_t *part = stream == 1 ? &r->out_part : &r->err_part;
  for (;;) {
    uint8_t buf[16384];
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n > 0) {
      asr_buf_put(part, buf, (size_t)n);
      emit_lines(d, r, stream, part, 0);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    emit_lines(d, r, stream, part, 1); /* EOF: the last partial line */
    close_stream(d, fd);
    return;
  }
}

static void flush_stdin(asrd_t *d, asrd_rank_t *r) {
  while (r->in_fd >= 0 && r->in_queue.len > r->in_queue.off) {
    ssize_t n = write(r->in_fd, r->in_queue.data + r->in_queue.off, r->in_queue.len - r->in_queue.off);
    if (n > 0) {
      r->in_queue.off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EAGAIN) {
      asrd_watch(d, r->in_fd, EPOLLOUT);
      return;
    }
    close_stream(d, &r->in_fd); /* the rank closed its stdin */
    return;
  }
  r->in_queue.off = r->in_queue.len = 0;
  if (r->in_fd >= 0) asrd_unwatch(d, r->in_fd);
  if (r->in_eof) close_stream(d, &r->in_fd);
}

void asrd_ranks_stdin(asrd_t *d, const uint8_t *p, size_t n) {
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    if (r->rank != 0) continue;
    if (n == 0)
      r->in_eof = 1;
    else if (r->in_fd >= 0)
      asr_buf_put(&r->in_queue, p, n);
    flush_stdin(d, r);
  }
}

/* Sends EXIT for ranks whose process is gone and whose output is drained. A
 * rank that failed is reported at once even if a descendant still holds its
 * output open: otherwise nobody learns of the failure, the job is never
 * aborted, and that descendant is never killed. */
static void report_exits(asrd_t *d) {
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    int failed = !(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0);
    if (!r->exited || r->exit_sent || (!failed && (r->out_fd >= 0 || r->err_fd >= 0))) continue;
    asr_buf_t b = {0};
    asr_buf_put_u32(&b, (uint32_t)r->rank);
    asr_buf_put_u32(&b, (uint32_t)r->status);
    asr_ctl_queue(&d->ctl, ASR_CTL_EXIT, &b); /* the main loop flushes */
    asr_buf_free(&b);
    r->exit_sent = 1;
  }
}

void asrd_ranks_on_fd(asrd_t *d, int fd, uint32_t events) {
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    if (fd == r->out_fd)
      read_stream(d, r, 1);
    else if (fd == r->err_fd)
      read_stream(d, r, 2);
    else if (fd == r->in_fd && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
      flush_stdin(d, r);
    else
      continue;
    break;
  }
  report_exits(d);
}

void asrd_ranks_reap(asrd_t *d) {
  pid_t gone[64];
  int ngone = 0;
  for (;;) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid <= 0) break;
    for (int i = 0; i < d->nlocal; i++) {
      asrd_rank_t *r = &d->ranks[i];
      if (r->pid != pid || r->exited) continue;
      /* what libfabric's shm provider may have left of it (asrd_shm.c) */
      if (ngone == (int)(sizeof gone / sizeof gone[0])) {
        asrd_shm_sweep(gone, ngone);
        ngone = 0;
      }
      gone[ngone++] = pid;
      r->exited = 1;
      r->status = st;
      d->nalive--;
      /* Its output may still sit in the pipes: drain what is there now. A
       * descendant that keeps a pipe open delays the EXIT until it is gone. */
      if (r->out_fd >= 0) read_stream(d, r, 1);
      if (r->err_fd >= 0) read_stream(d, r, 2);
      close_stream(d, &r->in_fd);
    }
  }
  asrd_shm_sweep(gone, ngone);
  report_exits(d);
}

void asrd_ranks_signal(asrd_t *d, int sig) {
  for (int i = 0; i < d->nlocal; i++) {
    asrd_rank_t *r = &d->ranks[i];
    if (r->pid <= 0) continue;
    /* The group outlives its leader while anything the rank started is alive
     * (and its id cannot be reused until then): signal it even after the
     * rank itself exited, or such descendants are never killed. */
    kill(-r->pid, sig);
    if (!r->exited) kill(r->pid, sig);
  }
}

int asrd_ranks_all_done(asrd_t *d) {
  for (int i = 0; i < d->nlocal; i++)
    if (!d->ranks[i].exit_sent || d->ranks[i].out_fd >= 0 || d->ranks[i].err_fd >= 0) return 0;
  return 1;
}
