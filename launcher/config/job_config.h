/*
 * job_config.h -- asrrun's job configuration and where each setting comes from.
 *
 * Precedence, lowest first (doc/design.md, "The launcher"):
 *   1. built-in defaults                 asr_config_defaults()
 *   2. the system file                   $(sysconfdir)/asr/asrrun.yaml (ASR_SYSTEM_CONFIG overrides the path)
 *   3. the user's file                   $ASR_USER_CONFIG, else ~/.config/asr/asrrun.yaml
 *   4. the job YAML                      asrrun -f job.yaml
 *   5. the environment                   ASRRUN_* variables (common/asr_env.h lists them)
 *   6. the command line                  asrrun flags
 * Each layer only overrides the keys it sets. Unknown keys and bad values are
 * errors that name the file, the line and the key.
 */
#ifndef ASR_LAUNCHER_JOB_CONFIG_H
#define ASR_LAUNCHER_JOB_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define ASR_CFG_MAX_HOSTS 1024
#define ASR_CFG_MAX_ENV 256
#define ASR_CFG_MAX_ARGS 1024

/* --map-by. Across hosts every policy fills a host before the next, except
 * NODE (round robin); within a host CORE, NUMA and PACKAGE deal the ranks to
 * those objects in turn, and PPR_* give each object cfg->ppr ranks (map.h). */
typedef enum {
  ASR_MAP_SLOT = 0,
  ASR_MAP_NODE,
  ASR_MAP_CORE,
  ASR_MAP_NUMA,
  ASR_MAP_PACKAGE,
  ASR_MAP_PPR_NODE, /* ppr:N:node, the same as --npernode N */
  ASR_MAP_PPR_NUMA,
  ASR_MAP_PPR_PACKAGE
} asr_map_by_t;
/* --bind-to. AUTO, the default, is CORE on a host with a core for every
 * rank (times --cpus-per-rank), else NONE (bind.h). */
typedef enum {
  ASR_BIND_NONE = 0,
  ASR_BIND_CORE,
  ASR_BIND_NUMA,
  ASR_BIND_PACKAGE,
  ASR_BIND_AUTO
} asr_bind_to_t;
typedef enum {
  ASR_LAUNCHER_AUTO = 0,
  ASR_LAUNCHER_LOCAL,
  ASR_LAUNCHER_RSH,
  ASR_LAUNCHER_SLURM
} asr_launcher_t;
/* --on-failure: what a rank's death does (issue 50; ASRRUN_ON_FAILURE's
 * words, in this order) */
typedef enum { ASR_ON_FAILURE_ABORT = 0, ASR_ON_FAILURE_CONTINUE, ASR_ON_FAILURE_RESTART } asr_on_failure_t;

typedef struct {
  char name[128]; /* host name as the user wrote it (or Slurm's node name) */
  int slots;      /* ranks it may take; 0 = not given (use --lnc-per-host or cores) */
} asr_cfg_host_t;

/* One line of a rankfile: "rank R=HOST slot=CORES". */
typedef struct {
  int rank;        /* R, 0..ASR_CFG_MAX_NP-1 */
  int line;        /* its line in the rankfile, for messages */
  char host[128];  /* HOST, a host name as -H takes it */
  char cores[256]; /* CORES: hwloc logical core numbers "N", "N-M", comma-separated (checked) */
} asr_cfg_rank_t;

typedef struct {
  char name[128];
  char value[1024];
  int has_value; /* -x VAR without =val copies VAR from asrrun's environment */
} asr_cfg_env_t;

typedef struct {
  int np; /* -n; 0 = fill every slot */
  asr_cfg_host_t hosts[ASR_CFG_MAX_HOSTS];
  int nhosts;            /* 0 = just this host */
  char hostfile[1024];   /* --hostfile (already read into hosts[]) */
  int lnc_per_host;      /* --lnc-per-host, 1..128; 0 = not given */
  int npernode;          /* --npernode / -ppn, 1..128; 0 = not given */
  asr_map_by_t map_by;   /* --map-by (default slot) */
  int ppr;               /* map_by PPR_*: N of ppr:N:OBJ; else 0 */
  asr_bind_to_t bind_to; /* --bind-to auto|none|core|numa|package (default auto) */
  int cpus_per_rank;     /* --cpus-per-rank: cores a rank is bound to (default 1) */
  int oversubscribe;     /* --oversubscribe: more ranks than slots or bound objects only warns */
  char rankfile[1024];   /* --rankfile (already read into rf[]) */
  asr_cfg_rank_t *rf;    /* its lines in rank order, rf[r].rank == r (malloc'd; NULL: none) */
  int nrf;
  int report_bindings; /* --report-bindings */
  asr_cfg_env_t env[ASR_CFG_MAX_ENV];
  int nenv;                     /* -x VAR[=val], repeatable */
  int tag_output;               /* --tag-output (default 1) / --no-tag-output */
  int timestamp_output;         /* --timestamp-output */
  char output_dir[1024];        /* --output-dir */
  char trace[1024];             /* --trace FILE: the merged trace ("" = no trace) */
  char wdir[1024];              /* --wdir: the ranks' working directory ("" = asrrun's) */
  char stdin_to[16];            /* --stdin RANK|all|none (default "0") */
  int timeout_s;                /* --timeout seconds; 0 = none */
  int bootstrap_port;           /* --bootstrap-port; 0 = choose a free one */
  char provider[64];            /* --provider; "" = default (shm on one host, tcp;ofi_rxm across hosts) */
  int dry_run;                  /* --dry-run */
  int verbose;                  /* -v (repeatable) */
  int quiet;                    /* --quiet: asrrun's own notices silenced (errors are not) */
  asr_launcher_t launcher;      /* --launcher auto|local|rsh|slurm */
  char launch_agent[1024];      /* --launch-agent (default "ssh") */
  char prefix[1024];            /* --prefix: install prefix of asr on remote hosts */
  char if_include[256];         /* --if-include: interface, A.B.C.D/N or address for rank traffic */
  int heartbeat_timeout_s;      /* --heartbeat-timeout: a host silent this long is lost (default 10) */
  int tree_radix;               /* --tree-radix: children per daemon in the tree (tree.h); 0 = flat */
  int allow_early_exit;         /* --allow-early-exit: a rank may leave before joining or finalizing */
  int on_failure;               /* --on-failure: asr_on_failure_t (default abort) */
  int max_restarts;             /* --max-restarts: the job's restart budget under restart (default 3) */
  int report_state_on_timeout;  /* --report-state-on-timeout: the state report before --timeout's end */
  int get_stack_traces;         /* --get-stack-traces: state reports carry the ranks' stacks */
  char metrics_port[64];        /* --metrics-port [ADDR:]PORT: serve metrics there ("" = not) */
  char program[1024];           /* the program to run (argv[0]) */
  char *args[ASR_CFG_MAX_ARGS]; /* its arguments (malloc'd strings) */
  int nargs;
  char job_file[1024]; /* -f, for messages */
} asr_config_t;

/* Parses --metrics-port's [ADDR:]PORT: ADDR an IPv4 address (default
 * 127.0.0.1), PORT 0..65535. 0 with addr (addrlen bytes) and *port, each
 * where not NULL, or ASR_EINVAL. */
int asr_config_parse_listen(const char *val, char *addr, size_t addrlen, int *port);

/* Fills cfg with the built-in defaults: each key's row's default
 * (common/asr_env.h), zero where a row has none. */
void asr_config_defaults(asr_config_t *cfg);

/* Frees the malloc'd members. */
void asr_config_free(asr_config_t *cfg);

/* Applies one YAML file. Returns 0, ASR_ENOENT when the file does not exist
 * (only an error for -f), or another ASR_E* with errbuf naming "file:line:
 * key: what is wrong". */
int asr_config_load_yaml(asr_config_t *cfg, const char *path, char *errbuf, size_t errlen);

/* Applies one YAML document held in buf[0..len) (no NUL needed), the parser
 * behind asr_config_load_yaml: name stands for the file in messages
 * ("NAME:LINE: key: ..."), and a relative hostfile is looked up next to it.
 * Each key the document sets replaces the lower layers' value (on an error,
 * the keys before the bad one may be applied already). Returns 0,
 * ASR_ENOMEM, or ASR_ECONFIG with errbuf saying what is wrong. */
int asr_config_load_yaml_buffer(asr_config_t *cfg, const char *name, const void *buf, size_t len,
                                char *errbuf, size_t errlen);

/* Applies ASRRUN_* environment variables. */
int asr_config_load_env(asr_config_t *cfg, char *errbuf, size_t errlen);

/* Checks asrrun's whole environment against common/asr_env.h's table: every
 * ASR_* and ASRRUN_* variable that is a row must have a good value, and an
 * ASRRUN_* name that is no row is an error (like an unknown flag). Unknown
 * ASR_* names are warned about on stderr, by the first call only. Returns 0
 * or ASR_ECONFIG with errbuf. asr_config_load calls it (unless the command
 * line only asks for --help, --version or --list-env); asrrun also calls it
 * before it starts its early daemon. */
int asr_config_check_env(char *errbuf, size_t errlen);

/* Applies the command line (argv[1..]); the program and its arguments end it.
 * Returns 0, ASR_CONFIG with errbuf, or 1 when --help, --version or
 * --list-env was handled. */
int asr_config_parse_args(asr_config_t *cfg, int argc, char **argv, char *errbuf, size_t errlen);

/* Refuses a failure policy the job's path cannot keep: --on-failure
 * continue or restart with libfabric's shm provider (--provider, -x
 * ASR_PROVIDER or asrrun's own ASR_PROVIDER), whose lock in shared memory a
 * killed rank can leave held, hanging its same-host peer inside the
 * library (README, "State reports"). 0 or ASR_ECONFIG with errbuf. */
int asr_config_check_policy(const asr_config_t *cfg, char *errbuf, size_t errlen);

/* The whole stack: defaults, system, user, -f (found by a pre-scan of argv),
 * env, command line; then asr_config_check_policy. */
int asr_config_load(asr_config_t *cfg, int argc, char **argv, char *errbuf, size_t errlen);

/* Reads a hostfile ("host slots=N", '#' comments, blank lines) into cfg->hosts
 * and its path into cfg->hostfile. Returns 0, or ASR_ECONFIG (ASR_ENOMEM) with
 * errbuf naming the file (and the line); on error cfg is unchanged. */
int asr_config_read_hostfile(asr_config_t *cfg, const char *path, char *errbuf, size_t errlen);

/* The parser behind asr_config_read_hostfile: the hostfile's text is
 * buf[0..len) (no NUL needed) and name stands for its path, in messages and
 * in cfg->hostfile. Returns and fails as asr_config_read_hostfile does. */
int asr_config_read_hostfile_buffer(asr_config_t *cfg, const char *name, const void *buf, size_t len,
                                    char *errbuf, size_t errlen);

/* Reads a rankfile ("rank R=HOST slot=CORES" lines, '#' comments, blank
 * lines) into cfg->rf, replacing what a lower layer read, and its path into
 * cfg->rankfile. The ranks must be 0..N-1, each once. Returns 0, or
 * ASR_ECONFIG (ASR_ENOMEM) with errbuf "FILE:LINE: what is wrong"; on error
 * cfg is unchanged. */
int asr_config_read_rankfile(asr_config_t *cfg, const char *path, char *errbuf, size_t errlen);

/* The parser behind asr_config_read_rankfile, on buf[0..len); name stands
 * for the path. */
int asr_config_read_rankfile_buffer(asr_config_t *cfg, const char *name, const void *buf, size_t len,
                                    char *errbuf, size_t errlen);

/* Parses "-H a:2,b,c:4". */
int asr_config_parse_hostlist(asr_config_t *cfg, const char *list, char *errbuf, size_t errlen);

#endif /* ASR_LAUNCHER_JOB_CONFIG_H */
