/*
 * config_yaml.c -- one YAML settings file (system, user or -f job file)
 * applied onto an asr_config_t, with libyaml's document API.
 *
 * The document API (a node tree with a start mark on every node) is used
 * rather than the event stream because every error must name the line of the
 * offending key or value, and the tree keeps those marks at hand while the
 * keys are checked in any order.
 *
 * A file is read into memory whole and parsed from there, the same code as
 * asr_config_load_yaml_buffer's, so the fuzz target (tests/fuzz/fuzz_yaml.c)
 * exercises exactly what asrrun runs on a file.
 *
 * Errors read "FILE:LINE: KEY: what is wrong". Scalar keys are checked by
 * asr__config_set (config.c), the same code as the ASRRUN_* variables and
 * the flags; hosts, hostfile, env, program and args are handled here.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "asr_err.h"
#include "asr_fs.h"
#include "config_int.h"

typedef struct {
  asr_config_t *cfg;
  yaml_document_t *doc;
  const char *path;
  char *errbuf;
  size_t errlen;
  yaml_node_t *program; /* program and args apply together, after the mapping */
  yaml_node_t *args;
  yaml_node_t *hosts, *hostfile; /* either may be given, not both */
} yctx_t;

static const char *const special_keys[] = {"hosts", "hostfile", "rankfile", "env", "program", "args"};
#define N_SPECIAL (sizeof special_keys / sizeof special_keys[0])

static size_t line_of(const yaml_node_t *n) { return n->start_mark.line + 1; }

static const char *text_of(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

static const char *type_name(const yaml_node_t *n) {
  switch (n->type) {
    case YAML_SCALAR_NODE: return "single value";
    case YAML_SEQUENCE_NODE: return "list";
    case YAML_MAPPING_NODE: return "mapping";
    default: return "empty node";
  }
}

/* A plain ~, null or nothing at all: the YAML spellings of "no value". A
 * quoted "" or "null" is a string, as YAML says. */
static int is_null(const yaml_node_t *n) {
  if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
  const char *s = text_of(n);
  return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static yaml_node_t *node(const yctx_t *y, int index) { return yaml_document_get_node(y->doc, index); }

/* Formats "FILE:LINE: KEY: message" (KEY left out when NULL). */
static int yerr(const yctx_t *y, const yaml_node_t *at, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int yerr(const yctx_t *y, const yaml_node_t *at, const char *key, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (key)
    return asr_errf(y->errbuf, y->errlen, ASR_ECONFIG, "%s:%zu: %s: %s", y->path, line_of(at), key, msg);
  return asr_errf(y->errbuf, y->errlen, ASR_ECONFIG, "%s:%zu: %s", y->path, line_of(at), msg);
}

/* The "what" prefix handed to config.c's checkers: "FILE:LINE: KEY". */
static void where(const yctx_t *y, const yaml_node_t *at, const char *key, char *buf, size_t len) {
  snprintf(buf, len, "%s:%zu: %s", y->path, line_of(at), key);
}

static int expect_scalar(const yctx_t *y, const yaml_node_t *v, const char *key, const char *wanted) {
  if (v->type == YAML_SCALAR_NODE) return 0;
  return yerr(y, v, key, "expected %s, not a %s", wanted, type_name(v));
}

static const char *wanted_for(const asr__cfg_key_t *k) {
  switch (asr__config_key_kind(k)) {
    case ASR__KEY_INT: return "a number";
    case ASR__KEY_BOOL: return "true or false";
    case ASR__KEY_WORD: return "a word";
    case ASR__KEY_STR: return "a string";
    case ASR__KEY_MAP: return "a word";
    case ASR__KEY_INVALID: break;
  }
  return "a value";
}

static int apply_scalar_key(yctx_t *y, const asr__cfg_key_t *k, const yaml_node_t *v) {
  char what[1200];
  int rc = expect_scalar(y, v, k->name, wanted_for(k));
  if (rc) return rc;
  where(y, v, k->name, what, sizeof what);
  return asr__config_set(y->cfg, k, is_null(v) ? "" : text_of(v), what, y->errbuf, y->errlen);
}

/* ---- hosts ---------------------------------------------------------------- */

/* A host written as a mapping: {name: X, slots: N}. */
static int add_host_mapping(yctx_t *y, asr__hostlist_t *hl, yaml_node_t *item) {
  const char *name = NULL;
  int slots = 0;
  for (yaml_node_pair_t *p = item->data.mapping.pairs.start; p < item->data.mapping.pairs.top; p++) {
    yaml_node_t *k = node(y, p->key), *v = node(y, p->value);
    if (k->type != YAML_SCALAR_NODE || v->type != YAML_SCALAR_NODE)
      return yerr(y, k, "hosts", "a host is written as {name: HOST, slots: N}");
    if (strcmp(text_of(k), "name") == 0) {
      name = text_of(v);
    } else if (strcmp(text_of(k), "slots") == 0) {
      if (asr__config_parse_slots(text_of(v), &slots) != 0)
        return yerr(y, v, "hosts", "slots '%s' is not a number from 1 to %d", text_of(v), ASR_CFG_MAX_SLOTS);
    } else {
      return yerr(y, k, "hosts", "unknown key '%s' in a host; a host has name and slots", text_of(k));
    }
  }
  if (!name) return yerr(y, item, "hosts", "a host needs a name: {name: HOST, slots: N}");
  char what[1200];
  where(y, item, "hosts", what, sizeof what);
  return asr__hostlist_add(hl, name, strlen(name), slots, what, y->errbuf, y->errlen);
}

static int add_host_item(yctx_t *y, asr__hostlist_t *hl, yaml_node_t *item) {
  char what[1200];
  where(y, item, "hosts", what, sizeof what);
  switch (item->type) {
    case YAML_SCALAR_NODE: return asr__hostlist_add_item(hl, text_of(item), what, y->errbuf, y->errlen);
    case YAML_MAPPING_NODE: return add_host_mapping(y, hl, item);
    default:
      return yerr(y, item, "hosts", "a host is \"NAME\", \"NAME:SLOTS\" or {name: NAME, slots: N}, not a %s",
                  type_name(item));
  }
}

/* hosts replaces the lower layers' hosts; a null or [] value means "just
 * this host", so a job file can undo a site file's host list. */
static int apply_hosts(yctx_t *y, yaml_node_t *v) {
  if (is_null(v)) {
    y->cfg->nhosts = 0;
    y->cfg->hostfile[0] = '\0';
    return 0;
  }
  if (v->type != YAML_SEQUENCE_NODE)
    return yerr(y, v, "hosts", "expected a list of hosts, not a %s", type_name(v));
  asr__hostlist_t hl;
  int rc = asr__hostlist_init(&hl, y->errbuf, y->errlen);
  for (yaml_node_item_t *it = v->data.sequence.items.start; rc == 0 && it < v->data.sequence.items.top; it++)
    rc = add_host_item(y, &hl, node(y, *it));
  if (rc == 0) asr__config_set_hosts(y->cfg, &hl);
  asr__hostlist_fini(&hl);
  return rc;
}

/* A relative hostfile or rankfile is found next to the YAML file, so a job
 * file and its hostfile can move together and be used from any directory. */
static int apply_file(yctx_t *y, yaml_node_t *v, const char *key,
                      int (*read)(asr_config_t *, const char *, char *, size_t)) {
  char path[1024], inner[1200];
  int rc = expect_scalar(y, v, key, "a file name");
  if (rc) return rc;
  const char *name = is_null(v) ? "" : text_of(v), *slash = strrchr(y->path, '/');
  if (!*name) return yerr(y, v, key, "needs a file name");
  int n = name[0] == '/' || !slash
              ? snprintf(path, sizeof path, "%s", name)
              : snprintf(path, sizeof path, "%.*s/%s", (int)(slash - y->path), y->path, name);
  if (n < 0 || (size_t)n >= sizeof path) return yerr(y, v, key, "path '%.40s...' is too long", name);
  if ((rc = read(y->cfg, path, inner, sizeof inner)) != 0) return yerr(y, v, key, "%s", inner);
  return 0;
}

static int apply_hostfile(yctx_t *y, yaml_node_t *v) {
  return apply_file(y, v, "hostfile", asr_config_read_hostfile);
}

/* ---- env, program, args --------------------------------------------------- */

static int apply_env_mapping(yctx_t *y, yaml_node_t *v) {
  char what[1200];
  for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
    yaml_node_t *k = node(y, p->key), *val = node(y, p->value);
    if (k->type != YAML_SCALAR_NODE)
      return yerr(y, k, "env", "a variable name must be a word, not a %s", type_name(k));
    if (val->type != YAML_SCALAR_NODE)
      return yerr(y, val, "env", "the value of %s must be a single value, not a %s", text_of(k),
                  type_name(val));
    where(y, k, "env", what, sizeof what);
    /* VAR: ~ (no value) copies VAR from asrrun's environment, like -x VAR */
    int rc = asr__config_put_env(y->cfg, text_of(k), strlen(text_of(k)), is_null(val) ? NULL : text_of(val),
                                 what, y->errbuf, y->errlen);
    if (rc) return rc;
  }
  return 0;
}

static int apply_env_list(yctx_t *y, yaml_node_t *v) {
  char what[1200];
  for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
    yaml_node_t *item = node(y, *it);
    int rc = expect_scalar(y, item, "env", "\"VAR\" or \"VAR=value\"");
    if (rc) return rc;
    where(y, item, "env", what, sizeof what);
    if ((rc = asr__config_put_env_spec(y->cfg, text_of(item), what, y->errbuf, y->errlen)) != 0) return rc;
  }
  return 0;
}

static int apply_env(yctx_t *y, yaml_node_t *v) {
  if (v->type == YAML_MAPPING_NODE) return apply_env_mapping(y, v);
  if (v->type == YAML_SEQUENCE_NODE) return apply_env_list(y, v);
  if (is_null(v)) return 0;
  return yerr(y, v, "env", "expected a mapping (VAR: value) or a list (\"VAR=value\"), not a %s",
              type_name(v));
}

static int check_args(yctx_t *y, yaml_node_t *v) {
  if (is_null(v)) return 0;
  if (v->type != YAML_SEQUENCE_NODE)
    return yerr(y, v, "args", "expected a list of strings, not a %s (write args: [\"-a\", \"b\"])",
                type_name(v));
  for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
    yaml_node_t *item = node(y, *it);
    if (item->type != YAML_SCALAR_NODE)
      return yerr(y, item, "args", "each argument must be a single value, not a %s", type_name(item));
  }
  return 0;
}

/* Sets program and args from the collected nodes: args belong to the
 * program of the same file, so one without the other would be ambiguous. */
static int apply_program(yctx_t *y) {
  if (!y->program && !y->args) return 0;
  if (!y->program) return yerr(y, y->args, "args", "given without program; add 'program: PATH'");
  if (is_null(y->program) || !*text_of(y->program))
    return yerr(y, y->program, "program", "needs a program path");
  int n = 0;
  const char *argv[ASR_CFG_MAX_ARGS];
  if (y->args && y->args->type == YAML_SEQUENCE_NODE)
    for (yaml_node_item_t *it = y->args->data.sequence.items.start; it < y->args->data.sequence.items.top;
         it++) {
      if (n == ASR_CFG_MAX_ARGS) return yerr(y, y->args, "args", "more than %d arguments", ASR_CFG_MAX_ARGS);
      argv[n++] = text_of(node(y, *it));
    }
  char what[1200];
  where(y, y->program, "program", what, sizeof what);
  return asr__config_set_program(y->cfg, text_of(y->program), argv, n, what, y->errbuf, y->errlen);
}

/* ---- the top-level mapping ------------------------------------------------ */

static int unknown_key(yctx_t *y, yaml_node_t *k) {
  char known[512];
  size_t used = 0;
  known[0] = '\0';
  for (size_t i = 0; i < asr__cfg_nkeys + N_SPECIAL; i++) {
    const char *name = i < asr__cfg_nkeys ? asr__cfg_keys[i].name : special_keys[i - asr__cfg_nkeys];
    int n = snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", name);
    if (n < 0 || (size_t)n >= sizeof known - used) break;
    used += (size_t)n;
  }
  return yerr(y, k, text_of(k), "unknown key; the keys are %s", known);
}

/* hosts and hostfile in one file would each replace the other's list;
 * refuse the pair rather than let the later line win unnoticed. */
static int hosts_twice(yctx_t *y, yaml_node_t *k, const char *other_name, const yaml_node_t *other) {
  return yerr(y, k, text_of(k), "%s is also given (line %zu); use one of them", other_name, line_of(other));
}

static int apply_key(yctx_t *y, yaml_node_t *k, yaml_node_t *v) {
  const char *name = text_of(k);
  const asr__cfg_key_t *key = asr__config_key(name);
  if (key) return apply_scalar_key(y, key, v);
  if (strcmp(name, "hosts") == 0) {
    y->hosts = k;
    return y->hostfile ? hosts_twice(y, k, "hostfile", y->hostfile) : apply_hosts(y, v);
  }
  if (strcmp(name, "hostfile") == 0) {
    y->hostfile = k;
    return y->hosts ? hosts_twice(y, k, "hosts", y->hosts) : apply_hostfile(y, v);
  }
  if (strcmp(name, "rankfile") == 0) return apply_file(y, v, "rankfile", asr_config_read_rankfile);
  if (strcmp(name, "env") == 0) return apply_env(y, v);
  if (strcmp(name, "program") == 0) {
    y->program = v;
    return expect_scalar(y, v, "program", "a program path");
  }
  if (strcmp(name, "args") == 0) {
    y->args = v;
    return check_args(y, v);
  }
  return unknown_key(y, k);
}

/* libyaml keeps every pair of a mapping, so a key written twice would
 * silently take its last value; say so instead. */
static int check_duplicate(yctx_t *y, yaml_node_t *map, yaml_node_pair_t *pair) {
  yaml_node_t *k = node(y, pair->key);
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < pair; p++) {
    yaml_node_t *prev = node(y, p->key);
    if (prev->type == YAML_SCALAR_NODE && strcmp(text_of(prev), text_of(k)) == 0)
      return yerr(y, k, text_of(k), "given twice (first on line %zu)", line_of(prev));
  }
  return 0;
}

static int apply_root(yctx_t *y) {
  yaml_node_t *root = yaml_document_get_root_node(y->doc);
  if (!root || is_null(root)) return 0; /* an empty file or only comments: nothing set */
  if (root->type != YAML_MAPPING_NODE)
    return yerr(y, root, NULL, "the file must be a mapping of 'key: value' lines, not a %s", type_name(root));
  for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
    yaml_node_t *k = node(y, p->key), *v = node(y, p->value);
    if (k->type != YAML_SCALAR_NODE) return yerr(y, k, NULL, "a key must be a word, not a %s", type_name(k));
    int rc = check_duplicate(y, root, p);
    if (rc == 0) rc = apply_key(y, k, v);
    if (rc) return rc;
  }
  return apply_program(y);
}

static int syntax_error(const yaml_parser_t *p, const char *path, char *errbuf, size_t errlen) {
  const char *problem = p->problem ? p->problem : "malformed YAML";
  if (p->error == YAML_MEMORY_ERROR)
    return asr_errf(errbuf, errlen, ASR_ENOMEM, "%s: out of memory while parsing", path);
  if (p->error == YAML_READER_ERROR)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s: byte %zu: %s (the file must be UTF-8 text)", path,
                    p->problem_offset, problem);
  return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s:%zu: YAML syntax error: %s%s%s", path,
                  p->problem_mark.line + 1, problem, p->context ? " " : "", p->context ? p->context : "");
}

/* Only the first document is read; a second one would be silently ignored,
 * so it is refused. */
static int check_single_document(yaml_parser_t *p, const char *path, char *errbuf, size_t errlen) {
  yaml_document_t next;
  if (!yaml_parser_load(p, &next)) return syntax_error(p, path, errbuf, errlen);
  yaml_node_t *root = yaml_document_get_root_node(&next);
  size_t line = root ? root->start_mark.line + 1 : 0;
  yaml_document_delete(&next);
  if (root)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s:%zu: a second YAML document; keep all settings in one",
                    path, line);
  return 0;
}

int asr_config_load_yaml_buffer(asr_config_t *cfg, const char *name, const void *buf, size_t len,
                                char *errbuf, size_t errlen) {
  yaml_parser_t parser;
  yaml_document_t doc;
  int rc;
  if (!yaml_parser_initialize(&parser))
    return asr_errf(errbuf, errlen, ASR_ENOMEM, "%s: out of memory while parsing", name);
  yaml_parser_set_input_string(&parser, len ? buf : (const void *)"", len); /* libyaml asserts non-NULL */
  if (!yaml_parser_load(&parser, &doc)) {
    rc = syntax_error(&parser, name, errbuf, errlen);
  } else {
    yctx_t y = {.cfg = cfg, .doc = &doc, .path = name, .errbuf = errbuf, .errlen = errlen};
    rc = check_single_document(&parser, name, errbuf, errlen);
    if (rc == 0) rc = apply_root(&y);
    yaml_document_delete(&doc);
  }
  yaml_parser_delete(&parser);
  return rc;
}

int asr_config_load_yaml(asr_config_t *cfg, const char *path, char *errbuf, size_t errlen) {
  char *text;
  size_t len;
  int rc = asr_fs_read_file(path, ASR_CFG_FILE_MAX, &text, &len);
  if (rc) {
    int e = errno;
    if (e == EISDIR)
      return asr_errf(errbuf, errlen, ASR_ECONFIG, "'%s' is a directory, not a YAML file", path);
    if (rc == ASR_ETOOBIG)
      return asr_errf(errbuf, errlen, ASR_ECONFIG,
                      "'%s' is larger than %d MiB; a settings file is far smaller", path,
                      ASR_CFG_FILE_MAX >> 20);
    asr_errf(errbuf, errlen, ASR_ECONFIG, "cannot open '%s': %s", path, strerror(e));
    return e == ENOENT || e == ENOTDIR ? ASR_ENOENT : rc;
  }
  rc = asr_config_load_yaml_buffer(cfg, path, text, len, errbuf, errlen);
  free(text);
  return rc;
}
