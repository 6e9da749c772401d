/*
 * config.c -- asrrun's settings: defaults, the ASRRUN_* environment, the
 * command line, hostfiles and -H lists, and the whole precedence stack
 * (DESIGN §4). The YAML layer is in config_yaml.c; both check values through
 * the one key table below, so a setting fails with the same words wherever it
 * was written.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "asr_env.h"
#include "asr_err.h"
#include "asr_fs.h"
#include "config_int.h"

#ifndef ASR_SYSCONFDIR
#define ASR_SYSCONFDIR "/usr/local/etc" /* set by launcher/Makefile.mk from $(sysconfdir) */
#endif

/* The enum fields are written through an int pointer by the key table. */
_Static_assert(sizeof(asr_map_by_t) == sizeof(int), "enum settings are stored as int");
_Static_assert(sizeof(asr_bind_to_t) == sizeof(int), "enum settings are stored as int");
_Static_assert(sizeof(asr_launcher_t) == sizeof(int), "enum settings are stored as int");

/* ------------------------------------------------------------------------ */
/* The key table                                                            */
/* ------------------------------------------------------------------------ */

static const char *const map_by_words[] = {"slot", "node", NULL};
static const char *const bind_to_words[] = {"none", "core", "numa", "package", NULL};
static const char *const launcher_words[] = {"auto", "local", "rsh", "slurm", NULL};

#define INT_KEY(n, e, f, lo, hi) \
  { n, e, ASR__KEY_INT, offsetof(asr_config_t, f), 0, lo, hi, NULL }
#define BOOL_KEY(n, e, f) \
  { n, e, ASR__KEY_BOOL, offsetof(asr_config_t, f), 0, 0, 1, NULL }
#define WORD_KEY(n, e, f, w) \
  { n, e, ASR__KEY_WORD, offsetof(asr_config_t, f), 0, 0, 0, w }
#define STR_KEY(n, e, f, minlen) \
  { n, e, ASR__KEY_STR, offsetof(asr_config_t, f), sizeof(((asr_config_t *)0)->f), minlen, 0, NULL }

/* The largest job: every host full, one rank per LNC. */
#define ASR_CFG_MAX_NP ((long)ASR_CFG_MAX_HOSTS * ASR_CFG_MAX_SLOTS)

/* --timeout is at most a year: a longer one is surely a unit slip
 * (milliseconds typed as seconds), and seconds * 1000 stays far inside an int. */
#define ASR_CFG_MAX_TIMEOUT_S 31536000L

const asr__cfg_key_t asr__cfg_keys[] = {
    INT_KEY("np", "ASRRUN_NP", np, 1, ASR_CFG_MAX_NP),
    INT_KEY("lnc_per_host", "ASRRUN_LNC_PER_HOST", lnc_per_host, 1, ASR_CFG_MAX_SLOTS),
    WORD_KEY("map_by", "ASRRUN_MAP_BY", map_by, map_by_words),
    WORD_KEY("bind_to", "ASRRUN_BIND_TO", bind_to, bind_to_words),
    BOOL_KEY("report_bindings", "ASRRUN_REPORT_BINDINGS", report_bindings),
    BOOL_KEY("tag_output", "ASRRUN_TAG_OUTPUT", tag_output),
    STR_KEY("output_dir", "ASRRUN_OUTPUT_DIR", output_dir, 0),
    INT_KEY("timeout", "ASRRUN_TIMEOUT", timeout_s, 0, ASR_CFG_MAX_TIMEOUT_S),
    INT_KEY("bootstrap_port", "ASRRUN_BOOTSTRAP_PORT", bootstrap_port, 0, 65535),
    STR_KEY("provider", "ASRRUN_PROVIDER", provider, 0),
    WORD_KEY("launcher", "ASRRUN_LAUNCHER", launcher, launcher_words),
    /* the rsh backend puts the agent in front of every remote command, so an
     * empty one must be refused here rather than fail obscurely at launch */
    STR_KEY("launch_agent", "ASRRUN_LAUNCH_AGENT", launch_agent, 1),
    STR_KEY("prefix", "ASRRUN_PREFIX", prefix, 0),
    STR_KEY("if_include", "ASRRUN_IF_INCLUDE", if_include, 0),
    INT_KEY("heartbeat_timeout", "ASRRUN_HEARTBEAT_TIMEOUT", heartbeat_timeout_s, 2, 3600),
    INT_KEY("verbose", NULL, verbose, 0, 100),
};
const size_t asr__cfg_nkeys = sizeof asr__cfg_keys / sizeof asr__cfg_keys[0];

const asr__cfg_key_t *asr__config_key(const char *name) {
  for (size_t i = 0; i < asr__cfg_nkeys; i++)
    if (strcmp(asr__cfg_keys[i].name, name) == 0) return &asr__cfg_keys[i];
  return NULL;
}

const char *asr__config_map_by_name(asr_map_by_t m) { return (unsigned)m < 2 ? map_by_words[m] : "?"; }
const char *asr__config_bind_to_name(asr_bind_to_t b) { return (unsigned)b < 4 ? bind_to_words[b] : "?"; }
const char *asr__config_launcher_name(asr_launcher_t l) { return (unsigned)l < 4 ? launcher_words[l] : "?"; }

int asr__config_fail(char *errbuf, size_t errlen, const char *fmt, ...) {
  if (errbuf && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
  }
  return ASR_ECONFIG;
}

static int fail_nomem(char *errbuf, size_t errlen) {
  asr__config_fail(errbuf, errlen, "out of memory while reading the configuration");
  return ASR_ENOMEM;
}

/* The values go through asr_env.h's parsers, the ones every ASR_* variable
 * uses too, so that a value means the same and fails with the same words as
 * a flag, in a YAML file and in a variable. */
static int set_int(asr_config_t *cfg, const asr__cfg_key_t *k, const char *val, const char *what,
                   char *errbuf, size_t errlen) {
  long v;
  int rc = asr_env_parse_long(what, val, k->min, k->max, &v, errbuf, errlen);
  if (rc == 0) *(int *)((char *)cfg + k->off) = (int)v;
  return rc;
}

static int set_bool(asr_config_t *cfg, const asr__cfg_key_t *k, const char *val, const char *what,
                    char *errbuf, size_t errlen) {
  return asr_env_parse_bool(what, val, (int *)((char *)cfg + k->off), errbuf, errlen);
}

static int set_word(asr_config_t *cfg, const asr__cfg_key_t *k, const char *val, const char *what,
                    char *errbuf, size_t errlen) {
  return asr_env_parse_word(what, val, k->words, (int *)((char *)cfg + k->off), errbuf, errlen);
}

static int set_str(asr_config_t *cfg, const asr__cfg_key_t *k, const char *val, const char *what,
                   char *errbuf, size_t errlen) {
  int rc = asr_env_parse_text(what, val, k->min, (long)k->cap - 1, errbuf, errlen);
  if (rc == 0) memcpy((char *)cfg + k->off, val, strlen(val) + 1); /* fits: checked */
  return rc;
}

int asr__config_set(asr_config_t *cfg, const asr__cfg_key_t *key, const char *val, const char *what,
                    char *errbuf, size_t errlen) {
  switch (key->kind) {
    case ASR__KEY_INT: return set_int(cfg, key, val, what, errbuf, errlen);
    case ASR__KEY_BOOL: return set_bool(cfg, key, val, what, errbuf, errlen);
    case ASR__KEY_WORD: return set_word(cfg, key, val, what, errbuf, errlen);
    case ASR__KEY_STR: return set_str(cfg, key, val, what, errbuf, errlen);
  }
  return asr__config_fail(errbuf, errlen, "%s: internal error: key kind %d", what, (int)key->kind);
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
  if (namelen == 0) return asr__config_fail(errbuf, errlen, "%s: empty host name", what);
  if (namelen >= sizeof h->name)
    return asr__config_fail(errbuf, errlen, "%s: host name '%.40s...' is longer than %zu bytes", what, name,
                            sizeof h->name - 1);
  if (!is_host_name(name, namelen))
    return asr__config_fail(errbuf, errlen, "%s: '%.*s' is not a host name (letters, digits, '-', '.', '_')",
                            what, (int)namelen, name);
  /* A host listed twice is refused rather than merged: whether "a,a" means
   * one slot or two differs between launchers, and a clear error is cheaper
   * than a surprising rank count. */
  for (int i = 0; i < hl->n; i++)
    if (strlen(hl->v[i].name) == namelen && memcmp(hl->v[i].name, name, namelen) == 0)
      return asr__config_fail(errbuf, errlen,
                              "%s: host '%.*s' is listed twice; list it once with all its slots", what,
                              (int)namelen, name);
  if (hl->n >= ASR_CFG_MAX_HOSTS)
    return asr__config_fail(errbuf, errlen, "%s: more than %d hosts", what, ASR_CFG_MAX_HOSTS);
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
    return asr__config_fail(errbuf, errlen, "%s: '%s': slots '%s' is not a number from 1 to %d", what, item,
                            colon + 1, ASR_CFG_MAX_SLOTS);
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
      return asr__config_fail(errbuf, errlen,
                              "%s: unexpected '%s' after the host name; write 'HOST [slots=N]'", where, tok);
    if (slots)
      return asr__config_fail(errbuf, errlen, "%s: slots given twice; write 'HOST [slots=N]'", where);
    if (asr__config_parse_slots(tok + 6, &slots) != 0)
      return asr__config_fail(errbuf, errlen, "%s: '%s': slots must be a number from 1 to %d", where, tok,
                              ASR_CFG_MAX_SLOTS);
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
      return asr__config_fail(errbuf, errlen, "%s: a NUL byte; a hostfile is text, 'HOST [slots=N]' a line",
                              where);
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
  return asr__config_fail(errbuf, errlen, "hostfile path '%.40s...' is too long", name);
}

/* The one hostfile parser: text as read_hostfile_lines takes it. cfg changes
 * only when the whole file parsed and named a host. */
static int read_hostfile_text(asr_config_t *cfg, const char *name, char *text, size_t len, char *errbuf,
                              size_t errlen) {
  asr__hostlist_t hl;
  int rc = asr__hostlist_init(&hl, errbuf, errlen);
  if (rc == 0) rc = read_hostfile_lines(text, len, name, &hl, errbuf, errlen);
  if (rc == 0 && hl.n == 0)
    rc = asr__config_fail(errbuf, errlen, "%s: no hosts in the file (one 'HOST [slots=N]' a line)", name);
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
      return asr__config_fail(errbuf, errlen,
                              "hostfile '%s' is larger than %d MiB; a hostfile is far smaller", path,
                              ASR_CFG_FILE_MAX >> 20);
    return asr__config_fail(errbuf, errlen, "cannot open hostfile '%s': %s", path, strerror(errno));
  }
  rc = read_hostfile_text(cfg, path, text, len, errbuf, errlen);
  free(text);
  return rc;
}

/* Parses a comma-separated -H list; what names the flag as the user typed it. */
static int parse_hostlist_as(asr_config_t *cfg, const char *list, const char *what, char *errbuf,
                             size_t errlen) {
  asr__hostlist_t hl;
  int rc = asr__hostlist_init(&hl, errbuf, errlen);
  for (const char *p = list; rc == 0;) {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    char item[256];
    if (n == 0) {
      rc = asr__config_fail(errbuf, errlen, "%s: empty host in '%s'; write HOST[:SLOTS],...", what, list);
    } else if (n >= sizeof item) {
      rc = asr__config_fail(errbuf, errlen, "%s: host '%.40s...' is too long", what, p);
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
  return parse_hostlist_as(cfg, list, "-H", errbuf, errlen);
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
    return asr__config_fail(
        errbuf, errlen,
        "%s: '%.*s' is not a variable name (letters, digits and '_', not starting with a digit)", what,
        (int)namelen, name);
  if (namelen >= sizeof e->name)
    return asr__config_fail(errbuf, errlen, "%s: variable name '%.40s...' is too long", what, name);
  if (value && strlen(value) >= sizeof e->value)
    return asr__config_fail(errbuf, errlen, "%s: the value of %.*s is longer than %zu bytes", what,
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
      return asr__config_fail(errbuf, errlen, "%s: more than %d exported variables", what, ASR_CFG_MAX_ENV);
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
  if (!*program) return asr__config_fail(errbuf, errlen, "%s: the program name is empty", what);
  if (strlen(program) >= sizeof cfg->program)
    return asr__config_fail(errbuf, errlen, "%s: program '%.40s...' is too long", what, program);
  if (nargs > ASR_CFG_MAX_ARGS)
    return asr__config_fail(errbuf, errlen, "%s: %d program arguments, at most %d", what, nargs,
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

void asr_config_defaults(asr_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->map_by = ASR_MAP_SLOT;
  cfg->bind_to = ASR_BIND_CORE;
  cfg->tag_output = 1;
  cfg->launcher = ASR_LAUNCHER_AUTO;
  snprintf(cfg->launch_agent, sizeof cfg->launch_agent, "ssh");
  cfg->heartbeat_timeout_s = 10;
}

void asr_config_free(asr_config_t *cfg) {
  free_args(cfg->args, cfg->nargs);
  memset(cfg->args, 0, sizeof cfg->args);
  cfg->nargs = 0;
}

/* An empty ASRRUN_* variable counts as unset, the usual shell convention
 * (`ASRRUN_NP= asrrun ...` turns the variable off rather than failing). The
 * values are checked by the key table, as flags and YAML keys are; each
 * key's variable is a row of asr_env.h (test_launcher_config checks that they
 * agree). */
int asr_config_load_env(asr_config_t *cfg, char *errbuf, size_t errlen) {
  for (size_t i = 0; i < asr__cfg_nkeys; i++) {
    const asr__cfg_key_t *k = &asr__cfg_keys[i];
    const asr_env_row_t *row = k->env ? asr_env_find(k->env) : NULL;
    const char *v = row ? asr_env_raw(row->id) : NULL;
    if (!v || !*v) continue;
    int rc = asr__config_set(cfg, k, v, k->env, errbuf, errlen);
    if (rc) return rc;
  }
  const char *hf = NULL;
  int rc = asr_env_str(ASR_ENV_ASRRUN_HOSTFILE, &hf, errbuf, errlen);
  if (rc == 0 && hf) {
    char inner[1200];
    rc = asr_config_read_hostfile(cfg, hf, inner, sizeof inner);
    if (rc) return asr__config_fail(errbuf, errlen, "ASRRUN_HOSTFILE: %s", inner);
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
      asr__config_fail(u->errbuf, u->errlen, "unknown variable %s%s; asrrun --list-env lists them", name,
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

/* ------------------------------------------------------------------------ */
/* The command line                                                         */
/* ------------------------------------------------------------------------ */

typedef struct cli_opt cli_opt_t;

typedef struct {
  asr_config_t *cfg;
  char *errbuf;
  size_t errlen;
  const char *host_flag;     /* -H as typed, once seen: -H and --hostfile exclude each other */
  const char *hostfile_flag; /* --hostfile, once seen */
} cli_ctx_t;

typedef int (*cli_fn)(cli_ctx_t *ctx, const cli_opt_t *opt, const char *flag, const char *val);

struct cli_opt {
  const char *name, *alias;
  const char *metavar; /* the value's placeholder in --help; NULL for a switch; "[=...]": optional, given
                        * only as --flag=VALUE */
  const char *key;     /* the asr__cfg_keys entry it sets, if any */
  const char *fixed;   /* for a switch that sets key: the value it sets */
  cli_fn fn;
  const char *help;
};

static int opt_key(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  const asr__cfg_key_t *k = asr__config_key(o->key);
  return asr__config_set(c->cfg, k, o->fixed ? o->fixed : val, flag, c->errbuf, c->errlen);
}

/* -H and --hostfile in one command line would have to be combined somehow
 * (mpirun filters one by the other); refusing the pair keeps the rule simple. */
static int both_host_sources(cli_ctx_t *c) {
  return asr__config_fail(c->errbuf, c->errlen, "%s and %s both given; use one of them", c->host_flag,
                          c->hostfile_flag);
}

static int opt_host(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  c->host_flag = o->name;
  if (c->hostfile_flag) return both_host_sources(c);
  return parse_hostlist_as(c->cfg, val, flag, c->errbuf, c->errlen);
}

static int opt_hostfile(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  c->hostfile_flag = o->name;
  if (c->host_flag) return both_host_sources(c);
  char inner[1200];
  int rc = asr_config_read_hostfile(c->cfg, val, inner, sizeof inner);
  return rc ? asr__config_fail(c->errbuf, c->errlen, "%s: %s", flag, inner) : 0;
}

/* -f is read by asr_config_load's pre-scan, before the environment; here it
 * is only checked and remembered for messages. */
static int opt_job_file(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  if (!*val) return asr__config_fail(c->errbuf, c->errlen, "%s: needs a file name", flag);
  if (strlen(val) >= sizeof c->cfg->job_file)
    return asr__config_fail(c->errbuf, c->errlen, "%s: path '%.40s...' is too long", flag, val);
  snprintf(c->cfg->job_file, sizeof c->cfg->job_file, "%s", val);
  return 0;
}

static int opt_export(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  return asr__config_put_env_spec(c->cfg, val, flag, c->errbuf, c->errlen);
}

static int opt_dry_run(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  c->cfg->dry_run = 1;
  return 0;
}

/* -v, -vv, -vvv: each v adds one level. */
static int opt_verbose(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  c->cfg->verbose += (int)strlen(flag) - 1;
  return 0;
}

static int opt_help(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val);

static int opt_version(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  printf("asrrun (asr) %s\n", PACKAGE_VERSION);
  return 1;
}

/* --list-env, or --list-env=markdown (README.md's table: scripts/gen-env-table.sh). */
static int opt_list_env(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  int markdown = 0;
  if (val && asr_env_parse_word(flag, val, (const char *const[]){"text", "markdown", NULL}, &markdown,
                                c->errbuf, c->errlen) != 0)
    return ASR_ECONFIG;
  asr_env_print(stdout, markdown);
  return 1;
}

/* The one list of flags: the parser, the -f pre-scan and --help all read it,
 * so a flag cannot exist without its help line. */
static const cli_opt_t cli_opts[] = {
    {"-n", "-np", "N", "np", NULL, opt_key, "number of ranks (default: one per slot)"},
    {"-H", "--host", "HOST[:SLOTS],...", NULL, NULL, opt_host, "hosts to run on, with their slot counts"},
    {"--hostfile", NULL, "FILE", NULL, NULL, opt_hostfile,
     "read hosts from FILE, one 'HOST [slots=N]' a line"},
    {"--lnc-per-host", NULL, "N", "lnc_per_host", NULL, opt_key,
     "slots of a host that has no count (1..128)"},
    {"-f", NULL, "FILE", NULL, NULL, opt_job_file, "job YAML file (env and command line override it)"},
    {"--map-by", NULL, "slot|node", "map_by", NULL, opt_key,
     "fill each host first (slot) or round robin (node)"},
    {"--bind-to", NULL, "none|core|numa|package", "bind_to", NULL, opt_key, "bind each rank (default: core)"},
    {"--report-bindings", NULL, NULL, "report_bindings", "1", opt_key, "print each rank's binding"},
    {"-x", NULL, "VAR[=VAL]", NULL, NULL, opt_export, "export VAR to the ranks (repeatable)"},
    {"--tag-output", NULL, NULL, "tag_output", "1", opt_key, "prefix output lines with the rank (default)"},
    {"--no-tag-output", NULL, NULL, "tag_output", "0", opt_key, "leave output lines as the ranks wrote them"},
    {"--output-dir", NULL, "DIR", "output_dir", NULL, opt_key, "also write each rank's output under DIR"},
    {"--timeout", NULL, "SECONDS", "timeout", NULL, opt_key, "abort the job after SECONDS (0: never)"},
    {"--bootstrap-port", NULL, "P", "bootstrap_port", NULL, opt_key, "KV server port (0: choose a free one)"},
    {"--provider", NULL, "NAME", "provider", NULL, opt_key,
     "libfabric provider (default: shm or tcp;ofi_rxm)"},
    {"--dry-run", NULL, NULL, NULL, NULL, opt_dry_run, "print the rank map and exit"},
    {"-v", NULL, NULL, NULL, NULL, opt_verbose, "more output (repeatable: -vv)"},
    {"--version", NULL, NULL, NULL, NULL, opt_version, "print the version and exit"},
    {"--list-env", NULL, "[=markdown]", NULL, NULL, opt_list_env,
     "print the ASR_* and ASRRUN_* environment variables and exit"},
    {"-h", "--help", NULL, NULL, NULL, opt_help, "print this help and exit"},
    {"--launcher", NULL, "auto|local|rsh|slurm", "launcher", NULL, opt_key, "how to start the host daemons"},
    {"--launch-agent", NULL, "CMD", "launch_agent", NULL, opt_key, "rsh agent command (default: ssh)"},
    {"--prefix", NULL, "DIR", "prefix", NULL, opt_key, "asr's install prefix on the remote hosts"},
    {"--if-include", NULL, "IFACE|NET/N|ADDR", "if_include", NULL, opt_key,
     "network interface, subnet or address for rank traffic"},
    {"--heartbeat-timeout", NULL, "SECONDS", "heartbeat_timeout", NULL, opt_key,
     "end the job when a host is silent this long (2..3600, default 10)"},
};
#define N_CLI_OPTS (sizeof cli_opts / sizeof cli_opts[0])

static int opt_help(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  printf(
      "usage: asrrun [options] PROGRAM [ARGS...]\n"
      "       asrrun -f JOB.yaml [options] [PROGRAM [ARGS...]]\n\noptions:\n");
  for (size_t i = 0; i < N_CLI_OPTS; i++) {
    const cli_opt_t *p = &cli_opts[i];
    char names[64];
    snprintf(names, sizeof names, "%s%s%s%s%s", p->name, p->alias ? ", " : "", p->alias ? p->alias : "",
             p->metavar && p->metavar[0] != '[' ? " " : "", p->metavar ? p->metavar : "");
    printf("  %-34s %s\n", names, p->help);
  }
  printf(
      "\nEvery flag takes its value as '--flag VALUE' or '--flag=VALUE'; '--' ends the options.\n"
      "Settings are read lowest first from: built-in defaults, the system file\n"
      "  %s/asr/asrrun.yaml\n"
      "($ASR_SYSTEM_CONFIG), ~/.config/asr/asrrun.yaml ($ASR_USER_CONFIG), the -f job file,\n"
      "ASRRUN_* variables, and this command line; asrrun --list-env lists the variables.\n"
      "\nExit status: 0 all ranks exited 0; 1-123 the first failing rank's status (or its abort status);\n"
      "124 --timeout expired; 125 launch failure or a daemon died; 127 program not found;\n"
      "128+S a rank (or asrrun) got signal S; 2 bad command line or configuration.\n",
      ASR_SYSCONFDIR);
  return 1;
}

static int is_verbose_flag(const char *s) {
  if (s[0] != '-' || s[1] != 'v') return 0;
  return strspn(s + 1, "v") == strlen(s + 1);
}

static const cli_opt_t *find_opt(const char *name) {
  if (is_verbose_flag(name)) name = "-v";
  for (size_t i = 0; i < N_CLI_OPTS; i++)
    if (strcmp(cli_opts[i].name, name) == 0 || (cli_opts[i].alias && strcmp(cli_opts[i].alias, name) == 0))
      return &cli_opts[i];
  return NULL;
}

/* Reads the option at argv[*i] and moves *i past it (and its value).
 * Returns 1 with *opt, flag (the name as typed, without "=value") and *val;
 * 0 when argv[*i] is the program or argv ended (a "--" is consumed); or
 * ASR_ECONFIG. Used by both the parser and the -f pre-scan. */
static int next_option(int argc, char **argv, int *i, const cli_opt_t **opt, char *flag, size_t flaglen,
                       const char **val, char *errbuf, size_t errlen) {
  if (*i >= argc) return 0;
  const char *a = argv[*i];
  if (strcmp(a, "--") == 0) {
    (*i)++;
    return 0;
  }
  if (a[0] != '-' || a[1] == '\0') return 0;
  const char *eq = strchr(a, '=');
  size_t n = eq ? (size_t)(eq - a) : strlen(a);
  *opt = NULL;
  if (n < flaglen) {
    memcpy(flag, a, n);
    flag[n] = '\0';
    *opt = find_opt(flag);
  }
  if (!*opt) return asr__config_fail(errbuf, errlen, "unknown option '%.*s' (see asrrun --help)", (int)n, a);
  (*i)++;
  *val = eq ? eq + 1 : NULL;
  if (!(*opt)->metavar) {
    if (eq) return asr__config_fail(errbuf, errlen, "%s takes no value (got '%s')", flag, a);
    return 1;
  }
  if ((*opt)->metavar[0] == '[') return 1; /* an optional value: only ever --flag=VALUE */
  if (!eq) {
    if (*i >= argc)
      return asr__config_fail(errbuf, errlen, "%s needs a value: %s %s", flag, flag, (*opt)->metavar);
    *val = argv[(*i)++];
  }
  return 1;
}

int asr_config_parse_args(asr_config_t *cfg, int argc, char **argv, char *errbuf, size_t errlen) {
  cli_ctx_t ctx = {.cfg = cfg, .errbuf = errbuf, .errlen = errlen};
  const cli_opt_t *opt;
  const char *val;
  char flag[64];
  int i = 1, rc;
  while ((rc = next_option(argc, argv, &i, &opt, flag, sizeof flag, &val, errbuf, errlen)) > 0)
    if ((rc = opt->fn(&ctx, opt, flag, val)) != 0) return rc; /* an error, or 1 after --help/--version */
  if (rc < 0) return rc;
  if (i < argc)
    return asr__config_set_program(cfg, argv[i], (const char *const *)argv + i + 1, argc - i - 1, "program",
                                   errbuf, errlen);
  /* the program may also come from a YAML layer (asrrun -f job.yaml) */
  if (!cfg->program[0])
    return asr__config_fail(errbuf, errlen, "no program given: asrrun [options] PROGRAM [ARGS]");
  return 0;
}

/* ------------------------------------------------------------------------ */
/* The whole stack                                                          */
/* ------------------------------------------------------------------------ */

typedef struct {
  const char *job_file; /* the last -f's value */
  int info_only;        /* --help, --version or --list-env: read no files, check no variables */
} prescan_t;

/* Finds -f before the environment and the command line are applied, walking
 * argv exactly as the parser will (so "-x -f" or a program argument "-f" are
 * not mistaken for it). Errors stop the scan silently: the parser reports them. */
static void prescan_args(int argc, char **argv, prescan_t *ps) {
  const cli_opt_t *opt;
  const char *val;
  char flag[64];
  int i = 1;
  memset(ps, 0, sizeof *ps);
  while (next_option(argc, argv, &i, &opt, flag, sizeof flag, &val, NULL, 0) > 0) {
    if (opt->fn == opt_job_file) ps->job_file = val;
    if (opt->fn == opt_help || opt->fn == opt_version || opt->fn == opt_list_env) ps->info_only = 1;
  }
}

/* The path of a settings file: the variable when it is set (set but empty
 * means "no file": asr_env_raw tells that from unset), else the default.
 * Returns NULL for no file. */
static const char *config_path(asr_env_id_t var, const char *dflt) {
  const char *v = asr_env_raw(var);
  if (v) return *v ? v : NULL;
  return dflt;
}

static const char *user_default_path(char *buf, size_t len) {
  const char *home = getenv("HOME");
  if (!home || !*home) return NULL;
  int n = snprintf(buf, len, "%s/.config/asr/asrrun.yaml", home);
  return n > 0 && (size_t)n < len ? buf : NULL;
}

/* The system and user files are optional: a missing one is skipped, while
 * one that exists but is wrong is an error (a silently ignored typo in a
 * site file would be found only by its effects). */
static int load_optional_yaml(asr_config_t *cfg, const char *path, char *errbuf, size_t errlen) {
  if (!path) return 0;
  int rc = asr_config_load_yaml(cfg, path, errbuf, errlen);
  return rc == ASR_ENOENT ? 0 : rc;
}

static int load_job_yaml(asr_config_t *cfg, const char *path, char *errbuf, size_t errlen) {
  int rc = asr_config_load_yaml(cfg, path, errbuf, errlen);
  if (rc == ASR_ENOENT) return asr__config_fail(errbuf, errlen, "-f: job file '%s' does not exist", path);
  if (rc == 0) snprintf(cfg->job_file, sizeof cfg->job_file, "%s", path);
  return rc;
}

int asr_config_load(asr_config_t *cfg, int argc, char **argv, char *errbuf, size_t errlen) {
  char user_buf[1100];
  prescan_t ps;
  int rc = 0;
  asr_config_defaults(cfg);
  prescan_args(argc, argv, &ps);
  if (!ps.info_only) {
    const char *sys = config_path(ASR_ENV_SYSTEM_CONFIG, ASR_SYSCONFDIR "/asr/asrrun.yaml");
    const char *user = config_path(ASR_ENV_USER_CONFIG, user_default_path(user_buf, sizeof user_buf));
    rc = asr_config_check_env(errbuf, errlen);
    if (rc == 0) rc = load_optional_yaml(cfg, sys, errbuf, errlen);
    if (rc == 0) rc = load_optional_yaml(cfg, user, errbuf, errlen);
    if (rc == 0 && ps.job_file) rc = load_job_yaml(cfg, ps.job_file, errbuf, errlen);
    if (rc == 0) rc = asr_config_load_env(cfg, errbuf, errlen);
  }
  if (rc == 0) rc = asr_config_parse_args(cfg, argc, argv, errbuf, errlen);
  return rc;
}
