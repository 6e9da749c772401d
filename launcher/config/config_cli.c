/*
 * config_cli.c -- asrrun's command line: the option table (--help prints it),
 * its parser, and the prescan that finds -f and the options that read no
 * files before the other layers run (config_load.c). Every value goes into
 * the model through config.c's key table.
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
  return asr_errf(c->errbuf, c->errlen, ASR_ECONFIG, "%s and %s both given; use one of them", c->host_flag,
                  c->hostfile_flag);
}

static int opt_host(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  c->host_flag = o->name;
  if (c->hostfile_flag) return both_host_sources(c);
  return asr__config_parse_hostlist_as(c->cfg, val, flag, c->errbuf, c->errlen);
}

static int opt_hostfile(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  c->hostfile_flag = o->name;
  if (c->host_flag) return both_host_sources(c);
  char inner[1200];
  int rc = asr_config_read_hostfile(c->cfg, val, inner, sizeof inner);
  return rc ? asr_errf(c->errbuf, c->errlen, ASR_ECONFIG, "%s: %s", flag, inner) : 0;
}

static int opt_rankfile(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  char inner[1200];
  int rc = asr_config_read_rankfile(c->cfg, val, inner, sizeof inner);
  return rc ? asr_errf(c->errbuf, c->errlen, ASR_ECONFIG, "%s: %s", flag, inner) : 0;
}

/* -f is read by asr_config_load's pre-scan, before the environment; here it
 * is only checked and remembered for messages. */
static int opt_job_file(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  if (!*val) return asr_errf(c->errbuf, c->errlen, ASR_ECONFIG, "%s: needs a file name", flag);
  if (strlen(val) >= sizeof c->cfg->job_file)
    return asr_errf(c->errbuf, c->errlen, ASR_ECONFIG, "%s: path '%.40s...' is too long", flag, val);
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

/* --status [JOB] is a command of its own, read before any configuration
 * (asrrun.c: main); it reaches here only after another flag. */
static int opt_status(cli_ctx_t *c, const cli_opt_t *o, const char *flag, const char *val) {
  snprintf(c->errbuf, c->errlen, "--status is a command of its own: asrrun --status [JOB]");
  return ASR_ECONFIG;
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
    /* -N is left out on purpose: mpirun's -N is ranks per node, srun's is nodes */
    {"--npernode", "-ppn", "N", "npernode", NULL, opt_key, "ranks per host (1..128), within its slots"},
    {"--map-by", NULL, "slot|node|core|numa|package|ppr:N:OBJ", "map_by", NULL, opt_key,
     "fill hosts, round robin, spread over objects, N per object"},
    {"--rankfile", NULL, "FILE", NULL, NULL, opt_rankfile,
     "place and bind each rank: 'rank R=HOST slot=CORES'"},
    {"--bind-to", NULL, "auto|none|core|numa|package", "bind_to", NULL, opt_key,
     "bind each rank (auto: a core each while they fit)"},
    {"--cpus-per-rank", NULL, "N", "cpus_per_rank", NULL, opt_key, "cores each rank is bound to (default 1)"},
    {"--oversubscribe", NULL, NULL, "oversubscribe", "1", opt_key,
     "allow more ranks than slots or bound objects (warns)"},
    {"--report-bindings", NULL, NULL, "report_bindings", "1", opt_key, "print each rank's binding"},
    {"-x", NULL, "VAR[=VAL]", NULL, NULL, opt_export, "export VAR to the ranks (repeatable)"},
    {"--tag-output", NULL, NULL, "tag_output", "1", opt_key, "prefix output lines with the rank (default)"},
    {"--no-tag-output", NULL, NULL, "tag_output", "0", opt_key, "leave output lines as the ranks wrote them"},
    {"--timestamp-output", NULL, NULL, "timestamp_output", "1", opt_key,
     "prefix output lines with the time asrrun got them"},
    {"--stdin", NULL, "RANK|all|none", "stdin", NULL, opt_key,
     "which ranks read asrrun's stdin (default: 0)"},
    {"--wdir", NULL, "DIR", "wdir", NULL, opt_key, "the ranks' working directory (default: asrrun's)"},
    {"--output-dir", NULL, "DIR", "output_dir", NULL, opt_key, "also write each rank's output under DIR"},
    {"--trace", NULL, "FILE", "trace", NULL, opt_key,
     "trace the job and write its timeline to FILE (Chrome trace-event JSON)"},
    {"--timeout", NULL, "SECONDS", "timeout", NULL, opt_key, "abort the job after SECONDS (0: never)"},
    {"--bootstrap-port", NULL, "P", "bootstrap_port", NULL, opt_key, "KV server port (0: choose a free one)"},
    {"--provider", NULL, "NAME", "provider", NULL, opt_key,
     "libfabric provider (default: shm or tcp;ofi_rxm)"},
    {"--dry-run", NULL, NULL, NULL, NULL, opt_dry_run, "print the rank map and exit"},
    {"-v", NULL, NULL, NULL, NULL, opt_verbose,
     "tell the map, the provider, daemons and ranks as they start (-vv more)"},
    {"-q", "--quiet", NULL, "quiet", "1", opt_key, "silence asrrun's own notices (not its errors)"},
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
    {"--tree-radix", NULL, "N", "tree_radix", NULL, opt_key,
     "daemons each daemon starts and relays for (0: flat; default 16)"},
    {"--allow-early-exit", NULL, NULL, "allow_early_exit", "1", opt_key,
     "let a rank exit before joining the job or finalizing while others run"},
    {"--on-failure", NULL, "abort|continue|restart", "on_failure", NULL, opt_key,
     "on a rank's death: end the job (default), go on, restart it"},
    {"--max-restarts", NULL, "N", "max_restarts", NULL, opt_key,
     "restarts the whole job may spend under --on-failure restart (default 3)"},
    {"--report-state-on-timeout", NULL, NULL, "report_state_on_timeout", "1", opt_key,
     "print the job's state report and diagnosis before --timeout ends it"},
    {"--get-stack-traces", NULL, NULL, "get_stack_traces", "1", opt_key,
     "state reports carry each running rank's stack trace (eu-stack, else gdb)"},
    {"--metrics-port", NULL, "PORT|ADDR:PORT", "metrics_port", NULL, opt_key,
     "serve the job's metrics for Prometheus (0: a free port; ADDR: 127.0.0.1)"},
    {"--status", NULL, "[=JOB]", NULL, NULL, opt_status,
     "print a running job's state report (JOB: its asrrun's pid) and exit"},
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
      "\nExit status: 0 all ranks exited 0; 1-123 the first failing rank's status (or its abort status;\n"
      "a rank's own 124-127 too, named as the rank's);\n"
      "124 --timeout expired; 125 launch failure, a daemon died, or a rank left early (exited 0 before\n"
      "joining or finalizing while others ran); 127 program not found; 128+S a rank (or asrrun) got\n"
      "signal S; 2 bad command line or configuration.\n"
      "\nSignals: INT, TERM, HUP go to every rank and end the job (again: kill at once); QUIT (Ctrl-\\)\n"
      "prints the job's state report and the job goes on (a second QUIT within 2 s ends the job, 131);\n"
      "USR1, USR2, ALRM, WINCH go to every rank; TSTP stops the ranks (SIGSTOP) and asrrun; CONT\n"
      "resumes them.\n"
      "\nasrrun(1) (man asrrun) describes every flag, setting and exit status.\n",
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
  if (!*opt)
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "unknown option '%.*s' (see asrrun --help)", (int)n, a);
  (*i)++;
  *val = eq ? eq + 1 : NULL;
  if (!(*opt)->metavar) {
    if (eq) return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s takes no value (got '%s')", flag, a);
    return 1;
  }
  if ((*opt)->metavar[0] == '[') return 1; /* an optional value: only ever --flag=VALUE */
  if (!eq) {
    if (*i >= argc)
      return asr_errf(errbuf, errlen, ASR_ECONFIG, "%s needs a value: %s %s", flag, flag, (*opt)->metavar);
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
    return asr_errf(errbuf, errlen, ASR_ECONFIG, "no program given: asrrun [options] PROGRAM [ARGS]");
  return 0;
}

/* Finds -f before the environment and the command line are applied, walking
 * argv exactly as the parser will (so "-x -f" or a program argument "-f" are
 * not mistaken for it). Errors stop the scan silently: the parser reports them. */
void asr__config_prescan(int argc, char **argv, asr__cfg_prescan_t *ps) {
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
