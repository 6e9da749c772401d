/*
 * fuzz_hostfile.c -- libFuzzer target for every reader of host lists that
 * asrrun takes from outside: hostfiles (launcher/config/config.c,
 * asr_config_read_hostfile_buffer), -H lists (asr_config_parse_hostlist),
 * Slurm host lists and tasks-per-node strings (launcher/launch/hostlist.c), PBS node
 * files (asr_pbs_nodefile_parse) and the allocation rules that combine them
 * (launcher/launch/alloc.c, asr_alloc_detect_env with a made-up environment).
 *
 * Every reader gets the same input: the file readers the bytes, the string
 * readers the text up to the first NUL (an environment variable or a command
 * line argument cannot hold one), the Slurm host list reader its first line,
 * and the allocation rules that first line as SLURM_JOB_NODELIST and the
 * second as SLURM_TASKS_PER_NODE, then as SLURM_NTASKS_PER_NODE. Each reader's promises are checked:
 *  - on success the hosts are what asrrun takes (names as -H accepts them,
 *    none twice, slots in range, counts within the limits); for a node file
 *    the slots add up to the file's non-blank lines and for a Slurm list
 *    every name is bracket- and comma-free;
 *  - on failure the code is one the header names, with a message, and the
 *    output is left empty (or, for asrrun's configuration, unchanged).
 */
#include "config.h"

#include <string.h>

#include "alloc.h"
#include "asr_err.h"
#include "config_int.h"
#include "fuzz.h"
#include "hostlist.h"

/* The hosts every cfg starts with, which a failed read must leave alone. */
static void reset_cfg(asr_config_t *cfg) {
  asr_config_defaults(cfg);
  snprintf(cfg->hosts[0].name, sizeof cfg->hosts[0].name, "keep");
  cfg->hosts[0].slots = 7;
  cfg->nhosts = 1;
}

static void check_cfg_hosts(const asr_config_t *c) {
  FUZZ_ASSERT(c->nhosts >= 1 && c->nhosts <= ASR_CFG_MAX_HOSTS, "nhosts %d", c->nhosts);
  for (int i = 0; i < c->nhosts; i++) {
    FUZZ_ASSERT(memchr(c->hosts[i].name, '\0', sizeof c->hosts[i].name), "host %d does not end", i);
    fuzz_check_host_name(c->hosts[i].name);
    FUZZ_ASSERT(c->hosts[i].slots >= 0 && c->hosts[i].slots <= ASR_CFG_MAX_SLOTS, "slots %d",
                c->hosts[i].slots);
  }
  FUZZ_CHECK_DISTINCT_HOSTS(c->hosts, c->nhosts, "host");
}

/* After a failed read: an ASR_ECONFIG (or ASR_ENOMEM) with a message, and
 * the hosts reset_cfg put there. */
static void check_cfg_failed(int rc, const char *err, const asr_config_t *c, const char *prefix) {
  FUZZ_ASSERT(rc == ASR_ECONFIG || rc == ASR_ENOMEM, "rc %d (%s): %s", rc, asr_err_name(rc), err);
  FUZZ_ASSERT(rc != ASR_ECONFIG || strncmp(err, prefix, strlen(prefix)) == 0, "message '%s' not from '%s'",
              err, prefix);
  FUZZ_ASSERT(c->nhosts == 1 && strcmp(c->hosts[0].name, "keep") == 0 && c->hosts[0].slots == 7,
              "a failed read changed the hosts");
}

static void fuzz_hostfile(asr_config_t *cfg, const uint8_t *data, size_t size) {
  char err[2048] = "";
  reset_cfg(cfg);
  int rc = asr_config_read_hostfile_buffer(cfg, "fuzz-hosts", data, size, err, sizeof err);
  if (rc != 0) {
    check_cfg_failed(rc, err, cfg, "fuzz-hosts");
    return;
  }
  check_cfg_hosts(cfg);
  FUZZ_ASSERT(strcmp(cfg->hostfile, "fuzz-hosts") == 0, "hostfile '%s'", cfg->hostfile);
}

static void fuzz_dash_h(asr_config_t *cfg, const char *text) {
  char err[2048] = "";
  reset_cfg(cfg);
  int rc = asr_config_parse_hostlist(cfg, text, err, sizeof err);
  if (rc != 0) {
    check_cfg_failed(rc, err, cfg, "-H");
    return;
  }
  check_cfg_hosts(cfg);
}

/* The codes hostlist.h names. */
static int hostlist_code(int rc) { return rc == ASR_EINVAL || rc == ASR_ETOOBIG || rc == ASR_ENOMEM; }

static void check_nodelist_empty(const asr_nodelist_t *nl) {
  FUZZ_ASSERT(nl->n == 0 && nl->cap == 0 && !nl->name && !nl->slots, "a failed read left %d hosts", nl->n);
}

/* The non-blank lines of a node file: what its slots must add up to. */
static long count_lines(const uint8_t *data, size_t size) {
  long lines = 0;
  int blank = 1;
  for (size_t i = 0; i <= size; i++) {
    if (i == size || data[i] == '\n') {
      lines += !blank;
      blank = 1;
    } else if (!isspace(data[i])) {
      blank = 0;
    }
  }
  return lines;
}

static void fuzz_pbs(const uint8_t *data, size_t size) {
  asr_nodelist_t nl;
  char err[2048] = "";
  int rc = asr_pbs_nodefile_parse("fuzz-nodes", data, size, &nl, err, sizeof err);
  if (rc != 0) {
    FUZZ_ASSERT(hostlist_code(rc) && err[0], "rc %d (%s): '%s'", rc, asr_err_name(rc), err);
    check_nodelist_empty(&nl);
    return;
  }
  long slots = 0;
  FUZZ_ASSERT(nl.n >= 1 && nl.n <= ASR_HOSTLIST_MAX, "%d hosts", nl.n);
  for (int i = 0; i < nl.n; i++) {
    size_t len = strlen(nl.name[i]);
    FUZZ_ASSERT(len >= 1 && len <= ASR_HOSTLIST_NAME_MAX, "name of %zu bytes", len);
    for (size_t j = 0; j < len; j++)
      FUZZ_ASSERT(!isspace((unsigned char)nl.name[i][j]), "white space in '%s'", nl.name[i]);
    FUZZ_ASSERT(nl.slots[i] >= 1 && nl.slots[i] <= ASR_HOSTLIST_MAX, "slots %d", nl.slots[i]);
    slots += nl.slots[i];
  }
  fuzz_check_distinct((const char **)nl.name, nl.n, "node file host"); /* sorts nl.name: checked last */
  FUZZ_ASSERT(slots == count_lines(data, size), "%ld slots for %ld lines", slots, count_lines(data, size));
  asr_nodelist_free(&nl);
}

/* Returns how many hosts text expanded to (0 when it did not). */
static int fuzz_slurm_hosts(const char *text) {
  asr_nodelist_t nl;
  char err[2048] = "";
  int rc = asr_slurm_hostlist_expand(text, "NODELIST", &nl, err, sizeof err);
  if (rc != 0) {
    FUZZ_ASSERT(hostlist_code(rc) && strncmp(err, "NODELIST", 8) == 0, "rc %d (%s): '%s'", rc,
                asr_err_name(rc), err);
    check_nodelist_empty(&nl);
    return 0;
  }
  int n = nl.n;
  FUZZ_ASSERT(nl.n >= 1 && nl.n <= ASR_HOSTLIST_MAX, "%d hosts", nl.n);
  for (int i = 0; i < nl.n; i++) {
    size_t len = strlen(nl.name[i]);
    FUZZ_ASSERT(len >= 1 && len <= ASR_HOSTLIST_NAME_MAX, "name of %zu bytes", len);
    FUZZ_ASSERT(strpbrk(nl.name[i], ",[]") == NULL, "'%s' from '%s'", nl.name[i], text);
    FUZZ_ASSERT(nl.slots[i] == 0, "slots %d from a host list", nl.slots[i]);
  }
  asr_nodelist_free(&nl);
  return n;
}

static void fuzz_slurm_tasks(const char *text) {
  int *counts = NULL, n = -1;
  char err[2048] = "";
  int rc = asr_slurm_tasks_expand(text, "TASKS", &counts, &n, err, sizeof err);
  if (rc != 0) {
    FUZZ_ASSERT(hostlist_code(rc) && strncmp(err, "TASKS", 5) == 0, "rc %d (%s): '%s'", rc, asr_err_name(rc),
                err);
    FUZZ_ASSERT(!counts && n == 0, "a failed expansion left %d counts", n);
    return;
  }
  FUZZ_ASSERT(n >= 1 && n <= ASR_HOSTLIST_MAX && counts, "%d counts", n);
  for (int i = 0; i < n; i++)
    FUZZ_ASSERT(counts[i] >= 1 && counts[i] <= ASR_HOSTLIST_MAX, "count %d", counts[i]);
  free(counts);
}

/* A made-up environment for asr_alloc_detect_env: NAME=value pairs. */
typedef struct {
  const char *const *vars; /* NULL-ended "NAME=value" strings */
} fake_env_t;

static const char *fake_getenv(const char *name, void *arg) {
  const fake_env_t *env = arg;
  size_t n = strlen(name);
  for (const char *const *v = env->vars; *v; v++)
    if (strncmp(*v, name, n) == 0 && (*v)[n] == '=') return *v + n + 1;
  return NULL;
}

static void fuzz_alloc(asr_config_t *cfg, const char *nodes, const char *tasks, const char *tasks_var) {
  char nodes_var[8192], tasks_spec[8192], err[2048] = "";
  snprintf(nodes_var, sizeof nodes_var, "SLURM_JOB_NODELIST=%s", nodes);
  snprintf(tasks_spec, sizeof tasks_spec, "%s=%s", tasks_var, tasks ? tasks : "");
  const char *vars[] = {"SLURM_JOB_ID=1", nodes_var, tasks ? tasks_spec : NULL, NULL};
  fake_env_t env = {vars};
  asr_config_defaults(cfg);
  int rc = asr_alloc_detect_env(cfg, fake_getenv, &env, err, sizeof err);
  if (rc < 0) {
    FUZZ_ASSERT((rc == ASR_ECONFIG || rc == ASR_ENOMEM) && err[0], "rc %d (%s): '%s'", rc, asr_err_name(rc),
                err);
    FUZZ_ASSERT(cfg->nhosts == 0 && cfg->launcher == ASR_LAUNCHER_AUTO, "a failed detection changed cfg");
    return;
  }
  /* an empty node list is no Slurm allocation */
  FUZZ_ASSERT(rc == (*nodes ? ASR_ALLOC_SLURM : ASR_ALLOC_NONE), "detected %s", asr_alloc_name(rc));
  if (rc == ASR_ALLOC_NONE) return;
  FUZZ_ASSERT(cfg->launcher == ASR_LAUNCHER_SLURM, "launcher %d", (int)cfg->launcher);
  check_cfg_hosts(cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* about 450 kB: allocated once, reset for every reader */
  static asr_config_t *cfg;
  if (!cfg && !(cfg = malloc(sizeof *cfg))) abort();
  fuzz_hostfile(cfg, data, size);
  fuzz_pbs(data, size);

  size_t len = strnlen((const char *)data, size);
  char *text = malloc(len + 1);
  if (!text) abort();
  if (len) memcpy(text, data, len);
  text[len] = '\0';
  fuzz_dash_h(cfg, text);
  fuzz_slurm_tasks(text);

  /* first line: the node list; second line: the tasks per node */
  char *nl = strchr(text, '\n'), *tasks = NULL;
  if (nl) {
    *nl = '\0';
    tasks = nl + 1;
    char *nl2 = strchr(tasks, '\n');
    if (nl2) *nl2 = '\0';
  }
  /* A node list of more hosts than asrrun takes fails in commit_hosts after
   * the very expansion done here; such lists (up to 64k names) are the
   * costliest inputs, so the allocation rules skip them. */
  if (fuzz_slurm_hosts(text) <= ASR_CFG_MAX_HOSTS) {
    fuzz_alloc(cfg, text, tasks, "SLURM_TASKS_PER_NODE");
    if (tasks) fuzz_alloc(cfg, text, tasks, "SLURM_NTASKS_PER_NODE");
  }
  free(text);
  asr_config_free(cfg);
  return 0;
}
