/*
 * asrd_spawn.c -- starting the ranks (asrd.h): the environment every rank
 * shares, built once per job, and the clone() that starts each one.
 *
 * Start-up cost matters here (asrrun -n N /bin/true is benchmarked against
 * mpiexec): the environment common to every rank is built once, and ranks
 * are started with clone(CLONE_VM) without waiting for their execve (see
 * "spawning").
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_netif.h"
#include "asr_sig.h"
#include "asrd.h"

extern char **environ;

/* Where each rank holds its end watch (asrd_ends_fd), for this job. */
static int end_fd = -1;

static int env_has_prefix(const char *e, const char *name) {
  size_t n = strlen(name);
  return strncmp(e, name, n) == 0 && e[n] == '=';
}

/* Whether the job's -x list names name: then the user's value wins over
 * what we would set (torchrun's names: an inherited value is replaced). */
static int job_sets(const asrd_t *d, const char *name) {
  for (uint32_t j = 0; j < d->job.nenv; j++)
    if (strcmp(d->job.env_names[j], name) == 0) return 1;
  return 0;
}

/* The environment every local rank shares, built once per job: ours minus
 * what we set, the ASR_* variables, the variables MPIs look for, the -x
 * list. The slots of the per-rank variables are NULL here and filled in by
 * rank_env. */
static char **base_env;
static size_t nbase, slot_rank, slot_lnc, slot_local, slot_pmi_rank, slot_pmi_fd, slot_trank, slot_tlocal,
    slot_rep_fd, slot_inc;

/* What MPICH's simple PMI client reads (asrd_pmi.c serves it): asrd's own
 * copies of these (asrd started under another launcher) never reach a rank. */
static const char *const pmi_vars[] = {"PMI_FD",         "PMI_PORT",    "PMI_ID",        "PMI_RANK",
                                       "PMI_SIZE",       "PMI_SPAWNED", "PMI_TOTALVIEW", "PMI_VERSION",
                                       "PMI_SUBVERSION", NULL};

/* Open MPI 4.1's app-side launch detection (orte/mca/schizo): its "orte"
 * component claims every process that was not started by its own orted and
 * no other component claims (Slurm's: SLURM_NODELIST and SLURM_STEP_ID,
 * flux's, jsm's) as a singleton, whatever PMIx server is there; without it,
 * ess picks its pmi component, a PMIx client of ours. So the ranks get
 * OMPI_MCA_schizo=^orte -- unless the user set that variable (in asrrun's
 * environment, -x or a job YAML's env): theirs wins. Nothing else reads it. */
static const char *const ompi_vars[][2] = {{"OMPI_MCA_schizo", "^orte"}};

static int user_sets(asrd_t *d, const char *name) {
  for (uint32_t j = 0; j < d->job.nenv; j++)
    if (strcmp(d->job.env_names[j], name) == 0) return 1;
  return getenv(name) != NULL;
}

static int build_base_env(asrd_t *d) {
  size_t n = 0;
  while (environ[n]) n++;
  base_env = calloc(n + (size_t)d->job.nenv + 40, sizeof *base_env);
  if (!base_env) return ASR_ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    /* what we set below: the rows of asr_env.h flagged ASR_ENV_SET */
    const asr_env_row_t *row = asr_env_find(environ[i]);
    int skip = strncmp(environ[i], "PMIX_", 5) == 0 ||
               (asrd_topo_env_set() && env_has_prefix(environ[i], "HWLOC_PLUGINS_BLACKLIST")) ||
               (row && (row->who & ASR_ENV_SET) && env_has_prefix(environ[i], row->name));
    for (uint32_t j = 0; j < d->job.nenv && !skip; j++)
      skip = env_has_prefix(environ[i], d->job.env_names[j]);
    for (int j = 0; pmi_vars[j] && !skip; j++) skip = env_has_prefix(environ[i], pmi_vars[j]);
    if (!skip) base_env[k++] = environ[i]; /* borrowed: copied per rank */
  }
  char tmp[1200];
#define SETENV(fmt, ...)                         \
  do {                                           \
    snprintf(tmp, sizeof tmp, fmt, __VA_ARGS__); \
    base_env[k++] = strdup(tmp);                 \
  } while (0)
  slot_rank = k++;
  slot_inc = k++;
  SETENV("ASR_SIZE=%d", d->nranks);
  slot_lnc = k++;
  slot_local = k++;
  SETENV("ASR_LOCAL_SIZE=%d", d->nlocal);
  /* torchrun's names, so torch.distributed's env:// rendezvous works as
   * under torchrun; the user's -x wins (asr_env.h's rows, ASR_ENV_SET, keep
   * inherited values out above). */
  slot_trank = job_sets(d, "RANK") ? SIZE_MAX : k++;
  slot_tlocal = job_sets(d, "LOCAL_RANK") ? SIZE_MAX : k++;
  if (!job_sets(d, "WORLD_SIZE")) SETENV("WORLD_SIZE=%d", d->nranks);
  if (!job_sets(d, "LOCAL_WORLD_SIZE")) SETENV("LOCAL_WORLD_SIZE=%d", d->nlocal);
  const char *maddr = d->job.master_addr && d->job.master_addr[0] ? d->job.master_addr : d->if_addr;
  if (!job_sets(d, "MASTER_ADDR") && maddr && *maddr) SETENV("MASTER_ADDR=%s", maddr);
  if (!job_sets(d, "MASTER_PORT")) SETENV("MASTER_PORT=%u", d->job.master_port);
  char ifname[64];
  if (d->nhosts > 1 && d->job.if_spec && d->job.if_spec[0] && !job_sets(d, "GLOO_SOCKET_IFNAME") &&
      d->if_addr && asr_netif_name_of(d->if_addr, ifname, sizeof ifname) == 0)
    SETENV("GLOO_SOCKET_IFNAME=%s", ifname);
  SETENV("ASR_BOOTSTRAP_PORT=%d", d->port);
  SETENV("ASR_JOB_SECRET=%s", d->secret_hex);
  SETENV("ASR_HOSTNAME=%s", d->hostname);
  SETENV("ASR_KV_SERVER=%s", "external");
  /* --addr: this host's KV server listens on its own address only */
  if (d->bind_addr[0] && d->nhosts > 1) SETENV("ASR_KV_BIND=%s", d->bind_addr);
  SETENV("ASR_NUM_HOSTS=%d", d->nhosts);
  SETENV("ASR_HOST_INDEX=%d", d->host_index);
  /* --trace: each rank's libasr writes its records in asrd's trace directory */
  if (asrd_trace_dir(d)) SETENV("ASR_TRACE=%s", asrd_trace_dir(d));
  /* One provider for every peer where the user named one. Otherwise no
   * ASR_PROVIDER: libasr then takes a path per peer, its own (sm) to the
   * ranks of this host and tcp;ofi_rxm to the others (runtime/paths.c). */
  if (d->job.provider && *d->job.provider && d->job.provider_given)
    SETENV("ASR_PROVIDER=%s", d->job.provider);
  if (d->if_addr && *d->if_addr) SETENV("ASR_IF_ADDR=%s", d->if_addr);
  /* MPICH's simple PMI (asrd_pmi.c): PMI_FD and PMI_RANK are per rank */
  SETENV("PMI_SIZE=%d", d->nranks);
  slot_pmi_rank = k++;
  slot_pmi_fd = k++;
  slot_rep_fd = k++; /* ASR_REPORT_FD (asrd_report.c) */
  for (size_t j = 0; j < sizeof ompi_vars / sizeof ompi_vars[0]; j++)
    if (!user_sets(d, ompi_vars[j][0])) SETENV("%s=%s", ompi_vars[j][0], ompi_vars[j][1]);
  /* Across hosts Open MPI's TCP traffic stays on the job's network: the
   * interface of the address this host's ranks publish (--if-include, or the
   * one asrrun is reached from; by name: Open MPI 4.1 matches a CIDR against
   * each interface's own netmask, so a /32 matches nothing). Else it
   * publishes loopback too, and a peer on another host dials its own.
   * Vader's shared-memory segments go in asrd's own directory, which asrd
   * (or asrrun, for a killed asrd) removes: ranks that are killed leave
   * them behind, and hosts that share one kernel (emulated hosts) would
   * share their names, which carry the kernel's host name. The user's
   * settings win. */
  if (d->nhosts > 1 && d->if_addr && *d->if_addr && !user_sets(d, "OMPI_MCA_btl_tcp_if_include") &&
      asr_netif_name_of(d->if_addr, ifname, sizeof ifname) == 0)
    SETENV("OMPI_MCA_btl_tcp_if_include=%s", ifname);
  if (d->pmix.tmpdir[0] && !user_sets(d, "OMPI_MCA_btl_vader_backing_directory"))
    SETENV("OMPI_MCA_btl_vader_backing_directory=%s", d->pmix.tmpdir);
  /* More ranks than cores: Open MPI's ranks then yield the processor while
   * they poll (mpi_yield_when_idle defaults to mpi_oversubscribe, which its
   * own launcher sets on exactly this condition); spinning instead, each
   * waits out the others' time slices. The user's mpi_yield_when_idle, if
   * set, still decides. */
  if (asrd_topo_oversubscribed(d->nlocal, (int)d->job.cpus_per_rank) &&
      !user_sets(d, "OMPI_MCA_mpi_oversubscribe"))
    SETENV("%s", "OMPI_MCA_mpi_oversubscribe=1");
  /* A rank restarted in place (--on-failure restart) connects to a PMIx
   * server that holds its job's data already, and libpmix 4.2's
   * shared-memory job store (gds ds21) answers a second process of a rank
   * NOT-FOUND for every job-level key (PMIX_HOSTNAME, PMIX_JOB_SIZE) and
   * for its local peers' published ones; its hash store answers them all
   * (measured with a plain libpmix client; registering the rank with the
   * server again only made its local peers' keys NOT-FOUND under the hash
   * store too). So the ranks of such a job take the hash store, unless
   * the user chose. */
  if (d->job.on_failure == ASR_CTL_ON_FAILURE_RESTART && !user_sets(d, "PMIX_MCA_gds"))
    SETENV("%s", "PMIX_MCA_gds=hash");
  for (uint32_t j = 0; j < d->job.nenv; j++) SETENV("%s=%s", d->job.env_names[j], d->job.env_values[j]);
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
 * setup_fork may replace or append entries (and frees what it replaces).
 * pmi_fd is its PMI_FD (-1: none). */
static char **rank_env(asrd_rank_t *r, int pmi_fd, int rep_fd) {
  char **env = calloc(nbase + 1, sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < nbase; i++) {
    int rc = 0;
    if (i == slot_rank)
      rc = asprintf(&env[k], "ASR_RANK=%d", r->rank);
    else if (i == slot_lnc)
      rc = asprintf(&env[k], "ASR_LNC=%d", r->lnc);
    else if (i == slot_inc)
      rc = asprintf(&env[k], "ASR_INCARNATION=%d", r->incarnation);
    else if (i == slot_local)
      rc = asprintf(&env[k], "ASR_LOCAL_RANK=%d", r->local);
    else if (i == slot_pmi_rank)
      rc = asprintf(&env[k], "PMI_RANK=%d", r->rank);
    else if (i == slot_pmi_fd && pmi_fd < 0)
      continue; /* no PMI server for it: MPICH runs it as a singleton */
    else if (i == slot_pmi_fd)
      rc = asprintf(&env[k], "PMI_FD=%d", pmi_fd);
    else if (i == slot_rep_fd && rep_fd < 0)
      continue;
    else if (i == slot_rep_fd)
      rc = asprintf(&env[k], "ASR_REPORT_FD=%d", rep_fd);
    else if (i == slot_trank)
      rc = asprintf(&env[k], "RANK=%d", r->rank);
    else if (i == slot_tlocal)
      rc = asprintf(&env[k], "LOCAL_RANK=%d", r->local);
    else
      env[k] = base_env[i] ? strdup(base_env[i]) : NULL;
    if (rc < 0) env[k] = NULL;
    if (!env[k]) {
      for (size_t j = 0; j < k; j++) free(env[j]);
      free(env);
      return NULL;
    }
    k++;
  }
  return env;
}

static void free_env(char **env) {
  if (!env) return;
  for (char **e = env; *e; e++) free(*e);
  free(env);
}

/* --- spawning ---------------------------------------------------------------------- */

/*
 * Ranks are started with clone(CLONE_VM): the child runs on our memory, so
 * nothing is copied (fork would copy this daemon's page tables for every
 * rank), and, unlike vfork, we do not wait for its execve before starting the
 * next one (waiting costs each rank cross-CPU wake-ups while the CPUs idle,
 * more than the rest of the spawn). The price: until
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
  int fds[3];   /* become its 0, 1, 2 */
  int keep_fd;  /* stays open across the execve (PMI_FD), or -1 */
  int keep_fd2; /* and this one (ASR_REPORT_FD), or -1 */
  int end_w;    /* the end watch's write end (asrd_ends.c), moved to end_fd, or -1 */
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
  if (s->keep_fd >= 0) raw_sys(SYS_fcntl, s->keep_fd, F_SETFD, 0, 0);
  if (s->keep_fd2 >= 0) raw_sys(SYS_fcntl, s->keep_fd2, F_SETFD, 0, 0);
  if (s->end_w >= 0) raw_sys(SYS_dup3, s->end_w, end_fd, 0, 0); /* kept across the execve */
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
static int slots_prepare(asrd_t *d) {
  slots = calloc(SPAWN_SLOTS, sizeof *slots);
  job_argv = calloc((size_t)d->job.nargs + 2, sizeof *job_argv);
  job_sh_argv = calloc((size_t)d->job.nargs + 3, sizeof *job_sh_argv);
  void *st = mmap(NULL, (size_t)SPAWN_SLOTS * SPAWN_STACK, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (!slots || !job_argv || !job_sh_argv || st == MAP_FAILED) {
    if (st != MAP_FAILED) munmap(st, (size_t)SPAWN_SLOTS * SPAWN_STACK);
    spawn_cleanup();
    return ASR_ENOMEM;
  }
  slot_stacks = st;
  for (int i = 0; i < SPAWN_SLOTS; i++) slots[i].stack = slot_stacks + (size_t)i * SPAWN_STACK;
  find_program(d->job.program);
  job_argv[0] = d->job.program;
  job_sh_argv[0] = "/bin/sh";
  job_sh_argv[1] = job_path;
  for (uint32_t i = 0; i < d->job.nargs; i++) job_argv[i + 1] = job_sh_argv[i + 2] = d->job.args[i];
  /* handlers, and the terminal signals asrd ignores (asrd.c): the rank
   * gets the default of each */
  nhandled_sigs = asr_sig_handled(handled_sigs);
  const int terminal[] = {SIGTTOU, SIGTTIN, SIGTSTP};
  for (int i = 0; i < 3 && nhandled_sigs < _NSIG; i++) handled_sigs[nhandled_sigs++] = terminal[i];
  return 0;
}

/* Waits until the slot's child is past its execve, writes what went wrong
 * to the rank's stderr as if the child had, and frees the slot. */
static void spawn_finish(spawn_slot_t *s) {
  if (!s->rank) return;
  pid_t t;
  while ((t = __atomic_load_n(&s->tid, __ATOMIC_ACQUIRE)) != 0)
    syscall(SYS_futex, &s->tid, FUTEX_WAIT, t, NULL, NULL, 0);
  if (s->bind_err)
    dprintf(s->err_w, "asrrun: warning: cannot bind rank %d: %s\n", s->rank->rank, strerror(s->bind_err));
  if (s->exec_err) s->rank->not_run = 1;
  if (s->exec_err)
    dprintf(s->err_w, "asrrun: cannot execute '%s' on host %s: %s\n", s->program, s->hostname,
            strerror(s->exec_err));
  close(s->err_w);
  free_env(s->env);
  s->env = NULL;
  s->rank = NULL;
}

/* Starts rank r in the next slot (the slot's previous child first gets past
 * its execve). Its stdout/stderr are out_w/err_w, its stdin in_fd or
 * /dev/null. err_w is the slot's until then: our messages about the child
 * (a failed execve, a failed binding) go there as if the child wrote them. */
static unsigned next_slot;

pid_t asrd_spawn_rank(asrd_t *d, asrd_rank_t *r, int in_fd, int out_w, int err_w, int pmi_fd, int rep_fd,
                      int end_w, const cpu_set_t *cpus, int bind, char *errbuf, size_t errlen) {
  spawn_slot_t *s = &slots[next_slot++ % SPAWN_SLOTS];
  spawn_finish(s);
  char **env = rank_env(r, pmi_fd, rep_fd);
  if (!env || asrd_pmix_setup_rank(d, r, &env) != 0) {
    free_env(env);
    close(err_w);
    snprintf(errbuf, errlen, "cannot prepare the environment of rank %d", r->rank);
    return ASR_ENOMEM;
  }
  s->path = job_path_found ? job_path : NULL;
  s->argv = (char *const *)job_argv;
  s->sh_argv = (char *const *)job_sh_argv;
  s->envp = env;
  s->fds[0] = in_fd >= 0 ? in_fd : devnull;
  s->fds[1] = out_w;
  s->fds[2] = err_w;
  s->keep_fd = pmi_fd;
  s->keep_fd2 = rep_fd;
  /* the end watch's descriptor must not take the place of one it keeps */
  s->end_w = end_w >= 0 && end_fd > pmi_fd && end_fd > rep_fd && end_fd > 2 ? end_w : -1;
  s->bind = bind;
  if (bind) s->cpus = *cpus;
  s->parent = getpid();
  s->bind_err = s->exec_err = 0;
  s->tid = 1;
  s->program = d->job.program;
  s->hostname = d->hostname;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
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
  if (pid < 0) {
    s->tid = 0;
    free_env(env);
    close(err_w);
    snprintf(errbuf, errlen, "clone: %s", strerror(clone_errno));
    return asr_err_from_errno(clone_errno);
  }
  s->rank = r;
  s->env = env;
  s->err_w = err_w;
  return pid;
}

int asrd_spawn_prepare(asrd_t *d, char *errbuf, size_t errlen) {
  end_fd = asrd_ends_fd();
  devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int rc = devnull < 0 ? asr_err_from_errno(errno) : build_base_env(d);
  if (rc == 0) rc = slots_prepare(d);
  if (rc) {
    snprintf(errbuf, errlen, "cannot prepare the ranks: %s", asr_strerror(rc));
    if (devnull >= 0) close(devnull);
    devnull = -1;
    free_base_env();
    return rc;
  }
  next_slot = 0;
  return 0;
}

void asrd_spawn_done(void) {
  if (!slots) return;
  for (int i = 0; i < SPAWN_SLOTS; i++) spawn_finish(&slots[i]);
  spawn_cleanup();
  if (devnull >= 0) close(devnull);
  devnull = -1;
  free_base_env();
}
