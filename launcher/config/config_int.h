/*
 * config_int.h -- what config.c, config_yaml.c and map.c share; not part of
 * the interface asrrun uses (that is job_config.h).
 *
 * Every scalar setting is described once, in asr__cfg_keys[] (config.c): its
 * YAML key, its ASRRUN_* variable and how its value is checked. The YAML, env
 * and command-line layers all go through asr__config_set(), so a value means
 * the same thing and fails with the same words in every layer; only the
 * "what" prefix of the message differs ("--bind-to", "ASRRUN_BIND_TO",
 * "job.yaml:3: bind_to"). The checks are common/asr_env.h's value parsers,
 * and each key's variable is a row of that table with the same type, range,
 * words and default (test_launcher_config checks it).
 */
#ifndef ASR_LAUNCHER_CONFIG_INT_H
#define ASR_LAUNCHER_CONFIG_INT_H

#include <stddef.h>

#include "job_config.h"

#define ASR_CFG_MAX_SLOTS 128 /* ranks per host: one per LNC, and an LNC is 0..127 */

/* The largest settings file or hostfile read: real ones are a few kB, and the
 * bound keeps a wrong path (/dev/zero, a huge log) from taking all memory. */
#define ASR_CFG_FILE_MAX (16 << 20)

typedef enum {
  ASR__KEY_INT,  /* a decimal number in [min, max] stored in an int */
  ASR__KEY_BOOL, /* true/false, yes/no, on/off, 1/0, stored as 0/1 in an int */
  ASR__KEY_WORD, /* one of words[], stored as its index (the enum value) */
  ASR__KEY_STR,  /* text of at least min and less than cap bytes */
  ASR__KEY_MAP,  /* --map-by: one of words[] or ppr:N:node|numa|package, into map_by and ppr */
} asr__key_kind_t;

typedef struct {
  const char *name; /* the YAML key */
  const char *env;  /* its ASRRUN_* variable, or NULL */
  asr__key_kind_t kind;
  size_t off;               /* offsetof(asr_config_t, field) */
  size_t cap;               /* ASR__KEY_STR: sizeof the field */
  long min, max;            /* ASR__KEY_INT: the range; ASR__KEY_STR: min is the least length */
  const char *const *words; /* ASR__KEY_WORD: accepted words in enum order, NULL-ended */
} asr__cfg_key_t;

/* The scalar keys, and how many there are. */
extern const asr__cfg_key_t asr__cfg_keys[];
extern const size_t asr__cfg_nkeys;

/* Returns the scalar key called name, or NULL. */
const asr__cfg_key_t *asr__config_key(const char *name);

/* Checks val against key and stores it in cfg. what prefixes the message
 * ("--timeout", "ASRRUN_TIMEOUT", "job.yaml:4: timeout"). Returns 0 or
 * ASR_ECONFIG with errbuf saying what was wrong. */
int asr__config_set(asr_config_t *cfg, const asr__cfg_key_t *key, const char *val, const char *what,
                    char *errbuf, size_t errlen);

/* A host list being built by one layer: -H, a hostfile or YAML hosts. It is
 * committed to cfg only when the whole list parsed, so a bad list leaves the
 * lower layers' hosts in place. v is malloc'd (ASR_CFG_MAX_HOSTS entries). */
typedef struct {
  asr_cfg_host_t *v;
  int n;
} asr__hostlist_t;

int asr__hostlist_init(asr__hostlist_t *hl, char *errbuf, size_t errlen);
void asr__hostlist_fini(asr__hostlist_t *hl);

/* Appends one host (slots 0 = not given), refusing duplicates, names that do
 * not fit and more than ASR_CFG_MAX_HOSTS hosts. what prefixes the message. */
int asr__hostlist_add(asr__hostlist_t *hl, const char *name, size_t namelen, int slots, const char *what,
                      char *errbuf, size_t errlen);

/* Appends "name" or "name:slots" (the -H item form). */
int asr__hostlist_add_item(asr__hostlist_t *hl, const char *item, const char *what, char *errbuf,
                           size_t errlen);

/* Parses a slot count (1..ASR_CFG_MAX_SLOTS) into *slots: 0, or ASR_EINVAL
 * (*slots untouched) when s is not one. */
int asr__config_parse_slots(const char *s, int *slots);

/* Parses a -H list ("a:2,b,c:4") into cfg's hosts; what names the flag in
 * messages. */
int asr__config_parse_hostlist_as(asr_config_t *cfg, const char *list, const char *what, char *errbuf,
                                  size_t errlen);

/* Replaces cfg's hosts with hl's and forgets cfg->hostfile. */
void asr__config_set_hosts(asr_config_t *cfg, const asr__hostlist_t *hl);

/* Sets (or replaces, by name) one exported variable. value NULL means "copy
 * it from asrrun's environment at launch" (-x VAR). */
int asr__config_put_env(asr_config_t *cfg, const char *name, size_t namelen, const char *value,
                        const char *what, char *errbuf, size_t errlen);

/* Parses "VAR" or "VAR=value" (the -x form) into asr__config_put_env. */
int asr__config_put_env_spec(asr_config_t *cfg, const char *spec, const char *what, char *errbuf,
                             size_t errlen);

/* Replaces the program and its arguments (strdup'd; cfg owns them). */
int asr__config_set_program(asr_config_t *cfg, const char *program, const char *const *args, int nargs,
                            const char *what, char *errbuf, size_t errlen);

/* The words for the enum settings, for messages and the dry-run header. */
const char *asr__config_map_by_name(asr_map_by_t m);
const char *asr__config_bind_to_name(asr_bind_to_t b);
const char *asr__config_launcher_name(asr_launcher_t l);
/* cfg's --map-by as the user writes it ("node", "ppr:2:numa") into buf. */
void asr__config_map_by_format(const asr_config_t *cfg, char *buf, size_t len);

/* Parses a core list ("0", "2-5", "0,4-7": numbers below
 * ASR_CFG_MAX_CORE): 0, or ASR_EINVAL. With bits (nbits wide), also sets
 * the bit of every core listed, and *max is the largest. */
#define ASR_CFG_MAX_CORE 65536
int asr__config_parse_cores(const char *s, unsigned char *bits, size_t nbits, int *max);

/* What the command line says before any layer runs (config_cli.c; read
 * by config_load.c): walking argv exactly as the parser will, so that
 * "-x -f" or a program argument "-f" are not mistaken for it. Errors stop
 * the scan silently: the parser reports them. */
typedef struct {
  const char *job_file; /* the last -f's value */
  int info_only;        /* --help, --version or --list-env: read no files, check no variables */
} asr__cfg_prescan_t;
void asr__config_prescan(int argc, char **argv, asr__cfg_prescan_t *ps);

#endif /* ASR_LAUNCHER_CONFIG_INT_H */
