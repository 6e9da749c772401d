/*
 * config_int.h -- what config.c, config_yaml.c and map.c share; not part of
 * the interface asrrun uses (that is job_config.h).
 *
 * Every scalar setting is a key of asr__cfg_keys[] (config.c): its YAML key,
 * the field it is stored in, and its row of common/asr_env.h's settings
 * table, named by id. The row alone says the rest: the ASRRUN_* variable,
 * the type (and so how the value is parsed and stored), the range, the
 * words, the default (asr_config_defaults) and the help, so that what
 * `asrrun --list-env`, the man pages and the README say of a setting is what
 * asrrun does, and none of it is written twice. The YAML, env and
 * command-line layers all go through asr__config_set(), so a value means the
 * same thing and fails with the same words in every layer; only the "what"
 * prefix of the message differs ("--bind-to", "ASRRUN_BIND_TO", "job.yaml:3:
 * bind_to").
 */
#ifndef ASR_LAUNCHER_CONFIG_INT_H
#define ASR_LAUNCHER_CONFIG_INT_H

#include <stddef.h>

#include "asr_env.h"
#include "job_config.h"

#define ASR_CFG_MAX_SLOTS 128 /* ranks per host: one per LNC, and an LNC is 0..127 */

/* The largest settings file or hostfile read: real ones are a few kB, and the
 * bound keeps a wrong path (/dev/zero, a huge log) from taking all memory. */
#define ASR_CFG_FILE_MAX (16 << 20)

/* How a key's value is parsed and stored, from its row's type. */
typedef enum {
  ASR__KEY_INVALID = 0, /* a row type no key stores (IPV4, IFSPEC, SECRET): a bug in the table */
  ASR__KEY_INT,         /* INT, PORT, MS, SECONDS, BYTES: a decimal number in the row's range, in an int */
  ASR__KEY_BOOL,        /* BOOL: true/false, yes/no, on/off, 1/0, stored as 0/1 in an int */
  ASR__KEY_WORD,        /* WORD: one of the row's words, stored as its index (the enum value) */
  ASR__KEY_STR,         /* STR, PATH, CMD: text of the row's min..max bytes, max below the field's size */
  ASR__KEY_MAP,         /* --map-by: config.c's words or ppr:N:node|numa|package, into map_by and ppr */
} asr__key_kind_t;

typedef struct {
  const char *name;         /* the YAML key */
  asr_env_id_t row;         /* its ASRRUN_* row; ASR_ENV__COUNT for a key no variable sets */
  const asr_env_row_t *own; /* that key's row, outside the table (name NULL); else NULL */
  size_t off;               /* offsetof(asr_config_t, field) */
  size_t cap;               /* sizeof the field */
} asr__cfg_key_t;

/* The row that describes key: its table row, or its own. Never NULL. */
const asr_env_row_t *asr__config_key_row(const asr__cfg_key_t *key);

/* How key's value is parsed and stored (ASR__KEY_INVALID: a bug in the
 * table, which test_launcher_config catches and asr__config_set refuses). */
asr__key_kind_t asr__config_key_kind(const asr__cfg_key_t *key);

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
