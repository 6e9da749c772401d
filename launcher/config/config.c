/*
 * config.c -- asrrun's settings as a model: the key table every layer sets
 * values through (so a setting fails with the same words wherever it was
 * written), hosts (-H lists, hostfiles), exported variables, the program and
 * its arguments, the defaults and the ASRRUN_* environment. The layers that
 * feed it sit above it: the command line (config_cli.c), the YAML files
 * (config_yaml.c) and the precedence stack that runs them all in order
 * (config_load.c; doc/design.md, "The launcher"); none of them is called
 * from here.
 */
#include "config.h"

#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_fs.h"
#include "config_int.h"

/* The enum fields are written through an int pointer by the key table. */
_Static_assert(sizeof(asr_map_by_t) == sizeof(int), "enum settings are stored as int");
_Static_assert(sizeof(asr_bind_to_t) == sizeof(int), "enum settings are stored as int");
_Static_assert(sizeof(asr_launcher_t) == sizeof(int), "enum settings are stored as int");

/* ------------------------------------------------------------------------ */
/* The key table                                                            */
/* ------------------------------------------------------------------------ */

/* The plain --map-by words, in asr_map_by_t order; then, for messages, the
 * ppr forms (set_map parses those). They are the key's own: its row is
 * text to the settings table, since ppr:N:OBJ carries a number. */
static const char *const map_by_words[] = {"slot",       "node",       "core",          "numa", "package",
                                           "ppr:N:node", "ppr:N:numa", "ppr:N:package", NULL};
#define N_MAP_WORDS 5

/* The largest job: every host full, one rank per LNC. ASRRUN_NP's range
 * says the same in common/asr_env.h, which cannot see these sizes. */
#define ASR_CFG_MAX_NP ((long)ASR_CFG_MAX_HOSTS * ASR_CFG_MAX_SLOTS)
_Static_assert(ASR_ENV_MAX_NP == ASR_CFG_MAX_NP, "ASRRUN_NP's range is the largest job");

/* verbose is the one key no variable sets (-v counts it up, and
 * ASR_LOG_LEVEL is the variable for how much is said), so its row is its
 * own, outside the table that --list-env prints. */
static const asr_env_row_t verbose_row = {
    .id = ASR_ENV__COUNT,
    .type = ASR_ENV_T_INT,
    .min = 0,
    .max = 100,
    .who = ASR_ENV_ASRRUN,
    .doc = "how much asrrun tells of the map, the provider, daemons and ranks as they start, as -v"};

/* A key: its YAML name, its row (common/asr_env.h, without ASR_ENV_) and
 * its field of asr_config_t. */
#define KEY(n, id, f) \
  { n, ASR_ENV_##id, NULL, offsetof(asr_config_t, f), sizeof(((asr_config_t *)0)->f) }
/* A key no variable sets: its row is row, its own. */
#define OWN_KEY(n, row, f) \
  { n, ASR_ENV__COUNT, &row, offsetof(asr_config_t, f), sizeof(((asr_config_t *)0)->f) }

const asr__cfg_key_t asr__cfg_keys[] = {
    KEY("np", ASRRUN_NP, np),
    KEY("lnc_per_host", ASRRUN_LNC_PER_HOST, lnc_per_host),
    KEY("npernode", ASRRUN_NPERNODE, npernode),
    KEY("map_by", ASRRUN_MAP_BY, map_by),
    KEY("bind_to", ASRRUN_BIND_TO, bind_to),
    KEY("cpus_per_rank", ASRRUN_CPUS_PER_RANK, cpus_per_rank),
    KEY("oversubscribe", ASRRUN_OVERSUBSCRIBE, oversubscribe),
    KEY("report_bindings", ASRRUN_REPORT_BINDINGS, report_bindings),
    KEY("tag_output", ASRRUN_TAG_OUTPUT, tag_output),
    KEY("timestamp_output", ASRRUN_TIMESTAMP_OUTPUT, timestamp_output),
    KEY("output_dir", ASRRUN_OUTPUT_DIR, output_dir),
    KEY("trace", ASRRUN_TRACE, trace),
    KEY("wdir", ASRRUN_WDIR, wdir),
    KEY("stdin", ASRRUN_STDIN, stdin_to),
    KEY("timeout", ASRRUN_TIMEOUT, timeout_s),
    KEY("bootstrap_port", ASRRUN_BOOTSTRAP_PORT, bootstrap_port),
    KEY("provider", ASRRUN_PROVIDER, provider),
    KEY("launcher", ASRRUN_LAUNCHER, launcher),
    KEY("launch_agent", ASRRUN_LAUNCH_AGENT, launch_agent),
    KEY("prefix", ASRRUN_PREFIX, prefix),
    KEY("if_include", ASRRUN_IF_INCLUDE, if_include),
    KEY("heartbeat_timeout", ASRRUN_HEARTBEAT_TIMEOUT, heartbeat_timeout_s),
    KEY("tree_radix", ASRRUN_TREE_RADIX, tree_radix),
    KEY("allow_early_exit", ASRRUN_ALLOW_EARLY_EXIT, allow_early_exit),
    KEY("on_failure", ASRRUN_ON_FAILURE, on_failure),
    KEY("max_restarts", ASRRUN_MAX_RESTARTS, max_restarts),
    KEY("report_state_on_timeout", ASRRUN_REPORT_STATE_ON_TIMEOUT, report_state_on_timeout),
    KEY("get_stack_traces", ASRRUN_GET_STACK_TRACES, get_stack_traces),
    KEY("metrics_port", ASRRUN_METRICS_PORT, metrics_port),
    OWN_KEY("verbose", verbose_row, verbose),
    KEY("quiet", ASRRUN_QUIET, quiet),
};
const size_t asr__cfg_nkeys = sizeof asr__cfg_keys / sizeof asr__cfg_keys[0];

const asr__cfg_key_t *asr__config_key(const char *name) {
  for (size_t i = 0; i < asr__cfg_nkeys; i++)
    if (strcmp(asr__cfg_keys[i].name, name) == 0) return &asr__cfg_keys[i];
  return NULL;
}

const asr_env_row_t *asr__config_key_row(const asr__cfg_key_t *key) {
  return key->own ? key->own : asr_env_row(key->row);
}

asr__key_kind_t asr__config_key_kind(const asr__cfg_key_t *key) {
  /* --map-by's row is text to the table, since ppr:N:OBJ carries a number;
   * its key parses the value into two fields */
  if (key->row == ASR_ENV_ASRRUN_MAP_BY) return ASR__KEY_MAP;
  switch (asr__config_key_row(key)->type) {
    case ASR_ENV_T_INT:
    case ASR_ENV_T_PORT:
    case ASR_ENV_T_MS:
    case ASR_ENV_T_SECONDS:
    case ASR_ENV_T_BYTES: return ASR__KEY_INT;
    case ASR_ENV_T_BOOL: return ASR__KEY_BOOL;
    case ASR_ENV_T_WORD: return ASR__KEY_WORD;
    case ASR_ENV_T_STR:
    case ASR_ENV_T_PATH:
    case ASR_ENV_T_CMD: return ASR__KEY_STR;
    /* checked text that a plain string field would take unchecked */
    case ASR_ENV_T_IPV4:
    case ASR_ENV_T_IFSPEC:
    case ASR_ENV_T_SECRET: break;
  }
  return ASR__KEY_INVALID;
}

/* The word of index i of a WORD row, or "?" past its last. */
static const char *row_word(asr_env_id_t id, unsigned i) {
  const char *const *w = asr_env_row(id)->words;
  for (unsigned j = 0; w[j]; j++)
    if (j == i) return w[j];
  return "?";
}

const char *asr__config_map_by_name(asr_map_by_t m) {
  static const char *const ppr_objs[] = {"node", "numa", "package"};
  if ((unsigned)m < N_MAP_WORDS) return map_by_words[m];
  return (unsigned)m <= ASR_MAP_PPR_PACKAGE ? ppr_objs[m - ASR_MAP_PPR_NODE] : "?";
}
const char *asr__config_bind_to_name(asr_bind_to_t b) {
  return row_word(ASR_ENV_ASRRUN_BIND_TO, (unsigned)b);
}

void asr__config_map_by_format(const asr_config_t *cfg, char *buf, size_t len) {
  if (cfg->map_by >= ASR_MAP_PPR_NODE)
    snprintf(buf, len, "ppr:%d:%s", cfg->ppr, asr__config_map_by_name(cfg->map_by));
  else
    snprintf(buf, len, "%s", asr__config_map_by_name(cfg->map_by));
}
const char *asr__config_launcher_name(asr_launcher_t l) {
  return row_word(ASR_ENV_ASRRUN_LAUNCHER, (unsigned)l);
}

static int fail_nomem(char *errbuf, size_t errlen) {
  return asr_errf(errbuf, errlen, ASR_ENOMEM, "out of memory while reading the configuration");
}

/* The values go through asr_env.h's parsers, the ones every ASR_* variable
 * uses too, so that a value means the same and fails with the same words as
 * a flag, in a YAML file and in a variable; the bounds are the key's row. */
static int set_int(asr_config_t *cfg, const asr__cfg_key_t *k, const char *val, const char *what,
                   char *errbuf, size_t errlen) {
  const asr_env_row_t *r = asr__config_key_row(k);
  long v;
  int rc = asr_env_parse_long(what, val, r->min, r->max, &v, errbuf, errlen);
  if (rc == 0) *(int *)((char *)cfg + k->off) = (int)v; /* fits: test_launcher_config checks the ranges */
  return rc;
}

static int set_bool(asr_config_t *cfg, const asr__cfg_key_t *k, const char *val, const char *what,
                    char *errbuf, size_t errlen) {
  return asr_env_parse_bool(what, val, (int *)((char *)cfg + k->off), errbuf, errlen);
}

static int set_word(asr_config_t *cfg, const asr__cfg_key_t *k, const char *val, const char *what,
                    char *errbuf, size_t errlen) {
  return asr_env_parse_word(what, val, asr__config_key_row(k)->words, (int *)((char *)cfg + k->off), errbuf,
                            errlen);
}

/* The row's length range is what --list-env shows, and its max is the
 * field's size less one (test_launcher_config checks it); the length is
 * checked against the field again so that a row edited alone can never
 * overrun it. */
static int set_str(asr_config_t *cfg, const asr__cfg_key_t *k, const char *val, const char *what,
                   char *errbuf, size_t errlen) {
  const asr_env_row_t *r = asr__config_key_row(k);
  int rc = asr_env_parse_text(what, val, r->min, r->max, errbuf, errlen);
  if (rc) return rc;
  /* --metrics-port's text is checked here, where what names the flag, the
   * variable or the YAML line it came from */
  if (k->row == ASR_ENV_ASRRUN_METRICS_PORT && (rc = asr_config_parse_listen(val, NULL, 0, NULL)) != 0)
    return asr_errf(errbuf, errlen, ASR_ECONFIG,
                    "%s: '%s': write PORT (0..65535; 0: a free one) or ADDR:PORT with ADDR an IPv4 address "
                    "such as 127.0.0.1",
                    what, val);
  size_t n = strlen(val);
  if (n >= k->cap)
    return asr_errf(errbuf, errlen, ASR_EINVAL, "%s: internal error: %zu bytes do not fit a field of %zu",
                    what, n, k->cap);
  memcpy((char *)cfg + k->off, val, n + 1);
  return 0;
}

/* --map-by: a plain word, or ppr:N:OBJ with N ranks per node, NUMA node or
 * package. map_by and ppr are written together (ppr 0 for a word), so a
 * later layer's word forgets a lower layer's count. */
static int set_map(asr_config_t *cfg, const asr__cfg_key_t *k, const char *val, const char *what,
                   char *errbuf, size_t errlen) {
  if (strncmp(val, "ppr:", 4) != 0) {
    int m;
    int rc = asr_env_parse_word(what, val, map_by_words, &m, errbuf, errlen);
    if (rc) return rc;
    if (m >= N_MAP_WORDS) /* a ppr placeholder: it starts with "ppr:", so never here */
      return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: write ppr:N:node, ppr:N:numa or ppr:N:package", what);
    cfg->map_by = (asr_map_by_t)m;
    cfg->ppr = 0;
    return 0;
  }
  const char *n = val + 4, *colon = strchr(n, ':');
  if (!colon)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: '%s': write ppr:N:node, ppr:N:numa or ppr:N:package",
                    what, val);
  char num[16];
  long v = 0;
  size_t nl = (size_t)(colon - n);
  snprintf(num, sizeof num, "%.*s", (int)(nl < sizeof num ? nl : sizeof num - 1), n);
  if (nl >= sizeof num || asr_env_parse_long("ppr", num, 1, ASR_CFG_MAX_SLOTS, &v, NULL, 0) != 0)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: '%s': N must be a number from 1 to %d", what, val,
                    ASR_CFG_MAX_SLOTS);
  static const struct {
    const char *obj;
    asr_map_by_t by;
  } objs[] = {{"node", ASR_MAP_PPR_NODE}, {"numa", ASR_MAP_PPR_NUMA}, {"package", ASR_MAP_PPR_PACKAGE}};
  for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++)
    if (strcmp(colon + 1, objs[i].obj) == 0) {
      cfg->map_by = objs[i].by;
      cfg->ppr = (int)v;
      return 0;
    }
  return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: '%s': the object must be node, numa or package", what,
                  val);
}

int asr_config_parse_listen(const char *val, char *addr, size_t addrlen, int *port) {
  const char *colon = strrchr(val, ':');
  const char *p = colon ? colon + 1 : val;
  char a[INET_ADDRSTRLEN] = "127.0.0.1";
  if (colon) {
    size_t n = (size_t)(colon - val);
    struct in_addr in;
    if (n == 0 || n >= sizeof a) return ASR_EINVAL;
    memcpy(a, val, n);
    a[n] = '\0';
    if (inet_pton(AF_INET, a, &in) != 1) return ASR_EINVAL;
  }
  long v;
  if (asr_env_parse_long("port", p, 0, 65535, &v, NULL, 0) != 0) return ASR_EINVAL;
  if (addr) snprintf(addr, addrlen, "%s", a);
  if (port) *port = (int)v;
  return 0;
}

int asr__config_set(asr_config_t *cfg, const asr__cfg_key_t *key, const char *val, const char *what,
                    char *errbuf, size_t errlen) {
  asr__key_kind_t kind = asr__config_key_kind(key);
  switch (kind) {
    case ASR__KEY_MAP: return set_map(cfg, key, val, what, errbuf, errlen);
    case ASR__KEY_INT: return set_int(cfg, key, val, what, errbuf, errlen);
    case ASR__KEY_BOOL: return set_bool(cfg, key, val, what, errbuf, errlen);
    case ASR__KEY_WORD: return set_word(cfg, key, val, what, errbuf, errlen);
    case ASR__KEY_STR: return set_str(cfg, key, val, what, errbuf, errlen);
    case ASR__KEY_INVALID: break;
  }
  return asr_errf(errbuf, errlen, ASR_EINVAL, "%s: internal error: key kind %d", what, (int)kind);
}

/* ------------------------------------------------------------------------ */
/* Hosts                                                                    */
/* ------------------------------------------------------------------------ */

int asr__hostlist_init(asr__hostlist_t *hl, char *errbuf, size_t errlen) {
  /* 1024 hosts of 132 bytes: too big for the stack of a library call */
  hl->v = calloc(ASR_CFG_MAX_HOSTS, sizeof *hl->v);
  hl->n = 0;
  return hl->v ? 0 : fail_nomem(errbuf, errlen);
}

void asr__hostlist_fini(asr__hostlist_t *hl) {
  free(hl->v);
  hl->v = NULL;
  hl->n = 0;
}

/* Host names are what a launch agent and the resolver take: letters, digits,
 * '-', '.', '_'. Refusing anything else catches "a b" and "a;b" early, where
 * ssh would otherwise see them much later. */
static int is_host_name(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '.' && s[i] != '_') return 0;
  return 1;
}

int asr__config_parse_slots(const char *s, int *slots) {
  long v;
  if (asr_env_parse_long("slots", s, 1, ASR_CFG_MAX_SLOTS, &v, NULL, 0) != 0) return ASR_EINVAL;
  *slots = (int)v;
  return 0;
}

int asr__hostlist_add(asr__hostlist_t *hl, const char *name, size_t namelen, int slots, const char *what,
                      char *errbuf, size_t errlen) {
  asr_cfg_host_t *h;
  if (namelen == 0) return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: empty host name", what);
  if (namelen >= sizeof h->name)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: host name '%.40s...' is longer than %zu bytes", what,
                    name, sizeof h->name - 1);
  if (!is_host_name(name, namelen))
    return asr_errf(errbuf, errlen, ASR_ECONFIG,
                    "%s: '%.*s' is not a host name (letters, digits, '-', '.', '_')", what, (int)namelen,
                    name);
  /* A host listed twice is refused rather than merged: whether "a,a" means
   * one slot or two differs between launchers, and a clear error is cheaper
   * than a surprising rank count. */
  for (int i = 0; i < hl->n; i++)
    if (strlen(hl->v[i].name) == namelen && memcmp(hl->v[i].name, name, namelen) == 0)
      return asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "%s: host '%.*s' is listed twice; list it once with all its slots", what, (int)namelen,
                      name);
  if (hl->n >= ASR_CFG_MAX_HOSTS)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: more than %d hosts", what, ASR_CFG_MAX_HOSTS);
  h = &hl->v[hl->n++];
  memcpy(h->name, name, namelen);
  h->name[namelen] = '\0';
  h->slots = slots;
  return 0;
}

int asr__hostlist_add_item(asr__hostlist_t *hl, const char *item, const char *what, char *errbuf,
                           size_t errlen) {
  const char *colon = strrchr(item, ':');
  if (!colon) return asr__hostlist_add(hl, item, strlen(item), 0, what, errbuf, errlen);
  int slots;
  if (asr__config_parse_slots(colon + 1, &slots) != 0)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: '%s': slots '%s' is not a number from 1 to %d", what,
                    item, colon + 1, ASR_CFG_MAX_SLOTS);
  return asr__hostlist_add(hl, item, (size_t)(colon - item), slots, what, errbuf, errlen);
}

void asr__config_set_hosts(asr_config_t *cfg, const asr__hostlist_t *hl) {
  memcpy(cfg->hosts, hl->v, (size_t)hl->n * sizeof hl->v[0]);
  cfg->nhosts = hl->n;
  cfg->hostfile[0] = '\0';
}

/* Parses one hostfile line (comment already cut off) into hl. */
static int hostfile_line(asr__hostlist_t *hl, char *line, const char *where, char *errbuf, size_t errlen) {
  char *save = NULL, *name = strtok_r(line, " \t\r\n", &save), *tok;
  int slots = 0;
  if (!name) return 0; /* blank or comment-only */
  while ((tok = strtok_r(NULL, " \t\r\n", &save))) {
    if (strncmp(tok, "slots=", 6) != 0)
      return asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "%s: unexpected '%s' after the host name; write 'HOST [slots=N]'", where, tok);
    if (slots)
      return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: slots given twice; write 'HOST [slots=N]'", where);
    if (asr__config_parse_slots(tok + 6, &slots) != 0)
      return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: '%s': slots must be a number from 1 to %d", where,
                      tok, ASR_CFG_MAX_SLOTS);
  }
  return asr__hostlist_add(hl, name, strlen(name), slots, where, errbuf, errlen);
}

/* Parses a hostfile's text line by line into hl: text[0..len) is a writable
 * copy with a NUL at text[len], cut into lines in place. A NUL byte inside a
 * line is refused: the line's words are C strings, so it would cut the line
 * short unseen ("a<NUL> slots=9" would be host a without slots). */
static int read_hostfile_lines(char *text, size_t len, const char *name, asr__hostlist_t *hl, char *errbuf,
                               size_t errlen) {
  char where[1100], *line = text, *end = text + len;
  int rc = 0;
  for (unsigned lineno = 1; rc == 0 && line < end; lineno++) {
    char *nl = memchr(line, '\n', (size_t)(end - line)), *next = nl ? nl + 1 : end;
    snprintf(where, sizeof where, "%s:%u", name, lineno);
    if (memchr(line, '\0', (size_t)((nl ? nl : end) - line)))
      return asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "%s: a NUL byte; a hostfile is text, 'HOST [slots=N]' a line", where);
    if (nl) *nl = '\0';
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    rc = hostfile_line(hl, line, where, errbuf, errlen);
    line = next;
  }
  return rc;
}

/* cfg->hostfile keeps the name of the file the hosts came from, so a name
 * that does not fit is refused before anything is read. */
static int hostfile_name_fits(const asr_config_t *cfg, const char *name, char *errbuf, size_t errlen) {
  if (strlen(name) < sizeof cfg->hostfile) return 0;
  return asr_errf(errbuf, errlen, ASR_ECONFIG, "hostfile path '%.40s...' is too long", name);
}

/* The one hostfile parser: text as read_hostfile_lines takes it. cfg changes
 * only when the whole file parsed and named a host. */
static int read_hostfile_text(asr_config_t *cfg, const char *name, char *text, size_t len, char *errbuf,
                              size_t errlen) {
  asr__hostlist_t hl;
  int rc = asr__hostlist_init(&hl, errbuf, errlen);
  if (rc == 0) rc = read_hostfile_lines(text, len, name, &hl, errbuf, errlen);
  if (rc == 0 && hl.n == 0)
    rc =
        asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: no hosts in the file (one 'HOST [slots=N]' a line)", name);
  if (rc == 0) {
    asr__config_set_hosts(cfg, &hl);
    snprintf(cfg->hostfile, sizeof cfg->hostfile, "%s", name); /* fits: hostfile_name_fits */
  }
  asr__hostlist_fini(&hl);
  return rc;
}

int asr_config_read_hostfile_buffer(asr_config_t *cfg, const char *name, const void *buf, size_t len,
                                    char *errbuf, size_t errlen) {
  int rc = hostfile_name_fits(cfg, name, errbuf, errlen);
  if (rc) return rc;
  char *text = malloc(len + 1);
  if (!text) return fail_nomem(errbuf, errlen);
  if (len) memcpy(text, buf, len);
  text[len] = '\0';
  rc = read_hostfile_text(cfg, name, text, len, errbuf, errlen);
  free(text);
  return rc;
}

int asr_config_read_hostfile(asr_config_t *cfg, const char *path, char *errbuf, size_t errlen) {
  char *text;
  size_t len;
  int rc = hostfile_name_fits(cfg, path, errbuf, errlen);
  if (rc) return rc;
  if ((rc = asr_fs_read_file(path, ASR_CFG_FILE_MAX, &text, &len)) != 0) {
    if (rc == ASR_ENOMEM) return fail_nomem(errbuf, errlen);
    if (rc == ASR_ETOOBIG)
      return asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "hostfile '%s' is larger than %d MiB; a hostfile is far smaller", path,
                      ASR_CFG_FILE_MAX >> 20);
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "cannot open hostfile '%s': %s", path, strerror(errno));
  }
  rc = read_hostfile_text(cfg, path, text, len, errbuf, errlen);
  free(text);
  return rc;
}

/* Parses a comma-separated -H list; what names the flag as the user typed it. */
int asr__config_parse_hostlist_as(asr_config_t *cfg, const char *list, const char *what, char *errbuf,
                                  size_t errlen) {
  asr__hostlist_t hl;
  int rc = asr__hostlist_init(&hl, errbuf, errlen);
  for (const char *p = list; rc == 0;) {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    char item[256];
    if (n == 0) {
      rc =
          asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: empty host in '%s'; write HOST[:SLOTS],...", what, list);
    } else if (n >= sizeof item) {
      rc = asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: host '%.40s...' is too long", what, p);
    } else {
      memcpy(item, p, n);
      item[n] = '\0';
      rc = asr__hostlist_add_item(&hl, item, what, errbuf, errlen);
    }
    if (!comma) break;
    p = comma + 1;
  }
  if (rc == 0) asr__config_set_hosts(cfg, &hl);
  asr__hostlist_fini(&hl);
  return rc;
}

int asr_config_parse_hostlist(asr_config_t *cfg, const char *list, char *errbuf, size_t errlen) {
  return asr__config_parse_hostlist_as(cfg, list, "-H", errbuf, errlen);
}

/* ------------------------------------------------------------------------ */
/* Rankfiles                                                                */
/* ------------------------------------------------------------------------ */

int asr__config_parse_cores(const char *s, unsigned char *bits, size_t nbits, int *max) {
  int top = -1;
  const char *p = s;
  if (!*p) return ASR_EINVAL;
  for (;;) {
    long a, b;
    char *end;
    if (!isdigit((unsigned char)*p)) return ASR_EINVAL;
    errno = 0;
    a = b = strtol(p, &end, 10);
    if (errno || a >= ASR_CFG_MAX_CORE) return ASR_EINVAL;
    p = end;
    if (*p == '-') {
      if (!isdigit((unsigned char)p[1])) return ASR_EINVAL;
      b = strtol(p + 1, &end, 10);
      if (errno || b >= ASR_CFG_MAX_CORE || b < a) return ASR_EINVAL;
      p = end;
    }
    for (long c = a; bits && c <= b && (size_t)c < nbits; c++) bits[c / 8] |= (unsigned char)(1u << (c % 8));
    if (b > top) top = (int)b;
    if (*p == '\0') break;
    if (*p != ',') return ASR_EINVAL;
    p++;
  }
  if (max) *max = top;
  return 0;
}

#define RF_USAGE "'rank R=HOST slot=CORES'"

/* The lines read so far, in file order (malloc'd, grown by doubling). */
typedef struct {
  asr_cfg_rank_t *v;
  int n, cap;
} rf_list_t;

/* Parses one rankfile line (comment cut off) onto l. */
static int rankfile_line(rf_list_t *l, char *line, unsigned lineno, const char *where, char *errbuf,
                         size_t errlen) {
  char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
  if (!tok) return 0; /* blank or comment-only */
  if (strcmp(tok, "rank") != 0)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: expected " RF_USAGE ", not '%s'", where, tok);
  char *rh = strtok_r(NULL, " \t\r\n", &save);
  if (!rh) return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: 'rank' needs R=HOST slot=CORES", where);
  char *eq = strchr(rh, '=');
  if (!eq)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: '%s' is not R=HOST (a rank number, '=', a host name)",
                    where, rh);
  *eq = '\0';
  long r;
  if (asr_env_parse_long("rank", rh, 0, ASR_CFG_MAX_NP - 1, &r, NULL, 0) != 0)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: rank '%s' is not a number from 0 to %ld", where, rh,
                    ASR_CFG_MAX_NP - 1);
  const char *host = eq + 1;
  size_t hl = strlen(host);
  if (hl == 0) return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: rank %ld has an empty host name", where, r);
  if (hl >= sizeof l->v->host)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: host name '%.40s...' is longer than %zu bytes", where,
                    host, sizeof l->v->host - 1);
  if (!is_host_name(host, hl))
    return asr_errf(errbuf, errlen, ASR_ECONFIG,
                    "%s: '%s' is not a host name (letters, digits, '-', '.', '_')", where, host);
  char *slot = strtok_r(NULL, " \t\r\n", &save);
  if (!slot) return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: rank %ld has no slot=CORES", where, r);
  if (strncmp(slot, "slot=", 5) != 0)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: unexpected '%s'; write " RF_USAGE, where, slot);
  const char *cores = slot + 5;
  if (strlen(cores) >= sizeof l->v->cores || asr__config_parse_cores(cores, NULL, 0, NULL) != 0)
    return asr_errf(errbuf, errlen, ASR_ECONFIG,
                    "%s: slot '%.60s' is not a core list (N, N-M, comma-separated)", where, cores);
  char *extra = strtok_r(NULL, " \t\r\n", &save);
  if (extra)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: unexpected '%s' after slot=CORES", where, extra);
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    asr_cfg_rank_t *v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) return fail_nomem(errbuf, errlen);
    l->v = v;
    l->cap = cap;
  }
  asr_cfg_rank_t *e = &l->v[l->n++];
  e->rank = (int)r;
  e->line = (int)lineno;
  memcpy(e->host, host, hl + 1);
  snprintf(e->cores, sizeof e->cores, "%s", cores);
  return 0;
}

/* Puts the lines in rank order into *out: every rank 0..N-1 once (the
 * first repeat is named with both its lines). */
static int rankfile_order(const char *name, const rf_list_t *l, asr_cfg_rank_t **out, char *errbuf,
                          size_t errlen) {
  int n = 0;
  for (int i = 0; i < l->n; i++)
    if (l->v[i].rank + 1 > n) n = l->v[i].rank + 1;
  int *at = malloc((size_t)n * sizeof *at); /* rank -> index in l, -1: none yet */
  asr_cfg_rank_t *v = malloc((size_t)n * sizeof *v);
  if (!at || !v) {
    free(at);
    free(v);
    return fail_nomem(errbuf, errlen);
  }
  int rc = 0;
  for (int r = 0; r < n; r++) at[r] = -1;
  for (int i = 0; i < l->n && rc == 0; i++) {
    const asr_cfg_rank_t *e = &l->v[i];
    if (at[e->rank] >= 0)
      rc = asr_errf(errbuf, errlen, ASR_ECONFIG, "%s:%d: rank %d is given twice (first on line %d)", name,
                    e->line, e->rank, l->v[at[e->rank]].line);
    at[e->rank] = i;
  }
  for (int r = 0; r < n && rc == 0; r++) {
    if (at[r] < 0)
      rc = asr_errf(errbuf, errlen, ASR_ECONFIG,
                    "%s: no line for rank %d (a rankfile names every rank from 0 to %d)", name, r, n - 1);
    else
      v[r] = l->v[at[r]];
  }
  free(at);
  if (rc) {
    free(v);
    return rc;
  }
  *out = v;
  return n;
}

/* The one rankfile parser: text[0..len) is writable with a NUL at text[len]
 * (cut into lines in place, as the hostfile's). cfg changes only when the
 * whole file parsed. */
static int read_rankfile_text(asr_config_t *cfg, const char *name, char *text, size_t len, char *errbuf,
                              size_t errlen) {
  if (strlen(name) >= sizeof cfg->rankfile)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "rankfile path '%.40s...' is too long", name);
  rf_list_t l = {0};
  char where[1100], *line = text, *end = text + len;
  int rc = 0;
  for (unsigned lineno = 1; rc == 0 && line < end; lineno++) {
    char *nl = memchr(line, '\n', (size_t)(end - line)), *next = nl ? nl + 1 : end;
    snprintf(where, sizeof where, "%s:%u", name, lineno);
    if (memchr(line, '\0', (size_t)((nl ? nl : end) - line))) {
      rc = asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: a NUL byte; a rankfile is text, " RF_USAGE " a line",
                    where);
      break;
    }
    if (nl) *nl = '\0';
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    rc = rankfile_line(&l, line, lineno, where, errbuf, errlen);
    line = next;
  }
  if (rc == 0 && l.n == 0)
    rc = asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: no ranks in the file (one " RF_USAGE " a line)", name);
  asr_cfg_rank_t *v = NULL;
  int n = rc == 0 ? rankfile_order(name, &l, &v, errbuf, errlen) : rc;
  free(l.v);
  if (n < 0) return n;
  free(cfg->rf);
  cfg->rf = v;
  cfg->nrf = n;
  snprintf(cfg->rankfile, sizeof cfg->rankfile, "%s", name); /* fits: checked */
  return 0;
}

int asr_config_read_rankfile_buffer(asr_config_t *cfg, const char *name, const void *buf, size_t len,
                                    char *errbuf, size_t errlen) {
  char *text = malloc(len + 1);
  if (!text) return fail_nomem(errbuf, errlen);
  if (len) memcpy(text, buf, len);
  text[len] = '\0';
  int rc = read_rankfile_text(cfg, name, text, len, errbuf, errlen);
  free(text);
  return rc;
}

int asr_config_read_rankfile(asr_config_t *cfg, const char *path, char *errbuf, size_t errlen) {
  char *text;
  size_t len;
  int rc = asr_fs_read_file(path, ASR_CFG_FILE_MAX, &text, &len);
  if (rc) {
    if (rc == ASR_ENOMEM) return fail_nomem(errbuf, errlen);
    if (rc == ASR_ETOOBIG)
      return asr_errf(errbuf, errlen, ASR_ECONFIG, "rankfile '%s' is larger than %d MiB", path,
                      ASR_CFG_FILE_MAX >> 20);
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "cannot open rankfile '%s': %s", path, strerror(errno));
  }
  rc = read_rankfile_text(cfg, path, text, len, errbuf, errlen);
  free(text);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Exported variables, program and arguments                                */
/* ------------------------------------------------------------------------ */

static int is_env_name(const char *s, size_t n) {
  if (n == 0 || isdigit((unsigned char)s[0])) return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '_') return 0;
  return 1;
}

/* Variables merge by name across layers (a later layer replaces the value of
 * a name it sets and keeps the others): the system file can export a site
 * setting while the job adds its own, which is what "each layer overrides only
 * its keys" means for a list of variables. */
int asr__config_put_env(asr_config_t *cfg, const char *name, size_t namelen, const char *value,
                        const char *what, char *errbuf, size_t errlen) {
  asr_cfg_env_t *e = NULL;
  if (!is_env_name(name, namelen))
    return asr_errf(errbuf, errlen, ASR_ECONFIG,
                    "%s: '%.*s' is not a variable name (letters, digits and '_', not starting with a digit)",
                    what, (int)namelen, name);
  if (namelen >= sizeof e->name)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: variable name '%.40s...' is too long", what, name);
  if (value && strlen(value) >= sizeof e->value)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: the value of %.*s is longer than %zu bytes", what,
                    (int)namelen, name, sizeof e->value - 1);
  /* A value for one of asr's variables is checked as the variable would be:
   * the ranks would fail on it anyway, each with its own message. */
  char nul_name[sizeof e->name];
  snprintf(nul_name, sizeof nul_name, "%.*s", (int)namelen, name);
  const asr_env_row_t *row = asr_env_find(nul_name);
  if (row && value && *value && !(row->who & ASR_ENV_FAMILY)) {
    char sub[200];
    snprintf(sub, sizeof sub, "%s: %s", what, nul_name);
    int rc = asr_env_check_value(row->id, sub, value, errbuf, errlen);
    if (rc) return rc;
  }
  for (int i = 0; i < cfg->nenv && !e; i++)
    if (strlen(cfg->env[i].name) == namelen && memcmp(cfg->env[i].name, name, namelen) == 0) e = &cfg->env[i];
  if (!e) {
    if (cfg->nenv >= ASR_CFG_MAX_ENV)
      return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: more than %d exported variables", what,
                      ASR_CFG_MAX_ENV);
    e = &cfg->env[cfg->nenv++];
    memcpy(e->name, name, namelen);
    e->name[namelen] = '\0';
  }
  e->has_value = value != NULL;
  snprintf(e->value, sizeof e->value, "%s", value ? value : "");
  return 0;
}

int asr__config_put_env_spec(asr_config_t *cfg, const char *spec, const char *what, char *errbuf,
                             size_t errlen) {
  const char *eq = strchr(spec, '=');
  size_t namelen = eq ? (size_t)(eq - spec) : strlen(spec);
  return asr__config_put_env(cfg, spec, namelen, eq ? eq + 1 : NULL, what, errbuf, errlen);
}

static void free_args(char **args, int n) {
  for (int i = 0; i < n; i++) free(args[i]);
}

int asr__config_set_program(asr_config_t *cfg, const char *program, const char *const *args, int nargs,
                            const char *what, char *errbuf, size_t errlen) {
  if (!*program) return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: the program name is empty", what);
  if (strlen(program) >= sizeof cfg->program)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: program '%.40s...' is too long", what, program);
  if (nargs > ASR_CFG_MAX_ARGS)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: %d program arguments, at most %d", what, nargs,
                    ASR_CFG_MAX_ARGS);
  /* duplicate everything first so that a failure leaves the old program */
  char **copy = calloc((size_t)nargs + 1, sizeof *copy);
  if (!copy) return fail_nomem(errbuf, errlen);
  for (int i = 0; i < nargs; i++)
    if (!(copy[i] = strdup(args[i]))) {
      free_args(copy, i);
      free(copy);
      return fail_nomem(errbuf, errlen);
    }
  free_args(cfg->args, cfg->nargs);
  memcpy(cfg->args, copy, (size_t)nargs * sizeof *copy);
  cfg->nargs = nargs;
  free(copy);
  snprintf(cfg->program, sizeof cfg->program, "%s", program);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Defaults and the environment                                             */
/* ------------------------------------------------------------------------ */

/* The defaults are the rows' (the ones --list-env and the man pages show),
 * set through the key table like any other layer's values; a row without
 * one leaves its field zero or empty, "not given". A default that does not
 * parse is a bug in the table, which cannot be reported from here:
 * test_launcher_config sets each one. */
void asr_config_defaults(asr_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  for (size_t i = 0; i < asr__cfg_nkeys; i++) {
    const asr__cfg_key_t *k = &asr__cfg_keys[i];
    const asr_env_row_t *r = asr__config_key_row(k);
    char err[256];
    if (!r->dflt) continue;
    int rc = asr__config_set(cfg, k, r->dflt, k->name, err, sizeof err);
    assert(rc == 0);
    (void)rc;
  }
}

void asr_config_free(asr_config_t *cfg) {
  free_args(cfg->args, cfg->nargs);
  memset(cfg->args, 0, sizeof cfg->args);
  cfg->nargs = 0;
  free(cfg->rf);
  cfg->rf = NULL;
  cfg->nrf = 0;
}

/* An empty ASRRUN_* variable counts as unset, the usual shell convention
 * (`ASRRUN_NP= asrrun ...` turns the variable off rather than failing). The
 * values are checked by the key table, as flags and YAML keys are: each
 * key's variable is its row's. */
int asr_config_load_env(asr_config_t *cfg, char *errbuf, size_t errlen) {
  for (size_t i = 0; i < asr__cfg_nkeys; i++) {
    const asr__cfg_key_t *k = &asr__cfg_keys[i];
    if (k->own) continue; /* no variable sets it */
    const char *v = asr_env_raw(k->row);
    if (!v || !*v) continue;
    int rc = asr__config_set(cfg, k, v, asr_env_row(k->row)->name, errbuf, errlen);
    if (rc) return rc;
  }
  const char *hf = NULL;
  int rc = asr_env_str(ASR_ENV_ASRRUN_HOSTFILE, &hf, errbuf, errlen);
  if (rc == 0 && hf) {
    char inner[1200];
    rc = asr_config_read_hostfile(cfg, hf, inner, sizeof inner);
    if (rc) return asr_errf(errbuf, errlen, ASR_ECONFIG, "ASRRUN_HOSTFILE: %s", inner);
  }
  const char *rf = NULL;
  if (rc == 0) rc = asr_env_str(ASR_ENV_ASRRUN_RANKFILE, &rf, errbuf, errlen);
  if (rc == 0 && rf) {
    char inner[1200];
    rc = asr_config_read_rankfile(cfg, rf, inner, sizeof inner);
    if (rc) return asr_errf(errbuf, errlen, ASR_ECONFIG, "ASRRUN_RANKFILE: %s", inner);
  }
  return rc;
}

typedef struct {
  char *errbuf;
  size_t errlen;
  int failed; /* an unknown ASRRUN_* name was found (the message names the first) */
  int warn;   /* print the warnings for unknown ASR_* names */
  int warned; /* and some were printed */
} unknown_ctx_t;

static void on_unknown(void *arg, const char *name, const char *near) {
  unknown_ctx_t *u = arg;
  char hint[160] = "";
  if (near) snprintf(hint, sizeof hint, " (did you mean %s?)", near);
  if (strncmp(name, "ASRRUN_", 7) == 0) {
    if (!u->failed)
      asr_errf(u->errbuf, u->errlen, ASR_ECONFIG, "unknown variable %s%s; asrrun --list-env lists them", name,
               hint);
    u->failed = 1;
  } else if (u->warn) {
    fprintf(stderr, "asrrun: warning: unknown variable %s%s; asrrun --list-env lists them\n", name, hint);
    u->warned = 1;
  }
}

/* The ranks and daemons inherit asrrun's environment, so asrrun checks all
 * of it before it starts anything: every row's value (a bad one would
 * otherwise fail N ranks, one message each, or quietly change a default),
 * and the names, as it checks flags. The warnings for unknown ASR_* names are
 * printed once: asrrun may check before it starts its early daemon and again
 * while it reads its configuration. */
int asr_config_check_env(char *errbuf, size_t errlen) {
  static int warned;
  unknown_ctx_t u = {.errbuf = errbuf, .errlen = errlen, .warn = !warned};
  asr_env_each_unknown(environ, on_unknown, &u);
  if (u.warned) warned = 1;
  if (u.failed) return ASR_ECONFIG;
  return asr_env_check_all(~0u, errbuf, errlen);
}

int asr_config_check_policy(const asr_config_t *cfg, char *errbuf, size_t errlen) {
  if (cfg->on_failure == ASR_ON_FAILURE_ABORT) return 0;
  /* the provider the ranks get: --provider, else -x ASR_PROVIDER, else ours */
  const char *prov = cfg->provider[0] ? cfg->provider : NULL, *how = "--provider";
  for (int i = 0; !prov && i < cfg->nenv; i++)
    if (strcmp(cfg->env[i].name, "ASR_PROVIDER") == 0) {
      prov = cfg->env[i].has_value ? cfg->env[i].value : getenv("ASR_PROVIDER");
      how = "-x ASR_PROVIDER";
    }
  if (!prov) prov = getenv("ASR_PROVIDER"), how = "ASR_PROVIDER";
  if (!prov || strcmp(prov, "shm") != 0) return 0;
  return asr_errf(errbuf, errlen, ASR_ECONFIG,
                  "--on-failure %s with libfabric's shm provider (%s=shm) is refused: a rank killed while "
                  "it writes to a same-host peer leaves shm's lock in shared memory held, and that peer "
                  "hangs inside libfabric; use asr's own same-host path (no provider set) or tcp;ofi_rxm",
                  cfg->on_failure == ASR_ON_FAILURE_CONTINUE ? "continue" : "restart", how);
}
